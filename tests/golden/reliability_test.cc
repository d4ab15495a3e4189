// Reliability: bad or oversized input is refused up front (exit 2, a message naming the input
// and what was expected, never raw library text), searches end, and cost follows the events
// simulated rather than the simulated time.
#include <gtest/gtest.h>

#include "golden_util.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "app/capacity.h"
#include "app/run_scenario.h"
#include "reports/sqlite_db.h"
#include "scenarios/scenario.h"
#include "core/error.h"

namespace servesim {
namespace {
namespace fs = std::filesystem;
using golden::run_command;

const std::string kBin = SERVESIM_BIN;

// A scratch directory for this test binary's files.
fs::path scratch() {
  const fs::path dir =
      fs::temp_directory_path() / ("servesim_reliability_" + std::to_string(getpid()));
  fs::create_directories(dir);
  return dir;
}

// Removes the scratch directory when the test binary ends.
class ScratchCleanup : public ::testing::Environment {
 public:
  void TearDown() override { fs::remove_all(scratch()); }
};
const auto* const kCleanup = ::testing::AddGlobalTestEnvironment(new ScratchCleanup);

fs::path write(const std::string& name, const std::string& text) {
  const fs::path p = scratch() / name;
  std::ofstream(p) << text;
  return p;
}

// Runs the CLI; returns (exit code, combined output).
std::pair<int, std::string> cli(const std::string& args) { return run_command(kBin + " " + args); }

// The output never carries raw library text.
void expect_no_library_text(const std::string& out) {
  for (const char* raw : {"json.exception", "vector::reserve", "filesystem error", "bad_alloc",
                          "std::", "nan %"}) {
    EXPECT_EQ(out.find(raw), std::string::npos) << "raw text \"" << raw << "\" in:\n" << out;
  }
}

void expect_refused(const std::string& args, const std::string& names) {
  SCOPED_TRACE(args);
  const auto [rc, out] = cli(args);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find(names), std::string::npos) << "expected \"" << names << "\" in:\n" << out;
  expect_no_library_text(out);
}

// The OPT-13B / A100 / ShareGPT scenario of the capacity report: 100 Poisson requests.
std::string opt13b_scenario(int count) {
  return R"({"name": "cap", "seed": 5, "model": "opt-13b",
    "cluster": {"gpu": "a100_80gb_sxm", "instances": 1},
    "policy": {"type": "coloc", "mode": "prefill_priority"},
    "context": {"overflow": "truncate"},
    "workload": {"type": "generated", "arrival": {"process": "poisson", "rate": 2.0}, "count": )" +
         std::to_string(count) + R"(,
      "lengths": {"type": "distribution",
        "path": "traces/data/length_distributions/)"
         R"(sharegpt_8k_filtered_stats_llama2_tokenizer.csv"}}})";
}

// ---- 1. capacity always ends ----

TEST(CapacityReliability, OptionsOutOfRangeAreErrors) {
  const std::string base = "capacity scenarios/quickstart.json --no-db --slo ttft_p90=1s ";
  for (const char* a : {"2", "nan", "-1", "0"}) {
    expect_refused(base + "--attainment " + a, "--attainment");
  }
  for (const char* r : {"nan", "0", "-3", "1e300", "inf"}) {
    expect_refused(base + "--start-rate " + r, "--start-rate");
  }
}

TEST(CapacityReliability, SearchIsBoundedAndSaysWhyNoRateMeetsTheSlo) {
  app::CapacityOptions options;
  int probes = 0;
  double lowest = 1e300;
  const app::CapacityResult r = app::search_capacity(
      [&](double rate) {
        ++probes;
        lowest = std::min(lowest, rate);
        app::CapacityProbe p;
        p.rate = rate;
        p.failed = "ttft_p90 is 900.0 ms, above its 400.0 ms bound";
        return p;
      },
      8.0, options);
  EXPECT_EQ(r.capacity_rps, 0);
  EXPECT_LE(probes, options.max_runs + 1);
  EXPECT_GE(lowest, 8.0 * options.min_rate_fraction);
  EXPECT_NE(r.no_rate_reason.find("no rate meets the SLO"), std::string::npos);
  EXPECT_NE(r.no_rate_reason.find("ttft_p90 is 900.0 ms"), std::string::npos) << r.no_rate_reason;
}

