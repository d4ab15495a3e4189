// MoE with shared experts and dense-first layers, MLA, sliding-window attention, the weight
// dtypes beyond FP8 and the rack-scale GPUs: hand-computed FLOPs, bytes and KV sizes.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "models/cost/attention_dp.h"
#include "models/cost/cost_model.h"
#include "models/catalog/hardware.h"
#include "models/cost/memory_model.h"
#include "models/cost/roofline_terms.h"
#include "core/error.h"
#include "tests/unit/models/catalog_fixture.h"
#include "tests/unit/models/unit_rates.h"

namespace servesim::models {
namespace {

// 2 layers: layer 0 dense (MLP 128), layer 1 MoE (4 experts of 32, top-2, one shared expert of
// 32). hidden 64, 4 query / 2 KV heads of 16, vocab 100.
ModelSpec tiny_moe() {
  ModelSpec m;
  m.key = "tiny-moe";
  m.hidden_size = 64;
  m.num_layers = 2;
  m.num_attention_heads = 4;
  m.num_kv_heads = 2;
  m.head_dim = 16;
  m.intermediate_size = 128;
  m.vocab_size = 100;
  m.max_position_embeddings = 4096;
  MoeSpec moe;
  moe.num_experts = 4;
  moe.experts_per_token = 2;
  moe.expert_intermediate_size = 32;
  moe.shared_expert_intermediate_size = 32;
  moe.num_moe_layers = 1;
  m.moe = moe;
  m.param_count = 1;
  m.weights_bytes_16bit = 2;
  return m;
}

TEST(TinyMoe, SharedExpertAndDenseFirstLayerHandComputed) {
  const ModelSpec m = tiny_moe();
  const GpuSpec g = unit_gpu();
  const Deployment d{&m, &g, 1, Dtype::kBf16, Dtype::kBf16};
  const detail::RankShapes s = detail::rank_shapes(d);
  EXPECT_EQ(s.moe_layers, 1);
  EXPECT_EQ(s.dense_layers, 1);
  const detail::Rates r = detail::make_rates(s, unit_throughputs());
  // FLOPs per token: router 2*4*64 on the MoE layer; per routed row gate-up 2*64*64 and down
  // 2*64*32; the shared expert the same once per token; the dense layer 2*256*64 + 2*64*128.
  EXPECT_EQ(r.router.flop_s, 512);
  EXPECT_EQ(r.expert_gate_up.flop_s, 8192);
  EXPECT_EQ(r.expert_down.flop_s, 4096);
  EXPECT_EQ(r.shared_gate_up.flop_s, 8192);
  EXPECT_EQ(r.shared_down.flop_s, 4096);
  EXPECT_EQ(r.gate_up.flop_s, 32768);
  EXPECT_EQ(r.down.flop_s, 16384);
  // Weight bytes (16-bit): one expert's gate-up 64*64*2, the dense gate-up 256*64*2.
  EXPECT_EQ(r.expert_gate_up.weight_s, 8192);
  EXPECT_EQ(r.shared_down.weight_s, 4096);
  EXPECT_EQ(r.gate_up.weight_s, 32768);

  // One token: every GEMM is memory-bound. Bytes = weights + 16-bit input and output rows:
  // router 512 + 136, routed experts 2 x (8192 + 256) + 2 x (4096 + 192), shared 8192 + 256 +
  // 4096 + 192, dense 32768 + 640 + 16384 + 384.
  EXPECT_EQ(detail::mlp_time(r, 1), 648 + 16896 + 8576 + 8448 + 4288 + 33408 + 16768);
  // A million tokens: compute-bound, 512 + 2 x (8192 + 4096) + 8192 + 4096 + 32768 + 16384 FLOPs
  // per token.
  EXPECT_EQ(detail::mlp_time(r, 1e6), 86528e6);
}

TEST(TinyMoe, DenseModelTermsAreUnchangedByTheMoeFields) {
  ModelSpec m = tiny_moe();
  m.moe.reset();
  const GpuSpec g = unit_gpu();
  const Deployment d{&m, &g, 1, Dtype::kBf16, Dtype::kBf16};
  const detail::Rates r = detail::make_rates(detail::rank_shapes(d), unit_throughputs());
  EXPECT_EQ(r.gate_up.flop_s, 2 * 32768);  // both layers dense
  EXPECT_FALSE(r.has_shared_expert);
  EXPECT_EQ(detail::mlp_time(r, 1e6), 2 * (32768 + 16384) * 1e6);
}

// Expert parallelism: ep ranks each hold experts / ep whole-width experts (sharded by tp / ep) and
// run the routed rows of the busiest rank.
TEST(TinyMoe, ExpertParallelBusiestRankHandComputed) {
  // Expected maximum of ep standard normals: 0.5642 (ep 2), 1.0294 (4), 1.4236 (8); Blom's
  // approximation is within 0.03.
  EXPECT_EQ(detail::expected_max_normal_score(1), 0);
  EXPECT_NEAR(detail::expected_max_normal_score(2), 0.5642, 0.03);
  EXPECT_NEAR(detail::expected_max_normal_score(4), 1.0294, 0.03);
  EXPECT_NEAR(detail::expected_max_normal_score(8), 1.4236, 0.03);
  // 16 tokens, top-8, 4 ranks: 128 routed rows, mean 32 per rank, sd sqrt(128 * 1/4 * 3/4).
  const double z4 = detail::expected_max_normal_score(4);
  EXPECT_DOUBLE_EQ(detail::busiest_rank_routed_rows(16, 8, 4, z4), 32 + z4 * std::sqrt(24.0));
  EXPECT_DOUBLE_EQ(detail::busiest_rank_routed_rows(16, 8, 1, 0), 128);
  // Tokens collide on experts: 16 tokens of top-8 routing reach 128 (1 - (15/16)^16) = 82.4 of
  // 128 experts; one token exactly its 8.
  EXPECT_NEAR(detail::expected_touched_experts(128, 128, 8, 1), 82.43, 0.01);
  EXPECT_NEAR(detail::expected_touched_experts(8, 128, 8, 1), 8, 1e-9);
  // Never more than every routed row: one token, top-2, 2 ranks.
  EXPECT_LE(detail::busiest_rank_routed_rows(1, 2, 2, 10.0), 2);
}

TEST(TinyMoe, ExpertParallelSplitsExpertsNotTheirWork) {
  const ModelSpec m = tiny_moe();
  const GpuSpec g = unit_gpu();
  const Deployment tp2{&m, &g, 2, Dtype::kBf16, Dtype::kBf16};
  const Deployment ep2{&m, &g, 2, Dtype::kBf16, Dtype::kBf16, 2};
  const detail::RankShapes s_tp = detail::rank_shapes(tp2);
  const detail::RankShapes s_ep = detail::rank_shapes(ep2);
  // tp 2: every expert's intermediate 32 split in two; ep 2: two whole experts per rank.
  EXPECT_EQ(s_tp.gate_up_n, 2 * 16);
  EXPECT_EQ(s_ep.gate_up_n, 2 * 32);
  EXPECT_EQ(s_ep.down_k, 32);
  EXPECT_EQ(s_ep.experts, 4);  // the router still scores every expert
  EXPECT_EQ(s_ep.elementwise_bytes_per_token, s_tp.elementwise_bytes_per_token);
  const detail::Rates r_tp = detail::make_rates(s_tp, unit_throughputs());
  const detail::Rates r_ep = detail::make_rates(s_ep, unit_throughputs());
  // Per routed row, a whole expert: gate-up 2*64*64 and down 2*64*32 FLOPs (tp 2: half of each).
  EXPECT_EQ(r_ep.expert_gate_up.flop_s, 8192);
  EXPECT_EQ(r_ep.expert_down.flop_s, 4096);
  EXPECT_EQ(r_tp.expert_gate_up.flop_s, 4096);
  // A million tokens, compute-bound: the same FLOPs per rank but for the busiest rank's excess,
  // 2e6 routed rows over 2 ranks: 1e6 + z * sqrt(2e6 * 1/2 * 1/2) on the busiest.
  const double excess = detail::expected_max_normal_score(2) * std::sqrt(5e5);
  EXPECT_NEAR(detail::mlp_time(r_ep, 1e6) - detail::mlp_time(r_tp, 1e6), (8192 + 4096) * excess,
              1e-6 * detail::mlp_time(r_tp, 1e6));
  // One token. tp 2: both routed rows on two half-width experts, memory-bound: weights + input
  // and output rows, 2 x (4096 + 192) + 2 x (2048 + 160) bytes. ep 2: the busiest rank gets
  // R = 1 + z * sqrt(1/2) rows, as many as R tokens send it, so it reads T = 2 (1 - (1/2)^R) of
  // its two whole experts; each GEMM is the larger of its FLOPs and its bytes (weights of T
  // experts, R rows of activations), at 1 FLOP/s and 1 B/s.
  const double r = 1 + detail::expected_max_normal_score(2) * std::sqrt(0.5);
  const double touched = 2 * (1 - std::pow(0.5, r));
  EXPECT_DOUBLE_EQ(detail::expected_touched_experts(r, 4, 2, 2), touched);
  const double ep_experts = std::max(8192 * r, 8192 * touched + 256 * r) +
                            std::max(4096 * r, 4096 * touched + 192 * r);
  const double tp_experts = 2 * (4096 + 192) + 2 * (2048 + 160);
  EXPECT_NEAR(detail::mlp_time(r_ep, 1) - detail::mlp_time(r_tp, 1), ep_experts - tp_experts,
              1e-9);
}

TEST(TinyMoe, ExpertParallelLayoutsThatCannotSplitAreErrors) {
  ModelSpec m = tiny_moe();
  const GpuSpec g = unit_gpu();
  EXPECT_EQ(expert_parallel_error(m, 2, 1), "");
  EXPECT_EQ(expert_parallel_error(m, 2, 2), "");
  EXPECT_NE(expert_parallel_error(m, 4, 3).find("does not divide its 4 routed experts"),
            std::string::npos);
  EXPECT_NE(expert_parallel_error(m, 2, 4).find("must divide tp=2"), std::string::npos);
  EXPECT_THROW(validate_deployment(Deployment{&m, &g, 2, Dtype::kBf16, Dtype::kBf16, 4}),
               CapacityError);
  m.moe.reset();
  EXPECT_NE(expert_parallel_error(m, 2, 2).find("needs a MoE model"), std::string::npos);
}

// ---- attention data parallelism ----

TEST(AttentionDp, DecodesAreDealtInTurnAndChunksGoToTheLeastLoaded) {
  BatchShape shape;
  shape.segments = {{100, 100, 1}, {1, 50, 1}, {1, 60, 1}, {1, 70, 1}, {30, 40, 0}, {1, 80, 1}};
  std::vector<BatchShape> ranks;
  split_over_ranks(shape, 3, &ranks);
  ASSERT_EQ(ranks.size(), 3u);
  // Decodes 50, 60, 70, 80 to ranks 0, 1, 2, 0; then the 100-token chunk to rank 1 (1 token
  // against 2 and 1: the lowest index of the least loaded), the 30-token chunk to rank 2. Each
  // rank keeps the batch's order.
  ASSERT_EQ(ranks[0].segments.size(), 2u);
  EXPECT_EQ(ranks[0].segments[0].context_tokens, 50);
  EXPECT_EQ(ranks[0].segments[1].context_tokens, 80);
  ASSERT_EQ(ranks[1].segments.size(), 2u);
  EXPECT_EQ(ranks[1].segments[0].query_tokens, 100);
  EXPECT_EQ(ranks[1].segments[1].context_tokens, 60);
  ASSERT_EQ(ranks[2].segments.size(), 2u);
  EXPECT_EQ(ranks[2].segments[0].context_tokens, 70);
  EXPECT_EQ(ranks[2].segments[1].query_tokens, 30);
  split_over_ranks(shape, 8, &ranks);  // more ranks than segments: two stay empty
  EXPECT_EQ(std::count_if(ranks.begin(), ranks.end(), [](const BatchShape& r) { return r.empty(); }),
            2);
  EXPECT_THROW(split_over_ranks(shape, 0, &ranks), std::invalid_argument);
}

Duration rank_iteration(const IterationCostModel& m, const BatchShape& shape) {
  return m.iteration_time(shape);
}

// Four ranks of one GPU, experts split four ways: each rank's attention, dense MLP, norms and LM
// head on its own requests (the slowest rank counts), the experts on every rank's tokens, and the
// slowest rank's tokens sent to their experts' GPUs and back on each MoE layer.
TEST(AttentionDp, APassIsTheSlowestRankPlusTheExpertsOfEveryToken) {
  const ModelSpec m = tiny_moe();
  const GpuSpec g = unit_gpu();
  RooflineParams p;
  p.iteration_overhead = Duration{1000};
  const Deployment d{&m, &g, 1, Dtype::kBf16, Dtype::kBf16, /*ep=*/4, /*attention_dp=*/4};
  EXPECT_EQ(d.gpus(), 4);
  EXPECT_EQ(parallelism_label(d), "tp1 dp4 ep4");
  const auto adp = make_roofline_cost_model(d, p);
  const auto rank = make_roofline_cost_model({&m, &g, 1, Dtype::kBf16, Dtype::kBf16}, p);
  const auto experts = make_roofline_cost_model({&m, &g, 4, Dtype::kBf16, Dtype::kBf16, 4}, p);

  BatchShape pass;  // 7 decodes: ranks hold 2, 2, 2 and 1 of them
  for (int i = 0; i < 7; ++i) pass.segments.push_back({1, 100 + i, 1});
  BatchShape busiest;  // rank 2: the third and seventh decodes, the longest contexts of the pairs
  busiest.segments = {pass.segments[2], pass.segments[6]};
  BatchShape other;  // rank 0, as many tokens and fewer context tokens: not the one priced
  other.segments = {pass.segments[0], pass.segments[4]};
  EXPECT_LT(rank_iteration(*make_roofline_cost_model({&m, &g, 1, Dtype::kBf16, Dtype::kBf16}, p),
                           other),
            rank_iteration(*make_roofline_cost_model({&m, &g, 1, Dtype::kBf16, Dtype::kBf16}, p),
                           busiest));
  OperatorTimes want = rank->breakdown(busiest);
  want.mlp_gemm = experts->breakdown(pass).mlp_gemm;
  // tp1 ranks have no all-reduce. Dispatch + combine: top-2 of 4 expert-parallel groups reach
  // 4 x (1 - (3/4)^2) = 1.75 of them (one GPU each); each of the rank's 2 tokens sends 64 x 2 B
  // there and gets as much back, over the unit GPU's 1 B/s link at 70 % efficiency, on the one
  // MoE layer, plus two 8-us latencies.
  EXPECT_EQ(rank->breakdown(busiest).allreduce, Duration{0});
  want.allreduce = duration_from_seconds(2 * 1.75 * 64 * 2 * 2 / 0.7 + 2 * 8e-6);
  EXPECT_EQ(adp->breakdown(pass).total(), want.total());
  EXPECT_EQ(adp->iteration_time(pass), want.total());
  // Every expert on every GPU (ep 1, experts sharded 4 ways): each token goes to one group and its
  // 3 other shards, an all-gather and a reduce-scatter of the rank's 2 tokens.
  const auto gathered =
      make_roofline_cost_model({&m, &g, 1, Dtype::kBf16, Dtype::kBf16, /*ep=*/1, /*dp=*/4}, p);
  EXPECT_EQ(gathered->breakdown(pass).allreduce,
            duration_from_seconds(2 * (1 + 3) * 64 * 2 * 2 / 0.7 + 2 * 8e-6));
  EXPECT_GT(adp->lookup_stats().lookups, 0);
  EXPECT_NE(adp->describe().find("attention DP tp1 dp4 ep4"), std::string::npos);

  // One long prompt on one rank sets the pass's time however few tokens the others have.
  BatchShape mixed = pass;
  mixed.segments.insert(mixed.segments.begin(), Segment{500, 500, 1});
  BatchShape long_rank;
  long_rank.segments = {mixed.segments[0]};
  EXPECT_GE(adp->iteration_time(mixed),
            rank->breakdown(long_rank).total() - rank->breakdown(long_rank).mlp_gemm);
}

// The peak bound is composed as the pass is: the slowest rank's bound without its MLP, the
// experts' MLP bound over every token, dispatch and combine at the full link bandwidth. It stays
// below the pass where the experts' deployment alone does not: DeepSeek-V3 on 32 ranks of one
// GB200 each, where that deployment (TP 32) reads every request's MLA latent KV on every GPU.
TEST(AttentionDp, ThePeakBoundIsComposedAsThePassIs) {
  const ModelSpec m = tiny_moe();
  const GpuSpec g = unit_gpu();
  const Deployment d{&m, &g, 1, Dtype::kBf16, Dtype::kBf16, /*ep=*/4, /*attention_dp=*/4};
  const auto adp = make_roofline_cost_model(d, {});
  const auto rank = make_roofline_cost_model({&m, &g, 1, Dtype::kBf16, Dtype::kBf16}, {});
  const auto experts = make_roofline_cost_model({&m, &g, 4, Dtype::kBf16, Dtype::kBf16, 4}, {});
  BatchShape pass;  // 7 decodes: rank 2 holds the third and seventh
  for (int i = 0; i < 7; ++i) pass.segments.push_back({1, 100 + i, 1});
  BatchShape busiest;
  busiest.segments = {pass.segments[2], pass.segments[6]};
  OperatorTimes want = rank->peak_bound_breakdown(busiest);
  want.mlp_gemm = experts->peak_bound_breakdown(pass).mlp_gemm;
  want.allreduce = duration_from_seconds(2 * 1.75 * 64 * 2 * 2);  // 1 B/s, no latency
  EXPECT_EQ(adp->peak_bound_time(pass), want.total());
  EXPECT_LE(adp->peak_bound_time(pass), adp->iteration_time(pass));

  const ModelCatalog models = ModelCatalog::load("models/catalog/models");
  const GpuCatalog gpus = GpuCatalog::load("models/catalog/gpus.json");
  const Deployment wide{&models.get("deepseek-v3"),
                        &gpus.get("gb200_nvl72"),
                        1,
                        Dtype::kNvfp4,
                        Dtype::kFp8,
                        /*ep=*/32,
                        /*attention_dp=*/32};
  const auto wide_ep = make_roofline_cost_model(wide, {});
  BatchShape decodes;
  for (int i = 0; i < 2048; ++i) decodes.segments.push_back({1, 1536, 1});
  EXPECT_LE(wide_ep->peak_bound_time(decodes), wide_ep->iteration_time(decodes));
  Deployment spread = wide;
  spread.tp = 32;
  spread.attention_dp = 1;
  EXPECT_GT(make_roofline_cost_model(spread, {})->peak_bound_time(decodes),
            wide_ep->iteration_time(decodes));
}

// A measured all-to-all (the GPU's NCCL table) replaces the link model: each direction of each
// MoE layer is one all-to-all of the slowest rank's tokens, 64 x 2 B per token per copy, 1.75
// expert groups reached (ep 4, top 2), one GPU each.
TEST(AttentionDp, MeasuredAllToAllReplacesTheLinkModel) {
  const ModelSpec m = tiny_moe();
  const GpuSpec g = unit_gpu();
  const Deployment d{&m, &g, 1, Dtype::kBf16, Dtype::kBf16, /*ep=*/4, /*attention_dp=*/4};
  std::vector<double> asked;
  const auto measured = [&](double bytes) -> std::optional<double> {
    asked.push_back(bytes);
    return 1e-5 + bytes * 1e-9;
  };
  const PlainCostModelFactory plain = [](const Deployment& p) {
    return make_roofline_cost_model(p, {});
  };
  const auto a = make_attention_dp_cost_model(d, plain, {}, measured);
  const auto linked = make_attention_dp_cost_model(d, plain, {});
  BatchShape pass;  // 7 decodes: the slowest rank holds 2
  for (int i = 0; i < 7; ++i) pass.segments.push_back({1, 100 + i, 1});
  const double bytes = 2 * 64 * 2 * 1.75;
  const Duration want = linked->breakdown(pass).allreduce -
                        duration_from_seconds(2 * 1.75 * 64 * 2 * 2 / 0.7 + 2 * 8e-6) +
                        duration_from_seconds(2 * (1e-5 + bytes * 1e-9));
  EXPECT_EQ(a->breakdown(pass).allreduce, want);
  ASSERT_FALSE(asked.empty());
  EXPECT_DOUBLE_EQ(asked.back(), bytes);
  EXPECT_NE(a->describe().find("from the measured NCCL all-to-all"), std::string::npos);
  // Nothing measured at this size: the link model.
  const auto none = make_attention_dp_cost_model(
      d, plain, {}, [](double) -> std::optional<double> { return std::nullopt; });
  EXPECT_EQ(none->iteration_time(pass), linked->iteration_time(pass));
}

TEST(AttentionDp, WeightsAndKvPerRank) {
  ModelSpec m = tiny_moe();
  // Routed experts: 1 MoE layer x 4 experts x 3 x 64 x 32 = 24,576 parameters.
  m.param_count = 100'000;
  GpuSpec g = unit_gpu();
  g.memory_bytes = int64_t{1} << 30;
  MemoryParams mp;
  mp.runtime_overhead_bytes = 1;
  const Deployment tp4{&m, &g, 4, Dtype::kBf16, Dtype::kBf16, 4};
  const Deployment dp4{&m, &g, 1, Dtype::kBf16, Dtype::kBf16, 4, 4};
  const MemoryPlan a = plan_memory(tp4, mp);
  const MemoryPlan b = plan_memory(dp4, mp);
  EXPECT_EQ(a.weight_bytes_per_gpu, 100'000 * 2 / 4);
  EXPECT_EQ(b.weight_bytes_per_gpu, (100'000 - 24'576) * 2 + 24'576 * 2 / 4);
  // Each rank keeps all KV heads of its requests (2 KV heads x 16 x 2 B x 2 layers), and the
  // instance has the four ranks' pools.
  EXPECT_EQ(b.kv_bytes_per_token_per_gpu, 2 * 2 * 16 * 2 * 2);
  const int64_t rank_blocks = b.kv_pool_bytes_per_gpu / (b.block_size * b.kv_bytes_per_token_per_gpu);
  EXPECT_EQ(b.num_blocks, 4 * rank_blocks);
  EXPECT_NE(b.label.find("on 4 x unit (tp1 dp4 ep4"), std::string::npos) << b.label;
}

TEST(AttentionDp, LayoutsThatCannotSplitAreErrors) {
  ModelSpec m = tiny_moe();
  const GpuSpec g = unit_gpu();
  EXPECT_EQ(expert_parallel_error(m, 1, 4, 4), "");
  EXPECT_EQ(expert_parallel_error(m, 2, 4, 2), "");  // ep 4 over 2 x 2 GPUs
  EXPECT_NE(expert_parallel_error(m, 1, 4, 2).find("must divide tp x attention_dp = 1 x 2"),
            std::string::npos);
  EXPECT_NE(expert_parallel_error(m, 1, 1, 0).find("must be at least 1"), std::string::npos);
  EXPECT_THROW(make_roofline_cost_model(Deployment{&m, &g, 1, Dtype::kBf16, Dtype::kBf16, 4, 2}, {}),
               CapacityError);
  m.moe.reset();
  EXPECT_NE(expert_parallel_error(m, 1, 1, 2).find("needs a MoE model"), std::string::npos);
}

using CatalogModels = CatalogFixture;

TEST_F(CatalogModels, DeepSeekV3MlaKvBytesPerToken) {
  const ModelSpec& m = models_->get("deepseek-v3");
  ASSERT_TRUE(m.mla.has_value());
  EXPECT_EQ(m.kv_bytes_per_token(Dtype::kBf16), 61 * (512 + 64) * 2);
  EXPECT_EQ(m.kv_bytes_per_token(Dtype::kFp8), 61 * (512 + 64));
  // The latent has no heads to shard: every TP rank keeps all of it.
  Deployment d{&m, &gpus_->get("b200_sxm"), 8, Dtype::kFp8Block, Dtype::kFp8};
  EXPECT_EQ(plan_memory(d, {}).kv_bytes_per_token_per_gpu, 61 * (512 + 64));
  EXPECT_EQ(m.moe->num_moe_layers, 58);  // first_k_dense_replace 3
  EXPECT_EQ(m.moe->shared_expert_intermediate_size, 2048);
}

TEST_F(CatalogModels, DeepSeekV3MlaAttentionTermsHandComputed) {
  const ModelSpec& m = models_->get("deepseek-v3");
  const GpuSpec g = unit_gpu();
  const Deployment d{&m, &g, 8, Dtype::kBf16, Dtype::kBf16};
  const detail::RankShapes s = detail::rank_shapes(d);
  const double h = 128 / 8;  // heads per rank
  // Prefill: QK^T over 128+64 and PV over 128 per head; decode over the latent: 2*h*(2*512+64).
  EXPECT_EQ(s.prefill_attention.flops_per_position, 2 * h * 192 + 2 * h * 128);
  EXPECT_EQ(s.decode_attention.flops_per_position, 2 * h * (2 * 512 + 64));
  EXPECT_EQ(s.decode_attention.kv_bytes_per_token, (512 + 64) * 2);
  // kv_b: r -> h*(dn+dv).
  EXPECT_EQ(s.prefill_attention.latent_n, h * 256);
  EXPECT_EQ(s.prefill_attention.latent_k, 512);
  // q_a + q_b + kv_a weights per rank, as one GEMM of K = hidden.
  EXPECT_DOUBLE_EQ(s.qkv_n * s.qkv_k, 7168.0 * 1536 + 1536 * h * 192 + 7168.0 * 576);
  EXPECT_EQ(s.o_k, h * 128);

  // One decode at context 1000 on the unit GPU, one layer's worth times 61: FLOPs of the absorbed
  // attention against the latent bytes read + written and the absorbed query and output.
  const detail::Rates r = detail::make_rates(s, unit_throughputs());
  detail::BatchSums sums;
  sums.has_decode = true;
  sums.decode_key_positions = 1000;
  sums.decode_kv_tokens = 1001;
  sums.decode_query_tokens = 1;
  const double flops = 61 * 1000 * 2 * h * (2 * 512 + 64);
  const double bytes = 61 * (1001 * 576 * 2 + h * (2 * 512 + 64) * 2);
  const double latent = 61 * (h * 256 * 512 * 2 + (h * 256 + 512) * 2);  // weights + rows
  EXPECT_DOUBLE_EQ(detail::decode_attention_time(r, sums), std::max(flops, bytes) + latent);
}

TEST_F(CatalogModels, GptOssSlidingWindowKvBeyondTheWindow) {
  const ModelSpec& m = models_->get("gpt-oss-120b");
  EXPECT_EQ(m.sliding_window, 128);
  EXPECT_EQ(m.num_sliding_layers, 18);
  const int64_t per_layer = 2 * 8 * 64 * 2;  // K and V of 8 heads of 64, 16-bit
  EXPECT_EQ(m.kv_bytes_for_context(100, Dtype::kBf16), 36 * 100 * per_layer);
  EXPECT_EQ(m.kv_bytes_for_context(10000, Dtype::kBf16), (18 * 10000 + 18 * 128) * per_layer);
  // The paged KV holds the 18 full layers; the sliding layers' 128 tokens are reserved per
  // sequence.
  MemoryParams p;
  p.max_num_seqs = 64;
  Deployment d{&m, &gpus_->get("b200_sxm"), 1, Dtype::kFp8, Dtype::kBf16};
  const MemoryPlan plan = plan_memory(d, p);
  EXPECT_EQ(plan.kv_bytes_per_token_per_gpu, 18 * per_layer);
  EXPECT_EQ(plan.window_kv_reserve_bytes, 18 * per_layer * 128 * 64);
}

TEST(SlidingWindowSums, WindowBoundsKeysAndKvRead) {
  BatchShape shape;
  shape.segments = {{1, 1000, 1}, {300, 300, 1}, {50, 100, 1}};
  const detail::BatchSums s = detail::sum_segments(shape, 128);
  EXPECT_EQ(s.window_decode_key_positions, 128);
  EXPECT_EQ(s.window_decode_kv_tokens, 128 + 1);
  // 300 new tokens: 1 + ... + 128, then 128 keys each for the other 172; 50 after 50 cached
  // (all within the window): 50*50 + 50*51/2.
  EXPECT_EQ(s.window_prefill_key_positions, 128 * 129 / 2 + 172 * 128 + 50 * 50 + 50 * 51 / 2);
  EXPECT_EQ(s.window_prefill_kv_tokens, (300 + 300) + (100 + 50));
  // Without a window the sums are those of full attention.
  const detail::BatchSums full = detail::sum_segments(shape);
  EXPECT_EQ(full.decode_key_positions, 1000);
  EXPECT_EQ(full.window_decode_key_positions, 0);
}

// Published totals: model cards of DeepSeek-V3 (671 B total, 37 B activated), gpt-oss-120b
// (116.8 B / 5.1 B), Qwen3-235B-A22B (235 B / 22 B), Kimi-K2 (1.04 T / 32 B). Activated counts
// leave out the input embedding (a lookup, no GEMM); DeepSeek's exclude the MTP module.
TEST_F(CatalogModels, ParameterTotalsMatchPublishedCounts) {
  struct Published {
    const char* key;
    double total, active;
  };
  for (const Published& p : {Published{"deepseek-v3", 671e9, 37e9},
                             Published{"deepseek-r1", 671e9, 37e9},
                             Published{"gpt-oss-120b", 116.8e9, 5.1e9},
                             Published{"qwen3-235b-a22b", 235e9, 22e9},
                             Published{"kimi-k2-instruct", 1.04e12, 32e9}}) {
    SCOPED_TRACE(p.key);
    const nlohmann::json doc = catalog_doc(p.key);
    const double total = doc["param_count"].get<double>();
    const double active = doc["param_count_active_per_token"].get<double>() -
                          doc["param_count_breakdown"]["embedding"].get<double>();
    EXPECT_NEAR(total / p.total, 1.0, 0.02) << total;
    EXPECT_NEAR(active / p.active, 1.0, 0.02) << active;
    EXPECT_EQ(models_->get(p.key).param_count, doc["param_count"].get<int64_t>());
  }
}

TEST_F(CatalogModels, Nvfp4NeedsFp4TensorCores) {
  const ModelSpec& m = models_->get("deepseek-r1");
  Deployment d{&m, &gpus_->get("h100_sxm"), 8, Dtype::kNvfp4, Dtype::kFp8};
  try {
    make_roofline_cost_model(d, {});
    FAIL() << "nvfp4 on an H100 was accepted";
  } catch (const CapacityError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("nvfp4 weights need FP4 tensor cores, which h100_sxm"), std::string::npos)
        << what;
  }
  d.gpu = &gpus_->get("b200_sxm");
  EXPECT_NO_THROW(make_roofline_cost_model(d, {}));
  // 4.5 bits per weight, scales included.
  EXPECT_EQ(plan_memory(d, {}).weight_bytes_per_gpu, (m.param_count * 9 + 16 * 8 - 1) / (16 * 8));
}

TEST(WeightDtypes, BytesPerWeightIncludeBlockScales) {
  EXPECT_EQ(weight_bytes(16384, Dtype::kFp8Block, 1), 16384 + 4);  // one fp32 per 128x128
  EXPECT_EQ(weight_bytes(1024, Dtype::kNvfp4, 1), 512 + 64);       // one FP8 scale per 16
  EXPECT_EQ(weight_bytes(1024, Dtype::kInt4Wo, 1), 512 + 16);      // one 16-bit scale per 128
  EXPECT_EQ(weight_bytes(1000, Dtype::kBf16, 3), 667);             // rounded up
  EXPECT_EQ(parse_dtype("fp8_block"), Dtype::kFp8Block);
  EXPECT_FALSE(is_kv_dtype(Dtype::kNvfp4));
  const GpuSpec g = unit_gpu();
  EXPECT_EQ(g.peak_flops_per_s(Dtype::kFp8Block), 2);  // the FP8 rate
  EXPECT_EQ(g.peak_flops_per_s(Dtype::kInt4Wo), 1);    // 16-bit math
  EXPECT_EQ(g.peak_flops_per_s(Dtype::kNvfp4), 0);     // no FP4 tensor cores
}

TEST_F(CatalogModels, RackScaleNvlinkDomain) {
  const GpuSpec& gb200 = gpus_->get("gb200_nvl72");
  EXPECT_EQ(gb200.nvlink_max_tp, 72);
  EXPECT_EQ(gb200.tp_link_bytes_per_s(64), gb200.nvlink_bytes_per_s_per_direction);
  EXPECT_EQ(gb200.tp_link_bytes_per_s(144), gb200.scale_out_bytes_per_s_per_direction);
  EXPECT_GT(gb200.fp4_flops_per_s, gb200.fp8_flops_per_s);
  const GpuSpec& b300 = gpus_->get("b300_sxm");
  EXPECT_EQ(b300.nvlink_max_tp, 8);
  EXPECT_EQ(b300.tp_link_bytes_per_s(16), b300.scale_out_bytes_per_s_per_direction);
  EXPECT_GT(gpus_->get("gb300_nvl72").memory_bytes, gb200.memory_bytes);
}

}  // namespace
}  // namespace servesim::models
