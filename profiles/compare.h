// Comparison of two profiles of the same kind of operator tables: how much slower or faster `b`
// measured the points that both have.
//
// Contract:
// - Only tables with rows in both profiles are compared. Rows are joined on their full key
//   (row_key: every column but latency_us, dtypes canonical), which for gemm is (dtype, m, n, k),
//   for attention_decode (dtype, kv_dtype, batch, context_tokens, heads, kv_heads, head_dim) and
//   for attention_prefill (dtype, kv_dtype, batch, q_tokens, prefix_tokens, heads, kv_heads,
//   head_dim, causal).
// - Results are per group: a table split by dtype (gemm, moe), dtype/kv_dtype (attention), op and
//   dtype (collective), op (elementwise) or kind (memcpy, forward); plus one "*" group per table.
// - Ratio = b latency / a latency over matched pairs with a > 0: median, p10, p90 (linear
//   interpolation between order statistics) and geometric mean; NaN when nothing matched.
// - GEMM fallback (CompareOptions::interpolate_gemm_m): for a gemm group with no exact match, an
//   `a` row is matched to b's rows of the same (dtype, n, k) whose m values bracket its m, with
//   b's latency interpolated linearly in (log m, log latency); such matches are counted in
//   `interpolated`.
// - Pure function of the two profiles; groups are sorted by (table order of FORMAT.md, group).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiles/profile_tables.h"

namespace servesim::profiles {

struct CompareOptions {
  bool interpolate_gemm_m = true;
};

struct GroupComparison {
  std::string table;
  std::string group;         // "*" = the whole table
  int64_t matched = 0;       // pairs in the ratio statistics
  int64_t interpolated = 0;  // of which matched through the GEMM m interpolation
  int64_t only_a = 0;        // rows of a without a match in b
  int64_t only_b = 0;        // rows of b without a match in a
  double median_ratio = 0;
  double p10_ratio = 0;
  double p90_ratio = 0;
  double geomean_ratio = 0;
};

struct ProfileComparison {
  std::string a_name;  // profile_subdir() of a (or its dir)
  std::string b_name;
  std::vector<GroupComparison> groups;

  // The group of `table` named `group`, or nullptr.
  const GroupComparison* find(const std::string& table, const std::string& group) const;
};

ProfileComparison compare_profile_tables(const Profile& a, const Profile& b,
                                         const CompareOptions& options = {});

// Text report of a comparison: one line per group.
std::string format_comparison(const ProfileComparison& comparison);

// format_comparison(compare_profile_tables(a, b)).
std::string compare_profiles(const Profile& a, const Profile& b);

}  // namespace servesim::profiles
