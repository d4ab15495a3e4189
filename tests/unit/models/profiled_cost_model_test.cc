#include "models/cost/profiled_cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "models/cost/cost_model.h"
#include "models/catalog/hardware.h"
#include "models/cost/profile_interpolation.h"
#include "models/cost/roofline_terms.h"
#include "profiles/profile_tables.h"
#include "core/error.h"
#include "core/time.h"
#include "tests/unit/models/catalog_fixture.h"

namespace servesim::models {
namespace {

class ProfiledTest : public CatalogFixture {
 protected:
  static Deployment deployment(const std::string& model, const std::string& gpu, int tp,
                               Dtype weights = Dtype::kBf16, Dtype kv = Dtype::kBf16) {
    return {&models_->get(model), &gpus_->get(gpu), tp, weights, kv};
  }

  static bool have_real_tables() {
    return std::filesystem::exists("profiles/h100_sxm/aiconfigurator_vllm/meta.json") &&
           std::filesystem::exists("profiles/l40s/aiconfigurator_vllm/meta.json");
  }

  static BatchShape decodes(int64_t batch, int64_t context) {
    BatchShape shape;
    for (int64_t i = 0; i < batch; ++i) {
      shape.segments.push_back({1, context, 1});
    }
    return shape;
  }

  static BatchShape prefill(int64_t tokens, int64_t prefix = 0) {
    BatchShape shape;
    shape.segments.push_back({tokens, tokens + prefix, 1});
    return shape;
  }

  static double seconds(Duration d) { return to_seconds(d); }

