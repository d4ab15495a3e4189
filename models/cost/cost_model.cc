#include "models/cost/cost_model.h"

#include <stdexcept>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace servesim::models {

int64_t BatchShape::total_query_tokens() const {
  int64_t total = 0;
  for (const Segment& s : segments) {
    total += s.query_tokens;
  }
  return total;
}

int64_t BatchShape::total_logit_rows() const {
  int64_t total = 0;
  for (const Segment& s : segments) {
    total += s.logit_rows;
  }
  return total;
}

Duration OperatorTimes::total() const {
  return qkv_gemm + o_gemm + mlp_gemm + attention_prefill + attention_decode + norms_elementwise +
         allreduce + lm_head + overhead;
}

OperatorTimes& OperatorTimes::operator+=(const OperatorTimes& o) {
  qkv_gemm += o.qkv_gemm;
  o_gemm += o.o_gemm;
  mlp_gemm += o.mlp_gemm;
  attention_prefill += o.attention_prefill;
  attention_decode += o.attention_decode;
  norms_elementwise += o.norms_elementwise;
  allreduce += o.allreduce;
  lm_head += o.lm_head;
  overhead += o.overhead;
  return *this;
}

LookupStats& LookupStats::operator+=(const LookupStats& o) {
  interpolated_s += o.interpolated_s;
  extrapolated_s += o.extrapolated_s;
  analytic_s += o.analytic_s;
  lookups += o.lookups;
  return *this;
}

int kv_heads_per_rank(const ModelSpec& model, int tp) {
  return model.num_kv_heads >= tp ? model.num_kv_heads / tp : 1;
}

int64_t kv_bytes_per_token_per_rank_layer(const ModelSpec& model, int tp, Dtype kv_dtype) {
  if (model.mla) {
    return model.kv_bytes_per_token_per_layer(kv_dtype);
  }
  return 2 * static_cast<int64_t>(kv_heads_per_rank(model, tp)) * model.head_dim *
         dtype_bytes(kv_dtype);
}

bool is_valid_tp(const ModelSpec& model, int tp) {
  if (tp < 1 || model.num_attention_heads % tp != 0) {
    return false;
  }
  return model.num_kv_heads >= tp ? model.num_kv_heads % tp == 0 : tp % model.num_kv_heads == 0;
}

std::string expert_parallel_error(const ModelSpec& model, int tp, int ep, int attention_dp) {
  if (attention_dp < 1) {
    return fmt::format("{}: attention data-parallel degree attention_dp={} must be at least 1",
                       model.key, attention_dp);
  }
  if (attention_dp > 1 && !model.moe) {
    return fmt::format("{}: attention data parallelism (attention_dp={}) needs a MoE model; a dense "
                       "model's data-parallel ranks are separate instances (cluster.instances)",
                       model.key, attention_dp);
  }
  if (ep == 1) return "";
  if (ep < 1) return fmt::format("{}: expert-parallel degree ep={} must be at least 1", model.key, ep);
  if (!model.moe) {
    return fmt::format("{}: expert parallelism (ep={}) needs a MoE model; {} has no experts",
                       model.key, ep, model.key);
  }
  if (model.moe->num_experts % ep != 0) {
    return fmt::format("{}: ep={} does not divide its {} routed experts", model.key, ep,
                       model.moe->num_experts);
  }
  if (attention_dp > 1 && (tp * attention_dp) % ep != 0) {
    return fmt::format("{}: ep={} must divide tp x attention_dp = {} x {} (the experts are split "
                       "over the instance's GPUs)",
                       model.key, ep, tp, attention_dp);
  }
  if (attention_dp == 1 && tp % ep != 0) {
    return fmt::format("{}: ep={} must divide tp={} (the experts are split inside the instance's "
                       "TP GPUs)",
                       model.key, ep, tp);
  }
  return "";
}

std::string pipeline_parallel_error(const ModelSpec& model, int pp, int attention_dp) {
  if (pp < 1 || pp > model.num_layers) {
    return fmt::format("{}: pipeline-parallel degree pp={} must be in [1, {}] (one stage holds at "
                       "least one of the model's {} layers)",
                       model.key, pp, model.num_layers, model.num_layers);
  }
  if (pp > 1 && attention_dp > 1) {
    return fmt::format("{}: pipeline parallelism (pp={}) with attention data parallelism "
                       "(attention_dp={}) is not modelled; use one of them",
                       model.key, pp, attention_dp);
  }
  return "";
}

std::string parallelism_label(const Deployment& d) {
  std::string label = fmt::format("tp{}", d.tp);
  if (d.attention_dp > 1) label += fmt::format(" dp{}", d.attention_dp);
  if (d.pp > 1) label += fmt::format(" pp{}", d.pp);
  if (d.ep > 1) label += fmt::format(" ep{}", d.ep);
  if (d.model != nullptr && d.model->moe && d.routing().kind != ExpertRouting::Kind::kRandom) {
    label += fmt::format(" {} routing", d.routing().name());
  }
  return label;
}

void validate_deployment(const Deployment& deployment) {
  if (deployment.model == nullptr || deployment.gpu == nullptr) {
    throw std::invalid_argument("deployment needs both a model and a GPU");
  }
  const ModelSpec& m = *deployment.model;
  const GpuSpec& gpu = *deployment.gpu;
  if (!is_kv_dtype(deployment.kv_dtype)) {
    throw std::invalid_argument(fmt::format("kv_dtype {} is not a KV-cache format; valid: {}",
                                            dtype_name(deployment.kv_dtype),
                                            fmt::join(kv_dtype_names(), ", ")));
  }
  if (gpu.peak_flops_per_s(deployment.weight_dtype) <= 0) {
    throw CapacityError(fmt::format(
        "{}: {} weights need FP4 tensor cores, which {} ({}) does not have (no fp4_tflops_dense "
        "in the GPU catalog); servesim does not emulate FP4: use fp8_block or int4_wo weights, "
        "or a Blackwell GPU",
        m.key, dtype_name(deployment.weight_dtype), gpu.key, gpu.name));
  }
  const int tp = deployment.tp;
  if (const std::string e = expert_parallel_error(m, tp, deployment.ep, deployment.attention_dp);
      !e.empty()) {
    throw CapacityError(e);
  }
  if (const std::string e = pipeline_parallel_error(m, deployment.pp, deployment.attention_dp);
      !e.empty()) {
    throw CapacityError(e);
  }
  if (is_valid_tp(m, tp)) {
    return;
  }
  std::vector<int> valid;
  for (int t = 1; t <= m.num_attention_heads; ++t) {
    if (is_valid_tp(m, t)) {
      valid.push_back(t);
    }
  }
  std::string reason;
  if (tp < 1) {
    reason = "must be at least 1";
  } else if (m.num_attention_heads % tp != 0) {
    reason = fmt::format("does not divide num_attention_heads ({})", m.num_attention_heads);
  } else if (m.num_kv_heads >= tp) {
    reason = fmt::format("does not divide num_key_value_heads ({})", m.num_kv_heads);
  } else {
    reason = fmt::format(
        "is not a multiple of num_key_value_heads ({}), so KV heads cannot be "
        "replicated evenly",
        m.num_kv_heads);
  }
  throw CapacityError(fmt::format("{}: tensor-parallel degree tp={} {}; valid tp degrees: {}",
                                  m.key, tp, reason, fmt::join(valid, ", ")));
}

}  // namespace servesim::models
