// Brace ranges ({000..099}, {a,b}), then glob(3)'s wildcards matched
// component by component over Env listings (so a test Env sees every lookup).
#include <fnmatch.h>

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

namespace {

bool HasWildcard(const std::string& part) { return part.find_first_of("*?[") != std::string::npos; }

std::string Child(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir == "/" ? "/" + name : dir + "/" + name;
}

// Appends the paths under dir matching parts[i..]. Like glob(3) without
// GLOB_ERR, an unreadable or missing directory matches nothing, and a
// wildcard does not match a leading '.'.
void GlobFrom(Env* env, const std::string& dir, const std::vector<std::string>& parts, size_t i,
              std::vector<std::string>* out) {
  if (i == parts.size()) {
    if (env->Lstat(dir).ok()) out->push_back(dir);
    return;
  }
  if (!HasWildcard(parts[i])) return GlobFrom(env, Child(dir, parts[i]), parts, i + 1, out);
  std::vector<std::string> names;
  if (!env->GetChildren(dir.empty() ? "." : dir, &names).ok()) return;
  bool last = i + 1 == parts.size();
  for (const auto& name : names) {
    if (::fnmatch(parts[i].c_str(), name.c_str(), FNM_PERIOD) != 0) continue;
    std::string path = Child(dir, name);
    if (last) {
      out->push_back(path);
      continue;
    }
    auto fi = env->Stat(path);  // follows links, as glob(3) does
    if (fi.ok() && fi->is_dir) GlobFrom(env, path, parts, i + 1, out);
  }
}

std::vector<std::string> SplitComponents(const std::string& p) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= p.size()) {
    size_t slash = p.find('/', start);
    if (slash == std::string::npos) slash = p.size();
    if (slash > start) parts.push_back(p.substr(start, slash - start));
    start = slash + 1;
  }
  return parts;
}

}  // namespace

Result<std::vector<std::string>> ExpandGlob(const std::string& pattern, Env* env) {
  if (env == nullptr) env = Env::Default();
  std::vector<std::string> pats;
  SSDFEED_RETURN_IF_ERROR(ExpandBraces(pattern, &pats));
  std::vector<std::string> files;
  for (const auto& p : pats)
    GlobFrom(env, p.rfind('/', 0) == 0 ? "/" : "", SplitComponents(p), 0, &files);
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  if (files.empty()) return Status::NotFound("no files match " + pattern);
  return files;
}

}  // namespace ssdfeed
