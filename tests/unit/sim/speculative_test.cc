// Speculative decoding in the engine: a decode step verifies its drafts and keeps the accepted
// ones. Hand-checked on a target whose pass costs the same whatever it verifies (a memory-bound
// decode) and a drafter of fixed cost per pass: acceptance 0 costs only the draft, acceptance 1
// divides the decode steps by k + 1, and mixed acceptance keeps 1 + sum(acceptance) tokens a step.
#include "sim/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "models/cost/speculative.h"
#include "policies/builtin.h"
#include "policies/coloc.h"

namespace servesim::sim {
namespace {

constexpr int64_t kTargetNs = 10'000'000;  // every target pass: 10 ms
constexpr int64_t kDraftNs = 1'000'000;    // every drafter pass: 1 ms

// A pass of fixed time; remembers the widest segment it priced and its sampled rows.
class FixedCost : public models::IterationCostModel {
 public:
  explicit FixedCost(int64_t ns) : ns_(ns) {}
  Duration iteration_time(const models::BatchShape& s) const override {
    for (const models::Segment& seg : s.segments) {
      if (seg.logit_rows > 1) {
        widest_verification = std::max(widest_verification, seg.query_tokens);
        EXPECT_EQ(seg.logit_rows, seg.query_tokens) << "a verification samples every token";
      }
    }
    return Duration{ns_};
  }
  models::OperatorTimes breakdown(const models::BatchShape& s) const override {
    models::OperatorTimes t;
    t.overhead = iteration_time(s);
    return t;
  }
  Duration peak_bound_time(const models::BatchShape&) const override { return Duration{1}; }
  std::string describe() const override { return "fixed"; }

  mutable int64_t widest_verification = 0;

