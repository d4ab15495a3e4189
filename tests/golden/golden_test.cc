// Golden tests.
//
// 1. Scenario goldens: tests/golden/scenarios/<case>/scenario.json is run and compared with
//    expected.json beside it: the event fingerprint and integer counts exactly, summary scalars
//    with a relative tolerance of 1e-9, and the first request rows exactly.
// 2. Error goldens: tests/golden/bad_config/<case>.json is checked with `servesim check` and the
//    exit code and stderr are compared with <case>.expected (the data root is written as DATA).
// 3. Determinism across processes: the quickstart run twice by the CLI gives the same fingerprint.
//
// SERVESIM_UPDATE_GOLDEN=1 rewrites the expectations instead of comparing (then review the diff).
#include <unistd.h>

#include <gtest/gtest.h>

#include "golden_util.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/run_scenario.h"
#include "scenarios/scenario.h"

namespace servesim {
namespace {
namespace fs = std::filesystem;
using golden::read_file;
using golden::replace_all;
using golden::run_command;
using golden::updating;
using Json = nlohmann::ordered_json;

std::vector<fs::path> cases(const fs::path& dir, const std::string& ext) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (ext.empty() ? e.is_directory() : e.path().extension() == ext) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

Json observe(const app::RunOutcome& o) {
  Json j;
  j["event_fingerprint"] = app::format_fingerprint(o.result.event_fingerprint);
  j["events"] = o.result.events;
  j["requests_finished"] = o.result.requests_finished;
  j["requests_rejected"] = o.result.requests_rejected;
  j["requests_unfinished"] = o.result.requests_unfinished;
  j["end_time_ns"] = to_ns(o.result.end_time);
  Json scalars = Json::object();
  for (const auto& [name, value] : reports::summary_scalars(o.summary)) {
    scalars[name] = std::isfinite(value) ? Json(value) : Json(nullptr);
  }
  j["scalars"] = scalars;
  Json rows = Json::array();
  std::vector<sim::RequestRecord> sorted = o.requests;
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.request_id < b.request_id; });
  for (size_t i = 0; i < std::min<size_t>(5, sorted.size()); ++i) {
    const auto& r = sorted[i];
    rows.push_back({r.request_id, r.instance_id, r.arrival_ns, r.first_token_ns, r.done_ns,
                    r.prompt_tokens, r.output_tokens, r.preemptions, r.max_tbt_ns});
  }
  j["first_requests"] = rows;
  return j;
}

TEST(GoldenScenario, EveryCaseMatchesItsExpectation) {
  const auto root = scenarios::DataRoot::discover();
  const auto dirs = cases("tests/golden/scenarios", "");
  ASSERT_GE(dirs.size(), 4u);
  for (const auto& dir : dirs) {
    SCOPED_TRACE(dir.string());
    const auto s = scenarios::load_scenario((dir / "scenario.json").string(), {}, root);
    const Json got = observe(app::run_scenario(s, root, {}));
    const fs::path expected_path = dir / "expected.json";
    if (updating()) {
      std::ofstream(expected_path) << got.dump(2) << "\n";
      continue;
    }
    ASSERT_TRUE(fs::exists(expected_path)) << "run with SERVESIM_UPDATE_GOLDEN=1 to create it";
    const Json want = Json::parse(read_file(expected_path));
    for (const char* key : {"event_fingerprint", "events", "requests_finished",
                            "requests_rejected", "requests_unfinished", "end_time_ns",
                            "first_requests"}) {
      EXPECT_EQ(got[key], want[key]) << key;
    }
    for (auto it = want["scalars"].begin(); it != want["scalars"].end(); ++it) {
      ASSERT_TRUE(got["scalars"].contains(it.key())) << it.key();
      const Json& g = got["scalars"][it.key()];
      if (it.value().is_null()) {
        EXPECT_TRUE(g.is_null()) << it.key();
        continue;
      }
      const double w = it.value().get<double>();
      EXPECT_NEAR(g.get<double>(), w, 1e-9 * std::max(1.0, std::fabs(w))) << it.key();
    }
  }
}

