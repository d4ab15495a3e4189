// Writes simulation results into a SQLite database that holds many runs (one per sweep point).
//
// Contract:
// - Schema (version kSchemaVersion, stored in meta.schema_version) is created when the file is new
//   or empty. A version 1 database (no request.warmup column), 2 (no rejected_request table),
//   3 (no request_miss table), 4 (no request.dram_hit_tokens column) or 5 (no
//   iteration_histogram table) is migrated in place; one with another schema_version, or with
//   tables but no meta table, is rejected with servesim::Error. All times are integer
//   nanoseconds (run.time_unit = 'ns').
// - Transactions: begin_run() starts one transaction that spans the whole run; every row of the
//   run goes through prepared statements inside it, and end_run() commits. A run is therefore
//   visible to readers completely or not at all: if the sink is destroyed, abort_run() is called,
//   or any write fails before end_run(), the transaction is rolled back and the database holds
//   nothing of that run. Earlier committed runs are never touched.
// - Journal: WAL with synchronous=NORMAL. Readers (run_query, sqlite3 shell, Python) are never
//   blocked by a run being written and see only committed runs; a power loss may lose the last
//   committed run but never corrupts the file. WAL needs the -wal and -shm side files next to the
//   database and does not work on network file systems.
// - Writers: one open run per database file at a time. begin_run() of a second sink (in this or
//   another process) waits up to kBusyTimeoutMs for the first run to end, then throws. Parallel
//   sweep workers should each write their own database file.
// - Errors: servesim::Error reading "PATH: sqlite error: MESSAGE (while WHAT)". The destructor
//   rolls back an open run, closes the file and never throws.
// - Not thread-safe; not copyable or movable (listener() hands out a reference into the sink).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "reports/miss_breakdown.h"
#include "core/histogram.h"
#include "sim/records.h"

namespace servesim::reports {

// Identity and provenance of one run, stored in the `run` table.
struct RunInfo {
  std::string scenario = {};    // scenario name or file
  std::string policy = {};      // batching / scheduling policy name
  std::string router = {};      // routing policy name
  std::string workload = {};    // workload description (trace and window)
  std::string code_rev = {};    // version or VCS revision of servesim
  std::string started_at = {};  // wall-clock start, ISO 8601
  // Stored bit-for-bit in a signed 64-bit column: seeds >= 2^63 read back negative in SQL.
  uint64_t seed = 0;
};

class SqliteSink {
 public:
  static constexpr int kSchemaVersion = 6;
  static constexpr int kBusyTimeoutMs = 60'000;

  // Opens or creates the database at `path` and checks or creates the schema.
  // Throws Error when the file cannot be opened, is not a SQLite database, or has another schema.
  explicit SqliteSink(const std::string& path);
  ~SqliteSink();
  SqliteSink(const SqliteSink&) = delete;
  SqliteSink& operator=(const SqliteSink&) = delete;

  // Starts a run: opens the transaction, inserts the run row (status 'running') and `params`
  // (the flattened, fully resolved scenario: "policy.max_num_seqs" -> "256"; keys must be
  // unique). Returns the new run_id.
  // REQUIRES: no run is open.
  int64_t begin_run(const RunInfo& info,
                    const std::vector<std::pair<std::string, std::string>>& params);

  // The listener the engine streams records into during the run. Records arriving while no run
  // is open throw Error. Request records with non-empty token_times_ns also fill `token`.
  sim::RecordListener& listener();

  // Adds one end-of-run scalar. (entity, name) must be unique within the run. A NaN value is
  // stored as NULL (SQLite has no NaN). REQUIRES: a run is open.
  void add_scalar(const std::string& entity, const std::string& name, double value);

  // Stores the non-empty bins of the run's TBT histogram (the compact TBT store). At most once
  // per run. REQUIRES: a run is open.
  void add_tbt_histogram(const LogHistogram& tbt_ns);

  // Stores one instance's distribution of an iteration metric ("batch_requests": requests in a
  // batch, "batch_tokens": tokens an iteration computed) as the non-empty bins of a LogHistogram.
  // At most once per (instance, metric) and run. REQUIRES: a run is open.
  void add_iteration_histogram(int32_t instance, const std::string& metric,
                               const std::vector<LogHistogram::Bin>& bins);

  // Stores the run's SLO misses with their causes (request_miss). REQUIRES: a run is open.
  void add_misses(const std::vector<RequestMiss>& misses);

  // Records the outcome ("ok", "failed", ...), the wall time and the event fingerprint, then
  // commits the run. REQUIRES: a run is open.
  void end_run(const std::string& status, double wall_s, const std::string& event_fingerprint);

  // Rolls back the open run, if any, leaving the database as before begin_run(). Never throws.
  void abort_run() noexcept;

  bool run_open() const;
  // The open run's id. REQUIRES: run_open().
  int64_t run_id() const;
  const std::string& path() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace servesim::reports
