#include "models/cost/expert_load.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

#include "models/cost/roofline_terms.h"

namespace servesim::models {

// Busiest-rank shares of a power-law routing at tokens 2^0 .. 2^kPowerLawMaxLog2Tokens.
struct ExpertLoadModel::Grid {
  std::vector<double> routed_share;   // busiest rank's rows / (tokens x k)
  std::vector<double> touched_share;  // its nonzero experts / (E / ep)
};

namespace {

// splitmix64: the same stream on every platform (std:: distributions are not).
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
};

// One draw of aiconfigurator's power-law loads (expert_routing.h): per-expert rows for `tokens`
// tokens, summing to tokens * k, each at most `tokens`.
void draw_loads(int64_t tokens, int experts, int k, double alpha, SplitMix64& rng,
                std::vector<int64_t>* loads, std::vector<double>* x, std::vector<int>* order) {
  const bool many = tokens * k > experts;
  const double xmin = many ? 1.0 : 0.01;
  const double xmax = std::max(xmin, many ? 0.8 * static_cast<double>(tokens) : 2.0);
  const double a = 1 - alpha;
  const double lo = std::pow(xmin, a), hi = std::pow(xmax, a);
  x->resize(static_cast<size_t>(experts));
  double sum = 0;
  for (double& v : *x) {
    v = std::pow((hi - lo) * rng.uniform() + lo, 1 / a);
    sum += v;
  }
  const int64_t target = tokens * k;
  loads->resize(static_cast<size_t>(experts));
  int64_t total = 0;
  for (size_t i = 0; i < x->size(); ++i) {
    (*loads)[i] = std::llround((*x)[i] / sum * static_cast<double>(target));
    total += (*loads)[i];
  }
  // The rounding remainder: to (or from) the largest loads first, in turn.
  order->resize(static_cast<size_t>(experts));
  std::iota(order->begin(), order->end(), 0);
  std::stable_sort(order->begin(), order->end(),
                   [&](int p, int q) { return (*loads)[p] > (*loads)[q]; });
  for (size_t i = 0; total != target; i = (i + 1) % order->size()) {
    int64_t& l = (*loads)[static_cast<size_t>((*order)[i])];
    if (total < target) {
      ++l;
      ++total;
    } else if (l > 0) {
      --l;
      --total;
    }
  }
  // No expert takes a token twice: the excess over `tokens` goes to the least loaded experts.
  int64_t excess = 0;
  for (int64_t& l : *loads) {
    if (l > tokens) {
      excess += l - tokens;
      l = tokens;
    }
  }
  while (excess > 0) {
    std::stable_sort(order->begin(), order->end(),
                     [&](int p, int q) { return (*loads)[p] < (*loads)[q]; });
    for (size_t i = 0; i < order->size() && excess > 0; ++i) {
      int64_t& l = (*loads)[static_cast<size_t>((*order)[i])];
      const int64_t room = std::min(tokens - l, excess);
      l += room;
      excess -= room;
    }
  }
}

std::shared_ptr<const ExpertLoadModel::Grid> build_grid(double alpha, int experts, int k,
                                                        int ep) {
  auto grid = std::make_shared<ExpertLoadModel::Grid>();
  const int per_rank = experts / ep;
  std::vector<int64_t> loads;
  std::vector<double> x;
  std::vector<int> order;
  SplitMix64 rng{0x5e7e5e7e5e7e5e7eULL};
  for (int e = 0; e <= ExpertLoadModel::kPowerLawMaxLog2Tokens; ++e) {
    const int64_t tokens = int64_t{1} << e;
    double routed = 0, touched = 0;
    for (int d = 0; d < ExpertLoadModel::kPowerLawDraws; ++d) {
      draw_loads(tokens, experts, k, alpha, rng, &loads, &x, &order);
      int64_t best = -1, best_touched = 0;
      for (int r = 0; r < ep; ++r) {
        int64_t sum = 0, nonzero = 0;
        for (int i = r * per_rank; i < (r + 1) * per_rank; ++i) {
          sum += loads[static_cast<size_t>(i)];
          nonzero += loads[static_cast<size_t>(i)] > 0 ? 1 : 0;
        }
        if (sum > best) {
          best = sum;
          best_touched = nonzero;
        }
      }
      routed += static_cast<double>(best);
      touched += static_cast<double>(best_touched);
    }
    const double draws = ExpertLoadModel::kPowerLawDraws;
    grid->routed_share.push_back(routed / draws / static_cast<double>(tokens * k));
    grid->touched_share.push_back(touched / draws / per_rank);
  }
  return grid;
}

}  // namespace

ExpertLoadModel::ExpertLoadModel(const ExpertRouting& routing, int experts,
                                 int experts_per_token, int ep)
    : routing_(routing), experts_(experts), k_(experts_per_token), ep_(ep) {
  if (experts < 1 || experts_per_token < 1 || experts_per_token > experts || ep < 1 ||
      experts % ep != 0) {
    throw std::invalid_argument(fmt::format(
        "expert load model needs 1 <= k <= experts and ep dividing experts; got experts={}, "
        "k={}, ep={}",
        experts, experts_per_token, ep));
  }
  max_score_ = detail::expected_max_normal_score(ep);
  if (routing.kind != ExpertRouting::Kind::kPowerLaw) return;
  static std::mutex mutex;
  static std::map<std::tuple<double, int, int, int>, std::shared_ptr<const Grid>> cache;
  const auto key = std::make_tuple(routing.alpha, experts, experts_per_token, ep);
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = cache[key];
  if (!slot) slot = build_grid(routing.alpha, experts, experts_per_token, ep);
  grid_ = slot;
}

RankLoad ExpertLoadModel::busiest(double rows) const {
  if (!(rows >= 0)) throw std::invalid_argument(fmt::format("{} rows of a MoE layer", rows));
  RankLoad load;
  switch (routing_.kind) {
    case ExpertRouting::Kind::kRandom:
      load.routed_rows = detail::busiest_rank_routed_rows(rows, k_, ep_, max_score_);
      load.touched_experts =
          detail::expected_touched_experts(load.routed_rows, experts_, k_, ep_);
      return load;
    case ExpertRouting::Kind::kBalanced:
      load.routed_rows = rows * k_ / ep_;
      load.touched_experts = std::min(experts_ / ep_, load.routed_rows);
      return load;
    case ExpertRouting::Kind::kPowerLaw:
      break;
  }
  // Shares interpolated in log2(tokens) between grid points; constant outside the grid.
  const double at = std::clamp(rows > 0 ? std::log2(rows) : 0.0, 0.0,
                               static_cast<double>(kPowerLawMaxLog2Tokens));
  const auto lo = static_cast<size_t>(std::floor(at));
  const size_t hi = std::min(lo + 1, grid_->routed_share.size() - 1);
  const double f = at - static_cast<double>(lo);
  const auto lerp = [&](const std::vector<double>& v) { return v[lo] + f * (v[hi] - v[lo]); };
  load.routed_rows = lerp(grid_->routed_share) * rows * k_;
  load.touched_experts = std::min(lerp(grid_->touched_share) * experts_ / ep_, load.routed_rows);
  return load;
}

}  // namespace servesim::models
