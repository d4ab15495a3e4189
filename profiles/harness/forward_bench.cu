// Whole forward pass of a Llama-style decoder on one GPU, timed end to end: the kernel sequence a
// serving engine runs for one prefill or decode iteration (forward.csv in profiles/FORMAT.md).
//
// Per layer, in order: RMSNorm; QKV GEMM; RoPE fused with the KV-cache write (rotates Q and K,
// writes Q contiguous and K, V into the layer's cache); attention (cuDNN SDPA, causal for prefill,
// one query token over the cache for decode); O GEMM; residual add; RMSNorm; gate-up GEMM;
// SiLU-mul; down GEMM; residual add. Before the layers the embedding lookup is a device copy of the
// input hidden states; after them, RMSNorm of each sequence's last token and the LM head GEMM.
// GEMMs and attention are the building blocks of the gemm and attention tables (lt_matmul.h,
// cudnn_sdpa.h), so the pass runs the kernels those tables time.
//
// Every layer has its own weights and its own KV cache (separate allocations), so a pass streams
// the whole model from device memory as a real one does; activations are reused across layers.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "gpu_bench.h"
#include "gpu_timer.h"
#include "lt_matmul.h"

#ifdef SERVESIM_HAVE_CUDNN
#include "cudnn_sdpa.h"
#endif

namespace servesim::profiling {

#ifdef SERVESIM_HAVE_CUDNN
namespace {

using bf16 = __nv_bfloat16;

constexpr float kNormEps = 1e-5f;
// RoPE frequency base. The values do not change the cost; Llama 3's frequency scaling is left out.
constexpr float kRopeTheta = 500000.0f;
constexpr int kNormThreads = 256;
constexpr int kRopeThreads = 256;
constexpr int kElementwiseThreads = 256;
constexpr int kVec = 8;  // bf16 elements per 16-byte access
// Device memory left free beside the forward buffers (cuDNN workspaces, allocator slack).
constexpr int64_t kFreeMarginBytes = int64_t{1} << 30;

struct alignas(16) Bf16x8 {
  __nv_bfloat162 h[4];
};

__device__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

// out[r] = in[r * row_step + row_offset] * rsqrt(mean(in^2) + eps) * w, one block per output row.
// REQUIRES: hidden % 8 == 0.
__global__ void rms_norm_kernel(const bf16* __restrict__ in, bf16* __restrict__ out,
                                const bf16* __restrict__ w, int hidden, int64_t row_step,
                                int64_t row_offset, float eps) {
  const Bf16x8* x =
      reinterpret_cast<const Bf16x8*>(in + (blockIdx.x * row_step + row_offset) * hidden);
  Bf16x8* y = reinterpret_cast<Bf16x8*>(out + int64_t{blockIdx.x} * hidden);
  const Bf16x8* g = reinterpret_cast<const Bf16x8*>(w);
  const int vecs = hidden / kVec;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < vecs; i += blockDim.x) {
    Bf16x8 v = x[i];
    for (int j = 0; j < 4; ++j) {
      float2 f = __bfloat1622float2(v.h[j]);
      ss += f.x * f.x + f.y * f.y;
    }
  }
  __shared__ float partial[32];
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  ss = warp_sum(ss);
  if (lane == 0) {
    partial[warp] = ss;
  }
  __syncthreads();
  if (warp == 0) {
    ss = lane < static_cast<int>(blockDim.x / 32) ? partial[lane] : 0.0f;
    ss = warp_sum(ss);
    if (lane == 0) {
      partial[0] = ss;
    }
  }
  __syncthreads();
  const float inv = rsqrtf(partial[0] / hidden + eps);
  for (int i = threadIdx.x; i < vecs; i += blockDim.x) {
    Bf16x8 v = x[i];
    Bf16x8 s = g[i];
    Bf16x8 r;
    for (int j = 0; j < 4; ++j) {
      float2 a = __bfloat1622float2(v.h[j]);
      float2 b = __bfloat1622float2(s.h[j]);
      r.h[j] = __floats2bfloat162_rn(a.x * inv * b.x, a.y * inv * b.y);
    }
    y[i] = r;
  }
}

// x += y over n elements. REQUIRES: n % 8 == 0.
__global__ void residual_add_kernel(bf16* __restrict__ x, const bf16* __restrict__ y, int64_t n) {
  Bf16x8* xv = reinterpret_cast<Bf16x8*>(x);
  const Bf16x8* yv = reinterpret_cast<const Bf16x8*>(y);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n / kVec;
       i += int64_t{gridDim.x} * blockDim.x) {
    Bf16x8 a = xv[i];
    Bf16x8 b = yv[i];
    for (int j = 0; j < 4; ++j) {
      a.h[j] = __hadd2(a.h[j], b.h[j]);
    }
    xv[i] = a;
  }
}

