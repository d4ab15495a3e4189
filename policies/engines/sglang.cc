// SGLang as a serving-engine model.
//
// Facts modelled, per version (python/sglang/srt/server_args.py, managers/, model_executor/):
// - Scheduler: prefill-first with chunked prefill and new-token-ratio admission (sglang.h).
// - Defaults up to 0.5.3: mem_fraction_static 0.88 / 0.87 / 0.85 / 0.81 / 0.79 at TP 1 / 2 / 4 /
//   8 / 16; chunked_prefill_size 8192 (2048 below 25 GB of HBM); CUDA graphs up to batch 160.
//   From 0.5.4: chunked_prefill_size and cuda_graph_max_bs by HBM (8192 and 256 at TP < 4, else
//   512, for 60-160 GiB GPUs; 16384 and 512 above), and mem_fraction_static = 1 - reserved / HBM
//   with reserved = 512 MiB + 1.5 MiB x max(chunked_prefill_size, 2048) + 2 MiB x
//   cuda_graph_max_bs + TP / 8 GiB, at least 10 GiB on GPUs above 60 GiB.
// - KV pool: HBM x mem_fraction_static - weights (KvPoolRule::kStaticFraction), one token per
//   page.
// - CUDA graphs for decode batches: [1, 2, 4, 8, 12] + 16..256 step 8 + 272..496 step 16 + 512..
//   step 32, up to cuda_graph_max_bs, padded; prefill batches run eagerly.
// - CPU: the overlap scheduler (on unless disable_overlap_schedule) overlaps it with the GPU.
#include "policies/engines/sglang.h"

#include <algorithm>
#include <cmath>
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

// schedule_batch.py / global_config.py constants.
constexpr int64_t kClipMaxNewTokens = 4096;
constexpr double kInitNewTokenRatio = 0.7;
constexpr double kMinNewTokenRatioFactor = 0.14;
constexpr double kNewTokenRatioDecaySteps = 600;
constexpr int64_t kRetractDecodeSteps = 20;

class SglangScheduler final : public sim::BatchingPolicy {
 public:
  explicit SglangScheduler(const SglangSchedulerParams& p)
      : p_(p),
        init_ratio_(std::min(kInitNewTokenRatio * p.schedule_conservativeness, 1.0)),
        min_ratio_(std::min(init_ratio_ * kMinNewTokenRatioFactor, 1.0)),
        decay_((init_ratio_ - min_ratio_) / kNewTokenRatioDecaySteps),
        ratio_(init_ratio_) {}

  // With nothing waiting and no chunked prompt, try_prefill() forms nothing and decode() takes
  // every running request once the pool holds their next tokens (the engine checks the blocks).
  bool plans_steady_decode(const InstanceView& /*view*/) const override { return true; }

  // What next_batch() does to the scheduler's state for such a decode batch: the new-token ratio
  // decays one step (nothing was retracted).
  void on_steady_decode_step(const InstanceView& view) override {
    const auto running = static_cast<int64_t>(view.running->size());
    note_running(running);
    last_running_ = running;
    receive(view);
    last_batch_weight_ = kDecodeWeight;
    decay_ratio();
  }

  bool next_batch(const InstanceView& view, BatchPlan& plan) override {
    const auto& running = *view.running;
    note_running(static_cast<int64_t>(running.size()));
    receive(view);
    if (running.empty() && view.waiting->empty()) {
      ratio_ = init_ratio_;
      last_batch_weight_ = kDecodeWeight;
      return false;
    }
    const bool prefilled = try_prefill(view, plan);
    if (!prefilled) decode(view, plan);
    last_running_ = static_cast<int64_t>(running.size()) + static_cast<int64_t>(plan.admit.size()) -
                    static_cast<int64_t>(plan.preempt.size());
    waiting_after_plan_ = static_cast<int64_t>(view.waiting->size()) -
                          static_cast<int64_t>(plan.admit.size()) +
                          static_cast<int64_t>(plan.preempt.size());
    last_batch_weight_ = prefilled ? kOtherWeight : kDecodeWeight;
    if (plan.empty()) ratio_ = init_ratio_;  // idle: SGLang's self-check resets the ratio
    return !plan.empty();
  }

