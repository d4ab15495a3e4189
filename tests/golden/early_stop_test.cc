// Early-stopped capacity probes (app::SloFailureWatch):
// 1. The watch on hand-built records stops exactly at the first request after which the
//    criterion can no longer hold (attainment; nearest-rank percentiles over the measured count,
//    TPOT over the multi-token requests only), ignores warm-up requests, and its verdict bounds
//    the full run's value.
// 2. `capacity` and `plan` with early stop visit the same rates, reach the same verdicts and find
//    the same capacities as with every probe run to the end, and some probe was stopped.
// 3. Plan warm starts: the product-model start rate from hand-made neighbours, chains laid out
//    on the last two grid axes, and capacities within the bisection's tolerance of cold starts
//    with fewer simulations.
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "golden_util.h"

#include "app/capacity.h"
#include "app/plan.h"
#include "app/plan_internal.h"
#include "reports/query.h"
#include "core/error.h"

namespace servesim {
namespace {
namespace fs = std::filesystem;
using app::Json;

// A finished request arriving at 0 with the given TTFT and TPOT (ms) and output length.
sim::RequestRecord record(int64_t id, double ttft_ms, double tpot_ms, int64_t output = 11,
                          bool warmup = false) {
  sim::RequestRecord r;
  r.request_id = id;
  r.arrival_ns = 0;
  r.first_scheduled_ns = 0;
  r.first_token_ns = static_cast<int64_t>(ttft_ms * 1e6);
  r.done_ns = r.first_token_ns + static_cast<int64_t>(tpot_ms * 1e6) * (output - 1);
  r.prompt_tokens = 100;
  r.output_tokens = output;
  r.warmup = warmup;
  return r;
}

app::RunPopulation population(int64_t measured, int64_t multi_token, std::optional<int64_t> ttft_ms,
                              std::optional<int64_t> tpot_ms) {
  app::RunPopulation p;
  p.measured = measured;
  p.measured_multi_token = multi_token;
  if (ttft_ms) p.slo.ttft = Duration{*ttft_ms * 1'000'000};
  if (tpot_ms) p.slo.tpot = Duration{*tpot_ms * 1'000'000};
  return p;
}

TEST(SloFailureWatch, AttainmentStopsAtTheFirstCertainShortfall) {
  // 10 measured requests, 90 % required: one miss still allows 9 / 10; the second cannot.
  const app::SloCriteria c =
      app::SloCriteria::parse({"ttft=1s", "tpot=50ms"}, 0.9, 0.9, "test");
  app::SloFailureWatch w(c);
  w.start(population(10, 10, 1000, 50));
  EXPECT_EQ(w.on_request(record(0, 200, 20)), "");
  EXPECT_EQ(w.on_request(record(1, 200, 80)), "");           // first miss (TPOT)
  EXPECT_EQ(w.on_request(record(2, 5000, 20, 11, true)), ""); // warm-up: not counted
  EXPECT_EQ(w.on_request(record(3, 999, 50)), "");           // exactly at both bounds: meets
  const std::string reason = w.on_request(record(4, 1500, 20));  // second miss (TTFT)
  EXPECT_EQ(reason.substr(0, reason.find(':')), "attainment") << reason;
  EXPECT_EQ(w.verdict().name, "attainment");
  EXPECT_FALSE(w.verdict().ok);
  EXPECT_DOUBLE_EQ(w.verdict().value, 0.8);  // at most 8 of 10 can still meet
  EXPECT_DOUBLE_EQ(w.verdict().limit, 0.9);
}

TEST(SloFailureWatch, PercentileStopsOnceTheRankIsAboveTheBound) {
  // ttft_p90 over 20 measured requests: rank ceil(18) = 18, so 2 values may lie above it; the
  // third value above 500 ms makes the p90 one of them.
  const app::SloCriteria c = app::SloCriteria::parse({"ttft_p90=500ms"}, std::nullopt, 0.9, "test");
  app::SloFailureWatch w(c);
  w.start(population(20, 20, std::nullopt, std::nullopt));
  EXPECT_EQ(w.on_request(record(0, 900, 10)), "");
  EXPECT_EQ(w.on_request(record(1, 500, 10)), "");  // at the bound: within
  EXPECT_EQ(w.on_request(record(2, 700, 10)), "");
  const std::string reason = w.on_request(record(3, 800, 10));
  EXPECT_EQ(reason.substr(0, reason.find(':')), "ttft_p90") << reason;
  // The full run's p90 is one of the three values above the bound: at least the smallest.
  EXPECT_DOUBLE_EQ(w.verdict().value, 0.7);
  EXPECT_DOUBLE_EQ(w.verdict().limit, 0.5);
  EXPECT_FALSE(w.verdict().at_least);
}

TEST(SloFailureWatch, TpotCountsOnlyMultiTokenRequestsAndAttainmentIsOptional) {
  // tpot_p50 over 4 multi-token requests (of 100 measured): rank 2, 2 above allowed, third stops.
  const app::SloCriteria c = app::SloCriteria::parse({"tpot_p50=30ms"}, std::nullopt, 0.9, "test");
  app::SloFailureWatch w(c);
  w.start(population(100, 4, std::nullopt, std::nullopt));
  EXPECT_EQ(w.on_request(record(0, 100, 40)), "");
  EXPECT_EQ(w.on_request(record(1, 100, 0, /*output=*/1)), "");  // no TPOT
  EXPECT_EQ(w.on_request(record(2, 100, 45)), "");
  EXPECT_NE(w.on_request(record(3, 100, 35)), "");
}

// Open-loop arrivals every 100 ms, TTFT objective 1 s, 90 % of 10 requests: a request that has
// waited past 1 s without a first token is a miss before it finishes; a timely first token or a
// rejection is not.
TEST(SloFailureWatch, TtftMissesAreKnownOnceTheDeadlinePasses) {
  const app::SloCriteria c = app::SloCriteria::parse({"ttft=1s"}, 0.9, 0.9, "test");
  for (const bool reject_third : {false, true}) {
    SCOPED_TRACE(reject_third);
    app::SloFailureWatch w(c);
    app::RunPopulation p = population(10, 10, 1000, std::nullopt);
    for (int64_t i = 0; i < 10; ++i) p.arrival_ns.push_back(i * 100'000'000);
    w.start(p);
    if (reject_third) w.on_rejected({2, 200'000'000, 100, 10, "capacity"});
    EXPECT_EQ(w.on_first_token(0, 500'000'000), "");  // TTFT 0.5 s: met
    // At 1.15 s requests 0 and 1 are past their deadline; 1 (TTFT 1.05 s) missed: 9 / 10 left.
    EXPECT_EQ(w.on_first_token(1, 1'150'000'000), "");
    // At 1.25 s request 2 is past its deadline too, without a first token in time.
    const std::string reason = w.on_first_token(3, 1'250'000'000);
    if (reject_third) {
      EXPECT_EQ(reason, "");  // a rejected request is no miss (nor counted by attainment)
    } else {
      EXPECT_EQ(reason.substr(0, reason.find(':')), "attainment") << reason;
      EXPECT_DOUBLE_EQ(w.verdict().value, 0.8);
    }
  }
}

// Probe rate -> verdict, in the order the search ran them.
std::string probe_trace(const app::CapacityResult& r) {
  std::ostringstream o;
  for (const auto& p : r.probes) o << p.rate << (p.meets ? " meets\n" : " fails\n");
  return o.str();
}

TEST(EarlyStop, CapacityFindsTheSameRatesAsFullProbes) {
  const auto root = scenarios::DataRoot::discover();
  const std::vector<std::string> overrides = {
      R"(workload={"type":"generated","arrival":{"process":"poisson","rate":5.0},"count":400,)"
      R"("lengths":{"type":"fixed","prompt":1024,"output":64}})"};
  for (const auto& [slo, attainment] :
       std::vector<std::pair<std::vector<std::string>, std::optional<double>>>{
           {{"ttft=500ms", "tpot=40ms"}, 0.9}, {{"ttft_p90=60ms", "e2e_p50=1s"}, std::nullopt}}) {
    app::CapacityOptions options;
    options.slo = slo;
    options.attainment = attainment;
    std::ostringstream full_log, early_log;
    options.early_stop = false;
    const app::CapacityResult full = app::find_capacity(
        "tests/golden/scenarios/quickstart/scenario.json", overrides, options, root, full_log);
    options.early_stop = true;
    const app::CapacityResult early = app::find_capacity(
        "tests/golden/scenarios/quickstart/scenario.json", overrides, options, root, early_log);
    ASSERT_GT(full.capacity_rps, 0) << full_log.str();
    EXPECT_EQ(early.capacity_rps, full.capacity_rps);
    EXPECT_EQ(probe_trace(early), probe_trace(full)) << early_log.str();
    EXPECT_EQ(early.at_capacity.slo_attainment, full.at_capacity.slo_attainment);
    EXPECT_EQ(early.at_capacity.ttft_s.p90, full.at_capacity.ttft_s.p90);
    int stopped = 0;
    for (size_t i = 0; i < early.probes.size(); ++i) {
      const auto& p = early.probes[i];
      if (p.stopped_early.empty()) continue;
      ++stopped;
      EXPECT_FALSE(full.probes[i].meets);
      // It stopped before every measured request finished.
      EXPECT_LT(p.summary.requests, full.probes[i].summary.requests) << p.stopped_early;
    }
    EXPECT_GT(stopped, 0) << early_log.str();
    EXPECT_NE(early_log.str().find("stopped early"), std::string::npos);
  }
}

TEST(EarlyStop, PlanCapacitiesAreThoseOfFullProbes) {
  const fs::path dir = fs::temp_directory_path() /
                       ("servesim_early_stop_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string plan = golden::read_file("tests/golden/plans/small.plan.json");
  const std::string key = R"("capacity": {"enabled": true,)";
  ASSERT_NE(plan.find(key), std::string::npos);
  // The plan reads nothing beside itself (a generated workload): its copy runs from anywhere.
  const fs::path full_plan = dir / "full.plan.json";
  std::ofstream(full_plan) << golden::replace_all(plan, key, key + R"( "early_stop": false,)");
  const std::string bin = SERVESIM_BIN;
  const auto [rc1, out1] = golden::run_command(bin + " plan " + full_plan.string() +
                                               " --jobs 1 --db " + (dir / "full.db").string());
  const auto [rc2, out2] = golden::run_command(
      bin + " plan tests/golden/plans/small.plan.json --jobs 1 --db " + (dir / "early.db").string());
  ASSERT_EQ(rc1, rc2) << out1 << out2;
  const std::string q =
      "SELECT config_index, status, capacity_rps FROM plan_config ORDER BY config_index";
  const auto full = reports::run_query((dir / "full.db").string(), q);
  const auto early = reports::run_query((dir / "early.db").string(), q);
  ASSERT_FALSE(full.rows.empty());
  EXPECT_EQ(early.rows, full.rows);
  const std::string probes = "SELECT config_index, rate, meets FROM plan_run ORDER BY rowid";
  EXPECT_EQ(reports::run_query((dir / "early.db").string(), probes).rows,
            reports::run_query((dir / "full.db").string(), probes).rows);
  const auto stopped = reports::run_query(
      (dir / "early.db").string(), "SELECT count(*) FROM run WHERE status = 'stopped'");
  EXPECT_NE(stopped.rows.at(0).at(0), "0");
  fs::remove_all(dir);
}

TEST(PlanWarmStart, StartRateFromNeighbours) {
  app::PlanConfig c;
  c.index = 7;
  c.warm_last = 6;
  c.warm_second = 4;
  c.warm_corner = 3;
  std::map<int64_t, double> caps;
  EXPECT_EQ(app::warm_start_rate(c, caps), 0);  // nothing known: a cold start
  caps[4] = 10;
  EXPECT_EQ(app::warm_start_rate(c, caps), 10);
  caps[6] = 6;
  EXPECT_EQ(app::warm_start_rate(c, caps), 6);  // the last-axis neighbour first
  caps[3] = 5;
  EXPECT_DOUBLE_EQ(app::warm_start_rate(c, caps), 12);  // 10 x 6 / 5
  caps[3] = 0;  // a neighbour that met no rate tells nothing
  EXPECT_EQ(app::warm_start_rate(c, caps), 6);
}

TEST(PlanWarmStart, ChainsSpanTheLastTwoGridAxes) {
  const auto root = scenarios::DataRoot::discover();
  const app::PlanSpec spec = app::load_plan("tests/golden/plans/small.plan.json", root);
  const std::vector<app::PlanConfig> configs = app::expand_plan(spec);
  // Per GPU: coloc's grid tp [1, 2] x instances [1, 2, 4] (configs 0-5), then disagg's
  // num_prefill [1, 2] x num_decode [1, 2] (6-9); then the same on the second GPU.
  ASSERT_EQ(configs.size(), 20u);
  const app::PlanConfig& c4 = configs[4];  // tp 2, instances 2
  EXPECT_EQ(c4.chain, 0);
  EXPECT_EQ(c4.warm_last, 3);
  EXPECT_EQ(c4.warm_second, 1);
  EXPECT_EQ(c4.warm_corner, 0);
  const app::PlanConfig& c3 = configs[3];  // tp 2, instances 1: first of its row
  EXPECT_EQ(c3.warm_last, -1);
  EXPECT_EQ(c3.warm_second, 0);
  EXPECT_EQ(c3.warm_corner, -1);
  EXPECT_EQ(configs[6].chain, 6);
  EXPECT_EQ(configs[6].warm_second, -1);
  EXPECT_EQ(configs[9].warm_corner, 6);
  EXPECT_EQ(configs[16].chain, 16);  // disagg on the second GPU
}

TEST(PlanWarmStart, CapacitiesWithinToleranceOfColdStarts) {
  const fs::path dir = fs::temp_directory_path() /
                       ("servesim_warm_start_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  Json doc = Json::parse(golden::read_file("tests/golden/plans/small.plan.json"));
  doc["rate"] = "max";
  doc["capacity"] = {{"relative_tolerance", 0.05}, {"max_runs", 10}};
  std::ofstream(dir / "warm.plan.json") << doc.dump(2);
  doc["capacity"]["warm_start"] = false;
  std::ofstream(dir / "cold.plan.json") << doc.dump(2);
  const std::string bin = SERVESIM_BIN;
  for (const char* name : {"warm", "cold"}) {
    const auto [rc, out] = golden::run_command(bin + " plan " + (dir / name).string() +
                                               ".plan.json --jobs 2 --db " +
                                               (dir / name).string() + ".db");
    ASSERT_TRUE(rc == 0 || rc == 1) << out;
  }
  const std::string q =
      "SELECT config_index, capacity_rps FROM plan_config WHERE status != 'pruned' "
      "ORDER BY config_index";
  const auto warm = reports::run_query((dir / "warm.db").string(), q);
  const auto cold = reports::run_query((dir / "cold.db").string(), q);
  ASSERT_EQ(warm.rows.size(), cold.rows.size());
  ASSERT_GE(warm.rows.size(), 6u);
  for (size_t i = 0; i < warm.rows.size(); ++i) {
    SCOPED_TRACE(warm.rows[i][0]);
    const double a = std::stod(warm.rows[i][1]), b = std::stod(cold.rows[i][1]);
    ASSERT_GT(b, 0);
    // Each search ends within 5 % of its own boundary: the two differ by less than 2 x 5 %.
    EXPECT_LT(std::abs(a - b) / std::max(a, b), 0.1) << a << " vs " << b;
  }
  const std::string sims = "SELECT count(*) FROM plan_run";
  EXPECT_LT(std::stoi(reports::run_query((dir / "warm.db").string(), sims).rows[0][0]),
            std::stoi(reports::run_query((dir / "cold.db").string(), sims).rows[0][0]));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace servesim