__device__ float silu(float v) { return v / (1.0f + __expf(-v)); }

// out[r, c] = silu(gate[r, c]) * up[r, c] where the row of `gate_up` is [gate (inner), up (inner)];
// without a gated MLP the row is [gate (inner)] and out = silu(gate). REQUIRES: inner % 8 == 0.
__global__ void silu_mul_kernel(const bf16* __restrict__ gate_up, bf16* __restrict__ out,
                                int64_t rows, int64_t inner, bool gated) {
  const int64_t vecs_per_row = inner / kVec;
  const int64_t in_row = (gated ? 2 : 1) * inner;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows * vecs_per_row;
       i += int64_t{gridDim.x} * blockDim.x) {
    int64_t r = i / vecs_per_row;
    int64_t c = (i % vecs_per_row) * kVec;
    Bf16x8 g = *reinterpret_cast<const Bf16x8*>(gate_up + r * in_row + c);
    Bf16x8 u;
    if (gated) {
      u = *reinterpret_cast<const Bf16x8*>(gate_up + r * in_row + inner + c);
    }
    Bf16x8 o;
    for (int j = 0; j < 4; ++j) {
      float2 a = __bfloat1622float2(g.h[j]);
      float2 b = gated ? __bfloat1622float2(u.h[j]) : make_float2(1.0f, 1.0f);
      o.h[j] = __floats2bfloat162_rn(silu(a.x) * b.x, silu(a.y) * b.y);
    }
    *reinterpret_cast<Bf16x8*>(out + r * inner + c) = o;
  }
}

// One block per token t of sequence t / q_len at position pos0 + t % q_len. Reads the token's QKV
// row [heads | kv_heads | kv_heads] x head_dim, rotates Q and K (NeoX pairing: element j with
// j + head_dim/2, angle pos * theta^(-2j/head_dim)), writes Q to q_out [tokens, heads, head_dim]
// and K, V to the layer's caches [batch, cache_len, kv_heads, head_dim] at the token's position.
__global__ void rope_kv_write_kernel(const bf16* __restrict__ qkv, bf16* __restrict__ q_out,
                                     bf16* __restrict__ k_cache, bf16* __restrict__ v_cache,
                                     int q_len, int cache_len, int pos0, int heads, int kv_heads,
                                     int head_dim, float log2_theta) {
  const int64_t t = blockIdx.x;
  const int64_t seq = t / q_len;
  const int pos = pos0 + static_cast<int>(t % q_len);
  const int half = head_dim / 2;
  const int64_t width = int64_t{heads + 2 * kv_heads} * head_dim;
  const bf16* row = qkv + t * width;
  const int units = (heads + 2 * kv_heads) * half;
  for (int u = threadIdx.x; u < units; u += blockDim.x) {
    const int head = u / half;
    const int j = u % half;
    const bf16* src = row + int64_t{head} * head_dim;
    bf16* dst;
    if (head < heads) {
      dst = q_out + (t * heads + head) * head_dim;
    } else {
      const int kv_head = (head - heads) % kv_heads;
      bf16* cache = head < heads + kv_heads ? k_cache : v_cache;
      dst = cache + ((seq * cache_len + pos) * kv_heads + kv_head) * head_dim;
      if (head >= heads + kv_heads) {
        dst[j] = src[j];
        dst[j + half] = src[j + half];
        continue;
      }
    }
    float a = __bfloat162float(src[j]);
    float b = __bfloat162float(src[j + half]);
    float inv_freq = exp2f(-2.0f * j / head_dim * log2_theta);
    float s, c;
    sincosf(pos * inv_freq, &s, &c);
    dst[j] = __float2bfloat16(a * c - b * s);
    dst[j + half] = __float2bfloat16(b * c + a * s);
  }
}

