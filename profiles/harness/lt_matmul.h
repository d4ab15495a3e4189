// cuBLASLt linear layer D[m x n] = X[m x k] * W[n x k]^T with row-major activations X and
// row-major weights W: in cuBLASLt's column-major terms the "TN" problem (A = W transposed,
// B = X), the layout Hopper's fp8 kernels require. Shared by the GEMM table and the forward pass,
// so that both run the same kernels for the same shape.
//
// Contract: the constructor picks cuBLASLt's top heuristic algorithm for (m, n, k) with a
// kGemmWorkspaceBytes workspace and throws GpuError when there is none (also when this cuBLASLt or
// GPU lacks the recipe's scaling mode); run() enqueues one GEMM (no synchronization, capturable in
// a CUDA graph).
//
// Scaling recipes (GemmRecipe), each as serving engines run FP8 linear layers:
//  - kFp8PerTensor: one fp32 scale per weight and per activation tensor, applied in the epilogue.
//  - kFp8Rowwise: one fp32 scale per output channel of W and per token of X (cuBLASLt's outer
//    vectors), applied in the epilogue: "per-channel weights, dynamic per-token activations".
//  - kFp8Block: DeepSeek-V3's recipe, one fp32 scale per 128 x 128 block of W and per 1 x 128
//    block of X, applied inside the main loop at each 128-deep step of k.
// Scales are device pointers sized by scale_floats(); their values do not change the timing.
#ifndef SERVESIM_PROFILES_HARNESS_LT_MATMUL_H_
#define SERVESIM_PROFILES_HARNESS_LT_MATMUL_H_

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <utility>

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

enum class GemmRecipe { kBf16, kFp8PerTensor, kFp8Rowwise, kFp8Block };

// The gemm.csv dtype of a recipe and back ("bf16", "fp8_e4m3", "fp8_rowwise", "fp8_block").
inline const char* recipe_dtype(GemmRecipe r) {
  switch (r) {
    case GemmRecipe::kBf16:
      return "bf16";
    case GemmRecipe::kFp8PerTensor:
      return "fp8_e4m3";
    case GemmRecipe::kFp8Rowwise:
      return "fp8_rowwise";
    case GemmRecipe::kFp8Block:
      return "fp8_block";
  }
  return "bf16";
}
inline GemmRecipe recipe_of_dtype(const std::string& dtype) {
  for (GemmRecipe r : {GemmRecipe::kBf16, GemmRecipe::kFp8PerTensor, GemmRecipe::kFp8Rowwise,
                       GemmRecipe::kFp8Block}) {
    if (dtype == recipe_dtype(r)) {
      return r;
    }
  }
  throw GpuError("unknown GEMM dtype '" + dtype + "'");
}

// Device scale buffers of one GEMM: W's (cuBLASLt's A) and X's (cuBLASLt's B).
struct GemmScales {
  const float* weight = nullptr;
  const float* activation = nullptr;
};

// Floats each scale buffer needs for an (m, n, k) GEMM under `r`, padded so that cuBLASLt's
// 16-byte alignment of scale rows holds: {weight, activation}.
inline std::pair<int64_t, int64_t> scale_floats(GemmRecipe r, int64_t m, int64_t n, int64_t k) {
  auto pad4 = [](int64_t x) { return (x + 3) / 4 * 4; };
  int64_t k_blocks = (k + 127) / 128;
  switch (r) {
    case GemmRecipe::kBf16:
      return {0, 0};
    case GemmRecipe::kFp8PerTensor:
      return {1, 1};
    case GemmRecipe::kFp8Rowwise:
      return {pad4(n), pad4(m)};
    case GemmRecipe::kFp8Block:
      return {pad4((n + 127) / 128) * k_blocks, pad4(m) * k_blocks};
  }
  return {0, 0};
}

// One cuBLASLt matmul descriptor set and its chosen algorithm for a fixed (m, n, k).
class LtMatmul {
 public:
  LtMatmul(cublasLtHandle_t lt, GemmRecipe recipe, int64_t m, int64_t n, int64_t k,
           GemmScales scales = {})
      : lt_(lt) {
    bool fp8 = recipe != GemmRecipe::kBf16;
    cudaDataType_t in_type = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
    SERVESIM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = CUBLAS_OP_T;
    cublasOperation_t tb = CUBLAS_OP_N;
    SERVESIM_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    SERVESIM_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    if (fp8) {
      set_scales(recipe, scales);
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
  // Scale pointers and modes of an FP8 recipe. Epilogue-scaled recipes accumulate fast, as serving
  // engines run them; block scaling promotes its partial sums at every 128-deep step instead.
  void set_scales(GemmRecipe recipe, GemmScales scales) {
    int32_t w_mode = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
    int32_t x_mode = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
    if (recipe == GemmRecipe::kFp8Rowwise) {
      w_mode = x_mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    } else if (recipe == GemmRecipe::kFp8Block) {
      w_mode = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
      x_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    }
    SERVESIM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        desc_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scales.weight, sizeof scales.weight));
    SERVESIM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        desc_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scales.activation, sizeof scales.activation));
    SERVESIM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_A_SCALE_MODE,
                                                         &w_mode, sizeof w_mode));
    SERVESIM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_B_SCALE_MODE,
                                                         &x_mode, sizeof x_mode));
    int8_t fast = recipe == GemmRecipe::kFp8Block ? 0 : 1;
    SERVESIM_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
  }

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
