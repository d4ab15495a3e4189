// Importer of the Vidur data set on small synthetic inputs.
#include "profiles/import_vidur.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "tests/unit/profiles/profile_test_util.h"

namespace servesim::profiles {
namespace {

using testing::TempDir;

TEST(VidurShapes, GatedGqaModelAtTp4) {
  // Llama-2-70B: 64 heads, 8 KV heads, hidden 8192, intermediate 28672; head_dim 128.
  std::vector<VidurGemmShape> s = vidur_gemm_shapes({64, 8, 8192, 28672, true, 4});
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].op, "attn_pre_proj");
  EXPECT_EQ(s[0].n, (64 + 2 * 8) * 128 / 4);
  EXPECT_EQ(s[0].k, 8192);
  EXPECT_EQ(s[1].op, "attn_post_proj");
  EXPECT_EQ(s[1].n, 8192);
  EXPECT_EQ(s[1].k, 64 * 128 / 4);
  EXPECT_EQ(s[2].op, "mlp_up_proj");
  EXPECT_EQ(s[2].n, 2 * 28672 / 4);
  EXPECT_EQ(s[2].k, 8192);
  EXPECT_EQ(s[3].op, "mlp_down_proj");
  EXPECT_EQ(s[3].n, 8192);
  EXPECT_EQ(s[3].k, 28672 / 4);
}

TEST(VidurShapes, UngatedMlpAndNonPowerOfTwoHeadDim) {
  // phi-2: 32 heads of 80, hidden 2560, intermediate 10240, no gate.
  std::vector<VidurGemmShape> s = vidur_gemm_shapes({32, 32, 2560, 10240, false, 1});
  EXPECT_EQ(s[0].n, 3 * 2560);
  EXPECT_EQ(s[1].k, 2560);
  EXPECT_EQ(s[2].n, 10240);
  EXPECT_EQ(s[3].k, 10240);
}

TEST(VidurShapes, TpMustDivideTheHeads) {
  EXPECT_THROW(vidur_gemm_shapes({64, 8, 8192, 28672, true, 16}, "mlp.csv", 7), InputError);
  EXPECT_THROW(vidur_gemm_shapes({48, 48, 1000, 4096, true, 1}), InputError);
}

TEST(VidurNames, ModelAndGpuKeys) {
  EXPECT_EQ(vidur_model_key("meta-llama/Llama-2-7b-hf"), "llama-2-7b");
  EXPECT_EQ(vidur_model_key("meta-llama/Llama-2-70b-hf"), "llama-2-70b");
  EXPECT_EQ(vidur_model_key("meta-llama/Meta-Llama-3-8B"), "llama-3-8b");
  EXPECT_EQ(vidur_model_key("Qwen/Qwen-72B"), "Qwen/Qwen-72B");
  EXPECT_EQ(vidur_gpu_key("a100"), "a100_80gb_sxm");
  EXPECT_EQ(vidur_gpu_key("h100"), "h100_sxm");
  EXPECT_EQ(vidur_gpu_key("a40"), "a40");
}

// mlp.csv text: one row per (tokens, tp, ms) with every op at `ms` except pre_proj at 2 ms.
std::string mlp_csv(int heads, int kv_heads, int hidden, int inter,
                    const std::vector<std::tuple<int, int, double>>& rows) {
  std::string text =
      "time_stats.emb.median,time_stats.input_layernorm.median,time_stats.attn_pre_proj.min,"
      "time_stats.attn_pre_proj.median,time_stats.attn_rope.median,"
      "time_stats.attn_post_proj.median,time_stats.post_attention_layernorm.median,"
      "time_stats.mlp_up_proj.median,time_stats.mlp_act.median,time_stats.mlp_down_proj.median,"
      "time_stats.add.median,n_head,n_kv_head,n_embd,n_expanded_embd,vocab_size,use_gated_mlp,"
      "num_tokens,num_tensor_parallel_workers\n";
  for (const auto& [tokens, tp, ms] : rows) {
    std::string v = std::to_string(ms);
    text += v + "," + v + ",0.001,2.0," + v + "," + v + "," + v + "," + v + "," + v + "," + v +
            "," + v + "," + std::to_string(heads) + "," + std::to_string(kv_heads) + "," +
            std::to_string(hidden) + "," + std::to_string(inter) + ",32768,True," +
            std::to_string(tokens) + "," + std::to_string(tp) + "\n";
  }
  return text;
}