int grid_for(int64_t work_items, int threads) {
  return static_cast<int>(std::clamp<int64_t>((work_items + threads - 1) / threads, 1, 8192));
}

// Frees every allocation it made when destroyed.
class DeviceAllocations {
 public:
  DeviceAllocations() = default;
  DeviceAllocations(const DeviceAllocations&) = delete;
  DeviceAllocations& operator=(const DeviceAllocations&) = delete;
  ~DeviceAllocations() {
    for (void* p : ptrs_) {
      cudaFree(p);
    }
  }
  bf16* bf16s(int64_t count) {
    void* p = nullptr;
    SERVESIM_CUDA_CHECK(cudaMalloc(&p, static_cast<size_t>(std::max<int64_t>(count, 1)) * 2));
    ptrs_.push_back(p);
    return static_cast<bf16*>(p);
  }

 private:
  std::vector<void*> ptrs_;
};

struct LayerWeights {
  bf16* attn_norm;
  bf16* qkv;
  bf16* o;
  bf16* mlp_norm;
  bf16* gate_up;
  bf16* down;
};

// Weights, activations and KV cache of one run, sized for the largest point that fits.
struct ForwardBuffers {
  DeviceAllocations mem;
  std::vector<LayerWeights> layers;
  bf16* final_norm = nullptr;
  bf16* lm_head = nullptr;
  int64_t max_tokens = 0;
  int64_t max_batch = 0;
  int64_t kv_elems = 0;   // capacity of the KV arena (all layers, K and V)
  bf16* embed = nullptr;  // stands in for the embedding table's rows: [max_tokens, hidden]
  bf16* x = nullptr;      // residual stream
  bf16* xn = nullptr;     // normed input of a block
  bf16* qkv = nullptr;
  bf16* q = nullptr;
  bf16* attn = nullptr;
  bf16* proj = nullptr;  // O and down GEMM outputs
  bf16* gate_up = nullptr;
  bf16* act = nullptr;
  bf16* last = nullptr;  // normed last token of each sequence
  bf16* logits = nullptr;
  bf16* kv = nullptr;
  void* gemm_workspace = nullptr;
};

// Weight init: uniform in [-1/sqrt(k), 1/sqrt(k)] keeps every layer's output of the order of its
// input, so the pass never produces inf or NaN.
bf16* alloc_weight(ForwardBuffers* b, int64_t n, int64_t k, uint32_t seed, cudaStream_t s) {
  bf16* w = b->mem.bf16s(n * k);
  fill_random_bf16(w, n * k, seed, 1.0f / std::sqrt(static_cast<float>(k)), s);
  return w;
}

