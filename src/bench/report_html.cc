// The bench report page, drawn from the report document (report_html.h):
// a header to attach to a ticket, then per kind of bench its charts and the
// tables of the numbers they are drawn from.
#include "bench/report_html.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <ctime>
#include <set>
#include <sstream>

#include "bench/svg_chart.h"

#ifndef SSDFEED_COMMIT
#define SSDFEED_COMMIT "unknown"
#endif

namespace ssdfeed {

namespace {

using nlohmann::json;

// The value at an RFC 6901 pointer, or null when absent.
const json* At(const json& root, const std::string& ptr) {
  try {
    json::json_pointer p(ptr);
    return root.contains(p) ? &root.at(p) : nullptr;
  } catch (const json::exception&) {
    return nullptr;
  }
}

double Number(const json& root, const std::string& ptr, double fallback = 0) {
  const json* v = At(root, ptr);
  return v != nullptr && v->is_number() ? v->get<double>() : fallback;
}

std::string String(const json& root, const std::string& ptr) {
  const json* v = At(root, ptr);
  if (v == nullptr) return "";
  return v->is_string() ? v->get<std::string>() : v->dump();
}

// A table cell printing the number at ptr, naming ptr for checks.
std::string Cell(const json& root, const std::string& ptr, double scale = 1) {
  const json* v = At(root, ptr);
  if (v == nullptr || !v->is_number()) return "<td>-</td>";
  std::string attr = "data-json=\"" + svg::Escape(ptr) + "\"";
  if (scale != 1) attr += " data-scale=\"" + svg::Num(scale) + "\"";
  return "<td " + attr + ">" + svg::Num(v->get<double>() * scale) + "</td>";
}

std::string Th(const std::vector<std::string>& names) {
  std::string s = "<tr>";
  for (const auto& n : names) s += "<th>" + svg::Escape(n) + "</th>";
  return s + "</tr>";
}

std::string Ptr(const std::string& base, size_t i) { return base + "/" + std::to_string(i); }

size_t Size(const json& root, const std::string& ptr) {
  const json* v = At(root, ptr);
  return v != nullptr && v->is_array() ? v->size() : 0;
}

// "epoch 1 (warm)": what the epoch's hit rate and page cache say it was.
std::string EpochName(const json& e) {
  std::string kind = e.value("hit_rate", 0.0) < 0.5 ? "cold" : "warm";
  if (e.value("dropped_caches", false)) kind += ", dropped";  // the page cache, before it
  return "epoch " + std::to_string(e.value("epoch", 0)) + " (" + kind + ")";
}

// One series per epoch of y over the epoch's timeline.
std::vector<svg::Series> TimelineSeries(const json& epochs, const std::string& key,
                                        const std::string& sub = "", double scale = 1) {
  std::vector<svg::Series> out;
  for (const auto& e : epochs) {
    svg::Series s;
    s.name = EpochName(e);
    for (const auto& p : e.value("timeline", json::array())) {
      const json& src = sub.empty() ? p : p.value(sub, json::object());
      if (!src.contains(key)) continue;
      s.points.emplace_back(p.value("t_s", 0.0), src.value(key, 0.0) * scale);
    }
    out.push_back(std::move(s));
  }
  return out;
}

bool HasDeviceTimeline(const json& epochs) {
  for (const auto& e : epochs)
    for (const auto& p : e.value("timeline", json::array()))
      if (p.contains("device")) return true;
  return false;
}

// Keys of the per-epoch stats that time a stage (the loader's stage
// breakdown, where its stats have one): drawn as bars per epoch. The
// consumer's wait is not a stage (the histogram shows it).
std::vector<std::string> StageKeys(const json& epochs) {
  std::set<std::string> keys;
  for (const auto& e : epochs) {
    const json stats = e.value("stats", json::object());  // items() must not outlive it
    for (const auto& [k, v] : stats.items()) {
      bool timed = k.size() > 8 &&
                   (k.rfind("_seconds") == k.size() - 8 || k.find("stage") != std::string::npos);
      if (timed && v.is_number() && k != "wait_seconds") keys.insert(k);
    }
  }
  return {keys.begin(), keys.end()};
}

std::string Section(const std::string& title, const std::string& body) {
  return "<section><h2>" + svg::Escape(title) + "</h2>" + body + "</section>";
}

std::string LoaderEpochTable(const json& doc, const std::string& base) {
  std::string s =
      "<table>" + Th({"epoch", "seconds", "images/s", "MB/s", "hit rate %", "p50 wait ms",
                      "p99 wait ms", "accel util %", "dev rMB/s", "r_await ms", "aqu-sz", "%util"});
  for (size_t i = 0; i < Size(doc, base + "/epochs"); ++i) {
    std::string e = Ptr(base + "/epochs", i);
    s += "<tr><td>" + svg::Escape(EpochName(*At(doc, e))) + "</td>" + Cell(doc, e + "/seconds") +
         Cell(doc, e + "/images_per_s") + Cell(doc, e + "/mb_per_s") +
         Cell(doc, e + "/hit_rate", 100) + Cell(doc, e + "/p50_wait_ms") +
         Cell(doc, e + "/p99_wait_ms") + Cell(doc, e + "/utilization", 100) +
         Cell(doc, e + "/device/read_mb_s") + Cell(doc, e + "/device/r_await_ms") +
         Cell(doc, e + "/device/aqu_sz") + Cell(doc, e + "/device/util_pct") + "</tr>";
  }
  s += "</table><table>" + Th({"figure", "value"});
  auto row = [&](const std::string& name, const std::string& ptr, double scale = 1) {
    if (At(doc, ptr) != nullptr)
      s += "<tr><td>" + svg::Escape(name) + "</td>" + Cell(doc, ptr, scale) + "</tr>";
  };
  row("batch size", base + "/batch");
  row("emulated compute s per batch", base + "/compute_seconds");
  row("loader capacity images/s (warm, no compute)", base + "/capacity_images_per_s");
  row("accelerators kept >= 90% busy", base + "/accelerators_at_90");
  row("bound: decode+prepare images/s per core", base + "/bounds/decode_prepare_per_core");
  row("bound: crop+resize images/s per core", base + "/bounds/augment_per_core");
  row("bound: cores", base + "/bounds/cores");
  row("storage: random-read IOPS", base + "/storage/iops");
  row("headspace images/s (compute floor)", base + "/headspace/images_per_s");
  row("headspace / last epoch (the gap)", base + "/headspace_gap");
  return s + "</table>";
}

std::string LoaderCharts(const json& doc, const std::string& base, const std::string& id) {
  const json* epochs = At(doc, base + "/epochs");
  if (epochs == nullptr || !epochs->is_array()) return "";
  std::string s;
  svg::LineChart tp{id + "images-per-s",
                    "Images/s over time, per epoch",
                    "seconds into the epoch",
                    "images/s",
                    TimelineSeries(*epochs, "images_per_s"),
                    {},
                    0};
  if (const json* b = At(doc, base + "/bounds"); b != nullptr) {
    double cores = b->value("cores", 1.0);
    tp.hlines.push_back({"decode+prepare bound", b->value("decode_prepare_per_core", 0.0) * cores});
    tp.hlines.push_back({"crop+resize bound", b->value("augment_per_core", 0.0) * cores});
  }
  if (const json* h = At(doc, base + "/headspace"); h != nullptr) {
    svg::Series hs = TimelineSeries(json::array({*h}), "images_per_s")[0];
    hs.name = "headspace (no reads)";
    hs.dashed = true;
    tp.series.push_back(std::move(hs));
    tp.hlines.push_back({"headspace", h->value("images_per_s", 0.0)});
  }
  s += svg::Render(tp);
  for (size_t i = 0; i < epochs->size(); ++i) {
    const json& e = (*epochs)[i];
    svg::Histogram h;
    h.id = id + "wait-" + std::to_string(i);
    h.title = "Consumer wait per batch, " + EpochName(e);
    h.x_label = "wait ms (log scale)";
    h.log_x = true;
    const json w = e.value("wait_histogram", json::object());
    h.edges = w.value("edges_ms", std::vector<double>{});
    h.counts = w.value("counts", std::vector<double>{});
    h.vlines = {{"p50", e.value("p50_wait_ms", 0.0)}, {"p99", e.value("p99_wait_ms", 0.0)}};
    s += svg::Render(h);
  }
  if (HasDeviceTimeline(*epochs)) {
    const std::pair<const char*, const char*> kDevice[] = {{"read_mb_s", "read MB/s"},
                                                           {"r_await_ms", "r_await ms"},
                                                           {"aqu_sz", "queue depth (aqu-sz)"},
                                                           {"util_pct", "%util"}};
    for (const auto& [key, label] : kDevice)
      s += svg::Render(
          svg::LineChart{id + "device-" + key,
                         std::string("Cache device ") + label + " (/proc/diskstats, as iostat -x)",
                         "seconds into the epoch",
                         label,
                         TimelineSeries(*epochs, key, "device"),
                         {},
                         0});
  }
  if (Number(doc, base + "/compute_seconds") > 0)
    s += svg::Render(svg::LineChart{id + "accelerator",
                                    "Emulated accelerator utilisation",
                                    "seconds into the epoch",
                                    "% busy",
                                    TimelineSeries(*epochs, "utilization", "", 100),
                                    {{"90%", 90}},
                                    0});
  std::vector<std::string> stages = StageKeys(*epochs);
  if (!stages.empty()) {
    svg::BarChart bc{
        id + "stages", "Where the time went, per epoch (loader stats)", "seconds", {}, stages, {}};
    bc.values.assign(stages.size(), {});
    for (const auto& e : *epochs) {
      bc.groups.push_back(EpochName(e));
      const json st = e.value("stats", json::object());
      for (size_t k = 0; k < stages.size(); ++k) bc.values[k].push_back(st.value(stages[k], 0.0));
    }
    s += svg::Render(bc);
  }
  return s;
}

std::string LoaderBody(const json& doc, const std::string& base, const std::string& id) {
  return "<div class=\"charts\">" + LoaderCharts(doc, base, id) + "</div>" +
         LoaderEpochTable(doc, base);
}

std::string StorageBody(const json& doc) {
  size_t paths = Size(doc, "/result");
  if (paths == 0) return "";
  std::vector<std::string> groups, names;
  for (const auto& row : doc.at("/result/0/rows"_json_pointer))
    groups.push_back(row.value("pattern", "") + " " + std::to_string(row.value("block", 0) / 1024) +
                     "K QD" + std::to_string(row.value("qd", 0)));
  for (size_t p = 0; p < paths; ++p) names.push_back(String(doc, Ptr("/result", p) + "/path"));
  std::string s = "<div class=\"charts\">";
  const std::pair<const char*, const char*> kMetrics[] = {
      {"iops", "IOPS"}, {"mb_s", "MB/s"}, {"p99_us", "p99 latency us"}};
  for (const auto& [key, label] : kMetrics) {
    svg::BarChart bc{
        std::string("storage-") + key, std::string("Storage: ") + label, label, groups, names, {}};
    for (size_t p = 0; p < paths; ++p) {
      bc.values.emplace_back();
      for (size_t r = 0; r < groups.size(); ++r)
        bc.values.back().push_back(Number(doc, Ptr(Ptr("/result", p) + "/rows", r) + "/" + key));
    }
    s += svg::Render(bc);
  }
  s += "</div><table>" + Th({"path", "pattern", "block", "qd", "IOPS", "MB/s", "p50 us", "p99 us"});
  for (size_t p = 0; p < paths; ++p)
    for (size_t r = 0; r < groups.size(); ++r) {
      std::string row = Ptr(Ptr("/result", p) + "/rows", r);
      s += "<tr><td>" + svg::Escape(names[p]) + "</td><td>" +
           svg::Escape(String(doc, row + "/pattern")) + "</td>" + Cell(doc, row + "/block") +
           Cell(doc, row + "/qd") + Cell(doc, row + "/iops") + Cell(doc, row + "/mb_s") +
           Cell(doc, row + "/p50_us") + Cell(doc, row + "/p99_us") + "</tr>";
    }
  return s + "</table>";
}

std::string CodecsBody(const json& doc) {
  size_t n = Size(doc, "/result/codecs");
  if (n == 0) return "";
  svg::BarChart speed{"codec-images-per-s",
                      "Warm images/s per codec: measured (median) beside plan's prediction",
                      "images/s",
                      {},
                      {"page cache", "page cache: plan", "cache dropped", "dropped: plan",
                       "throttled", "throttled: plan"},
                      std::vector<std::vector<double>>(6)};
  svg::BarChart size{"codec-footprint", "Cache footprint per codec", "MB", {}, {"entry"}, {{}}};
  std::string t = "<table>" + Th({"codec", "entry MB", "x raw", "cold images/s", "page cache",
                                  "plan", "dropped", "plan", "throttled", "plan"});
  for (size_t i = 0; i < n; ++i) {
    std::string c = Ptr("/result/codecs", i);
    std::string name = String(doc, c + "/codec");
    speed.groups.push_back(name);
    size.groups.push_back(name);
    const char* keys[] = {"/page_cache_median", "/plan/cores_images_per_s",
                          "/dropped_median",    "/plan/predicted_images_per_s",
                          "/throttled_median",  "/plan_throttled/predicted_images_per_s"};
    // A prediction for epochs that did not run is not drawn.
    for (size_t k = 0; k < 6; ++k) {
      double v = Number(doc, c + keys[k]);
      if (k % 2 == 1 && Number(doc, c + keys[k - 1]) <= 0) v = 0;
      speed.values[k].push_back(v);
    }
    size.values[0].push_back(Number(doc, c + "/entry_bytes") / 1e6);
    t += "<tr><td>" + svg::Escape(name) + "</td>" + Cell(doc, c + "/entry_bytes", 1e-6) +
         Cell(doc, c + "/footprint_x_raw") + Cell(doc, c + "/cold_images_per_s");
    for (const char* k : keys) t += Cell(doc, c + k);
    t += "</tr>";
  }
  std::string notes;
  for (const char* k : {"dropped_skipped", "throttle_skipped"})
    if (!String(doc, std::string("/result/") + k).empty())
      notes += "<p>" + std::string(k) + ": " +
               svg::Escape(String(doc, std::string("/result/") + k)) + "</p>";
  return "<div class=\"charts\">" + svg::Render(speed) + svg::Render(size) + "</div>" + t +
         "</table>" + notes;
}

std::string CompareBody(const json& doc) {
  std::string s = "<div class=\"cols\">";
  for (size_t i = 0; i < Size(doc, "/result/runs"); ++i) {
    std::string run = Ptr("/result/runs", i);
    s += "<div class=\"col\"><h3>" + svg::Escape(String(doc, run + "/name")) + "</h3>" +
         LoaderBody(doc, run + "/result", "run" + std::to_string(i) + "-") + "</div>";
  }
  return s + "</div>";
}

std::string HeaderTable(const json& doc) {
  std::string s = "<table class=\"header\">";
  const std::pair<const char*, const char*> kRows[] = {{"command_line", "command"},
                                                       {"version", "version"},
                                                       {"commit", "commit"},
                                                       {"host", "host"},
                                                       {"kernel", "kernel"},
                                                       {"cpu", "CPU"},
                                                       {"cores", "logical CPUs"},
                                                       {"memory_bytes", "memory bytes"},
                                                       {"generated_utc", "generated (UTC)"}};
  for (const auto& [key, label] : kRows) {
    std::string ptr = std::string("/header/") + key;
    const json* v = At(doc, ptr);
    if (v == nullptr) continue;
    s += "<tr><th>" + std::string(label) + "</th>" +
         (v->is_number() ? Cell(doc, ptr)
                         : "<td><code>" + svg::Escape(String(doc, ptr)) + "</code></td>") +
         "</tr>";
  }
  return s + "</table>";
}

constexpr char kStyle[] =
    "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}"
    "h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.5em}"
    "table{border-collapse:collapse;margin:.8em 0}td,th{border:1px solid #ccc;padding:2px 8px;"
    "text-align:right}th{background:#f3f3f3}table.header td,table.header th{text-align:left}"
    ".charts{display:flex;flex-wrap:wrap;gap:8px}.cols{display:flex;gap:24px}"
    ".cols .charts{flex-direction:column;flex-wrap:nowrap}"
    "svg.chart{border:1px solid #ddd;background:#fff}svg text{font-size:11px;fill:#333}"
    "svg text.t{font-size:13px;font-weight:600}svg .frame{fill:none;stroke:#999}"
    "svg .grid{stroke:#eee}svg .bound{stroke:#c00;stroke-dasharray:6 4;stroke-width:1.5}"
    "svg text.mark{fill:#c00}";

}  // namespace

nlohmann::json ReportHeader(Env* env, const std::string& command_line) {
  json h = {
      {"command_line", command_line}, {"version", SSDFEED_VERSION}, {"commit", SSDFEED_COMMIT}};
  struct utsname u;
  if (::uname(&u) == 0) {
    h["host"] = u.nodename;
    h["kernel"] = std::string(u.sysname) + " " + u.release + " " + u.machine;
  }
  std::string text;
  if (env->ReadPseudoFile("/proc/cpuinfo", &text).ok()) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
        h["cpu"] = line.substr(line.find(':') + 2);
        break;
      }
  }
  long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus > 0) h["cores"] = cpus;
  if (env->ReadPseudoFile("/proc/meminfo", &text).ok()) {
    std::istringstream in(text);
    std::string key;
    uint64_t kb = 0;
    if (in >> key >> kb && key == "MemTotal:") h["memory_bytes"] = kb * 1024;
  }
  char buf[32];
  std::time_t now = std::time(nullptr);
  struct tm tm;
  if (::gmtime_r(&now, &tm) != nullptr && std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm))
    h["generated_utc"] = buf;
  return h;
}

