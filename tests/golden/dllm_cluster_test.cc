// dLLM scenarios on the core engine through the CLI and the app layer:
// - `servesim run` of a shipped dLLM scenario on 2 instances behind the round-robin router stores
//   every request in the ordinary request table, spread over both instances, and serves the same
//   tokens faster than one instance;
// - `servesim check` accepts exactly what `run` runs (same exit codes, out of memory included);
// - `servesim capacity` on a small dLLM scenario terminates with a rate meeting its SLO;
// - the ordinary scenario form (cluster.gpu, a router section, an LLM workload section, an slo)
//   runs, stores and plans as the dLLM form does, and a lone request takes the same time in both.
#include <filesystem>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "app/capacity.h"
#include "app/dllm_run.h"
#include "scenarios/dllm_scenario.h"
#include "golden_util.h"
#include "reports/sqlite_db.h"

namespace servesim {
namespace {

namespace fs = std::filesystem;

const std::string kBin = SERVESIM_BIN;
const std::string kScenario = "scenarios/dllm/l40s_livebench.json";

TEST(DllmCluster, TwoInstancesBehindTheRouterStoreEveryRequest) {
  const fs::path db = fs::temp_directory_path() / "servesim_dllm_cluster_test.db";
  fs::remove(db);
  const auto [rc, out] = golden::run_command(kBin + " run " + kScenario +
                                             " --set cluster.instances=2 --db " + db.string());
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("on 2 x l40s (tp1) behind round_robin"), std::string::npos) << out;
  reports::SqliteDb sql(db.string(), reports::SqliteDb::Mode::kReadOnly);
  const auto count = [&sql](const std::string& q) {
    reports::Statement st(sql, q, "test");
    EXPECT_TRUE(st.step());
    return st.column_int64(0);
  };
  EXPECT_EQ(count("SELECT count(*) FROM request"), 128);
  EXPECT_EQ(count("SELECT count(DISTINCT instance_id) FROM request"), 2);
  EXPECT_EQ(count("SELECT count(*) FROM request WHERE instance_id = 0"), 64);
  EXPECT_EQ(count("SELECT count(*) FROM request WHERE output_tokens = 256"), 128);
  EXPECT_EQ(count("SELECT count(*) FROM run WHERE router = 'round_robin'"), 1);
  fs::remove(db);
}

// Every router runs a dLLM cluster, routers with parameters at their defaults.
TEST(DllmCluster, EveryRouterRunsADllmCluster) {
  for (const std::string router : {"round_robin", "least_outstanding", "least_kv_load", "kv_aware"}) {
    for (const std::string policy : {"dllm-serve", "fast-dllm"}) {
      const auto [rc, out] = golden::run_command(
          kBin + " run " + kScenario + " --no-db --set cluster.instances=2 --set cluster.router=" +
          router + " --set 'policy={\"type\":\"" + policy + "\"}'" +
          " --set workload.requests=16");
      EXPECT_EQ(rc, 0) << router << " " << policy << "\n" << out;
      EXPECT_NE(out.find("16 finished, 0 rejected"), std::string::npos) << out;
    }
  }
}

TEST(DllmCluster, CheckAcceptsExactlyWhatRunRuns) {
  for (const std::string set :
       {"", "--set cluster.instances=2 --set cluster.tp=2",
        "--set memory.gpu_memory_utilization=0.3",
        "--set 'policy={\"type\":\"fast-dllm\"}' --set memory.gpu_memory_utilization=0.3",
        "--set cluster.tp=3", "--set 'denoise.eos_length={\"min\":1,\"max\":64}'"}) {
    const auto [check_rc, check_out] = golden::run_command(kBin + " check " + kScenario + " " + set);
    const auto [run_rc, run_out] =
        golden::run_command(kBin + " run " + kScenario + " --no-db " + set);
    EXPECT_EQ(check_rc, run_rc) << set << "\ncheck:\n" << check_out << "\nrun:\n" << run_out;
  }
  // Out of memory is exit 2 for both.
  EXPECT_EQ(golden::run_command(kBin + " check " + kScenario +
                                " --set memory.gpu_memory_utilization=0.3")
                .first,
            2);
}

TEST(DllmCluster, CapacityOfASmallDllmScenarioEndsWithARate) {
  app::CapacityOptions options;
  options.slo = {"e2e_p90=120s"};
  options.max_runs = 8;
  std::ostringstream log;
  const app::CapacityResult r = app::find_capacity(
      kScenario, {"workload.requests=60", "workload.arrival.rate=0.2"}, options,
      scenarios::DataRoot::discover(), log);
  ASSERT_GT(r.capacity_rps, 0) << log.str();
  EXPECT_LE(r.probes.size(), 9u);
  for (const auto& p : r.probes) {
    if (p.meets) {
      EXPECT_LE(p.summary.e2e_s.p90, 120.0);
      EXPECT_LE(p.rate, r.capacity_rps);
    }
  }
  EXPECT_LE(r.at_capacity.e2e_s.p90, 120.0);
}

const std::string kOrdinary = "scenarios/dllm/l40s_azure_code.json";

TEST(DllmCluster, OrdinaryFormRunsBehindItsRouterAndStoresItsSloAttainment) {
  const fs::path db = fs::temp_directory_path() / "servesim_dllm_ordinary_test.db";
  fs::remove(db);
  const auto [rc, out] = golden::run_command(kBin + " run " + kOrdinary + " --db " + db.string());
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("on 2 x l40s (tp1) behind least_outstanding"), std::string::npos) << out;
  reports::SqliteDb sql(db.string(), reports::SqliteDb::Mode::kReadOnly);
  const auto number = [&sql](const std::string& q) {
    reports::Statement st(sql, q, "test");
    EXPECT_TRUE(st.step());
    return st.column_double(0);
  };
  const double requests = number("SELECT count(*) FROM request");
  EXPECT_GT(requests, 50);
  EXPECT_EQ(number("SELECT count(*) FROM request WHERE output_tokens = 256"), requests);
  EXPECT_EQ(number("SELECT count(DISTINCT instance_id) FROM request"), 2);
  EXPECT_EQ(number("SELECT count(*) FROM run WHERE router = 'least_outstanding'"), 1);
  // The stored attainment is the share of requests answered within the slo's 150 s.
  const double within = number(
      "SELECT count(*) FROM request WHERE done_ns - arrival_ns <= 150000000000");
  EXPECT_DOUBLE_EQ(number("SELECT value FROM scalar WHERE name = 'slo_attainment'"),
                   within / requests);
  EXPECT_GT(within, 0);
  fs::remove(db);
}

