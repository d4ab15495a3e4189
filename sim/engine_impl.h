// The engine's state and the declarations of its parts. Internal to servesim_sim: included only
// by the files that define Engine::Impl's members (docs/architecture.md "The engine's files"):
//   engine.cc              construction, events, batching and completion, the main loop
//   engine_arrivals.cc     request sources (open and closed loop, warm-up, sessions) and routing
//   engine_fast_forward.cc decode runs and the exact fast-forward of steady decode
//   engine_kv_transfer.cc  disaggregated KV hand-offs from prefill to decode instances
//   engine_sampling.cc     time-series samples and the idle / stalled checks
//   engine_elastic.cc      elastic clusters: controller ticks, starting and retiring instances
// Contract: every member keeps the meaning it has in this declaration whichever file defines it;
// the event fingerprint and every result are those of one engine, however it is split.
#pragma once

#include "sim/engine.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <set>
#include <span>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "core/error.h"
#include "core/rng.h"
#include "sim/event_queue.h"
#include "sim/instance_state.h"
#include "sim/kv_manager.h"
#include "sim/prefix_cache.h"
#include "sim/request_ring.h"

namespace servesim::sim {
namespace detail {

// Instance indices, each listed once, in the order they were first added; sized with the
// instances (resize) before any is added.
class InstanceSet {
 public:
  void resize(size_t instances) { listed_.resize(instances, 0); }
  void add(size_t i) {
    if (listed_[i]) return;
    listed_[i] = 1;
    items_.push_back(static_cast<int32_t>(i));
  }
  void clear() {
    for (int32_t i : items_) listed_[static_cast<size_t>(i)] = 0;
    items_.clear();
  }
  const std::vector<int32_t>& items() const { return items_; }

 private:
  std::vector<int32_t> items_;
  std::vector<uint8_t> listed_;  // listed_[i]: whether i is in items_
};

// A run of equal TBT gaps not yet added to a histogram: a decode batch's steps mostly share their
// gap (each had its previous token at the same step), so they go in as one add.
struct GapRun {
  int64_t gap = -1;
  int64_t count = 0;
  [[gnu::always_inline]] void add(int64_t g, LogHistogram& histogram) {
    if (g != gap) {
      flush(histogram);
      gap = g;
    }
    ++count;
  }
  void flush(LogHistogram& histogram) {
    if (count > 0) histogram.add(gap, count);
    count = 0;
  }
};

// A prefilled request on its way from a prefill to a decode instance.
struct Handoff {
  SeqView seq;            // as it left the prefill instance's running list (blocks held there)
  int32_t source = -1;    // prefill instance
  SimTime ready{};        // when its prefill finished
  SimTime prefill_start{};  // start of the iteration that finished the prefill
  int64_t reserved_blocks = 0;  // on the decode instance, once the transfer started
};

// The event fingerprint's hash step.
inline uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdULL;
  return h ^ (h >> 33);
}

}  // namespace detail

using namespace detail;  // the engine's own state (sim/instance_state.h) and KV manager

struct Engine::Impl {
  EngineConfig config;
  std::vector<InstanceState> instances;
  std::unique_ptr<RoutingPolicy> router;
  std::unique_ptr<RoutingPolicy> decode_router;
  Workload workload;
  RecordListener* listener;

