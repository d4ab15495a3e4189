#include "policies/dynaserve.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "policies/coloc.h"
#include "core/rng.h"
#include "core/limits.h"

namespace servesim::policies {

// ---- output-length prediction ----

OutputLengthPredictor::OutputLengthPredictor(double sigma, int64_t margin, uint64_t seed)
    : sigma_(sigma), margin_(margin), seed_(derive_stream_seed(seed, "dynaserve.output_length")) {}

int64_t OutputLengthPredictor::predict(const RequestSpec& request) const {
  double d = static_cast<double>(request.output_tokens);
  if (sigma_ > 0) {
    RngStream rng(seed_ ^ (static_cast<uint64_t>(request.id) * 0x9e3779b97f4a7c15ULL), "error");
    d += sigma_ * rng.normal();
  }
  return std::max<int64_t>(1, std::llround(d)) + margin_;
}

// ---- execution predictor ----

ExecutionPredictor::ExecutionPredictor(LatencyTable* table, PredictorLimits limits)
    : table_(table), limits_(limits) {
  if (!table_) throw std::invalid_argument("execution predictor needs a latency table");
}

void ExecutionPredictor::reset(SimTime start) {
  state_.t = start;
  state_.next = 0;
  state_.kv_used = 0;
  state_.clock = 0;
  state_.context_base_sum = 0;
  state_.load_ns = 0;
  state_.prefilling.clear();
  state_.decoding.clear();
}

void ExecutionPredictor::start_decode(int64_t index, int64_t decode, int64_t context,
                                      int64_t footprint) {
  State& st = state_;
  st.decoding.push_back({st.clock + decode, index, context - st.clock, footprint});
  std::push_heap(st.decoding.begin(), st.decoding.end(), std::greater<Decoding>());
  st.context_base_sum += context - st.clock;
}

// Admits FCFS while sequence slots and KV allow and the head's KV has arrived.
void ExecutionPredictor::admit(const std::vector<VirtualWork>& work) {
  State& st = state_;
  while (st.next < work.size() && st.active() < limits_.max_num_seqs &&
         work[st.next].available <= st.t) {
    const VirtualWork& w = work[st.next];
    const int64_t fp = w.context + w.prefill_tokens + w.decode_passes;
    if (limits_.kv_capacity_tokens > 0 && st.active() > 0 &&
        st.kv_used + fp > limits_.kv_capacity_tokens) {
      break;
    }
    const auto index = static_cast<int64_t>(st.next);
    if (w.prefill_tokens > 0) {
      st.prefilling.push_back({index, w.prefill_tokens, w.decode_passes, w.context, fp});
      st.kv_used += fp;
    } else if (w.decode_passes > 0) {
      start_decode(index, w.decode_passes, w.context, fp);
      st.kv_used += fp;
    }
    st.next++;
  }
}

// Every decode, then prefill chunks FCFS within the budget the latency table allows.
ExecutionPredictor::Pass ExecutionPredictor::compose() {
  const State& st = state_;
  Pass p{};
  p.dnum = static_cast<int64_t>(st.decoding.size());
  p.mean_ctx = p.dnum > 0 ? (st.context_base_sum + p.dnum * st.clock) / p.dnum : 0;
  p.min_decode = p.dnum > 0 ? st.decoding.front().end_clock - st.clock
                            : std::numeric_limits<int64_t>::max();
  const int64_t cap = std::max<int64_t>(0, limits_.max_num_batched_tokens - p.dnum);
  // Cached prefix of the first pending prefill; -1: none pending.
  p.prefix = st.prefilling.empty() ? -1 : st.prefilling.front().context;
  p.budget = p.prefix < 0 ? 0
                          : table_->prefill_budget(limits_.iteration_target, p.mean_ctx, p.dnum,
                                                   cap, p.prefix);
  chunk_.clear();
  for (size_t k = 0; k < st.prefilling.size() && p.plen < p.budget; ++k) {
    chunk_.push_back(std::min(st.prefilling[k].prefill, p.budget - p.plen));
    p.plen += chunk_.back();
  }
  return p;
}

void ExecutionPredictor::run_pass(const std::vector<VirtualWork>& work, const Pass& p,
                                  std::vector<SimTime>* finish) {
  State& st = state_;
  if (p.plen == 0 && p.dnum == 0) {
    throw std::logic_error("execution predictor: a pass with no work (token budget 0)");
  }
  // Identical passes repeat until a decode finishes, a prefill completes or the queue head's KV
  // arrives; advance them together.
  int64_t run = 1;
  if (p.plen == 0) {
    run = p.min_decode;
  } else if (chunk_.size() == 1 && chunk_[0] == p.budget) {
    run = std::max<int64_t>(1, st.prefilling.front().prefill / p.budget);
    if (p.dnum > 0) run = std::min(run, p.min_decode);
  }
  const int64_t ctx_mid = p.mean_ctx + (p.dnum > 0 ? (run - 1) / 2 : 0);
  const Duration pass = table_->predict(p.plen, ctx_mid, p.dnum, p.plen > 0 ? p.prefix : 0);
  if (st.active() < limits_.max_num_seqs && st.next < work.size() && work[st.next].available > st.t) {
    const int64_t until = (work[st.next].available - st.t).count();
    run = std::min(run, std::max<int64_t>(1, (until + pass.count() - 1) / pass.count()));
  }
  st.t += pass * run;
  passes_++;
  const double fill = limits_.fill_tokens > 0
                          ? std::min(1.0, static_cast<double>(p.plen + p.dnum) /
                                              static_cast<double>(limits_.fill_tokens))
                          : 1.0;
  st.load_ns += fill * static_cast<double>(pass.count()) * static_cast<double>(run);
  // Decodes advance with the clock; retire those that are done.
  st.clock += run;
  while (!st.decoding.empty() && st.decoding.front().end_clock <= st.clock) {
    const Decoding& d = st.decoding.front();
    if (finish) (*finish)[static_cast<size_t>(d.index)] = st.t;
    st.kv_used -= d.footprint;
    st.context_base_sum -= d.context_base;
    std::pop_heap(st.decoding.begin(), st.decoding.end(), std::greater<Decoding>());
    st.decoding.pop_back();
  }
  // Prefill chunks. Only a front run of items can complete (FCFS filling); a completed one
  // decodes from the next pass on, or is done.
  for (size_t k = 0; k < chunk_.size(); ++k) {
    st.prefilling[k].prefill -= chunk_[k] * run;
    st.prefilling[k].context += chunk_[k] * run;
  }
  while (!st.prefilling.empty() && st.prefilling.front().prefill == 0) {
    const Prefilling f = st.prefilling.front();
    st.prefilling.pop_front();
    if (f.decode > 0) {
      start_decode(f.index, f.decode, f.context, f.footprint);
    } else {
      if (finish) (*finish)[static_cast<size_t>(f.index)] = st.t;
      st.kv_used -= f.footprint;
    }
  }
}

bool ExecutionPredictor::replay(const std::vector<VirtualWork>& work, Until until,
                                std::vector<SimTime>* finish) {
  State& st = state_;
  while (true) {
    admit(work);
    if (st.active() == 0) {
      if (st.next >= work.size()) return true;
      st.t = std::max(st.t, work[st.next].available);
      continue;
    }
    const Pass p = compose();
    // A last item, admitted behind everything here, changes a pass only once the prefills ahead
    // of it leave budget over (or none are left).
    if (until == Until::kTailCouldJoin && (st.prefilling.empty() || p.plen < p.budget)) {
      return false;
    }
    run_pass(work, p, finish);
  }
}

SimTime ExecutionPredictor::drain(const std::vector<VirtualWork>& work, SimTime start,
                                  std::vector<SimTime>* finish) {
  if (finish) finish->assign(work.size(), start);
  reset(start);
  replay(work, Until::kDrained, finish);
  return state_.t;
}

void ExecutionPredictor::set_base(const std::vector<VirtualWork>& base, SimTime start) {
  work_ = base;
  base_start_ = start;
  reset(start);
  // The state is kept at the top of the pass a tail could change; admission there is repeated
  // on resuming, which admits nothing new of the base and then the tail if it fits.
  replay(work_, Until::kTailCouldJoin, nullptr);
  base_state_ = state_;
}

SimTime ExecutionPredictor::drain_with(const VirtualWork* tail) {
  if (tail && tail->available > base_start_) {
    throw std::logic_error("execution predictor: a tail item must be available at the base's start");
  }
  if (tail && tail->prefill_tokens == 0) {
    // A decode joins every pass from its admission on, not only once the prefills ahead are
    // done: replay from the start.
    work_.push_back(*tail);
    reset(base_start_);
    replay(work_, Until::kDrained, nullptr);
    work_.pop_back();
    return state_.t;
  }
  state_ = base_state_;
  if (tail) work_.push_back(*tail);
  replay(work_, Until::kDrained, nullptr);
  if (tail) work_.pop_back();
  return state_.t;
}

// ---- parameters ----

const ParamSchema& dynaserve_schema() {
  static const ParamSchema schema = {
      {"num_pairs", ParamType::kInt, int64_t{1}, "pairs",
       "(α, β) instance pairs; instance 2k is pair k's α-instance", {}, 1.0,
       static_cast<double>(kMaxInstances / 2)},
      {"tp", ParamType::kInt, int64_t{1}, "GPUs", "TP degree of every instance", {}, 1.0, 64.0},
      {"max_num_batched_tokens", ParamType::kInt, int64_t{8192}, "tokens",
       "most tokens in one iteration (the SLO-aware budget is usually smaller)", {}, 1.0, {}},
      {"max_num_seqs", ParamType::kInt, int64_t{256}, "requests",
       "most requests running on an instance at once", {}, 1.0, {}},
      {"k_max", ParamType::kInt, int64_t{6}, "iterations",
       "binary-search iterations over the split ratio", {}, 1.0, 64.0},
      {"balance_tolerance", ParamType::kDouble, 0.2, "",
       "stop the search when the two predicted drain times differ by at most this share of the "
       "horizon",
       {}, 0.0, 1.0},
      {"length_margin", ParamType::kInt, int64_t{20}, "tokens",
       "added to every predicted output length", {}, 0.0, {}},
      {"length_sigma", ParamType::kDouble, 0.0, "tokens",
       "std-dev of the Gaussian error of the output-length predictor", {}, 0.0, {}},
      {"split_ratio", ParamType::kDouble, -1.0, "",
       "fixed split ratio s = round(ratio * N) instead of the search (-1 = search)", {}, -1.0, 1.0},
      {"balance", ParamType::kString, std::string("load"), "",
       "what the split search balances: load (each instance's predicted passes weighted by how "
       "full they are) or drain (predicted drain times)",
       {"load", "drain"}, {}, {}},
      {"handoff_in_prefill", ParamType::kBool, true, "",
       "move a searched split at the prompt's end (s = P) to s = P - 1, so the β-instance emits "
       "the first token and the hand-off gap lands in TTFT instead of the first TBT gap",
       {}, {}, {}},
      {"fill_tokens", ParamType::kInt, int64_t{4096}, "tokens",
       "batch tokens from which a predicted pass counts fully toward an instance's load", {}, 1.0,
       {}},
      {"tbt_slo", ParamType::kDuration, Duration{100'000'000}, "",
       "TBT target of the local scheduler when the scenario sets no slo.tbt_p99", {}, {}, {}},
      {"slo_headroom", ParamType::kDouble, 0.9, "",
       "iteration latency target = headroom x TBT SLO", {}, 0.05, 1.0},
      {"table_plen_step", ParamType::kInt, int64_t{64}, "tokens",
       "latency-table bucket width of prefill tokens", {}, 1.0, {}},
      {"table_ctx_step", ParamType::kInt, int64_t{128}, "tokens",
       "latency-table bucket width of mean decode context", {}, 1.0, {}},
      {"table_prefix_step", ParamType::kInt, int64_t{1024}, "tokens",
       "latency-table bucket width of the prefill chunk's cached prefix", {}, 1.0, {}},
      {"table_ema", ParamType::kDouble, 0.5, "",
       "weight of a measured iteration when it refines its latency-table bucket", {}, 0.01, 1.0},
      {"block_size", ParamType::kInt, int64_t{16}, "tokens", "tokens per paged KV block", {}, 1.0,
       static_cast<double>(kMaxBlockSize)},
      {"gpu_memory_utilization", ParamType::kDouble, 0.9, "",
       "share of GPU memory the engine may use (weights + activations + KV)", {}, 0.05, 1.0},
  };
  return schema;
}

DynaServeParams DynaServeParams::from(const ParamValues& v) {
  DynaServeParams p;
  p.num_pairs = v.get_int("num_pairs");
  p.tp = static_cast<int>(v.get_int("tp"));
  p.max_num_batched_tokens = v.get_int("max_num_batched_tokens");
  p.max_num_seqs = v.get_int("max_num_seqs");
  p.k_max = v.get_int("k_max");
  p.balance_tolerance = v.get_double("balance_tolerance");
  p.length_margin = v.get_int("length_margin");
  p.length_sigma = v.get_double("length_sigma");
  p.split_ratio = v.get_double("split_ratio");
  p.balance_drain = v.get_string("balance") == "drain";
  p.handoff_in_prefill = v.get_bool("handoff_in_prefill");
  p.fill_tokens = v.get_int("fill_tokens");
  p.tbt_slo = v.get_duration("tbt_slo");
  p.slo_headroom = v.get_double("slo_headroom");
  p.table.plen_step = v.get_int("table_plen_step");
  p.table.ctx_step = v.get_int("table_ctx_step");
  p.table.prefix_step = v.get_int("table_prefix_step");
  p.table.ema = v.get_double("table_ema");
  p.block_size = v.get_int("block_size");
  p.gpu_memory_utilization = v.get_double("gpu_memory_utilization");
  return p;
}

namespace {

Duration iteration_target(const DynaServeParams& p, const sim::SloSpec& slo) {
  const Duration tbt = slo.tbt_p99 ? *slo.tbt_p99 : p.tbt_slo;
  return Duration{static_cast<int64_t>(p.slo_headroom * static_cast<double>(tbt.count()))};
}

// ---- global scheduler ----

class DynaServeRouter : public sim::RoutingPolicy {
 public:
  DynaServeRouter(const DynaServeParams& p, const std::vector<sim::InstanceContext>& contexts,
                  std::vector<std::shared_ptr<LatencyTable>> tables)
      : p_(p),
        lengths_(p.length_sigma, p.length_margin, contexts.empty() ? 0 : contexts.front().seed),
        tables_(std::move(tables)) {
    if (contexts.size() != static_cast<size_t>(2 * p.num_pairs) || tables_.size() != contexts.size()) {
      throw std::invalid_argument(fmt::format("dynaserve: {} pairs need {} instances and tables, got {}",
                                              p.num_pairs, 2 * p.num_pairs, contexts.size()));
    }
    for (size_t i = 0; i < contexts.size(); ++i) {
      if (!tables_[i]) throw std::invalid_argument("dynaserve: missing latency table");
      PredictorLimits lim;
      lim.max_num_batched_tokens = p.max_num_batched_tokens;
      lim.max_num_seqs = p.max_num_seqs;
      lim.kv_capacity_tokens = contexts[i].num_blocks * contexts[i].block_size;
      lim.iteration_target = iteration_target(p, contexts[i].slo);
      lim.fill_tokens = p.balance_drain ? 0 : p.fill_tokens;
      predictors_.emplace_back(tables_[i].get(), lim);
    }
  }