TEST(GoldenErrors, BadScenariosFailWithTheExpectedMessages) {
  const auto root = scenarios::DataRoot::discover();
  const auto files = cases("tests/golden/bad_config", ".json");
  ASSERT_GE(files.size(), 5u);
  for (const auto& f : files) {
    SCOPED_TRACE(f.string());
    const auto [rc, out] = run_command(std::string(SERVESIM_BIN) + " check " + f.string());
    const std::string got =
        "exit " + std::to_string(rc) + "\n" + replace_all(out, fs::path(root.root).lexically_normal().string(), "DATA");
    fs::path expected_path = f;
    expected_path.replace_extension(".expected");
    if (updating()) {
      std::ofstream(expected_path) << got;
      continue;
    }
    ASSERT_TRUE(fs::exists(expected_path)) << "run with SERVESIM_UPDATE_GOLDEN=1 to create it";
    EXPECT_EQ(got, read_file(expected_path));
  }
}

// `run --slo KEY=DURATION` sets the scenario's objective, as --set slo.KEY=DURATION does; a
// percentile criterion (capacity's) is bad input.
TEST(GoldenCli, RunTakesSloObjectives) {
  const std::string bin = std::string(SERVESIM_BIN) + " run --no-db ";
  const auto with_slo = run_command(bin + "--slo ttft=200ms --slo tbt_p99=40ms");
  const auto with_set = run_command(bin + "--set slo.ttft=200ms --set slo.tbt_p99=40ms");
  ASSERT_EQ(with_slo.first, 0) << with_slo.second;
  EXPECT_NE(with_slo.second.find("(TTFT <= 200 ms, TPOT <= 50 ms, TBT p99 <= 40 ms;"),
            std::string::npos)
      << with_slo.second;
  const auto attainment = [](const std::string& out) {
    return out.substr(out.find("SLO attainment"), out.find('\n', out.find("SLO attainment")) -
                                                      out.find("SLO attainment"));
  };
  EXPECT_EQ(attainment(with_slo.second), attainment(with_set.second));
  const auto bad = run_command(bin + "--slo ttft_p90=2s");
  EXPECT_EQ(bad.first, 2);
  EXPECT_NE(bad.second.find("--slo: expected ttft=, tpot= or tbt_p99= and a duration, got "
                            "\"ttft_p90=2s\""),
            std::string::npos)
      << bad.second;
}

// `models import --out DIR` makes the folder, and the command it prints finds the model through
// SERVESIM_MODELS; a key of the shipped catalog is refused there.
TEST(GoldenCli, ModelsImportedToAFolderOfOnesOwnAreFound) {
  const fs::path dir = fs::temp_directory_path() / ("servesim_import_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "Qwen3-32B");
  const auto root = scenarios::DataRoot::discover();
  fs::copy_file(fs::path(root.root) / "models/catalog/hf_configs/Qwen--Qwen3-32B.config.json",
                dir / "Qwen3-32B" / "config.json");
  const std::string bin = std::string(SERVESIM_BIN);
  const std::string config = (dir / "Qwen3-32B" / "config.json").string();
  const std::string out = (dir / "catalog" / "mine").string();  // does not exist yet
  const auto refused = run_command(bin + " models import " + config + " --out " + out);
  EXPECT_EQ(refused.first, 2);
  EXPECT_NE(refused.second.find("catalog key \"qwen3-32b\" is a model of the shipped catalog"),
            std::string::npos)
      << refused.second;
  const auto added = run_command(bin + " models import " + config + " --key my-qwen --out " + out);
  ASSERT_EQ(added.first, 0) << added.second;
  const std::string env = "SERVESIM_MODELS=" + out + " ";
  EXPECT_NE(added.second.find("e.g. " + env + "servesim check --set model=my-qwen"),
            std::string::npos)
      << added.second;
  const auto found = run_command(env + bin + " check --set model=my-qwen --set cluster.tp=2");
  EXPECT_EQ(found.first, 0) << found.second;
  const auto without = run_command(bin + " check --set model=my-qwen --set cluster.tp=2");
  EXPECT_EQ(without.first, 2) << without.second;
  fs::remove_all(dir);
}

TEST(GoldenDeterminism, TwoProcessesGiveTheSameFingerprint) {
  const std::string cmd = std::string(SERVESIM_BIN) + " run --no-db | grep fingerprint";
  const auto a = run_command(cmd);
  const auto b = run_command(cmd);
  ASSERT_EQ(a.first, 0) << a.second;
  EXPECT_NE(a.second.find("fingerprint"), std::string::npos);
  EXPECT_EQ(a.second.substr(a.second.find("fingerprint")), b.second.substr(b.second.find("fingerprint")));
}

}  // namespace
}  // namespace servesim