  // Per-request state by id, held from a request's arrival event until it is done (retired after
  // the event that finished or rejected it): memory follows the requests in flight.
  RequestRing<RequestState> requests;
  RequestRing<std::vector<int64_t>> token_times;  // with config.record_token_times
  std::vector<RequestId> done_ids;  // finished or rejected in the current event: retired after it
  KvManager kv{instances, workload.requests, requests};  // KV blocks and prefix cache
  EventQueue queue;
  SimTime now{};
  size_t next_arrival = 0;  // index of the next request to arrive
  // Open loop: the next request sent at its workload arrival time (later turns of sessions are
  // skipped: they are sent when the request they follow is done).
  size_t next_open = 0;
  // successor[i]: the later turn that follows request i, or -1; empty without sessions.
  std::vector<RequestId> successor;
  size_t next_issue = 0;    // closed loop: index of the next request a client sends
  std::optional<RngStream> client_jitter;  // closed loop: think_time_jitter draws
  // Benchmark phases (ClosedLoopSpec): warm-up requests are ids [0, warmup_total). Closed-loop
  // clients send requests below issue_limit; open-loop arrivals at or after warmup_total wait
  // for the measured phase when it starts on the drain, shifted by arrival_shift.
  size_t warmup_total = 0;
  bool is_warmup(RequestId id) const { return static_cast<size_t>(id) < warmup_total; }
  int64_t warmup_left = 0;   // warm-up requests neither finished nor rejected
  bool measured_phase = true;
  size_t issue_limit = 0;
  Duration arrival_shift{};
  std::map<RequestId, SeqView> in_frontend;  // routed requests inside an instance's front end
  int64_t pending_arrivals = 0;  // arrival events pushed and not yet processed
  bool sampling_paused = false;  // no sample event pending over an idle span (on_sample)
  std::vector<RequestId> pending_route;
  bool route_pending = false;
  std::vector<InstanceLoad> loads;
  std::vector<InstanceQueues> queues_view;
  // The instances whose load or queue view may have changed since on_route() last refreshed them:
  // each event's target, each routed request's instance, both ends of a KV hand-off, every
  // instance at a control tick. on_route() refreshes only these (a fleet's routing costs what
  // changed, not its size). views_of: instances.data() when queues_view was last built (an added
  // instance moves them all: every view is rebuilt).
  InstanceSet stale_loads;
  // The entries of `loads` refresh_load() rewrote since the arrival router's previous route()
  // call (ClusterView::changed).
  InstanceSet loads_written;
  const InstanceState* views_of = nullptr;

  // Disaggregation: prefilled requests waiting for room on a decode instance (FIFO), requests
  // whose KV is on the wire, and when each link is next free.
  bool disaggregated = false;
  int64_t max_decode_blocks = 0;
  std::deque<Handoff> handoffs;
  std::map<RequestId, Handoff> in_transit;
  std::map<std::pair<int32_t, int32_t>, SimTime> link_free_at;
  std::vector<InstanceLoad> decode_loads;

  int64_t in_system = 0;
  SimTime in_system_since{};
  long double in_system_area_ns = 0;  // integral of in_system over time

  RunResult result;
  GapRun pending_gaps_;  // add_gap(): the run not yet in result.tbt_ns
  // count_iteration(): iterations not yet in their instance's batch-size counts.
  struct CountedIteration {
    int32_t instance;
    int32_t requests;
    int64_t tokens;
  };
  std::vector<CountedIteration> iteration_log_;
  // config.slo.tbt_p99 in ns (no objective: the largest gap), for record_token().
  int64_t tbt_objective_ns_ = std::numeric_limits<int64_t>::max();
  models::BatchShape run_shape_;  // price_batch(): a whole shape, for models that need one
  // fast_forward(): positions in `running` of the requests whose next step needs a new KV block,
  // the tokens each one's held blocks take, and each one's context in the current iteration.
  std::vector<int32_t> ff_crossers_;
  std::vector<int64_t> ff_caps_;
  std::vector<int64_t> ff_contexts_;
  bool stopped = false;

  // Elastic clusters: observations since the controller's previous tick, and GPUs held.
  std::vector<ObservedArrival> observed_arrivals;
  std::vector<ObservedFinish> observed_finishes;
  int alive_gpus = 0;
  int peak_gpus = 0;
  bool elastic() const { return config.elastic.controller != nullptr; }

  Impl(EngineConfig c, std::vector<InstanceSetup> setups, std::unique_ptr<RoutingPolicy> r,
       Workload w, RecordListener* l, std::unique_ptr<RoutingPolicy> dr);

  // Fills `successor` from the workload's later turns. Throws std::invalid_argument for a turn
  // that follows no earlier request, two turns following one request, or sessions combined with
  // closed-loop clients or warm-up requests.
  void link_session_turns();

  // ---- event plumbing (engine.cc) ----

  void push(SimTime t, Phase phase, EventKind kind, int32_t target);

  void fingerprint(const Event& e);

  void set_in_system(int64_t delta);

  bool all_done() const;

  // ---- request sources and routing (engine_arrivals.cc) ----

  // Open loop: pushes the arrival of the next request sent at its own time (one is pending at a
  // time; its arrival pushes the next).
  void schedule_next_arrival();

  // Request `id` arrives at `t`. Arrival events name their request: closed-loop clients started
  // at different times issue requests out of time order.
  void push_arrival(SimTime t, RequestId id);

  // Request `id` gets its per-request state (RequestRing::admit()): when its arrival is pushed.
  void admit_request(RequestId id);
  // The requests of done_ids give their state back.
  void retire_done_requests();

  // Closed loop: the next request of the workload arrives at `t`, plus its client's jitter draw
  // (none past the phase's limit).
  void issue_closed_loop_request(SimTime t);

