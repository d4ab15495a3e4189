#include "reports/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace servesim::reports::svg {
namespace {

constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
constexpr int kPaletteSize = sizeof(kPalette) / sizeof(kPalette[0]);

// Pixel width of a label in the 11 px sans-serif the charts use (an estimate: no font metrics).
double text_width(std::string_view s) { return 6.2 * static_cast<double>(s.size()); }

double nice_step(double raw) {
  if (!(raw > 0) || !std::isfinite(raw)) return 1;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  // Nearest on a log scale: the step is within a factor of about 1.6 of `raw`.
  const double nice = f < 1.4143 ? 1 : f < 3.1623 ? 2 : f < 7.0711 ? 5 : 10;
  return nice * mag;
}

std::string num(double v) { return fmt::format("{:.1f}", v); }

struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  double px_lo = 0, px_hi = 1;  // pixel positions of lo and hi
  std::vector<double> ticks;

  double map(double v) const {
    const double a = log ? std::log10(lo) : lo;
    const double b = log ? std::log10(hi) : hi;
    const double x = log ? std::log10(v) : v;
    const double f = b > a ? (x - a) / (b - a) : 0.5;
    return px_lo + f * (px_hi - px_lo);
  }
};

// Fits an axis to the data range [lo, hi] (already including markers and overrides).
Axis make_axis(double lo, double hi, bool log, bool fixed_lo, bool fixed_hi) {
  Axis a;
  a.log = log;
  if (log) {
    if (!(lo > 0)) lo = hi > 0 ? hi / 10 : 1;
    if (!(hi > lo)) hi = lo * 10;
    a.lo = fixed_lo ? lo : std::pow(10.0, std::floor(std::log10(lo)));
    a.hi = fixed_hi ? hi : std::pow(10.0, std::ceil(std::log10(hi)));
    if (!(a.hi > a.lo)) a.hi = a.lo * 10;
    a.ticks = log_ticks(a.lo, a.hi);
    return a;
  }
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) {
    const double pad = lo == 0 ? 1 : std::abs(lo) * 0.1;
    if (!fixed_lo) lo -= lo == 0 ? 0 : pad;
    hi += pad;
  }
  const double step = nice_step((hi - lo) / 5);
  a.lo = fixed_lo ? lo : std::floor(lo / step) * step;
  a.hi = fixed_hi ? hi : std::ceil(hi / step) * step;
  if (!(a.hi > a.lo)) a.hi = a.lo + step;
  a.ticks = nice_ticks(a.lo, a.hi, 6);
  return a;
}

// The width of each bar of `s`, in x units: its own, or 0.8 x the smallest gap between its distinct
// x values (1 for a single bar).
template <typename Usable>
double bar_width(const Series& s, const Usable& usable) {
  if (s.bar_width > 0) return s.bar_width;
  std::vector<double> xs;
  for (const Point& p : s.points) {
    if (usable(p)) xs.push_back(p.x);
  }
  std::sort(xs.begin(), xs.end());
  double gap = std::numeric_limits<double>::infinity();
  for (size_t k = 1; k < xs.size(); ++k) {
    if (xs[k] > xs[k - 1]) gap = std::min(gap, xs[k] - xs[k - 1]);
  }
  return std::isfinite(gap) ? 0.8 * gap : 1.0;
}

