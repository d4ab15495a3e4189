#include <algorithm>
#include <cmath>

#include "policies/dopd/arima_forecaster.h"
#include "policies/dopd/dopd.h"
#include "policies/dopd/pd_ratio.h"

namespace servesim::policies::dopd {
namespace {

class DynLoadController : public sim::ClusterController {
 public:
  explicit DynLoadController(const DynLoadParams& p) : p_(p) {}

  void control(const sim::ControlView& view, sim::ScalingDecision& decision) override {
    const PoolState pool = pool_state(view);
    // One metric pull: prefill queue per prefill instance, decode KV utilisation inflated by the
    // requests waiting for a decode slot.
    const double q = static_cast<double>(pool.prefill_queue) /
                     static_cast<double>(std::max<int64_t>(1, pool.active_prefill));
    const double u = pool.decode_kv_utilization +
                     p_.waiting_kv_inflation * static_cast<double>(pool.decode_waiting) /
                         static_cast<double>(std::max<int64_t>(1, pool.active_decode));
    queue_.push_back(q);
    kv_.push_back(u);
    if (++ticks_ % p_.adjust_every != 0) return;
    double q_mean = 0, u_mean = 0;
    for (double v : queue_) q_mean += v;
    for (double v : kv_) u_mean += v;
    q_mean /= static_cast<double>(queue_.size());
    u_mean /= static_cast<double>(kv_.size());
    const double q_trend = queue_.back() + 3.0 * (queue_.back() - queue_.front());
    queue_.clear();
    kv_.clear();
    if (grace_ > 0) grace_--;
    if (pool.scaling_in_flight()) return;
    int64_t prefill = pool.prefill(), decode = pool.decode();
    if (q_mean > p_.prefill_queue_scale_up && q_trend > p_.prefill_queue_scale_up) {
      prefill++;
    } else if (q_mean < p_.prefill_queue_scale_down) {
      prefill--;
    }
    if (u_mean > p_.decode_kv_scale_up) {
      decode++;
    } else if (u_mean < p_.decode_kv_scale_down && grace_ == 0) {
      decode--;
    }
    // A scale-up that would exceed the budget is skipped (not traded against the other pool).
    const int64_t budget = p_.limits.gpu_budget - pool.draining_gpus;
    if (prefill > pool.prefill() && prefill * pool.tp_prefill + decode * pool.tp_decode > budget) {
      prefill = pool.prefill();
    }
    if (decode > pool.decode() && prefill * pool.tp_prefill + decode * pool.tp_decode > budget) {
      decode = pool.decode();
    }
    prefill = std::max(prefill, p_.limits.min_prefill);
    decode = std::max(decode, p_.limits.min_decode);
    if (decode > pool.decode()) grace_ = p_.decode_grace_intervals;
    move_to_targets(view, pool, prefill, decode, decision);
  }

 private:
  DynLoadParams p_;
  int64_t ticks_ = 0;
  int64_t grace_ = 0;
  std::vector<double> queue_, kv_;
};

class DynSlaController : public sim::ClusterController {
 public:
  DynSlaController(const DynSlaParams& p, const sim::InstanceContext& prefill,
                   const sim::InstanceContext& decode)
      : p_(p),
        prefill_(prefill),
        decode_(decode),
        forecaster_(p.arima_window, p.initial_isl, p.initial_osl, p.forecast) {
    itl_target_s_ = to_seconds(p.itl_target.value_or(decode.slo.tpot.value_or(Duration{50'000'000})));
  }

  void control(const sim::ControlView& view, sim::ScalingDecision& decision) override {
    monitor_.observe(view);
    if (++ticks_ % p_.adjust_every != 0) return;
    const PoolState pool = pool_state(view);
    const WindowStats w = monitor_.take(view.now);
    const LoadForecast f = forecaster_.next(w, view.now, p_.interval);
    const double n_hat = f.requests, isl_hat = f.isl, osl_hat = f.osl;
    // Correction factors: observed over profiled latency.
    double c_p = 1.0, c_d = 1.0;
    if (w.finished > 0 && w.mean_isl > 0) {
      c_p = w.mean_ttft_s / prefill_time_s(*prefill_.cost_model, std::llround(w.mean_isl));
    }
    if (w.finished > 0 && w.mean_itl_s > 0) {
      const double conc =
          std::max(1.0, static_cast<double>(w.arrivals) /
                            static_cast<double>(std::max<int64_t>(1, pool.active_decode)) *
                            w.mean_e2e_s / to_seconds(p_.interval));
      const int64_t ctx = std::llround(std::max(1.0, w.mean_isl) + w.mean_osl / 2);
      c_d = w.mean_itl_s / decode_step_s(*decode_.cost_model, std::llround(conc), ctx);
    }
    if (pool.scaling_in_flight()) return;
    const double prefill_tokens_per_gpu_s =
        isl_hat / prefill_time_s(*prefill_.cost_model, std::llround(isl_hat)) / prefill_.tp;
    const double prefill_demand = n_hat * isl_hat / to_seconds(p_.interval) * std::min(1.0, c_p);
    int64_t prefill = static_cast<int64_t>(
        std::ceil(prefill_demand / prefill_tokens_per_gpu_s / prefill_.tp - 1e-9));
    const int64_t ctx = std::llround(isl_hat + osl_hat / 2);
    const double decode_per_gpu = best_decode_throughput_per_gpu(itl_target_s_ / c_d, ctx);
    int64_t decode = static_cast<int64_t>(
        std::ceil(n_hat * osl_hat / to_seconds(p_.interval) / decode_per_gpu / decode_.tp - 1e-9));
    ScalingLimits limits = p_.limits;  // the SLA planner jumps straight to its targets
    clamp_targets_proportionally(pool, limits, prefill, decode);
    move_to_targets(view, pool, prefill, decode, decision);
  }

  void preview(const Workload* open_loop) override { forecaster_.preview(open_loop); }

 private:
  // Output tokens/s per GPU of the best batch (powers of two, within the KV pool) whose decode
  // step meets `itl_s` at context `ctx`; the batch of one when none does.
  double best_decode_throughput_per_gpu(double itl_s, int64_t ctx) const {
    const int64_t kv_limit =
        std::max<int64_t>(1, decode_.num_blocks / ((ctx + decode_.block_size - 1) / decode_.block_size));
    double best = 1.0 / decode_step_s(*decode_.cost_model, 1, ctx) / decode_.tp;
    for (int64_t b = 1; b <= kv_limit; b *= 2) {
      const double step = decode_step_s(*decode_.cost_model, b, ctx);
      if (step <= itl_s) best = std::max(best, static_cast<double>(b) / step / decode_.tp);
    }
    return best;
  }

  DynSlaParams p_;
  sim::InstanceContext prefill_, decode_;
  ResourceMonitor monitor_;
  LoadForecaster forecaster_;
  double itl_target_s_ = 0.05;
  int64_t ticks_ = 0;
};

}  // namespace

std::unique_ptr<sim::ClusterController> make_dyn_load_controller(const DynLoadParams& params) {
  return std::make_unique<DynLoadController>(params);
}

std::unique_ptr<sim::ClusterController> make_dyn_sla_controller(
    const DynSlaParams& params, const sim::InstanceContext& prefill, const sim::InstanceContext& decode) {
  return std::make_unique<DynSlaController>(params, prefill, decode);
}

}  // namespace servesim::policies::dopd
