#include "policies/dopd/dopd_pool.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace servesim::policies::dopd {

PoolState pool_state(const sim::ControlView& view) {
  PoolState p;
  double kv_sum = 0;
  for (const sim::InstanceLoad& l : *view.instances) {
    if (l.state == sim::Lifecycle::kRetired) continue;
    const bool prefill = l.role != sim::InstanceRole::kDecode;
    if (l.state == sim::Lifecycle::kDraining) p.draining_gpus += l.tp;
    if (prefill) {
      p.tp_prefill = l.tp;
      p.prefill_queue += l.waiting;
      (l.state == sim::Lifecycle::kActive     ? p.active_prefill
       : l.state == sim::Lifecycle::kStarting ? p.starting_prefill
                                              : p.draining_prefill)++;
    } else {
      p.tp_decode = l.tp;
      p.decode_waiting += l.waiting;
      (l.state == sim::Lifecycle::kActive     ? p.active_decode
       : l.state == sim::Lifecycle::kStarting ? p.starting_decode
                                              : p.draining_decode)++;
      if (l.state == sim::Lifecycle::kActive && l.total_blocks > 0) {
        kv_sum += static_cast<double>(l.used_blocks) / static_cast<double>(l.total_blocks);
      }
    }
  }
  p.decode_waiting += view.handoffs_waiting;
  p.decode_kv_utilization = p.active_decode > 0 ? kv_sum / static_cast<double>(p.active_decode) : 0;
  return p;
}

void ResourceMonitor::observe(const sim::ControlView& view) {
  for (const sim::ObservedArrival& a : *view.arrivals) {
    arrivals_++;
    isl_sum_ += static_cast<double>(a.prompt_tokens);
    if (a.prompt_tokens > local_prefill_max_) {
      prefill_pool_arrivals_++;
      prefill_pool_isl_sum_ += static_cast<double>(a.prompt_tokens);
    }
    last_arrival_ = a.time;
    any_arrival_ = true;
  }
  for (const sim::ObservedFinish& f : *view.finished) {
    finished_++;
    osl_sum_ += static_cast<double>(f.output_tokens);
    ttft_sum_ += to_seconds(f.ttft);
    e2e_sum_ += to_seconds(f.e2e);
    if (f.output_tokens > 1) {
      itl_sum_ += f.tpot_ns * 1e-9;
      itl_count_++;
    }
  }
}

double ResourceMonitor::arrival_rate(SimTime now) const {
  const double elapsed = to_seconds(now - window_start_);
  return elapsed > 0 ? static_cast<double>(arrivals_) / elapsed : 0;
}

WindowStats ResourceMonitor::take(SimTime now) {
  WindowStats w;
  w.seconds = to_seconds(now - window_start_);
  w.arrivals = arrivals_;
  w.finished = finished_;
  if (arrivals_ > 0) w.mean_isl = isl_sum_ / static_cast<double>(arrivals_);
  w.prefill_pool_arrivals = prefill_pool_arrivals_;
  if (prefill_pool_arrivals_ > 0) {
    w.prefill_pool_mean_isl = prefill_pool_isl_sum_ / static_cast<double>(prefill_pool_arrivals_);
  }
  if (finished_ > 0) {
    w.mean_osl = osl_sum_ / static_cast<double>(finished_);
    w.mean_ttft_s = ttft_sum_ / static_cast<double>(finished_);
    w.mean_e2e_s = e2e_sum_ / static_cast<double>(finished_);
  }
  if (itl_count_ > 0) w.mean_itl_s = itl_sum_ / static_cast<double>(itl_count_);
  window_start_ = now;
  arrivals_ = finished_ = itl_count_ = prefill_pool_arrivals_ = 0;
  isl_sum_ = osl_sum_ = ttft_sum_ = itl_sum_ = e2e_sum_ = prefill_pool_isl_sum_ = 0;
  return w;
}

