#include "reports/html_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "reports/sqlite_db.h"
#include "reports/svg_chart.h"
#include "sim/core/error.h"
#include "sim/core/time.h"

namespace servesim::reports {
namespace {

using svg::Chart;
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

double column_or_nan(const Statement& st, int i) {
  return st.column_is_null(i) ? kNaN : st.column_double(i);
}

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

std::vector<int64_t> all_ids(SqliteDb& db, const char* sql) {
  std::vector<int64_t> ids;
  Statement st(db, sql, "listing ids");
  while (st.step()) ids.push_back(st.column_int64(0));
  return ids;
}

std::string id_list(const std::vector<int64_t>& ids) {
  if (ids.empty()) return "none";
  if (ids.size() > 12)
    return fmt::format("{} .. {} ({} in all)", ids.front(), ids.back(), ids.size());
  return fmt::format("{}", fmt::join(ids, ", "));
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
      throw InputError(db.path(), 0,
                       fmt::format("no run {} (runs: {})", run_id,
                                   id_list(all_ids(db, "SELECT run_id FROM run ORDER BY run_id"))));
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
        r.scalars[st.column_text(1)] = column_or_nan(st, 2);
      } else {
        r.entity_scalars[entity][st.column_text(1)] = column_or_nan(st, 2);
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
      series->push_back({static_cast<double>(st.column_int64(2)) * 1e-9, column_or_nan(st, 3)});
    }
  }
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

// The latency CDFs and time series of `runs`, overlaid when there are several.
ChartSet run_charts(const std::vector<RunData>& runs, const std::string& prefix) {
  ChartSet set;
  const bool many = runs.size() > 1;
  auto series_name = [&](const RunData& r) { return many ? r.name() : std::string(); };

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
      s.name = series_name(r);
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

  double end = 0;
  for (const RunData& r : runs) {
    if (!r.done_s.empty()) end = std::max(end, r.done_s.back());
  }
  {
    Chart c;
    c.id = prefix + "ts-throughput";
    c.title = "Arrivals and completions per second";
    c.x_label = "simulated time, s";
    c.y_label = "requests per second";
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
    set.add(c);
  }
  // A request count summed over the instances, one step series per run.
  const auto instance_sum_chart = [&](const std::string& id, const std::string& title,
                                      const std::string& metric) {
    Chart c;
    c.id = prefix + id;
    c.title = title;
    c.x_label = "simulated time, s";
    c.y_label = "requests";
    for (size_t i = 0; i < runs.size(); ++i) {
      Series s;
      s.name = series_name(runs[i]);
      s.color = static_cast<int>(i);
      s.style = SeriesStyle::kStep;
      s.points = combine_instances(runs[i], metric, false);
      c.series.push_back(std::move(s));
    }
    set.add(c);
  };
  instance_sum_chart("ts-queue", "Queue length (waiting requests, all instances)", "waiting");
  instance_sum_chart("ts-running", "Running batch (requests in batches, all instances)", "running");
  {
    Chart c;
    c.id = prefix + "ts-kv";
    c.y_label = "share of KV blocks in use";
    c.x_label = "simulated time, s";
    c.y_min = 0;
    c.y_max = 1;
    if (!many) {
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
    } else {
      c.title = "KV-cache use (mean over instances)";
      for (size_t i = 0; i < runs.size(); ++i) {
        Series s;
        s.name = runs[i].name();
        s.color = static_cast<int>(i);
        s.points = combine_instances(runs[i], "kv_utilization", true);
        c.series.push_back(std::move(s));
      }
    }
    set.add(c);
  }
  {
    Chart c;
    c.id = prefix + "ts-preemptions";
    c.title = "Preemptions (cumulative, at the preempted request's completion)";
    c.x_label = "simulated time, s";
    c.y_label = "preemptions";
    for (size_t i = 0; i < runs.size(); ++i) {
      Series s;
      s.name = series_name(runs[i]);
      s.color = static_cast<int>(i);
      s.style = SeriesStyle::kStep;
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
    set.add(c);
  }
  // Split requests: how their tokens were divided between the two instances (DynaServe's split
  // ratio), as a histogram of 20 bins over [0, 1].
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunData& r = runs[i];
    if (r.split_ratio.empty()) continue;
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
    set.add(c);
  }
  // Elastic pools: instance counts by role over time, scaling decisions marked where the
  // starting / draining counts rise (one sample interval of resolution).
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunData& r = runs[i];
    if (!is_elastic(r)) continue;
    Chart c;
    c.id = prefix + fmt::format("ts-pools-{}", r.run_id);
    c.title =
        many ? fmt::format("Instance pools over time, {}", r.name()) : "Instance pools over time";
    c.x_label = "simulated time, s";
    c.y_label = "instances";
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
      Series s;
      s.name = label;
      s.style = SeriesStyle::kPoints;
      s.role = "scaling";
      s.color = col;
      s.radius = 4.5;
      for (size_t k = 1; k < pts->size(); ++k) {
        if ((*pts)[k].y > (*pts)[k - 1].y && s.points.size() < kMaxSeriesPoints) {
          s.points.push_back({(*pts)[k].x, 0});
          s.labels.push_back(fmt::format("t = {:.1f} s: {} -> {} {}", (*pts)[k].x, (*pts)[k - 1].y,
                                         (*pts)[k].y, metric));
        }
      }
      if (!s.points.empty()) c.series.push_back(std::move(s));
    }
    set.add(c);
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

struct PlanConfig {
  int64_t index = 0;
  std::string label, candidate, gpu, policy, status, reason;
  int64_t num_gpus = 0;
  double cost = 0, capacity = kNaN, bound = kNaN;
  int meets_target = -1;
  struct Probe {
    int64_t run_id;
    double rate;
    bool meets;
    double attainment = kNaN, goodput = kNaN;
    double output_tokens_per_s = kNaN;
  };
  std::vector<Probe> probes;
};

// The kind of reason a config was pruned, without its numbers.
std::string reason_kind(const std::string& reason) {
  if (reason.rfind("does not fit", 0) == 0) return "does not fit in GPU memory";
  if (reason.rfind("roofline bound", 0) == 0) return "roofline bound below the target rate";
  if (reason.find("over the budget") != std::string::npos) return "over the GPU budget";
  const auto colon = reason.find(':');
  return colon == std::string::npos ? reason : reason.substr(0, colon);
}

std::string plan_section(SqliteDb& db, int64_t plan_id, ChartSet& charts_out) {
  std::string name, source, mode, status, document;
  double target_rate = kNaN;
  {
    Statement st(
        db, "SELECT name, source, mode, target_rate, status, document FROM plan WHERE plan_id = ?",
        "reading the plan");
    st.bind(1, plan_id);
    if (!st.step()) {
      throw InputError(
          db.path(), 0,
          fmt::format("no plan {} (plans: {})", plan_id,
                      id_list(all_ids(db, "SELECT plan_id FROM plan ORDER BY plan_id"))));
    }
    name = st.column_text(0);
    source = st.column_text(1);
    mode = st.column_text(2);
    target_rate = column_or_nan(st, 3);
    status = st.column_text(4);
    document = st.column_text(5);
  }
  double attainment_target = kNaN;
  try {
    const auto doc = nlohmann::json::parse(document);
    if (doc.contains("slo") && doc["slo"].contains("attainment")) {
      attainment_target = doc["slo"]["attainment"].get<double>();
    }
  } catch (const std::exception&) {
  }
  std::vector<PlanConfig> configs;
  std::map<int64_t, size_t> by_index;
  {
    Statement st(db,
                 "SELECT config_index, label, candidate, gpu, policy, num_gpus, cost_per_hour, "
                 "status, reason, bound_rps, capacity_rps, meets_target FROM plan_config "
                 "WHERE plan_id = ? ORDER BY config_index",
                 "reading plan configs");
    st.bind(1, plan_id);
    while (st.step()) {
      PlanConfig c;
      c.index = st.column_int64(0);
      c.label = st.column_text(1);
      c.candidate = st.column_text(2);
      c.gpu = st.column_text(3);
      c.policy = st.column_text(4);
      c.num_gpus = st.column_int64(5);
      c.cost = st.column_double(6);
      c.status = st.column_text(7);
      c.reason = st.column_text(8);
      c.bound = column_or_nan(st, 9);
      c.capacity = column_or_nan(st, 10);
      c.meets_target = st.column_is_null(11) ? -1 : static_cast<int>(st.column_int64(11));
      by_index[c.index] = configs.size();
      configs.push_back(std::move(c));
    }
  }
  {
    Statement st(db,
                 "SELECT p.config_index, p.run_id, p.rate, p.meets, "
                 "(SELECT value FROM scalar s WHERE s.run_id = p.run_id AND s.entity = 'run' AND "
                 "s.name = 'slo_attainment'), "
                 "(SELECT value FROM scalar s WHERE s.run_id = p.run_id AND s.entity = 'run' AND "
                 "s.name = 'goodput_tokens_per_s'), "
                 "(SELECT value FROM scalar s WHERE s.run_id = p.run_id AND s.entity = 'run' AND "
                 "s.name = 'output_tokens_per_s') "
                 "FROM plan_run p WHERE p.plan_id = ? ORDER BY p.config_index, p.rowid",
                 "reading plan runs");
    st.bind(1, plan_id);
    while (st.step()) {
      auto it = by_index.find(st.column_int64(0));
      if (it == by_index.end()) continue;
      configs[it->second].probes.push_back({st.column_int64(1), st.column_double(2),
                                            st.column_int64(3) != 0, column_or_nan(st, 4),
                                            column_or_nan(st, 5), column_or_nan(st, 6)});
    }
  }

  const bool target_mode = std::isfinite(target_rate) && target_rate > 0;
  bool have_capacity = false;
  for (const PlanConfig& c : configs) have_capacity = have_capacity || (c.capacity > 0);
  // The config's probe at the target rate; nullptr without a target or such a probe.
  auto probe_at_target = [&](const PlanConfig& c) -> const PlanConfig::Probe* {
    for (const auto& p : c.probes) {
      if (target_mode && std::abs(p.rate - target_rate) <= 1e-9 * target_rate) return &p;
    }
    return nullptr;
  };
  auto goodput_at_target = [&](const PlanConfig& c) {
    const PlanConfig::Probe* p = probe_at_target(c);
    return p ? p->goodput : kNaN;
  };
  auto y_of = [&](const PlanConfig& c) {
    return have_capacity ? c.capacity : goodput_at_target(c);
  };
  // Output tokens/s per GPU at the target rate (0 without a probe there): `servesim plan`'s
  // tie-break between configs of equal cost.
  auto tokens_per_gpu_at_target = [&](const PlanConfig& c) {
    const PlanConfig::Probe* p = probe_at_target(c);
    return p && std::isfinite(p->output_tokens_per_s) && c.num_gpus > 0
               ? p->output_tokens_per_s / static_cast<double>(c.num_gpus)
               : 0.0;
  };

  // Counts by status and pruning reason.
  std::map<std::string, int> by_status, by_reason;
  for (const PlanConfig& c : configs) {
    ++by_status[c.status];
    if (c.status == "pruned") ++by_reason[reason_kind(c.reason)];
  }
  // The chosen config: as `servesim plan` ranks them.
  std::vector<const PlanConfig*> ranked;
  for (const PlanConfig& c : configs) {
    if (c.status == "meets") ranked.push_back(&c);
  }
  std::stable_sort(ranked.begin(), ranked.end(), [&](const PlanConfig* a, const PlanConfig* b) {
    if (!target_mode) return a->capacity / a->cost > b->capacity / b->cost;
    if (a->cost != b->cost) return a->cost < b->cost;
    return tokens_per_gpu_at_target(*a) > tokens_per_gpu_at_target(*b);
  });
  const PlanConfig* chosen = ranked.empty() ? nullptr : ranked.front();

  // Pareto frontier over configs meeting the SLO: lower cost, higher y.
  std::vector<const PlanConfig*> front;
  for (const PlanConfig* a : ranked) {
    const double ya = y_of(*a);
    if (!std::isfinite(ya)) continue;
    bool dominated = false;
    for (const PlanConfig* b : ranked) {
      const double yb = y_of(*b);
      if (!std::isfinite(yb)) continue;
      if (b->cost <= a->cost && yb >= ya && (b->cost < a->cost || yb > ya)) dominated = true;
    }
    if (!dominated) front.push_back(a);
  }
  std::sort(front.begin(), front.end(),
            [](const PlanConfig* a, const PlanConfig* b) { return a->cost < b->cost; });

  std::string o;
  o += fmt::format("<section class=\"plan\" data-plan=\"{}\"><h2>Plan {}: {}</h2>\n", plan_id,
                   plan_id, svg::escape(name));
  o += fmt::format(
      "<p class=\"meta\">source {} · question: {} · status {}</p>\n", svg::escape(source),
      target_mode ? fmt::format("the cheapest config meeting the SLO at {:.3f} req/s", target_rate)
                  : std::string("the serving capacity of every config"),
      svg::escape(status));
  if (chosen) {
    o += fmt::format(
        "<div class=\"cards\"><div class=\"card chosen\"><span>chosen config</span><b "
        "data-chosen=\"{}\">#{} {}</b></div><div "
        "class=\"card\"><span>cost</span><b>${:.2f}/hour</b></div>"
        "<div class=\"card\"><span>GPUs</span><b>{}</b></div>{}</div>\n",
        chosen->index, chosen->index, svg::escape(chosen->label), chosen->cost, chosen->num_gpus,
        std::isfinite(chosen->capacity) && chosen->capacity > 0
            ? fmt::format(
                  "<div class=\"card\"><span>serving capacity</span><b>{:.3f} req/s</b></div>",
                  chosen->capacity)
            : std::string());
  } else {
    o += "<p class=\"warn\">No config meets the SLO" +
         std::string(target_mode ? " at the target rate" : "") + ".</p>\n";
  }
  o += "<div class=\"row\"><table class=\"counts\" "
       "data-table=\"plan-status\"><thead><tr><th>configs</th><th>count</th></tr></thead><tbody>";
  o += fmt::format("<tr><th>expanded</th>{}</tr>", td(std::to_string(configs.size()), "num"));
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

  // Frontier chart.
  ChartSet charts;
  {
    Chart c;
    c.id = fmt::format("plan{}-frontier", plan_id);
    c.title = have_capacity ? "Cost vs serving capacity (Pareto frontier)"
                            : "Cost vs goodput at the target rate (Pareto frontier)";
    c.x_label = "cost, USD per hour";
    c.y_label = have_capacity ? "serving capacity, req/s" : "goodput, tokens/s";
    Series meets = point_series("meets the SLO", SeriesStyle::kPoints, "meets", 0);
    Series fails = point_series("fails the SLO", SeriesStyle::kPoints, "fails", 7);
    Series fr = point_series("Pareto frontier", SeriesStyle::kLinePoints, "frontier", 2, 4.5);
    Series ch = point_series("chosen", SeriesStyle::kPoints, "chosen", 3, 8);
    for (const PlanConfig& pc : configs) {
      if (pc.status != "meets" && pc.status != "fails") continue;
      const double y = y_of(pc);
      if (!std::isfinite(y)) continue;
      Series& s = pc.status == "meets" ? meets : fails;
      s.points.push_back({pc.cost, y});
      s.labels.push_back(fmt::format("#{} {}: ${:.2f}/h, {} {:.3f}", pc.index, pc.label, pc.cost,
                                     have_capacity ? "req/s" : "tok/s", y));
    }
    for (const PlanConfig* pc : front) {
      fr.points.push_back({pc->cost, y_of(*pc)});
      fr.labels.push_back(fmt::format("frontier #{} {}", pc->index, pc->label));
    }
    if (chosen && std::isfinite(y_of(*chosen))) {
      ch.points.push_back({chosen->cost, y_of(*chosen)});
      ch.labels.push_back(fmt::format("chosen #{} {}", chosen->index, chosen->label));
    }
    c.series = {fails, meets, fr, ch};
    if (target_mode && have_capacity) c.y_markers.push_back({target_rate, "target rate"});
    charts.add(c);
  }
  // Capacity bisection of the chosen config and of the frontier's configs (at most 4 charts).
  std::vector<const PlanConfig*> searched;
  if (chosen) searched.push_back(chosen);
  for (const PlanConfig* pc : front) {
    if (pc != chosen && searched.size() < 4) searched.push_back(pc);
  }
  for (const PlanConfig* pc : searched) {
    if (pc->probes.size() < 2) continue;
    Chart c;
    c.id = fmt::format("plan{}-bisect-{}", plan_id, pc->index);
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
      const auto& p = pc->probes[k];
      path.points.push_back({p.rate, p.attainment});
      Series& s = p.meets ? ok : bad;
      s.points.push_back({p.rate, p.attainment});
      s.annotations.push_back(std::to_string(k + 1));
      s.labels.push_back(fmt::format("step {}: {:.3f} req/s, attainment {}, {} (run {})", k + 1,
                                     p.rate, fmt_pct(p.attainment), p.meets ? "meets" : "fails",
                                     p.run_id));
    }
    c.series = {path, ok, bad};
    if (std::isfinite(attainment_target)) {
      c.y_markers.push_back(
          {attainment_target, fmt::format("attainment target {}", fmt_pct(attainment_target))});
    }
    if (std::isfinite(pc->capacity) && pc->capacity > 0) {
      c.x_markers.push_back({pc->capacity, fmt::format("capacity {:.3f}", pc->capacity)});
    }
    charts.add(c);
  }
  o += "<div class=\"grid\">" + charts.html + "</div>\n";
  charts_out.charts += charts.charts;

