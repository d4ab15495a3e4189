#include "reports/sqlite_sink.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <bit>
#include <cstdlib>
#include <filesystem>

#include "reports/sqlite_db.h"
#include "core/error.h"

namespace servesim::reports {
namespace {

// Version 6 of the results schema (version 1 had no request.warmup column, version 2 no
// request.cached_tokens and split_tokens columns nor rejected_request table, version 3 no
// request.prefill_instance_id, kv_arrived_ns, interference_ns and recompute_ns columns nor
// request_miss table, version 4 no request.dram_hit_tokens and remote_hit_tokens columns,
// version 5 no iteration_histogram table; see kMigrateFrom1 to kMigrateFrom5):
// the tables, the request_metrics view and the other views. Child tables are keyed by run_id
// first, so one run's rows are contiguous and a run can be deleted (with PRAGMA foreign_keys=ON) by deleting its `run` row.
// Changing any table or view here means bumping SqliteSink::kSchemaVersion.
// The rejected_request table, as version 3 defines it (also created by the migration from 2).
constexpr const char* kRejectedRequestTableSql = R"sql(
CREATE TABLE rejected_request(
  run_id INTEGER NOT NULL REFERENCES run(run_id) ON DELETE CASCADE,
  request_id INTEGER NOT NULL,
  arrival_ns INTEGER NOT NULL,
  prompt_tokens INTEGER NOT NULL,
  output_tokens INTEGER NOT NULL,
  reason TEXT NOT NULL,  -- context | capacity (sim::RejectedRecord)
  PRIMARY KEY (run_id, request_id)
) WITHOUT ROWID;
)sql";

constexpr const char* kSchemaTablesSql = R"sql(
CREATE TABLE meta(
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE run(
  run_id INTEGER PRIMARY KEY,
  scenario TEXT,
  policy TEXT,
  router TEXT,
  workload TEXT,
  seed INTEGER,
  time_unit TEXT NOT NULL DEFAULT 'ns',
  code_rev TEXT,
  started_at TEXT,
  wall_s REAL,
  status TEXT,
  event_fingerprint TEXT
);
CREATE TABLE run_param(
  run_id INTEGER NOT NULL REFERENCES run(run_id) ON DELETE CASCADE,
  key TEXT NOT NULL,
  value TEXT,
  PRIMARY KEY (run_id, key)
) WITHOUT ROWID;
CREATE TABLE request(
  run_id INTEGER NOT NULL REFERENCES run(run_id) ON DELETE CASCADE,
  request_id INTEGER NOT NULL,
  instance_id INTEGER,
  arrival_ns INTEGER,
  first_scheduled_ns INTEGER,
  first_token_ns INTEGER,
  done_ns INTEGER,
  prompt_tokens INTEGER,
  output_tokens INTEGER,
  preemptions INTEGER,
  max_tbt_ns INTEGER,
  tbt_slo_violations INTEGER,
  warmup INTEGER NOT NULL DEFAULT 0,  -- 1: a benchmark warm-up request, excluded from summaries
  cached_tokens INTEGER NOT NULL DEFAULT 0,  -- prompt tokens reused from the prefix cache
  split_tokens INTEGER NOT NULL DEFAULT 0,   -- split requests: tokens before the hand-off
  prefill_instance_id INTEGER NOT NULL DEFAULT -1,  -- instance that computed its first token
  kv_arrived_ns INTEGER NOT NULL DEFAULT -1,  -- its KV reached the next instance; -1: never moved
  interference_ns INTEGER NOT NULL DEFAULT 0,  -- prompt tokens' time in its decode steps
  recompute_ns INTEGER NOT NULL DEFAULT 0,  -- recomputed tokens' time in its decode steps
  dram_hit_tokens INTEGER NOT NULL DEFAULT 0,    -- prompt tokens loaded from CPU DRAM
  remote_hit_tokens INTEGER NOT NULL DEFAULT 0,  -- prompt tokens loaded from the remote store
  PRIMARY KEY (run_id, request_id)
) WITHOUT ROWID;
CREATE TABLE token(
  run_id INTEGER NOT NULL REFERENCES run(run_id) ON DELETE CASCADE,
  request_id INTEGER NOT NULL,
  token_index INTEGER NOT NULL,
  t_ns INTEGER NOT NULL,
  PRIMARY KEY (run_id, request_id, token_index)
) WITHOUT ROWID;
CREATE TABLE tbt_histogram(
  run_id INTEGER NOT NULL REFERENCES run(run_id) ON DELETE CASCADE,
  lower_ns INTEGER NOT NULL,
  upper_ns INTEGER NOT NULL,
  count INTEGER NOT NULL,
  PRIMARY KEY (run_id, lower_ns)
) WITHOUT ROWID;
CREATE TABLE sample(
  run_id INTEGER NOT NULL REFERENCES run(run_id) ON DELETE CASCADE,
  t_ns INTEGER NOT NULL,
  entity TEXT NOT NULL,
  metric TEXT NOT NULL,
  value REAL
);
CREATE INDEX sample_by_series ON sample(run_id, entity, metric, t_ns);
CREATE TABLE scalar(
  run_id INTEGER NOT NULL REFERENCES run(run_id) ON DELETE CASCADE,
  entity TEXT NOT NULL,
  name TEXT NOT NULL,
  value REAL,
  PRIMARY KEY (run_id, entity, name)
) WITHOUT ROWID;

)sql";

// The request_miss table and the miss_breakdown view, as version 4 defines them (also created by
// the migration from 3).
constexpr const char* kRequestMissSql = R"sql(
-- Each SLO objective a finished request missed, with its cause (reports/miss_breakdown.h).
CREATE TABLE request_miss(
  run_id INTEGER NOT NULL REFERENCES run(run_id) ON DELETE CASCADE,
  request_id INTEGER NOT NULL,
  objective TEXT NOT NULL,  -- ttft | tpot | tbt
  cause TEXT NOT NULL,      -- local_prefill | kv_pressure | slow_prefill | prefill_interference |
                            -- scale_up_lag | gpu_budget | undersized_pool
  PRIMARY KEY (run_id, request_id, objective)
) WITHOUT ROWID;
-- Misses per run, objective and cause.
CREATE VIEW miss_breakdown AS
SELECT run_id, objective, cause, count(*) AS requests
FROM request_miss GROUP BY run_id, objective, cause;
)sql";

