// dLLM scenarios on the core engine through the CLI and the app layer:
// - `servesim run` of a shipped dLLM scenario on 2 instances behind the round-robin router stores
//   every request in the ordinary request table, spread over both instances, and serves the same
//   tokens faster than one instance;
// - `servesim check` accepts exactly what `run` runs (same exit codes, out of memory included);
// - `servesim capacity` on a small dLLM scenario terminates with a rate meeting its SLO.
#include <filesystem>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "app/capacity.h"
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

}  // namespace
}  // namespace servesim
