// Charts as inline SVG text, for the bench report (report_html.h): line
// charts over time, grouped bars and histograms, drawn by this code alone so
// that a report page needs no script, no network and no other file.
//
// Every chart is one <svg class="chart" data-chart="ID"> element; every data
// series is a <path class="data"> whose d attribute is never empty for a
// series with a point (a check in a browser can count them).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace ssdfeed::svg {

// "&", "<", ">", quotes escaped: text from a command line or a path is safe
// in an element or an attribute.
std::string Escape(const std::string& s);

// A number as the charts and tables print it: up to 4 significant digits,
// no exponent for values people read (1234, 0.0123, 12.35).
std::string Num(double v);

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y)
  bool dashed = false;
};

// A horizontal reference line (a bound) or a vertical marker (p50, p99).
struct Mark {
  std::string label;
  double value = 0;
};

struct LineChart {
  std::string id, title, x_label, y_label;
  std::vector<Series> series;
  std::vector<Mark> hlines;
  double y_min = 0;  // the y axis starts here (or lower, where data is lower)
};
std::string Render(const LineChart& c);

// Bars in groups: values[s][g] is series s in group g.
struct BarChart {
  std::string id, title, y_label;
  std::vector<std::string> groups, series;
  std::vector<std::vector<double>> values;
};
std::string Render(const BarChart& c);

// counts[i] samples in [edges[i], edges[i+1]); marks are vertical lines.
struct Histogram {
  std::string id, title, x_label;
  std::vector<double> edges;
  std::vector<double> counts;
  std::vector<Mark> vlines;
  bool log_x = false;  // edges spaced geometrically: draw them evenly
};
std::string Render(const Histogram& c);

}  // namespace ssdfeed::svg
