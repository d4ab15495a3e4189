// Resource limits: the largest simulations servesim accepts. Inputs beyond them are refused at
// parse time with the limit in the message (a scenario error, exit 2), instead of exhausting
// memory or running for hours. docs/cli.md "Limits" lists them.
//
// Each bound is far above any published deployment or benchmark, and low enough that the
// simulator's per-request, per-instance and per-sample state stays within a few GiB.
#pragma once

#include <cstdint>

#include "core/time.h"

namespace servesim {

// Instances in one cluster (cluster.instances, or the sum of a policy's layout).
inline constexpr int64_t kMaxInstances = 10'000;
// Requests in one workload (generated count, closed-loop count, benchmark num_requests, trace
// rows kept).
inline constexpr int64_t kMaxRequests = 10'000'000;
// Tokens in one request's prompt or output.
inline constexpr int64_t kMaxRequestTokens = 10'000'000;
// Closed-loop clients.
inline constexpr int64_t kMaxClients = 1'000'000;
// Tokens per paged KV block.
inline constexpr int64_t kMaxBlockSize = 4096;
// Drafts a speculative decoding step may verify (the engines' own limits are about as high).
inline constexpr int64_t kMaxSpeculativeTokens = 16;
// Images a multimodal request may carry, and the pixels of an image's side (workload.images).
inline constexpr int64_t kMaxImagesPerRequest = 64;
inline constexpr int64_t kMaxImageSidePixels = 16384;
// Request rates (req/s) a workload may be generated or rescaled to.
inline constexpr double kMinRatePerS = 1e-6;
inline constexpr double kMaxRatePerS = 1e6;
// Time-series sampling: the shortest interval.
inline constexpr Duration kMinSampleInterval = std::chrono::milliseconds(1);

}  // namespace servesim
