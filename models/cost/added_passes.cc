#include "models/cost/added_passes.h"

#include <stdexcept>
#include <utility>

namespace servesim::models {

AddedPassesCostModel::AddedPassesCostModel(std::shared_ptr<const IterationCostModel> target,
                                           std::shared_ptr<const IterationCostModel> added)
    : target_(std::move(target)), added_(std::move(added)) {
  if (!target_ || !added_) throw std::invalid_argument("added-passes cost model: null model");
}

LookupStats AddedPassesCostModel::lookup_stats() const {
  LookupStats stats = target_->lookup_stats();
  stats += added_->lookup_stats();
  return stats;
}

OperatorTimes AddedPassesCostModel::summed(
    const BatchShape& shape,
    OperatorTimes (IterationCostModel::*op)(const BatchShape&) const) const {
  OperatorTimes t = (target_.get()->*op)(shape);
  for (const BatchShape* pass : added_passes(shape)) t += (added_.get()->*op)(*pass);
  return t;
}

Duration AddedPassesCostModel::added_time(const BatchShape& shape) const {
  Duration d{0};
  for (const BatchShape* pass : added_passes(shape)) d += added_->iteration_time(*pass);
  return d;
}

Duration AddedPassesCostModel::iteration_time(const BatchShape& shape) const {
  return target_->iteration_time(shape) + added_time(shape);
}

OperatorTimes AddedPassesCostModel::breakdown(const BatchShape& shape) const {
  return summed(shape, &IterationCostModel::breakdown);
}

OperatorTimes AddedPassesCostModel::counted_breakdown(const BatchShape& shape) const {
  return summed(shape, &IterationCostModel::counted_breakdown);
}

Duration AddedPassesCostModel::peak_bound_time(const BatchShape& shape) const {
  Duration d = target_->peak_bound_time(shape);
  for (const BatchShape* pass : added_passes(shape)) d += added_->peak_bound_time(*pass);
  return d;
}

OperatorTimes AddedPassesCostModel::peak_bound_breakdown(const BatchShape& shape) const {
  return summed(shape, &IterationCostModel::peak_bound_breakdown);
}

}  // namespace servesim::models
