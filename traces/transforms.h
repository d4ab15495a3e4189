// Transforms over finalised workloads.
//
// Contract: each in-place transform takes a finalised Workload (sorted by arrival, ids 0..N-1)
// and leaves it finalised; request lengths and prefix hash ids are never changed, and arrival
// times stay integer nanoseconds. Each transform appends a short note to Workload::description so
// a stored run says which slice of which trace it replayed. Invalid arguments throw
// std::invalid_argument and leave the workload unchanged.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "core/request_spec.h"
#include "core/time.h"

namespace servesim::traces {

// Stable-sorts requests by arrival (ties keep their order) and sets ids to 0..N-1 in that order.
void finalize(Workload& w);

// Keeps the requests arriving in [start, start + length) and shifts them by -start, so the window
// starts at time 0 (its first request arrives at or after 0). The result may be empty.
// REQUIRES: start >= 0, length > 0.
void window(Workload& w, Duration start, Duration length);

// Keeps the first `n` requests (all of them if there are fewer). REQUIRES: n >= 0.
void first_n(Workload& w, int64_t n);

// Keeps the requests for which `keep` returns true; `label` describes the filter in the
// description ("prompt <= 4096").
void filter(Workload& w, const std::function<bool(const RequestSpec&)>& keep,
            std::string_view label);

// Stretches or compresses the gaps between arrivals (the first arrival stays put) so that the
// mean rate (N - 1) / (last - first) equals `rate_per_s`. The new span is rounded once to the
// nearest nanosecond and every arrival is scaled with exact integer arithmetic, rounded to nearest.
// Throws std::invalid_argument if rate_per_s is not positive and finite, if there are fewer than
// 2 requests, or if all requests arrive at the same instant (span 0).
void scale_to_rate(Workload& w, double rate_per_s);

// Multiplies every arrival time by `factor` (> 1 slows the workload down), rounding to the nearest
// nanosecond. Throws std::invalid_argument unless factor is positive and finite; throws RangeError
// if an arrival overflows the simulated time range.
void time_scale(Workload& w, double factor);

// Returns the union of both timelines on one clock (each is taken as-is, normally starting at 0),
// sorted by arrival with a's requests before b's on ties, ids renumbered. skipped_rows add up.
Workload merge(Workload a, Workload b);

}  // namespace servesim::traces