// The bars of series `s` (its usable points `pts`, at indices `idx` of s.points), `width` wide.
std::string render_bars(const Series& s, const std::vector<Point>& pts,
                        const std::vector<size_t>& idx, const std::string& colour, double width,
                        const Axis& xa, const Axis& ya) {
  std::string o;
  const double base = ya.map(std::clamp(0.0, ya.lo, ya.hi));
  for (size_t k = 0; k < pts.size(); ++k) {
    const double x0 = xa.map(xa.log ? pts[k].x : pts[k].x - width / 2);
    const double x1 = xa.map(xa.log ? pts[k].x : pts[k].x + width / 2);
    const double y = ya.map(pts[k].y);
    const double w = std::max(1.0, x1 - x0);
    o += fmt::format(
        "<rect class=\"bar\" data-series=\"{}\" data-role=\"{}\" data-x=\"{:.6g}\" "
        "data-y=\"{:.6g}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" "
        "fill-opacity=\"0.75\">",
        escape(s.name), escape(s.role), pts[k].x, pts[k].y, num(x0), num(std::min(y, base)), num(w),
        num(std::max(0.5, std::abs(base - y))), colour);
    if (idx[k] < s.labels.size()) o += "<title>" + escape(s.labels[idx[k]]) + "</title>";
    o += "</rect>\n";
  }
  return o;
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (hi < lo) std::swap(lo, hi);
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {};
  if (hi == lo) return {lo};
  const double step = nice_step((hi - lo) / std::max(1, target - 1));
  std::vector<double> ticks;
  const double first = std::ceil(lo / step - 1e-9) * step;
  for (int i = 0; i < 1000; ++i) {
    double t = first + i * step;
    if (t > hi + step * 1e-9) break;
    if (std::abs(t) < step * 1e-9) t = 0;
    ticks.push_back(t);
  }
  return ticks;
}

std::vector<double> log_ticks(double lo, double hi) {
  std::vector<double> ticks;
  if (!(lo > 0) || !(hi >= lo)) return ticks;
  const int k0 = static_cast<int>(std::floor(std::log10(lo)));
  const int k1 = static_cast<int>(std::ceil(std::log10(hi)));
  const bool dense = k1 - k0 <= 2;
  for (int k = k0; k <= k1; ++k) {
    const double mag = std::pow(10.0, k);
    for (double m : {1.0, 2.0, 5.0}) {
      if (!dense && m != 1.0) continue;
      const double t = m * mag;
      if (t >= lo * (1 - 1e-9) && t <= hi * (1 + 1e-9)) ticks.push_back(t);
    }
  }
  return ticks;
}

std::string format_tick(double v) {
  if (v == 0) return "0";
  const double a = std::abs(v);
  auto trim = [](std::string s) {
    if (s.find('.') != std::string::npos) {
      while (!s.empty() && s.back() == '0') s.pop_back();
      if (!s.empty() && s.back() == '.') s.pop_back();
    }
    return s;
  };
  if (a >= 1e9) return trim(fmt::format("{:.2f}", v / 1e9)) + "G";
  if (a >= 1e6) return trim(fmt::format("{:.2f}", v / 1e6)) + "M";
  if (a >= 1e4) return trim(fmt::format("{:.2f}", v / 1e3)) + "k";
  if (a >= 1) return trim(fmt::format("{:.2f}", v));
  return trim(fmt::format("{:.6f}", v));
}

std::vector<Point> downsample_minmax(const std::vector<Point>& points, size_t max_points) {
  if (max_points < 4 || points.size() <= max_points) return points;
  const size_t buckets = max_points / 2;
  std::vector<Point> out;
  out.reserve(buckets * 2);
  for (size_t b = 0; b < buckets; ++b) {
    const size_t begin = b * points.size() / buckets;
    const size_t end = (b + 1) * points.size() / buckets;
    if (begin >= end) continue;
    size_t lo = begin, hi = begin;
    for (size_t i = begin; i < end; ++i) {
      if (points[i].y < points[lo].y) lo = i;
      if (points[i].y > points[hi].y) hi = i;
    }
    if (lo == hi) {
      out.push_back(points[lo]);
    } else {
      out.push_back(points[std::min(lo, hi)]);
      out.push_back(points[std::max(lo, hi)]);
    }
  }
  return out;
}