  int32_t route(const sim::ClusterView& view, const RequestSpec& request) override {
    if (!view.queues) throw std::logic_error("dynaserve needs the instance queues to route");
    const int64_t d_hat = predicted_output(request);
    const int32_t a = static_cast<int32_t>(2 * (next_pair_++ % p_.num_pairs));
    const int32_t b = a + 1;
    const int64_t n = request.prompt_tokens + d_hat;
    int64_t s;
    if (p_.split_ratio >= 0) {
      s = std::llround(p_.split_ratio * static_cast<double>(n));
    } else {
      s = search_split(view, request, d_hat, a, b);
      // At s = P the α-instance emits the first token and the β-instance the second, one hand-off
      // later: the rest of the KV, then the end of β's running iteration, then β's next one. β runs
      // iterations sized to the TBT target, so that gap would overrun it. One token earlier, β
      // computes the last prompt token and emits the first token itself: the hand-off lands in
      // TTFT, and every later gap is one of β's iterations.
      if (p_.handoff_in_prefill && s == request.prompt_tokens && s >= 2) --s;
    }
    s = std::clamp<int64_t>(s, 0, n);
    decision_id_ = request.id;
    decision_ = {};
    if (s == 0) return b;
    // A split at or past the request's real end is no split: it finishes on the α-instance.
    if (s < n && s < request.prompt_tokens + request.output_tokens) decision_ = {s, b};
    return a;
  }