  // Starts a phase of closed-loop clients at `start`: client k sends at start + k x ramp / clients.
  void start_clients(SimTime start);

  // A request finished or was rejected: its closed-loop client moves on, and the measured phase
  // starts when it was the last warm-up request of a draining benchmark.
  void on_request_done(RequestId id);

  // next_arrival counts processed arrivals; in an open loop it is also the next request to push.
  void on_arrival(RequestId id);

  void refresh_load(size_t i);
  // Brings loads and queues_view up to date for on_route() (see stale_loads).
  void refresh_route_views();

  // Asks the router whether to split the request it just placed on `target`.
  void apply_split(const ClusterView& view, const RequestSpec& spec, int32_t target, SeqView& seq,
                   RequestState& rs);

  void on_route();

  // `seq` joins the waiting queue of instance i.
  void enqueue(size_t i, const SeqView& seq);

  void on_frontend_done(size_t i, RequestId id);

  void request_schedule(size_t i);

  // ---- batching (engine.cc) ----

  int32_t running_pos_of(const InstanceState& inst, RequestId id);

  [[noreturn]] void bad_plan(size_t i, const std::string& what) const;

  // `protected_run`: running[0, protected_run) is the decode run the plan schedules.
  void apply_preemptions(size_t i, InstanceState& inst, const BatchPlan& plan,
                         int64_t protected_run);

  void apply_admissions(size_t i, InstanceState& inst, const BatchPlan& plan);

  // ---- decode runs (engine_fast_forward.cc), scheduling (engine.cc) ----

  // Adds running[run.count] to the instance's decode run if it is a one-token decode step of a
  // request that stays; returns whether it was.
  bool extend_decode_run(InstanceState& inst);
  // Adds `seq`, a decode step at position `pos` right after `run`, to `run`, the fewest tokens
  // left to sample in it and its block crossers. Inlined: the batch-done of a decode run calls it
  // for every request that stays, with the sums in locals.
  [[gnu::always_inline]] static void add_to_decode_run(const SeqView& seq, int32_t pos,
                                                       int64_t block_size, DecodeRun& run,
                                                       int64_t& to_first_finish,
                                                       std::vector<int32_t>& crossers) {
    const int64_t extra = extra_blocks_for(seq.computed_tokens + 1, seq.blocks, block_size);
    if (extra > 0) {
      run.new_blocks += extra;
      crossers.push_back(pos);
    }
    run.context_sum += seq.computed_tokens + 1;
    run.count++;
    to_first_finish = std::min(to_first_finish, seq.output_tokens - seq.generated_tokens);
  }
  static void clear_decode_run(InstanceState& inst) {
    inst.decode_run = {};
    inst.run_crossers.clear();
    inst.run_to_first_finish = std::numeric_limits<int64_t>::max();
  }
  // Extends the instance's decode run as far down inst.running as it goes; it is then ready.
  void complete_decode_run(InstanceState& inst);
  // Makes the instance's decode run that of inst.running as it is, unless it already is.
  void find_decode_run(InstanceState& inst);

  // The cost model's time for the planned batch: the decode run (`run` steps) and inst.shape.
  Duration price_batch(InstanceState& inst, int64_t run);

  // on_schedule() when the policy returned no batch: checks the plan, sets the policy's wake-up
  // if it asked for one, and refuses an instance left stuck.
  void on_no_batch(size_t i, const BatchPlan& plan, const InstanceView& view);
  // A batch's token counts by kind (for the interference shares) and the KV blocks it needs.
  struct BatchTokens {
    int64_t new_blocks = 0;
    int64_t decode = 0;     // one-token decode steps, the decode run's included
    int64_t prompt = 0;     // first-time prompt computation
    int64_t recompute = 0;  // recomputation after a preemption
  };
  // Validates the plan's listed steps and grows their KV (the decode run's crossers first): the
  // instance's batch, and its shape unless the policy `priced` the batch.
  BatchTokens take_batch_steps(size_t i, const BatchPlan& plan, int64_t run, bool priced);
  // Starts instance i's batch of duration `d` (plus any tier load) and queues its end.
  void start_batch(size_t i, Duration d, const BatchTokens& t, int64_t run);

  void on_schedule(size_t i);

  // ---- completion (engine.cc) ----