// The request_metrics view, as version 5 defines it (also created after a migration).
constexpr const char* kRequestMetricsViewSql = R"sql(
-- Per-request latencies in milliseconds. tpot_ms is NULL for single-token requests. Benchmark
-- warm-up requests (warmup = 1) are listed; summaries leave them out.
CREATE VIEW request_metrics AS
SELECT run_id, request_id, instance_id, prefill_instance_id, prompt_tokens, output_tokens,
       preemptions, warmup, cached_tokens, dram_hit_tokens, remote_hit_tokens, split_tokens,
       (first_scheduled_ns - arrival_ns) / 1e6 AS queueing_ms,
       (first_token_ns - arrival_ns) / 1e6 AS ttft_ms,
       CASE WHEN output_tokens > 1
            THEN (done_ns - first_token_ns) / 1e6 / (output_tokens - 1) END AS tpot_ms,
       (done_ns - arrival_ns) / 1e6 AS e2e_ms,
       max_tbt_ns / 1e6 AS max_tbt_ms,
       tbt_slo_violations,
       CASE WHEN kv_arrived_ns >= 0 THEN (kv_arrived_ns - first_token_ns) / 1e6 END AS handoff_ms,
       interference_ns / 1e6 AS interference_ms,
       recompute_ns / 1e6 AS recompute_ms
FROM request;
)sql";

constexpr const char* kSchemaViewsSql = R"sql(

-- Every gap between consecutive tokens of a request (from the optional token table).
CREATE VIEW token_gap AS
SELECT run_id, request_id, token_index, gap_ns, gap_ns / 1e6 AS tbt_ms
FROM (SELECT run_id, request_id, token_index,
             t_ns - LAG(t_ns) OVER (PARTITION BY run_id, request_id
                                    ORDER BY token_index) AS gap_ns
      FROM token)