  // Where a profiled model's MoE layer time comes from (its "moe_mlp:" source line).
  static std::string moe_source(const IterationCostModel& m) {
    for (const std::string& s : dynamic_cast<const ProfiledCostModel&>(m).diagnostics().sources) {
      if (s.rfind("moe_mlp:", 0) == 0) return s;
    }
    return std::string();
  }
};

// A synthetic GEMM profile of `gpu`: bf16 rows for the Llama-3.1-8B tp1 shapes on m = 1..max_m,
// 5 us plus the longer of the operands' read at `bytes_per_s` and the FLOPs at `flops_per_s`.
profiles::Profile synthetic_gemm(const std::string& gpu, double bytes_per_s, double flops_per_s,
                                 int64_t max_m) {
  profiles::Profile p;
  p.meta.gpu = gpu;
  p.meta.source = "test";
  p.meta.model = "generic";
  for (auto [n, k] : std::vector<std::pair<int64_t, int64_t>>{
           {6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}, {128256, 4096}}) {
    for (int64_t m = 1; m <= max_m; m *= 2) {
      const double md = static_cast<double>(m), nd = static_cast<double>(n),
                   kd = static_cast<double>(k);
      const double t = 5e-6 + std::max((nd * kd * 2 + 2 * md * (nd + kd)) / bytes_per_s,
                                       2 * md * nd * kd / flops_per_s);
      p.gemm.push_back({"bf16", m, n, k, t * 1e6});
    }
  }
  return p;
}

// A small synthetic H100 profile: GEMM rows for the Llama-3.1-8B tp1 shapes on m = 1..4096.
profiles::Profile synthetic_h100_gemm() { return synthetic_gemm("h100_sxm", 2.8e12, 700e12, 4096); }

TEST_F(ProfiledTest, IterationTimeIsTheBreakdownTotalAndAtLeastThePeakBound) {
  if (!have_real_tables()) {
    GTEST_SKIP() << "real tables not found";
  }
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> ctx(1, 20000), q(2, 3000), n(1, 64);
  struct Case {
    const char* model;
    const char* gpu;
    int tp;
    Dtype w, kv;
  };
  for (const Case& c : {Case{"llama-3.1-8b", "h100_sxm", 1, Dtype::kBf16, Dtype::kBf16},
                        Case{"llama-3.1-70b", "h100_sxm", 4, Dtype::kFp8, Dtype::kFp8},
                        Case{"mixtral-8x7b", "b200_sxm", 2, Dtype::kBf16, Dtype::kBf16},
                        Case{"qwen2.5-14b-instruct", "l40s", 2, Dtype::kBf16, Dtype::kFp8},
                        Case{"llama-2-70b", "a100_80gb_sxm", 2, Dtype::kBf16, Dtype::kBf16}}) {
    const Deployment d = deployment(c.model, c.gpu, c.tp, c.w, c.kv);
    const auto m = make_profiled_cost_model(d, profiles::load_gpu_profiles("profiles", c.gpu), {});
    for (int trial = 0; trial < 200; ++trial) {
      BatchShape shape;
      const int segments = n(rng);
      for (int s = 0; s < segments; ++s) {
        const int64_t k = ctx(rng);
        const int64_t qq = s % 7 == 0 ? std::min<int64_t>(q(rng), k) : 1;
        shape.segments.push_back({qq, k, s % 3 == 0 ? 0 : 1});
      }
      const Duration t = m->iteration_time(shape);
      EXPECT_EQ(t, m->breakdown(shape).total());
      EXPECT_GE(t, m->peak_bound_time(shape)) << c.model << " on " << c.gpu;
      EXPECT_EQ(t, m->iteration_time(shape));  // memoised and deterministic
    }
  }
}

// A MoE model on a GPU without tables (GB200, fitted on the B200's) runs its routed experts as one
// grouped kernel per layer: the fitted fixed latency is charged once, not once per expert, so a
// decode step stays within a factor of two of the B200's measured-table prediction.
TEST_F(ProfiledTest, MoeExpertsOnADonorGpuPayOneLaunchPerLayer) {
  if (!have_real_tables()) {
    GTEST_SKIP() << "real tables not found";
  }
  const auto decode_step = [&](const std::string& gpu) {
    const auto m = load_profiled_cost_model(
        deployment("kimi-k2-instruct", gpu, 8, Dtype::kFp8Block, Dtype::kFp8), *gpus_, "profiles");
    return seconds(m->iteration_time(decodes(16, 2000)));
  };
  const double donor = decode_step("gb200_nvl72");  // no tables: fitted on b200_sxm's
  const double measured = decode_step("b200_sxm");
  EXPECT_LT(donor, 2 * measured) << donor << " vs " << measured;
  EXPECT_GT(donor, 0.5 * measured) << donor << " vs " << measured;
}

// Experts priced from a measured GEMM table (no MoE table for the shape) run as one grouped kernel
// per layer: the table's fitted fixed latency is charged once, not once per touched expert (which
// put gpt-oss-120b's 36 MoE layers x ~80 experts of a 32-token decode at 40 ms on a B200).
TEST_F(ProfiledTest, MoeExpertsFromAGemmTablePayOneLaunchPerLayer) {
  if (!have_real_tables()) {
    GTEST_SKIP() << "real tables not found";
  }
  const auto m = load_profiled_cost_model(
      deployment("gpt-oss-120b", "b200_sxm", 4, Dtype::kNvfp4, Dtype::kFp8), *gpus_, "profiles");
  const BatchShape step = decodes(32, 5000);
  const double mlp = seconds(m->breakdown(step).mlp_gemm);
  const double bound = seconds(m->peak_bound_time(step));
  EXPECT_LT(mlp, 3 * bound) << mlp << " s of MoE against a " << bound << " s peak bound";
}

// mxfp4 weights (gpt-oss's checkpoint) price the experts from the W4A16 MXFP4 MoE table where a
// GPU has one for the shape (B200, moe_tp 1), exactly as measured at a table point; elsewhere
// (H200) from the GEMM tables transferred to 16-bit math, counted as extrapolated.
TEST_F(ProfiledTest, Mxfp4ExpertsUseTheirMoeTableWhereMeasured) {
  if (!have_real_tables()) {
    GTEST_SKIP() << "real tables not found";
  }
  const auto b200 = load_profiled_cost_model(
      deployment("gpt-oss-120b", "b200_sxm", 1, Dtype::kMxfp4), *gpus_, "profiles");
  EXPECT_NE(moe_source(*b200).find("moe mxfp4/2880/2880/4/128/1/1/balanced"), std::string::npos)
      << moe_source(*b200);
  const auto h200 = load_profiled_cost_model(
      deployment("gpt-oss-120b", "h200_sxm", 1, Dtype::kMxfp4), *gpus_, "profiles");
  // No mxfp4 MoE rows on the H200: the GEMM estimate scaled by the W4A16 (int4_wo) MoE kernels'
  // measured efficiency on the other shapes.
  EXPECT_NE(moe_source(*h200).find("scaled by the fused MoE kernels' time over that estimate on "
                                   "10 measured int4_wo shapes from profiles/h200_sxm"),
            std::string::npos)
      << moe_source(*h200);
  // 128 decode steps route 512 rows over 128 experts: one table row of 128 tokens (balanced rows
  // spread them over min(128, 512) experts, as many as random routing touches within 2 %).
  const BatchShape step = decodes(128, 1000);
  const double mlp = seconds(b200->breakdown(step).mlp_gemm);
  const double table_s = 1363.083e-6 * 36;  // moe.csv: mxfp4,128,...,balanced, 36 MoE layers
  EXPECT_GT(mlp, 0.98 * table_s);
  EXPECT_LT(mlp, 1.10 * table_s);  // plus the router GEMM
  h200->iteration_time(step);
  EXPECT_GT(h200->lookup_stats().extrapolated_s, 0);
}

// An engine's MoE kernel scale multiplies the routed experts' time, whether it comes from a MoE
// table (B200) or the grouped-GEMM estimate (H200), and nothing else: the MLP time is linear in
// it (scales >= 1 here, clear of the peak-rate clamp), every other operator and a dense model
// are untouched, the model's sources say so, and a scale <= 0 is refused.
TEST_F(ProfiledTest, MoeKernelScaleMultipliesTheRoutedExpertsAlone) {
  if (!have_real_tables()) {
    GTEST_SKIP() << "real tables not found";
  }
  const BatchShape step = decodes(128, 1000);
  for (const char* gpu : {"b200_sxm", "h200_sxm"}) {
    const Deployment d = deployment("gpt-oss-120b", gpu, 1, Dtype::kMxfp4);
    std::vector<OperatorTimes> t;
    for (double scale : {1.0, 1.5, 2.0}) {
      ProfiledParams p;
      p.moe_kernel_scale = scale;
      const auto m = load_profiled_cost_model(d, *gpus_, "profiles", p);
      t.push_back(m->breakdown(step));
      const auto& sources = dynamic_cast<const ProfiledCostModel&>(*m).diagnostics().sources;
      const bool said = std::any_of(sources.begin(), sources.end(), [](const std::string& s) {
        return s.find("routed experts x1.5 for the serving engine's MoE kernels") !=
               std::string::npos;
      });
      EXPECT_EQ(said, scale == 1.5) << gpu;
    }
    const double half_step = seconds(t[1].mlp_gemm) - seconds(t[0].mlp_gemm);
    EXPECT_GT(half_step, 0.3 * seconds(t[1].mlp_gemm)) << gpu;  // experts dominate the MLP
    EXPECT_NEAR(seconds(t[2].mlp_gemm) - seconds(t[1].mlp_gemm), half_step, 1e-3 * half_step)
        << gpu;
    EXPECT_EQ(t[0].qkv_gemm, t[2].qkv_gemm);
    EXPECT_EQ(t[0].attention_decode, t[2].attention_decode);
    EXPECT_EQ(t[0].allreduce, t[2].allreduce);
    EXPECT_EQ(t[0].lm_head, t[2].lm_head);
  }
  ProfiledParams twice;
  twice.moe_kernel_scale = 2;
  const Deployment dense = deployment("llama-3.1-8b", "h100_sxm", 1);
  EXPECT_EQ(load_profiled_cost_model(dense, *gpus_, "profiles", twice)->iteration_time(step),
            load_profiled_cost_model(dense, *gpus_, "profiles")->iteration_time(step));
  ProfiledParams zero;
  zero.moe_kernel_scale = 0;
  EXPECT_THROW(load_profiled_cost_model(dense, *gpus_, "profiles", zero), std::invalid_argument);
}

// Without MoE rows of the model's shape, the experts' grouped-GEMM estimate is scaled by the
// measured fused-MoE kernels of other shapes over the same estimate: rows twice as slow make the
// experts' time twice as long (the router GEMM aside), and with no MoE rows at all the estimate
// stands as it is.
TEST_F(ProfiledTest, MoeShapesWithoutRowsTakeTheMeasuredKernelsEfficiencyOfOtherShapes) {
  const auto with_rows = [&](double scale) {
    profiles::Profile p = synthetic_h100_gemm();
    for (int64_t t = 1; t <= 4096; t *= 2) {
      p.moe.push_back({"bf16", t, 2048, 768, 8, 128, 1, 1, "balanced",
                       scale * (100.0 + 15.0 * static_cast<double>(t))});
    }
    return make_profiled_cost_model(deployment("mixtral-8x7b", "h100_sxm", 4), {p}, {});
  };
  const auto none = make_profiled_cost_model(deployment("mixtral-8x7b", "h100_sxm", 4),
                                             {synthetic_h100_gemm()}, {});
  const auto once = with_rows(1.0);
  const auto twice = with_rows(2.0);
  EXPECT_EQ(moe_source(*none), "moe_mlp: expert GEMMs from the gemm table (no moe rows)");
  EXPECT_NE(moe_source(*once).find("on 1 measured bf16 shapes from test"), std::string::npos)
      << moe_source(*once);
  for (const BatchShape& pass : {decodes(8, 1000), prefill(2048)}) {
    const double c = seconds(none->breakdown(pass).mlp_gemm);
    const double a = seconds(once->breakdown(pass).mlp_gemm);
    const double b = seconds(twice->breakdown(pass).mlp_gemm);
    // mlp = router + factor x experts, the factor doubling from `once` to `twice`.
    const double router = 2 * a - b;
    const double experts = c - router;
    EXPECT_GE(router, 0);
    EXPECT_LT(router, 0.1 * c) << a << " " << b << " " << c;
    EXPECT_GT(experts, 0);
    EXPECT_NE(a, c);  // the measured kernels are not the estimate
  }
}

// A sliding-window layer runs the decode attention kernel over its window: gpt-oss-120b's 18
// windowed layers (128 tokens) are priced from the measured decode table at context 128, its 18
// full layers at the requests' context. H200, TP 4 (16 query and 2 KV heads of 64 per GPU), 4
// decodes: the table's rows are 6.560 us at 2,048 tokens and 3.627 us at 128.
TEST_F(ProfiledTest, SlidingWindowDecodeLayersArePricedByTheTableAtTheirWindow) {
  if (!std::filesystem::exists("profiles/h200_sxm/servesim_harness_gpt-oss-120b_tp4/meta.json")) {
    GTEST_SKIP() << "gpt-oss-120b H200 tables not found";
  }
  const Deployment d = deployment("gpt-oss-120b", "h200_sxm", 4, Dtype::kMxfp4);
  const auto m = load_profiled_cost_model(d, *gpus_, "profiles");
  EXPECT_NEAR(seconds(m->breakdown(decodes(4, 2048)).attention_decode) * 1e6,
              18 * 6.560 + 18 * 3.627, 0.02 * (18 * 6.560 + 18 * 3.627));
  // Within the window both kinds of layer attend to every token.
  EXPECT_NEAR(seconds(m->breakdown(decodes(4, 128)).attention_decode) * 1e6, 36 * 3.627,
              0.02 * 36 * 3.627);
}

// The deployment's expert routing picks the MoE table's rows: Qwen3-235B-A22B's catalog default
// (power_law_1.2) the rows measured under that skew, priced at the pass's own token count;
// random routing the balanced rows at the busiest rank's load. The skewed kernels are slower
// for a large prefill (the busiest rank holds more than its share) at the same tokens.
TEST_F(ProfiledTest, ExpertRoutingPicksTheMoeRowsMeasuredUnderIt) {
  if (!have_real_tables()) {
    GTEST_SKIP() << "real tables not found";
  }
  Deployment d = deployment("qwen3-235b-a22b", "h100_sxm", 8, Dtype::kFp8, Dtype::kFp8);
  d.ep = 8;
  const auto skewed = load_profiled_cost_model(d, *gpus_, "profiles");
  EXPECT_NE(moe_source(*skewed).find("/power_law_1.2 from"), std::string::npos)
      << moe_source(*skewed);
  d.expert_routing = parse_expert_routing("random");
  const auto random = load_profiled_cost_model(d, *gpus_, "profiles");
  EXPECT_NE(moe_source(*random).find("/balanced from"), std::string::npos)
      << moe_source(*random);
  const BatchShape big = prefill(8192);
  EXPECT_GT(seconds(skewed->breakdown(big).mlp_gemm), 1.05 * seconds(random->breakdown(big).mlp_gemm));
}

// Attention DP prices dispatch and combine from the GPU's measured NCCL all-to-all where it has
// rows for the instance's GPU count (2 to 8 GPUs of one node), else on the link model.
TEST_F(ProfiledTest, AttentionDpUsesTheMeasuredAllToAllWhereItHasTheGpuCount) {
  if (!have_real_tables()) {
    GTEST_SKIP() << "real tables not found";
  }
  Deployment d = deployment("gpt-oss-120b", "b200_sxm", 1, Dtype::kNvfp4, Dtype::kFp8);
  d.attention_dp = 4;
  d.ep = 4;
  const auto four = load_profiled_cost_model(d, *gpus_, "profiles");
  EXPECT_NE(four->describe().find("dispatch and combine from the measured NCCL all-to-all"),
            std::string::npos);
  d.attention_dp = 16;
  d.ep = 16;
  const auto sixteen = load_profiled_cost_model(d, *gpus_, "profiles");
  EXPECT_NE(sixteen->describe().find("dispatch and combine on the link model"), std::string::npos);
}

TEST_F(ProfiledTest, LlamaOnH100UsesItsOwnHarnessTables) {
  if (!have_real_tables()) {
    GTEST_SKIP() << "real tables not found";
  }
  const auto m = make_profiled_cost_model(deployment("llama-3.1-8b", "h100_sxm", 1),
                                          profiles::load_gpu_profiles("profiles", "h100_sxm"), {});
  const auto& pm = dynamic_cast<const ProfiledCostModel&>(*m);
  ASSERT_FALSE(pm.diagnostics().sources.empty());
  EXPECT_NE(pm.diagnostics().sources[0].find("servesim_harness_llama-3.1-8b"), std::string::npos);
  EXPECT_NE(pm.describe().find("profiled llama-3.1-8b on h100_sxm tp1"), std::string::npos);
  // Its attention is the engine-measured (vLLM) one, not the harness's cuDNN stand-in
  // (standalone_kernels), which serves only without an engine table.
  const auto source = [](const IterationCostModel& model, const std::string& op) {
    for (const std::string& s :
         dynamic_cast<const ProfiledCostModel&>(model).diagnostics().sources) {
      if (s.rfind(op + ":", 0) == 0) return s;
    }
    return std::string();
  };
  EXPECT_NE(source(*m, "attention_prefill").find("aiconfigurator_vllm"), std::string::npos);
  EXPECT_NE(source(*m, "attention_decode").find("aiconfigurator_vllm"), std::string::npos);
  const auto harness_only = make_profiled_cost_model(
      deployment("llama-3.1-8b", "h100_sxm", 1),
      {profiles::load_profile("profiles/h100_sxm/servesim_harness_llama-3.1-8b")}, {});
  EXPECT_NE(source(*harness_only, "attention_prefill").find("servesim_harness_llama-3.1-8b"),
            std::string::npos);
  // Larger batches and contexts never get faster (coarse steps: tables are measured data).
  EXPECT_LT(m->iteration_time(decodes(8, 1024)), m->iteration_time(decodes(64, 1024)));
  EXPECT_LT(m->iteration_time(decodes(32, 1024)), m->iteration_time(decodes(32, 8192)));
  EXPECT_LT(m->iteration_time(prefill(512)), m->iteration_time(prefill(4096)));
  EXPECT_LT(m->iteration_time(prefill(512)), m->iteration_time(prefill(512, 4096)));
}

// Weights in a dtype no table measured (the synthetic profile has bf16 rows only): the GEMMs use
// the 16-bit fit moved to the dtype's rate and count as extrapolated, so `servesim run` prints
// their share; per-tensor fp8 keeps its analytic fallback as before.
TEST_F(ProfiledTest, WeightDtypesWithoutTablesCountAsExtrapolated) {
  for (const Dtype dtype : {Dtype::kFp8Block, Dtype::kInt4Wo}) {
    SCOPED_TRACE(dtype_name(dtype));
    const auto m = make_profiled_cost_model(deployment("llama-3.1-8b", "h100_sxm", 1, dtype),
                                            {synthetic_h100_gemm()}, {});
    m->iteration_time(decodes(16, 1000));
    const LookupStats s = m->lookup_stats();
    EXPECT_GT(s.extrapolated_s, 0);
    EXPECT_GT(s.extrapolated_share(), 0.5);  // the LM head (16-bit rows) is the rest
  }
  const auto fp8 = make_profiled_cost_model(deployment("llama-3.1-8b", "h100_sxm", 1, Dtype::kFp8),
                                            {synthetic_h100_gemm()}, {});
  fp8->iteration_time(decodes(16, 1000));
  EXPECT_EQ(fp8->lookup_stats().extrapolated_s, 0);
}

// The model's own harness tables serve its 16-bit GEMMs first, but quantized GEMMs come from a
// table of an engine's quantized linear layer before the harness's bare GEMM (its meta lists
// "quantized_gemm" in "standalone_kernels"), even when only the bare one has the exact shape.
TEST_F(ProfiledTest, QuantizedGemmsPreferAnEngineLayerTableToABareGemm) {
  profiles::Profile engine = synthetic_h100_gemm();  // generic shapes, m up to 4096
  engine.meta.source = "engine_layer";
  for (profiles::GemmRow r : synthetic_h100_gemm().gemm) {
    r.dtype = "fp8_e4m3";
    engine.gemm.push_back(r);
  }
  profiles::Profile bare;
  bare.meta.gpu = "h100_sxm";
  bare.meta.source = "servesim-profile";
  bare.meta.model = "llama-3.1-8b";
  bare.meta.fields["standalone_kernels"] = "quantized_gemm,attention";
  for (profiles::GemmRow r : engine.gemm) {
    r.latency_us *= 0.5;  // twice as fast, both dtypes
    bare.gemm.push_back(r);
  }
  const auto source_of_qkv = [&](Dtype weights) {
    const auto m = make_profiled_cost_model(deployment("llama-3.1-8b", "h100_sxm", 1, weights),
                                            {engine, bare}, {});
    for (const std::string& s : dynamic_cast<const ProfiledCostModel&>(*m).diagnostics().sources) {
      if (s.rfind("qkv_gemm:", 0) == 0) return s;
    }
    return std::string();
  };
  EXPECT_NE(source_of_qkv(Dtype::kBf16).find("gemm bf16 n=6144 k=4096 from servesim-profile"),
            std::string::npos)
      << source_of_qkv(Dtype::kBf16);
  EXPECT_NE(source_of_qkv(Dtype::kFp8).find("gemm fp8_e4m3 n=6144 k=4096 from engine_layer"),
            std::string::npos)
      << source_of_qkv(Dtype::kFp8);
  // Without an engine table of the dtype the bare GEMM still serves.
  engine.gemm.erase(std::remove_if(engine.gemm.begin(), engine.gemm.end(),
                                   [](const profiles::GemmRow& r) { return r.dtype != "bf16"; }),
                    engine.gemm.end());
  EXPECT_NE(source_of_qkv(Dtype::kFp8).find("from servesim-profile"), std::string::npos)
      << source_of_qkv(Dtype::kFp8);
}

// A serving engine's own tables (meta "engine") price only that engine's deployments, ahead of
// every other profile, the model's own harness tables included; other deployments never see them.
TEST_F(ProfiledTest, AnEnginesOwnTablesServeOnlyThatEngineAndComeFirst) {
  profiles::Profile generic = synthetic_h100_gemm();
  profiles::Profile harness = synthetic_h100_gemm();
  harness.meta.source = "servesim-profile";
  harness.meta.model = "llama-3.1-8b";  // the model's own tables: ahead of generic ones
  profiles::Profile trtllm = synthetic_h100_gemm();
  trtllm.meta.source = "aiconfigurator";
  trtllm.meta.fields["engine"] = "trtllm";
  for (profiles::GemmRow& r : trtllm.gemm) r.latency_us *= 0.5;
  const Deployment d = deployment("llama-3.1-8b", "h100_sxm", 1);
  const auto price = [&](const std::string& engine) {
    ProfiledParams p;
    p.engine_tables = engine;
    return seconds(make_profiled_cost_model(d, {generic, trtllm, harness}, p)
                       ->iteration_time(prefill(2048)));
  };
  const double generic_s = seconds(
      make_profiled_cost_model(d, {generic, harness}, {})->iteration_time(prefill(2048)));
  EXPECT_DOUBLE_EQ(price(""), generic_s);  // not TensorRT-LLM: its tables are not used
  EXPECT_DOUBLE_EQ(price("sglang"), generic_s);
  EXPECT_LT(price("trtllm"), 0.8 * generic_s);  // its GEMMs take half the time
  ProfiledParams p;
  p.engine_tables = "trtllm";
  const auto m = make_profiled_cost_model(d, {generic, trtllm, harness}, p);
  EXPECT_NE(m->describe().find("the serving engine's own operator tables first"),
            std::string::npos)
      << m->describe();
}

// A GEMM profile of Llama-3.1-8B's tp1 shapes on `gpu`: bf16 rows at 70 % of the bf16 peak plus
// 5 us (or the weight-read time, whichever is longer), and FP8 rows at `fp8_ratio` x those.
profiles::Profile bf16_and_fp8_gemm(const GpuSpec& gpu, double fp8_ratio) {
  profiles::Profile p =
      synthetic_gemm(gpu.key, gpu.mem_bw_bytes_per_s, 0.7 * gpu.bf16_flops_per_s, 8192);
  const size_t bf16_rows = p.gemm.size();
  for (size_t i = 0; i < bf16_rows; ++i) {
    profiles::GemmRow r = p.gemm[i];
    r.dtype = "fp8_e4m3";
    r.latency_us *= fp8_ratio;
    p.gemm.push_back(r);
  }
  return p;
}

// Per-tensor FP8 rows slower than the same table's bf16 rows (the shipped B200 table: x1.16) are
// priced on Blackwell from the bf16 kernel at the peak ratio (0.5 above the fixed latency), and
// kept as measured on Hopper (gemm_efficiency.h).
TEST_F(ProfiledTest, InvertedFp8RowsOnBlackwellArePricedFromTheBf16Kernel) {
  const auto mlp_ms = [&](const std::string& gpu, double fp8_ratio, Dtype w) {
    const auto m = make_profiled_cost_model(deployment("llama-3.1-8b", gpu, 1, w),
                                            {bf16_and_fp8_gemm(gpus_->get(gpu), fp8_ratio)}, {});
    return seconds(m->breakdown(prefill(4096)).mlp_gemm) * 1e3;
  };
  const double bf16 = mlp_ms("b200_sxm", 1.2, Dtype::kBf16);
  // Inverted: about half the bf16 time (the fixed latency is not halved), not 1.2 x.
  const double repriced = mlp_ms("b200_sxm", 1.2, Dtype::kFp8);
  EXPECT_NEAR(repriced / bf16, 0.5, 0.02);
  // A sane FP8 table (0.6 x bf16, slower than the reprice) is not inverted and serves as measured.
  EXPECT_NEAR(mlp_ms("b200_sxm", 0.6, Dtype::kFp8) / bf16, 0.6, 0.02);
  // Hopper keeps its inverted rows.
  EXPECT_NEAR(mlp_ms("h100_sxm", 1.2, Dtype::kFp8) / mlp_ms("h100_sxm", 1.2, Dtype::kBf16), 1.2,
              0.02);
  const auto m = make_profiled_cost_model(deployment("llama-3.1-8b", "b200_sxm", 1, Dtype::kFp8),
                                          {bf16_and_fp8_gemm(gpus_->get("b200_sxm"), 1.2)}, {});
  bool said = false;
  for (const std::string& s : dynamic_cast<const ProfiledCostModel&>(*m).diagnostics().sources) {
    said = said || s.find("priced as its bf16 kernel x 0.50") != std::string::npos;
  }
  EXPECT_TRUE(said);
}

// DSA's lightning indexer has no table: priced at the GPU's measured FP8 matmul efficiency, it is
// counted as extrapolated. On the shipped H200 tables a decode pass's extrapolated time then grows
// with the context the indexer scores (linearly), where DeepSeek-V3's does not move.
TEST_F(ProfiledTest, DsaIndexerCountsAsExtrapolated) {
  if (!have_real_tables()) GTEST_SKIP() << "shipped profiles not found";
  const auto extrapolated_s = [&](const std::string& model, int64_t context) {
    const auto m = make_profiled_cost_model(
        deployment(model, "h200_sxm", 8), profiles::load_gpu_profiles("profiles", "h200_sxm"), {});
    m->iteration_time(decodes(32, context));
    return m->lookup_stats().extrapolated_s;
  };
  EXPECT_EQ(extrapolated_s("deepseek-v3", 32768), extrapolated_s("deepseek-v3", 8192));
  const double from_8k =
      extrapolated_s("deepseek-v3.2", 32768) - extrapolated_s("deepseek-v3.2", 8192);
  const double from_32k =
      extrapolated_s("deepseek-v3.2", 65536) - extrapolated_s("deepseek-v3.2", 32768);
  EXPECT_GT(from_8k, 0);
  EXPECT_NEAR(from_32k / from_8k, 32.0 / 24.0, 0.05);
}

TEST_F(ProfiledTest, LookupStatsSplitInterpolatedExtrapolatedAnalytic) {
  const auto m = make_profiled_cost_model(deployment("llama-3.1-8b", "h100_sxm", 1),
                                          {synthetic_h100_gemm()}, {});
  // Inside the GEMM grid: GEMMs interpolated; attention, norms, overhead analytic (no tables).
  m->iteration_time(decodes(16, 1000));
  const LookupStats a = m->lookup_stats();
  EXPECT_GT(a.interpolated_s, 0);
  EXPECT_EQ(a.extrapolated_s, 0);
  EXPECT_GE(a.analytic_s, 2e-3);  // at least the 2 ms iteration overhead
  EXPECT_EQ(a.extrapolated_share(), 0);
  // 16384 tokens: beyond the measured m range of every GEMM.
  m->iteration_time(prefill(16384));
  const LookupStats b = m->lookup_stats();
  EXPECT_GT(b.extrapolated_s, 0);
  EXPECT_GT(b.extrapolated_share(), 0);
  EXPECT_GT(b.lookups, a.lookups);
  const double total = b.interpolated_s + b.extrapolated_s + b.analytic_s;
  // Everything predicted is accounted once.
  BatchShape p = prefill(16384);
  const double expected =
      seconds(m->iteration_time(decodes(16, 1000))) + seconds(m->iteration_time(p));
  const LookupStats c = m->lookup_stats();
  EXPECT_NEAR(c.interpolated_s + c.extrapolated_s + c.analytic_s - total, expected, 1e-6);
}

TEST_F(ProfiledTest, GemmsMatchTheTableAtMeasuredPoints) {
  const profiles::Profile p = synthetic_h100_gemm();
  ProfiledParams pp;
  pp.roofline.iteration_overhead = Duration{0};
  const auto m = make_profiled_cost_model(deployment("llama-3.1-8b", "h100_sxm", 1), {p}, pp);
  const OperatorTimes t = m->breakdown(decodes(64, 500));
  const double qkv_row = [&] {
    for (const profiles::GemmRow& r : p.gemm) {
      if (r.m == 64 && r.n == 6144) {
        return r.latency_us * 1e-6;
      }
    }
    return 0.0;
  }();
  EXPECT_NEAR(seconds(t.qkv_gemm), 32 * qkv_row, 2e-9);
}

TEST_F(ProfiledTest, TensorParallelAllReduceUsesCustomRowsWhereTheyCoverTheMessage) {
  profiles::Profile p;
  p.meta.gpu = "h100_sxm";
  p.meta.source = "test";
  for (int64_t bytes = 1024; bytes <= (int64_t{1} << 20); bytes *= 2) {
    p.collective.push_back({"custom_all_reduce", "bf16", 2, bytes, 1, 5.0});
  }
  for (int64_t bytes = 1024; bytes <= (int64_t{1} << 30); bytes *= 2) {
    p.collective.push_back({"all_reduce", "fp16", 2, bytes, 1, 50.0});
    p.collective.push_back({"all_reduce", "fp16", 4, bytes, 1, 90.0});
  }
  const auto m = make_profiled_cost_model(deployment("llama-3.1-8b", "h100_sxm", 2), {p}, {});
  // 64 tokens x 4096 x 2 B = 512 KiB: custom rows; 2 all-reduces x 32 layers.
  EXPECT_NEAR(seconds(m->breakdown(decodes(64, 100)).allreduce), 64 * 5e-6, 1e-9);
  // 1024 tokens = 8 MiB: beyond the custom rows, NCCL.
  EXPECT_NEAR(seconds(m->breakdown(prefill(1024)).allreduce), 64 * 50e-6, 1e-9);
  bool custom = false;
  for (const std::string& s : dynamic_cast<const ProfiledCostModel&>(*m).diagnostics().sources) {
    custom |= s.find("custom_all_reduce tp2") != std::string::npos;
  }
  EXPECT_TRUE(custom);
}

// A larger profile with NCCL rows only does not displace the NCCL rows of the profile that
// measured both kernels at this TP: custom and NCCL curves come from one harness.
TEST_F(ProfiledTest, AllReduceRowsComeFromTheProfileThatMeasuredBothKernels) {
  profiles::Profile both;
  both.meta.gpu = "h100_sxm";
  both.meta.source = "both";
  for (int64_t bytes = 1024; bytes <= (int64_t{1} << 20); bytes *= 2) {
    both.collective.push_back({"custom_all_reduce", "bf16", 2, bytes, 1, 5.0});
  }
  for (int64_t bytes = 1024; bytes <= (int64_t{1} << 30); bytes *= 2) {
    both.collective.push_back({"all_reduce", "fp16", 2, bytes, 1, 50.0});
  }
  profiles::Profile nccl_only;  // more rows: first in the general source order
  nccl_only.meta.gpu = "h100_sxm";
  nccl_only.meta.source = "nccl-only";
  for (int64_t bytes = 1024; bytes <= (int64_t{1} << 30); bytes += bytes / 4) {
    nccl_only.collective.push_back({"all_reduce", "fp16", 2, bytes, 1, 200.0});
  }
  ProfiledParams no_custom;
  no_custom.custom_allreduce = false;  // NCCL rows only, as DistServe's engine
  const auto m = make_profiled_cost_model(deployment("llama-3.1-8b", "h100_sxm", 2),
                                          {nccl_only, both}, no_custom);
  EXPECT_NEAR(seconds(m->breakdown(decodes(64, 100)).allreduce), 64 * 50e-6, 1e-9);
  // With only NCCL rows anywhere, the larger profile's are used.
  profiles::Profile gemm_only = synthetic_h100_gemm();
  const auto n = make_profiled_cost_model(deployment("llama-3.1-8b", "h100_sxm", 2),
                                          {gemm_only, nccl_only}, no_custom);
  EXPECT_NEAR(seconds(n->breakdown(decodes(64, 100)).allreduce), 64 * 200e-6, 1e-9);
}

// TP 3 has no rows: the NCCL curve between the 2- and 4-GPU rows, geometric in the GPU count.
TEST_F(ProfiledTest, AllReduceAtAnUnmeasuredTpInterpolatesBetweenGpuCounts) {
  profiles::Profile p;
  p.meta.gpu = "h100_sxm";
  p.meta.source = "test";
  for (int64_t bytes = 1024; bytes <= (int64_t{1} << 30); bytes *= 2) {
    p.collective.push_back({"all_reduce", "fp16", 2, bytes, 1, 20.0});
    p.collective.push_back({"all_reduce", "fp16", 4, bytes, 1, 40.0});
    p.collective.push_back({"custom_all_reduce", "bf16", 2, bytes, 1, 1.0});
  }
  ProfiledParams no_custom;
  no_custom.custom_allreduce = false;
  const auto m = make_profiled_cost_model(deployment("opt-66b", "h100_sxm", 3), {p}, no_custom);
  const double w = std::log(1.5) / std::log(2.0);
  const double per_call = 20e-6 * std::pow(2.0, w);  // 20 us^(1-w) x 40 us^w
  // 2 all-reduces x 64 layers.
  EXPECT_NEAR(seconds(m->breakdown(decodes(8, 100)).allreduce), 128 * per_call, 1e-8);
  bool between = false;
  for (const std::string& s : dynamic_cast<const ProfiledCostModel&>(*m).diagnostics().sources) {
    between |= s.find("between the 2- and 4-GPU rows") != std::string::npos;
  }
  EXPECT_TRUE(between);
}

TEST_F(ProfiledTest, DecodeAttentionDependsOnTheTotalContext) {
  if (!have_real_tables()) {
    GTEST_SKIP() << "real tables not found";
  }
  const auto m = make_profiled_cost_model(deployment("llama-3.1-8b", "h100_sxm", 1),
                                          profiles::load_gpu_profiles("profiles", "h100_sxm"), {});
  BatchShape skewed;
  skewed.segments = {{1, 1000, 1}, {1, 3000, 1}};
  EXPECT_EQ(m->breakdown(skewed).attention_decode, m->breakdown(decodes(2, 2000)).attention_decode);
}

// The decode-attention memo stands aside while it mostly misses (pairs that never repeat) and
// serves again once pairs repeat: whichever it does, every decode step is priced as by a model
// that met the same pairs in the opposite order, whose memo was in other states.
TEST_F(ProfiledTest, DecodeAttentionMemoNeverChangesAPrice) {
  if (!have_real_tables()) {
    GTEST_SKIP() << "real tables not found";
  }
  const auto tables = profiles::load_gpu_profiles("profiles", "h100_sxm");
  const Deployment d = deployment("llama-3.1-8b", "h100_sxm", 1);
  const auto forward = make_profiled_cost_model(d, tables, {});
  const auto backward = make_profiled_cost_model(d, tables, {});
  std::vector<DecodePass> steps;
  for (int64_t i = 0; i < 20000; ++i) {  // distinct pairs: the memo misses and pauses
    const int64_t batch = 1 + i % 97;
    steps.push_back({batch, batch * (200 + i), batch});
  }
  for (int64_t i = 0; i < 60000; ++i) {  // 64 pairs again and again: it hits once it serves
    const int64_t batch = 8 + i % 8;
    steps.push_back({batch, batch * (1000 + i % 64 / 8), batch});
  }
  std::vector<Duration> prices;
  for (const DecodePass& s : steps) prices.push_back(*forward->decode_iteration_time(s));
  for (size_t k = steps.size(); k-- > 0;) {
    ASSERT_EQ(*backward->decode_iteration_time(steps[k]), prices[k]) << "step " << k;
  }
}

TEST_F(ProfiledTest, MixedPrefillBatchFollowsTheDocumentedRule) {
  if (!have_real_tables()) {
    GTEST_SKIP() << "real tables not found";
  }
  // L40S: aiconfigurator prefill rows (no prefix axis), so
  //   T(B, K_rms) * sum(k^2 - c^2) / sum(k^2).
  const std::vector<profiles::Profile> profs = profiles::load_gpu_profiles("profiles", "l40s");
  const auto m = make_profiled_cost_model(deployment("llama-3.1-8b", "l40s", 1), profs, {});
  BatchShape shape;
  shape.segments = {{512, 512, 1}, {256, 2304, 1}};  // second: 256 new tokens after 2048 cached
  std::vector<profiles::AttentionPrefillRow> rows;
  for (const profiles::Profile& p : profs) {
    for (const profiles::AttentionPrefillRow& r : p.attention_prefill) {
      if (r.kv_dtype == "bf16") {
        rows.push_back(r);
      }
    }
  }
  const interp::PrefillTable table(rows, true);
  const double k2 = 512.0 * 512 + 2304.0 * 2304, c2 = 2048.0 * 2048;
  const double expected =
      32 * table.predict({32, 8, 128}, 2, std::sqrt(k2 / 2), 0).seconds * (k2 - c2) / k2;
  // Rows faster than the peak bound are clamped in the model: compare loosely.
  EXPECT_NEAR(seconds(m->breakdown(shape).attention_prefill), expected, 0.02 * expected);
}

TEST_F(ProfiledTest, Rtx4090BorrowsTheL40sEfficiencies) {
  const GpuSpec& rtx = gpus_->get("rtx4090");
  EXPECT_EQ(gpu_architecture(rtx), "Ada Lovelace");
  EXPECT_EQ(pick_donor_gpu(rtx, *gpus_, {"h100_sxm", "l40s", "a100_80gb_sxm"}),
            std::optional<std::string>("l40s"));
  EXPECT_EQ(pick_donor_gpu(gpus_->get("h100_pcie"), *gpus_, {"h100_sxm", "l40s"}),
            std::optional<std::string>("h100_sxm"));
  EXPECT_FALSE(pick_donor_gpu(rtx, *gpus_, {"h100_sxm", "rtx4090"}).has_value());
  if (!have_real_tables()) {
    GTEST_SKIP() << "real tables not found";
  }
  const Deployment d = deployment("llama-3.1-8b", "rtx4090", 1);
  const auto m = load_profiled_cost_model(d, *gpus_, "profiles");
  const auto& pm = dynamic_cast<const ProfiledCostModel&>(*m);
  EXPECT_EQ(pm.calibration_note(),
            "rtx4090: no measured tables; roofline with "
            "efficiencies fitted on l40s (same "
            "architecture, Ada Lovelace)");
  EXPECT_NE(m->describe().find(pm.calibration_note()), std::string::npos);
  const Duration t = m->iteration_time(decodes(8, 2000));
  EXPECT_GE(t, m->peak_bound_time(decodes(8, 2000)));
  const LookupStats s = m->lookup_stats();
  EXPECT_EQ(s.interpolated_s, 0);
  EXPECT_EQ(s.extrapolated_s, 0);
  EXPECT_NEAR(s.analytic_s, seconds(t), 1e-8);
  // A decode step of Llama-3.1-8B streams its 16 GB of weights: the 4090 (1008 GB/s) is faster than
  // the L40S (864 GB/s), but by less than the bandwidth ratio.
  const auto l40s =
      load_profiled_cost_model(deployment("llama-3.1-8b", "l40s", 1), *gpus_, "profiles");
  const double ratio = seconds(l40s->iteration_time(decodes(8, 2000))) / seconds(t);
  EXPECT_GT(ratio, 1.0);
  EXPECT_LT(ratio, 1008.0 / 864.0);
  // Donor profiles without the donor's spec are refused.
  EXPECT_THROW(make_profiled_cost_model(d, profiles::load_gpu_profiles("profiles", "l40s"), {}),
               std::invalid_argument);
}

TEST_F(ProfiledTest, WithoutTablesItIsTheRooflineAndSaysSo) {
  const Deployment d = deployment("llama-3.1-8b", "h100_sxm", 1);
  const auto m = make_profiled_cost_model(d, {}, {});
  const auto r = make_roofline_cost_model(d, {});
  EXPECT_NE(dynamic_cast<const ProfiledCostModel&>(*m).calibration_note().find("no measured"),
            std::string::npos);
  for (const BatchShape& s : {decodes(1, 100), decodes(64, 4000), prefill(2048)}) {
    EXPECT_NEAR(seconds(m->iteration_time(s)), seconds(r->iteration_time(s)),
                1e-6 * seconds(r->iteration_time(s)));
    EXPECT_EQ(m->peak_bound_time(s), r->peak_bound_time(s));
  }
}

TEST_F(ProfiledTest, RowsFasterThanThePeakAreClampedAndCounted) {
  profiles::Profile p = synthetic_h100_gemm();
  for (profiles::GemmRow& r : p.gemm) {
    if (r.m == 4096 && r.n == 28672) {
      r.latency_us = 1;  // 2 * 4096 * 28672 * 4096 FLOP in 1 us: far beyond the peak
    }
  }
  ProfiledParams pp;
  pp.roofline.iteration_overhead = Duration{0};
  const auto m = make_profiled_cost_model(deployment("llama-3.1-8b", "h100_sxm", 1), {p}, pp);
  const auto& pm = dynamic_cast<const ProfiledCostModel&>(*m);
  ASSERT_EQ(pm.diagnostics().rows_clamped_to_peak.count("gemm"), 1u);
  EXPECT_EQ(pm.diagnostics().rows_clamped_to_peak.at("gemm"), 1);
  BatchShape shape;
  for (int i = 0; i < 4096; ++i) {
    shape.segments.push_back({1, 10, 0});
  }
  EXPECT_GE(m->breakdown(shape).mlp_gemm,
            duration_from_seconds(32 * 2 * 4096.0 * 28672 * 4096 /
                                  gpus_->get("h100_sxm").bf16_flops_per_s));
}

// Tables of profiles read from disk are built once and shared: a second model of the same
// deployment predicts the same times and reports the same calibration (clamped-row counts too).
TEST_F(ProfiledTest, ModelsSharingTablesAgreeWithTheFirstBuilt) {
  if (!have_real_tables()) {
    GTEST_SKIP() << "real tables not found";
  }
  const std::vector<profiles::Profile> tables = profiles::load_gpu_profiles("profiles", "h100_sxm");
  // A model without harness tables of its own: its GEMMs come from the vendor tables, some of
  // whose rows are clamped to the peak bound.
  const Deployment d = deployment("llama-3.1-70b", "h100_sxm", 2);
  const auto first = make_profiled_cost_model(d, tables, {});
  const auto second = make_profiled_cost_model(d, tables, {});
  const auto& a = dynamic_cast<const ProfiledCostModel&>(*first);
  const auto& b = dynamic_cast<const ProfiledCostModel&>(*second);
  EXPECT_EQ(a.calibration_note(), b.calibration_note());
  EXPECT_EQ(a.diagnostics().rows_clamped_to_peak, b.diagnostics().rows_clamped_to_peak);
  EXPECT_EQ(a.diagnostics().decode_rows_cache_hot, b.diagnostics().decode_rows_cache_hot);
  EXPECT_EQ(a.diagnostics().sources, b.diagnostics().sources);
  EXPECT_FALSE(a.diagnostics().rows_clamped_to_peak.empty());
  for (const BatchShape& s : {decodes(1, 100), decodes(64, 3000), prefill(2048), prefill(512, 4096)}) {
    EXPECT_EQ(first->iteration_time(s), second->iteration_time(s));
  }
}

TEST_F(ProfiledTest, MemoAndDirectPathsAgree) {
  const profiles::Profile p = synthetic_h100_gemm();
  ProfiledParams small;
  small.memo_tokens = 8;
  const auto a = make_profiled_cost_model(deployment("llama-3.1-8b", "h100_sxm", 1), {p}, {});
  const auto b = make_profiled_cost_model(deployment("llama-3.1-8b", "h100_sxm", 1), {p}, small);
  for (int64_t tokens : {3, 100, 1000, 5000}) {
    EXPECT_EQ(a->iteration_time(prefill(tokens)), b->iteration_time(prefill(tokens)));
  }
}

TEST_F(ProfiledTest, RejectsBadInputs) {
  const profiles::Profile p = synthetic_h100_gemm();
  EXPECT_THROW(make_profiled_cost_model(deployment("llama-3.1-8b", "h100_sxm", 3), {p}, {}),
               CapacityError);
  const auto m = make_profiled_cost_model(deployment("llama-3.1-8b", "h100_sxm", 1), {p}, {});
  EXPECT_THROW(m->iteration_time(BatchShape{}), std::invalid_argument);
  BatchShape bad;
  bad.segments.push_back({5, 2, 1});
  EXPECT_THROW(m->iteration_time(bad), std::invalid_argument);
}

}  // namespace
}  // namespace servesim::models

