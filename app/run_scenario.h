// Running a validated scenario end to end: build the engine, run it, summarise, and optionally
// store everything in a results database. Shared by `servesim run`, `servesim regress`, the
// golden tests and the benchmarks.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "reports/summary.h"
#include "scenarios/scenario.h"
#include "sim/engine.h"

namespace servesim::app {

struct RunOptions {
  std::string db_path;  // empty: no database
  bool keep_records = true;                    // keep RequestRecords in the outcome
  std::function<void(double)> progress;        // share of requests finished
};

struct RunOutcome {
  sim::RunResult result;
  reports::RunSummary summary;
  std::vector<sim::RequestRecord> requests;    // when keep_records
  std::vector<sim::SampleRecord> samples;      // when keep_records
  int64_t run_id = 0;                          // in the database, when one was written
  double wall_s = 0;
  std::string workload_description;
  std::vector<std::string> cost_models;  // describe() of each cost model used
  models::LookupStats lookups;           // summed over the cost models
};

// Runs `scenario`. Throws what the layers below throw (ConfigError, InputError, Error).
RunOutcome run_scenario(const scenarios::Scenario& scenario, const scenarios::DataRoot& root,
                        const RunOptions& options);

// The fingerprint as 16 hex digits.
std::string format_fingerprint(uint64_t fingerprint);

}  // namespace servesim::app