 private:
  // scheduler_recv_skipper.py: with scheduler_recv_interval n > 1, the scheduler takes in the
  // requests that arrived only when a counter reaches n; the batch before each call adds 1 when it
  // was a decode (or there was none) and 1000 otherwise, so a request that arrives during a run of
  // decode batches waits for up to n of them. An idle scheduler spins through its loop and takes
  // it in at once. Requests that arrived since the last call sit at the tail of the waiting queue
  // (preempted ones re-enter at its head and were taken in before).
  static constexpr int64_t kDecodeWeight = 1;
  static constexpr int64_t kOtherWeight = 1000;
  void receive(const InstanceView& view) {
    const auto waiting = static_cast<int64_t>(view.waiting->size());
    unreceived_ = std::clamp<int64_t>(unreceived_ + waiting - waiting_after_plan_, 0, waiting);
    waiting_after_plan_ = waiting;
    recv_counter_ += last_batch_weight_;
    if (p_.scheduler_recv_interval <= 1 || view.running->empty() ||
        recv_counter_ >= p_.scheduler_recv_interval) {
      recv_counter_ = 0;
      unreceived_ = 0;
    }
    received_ = static_cast<size_t>(waiting - unreceived_);
  }

  // A request left since the last batch: the pool may have room for new ones again.
  void note_running(int64_t running) {
    if (running < last_running_) batch_is_full_ = false;
  }
  // One decode batch without retraction: the new-token ratio decays a step towards its minimum.
  void decay_ratio() { ratio_ = std::max(ratio_ - decay_, min_ratio_); }

  static int64_t output_left(const SeqView& r) {
    return std::min(std::max<int64_t>(r.output_tokens - r.generated_tokens, 0), kClipMaxNewTokens);
  }

