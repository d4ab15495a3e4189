#include "models/cost/pipeline.h"

#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "models/cost/roofline_terms.h"

namespace servesim::models {
namespace {

class PipelineCostModel final : public IterationCostModel {
 public:
  PipelineCostModel(const Deployment& d, std::unique_ptr<IterationCostModel> whole,
                    const RooflineParams& link)
      : pp_(d.pp), label_(parallelism_label(d)), whole_(std::move(whole)) {
    const double hops = d.pp - 1;
    handoff_fixed_s_ = hops * to_seconds(link.allreduce_latency);
    handoff_s_per_token_ = hops * static_cast<double>(d.model->hidden_size) *
                           detail::kActivationBytes /
                           (d.gpu->tp_link_bytes_per_s(d.gpus()) * link.link_efficiency);
  }

  Duration iteration_time(const BatchShape& shape) const override {
    return whole_->iteration_time(shape) + handoffs(shape.total_query_tokens());
  }

  std::optional<Duration> decode_iteration_time(const DecodePass& pass) const override {
    const std::optional<Duration> whole = whole_->decode_iteration_time(pass);
    if (!whole) return std::nullopt;
    return *whole + handoffs(pass.decodes);
  }

  std::optional<Duration> mixed_iteration_time(const DecodePass& run,
                                               const BatchShape& rest) const override {
    const std::optional<Duration> whole = whole_->mixed_iteration_time(run, rest);
    if (!whole) return std::nullopt;
    return *whole + handoffs(run.decodes + rest.total_query_tokens());
  }

  OperatorTimes breakdown(const BatchShape& shape) const override {
    return with_handoffs(whole_->breakdown(shape), shape);
  }

  OperatorTimes counted_breakdown(const BatchShape& shape) const override {
    return with_handoffs(whole_->counted_breakdown(shape), shape);
  }

  // The stages run one after another for one micro-batch: the whole model's bound.
  Duration peak_bound_time(const BatchShape& shape) const override {
    return whole_->peak_bound_time(shape);
  }

  std::string describe() const override {
    return fmt::format("pipeline {}: {} stages of {}", label_, pp_, whole_->describe());
  }

  LookupStats lookup_stats() const override { return whole_->lookup_stats(); }

 private:
  Duration handoffs(int64_t tokens) const {
    return duration_from_seconds(handoff_fixed_s_ +
                                 handoff_s_per_token_ * static_cast<double>(tokens));
  }

  OperatorTimes with_handoffs(OperatorTimes t, const BatchShape& shape) const {
    t.allreduce += handoffs(shape.total_query_tokens());
    return t;
  }

  int pp_;
  std::string label_;
  std::unique_ptr<IterationCostModel> whole_;
  double handoff_fixed_s_ = 0;      // pp - 1 link latencies
  double handoff_s_per_token_ = 0;  // pp - 1 copies of one token's hidden state
};

}  // namespace

std::unique_ptr<IterationCostModel> make_pipeline_cost_model(
    const Deployment& d, const PlainCostModelFactory& make_plain, const RooflineParams& link) {
  validate_deployment(d);
  if (d.pp < 2) {
    throw std::invalid_argument(fmt::format("pp={}: no pipeline stages to model", d.pp));
  }
  detail::check_roofline_params(link);
  Deployment whole = d;
  whole.pp = 1;
  return std::make_unique<PipelineCostModel>(d, make_plain(whole), link);
}

}  // namespace servesim::models
