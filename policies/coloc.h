// Policy `coloc`: prefill/decode colocation with continuous batching and chunked prefill
// (policies.md §1). One batching policy, three variants selected by `mode`:
//   stall_free       - Sarathi-Serve: decodes first, then partial prefills, then new prefills, all
//                      within the token budget; KV for the whole prompt reserved at admission.
//   unified_v1       - vLLM V1: running requests first in running order (decodes and partial
//                      prefills alike get min(remaining, budget) tokens), then waiting requests;
//                      KV allocated per chunk; no admissions in a step that preempted.
//   prefill_priority - Orca / vLLM V0 without mixing: a prefill-only batch whenever a prefill can
//                      run, else a decode-only batch of every running request.
// Preemption is by recompute, victims taken from the tail of the running list.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "policies/latency_table.h"
#include "sim/policy_api.h"

namespace servesim::policies {

struct ColocParams {
  enum class Mode { kStallFree, kUnifiedV1, kPrefillPriority };
  enum class KvAllocation { kWholePrompt, kPerChunk };

  Mode mode = Mode::kUnifiedV1;
  int64_t max_num_batched_tokens = 2048;
  int64_t max_num_seqs = 256;
  int64_t long_prefill_token_threshold = 0;  // 0 = off
  bool enable_chunked_prefill = true;
  KvAllocation kv_allocation = KvAllocation::kPerChunk;
  // SLO-aware composition (DynaServe's local scheduler, policies.md §3.5; stall_free mode only):
  // when set, each iteration's prefill tokens are capped so that the table predicts the
  // iteration within `iteration_target` given its decodes, and every finished iteration refines
  // the table with its measured time.
  std::shared_ptr<LatencyTable> latency_table;
  Duration iteration_target{};

  // Reads the registered schema's values ("auto" allocation follows the mode).
  static ColocParams from(const ParamValues& values);
};

// The schema of `coloc` (also carries block_size and gpu_memory_utilization, which size the
// instance's memory plan).
const ParamSchema& coloc_schema();

std::unique_ptr<sim::BatchingPolicy> make_coloc(const ColocParams& params);

void register_coloc();

}  // namespace servesim::policies
