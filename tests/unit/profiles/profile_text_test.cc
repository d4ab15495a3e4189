// Text of the format: CSV goldens, meta.json golden, names of dtypes, GPUs and directories.
#include <gtest/gtest.h>

#include <string>

#include "profiles/profile_tables.h"
#include "tests/unit/profiles/profile_test_util.h"

namespace servesim::profiles {
namespace {

using testing::sample_profile;

TEST(FormatText, LatencyHasExactlyThreeDecimals) {
  EXPECT_EQ(format_latency_us(12.3456), "12.346");
  EXPECT_EQ(format_latency_us(9.0), "9.000");
  EXPECT_EQ(format_latency_us(0.0043 * 1000.0), "4.300");
  EXPECT_EQ(format_latency_us(251234.5678), "251234.568");
}

TEST(FormatText, CsvGoldens) {
  Profile p = sample_profile();
  EXPECT_EQ(to_csv(p.gemm),
            "dtype,m,n,k,latency_us\n"
            "bf16,1,6144,4096,12.346\n"
            "fp8_e4m3,16,6144,4096,9.000\n");
  EXPECT_EQ(to_csv(p.attention_decode),
            "dtype,kv_dtype,batch,context_tokens,num_heads,num_kv_heads,head_dim,latency_us\n"
            "bf16,bf16,64,8192,32,8,128,1234.568\n");
  EXPECT_EQ(to_csv(p.moe),
            "dtype,num_tokens,hidden_size,inter_size,topk,num_experts,moe_tp,moe_ep,distribution,"
            "latency_us\n"
            "fp8_block,128,7168,2048,8,256,1,8,balanced,321.500\n");
  EXPECT_EQ(to_csv(p.elementwise),
            "model,op,num_tokens,tp,latency_us\nllama-2-7b,attn_rope,4096,2,83.500\n");
  EXPECT_EQ(to_csv(p.memcpy), "kind,bytes,latency_us\nd2d,4096,2.000\n");
  EXPECT_EQ(to_csv(std::vector<MemcpyRow>{}), "kind,bytes,latency_us\n");
  EXPECT_EQ(to_csv(p.forward),
            "kind,batch,q_tokens,context_tokens,graph,latency_us\ndecode,64,1,2048,1,9123.250\n");
}

TEST(FormatText, OptionalTrailingColumnsOnlyWhenNeeded) {
  Profile p = sample_profile();
  EXPECT_EQ(to_csv(p.attention_prefill),
            "dtype,batch,q_tokens,prefix_tokens,num_heads,num_kv_heads,head_dim,causal,latency_us,"
            "kv_dtype\n"
            "bf16,2,1024,4096,32,8,128,0,150.500,fp8_e4m3\n");
  p.attention_prefill[0].kv_dtype = "bf16";
  EXPECT_EQ(to_csv(p.attention_prefill),
            "dtype,batch,q_tokens,prefix_tokens,num_heads,num_kv_heads,head_dim,causal,"
            "latency_us\n"
            "bf16,2,1024,4096,32,8,128,0,150.500\n");
  p.attention_prefill[0].kv_dtype = "";  // empty means "same as dtype"
  EXPECT_EQ(to_csv(p.attention_prefill).find("kv_dtype"), std::string::npos);
  EXPECT_EQ(to_csv(p.collective),
            "op,dtype,num_gpus,message_bytes,latency_us,nodes\n"
            "all_reduce,bf16,16,1048576,25.250,2\n");
  p.collective[0].nodes = 1;
  EXPECT_EQ(to_csv(p.collective),
            "op,dtype,num_gpus,message_bytes,latency_us\nall_reduce,bf16,16,1048576,25.250\n");
}

TEST(FormatText, RowKeysFillOptionalColumns) {
  AttentionPrefillRow r;
  r.dtype = "bf16";
  r.batch = 1;
  r.q_tokens = 128;
  r.num_heads = 32;
  r.num_kv_heads = 8;
  r.head_dim = 128;
  EXPECT_EQ(row_key(r), "bf16,bf16,1,128,0,32,8,128,1");
  EXPECT_EQ(row_key(GemmRow{"fp16", 4, 5, 6, 1.0}), "fp16,4,5,6");
  CollectiveRow c;
  c.op = "send_recv";
  c.dtype = "fp16";
  c.num_gpus = 2;
  c.message_bytes = 2048;
  EXPECT_EQ(row_key(c), "send_recv,fp16,2,2048,1");
}

TEST(FormatText, MetaJsonGolden) {
  Profile p = sample_profile();
  EXPECT_EQ(meta_json(p), R"({
  "format": "servesim-profile",
  "version": 1,
  "gpu": "h100_sxm",
  "gpu_name": "NVIDIA H100 80GB HBM3",
  "sm_count": 132,
  "sm_clock_mhz": 0,
  "mem_clock_mhz": 0,
  "l2_bytes": 52428800,
  "memory_bytes": 0,
  "driver": "",
  "cuda_runtime": "",
  "cublas": "",
  "cudnn": "",
  "nccl": "",
  "harness_version": "",
  "date": "2025-01-31T12:00:00Z",
  "source": "servesim-profile",
  "method": "median of 20",
  "model": "llama-3.1-8b",
  "tp": 2,
  "license": "test",
  "upstream": "none",
  "tables": {
    "attention_decode": "attention_decode.csv",
    "attention_prefill": "attention_prefill.csv",
    "collective": "collective.csv",
    "elementwise": "elementwise.csv",
    "forward": "forward.csv",
    "gemm": "gemm.csv",
    "memcpy": "memcpy.csv",
    "moe": "moe.csv"
  },
  "skipped": {
    "collective": "only 1 GPU"
  }
}
)");
}

TEST(FormatText, MembersWinOverFieldsOfTheSameName) {
  Profile p = sample_profile();
  p.meta.fields["gpu"] = "stale";
  p.meta.fields["tp"] = "7";
  p.meta.fields["compute_capability"] = "9.0";
  std::string text = meta_json(p);
  EXPECT_NE(text.find("\"gpu\": \"h100_sxm\""), std::string::npos);
  EXPECT_NE(text.find("\"tp\": 2"), std::string::npos);
  EXPECT_NE(text.find("\"gpu_name\": \"NVIDIA H100 80GB HBM3\",\n  \"compute_capability\": "
                      "\"9.0\",\n  \"sm_count\": 132"),
            std::string::npos)
      << text;
}

TEST(Names, CanonicalDtypes) {
  EXPECT_EQ(canonical_dtype("bfloat16"), "bf16");
  EXPECT_EQ(canonical_dtype("bf16"), "bf16");
  EXPECT_EQ(canonical_dtype("half"), "fp16");
  EXPECT_EQ(canonical_dtype("float16"), "fp16");
  EXPECT_EQ(canonical_dtype("fp8"), "fp8_e4m3");
  EXPECT_EQ(canonical_dtype("fp8_block"), "fp8_block");
  EXPECT_EQ(canonical_dtype("nvfp4"), "nvfp4");
  EXPECT_EQ(canonical_dtype("int8"), "int8");
  // Weight-only MoE kernels: Marlin INT4 and W4A16 MXFP4 (gpt-oss).
  EXPECT_EQ(canonical_dtype("int4_wo"), "int4_wo");
  EXPECT_EQ(canonical_dtype("w4a16_mxfp4"), "mxfp4");
  EXPECT_EQ(canonical_dtype("mxfp4"), "mxfp4");
  EXPECT_EQ(canonical_dtype("w4a8_awq"), "");
  EXPECT_EQ(canonical_dtype("BF16"), "");
}

TEST(Names, GpuCatalogKeys) {
  EXPECT_EQ(gpu_catalog_key("NVIDIA H100 80GB HBM3"), "h100_sxm");
  EXPECT_EQ(gpu_catalog_key("NVIDIA A100-SXM4-80GB"), "a100_80gb_sxm");
  EXPECT_EQ(gpu_catalog_key("NVIDIA H200"), "h200_sxm");
  EXPECT_EQ(gpu_catalog_key("NVIDIA L40S"), "l40s");
  EXPECT_EQ(gpu_catalog_key("NVIDIA B200"), "b200_sxm");
  EXPECT_EQ(gpu_catalog_key("NVIDIA A40"), "a40");
  EXPECT_EQ(gpu_catalog_key("  "), "unknown_gpu");
}

TEST(Names, ProfileSubdirFollowsTheConvention) {
  Profile p = sample_profile();
  p.meta.tp = 1;
  EXPECT_EQ(profile_subdir(p), "h100_sxm/servesim_harness_llama-3.1-8b");
  p.meta.source = "aiconfigurator";
  p.meta.model = "generic";
  p.meta.fields["variant"] = "vllm";
  EXPECT_EQ(profile_subdir(p), "h100_sxm/aiconfigurator_vllm");
  p.meta.source = "vidur";
  p.meta.fields.erase("variant");
  EXPECT_EQ(profile_subdir(p), "h100_sxm/vidur");
  // Shapes of a tensor-parallel degree above 1 get their own directory.
  p = sample_profile();
  p.meta.tp = 4;
  EXPECT_EQ(profile_subdir(p), "h100_sxm/servesim_harness_llama-3.1-8b_tp4");
  p.meta.source = "aiconfigurator";
  p.meta.model = "generic";
  EXPECT_EQ(profile_subdir(p), "h100_sxm/aiconfigurator_tp4");
}

TEST(Names, TableFilesListNonEmptyTables) {
  Profile p;
  EXPECT_TRUE(table_files(p).empty());
  p.moe = sample_profile().moe;
  EXPECT_EQ(table_files(p), (std::map<std::string, std::string>{{"moe", "moe.csv"}}));
  EXPECT_EQ(table_names().size(), 8u);
}

}  // namespace
}  // namespace servesim::profiles