std::vector<Point> cdf_points(std::vector<double> values, size_t max_points) {
  std::erase_if(values, [](double v) { return !std::isfinite(v); });
  std::vector<Point> out;
  if (values.empty()) return out;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  auto add_rank = [&](size_t i) {  // i: 0-based rank; y = share of values <= values[i]
    out.push_back({values[i], static_cast<double>(i + 1) / static_cast<double>(n)});
  };
  if (n <= std::max<size_t>(max_points, 2)) {
    for (size_t i = 0; i < n; ++i) add_rank(i);
    return out;
  }
  const size_t body = max_points * 3 / 4;
  const size_t tail = max_points - body;
  const size_t p99 = static_cast<size_t>(std::floor(0.99 * static_cast<double>(n - 1)));
  for (size_t k = 0; k < body; ++k) add_rank(k * p99 / (body - 1));
  for (size_t k = 1; k <= tail; ++k) add_rank(p99 + k * (n - 1 - p99) / tail);
  // Ranks can repeat when the tail is shorter than `tail`.
  out.erase(std::unique(out.begin(), out.end(),
                        [](const Point& a, const Point& b) { return a.x == b.x && a.y == b.y; }),
            out.end());
  return out;
}

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string color(int i) { return kPalette[((i % kPaletteSize) + kPaletteSize) % kPaletteSize]; }

namespace {

// A point drawn: finite, with a positive x on a log axis.
bool usable(const Chart& chart, const Point& p) {
  return std::isfinite(p.x) && std::isfinite(p.y) && (!chart.log_x || p.x > 0);
}

// The axes' data range: every usable point (bars by their width) and marker, 0 included on the
// y axis, then the chart's fixed bounds; a unit range when there is no data (`empty`).
struct DataRange {
  double x_lo, x_hi, y_lo, y_hi;
  bool empty;
};

DataRange data_range(const Chart& chart, const std::vector<double>& bar_widths) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  DataRange r{kInf, -kInf, kInf, -kInf, false};
  for (size_t i = 0; i < chart.series.size(); ++i) {
    const double half = bar_widths[i] / 2;
    for (const Point& p : chart.series[i].points) {
      if (!usable(chart, p)) continue;
      r.x_lo = std::min(r.x_lo, chart.log_x ? p.x : p.x - half);
      r.x_hi = std::max(r.x_hi, chart.log_x ? p.x : p.x + half);
      r.y_lo = std::min(r.y_lo, p.y);
      r.y_hi = std::max(r.y_hi, p.y);
    }
  }
  for (const Marker& m : chart.x_markers) {
    if (std::isfinite(m.value) && (!chart.log_x || m.value > 0)) {
      r.x_lo = std::min(r.x_lo, m.value);
      r.x_hi = std::max(r.x_hi, m.value);
    }
  }
  for (const Marker& m : chart.y_markers) {
    if (std::isfinite(m.value)) {
      r.y_lo = std::min(r.y_lo, m.value);
      r.y_hi = std::max(r.y_hi, m.value);
    }
  }
  r.empty = !(r.x_lo <= r.x_hi);
  if (r.empty) {
    r.x_lo = chart.log_x ? 1 : 0;
    r.x_hi = chart.log_x ? 10 : 1;
    r.y_lo = 0;
    r.y_hi = 1;
  }
  if (r.y_lo > 0) r.y_lo = 0;
  if (chart.x_min) r.x_lo = *chart.x_min;
  if (chart.x_max) r.x_hi = *chart.x_max;
  if (chart.y_min) r.y_lo = *chart.y_min;
  if (chart.y_max) r.y_hi = *chart.y_max;
  return r;
}

struct LegendItem {
  const Series* s;
  int color;
  double x, y;
};

// Where things go: the plot area, and legend rows under the x-axis label wrapped to its width.
struct Layout {
  double left = 62, right = 14, top = 30;
  double plot_w = 0, plot_h = 0, height = 0;
  std::vector<LegendItem> legend;
};

Layout layout(const Chart& chart) {
  Layout l;
  l.plot_w = chart.width - l.left - l.right;
  double lx = 0;
  int rows = 0;
  for (size_t i = 0; i < chart.series.size(); ++i) {
    const Series& s = chart.series[i];
    if (s.name.empty()) continue;
    const double w = 26 + text_width(s.name) + 14;
    if (rows == 0 || (lx + w > l.plot_w && lx > 0)) {
      ++rows;
      lx = 0;
    }
    l.legend.push_back({&s, s.color >= 0 ? s.color : static_cast<int>(i), lx, (rows - 1) * 17.0});
    lx += w;
  }
  l.height = chart.height + rows * 17.0;
  l.plot_h = chart.height - l.top - 44;
  return l;
}

