// Fused attention through cuDNN's flash-attention fprop, built with the cuDNN backend graph API
// (no cudnn_frontend): S = Q K^T (fp32), scaled by 1/sqrt(head_dim), optionally causal-masked,
// softmax, O = P V. Layout [batch, tokens, heads, head_dim] (BSHD) for Q, K, V and O, bf16, each
// contiguous. Shared by the attention tables and the forward pass.
//
// Masking contract: with causal=true, query i (0-based within the q block) sees key j iff
// j <= i + (kv_tokens - q_tokens), i.e. the diagonal is aligned bottom-right so that q tokens
// appended after a cached prefix see the whole prefix. causal=false is bidirectional.
//
// Only available when the harness is built with cuDNN (SERVESIM_HAVE_CUDNN).
#ifndef SERVESIM_PROFILES_HARNESS_CUDNN_SDPA_H_
#define SERVESIM_PROFILES_HARNESS_CUDNN_SDPA_H_

#ifdef SERVESIM_HAVE_CUDNN

#include <cuda_runtime.h>
#include <cudnn.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpu_timer.h"

namespace servesim::profiling {

#define SERVESIM_CUDNN_CHECK(expr)                                              \
  do {                                                                          \
    cudnnStatus_t servesim_st_ = (expr);                                        \
    if (servesim_st_ != CUDNN_STATUS_SUCCESS) {                                 \
      throw ::servesim::profiling::GpuError(std::string(#expr) + ": " +         \
                                            cudnnGetErrorString(servesim_st_)); \
    }                                                                           \
  } while (0)

// Owns one backend descriptor.
class Desc {
 public:
  explicit Desc(cudnnBackendDescriptorType_t type) {
    SERVESIM_CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &d_));
  }
  ~Desc() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  cudnnBackendDescriptor_t get() const { return d_; }
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
           const void* value) {
    SERVESIM_CUDNN_CHECK(cudnnBackendSetAttribute(d_, name, type, count, value));
  }
  void set_desc(cudnnBackendAttributeName_t name, const Desc& other) {
    cudnnBackendDescriptor_t o = other.get();
    set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o);
  }
  void finalize() { SERVESIM_CUDNN_CHECK(cudnnBackendFinalize(d_)); }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// b sequences, h query heads sharing hk KV heads, sq query and skv key tokens, head_dim d.
struct SdpaShape {
  int64_t b, h, hk, sq, skv, d;
  bool causal;
};

// One finalized execution plan of the attention graph for a fixed shape.
class SdpaPlan {
 public:
  // Throws GpuError when cuDNN has no engine for the graph. p_bf16: the softmax output P feeds
  // the second matmul as bf16 (else fp32).
  SdpaPlan(cudnnHandle_t handle, const SdpaShape& s, bool p_bf16);
  SdpaPlan(const SdpaPlan&) = delete;
  SdpaPlan& operator=(const SdpaPlan&) = delete;

  int64_t workspace_bytes() const { return workspace_bytes_; }

  // Enqueues one attention on `stream` (capturable in a CUDA graph). `workspace` holds at least
  // workspace_bytes().
  void run(cudaStream_t stream, void* q, void* k, void* v, void* o, void* workspace);

 private:
  enum Uid : int64_t { kQ = 1, kK, kV, kO, kScale, kNegInf, kSkv, kSq, kFirstVirtual = 100 };
  using Dims = std::array<int64_t, 4>;

  Desc& keep(std::unique_ptr<Desc> d);
  Desc& tensor(int64_t uid, cudnnDataType_t type, Dims dim, Dims stride, bool is_virtual = false,
               bool by_value = false);
  Desc& virt(cudnnDataType_t type, Dims dim, Dims stride);
  void add_op(std::unique_ptr<Desc> op) { ops_.push_back(std::move(op)); }
  void matmul(const Desc& a, const Desc& b, const Desc& c);
  void pointwise(cudnnPointwiseMode_t mode, cudnnDataType_t prec, const Desc& x, const Desc* b,
                 const Desc& y, const Desc* t = nullptr, int64_t axis = -1);
  void reduction(cudnnReduceTensorOp_t mode, const Desc& x, const Desc& y);
  void finalize_plan();

  cudnnHandle_t handle_;
  SdpaShape shape_;
  float scale_ = 1.0f;
  float neg_inf_ = -1e30f;
  int32_t offset_ = 0;
  int32_t skv_ = 0;
  int32_t sq_ = 0;
  int64_t next_virtual_ = kFirstVirtual;
  int64_t workspace_bytes_ = 0;
  std::vector<std::unique_ptr<Desc>> descs_;
  std::vector<std::unique_ptr<Desc>> ops_;
  std::unique_ptr<Desc> graph_;
  std::unique_ptr<Desc> plan_;
};

// Builds the plan for shape s, trying P in bf16 first and fp32 second; the first variant that
// builds is kept for the rest of the process. Throws GpuError with both errors when neither does.
std::unique_ptr<SdpaPlan> build_sdpa_plan(cudnnHandle_t handle, const SdpaShape& s);

}  // namespace servesim::profiling

#endif  // SERVESIM_HAVE_CUDNN
#endif  // SERVESIM_PROFILES_HARNESS_CUDNN_SDPA_H_
