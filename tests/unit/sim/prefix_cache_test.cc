// Prefix caching: the cache's reference counting and LRU eviction against a small reference
// implementation, block keys from hash ids, and the engine reusing cached prompt blocks: an
// analytic TTFT check, the per-request cached tokens on a Mooncake trace with an unbounded cache
// against the hits computed directly from the trace's hash ids, and the benchmark's shared
// prompts (dataset entries, prefix prompts).
#include "sim/prefix_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "models/cost/memory_model.h"
#include "models/cost/cost_model.h"
#include "policies/builtin.h"
#include "policies/coloc.h"
#include "core/rng.h"
#include "sim/engine.h"
#include "traces/generators.h"
#include "traces/loaders.h"

namespace servesim::sim {
namespace {

// The same contract written the slow, obvious way: a map of reference counts and a deque of
// evictable keys in release order.
class ReferenceCache {
 public:
  PrefixCache::Hit acquire_prefix(const std::vector<uint64_t>& keys) {
    PrefixCache::Hit hit;
    for (uint64_t k : keys) {
      if (!refs_.count(k)) break;
      if (refs_[k] == 0) {
        lru_.erase(std::find(lru_.begin(), lru_.end(), k));
        ++hit.revived;
      }
      ++refs_[k];
      ++hit.blocks;
    }
    return hit;
  }
  bool insert(uint64_t k) { return refs_.emplace(k, 1).second; }
  bool release(uint64_t k) {
    if (--refs_.at(k) > 0) return false;
    lru_.push_back(k);
    return true;
  }
  void evict(int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      refs_.erase(lru_.front());
      lru_.pop_front();
    }
  }
  int64_t evictable() const { return static_cast<int64_t>(lru_.size()); }
  int64_t size() const { return static_cast<int64_t>(refs_.size()); }
  std::vector<uint64_t> held() const {
    std::vector<uint64_t> out;
    for (const auto& [k, r] : refs_) {
      for (int64_t i = 0; i < r; ++i) out.push_back(k);
    }
    return out;
  }

