// cuBLASLt linear layer D[m x n] = X[m x k] * W[n x k]^T with row-major activations X and
// row-major weights W: in cuBLASLt's column-major terms the "TN" problem (A = W transposed,
// B = X), the layout Hopper's fp8 kernels require. Shared by the GEMM table and the forward pass,
// so that both run the same kernels for the same shape.
//
// Contract: the constructor picks cuBLASLt's top heuristic algorithm for (m, n, k) with a
// kGemmWorkspaceBytes workspace and throws GpuError when there is none; run() enqueues one GEMM
// (no synchronization, capturable in a CUDA graph).
#ifndef SERVESIM_PROFILES_HARNESS_LT_MATMUL_H_
#define SERVESIM_PROFILES_HARNESS_LT_MATMUL_H_

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "gpu_timer.h"

namespace servesim::profiling {

#define SERVESIM_CUBLAS_CHECK(expr)                                                          \
  do {                                                                                       \
    cublasStatus_t servesim_st_ = (expr);                                                    \
    if (servesim_st_ != CUBLAS_STATUS_SUCCESS) {                                             \
      throw ::servesim::profiling::GpuError(std::string(#expr) + ": cublas status " +        \
                                            std::to_string(static_cast<int>(servesim_st_))); \
    }                                                                                        \
  } while (0)

inline constexpr size_t kGemmWorkspaceBytes = size_t{32} << 20;

// One cuBLASLt matmul descriptor set and its chosen algorithm for a fixed (m, n, k).
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
    size_t ws = kGemmWorkspaceBytes;
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
  LtMatmul(const LtMatmul&) = delete;
  LtMatmul& operator=(const LtMatmul&) = delete;

  void run(cudaStream_t s, const void* w, const void* x, void* d, void* workspace) const {
    float alpha = 1.0f;
    float beta = 0.0f;
    SERVESIM_CUBLAS_CHECK(cublasLtMatmul(lt_, desc_, &alpha, w, a_, x, b_, &beta, d, c_, d, c_,
                                         &heuristic_.algo, workspace, kGemmWorkspaceBytes, s));
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

}  // namespace servesim::profiling

#endif  // SERVESIM_PROFILES_HARNESS_LT_MATMUL_H_
