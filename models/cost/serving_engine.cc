#include "models/cost/serving_engine.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace servesim::models {
namespace {

class EngineCostModel final : public IterationCostModel {
 public:
  EngineCostModel(std::shared_ptr<const IterationCostModel> gpu, EngineRuntime runtime)
      : gpu_(std::move(gpu)),
        runtime_(std::move(runtime)),
        launch_(std::llround(runtime_.cpu.launch_per_layer_ns * runtime_.layers)) {}

  Duration iteration_time(const BatchShape& shape) const override {
    return with_cpu(launched(scaled(gpu_->iteration_time(padded(shape)), shape), shape),
                    cpu_cost(shape));
  }

  // The decode pass padded as padded() pads its shape: rows of context 1 that sample nothing.
  std::optional<Duration> decode_iteration_time(const DecodePass& pass) const override {
    const int64_t target = runtime_.graphs.padded(pass.decodes, /*decode_only=*/true);
    const std::optional<Duration> gpu = gpu_->decode_iteration_time(
        {target, pass.context_tokens + (target - pass.decodes), pass.logit_rows});
    if (!gpu) return std::nullopt;
    return with_cpu(launched(scaled_for(*gpu, /*prefill_tokens=*/0), pass.decodes,
                             /*has_prefill=*/false),
                    cpu_cost(pass.decodes, pass.decodes));
  }

  // The whole shape (the run's segments, then `rest`) padded as padded() pads it: the padding
  // rows go after `rest`.
  std::optional<Duration> mixed_iteration_time(const DecodePass& run,
                                               const BatchShape& rest) const override {
    const int64_t tokens = run.decodes + rest.total_query_tokens();
    const auto segments = run.decodes + static_cast<int64_t>(rest.segments.size());
    const int64_t target = runtime_.graphs.padded(tokens, /*decode_only=*/tokens == segments);
    const std::optional<Duration> gpu =
        gpu_->mixed_iteration_time(run, with_padding(rest, target - tokens));
    if (!gpu) return std::nullopt;
    return with_cpu(launched(scaled(*gpu, rest), tokens, rest), cpu_cost(segments, tokens));
  }

  OperatorTimes breakdown(const BatchShape& shape) const override {
    OperatorTimes t = gpu_->breakdown(padded(shape));
    if (!runtime_.gpu_scale.identity()) {
      const int64_t prefill = prefill_tokens(shape);
      for (Duration* d : {&t.qkv_gemm, &t.o_gemm, &t.mlp_gemm, &t.attention_prefill,
                          &t.attention_decode, &t.norms_elementwise, &t.allreduce, &t.lm_head,
                          &t.overhead}) {
        *d = scaled_for(*d, prefill);
      }
    }
    const Duration gpu = t.total();
    const Duration run = launched(gpu, shape);
    const Duration cpu = cpu_cost(shape);
    t.overhead += (run - gpu) + (runtime_.cpu.overlapped ? std::max(Duration{0}, cpu - run) : cpu);
    return t;
  }

  Duration peak_bound_time(const BatchShape& shape) const override {
    return gpu_->peak_bound_time(shape);
  }

  std::string describe() const override {
    return fmt::format("{}; {}", gpu_->describe(), runtime_.describe());
  }

  LookupStats lookup_stats() const override { return gpu_->lookup_stats(); }

 private:
  // The pass's wall time: CPU work overlapped with the GPU's or after it.
  Duration with_cpu(Duration gpu, Duration cpu) const {
    return runtime_.cpu.overlapped ? std::max(gpu, cpu) : gpu + cpu;
  }