namespace {

// The per-decision change limit and the minimums, shared by both budget rules.
void clamp_change(const PoolState& pool, const ScalingLimits& limits, int64_t& prefill,
                  int64_t& decode) {
  prefill = std::clamp(prefill, pool.prefill() - limits.max_change, pool.prefill() + limits.max_change);
  decode = std::clamp(decode, pool.decode() - limits.max_change, pool.decode() + limits.max_change);
  prefill = std::max(prefill, limits.min_prefill);
  decode = std::max(decode, limits.min_decode);
}

}  // namespace

void clamp_targets(const PoolState& pool, const ScalingLimits& limits, int64_t& prefill,
                   int64_t& decode) {
  clamp_change(pool, limits, prefill, decode);
  // Shrinks first: each pool keeps min(target, current). Scale-ups still starting cannot be
  // cancelled, so neither pool plans below them.
  const int64_t keep_prefill = std::max(std::min(prefill, pool.prefill()), pool.starting_prefill);
  const int64_t keep_decode = std::max(std::min(decode, pool.decode()), pool.starting_decode);
  // Growth is funded from the budget left after what is kept (draining GPUs count against it),
  // one instance at a time to the pool furthest below its target (relative to its size).
  int64_t free_gpus = limits.gpu_budget - pool.draining_gpus - keep_prefill * pool.tp_prefill -
                      keep_decode * pool.tp_decode;
  int64_t grow_prefill = 0, grow_decode = 0;
  for (;;) {
    const int64_t want_prefill = prefill - keep_prefill - grow_prefill;
    const int64_t want_decode = decode - keep_decode - grow_decode;
    const bool fits_prefill = want_prefill > 0 && pool.tp_prefill <= free_gpus;
    const bool fits_decode = want_decode > 0 && pool.tp_decode <= free_gpus;
    if (!fits_prefill && !fits_decode) break;
    const double deficit_prefill =
        static_cast<double>(want_prefill) / static_cast<double>(keep_prefill + grow_prefill + 1);
    const double deficit_decode =
        static_cast<double>(want_decode) / static_cast<double>(keep_decode + grow_decode + 1);
    if (fits_prefill && (!fits_decode || deficit_prefill >= deficit_decode)) {
      ++grow_prefill;
      free_gpus -= pool.tp_prefill;
    } else {
      ++grow_decode;
      free_gpus -= pool.tp_decode;
    }
  }
  prefill = keep_prefill + grow_prefill;
  decode = keep_decode + grow_decode;
}

void clamp_targets_proportionally(const PoolState& pool, const ScalingLimits& limits,
                                  int64_t& prefill, int64_t& decode) {
  clamp_change(pool, limits, prefill, decode);
  const int64_t budget = limits.gpu_budget - pool.draining_gpus;
  auto gpus = [&] { return prefill * pool.tp_prefill + decode * pool.tp_decode; };
  if (gpus() > budget) {
    const double f = static_cast<double>(budget) / static_cast<double>(gpus());
    prefill = std::max(limits.min_prefill, static_cast<int64_t>(std::floor(static_cast<double>(prefill) * f)));
    decode = std::max(limits.min_decode, static_cast<int64_t>(std::floor(static_cast<double>(decode) * f)));
  }
  while (gpus() > budget && (prefill > limits.min_prefill || decode > limits.min_decode)) {
    const bool trim_prefill =
        decode <= limits.min_decode ||
        (prefill > limits.min_prefill && prefill * pool.tp_prefill >= decode * pool.tp_decode);
    (trim_prefill ? prefill : decode)--;
  }
  // Never plan below what is already committed by scale-ups still starting (they cannot be
  // cancelled), nor ask for fewer than can be drained.
  prefill = std::max(prefill, std::max<int64_t>(limits.min_prefill, pool.starting_prefill));
  decode = std::max(decode, std::max<int64_t>(limits.min_decode, pool.starting_decode));
}