  // A prefill batch (PrefillAdder). Returns false when none can be formed.
  bool try_prefill(const InstanceView& view, BatchPlan& plan) {
    const auto& running = *view.running;
    const SeqView* chunked = nullptr;
    int64_t decoders = 0;
    double reserved = 0;  // rem_total_token_offset of the running requests
    for (const SeqView& r : running) {
      if (r.is_decode()) {
        ++decoders;
        reserved += static_cast<double>(output_left(r)) * ratio_;
      } else if (!chunked) {
        chunked = &r;
      }
    }
    if ((batch_is_full_ || received_ == 0) && !chunked) return false;
    if (decoders >= p_.max_running_requests && !chunked) {
      batch_is_full_ = true;
      return false;
    }
    const int64_t mixed = p_.enable_mixed_chunk ? decoders : 0;
    const int64_t free_tokens = view.free_blocks * view.block_size;
    double rem_total = static_cast<double>(free_tokens) - reserved - static_cast<double>(mixed);
    int64_t rem_input = p_.max_prefill_tokens - mixed;
    const bool chunking = p_.chunked_prefill_size > 0;
    int64_t rem_chunk = chunking ? p_.chunked_prefill_size - mixed : 0;
    int64_t added = 0;
    int64_t free_blocks = view.free_blocks;  // what the engine will have left for this plan
    bool stop = false;

    auto take = [&](int64_t input, int64_t future) {
      rem_total -= static_cast<double>(input + future);
      rem_input -= input;
      rem_chunk -= input;
    };
    auto budget_state_ok = [&] {
      if (rem_total <= 0) {
        batch_is_full_ = true;
        return false;
      }
      return rem_input > 0 && (!chunking || rem_chunk > 0);
    };

    if (chunked) {
      int64_t rem = chunking ? std::min<int64_t>(rem_chunk, static_cast<int64_t>(rem_total))
                             : chunked->remaining_tokens();
      if (rem <= 0) rem = rem_chunk;
      // Never more than the pool holds (SGLang would run out of memory here).
      rem = std::min(rem, (chunked->blocks + free_blocks) * view.block_size -
                              chunked->computed_tokens);
      const int64_t n = std::min(chunked->remaining_tokens(), rem);
      if (n <= 0) return false;
      const bool truncated = n < chunked->remaining_tokens();
      free_blocks -= std::max<int64_t>(
          0, blocks_for_tokens(chunked->computed_tokens + n, view.block_size) - chunked->blocks);
      plan.scheduled.push_back({chunked->id, n, 0});
      take(n, truncated ? 0 : output_left(*chunked));
      ++added;
      stop = truncated || !budget_state_ok();
    }
    for (size_t at = 0; at < received_; ++at) {
      const SeqView& w = (*view.waiting)[at];
      if (stop) break;
      if (decoders + added >= p_.max_running_requests) {
        batch_is_full_ = true;
        break;
      }
      const int64_t input = w.remaining_tokens();
      if (static_cast<double>(input + output_left(w)) >= rem_total) {
        batch_is_full_ = true;
        break;
      }
      if (input >= rem_input && added > 0) break;
      if (!chunking || input <= rem_chunk) {
        if (blocks_for_tokens(input, view.block_size) > free_blocks) {
          batch_is_full_ = true;
          break;
        }
        free_blocks -= blocks_for_tokens(input, view.block_size);
        plan.admit.push_back(w.id);
        plan.scheduled.push_back({w.id, input, 0});
        take(input, output_left(w));
        ++added;
        stop = !budget_state_ok();
      } else {
        const int64_t trunc =
            std::min(rem_chunk, free_blocks * view.block_size) / view.block_size * view.block_size;
        if (trunc <= 0) break;
        plan.admit.push_back(w.id);
        plan.scheduled.push_back({w.id, trunc, 0});
        take(trunc, 0);
        ++added;
        break;
      }
    }
    if (added == 0) return false;
    if (p_.enable_mixed_chunk) {
      for (const SeqView& r : running) {
        if (r.is_decode()) plan.scheduled.push_back({r.id, r.decode_step_tokens(), 0});
      }
    }
    return true;
  }

  // A decode batch of every running request, retracting requests first when the pool cannot
  // hold the next token of each.
  void decode(const InstanceView& view, BatchPlan& plan) {
    const auto& running = *view.running;
    order_.clear();
    int64_t need = 0;
    for (size_t pos = 0; pos < running.size(); ++pos) {
      if (!running[pos].is_decode()) continue;
      order_.push_back(pos);
      need += next_token_blocks(running[pos], view.block_size);
    }
    if (order_.empty()) return;
    int64_t free = view.free_blocks;
    if (need > free) {
      // Retract the request with the fewest generated tokens (ties: the longest prompt) until
      // the pool holds kRetractDecodeSteps tokens for each remaining request.
      std::stable_sort(order_.begin(), order_.end(), [&](size_t a, size_t b) {
        const SeqView& x = running[a];
        const SeqView& y = running[b];
        if (x.generated_tokens != y.generated_tokens) return x.generated_tokens > y.generated_tokens;
        return x.prompt_tokens < y.prompt_tokens;
      });
      while (order_.size() > 1 &&
             free * view.block_size <
                 static_cast<int64_t>(order_.size()) * kRetractDecodeSteps) {
        retract_last(running, plan, free, need, view.block_size);
      }
      // A lone request the pool cannot grow goes back to the queue too.
      while (!order_.empty() && need > free) {
        retract_last(running, plan, free, need, view.block_size);
      }
      double decoded = 0, max_new = 0;
      for (size_t pos : order_) {
        decoded += static_cast<double>(running[pos].generated_tokens);
        max_new += static_cast<double>(running[pos].output_tokens);
      }
      ratio_ = std::min(1.0, (decoded + static_cast<double>(kRetractDecodeSteps * order_.size())) /
                                 std::max(max_new, 1.0));
      std::sort(order_.begin(), order_.end());
    } else {
      decay_ratio();
    }
    for (size_t pos : order_) {
      plan.scheduled.push_back({running[pos].id, running[pos].decode_step_tokens(), 0});
    }
  }

