// Engine::Impl, elastic clusters: the controller's ticks, instances started, drained and
// retired, and the GPUs held.
#include "sim/engine_impl.h"

namespace servesim::sim {

void Engine::Impl::sample_cluster_size() {
  if (!listener) return;
  int64_t active_p = 0, active_d = 0, active_u = 0, starting = 0, draining = 0;
  for (const InstanceState& inst : instances) {
    if (inst.state == Lifecycle::kActive) {
      (inst.setup.role == InstanceRole::kPrefill  ? active_p
       : inst.setup.role == InstanceRole::kDecode ? active_d
                                                  : active_u)++;
    }
    starting += inst.state == Lifecycle::kStarting;
    draining += inst.state == Lifecycle::kDraining;
  }
  const int64_t t_ns = now.time_since_epoch().count();
  listener->on_sample({t_ns, "cluster", "active_prefill", static_cast<double>(active_p)});
  listener->on_sample({t_ns, "cluster", "active_decode", static_cast<double>(active_d)});
  listener->on_sample({t_ns, "cluster", "active_unified", static_cast<double>(active_u)});
  listener->on_sample({t_ns, "cluster", "starting", static_cast<double>(starting)});
  listener->on_sample({t_ns, "cluster", "draining", static_cast<double>(draining)});
  listener->on_sample({t_ns, "cluster", "alive_gpus", static_cast<double>(alive_gpus)});
}

void Engine::Impl::maybe_retire(size_t i) {
  InstanceState& inst = instances[i];
  if (inst.state != Lifecycle::kDraining || inst.busy || !inst.running.empty() ||
      !inst.waiting.empty() || inst.outstanding != 0) {
    return;
  }
  inst.state = Lifecycle::kRetired;
  inst.retired_at = now;
  alive_gpus -= inst.setup.tp;
  sample_cluster_size();
}

void Engine::Impl::add_instance(InstanceRole role) {
  const auto index = static_cast<int32_t>(instances.size());
  InstanceSetup s = config.elastic.make_instance(role, index);
  if (!s.cost_model || !s.batching || s.block_size <= 0 || s.num_blocks <= 0 || s.role != role) {
    throw std::invalid_argument(fmt::format(
        "instance factory built an invalid {} instance (needs a cost model, a policy, KV blocks "
        "and the asked role)", role_name(role)));
  }
  InstanceState st = make_instance_state(std::move(s));
  st.state = Lifecycle::kStarting;
  st.alive_from = now;
  st.stats.role = role;
  st.stats.tp = st.setup.tp;
  st.stats.started_ns = now.time_since_epoch().count();
  if (role == InstanceRole::kDecode) {
    max_decode_blocks = std::max(max_decode_blocks, st.setup.num_blocks);
  }
  alive_gpus += st.setup.tp;
  peak_gpus = std::max(peak_gpus, alive_gpus);
  instances.push_back(std::move(st));
  loads.resize(instances.size());
  decode_loads.resize(instances.size());
  stale_loads.resize(instances.size());
  loads_written.resize(instances.size());
  result.instances.resize(instances.size());
  const Duration delay = role == InstanceRole::kDecode ? config.elastic.startup_decode
                                                       : config.elastic.startup_prefill;
  push(now + delay, Phase::kComplete, EventKind::kInstanceReady, index);
}

void Engine::Impl::on_instance_ready(size_t i) {
  InstanceState& inst = instances[i];
  if (inst.state != Lifecycle::kStarting) return;
  inst.state = Lifecycle::kActive;
  inst.stats.active_ns = now.time_since_epoch().count();
  sample_cluster_size();
  if (!handoffs.empty()) start_transfers();  // a new decode instance may take waiting KV
}

[[noreturn]] void Engine::Impl::bad_decision(const std::string& what) const {
  throw std::logic_error(fmt::format("cluster controller at t={} ns: invalid decision: {}",
                                     now.time_since_epoch().count(), what));
}

void Engine::Impl::on_control() {
  for (size_t i = 0; i < instances.size(); ++i) {
    refresh_load(i);
    stale_loads.add(i);  // the decisions below may drain or retire any of them
  }
  ControlView view{now, &loads, &observed_arrivals, &observed_finishes,
                   static_cast<int64_t>(handoffs.size())};
  ScalingDecision d;
  config.elastic.controller->control(view, d);
  observed_arrivals.clear();
  observed_finishes.clear();
  if (d.add_prefill < 0 || d.add_decode < 0) bad_decision("negative instance count to add");
  std::map<InstanceRole, int64_t> active;
  for (const InstanceState& inst : instances) {
    if (inst.state == Lifecycle::kActive) active[inst.setup.role]++;
  }
  std::set<int32_t> seen;
  for (int32_t id : d.drain) {
    if (id < 0 || static_cast<size_t>(id) >= instances.size() ||
        instances[static_cast<size_t>(id)].state != Lifecycle::kActive || !seen.insert(id).second) {
      bad_decision(fmt::format("drains instance {}, which is not an active instance", id));
    }
    if (--active[instances[static_cast<size_t>(id)].setup.role] < 1) {
      bad_decision(fmt::format("drains instance {}, the last active {} instance", id,
                               role_name(instances[static_cast<size_t>(id)].setup.role)));
    }
  }
  for (int32_t id : d.drain) {
    instances[static_cast<size_t>(id)].state = Lifecycle::kDraining;
    instances[static_cast<size_t>(id)].stats.draining_ns = now.time_since_epoch().count();
    maybe_retire(static_cast<size_t>(id));
  }
  for (int64_t k = 0; k < d.add_prefill; ++k) add_instance(InstanceRole::kPrefill);
  for (int64_t k = 0; k < d.add_decode; ++k) add_instance(InstanceRole::kDecode);
  if (!d.empty()) sample_cluster_size();
  if (!all_done() && !work_in_flight()) {
    throw std::logic_error(fmt::format(
        "simulation stalled at t={} ns: {} request(s) neither finished nor in flight",
        now.time_since_epoch().count(),
        result.requests_total - result.requests_finished - result.requests_rejected));
  }
  push(now + config.elastic.control_interval, Phase::kControl, EventKind::kControl, -1);
  // An instance added over an idle span (starting up) is sampled from now on.
  if (sampling_paused && !idle()) resume_sampling(/*after_now=*/true);
}

}  // namespace servesim::sim
