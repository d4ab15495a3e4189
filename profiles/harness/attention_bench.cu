// Fused attention latency through cuDNN's flash-attention fprop, built with the cuDNN backend
// graph API (no cudnn_frontend): S = Q K^T (fp32), scaled, optionally causal-masked, softmax,
// O = P V. Layout is [batch, tokens, heads, head_dim] (BSHD) for Q, K, V and O, bf16.
//
// Masking contract: with causal=true, query i (0-based within the q block) sees key j iff
// j <= i + (kv_tokens - q_tokens), i.e. the diagonal is aligned bottom-right so that q tokens
// appended after a cached prefix see the whole prefix. causal=false is bidirectional.
#include <cuda_bf16.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "gpu_bench.h"
#include "gpu_timer.h"

#ifdef SERVESIM_HAVE_CUDNN
#include <cudnn.h>
#endif

namespace servesim::profiling {

#ifdef SERVESIM_HAVE_CUDNN
namespace {

#define SERVESIM_CUDNN_CHECK(expr)                                                   \
  do {                                                                               \
    cudnnStatus_t servesim_st_ = (expr);                                             \
    if (servesim_st_ != CUDNN_STATUS_SUCCESS) {                                      \
      throw GpuError(std::string(#expr) + ": " + cudnnGetErrorString(servesim_st_)); \
    }                                                                                \
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

struct SdpaShape {
  int64_t b, h, hk, sq, skv, d;
  bool causal;
};

enum Uid : int64_t { kQ = 1, kK, kV, kO, kScale, kNegInf, kSkv, kSq, kFirstVirtual = 100 };

using Dims = std::array<int64_t, 4>;

// One finalized execution plan of the attention graph for a fixed shape.
class SdpaPlan {
 public:
  SdpaPlan(cudnnHandle_t handle, const SdpaShape& s, bool p_bf16) : handle_(handle), shape_(s) {
    scale_ = 1.0f / std::sqrt(static_cast<float>(s.d));
    neg_inf_ = -std::numeric_limits<float>::infinity();
    offset_ = static_cast<int32_t>(s.skv - s.sq);
    skv_ = static_cast<int32_t>(s.skv);
    sq_ = static_cast<int32_t>(s.sq);
    const int64_t b = s.b, h = s.h, hk = s.hk, sq = s.sq, skv = s.skv, d = s.d;
    Desc& q = tensor(kQ, CUDNN_DATA_BFLOAT16, {b, h, sq, d}, {sq * h * d, d, h * d, 1});
    Desc& kt = tensor(kK, CUDNN_DATA_BFLOAT16, {b, hk, d, skv}, {skv * hk * d, d, 1, hk * d});
    Desc& v = tensor(kV, CUDNN_DATA_BFLOAT16, {b, hk, skv, d}, {skv * hk * d, d, hk * d, 1});
    Desc& o = tensor(kO, CUDNN_DATA_BFLOAT16, {b, h, sq, d}, {sq * h * d, d, h * d, 1});
    Dims unit{1, 1, 1, 1};
    Desc& scale = tensor(kScale, CUDNN_DATA_FLOAT, unit, unit, false, true);
    Dims sdim{b, h, sq, skv};
    Dims sstr{h * sq * skv, sq * skv, skv, 1};
    Dims rdim{b, h, sq, 1};
    Dims rstr{h * sq, sq, 1, 1};

    Desc& s1 = virt(CUDNN_DATA_FLOAT, sdim, sstr);
    matmul(q, kt, s1);
    Desc& s2 = virt(CUDNN_DATA_FLOAT, sdim, sstr);
    pointwise(CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, s1, &scale, s2);
    Desc* scores = &s2;
    if (s.causal) {
      Desc& row = virt(CUDNN_DATA_INT32, sdim, sstr);
      pointwise(CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, s2, nullptr, row, nullptr, 2);
      Desc& col = virt(CUDNN_DATA_INT32, sdim, sstr);
      pointwise(CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, s2, nullptr, col, nullptr, 3);
      Desc* row_aligned = &row;
      if (offset_ != 0) {
        // Bottom-right alignment as row + kv_tokens - q_tokens, the form cuDNN's attention
        // pattern matcher recognizes.
        Desc& skv_t = tensor(kSkv, CUDNN_DATA_INT32, unit, unit, false, true);
        Desc& sq_t = tensor(kSq, CUDNN_DATA_INT32, unit, unit, false, true);
        Desc& plus_kv = virt(CUDNN_DATA_INT32, sdim, sstr);
        pointwise(CUDNN_POINTWISE_ADD, CUDNN_DATA_INT32, row, &skv_t, plus_kv);
        Desc& shifted = virt(CUDNN_DATA_INT32, sdim, sstr);
        pointwise(CUDNN_POINTWISE_SUB, CUDNN_DATA_INT32, plus_kv, &sq_t, shifted);
        row_aligned = &shifted;
      }
      Desc& keep = virt(CUDNN_DATA_BOOLEAN, sdim, sstr);
      pointwise(CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, *row_aligned, &col, keep);
      Desc& neg = tensor(kNegInf, CUDNN_DATA_FLOAT, unit, unit, false, true);
      Desc& masked = virt(CUDNN_DATA_FLOAT, sdim, sstr);
      pointwise(CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, s2, &neg, masked, &keep);
      scores = &masked;
    }
    Desc& mx = virt(CUDNN_DATA_FLOAT, rdim, rstr);
    reduction(CUDNN_REDUCE_TENSOR_MAX, *scores, mx);
    Desc& centered = virt(CUDNN_DATA_FLOAT, sdim, sstr);
    pointwise(CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, *scores, &mx, centered);
    Desc& ex = virt(CUDNN_DATA_FLOAT, sdim, sstr);
    pointwise(CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, centered, nullptr, ex);
    Desc& sum = virt(CUDNN_DATA_FLOAT, rdim, rstr);
    reduction(CUDNN_REDUCE_TENSOR_ADD, ex, sum);
    // Softmax statistics max + log(sum), left virtual: the fused engine expects the full
    // training-style softmax and drops the unused output.
    Desc& log_sum = virt(CUDNN_DATA_FLOAT, rdim, rstr);
    pointwise(CUDNN_POINTWISE_LOG, CUDNN_DATA_FLOAT, sum, nullptr, log_sum);
    Desc& stats = virt(CUDNN_DATA_FLOAT, rdim, rstr);
    pointwise(CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, mx, &log_sum, stats);
    Desc& p = virt(p_bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT, sdim, sstr);
    pointwise(CUDNN_POINTWISE_DIV, CUDNN_DATA_FLOAT, ex, &sum, p);
    matmul(p, v, o);
    finalize_plan();
  }

  int64_t workspace_bytes() const { return workspace_bytes_; }

  void run(cudaStream_t stream, void* q, void* k, void* v, void* o, void* workspace) {
    SERVESIM_CUDNN_CHECK(cudnnSetStream(handle_, stream));
    std::vector<int64_t> uids = {kQ, kK, kV, kO, kScale};
    std::vector<void*> ptrs = {q, k, v, o, &scale_};
    if (shape_.causal) {
      uids.push_back(kNegInf);
      ptrs.push_back(&neg_inf_);
      if (offset_ != 0) {
        uids.push_back(kSkv);
        ptrs.push_back(&skv_);
        uids.push_back(kSq);
        ptrs.push_back(&sq_);
      }
    }
    Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids.size(), uids.data());
    pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, ptrs.size(), ptrs.data());
    pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
    pack.finalize();
    SERVESIM_CUDNN_CHECK(cudnnBackendExecute(handle_, plan_->get(), pack.get()));
  }

 private:
  Desc& keep(std::unique_ptr<Desc> d) {
    descs_.push_back(std::move(d));
    return *descs_.back();
  }

  Desc& tensor(int64_t uid, cudnnDataType_t type, Dims dim, Dims stride, bool is_virtual = false,
               bool by_value = false) {
    Desc& t = keep(std::make_unique<Desc>(CUDNN_BACKEND_TENSOR_DESCRIPTOR));
    int64_t align = 16;
    t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
    t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dim.data());
    t.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, stride.data());
    t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    t.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
    if (by_value) {
      t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value);
    }
    t.finalize();
    return t;
  }

