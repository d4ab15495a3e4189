#include "policies/coloc.h"
#include "core/limits.h"

#include <algorithm>
#include <vector>

namespace servesim::policies {
namespace {

using sim::BatchPlan;
using sim::blocks_for_tokens;
using sim::InstanceView;
using sim::SeqView;

// Scratch state of one decision: which running requests are still running after the preemptions
// chosen so far, and how many KV blocks are free. Mirrors exactly how the engine applies a plan
// (preemptions free their blocks first; each scheduled request then grows to
// max(computed + tokens, reserve) tokens of KV).
class Decision {
 public:
  Decision(const InstanceView& view, BatchPlan& plan, std::vector<char>& alive,
           std::vector<SeqView>& victims)
      : view_(view), plan_(plan), alive_(alive), victims_(victims), free_(view.free_blocks) {
    alive_.assign(view.running->size(), 1);
    victims_.clear();
    alive_count_ = static_cast<int64_t>(view.running->size());
  }

  int64_t free_blocks() const { return free_; }
  int64_t running_count() const { return alive_count_; }
  bool alive(size_t pos) const { return alive_[pos] != 0; }
  bool preempted_any() const { return !plan_.preempt.empty(); }
  // The requests preempted so far, as the engine will queue them: recomputed from scratch, and
  // in preemption order (the engine puts each at the head of waiting, so the last is first).
  const std::vector<SeqView>& victims() const { return victims_; }

  // Extra blocks `seq` needs to hold `kv_tokens` tokens of KV.
  int64_t extra_blocks(const SeqView& seq, int64_t kv_tokens) const {
    return sim::extra_blocks_for(kv_tokens, seq.blocks, view_.block_size);
  }

  // Preempts the last running request. Returns its position, or -1 if none is left.
  int64_t preempt_last() {
    for (size_t p = alive_.size(); p-- > 0;) {
      if (!alive_[p]) continue;
      const SeqView& victim = (*view_.running)[p];
      alive_[p] = 0;
      alive_count_--;
      free_ += victim.blocks;
      plan_.preempt.push_back(victim.id);
      SeqView queued = victim;
      queued.computed_tokens = 0;
      queued.blocks = 0;
      queued.draft_tokens = 0;  // the engine drops a preempted request's drafts
      queued.preemptions++;
      victims_.push_back(queued);
      return static_cast<int64_t>(p);
    }
    return -1;
  }

  // Frees blocks from the tail until running[pos] can grow by `extra` blocks. Returns false if
  // running[pos] itself had to be preempted.
  bool make_room(size_t pos, int64_t extra) { return extra <= free_ || preempt_for(pos, extra); }

  // make_room() when the free blocks do not suffice.
  bool preempt_for(size_t pos, int64_t extra) {
    while (extra > free_) {
      const int64_t victim = preempt_last();
      if (victim < 0 || victim == static_cast<int64_t>(pos)) return false;
    }
    return true;
  }

  void schedule_running(const SeqView& seq, int64_t tokens, int64_t reserve = 0) {
    free_ -= extra_blocks(seq, std::max(seq.computed_tokens + tokens, reserve));
    plan_.scheduled.push_back({seq.id, tokens, reserve});
  }

  // Schedules the view's decode run (running[0, run.count), each for one token) when its new
  // blocks fit the free ones: exactly what schedule_running(seq, 1) of each in turn would plan,
  // none needing a preemption. Returns the requests scheduled (run.count, or 0 when the blocks do
  // not fit or there is no run). REQUIRES: nothing scheduled or preempted yet.
  int64_t schedule_decode_run() {
    const sim::DecodeRun* run = view_.decode_run;
    if (run == nullptr || run->count == 0 || run->new_blocks > free_) return 0;
    free_ -= run->new_blocks;
    plan_.decode_run = true;
    return run->count;
  }