void alloc_forward_buffers(const ForwardModel& m, const std::vector<ForwardPoint>& points,
                           cudaStream_t s, ForwardBuffers* b) {
  uint32_t seed = 1000;
  for (int64_t l = 0; l < m.num_layers; ++l) {
    LayerWeights w;
    w.attn_norm = alloc_weight(b, 1, m.hidden, seed++, s);
    w.qkv = alloc_weight(b, m.qkv_n, m.hidden, seed++, s);
    w.o = alloc_weight(b, m.hidden, m.num_heads * m.head_dim, seed++, s);
    w.mlp_norm = alloc_weight(b, 1, m.hidden, seed++, s);
    w.gate_up = alloc_weight(b, m.mlp_n, m.hidden, seed++, s);
    w.down = alloc_weight(b, m.hidden, m.mlp_inner, seed++, s);
    b->layers.push_back(w);
  }
  b->final_norm = alloc_weight(b, 1, m.hidden, seed++, s);
  b->lm_head = alloc_weight(b, m.vocab, m.hidden, seed++, s);

  for (const ForwardPoint& p : points) {
    b->max_tokens = std::max(b->max_tokens, p.tokens());
    b->max_batch = std::max(b->max_batch, p.batch);
  }
  const int64_t t = b->max_tokens;
  const int64_t qo = m.num_heads * m.head_dim;
  b->embed = b->mem.bf16s(t * m.hidden);
  fill_random_bf16(b->embed, t * m.hidden, seed++, 1.0f, s);
  b->x = b->mem.bf16s(t * m.hidden);
  b->xn = b->mem.bf16s(t * m.hidden);
  b->qkv = b->mem.bf16s(t * m.qkv_n);
  b->q = b->mem.bf16s(t * qo);
  b->attn = b->mem.bf16s(t * qo);
  b->proj = b->mem.bf16s(t * m.hidden);
  b->gate_up = b->mem.bf16s(t * m.mlp_n);
  b->act = b->mem.bf16s(t * m.mlp_inner);
  b->last = b->mem.bf16s(b->max_batch * m.hidden);
  b->logits = b->mem.bf16s(b->max_batch * m.vocab);
  b->gemm_workspace = b->mem.bf16s(static_cast<int64_t>(kGemmWorkspaceBytes / 2));

  // The KV arena: the largest point's cache, or what the free memory holds.
  int64_t want = 0;
  for (const ForwardPoint& p : points) {
    want = std::max(want, forward_kv_bytes(m, p) / 2);
  }
  size_t free_bytes = 0, total_bytes = 0;
  SERVESIM_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  int64_t room = (static_cast<int64_t>(free_bytes) - kFreeMarginBytes) / 2;
  b->kv_elems = std::max<int64_t>(0, std::min(want, room));
  b->kv = b->mem.bf16s(b->kv_elems);
  // Cached keys and values are random, like a real cache (the decode rows read them).
  fill_random_bf16(b->kv, b->kv_elems, seed++, 1.0f, s);
  SERVESIM_CUDA_CHECK(cudaStreamSynchronize(s));
}

enum OpKind : int {
  kEmbed,
  kNorm,
  kQkv,
  kRopeKv,
  kAttention,
  kOProj,
  kResidualAdd,
  kGateUp,
  kSiluMul,
  kDown,
  kLmHead,
  kOpKinds
};
constexpr const char* kOpKindNames[kOpKinds] = {"embed",     "norm", "qkv",    "rope_kv",
                                                "attention", "o",    "add",    "gate_up",
                                                "silu_mul",  "down", "lm_head"};

// Records an event after each operator of one pass, to split the pass's time by operator kind
// (a diagnostic for the log; the table's passes run without it).
class OpTimeline {
 public:
  explicit OpTimeline(cudaStream_t s) : s_(s) { start_ = record(); }
  OpTimeline(const OpTimeline&) = delete;
  OpTimeline& operator=(const OpTimeline&) = delete;
  ~OpTimeline() {
    cudaEventDestroy(start_);
    for (auto& [kind, e] : marks_) {
      cudaEventDestroy(e);
    }
  }
  void mark(OpKind kind) { marks_.emplace_back(kind, record()); }
  // Microseconds per operator kind. REQUIRES: the pass has completed.
  std::vector<double> totals_us() const {
    std::vector<double> us(kOpKinds, 0.0);
    cudaEvent_t prev = start_;
    for (const auto& [kind, e] : marks_) {
      float ms = 0;
      SERVESIM_CUDA_CHECK(cudaEventElapsedTime(&ms, prev, e));
      us[kind] += ms * 1000.0;
      prev = e;
    }
    return us;
  }

