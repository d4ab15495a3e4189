#include "plan.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace servesim::profiling {
namespace {

constexpr int64_t kBf16Bytes = 2;
// Roofline constants of the duration estimate (an H100 SXM as found, not a datasheet).
constexpr double kBf16FlopsPerS = 650e12;
constexpr double kFp8FlopsPerS = 1100e12;
constexpr double kAttentionFlopsPerS = 450e12;
constexpr double kBytesPerS = 2.8e12;
constexpr double kLaunchUs = 4.0;
// Per-point setup: cuBLASLt heuristic query, cuDNN graph build (runtime-compiled kernels).
constexpr double kGemmSetupS = 0.01;
constexpr double kAttentionSetupS = 0.08;  // seen on an H100 with cuDNN 9.19
constexpr double kCopySetupS = 0.005;
// Forward pass: five GEMM heuristic queries and one attention plan per shape, plus allocating and
// filling the weights and the KV cache once per run.
constexpr double kForwardSetupS = 0.15;
constexpr double kForwardRunSetupS = 3.0;
// One L2 flush (writing twice a 50 MB L2) and the host round trip around each repetition.
constexpr double kFlushUs = 45.0;
constexpr double kRepOverheadUs = 15.0;

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = kKiB * 1024;
constexpr int64_t kGiB = kMiB * 1024;

std::vector<int64_t> powers_of_two(int64_t lo, int64_t hi) {
  std::vector<int64_t> out;
  for (int64_t v = lo; v <= hi; v *= 2) {
    out.push_back(v);
  }
  return out;
}

int64_t get_positive(const nlohmann::json& j, const char* field, std::vector<std::string>* errors) {
  auto it = j.find(field);
  if (it == j.end() || !it->is_number_integer() || it->get<int64_t>() <= 0) {
    errors->push_back(std::string(field) + ": expected a positive integer");
    return 0;
  }
  return it->get<int64_t>();
}

struct HeadConfig {
  int64_t heads;
  int64_t kv_heads;
  int64_t head_dim;
  bool causal;
};

std::vector<HeadConfig> attention_head_configs(const PlanOptions& o) {
  if (o.model) {
    const ModelShape& m = *o.model;
    int64_t kv = std::max<int64_t>(1, m.num_kv_heads / o.tp);
    return {{m.num_heads / o.tp, kv, m.head_dim, !m.bidirectional}};
  }
  std::vector<HeadConfig> out;
  for (bool causal : {true, false}) {
    out.push_back({32, 8, 128, causal});
    out.push_back({32, 32, 128, causal});
    if (!o.quick) {
      out.push_back({16, 4, 128, causal});
      out.push_back({8, 2, 128, causal});
    }
  }
  return out;
}

void add_gemm_points(const PlanOptions& o, Plan* plan) {
  struct Shape {
    const char* layer;
    int64_t n;
    int64_t k;
  };
  std::vector<Shape> shapes;
  if (o.model) {
    const ModelShape& m = *o.model;
    int64_t q_width = m.num_heads * m.head_dim;
    int64_t mlp_out = (m.gated_mlp ? 2 : 1) * m.intermediate_size;
    shapes = {{"qkv", (m.num_heads + 2 * m.num_kv_heads) * m.head_dim / o.tp, m.hidden_size},
              {"o", m.hidden_size, q_width / o.tp},
              {"gate_up", mlp_out / o.tp, m.hidden_size},
              {"down", m.hidden_size, m.intermediate_size / o.tp},
              {"lm_head", m.vocab_size / o.tp, m.hidden_size}};
  } else {
    std::vector<int64_t> dims = o.quick ? std::vector<int64_t>{1024, 4096, 16384}
                                        : std::vector<int64_t>{1024, 2048, 4096, 8192, 16384};
    for (int64_t n : dims) {
      for (int64_t k : dims) {
        shapes.push_back({"grid", n, k});
      }
    }
  }
  std::vector<std::string> dtypes;
  std::string without_fp8;
  for (const std::string& dtype : o.gemm_dtypes) {
    if (o.fp8 || dtype == "bf16") {
      dtypes.push_back(dtype);
    } else {
      without_fp8 += (without_fp8.empty() ? "" : ", ") + dtype;
    }
  }
  for (const std::string& dtype : dtypes) {
    for (const Shape& s : shapes) {
      for (int64_t m : token_grid(o.quick)) {
        plan->gemm.push_back({s.layer, dtype, m, s.n, s.k});
      }
    }
  }
  if (!without_fp8.empty()) {
    plan->skipped["gemm"] =
        without_fp8 + " not measured: the GPU has no fp8 tensor cores (needs sm_89+)";
  }
}

void add_prefill_points(const PlanOptions& o, Plan* plan) {
  std::vector<int64_t> q_grid =
      o.quick ? std::vector<int64_t>{128, 1024, 4096, 16384} : powers_of_two(128, 16384);
  std::vector<int64_t> batch_grid =
      o.quick ? std::vector<int64_t>{1, 8} : std::vector<int64_t>{1, 2, 4, 8, 16, 32};
  std::vector<int64_t> prefix_grid =
      o.quick ? std::vector<int64_t>{0, 4096} : std::vector<int64_t>{0, 1024, 4096};
  constexpr int64_t kMaxBatchTokens = 32768;
  int64_t budget = o.gpu_memory_bytes / 2;
  int dropped = 0;
  for (const HeadConfig& h : attention_head_configs(o)) {
    for (int64_t prefix : prefix_grid) {
      for (int64_t q : q_grid) {
        for (int64_t b : batch_grid) {
          if (b * q > kMaxBatchTokens) {
            continue;
          }
          PrefillPoint p{"bf16", b, q, prefix, h.heads, h.kv_heads, h.head_dim, h.causal};
          if (prefill_working_set_bytes(p) > budget) {
            ++dropped;
            continue;
          }
          plan->prefill.push_back(p);
        }
      }
    }
  }
  if (dropped > 0) {
    plan->skipped["attention_prefill"] =
        std::to_string(dropped) + " points over half the GPU memory not planned";
  }
}

void add_decode_points(const PlanOptions& o, Plan* plan) {
  std::vector<int64_t> batch_grid =
      o.quick ? std::vector<int64_t>{1, 8, 64, 512} : powers_of_two(1, 512);
  std::vector<int64_t> ctx_grid =
      o.quick ? std::vector<int64_t>{128, 1024, 8192, 65536} : powers_of_two(128, 131072);
  int64_t budget = o.gpu_memory_bytes / 2;
  int dropped = 0;
  for (const HeadConfig& h : attention_head_configs(o)) {
    if (!h.causal && !o.model) {
      continue;  // decode has one query token: the mask does not matter
    }
    for (int64_t b : batch_grid) {
      for (int64_t ctx : ctx_grid) {
        DecodePoint p{"bf16", "bf16", b, ctx, h.heads, h.kv_heads, h.head_dim};
        if (decode_working_set_bytes(p) > budget) {
          ++dropped;
          continue;
        }
        plan->decode.push_back(p);
      }
    }
  }
  if (dropped > 0) {
    plan->skipped["attention_decode"] =
        std::to_string(dropped) + " points whose KV cache exceeds half the GPU memory not planned";
  }
}

void add_collective_points(const PlanOptions& o, Plan* plan) {
  if (o.num_gpus < 2) {
    plan->skipped["collective"] = "only 1 GPU is visible; NCCL collectives need 2 or more";
    return;
  }
  std::vector<int64_t> sizes = powers_of_two(4 * kKiB, 512 * kMiB);
  for (const char* op : {"all_reduce", "all_gather"}) {
    for (size_t i = 0; i < sizes.size(); i += o.quick ? 2 : 1) {
      plan->collective.push_back({op, "bf16", o.num_gpus, sizes[i]});
    }
  }
}

void add_memcpy_points(const PlanOptions& o, Plan* plan) {
  std::vector<int64_t> sizes;
  for (int64_t b = 4 * kKiB; b <= kGiB; b *= o.quick ? 16 : 4) {
    sizes.push_back(b);
  }
  std::vector<std::string> kinds = {"d2d", "h2d", "d2h"};
  if (o.num_gpus >= 2) {
    kinds.push_back("peer");
  } else {
    plan->skipped["memcpy"] = "peer copies not measured: only 1 GPU is visible";
  }
  for (const std::string& kind : kinds) {
    for (int64_t b : sizes) {
      plan->memcpy.push_back({kind, b});
    }
  }
}

void add_forward_points(const PlanOptions& o, Plan* plan) {
  if (!o.model) {
    plan->skipped["forward"] = "needs a model (--model): the generic grid has no forward pass";
    return;
  }
  const ForwardModel fm = forward_model(*o.model, o.tp);
  plan->forward_model = fm;
  const int64_t budget = static_cast<int64_t>(kForwardMemoryFraction * o.gpu_memory_bytes);
  if (forward_weight_bytes(fm) > budget) {
    plan->skipped["forward"] = "the weights of one GPU (" +
                               std::to_string(forward_weight_bytes(fm) >> 20) +
                               " MiB) do not fit in the GPU memory; use a larger --tp";
    return;
  }
  struct Shape {
    int64_t batch;
    int64_t q_tokens;
  };
  std::vector<Shape> prefill;
  for (int64_t q : o.quick ? std::vector<int64_t>{512, 2048, 8192} : powers_of_two(128, 8192)) {
    prefill.push_back({1, q});
  }
  if (!o.quick) {
    prefill.push_back({4, 512});
  }
  prefill.push_back({8, 1024});
  std::vector<int64_t> decode_batches =
      o.quick ? std::vector<int64_t>{1, 32, 256} : std::vector<int64_t>{1, 8, 32, 64, 128, 256};
  std::vector<int64_t> decode_contexts =
      o.quick ? std::vector<int64_t>{2048} : std::vector<int64_t>{512, 2048, 8192};

  int dropped_prefill = 0;
  int dropped_decode = 0;
  for (const Shape& s : prefill) {
    ForwardPoint p{"prefill", s.batch, s.q_tokens, s.q_tokens, false};
    if (forward_working_set_bytes(fm, p) > budget) {
      ++dropped_prefill;
      continue;
    }
    plan->forward.push_back(p);
  }
  if (!fm.causal) {
    add_skip_note(&plan->skipped, "forward",
                  "decode rows not planned: a diffusion LLM has no autoregressive decode step");
    return;
  }
  for (int64_t b : decode_batches) {
    for (int64_t ctx : decode_contexts) {
      ForwardPoint p{"decode", b, 1, ctx, false};
      if (forward_working_set_bytes(fm, p) > budget) {
        ++dropped_decode;
        continue;
      }
      plan->forward.push_back(p);  // launched kernel by kernel
      p.graph = true;
      plan->forward.push_back(p);  // the same pass replayed as a CUDA graph
    }
  }
  const std::string over = " whose weights, KV cache and activations exceed " +
                           std::to_string(static_cast<int>(kForwardMemoryFraction * 100)) +
                           "% of the GPU memory not planned";
  if (dropped_prefill > 0) {
    add_skip_note(&plan->skipped, "forward",
                  std::to_string(dropped_prefill) + " prefill shapes" + over);
  }
  if (dropped_decode > 0) {
    add_skip_note(&plan->skipped, "forward",
                  std::to_string(dropped_decode) + " decode shapes" + over);
  }
}

double point_seconds(double kernel_us, int reps, int warmup, double setup_s) {
  double per_rep_us = std::max(kernel_us, kLaunchUs) + kFlushUs + kRepOverheadUs;
  return setup_s + (reps + warmup + 1) * per_rep_us * 1e-6;
}

std::string format_seconds(double s) {
  char buf[64];
  if (s < 120) {
    std::snprintf(buf, sizeof buf, "%.1f s", s);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f min", s / 60);
  }
  return buf;
}

}  // namespace

