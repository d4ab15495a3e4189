// A multimodal request's images in the engine: the vision encoder reads them once, in the pass of
// the prompt's first chunk, and their tokens are prompt tokens. Hand-checked on a target whose pass
// costs a fixed time per query token and an encoder of fixed cost per patch.
#include "sim/engine.h"

#include <gtest/gtest.h>

#include <memory>

#include "models/cost/vision.h"
#include "policies/builtin.h"
#include "policies/coloc.h"

namespace servesim::sim {
namespace {

constexpr int64_t kTokenNs = 10'000;  // target: 10 us per query token
constexpr int64_t kPatchNs = 1'000;   // encoder: 1 us per patch

// A pass priced per query token (a compute-bound stub): remembers every segment it priced.
class PerTokenCost : public models::IterationCostModel {
 public:
  explicit PerTokenCost(int64_t ns) : ns_(ns) {}
  Duration iteration_time(const models::BatchShape& s) const override {
    for (const models::Segment& seg : s.segments) priced.push_back(seg);
    return Duration{ns_ * s.total_query_tokens()};
  }
  models::OperatorTimes breakdown(const models::BatchShape& s) const override {
    models::OperatorTimes t;
    t.overhead = iteration_time(s);
    return t;
  }
  Duration peak_bound_time(const models::BatchShape&) const override { return Duration{1}; }
  std::string describe() const override { return "per token"; }

  mutable std::vector<models::Segment> priced;

 private:
  int64_t ns_;
};

class Records : public RecordListener {
 public:
  void on_request(const RequestRecord& r) override { requests.push_back(r); }
  void on_sample(const SampleRecord&) override {}
  std::vector<RequestRecord> requests;
};

struct Outcome {
  std::vector<RequestRecord> records;
  std::shared_ptr<PerTokenCost> encoder;
};

// One request of `text` prompt tokens plus `images` images of `patches` patches (`tokens` prompt
// tokens each), 3 output tokens, alone on one instance whose scheduler computes at most `chunk`
// tokens a pass.
Outcome run(int64_t text, int32_t images, int32_t patches, int64_t tokens, int64_t chunk) {
  Outcome out;
  out.encoder = std::make_shared<PerTokenCost>(kPatchNs);
  InstanceSetup s;
  s.gpu = "test";
  s.cost_model =
      models::make_vision_cost_model(std::make_shared<PerTokenCost>(kTokenNs), out.encoder,
                                     std::make_shared<const models::ModelSpec>());
  s.num_blocks = 100'000;
  s.block_size = 16;
  policies::ColocParams p;
  p.mode = policies::ColocParams::Mode::kUnifiedV1;
  p.max_num_batched_tokens = chunk;
  s.batching = policies::make_coloc(p);
  std::vector<InstanceSetup> instances;
  instances.push_back(std::move(s));
  Workload w;
  RequestSpec r;
  r.prompt_tokens = text + images * tokens;
  r.output_tokens = 3;
  r.images = images;
  r.patches_per_image = patches;
  w.requests.push_back(r);
  policies::register_builtin_policies();
  Records records;
  Engine engine(EngineConfig{}, std::move(instances),
                routing_policies().get("round_robin").make({}), std::move(w), &records);
  engine.run();
  out.records = std::move(records.requests);
  return out;
}

TEST(VisionEncoder, AnUnloadedRequestsTtftIsItsPrefillPlusTheEncoderPass) {
  // 2 images of 4096 patches (1024 tokens each) before 500 text tokens, in one 8192-token pass.
  const Outcome o = run(500, 2, 4096, 1024, 8192);
  ASSERT_EQ(o.records.size(), 1u);
  const RequestRecord& r = o.records[0];
  EXPECT_EQ(r.prompt_tokens, 2548);
  EXPECT_EQ(r.first_token_ns - r.arrival_ns, 2548 * kTokenNs + 2 * 4096 * kPatchNs);
  // One segment per image: P queries behind P / 2 keys, P^2 query-key pairs (bidirectional).
  ASSERT_EQ(o.encoder->priced.size(), 2u);
  for (const models::Segment& seg : o.encoder->priced) {
    EXPECT_EQ(seg.query_tokens, 4096);
    EXPECT_EQ(seg.context_tokens, 4096 + 2048);
    EXPECT_EQ(seg.logit_rows, 0);
  }
  // Decode steps encode nothing: each costs one token.
  EXPECT_EQ(r.done_ns - r.first_token_ns, 2 * kTokenNs);
}

TEST(VisionEncoder, AChunkedPromptEncodesItsImagesOnceWithTheFirstChunk) {
  // 3,548 prompt tokens in 1,024-token chunks: four prefill passes, one encoder pass.
  const Outcome o = run(500, 3, 4096, 1016, 1024);
  ASSERT_EQ(o.records.size(), 1u);
  const RequestRecord& r = o.records[0];
  EXPECT_EQ(r.prompt_tokens, 3548);
  EXPECT_EQ(o.encoder->priced.size(), 3u);
  EXPECT_EQ(r.first_token_ns - r.arrival_ns, 3548 * kTokenNs + 3 * 4096 * kPatchNs);
}

TEST(VisionEncoder, TextRequestsRunNoEncoder) {
  const Outcome o = run(700, 0, 0, 0, 8192);
  ASSERT_EQ(o.records.size(), 1u);
  EXPECT_TRUE(o.encoder->priced.empty());
  EXPECT_EQ(o.records[0].first_token_ns - o.records[0].arrival_ns, 700 * kTokenNs);
}

}  // namespace
}  // namespace servesim::sim