  Desc& virt(cudnnDataType_t type, Dims dim, Dims stride) {
    return tensor(next_virtual_++, type, dim, stride, true);
  }

  void add_op(std::unique_ptr<Desc> op) { ops_.push_back(std::move(op)); }

  void matmul(const Desc& a, const Desc& b, const Desc& c) {
    Desc& mm = keep(std::make_unique<Desc>(CUDNN_BACKEND_MATMUL_DESCRIPTOR));
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    mm.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
    mm.finalize();
    auto op = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    op->set_desc(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a);
    op->set_desc(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b);
    op->set_desc(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c);
    op->set_desc(CUDNN_ATTR_OPERATION_MATMUL_DESC, mm);
    op->finalize();
    add_op(std::move(op));
  }

  void pointwise(cudnnPointwiseMode_t mode, cudnnDataType_t prec, const Desc& x, const Desc* b,
                 const Desc& y, const Desc* t = nullptr, int64_t axis = -1) {
    Desc& pw = keep(std::make_unique<Desc>(CUDNN_BACKEND_POINTWISE_DESCRIPTOR));
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    pw.set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
    if (axis >= 0) {
      pw.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
    }
    pw.finalize();
    auto op = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    op->set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw);
    op->set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
    if (b) {
      op->set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
    }
    op->set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
    if (t) {
      op->set_desc(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t);
    }
    op->finalize();
    add_op(std::move(op));
  }

  void reduction(cudnnReduceTensorOp_t mode, const Desc& x, const Desc& y) {
    Desc& red = keep(std::make_unique<Desc>(CUDNN_BACKEND_REDUCTION_DESCRIPTOR));
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    red.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode);
    red.set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
    red.finalize();
    auto op = std::make_unique<Desc>(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    op->set_desc(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x);
    op->set_desc(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y);
    op->set_desc(CUDNN_ATTR_OPERATION_REDUCTION_DESC, red);
    op->finalize();
    add_op(std::move(op));
  }

  void finalize_plan() {
    graph_ = std::make_unique<Desc>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    std::vector<cudnnBackendDescriptor_t> ops;
    for (auto& op : ops_) {
      ops.push_back(op->get());
    }
    graph_->set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, ops.size(),
                ops.data());
    graph_->set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle_);
    graph_->finalize();
    std::string last_error = "no engine configuration";
    for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
      try {
        Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
        heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, *graph_);
        heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
        heur.finalize();
        int64_t count = 0;
        SERVESIM_CUDNN_CHECK(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                                      nullptr));
        if (count <= 0) {
          continue;
        }
        std::vector<std::unique_ptr<Desc>> cfgs;
        std::vector<cudnnBackendDescriptor_t> raw;
        for (int64_t i = 0; i < count; ++i) {
          cfgs.push_back(std::make_unique<Desc>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
          raw.push_back(cfgs.back()->get());
        }
        int64_t got = 0;
        SERVESIM_CUDNN_CHECK(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got,
                                                      raw.data()));
        for (int64_t i = 0; i < got; ++i) {
          auto plan = std::make_unique<Desc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
          plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle_);
          plan->set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, *cfgs[i]);
          if (cudnnBackendFinalize(plan->get()) != CUDNN_STATUS_SUCCESS) {
            last_error = "execution plan finalize failed for every engine configuration";
            continue;
          }
          int64_t ws = 0;
          int64_t n = 0;
          SERVESIM_CUDNN_CHECK(cudnnBackendGetAttribute(
              plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &ws));
          workspace_bytes_ = ws;
          plan_ = std::move(plan);
          return;
        }
      } catch (const GpuError& e) {
        last_error = e.what();
      }
    }
    throw GpuError("cuDNN has no engine for the attention graph: " + last_error);
  }

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

