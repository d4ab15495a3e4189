// Cluster routers: pick the instance that takes an arriving request.
//   round_robin        - cycle over accepting instances in index order
//   least_outstanding  - fewest requests routed and not finished (ties: lowest index)
//   least_kv_load      - lowest (used + queued-prompt) KV blocks / total (ties: lowest index)
//   kv_aware           - lowest overlap_weight x (uncached prompt blocks + queued prompt blocks)
//                        + used blocks, the uncached part from the instances' prefix caches
//                        (Dynamo's KV router cost; ties: lowest index)
#pragma once

#include <memory>

#include "sim/policy_api.h"

namespace servesim::policies {

std::unique_ptr<sim::RoutingPolicy> make_round_robin();
std::unique_ptr<sim::RoutingPolicy> make_least_outstanding();
std::unique_ptr<sim::RoutingPolicy> make_least_kv_load();
std::unique_ptr<sim::RoutingPolicy> make_kv_aware(double overlap_weight);

// The KV blocks of `request`'s prompt that `instance` would have to compute: all of them less
// those its prefix cache holds (none when the view has no prefix lookup: hand-off routing, or
// caching off).
int64_t uncached_prompt_blocks(const sim::ClusterView& view, const sim::InstanceLoad& instance,
                               const RequestSpec& request);

void register_routers();

}  // namespace servesim::policies
