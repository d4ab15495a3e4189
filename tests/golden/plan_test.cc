// The capacity planner (app/plan.h):
// 1. Plan-file error goldens: tests/golden/bad_plan/<case>.json run through `servesim plan` must
//    exit and print as <case>.expected (data root written as DATA; SERVESIM_UPDATE_GOLDEN=1
//    rewrites them).
// 2. Pruning soundness on a small exhaustive plan: every config pruned by the rate bound,
//    simulated anyway at the target rate, fails the SLO; every simulation achieves at most the
//    bound.
// 3. Determinism: the plan's digest and stored fingerprints do not depend on --jobs, nor on the
//    number of MPI ranks (when built with MPI and mpirun is available).
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "golden_util.h"

#include "app/dllm_run.h"
#include "app/plan.h"
#include "app/plan_internal.h"
#include "reports/query.h"
#include "scenarios/dllm_scenario.h"
#include "core/error.h"

namespace servesim {
namespace {
namespace fs = std::filesystem;
using golden::read_file;
using golden::replace_all;
using golden::run_command;
using app::Json;

std::string digest_of(const std::string& output) {
  std::smatch m;
  const std::regex re("plan digest ([0-9a-f]{16})");
  return std::regex_search(output, m, re) ? m[1].str() : std::string();
}

fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("servesim_plan_test_" + name + "_" +
                                                  std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Every simulation of a plan DB, volatile columns left out, in run order.
std::string db_rows(const std::string& db) {
  const auto r = reports::run_query(
      db,
      "SELECT p.config_index, p.rate, p.meets, r.scenario, r.event_fingerprint, r.status, "
      "(SELECT group_concat(name || '=' || ifnull(value, 'NULL'), ',') FROM scalar s "
      " WHERE s.run_id = r.run_id AND s.entity = 'run') "
      "FROM plan_run p JOIN run r USING(run_id) ORDER BY r.run_id; "
      "SELECT config_index, label, status, reason, num_gpus, cost_per_hour, bound_rps, "
      "capacity_rps, meets_target FROM plan_config ORDER BY config_index");
  std::string s;
  for (const auto& row : r.rows) {
    for (const auto& c : row) s += c + "|";
    s += "\n";
  }
  const auto runs = reports::run_query(
      db, "SELECT p.config_index, p.rate, p.meets, r.scenario, r.event_fingerprint FROM plan_run p "
          "JOIN run r USING(run_id) ORDER BY r.run_id");
  for (const auto& row : runs.rows) {
    for (const auto& c : row) s += c + "|";
    s += "\n";
  }
  return s;
}

TEST(PlanErrors, BadPlansFailWithTheExpectedMessages) {
  const auto root = scenarios::DataRoot::discover();
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator("tests/golden/bad_plan")) {
    if (e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty());
  for (const fs::path& f : files) {
    SCOPED_TRACE(f.string());
    const auto [rc, out] = run_command(std::string(SERVESIM_BIN) + " plan --no-db " + f.string());
    const std::string got = "exit " + std::to_string(rc) + "\n" +
                            replace_all(out, fs::path(root.root).lexically_normal().string(), "DATA");
    fs::path expected = f;
    expected.replace_extension(".expected");
    if (golden::updating()) std::ofstream(expected) << got;
    ASSERT_TRUE(fs::exists(expected)) << "run with SERVESIM_UPDATE_GOLDEN=1 to create it";
    EXPECT_EQ(got, read_file(expected));
  }
}

TEST(PlanPruning, NeverDropsAConfigThatMeetsTheSlo) {
  const auto root = scenarios::DataRoot::discover();
  // The small plan at a rate high enough that the bound prunes some configs.
  const fs::path dir = temp_dir("prune");
  Json doc = Json::parse(read_file("tests/golden/plans/small.plan.json"));
  doc["rate"] = 24.0;
  doc["capacity"]["enabled"] = false;
  doc["search"].erase("gpu_budget");
  std::ofstream(dir / "p.plan.json") << doc.dump(2);
  const app::PlanSpec spec = app::load_plan((dir / "p.plan.json").string(), root);
  const app::SloCriteria criteria = app::SloCriteria::parse(
      spec.slo, spec.attainment, spec.search.min_throughput_ratio, spec.source, "slo");
  std::vector<app::PlanConfig> configs = app::expand_plan(spec);
  std::vector<ConfigIssue> issues;
  std::map<std::string, bool> reported;
  int bound_pruned = 0, simulated = 0;
  for (app::PlanConfig& c : configs) {
    SCOPED_TRACE(c.label);
    app::prune_config(spec, c, criteria, root, issues, reported);
    ASSERT_TRUE(issues.empty());
    ASSERT_NE(c.status, app::ConfigStatus::kError) << c.reason;
    if (c.status == app::ConfigStatus::kPruned) {
      ASSERT_NE(c.reason.find("roofline"), std::string::npos) << c.reason;
    }
    // Simulate every config, pruned or not, at the target rate.
    const Json d = app::config_document(spec, c, criteria, std::make_pair(std::string("workload.arrival.rate"), 24.0));
    const scenarios::Scenario s = scenarios::parse_scenario(d, "test", spec.base_dir, root);
    app::RunOptions ro;
    ro.keep_records = false;
    const app::RunOutcome o = app::run_scenario(s, root, ro);
    ++simulated;
    EXPECT_LE(o.summary.request_rate_per_s, c.bound_rps * (1 + 1e-9))
        << "the bound is not an upper bound on the achieved rate";
    if (c.status == app::ConfigStatus::kPruned) {
      ++bound_pruned;
      EXPECT_FALSE(app::SloCriteria::all_ok(criteria.check(o.summary, 24.0)))
          << "a pruned config meets the SLO";
    }
  }
  EXPECT_GT(bound_pruned, 0) << "the test plan must exercise the rate bound";
  EXPECT_EQ(simulated, static_cast<int>(configs.size()));
  fs::remove_all(dir);
}

// `servesim run` of config `index`'s emitted scenario prints `fingerprint` after `label`.
void expect_run_reproduces(const std::string& plan, const std::string& index,
                           const std::string& fingerprint, const fs::path& dir,
                           const std::string& label) {
  SCOPED_TRACE("config #" + index);
  const std::string bin = SERVESIM_BIN;
  const fs::path emitted = dir / ("c" + index + ".json");
  const auto [erc, doc] = run_command(bin + " plan " + plan + " --emit-scenario " + index);
  ASSERT_EQ(erc, 0) << doc;
  std::ofstream(emitted) << doc;
  const auto [rrc, run_out] = run_command(bin + " run " + emitted.string() + " --no-db");
  ASSERT_EQ(rrc, 0) << run_out;
  EXPECT_NE(run_out.find(label + fingerprint), std::string::npos) << run_out;
}

// A dLLM config's GPUs are its instances x TP (cluster.instances, cluster.tp are grid axes like
// any other): its cost and the GPU budget follow.
TEST(PlanDllm, ConfigsCountInstancesTimesTp) {
  const auto root = scenarios::DataRoot::discover();
  const fs::path dir = temp_dir("dllm_gpus");
  Json base = Json::parse(read_file("scenarios/plans/llada_dllm_base.json"));
  base["workload"]["prompts"]["path"] =
      (fs::path(root.root) / "traces/data/burstgpt/BurstGPT_1_head.csv").string();
  Json plan = Json::parse(read_file("scenarios/plans/llada_rtx4090_l40s.plan.json"));
  plan["base"] = base;
  plan["search"]["gpus"] = Json::array({"l40s"});
  plan["search"]["gpu_budget"] = 4;
  plan["search"]["candidates"] = Json::parse(R"([
    {"name": "dllm-serve", "set": {"policy": {"type": "dllm-serve"}},
     "grid": {"cluster.instances": [1, 2, 4], "cluster.tp": [1, 2]}}])");
  const fs::path plan_path = dir / "gpus.plan.json";
  std::ofstream(plan_path) << plan.dump(2);
  const app::PlanSpec spec = app::load_plan(plan_path.string(), root);
  const app::SloCriteria criteria = app::SloCriteria::parse(
      spec.slo, spec.attainment, spec.search.min_throughput_ratio, spec.source, "slo");
  std::vector<app::PlanConfig> configs = app::expand_plan(spec);
  ASSERT_EQ(configs.size(), 6u);
  std::vector<ConfigIssue> issues;
  std::map<std::string, bool> reported;
  const int64_t expected_gpus[] = {1, 2, 2, 4, 4, 8};
  for (size_t i = 0; i < configs.size(); ++i) {
    app::PlanConfig& c = configs[i];
    SCOPED_TRACE(c.label);
    app::prune_config(spec, c, criteria, root, issues, reported);
    ASSERT_TRUE(issues.empty());
    EXPECT_EQ(c.num_gpus, expected_gpus[i]);
    EXPECT_DOUBLE_EQ(c.cost_per_hour, configs[0].cost_per_hour * expected_gpus[i]);
    EXPECT_EQ(c.status == app::ConfigStatus::kPruned, expected_gpus[i] > 4) << c.reason;
  }
  fs::remove_all(dir);
}

// A dLLM plan (base "kind": "dllm"): configs that cannot hold one request are pruned (and do run
// out of memory when simulated anyway); every simulated config at the target rate reproduces with
// `servesim run` of its emitted scenario (same fingerprint).
TEST(PlanDllm, PrunesWhatCannotFitAndReproducesWithRun) {
  const auto root = scenarios::DataRoot::discover();
  const fs::path dir = temp_dir("dllm");
  Json base = Json::parse(read_file("scenarios/plans/llada_dllm_base.json"));
  base["workload"]["requests"] = 40;
  base["workload"]["prompts"]["path"] =
      (fs::path(root.root) / "traces/data/burstgpt/BurstGPT_1_head.csv").string();
  Json plan = Json::parse(read_file("scenarios/plans/llada_rtx4090_l40s.plan.json"));
  plan["base"] = base;
  plan["capacity"]["enabled"] = false;
  plan["search"]["candidates"] = Json::parse(R"([
    {"name": "dllm-serve", "set": {"policy": {"type": "dllm-serve"}}},
    {"name": "fast-dllm", "set": {"policy": {"type": "fast-dllm"}}},
    {"name": "tight", "set": {"policy": {"type": "dllm-serve"},
                              "memory": {"gpu_memory_utilization": 0.3}}}])");
  const fs::path plan_path = dir / "dllm.plan.json";
  std::ofstream(plan_path) << plan.dump(2);

