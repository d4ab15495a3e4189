#include "reports/svg_chart.h"

#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <string>

namespace servesim::reports::svg {
namespace {

size_t count(const std::string& text, const std::string& pattern) {
  const std::regex re(pattern);
  return static_cast<size_t>(
      std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

// A series of `points` named `name`, drawn as `style`, the other fields at their defaults.
Series series(std::string name, std::vector<Point> points, SeriesStyle style = SeriesStyle::kLine) {
  Series out;
  out.name = std::move(name);
  out.points = std::move(points);
  out.style = style;
  return out;
}

TEST(NiceTicks, StepsOfOneTwoFive) {
  EXPECT_EQ(nice_ticks(0, 10, 6), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  const std::vector<double> unit = nice_ticks(0, 1, 6);
  const std::vector<double> want{0, 0.2, 0.4, 0.6, 0.8, 1};
  ASSERT_EQ(unit.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(unit[i], want[i], 1e-12);
  EXPECT_EQ(nice_ticks(3, 97, 5), (std::vector<double>{20, 40, 60, 80}));
  EXPECT_EQ(nice_ticks(0, 7300, 6), (std::vector<double>{0, 2000, 4000, 6000}));
  EXPECT_EQ(nice_ticks(5, 5, 6), (std::vector<double>{5}));
  EXPECT_EQ(nice_ticks(10, 0, 3), (std::vector<double>{0, 5, 10}));
  EXPECT_EQ(nice_ticks(-1, 1, 5), (std::vector<double>{-1, -0.5, 0, 0.5, 1}));
}

TEST(LogTicks, DecadesAndTwoFiveWhenNarrow) {
  EXPECT_EQ(log_ticks(1, 100), (std::vector<double>{1, 2, 5, 10, 20, 50, 100}));
  EXPECT_EQ(log_ticks(1, 1e5), (std::vector<double>{1, 10, 100, 1000, 1e4, 1e5}));
  EXPECT_TRUE(log_ticks(0, 10).empty());
}

TEST(FormatTick, ShortLabels) {
  EXPECT_EQ(format_tick(0), "0");
  EXPECT_EQ(format_tick(2.5), "2.5");
  EXPECT_EQ(format_tick(1000), "1000");
  EXPECT_EQ(format_tick(20000), "20k");
  EXPECT_EQ(format_tick(1.5e6), "1.5M");
  EXPECT_EQ(format_tick(0.001), "0.001");
}

TEST(DownsampleMinmax, KeepsPeaksAndBoundsSize) {
  std::vector<Point> pts;
  for (int i = 0; i < 100000; ++i)
    pts.push_back({double(i), i == 54321 ? 1000.0 : std::sin(i * 0.01)});
  const auto out = downsample_minmax(pts, 600);
  EXPECT_LE(out.size(), 600u);
  EXPECT_GE(out.size(), 300u);
  bool peak = false;
  for (size_t i = 0; i < out.size(); ++i) {
    peak = peak || out[i].y == 1000.0;
    if (i > 0) {
      EXPECT_LE(out[i - 1].x, out[i].x);
    }
  }
  EXPECT_TRUE(peak);
  EXPECT_EQ(downsample_minmax({{0, 1}, {1, 2}}, 600).size(), 2u);
}

TEST(CdfPoints, ExactTailAndBoundedSize) {
  std::vector<double> v;
  for (int i = 1; i <= 100000; ++i) v.push_back(i);
  v.push_back(NAN);
  const auto pts = cdf_points(v, 400);
  EXPECT_LE(pts.size(), 400u);
  EXPECT_EQ(pts.back().x, 100000);
  EXPECT_DOUBLE_EQ(pts.back().y, 1.0);
  for (size_t i = 1; i < pts.size(); ++i) {
    EXPECT_LE(pts[i - 1].x, pts[i].x);
    EXPECT_LE(pts[i - 1].y, pts[i].y);
  }
  const auto small = cdf_points({3, 1, 2}, 400);
  ASSERT_EQ(small.size(), 3u);
  EXPECT_EQ(small[0].x, 1);
  EXPECT_NEAR(small[0].y, 1.0 / 3, 1e-12);
  EXPECT_TRUE(cdf_points({}, 400).empty());
}

TEST(Escape, XmlSpecials) {
  EXPECT_EQ(escape("a<b & \"c\">'"), "a&lt;b &amp; &quot;c&quot;&gt;&#39;");
}

TEST(Render, MarksCarryDataAttributes) {
  Chart c;
  c.id = "ttft";
  c.title = "TTFT <CDF>";
  c.log_x = true;
  c.series.push_back(series("run 1", {{1, 0.1}, {10, 0.5}, {100, 1}}));
  c.series.push_back(series("run 2", {{2, 0.2}, {20, 1}}, SeriesStyle::kStep));
  Series pts = series("configs", {{1, 1}, {2, 2}, {0, 3}}, SeriesStyle::kPoints);
  pts.role = "frontier";
  pts.labels = {"a", "b", "c"};
  pts.annotations = {"1", "", "3"};
  c.series.push_back(pts);
  c.series.push_back(series("", {{5, 0.5}}));  // no legend entry
  c.x_markers.push_back({50, "TTFT SLO"});
  c.y_markers.push_back({0.9, "target"});
  const std::string svg = render(c);
  EXPECT_EQ(svg.rfind("<svg class=\"chart\"", 0), 0u);
  EXPECT_NE(svg.find("data-chart=\"ttft\""), std::string::npos);
  EXPECT_NE(svg.find("data-series-count=\"3\""), std::string::npos);
  EXPECT_NE(svg.find("TTFT &lt;CDF&gt;"), std::string::npos);
  EXPECT_EQ(count(svg, "<path class=\"series\""), 3u);
  EXPECT_EQ(count(svg, "class=\"legend-entry\""), 3u);
  // x = 0 cannot be drawn on a log axis.
  EXPECT_EQ(count(svg, "<circle class=\"point\" data-series=\"configs\" data-role=\"frontier\""),
            2u);
  EXPECT_EQ(count(svg, "<title>[ab]</title>"), 2u);
  EXPECT_EQ(count(svg, "class=\"annotation\""), 1u);  // "" is not drawn; x = 0 cannot be
  EXPECT_EQ(count(svg, "class=\"marker\" data-marker=\"TTFT SLO\" data-axis=\"x\""), 1u);
  EXPECT_EQ(count(svg, "class=\"marker\" data-marker=\"target\" data-axis=\"y\""), 1u);
  EXPECT_NE(svg.find("H"), std::string::npos);  // the step series
  EXPECT_EQ(svg.find("<script"), std::string::npos);
  EXPECT_EQ(svg.find("http://www.w3.org/2000/svg"), svg.find("http"));  // only the namespace
}

// The axes are declared on the <svg> (what the report's hover script inverts), named lines carry
// their name as a <title>, and points their values.
TEST(Render, DeclaresAxesAndValuesForHovering) {
  Chart c;
  c.id = "lat";
  c.x_label = "rate, req/s";
  c.y_label = "TTFT, ms";
  c.x_min = 0;
  c.x_max = 10;
  c.y_min = 0;
  c.y_max = 100;
  c.width = 600;
  c.series.push_back(series("p99", {{1, 10}, {5, 50}}, SeriesStyle::kLinePoints));
  c.series.push_back(series("", {{2, 20}}));
  const std::string svg = render(c);
  // Plot area: x from 62 to 600 - 14 px, y from 30 + (320 - 30 - 44) px up to 30.
  EXPECT_NE(svg.find("data-x0=\"0\" data-x1=\"10\" data-px0=\"62.0\" data-px1=\"586.0\" "
                     "data-y0=\"0\" data-y1=\"100\" data-py0=\"276.0\" data-py1=\"30.0\" "
                     "data-log-x=\"0\" data-x-label=\"rate, req/s\" data-y-label=\"TTFT, ms\""),
            std::string::npos)
      << svg;
  EXPECT_EQ(count(svg, "<title>p99</title></path>"), 1u);
  EXPECT_EQ(count(svg, "<title>"), 1u);  // the unnamed line has none
  EXPECT_EQ(count(svg, "data-x=\"5\" data-y=\"50\""), 1u);
  // Point (5, 50) sits at x = 62 + 0.5 x 524, y = 276 - 0.5 x 246.
  EXPECT_NE(svg.find("cx=\"324.0\" cy=\"153.0\""), std::string::npos);
}

// Bars stand on zero, centred on x, as wide as asked (or 0.8 of the closest gap).
TEST(Render, BarsStandOnZero) {
  Chart c;
  c.id = "hist";
  c.x_min = 0;
  c.x_max = 10;
  c.y_min = 0;
  c.y_max = 1;
  Series bars = series("share", {{2, 0.5}, {4, 1}}, SeriesStyle::kBars);
  bars.role = "distribution";
  bars.labels = {"two", "four"};
  c.series.push_back(bars);
  const std::string svg = render(c);
  EXPECT_EQ(count(svg, "<rect class=\"bar\" data-series=\"share\" data-role=\"distribution\""), 2u);
  // Width 0.8 x 2 = 1.6 units = 83.8 px; the first bar from x = 1.2 to 2.8, height 0.5 x 246.
  EXPECT_NE(
      svg.find(
          "data-x=\"2\" data-y=\"0.5\" x=\"124.9\" y=\"153.0\" width=\"83.8\" height=\"123.0\""),
      std::string::npos)
      << svg;
  EXPECT_EQ(count(svg, "<title>(two|four)</title></rect>"), 2u);
  EXPECT_EQ(count(svg, "class=\"legend-entry\" data-series=\"share\"><rect"), 1u);
  bars.bar_width = 1;
  c.series = {bars};
  EXPECT_NE(render(c).find("width=\"52.4\""), std::string::npos);
}

TEST(Render, EmptyChartSaysNoData) {
  Chart c;
  c.id = "empty";
  c.series.push_back(series("nothing", {}));
  const std::string svg = render(c);
  EXPECT_NE(svg.find("no data"), std::string::npos);
  EXPECT_EQ(count(svg, "class=\"legend-entry\""), 1u);
}

}  // namespace
}  // namespace servesim::reports::svg
