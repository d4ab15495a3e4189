#include "models/cost/attention_dp.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "models/cost/roofline_terms.h"

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
                       std::unique_ptr<IterationCostModel> experts, const RooflineParams& link,
                       AllToAllTime measured)
      : ranks_(d.attention_dp),
        label_(parallelism_label(d)),
        rank_(std::move(rank)),
        experts_(std::move(experts)),
        measured_(std::move(measured)) {
    const ModelSpec& m = *d.model;
    const double ep = d.ep;
    const double k = m.moe->experts_per_token;
    const double groups = ep * (1 - std::pow(1 - 1 / ep, k));
    const int moe_tp = d.gpus() / d.ep;
    // One copy per expert group over the instance's link, the rest to the group's other TP
    // shards over the group's own link.
    const double seconds_per_byte =
        groups * (1 / (d.gpu->tp_link_bytes_per_s(d.gpus()) * link.link_efficiency) +
                  (moe_tp - 1) / (d.gpu->tp_link_bytes_per_s(moe_tp) * link.link_efficiency));
    const double moe_layers = m.num_moe_layers();
    // Per token of the slowest rank: its TP group shares the sends; 2 bytes out, 2 back.
    a2a_s_per_token_ = moe_layers * static_cast<double>(m.hidden_size) * 2 *
                       detail::kActivationBytes / d.tp * seconds_per_byte;
    a2a_peak_s_per_token_ = a2a_s_per_token_ * link.link_efficiency;
    a2a_fixed_s_ = moe_layers * 2 * to_seconds(link.allreduce_latency);
    moe_layers_ = moe_layers;
    a2a_bytes_per_token_ = static_cast<double>(m.hidden_size) * detail::kActivationBytes / d.tp *
                           groups * moe_tp;
  }

  // Counted in the inner models' statistics as the passes they price.
  Duration iteration_time(const BatchShape& shape) const override {
    const BatchShape& slowest = slowest_rank(shape);
    return compose(rank_->counted_breakdown(slowest), experts_->counted_breakdown(shape).mlp_gemm,
                   dispatch_combine(slowest))
        .total();
  }

  OperatorTimes breakdown(const BatchShape& shape) const override {
    const BatchShape& slowest = slowest_rank(shape);
    return compose(rank_->breakdown(slowest), experts_->breakdown(shape).mlp_gemm,
                   dispatch_combine(slowest));
  }

  // The pass composed as iteration_time() composes it, from the inner models' peak bounds: the
  // slowest rank's bound without its MLP, the experts' MLP bound over every token, and the
  // dispatch and combine at the full link bandwidth without latencies. (The experts' deployment
  // alone is no bound: at tp x attention_dp GPUs every GPU reads every request's MLA latent KV,
  // or a replicated KV head's.)
  Duration peak_bound_time(const BatchShape& shape) const override {
    return peak_bound_breakdown(shape).total();
  }
  OperatorTimes peak_bound_breakdown(const BatchShape& shape) const override {
    const BatchShape& slowest = slowest_rank(shape);
    return compose(rank_->peak_bound_breakdown(slowest),
                   experts_->peak_bound_breakdown(shape).mlp_gemm,
                   duration_from_seconds(a2a_peak_s_per_token_ *
                                         static_cast<double>(slowest.total_query_tokens())));
  }

  std::string describe() const override {
    return fmt::format("attention DP {}: each of {} ranks {}; experts {}; dispatch and combine {}",
                       label_, ranks_, rank_->describe(), experts_->describe(),
                       measured_ ? "from the measured NCCL all-to-all" : "on the link model");
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

  // The slowest rank's pass (`rank`) without its MLP (the attention's all-reduce stays, the
  // MLP's goes), plus the experts' MLP over every token (`experts_mlp`), plus the dispatch and
  // combine of the slowest rank's tokens (counted with the all-reduces: the pass's
  // communication). The same for times and for peak bounds.
  static OperatorTimes compose(OperatorTimes rank, Duration experts_mlp,
                               Duration dispatch_combine) {
    rank.allreduce = rank.allreduce / 2 + dispatch_combine;
    rank.mlp_gemm = experts_mlp;
    return rank;
  }

  // Dispatch and combine of the tokens of `slowest` on every MoE layer: the measured all-to-all
  // where there is one at that size, else the link model.
  Duration dispatch_combine(const BatchShape& slowest) const {
    const auto tokens = static_cast<double>(slowest.total_query_tokens());
    std::optional<double> measured;
    if (measured_) measured = measured_(a2a_bytes_per_token_ * tokens);
    return duration_from_seconds(measured ? moe_layers_ * 2 * *measured
                                          : a2a_fixed_s_ + a2a_s_per_token_ * tokens);
  }

  int ranks_;
  std::string label_;
  double a2a_s_per_token_ = 0;  // dispatch + combine on every MoE layer, per token of a rank
  double a2a_peak_s_per_token_ = 0;  // the same at the full link bandwidth
  double a2a_fixed_s_ = 0;      // their latencies
  double moe_layers_ = 0;
  double a2a_bytes_per_token_ = 0;  // one direction, per GPU, per token of the slowest rank
  std::unique_ptr<IterationCostModel> rank_;
  std::unique_ptr<IterationCostModel> experts_;
  AllToAllTime measured_;  // empty: the link model
  mutable std::vector<int32_t> rank_of_;
  mutable std::vector<int64_t> tokens_, context_;
  mutable BatchShape scratch_;
};

}  // namespace

std::unique_ptr<IterationCostModel> make_attention_dp_cost_model(
    const Deployment& d, const PlainCostModelFactory& make_plain, const RooflineParams& link,
    AllToAllTime measured_all_to_all) {
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
  detail::check_roofline_params(link);
  return std::make_unique<AttentionDpCostModel>(d, make_plain(rank), make_plain(experts), link,
                                                std::move(measured_all_to_all));
}

}  // namespace servesim::models
