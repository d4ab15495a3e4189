// An instance's iteration-latency table keyed by batch composition, as DynaServe's schedulers use
// it (policies.md §3.5): T(plen, ctx, dnum) = the time of one iteration that computes `plen`
// prefill tokens alongside `dnum` decodes whose mean context is `ctx`. A fourth key, the cached
// prefix the prefill chunk attends to, keeps chunks of long prompts (and β micro-requests that
// continue a prompt over α's KV) from being predicted as cheap as fresh prompts.
//
// Contract:
// - Keys are bucketed: plen, prefix and ctx round up to their bucket steps, dnum is exact. A
//   bucket's first value comes from the instance's offline profile (its cost model evaluated at
//   the bucket's upper corner: one prefill chunk of plen tokens over `prefix` cached tokens, and
//   dnum decodes at context ctx); each measured iteration then refines its bucket by an exponential
//   moving average (weight `ema` on the newest measurement; 1 = overwrite).
// - Deterministic: the same calls in the same order give the same answers.
// - Not thread-safe (one simulation owns it).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <unordered_map>

#include "models/cost/cost_model.h"
#include "core/time.h"

namespace servesim::policies {

struct LatencyTableParams {
  int64_t plen_step = 64;   // prefill-token bucket width
  int64_t ctx_step = 128;   // decode-context bucket width
  int64_t prefix_step = 1024;  // cached-prefix bucket width of the prefill chunk
  double ema = 0.5;         // weight of a new measurement, in (0, 1]
};

class LatencyTable {
 public:
  // REQUIRES: cost_model non-null; steps > 0; 0 < ema <= 1.
  LatencyTable(std::shared_ptr<const models::IterationCostModel> cost_model,
               LatencyTableParams params = {});

  // Predicted iteration time. REQUIRES: plen, ctx, dnum, prefix >= 0 and plen + dnum > 0.
  Duration predict(int64_t plen, int64_t ctx, int64_t dnum, int64_t prefix = 0);

  // Refines the bucket of (plen, ctx, dnum, prefix) with a measured iteration time.
  void observe(int64_t plen, int64_t ctx, int64_t dnum, int64_t prefix, Duration measured);

  // The largest prefill-token count p, a multiple of plen_step and at most `cap`, such that
  // predict(p, ctx, dnum, prefix) <= target; 0 if none. With dnum == 0 nothing waits on the
  // iteration's latency, so the whole cap is granted.
  int64_t prefill_budget(Duration target, int64_t ctx, int64_t dnum, int64_t cap,
                         int64_t prefix = 0);

  int64_t observations() const { return observations_; }
  const LatencyTableParams& params() const { return params_; }

 private:
  struct Key {
    int64_t plen_bucket, ctx_bucket, dnum, prefix_bucket;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  Key key_of(int64_t plen, int64_t ctx, int64_t dnum, int64_t prefix) const;
  double& entry(const Key& key);

  std::shared_ptr<const models::IterationCostModel> cost_model_;
  LatencyTableParams params_;
  std::unordered_map<Key, double, KeyHash> ns_;  // bucket -> iteration time, ns
  struct RecentEntry {
    Key key{};
    double* value = nullptr;  // into ns_
  };
  std::array<RecentEntry, 1024> recent_{};  // entry()'s direct-mapped cache
  // A budget depends on one line of buckets: those sharing (ctx, dnum, prefix). observe() moves
  // its line's generation on; a cached prefill_budget() answer (keyed by the line, with cap in
  // plen_bucket) holds while its line's generation and its target are unchanged.
  static Key line_of(Key k) {
    k.plen_bucket = 0;
    return k;
  }
  struct Budget {
    int64_t target_ns, tokens;
    uint64_t generation;
    const uint64_t* line_generation;  // into line_generation_ (its elements never move)
  };
  std::unordered_map<Key, uint64_t, KeyHash> line_generation_;
  std::unordered_map<Key, Budget, KeyHash> budgets_;
  struct RecentBudget {
    Key key{};
    Budget* budget = nullptr;  // into budgets_
  };
  std::array<RecentBudget, 256> recent_budgets_{};  // prefill_budget()'s direct-mapped cache
  models::BatchShape scratch_;
  int64_t observations_ = 0;
};

}  // namespace servesim::policies
