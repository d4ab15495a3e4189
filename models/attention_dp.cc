#include "models/attention_dp.h"

#include <algorithm>
#include <tuple>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace servesim::models {

void assign_ranks(const BatchShape& shape, int ranks, std::vector<int32_t>* rank_of) {
  if (ranks < 1) throw std::invalid_argument(fmt::format("{} attention-DP ranks", ranks));
  rank_of->assign(shape.segments.size(), 0);
  std::vector<int64_t> tokens(static_cast<size_t>(ranks), 0);
  // Decode steps, one token each, dealt in turn.
  int32_t next = 0;
  for (size_t i = 0; i < shape.segments.size(); ++i) {
    if (shape.segments[i].query_tokens != 1) continue;
    (*rank_of)[i] = next;
    ++tokens[static_cast<size_t>(next)];
    next = next + 1 == ranks ? 0 : next + 1;
  }
  // Prompt chunks, in order, each to the rank with the fewest tokens (the lowest index on a tie).
  for (size_t i = 0; i < shape.segments.size(); ++i) {
    if (shape.segments[i].query_tokens == 1) continue;
    const auto least = static_cast<int32_t>(std::min_element(tokens.begin(), tokens.end()) -
                                            tokens.begin());
    (*rank_of)[i] = least;
    tokens[static_cast<size_t>(least)] += shape.segments[i].query_tokens;
  }
}

void split_over_ranks(const BatchShape& shape, int ranks, std::vector<BatchShape>* out) {
  std::vector<int32_t> rank_of;
  assign_ranks(shape, ranks, &rank_of);
  out->resize(static_cast<size_t>(ranks));
  for (BatchShape& r : *out) r.clear();
  for (size_t i = 0; i < shape.segments.size(); ++i) {
    (*out)[static_cast<size_t>(rank_of[i])].segments.push_back(shape.segments[i]);
  }
}

namespace {

class AttentionDpCostModel final : public IterationCostModel {
 public:
  AttentionDpCostModel(const Deployment& d, std::unique_ptr<IterationCostModel> rank,
                       std::unique_ptr<IterationCostModel> experts)
      : ranks_(d.attention_dp),
        label_(parallelism_label(d)),
        moe_layer_share_(static_cast<double>(d.model->num_moe_layers()) /
                         static_cast<double>(d.model->num_layers)),
        rank_(std::move(rank)),
        experts_(std::move(experts)) {}

  Duration iteration_time(const BatchShape& shape) const override {
    const BatchShape& slowest = slowest_rank(shape);
    // Counted in the inner models' statistics as the passes they price.
    rank_->iteration_time(slowest);
    experts_->iteration_time(shape);
    return compose(slowest, shape).total();
  }

  OperatorTimes breakdown(const BatchShape& shape) const override {
    return compose(slowest_rank(shape), shape);
  }

  // The experts' deployment spreads everything, attention included, over every GPU: no rank of
  // the attention-DP instance can do its share faster.
  Duration peak_bound_time(const BatchShape& shape) const override {
    return experts_->peak_bound_time(shape);
  }

  std::string describe() const override {
    return fmt::format("attention DP {}: each of {} ranks {}; experts {}", label_, ranks_,
                       rank_->describe(), experts_->describe());
  }

  LookupStats lookup_stats() const override {
    const LookupStats a = rank_->lookup_stats();
    const LookupStats b = experts_->lookup_stats();
    return {a.interpolated_s + b.interpolated_s, a.extrapolated_s + b.extrapolated_s,
            a.analytic_s + b.analytic_s, a.lookups + b.lookups};
  }

 private:
  // The segments of the rank that takes longest: the most query tokens, then the most context
  // tokens (attention, GEMMs and norms grow with both), then the lowest index.
  const BatchShape& slowest_rank(const BatchShape& shape) const {
    if (shape.empty()) throw std::invalid_argument("iteration cost requested for an empty batch");
    assign_ranks(shape, ranks_, &rank_of_);
    tokens_.assign(static_cast<size_t>(ranks_), 0);
    context_.assign(static_cast<size_t>(ranks_), 0);
    for (size_t i = 0; i < shape.segments.size(); ++i) {
      const auto r = static_cast<size_t>(rank_of_[i]);
      tokens_[r] += shape.segments[i].query_tokens;
      context_[r] += shape.segments[i].context_tokens;
    }
    size_t slowest = 0;
    for (size_t r = 1; r < tokens_.size(); ++r) {
      if (std::tie(tokens_[r], context_[r]) > std::tie(tokens_[slowest], context_[slowest])) {
        slowest = r;
      }
    }
    scratch_.clear();
    for (size_t i = 0; i < shape.segments.size(); ++i) {
      if (static_cast<size_t>(rank_of_[i]) == slowest) scratch_.segments.push_back(shape.segments[i]);
    }
    return scratch_;
  }

  // The slowest rank's pass without its MLP (the attention's all-reduce stays, the MLP's goes),
  // plus the experts' MLP over every token and the dispatch + combine on the MoE layers: one
  // all-reduce's volume of all the tokens (the experts' model counts two all-reduces per layer,
  // on every layer).
  OperatorTimes compose(const BatchShape& slowest, const BatchShape& shape) const {
    OperatorTimes t = rank_->breakdown(slowest);
    t.allreduce = t.allreduce / 2;
    const OperatorTimes moe = experts_->breakdown(shape);
    t.mlp_gemm = moe.mlp_gemm;
    t.allreduce += Duration{static_cast<int64_t>(static_cast<double>(moe.allreduce.count()) *
                                                 moe_layer_share_ / 2)};
    return t;
  }

  int ranks_;
  std::string label_;
  double moe_layer_share_;
  std::unique_ptr<IterationCostModel> rank_;
  std::unique_ptr<IterationCostModel> experts_;
  mutable std::vector<int32_t> rank_of_;
  mutable std::vector<int64_t> tokens_, context_;
  mutable BatchShape scratch_;
};

}  // namespace

std::unique_ptr<IterationCostModel> make_attention_dp_cost_model(
    const Deployment& d, const PlainCostModelFactory& make_plain) {
  validate_deployment(d);
  if (d.attention_dp < 2) {
    throw std::invalid_argument(fmt::format("attention_dp={}: no attention data parallelism to model",
                                            d.attention_dp));
  }
  Deployment rank = d;
  rank.attention_dp = 1;
  rank.ep = 1;
  Deployment experts = d;
  experts.tp = d.gpus();
  experts.attention_dp = 1;
  return std::make_unique<AttentionDpCostModel>(d, make_plain(rank), make_plain(experts));
}

}  // namespace servesim::models