  sim::SplitDecision split(const sim::ClusterView& view, const RequestSpec& request,
                           int32_t instance) override {
    if (request.id != decision_id_) return {};
    return decision_;
  }

 private:
  // D̂ of a request, predicted once and cached by id.
  int64_t predicted_output(const RequestSpec& request) {
    const size_t i = static_cast<size_t>(request.id);
    if (i >= predicted_.size()) predicted_.resize(i + 1, 0);
    if (predicted_[i] == 0) predicted_[i] = lengths_.predict(request);
    return predicted_[i];
  }
  int64_t predicted_output(const sim::SeqView& s) {
    RequestSpec r;
    r.id = s.id;
    r.prompt_tokens = s.prompt_tokens;
    r.output_tokens = s.output_tokens;
    return predicted_output(r);
  }

  // The virtual work of a request already on an instance (or on its way to one).
  VirtualWork work_of(const sim::SeqView& s, SimTime available) {
    const int64_t d_hat = predicted_output(s);
    const int64_t end = std::max(s.split_tokens > 0 ? s.split_tokens : s.prompt_tokens + d_hat - 1,
                                 s.target_tokens());
    VirtualWork w;
    w.prefill_tokens = s.is_decode() ? 0 : s.remaining_tokens();
    w.decode_passes = end - s.computed_tokens - w.prefill_tokens;
    w.context = s.computed_tokens;
    w.available = available;
    return w;
  }