std::string write_vidur(const TempDir& tmp) {
  // Llama-2-7B at tp 1 and 2, 16 tokens; the 16-token tp-1 row twice (median of 0.010 and 0.030).
  tmp.write("vidur/compute/a100/meta-llama/Llama-2-7b-hf/mlp.csv",
            mlp_csv(32, 32, 4096, 11008, {{16, 1, 0.010}, {16, 2, 0.005}, {16, 1, 0.030}}));
  // A model sorted before meta-llama with the same attention shapes (O GEMM 4096 x 4096 at tp 1).
  tmp.write("vidur/compute/a100/aaa/Same-Attn/mlp.csv",
            mlp_csv(32, 32, 4096, 8192, {{16, 1, 0.100}}));
  std::string net_header =
      ",time_stats.all_reduce.min,time_stats.all_reduce.median,rank,num_workers,size,collective,"
      "devices_per_node,max_devices_per_node\n";
  tmp.write("vidur/network/a100_dgx/all_reduce.csv",
            net_header +
                "0,0.01,0.043,0,2,2048,all_reduce,1,8\n"
                "1,0.01,0.020,0,8,1048576,all_reduce,8,8\n"
                "2,0.01,0.030,0,16,1048576,all_reduce,8,8\n");
  tmp.write("vidur/network/a100_dgx/send_recv.csv",
            ",time_stats.send_recv.median,rank,num_workers,size,collective,devices_per_node,"
            "max_devices_per_node\n0,0.017,0,2,10240,send_recv,1,8\n");
  tmp.write("vidur/network/a100_pairwise_nvlink/all_reduce.csv",
            net_header + "0,0.01,0.007,0,2,2048,all_reduce,2,4\n");
  return tmp.path("vidur");
}

TEST(ImportVidur, ProfilesPerGpuAndTopology) {
  TempDir tmp;
  std::vector<Profile> ps = import_vidur(write_vidur(tmp));
  ASSERT_EQ(ps.size(), 2u);
  EXPECT_EQ(ps[0].dir, "a100_80gb_sxm/vidur");
  EXPECT_EQ(ps[0].meta.source, "vidur");
  EXPECT_EQ(ps[0].meta.license, "MIT (microsoft/vidur)");
  EXPECT_EQ(ps[0].meta.fields.at("topology"), "a100_dgx");
  EXPECT_EQ(ps[1].dir, "a100_80gb_sxm/vidur_pairwise_nvlink");
  EXPECT_EQ(ps[1].meta.fields.at("topology"), "a100_pairwise_nvlink");
  EXPECT_TRUE(ps[1].gemm.empty());
  ASSERT_EQ(ps[1].collective.size(), 1u);
  EXPECT_EQ(row_key(ps[1].collective[0]), "all_reduce,fp16,2,2048,1");
  EXPECT_DOUBLE_EQ(ps[1].collective[0].latency_us, 7.0);
}

