// A multimodal model's vision encoder as the serving engines run it (docs/multimodal.md).
//
// Contract:
// - A request's images are encoded in the pass that computes its first prompt chunk (the chunk
//   starting at token 0), inside that pass's step: the images' tokens lead the prompt, and vLLM's
//   scheduler runs the encoder for the images the scheduled tokens reach before the language
//   model reads their embeddings. The engine lists them in BatchShape::encoder_inputs.
// - vision_encoder_model() describes the tower as a dense model of its num_layers blocks (head_dim
//   hidden / num_heads, an ungated MLP, no vocabulary), so that the target's cost model family
//   prices it from the same tables. The merger's GEMMs (under 4 % of the tower's FLOPs for the
//   shipped models) are left out.
// - make_vision_cost_model() adds, to each target pass with encoder inputs, one encoder pass: each
//   image a segment of its P patches, all images' patches through the GEMMs together, and each
//   image's attention priced as a chunk of P queries behind P / 2 cached keys: P^2 query-key
//   pairs, the work of every patch attending to every other (bidirectional attention), where a
//   causal chunk of P alone has P^2 / 2. Passes without images are the target's alone, so decode
//   passes keep their fast paths.
// - vision_encoder_tp(): the encoder runs tensor-parallel on the instance's GPUs (vLLM's default
//   mm_encoder_tp_mode "weights"), over at most as many ranks as it has heads.
// - Value types only; deterministic; never sees the simulator.
#pragma once

#include <memory>

#include "models/cost/cost_model.h"

namespace servesim::models {

// The vision tower of `target` as a model (key "<target>-vision"). REQUIRES: target.vision.
ModelSpec vision_encoder_model(const ModelSpec& target);

// TP degree of the encoder on an instance of `tp` GPUs: the largest divisor of the encoder's
// heads that divides tp (their greatest common divisor). REQUIRES: target.vision, tp >= 1.
int vision_encoder_tp(const ModelSpec& target, int tp);

// See the contract. `encoder` prices the tower's passes: a plain cost model built for
// `encoder_spec` (vision_encoder_model() of the target) on the target's GPUs, at
// vision_encoder_tp() and BF16, with no per-iteration overhead. The returned model shares all
// three, so the encoder's spec lives as long as the model that points into it. Throws
// std::invalid_argument for a null model.
std::unique_ptr<IterationCostModel> make_vision_cost_model(
    std::shared_ptr<const IterationCostModel> target,
    std::shared_ptr<const IterationCostModel> encoder,
    std::shared_ptr<const ModelSpec> encoder_spec);

}  // namespace servesim::models