ModelShape parse_model_shape(const std::string& text, const std::string& key) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw HarnessError("model " + key + ": invalid JSON: " + e.what());
  }
  if (!j.is_object()) {
    throw HarnessError("model " + key + ": expected a JSON object");
  }
  std::vector<std::string> errors;
  ModelShape m;
  m.key = key;
  m.name = j.value("name", key);
  m.hidden_size = get_positive(j, "hidden_size", &errors);
  m.num_layers = get_positive(j, "num_layers", &errors);
  m.num_heads = get_positive(j, "num_attention_heads", &errors);
  m.num_kv_heads = get_positive(j, "num_key_value_heads", &errors);
  m.intermediate_size = get_positive(j, "intermediate_size", &errors);
  m.vocab_size = get_positive(j, "vocab_size", &errors);
  if (j.contains("head_dim") && !j["head_dim"].is_null()) {
    m.head_dim = get_positive(j, "head_dim", &errors);
  } else if (m.num_heads > 0) {
    m.head_dim = m.hidden_size / m.num_heads;
  }
  if (j.contains("gated_mlp")) {
    if (!j["gated_mlp"].is_boolean()) {
      errors.push_back("gated_mlp: expected a boolean");
    } else {
      m.gated_mlp = j["gated_mlp"].get<bool>();
    }
  }
  m.bidirectional = j.contains("diffusion_llm") && !j["diffusion_llm"].is_null();
  if (!errors.empty()) {
    std::string msg = "model " + key + ":";
    for (const std::string& e : errors) {
      msg += "\n  " + e;
    }
    throw HarnessError(msg);
  }
  return m;
}

