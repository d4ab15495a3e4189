#include "scenarios/dllm_scenario.h"

#include <gtest/gtest.h>

namespace servesim::scenarios {
namespace {

Json base() {
  return Json::parse(R"({"kind": "dllm", "gpu": "l40s",
    "policy": {"type": "dllm-serve"},
    "workload": {"requests": 5, "arrival": {"rate": 1.0},
                 "prompts": {"type": "fixed", "tokens": 300}}})");
}

TEST(DllmScenario, DefaultsAreTable3) {
  const DllmScenario s = parse_dllm_scenario(base(), "t.json", ".", DataRoot::discover());
  EXPECT_EQ(s.model, "llada-8b-instruct");
  EXPECT_EQ(s.config.denoise.gen_length, 256);
  EXPECT_EQ(s.config.denoise.steps, 256);
  EXPECT_EQ(s.config.denoise.block, 32);
  EXPECT_DOUBLE_EQ(s.config.denoise.retention, 0.5);
  EXPECT_EQ(s.config.max_num_logits, 2048);
  EXPECT_EQ(s.resolved["denoise"]["steps"], 256);
  const Workload w = build_dllm_workload(s);
  ASSERT_EQ(w.requests.size(), 5u);
  EXPECT_EQ(w.requests[0].prompt_tokens, 300);
  EXPECT_EQ(build_dllm_workload(s).requests[4].arrival, w.requests[4].arrival);
}

TEST(DllmScenario, PolicyTypeSelectsTheDllmSchemaWithoutKind) {
  Json doc = base();
  EXPECT_TRUE(is_dllm_document(doc, DataRoot::discover()));
  doc.erase("kind");
  EXPECT_TRUE(is_dllm_document(doc, DataRoot::discover()));  // dllm-serve is a dLLM policy
  const DllmScenario s = parse_dllm_scenario(doc, "t.json", ".", DataRoot::discover());
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
    parse_dllm_scenario(doc, "t.json", ".", DataRoot::discover());
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
    parse_dllm_scenario(bad, "t.json", ".", DataRoot::discover());
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.issues().size(), 1u);
    EXPECT_EQ(e.issues()[0].path, "denoise");
    EXPECT_NE(e.issues()[0].message.find("multiple of block"), std::string::npos);
  }
}

TEST(DllmScenario, ClusterAndVariationsDefaultOff) {
  const DllmScenario s = parse_dllm_scenario(base(), "t.json", ".", DataRoot::discover());
  EXPECT_EQ(s.instances, 1);
  EXPECT_EQ(s.tp, 1);
  EXPECT_EQ(s.router, "round_robin");
  EXPECT_FALSE(s.config.variation.any());
  EXPECT_FALSE(s.resolved["denoise"].contains("eos_length"));
  Json doc = base();
  doc["cluster"] = {{"instances", 2}, {"tp", 2}, {"router", "least_outstanding"}};
  doc["denoise"] = {{"eos_length", {{"min", 10}, {"max", 100}}},
                    {"tokens_per_step", {{"min", 1}, {"max", 3}}}};
  const DllmScenario v = parse_dllm_scenario(doc, "t.json", ".", DataRoot::discover());
  EXPECT_EQ(v.instances, 2);
  EXPECT_EQ(dllm_deployment(v, DataRoot::discover()).tp, 2);
  EXPECT_EQ(v.router, "least_outstanding");
  EXPECT_EQ(v.config.variation.eos_min, 10);
  EXPECT_EQ(v.config.variation.eos_max, 100);
  EXPECT_EQ(v.config.variation.accept_max, 3);
}

TEST(DllmScenario, ClusterAndVariationErrorsCarryTheirPaths) {
  const auto issues_of = [](const Json& doc) {
    try {
      parse_dllm_scenario(doc, "t.json", ".", DataRoot::discover());
    } catch (const ConfigError& e) {
      std::vector<std::string> paths;
      for (const auto& i : e.issues()) paths.push_back(i.path);
      return paths;
    }
    return std::vector<std::string>{};
  };
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

TEST(DllmScenario, ShippedScenariosValidate) {
  for (const char* f : {"l40s_livebench", "l40s_burst", "l40s_osc", "rtx4090_livebench",
                        "rtx4090_burst", "rtx4090_osc"}) {
    const std::string path = std::string("scenarios/dllm/") + f + ".json";
    EXPECT_TRUE(is_dllm_scenario_file(path, DataRoot::discover())) << path;
    EXPECT_NO_THROW(load_dllm_scenario(path, {}, DataRoot::discover())) << path;
  }
  EXPECT_FALSE(is_dllm_scenario_file("scenarios/quickstart.json", DataRoot::discover()));
}

}  // namespace
}  // namespace servesim::scenarios
