// Running a validated scenario end to end: build the engine, run it, summarise, and optionally
// store everything in a results database. Shared by `servesim run`, `servesim regress`, the
// golden tests and the benchmarks.
#pragma once

#include <functional>
#include <optional>
#include <tuple>
#include <string>
#include <vector>

#include "reports/miss_breakdown.h"
#include "reports/sqlite_sink.h"
#include "reports/summary.h"
#include "scenarios/scenario.h"
#include "sim/engine.h"

namespace servesim::app {

// The requests a run measures, known before it starts (warm-up requests excluded; requests the
// engine later rejects are still counted).
struct RunPopulation {
  int64_t measured = 0;              // requests whose records summaries count
  int64_t measured_multi_token = 0;  // of them, with at least two output tokens (TPOT defined)
  sim::SloSpec slo;                  // the per-request objectives its attainment counts
  int64_t warmup = 0;                // requests [0, warmup) are warm-up requests
  // Every request's arrival time by id when the workload fixes them in advance (an open loop
  // without a warm-up drain), else empty.
  std::vector<int64_t> arrival_ns;
};

// Follows a run's finished requests and may end it early once its verdict is certain.
// Contract: start() is called once before the first request (the population is the watch's to
// keep), then on_request() with every
// finished request's record in completion order; a non-empty return ends the run there (the
// requests in flight count as unfinished, the run's status is "stopped") and becomes
// RunOutcome::stopped_early.
class RunWatch {
 public:
  virtual ~RunWatch() = default;
  virtual void start(RunPopulation population) = 0;
  virtual std::string on_request(const sim::RequestRecord& record) = 0;
  // Also told of first tokens and rejections, in simulated-time order with on_request(); a
  // non-empty return ends the run as above.
  virtual std::string on_first_token(RequestId /*id*/, int64_t /*first_token_ns*/) {
    return "";
  }
  virtual void on_rejected(const sim::RejectedRecord& /*record*/) {}
};

struct RunOptions {
  std::string db_path;  // empty: no database
  bool keep_records = true;                    // keep RequestRecords in the outcome
  std::function<void(double)> progress;        // share of requests finished
  RunWatch* watch = nullptr;                   // not owned; null: run to the end
};

struct RunOutcome {
  sim::RunResult result;
  reports::RunSummary summary;
  std::vector<sim::RequestRecord> requests;    // when keep_records
  std::vector<sim::SampleRecord> samples;      // when keep_records
  std::vector<sim::RejectedRecord> rejected;   // every request refused on arrival, with why
  int64_t run_id = 0;                          // in the database, when one was written
  double wall_s = 0;
  std::string workload_description;
  std::vector<std::string> cost_models;  // describe() of each cost model used
  models::LookupStats lookups;           // summed over the cost models
  // Whether `requests` (and the database's requests table) holds every finished request; false
  // when output.requests kept a sample or none: the summary then comes from histograms, and
  // `misses` covers the kept records only.
  bool all_records = true;
  reports::MissBreakdown misses;         // why requests missed the scenario's SLO
  std::string started_at;                // wall-clock start, ISO 8601 UTC
  std::string stopped_early;             // why RunOptions::watch ended the run; empty otherwise
};

// Everything one finished run writes into a results database, as plain data, so that a run
// simulated on any thread (or MPI rank) can be written by the one owner of the database.
struct StoredRun {
  reports::RunInfo info;
  std::vector<std::pair<std::string, std::string>> params;       // run_param rows
  std::vector<std::tuple<std::string, std::string, double>> scalars;  // (entity, name, value)
  std::vector<LogHistogram::Bin> tbt_bins;
  // iteration_histogram rows: (instance, metric, non-empty bins).
  std::vector<std::tuple<int32_t, std::string, std::vector<LogHistogram::Bin>>> iteration_bins;
  std::vector<sim::RequestRecord> requests;  // empty: no request/token rows
  std::vector<sim::SampleRecord> samples;    // empty: no sample rows
  std::vector<sim::RejectedRecord> rejected;  // rejected_request rows
  std::vector<reports::RequestMiss> misses;   // request_miss rows
  std::string status;
  double wall_s = 0;
  std::string fingerprint;
};

// The rows `servesim run` stores for `outcome` of `scenario`; `extra_params` are appended to the
// flattened resolved scenario (their keys must not collide with it). Request, sample and
// request_miss rows are included when `with_records` (they must then be in the outcome:
// keep_records).
StoredRun make_stored_run(const scenarios::Scenario& scenario, const RunOutcome& outcome,
                          bool with_records,
                          const std::vector<std::pair<std::string, std::string>>& extra_params = {});

// Writes `run` into `db` as one transaction. Returns its run_id. Throws what SqliteSink throws.
int64_t write_run(reports::SqliteSink& db, const StoredRun& run);

// Why the requests of `outcome` (records kept) missed `scenario`'s SLO; see
// reports/miss_breakdown.h. The GPU budget is the policy's `gpu_budget`, when it has one.
reports::MissBreakdown explain_misses(const scenarios::Scenario& scenario,
                                      const RunOutcome& outcome);

// Runs `scenario`. Throws what the layers below throw (ConfigError, InputError, Error).
RunOutcome run_scenario(const scenarios::Scenario& scenario, const scenarios::DataRoot& root,
                        const RunOptions& options);

// The fingerprint as 16 hex digits.
std::string format_fingerprint(uint64_t fingerprint);

// The current UTC time as ISO 8601 (a run's started_at).
std::string utc_now_iso();

}  // namespace servesim::app
