#include "policies/coloc.h"

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "policy_test_util.h"

namespace servesim::policies {
namespace {

using sim::BatchPlan;
using testing::check_plan;
using testing::decode_seq;
using testing::Instance;
using testing::partial_seq;
using testing::Sched;
using testing::scheduled;
using testing::waiting_seq;
using Ids = std::vector<RequestId>;
using Mode = ColocParams::Mode;
using KvAllocation = ColocParams::KvAllocation;

ColocParams params(Mode mode, int64_t budget) {
  ColocParams p;
  p.mode = mode;
  p.max_num_batched_tokens = budget;
  p.kv_allocation = mode == Mode::kStallFree ? KvAllocation::kWholePrompt : KvAllocation::kPerChunk;
  return p;
}

struct Decision {
  bool has_batch = false;
  BatchPlan plan;
};

// Runs one decision on a fresh policy and checks the plan is one the engine accepts.
Decision decide(const ColocParams& p, const Instance& inst) {
  Decision d;
  d.has_batch = make_coloc(p)->next_batch(inst.view(), d.plan);
  EXPECT_EQ(check_plan(inst, d.plan), "");
  EXPECT_EQ(d.has_batch, !d.plan.empty());
  return d;
}

// ---- stall_free (Sarathi-Serve) ----

TEST(ColocStallFree, DecodesThenPartialPrefillWithinBudget) {
  Instance inst;
  inst.free_blocks = 100;
  inst.running = {decode_seq(1, 100, 5, 7), partial_seq(4, 1500, 500, 94),
                  decode_seq(2, 200, 1, 13), decode_seq(3, 50, 9, 4)};
  inst.waiting = {waiting_seq(5, 10)};
  const Decision d = decide(params(Mode::kStallFree, 512), inst);
  EXPECT_TRUE(d.has_batch);
  EXPECT_EQ(d.plan.preempt, Ids{});
  EXPECT_EQ(d.plan.admit, Ids{});
  // The partial prefill keeps its whole-prompt reservation.
  EXPECT_EQ(scheduled(d.plan),
            (std::vector<Sched>{{1, 1, 0}, {2, 1, 0}, {3, 1, 0}, {4, 509, 1500}}));
}

TEST(ColocStallFree, PartialPrefillsGetTheLeftoverBudgetInOrder) {
  Instance inst;
  inst.running = {partial_seq(1, 300, 100, 19), decode_seq(2, 40, 2, 3),
                  partial_seq(3, 900, 0, 57)};
  const Decision d = decide(params(Mode::kStallFree, 512), inst);
  EXPECT_EQ(scheduled(d.plan), (std::vector<Sched>{{2, 1, 0}, {1, 200, 300}, {3, 311, 900}}));
}

TEST(ColocStallFree, AdmitsWithTheWholePromptReserved) {
  Instance inst;
  inst.running = {decode_seq(1, 100, 5, 7)};
  inst.free_blocks = 63;  // exactly blocks_for_tokens(1000, 16)
  inst.waiting = {waiting_seq(7, 1000), waiting_seq(8, 10)};
  const Decision d = decide(params(Mode::kStallFree, 512), inst);
  EXPECT_EQ(d.plan.admit, Ids{7});
  EXPECT_EQ(scheduled(d.plan), (std::vector<Sched>{{1, 1, 0}, {7, 511, 1000}}));
  int64_t free_after = -1;
  EXPECT_EQ(check_plan(inst, d.plan, &free_after), "");
  EXPECT_EQ(free_after, 0);
}

TEST(ColocStallFree, DoesNotAdmitWhenTheWholePromptDoesNotFit) {
  Instance inst;
  inst.free_blocks = 62;  // one short of the 1000-token prompt; its first chunk would fit
  inst.waiting = {waiting_seq(7, 1000)};
  const Decision d = decide(params(Mode::kStallFree, 512), inst);
  EXPECT_FALSE(d.has_batch);
  EXPECT_TRUE(d.plan.empty());
}

TEST(ColocStallFree, SplitRequestsThatArrivedWithPartialKvReserveTheRestOrPreemptTheTail) {
  // Two requests that arrived from another instance with 600 of their 1000 prompt tokens of KV
  // (38 blocks each): the rest of a prompt needs 25 more blocks.
  Instance inst;
  inst.total_blocks = 100;
  inst.free_blocks = 30;
  inst.running = {partial_seq(1, 1000, 600, 38), partial_seq(2, 1000, 600, 38)};
  Decision d = decide(params(Mode::kStallFree, 512), inst);
  EXPECT_EQ(scheduled(d.plan), (std::vector<Sched>{{1, 400, 1000}}));
  EXPECT_TRUE(d.plan.preempt.empty());
  // Neither can reserve the rest of its prompt and nothing else runs: the tail is preempted
  // rather than both waiting forever.
  inst.free_blocks = 24;
  d = decide(params(Mode::kStallFree, 512), inst);
  EXPECT_EQ(d.plan.preempt, Ids{2});
  EXPECT_EQ(scheduled(d.plan), (std::vector<Sched>{{1, 400, 1000}}));
}

TEST(ColocStallFree, ReadmitsAPreemptedRequestWithItsWholeContextReserved) {
  Instance inst;
  inst.free_blocks = 8;  // blocks_for_tokens(100 + 20, 16)
  inst.waiting = {waiting_seq(3, 100, 20)};
  const Decision d = decide(params(Mode::kStallFree, 512), inst);
  EXPECT_EQ(d.plan.admit, Ids{3});
  EXPECT_EQ(scheduled(d.plan), (std::vector<Sched>{{3, 120, 120}}));
}

TEST(ColocStallFree, StopsAtTheFirstWaitingRequestThatDoesNotFit) {
  Instance inst;
  inst.free_blocks = 20;
  // 100 tokens = 7 blocks, 300 tokens = 19 blocks, 10 tokens = 1 block.
  inst.waiting = {waiting_seq(1, 100), waiting_seq(2, 300), waiting_seq(3, 10)};
  const Decision d = decide(params(Mode::kStallFree, 512), inst);
  EXPECT_EQ(d.plan.admit, Ids{1});
  EXPECT_EQ(scheduled(d.plan), (std::vector<Sched>{{1, 100, 100}}));
}

TEST(ColocStallFree, NoSkippingEvenWhenALaterRequestFits) {
  Instance inst;
  inst.running = {decode_seq(9, 100, 5, 7)};
  inst.free_blocks = 12;
  inst.waiting = {waiting_seq(1, 200), waiting_seq(2, 16)};
  const Decision d = decide(params(Mode::kStallFree, 512), inst);
  EXPECT_EQ(d.plan.admit, Ids{});
  EXPECT_EQ(scheduled(d.plan), (std::vector<Sched>{{9, 1, 0}}));
}

TEST(ColocStallFree, AdmitsSeveralUntilTheBudgetIsSpent) {
  Instance inst;
  inst.waiting = {waiting_seq(1, 200), waiting_seq(2, 200), waiting_seq(3, 200),
                  waiting_seq(4, 5)};
  const Decision d = decide(params(Mode::kStallFree, 512), inst);
  EXPECT_EQ(d.plan.admit, (Ids{1, 2, 3}));
  EXPECT_EQ(scheduled(d.plan), (std::vector<Sched>{{1, 200, 200}, {2, 200, 200}, {3, 112, 200}}));
}

TEST(ColocStallFree, RespectsMaxNumSeqs) {
  Instance inst;
  inst.running = {decode_seq(1, 100, 5, 7), decode_seq(2, 100, 5, 7)};
  inst.waiting = {waiting_seq(3, 10), waiting_seq(4, 10), waiting_seq(5, 10)};
  ColocParams p = params(Mode::kStallFree, 512);
  p.max_num_seqs = 3;
  const Decision d = decide(p, inst);
  EXPECT_EQ(d.plan.admit, Ids{3});
  EXPECT_EQ(scheduled(d.plan), (std::vector<Sched>{{1, 1, 0}, {2, 1, 0}, {3, 10, 10}}));
}

TEST(ColocStallFree, DecodeWithoutAFreeBlockPreemptsTheLastRunning) {
  Instance inst;
  inst.free_blocks = 0;
  // Request 1 has computed 32 tokens in 2 blocks: its next token needs a third block.
  inst.running = {decode_seq(1, 30, 3, 2), partial_seq(2, 64, 32, 4), decode_seq(3, 100, 5, 7)};
  const Decision d = decide(params(Mode::kStallFree, 512), inst);
  EXPECT_EQ(d.plan.preempt, Ids{3});
  EXPECT_EQ(d.plan.admit, Ids{});
  EXPECT_EQ(scheduled(d.plan), (std::vector<Sched>{{1, 1, 0}, {2, 32, 64}}));
  int64_t free_after = -1;
  EXPECT_EQ(check_plan(inst, d.plan, &free_after), "");
  EXPECT_EQ(free_after, 6);
}

TEST(ColocStallFree, VictimIsTheTailEvenWhenItIsAPartialPrefill) {
  Instance inst;
  inst.free_blocks = 0;
  inst.running = {decode_seq(1, 30, 3, 2), decode_seq(2, 100, 5, 7), partial_seq(3, 64, 16, 4)};
  const Decision d = decide(params(Mode::kStallFree, 512), inst);
  EXPECT_EQ(d.plan.preempt, Ids{3});
  EXPECT_EQ(scheduled(d.plan), (std::vector<Sched>{{1, 1, 0}, {2, 1, 0}}));
}

TEST(ColocStallFree, LoneDecodeWithoutAFreeBlockPreemptsItself) {
  Instance inst;
  inst.free_blocks = 0;
  inst.running = {decode_seq(1, 30, 3, 2)};
  const Decision d = decide(params(Mode::kStallFree, 512), inst);
  EXPECT_TRUE(d.has_batch);
  EXPECT_EQ(d.plan.preempt, Ids{1});
  EXPECT_EQ(d.plan.admit, Ids{});
  EXPECT_TRUE(d.plan.scheduled.empty());
}

TEST(ColocStallFree, PreemptedRequestStaysAheadOfTheWaitingQueue) {
  // The victim re-enters the waiting queue at its head; the FCFS admission that follows in the
  // same step must not let a later request take the blocks the victim gave up.
  Instance inst;
  inst.free_blocks = 0;
  // Request 2 holds 10 blocks and needs all 10 again (150 + 10 tokens) to be readmitted.
  inst.running = {decode_seq(1, 30, 3, 2), decode_seq(2, 150, 10, 10)};
  inst.waiting = {waiting_seq(5, 32)};
  const Decision d = decide(params(Mode::kStallFree, 512), inst);
  EXPECT_EQ(d.plan.preempt, Ids{2});
  EXPECT_EQ(d.plan.admit, Ids{});
  EXPECT_EQ(scheduled(d.plan), (std::vector<Sched>{{1, 1, 0}}));
}

TEST(ColocStallFree, PreemptedRequestIsReadmittedFirstWhenItFits) {
  Instance inst;
  inst.free_blocks = 0;
  // Request 3 holds 6 blocks but its 64 + 10 tokens need only 5 once recomputed.
  inst.running = {decode_seq(1, 30, 3, 2), decode_seq(2, 100, 5, 7), decode_seq(3, 64, 10, 6)};
  inst.waiting = {waiting_seq(5, 16), waiting_seq(6, 16)};
  const Decision d = decide(params(Mode::kStallFree, 512), inst);
  EXPECT_EQ(d.plan.preempt, Ids{3});
  EXPECT_EQ(d.plan.admit, Ids{3});
  EXPECT_EQ(scheduled(d.plan), (std::vector<Sched>{{1, 1, 0}, {2, 1, 0}, {3, 74, 74}}));
}

TEST(ColocStallFree, NothingToDo) {
  const Instance inst;
  const Decision d = decide(params(Mode::kStallFree, 512), inst);
  EXPECT_FALSE(d.has_batch);
  EXPECT_TRUE(d.plan.empty());
}

// ---- unified_v1 (vLLM V1) ----

TEST(ColocUnifiedV1, RunningInOrderWithMinOfRemainingAndBudget) {
  Instance inst;
  inst.running = {partial_seq(1, 170, 100, 7), decode_seq(2, 100, 5, 7),
                  partial_seq(3, 80, 30, 2)};
  inst.waiting = {waiting_seq(4, 10)};
  const Decision d = decide(params(Mode::kUnifiedV1, 100), inst);
  EXPECT_EQ(d.plan.admit, Ids{});
  EXPECT_EQ(scheduled(d.plan), (std::vector<Sched>{{1, 70, 0}, {2, 1, 0}, {3, 29, 0}}));
}

TEST(ColocUnifiedV1, DecodeAfterALongPrefillWaitsWhenTheBudgetIsSpent) {
  Instance inst;
  inst.running = {partial_seq(1, 400, 200, 13), decode_seq(2, 100, 5, 7)};
  const Decision d = decide(params(Mode::kUnifiedV1, 100), inst);
  EXPECT_EQ(scheduled(d.plan), (std::vector<Sched>{{1, 100, 0}}));
}

TEST(ColocUnifiedV1, ThenAdmitsWaitingRequestsWithPerChunkKv) {
  Instance inst;
  inst.running = {decode_seq(1, 100, 5, 7)};
  inst.waiting = {waiting_seq(2, 40), waiting_seq(3, 200), waiting_seq(4, 5)};
  const Decision d = decide(params(Mode::kUnifiedV1, 100), inst);
  EXPECT_EQ(d.plan.admit, (Ids{2, 3}));
  EXPECT_EQ(scheduled(d.plan), (std::vector<Sched>{{1, 1, 0}, {2, 40, 0}, {3, 59, 0}}));
}

TEST(ColocUnifiedV1, LongPrefillThresholdCapsEveryRequest) {
  Instance inst;
  inst.running = {partial_seq(1, 400, 200, 13), decode_seq(2, 100, 5, 7)};
  inst.waiting = {waiting_seq(3, 100), waiting_seq(4, 10), waiting_seq(5, 300)};
  ColocParams p = params(Mode::kUnifiedV1, 100);
  p.long_prefill_token_threshold = 32;
  const Decision d = decide(p, inst);
  EXPECT_EQ(d.plan.admit, (Ids{3, 4, 5}));
  EXPECT_EQ(scheduled(d.plan),
            (std::vector<Sched>{{1, 32, 0}, {2, 1, 0}, {3, 32, 0}, {4, 10, 0}, {5, 25, 0}}));
}

TEST(ColocUnifiedV1, PreemptsTheTailAndAdmitsNothingInThatStep) {
  Instance inst;
  inst.free_blocks = 0;
  inst.running = {decode_seq(1, 30, 3, 2), decode_seq(2, 40, 2, 3), decode_seq(3, 50, 9, 4)};
  inst.waiting = {waiting_seq(4, 10)};  // would fit in the 3 blocks left after the preemption
  const Decision d = decide(params(Mode::kUnifiedV1, 100), inst);
  EXPECT_EQ(d.plan.preempt, Ids{3});
  EXPECT_EQ(d.plan.admit, Ids{});
  EXPECT_EQ(scheduled(d.plan), (std::vector<Sched>{{1, 1, 0}, {2, 1, 0}}));
  int64_t free_after = -1;
  EXPECT_EQ(check_plan(inst, d.plan, &free_after), "");
  EXPECT_EQ(free_after, 3);
}

TEST(ColocUnifiedV1, PreemptsUntilTheChunkFitsAndStopsWhenItIsTheVictim) {
  Instance inst;
  inst.free_blocks = 0;
  // Request 1 would grow from 1 to 7 blocks; the two others free one block each.
  inst.running = {partial_seq(1, 100, 16, 1), decode_seq(2, 10, 1, 1), decode_seq(3, 10, 1, 1)};
  const Decision d = decide(params(Mode::kUnifiedV1, 100), inst);
  EXPECT_TRUE(d.has_batch);
  EXPECT_EQ(d.plan.preempt, (Ids{3, 2, 1}));
  EXPECT_EQ(d.plan.admit, Ids{});
  EXPECT_TRUE(d.plan.scheduled.empty());
}

TEST(ColocUnifiedV1, PreemptionStopsAtTheFirstRequestThatFits) {
  Instance inst;
  inst.free_blocks = 1;
  // Request 1 grows from 1 to 4 blocks (16 -> 64 tokens): needs 3, one free, so two victims.
  inst.running = {partial_seq(1, 64, 16, 1), decode_seq(2, 10, 1, 1), decode_seq(3, 10, 1, 1),
                  decode_seq(4, 10, 1, 1)};
  const Decision d = decide(params(Mode::kUnifiedV1, 100), inst);
  EXPECT_EQ(d.plan.preempt, (Ids{4, 3}));
  EXPECT_EQ(scheduled(d.plan), (std::vector<Sched>{{1, 48, 0}, {2, 1, 0}}));
}

TEST(ColocUnifiedV1, WithoutChunkedPrefillStopsAtAPromptLargerThanTheBudgetLeft) {
  Instance inst;
  inst.waiting = {waiting_seq(1, 50), waiting_seq(2, 80), waiting_seq(3, 10)};
  ColocParams p = params(Mode::kUnifiedV1, 100);
  p.enable_chunked_prefill = false;
  const Decision d = decide(p, inst);
  EXPECT_EQ(d.plan.admit, Ids{1});
  EXPECT_EQ(scheduled(d.plan), (std::vector<Sched>{{1, 50, 0}}));
}

TEST(ColocUnifiedV1, WithChunkedPrefillSplitsThePromptAtTheBudget) {
  Instance inst;
  inst.waiting = {waiting_seq(1, 50), waiting_seq(2, 80), waiting_seq(3, 10)};
  const Decision d = decide(params(Mode::kUnifiedV1, 100), inst);
  EXPECT_EQ(d.plan.admit, (Ids{1, 2}));
  EXPECT_EQ(scheduled(d.plan), (std::vector<Sched>{{1, 50, 0}, {2, 50, 0}}));
}

TEST(ColocUnifiedV1, AdmissionNeedsKvForTheChunkOnly) {
  Instance inst;
  inst.free_blocks = 7;  // a 100-token chunk of the 1000-token prompt
  inst.waiting = {waiting_seq(1, 1000)};
  Decision d = decide(params(Mode::kUnifiedV1, 100), inst);
  EXPECT_EQ(d.plan.admit, Ids{1});
  EXPECT_EQ(scheduled(d.plan), (std::vector<Sched>{{1, 100, 0}}));
  inst.free_blocks = 6;
  d = decide(params(Mode::kUnifiedV1, 100), inst);
  EXPECT_FALSE(d.has_batch);
  EXPECT_TRUE(d.plan.empty());
}

TEST(ColocUnifiedV1, RespectsMaxNumSeqs) {
  Instance inst;
  inst.running = {decode_seq(1, 100, 5, 7)};
  inst.waiting = {waiting_seq(2, 10), waiting_seq(3, 10)};
  ColocParams p = params(Mode::kUnifiedV1, 100);
  p.max_num_seqs = 2;
  const Decision d = decide(p, inst);
  EXPECT_EQ(d.plan.admit, Ids{2});
  EXPECT_EQ(scheduled(d.plan), (std::vector<Sched>{{1, 1, 0}, {2, 10, 0}}));
}

TEST(ColocUnifiedV1, PolicyObjectIsReusableAcrossDecisions) {
  auto policy = make_coloc(params(Mode::kUnifiedV1, 100));
  Instance big;
  big.free_blocks = 0;
  big.running = {decode_seq(1, 30, 3, 2), decode_seq(2, 40, 2, 3), decode_seq(3, 50, 9, 4)};
  BatchPlan plan;
  ASSERT_TRUE(policy->next_batch(big.view(), plan));
  EXPECT_EQ(plan.preempt, Ids{3});
  // A second decision on a different view starts from scratch.
  Instance small;
  small.running = {decode_seq(7, 100, 5, 7)};
  small.waiting = {waiting_seq(8, 20)};
  plan.clear();
  ASSERT_TRUE(policy->next_batch(small.view(), plan));
  EXPECT_EQ(plan.preempt, Ids{});
  EXPECT_EQ(plan.admit, Ids{8});
  EXPECT_EQ(scheduled(plan), (std::vector<Sched>{{7, 1, 0}, {8, 20, 0}}));
}

// ---- prefill_priority (Orca / vLLM V0 without mixing) ----

TEST(ColocPrefillPriority, WaitingPromptsThatFitRunAsAPrefillOnlyBatch) {
  Instance inst;
  inst.running = {decode_seq(1, 100, 5, 7), decode_seq(2, 100, 5, 7)};
  inst.waiting = {waiting_seq(3, 40), waiting_seq(4, 50), waiting_seq(5, 20), waiting_seq(6, 5)};
  const Decision d = decide(params(Mode::kPrefillPriority, 100), inst);
  EXPECT_EQ(d.plan.preempt, Ids{});
  EXPECT_EQ(d.plan.admit, (Ids{3, 4}));
  // No decodes; request 5 does not fit the 10 tokens left and only the first prefill is chunked.
  EXPECT_EQ(scheduled(d.plan), (std::vector<Sched>{{3, 40, 0}, {4, 50, 0}}));
}

TEST(ColocPrefillPriority, NothingWaitingRunsADecodeOnlyBatchOfAllRunning) {
  Instance inst;
  inst.running = {decode_seq(1, 100, 5, 7), decode_seq(2, 100, 5, 7), decode_seq(3, 30, 3, 2)};
  const Decision d = decide(params(Mode::kPrefillPriority, 2), inst);  // decodes ignore the budget
  EXPECT_EQ(d.plan.admit, Ids{});
  EXPECT_EQ(scheduled(d.plan), (std::vector<Sched>{{1, 1, 0}, {2, 1, 0}, {3, 1, 0}}));
}

TEST(ColocPrefillPriority, OnlyTheFirstPrefillIsChunked) {
  Instance inst;
  inst.waiting = {waiting_seq(1, 250), waiting_seq(2, 10)};
  Decision d = decide(params(Mode::kPrefillPriority, 100), inst);
  EXPECT_EQ(d.plan.admit, Ids{1});
  EXPECT_EQ(scheduled(d.plan), (std::vector<Sched>{{1, 100, 0}}));

  inst.waiting = {waiting_seq(1, 30), waiting_seq(2, 250), waiting_seq(3, 10)};
  d = decide(params(Mode::kPrefillPriority, 100), inst);
  EXPECT_EQ(d.plan.admit, Ids{1});
  EXPECT_EQ(scheduled(d.plan), (std::vector<Sched>{{1, 30, 0}}));
}

TEST(ColocPrefillPriority, ContinuesAPartialPrefillBeforeNewPrompts) {
  Instance inst;
  inst.running = {decode_seq(1, 100, 5, 7), partial_seq(2, 160, 100, 7)};
  inst.waiting = {waiting_seq(3, 30), waiting_seq(4, 20)};
  const Decision d = decide(params(Mode::kPrefillPriority, 100), inst);
  EXPECT_EQ(d.plan.admit, Ids{3});
  EXPECT_EQ(scheduled(d.plan), (std::vector<Sched>{{2, 60, 0}, {3, 30, 0}}));
}

TEST(ColocPrefillPriority, PromptWithoutKvFallsBackToDecodes) {
  Instance inst;
  inst.free_blocks = 6;  // the 100-token prompt needs 7
  inst.running = {decode_seq(1, 100, 5, 7)};
  inst.waiting = {waiting_seq(2, 100)};
  const Decision d = decide(params(Mode::kPrefillPriority, 100), inst);
  EXPECT_EQ(d.plan.admit, Ids{});
  EXPECT_EQ(scheduled(d.plan), (std::vector<Sched>{{1, 1, 0}}));
}

TEST(ColocPrefillPriority, WithoutChunkingALongPromptFallsBackToDecodes) {
  Instance inst;
  inst.running = {decode_seq(1, 100, 5, 7)};
  inst.waiting = {waiting_seq(2, 150)};
  ColocParams p = params(Mode::kPrefillPriority, 100);
  p.enable_chunked_prefill = false;
  const Decision d = decide(p, inst);
  EXPECT_EQ(d.plan.admit, Ids{});
  EXPECT_EQ(scheduled(d.plan), (std::vector<Sched>{{1, 1, 0}}));
}

TEST(ColocPrefillPriority, DecodeBatchPreemptsFromTheTail) {
  Instance inst;
  inst.free_blocks = 0;
  inst.running = {decode_seq(1, 30, 3, 2), decode_seq(2, 100, 5, 7)};
  const Decision d = decide(params(Mode::kPrefillPriority, 100), inst);
  EXPECT_EQ(d.plan.preempt, Ids{2});
  EXPECT_EQ(scheduled(d.plan), (std::vector<Sched>{{1, 1, 0}}));
}

TEST(ColocPrefillPriority, RespectsMaxNumSeqs) {
  Instance inst;
  inst.running = {decode_seq(1, 100, 5, 7)};
  inst.waiting = {waiting_seq(2, 10), waiting_seq(3, 10)};
  ColocParams p = params(Mode::kPrefillPriority, 100);
  p.max_num_seqs = 2;
  const Decision d = decide(p, inst);
  EXPECT_EQ(d.plan.admit, Ids{2});
  EXPECT_EQ(scheduled(d.plan), (std::vector<Sched>{{2, 10, 0}}));
}

TEST(ColocPrefillPriority, WholePromptAllocationReservesThePrompt) {
  Instance inst;
  inst.waiting = {waiting_seq(1, 250)};
  ColocParams p = params(Mode::kPrefillPriority, 100);
  p.kv_allocation = KvAllocation::kWholePrompt;
  inst.free_blocks = 15;  // 250 tokens need 16
  Decision d = decide(p, inst);
  EXPECT_FALSE(d.has_batch);
  inst.free_blocks = 16;
  d = decide(p, inst);
  EXPECT_EQ(scheduled(d.plan), (std::vector<Sched>{{1, 100, 250}}));
}

// ---- parameters ----

ParamValues coloc_values(const std::string& mode, const std::string& kv_allocation) {
  ParamValues v = ParamValues::defaults(coloc_schema());
  v.set("mode", mode);
  v.set("kv_allocation", kv_allocation);
  return v;
}

TEST(ColocParams, DefaultsFromTheSchema) {
  const ColocParams p = ColocParams::from(ParamValues::defaults(coloc_schema()));
  EXPECT_EQ(p.mode, Mode::kUnifiedV1);
  EXPECT_EQ(p.max_num_batched_tokens, 2048);
  EXPECT_EQ(p.max_num_seqs, 256);
  EXPECT_EQ(p.long_prefill_token_threshold, 0);
  EXPECT_TRUE(p.enable_chunked_prefill);
  EXPECT_EQ(p.kv_allocation, KvAllocation::kPerChunk);
}

TEST(ColocParams, ReadsEveryKnob) {
  ParamValues v = ParamValues::defaults(coloc_schema());
  v.set("mode", std::string("prefill_priority"));
  v.set("max_num_batched_tokens", int64_t{512});
  v.set("max_num_seqs", int64_t{128});
  v.set("long_prefill_token_threshold", int64_t{64});
  v.set("enable_chunked_prefill", false);
  const ColocParams p = ColocParams::from(v);
  EXPECT_EQ(p.mode, Mode::kPrefillPriority);
  EXPECT_EQ(p.max_num_batched_tokens, 512);
  EXPECT_EQ(p.max_num_seqs, 128);
  EXPECT_EQ(p.long_prefill_token_threshold, 64);
  EXPECT_FALSE(p.enable_chunked_prefill);
}

TEST(ColocParams, AutoKvAllocationFollowsTheMode) {
  EXPECT_EQ(ColocParams::from(coloc_values("stall_free", "auto")).kv_allocation,
            KvAllocation::kWholePrompt);
  EXPECT_EQ(ColocParams::from(coloc_values("unified_v1", "auto")).kv_allocation,
            KvAllocation::kPerChunk);
  EXPECT_EQ(ColocParams::from(coloc_values("prefill_priority", "auto")).kv_allocation,
            KvAllocation::kPerChunk);
  EXPECT_EQ(ColocParams::from(coloc_values("stall_free", "auto")).mode, Mode::kStallFree);
}

TEST(ColocParams, ExplicitKvAllocationOverridesTheMode) {
  EXPECT_EQ(ColocParams::from(coloc_values("stall_free", "per_chunk")).kv_allocation,
            KvAllocation::kPerChunk);
  EXPECT_EQ(ColocParams::from(coloc_values("unified_v1", "whole_prompt")).kv_allocation,
            KvAllocation::kWholePrompt);
}

TEST(ColocSchema, DeclaresTheKnobsWithTheirDefaults) {
  const ParamValues v = ParamValues::defaults(coloc_schema());
  EXPECT_EQ(v.all().size(), 8u);
  EXPECT_EQ(v.get_string("mode"), "unified_v1");
  EXPECT_EQ(v.get_int("max_num_batched_tokens"), 2048);
  EXPECT_EQ(v.get_int("max_num_seqs"), 256);
  EXPECT_EQ(v.get_int("long_prefill_token_threshold"), 0);
  EXPECT_TRUE(v.get_bool("enable_chunked_prefill"));
  EXPECT_EQ(v.get_string("kv_allocation"), "auto");
  EXPECT_EQ(v.get_int("block_size"), 16);
  EXPECT_DOUBLE_EQ(v.get_double("gpu_memory_utilization"), 0.9);
}

}  // namespace
}  // namespace servesim::policies