  const app::PlanSpec spec = app::load_plan(plan_path.string(), root);
  ASSERT_TRUE(spec.dllm);
  const app::SloCriteria criteria = app::SloCriteria::parse(
      spec.slo, spec.attainment, spec.search.min_throughput_ratio, spec.source, "slo");
  // A dLLM scenario has no slo section: the runs are summarized against these.
  const sim::SloSpec& objectives = criteria.request_objectives();
  EXPECT_EQ(objectives.ttft, std::optional<Duration>(Duration{30'000'000'000}));
  EXPECT_FALSE(objectives.tpot.has_value());
  EXPECT_FALSE(objectives.tbt_p99.has_value());
  EXPECT_DOUBLE_EQ(objectives.attainment_target, 0.9);
  std::vector<app::PlanConfig> configs = app::expand_plan(spec);
  ASSERT_EQ(configs.size(), 6u);  // 2 GPUs x 3 candidates
  std::vector<ConfigIssue> issues;
  std::map<std::string, bool> reported;
  for (app::PlanConfig& c : configs) {
    SCOPED_TRACE(c.label);
    app::prune_config(spec, c, criteria, root, issues, reported);
    ASSERT_TRUE(issues.empty());
    EXPECT_EQ(c.num_gpus, 1);
    EXPECT_GT(c.cost_per_hour, 0);
    const bool tight = c.candidate == "tight";
    EXPECT_EQ(c.status == app::ConfigStatus::kPruned, tight) << c.reason;
    if (tight) {
      // Simulated anyway, it runs out of memory.
      const Json d = app::config_document(spec, c, criteria, std::nullopt);
      const auto s = scenarios::parse_scenario(d, "test", spec.base_dir, root);
      EXPECT_FALSE(app::run_dllm(s, root, "").oom.empty());
    }
  }

  const std::string bin = SERVESIM_BIN;
  const fs::path db = dir / "dllm.db";
  const auto [rc, out] = run_command(bin + " plan " + plan_path.string() + " --jobs 2 --db " +
                                     db.string());
  ASSERT_TRUE(rc == 0 || rc == 1) << out;
  const auto runs = reports::run_query(
      db.string(), "SELECT p.config_index, r.event_fingerprint FROM plan_run p JOIN run r "
                   "USING(run_id) ORDER BY p.config_index");
  ASSERT_EQ(runs.rows.size(), 4u);  // the four configs that fit, once each at the target rate
  for (const auto& row : runs.rows) {
    expect_run_reproduces(plan_path.string(), row[0], row[1], dir, "fingerprint     ");
  }
  fs::remove_all(dir);
}

// Every config of the small LLM plan, at the target rate: `servesim run` of the emitted scenario
// gives the fingerprint the plan stored.
// The shipped DeepSeek-R1 plan searches expert parallelism with the layouts: a config whose ep
// does not divide its TP degree is pruned with the reason, every other one is simulated. Its
// wide-EP decode pools of attention-DP ranks count tp x attention_dp GPUs each.
TEST(PlanMoe, ExpertParallelAxisPrunesLayoutsItCannotSplit) {
  const auto root = scenarios::DataRoot::discover();
  const app::PlanSpec spec =
      app::load_plan("scenarios/plans/deepseek_r1_gb200_nvl72.plan.json", root);
  const app::SloCriteria criteria = app::SloCriteria::parse(
      spec.slo, spec.attainment, spec.search.min_throughput_ratio, spec.source, "slo");
  std::vector<app::PlanConfig> configs = app::expand_plan(spec);
  ASSERT_EQ(configs.size(), 2u * 3 * 4 * 2 * 2 + 3 * (2 * 3 * 2) + 2 * 4 * 2);
  std::vector<ConfigIssue> issues;
  std::map<std::string, bool> reported;
  int cannot_split = 0, runnable_ep16 = 0, wide_ep = 0;
  for (app::PlanConfig& c : configs) {
    SCOPED_TRACE(c.label);
    app::prune_config(spec, c, criteria, root, issues, reported);
    ASSERT_TRUE(issues.empty());
    if (c.label.find("attention_dp_decode=32") != std::string::npos) {
      // tp_prefill=T num_prefill=P num_decode=D: P x T + D x 32 GPUs.
      const auto value = [&](const std::string& key) {
        const size_t at = c.label.find(key + "=");
        return std::stoi(c.label.substr(at + key.size() + 1));
      };
      EXPECT_EQ(c.num_gpus, value("num_prefill") * value("tp_prefill") + value("num_decode") * 32);
      if (c.num_gpus <= 72) {
        EXPECT_NE(c.status, app::ConfigStatus::kPruned) << c.reason;
        ++wide_ep;
      }
    }
    if (c.label.find("ep=16") == std::string::npos) continue;
    if (c.label.find("tp=8 ") != std::string::npos) {  // coloc tp 8 with ep 16
      EXPECT_EQ(c.status, app::ConfigStatus::kPruned);
      EXPECT_NE(c.reason.find("ep=16 must divide tp=8"), std::string::npos) << c.reason;
      ++cannot_split;
    } else {
      EXPECT_NE(c.status, app::ConfigStatus::kPruned) << c.reason;
      ++runnable_ep16;
    }
  }
  EXPECT_EQ(cannot_split, 4);
  EXPECT_EQ(runnable_ep16, 4);
  EXPECT_GT(wide_ep, 0);
}

// The shipped plans of the newest architectures, GLM-5 (DeepSeek Sparse Attention) and
// Qwen3.5-397B-A17B (hybrid Gated DeltaNet linear attention): configs on each of H200, B200 and
// GB200 survive pruning, and `servesim plan` finds a cheapest layout meeting the SLO.
TEST(PlanNewArchitectures, Glm5AndQwen35PlanOnH200B200AndGb200) {
  const auto root = scenarios::DataRoot::discover();
  for (const std::string path : {"scenarios/plans/glm5_long_context.plan.json",
                                 "scenarios/plans/qwen35_long_context.plan.json"}) {
    SCOPED_TRACE(path);
    const app::PlanSpec spec = app::load_plan(path, root);
    const app::SloCriteria criteria = app::SloCriteria::parse(
        spec.slo, spec.attainment, spec.search.min_throughput_ratio, spec.source, "slo");
    std::vector<app::PlanConfig> configs = app::expand_plan(spec);
    std::vector<ConfigIssue> issues;
    std::map<std::string, bool> reported;
    std::map<std::string, int> runnable;
    for (app::PlanConfig& c : configs) {
      SCOPED_TRACE(c.label);
      app::prune_config(spec, c, criteria, root, issues, reported);
      ASSERT_TRUE(issues.empty());
      if (c.status != app::ConfigStatus::kPruned) ++runnable[c.label.substr(0, c.label.find(' '))];
    }
    for (const char* gpu : {"h200_sxm", "b200_sxm", "gb200_nvl72"}) {
      EXPECT_GT(runnable[gpu], 0) << gpu;
    }
    const auto [rc, out] = run_command(std::string(SERVESIM_BIN) + " plan " + path + " --no-db");
    EXPECT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("cheapest #"), std::string::npos) << out;
  }
}

// Speculative decoding as a grid axis: DeepSeek-R1's MTP drafts per step on 8 x H200 (SGLang).
// Without drafts one instance misses the 30 ms TPOT; with them it meets it, and its serving
// capacity grows with the drafts (1.76, 2.38 and 2.89 tokens a step on the default acceptance).
TEST(PlanSpeculative, MtpDraftsRaiseTheCapacityOfOneInstance) {
  const auto [rc, out] = run_command("(" + std::string(SERVESIM_BIN) +
                                     " plan scenarios/plans/deepseek_r1_mtp.plan.json --no-db "
                                     "--json 2>/dev/null)");
  ASSERT_EQ(rc, 0) << out;
  const Json doc = Json::parse(out);
  EXPECT_EQ(doc.at("chosen").at("label"), "h200_sxm mtp instances=1 num_speculative_tokens=3");
  std::map<int, double> capacity;  // drafts -> capacity of one instance
  for (const Json& c : doc.at("top")) {
    const std::string label = c.at("label");
    if (label.find("instances=1 ") == std::string::npos) continue;
    capacity[std::stoi(label.substr(label.rfind('=') + 1))] = c.at("capacity_rps");
  }
  EXPECT_EQ(capacity.count(0), 0u) << "no drafts: one instance misses the TPOT objective";
  ASSERT_EQ(capacity.size(), 3u);
  EXPECT_LT(capacity.at(1), capacity.at(2));
  EXPECT_LT(capacity.at(2), capacity.at(3));
}

// Pipeline stages as a grid axis: a config holds instances x tp x pp GPUs, one whose stage cannot
// hold its share of the weights with a KV block (Llama-3.1-70B's 2 stages on one A100 each: the
// roofline bound prunes it before, or the memory plan) is pruned, and the others are simulated.
TEST(PlanPipeline, PipelineAxisCountsEveryStage) {
  const auto root = scenarios::DataRoot::discover();
  const app::PlanSpec spec = app::load_plan("scenarios/plans/llama70b_azure_conv.plan.json", root);
  const app::SloCriteria criteria = app::SloCriteria::parse(
      spec.slo, spec.attainment, spec.search.min_throughput_ratio, spec.source, "slo");
  std::vector<app::PlanConfig> configs = app::expand_plan(spec);
  std::vector<ConfigIssue> issues;
  std::map<std::string, bool> reported;
  int pipelines = 0, runnable = 0;
  for (app::PlanConfig& c : configs) {
    if (c.label.find("coloc_pipeline") == std::string::npos) continue;
    SCOPED_TRACE(c.label);
    ++pipelines;
    const auto value = [&](const std::string& key) {
      const size_t at = c.label.find(" " + key + "=");
      return std::stoi(c.label.substr(at + key.size() + 2));
    };
    app::prune_config(spec, c, criteria, root, issues, reported);
    ASSERT_TRUE(issues.empty());
    EXPECT_EQ(c.num_gpus, value("instances") * value("tp") * value("pp"));
    if (c.status != app::ConfigStatus::kPruned) ++runnable;
  }
  EXPECT_EQ(pipelines, 3 * 2 * 3 * 2);  // GPUs x pp x tp x instances
  EXPECT_GT(runnable, 20);
}

TEST(PlanReproduction, EmittedScenariosRunToTheStoredResults) {
  const fs::path dir = temp_dir("reproduce");
  Json doc = Json::parse(read_file("tests/golden/plans/small.plan.json"));
  doc["capacity"]["enabled"] = false;
  const fs::path plan_path = dir / "small.plan.json";
  std::ofstream(plan_path) << doc.dump(2);
  const fs::path db = dir / "small.db";
  const auto [rc, out] = run_command(std::string(SERVESIM_BIN) + " plan " + plan_path.string() +
                                     " --jobs 2 --db " + db.string());
  ASSERT_TRUE(rc == 0 || rc == 1) << out;
  const auto runs = reports::run_query(
      db.string(), "SELECT p.config_index, r.event_fingerprint FROM plan_run p JOIN run r "
                   "USING(run_id) ORDER BY p.config_index");
  ASSERT_GE(runs.rows.size(), 4u);
  for (const auto& row : runs.rows) {
    expect_run_reproduces(plan_path.string(), row[0], row[1], dir, "fingerprint ");
  }
  fs::remove_all(dir);
}

TEST(PlanDeterminism, ThreadCountDoesNotChangeResults) {
  const fs::path dir = temp_dir("jobs");
  const std::string bin = SERVESIM_BIN;
  const auto [rc1, out1] = run_command(bin + " plan tests/golden/plans/small.plan.json --jobs 1 --db " +
                                       (dir / "j1.db").string());
  const auto [rc2, out2] = run_command(bin + " plan tests/golden/plans/small.plan.json --jobs 3 --db " +
                                       (dir / "j3.db").string());
  // 0: some config meets the SLO, 1: none does; both are complete plans.
  ASSERT_TRUE(rc1 == 0 || rc1 == 1) << out1;
  ASSERT_EQ(rc1, rc2) << out2;
  ASSERT_FALSE(digest_of(out1).empty()) << out1;
  EXPECT_EQ(digest_of(out1), digest_of(out2));
  EXPECT_EQ(db_rows((dir / "j1.db").string()), db_rows((dir / "j3.db").string()));
  fs::remove_all(dir);
}

TEST(PlanDeterminism, MpiRanksGiveTheSingleProcessResult) {
#ifndef SERVESIM_TEST_MPIRUN
  GTEST_SKIP() << "built without MPI";
#else
  const fs::path dir = temp_dir("mpi");
  const std::string bin = SERVESIM_BIN;
  const auto [rc1, out1] = run_command(bin + " plan tests/golden/plans/small.plan.json --jobs 1 --db " +
                                       (dir / "one.db").string());
  const auto [rc2, out2] = run_command(std::string(SERVESIM_TEST_MPIRUN) +
                                       " -n 2 --oversubscribe --allow-run-as-root " + bin +
                                       " plan tests/golden/plans/small.plan.json --jobs 1 --db " +
                                       (dir / "two.db").string());
  ASSERT_TRUE(rc1 == 0 || rc1 == 1) << out1;
  ASSERT_EQ(rc1, rc2) << out2;
  ASSERT_FALSE(digest_of(out1).empty()) << out1;
  EXPECT_EQ(digest_of(out1), digest_of(out2)) << out2;
  EXPECT_EQ(db_rows((dir / "one.db").string()), db_rows((dir / "two.db").string()));
  fs::remove_all(dir);
#endif
}

}  // namespace
}  // namespace servesim
