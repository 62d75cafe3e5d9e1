// Brace ranges ({000..099}, {a,b}) then glob(3).
#include <glob.h>

#include <algorithm>

#include "source/sources.h"

namespace ssdfeed {

// Expands the first {...} of p, recursively.
Status ExpandBraces(const std::string& p, std::vector<std::string>* out) {
  size_t open = p.find('{');
  if (open == std::string::npos) {
    out->push_back(p);
    return Status::OK();
  }
  size_t close = p.find('}', open);
  if (close == std::string::npos) return Status::InvalidArgument("unclosed '{' in " + p);
  std::string body = p.substr(open + 1, close - open - 1);
  std::string pre = p.substr(0, open), post = p.substr(close + 1);
  std::vector<std::string> alts;
  if (size_t dots = body.find(".."); dots != std::string::npos) {
    std::string a = body.substr(0, dots), b = body.substr(dots + 2);
    if (a.empty() || b.empty() || a.find_first_not_of("0123456789") != std::string::npos ||
        b.find_first_not_of("0123456789") != std::string::npos)
      return Status::InvalidArgument("bad brace range {" + body + "} in " + p);
    long lo = std::stol(a), hi = std::stol(b);
    if (hi < lo || hi - lo > 10000000) return Status::InvalidArgument("bad brace range in " + p);
    size_t width = a.size();
    for (long i = lo; i <= hi; ++i) {
      std::string s = std::to_string(i);
      if (s.size() < width) s.insert(0, width - s.size(), '0');
      alts.push_back(s);
    }
  } else {
    size_t start = 0;
    while (true) {
      size_t comma = body.find(',', start);
      alts.push_back(body.substr(start, comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  for (const auto& a : alts) SSDFEED_RETURN_IF_ERROR(ExpandBraces(pre + a + post, out));
  return Status::OK();
}

Result<std::vector<std::string>> ExpandGlob(const std::string& pattern) {
  std::vector<std::string> pats;
  SSDFEED_RETURN_IF_ERROR(ExpandBraces(pattern, &pats));
  std::vector<std::string> files;
  for (const auto& p : pats) {
    glob_t g{};
    int r = ::glob(p.c_str(), GLOB_NOSORT, nullptr, &g);
    if (r == 0) {
      for (size_t i = 0; i < g.gl_pathc; ++i) files.emplace_back(g.gl_pathv[i]);
    }
    globfree(&g);
    if (r != 0 && r != GLOB_NOMATCH) return Status::IOError("glob failed for " + p);
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  if (files.empty()) return Status::NotFound("no files match " + pattern);
  return files;
}

}  // namespace ssdfeed
