// How a MoE layer's routed tokens spread over the experts: the routing a model or deployment
// names (Deployment::expert_routing; scenario key cluster.expert_routing). The load each routing
// puts on the busiest expert-parallel rank, and the meaning of each name, are in
// models/cost/expert_load.h.
#pragma once

#include <string>

namespace servesim::models {

struct ExpertRouting {
  enum class Kind { kRandom, kBalanced, kPowerLaw };
  Kind kind = Kind::kRandom;
  double alpha = 0;  // kPowerLaw only: the exponent, in (1, 3]

  // "random", "balanced" or "power_law_<alpha>" with alpha as written by parse (e.g. 1.01).
  std::string name() const;
  bool operator==(const ExpertRouting& o) const { return kind == o.kind && alpha == o.alpha; }
};

// Parses the names above. Throws std::invalid_argument naming the valid forms.
ExpertRouting parse_expert_routing(const std::string& name);

}  // namespace servesim::models
