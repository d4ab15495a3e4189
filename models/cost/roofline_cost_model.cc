// Roofline iteration cost model.
//
// One forward pass is decomposed into operators per layer and per TP rank; each operator costs
// max(FLOPs / achievable FLOP/s, bytes / achievable B/s) plus a fixed kernel latency, and the pass
// adds a fixed per-iteration overhead. All shapes are per rank (TP shards N or K of each GEMM).
//
//  - GEMMs, M = sum of query tokens, weights in the deployment's weight dtype, activations 16-bit:
//      QKV     N = (H/t + 2 * kvh_rank) * hd, K = hidden
//      O       N = hidden,                   K = H/t * hd
//      gate-up N = (gated ? 2 : 1) * I/t,    K = hidden
//      down    N = hidden,                   K = I/t
//    bytes = N*K*weight_bytes + M*K*2 + M*N*2; FLOPs = 2*M*N*K.
//  - MoE MLP (Mixtral): a 16-bit router GEMM (N = experts) plus expert GEMMs over M*top_k routed
//    rows. The weights read are those of min(experts, M*top_k) experts: every routed row is assumed
//    to hit a different expert until all are touched. That is exact for one token and for large
//    batches and an upper bound in between (uniform routing touches fewer distinct experts).
//  - Attention, prefill-like segments (q > 1) and decode segments (q == 1) costed as two kernels.
//    A chunk of q tokens after c = k - q cached ones attends q*c + q*(q+1)/2 key positions
//    (causal); FLOPs = 4 * hd * H/t per position. Bytes = KV of the k attended tokens read plus the
//    q new tokens written (2 * kvh_rank * hd * kv_bytes per token) plus Q read and O written
//    (16-bit).
//  - Norms and elementwise (two fused residual-add + RMSNorm, rotary, SiLU*mul), memory-bound:
//      bytes/token = 2 * (8 * hidden + (gated ? 3 : 2) * I_active/t + 2 * (H/t + kvh_rank) * hd)
//    i.e. c * hidden * 2 with c = 21 for Llama-3.1-8B at tp=1; charged 4 kernel launches.
//  - Two ring all-reduces per layer when t > 1 over M*hidden*2 bytes:
//      2 * (t-1)/t * bytes / (link * link_efficiency) + allreduce_latency,
//    link = NVLink per direction when the whole TP group is NVLink-connected, else PCIe.
//  - LM head once per pass over the logit rows (N = vocab/t, K = hidden, 16-bit weights: FP8
//    checkpoints keep the LM head in 16-bit); embeddings and the final norm are negligible.
//  - MoE models with shared experts and dense layers (DeepSeek), MLA attention and sliding-window
//    layers: the formulas are in roofline_terms.h.
//  - Attention and the LM head run at the BF16 tensor-core rate whatever the weight dtype.
//  - Compute efficiency 0 means measured_matmul / peak of the dtype when the catalog has a
//    measurement, else kDefaultComputeEfficiency.
// peak_bound_time() is the same decomposition at 100 % of peak FLOP/s, DRAM and link bandwidth
// with no kernel, all-reduce or iteration latencies, so it never exceeds iteration_time().
// The decomposition itself (shapes, sums, roofline arithmetic) lives in roofline_terms.{h,cc},
// shared with the profiled model (profiled_cost_model.cc).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "models/cost/attention_dp.h"
#include "models/cost/pipeline.h"
#include "models/cost/cost_model.h"
#include "models/cost/roofline_terms.h"
#include "core/error.h"

namespace servesim::models {
namespace {

const Deployment& validated(const Deployment& d) {
  validate_deployment(d);
  return d;
}

// Holds its own copies of the model and GPU specs, so it does not depend on the catalogs' lifetime.
class RooflineCostModel final : public IterationCostModel {
 public:
  RooflineCostModel(const Deployment& d, const RooflineParams& p)
      : model_(*validated(d).model), gpu_(*d.gpu), deployment_(d), params_(p) {
    deployment_.model = &model_;
    deployment_.gpu = &gpu_;
    shapes_ = detail::rank_shapes(deployment_);
    detail::check_roofline_params(p);
    peak_ = detail::make_rates(shapes_, detail::peak_throughputs(deployment_));
    achievable_ = detail::achievable_throughputs(deployment_, p);
    rates_ = detail::make_rates(shapes_, achievable_);
  }

  Duration iteration_time(const BatchShape& shape) const override {
    return counted(detail::sum_segments(shape, shapes_.window)).total();
  }

  OperatorTimes counted_breakdown(const BatchShape& shape) const override {
    return counted(detail::sum_segments(shape, shapes_.window));
  }

  std::optional<Duration> decode_iteration_time(const DecodePass& pass) const override {
    if (shapes_.window > 0) return std::nullopt;  // windowed sums need each context
    return counted(detail::decode_sums(pass)).total();
  }

  std::optional<Duration> mixed_iteration_time(const DecodePass& run,
                                               const BatchShape& rest) const override {
    if (shapes_.window > 0) return std::nullopt;
    return counted(detail::mixed_sums(run, rest)).total();
  }

  LookupStats lookup_stats() const override { return stats_; }

  OperatorTimes breakdown(const BatchShape& shape) const override {
    return detail::evaluate(rates_, detail::sum_segments(shape, shapes_.window));
  }

  Duration peak_bound_time(const BatchShape& shape) const override {
    return peak_bound_breakdown(shape).total();
  }
  OperatorTimes peak_bound_breakdown(const BatchShape& shape) const override {
    return detail::evaluate(peak_, detail::sum_segments(shape, shapes_.window));
  }

  std::string describe() const override {
    std::string dtypes = dtype_name(deployment_.weight_dtype);
    if (deployment_.kv_dtype != deployment_.weight_dtype) {
      dtypes += fmt::format(" (kv {})", dtype_name(deployment_.kv_dtype));
    }
    return fmt::format(
        "roofline {} on {} {} {}: {:.0f} TFLOP/s, {:.2f} TB/s achievable, "
        "overhead {:g} ms",
        model_.key, gpu_.key, parallelism_label(deployment_), dtypes,
        achievable_.gemm_flops_per_s / 1e12,
        achievable_.mem_bytes_per_s / 1e12, to_ms(params_.iteration_overhead));
  }

 private:
  // The pass at the achievable rates, counted in stats_ (every lookup is analytic).
  OperatorTimes counted(const detail::BatchSums& sums) const {
    const OperatorTimes t = detail::evaluate(rates_, sums);
    stats_.analytic_s += to_seconds(t.total());
    ++stats_.lookups;
    return t;
  }

  ModelSpec model_;
  GpuSpec gpu_;
  Deployment deployment_;  // points at model_ and gpu_
  RooflineParams params_;
  detail::RankShapes shapes_;
  detail::Throughputs achievable_;
  detail::Rates rates_;
  detail::Rates peak_;
  mutable LookupStats stats_;  // everything is analytic
};

}  // namespace

std::unique_ptr<IterationCostModel> make_roofline_cost_model(const Deployment& deployment,
                                                             const RooflineParams& params) {
  if (deployment.attention_dp > 1) {
    return make_attention_dp_cost_model(deployment, [&](const Deployment& plain) {
      return make_roofline_cost_model(plain, params);
    }, params);
  }
  if (deployment.pp > 1) {
    return make_pipeline_cost_model(
        deployment,
        [&](const Deployment& plain) { return make_roofline_cost_model(plain, params); }, params);
  }
  return std::make_unique<RooflineCostModel>(deployment, params);
}

}  // namespace servesim::models