ModelShape load_model_shape(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw HarnessError("cannot read model file " + path);
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_model_shape(ss.str(), std::filesystem::path(path).stem().string());
}

std::string op_name(Op op) {
  switch (op) {
    case Op::kGemm:
      return "gemm";
    case Op::kAttentionPrefill:
      return "attention_prefill";
    case Op::kAttentionDecode:
      return "attention_decode";
    case Op::kCollective:
      return "collective";
    case Op::kMemcpy:
      return "memcpy";
    case Op::kForward:
      return "forward";
  }
  return "unknown";
}

std::vector<Op> all_ops() {
  return {Op::kGemm,       Op::kAttentionPrefill, Op::kAttentionDecode,
          Op::kCollective, Op::kMemcpy,           Op::kForward};
}

const std::vector<std::string>& gemm_dtype_names() {
  static const std::vector<std::string> kNames = {"bf16", "fp8_e4m3", "fp8_rowwise", "fp8_block"};
  return kNames;
}

std::vector<std::string> parse_gemm_dtypes(const std::string& list) {
  const std::vector<std::string>& valid = gemm_dtype_names();
  std::vector<std::string> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty() || std::find(out.begin(), out.end(), item) != out.end()) {
      continue;
    }
    if (std::find(valid.begin(), valid.end(), item) == valid.end()) {
      std::string names;
      for (const std::string& v : valid) {
        names += (names.empty() ? "" : ", ") + v;
      }
      throw HarnessError("--gemm-dtypes: unknown dtype '" + item + "'; valid values are: " + names);
    }
    out.push_back(item);
  }
  if (out.empty()) {
    throw HarnessError("--gemm-dtypes: empty list");
  }
  return out;
}

