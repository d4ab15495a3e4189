// Pipeline parallelism (Deployment::pp): the model's layers split into pp stages of tp GPUs.
//
// Contract: a pass of one micro-batch runs every layer once, stage after stage, so it takes the
// time of the whole model on tp GPUs (the plain deployment's pass: the same layers, the same
// per-layer shapes, the embeddings on the first stage and the LM head on the last), plus pp - 1
// hand-offs of the micro-batch's hidden states between consecutive stages: each costs the link's
// latency (RooflineParams::allreduce_latency) plus tokens x hidden x 2 bytes at link_efficiency
// of the link between the pipeline's GPUs (GpuSpec::tp_link_bytes_per_s at tp x pp GPUs: NVLink
// inside the NVLink domain, else the scale-out network); every TP rank of a stage sends its copy
// to its peer at once. The hand-offs are reported with the all-reduces (the pass's communication).
// While one micro-batch is in a stage, the others use the other stages: the scenario runs a
// pipeline as pp engine instances (micro-batch slots, as vLLM's virtual engines), each priced
// with this model and each holding 1/pp of the pipeline's KV. Pipeline bubbles between unequal
// micro-batches are not modelled: each slot's pass is its own latency, never longer because a
// neighbouring slot's micro-batch is larger. Deterministic; lookup_stats() is the inner model's.
#pragma once

#include <memory>

#include "models/cost/cost_model.h"

namespace servesim::models {

// The model above for `d` (d.pp > 1; validate_deployment() must accept it): `make_plain` builds the
// model of the whole pass on d.tp GPUs (d with pp = 1); `link` gives the hand-off latency and the
// link efficiency. Throws std::invalid_argument for d.pp < 2, and as validate_deployment() and the
// factory do.
std::unique_ptr<IterationCostModel> make_pipeline_cost_model(
    const Deployment& d, const PlainCostModelFactory& make_plain, const RooflineParams& link);

}  // namespace servesim::models