  // Admits a waiting request (computed_tokens == 0, no blocks) and schedules `tokens` of it.
  void admit(const SeqView& seq, int64_t tokens, int64_t reserve = 0) {
    plan_.admit.push_back(seq.id);
    free_ -= blocks_for_tokens(std::max(tokens, reserve), view_.block_size);
    alive_count_++;
    plan_.scheduled.push_back({seq.id, tokens, reserve});
  }

 private:
  const InstanceView& view_;
  BatchPlan& plan_;
  std::vector<char>& alive_;
  std::vector<SeqView>& victims_;
  int64_t free_;
  int64_t alive_count_ = 0;
};

class Coloc : public sim::BatchingPolicy {
 public:
  explicit Coloc(const ColocParams& p) : p_(p) {}

  bool next_batch(const InstanceView& view, BatchPlan& plan) override {
    Decision d(view, plan, alive_, victims_);
    token_limit_ = p_.max_num_batched_tokens;
    switch (p_.mode) {
      case ColocParams::Mode::kStallFree:
        stall_free(view, d);
        break;
      case ColocParams::Mode::kUnifiedV1:
        unified_v1(view, d);
        break;
      case ColocParams::Mode::kPrefillPriority:
        prefill_priority(view, d);
        break;
    }
    return !plan.empty();
  }

  // Every mode schedules each running decode step for one token when nothing waits and the KV
  // blocks suffice; unified_v1 only while they fit its token budget. The latency-table variant
  // (SLO-aware budgets) learns from every batch, so it is asked each time.
  bool plans_steady_decode(const InstanceView& view) const override {
    if (p_.latency_table) return false;
    return p_.mode != ColocParams::Mode::kUnifiedV1 ||
           static_cast<int64_t>(view.running->size()) <= p_.max_num_batched_tokens;
  }

  // unified_v1 and stall_free schedule the running decode steps first, in running order.
  bool plans_decode_runs() const override { return p_.mode != ColocParams::Mode::kPrefillPriority; }

  void on_batch_done(const InstanceView& view, Duration measured) override {
    if (p_.latency_table && last_.plen + last_.dnum > 0) {
      p_.latency_table->observe(last_.plen, last_.ctx, last_.dnum, last_.prefix, measured);
    }
  }

 private:
  // Composition of the last batch, keyed as the latency table keys it.
  struct Composition {
    int64_t plen = 0, ctx = 0, dnum = 0, prefix = 0;
  };
  bool whole_prompt() const { return p_.kv_allocation == ColocParams::KvAllocation::kWholePrompt; }

  // KV tokens to reserve when a prefill chunk is scheduled.
  int64_t prefill_reserve(const SeqView& seq) const { return whole_prompt() ? seq.target_tokens() : 0; }

  // Largest chunk of `seq`'s remaining prefill that fits `budget` tokens and the free KV.
  int64_t fit_chunk(const SeqView& seq, int64_t budget, int64_t free_blocks) const {
    int64_t c = std::min(seq.remaining_tokens(), budget);
    if (whole_prompt()) {
      // Reserved at admission, except for a request that arrived with part of its KV from another
      // instance (a split micro-request), which reserves the rest of its prompt here.
      const int64_t missing = blocks_for_tokens(seq.target_tokens(), block_size_) - seq.blocks;
      return missing <= free_blocks ? c : 0;
    }
    const int64_t capacity_tokens = (seq.blocks + free_blocks) * block_size_ - seq.computed_tokens;
    return std::max<int64_t>(0, std::min(c, capacity_tokens));
  }

  // The first running position after the view's decode run (0 without one): the requests before
  // it are decode steps, which no prefill phase takes.
  static size_t decode_run_end(const InstanceView& view) {
    return view.decode_run != nullptr ? static_cast<size_t>(view.decode_run->count) : 0;
  }