 private:
  int64_t ns_;
};

struct Outcome {
  RunResult result;
  std::vector<RequestRecord> records;
  std::shared_ptr<FixedCost> target;
};

class Records : public RecordListener {
 public:
  void on_request(const RequestRecord& r) override { requests.push_back(r); }
  void on_sample(const SampleRecord&) override {}
  std::vector<RequestRecord> requests;
};

models::SpeculativeDecoding spec_of(std::vector<double> acceptance) {
  models::SpeculativeDecoding spec;
  spec.num_speculative_tokens = static_cast<int>(acceptance.size());
  spec.acceptance = std::move(acceptance);
  return spec;
}

// `n` requests of `prompt` / `output` tokens arriving together on one instance (vLLM V1's
// scheduler), with `spec` or without speculative decoding.
Outcome run(const std::optional<models::SpeculativeDecoding>& spec, int n, int64_t prompt,
            int64_t output, int64_t num_blocks = 100'000, uint64_t seed = 7) {
  Outcome out;
  out.target = std::make_shared<FixedCost>(kTargetNs);
  InstanceSetup s;
  s.gpu = "test";
  s.cost_model = out.target;
  if (spec) {
    s.cost_model = models::make_speculative_cost_model(
        out.target, std::make_shared<FixedCost>(kDraftNs), nullptr, *spec);
    s.speculative = spec;
    s.speculative_seed = seed;
  }
  s.num_blocks = num_blocks;
  s.block_size = 16;
  policies::ColocParams p;
  p.mode = policies::ColocParams::Mode::kUnifiedV1;
  p.max_num_batched_tokens = 8192;
  s.batching = policies::make_coloc(p);
  std::vector<InstanceSetup> instances;
  instances.push_back(std::move(s));
  Workload w;
  for (int i = 0; i < n; ++i) {
    RequestSpec r;
    r.id = i;
    r.prompt_tokens = prompt;
    r.output_tokens = output;
    w.requests.push_back(r);
  }
  policies::register_builtin_policies();
  Records records;
  Engine engine(EngineConfig{}, std::move(instances),
                routing_policies().get("round_robin").make({}), std::move(w), &records);
  out.result = engine.run();
  out.records = std::move(records.requests);
  return out;
}

double tpot_ms(const RequestRecord& r) {
  return static_cast<double>(r.done_ns - r.first_token_ns) / 1e6 /
         static_cast<double>(r.output_tokens - 1);
}

TEST(SpeculativeDecoding, AcceptanceZeroCostsOnlyTheDraft) {
  const Outcome plain = run(std::nullopt, 1, 100, 41);
  const Outcome spec = run(spec_of({0, 0, 0}), 1, 100, 41);
  ASSERT_EQ(plain.records.size(), 1u);
  ASSERT_EQ(spec.records.size(), 1u);
  // The same 40 decode steps; each adds the drafter's three passes, nothing else.
  EXPECT_EQ(plain.result.instances[0].iterations, 41);
  EXPECT_EQ(spec.result.instances[0].iterations, 41);
  EXPECT_DOUBLE_EQ(tpot_ms(plain.records[0]), 10.0);
  EXPECT_DOUBLE_EQ(tpot_ms(spec.records[0]), 10.0 + 3 * 1.0);
  // The prefill pass: the drafter reads the prompt once.
  EXPECT_EQ(spec.records[0].first_token_ns - spec.records[0].arrival_ns, kTargetNs + kDraftNs);
  EXPECT_EQ(spec.records[0].output_tokens, 41);
  EXPECT_EQ(spec.target->widest_verification, 4);
}

TEST(SpeculativeDecoding, AcceptanceOneDividesDecodeStepsByKPlusOne) {
  for (const int k : {1, 2, 3}) {
    const Outcome spec = run(spec_of(std::vector<double>(static_cast<size_t>(k), 1.0)), 1, 100, 41);
    ASSERT_EQ(spec.records.size(), 1u);
    const int64_t steps = (40 + k) / (k + 1);  // ceil(40 / (k + 1))
    EXPECT_EQ(spec.result.instances[0].iterations, 1 + steps) << "k=" << k;
    const int64_t step_ns = kTargetNs + k * kDraftNs;
    EXPECT_EQ(spec.records[0].done_ns - spec.records[0].first_token_ns, steps * step_ns);
    EXPECT_EQ(spec.records[0].output_tokens, 41);
  }
}

TEST(SpeculativeDecoding, KeepsOnePlusTheSumOfTheAcceptanceTokensPerStep) {
  const models::SpeculativeDecoding spec = spec_of({0.7, 0.5, 0.3});
  const Outcome a = run(spec, 64, 200, 401);
  ASSERT_EQ(a.records.size(), 64u);
  // Every step of every request verifies 4 tokens: decode_tokens / 4 steps for 64 x 400 tokens.
  const double steps = static_cast<double>(a.result.instances[0].decode_tokens) / 4.0;
  const double per_step = 64.0 * 400.0 / steps;
  EXPECT_NEAR(per_step, spec.mean_accepted_length(), 0.03 * spec.mean_accepted_length());
  // Deterministic for a seed; another seed draws other acceptances.
  const Outcome again = run(spec, 64, 200, 401);
  EXPECT_EQ(a.result.event_fingerprint, again.result.event_fingerprint);
  const Outcome other = run(spec, 64, 200, 401, 100'000, 8);
  EXPECT_NE(a.result.event_fingerprint, other.result.event_fingerprint);
}

TEST(SpeculativeDecoding, PreemptedRequestsFinishWithEveryToken) {
  // A pool too small for every request's drafts: preemption by recompute drops the drafts, and
  // the request drafts again after its next sample.
  const Outcome a = run(spec_of({0.8, 0.6, 0.4}), 16, 300, 200, /*num_blocks=*/120);
  ASSERT_EQ(a.records.size(), 16u);
  int64_t preemptions = 0;
  for (const RequestRecord& r : a.records) {
    EXPECT_EQ(r.output_tokens, 200);
    preemptions += r.preemptions;
  }
  EXPECT_GT(preemptions, 0);
}

}  // namespace
}  // namespace servesim::sim