  // Retracts the request at the end of order_ (recompute): its KV returns to the pool.
  void retract_last(const std::vector<SeqView>& running, BatchPlan& plan, int64_t& free,
                    int64_t& need, int64_t block_size) {
    const SeqView& victim = running[order_.back()];
    plan.preempt.push_back(victim.id);
    free += victim.blocks;
    need -= next_token_blocks(victim, block_size);
    order_.pop_back();
  }

  static int64_t next_token_blocks(const SeqView& r, int64_t block_size) {
    return std::max<int64_t>(
        0, blocks_for_tokens(r.computed_tokens + r.decode_step_tokens(), block_size) - r.blocks);
  }

  SglangSchedulerParams p_;
  double init_ratio_, min_ratio_, decay_, ratio_;
  bool batch_is_full_ = false;
  int64_t last_running_ = 0;
  int64_t recv_counter_ = 0;
  int64_t last_batch_weight_ = kDecodeWeight;
  int64_t waiting_after_plan_ = 0;  // the waiting queue once the last plan is applied
  int64_t unreceived_ = 0;          // requests at its tail the scheduler has not taken in
  size_t received_ = 0;             // requests at its head the scheduler has taken in
  std::vector<size_t> order_;
};

constexpr int64_t kMiB = int64_t{1} << 20;

struct SglangDefaults {
  int64_t chunked_prefill_size = 8192;
  int64_t cuda_graph_max_bs = 160;
  double mem_fraction_static = 0.88;
};

// server_args.py's GPU-memory heuristics of `version` (see the file comment).
SglangDefaults sglang_defaults(const std::string& version, const models::GpuSpec& gpu, int tp,
                               int64_t chunk_override, int64_t graph_override) {
  SglangDefaults d;
  const double mem_mib = static_cast<double>(gpu.memory_bytes) / static_cast<double>(kMiB);
  if (version == "0.5.1") {
    d.mem_fraction_static = tp >= 16 ? 0.79 : tp >= 8 ? 0.81 : tp >= 4 ? 0.85 : tp >= 2 ? 0.87 : 0.88;
    d.chunked_prefill_size = mem_mib < 25'000 ? 2048 : 8192;
    d.cuda_graph_max_bs = mem_mib < 25'000 ? (tp < 4 ? 8 : 80) : 160;
    if (chunk_override > 0) d.chunked_prefill_size = chunk_override;
    if (graph_override > 0) d.cuda_graph_max_bs = graph_override;
    return d;
  }
  if (mem_mib < 20 * 1024) {
    d.chunked_prefill_size = 2048;
    d.cuda_graph_max_bs = 8;
  } else if (mem_mib < 35 * 1024) {
    d.chunked_prefill_size = 2048;
    d.cuda_graph_max_bs = tp < 4 ? 24 : 80;
  } else if (mem_mib < 60 * 1024) {
    d.chunked_prefill_size = 4096;
    d.cuda_graph_max_bs = tp < 4 ? 32 : 160;
  } else if (mem_mib < 160 * 1024) {
    d.chunked_prefill_size = 8192;
    d.cuda_graph_max_bs = tp < 4 ? 256 : 512;
  } else {
    d.chunked_prefill_size = 16384;
    d.cuda_graph_max_bs = 512;
  }
  if (chunk_override > 0) d.chunked_prefill_size = chunk_override;
  if (graph_override > 0) d.cuda_graph_max_bs = graph_override;
  double reserved = 512 + std::max<double>(static_cast<double>(d.chunked_prefill_size), 2048) * 1.5 +
                    static_cast<double>(d.cuda_graph_max_bs) * 2 + tp / 8.0 * 1024;
  if (mem_mib > 60 * 1024) reserved = std::max(reserved, 10.0 * 1024);
  d.mem_fraction_static = std::round((mem_mib - reserved) / mem_mib * 1000) / 1000;
  return d;
}

