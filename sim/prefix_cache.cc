#include "sim/prefix_cache.h"

#include <algorithm>
#include <functional>
#include <stdexcept>

#include "core/rng.h"

namespace servesim::sim {

std::vector<uint64_t> prefix_block_keys(const RequestSpec& spec, int64_t block_size) {
  std::vector<uint64_t> keys;
  if (spec.prefix_hash_ids.empty() || block_size <= 0) return keys;
  const int64_t covered =
      std::min(spec.prompt_tokens + (spec.hash_ids_cover_output ? spec.output_tokens : 0),
               static_cast<int64_t>(spec.prefix_hash_ids.size()) * kPrefixHashBlockTokens);
  const int64_t blocks = covered / block_size;
  keys.reserve(static_cast<size_t>(blocks));
  for (int64_t j = 0; j < blocks; ++j) {
    const int64_t span = ((j + 1) * block_size - 1) / kPrefixHashBlockTokens;
    keys.push_back(mix64(spec.prefix_hash_ids[static_cast<size_t>(span)], static_cast<uint64_t>(j)));
  }
  return keys;
}

PrefixCache::Hit PrefixCache::acquire_prefix(std::span<const uint64_t> keys, int64_t max_revived) {
  Hit hit;
  for (const uint64_t key : keys) {
    const int32_t i = find(key);
    if (i < 0) break;
    Slot& e = slots_[static_cast<size_t>(i)];
    if (e.ref_count == 0) {
      if (hit.revived >= max_revived) break;
      revive(i);
      ++hit.revived;
    }
    ++e.ref_count;
    stamp(i);
    ++hit.blocks;
  }
  return hit;
}

int64_t PrefixCache::match_prefix(std::span<const uint64_t> keys) const {
  int64_t n = 0;
  while (n < static_cast<int64_t>(keys.size()) && find(keys[static_cast<size_t>(n)]) >= 0) ++n;
  return n;
}

PrefixCache::Inserted PrefixCache::insert(uint64_t key, std::optional<uint64_t> parent) {
  if (const int32_t i = find(key); i >= 0) {
    if (kind_ == PrefixCacheKind::kBlockHash) return {};
    Slot& e = slots_[static_cast<size_t>(i)];
    const Inserted adopted{true, true, e.ref_count == 0};
    if (e.ref_count == 0) revive(i);
    ++e.ref_count;
    stamp(i);
    return adopted;
  }
  int32_t p = -1;
  if (kind_ == PrefixCacheKind::kRadix && parent) {
    p = find(*parent);
    if (p < 0 || slots_[static_cast<size_t>(p)].ref_count == 0) {
      throw std::logic_error("prefix cache: insert under a block that is not held");
    }
  }
  const int32_t i = add(key);
  slots_[static_cast<size_t>(i)].ref_count = 1;
  if (kind_ == PrefixCacheKind::kRadix) {
    tree_[static_cast<size_t>(i)] = {p, 0, 0};
    stamp(i);
    if (p >= 0) ++tree_[static_cast<size_t>(p)].children;  // held: not an evictable leaf
  }
  return {true, false, false};
}

bool PrefixCache::release(uint64_t key) {
  const int32_t i = find(key);
  if (i < 0 || slots_[static_cast<size_t>(i)].ref_count <= 0) {
    throw std::logic_error("prefix cache: release of a block that is not held");
  }
  if (--slots_[static_cast<size_t>(i)].ref_count > 0) return false;
  make_evictable(i);
  return true;
}

void PrefixCache::evict(int64_t n, std::vector<uint64_t>* evicted) {
  if (n > evictable_) throw std::logic_error("prefix cache: evicting more than is evictable");
  for (int64_t k = 0; k < n; ++k) evict_one(evicted);
}

void PrefixCache::revive(int32_t slot) {
  if (kind_ == PrefixCacheKind::kBlockHash) {
    lru_unlink(slot);
  } else {
    --evictable_;  // its heap entry turns stale as it is stamped
  }
}

void PrefixCache::make_evictable(int32_t slot) {
  if (kind_ == PrefixCacheKind::kBlockHash) {
    lru_push_back(slot);
    return;
  }
  ++evictable_;
  stamp(slot);
  if (tree_[static_cast<size_t>(slot)].children == 0) push_leaf(slot);
}

void PrefixCache::stamp(int32_t slot) {
  if (kind_ == PrefixCacheKind::kRadix) tree_[static_cast<size_t>(slot)].last_access = ++clock_;
}

void PrefixCache::push_leaf(int32_t slot) {
  if (leaf_heap_.size() > 2 * static_cast<size_t>(evictable_) + 64) {
    std::erase_if(leaf_heap_, [&](const std::pair<int64_t, int32_t>& e) {
      const TreeLinks& t = tree_[static_cast<size_t>(e.second)];
      return t.last_access != e.first || t.children != 0 ||
             slots_[static_cast<size_t>(e.second)].ref_count != 0;
    });
    std::make_heap(leaf_heap_.begin(), leaf_heap_.end(), std::greater<>());
  }
  leaf_heap_.emplace_back(tree_[static_cast<size_t>(slot)].last_access, slot);
  std::push_heap(leaf_heap_.begin(), leaf_heap_.end(), std::greater<>());
}

int32_t PrefixCache::pop_leaf() {
  while (!leaf_heap_.empty()) {
    std::pop_heap(leaf_heap_.begin(), leaf_heap_.end(), std::greater<>());
    const auto [stamp, slot] = leaf_heap_.back();
    leaf_heap_.pop_back();
    const TreeLinks& t = tree_[static_cast<size_t>(slot)];
    if (t.last_access == stamp && t.children == 0 && slots_[static_cast<size_t>(slot)].ref_count == 0) {
      return slot;
    }
  }
  throw std::logic_error("prefix cache: no evictable leaf (a held block under an evictable one)");
}

void PrefixCache::evict_one(std::vector<uint64_t>* evicted) {
  int32_t i = lru_head_;
  if (kind_ == PrefixCacheKind::kBlockHash) {
    lru_unlink(i);
  } else {
    i = pop_leaf();
    --evictable_;
    TreeLinks& t = tree_[static_cast<size_t>(i)];
    if (t.parent >= 0) {
      TreeLinks& parent = tree_[static_cast<size_t>(t.parent)];
      if (--parent.children == 0 && slots_[static_cast<size_t>(t.parent)].ref_count == 0) {
        push_leaf(t.parent);
      }
    }
    t = TreeLinks{};  // a free slot: any heap entry of it is stale
  }
  if (evicted != nullptr) evicted->push_back(slots_[static_cast<size_t>(i)].key);
  erase(i);
}

int32_t PrefixCache::find(uint64_t key) const {
  if (table_.empty()) return -1;
  const size_t mask = table_.size() - 1;
  for (size_t b = key & mask;; b = (b + 1) & mask) {
    const int32_t i = table_[b];
    if (i < 0) return -1;
    if (slots_[static_cast<size_t>(i)].key == key) return i;
  }
}

int32_t PrefixCache::add(uint64_t key) {
  if (static_cast<size_t>(size_ + 1) * 2 > table_.size()) grow();
  int32_t i = free_slot_;
  if (i >= 0) {
    free_slot_ = slots_[static_cast<size_t>(i)].next;
  } else {
    i = static_cast<int32_t>(slots_.size());
    slots_.emplace_back();
    if (kind_ == PrefixCacheKind::kRadix) tree_.emplace_back();
  }
  slots_[static_cast<size_t>(i)] = Slot{key, 0, -1, -1};
  const size_t mask = table_.size() - 1;
  size_t b = key & mask;
  while (table_[b] >= 0) b = (b + 1) & mask;
  table_[b] = i;
  ++size_;
  return i;
}

void PrefixCache::erase(int32_t slot) {
  const size_t mask = table_.size() - 1;
  size_t hole = slots_[static_cast<size_t>(slot)].key & mask;
  while (table_[hole] != slot) hole = (hole + 1) & mask;
  table_[hole] = -1;
  // Backward shift: move later entries of the probe run into the hole when their home bucket
  // does not lie cyclically in (hole, j].
  for (size_t j = (hole + 1) & mask; table_[j] >= 0; j = (j + 1) & mask) {
    const size_t home = slots_[static_cast<size_t>(table_[j])].key & mask;
    const bool stays = hole < j ? (home > hole && home <= j) : (home > hole || home <= j);
    if (stays) continue;
    table_[hole] = table_[j];
    table_[j] = -1;
    hole = j;
  }
  slots_[static_cast<size_t>(slot)].next = free_slot_;
  free_slot_ = slot;
  --size_;
}

void PrefixCache::lru_unlink(int32_t slot) {
  Slot& e = slots_[static_cast<size_t>(slot)];
  (e.prev >= 0 ? slots_[static_cast<size_t>(e.prev)].next : lru_head_) = e.next;
  (e.next >= 0 ? slots_[static_cast<size_t>(e.next)].prev : lru_tail_) = e.prev;
  e.prev = e.next = -1;
  --evictable_;
}

void PrefixCache::lru_push_back(int32_t slot) {
  Slot& e = slots_[static_cast<size_t>(slot)];
  e.prev = lru_tail_;
  e.next = -1;
  (lru_tail_ >= 0 ? slots_[static_cast<size_t>(lru_tail_)].next : lru_head_) = slot;
  lru_tail_ = slot;
  ++evictable_;
}

void PrefixCache::grow() {
  std::vector<int32_t> old = std::move(table_);
  table_.assign(std::max<size_t>(64, old.size() * 2), -1);
  const size_t mask = table_.size() - 1;
  for (const int32_t i : old) {
    if (i < 0) continue;
    size_t b = slots_[static_cast<size_t>(i)].key & mask;
    while (table_[b] >= 0) b = (b + 1) & mask;
    table_[b] = i;
  }
}

std::optional<uint64_t> KvTierStore::store(uint64_t key) {
  if (capacity_ <= 0) return key;
  if (contains(key)) {
    touch(key);
    return std::nullopt;
  }
  std::optional<uint64_t> dropped;
  if (blocks_.size() == capacity_) {
    dropped_.clear();
    blocks_.evict(1, &dropped_);
    dropped = dropped_.front();
  }
  blocks_.insert(key);
  blocks_.release(key);
  return dropped;
}

void KvTierStore::touch(uint64_t key) {
  const uint64_t keys[] = {key};
  if (blocks_.acquire_prefix(keys).blocks != 1) throw std::logic_error("KV tier: touch of a block it does not hold");
  blocks_.release(key);
}

}  // namespace servesim::sim

