// files:ROOT?FIELD=PATTERN&... — samples made of paired files. Every
// PATTERN holds one {stem}, which may span folders; the image field's
// pattern finds the stems (every regular file under its folder that it
// matches), every other field's file is its pattern with the stem put in.
// Pascal VOC: image=JPEGImages/{stem}.jpg&mask=SegmentationClass/{stem}.png;
// Cityscapes: image=leftImg8bit/train/{stem}_leftImg8bit.png&
// mask=gtFine/train/{stem}_gtFine_labelIds.png (stem "aachen/aachen_..").
// Ids follow the sorted stems. A stem without one of the other files is an
// error naming both (left out, named and counted under on_error=skip).
// Options beside the patterns: split=FILE (relative to ROOT, one stem per
// line: only those stems, as VOC's ImageSets/Segmentation/train.txt) and
// follow_links=1 (links are otherwise followed only inside ROOT).
#include <algorithm>
#include <set>

#include "source/field_specs.h"
#include "source/origin_root.h"
#include "source/shard_files.h"
#include "source/sources.h"

namespace ssdfeed {

namespace {

constexpr std::string_view kStem = "{stem}";

struct Pattern {
  std::string prefix;  // before {stem}, relative to ROOT
  std::string suffix;  // after it
  std::string Path(const std::string& root, const std::string& stem) const {
    return JoinPath(root, prefix + stem + suffix);
  }
};

Result<Pattern> SplitPattern(const FieldSpec& f, const std::string& uri) {
  size_t at = f.key.find(kStem);
  if (at == std::string::npos || f.key.find(kStem, at + 1) != std::string::npos || f.key.empty() ||
      f.key[0] == '/')
    return Status::InvalidArgument(uri + ": field '" + f.name + "' pattern '" + f.key +
                                   "' must be a relative path holding {stem} once");
  return Pattern{f.key.substr(0, at), f.key.substr(at + kStem.size())};
}

// Every regular file under dir (through links that stay inside the root,
// dot-names left out), as paths relative to dir; depth is capped so a link
// loop ends.
Status Walk(Env* env, const std::string& dir, const std::string& rel, int depth, OriginRoot* root,
            std::vector<std::string>* out) {
  if (depth > 32) return Status::InvalidArgument(dir + ": folders nested over 32 deep (a loop?)");
  std::vector<std::string> names;
  SSDFEED_RETURN_IF_ERROR(env->GetChildren(rel.empty() ? dir : JoinPath(dir, rel), &names));
  for (const auto& n : names) {
    if (n.empty() || n[0] == '.') continue;
    std::string r = rel.empty() ? n : rel + "/" + n;
    auto info = env->Stat(JoinPath(dir, r));
    if (!info.ok()) continue;  // a broken link is no file
    if (info->is_dir) {
      SSDFEED_RETURN_IF_ERROR(root->Check(JoinPath(dir, r)));
      SSDFEED_RETURN_IF_ERROR(Walk(env, dir, r, depth + 1, root, out));
    } else if (info->is_regular) {
      out->push_back(r);
    }
  }
  return Status::OK();
}

// The stems the pattern matches under root, sorted.
Result<std::vector<std::string>> FindStems(Env* env, const std::string& root, const Pattern& p,
                                           OriginRoot* origin) {
  size_t slash = p.prefix.find_last_of('/');
  std::string dir = slash == std::string::npos ? "" : p.prefix.substr(0, slash);
  std::string head = slash == std::string::npos ? p.prefix : p.prefix.substr(slash + 1);
  std::string base = dir.empty() ? root : JoinPath(root, dir);
  SSDFEED_ASSIGN_OR_RETURN(FileInfo info, env->Stat(base));
  if (!info.is_dir) return Status::InvalidArgument(base + ": not a directory");
  std::vector<std::string> rels, stems;
  SSDFEED_RETURN_IF_ERROR(origin->Check(base));
  SSDFEED_RETURN_IF_ERROR(Walk(env, base, "", 0, origin, &rels));
  for (const auto& r : rels) {
    if (r.size() <= head.size() + p.suffix.size() || r.compare(0, head.size(), head) != 0 ||
        r.compare(r.size() - p.suffix.size(), p.suffix.size(), p.suffix) != 0)
      continue;
    stems.push_back(r.substr(head.size(), r.size() - head.size() - p.suffix.size()));
  }
  std::sort(stems.begin(), stems.end());
  return stems;
}

struct FilesField {
  FieldSpec spec;
  Pattern pattern;
};

class FilesSource final : public Source {
 public:
  FilesSource(std::string uri, std::vector<FilesField> fields, std::vector<std::string> stems,
              std::vector<InputFile> files, size_t skipped, std::vector<std::string> reasons,
              RandomAccessFileOptions read, Env* env)
      : uri_(std::move(uri)),
        fields_(std::move(fields)),
        stems_(std::move(stems)),
        files_(std::move(files)),
        skipped_(skipped),
        reasons_(std::move(reasons)),
        read_(std::move(read)),
        env_(env) {
    identity_ = IdentityDigest("files", files_, FieldsIdentity(FilesSource::fields()));
  }
  size_t size() const override { return stems_.size(); }
  Status Read(size_t id, EncodedSample* out) const override {
    out->fields.clear();
    out->label = -1;
    bool label_taken = false;
    for (size_t j = 0; j < fields_.size(); ++j) {
      const FieldSpec& f = fields_[j].spec;
      const std::string& path = files_[id * fields_.size() + j].path;
      std::string* dst = &out->bytes;
      if (f.kind != FieldKind::kImage) {
        out->fields.push_back({f.name, f.kind, {}, false, path});
        dst = &out->fields.back().bytes;
      }
      SSDFEED_RETURN_IF_ERROR(env_->ReadFileToString(path, dst, read_));
      if (f.kind != FieldKind::kLabel) continue;
      int64_t label = 0;
      if (!ParseDecimalLabel(*dst, &label))
        return Status::Corruption(path + ": field '" + f.name + "' is not a decimal label");
      dst->clear();
      if (f.name == "label" && !label_taken) {
        out->label = label;
        label_taken = true;
        out->fields.pop_back();
      } else {
        AppendInt64(label, dst);
      }
    }
    return Status::OK();
  }
  std::string Describe(size_t id) const override {
    return files_[id * fields_.size()].path + " (stem " + stems_[id] + ")";
  }
  const std::string& identity() const override { return identity_; }
  const std::string& uri() const override { return uri_; }
  size_t skipped() const override { return skipped_; }
  std::vector<std::string> skipped_reasons() const override { return reasons_; }
  std::vector<FieldSpec> fields() const override {
    std::vector<FieldSpec> out;
    for (const auto& f : fields_) out.push_back(f.spec);
    return out;
  }

