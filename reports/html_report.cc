#include "reports/html_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "reports/capacity_store.h"
#include "reports/report_store.h"
#include "reports/sqlite_db.h"
#include "reports/svg_chart.h"
#include "core/error.h"
#include "core/time.h"

namespace servesim::reports {
namespace {

using svg::Chart;
using svg::Marker;
using svg::Point;
using svg::Series;
using svg::SeriesStyle;

// An empty series drawn with `style` in palette colour `color`, its points marked `role`.
Series point_series(std::string name, SeriesStyle style, std::string role, int color,
                    double radius = Series{}.radius) {
  Series s;
  s.name = std::move(name);
  s.style = style;
  s.role = std::move(role);
  s.color = color;
  s.radius = radius;
  return s;
}

// An empty chart over simulated time.
Chart time_chart(std::string id, std::string title, std::string y_label) {
  Chart c;
  c.id = std::move(id);
  c.title = std::move(title);
  c.x_label = "simulated time, s";
  c.y_label = std::move(y_label);
  return c;
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// ---- what is read from the database ----

struct RunData {
  int64_t run_id = 0;
  std::string scenario, policy, router, workload, status, started_at;
  int64_t seed = 0;
  double wall_s = 0;
  std::vector<std::pair<std::string, std::string>> params;  // resolved scenario, key order
  std::map<std::string, double> scalars;                    // entity "run"
  std::map<std::string, std::map<std::string, double>> entity_scalars;  // instance/N -> ...
  // Per measured (non-warm-up) request, in seconds.
  std::vector<double> ttft_s, tpot_s, e2e_s, queueing_s, arrival_s, done_s;
  std::vector<std::pair<double, int64_t>> preemptions;  // (done_s, count) of preempted requests
  // Split requests (DynaServe): the share of each one's tokens (prompt + output) computed before
  // its hand-off, in [0, 1].
  std::vector<double> split_ratio;
  std::vector<std::pair<double, int64_t>> tbt_bins;     // (upper bound s, count)
  std::vector<Point> prompt_ttft;  // per measured request: (prompt tokens, TTFT s), by arrival
  // Per iteration, by instance: requests in the batch, tokens computed (empty: not stored).
  std::vector<IterationBin> batch_requests, batch_tokens;
  std::map<std::pair<std::string, std::string>, std::vector<Point>> samples;  // (entity, metric)
  // SLO objectives of the resolved scenario, in seconds; NaN when unset.
  double slo_ttft_s = kNaN, slo_tpot_s = kNaN, slo_tbt_s = kNaN, slo_attainment = kNaN;

  std::string name() const { return fmt::format("run {} {}", run_id, policy); }
  double scalar(const std::string& key) const {
    auto it = scalars.find(key);
    return it == scalars.end() ? kNaN : it->second;
  }
  std::string param(const std::string& key) const {
    for (const auto& [k, v] : params) {
      if (k == key) return v;
    }
    return "";
  }
};

// A run_param value as text: JSON strings lose their quotes.
std::string unquote(std::string v) {
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') return v.substr(1, v.size() - 2);
  return v;
}

double duration_s_or_nan(const std::string& text) {
  const std::string v = unquote(text);
  if (v.empty() || v == "null") return kNaN;
  try {
    return static_cast<double>(parse_duration(v).count()) * 1e-9;
  } catch (const std::exception&) {
    return kNaN;
  }
}

RunData load_run(SqliteDb& db, int64_t run_id) {
  RunData r;
  r.run_id = run_id;
  {
    Statement st(db,
                 "SELECT scenario, policy, router, workload, seed, status, started_at, wall_s "
                 "FROM run WHERE run_id = ?",
                 "reading the run");
    st.bind(1, run_id);
    if (!st.step()) {
      const std::vector<int64_t> runs = read_ids(db, "SELECT run_id FROM run ORDER BY run_id");
      throw InputError(db.path(), 0,
                       fmt::format("no run {} (runs: {})", run_id, describe_ids(runs)));
    }
    r.scenario = st.column_text(0);
    r.policy = st.column_text(1);
    r.router = st.column_text(2);
    r.workload = st.column_text(3);
    r.seed = st.column_int64(4);
    r.status = st.column_text(5);
    r.started_at = st.column_text(6);
    r.wall_s = st.column_double(7);
  }
  {
    Statement st(db, "SELECT key, value FROM run_param WHERE run_id = ? ORDER BY key",
                 "reading run_param");
    st.bind(1, run_id);
    while (st.step()) r.params.emplace_back(st.column_text(0), st.column_text(1));
  }
  {
    Statement st(db, "SELECT entity, name, value FROM scalar WHERE run_id = ?", "reading scalars");
    st.bind(1, run_id);
    while (st.step()) {
      const std::string entity = st.column_text(0);
      if (entity == "run") {
        r.scalars[st.column_text(1)] = st.column_double_or_nan(2);
      } else {
        r.entity_scalars[entity][st.column_text(1)] = st.column_double_or_nan(2);
      }
    }
  }
  {
    Statement st(db,
                 "SELECT arrival_ns, first_scheduled_ns, first_token_ns, done_ns, output_tokens, "
                 "preemptions, split_tokens, prompt_tokens FROM request WHERE run_id = ? AND "
                 "warmup = 0 ORDER BY arrival_ns",
                 "reading requests");
    st.bind(1, run_id);
    while (st.step()) {
      const double arrival = static_cast<double>(st.column_int64(0)) * 1e-9;
      const double scheduled = static_cast<double>(st.column_int64(1)) * 1e-9;
      const double first = static_cast<double>(st.column_int64(2)) * 1e-9;
      const double done = static_cast<double>(st.column_int64(3)) * 1e-9;
      const int64_t out = st.column_int64(4);
      r.arrival_s.push_back(arrival);
      r.done_s.push_back(done);
      r.ttft_s.push_back(first - arrival);
      r.e2e_s.push_back(done - arrival);
      r.queueing_s.push_back(scheduled - arrival);
      r.prompt_ttft.push_back({static_cast<double>(st.column_int64(7)), first - arrival});
      if (out > 1) r.tpot_s.push_back((done - first) / static_cast<double>(out - 1));
      if (const int64_t p = st.column_int64(5); p > 0) r.preemptions.emplace_back(done, p);
      if (const int64_t split = st.column_int64(6); split > 0) {
        r.split_ratio.push_back(static_cast<double>(split) /
                                static_cast<double>(st.column_int64(7) + out));
      }
    }
    std::sort(r.done_s.begin(), r.done_s.end());
    std::sort(r.preemptions.begin(), r.preemptions.end());
  }
  {
    Statement st(db, "SELECT upper_ns, count FROM tbt_histogram WHERE run_id = ? ORDER BY lower_ns",
                 "reading the TBT histogram");
    st.bind(1, run_id);
    while (st.step()) {
      r.tbt_bins.emplace_back(static_cast<double>(st.column_int64(0)) * 1e-9, st.column_int64(1));
    }
  }
  {
    Statement st(db,
                 "SELECT entity, metric, t_ns, value FROM sample WHERE run_id = ? "
                 "ORDER BY entity, metric, t_ns",
                 "reading samples");
    st.bind(1, run_id);
    std::pair<std::string, std::string> key;
    std::vector<Point>* series = nullptr;
    while (st.step()) {
      std::string entity = st.column_text(0), metric = st.column_text(1);
      if (!series || entity != key.first || metric != key.second) {
        key = {std::move(entity), std::move(metric)};
        series = &r.samples[key];
      }
      series->push_back({static_cast<double>(st.column_int64(2)) * 1e-9, st.column_double_or_nan(3)});
    }
  }
  r.batch_requests = load_iteration_bins(db, run_id, "batch_requests");
  r.batch_tokens = load_iteration_bins(db, run_id, "batch_tokens");
  r.slo_ttft_s = duration_s_or_nan(r.param("slo.ttft"));
  r.slo_tpot_s = duration_s_or_nan(r.param("slo.tpot"));
  r.slo_tbt_s = duration_s_or_nan(r.param("slo.tbt_p99"));
  const std::string att = unquote(r.param("slo.attainment_target"));
  if (!att.empty() && att != "null") {
    try {
      r.slo_attainment = std::stod(att);
    } catch (const std::exception&) {
    }
  }
  return r;
}

// ---- formatting helpers ----

std::string fmt_num(double v, int digits = 3) {
  if (!std::isfinite(v)) return "–";
  const double a = std::abs(v);
  if (a != 0 && a < 1e-3) return fmt::format("{:.3g}", v);
  if (a >= 1e5) return fmt::format("{:.0f}", v);
  return fmt::format("{:.{}g}", v,
                     std::max(digits, static_cast<int>(std::log10(std::max(a, 1.0))) + 1));
}

std::string fmt_ms(double s) {
  if (!std::isfinite(s)) return "–";
  if (std::abs(s) >= 10) return fmt::format("{:.1f} s", s);
  return fmt::format("{:.{}f} ms", s * 1e3, std::abs(s) >= 0.1 ? 0 : 1);
}

std::string fmt_pct(double share) {
  return std::isfinite(share) ? fmt::format("{:.1f} %", share * 100) : "–";
}

std::string td(const std::string& text, const char* cls = nullptr) {
  return cls ? fmt::format("<td class=\"{}\">{}</td>", cls, text) : "<td>" + text + "</td>";
}

// ---- chart builders ----

struct ChartSet {
  std::string html;
  size_t charts = 0;
  void add(const Chart& c) {
    html += "<figure>" + svg::render(c) + "</figure>\n";
    ++charts;
  }
};

std::vector<Point> tbt_cdf(const RunData& r) {
  int64_t total = 0;
  for (const auto& [upper, count] : r.tbt_bins) total += count;
  std::vector<Point> pts;
  if (total == 0) return pts;
  int64_t acc = 0;
  for (const auto& [upper, count] : r.tbt_bins) {
    acc += count;
    pts.push_back({upper, static_cast<double>(acc) / static_cast<double>(total)});
  }
  return svg::downsample_minmax(pts, kMaxCdfPoints);
}

// Events per second in fixed-width bins over [0, end], as a step series. The bin width is the
// smallest nice width (>= 1 s) that keeps the series under kMaxSeriesPoints.
std::vector<Point> rate_series(const std::vector<double>& times, double end) {
  std::vector<Point> pts;
  if (times.empty() || !(end > 0)) return pts;
  double width = 1;
  for (double w : {1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0}) {
    width = w;
    if (end / w <= static_cast<double>(kMaxSeriesPoints)) break;
  }
  const size_t bins = static_cast<size_t>(std::ceil(end / width)) + 1;
  std::vector<int64_t> counts(bins, 0);
  for (double t : times) {
    const auto b = static_cast<size_t>(std::max(0.0, std::floor(t / width)));
    if (b < bins) ++counts[b];
  }
  for (size_t b = 0; b < bins; ++b) {
    pts.push_back({static_cast<double>(b) * width, static_cast<double>(counts[b]) / width});
  }
  return pts;
}

// Instance series of one metric combined at each sample time: sum or mean over instances.
std::vector<Point> combine_instances(const RunData& r, const std::string& metric, bool mean) {
  std::map<double, std::pair<double, int>> acc;
  for (const auto& [key, pts] : r.samples) {
    if (key.second != metric || key.first.rfind("instance/", 0) != 0) continue;
    for (const Point& p : pts) {
      auto& a = acc[p.x];
      if (std::isfinite(p.y)) {
        a.first += p.y;
        a.second += 1;
      }
    }
  }
  std::vector<Point> out;
  out.reserve(acc.size());
  for (const auto& [t, a] : acc) {
    out.push_back({t, mean ? (a.second > 0 ? a.first / a.second : kNaN) : a.first});
  }
  return svg::downsample_minmax(out, kMaxSeriesPoints);
}

const std::vector<Point>* sample_series(const RunData& r, const std::string& entity,
                                        const std::string& metric) {
  auto it = r.samples.find({entity, metric});
  return it == r.samples.end() ? nullptr : &it->second;
}

int instance_number(const std::string& entity) {
  try {
    return std::stoi(entity.substr(entity.find('/') + 1));
  } catch (const std::exception&) {
    return 0;
  }
}

bool is_elastic(const RunData& r) {
  return sample_series(r, "cluster", "active_decode") != nullptr;
}

// A run's name in the legend when several runs are overlaid; no name for one run.
std::string overlay_name(const RunData& r, bool many) { return many ? r.name() : std::string(); }

// The latency CDFs (TTFT, TBT, TPOT, E2E, queueing), each run's SLO as a marker.
void add_latency_cdfs(const std::vector<RunData>& runs, const std::string& prefix, ChartSet& set) {
  struct Cdf {
    const char* id;
    const char* title;
    std::vector<double> RunData::*values;  // nullptr: the TBT histogram
    double RunData::*slo;
    const char* slo_label;
  };
  const Cdf cdfs[] = {
      {"ttft", "TTFT (time to first token)", &RunData::ttft_s, &RunData::slo_ttft_s, "TTFT SLO"},
      {"tbt", "TBT (every gap between tokens)", nullptr, &RunData::slo_tbt_s, "TBT p99 SLO"},
      {"tpot", "TPOT (time per output token)", &RunData::tpot_s, &RunData::slo_tpot_s, "TPOT SLO"},
      {"e2e", "End-to-end latency", &RunData::e2e_s, nullptr, ""},
      {"queueing", "Queueing delay (arrival to first scheduled)", &RunData::queueing_s, nullptr,
       ""},
  };
  for (const Cdf& spec : cdfs) {
    Chart c;
    c.id = prefix + "cdf-" + spec.id;
    c.title = fmt::format("{} CDF", spec.title);
    c.x_label = "latency, ms (log scale)";
    c.y_label = "share of requests";
    if (std::string(spec.id) == "tbt") c.y_label = "share of token gaps";
    c.log_x = true;
    c.y_min = 0;
    c.y_max = 1;
    std::set<double> slos;
    for (size_t i = 0; i < runs.size(); ++i) {
      const RunData& r = runs[i];
      Series s;
      s.name = overlay_name(r, runs.size() > 1);
      s.color = static_cast<int>(i);
      s.points = spec.values ? svg::cdf_points(r.*(spec.values), kMaxCdfPoints) : tbt_cdf(r);
      for (Point& p : s.points) p.x *= 1e3;
      c.series.push_back(std::move(s));
      if (spec.slo && std::isfinite(r.*(spec.slo))) slos.insert(r.*(spec.slo));
    }
    for (double v : slos)
      c.x_markers.push_back({v * 1e3, fmt::format("{} {}", spec.slo_label, fmt_ms(v))});
    set.add(c);
  }
}

// Arrivals and completions per second, until `end`.
Chart throughput_chart(const std::vector<RunData>& runs, const std::string& prefix, double end) {
  const bool many = runs.size() > 1;
  Chart c = time_chart(prefix + "ts-throughput", "Arrivals and completions per second",
                       "requests per second");
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunData& r = runs[i];
    Series a;
    a.name = many ? r.name() + " arrivals" : "arrivals";
    a.points = rate_series(r.arrival_s, end);
    a.style = SeriesStyle::kStep;
    a.color = many ? static_cast<int>(i) : 0;
    a.dashed = true;
    Series d;
    d.name = many ? r.name() + " completions" : "completions";
    d.points = rate_series(r.done_s, end);
    d.style = SeriesStyle::kStep;
    d.color = many ? static_cast<int>(i) : 1;
    c.series.push_back(std::move(a));
    c.series.push_back(std::move(d));
  }
  return c;
}

// Run i's step series among `runs` (named by run when there are several), without points.
Series overlay_step_series(const std::vector<RunData> &runs, size_t i) {
  return point_series(overlay_name(runs[i], runs.size() > 1), SeriesStyle::kStep, "",
                      static_cast<int>(i));
}

// A request count summed over the instances, one step series per run.
Chart instance_sum_chart(const std::vector<RunData>& runs, const std::string& prefix,
                         const std::string& id, const std::string& title,
                         const std::string& metric) {
  Chart c = time_chart(prefix + id, title, "requests");
  for (size_t i = 0; i < runs.size(); ++i) {
    Series s = overlay_step_series(runs, i);
    s.points = combine_instances(runs[i], metric, false);
    c.series.push_back(std::move(s));
  }
  return c;
}

// KV-cache use: per instance for one run of up to 10 instances, else the mean over instances.
Chart kv_chart(const std::vector<RunData>& runs, const std::string& prefix) {
  Chart c = time_chart(prefix + "ts-kv", "", "share of KV blocks in use");
  c.y_min = 0;
  c.y_max = 1;
  if (runs.size() > 1) {
    c.title = "KV-cache use (mean over instances)";
    for (size_t i = 0; i < runs.size(); ++i) {
      Series s;
      s.name = runs[i].name();
      s.color = static_cast<int>(i);
      s.points = combine_instances(runs[i], "kv_utilization", true);
      c.series.push_back(std::move(s));
    }
    return c;
  }
  c.title = "KV-cache use per instance";
  std::vector<std::pair<int, const std::vector<Point>*>> inst;
  for (const auto& [key, pts] : runs[0].samples) {
    if (key.second == "kv_utilization") inst.emplace_back(instance_number(key.first), &pts);
  }
  std::sort(inst.begin(), inst.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  if (inst.size() <= 10) {
    for (const auto& [n, pts] : inst) {
      Series s;
      s.name = fmt::format("instance {}", n);
      s.points = svg::downsample_minmax(*pts, kMaxSeriesPoints);
      c.series.push_back(std::move(s));
    }
  } else {
    c.title = fmt::format("KV-cache use (mean of {} instances)", inst.size());
    Series s;
    s.name = "mean over instances";
    s.points = combine_instances(runs[0], "kv_utilization", true);
    c.series.push_back(std::move(s));
  }
  return c;
}

// Preemptions, cumulative, until `end`.
Chart preemption_chart(const std::vector<RunData>& runs, const std::string& prefix, double end) {
  Chart c =
      time_chart(prefix + "ts-preemptions",
                 "Preemptions (cumulative, at the preempted request's completion)", "preemptions");
  for (size_t i = 0; i < runs.size(); ++i) {
    Series s = overlay_step_series(runs, i);
    std::vector<Point> pts{{0, 0}};
    int64_t acc = 0;
    for (const auto& [t, n] : runs[i].preemptions) {
      acc += n;
      pts.push_back({t, static_cast<double>(acc)});
    }
    pts.push_back({end, static_cast<double>(acc)});
    s.points = svg::downsample_minmax(pts, kMaxSeriesPoints);
    c.series.push_back(std::move(s));
  }
  return c;
}

// Split requests of run i: how their tokens were divided between the two instances
// (DynaServe's split ratio), as a histogram of 20 bins over [0, 1].
Chart split_ratio_chart(const RunData& r, size_t i, bool many, const std::string& prefix) {
  constexpr int kBins = 20;
  std::vector<int64_t> counts(kBins, 0);
  for (const double x : r.split_ratio) {
    ++counts[static_cast<size_t>(std::clamp(static_cast<int>(x * kBins), 0, kBins - 1))];
  }
  Chart c;
  c.id = prefix + fmt::format("split-{}", r.run_id);
  c.title = fmt::format("Split ratio: share of a split request's tokens before its hand-off{}",
                        many ? ", " + r.name() : std::string());
  c.x_label = fmt::format("split point / (prompt + output), {} of {} requests split",
                          r.split_ratio.size(), r.ttft_s.size());
  c.y_label = "requests";
  c.x_min = 0;
  c.x_max = 1;
  Series s = point_series("split requests", SeriesStyle::kStep, "split", static_cast<int>(i));
  for (int b = 0; b < kBins; ++b) {
    s.points.push_back({static_cast<double>(b) / kBins, static_cast<double>(counts[b])});
  }
  s.points.push_back({1.0, static_cast<double>(counts[kBins - 1])});
  c.series.push_back(std::move(s));
  return c;
}

// Scaling decisions: where the cluster's `metric` count (starting or draining) rises.
Series scaling_decisions(const std::vector<Point>& pts, const char* metric, const char* label,
                         int color) {
  Series s;
  s.name = label;
  s.style = SeriesStyle::kPoints;
  s.role = "scaling";
  s.color = color;
  s.radius = 4.5;
  for (size_t k = 1; k < pts.size(); ++k) {
    if (pts[k].y > pts[k - 1].y && s.points.size() < kMaxSeriesPoints) {
      s.points.push_back({pts[k].x, 0});
      s.labels.push_back(fmt::format("t = {:.1f} s: {} -> {} {}", pts[k].x, pts[k - 1].y,
                                     pts[k].y, metric));
    }
  }
  return s;
}

// An elastic run's instance counts by role over time, scaling decisions marked where the
// starting / draining counts rise (one sample interval of resolution).
Chart pools_chart(const RunData& r, bool many, const std::string& prefix) {
  Chart c = time_chart(
      prefix + fmt::format("ts-pools-{}", r.run_id),
      many ? fmt::format("Instance pools over time, {}", r.name()) : "Instance pools over time",
      "instances");
  const std::pair<const char*, const char*> pools[] = {{"active_prefill", "prefill (active)"},
                                                       {"active_decode", "decode (active)"},
                                                       {"active_unified", "unified (active)"},
                                                       {"starting", "starting"},
                                                       {"draining", "draining"}};
  int color = 0;
  for (const auto& [metric, label] : pools) {
    const auto* pts = sample_series(r, "cluster", metric);
    if (!pts) continue;
    const bool any =
        std::any_of(pts->begin(), pts->end(), [](const Point& p) { return p.y != 0; });
    if (!any) continue;
    Series s;
    s.name = label;
    s.style = SeriesStyle::kStep;
    s.color = color++;
    s.points = svg::downsample_minmax(*pts, kMaxSeriesPoints);
    c.series.push_back(std::move(s));
  }
  for (const auto& [metric, label, col] : {std::tuple{"starting", "scale-up decided", 2},
                                           std::tuple{"draining", "scale-down decided", 3}}) {
    const auto* pts = sample_series(r, "cluster", metric);
    if (!pts) continue;
    Series s = scaling_decisions(*pts, metric, label, col);
    if (!s.points.empty()) c.series.push_back(std::move(s));
  }
  return c;
}

// The latency CDFs and time series of `runs`, overlaid when there are several.
ChartSet run_charts(const std::vector<RunData>& runs, const std::string& prefix) {
  ChartSet set;
  const bool many = runs.size() > 1;
  add_latency_cdfs(runs, prefix, set);
  double end = 0;
  for (const RunData& r : runs) {
    if (!r.done_s.empty()) end = std::max(end, r.done_s.back());
  }
  set.add(throughput_chart(runs, prefix, end));
  set.add(instance_sum_chart(runs, prefix, "ts-queue",
                             "Queue length (waiting requests, all instances)", "waiting"));
  set.add(instance_sum_chart(runs, prefix, "ts-running",
                             "Running batch (requests in batches, all instances)", "running"));
  set.add(kv_chart(runs, prefix));
  set.add(preemption_chart(runs, prefix, end));
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!runs[i].split_ratio.empty()) set.add(split_ratio_chart(runs[i], i, many, prefix));
  }
  for (const RunData& r : runs) {
    if (is_elastic(r)) set.add(pools_chart(r, many, prefix));
  }
  return set;
}

// ---- tables ----

struct MetricRow {
  const char* label;
  std::string (*format)(double);
  const char* scalar;
  int better;  // +1 higher is better, -1 lower is better, 0 neutral
};

std::string f_int(double v) { return std::isfinite(v) ? fmt::format("{:.0f}", v) : "–"; }
std::string f_num(double v) { return fmt_num(v); }
std::string f_ms(double v) { return fmt_ms(v); }
std::string f_pct(double v) { return fmt_pct(v); }

const MetricRow kMetricRows[] = {
    {"requests", f_int, "requests", 0},
    {"simulated duration, s", f_num, "duration_s", 0},
    {"request rate, req/s", f_num, "request_rate_per_s", 0},
    {"sustained rate, req/s", f_num, "sustained_rate_per_s", 1},
    {"output tokens/s", f_num, "output_tokens_per_s", 1},
    {"SLO attainment (all objectives)", f_pct, "slo_attainment", 1},
    {"&nbsp;&nbsp;TTFT objective", f_pct, "attainment_ttft", 1},
    {"&nbsp;&nbsp;TPOT objective", f_pct, "attainment_tpot", 1},
    {"&nbsp;&nbsp;TBT p99 objective", f_pct, "attainment_tbt", 1},
    {"goodput, tokens/s (SLO-meeting requests)", f_num, "goodput_tokens_per_s", 1},
    {"goodput, req/s", f_num, "goodput_requests_per_s", 1},
    {"TTFT p50", f_ms, "ttft_p50_s", -1},
    {"TTFT p90", f_ms, "ttft_p90_s", -1},
    {"TTFT p99", f_ms, "ttft_p99_s", -1},
    {"TBT p50", f_ms, "tbt_p50_s", -1},
    {"TBT p99", f_ms, "tbt_p99_s", -1},
    {"TPOT p50", f_ms, "tpot_p50_s", -1},
    {"TPOT p99", f_ms, "tpot_p99_s", -1},
    {"E2E p50", f_ms, "e2e_p50_s", -1},
    {"E2E p99", f_ms, "e2e_p99_s", -1},
    {"queueing p99", f_ms, "queueing_p99_s", -1},
    {"GPUs", f_int, "num_gpus", 0},
    {"GPU-seconds", f_num, "gpu_seconds", -1},
    {"output tokens per GPU-second", f_num, "tokens_per_gpu_second", 1},
    {"preemptions", f_int, "total_preemptions", -1},
};

std::string metrics_table(const std::vector<RunData>& runs) {
  std::string o = "<table class=\"metrics\" data-table=\"metrics\"><thead><tr><th>metric</th>";
  for (size_t i = 0; i < runs.size(); ++i) {
    o += fmt::format("<th><span class=\"swatch\" style=\"background:{}\"></span>{}</th>",
                     svg::color(static_cast<int>(i)), svg::escape(runs[i].name()));
    if (i > 0) o += fmt::format("<th>Δ vs run {}</th>", runs[0].run_id);
  }
  o += "</tr></thead><tbody>\n";
  for (const MetricRow& m : kMetricRows) {
    const double base = runs[0].scalar(m.scalar);
    bool any = false;
    for (const RunData& r : runs) any = any || std::isfinite(r.scalar(m.scalar));
    if (!any) continue;
    o += fmt::format("<tr><th>{}</th>", m.label);
    for (size_t i = 0; i < runs.size(); ++i) {
      const double v = runs[i].scalar(m.scalar);
      o += td(m.format(v), "num");
      if (i == 0) continue;
      if (!std::isfinite(v) || !std::isfinite(base) || base == 0) {
        o += td(std::isfinite(v) && std::isfinite(base) && v == base ? "0 %" : "–", "num");
        continue;
      }
      const double rel = (v - base) / std::abs(base);
      const char* cls = "num";
      if (m.better != 0 && std::abs(rel) > 0.005) {
        cls = (rel > 0) == (m.better > 0) ? "num better" : "num worse";
      }
      o += td(fmt::format("{:+.1f} %", rel * 100), cls);
    }
    o += "</tr>\n";
  }
  o += "</tbody></table>\n";
  return o;
}

// The resolved configuration: one column per run; with several runs, keys that differ come
// first and are highlighted.
std::string config_table(const std::vector<RunData>& runs) {
  std::vector<std::string> keys;
  std::set<std::string> seen;
  for (const RunData& r : runs) {
    for (const auto& [k, v] : r.params) {
      if (seen.insert(k).second) keys.push_back(k);
    }
  }
  std::sort(keys.begin(), keys.end());
  auto differs = [&](const std::string& k) {
    for (const RunData& r : runs) {
      if (r.param(k) != runs[0].param(k)) return true;
    }
    return false;
  };
  std::stable_partition(keys.begin(), keys.end(), differs);
  std::string head = "<tr><th>key</th>";
  for (const RunData& r : runs) head += "<th>" + svg::escape(r.name()) + "</th>";
  head += "</tr>";
  std::string rows, diff_rows;
  size_t n_diff = 0;
  for (const std::string& k : keys) {
    const bool diff = runs.size() > 1 && differs(k);
    std::string row =
        fmt::format("<tr{}><th>{}</th>", diff ? " class=\"differs\"" : "", svg::escape(k));
    for (const RunData& r : runs) row += td(svg::escape(unquote(r.param(k))));
    row += "</tr>\n";
    if (diff) {
      ++n_diff;
      diff_rows += row;
    }
    rows += row;
  }
  std::string o;
  if (runs.size() > 1) {
    o += fmt::format("<h3>Configuration: {} of {} keys differ between runs</h3>\n", n_diff,
                     keys.size());
    if (n_diff > 0) {
      o += fmt::format(
          "<table class=\"config\" "
          "data-table=\"config-diff\"><thead>{}</thead><tbody>{}</tbody></table>\n",
          head, diff_rows);
    }
  } else {
    o += "<h3>Configuration</h3>\n";
  }
  o += fmt::format(
      "<details class=\"config\"{}><summary>{}</summary><table class=\"config\" "
      "data-table=\"config\"><thead>{}</thead><tbody>{}</tbody></table></details>\n",
      runs.size() == 1 ? " open" : "",
      runs.size() == 1 ? fmt::format("resolved scenario, {} keys", keys.size())
                       : fmt::format("all {} keys", keys.size()),
      head, rows);
  return o;
}

std::string slo_text(const RunData& r) {
  std::vector<std::string> parts;
  if (std::isfinite(r.slo_ttft_s)) parts.push_back("TTFT ≤ " + fmt_ms(r.slo_ttft_s));
  if (std::isfinite(r.slo_tpot_s)) parts.push_back("TPOT ≤ " + fmt_ms(r.slo_tpot_s));
  if (std::isfinite(r.slo_tbt_s))
    parts.push_back("99 % of a request's token gaps ≤ " + fmt_ms(r.slo_tbt_s));
  if (parts.empty()) return "no SLO objectives set (attainment is 100 % by definition)";
  return fmt::format("{} (a request meets the SLO when it meets all of them)",
                     fmt::join(parts, "; "));
}

std::string run_header(const RunData& r) {
  std::string o = fmt::format(
      "<div class=\"cards\"><div class=\"card\"><span>SLO attainment</span><b "
      "data-value=\"slo_attainment\">{}</b></div>"
      "<div class=\"card\"><span>goodput</span><b>{} tok/s</b></div>"
      "<div class=\"card\"><span>goodput</span><b>{} req/s</b></div>"
      "<div class=\"card\"><span>TTFT p99</span><b>{}</b></div>"
      "<div class=\"card\"><span>TBT p99</span><b>{}</b></div>"
      "<div class=\"card\"><span>requests</span><b>{}</b></div></div>\n",
      fmt_pct(r.scalar("slo_attainment")), fmt_num(r.scalar("goodput_tokens_per_s")),
      fmt_num(r.scalar("goodput_requests_per_s")), fmt_ms(r.scalar("ttft_p99_s")),
      fmt_ms(r.scalar("tbt_p99_s")), f_int(r.scalar("requests")));
  o += fmt::format(
      "<p class=\"meta\">scenario <b>{}</b> · policy <b>{}</b> · router {} · seed {} · status {} · "
      "simulated in {:.2f} s of wall time<br>workload: {}<br>SLO: {}</p>\n",
      svg::escape(r.scenario), svg::escape(r.policy), svg::escape(r.router), r.seed,
      svg::escape(r.status), r.wall_s, svg::escape(r.workload), svg::escape(slo_text(r)));
  return o;
}

std::string notes_for(const std::vector<RunData>& runs) {
  std::vector<std::string> notes;
  for (const RunData& r : runs) {
    if (is_elastic(r)) {
      notes.push_back(fmt::format(
          "{}: scaling decisions are marked where the sampled count of starting or draining "
          "instances rises (the sample interval is their resolution).",
          svg::escape(r.name())));
    }
  }
  if (notes.empty()) return "";
  return "<ul class=\"notes\"><li>" + fmt::format("{}", fmt::join(notes, "</li><li>")) +
         "</li></ul>\n";
}

// ---- plan ----

using PlanProbe = PlanConfigData::Probe;

// The kind of reason a config was pruned, without its numbers.
std::string reason_kind(const std::string& reason) {
  if (reason.rfind("does not fit", 0) == 0) return "does not fit in GPU memory";
  if (reason.rfind("roofline bound", 0) == 0) return "roofline bound below the target rate";
  if (reason.find("over the budget") != std::string::npos) return "over the GPU budget";
  const auto colon = reason.find(':');
  return colon == std::string::npos ? reason : reason.substr(0, colon);
}

// A plan ranked as `servesim plan` ranks it, with the figures its charts draw.
struct PlanView {
  const PlanData &p;
  bool target_mode = false;
  bool have_capacity = false;
  std::vector<const PlanConfigData *> ranked;  // configs meeting the SLO, best first
  const PlanConfigData *chosen = nullptr;
  std::vector<const PlanConfigData *> front;       // cost vs capacity (or goodput), by cost
  std::vector<const PlanConfigData *> user_front;  // tokens/s/user vs tokens/s/GPU, by tok/s/user

