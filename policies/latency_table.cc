#include "policies/latency_table.h"

#include <algorithm>
#include <stdexcept>

namespace servesim::policies {

LatencyTable::LatencyTable(std::shared_ptr<const models::IterationCostModel> cost_model,
                           LatencyTableParams params)
    : cost_model_(std::move(cost_model)), params_(params) {
  if (!cost_model_) throw std::invalid_argument("latency table needs a cost model");
  if (params_.plen_step <= 0 || params_.ctx_step <= 0 || params_.prefix_step <= 0 || !(params_.ema > 0 && params_.ema <= 1)) {
    throw std::invalid_argument("latency table: steps must be > 0 and ema in (0, 1]");
  }
}

size_t LatencyTable::KeyHash::operator()(const Key& k) const {
  uint64_t h = static_cast<uint64_t>(k.plen_bucket) * 0x9e3779b97f4a7c15ULL;
  h ^= static_cast<uint64_t>(k.ctx_bucket) + 0x632be59bd9b4e019ULL + (h << 6) + (h >> 2);
  h ^= static_cast<uint64_t>(k.dnum) + 0x8cb92ba72f3d8dd7ULL + (h << 6) + (h >> 2);
  h ^= static_cast<uint64_t>(k.prefix_bucket) + 0x52dce729da3ed8b5ULL + (h << 6) + (h >> 2);
  return static_cast<size_t>(h);
}

LatencyTable::Key LatencyTable::key_of(int64_t plen, int64_t ctx, int64_t dnum,
                                       int64_t prefix) const {
  const auto up = [](int64_t v, int64_t step) { return (v + step - 1) / step; };
  return {up(plen, params_.plen_step), dnum > 0 ? up(ctx, params_.ctx_step) : 0, dnum,
          plen > 0 ? up(prefix, params_.prefix_step) : 0};
}

double& LatencyTable::entry(const Key& key) {
  // Most lookups repeat a recent key: a direct-mapped cache of pointers into ns_ (whose elements
  // never move) answers them without the hash table.
  RecentEntry& recent = recent_[KeyHash{}(key) % recent_.size()];
  if (recent.value && recent.key == key) return *recent.value;
  auto [it, inserted] = ns_.try_emplace(key, 0.0);
  recent = {key, &it->second};
  if (inserted) {
    // The offline profile at the bucket's upper corner.
    const int64_t plen = key.plen_bucket * params_.plen_step;
    const int64_t ctx = std::max<int64_t>(1, key.ctx_bucket * params_.ctx_step);
    const int64_t prefix = key.prefix_bucket * params_.prefix_step;
    scratch_.clear();
    if (plen > 0) scratch_.segments.push_back({plen, prefix + plen, 1});
    for (int64_t d = 0; d < key.dnum; ++d) scratch_.segments.push_back({1, ctx, 1});
    it->second = static_cast<double>(cost_model_->iteration_time(scratch_).count());
  }
  return it->second;
}

Duration LatencyTable::predict(int64_t plen, int64_t ctx, int64_t dnum, int64_t prefix) {
  if (plen < 0 || ctx < 0 || dnum < 0 || prefix < 0 || plen + dnum == 0) {
    throw std::invalid_argument("latency table: predict needs plen + dnum > 0");
  }
  return Duration{static_cast<int64_t>(entry(key_of(plen, ctx, dnum, prefix)))};
}

void LatencyTable::observe(int64_t plen, int64_t ctx, int64_t dnum, int64_t prefix,
                           Duration measured) {
  if (plen + dnum <= 0) return;
  const Key k = key_of(plen, ctx, dnum, prefix);
  double& v = entry(k);
  v = (1 - params_.ema) * v + params_.ema * static_cast<double>(measured.count());
  observations_++;
  line_generation_[line_of(k)]++;
}

int64_t LatencyTable::prefill_budget(Duration target, int64_t ctx, int64_t dnum, int64_t cap,
                                     int64_t prefix) {
  if (dnum == 0) return cap;
  // Every predict() below sees the same buckets of ctx and prefix, so the answer depends on them,
  // dnum, cap and the target only.
  Key k = line_of(key_of(params_.plen_step, ctx, dnum, prefix));
  k.plen_bucket = cap;
  RecentBudget& recent = recent_budgets_[KeyHash{}(k) % recent_budgets_.size()];
  if (!recent.budget || !(recent.key == k)) {
    auto [it, inserted] = budgets_.try_emplace(k, Budget{-1, 0, 0, nullptr});
    if (inserted) it->second.line_generation = &line_generation_.try_emplace(line_of(k), 0).first->second;
    recent = {k, &it->second};
  }
  Budget& cached = *recent.budget;
  const uint64_t generation = *cached.line_generation;
  if (cached.target_ns == target.count() && cached.generation == generation) return cached.tokens;
  // Iteration time grows with the prefill tokens, so bisect over bucket multiples.
  int64_t lo = 0, hi = cap / params_.plen_step;  // answer in [lo, hi] buckets; lo feasible or 0
  if (hi > 0 && predict(params_.plen_step, ctx, dnum, prefix) <= target) {
    lo = 1;
    while (lo < hi) {
      const int64_t mid = (lo + hi + 1) / 2;
      if (predict(mid * params_.plen_step, ctx, dnum, prefix) <= target) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
  }
  cached.target_ns = target.count();
  cached.tokens = lo * params_.plen_step;
  cached.generation = generation;
  return cached.tokens;
}

}  // namespace servesim::policies
