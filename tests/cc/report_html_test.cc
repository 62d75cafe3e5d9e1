// The bench report: its SVG charts, the wait histogram, and the page drawn
// from a report document (charts present, numbers as the JSON has them,
// self-contained, small).
#include "bench/report_html.h"

#include <gtest/gtest.h>

#include <regex>

#include "bench/bench.h"
#include "bench/svg_chart.h"
#include "test_util.h"

namespace ssdfeed {
namespace {

using nlohmann::json;

TEST(SvgChart, EscapesTextAndPrintsReadableNumbers) {
  EXPECT_EQ(svg::Escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  EXPECT_EQ(svg::Num(1234.56), "1235");
  EXPECT_EQ(svg::Num(12.345), "12.35");
  EXPECT_EQ(svg::Num(0.012345), "0.01235");
  EXPECT_EQ(svg::Num(0), "0");
}

TEST(SvgChart, LineChartDrawsEverySeriesAsANonEmptyPathAndTheBounds) {
  svg::LineChart c{"tp", "Images/s <per epoch>", "s", "images/s", {}, {{"bound", 500}}, 0};
  c.series.push_back({"cold", {{0, 100}, {1, 200}, {2, 150}}, false});
  c.series.push_back({"one point", {{1, 300}}, true});
  std::string s = svg::Render(c);
  EXPECT_NE(s.find("data-chart=\"tp\""), std::string::npos);
  EXPECT_NE(s.find("Images/s &lt;per epoch&gt;"), std::string::npos);
  std::regex path("<path class=\"data\" data-series=\"([^\"]*)\" d=\"([^\"]+)\"");
  std::vector<std::string> names;
  for (auto it = std::sregex_iterator(s.begin(), s.end(), path); it != std::sregex_iterator(); ++it)
    names.push_back((*it)[1]);
  EXPECT_EQ(names, (std::vector<std::string>{"cold", "one point"}));
  EXPECT_NE(s.find("bound 500"), std::string::npos);
  EXPECT_NE(s.find("class=\"bound\""), std::string::npos);
}

TEST(SvgChart, ALineFarAboveTheDataIsNamedNotDrawn) {
  svg::LineChart c{"tp", "t", "s", "images/s", {}, {{"near", 250}, {"far", 5000}}, 0};
  c.series.push_back({"warm", {{0, 100}, {1, 200}}, false});
  std::string s = svg::Render(c);
  EXPECT_NE(s.find("far 5000 (above the chart)"), std::string::npos);
  EXPECT_NE(s.find(">near 250<"), std::string::npos);
  // One reference line drawn (near), and the y axis stops below far's 5000.
  size_t lines = 0;
  for (size_t p = s.find("class=\"bound\""); p != std::string::npos;
       p = s.find("class=\"bound\"", p + 1))
    ++lines;
  EXPECT_EQ(lines, 1u);
  EXPECT_EQ(s.find(">5000<"), std::string::npos);
}

TEST(SvgChart, BarChartLeavesOutUnmeasuredBars) {
  svg::BarChart c{"b", "t", "y", {"raw", "zstd"}, {"measured", "plan"}, {{10, 0}, {0, 0}}};
  std::string s = svg::Render(c);
  // One bar (raw, measured): one closed rectangle in one path; no path for
  // a series with no value.
  EXPECT_EQ(std::count(s.begin(), s.end(), 'Z'), 1);
  EXPECT_EQ(s.find("data-series=\"plan\" d="), std::string::npos);
}

TEST(WaitHistogram, CountsEveryBatchInGeometricBins) {
  std::vector<double> waits = {0, 0.002, 0.05, 0.05, 3, 40};
  WaitHistogram h = MakeWaitHistogram(waits);
  ASSERT_EQ(h.counts.size() + 1, h.edges_ms.size());
  EXPECT_DOUBLE_EQ(h.edges_ms.front(), 0.001);  // the 1 us floor's decade
  EXPECT_DOUBLE_EQ(h.edges_ms.back(), 100);     // the decade above 40 ms
  uint64_t total = 0;
  for (uint64_t c : h.counts) total += c;
  EXPECT_EQ(total, waits.size());
  // Each wait lies in its bin.
  for (double w : {0.05, 3.0, 40.0}) {
    size_t i = 0;
    while (!(w >= h.edges_ms[i] && w < h.edges_ms[i + 1])) ++i;
    EXPECT_GE(h.counts[i], 1u) << w;
  }
  EXPECT_TRUE(MakeWaitHistogram({}).counts.empty());
}

TEST(Timeline, IntervalsAddUpToTheEpochAndStayFewForALongOne) {
  // A 100 s epoch sampled every 0.1 s at 50 images a sample: 1000
  // intervals, merged 9 at a time into at most kMaxTimelinePoints.
  std::vector<TimelineSample> s;
  for (int i = 0; i <= 1000; ++i) {
    TimelineSample x{10 + 0.1 * i, static_cast<uint64_t>(50 * i), 0.05 * i, {}};
    x.device.device = "vda";
    x.device.read_mb_s = i % 2 ? 100 : 300;  // alternating: the merge averages them
    s.push_back(x);
  }
  std::vector<TimelinePoint> t = TimelineIntervals(s, 0.1);
  ASSERT_LE(t.size(), kMaxTimelinePoints);
  ASSERT_GE(t.size(), kMaxTimelinePoints - 10);
  EXPECT_NEAR(t.back().t_s, 100, 1e-9);
  double images = 0, prev = 0;
  for (const auto& p : t) {
    images += p.images_per_s * (p.t_s - prev);
    prev = p.t_s;
    EXPECT_NEAR(p.images_per_s, 500, 1e-6);
    EXPECT_NEAR(p.utilization, 0.5, 1e-9);
    EXPECT_EQ(p.device.device, "vda");
    if (&p == &t.back()) continue;  // 1000 = 111 x 9 + 1: the last one is one interval
    EXPECT_GT(p.device.read_mb_s, 100);
    EXPECT_LT(p.device.read_mb_s, 300);
  }
  EXPECT_NEAR(images, 50000, 1e-6);
}

TEST(Timeline, AShortLastIntervalJoinsTheOneBefore) {
  // Samples at 0, 0.1, 0.2 and the epoch's end 2 ms later with no image:
  // alone, that tail would read 0 images/s.
  std::vector<TimelineSample> s = {
      {0, 0, 0, {}}, {0.1, 10, 0, {}}, {0.2, 20, 0, {}}, {0.202, 20, 0, {}}};
  std::vector<TimelinePoint> t = TimelineIntervals(s, 0.1);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_NEAR(t[1].t_s, 0.202, 1e-12);
  EXPECT_NEAR(t[1].images_per_s, 10 / 0.102, 1e-9);
  EXPECT_TRUE(TimelineIntervals({s[0]}, 0.1).empty());
}

// A loader report document as bench writes it: a cold and a warm epoch
// with timelines, device figures, compute, bounds and a headspace epoch.
json LoaderDoc(size_t points) {
  auto epoch = [&](int n, double hit, double rate) {
    json tl = json::array();
    for (size_t i = 0; i < points; ++i)
      tl.push_back(
          {{"t_s", 0.1 * (i + 1)},
           {"images_per_s", rate + i},
           {"utilization", 0.5},
           {"device",
            {{"read_mb_s", 10.0 + i}, {"r_await_ms", 0.5}, {"aqu_sz", 1.5}, {"util_pct", 40.0}}}});
    return json{{"epoch", n},
                {"seconds", 2.5},
                {"images_per_s", rate},
                {"mb_per_s", 12.5},
                {"hit_rate", hit},
                {"p50_wait_ms", 0.03},
                {"p99_wait_ms", 4.2},
                {"utilization", 0.5},
                {"dropped_caches", false},
                {"device", {{"name", "vda"}, {"read_mb_s", 11.0}, {"r_await_ms", 0.5}}},
                {"timeline", tl},
                {"wait_histogram", {{"edges_ms", {0.01, 0.1, 1, 10}}, {"counts", {5, 1, 2}}}}};
  };
  json result = {
      {"epochs", {epoch(0, 0, 800.5), epoch(1, 1, 2400.25)}},
      {"batch", 16},
      {"compute_seconds", 0.005},
      {"capacity_images_per_s", 3100.0},
      {"bounds", {{"decode_prepare_per_core", 400.0}, {"augment_per_core", 2000.0}, {"cores", 2}}},
      {"headspace", epoch(2, 1, 3200.0)},
      {"headspace_gap", 1.333}};
  return {{"kind", "loader"},
          {"header",
           {{"command_line", "ssdfeed bench loader --source 'folder:/d<x>'"},
            {"version", "0.1.0"},
            {"commit", "abc"}}},
          {"result", result}};
}

std::vector<std::string> ChartIds(const std::string& html) {
  std::regex svg("<svg class=\"chart\" data-chart=\"([^\"]+)\"");
  std::vector<std::string> ids;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), svg); it != std::sregex_iterator();
       ++it)
    ids.push_back((*it)[1]);
  return ids;
}