  explicit PlanView(const PlanData &plan) : p(plan) {}

  // The config's simulation at the target rate (target mode) or at its capacity; nullptr when it
  // has none.
  const PlanProbe *reference(const PlanConfigData &c) const {
    for (const PlanProbe &q : c.probes) {
      if (target_mode && std::abs(q.rate - p.target_rate) <= 1e-9 * p.target_rate) return &q;
      if (!target_mode && q.meets && c.capacity > 0 && q.rate == c.capacity) return &q;
    }
    return nullptr;
  }
  double goodput_at_target(const PlanConfigData &c) const {
    const PlanProbe *q = target_mode ? reference(c) : nullptr;
    return q ? q->goodput : kNaN;
  }
  double y_of(const PlanConfigData &c) const {
    return have_capacity ? c.capacity : goodput_at_target(c);
  }
  // Output tokens/s per GPU and per user (1 / mean TPOT) at the reference rate; NaN without one.
  double tokens_per_gpu(const PlanConfigData &c) const {
    const PlanProbe *q = reference(c);
    return q && c.num_gpus > 0 ? q->output_tokens_per_s / static_cast<double>(c.num_gpus) : kNaN;
  }
  double tokens_per_user(const PlanConfigData &c) const {
    const PlanProbe *q = reference(c);
    return q && q->tpot_mean_s > 0 ? 1.0 / q->tpot_mean_s : kNaN;
  }
  // USD per million output tokens at the reference rate.
  double cost_per_mtok(const PlanConfigData &c) const {
    const PlanProbe *q = reference(c);
    return q && q->output_tokens_per_s > 0 ? c.cost / (q->output_tokens_per_s * 3600) * 1e6 : kNaN;
  }
};

// The configs of `candidates` not dominated in (x, y), both to maximise; sorted by `order`.
template <typename X, typename Y>
std::vector<const PlanConfigData *> pareto(const std::vector<const PlanConfigData *> &candidates,
                                           X x_of, Y y_of) {
  std::vector<const PlanConfigData *> front;
  for (const PlanConfigData *a : candidates) {
    const double xa = x_of(*a), ya = y_of(*a);
    if (!std::isfinite(xa) || !std::isfinite(ya)) continue;
    bool dominated = false;
    for (const PlanConfigData *b : candidates) {
      const double xb = x_of(*b), yb = y_of(*b);
      if (!std::isfinite(xb) || !std::isfinite(yb)) continue;
      if (xb >= xa && yb >= ya && (xb > xa || yb > ya)) dominated = true;
    }
    if (!dominated) front.push_back(a);
  }
  return front;
}

PlanView rank_plan(const PlanData &plan) {
  PlanView v(plan);
  v.target_mode = std::isfinite(plan.target_rate) && plan.target_rate > 0;
  for (const PlanConfigData &c : plan.configs) v.have_capacity = v.have_capacity || c.capacity > 0;
  for (const PlanConfigData &c : plan.configs) {
    if (c.status == "meets") v.ranked.push_back(&c);
  }
  // As `servesim plan`: by cost, then tokens/s per GPU at the target; without a target, by capacity
  // per dollar.
  auto tie_break = [&](const PlanConfigData &c) {
    const double t = v.tokens_per_gpu(c);
    return std::isfinite(t) ? t : 0.0;
  };
  std::stable_sort(v.ranked.begin(), v.ranked.end(),
                   [&](const PlanConfigData *a, const PlanConfigData *b) {
                     if (!v.target_mode) return a->capacity / a->cost > b->capacity / b->cost;
                     if (a->cost != b->cost) return a->cost < b->cost;
                     return tie_break(*a) > tie_break(*b);
                   });
  v.chosen = v.ranked.empty() ? nullptr : v.ranked.front();
  v.front = pareto(
      v.ranked, [](const PlanConfigData &c) { return -c.cost; },
      [&](const PlanConfigData &c) { return v.y_of(c); });
  std::sort(v.front.begin(), v.front.end(),
            [](const PlanConfigData *a, const PlanConfigData *b) { return a->cost < b->cost; });
  v.user_front = pareto(
      v.ranked, [&](const PlanConfigData &c) { return v.tokens_per_user(c); },
      [&](const PlanConfigData &c) { return v.tokens_per_gpu(c); });
  std::sort(v.user_front.begin(), v.user_front.end(),
            [&](const PlanConfigData *a, const PlanConfigData *b) {
              return v.tokens_per_user(*a) < v.tokens_per_user(*b);
            });
  return v;
}

// The chosen config's cards and the counts of configs by status and pruning reason.
std::string plan_summary_html(const PlanView &v) {
  const PlanData &p = v.p;
  std::string o;
  o += fmt::format(
      "<p class=\"meta\">source {} · question: {} · status {}</p>\n", svg::escape(p.source),
      v.target_mode
          ? fmt::format("the cheapest config meeting the SLO at {:.3f} req/s", p.target_rate)
          : std::string("the serving capacity of every config"),
      svg::escape(p.status));
  if (const PlanConfigData *c = v.chosen) {
    o += fmt::format(
        "<div class=\"cards\"><div class=\"card chosen\"><span>chosen config</span><b "
        "data-chosen=\"{}\">#{} {}</b></div><div "
        "class=\"card\"><span>cost</span><b>${:.2f}/hour</b></div><div "
        "class=\"card\"><span>GPUs</span><b>{}</b></div>{}{}</div>\n",
        c->index, c->index, svg::escape(c->label), c->cost, c->num_gpus,
        std::isfinite(c->capacity) && c->capacity > 0
            ? fmt::format(
                  "<div class=\"card\"><span>serving capacity</span><b>{:.3f} req/s</b></div>",
                  c->capacity)
            : std::string(),
        std::isfinite(v.cost_per_mtok(*c))
            ? fmt::format(
                  "<div class=\"card\"><span>cost per 1M output tokens</span><b>${:.3f}</b></div>",
                  v.cost_per_mtok(*c))
            : std::string());
  } else {
    o += "<p class=\"warn\">No config meets the SLO" +
         std::string(v.target_mode ? " at the target rate" : "") + ".</p>\n";
  }
  std::map<std::string, int> by_status, by_reason;
  for (const PlanConfigData &c : p.configs) {
    ++by_status[c.status];
    if (c.status == "pruned") ++by_reason[reason_kind(c.reason)];
  }
  o += "<div class=\"row\"><table class=\"counts\" "
       "data-table=\"plan-status\"><thead><tr><th>configs</th><th>count</th></tr></thead><tbody>";
  o += fmt::format("<tr><th>expanded</th>{}</tr>", td(std::to_string(p.configs.size()), "num"));
  for (const auto& [s, n] : by_status) {
    o += fmt::format("<tr data-status=\"{}\"><th>{}</th>{}</tr>", svg::escape(s), svg::escape(s),
                     td(std::to_string(n), "num"));
  }
  o += "</tbody></table>";
  o += "<table class=\"counts\" data-table=\"pruned\"><thead><tr><th>pruned without simulation, by "
       "reason</th><th>count</th></tr></thead><tbody>";
  if (by_reason.empty()) o += "<tr><td colspan=\"2\">none</td></tr>";
  for (const auto& [reason, n] : by_reason) {
    o += fmt::format("<tr data-reason=\"{}\"><th>{}</th>{}</tr>", svg::escape(reason),
                     svg::escape(reason), td(std::to_string(n), "num"));
  }
  o += "</tbody></table></div>\n";
  return o;
}

// A scatter of the simulated configs at (x_of, y_of): those meeting and failing the SLO, the
// frontier `front` as a line and the chosen config, roles "meets", "fails", "frontier", "chosen".
template <typename X, typename Y>
void plan_scatter(const PlanView &v, Chart &c, const std::vector<const PlanConfigData *> &front,
                  X x_of, Y y_of, const std::string &unit) {
  Series meets = point_series("meets the SLO", SeriesStyle::kPoints, "meets", 0);
  Series fails = point_series("fails the SLO", SeriesStyle::kPoints, "fails", 7);
  Series fr = point_series("Pareto frontier", SeriesStyle::kLinePoints, "frontier", 2, 4.5);
  Series ch = point_series("chosen", SeriesStyle::kPoints, "chosen", 3, 8);
  auto label = [&](const char *what, const PlanConfigData &pc) {
    return fmt::format("{}#{} {}: {} ({})", what, pc.index, pc.label, fmt_num(y_of(pc)), unit);
  };
  for (const PlanConfigData &pc : v.p.configs) {
    if (pc.status != "meets" && pc.status != "fails") continue;
    if (!std::isfinite(x_of(pc)) || !std::isfinite(y_of(pc))) continue;
    Series &s = pc.status == "meets" ? meets : fails;
    s.points.push_back({x_of(pc), y_of(pc)});
    s.labels.push_back(label("", pc) + fmt::format(", ${:.2f}/h", pc.cost));
  }
  for (const PlanConfigData *pc : front) {
    fr.points.push_back({x_of(*pc), y_of(*pc)});
    fr.labels.push_back(label("frontier ", *pc));
  }
  if (v.chosen && std::isfinite(x_of(*v.chosen)) && std::isfinite(y_of(*v.chosen))) {
    ch.points.push_back({x_of(*v.chosen), y_of(*v.chosen)});
    ch.labels.push_back(label("chosen ", *v.chosen));
  }
  c.series = {fails, meets, fr, ch};
}

// Cost vs serving capacity (or goodput at the target rate), and tokens/s per user vs per GPU.
void plan_frontier_charts(const PlanView &v, ChartSet &charts) {
  const int64_t id = v.p.plan_id;
  {
    Chart c;
    c.id = fmt::format("plan{}-frontier", id);
    c.title = v.have_capacity ? "Cost vs serving capacity (Pareto frontier)"
                              : "Cost vs goodput at the target rate (Pareto frontier)";
    c.x_label = "cost, USD per hour";
    c.y_label = v.have_capacity ? "serving capacity, req/s" : "goodput, tokens/s";
    plan_scatter(
        v, c, v.front, [](const PlanConfigData &pc) { return pc.cost; },
        [&](const PlanConfigData &pc) { return v.y_of(pc); }, v.have_capacity ? "req/s" : "tok/s");
    if (v.target_mode && v.have_capacity) c.y_markers.push_back({v.p.target_rate, "target rate"});
    charts.add(c);
  }
  Chart c;
  c.id = fmt::format("plan{}-throughput", id);
  c.title = fmt::format("Output tokens/s per user vs per GPU {} (Pareto frontier)",
                        v.target_mode ? "at the target rate" : "at capacity");
  c.x_label = "output tokens/s per user (1 / mean TPOT)";
  c.y_label = "output tokens/s per GPU";
  plan_scatter(
      v, c, v.user_front, [&](const PlanConfigData &pc) { return v.tokens_per_user(pc); },
      [&](const PlanConfigData &pc) { return v.tokens_per_gpu(pc); }, "tok/s/GPU");
  charts.add(c);
}

// USD per million output tokens of every simulated config, one bar each.
void plan_cost_chart(const PlanView &v, ChartSet &charts) {
  Chart c;
  c.id = fmt::format("plan{}-cost", v.p.plan_id);
  c.title = fmt::format("Cost per million output tokens {}",
                        v.target_mode ? "at the target rate" : "at capacity");
  c.x_label = "config #";
  c.y_label = "USD per 1M output tokens";
  Series meets = point_series("meets the SLO", SeriesStyle::kBars, "meets", 0);
  Series fails = point_series("fails the SLO", SeriesStyle::kBars, "fails", 7);
  Series ch = point_series("chosen", SeriesStyle::kBars, "chosen", 3);
  for (const PlanConfigData &pc : v.p.configs) {
    const double y = v.cost_per_mtok(pc);
    if (!std::isfinite(y)) continue;
    Series &s = &pc == v.chosen ? ch : pc.status == "meets" ? meets : fails;
    s.points.push_back({static_cast<double>(pc.index), y});
    s.labels.push_back(fmt::format("#{} {}: ${:.3f} per 1M output tokens (${:.2f}/h, {} tok/s)",
                                   pc.index, pc.label, y, pc.cost,
                                   fmt_num(v.reference(pc)->output_tokens_per_s)));
  }
  double last = 0;
  for (Series *s : {&meets, &fails, &ch}) {
    s->bar_width = 0.8;
    for (const Point &pt : s->points) last = std::max(last, pt.x);
  }
  c.x_min = -0.6;
  c.x_max = last + 0.6;
  c.series = {meets, fails, ch};
  charts.add(c);
}

// The capacity bisection of the chosen config and of the frontier's configs (at most 4 charts).
void plan_bisect_charts(const PlanView &v, ChartSet &charts) {
  std::vector<const PlanConfigData *> searched;
  if (v.chosen) searched.push_back(v.chosen);
  for (const PlanConfigData *pc : v.front) {
    if (pc != v.chosen && searched.size() < 4) searched.push_back(pc);
  }
  for (const PlanConfigData *pc : searched) {
    if (pc->probes.size() < 2) continue;
    Chart c;
    c.id = fmt::format("plan{}-bisect-{}", v.p.plan_id, pc->index);
    c.title = fmt::format("Capacity search #{} {}", pc->index, pc->label.substr(0, 48));
    c.x_label = "offered rate, req/s";
    c.y_label = "SLO attainment";
    c.y_min = 0;
    c.y_max = 1;
    Series path = point_series("probe order (steps numbered)", SeriesStyle::kLine, "", 7);
    path.dashed = true;
    Series ok = point_series("meets", SeriesStyle::kPoints, "probe", 2, 5);
    Series bad = point_series("fails", SeriesStyle::kPoints, "probe", 3, 5);
    for (size_t k = 0; k < pc->probes.size(); ++k) {
      const PlanProbe &q = pc->probes[k];
      path.points.push_back({q.rate, q.attainment});
      Series &s = q.meets ? ok : bad;
      s.points.push_back({q.rate, q.attainment});
      s.annotations.push_back(std::to_string(k + 1));
      s.labels.push_back(fmt::format("step {}: {:.3f} req/s, attainment {}, {} (run {})", k + 1,
                                     q.rate, fmt_pct(q.attainment), q.meets ? "meets" : "fails",
                                     q.run_id));
    }
    c.series = {path, ok, bad};
    if (std::isfinite(v.p.attainment_target)) {
      c.y_markers.push_back({v.p.attainment_target,
                             fmt::format("attainment target {}", fmt_pct(v.p.attainment_target))});
    }
    if (std::isfinite(pc->capacity) && pc->capacity > 0) {
      c.x_markers.push_back({pc->capacity, fmt::format("capacity {:.3f}", pc->capacity)});
    }
    charts.add(c);
  }
}

// The frontier and the top of the ranking, then every config in a collapsed list.
std::string plan_tables(const PlanView &v) {
  auto config_row = [&](const PlanConfigData &c) {
    std::string cls = &c == v.chosen ? " class=\"chosen\"" : "";
    const bool on_front = std::find(v.front.begin(), v.front.end(), &c) != v.front.end();
    const double mtok = v.cost_per_mtok(c);
    return fmt::format(
        "<tr{} data-config=\"{}\"><td "
        "class=\"num\">{}</td><td>{}</td><td>{}</td>{}{}{}{}{}<td>{}</td></tr>\n",
        cls, c.index, c.index, svg::escape(c.label), svg::escape(c.status),
        td(std::to_string(c.num_gpus), "num"), td(fmt::format("{:.2f}", c.cost), "num"),
        td(std::isfinite(c.capacity) && c.capacity > 0 ? fmt::format("{:.3f}", c.capacity) : "–",
           "num"),
        td(std::isfinite(mtok) ? fmt::format("{:.3f}", mtok) : "–", "num"),
        td(on_front ? "yes" : "", "num"), svg::escape(c.reason.substr(0, 160)));
  };
  const std::string head =
      "<thead><tr><th>#</th><th>config</th><th>status</th><th>GPUs</th><th>$/hour</th><th>capacity "
      "req/s</th><th>$ per 1M output tokens</th><th>frontier</th><th>reason</th></tr></thead>";
  std::string o =
      "<h3>Configs meeting the SLO (by rank)</h3><table class=\"configs\" data-table=\"ranked\">" +
      head + "<tbody>";
  for (size_t k = 0; k < v.ranked.size() && k < 20; ++k) o += config_row(*v.ranked[k]);
  o += "</tbody></table>\n";
  o += fmt::format("<details><summary>All {} configs</summary><table class=\"configs\">{}<tbody>",
                   v.p.configs.size(), head);
  for (const PlanConfigData &c : v.p.configs) o += config_row(c);
  o += "</tbody></table></details>\n";
  return o;
}

std::string plan_section(SqliteDb &db, int64_t plan_id, ChartSet &charts_out) {
  const PlanData plan = load_plan(db, plan_id);
  const PlanView v = rank_plan(plan);
  std::string o = fmt::format("<section class=\"plan\" data-plan=\"{}\"><h2>Plan {}: {}</h2>\n",
                              plan_id, plan_id, svg::escape(plan.name));
  o += plan_summary_html(v);
  ChartSet charts;
  plan_frontier_charts(v, charts);
  plan_cost_chart(v, charts);
  plan_bisect_charts(v, charts);
  o += "<div class=\"grid\">" + charts.html + "</div>\n";
  charts_out.charts += charts.charts;
  o += plan_tables(v);
  o += "</section>\n";
  return o;
}

// ---- per-iteration distributions and TTFT vs prompt length ----

// The share of iterations at each value of `bins` (only instance `instance`, or all with -1): one
// point per value when every value is below kExactBins, else re-binned into about 40 bins of a
// 1-2-5 width, each at its centre. `width` returns the bin width; `mean` the mean value.
std::vector<Point> distribution(const std::vector<IterationBin> &bins, int32_t instance,
                                double &width, double &mean) {
  constexpr int64_t kExactBins = 64;
  int64_t total = 0, top = 0;
  double sum = 0;
  for (const IterationBin &b : bins) {
    if (instance >= 0 && b.instance != instance) continue;
    total += b.count;
    top = std::max(top, b.upper);
    sum += 0.5 * static_cast<double>(b.lower + b.upper - 1) * static_cast<double>(b.count);
  }
  std::vector<Point> pts;
  mean = total > 0 ? sum / static_cast<double>(total) : kNaN;
  width = 1;
  if (total == 0) return pts;
  if (top > kExactBins) {
    const double raw = static_cast<double>(top) / 40;
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    const double f = raw / mag;
    width = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
  }
  std::map<int64_t, int64_t> counts;  // bin -> iterations
  for (const IterationBin &b : bins) {
    if (instance >= 0 && b.instance != instance) continue;
    counts[static_cast<int64_t>(std::floor(static_cast<double>(b.lower) / width))] += b.count;
  }
  for (const auto &[bin, n] : counts) {
    const double x =
        width == 1 ? static_cast<double>(bin) : (static_cast<double>(bin) + 0.5) * width;
    pts.push_back({x, static_cast<double>(n) / static_cast<double>(total)});
  }
  return pts;
}

std::vector<int32_t> instances_of(const std::vector<IterationBin> &bins) {
  std::set<int32_t> seen;
  for (const IterationBin &b : bins) seen.insert(b.instance);
  return {seen.begin(), seen.end()};
}

// One iteration distribution: for one run, bars over all instances with a line per instance (2 to
// 10 instances); for several, one line per run.
void iteration_chart(const std::vector<RunData> &runs, const std::string &prefix,
                     std::vector<IterationBin> RunData::*bins, const char *id, const char *what,
                     const char *unit, ChartSet &set) {
  const bool many = runs.size() > 1;
  Chart c;
  c.id = prefix + id;
  c.x_label = unit;
  c.y_label = "share of iterations";
  std::vector<std::string> means;
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunData &r = runs[i];
    double width = 1, mean = kNaN;
    Series s = point_series(many ? r.name() : "all instances",
                            many ? SeriesStyle::kLinePoints : SeriesStyle::kBars, "distribution",
                            static_cast<int>(i), 2.5);
    s.points = distribution(r.*bins, -1, width, mean);
    if (!many) s.bar_width = 0.9 * width;
    for (const Point &p : s.points) {
      s.labels.push_back(
          fmt::format("{}{} {}: {:.1f} % of iterations", many ? r.name() + ": " : "",
                      width == 1 ? fmt::format("{:.0f}", p.x)
                                 : fmt::format("{:.0f}-{:.0f}", p.x - width / 2, p.x + width / 2),
                      unit, p.y * 100));
    }
    if (std::isfinite(mean)) means.push_back(fmt_num(mean));
    c.series.push_back(std::move(s));
    const std::vector<int32_t> inst = instances_of(r.*bins);
    if (many || inst.size() < 2 || inst.size() > 10) continue;
    for (const int32_t n : inst) {
      double w = 1, m = kNaN;
      Series line = point_series(fmt::format("instance {}", n), SeriesStyle::kLinePoints,
                                 "instance", 1 + n, 2);
      line.points = distribution(r.*bins, n, w, m);
      c.series.push_back(std::move(line));
    }
  }
  c.title = fmt::format("{} (mean {})", what,
                        means.empty() ? "–" : fmt::format("{}", fmt::join(means, ", ")));
  set.add(c);
}

