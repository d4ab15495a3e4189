#include "reports/miss_breakdown.h"

#include <algorithm>
#include <array>
#include <stdexcept>

#include <fmt/format.h>

#include "reports/summary.h"

namespace servesim::reports {
namespace {

constexpr std::array<MissCause, kNumMissCauses> kCauses = {
    MissCause::kLocalPrefill,     MissCause::kKvPressure, MissCause::kSlowPrefill,
    MissCause::kPrefillInterference, MissCause::kScaleUpLag, MissCause::kGpuBudget,
    MissCause::kUndersizedPool};

// The pools' history: when each role had an instance starting, and the GPUs held over time.
class PoolHistory {
 public:
  PoolHistory(const std::vector<InstanceLife>& instances, std::optional<int64_t> gpu_budget)
      : gpu_budget_(gpu_budget) {
    std::vector<std::pair<int64_t, int64_t>> changes;  // (time, GPUs added or released)
    for (const InstanceLife& life : instances) {
      const auto role = static_cast<size_t>(life.role);
      tp_[role] = life.tp;
      if (life.active_ns > life.started_ns) starting_[role].push_back({life.started_ns, life.active_ns});
      changes.emplace_back(life.started_ns, life.tp);
      if (life.retired_ns >= 0) changes.emplace_back(life.retired_ns, -life.tp);
    }
    std::sort(changes.begin(), changes.end());
    int64_t held = 0;
    for (const auto& [t, delta] : changes) {
      held += delta;
      if (!held_.empty() && held_.back().first == t) {
        held_.back().second = held;
      } else {
        held_.emplace_back(t, held);
      }
    }
  }

  // The cause of a wait of the `role` pool over [from, to]: an instance of it was starting, it
  // could not grow within the budget (at `from`), or neither.
  MissCause pool_cause(sim::InstanceRole role, int64_t from, int64_t to) const {
    for (const auto& [start, active] : starting_[static_cast<size_t>(role)]) {
      if (start <= to && active > from) return MissCause::kScaleUpLag;
    }
    if (gpu_budget_ && gpus_held_at(from) + tp_[static_cast<size_t>(role)] > *gpu_budget_) {
      return MissCause::kGpuBudget;
    }
    return MissCause::kUndersizedPool;
  }

 private:
  int64_t gpus_held_at(int64_t t) const {
    const auto it = std::upper_bound(held_.begin(), held_.end(), std::pair<int64_t, int64_t>{t, INT64_MAX});
    return it == held_.begin() ? 0 : std::prev(it)->second;
  }

