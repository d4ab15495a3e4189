#include "models/catalog/hardware.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace servesim::models {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

Json read_json(const std::string& path) {
  std::ifstream in(path);
  return Json::parse(in);
}

// A scratch directory under the system temp dir, removed at the end of the test.
class ScratchDir {
 public:
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            (std::string("servesim_models_") + info->test_suite_name() + "_" + info->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() { fs::remove_all(path_); }

  std::string write(const std::string& name, const std::string& text) const {
    const fs::path file = path_ / name;
    std::ofstream(file) << text;
    return file.string();
  }
  std::string path() const { return path_.string(); }

 private:
  fs::path path_;
};

std::string input_error_text(const std::function<void()>& load) {
  try {
    load();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

TEST(DtypeTest, BytesNamesAndParsing) {
  EXPECT_EQ(dtype_bytes(Dtype::kBf16), 2);
  EXPECT_EQ(dtype_bytes(Dtype::kFp8), 1);
  EXPECT_STREQ(dtype_name(Dtype::kBf16), "bf16");
  EXPECT_STREQ(dtype_name(Dtype::kFp8), "fp8");
  EXPECT_EQ(parse_dtype("fp8"), Dtype::kFp8);
  EXPECT_EQ(parse_dtype("bf16"), Dtype::kBf16);
  // MXFP4: 4-bit E2M1 + one E8M0 byte per 32 weights = 4.25 bits; weight-only, BF16 math.
  EXPECT_EQ(parse_dtype("mxfp4"), Dtype::kMxfp4);
  EXPECT_EQ(weight_bytes_per_element(Dtype::kMxfp4).num, 17);
  EXPECT_EQ(weight_bytes_per_element(Dtype::kMxfp4).den, 32);
  EXPECT_EQ(weight_bytes(32, Dtype::kMxfp4, 1), 17);
  try {
    parse_dtype("int4");
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "unknown dtype \"int4\"; valid values are: bf16, fp8, fp8_block, nvfp4, int4_wo, mxfp4");
  }
}

TEST(GpuCatalogTest, LoadsAllElevenGpus) {
  const GpuCatalog catalog = GpuCatalog::load(kDefaultGpuCatalogPath);
  EXPECT_EQ(catalog.keys(),
            (std::vector<std::string>{"a100_40gb_sxm", "a100_80gb_sxm", "b200_sxm", "b300_sxm",
                                      "gb200_nvl72", "gb300_nvl72", "h100_pcie", "h100_sxm",
                                      "h200_sxm", "l40s", "rtx4090"}));
}

TEST(GpuCatalogTest, H100SxmFieldsInBaseUnits) {
  const GpuCatalog catalog = GpuCatalog::load(kDefaultGpuCatalogPath);
  const GpuSpec& g = catalog.get("h100_sxm");
  EXPECT_EQ(g.key, "h100_sxm");
  EXPECT_EQ(g.name, "NVIDIA H100 SXM5 80GB");
  EXPECT_EQ(g.memory_bytes, int64_t{80} << 30);
  EXPECT_DOUBLE_EQ(g.mem_bw_bytes_per_s, 3.35e12);
  EXPECT_DOUBLE_EQ(g.bf16_flops_per_s, 989e12);
  EXPECT_DOUBLE_EQ(g.fp8_flops_per_s, 1979e12);
  EXPECT_DOUBLE_EQ(g.measured_matmul_bf16_flops_per_s, 794.5e12);
  EXPECT_DOUBLE_EQ(g.measured_matmul_fp8_flops_per_s, 1402.6e12);
  EXPECT_EQ(g.sm_count, 132);
  EXPECT_EQ(g.l2_bytes, int64_t{50} << 20);
  EXPECT_DOUBLE_EQ(g.nvlink_bytes_per_s_per_direction, 450e9);
  EXPECT_EQ(g.nvlink_max_tp, 8);
  EXPECT_DOUBLE_EQ(g.pcie_bytes_per_s_per_direction, 64e9);
  EXPECT_DOUBLE_EQ(g.tdp_w, 700);
  EXPECT_DOUBLE_EQ(g.price_usd_per_hour, 4.76);  // runpod_on_demand_2026_03 is preferred
  EXPECT_DOUBLE_EQ(g.tp_link_bytes_per_s(8), 450e9);
}

TEST(GpuCatalogTest, OptionalFieldsAndFallbacks) {
  const GpuCatalog catalog = GpuCatalog::load(kDefaultGpuCatalogPath);
  const GpuSpec& rtx = catalog.get("rtx4090");
  EXPECT_DOUBLE_EQ(rtx.nvlink_bytes_per_s_per_direction, 0);
  EXPECT_EQ(rtx.nvlink_max_tp, 0);
  EXPECT_DOUBLE_EQ(rtx.measured_matmul_bf16_flops_per_s, 0);
  EXPECT_DOUBLE_EQ(rtx.tp_link_bytes_per_s(2), 32e9);  // PCIe 4.0
  EXPECT_DOUBLE_EQ(rtx.price_usd_per_hour, 0.6);

  // A100: no FP8 tensor cores, so FP8 GEMMs run at the BF16 rate; the only price is CoreWeave's.
  const GpuSpec& a100 = catalog.get("a100_40gb_sxm");
  EXPECT_DOUBLE_EQ(a100.fp8_flops_per_s, 0);
  EXPECT_DOUBLE_EQ(a100.peak_flops_per_s(Dtype::kFp8), 312e12);
  EXPECT_DOUBLE_EQ(a100.price_usd_per_hour, 2.21);

  // H100 PCIe: 600 GB/s bidirectional bridge -> 300 GB/s per direction, pairs only.
  const GpuSpec& pcie = catalog.get("h100_pcie");
  EXPECT_DOUBLE_EQ(pcie.nvlink_bytes_per_s_per_direction, 300e9);
  EXPECT_EQ(pcie.nvlink_max_tp, 2);
  EXPECT_DOUBLE_EQ(pcie.tp_link_bytes_per_s(2), 300e9);
  EXPECT_DOUBLE_EQ(pcie.tp_link_bytes_per_s(4), 64e9);

  EXPECT_EQ(catalog.get("h200_sxm").memory_bytes, int64_t{141} << 30);
}

TEST(GpuCatalogTest, UnknownKeyListsValidKeys) {
  const GpuCatalog catalog = GpuCatalog::load(kDefaultGpuCatalogPath);
  try {
    catalog.get("h300");
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "unknown GPU \"h300\"; valid values are: a100_40gb_sxm, a100_80gb_sxm, b200_sxm, "
                 "b300_sxm, gb200_nvl72, gb300_nvl72, h100_pcie, h100_sxm, h200_sxm, l40s, "
                 "rtx4090");
  }
}

TEST(GpuCatalogTest, BadFieldNamesFileAndJsonPath) {
  const ScratchDir dir;
  Json doc = read_json(kDefaultGpuCatalogPath);

  doc["gpus"]["h100_sxm"]["memory_bandwidth_gbs"] = -3350;
  std::string file = dir.write("gpus.json", doc.dump(2));
  EXPECT_EQ(input_error_text([&] { GpuCatalog::load(file); }),
            file + ": gpus.h100_sxm.memory_bandwidth_gbs: expected a positive number, got -3350");

  doc = read_json(kDefaultGpuCatalogPath);
  doc["gpus"]["l40s"].erase("sm_count");
  file = dir.write("gpus.json", doc.dump(2));
  EXPECT_EQ(input_error_text([&] { GpuCatalog::load(file); }),
            file + ": gpus.l40s.sm_count: missing; expected a positive integer");

  doc = read_json(kDefaultGpuCatalogPath);
  doc["gpus"]["b200_sxm"]["fp8_tflops_dense"] = "fast";
  file = dir.write("gpus.json", doc.dump(2));
  EXPECT_EQ(input_error_text([&] { GpuCatalog::load(file); }),
            file +
                ": gpus.b200_sxm.fp8_tflops_dense: expected a positive number or null, got "
                "\"fast\"");

  doc = read_json(kDefaultGpuCatalogPath);
  doc["gpus"]["rtx4090"]["price_usd_per_gpu_hour"] = Json::object({{"range", {1, 2}}});
  file = dir.write("gpus.json", doc.dump(2));
  EXPECT_EQ(input_error_text([&] { GpuCatalog::load(file); }),
            file +
                ": gpus.rtx4090.price_usd_per_gpu_hour: expected at least one entry with a "
                "plain positive number");

  file = dir.write("gpus.json", "{\"gpus\": {}}");
  EXPECT_EQ(input_error_text([&] { GpuCatalog::load(file); }),
            file + ": gpus: expected at least one GPU");
}

TEST(GpuCatalogTest, SyntaxErrorNamesLine) {
  const ScratchDir dir;
  const std::string file = dir.write("gpus.json", "{\n  \"gpus\": {\n    \"x\": ,\n  }\n}\n");
  const std::string text = input_error_text([&] { GpuCatalog::load(file); });
  EXPECT_EQ(text.rfind(file + ":3: invalid JSON: ", 0), 0u) << text;
}

TEST(GpuCatalogTest, MissingFile) {
  EXPECT_EQ(input_error_text([] { GpuCatalog::load("models/catalog/nope.json"); }),
            "models/catalog/nope.json: cannot open file");
}

TEST(ModelCatalogTest, LoadsEveryShippedModel) {
  const ModelCatalog catalog = ModelCatalog::load(kDefaultModelCatalogDir);
  EXPECT_EQ(catalog.keys(), (std::vector<std::string>{"deepseek-r1",
                                                      "deepseek-v3",
                                                      "deepseek-v3.2",
                                                      "dream-v0-instruct-7b",
                                                      "glm-4.7",
                                                      "glm-5",
                                                      "glm-5.1",
                                                      "gpt-oss-120b",
                                                      "kimi-k2-instruct",
                                                      "kimi-k2.5",
                                                      "llada-8b-instruct",
                                                      "llama-2-70b",
                                                      "llama-2-7b",
                                                      "llama-3-8b",
                                                      "llama-3.1-70b",
                                                      "llama-3.1-8b",
                                                      "llama-3.3-70b-instruct",
                                                      "minimax-m2.5",
                                                      "mixtral-8x7b",
                                                      "opt-13b",
                                                      "opt-30b",
                                                      "opt-66b",
                                                      "qwen2.5-1.5b",
                                                      "qwen2.5-14b-instruct",
                                                      "qwen2.5-32b",
                                                      "qwen2.5-72b",
                                                      "qwen3-235b-a22b",
                                                      "qwen3-32b",
                                                      "qwen3.5-122b-a10b",
                                                      "qwen3.5-27b",
                                                      "qwen3.5-35b-a3b",
                                                      "qwen3.5-397b-a17b"}));
}

// The shipped catalog and a folder of one's own load together; a key in both names both files.
TEST(ModelCatalogTest, FoldersLoadTogetherAndAKeyInTwoIsAnError) {
  const fs::path dir = fs::temp_directory_path() / ("servesim_own_models_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string shipped = std::string(kDefaultModelCatalogDir) + "/qwen3-32b.json";
  fs::copy_file(shipped, dir / "my-qwen.json");
  const ModelCatalog both = ModelCatalog::load(std::vector<std::string>{kDefaultModelCatalogDir, dir.string()});
  EXPECT_EQ(both.all().size(), ModelCatalog::load(kDefaultModelCatalogDir).all().size() + 1);
  EXPECT_EQ(both.get("my-qwen").num_layers, both.get("qwen3-32b").num_layers);
  fs::copy_file(shipped, dir / "qwen3-32b.json");
  try {
    ModelCatalog::load(std::vector<std::string>{kDefaultModelCatalogDir, dir.string()});
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), (dir / "qwen3-32b.json").string());
    EXPECT_NE(e.message().find("model \"qwen3-32b\" is defined in"), std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

TEST(ModelCatalogTest, KvBytesMatchEveryFile) {
  const ModelCatalog catalog = ModelCatalog::load(kDefaultModelCatalogDir);
  for (const auto& [key, model] : catalog.all()) {
    const Json doc = read_json(std::string(kDefaultModelCatalogDir) + "/" + key + ".json");
    const int64_t expected = doc.at("kv_cache_bytes_per_token_16bit").get<int64_t>();
    EXPECT_EQ(model.kv_bytes_per_token(Dtype::kBf16), expected) << key;
    if (!model.dsa) {  // sparse attention's FP8 layout: sparse_attention_test.cc
      EXPECT_EQ(model.kv_bytes_per_token(Dtype::kFp8), expected / 2) << key;
    }
    EXPECT_EQ(model.param_count, doc.at("param_count").get<int64_t>()) << key;
    EXPECT_EQ(model.weights_bytes_16bit, doc.at("weights_bytes_16bit").get<int64_t>()) << key;
    EXPECT_EQ(model.key, key);
  }
}

TEST(ModelCatalogTest, ArchitectureFields) {
  const ModelCatalog catalog = ModelCatalog::load(kDefaultModelCatalogDir);
  const ModelSpec& l8 = catalog.get("llama-3.1-8b");
  EXPECT_EQ(l8.name, "Llama-3.1-8B");
  EXPECT_EQ(l8.hidden_size, 4096);
  EXPECT_EQ(l8.num_layers, 32);
  EXPECT_EQ(l8.num_attention_heads, 32);
  EXPECT_EQ(l8.num_kv_heads, 8);
  EXPECT_EQ(l8.head_dim, 128);
  EXPECT_EQ(l8.intermediate_size, 14336);
  EXPECT_EQ(l8.vocab_size, 128256);
  EXPECT_EQ(l8.max_position_embeddings, 131072);
  EXPECT_TRUE(l8.gated_mlp);
  EXPECT_FALSE(l8.tie_word_embeddings);
  EXPECT_FALSE(l8.moe.has_value());
  EXPECT_FALSE(l8.diffusion);
  EXPECT_EQ(l8.kv_bytes_per_token(Dtype::kBf16), 131072);

  const ModelSpec& l2 = catalog.get("llama-2-70b");
  EXPECT_EQ(l2.hidden_size, 8192);
  EXPECT_EQ(l2.num_layers, 80);
  EXPECT_EQ(l2.num_kv_heads, 8);
  EXPECT_EQ(l2.vocab_size, 32000);
  EXPECT_EQ(l2.max_position_embeddings, 4096);
  EXPECT_EQ(l2.param_count, 68'976'648'192);
  EXPECT_EQ(l2.kv_bytes_per_token(Dtype::kBf16), 327680);

  const ModelSpec& mix = catalog.get("mixtral-8x7b");
  ASSERT_TRUE(mix.moe.has_value());
  EXPECT_EQ(mix.moe->num_experts, 8);
  EXPECT_EQ(mix.moe->experts_per_token, 2);
  EXPECT_EQ(mix.moe->expert_intermediate_size, 14336);

  EXPECT_TRUE(catalog.get("llada-8b-instruct").diffusion);
  EXPECT_TRUE(catalog.get("dream-v0-instruct-7b").diffusion);
  EXPECT_FALSE(catalog.get("opt-30b").gated_mlp);
  EXPECT_TRUE(catalog.get("qwen2.5-1.5b").tie_word_embeddings);
}

TEST(ModelCatalogTest, BadModelFileNamesFileAndJsonPath) {
  const ScratchDir dir;
  const std::string source = std::string(kDefaultModelCatalogDir) + "/mixtral-8x7b.json";

  Json doc = read_json(source);
  doc["moe"]["top_k"] = 9;
  std::string file = dir.write("mixtral-8x7b.json", doc.dump(2));
  EXPECT_EQ(input_error_text([&] { ModelCatalog::load(dir.path()); }),
            file + ": moe.top_k: expected at most moe.num_experts (8), got 9");

  doc = read_json(source);
  doc["kv_cache_bytes_per_token_16bit"] = 1000;
  file = dir.write("mixtral-8x7b.json", doc.dump(2));
  EXPECT_EQ(input_error_text([&] { ModelCatalog::load(dir.path()); }),
            file +
                ": kv_cache_bytes_per_token_16bit: expected 2 * num_layers * "
                "num_key_value_heads * head_dim * 2 = 131072, got 1000");

  doc = read_json(source);
  doc["hidden_size"] = "4096";
  file = dir.write("mixtral-8x7b.json", doc.dump(2));
  EXPECT_EQ(input_error_text([&] { ModelCatalog::load(dir.path()); }),
            file + ": hidden_size: expected a positive integer, got \"4096\"");

  doc = read_json(source);
  doc["num_key_value_heads"] = 5;
  doc["kv_cache_bytes_per_token_16bit"] = 2 * 32 * 5 * 128 * 2;
  file = dir.write("mixtral-8x7b.json", doc.dump(2));
  EXPECT_EQ(input_error_text([&] { ModelCatalog::load(dir.path()); }),
            file + ": num_key_value_heads: expected a divisor of num_attention_heads (32), got 5");
}

TEST(ModelCatalogTest, DirectoryErrors) {
  const ScratchDir dir;
  EXPECT_EQ(input_error_text([&] { ModelCatalog::load(dir.path()); }),
            dir.path() + ": no model *.json files found");
  EXPECT_EQ(input_error_text([] { ModelCatalog::load("models/catalog/no_such_dir"); }),
            "models/catalog/no_such_dir: not a directory (expected a folder of model *.json "
            "files)");
}

}  // namespace
}  // namespace servesim::models
