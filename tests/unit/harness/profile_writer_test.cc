#include "profile_writer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace servesim::profiling {
namespace {

DeviceInfo fixed_device() {
  DeviceInfo d;
  d.gpu_name = "NVIDIA H100 80GB HBM3";
  d.compute_capability = "9.0";
  d.sm_count = 132;
  d.sm_clock_mhz = 1980;
  d.mem_clock_mhz = 2619;
  d.l2_bytes = 52428800;
  d.memory_bytes = 85520809984;
  d.driver = "580.159.04";
  d.cuda_runtime = "13.0";
  d.cublas = "13.1.0";
  d.cudnn = "9.19.0";
  d.nccl = "2.28.5";
  return d;
}

ProfileResults fixed_results() {
  ProfileResults r;
  r.model_key = "llama-3.1-8b";
  r.tp = 1;
  r.date = "2025-01-31T12:00:00Z";
  r.method = "median of 20";
  r.gemm = {{{"qkv", "bf16", 1, 6144, 4096}, 12.3456}, {{"qkv", "fp8_e4m3", 16, 6144, 4096}, 9.0}};
  r.prefill = {{{"bf16", 2, 1024, 4096, 32, 8, 128, true}, 150.5}};
  r.decode = {{{"bf16", "bf16", 64, 8192, 32, 8, 128}, 1234.5678}};
  r.memcpy = {{{"d2d", 4096}, 2.0}};
  r.forward = {{{"prefill", 1, 8192, 8192, false}, 251234.5678},
               {{"decode", 64, 1, 2048, false}, 9876.5},
               {{"decode", 64, 1, 2048, true}, 9123.25}};
  r.skipped = {{"collective", "only 1 GPU is visible; NCCL collectives need 2 or more"}};
  return r;
}

TEST(GpuCatalogKey, KnownDevices) {
  EXPECT_EQ(gpu_catalog_key("NVIDIA H100 80GB HBM3"), "h100_sxm");
  EXPECT_EQ(gpu_catalog_key("NVIDIA H100 SXM5 80GB"), "h100_sxm");
  EXPECT_EQ(gpu_catalog_key("NVIDIA H100 PCIe"), "h100_pcie");
  EXPECT_EQ(gpu_catalog_key("NVIDIA H200"), "h200_sxm");
  EXPECT_EQ(gpu_catalog_key("NVIDIA A100-SXM4-80GB"), "a100_80gb_sxm");
  EXPECT_EQ(gpu_catalog_key("NVIDIA A100-SXM4-40GB"), "a100_40gb_sxm");
  EXPECT_EQ(gpu_catalog_key("NVIDIA L40S"), "l40s");
  EXPECT_EQ(gpu_catalog_key("NVIDIA GeForce RTX 4090"), "rtx4090");
  EXPECT_EQ(gpu_catalog_key("NVIDIA B200"), "b200_sxm");
}

TEST(GpuCatalogKey, UnknownDevicesAreSanitized) {
  EXPECT_EQ(gpu_catalog_key("NVIDIA RTX A6000"), "rtx_a6000");
  EXPECT_EQ(gpu_catalog_key("Tesla V100-SXM2-16GB"), "tesla_v100_sxm2_16gb");
  EXPECT_EQ(gpu_catalog_key("  "), "unknown_gpu");
}

TEST(ProfileWriter, GoldenCsv) {
  ProfileResults r = fixed_results();
  EXPECT_EQ(gemm_csv(r.gemm),
            "dtype,m,n,k,latency_us\n"
            "bf16,1,6144,4096,12.346\n"
            "fp8_e4m3,16,6144,4096,9.000\n");
  EXPECT_EQ(prefill_csv(r.prefill),
            "dtype,batch,q_tokens,prefix_tokens,num_heads,num_kv_heads,head_dim,causal,"
            "latency_us\n"
            "bf16,2,1024,4096,32,8,128,1,150.500\n");
  EXPECT_EQ(decode_csv(r.decode),
            "dtype,kv_dtype,batch,context_tokens,num_heads,num_kv_heads,head_dim,latency_us\n"
            "bf16,bf16,64,8192,32,8,128,1234.568\n");
  EXPECT_EQ(collective_csv({{{"all_reduce", "bf16", 8, 1048576}, 25.25}}),
            "op,dtype,num_gpus,message_bytes,latency_us\n"
            "all_reduce,bf16,8,1048576,25.250\n");
  EXPECT_EQ(memcpy_csv(r.memcpy), "kind,bytes,latency_us\nd2d,4096,2.000\n");
  EXPECT_EQ(memcpy_csv({}), "kind,bytes,latency_us\n");
  EXPECT_EQ(forward_csv(r.forward),
            "kind,batch,q_tokens,context_tokens,graph,latency_us\n"
            "prefill,1,8192,8192,0,251234.568\n"
            "decode,64,1,2048,0,9876.500\n"
            "decode,64,1,2048,1,9123.250\n");
}

TEST(ProfileWriter, DefaultDirectoryFollowsTheProfileConvention) {
  ProfileResults r = fixed_results();
  EXPECT_EQ(default_profile_dir(fixed_device(), r),
            "profiles/h100_sxm/servesim_harness_llama-3.1-8b");
  r.tp = 4;
  EXPECT_EQ(default_profile_dir(fixed_device(), r),
            "profiles/h100_sxm/servesim_harness_llama-3.1-8b_tp4");
}

TEST(ProfileWriter, GoldenMetaJson) {
  EXPECT_EQ(meta_json(fixed_device(), fixed_results()),
            R"({
  "format": "servesim-profile",
  "version": 1,
  "gpu": "h100_sxm",
  "gpu_name": "NVIDIA H100 80GB HBM3",
  "compute_capability": "9.0",
  "sm_count": 132,
  "sm_clock_mhz": 1980,
  "mem_clock_mhz": 2619,
  "l2_bytes": 52428800,
  "memory_bytes": 85520809984,
  "driver": "580.159.04",
  "cuda_runtime": "13.0",
  "cublas": "13.1.0",
  "cudnn": "9.19.0",
  "nccl": "2.28.5",
  "harness_version": "1.0.0",
  "date": "2025-01-31T12:00:00Z",
  "source": "servesim-profile",
  "method": "median of 20",
  "model": "llama-3.1-8b",
  "tp": 1,
  "license": "measured by the servesim project; same license as the repository",
  "standalone_kernels": "quantized_gemm,attention",
  "tables": {
    "attention_decode": "attention_decode.csv",
    "attention_prefill": "attention_prefill.csv",
    "forward": "forward.csv",
    "gemm": "gemm.csv",
    "memcpy": "memcpy.csv"
  },
  "skipped": {
    "collective": "only 1 GPU is visible; NCCL collectives need 2 or more"
  }
}
)");
}

TEST(ProfileWriter, WritesDirectory) {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / "servesim_harness_writer_test";
  std::filesystem::remove_all(dir);
  write_profile_dir(dir.string(), fixed_device(), fixed_results());
  for (const char* f : {"meta.json", "gemm.csv", "attention_prefill.csv", "attention_decode.csv",
                        "memcpy.csv", "forward.csv"}) {
    EXPECT_TRUE(std::filesystem::exists(dir / f)) << f;
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "collective.csv"));
  std::ifstream in(dir / "gemm.csv");
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), gemm_csv(fixed_results().gemm));
  std::filesystem::remove_all(dir);
}

TEST(ProfileWriter, DateIsIso8601Utc) {
  std::string d = utc_now_iso8601();
  ASSERT_EQ(d.size(), 20u);
  EXPECT_EQ(d[4], '-');
  EXPECT_EQ(d[10], 'T');
  EXPECT_EQ(d.back(), 'Z');
}

}  // namespace
}  // namespace servesim::profiling
