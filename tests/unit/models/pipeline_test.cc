// Pipeline parallelism: the pass of a micro-batch, the stages' weights and KV, layout errors.
#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "models/cost/cost_model.h"
#include "models/catalog/hardware.h"
#include "models/cost/memory_model.h"
#include "models/cost/pipeline.h"
#include "core/error.h"
#include "tests/unit/models/unit_rates.h"

namespace servesim::models {
namespace {

// 4 layers, hidden 64, 4 query / 2 KV heads of 16, MLP 128, vocab 100.
ModelSpec tiny_dense() {
  ModelSpec m;
  m.key = "tiny-dense";
  m.hidden_size = 64;
  m.num_layers = 4;
  m.num_attention_heads = 4;
  m.num_kv_heads = 2;
  m.head_dim = 16;
  m.intermediate_size = 128;
  m.vocab_size = 100;
  m.max_position_embeddings = 4096;
  m.param_count = 100'000;
  m.weights_bytes_16bit = 200'000;
  return m;
}

// unit_gpu() with 1 GiB of memory and a 1000 B/s NVLink domain of 8 GPUs.
GpuSpec nvlink_unit_gpu() {
  GpuSpec g = unit_gpu();
  g.memory_bytes = int64_t{1} << 30;
  g.nvlink_bytes_per_s_per_direction = 1000;
  g.nvlink_max_tp = 8;
  return g;
}

BatchShape decodes(int n, int64_t context) {
  BatchShape s;
  for (int i = 0; i < n; ++i) s.segments.push_back({1, context, 1});
  return s;
}

TEST(Pipeline, APassIsTheWholeModelPlusTheHandOffs) {
  const ModelSpec m = tiny_dense();
  const GpuSpec g = nvlink_unit_gpu();
  RooflineParams p;
  p.iteration_overhead = Duration{1000};
  const Deployment whole{&m, &g, 2, Dtype::kBf16, Dtype::kBf16};
  Deployment piped = whole;
  piped.pp = 2;
  EXPECT_EQ(piped.gpus(), 4);
  EXPECT_EQ(parallelism_label(piped), "tp2 pp2");
  const auto a = make_roofline_cost_model(whole, p);
  const auto b = make_roofline_cost_model(piped, p);
  BatchShape mixed = decodes(3, 200);
  mixed.segments.push_back({40, 40, 1});
  // One hand-off between the 2 stages: 8 us + 43 tokens x 64 x 2 B over 4 GPUs' NVLink (1000 B/s)
  // at 70 % efficiency.
  const Duration handoff = duration_from_seconds(8e-6 + 43.0 * 64 * 2 / (1000 * 0.7));
  EXPECT_EQ(b->iteration_time(mixed), a->iteration_time(mixed) + handoff);
  OperatorTimes want = a->breakdown(mixed);
  want.allreduce += handoff;
  EXPECT_EQ(b->breakdown(mixed).allreduce, want.allreduce);
  EXPECT_EQ(b->breakdown(mixed).total(), want.total());
  EXPECT_EQ(b->peak_bound_time(mixed), a->peak_bound_time(mixed));
  // A decode pass priced from its sums matches the shape's time to the nanosecond.
  const std::optional<Duration> fast = b->decode_iteration_time({3, 600, 3});
  ASSERT_TRUE(fast.has_value());
  EXPECT_EQ(*fast, b->iteration_time(decodes(3, 200)));
  // And a mixed pass: the hand-offs carry the decode steps' tokens too.
  BatchShape chunk;
  chunk.segments.push_back({40, 40, 1});
  const std::optional<Duration> mixed_fast = b->mixed_iteration_time({3, 600, 3}, chunk);
  ASSERT_TRUE(mixed_fast.has_value());
  EXPECT_EQ(*mixed_fast, b->iteration_time(mixed));
  EXPECT_NE(b->describe().find("pipeline tp2 pp2: 2 stages of"), std::string::npos)
      << b->describe();
  // Four stages: three hand-offs; past the NVLink domain (tp 4 x pp 4 = 16 GPUs) they cross
  // the scale-out network, here PCIe's 1 B/s.
  Deployment wide = whole;
  wide.tp = 4;
  wide.pp = 4;
  const auto c = make_roofline_cost_model(wide, p);
  Deployment wide_whole = wide;
  wide_whole.pp = 1;
  const BatchShape one = decodes(1, 10);
  EXPECT_EQ(c->iteration_time(one), make_roofline_cost_model(wide_whole, p)->iteration_time(one) +
                                        duration_from_seconds(3 * (8e-6 + 64 * 2 / 0.7)));
}

TEST(Pipeline, AStageHoldsItsLayersWeightsAndKv) {
  const ModelSpec m = tiny_dense();
  const GpuSpec g = nvlink_unit_gpu();
  MemoryParams mp;
  mp.runtime_overhead_bytes = 1;
  const Deployment whole{&m, &g, 2, Dtype::kBf16, Dtype::kBf16};
  Deployment piped = whole;
  piped.pp = 2;
  const MemoryPlan a = plan_memory(whole, mp);
  const MemoryPlan b = plan_memory(piped, mp);
  // Half of the 4 layers per stage: half the weights of a TP-2 GPU and half its KV per token
  // (1 KV head x 16 x 2 (K and V) x 2 B per layer).
  EXPECT_EQ(a.weight_bytes_per_gpu, 100'000 * 2 / 2);
  EXPECT_EQ(b.weight_bytes_per_gpu, 100'000 * 2 / 2 * 2 / 4);
  EXPECT_EQ(a.kv_bytes_per_token_per_gpu, 4 * 1 * 16 * 2 * 2);
  EXPECT_EQ(b.kv_bytes_per_token_per_gpu, 2 * 1 * 16 * 2 * 2);
  EXPECT_EQ(b.num_blocks, b.kv_pool_bytes_per_gpu / (b.block_size * b.kv_bytes_per_token_per_gpu));
  EXPECT_NE(b.label.find("on 4 x unit (tp2 pp2"), std::string::npos) << b.label;
  // Three stages of 4 layers: the heaviest holds 2.
  piped.pp = 3;
  EXPECT_EQ(plan_memory(piped, mp).kv_bytes_per_token_per_gpu, 2 * 1 * 16 * 2 * 2);
  EXPECT_EQ(plan_memory(piped, mp).weight_bytes_per_gpu, 100'000 * 2 / 2 * 2 / 4);
}

TEST(Pipeline, LayoutsThatCannotSplitAreErrors) {
  const ModelSpec m = tiny_dense();
  const GpuSpec g = nvlink_unit_gpu();
  EXPECT_EQ(pipeline_parallel_error(m, 4), "");
  EXPECT_EQ(pipeline_parallel_error(m, 5),
            "tiny-dense: pipeline-parallel degree pp=5 must be in [1, 4] (one stage holds at "
            "least one of the model's 4 layers)");
  EXPECT_NE(pipeline_parallel_error(m, 0).find("pp=0 must be in [1, 4]"), std::string::npos);
  EXPECT_NE(pipeline_parallel_error(m, 2, 2).find("with attention data parallelism"),
            std::string::npos);
  Deployment d{&m, &g, 1, Dtype::kBf16, Dtype::kBf16};
  d.pp = 5;
  EXPECT_THROW(make_roofline_cost_model(d, {}), CapacityError);
  d.pp = 1;
  EXPECT_THROW(
      make_pipeline_cost_model(
          d, [](const Deployment& plain) { return make_roofline_cost_model(plain, {}); }, {}),
      std::invalid_argument);
}

}  // namespace
}  // namespace servesim::models