// At most `max_points` of `pts` (in arrival order): evenly spaced ones, plus the 20 highest y so
// that the tail stays visible. Deterministic.
std::vector<Point> thin_scatter(const std::vector<Point> &pts, size_t max_points) {
  if (pts.size() <= max_points) return pts;
  const size_t tail = std::min<size_t>(20, max_points / 10);
  std::vector<size_t> by_y(pts.size());
  for (size_t k = 0; k < by_y.size(); ++k) by_y[k] = k;
  std::partial_sort(by_y.begin(), by_y.begin() + static_cast<std::ptrdiff_t>(tail), by_y.end(),
                    [&](size_t a, size_t b) { return pts[a].y > pts[b].y; });
  std::set<size_t> keep(by_y.begin(), by_y.begin() + static_cast<std::ptrdiff_t>(tail));
  const size_t evenly = max_points - tail;
  for (size_t j = 0; j < evenly; ++j) keep.insert(j * pts.size() / evenly);
  std::vector<Point> out;
  out.reserve(keep.size());
  for (size_t k : keep) out.push_back(pts[k]);
  return out;
}

void ttft_prompt_chart(const std::vector<RunData> &runs, const std::string &prefix, ChartSet &set) {
  const bool many = runs.size() > 1;
  Chart c;
  c.id = prefix + "ttft-prompt";
  c.x_label = "prompt length, tokens";
  c.y_label = "TTFT, ms";
  size_t total = 0, drawn = 0;
  std::set<double> slos;
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunData &r = runs[i];
    Series s = point_series(many ? r.name() : "requests", SeriesStyle::kPoints, "request",
                            static_cast<int>(i), 2.2);
    // No per-point <title>: a point carries its values (data-x, data-y), which hovering shows.
    s.points = thin_scatter(r.prompt_ttft, kMaxScatterPoints / runs.size());
    for (Point &p : s.points) p.y *= 1e3;
    total += r.prompt_ttft.size();
    drawn += s.points.size();
    c.series.push_back(std::move(s));
    if (std::isfinite(r.slo_ttft_s)) slos.insert(r.slo_ttft_s);
  }
  for (double v : slos) c.y_markers.push_back({v * 1e3, fmt::format("TTFT SLO {}", fmt_ms(v))});
  c.title = drawn < total ? fmt::format("TTFT vs prompt length ({} of {} requests)", drawn, total)
                          : std::string("TTFT vs prompt length");
  set.add(c);
}