 private:
  std::map<uint64_t, int64_t> refs_;
  std::deque<uint64_t> lru_;
};

TEST(PrefixCache, MatchesTheReferenceOnRandomOperations) {
  PrefixCache cache;
  ReferenceCache ref;
  RngStream rng(3, "prefix-cache-ops");
  std::vector<uint64_t> held;  // one entry per reference we own
  for (int step = 0; step < 20000; ++step) {
    const int64_t op = rng.uniform_int(0, 3);
    if (op == 0) {
      // A prompt: keys 0..n-1 of one of 8 "documents".
      const uint64_t doc = static_cast<uint64_t>(rng.uniform_int(0, 7));
      std::vector<uint64_t> keys;
      for (int64_t j = 0, n = rng.uniform_int(1, 12); j < n; ++j) keys.push_back(doc * 100 + j);
      const PrefixCache::Hit a = cache.acquire_prefix(keys);
      const PrefixCache::Hit b = ref.acquire_prefix(keys);
      ASSERT_EQ(a.blocks, b.blocks) << step;
      ASSERT_EQ(a.revived, b.revived) << step;
      held.insert(held.end(), keys.begin(), keys.begin() + a.blocks);
    } else if (op == 1) {
      const uint64_t k = static_cast<uint64_t>(rng.uniform_int(0, 7)) * 100 +
                         static_cast<uint64_t>(rng.uniform_int(0, 11));
      const bool a = cache.insert(k);
      ASSERT_EQ(a, ref.insert(k)) << step;
      if (a) held.push_back(k);
    } else if (op == 2 && !held.empty()) {
      const size_t i = static_cast<size_t>(rng.uniform_int(0, static_cast<int64_t>(held.size()) - 1));
      ASSERT_EQ(cache.release(held[i]), ref.release(held[i])) << step;
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (op == 3 && ref.evictable() > 0) {
      const int64_t n = rng.uniform_int(1, ref.evictable());
      cache.evict(n);
      ref.evict(n);
    }
    ASSERT_EQ(cache.evictable(), ref.evictable()) << step;
    ASSERT_EQ(cache.size(), ref.size()) << step;
  }
  EXPECT_THROW(cache.evict(cache.evictable() + 1), std::logic_error);
}

TEST(PrefixCache, EvictsTheLeastRecentlyReleasedBlockFirst) {
  PrefixCache cache;
  for (uint64_t k : {1, 2, 3}) ASSERT_TRUE(cache.insert(k));
  EXPECT_FALSE(cache.insert(2));  // already cached: the caller's copy stays private
  EXPECT_TRUE(cache.release(2));
  EXPECT_TRUE(cache.release(1));
  EXPECT_TRUE(cache.release(3));
  cache.evict(1);  // 2 goes first
  const std::vector<uint64_t> two = {2}, one = {1}, three = {3};
  EXPECT_EQ(cache.acquire_prefix(two).blocks, 0);
  EXPECT_EQ(cache.acquire_prefix(one).revived, 1);
  EXPECT_EQ(cache.evictable(), 1);
  EXPECT_THROW(cache.release(7), std::logic_error);
}

// SGLang's radix cache written the slow, obvious way: a map of nodes (parent, references, last
// access stamp, stamped by one counter at every acquire, insert and last release as the cache
// does), evicting by a scan for the unreferenced childless node with the oldest stamp.
class ReferenceRadix {
 public:
  PrefixCache::Hit acquire_prefix(const std::vector<uint64_t>& keys, int64_t max_revived) {
    PrefixCache::Hit hit;
    for (uint64_t k : keys) {
      auto it = nodes_.find(k);
      if (it == nodes_.end()) break;
      if (it->second.refs == 0) {
        if (hit.revived >= max_revived) break;
        ++hit.revived;
      }
      ++it->second.refs;
      it->second.stamp = ++clock_;
      ++hit.blocks;
    }
    return hit;
  }
  PrefixCache::Inserted insert(uint64_t k, std::optional<uint64_t> parent) {
    if (auto it = nodes_.find(k); it != nodes_.end()) {
      const PrefixCache::Inserted adopted{true, true, it->second.refs == 0};
      ++it->second.refs;
      it->second.stamp = ++clock_;
      return adopted;
    }
    nodes_[k] = {parent, 1, ++clock_};
    return {true, false, false};
  }
  bool release(uint64_t k) {
    Node& n = nodes_.at(k);
    if (--n.refs > 0) return false;
    n.stamp = ++clock_;
    return true;
  }
  std::vector<uint64_t> evict(int64_t count) {
    std::vector<uint64_t> out;
    for (int64_t i = 0; i < count; ++i) {
      std::optional<uint64_t> victim;
      for (const auto& [k, n] : nodes_) {
        const bool leaf = std::none_of(nodes_.begin(), nodes_.end(), [&](const auto& c) {
          return c.second.parent == k;
        });
        if (n.refs == 0 && leaf && (!victim || n.stamp < nodes_.at(*victim).stamp)) victim = k;
      }
      out.push_back(victim.value());
      nodes_.erase(*victim);
    }
    return out;
  }
  int64_t evictable() const {
    return std::count_if(nodes_.begin(), nodes_.end(), [](const auto& n) { return n.second.refs == 0; });
  }
  int64_t size() const { return static_cast<int64_t>(nodes_.size()); }

 private:
  struct Node {
    std::optional<uint64_t> parent;
    int64_t refs = 0;
    int64_t stamp = 0;
  };
  std::map<uint64_t, Node> nodes_;
  int64_t clock_ = 0;
};

// Requests hold whole paths (the radix contract): each acquires a document's leading keys, extends
// its path block by block (inserting or adopting), and releases it all when it finishes.
TEST(RadixPrefixCache, MatchesTheReferenceOnRandomRequests) {
  PrefixCache cache(PrefixCacheKind::kRadix);
  ReferenceRadix ref;
  RngStream rng(5, "radix-cache-ops");
  struct Req {
    uint64_t doc;
    std::vector<uint64_t> path;
  };
  std::vector<Req> reqs;
  int64_t adopted = 0, evicted = 0;
  for (int step = 0; step < 20000; ++step) {
    const int64_t op = rng.uniform_int(0, 3);
    if (op == 0 && reqs.size() < 12) {
      const uint64_t doc = static_cast<uint64_t>(rng.uniform_int(0, 5));
      std::vector<uint64_t> keys;
      for (int64_t j = 0, n = rng.uniform_int(1, 12); j < n; ++j) keys.push_back(doc * 100 + j);
      const int64_t max_revived = rng.uniform_int(0, 12);
      const PrefixCache::Hit a = cache.acquire_prefix(keys, max_revived);
      const PrefixCache::Hit b = ref.acquire_prefix(keys, max_revived);
      ASSERT_EQ(a.blocks, b.blocks) << step;
      ASSERT_EQ(a.revived, b.revived) << step;
      reqs.push_back({doc, {keys.begin(), keys.begin() + a.blocks}});
    } else if (op == 1 && !reqs.empty()) {
      Req& r = reqs[static_cast<size_t>(rng.uniform_int(0, static_cast<int64_t>(reqs.size()) - 1))];
      if (r.path.size() >= 12) continue;
      const uint64_t key = r.doc * 100 + r.path.size();
      const std::optional<uint64_t> parent =
          r.path.empty() ? std::nullopt : std::optional(r.path.back());
      const PrefixCache::Inserted a = cache.insert(key, parent);
      const PrefixCache::Inserted b = ref.insert(key, parent);
      ASSERT_EQ(a.referenced, b.referenced) << step;
      ASSERT_EQ(a.adopted, b.adopted) << step;
      ASSERT_EQ(a.revived, b.revived) << step;
      ASSERT_TRUE(a.referenced) << "a radix insert always leaves the caller holding the block";
      adopted += a.adopted;
      r.path.push_back(key);
    } else if (op == 2 && !reqs.empty()) {
      const size_t i = static_cast<size_t>(rng.uniform_int(0, static_cast<int64_t>(reqs.size()) - 1));
      for (const uint64_t k : reqs[i].path) ASSERT_EQ(cache.release(k), ref.release(k)) << step;
      reqs.erase(reqs.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (op == 3 && ref.evictable() > 0) {
      const int64_t n = rng.uniform_int(1, ref.evictable());
      std::vector<uint64_t> got;
      cache.evict(n, &got);
      ASSERT_EQ(got, ref.evict(n)) << step;
      evicted += n;
    }
    ASSERT_EQ(cache.evictable(), ref.evictable()) << step;
    ASSERT_EQ(cache.size(), ref.size()) << step;
  }
  EXPECT_GT(adopted, 100);
  EXPECT_GT(evicted, 1000);
  EXPECT_THROW(cache.evict(cache.evictable() + 1), std::logic_error);
}

// The two kinds differ in eviction order: vLLM's evicts the least recently released block, the
// head of a finished prompt, which leaves the rest of the prompt unreachable; SGLang's evicts
// leaves, the tail, and the prefix still hits.
TEST(RadixPrefixCache, EvictsLeavesSoThatAPrefixOutlivesItsExtensions) {
  const std::vector<uint64_t> prompt = {1, 2, 3, 4};
  for (const PrefixCacheKind kind : {PrefixCacheKind::kBlockHash, PrefixCacheKind::kRadix}) {
    PrefixCache cache(kind);
    for (size_t j = 0; j < prompt.size(); ++j) {
      ASSERT_TRUE(cache.insert(prompt[j], j > 0 ? std::optional(prompt[j - 1]) : std::nullopt)
                      .referenced);
    }
    for (const uint64_t k : prompt) cache.release(k);  // in prompt order, as the engine does
    std::vector<uint64_t> evicted;
    cache.evict(2, &evicted);
    if (kind == PrefixCacheKind::kBlockHash) {
      EXPECT_EQ(evicted, (std::vector<uint64_t>{1, 2}));
      EXPECT_EQ(cache.acquire_prefix(prompt).blocks, 0);
    } else {
      EXPECT_EQ(evicted, (std::vector<uint64_t>{4, 3}));
      EXPECT_EQ(cache.acquire_prefix(prompt).blocks, 2);
    }
  }
  // A block inserted again: vLLM keeps the caller's copy private, SGLang adopts the cached one.
  PrefixCache hash, radix(PrefixCacheKind::kRadix);
  for (PrefixCache* c : {&hash, &radix}) ASSERT_TRUE(c->insert(9));
  EXPECT_FALSE(hash.insert(9, std::nullopt).referenced);
  const PrefixCache::Inserted again = radix.insert(9, std::nullopt);
  EXPECT_TRUE(again.referenced && again.adopted && !again.revived);
  EXPECT_FALSE(radix.release(9));
  EXPECT_TRUE(radix.release(9));
  EXPECT_THROW(radix.insert(10, std::optional<uint64_t>(9)), std::logic_error);  // parent not held
}

TEST(KvTierStore, DropsTheLeastRecentlyStoredOrLoadedBlock) {
  KvTierStore tier(2);
  EXPECT_EQ(tier.store(1), std::nullopt);
  EXPECT_EQ(tier.store(2), std::nullopt);
  tier.touch(1);                      // a load: 2 is now the least recent
  EXPECT_EQ(tier.store(3), std::optional<uint64_t>(2));
  EXPECT_EQ(tier.store(1), std::nullopt);  // held already: refreshed
  EXPECT_EQ(tier.store(4), std::optional<uint64_t>(3));
  EXPECT_TRUE(tier.contains(1) && tier.contains(4) && !tier.contains(2));
  EXPECT_EQ(KvTierStore(0).store(5), std::optional<uint64_t>(5));  // no tier: passes it on
}

TEST(PrefixBlockKeys, FollowTheHashIdsAtTheBlockSize) {
  RequestSpec a;
  a.prompt_tokens = 1100;
  a.prefix_hash_ids = {10, 11, 12};
  RequestSpec b = a;
  b.prefix_hash_ids = {10, 11, 99};
  RequestSpec c = a;
  c.prefix_hash_ids = {10, 77, 12};
  const auto ka = prefix_block_keys(a, 16), kb = prefix_block_keys(b, 16),
             kc = prefix_block_keys(c, 16);
  ASSERT_EQ(ka.size(), 68u);  // 1100 / 16 full blocks
  // Shared spans give equal keys block by block; the first differing span ends the match.
  EXPECT_TRUE(std::equal(ka.begin(), ka.begin() + 64, kb.begin()));
  EXPECT_NE(ka[64], kb[64]);
  EXPECT_TRUE(std::equal(ka.begin(), ka.begin() + 32, kc.begin()));
  EXPECT_NE(ka[32], kc[32]);
  // Hash ids cover only part of the prompt: only that part has keys.
  RequestSpec d = a;
  d.prefix_hash_ids = {10};
  EXPECT_EQ(prefix_block_keys(d, 16).size(), 32u);
  EXPECT_TRUE(prefix_block_keys(RequestSpec{}, 16).empty());
}

// ---- engine ----

const models::GpuCatalog& gpus() {
  static const models::GpuCatalog g = models::GpuCatalog::load("models/catalog/gpus.json");
  return g;
}
const models::ModelCatalog& model_catalog() {
  static const models::ModelCatalog m = models::ModelCatalog::load("models/catalog/models");
  return m;
}

struct Recorder : RecordListener {
  void on_request(const RequestRecord& r) override { requests.push_back(r); }
  void on_sample(const SampleRecord&) override {}
  std::vector<RequestRecord> requests;
};

std::shared_ptr<const models::IterationCostModel> cost() {
  static const std::shared_ptr<const models::IterationCostModel> c =
      models::make_roofline_cost_model({&model_catalog().get("llama-3.1-8b"),
                                        &gpus().get("h100_sxm"), 1, models::Dtype::kBf16,
                                        models::Dtype::kBf16},
                                       models::RooflineParams{});
  return c;
}

// Changes to the instances and the engine's configuration a test makes.
using Tweak = std::function<void(InstanceSetup&, EngineConfig&)>;

// Requests sorted by id, from `instances` instances of coloc (vLLM V1) with `num_blocks` 16-token
// blocks each, behind `router`.
std::vector<RequestRecord> run(Workload w, bool caching, int64_t num_blocks, int instances = 1,
                               const std::string& router = "round_robin", const Tweak& tweak = {}) {
  policies::register_builtin_policies();
  std::vector<InstanceSetup> inst(static_cast<size_t>(instances));
  for (InstanceSetup& s : inst) {
    s.gpu = "h100_sxm";
    s.cost_model = cost();
    s.num_blocks = num_blocks;
    s.block_size = 16;
    s.prefix_caching = caching;
    policies::ColocParams p;
    p.max_num_batched_tokens = 8192;
    s.batching = policies::make_coloc(p);
  }
  Recorder rec;
  EngineConfig config;
  config.sample_interval = Duration{0};
  if (tweak) {
    for (InstanceSetup& s : inst) tweak(s, config);
  }
  const auto& entry = routing_policies().get(router);
  Engine engine(config, std::move(inst), entry.make(ParamValues::defaults(entry.schema)),
                std::move(w), &rec);
  engine.run();
  std::sort(rec.requests.begin(), rec.requests.end(),
            [](const RequestRecord& a, const RequestRecord& b) { return a.request_id < b.request_id; });
  return rec.requests;
}

Workload two_same_prompts(int64_t prompt) {
  Workload w;
  for (int i = 0; i < 2; ++i) {
    RequestSpec r;
    r.id = i;
    r.arrival = kTimeZero + std::chrono::seconds(10 * i);  // the first has finished by then
    r.prompt_tokens = prompt;
    r.output_tokens = 4;
    r.prefix_hash_ids = {7, 8, 9};
    w.requests.push_back(r);
  }
  return w;
}

TEST(EnginePrefixCaching, ARepeatedPromptComputesOnlyItsUncachedTail) {
  const int64_t prompt = 1100;
  const auto on = run(two_same_prompts(prompt), true, 100000);
  const auto off = run(two_same_prompts(prompt), false, 100000);
  ASSERT_EQ(on.size(), 2u);
  // The first request misses; the second reuses every full block but the one holding its last
  // token (1088 tokens: 68 blocks, capped at (1100 - 1) / 16 = 68), and computes 12 tokens.
  EXPECT_EQ(on[0].cached_tokens, 0);
  EXPECT_EQ(on[1].cached_tokens, 1088);
  models::BatchShape tail, full;
  tail.segments = {{prompt - 1088, prompt, 1}};
  full.segments = {{prompt, prompt, 1}};
  EXPECT_EQ(on[1].ttft_ns(), cost()->iteration_time(tail).count());
  EXPECT_EQ(on[0].ttft_ns(), cost()->iteration_time(full).count());
  EXPECT_EQ(off[1].cached_tokens, 0);
  EXPECT_EQ(off[1].ttft_ns(), cost()->iteration_time(full).count());
}

// A two-turn session: the second turn is sent its think time after the first finished, and
// reuses the first turn's prompt blocks (its own history), not its output.
TEST(EngineSessions, ALaterTurnIsSentAfterItsThinkTimeAndReusesTheFirstTurnsPrompt) {
  Workload w;
  for (int i = 0; i < 2; ++i) {
    RequestSpec r;
    r.id = i;
    r.arrival = kTimeZero + std::chrono::seconds(1);
    r.output_tokens = 50;
    r.prompt_tokens = i == 0 ? 1100 : 1100 + 50 + 200;  // history + 200 new tokens
    r.prefix_hash_ids = {7, 8, 9};  // one session: the same spans
    if (i == 1) {
      r.after = 0;
      r.think_time = std::chrono::seconds(2);
    }
    w.requests.push_back(r);
  }
  const auto on = run(w, true, 100000);
  ASSERT_EQ(on.size(), 2u);
  EXPECT_EQ(on[0].arrival_ns, std::chrono::nanoseconds(std::chrono::seconds(1)).count());
  EXPECT_EQ(on[1].arrival_ns, on[0].done_ns + std::chrono::nanoseconds(std::chrono::seconds(2)).count());
  EXPECT_EQ(on[1].first_scheduled_ns, on[1].arrival_ns);  // the instance is idle by then
  // The first turn's 68 full prompt blocks (1088 tokens) are the second turn's leading blocks.
  EXPECT_EQ(on[0].cached_tokens, 0);
  EXPECT_EQ(on[1].cached_tokens, 1088);
  const auto off = run(w, false, 100000);
  EXPECT_EQ(off[1].cached_tokens, 0);
  EXPECT_GT(off[1].ttft_ns(), on[1].ttft_ns());
  // With hash ids that cover the first turn's answer, the blocks its decode filled are reused
  // too: 1,100 prompt + 49 decoded tokens computed, 71 full blocks (1,136 tokens).
  for (RequestSpec& r : w.requests) r.hash_ids_cover_output = true;
  const auto answers = run(w, true, 100000);
  EXPECT_EQ(answers[1].cached_tokens, 1136);
  EXPECT_LT(answers[1].ttft_ns(), on[1].ttft_ns());
}

TEST(EngineSessions, TurnsMustFollowOneEarlierRequestAndNeedAnOpenLoop) {
  Workload w = two_same_prompts(100);
  w.requests[0].after = 1;  // follows a later request
  EXPECT_THROW(run(w, true, 1000), std::invalid_argument);
}

TEST(EnginePrefixCaching, MooncakeHitsWithAnUnboundedCacheEqualThoseOfTheHashIds) {
  Workload w = traces::load_mooncake("traces/data/mooncake_fast25/conversation_trace.jsonl");
  w.requests.resize(300);
  for (RequestSpec& r : w.requests) {
    r.arrival = kTimeZero + std::chrono::seconds(1000 * r.id);  // one at a time
    r.output_tokens = std::min<int64_t>(r.output_tokens, 8);
  }
  // Independently, from the hash ids: request i can reuse, from an earlier request j, the spans
  // their id lists share (whole 512-token spans, or j's whole prompt when i extends all of it),
  // in full 16-token blocks, and never its own last prompt token.
  std::vector<int64_t> expected;
  int64_t expected_total = 0, prompt_total = 0;
  for (size_t i = 0; i < w.requests.size(); ++i) {
    const RequestSpec& a = w.requests[i];
    int64_t best = 0;
    for (size_t j = 0; j < i; ++j) {
      const RequestSpec& b = w.requests[j];
      size_t k = 0;
      while (k < a.prefix_hash_ids.size() && k < b.prefix_hash_ids.size() &&
             a.prefix_hash_ids[k] == b.prefix_hash_ids[k]) {
        ++k;
      }
      const int64_t covered_b = std::min<int64_t>(
          b.prompt_tokens, static_cast<int64_t>(b.prefix_hash_ids.size()) * 512);
      best = std::max(best, std::min<int64_t>(static_cast<int64_t>(k) * 512, covered_b));
    }
    const int64_t covered_a =
        std::min<int64_t>(a.prompt_tokens, static_cast<int64_t>(a.prefix_hash_ids.size()) * 512);
    const int64_t hit = std::min({best / 16, covered_a / 16, (a.prompt_tokens - 1) / 16}) * 16;
    expected.push_back(hit);
    expected_total += hit;
    prompt_total += a.prompt_tokens;
  }
  const auto got = run(w, true, 10'000'000);
  ASSERT_EQ(got.size(), expected.size());
  int64_t got_total = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].cached_tokens, expected[i]) << "request " << i;
    got_total += got[i].cached_tokens;
  }
  EXPECT_EQ(got_total, expected_total);
  EXPECT_GT(expected_total, prompt_total / 20) << "the trace shares prefixes";
}

// Blocks of the longest request of `w` (prompt and output) at 16 tokens per block.
int64_t longest_request_blocks(const Workload& w) {
  int64_t longest = 0;
  for (const RequestSpec& r : w.requests) {
    longest = std::max(longest, blocks_for_tokens(r.prompt_tokens + r.output_tokens, 16));
  }
  return longest;
}

Workload first_300_mooncake() {
  Workload w = traces::load_mooncake("traces/data/mooncake_fast25/conversation_trace.jsonl");
  w.requests.resize(300);
  for (RequestSpec& r : w.requests) r.output_tokens = std::min<int64_t>(r.output_tokens, 8);
  return w;
}

Tweak radix(const Tweak& more = {}) {
  return [more](InstanceSetup& s, EngineConfig& c) {
    s.prefix_cache_kind = PrefixCacheKind::kRadix;
    if (more) more(s, c);
  };
}

TEST(EnginePrefixCaching, AFullCacheEvictsAndStillServesEveryRequest) {
  const Workload w = first_300_mooncake();
  const int64_t longest = longest_request_blocks(w);
  // Room for two of the longest requests: blocks are reused, cached ones evicted in LRU order
  // (block_hash) or leaf-first (radix).
  for (const Tweak& kind : {Tweak{}, radix()}) {
    const auto small = run(w, true, 2 * longest, 1, "round_robin", kind);
    const auto big = run(w, true, 10'000'000, 1, "round_robin", kind);
    ASSERT_EQ(small.size(), 300u);
    int64_t small_hits = 0, big_hits = 0;
    for (size_t i = 0; i < small.size(); ++i) {
      small_hits += small[i].cached_tokens;
      big_hits += big[i].cached_tokens;
    }
    EXPECT_GT(small_hits, 0);
    EXPECT_LT(small_hits, big_hits);
  }
}

// `n` requests of `prompt` tokens and 4 output tokens, 10 s apart (each finishes before the next),
// request i with the hash ids ids(i).
Workload one_at_a_time(int n, int64_t prompt, const std::function<std::vector<uint64_t>(int)>& ids) {
  Workload w;
  for (int i = 0; i < n; ++i) {
    RequestSpec r;
    r.id = i;
    r.arrival = kTimeZero + std::chrono::seconds(10 * i);
    r.prompt_tokens = prompt;
    r.output_tokens = 4;
    r.prefix_hash_ids = ids(i);
    w.requests.push_back(r);
  }
  return w;
}

TEST(EnginePrefixCaching, TheKvAwareRouterSendsARepeatedPromptWhereItIsCached) {
  // Prompts A A B B A A B B ... one at a time, on two instances.
  const Workload w = one_at_a_time(16, 2000, [](int i) {
    return (i / 2) % 2 == 0 ? std::vector<uint64_t>{1, 2, 3, 4} : std::vector<uint64_t>{5, 6, 7, 8};
  });
  const auto total = [](const std::vector<RequestRecord>& rs) {
    int64_t t = 0;
    for (const RequestRecord& r : rs) t += r.cached_tokens;
    return t;
  };
  const auto aware = run(w, true, 100000, 2, "kv_aware");
  const auto rr = run(w, true, 100000, 2, "round_robin");
  // Only the first A and the first B miss: 14 hits of (2000 - 1) / 16 = 124 blocks.
  EXPECT_EQ(total(aware), 14 * 124 * 16);
  EXPECT_LT(total(rr), total(aware));
}

// Without eviction the radix cache hits exactly what the block-hash cache hits (the same blocks
// are cached; adopting a block instead of keeping a private copy changes only memory).
TEST(EngineRadixCache, HitsWithAnUnboundedCacheEqualTheBlockHashCachesHits) {
  Workload w = first_300_mooncake();
  const auto hash = run(w, true, 10'000'000);
  const auto tree = run(w, true, 10'000'000, 1, "round_robin", radix());
  ASSERT_EQ(tree.size(), hash.size());
  int64_t total = 0;
  for (size_t i = 0; i < hash.size(); ++i) {
    EXPECT_EQ(tree[i].cached_tokens, hash[i].cached_tokens) << "request " << i;
    total += tree[i].cached_tokens;
  }
  EXPECT_GT(total, 0);
}

// Prompt A (161 tokens: 10 keyed blocks and the block of its last token), then an unrelated B of
// the same length, then A again, one at a time on 20 blocks. A leaves 10 evictable and 10 never
// cached blocks; B's 11 blocks evict one of A's. vLLM's cache evicts A's first block, so A's
// repeat finds nothing; SGLang's evicts A's last keyed block, and the repeat reuses 9 blocks.
Workload prompt_other_prompt_again() {
  return one_at_a_time(3, 161, [](int i) { return std::vector<uint64_t>{i == 1 ? 2u : 1u}; });
}

// The cost model's time for one iteration of a single request's `tokens`, attending `context`.
int64_t iteration_ns(int64_t tokens, int64_t context, int64_t logit_rows) {
  models::BatchShape shape;
  shape.segments = {{tokens, context, logit_rows}};
  return cost()->iteration_time(shape).count();
}

int64_t llama_kv_bytes_per_token() {
  return model_catalog().get("llama-3.1-8b").kv_bytes_per_token(models::Dtype::kBf16);
}

// latency + bytes / bandwidth, in whole nanoseconds rounded up.
int64_t transfer_ns(int64_t latency_ns, int64_t bytes, double bytes_per_s) {
  return latency_ns + static_cast<int64_t>(std::ceil(static_cast<double>(bytes) / bytes_per_s * 1e9));
}

TEST(EngineRadixCache, KeepsTheHeadOfAnEvictedPromptWhereBlockHashLosesIt) {
  const auto hash = run(prompt_other_prompt_again(), true, 20);
  const auto tree = run(prompt_other_prompt_again(), true, 20, 1, "round_robin", radix());
  EXPECT_EQ(hash[2].cached_tokens, 0);
  EXPECT_EQ(tree[2].cached_tokens, 9 * 16);
  EXPECT_EQ(tree[2].ttft_ns(), iteration_ns(161 - 144, 161, 1));
}

// The same three requests with a CPU DRAM tier: the block the GPU evicts is offloaded, and A's
// repeat loads it back when the PCIe transfer beats prefilling its 16 tokens, its first iteration
// (now only its last prompt token) lasting the cost model's time plus latency + bytes / bandwidth.
TEST(EngineKvTiers, ARepeatLoadsAnOffloadedBlockWhenLoadingBeatsRecomputing) {
  const int64_t block_bytes = 16 * llama_kv_bytes_per_token();  // 2 MiB
  const int64_t recompute_ns = iteration_ns(16, 160, 0);
  const auto with_dram = [&](double bytes_per_s) {
    return radix([=](InstanceSetup& s, EngineConfig&) {
      s.kv_bytes_per_token = llama_kv_bytes_per_token();
      s.dram_kv_bytes = 100 * block_bytes;
      s.dram_link = {bytes_per_s, Duration{5'000}};
    });
  };
  // 64 GB/s (PCIe 5 x16): 2 MiB in 32.8 us, far below the recompute.
  const auto fast = run(prompt_other_prompt_again(), true, 20, 1, "round_robin", with_dram(64e9));
  const int64_t load_ns = transfer_ns(5'000, block_bytes, 64e9);
  ASSERT_LT(load_ns, recompute_ns);
  EXPECT_EQ(fast[2].cached_tokens, 9 * 16);
  EXPECT_EQ(fast[2].dram_hit_tokens, 16);
  EXPECT_EQ(fast[2].remote_hit_tokens, 0);
  EXPECT_EQ(fast[2].ttft_ns(), iteration_ns(1, 161, 1) + load_ns);
  // 100 MB/s: 21 ms, slower than prefilling the block: recomputed, nothing loaded.
  const auto slow = run(prompt_other_prompt_again(), true, 20, 1, "round_robin", with_dram(1e8));
  ASSERT_GT(transfer_ns(5'000, block_bytes, 1e8), recompute_ns);
  EXPECT_EQ(slow[2].dram_hit_tokens, 0);
  EXPECT_EQ(slow[2].ttft_ns(), iteration_ns(161 - 144, 161, 1));
}

// Without DRAM the evicted block goes to the cluster's remote store, loaded over its link.
TEST(EngineKvTiers, ABlockOffloadedToTheRemoteStoreLoadsOverItsLink) {
  const auto got = run(prompt_other_prompt_again(), true, 20, 1, "round_robin",
                       radix([=](InstanceSetup& s, EngineConfig& c) {
                         s.kv_bytes_per_token = llama_kv_bytes_per_token();
                         s.remote_link = {25e9, Duration{10'000}};  // a 200 Gb/s NIC
                         c.remote_kv_bytes = 1 << 30;
                       }));
  EXPECT_EQ(got[2].dram_hit_tokens, 0);
  EXPECT_EQ(got[2].remote_hit_tokens, 16);
  EXPECT_EQ(got[2].ttft_ns(),
            iteration_ns(1, 161, 1) + transfer_ns(10'000, 16 * llama_kv_bytes_per_token(), 25e9));
}

// Block-hash caching with both tiers on a finite cache: tiers only add hits (a block is loaded
// only when the GPU has lost it), every request is served, and the run is deterministic.
TEST(EngineKvTiers, TiersAddHitsOnAFullCacheAndRunsRepeat) {
  const Workload w = first_300_mooncake();
  const int64_t longest = longest_request_blocks(w);
  const int64_t kv_bytes_per_token = llama_kv_bytes_per_token();
  const Tweak tiers = [=](InstanceSetup& s, EngineConfig& c) {
    s.kv_bytes_per_token = kv_bytes_per_token;
    s.dram_kv_bytes = 12 * longest * 16 * kv_bytes_per_token;
    s.dram_link = {64e9, Duration{5'000}};
    s.remote_link = {25e9, Duration{10'000}};
    c.remote_kv_bytes = 1'000'000 * 16 * kv_bytes_per_token;
  };
  for (const bool tree : {false, true}) {
    SCOPED_TRACE(tree ? "radix" : "block_hash");
    const Tweak tweak = tree ? radix(tiers) : tiers;
    const auto gpu_only = run(w, true, 2 * longest, 1, "round_robin", tree ? radix() : Tweak{});
    const auto a = run(w, true, 2 * longest, 1, "round_robin", tweak);
    const auto b = run(w, true, 2 * longest, 1, "round_robin", tweak);
    ASSERT_EQ(a.size(), 300u);
    int64_t gpu_hits = 0, hits = 0, dram = 0, remote = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(a[i].first_token_ns, b[i].first_token_ns);
      ASSERT_EQ(a[i].done_ns, b[i].done_ns);
      ASSERT_EQ(a[i].dram_hit_tokens, b[i].dram_hit_tokens);
      ASSERT_EQ(a[i].remote_hit_tokens, b[i].remote_hit_tokens);
      gpu_hits += gpu_only[i].cached_tokens;
      hits += a[i].cached_tokens + a[i].dram_hit_tokens + a[i].remote_hit_tokens;
      dram += a[i].dram_hit_tokens;
      remote += a[i].remote_hit_tokens;
    }
    EXPECT_GT(dram, 0);
    EXPECT_GT(remote, 0);
    EXPECT_GT(hits, gpu_hits) << dram << " " << remote;
  }
}

TEST(SharedPrompts, DatasetEntriesRepeatWholePromptsAndPrefixPromptsShareTheirSpans) {
  auto lengths = traces::make_fixed_lengths(1000, 10);
  Workload w = traces::generate({traces::ArrivalKind::kUniform, 1.0, 1.0}, *lengths, 200,
                                Duration{0}, 5);
  traces::share_prompts(w, {.dataset_entries = 4}, 5);
  std::set<std::vector<uint64_t>> distinct;
  for (const RequestSpec& r : w.requests) {
    EXPECT_EQ(r.prompt_tokens, 1000);
    EXPECT_EQ(r.prefix_hash_ids.size(), 2u);
    distinct.insert(r.prefix_hash_ids);
  }
  EXPECT_EQ(distinct.size(), 4u);

  Workload p = traces::generate({traces::ArrivalKind::kUniform, 1.0, 1.0}, *lengths, 50,
                                Duration{0}, 5);
  traces::share_prompts(p, {.num_prefix_prompts = 1, .prefix_prompt_length = 1024}, 5);
  for (const RequestSpec& r : p.requests) {
    EXPECT_EQ(r.prompt_tokens, 2024);
    ASSERT_EQ(r.prefix_hash_ids.size(), 4u);
    EXPECT_EQ(r.prefix_hash_ids[0], p.requests[0].prefix_hash_ids[0]);
    EXPECT_EQ(r.prefix_hash_ids[1], p.requests[0].prefix_hash_ids[1]);
    if (r.id > 0) {
      EXPECT_NE(r.prefix_hash_ids[2], p.requests[0].prefix_hash_ids[2]);
    }
  }
  EXPECT_THROW(traces::share_prompts(p, {.num_prefix_prompts = 2}, 5), std::invalid_argument);
}

}  // namespace
}  // namespace servesim::sim
