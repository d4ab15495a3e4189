// Policy `dopd` (policies.md §4, DOPD) and the Dynamo planners it is compared with, `dyn-load`
// and `dyn-sla` (§4.7). All three are elastic prefill/decode disaggregation: the layout of
// `disagg` (its parameters set the initial pools) plus a ClusterController that resizes the pools
// every adjustment interval, within a GPU budget.
//
// dopd: resource monitor -> ARIMA forecasts of request count, mean ISL and OSL (+ the decode
//   correction factor) -> optimal ratio and instance counts (eq. 11-14, pd_ratio.h) -> per-interval
//   change limit and GPU budget; burst bypass every control tick on prefill queue depth and decode
//   KV utilisation. Prefill instances batch length-aware (length_aware_batcher.h); prompts up to
//   max_local_prefill_length (or any prompt while the prefill queue is full) are prefilled on the
//   least-loaded decode instance without a KV transfer, by default within the prompt tokens that
//   keep each decode iteration within the TPOT SLO (decode_slo_aware); prefilled requests go to
//   the least-loaded decode instance. With elastic=false the pools stay as configured (static
//   DOPD).
// dyn-load: Dynamo's load-based planner: queue and KV-utilisation thresholds, one instance per
//   role per interval.
// dyn-sla: Dynamo's SLA-based planner: ARIMA forecasts and correction factors sized against the
//   profiled prefill and decode throughput within the TTFT / ITL targets.
#pragma once

#include <memory>
#include <vector>

#include "policies/dopd/dopd_pool.h"
#include "sim/policy_api.h"

namespace servesim::policies::dopd {

struct DynLoadParams {
  int64_t adjust_every = 18;        // control ticks per adjustment interval
  ScalingLimits limits;
  double prefill_queue_scale_up = 5.0;
  double prefill_queue_scale_down = 0.2;
  double decode_kv_scale_up = 0.9;
  double decode_kv_scale_down = 0.5;
  double waiting_kv_inflation = 0.02;  // added to the KV utilisation per waiting decode request
  int64_t decode_grace_intervals = 3;
};
std::unique_ptr<sim::ClusterController> make_dyn_load_controller(const DynLoadParams& params);

struct DynSlaParams {
  int64_t adjust_every = 18;
  Duration interval = std::chrono::seconds(180);  // adjust_every control ticks
  ScalingLimits limits;
  double initial_isl = 3000, initial_osl = 150;
  ForecastSource forecast = ForecastSource::kArima;
  std::optional<Duration> itl_target;    // default: the SLO's TPOT, else 50 ms
  size_t arima_window = 50;
};
std::unique_ptr<sim::ClusterController> make_dyn_sla_controller(
    const DynSlaParams& params, const sim::InstanceContext& prefill, const sim::InstanceContext& decode);

// Routing: a prompt longer than max_local_prefill_length, while fewer than max_prefill_queue_size
// prefills are queued, goes to the prefill instance with the least prefill work ahead (queued
// prompt blocks plus its own blocks that instance's prefix cache lacks); any other to the decode
// instance with the lowest KV load, which prefills it locally.
std::unique_ptr<sim::RoutingPolicy> make_dopd_router(int64_t max_local_prefill_length,
                                                     int64_t max_prefill_queue_size);

void register_dopd();

}  // namespace servesim::policies::dopd
