// Engine::Impl, request sources and routing: open-loop arrivals, closed-loop clients and their
// warm-up phase, session turns, the router and the instances' front ends.
#include "sim/engine_impl.h"

namespace servesim::sim {

void Engine::Impl::link_session_turns() {
  const auto n = static_cast<RequestId>(workload.requests.size());
  for (const RequestSpec& r : workload.requests) {
    if (r.after < 0) continue;
    if (successor.empty()) {
      if (config.closed_loop.clients > 0 || warmup_total > 0) {
        throw std::invalid_argument(
            "session turns (RequestSpec::after) cannot be combined with closed-loop clients or "
            "warm-up requests");
      }
      successor.assign(static_cast<size_t>(n), -1);
    }
    if (r.after >= r.id || r.think_time.count() < 0 ||
        successor[static_cast<size_t>(r.after)] >= 0) {
      throw std::invalid_argument(fmt::format(
          "request {} follows request {}: a turn must follow one earlier request that no other "
          "turn follows, after a think time >= 0",
          r.id, r.after));
    }
    successor[static_cast<size_t>(r.after)] = r.id;
  }
}

void Engine::Impl::schedule_next_arrival() {
  while (next_open < workload.requests.size() && workload.requests[next_open].after >= 0) {
    ++next_open;  // a later turn: sent when the request it follows is done
  }
  if (next_open >= workload.requests.size()) return;
  if (config.closed_loop.clients > 0) return;  // closed loop issues on completion
  if (next_open >= warmup_total && !measured_phase) return;  // after the warm-up drains
  RequestSpec& spec = workload.requests[next_open];
  if (next_open >= warmup_total) spec.arrival += arrival_shift;
  push_arrival(spec.arrival, spec.id);
  ++next_open;
}

void Engine::Impl::admit_request(RequestId id) {
  requests.admit(id);
  if (config.record_token_times) token_times.admit(id);
}

void Engine::Impl::retire_done_requests() {
  for (const RequestId id : done_ids) {
    requests.retire(id);
    if (config.record_token_times) token_times.retire(id);
  }
  done_ids.clear();
}

void Engine::Impl::push_arrival(SimTime t, RequestId id) {
  if (t < now) throw RangeError("event scheduled in the past");
  admit_request(id);
  Event e{t, Phase::kArrive, EventKind::kArrival, -1, 0, 0};
  e.request = id;
  queue.push(e);
  pending_arrivals++;
}

void Engine::Impl::issue_closed_loop_request(SimTime t) {
  if (next_issue >= issue_limit) return;
  const Duration jitter = config.closed_loop.think_time_jitter;
  if (jitter.count() > 0) {
    if (!client_jitter) client_jitter.emplace(config.closed_loop.seed, "client-jitter");
    const double draw = client_jitter->uniform() * static_cast<double>(jitter.count());
    t += Duration{static_cast<int64_t>(draw)};
  }
  RequestSpec& spec = workload.requests[next_issue++];
  spec.arrival = t;
  push_arrival(t, spec.id);
}

void Engine::Impl::start_clients(SimTime start) {
  const ClosedLoopSpec& cl = config.closed_loop;
  for (int64_t k = 0; k < cl.clients && next_issue < issue_limit; ++k) {
    issue_closed_loop_request(start + Duration{cl.ramp_up.count() * k / cl.clients});
  }
}

void Engine::Impl::on_request_done(RequestId id) {
  done_ids.push_back(id);
  if (!successor.empty() && successor[static_cast<size_t>(id)] >= 0) {
    RequestSpec& next = workload.requests[static_cast<size_t>(successor[static_cast<size_t>(id)])];
    next.arrival = now + next.think_time;
    push_arrival(next.arrival, next.id);
  }
  if (config.closed_loop.clients > 0) issue_closed_loop_request(now + config.closed_loop.think_time);
  if (!is_warmup(id) || --warmup_left > 0 || measured_phase) return;
  measured_phase = true;
  issue_limit = workload.requests.size();
  if (config.closed_loop.clients > 0) {
    start_clients(now);
  } else if (next_open < workload.requests.size()) {
    arrival_shift = std::max(Duration{0}, now - workload.requests[next_open].arrival);
    schedule_next_arrival();
  }
}

void Engine::Impl::on_arrival(RequestId id) {
  pending_arrivals--;
  ++next_arrival;
  if (sampling_paused) resume_sampling();
  const RequestSpec& spec = workload.requests[static_cast<size_t>(id)];
  set_in_system(+1);
  if (elastic()) observed_arrivals.push_back({now, spec.prompt_tokens});
  pending_route.push_back(spec.id);
  if (!route_pending) {
    route_pending = true;
    push(now, Phase::kRoute, EventKind::kRoute, -1);
  }
  if (spec.after < 0) schedule_next_arrival();  // a later turn is not part of the open stream
}

void Engine::Impl::refresh_load(size_t i) {
  const InstanceState& inst = instances[i];
  InstanceLoad& l = loads[i];
  l.instance_id = static_cast<int32_t>(i);
  l.waiting = static_cast<int64_t>(inst.waiting.size());
  l.running = static_cast<int64_t>(inst.running.size());
  l.outstanding = inst.outstanding;
  l.total_blocks = inst.setup.num_blocks;
  l.used_blocks = inst.setup.num_blocks - inst.free_blocks;
  l.queued_prompt_blocks = inst.queued_prompt_blocks;
  l.role = inst.setup.role;
  l.state = inst.state;
  l.tp = inst.setup.tp;
  l.accepting = inst.state == Lifecycle::kActive &&
                (inst.setup.role != InstanceRole::kDecode || config.arrivals_to_decode);
  loads_written.add(i);
}

void Engine::Impl::apply_split(const ClusterView& view, const RequestSpec& spec, int32_t target, SeqView& seq,
                 RequestState& rs) {
  const SplitDecision d = router->split(view, spec, target);
  if (d.split_tokens <= 0) return;
  const int64_t n = spec.prompt_tokens + spec.output_tokens;
  if (d.split_tokens >= n || d.target < 0 || static_cast<size_t>(d.target) >= instances.size() ||
      d.target == target || instances[static_cast<size_t>(d.target)].setup.role == InstanceRole::kPrefill) {
    throw std::logic_error(fmt::format(
        "router split request {} at {} of {} tokens onto instance {} (from {}): invalid", spec.id,
        d.split_tokens, n, d.target, target));
  }
  if (!config.transfer.link) throw std::invalid_argument("split requests need KV links");
  seq.split_tokens = d.split_tokens;
  seq.split_target = d.target;
  rs.split_target = d.target;
  rs.split_tokens = d.split_tokens;
}

void Engine::Impl::refresh_route_views() {
  const auto refresh = [&](size_t i) {
    refresh_load(i);
    queues_view[i] = {&instances[i].running, &instances[i].waiting, instances[i].batch_end};
  };
  if (queues_view.size() != instances.size() || views_of != instances.data()) {
    queues_view.resize(instances.size());
    for (size_t i = 0; i < instances.size(); ++i) refresh(i);
    views_of = instances.data();
  } else {
    for (size_t i : stale_loads.items()) refresh(i);
  }
  stale_loads.clear();
}

void Engine::Impl::on_route() {
  route_pending = false;
  refresh_route_views();
  for (RequestId id : pending_route) {
    const RequestSpec& spec = workload.requests[static_cast<size_t>(id)];
    ClusterView view{now, &loads, instances.front().setup.block_size, &queues_view, &kv.lookup()};
    view.changed = &loads_written.items();
    const int32_t target = router->route(view, spec);
    loads_written.clear();
    if (target < 0 || static_cast<size_t>(target) >= instances.size()) {
      throw std::logic_error(fmt::format("router returned instance {} of {}", target,
                                         instances.size()));
    }
    stale_loads.add(static_cast<size_t>(target));
    InstanceState& inst = instances[static_cast<size_t>(target)];
    RequestState& rs = requests[id];
    rs.instance = target;
    const int64_t full_blocks =
        blocks_for_tokens(spec.prompt_tokens + spec.output_tokens, inst.setup.block_size);
    const bool prompt_too_long =
        inst.setup.max_prompt_tokens > 0 && spec.prompt_tokens > inst.setup.max_prompt_tokens;
    const bool beyond_context =
        config.max_context_tokens > 0 &&
        spec.prompt_tokens + spec.output_tokens > config.max_context_tokens;
    if (beyond_context) ++result.requests_rejected_context;
    if (beyond_context || prompt_too_long ||
        (!inst.setup.kv_reserved_only && full_blocks > inst.setup.num_blocks) ||
        (disaggregated && full_blocks > max_decode_blocks)) {
      // Could never be admitted: its prompt exceeds what the batching can schedule, or its
      // full context exceeds the instance's (or, disaggregated, every decode instance's) KV
      // pool.
      ++result.requests_rejected;
      if (listener) {
        listener->on_rejected({id, spec.arrival.time_since_epoch().count(), spec.prompt_tokens,
                               spec.output_tokens, beyond_context ? "context" : "capacity"});
      }
      set_in_system(-1);
      on_request_done(id);
      continue;
    }
    SeqView seq;
    seq.id = id;
    seq.arrival = spec.arrival;
    seq.prompt_tokens = spec.prompt_tokens;
    seq.output_tokens = spec.output_tokens;
    if (inst.setup.role == InstanceRole::kPrefill) {
      seq.split_tokens = spec.prompt_tokens;  // its decode instance is chosen at the hand-off
    } else {
      apply_split(view, spec, target, seq, rs);
    }
    inst.outstanding++;
    if (inst.setup.frontend.enabled()) {
      const FrontendSpec& fe = inst.setup.frontend;
      const SimTime ready =
          std::max(now, inst.frontend_free_at) + fe.per_request +
          duration_from_seconds(fe.per_prompt_token_ns * 1e-9 *
                                static_cast<double>(spec.prompt_tokens));
      inst.frontend_free_at = ready;
      in_frontend.emplace(id, seq);
      Event e{ready, Phase::kArrive, EventKind::kFrontendDone, target, 0, 0};
      e.request = id;
      queue.push(e);
      refresh_load(static_cast<size_t>(target));
      continue;
    }
    enqueue(static_cast<size_t>(target), seq);
  }
  pending_route.clear();
}

void Engine::Impl::enqueue(size_t i, const SeqView& seq) {
  InstanceState& inst = instances[i];
  inst.waiting.push_back(seq);
  inst.queued_prompt_blocks += blocks_for_tokens(seq.prompt_tokens, inst.setup.block_size);
  refresh_load(i);
  request_schedule(i);
}

void Engine::Impl::on_frontend_done(size_t i, RequestId id) {
  auto it = in_frontend.find(id);
  if (it == in_frontend.end()) throw std::logic_error("front end finished an unknown request");
  const SeqView seq = it->second;
  in_frontend.erase(it);
  enqueue(i, seq);
}

void Engine::Impl::request_schedule(size_t i) {
  InstanceState& inst = instances[i];
  if (inst.busy || inst.schedule_pending) return;
  inst.schedule_pending = true;
  push(now, Phase::kSchedule, EventKind::kSchedule, static_cast<int32_t>(i));
}

}  // namespace servesim::sim
