// KV block accounting of the engine's instances: the blocks each step needs, the prefix cache
// (automatic prefix caching / RadixAttention, sim/prefix_cache.h) and its lower tiers (host DRAM
// per instance, a remote store shared by all), and the blocks a request gives back. The engine
// (sim/engine.cc) owns the event loop and asks this part for every block it takes or frees.
//
// Contract:
// - Works on the engine's own state (sim/instance_state.h), borrowed for the manager's lifetime:
//   the instances (their free_blocks, cache, dram tier and stats), the workload's request specs,
//   and the requests' bookkeeping. It owns the per-request prefix-cache state (PrefixState: keys
//   and the cached blocks a request references), the remote tier and the tier hits not yet
//   recorded.
// - A request's blocks are private or cached: release_blocks() frees the private ones and drops
//   its references to cached ones, which become evictable (free, KV kept) with their last holder.
// - take_blocks() never fails: the caller has checked that the blocks are free (evictable cached
//   blocks count as free); it evicts in the cache's order and offloads evicted keys to the tiers.
// - Deterministic: no container order leaks into results.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "models/cost/cost_model.h"
#include "sim/instance_state.h"
#include "sim/prefix_cache.h"
#include "sim/view.h"

namespace servesim::sim::detail {

class KvManager {
 public:
  KvManager(const std::vector<InstanceState>& instances, const std::vector<RequestSpec>& specs,
            RequestRing<RequestState>& requests)
      : lookup_(instances), specs_(specs), requests_(requests) {}

  // The remote tier (EngineConfig::remote_kv_bytes), in blocks; none until set.
  void set_remote_blocks(int64_t blocks) { remote_ = KvTierStore(blocks); }

  // The prefix caches as routers see them (ClusterView::prefixes).
  const PrefixLookup& lookup() const { return lookup_; }

  // New KV blocks `seq` needs for step `s` (the engine's allocation rule in on_schedule()).
  // Inline: the engine asks it for every request of every planned batch.
  static int64_t new_blocks_for(const InstanceState& inst, const SeqView& seq,
                                const ScheduledSeq& s) {
    const int64_t kv_tokens = inst.setup.kv_reserved_only
                                  ? s.reserve_tokens
                                  : std::max(seq.computed_tokens + s.tokens, s.reserve_tokens);
    return extra_blocks_for(kv_tokens, seq.blocks, inst.setup.block_size);
  }

  // Before the admitted requests of `plan` run, each starts from the cached blocks of its
  // prompt's longest cached prefix (and what the lower tiers hold past it), and its first chunk
  // is trimmed to what is left; never more blocks than the plan left free.
  void reuse_cached_prefixes(InstanceState& inst, BatchPlan& plan);

  // After an iteration: the keyed blocks `seq` has now fully computed join the cache, held by it.
  void register_computed_blocks(InstanceState& inst, const SeqView& seq);

  // Whether request `id` still has prompt blocks to register in the cache (its steps then change
  // the cache, so they cannot be fast-forwarded).
  bool registering(RequestId id) const {
    const auto it = prefix_states_.find(id);
    return it != prefix_states_.end() && !it->second.block_keys.empty();
  }

  // Takes `n` blocks of `inst` for new KV. REQUIRES: n <= inst.free_blocks.
  void take_blocks(InstanceState& inst, int64_t n);

  // Request `id` gives back the `blocks` it holds on `inst`.
  void release_blocks(InstanceState& inst, int64_t blocks, RequestId id);

  // The prompt tokens request `id` loaded from host DRAM and from the remote tier, once: the
  // record takes them (RequestRecord::dram_hit_tokens, remote_hit_tokens); nullopt when none.
  std::optional<std::pair<int32_t, int32_t>> take_tier_hits(RequestId id) {
    const auto it = tier_hits_.find(id);
    if (it == tier_hits_.end()) return std::nullopt;
    const std::pair<int32_t, int32_t> hits = it->second;
    tier_hits_.erase(it);
    return hits;
  }

 private:
  // PrefixLookup over the instances' caches; a request's keys are computed once per block size.
  class CacheLookup : public PrefixLookup {
   public:
    explicit CacheLookup(const std::vector<InstanceState>& instances) : instances_(instances) {}
    int64_t cached_tokens(int32_t instance, const RequestSpec& spec) const override;

   private:
    const std::vector<InstanceState>& instances_;
    mutable std::vector<uint64_t> keys_;
    mutable RequestId keys_id_ = -1;
    mutable int64_t keys_block_size_ = 0;
  };

  struct TierLoad {
    int64_t dram_blocks = 0, remote_blocks = 0;
    int64_t ns = 0;  // transfer time
  };
  TierLoad load_from_tiers(InstanceState& inst, SeqView& seq, ScheduledSeq& s, PrefixState& ps,
                           int64_t most, int64_t before, int64_t slack);
  void insert_block(InstanceState& inst, PrefixState& ps, int64_t j);

  CacheLookup lookup_;
  const std::vector<RequestSpec>& specs_;
  RequestRing<RequestState>& requests_;
  std::unordered_map<RequestId, PrefixState> prefix_states_;  // requests holding cache state
  KvTierStore remote_;  // EngineConfig::remote_kv_bytes, in blocks of the first instance
  // RequestRecord::dram_hit_tokens and remote_hit_tokens of the requests that loaded any.
  std::unordered_map<RequestId, std::pair<int32_t, int32_t>> tier_hits_;
  std::vector<uint64_t> evicted_keys_;  // scratch of take_blocks()
  models::BatchShape recompute_shape_;  // scratch of load_from_tiers()
};

}  // namespace servesim::sim::detail