// The <svg> element's opening tag: size, title, and the axes' mapping as data-* attributes.
std::string svg_open(const Chart& chart, const Layout& l, const Axis& xa, const Axis& ya) {
  int named = 0;
  for (const Series& s : chart.series) named += s.name.empty() ? 0 : 1;
  return fmt::format(
      "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {}\" "
      "width=\"{}\" height=\"{}\" data-chart=\"{}\" data-series-count=\"{}\" role=\"img\" "
      "aria-label=\"{}\" font-family=\"sans-serif\" font-size=\"11\" data-x0=\"{}\" data-x1=\"{}\" "
      "data-px0=\"{}\" data-px1=\"{}\" data-y0=\"{}\" data-y1=\"{}\" data-py0=\"{}\" "
      "data-py1=\"{}\" data-log-x=\"{}\" data-x-label=\"{}\" data-y-label=\"{}\">\n",
      chart.width, num(l.height), chart.width, num(l.height), escape(chart.id), named,
      escape(chart.title), xa.lo, xa.hi, num(xa.px_lo), num(xa.px_hi), ya.lo, ya.hi, num(ya.px_lo),
      num(ya.px_hi), chart.log_x ? 1 : 0, escape(chart.x_label), escape(chart.y_label));
}

// The title, grid, ticks, tick labels and axis labels.
std::string render_axes(const Chart& chart, const Layout& l, const Axis& xa, const Axis& ya) {
  std::string o = fmt::format(
      "<text x=\"{}\" y=\"18\" font-size=\"13\" font-weight=\"bold\">{}</text>\n", num(l.left),
      escape(chart.title));
  o += "<g class=\"axes\" stroke=\"#ddd\">\n";
  for (double t : xa.ticks) {
    const double x = xa.map(t);
    o += fmt::format("<line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\"/>\n", num(x), num(l.top),
                     num(l.top + l.plot_h));
  }
  for (double t : ya.ticks) {
    const double y = ya.map(t);
    o += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\"/>\n", num(l.left),
                     num(l.left + l.plot_w), num(y));
  }
  o += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888\"/>\n",
      num(l.left), num(l.top), num(l.plot_w), num(l.plot_h));
  o += "</g>\n<g class=\"tick-labels\" fill=\"#333\">\n";
  for (double t : xa.ticks) {
    o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", num(xa.map(t)),
                     num(l.top + l.plot_h + 14), format_tick(t));
  }
  for (double t : ya.ticks) {
    o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", num(l.left - 5),
                     num(ya.map(t) + 4), format_tick(t));
  }
  o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                   num(l.left + l.plot_w / 2), num(l.top + l.plot_h + 30), escape(chart.x_label));
  o += fmt::format(
      "<text transform=\"translate(14 {}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
      num(l.top + l.plot_h / 2), escape(chart.y_label));
  o += "</g>\n";
  return o;
}

// A line, step or line-and-points series' path.
std::string render_line(const Series& s, const std::vector<Point>& pts, const std::string& c,
                        const Axis& xa, const Axis& ya) {
  std::string d;
  d.reserve(pts.size() * 16);
  for (size_t k = 0; k < pts.size(); ++k) {
    const double x = xa.map(pts[k].x), y = ya.map(pts[k].y);
    if (k == 0) {
      d += fmt::format("M{} {}", num(x), num(y));
    } else if (s.style == SeriesStyle::kStep) {
      d += fmt::format("H{}V{}", num(x), num(y));
    } else {
      d += fmt::format("L{} {}", num(x), num(y));
    }
  }
  return fmt::format(
      "<path class=\"series\" data-series=\"{}\" data-points=\"{}\" d=\"{}\" fill=\"none\" "
      "stroke=\"{}\" stroke-width=\"1.6\"{}>{}</path>\n",
      escape(s.name), pts.size(), d, c, s.dashed ? " stroke-dasharray=\"5 3\"" : "",
      s.name.empty() ? std::string() : "<title>" + escape(s.name) + "</title>");
}

