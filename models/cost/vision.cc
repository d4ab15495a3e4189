#include "models/cost/vision.h"

#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "models/cost/added_passes.h"

namespace servesim::models {
namespace {

// Any context an image's patches may have: far beyond the largest image (2^24 patches).
constexpr int64_t kEncoderMaxPositions = int64_t{1} << 24;

class VisionCostModel final : public AddedPassesCostModel {
 public:
  VisionCostModel(std::shared_ptr<const IterationCostModel> target,
                  std::shared_ptr<const IterationCostModel> encoder,
                  std::shared_ptr<const ModelSpec> encoder_spec)
      : AddedPassesCostModel(std::move(target), std::move(encoder)),
        encoder_spec_(std::move(encoder_spec)) {}

  // A decode pass encodes nothing.
  std::optional<Duration> decode_iteration_time(const DecodePass& pass) const override {
    return target().decode_iteration_time(pass);
  }

  std::optional<Duration> mixed_iteration_time(const DecodePass& run,
                                               const BatchShape& rest) const override {
    const std::optional<Duration> t = target().mixed_iteration_time(run, rest);
    if (!t) return std::nullopt;
    return *t + added_time(rest);
  }

  std::string describe() const override {
    return fmt::format("{}; vision encoder: {} layers of {}, {:.2f} B parameters",
                       target().describe(), encoder_spec_->num_layers, encoder_spec_->hidden_size,
                       static_cast<double>(encoder_spec_->param_count) / 1e9);
  }

 private:
  // One encoder pass over every image of `shape` (none without images).
  const std::vector<const BatchShape*>& added_passes(const BatchShape& shape) const override {
    passes_.clear();
    if (shape.encoder_inputs.empty()) return passes_;
    pass_.clear();
    for (const EncoderInput& in : shape.encoder_inputs) {
      const int64_t p = in.patches_per_image;
      for (int64_t i = 0; i < in.images; ++i) pass_.segments.push_back({p, p + p / 2, 0});
    }
    passes_.push_back(&pass_);
    return passes_;
  }

  std::shared_ptr<const ModelSpec> encoder_spec_;  // what the encoder's model was built for
  // Scratch: one model per engine, one thread at a time.
  mutable BatchShape pass_;
  mutable std::vector<const BatchShape*> passes_;
};

}  // namespace

ModelSpec vision_encoder_model(const ModelSpec& target) {
  if (!target.vision) {
    throw std::invalid_argument(fmt::format("model {} has no vision encoder", target.key));
  }
  const VisionEncoderSpec& v = *target.vision;
  ModelSpec e;
  e.key = target.key + "-vision";
  e.name = target.name + " vision encoder";
  e.hidden_size = v.hidden_size;
  e.num_layers = v.num_layers;
  e.num_attention_heads = v.num_heads;
  e.num_kv_heads = v.num_heads;
  e.head_dim = v.hidden_size / v.num_heads;
  e.intermediate_size = v.intermediate_size;
  e.vocab_size = 0;
  e.max_position_embeddings = kEncoderMaxPositions;
  e.gated_mlp = false;
  e.param_count = v.param_count;
  e.weights_bytes_16bit = 2 * v.param_count;
  return e;
}

int vision_encoder_tp(const ModelSpec& target, int tp) {
  if (!target.vision || tp < 1) throw std::invalid_argument("vision_encoder_tp: no encoder or tp");
  return std::gcd(tp, target.vision->num_heads);
}

std::unique_ptr<IterationCostModel> make_vision_cost_model(
    std::shared_ptr<const IterationCostModel> target,
    std::shared_ptr<const IterationCostModel> encoder,
    std::shared_ptr<const ModelSpec> encoder_spec) {
  if (!encoder_spec) throw std::invalid_argument("vision cost model: null encoder spec");
  return std::make_unique<VisionCostModel>(std::move(target), std::move(encoder),
                                           std::move(encoder_spec));
}

}  // namespace servesim::models
