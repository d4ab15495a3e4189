// Why requests missed their SLO: each finished request that misses its TTFT or TPOT objective is
// traced to one cause, from its own record and the life of the cluster's instances
// (`servesim run --explain-misses`, the request_miss table).
//
// Contract (a pure function of its inputs, deterministic). Benchmark warm-up requests are left
// out, like every summary. A TTFT miss (ttft_ns() > slo.ttft) is traced, first rule that applies:
//   local_prefill     prefilled on a decode instance (it queued behind that instance's decodes);
//   kv_pressure       preempted (its KV was taken back) before or during its prefill;
//   slow_prefill      its prefill alone (first token - first scheduled) exceeds the objective;
//   scale_up_lag      it waited while an instance of the pool that prefilled it was starting;
//   gpu_budget        it waited while that pool could not grow: the GPUs held plus one more
//                     instance of the pool exceed the GPU budget;
//   undersized_pool   otherwise: the pool was smaller than its load (for an elastic policy, its
//                     sizing rule or forecast set the target too low).
// A TPOT miss (tpot_ns() > slo.tpot) is traced on its excess time, decode time - tpot x
// (output - 1):
//   kv_pressure           preempted; or, of its KV time (its hand-off, first token ..
//                         kv_arrived_ns: waiting for KV room on a decode instance, then the wire;
//                         plus the time other requests' recomputation after a preemption took in
//                         its decode steps, RequestRecord::recompute_ns) and its interference time
//                         below, which together cover the excess, the KV time is the larger;
//   prefill_interference  the same with the interference time the larger: the time prompt tokens
//                         computed with its decode steps took (RequestRecord::interference_ns);
//   then, for the pool that decoded it over its decode span: scale_up_lag, gpu_budget or
//   undersized_pool as above.
// A TBT miss (more than 1 % of its token gaps above slo.tbt_p99, the rule of objectives_met()) is
// traced on the stalls that make long gaps: kv_pressure when preempted; else, when its KV time or
// its interference time (both as for TPOT) is nonzero, kv_pressure or prefill_interference by the
// larger; else the pool rules over its decode span (its decode steps alone were too slow).
// A request that misses several objectives is counted under each (one cause per objective).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/records.h"
#include "sim/view.h"

namespace servesim::reports {

// The life of one instance, as the engine reports it (sim::InstanceStats).
struct InstanceLife {
  sim::InstanceRole role = sim::InstanceRole::kUnified;
  int tp = 1;
  int64_t started_ns = 0;    // GPUs held from here
  int64_t active_ns = 0;     // takes work from here
  int64_t draining_ns = -1;  // takes no new work from here; -1: never
  int64_t retired_ns = -1;   // GPUs released here; -1: alive at the end
};

enum class MissCause {
  kLocalPrefill,
  kKvPressure,
  kSlowPrefill,
  kPrefillInterference,
  kScaleUpLag,
  kGpuBudget,
  kUndersizedPool,
};
inline constexpr int kNumMissCauses = 7;
const char* miss_cause_name(MissCause cause);
// One line saying what the cause means, for the printed breakdown.
const char* miss_cause_meaning(MissCause cause);

enum class Objective { kTtft, kTpot, kTbt };
const char* objective_name(Objective objective);  // "ttft", "tpot", "tbt"

// One missed objective of one request.
struct RequestMiss {
  RequestId request_id = 0;
  Objective objective = Objective::kTtft;
  MissCause cause = MissCause::kUndersizedPool;
};

struct MissBreakdown {
  int64_t requests = 0;     // finished, not warm-up
  int64_t ttft_missed = 0;  // requests over the TTFT objective
  int64_t tpot_missed = 0;
  int64_t tbt_missed = 0;   // requests over the TBT p99 objective
  int64_t missed = 0;       // requests over any
  int64_t ttft_by_cause[kNumMissCauses] = {};
  int64_t tpot_by_cause[kNumMissCauses] = {};
  int64_t tbt_by_cause[kNumMissCauses] = {};
  bool tbt_objective = false;  // the SLO has a TBT p99 objective (format shows its column)
  std::vector<RequestMiss> misses;  // in request order; per request TTFT, TPOT, TBT
};

// REQUIRES: every record's instance ids index `instances`. `gpu_budget`: the elastic policy's
// budget (nullopt: no budget, gpu_budget never applies).
MissBreakdown explain_misses(const std::vector<sim::RequestRecord>& requests,
                             const std::vector<InstanceLife>& instances, const sim::SloSpec& slo,
                             std::optional<int64_t> gpu_budget);

// The printed table: one row per cause with TTFT and TPOT misses and their shares.
std::string format_miss_breakdown(const MissBreakdown& b);

}  // namespace servesim::reports