  // The part of a request from token s + 1 on (its β micro-request), given P and D̂.
  static VirtualWork beta_of(int64_t prompt, int64_t d_hat, int64_t s, SimTime available) {
    VirtualWork w;
    w.prefill_tokens = std::max<int64_t>(0, prompt - s);
    w.decode_passes = prompt + d_hat - 1 - s - w.prefill_tokens;
    if (w.prefill_tokens == 0) w.decode_passes = std::max<int64_t>(1, w.decode_passes);
    w.context = s;
    w.available = available;
    return w;
  }

  // Snapshot of pair (a, b): a's queue, and b's queue followed by its pending β work (whose α is
  // still on a).
  void snapshot(const sim::ClusterView& view, int32_t a, int32_t b) {
    const auto& qa = (*view.queues)[static_cast<size_t>(a)];
    const auto& qb = (*view.queues)[static_cast<size_t>(b)];
    base_a_.clear();
    base_b_.clear();
    std::vector<VirtualWork>& pending = pending_;  // scratch
    pending.clear();
    const auto add_a = [&](const sim::SeqView& s) {
      if (s.split_tokens > 0 && s.split_target == b) {
        pending.push_back(beta_of(s.prompt_tokens, predicted_output(s), s.split_tokens, view.now));
      }
      base_a_.push_back(work_of(s, view.now));
    };
    for (const auto& s : *qa.running) add_a(s);
    for (const auto& s : *qa.waiting) add_a(s);
    for (const auto& s : *qb.running) base_b_.push_back(work_of(s, view.now));
    for (const auto& s : *qb.waiting) base_b_.push_back(work_of(s, view.now));
    base_b_.insert(base_b_.end(), pending.begin(), pending.end());
    start_a_ = std::max(view.now, qa.busy_until);
    start_b_ = std::max(view.now, qb.busy_until);
  }