 private:
  cudaEvent_t record() {
    cudaEvent_t e = nullptr;
    SERVESIM_CUDA_CHECK(cudaEventCreate(&e));
    SERVESIM_CUDA_CHECK(cudaEventRecord(e, s_));
    return e;
  }
  cudaStream_t s_;
  cudaEvent_t start_ = nullptr;
  std::vector<std::pair<OpKind, cudaEvent_t>> marks_;
};

// The operators of one point's pass, built once and enqueued many times.
class ForwardPass {
 public:
  ForwardPass(const ForwardModel& m, const ForwardPoint& p, ForwardBuffers* b, cublasLtHandle_t lt,
              cudnnHandle_t dnn)
      : m_(m),
        p_(p),
        b_(b),
        t_(p.tokens()),
        qkv_(lt, GemmRecipe::kBf16, t_, m.qkv_n, m.hidden),
        o_(lt, GemmRecipe::kBf16, t_, m.hidden, m.num_heads * m.head_dim),
        gate_up_(lt, GemmRecipe::kBf16, t_, m.mlp_n, m.hidden),
        down_(lt, GemmRecipe::kBf16, t_, m.hidden, m.mlp_inner),
        lm_head_(lt, GemmRecipe::kBf16, p.batch, m.vocab, m.hidden) {
    const bool decode = p.kind == "decode";
    sdpa_ = build_sdpa_plan(dnn,
                            SdpaShape{p.batch, m.num_heads, m.num_kv_heads, decode ? 1 : p.q_tokens,
                                      p.context_tokens, m.head_dim, !decode && m.causal});
    if (sdpa_->workspace_bytes() > 0) {
      sdpa_workspace_ = workspace_mem_.bf16s((sdpa_->workspace_bytes() + 1) / 2);
    }
    layer_kv_elems_ = p.batch * p.context_tokens * m.num_kv_heads * m.head_dim;
  }