  // The GPU time of a pass of `tokens` query tokens once its kernels are launched: a captured
  // graph's as is, any other pass's no shorter than the launch of its layers. A pass without
  // prefill tokens (decodes, speculative verifications) is a graph when its size is captured.
  Duration launched(Duration gpu, int64_t tokens, bool has_prefill) const {
    if (launch_.count() == 0 || runtime_.graphs.captured(tokens, !has_prefill)) return gpu;
    return std::max(gpu, launch_);
  }
  // The same, where `prefills` holds the pass's prefill segments: counted only when a launch
  // cost applies, so that a pass of an engine without one pays nothing for it.
  Duration launched(Duration gpu, int64_t tokens, const BatchShape& prefills) const {
    return launch_.count() == 0 ? gpu : launched(gpu, tokens, prefill_tokens(prefills) > 0);
  }
  Duration launched(Duration gpu, const BatchShape& shape) const {
    return launch_.count() == 0 ? gpu : launched(gpu, shape.total_query_tokens(), shape);
  }

  static int64_t prefill_tokens(const BatchShape& shape) {
    int64_t tokens = 0;
    for (const Segment& s : shape.segments) {
      if (s.query_tokens > 1 && !is_verification(s)) tokens += s.query_tokens;
    }
    return tokens;
  }

  // The GPU time of a pass with `prefill_tokens` prompt tokens under the engine's GPU scale.
  Duration scaled_for(Duration gpu, int64_t prefill_tokens) const {
    if (runtime_.gpu_scale.identity()) return gpu;
    return Duration{std::llround(static_cast<double>(gpu.count()) *
                                 runtime_.gpu_scale.factor(prefill_tokens))};
  }
  // The same for `shape`, counting its prompt tokens only when a scale applies.
  Duration scaled(Duration gpu, const BatchShape& shape) const {
    return runtime_.gpu_scale.identity() ? gpu : scaled_for(gpu, prefill_tokens(shape));
  }

  // The busiest scheduler's CPU work for a pass of `requests` segments and `tokens` query tokens.
  Duration cpu_cost(int64_t requests, int64_t tokens) const {
    const int64_t r = runtime_.scheduler_ranks;
    return runtime_.cpu.cost((requests + r - 1) / r, (tokens + r - 1) / r);
  }
  Duration cpu_cost(const BatchShape& shape) const {
    return cpu_cost(static_cast<int64_t>(shape.segments.size()), shape.total_query_tokens());
  }

  // `shape` itself, or the scratch copy with the padding rows of its CUDA graph.
  const BatchShape& padded(const BatchShape& shape) const {
    const int64_t tokens = shape.total_query_tokens();
    const bool decode_only = tokens == static_cast<int64_t>(shape.segments.size());
    return with_padding(shape, runtime_.graphs.padded(tokens, decode_only) - tokens);
  }

  // `shape` itself, or the scratch copy with `rows` padding rows (context 1, sampling nothing).
  const BatchShape& with_padding(const BatchShape& shape, int64_t rows) const {
    if (rows == 0) return shape;
    scratch_.segments.assign(shape.segments.begin(), shape.segments.end());
    scratch_.segments.resize(shape.segments.size() + static_cast<size_t>(rows), Segment{1, 1, 0});
    return scratch_;
  }

  std::shared_ptr<const IterationCostModel> gpu_;
  EngineRuntime runtime_;
  Duration launch_;  // host time to launch every layer of a pass outside a captured graph
  mutable BatchShape scratch_;
};

std::string us(double ns) { return fmt::format("{:.3g} us", ns / 1e3); }

}  // namespace

std::string gpu_class(const GpuSpec& gpu) {
  std::string arch = gpu.arch;
  std::transform(arch.begin(), arch.end(), arch.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* family : {"ampere", "ada", "hopper", "blackwell"}) {
    if (arch.find(family) != std::string::npos) return family;
  }
  return "other";
}

int64_t CudaGraphSpec::padded(int64_t tokens, bool decode_only) const {
  if (!(decode_only ? pad_decode : pad_mixed) || capture_sizes.empty() || tokens > max_size()) {
    return tokens;
  }
  return *std::lower_bound(capture_sizes.begin(), capture_sizes.end(), tokens);
}

bool CudaGraphSpec::captured(int64_t tokens, bool decode_only) const {
  if (!decode_only || capture_sizes.empty()) return false;
  if (pad_decode) return tokens <= max_size();
  return std::binary_search(capture_sizes.begin(), capture_sizes.end(), tokens);
}

