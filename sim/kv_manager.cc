#include "sim/kv_manager.h"

#include <algorithm>
#include <span>

namespace servesim::sim::detail {

int64_t KvManager::CacheLookup::cached_tokens(int32_t instance, const RequestSpec& spec) const {
  const InstanceState& inst = instances_.at(static_cast<size_t>(instance));
  if (!inst.setup.prefix_caching || spec.prefix_hash_ids.empty()) return 0;
  const int64_t bs = inst.setup.block_size;
  if (spec.id != keys_id_ || bs != keys_block_size_) {
    keys_ = prefix_block_keys(spec, bs);
    keys_id_ = spec.id;
    keys_block_size_ = bs;
  }
  return inst.cache.match_prefix(keys_) * bs;
}

// The requests admitted by `plan` start from the cached blocks of their prompt's longest cached
// prefix, as computed KV (at least the last prompt token is left to compute, for its logits),
// and their first chunk is trimmed to what is left. The policy planned without the hits: a hit
// never makes a request need more new blocks, but reviving an evictable cached block takes it
// from the free blocks the policy counted, so hits revive at most the plan's slack (free blocks
// it does not use, plus what earlier hits saved).
void KvManager::reuse_cached_prefixes(InstanceState& inst, BatchPlan& plan) {
  if (!inst.setup.prefix_caching || plan.admit.empty()) return;
  int64_t slack = inst.free_blocks - (plan.decode_run ? inst.decode_run.new_blocks : 0);
  for (const ScheduledSeq& s : plan.scheduled) {
    const int32_t pos = running_pos_of(requests_, inst, s.id);
    if (pos != kNotRunning) slack -= new_blocks_for(inst, inst.running[static_cast<size_t>(pos)], s);
  }
  const int64_t bs = inst.setup.block_size;
  for (ScheduledSeq& s : plan.scheduled) {
    if (std::find(plan.admit.begin(), plan.admit.end(), s.id) == plan.admit.end()) continue;
    const int32_t pos = running_pos_of(requests_, inst, s.id);
    if (pos == kNotRunning) continue;  // on_schedule() reports the invalid plan
    SeqView& seq = inst.running[static_cast<size_t>(pos)];
    const RequestSpec& spec = specs_[static_cast<size_t>(seq.id)];
    if (seq.computed_tokens != 0 || seq.blocks != 0 || spec.prefix_hash_ids.empty()) continue;
    RequestState& rs = requests_[seq.id];
    PrefixState& ps = prefix_states_[seq.id];
    if (ps.block_keys.empty()) ps.block_keys = prefix_block_keys(spec, bs);
    ps.keys_registered = 0;
    const int64_t most = std::min<int64_t>(static_cast<int64_t>(ps.block_keys.size()),
                                           (seq.target_tokens() - 1) / bs);
    if (most <= 0) continue;
    const int64_t before = new_blocks_for(inst, seq, s);
    const PrefixCache::Hit hit = inst.cache.acquire_prefix(
        std::span(ps.block_keys).first(static_cast<size_t>(most)), std::max<int64_t>(0, slack));
    inst.free_blocks -= hit.revived;
    slack -= hit.revived;
    ps.cache_refs.assign(ps.block_keys.begin(), ps.block_keys.begin() + hit.blocks);
    seq.blocks = hit.blocks;
    seq.computed_tokens = hit.blocks * bs;
    s.tokens = std::min(s.tokens, seq.remaining_tokens());
    const TierLoad loaded = load_from_tiers(inst, seq, s, ps, most, before, slack);
    if (seq.blocks == 0) continue;
    ps.keys_registered = seq.blocks;
    if (rs.preemptions == 0) {  // as the workload sees it
      requests_[seq.id].cached_tokens = hit.blocks * bs;
      if (loaded.dram_blocks + loaded.remote_blocks > 0) {
        tier_hits_[seq.id] = {static_cast<int32_t>(loaded.dram_blocks * bs),
                              static_cast<int32_t>(loaded.remote_blocks * bs)};
      }
    }
    inst.stats.prefix_hit_tokens += hit.blocks * bs;  // every reuse, re-admissions too
    inst.stats.dram_hit_tokens += loaded.dram_blocks * bs;
    inst.stats.remote_hit_tokens += loaded.remote_blocks * bs;
    inst.batch_load_ns += loaded.ns;
    slack += before - new_blocks_for(inst, seq, s) - loaded.dram_blocks - loaded.remote_blocks;
  }
}

// Past the cached blocks `seq` holds (its GPU hit), the run of its next keys (before key `most`)
// that the lower tiers hold, loaded into new blocks of `inst` when the transfer beats prefilling
// their tokens (InstanceSetup::dram_kv_bytes): the loaded blocks join the GPU cache held by the
// request, and `seq` and its step `s` advance past them. The run is shortened until its blocks
// and the step's new blocks fit in what the plan counted for the step (`before`, its new blocks
// without any hit) plus the plan's `slack`.
KvManager::TierLoad KvManager::load_from_tiers(InstanceState& inst, SeqView& seq,
                                              ScheduledSeq& s, PrefixState& ps, int64_t most,
                                              int64_t before, int64_t slack) {
  if (inst.dram.capacity() == 0 && remote_.capacity() == 0) return {};
  const int64_t hit = seq.blocks, bs = inst.setup.block_size;
  const auto key = [&](int64_t j) { return ps.block_keys[static_cast<size_t>(j)]; };
  int64_t end = hit;
  while (end < most && !inst.cache.contains(key(end)) &&  // on the GPU: evictable past the slack
         (inst.dram.contains(key(end)) || remote_.contains(key(end)))) {
    ++end;
  }
  const auto blocks_with = [&](int64_t loaded) {  // blocks taken with `loaded` more blocks
    SeqView probe = seq;
    probe.blocks += loaded;
    probe.computed_tokens += loaded * bs;
    ScheduledSeq step = s;
    step.tokens = std::min(step.tokens, probe.remaining_tokens());
    return loaded + new_blocks_for(inst, probe, step);
  };
  while (end > hit && blocks_with(end - hit) > before + slack) --end;
  if (end == hit) return {};
  TierLoad load;
  for (int64_t j = hit; j < end; ++j) ++(inst.dram.contains(key(j)) ? load.dram_blocks : load.remote_blocks);
  const int64_t bytes = block_bytes(inst.setup);
  load.ns = load_ns(inst.setup.dram_link, load.dram_blocks, bytes) +
            load_ns(inst.setup.remote_link, load.remote_blocks, bytes);
  recompute_shape_.segments.assign(1, {(end - hit) * bs, end * bs, 0});
  if (load.ns >= inst.setup.cost_model->iteration_time(recompute_shape_).count()) return {};
  take_blocks(inst, end - hit);
  for (int64_t j = hit; j < end; ++j) {
    if (inst.dram.contains(key(j))) inst.dram.touch(key(j));
    if (remote_.contains(key(j))) remote_.touch(key(j));
    insert_block(inst, ps, j);
  }
  seq.blocks = end;
  seq.computed_tokens = end * bs;
  s.tokens = std::min(s.tokens, seq.remaining_tokens());
  return load;
}

// After an iteration: the keyed blocks `seq` has now fully computed join the cache, held by it.
void KvManager::register_computed_blocks(InstanceState& inst, const SeqView& seq) {
  auto it = prefix_states_.find(seq.id);
  if (it == prefix_states_.end() || it->second.block_keys.empty()) return;
  PrefixState& ps = it->second;
  const int64_t full = std::min<int64_t>(static_cast<int64_t>(ps.block_keys.size()),
                                         seq.computed_tokens / inst.setup.block_size);
  for (int64_t j = ps.keys_registered; j < full; ++j) insert_block(inst, ps, j);
  ps.keys_registered = std::max(ps.keys_registered, full);
  if (ps.keys_registered == static_cast<int64_t>(ps.block_keys.size())) {
    ps.block_keys = {};
    ps.keys_registered = 0;
  }
}

// Block j of the request's keys, computed (or loaded) into a block it holds, joins the cache:
// held through the cache when inserted or adopted (an adopted block's private copy is free
// again, unless adopting revived an evictable block, which takes that copy's place).
void KvManager::insert_block(InstanceState& inst, PrefixState& ps, int64_t j) {
  const uint64_t key = ps.block_keys[static_cast<size_t>(j)];
  const PrefixCache::Inserted ins = inst.cache.insert(
      key, j > 0 ? std::optional(ps.block_keys[static_cast<size_t>(j - 1)]) : std::nullopt);
  if (ins.referenced) ps.cache_refs.push_back(key);
  if (ins.adopted && !ins.revived) inst.free_blocks++;
}

// Takes `n` blocks of instance memory for new KV, reusing evictable cached blocks (in the
// cache's eviction order) when the never-cached free blocks run out; evicted blocks move to the
// lower tiers (InstanceSetup::dram_kv_bytes).
void KvManager::take_blocks(InstanceState& inst, int64_t n) {
  const int64_t uncached = inst.free_blocks - inst.cache.evictable();
  if (n > uncached) {
    const bool offloads = inst.dram.capacity() > 0 || remote_.capacity() > 0;
    evicted_keys_.clear();
    inst.cache.evict(n - uncached, offloads ? &evicted_keys_ : nullptr);
    for (const uint64_t key : evicted_keys_) {
      if (const std::optional<uint64_t> dropped = inst.dram.store(key)) remote_.store(*dropped);
    }
    inst.stats.offloaded_blocks += static_cast<int64_t>(evicted_keys_.size());
  }
  inst.free_blocks -= n;
}

// A request gives back the `blocks` it holds on `inst`: its private blocks are free again, and
// each cached block it referenced becomes evictable (free, its KV kept) when it was the last
// holder.
void KvManager::release_blocks(InstanceState& inst, int64_t blocks, RequestId id) {
  auto it = prefix_states_.find(id);
  if (it == prefix_states_.end()) {
    inst.free_blocks += blocks;
    return;
  }
  inst.free_blocks += blocks - static_cast<int64_t>(it->second.cache_refs.size());
  for (const uint64_t key : it->second.cache_refs) {
    if (inst.cache.release(key)) inst.free_blocks++;
  }
  prefix_states_.erase(it);
}

}  // namespace servesim::sim::detail