std::vector<int64_t> decode_graph_sizes(int64_t max_bs) {
  std::vector<int64_t> sizes = {1, 2, 4, 8, 12};
  for (int64_t s = 16; s <= 256; s += 8) sizes.push_back(s);
  for (int64_t s = 272; s < 512; s += 16) sizes.push_back(s);
  for (int64_t s = 512; s <= max_bs; s += 32) sizes.push_back(s);
  std::erase_if(sizes, [max_bs](int64_t s) { return s > max_bs; });
  return sizes;
}

ParamSchema sglang_schema() {
  ParamSchema s = {
      {"chunked_prefill_size", ParamType::kInt, int64_t{0}, "tokens",
       "largest prefill chunk; 0 = the version's default for the GPU's memory, -1 = no chunking",
       {}, -1.0, {}},
      {"max_prefill_tokens", ParamType::kInt, int64_t{16384}, "tokens",
       "most prompt tokens in one prefill batch", {}, 1.0, {}},
      {"max_running_requests", ParamType::kInt, int64_t{0}, "requests",
       "most running requests; 0 = 2048 (the request-pool size)", {}, 0.0, {}},
      {"mem_fraction_static", ParamType::kDouble, 0.0, "",
       "share of GPU memory for weights and KV cache; 0 = the version's default", {}, 0.0, 1.0},
      {"page_size", ParamType::kInt, int64_t{1}, "tokens", "tokens per KV page", {}, 1.0,
       static_cast<double>(kMaxBlockSize)},
      {"schedule_conservativeness", ParamType::kDouble, 1.0, "",
       "scales the initial new-token ratio of admission", {}, 0.0, {}},
      {"cuda_graph_max_bs", ParamType::kInt, int64_t{0}, "requests",
       "largest captured decode batch; 0 = the version's default", {}, 0.0, {}},
      {"disable_cuda_graph", ParamType::kBool, false, "", "no CUDA graphs", {}, {}, {}},
      {"enable_mixed_chunk", ParamType::kBool, false, "",
       "run the decodes inside prefill batches (only with chunked prefill, as in SGLang)", {}, {},
       {}},
      {"disable_overlap_schedule", ParamType::kBool, false, "",
       "prepare each batch only after the previous one finished", {}, {}, {}},
      {"disable_radix_cache", ParamType::kBool, false, "",
       "no prefix reuse (RadixAttention off)", {}, {}, {}},
      {"scheduler_recv_interval", ParamType::kInt, int64_t{1}, "batches",
       "take in new requests only every this many decode batches (1 = at every batch)", {}, 1.0,
       {}},
  };
  for (ParamSpec& k : calibration_knobs()) s.push_back(std::move(k));
  s.push_back(kernel_tables_knob());
  return s;
}