double GpuTimeScale::factor(int64_t prefill_tokens) const {
  const double p = static_cast<double>(std::max<int64_t>(prefill_tokens, 0));
  return decode + (prefill - decode) * p / (p + kBlendTokens);
}

Duration CpuCostSpec::cost(int64_t requests, int64_t tokens) const {
  return per_iteration +
         Duration{std::llround(per_request_ns * static_cast<double>(requests) +
                               per_token_ns * static_cast<double>(tokens))};
}

std::string EngineRuntime::describe() const {
  std::string graphs_text = "no CUDA graphs";
  if (!graphs.capture_sizes.empty()) {
    const char* padded = graphs.pad_decode && graphs.pad_mixed ? "decode and mixed batches padded"
                         : graphs.pad_decode                   ? "decode batches padded"
                                                               : "no padding";
    graphs_text = fmt::format("CUDA graphs up to {} ({})", graphs.max_size(), padded);
  }
  const std::string scale_text =
      gpu_scale.identity()
          ? std::string()
          : fmt::format("; GPU time x{:.3g} decode, x{:.3g} prefill", gpu_scale.decode,
                        gpu_scale.prefill);
  const std::string ranks_text =
      scheduler_ranks > 1 ? fmt::format(" (each of {} rank schedulers)", scheduler_ranks) : "";
  const std::string launch_text =
      cpu.launch_per_layer_ns > 0 && layers > 0
          ? fmt::format("; passes outside a CUDA graph launched in {} x {} layers",
                        us(cpu.launch_per_layer_ns), layers)
          : std::string();
  return fmt::format("{}: {}; CPU {} + {}/request + {}/token per iteration{}, {}{}{}", name,
                     graphs_text, us(static_cast<double>(cpu.per_iteration.count())),
                     us(cpu.per_request_ns), us(cpu.per_token_ns), ranks_text,
                     cpu.overlapped ? "overlapped with the GPU" : "serial with the GPU",
                     launch_text, scale_text);
}

std::unique_ptr<IterationCostModel> make_engine_cost_model(
    std::shared_ptr<const IterationCostModel> gpu, EngineRuntime runtime) {
  if (!gpu) throw std::invalid_argument("engine cost model: no GPU cost model");
  const auto& sizes = runtime.graphs.capture_sizes;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 1 || (i > 0 && sizes[i] <= sizes[i - 1])) {
      throw std::invalid_argument(fmt::format(
          "engine cost model {}: CUDA graph capture sizes must be positive and ascending",
          runtime.name));
    }
  }
  const CpuCostSpec& c = runtime.cpu;
  if (c.per_iteration.count() < 0 || !(c.per_request_ns >= 0) || !(c.per_token_ns >= 0) ||
      !(c.launch_per_layer_ns >= 0) ||
      !std::isfinite(c.per_request_ns + c.per_token_ns + c.launch_per_layer_ns)) {
    throw std::invalid_argument(fmt::format(
        "engine cost model {}: CPU cost coefficients must be finite and >= 0", runtime.name));
  }
  if (runtime.layers < 0) {
    throw std::invalid_argument(fmt::format("engine cost model {}: layers must be >= 0, got {}",
                                            runtime.name, runtime.layers));
  }
  if (runtime.scheduler_ranks < 1) {
    throw std::invalid_argument(
        fmt::format("engine cost model {}: scheduler_ranks must be >= 1, got {}", runtime.name,
                    runtime.scheduler_ranks));
  }
  for (double f : {runtime.gpu_scale.prefill, runtime.gpu_scale.decode}) {
    if (!(f >= 0.05 && f <= 20)) {
      throw std::invalid_argument(fmt::format(
          "engine cost model {}: GPU time scales must be in [0.05, 20], got {}", runtime.name, f));
    }
  }
  return std::make_unique<EngineCostModel>(std::move(gpu), std::move(runtime));
}

}  // namespace servesim::models
