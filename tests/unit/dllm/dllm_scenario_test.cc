#include "scenarios/dllm_scenario.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "dllm/denoise.h"
#include "policies/builtin.h"
#include "policies/dllm.h"
#include "sim/policy_api.h"

namespace servesim::scenarios {
namespace {

Json base() {
  return Json::parse(R"({"kind": "dllm", "gpu": "l40s",
    "policy": {"type": "dllm-serve"},
    "workload": {"requests": 5, "arrival": {"rate": 1.0},
                 "prompts": {"type": "fixed", "tokens": 300}}})");
}

TEST(DllmScenario, DefaultsAreTable3) {
  const Scenario s = parse_scenario(base(), "t.json", ".", DataRoot::discover());
  EXPECT_EQ(s.model, "llada-8b-instruct");
  EXPECT_EQ(s.dllm->config.denoise.gen_length, 256);
  EXPECT_EQ(s.dllm->config.denoise.steps, 256);
  EXPECT_EQ(s.dllm->config.denoise.block, 32);
  EXPECT_DOUBLE_EQ(s.dllm->config.denoise.retention, 0.5);
  EXPECT_EQ(s.dllm->config.max_num_logits, 2048);
  EXPECT_EQ(s.resolved["denoise"]["steps"], 256);
  const Workload w = build_dllm_workload(s, DataRoot::discover());
  ASSERT_EQ(w.requests.size(), 5u);
  EXPECT_EQ(w.requests[0].prompt_tokens, 300);
  EXPECT_EQ(build_dllm_workload(s, DataRoot::discover()).requests[4].arrival, w.requests[4].arrival);
}

TEST(DllmScenario, PolicyTypeSelectsTheDllmSchemaWithoutKind) {
  Json doc = base();
  EXPECT_TRUE(is_dllm_document(doc, DataRoot::discover()));
  doc.erase("kind");
  EXPECT_TRUE(is_dllm_document(doc, DataRoot::discover()));  // dllm-serve is a dLLM policy
  const Scenario s = parse_scenario(doc, "t.json", ".", DataRoot::discover());
  EXPECT_EQ(s.resolved["kind"], "dllm");
  for (const char* type : {"fast-dllm", "dllm-cache", "sparse-dllm", "vanilla"}) {
    doc["policy"]["type"] = type;
    EXPECT_TRUE(is_dllm_document(doc, DataRoot::discover())) << type;
  }
  doc["policy"]["type"] = "coloc";
  EXPECT_FALSE(is_dllm_document(doc, DataRoot::discover()));
  doc["policy"] = "dllm-serve";  // not an object: not recognised (the LLM parser says why)
  EXPECT_FALSE(is_dllm_document(doc, DataRoot::discover()));
  // A diffusion model picks the dLLM schema too (its parser then names a wrong policy type).
  doc["policy"] = Json::parse(R"({"type": "coloc"})");
  doc["model"] = "dream-v0-instruct-7b";
  EXPECT_TRUE(is_dllm_document(doc, DataRoot::discover()));
  doc["model"] = "llama-3.1-8b";
  EXPECT_FALSE(is_dllm_document(doc, DataRoot::discover()));
  Json llm = Json::parse(R"({"kind": "llm", "policy": {"type": "dllm-serve"}})");
  EXPECT_FALSE(is_dllm_document(llm, DataRoot::discover()));  // an explicit kind decides
}

TEST(DllmScenario, EveryErrorCarriesItsPath) {
  Json doc = base();
  doc["model"] = "llama-3.1-8b";
  doc["policy"]["max_batch_size"] = 4;
  doc["denoise"] = {{"gen_length", 250}};
  doc["workload"]["prompts"] = {{"type", "trace"}, {"format", "azure"}, {"path", "nope.csv"}};
  try {
    parse_scenario(doc, "t.json", ".", DataRoot::discover());
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    std::vector<std::string> paths;
    for (const auto& i : e.issues()) paths.push_back(i.path);
    EXPECT_NE(std::find(paths.begin(), paths.end(), "model"), paths.end());
    EXPECT_NE(std::find(paths.begin(), paths.end(), "policy.max_batch_size"), paths.end());
    EXPECT_NE(std::find(paths.begin(), paths.end(), "workload.prompts.path"), paths.end());
  }
  Json bad = base();
  bad["denoise"] = {{"gen_length", 250}};
  try {
    parse_scenario(bad, "t.json", ".", DataRoot::discover());
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.issues().size(), 1u);
    EXPECT_EQ(e.issues()[0].path, "denoise");
    EXPECT_NE(e.issues()[0].message.find("multiple of block"), std::string::npos);
  }
}