// Whether the softmax output P feeds the second matmul as bf16 (decided once per process by the
// first shape that builds).
int g_p_bf16 = -1;

std::unique_ptr<SdpaPlan> build_plan_any(cudnnHandle_t handle, const SdpaShape& s) {
  std::string errors;
  for (int p_bf16 : {1, 0}) {
    if (g_p_bf16 >= 0 && p_bf16 != g_p_bf16) {
      continue;
    }
    try {
      auto plan = std::make_unique<SdpaPlan>(handle, s, p_bf16 == 1);
      g_p_bf16 = p_bf16;
      return plan;
    } catch (const GpuError& e) {
      errors +=
          std::string(errors.empty() ? "" : " | ") + (p_bf16 ? "P bf16: " : "P fp32: ") + e.what();
    }
  }
  throw GpuError(errors);
}

struct AttentionBuffers {
  std::vector<void*> q, k, v, o;
  void* workspace = nullptr;
  ~AttentionBuffers() {
    for (auto* list : {&q, &k, &v, &o}) {
      for (void* p : *list) {
        cudaFree(p);
      }
    }
    cudaFree(workspace);
  }
};

// Allocates and fills `variants` operand sets for shape s.
std::unique_ptr<AttentionBuffers> make_buffers(const SdpaShape& s, int variants, int64_t ws,
                                               cudaStream_t stream) {
  auto buf = std::make_unique<AttentionBuffers>();
  int64_t q_elems = s.b * s.sq * s.h * s.d;
  int64_t kv_elems = s.b * s.skv * s.hk * s.d;
  for (int i = 0; i < variants; ++i) {
    void *q, *k, *v, *o;
    SERVESIM_CUDA_CHECK(cudaMalloc(&q, q_elems * 2));
    buf->q.push_back(q);
    SERVESIM_CUDA_CHECK(cudaMalloc(&k, kv_elems * 2));
    buf->k.push_back(k);
    SERVESIM_CUDA_CHECK(cudaMalloc(&v, kv_elems * 2));
    buf->v.push_back(v);
    SERVESIM_CUDA_CHECK(cudaMalloc(&o, q_elems * 2));
    buf->o.push_back(o);
    fill_random_bf16(q, q_elems, 100 + 4 * i, 1.0f, stream);
    fill_random_bf16(k, kv_elems, 101 + 4 * i, 1.0f, stream);
    fill_random_bf16(v, kv_elems, 102 + 4 * i, 1.0f, stream);
    SERVESIM_CUDA_CHECK(cudaMemsetAsync(o, 0xff, q_elems * 2, stream));  // NaN poison
  }
  if (ws > 0) {
    SERVESIM_CUDA_CHECK(cudaMalloc(&buf->workspace, ws));
  }
  SERVESIM_CUDA_CHECK(cudaStreamSynchronize(stream));
  return buf;
}

