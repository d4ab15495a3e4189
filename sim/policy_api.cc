#include "sim/policy_api.h"

namespace servesim::sim {

Registry<BatchingPolicyEntry>& batching_policies() {
  static Registry<BatchingPolicyEntry> registry("batching policy");
  return registry;
}

std::vector<std::string> batching_policy_names(ServedModel kind) {
  std::vector<std::string> out;
  for (const auto& [name, entry] : batching_policies().entries()) {
    if (entry.serves == kind) out.push_back(name);
  }
  return out;
}

Registry<RoutingPolicyEntry>& routing_policies() {
  static Registry<RoutingPolicyEntry> registry("router");
  return registry;
}

Registry<ClusterPolicyEntry>& cluster_policies() {
  static Registry<ClusterPolicyEntry> registry("cluster policy");
  return registry;
}

}  // namespace servesim::sim
