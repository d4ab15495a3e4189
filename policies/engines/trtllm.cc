// TensorRT-LLM (PyTorch backend, trtllm-serve) as a serving-engine model.
//
// Facts modelled (tensorrt_llm/llmapi/llm_args.py, tensorrt_llm/_torch/pyexecutor/):
// - Scheduler: in-flight batching (trtllm.h): capacity scheduler GUARANTEED_NO_EVICT, micro-batch
//   scheduler with max_num_tokens 8192 and max_batch_size 2048 (trtllm-serve's defaults), context
//   chunking off.
// - KV pool: free_gpu_memory_fraction (0.9) of the memory a max_num_tokens dry run leaves free
//   after the weights (KvPoolRule::kFreeFraction), in blocks of tokens_per_block (32).
// - CUDA graphs: CudaGraphConfig's generated sizes up to cuda_graph_max_batch_size (128): 1..31,
//   32, 64, 128 without padding (enable_padding false, the default: other decode batch sizes run
//   eagerly), 1, 2, 4, 8..128 step 8 with it; then powers of two and the maximum.
// - CPU: the overlap scheduler (on unless disable_overlap_scheduler) prepares iteration n+1
//   while n runs.
// - Attention DP: attention_dp_config's balancing of new contexts over the ranks (off by default;
//   timeout_iters 50 and batching_wait_iters 10 when enabled), trtllm.h's step 3.
#include "policies/engines/trtllm.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "policies/engines/engine_model.h"
#include "core/limits.h"

namespace servesim::policies {
namespace {

using sim::BatchPlan;
using sim::blocks_for_tokens;
using sim::InstanceView;
using sim::SeqView;

// attention_dp_config's balancing of new contexts over the attention-DP ranks (trtllm.h, step 3),
// asked once per iteration. The ranks are not tracked one by one: `contexts` and `decodes` count
// as spread over them one per rank first, so every rank has a context when there are at least as
// many contexts as ranks, and a generation request when there are as many decodes.
class AdpContextGate {
 public:
  // Whether this iteration's `contexts` may start beside its `decodes` under `p`'s balancing;
  // advances the counts. REQUIRES: p.balances_contexts().
  bool allows(const TrtllmSchedulerParams& p, int64_t contexts, int64_t decodes) {
    const int64_t ranks = p.attention_dp_ranks;
    const bool every_rank_decodes = decodes >= ranks;
    if (decodes < p.max_batch_size && contexts >= ranks) {
      waiting_iters_ = 0;
      if (every_rank_decodes && batching_iters_ < p.adp_batching_wait_iters) {
        ++batching_iters_;
        return false;
      }
      batching_iters_ = 0;
      return true;
    }
    ++waiting_iters_;
    if (waiting_iters_ >= p.adp_timeout_iters || !every_rank_decodes) {
      waiting_iters_ = 0;
      return true;
    }
    return false;
  }

 private:
  int64_t waiting_iters_ = 0;   // adp_ctx_waiting_iters_count
  int64_t batching_iters_ = 0;  // adp_ctx_batching_wait_iters_count
};

class TrtllmScheduler final : public sim::BatchingPolicy {
 public:
  explicit TrtllmScheduler(const TrtllmSchedulerParams& p) : p_(p) {}

