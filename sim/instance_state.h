// The engine's own state of requests and instances, shared by the translation units the engine
// is split into (engine.cc: the event loop; kv_manager.cc: KV block accounting). Not part of the
// simulator's interface: policies see InstanceView (sim/view.h), never these.
//
// Contract: plain data and small helpers, no behaviour of their own; every field is owned by the
// engine (Engine::Impl) and written by the part of it the field's comment names.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <set>
#include <vector>

#include "models/cost/cost_model.h"
#include "sim/engine.h"
#include "sim/prefix_cache.h"
#include "sim/request_ring.h"

namespace servesim::sim::detail {

inline constexpr int32_t kNotRunning = -1;

// Engine-only bookkeeping of one request (what policies never see): one cache line per request,
// so that writing its record when it finishes loads one line. A decode step does not touch it (its
// token record is in SeqView).
struct alignas(64) RequestState {
  int32_t instance = -1;
  // Its index in its instance's running list when it was last set or found, or kNotRunning. The
  // list keeps its order and only grows at its end, so requests before it leaving move it down:
  // its index is at most this (running_pos_of() finds it).
  int32_t running_pos = kNotRunning;
  int64_t first_scheduled_ns = -1;
  int64_t first_token_ns = -1;
  int32_t preemptions = 0;
  int32_t split_target = -1;  // instance that continues a split request (-1: decode router)
  // Read only when its record is written:
  int64_t cached_tokens = 0;      // prompt tokens its first admission took from the prefix cache
  int64_t split_tokens = 0;       // RequestRecord::split_tokens
  int64_t kv_arrived_ns = -1;     // RequestRecord::kv_arrived_ns
  int32_t prefill_instance = -1;  // RequestRecord::prefill_instance_id
};
static_assert(sizeof(RequestState) == 64);

// A request's prefix-cache state on its instance, kept only while it has some: the cache keys of
// its prompt blocks (from its admission until all are registered), how many of them were
// considered for the cache, and the keys of the cached blocks it references (the rest of its
// blocks are private).
struct PrefixState {
  std::vector<uint64_t> block_keys;
  int64_t keys_registered = 0;
  std::vector<uint64_t> cache_refs;
};

struct BatchItem {
  int32_t running_pos;
  int64_t tokens;
};

struct InstanceState {
  InstanceSetup setup;
  std::vector<SeqView> running;
  std::deque<SeqView> waiting;
  int64_t free_blocks = 0;
  int64_t outstanding = 0;
  int64_t queued_prompt_blocks = 0;
  bool busy = false;
  bool schedule_pending = false;
  SimTime batch_start{};
  SimTime batch_end{};
  // The running batch: running[0, batch_decodes) each take a one-token decode step (a decode run),
  // then the items of `batch`.
  int64_t batch_decodes = 0;
  std::vector<BatchItem> batch;
  models::BatchShape shape;  // of `batch` only, when batch_decodes > 0
  // The leading decode run of `running` (InstanceView::decode_run), the positions in it whose step
  // needs new KV blocks, and the fewest tokens any of its requests has left to sample. Valid while
  // run_ready: found by the batch-done that left `running` as it is (or by find_decode_run()), and
  // dropped by whatever changes `running` after it.
  DecodeRun decode_run;
  std::vector<int32_t> run_crossers;
  int64_t run_to_first_finish = 0;
  bool run_ready = false;
  // Of the running batch's time, the shares of its prompt tokens and of its recomputed tokens (0
  // unless it mixes them with one-token decode steps): what each of its decode steps is charged
  // (SeqView::interference_ns, recompute_ns).
  int64_t batch_interference_ns = 0;
  int64_t batch_recompute_ns = 0;
  BatchPlan plan;
  InstanceStats stats;
  int64_t busy_ns_at_last_sample = 0;
  Lifecycle state = Lifecycle::kActive;
  SimTime alive_from{};
  SimTime retired_at{};
  std::multiset<SimTime> wakes;  // pending kWake events of the batching policy
  SimTime frontend_free_at{};    // when the front end finishes the requests it holds
  PrefixCache cache;             // used only with InstanceSetup::prefix_caching
  KvTierStore dram;              // InstanceSetup::dram_kv_bytes, in blocks
  int64_t batch_load_ns = 0;     // KV loads from lower tiers the planned batch waits for
};

// Bytes of one KV block of `setup`'s instance.
inline int64_t block_bytes(const InstanceSetup& setup) { return setup.kv_bytes_per_token * setup.block_size; }

inline InstanceState make_instance_state(InstanceSetup s) {
  InstanceState st;
  st.free_blocks = s.num_blocks;
  st.cache = PrefixCache(s.prefix_cache_kind);
  const int64_t bytes = block_bytes(s);
  st.dram = KvTierStore(bytes > 0 ? s.dram_kv_bytes / bytes : 0);
  st.setup = std::move(s);
  return st;
}

// Time to move `blocks` KV blocks of `bytes` each over `link` (nothing for no blocks).
inline int64_t load_ns(const LinkSpec& link, int64_t blocks, int64_t bytes) {
  if (blocks == 0) return 0;
  return link.latency.count() +
         static_cast<int64_t>(std::ceil(static_cast<double>(blocks * bytes) / link.bytes_per_s * 1e9));
}

// The position of request `id` in `inst.running`, or kNotRunning when it is not running there:
// searched down from RequestState::running_pos, which it then holds.
inline int32_t running_pos_of(RequestRing<RequestState>& requests, const InstanceState& inst,
                              RequestId id) {
  if (!requests.contains(id)) return kNotRunning;
  RequestState& rs = requests[id];
  if (rs.running_pos == kNotRunning) return kNotRunning;
  auto pos = std::min<int64_t>(rs.running_pos, static_cast<int64_t>(inst.running.size()) - 1);
  while (pos >= 0 && inst.running[static_cast<size_t>(pos)].id != id) --pos;
  if (pos < 0) return kNotRunning;
  rs.running_pos = static_cast<int32_t>(pos);
  return rs.running_pos;
}

}  // namespace servesim::sim::detail
