// The load a MoE layer's routing (models/catalog/expert_routing.h) puts on the busiest rank of an
// expert-parallel group (the rank that sets the layer's time).
//
// Routings (Deployment::expert_routing; scenario key cluster.expert_routing):
//  - random: every token picks k distinct experts, each expert equally likely. The busiest of ep
//    ranks gets the binomial mean rows*k/ep plus expected_max_normal_score(ep) standard
//    deviations, at most rows*k; it touches (E/ep) * (1 - (1 - k/E)^(rows)) of its experts
//    (roofline_terms.h). servesim's default where the model has no published estimate.
//  - balanced: the load spread perfectly (an ideal expert-parallel load balancer, and the
//    "balanced" routing of aiconfigurator's MoE tables): rows*k/ep rows on every rank, reaching
//    min(E/ep, rows*k/ep) experts.
//  - power_law_<alpha>: expert popularity drawn from a power law, as aiconfigurator's MoE
//    collector generates it to stand for real routing skew: per layer pass of T tokens, E loads
//    x_i from the density ~ x^-alpha on [1, 0.8 T] (on [0.01, 2] when T*k <= E), scaled to T*k
//    rows in all, rounded (the rounding remainder given to the largest loads), each capped at T
//    (a token reaches an expert once; the excess goes to the least loaded experts); experts are
//    grouped into ep ranks in index order and the busiest rank's rows and nonzero experts are
//    averaged over kPowerLawDraws seeded draws at T = 1, 2, 4, ..., 2^20 (interpolated in log T,
//    constant shares beyond). aiconfigurator published alpha = 1.01 for DeepSeek-V3 / R1 and
//    1.2 for Qwen3-235B-A22B, estimated by matching its kernel latencies to serving
//    measurements (its collector's documentation); those are the catalog defaults of those models
//    (ModelSpec::expert_routing).
// Deterministic: the power-law draws use a fixed seed, the same on every platform.
#pragma once

#include <memory>

#include "models/catalog/expert_routing.h"

namespace servesim::models {

// The busiest expert-parallel rank's share of one MoE layer's work for a pass of `rows` tokens.
struct RankLoad {
  double routed_rows = 0;      // routed (token, expert) rows on the rank
  double touched_experts = 0;  // of its E/ep experts, those its rows reach
};

class ExpertLoadModel {
 public:
  static constexpr int kPowerLawDraws = 64;
  static constexpr int kPowerLawMaxLog2Tokens = 20;

  // REQUIRES: experts >= 1, 1 <= experts_per_token <= experts, ep >= 1 dividing experts.
  // Throws std::invalid_argument otherwise. Power-law grids are shared between models of the
  // same (routing, experts, k, ep) (built once per process; thread-safe).
  ExpertLoadModel(const ExpertRouting& routing, int experts, int experts_per_token, int ep);

  // REQUIRES: rows >= 0.
  RankLoad busiest(double rows) const;
  const ExpertRouting& routing() const { return routing_; }

  struct Grid;  // power law: the busiest rank's shares per log2 tokens (expert_routing.cc)

 private:
  ExpertRouting routing_;
  double experts_ = 0, k_ = 0;
  int ep_ = 1;
  double max_score_ = 0;              // random: expected_max_normal_score(ep)
  std::shared_ptr<const Grid> grid_;  // power law: shares per log2 tokens
};

}  // namespace servesim::models