std::set<Op> parse_ops(const std::string& list) {
  std::set<Op> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) {
      continue;
    }
    bool found = false;
    for (Op op : all_ops()) {
      if (op_name(op) == item) {
        out.insert(op);
        found = true;
      }
    }
    if (!found) {
      std::string valid;
      for (Op op : all_ops()) {
        valid += (valid.empty() ? "" : ", ") + op_name(op);
      }
      throw HarnessError("--ops: unknown op '" + item + "'; valid values are: " + valid);
    }
  }
  if (out.empty()) {
    throw HarnessError("--ops: empty list");
  }
  return out;
}

std::vector<int64_t> token_grid(bool quick) {
  if (quick) {
    return {1, 4, 16, 64, 256, 1024, 4096, 16384};
  }
  return powers_of_two(1, 16384);
}

Plan build_plan(const PlanOptions& o) {
  if (o.tp < 1) {
    throw HarnessError("--tp: expected a positive integer");
  }
  if (o.reps < 1) {
    throw HarnessError("--reps: expected a positive integer");
  }
  if (o.model) {
    const ModelShape& m = *o.model;
    if (m.num_heads % o.tp != 0 || m.intermediate_size % o.tp != 0) {
      throw HarnessError("--tp " + std::to_string(o.tp) + " does not divide the attention heads (" +
                         std::to_string(m.num_heads) + ") and intermediate size (" +
                         std::to_string(m.intermediate_size) + ") of " + m.key);
    }
  }
  Plan plan;
  plan.model_key = o.model ? o.model->key : "generic";
  plan.tp = o.tp;
  plan.quick = o.quick;
  plan.reps = o.reps;
  plan.warmup = o.warmup;
  if (o.ops.count(Op::kGemm)) {
    add_gemm_points(o, &plan);
  }
  if (o.ops.count(Op::kAttentionPrefill)) {
    add_prefill_points(o, &plan);
  }
  if (o.ops.count(Op::kAttentionDecode)) {
    add_decode_points(o, &plan);
  }
  if (o.ops.count(Op::kCollective)) {
    add_collective_points(o, &plan);
  }
  if (o.ops.count(Op::kMemcpy)) {
    add_memcpy_points(o, &plan);
  }
  if (o.ops.count(Op::kForward)) {
    add_forward_points(o, &plan);
  }
  return plan;
}

