// Fused attention latency through cuDNN's flash-attention fprop (cudnn_sdpa.h), for the prefill
// (many query tokens, optional cached prefix, causal or bidirectional) and decode (one query token)
// tables.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "gpu_bench.h"
#include "gpu_timer.h"

#ifdef SERVESIM_HAVE_CUDNN
#include "cudnn_sdpa.h"
#endif

namespace servesim::profiling {

#ifdef SERVESIM_HAVE_CUDNN
namespace {

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
  auto plan = build_sdpa_plan(handle, s);
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
  auto plan = build_sdpa_plan(session.handle, s);
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
