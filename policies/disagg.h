// Policy `disagg`: static prefill/decode disaggregation (policies.md §2, DistServe / Splitwise).
//
// Layout: num_prefill prefill instances (tp_prefill GPUs each) then num_decode decode instances
// (tp_decode each). New requests are routed to prefill instances by the scenario's router; after
// its first token a request's KV moves to the decode instance chosen by `decode_router`, once that
// instance has room (the prefill instance holds the KV meanwhile: back-pressure).
//
// Prefill batching (PrefillOnlyBatcher): FCFS whole prompts until prefill_max_tokens and
// prefill_max_batch_size are reached (the first prompt always fits: it runs alone, chunked at
// prefill_max_tokens when enable_chunked_prefill is set); KV for the whole prompt is reserved at
// admission. Decode batching: continuous batching of every resident request (coloc unified_v1
// with decode_max_num_seqs), preemption by recompute on the decode instance.
#pragma once

#include <cstdint>
#include <memory>

#include "sim/policy_api.h"

namespace servesim::policies {

struct PrefillOnlyParams {
  int64_t max_tokens = 8192;
  int64_t max_batch_size = 64;
  bool enable_chunked_prefill = false;
};

std::unique_ptr<sim::BatchingPolicy> make_prefill_only_batcher(const PrefillOnlyParams& params);

const ParamSchema& disagg_schema();
sim::ClusterLayout make_disagg_layout(const ParamValues& values);

void register_disagg();

}  // namespace servesim::policies