TEST(CapacityReliability, SustainedCheckComparesWithTheArrivalsRealized) {
  // 38 of 100 Poisson arrivals in the later half: completions keep up with them, not with the
  // nominal rate, and the check must not fail for sampling noise.
  const app::SloCriteria c = app::SloCriteria::parse({"ttft_p90=1s"}, std::nullopt, 0.9, "test");
  reports::RunSummary s;
  s.sustained_rate_per_s = 1.5;
  s.window_offered_rate_per_s = 1.55;
  s.window_arrivals = 38;
  EXPECT_TRUE(app::SloCriteria::all_ok(c.check(s, 2.0)));
  s.sustained_rate_per_s = 1.0;  // overloaded: completions fall behind what arrived
  EXPECT_FALSE(app::SloCriteria::all_ok(c.check(s, 2.0)));
}

TEST(CapacityReliability, HundredRequestOpt13bSearchEnds) {
  const fs::path f = write("cap100.json", opt13b_scenario(100));
  const auto [rc, out] =
      cli("capacity " + f.string() + " --no-db --slo ttft_p90=400ms --slo tpot_p90=40ms");
  EXPECT_TRUE(rc == 0 || rc == 1) << out;
  EXPECT_TRUE(out.find("serving capacity") != std::string::npos ||
              out.find("no rate meets the SLO") != std::string::npos)
      << out;
  int probes = 0;
  for (size_t pos = 0; (pos = out.find("\nrate ", pos)) != std::string::npos; ++pos) ++probes;
  EXPECT_LE(probes, app::CapacityOptions{}.max_runs + 1) << out;
  expect_no_library_text(out);
}

TEST(CapacityReliability, TooSmallAWorkloadIsRefusedWithItsSampleSize) {
  const fs::path f = write("cap10.json", opt13b_scenario(10));
  expect_refused("capacity " + f.string() + " --no-db --slo ttft_p90=400ms", "too few requests");
}

// ---- 2. knob bounds, 7. resource limits ----

TEST(KnobBounds, IntegerKnobsAndLayoutsAreBounded) {
  expect_refused("check scenarios/dopd/bursty_static.json "
                 "--set policy.num_prefill=4611686018427387904",
                 "policy.num_prefill: expected an integer in [1, 10000]");
  expect_refused("check scenarios/dopd/bursty_static.json --set policy.num_decode=1000000",
                 "policy.num_decode");
  expect_refused("check scenarios/dynaserve/azure_code_dynaserve.json "
                 "--set policy.num_pairs=1000000",
                 "policy.num_pairs");
  expect_refused("check scenarios/dopd/bursty_dopd.json --set policy.num_prefill=9",
                 "more than its GPU budget of 8");
  expect_refused("run --no-db --set policy.block_size=4611686018427387904", "policy.block_size");
  expect_refused("check --set policy.max_num_seqs=99999999999", "policy.max_num_seqs");
  expect_refused("check --set cluster.instances=65536", "cluster.instances");
  expect_refused("check scenarios/dllm/l40s_osc.json --set denoise.steps=2147483648",
                 "denoise.steps");
}

TEST(ResourceLimits, OversizedWorkloadsAreRefusedUpFront) {
  const std::string gen =
      R"('workload={"type":"generated","arrival":{"process":"poisson","rate":5},)"
      R"("lengths":{"type":"fixed","prompt":100,"output":10},"count":COUNT}')";
  for (const char* count : {"1e8", "9223372036854775807", "1000000000"}) {
    std::string set = gen;
    set.replace(set.find("COUNT"), 5, count);
    expect_refused("check --set " + set, "workload.count");
  }
  expect_refused(
      R"(check --set 'workload={"type":"closed_loop","clients":1e15,"count":10,)"
      R"("lengths":{"type":"fixed","prompt":100,"output":10}}')",
      "workload.clients");
  expect_refused(
      R"(check --set 'workload={"type":"generated","arrival":{"process":"poisson","rate":5},)"
      R"("lengths":{"type":"fixed","prompt":1000000000,"output":10},"count":10}')",
      "workload.lengths.prompt");
  expect_refused("check --set output.sample_interval=1ns", "output.sample_interval");
  expect_refused("check --set workload.time_scale=4294967295", "workload.time_scale");
  expect_refused("check --set workload.rate=1e-12", "workload.rate");
}