TEST(ReportHtml, LoaderPageHasEveryChart) {
  std::string html = RenderReportHtml(LoaderDoc(20));
  EXPECT_EQ(ChartIds(html),
            (std::vector<std::string>{"images-per-s", "wait-0", "wait-1", "device-read_mb_s",
                                      "device-r_await_ms", "device-aqu_sz", "device-util_pct",
                                      "accelerator"}));
  // The bounds (per core x cores) and the headspace as lines.
  EXPECT_NE(html.find("decode+prepare bound 800"), std::string::npos);
  EXPECT_NE(html.find("crop+resize bound 4000"), std::string::npos);
  EXPECT_NE(html.find("headspace 3200"), std::string::npos);
  EXPECT_NE(html.find("p99 4.2"), std::string::npos);
  // The header, escaped.
  EXPECT_NE(html.find("folder:/d&lt;x&gt;"), std::string::npos);
}

TEST(ReportHtml, EveryTableNumberIsTheJsonValueItNames) {
  json doc = LoaderDoc(5);
  std::string html = RenderReportHtml(doc);
  std::regex cell("<td data-json=\"([^\"]+)\"(?: data-scale=\"([^\"]+)\")?>([^<]*)</td>");
  int n = 0;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), cell); it != std::sregex_iterator();
       ++it, ++n) {
    double scale = (*it)[2].matched ? std::stod((*it)[2]) : 1;
    json::json_pointer p((*it)[1].str());
    ASSERT_TRUE(doc.contains(p)) << (*it)[1];
    EXPECT_EQ((*it)[3].str(), svg::Num(doc.at(p).get<double>() * scale)) << (*it)[1];
  }
  EXPECT_GE(n, 25);
  EXPECT_NE(html.find("data-json=\"/result/epochs/1/images_per_s\">2400<"), std::string::npos);
  EXPECT_NE(html.find("data-json=\"/result/headspace_gap\">1.333<"), std::string::npos);
}