WHERE gap_ns IS NOT NULL;

-- One line per run with its request count and span.
CREATE VIEW run_overview AS
SELECT run.run_id, scenario, policy, router, workload, seed, status, wall_s,
       count(request.request_id) AS requests,
       (max(request.done_ns) - min(request.arrival_ns)) / 1e9 AS duration_s
FROM run LEFT JOIN request USING (run_id)
GROUP BY run.run_id;
)sql";

// Brings a version 1 database to version 2: the request.warmup column (0 for every existing run).
constexpr const char* kMigrateFrom1 = R"sql(
ALTER TABLE request ADD COLUMN warmup INTEGER NOT NULL DEFAULT 0;
UPDATE meta SET value = '2' WHERE key = 'schema_version';
)sql";

// Brings a version 2 database to version 3: the request.cached_tokens and split_tokens columns (0
// for every existing run); followed by kRejectedRequestTableSql (the table, empty for every
// existing run) and kRequestMetricsViewSql, the view that lists both columns.
constexpr const char* kMigrateFrom2 = R"sql(
ALTER TABLE request ADD COLUMN cached_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE request ADD COLUMN split_tokens INTEGER NOT NULL DEFAULT 0;
DROP VIEW request_metrics;
UPDATE meta SET value = '3' WHERE key = 'schema_version';
)sql";

// Brings a version 3 database to version 4: the request.prefill_instance_id, kv_arrived_ns
// (-1 for every existing run), interference_ns and recompute_ns (0) columns; followed by kRequestMissSql (the
// table, empty for every existing run) and kRequestMetricsViewSql.
constexpr const char* kMigrateFrom3 = R"sql(
ALTER TABLE request ADD COLUMN prefill_instance_id INTEGER NOT NULL DEFAULT -1;
ALTER TABLE request ADD COLUMN kv_arrived_ns INTEGER NOT NULL DEFAULT -1;
ALTER TABLE request ADD COLUMN interference_ns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE request ADD COLUMN recompute_ns INTEGER NOT NULL DEFAULT 0;
DROP VIEW request_metrics;
UPDATE meta SET value = '4' WHERE key = 'schema_version';
)sql";

// The iteration_histogram table, as version 6 defines it (also created by the migration from 5):
// per run, instance and metric ('batch_requests': requests in an iteration's batch,
// 'batch_tokens': tokens it computed), the iterations in each LogHistogram bucket [lower, upper).
constexpr const char* kIterationHistogramSql = R"sql(
CREATE TABLE iteration_histogram(
  run_id INTEGER NOT NULL REFERENCES run(run_id) ON DELETE CASCADE,
  instance_id INTEGER NOT NULL,
  metric TEXT NOT NULL,
  lower INTEGER NOT NULL,
  upper INTEGER NOT NULL,
  count INTEGER NOT NULL,
  PRIMARY KEY (run_id, instance_id, metric, lower)
) WITHOUT ROWID;
)sql";

// Brings a version 5 database to version 6; followed by kIterationHistogramSql (the table, empty
// for every existing run).
constexpr const char* kMigrateFrom5 = R"sql(
UPDATE meta SET value = '6' WHERE key = 'schema_version';
)sql";

// Brings a version 4 database to version 5: the request.dram_hit_tokens and remote_hit_tokens
// columns (0 for every existing run); followed by kRequestMetricsViewSql, which lists them.
constexpr const char* kMigrateFrom4 = R"sql(
ALTER TABLE request ADD COLUMN dram_hit_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE request ADD COLUMN remote_hit_tokens INTEGER NOT NULL DEFAULT 0;
DROP VIEW request_metrics;
UPDATE meta SET value = '5' WHERE key = 'schema_version';
)sql";

}  // namespace

namespace {

// `path` if it can name a results database: not a directory or device, in a directory that
// exists. Throws InputError otherwise, before SQLite opens (or creates) anything.
const std::string& checked_path(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!ec && fs::exists(st) && !fs::is_regular_file(st)) {
    throw InputError(path, 0, "expected a results database file, found a directory or device");
  }
  if (st.type() == fs::file_type::not_found) {
    const fs::path parent = fs::path(path).parent_path();
    if (!parent.empty() && !fs::is_directory(parent, ec)) {
      throw InputError(path, 0, fmt::format("cannot create the results database: no directory {}",
                                            parent.string()));
    }
  }
  return path;
}

}  // namespace

