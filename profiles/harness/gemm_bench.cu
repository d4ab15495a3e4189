// cuBLASLt GEMM latency: D[m x n] = X[m x k] * W[n x k]^T, the layout of a linear layer with
// row-major activations X and row-major weights W (see lt_matmul.h).
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <tuple>

#include "gpu_bench.h"
#include "gpu_timer.h"
#include "lt_matmul.h"

namespace servesim::profiling {
namespace {

constexpr int kMaxWeightCopies = 8;

// Device buffers for one (dtype, n, k): weight copies to rotate through, activations for the
// largest m of the plan, the output, and the recipe's scales (all 1.0).
struct GemmBuffers {
  std::vector<void*> weights;
  void* x = nullptr;
  void* d = nullptr;
  float* weight_scales = nullptr;
  float* activation_scales = nullptr;
  ~GemmBuffers() {
    for (void* w : weights) {
      cudaFree(w);
    }
    cudaFree(x);
    cudaFree(d);
    cudaFree(weight_scales);
    cudaFree(activation_scales);
  }
};

// A device array of `count` (at least 1) floats equal to 1.0.
float* alloc_unit_scales(int64_t count) {
  std::vector<float> ones(static_cast<size_t>(std::max<int64_t>(count, 1)), 1.0f);
  float* dev = nullptr;
  SERVESIM_CUDA_CHECK(cudaMalloc(&dev, ones.size() * sizeof(float)));
  SERVESIM_CUDA_CHECK(
      cudaMemcpy(dev, ones.data(), ones.size() * sizeof(float), cudaMemcpyHostToDevice));
  return dev;
}

}  // namespace

std::vector<GemmRow> run_gemm(const std::vector<GemmPoint>& points, const RunContext& ctx) {
  std::vector<GemmRow> rows;
  if (points.empty()) {
    return rows;
  }
  SERVESIM_CUDA_CHECK(cudaSetDevice(ctx.device));
  int l2 = 0;
  SERVESIM_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, ctx.device));
  GpuTimer timer(l2);
  cublasLtHandle_t lt = nullptr;
  SERVESIM_CUBLAS_CHECK(cublasLtCreate(&lt));
  void* workspace = nullptr;
  SERVESIM_CUDA_CHECK(cudaMalloc(&workspace, kGemmWorkspaceBytes));

  // Largest m per (dtype, n, k), so that one allocation serves every m of a shape.
  std::map<std::tuple<std::string, int64_t, int64_t>, int64_t> max_m;
  for (const GemmPoint& p : points) {
    auto& v = max_m[{p.dtype, p.n, p.k}];
    v = std::max(v, p.m);
  }
  std::tuple<std::string, int64_t, int64_t> current_key;
  std::unique_ptr<GemmBuffers> buf;
  int failed = 0;
  size_t done = 0;
  for (const GemmPoint& p : points) {
    if (ctx.out_of_time()) {
      add_skip_note(ctx.skipped, "gemm",
                    "truncated by --max-seconds: " + std::to_string(points.size() - done) +
                        " points not measured");
      break;
    }
    ++done;
    try {
      GemmRecipe recipe = recipe_of_dtype(p.dtype);
      bool fp8 = recipe != GemmRecipe::kBf16;
      size_t in_bytes = fp8 ? 1 : 2;
      std::tuple<std::string, int64_t, int64_t> key{p.dtype, p.n, p.k};
      if (!buf || key != current_key) {
        buf.reset();
        SERVESIM_CUDA_CHECK(cudaDeviceSynchronize());
        buf = std::make_unique<GemmBuffers>();
        current_key = key;
        int64_t mm = max_m[key];
        size_t w_bytes = static_cast<size_t>(p.n * p.k) * in_bytes;
        int copies = static_cast<int>(std::clamp<int64_t>(
            (4 * int64_t{l2}) / static_cast<int64_t>(w_bytes) + 1, 1, kMaxWeightCopies));
        for (int c = 0; c < copies; ++c) {
          void* w = nullptr;
          SERVESIM_CUDA_CHECK(cudaMalloc(&w, w_bytes));
          buf->weights.push_back(w);
          if (fp8) {
            fill_random_fp8_e4m3(w, p.n * p.k, 17 + c, 1.0f, timer.stream());
          } else {
            fill_random_bf16(w, p.n * p.k, 17 + c, 1.0f, timer.stream());
          }
        }
        SERVESIM_CUDA_CHECK(cudaMalloc(&buf->x, static_cast<size_t>(mm * p.k) * in_bytes));
        SERVESIM_CUDA_CHECK(cudaMalloc(&buf->d, static_cast<size_t>(mm * p.n) * 2));
        if (fp8) {
          fill_random_fp8_e4m3(buf->x, mm * p.k, 5, 1.0f, timer.stream());
        } else {
          fill_random_bf16(buf->x, mm * p.k, 5, 1.0f, timer.stream());
        }
        auto [w_scales, x_scales] = scale_floats(recipe, mm, p.n, p.k);
        buf->weight_scales = alloc_unit_scales(w_scales);
        buf->activation_scales = alloc_unit_scales(x_scales);
        SERVESIM_CUDA_CHECK(cudaStreamSynchronize(timer.stream()));
      }
      LtMatmul mm(lt, recipe, p.m, p.n, p.k, {buf->weight_scales, buf->activation_scales});
      GemmBuffers* b = buf.get();
      double us = timer.median_us(
          [&](cudaStream_t s, int v) { mm.run(s, b->weights[v], b->x, b->d, workspace); },
          static_cast<int>(b->weights.size()), ctx.reps, ctx.warmup);
      rows.push_back({p, us});
      if (ctx.verbose) {
        double tflops = 2.0 * p.m * p.n * p.k / (us * 1e-6) / 1e12;
        std::fprintf(stderr, "gemm %-8s %-7s m=%-6lld n=%-6lld k=%-6lld %10.3f us %7.1f TFLOP/s\n",
                     p.dtype.c_str(), p.layer.c_str(), static_cast<long long>(p.m),
                     static_cast<long long>(p.n), static_cast<long long>(p.k), us, tflops);
      }
    } catch (const GpuError& e) {
      ++failed;
      std::fprintf(stderr, "gemm %s m=%lld n=%lld k=%lld FAILED: %s\n", p.dtype.c_str(),
                   static_cast<long long>(p.m), static_cast<long long>(p.n),
                   static_cast<long long>(p.k), e.what());
      cudaGetLastError();
    }
  }
  buf.reset();
  if (failed > 0) {
    add_skip_note(ctx.skipped, "gemm", std::to_string(failed) + " points failed (see the run log)");
  }
  cudaFree(workspace);
  cublasLtDestroy(lt);
  return rows;
}

}  // namespace servesim::profiling
