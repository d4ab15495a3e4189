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
#include <span>
#include <vector>

#include "sim/core/request_spec.h"

namespace servesim::sim {

// Tokens covered by one entry of RequestSpec::prefix_hash_ids (Mooncake's hash-id block).
inline constexpr int64_t kPrefixHashBlockTokens = 512;

// The cache keys of `spec`'s prompt (and answer, when its hash ids cover it) at `block_size`
// tokens per KV block: one per full block whose tokens all lie in the part of the prompt (and
// answer) its prefix_hash_ids cover (empty without hash ids).
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
  // Leading keys cached (held or evictable), without referencing them.
  int64_t match_prefix(std::span<const uint64_t> keys) const;
  bool insert(uint64_t key);
  bool release(uint64_t key);
  void evict(int64_t n);

  int64_t evictable() const { return evictable_; }
  int64_t size() const { return size_; }

 private:
  // Entries live in a slab of slots (free ones chained through `next`), found through an
  // open-addressing table of slot indices (linear probing, backward-shift deletion; keys are
  // already well mixed), and the evictable ones are chained in release order through prev/next:
  // no allocation per block once the table has grown to the cache's size.
  struct Slot {
    uint64_t key = 0;
    int64_t ref_count = 0;
    int32_t prev = -1, next = -1;
  };
  int32_t find(uint64_t key) const;   // slot index, or -1
  int32_t add(uint64_t key);          // a new entry; REQUIRES: key absent
  void erase(int32_t slot);           // removes it from the table and frees the slot
  void lru_unlink(int32_t slot);
  void lru_push_back(int32_t slot);
  void grow();

  std::vector<Slot> slots_;
  int32_t free_slot_ = -1;
  std::vector<int32_t> table_;  // slot index or -1; size a power of two, at most half full
  int64_t size_ = 0;
  int32_t lru_head_ = -1, lru_tail_ = -1;
  int64_t evictable_ = 0;
};

}  // namespace servesim::sim
