// The HTML report of a results database (`servesim report`, `servesim compare`): one
// self-contained file (inline CSS and SVG charts from svg_chart.h, no script, no network) with,
// per run, the configuration, SLO attainment and goodput, latency CDFs with the SLO lines, and
// time series over simulated time; several runs overlaid with a side-by-side table of deltas; and
// a capacity plan's Pareto frontier, pruning counts and capacity bisection steps.
//
// Contract: the database is opened read-only and never modified. Series are downsampled
// (time series to at most kMaxSeriesPoints points, CDFs to kMaxCdfPoints), so the file size is
// bounded by the number of runs and instances, not by the number of requests. Unknown run or plan
// ids throw servesim::InputError naming the database and the ids it holds. Deterministic: the
// same database and options give the same bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace servesim::reports {

inline constexpr size_t kMaxSeriesPoints = 600;
inline constexpr size_t kMaxCdfPoints = 400;

struct ReportOptions {
  std::vector<int64_t> run_ids;    // empty and no plan: the database's last run
  std::optional<int64_t> plan_id;  // a plan section (its runs are not listed as runs)
  std::string title;               // default: from the runs or the plan
};

// What render_report() drew, for the command's one-line summary and for tests.
struct ReportStats {
  size_t runs = 0;
  size_t charts = 0;
  size_t bytes = 0;
};

// REQUIRES: db_path names a servesim results database.
std::string render_report(const std::string& db_path, const ReportOptions& options,
                          ReportStats* stats = nullptr);

}  // namespace servesim::reports