EngineSetup build_sglang(const std::string& version, const ParamValues& knobs,
                         const EngineTarget& target) {
  EngineSetup setup;
  setup.version = version;  // the known version whose defaults apply
  setup.resolved = knobs;
  const int64_t chunk_knob = knobs.get_int("chunked_prefill_size");
  const SglangDefaults d = sglang_defaults(version, *target.gpu, target.tp, chunk_knob,
                                           knobs.get_int("cuda_graph_max_bs"));
  const int64_t chunk = chunk_knob < 0 ? 0 : d.chunked_prefill_size;
  double fraction = knobs.get_double("mem_fraction_static");
  if (fraction == 0) fraction = d.mem_fraction_static;
  int64_t max_running = knobs.get_int("max_running_requests");
  if (max_running == 0) max_running = 2048;
  setup.resolved.set("chunked_prefill_size", chunk_knob < 0 ? int64_t{-1} : chunk);
  setup.resolved.set("cuda_graph_max_bs", d.cuda_graph_max_bs);
  setup.resolved.set("mem_fraction_static", fraction);
  setup.resolved.set("max_running_requests", max_running);

  SglangSchedulerParams p;
  p.chunked_prefill_size = chunk;
  p.max_prefill_tokens = knobs.get_int("max_prefill_tokens");
  p.max_running_requests = max_running;
  p.schedule_conservativeness = knobs.get_double("schedule_conservativeness");
  p.scheduler_recv_interval = knobs.get_int("scheduler_recv_interval");
  // scheduler.py: is_mixed_chunk = chunked_prefill_size is not None and enable_mixed_chunk, where
  // a chunked_prefill_size <= 0 became None: without chunked prefill, prefill batches never carry
  // the running decodes.
  p.enable_mixed_chunk = knobs.get_bool("enable_mixed_chunk") && chunk > 0;
  setup.resolved.set("enable_mixed_chunk", p.enable_mixed_chunk);

  setup.memory.rule = models::KvPoolRule::kStaticFraction;
  setup.memory.gpu_memory_utilization = fraction;
  setup.memory.block_size = knobs.get_int("page_size");
  setup.memory.max_num_batched_tokens = std::max<int64_t>(chunk, 2048);
  setup.memory.max_num_seqs = std::min<int64_t>(max_running, 512);

  setup.runtime.name = fmt::format("sglang {}", version);
  if (!knobs.get_bool("disable_cuda_graph")) {
    setup.runtime.graphs.capture_sizes = decode_graph_sizes(d.cuda_graph_max_bs);
    setup.runtime.graphs.pad_decode = true;
  }
  apply_calibration("sglang", knobs, target, !knobs.get_bool("disable_overlap_schedule"), setup);
  setup.make_scheduler = [p] { return make_sglang_scheduler(p); };
  setup.prefix_caching = !knobs.get_bool("disable_radix_cache");
  setup.kernel_tables = kernel_tables_of("sglang", knobs);
  setup.summary = fmt::format(
      "SGLang {} (prefill-first scheduler: {}, {} prefill tokens per batch, mem_fraction_static "
      "{:g}{})",
      version, chunk > 0 ? fmt::format("chunks of {} tokens", chunk) : std::string("no chunking"),
      p.max_prefill_tokens, fraction,
      p.scheduler_recv_interval > 1
          ? fmt::format(", new requests taken in every {} decode batches", p.scheduler_recv_interval)
          : std::string());
  return setup;
}

}  // namespace

std::unique_ptr<sim::BatchingPolicy> make_sglang_scheduler(const SglangSchedulerParams& params) {
  return std::make_unique<SglangScheduler>(params);
}

namespace {

// aiconfigurator's generator runs SGLang with its release's prefill chunk and room for one prompt
// per prefill batch, mixing decodes in for the releases whose template asks for it;
// InferenceMAX's recipes chunk prompts by 32k and leave mixing off (the limits say which:
// docs/fidelity.md).
std::vector<EngineKnob> sglang_benchmark_knobs(const BenchmarkLimits& l) {
  std::vector<EngineKnob> knobs = {{"max_running_requests", l.max_batch},
                                   {"cuda_graph_max_bs", l.max_batch},
                                   {"enable_mixed_chunk", l.mixed_chunks},
                                   {"chunked_prefill_size", l.prefill_chunk},
                                   {"max_prefill_tokens", l.prefill_tokens}};
  if (l.recv_interval > 1) knobs.emplace_back("scheduler_recv_interval", l.recv_interval);
  return knobs;
}

}  // namespace

void register_sglang_engine() {
  engine_models().add("sglang", {"SGLang: prefill-first scheduler with chunked prefill and "
                                 "new-token-ratio KV admission, overlap scheduler",
                                 {"0.5.1", "0.5.4"},
                                 sglang_schema(),
                                 build_sglang,
                                 {},
                                 sglang_benchmark_knobs});
}

}  // namespace servesim::policies