  struct Balance {
    SimTime a, b;
  };

  // Predicted drain times of both instances when the new request is split at s. Every queued
  // micro-request counts as available now: the search balances the work each instance holds.
  // (Completion times with β waiting for α's KV would always favour α: β can only finish after
  // α, however little it gets.)
  // REQUIRES: snapshot(view, a, b) and both predictors' set_base() since the last decision.
  Balance evaluate(int32_t a, int32_t b, int64_t prompt, int64_t d_hat, int64_t s, SimTime now) {
    const int64_t n = prompt + d_hat;
    VirtualWork alpha;
    alpha.prefill_tokens = std::min(s, prompt);
    alpha.decode_passes = s >= n ? d_hat - 1 : std::max<int64_t>(0, s - prompt);
    alpha.available = now;
    const VirtualWork beta = beta_of(prompt, d_hat, s, now);
    ExecutionPredictor& pa = predictors_[static_cast<size_t>(a)];
    ExecutionPredictor& pb = predictors_[static_cast<size_t>(b)];
    const SimTime drain_a = pa.drain_with(s > 0 ? &alpha : nullptr);
    const SimTime drain_b = pb.drain_with(s < n ? &beta : nullptr);
    if (p_.balance_drain) return {drain_a, drain_b};
    return {start_a_ + pa.last_load(), start_b_ + pb.last_load()};
  }