// Batch size and tokens per iteration (when stored) and TTFT against prompt length.
ChartSet run_detail_charts(const std::vector<RunData> &runs, const std::string &prefix) {
  ChartSet set;
  bool any_iterations = false;
  for (const RunData &r : runs) any_iterations = any_iterations || !r.batch_requests.empty();
  if (any_iterations) {
    iteration_chart(runs, prefix, &RunData::batch_requests, "batch-size",
                    "Batch size: requests per iteration", "requests in the batch", set);
    iteration_chart(runs, prefix, &RunData::batch_tokens, "batch-tokens",
                    "Tokens per iteration (prompt and decode)", "tokens computed", set);
  }
  ttft_prompt_chart(runs, prefix, set);
  return set;
}

// ---- capacity search ----

// A latency the SLO of a capacity search bounds: its probes' percentiles and the objectives on it.
struct LatencyObjective {
  std::string metric;          // ttft | tbt | tpot | e2e
  std::vector<Marker> limits;  // in ms, labelled with the objective
};

const double *probe_percentiles(const CapacityProbeRecord &p, const std::string &metric) {
  if (metric == "ttft") return p.ttft_s;
  if (metric == "tbt") return p.tbt_s;
  if (metric == "tpot") return p.tpot_s;
  return p.e2e_s;
}