#include "app/capacity.h"
#include "core/error.h"

namespace servesim {
namespace {

// Prefill and decode pools with their own expert-parallel degree: each group's instances get the
// cost model of their (tp, ep) layout, and elastic additions would too.
TEST(GoldenMoe, DisaggregatedPoolsKeepTheirOwnExpertParallelism) {
  const auto root = scenarios::DataRoot::discover();
  const scenarios::Json doc = scenarios::Json::parse(R"({
    "model": "qwen3-235b-a22b",
    "cluster": {"gpu": "h200_sxm", "ep": 2, "weight_dtype": "fp8", "kv_dtype": "fp8"},
    "policy": {"type": "disagg", "num_prefill": 2, "num_decode": 1, "tp_prefill": 4,
               "tp_decode": 8, "ep_decode": 8},
    "workload": {"type": "generated", "arrival": {"rate": 1.0}, "count": 10,
                 "lengths": {"type": "fixed", "prompt": 100, "output": 10}}})");
  const scenarios::Scenario s = scenarios::parse_scenario(doc, "t.json", ".", root);
  ASSERT_EQ(s.groups.size(), 2u);
  EXPECT_EQ(s.groups[0].ep, 2);  // cluster.ep: ep_prefill left at 0
  EXPECT_EQ(s.groups[1].ep, 8);
  const scenarios::EngineInputs in = scenarios::build_engine_inputs(s, root);
  ASSERT_EQ(in.instances.size(), 3u);
  for (int i : {0, 1}) {
    EXPECT_NE(in.instances[i].cost_model->describe().find("tp4 ep2"), std::string::npos)
        << in.instances[i].cost_model->describe();
  }
  EXPECT_NE(in.instances[2].cost_model->describe().find("tp8 ep8"), std::string::npos)
      << in.instances[2].cost_model->describe();
  // The same decode pass costs the busiest-rank excess more at ep 8 than the TP-only layout.
  scenarios::Json tp_only = doc;
  tp_only["policy"]["ep_decode"] = 1;
  const scenarios::EngineInputs base =
      scenarios::build_engine_inputs(scenarios::parse_scenario(tp_only, "t.json", ".", root), root);
  models::BatchShape decode;
  for (int i = 0; i < 64; ++i) decode.segments.push_back({1, 2000, 1});
  EXPECT_NE(in.instances[2].cost_model->iteration_time(decode),
            base.instances[2].cost_model->iteration_time(decode));
}

// engine.kernel_tables "engine": a TensorRT-LLM deployment on a GPU with TensorRT-LLM's own
// operator tables (profiles/h100_sxm/aiconfigurator_trtllm) is priced from them first; by
// default, and for every other engine, from the generic tables as before.
TEST(GoldenEngineTables, TrtllmPricesFromItsOwnTablesOnlyWhenAsked) {
  const auto root = scenarios::DataRoot::discover();
  const auto cost_model = [&](const std::string& engine) {
    scenarios::Json doc = scenarios::Json::parse(R"({
      "model": "qwen3-32b",
      "cluster": {"gpu": "h100_sxm", "weight_dtype": "fp8", "kv_dtype": "fp8"},
      "workload": {"type": "generated", "arrival": {"rate": 1.0}, "count": 4,
                   "lengths": {"type": "fixed", "prompt": 100, "output": 4}}})");
    doc["engine"] = scenarios::Json::parse(engine);
    return std::move(scenarios::build_engine_inputs(
                         scenarios::parse_scenario(doc, "t.json", ".", root), root)
                         .instances[0]
                         .cost_model);
  };
  const char* kOwn = "own operator tables first (";
  const auto own = cost_model(R"({"type": "trtllm", "kernel_tables": "engine"})");
  const auto generic = cost_model(R"({"type": "trtllm"})");
  EXPECT_NE(own->describe().find(kOwn), std::string::npos) << own->describe();
  EXPECT_NE(own->describe().find("h100_sxm/aiconfigurator_trtllm)"), std::string::npos);
  EXPECT_EQ(generic->describe().find(kOwn), std::string::npos) << generic->describe();
  EXPECT_EQ(cost_model(R"({"type": "vllm"})")->describe().find(kOwn), std::string::npos);
  // TensorRT-LLM's FP8 GEMMs of a long prompt are faster than the generic (vLLM) tables say.
  models::BatchShape prompt;
  prompt.segments.push_back({4096, 4096, 1});
  EXPECT_LT(own->iteration_time(prompt), generic->iteration_time(prompt));
}

