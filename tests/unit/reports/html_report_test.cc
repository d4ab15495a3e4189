#include "reports/html_report.h"

#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "reports/plan_store.h"
#include "reports/sqlite_sink.h"
#include "reports_temp_dir.h"
#include "sim/core/error.h"

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

  // `output_tokens_per_s` > 0: that run scalar too.
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
      r.first_token_ns = r.arrival_ns + 50'000'000 + i * 1'000'000;
      r.done_ns = r.first_token_ns + 500'000'000;
      r.prompt_tokens = 100;
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
    if (output_tokens_per_s > 0) sink.add_scalar("run", "output_tokens_per_s", output_tokens_per_s);
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
  EXPECT_EQ(stats.charts, 10u);
  EXPECT_EQ(stats.bytes, html.size());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(count(html, "data-chart=\"run1-cdf-"), 5u);
  EXPECT_EQ(count(html, "data-marker=\"TTFT SLO 1000 ms\""), 1u);
  EXPECT_EQ(count(html, "data-marker=\"TBT p99 SLO 100 ms\""), 1u);
  EXPECT_NE(html.find("95.0 %"), std::string::npos);  // SLO attainment
  EXPECT_NE(html.find("cluster.instances"), std::string::npos);
  // KV use: one line per instance.
  const auto kv = html.find("data-chart=\"run1-ts-kv\"");
  ASSERT_NE(kv, std::string::npos);
  const std::string kv_svg = html.substr(kv, html.find("</svg>", kv) - kv);
  EXPECT_EQ(count(kv_svg, "class=\"legend-entry\""), 2u);
}

TEST_F(HtmlReportTest, SplitRequestsGetTheSplitRatioDistribution) {
  const std::string db = path("r.db");
  {
    SqliteSink sink(db);
    write_run(sink, "dynaserve", 40, /*split=*/true);
  }
  ReportStats stats;
  const std::string html = render_report(db, {}, &stats);
  EXPECT_EQ(stats.charts, 11u);
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
      store.add_config(plan, {.config_index = index++, .label = label, .status = "meets",
                              .num_gpus = 2, .cost_per_hour = 4, .meets_target = 1});
    }
    store.finish_plan(plan, "ok");
  }
  ReportOptions options;
  options.plan_id = 1;
  const std::string html = render_report(db, options);
  EXPECT_NE(html.find("data-chosen=\"1\""), std::string::npos) << html.substr(0, 2000);
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