// The latency metrics the search's --slo arguments bound ("ttft_p90=2s", "tpot=50ms", ...), in the
// order given; TTFT alone when none does.
std::vector<LatencyObjective> latency_objectives(const CapacitySearchRecord &s) {
  std::vector<LatencyObjective> out;
  for (const std::string &arg : s.objectives) {
    const auto eq = arg.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = arg.substr(0, eq);
    const std::string metric = name.substr(0, name.find("_p"));
    if (metric != "ttft" && metric != "tbt" && metric != "tpot" && metric != "e2e") continue;
    const double limit_s = duration_s_or_nan(arg.substr(eq + 1));
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const LatencyObjective &o) { return o.metric == metric; });
    if (it == out.end()) {
      out.push_back({metric, {}});
      it = std::prev(out.end());
    }
    if (std::isfinite(limit_s)) {
      it->limits.push_back({limit_s * 1e3, fmt::format("SLO {} ≤ {}", name, fmt_ms(limit_s))});
    }
  }
  if (out.empty()) out.push_back({"ttft", {}});
  return out;
}

// The probes' indices by offered rate (the order the curves are drawn in).
std::vector<size_t> by_rate(const CapacitySearchRecord &s) {
  std::vector<size_t> order(s.probes.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return s.probes[a].rate < s.probes[b].rate; });
  return order;
}