int64_t prefill_working_set_bytes(const PrefillPoint& p) {
  int64_t kv_tokens = p.prefix_tokens + p.q_tokens;
  int64_t q_o = 2 * p.batch * p.q_tokens * p.num_heads * p.head_dim;
  int64_t k_v = 2 * p.batch * kv_tokens * p.num_kv_heads * p.head_dim;
  return (q_o + k_v) * kBf16Bytes;
}

int64_t decode_working_set_bytes(const DecodePoint& p) {
  int64_t q_o = 2 * p.batch * p.num_heads * p.head_dim;
  int64_t k_v = 2 * p.batch * p.context_tokens * p.num_kv_heads * p.head_dim;
  return (q_o + k_v) * kBf16Bytes;
}

ForwardModel forward_model(const ModelShape& m, int tp) {
  ForwardModel f;
  f.num_layers = m.num_layers;
  f.hidden = m.hidden_size;
  f.num_heads = m.num_heads / tp;
  f.num_kv_heads = std::max<int64_t>(1, m.num_kv_heads / tp);
  f.head_dim = m.head_dim;
  f.qkv_n = (f.num_heads + 2 * f.num_kv_heads) * f.head_dim;
  f.mlp_inner = m.intermediate_size / tp;
  f.mlp_n = (m.gated_mlp ? 2 : 1) * f.mlp_inner;
  f.vocab = m.vocab_size / tp;
  f.gated_mlp = m.gated_mlp;
  f.causal = !m.bidirectional;
  return f;
}

int64_t forward_weight_bytes(const ForwardModel& m) {
  int64_t per_layer = m.qkv_n * m.hidden + m.hidden * m.num_heads * m.head_dim +
                      m.mlp_n * m.hidden + m.hidden * m.mlp_inner + 2 * m.hidden;
  return (m.num_layers * per_layer + m.vocab * m.hidden + m.hidden) * kBf16Bytes;
}