// An unloaded request's latency is its denoising time, whichever form describes it.
TEST(DllmCluster, ALoneRequestTakesTheSameTimeInBothForms) {
  const scenarios::DataRoot root = scenarios::DataRoot::discover();
  const scenarios::Scenario dllm_form = scenarios::load_scenario(
      kScenario, {"workload.requests=1", "workload.prompts={\"type\":\"fixed\",\"tokens\":700}"},
      root);
  const scenarios::Scenario ordinary = scenarios::load_scenario(
      kOrdinary,
      {"cluster.instances=1",
       "workload={\"type\":\"generated\",\"count\":1,\"arrival\":{\"rate\":1},"
       "\"lengths\":{\"type\":\"fixed\",\"prompt\":700,\"output\":5}}"},
      root);
  const app::DllmOutcome a = app::run_dllm(dllm_form, root, "");
  const app::DllmOutcome b = app::run_dllm(ordinary, root, "");
  ASSERT_EQ(a.result.requests.size(), 1u);
  ASSERT_EQ(b.result.requests.size(), 1u);
  const auto latency = [](const app::DllmOutcome& o) {
    return o.result.requests[0].done_ns - o.result.requests[0].arrival_ns;
  };
  EXPECT_GT(latency(a), 0);
  EXPECT_EQ(latency(a), latency(b));
  EXPECT_EQ(b.result.requests[0].output_tokens, 256);
}

TEST(DllmCluster, CapacityOfAnOrdinaryFormScenarioScalesItsTrace) {
  app::CapacityOptions options;
  options.slo = {"ttft=150s"};
  options.max_runs = 8;
  std::ostringstream log;
  const app::CapacityResult r = app::find_capacity(kOrdinary, {}, options,
                                                   scenarios::DataRoot::discover(), log);
  ASSERT_GT(r.capacity_rps, 0) << log.str();
  for (const auto& p : r.probes) {
    if (p.meets) {
      EXPECT_LE(p.rate, r.capacity_rps);
    }
  }
  EXPECT_LE(r.at_capacity.ttft_s.p90, 150.0) << log.str();
}

}  // namespace
}  // namespace servesim
