// Engine::Impl, decode runs and the exact fast-forward of steady decode
// (EngineConfig::fast_forward): iterations run in a loop instead of through events, with
// identical results (docs/speed.md).
#include "sim/engine_impl.h"

namespace servesim::sim {

bool Engine::Impl::extend_decode_run(InstanceState& inst) {
  DecodeRun& run = inst.decode_run;
  const SeqView& seq = inst.running[static_cast<size_t>(run.count)];
  if (seq.split_tokens != 0 || !seq.is_decode()) return false;
  add_to_decode_run(seq, static_cast<int32_t>(run.count), inst.setup.block_size, run,
                    inst.run_to_first_finish, inst.run_crossers);
  return true;
}

void Engine::Impl::complete_decode_run(InstanceState& inst) {
  while (inst.decode_run.count < static_cast<int64_t>(inst.running.size()) &&
         extend_decode_run(inst)) {
  }
  inst.run_ready = true;
}

void Engine::Impl::find_decode_run(InstanceState& inst) {
  if (inst.run_ready) return;
  clear_decode_run(inst);
  complete_decode_run(inst);
}

size_t Engine::Impl::advance_decode_run(InstanceState& inst, int64_t t_ns) {
  const bool charged = (inst.batch_interference_ns | inst.batch_recompute_ns) != 0;
  const bool registers_or_times = inst.setup.prefix_caching || config.record_token_times;
  if (registers_or_times) {
    return charged ? advance_decode_run_as<true, true>(inst, t_ns)
                   : advance_decode_run_as<false, true>(inst, t_ns);
  }
  return charged ? advance_decode_run_as<true, false>(inst, t_ns)
                 : advance_decode_run_as<false, false>(inst, t_ns);
}

template <bool kCharged, bool kRegistersOrTimes>
size_t Engine::Impl::advance_decode_run_as(InstanceState& inst, int64_t t_ns) {
  const int64_t run = inst.batch_decodes;
  const int64_t block_size = inst.setup.block_size;
  const int64_t interference_ns = inst.batch_interference_ns;
  const int64_t recompute_ns = inst.batch_recompute_ns;
  const auto first_measured = static_cast<RequestId>(warmup_total);
  const int64_t objective_ns = tbt_objective_ns_;
  SeqView* const running = inst.running.data();
  int32_t finished = 0;
  size_t first_finished = kNoneLeaving;
  clear_decode_run(inst);
  // The loop's state in locals (the stores to each request's fields cannot change them): the new
  // run's sums and the pending TBT gaps.
  DecodeRun next;
  int64_t to_first_finish = std::numeric_limits<int64_t>::max();
  GapRun gaps = pending_gaps_;
  inst.stats.decode_tokens += run;
  for (int64_t pos = 0; pos < run; ++pos) {
    SeqView& seq = running[pos];
    seq.computed_tokens++;
    if constexpr (kCharged) {
      seq.interference_ns += interference_ns;
      seq.recompute_ns += recompute_ns;
    }
    // (The general loop's other case, prompt tokens computed, is not one of a decode step.)
    if constexpr (kRegistersOrTimes) {
      if (inst.setup.prefix_caching && seq.computed_tokens % block_size == 0) {
        kv.register_computed_blocks(inst, seq);
      }
    }
    seq.generated_tokens++;
    // A decode step's request has sampled its first token already.
    record_next_token(seq, t_ns, first_measured, objective_ns, gaps, result.tbt_ns);
    if constexpr (kRegistersOrTimes) record_token_time(seq, t_ns);
    if (seq.generated_tokens == seq.output_tokens) {
      if (finished++ == 0) first_finished = static_cast<size_t>(pos);
    } else {
      add_to_decode_run(seq, static_cast<int32_t>(pos) - finished, block_size, next,
                        to_first_finish, inst.run_crossers);
    }
  }
  pending_gaps_ = gaps;
  inst.decode_run = next;
  inst.run_to_first_finish = to_first_finish;
  return first_finished;
}

bool Engine::Impl::in_steady_decode(size_t i, SimTime horizon) {
  InstanceState& inst = instances[i];
  if (!config.fast_forward || inst.running.empty() || !inst.waiting.empty() || !handoffs.empty() ||
      inst.setup.kv_reserved_only || inst.setup.speculative || inst.batch_load_ns != 0) {
    return false;
  }
  if (horizon <= now) return false;
  // Steady decode: the decode run is every running request.
  find_decode_run(inst);
  if (inst.decode_run.count != static_cast<int64_t>(inst.running.size())) return false;
  if (!inst.setup.batching->plans_steady_decode(instance_view(i))) return false;
  // With prefix caching, decode steps register nothing unless a request's hash ids cover its
  // answer (keys still to register: KvManager::register_computed_blocks()); such instances step.
  if (inst.setup.prefix_caching) {
    for (const SeqView& seq : inst.running) {
      if (kv.registering(seq.id)) return false;
    }
  }
  return true;
}

// The iterations fast_forward() runs on one instance. A step needs a new block where its context
// outgrows the blocks held (by one token: the KV always holds the computed tokens): crossers are
// the positions whose context in the current iteration exceeds what their blocks hold. From the
// second iteration on, contexts[pos] is that context and caps[pos] the tokens running[pos]'s
// blocks take (blocks * block_size); in the first, the decode run gives the crossers and each
// context is computed_tokens + 1. context_sum, the sum of the contexts, is all the cost model
// needs of a decode batch (it grows by the batch size each iteration).
//
// From the second iteration on, every running request's previous token came at the iteration's
// start, so every gap is the iteration's duration: the tokens are recorded for the whole batch at
// once (`lag` of them, not yet in any request's state) and each request's state is brought up to
// date when the span ends (settle()).
struct Engine::Impl::SteadyDecodeSpan {
  Impl& e;
  InstanceState& inst;
  const size_t i;
  const int32_t target;
  const int64_t block_size;
  const size_t decodes;
  int64_t to_first_finish;  // iterations until the first request finishes, that one included
  int64_t context_sum;
  std::vector<int32_t>& crossers;
  std::vector<int64_t>& contexts;
  std::vector<int64_t>& caps;
  bool per_position = false;  // contexts and caps filled
  int64_t lag = 0;  // tokens each request computed and sampled that its state does not show yet
  int64_t lag_last_ns = 0, lag_max_gap = 0, lag_violations = 0;
  int64_t measured_requests = -1;  // not warm-up: their gaps go into the TBT histogram