int64_t forward_kv_bytes(const ForwardModel& m, const ForwardPoint& p) {
  return m.num_layers * p.batch * p.context_tokens * 2 * m.num_kv_heads * m.head_dim * kBf16Bytes;
}

int64_t forward_activation_bytes(const ForwardModel& m, const ForwardPoint& p) {
  int64_t t = p.tokens();
  // Embedding source, residual stream, normed input, O and down outputs; QKV; Q and attention
  // output; gate-up and its activation; the last tokens' norm and logits.
  int64_t elems = 5 * t * m.hidden + t * m.qkv_n + 2 * t * m.num_heads * m.head_dim +
                  t * (m.mlp_n + m.mlp_inner) + p.batch * (m.hidden + m.vocab);
  return elems * kBf16Bytes;
}

int64_t forward_working_set_bytes(const ForwardModel& m, const ForwardPoint& p) {
  return forward_weight_bytes(m) + forward_kv_bytes(m, p) + forward_activation_bytes(m, p);
}

double estimate_point_us(const ForwardModel& m, const ForwardPoint& p) {
  int64_t t = p.tokens();
  auto gemm = [&](int64_t rows, int64_t n, int64_t k) {
    return estimate_point_us(GemmPoint{"", "bf16", rows, n, k});
  };
  double attention =
      p.kind == "decode"
          ? estimate_point_us(DecodePoint{"bf16", "bf16", p.batch, p.context_tokens, m.num_heads,
                                          m.num_kv_heads, m.head_dim})
          : estimate_point_us(PrefillPoint{"bf16", p.batch, p.q_tokens, 0, m.num_heads,
                                           m.num_kv_heads, m.head_dim, m.causal});
  // Norms, RoPE, residual adds and SiLU-mul: read and write their tensors once each.
  double elementwise_bytes = kBf16Bytes * static_cast<double>(t) *
                             (10.0 * m.hidden + 2.0 * m.qkv_n + m.mlp_n + m.mlp_inner);
  double layer = gemm(t, m.qkv_n, m.hidden) + gemm(t, m.hidden, m.num_heads * m.head_dim) +
                 gemm(t, m.mlp_n, m.hidden) + gemm(t, m.hidden, m.mlp_inner) + attention +
                 elementwise_bytes / kBytesPerS * 1e6 + 7 * kLaunchUs;
  return m.num_layers * layer + gemm(p.batch, m.vocab, m.hidden) + 2 * kLaunchUs;
}

double estimate_point_us(const GemmPoint& p) {
  bool fp8 = p.dtype != "bf16";
  double flops = 2.0 * p.m * p.n * p.k;
  double in_bytes = fp8 ? 1.0 : 2.0;
  double bytes = in_bytes * (p.m * p.k + p.n * p.k) + 2.0 * p.m * p.n;
  double t = std::max(flops / (fp8 ? kFp8FlopsPerS : kBf16FlopsPerS), bytes / kBytesPerS);
  return t * 1e6 + kLaunchUs;
}

double estimate_point_us(const PrefillPoint& p) {
  // Each query attends to the prefix and (causal) half of the query block.
  double keys = p.prefix_tokens + (p.causal ? 0.5 : 1.0) * p.q_tokens;
  double flops = 4.0 * p.batch * p.num_heads * p.q_tokens * keys * p.head_dim;
  double bytes = static_cast<double>(prefill_working_set_bytes(p));
  return std::max(flops / kAttentionFlopsPerS, bytes / kBytesPerS) * 1e6 + kLaunchUs;
}

double estimate_point_us(const DecodePoint& p) {
  double bytes = static_cast<double>(decode_working_set_bytes(p));
  return bytes / kBytesPerS * 1e6 + kLaunchUs;
}

