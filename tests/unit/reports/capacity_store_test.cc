#include "reports/capacity_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "reports/query.h"
#include "reports/sqlite_sink.h"
#include "reports_temp_dir.h"
#include "core/error.h"

namespace servesim::reports {
namespace {

using Rows = std::vector<std::vector<std::string>>;

Rows query_rows(const std::string &db, const std::string &sql) { return run_query(db, sql).rows; }

void raw_exec(const std::string &path, const std::string &sql) {
  sqlite3 *db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK);
}

// Two probes: 2 req/s meets (its checks: ttft_p90, sustained), 4 req/s stopped early.
CapacitySearchRecord search() {
  CapacitySearchRecord s;
  s.scenario = "scenarios/quickstart.json";
  s.overrides = {"cluster.instances=2"};
  s.objectives = {"ttft_p90=2s", "ttft=1s"};
  s.attainment_target = std::numeric_limits<double>::quiet_NaN();
  s.min_throughput_ratio = 0.9;
  s.capacity_rps = 2;
  s.binding = {"ttft_p90"};
  s.binding_rate = 4;
  s.verdict = "serving capacity 2.000 req/s";
  s.started_at = "2026-01-01T00:00:00Z";
  s.code_rev = "0.1.0";
  s.status = "ok";
  s.wall_s = 1.5;
  CapacityProbeRecord ok;
  ok.rate = 2;
  ok.meets = true;
  ok.requests = 200;
  ok.slo_attainment = 0.97;
  ok.sustained_rate = 1.98;
  ok.offered_rate = 2.01;
  ok.output_tokens_per_s = 400;
  ok.goodput_tokens_per_s = 380;
  ok.goodput_requests_per_s = 1.9;
  ok.ttft_s[0] = 0.2;
  ok.ttft_s[1] = 0.9;
  ok.ttft_s[2] = 1.4;
  ok.tbt_s[2] = 0.05;
  ok.tpot_s[1] = 0.02;
  ok.e2e_s[2] = 12;
  ok.checks = {{"ttft_p90", 0.9, 2, false, true, "s"},
               {"sustained", 1.98, 1.809, true, true, "req/s"}};
  CapacityProbeRecord stopped;
  stopped.rate = 4;
  stopped.stopped_early = "ttft_p90: 21 of 200 requests above 2 s";
  stopped.failed = "stopped early: ttft_p90: 21 of 200 requests above 2 s";
  stopped.requests = 40;
  stopped.slo_attainment = std::numeric_limits<double>::quiet_NaN();
  s.probes = {ok, stopped};
  return s;
}

class CapacityStoreTest : public testing::TempDirTest {};

TEST_F(CapacityStoreTest, WritesOneSearchAndReadsItBack) {
  const std::string db = path("results.db");
  EXPECT_EQ(write_capacity(db, search()), 1);
  EXPECT_EQ(write_capacity(db, search()), 2);
  EXPECT_EQ(capacity_ids(db), (std::vector<int64_t>{1, 2}));
  // The rows, as SQL sees them (NaN and no binding rate are NULL).
  EXPECT_EQ(
      query_rows(db,
                 "SELECT capacity_id, scenario, overrides, objectives, attainment_target, "
                 "capacity_rps, binding, binding_rate, status FROM capacity WHERE capacity_id = 1"),
      (Rows{{"1", "scenarios/quickstart.json", R"(["cluster.instances=2"])",
             R"(["ttft_p90=2s","ttft=1s"])", "NULL", "2.0", R"(["ttft_p90"])", "4.0", "ok"}}));
  EXPECT_EQ(query_rows(
                db,
                "SELECT probe_index, rate, meets, stopped_early <> '', slo_attainment, ttft_p90_s, "
                "ttft_p99_s FROM capacity_probe WHERE capacity_id = 1 ORDER BY probe_index"),
            (Rows{{"0", "2.0", "1", "0", "0.97", "0.9", "1.4"},
                  {"1", "4.0", "0", "1", "NULL", "0.0", "0.0"}}));
  EXPECT_EQ(query_rows(db,
                       "SELECT probe_index, name, value, limit_value, at_least, ok, unit FROM "
                       "capacity_check WHERE capacity_id = 2 ORDER BY rowid"),
            (Rows{{"0", "ttft_p90", "0.9", "2.0", "0", "1", "s"},
                  {"0", "sustained", "1.98", "1.809", "1", "1", "req/s"}}));
  // Read back through the store.
  const CapacitySearchRecord r = read_capacity(db, 2);
  const CapacitySearchRecord w = search();
  EXPECT_EQ(r.capacity_id, 2);
  EXPECT_EQ(r.scenario, w.scenario);
  EXPECT_EQ(r.overrides, w.overrides);
  EXPECT_EQ(r.objectives, w.objectives);
  EXPECT_TRUE(std::isnan(r.attainment_target));
  EXPECT_EQ(r.capacity_rps, 2);
  EXPECT_EQ(r.binding, w.binding);
  EXPECT_EQ(r.binding_rate, 4);
  EXPECT_EQ(r.verdict, w.verdict);
  EXPECT_EQ(r.wall_s, 1.5);
  ASSERT_EQ(r.probes.size(), 2u);
  EXPECT_EQ(r.probes[0].ttft_s[2], 1.4);
  EXPECT_EQ(r.probes[0].goodput_tokens_per_s, 380);
  EXPECT_EQ(r.probes[0].e2e_s[2], 12);
  ASSERT_EQ(r.probes[0].checks.size(), 2u);
  EXPECT_EQ(r.probes[0].checks[1].name, "sustained");
  EXPECT_TRUE(r.probes[0].checks[1].at_least);
  EXPECT_EQ(r.probes[1].stopped_early, w.probes[1].stopped_early);
  EXPECT_TRUE(r.probes[1].checks.empty());
  EXPECT_TRUE(std::isnan(r.probes[1].slo_attainment));
}

// A search fails as a whole: a failing row leaves none of its rows, and the searches written before
// it stay.
TEST_F(CapacityStoreTest, OneSearchIsOneTransaction) {
  const std::string db = path("results.db");
  write_capacity(db, search());
  CapacitySearchRecord bad = search();
  bad.probes[0].checks.push_back(bad.probes[0].checks[0]);  // the same check twice: a PK clash
  EXPECT_THROW(write_capacity(db, bad), Error);
  EXPECT_EQ(query_rows(db, "SELECT count(*) FROM capacity"), (Rows{{"1"}}));
  EXPECT_EQ(query_rows(db, "SELECT count(*), max(capacity_id) FROM capacity_probe"),
            (Rows{{"2", "1"}}));
  EXPECT_EQ(query_rows(db, "SELECT count(*) FROM capacity_check"), (Rows{{"2"}}));
  EXPECT_EQ(write_capacity(db, search()), 2);
}

// The tables sit beside runs in a results database of the current schema; a database of a newer
// schema is refused and left as it was.
TEST_F(CapacityStoreTest, SharesTheResultsDatabaseAndItsSchemaVersion) {
  const std::string db = path("results.db");
  {
    SqliteSink sink(db);
    sink.begin_run({.scenario = "a"}, {});
    sink.end_run("ok", 1.0, "");
  }
  EXPECT_EQ(write_capacity(db, search()), 1);
  EXPECT_EQ(query_rows(db, "SELECT count(*) FROM run"), (Rows{{"1"}}));
  EXPECT_EQ(query_rows(db, "SELECT value FROM meta WHERE key = 'schema_version'"),
            (Rows{{std::to_string(SqliteSink::kSchemaVersion)}}));
  raw_exec(db, "UPDATE meta SET value = '99' WHERE key = 'schema_version'");
  EXPECT_THROW(write_capacity(db, search()), InputError);
  EXPECT_EQ(query_rows(db, "SELECT count(*) FROM capacity"), (Rows{{"1"}}));
}

TEST_F(CapacityStoreTest, UnknownIdsNameWhatTheDatabaseHolds) {
  const std::string db = path("results.db");
  { SqliteSink sink(db); }
  EXPECT_TRUE(capacity_ids(db).empty());
  try {
    read_capacity(db, 3);
    FAIL() << "expected InputError";
  } catch (const InputError &e) {
    EXPECT_NE(std::string(e.what()).find("no capacity search 3 (capacity searches: none)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace servesim::reports