TEST(ReportHtml, PageIsSelfContainedAndSmallForALongRun) {
  // kMaxTimelinePoints per epoch is what a run of any length leaves.
  std::string html = RenderReportHtml(LoaderDoc(kMaxTimelinePoints));
  EXPECT_LT(html.size(), 1u << 20);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
}

TEST(ReportHtml, LeavesOutChartsTheRunDidNotMeasure) {
  json doc = LoaderDoc(3);
  json& r = doc["result"];
  r["compute_seconds"] = 0;
  r.erase("headspace");
  r.erase("headspace_gap");
  r.erase("bounds");
  for (auto& e : r["epochs"])
    for (auto& p : e["timeline"]) p.erase("device");
  std::string html = RenderReportHtml(doc);
  EXPECT_EQ(ChartIds(html), (std::vector<std::string>{"images-per-s", "wait-0", "wait-1"}));
  EXPECT_EQ(html.find("decode+prepare bound"), std::string::npos);
  EXPECT_EQ(html.find("headspace"), std::string::npos);
}

TEST(ReportHtml, StageBreakdownOnlyWhereTheStatsHaveIt) {
  json doc = LoaderDoc(3);
  EXPECT_EQ(RenderReportHtml(doc).find("data-chart=\"stages\""), std::string::npos);
  doc["result"]["epochs"][0]["stats"] = {{"cache_hits", 0}, {"wait_seconds", 2.0}};
  EXPECT_EQ(RenderReportHtml(doc).find("data-chart=\"stages\""), std::string::npos);
  doc["result"]["epochs"][0]["stats"] = {{"cache_hits", 0}, {"decode_seconds", 1.5}};
  doc["result"]["epochs"][1]["stats"] = {{"cache_hits", 48}, {"crop_seconds", 0.25}};
  std::string html = RenderReportHtml(doc);
  EXPECT_NE(html.find("data-chart=\"stages\""), std::string::npos);
  EXPECT_NE(html.find("data-series=\"decode_seconds\""), std::string::npos);
  EXPECT_EQ(html.find("data-series=\"cache_hits\""), std::string::npos);
}