  // Sarathi-Serve stall-free batching (policies.md §1.4).
  void stall_free(const InstanceView& view, Decision& d) {
    block_size_ = view.block_size;
    const auto& running = *view.running;
    // Phase 1: decodes, FCFS: the leading run at once when its blocks fit, then one at a time.
    int64_t decodes = d.schedule_decode_run();
    int64_t decode_ctx = decodes > 0 ? view.decode_run->context_sum : 0;
    int64_t used = decodes;  // tokens: a decode step verifies its drafts too
    for (size_t pos = static_cast<size_t>(decodes); pos < running.size(); ++pos) {
      if (!d.alive(pos) || !running[pos].is_decode()) continue;
      const SeqView& r = running[pos];
      const int64_t n = r.decode_step_tokens();
      if (!d.make_room(pos, d.extra_blocks(r, r.computed_tokens + n))) break;
      d.schedule_running(r, n);
      decode_ctx += r.computed_tokens + n;
      used += n;
      decodes++;
    }
    const int64_t decode_tokens = used;
    const int64_t mean_ctx = decodes > 0 ? decode_ctx / decodes : 0;
    int64_t prefix = 0;  // cached prefix of the first prefill chunk this iteration would run
    if (p_.latency_table) {
      prefix = next_prefill_prefix(view, d);
      // The prefill share of this iteration is whatever keeps it within the latency target.
      token_limit_ = std::min(p_.max_num_batched_tokens,
                              used + p_.latency_table->prefill_budget(
                                         p_.iteration_target, mean_ctx, decodes,
                                         p_.max_num_batched_tokens - used, prefix));
    }
    // Phase 2: partially prefilled running requests, none of them in the leading decode run.
    for (size_t pos = decode_run_end(view); pos < running.size(); ++pos) {
      if (!d.alive(pos) || running[pos].is_decode()) continue;
      const SeqView& r = running[pos];
      if (used == 0 && whole_prompt()) {
        // Nothing runs this step: a request that arrived with part of its KV (a split
        // micro-request) and cannot reserve the rest of its prompt would wait forever behind
        // others doing the same, so preempt from the tail until it fits (nothing scheduled yet
        // can be a victim).
        const int64_t missing = blocks_for_tokens(r.target_tokens(), block_size_) - r.blocks;
        if (!d.make_room(pos, missing)) continue;
      }
      const int64_t c = fit_chunk(r, token_limit_ - used, d.free_blocks());
      if (c <= 0) continue;
      d.schedule_running(r, c, prefill_reserve(r));
      used += c;
    }
    // Phase 3: new requests, FCFS; stop at the first that cannot be admitted.
    admit_waiting(view, d, used, /*stop_after_preemption=*/false);
    last_ = {used - decode_tokens, mean_ctx, decodes, prefix};
  }

  // Tokens already in KV of the prefill that stall_free would continue first: the first partial
  // prefill still running, else the head of the waiting queue.
  static int64_t next_prefill_prefix(const InstanceView& view, const Decision& d) {
    const auto& running = *view.running;
    for (size_t pos = decode_run_end(view); pos < running.size(); ++pos) {
      if (d.alive(pos) && !running[pos].is_decode()) return running[pos].computed_tokens;
    }
    return view.waiting->empty() ? 0 : view.waiting->front().computed_tokens;
  }

  // Admits waiting requests in FCFS order while budget, sequence slots and KV allow. Requests
  // preempted earlier in this decision are at the head of the waiting queue (policies.md §1.3),
  // so they come first: a later request must not take the KV they gave up.
  void admit_waiting(const InstanceView& view, Decision& d, int64_t& used,
                     bool stop_after_preemption) {
    if (stop_after_preemption && d.preempted_any()) return;
    auto try_admit = [&](const SeqView& r) {
      const int64_t budget = token_limit_ - used;
      if (budget <= 0 || d.running_count() >= p_.max_num_seqs) return false;
      int64_t n = r.remaining_tokens();
      if (p_.long_prefill_token_threshold > 0) n = std::min(n, p_.long_prefill_token_threshold);
      if (!p_.enable_chunked_prefill && n > budget) return false;
      n = std::min(n, budget);
      const int64_t kv_tokens = whole_prompt() ? r.target_tokens() : n;
      if (blocks_for_tokens(kv_tokens, view.block_size) > d.free_blocks()) return false;
      d.admit(r, n, prefill_reserve(r));
      used += n;
      return true;
    };
    const std::vector<SeqView>& victims = d.victims();
    for (auto it = victims.rbegin(); it != victims.rend(); ++it) {
      if (!try_admit(*it)) return;
    }
    for (const SeqView& r : *view.waiting) {
      if (!try_admit(r)) return;
    }
  }