  // The batch: every running request's decode step (a decode run), as on_schedule() plans it.
  SteadyDecodeSpan(Impl& engine, size_t instance)
      : e(engine),
        inst(engine.instances[instance]),
        i(instance),
        target(static_cast<int32_t>(instance)),
        block_size(inst.setup.block_size),
        decodes(inst.running.size()),
        to_first_finish(inst.run_to_first_finish),
        context_sum(inst.decode_run.context_sum),
        crossers(engine.ff_crossers_),
        contexts(engine.ff_contexts_),
        caps(engine.ff_caps_) {
    crossers.swap(inst.run_crossers);
    inst.run_ready = false;  // the iterations below change `running`
    inst.batch.clear();
    inst.batch_decodes = static_cast<int64_t>(decodes);
  }

  int64_t context_of(size_t pos) const {
    return per_position ? contexts[pos] : inst.running[pos].computed_tokens + 1;
  }

  // The KV blocks the next iteration's steps need.
  int64_t new_blocks() const {
    int64_t blocks = 0;
    for (const int32_t pos : crossers) {
      blocks += extra_blocks_for(context_of(static_cast<size_t>(pos)), inst.running[pos].blocks,
                                 block_size);
    }
    return blocks;
  }

  // The iteration starts now: on_schedule() with a plan of every running decode step.
  void start_iteration(int64_t new_blocks) {
    e.fingerprint(Event{e.now, Phase::kSchedule, EventKind::kSchedule, target, 0, 0});
    e.result.events++;
    inst.setup.batching->on_steady_decode_step(e.instance_view(i));
    if (new_blocks > 0) {
      for (const int32_t pos : crossers) {
        SeqView& seq = inst.running[pos];
        seq.blocks +=
            extra_blocks_for(context_of(static_cast<size_t>(pos)), seq.blocks, block_size);
        if (per_position) caps[pos] = seq.blocks * block_size;
      }
      e.kv.take_blocks(inst, new_blocks);
    }
    // Blocks reserved for KV on its way here count too, as on_schedule() counts them.
    inst.stats.peak_used_blocks =
        std::max(inst.stats.peak_used_blocks, inst.setup.num_blocks - inst.free_blocks);
  }