// A MoE kernel scale stands for the engine's MoE kernels against the generic tables: experts
// priced from the engine's own MoE rows take none.
TEST(GoldenEngineTables, OwnMoeRowsTakeNoMoeKernelScale) {
  const auto root = scenarios::DataRoot::discover();
  const auto decode_time = [&](const std::string& tables, double scale) {
    scenarios::Json doc = scenarios::Json::parse(R"({
      "model": "qwen3-235b-a22b",
      "cluster": {"gpu": "h100_sxm", "tp": 4, "ep": 4, "weight_dtype": "fp8_block",
                  "kv_dtype": "fp8"},
      "workload": {"type": "generated", "arrival": {"rate": 1.0}, "count": 4,
                   "lengths": {"type": "fixed", "prompt": 100, "output": 4}}})");
    doc["engine"] = {{"type", "trtllm"}, {"kernel_tables", tables}, {"moe_kernel_scale", scale}};
    const auto in =
        scenarios::build_engine_inputs(scenarios::parse_scenario(doc, "t.json", ".", root), root);
    models::BatchShape decode;
    for (int i = 0; i < 32; ++i) decode.segments.push_back({1, 2000, 1});
    return in.instances[0].cost_model->iteration_time(decode);
  };
  EXPECT_EQ(decode_time("engine", 2.0), decode_time("engine", 1.0));
  EXPECT_GT(decode_time("generic", 2.0), decode_time("generic", 1.0));
}

// Attention data parallelism: an instance of 8 one-GPU ranks counts 8 GPUs, keeps 8 KV pools, and
// with MLA (a latent every rank of a TP group would replicate) holds several times the KV tokens
// of the same GPUs under TP 8. A run charges its GPU-seconds on all 8 GPUs.
TEST(GoldenMoe, AttentionDataParallelRanksKeepTheirOwnKvAndCountEveryGpu) {
  const auto root = scenarios::DataRoot::discover();
  const scenarios::Json doc = scenarios::Json::parse(R"({
    "model": "deepseek-v3",
    "cluster": {"gpu": "b200_sxm", "tp": 1, "attention_dp": 8, "ep": 8,
                "weight_dtype": "fp8_block", "kv_dtype": "fp8"},
    "policy": {"type": "coloc", "max_num_seqs": 512},
    "workload": {"type": "generated", "arrival": {"rate": 4.0}, "count": 40,
                 "lengths": {"type": "fixed", "prompt": 1000, "output": 20}},
    "output": {"sample_interval": "0s"}})");
  const scenarios::Scenario s = scenarios::parse_scenario(doc, "t.json", ".", root);
  ASSERT_EQ(s.groups.size(), 1u);
  EXPECT_EQ(s.groups[0].gpus_per_instance(), 8);
  scenarios::Json tp8 = doc;
  tp8["cluster"]["tp"] = 8;
  tp8["cluster"]["attention_dp"] = 1;
  const scenarios::Scenario t = scenarios::parse_scenario(tp8, "t.json", ".", root);
  const double ratio = static_cast<double>(s.groups[0].memory.num_blocks) /
                       static_cast<double>(t.groups[0].memory.num_blocks);
  // 8 pools of whole latents, each somewhat smaller: every rank holds the 17 B parameters
  // outside the routed experts, which TP 8 shards.
  EXPECT_GT(ratio, 6.0);
  EXPECT_LT(ratio, 8.0);
  const scenarios::EngineInputs in = scenarios::build_engine_inputs(s, root);
  EXPECT_NE(in.instances[0].cost_model->describe().find("attention DP tp1 dp8 ep8"),
            std::string::npos);
  const app::RunOutcome o = app::run_scenario(s, root, app::RunOptions{});
  EXPECT_EQ(o.result.requests_finished, 40);
  EXPECT_EQ(o.result.num_gpus, 8);
}

