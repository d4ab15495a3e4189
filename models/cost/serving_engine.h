// What a serving engine (vLLM, SGLang, TensorRT-LLM) adds to the GPU time of a forward pass: CUDA
// graphs that pad small batches to a captured size, and the CPU work of every iteration
// (scheduling, input preparation, sampling, output processing), which runs before the GPU work
// or, with an overlap / async scheduler, alongside it.
//
// Contract:
// - make_engine_cost_model(gpu, runtime) wraps a GPU-only cost model (built with a zero
//   RooflineParams::iteration_overhead: the engine's CPU cost replaces that constant) and returns
//     gpu  = gpu.iteration_time(padded shape) x GpuTimeScale::factor(prefill tokens)
//     cpu  = per_iteration + per_request x segments + per_token x query tokens
//            (with EngineRuntime::scheduler_ranks r > 1: ceil(segments / r) and
//            ceil(query tokens / r), the busiest rank's share, since each rank's scheduler runs
//            in a process of its own, in parallel with the others)
//     run  = captured ? gpu : max(gpu, launch_per_layer x EngineRuntime::layers)
//     time = overlapped ? max(run, cpu) : run + cpu
//   where `captured` (CudaGraphSpec::captured) says the pass replays one whole CUDA graph; any
//   other pass (a prefill, a mixed batch, a decode batch above the largest graph) has its kernels
//   launched layer by layer from Python while the GPU runs them, so the GPU cannot finish it
//   before the host has launched its last layer.
//   where the padded shape adds (padded - tokens) one-token decode segments with a one-token
//   context and no logit row (padded rows cost GEMM, norm and all-reduce time, no attention or
//   LM head) when CudaGraphSpec::padded() rounds the pass up.
// - breakdown() is the GPU model's breakdown of the padded shape, each class scaled by the same
//   factor, with `overhead` holding what the CPU adds (cpu, or max(0, cpu - gpu) when
//   overlapped); peak_bound_time() is the GPU model's bound of the unpadded shape.
// - Deterministic; not thread-safe (one scratch shape per model), like every cost model: one per
//   engine.
// - Value types only: never sees the simulator.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/cost/cost_model.h"
#include "models/catalog/hardware.h"

namespace servesim::models {

// The GPU family an engine's CPU-side costs are calibrated per: "ampere", "ada", "hopper",
// "blackwell", from GpuSpec::arch; "other" when the architecture is not one of them.
std::string gpu_class(const GpuSpec& gpu);

// CUDA graphs of an engine. `capture_sizes` holds the captured batch sizes (tokens), ascending and
// positive; empty means no graphs (every iteration eager, nothing padded).
struct CudaGraphSpec {
  std::vector<int64_t> capture_sizes;
  bool pad_decode = true;  // decode-only batches run as the smallest captured size >= their size
  bool pad_mixed = false;  // batches with prefill tokens too (vLLM's piecewise graphs)

  // The token count a pass of `tokens` query tokens runs at: the smallest captured size >= tokens
  // when the pass kind is padded and tokens <= the largest captured size, else `tokens`.
  int64_t padded(int64_t tokens, bool decode_only) const;
  // Whether a pass of `tokens` query tokens replays one whole captured graph: a pass without
  // prefill tokens (`decode_only`) of a captured size, or of any size up to the largest when
  // decode batches are padded. A pass with prefill tokens never does (vLLM's piecewise graphs
  // leave attention outside the graphs).
  bool captured(int64_t tokens, bool decode_only) const;
  int64_t max_size() const { return capture_sizes.empty() ? 0 : capture_sizes.back(); }
};

// Per-iteration CPU cost: per_iteration + per_request_ns x requests + per_token_ns x tokens of the
// pass. `overlapped`: the engine prepares iteration n+1 while n runs on the GPU.
// `launch_per_layer_ns`: host time to launch one layer's kernels of a pass that is not one
// captured CUDA graph (the model's Python modules, the attention metadata, the kernel launches),
// which runs alongside that pass's own GPU work (see the contract above).
struct CpuCostSpec {
  Duration per_iteration{};
  double per_request_ns = 0;
  double per_token_ns = 0;
  double launch_per_layer_ns = 0;
  bool overlapped = false;

  Duration cost(int64_t requests, int64_t tokens) const;
};

// How much faster (< 1) or slower (> 1) an engine's kernels run a forward pass than the kernels
// its GPU cost model was measured with: `decode` for a pass without prefill tokens, blended toward
// `prefill` as the pass's prefill tokens p grow:
//   factor(p) = decode + (prefill - decode) x p / (p + kBlendTokens)
// Both 1 (the default) leave the GPU time as the kernel tables give it.
struct GpuTimeScale {
  static constexpr double kBlendTokens = 512;
  double prefill = 1;
  double decode = 1;

  double factor(int64_t prefill_tokens) const;
  bool identity() const { return prefill == 1 && decode == 1; }
};

struct EngineRuntime {
  std::string name;  // e.g. "vllm 0.12.0"
  CudaGraphSpec graphs;
  CpuCostSpec cpu;
  GpuTimeScale gpu_scale;
  // Schedulers sharing an instance's passes: its attention-DP ranks (Deployment::attention_dp).
  // SGLang's DP attention, TensorRT-LLM's attention DP and vLLM's data parallelism run one
  // scheduler process per rank over that rank's requests.
  int scheduler_ranks = 1;
  // Layers one pass launches on a GPU (the model's layers over its pipeline stages): the count
  // CpuCostSpec::launch_per_layer_ns is paid for.
  int layers = 0;

  // One line: "vllm 0.12.0: CUDA graphs up to 512 (decode and mixed batches padded); CPU 1.2 ms
  // + 15 us/request + 0.4 us/token per iteration, serial with the GPU".
  std::string describe() const;
};

// Throws std::invalid_argument when `gpu` is null, a capture size is not positive or the sizes
// are not ascending, a CPU coefficient is negative or not finite, a GPU time scale is not in
// [0.05, 20], or scheduler_ranks < 1.
std::unique_ptr<IterationCostModel> make_engine_cost_model(
    std::shared_ptr<const IterationCostModel> gpu, EngineRuntime runtime);

}  // namespace servesim::models