  // Whether computing `tokens` of `seq` completes a verification step of its drafts (the pending
  // token and every draft in KV: InstanceSetup::speculative).
  static bool verifies_drafts(const SeqView& seq, int64_t tokens) {
    return seq.draft_tokens > 0 && seq.computed_tokens + tokens == seq.num_tokens();
  }
  // The drafts a verification step of `seq` keeps: SpeculativeDecoding::accepted_drafts() of the
  // draw fixed by (speculative_seed, request id, tokens generated so far), at most its drafts and
  // what it has left to sample besides the target's own next token.
  static int64_t kept_drafts(const InstanceState& inst, const SeqView& seq) {
    if (!inst.setup.speculative) return 0;
    const uint64_t h =
        servesim::mix64(servesim::mix64(inst.setup.speculative_seed, static_cast<uint64_t>(seq.id)),
                        static_cast<uint64_t>(seq.generated_tokens));
    const double u = static_cast<double>(h >> 11) * 0x1.0p-53;
    return std::min<int64_t>({inst.setup.speculative->accepted_drafts(u), seq.draft_tokens,
                              seq.output_tokens - seq.generated_tokens - 1});
  }

  // Counts an iteration of instance i in its batch-size counts (InstanceStats::batch_requests,
  // batch_tokens). Logged in order and counted kIterationLogSize at a time: each instance's
  // buckets, far from the CPU caches at hundreds of instances, are then loaded once for many of
  // its iterations instead of once for each. flush_iteration_log() before reading the counts.
  static constexpr size_t kIterationLogSize = 16384;
  void count_iteration(size_t i, int64_t requests, int64_t tokens) {
    iteration_log_.push_back({static_cast<int32_t>(i), static_cast<int32_t>(requests), tokens});
    if (iteration_log_.size() == kIterationLogSize) flush_iteration_log();
  }
  void flush_iteration_log();

  // TBT gaps of one completion, most of them equal (every decode of the batch had its previous
  // token at the same step): runs of equal gaps go into the histogram as one add.
  void add_gap(int64_t gap) { pending_gaps_.add(gap, result.tbt_ns); }
  void flush_gaps() { pending_gaps_.flush(result.tbt_ns); }

  // Inlined: called for every token of every request, mostly with its previous token known.
  // Warm-up requests' gaps stay out of the TBT histogram.
  [[gnu::always_inline]] void record_token(SeqView& seq, int64_t t_ns) {
    if (seq.last_token_ns >= 0) {
      record_next_token(seq, t_ns);
    } else {
      record_first_token(seq.id, t_ns);
      seq.last_token_ns = t_ns;
    }
    record_token_time(seq, t_ns);
  }
  // The token's time, where the run keeps every token's (EngineConfig::record_token_times).
  void record_token_time(const SeqView& seq, int64_t t_ns) {
    if (config.record_token_times) token_times[seq.id].push_back(t_ns);
  }
  // record_token() of a token after the first (seq.last_token_ns >= 0), but for its time in
  // token_times.
  [[gnu::always_inline]] void record_next_token(SeqView& seq, int64_t t_ns) {
    record_next_token(seq, t_ns, static_cast<RequestId>(warmup_total), tbt_objective_ns_,
                      pending_gaps_, result.tbt_ns);
  }
  // The same with the engine's state passed in (a loop over a batch keeps it in locals): the
  // first measured request id, the TBT objective, the pending gaps and their histogram.
  [[gnu::always_inline]] static void record_next_token(SeqView& seq, int64_t t_ns,
                                                       RequestId first_measured,
                                                       int64_t objective_ns, GapRun& gaps,
                                                       LogHistogram& tbt_ns) {
    const int64_t gap = t_ns - seq.last_token_ns;
    if (seq.id >= first_measured) gaps.add(gap, tbt_ns);
    seq.max_tbt_ns = std::max(seq.max_tbt_ns, gap);
    if (gap > objective_ns) seq.tbt_violations++;
    seq.last_token_ns = t_ns;
  }
  [[gnu::noinline]] void record_first_token(RequestId id, int64_t t_ns);

  InstanceView instance_view(size_t i) const;

  // on_batch_done() of the batch's decode run: what its loop over the batch does for each of
  // running[0, batch_decodes), every one a one-token decode step that samples and stays. Returns
  // the position of the first of them that finished, or kNoneLeaving. The instance's decode run
  // becomes those that did not, at the positions they will have once the finished ones leave
  // `running`: each is a decode step again.
  static constexpr size_t kNoneLeaving = std::numeric_limits<size_t>::max();
  size_t advance_decode_run(InstanceState& inst, int64_t t_ns);
  // advance_decode_run() with its per-batch choices fixed: whether the batch charges its decode
  // steps interference or recompute time (kCharged), and whether the instance registers prefix
  // blocks or the run records token times (kRegistersOrTimes); the common case takes neither.
  template <bool kCharged, bool kRegistersOrTimes>
  size_t advance_decode_run_as(InstanceState& inst, int64_t t_ns);