TEST(DllmScenario, ClusterAndVariationsDefaultOff) {
  const Scenario s = parse_scenario(base(), "t.json", ".", DataRoot::discover());
  EXPECT_EQ(s.cluster.instances, 1);
  EXPECT_EQ(s.cluster.tp, 1);
  EXPECT_EQ(s.router.type, "round_robin");
  EXPECT_FALSE(s.dllm->config.variation.any());
  EXPECT_FALSE(s.resolved["denoise"].contains("eos_length"));
  Json doc = base();
  doc["cluster"] = {{"instances", 2}, {"tp", 2}, {"router", "least_outstanding"}};
  doc["denoise"] = {{"eos_length", {{"min", 10}, {"max", 100}}},
                    {"tokens_per_step", {{"min", 1}, {"max", 3}}}};
  const Scenario v = parse_scenario(doc, "t.json", ".", DataRoot::discover());
  EXPECT_EQ(v.cluster.instances, 2);
  EXPECT_EQ(dllm_deployment(v, DataRoot::discover()).tp, 2);
  EXPECT_EQ(v.router.type, "least_outstanding");
  EXPECT_EQ(v.dllm->config.variation.eos_min, 10);
  EXPECT_EQ(v.dllm->config.variation.eos_max, 100);
  EXPECT_EQ(v.dllm->config.variation.accept_max, 3);
}

// The issues parse_scenario() reports for `doc`: their paths, or "path: message" lines.
std::vector<std::string> issues_of(const Json& doc, bool with_messages = false) {
  try {
    parse_scenario(doc, "t.json", ".", DataRoot::discover());
  } catch (const ConfigError& e) {
    std::vector<std::string> out;
    for (const auto& i : e.issues()) out.push_back(with_messages ? i.path + ": " + i.message : i.path);
    return out;
  }
  return {};
}

TEST(DllmScenario, ClusterAndVariationErrorsCarryTheirPaths) {
  Json doc = base();
  doc["cluster"] = {{"instances", 0}, {"tp", 3}, {"router", "nope"}};
  EXPECT_EQ(issues_of(doc), (std::vector<std::string>{"cluster.instances", "cluster.router",
                                                       "cluster.tp"}));
  doc = base();
  doc["denoise"] = {{"eos_length", {{"min", 10}}}};
  EXPECT_EQ(issues_of(doc), (std::vector<std::string>{"denoise.eos_length.max"}));
  doc = base();
  doc["denoise"] = {{"tokens_per_step", {{"min", 4}, {"max", 2}}}};
  EXPECT_EQ(issues_of(doc), (std::vector<std::string>{"denoise"}));
  doc = base();
  doc["denoise"] = {{"tokens_per_step", {{"min", 1}, {"max", 64}}}};  // over the 32-token block
  EXPECT_EQ(issues_of(doc), (std::vector<std::string>{"denoise"}));
}