  // Configs table: the frontier and the top of the ranking, then the rest in a collapsed list.
  auto config_row = [&](const PlanConfig& c) {
    std::string cls = &c == chosen ? " class=\"chosen\"" : "";
    const bool on_front = std::find(front.begin(), front.end(), &c) != front.end();
    return fmt::format(
        "<tr{} data-config=\"{}\"><td "
        "class=\"num\">{}</td><td>{}</td><td>{}</td>{}{}{}{}<td>{}</td></tr>\n",
        cls, c.index, c.index, svg::escape(c.label), svg::escape(c.status),
        td(std::to_string(c.num_gpus), "num"), td(fmt::format("{:.2f}", c.cost), "num"),
        td(std::isfinite(c.capacity) && c.capacity > 0 ? fmt::format("{:.3f}", c.capacity) : "–",
           "num"),
        td(on_front ? "yes" : "", "num"), svg::escape(c.reason.substr(0, 160)));
  };
  const std::string head =
      "<thead><tr><th>#</th><th>config</th><th>status</th><th>GPUs</th><th>$/hour</th><th>capacity "
      "req/s</th><th>frontier</th><th>reason</th></tr></thead>";
  o += "<h3>Configs meeting the SLO (by rank)</h3><table class=\"configs\" data-table=\"ranked\">" +
       head + "<tbody>";
  for (size_t k = 0; k < ranked.size() && k < 20; ++k) o += config_row(*ranked[k]);
  o += "</tbody></table>\n";
  o += fmt::format("<details><summary>All {} configs</summary><table class=\"configs\">{}<tbody>",
                   configs.size(), head);
  for (const PlanConfig& c : configs) o += config_row(c);
  o += "</tbody></table></details></section>\n";
  return o;
}