  void on_batch_done(size_t i);
  // on_batch_done() of one item of the batch (inst.batch): its tokens computed, its sampled
  // tokens recorded. Returns whether it leaves `running`: finished, or at its split point.
  bool advance_batch_item(size_t i, const BatchItem& item, int64_t t_ns);
  // A split request that computed its tokens up to its split point: it leaves for the instance
  // that continues it.
  static bool at_split_point(const SeqView& seq) {
    return seq.split_tokens > 0 && seq.computed_tokens == seq.split_tokens;
  }
  // Finishes or hands off the requests of instance i's running list that leave it, then moves
  // the rest up to close the list. REQUIRES: first_leaving is the position of the first of them (only the batch's
  // requests change their tokens, and a request's cached prefix stops short of its split point).
  void remove_leaving(size_t i, size_t first_leaving);

  // ---- exact fast-forward of steady decode (engine_fast_forward.cc) ----

  // Called when instance i's batch completed at `now`, instead of asking its policy through a
  // kSchedule event. When the instance is in steady decode (every running request a plain decode
  // step, nothing waiting, no hand-off pending, no prefix-cache keys left to register, and its
  // policy agrees), runs its next iterations here, each exactly as on_schedule() and
  // on_batch_done() would: the same KV blocks, cost-model call, token times, statistics, and the
  // kSchedule and kBatchDone events counted and hashed into the fingerprint as if popped. It stops
  // - before an iteration whose new KV blocks are not free (the policy preempts): a kSchedule
  //   event is queued at that iteration's start, as stepping would;
  // - at the iteration that ends at or after the next queued event, or makes a request finish:
  //   that one is left in flight as an ordinary batch with its kBatchDone event.
  // Every iteration it runs starts and ends before every queued event, so nothing else could
  // have happened in between. Returns false, having done nothing, when not in steady decode.
  bool fast_forward(size_t i);

  // Whether instance i is in steady decode and its next iterations, all before `horizon` (the
  // next queued event), may be fast-forwarded; finds its decode run.
  bool in_steady_decode(size_t i, SimTime horizon);
  // fast_forward()'s state over the iterations it runs (engine_fast_forward.cc).
  struct SteadyDecodeSpan;

  // `shape` set to one sampled decode segment of context context_of(pos) for each pos < decodes,
  // for a model that needs the segments.
  template <typename ContextOf>
  static models::BatchShape& decode_shape(models::BatchShape& shape, size_t decodes,
                                          const ContextOf& context_of) {
    shape.clear();
    for (size_t pos = 0; pos < decodes; ++pos) shape.segments.push_back({1, context_of(pos), 1});
    return shape;
  }

  // Chunked transfer: the KV of `tokens` new tokens leaves for `dst` as soon as they are computed;
  // chunks queue FIFO on the link behind whatever it is already carrying.
  void stream_chunk(size_t src, int32_t dst, int64_t tokens);

  // ---- KV transfers of disaggregation (engine_kv_transfer.cc) ----

  // Starts transfers for waiting hand-offs in FIFO order while the chosen decode instance has room
  // for the request's KV (head-of-line blocking: the prefill instance keeps holding the KV).
  void start_transfers();

  void on_transfer_done(size_t d, RequestId id);

  void finish(size_t i, InstanceState& inst, const SeqView& seq);

  // ---- sampling (engine_sampling.cc) ----

  void on_sample();

  // The sampling grid resumes at the first multiple of sample_interval at or after `now` (after
  // it when `after_now`: a control tick runs past the sampling phase of its instant).
  void resume_sampling(bool after_now = false);

  // True when no request is in the system and no instance has or expects work: only a future
  // arrival (or a control tick) can change any sampled value.
  bool idle() const;

  // True while an arrival, a routing step or a batch is pending.
  bool work_in_flight() const;

  // ---- elastic clusters (engine_elastic.cc) ----

  // Instance counts by role and state, and GPUs held, as "cluster" samples.
  void sample_cluster_size();

  // Retires a draining instance once it holds nothing: no batch, no requests, no KV hand-off
  // from or to it.
  void maybe_retire(size_t i);

  void add_instance(InstanceRole role);

  void on_instance_ready(size_t i);

  [[noreturn]] void bad_decision(const std::string& what) const;

  void on_control();

  // ---- main loop (engine.cc) ----

  RunResult run();
};

}  // namespace servesim::sim
