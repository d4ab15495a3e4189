#include "profiles/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace servesim::profiles {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string canon(const std::string& dtype) {
  std::string c = canonical_dtype(dtype);
  return c.empty() ? dtype : c;
}

GemmRow canonical(GemmRow r) {
  r.dtype = canon(r.dtype);
  return r;
}
AttentionPrefillRow canonical(AttentionPrefillRow r) {
  r.dtype = canon(r.dtype);
  r.kv_dtype = r.kv_dtype.empty() ? r.dtype : canon(r.kv_dtype);
  return r;
}
AttentionDecodeRow canonical(AttentionDecodeRow r) {
  r.dtype = canon(r.dtype);
  r.kv_dtype = r.kv_dtype.empty() ? r.dtype : canon(r.kv_dtype);
  return r;
}
CollectiveRow canonical(CollectiveRow r) {
  r.dtype = canon(r.dtype);
  return r;
}
MoeRow canonical(MoeRow r) {
  r.dtype = canon(r.dtype);
  return r;
}
ElementwiseRow canonical(ElementwiseRow r) { return r; }
MemcpyRow canonical(MemcpyRow r) { return r; }
ForwardRow canonical(ForwardRow r) { return r; }

std::string pair_group(const std::string& dtype, const std::string& kv_dtype) {
  return dtype == kv_dtype ? dtype : dtype + "/" + kv_dtype;
}

std::string group_of(const GemmRow& r) { return r.dtype; }
std::string group_of(const AttentionPrefillRow& r) { return pair_group(r.dtype, r.kv_dtype); }
std::string group_of(const AttentionDecodeRow& r) { return pair_group(r.dtype, r.kv_dtype); }
std::string group_of(const CollectiveRow& r) { return r.op + "/" + r.dtype; }
std::string group_of(const MoeRow& r) { return r.dtype; }
std::string group_of(const ElementwiseRow& r) { return r.op; }
std::string group_of(const MemcpyRow& r) { return r.kind; }
std::string group_of(const ForwardRow& r) { return r.kind + (r.graph ? "/graph" : "/eager"); }

struct Accumulator {
  std::vector<double> ratios;
  int64_t interpolated = 0;
  int64_t only_a = 0;
  int64_t only_b = 0;
  std::vector<GemmRow> unmatched_gemm;  // a rows kept for the m interpolation
};

double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) {
    return kNaN;
  }
  double pos = q * static_cast<double>(sorted.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, sorted.size() - 1);
  double frac = pos - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

GroupComparison summarize(const std::string& table, const std::string& group,
                          const Accumulator& acc) {
  GroupComparison g;
  g.table = table;
  g.group = group;
  g.matched = static_cast<int64_t>(acc.ratios.size());
  g.interpolated = acc.interpolated;
  g.only_a = acc.only_a;
  g.only_b = acc.only_b;
  std::vector<double> sorted = acc.ratios;
  std::sort(sorted.begin(), sorted.end());
  g.median_ratio = quantile(sorted, 0.5);
  g.p10_ratio = quantile(sorted, 0.1);
  g.p90_ratio = quantile(sorted, 0.9);
  if (sorted.empty()) {
    g.geomean_ratio = kNaN;
  } else {
    double log_sum = 0;
    for (double r : sorted) {
      log_sum += std::log(r);
    }
    g.geomean_ratio = std::exp(log_sum / static_cast<double>(sorted.size()));
  }
  return g;
}

void add_ratio(Accumulator* acc, double a_us, double b_us) {
  if (a_us > 0 && b_us > 0) {
    acc->ratios.push_back(b_us / a_us);
  }
}

// For a gemm group without exact matches: matches each unmatched a row to b's rows of the same
// (dtype, n, k) whose m bracket it, interpolating log latency linearly in log m.
void interpolate_gemm(const std::vector<GemmRow>& b_rows, const std::string& group,
                      Accumulator* acc) {
  std::map<std::string, std::vector<std::pair<int64_t, double>>> by_nk;
  for (const GemmRow& r : b_rows) {
    if (r.dtype == group && r.latency_us > 0) {
      by_nk[fmt::format("{},{}", r.n, r.k)].emplace_back(r.m, r.latency_us);
    }
  }
  for (auto& [key, points] : by_nk) {
    std::sort(points.begin(), points.end());
  }
  for (const GemmRow& a : acc->unmatched_gemm) {
    auto it = by_nk.find(fmt::format("{},{}", a.n, a.k));
    if (it == by_nk.end()) {
      continue;
    }
    const auto& points = it->second;
    auto upper = std::upper_bound(points.begin(), points.end(), std::make_pair(a.m, 0.0),
                                  [](const auto& x, const auto& y) { return x.first < y.first; });
    if (upper == points.begin() || upper == points.end()) {
      continue;  // outside b's m range
    }
    auto lower = std::prev(upper);
    double x0 = std::log(static_cast<double>(lower->first));
    double x1 = std::log(static_cast<double>(upper->first));
    double t = (std::log(static_cast<double>(a.m)) - x0) / (x1 - x0);
    double b_us = std::exp(std::log(lower->second) * (1 - t) + std::log(upper->second) * t);
    size_t before = acc->ratios.size();
    add_ratio(acc, a.latency_us, b_us);
    if (acc->ratios.size() > before) {
      ++acc->interpolated;
      --acc->only_a;
    }
  }
}