  // vLLM V1 unified scheduling (policies.md §1.5).
  void unified_v1(const InstanceView& view, Decision& d) {
    block_size_ = view.block_size;
    const auto& running = *view.running;
    // The leading decode steps take one token each, at once when they fit the budget and their
    // blocks the free ones (else one at a time, preempting where they must).
    int64_t used = view.decode_run != nullptr && view.decode_run->count <= p_.max_num_batched_tokens
                       ? d.schedule_decode_run()
                       : 0;
    for (size_t pos = static_cast<size_t>(used);
         pos < running.size() && used < p_.max_num_batched_tokens; ++pos) {
      if (!d.alive(pos)) continue;
      const SeqView& r = running[pos];
      int64_t n = r.remaining_tokens();
      if (p_.long_prefill_token_threshold > 0) n = std::min(n, p_.long_prefill_token_threshold);
      n = std::min(n, p_.max_num_batched_tokens - used);
      if (!d.make_room(pos, d.extra_blocks(r, r.computed_tokens + n))) break;
      d.schedule_running(r, n);
      used += n;
    }
    admit_waiting(view, d, used, /*stop_after_preemption=*/true);
  }

  // Prefill-priority (Orca / vLLM V0 without chunked-prefill mixing).
  void prefill_priority(const InstanceView& view, Decision& d) {
    block_size_ = view.block_size;
    const auto& running = *view.running;
    int64_t used = 0;
    // A prefill-only batch: continue partial prefills, then admit waiting prompts that fit.
    for (size_t pos = 0; pos < running.size(); ++pos) {
      const SeqView& r = running[pos];
      if (r.is_decode()) continue;
      const int64_t c = fit_chunk(r, p_.max_num_batched_tokens - used, d.free_blocks());
      if (c <= 0) continue;
      d.schedule_running(r, c, prefill_reserve(r));
      used += c;
    }
    for (const SeqView& r : *view.waiting) {
      const int64_t budget = p_.max_num_batched_tokens - used;
      if (budget <= 0 || d.running_count() >= p_.max_num_seqs) break;
      int64_t n = r.remaining_tokens();
      if (n > budget) {
        // Only the first prefill of a batch may be chunked.
        if (!p_.enable_chunked_prefill || used > 0) break;
        n = budget;
      }
      const int64_t kv_tokens = whole_prompt() ? r.target_tokens() : n;
      if (blocks_for_tokens(kv_tokens, view.block_size) > d.free_blocks()) break;
      d.admit(r, n, prefill_reserve(r));
      used += n;
    }
    if (used > 0) return;
    // Otherwise a decode-only batch of every running request.
    for (size_t pos = 0; pos < running.size(); ++pos) {
      if (!d.alive(pos)) continue;
      const SeqView& r = running[pos];
      const int64_t n = r.decode_step_tokens();
      if (!d.make_room(pos, d.extra_blocks(r, r.computed_tokens + n))) break;
      d.schedule_running(r, n);
    }
  }

