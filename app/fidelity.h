// `servesim fidelity CSV`: servesim's end-to-end predictions against measured benchmark runs of
// real engines (app/measured_runs.h), with the error statistics a capacity planner is judged by,
// and the fit of the engine calibrations (models/calibration/engine_calibration.h) on those runs.
//
// Contract:
// - Every row of the CSV is mapped to a scenario or reported as skipped with its reason; mapped
//   rows are simulated in parallel (deterministic: the same CSV, options and code give the same
//   predictions), and each prediction is the mean TTFT and TPOT of the measured requests, as
//   aiperf reports them.
// - Without --fit, predictions use the calibration file in effect (which may have been fitted on
//   these very rows: the report says so). With --fit, every (engine, GPU class) group of dense
//   rows is fitted twice over: once per model on the group's other models (leave-one-model-out,
//   the held-out predictions reported as the error), and once on every model (the calibration
//   written by --write-calibration, with the held-out error band). A model never contributes to
//   the fit that predicts it. MoE rows never enter a fit; they are predicted with the dense
//   calibration and reported apart.
// - Errors are signed fractions (predicted - measured) / measured; MdAPE is the median of their
//   absolute values, bias their median.
// - With a database path, every prediction is stored in one transaction
//   (reports/fidelity_store.h).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "app/measured_runs.h"
#include "scenarios/scenario.h"

namespace servesim::app {

struct FidelityOptions {
  std::string db_path;            // empty: no database
  int jobs = 1;                   // simulations in parallel
  bool fit = false;               // leave-one-model-out and all-model calibration fits
  std::string write_calibration;  // with fit: write the all-model calibration here
  int worst = 10;                 // worst rows listed
  std::string emit_scenario;      // a row's id or CSV line: print its scenario document only
  std::vector<std::string> engines;  // only rows of these engines (empty: every engine)
  BenchmarkTemplate bench;
  int fit_evaluations = 60;       // objective evaluations per fit
  int fit_max_rows = 50;          // rows per fit (an even spread of the group's rows)
};

// Error statistics of a set of predictions (fractions).
struct ErrorStats {
  int64_t rows = 0;
  double ttft_mdape = 0, ttft_mape = 0, ttft_bias = 0, ttft_within_10 = 0, ttft_within_25 = 0,
         ttft_p90_ape = 0;
  double tpot_mdape = 0, tpot_mape = 0, tpot_bias = 0, tpot_within_10 = 0, tpot_within_25 = 0,
         tpot_p90_ape = 0;
  double both_within_25 = 0;
};

// REQUIRES: ttft_errors.size() == tpot_errors.size(). All zero for no rows.
ErrorStats error_stats(const std::vector<double>& ttft_errors,
                       const std::vector<double>& tpot_errors);

// The end-to-end error band of `s` as `servesim run` prints it: for an engine model, where its
// CPU and front-end costs come from and the held-out (leave-one-model-out) error that
// `servesim fidelity --fit` measured for its engine on its GPU class; otherwise a line saying that
// no end-to-end error was measured for a scenario without an engine model.
std::string error_band(const scenarios::Scenario& s, const scenarios::DataRoot& root);

// Runs the study; returns the process exit code: 0, or 1 when no row could be predicted (rows that
// fail to simulate, e.g. a deployment whose weights do not fit, are listed with their reason and
// stored with status "failed"). Throws
// InputError / ConfigError for a bad CSV or options.
int run_fidelity(const std::string& csv_path, const FidelityOptions& options,
                 const scenarios::DataRoot& root, std::ostream& out);

}  // namespace servesim::app