TEST(ResourceLimits, SessionWorkloadsAreCheckedUpFront) {
  const std::string base =
      R"(check --set 'workload={"type":"sessions","sessions":10,"rate":1,"isl":1000,)"
      R"("turn_isl":100,"osl":100,)";
  expect_refused(base + R"("min_turns":3,"max_turns":2}')", "workload.max_turns");
  expect_refused(base + R"("max_turns":10000,"sessions":1000000}')", "more than the");
  expect_refused(base + R"("max_turns":2,"window":{"duration":"10s"}}')", "workload.window");
  // The history is resent every turn: 1,000 sessions of 5,000 turns would resend 1e11 tokens.
  expect_refused(base + R"("max_turns":5000,"sessions":1000}')", "resend about");
  const auto [rc, out] = cli("check scenarios/prefix_sessions.json");
  EXPECT_EQ(rc, 0) << out;
}

TEST(InputErrors, NumbersPathsAndFilesNameTheInput) {
  const fs::path seed = write("seed.json", "{\n  \"seed\": 1e999\n}\n");
  expect_refused("check " + seed.string(), "seed.json:2: number 1e999 is out of range");
  const fs::path baseline = write("baseline.json", "{\n  \"entries\": [1e999]\n}\n");
  expect_refused("regress " + baseline.string(), "baseline.json:2: number 1e999 is out of range");
  expect_refused("check --set workload.path=" + std::string(300, 'x') + ".csv", "workload.path");
  expect_refused("check --set workload.path=/dev/zero", "workload.path: expected a regular file");
}

TEST(InputErrors, SetAddressesArrayElementsByIndex) {
  scenarios::Json doc = scenarios::Json::parse(R"({"w": {"parts": [{"rate": 1}, {"rate": 2}]}})");
  scenarios::apply_overrides(doc, {"w.parts.1.rate=5"});
  EXPECT_EQ(doc["w"]["parts"][1]["rate"], 5);
  try {
    scenarios::apply_overrides(doc, {"w.parts.rate=5"});
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("address an element by its index, 0 to 1"),
              std::string::npos)
        << e.what();
  }
}

TEST(InputErrors, PlansWithAnAbsurdRateOrGridAreRefused) {
  const std::string head = R"({"base": "../../scenarios/quickstart.json", "rate": RATE,
    "slo": {"ttft": "1s"}, "search": {"gpus": ["h100_sxm"], "candidates": [{"grid": GRID}]}})";
  auto plan = [&](const std::string& rate, const std::string& grid) {
    std::string t = head;
    t.replace(t.find("RATE"), 4, rate);
    t.replace(t.find("GRID"), 4, grid);
    std::string base = fs::absolute("scenarios/quickstart.json").string();
    t.replace(t.find("../../scenarios/quickstart.json"), 31, base);
    return write("p.plan.json", t).string();
  };
  expect_refused("plan --no-db " + plan("1e300", R"({"cluster.instances": [1]})"), "rate");
  std::string axis = "[";
  for (int i = 1; i <= 100; ++i) axis += (i > 1 ? "," : "") + std::to_string(i);
  axis += "]";
  const std::string grid =
      R"({"cluster.instances": A, "policy.max_num_seqs": A, "policy.block_size": A})";
  std::string g = grid;
  for (size_t pos; (pos = g.find('A')) != std::string::npos;) g.replace(pos, 1, axis);
  expect_refused("plan --no-db " + plan("5", g), "expands to 1000000 configs");
}

// ---- 3. model context limits ----

