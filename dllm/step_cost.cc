#include "dllm/step_cost.h"

#include <stdexcept>

#include "dllm/memory.h"

namespace servesim::dllm {

StepCost::StepCost(const models::IterationCostModel& model, const models::Deployment& d,
                   StepCostKnobs knobs)
    : model_(model),
      vocab_(d.model->vocab_size),
      bandwidth_(d.gpu->mem_bw_bytes_per_s * knobs.memory_efficiency),
      knobs_(knobs) {
  if (!(knobs.memory_efficiency > 0 && knobs.memory_efficiency <= 1) || knobs.softmax_bytes < 1) {
    throw std::invalid_argument("StepCost: memory_efficiency must be in (0, 1], softmax_bytes >= 1");
  }
}

Duration StepCost::lm_head_time(int64_t rows) {
  auto it = lm_memo_.find(rows);
  if (it != lm_memo_.end()) return it->second;
  models::BatchShape one;
  one.segments.push_back({1, 1, rows});
  const Duration gemm = model_.breakdown(one).lm_head;
  // Sampler: read bf16 logits, write and read the softmax.
  const double bytes = static_cast<double>(rows) * static_cast<double>(vocab_) *
                       static_cast<double>(2 + 2 * knobs_.softmax_bytes);
  const Duration t = gemm + duration_from_seconds(bytes / bandwidth_);
  lm_memo_.emplace(rows, t);
  return t;
}

Duration StepCost::step_time(const std::vector<StepWork>& work) {
  if (work.empty()) throw std::invalid_argument("StepCost: empty batch");
  // Filled by index (the shape is reused across passes: no allocation once it has grown).
  shape_.segments.resize(work.size());
  int64_t side = 0;
  for (size_t i = 0; i < work.size(); ++i) {
    shape_.segments[i] = {work[i].query_tokens, work[i].context_tokens, 0};
    side += work[i].side_tokens;
  }
  if (side > 0) shape_.segments.push_back({side, side, 0});
  Duration t = model_.iteration_time(shape_) + knobs_.step_overhead +
               knobs_.request_overhead * static_cast<int64_t>(work.size());
  last_chunks_ = 0;
  for_each_logit_chunk(
      work, [](const StepWork& w) { return w.logit_rows; }, knobs_.max_num_logits,
      [this, &t](int64_t rows) {
        t += lm_head_time(rows);
        ++last_chunks_;
      });
  return t;
}

}  // namespace servesim::dllm