float bf16_to_float(uint16_t v) {
  uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Runs a small GQA shape and compares with a float64 CPU reference. Returns ||out-ref||/||ref||.
double check_against_reference(cudnnHandle_t handle, bool causal, cudaStream_t stream) {
  SdpaShape s{2, 4, 2, 64, 192, 128, causal};  // 128 prefix tokens before 64 query tokens
  auto plan = build_plan_any(handle, s);
  auto buf = make_buffers(s, 1, plan->workspace_bytes(), stream);
  plan->run(stream, buf->q[0], buf->k[0], buf->v[0], buf->o[0], buf->workspace);
  SERVESIM_CUDA_CHECK(cudaStreamSynchronize(stream));
  int64_t qn = s.b * s.sq * s.h * s.d;
  int64_t kvn = s.b * s.skv * s.hk * s.d;
  std::vector<uint16_t> q(qn), k(kvn), v(kvn), o(qn);
  SERVESIM_CUDA_CHECK(cudaMemcpy(q.data(), buf->q[0], qn * 2, cudaMemcpyDeviceToHost));
  SERVESIM_CUDA_CHECK(cudaMemcpy(k.data(), buf->k[0], kvn * 2, cudaMemcpyDeviceToHost));
  SERVESIM_CUDA_CHECK(cudaMemcpy(v.data(), buf->v[0], kvn * 2, cudaMemcpyDeviceToHost));
  SERVESIM_CUDA_CHECK(cudaMemcpy(o.data(), buf->o[0], qn * 2, cudaMemcpyDeviceToHost));
  double err = 0, ref_norm = 0;
  double scale = 1.0 / std::sqrt(static_cast<double>(s.d));
  std::vector<double> w(s.skv);
  for (int64_t b = 0; b < s.b; ++b) {
    for (int64_t h = 0; h < s.h; ++h) {
      int64_t kh = h / (s.h / s.hk);
      for (int64_t i = 0; i < s.sq; ++i) {
        auto qa = [&](int64_t c) { return bf16_to_float(q[((b * s.sq + i) * s.h + h) * s.d + c]); };
        double mx = -1e300;
        for (int64_t j = 0; j < s.skv; ++j) {
          bool visible = !causal || j <= i + (s.skv - s.sq);
          double dot = 0;
          for (int64_t c = 0; c < s.d; ++c) {
            dot += qa(c) * bf16_to_float(k[((b * s.skv + j) * s.hk + kh) * s.d + c]);
          }
          w[j] = visible ? dot * scale : -1e300;
          mx = std::max(mx, w[j]);
        }
        double z = 0;
        for (int64_t j = 0; j < s.skv; ++j) {
          w[j] = w[j] > -1e299 ? std::exp(w[j] - mx) : 0.0;
          z += w[j];
        }
        for (int64_t c = 0; c < s.d; ++c) {
          double ref = 0;
          for (int64_t j = 0; j < s.skv; ++j) {
            ref += w[j] / z * bf16_to_float(v[((b * s.skv + j) * s.hk + kh) * s.d + c]);
          }
          double got = bf16_to_float(o[((b * s.sq + i) * s.h + h) * s.d + c]);
          if (std::isnan(got)) {
            return INFINITY;
          }
          err += (got - ref) * (got - ref);
          ref_norm += ref * ref;
        }
      }
    }
  }
  return std::sqrt(err / ref_norm);
}

struct CudnnSession {
  cudnnHandle_t handle = nullptr;
  std::unique_ptr<GpuTimer> timer;
  int64_t l2 = 0;
  int64_t free_bytes = 0;
  explicit CudnnSession(const RunContext& ctx) {
    SERVESIM_CUDA_CHECK(cudaSetDevice(ctx.device));
    int l2i = 0;
    SERVESIM_CUDA_CHECK(cudaDeviceGetAttribute(&l2i, cudaDevAttrL2CacheSize, ctx.device));
    l2 = l2i;
    timer = std::make_unique<GpuTimer>(l2);
    SERVESIM_CUDNN_CHECK(cudnnCreate(&handle));
  }
  ~CudnnSession() {
    timer.reset();
    if (handle) cudnnDestroy(handle);
  }
};

bool g_checked = false;

void check_once(CudnnSession& session, const RunContext& ctx, const std::string& table) {
  if (g_checked) {
    return;
  }
  g_checked = true;
  for (bool causal : {true, false}) {
    try {
      double rel = check_against_reference(session.handle, causal, session.timer->stream());
      std::fprintf(stderr, "attention check (%s, prefix 128, GQA 4/2): rel. error %.2e %s\n",
                   causal ? "causal" : "bidirectional", rel, rel < 2e-2 ? "ok" : "TOO LARGE");
      if (!(rel < 2e-2)) {
        add_skip_note(ctx.skipped, table,
                      std::string("WARNING: ") + (causal ? "causal" : "bidirectional") +
                          " attention failed its reference check (rel. error " +
                          std::to_string(rel) + ")");
      }
    } catch (const GpuError& e) {
      std::fprintf(stderr, "attention check FAILED: %s\n", e.what());
    }
  }
}

// Times one shape; returns the median latency in microseconds.
double time_shape(CudnnSession& session, const SdpaShape& s, const RunContext& ctx) {
  auto plan = build_plan_any(session.handle, s);
  int64_t set_bytes = 2 * (2 * s.b * s.sq * s.h * s.d + 2 * s.b * s.skv * s.hk * s.d);
  int variants = static_cast<int>(
      std::clamp<int64_t>(3 * session.l2 / std::max<int64_t>(set_bytes, 1) + 1, 1, 4));
  auto buf = make_buffers(s, variants, plan->workspace_bytes(), session.timer->stream());
  AttentionBuffers* b = buf.get();
  SdpaPlan* p = plan.get();
  return session.timer->median_us(
      [&](cudaStream_t st, int v) { p->run(st, b->q[v], b->k[v], b->v[v], b->o[v], b->workspace); },
      variants, ctx.reps, ctx.warmup);
}

template <typename Point, typename Row, typename ToShape, typename Describe>
std::vector<Row> run_attention(const std::vector<Point>& points, const RunContext& ctx,
                               const std::string& table, ToShape to_shape, Describe describe) {
  std::vector<Row> rows;
  if (points.empty()) {
    return rows;
  }
  CudnnSession session(ctx);
  check_once(session, ctx, table);
  int failed = 0;
  std::string first_error;
  size_t done = 0;
  for (const Point& pt : points) {
    if (ctx.out_of_time()) {
      add_skip_note(ctx.skipped, table,
                    "truncated by --max-seconds: " + std::to_string(points.size() - done) +
                        " points not measured");
      break;
    }
    ++done;
    try {
      double us = time_shape(session, to_shape(pt), ctx);
      rows.push_back({pt, us});
      if (ctx.verbose) {
        std::fprintf(stderr, "%s %s %10.3f us\n", table.c_str(), describe(pt).c_str(), us);
      }
    } catch (const GpuError& e) {
      ++failed;
      if (first_error.empty()) {
        first_error = e.what();
      }
      std::fprintf(stderr, "%s %s FAILED: %s\n", table.c_str(), describe(pt).c_str(), e.what());
      cudaGetLastError();
    }
  }
  if (failed > 0) {
    add_skip_note(ctx.skipped, table,
                  std::to_string(failed) + " points failed; first error: " + first_error);
  }
  return rows;
}

}  // namespace