TEST(ContextLimits, RequestsBeyondTheModelContextAreRejectedOrTruncated) {
  const auto root = scenarios::DataRoot::discover();
  std::string text = opt13b_scenario(200);
  text.replace(text.find(R"("context": {"overflow": "truncate"},)"), 36, "");
  const fs::path f = write("ctx.json", text);
  app::RunOptions ro;
  const app::RunOutcome rejected =
      app::run_scenario(scenarios::load_scenario(f.string(), {}, root), root, ro);
  EXPECT_GT(rejected.result.requests_rejected_context, 0);
  EXPECT_EQ(rejected.result.requests_rejected, rejected.result.requests_rejected_context);
  ASSERT_EQ(static_cast<int64_t>(rejected.rejected.size()), rejected.result.requests_rejected);
  for (const auto& r : rejected.rejected) {
    EXPECT_EQ(r.reason, "context");
    EXPECT_GT(r.prompt_tokens + r.output_tokens, 2048);
  }
  for (const auto& r : rejected.requests) EXPECT_LE(r.prompt_tokens + r.output_tokens, 2048);

  const app::RunOutcome truncated = app::run_scenario(
      scenarios::load_scenario(f.string(), {"context.overflow=truncate"}, root), root, ro);
  EXPECT_EQ(truncated.result.requests_rejected, 0);
  EXPECT_EQ(truncated.result.requests_finished, 200);
  for (const auto& r : truncated.requests) EXPECT_LE(r.prompt_tokens + r.output_tokens, 2048);

  const auto [rc, out] = cli("check " + f.string());
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("beyond opt-13b's 2048-token context"), std::string::npos) << out;
}

TEST(ContextLimits, ARunWithEveryRequestRejectedFailsWithoutNan) {
  const auto [rc, out] = cli(
      R"(run --no-db --set model=opt-13b --set cluster.gpu=a100_80gb_sxm --set 'workload={"type":)"
      R"("generated","arrival":{"process":"poisson","rate":5},"lengths":{"type":"fixed",)"
      R"("prompt":5000,"output":10},"count":20}')");
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("every request (20) was rejected"), std::string::npos) << out;
  EXPECT_EQ(out.find("nan"), std::string::npos) << out;
}

TEST(ContextLimits, HugeTraceTimestampSaysTooLarge) {
  const fs::path trace =
      write("t.csv", "arrival_s,prompt_tokens,output_tokens\n0,10,10\n1e300,10,10\n");
  const auto [rc, out] = cli("check --set workload.format=generic_csv --set workload.path=" +
                             trace.string() + " --set workload.window=null");
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("too large"), std::string::npos) << out;
}

TEST(ContextLimits, CapacityOfAWorkloadWhollyBeyondTheContextIsRefused) {
  const fs::path f = write("cap_ctx.json", R"({"seed": 5, "model": "opt-13b",
    "cluster": {"gpu": "a100_80gb_sxm", "instances": 1},
    "workload": {"type": "generated", "arrival": {"process": "poisson", "rate": 2.0}, "count": 100,
      "lengths": {"type": "fixed", "prompt": 3000, "output": 10}}})");
  expect_refused("capacity " + f.string() + " --no-db --slo ttft_p90=400ms",
                 "every request (100) is rejected");
}

// ---- 5. check validates what run runs ----

TEST(CheckMatchesRun, ShippedDllmScenariosPassCheck) {
  for (const char* f : {"scenarios/dllm/l40s_osc.json", "scenarios/dllm/rtx4090_burst.json"}) {
    const auto [rc, out] = cli(std::string("check ") + f);
    EXPECT_EQ(rc, 0) << f << "\n" << out;
    EXPECT_NE(out.find("\nok\n"), std::string::npos) << out;
  }
}

// ---- 6. cost follows events, not simulated time ----

TEST(IdleSpans, StretchingAWorkloadKeepsTheSampleCountFlat) {
  const auto root = scenarios::DataRoot::discover();
  app::RunOptions ro;
  auto samples_at = [&](const std::string& scale) {
    const scenarios::Scenario s = scenarios::load_embedded_quickstart(
        {"workload.first_n=300", "workload.time_scale=" + scale}, root);
    const app::RunOutcome o = app::run_scenario(s, root, ro);
    EXPECT_EQ(o.result.requests_finished, 300);
    return o.samples.size();
  };
  const size_t normal = samples_at("1");
  const size_t stretched = samples_at("10000");
  // Unstretched, the 300 requests span about a minute; 10,000x stretched they span a week of
  // simulated time, which sampled every second would be 600,000 samples per series.
  EXPECT_LE(stretched, 10 * normal + 300 * 20) << "normal " << normal;
  RecordProperty("samples_normal", static_cast<int>(normal));
  RecordProperty("samples_stretched", static_cast<int>(stretched));
}

// ---- 7. a run's records are stored whole, and held once ----

