#include "models/attention_dp.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace servesim::models {

void split_over_ranks(const BatchShape& shape, int ranks, std::vector<BatchShape>* out) {
  if (ranks < 1) throw std::invalid_argument(fmt::format("{} attention-DP ranks", ranks));
  out->resize(static_cast<size_t>(ranks));
  for (BatchShape& r : *out) r.clear();
  std::vector<int64_t> tokens(static_cast<size_t>(ranks), 0);
  for (const Segment& seg : shape.segments) {
    size_t best = 0;
    for (size_t r = 1; r < tokens.size(); ++r) {
      if (tokens[r] < tokens[best] ||
          (tokens[r] == tokens[best] &&
           (*out)[r].segments.size() < (*out)[best].segments.size())) {
        best = r;
      }
    }
    tokens[best] += seg.query_tokens;
    (*out)[best].segments.push_back(seg);
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
    // Counted in the inner models' statistics as the passes they price.
    for (const BatchShape& r : split(shape)) {
      if (!r.empty()) rank_->iteration_time(r);
    }
    experts_->iteration_time(shape);
    return breakdown(shape).total();
  }

  OperatorTimes breakdown(const BatchShape& shape) const override {
    OperatorTimes slowest;
    bool any = false;
    for (const BatchShape& r : split(shape)) {
      if (r.empty()) continue;
      OperatorTimes t = rank_->breakdown(r);
      t.mlp_gemm = Duration{0};
      t.allreduce = t.allreduce / 2;  // the attention's all-reduce stays; the MLP's is replaced
      if (!any || t.total() > slowest.total()) slowest = t;
      any = true;
    }
    if (!any) throw std::invalid_argument("iteration cost requested for an empty batch");
    const OperatorTimes moe = experts_->breakdown(shape);
    slowest.mlp_gemm = moe.mlp_gemm;
    // Dispatch + combine on the MoE layers: one all-reduce's volume of all the tokens (the
    // experts' model counts two all-reduces per layer, on every layer).
    slowest.allreduce += Duration{static_cast<int64_t>(
        static_cast<double>(moe.allreduce.count()) * moe_layer_share_ / 2)};
    return slowest;
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
  const std::vector<BatchShape>& split(const BatchShape& shape) const {
    split_over_ranks(shape, ranks_, &scratch_);
    return scratch_;
  }

  int ranks_;
  std::string label_;
  double moe_layer_share_;
  std::unique_ptr<IterationCostModel> rank_;
  std::unique_ptr<IterationCostModel> experts_;
  mutable std::vector<BatchShape> scratch_;
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
