// cuBLASLt GEMM latency: D[m x n] = X[m x k] * W[n x k]^T, the layout of a linear layer with
// row-major activations X and row-major weights W. In cuBLASLt's column-major terms this is the
// "TN" problem (A = W transposed, B = X), the layout Hopper's fp8 kernels require.
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <tuple>

#include "gpu_bench.h"
#include "gpu_timer.h"

namespace servesim::profiling {
namespace {

#define SERVESIM_CUBLAS_CHECK(expr)                                   \
  do {                                                                \
    cublasStatus_t servesim_st_ = (expr);                             \
    if (servesim_st_ != CUBLAS_STATUS_SUCCESS) {                      \
      throw GpuError(std::string(#expr) + ": cublas status " +        \
                     std::to_string(static_cast<int>(servesim_st_))); \
    }                                                                 \
  } while (0)

constexpr size_t kWorkspaceBytes = size_t{32} << 20;
constexpr int kMaxWeightCopies = 8;

// Device buffers for one (dtype, n, k): weight copies to rotate through, activations for the
// largest m of the plan, and the output.
struct GemmBuffers {
  std::vector<void*> weights;
  void* x = nullptr;
  void* d = nullptr;
  ~GemmBuffers() {
    for (void* w : weights) {
      cudaFree(w);
    }
    cudaFree(x);
    cudaFree(d);
  }
};

class LtMatmul {
 public:
  LtMatmul(cublasLtHandle_t lt, bool fp8, int64_t m, int64_t n, int64_t k, const float* scale_dev)
      : lt_(lt) {
    cudaDataType_t in_type = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
    SERVESIM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = CUBLAS_OP_T;
    cublasOperation_t tb = CUBLAS_OP_N;
    SERVESIM_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    SERVESIM_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    if (fp8) {
      // Per-tensor scales (device pointers), fast accumulation as serving engines run fp8.
      SERVESIM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
          desc_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale_dev, sizeof scale_dev));
      SERVESIM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
          desc_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale_dev, sizeof scale_dev));
      int8_t fast = 1;
      SERVESIM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_FAST_ACCUM,
                                                           &fast, sizeof fast));
    }
    SERVESIM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a_, in_type, k, n, k));
    SERVESIM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b_, in_type, k, m, k));
    SERVESIM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&c_, CUDA_R_16BF, n, m, n));
    cublasLtMatmulPreference_t pref = nullptr;
    SERVESIM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    size_t ws = kWorkspaceBytes;
    SERVESIM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    int found = 0;
    cublasStatus_t st =
        cublasLtMatmulAlgoGetHeuristic(lt_, desc_, a_, b_, c_, c_, pref, 1, &heuristic_, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
      destroy();
      throw GpuError("cublasLtMatmulAlgoGetHeuristic found no algorithm");
    }
  }
  ~LtMatmul() { destroy(); }

  void run(cudaStream_t s, const void* w, const void* x, void* d, void* workspace) const {
    float alpha = 1.0f;
    float beta = 0.0f;
    SERVESIM_CUBLAS_CHECK(cublasLtMatmul(lt_, desc_, &alpha, w, a_, x, b_, &beta, d, c_, d, c_,
                                         &heuristic_.algo, workspace, kWorkspaceBytes, s));
  }

 private:
  void destroy() {
    if (a_) cublasLtMatrixLayoutDestroy(a_);
    if (b_) cublasLtMatrixLayoutDestroy(b_);
    if (c_) cublasLtMatrixLayoutDestroy(c_);
    if (desc_) cublasLtMatmulDescDestroy(desc_);
    a_ = b_ = c_ = nullptr;
    desc_ = nullptr;
  }

  cublasLtHandle_t lt_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr;
  cublasLtMatrixLayout_t b_ = nullptr;
  cublasLtMatrixLayout_t c_ = nullptr;
  cublasLtMatmulHeuristicResult_t heuristic_{};
};

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
  float* scale = nullptr;
  SERVESIM_CUDA_CHECK(cudaMalloc(&workspace, kWorkspaceBytes));
  SERVESIM_CUDA_CHECK(cudaMalloc(&scale, sizeof(float)));
  float one = 1.0f;
  SERVESIM_CUDA_CHECK(cudaMemcpy(scale, &one, sizeof one, cudaMemcpyHostToDevice));

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
    bool fp8 = p.dtype != "bf16";
    size_t in_bytes = fp8 ? 1 : 2;
    try {
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
        SERVESIM_CUDA_CHECK(cudaStreamSynchronize(timer.stream()));
      }
      LtMatmul mm(lt, fp8, p.m, p.n, p.k, scale);
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
  cudaFree(scale);
  cublasLtDestroy(lt);
  return rows;
}

}  // namespace servesim::profiling