template <typename Row>
void compare_table(const std::string& table, const std::vector<Row>& a_in,
                   const std::vector<Row>& b_in, const CompareOptions& options,
                   std::vector<GroupComparison>* out) {
  if (a_in.empty() || b_in.empty()) {
    return;
  }
  std::vector<Row> a, b;
  a.reserve(a_in.size());
  b.reserve(b_in.size());
  for (const Row& r : a_in) {
    a.push_back(canonical(r));
  }
  for (const Row& r : b_in) {
    b.push_back(canonical(r));
  }
  std::unordered_map<std::string, double> b_latency;
  for (const Row& r : b) {
    b_latency.emplace(row_key(r), r.latency_us);
  }
  std::unordered_set<std::string> matched_keys;
  std::map<std::string, Accumulator> groups;
  for (const Row& r : a) {
    Accumulator& acc = groups[group_of(r)];
    std::string key = row_key(r);
    auto it = b_latency.find(key);
    if (it == b_latency.end()) {
      ++acc.only_a;
      if constexpr (std::is_same_v<Row, GemmRow>) {
        acc.unmatched_gemm.push_back(r);
      }
      continue;
    }
    matched_keys.insert(key);
    add_ratio(&acc, r.latency_us, it->second);
  }
  for (const Row& r : b) {
    Accumulator& acc = groups[group_of(r)];
    if (matched_keys.count(row_key(r)) == 0) {
      ++acc.only_b;
    }
  }
  if constexpr (std::is_same_v<Row, GemmRow>) {
    if (options.interpolate_gemm_m) {
      for (auto& [group, acc] : groups) {
        if (acc.ratios.empty() && !acc.unmatched_gemm.empty()) {
          interpolate_gemm(b, group, &acc);
        }
      }
    }
  }
  Accumulator all;
  for (const auto& [group, acc] : groups) {
    all.ratios.insert(all.ratios.end(), acc.ratios.begin(), acc.ratios.end());
    all.interpolated += acc.interpolated;
    all.only_a += acc.only_a;
    all.only_b += acc.only_b;
  }
  out->push_back(summarize(table, "*", all));
  for (const auto& [group, acc] : groups) {
    out->push_back(summarize(table, group, acc));
  }
}

std::string name_of(const Profile& p) {
  if (!p.meta.gpu.empty()) {
    return profile_subdir(p);
  }
  return p.dir.empty() ? "(in memory)" : p.dir;
}

std::string ratio_text(double value) {
  return std::isnan(value) ? std::string("-") : fmt::format("{:.3f}", value);
}

}  // namespace

const GroupComparison* ProfileComparison::find(const std::string& table,
                                               const std::string& group) const {
  for (const GroupComparison& g : groups) {
    if (g.table == table && g.group == group) {
      return &g;
    }
  }
  return nullptr;
}

ProfileComparison compare_profile_tables(const Profile& a, const Profile& b,
                                         const CompareOptions& options) {
  ProfileComparison c;
  c.a_name = name_of(a);
  c.b_name = name_of(b);
  compare_table("gemm", a.gemm, b.gemm, options, &c.groups);
  compare_table("attention_prefill", a.attention_prefill, b.attention_prefill, options, &c.groups);
  compare_table("attention_decode", a.attention_decode, b.attention_decode, options, &c.groups);
  compare_table("collective", a.collective, b.collective, options, &c.groups);
  compare_table("moe", a.moe, b.moe, options, &c.groups);
  compare_table("elementwise", a.elementwise, b.elementwise, options, &c.groups);
  compare_table("memcpy", a.memcpy, b.memcpy, options, &c.groups);
  compare_table("forward", a.forward, b.forward, options, &c.groups);
  return c;
}

std::string format_comparison(const ProfileComparison& c) {
  std::string out = fmt::format(
      "a: {}\nb: {}\nratio = b latency / a latency over rows with equal "
      "keys\n",
      c.a_name, c.b_name);
  if (c.groups.empty()) {
    out += "no table has rows in both profiles\n";
    return out;
  }
  out += fmt::format("{:<18} {:<22} {:>8} {:>7} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}\n", "table",
                     "group", "matched", "interp", "only_a", "only_b", "median", "p10", "p90",
                     "geomean");
  for (const GroupComparison& g : c.groups) {
    out += fmt::format("{:<18} {:<22} {:>8} {:>7} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}\n", g.table,
                       g.group, g.matched, g.interpolated, g.only_a, g.only_b,
                       ratio_text(g.median_ratio), ratio_text(g.p10_ratio), ratio_text(g.p90_ratio),
                       ratio_text(g.geomean_ratio));
  }
  return out;
}

std::string compare_profiles(const Profile& a, const Profile& b) {
  return format_comparison(compare_profile_tables(a, b));
}

}  // namespace servesim::profiles
