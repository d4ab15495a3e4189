// Engine::Impl, sampling: the time series every sample_interval, and the checks that the
// cluster is idle or stalled.
#include "sim/engine_impl.h"

namespace servesim::sim {

void Engine::Impl::on_sample() {
  if (listener) {
    const int64_t t_ns = now.time_since_epoch().count();
    const double interval_ns = static_cast<double>(config.sample_interval.count());
    for (size_t i = 0; i < instances.size(); ++i) {
      InstanceState& inst = instances[i];
      if (inst.state == Lifecycle::kRetired) continue;
      int64_t busy = inst.stats.busy_ns;
      if (inst.busy) busy += (now - inst.batch_start).count();
      const std::string entity = fmt::format("instance/{}", i);
      listener->on_sample({t_ns, entity, "waiting", static_cast<double>(inst.waiting.size())});
      listener->on_sample({t_ns, entity, "running", static_cast<double>(inst.running.size())});
      listener->on_sample({t_ns, entity, "kv_utilization",
                           1.0 - static_cast<double>(inst.free_blocks) /
                                     static_cast<double>(inst.setup.num_blocks)});
      listener->on_sample({t_ns, entity, "busy_fraction",
                           static_cast<double>(busy - inst.busy_ns_at_last_sample) / interval_ns});
      inst.busy_ns_at_last_sample = busy;
    }
    listener->on_sample({t_ns, "cluster", "in_system", static_cast<double>(in_system)});
    if (elastic()) sample_cluster_size();
  }
  if (all_done()) return;
  if (!work_in_flight()) {
    // Nothing can make progress any more: a policy left requests it will never schedule.
    throw std::logic_error(fmt::format(
        "simulation stalled at t={} ns: {} request(s) neither finished nor in flight",
        now.time_since_epoch().count(),
        result.requests_total - result.requests_finished - result.requests_rejected));
  }
  if (idle()) {
    // Nothing changes until the next arrival: this sample recorded the idle state, and the
    // next one is on the first interval boundary at or after that arrival. A stretched,
    // sparse workload then costs samples per busy span, not per unit of simulated time.
    sampling_paused = true;
    return;
  }
  push(now + config.sample_interval, Phase::kSample, EventKind::kSample, -1);
}

void Engine::Impl::resume_sampling(bool after_now) {
  sampling_paused = false;
  const int64_t interval = config.sample_interval.count();
  const int64_t t = now.time_since_epoch().count();
  const int64_t k = t / interval + (t % interval != 0 || after_now ? 1 : 0);
  push(kTimeZero + Duration{k * interval}, Phase::kSample, EventKind::kSample, -1);
}

bool Engine::Impl::idle() const {
  if (in_system != 0 || route_pending || !in_transit.empty() || !in_frontend.empty()) {
    return false;
  }
  return std::none_of(instances.begin(), instances.end(), [](const InstanceState& s) {
    return s.busy || s.schedule_pending || !s.wakes.empty() || s.state == Lifecycle::kStarting ||
           s.state == Lifecycle::kDraining;
  });
}

bool Engine::Impl::work_in_flight() const {
  if (pending_arrivals > 0 || route_pending || !in_transit.empty() || !in_frontend.empty()) {
    return true;
  }
  return std::any_of(instances.begin(), instances.end(), [](const InstanceState& s) {
    return s.busy || s.schedule_pending || !s.wakes.empty() || s.state == Lifecycle::kStarting;
  });
}

}  // namespace servesim::sim
