// The prefill-only batcher and the layout of policy `disagg`.
#include "policies/disagg.h"

#include <gtest/gtest.h>

#include "policies/builtin.h"
#include "policy_test_util.h"

namespace servesim::policies {
namespace {

using testing::Instance;
using testing::partial_seq;
using testing::waiting_seq;

TEST(PrefillOnlyBatcher, AdmitsWholePromptsFcfsUpToTheTokenCap) {
  Instance inst;
  inst.waiting = {waiting_seq(1, 3000), waiting_seq(2, 4000), waiting_seq(3, 2000)};
  auto batcher = make_prefill_only_batcher({8192, 64, false});
  sim::BatchPlan plan;
  ASSERT_TRUE(batcher->next_batch(inst.view(), plan));
  // 3000 + 4000 fit in 8192; adding 2000 would not (no skipping ahead).
  EXPECT_EQ(plan.admit, (std::vector<RequestId>{1, 2}));
  ASSERT_EQ(plan.scheduled.size(), 2u);
  EXPECT_EQ(plan.scheduled[0].tokens, 3000);
  EXPECT_EQ(plan.scheduled[0].reserve_tokens, 3000);
  EXPECT_EQ(plan.scheduled[1].tokens, 4000);
}

TEST(PrefillOnlyBatcher, AnOversizedFirstPromptRunsAloneOrChunked) {
  Instance inst;
  inst.total_blocks = inst.free_blocks = 2000;
  inst.waiting = {waiting_seq(1, 10000), waiting_seq(2, 100)};
  sim::BatchPlan whole, chunked;
  make_prefill_only_batcher({8192, 64, false})->next_batch(inst.view(), whole);
  ASSERT_EQ(whole.scheduled.size(), 1u);
  EXPECT_EQ(whole.scheduled[0].tokens, 10000);
  make_prefill_only_batcher({8192, 64, true})->next_batch(inst.view(), chunked);
  ASSERT_EQ(chunked.scheduled.size(), 1u);
  EXPECT_EQ(chunked.scheduled[0].tokens, 8192);
  EXPECT_EQ(chunked.scheduled[0].reserve_tokens, 10000);
}

TEST(PrefillOnlyBatcher, ContinuesPartialPrefillsFirstAndRespectsBatchSizeAndKv) {
  Instance inst;
  inst.running = {partial_seq(7, 10000, 8192, 625)};
  inst.waiting = {waiting_seq(1, 500), waiting_seq(2, 500), waiting_seq(3, 500)};
  inst.free_blocks = 70;  // room for two 500-token prompts (32 blocks each)
  sim::BatchPlan plan;
  make_prefill_only_batcher({8192, 3, true})->next_batch(inst.view(), plan);
  ASSERT_EQ(plan.scheduled.size(), 3u);
  EXPECT_EQ(plan.scheduled[0].id, 7);
  EXPECT_EQ(plan.scheduled[0].tokens, 1808);
  EXPECT_EQ(plan.admit, (std::vector<RequestId>{1, 2}));  // batch size 3 reached
}

TEST(DisaggLayout, PrefillGroupThenDecodeGroup) {
  register_builtin_policies();
  ParamValues v = ParamValues::defaults(disagg_schema());
  v.set("num_prefill", int64_t{2});
  v.set("tp_decode", int64_t{4});
  v.set("transfer", std::string("layerwise_overlap"));
  const sim::ClusterLayout layout = sim::cluster_policies().get("disagg").make(v);
  ASSERT_EQ(layout.groups.size(), 2u);
  EXPECT_EQ(layout.groups[0].role, sim::InstanceRole::kPrefill);
  EXPECT_EQ(layout.groups[0].count, 2);
  EXPECT_EQ(layout.groups[1].role, sim::InstanceRole::kDecode);
  EXPECT_EQ(layout.groups[1].tp, 4);
  EXPECT_EQ(layout.transfer, sim::KvTransferMode::kLayerwiseOverlap);
  EXPECT_EQ(layout.decode_router, "least_outstanding");
  EXPECT_NE(layout.groups[1].make_batching(sim::InstanceContext{}), nullptr);
}

}  // namespace
}  // namespace servesim::policies