struct SqliteSink::Impl {
  // Forwards the engine's records into the open run.
  class Writer : public sim::RecordListener {
   public:
    explicit Writer(Impl& impl) : impl_(impl) {}
    void on_request(const sim::RequestRecord& record) override { impl_.write_request(record); }
    void on_sample(const sim::SampleRecord& sample) override { impl_.write_sample(sample); }
    void on_rejected(const sim::RejectedRecord& record) override { impl_.write_rejected(record); }

   private:
    Impl& impl_;
  };

  explicit Impl(const std::string& path)
      : db(checked_path(path), SqliteDb::Mode::kReadWriteCreate), writer(*this) {
    if (sqlite3_busy_timeout(db.handle(), kBusyTimeoutMs) != SQLITE_OK) {
      db.fail("setting the busy timeout");
    }
    try {
      // The first read of the file: a file that is not a database (or a corrupted one) fails here.
      Statement probe(db, "SELECT count(*) FROM sqlite_master", "reading the database schema");
      probe.step();
    } catch (const Error&) {
      throw InputError(path, 0, fmt::format("not a readable SQLite database, left untouched ({})",
                                            sqlite3_errmsg(db.handle())));
    }
    // The schema is checked (and a new file's created) before anything else changes the file:
    // a file refused here keeps its bytes and its journal mode.
    prepare_schema();
    {
      // Returns the mode in effect; an in-memory database stays "memory", which is fine.
      Statement wal(db, "PRAGMA journal_mode=WAL", "setting journal_mode=WAL");
      wal.step();
    }
    db.exec("PRAGMA synchronous=NORMAL", "setting synchronous=NORMAL");
    db.exec("PRAGMA foreign_keys=ON", "enabling foreign keys");
    // Bounds the WAL file a long-lived connection leaves behind after a large run.
    db.exec("PRAGMA journal_size_limit=67108864", "setting journal_size_limit");

    insert_run = std::make_unique<Statement>(
        db,
        "INSERT INTO run(scenario, policy, router, workload, seed, code_rev, started_at, status) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, 'running')",
        "inserting the run row");
    update_run = std::make_unique<Statement>(
        db, "UPDATE run SET status = ?, wall_s = ?, event_fingerprint = ? WHERE run_id = ?",
        "finishing the run row");
    insert_param = std::make_unique<Statement>(
        db, "INSERT INTO run_param(run_id, key, value) VALUES (?, ?, ?)", "inserting run_param");
    insert_request = std::make_unique<Statement>(
        db,
        "INSERT INTO request(run_id, request_id, instance_id, arrival_ns, first_scheduled_ns, "
        "first_token_ns, done_ns, prompt_tokens, output_tokens, preemptions, max_tbt_ns, "
        "tbt_slo_violations, warmup, cached_tokens, split_tokens, prefill_instance_id, "
        "kv_arrived_ns, interference_ns, recompute_ns, dram_hit_tokens, remote_hit_tokens) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        "inserting a request row");
    insert_token = std::make_unique<Statement>(
        db, "INSERT INTO token(run_id, request_id, token_index, t_ns) VALUES (?, ?, ?, ?)",
        "inserting a token row");
    insert_sample = std::make_unique<Statement>(
        db, "INSERT INTO sample(run_id, t_ns, entity, metric, value) VALUES (?, ?, ?, ?, ?)",
        "inserting a sample row");
    insert_scalar = std::make_unique<Statement>(
        db, "INSERT INTO scalar(run_id, entity, name, value) VALUES (?, ?, ?, ?)",
        "inserting a scalar row");
    insert_rejected = std::make_unique<Statement>(
        db,
        "INSERT INTO rejected_request(run_id, request_id, arrival_ns, prompt_tokens, "
        "output_tokens, reason) VALUES (?, ?, ?, ?, ?, ?)",
        "inserting a rejected_request row");
    insert_miss = std::make_unique<Statement>(
        db,
        "INSERT INTO request_miss(run_id, request_id, objective, cause) VALUES (?, ?, ?, ?)",
        "inserting a request_miss row");
    insert_iteration_bin = std::make_unique<Statement>(
        db,
        "INSERT INTO iteration_histogram(run_id, instance_id, metric, lower, upper, count) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        "inserting an iteration_histogram row");
    insert_bin = std::make_unique<Statement>(
        db, "INSERT INTO tbt_histogram(run_id, lower_ns, upper_ns, count) VALUES (?, ?, ?, ?)",
        "inserting a tbt_histogram row");
  }

  ~Impl() { abort(); }

  // Creates the schema in a new database or checks the version of an existing one. Runs in an
  // IMMEDIATE transaction so that two processes creating the same file do not race.
  void prepare_schema() {
    db.exec("BEGIN IMMEDIATE", "locking the database to check its schema");
    try {
      Statement tables(db,
                       "SELECT count(*), coalesce(sum(name = 'meta'), 0) FROM sqlite_master "
                       "WHERE type = 'table'",
                       "reading the database schema");
      tables.step();
      const int64_t table_count = tables.column_int64(0);
      const bool has_meta = tables.column_int64(1) != 0;
      if (table_count == 0) {
        db.exec(std::string(kSchemaTablesSql) + kRejectedRequestTableSql + kRequestMissSql +
                    kIterationHistogramSql + kRequestMetricsViewSql + kSchemaViewsSql,
                "creating the schema");
        Statement version(db, "INSERT INTO meta(key, value) VALUES ('schema_version', ?)",
                          "writing the schema version");
        version.bind(1, std::string_view(std::to_string(kSchemaVersion))).run();
      } else if (!has_meta) {
        throw InputError(db.path(), 0,
                         "not a servesim results database (it has tables but no meta table); "
                         "left untouched, give another --db file");
      } else {
        Statement version(db, "SELECT value FROM meta WHERE key = 'schema_version'",
                          "reading the schema version");
        if (!version.step()) {
          throw InputError(db.path(), 0,
                           "not a servesim results database (meta has no schema_version); left "
                           "untouched, give another --db file");
        }
        std::string found = version.column_text(0);
        char* end = nullptr;
        const long found_number = std::strtol(found.c_str(), &end, 10);
        if (end != found.c_str() && *end == '\0' && found_number > kSchemaVersion) {
          throw InputError(db.path(), 0,
                           fmt::format("written by a newer servesim (results schema version {}; "
                                       "this build reads and writes version {}); left untouched, "
                                       "upgrade servesim or give another --db file",
                                       found, kSchemaVersion));
        }
        if (found == "1") {
          db.exec(kMigrateFrom1, "migrating the schema from version 1 to 2");
          found = "2";
        }
        if (found == "2") {
          db.exec(std::string(kMigrateFrom2) + kRejectedRequestTableSql + kRequestMetricsViewSql,
                  "migrating the schema from version 2 to 3");
          found = "3";
        }
        if (found == "3") {
          db.exec(std::string(kMigrateFrom3) + kRequestMissSql + kRequestMetricsViewSql,
                  "migrating the schema from version 3 to 4");
          found = "4";
        }
        if (found == "4") {
          db.exec(std::string(kMigrateFrom4) + kRequestMetricsViewSql,
                  "migrating the schema from version 4 to 5");
          found = "5";
        }
        if (found == "5") {
          db.exec(std::string(kMigrateFrom5) + kIterationHistogramSql,
                  "migrating the schema from version 5 to 6");
          found = "6";
        }
        if (found != std::to_string(kSchemaVersion)) {
          throw InputError(db.path(), 0,
                           fmt::format("results database has schema_version {}, this build reads "
                                       "and writes version {}; left untouched",
                                       found, kSchemaVersion));
        }
      }
      db.exec("COMMIT", "committing the schema");
    } catch (...) {
      db.exec_noexcept("ROLLBACK");
      throw;
    }
  }

  void require_open(std::string_view what) const {
    if (!open) {
      throw Error(
          fmt::format("{}: no run is open (while {}); call begin_run first", db.path(), what));
    }
  }

  // Runs `f` inside the open run; on any exception the run is rolled back before rethrowing.
  template <typename F>
  void guarded(std::string_view what, F&& f) {
    require_open(what);
    try {
      f();
    } catch (...) {
      abort();
      throw;
    }
  }

  int64_t begin(const RunInfo& info,
                const std::vector<std::pair<std::string, std::string>>& params) {
    if (open) {
      throw Error(fmt::format("{}: run {} is still open; call end_run or abort_run first",
                              db.path(), run_id));
    }
    db.exec("BEGIN IMMEDIATE", "beginning a run");
    open = true;
    guarded("beginning a run", [&] {
      insert_run->bind(1, std::string_view(info.scenario))
          .bind(2, std::string_view(info.policy))
          .bind(3, std::string_view(info.router))
          .bind(4, std::string_view(info.workload))
          .bind(5, std::bit_cast<int64_t>(info.seed))
          .bind(6, std::string_view(info.code_rev))
          .bind(7, std::string_view(info.started_at))
          .run();
      run_id = sqlite3_last_insert_rowid(db.handle());
      insert_param->bind(1, run_id);
      for (const auto& [key, value] : params) {
        insert_param->bind(2, std::string_view(key)).bind(3, std::string_view(value)).run();
      }
    });
    return run_id;
  }

  void write_request(const sim::RequestRecord& r) {
    guarded("writing a request record", [&] {
      insert_request->bind(1, run_id)
          .bind(2, static_cast<int64_t>(r.request_id))
          .bind(3, static_cast<int64_t>(r.instance_id))
          .bind(4, r.arrival_ns)
          .bind(5, r.first_scheduled_ns)
          .bind(6, r.first_token_ns)
          .bind(7, r.done_ns)
          .bind(8, r.prompt_tokens)
          .bind(9, r.output_tokens)
          .bind(10, static_cast<int64_t>(r.preemptions))
          .bind(11, r.max_tbt_ns)
          .bind(12, r.tbt_slo_violations)
          .bind(13, static_cast<int64_t>(r.warmup ? 1 : 0))
          .bind(14, r.cached_tokens)
          .bind(15, r.split_tokens)
          .bind(16, static_cast<int64_t>(r.prefill_instance_id))
          .bind(17, r.kv_arrived_ns)
          .bind(18, r.interference_ns)
          .bind(19, r.recompute_ns)
          .bind(20, static_cast<int64_t>(r.dram_hit_tokens))
          .bind(21, static_cast<int64_t>(r.remote_hit_tokens))
          .run();
      if (!r.token_times_ns.empty()) {
        insert_token->bind(1, run_id).bind(2, static_cast<int64_t>(r.request_id));
        for (size_t i = 0; i < r.token_times_ns.size(); ++i) {
          insert_token->bind(3, static_cast<int64_t>(i)).bind(4, r.token_times_ns[i]).run();
        }
      }
    });
  }

  void write_rejected(const sim::RejectedRecord& r) {
    guarded("writing a rejected request", [&] {
      insert_rejected->bind(1, run_id)
          .bind(2, static_cast<int64_t>(r.request_id))
          .bind(3, r.arrival_ns)
          .bind(4, r.prompt_tokens)
          .bind(5, r.output_tokens)
          .bind(6, std::string_view(r.reason))
          .run();
    });
  }

  void write_sample(const sim::SampleRecord& s) {
    guarded("writing a sample record", [&] {
      insert_sample->bind(1, run_id)
          .bind(2, s.t_ns)
          .bind(3, std::string_view(s.entity))
          .bind(4, std::string_view(s.metric))
          .bind(5, s.value)
          .run();
    });
  }

  void write_scalar(const std::string& entity, const std::string& name, double value) {
    guarded("writing a scalar", [&] {
      insert_scalar->bind(1, run_id)
          .bind(2, std::string_view(entity))
          .bind(3, std::string_view(name))
          .bind(4, value)
          .run();
    });
  }

  void write_miss(const RequestMiss& m) {
    guarded("writing a request miss", [&] {
      insert_miss->bind(1, run_id)
          .bind(2, static_cast<int64_t>(m.request_id))
          .bind(3, std::string_view(objective_name(m.objective)))
          .bind(4, std::string_view(miss_cause_name(m.cause)))
          .run();
    });
  }

  void write_histogram(const LogHistogram& h) {
    guarded("writing the TBT histogram", [&] {
      insert_bin->bind(1, run_id);
      for (const LogHistogram::Bin& bin : h.bins()) {
        insert_bin->bind(2, bin.lower).bind(3, bin.upper).bind(4, bin.count).run();
      }
    });
  }

  void write_iteration_histogram(int32_t instance, std::string_view metric,
                                 const std::vector<LogHistogram::Bin>& bins) {
    guarded("writing an iteration histogram", [&] {
      insert_iteration_bin->bind(1, run_id).bind(2, int64_t{instance}).bind(3, metric);
      for (const LogHistogram::Bin& bin : bins) {
        insert_iteration_bin->bind(4, bin.lower).bind(5, bin.upper).bind(6, bin.count).run();
      }
    });
  }

  void end(const std::string& status, double wall_s, const std::string& fingerprint) {
    guarded("ending the run", [&] {
      update_run->bind(1, std::string_view(status))
          .bind(2, wall_s)
          .bind(3, std::string_view(fingerprint))
          .bind(4, run_id)
          .run();
      db.exec("COMMIT", "committing the run");
      open = false;
    });
  }

  void abort() noexcept {
    if (open) {
      // Some failures (disk full, I/O errors) already rolled the transaction back, in which case
      // this ROLLBACK fails harmlessly.
      db.exec_noexcept("ROLLBACK");
      open = false;
    }
  }

  SqliteDb db;
  Writer writer;
  std::unique_ptr<Statement> insert_run;
  std::unique_ptr<Statement> update_run;
  std::unique_ptr<Statement> insert_param;
  std::unique_ptr<Statement> insert_request;
  std::unique_ptr<Statement> insert_token;
  std::unique_ptr<Statement> insert_sample;
  std::unique_ptr<Statement> insert_scalar;
  std::unique_ptr<Statement> insert_bin;
  std::unique_ptr<Statement> insert_iteration_bin;
  std::unique_ptr<Statement> insert_rejected;
  std::unique_ptr<Statement> insert_miss;
  bool open = false;
  int64_t run_id = -1;
};

SqliteSink::SqliteSink(const std::string& path) : impl_(std::make_unique<Impl>(path)) {}

SqliteSink::~SqliteSink() = default;

int64_t SqliteSink::begin_run(const RunInfo& info,
                              const std::vector<std::pair<std::string, std::string>>& params) {
  return impl_->begin(info, params);
}

sim::RecordListener& SqliteSink::listener() { return impl_->writer; }

void SqliteSink::add_scalar(const std::string& entity, const std::string& name, double value) {
  impl_->write_scalar(entity, name, value);
}

void SqliteSink::add_tbt_histogram(const LogHistogram& tbt_ns) { impl_->write_histogram(tbt_ns); }

void SqliteSink::add_iteration_histogram(int32_t instance, const std::string& metric,
                                         const std::vector<LogHistogram::Bin>& bins) {
  impl_->write_iteration_histogram(instance, metric, bins);
}

void SqliteSink::add_misses(const std::vector<RequestMiss>& misses) {
  for (const RequestMiss& m : misses) impl_->write_miss(m);
}

void SqliteSink::end_run(const std::string& status, double wall_s,
                         const std::string& event_fingerprint) {
  impl_->end(status, wall_s, event_fingerprint);
}

void SqliteSink::abort_run() noexcept { impl_->abort(); }

bool SqliteSink::run_open() const { return impl_->open; }

int64_t SqliteSink::run_id() const {
  impl_->require_open("reading the run id");
  return impl_->run_id;
}

const std::string& SqliteSink::path() const { return impl_->db.path(); }

}  // namespace servesim::reports
