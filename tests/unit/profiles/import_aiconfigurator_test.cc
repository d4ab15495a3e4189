// Importer of the aiconfigurator data set on small synthetic inputs.
#include "profiles/import_aiconfigurator.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "tests/unit/profiles/profile_test_util.h"

namespace servesim::profiles {
namespace {

using testing::TempDir;

const char* kDevice = "VLLM,0.14.0,NVIDIA A100-SXM4-80GB";
const char* kAttentionHeader =
    "framework,version,device,op_name,kernel_source,batch_size,isl,num_heads,num_key_value_heads,"
    "head_dim,beam_width,attn_dtype,kv_cache_dtype,step,window_size,latency\n";

// A system directory "a100_sxm" with one small file of every kind.
std::string write_system(const TempDir& tmp, bool with_balanced_moe = true) {
  std::string v = "aic/a100_sxm/vllm_0.14.0/";
  std::string d = kDevice;
  tmp.write(v + "gemm_perf.csv",
            "framework,version,device,op_name,kernel_source,gemm_dtype,m,n,k,latency\n" + d +
                ",gemm,vllm_default,bfloat16,4,4096,4096,0.0123\n" + d +
                ",gemm,vllm_default,fp8,4,4096,4096,0.02\n" + d +
                ",gemm,vllm_default,w4a8_awq,4,4096,4096,0.01\n" + d +
                ",gemm,vllm_default,bfloat16,8,4096,4096,0.010\n" + d +
                ",gemm,vllm_default,bfloat16,8,4096,4096,0.030\n" + d +
                ",gemm,vllm_default,bfloat16,8,4096,4096,0.011\n");
  tmp.write(v + "context_attention_perf.csv",
            std::string(kAttentionHeader) + d +
                ",context_attention,vllm_flash_attn,2,1024,32,8,128,1,bfloat16,fp8,0,0,0.5\n" + d +
                ",context_attention,vllm_flash_attn,2,1024,32,8,128,1,bfloat16,bfloat16,0,0,0.4\n" +
                d +
                ",context_attention,vllm_flash_attn,2,1024,32,8,128,1,bfloat16,fp8,0,1024,0.1\n");
  tmp.write(v + "generation_attention_perf.csv",
            std::string(kAttentionHeader) + d +
                ",generation_attention,vllm_flash_attn,64,1,32,8,128,1,bfloat16,bfloat16,2047,0,"
                "0.0321\n");
  std::string moe =
      "framework,version,device,op_name,kernel_source,moe_dtype,num_tokens,hidden_size,"
      "inter_size,topk,num_experts,moe_tp_size,moe_ep_size,distribution,latency\n" +
      d + ",moe,vllm_fused_moe,bfloat16,16,4096,14336,2,8,1,1,power_law_1.01,0.5\n" + d +
      ",moe,vllm_fused_moe,fp8,16,4096,14336,2,8,1,1,power_law_1.2,0.6\n";
  if (with_balanced_moe) {
    moe += d + ",moe,vllm_fused_moe,bfloat16,16,4096,14336,2,8,1,1,balanced,0.4\n" + d +
           ",moe,vllm_mxfp4_moe,w4a16_mxfp4,16,2880,2880,4,128,1,1,balanced,0.07\n" + d +
           ",moe,vllm_marlin_moe,int4_wo,16,4096,1536,8,128,1,1,balanced,0.09\n" + d +
           ",moe,vllm_w4a8_moe,w4a8_awq,16,4096,1536,8,128,1,1,balanced,0.08\n";
  }
  tmp.write(v + "moe_perf.csv", moe);
  tmp.write(v + "custom_allreduce_perf.csv",
            "framework,version,device,op_name,kernel_source,allreduce_dtype,num_gpus,message_size,"
            "latency,backend\n"
            "vLLM,0.14.0,NVIDIA A100-SXM4-80GB,all_reduce,vLLM_custom_graph,bfloat16,4,4096,0.007,"
            "vllm_graph\n"
            "vLLM,0.14.0,NVIDIA A100-SXM4-80GB,all_reduce,vLLM_custom_eager,bfloat16,4,4096,0.02,"
            "vllm_eager\n");
  tmp.write("aic/a100_sxm/nccl_2.27.3/nccl_perf.csv",
            "framework,version,device,op_name,kernel_source,nccl_dtype,num_gpus,message_size,"
            "latency\n"
            "TRTLLM,2.27.3,NVIDIA A100-SXM4-80GB,all_reduce,NCCL,half,2,1024,0.0062\n"
            "TRTLLM,2.27.3,NVIDIA A100-SXM4-80GB,all_gather,NCCL,int8,8,1024,0.009\n"
            "TRTLLM,2.27.3,NVIDIA A100-SXM4-80GB,alltoall,NCCL,half,8,256,0.01\n");
  return tmp.path("aic/a100_sxm");
}

TEST(ImportAiconfigurator, MetaAndGpuKey) {
  TempDir tmp;
  std::vector<Profile> ps = import_aiconfigurator(write_system(tmp));
  ASSERT_EQ(ps.size(), 1u);
  const ProfileMeta& m = ps[0].meta;
  EXPECT_EQ(m.gpu, "a100_80gb_sxm");  // the device name says 80GB
  EXPECT_EQ(m.gpu_name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(m.source, "aiconfigurator");
  EXPECT_EQ(m.model, "generic");
  EXPECT_EQ(m.tp, 1);
  EXPECT_EQ(m.license, "Apache-2.0 (ai-dynamo/aiconfigurator)");
  EXPECT_EQ(m.fields.at("nccl"), "2.27.3");
  EXPECT_EQ(m.fields.at("framework_version"), "0.14.0");
  EXPECT_NE(m.fields.at("upstream").find("095f58a5"), std::string::npos);
  EXPECT_EQ(ps[0].dir, "a100_80gb_sxm/aiconfigurator_vllm");
  EXPECT_EQ(m.date.size(), 20u);
}

TEST(ImportAiconfigurator, GemmMillisecondsToMicrosecondsAndDtypeNames) {
  TempDir tmp;
  Profile p = import_aiconfigurator(write_system(tmp)).at(0);
  ASSERT_EQ(p.gemm.size(), 3u);
  EXPECT_EQ(row_key(p.gemm[0]), "bf16,4,4096,4096");
  EXPECT_DOUBLE_EQ(p.gemm[0].latency_us, 12.3);
  EXPECT_EQ(p.gemm[1].dtype, "fp8_e4m3");
  EXPECT_DOUBLE_EQ(p.gemm[1].latency_us, 20.0);
  // Three measurements of one key: their median.
  EXPECT_EQ(row_key(p.gemm[2]), "bf16,8,4096,4096");
  EXPECT_DOUBLE_EQ(p.gemm[2].latency_us, 11.0);
  const std::string& note = p.meta.skipped.at("gemm");
  EXPECT_NE(note.find("1 rows with gemm_dtype w4a8_awq dropped"), std::string::npos) << note;
  EXPECT_NE(note.find("2 repeated measurements"), std::string::npos) << note;
}

TEST(ImportAiconfigurator, ContextAttentionBecomesCausalPrefillWithoutPrefix) {
  TempDir tmp;
  Profile p = import_aiconfigurator(write_system(tmp)).at(0);
  ASSERT_EQ(p.attention_prefill.size(), 2u);
  const AttentionPrefillRow& r = p.attention_prefill[0];
  EXPECT_EQ(r.dtype, "bf16");
  EXPECT_EQ(r.kv_dtype, "fp8_e4m3");
  EXPECT_EQ(r.batch, 2);
  EXPECT_EQ(r.q_tokens, 1024);
  EXPECT_EQ(r.prefix_tokens, 0);
  EXPECT_EQ(r.num_heads, 32);
  EXPECT_EQ(r.num_kv_heads, 8);
  EXPECT_EQ(r.head_dim, 128);
  EXPECT_TRUE(r.causal);
  EXPECT_DOUBLE_EQ(r.latency_us, 500.0);
  EXPECT_EQ(p.attention_prefill[1].kv_dtype, "bf16");
  // The sliding-window row is dropped and counted.
  EXPECT_NE(p.meta.skipped.at("attention_prefill").find("1 rows with window_size 1024 dropped"),
            std::string::npos);
}

TEST(ImportAiconfigurator, GenerationAttentionContextIsIslPlusStep) {
  TempDir tmp;
  Profile p = import_aiconfigurator(write_system(tmp)).at(0);
  ASSERT_EQ(p.attention_decode.size(), 1u);
  const AttentionDecodeRow& r = p.attention_decode[0];
  EXPECT_EQ(r.batch, 64);
  EXPECT_EQ(r.context_tokens, 2048);
  EXPECT_EQ(r.kv_dtype, "bf16");
  EXPECT_DOUBLE_EQ(r.latency_us, 32.1);
}

TEST(ImportAiconfigurator, CollectiveElementsBecomeBytes) {
  TempDir tmp;
  Profile p = import_aiconfigurator(write_system(tmp)).at(0);
  ASSERT_EQ(p.collective.size(), 4u);
  EXPECT_EQ(row_key(p.collective[0]), "all_reduce,fp16,2,2048,1");  // half: 2 bytes
  EXPECT_DOUBLE_EQ(p.collective[0].latency_us, 6.2);
  EXPECT_EQ(row_key(p.collective[1]), "all_gather,int8,8,1024,1");  // int8: 1 byte
  EXPECT_EQ(row_key(p.collective[2]), "alltoall,fp16,8,512,1");
  // vLLM's custom all-reduce: the CUDA-graph variant only, bf16 elements.
  EXPECT_EQ(row_key(p.collective[3]), "custom_all_reduce,bf16,4,8192,1");
  EXPECT_DOUBLE_EQ(p.collective[3].latency_us, 7.0);
  EXPECT_NE(p.meta.skipped.at("collective").find("vllm_eager"), std::string::npos);
}

TEST(ImportAiconfigurator, MoeKeepsBalancedWhereItExists) {
  TempDir tmp;
  AiconfiguratorImportOptions one;
  one.all_moe_distributions = false;
  Profile p = import_aiconfigurator(write_system(tmp), one).at(0);
  ASSERT_EQ(p.moe.size(), 3u);
  EXPECT_EQ(p.moe[0].distribution, "balanced");
  EXPECT_EQ(row_key(p.moe[0]), "bf16,16,4096,14336,2,8,1,1,balanced");
  EXPECT_DOUBLE_EQ(p.moe[0].latency_us, 400.0);
  // The weight-only kernels keep their own dtypes: W4A16 MXFP4 (gpt-oss) and Marlin INT4; a
  // dtype servesim has no name for is dropped and counted.
  EXPECT_EQ(row_key(p.moe[1]), "mxfp4,16,2880,2880,4,128,1,1,balanced");
  EXPECT_DOUBLE_EQ(p.moe[1].latency_us, 70.0);
  EXPECT_EQ(row_key(p.moe[2]), "int4_wo,16,4096,1536,8,128,1,1,balanced");
  EXPECT_NE(p.meta.skipped.at("moe").find("1 rows with moe_dtype w4a8_awq dropped"),
            std::string::npos)
      << p.meta.skipped.at("moe");

  // By default every routing distribution is kept.
  Profile q = import_aiconfigurator(tmp.path("aic/a100_sxm")).at(0);
  EXPECT_EQ(q.moe.size(), 5u);
  EXPECT_EQ(q.moe[1].dtype, "fp8_e4m3");
}

TEST(ImportAiconfigurator, MoeFallsBackToPowerLaw101) {
  TempDir tmp;
  AiconfiguratorImportOptions one;
  one.all_moe_distributions = false;
  Profile p = import_aiconfigurator(write_system(tmp, false), one).at(0);
  ASSERT_EQ(p.moe.size(), 1u);
  EXPECT_EQ(p.moe[0].distribution, "power_law_1.01");
  EXPECT_NE(p.meta.skipped.at("moe").find("1 rows with distribution power_law_1.2 dropped"),
            std::string::npos);
}

// TensorRT-LLM's tables: their own engine's profile, its default MoE backend where it timed the
// dtype, no non-gated kernels, no empty GEMMs.
TEST(ImportAiconfigurator, TrtllmTablesServeTheirEngineWithItsDefaultMoeBackend) {
  TempDir tmp;
  const std::string d = "TRTLLM,1.2.0rc5,NVIDIA H100 80GB HBM3";
  const std::string v = "aic/h100_sxm/trtllm_1.2.0rc5/";
  tmp.write(v + "gemm_perf.csv",
            "framework,version,device,op_name,kernel_source,gemm_dtype,m,n,k,latency\n" + d +
                ",gemm,torch_flow,fp8,0,4096,4096,0.0005\n" + d +
                ",gemm,torch_flow,fp8,8,4096,4096,0.02\n");
  const std::string row = ",16,4096,1536,8,128,1,1,balanced,";
  tmp.write(v + "moe_perf.csv",
            "framework,version,device,op_name,kernel_source,moe_dtype,num_tokens,hidden_size,"
            "inter_size,topk,num_experts,moe_tp_size,moe_ep_size,distribution,latency\n" +
                d + ",moe,moe_torch_flow_cutlass,nvfp4" + row + "0.05\n" + d +
                ",moe,moe_torch_flow_min_latency,nvfp4" + row + "0.02\n" + d +
                ",moe,moe_torch_flow_nongated,nvfp4" + row + "0.04\n" + d +
                ",moe,deepgemm,fp8_block" + row + "0.07\n");
  const Profile p = import_aiconfigurator(tmp.path("aic/h100_sxm")).at(0);
  EXPECT_EQ(p.dir, "h100_sxm/aiconfigurator_trtllm");
  EXPECT_EQ(p.meta.fields.at("engine"), "trtllm");
  EXPECT_EQ(p.meta.fields.at("framework"), "TensorRT-LLM");
  EXPECT_NE(p.meta.fields.at("method").find("each TensorRT-LLM operator"), std::string::npos);
  ASSERT_EQ(p.gemm.size(), 1u);
  EXPECT_EQ(p.gemm[0].m, 8);
  EXPECT_NE(p.meta.skipped.at("gemm").find("1 rows with m 0 dropped"), std::string::npos)
      << p.meta.skipped.at("gemm");
  ASSERT_EQ(p.moe.size(), 2u);  // cutlass nvfp4 (0.05 ms), and deepgemm, the only fp8_block one
  EXPECT_EQ(p.moe[0].dtype, "nvfp4");
  EXPECT_DOUBLE_EQ(p.moe[0].latency_us, 50.0);
  EXPECT_EQ(p.moe[1].dtype, "fp8_block");
  EXPECT_DOUBLE_EQ(p.moe[1].latency_us, 70.0);
  const std::string& moe = p.meta.skipped.at("moe");
  EXPECT_NE(moe.find("kernel_source moe_torch_flow_min_latency"), std::string::npos) << moe;
  EXPECT_NE(moe.find("kernel_source moe_torch_flow_nongated"), std::string::npos) << moe;

  // vLLM's tables stay generic: no engine.
  EXPECT_EQ(import_aiconfigurator(write_system(tmp)).at(0).meta.fields.count("engine"), 0u);
  // Two frameworks in one system directory: which one is meant is not said.
  tmp.write("aic/h100_sxm/vllm_0.14.0/gemm_perf.csv",
            "framework,version,device,op_name,kernel_source,gemm_dtype,m,n,k,latency\n");
  EXPECT_THROW(import_aiconfigurator(tmp.path("aic/h100_sxm")), InputError);
}

TEST(ImportAiconfigurator, DirectoryOfSystemsGivesOneProfileEach) {
  TempDir tmp;
  write_system(tmp);
  std::vector<Profile> ps = import_aiconfigurator(tmp.path("aic"));
  ASSERT_EQ(ps.size(), 1u);
  EXPECT_EQ(ps[0].meta.gpu, "a100_80gb_sxm");
  EXPECT_THROW(import_aiconfigurator(tmp.path("aic/a100_sxm/vllm_0.14.0")), InputError);
}

TEST(ImportAiconfigurator, MalformedNumberNamesFileAndLine) {
  TempDir tmp;
  std::string dir = write_system(tmp);
  std::string path =
      tmp.write("aic/a100_sxm/vllm_0.14.0/gemm_perf.csv",
                "framework,version,device,op_name,kernel_source,gemm_dtype,m,n,k,latency\n" +
                    std::string(kDevice) + ",gemm,vllm_default,bfloat16,4,4096,4096,0.01\n" +
                    kDevice + ",gemm,vllm_default,bfloat16,4.5,4096,4096,0.01\n");
  try {
    import_aiconfigurator(dir);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), path);
    EXPECT_EQ(e.line(), 3);
    EXPECT_EQ(e.message(), "column m: expected an integer >= 1, found \"4.5\"");
  }
}

// The columns an error lists as required are enough: the device column is one of them.
TEST(ImportAiconfigurator, RequiredColumnsIncludeTheDevice) {
  TempDir tmp;
  std::string dir = write_system(tmp);
  std::string path = tmp.write("aic/a100_sxm/vllm_0.14.0/gemm_perf.csv",
                               "gemm_dtype,m,n,k,latency\nbfloat16,4,4096,4096,0.01\n");
  try {
    import_aiconfigurator(dir);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), path);
    EXPECT_EQ(e.message().rfind("missing column \"device\": expected columns "
                                "device,gemm_dtype,m,n,k,latency",
                                0),
              0u)
        << e.message();
  }
}

}  // namespace
}  // namespace servesim::profiles
