// vLLM (V1 engine) as a serving-engine model.
//
// Facts modelled, per version (vllm/engine/arg_utils.py, vllm/config/):
// - Scheduler: V1's unified scheduler (policies.md §1.5, coloc's unified_v1): running requests
//   first in order, then waiting ones, all within max_num_batched_tokens; chunked prefill on; KV
//   per chunk in 16-token blocks; preemption by recompute from the tail.
// - Defaults of the OpenAI server: max_num_batched_tokens 8192 and max_num_seqs 1024 on GPUs of
//   at least 70 GiB other than A100, else 2048 and 256; gpu_memory_utilization 0.9.
// - KV pool: gpu_memory_utilization x HBM - weights - the peak of a profiled
//   max_num_batched_tokens forward pass - non-torch memory (KvPoolRule::kUtilizationCap).
// - CUDA graphs: 0.10 captures [1, 2, 4] + 8..512 step 8 (piecewise graphs); 0.11 and later
//   [1, 2, 4] + 8..248 step 8 + 256..max step 16 with max = min(2 x max_num_seqs, 512)
//   (FULL_AND_PIECEWISE); decode and mixed passes up to the largest size run padded.
// - CPU: serial with the GPU unless async_scheduling, which 0.14 turns on by default (its release
//   notes: "Async scheduling is now enabled by default", except with pipeline parallelism, the
//   CPU backend and speculative decoding other than MTP / EAGLE; none of which servesim's vLLM
//   deployments use). 0.14 keeps 0.12's other defaults here.
#include <algorithm>

#include <fmt/format.h>

#include "policies/coloc.h"
#include "policies/engines/engine_model.h"
#include "core/error.h"
#include "core/limits.h"