  bool next_batch(const InstanceView& view, BatchPlan& plan) override {
    const auto& running = *view.running;
    int64_t tokens = 0;
    int64_t count = 0;
    int64_t free = view.free_blocks;
    preempted_.assign(running.size(), 0);
    // 1. Running requests in order.
    for (size_t pos = 0; pos < running.size(); ++pos) {
      if (preempted_[pos]) continue;
      const SeqView& r = running[pos];
      if (count >= p_.max_batch_size || tokens >= p_.max_num_tokens) break;
      int64_t n = r.is_decode() ? r.decode_step_tokens()
                                : std::min(r.remaining_tokens(), p_.max_num_tokens - tokens);
      if (!r.is_decode() && !p_.enable_chunked_prefill && n < r.remaining_tokens()) break;
      const int64_t kv = std::max(r.computed_tokens + n, reserve_of(r));
      int64_t extra = std::max<int64_t>(0, blocks_for_tokens(kv, view.block_size) - r.blocks);
      // Only MAX_UTILIZATION can run out: the newest requests make room, or this one waits.
      while (extra > free && preempt_newest(running, pos, plan, free)) {
      }
      if (extra > free) break;
      free -= extra;
      if (!r.is_decode()) running_contexts_.push_back(plan.scheduled.size());
      plan.scheduled.push_back({r.id, n, reserve_of(r)});
      tokens += n;
      ++count;
    }
    const size_t running_steps = plan.scheduled.size();
    if (plan.preempt.empty()) schedule_waiting(view, plan, tokens, count, free);
    const auto contexts = static_cast<int64_t>(running_contexts_.size() + plan.admit.size());
    const auto decodes = static_cast<int64_t>(running_steps - running_contexts_.size());
    if (p_.balances_contexts() && !gate_.allows(p_, contexts, decodes)) {
      hold_contexts(plan, running_steps);
    }
    running_contexts_.clear();
    return !plan.empty();
  }

  // A decode batch of every running request: the balancing counts the iteration.
  void on_steady_decode_step(const InstanceView& view) override {
    if (p_.balances_contexts()) {
      gate_.allows(p_, 0, static_cast<int64_t>(view.running->size()));
    }
  }

  // With nothing waiting, every running decode step is scheduled for one token while they fit
  // max_batch_size and max_num_tokens; the free KV blocks the engine checks cover what
  // MAX_UTILIZATION would otherwise preempt for. The balancing only counts such iterations.
  bool plans_steady_decode(const InstanceView& view) const override {
    const auto n = static_cast<int64_t>(view.running->size());
    return n <= p_.max_batch_size && n <= p_.max_num_tokens;
  }

 private:
  // 2. Waiting requests, FCFS, stopping at the first that cannot start, into what step 1 left of
  // the budgets.
  void schedule_waiting(const InstanceView& view, BatchPlan& plan, int64_t tokens, int64_t count,
                        int64_t free) {
    for (const SeqView& w : *view.waiting) {
      if (count >= p_.max_batch_size) break;
      const int64_t left = p_.max_num_tokens - tokens;
      int64_t n = w.remaining_tokens();
      if (n > left) {
        if (!p_.enable_chunked_prefill || left <= 0) break;
        n = left;
      }
      const int64_t reserve = reserve_of(w);
      const int64_t need = blocks_for_tokens(std::max(n, reserve), view.block_size);
      if (need > free) break;
      free -= need;
      plan.admit.push_back(w.id);
      plan.scheduled.push_back({w.id, n, reserve});
      tokens += n;
      ++count;
    }
  }

  // Step 3 held this iteration's contexts back: the plan keeps the decode steps of its first
  // `running_steps` entries (step 1's) only.
  void hold_contexts(BatchPlan& plan, size_t running_steps) const {
    plan.admit.clear();
    plan.scheduled.resize(running_steps);
    for (auto at = running_contexts_.rbegin(); at != running_contexts_.rend(); ++at) {
      plan.scheduled.erase(plan.scheduled.begin() + static_cast<std::ptrdiff_t>(*at));
    }
  }

  // KV tokens a request holds from admission: its whole sequence under GUARANTEED_NO_EVICT.
  int64_t reserve_of(const SeqView& r) const {
    return p_.capacity == TrtllmSchedulerParams::Capacity::kGuaranteedNoEvict
               ? r.prompt_tokens + r.output_tokens
               : 0;
  }

  // Preempts the newest running request after `pos` that is not preempted yet. Returns false when
  // there is none.
  bool preempt_newest(const std::vector<SeqView>& running, size_t pos, BatchPlan& plan,
                      int64_t& free) {
    for (size_t q = running.size(); q-- > pos + 1;) {
      if (preempted_[q]) continue;
      preempted_[q] = 1;
      plan.preempt.push_back(running[q].id);
      free += running[q].blocks;
      return true;
    }
    return false;
  }