// Every dLLM policy's knobs come from its registry entry: listed, validated and applied alike.
TEST(DllmScenario, PolicyKnobsComeFromTheRegistry) {
  policies::register_builtin_policies();
  std::vector<std::string> algorithms = dllm::algorithm_names();
  std::sort(algorithms.begin(), algorithms.end());
  EXPECT_EQ(sim::batching_policy_names(sim::ServedModel::kDiffusion), algorithms);
  for (const std::string& name : dllm::algorithm_names()) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(sim::batching_policies().contains(name));
    EXPECT_FALSE(sim::batching_policies().get(name).make);  // built by policies/dllm.h
    Json doc = base();
    doc["policy"] = {{"type", name}};
    const Scenario s = parse_scenario(doc, "t.json", ".", DataRoot::discover());
    // The defaults of a policy section without knobs are the schema's defaults.
    dllm::DllmConfig expected;
    expected.algorithm = dllm::parse_algorithm(name);
    policies::apply_dllm_policy_params(
        ParamValues::defaults(sim::batching_policies().get(name).schema), expected);
    EXPECT_EQ(s.dllm->config.max_num_batched_tokens, expected.max_num_batched_tokens);
    EXPECT_EQ(s.dllm->config.max_batch_size, expected.max_batch_size);
    EXPECT_EQ(s.dllm->config.request_overhead, expected.request_overhead);
    // The scenario names the policy and its knobs as it names any other.
    EXPECT_EQ(s.policy.type, name);
    EXPECT_EQ(s.policy.params.get_duration("request_overhead"), expected.request_overhead);
    // A knob of the other family is an unknown key of this policy.
    const bool serve = name == "dllm-serve";
    doc["policy"][serve ? "max_batch_size" : "max_num_logits"] = 4;
    try {
      parse_scenario(doc, "t.json", ".", DataRoot::discover());
      FAIL() << "expected ConfigError";
    } catch (const ConfigError& e) {
      ASSERT_EQ(e.issues().size(), 1u);
      EXPECT_EQ(e.issues()[0].path, serve ? "policy.max_batch_size" : "policy.max_num_logits");
      EXPECT_NE(e.issues()[0].message.find("unknown key"), std::string::npos)
          << e.issues()[0].message;
    }
  }
  // dllm-serve's fitted host time per request is its default; a scenario may set it.
  Json doc = base();
  doc["policy"]["request_overhead"] = "1ms";
  doc["policy"]["max_num_logits"] = 1024;
  const Scenario s = parse_scenario(doc, "t.json", ".", DataRoot::discover());
  EXPECT_EQ(s.dllm->config.request_overhead, Duration{1'000'000});
  EXPECT_EQ(s.dllm->config.max_num_logits, 1024);
  EXPECT_EQ(
      parse_scenario(base(), "t.json", ".", DataRoot::discover()).dllm->config.request_overhead,
      dllm::kDllmServeRequestOverhead);
}

// One parser reads both kinds: a document is a dLLM scenario by its policy or its model, and an
// LLM scenario's policy section offers only the policies serving autoregressive models.
TEST(DllmScenario, TheOneParserTellsTheKindsApart) {
  const Scenario d = parse_scenario(base(), "t.json", ".", DataRoot::discover());
  ASSERT_TRUE(d.dllm.has_value());
  EXPECT_EQ(d.policy.type, "dllm-serve");
  EXPECT_EQ(d.cluster.gpu, "l40s");
  EXPECT_TRUE(d.groups.empty());  // no LLM instance groups
  const Json llm = Json::parse(R"({"model": "llama-3.1-8b", "cluster": {"gpu": "h100_sxm"},
    "policy": {"type": "nope"},
    "workload": {"type": "generated", "count": 2, "arrival": {"rate": 1},
                 "lengths": {"type": "fixed", "prompt": 10, "output": 10}}})");
  const std::vector<std::string> got = issues_of(llm, true);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].rfind("policy.type: expected one of coloc, ", 0), 0u) << got[0];
  for (const std::string& name : dllm::algorithm_names()) {
    EXPECT_EQ(got[0].find(name), std::string::npos) << got[0];
  }
}

// The ordinary scenario form: cluster.gpu, a router section, an LLM workload section, an slo.
Json ordinary() {
  return Json::parse(R"({"model": "llada-8b-instruct",
    "cluster": {"gpu": "l40s", "instances": 2, "tp": 1},
    "router": {"type": "least_outstanding"},
    "policy": {"type": "dllm-serve"},
    "denoise": {"gen_length": 64, "steps": 64, "block": 32},
    "workload": {"type": "generated", "count": 20,
                 "arrival": {"process": "poisson", "rate": 2.0},
                 "lengths": {"type": "fixed", "prompt": 200, "output": 999}},
    "slo": {"ttft": "30s", "attainment_target": 0.95}})");
}

