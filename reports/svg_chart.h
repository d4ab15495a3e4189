// Static SVG charts for the HTML report: line and step time series, CDFs, scatter plots and bars,
// with axes on "nice" ticks (1, 2, 5 x 10^k), marker lines (SLO thresholds) and a legend.
//
// Contract: render() is a pure function of its argument (deterministic, no I/O) and returns one
// self-contained <svg> element: no script, no external font, image or stylesheet; colours are
// inline, so the chart looks the same wherever the HTML is opened. Non-finite points are dropped.
// Every drawn mark carries data-* attributes so that tests (and a DOM reader) can count them:
//   <svg class="chart" data-chart=ID data-series-count=N data-x0 data-x1 data-px0 data-px1
//        data-y0 data-y1 data-py0 data-py1 data-log-x data-x-label data-y-label>
//        the axes: data value x0 sits at pixel px0, ... (what a hover script inverts)
//   <path class="series" data-series=NAME data-points=N>            line and step series
//   <circle class="point" data-series=NAME data-role=ROLE data-x data-y>  points, their values
//   <rect class="bar" data-series=NAME data-role=ROLE data-x data-y>      bars (centre, height)
//   <g class="legend-entry" data-series=NAME>                        one per named series
//   <line class="marker" data-marker=LABEL data-axis="x"|"y">        marker lines
// A named line series' path and every labelled point or bar carry a <title> (the browser's own
// tooltip). Callers downsample long series first (downsample_minmax, cdf_points): render() draws
// every point it is given.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace servesim::reports::svg {

struct Point {
  double x = 0;
  double y = 0;
};

enum class SeriesStyle {
  kLine,    // straight segments between points
  kStep,    // y holds until the next x (counts, instance pools)
  kPoints,  // one circle per point (scatter)
  kLinePoints,
  kBars,  // one bar per point, from 0 to y, centred on x (histograms, per-config values)
};

struct Series {
  std::string name;  // legend text; an empty name has no legend entry
  std::vector<Point> points;
  SeriesStyle style = SeriesStyle::kLine;
  std::string role;                 // data-role of its points ("frontier", "chosen", ...)
  std::vector<std::string> labels;  // optional per-point tooltip (<title>), same length as points
  std::vector<std::string> annotations;  // optional short text drawn beside each point ("1", "2")
  int color = -1;                        // palette index; -1: the series' position
  bool dashed = false;
  double radius = 3.5;  // kPoints / kLinePoints
  double bar_width = 0;  // kBars, in x units; 0: 0.8 x the smallest gap between x values
};

// A vertical (x) or horizontal (y) reference line, e.g. an SLO threshold.
struct Marker {
  double value = 0;
  std::string label;
};

struct Chart {
  std::string id;  // data-chart attribute
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<Series> series;
  std::vector<Marker> x_markers;
  std::vector<Marker> y_markers;
  bool log_x = false;                                // positive x only; ticks at 1, 2, 5 x 10^k
  std::optional<double> x_min, x_max, y_min, y_max;  // default: the data's range (y from 0)
  int width = 600;
  int height = 320;
};

// Tick positions covering [lo, hi] at a step of 1, 2 or 5 x 10^k, about `target` of them.
// REQUIRES: target >= 2. lo == hi gives one tick; lo > hi is swapped.
std::vector<double> nice_ticks(double lo, double hi, int target);

// Ticks for a log axis over [lo, hi] (lo > 0): 1, 2, 5 x 10^k inside the range.
std::vector<double> log_ticks(double lo, double hi);

// A short label for a tick value: "0", "2.5", "1k", "1.5M", "0.001".
std::string format_tick(double v);

// At most about `max_points` points covering the same x range: the points are cut into
// max_points / 2 buckets by index and each keeps its minimum and maximum (in x order), so peaks
// survive. Returns `points` unchanged when it is already short enough. REQUIRES: x sorted.
std::vector<Point> downsample_minmax(const std::vector<Point>& points, size_t max_points);

// Empirical CDF of `values` (x = value, y = share of values <= x in [0, 1]) in at most about
// `max_points` points: evenly spaced ranks, plus the upper tail (above the 99th percentile) at
// finer resolution so that p99 and the maximum stay exact. Non-finite values are dropped.
std::vector<Point> cdf_points(std::vector<double> values, size_t max_points);

// XML-escapes text for element content and attribute values.
std::string escape(std::string_view text);

// The palette colour of index i (cycled): a CSS hex colour.
std::string color(int i);

std::string render(const Chart& chart);

}  // namespace servesim::reports::svg
