// Automatic prefix caching of one instance's KV blocks (vLLM's semantics): every full block of a
// prompt has a key that identifies the prompt up to and including that block; a request admitted
// later whose leading block keys are cached reuses those blocks instead of recomputing them.
//
// Contract:
// - A cached block is either held (ref_count > 0: some request references it, it is used KV) or
//   evictable (ref_count == 0: its KV is kept but its block counts as free, and the least
//   recently released evictable block is the first reused for new KV).
// - acquire_prefix(keys, max_revived) references the longest run of leading keys that are cached
//   (a hit), stopping before a key whose block is evictable once max_revived such blocks were
//   taken, and returns how many, and how many of them were evictable (those become used again).
// - insert(key) caches a block a request just computed, held by it (ref 1); a key already cached
//   (another request computed the same block meanwhile) is left as it is and insert returns
//   false: the request's block stays private, as in vLLM.
// - release(key) drops one reference; returns true when the block became evictable.
// - evict(n) forgets the n least recently released evictable blocks (their blocks are reused).
// - Deterministic (no hashing order leaks into results: LRU order is release order).
#pragma once

#include <cstdint>
#include <limits>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "sim/core/request_spec.h"

namespace servesim::sim {

// Tokens covered by one entry of RequestSpec::prefix_hash_ids (Mooncake's hash-id block).
inline constexpr int64_t kPrefixHashBlockTokens = 512;

// The cache keys of `spec`'s prompt at `block_size` tokens per KV block: one per full block whose
// tokens all lie in the part of the prompt its prefix_hash_ids cover (empty without hash ids).
// Block j's key combines the hash id of the span holding its last token with j, so equal keys
// mean equal prompts up to the end of the block.
std::vector<uint64_t> prefix_block_keys(const RequestSpec& spec, int64_t block_size);

class PrefixCache {
 public:
  struct Hit {
    int64_t blocks = 0;   // leading keys found (now referenced once more each)
    int64_t revived = 0;  // of them, blocks that were evictable (now used again)
  };
  Hit acquire_prefix(std::span<const uint64_t> keys,
                     int64_t max_revived = std::numeric_limits<int64_t>::max());
  bool insert(uint64_t key);
  bool release(uint64_t key);
  void evict(int64_t n);

  int64_t evictable() const { return static_cast<int64_t>(lru_.size()); }
  int64_t size() const { return static_cast<int64_t>(entries_.size()); }

 private:
  struct Entry {
    int64_t ref_count = 0;
    std::list<uint64_t>::iterator lru;  // valid when ref_count == 0
  };
  std::unordered_map<uint64_t, Entry> entries_;
  std::list<uint64_t> lru_;  // evictable keys, least recently released first
};

}  // namespace servesim::sim