 private:
  std::string uri_;
  std::vector<FilesField> fields_;  // the image first
  std::vector<std::string> stems_;
  std::vector<InputFile> files_;  // stem-major: fields_.size() per stem
  size_t skipped_;
  std::vector<std::string> reasons_;
  RandomAccessFileOptions read_;
  Env* env_;
  std::string identity_;
};

// The URI's query: FIELD=PATTERN pairs and the options beside them.
struct FilesQuery {
  std::vector<std::pair<std::string, std::string>> patterns;
  std::string split;  // split=FILE, relative to ROOT
  bool follow_links = false;
};

Status ParseFilesQuery(const std::string& uri, const std::string& query, bool follow_links,
                       FilesQuery* q) {
  q->follow_links = follow_links;
  if (query.empty()) return Status::OK();
  std::vector<std::pair<std::string, std::string>> pairs;
  SSDFEED_RETURN_IF_ERROR(ParseQuery(query, uri, &pairs));
  for (auto& [key, value] : pairs) {
    if (key == "split") {
      q->split = value;
    } else if (key == "follow_links") {
      if (value != "0" && value != "1" && value != "true" && value != "false")
        return Status::InvalidArgument(uri + ": follow_links must be 0 or 1, not '" + value + "'");
      q->follow_links = value == "1" || value == "true";
    } else {
      q->patterns.emplace_back(key, value);
    }
  }
  return Status::OK();
}

// A relative name that stays below where it is joined: no leading '/', no
// ".." component.
bool StaysBelow(const std::string& name) {
  if (name.empty() || name[0] == '/') return false;
  for (size_t at = 0; at <= name.size();) {
    size_t slash = std::min(name.find('/', at), name.size());
    if (name.compare(at, slash - at, "..") == 0) return false;
    at = slash + 1;
  }
  return true;
}

// The stems a split file lists, one per line (blank lines and trailing
// spaces or CR ignored), sorted. A line of two words (VOC's per-class
// lists: "2008_000008 -1") or a stem listed twice is an error naming the
// file and the line.
Result<std::vector<std::string>> ReadSplit(Env* env, const std::string& path,
                                           const RandomAccessFileOptions& read) {
  std::string text;
  SSDFEED_RETURN_IF_ERROR(env->ReadFileToString(path, &text, read));
  std::vector<std::string> stems;
  std::set<std::string> seen;
  size_t line = 0;
  for (size_t at = 0; at < text.size();) {
    size_t end = std::min(text.find('\n', at), text.size());
    std::string stem = text.substr(at, end - at);
    at = end + 1;
    ++line;
    while (!stem.empty() && (stem.back() == '\r' || stem.back() == ' ' || stem.back() == '\t'))
      stem.pop_back();
    if (stem.empty()) continue;
    std::string where = path + " line " + std::to_string(line) + ": ";
    if (stem.find_first_of(" \t") != std::string::npos)
      return Status::InvalidArgument(where + "'" + stem +
                                     "' is not one stem (a split lists one stem per line)");
    if (!StaysBelow(stem))
      return Status::InvalidArgument(where + "stem '" + stem +
                                     "' is not a relative name without '..'");
    if (!seen.insert(stem).second)
      return Status::InvalidArgument(where + "stem '" + stem + "' is listed twice");
    stems.push_back(std::move(stem));
  }
  if (stems.empty()) return Status::InvalidArgument(path + ": the split lists no stem");
  std::sort(stems.begin(), stems.end());
  return stems;
}

// SourceOptions::stems, checked as a split file's lines are, sorted.
Result<std::vector<std::string>> GivenStems(const std::string& uri,
                                            std::vector<std::string> stems) {
  std::set<std::string> seen;
  for (const auto& s : stems) {
    if (!StaysBelow(s))
      return Status::InvalidArgument(uri + ": stem '" + s +
                                     "' is not a relative name without '..'");
    if (!seen.insert(s).second)
      return Status::InvalidArgument(uri + ": stem '" + s + "' is given twice");
  }
  std::sort(stems.begin(), stems.end());
  return stems;
}

// The URI's FIELD=PATTERN pairs (else the options' fields), kinds resolved
// (an option naming the same field may give its kind), the image first.
Result<std::vector<FilesField>> ParseFields(
    const std::string& uri, const std::vector<std::pair<std::string, std::string>>& pairs,
    const SourceOptions& opts) {
  std::vector<FieldSpec> specs;
  if (!pairs.empty()) {
    for (auto& [name, pattern] : pairs) {
      FieldKind kind = FieldKind::kAuto;
      for (const auto& o : opts.fields)
        if (o.name == name) kind = o.kind;
      specs.push_back({name, kind, pattern});
    }
  } else {
    specs = opts.fields;
  }
  SSDFEED_ASSIGN_OR_RETURN(specs, ResolveFields(specs, "files"));
  auto image = std::find_if(specs.begin(), specs.end(),
                            [](const FieldSpec& f) { return f.kind == FieldKind::kImage; });
  if (image == specs.end())
    return Status::InvalidArgument(uri + ": no image field (files:ROOT?image=DIR/{stem}.jpg&...)");
  std::rotate(specs.begin(), image, image + 1);
  std::vector<FilesField> out;
  for (auto& f : specs) {
    SSDFEED_ASSIGN_OR_RETURN(Pattern p, SplitPattern(f, uri));
    out.push_back({std::move(f), std::move(p)});
  }
  return out;
}

// The stems to serve: the split's or the options' when given, else every
// stem the image pattern finds.
Result<std::vector<std::string>> StemsToServe(Env* env, const std::string& uri,
                                              const std::string& root, const FilesQuery& q,
                                              const SourceOptions& opts, const Pattern& image,
                                              OriginRoot* origin) {
  if (!q.split.empty() && !opts.stems.empty())
    return Status::InvalidArgument(uri + ": both a split file and a list of stems; give one");
  if (!opts.stems.empty()) return GivenStems(uri, opts.stems);
  if (q.split.empty()) return FindStems(env, root, image, origin);
  if (!StaysBelow(q.split))
    return Status::InvalidArgument(uri + ": split '" + q.split +
                                   "' must be a path relative to ROOT without '..'");
  std::string path = JoinPath(root, q.split);
  SSDFEED_RETURN_IF_ERROR(origin->Check(path));
  return ReadSplit(env, path, origin->ReadOptions());
}

}  // namespace

Result<std::unique_ptr<Source>> OpenFilesSource(const std::string& uri, const std::string& spec,
                                                const SourceOptions& opts) {
  size_t q = spec.find('?');
  std::string root = spec.substr(0, q);
  FilesQuery query;
  SSDFEED_RETURN_IF_ERROR(ParseFilesQuery(uri, q == std::string::npos ? "" : spec.substr(q + 1),
                                          opts.follow_links, &query));
  if (root.empty()) return Status::InvalidArgument(uri + ": no ROOT folder before '?'");
  SSDFEED_ASSIGN_OR_RETURN(auto fields, ParseFields(uri, query.patterns, opts));
  Env* env = opts.env;
  SSDFEED_ASSIGN_OR_RETURN(OriginRoot origin, OriginRoot::Open(env, root, query.follow_links));
  SSDFEED_ASSIGN_OR_RETURN(auto found,
                           StemsToServe(env, uri, root, query, opts, fields[0].pattern, &origin));
  std::vector<std::string> stems, reasons;
  std::vector<InputFile> files;
  for (const auto& stem : found) {
    std::vector<InputFile> row;
    Status missing;
    for (const auto& f : fields) {
      std::string path = f.pattern.Path(root, stem);
      SSDFEED_RETURN_IF_ERROR(origin.Check(path));  // never skipped: the user must see it
      auto info = env->Stat(path);
      if (!info.ok() || info->is_dir) {
        missing = Status::NotFound(uri + ": stem '" + stem + "' has no '" + f.spec.name +
                                   "' file (" + path + ")");
        break;
      }
      row.push_back({path, info->size, info->mtime_ns, info->inode, info->ctime_ns, {}});
    }
    if (!missing.ok()) {
      if (opts.on_error == OnError::kRaise) return missing;
      reasons.push_back(missing.message());
      continue;
    }
    stems.push_back(stem);
    for (auto& r : row) files.push_back(std::move(r));
  }
  if (stems.empty())
    return Status::NotFound(uri + ": no sample (" + std::to_string(found.size()) +
                            " files match the " + fields[0].spec.name + " pattern '" +
                            fields[0].spec.key + "' under " + root +
                            (found.empty() ? "" : ", none with every field") + ")");
  size_t skipped = reasons.size();
  return std::unique_ptr<Source>(new FilesSource(uri, std::move(fields), std::move(stems),
                                                 std::move(files), skipped, std::move(reasons),
                                                 origin.ReadOptions(), env));
}

}  // namespace ssdfeed