void add_capacity_marker(const CapacitySearchRecord &s, Chart &c) {
  if (s.capacity_rps > 0) {
    c.x_markers.push_back({s.capacity_rps, fmt::format("capacity {:.3f} req/s", s.capacity_rps)});
  }
}

// Latency percentiles against offered rate, one chart per bounded metric, SLO lines drawn.
void capacity_latency_charts(const CapacitySearchRecord &s, const std::string &prefix,
                             ChartSet &charts) {
  static const char *const kQ[] = {"p50", "p90", "p99"};
  const std::vector<size_t> order = by_rate(s);
  for (const LatencyObjective &obj : latency_objectives(s)) {
    Chart c;
    c.id = prefix + "latency-" + obj.metric;
    std::string upper = obj.metric;
    for (char &ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    c.title = fmt::format("{} percentiles vs offered load", upper);
    c.x_label = "offered rate, req/s";
    c.y_label = upper + ", ms";
    Series stopped = point_series("stopped early (partial)", SeriesStyle::kPoints, "stopped", 7);
    for (int q = 0; q < 3; ++q) {
      Series line =
          point_series(fmt::format("{} {}", upper, kQ[q]), SeriesStyle::kLinePoints, "probe", q, 3);
      line.dashed = q == 0;
      for (size_t k : order) {
        const CapacityProbeRecord &p = s.probes[k];
        const double v = probe_percentiles(p, obj.metric)[q] * 1e3;
        Series &to = p.stopped_early.empty() ? line : stopped;
        to.points.push_back({p.rate, v});
        to.labels.push_back(fmt::format("probe {}: {:.3f} req/s, {} {} {:.1f} ms, {}", k + 1,
                                        p.rate, upper, kQ[q], v, p.meets ? "meets" : "fails"));
      }
      c.series.push_back(std::move(line));
    }
    if (!stopped.points.empty()) c.series.push_back(std::move(stopped));
    c.y_markers = obj.limits;
    add_capacity_marker(s, c);
    charts.add(c);
  }
}

// SLO attainment, and completions against the offered rate, both against offered load.
void capacity_load_charts(const CapacitySearchRecord &s, const std::string &prefix,
                          ChartSet &charts) {
  const std::vector<size_t> order = by_rate(s);
  {
    Chart c;
    c.id = prefix + "attainment";
    c.title = "SLO attainment vs offered load";
    c.x_label = "offered rate, req/s";
    c.y_label = "share of requests meeting the SLO";
    c.y_min = 0;
    c.y_max = 1;
    Series line = point_series("attainment", SeriesStyle::kLine, "", 0);
    Series ok = point_series("meets", SeriesStyle::kPoints, "probe", 2, 5);
    Series bad = point_series("fails", SeriesStyle::kPoints, "probe", 3, 5);
    Series stopped = point_series("stopped early (partial)", SeriesStyle::kPoints, "stopped", 7, 4);
    for (size_t k : order) {
      const CapacityProbeRecord &p = s.probes[k];
      if (p.stopped_early.empty()) line.points.push_back({p.rate, p.slo_attainment});
      Series &to = !p.stopped_early.empty() ? stopped : p.meets ? ok : bad;
      to.points.push_back({p.rate, p.slo_attainment});
      to.annotations.push_back(std::to_string(k + 1));
      to.labels.push_back(fmt::format("probe {}: {:.3f} req/s, attainment {}, {}{}", k + 1, p.rate,
                                      fmt_pct(p.slo_attainment), p.meets ? "meets" : "fails",
                                      p.failed.empty() ? "" : ": " + p.failed));
    }
    c.series = {line, ok, bad};
    if (!stopped.points.empty()) c.series.push_back(std::move(stopped));
    if (std::isfinite(s.attainment_target)) {
      c.y_markers.push_back(
          {s.attainment_target, fmt::format("attainment target {}", fmt_pct(s.attainment_target))});
    }
    add_capacity_marker(s, c);
    charts.add(c);
  }
  Chart c;
  c.id = prefix + "sustained";
  c.title = "Completions keeping up with the offered load (probes run to the end)";
  c.x_label = "offered rate, req/s";
  c.y_label = "req/s";
  Series sustained =
      point_series("sustained (completions)", SeriesStyle::kLinePoints, "probe", 0, 3);
  Series required =
      point_series(fmt::format("required: {:.0f} % of arrivals", s.min_throughput_ratio * 100),
                   SeriesStyle::kLine, "", 3);
  required.dashed = true;
  for (size_t k : order) {
    const CapacityProbeRecord &p = s.probes[k];
    if (!p.stopped_early.empty()) continue;  // its completions were cut short
    sustained.points.push_back({p.rate, p.sustained_rate});
    sustained.labels.push_back(fmt::format("probe {}: offered {:.3f} req/s, sustained {:.3f} req/s",
                                           k + 1, p.rate, p.sustained_rate));
    // The criterion compares completions with the arrivals of the same window (the offered
    // rate as realized), not with the nominal rate.
    const double arrivals = std::isfinite(p.offered_rate) && p.offered_rate > 0 ? p.offered_rate
                                                                               : p.rate;
    required.points.push_back({p.rate, arrivals * s.min_throughput_ratio});
  }
  c.series = {sustained, required};
  add_capacity_marker(s, c);
  charts.add(c);
}

std::string capacity_probe_table(const CapacitySearchRecord &s) {
  std::string o =
      "<table class=\"configs\" data-table=\"capacity-probes\"><thead><tr><th>probe</th><th>rate "
      "req/s</th><th>verdict</th><th>attainment</th><th>TTFT p99</th><th>TBT p99</th><th>TPOT "
      "p99</th><th>sustained req/s</th><th>goodput tok/s</th><th>why it "
      "fails</th></tr></thead><tbody>\n";
  for (size_t k = 0; k < s.probes.size(); ++k) {
    const CapacityProbeRecord &p = s.probes[k];
    o += fmt::format(
        "<tr data-probe=\"{}\"><td class=\"num\">{}</td>{}{}{}{}{}{}{}{}<td>{}</td></tr>\n", k + 1,
        k + 1, td(fmt::format("{:.3f}", p.rate), "num"),
        td(p.meets ? "meets" : "fails", p.meets ? "better" : "worse"),
        td(fmt_pct(p.slo_attainment), "num"), td(fmt_ms(p.ttft_s[2]), "num"),
        td(fmt_ms(p.tbt_s[2]), "num"), td(fmt_ms(p.tpot_s[2]), "num"),
        td(fmt_num(p.sustained_rate), "num"), td(fmt_num(p.goodput_tokens_per_s), "num"),
        svg::escape(p.failed.substr(0, 200)));
  }
  return o + "</tbody></table>\n";
}

std::string capacity_section(const std::string &db_path, int64_t id, ChartSet &charts_out) {
  const CapacitySearchRecord s = read_capacity(db_path, id);
  std::string o = fmt::format(
      "<section class=\"capacity\" data-capacity=\"{}\"><h2>Capacity search {}: {}</h2>\n", id, id,
      svg::escape(s.scenario));
  o += fmt::format(
      "<div class=\"cards\"><div class=\"card chosen\"><span>serving capacity</span><b "
      "data-value=\"capacity_rps\">{}</b></div><div "
      "class=\"card\"><span>probes</span><b>{}</b></div></div>\n",
      s.capacity_rps > 0 ? fmt::format("{:.3f} req/s", s.capacity_rps) : "none", s.probes.size());
  o += fmt::format(
      "<p class=\"meta\">objectives <b>{}</b>{} · completions ≥ {:.0f} % of the offered "
      "rate{}<br>{}{} · started {} · {:.1f} s of wall time</p>\n",
      svg::escape(fmt::format("{}", fmt::join(s.objectives, ", "))),
      std::isfinite(s.attainment_target)
          ? fmt::format(" · attainment ≥ {}", fmt_pct(s.attainment_target))
          : std::string(),
      s.min_throughput_ratio * 100,
      s.overrides.empty()
          ? std::string()
          : " · --set " + svg::escape(fmt::format("{}", fmt::join(s.overrides, " "))),
      svg::escape(s.verdict),
      s.binding.empty()
          ? std::string()
          : fmt::format("; binding: {} (fails at {:.3f} req/s)",
                        svg::escape(fmt::format("{}", fmt::join(s.binding, ", "))), s.binding_rate),
      svg::escape(s.started_at), s.wall_s);
  ChartSet charts;
  const std::string prefix = fmt::format("capacity{}-", id);
  capacity_latency_charts(s, prefix, charts);
  capacity_load_charts(s, prefix, charts);
  o += "<div class=\"grid\">" + charts.html + "</div>\n";
  charts_out.charts += charts.charts;
  o += "<h3>Probes in the order run</h3>" + capacity_probe_table(s) + "</section>\n";
  return o;
}

// The page's one script: on hover over a chart, the nearest mark (a vertex of a line, a point, a
// bar) within 40 px is ringed and a tooltip shows its series, x and y (read back through the axes
// the <svg> declares in its data-* attributes) and its <title>, if any. Opened as
// report.html#hover-selftest it hovers the first mark of every chart once loaded and records
// "charts with a tooltip / charts with marks" in body[data-hover-check] (the browser test reads
// it). Plain DOM APIs only; nothing is fetched.
constexpr const char *kScript = R"js(
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  var tip = document.createElement("div");
  tip.id = "chart-tooltip";
  tip.className = "chart-tooltip";
  document.body.appendChild(tip);
  function fmt(v) {
    if (!isFinite(v)) return "–";
    var a = Math.abs(v);
    if (a !== 0 && (a < 1e-3 || a >= 1e7)) return v.toExponential(3);
    return String(parseFloat(v.toPrecision(4)));
  }
  function attr(el, name) { return parseFloat(el.getAttribute(name)); }
  function toData(svg, px, py) {
    var x0 = attr(svg, "data-x0"), x1 = attr(svg, "data-x1");
    var fx = (px - attr(svg, "data-px0")) / (attr(svg, "data-px1") - attr(svg, "data-px0"));
    var fy = (py - attr(svg, "data-py0")) / (attr(svg, "data-py1") - attr(svg, "data-py0"));
    var x = svg.getAttribute("data-log-x") === "1"
        ? Math.pow(10, Math.log10(x0) + fx * (Math.log10(x1) - Math.log10(x0)))
        : x0 + fx * (x1 - x0);
    return { x: x, y: attr(svg, "data-y0") + fy * (attr(svg, "data-y1") - attr(svg, "data-y0")) };
  }
  function titleOf(el) {
    var t = el.querySelector("title");
    return t ? t.textContent : "";
  }
  function marks(svg) {
    if (svg._marks) return svg._marks;
    var out = [];
    svg.querySelectorAll("path.series").forEach(function (p) {
      var re = /([MLHV])\s*(-?[\d.]+)(?:\s+(-?[\d.]+))?/g, m, x = 0, y = 0;
      var name = p.getAttribute("data-series");
      while ((m = re.exec(p.getAttribute("d") || ""))) {
        if (m[1] === "M" || m[1] === "L") { x = +m[2]; y = +m[3]; }
        else if (m[1] === "H") { x = +m[2]; }
        else { y = +m[2]; }
        out.push({ x: x, y: y, series: name, title: "" });
      }
    });
    svg.querySelectorAll("circle.point").forEach(function (c) {
      out.push({ x: attr(c, "cx"), y: attr(c, "cy"), series: c.getAttribute("data-series"),
                 title: titleOf(c), value: { x: attr(c, "data-x"), y: attr(c, "data-y") } });
    });
    svg.querySelectorAll("rect.bar").forEach(function (r) {
      out.push({ x: attr(r, "x") + attr(r, "width") / 2, y: attr(r, "y"),
                 series: r.getAttribute("data-series"), title: titleOf(r),
                 value: { x: attr(r, "data-x"), y: attr(r, "data-y") } });
    });
    svg._marks = out;
    return out;
  }
  function ring(svg) {
    if (!svg._ring) {
      svg._ring = document.createElementNS(NS, "circle");
      svg._ring.setAttribute("class", "hover-ring");
      svg._ring.setAttribute("r", "5");
      svg._ring.setAttribute("fill", "none");
      svg._ring.setAttribute("stroke", "#000");
      svg._ring.setAttribute("stroke-width", "1.5");
      svg._ring.setAttribute("pointer-events", "none");
      svg.appendChild(svg._ring);
    }
    return svg._ring;
  }
  function hide(svg) {
    tip.style.display = "none";
    if (svg && svg._ring) svg._ring.setAttribute("visibility", "hidden");
  }
  function onMove(e) {
    var svg = e.currentTarget, ctm = svg.getScreenCTM();
    if (!ctm) return false;
    var pt = svg.createSVGPoint();
    pt.x = e.clientX;
    pt.y = e.clientY;
    var p = pt.matrixTransform(ctm.inverse()), best = null, bestD = 40 * 40;
    marks(svg).forEach(function (m) {
      var d = (m.x - p.x) * (m.x - p.x) + (m.y - p.y) * (m.y - p.y);
      if (d < bestD) { bestD = d; best = m; }
    });
    if (!best) { hide(svg); return false; }
    var v = best.value || toData(svg, best.x, best.y);
    var head = best.series || svg.getAttribute("aria-label") || "";
    tip.textContent = "";
    var b = document.createElement("b");
    b.textContent = head;
    tip.appendChild(b);
    [(svg.getAttribute("data-x-label") || "x") + ": " + fmt(v.x),
     (svg.getAttribute("data-y-label") || "y") + ": " + fmt(v.y), best.title].forEach(function (line) {
      if (!line) return;
      var div = document.createElement("div");
      div.textContent = line;
      tip.appendChild(div);
    });
    tip.style.display = "block";
    tip.style.left = (e.clientX + window.scrollX + 14) + "px";
    tip.style.top = (e.clientY + window.scrollY + 14) + "px";
    var r = ring(svg);
    r.setAttribute("cx", best.x);
    r.setAttribute("cy", best.y);
    r.setAttribute("visibility", "visible");
    return true;
  }
  var charts = document.querySelectorAll("svg.chart");
  charts.forEach(function (svg) {
    svg.addEventListener("mousemove", onMove);
    svg.addEventListener("mouseleave", function () { hide(svg); });
  });
  window.addEventListener("load", function () {
    if (location.hash !== "#hover-selftest") return;
    var ok = 0, tried = 0;
    charts.forEach(function (svg) {
      var m = marks(svg)[0], ctm = svg.getScreenCTM();
      if (!m || !ctm) return;
      tried++;
      var pt = svg.createSVGPoint();
      pt.x = m.x;
      pt.y = m.y;
      var s = pt.matrixTransform(ctm);
      svg.dispatchEvent(new MouseEvent("mousemove", { clientX: s.x, clientY: s.y }));
      if (tip.style.display === "block" && tip.textContent.length > 0) ok++;
    });
    document.body.setAttribute("data-hover-check", ok + "/" + tried);
  });
})();
)js";

