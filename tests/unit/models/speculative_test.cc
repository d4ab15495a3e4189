// Speculative decoding's model layer: acceptance per position, the drafters as one-layer models
// (parameters hand-computed), their weights and KV in the memory plan, and the pass pricing.
#include "models/cost/speculative.h"

#include <gtest/gtest.h>

#include <memory>

#include "models/cost/memory_model.h"
#include "tests/unit/models/catalog_fixture.h"

namespace servesim::models {
namespace {

class Speculative : public CatalogFixture {};

TEST_F(Speculative, AcceptedDraftsFollowThePerPositionRates) {
  SpeculativeDecoding spec;
  spec.method = SpeculativeMethod::kEagle3;
  spec.num_speculative_tokens = 3;
  spec.acceptance = default_acceptance(SpeculativeMethod::kEagle3, 3);
  // vLLM's EAGLE-3 regression test: 0.7296 / 0.5208 / 0.3545, mean acceptance length 2.60.
  EXPECT_NEAR(spec.mean_accepted_length(), 2.6049, 1e-9);
  EXPECT_EQ(spec.accepted_drafts(0.9), 0);
  EXPECT_EQ(spec.accepted_drafts(0.7), 1);
  EXPECT_EQ(spec.accepted_drafts(0.5), 2);
  EXPECT_EQ(spec.accepted_drafts(0.0), 3);
  EXPECT_EQ(default_acceptance(SpeculativeMethod::kMtp, 8).size(), 8u);
  EXPECT_THROW(default_acceptance(SpeculativeMethod::kMtp, 9), std::invalid_argument);
  EXPECT_THROW(default_acceptance(SpeculativeMethod::kEagle3, 4), std::invalid_argument);
}

TEST_F(Speculative, RejectsAcceptanceThatRisesOrHasTheWrongLength) {
  SpeculativeDecoding spec;
  spec.num_speculative_tokens = 2;
  spec.acceptance = {0.5, 0.6};
  EXPECT_NE(speculative_error(spec).find("never rises"), std::string::npos);
  spec.acceptance = {0.5};
  EXPECT_NE(speculative_error(spec).find("one per speculative token"), std::string::npos);
  spec.acceptance = {1.2, 0.5};
  EXPECT_NE(speculative_error(spec).find("[0, 1]"), std::string::npos);
  spec.acceptance = {1.0, 0.0};
  EXPECT_EQ(speculative_error(spec), "");
}

TEST_F(Speculative, Eagle3HeadOfLlama8bHandCounted) {
  const ModelSpec d = draft_model(models_->get("llama-3.1-8b"), SpeculativeMethod::kEagle3);
  EXPECT_EQ(d.num_layers, 1);
  EXPECT_FALSE(d.moe.has_value());
  EXPECT_EQ(d.vocab_size, 32000);
  // q, k, v from 2 x 4096 inputs: 2 x 4096 x (4096 + 2 x 1024) = 50,331,648; o: 16,777,216;
  // MLP 3 x 4096 x 14336 = 176,160,768; fusion 3 x 4096^2 = 50,331,648; head 32000 x 4096.
  EXPECT_EQ(d.param_count, 50'331'648 + 16'777'216 + 176'160'768 + 50'331'648 + 131'072'000);
}

TEST_F(Speculative, MtpLayerOfDeepSeekV3IsOneMoeLayer) {
  const ModelSpec& v3 = models_->get("deepseek-v3");
  const ModelSpec d = draft_model(v3, SpeculativeMethod::kMtp);
  EXPECT_EQ(d.num_layers, 1);
  ASSERT_TRUE(d.moe.has_value());
  EXPECT_EQ(d.moe->num_moe_layers, 1);
  EXPECT_TRUE(d.mla.has_value());
  // DeepSeek-V3's model card: 14 B of MTP weights, of which its copies of the embedding and the
  // head are 2 x 129280 x 7168 = 1.85 B: 12.1 B of its own. One mean layer plus the 2h x h
  // projection comes within 10 % of it.
  EXPECT_NEAR(static_cast<double>(d.param_count), 12.1e9, 0.1 * 12.1e9);
}

TEST_F(Speculative, DrafterWeightsAndKvJoinTheMemoryPlan) {
  const Deployment dep{&models_->get("llama-3.1-8b"), &gpus_->get("h100_sxm"), 1, Dtype::kBf16,
                       Dtype::kBf16};
  MemoryParams p;
  const MemoryPlan plain = plan_memory(dep, p);
  p.drafter =
      std::make_shared<const ModelSpec>(draft_model(*dep.model, SpeculativeMethod::kEagle3));
  const MemoryPlan with = plan_memory(dep, p);
  EXPECT_EQ(with.drafter_weight_bytes_per_gpu, 2 * p.drafter->param_count);
  EXPECT_EQ(with.weight_bytes_per_gpu - plain.weight_bytes_per_gpu, 2 * p.drafter->param_count);
  // One layer of 8 KV heads of 128, K and V, 16 bit.
  EXPECT_EQ(with.kv_bytes_per_token_per_gpu - plain.kv_bytes_per_token_per_gpu, 2 * 8 * 128 * 2);
  EXPECT_LT(with.num_blocks, plain.num_blocks);
  EXPECT_NE(describe(with).find("speculative drafter"), std::string::npos);
}

// A pass costing `base` plus `per_token` per query token; counts its calls.
class LinearCost : public IterationCostModel {
 public:
  LinearCost(int64_t base, int64_t per_token) : base_(base), per_token_(per_token) {}
  Duration iteration_time(const BatchShape& s) const override {
    calls++;
    return Duration{base_ + per_token_ * s.total_query_tokens()};
  }
  OperatorTimes breakdown(const BatchShape& s) const override {
    OperatorTimes t;
    t.mlp_gemm = Duration{base_ + per_token_ * s.total_query_tokens()};
    return t;
  }
  Duration peak_bound_time(const BatchShape& s) const override { return iteration_time(s); }
  std::string describe() const override { return "linear"; }
  mutable int calls = 0;

 private:
  int64_t base_, per_token_;
};

TEST_F(Speculative, PricesTheTargetPassAndTheDrafterPasses) {
  SpeculativeDecoding spec;
  spec.num_speculative_tokens = 3;
  spec.acceptance = {0.8, 0.6, 0.4};
  auto target = std::make_shared<LinearCost>(1000, 10);
  auto draft = std::make_shared<LinearCost>(100, 1);
  const auto m = make_speculative_cost_model(target, draft, nullptr, spec);
  // Two verification steps (4 tokens each) and a 50-token prompt chunk.
  BatchShape shape;
  shape.segments = {{4, 104, 4}, {4, 204, 4}, {50, 50, 1}};
  // Target: 1000 + 10 x 58. Drafter: a first pass over all 58 tokens, then two passes of one
  // token per verification step.
  const int64_t expected = (1000 + 580) + (100 + 58) + 2 * (100 + 2);
  EXPECT_EQ(m->iteration_time(shape).count(), expected);
  EXPECT_EQ(m->breakdown(shape).total().count(), expected);
  // A prompt chunk alone: the drafter reads it once.
  BatchShape prompt;
  prompt.segments = {{50, 50, 1}};
  EXPECT_EQ(m->iteration_time(prompt).count(), (1000 + 500) + (100 + 50));
  EXPECT_NE(m->describe().find("mean accepted length 2.80"), std::string::npos);
}

}  // namespace
}  // namespace servesim::models
