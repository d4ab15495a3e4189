// Registry entries own their knobs: a batching policy sizes its instances' memory with its own
// knob names (BatchingPolicyEntry::size_memory), a cluster policy checks its own section against
// the layout and workload (ClusterPolicyEntry::check), and an engine spells a benchmark's limits
// with its own knobs (EngineModelEntry::benchmark_knobs). The policies here are registered by the
// test alone: the scenario parser knows nothing of them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "policies/builtin.h"
#include "policies/coloc.h"
#include "policies/engines/engine_model.h"
#include "scenarios/scenario.h"
#include "sim/policy_api.h"

namespace servesim {
namespace {

const scenarios::DataRoot& root() {
  static const scenarios::DataRoot r = scenarios::DataRoot::discover();
  return r;
}

// A batching policy whose KV block size is its knob "page_tokens", and a cluster policy of two
// unified instances whose knob "gpu_cap" must hold its starting layout and which refuses arrivals
// that depend on the run.
void register_test_policies() {
  static const bool once = [] {
    policies::register_builtin_policies();
    sim::batching_policies().add(
        "test_paged",
        {"test: coloc scheduling, memory sized by its own knob",
         {{"page_tokens", ParamType::kInt, int64_t{16}, "tokens", "KV block", {}, 1.0, 256.0}},
         [](const ParamValues&) { return policies::make_coloc(policies::ColocParams{}); },
         [](const ParamValues& v, models::MemoryParams& memory) {
           memory.block_size = v.get_int("page_tokens");
           memory.max_num_seqs = 7;
         },
         /*max_prompt_tokens=*/{}});
    sim::cluster_policies().add(
        "test_pool",
        {"test: two unified instances under a GPU cap",
         {{"gpu_cap", ParamType::kInt, int64_t{8}, "GPUs", "GPUs at most", {}, 1.0, 64.0}},
         [](const ParamValues&) {
           sim::ClusterLayout layout;
           sim::InstanceGroup g;
           g.count = 2;
           g.make_batching = [](const sim::InstanceContext&) {
             return policies::make_coloc(policies::ColocParams{});
           };
           layout.groups.push_back(g);
           return layout;
         },
         [](const ParamValues& v, const sim::ClusterPolicyFacts& facts) {
           std::vector<ConfigIssue> issues;
           if (facts.starting_gpus > v.get_int("gpu_cap")) {
             issues.push_back({"policy.gpu_cap",
                               "starts with " + std::to_string(facts.starting_gpus) + " GPUs"});
           }
           if (!facts.run_dependent_arrivals.empty()) {
             issues.push_back({"policy", "arrivals of a " + facts.run_dependent_arrivals});
           }
           return issues;
         }});
    return true;
  }();
  (void)once;
}

scenarios::Json quickstart_with_policy(const scenarios::Json& policy) {
  scenarios::Json doc = scenarios::Json::parse(scenarios::embedded_quickstart_json());
  doc["policy"] = policy;
  doc["cluster"].erase("instances");
  doc["cluster"].erase("tp");
  return doc;
}

// The issues of a scenario that fails validation, as "path: message" lines.
std::string issues_of(const scenarios::Json& doc) {
  try {
    scenarios::parse_scenario(doc, "test", ".", root());
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(PluginKnobs, BatchingPolicySizesMemoryWithItsOwnKnobs) {
  register_test_policies();
  const scenarios::Scenario s = scenarios::parse_scenario(
      quickstart_with_policy({{"type", "test_paged"}, {"page_tokens", 32}}), "test", ".", root());
  ASSERT_EQ(s.groups.size(), 1u);
  EXPECT_EQ(s.groups[0].memory_params.block_size, 32);
  EXPECT_EQ(s.groups[0].memory_params.max_num_seqs, 7);
  // The knobs it did not set keep the plan's defaults.
  EXPECT_EQ(s.groups[0].memory_params.max_num_batched_tokens,
            models::MemoryParams{}.max_num_batched_tokens);
}

TEST(PluginKnobs, ClusterPolicyChecksItsOwnSection) {
  register_test_policies();
  // Two instances of one GPU pass a cap of 2 on an open-loop workload.
  EXPECT_EQ(issues_of(quickstart_with_policy({{"type", "test_pool"}, {"gpu_cap", 2}})), "");
  const std::string capped =
      issues_of(quickstart_with_policy({{"type", "test_pool"}, {"gpu_cap", 1}}));
  EXPECT_NE(capped.find("policy.gpu_cap: starts with 2 GPUs"), std::string::npos) << capped;
  // The facts name a workload whose arrivals depend on the run.
  scenarios::Json closed = quickstart_with_policy({{"type", "test_pool"}, {"gpu_cap", 2}});
  closed["workload"] = {{"type", "closed_loop"},
                        {"clients", 2},
                        {"count", 10},
                        {"lengths", {{"type", "fixed"}, {"prompt", 100}, {"output", 10}}}};
  const std::string closed_issues = issues_of(closed);
  EXPECT_NE(closed_issues.find("policy: arrivals of a closed_loop workload"), std::string::npos)
      << closed_issues;
}

TEST(PluginKnobs, EnginesSpellBenchmarkLimitsWithTheirOwnKnobs) {
  policies::register_builtin_policies();
  const policies::BenchmarkLimits limits{
      .max_batch = 128, .token_budget = 2652, .prefill_tokens = 2524};
  const auto knobs = [&](const std::string& engine) {
    std::string out;
    for (const auto& [name, value] :
         policies::engine_models().get(engine).benchmark_knobs(limits)) {
      out += name + "=" + format_param_value(value) + " ";
    }
    return out;
  };
  EXPECT_EQ(knobs("vllm"),
            "max_num_seqs=128 max_num_batched_tokens=2652 max_cudagraph_capture_size=128 ");
  EXPECT_EQ(knobs("sglang"),
            "max_running_requests=128 cuda_graph_max_bs=128 enable_mixed_chunk=true "
            "chunked_prefill_size=0 max_prefill_tokens=2524 ");
  // TensorRT-LLM's budget is rounded up to whole 32-token blocks.
  EXPECT_EQ(knobs("trtllm"),
            "max_batch_size=128 max_num_tokens=2656 cuda_graph_max_batch_size=128 "
            "cuda_graph_padding=true ");
}

}  // namespace
}  // namespace servesim
