// What the HTML report reads from a results database beyond a run's own rows: a plan with its
// configs and their simulations, and the per-iteration distributions of a run (internal to
// reports/; html_report.cc renders what these return and runs no SQL of its own for them).
//
// Contract: every function only reads. Unknown plan ids throw servesim::InputError naming the
// database and the ids it holds; a database written before a table existed (iteration_histogram)
// reads as empty. NaN marks a value that is not stored.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "reports/sqlite_db.h"

namespace servesim::reports {

struct PlanConfigData {
  int64_t index = 0;
  std::string label, candidate, gpu, policy, status, reason;
  int64_t num_gpus = 0;
  double cost = 0;  // USD per hour
  double capacity = std::numeric_limits<double>::quiet_NaN();
  double bound = std::numeric_limits<double>::quiet_NaN();
  int meets_target = -1;
  // One simulation of the config, with its run's summary scalars.
  struct Probe {
    int64_t run_id = 0;
    double rate = 0;
    bool meets = false;
    double attainment = std::numeric_limits<double>::quiet_NaN();
    double goodput = std::numeric_limits<double>::quiet_NaN();  // tokens/s
    double output_tokens_per_s = std::numeric_limits<double>::quiet_NaN();
    double tpot_mean_s = std::numeric_limits<double>::quiet_NaN();
  };
  std::vector<Probe> probes;  // in the order simulated
};

struct PlanData {
  int64_t plan_id = 0;
  std::string name, source, mode, status;
  double target_rate = std::numeric_limits<double>::quiet_NaN();        // NaN: max-rate mode
  double attainment_target = std::numeric_limits<double>::quiet_NaN();  // from the document
  std::vector<PlanConfigData> configs;                                  // by config index
};

PlanData load_plan(SqliteDb &db, int64_t plan_id);

// One bin of an iteration distribution: `count` iterations with a value in [lower, upper).
struct IterationBin {
  int32_t instance = 0;
  int64_t lower = 0, upper = 0, count = 0;
};

// The bins of run `run_id`'s metric ("batch_requests", "batch_tokens"), by instance then value;
// empty for a run stored without them.
std::vector<IterationBin> load_iteration_bins(SqliteDb &db, int64_t run_id,
                                              const std::string &metric);

}  // namespace servesim::reports