TEST(ReportHtml, CodecAndStorageAndComparePages) {
  json codecs = {
      {"kind", "codecs"},
      {"result",
       {{"codecs",
         {{{"codec", "raw"},
           {"entry_bytes", 4e6},
           {"page_cache_median", 900.0},
           {"dropped_median", 0.0},
           {"plan", {{"cores_images_per_s", 1000.0}, {"predicted_images_per_s", 700.0}}}},
          {{"codec", "zstd"},
           {"entry_bytes", 2e6},
           {"page_cache_median", 800.0},
           {"plan", {{"cores_images_per_s", 850.0}}}}}},
        {"throttle_skipped", "not asked for"}}}};
  std::string html = RenderReportHtml(codecs);
  EXPECT_EQ(ChartIds(html), (std::vector<std::string>{"codec-images-per-s", "codec-footprint"}));
  EXPECT_NE(html.find("throttle_skipped: not asked for"), std::string::npos);
  // The dropped prediction is not drawn where no dropped epoch ran.
  EXPECT_EQ(html.find("data-series=\"dropped: plan\" d="), std::string::npos);

  json storage = {{"kind", "storage"},
                  {"result",
                   {{{"path", "/a"},
                     {"rows",
                      {{{"pattern", "randread"},
                        {"block", 4096},
                        {"qd", 1},
                        {"iops", 9000.0},
                        {"mb_s", 36.9},
                        {"p50_us", 100.0},
                        {"p99_us", 300.0}}}}}}}};
  EXPECT_EQ(ChartIds(RenderReportHtml(storage)),
            (std::vector<std::string>{"storage-iops", "storage-mb_s", "storage-p99_us"}));

  json loader = LoaderDoc(3)["result"];
  json compare = {
      {"kind", "compare-devices"},
      {"result",
       {{"throttle_read_bps", 500e6},
        {"runs",
         {{{"name", "as is"}, {"result", loader}}, {{"name", "throttled"}, {"result", loader}}}}}}};
  std::vector<std::string> ids = ChartIds(RenderReportHtml(compare));
  EXPECT_EQ(ids.size(), 16u);
  EXPECT_EQ(ids[0], "run0-images-per-s");
  EXPECT_EQ(ids[8], "run1-images-per-s");
}

TEST(ReportHtml, WriteReportWritesBothFilesAndNamesADirectoryItCannotMake) {
  test::TempDir d;
  std::string html;
  json doc = LoaderDoc(2);
  ASSERT_TRUE(WriteReport(Env::Default(), d.Sub("r/sub"), doc, &html).ok());
  EXPECT_EQ(html, d.Sub("r/sub/report.html"));
  std::string text;
  ASSERT_TRUE(Env::Default()->ReadFileToString(d.Sub("r/sub/report.json"), &text).ok());
  EXPECT_EQ(json::parse(text), doc);
  ASSERT_TRUE(Env::Default()->ReadFileToString(html, &text).ok());
  EXPECT_EQ(text, RenderReportHtml(doc));
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(d.Sub("file"), "x").ok());
  Status s = WriteReport(Env::Default(), d.Sub("file/r"), doc, &html);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(d.Sub("file/r")), std::string::npos) << s.message();
}

TEST(ReportHtml, HeaderNamesTheMachineAndBuild) {
  json h = ReportHeader(Env::Default(), "ssdfeed bench loader");
  EXPECT_EQ(h["command_line"], "ssdfeed bench loader");
  EXPECT_EQ(h["version"], SSDFEED_VERSION);
  EXPECT_FALSE(h["commit"].get<std::string>().empty());
  EXPECT_FALSE(h.value("host", "").empty());
  EXPECT_GT(h.value("cores", 0), 0);
  EXPECT_GT(h.value("memory_bytes", uint64_t{0}), 0u);
}

}  // namespace
}  // namespace ssdfeed