  // Enqueues one whole forward pass on `s` without synchronizing (capturable without a
  // timeline). With a timeline, an event is recorded after each operator.
  void enqueue(cudaStream_t s, OpTimeline* timeline = nullptr) {
    auto mark = [timeline](OpKind kind) {
      if (timeline) {
        timeline->mark(kind);
      }
    };
    const ForwardModel& m = m_;
    ForwardBuffers& b = *b_;
    const bool decode = p_.kind == "decode";
    const int q_len = decode ? 1 : static_cast<int>(p_.q_tokens);
    const int cache_len = static_cast<int>(p_.context_tokens);
    const int pos0 = decode ? cache_len - 1 : 0;
    const int64_t n_hidden = t_ * m.hidden;
    const int hidden = static_cast<int>(m.hidden);
    SERVESIM_CUDA_CHECK(cudaMemcpyAsync(b.x, b.embed, n_hidden * 2, cudaMemcpyDeviceToDevice, s));
    mark(kEmbed);
    for (int64_t l = 0; l < m.num_layers; ++l) {
      const LayerWeights& w = b.layers[l];
      bf16* k_cache = b.kv + 2 * l * layer_kv_elems_;
      bf16* v_cache = k_cache + layer_kv_elems_;
      rms_norm_kernel<<<static_cast<unsigned>(t_), kNormThreads, 0, s>>>(b.x, b.xn, w.attn_norm,
                                                                         hidden, 1, 0, kNormEps);
      mark(kNorm);
      qkv_.run(s, w.qkv, b.xn, b.qkv, b.gemm_workspace);
      mark(kQkv);
      rope_kv_write_kernel<<<static_cast<unsigned>(t_), kRopeThreads, 0, s>>>(
          b.qkv, b.q, k_cache, v_cache, q_len, cache_len, pos0, static_cast<int>(m.num_heads),
          static_cast<int>(m.num_kv_heads), static_cast<int>(m.head_dim), std::log2(kRopeTheta));
      mark(kRopeKv);
      sdpa_->run(s, b.q, k_cache, v_cache, b.attn, sdpa_workspace_);
      mark(kAttention);
      o_.run(s, w.o, b.attn, b.proj, b.gemm_workspace);
      mark(kOProj);
      residual_add_kernel<<<grid_for(n_hidden / kVec, kElementwiseThreads), kElementwiseThreads, 0,
                            s>>>(b.x, b.proj, n_hidden);
      mark(kResidualAdd);
      rms_norm_kernel<<<static_cast<unsigned>(t_), kNormThreads, 0, s>>>(b.x, b.xn, w.mlp_norm,
                                                                         hidden, 1, 0, kNormEps);
      mark(kNorm);
      gate_up_.run(s, w.gate_up, b.xn, b.gate_up, b.gemm_workspace);
      mark(kGateUp);
      silu_mul_kernel<<<grid_for(t_ * m.mlp_inner / kVec, kElementwiseThreads), kElementwiseThreads,
                        0, s>>>(b.gate_up, b.act, t_, m.mlp_inner, m.gated_mlp);
      mark(kSiluMul);
      down_.run(s, w.down, b.act, b.proj, b.gemm_workspace);
      mark(kDown);
      residual_add_kernel<<<grid_for(n_hidden / kVec, kElementwiseThreads), kElementwiseThreads, 0,
                            s>>>(b.x, b.proj, n_hidden);
      mark(kResidualAdd);
    }
    // The last token of each sequence: row seq * q_len + q_len - 1.
    rms_norm_kernel<<<static_cast<unsigned>(p_.batch), kNormThreads, 0, s>>>(
        b.x, b.last, b.final_norm, hidden, q_len, q_len - 1, kNormEps);
    mark(kNorm);
    lm_head_.run(s, b.lm_head, b.last, b.logits, b.gemm_workspace);
    mark(kLmHead);
    SERVESIM_CUDA_CHECK(cudaGetLastError());
  }

 private:
  const ForwardModel& m_;
  ForwardPoint p_;
  ForwardBuffers* b_;
  int64_t t_;
  LtMatmul qkv_, o_, gate_up_, down_, lm_head_;
  std::unique_ptr<SdpaPlan> sdpa_;
  DeviceAllocations workspace_mem_;
  void* sdpa_workspace_ = nullptr;
  int64_t layer_kv_elems_ = 0;
};

// Times `launch` (one pass per call) with CUDA events: warm-up, then the median of `reps`.
template <typename Launch>
double median_pass_us(cudaStream_t s, cudaEvent_t start, cudaEvent_t stop, int reps, int warmup,
                      Launch&& launch) {
  for (int i = 0; i < warmup; ++i) {
    launch();
  }
  SERVESIM_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<double> samples;
  for (int r = 0; r < reps; ++r) {
    SERVESIM_CUDA_CHECK(cudaEventRecord(start, s));
    launch();
    SERVESIM_CUDA_CHECK(cudaEventRecord(stop, s));
    SERVESIM_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    SERVESIM_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    samples.push_back(ms * 1000.0);
  }
  return median(samples);
}

// Times the pass captured as one CUDA graph (the way engines replay decode steps).
double median_graph_us(ForwardPass& pass, cudaStream_t s, cudaEvent_t start, cudaEvent_t stop,
                       int reps, int warmup) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  SERVESIM_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  try {
    pass.enqueue(s);
  } catch (...) {
    cudaStreamEndCapture(s, &graph);
    if (graph) {
      cudaGraphDestroy(graph);
    }
    cudaGetLastError();
    throw;
  }
  SERVESIM_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
  if (e != cudaSuccess) {
    cudaGraphDestroy(graph);
    throw GpuError(std::string("cudaGraphInstantiate: ") + cudaGetErrorString(e));
  }
  double us = 0;
  try {
    SERVESIM_CUDA_CHECK(cudaGraphUpload(exec, s));
    us = median_pass_us(s, start, stop, reps, std::max(warmup, 1),
                        [&] { SERVESIM_CUDA_CHECK(cudaGraphLaunch(exec, s)); });
  } catch (...) {
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    throw;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return us;
}

