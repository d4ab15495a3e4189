#include "sim/policy_api.h"

namespace servesim::sim {

Registry<BatchingPolicyEntry>& batching_policies() {
  static Registry<BatchingPolicyEntry> registry("batching policy");
  return registry;
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
