// What DOPD and the Dynamo planners observe of an elastic cluster, and how they turn target
// instance counts into scaling actions. Policy logic only: a pure function of the ControlView.
#pragma once

#include <cstdint>
#include <vector>

#include "policies/dopd/arima_forecaster.h"
#include "sim/policy_api.h"

namespace servesim::policies::dopd {

// Instantaneous state of the prefill and decode pools.
struct PoolState {
  int64_t active_prefill = 0, starting_prefill = 0, draining_prefill = 0;
  int64_t active_decode = 0, starting_decode = 0, draining_decode = 0;
  int tp_prefill = 1, tp_decode = 1;  // of the last instance seen of each role
  int64_t prefill_queue = 0;    // requests waiting on prefill instances (not yet prefilling)
  double decode_kv_utilization = 0;  // mean used / total KV blocks over active decode instances
  int64_t decode_waiting = 0;   // waiting on decode instances + hand-offs waiting for room
  int64_t draining_gpus = 0;

  // Instances counted towards a target: active and starting ones (draining ones are leaving).
  int64_t prefill() const { return active_prefill + starting_prefill; }
  int64_t decode() const { return active_decode + starting_decode; }
  bool scaling_in_flight() const { return starting_prefill + starting_decode > 0; }
};
PoolState pool_state(const sim::ControlView& view);

// Means over the requests observed in one adjustment window.
struct WindowStats {
  double seconds = 0;
  int64_t arrivals = 0;
  double mean_isl = 0;       // of the arrivals
  int64_t finished = 0;
  double mean_osl = 0;       // of the finished requests
  double mean_ttft_s = 0;
  double mean_itl_s = 0;     // mean TPOT of finished requests with >= 2 tokens
  double mean_e2e_s = 0;
  // Arrivals longer than the monitor's local-prefill threshold (those the router sends to the
  // prefill pool) and their mean prompt length; all arrivals when the threshold is 0.
  int64_t prefill_pool_arrivals = 0;
  double prefill_pool_mean_isl = 0;
};

// Resource monitor: accumulates every tick's observations until take() closes the window.
class ResourceMonitor {
 public:
  // Prompts of at most `local_prefill_max` tokens are prefilled on decode instances (0: none).
  explicit ResourceMonitor(int64_t local_prefill_max = 0) : local_prefill_max_(local_prefill_max) {}
  void observe(const sim::ControlView& view);
  WindowStats take(SimTime now);
  SimTime last_arrival() const { return last_arrival_; }
  bool any_arrival() const { return any_arrival_; }
  // Arrivals per second since the window opened (0 before any time has passed).
  double arrival_rate(SimTime now) const;

 private:
  int64_t local_prefill_max_;
  SimTime window_start_{};
  int64_t arrivals_ = 0, finished_ = 0, itl_count_ = 0, prefill_pool_arrivals_ = 0;
  double isl_sum_ = 0, osl_sum_ = 0, ttft_sum_ = 0, itl_sum_ = 0, e2e_sum_ = 0,
         prefill_pool_isl_sum_ = 0;
  SimTime last_arrival_{};
  bool any_arrival_ = false;
};

// Where a forecasting planner's next-window load comes from: one ARIMA model each for the request
// count and mean input / output lengths of the observed windows (policies.md §4.3, as DOPD and
// Dynamo's SLA planner use them), or the truth (`forecast=oracle`): the arrivals of an open-loop
// workload, known before the run. No deployed planner has the truth; it bounds what a perfect
// forecaster would buy a planner whose sizing rule stays the same.
enum class ForecastSource { kArima, kOracle };

struct LoadForecast {
  double requests = 0;  // >= 0
  double isl = 1;       // >= 1 tokens
  double osl = 1;       // >= 1 tokens
};

class LoadForecaster {
 public:
  // Until a length has been observed (ARIMA) or an arrival lies in a window (oracle), its
  // forecast is the initial value.
  LoadForecaster(size_t window, double initial_isl, double initial_osl,
                 ForecastSource source = ForecastSource::kArima)
      : source_(source),
        requests_({window}),
        isl_({window}),
        osl_({window}),
        last_{0, initial_isl, initial_osl} {}
  // The controller's preview (sim::ClusterController::preview). Oracle: keeps the arrival times
  // and lengths of `open_loop`; throws std::invalid_argument when it is nullptr (a closed loop's
  // or a session's send times depend on the run). ARIMA: nothing.
  void preview(const Workload* open_loop);
  // Adds the closed window's observations and forecasts the window [now, now + length) that the
  // next adjustment closes: ARIMA from the observations, the oracle from the arrivals in it.
  LoadForecast next(const WindowStats& w, SimTime now, Duration length);

 private:
  ForecastSource source_;
  ArimaForecaster requests_, isl_, osl_;
  LoadForecast last_;  // the initial lengths, then the last window's that held arrivals (oracle)
  // Oracle: arrival times in order and prefix sums of prompt / output tokens (size n + 1).
  std::vector<SimTime> arrivals_;
  std::vector<double> prompt_prefix_, output_prefix_;
};

struct ScalingLimits {
  int64_t gpu_budget = 8;         // GPUs held at once (draining ones included)
  int64_t max_change = 1 << 20;   // per role per decision
  int64_t min_prefill = 1, min_decode = 1;
};

// Clamps targets to the per-decision change limit, the minimums and the GPU budget. A pool shrinks
// only towards its own target, never to pay for the other's growth: growth is funded from the GPUs
// the budget leaves free after what is kept (draining GPUs included), one instance at a time to
// the pool furthest below its target. Never plans below scale-ups still starting.
void clamp_targets(const PoolState& pool, const ScalingLimits& limits, int64_t& prefill,
                   int64_t& decode);
// Dynamo's SLA planner rule: the change limit and minimums, then over budget both targets scaled
// by budget / total (floored), the larger pool trimmed until it fits; never below scale-ups still
// starting. Unlike clamp_targets, one pool may shrink to make room for the other.
void clamp_targets_proportionally(const PoolState& pool, const ScalingLimits& limits,
                                  int64_t& prefill, int64_t& decode);

// Fills `decision` to move the pools to the targets: adds instances, or drains active ones with
// the fewest outstanding requests (highest index first among equals), keeping one active of each.
void move_to_targets(const sim::ControlView& view, const PoolState& pool, int64_t prefill,
                     int64_t decode, sim::ScalingDecision& decision);

}  // namespace servesim::policies::dopd
