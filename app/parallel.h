// A worker pool for independent simulations (plan configs, measured rows): runs f(i) for every i
// in [0, n) on up to `jobs` threads, taking work in index order, and returns when all are done.
//
// Contract: f must be safe to call concurrently for different i. `stop`, when set, is polled
// before each item; once it returns true no further item starts. `progress`, when set, is called
// from the calling thread about every 200 ms with the number of finished items (and once at the
// end). Exceptions thrown by f terminate the program: callers catch inside f.
#pragma once

#include <cstddef>
#include <functional>

namespace servesim::app {

// Returns the number of items that ran (n unless stopped).
size_t parallel_for(size_t n, int jobs, const std::function<void(size_t)>& f,
                    const std::function<bool()>& stop = {},
                    const std::function<void(size_t)>& progress = {});

// The default job count: the machine's hardware threads (at least 1).
int default_jobs();

}  // namespace servesim::app
