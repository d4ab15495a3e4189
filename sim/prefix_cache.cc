#include "sim/prefix_cache.h"

#include <algorithm>
#include <stdexcept>

namespace servesim::sim {

namespace {
uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
uint64_t mix_key(uint64_t id, uint64_t block) {
  return splitmix64(splitmix64(id) ^ (block * 0xd1b54a32d192ed03ULL));
}
}  // namespace

std::vector<uint64_t> prefix_block_keys(const RequestSpec& spec, int64_t block_size) {
  std::vector<uint64_t> keys;
  if (spec.prefix_hash_ids.empty() || block_size <= 0) return keys;
  const int64_t covered =
      std::min(spec.prompt_tokens,
               static_cast<int64_t>(spec.prefix_hash_ids.size()) * kPrefixHashBlockTokens);
  const int64_t blocks = covered / block_size;
  keys.reserve(static_cast<size_t>(blocks));
  for (int64_t j = 0; j < blocks; ++j) {
    const int64_t span = ((j + 1) * block_size - 1) / kPrefixHashBlockTokens;
    keys.push_back(mix_key(spec.prefix_hash_ids[static_cast<size_t>(span)],
                           static_cast<uint64_t>(j)));
  }
  return keys;
}

PrefixCache::Hit PrefixCache::acquire_prefix(std::span<const uint64_t> keys, int64_t max_revived) {
  Hit hit;
  for (const uint64_t key : keys) {
    auto it = entries_.find(key);
    if (it == entries_.end()) break;
    Entry& e = it->second;
    if (e.ref_count == 0) {
      if (hit.revived >= max_revived) break;
      lru_.erase(e.lru);
      ++hit.revived;
    }
    ++e.ref_count;
    ++hit.blocks;
  }
  return hit;
}

bool PrefixCache::insert(uint64_t key) {
  return entries_.try_emplace(key, Entry{1, {}}).second;
}

bool PrefixCache::release(uint64_t key) {
  auto it = entries_.find(key);
  if (it == entries_.end() || it->second.ref_count <= 0) {
    throw std::logic_error("prefix cache: release of a block that is not held");
  }
  Entry& e = it->second;
  if (--e.ref_count > 0) return false;
  e.lru = lru_.insert(lru_.end(), key);
  return true;
}

void PrefixCache::evict(int64_t n) {
  if (n > evictable()) throw std::logic_error("prefix cache: evicting more than is evictable");
  for (int64_t k = 0; k < n; ++k) {
    entries_.erase(lru_.front());
    lru_.pop_front();
  }
}

}  // namespace servesim::sim