// A series' point marks (points `pts`, at indices `idx` of the series), each with its values,
// its label as a tooltip and its annotation; the series' colours once, on a group around them.
std::string render_points(const Series& s, const std::vector<Point>& pts,
                          const std::vector<size_t>& idx, const std::string& c, const Axis& xa,
                          const Axis& ya) {
  std::string o = fmt::format(
      "<g class=\"points\" fill=\"{}\" fill-opacity=\"0.8\" stroke=\"#fff\" "
      "stroke-width=\"0.8\">\n",
      c);
  const std::string r = num(s.radius);
  for (size_t k = 0; k < pts.size(); ++k) {
    o += fmt::format(
        "<circle class=\"point\" data-series=\"{}\" data-role=\"{}\" cx=\"{}\" cy=\"{}\" "
        "r=\"{}\" data-x=\"{:.6g}\" data-y=\"{:.6g}\">",
        escape(s.name), escape(s.role), num(xa.map(pts[k].x)), num(ya.map(pts[k].y)), r,
        pts[k].x, pts[k].y);
    if (idx[k] < s.labels.size()) o += "<title>" + escape(s.labels[idx[k]]) + "</title>";
    o += "</circle>\n";
    if (idx[k] < s.annotations.size() && !s.annotations[idx[k]].empty()) {
      o += fmt::format(
          "<text class=\"annotation\" x=\"{}\" y=\"{}\" font-size=\"10\" fill=\"#333\" "
          "fill-opacity=\"1\" stroke=\"none\">{}</text>\n",
          num(xa.map(pts[k].x) + s.radius + 2), num(ya.map(pts[k].y) - s.radius - 1),
          escape(s.annotations[idx[k]]));
    }
  }
  o += "</g>\n";
  return o;
}

// Series i of the chart: bars, a line, points, or a line with points.
std::string render_series(const Chart& chart, size_t i, double bar_width, const Axis& xa,
                          const Axis& ya) {
  const Series& s = chart.series[i];
  const std::string c = color(s.color >= 0 ? s.color : static_cast<int>(i));
  std::vector<Point> pts;
  std::vector<size_t> idx;
  for (size_t k = 0; k < s.points.size(); ++k) {
    if (usable(chart, s.points[k])) {
      pts.push_back(s.points[k]);
      idx.push_back(k);
    }
  }
  if (s.style == SeriesStyle::kBars) return render_bars(s, pts, idx, c, bar_width, xa, ya);
  std::string o;
  if (s.style != SeriesStyle::kPoints) o += render_line(s, pts, c, xa, ya);
  const bool marks = s.style == SeriesStyle::kPoints || s.style == SeriesStyle::kLinePoints;
  if (marks && !pts.empty()) o += render_points(s, pts, idx, c, xa, ya);
  return o;
}

// Marker lines with their labels; labels of successive x markers step down so that they do not
// overlap.
std::string render_markers(const Chart& chart, const Layout& l, const Axis& xa, const Axis& ya) {
  std::string o;
  int x_marker_row = 0;
  for (const Marker& m : chart.x_markers) {
    if (!std::isfinite(m.value) || (chart.log_x && m.value <= 0)) continue;
    const double x = xa.map(m.value);
    const double label_y = l.top + 11 + 13 * (x_marker_row++ % 4);
    o += fmt::format(
        "<line class=\"marker\" data-marker=\"{0}\" data-axis=\"x\" x1=\"{1}\" x2=\"{1}\" "
        "y1=\"{2}\" y2=\"{3}\" stroke=\"#c00\" stroke-dasharray=\"4 3\" stroke-width=\"1.2\"/>\n"
        "<text x=\"{4}\" y=\"{5}\" fill=\"#c00\" text-anchor=\"end\">{0}</text>\n",
        escape(m.label), num(x), num(l.top), num(l.top + l.plot_h), num(x - 3), num(label_y));
  }
  for (const Marker& m : chart.y_markers) {
    if (!std::isfinite(m.value)) continue;
    const double y = ya.map(m.value);
    o += fmt::format(
        "<line class=\"marker\" data-marker=\"{0}\" data-axis=\"y\" x1=\"{1}\" x2=\"{2}\" "
        "y1=\"{3}\" y2=\"{3}\" stroke=\"#c00\" stroke-dasharray=\"4 3\" stroke-width=\"1.2\"/>\n"
        "<text x=\"{4}\" y=\"{5}\" fill=\"#c00\">{0}</text>\n",
        escape(m.label), num(l.left), num(l.left + l.plot_w), num(y), num(l.left + 4),
        num(y - 4 < l.top + 10 ? y + 12 : y - 4));  // below the line at the top of the plot
  }
  return o;
}