TEST(DllmScenario, OrdinaryFormParsesLikeAnLlmScenario) {
  const DataRoot root = DataRoot::discover();
  const Json doc = ordinary();
  ASSERT_TRUE(is_dllm_document(doc, root));
  const Scenario s = parse_scenario(doc, "t.json", ".", root);
  EXPECT_EQ(s.cluster.gpu, "l40s");
  EXPECT_EQ(s.cluster.instances, 2);
  EXPECT_EQ(s.router.type, "least_outstanding");
  ASSERT_TRUE(s.slo.ttft.has_value());
  EXPECT_EQ(*s.slo.ttft, Duration{30'000'000'000});
  EXPECT_DOUBLE_EQ(s.slo.attainment_target, 0.95);
  EXPECT_EQ(dllm_rate_knob(s), "workload.arrival.rate");
  EXPECT_DOUBLE_EQ(dllm_offered_rate(s, root), 2.0);
  const Workload w = build_dllm_workload(s, root);
  ASSERT_EQ(w.requests.size(), 20u);
  for (const RequestSpec& r : w.requests) {
    EXPECT_EQ(r.prompt_tokens, 200);
    EXPECT_EQ(r.output_tokens, 64);  // gen_length, not the workload's output length
  }
  // Same seed, same arrivals; the generated workload is the LLM scenario's own.
  EXPECT_EQ(build_dllm_workload(s, root).requests[7].arrival, w.requests[7].arrival);
}

TEST(DllmScenario, OrdinaryTraceWorkloadKeepsItsArrivalsAndScalesByRate) {
  const DataRoot root = DataRoot::discover();
  Json doc = ordinary();
  doc["workload"] = Json::parse(R"({"type": "trace", "format": "azure",
    "path": "traces/data/azure_llm_2023/AzureLLMInferenceTrace_code.csv", "first_n": 50})");
  const Scenario s = parse_scenario(doc, "t.json", ".", root);
  EXPECT_EQ(dllm_rate_knob(s), "workload.rate");
  const Workload w = build_dllm_workload(s, root);
  ASSERT_EQ(w.requests.size(), 50u);
  EXPECT_EQ(w.requests[0].output_tokens, 64);
  const double rate = dllm_offered_rate(s, root);
  EXPECT_DOUBLE_EQ(rate, 49 / to_seconds(w.requests.back().arrival));
  doc["workload"]["rate"] = 2 * rate;
  const Scenario faster = parse_scenario(doc, "t.json", ".", root);
  EXPECT_NEAR(dllm_offered_rate(faster, root), 2 * rate, 1e-6 * rate);
}

TEST(DllmScenario, OrdinaryFormErrorsCarryTheirPaths) {
  const auto one_issue_at = [](const Json& doc, const std::string& path,
                               const std::string& words) {
    const std::vector<std::string> got = issues_of(doc, true);
    ASSERT_EQ(got.size(), 1u) << (got.empty() ? "no error" : got[0]);
    EXPECT_EQ(got[0].rfind(path + ": ", 0), 0u) << got[0];
    EXPECT_NE(got[0].find(words), std::string::npos) << got[0];
  };
  Json doc = ordinary();
  doc["gpu"] = "l40s";
  one_issue_at(doc, "cluster.gpu", "not both");
  doc = ordinary();
  doc["cluster"].erase("gpu");
  one_issue_at(doc, "cluster.gpu", "is required");
  doc = ordinary();
  doc["cluster"]["router"] = "round_robin";
  one_issue_at(doc, "cluster.router", "not both");
  doc = ordinary();
  doc["slo"]["tpot"] = "50ms";
  one_issue_at(doc, "slo.tpot", "no TPOT");
  doc = ordinary();
  doc["workload"] = Json::parse(R"({"type": "closed_loop", "clients": 4, "count": 10,
    "lengths": {"type": "fixed", "prompt": 10, "output": 10}})");
  one_issue_at(doc, "workload.type", "open-loop");
  doc = ordinary();
  doc["workload"]["arrival"]["rate"] = -1;
  one_issue_at(doc, "workload.arrival.rate", "");
  doc = ordinary();
  doc["router"]["bogus"] = 1;
  one_issue_at(doc, "router.bogus", "unknown key");
}

TEST(DllmScenario, ShippedScenariosValidate) {
  for (const char* f : {"l40s_livebench", "l40s_burst", "l40s_osc", "rtx4090_livebench",
                        "rtx4090_burst", "rtx4090_osc", "l40s_azure_code"}) {
    const std::string path = std::string("scenarios/dllm/") + f + ".json";
    EXPECT_TRUE(load_scenario(path, {}, DataRoot::discover()).dllm.has_value()) << path;
  }
  EXPECT_FALSE(load_scenario("scenarios/quickstart.json", {}, DataRoot::discover()).dllm);
}

}  // namespace
}  // namespace servesim::scenarios
