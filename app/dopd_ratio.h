// `servesim dopd-ratio SCENARIO`: DOPD's optimal prefill/decode ratio (policies.md §4.2,
// eq. 11-14) for the prefill and decode instances a disaggregated scenario lays out, with every
// input printed. Analytic only: no simulation runs.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "policies/dopd/pd_ratio.h"
#include "scenarios/scenario.h"

namespace servesim::app {

struct DopdRatioOptions {
  std::optional<double> isl;  // mean input tokens; default: the scenario workload's mean
  std::optional<double> osl;  // mean output tokens; default: the scenario workload's mean
  double eta = 1.0;           // C_use = eta * C_max
};

// Throws ConfigError when the scenario's policy has no prefill or no decode instance group.
policies::dopd::RatioResult print_dopd_ratio(const scenarios::Scenario& scenario,
                                             const scenarios::DataRoot& root,
                                             const DopdRatioOptions& options, std::ostream& out);

}  // namespace servesim::app
