// The bench report: `ssdfeed bench ... --report DIR` writes DIR/report.html,
// one self-contained page (inline SVG from svg_chart.h, inline CSS, no
// script, no network, no other file), and DIR/report.json, the document the
// page is drawn from:
//
//   {"kind":   "loader" | "storage" | "codecs" | "compare-devices",
//    "header": {command_line, version, commit, host, kernel, cpu, cores,
//               memory_bytes, generated_utc},
//    "result": what `--json` prints for the same run; for compare-devices
//              {"throttle_read_bps": N, "runs": [{"name", "result"}, ...]},
//              each run's result a loader result}
//
// Every number in the page's tables is a <td data-json="POINTER"> whose
// POINTER (RFC 6901, from the document's root) names the JSON value it
// prints, so a check can compare the page with the JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "ssdfeed/env.h"
#include "ssdfeed/status.h"

namespace ssdfeed {

// The report's header for this machine and build: host name, kernel, CPU
// model, logical CPUs and memory (from /proc through env), the version and
// the git commit the binary was configured from ("unknown" outside a git
// checkout), the time in UTC, and command_line as given.
nlohmann::json ReportHeader(Env* env, const std::string& command_line);

// The page for a report document (see above). Never fails: a value missing
// from the document leaves its chart or cell out.
std::string RenderReportHtml(const nlohmann::json& report);

// Creates dir (mkdir -p), writes report.json and report.html in it
// (atomically, each replacing an older one) and sets *html_path.
Status WriteReport(Env* env, const std::string& dir, const nlohmann::json& report,
                   std::string* html_path);

}  // namespace ssdfeed