  ColocParams p_;
  int64_t token_limit_ = 0;  // this decision's token budget (max_num_batched_tokens unless SLO-aware)
  Composition last_;
  int64_t block_size_ = 16;
  std::vector<char> alive_;       // reused across decisions
  std::vector<SeqView> victims_;  // reused across decisions
};

}  // namespace

const ParamSchema& coloc_schema() {
  static const ParamSchema schema = {
      {"mode", ParamType::kString, std::string("unified_v1"), "",
       "scheduling variant: stall_free (Sarathi-Serve), unified_v1 (vLLM V1), prefill_priority",
       {"stall_free", "unified_v1", "prefill_priority"}, {}, {}},
      {"max_num_batched_tokens", ParamType::kInt, int64_t{2048}, "tokens",
       "token budget of one iteration (the chunk size)", {}, 1.0, {}},
      {"max_num_seqs", ParamType::kInt, int64_t{256}, "requests",
       "most requests running on an instance at once", {}, 1.0, {}},
      {"long_prefill_token_threshold", ParamType::kInt, int64_t{0}, "tokens",
       "cap on tokens one request may take per iteration (0 = off)", {}, 0.0, {}},
      {"enable_chunked_prefill", ParamType::kBool, true, "",
       "split prompts longer than the remaining budget across iterations", {}, {}, {}},
      {"kv_allocation", ParamType::kString, std::string("auto"), "",
       "KV allocation: whole_prompt at admission, per_chunk, or auto (whole_prompt for stall_free)",
       {"auto", "whole_prompt", "per_chunk"}, {}, {}},
      {"block_size", ParamType::kInt, int64_t{16}, "tokens", "tokens per paged KV block", {}, 1.0,
       static_cast<double>(kMaxBlockSize)},
      {"gpu_memory_utilization", ParamType::kDouble, 0.9, "",
       "share of GPU memory the engine may use (weights + activations + KV)", {}, 0.05, 1.0},
  };
  return schema;
}

ColocParams ColocParams::from(const ParamValues& v) {
  ColocParams p;
  const std::string& mode = v.get_string("mode");
  p.mode = mode == "stall_free"         ? Mode::kStallFree
           : mode == "prefill_priority" ? Mode::kPrefillPriority
                                        : Mode::kUnifiedV1;
  p.max_num_batched_tokens = v.get_int("max_num_batched_tokens");
  p.max_num_seqs = v.get_int("max_num_seqs");
  p.long_prefill_token_threshold = v.get_int("long_prefill_token_threshold");
  p.enable_chunked_prefill = v.get_bool("enable_chunked_prefill");
  const std::string& alloc = v.get_string("kv_allocation");
  if (alloc == "whole_prompt" || (alloc == "auto" && p.mode == Mode::kStallFree)) {
    p.kv_allocation = KvAllocation::kWholePrompt;
  } else {
    p.kv_allocation = KvAllocation::kPerChunk;
  }
  return p;
}

namespace {

// coloc's memory knobs size the instance's plan (BatchingPolicyEntry::size_memory).
void size_coloc_memory(const ParamValues& v, models::MemoryParams& memory) {
  memory.block_size = v.get_int("block_size");
  memory.gpu_memory_utilization = v.get_double("gpu_memory_utilization");
  memory.max_num_batched_tokens = v.get_int("max_num_batched_tokens");
  memory.max_num_seqs = v.get_int("max_num_seqs");
}

// Without chunked prefill a prompt must fit in one iteration's token budget.
int64_t coloc_max_prompt_tokens(const ParamValues& v) {
  return v.get_bool("enable_chunked_prefill") ? 0 : v.get_int("max_num_batched_tokens");
}

}  // namespace

std::unique_ptr<sim::BatchingPolicy> make_coloc(const ColocParams& params) {
  return std::make_unique<Coloc>(params);
}

void register_coloc() {
  sim::batching_policies().add(
      "coloc",
      {"PD colocation with continuous batching and chunked prefill (Sarathi-Serve, "
       "vLLM V1, prefill-priority)",
       coloc_schema(), [](const ParamValues& v) { return make_coloc(ColocParams::from(v)); },
       size_coloc_memory, coloc_max_prompt_tokens});
}

}  // namespace servesim::policies
