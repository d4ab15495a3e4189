// The front end of a serving instance: the HTTP server, tokenizer and hand-off to the scheduler
// that a request passes before its engine's scheduler sees it.
#pragma once

#include "core/time.h"

namespace servesim::sim {

// A serving engine's front end (HTTP server, tokenizer, hand-off to the scheduler): one FIFO
// server per instance. A routed request becomes visible to the instance's batching policy
// per_request + per_prompt_token x prompt tokens after the front end is free, so a burst of
// simultaneous arrivals reaches the scheduler staggered. Zero: requests are visible at once.
struct FrontendSpec {
  Duration per_request{};
  double per_prompt_token_ns = 0;
  bool enabled() const { return per_request.count() > 0 || per_prompt_token_ns > 0; }
};

}  // namespace servesim::sim