  // The iteration's duration, from the batch's sums where the cost model prices them.
  Duration price_iteration() {
    const models::IterationCostModel& cost = *inst.setup.cost_model;
    const auto n = static_cast<int64_t>(decodes);
    const std::optional<Duration> from_sums = cost.decode_iteration_time({n, context_sum, n});
    const Duration d =
        from_sums ? *from_sums
                  : cost.iteration_time(decode_shape(inst.shape, decodes, [this](size_t pos) {
                      return context_of(pos);
                    }));
    if (d.count() <= 0) throw std::logic_error("cost model returned a non-positive duration");
    inst.batch_interference_ns = 0;
    inst.batch_recompute_ns = 0;
    e.result.fast_forwarded_iterations++;
    e.result.decode_run_iterations++;
    return d;
  }

  // The next iteration's contexts, block capacities and crossers.
  void advance_positions() {
    crossers.clear();
    if (!per_position) {
      // The first iteration ended (no request's state has moved yet): the next contexts.
      contexts.resize(decodes);
      caps.resize(decodes);
      for (size_t pos = 0; pos < decodes; ++pos) {
        const SeqView& seq = inst.running[pos];
        contexts[pos] = seq.computed_tokens + 2;
        caps[pos] = seq.blocks * block_size;
        if (contexts[pos] > caps[pos]) crossers.push_back(static_cast<int32_t>(pos));
      }
      per_position = true;
    } else {
      for (size_t pos = 0; pos < decodes; ++pos) {
        if (++contexts[pos] > caps[pos]) crossers.push_back(static_cast<int32_t>(pos));
      }
    }
    context_sum += static_cast<int64_t>(decodes);
  }

  // Every running request's token at t_ns, one gap of `d` each: recorded one by one in the first
  // iteration (or with token times kept), else for the whole batch at once.
  void record_tokens(Duration d, int64_t t_ns, bool first) {
    if (first || e.config.record_token_times) {
      for (SeqView& seq : inst.running) {
        seq.computed_tokens++;
        seq.generated_tokens++;
        e.record_token(seq, t_ns);
      }
      e.flush_gaps();
      return;
    }
    // record_token() of every request, with the same gap.
    lag++;
    lag_last_ns = t_ns;
    lag_max_gap = std::max(lag_max_gap, d.count());
    if (e.config.slo.tbt_p99 && d > *e.config.slo.tbt_p99) lag_violations++;
    if (measured_requests < 0) {
      measured_requests = 0;
      for (const SeqView& seq : inst.running) {
        if (!e.is_warmup(seq.id)) measured_requests++;
      }
    }
    if (measured_requests > 0) e.result.tbt_ns.add(d.count(), measured_requests);
  }

  // The iteration ends: on_batch_done() of a batch where nothing finishes.
  void end_iteration(Duration d, bool first) {
    e.now += d;
    e.fingerprint(Event{e.now, Phase::kComplete, EventKind::kBatchDone, target, 0, 0});
    e.result.events++;
    inst.stats.iterations++;
    inst.stats.busy_ns += d.count();
    inst.stats.decode_tokens += static_cast<int64_t>(inst.running.size());
    e.count_iteration(i, static_cast<int64_t>(inst.running.size()),
                      static_cast<int64_t>(inst.running.size()));
    advance_positions();
    record_tokens(d, e.now.time_since_epoch().count(), first);
    to_first_finish--;
  }

  // Brings each request's state up to date with the tokens recorded for the whole batch.
  void settle() {
    if (lag == 0) return;
    for (SeqView& seq : inst.running) {
      seq.computed_tokens += lag;
      seq.generated_tokens += lag;
      seq.last_token_ns = lag_last_ns;
      seq.max_tbt_ns = std::max(seq.max_tbt_ns, lag_max_gap);
      seq.tbt_violations += lag_violations;
    }
    lag = 0;
  }
};

bool Engine::Impl::fast_forward(size_t i) {
  const SimTime horizon = queue.empty() ? SimTime::max() : queue.top().time;
  if (!in_steady_decode(i, horizon)) return false;
  SteadyDecodeSpan span(*this, i);
  for (bool first = true;; first = false) {
    const int64_t new_blocks = span.new_blocks();
    if (new_blocks > span.inst.free_blocks) {
      span.settle();
      request_schedule(i);
      return true;
    }
    span.start_iteration(new_blocks);
    const Duration d = span.price_iteration();
    if (now + d >= horizon || span.to_first_finish == 1) {
      // That iteration is left in flight as an ordinary batch.
      span.settle();
      span.inst.busy = true;
      span.inst.batch_start = now;
      span.inst.batch_end = now + d;
      push(now + d, Phase::kComplete, EventKind::kBatchDone, span.target);
      return true;
    }
    span.end_iteration(d, first);
  }
}

}  // namespace servesim::sim