std::string RenderReportHtml(const nlohmann::json& doc) {
  std::string kind = String(doc, "/kind");
  std::string body;
  if (kind == "loader")
    body = Section("Loader", LoaderBody(doc, "/result", ""));
  else if (kind == "compare-devices")
    body = Section("The device as it is, and throttled", CompareBody(doc));
  else if (kind == "storage")
    body = Section("Storage", StorageBody(doc));
  else if (kind == "codecs")
    body = Section("Codecs", CodecsBody(doc));
  return "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>ssdfeed bench " +
         svg::Escape(kind) + "</title><style>" + kStyle +
         "</style></head><body><h1>ssdfeed bench " + svg::Escape(kind) + "</h1>" +
         HeaderTable(doc) + body +
         "<p>Drawn from report.json beside this page; every number in a table names its JSON "
         "pointer (data-json).</p></body></html>\n";
}

Status WriteReport(Env* env, const std::string& dir, const nlohmann::json& report,
                   std::string* html_path) {
  SSDFEED_RETURN_IF_ERROR(
      CreateDirs(env, dir, 0755).WithContext("--report " + dir + ": cannot create the directory"));
  std::string json_path = JoinPath(dir, "report.json");
  SSDFEED_RETURN_IF_ERROR(env->WriteFileAtomic(json_path, report.dump(2) + "\n", 0644, false)
                              .WithContext("--report: cannot write " + json_path));
  *html_path = JoinPath(dir, "report.html");
  return env->WriteFileAtomic(*html_path, RenderReportHtml(report), 0644, false)
      .WithContext("--report: cannot write " + *html_path);
}

}  // namespace ssdfeed