// Disaggregated pools with their own attention DP: the decode pool of 16-rank instances and the
// prefill pool of TP-4 instances each get their layout's cost model, and the GPUs add up.
TEST(GoldenMoe, DisaggregatedPoolsTakeTheirOwnAttentionDataParallelism) {
  const auto root = scenarios::DataRoot::discover();
  scenarios::Json doc = scenarios::Json::parse(R"({
    "model": "deepseek-r1",
    "cluster": {"gpu": "gb200_nvl72", "weight_dtype": "fp8_block", "kv_dtype": "fp8"},
    "policy": {"type": "disagg", "num_prefill": 2, "num_decode": 1, "tp_prefill": 4,
               "ep_prefill": 4, "tp_decode": 1, "attention_dp_decode": 16, "ep_decode": 16},
    "workload": {"type": "generated", "arrival": {"rate": 2.0}, "count": 20,
                 "lengths": {"type": "fixed", "prompt": 2000, "output": 20}},
    "output": {"sample_interval": "0s"}})");
  const scenarios::Scenario s = scenarios::parse_scenario(doc, "t.json", ".", root);
  ASSERT_EQ(s.groups.size(), 2u);
  EXPECT_EQ(s.groups[0].gpus_per_instance(), 4);
  EXPECT_EQ(s.groups[1].gpus_per_instance(), 16);
  const scenarios::EngineInputs in = scenarios::build_engine_inputs(s, root);
  ASSERT_EQ(in.instances.size(), 3u);
  EXPECT_NE(in.instances[0].cost_model->describe().find("tp4 ep4"), std::string::npos);
  EXPECT_NE(in.instances[2].cost_model->describe().find("attention DP tp1 dp16 ep16"),
            std::string::npos);
  const app::RunOutcome o = app::run_scenario(s, root, app::RunOptions{});
  EXPECT_EQ(o.result.requests_finished, 20);
  EXPECT_EQ(o.result.num_gpus, 2 * 4 + 16);
  // Experts that cannot cover a pool's ranks name that pool's knob.
  doc["policy"]["attention_dp_decode"] = 3;
  try {
    scenarios::parse_scenario(doc, "t.json", ".", root);
    ADD_FAILURE() << "ep 16 over 3 ranks accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("policy.ep_decode"), std::string::npos) << e.what();
  }
}