namespace servesim::policies {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

std::vector<int64_t> capture_sizes(const std::string& version, int64_t max_size) {
  std::vector<int64_t> sizes = {1, 2, 4};
  if (version == "0.10.2") {
    for (int64_t s = 8; s <= 512; s += 8) sizes.push_back(s);
  } else {
    for (int64_t s = 8; s < 256; s += 8) sizes.push_back(s);
    for (int64_t s = 256; s <= max_size; s += 16) sizes.push_back(s);
  }
  std::erase_if(sizes, [max_size](int64_t s) { return s > max_size; });
  return sizes;
}

ParamSchema vllm_schema() {
  ParamSchema s = {
      {"max_num_batched_tokens", ParamType::kInt, int64_t{0}, "tokens",
       "token budget of one iteration; 0 = 8192 on >= 70 GiB GPUs other than A100, else 2048",
       {}, 0.0, {}},
      {"max_num_seqs", ParamType::kInt, int64_t{0}, "requests",
       "most running requests; 0 = 1024 on >= 70 GiB GPUs other than A100, else 256", {}, 0.0, {}},
      {"gpu_memory_utilization", ParamType::kDouble, 0.9, "",
       "share of GPU memory for weights, activations and the KV cache", {}, 0.05, 1.0},
      {"block_size", ParamType::kInt, int64_t{16}, "tokens", "tokens per KV block", {}, 1.0,
       static_cast<double>(kMaxBlockSize)},
      {"enable_chunked_prefill", ParamType::kBool, true, "",
       "split long prompts across iterations", {}, {}, {}},
      {"long_prefill_token_threshold", ParamType::kInt, int64_t{0}, "tokens",
       "cap on one request's tokens per iteration (0 = off)", {}, 0.0, {}},
      {"max_cudagraph_capture_size", ParamType::kInt, int64_t{0}, "tokens",
       "largest CUDA-graph batch; 0 = min(2 x max_num_seqs, 512)", {}, 0.0, {}},
      {"enforce_eager", ParamType::kBool, false, "", "no CUDA graphs", {}, {}, {}},
      {"enable_prefix_caching", ParamType::kBool, true, "",
       "automatic prefix caching: reuse the cached KV blocks of a prompt's prefix", {}, {}, {}},
      {"async_scheduling", ParamType::kBool, false, "",
       "schedule the next iteration while the GPU runs this one (the default: on from 0.14)", {},
       {}, {}},
  };
  for (ParamSpec& k : calibration_knobs()) s.push_back(std::move(k));
  return s;
}

EngineSetup build_vllm(const std::string& version, const ParamValues& knobs,
                       const EngineTarget& target) {
  EngineSetup setup;
  setup.version = version;  // the known version whose defaults apply
  setup.resolved = knobs;
  const models::GpuSpec& gpu = *target.gpu;
  const bool large_gpu =
      gpu.memory_bytes >= 70 * kGiB && gpu.key.find("a100") == std::string::npos;
  int64_t budget = knobs.get_int("max_num_batched_tokens");
  if (budget == 0) budget = large_gpu ? 8192 : 2048;
  int64_t max_seqs = knobs.get_int("max_num_seqs");
  if (max_seqs == 0) max_seqs = large_gpu ? 1024 : 256;
  int64_t graph_max = knobs.get_int("max_cudagraph_capture_size");
  if (graph_max == 0) graph_max = std::min<int64_t>(2 * max_seqs, 512);
  setup.resolved.set("max_num_batched_tokens", budget);
  setup.resolved.set("max_num_seqs", max_seqs);
  setup.resolved.set("max_cudagraph_capture_size", graph_max);

  setup.memory.rule = models::KvPoolRule::kUtilizationCap;
  setup.memory.gpu_memory_utilization = knobs.get_double("gpu_memory_utilization");
  setup.memory.block_size = knobs.get_int("block_size");
  setup.memory.max_num_batched_tokens = budget;
  setup.memory.max_num_seqs = max_seqs;

  setup.runtime.name = fmt::format("vllm {}", version);
  if (!knobs.get_bool("enforce_eager")) {
    setup.runtime.graphs.capture_sizes = capture_sizes(version, graph_max);
    setup.runtime.graphs.pad_decode = true;
    setup.runtime.graphs.pad_mixed = true;
  }
  apply_calibration("vllm", knobs, target, knobs.get_bool("async_scheduling"), setup);

  ColocParams p;
  p.mode = ColocParams::Mode::kUnifiedV1;
  p.kv_allocation = ColocParams::KvAllocation::kPerChunk;
  p.max_num_batched_tokens = budget;
  p.max_num_seqs = max_seqs;
  p.long_prefill_token_threshold = knobs.get_int("long_prefill_token_threshold");
  p.enable_chunked_prefill = knobs.get_bool("enable_chunked_prefill");
  setup.make_scheduler = [p] { return make_coloc(p); };
  setup.prefix_caching = knobs.get_bool("enable_prefix_caching");
  // The vLLM GEMM tables time vLLM's own linear layers, eagerly; serving compiles them.
  setup.compiles_table_layers = !knobs.get_bool("enforce_eager");
  if (!p.enable_chunked_prefill) setup.max_prompt_tokens = budget;
  setup.summary = fmt::format(
      "vLLM {} (V1 scheduler: {}, {}-token budget, up to {} requests)", version,
      p.enable_chunked_prefill ? "chunked prefill" : "whole prompts", budget, max_seqs);
  return setup;
}

}  // namespace

void register_vllm_engine() {
  engine_models().add("vllm", {"vLLM V1: unified chunked-prefill scheduler, CUDA graphs up to 512",
                               {"0.10.2", "0.11.0", "0.12.0", "0.14.0"},
                               vllm_schema(),
                               build_vllm,
                               [](const std::string& version, ParamSchema& schema) {
                                 if (!version_at_least(version, "0.14.0")) return;
                                 for (ParamSpec& k : schema) {
                                   if (k.name == "async_scheduling") k.default_value = true;
                                 }
                               },
                               [](const BenchmarkLimits& l) {
                                 return std::vector<EngineKnob>{
                                     {"max_num_seqs", l.max_batch},
                                     {"max_num_batched_tokens", l.token_budget},
                                     {"max_cudagraph_capture_size", l.max_batch}};
                               }});
}

}  // namespace servesim::policies