  std::optional<int64_t> gpu_budget_;
  std::array<int, 3> tp_ = {1, 1, 1};  // by InstanceRole
  std::array<std::vector<std::pair<int64_t, int64_t>>, 3> starting_;  // [started, active) by role
  std::vector<std::pair<int64_t, int64_t>> held_;  // (time, GPUs held from then on)
};

const InstanceLife& life_of(const std::vector<InstanceLife>& instances, int32_t id,
                            RequestId request) {
  if (id < 0 || static_cast<size_t>(id) >= instances.size()) {
    throw std::invalid_argument(fmt::format(
        "explain_misses: request {} names instance {}, not one of the {} instances", request, id,
        instances.size()));
  }
  return instances[static_cast<size_t>(id)];
}

MissCause ttft_cause(const sim::RequestRecord& r, const std::vector<InstanceLife>& instances,
                     const PoolHistory& pools, int64_t ttft_slo_ns) {
  const int32_t prefill_id = r.prefill_instance_id >= 0 ? r.prefill_instance_id : r.instance_id;
  const InstanceLife& prefill = life_of(instances, prefill_id, r.request_id);
  if (prefill.role == sim::InstanceRole::kDecode) return MissCause::kLocalPrefill;
  if (r.preemptions > 0) return MissCause::kKvPressure;
  if (r.first_token_ns - r.first_scheduled_ns > ttft_slo_ns) return MissCause::kSlowPrefill;
  return pools.pool_cause(prefill.role, r.arrival_ns, r.first_scheduled_ns);
}

// Time a request's decode spent waiting for KV: its hand-off (first token .. kv_arrived_ns) and
// the recomputation after preemptions that took its decode steps.
int64_t kv_time(const sim::RequestRecord& r) {
  const int64_t handoff = r.kv_arrived_ns >= 0 ? r.kv_arrived_ns - r.first_token_ns : 0;
  return handoff + r.recompute_ns;
}

// The pool rules over the request's decode span.
MissCause decode_pool_cause(const sim::RequestRecord& r,
                            const std::vector<InstanceLife>& instances, const PoolHistory& pools) {
  const InstanceLife& decode = life_of(instances, r.instance_id, r.request_id);
  const int64_t from = r.kv_arrived_ns >= 0 ? r.kv_arrived_ns : r.first_token_ns;
  return pools.pool_cause(decode.role, from, r.done_ns);
}

MissCause tpot_cause(const sim::RequestRecord& r, const std::vector<InstanceLife>& instances,
                     const PoolHistory& pools, double tpot_slo_ns) {
  if (r.preemptions > 0) return MissCause::kKvPressure;
  const double excess = static_cast<double>(r.done_ns - r.first_token_ns) -
                        tpot_slo_ns * static_cast<double>(r.output_tokens - 1);
  const int64_t kv = kv_time(r);
  if (static_cast<double>(kv + r.interference_ns) >= excess) {
    return kv >= r.interference_ns ? MissCause::kKvPressure : MissCause::kPrefillInterference;
  }
  return decode_pool_cause(r, instances, pools);
}

MissCause tbt_cause(const sim::RequestRecord& r, const std::vector<InstanceLife>& instances,
                    const PoolHistory& pools) {
  if (r.preemptions > 0) return MissCause::kKvPressure;
  const int64_t kv = kv_time(r);
  if (kv + r.interference_ns > 0) {
    return kv >= r.interference_ns ? MissCause::kKvPressure : MissCause::kPrefillInterference;
  }
  return decode_pool_cause(r, instances, pools);
}

}  // namespace

const char* objective_name(Objective objective) {
  switch (objective) {
    case Objective::kTtft:
      return "ttft";
    case Objective::kTpot:
      return "tpot";
    case Objective::kTbt:
      return "tbt";
  }
  return "?";
}

const char* miss_cause_name(MissCause cause) {
  switch (cause) {
    case MissCause::kLocalPrefill:
      return "local_prefill";
    case MissCause::kKvPressure:
      return "kv_pressure";
    case MissCause::kSlowPrefill:
      return "slow_prefill";
    case MissCause::kPrefillInterference:
      return "prefill_interference";
    case MissCause::kScaleUpLag:
      return "scale_up_lag";
    case MissCause::kGpuBudget:
      return "gpu_budget";
    case MissCause::kUndersizedPool:
      return "undersized_pool";
  }
  return "?";
}

const char* miss_cause_meaning(MissCause cause) {
  switch (cause) {
    case MissCause::kLocalPrefill:
      return "prefilled on a decode instance, behind its decodes";
    case MissCause::kKvPressure:
      return "preempted, or its KV hand-off waited for decode KV room";
    case MissCause::kSlowPrefill:
      return "its prefill alone exceeds the TTFT objective";
    case MissCause::kPrefillInterference:
      return "prompt tokens computed with its decode steps slowed them";
    case MissCause::kScaleUpLag:
      return "its pool had an instance still starting";
    case MissCause::kGpuBudget:
      return "its pool could not grow within the GPU budget";
    case MissCause::kUndersizedPool:
      return "its pool was smaller than its load (sizing or forecast)";
  }
  return "?";
}

MissBreakdown explain_misses(const std::vector<sim::RequestRecord>& requests,
                             const std::vector<InstanceLife>& instances, const sim::SloSpec& slo,
                             std::optional<int64_t> gpu_budget) {
  MissBreakdown b;
  b.tbt_objective = slo.tbt_p99.has_value();
  const PoolHistory pools(instances, gpu_budget);
  for (const sim::RequestRecord& r : requests) {
    if (r.warmup) continue;
    ++b.requests;
    bool missed = false;
    const auto count = [&](Objective objective, MissCause c, int64_t* total, int64_t* by_cause) {
      ++*total;
      ++by_cause[static_cast<int>(c)];
      b.misses.push_back({r.request_id, objective, c});
      missed = true;
    };
    if (slo.ttft && r.ttft_ns() > slo.ttft->count()) {
      count(Objective::kTtft, ttft_cause(r, instances, pools, slo.ttft->count()), &b.ttft_missed,
            b.ttft_by_cause);
    }
    const double tpot_slo_ns = slo.tpot ? static_cast<double>(slo.tpot->count()) : 0.0;
    if (slo.tpot && r.output_tokens > 1 && r.tpot_ns() > tpot_slo_ns) {
      count(Objective::kTpot, tpot_cause(r, instances, pools, tpot_slo_ns), &b.tpot_missed,
            b.tpot_by_cause);
    }
    if (slo.tbt_p99 && !objectives_met(r, slo).tbt) {
      count(Objective::kTbt, tbt_cause(r, instances, pools), &b.tbt_missed, b.tbt_by_cause);
    }
    b.missed += missed;
  }
  return b;
}

std::string format_miss_breakdown(const MissBreakdown& b) {
  const auto share = [](int64_t n, int64_t of) {
    return of > 0 ? 100.0 * static_cast<double>(n) / static_cast<double>(of) : 0.0;
  };
  std::string out = fmt::format(
      "SLO misses by cause ({} of {} requests missed: {} TTFT, {} TPOT{})\n", b.missed, b.requests,
      b.ttft_missed, b.tpot_missed,
      b.tbt_objective ? fmt::format(", {} TBT p99", b.tbt_missed) : std::string());
  out += fmt::format("  {:<21} {:>14} {:>14}{}  {}\n", "cause", "TTFT misses", "TPOT misses",
                     b.tbt_objective ? fmt::format(" {:>14}", "TBT misses") : std::string(),
                     "meaning");
  const auto cell = [&](int64_t n, int64_t of) { return fmt::format("{:>6} {:>6.1f} %", n, share(n, of)); };
  for (const MissCause c : kCauses) {
    const int i = static_cast<int>(c);
    out += fmt::format("  {:<21} {} {}{}  {}\n", miss_cause_name(c),
                       cell(b.ttft_by_cause[i], b.ttft_missed), cell(b.tpot_by_cause[i], b.tpot_missed),
                       b.tbt_objective ? " " + cell(b.tbt_by_cause[i], b.tbt_missed) : std::string(),
                       miss_cause_meaning(c));
  }
  return out;
}

}  // namespace servesim::reports
