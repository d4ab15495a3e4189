#include "models/catalog/expert_routing.h"

#include <stdexcept>

#include <fmt/format.h>

namespace servesim::models {

std::string ExpertRouting::name() const {
  switch (kind) {
    case Kind::kRandom:
      return "random";
    case Kind::kBalanced:
      return "balanced";
    case Kind::kPowerLaw:
      break;
  }
  return fmt::format("power_law_{}", alpha);
}

ExpertRouting parse_expert_routing(const std::string& name) {
  ExpertRouting r;
  if (name == "random") return r;
  if (name == "balanced") {
    r.kind = ExpertRouting::Kind::kBalanced;
    return r;
  }
  const std::string prefix = "power_law_";
  if (name.rfind(prefix, 0) == 0) {
    const std::string number = name.substr(prefix.size());
    size_t used = 0;
    double alpha = 0;
    try {
      alpha = std::stod(number, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == number.size() && !number.empty() && alpha > 1 && alpha <= 3) {
      r.kind = ExpertRouting::Kind::kPowerLaw;
      r.alpha = alpha;
      return r;
    }
  }
  throw std::invalid_argument(fmt::format(
      "unknown expert routing \"{}\"; valid: random, balanced, power_law_<alpha> with alpha in "
      "(1, 3] (e.g. power_law_1.01, power_law_1.2)",
      name));
}

}  // namespace servesim::models
