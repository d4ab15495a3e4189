// `servesim fidelity` and the measured runs it predicts:
// 1. error statistics on hand-checked errors;
// 2. the measured-runs reader names the line and column of a bad field, and the columns a file
//    lacks;
// 3. rows map to scenarios as the benchmark that measured them ran (engine, TP, precision,
//    concurrency, 20 x c requests after 2 x c warm-up) or are skipped with a reason, never dropped;
// 4. a study on a few rows of the shipped CSV: every row accounted for in the database,
//    deterministic predictions, a scenario that `servesim run` reproduces;
// 5. `servesim run`'s error band: the held-out error of the engine on its GPU class.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "app/fidelity.h"
#include "app/measured_runs.h"
#include "app/run_scenario.h"
#include "models/calibration/engine_calibration.h"
#include "policies/builtin.h"
#include "policies/engines/engine_model.h"
#include "reports/query.h"
#include "core/error.h"

namespace servesim::app {
namespace {

namespace fs = std::filesystem;

const scenarios::DataRoot& root() {
  static const scenarios::DataRoot r = scenarios::DataRoot::discover();
  return r;
}

std::string shipped_csv() {
  return (fs::path(root().root) / "profiles/measured_runs/aiconfigurator_silicon_calibration.csv")
      .string();
}

// The header and the given 1-based lines of the shipped CSV, written to a temporary file.
std::string csv_with_lines(const std::string& name, const std::vector<int>& lines) {
  std::ifstream in(shipped_csv());
  std::string text, out;
  for (int n = 1; std::getline(in, text); ++n) {
    if (n == 1 || std::find(lines.begin(), lines.end(), n) != lines.end()) out += text + "\n";
  }
  const fs::path p = fs::temp_directory_path() / ("servesim_fidelity_" + name + ".csv");
  std::ofstream(p) << out;
  return p.string();
}

// --fit with few evaluations and rows per fit: what the fit tests need, fast.
FidelityOptions quick_fit_options() {
  FidelityOptions options;
  options.jobs = 2;
  options.fit = true;
  options.fit_evaluations = 6;
  options.fit_max_rows = 2;
  return options;
}

const MeasuredRun& row_at_line(const std::vector<MeasuredRun>& runs, int line) {
  for (const MeasuredRun& r : runs) {
    if (r.line == line) return r;
  }
  throw std::runtime_error("no such line");
}

TEST(FidelityErrorStats, MedianMeanBiasAndShares) {
  // TTFT errors: |e| = 0.05, 0.2, 0.3, 0 -> median 0.125, mean 0.1375, signed median 0.025.
  const ErrorStats e = error_stats({0.05, -0.2, 0.3, 0.0}, {0.02, 0.1, -0.3, 0.05});
  EXPECT_EQ(e.rows, 4);
  EXPECT_NEAR(e.ttft_mdape, 0.125, 1e-12);
  EXPECT_NEAR(e.ttft_mape, 0.1375, 1e-12);
  EXPECT_NEAR(e.ttft_bias, 0.025, 1e-12);
  EXPECT_NEAR(e.ttft_within_10, 0.5, 1e-12);
  EXPECT_NEAR(e.ttft_within_25, 0.75, 1e-12);
  EXPECT_NEAR(e.tpot_mdape, 0.075, 1e-12);
  // Both within 25 %: rows 0 and 1 only (row 2 is off on both, row 3 on neither... 0.0 / 0.05).
  EXPECT_NEAR(e.both_within_25, 0.75, 1e-12);
  EXPECT_EQ(error_stats({}, {}).rows, 0);
}

TEST(MeasuredRuns, ABadFieldNamesItsLineAndColumn) {
  const fs::path p = fs::temp_directory_path() / "servesim_fidelity_bad.csv";
  {
    std::ifstream in(shipped_csv());
    std::string header, row;
    std::getline(in, header);
    std::getline(in, row);
    // The isl field of the first row made negative.
    const size_t at = row.find(",disagg,1024,");
    ASSERT_NE(at, std::string::npos);
    row.replace(at, 13, ",disagg,-5,");
    std::ofstream(p) << header << "\n" << row << "\n";
  }
  try {
    read_measured_runs(p.string());
    FAIL() << "accepted a negative isl";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(p.string()), std::string::npos) << what;
    EXPECT_NE(what.find(":2"), std::string::npos) << what;
    EXPECT_NE(what.find("isl"), std::string::npos) << what;
  }
}

// Counts beyond any deployment are refused at the line that holds them, before any product of
// them can overflow: a batch size, a parallel degree, and clients multiplied out of a
// disaggregated row's decode pool.
TEST(MeasuredRuns, HugeCountsAreRefusedWithTheirBound) {
  const fs::path p = fs::temp_directory_path() / "servesim_fidelity_huge.csv";
  const std::string header =
      "id,silicon_data_source,backend,backend_version,model_path,system,precision,mode,isl,osl,"
      "gemm_quant_mode,moe_quant_mode,batch_size,tp_size,pp_size,attention_dp_size,moe_tp_size,"
      "moe_ep_size,prefill_batch_size,prefill_num_workers,prefill_tp_size,prefill_pp_size,"
      "prefill_attention_dp_size,prefill_moe_tp_size,prefill_moe_ep_size,decode_batch_size,"
      "decode_num_workers,decode_tp_size,decode_pp_size,decode_attention_dp_size,"
      "decode_moe_tp_size,decode_moe_ep_size,silicon_ttft_ms,silicon_tpot_ms";
  const auto expect_refused = [&](const std::string& row, const std::string& want) {
    std::ofstream(p) << header << "\n" << row << "\n";
    try {
      read_measured_runs(p.string());
      ADD_FAILURE() << "accepted " << row;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  expect_refused("a,,trtllm,1,m,h100_sxm,fp8,agg,1024,1024,fp8,,4611686018427387904,1,1,4,1,1,"
                 ",,,,,,,,,,,,,,10,1",
                 "batch_size: expected an integer <= 1000000");
  expect_refused("a,,trtllm,1,m,h100_sxm,fp8,agg,1024,1024,fp8,,8,1,1,9000,1,1,"
                 ",,,,,,,,,,,,,,10,1",
                 "attention_dp_size: expected an integer <= 4096");
  expect_refused("a,,trtllm,1,m,gb200,fp8,disagg,1024,1024,fp8,fp8,,,,,,,"
                 "1,1,1,1,8,1,8,1000000,4096,1,1,32,1,32,10,1",
                 "benchmark clients");
}

TEST(MeasuredRuns, AMissingColumnIsNamedWithTheExpectedHeader) {
  const fs::path p = fs::temp_directory_path() / "servesim_fidelity_nocol.csv";
  std::ofstream(p) << "id,backend\nx,vllm\n";
  try {
    read_measured_runs(p.string());
    FAIL() << "accepted a file without the measured columns";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("backend_version"), std::string::npos) << what;
    EXPECT_NE(what.find("silicon_ttft_ms"), std::string::npos) << what;
  }
}

TEST(MeasuredRuns, HuggingFaceIdsMapToCatalogKeys) {
  const auto& cat = scenarios::Catalogs::get(root()).models;
  EXPECT_EQ(catalog_model_for("meta-llama/Llama-3.1-8B-Instruct", cat), "llama-3.1-8b");
  EXPECT_EQ(catalog_model_for("nvidia/Llama-3.1-8B-Instruct-FP8", cat), "llama-3.1-8b");
  EXPECT_EQ(catalog_model_for("Qwen/Qwen3-32B", cat), "qwen3-32b");  // added by models import
  EXPECT_EQ(catalog_model_for("openai/gpt-oss-120b", cat), "gpt-oss-120b");  // models import
  EXPECT_EQ(catalog_model_for("deepseek-ai/DeepSeek-V3", cat), "deepseek-v3");
  EXPECT_EQ(catalog_model_for("zai-org/GLM-4.5-Air", cat), "");
}

// Rows of the 2026 architectures (DeepSeek Sparse Attention, Gated DeltaNet hybrids, multimodal
// wrappers, MiniMax-M2.5) in the shared CSV format, as their checkpoints are named on the hub,
// each map to a scenario that parses: none is skipped as not in the catalog or not representable.
// The rows are made up for the mapping (their latencies are placeholders), not measurements.
TEST(MeasuredRuns, RowsOfThe2026ArchitecturesMapToScenarios) {
  policies::register_builtin_policies();
  std::ifstream in(shipped_csv());
  std::string header;
  std::getline(in, header);
  if (!header.empty() && header.back() == '\r') header.pop_back();  // the file's CRLF lines
  std::vector<std::string> columns;
  for (std::stringstream cells(header); std::getline(cells, columns.emplace_back(), ',');) {
  }
  columns.pop_back();
  struct Row {
    const char* model;
    const char* engine;
    const char* version;
    const char* gpu;
    const char* precision;  // also the GEMM and MoE quant modes ("" for 16-bit)
    int tp;
    const char* key;  // the catalog model it maps to
  };
  const Row rows[] = {
      {"MiniMaxAI/MiniMax-M2.5", "sglang", "0.5.9", "h200_sxm", "fp8", 4, "minimax-m2.5"},
      {"moonshotai/Kimi-K2.5", "vllm", "0.15.1", "h200_sxm", "fp8_block", 8, "kimi-k2.5"},
      {"nvidia/Kimi-K2.5-NVFP4", "trtllm", "1.2.0rc2.post2", "b200_sxm", "nvfp4", 8, "kimi-k2.5"},
      {"zai-org/GLM-5-FP8", "sglang", "0.5.9", "h200_sxm", "fp8_block", 8, "glm-5"},
      {"nvidia/GLM-5.1-NVFP4", "trtllm", "1.2.0rc2.post2", "gb200", "nvfp4", 8, "glm-5.1"},
      {"deepseek-ai/DeepSeek-V3.2", "sglang", "0.5.9", "h200_sxm", "fp8_block", 8, "deepseek-v3.2"},
      {"nvidia/DeepSeek-V3.2-NVFP4", "trtllm", "1.2.0rc2.post2", "b200_sxm", "nvfp4", 8,
       "deepseek-v3.2"},
      {"Qwen/Qwen3.5-397B-A17B-FP8", "vllm", "0.15.1", "h200_sxm", "fp8_block", 8,
       "qwen3.5-397b-a17b"},
      {"Qwen/Qwen3.5-122B-A10B", "trtllm", "1.2.0rc2.post2", "b200_sxm", "fp8", 4,
       "qwen3.5-122b-a10b"},
      {"Qwen/Qwen3.5-35B-A3B", "sglang", "0.5.9", "h200_sxm", "fp8", 1, "qwen3.5-35b-a3b"},
      {"Qwen/Qwen3.5-27B", "vllm", "0.15.1", "h100_sxm", "", 2, "qwen3.5-27b"},
  };
  std::string text = header + "\n";
  for (const Row& r : rows) {
    const std::string precision = r.precision == std::string("nvfp4")       ? "fp4"
                                  : r.precision == std::string("fp8_block") ? "fp8"
                                                                            : r.precision;
    const std::map<std::string, std::string> cells = {{"id", std::string("synthetic_") + r.model},
                                                      {"backend", r.engine},
                                                      {"backend_version", r.version},
                                                      {"model_path", r.model},
                                                      {"system", r.gpu},
                                                      {"precision", precision},
                                                      {"mode", "agg"},
                                                      {"isl", "4096"},
                                                      {"osl", "512"},
                                                      {"gemm_quant_mode", r.precision},
                                                      {"moe_quant_mode", r.precision},
                                                      {"batch_size", "8"},
                                                      {"tp_size", std::to_string(r.tp)},
                                                      {"pp_size", "1"},
                                                      {"attention_dp_size", "1"},
                                                      {"moe_tp_size", std::to_string(r.tp)},
                                                      {"moe_ep_size", "1"},
                                                      {"silicon_ttft_ms", "1000"},
                                                      {"silicon_tpot_ms", "30"}};
    for (size_t c = 0; c < columns.size(); ++c) {
      const auto it = cells.find(columns[c]);
      text += (c > 0 ? "," : "") + (it == cells.end() ? std::string() : it->second);
    }
    text += "\n";
  }
  const fs::path p = fs::temp_directory_path() / "servesim_fidelity_2026_architectures.csv";
  std::ofstream(p) << text;
  const auto runs = read_measured_runs(p.string());
  ASSERT_EQ(runs.size(), std::size(rows));
  const auto& cat = scenarios::Catalogs::get(root());
  for (size_t i = 0; i < runs.size(); ++i) {
    SCOPED_TRACE(rows[i].model);
    const MappedRun m = map_measured_run(runs[i], cat, BenchmarkTemplate{});
    ASSERT_TRUE(m.mapped()) << m.skip_reason;
    EXPECT_EQ(m.model, rows[i].key);
    EXPECT_NO_THROW(scenarios::parse_scenario(m.scenario, "row", "", root()));
  }
}

TEST(MeasuredRuns, RowsMapToTheBenchmarkThatMeasuredThemOrSaySkipped) {
  policies::register_builtin_policies();
  const auto runs = read_measured_runs(shipped_csv());
  const auto& cat = scenarios::Catalogs::get(root());
  const BenchmarkTemplate bench;
  // Line 906: TensorRT-LLM 1.0.0rc3, Llama-3.1-8B bf16 on one H100, ISL 1024 / OSL 128, c = 8.
  const MappedRun m = map_measured_run(row_at_line(runs, 906), cat, bench);
  ASSERT_TRUE(m.mapped()) << m.skip_reason;
  EXPECT_EQ(m.engine, "trtllm");
  EXPECT_EQ(m.model, "llama-3.1-8b");
  EXPECT_EQ(m.gpu, "h100_sxm");
  EXPECT_EQ(m.weight_dtype, "bf16");
  const scenarios::Json& w = m.scenario.at("workload");
  EXPECT_EQ(w.at("type"), "benchmark");
  EXPECT_EQ(w.at("concurrency"), 8);
  EXPECT_EQ(w.at("num_requests"), 160);
  EXPECT_EQ(w.at("warmup_requests"), 16);
  EXPECT_EQ(w.at("isl"), 1024);
  EXPECT_EQ(w.at("osl"), 128);
  // Clients drift apart: each send is delayed by up to the template's client jitter.
  EXPECT_EQ(w.at("think_time_jitter"), "50ms");
  EXPECT_EQ(m.scenario.at("cluster").at("tp"), 1);
  EXPECT_EQ(m.scenario.at("engine").at("version"), "1.0.0rc3");
  // The scenario parses as servesim run would read it.
  EXPECT_NO_THROW(scenarios::parse_scenario(m.scenario, "row", "", root()));

  // A disaggregated row maps to the disagg policy with its pools (line 2: DeepSeek-V3 on GB200,
  // one prefill worker of 8 attention-DP ranks with experts over 8, one decode worker of 32 ranks
  // with experts over 32, batch 64 per decode rank; silicon_concurrency 2048, capped to 9 rounds).
  const MappedRun disagg = map_measured_run(runs.front(), cat, bench);
  ASSERT_TRUE(disagg.mapped()) << disagg.skip_reason;
  EXPECT_EQ(disagg.group(), "trtllm / gb200_nvl72 / deepseek-v3 disagg");
  EXPECT_FALSE(disagg.calibrates());
  const scenarios::Json& pol = disagg.scenario.at("policy");
  EXPECT_EQ(pol.at("type"), "disagg");
  EXPECT_EQ(pol.at("num_prefill"), 1);
  EXPECT_EQ(pol.at("tp_prefill"), 1);
  EXPECT_EQ(pol.at("attention_dp_prefill"), 8);
  EXPECT_EQ(pol.at("ep_prefill"), 8);
  EXPECT_EQ(pol.at("num_decode"), 1);
  EXPECT_EQ(pol.at("attention_dp_decode"), 32);
  EXPECT_EQ(pol.at("ep_decode"), 32);
  EXPECT_EQ(pol.at("decode_max_num_seqs"), 64 * 32);
  EXPECT_EQ(disagg.scenario.at("workload").at("concurrency"), 2048);
  EXPECT_EQ(disagg.scenario.at("workload").at("num_requests"), 9 * 2048);
  EXPECT_FALSE(disagg.scenario.at("engine").contains("version"));  // a Dynamo release
  EXPECT_NO_THROW(scenarios::parse_scenario(disagg.scenario, "row", "", root()));
  // Without worker counts (gpt-oss-120b on GB200, line 1407) it is skipped with its reason.
  const MappedRun bare = map_measured_run(row_at_line(runs, 1407), cat, bench);
  EXPECT_FALSE(bare.mapped());
  EXPECT_NE(bare.skip_reason.find("without prefill_num_workers"), std::string::npos);
  // Rows map as they ran: gpt-oss-120b's 4-bit experts on FP4 tensor cores on the B200, as its
  // checkpoint's weight-only MXFP4 on the H200 (no FP4 cores; 16-bit math and KV, as in the
  // engines' W4A16 kernels); DeepSeek-V3's block-scaled FP8 experts stay block-scaled; a dense
  // NVFP4 checkpoint runs on the B200's FP4 cores. A dense model's FP8 flavours keep the
  // calibration's mapping: fp8.
  std::map<std::string, int64_t> seen;
  for (const MeasuredRun& r : runs) {
    if (r.mode != "agg") continue;
    const MappedRun g = map_measured_run(r, cat, bench);
    std::string want;
    if (r.model_path == "openai/gpt-oss-120b" && r.system == "h200_sxm") {
      EXPECT_EQ(g.model, "gpt-oss-120b");
      want = "mxfp4";
    } else if (r.model_path == "openai/gpt-oss-120b" && r.system == "b200_sxm") {
      want = "nvfp4";
    } else if (r.model_path == "deepseek-ai/DeepSeek-V3" && r.moe_quant_mode == "fp8_block") {
      want = "fp8_block";
    } else if (r.model_path == "meta-llama/Llama-3.1-8B-Instruct" &&
               r.gemm_quant_mode == "fp8_block") {
      want = "fp8";
    } else if (r.model_path == "nvidia/Qwen3-32B-NVFP4" && r.system == "b200_sxm") {
      EXPECT_EQ(g.model, "qwen3-32b");
      EXPECT_FALSE(g.moe);
      want = "nvfp4";
      ++seen["dense nvfp4"];
    } else {
      continue;
    }
    EXPECT_EQ(g.weight_dtype, want) << r.line;
    if (g.mapped()) {
      EXPECT_EQ(g.scenario.at("cluster").at("weight_dtype"), want) << r.line;
      EXPECT_EQ(g.scenario.at("cluster").at("kv_dtype"), want == "mxfp4" ? "bf16" : "fp8")
          << r.line;
    }
    ++seen[want];
  }
  for (const char* kind : {"mxfp4", "nvfp4", "fp8_block", "fp8", "dense nvfp4"}) {
    EXPECT_GT(seen[kind], 0) << kind;
  }
  // A dense row on "gb200" runs on one GPU of the NVL72 rack, as the MoE rows do (line 498:
  // TensorRT-LLM 1.3.0rc1, Qwen3-32B bf16, TP 2).
  const MappedRun gb200 = map_measured_run(row_at_line(runs, 498), cat, bench);
  ASSERT_TRUE(gb200.mapped()) << gb200.skip_reason;
  EXPECT_EQ(gb200.group(), "trtllm / gb200_nvl72 / qwen3-32b");
  EXPECT_TRUE(gb200.calibrates());
  EXPECT_EQ(gb200.weight_dtype, "bf16");
  EXPECT_TRUE(gb200.assumption.empty()) << gb200.assumption;
  EXPECT_NO_THROW(scenarios::parse_scenario(gb200.scenario, "row", "", root()));
  // Quantisation names as aiconfigurator writes them: float16 is 16-bit, fp8_ootb per-tensor
  // FP8, w4a16_mxfp4 weight-only MXFP4, int4_wo weight-only INT4; an 8-bit integer mode has no
  // servesim dtype and is skipped with its name.
  for (const auto& [mode, want] :
       std::vector<std::pair<std::string, std::string>>{{"float16", "bf16"},
                                                        {"fp8_ootb", "fp8"},
                                                        {"w4a16_mxfp4", "mxfp4"},
                                                        {"int4_wo", "int4_wo"},
                                                        {"int8_wo", ""}}) {
    MeasuredRun q = row_at_line(runs, 906);
    q.gemm_quant_mode = mode;
    const MappedRun g = map_measured_run(q, cat, bench);
    EXPECT_EQ(g.weight_dtype, want) << mode;
    if (want.empty()) {
      EXPECT_EQ(g.skip_reason, "int8_wo weights are not modelled");
    } else {
      EXPECT_TRUE(g.mapped()) << mode << ": " << g.skip_reason;
    }
  }
  // aiconfigurator's "a100_sxm" is the catalog's 80 GiB A100.
  MeasuredRun a100 = row_at_line(runs, 906);
  a100.system = "a100_sxm";
  const MappedRun on_a100 = map_measured_run(a100, cat, bench);
  ASSERT_TRUE(on_a100.mapped()) << on_a100.skip_reason;
  EXPECT_EQ(on_a100.gpu, "a100_80gb_sxm");
  EXPECT_NO_THROW(scenarios::parse_scenario(on_a100.scenario, "row", "", root()));
  // A release servesim cannot place (TensorRT-LLM's "gpt-oss-dev" build, line 1400) runs with
  // the newest defaults it knows, and says so.
  const MeasuredRun& dev = *std::find_if(runs.begin(), runs.end(), [](const MeasuredRun& r) {
    return r.backend_version == "gpt-oss-dev";
  });
  const MappedRun stand_in = map_measured_run(dev, cat, bench);
  ASSERT_TRUE(stand_in.mapped()) << stand_in.skip_reason;
  const std::vector<std::string>& known = policies::engine_models().get("trtllm").versions;
  EXPECT_EQ(stand_in.scenario.at("engine").at("version"), known.back());
  EXPECT_NE(stand_in.assumption.find("\"gpt-oss-dev\" is not a dotted release"), std::string::npos)
      << stand_in.assumption;
  EXPECT_NE(stand_in.scenario.at("description").get<std::string>().find(stand_in.assumption),
            std::string::npos);
  EXPECT_NO_THROW(scenarios::parse_scenario(stand_in.scenario, "row", "", root()));
}

// fidelity --kernel-tables engine: the rows of an engine with its own operator tables take
// engine.kernel_tables "engine"; vLLM's rows, whose tables are the generic ones, take nothing.
TEST(MeasuredRuns, KernelTablesReachOnlyEnginesThatHaveTheKnob) {
  policies::register_builtin_policies();
  const auto runs = read_measured_runs(shipped_csv());
  const auto& cat = scenarios::Catalogs::get(root());
  BenchmarkTemplate bench;
  const MappedRun trtllm_default = map_measured_run(row_at_line(runs, 906), cat, bench);
  EXPECT_FALSE(trtllm_default.scenario.at("engine").contains("kernel_tables"));
  bench.kernel_tables = "engine";
  const MappedRun trtllm = map_measured_run(row_at_line(runs, 906), cat, bench);
  EXPECT_EQ(trtllm.scenario.at("engine").at("kernel_tables"), "engine");
  EXPECT_NO_THROW(scenarios::parse_scenario(trtllm.scenario, "row", "", root()));
  const MappedRun vllm = map_measured_run(row_at_line(runs, 1093), cat, bench);
  ASSERT_EQ(vllm.engine, "vllm");
  EXPECT_FALSE(vllm.scenario.at("engine").contains("kernel_tables"));
  EXPECT_NO_THROW(scenarios::parse_scenario(vllm.scenario, "row", "", root()));
}

// Attention-DP rows: upstream's batch_size is per rank (line 1551: gpt-oss-120b on 4 B200 ranks,
// batch_size 8, experts moe_tp 4 x moe_ep 1; its silicon_concurrency is 32), the generator's
// engine limits are per rank, and the scenario is one instance of 4 ranks.
TEST(MeasuredRuns, AttentionDataParallelRowsRunAsOneInstanceOfRanks) {
  policies::register_builtin_policies();
  const auto runs = read_measured_runs(shipped_csv());
  const auto& cat = scenarios::Catalogs::get(root());
  const MeasuredRun& r = row_at_line(runs, 1551);
  EXPECT_EQ(r.attention_dp, 4);
  EXPECT_EQ(r.concurrency, 32);
  const MappedRun m = map_measured_run(r, cat, BenchmarkTemplate{});
  ASSERT_TRUE(m.mapped()) << m.skip_reason;
  EXPECT_EQ(m.scenario.at("cluster").at("tp"), 1);
  EXPECT_EQ(m.scenario.at("cluster").at("attention_dp"), 4);
  EXPECT_EQ(m.scenario.at("cluster").at("ep"), 1);
  EXPECT_EQ(m.scenario.at("workload").at("concurrency"), 32);
  EXPECT_EQ(m.scenario.at("engine").at("max_batch_size"), 4 * 128);
  // InferenceMAX's gpt-oss recipe balances contexts over the ranks with the engine's defaults,
  // its DeepSeek recipe (line 367: 16 ranks) with timeout_iters 60 and batching_wait_iters 0.
  EXPECT_EQ(m.scenario.at("engine").at("attention_dp_enable_balance"), true);
  EXPECT_EQ(m.scenario.at("engine").at("attention_dp_timeout_iters"), 50);
  EXPECT_EQ(m.scenario.at("engine").at("attention_dp_batching_wait_iters"), 10);
  const MappedRun deepseek = map_measured_run(row_at_line(runs, 367), cat, BenchmarkTemplate{});
  ASSERT_TRUE(deepseek.mapped()) << deepseek.skip_reason;
  EXPECT_EQ(deepseek.scenario.at("engine").at("attention_dp_timeout_iters"), 60);
  EXPECT_EQ(deepseek.scenario.at("engine").at("attention_dp_batching_wait_iters"), 0);
  const scenarios::Scenario s = scenarios::parse_scenario(m.scenario, "row", "", root());
  EXPECT_EQ(s.groups.at(0).gpus_per_instance(), 4);
  // vLLM's data parallelism: line 1260 (Qwen3-235B-A22B FP8 on H200, tp 1, experts moe_tp 2,
  // no attention_dp) ran on 2 GPUs, its attention data-parallel; its 8 clients stay 8.
  const MeasuredRun& dp_row = row_at_line(runs, 1260);
  EXPECT_EQ(dp_row.attention_dp, 1);
  const MappedRun dp = map_measured_run(dp_row, cat, BenchmarkTemplate{});
  ASSERT_TRUE(dp.mapped()) << dp.skip_reason;
  EXPECT_EQ(dp.run.attention_dp, 2);
  EXPECT_EQ(dp.scenario.at("cluster").at("tp"), 1);
  EXPECT_EQ(dp.scenario.at("cluster").at("attention_dp"), 2);
  EXPECT_EQ(dp.scenario.at("workload").at("concurrency"), 8);
  EXPECT_EQ(dp.assumption,
            "experts over moe_tp 2 x moe_ep 1 GPUs at tp 1: attention data-parallel over 2 ranks");
  EXPECT_EQ(
      scenarios::parse_scenario(dp.scenario, "row", "", root()).groups.at(0).gpus_per_instance(),
      2);
  // A dense row never infers ranks from its (meaningless) expert columns.
  MeasuredRun dense = row_at_line(runs, 906);
  dense.moe_tp = 2;
  EXPECT_EQ(map_measured_run(dense, cat, BenchmarkTemplate{}).run.attention_dp, 1);
  // A layout whose experts do not cover the ranks' GPUs says why it is skipped.
  MeasuredRun bad = r;
  bad.moe_tp = 2;
  const MappedRun skipped = map_measured_run(bad, cat, BenchmarkTemplate{});
  EXPECT_FALSE(skipped.mapped());
  EXPECT_NE(skipped.skip_reason.find("is not the row's tp 1 x attention_dp 4"), std::string::npos)
      << skipped.skip_reason;
}

// Thousands of clients replay whole rounds up to the cap, never fewer than 4; up to 1,000 clients
// the template's 20 rounds stand.
TEST(BenchmarkTemplateCap, LargeConcurrenciesReplayFewerWholeRounds) {
  BenchmarkTemplate b;
  EXPECT_EQ(b.rounds_for(8), 20);
  EXPECT_EQ(b.rounds_for(1000), 20);
  EXPECT_EQ(b.rounds_for(1001), 19);
  EXPECT_EQ(b.rounds_for(2048), 9);
  EXPECT_EQ(b.rounds_for(8192), 4);
  b.max_measured_requests = 0;
  EXPECT_EQ(b.rounds_for(8192), 20);
}

// Each campaign is replayed with the client and the engine launch it ran: line 1337 (vLLM 0.18.0,
// gpt-oss-120b on one H200, ISL 8192 / OSL 1024, 4 clients, a dated export) with InferenceMAX's
// benchmark_serving.py and vLLM recipe; line 906 (TensorRT-LLM Llama-3.1-8B from aiconfigurator's
// own campaign) with aiperf and aiconfigurator's generator limits; line 31 (SGLang DeepSeek-V3 on 8
// H200s, ISL / OSL 1k/1k, a database dump) with the SGLang recipe's chunked prefill; line 116 (the
// same on B200s at 16 clients) with the Blackwell recipe's scheduler_recv_interval too.
TEST(MeasuredRuns, EachCampaignIsReplayedWithItsOwnClientAndEngineLaunch) {
  policies::register_builtin_policies();
  const auto runs = read_measured_runs(shipped_csv());
  const auto& cat = scenarios::Catalogs::get(root());
  const MeasuredRun& dated = row_at_line(runs, 1337);
  const MeasuredRun& aic = row_at_line(runs, 906);
  const MeasuredRun& dump = row_at_line(runs, 31);
  EXPECT_EQ(benchmark_client_of(dated), BenchmarkClient::kBenchServing);
  EXPECT_EQ(benchmark_client_of(aic), BenchmarkClient::kAiperf);
  EXPECT_EQ(benchmark_client_of(dump), BenchmarkClient::kBenchServing);
  MeasuredRun other = aic;
  other.source = "";  // a CSV without the column, or a source of another kind: aiperf
  EXPECT_EQ(benchmark_client_of(other), BenchmarkClient::kAiperf);
  other.source = "measured by hand; source_file=2026-04-06.csv";
  EXPECT_EQ(benchmark_client_of(other), BenchmarkClient::kAiperf);

  BenchmarkTemplate bench;
  const MappedRun m = map_measured_run(dated, cat, bench);
  ASSERT_TRUE(m.mapped()) << m.skip_reason;
  EXPECT_EQ(m.client, BenchmarkClient::kBenchServing);
  const scenarios::Json& w = m.scenario.at("workload");
  EXPECT_EQ(w.at("concurrency"), 4);
  EXPECT_EQ(w.at("num_requests"), 40);
  EXPECT_EQ(w.at("warmup_requests"), 8);
  EXPECT_EQ(w.at("range_ratio"), 0.8);
  EXPECT_EQ(m.scenario.at("engine").at("max_num_seqs"), 4);
  EXPECT_EQ(m.scenario.at("engine").at("max_num_batched_tokens"), 8192);
  const Workload replay =
      scenarios::build_workload(scenarios::parse_scenario(m.scenario, "row", "", root()), root());
  for (const RequestSpec& q : replay.requests) {
    EXPECT_GE(q.prompt_tokens, 6553);  // floor(0.8 x 8192)
    EXPECT_LE(q.prompt_tokens, 8192);
    EXPECT_GE(q.output_tokens, 819);
    EXPECT_LE(q.output_tokens, 1024);
  }

  const MappedRun a = map_measured_run(aic, cat, bench);
  ASSERT_TRUE(a.mapped()) << a.skip_reason;
  EXPECT_FALSE(a.scenario.at("workload").contains("range_ratio"));
  EXPECT_EQ(a.scenario.at("workload").at("num_requests"), 20 * aic.concurrency);
  EXPECT_EQ(a.scenario.at("engine").at("max_batch_size"), std::max<int64_t>(128, aic.concurrency));

  const MappedRun d = map_measured_run(dump, cat, bench);
  ASSERT_TRUE(d.mapped()) << d.skip_reason;
  EXPECT_EQ(d.scenario.at("engine").at("chunked_prefill_size"), 32768);
  EXPECT_EQ(d.scenario.at("engine").at("enable_mixed_chunk"), false);
  EXPECT_EQ(d.scenario.at("engine").at("max_running_requests"), 512);
  EXPECT_FALSE(d.scenario.at("engine").contains("scheduler_recv_interval"));
  // aiconfigurator's generator never sets SGLang's --chunked-prefill-size (each release keeps its
  // own chunk) and passes --enable-mixed-chunk from the 0.5.6.post2 template on: line 1258 (SGLang
  // 0.5.6.post2, Llama-3.1-8B, ISL 8000) mixes, line 516 (0.5.1.post1, Qwen3-32B, ISL 1024) does
  // not; both take one prompt per prefill batch (ISL + 1,500 tokens).
  const MappedRun mixing = map_measured_run(row_at_line(runs, 1258), cat, bench);
  ASSERT_TRUE(mixing.mapped()) << mixing.skip_reason;
  EXPECT_EQ(mixing.scenario.at("engine").at("chunked_prefill_size"), 0);
  EXPECT_EQ(mixing.scenario.at("engine").at("enable_mixed_chunk"), true);
  EXPECT_EQ(mixing.scenario.at("engine").at("max_prefill_tokens"), 9500);
  const MappedRun older = map_measured_run(row_at_line(runs, 516), cat, bench);
  ASSERT_TRUE(older.mapped()) << older.skip_reason;
  EXPECT_EQ(older.scenario.at("engine").at("chunked_prefill_size"), 0);
  EXPECT_EQ(older.scenario.at("engine").at("enable_mixed_chunk"), false);
  EXPECT_EQ(older.scenario.at("engine").at("max_prefill_tokens"), 2524);
  const MappedRun blackwell = map_measured_run(row_at_line(runs, 116), cat, bench);
  ASSERT_TRUE(blackwell.mapped()) << blackwell.skip_reason;
  EXPECT_EQ(blackwell.gpu_class, "blackwell");
  EXPECT_EQ(blackwell.scenario.at("engine").at("scheduler_recv_interval"), 30);  // 16 clients

  // --client forces one client on every row.
  bench.client = BenchmarkClient::kAiperf;
  const MappedRun forced = map_measured_run(dated, cat, bench);
  EXPECT_EQ(forced.client, BenchmarkClient::kAiperf);
  EXPECT_FALSE(forced.scenario.at("workload").contains("range_ratio"));
  EXPECT_EQ(forced.scenario.at("workload").at("num_requests"), 80);
  EXPECT_EQ(forced.scenario.at("engine").at("max_num_seqs"), 128);
  EXPECT_EQ(bench.rounds_for(4, BenchmarkClient::kBenchServing), 10);
  EXPECT_EQ(bench.rounds_for(8192, BenchmarkClient::kBenchServing), 4);
}

// A benchmark workload of `clients` closed-loop clients with fixed lengths, `rounds` x clients
// requests after 2 x clients warm-ups, each send delayed by up to 50 ms.
scenarios::Json closed_loop_workload(int64_t clients, int64_t rounds, int64_t isl, int64_t osl) {
  return {{"type", "benchmark"},
          {"concurrency", clients},
          {"num_requests", rounds * clients},
          {"warmup_requests", 2 * clients},
          {"think_time_jitter", "50ms"},
          {"isl", isl},
          {"osl", osl}};
}

// Why closed loops do or do not stay in lock step, on a hand-checked case: 4 clients with
// 8,000-token prompts (Llama-3.1-8B on one H100, vLLM with a budget of 8,192 tokens: one prompt
// a pass), each send delayed by up to 50 ms. With fixed lengths a prompt that arrives while
// another is prefilled waits for it, and then the two requests finish one decode step apart and
// come back together: clients that meet stay together, the small delays keep making them meet,
// and the loop ends in lock step, a round's 4 prompts prefilled one after another (mean TTFT
// about (1 + 2 + 3 + 4) / 4 = 2.5 prefills). Output lengths drawn from [0.8 L, L], as
// benchmark_serving.py draws them, end the requests up to 80 decode steps apart, which breaks the
// groups up every round: each prompt arrives about alone and its TTFT is about one prefill (P:
// the TTFT of a single client).
TEST(ClosedLoop, ClientsWithDrawnLengthsDriftOutOfLockStep) {
  policies::register_builtin_policies();
  auto mean_ttft_ms = [](int64_t clients, std::optional<double> range_ratio) {
    scenarios::Json doc = {
        {"name", "closed_loop"},
        {"seed", 1},
        {"model", "llama-3.1-8b"},
        {"engine", {{"type", "vllm"}, {"max_num_seqs", 4}, {"max_num_batched_tokens", 8192}}},
        {"cluster", {{"gpu", "h100_sxm"}, {"instances", 1}, {"tp", 1}}},
        {"workload", closed_loop_workload(clients, 10, 8000, 400)},
        {"output", {{"sample_interval", "0s"}}}};
    if (range_ratio) doc["workload"]["range_ratio"] = *range_ratio;
    RunOptions options;
    options.keep_records = false;
    const RunOutcome o =
        run_scenario(scenarios::parse_scenario(doc, "closed_loop", "", root()), root(), options);
    return o.summary.ttft_s.mean * 1e3;
  };
  const double prefill = mean_ttft_ms(1, std::nullopt);
  const double lock_step = mean_ttft_ms(4, std::nullopt);
  const double drawn = mean_ttft_ms(4, 0.8);
  EXPECT_GT(lock_step, 2.0 * prefill) << "P " << prefill << " ms, lock step " << lock_step;
  EXPECT_LT(lock_step, 3.0 * prefill) << "P " << prefill << " ms, lock step " << lock_step;
  EXPECT_LT(drawn, 1.5 * prefill) << "P " << prefill << " ms, drawn lengths " << drawn;
  EXPECT_GT(drawn, 0.8 * 0.9 * prefill) << "P " << prefill << " ms, drawn lengths " << drawn;
}

// A benchmark workload of `clients` closed-loop clients with drawn lengths (prompts 800-1,000
// tokens, 320-400 output tokens), `rounds` x clients requests after 2 x clients warm-ups, each send
// delayed by up to 50 ms.
scenarios::Json drawn_closed_loop(int64_t clients, int64_t rounds) {
  scenarios::Json workload = closed_loop_workload(clients, rounds, 1000, 400);
  workload["range_ratio"] = 0.8;
  return workload;
}

// The summary of a run of `doc`, without request records.
reports::RunSummary summary_of(const scenarios::Json& doc) {
  RunOptions options;
  options.keep_records = false;
  const std::string name = doc.at("name");
  return run_scenario(scenarios::parse_scenario(doc, name, "", root()), root(), options).summary;
}

// Expects `held`'s mean TTFT to exceed `base`'s by `low` to `high` decode steps of `step_s`.
void expect_wait_in_steps(const reports::RunSummary& base, const reports::RunSummary& held,
                          double step_s, double low, double high) {
  const double wait_s = held.ttft_s.mean - base.ttft_s.mean;
  EXPECT_GT(wait_s, low * step_s) << "D " << step_s * 1e3 << " ms, TTFT " << base.ttft_s.mean * 1e3
                                  << " -> " << held.ttft_s.mean * 1e3 << " ms";
  EXPECT_LT(wait_s, high * step_s) << "D " << step_s * 1e3 << " ms, TTFT " << base.ttft_s.mean * 1e3
                                   << " -> " << held.ttft_s.mean * 1e3 << " ms";
}

// SGLang's mixed chunks on a hand-checked case: 8 clients with fixed 8,000-token prompts and 400
// output tokens (Llama-3.1-8B on one H100, SGLang 0.5.6.post2 with one prompt per prefill batch:
// max_prefill_tokens 9,500). Without mixing a prefill batch runs alone: a round's 8 prompts are
// prefilled one after another while every decode waits, the 8 requests then decode together and
// finish together, and the loop stays in lock step (mean TTFT about (1 + ... + 8) / 8 = 4.5
// prefills, P: a single client's TTFT). With mixed chunks (the release's own 8,192-token chunk)
// the decodes ride along in each prefill batch: the first requests of a round are tokens ahead
// when the last prompt is prefilled, finish earlier and come back apart, so fewer prompts meet.
TEST(ClosedLoop, SglangMixedChunksLoosenTheLockStep) {
  policies::register_builtin_policies();
  auto mean_ttft_ms = [](int64_t clients, bool mixed) {
    const scenarios::Json doc = {{"name", "mixed_chunks"},
                                 {"seed", 1},
                                 {"model", "llama-3.1-8b"},
                                 {"engine",
                                  {{"type", "sglang"},
                                   {"version", "0.5.6.post2"},
                                   {"chunked_prefill_size", mixed ? 0 : -1},
                                   {"enable_mixed_chunk", mixed},
                                   {"max_prefill_tokens", 9500}}},
                                 {"cluster", {{"gpu", "h100_sxm"}, {"instances", 1}, {"tp", 1}}},
                                 {"workload", closed_loop_workload(clients, 20, 8000, 400)},
                                 {"output", {{"sample_interval", "0s"}}}};
    return summary_of(doc).ttft_s.mean * 1e3;
  };
  const double prefill = mean_ttft_ms(1, false);
  const double alone = mean_ttft_ms(8, false);
  const double mixed = mean_ttft_ms(8, true);
  EXPECT_GT(alone, 4.0 * prefill) << "P " << prefill << " ms, prefill batches alone " << alone;
  EXPECT_LT(alone, 5.0 * prefill) << "P " << prefill << " ms, prefill batches alone " << alone;
  EXPECT_LT(mixed, 0.8 * alone) << "alone " << alone << " ms, mixed " << mixed;
  EXPECT_GT(mixed, prefill) << "P " << prefill << " ms, mixed " << mixed;
}

// SGLang's scheduler_recv_interval on a hand-checked case: 4 clients with drawn lengths (prompts
// 800-1,000 tokens, 320-400 output tokens: nearly every batch is a decode of the 4), Llama-3.1-8B
// on one H100. Taking new requests in every 10 decode batches instead of at every batch, a prompt
// that arrives while the others decode waits for the rest of the current 10: about 5 decode steps
// (D, which the TPOT gives) on average, and at most 10.
TEST(ClosedLoop, SglangTakesRequestsInEveryRecvIntervalDecodeBatches) {
  policies::register_builtin_policies();
  auto run = [](int64_t recv_interval) {
    const scenarios::Json doc = {
        {"name", "recv_interval"},
        {"seed", 1},
        {"model", "llama-3.1-8b"},
        {"engine", {{"type", "sglang"}, {"scheduler_recv_interval", recv_interval}}},
        {"cluster", {{"gpu", "h100_sxm"}, {"instances", 1}, {"tp", 1}}},
        {"workload", drawn_closed_loop(4, 20)},
        {"output", {{"sample_interval", "0s"}}}};
    return summary_of(doc);
  };
  const auto every = run(1);
  const auto tenth = run(10);
  expect_wait_in_steps(every, tenth, every.tpot_s.mean, 3.5, 6.5);
}

// TensorRT-LLM's balancing of new contexts over attention-DP ranks (attention_dp_config) on a
// hand-checked case: DeepSeek-V3 on 8 B200 ranks (attention DP 8, experts over 8), 32 clients
// with drawn lengths (prompts 800-1,000 tokens, 320-400 output tokens). A request finishes about
// every 11 decode steps (32 requests of about 360 steps), so a new prompt seldom finds a context
// on every rank: with timeout_iters 20 it waits for the count, which rises at every step, to reach
// the next multiple of 20: about 10 decode steps (D, which the TPOT gives) on average, at most 20.
TEST(ClosedLoop, TrtllmAttentionDpBalanceHoldsContextsUntilTheTimeout) {
  policies::register_builtin_policies();
  auto run = [](bool balance) {
    const scenarios::Json doc = {{"name", "adp_balance"},
                                 {"seed", 1},
                                 {"model", "deepseek-v3"},
                                 {"engine",
                                  {{"type", "trtllm"},
                                   {"attention_dp_enable_balance", balance},
                                   {"attention_dp_timeout_iters", 20},
                                   {"attention_dp_batching_wait_iters", 0}}},
                                 {"cluster",
                                  {{"gpu", "b200_sxm"},
                                   {"instances", 1},
                                   {"tp", 1},
                                   {"attention_dp", 8},
                                   {"ep", 8},
                                   {"weight_dtype", "fp8_block"},
                                   {"kv_dtype", "fp8"}}},
                                 {"workload", drawn_closed_loop(32, 10)},
                                 {"output", {{"sample_interval", "0s"}}}};
    return summary_of(doc);
  };
  const auto free = run(false);
  const auto balanced = run(true);
  expect_wait_in_steps(free, balanced, balanced.tpot_s.mean, 7.0, 12.0);
}

TEST(Fidelity, AStudyAccountsForEveryRowAndIsDeterministic) {
  // A TensorRT-LLM row (Llama-3.1-8B, TP 1), a vLLM row (Qwen3-32B, TP 8), a disaggregated row
  // without worker counts (skipped).
  const std::string csv = csv_with_lines("study", {1407, 906, 1122});
  const fs::path db = fs::temp_directory_path() / "servesim_fidelity_study.db";
  fs::remove(db);
  FidelityOptions options;
  options.db_path = db.string();
  options.jobs = 2;
  std::ostringstream first, second;
  ASSERT_EQ(run_fidelity(csv, options, root(), first), 0) << first.str();
  options.db_path.clear();
  ASSERT_EQ(run_fidelity(csv, options, root(), second), 0) << second.str();
  const std::string a = first.str(), b = second.str();
  EXPECT_NE(a.find("mapped to scenarios: 2 (2 dense, 0 MoE)"), std::string::npos) << a;
  EXPECT_NE(a.find("disaggregated row without prefill_num_workers"), std::string::npos) << a;
  // The same predictions twice (the tables, not the wall time).
  const size_t ta = a.find("Predictions with"), tb = b.find("Predictions with");
  ASSERT_NE(ta, std::string::npos);
  EXPECT_EQ(a.substr(ta, a.find("\nresults") - ta), b.substr(tb));

  const reports::QueryResult rows = reports::run_query(
      db.string(),
      "SELECT line, status, predicted_ttft_ms > 0, predicted_tpot_ms > 0 FROM fidelity_row "
      "ORDER BY line");
  ASSERT_EQ(rows.rows.size(), 3u);
  // Lines of the small CSV, in the shipped order: 2 (shipped line 906), 3 (1122), 4 (1407).
  EXPECT_EQ(rows.rows[0], (std::vector<std::string>{"2", "ok", "1", "1"}));
  EXPECT_EQ(rows.rows[1], (std::vector<std::string>{"3", "ok", "1", "1"}));
  EXPECT_EQ(rows.rows[2], (std::vector<std::string>{"4", "skipped", "NULL", "NULL"}));  // not predicted
}

// The fits start from a neutral point, never from the calibration in effect (fitted on every
// model, the held-out one included): the same rows give the same fitted calibration, held-out
// band included, whatever calibration.json says.
TEST(Fidelity, FitsDoNotStartFromTheShippedCalibration) {
  // vLLM rows of two models: Qwen3-32B on H100 (c = 8, 16) and Llama-3.1-8B FP8 on H200.
  const std::string csv = csv_with_lines("fit_start", {1093, 1096, 1314, 1321});
  // A data root like the shipped one but with another calibration in effect.
  const fs::path other = fs::temp_directory_path() / "servesim_fidelity_other_root";
  fs::remove_all(other);
  fs::create_directories(other / "models" / "engines");
  for (const auto& e : fs::directory_iterator(root().root)) {
    if (e.path().filename() != "models") fs::create_directory_symlink(e.path(), other / e.path().filename());
  }
  for (const auto& e : fs::directory_iterator(fs::path(root().root) / "models")) {
    if (e.path().filename() != "engines") {
      fs::create_directory_symlink(e.path(), other / "models" / e.path().filename());
    }
  }
  std::string calibration;
  {
    std::ifstream in(root().engine_calibration());
    std::stringstream text;
    text << in.rdbuf();
    calibration = text.str();
  }
  const std::string key = "\"cpu_iteration_us\": ";
  for (size_t at = calibration.find(key); at != std::string::npos; at = calibration.find(key, at + 1)) {
    const size_t end = calibration.find_first_of(",\n}", at + key.size());
    calibration.replace(at + key.size(), end - at - key.size(), "9000.0");
  }
  std::ofstream(other / "models" / "engines" / "calibration.json") << calibration;
  const scenarios::DataRoot other_root{other.string()};
  ASSERT_NE(scenarios::Catalogs::get(other_root).engine_calibrations.find("vllm", "hopper"), nullptr);
  EXPECT_EQ(
      scenarios::Catalogs::get(other_root).engine_calibrations.find("vllm", "hopper")->cpu.per_iteration,
      std::chrono::microseconds(9000));

  auto fitted = [&](const scenarios::DataRoot& r, const std::string& name) {
    FidelityOptions options = quick_fit_options();
    options.write_calibration = (fs::temp_directory_path() / name).string();
    std::ostringstream out;
    EXPECT_EQ(run_fidelity(csv, options, r, out), 0) << out.str();
    std::ifstream in(options.write_calibration);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  const std::string shipped = fitted(root(), "servesim_fit_shipped.json");
  const std::string elsewhere = fitted(other_root, "servesim_fit_other.json");
  EXPECT_NE(shipped.find("\"vllm\""), std::string::npos) << shipped;
  EXPECT_NE(shipped.find("held_out"), std::string::npos) << shipped;
  EXPECT_EQ(shipped, elsewhere);
  fs::remove_all(other);
  fs::remove(fs::temp_directory_path() / "servesim_fit_shipped.json");
  fs::remove(fs::temp_directory_path() / "servesim_fit_other.json");
}

// An engine and GPU class whose rows are of one model cannot hold a model out: it is not fitted,
// and its rows are predicted with the engine's Hopper fit (or the neutral start without one),
// like MoE rows, so the held-out report still has them and no calibration is written for it.
TEST(Fidelity, AGroupOfOneModelIsPredictedNotFitted) {
  // vLLM rows of two models on Hopper (Qwen3-32B on H100, Llama-3.1-8B FP8 on H200) and a
  // TensorRT-LLM Qwen3-32B row on GB200 (line 498), the only one of its engine on Blackwell.
  const std::string csv = csv_with_lines("one_model_group", {1093, 1314, 498});
  FidelityOptions options = quick_fit_options();
  options.write_calibration = (fs::temp_directory_path() / "servesim_fit_one_model.json").string();
  std::ostringstream out;
  ASSERT_EQ(run_fidelity(csv, options, root(), out), 0) << out.str();
  const std::string text = out.str();
  const size_t held = text.find("Held out ("), in_sample = text.find("In-sample ("),
               targets = text.find("\nTargets (");
  ASSERT_NE(held, std::string::npos) << text;
  ASSERT_NE(in_sample, std::string::npos) << text;
  ASSERT_NE(targets, std::string::npos) << text;
  const std::string held_table = text.substr(held, in_sample - held);
  const std::string in_sample_table = text.substr(in_sample, targets - in_sample);
  EXPECT_NE(held_table.find("trtllm / gb200_nvl72 / qwen3-32b"), std::string::npos) << text;
  EXPECT_EQ(in_sample_table.find("trtllm / gb200_nvl72 / qwen3-32b"), std::string::npos) << text;
  EXPECT_NE(text.find("Targets (dense rows, held out, 3 rows)"), std::string::npos) << text;
  std::ifstream in(options.write_calibration);
  std::stringstream written;
  written << in.rdbuf();
  EXPECT_NE(written.str().find("\"vllm\""), std::string::npos) << written.str();
  EXPECT_EQ(written.str().find("\"trtllm\""), std::string::npos) << written.str();
  fs::remove(options.write_calibration);
}

// --fit holds out each model, each GPU and each engine release of an engine and GPU class in turn.
// In vLLM's Hopper rows here the model and the GPU go together (Qwen3-32B on H100, Llama-3.1-8B on
// H200), so leaving one GPU out trains on the same rows as leaving its model out and must give
// the same errors; they hold one release (0.12.0), which therefore cannot be left out.
TEST(Fidelity, FitPrintsTheHeldOutEstimateOfEachAxisWithItsWorstGroup) {
  const std::string csv = csv_with_lines("axes", {1093, 1096, 1314, 1321});
  FidelityOptions options = quick_fit_options();
  std::ostringstream out;
  ASSERT_EQ(run_fidelity(csv, options, root(), out), 0) << out.str();
  const std::string text = out.str();
  const size_t at = text.find("Held-out estimates (");
  ASSERT_NE(at, std::string::npos) << text;
  const std::string section = text.substr(at, text.find("\n\n", at) - at);
  std::smatch model, gpu;
  const std::regex line_of_model(R"(\n  model +4 +([0-9.]+) % +([0-9.]+) % +([0-9.]+) %  (.+))");
  const std::regex line_of_gpu(R"(\n  GPU +4 +([0-9.]+) % +([0-9.]+) % +([0-9.]+) %  (.+))");
  ASSERT_TRUE(std::regex_search(section, model, line_of_model)) << section;
  ASSERT_TRUE(std::regex_search(section, gpu, line_of_gpu)) << section;
  for (int k = 1; k <= 3; ++k) EXPECT_EQ(model[k].str(), gpu[k].str()) << section;
  // Groups of fewer than 5 rows are not named as the worst.
  EXPECT_EQ(model[4].str(), "-") << section;
  EXPECT_NE(section.find("engine release       0  (no engine and GPU class holds two of its "
                         "values)"),
            std::string::npos)
      << section;
}

// The MoE rows of an engine, GPU class and expert weight format that hold two models fit an
// expert-kernel scale: each model held out in turn, then on both; the scale is written under
// "moe_kernels" with its held-out band, apart from the CPU calibrations, and the report prints it
// with the held-out errors at the tables' speed and with the scale.
TEST(Fidelity, MoeRowsOfTwoModelsFitAnExpertKernelScaleLeaveOneModelOut) {
  // SGLang on H200, block-scaled FP8 experts: DeepSeek-R1 (line 31, TP 8, c = 4) and
  // Qwen3-235B-A22B (line 1190, TP 2, c = 3).
  const std::string csv = csv_with_lines("moe_fit", {31, 1190});
  FidelityOptions options = quick_fit_options();
  options.write_calibration = (fs::temp_directory_path() / "servesim_fit_moe.json").string();
  std::ostringstream out;
  ASSERT_EQ(run_fidelity(csv, options, root(), out), 0) << out.str();
  const std::string text = out.str();
  const std::regex line(
      R"(\n  sglang  hopper    fp8_block  x([0-9.]+)  held out: TTFT MdAPE [0-9.]+ -> [0-9.]+ %, TPOT MdAPE [0-9.]+ -> [0-9.]+ %, both within 25 % [0-9.]+ -> [0-9.]+ %  \[2 aggregated MoE rows of 2 models \(deepseek-v3, qwen3-235b-a22b\)\])");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(text, m, line)) << text;
  const double scale = std::stod(m[1].str());
  EXPECT_GE(scale, 0.25);
  EXPECT_LE(scale, 2.5);
  const models::EngineCalibrations written =
      models::EngineCalibrations::load(options.write_calibration);
  const models::MoeKernelCalibration* k = written.find_moe("sglang", "hopper", "fp8_block");
  ASSERT_NE(k, nullptr);
  EXPECT_NEAR(k->scale, scale, 1e-3);
  ASSERT_TRUE(k->held_out.has_value());
  EXPECT_EQ(k->held_out->rows, 2);
  EXPECT_EQ(k->held_out->models, 2);
  EXPECT_EQ(written.find("sglang", "hopper"), nullptr);  // no dense rows: no CPU calibration
  fs::remove(options.write_calibration);
}

TEST(Fidelity, EmitScenarioPrintsARowsScenario) {
  const std::string csv = csv_with_lines("emit", {906});
  FidelityOptions options;
  options.emit_scenario = "2";  // the small CSV's line 2 (shipped line 906); a row id works too
  std::ostringstream out;
  ASSERT_EQ(run_fidelity(csv, options, root(), out), 0);
  const scenarios::Json doc = scenarios::Json::parse(out.str());
  EXPECT_EQ(doc.at("engine").at("type"), "trtllm");
  options.emit_scenario = "no-such-row";
  EXPECT_THROW(run_fidelity(csv, options, root(), out), ConfigError);
  // A client jitter that is no duration is an error naming the option.
  options.emit_scenario.clear();
  options.bench.client_jitter = "50 parsecs";
  try {
    run_fidelity(csv, options, root(), out);
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--client-jitter"), std::string::npos) << e.what();
  }
}

// A benchmark's `rate` drives its generator; it is not also the `rate` transform of trace
// workloads, which would rescale the drawn arrivals to an exact mean.
TEST(BenchmarkWorkload, ARateDrivesTheGeneratorAndIsNotAppliedAgain) {
  policies::register_builtin_policies();
  scenarios::Json doc = scenarios::Json::parse(scenarios::embedded_quickstart_json(), nullptr,
                                               true, /*ignore_comments=*/true);
  doc["workload"] = {{"type", "benchmark"}, {"rate", 4.0},          {"num_requests", 50},
                     {"isl", 100},          {"osl", 10}};
  const scenarios::Scenario bench = scenarios::parse_scenario(doc, "bench", "", root());
  doc["workload"] = {{"type", "generated"},
                     {"arrival", {{"process", "poisson"}, {"rate", 4.0}}},
                     {"count", 50},
                     {"lengths", {{"type", "fixed"}, {"prompt", 100}, {"output", 10}}}};
  const scenarios::Scenario generated = scenarios::parse_scenario(doc, "generated", "", root());
  const Workload a = scenarios::build_workload(bench, root());
  const Workload b = scenarios::build_workload(generated, root());
  ASSERT_EQ(a.requests.size(), 50u);
  ASSERT_EQ(b.requests.size(), 50u);
  for (size_t i = 0; i < a.requests.size(); ++i) {
    EXPECT_EQ(a.requests[i].arrival, b.requests[i].arrival) << i;
  }
}

TEST(Fidelity, RunPrintsTheHeldOutErrorBandOfItsEngine) {
  policies::register_builtin_policies();
  const scenarios::Scenario plain = scenarios::load_embedded_quickstart({}, root());
  EXPECT_NE(error_band(plain, root()).find("no engine model"), std::string::npos);
  const scenarios::Scenario vllm =
      scenarios::load_embedded_quickstart({"engine.type=vllm"}, root());
  const std::string band = error_band(vllm, root());
  EXPECT_NE(band.find("hopper"), std::string::npos) << band;
  EXPECT_NE(band.find("held-out error of vllm"), std::string::npos) << band;
}

}  // namespace
}  // namespace servesim::app
