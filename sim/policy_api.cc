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

}  // namespace servesim::sim
