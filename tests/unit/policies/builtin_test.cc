#include "policies/builtin.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "policies/coloc.h"
#include "sim/policy_api.h"

namespace servesim::policies {
namespace {

TEST(BuiltinPolicies, RegistersColoc) {
  register_builtin_policies();
  register_builtin_policies();  // a second call is harmless
  const auto& reg = sim::batching_policies();
  ASSERT_TRUE(reg.contains("coloc"));
  const auto& entry = reg.get("coloc");
  EXPECT_FALSE(entry.description.empty());
  EXPECT_EQ(entry.schema.size(), coloc_schema().size());
  auto policy = entry.make(ParamValues::defaults(entry.schema));
  ASSERT_NE(policy, nullptr);
  // The made policy decides like make_coloc() with the defaults: nothing to do on an empty view.
  const std::vector<sim::SeqView> running;
  const std::deque<sim::SeqView> waiting;
  sim::BatchPlan plan;
  EXPECT_FALSE(policy->next_batch({time_from_ns(0), 0, 16, 10, 10, &running, &waiting}, plan));
}

TEST(BuiltinPolicies, UnknownBatchingPolicyListsTheValidNames) {
  register_builtin_policies();
  const auto& reg = sim::batching_policies();
  const auto names = reg.names();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_NE(std::find(names.begin(), names.end(), "coloc"), names.end());
  try {
    reg.get("nope");
    FAIL() << "get(\"nope\") did not throw";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    const std::string prefix = "unknown batching policy \"nope\"; valid values are: ";
    ASSERT_EQ(msg.substr(0, prefix.size()), prefix) << msg;
    std::string listed;
    for (const auto& n : names) listed += (listed.empty() ? "" : ", ") + n;
    EXPECT_EQ(msg.substr(prefix.size()), listed);
    EXPECT_NE(msg.find("coloc"), std::string::npos);
  }
}

TEST(BuiltinPolicies, RegistersTheRouters) {
  register_builtin_policies();
  const auto& reg = sim::routing_policies();
  for (const char* name : {"round_robin", "least_outstanding", "least_kv_load"}) {
    ASSERT_TRUE(reg.contains(name)) << name;
    EXPECT_NE(reg.get(name).make(ParamValues{}), nullptr) << name;
  }
  try {
    reg.get("random");
    FAIL() << "get(\"random\") did not throw";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("unknown router \"random\"; valid values are: ", 0), 0u) << msg;
    EXPECT_NE(msg.find("least_kv_load, least_outstanding"), std::string::npos) << msg;
    EXPECT_NE(msg.find("round_robin"), std::string::npos) << msg;
  }
}

TEST(BuiltinPolicies, RegisteredRouterRoutes) {
  register_builtin_policies();
  auto router = sim::routing_policies().get("least_outstanding").make(ParamValues{});
  std::vector<sim::InstanceLoad> inst(3);
  inst[0].outstanding = 2;
  inst[1].outstanding = 1;
  inst[2].outstanding = 1;
  EXPECT_EQ(router->route({time_from_ns(0), &inst, 16}, RequestSpec{}), 1);
}

}  // namespace
}  // namespace servesim::policies
