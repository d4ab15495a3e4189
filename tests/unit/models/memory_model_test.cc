#include "models/cost/memory_model.h"

#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "models/catalog/hardware.h"
#include "core/error.h"
#include "tests/unit/models/catalog_fixture.h"

namespace servesim::models {
namespace {

class MemoryModelTest : public CatalogFixture {
 protected:
  static Deployment deployment(const std::string& model, const std::string& gpu, int tp,
                               Dtype weights = Dtype::kBf16, Dtype kv = Dtype::kBf16) {
    return Deployment{&models_->get(model), &gpus_->get(gpu), tp, weights, kv};
  }

  static std::string capacity_error_text(const Deployment& d, const MemoryParams& p = {}) {
    try {
      plan_memory(d, p);
    } catch (const CapacityError& e) {
      return e.what();
    }
    return "(no CapacityError)";
  }
};

TEST_F(MemoryModelTest, Llama8bOnH100HandComputed) {
  const MemoryPlan plan = plan_memory(deployment("llama-3.1-8b", "h100_sxm", 1), {});
  const int64_t memory = int64_t{80} << 30;
  const int64_t usable = 77'309'411'328;  // 0.9 x 80 GiB
  const int64_t weights = 16'060'522'496;
  // 2 x 2048 tokens x (4096 hidden + 6144 qkv + 28672 gate-up) x 2 B, + 256 x 128256 fp32 logits.
  const int64_t activations = 2 * 2048 * (4096 + 6144 + 28672) * 2 + 256 * 128256 * 4;
  const int64_t runtime = int64_t{1} << 30;
  const int64_t pool = usable - weights - activations - runtime;
  EXPECT_EQ(activations, 450'101'248);
  EXPECT_EQ(pool, 59'725'045'760);

  EXPECT_EQ(plan.gpu_memory_bytes, memory);
  EXPECT_EQ(plan.usable_bytes, usable);
  EXPECT_EQ(plan.weight_bytes_per_gpu, weights);
  EXPECT_EQ(plan.activation_reserve_bytes, activations);
  EXPECT_EQ(plan.runtime_overhead_bytes, runtime);
  EXPECT_EQ(plan.kv_bytes_per_token_per_gpu, 131072);
  EXPECT_EQ(plan.kv_pool_bytes_per_gpu, pool);
  EXPECT_EQ(plan.block_size, 16);
  EXPECT_EQ(plan.num_blocks, pool / (16 * 131072));
  EXPECT_EQ(plan.num_blocks, 28479);
  EXPECT_EQ(plan.max_kv_tokens(), 28479 * 16);
  EXPECT_EQ(plan.label, "llama-3.1-8b on 1 x h100_sxm (tp1, bf16 weights, bf16 KV)");
}

TEST_F(MemoryModelTest, Fp8KvDoublesTheBlocks) {
  const MemoryPlan plan =
      plan_memory(deployment("llama-3.1-8b", "h100_sxm", 1, Dtype::kBf16, Dtype::kFp8), {});
  EXPECT_EQ(plan.kv_bytes_per_token_per_gpu, 65536);
  EXPECT_EQ(plan.num_blocks, 59'725'045'760 / (16 * 65536));
}

TEST_F(MemoryModelTest, TensorParallelShardsWeightsAndKv) {
  const MemoryPlan tp2 = plan_memory(deployment("llama-3.1-8b", "h100_sxm", 2), {});
  EXPECT_EQ(tp2.weight_bytes_per_gpu, 16'060'522'496 / 2);
  EXPECT_EQ(tp2.kv_bytes_per_token_per_gpu, 131072 / 2);
  // 16 ranks but only 8 KV heads: each rank keeps one replicated KV head.
  const MemoryPlan tp16 = plan_memory(deployment("llama-3.1-8b", "h100_sxm", 16), {});
  EXPECT_EQ(tp16.weight_bytes_per_gpu, 1'003'782'656);
  EXPECT_EQ(tp16.kv_bytes_per_token_per_gpu, 2 * 32 * 1 * 128 * 2);
}

TEST_F(MemoryModelTest, ParamsAreHonoured) {
  MemoryParams p;
  p.gpu_memory_utilization = 0.5;
  p.block_size = 32;
  p.runtime_overhead_bytes = int64_t{2} << 30;
  const MemoryPlan plan = plan_memory(deployment("llama-3.1-8b", "h100_sxm", 1), p);
  EXPECT_EQ(plan.usable_bytes, int64_t{40} << 30);
  EXPECT_EQ(plan.runtime_overhead_bytes, int64_t{2} << 30);
  const int64_t pool = (int64_t{40} << 30) - 16'060'522'496 - 450'101'248 - (int64_t{2} << 30);
  EXPECT_EQ(plan.num_blocks, pool / (32 * 131072));
  EXPECT_EQ(plan.max_kv_tokens(), plan.num_blocks * 32);

  MemoryParams bad;
  bad.gpu_memory_utilization = 1.2;
  EXPECT_THROW(plan_memory(deployment("llama-3.1-8b", "h100_sxm", 1), bad), std::invalid_argument);
}

TEST_F(MemoryModelTest, SeventyBOnOneRtx4090) {
  EXPECT_EQ(capacity_error_text(deployment("llama-3.1-70b", "rtx4090", 1)),
            "llama-3.1-70b (141.1 GB of bf16 weights) does not fit on 1 x rtx4090 (24.0 GiB, "
            "90 % usable): needs 131.4 GiB per GPU for weights alone at tp=1; try tp>=8 or a "
            "larger GPU");
}

TEST_F(MemoryModelTest, ReservesLeaveNoRoomForABlock) {
  MemoryParams p;
  p.runtime_overhead_bytes = int64_t{7} << 30;
  EXPECT_EQ(capacity_error_text(deployment("llama-3.1-8b", "rtx4090", 1), p),
            "llama-3.1-8b (16.1 GB of bf16 weights) does not fit on 1 x rtx4090 (24.0 GiB, 90 % "
            "usable): needs 15.0 GiB weights + 0.42 GiB activation reserve + 7.00 GiB runtime "
            "overhead + 2.0 MiB for one KV block per GPU at tp=1, but only 21.6 GiB is usable; "
            "try tp>=2 or a larger GPU");
}

TEST_F(MemoryModelTest, NothingFitsSuggestsALargerGpu) {
  MemoryParams p;
  p.runtime_overhead_bytes = int64_t{30} << 30;
  const std::string text = capacity_error_text(deployment("llama-3.1-8b", "rtx4090", 1), p);
  EXPECT_NE(text.find("; no tensor-parallel degree up to 32 fits, use a larger GPU"),
            std::string::npos)
      << text;
}

TEST_F(MemoryModelTest, InvalidTensorParallelDegree) {
  EXPECT_EQ(capacity_error_text(deployment("llama-3.1-8b", "h100_sxm", 3)),
            "llama-3.1-8b: tensor-parallel degree tp=3 does not divide num_attention_heads (32); "
            "valid tp degrees: 1, 2, 4, 8, 16, 32");
  EXPECT_EQ(capacity_error_text(deployment("opt-30b", "a100_80gb_sxm", 16)),
            "opt-30b: tensor-parallel degree tp=16 does not divide num_attention_heads (56); "
            "valid tp degrees: 1, 2, 4, 7, 8, 14, 28, 56");
}

TEST_F(MemoryModelTest, DescribeSummarisesThePlan) {
  const MemoryPlan plan = plan_memory(deployment("llama-3.1-8b", "h100_sxm", 1), {});
  EXPECT_EQ(describe(plan),
            "llama-3.1-8b on 1 x h100_sxm (tp1, bf16 weights, bf16 KV)\n"
            "  GPU memory          80.00 GiB per GPU, 72.00 GiB usable (90 %)\n"
            "  weights             14.96 GiB\n"
            "  activation reserve  0.42 GiB\n"
            "  runtime overhead    1.00 GiB\n"
            "  KV pool             55.62 GiB: 28479 blocks x 16 tokens = 455664 tokens (128.0 KiB "
            "per token per GPU)");
}

}  // namespace
}  // namespace servesim::models