TEST(ImportVidur, GemmRowsFromTheLinearLayers) {
  TempDir tmp;
  Profile p = import_vidur(write_vidur(tmp)).at(0);
  auto find = [&p](const std::string& key) -> const GemmRow* {
    for (const GemmRow& r : p.gemm) {
      if (row_key(r) == key) {
        return &r;
      }
    }
    return nullptr;
  };
  // Same-Attn (sorted first) owns the shared shapes: its QKV and O rows are kept.
  const GemmRow* qkv = find("fp16,16,12288,4096");
  ASSERT_NE(qkv, nullptr);
  EXPECT_DOUBLE_EQ(qkv->latency_us, 2000.0);  // the median column, ms -> us
  const GemmRow* o = find("fp16,16,4096,4096");
  ASSERT_NE(o, nullptr);
  EXPECT_DOUBLE_EQ(o->latency_us, 100.0);
  // Llama-2-7B's own MLP shapes; the repeated 16-token tp-1 row is merged (median 20 us).
  const GemmRow* up = find("fp16,16,22016,4096");
  ASSERT_NE(up, nullptr);
  EXPECT_DOUBLE_EQ(up->latency_us, 20.0);
  EXPECT_NE(find("fp16,16,4096,11008"), nullptr);
  // tp 2 shards.
  EXPECT_NE(find("fp16,16,6144,4096"), nullptr);
  EXPECT_NE(find("fp16,16,4096,2048"), nullptr);
  EXPECT_NE(find("fp16,16,11008,4096"), nullptr);
  EXPECT_NE(find("fp16,16,4096,5504"), nullptr);
  // Same-Attn: 4 rows; Llama-2-7B: 8 shapes, of which QKV and O at tp 1 were already there.
  EXPECT_EQ(p.gemm.size(), 4u + 6u);
  EXPECT_NE(p.meta.skipped.at("gemm").find("2 rows whose (m, n, k) an earlier model"),
            std::string::npos)
      << p.meta.skipped.at("gemm");
}

TEST(ImportVidur, ElementwiseRowsKeyedByCatalogModel) {
  TempDir tmp;
  Profile p = import_vidur(write_vidur(tmp)).at(0);
  // 6 ops x (1 row of Same-Attn + 2 distinct rows of Llama-2-7B).
  EXPECT_EQ(p.elementwise.size(), 18u);
  bool found = false;
  for (const ElementwiseRow& r : p.elementwise) {
    if (r.model == "llama-2-7b" && r.op == "attn_rope" && r.tp == 1) {
      EXPECT_EQ(r.num_tokens, 16);
      EXPECT_DOUBLE_EQ(r.latency_us, 20.0);
      found = true;
    }
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(p.elementwise[0].model, "aaa/Same-Attn");
}

TEST(ImportVidur, CollectivesInBytesWithNodes) {
  TempDir tmp;
  Profile p = import_vidur(write_vidur(tmp)).at(0);
  ASSERT_EQ(p.collective.size(), 4u);
  EXPECT_EQ(row_key(p.collective[0]), "all_reduce,fp16,2,2048,2");  // 2 workers, 1 per node
  EXPECT_DOUBLE_EQ(p.collective[0].latency_us, 43.0);
  EXPECT_EQ(row_key(p.collective[1]), "all_reduce,fp16,8,1048576,1");
  EXPECT_EQ(row_key(p.collective[2]), "all_reduce,fp16,16,1048576,2");
  EXPECT_EQ(row_key(p.collective[3]), "send_recv,fp16,2,10240,2");
  EXPECT_DOUBLE_EQ(p.collective[3].latency_us, 17.0);
}

TEST(ImportVidur, WrittenProfilesLoadBack) {
  TempDir tmp;
  for (const Profile& p : import_vidur(write_vidur(tmp))) {
    write_profile(p, tmp.path("out/" + p.dir));
    Profile back = load_profile(tmp.path("out/" + p.dir));
    EXPECT_EQ(to_csv(back.gemm), to_csv(p.gemm));
    EXPECT_EQ(to_csv(back.collective), to_csv(p.collective));
    EXPECT_EQ(to_csv(back.elementwise), to_csv(p.elementwise));
  }
}

TEST(ImportVidur, NotAVidurDirectory) {
  TempDir tmp;
  EXPECT_THROW(import_vidur(tmp.path()), InputError);
}

}  // namespace
}  // namespace servesim::profiles