namespace servesim::models {
namespace {

// `n` sampled decode segments of seeded contexts in [1, 9000]; *context_sum their sum.
BatchShape random_decodes(int n, uint64_t seed, int64_t* context_sum) {
  BatchShape shape;
  std::mt19937_64 rng(seed);
  for (int i = 0; i < n; ++i) {
    const auto c = static_cast<int64_t>(1 + rng() % 9000);
    shape.segments.push_back({1, c, 1});
    *context_sum += c;
  }
  return shape;
}

// Every field of two batches' sums equal.
void expect_same_sums(const detail::BatchSums& a, const detail::BatchSums& b) {
  for (auto f : {&detail::BatchSums::tokens, &detail::BatchSums::logit_rows,
                 &detail::BatchSums::prefill_key_positions, &detail::BatchSums::prefill_kv_tokens,
                 &detail::BatchSums::prefill_query_tokens, &detail::BatchSums::decode_key_positions,
                 &detail::BatchSums::decode_kv_tokens, &detail::BatchSums::decode_query_tokens,
                 &detail::BatchSums::prefill_segments, &detail::BatchSums::prefill_k2,
                 &detail::BatchSums::prefill_q2, &detail::BatchSums::prefill_qc,
                 &detail::BatchSums::window_prefill_key_positions,
                 &detail::BatchSums::window_prefill_kv_tokens,
                 &detail::BatchSums::window_decode_key_positions,
                 &detail::BatchSums::window_decode_kv_tokens}) {
    EXPECT_EQ(a.*f, b.*f);
  }
  EXPECT_EQ(a.has_decode, b.has_decode);
  EXPECT_EQ(a.has_prefill, b.has_prefill);
}

// For the profiled and the roofline model of `dep`: `from_sums(model)` on one model gives the
// duration iteration_time(whole) gives on another, and both count the same lookups.
template <typename FromSums>
void expect_whole_shape_time(const Deployment& dep, const BatchShape& whole, FromSums from_sums) {
  for (const bool profiled : {true, false}) {
    const auto by_shape = profiled ? make_profiled_cost_model(dep, {synthetic_h100_gemm()}, {})
                                   : make_roofline_cost_model(dep, {});
    const auto by_sums = profiled ? make_profiled_cost_model(dep, {synthetic_h100_gemm()}, {})
                                  : make_roofline_cost_model(dep, {});
    const std::optional<Duration> t = from_sums(*by_sums);
    ASSERT_TRUE(t.has_value());
    EXPECT_EQ(*t, by_shape->iteration_time(whole)) << (profiled ? "profiled" : "roofline");
    EXPECT_EQ(by_sums->lookup_stats().lookups, by_shape->lookup_stats().lookups);
    EXPECT_EQ(by_sums->lookup_stats().interpolated_s, by_shape->lookup_stats().interpolated_s);
    EXPECT_EQ(by_sums->lookup_stats().analytic_s, by_shape->lookup_stats().analytic_s);
  }
}

// A decode batch's sums depend on its size and total context only: decode_sums() gives every
// field sum_segments() gives for any such shape, and decode_iteration_time() the same duration
// as iteration_time(), counted alike (a steady decode that skips the segments stays exact).
TEST_F(ProfiledTest, DecodeTimeFromSumsEqualsTheShapesTime) {
  int64_t context = 0;
  const BatchShape shape = random_decodes(37, 7, &context);
  expect_same_sums(detail::sum_segments(shape), detail::decode_sums({37, context, 37}));
  EXPECT_THROW(detail::decode_sums({0, 10, 0}), std::invalid_argument);
  EXPECT_THROW(detail::decode_sums({5, 4, 5}), std::invalid_argument);
  EXPECT_THROW(detail::decode_sums({5, 40, 6}), std::invalid_argument);

  expect_whole_shape_time(deployment("llama-3.1-8b", "h100_sxm", 2), shape,
                          [&](const IterationCostModel& m) {
                            return m.decode_iteration_time({37, context, 37});
                          });
  // A sliding window needs each context: the caller must build the shape.
  const Deployment windowed{&models_->get("gpt-oss-120b"), &gpus_->get("h100_sxm"), 2,
                            Dtype::kBf16, Dtype::kBf16};
  EXPECT_FALSE(make_roofline_cost_model(windowed, {})->decode_iteration_time({37, context, 37}));
  EXPECT_FALSE(make_profiled_cost_model(windowed, {}, {})->decode_iteration_time({37, context, 37}));
}

// A batch of decode steps given by their sums and a few listed segments (prompt chunks, a decode
// step that does not sample) is priced as the whole shape with the decode steps listed first: the
// same sums field by field, the same duration, counted alike.
TEST_F(ProfiledTest, MixedTimeFromSumsEqualsTheWholeShapesTime) {
  int64_t context = 0;
  BatchShape rest, whole = random_decodes(23, 11, &context);
  rest.segments = {{512, 512, 0}, {300, 1324, 1}, {1, 77, 0}};
  whole.segments.insert(whole.segments.end(), rest.segments.begin(), rest.segments.end());
  expect_same_sums(detail::sum_segments(whole), detail::mixed_sums({23, context, 23}, rest));
  EXPECT_THROW(detail::mixed_sums({23, context, 23}, BatchShape{}), std::invalid_argument);
  EXPECT_THROW(detail::mixed_sums({0, 10, 0}, rest), std::invalid_argument);

  expect_whole_shape_time(deployment("llama-3.1-8b", "h100_sxm", 2), whole,
                          [&](const IterationCostModel& m) {
                            return m.mixed_iteration_time({23, context, 23}, rest);
                          });
  // A sliding window needs each context, and counts nothing when it declines.
  const Deployment windowed{&models_->get("gpt-oss-120b"), &gpus_->get("h100_sxm"), 2, Dtype::kBf16,
                            Dtype::kBf16};
  const auto roofline = make_roofline_cost_model(windowed, {});
  EXPECT_FALSE(roofline->mixed_iteration_time({23, context, 23}, rest));
  EXPECT_EQ(roofline->lookup_stats().lookups, 0);
  EXPECT_FALSE(
      make_profiled_cost_model(windowed, {}, {})->mixed_iteration_time({23, context, 23}, rest));
}

// The shipped vLLM FP8 tables of the H200 timed vLLM's linear layers eagerly, activation
// quantization as unfused PyTorch (about 9 ps per element, 10x a fused pass). An engine that
// compiles those layers prices them with a fused pass: long prefills get much cheaper (the MLP of
// an 8,000-token Llama-3.1-8B prefill by about 300 us per GEMM call), decode barely moves, and the
// cost model says so.
TEST_F(ProfiledTest, CompiledEnginesPriceFp8ActivationQuantizationAsOneFusedPass) {
  if (!have_real_tables()) GTEST_SKIP() << "shipped tables not found";
  const Deployment d = deployment("llama-3.1-8b", "h200_sxm", 1, Dtype::kFp8, Dtype::kFp8);
  const auto& tables = profiles::load_gpu_profiles("profiles", "h200_sxm");
  ProfiledParams compiled;
  compiled.fused_activation_quantization = true;
  const auto eager = make_profiled_cost_model(d, tables, {});
  const auto fused = make_profiled_cost_model(d, tables, compiled);
  const double eager_prefill = to_seconds(eager->iteration_time(prefill(8000)));
  const double fused_prefill = to_seconds(fused->iteration_time(prefill(8000)));
  EXPECT_LT(fused_prefill, 0.8 * eager_prefill);
  EXPECT_GE(fused->iteration_time(prefill(8000)), fused->peak_bound_time(prefill(8000)));
  const double eager_decode = to_seconds(eager->iteration_time(decodes(16, 2000)));
  const double fused_decode = to_seconds(fused->iteration_time(decodes(16, 2000)));
  EXPECT_NEAR(fused_decode / eager_decode, 1.0, 0.03);
  EXPECT_NE(fused->describe().find("unfused activation quantization"), std::string::npos);
  EXPECT_EQ(eager->describe().find("unfused activation quantization"), std::string::npos);
}

}  // namespace
}  // namespace servesim::models