// Pipeline parallelism: an instance of 2 stages of TP 4 counts 8 GPUs and runs as 2 engine
// instances (micro-batch slots) sharing its KV; each slot's pass is the TP-4 pass plus one
// hand-off, so a pipeline serves about as much as two TP-4 replicas, with more KV per GPU (each
// stage holds half the weights). A run charges its GPU-seconds on all 8 GPUs.
TEST(GoldenPipeline, StagesRunAsMicroBatchSlotsSharingTheKv) {
  const auto root = scenarios::DataRoot::discover();
  const scenarios::Json doc = scenarios::Json::parse(R"({
    "model": "llama-3.1-70b",
    "cluster": {"gpu": "h100_sxm", "tp": 4, "pp": 2},
    "policy": {"type": "coloc"},
    "workload": {"type": "generated", "arrival": {"rate": 4.0}, "count": 200,
                 "lengths": {"type": "fixed", "prompt": 1000, "output": 50}},
    "output": {"sample_interval": "0s"}})");
  const scenarios::Scenario s = scenarios::parse_scenario(doc, "t.json", ".", root);
  ASSERT_EQ(s.groups.size(), 1u);
  EXPECT_EQ(s.groups[0].gpus_per_instance(), 8);
  EXPECT_EQ(s.groups[0].engine_instances(), 2);
  scenarios::Json replicas = doc;
  replicas["cluster"]["pp"] = 1;
  replicas["cluster"]["instances"] = 2;
  const scenarios::Scenario r = scenarios::parse_scenario(replicas, "t.json", ".", root);
  // Per GPU the stage holds half the weights and half the layers' KV per token.
  EXPECT_LT(s.groups[0].memory.weight_bytes_per_gpu, r.groups[0].memory.weight_bytes_per_gpu);
  EXPECT_EQ(2 * s.groups[0].memory.kv_bytes_per_token_per_gpu,
            r.groups[0].memory.kv_bytes_per_token_per_gpu);
  const scenarios::EngineInputs in = scenarios::build_engine_inputs(s, root);
  const scenarios::EngineInputs rin = scenarios::build_engine_inputs(r, root);
  ASSERT_EQ(in.instances.size(), 2u);
  EXPECT_EQ(in.instances[0].num_blocks, s.groups[0].memory.num_blocks / 2);
  EXPECT_GT(in.instances[0].num_blocks, rin.instances[0].num_blocks);
  EXPECT_EQ(in.instances[0].tp, 4);
  EXPECT_NE(in.instances[0].cost_model->describe().find("pipeline tp4 pp2"), std::string::npos);
  models::BatchShape step;
  for (int i = 0; i < 32; ++i) step.segments.push_back({1, 1000, 1});
  const Duration piped = in.instances[0].cost_model->iteration_time(step);
  const Duration plain = rin.instances[0].cost_model->iteration_time(step);
  EXPECT_GT(piped, plain);
  EXPECT_LT(piped, plain + Duration{100'000});  // one hand-off of 32 tokens: tens of us
  const app::RunOutcome o = app::run_scenario(s, root, app::RunOptions{});
  const app::RunOutcome ro = app::run_scenario(r, root, app::RunOptions{});
  EXPECT_EQ(o.result.requests_finished, 200);
  EXPECT_EQ(o.result.num_gpus, 8);
  EXPECT_NEAR(o.result.gpu_seconds / ro.result.gpu_seconds, 1.0, 0.02);
}

TEST(Capacity, BisectionBracketsTheLargestRateMeetingTheSlo) {
  const auto root = scenarios::DataRoot::discover();
  app::CapacityOptions options;
  options.slo = {"ttft_p90=500ms"};
  std::ostringstream log;
  const app::CapacityResult r = app::find_capacity(
      "tests/golden/scenarios/quickstart/scenario.json",
      {R"(workload={"type":"generated","arrival":{"process":"poisson","rate":5.0},"count":300,)"
       R"("lengths":{"type":"fixed","prompt":1024,"output":64}})"},
      options, root, log);
  ASSERT_GT(r.capacity_rps, 0) << log.str();
  double lowest_violating = 1e300;
  for (const auto& p : r.probes) {
    if (p.meets) {
      EXPECT_LE(p.summary.ttft_s.p90, 0.5);
      EXPECT_LE(p.rate, r.capacity_rps);
    } else {
      lowest_violating = std::min(lowest_violating, p.rate);
    }
  }
  ASSERT_LT(lowest_violating, 1e300) << "the search never found a violating rate";
  EXPECT_GT(lowest_violating, r.capacity_rps);
  EXPECT_LE((lowest_violating - r.capacity_rps) / lowest_violating, options.relative_tolerance);
}

TEST(Capacity, MalformedSloIsAConfigError) {
  const auto root = scenarios::DataRoot::discover();
  app::CapacityOptions options;
  options.slo = {"tbt_p42=1s", "ttft=soon"};
  std::ostringstream log;
  try {
    app::find_capacity("scenarios/quickstart.json", {}, options, root, log);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.issues().size(), 2u);
    EXPECT_EQ(e.issues()[0].path, "--slo tbt_p42=1s");
    EXPECT_EQ(e.issues()[1].path, "--slo ttft=soon");
  }
}

}  // namespace
}  // namespace servesim