bool attention_available() { return true; }

std::vector<PrefillRow> run_attention_prefill(const std::vector<PrefillPoint>& points,
                                              const RunContext& ctx) {
  return run_attention<PrefillPoint, PrefillRow>(
      points, ctx, "attention_prefill",
      [](const PrefillPoint& p) {
        return SdpaShape{
            p.batch,    p.num_heads, p.num_kv_heads, p.q_tokens, p.prefix_tokens + p.q_tokens,
            p.head_dim, p.causal};
      },
      [](const PrefillPoint& p) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "b=%lld q=%lld prefix=%lld h=%lld/%lld %s",
                      static_cast<long long>(p.batch), static_cast<long long>(p.q_tokens),
                      static_cast<long long>(p.prefix_tokens), static_cast<long long>(p.num_heads),
                      static_cast<long long>(p.num_kv_heads), p.causal ? "causal" : "bidir");
        return std::string(buf);
      });
}

std::vector<DecodeRow> run_attention_decode(const std::vector<DecodePoint>& points,
                                            const RunContext& ctx) {
  return run_attention<DecodePoint, DecodeRow>(
      points, ctx, "attention_decode",
      [](const DecodePoint& p) {
        return SdpaShape{p.batch,          p.num_heads, p.num_kv_heads, 1,
                         p.context_tokens, p.head_dim,  false};
      },
      [](const DecodePoint& p) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "b=%lld ctx=%lld h=%lld/%lld",
                      static_cast<long long>(p.batch), static_cast<long long>(p.context_tokens),
                      static_cast<long long>(p.num_heads), static_cast<long long>(p.num_kv_heads));
        return std::string(buf);
      });
}

#else  // !SERVESIM_HAVE_CUDNN

bool attention_available() { return false; }

std::vector<PrefillRow> run_attention_prefill(const std::vector<PrefillPoint>& points,
                                              const RunContext& ctx) {
  if (!points.empty()) {
    add_skip_note(ctx.skipped, "attention_prefill", "harness built without cuDNN");
  }
  return {};
}

std::vector<DecodeRow> run_attention_decode(const std::vector<DecodePoint>& points,
                                            const RunContext& ctx) {
  if (!points.empty()) {
    add_skip_note(ctx.skipped, "attention_decode", "harness built without cuDNN");
  }
  return {};
}

#endif  // SERVESIM_HAVE_CUDNN

}  // namespace servesim::profiling
