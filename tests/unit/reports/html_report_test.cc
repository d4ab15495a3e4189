#include "reports/html_report.h"

#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "reports/capacity_store.h"
#include "reports/plan_store.h"
#include "reports/sqlite_sink.h"
#include "reports_temp_dir.h"
#include "core/error.h"

namespace servesim::reports {
namespace {

size_t count(const std::string& text, const std::string& pattern) {
  const std::regex re(pattern);
  return static_cast<size_t>(
      std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

class HtmlReportTest : public testing::TempDirTest {
 protected:
  // One run of `n` requests on two instances, with samples, scalars and a TBT histogram.
  // A plan in target mode (1 req/s, attainment 0.9).
  static int64_t begin_target_plan(PlanStore& store) {
    return store.begin_plan(
        {"p", "p.json", "target", "now", R"({"slo": {"attainment": 0.9}})", 1.0});
  }

  // A config of `gpus` GPUs at `cost_per_hour` that meets the plan's target.
  static PlanConfigRow meeting_config(int64_t index, const std::string& label, int64_t gpus,
                                      double cost_per_hour) {
    PlanConfigRow row;
    row.config_index = index;
    row.label = label;
    row.status = "meets";
    row.num_gpus = gpus;
    row.cost_per_hour = cost_per_hour;
    row.meets_target = 1;
    return row;
  }

  // `output_tokens_per_s` > 0: that run scalar too, and a mean TPOT of 1 / (n x 10) s. Each
  // instance's iterations: batches of 1..4 requests, of 4 and 300 tokens.
  int64_t write_run(SqliteSink& sink, const std::string& policy, int n, bool split = false,
                    double output_tokens_per_s = 0) {
    const int64_t id = sink.begin_run({"unit", policy, "round_robin", "fixed", "test", "now", 1},
                                      {{"slo.ttft", "\"1s\""},
                                       {"slo.tbt_p99", "\"100ms\""},
                                       {"cluster.instances", "2"},
                                       {"policy.type", policy}});
    for (int i = 0; i < n; ++i) {
      sim::RequestRecord r;
      r.request_id = static_cast<uint64_t>(i);
      r.instance_id = i % 2;
      r.arrival_ns = int64_t{i} * 100'000'000;
      r.first_scheduled_ns = r.arrival_ns + 1'000'000;
      r.first_token_ns = r.arrival_ns + 50'000'000 + int64_t{i} * 1'000'000;
      r.done_ns = r.first_token_ns + 500'000'000;
      r.prompt_tokens = 100 + 10 * i;
      r.output_tokens = 20;
      r.preemptions = i % 7 == 0 ? 1 : 0;
      // Split requests: every other one, at 30 of its 120 tokens (ratio 0.25).
      if (split && i % 2 == 0) r.split_tokens = 30;
      sink.listener().on_request(r);
    }
    for (int t = 0; t < 20; ++t) {
      for (int inst = 0; inst < 2; ++inst) {
        const std::string e = "instance/" + std::to_string(inst);
        sink.listener().on_sample({int64_t{t} * 1'000'000'000, e, "waiting", double(t % 3)});
        sink.listener().on_sample({int64_t{t} * 1'000'000'000, e, "running", double(t % 5)});
        sink.listener().on_sample({int64_t{t} * 1'000'000'000, e, "kv_utilization", 0.1 * inst});
      }
    }
    sink.add_scalar("run", "slo_attainment", 0.95);
    sink.add_scalar("run", "goodput_tokens_per_s", policy == "coloc" ? 100.0 : 120.0);
    sink.add_scalar("run", "ttft_p99_s", 0.2);
    if (output_tokens_per_s > 0) {
      sink.add_scalar("run", "output_tokens_per_s", output_tokens_per_s);
      sink.add_scalar("run", "tpot_mean_s", 1.0 / (n * 10.0));
    }
    for (int inst = 0; inst < 2; ++inst) {
      LogHistogram requests, tokens;
      for (int b = 1; b <= 4; ++b) requests.add(b, 10 * b + inst);
      tokens.add(4, 30);
      tokens.add(300, 10 + inst);
      sink.add_iteration_histogram(inst, "batch_requests", requests.bins());
      sink.add_iteration_histogram(inst, "batch_tokens", tokens.bins());
    }
    LogHistogram h;
    for (int i = 1; i <= 100; ++i) h.add(int64_t{i} * 1'000'000, 1);
    sink.add_tbt_histogram(h);
    sink.end_run("ok", 0.1, "0000000000000000");
    return id;
  }
};

TEST_F(HtmlReportTest, OneRunHasEveryChartAndTheSloLines) {
  const std::string db = path("r.db");
  {
    SqliteSink sink(db);
    write_run(sink, "coloc", 50);
  }
  ReportStats stats;
  const std::string html = render_report(db, {}, &stats);  // the last run by default
  EXPECT_EQ(stats.runs, 1u);
  EXPECT_EQ(stats.charts, 13u);
  EXPECT_EQ(stats.bytes, html.size());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  // One inline script (the hover tooltips), nothing loaded from elsewhere.
  EXPECT_EQ(count(html, "<script"), 1u);
  EXPECT_EQ(count(html, "<script>"), 1u);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_NE(html.find("addEventListener(\"mousemove\""), std::string::npos);
  EXPECT_EQ(count(html, "data-chart=\"run1-cdf-"), 5u);
  // The TTFT SLO: on its CDF and on TTFT vs prompt length.
  EXPECT_EQ(count(html, "data-marker=\"TTFT SLO 1000 ms\""), 2u);
  EXPECT_EQ(count(html, "data-marker=\"TBT p99 SLO 100 ms\""), 1u);
  EXPECT_NE(html.find("95.0 %"), std::string::npos);  // SLO attainment
  EXPECT_NE(html.find("cluster.instances"), std::string::npos);
  // KV use: one line per instance.
  const auto kv = html.find("data-chart=\"run1-ts-kv\"");
  ASSERT_NE(kv, std::string::npos);
  const std::string kv_svg = html.substr(kv, html.find("</svg>", kv) - kv);
  EXPECT_EQ(count(kv_svg, "class=\"legend-entry\""), 2u);
}

// Every chart declares its axes for the hover script, and every line carries its name.
TEST_F(HtmlReportTest, ChartsDeclareTheirAxesForHovering) {
  const std::string db = path("r.db");
  {
    SqliteSink sink(db);
    write_run(sink, "coloc", 50);
  }
  const std::string html = render_report(db, {});
  const size_t charts = count(html, "<svg class=\"chart\"");
  EXPECT_EQ(count(html,
                  "<svg class=\"chart\"[^>]* data-x0=\"[^\"]+\" data-x1=\"[^\"]+\" "
                  "data-px0=\"[^\"]+\" data-px1=\"[^\"]+\" data-y0="),
            charts);
  EXPECT_EQ(count(html, "data-x-label=\"latency, ms \\(log scale\\)\" data-y-label=\"share of"),
            5u);
  EXPECT_EQ(count(html, "data-log-x=\"1\""), 5u);  // the CDFs
  EXPECT_NE(html.find("<title>instance 0</title></path>"), std::string::npos);
  EXPECT_NE(html.find("id = \"chart-tooltip\""), std::string::npos);
}

// Per iteration: the batch sizes and tokens summed over instances (bars) with a line per instance;
// TTFT against prompt length, one point per request.
TEST_F(HtmlReportTest, RunDrawsIterationDistributionsAndTtftVsPromptLength) {
  const std::string db = path("r.db");
  {
    SqliteSink sink(db);
    write_run(sink, "coloc", 50);
  }
  const std::string html = render_report(db, {});
  auto chart = [&](const std::string& id) {
    const auto at = html.find("data-chart=\"" + id + "\"");
    return at == std::string::npos ? std::string() : html.substr(at, html.find("</svg>", at) - at);
  };
  const std::string size = chart("run1-batch-size");
  ASSERT_FALSE(size.empty());
  // Batches of b = 1..4 requests, 10 b + instance of each per instance: 41 of 204 of 2 requests.
  EXPECT_EQ(count(size, "<rect class=\"bar\" data-series=\"all instances\""), 4u);
  EXPECT_NE(size.find("2 requests in the batch: 20.1 % of iterations"), std::string::npos);
  EXPECT_EQ(count(size, "class=\"legend-entry\""),
            3u);  // all instances, instance 0, 1
  EXPECT_NE(size.find("Batch size: requests per iteration (mean 2.99)"), std::string::npos);
  const std::string tokens = chart("run1-batch-tokens");
  ASSERT_FALSE(tokens.empty());
  // 4 and 300 tokens: re-binned into bins of 10 (300 / 40 rounds up to 10).
  EXPECT_EQ(count(tokens, "<rect class=\"bar\""), 2u);
  EXPECT_NE(tokens.find("0-10 tokens computed: 74.1 % of iterations"), std::string::npos) << tokens;
  const std::string ttft = chart("run1-ttft-prompt");
  ASSERT_FALSE(ttft.empty());
  EXPECT_EQ(count(ttft, "<circle class=\"point\" data-series=\"requests\""), 50u);
  EXPECT_NE(ttft.find("data-x=\"590\" data-y=\"99\""), std::string::npos);
}

// A large run's scatter is thinned to kMaxScatterPoints, the same way every time, keeping the
// slowest requests.
TEST_F(HtmlReportTest, TtftScatterIsThinnedDeterministically) {
  const std::string db = path("r.db");
  {
    SqliteSink sink(db);
    write_run(sink, "coloc", 4000);
  }
  const std::string html = render_report(db, {});
  EXPECT_EQ(html, render_report(db, {}));
  const auto at = html.find("data-chart=\"run1-ttft-prompt\"");
  ASSERT_NE(at, std::string::npos);
  const std::string svg = html.substr(at, html.find("</svg>", at) - at);
  const size_t points = count(svg, "<circle class=\"point\"");
  EXPECT_LE(points, kMaxScatterPoints);
  EXPECT_GE(points, kMaxScatterPoints * 9 / 10);
  EXPECT_NE(svg.find("(" + std::to_string(points) + " of 4000 requests)"), std::string::npos);
  // The slowest request (the last: TTFT 50 ms + 3999 ms) is drawn.
  EXPECT_NE(svg.find("data-x=\"40090\" data-y=\"4049\""), std::string::npos);
}

TEST_F(HtmlReportTest, SplitRequestsGetTheSplitRatioDistribution) {
  const std::string db = path("r.db");
  {
    SqliteSink sink(db);
    write_run(sink, "dynaserve", 40, /*split=*/true);
  }
  ReportStats stats;
  const std::string html = render_report(db, {}, &stats);
  EXPECT_EQ(stats.charts, 14u);
  const auto at = html.find("data-chart=\"run1-split-1\"");
  ASSERT_NE(at, std::string::npos) << html;
  const std::string svg = html.substr(at, html.find("</svg>", at) - at);
  EXPECT_NE(svg.find("20 of 40 requests split"), std::string::npos);
}

TEST_F(HtmlReportTest, ComparisonOverlaysRunsWithDeltas) {
  const std::string db = path("r.db");
  {
    SqliteSink sink(db);
    write_run(sink, "coloc", 50);
    write_run(sink, "disagg", 40);
  }
  ReportOptions options;
  options.run_ids = {1, 2};
  const std::string html = render_report(db, options);
  const auto ttft = html.find("data-chart=\"cmp-cdf-ttft\"");
  ASSERT_NE(ttft, std::string::npos);
  const std::string svg = html.substr(ttft, html.find("</svg>", ttft) - ttft);
  EXPECT_EQ(count(svg, "<path class=\"series\""), 2u);
  EXPECT_EQ(count(svg, "class=\"legend-entry\""), 2u);
  EXPECT_NE(html.find("+20.0 %"), std::string::npos);  // goodput 100 -> 120
  EXPECT_NE(html.find("1 of 4 keys differ"), std::string::npos);
}

TEST_F(HtmlReportTest, PlanShowsFrontierChosenAndPruning) {
  const std::string db = path("r.db");
  {
    SqliteSink sink(db);
    PlanStore store(db);
    const int64_t plan = begin_target_plan(store);
    const int64_t r1 = write_run(sink, "coloc", 10);
    const int64_t r2 = write_run(sink, "coloc", 10);
    store.add_run(plan, 0, r1, 1.0, true);
    store.add_run(plan, 0, r2, 2.0, false);
    PlanConfigRow a;
    a.config_index = 0;
    a.label = "cheap";
    a.status = "meets";
    a.cost_per_hour = 2;
    a.capacity_rps = 1.5;
    store.add_config(plan, a);
    PlanConfigRow b = a;
    b.config_index = 1;
    b.label = "big";
    b.cost_per_hour = 8;
    b.capacity_rps = 6;
    store.add_config(plan, b);
    PlanConfigRow c = a;
    c.config_index = 2;
    c.label = "huge";
    c.status = "pruned";
    c.reason = "does not fit: 200 GiB of weights";
    c.capacity_rps = 0;
    store.add_config(plan, c);
    store.finish_plan(plan, "ok");
  }
  ReportOptions options;
  options.plan_id = 1;
  const std::string html = render_report(db, options);
  EXPECT_EQ(count(html, "data-role=\"frontier\""), 2u);
  EXPECT_EQ(count(html, "data-role=\"chosen\""), 1u);
  EXPECT_NE(html.find("data-chosen=\"0\""), std::string::npos);
  EXPECT_NE(html.find("data-reason=\"does not fit in GPU memory\""), std::string::npos);
  EXPECT_EQ(count(html, "data-role=\"probe\""), 2u);
}

// Configs of equal cost meeting the target: the one with more output tokens/s per GPU at the
// target is chosen, as `servesim plan` ranks them, whatever their order in the plan.
TEST_F(HtmlReportTest, PlanBreaksACostTieAsThePlanCommandDoes) {
  const std::string db = path("r.db");
  {
    SqliteSink sink(db);
    PlanStore store(db);
    const int64_t plan = begin_target_plan(store);
    // Two configs of 2 GPUs at $4/hour meeting the target, 100 and 300 output tokens/s there.
    int64_t index = 0;
    for (const auto& [label, tokens_per_s] : {std::pair{"slower", 100.0}, {"faster", 300.0}}) {
      store.add_run(plan, index, write_run(sink, "coloc", 10, false, tokens_per_s), 1.0, true);
      store.add_config(plan, meeting_config(index++, label, 2, 4));
    }
    store.finish_plan(plan, "ok");
  }
  ReportOptions options;
  options.plan_id = 1;
  const std::string html = render_report(db, options);
  EXPECT_NE(html.find("data-chosen=\"1\""), std::string::npos) << html.substr(0, 2000);
}

// The frontier `servesim plan` ranks at the target rate (output tokens/s per user vs per GPU), with
// the chosen config on it, and each config's cost per million output tokens.
TEST_F(HtmlReportTest, PlanDrawsTokensPerUserVsPerGpuAndCostPerMillionTokens) {
  const std::string db = path("r.db");
  {
    SqliteSink sink(db);
    PlanStore store(db);
    const int64_t plan = begin_target_plan(store);
    struct Config {
      const char* label;
      int n;  // requests: tokens/s per user = 10 n
      double tokens_per_s;
      int64_t gpus;
      double cost;
    };
    // a: 100 tok/s/user, 200 tok/s/GPU; b (cheapest): 200, 150; c: 50, 50 (dominated).
    const Config configs[] = {{"a", 10, 400, 2, 4}, {"b", 20, 150, 1, 2}, {"c", 5, 100, 2, 4}};
    int64_t index = 0;
    for (const Config& c : configs) {
      store.add_run(plan, index, write_run(sink, "coloc", c.n, false, c.tokens_per_s), 1.0, true);
      store.add_config(plan, meeting_config(index++, c.label, c.gpus, c.cost));
    }
    store.finish_plan(plan, "ok");
  }
  ReportOptions options;
  options.plan_id = 1;
  const std::string html = render_report(db, options);
  auto chart = [&](const std::string& id) {
    const auto at = html.find("data-chart=\"" + id + "\"");
    return at == std::string::npos ? std::string() : html.substr(at, html.find("</svg>", at) - at);
  };
  EXPECT_NE(html.find("data-chosen=\"1\""), std::string::npos);
  const std::string tok = chart("plan1-throughput");
  ASSERT_FALSE(tok.empty());
  EXPECT_NE(tok.find("data-x-label=\"output tokens/s per user (1 / mean TPOT)\" "
                     "data-y-label=\"output tokens/s per GPU\""),
            std::string::npos);
  EXPECT_EQ(count(tok, "class=\"point\" data-series=\"meets the SLO\""), 3u);
  EXPECT_EQ(count(tok, "data-role=\"frontier\""), 2u);
  EXPECT_NE(tok.find("<title>frontier #0 a: 200 (tok/s/GPU)</title>"), std::string::npos) << tok;
  EXPECT_NE(tok.find("<title>frontier #1 b: 150 (tok/s/GPU)</title>"), std::string::npos);
  EXPECT_EQ(count(tok, "data-role=\"chosen\""), 1u);
  EXPECT_NE(tok.find("<title>chosen #1 b: 150 (tok/s/GPU)</title>"), std::string::npos);
  const std::string cost = chart("plan1-cost");
  ASSERT_FALSE(cost.empty());
  EXPECT_EQ(count(cost, "<rect class=\"bar\""), 3u);
  EXPECT_EQ(count(cost, "<rect class=\"bar\" data-series=\"chosen\" data-role=\"chosen\""), 1u);
  EXPECT_NE(cost.find("#0 a: $2.778 per 1M output tokens"), std::string::npos) << cost;
  EXPECT_NE(cost.find("#1 b: $3.704 per 1M output tokens"), std::string::npos);
  EXPECT_NE(cost.find("#2 c: $11.111 per 1M output tokens"), std::string::npos);
}

// A capacity search with its two SLO objectives (TTFT p90 <= 2 s, TBT p99 <= 100 ms) and an
// attainment target: probes at 1, 2, 4, 3 req/s, meeting up to 3 req/s.
CapacitySearchRecord sample_search() {
  CapacitySearchRecord s;
  s.scenario = "scenarios/quickstart.json";
  s.objectives = {"ttft_p90=2s", "tbt_p99=100ms"};
  s.attainment_target = 0.9;
  s.min_throughput_ratio = 0.9;
  s.capacity_rps = 3;
  s.binding = {"ttft_p90"};
  s.binding_rate = 4;
  s.verdict = "serving capacity 3.000 req/s";
  s.status = "ok";
  for (const double rate : {1.0, 2.0, 4.0, 3.0}) {
    CapacityProbeRecord p;
    p.rate = rate;
    p.meets = rate <= 3;
    p.requests = 100;
    p.slo_attainment = 1.0 - 0.05 * rate;
    p.sustained_rate = rate * 0.98;
    p.ttft_s[0] = 0.1 * rate;
    p.ttft_s[1] = 0.5 * rate;
    p.ttft_s[2] = 0.7 * rate;
    for (int q = 0; q < 3; ++q) p.tbt_s[q] = 0.01 * (q + 1) * rate;
    p.checks = {{"ttft_p90", p.ttft_s[1], 2.0, false, p.ttft_s[1] <= 2.0, "s"},
                {"tbt_p99", p.tbt_s[2], 0.1, false, p.tbt_s[2] <= 0.1, "s"}};
    if (!p.meets) p.failed = "ttft_p90 is 2000.0 ms, above its 2000 ms bound";
    s.probes.push_back(p);
  }
  return s;
}

TEST_F(HtmlReportTest, CapacitySearchDrawsLatencyAndAttainmentVsLoad) {
  const std::string db = path("r.db");
  EXPECT_EQ(write_capacity(db, sample_search()), 1);
  ReportOptions options;
  options.capacity_id = 1;
  ReportStats stats;
  const std::string html = render_report(db, options, &stats);
  EXPECT_EQ(stats.capacity_id, 1);
  EXPECT_EQ(stats.runs, 0u);
  EXPECT_EQ(stats.charts, 4u);  // TTFT, TBT, attainment, sustained
  auto chart = [&](const std::string& id) {
    const auto at = html.find("data-chart=\"" + id + "\"");
    return at == std::string::npos ? std::string() : html.substr(at, html.find("</svg>", at) - at);
  };
  const std::string ttft = chart("capacity1-latency-ttft");
  ASSERT_FALSE(ttft.empty());
  EXPECT_EQ(count(ttft, "<path class=\"series\""), 3u);  // p50, p90, p99
  EXPECT_EQ(count(ttft, "data-marker=\"SLO ttft_p90 ≤ 2000 ms\" data-axis=\"y\""), 1u) << ttft;
  EXPECT_EQ(count(ttft, "data-marker=\"capacity 3.000 req/s\" data-axis=\"x\""), 1u);
  // Points in rate order: the p90 line reads 0.5, 1, 1.5, 2 s.
  EXPECT_NE(ttft.find("probe 4: 3.000 req/s, TTFT p90 1500.0 ms, meets"), std::string::npos);
  const std::string tbt = chart("capacity1-latency-tbt");
  EXPECT_EQ(count(tbt, "data-marker=\"SLO tbt_p99 ≤ 100 ms\""), 1u) << tbt;
  const std::string att = chart("capacity1-attainment");
  EXPECT_EQ(count(att, "data-marker=\"attainment target 90.0 %\" data-axis=\"y\""), 1u);
  EXPECT_EQ(count(att, "data-role=\"probe\""), 4u);
  EXPECT_NE(html.find("data-value=\"capacity_rps\">3.000 req/s"), std::string::npos);
  EXPECT_EQ(count(html, "<tr data-probe="), 4u);
  // Without an id: the last search; with no runs at all, the report draws it by default.
  EXPECT_EQ(write_capacity(db, sample_search()), 2);
  options.capacity_id = 0;
  render_report(db, options, &stats);
  EXPECT_EQ(stats.capacity_id, 2);
  render_report(db, {}, &stats);
  EXPECT_EQ(stats.capacity_id, 2);
  options.capacity_id = 9;
  try {
    render_report(db, options);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no capacity search 9 (capacity searches: 1, 2)"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(HtmlReportTest, UnknownIdsNameWhatTheDatabaseHolds) {
  const std::string db = path("r.db");
  {
    SqliteSink sink(db);
    write_run(sink, "coloc", 5);
  }
  ReportOptions options;
  options.run_ids = {7};
  try {
    render_report(db, options);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no run 7 (runs: 1)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace servesim::reports