  TrtllmSchedulerParams p_;
  AdpContextGate gate_;
  std::vector<char> preempted_;
  std::vector<size_t> running_contexts_;  // step 1's entries of `plan.scheduled` that are contexts
};

// CudaGraphConfig's generated batch sizes for `max_bs`: with padding 1, 2, 4 and multiples of 8
// up to 128, else 1..31, 32, 64, 128; then powers of two from 256 below max_bs, and max_bs.
std::vector<int64_t> graph_sizes(int64_t max_bs, bool padding) {
  std::vector<int64_t> sizes;
  if (padding) {
    sizes = {1, 2, 4};
    for (int64_t s = 8; s <= 128; s += 8) sizes.push_back(s);
  } else {
    for (int64_t s = 1; s < 32; ++s) sizes.push_back(s);
    for (int64_t s : {32, 64, 128}) sizes.push_back(s);
  }
  for (int64_t s = 256; s < max_bs; s *= 2) sizes.push_back(s);
  std::erase_if(sizes, [max_bs](int64_t s) { return s > max_bs; });
  if (max_bs > 0 && (sizes.empty() || sizes.back() != max_bs)) sizes.push_back(max_bs);
  return sizes;
}

ParamSchema trtllm_schema() {
  ParamSchema s = {
      {"max_num_tokens", ParamType::kInt, int64_t{8192}, "tokens",
       "most tokens in one iteration", {}, 1.0, {}},
      {"max_batch_size", ParamType::kInt, int64_t{2048}, "requests",
       "most requests in one iteration", {}, 1.0, {}},
      {"free_gpu_memory_fraction", ParamType::kDouble, 0.9, "",
       "share of the memory left free after weights and activations given to the KV cache", {},
       0.05, 1.0},
      {"tokens_per_block", ParamType::kInt, int64_t{32}, "tokens", "tokens per KV block", {}, 1.0,
       static_cast<double>(kMaxBlockSize)},
      {"enable_chunked_prefill", ParamType::kBool, false, "",
       "split a context that does not fit the token budget across iterations", {}, {}, {}},
      {"capacity_scheduler_policy", ParamType::kString, std::string("GUARANTEED_NO_EVICT"), "",
       "KV admission: reserve whole sequences, or prompts only (may preempt)",
       {"GUARANTEED_NO_EVICT", "MAX_UTILIZATION"}, {}, {}},
      {"cuda_graph_max_batch_size", ParamType::kInt, int64_t{128}, "requests",
       "largest captured decode batch; 0 = no CUDA graphs", {},
       0.0, {}},
      {"cuda_graph_padding", ParamType::kBool, false, "",
       "pad decode batches to the next captured size (enable_padding)", {}, {}, {}},
      {"disable_overlap_scheduler", ParamType::kBool, false, "",
       "prepare each iteration only after the previous one finished", {}, {}, {}},
      {"enable_block_reuse", ParamType::kBool, true, "",
       "KV cache block reuse across requests sharing a prefix", {}, {}, {}},
      {"attention_dp_enable_balance", ParamType::kBool, false, "",
       "attention DP: new contexts start when every rank has one, or every "
       "attention_dp_timeout_iters iterations (attention_dp_config.enable_balance)", {}, {}, {}},
      {"attention_dp_timeout_iters", ParamType::kInt, int64_t{50}, "iterations",
       "attention DP balancing: iterations after which waiting contexts start anyway", {}, 0.0,
       {}},
      {"attention_dp_batching_wait_iters", ParamType::kInt, int64_t{10}, "iterations",
       "attention DP balancing: iterations contexts wait once every rank has one", {}, 0.0, {}},
  };
  for (ParamSpec& k : calibration_knobs()) s.push_back(std::move(k));
  s.push_back(kernel_tables_knob());
  return s;
}

EngineSetup build_trtllm(const std::string& version, const ParamValues& knobs,
                         const EngineTarget& target) {
  EngineSetup setup;
  setup.version = version;  // the known version whose defaults apply
  setup.resolved = knobs;
  TrtllmSchedulerParams p;
  p.max_num_tokens = knobs.get_int("max_num_tokens");
  p.max_batch_size = knobs.get_int("max_batch_size");
  p.enable_chunked_prefill = knobs.get_bool("enable_chunked_prefill");
  p.capacity = knobs.get_string("capacity_scheduler_policy") == "MAX_UTILIZATION"
                   ? TrtllmSchedulerParams::Capacity::kMaxUtilization
                   : TrtllmSchedulerParams::Capacity::kGuaranteedNoEvict;
  p.attention_dp_ranks = target.attention_dp;
  p.adp_enable_balance = knobs.get_bool("attention_dp_enable_balance");
  p.adp_timeout_iters = knobs.get_int("attention_dp_timeout_iters");
  p.adp_batching_wait_iters = knobs.get_int("attention_dp_batching_wait_iters");

  setup.memory.rule = models::KvPoolRule::kFreeFraction;
  setup.memory.gpu_memory_utilization = knobs.get_double("free_gpu_memory_fraction");
  setup.memory.block_size = knobs.get_int("tokens_per_block");
  setup.memory.max_num_batched_tokens = p.max_num_tokens;
  setup.memory.max_num_seqs = std::min<int64_t>(p.max_batch_size, 512);

  setup.runtime.name = fmt::format("trtllm {}", version);
  const bool padding = knobs.get_bool("cuda_graph_padding");
  setup.runtime.graphs.capture_sizes = graph_sizes(knobs.get_int("cuda_graph_max_batch_size"), padding);
  setup.runtime.graphs.pad_decode = padding;
  setup.runtime.graphs.pad_mixed = false;
  apply_calibration("trtllm", knobs, target, !knobs.get_bool("disable_overlap_scheduler"), setup);

  setup.make_scheduler = [p] { return make_trtllm_scheduler(p); };
  setup.prefix_caching = knobs.get_bool("enable_block_reuse");
  setup.kernel_tables = kernel_tables_of("trtllm", knobs);
  if (!p.enable_chunked_prefill) setup.max_prompt_tokens = p.max_num_tokens;
  const std::string balance =
      p.balances_contexts()
          ? fmt::format(
                ", contexts balanced over {} attention-DP ranks (timeout {}, wait {} "
                "iterations)",
                p.attention_dp_ranks, p.adp_timeout_iters, p.adp_batching_wait_iters)
          : "";
  setup.summary = fmt::format(
      "TensorRT-LLM {} (in-flight batching: {}, {} tokens and {} requests per iteration, {}{})",
      version, knobs.get_string("capacity_scheduler_policy"), p.max_num_tokens, p.max_batch_size,
      p.enable_chunked_prefill ? "chunked contexts" : "whole contexts", balance);
  return setup;
}

}  // namespace

std::unique_ptr<sim::BatchingPolicy> make_trtllm_scheduler(const TrtllmSchedulerParams& params) {
  return std::make_unique<TrtllmScheduler>(params);
}

namespace {

// aiconfigurator's generator pads TensorRT-LLM's CUDA graphs and rounds its token budget up to
// whole KV blocks (tokens_per_block 32), as the engine rounds max_num_tokens; InferenceMAX's
// recipes with attention DP add attention_dp_config's balancing.
std::vector<EngineKnob> trtllm_benchmark_knobs(const BenchmarkLimits& l) {
  const int64_t block = 32;
  std::vector<EngineKnob> knobs = {{"max_batch_size", l.max_batch},
                                   {"max_num_tokens", (l.token_budget + block - 1) / block * block},
                                   {"cuda_graph_max_batch_size", l.max_batch},
                                   {"cuda_graph_padding", true}};
  if (l.adp_balance) {
    knobs.emplace_back("attention_dp_enable_balance", true);
    knobs.emplace_back("attention_dp_timeout_iters", l.adp_timeout_iters);
    knobs.emplace_back("attention_dp_batching_wait_iters", l.adp_batching_wait_iters);
  }
  return knobs;
}

}  // namespace

void register_trtllm_engine() {
  engine_models().add("trtllm",
                      {"TensorRT-LLM (PyTorch backend): in-flight batching, guaranteed-no-evict KV "
                       "admission, overlap scheduler",
                       {"1.0.0", "1.1.0", "1.2.0", "1.3.0"},
                       trtllm_schema(),
                       build_trtllm,
                       {},
                       trtllm_benchmark_knobs});
}

}  // namespace servesim::policies
