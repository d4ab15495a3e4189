// Engine::Impl: construction, event plumbing, batching and completion, and the main loop. Its
// other parts are in the engine_*.cc files beside it (sim/engine_impl.h lists them).
#include "sim/engine_impl.h"

namespace servesim::sim {

Engine::Impl::Impl(EngineConfig c, std::vector<InstanceSetup> setups, std::unique_ptr<RoutingPolicy> r,
     Workload w, RecordListener* l, std::unique_ptr<RoutingPolicy> dr): config(std::move(c)),
      router(std::move(r)),
      decode_router(std::move(dr)),
      workload(std::move(w)),
      listener(l) {
  if (config.slo.tbt_p99) tbt_objective_ns_ = config.slo.tbt_p99->count();
  if (setups.empty()) throw std::invalid_argument("engine needs at least one instance");
  if (!router) throw std::invalid_argument("engine needs a router");
  for (auto& s : setups) {
    if (!s.cost_model || !s.batching || s.block_size <= 0 || s.num_blocks <= 0) {
      throw std::invalid_argument("instance setup needs a cost model, a policy and KV blocks");
    }
    instances.push_back(make_instance_state(std::move(s)));
  }
  if (const int64_t bytes = block_bytes(instances.front().setup); bytes > 0) {
    kv.set_remote_blocks(config.remote_kv_bytes / bytes);
  }
  for (size_t i = 0; i < workload.requests.size(); ++i) {
    if (workload.requests[i].id != static_cast<RequestId>(i)) {
      throw std::invalid_argument("workload is not finalised: request ids must be 0..N-1");
    }
  }
  bool any_prefill = false, any_decode = false, any_entry = false;
  for (const auto& inst : instances) {
    any_prefill |= inst.setup.role == InstanceRole::kPrefill;
    any_entry |= inst.setup.role != InstanceRole::kDecode;
    if (inst.setup.role == InstanceRole::kDecode) {
      any_decode = true;
      max_decode_blocks = std::max(max_decode_blocks, inst.setup.num_blocks);
    }
  }
  if (!any_entry) throw std::invalid_argument("engine needs a prefill or unified instance");
  disaggregated = any_prefill;
  if (disaggregated) {
    if (!any_decode) throw std::invalid_argument("prefill instances need a decode instance");
    if (!decode_router) throw std::invalid_argument("prefill instances need a decode router");
    if (!config.transfer.link) throw std::invalid_argument("prefill instances need KV links");
  }
  if (elastic() && !config.elastic.make_instance) {
    throw std::invalid_argument("an elastic cluster needs an instance factory");
  }
  if (elastic() && config.elastic.control_interval.count() <= 0) {
    throw std::invalid_argument("an elastic cluster needs a positive control interval");
  }
  for (auto& inst : instances) {
    inst.stats.role = inst.setup.role;
    inst.stats.tp = inst.setup.tp;
    alive_gpus += inst.setup.tp;
  }
  peak_gpus = alive_gpus;
  const ClosedLoopSpec& cl = config.closed_loop;
  if (cl.clients < 0 || cl.warmup_requests < 0 || cl.ramp_up.count() < 0 ||
      cl.think_time.count() < 0) {
    throw std::invalid_argument("closed-loop clients, warm-up, ramp-up and think time must be >= 0");
  }
  warmup_total = static_cast<size_t>(std::min<int64_t>(
      cl.warmup_requests, static_cast<int64_t>(workload.requests.size())));
  warmup_left = static_cast<int64_t>(warmup_total);
  measured_phase = !(cl.drain_after_warmup && warmup_total > 0);
  link_session_turns();
  if (elastic()) {
    const bool open_loop = cl.clients == 0 && warmup_total == 0 && successor.empty();
    config.elastic.controller->preview(open_loop ? &workload : nullptr);
  }
  issue_limit = measured_phase ? workload.requests.size() : warmup_total;
  loads.resize(instances.size());
  decode_loads.resize(instances.size());
  stale_loads.resize(instances.size());
  loads_written.resize(instances.size());
  result.requests_total = static_cast<int64_t>(workload.requests.size());
  result.instances.resize(instances.size());
}

void Engine::Impl::push(SimTime t, Phase phase, EventKind kind, int32_t target) {
  if (t < now) throw RangeError("event scheduled in the past");
  queue.push(Event{t, phase, kind, target, 0, 0});
}

void Engine::Impl::fingerprint(const Event& e) {
  uint64_t h = result.event_fingerprint;
  h = mix(h, static_cast<uint64_t>(e.time.time_since_epoch().count()));
  h = mix(h, (static_cast<uint64_t>(e.phase) << 8) | static_cast<uint64_t>(e.kind));
  h = mix(h, static_cast<uint64_t>(static_cast<int64_t>(e.target)));
  result.event_fingerprint = h;
}

void Engine::Impl::set_in_system(int64_t delta) {
  in_system_area_ns += static_cast<long double>(in_system) *
                       static_cast<long double>((now - in_system_since).count());
  in_system_since = now;
  in_system += delta;
}

bool Engine::Impl::all_done() const {
  return result.requests_finished + result.requests_rejected == result.requests_total;
}

int32_t Engine::Impl::running_pos_of(const InstanceState& inst, RequestId id) {
  return detail::running_pos_of(requests, inst, id);
}

[[noreturn]] void Engine::Impl::bad_plan(size_t i, const std::string& what) const {
  throw std::logic_error(fmt::format("instance {} at t={} ns: invalid batch plan: {}", i,
                                     now.time_since_epoch().count(), what));
}

void Engine::Impl::apply_preemptions(size_t i, InstanceState& inst, const BatchPlan& plan,
                       int64_t protected_run) {
  if (plan.preempt.empty()) return;
  for (RequestId id : plan.preempt) {
    const int32_t pos = running_pos_of(inst, id);
    if (pos == kNotRunning) bad_plan(i, fmt::format("preempts request {} that is not running", id));
    if (pos < protected_run) {
      bad_plan(i, fmt::format("preempts request {} of the decode run it schedules", id));
    }
    SeqView& seq = inst.running[static_cast<size_t>(pos)];
    RequestState& rs = requests[id];
    kv.release_blocks(inst, seq.blocks, id);
    seq.blocks = 0;
    seq.computed_tokens = 0;
    seq.draft_tokens = 0;  // recomputed without drafts; the first sample after it drafts again
    seq.preemptions++;
    rs.preemptions++;
    rs.running_pos = kNotRunning;
    inst.stats.preemptions++;
    inst.waiting.push_front(seq);
    inst.queued_prompt_blocks += blocks_for_tokens(seq.num_tokens(), inst.setup.block_size);
    seq.id = -1;  // tombstone, compacted below
  }
  std::erase_if(inst.running, [](const SeqView& s) { return s.id < 0; });
}

void Engine::Impl::apply_admissions(size_t i, InstanceState& inst, const BatchPlan& plan) {
  for (RequestId id : plan.admit) {
    auto it = inst.waiting.begin();
    if (it == inst.waiting.end() || it->id != id) {
      it = std::find_if(inst.waiting.begin(), inst.waiting.end(),
                        [id](const SeqView& s) { return s.id == id; });
      if (it == inst.waiting.end()) bad_plan(i, fmt::format("admits request {} that is not waiting", id));
    }
    inst.queued_prompt_blocks -= blocks_for_tokens(it->num_tokens(), inst.setup.block_size);
    requests[id].running_pos = static_cast<int32_t>(inst.running.size());
    inst.running.push_back(*it);
    inst.waiting.erase(it);
  }
}

Duration Engine::Impl::price_batch(InstanceState& inst, int64_t run) {
  const models::IterationCostModel& cost = *inst.setup.cost_model;
  if (run == 0) return cost.iteration_time(inst.shape);
  const models::DecodePass pass{run, inst.decode_run.context_sum, run};
  const std::optional<Duration> from_sums = inst.shape.empty()
                                                ? cost.decode_iteration_time(pass)
                                                : cost.mixed_iteration_time(pass, inst.shape);
  if (from_sums) return *from_sums;
  // The model needs every segment: the run's first, as if the plan had listed them.
  models::BatchShape& whole = decode_shape(run_shape_, static_cast<size_t>(run), [&](size_t pos) {
    return inst.running[pos].computed_tokens + 1;
  });
  whole.segments.insert(whole.segments.end(), inst.shape.segments.begin(),
                        inst.shape.segments.end());
  whole.encoder_inputs = inst.shape.encoder_inputs;
  return cost.iteration_time(whole);
}

void Engine::Impl::on_no_batch(size_t i, const BatchPlan& plan, const InstanceView& view) {
  InstanceState& inst = instances[i];
  if (!plan.empty()) bad_plan(i, "returned no batch but a non-empty plan");
  if (!inst.waiting.empty()) {
    if (const std::optional<SimTime> w = inst.setup.batching->wake_at(view)) {
      if (*w <= now) bad_plan(i, "wake_at() must return a time after now");
      if (inst.wakes.empty() || *inst.wakes.begin() > *w) {
        inst.wakes.insert(*w);
        push(*w, Phase::kSchedule, EventKind::kWake, static_cast<int32_t>(i));
      }
      return;
    }
  }
  // An instance still holding KV of prefilled requests that wait for a decode instance is
  // not stuck: the hand-off frees the KV and asks the policy again.
  if (inst.running.empty() && !inst.waiting.empty() &&
      inst.free_blocks == inst.setup.num_blocks) {
    throw std::logic_error(fmt::format(
        "instance {} at t={} ns: policy left {} waiting request(s) on an empty instance", i,
        now.time_since_epoch().count(), inst.waiting.size()));
  }
}

Engine::Impl::BatchTokens Engine::Impl::take_batch_steps(size_t i, const BatchPlan& plan,
                                                         int64_t run, bool priced) {
  InstanceState& inst = instances[i];
  inst.batch.clear();
  inst.shape.clear();
  inst.batch_decodes = run;
  BatchTokens t;
  t.decode = run;
  if (plan.decode_run) {
    for (const int32_t pos : inst.run_crossers) {
      SeqView& seq = inst.running[static_cast<size_t>(pos)];
      const int64_t extra =
          extra_blocks_for(seq.computed_tokens + 1, seq.blocks, inst.setup.block_size);
      seq.blocks += extra;
      t.new_blocks += extra;
    }
  }
  for (const ScheduledSeq& s : plan.scheduled) {
    const int32_t pos = running_pos_of(inst, s.id);
    if (pos == kNotRunning) bad_plan(i, fmt::format("schedules request {} that is not running", s.id));
    if (pos < run) bad_plan(i, fmt::format("schedules request {} of its decode run again", s.id));
    SeqView& seq = inst.running[static_cast<size_t>(pos)];
    if (s.tokens < 1 || s.tokens > seq.remaining_tokens()) {
      bad_plan(i, fmt::format("request {}: {} tokens scheduled, {} remaining", s.id, s.tokens,
                              seq.remaining_tokens()));
    }
    const int64_t extra = kv.new_blocks_for(inst, seq, s);
    t.new_blocks += extra;
    seq.blocks += extra;
    inst.batch.push_back({pos, s.tokens});
    const bool verifies = verifies_drafts(seq, s.tokens);
    if (s.tokens == 1 || verifies) {
      t.decode += s.tokens;
    } else {
      (seq.preemptions > 0 ? t.recompute : t.prompt) += s.tokens;
    }
    if (!priced) {
      const bool samples = seq.computed_tokens + s.tokens == seq.num_tokens();
      // A verification step samples the pending token and each draft.
      const int64_t rows = samples ? (verifies ? s.tokens : 1) : 0;
      inst.shape.segments.push_back({s.tokens, seq.computed_tokens + s.tokens, rows});
      // A prompt's images are encoded with the chunk that starts it (models/cost/vision.h). Only
      // such a chunk reads the request's spec, so decode steps cost no extra memory access.
      if (seq.computed_tokens == 0) {
        const RequestSpec& spec = workload.requests[static_cast<size_t>(s.id)];
        if (spec.images > 0) {
          inst.shape.encoder_inputs.push_back({spec.images, spec.patches_per_image});
        }
      }
    }
    RequestState& rs = requests[s.id];
    if (rs.first_scheduled_ns < 0) rs.first_scheduled_ns = now.time_since_epoch().count();
  }
  return t;
}

void Engine::Impl::start_batch(size_t i, Duration d, const BatchTokens& t, int64_t run) {
  InstanceState& inst = instances[i];
  if (d.count() <= 0) throw std::logic_error("cost model returned a non-positive duration");
  if (inst.batch_load_ns != 0) {
    d += Duration(inst.batch_load_ns);
    inst.stats.kv_load_ns += inst.batch_load_ns;
    inst.batch_load_ns = 0;
  }
  // Apportioned by tokens (pricing the decode steps alone instead gives the same miss causes
  // within 0.5 % on the DOPD bursty replay, at a second cost-model call per mixed iteration).
  const double per_token_ns =
      t.decode > 0 && t.decode < run + static_cast<int64_t>(inst.batch.size())
          ? static_cast<double>(d.count()) / static_cast<double>(t.decode + t.prompt + t.recompute)
          : 0.0;
  inst.batch_interference_ns = static_cast<int64_t>(per_token_ns * static_cast<double>(t.prompt));
  inst.batch_recompute_ns = static_cast<int64_t>(per_token_ns * static_cast<double>(t.recompute));
  inst.busy = true;
  inst.batch_start = now;
  inst.batch_end = now + d;
  push(now + d, Phase::kComplete, EventKind::kBatchDone, static_cast<int32_t>(i));
}

void Engine::Impl::on_schedule(size_t i) {
  InstanceState& inst = instances[i];
  inst.schedule_pending = false;
  if (inst.busy) return;
  if (inst.running.empty() && inst.waiting.empty()) return;
  InstanceView view = instance_view(i);
  const bool offers_run = config.fast_forward && !inst.setup.kv_reserved_only &&
                          !inst.setup.speculative && inst.setup.batching->plans_decode_runs();
  if (offers_run) {
    find_decode_run(inst);
    view.decode_run = &inst.decode_run;
  }
  BatchPlan& plan = inst.plan;
  plan.clear();
  if (!inst.setup.batching->next_batch(view, plan)) {
    on_no_batch(i, plan, view);
    return;
  }
  inst.run_ready = false;  // the plan changes `running`
  if (plan.empty()) bad_plan(i, "returned a batch but an empty plan");
  int64_t run = 0;  // the decode run's steps, running[0, run)
  if (plan.decode_run) {
    if (!offers_run || inst.decode_run.count == 0) {
      bad_plan(i, "schedules a decode run the view did not offer");
    }
    run = inst.decode_run.count;
    result.decode_run_iterations++;
  }
  apply_preemptions(i, inst, plan, run);
  apply_admissions(i, inst, plan);
  kv.reuse_cached_prefixes(inst, plan);

  // A batch its policy prices needs no shape for the cost model.
  const std::optional<Duration> priced = inst.setup.batching->batch_time(instance_view(i), plan);
  const BatchTokens t = take_batch_steps(i, plan, run, priced.has_value());
  if (t.new_blocks > inst.free_blocks) {
    bad_plan(i, fmt::format("needs {} new KV blocks, {} free", t.new_blocks, inst.free_blocks));
  }
  kv.take_blocks(inst, t.new_blocks);
  inst.stats.peak_used_blocks =
      std::max(inst.stats.peak_used_blocks, inst.setup.num_blocks - inst.free_blocks);
  if (inst.batch.empty() && run == 0) {
    // A plan that only preempted: ask again at once (the freed KV may admit work).
    request_schedule(i);
    return;
  }
  start_batch(i, priced ? *priced : price_batch(inst, run), t, run);
}

[[gnu::noinline]] void Engine::Impl::record_first_token(RequestId id, int64_t t_ns) {
  RequestState& rs = requests[id];
  rs.first_token_ns = t_ns;
  rs.prefill_instance = rs.instance;
  if (listener) {
    listener->on_first_token(id, t_ns);
    if (listener->stop_requested()) stopped = true;
  }
}

InstanceView Engine::Impl::instance_view(size_t i) const {
  const InstanceState& inst = instances[i];
  return {now, static_cast<int32_t>(i), inst.setup.block_size, inst.setup.num_blocks,
          inst.free_blocks, &inst.running, &inst.waiting};
}

void Engine::Impl::on_batch_done(size_t i) {
  InstanceState& inst = instances[i];
  const int64_t t_ns = now.time_since_epoch().count();
  inst.setup.batching->on_batch_done(instance_view(i), now - inst.batch_start);
  inst.busy = false;
  inst.stats.iterations++;
  inst.stats.busy_ns += (now - inst.batch_start).count();
  // The first position that leaves `running` (those before it stay where they are).
  size_t first_leaving = kNoneLeaving;
  if (inst.batch_decodes > 0) first_leaving = advance_decode_run(inst, t_ns);
  int64_t batch_tokens = inst.batch_decodes;
  for (const BatchItem& item : inst.batch) batch_tokens += item.tokens;
  count_iteration(i, inst.batch_decodes + static_cast<int64_t>(inst.batch.size()), batch_tokens);
  for (const BatchItem& item : inst.batch) {
    if (advance_batch_item(i, item, t_ns)) {
      first_leaving = std::min(first_leaving, static_cast<size_t>(item.running_pos));
    }
  }
  flush_gaps();
  if (first_leaving != kNoneLeaving) remove_leaving(i, first_leaving);
  // The decode run's survivors lead `running`; requests after them whose prompt this batch
  // finished are decode steps now and may follow.
  if (inst.batch_decodes > 0) complete_decode_run(inst);
  if (!fast_forward(i)) request_schedule(i);
  if (!handoffs.empty()) start_transfers();
  maybe_retire(i);
}

bool Engine::Impl::advance_batch_item(size_t i, const BatchItem& item, int64_t t_ns) {
  InstanceState& inst = instances[i];
  SeqView& seq = inst.running[static_cast<size_t>(item.running_pos)];
  const bool verifies = verifies_drafts(seq, item.tokens);
  if (item.tokens > 1 && !verifies) {
    inst.stats.prefill_tokens += item.tokens;
  } else {
    inst.stats.decode_tokens += item.tokens;
  }
  const int64_t computed_before = seq.computed_tokens;
  seq.computed_tokens += item.tokens;
  // The drafts kept; the KV of the rejected ones is dropped.
  const int64_t kept = verifies ? kept_drafts(inst, seq) : 0;
  if (verifies) seq.computed_tokens -= seq.draft_tokens - kept;
  if ((item.tokens == 1 || verifies) &&
      (inst.batch_interference_ns | inst.batch_recompute_ns) != 0) {
    seq.interference_ns += inst.batch_interference_ns;
    seq.recompute_ns += inst.batch_recompute_ns;
  }
  // Blocks fill when an iteration computes prompt tokens, or when a decode step completes a
  // block (cached when the request's hash ids cover its answer).
  const int64_t bs = inst.setup.block_size;
  if (inst.setup.prefix_caching && (computed_before < seq.prompt_tokens ||
                                    (verifies ? seq.computed_tokens / bs != computed_before / bs
                                              : seq.computed_tokens % bs == 0))) {
    kv.register_computed_blocks(inst, seq);
  }
  if (seq.split_tokens > 0 && config.transfer.mode == KvTransferMode::kChunked) {
    if (const int32_t target = requests[seq.id].split_target; target >= 0) {
      stream_chunk(i, target, item.tokens);
    }
  }
  const bool at_split = at_split_point(seq);
  if (!verifies && seq.computed_tokens != seq.num_tokens()) return at_split;
  // The step samples one token, or with drafts the kept ones and the target's next token.
  for (int64_t sampled = 0; sampled <= kept; ++sampled) {
    seq.generated_tokens++;
    record_token(seq, t_ns);
  }
  seq.draft_tokens = inst.setup.speculative && seq.generated_tokens < seq.output_tokens
                         ? inst.setup.speculative->num_speculative_tokens
                         : 0;
  return at_split || seq.generated_tokens == seq.output_tokens;
}

void Engine::Impl::remove_leaving(size_t i, size_t first_leaving) {
  InstanceState& inst = instances[i];
  for (size_t pos = first_leaving; pos < inst.running.size(); ++pos) {
    SeqView& seq = inst.running[pos];
    if (seq.generated_tokens == seq.output_tokens) {
      finish(i, inst, seq);
    } else if (at_split_point(seq)) {
      requests[seq.id].running_pos = kNotRunning;
      handoffs.push_back({seq, static_cast<int32_t>(i), now, inst.batch_start, 0});
    } else {
      continue;
    }
    seq.id = -1;
  }
  assert(inst.running[first_leaving].id < 0);
  // Those before the first that left keep their positions; those after move down, in order
  // (RequestState::running_pos).
  const auto gone =
      std::remove_if(inst.running.begin() + static_cast<std::ptrdiff_t>(first_leaving),
                     inst.running.end(), [](const SeqView& s) { return s.id < 0; });
  inst.running.erase(gone, inst.running.end());
}

void Engine::Impl::flush_iteration_log() {
  for (const CountedIteration& it : iteration_log_) {
    InstanceStats& stats = instances[static_cast<size_t>(it.instance)].stats;
    stats.batch_requests.add(it.requests);
    stats.batch_tokens.add(it.tokens);
  }
  iteration_log_.clear();
}

void Engine::Impl::finish(size_t i, InstanceState& inst, const SeqView& seq) {
  RequestState& rs = requests[seq.id];
  kv.release_blocks(inst, seq.blocks, seq.id);
  inst.outstanding--;
  rs.running_pos = kNotRunning;
  set_in_system(-1);
  result.requests_finished++;
  // The request's arrival and lengths are its workload entry's, copied into `seq` when it was
  // routed and never changed: read from `seq`, which this batch touched, rather than from the
  // workload, which at millions of requests is far from the CPU caches.
  if (elastic()) {
    ObservedFinish f;
    f.arrival = seq.arrival;
    f.ttft = Duration{rs.first_token_ns} - seq.arrival.time_since_epoch();
    f.e2e = now - seq.arrival;
    f.output_tokens = seq.output_tokens;
    f.prompt_tokens = seq.prompt_tokens;
    f.tpot_ns = seq.output_tokens > 1 ? static_cast<double>(now.time_since_epoch().count() -
                                                            rs.first_token_ns) /
                                            static_cast<double>(seq.output_tokens - 1)
                                      : 0.0;
    observed_finishes.push_back(f);
  }
  if (listener) {
    RequestRecord r;
    r.request_id = seq.id;
    r.instance_id = static_cast<int32_t>(i);
    r.arrival_ns = seq.arrival.time_since_epoch().count();
    r.first_scheduled_ns = rs.first_scheduled_ns;
    r.first_token_ns = rs.first_token_ns;
    r.done_ns = now.time_since_epoch().count();
    r.prompt_tokens = seq.prompt_tokens;
    r.output_tokens = seq.output_tokens;
    r.preemptions = rs.preemptions;
    r.max_tbt_ns = seq.max_tbt_ns;
    r.tbt_slo_violations = seq.tbt_violations;
    if (config.record_token_times) {
      r.token_times_ns = std::move(token_times[seq.id]);
    }
    r.warmup = is_warmup(seq.id);
    r.cached_tokens = rs.cached_tokens;
    if (const auto hits = kv.take_tier_hits(seq.id)) {
      std::tie(r.dram_hit_tokens, r.remote_hit_tokens) = *hits;
    }
    r.split_tokens = rs.split_tokens;
    r.prefill_instance_id = rs.prefill_instance;
    r.kv_arrived_ns = rs.kv_arrived_ns;
    r.interference_ns = seq.interference_ns;
    r.recompute_ns = seq.recompute_ns;
    listener->on_request(r);
    if (listener->stop_requested()) stopped = true;
  }
  on_request_done(seq.id);
}

RunResult Engine::Impl::run() {
  if (config.closed_loop.clients > 0) {
    start_clients(kTimeZero);
  } else {
    schedule_next_arrival();
  }
  if (config.sample_interval.count() > 0) {
    push(kTimeZero + config.sample_interval, Phase::kSample, EventKind::kSample, -1);
  }
  if (config.max_sim_time) push(kTimeZero + *config.max_sim_time, Phase::kStop, EventKind::kStop, -1);
  if (elastic()) {
    sample_cluster_size();
    push(kTimeZero + config.elastic.control_interval, Phase::kControl, EventKind::kControl, -1);
  }

  SimTime last_completion{};
  while (!queue.empty() && !stopped) {
    const Event e = queue.pop();
    now = e.time;
    fingerprint(e);
    result.events++;
    if (e.target >= 0) stale_loads.add(static_cast<size_t>(e.target));
    switch (e.kind) {
      case EventKind::kArrival:
        on_arrival(e.request);
        break;
      case EventKind::kRoute:
        on_route();
        break;
      case EventKind::kSchedule:
        on_schedule(static_cast<size_t>(e.target));
        break;
      case EventKind::kBatchDone:
        on_batch_done(static_cast<size_t>(e.target));
        last_completion = now;
        break;
      case EventKind::kSample:
        on_sample();
        break;
      case EventKind::kStop:
        stopped = true;
        break;
      case EventKind::kTransferDone:
        on_transfer_done(static_cast<size_t>(e.target), e.request);
        break;
      case EventKind::kControl:
        on_control();
        break;
      case EventKind::kInstanceReady:
        on_instance_ready(static_cast<size_t>(e.target));
        break;
      case EventKind::kFrontendDone:
        on_frontend_done(static_cast<size_t>(e.target), e.request);
        break;
      case EventKind::kWake: {
        InstanceState& inst = instances[static_cast<size_t>(e.target)];
        inst.wakes.erase(inst.wakes.find(e.time));
        if (!inst.busy && !inst.schedule_pending) on_schedule(static_cast<size_t>(e.target));
        break;
      }
    }
    if (!done_ids.empty()) retire_done_requests();
    if (config.progress && (result.events & 0xFFFF) == 0 && result.requests_total > 0) {
      config.progress(static_cast<double>(result.requests_finished) /
                      static_cast<double>(result.requests_total));
    }
    if (all_done() && next_arrival >= workload.requests.size() && !stopped) {
      // Everything finished: stop without draining sampling/stop events.
      if (handoffs.empty() && in_transit.empty() &&
          std::none_of(instances.begin(), instances.end(), [](const InstanceState& s) {
            return s.busy || !s.running.empty() || !s.waiting.empty();
          })) {
        break;
      }
    }
  }
  if (!stopped && !all_done()) {
    throw std::logic_error(fmt::format(
        "simulation stalled at t={} ns: {} request(s) neither finished nor in flight",
        now.time_since_epoch().count(),
        result.requests_total - result.requests_finished - result.requests_rejected));
  }
  result.end_time = stopped ? now : std::max(last_completion, now);
  set_in_system(0);  // close the integral at `now`
  const double span_ns = static_cast<double>(result.end_time.time_since_epoch().count());
  result.mean_in_system = span_ns > 0 ? static_cast<double>(in_system_area_ns / span_ns) : 0.0;
  result.requests_unfinished =
      result.requests_total - result.requests_finished - result.requests_rejected;
  result.num_gpus = peak_gpus;
  flush_iteration_log();
  for (size_t i = 0; i < instances.size(); ++i) {
    const InstanceState& inst = instances[i];
    const bool retired = inst.state == Lifecycle::kRetired;
    const SimTime until = retired ? inst.retired_at : std::max(result.end_time, inst.alive_from);
    result.gpu_seconds += inst.setup.tp * to_seconds(until - inst.alive_from);
    result.instances[i] = inst.stats;
    if (retired) result.instances[i].retired_ns = inst.retired_at.time_since_epoch().count();
  }
  return std::move(result);
}

const char* role_name(InstanceRole role) {
  switch (role) {
    case InstanceRole::kUnified:
      return "unified";
    case InstanceRole::kPrefill:
      return "prefill";
    case InstanceRole::kDecode:
      return "decode";
  }
  return "?";
}

const char* lifecycle_name(Lifecycle state) {
  switch (state) {
    case Lifecycle::kStarting:
      return "starting";
    case Lifecycle::kActive:
      return "active";
    case Lifecycle::kDraining:
      return "draining";
    case Lifecycle::kRetired:
      return "retired";
  }
  return "?";
}

Engine::Engine(EngineConfig config, std::vector<InstanceSetup> instances,
               std::unique_ptr<RoutingPolicy> router, Workload workload, RecordListener* listener,
               std::unique_ptr<RoutingPolicy> decode_router)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(instances), std::move(router),
                                   std::move(workload), listener, std::move(decode_router))) {}

Engine::~Engine() = default;

RunResult Engine::run() { return impl_->run(); }

}  // namespace servesim::sim
