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

#include "sim/core/error.h"
#include "sim/core/rng.h"
#include "sim/event_queue.h"
#include "sim/instance_state.h"
#include "sim/kv_manager.h"
#include "sim/prefix_cache.h"

namespace servesim::sim {
using namespace detail;  // the engine's own state (sim/instance_state.h) and KV manager

namespace {

// A prefilled request on its way from a prefill to a decode instance.
struct Handoff {
  SeqView seq;            // as it left the prefill instance's running list (blocks held there)
  int32_t source = -1;    // prefill instance
  SimTime ready{};        // when its prefill finished
  SimTime prefill_start{};  // start of the iteration that finished the prefill
  int64_t reserved_blocks = 0;  // on the decode instance, once the transfer started
};

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdULL;
  return h ^ (h >> 33);
}

}  // namespace

struct Engine::Impl {
  EngineConfig config;
  std::vector<InstanceState> instances;
  std::unique_ptr<RoutingPolicy> router;
  std::unique_ptr<RoutingPolicy> decode_router;
  Workload workload;
  RecordListener* listener;

  std::vector<RequestState> requests;
  std::vector<RequestExtras> extras;  // by request id, like `requests`
  KvManager kv{instances, workload.requests, requests, extras};  // KV blocks and prefix cache
  std::vector<std::vector<int64_t>> token_times;  // by request id, with config.record_token_times
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
  int64_t pending_gap_ = -1, pending_gaps_ = 0;  // add_gap(): the run not yet in result.tbt_ns
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
       Workload w, RecordListener* l, std::unique_ptr<RoutingPolicy> dr)
      : config(std::move(c)),
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
    requests.resize(workload.requests.size());
    extras.resize(workload.requests.size());
    if (config.record_token_times) token_times.resize(workload.requests.size());
    const ClosedLoopSpec& cl = config.closed_loop;
    if (cl.clients < 0 || cl.warmup_requests < 0 || cl.ramp_up.count() < 0 ||
        cl.think_time.count() < 0) {
      throw std::invalid_argument("closed-loop clients, warm-up, ramp-up and think time must be >= 0");
    }
    warmup_total = static_cast<size_t>(std::min<int64_t>(
        cl.warmup_requests, static_cast<int64_t>(workload.requests.size())));
    warmup_left = static_cast<int64_t>(warmup_total);
    measured_phase = !(cl.drain_after_warmup && warmup_total > 0);
    for (size_t i = 0; i < warmup_total; ++i) requests[i].warmup = true;
    link_session_turns();
    if (elastic()) {
      const bool open_loop = cl.clients == 0 && warmup_total == 0 && successor.empty();
      config.elastic.controller->preview(open_loop ? &workload : nullptr);
    }
    issue_limit = measured_phase ? workload.requests.size() : warmup_total;
    loads.resize(instances.size());
    decode_loads.resize(instances.size());
    result.requests_total = static_cast<int64_t>(workload.requests.size());
    result.instances.resize(instances.size());
  }

  // Fills `successor` from the workload's later turns. Throws std::invalid_argument for a turn
  // that follows no earlier request, two turns following one request, or sessions combined with
  // closed-loop clients or warm-up requests.
  void link_session_turns() {
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

  // ---- event plumbing ----

  void push(SimTime t, Phase phase, EventKind kind, int32_t target) {
    if (t < now) throw RangeError("event scheduled in the past");
    queue.push(Event{t, phase, kind, target, 0, 0});
  }

  void fingerprint(const Event& e) {
    uint64_t h = result.event_fingerprint;
    h = mix(h, static_cast<uint64_t>(e.time.time_since_epoch().count()));
    h = mix(h, (static_cast<uint64_t>(e.phase) << 8) | static_cast<uint64_t>(e.kind));
    h = mix(h, static_cast<uint64_t>(static_cast<int64_t>(e.target)));
    result.event_fingerprint = h;
  }

  void set_in_system(int64_t delta) {
    in_system_area_ns += static_cast<long double>(in_system) *
                         static_cast<long double>((now - in_system_since).count());
    in_system_since = now;
    in_system += delta;
  }

  bool all_done() const {
    return result.requests_finished + result.requests_rejected == result.requests_total;
  }

  // ---- arrivals and routing ----

  // Open loop: pushes the arrival of the next request sent at its own time (one is pending at a
  // time; its arrival pushes the next).
  void schedule_next_arrival() {
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

  // Request `id` arrives at `t`. Arrival events name their request: closed-loop clients started
  // at different times issue requests out of time order.
  void push_arrival(SimTime t, RequestId id) {
    if (t < now) throw RangeError("event scheduled in the past");
    Event e{t, Phase::kArrive, EventKind::kArrival, -1, 0, 0};
    e.request = id;
    queue.push(e);
    pending_arrivals++;
  }

  // Closed loop: the next request of the workload arrives at `t`, plus its client's jitter draw
  // (none past the phase's limit).
  void issue_closed_loop_request(SimTime t) {
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

  // Starts a phase of closed-loop clients at `start`: client k sends at start + k x ramp / clients.
  void start_clients(SimTime start) {
    const ClosedLoopSpec& cl = config.closed_loop;
    for (int64_t k = 0; k < cl.clients && next_issue < issue_limit; ++k) {
      issue_closed_loop_request(start + Duration{cl.ramp_up.count() * k / cl.clients});
    }
  }

  // A request finished or was rejected: its closed-loop client moves on, and the measured phase
  // starts when it was the last warm-up request of a draining benchmark.
  void on_request_done(RequestId id) {
    if (!successor.empty() && successor[static_cast<size_t>(id)] >= 0) {
      RequestSpec& next = workload.requests[static_cast<size_t>(successor[static_cast<size_t>(id)])];
      next.arrival = now + next.think_time;
      push_arrival(next.arrival, next.id);
    }
    if (config.closed_loop.clients > 0) issue_closed_loop_request(now + config.closed_loop.think_time);
    if (static_cast<size_t>(id) >= warmup_total || --warmup_left > 0 || measured_phase) return;
    measured_phase = true;
    issue_limit = workload.requests.size();
    if (config.closed_loop.clients > 0) {
      start_clients(now);
    } else if (next_open < workload.requests.size()) {
      arrival_shift = std::max(Duration{0}, now - workload.requests[next_open].arrival);
      schedule_next_arrival();
    }
  }

  // next_arrival counts processed arrivals; in an open loop it is also the next request to push.
  void on_arrival(RequestId id) {
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

  void refresh_load(size_t i) {
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
  }

  // Asks the router whether to split the request it just placed on `target`.
  void apply_split(const ClusterView& view, const RequestSpec& spec, int32_t target, SeqView& seq,
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
    extras[static_cast<size_t>(spec.id)].split_tokens = d.split_tokens;
  }

  void on_route() {
    route_pending = false;
    queues_view.resize(instances.size());
    for (size_t i = 0; i < instances.size(); ++i) {
      refresh_load(i);
      queues_view[i] = {&instances[i].running, &instances[i].waiting, instances[i].batch_end};
    }
    for (RequestId id : pending_route) {
      const RequestSpec& spec = workload.requests[static_cast<size_t>(id)];
      ClusterView view{now, &loads, instances.front().setup.block_size, &queues_view, &kv.lookup()};
      const int32_t target = router->route(view, spec);
      if (target < 0 || static_cast<size_t>(target) >= instances.size()) {
        throw std::logic_error(fmt::format("router returned instance {} of {}", target,
                                           instances.size()));
      }
      InstanceState& inst = instances[static_cast<size_t>(target)];
      RequestState& rs = requests[static_cast<size_t>(id)];
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

  // `seq` joins the waiting queue of instance i.
  void enqueue(size_t i, const SeqView& seq) {
    InstanceState& inst = instances[i];
    inst.waiting.push_back(seq);
    inst.queued_prompt_blocks += blocks_for_tokens(seq.prompt_tokens, inst.setup.block_size);
    refresh_load(i);
    request_schedule(i);
  }

  void on_frontend_done(size_t i, RequestId id) {
    auto it = in_frontend.find(id);
    if (it == in_frontend.end()) throw std::logic_error("front end finished an unknown request");
    const SeqView seq = it->second;
    in_frontend.erase(it);
    enqueue(i, seq);
  }

  void request_schedule(size_t i) {
    InstanceState& inst = instances[i];
    if (inst.busy || inst.schedule_pending) return;
    inst.schedule_pending = true;
    push(now, Phase::kSchedule, EventKind::kSchedule, static_cast<int32_t>(i));
  }

  // ---- batching ----

  // Sets running_pos of running[from..].
  void reindex_running(InstanceState& inst, size_t from = 0) {
    for (size_t p = from; p < inst.running.size(); ++p) {
      requests[static_cast<size_t>(inst.running[p].id)].running_pos = static_cast<int32_t>(p);
    }
  }

  int32_t running_pos_of(const InstanceState& inst, RequestId id) const {
    return detail::running_pos_of(requests, inst, id);
  }

  [[noreturn]] void bad_plan(size_t i, const std::string& what) const {
    throw std::logic_error(fmt::format("instance {} at t={} ns: invalid batch plan: {}", i,
                                       now.time_since_epoch().count(), what));
  }

  // `protected_run`: running[0, protected_run) is the decode run the plan schedules.
  void apply_preemptions(size_t i, InstanceState& inst, const BatchPlan& plan,
                         int64_t protected_run) {
    if (plan.preempt.empty()) return;
    for (RequestId id : plan.preempt) {
      const int32_t pos = running_pos_of(inst, id);
      if (pos == kNotRunning) bad_plan(i, fmt::format("preempts request {} that is not running", id));
      if (pos < protected_run) {
        bad_plan(i, fmt::format("preempts request {} of the decode run it schedules", id));
      }
      SeqView& seq = inst.running[static_cast<size_t>(pos)];
      RequestState& rs = requests[static_cast<size_t>(id)];
      kv.release_blocks(inst, seq.blocks, id);
      seq.blocks = 0;
      seq.computed_tokens = 0;
      seq.preemptions++;
      rs.preemptions++;
      rs.running_pos = kNotRunning;
      inst.stats.preemptions++;
      inst.waiting.push_front(seq);
      inst.queued_prompt_blocks += blocks_for_tokens(seq.num_tokens(), inst.setup.block_size);
      seq.id = -1;  // tombstone, compacted below
    }
    std::erase_if(inst.running, [](const SeqView& s) { return s.id < 0; });
    reindex_running(inst);
  }

  void apply_admissions(size_t i, InstanceState& inst, const BatchPlan& plan) {
    for (RequestId id : plan.admit) {
      auto it = inst.waiting.begin();
      if (it == inst.waiting.end() || it->id != id) {
        it = std::find_if(inst.waiting.begin(), inst.waiting.end(),
                          [id](const SeqView& s) { return s.id == id; });
        if (it == inst.waiting.end()) bad_plan(i, fmt::format("admits request {} that is not waiting", id));
      }
      inst.queued_prompt_blocks -= blocks_for_tokens(it->num_tokens(), inst.setup.block_size);
      requests[static_cast<size_t>(id)].running_pos = static_cast<int32_t>(inst.running.size());
      inst.running.push_back(*it);
      inst.waiting.erase(it);
    }
  }

  // ---- prefix caching ----

  // Adds running[run.count] to the instance's decode run if it is a one-token decode step of a
  // request that stays; returns whether it was.
  bool extend_decode_run(InstanceState& inst) {
    DecodeRun& run = inst.decode_run;
    const SeqView& seq = inst.running[static_cast<size_t>(run.count)];
    if (seq.split_tokens != 0 || !seq.is_decode()) return false;
    add_to_decode_run(seq, static_cast<int32_t>(run.count), inst.setup.block_size, run,
                      inst.run_to_first_finish, inst.run_crossers);
    return true;
  }
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
  void complete_decode_run(InstanceState& inst) {
    while (inst.decode_run.count < static_cast<int64_t>(inst.running.size()) &&
           extend_decode_run(inst)) {
    }
    inst.run_ready = true;
  }
  // Makes the instance's decode run that of inst.running as it is, unless it already is.
  void find_decode_run(InstanceState& inst) {
    if (inst.run_ready) return;
    clear_decode_run(inst);
    complete_decode_run(inst);
  }

  // The cost model's time for the planned batch: the decode run (`run` steps) and inst.shape.
  Duration price_batch(InstanceState& inst, int64_t run) {
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
    return cost.iteration_time(whole);
  }

  void on_schedule(size_t i) {
    InstanceState& inst = instances[i];
    inst.schedule_pending = false;
    if (inst.busy) return;
    if (inst.running.empty() && inst.waiting.empty()) return;
    InstanceView view = instance_view(i);
    const bool offers_run = config.fast_forward && !inst.setup.kv_reserved_only &&
                            inst.setup.batching->plans_decode_runs();
    if (offers_run) {
      find_decode_run(inst);
      view.decode_run = &inst.decode_run;
    }
    BatchPlan& plan = inst.plan;
    plan.clear();
    const bool has_batch = inst.setup.batching->next_batch(view, plan);
    if (has_batch) inst.run_ready = false;  // the plan changes `running`
    if (!has_batch) {
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
      return;
    }
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
    // Validate the work and allocate KV: the decode run's blocks (found by find_decode_run, and
    // still the same: nothing before it was preempted), then each listed request's.
    inst.batch.clear();
    inst.shape.clear();
    inst.batch_decodes = run;
    int64_t new_blocks = 0;
    if (plan.decode_run) {
      for (const int32_t pos : inst.run_crossers) {
        SeqView& seq = inst.running[static_cast<size_t>(pos)];
        const int64_t extra =
            extra_blocks_for(seq.computed_tokens + 1, seq.blocks, inst.setup.block_size);
        seq.blocks += extra;
        new_blocks += extra;
      }
    }
    // Tokens of one-token decode steps, of first-time prompt computation, and of recomputation
    // after a preemption, for the interference shares.
    int64_t decode_tokens = run, prompt_tokens = 0, recompute_tokens = 0;
    for (ScheduledSeq& s : plan.scheduled) {
      const int32_t pos = running_pos_of(inst, s.id);
      if (pos == kNotRunning) bad_plan(i, fmt::format("schedules request {} that is not running", s.id));
      if (pos < run) bad_plan(i, fmt::format("schedules request {} of its decode run again", s.id));
      SeqView& seq = inst.running[static_cast<size_t>(pos)];
      if (s.tokens < 1 || s.tokens > seq.remaining_tokens()) {
        bad_plan(i, fmt::format("request {}: {} tokens scheduled, {} remaining", s.id, s.tokens,
                                seq.remaining_tokens()));
      }
      const int64_t extra = kv.new_blocks_for(inst, seq, s);
      new_blocks += extra;
      seq.blocks += extra;
      inst.batch.push_back({pos, s.tokens});
      if (s.tokens == 1) {
        decode_tokens++;
      } else {
        (seq.preemptions > 0 ? recompute_tokens : prompt_tokens) += s.tokens;
      }
      if (!priced) {
        const bool samples = seq.computed_tokens + s.tokens == seq.num_tokens();
        inst.shape.segments.push_back({s.tokens, seq.computed_tokens + s.tokens, samples ? 1 : 0});
      }
      RequestState& rs = requests[static_cast<size_t>(s.id)];
      if (rs.first_scheduled_ns < 0) rs.first_scheduled_ns = now.time_since_epoch().count();
    }
    if (new_blocks > inst.free_blocks) {
      bad_plan(i, fmt::format("needs {} new KV blocks, {} free", new_blocks, inst.free_blocks));
    }
    kv.take_blocks(inst, new_blocks);
    inst.stats.peak_used_blocks =
        std::max(inst.stats.peak_used_blocks, inst.setup.num_blocks - inst.free_blocks);
    if (inst.batch.empty() && run == 0) {
      // A plan that only preempted: ask again at once (the freed KV may admit work).
      request_schedule(i);
      return;
    }
    Duration d = priced ? *priced : price_batch(inst, run);
    if (d.count() <= 0) throw std::logic_error("cost model returned a non-positive duration");
    if (inst.batch_load_ns != 0) {
      d += Duration(inst.batch_load_ns);
      inst.stats.kv_load_ns += inst.batch_load_ns;
      inst.batch_load_ns = 0;
    }
    // Apportioned by tokens (pricing the decode steps alone instead gives the same miss causes
    // within 0.5 % on the DOPD bursty replay, at a second cost-model call per mixed iteration).
    const double per_token_ns =
        decode_tokens > 0 && decode_tokens < run + static_cast<int64_t>(inst.batch.size())
            ? static_cast<double>(d.count()) /
                  static_cast<double>(decode_tokens + prompt_tokens + recompute_tokens)
            : 0.0;
    inst.batch_interference_ns = static_cast<int64_t>(per_token_ns * static_cast<double>(prompt_tokens));
    inst.batch_recompute_ns = static_cast<int64_t>(per_token_ns * static_cast<double>(recompute_tokens));
    inst.busy = true;
    inst.batch_start = now;
    inst.batch_end = now + d;
    push(now + d, Phase::kComplete, EventKind::kBatchDone, static_cast<int32_t>(i));
  }

  // ---- completion ----

  // TBT gaps of one completion, most of them equal (every decode of the batch had its previous
  // token at the same step): runs of equal gaps go into the histogram as one add.
  void add_gap(int64_t gap) {
    if (gap != pending_gap_) {
      flush_gaps();
      pending_gap_ = gap;
    }
    ++pending_gaps_;
  }
  void flush_gaps() {
    if (pending_gaps_ > 0) result.tbt_ns.add(pending_gap_, pending_gaps_);
    pending_gaps_ = 0;
  }

  // Inlined: called for every token of every request, mostly with its previous token known.
  [[gnu::always_inline]] void record_token(RequestId id, RequestState& rs, int64_t t_ns) {
    if (rs.last_token_ns >= 0) {
      const int64_t gap = t_ns - rs.last_token_ns;
      if (!rs.warmup) add_gap(gap);
      rs.max_tbt_ns = std::max(rs.max_tbt_ns, gap);
      if (gap > tbt_objective_ns_) rs.tbt_violations++;
    } else {
      record_first_token(id, rs, t_ns);
    }
    rs.last_token_ns = t_ns;
    if (config.record_token_times) token_times[static_cast<size_t>(id)].push_back(t_ns);
  }
  [[gnu::noinline]] void record_first_token(RequestId id, RequestState& rs, int64_t t_ns) {
    rs.first_token_ns = t_ns;
    extras[static_cast<size_t>(id)].prefill_instance = rs.instance;
    if (listener) {
      listener->on_first_token(id, t_ns);
      if (listener->stop_requested()) stopped = true;
    }
  }

  InstanceView instance_view(size_t i) const {
    const InstanceState& inst = instances[i];
    return {now, static_cast<int32_t>(i), inst.setup.block_size, inst.setup.num_blocks,
            inst.free_blocks, &inst.running, &inst.waiting};
  }

  // on_batch_done() of the batch's decode run: what its loop over the batch does for each of
  // running[0, batch_decodes), every one a one-token decode step that samples and stays. Returns
  // whether one of them finished. The instance's decode run becomes those that did not, at the
  // positions they will have once the finished ones leave `running`: each is a decode step again.
  bool advance_decode_run(InstanceState& inst, int64_t t_ns) {
    const int64_t run = inst.batch_decodes;
    const bool charged = (inst.batch_interference_ns | inst.batch_recompute_ns) != 0;
    const int64_t block_size = inst.setup.block_size;
    bool any_finished = false;
    int32_t finished = 0;
    clear_decode_run(inst);
    // The new run's sums, kept in locals for the loop.
    DecodeRun next;
    int64_t to_first_finish = std::numeric_limits<int64_t>::max();
    inst.stats.decode_tokens += run;
    for (int64_t pos = 0; pos < run; ++pos) {
      SeqView& seq = inst.running[static_cast<size_t>(pos)];
      seq.computed_tokens++;
      RequestState& rs = requests[static_cast<size_t>(seq.id)];
      if (charged) {
        RequestExtras& x = extras[static_cast<size_t>(seq.id)];
        x.interference_ns += inst.batch_interference_ns;
        x.recompute_ns += inst.batch_recompute_ns;
      }
      // (The general loop's other case, prompt tokens computed, is not one of a decode step.)
      if (inst.setup.prefix_caching && seq.computed_tokens % block_size == 0) {
        kv.register_computed_blocks(inst, seq);
      }
      seq.generated_tokens++;
      record_token(seq.id, rs, t_ns);
      if (seq.generated_tokens == seq.output_tokens) {
        any_finished = true;
        finished++;
      } else {
        add_to_decode_run(seq, static_cast<int32_t>(pos) - finished, block_size, next,
                          to_first_finish, inst.run_crossers);
      }
    }
    inst.decode_run = next;
    inst.run_to_first_finish = to_first_finish;
    return any_finished;
  }

  void on_batch_done(size_t i) {
    InstanceState& inst = instances[i];
    const int64_t t_ns = now.time_since_epoch().count();
    inst.setup.batching->on_batch_done(instance_view(i), now - inst.batch_start);
    inst.busy = false;
    inst.stats.iterations++;
    inst.stats.busy_ns += (now - inst.batch_start).count();
    bool any_leaving = false;
    if (inst.batch_decodes > 0) any_leaving = advance_decode_run(inst, t_ns);
    int64_t batch_tokens = inst.batch_decodes;
    for (const BatchItem& item : inst.batch) batch_tokens += item.tokens;
    inst.stats.batch_requests.add(inst.batch_decodes + static_cast<int64_t>(inst.batch.size()));
    inst.stats.batch_tokens.add(batch_tokens);
    for (const BatchItem& item : inst.batch) {
      SeqView& seq = inst.running[static_cast<size_t>(item.running_pos)];
      if (item.tokens > 1) {
        inst.stats.prefill_tokens += item.tokens;
      } else {
        inst.stats.decode_tokens += item.tokens;
      }
      seq.computed_tokens += item.tokens;
      RequestState& rs = requests[static_cast<size_t>(seq.id)];
      if (item.tokens == 1 && (inst.batch_interference_ns | inst.batch_recompute_ns) != 0) {
        RequestExtras& x = extras[static_cast<size_t>(seq.id)];
        x.interference_ns += inst.batch_interference_ns;
        x.recompute_ns += inst.batch_recompute_ns;
      }
      // Blocks fill when an iteration computes prompt tokens, or when a decode step completes a
      // block (cached when the request's hash ids cover its answer).
      if (inst.setup.prefix_caching &&
          (seq.computed_tokens - item.tokens < seq.prompt_tokens ||
           seq.computed_tokens % inst.setup.block_size == 0)) {
        kv.register_computed_blocks(inst, seq);
      }
      if (seq.split_tokens > 0 && rs.split_target >= 0 &&
          config.transfer.mode == KvTransferMode::kChunked) {
        stream_chunk(i, rs.split_target, item.tokens);
      }
      // Finished, or at its split point and leaving for another instance.
      if (seq.split_tokens > 0 && seq.computed_tokens == seq.split_tokens) any_leaving = true;
      if (seq.computed_tokens != seq.num_tokens()) continue;
      seq.generated_tokens++;
      record_token(seq.id, rs, t_ns);
      if (seq.generated_tokens == seq.output_tokens) any_leaving = true;
    }
    flush_gaps();
    if (any_leaving) {
      size_t first_gone = inst.running.size();
      for (size_t pos = 0; pos < inst.running.size(); ++pos) {
        SeqView& seq = inst.running[pos];
        if (seq.generated_tokens == seq.output_tokens) {
          finish(i, inst, seq);
        } else if (seq.split_tokens > 0 && seq.computed_tokens == seq.split_tokens) {
          requests[static_cast<size_t>(seq.id)].running_pos = kNotRunning;
          handoffs.push_back({seq, static_cast<int32_t>(i), now, inst.batch_start, 0});
        } else {
          continue;
        }
        seq.id = -1;
        first_gone = std::min(first_gone, pos);
      }
      // Those before the first that left keep their positions.
      const auto gone =
          std::remove_if(inst.running.begin() + static_cast<std::ptrdiff_t>(first_gone),
                         inst.running.end(), [](const SeqView& s) { return s.id < 0; });
      inst.running.erase(gone, inst.running.end());
      reindex_running(inst, first_gone);
    }
    // The decode run's survivors lead `running`; requests after them whose prompt this batch
    // finished are decode steps now and may follow.
    if (inst.batch_decodes > 0) complete_decode_run(inst);
    if (!fast_forward(i)) request_schedule(i);
    if (!handoffs.empty()) start_transfers();
    maybe_retire(i);
  }

  // ---- exact fast-forward of steady decode (EngineConfig::fast_forward) ----

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
  bool fast_forward(size_t i) {
    InstanceState& inst = instances[i];
    if (!config.fast_forward || inst.running.empty() || !inst.waiting.empty() || !handoffs.empty() ||
        inst.setup.kv_reserved_only || inst.batch_load_ns != 0) {
      return false;
    }
    const SimTime horizon = queue.empty() ? SimTime::max() : queue.top().time;
    if (horizon <= now) return false;
    const int64_t block_size = inst.setup.block_size;
    // Steady decode: the decode run is every running request.
    find_decode_run(inst);
    const size_t decodes = inst.running.size();
    if (inst.decode_run.count != static_cast<int64_t>(decodes)) return false;
    if (!inst.setup.batching->plans_steady_decode(instance_view(i))) return false;
    // With prefix caching, decode steps register nothing unless a request's hash ids cover its
    // answer (keys still to register: KvManager::register_computed_blocks()); such instances step.
    if (inst.setup.prefix_caching) {
      for (const SeqView& seq : inst.running) {
        if (kv.registering(seq.id)) return false;
      }
    }
    const int32_t target = static_cast<int32_t>(i);
    // Iterations until the first request finishes (that iteration included). A step needs a new
    // block where its context outgrows the blocks held (by one token: the KV always holds the
    // computed tokens): crossers are the positions whose context in the current iteration
    // exceeds what their blocks hold. From the second iteration on, contexts[pos] is that context
    // and caps[pos] the tokens running[pos]'s blocks take (blocks * block_size); in the first,
    // the decode run gives the crossers and each context is computed_tokens + 1. context_sum, the
    // sum of the contexts, is all the cost model needs of a decode batch (it grows by the batch
    // size each iteration).
    int64_t to_first_finish = inst.run_to_first_finish;
    int64_t context_sum = inst.decode_run.context_sum;
    std::vector<int32_t>& crossers = ff_crossers_;
    crossers.swap(inst.run_crossers);
    inst.run_ready = false;  // the iterations below change `running`
    std::vector<int64_t>& contexts = ff_contexts_;
    std::vector<int64_t>& caps = ff_caps_;
    bool per_position = false;  // contexts and caps filled
    const auto context_of = [&](size_t pos) {
      return per_position ? contexts[pos] : inst.running[pos].computed_tokens + 1;
    };
    // The batch: every running request's decode step (a decode run), as on_schedule() plans it.
    inst.batch.clear();
    inst.batch_decodes = static_cast<int64_t>(decodes);
    // From the second iteration on, every running request's previous token came at the
    // iteration's start, so every gap is the iteration's duration: the tokens are recorded for the
    // whole batch at once and each request's state is brought up to date when the span ends
    // (settle). contexts[pos] stays computed_tokens + 1 of the current iteration.
    int64_t lag = 0;  // tokens each request computed and sampled that its state does not show yet
    int64_t lag_last_ns = 0, lag_max_gap = 0, lag_violations = 0;
    int64_t measured_requests = -1;  // not warm-up: their gaps go into the TBT histogram
    auto settle = [&] {
      if (lag == 0) return;
      for (SeqView& seq : inst.running) {
        seq.computed_tokens += lag;
        seq.generated_tokens += lag;
        RequestState& rs = requests[static_cast<size_t>(seq.id)];
        rs.last_token_ns = lag_last_ns;
        rs.max_tbt_ns = std::max(rs.max_tbt_ns, lag_max_gap);
        rs.tbt_violations += lag_violations;
      }
      lag = 0;
    };
    for (bool first = true;; first = false) {
      int64_t new_blocks = 0;
      for (const int32_t pos : crossers) {
        new_blocks += extra_blocks_for(context_of(static_cast<size_t>(pos)),
                                       inst.running[pos].blocks, block_size);
      }
      if (new_blocks > inst.free_blocks) {
        settle();
        request_schedule(i);
        return true;
      }
      // The iteration starts now: on_schedule() with a plan of every running decode step.
      fingerprint(Event{now, Phase::kSchedule, EventKind::kSchedule, target, 0, 0});
      result.events++;
      inst.setup.batching->on_steady_decode_step(instance_view(i));
      if (new_blocks > 0) {
        for (const int32_t pos : crossers) {
          SeqView& seq = inst.running[pos];
          seq.blocks +=
              extra_blocks_for(context_of(static_cast<size_t>(pos)), seq.blocks, block_size);
          if (per_position) caps[pos] = seq.blocks * block_size;
        }
        kv.take_blocks(inst, new_blocks);
      }
      // Blocks reserved for KV on its way here count too, as on_schedule() counts them.
      inst.stats.peak_used_blocks =
          std::max(inst.stats.peak_used_blocks, inst.setup.num_blocks - inst.free_blocks);
      const models::IterationCostModel& cost = *inst.setup.cost_model;
      const auto n = static_cast<int64_t>(decodes);
      const std::optional<Duration> from_sums = cost.decode_iteration_time({n, context_sum, n});
      const Duration d = from_sums
                             ? *from_sums
                             : cost.iteration_time(decode_shape(inst.shape, decodes, context_of));
      if (d.count() <= 0) throw std::logic_error("cost model returned a non-positive duration");
      inst.batch_interference_ns = 0;
      inst.batch_recompute_ns = 0;
      result.fast_forwarded_iterations++;
      result.decode_run_iterations++;
      if (now + d >= horizon || to_first_finish == 1) {
        settle();
        inst.busy = true;
        inst.batch_start = now;
        inst.batch_end = now + d;
        push(now + d, Phase::kComplete, EventKind::kBatchDone, target);
        return true;
      }
      // It ends: on_batch_done() of a batch where nothing finishes.
      now += d;
      fingerprint(Event{now, Phase::kComplete, EventKind::kBatchDone, target, 0, 0});
      result.events++;
      inst.stats.iterations++;
      inst.stats.busy_ns += d.count();
      inst.stats.decode_tokens += static_cast<int64_t>(inst.running.size());
      inst.stats.batch_requests.add(static_cast<int64_t>(inst.running.size()));
      inst.stats.batch_tokens.add(static_cast<int64_t>(inst.running.size()));
      const int64_t t_ns = now.time_since_epoch().count();
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
      if (first || config.record_token_times) {
        for (SeqView& seq : inst.running) {
          seq.computed_tokens++;
          seq.generated_tokens++;
          record_token(seq.id, requests[static_cast<size_t>(seq.id)], t_ns);
        }
        flush_gaps();
      } else {
        // record_token() of every request, with the same gap.
        lag++;
        lag_last_ns = t_ns;
        lag_max_gap = std::max(lag_max_gap, d.count());
        if (config.slo.tbt_p99 && d > *config.slo.tbt_p99) lag_violations++;
        if (measured_requests < 0) {
          measured_requests = 0;
          for (const SeqView& seq : inst.running) {
            if (!requests[static_cast<size_t>(seq.id)].warmup) measured_requests++;
          }
        }
        if (measured_requests > 0) result.tbt_ns.add(d.count(), measured_requests);
      }
      to_first_finish--;
    }
  }

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
  void stream_chunk(size_t src, int32_t dst, int64_t tokens) {
    const LinkSpec link = config.transfer.link(static_cast<int32_t>(src), dst);
    SimTime& free_at = link_free_at[{static_cast<int32_t>(src), dst}];
    const int64_t bytes = tokens * instances[src].setup.kv_bytes_per_token;
    free_at = std::max(free_at, now) + duration_from_seconds(static_cast<double>(bytes) / link.bytes_per_s);
    instances[src].stats.kv_bytes_out += bytes;
  }

  // ---- KV transfers (disaggregation) ----

  // Starts transfers for waiting hand-offs in FIFO order while the chosen decode instance has room
  // for the request's KV (head-of-line blocking: the prefill instance keeps holding the KV).
  void start_transfers() {
    while (!handoffs.empty()) {
      Handoff& h = handoffs.front();
      for (size_t j = 0; j < instances.size(); ++j) {
        refresh_load(j);
        decode_loads[j] = loads[j];
        decode_loads[j].accepting = instances[j].setup.role == InstanceRole::kDecode &&
                                    instances[j].state == Lifecycle::kActive;
      }
      ClusterView view{now, &decode_loads, instances.front().setup.block_size};
      const RequestSpec& spec = workload.requests[static_cast<size_t>(h.seq.id)];
      const int32_t split_target = requests[static_cast<size_t>(h.seq.id)].split_target;
      const int32_t d = split_target >= 0 ? split_target : decode_router->route(view, spec);
      if (split_target < 0 && (d < 0 || static_cast<size_t>(d) >= instances.size() ||
                               instances[static_cast<size_t>(d)].setup.role != InstanceRole::kDecode)) {
        throw std::logic_error(fmt::format("decode router returned instance {}, not a decode instance", d));
      }
      InstanceState& dst = instances[static_cast<size_t>(d)];
      const int64_t need = blocks_for_tokens(h.seq.computed_tokens, dst.setup.block_size);
      if (need > dst.free_blocks) return;  // wait for room on the decode side
      kv.take_blocks(dst, need);
      dst.outstanding++;
      h.reserved_blocks = need;
      InstanceState& src = instances[static_cast<size_t>(h.source)];
      const LinkSpec link = config.transfer.link(h.source, d);
      const int64_t bytes = h.seq.computed_tokens * src.setup.kv_bytes_per_token;
      const Duration wire = link.latency + duration_from_seconds(static_cast<double>(bytes) /
                                                                 link.bytes_per_s);
      SimTime& free_at = link_free_at[{h.source, d}];
      SimTime end;
      const bool streamed = config.transfer.mode == KvTransferMode::kChunked && split_target >= 0;
      if (streamed) {
        // Every chunk is already on the wire (stream_chunk); the last one lands after the link
        // drains, plus the link latency.
        end = std::max(free_at, now) + link.latency;
      } else if (config.transfer.mode == KvTransferMode::kLayerwiseOverlap) {
        // Layers were sent as they completed during the prefill iteration.
        const SimTime start = std::max(free_at, h.prefill_start);
        end = std::max(start + wire, now + wire / std::max(1, config.transfer.num_layers));
      } else {
        end = std::max(now, free_at) + wire;
      }
      if (!streamed) {
        free_at = end;
        src.stats.kv_bytes_out += bytes;
      }
      src.stats.kv_transfers_out++;
      src.stats.transfer_wait_ns += (now - h.ready).count();
      Event e{end, Phase::kTransferDone, EventKind::kTransferDone, d, 0, 0};
      e.request = h.seq.id;
      queue.push(e);
      in_transit.emplace(h.seq.id, h);
      handoffs.pop_front();
    }
  }

  void on_transfer_done(size_t d, RequestId id) {
    auto it = in_transit.find(id);
    if (it == in_transit.end()) throw std::logic_error("transfer of an unknown request finished");
    Handoff h = it->second;
    in_transit.erase(it);
    InstanceState& src = instances[static_cast<size_t>(h.source)];
    kv.release_blocks(src, h.seq.blocks, id);
    src.outstanding--;
    InstanceState& dst = instances[d];
    SeqView seq = h.seq;
    seq.blocks = h.reserved_blocks;
    seq.split_tokens = 0;  // the rest of the request runs here
    seq.split_target = -1;
    RequestState& rs = requests[static_cast<size_t>(id)];
    rs.instance = static_cast<int32_t>(d);
    if (int64_t& arrived = extras[static_cast<size_t>(id)].kv_arrived_ns; arrived < 0) {
      arrived = now.time_since_epoch().count();
    }
    rs.running_pos = static_cast<int32_t>(dst.running.size());
    dst.running.push_back(seq);
    dst.run_ready = false;
    request_schedule(d);
    request_schedule(static_cast<size_t>(h.source));
    maybe_retire(static_cast<size_t>(h.source));
    start_transfers();
  }

  void finish(size_t i, InstanceState& inst, const SeqView& seq) {
    RequestState& rs = requests[static_cast<size_t>(seq.id)];
    kv.release_blocks(inst, seq.blocks, seq.id);
    inst.outstanding--;
    rs.running_pos = kNotRunning;
    set_in_system(-1);
    result.requests_finished++;
    const RequestSpec& spec = workload.requests[static_cast<size_t>(seq.id)];
    if (elastic()) {
      ObservedFinish f;
      f.arrival = spec.arrival;
      f.ttft = Duration{rs.first_token_ns} - spec.arrival.time_since_epoch();
      f.e2e = now - spec.arrival;
      f.output_tokens = seq.output_tokens;
      f.prompt_tokens = spec.prompt_tokens;
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
      r.arrival_ns = spec.arrival.time_since_epoch().count();
      r.first_scheduled_ns = rs.first_scheduled_ns;
      r.first_token_ns = rs.first_token_ns;
      r.done_ns = now.time_since_epoch().count();
      r.prompt_tokens = spec.prompt_tokens;
      r.output_tokens = spec.output_tokens;
      r.preemptions = rs.preemptions;
      r.max_tbt_ns = rs.max_tbt_ns;
      r.tbt_slo_violations = rs.tbt_violations;
      const RequestExtras& x = extras[static_cast<size_t>(seq.id)];
      if (config.record_token_times) {
        r.token_times_ns = std::move(token_times[static_cast<size_t>(seq.id)]);
      }
      r.warmup = static_cast<size_t>(seq.id) < warmup_total;
      r.cached_tokens = x.cached_tokens;
      if (const auto hits = kv.take_tier_hits(seq.id)) {
        std::tie(r.dram_hit_tokens, r.remote_hit_tokens) = *hits;
      }
      r.split_tokens = x.split_tokens;
      r.prefill_instance_id = x.prefill_instance;
      r.kv_arrived_ns = x.kv_arrived_ns;
      r.interference_ns = x.interference_ns;
      r.recompute_ns = x.recompute_ns;
      listener->on_request(r);
      if (listener->stop_requested()) stopped = true;
    }
    on_request_done(seq.id);
  }

  // ---- sampling ----

  void on_sample() {
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

  // The sampling grid resumes at the first multiple of sample_interval at or after `now` (after
  // it when `after_now`: a control tick runs past the sampling phase of its instant).
  void resume_sampling(bool after_now = false) {
    sampling_paused = false;
    const int64_t interval = config.sample_interval.count();
    const int64_t t = now.time_since_epoch().count();
    const int64_t k = t / interval + (t % interval != 0 || after_now ? 1 : 0);
    push(kTimeZero + Duration{k * interval}, Phase::kSample, EventKind::kSample, -1);
  }

  // True when no request is in the system and no instance has or expects work: only a future
  // arrival (or a control tick) can change any sampled value.
  bool idle() const {
    if (in_system != 0 || route_pending || !in_transit.empty() || !in_frontend.empty()) {
      return false;
    }
    return std::none_of(instances.begin(), instances.end(), [](const InstanceState& s) {
      return s.busy || s.schedule_pending || !s.wakes.empty() || s.state == Lifecycle::kStarting ||
             s.state == Lifecycle::kDraining;
    });
  }

  // True while an arrival, a routing step or a batch is pending.
  bool work_in_flight() const {
    if (pending_arrivals > 0 || route_pending || !in_transit.empty() || !in_frontend.empty()) {
      return true;
    }
    return std::any_of(instances.begin(), instances.end(), [](const InstanceState& s) {
      return s.busy || s.schedule_pending || !s.wakes.empty() || s.state == Lifecycle::kStarting;
    });
  }

  // ---- elastic clusters ----

  // Instance counts by role and state, and GPUs held, as "cluster" samples.
  void sample_cluster_size() {
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

  // Retires a draining instance once it holds nothing: no batch, no requests, no KV hand-off
  // from or to it.
  void maybe_retire(size_t i) {
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

  void add_instance(InstanceRole role) {
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
    result.instances.resize(instances.size());
    const Duration delay = role == InstanceRole::kDecode ? config.elastic.startup_decode
                                                         : config.elastic.startup_prefill;
    push(now + delay, Phase::kComplete, EventKind::kInstanceReady, index);
  }

  void on_instance_ready(size_t i) {
    InstanceState& inst = instances[i];
    if (inst.state != Lifecycle::kStarting) return;
    inst.state = Lifecycle::kActive;
    inst.stats.active_ns = now.time_since_epoch().count();
    sample_cluster_size();
    if (!handoffs.empty()) start_transfers();  // a new decode instance may take waiting KV
  }

  [[noreturn]] void bad_decision(const std::string& what) const {
    throw std::logic_error(fmt::format("cluster controller at t={} ns: invalid decision: {}",
                                       now.time_since_epoch().count(), what));
  }

  void on_control() {
    for (size_t i = 0; i < instances.size(); ++i) refresh_load(i);
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

  // ---- main loop ----

  RunResult run() {
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
};

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
