// OpenSource: parses the URI and hands over to the concrete reader.
#include <algorithm>

#include "source/field_specs.h"
#include "source/sources.h"
#include "ssdfeed/enum_names.h"

namespace ssdfeed {

// The spellings of OnError (ssdfeed/enum_names.h).
SSDFEED_ENUM_TABLE(OnError, "on_error", {OnError::kRaise, "raise"}, {OnError::kSkip, "skip"})

namespace {

// A folder option's 0|1 (or false|true) value.
Status FolderFlag(const std::string& key, const std::string& value, const std::string& spec,
                  bool* out) {
  if (value == "1" || value == "true")
    *out = true;
  else if (value == "0" || value == "false")
    *out = false;
  else
    return Status::InvalidArgument(key + " must be 0 or 1, not '" + value + "' in '" + spec + "'");
  return Status::OK();
}

// Splits "DIR?allow_empty=1&follow_links=1" into DIR and the options. A '?'
// not followed by key=value pairs (without '/') is part of the directory's
// name.
Status ParseFolderOptions(const std::string& spec, std::string* dir, SourceOptions* opts) {
  *dir = spec;
  size_t q = spec.rfind('?');
  if (q == std::string::npos || spec.find('=', q) == std::string::npos ||
      spec.find('/', q) != std::string::npos)
    return Status::OK();
  std::string query = spec.substr(q + 1);
  for (size_t at = 0; at <= query.size();) {
    size_t amp = std::min(query.find('&', at), query.size());
    std::string pair = query.substr(at, amp - at);
    at = amp + 1;
    size_t eq = pair.find('=');
    std::string key = pair.substr(0, eq);
    std::string value = eq == std::string::npos ? "" : pair.substr(eq + 1);
    if (key == "allow_empty")
      SSDFEED_RETURN_IF_ERROR(FolderFlag(key, value, spec, &opts->allow_empty_classes));
    else if (key == "follow_links")
      SSDFEED_RETURN_IF_ERROR(FolderFlag(key, value, spec, &opts->follow_links));
    else
      return Status::InvalidArgument("unknown folder option '" + key + "' in '" + spec +
                                     "' (known: allow_empty=0|1, follow_links=0|1)");
  }
  *dir = spec.substr(0, q);
  return Status::OK();
}

Result<std::unique_ptr<Source>> OpenFolder(const std::string& uri, const std::string& spec,
                                           SourceOptions opts) {
  std::string dir;
  SSDFEED_RETURN_IF_ERROR(ParseFolderOptions(spec, &dir, &opts));
  if (dir.rfind("s3://", 0) == 0) return OpenS3Source(uri, dir, "folder", opts);
  return OpenFolderSource(uri, dir, opts);
}

// "GLOB?image=jpg&mask=seg.png": the fields given in a tar URI replace
// those of the options (a URI is what make-dataset prints and users copy).
Status SplitTarFields(const std::string& uri, std::string* spec, SourceOptions* opts) {
  size_t q = QueryStart(*spec);
  if (q == std::string::npos) return Status::OK();
  std::vector<std::pair<std::string, std::string>> pairs;
  SSDFEED_RETURN_IF_ERROR(ParseQuery(spec->substr(q + 1), uri, &pairs));
  opts->fields.clear();
  for (auto& [name, key] : pairs) {
    SSDFEED_ASSIGN_OR_RETURN(FieldSpec f, ParseFieldSpec(name + "=" + key));  // NAME:KIND too
    opts->fields.push_back(std::move(f));
  }
  spec->erase(q);
  return Status::OK();
}

Result<std::unique_ptr<Source>> OpenTar(const std::string& uri, std::string spec,
                                        SourceOptions opts) {
  SSDFEED_RETURN_IF_ERROR(SplitTarFields(uri, &spec, &opts));
  if (spec.rfind("s3://", 0) == 0) return OpenS3Source(uri, spec, "tar", opts);
  SSDFEED_ASSIGN_OR_RETURN(auto files, ExpandGlob(spec, opts.env));
  return OpenTarSource(uri, files, opts);
}

// files: and coco: read local files; over a bucket they would need one
// request per file, so they say so instead of guessing.
Status NotOverS3(const std::string& uri, const std::string& spec) {
  if (spec.rfind("s3://", 0) != 0) return Status::OK();
  return Status::InvalidArgument(uri.substr(0, uri.find(':')) +
                                 ": sources in s3:// are not "
                                 "supported (" +
                                 uri +
                                 "); write the dataset as WebDataset "
                                 "tars (tar:s3://...?image=jpg&mask=seg.png) or mount the bucket");
}

}  // namespace

Result<std::unique_ptr<Source>> OpenSource(const std::string& uri, const SourceOptions& in) {
  SourceOptions opts = in;
  if (opts.env == nullptr) opts.env = Env::Default();
  auto starts = [&](const char* p) { return uri.rfind(p, 0) == 0; };
  if (starts("folder:")) return OpenFolder(uri, uri.substr(7), opts);
  auto s3 = [&](size_t at) { return uri.compare(at, 5, "s3://") == 0; };
  if (starts("s3://")) return OpenS3Source(uri, uri, "", opts);
  if (starts("tfrecord:") && s3(9)) return OpenS3Source(uri, uri.substr(9), "tfrecord", opts);
  if (starts("tar:")) return OpenTar(uri, uri.substr(4), opts);
  if (starts("files:")) {
    SSDFEED_RETURN_IF_ERROR(NotOverS3(uri, uri.substr(6)));
    return OpenFilesSource(uri, uri.substr(6), opts);
  }
  if (starts("coco:")) {
    SSDFEED_RETURN_IF_ERROR(NotOverS3(uri, uri.substr(5)));
    return OpenCocoSource(uri, uri.substr(5), opts);
  }
  if (starts("tfrecord:")) {
    SSDFEED_ASSIGN_OR_RETURN(auto files, ExpandGlob(uri.substr(9), opts.env));
    return OpenTFRecordSource(uri, files, opts);
  }
  size_t colon = uri.find(':');
  if (colon != std::string::npos && uri.find('/') > colon)
    return Status::InvalidArgument(
        "unknown source kind in '" + uri +
        "' (use folder:DIR, tfrecord:GLOB, tar:GLOB, files:ROOT?FIELD=PATTERN, "
        "coco:IMAGES_DIR?annotations=FILE.json or s3://BUCKET/...)");
  return OpenFolder("folder:" + uri, uri, opts);  // a bare directory
}

}  // namespace ssdfeed
