#include "dllm/memory.h"

#include <gtest/gtest.h>

#include "models/catalog/hardware.h"

namespace servesim::dllm {
namespace {

struct Fixture : ::testing::Test {
  static const models::ModelCatalog& models() {
    static const auto c = models::ModelCatalog::load(models::kDefaultModelCatalogDir);
    return c;
  }
  static const models::GpuCatalog& gpus() {
    static const auto c = models::GpuCatalog::load(models::kDefaultGpuCatalogPath);
    return c;
  }
  models::Deployment dep(const std::string& gpu) const {
    models::Deployment d;
    d.model = &models().get("llada-8b-instruct");
    d.gpu = &gpus().get(gpu);
    return d;
  }
};

TEST(DllmMemory, PaperLogitsExample) {
  // B = 16, L = 2048, V = 126464, bf16: 8.29 GB.
  const int64_t bytes = logits_bytes(16 * 2048, 126464, 2);
  EXPECT_EQ(bytes, int64_t{8287944704});
  EXPECT_NEAR(bytes / 1e9, 8.29, 0.005);
}

TEST(DllmMemory, LogitChunks) {
  // 100 requests x 32 block rows under M = 2048: 64 requests per chunk.
  const std::vector<int64_t> rows(100, 32);
  EXPECT_EQ(logit_chunks(rows, 2048), (std::vector<int64_t>{2048, 1152}));
  EXPECT_EQ(logit_chunks(rows, 0), (std::vector<int64_t>{3200}));
  // A request over M forms its own oversized chunk; it is never split.
  EXPECT_EQ(logit_chunks({100, 3000, 50}, 2048), (std::vector<int64_t>{100, 3000, 50}));
  EXPECT_EQ(logit_chunks({1000, 1048, 1}, 2048), (std::vector<int64_t>{2048, 1}));
  EXPECT_TRUE(logit_chunks({}, 2048).empty());
}

TEST(DllmMemory, PageReservation) {
  EXPECT_EQ(pages_for_request(0.5, 512), 1);   // ceil(256 / 256)
  EXPECT_EQ(pages_for_request(0.5, 556), 2);   // ceil(278 / 256)
  EXPECT_EQ(pages_for_request(0.5, 513), 2);   // ceil(ceil(256.5) / 256)
  EXPECT_EQ(pages_for_request(1.0, 2048), 8);
}

TEST_F(Fixture, PagePoolShrinksWithoutLogitBudgeting) {
  MemoryKnobs m;
  const PagePoolPlan budgeted = plan_page_pool(dep("l40s"), m, 16384, 2048, true);
  const PagePoolPlan monolithic = plan_page_pool(dep("l40s"), m, 16384, 2048, false);
  EXPECT_EQ(budgeted.page_bytes, int64_t{128} << 20);  // 256 tokens x 512 KiB
  EXPECT_EQ(budgeted.logit_reserve_bytes, 3 * logits_bytes(2048, 126464, 2));
  EXPECT_EQ(monolithic.logit_reserve_bytes, 3 * logits_bytes(16384, 126464, 2));
  EXPECT_GT(budgeted.num_pages, monolithic.num_pages);
  EXPECT_GT(monolithic.num_pages, 0);
  // The 4090 leaves far fewer pages.
  const PagePoolPlan small = plan_page_pool(dep("rtx4090"), m, 4000, 2048, true);
  EXPECT_LT(small.num_pages, budgeted.num_pages / 3);
  // At a low utilization nothing fits.
  m.gpu_memory_utilization = 0.5;
  EXPECT_LT(plan_page_pool(dep("rtx4090"), m, 4000, 2048, true).num_pages, 1);
}

TEST_F(Fixture, StaticBatchMemoryPerAlgorithm) {
  const MemoryKnobs m;
  const auto d = dep("l40s");
  const DenoiseParams p;  // G = 256
  const auto fast = static_batch_memory(Algorithm::kFastDllm, d, m, p, 16, 512);
  const auto sparse = static_batch_memory(Algorithm::kSparseDllm, d, m, p, 16, 512);
  const auto cache = static_batch_memory(Algorithm::kDllmCache, d, m, p, 16, 512);
  EXPECT_EQ(fast.kv_bytes, int64_t{16} * 512 * 524288);
  EXPECT_EQ(cache.kv_bytes, 2 * fast.kv_bytes);
  // B = 16, L = 512: 2.07 GB of bf16 logits. Fast-dLLM's float64 copy and float64 softmax add
  // 16.58 GB; Sparse-dLLM's bf16 softmax 2.07 GB; dLLM-Cache's bf16 exp and softmax of the 256
  // generation rows 2.07 GB.
  const int64_t bf16_logits = logits_bytes(16 * 512, 126464, 2);
  EXPECT_EQ(bf16_logits, int64_t{2'071'986'176});
  EXPECT_EQ(fast.logits_bytes, bf16_logits + logits_bytes(16 * 512, 126464, 16));
  EXPECT_EQ(sparse.logits_bytes, 2 * bf16_logits);
  EXPECT_EQ(cache.logits_bytes, bf16_logits + logits_bytes(16 * 256, 126464, 4));
  EXPECT_GT(fast.total(), sparse.total());
}

}  // namespace
}  // namespace servesim::dllm
