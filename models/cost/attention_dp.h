// Attention data parallelism (Deployment::attention_dp): one instance of attention_dp ranks, each
// with its own requests, whose MoE layers run together.
//
// Contract: a pass of the instance is given as one BatchShape (every rank's segments); the model
// splits it over the ranks (split_over_ranks), prices each rank's share on a plain deployment of
// one rank (tp GPUs, no attention DP, no expert parallelism) and the experts on a plain deployment
// of all the instance's GPUs (tp x attention_dp, ep), and returns
//   the slowest rank's pass - its MLP - its MLP all-reduces
//   + the experts' MLP over all the pass's tokens + their dispatch and combine,
// since every MoE layer waits for the slowest rank's attention. The slowest rank is the one with
// the most query tokens, then the most context tokens (its pass grows with both), so that only
// one rank is priced per pass. Dispatch and combine, per MoE layer, are an all-to-all: each of the
// slowest rank's tokens (per GPU of its TP group) goes, as 16-bit hidden states, to the GPUs
// holding its experts and comes back the same way: one copy to each of the
//   g = ep x (1 - (1 - 1/ep)^k) expert-parallel groups it reaches (expected distinct groups of
//   k random experts), on the link between the instance's GPUs (GpuSpec::tp_link_bytes_per_s at
//   tp x attention_dp GPUs), and g x (moe_tp - 1) copies to the groups' other TP shards
//   (moe_tp = tp x attention_dp / ep) on the link of moe_tp GPUs,
// both at link_efficiency, plus two collective latencies. Where the GPU's profile measured NCCL's
// all-to-all on tp x attention_dp GPUs of one node (make_profiled_cost_model passes it as
// `measured_all_to_all`), each direction is that measurement instead, at a message of
// tokens / tp x hidden x 2 B x g x moe_tp per GPU (every copy the link model counts). With every
// expert on every GPU (ep 1) that is an all-gather and a reduce-scatter of the rank's tokens. The experts' deployment
// also prices the shared experts and a MoE model's dense layers, sharded over every GPU rather than
// replicated per rank: the same FLOPs per GPU, fewer weight bytes read (documented
// approximation). The ranks are balanced as split_over_ranks() places requests; an engine's
// own placement may be less even. Deterministic; lookup_stats() sums both inner models'.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "models/cost/cost_model.h"

namespace servesim::models {

// The rank of each segment of `shape` over `ranks` attention-DP ranks: decode steps (one query
// token) are dealt in turn, rank 0 first, so every rank holds as many as the others or one less;
// then each prompt chunk, in order, goes to the rank with the fewest query tokens so far (the
// lowest index on a tie). O(segments + chunks x ranks). Throws std::invalid_argument unless
// ranks >= 1.
void assign_ranks(const BatchShape& shape, int ranks, std::vector<int32_t>* rank_of);
// The same split as shapes: `out` is resized to `ranks` shapes, some possibly empty.
void split_over_ranks(const BatchShape& shape, int ranks, std::vector<BatchShape>* out);

// Seconds of one measured all-to-all among the instance's GPUs in which each GPU sends `bytes` in
// all (its share to every other GPU together), or nullopt where nothing was measured.
using AllToAllTime = std::function<std::optional<double>(double bytes)>;

// The model above for `d` (d.attention_dp > 1; validate_deployment() must accept it); `link`
// gives the link efficiency and collective latency of the dispatch and combine, and
// `measured_all_to_all` (may be empty) the measured all-to-all that replaces them. Throws as
// validate_deployment() and the factory do.
std::unique_ptr<IterationCostModel> make_attention_dp_cost_model(
    const Deployment& d, const PlainCostModelFactory& make_plain, const RooflineParams& link,
    AllToAllTime measured_all_to_all = {});

}  // namespace servesim::models