std::string render_legend(const Layout& l) {
  if (l.legend.empty()) return "";
  std::string o = fmt::format("<g class=\"legend\" transform=\"translate({} {})\">\n", num(l.left),
                              num(l.top + l.plot_h + 40));
  for (const LegendItem& item : l.legend) {
    const std::string c = color(item.color);
    o += fmt::format("<g class=\"legend-entry\" data-series=\"{}\">", escape(item.s->name));
    if (item.s->style == SeriesStyle::kBars) {
      o += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"9\" fill=\"{}\"/>",
                       num(item.x + 4), num(item.y - 4.5), c);
    } else if (item.s->style == SeriesStyle::kPoints) {
      o += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"{}\"/>", num(item.x + 10),
                       num(item.y), c);
    } else {
      o += fmt::format(
          "<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"{3}\" "
          "stroke-width=\"2.5\"{4}/>",
          num(item.x), num(item.x + 20), num(item.y), c,
          item.s->dashed ? " stroke-dasharray=\"5 3\"" : "");
    }
    o += fmt::format("<text x=\"{}\" y=\"{}\">{}</text></g>\n", num(item.x + 26), num(item.y + 4),
                     escape(item.s->name));
  }
  o += "</g>\n";
  return o;
}

}  // namespace

std::string render(const Chart& chart) {
  std::vector<double> bar_widths(chart.series.size(), 0);
  for (size_t i = 0; i < chart.series.size(); ++i) {
    if (chart.series[i].style == SeriesStyle::kBars) {
      bar_widths[i] = bar_width(chart.series[i], [&](const Point& p) { return usable(chart, p); });
    }
  }
  const DataRange range = data_range(chart, bar_widths);
  const Layout l = layout(chart);
  Axis xa = make_axis(range.x_lo, range.x_hi, chart.log_x, chart.x_min.has_value(),
                      chart.x_max.has_value());
  Axis ya = make_axis(range.y_lo, range.y_hi, false, chart.y_min.has_value(),
                      chart.y_max.has_value());
  xa.px_lo = l.left;
  xa.px_hi = l.left + l.plot_w;
  ya.px_lo = l.top + l.plot_h;
  ya.px_hi = l.top;

  std::string o;
  o.reserve(4096);
  o += svg_open(chart, l, xa, ya);
  o += render_axes(chart, l, xa, ya);
  // Series, clipped to the plot area plus a margin: marks on the edge (a point at the maximum, its
  // step number) stay whole.
  constexpr double kClipMargin = 12;
  const std::string clip = "clip-" + chart.id;
  o += fmt::format(
      "<clipPath id=\"{}\"><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/></clipPath>\n",
      escape(clip), num(l.left - kClipMargin), num(l.top - kClipMargin),
      num(l.plot_w + 2 * kClipMargin), num(l.plot_h + 2 * kClipMargin));
  o += fmt::format("<g class=\"plot\" clip-path=\"url(#{})\">\n", escape(clip));
  for (size_t i = 0; i < chart.series.size(); ++i) {
    o += render_series(chart, i, bar_widths[i], xa, ya);
  }
  o += "</g>\n";
  o += render_markers(chart, l, xa, ya);
  o += render_legend(l);
  if (range.empty) {
    o +=
        fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#888\">no data</text>\n",
                    num(l.left + l.plot_w / 2), num(l.top + l.plot_h / 2));
  }
  o += "</svg>\n";
  return o;
}

}  // namespace servesim::reports::svg