constexpr const char *kCss = R"css(
body{font:14px/1.45 -apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;margin:0;color:#222;background:#f6f7f9}
main{max-width:1320px;margin:0 auto;padding:16px 20px 40px}
h1{font-size:22px;margin:8px 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ccd;padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}
.meta{color:#555;margin:4px 0 10px}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:10px 0}
.card{background:#fff;border:1px solid #dde;border-radius:6px;padding:8px 14px;min-width:120px}
.card span{display:block;color:#666;font-size:12px}.card b{font-size:18px}
.card.chosen{border-color:#d62728}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:12px}
figure{margin:0;background:#fff;border:1px solid #dde;border-radius:6px;padding:6px}
figure svg{width:100%;height:auto;display:block}
table{border-collapse:collapse;background:#fff;margin:6px 0 12px;font-size:13px}
th,td{border:1px solid #dde;padding:3px 8px;text-align:left;vertical-align:top}
thead th{background:#eef0f4}
td.num{text-align:right;font-variant-numeric:tabular-nums}
td.better{color:#1a7f37}td.worse{color:#c62828}
tr.differs th,tr.differs td{background:#fff6d6}
tr.chosen td{background:#fde8e8;font-weight:bold}
.swatch{display:inline-block;width:10px;height:10px;margin-right:5px;border-radius:2px}
.row{display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start}
details{margin:8px 0}summary{cursor:pointer;font-weight:600}
table.config{max-width:100%}table.config td{word-break:break-all;max-width:520px}
.notes{color:#555}.warn{color:#c62828;font-weight:600}
footer{color:#888;font-size:12px;margin-top:30px}
.chart-tooltip{position:absolute;display:none;pointer-events:none;background:#fff;border:1px solid #889;border-radius:4px;padding:4px 8px;font-size:12px;box-shadow:0 1px 4px rgba(0,0,0,.2);z-index:10;max-width:440px}
)css";

// The section of one run, or of several runs compared.
std::string runs_section(const std::vector<RunData> &runs, ChartSet &all) {
  const bool many = runs.size() > 1;
  const std::string prefix = many ? "cmp-" : fmt::format("run{}-", runs[0].run_id);
  ChartSet charts = run_charts(runs, prefix);
  ChartSet detail = run_detail_charts(runs, prefix);
  all.charts += charts.charts + detail.charts;
  const std::string grids =
      "<h3>Latency distributions and time series</h3><div class=\"grid\">" + charts.html +
      "</div>\n<h3>Batches and prompt lengths</h3><div class=\"grid\">" + detail.html + "</div>\n";
  std::string body;
  if (!many) {
    const RunData &r = runs[0];
    body += fmt::format("<section class=\"run\" data-run=\"{}\"><h2>Run {}: {}</h2>\n", r.run_id,
                        r.run_id, svg::escape(r.scenario));
    body += run_header(r) + grids + notes_for(runs);
    body += "<div class=\"row\"><div><h3>Summary</h3>" + metrics_table(runs) + "</div><div>" +
            config_table(runs) + "</div></div>\n";
    return body + "</section>\n";
  }
  body +=
      fmt::format("<section class=\"comparison\" data-runs=\"{}\"><h2>Comparison of {} runs</h2>\n",
                  runs.size(), runs.size());
  body += "<ul class=\"runs\">";
  for (size_t i = 0; i < runs.size(); ++i) {
    body += fmt::format(
        "<li><span class=\"swatch\" style=\"background:{}\"></span><b>{}</b>: scenario {}, router "
        "{}; workload {}; SLO: {}</li>",
        svg::color(static_cast<int>(i)), svg::escape(runs[i].name()), svg::escape(runs[i].scenario),
        svg::escape(runs[i].router), svg::escape(runs[i].workload), svg::escape(slo_text(runs[i])));
  }
  body +=
      "</ul>\n<div class=\"row\"><div><h3>Side by side (Δ relative to the first run; green is "
      "better)</h3>" +
      metrics_table(runs) + "</div><div>" + config_table(runs) + "</div></div>\n";
  body += grids + notes_for(runs);
  return body + "</section>\n";
}

// The runs a report draws: those asked for, or by default the last run (none when a plan or
// capacity search is asked for, or when the database holds only capacity searches).
std::vector<int64_t> runs_to_draw(SqliteDb &db, const ReportOptions &options,
                                  std::optional<int64_t> &capacity_id) {
  std::vector<int64_t> ids = options.run_ids;
  if (!ids.empty() || options.plan_id || capacity_id) return ids;
  const auto all = read_ids(db, "SELECT run_id FROM run ORDER BY run_id");
  if (!all.empty()) return {all.back()};
  if (!capacity_ids(db.path()).empty()) {
    capacity_id = 0;
    return ids;
  }
  throw InputError(db.path(), 0, "the database holds no runs");
}

}  // namespace

std::string render_report(const std::string& db_path, const ReportOptions& options,
                          ReportStats* stats) {
  SqliteDb db(db_path, SqliteDb::Mode::kReadOnly);
  if (!has_table(db, "run")) {
    throw InputError(db_path, 0, "not a servesim results database (it has no run table)");
  }
  std::optional<int64_t> capacity_id = options.capacity_id;
  std::vector<RunData> runs;
  for (int64_t id : runs_to_draw(db, options, capacity_id)) runs.push_back(load_run(db, id));

  ChartSet all;
  std::string body;
  if (!runs.empty()) body += runs_section(runs, all);
  if (options.plan_id) body += plan_section(db, *options.plan_id, all);
  int64_t drawn_capacity = 0;
  if (capacity_id) {
    if (*capacity_id == 0) {
      const std::vector<int64_t> ids = capacity_ids(db_path);
      if (ids.empty()) throw InputError(db_path, 0, "the database holds no capacity search");
      capacity_id = ids.back();
    }
    drawn_capacity = *capacity_id;
    body += capacity_section(db_path, drawn_capacity, all);
  }

  std::string title = options.title;
  if (title.empty()) {
    if (runs.size() == 1) {
      title = fmt::format("servesim report: run {} ({}, {})", runs[0].run_id, runs[0].scenario,
                          runs[0].policy);
    } else if (runs.size() > 1) {
      title = fmt::format("servesim comparison of {} runs", runs.size());
    } else if (options.plan_id) {
      title = fmt::format("servesim plan {}", *options.plan_id);
    } else {
      title = fmt::format("servesim capacity search {}", drawn_capacity);
    }
  }
  std::string html;
  html.reserve(body.size() + 8192);
  html += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  html += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  html += "<title>" + svg::escape(title) + "</title>\n<style>" + std::string(kCss) +
          "</style></head>\n";
  html += fmt::format("<body data-report=\"servesim\" data-charts=\"{}\"><main>\n<h1>{}</h1>\n",
                      all.charts, svg::escape(title));
  html += fmt::format("<p class=\"meta\">database {}</p>\n", svg::escape(db_path));
  html += body;
  html += "<footer>Generated by servesim " SERVESIM_VERSION
          ". Self-contained: inline SVG, CSS and script, no network; hover a chart for its "
          "values.</footer>\n</main>\n<script>" +
          std::string(kScript) + "</script>\n</body></html>\n";
  if (stats) {
    stats->runs = runs.size();
    stats->capacity_id = drawn_capacity;
    stats->charts = all.charts;
    stats->bytes = html.size();
  }
  return html;
}

}  // namespace servesim::reports