namespace {

void drain_some(const sim::ControlView& view, sim::InstanceRole role, int64_t count,
                sim::ScalingDecision& decision) {
  std::vector<const sim::InstanceLoad*> active;
  for (const sim::InstanceLoad& l : *view.instances) {
    const bool match = role == sim::InstanceRole::kDecode ? l.role == sim::InstanceRole::kDecode
                                                          : l.role != sim::InstanceRole::kDecode;
    if (match && l.state == sim::Lifecycle::kActive) active.push_back(&l);
  }
  std::sort(active.begin(), active.end(), [](const sim::InstanceLoad* a, const sim::InstanceLoad* b) {
    if (a->outstanding != b->outstanding) return a->outstanding < b->outstanding;
    return a->instance_id > b->instance_id;
  });
  const int64_t can = std::max<int64_t>(0, static_cast<int64_t>(active.size()) - 1);
  for (int64_t k = 0; k < std::min(count, can); ++k) decision.drain.push_back(active[static_cast<size_t>(k)]->instance_id);
}

}  // namespace

void move_to_targets(const sim::ControlView& view, const PoolState& pool, int64_t prefill,
                     int64_t decode, sim::ScalingDecision& decision) {
  if (prefill > pool.prefill()) decision.add_prefill = prefill - pool.prefill();
  if (decode > pool.decode()) decision.add_decode = decode - pool.decode();
  if (prefill < pool.prefill()) drain_some(view, sim::InstanceRole::kPrefill, pool.prefill() - prefill, decision);
  if (decode < pool.decode()) drain_some(view, sim::InstanceRole::kDecode, pool.decode() - decode, decision);
}

void LoadForecaster::preview(const Workload* open_loop) {
  if (source_ != ForecastSource::kOracle) return;
  if (open_loop == nullptr) {
    throw std::invalid_argument(
        "forecast=oracle needs an open-loop workload (a trace or generated arrivals): with "
        "closed-loop clients, a warm-up phase or session turns the send times depend on the run");
  }
  const std::vector<RequestSpec>& requests = open_loop->requests;
  arrivals_.clear();
  prompt_prefix_.assign(1, 0.0);
  output_prefix_.assign(1, 0.0);
  for (const RequestSpec& r : requests) {
    arrivals_.push_back(r.arrival);
    prompt_prefix_.push_back(prompt_prefix_.back() + static_cast<double>(r.prompt_tokens));
    output_prefix_.push_back(output_prefix_.back() + static_cast<double>(r.output_tokens));
  }
}

LoadForecast LoadForecaster::next(const WindowStats& w, SimTime now, Duration length) {
  if (source_ == ForecastSource::kOracle) {
    // Arrivals are sorted (a finalised workload); the window is [now, now + length).
    const auto lo = std::lower_bound(arrivals_.begin(), arrivals_.end(), now);
    const auto hi = std::lower_bound(lo, arrivals_.end(), now + length);
    const auto a = static_cast<size_t>(lo - arrivals_.begin());
    const auto b = static_cast<size_t>(hi - arrivals_.begin());
    last_.requests = static_cast<double>(b - a);
    if (b > a) {
      last_.isl = std::max(1.0, (prompt_prefix_[b] - prompt_prefix_[a]) / last_.requests);
      last_.osl = std::max(1.0, (output_prefix_[b] - output_prefix_[a]) / last_.requests);
    }
    return last_;
  }
  requests_.add(static_cast<double>(w.arrivals));
  if (w.arrivals > 0) isl_.add(w.mean_isl);
  if (w.finished > 0) osl_.add(w.mean_osl);
  LoadForecast f;
  f.requests = std::max(0.0, requests_.predict_bounded());
  f.isl = std::max(1.0, isl_.size() > 0 ? isl_.predict_bounded() : last_.isl);
  f.osl = std::max(1.0, osl_.size() > 0 ? osl_.predict_bounded() : last_.osl);
  return f;
}

}  // namespace servesim::policies::dopd
