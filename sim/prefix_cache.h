// Automatic prefix caching of one instance's KV blocks: every full block of a prompt has a key
// that identifies the prompt up to and including that block; a request admitted later whose
// leading block keys are cached reuses those blocks instead of recomputing them. Two kinds:
// - kBlockHash (vLLM's automatic prefix caching): a flat table of blocks; the least recently
//   released evictable block goes first, wherever it sits in its prompt.
// - kRadix (SGLang's RadixAttention): the blocks form a tree (a block's parent is the block before
//   it in its prompt), a request locks its whole path, only evictable leaves are evicted, the one
//   least recently accessed (acquired, inserted or released) first, so a prefix outlives its
//   extensions; inserting a block that is cached already adopts the cached one (the caller's
//   private copy is freed, as SGLang's cache_unfinished_req does). Matching is at the block size
//   (SGLang's page size; its default page size 1 makes it per token), so for the same sequence of
//   acquires and inserts without eviction both kinds give the same hits.
//
// Contract (both kinds unless said):
// - A cached block is either held (ref_count > 0: some request references it, it is used KV) or
//   evictable (ref_count == 0: its KV is kept but its block counts as free, and the least
//   recently released evictable block is the first reused for new KV).
// - acquire_prefix(keys, max_revived) references the longest run of leading keys that are cached
//   (a hit), stopping before a key whose block is evictable once max_revived such blocks were
//   taken, and returns how many, and how many of them were evictable (those become used again).
// - insert(key, parent) caches a block a request just computed, held by it (ref 1); `parent` is the
//   key of the block before it in the request's prompt (none for the first block; kRadix requires
//   it to be cached, the caller holding it). A key already cached (another request computed the
//   same block meanwhile): kBlockHash leaves it as it is and the request's block stays private,
//   as in vLLM; kRadix adopts it (Inserted::adopted).
// - release(key) drops one reference; returns true when the block became evictable.
// - evict(n, evicted) forgets n evictable blocks (their memory is reused), appending their keys to
//   `evicted` when given: kBlockHash the least recently released, kRadix the least recently
//   accessed leaves. kRadix REQUIRES that a held block's parent is held (requests hold whole
//   paths), so that every evictable block can become a leaf.
// - Deterministic (no hashing order leaks into results: orders are release / access order).
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "core/request_spec.h"

namespace servesim::sim {

// Tokens covered by one entry of RequestSpec::prefix_hash_ids (Mooncake's hash-id block).
inline constexpr int64_t kPrefixHashBlockTokens = 512;

// The cache keys of `spec`'s prompt (and answer, when its hash ids cover it) at `block_size`
// tokens per KV block: one per full block whose tokens all lie in the part of the prompt (and
// answer) its prefix_hash_ids cover (empty without hash ids).
// Block j's key combines the hash id of the span holding its last token with j, so equal keys
// mean equal prompts up to the end of the block.
std::vector<uint64_t> prefix_block_keys(const RequestSpec& spec, int64_t block_size);

enum class PrefixCacheKind { kBlockHash, kRadix };

class PrefixCache {
 public:
  explicit PrefixCache(PrefixCacheKind kind = PrefixCacheKind::kBlockHash) : kind_(kind) {}

  struct Hit {
    int64_t blocks = 0;   // leading keys found (now referenced once more each)
    int64_t revived = 0;  // of them, blocks that were evictable (now used again)
  };
  Hit acquire_prefix(std::span<const uint64_t> keys,
                     int64_t max_revived = std::numeric_limits<int64_t>::max());
  // Leading keys cached (held or evictable), without referencing them.
  int64_t match_prefix(std::span<const uint64_t> keys) const;
  bool contains(uint64_t key) const { return find(key) >= 0; }
  struct Inserted {
    bool referenced = false;  // the caller now holds the cached block (counts among its refs)
    bool adopted = false;     // kRadix: the key was cached; the caller's private copy is free
    bool revived = false;     // the adopted block was evictable (now used again)
  };
  Inserted insert(uint64_t key, std::optional<uint64_t> parent);
  bool insert(uint64_t key) { return insert(key, std::nullopt).referenced; }  // a first block
  bool release(uint64_t key);
  void evict(int64_t n, std::vector<uint64_t>* evicted = nullptr);

  PrefixCacheKind kind() const { return kind_; }
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
    int32_t prev = -1, next = -1;  // kBlockHash: the evictable blocks in release order
  };
  // kRadix, beside each slot: the `parent` slot (-1: a first block), cached `children`, and
  // `last_access`, a stamp of clock_ unique per stamping (-1 once the slot is free).
  struct TreeLinks {
    int32_t parent = -1, children = 0;
    int64_t last_access = -1;
  };
  int32_t find(uint64_t key) const;   // slot index, or -1
  int32_t add(uint64_t key);          // a new entry; REQUIRES: key absent
  void erase(int32_t slot);           // removes it from the table and frees the slot
  void lru_unlink(int32_t slot);
  void lru_push_back(int32_t slot);
  void grow();
  void revive(int32_t slot);         // an evictable block becomes held (ref_count stays 0 here)
  void make_evictable(int32_t slot); // ref_count just reached 0
  void stamp(int32_t slot);          // kRadix: an access
  void push_leaf(int32_t slot);      // kRadix: `slot` just became an evictable leaf
  int32_t pop_leaf();                // kRadix: the evictable leaf accessed least recently
  void evict_one(std::vector<uint64_t>* evicted);

  std::vector<Slot> slots_;
  int32_t free_slot_ = -1;
  std::vector<int32_t> table_;  // slot index or -1; size a power of two, at most half full
  int64_t size_ = 0;
  int32_t lru_head_ = -1, lru_tail_ = -1;
  int64_t evictable_ = 0;
  PrefixCacheKind kind_;
  int64_t clock_ = 0;
  std::vector<TreeLinks> tree_;  // kRadix: indexed like slots_
  // kRadix: a min-heap of (last_access, slot) holding every evictable leaf, and stale entries
  // (their slot since accessed, held, given children or freed: its stamp differs) skipped when
  // popped and dropped when they outnumber the evictable blocks.
  std::vector<std::pair<int64_t, int32_t>> leaf_heap_;
};

// One lower tier of KV storage (CPU DRAM, a remote store) under the prefix caches: the keys of
// the cached blocks it holds, at most capacity_blocks of them (0: the tier holds nothing). Storing
// a block when full drops the least recently stored or loaded one, returned for the tier below.
class KvTierStore {
 public:
  explicit KvTierStore(int64_t capacity_blocks = 0) : capacity_(capacity_blocks) {}
  // Holds `key` (refreshed when held already); returns the key dropped to make room, if any
  // (`key` itself when the capacity is 0).
  std::optional<uint64_t> store(uint64_t key);
  bool contains(uint64_t key) const { return blocks_.contains(key); }
  void touch(uint64_t key);  // REQUIRES: contains(key); a load makes it the most recent
  int64_t capacity() const { return capacity_; }
  int64_t size() const { return blocks_.size(); }

 private:
  int64_t capacity_;
  PrefixCache blocks_;  // every block evictable: least recently stored or loaded first
  std::vector<uint64_t> dropped_;  // scratch of store()
};

}  // namespace servesim::sim