  // Algorithm 1: bounded binary search on the split ratio, starting at pure disaggregation,
  // keeping the ratio whose two drain times are closest.
  int64_t search_split(const sim::ClusterView& view, const RequestSpec& request, int64_t d_hat,
                       int32_t a, int32_t b) {
    snapshot(view, a, b);
    predictors_[static_cast<size_t>(a)].set_base(base_a_, start_a_);
    predictors_[static_cast<size_t>(b)].set_base(base_b_, start_b_);
    const int64_t n = request.prompt_tokens + d_hat;
    double lo = 0, hi = 1;
    double rho = static_cast<double>(request.prompt_tokens) / static_cast<double>(n);
    int64_t best_s = request.prompt_tokens;
    int64_t best_gap = std::numeric_limits<int64_t>::max();
    for (int64_t it = 0; it < p_.k_max; ++it) {
      const int64_t s = std::clamp<int64_t>(std::llround(rho * static_cast<double>(n)), 0, n);
      const Balance t = evaluate(a, b, request.prompt_tokens, d_hat, s, view.now);
      const int64_t gap = std::abs((t.a - t.b).count());
      if (gap < best_gap) {
        best_gap = gap;
        best_s = s;
      }
      const double horizon = static_cast<double>((std::min(t.a, t.b) - view.now).count());
      if (static_cast<double>(gap) <= std::max(1e6, p_.balance_tolerance * horizon)) break;
      if (t.a > t.b) {
        hi = rho;
      } else {
        lo = rho;
      }
      rho = (lo + hi) / 2;
    }
    return best_s;
  }

  DynaServeParams p_;
  OutputLengthPredictor lengths_;
  std::vector<std::shared_ptr<LatencyTable>> tables_;
  std::vector<ExecutionPredictor> predictors_;
  std::vector<int64_t> predicted_;  // D̂ by request id (0 = not predicted yet)
  int64_t next_pair_ = 0;
  RequestId decision_id_ = -1;
  sim::SplitDecision decision_;
  // Scratch reused across decisions.
  std::vector<VirtualWork> base_a_, base_b_, pending_;
  SimTime start_a_{}, start_b_{};
};

}  // namespace

std::unique_ptr<sim::RoutingPolicy> make_dynaserve_router(
    const DynaServeParams& params, const std::vector<sim::InstanceContext>& contexts,
    std::vector<std::shared_ptr<LatencyTable>> tables) {
  return std::make_unique<DynaServeRouter>(params, contexts, std::move(tables));
}

sim::ClusterLayout make_dynaserve_layout(const DynaServeParams& p) {
  sim::ClusterLayout layout;
  layout.transfer = sim::KvTransferMode::kChunked;
  // Each instance's latency table, shared by its local scheduler and the global scheduler.
  auto tables = std::make_shared<std::vector<std::shared_ptr<LatencyTable>>>(
      static_cast<size_t>(2 * p.num_pairs));
  sim::InstanceGroup g;
  g.role = sim::InstanceRole::kUnified;
  g.count = 2 * p.num_pairs;
  g.tp = p.tp;
  g.block_size = p.block_size;
  g.gpu_memory_utilization = p.gpu_memory_utilization;
  g.max_num_batched_tokens = p.max_num_batched_tokens;
  g.max_num_seqs = p.max_num_seqs;
  g.make_batching = [p, tables](const sim::InstanceContext& ctx) {
    if (ctx.index < 0 || static_cast<size_t>(ctx.index) >= tables->size()) {
      throw std::logic_error("dynaserve: instance index outside its pairs");
    }
    auto table = std::make_shared<LatencyTable>(ctx.cost_model, p.table);
    (*tables)[static_cast<size_t>(ctx.index)] = table;
    ColocParams cp;
    cp.mode = ColocParams::Mode::kStallFree;
    cp.kv_allocation = ColocParams::KvAllocation::kWholePrompt;
    cp.max_num_batched_tokens = p.max_num_batched_tokens;
    cp.max_num_seqs = p.max_num_seqs;
    cp.latency_table = std::move(table);
    cp.iteration_target = iteration_target(p, ctx.slo);
    return make_coloc(cp);
  };
  layout.make_router = [p, tables](const std::vector<sim::InstanceContext>& contexts) {
    return make_dynaserve_router(p, contexts, *tables);
  };
  layout.groups.push_back(std::move(g));
  return layout;
}

void register_dynaserve() {
  sim::cluster_policies().add(
      "dynaserve",
      {"DynaServe: requests split into micro-requests across instance pairs at a balanced token "
       "boundary, SLO-aware local batching, chunked KV transfer",
       dynaserve_schema(),
       [](const ParamValues& v) { return make_dynaserve_layout(DynaServeParams::from(v)); },
       /*check=*/{}});  // the schema's checks alone
}

}  // namespace servesim::policies
