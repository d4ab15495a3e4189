// `--json` on run, capacity, plan, validate and iteration: stdout is one JSON document with the
// keys docs/results.md documents, and the human text goes to stderr.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace servesim {
namespace {
namespace fs = std::filesystem;
using Json = nlohmann::json;

struct Output {
  int rc = -1;
  std::string out, err;
};

// Runs `args` with the servesim binary; stdout and stderr apart.
Output servesim(const std::string& args) {
  const fs::path err_file =
      fs::temp_directory_path() / ("servesim_json_test_" + std::to_string(::getpid()) + ".err");
  Output o;
  FILE* p =
      popen((std::string(SERVESIM_BIN) + " " + args + " 2>" + err_file.string()).c_str(), "r");
  if (!p) return o;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) o.out.append(buf.data(), n);
  const int status = pclose(p);
  o.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream f(err_file);
  std::stringstream ss;
  ss << f.rdbuf();
  o.err = ss.str();
  fs::remove(err_file);
  return o;
}

Json parse(const Output& o) {
  Json doc;
  EXPECT_NO_THROW(doc = Json::parse(o.out)) << "stdout is not one JSON document:\n" << o.out;
  return doc;
}

TEST(JsonOutput, Run) {
  const fs::path db =
      fs::temp_directory_path() / ("servesim_json_run_" + std::to_string(::getpid()) + ".db");
  fs::remove(db);
  const Output o =
      servesim("run tests/golden/scenarios/quickstart/scenario.json --json --db " + db.string());
  ASSERT_EQ(o.rc, 0) << o.err;
  const Json doc = parse(o);
  EXPECT_EQ(doc["command"], "run");
  EXPECT_EQ(doc["kind"], "llm");
  EXPECT_EQ(doc["scenario"], "golden_quickstart");
  EXPECT_EQ(doc["policy"], "coloc");
  EXPECT_EQ(doc["run_id"], 1);
  EXPECT_EQ(doc["db"], db.string());
  EXPECT_EQ(doc["instances"].size(), 1u);
  EXPECT_EQ(doc["instances"][0]["count"], 2);
  EXPECT_GT(doc["instances"][0]["kv_tokens"].get<int64_t>(), 0);
  EXPECT_DOUBLE_EQ(doc["slo"]["ttft_s"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(doc["slo"]["tpot_s"].get<double>(), 0.05);
  const Json& s = doc["summary"];
  EXPECT_EQ(s["requests"].get<double>(), 456);
  for (const char* key :
       {"ttft_p99_s", "tbt_p99_s", "tpot_p50_s", "e2e_p50_s", "queueing_p99_s", "slo_attainment",
        "goodput_tokens_per_s", "goodput_requests_per_s", "request_rate_per_s", "gpu_seconds"}) {
    ASSERT_TRUE(s.contains(key)) << key;
    EXPECT_TRUE(s[key].is_number()) << key;
  }
  EXPECT_GT(s["ttft_p99_s"].get<double>(), 0);
  EXPECT_LT(s["ttft_p99_s"].get<double>(), 10);  // seconds, not ms
  EXPECT_TRUE(doc["warnings"].is_array());
  EXPECT_EQ(doc["fingerprint"].get<std::string>().size(), 16u);
  EXPECT_EQ(doc["summary_exact"], true);
  // The human text went to stderr.
  EXPECT_NE(o.err.find("scenario   golden_quickstart"), std::string::npos);
  EXPECT_EQ(o.out.find("scenario   "), std::string::npos);
  fs::remove(db);
  fs::remove(db.string() + "-wal");
  fs::remove(db.string() + "-shm");
}

// output.requests "none": the same run, its summary from histograms and marked so.
TEST(JsonOutput, RunWithoutRequestRecordsMarksItsSummary) {
  const Output o = servesim(
      "run tests/golden/scenarios/quickstart/scenario.json --no-db --json "
      "--set output.requests=none");
  ASSERT_EQ(o.rc, 0) << o.err;
  const Json doc = parse(o);
  EXPECT_EQ(doc["summary_exact"], false);
  EXPECT_EQ(doc["summary"]["requests"].get<double>(), 456);
  EXPECT_NE(o.err.find("output.requests \"none\""), std::string::npos) << o.err;
}

// --explain-misses adds the miss breakdown; its causes add up to the misses, which are the
// requests the attainment leaves out (every request of this run meets its TBT objective).
TEST(JsonOutput, RunExplainsMisses) {
  const Output o = servesim(
      "run tests/golden/scenarios/quickstart/scenario.json --no-db --json --explain-misses "
      "--set slo.ttft=50ms --set slo.tpot=10ms");
  ASSERT_EQ(o.rc, 0) << o.err;
  const Json doc = parse(o);
  ASSERT_TRUE(doc.contains("misses")) << doc.dump();
  const Json& m = doc["misses"];
  EXPECT_GT(m["ttft_missed"].get<int64_t>(), 0);
  EXPECT_GT(m["tpot_missed"].get<int64_t>(), 0);
  EXPECT_EQ(m["requests"].get<double>(), doc["summary"]["requests"].get<double>());
  EXPECT_NEAR(1.0 - m["missed"].get<double>() / m["requests"].get<double>(),
              doc["summary"]["slo_attainment"].get<double>(), 1e-9);
  for (const char* objective : {"ttft", "tpot"}) {
    int64_t sum = 0;
    for (const auto& [cause, count] : m[objective].items()) sum += count.get<int64_t>();
    EXPECT_EQ(sum, m[std::string(objective) + "_missed"].get<int64_t>()) << objective;
  }
  EXPECT_NE(o.err.find("SLO misses by cause"), std::string::npos);
  // Without the flag the document has no breakdown.
  EXPECT_FALSE(parse(servesim("run tests/golden/scenarios/quickstart/scenario.json --no-db --json"))
                   .contains("misses"));
}

TEST(JsonOutput, RunWarnsOnActivationReserve) {
  const Output o = servesim(
      "run bench/scenarios/vidur_llama2_70b_a100.json --no-db --json "
      "--set policy.max_num_batched_tokens=32768 --set workload.count=50");
  ASSERT_EQ(o.rc, 0) << o.err;
  const Json doc = parse(o);
  EXPECT_TRUE(doc["db"].is_null());
  EXPECT_TRUE(doc["run_id"].is_null());
  EXPECT_GT(doc["instances"][0]["activation_share_of_kv_budget"].get<double>(), 0.25);
  bool warned = false;
  for (const Json& w : doc["warnings"]) {
    warned = warned || w.get<std::string>().find("activation reserve") != std::string::npos;
  }
  EXPECT_TRUE(warned) << doc["warnings"].dump();
  // The default token budget stays below the threshold: no such warning.
  const Json plain = parse(servesim(
      "run bench/scenarios/vidur_llama2_70b_a100.json --no-db --json --set workload.count=50"));
  for (const Json& w : plain["warnings"]) {
    EXPECT_EQ(w.get<std::string>().find("activation reserve"), std::string::npos);
  }
}

TEST(JsonOutput, Capacity) {
  const fs::path db =
      fs::temp_directory_path() / ("servesim_json_capacity_" + std::to_string(::getpid()) + ".db");
  fs::remove(db);
  const Output o = servesim(
      "capacity tests/golden/scenarios/quickstart/scenario.json --slo ttft_p90=2s --json --db " +
      db.string());
  ASSERT_EQ(o.rc, 0) << o.err;
  const Json doc = parse(o);
  EXPECT_EQ(doc["command"], "capacity");
  EXPECT_EQ(doc["db"], db.string());
  EXPECT_EQ(doc["capacity_id"], 1);
  // The search is in the database, one row per probe, and the report draws it.
  const fs::path html = db.string() + ".html";
  const Output report = servesim("report " + db.string() + " --capacity 1 -o " + html.string());
  EXPECT_EQ(report.rc, 0) << report.err;
  EXPECT_NE(report.out.find("capacity search 1, 3 charts"), std::string::npos) << report.out;
  std::ifstream in(html);
  std::stringstream page;
  page << in.rdbuf();
  EXPECT_NE(page.str().find("data-chart=\"capacity1-latency-ttft\""), std::string::npos);
  EXPECT_NE(page.str().find("data-probe=\"" + std::to_string(doc["probes"].size()) + "\""),
            std::string::npos);
  fs::remove(html);
  for (const char* side : {"", "-wal", "-shm"}) fs::remove(db.string() + side);
  EXPECT_TRUE(parse(servesim(
      "capacity tests/golden/scenarios/quickstart/scenario.json --slo ttft_p90=2s --json --no-db"))
                  ["capacity_id"]
                      .is_null());
  EXPECT_EQ(doc["objectives"], Json::array({"ttft_p90=2s"}));
  EXPECT_TRUE(doc["attainment_required"].is_null());
  const double capacity = doc["capacity_rps"].get<double>();
  EXPECT_GT(capacity, 0);
  ASSERT_GE(doc["probes"].size(), 2u);
  bool found = false;
  for (const Json& p : doc["probes"]) {
    ASSERT_TRUE(p["checks"].is_array());
    EXPECT_EQ(p["checks"][0]["name"], "ttft_p90");
    EXPECT_EQ(p["checks"].back()["name"], "sustained");
    found = found || (p["meets"].get<bool>() && p["rate_per_s"].get<double>() == capacity);
  }
  EXPECT_TRUE(found);
  EXPECT_FALSE(doc["binding"].empty());
  EXPECT_TRUE(doc["at_capacity"]["goodput_tokens_per_s"].is_number());
  // Which objectives decide, and that attainment is not one of them, is said on stderr.
  EXPECT_NE(o.err.find("deciding   ttft_p90 <= 2000.0 ms"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("not a criterion"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("binding    "), std::string::npos) << o.err;
}

TEST(JsonOutput, Plan) {
  const Output o = servesim("plan tests/golden/plans/small.plan.json --no-db --jobs 2 --json");
  ASSERT_EQ(o.rc, 0) << o.err;
  const Json doc = parse(o);
  EXPECT_EQ(doc["command"], "plan");
  EXPECT_EQ(doc["plan"], "small");
  EXPECT_EQ(doc["mode"], "target");
  EXPECT_DOUBLE_EQ(doc["target_rate_per_s"].get<double>(), 12.0);
  EXPECT_EQ(doc["configs"], 20);
  int counted = 0;
  for (const auto& [status, n] : doc["status_counts"].items()) counted += n.get<int>();
  EXPECT_EQ(counted, 20);
  ASSERT_TRUE(doc["chosen"].is_object());
  EXPECT_EQ(doc["chosen"]["status"], "meets");
  EXPECT_GT(doc["chosen"]["cost_per_hour"].get<double>(), 0);
  EXPECT_FALSE(doc["frontier"].empty());
  EXPECT_EQ(doc["top"][0]["index"], doc["chosen"]["index"]);
  EXPECT_TRUE(doc["plan_id"].is_null());
  EXPECT_EQ(doc["digest"].get<std::string>().size(), 16u);
  EXPECT_NE(o.err.find("plan digest"), std::string::npos);
}

TEST(JsonOutput, Validate) {
  const Output o = servesim("validate --gpu h100_sxm --json");
  ASSERT_EQ(o.rc, 0) << o.err;
  const Json doc = parse(o);
  EXPECT_EQ(doc["command"], "validate");
  EXPECT_EQ(doc["failed"], 0);
  ASSERT_FALSE(doc["leave_one_out"]["cells"].empty());
  EXPECT_EQ(doc["leave_one_out"]["cells"][0]["gpu"], "h100_sxm");
  ASSERT_FALSE(doc["iteration_checks"].empty());
  EXPECT_FALSE(doc["iteration_checks"][0]["points"].empty());
  EXPECT_TRUE(doc["forward_passes"].is_array());
  // The GEMM efficiency report: the shipped vLLM FP8 tables of the H100 are slower than its bf16
  // table per unit of work (flagged, kept as measured on Hopper).
  ASSERT_FALSE(doc["gemm_tables"]["efficiency"].empty());
  bool fp8_flagged = false;
  for (const Json& v : doc["gemm_tables"]["inversions"]) {
    if (v["kind"] == "precision" && v["low"] == "fp8_e4m3" && v["high"] == "bf16") {
      fp8_flagged = true;
      EXPECT_GT(v["time_ratio"].get<double>(), 1.0);
      EXPECT_FALSE(v["repriced"].get<bool>());
    }
  }
  EXPECT_TRUE(fp8_flagged);
  EXPECT_EQ(doc["gemm_tables"]["inversions_flagged"].get<size_t>(),
            doc["gemm_tables"]["inversions"].size());
}

// On the B200 the inverted per-tensor FP8 table is the one the cost model reprices.
TEST(JsonOutput, ValidateB200SaysWhichInversionTheCostModelReprices) {
  const Output o = servesim("validate --gpu b200_sxm --no-leave-one-out --no-iterations --json");
  ASSERT_EQ(o.rc, 0) << o.err;
  const Json doc = parse(o);
  int repriced = 0;
  for (const Json& v : doc["gemm_tables"]["inversions"]) {
    if (v["repriced"].get<bool>()) {
      repriced++;
      EXPECT_EQ(v["low"], "fp8_e4m3");
    }
  }
  EXPECT_EQ(repriced, 1);
}

TEST(JsonOutput, Iteration) {
  const Output o = servesim(
      "iteration --model llama-3.1-70b --gpu h100_sxm --tp 4 --prefill 2048 --decode-batch 64 "
      "--context 1500 --json");
  ASSERT_EQ(o.rc, 0) << o.err;
  const Json doc = parse(o);
  EXPECT_EQ(doc["command"], "iteration");
  EXPECT_EQ(doc["model"], "llama-3.1-70b");
  EXPECT_EQ(doc["tp"], 4);
  EXPECT_EQ(doc["query_tokens"], 2048 + 64);
  double sum = 0;
  for (const auto& [name, ms] : doc["operators"].items()) sum += ms.get<double>();
  EXPECT_NEAR(sum, doc["operators_total_ms"].get<double>(), 1e-6);
  EXPECT_GT(doc["operators"]["mlp_gemm_ms"].get<double>(), 0);
  EXPECT_GT(doc["operators"]["allreduce_ms"].get<double>(), 0);  // TP 4
  EXPECT_GE(doc["iteration_ms"].get<double>(), doc["peak_bound_ms"].get<double>());
  // Text form: the breakdown table.
  const Output text = servesim("iteration --prefill 512");
  ASSERT_EQ(text.rc, 0) << text.err;
  EXPECT_NE(text.out.find("attention_prefill"), std::string::npos);
  EXPECT_EQ(servesim("iteration").rc, 2);
}

// A multimodal workload's prompt chunk also encodes its images: the pass costs more than the same
// prompt as text, and a chunk after cached tokens encodes nothing.
TEST(JsonOutput, IterationEncodesAMultimodalPromptsImages) {
  const std::string pass = "iteration --model qwen3.5-27b --gpu h100_sxm --tp 4 --prefill 1536 ";
  const std::string images = "--set 'workload.images={\"width\":1024,\"height\":1024}' ";
  const Output text = servesim(pass + "--json");
  const Output mm = servesim(pass + images + "--json");
  const Output later = servesim(pass + images + "--prefill-cached 1024 --json");
  ASSERT_EQ(text.rc, 0) << text.err;
  ASSERT_EQ(mm.rc, 0) << mm.err;
  ASSERT_EQ(later.rc, 0) << later.err;
  EXPECT_EQ(parse(text)["encoded_images"], 0);
  EXPECT_EQ(parse(mm)["encoded_images"], 1);
  EXPECT_EQ(parse(later)["encoded_images"], 0);
  EXPECT_GT(parse(mm)["iteration_ms"].get<double>(), parse(text)["iteration_ms"].get<double>());
  EXPECT_NE(parse(mm)["cost_model"].get<std::string>().find("vision encoder"), std::string::npos);
}

TEST(ListPolicies, IncludesDllmPolicies) {
  const Output o = servesim("list policies");
  ASSERT_EQ(o.rc, 0);
  for (const char* name : {"coloc", "disagg", "dynaserve", "dopd", "dyn-load", "dyn-sla",
                           "dllm-serve", "fast-dllm", "dllm-cache", "sparse-dllm"}) {
    EXPECT_NE(o.out.find(std::string("  ") + name + " "), std::string::npos) << name;
  }
}

}  // namespace
}  // namespace servesim