constexpr const char* kCss = R"css(
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
)css";

}  // namespace

std::string render_report(const std::string& db_path, const ReportOptions& options,
                          ReportStats* stats) {
  SqliteDb db(db_path, SqliteDb::Mode::kReadOnly);
  {
    Statement probe(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'run'",
                    "reading the database schema");
    probe.step();
    if (probe.column_int64(0) == 0) {
      throw InputError(db_path, 0, "not a servesim results database (it has no run table)");
    }
  }
  std::vector<int64_t> ids = options.run_ids;
  if (ids.empty() && !options.plan_id) {
    const auto all = all_ids(db, "SELECT run_id FROM run ORDER BY run_id");
    if (all.empty()) throw InputError(db_path, 0, "the database holds no runs");
    ids.push_back(all.back());
  }
  std::vector<RunData> runs;
  for (int64_t id : ids) runs.push_back(load_run(db, id));

  std::string title = options.title;
  if (title.empty()) {
    if (runs.size() == 1) {
      title = fmt::format("servesim report: run {} ({}, {})", runs[0].run_id, runs[0].scenario,
                          runs[0].policy);
    } else if (runs.size() > 1) {
      title = fmt::format("servesim comparison of {} runs", runs.size());
    } else {
      title = fmt::format("servesim plan {}", *options.plan_id);
    }
  }

  ChartSet all;
  std::string body;
  if (runs.size() == 1) {
    const RunData& r = runs[0];
    ChartSet charts = run_charts(runs, fmt::format("run{}-", r.run_id));
    all.charts += charts.charts;
    body += fmt::format("<section class=\"run\" data-run=\"{}\"><h2>Run {}: {}</h2>\n", r.run_id,
                        r.run_id, svg::escape(r.scenario));
    body += run_header(r);
    body += "<h3>Latency distributions and time series</h3><div class=\"grid\">" + charts.html +
            "</div>\n";
    body += notes_for(runs);
    body += "<div class=\"row\"><div><h3>Summary</h3>" + metrics_table(runs) + "</div><div>" +
            config_table(runs) + "</div></div>\n";
    body += "</section>\n";
  } else if (runs.size() > 1) {
    ChartSet charts = run_charts(runs, "cmp-");
    all.charts += charts.charts;
    body += fmt::format(
        "<section class=\"comparison\" data-runs=\"{}\"><h2>Comparison of {} runs</h2>\n",
        runs.size(), runs.size());
    body += "<ul class=\"runs\">";
    for (size_t i = 0; i < runs.size(); ++i) {
      body += fmt::format(
          "<li><span class=\"swatch\" style=\"background:{}\"></span><b>{}</b>: scenario {}, "
          "router {}; workload {}; SLO: {}</li>",
          svg::color(static_cast<int>(i)), svg::escape(runs[i].name()),
          svg::escape(runs[i].scenario), svg::escape(runs[i].router), svg::escape(runs[i].workload),
          svg::escape(slo_text(runs[i])));
    }
    body +=
        "</ul>\n<div class=\"row\"><div><h3>Side by side (Δ relative to the first run; green is "
        "better)</h3>" +
        metrics_table(runs) + "</div><div>" + config_table(runs) + "</div></div>\n";
    body += "<h3>Latency distributions and time series</h3><div class=\"grid\">" + charts.html +
            "</div>\n";
    body += notes_for(runs);
    body += "</section>\n";
  }
  if (options.plan_id) body += plan_section(db, *options.plan_id, all);

  std::string html;
  html.reserve(body.size() + 4096);
  html += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  html += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  html += "<title>" + svg::escape(title) + "</title>\n<style>" + std::string(kCss) +
          "</style></head>\n";
  html += fmt::format("<body data-report=\"servesim\" data-charts=\"{}\"><main>\n<h1>{}</h1>\n",
                      all.charts, svg::escape(title));
  html += fmt::format("<p class=\"meta\">database {}</p>\n", svg::escape(db_path));
  html += body;
  html += "<footer>Generated by servesim " SERVESIM_VERSION
          ". Self-contained: inline SVG and CSS, no script, no "
          "network.</footer>\n</main></body></html>\n";
  if (stats) {
    stats->runs = runs.size();
    stats->charts = all.charts;
    stats->bytes = html.size();
  }
  return html;
}

}  // namespace servesim::reports