// True when the first sequence's logits are all finite.
bool logits_finite(const ForwardBuffers& b, const ForwardModel& m) {
  std::vector<uint16_t> host(static_cast<size_t>(m.vocab));
  SERVESIM_CUDA_CHECK(cudaMemcpy(host.data(), b.logits, host.size() * 2, cudaMemcpyDeviceToHost));
  for (uint16_t v : host) {
    if ((v & 0x7f80) == 0x7f80) {  // bf16 exponent all ones: inf or NaN
      return false;
    }
  }
  return true;
}

std::string describe(const ForwardPoint& p) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s b=%lld q=%lld ctx=%lld %s", p.kind.c_str(),
                static_cast<long long>(p.batch), static_cast<long long>(p.q_tokens),
                static_cast<long long>(p.context_tokens), p.graph ? "graph" : "eager");
  return buf;
}

}  // namespace

std::vector<ForwardRow> run_forward(const ForwardModel& m, const std::vector<ForwardPoint>& points,
                                    const RunContext& ctx) {
  std::vector<ForwardRow> rows;
  if (points.empty()) {
    return rows;
  }
  if (m.hidden % kVec != 0 || m.mlp_inner % kVec != 0 || m.head_dim % 2 != 0) {
    add_skip_note(ctx.skipped, "forward",
                  "not measured: hidden and intermediate sizes must be multiples of 8");
    return rows;
  }
  SERVESIM_CUDA_CHECK(cudaSetDevice(ctx.device));
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  cublasLtHandle_t lt = nullptr;
  cudnnHandle_t dnn = nullptr;
  SERVESIM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  SERVESIM_CUDA_CHECK(cudaEventCreate(&start));
  SERVESIM_CUDA_CHECK(cudaEventCreate(&stop));
  SERVESIM_CUBLAS_CHECK(cublasLtCreate(&lt));
  SERVESIM_CUDNN_CHECK(cudnnCreate(&dnn));
  struct Cleanup {
    cudaStream_t s;
    cudaEvent_t a, b;
    cublasLtHandle_t lt;
    cudnnHandle_t dnn;
    ~Cleanup() {
      cudaStreamSynchronize(s);
      cudnnDestroy(dnn);
      cublasLtDestroy(lt);
      cudaEventDestroy(a);
      cudaEventDestroy(b);
      cudaStreamDestroy(s);
    }
  } cleanup{stream, start, stop, lt, dnn};

  auto buffers = std::make_unique<ForwardBuffers>();
  alloc_forward_buffers(m, points, stream, buffers.get());
  std::fprintf(stderr,
               "forward: %lld layers, weights %.2f GiB, KV arena %.2f GiB, activations for %lld "
               "tokens\n",
               static_cast<long long>(m.num_layers), forward_weight_bytes(m) / double(1 << 30),
               buffers->kv_elems * 2 / double(1 << 30),
               static_cast<long long>(buffers->max_tokens));

  std::unique_ptr<ForwardPass> pass;
  std::tuple<std::string, int64_t, int64_t, int64_t> pass_key;
  int failed = 0;
  int no_room = 0;
  bool non_finite = false;
  std::string first_error;
  size_t done = 0;
  for (const ForwardPoint& p : points) {
    if (ctx.out_of_time()) {
      add_skip_note(ctx.skipped, "forward",
                    "truncated by --max-seconds: " + std::to_string(points.size() - done) +
                        " points not measured");
      break;
    }
    ++done;
    if (forward_kv_bytes(m, p) / 2 > buffers->kv_elems) {
      ++no_room;
      std::fprintf(stderr, "forward %s: KV cache does not fit, skipped\n", describe(p).c_str());
      continue;
    }
    try {
      std::tuple<std::string, int64_t, int64_t, int64_t> key{p.kind, p.batch, p.q_tokens,
                                                             p.context_tokens};
      if (!pass || key != pass_key) {
        pass.reset();
        pass = std::make_unique<ForwardPass>(m, p, buffers.get(), lt, dnn);
        pass_key = key;
      }
      ForwardPass* fp = pass.get();
      double us = p.graph ? median_graph_us(*fp, stream, start, stop, ctx.reps, ctx.warmup)
                          : median_pass_us(stream, start, stop, ctx.reps, ctx.warmup,
                                           [&] { fp->enqueue(stream); });
      bool finite = logits_finite(*buffers, m);
      non_finite = non_finite || !finite;
      rows.push_back({p, us});
      if (ctx.verbose) {
        // Weight bytes per pass and dense FLOPs (2 per weight per token, LM head on the last
        // tokens), to read the pass against bandwidth and tensor-core peaks.
        double weights = static_cast<double>(forward_weight_bytes(m));
        double lm_head_params = static_cast<double>(m.vocab) * m.hidden;
        double layer_params = weights / 2 - lm_head_params;
        double flops = 2.0 * (layer_params * p.tokens() + lm_head_params * p.batch);
        std::fprintf(stderr,
                     "forward %-40s %12.3f us  %7.1f TFLOP/s dense  %6.0f GB/s weights+KV%s\n",
                     describe(p).c_str(), us, flops / (us * 1e-6) / 1e12,
                     (weights + forward_kv_bytes(m, p)) / (us * 1e-6) / 1e9,
                     finite ? "" : "  NON-FINITE LOGITS");
        if (!p.graph) {
          OpTimeline timeline(stream);
          fp->enqueue(stream, &timeline);
          SERVESIM_CUDA_CHECK(cudaStreamSynchronize(stream));
          std::vector<double> us_by_kind = timeline.totals_us();
          std::string line;
          double sum = 0;
          for (int k = 0; k < kOpKinds; ++k) {
            char part[64];
            std::snprintf(part, sizeof part, " %s %.3f", kOpKindNames[k], us_by_kind[k] / 1000.0);
            line += part;
            sum += us_by_kind[k];
          }
          std::fprintf(stderr, "  ms by operator (one pass, %.3f ms):%s\n", sum / 1000.0,
                       line.c_str());
        }
      }
    } catch (const GpuError& e) {
      ++failed;
      if (first_error.empty()) {
        first_error = e.what();
      }
      std::fprintf(stderr, "forward %s FAILED: %s\n", describe(p).c_str(), e.what());
      cudaGetLastError();
      pass.reset();
    }
  }
  pass.reset();
  if (no_room > 0) {
    add_skip_note(ctx.skipped, "forward",
                  std::to_string(no_room) +
                      " points whose KV cache did not fit in the free GPU memory not measured");
  }
  if (failed > 0) {
    add_skip_note(ctx.skipped, "forward",
                  std::to_string(failed) + " points failed; first error: " + first_error);
  }
  if (non_finite) {
    add_skip_note(ctx.skipped, "forward", "WARNING: some passes produced non-finite logits");
  }
  return rows;
}

#else  // !SERVESIM_HAVE_CUDNN

std::vector<ForwardRow> run_forward(const ForwardModel&, const std::vector<ForwardPoint>& points,
                                    const RunContext& ctx) {
  if (!points.empty()) {
    add_skip_note(ctx.skipped, "forward", "harness built without cuDNN (attention)");
  }
  return {};
}

#endif  // SERVESIM_HAVE_CUDNN

}  // namespace servesim::profiling
