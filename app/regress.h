// The goodput regression gate: `servesim regress bench/goodput_baseline.json`.
//
// Baseline file format:
//   {"entries": [{"name": "quickstart", "scenario": "scenarios/quickstart.json",
//                 "set": ["cluster.instances=2"],            (optional overrides)
//                 "goodput_tokens_per_s": 1234.5, "tolerance": 0.05}]}
// An entry fails when the scenario's DynaServe goodput falls below baseline x (1 - tolerance); for
// a dLLM scenario ("kind": "dllm") the measure is its generated tokens/s.
// Scenario paths are relative to the baseline file's directory first, then the data root.
#pragma once

#include <ostream>
#include <string>

#include "scenarios/scenario.h"

namespace servesim::app {

struct RegressOptions {
  bool update = false;  // rewrite the baseline values with the measured ones
};

// Returns the number of failing entries (0 = pass). Prints a table to `out`.
int run_regression(const std::string& baseline_path, const scenarios::DataRoot& root,
                   const RegressOptions& options, std::ostream& out);

}  // namespace servesim::app
