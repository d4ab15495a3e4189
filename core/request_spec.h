// The value type a workload hands to the simulator: one request to replay.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/time.h"

namespace servesim {

using RequestId = int64_t;

struct RequestSpec {
  RequestId id = 0;          // dense 0..N-1 in arrival order once a workload is finalised
  SimTime arrival{};         // relative to the start of the run
  int64_t prompt_tokens = 0;  // > 0
  int64_t output_tokens = 0;  // > 0; the request finishes after this many tokens (no EOS)
  // Optional: one id per prefix block (Mooncake's 512-token hash ids); empty when unknown.
  std::vector<uint64_t> prefix_hash_ids;
  // The hash ids also cover the answer (their spans past the prompt describe the output tokens,
  // as a session's next turn resends them), so the KV blocks its decode fills are cached too.
  // False: they describe the prompt only (Mooncake traces).
  bool hash_ids_cover_output = false;
  // Images of a multimodal request (workload.images): their tokens lead prompt_tokens, and the
  // model's vision encoder reads each image's patches before the prompt's first chunk. 0: text.
  int32_t images = 0;
  int32_t patches_per_image = 0;
  // A later turn of a session (after >= 0): the client sends it `think_time` after request
  // `after` (an earlier request) finished or was rejected; `arrival` is then only a lower bound
  // (its session's start), replaced by the time it is sent. -1: sent at `arrival`.
  RequestId after = -1;
  Duration think_time{};
};

// A finalised workload: requests sorted by arrival (ties kept in input order), ids dense; a later
// turn (RequestSpec::after) follows an earlier request and each request has at most one.
struct Workload {
  std::vector<RequestSpec> requests;
  // Rows dropped while loading (failed BurstGPT rows, zero-token rows), reported to the user.
  int64_t skipped_rows = 0;
  // Where it came from, for provenance ("azure2023:traces/...conv.csv window 0s+300s").
  std::string description;
};

}  // namespace servesim