namespace servesim::policies {
namespace {

// The decode run the engine shows a policy (sim/view.h, DecodeRun): the leading one-token decode
// steps of requests that stay.
sim::DecodeRun decode_run_of(const Instance& inst) {
  sim::DecodeRun run;
  for (const sim::SeqView& s : inst.running) {
    if (s.split_tokens != 0 || !s.is_decode()) break;
    run.new_blocks += sim::extra_blocks_for(s.computed_tokens + 1, s.blocks, inst.block_size);
    run.context_sum += s.computed_tokens + 1;
    run.count++;
  }
  return run;
}

// Shown the decode run, unified_v1 and stall_free plan exactly what they plan without it: the
// run's requests scheduled for one token each, first, then the same listed work, preemptions and
// admissions. A run whose blocks do not fit the free ones (the policy must preempt) or whose
// steps exceed unified_v1's budget is listed one request at a time, as without it.
TEST(ColocDecodeRuns, PlanTheSameBatchAsListingEveryRequest) {
  struct Case {
    const char* what;
    Instance inst;
    int64_t budget;
    bool run_unified_v1, run_stall_free;  // whether each mode schedules the run at once
  };
  std::vector<Case> cases;
  {
    Instance i;
    i.free_blocks = 100;
    i.running = {decode_seq(1, 100, 5, 7), decode_seq(2, 32, 1, 2), decode_seq(3, 50, 9, 4),
                 partial_seq(4, 1500, 500, 32)};
    i.waiting = {waiting_seq(5, 10)};
    cases.push_back({"decodes, a partial prefill and a waiting prompt", i, 512, true, true});
  }
  {
    Instance i;
    i.free_blocks = 0;  // request 2's step needs a block: the tail is preempted
    i.running = {decode_seq(1, 100, 5, 7), decode_seq(2, 32, 1, 2), partial_seq(3, 64, 16, 4)};
    cases.push_back({"no free block for the run", i, 512, false, false});
  }
  {
    Instance i;
    i.running = {decode_seq(1, 100, 5, 7), decode_seq(2, 200, 1, 13), decode_seq(3, 50, 9, 4)};
    // stall_free schedules every decode step whatever its budget.
    cases.push_back({"more steps than unified_v1's budget", i, 2, false, true});
  }
  {
    Instance i;
    i.running = {partial_seq(1, 64, 16, 4), decode_seq(2, 100, 5, 7)};
    cases.push_back({"a partial prefill first: no run", i, 512, false, false});
  }
  for (const Mode mode : {Mode::kUnifiedV1, Mode::kStallFree}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(c.what) +
                   (mode == Mode::kStallFree ? " (stall_free)" : " (unified_v1)"));
      const sim::DecodeRun run = decode_run_of(c.inst);
      BatchPlan listed, with_run;
      const auto policy = make_coloc(params(mode, c.budget));
      const bool listed_batch = policy->next_batch(c.inst.view(), listed);
      sim::InstanceView view = c.inst.view();
      view.decode_run = &run;
      const bool run_batch = make_coloc(params(mode, c.budget))->next_batch(view, with_run);
      EXPECT_TRUE(policy->plans_decode_runs());
      EXPECT_EQ(listed_batch, run_batch);
      EXPECT_EQ(with_run.decode_run,
                mode == Mode::kStallFree ? c.run_stall_free : c.run_unified_v1);
      BatchPlan expanded = with_run;
      if (with_run.decode_run) {
        expanded.decode_run = false;
        expanded.scheduled.clear();
        for (int64_t pos = 0; pos < run.count; ++pos) {
          expanded.scheduled.push_back({c.inst.running[static_cast<size_t>(pos)].id, 1, 0});
        }
        expanded.scheduled.insert(expanded.scheduled.end(), with_run.scheduled.begin(),
                                  with_run.scheduled.end());
      }
      EXPECT_EQ(expanded.preempt, listed.preempt);
      EXPECT_EQ(expanded.admit, listed.admit);
      EXPECT_EQ(scheduled(expanded), scheduled(listed));
      EXPECT_EQ(check_plan(c.inst, expanded), "");
    }
  }
  // Prefill-priority batches are prefill-only or decode-only: it plans no runs.
  EXPECT_FALSE(make_coloc(params(Mode::kPrefillPriority, 512))->plans_decode_runs());
}

}  // namespace
}  // namespace servesim::policies
