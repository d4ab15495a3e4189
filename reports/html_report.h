// The HTML report of a results database (`servesim report`, `servesim compare`): one self-contained
// file (inline CSS, SVG charts from svg_chart.h and one inline script that shows the nearest
// point's values on hover; nothing from the network) with, per run, the configuration, SLO
// attainment and goodput, latency CDFs with the SLO lines, time series over simulated time,
// batch-size and tokens-per-iteration distributions and TTFT against prompt length; several runs
// overlaid with a side-by-side table of deltas; a capacity plan's Pareto frontiers (cost vs
// capacity, tokens/s per user vs per GPU), cost per million output tokens, pruning counts and
// capacity bisection steps; and a capacity search's latency and SLO attainment against offered
// load.
//
// Contract: the database is opened read-only and never modified. Series are downsampled (time
// series to at most kMaxSeriesPoints points, CDFs to kMaxCdfPoints, scatter plots to
// kMaxScatterPoints), so the file size is bounded by the number of runs and instances, not by the
// number of requests. Unknown run, plan or capacity ids throw servesim::InputError naming the
// database and the ids it holds. Deterministic: the same database and options give the same bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace servesim::reports {

inline constexpr size_t kMaxSeriesPoints = 600;
inline constexpr size_t kMaxCdfPoints = 400;
inline constexpr size_t kMaxScatterPoints = 1000;

struct ReportOptions {
  // Empty, with no plan or capacity search: the database's last run (or, when it holds no run, its
  // last capacity search).
  std::vector<int64_t> run_ids;
  std::optional<int64_t> plan_id;  // a plan section (its runs are not listed as runs)
  std::optional<int64_t> capacity_id;  // a capacity search section; 0: the database's last one
  std::string title;               // default: from the runs or the plan
};

// What render_report() drew, for the command's one-line summary and for tests.
struct ReportStats {
  size_t runs = 0;
  int64_t capacity_id = 0;  // the capacity search drawn; 0: none
  size_t charts = 0;
  size_t bytes = 0;
};

// REQUIRES: db_path names a servesim results database.
std::string render_report(const std::string& db_path, const ReportOptions& options,
                          ReportStats* stats = nullptr);

}  // namespace servesim::reports
