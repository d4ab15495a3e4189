// The goodput regression gate: `servesim regress bench/goodput_baseline.json`.
//
// Baseline file format:
//   {"entries": [{"name": "quickstart", "scenario": "scenarios/quickstart.json",
//                 "set": ["cluster.instances=2"],            (optional overrides)
//                 "goodput_tokens_per_s": 1234.5,            (optional with --update)
//                 "tolerance": 0.05}]}                        (optional, default 0.05)
// The measure is the scenario's goodput (tokens/s of requests within the SLO); for a dLLM scenario
// ("kind": "dllm") its generated tokens/s. An entry fails when the measure leaves the band
// baseline x (1 +- tolerance): below it is a regression, above it a change nobody recorded (a
// speed-up to accept with --update, or an objective or workload that no longer binds).
// Scenario paths are relative to the baseline file's directory first, then the data root.
//
// --update measures every entry and rewrites the file with the measured values (an entry without
// one gets it), through a temporary file renamed over the old one; it never fails an entry.
#pragma once

#include <ostream>
#include <string>

#include "scenarios/scenario.h"

namespace servesim::app {

struct RegressOptions {
  bool update = false;  // rewrite the baseline values with the measured ones
  bool json = false;    // print one JSON document instead of the table
};

// Returns the number of failing entries (0 = pass). Prints a table (or, with json, a document:
// {"baseline", "entries": [{"name", "baseline", "measured", "change", "tolerance", "verdict"}],
// "passed", "failed", "updated"}) to `out`. Throws ConfigError for a malformed baseline file.
int run_regression(const std::string& baseline_path, const scenarios::DataRoot& root,
                   const RegressOptions& options, std::ostream& out);

}  // namespace servesim::app
