#include "reports/sqlite_sink.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>

#include "reports/query.h"
#include "reports_temp_dir.h"
#include "core/error.h"

namespace servesim::reports {
namespace {

using Rows = std::vector<std::vector<std::string>>;

sim::RequestRecord make_record(int64_t id, int32_t instance, int64_t arrival, int64_t output) {
  sim::RequestRecord r;
  r.request_id = id;
  r.instance_id = instance;
  r.arrival_ns = arrival;
  r.first_scheduled_ns = arrival + 1'000;
  r.first_token_ns = arrival + 2'000'000;
  r.done_ns = arrival + 2'000'000 + (output - 1) * 500'000;
  r.prompt_tokens = 10 * id + 3;
  r.output_tokens = output;
  r.preemptions = static_cast<int32_t>(id % 2);
  r.max_tbt_ns = 750'000;
  r.tbt_slo_violations = id;
  return r;
}

Rows query_rows(const std::string& db, const std::string& sql) { return run_query(db, sql).rows; }

// Runs SQL on the file directly, to set up databases the sink would never write.
void raw_exec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* message = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message);
  const std::string text = message != nullptr ? message : "";
  sqlite3_free(message);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << text;
}

std::string file_bytes(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

class SqliteSinkTest : public testing::TempDirTest {};

TEST_F(SqliteSinkTest, RoundTripsTwoRuns) {
  const std::string db = path("results.db");
  LogHistogram hist1;
  hist1.add(5, 3);
  hist1.add(1'000'000, 2);
  {
    SqliteSink sink(db);
    EXPECT_FALSE(sink.run_open());

    const int64_t run1 =
        sink.begin_run({.scenario = "scenarios/a.json",
                        .policy = "vllm",
                        .router = "round_robin",
                        .workload = "azure_conv 0s+60s",
                        .code_rev = "0.1.0",
                        .started_at = "2024-05-01T10:00:00Z",
                        .seed = 7},
                       {{"policy.max_num_seqs", "256"}, {"cluster.instances", "2"}});
    EXPECT_EQ(run1, 1);
    EXPECT_TRUE(sink.run_open());
    EXPECT_EQ(sink.run_id(), 1);
    sim::RecordListener& out = sink.listener();
    sim::RequestRecord r0 = make_record(0, 1, 100, 3);
    r0.token_times_ns = {2'000'100, 2'500'100, 3'000'100};
    out.on_request(r0);
    sim::RequestRecord r1 = make_record(1, 0, 5'000, 1);  // no token times: no token rows
    r1.cached_tokens = 8;
    r1.split_tokens = 5;
    out.on_request(r1);
    out.on_sample({.t_ns = 0, .entity = "instance/0", .metric = "waiting", .value = 2});
    out.on_sample(
        {.t_ns = 100'000'000, .entity = "cluster", .metric = "kv_utilization", .value = 0.125});
    sink.add_scalar("run", "ttft_p99_s", 0.1);
    sink.add_scalar("run", "attainment_tbt", std::numeric_limits<double>::quiet_NaN());
    sink.add_scalar("instance/1", "busy_fraction", 1.0 / 3.0);
    sink.add_tbt_histogram(hist1);
    sink.end_run("ok", 1.25, "9f86d081884c7d65");
    EXPECT_FALSE(sink.run_open());

    const int64_t run2 = sink.begin_run({.scenario = "b",
                                         .policy = "sarathi",
                                         .router = "lor",
                                         .workload = "w2",
                                         .code_rev = "0.1.0",
                                         .started_at = "2024-05-01T10:01:00Z",
                                         .seed = std::numeric_limits<uint64_t>::max()},
                                        {{"policy.chunk", "512"}});
    EXPECT_EQ(run2, 2);
    sim::RequestRecord r2 = make_record(0, 3, 7, 2);
    r2.token_times_ns = {2'000'007, 2'500'007};
    sink.listener().on_request(r2);
    sink.add_scalar("run", "ttft_p99_s", 0.2);
    sink.end_run("failed", 0.5, "");
  }

  EXPECT_EQ(query_rows(db, "SELECT key, value FROM meta"), (Rows{{"schema_version", "6"}}));
  EXPECT_EQ(query_rows(db, "SELECT * FROM run ORDER BY run_id"),
            (Rows{{"1", "scenarios/a.json", "vllm", "round_robin", "azure_conv 0s+60s", "7", "ns",
                   "0.1.0", "2024-05-01T10:00:00Z", "1.25", "ok", "9f86d081884c7d65"},
                  {"2", "b", "sarathi", "lor", "w2", "-1", "ns", "0.1.0", "2024-05-01T10:01:00Z",
                   "0.5", "failed", ""}}));
  EXPECT_EQ(query_rows(db, "SELECT * FROM run_param ORDER BY run_id, key"),
            (Rows{{"1", "cluster.instances", "2"},
                  {"1", "policy.max_num_seqs", "256"},
                  {"2", "policy.chunk", "512"}}));
  EXPECT_EQ(
      query_rows(db, "SELECT * FROM request ORDER BY run_id, request_id"),
      (Rows{{"1", "0", "1", "100", "1100", "2000100", "3000100", "3", "3", "0", "750000", "0", "0", "0", "0",
             "-1", "-1", "0", "0", "0", "0"},
            {"1", "1", "0", "5000", "6000", "2005000", "2005000", "13", "1", "1", "750000", "1", "0", "8", "5",
             "-1", "-1", "0", "0", "0", "0"},
            {"2", "0", "3", "7", "1007", "2000007", "2500007", "3", "2", "0", "750000", "0", "0", "0", "0",
             "-1", "-1", "0", "0", "0", "0"}}));
  EXPECT_EQ(query_rows(db, "SELECT * FROM token ORDER BY run_id, request_id, token_index"),
            (Rows{{"1", "0", "0", "2000100"},
                  {"1", "0", "1", "2500100"},
                  {"1", "0", "2", "3000100"},
                  {"2", "0", "0", "2000007"},
                  {"2", "0", "1", "2500007"}}));
  EXPECT_EQ(query_rows(db, "SELECT * FROM sample ORDER BY run_id, t_ns"),
            (Rows{{"1", "0", "instance/0", "waiting", "2.0"},
                  {"1", "100000000", "cluster", "kv_utilization", "0.125"}}));
  // NaN has no SQLite representation and reads back as NULL; reals keep every bit.
  EXPECT_EQ(query_rows(db, "SELECT * FROM scalar ORDER BY run_id, entity, name"),
            (Rows{{"1", "instance/1", "busy_fraction", "0.3333333333333333"},
                  {"1", "run", "attainment_tbt", "NULL"},
                  {"1", "run", "ttft_p99_s", "0.1"},
                  {"2", "run", "ttft_p99_s", "0.2"}}));
  EXPECT_EQ(
      std::stod(query_rows(db, "SELECT value FROM scalar WHERE name = 'busy_fraction'")[0][0]),
      1.0 / 3.0);

  const auto bins = hist1.bins();
  ASSERT_EQ(bins.size(), 2u);
  EXPECT_EQ(query_rows(db, "SELECT * FROM tbt_histogram ORDER BY run_id, lower_ns"),
            (Rows{{"1", "5", "6", "3"},
                  {"1", std::to_string(bins[1].lower), std::to_string(bins[1].upper), "2"}}));
  EXPECT_LE(bins[1].lower, 1'000'000);
  EXPECT_GT(bins[1].upper, 1'000'000);

  // Views.
  EXPECT_EQ(query_rows(db,
                       "SELECT run_id, request_id, queueing_ms, ttft_ms, tpot_ms, e2e_ms, "
                       "max_tbt_ms FROM request_metrics ORDER BY run_id, request_id"),
            (Rows{{"1", "0", "0.001", "2.0", "0.5", "3.0", "0.75"},
                  {"1", "1", "0.001", "2.0", "NULL", "2.0", "0.75"},
                  {"2", "0", "0.001", "2.0", "0.5", "2.5", "0.75"}}));
  EXPECT_EQ(query_rows(db, "SELECT * FROM token_gap ORDER BY run_id, request_id, token_index"),
            (Rows{{"1", "0", "1", "500000", "0.5"},
                  {"1", "0", "2", "500000", "0.5"},
                  {"2", "0", "1", "500000", "0.5"}}));
  EXPECT_EQ(query_rows(db, "SELECT run_id, status, requests FROM run_overview ORDER BY run_id"),
            (Rows{{"1", "ok", "2"}, {"2", "failed", "1"}}));

  // Reopening appends further runs.
  {
    SqliteSink sink(db);
    EXPECT_EQ(sink.begin_run({.scenario = "c"}, {}), 3);
    sink.end_run("ok", 0, "");
  }
  EXPECT_EQ(query_rows(db, "SELECT count(*) FROM run"), (Rows{{"3"}}));
}

TEST_F(SqliteSinkTest, DestroyedSinkRollsBackTheOpenRun) {
  const std::string db = path("results.db");
  {
    SqliteSink sink(db);
    sink.begin_run({.scenario = "kept"}, {{"k", "v"}});
    sink.listener().on_request(make_record(0, 0, 0, 2));
    sink.end_run("ok", 1, "");
  }
  {
    SqliteSink sink(db);
    EXPECT_EQ(sink.begin_run({.scenario = "lost"}, {{"k", "v2"}}), 2);
    sim::RequestRecord r = make_record(0, 0, 0, 2);
    r.token_times_ns = {1, 2};
    sink.listener().on_request(r);
    sink.listener().on_sample({.t_ns = 1, .entity = "cluster", .metric = "waiting", .value = 1});
    sink.add_scalar("run", "x", 1);
    LogHistogram h;
    h.add(10);
    sink.add_tbt_histogram(h);
    // Readers are not blocked by the open run and do not see it.
    EXPECT_EQ(query_rows(db, "SELECT count(*) FROM run"), (Rows{{"1"}}));
    EXPECT_EQ(query_rows(db, "SELECT count(*) FROM request"), (Rows{{"1"}}));
    // Destroyed without end_run, as when an exception unwinds through the caller.
  }
  EXPECT_EQ(query_rows(db, "SELECT run_id, scenario, status FROM run"),
            (Rows{{"1", "kept", "ok"}}));
  EXPECT_EQ(query_rows(db,
                       "SELECT (SELECT count(*) FROM run_param WHERE run_id = 2), "
                       "(SELECT count(*) FROM request WHERE run_id = 2), "
                       "(SELECT count(*) FROM token), (SELECT count(*) FROM sample), "
                       "(SELECT count(*) FROM scalar), (SELECT count(*) FROM tbt_histogram), "
                       "(SELECT count(*) FROM request WHERE run_id = 1)"),
            (Rows{{"0", "0", "0", "0", "0", "0", "1"}}));
}

TEST_F(SqliteSinkTest, FailedWriteRollsBackAndSinkStaysUsable) {
  const std::string db = path("results.db");
  SqliteSink sink(db);
  sink.begin_run({.scenario = "first"}, {});
  sink.end_run("ok", 1, "");

  sink.begin_run({.scenario = "broken"}, {});
  sink.listener().on_request(make_record(5, 0, 0, 2));
  const std::string message =
      error_of([&] { sink.listener().on_request(make_record(5, 0, 0, 2)); });
  EXPECT_NE(message.find(db + ": sqlite error: UNIQUE constraint failed: request.run_id, "
                              "request.request_id (while inserting a request row)"),
            std::string::npos)
      << message;
  EXPECT_FALSE(sink.run_open());
  EXPECT_EQ(query_rows(db, "SELECT count(*) FROM request"), (Rows{{"0"}}));

  // Nothing may be written outside a run.
  EXPECT_NE(error_of([&] { sink.add_scalar("run", "x", 1); }).find("no run is open"),
            std::string::npos);
  EXPECT_THROW(sink.listener().on_sample({}), Error);
  EXPECT_THROW(sink.end_run("ok", 0, ""), Error);

  // Duplicate params fail begin_run cleanly too.
  EXPECT_THROW(sink.begin_run({.scenario = "dup"}, {{"a", "1"}, {"a", "2"}}), Error);
  EXPECT_FALSE(sink.run_open());

  EXPECT_EQ(sink.begin_run({.scenario = "second"}, {}), 2);
  EXPECT_THROW(sink.begin_run({.scenario = "nested"}, {}), Error);
  sink.abort_run();
  EXPECT_FALSE(sink.run_open());
  EXPECT_EQ(sink.begin_run({.scenario = "third"}, {}), 2);
  sink.end_run("ok", 1, "");
  EXPECT_EQ(query_rows(db, "SELECT run_id, scenario FROM run ORDER BY run_id"),
            (Rows{{"1", "first"}, {"2", "third"}}));
  EXPECT_EQ(query_rows(db, "SELECT count(*) FROM request"), (Rows{{"0"}}));
}

TEST_F(SqliteSinkTest, RejectsAFileThatIsNotADatabase) {
  const std::string file = path("notes.db");
  {
    std::ofstream out(file);
    for (int i = 0; i < 20; ++i) {
      out << "these are plain text notes, not a SQLite database\n";
    }
  }
  const std::string before = file_bytes(file);
  const std::string message = error_of([&] { SqliteSink sink(file); });
  EXPECT_EQ(message, file + ": not a readable SQLite database, left untouched (file is not a "
                            "database)");
  EXPECT_EQ(file_bytes(file), before);
  EXPECT_FALSE(std::filesystem::exists(file + "-wal"));
}

TEST_F(SqliteSinkTest, RejectsACorruptedDatabaseLeavingItUntouched) {
  const std::string file = path("corrupt.db");
  { SqliteSink sink(file); }
  std::string bytes = file_bytes(file);
  ASSERT_GT(bytes.size(), 200u);
  for (size_t i = 100; i < bytes.size(); ++i) bytes[i] = static_cast<char>(0xA5);
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  const std::string message = error_of([&] { SqliteSink sink(file); });
  EXPECT_EQ(message.rfind(file + ": not a readable SQLite database, left untouched", 0), 0u)
      << message;
  EXPECT_EQ(file_bytes(file), bytes);
}

TEST_F(SqliteSinkTest, RejectsADirectory) {
  EXPECT_EQ(error_of([&] { SqliteSink sink(dir_.string()); }),
            dir_.string() + ": expected a results database file, found a directory or device");
}

TEST_F(SqliteSinkTest, RejectsAnotherSchemaVersion) {
  const std::string file = path("old.db");
  { SqliteSink sink(file); }
  raw_exec(file, "UPDATE meta SET value = '7' WHERE key = 'schema_version'");
  const std::string before = file_bytes(file);
  EXPECT_EQ(error_of([&] { SqliteSink sink(file); }),
            file +
                ": written by a newer servesim (results schema version 7; this build reads and "
                "writes version 6); left untouched, upgrade servesim or give another --db file");
  EXPECT_EQ(file_bytes(file), before);
  raw_exec(file, "UPDATE meta SET value = 'zero' WHERE key = 'schema_version'");
  EXPECT_EQ(error_of([&] { SqliteSink sink(file); }),
            file +
                ": results database has schema_version zero, this build reads and writes "
                "version 6; left untouched");
}

// A version 1 database (no request.warmup column) is migrated in place: its runs keep their rows,
// read as measured requests, and new runs land beside them.
TEST_F(SqliteSinkTest, MigratesAVersion1DatabaseKeepingItsRuns) {
  const std::string file = path("v1.db");
  {
    SqliteSink sink(file);
    sink.begin_run({.scenario = "a", .policy = "coloc", .router = "rr", .workload = "w",
                    .code_rev = "0.1.0", .started_at = "2024-05-01T10:00:00Z", .seed = 1},
                   {});
    sink.listener().on_request(make_record(0, 3, 100, 1));
    sink.end_run("ok", 1.0, "");
  }
  // Make it a version 1 file: the column and the view as version 1 had them.
  raw_exec(file,
           "DROP TABLE iteration_histogram; DROP TABLE rejected_request; DROP VIEW miss_breakdown; DROP TABLE request_miss; "
           "DROP VIEW request_metrics; ALTER TABLE request DROP COLUMN warmup; "
           "ALTER TABLE request DROP COLUMN prefill_instance_id; "
           "ALTER TABLE request DROP COLUMN kv_arrived_ns; "
           "ALTER TABLE request DROP COLUMN interference_ns; "
           "ALTER TABLE request DROP COLUMN recompute_ns; "
           "ALTER TABLE request DROP COLUMN dram_hit_tokens; "
           "ALTER TABLE request DROP COLUMN remote_hit_tokens; "
           "ALTER TABLE request DROP COLUMN cached_tokens; "
           "ALTER TABLE request DROP COLUMN split_tokens; "
           "CREATE VIEW request_metrics AS SELECT run_id, request_id FROM request; "
           "UPDATE meta SET value = '1' WHERE key = 'schema_version'");
  {
    SqliteSink sink(file);
    sink.begin_run({.scenario = "b", .policy = "coloc", .router = "rr", .workload = "w",
                    .code_rev = "0.1.0", .started_at = "2024-05-01T10:01:00Z", .seed = 2},
                   {});
    sim::RequestRecord warm = make_record(0, 3, 7, 2);
    warm.warmup = true;
    sink.listener().on_request(warm);
    sink.end_run("ok", 1.0, "");
  }
  EXPECT_EQ(query_rows(file, "SELECT value FROM meta WHERE key = 'schema_version'"),
            (Rows{{"6"}}));
  EXPECT_EQ(query_rows(file, "SELECT run_id, request_id, warmup FROM request_metrics "
                           "ORDER BY run_id"),
            (Rows{{"1", "0", "0"}, {"2", "0", "1"}}));
}

// A version 3 database (no miss columns nor request_miss table) is migrated in place: its
// requests read as never moved, without interference, and new runs store their misses.
TEST_F(SqliteSinkTest, MigratesAVersion3DatabaseAndStoresMisses) {
  const std::string file = path("v3.db");
  {
    SqliteSink sink(file);
    sink.begin_run({.scenario = "a"}, {});
    sink.listener().on_request(make_record(0, 3, 100, 1));
    sink.end_run("ok", 1.0, "");
  }
  raw_exec(file,
           "DROP TABLE iteration_histogram; "
           "DROP VIEW miss_breakdown; DROP TABLE request_miss; DROP VIEW request_metrics; "
           "ALTER TABLE request DROP COLUMN prefill_instance_id; "
           "ALTER TABLE request DROP COLUMN kv_arrived_ns; "
           "ALTER TABLE request DROP COLUMN interference_ns; "
           "ALTER TABLE request DROP COLUMN recompute_ns; "
           "ALTER TABLE request DROP COLUMN dram_hit_tokens; "
           "ALTER TABLE request DROP COLUMN remote_hit_tokens; "
           "CREATE VIEW request_metrics AS SELECT run_id, request_id FROM request; "
           "UPDATE meta SET value = '3' WHERE key = 'schema_version'");
  {
    SqliteSink sink(file);
    sink.begin_run({.scenario = "b"}, {});
    sim::RequestRecord moved = make_record(0, 3, 7, 2);
    moved.prefill_instance_id = 0;
    moved.kv_arrived_ns = moved.first_token_ns + 2'000'000;
    moved.interference_ns = 5'000'000;
    sink.listener().on_request(moved);
    sink.add_misses({{0, Objective::kTtft, MissCause::kScaleUpLag},
                     {0, Objective::kTpot, MissCause::kKvPressure}});
    sink.end_run("ok", 1.0, "");
  }
  EXPECT_EQ(query_rows(file, "SELECT value FROM meta WHERE key = 'schema_version'"),
            (Rows{{"6"}}));
  EXPECT_EQ(query_rows(file, "SELECT run_id, prefill_instance_id, handoff_ms, interference_ms "
                             "FROM request_metrics ORDER BY run_id"),
            (Rows{{"1", "-1", "NULL", "0.0"}, {"2", "0", "2.0", "5.0"}}));
  EXPECT_EQ(query_rows(file, "SELECT run_id, objective, cause, requests FROM miss_breakdown "
                             "ORDER BY objective"),
            (Rows{{"2", "tpot", "kv_pressure", "1"}, {"2", "ttft", "scale_up_lag", "1"}}));
}

// A version 4 database (no tier hit columns) is migrated in place: its requests read as loading
// nothing from the lower KV tiers, and new runs store their tier hits.
TEST_F(SqliteSinkTest, MigratesAVersion4DatabaseAndStoresTierHits) {
  const std::string file = path("v4.db");
  {
    SqliteSink sink(file);
    sink.begin_run({.scenario = "a"}, {});
    sink.listener().on_request(make_record(0, 3, 100, 1));
    sink.end_run("ok", 1.0, "");
  }
  raw_exec(file,
           "DROP TABLE iteration_histogram; DROP VIEW request_metrics; "
           "ALTER TABLE request DROP COLUMN dram_hit_tokens; "
           "ALTER TABLE request DROP COLUMN remote_hit_tokens; "
           "CREATE VIEW request_metrics AS SELECT run_id, request_id FROM request; "
           "UPDATE meta SET value = '4' WHERE key = 'schema_version'");
  {
    SqliteSink sink(file);
    sink.begin_run({.scenario = "b"}, {});
    sim::RequestRecord loaded = make_record(0, 3, 7, 2);
    loaded.cached_tokens = 32;
    loaded.dram_hit_tokens = 48;
    loaded.remote_hit_tokens = 16;
    sink.listener().on_request(loaded);
    sink.end_run("ok", 1.0, "");
  }
  EXPECT_EQ(query_rows(file, "SELECT value FROM meta WHERE key = 'schema_version'"),
            (Rows{{"6"}}));
  EXPECT_EQ(query_rows(file, "SELECT run_id, cached_tokens, dram_hit_tokens, remote_hit_tokens "
                             "FROM request_metrics ORDER BY run_id"),
            (Rows{{"1", "0", "0", "0"}, {"2", "32", "48", "16"}}));
}

// A version 5 database (no iteration_histogram table) is migrated in place: its runs have no
// iteration distributions, and new runs store theirs per instance and metric.
TEST_F(SqliteSinkTest, MigratesAVersion5DatabaseAndStoresIterationHistograms) {
  const std::string file = path("v5.db");
  {
    SqliteSink sink(file);
    sink.begin_run({.scenario = "a"}, {});
    sink.end_run("ok", 1.0, "");
  }
  raw_exec(file,
           "DROP TABLE iteration_histogram; "
           "UPDATE meta SET value = '5' WHERE key = 'schema_version'");
  {
    SqliteSink sink(file);
    sink.begin_run({.scenario = "b"}, {});
    LogHistogram requests, tokens;
    requests.add(3, 4);
    requests.add(8);
    tokens.add(3, 4);
    tokens.add(1000);  // above 128: a bucket of 4 values
    sink.add_iteration_histogram(1, "batch_requests", requests.bins());
    sink.add_iteration_histogram(1, "batch_tokens", tokens.bins());
    sink.end_run("ok", 1.0, "");
  }
  EXPECT_EQ(query_rows(file, "SELECT value FROM meta WHERE key = 'schema_version'"),
            (Rows{{"6"}}));
  EXPECT_EQ(query_rows(file, "SELECT run_id, instance_id, metric, lower, upper, count FROM "
                             "iteration_histogram ORDER BY metric, lower"),
            (Rows{{"2", "1", "batch_requests", "3", "4", "4"},
                  {"2", "1", "batch_requests", "8", "9", "1"},
                  {"2", "1", "batch_tokens", "3", "4", "4"},
                  {"2", "1", "batch_tokens", "1000", "1004", "1"}}));
}

// A run that fails while writing its iteration histograms leaves nothing of itself behind.
TEST_F(SqliteSinkTest, IterationHistogramsAreWrittenInTheRunTransaction) {
  const std::string file = path("iter.db");
  SqliteSink sink(file);
  sink.begin_run({.scenario = "a"}, {});
  LogHistogram h;
  h.add(5);
  sink.add_iteration_histogram(0, "batch_requests", h.bins());
  EXPECT_THROW(sink.add_iteration_histogram(0, "batch_requests", h.bins()), Error);  // duplicate
  EXPECT_FALSE(sink.run_open());
  EXPECT_EQ(query_rows(file, "SELECT count(*) FROM iteration_histogram"), (Rows{{"0"}}));
  EXPECT_EQ(query_rows(file, "SELECT count(*) FROM run"), (Rows{{"0"}}));
}

TEST_F(SqliteSinkTest, StoresRejectedRequestsWithTheirReason) {
  const std::string file = path("rejected.db");
  {
    SqliteSink sink(file);
    sink.begin_run({.scenario = "r"}, {});
    sink.listener().on_rejected({7, 1000, 8000, 200, "context"});
    sink.listener().on_rejected({9, 2000, 10, 10, "capacity"});
    sink.end_run("ok", 1.0, "");
  }
  EXPECT_EQ(query_rows(file, "SELECT request_id, arrival_ns, prompt_tokens, output_tokens, reason "
                             "FROM rejected_request ORDER BY request_id"),
            (Rows{{"7", "1000", "8000", "200", "context"}, {"9", "2000", "10", "10", "capacity"}}));
}

TEST_F(SqliteSinkTest, RejectsAForeignDatabase) {
  const std::string file = path("other.db");
  raw_exec(file, "CREATE TABLE people(name TEXT)");
  const std::string before = file_bytes(file);
  EXPECT_EQ(error_of([&] { SqliteSink sink(file); }),
            file + ": not a servesim results database (it has tables but no meta table); left "
                   "untouched, give another --db file");
  // Refused before anything changed: same bytes (the journal mode is in the header), no WAL.
  EXPECT_EQ(file_bytes(file), before);
  EXPECT_FALSE(std::filesystem::exists(file + "-wal"));
}

TEST_F(SqliteSinkTest, UnopenablePathNamesTheFile) {
  const std::string file = path("missing_dir/results.db");
  const std::string message = error_of([&] { SqliteSink sink(file); });
  EXPECT_EQ(message, file + ": cannot create the results database: no directory " +
                         path("missing_dir"));
}

}  // namespace
}  // namespace servesim::reports
