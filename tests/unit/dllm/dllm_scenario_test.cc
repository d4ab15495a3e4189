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

TEST(DllmScenario, ShippedScenariosValidate) {
  for (const char* f : {"l40s_livebench", "l40s_burst", "l40s_osc", "rtx4090_livebench",
                        "rtx4090_burst", "rtx4090_osc"}) {
    const std::string path = std::string("scenarios/dllm/") + f + ".json";
    EXPECT_TRUE(is_dllm_scenario_file(path)) << path;
    EXPECT_NO_THROW(load_dllm_scenario(path, {}, DataRoot::discover())) << path;
  }
  EXPECT_FALSE(is_dllm_scenario_file("scenarios/quickstart.json"));
}

}  // namespace
}  // namespace servesim::scenarios