TEST(StoredRecords, ARunThatKeepsNoRecordsStillStoresEveryRequestAndSample) {
  const auto root = scenarios::DataRoot::discover();
  const scenarios::Scenario s = scenarios::load_embedded_quickstart({"workload.first_n=200"}, root);
  const app::RunOutcome kept = app::run_scenario(s, root, app::RunOptions{});
  ASSERT_EQ(kept.requests.size(), 200u);
  ASSERT_GT(kept.samples.size(), 0u);

  // `servesim run` keeps no records in its outcome: they move into the database.
  const fs::path db = fs::temp_directory_path() / "servesim_stored_records_test.db";
  fs::remove(db);
  app::RunOptions ro;
  ro.db_path = db.string();
  ro.keep_records = false;
  const app::RunOutcome stored = app::run_scenario(s, root, ro);
  EXPECT_TRUE(stored.requests.empty());
  EXPECT_TRUE(stored.samples.empty());
  EXPECT_EQ(stored.summary.requests, kept.summary.requests);
  {
    reports::SqliteDb sql(db.string(), reports::SqliteDb::Mode::kReadOnly);
    const auto count = [&sql](const std::string& q) {
      reports::Statement st(sql, q, "test");
      EXPECT_TRUE(st.step());
      return st.column_int64(0);
    };
    EXPECT_EQ(count("SELECT count(*) FROM request"), 200);
    EXPECT_EQ(count("SELECT count(*) FROM sample"), static_cast<int64_t>(kept.samples.size()));
    EXPECT_EQ(count("SELECT count(*) FROM request_miss"),
              static_cast<int64_t>(kept.misses.misses.size()));
  }
  fs::remove(db);

  // Without a database and without records, nothing reads the samples: none are kept.
  app::RunOptions bare;
  bare.keep_records = false;
  const app::RunOutcome none = app::run_scenario(s, root, bare);
  EXPECT_TRUE(none.samples.empty());
  EXPECT_EQ(none.result.event_fingerprint, kept.result.event_fingerprint);
}

// output.requests "none" and "sample": the same run (fingerprint), the summary from histograms
// within their stated error, and only the kept records in the outcome and the database.
TEST(StoredRecords, NoneOrASampleOfTheRecordsKeepsTheRunAndItsSummary) {
  const auto root = scenarios::DataRoot::discover();
  const auto load = [&](const std::vector<std::string>& sets) {
    std::vector<std::string> all = {"workload.first_n=400"};
    all.insert(all.end(), sets.begin(), sets.end());
    return scenarios::load_embedded_quickstart(all, root);
  };
  const app::RunOutcome every = app::run_scenario(load({}), root, app::RunOptions{});
  ASSERT_EQ(every.requests.size(), 400u);
  EXPECT_TRUE(every.all_records);

  const fs::path db = fs::temp_directory_path() / "servesim_request_sample_test.db";
  for (const auto& [mode, kept] :
       std::vector<std::pair<std::string, size_t>>{{"none", 0}, {"sample", 50}}) {
    SCOPED_TRACE(mode);
    fs::remove(db);
    app::RunOptions ro;
    ro.db_path = db.string();
    std::vector<std::string> sets = {"output.requests=" + mode};
    if (mode == "sample") sets.push_back("output.request_sample=50");
    const app::RunOutcome o = app::run_scenario(load(sets), root, ro);
    EXPECT_FALSE(o.all_records);
    EXPECT_EQ(o.result.event_fingerprint, every.result.event_fingerprint);
    EXPECT_EQ(o.requests.size(), kept);
    EXPECT_EQ(o.summary.requests, every.summary.requests);
    EXPECT_DOUBLE_EQ(o.summary.slo_attainment, every.summary.slo_attainment);
    EXPECT_DOUBLE_EQ(o.summary.ttft_s.max, every.summary.ttft_s.max);
    EXPECT_NEAR(o.summary.ttft_s.p99, every.summary.ttft_s.p99, 0.008 * every.summary.ttft_s.p99);
    EXPECT_NEAR(o.summary.e2e_s.p50, every.summary.e2e_s.p50, 0.008 * every.summary.e2e_s.p50);
    reports::SqliteDb sql(db.string(), reports::SqliteDb::Mode::kReadOnly);
    reports::Statement st(sql, "SELECT count(*) FROM request", "test");
    ASSERT_TRUE(st.step());
    EXPECT_EQ(st.column_int64(0), static_cast<int64_t>(kept));
  }
  fs::remove(db);
}

}  // namespace
}  // namespace servesim
