// SVG charts for the bench report: a fixed 640x300 frame, axes with a few
// round ticks, a legend on the right. Paths, not polylines, so that a check
// in a browser reads every series the same way.
#include "bench/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ssdfeed::svg {

namespace {

constexpr double kWidth = 640, kHeight = 300;
constexpr double kLeft = 64, kRight = 172, kTop = 34, kBottom = 44;
constexpr double kPlotW = kWidth - kLeft - kRight, kPlotH = kHeight - kTop - kBottom;
// Colour-blind safe (Okabe-Ito), then greys.
const char* const kColors[] = {"#0072B2", "#E69F00", "#009E73", "#D55E00",
                               "#CC79A7", "#56B4E9", "#F0E442", "#555555"};
const char* Color(size_t i) { return kColors[i % (sizeof kColors / sizeof kColors[0])]; }

// Maps a data range onto pixels.
struct Scale {
  double lo = 0, hi = 1, px0 = 0, px1 = 1;
  double operator()(double v) const { return px0 + (v - lo) / (hi - lo) * (px1 - px0); }
};

// A tick step of 1, 2 or 5 times a power of ten giving about n ticks.
double NiceStep(double span, int n) {
  double raw = span / n;
  double p = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

// [lo, hi] widened to whole ticks; a flat or empty range gets a unit span.
std::pair<double, double> NiceRange(double lo, double hi) {
  if (!(hi > lo)) hi = lo + (lo == 0 ? 1 : std::fabs(lo));
  double step = NiceStep(hi - lo, 5);
  return {std::floor(lo / step) * step, std::ceil(hi / step) * step};
}

std::string Px(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// Path commands, appended piece by piece (GCC 12 at -O3 misreads a short
// literal + std::string as an overlapping memcpy, -Wrestrict).
void MoveOrLine(std::string* d, bool first, double x, double y) {
  d->append(first ? "M" : " L").append(Px(x)).append(" ").append(Px(y));
}
// A closed bar from the baseline y0 up to y1, x0 to x1 wide.
void Bar(std::string* d, double x0, double x1, double y0, double y1) {
  d->append("M").append(Px(x0)).append(" ").append(Px(y0));
  d->append(" V").append(Px(y1)).append(" H").append(Px(x1));
  d->append(" V").append(Px(y0)).append(" Z ");
}

std::string Open(const std::string& id, const std::string& title) {
  return "<svg class=\"chart\" data-chart=\"" + Escape(id) +
         "\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" + Px(kWidth) + "\" height=\"" +
         Px(kHeight) + "\" viewBox=\"0 0 " + Px(kWidth) + " " + Px(kHeight) +
         "\" role=\"img\"><title>" + Escape(title) + "</title><text x=\"" + Px(kLeft) +
         "\" y=\"20\" class=\"t\">" + Escape(title) + "</text>";
}

std::string Text(double x, double y, const std::string& s, const char* anchor = "start",
                 const std::string& extra = "") {
  return "<text x=\"" + Px(x) + "\" y=\"" + Px(y) + "\" text-anchor=\"" + anchor + "\"" + extra +
         ">" + Escape(s) + "</text>";
}

std::string Line(double x0, double y0, double x1, double y1, const std::string& style) {
  return "<line x1=\"" + Px(x0) + "\" y1=\"" + Px(y0) + "\" x2=\"" + Px(x1) + "\" y2=\"" + Px(y1) +
         "\" " + style + "/>";
}

// The frame, the y ticks with grid lines, and the axis labels.
std::string YAxis(const Scale& y, const std::string& label) {
  std::string s = "<rect x=\"" + Px(kLeft) + "\" y=\"" + Px(kTop) + "\" width=\"" + Px(kPlotW) +
                  "\" height=\"" + Px(kPlotH) + "\" class=\"frame\"/>";
  double step = NiceStep(y.hi - y.lo, 5);
  for (double v = y.lo; v <= y.hi + step / 2; v += step) {
    s += Line(kLeft, y(v), kLeft + kPlotW, y(v), "class=\"grid\"");
    s += Text(kLeft - 6, y(v) + 4, Num(v), "end");
  }
  s += Text(14, kTop + kPlotH / 2, label, "middle",
            " transform=\"rotate(-90 14 " + Px(kTop + kPlotH / 2) + ")\"");
  return s;
}

std::string XTicks(const Scale& x, const std::string& label) {
  std::string s;
  double step = NiceStep(x.hi - x.lo, 6);
  for (double v = x.lo; v <= x.hi + step * 1e-6; v += step)
    s += Text(x(v), kTop + kPlotH + 16, Num(v), "middle");
  s += Text(kLeft + kPlotW / 2, kHeight - 6, label, "middle");
  return s;
}

std::string Legend(size_t i, const std::string& name, bool dashed = false) {
  double y = kTop + 8 + 16 * static_cast<double>(i);
  double x = kLeft + kPlotW + 10;
  return Line(x, y, x + 18, y,
              std::string("stroke=\"") + Color(i) + "\" stroke-width=\"3\"" +
                  (dashed ? " stroke-dasharray=\"5 3\"" : "")) +
         Text(x + 24, y + 4, name);
}

std::string Close() { return "</svg>"; }

}  // namespace

std::string Escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
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

std::string Num(double v) {
  char buf[48];
  double a = std::fabs(v);
  if (a == 0 || !std::isfinite(v))
    std::snprintf(buf, sizeof buf, "%g", std::isfinite(v) ? 0.0 : v);
  else if (a >= 1000)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else
    std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string Render(const LineChart& c) {
  double x_lo = 0, x_hi = 0, y_lo = c.y_min, y_hi = c.y_min;
  bool any = false;
  for (const auto& s : c.series)
    for (const auto& [x, y] : s.points) {
      if (!any) x_lo = x_hi = x;
      any = true;
      x_lo = std::min(x_lo, x), x_hi = std::max(x_hi, x);
      y_lo = std::min(y_lo, y), y_hi = std::max(y_hi, y);
    }
  // A line far above the data (a bound 30x the images/s) would flatten the
  // series: it is named at the top edge instead of drawn.
  double data_hi = y_hi;
  auto on_chart = [&](const Mark& m) { return !any || data_hi <= 0 || m.value <= 3 * data_hi; };
  for (const auto& m : c.hlines)
    if (on_chart(m)) y_hi = std::max(y_hi, m.value), y_lo = std::min(y_lo, m.value);
  auto [ylo, yhi] = NiceRange(y_lo, y_hi * 1.05);
  x_lo = std::min(x_lo, 0.0);  // time axes start at the epoch's start
  auto [xlo, xhi] = NiceRange(x_lo, x_hi);
  Scale x{xlo, xhi, kLeft, kLeft + kPlotW}, y{ylo, yhi, kTop + kPlotH, kTop};
  std::string s = Open(c.id, c.title) + YAxis(y, c.y_label) + XTicks(x, c.x_label);
  for (size_t i = 0; i < c.series.size(); ++i) {
    const Series& se = c.series[i];
    std::string d;
    for (size_t k = 0; k < se.points.size(); ++k)
      MoveOrLine(&d, k == 0, x(se.points[k].first), y(se.points[k].second));
    // A single point still shows: a short tick.
    if (se.points.size() == 1) d += " h2";
    if (d.empty()) continue;
    s += "<path class=\"data\" data-series=\"" + Escape(se.name) + "\" d=\"" + d +
         "\" fill=\"none\" stroke=\"" + Color(i) + "\" stroke-width=\"2\"" +
         (se.dashed ? " stroke-dasharray=\"5 3\"" : "") + "/>";
    s += Legend(i, se.name, se.dashed);
  }
  // Labels alternate between the right and the left end, so that two
  // lines close together stay readable.
  int drawn = 0, above = 0;
  for (const auto& m : c.hlines) {
    std::string label = m.label + " " + Num(m.value);
    if (!on_chart(m)) {
      s += Text(kLeft + 4, kTop + 12 + 13 * static_cast<double>(above++),
                label + " (above the chart)", "start", " class=\"mark\"");
      continue;
    }
    s += Line(kLeft, y(m.value), kLeft + kPlotW, y(m.value), "class=\"bound\"");
    bool right = drawn++ % 2 == 0;
    s += Text(right ? kLeft + kPlotW - 4 : kLeft + 4, y(m.value) - 4, label,
              right ? "end" : "start", " class=\"mark\"");
  }
  return s + Close();
}

std::string Render(const BarChart& c) {
  double hi = 0;
  for (const auto& v : c.values)
    for (double x : v) hi = std::max(hi, x);
  auto [ylo, yhi] = NiceRange(0, hi * 1.05);
  Scale y{ylo, yhi, kTop + kPlotH, kTop};
  std::string s = Open(c.id, c.title) + YAxis(y, c.y_label);
  size_t ng = std::max<size_t>(1, c.groups.size()), ns = std::max<size_t>(1, c.series.size());
  double gw = kPlotW / static_cast<double>(ng), bw = gw * 0.8 / static_cast<double>(ns);
  for (size_t g = 0; g < c.groups.size(); ++g)
    s += Text(kLeft + gw * (static_cast<double>(g) + 0.5), kTop + kPlotH + 16, c.groups[g],
              "middle");
  for (size_t si = 0; si < c.values.size(); ++si) {
    std::string d;
    for (size_t g = 0; g < c.values[si].size() && g < c.groups.size(); ++g) {
      double v = c.values[si][g];
      if (!(v > 0)) continue;  // not measured: no bar
      double x0 = kLeft + gw * static_cast<double>(g) + gw * 0.1 + bw * static_cast<double>(si);
      Bar(&d, x0, x0 + bw, y(0), y(v));
    }
    std::string name = si < c.series.size() ? c.series[si] : "";
    if (!d.empty())
      s += "<path class=\"data\" data-series=\"" + Escape(name) + "\" d=\"" + d + "\" fill=\"" +
           Color(si) + "\"/>";
    s += Legend(si, name);
  }
  return s + Close();
}

std::string Render(const Histogram& c) {
  size_t n = c.counts.size();
  double hi = 0;
  for (double v : c.counts) hi = std::max(hi, v);
  auto [ylo, yhi] = NiceRange(0, hi * 1.05);
  Scale y{ylo, yhi, kTop + kPlotH, kTop};
  std::string s = Open(c.id, c.title) + YAxis(y, "batches");
  if (n == 0 || c.edges.size() != n + 1) return s + Close();
  // Where a value falls on the x axis: by bin index (geometric edges are
  // drawn evenly), interpolated inside its bin.
  auto xpos = [&](double v) {
    double bin_w = kPlotW / static_cast<double>(n);
    if (v <= c.edges.front()) return kLeft;
    for (size_t i = 0; i < n; ++i) {
      double a = c.edges[i], b = c.edges[i + 1];
      if (v < b) {
        double f = c.log_x && a > 0 ? std::log(v / a) / std::log(b / a) : (v - a) / (b - a);
        return kLeft + bin_w * (static_cast<double>(i) + f);
      }
    }
    return kLeft + kPlotW;
  };
  std::string d;
  for (size_t i = 0; i < n; ++i) {
    if (!(c.counts[i] > 0)) continue;
    double x0 = xpos(c.edges[i]), x1 = kLeft + kPlotW / static_cast<double>(n) * (i + 1.0);
    Bar(&d, x0, x1 - 1, y(0), y(c.counts[i]));
  }
  if (!d.empty())
    s += "<path class=\"data\" data-series=\"batches\" d=\"" + d + "\" fill=\"" + Color(0) + "\"/>";
  size_t step = std::max<size_t>(1, n / 6);
  for (size_t i = 0; i <= n; i += step)
    s += Text(xpos(c.edges[i]), kTop + kPlotH + 16, Num(c.edges[i]), "middle");
  s += Text(kLeft + kPlotW / 2, kHeight - 6, c.x_label, "middle");
  for (size_t i = 0; i < c.vlines.size(); ++i) {
    double xv = xpos(c.vlines[i].value);
    s += Line(xv, kTop, xv, kTop + kPlotH,
              std::string("class=\"bound\" stroke=\"") + Color(i + 3) + "\"");
    s += Text(xv + 3, kTop + 12 + 14 * static_cast<double>(i),
              c.vlines[i].label + " " + Num(c.vlines[i].value), "start", " class=\"mark\"");
  }
  return s + Close();
}

}  // namespace ssdfeed::svg