double estimate_plan_seconds(const Plan& plan) {
  double s = 0;
  for (const GemmPoint& p : plan.gemm) {
    s += point_seconds(estimate_point_us(p), plan.reps, plan.warmup, kGemmSetupS);
  }
  for (const PrefillPoint& p : plan.prefill) {
    s += point_seconds(estimate_point_us(p), plan.reps, plan.warmup, kAttentionSetupS);
  }
  for (const DecodePoint& p : plan.decode) {
    s += point_seconds(estimate_point_us(p), plan.reps, plan.warmup, kAttentionSetupS);
  }
  for (const CollectivePoint& p : plan.collective) {
    double us = 20.0 + 2.0 * p.message_bytes / 100e9 * 1e6;  // NVLink-class bus bandwidth
    s += point_seconds(us, plan.reps, plan.warmup, kCopySetupS);
  }
  for (const MemcpyPoint& p : plan.memcpy) {
    double bw = p.kind == "d2d" ? kBytesPerS / 2 : 25e9;
    s += point_seconds(p.bytes / bw * 1e6 + kLaunchUs, plan.reps, plan.warmup, kCopySetupS);
  }
  if (!plan.forward.empty()) {
    s += kForwardRunSetupS;
    for (const ForwardPoint& p : plan.forward) {
      // No L2 flush between passes; a pass is far longer than the host round trip.
      s += kForwardSetupS +
           (plan.reps + plan.warmup + 1) * estimate_point_us(plan.forward_model, p) * 1e-6;
    }
  }
  bool empty = plan.gemm.empty() && plan.prefill.empty() && plan.decode.empty() &&
               plan.collective.empty() && plan.memcpy.empty() && plan.forward.empty();
  // Process start-up: context creation, library loading, device memory for the L2 flush.
  return empty ? s : s + 3.0;
}

std::string format_plan(const Plan& plan) {
  std::ostringstream out;
  out << "servesim-profile measurement plan\n";
  out << "  model: " << plan.model_key << "  tp: " << plan.tp
      << "  grid: " << (plan.quick ? "quick" : "full") << "  reps: " << plan.reps
      << "  warm-up: " << plan.warmup << "\n";
  auto line = [&](const std::string& table, size_t points, double seconds) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "  %-18s %6zu points  ~%s\n", table.c_str(), points,
                  format_seconds(seconds).c_str());
    out << buf;
  };
  auto only = [&plan](auto member) {
    if ((plan.*member).empty()) {
      return 0.0;
    }
    Plan p;
    p.reps = plan.reps;
    p.warmup = plan.warmup;
    p.*member = plan.*member;
    return estimate_plan_seconds(p) - 3.0;
  };
  line("gemm", plan.gemm.size(), only(&Plan::gemm));
  line("attention_prefill", plan.prefill.size(), only(&Plan::prefill));
  line("attention_decode", plan.decode.size(), only(&Plan::decode));
  line("collective", plan.collective.size(), only(&Plan::collective));
  line("memcpy", plan.memcpy.size(), only(&Plan::memcpy));
  double forward_s = 0.0;
  if (!plan.forward.empty()) {
    Plan p;
    p.reps = plan.reps;
    p.warmup = plan.warmup;
    p.forward_model = plan.forward_model;
    p.forward = plan.forward;
    forward_s = estimate_plan_seconds(p) - 3.0;
  }
  line("forward", plan.forward.size(), forward_s);
  size_t total = plan.gemm.size() + plan.prefill.size() + plan.decode.size() +
                 plan.collective.size() + plan.memcpy.size() + plan.forward.size();
  out << "  total: " << total << " points, estimated "
      << format_seconds(estimate_plan_seconds(plan)) << " on an H100-class GPU\n";
  for (const auto& [table, why] : plan.skipped) {
    out << "  skipped (" << table << "): " << why << "\n";
  }
  return out.str();
}

}  // namespace servesim::profiling
