// A cost model whose passes carry another model's passes inside them: the speculative drafter's
// (speculative.h), the vision encoder's (vision.h).
//
// Contract: a pass takes the target's time for the whole shape plus the added model's time for
// each pass added_passes() lists for it (none: the target's time alone). Breakdowns, peak bounds
// and lookup statistics are summed the same way. The added passes run inside the target's step
// (under its CUDA graphs, one CPU dispatch), so the added model should be built without a
// per-iteration overhead. Value types only; one thread at a time (subclasses keep scratch shapes).
#pragma once

#include <memory>
#include <vector>

#include "models/cost/cost_model.h"

namespace servesim::models {

class AddedPassesCostModel : public IterationCostModel {
 public:
  // REQUIRES: both models non-null (throws std::invalid_argument otherwise).
  AddedPassesCostModel(std::shared_ptr<const IterationCostModel> target,
                       std::shared_ptr<const IterationCostModel> added);

  LookupStats lookup_stats() const override;
  Duration iteration_time(const BatchShape& shape) const override;
  OperatorTimes breakdown(const BatchShape& shape) const override;
  OperatorTimes counted_breakdown(const BatchShape& shape) const override;
  Duration peak_bound_time(const BatchShape& shape) const override;
  OperatorTimes peak_bound_breakdown(const BatchShape& shape) const override;

 protected:
  // The added model's passes for the target's pass `shape`, in order (one may be listed several
  // times). The list and the shapes it points to stay valid until the next call.
  virtual const std::vector<const BatchShape*>& added_passes(const BatchShape& shape) const = 0;
  // The added model's time for every pass of added_passes(shape).
  Duration added_time(const BatchShape& shape) const;

  const IterationCostModel& target() const { return *target_; }

 private:
  // `op` of the target on `shape`, plus `op` of the added model on each added pass.
  OperatorTimes summed(const BatchShape& shape,
                       OperatorTimes (IterationCostModel::*op)(const BatchShape&) const) const;

  std::shared_ptr<const IterationCostModel> target_;
  std::shared_ptr<const IterationCostModel> added_;
};

}  // namespace servesim::models
