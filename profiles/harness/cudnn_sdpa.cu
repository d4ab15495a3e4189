// cuDNN backend graph of the fused attention (see cudnn_sdpa.h).
#ifdef SERVESIM_HAVE_CUDNN

#include <cmath>
#include <limits>

#include "cudnn_sdpa.h"

namespace servesim::profiling {
namespace {

// Whether the softmax output P feeds the second matmul as bf16 (decided once per process by the
// first shape that builds).
int g_p_bf16 = -1;

}  // namespace

SdpaPlan::SdpaPlan(cudnnHandle_t handle, const SdpaShape& s, bool p_bf16)
    : handle_(handle), shape_(s) {
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

void SdpaPlan::run(cudaStream_t stream, void* q, void* k, void* v, void* o, void* workspace) {
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

Desc& SdpaPlan::keep(std::unique_ptr<Desc> d) {
  descs_.push_back(std::move(d));
  return *descs_.back();
}

Desc& SdpaPlan::tensor(int64_t uid, cudnnDataType_t type, Dims dim, Dims stride, bool is_virtual,
                       bool by_value) {
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

Desc& SdpaPlan::virt(cudnnDataType_t type, Dims dim, Dims stride) {
  return tensor(next_virtual_++, type, dim, stride, true);
}

void SdpaPlan::matmul(const Desc& a, const Desc& b, const Desc& c) {
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

void SdpaPlan::pointwise(cudnnPointwiseMode_t mode, cudnnDataType_t prec, const Desc& x,
                         const Desc* b, const Desc& y, const Desc* t, int64_t axis) {
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

void SdpaPlan::reduction(cudnnReduceTensorOp_t mode, const Desc& x, const Desc& y) {
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

void SdpaPlan::finalize_plan() {
  graph_ = std::make_unique<Desc>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  std::vector<cudnnBackendDescriptor_t> ops;
  for (auto& op : ops_) {
    ops.push_back(op->get());
  }
  graph_->set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, ops.size(), ops.data());
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

std::unique_ptr<SdpaPlan> build_sdpa_plan(cudnnHandle_t handle, const SdpaShape& s) {
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

}  // namespace servesim::profiling

#endif  // SERVESIM_HAVE_CUDNN
