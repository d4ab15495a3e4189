// Helpers shared by the profiles unit tests.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "profiles/profile_tables.h"

namespace servesim::profiles::testing {

// A fresh directory per test (removed afterwards) for small input files.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           (std::string("servesim_profiles_") + info->test_suite_name() + "_" + info->name() + "_" +
            std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Path of `name` inside the directory.
  std::string path(const std::string& name = "") const {
    return name.empty() ? dir_.string() : (dir_ / name).string();
  }
  // Writes `text` to `name` (creating parent directories); returns its path.
  std::string write(const std::string& name, const std::string& text) const {
    std::filesystem::path p = dir_ / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << text;
    return p.string();
  }

 private:
  std::filesystem::path dir_;
};

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A small in-memory profile with a row in every table.
inline Profile sample_profile() {
  Profile p;
  p.meta.gpu = "h100_sxm";
  p.meta.gpu_name = "NVIDIA H100 80GB HBM3";
  p.meta.source = "servesim-profile";
  p.meta.model = "llama-3.1-8b";
  p.meta.tp = 2;
  p.meta.l2_bytes = 52428800;
  p.meta.date = "2025-01-31T12:00:00Z";
  p.meta.license = "test";
  p.meta.fields["method"] = "median of 20";
  p.meta.fields["sm_count"] = "132";
  p.meta.fields["upstream"] = "none";
  p.meta.skipped["collective"] = "only 1 GPU";
  p.gemm = {{"bf16", 1, 6144, 4096, 12.346}, {"fp8_e4m3", 16, 6144, 4096, 9.0}};
  AttentionPrefillRow pre;
  pre.dtype = "bf16";
  pre.kv_dtype = "fp8_e4m3";
  pre.batch = 2;
  pre.q_tokens = 1024;
  pre.prefix_tokens = 4096;
  pre.num_heads = 32;
  pre.num_kv_heads = 8;
  pre.head_dim = 128;
  pre.causal = false;
  pre.latency_us = 150.5;
  p.attention_prefill = {pre};
  AttentionDecodeRow dec;
  dec.dtype = "bf16";
  dec.kv_dtype = "bf16";
  dec.batch = 64;
  dec.context_tokens = 8192;
  dec.num_heads = 32;
  dec.num_kv_heads = 8;
  dec.head_dim = 128;
  dec.latency_us = 1234.568;
  p.attention_decode = {dec};
  CollectiveRow coll;
  coll.op = "all_reduce";
  coll.dtype = "bf16";
  coll.num_gpus = 16;
  coll.message_bytes = 1048576;
  coll.nodes = 2;
  coll.latency_us = 25.25;
  p.collective = {coll};
  MoeRow moe;
  moe.dtype = "fp8_block";
  moe.num_tokens = 128;
  moe.hidden_size = 7168;
  moe.inter_size = 2048;
  moe.topk = 8;
  moe.num_experts = 256;
  moe.moe_tp = 1;
  moe.moe_ep = 8;
  moe.distribution = "balanced";
  moe.latency_us = 321.5;
  p.moe = {moe};
  p.elementwise = {{"llama-2-7b", "attn_rope", 4096, 2, 83.5}};
  p.memcpy = {{"d2d", 4096, 2.0}};
  p.forward = {{"decode", 64, 1, 2048, true, 9123.25}};
  return p;
}

}  // namespace servesim::profiles::testing
