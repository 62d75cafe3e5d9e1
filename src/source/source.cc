// OpenSource: parses the URI and hands over to the concrete reader.
#include "source/sources.h"

namespace ssdfeed {

Result<std::unique_ptr<Source>> OpenSource(const std::string& uri, const SourceOptions& in) {
  SourceOptions opts = in;
  if (opts.env == nullptr) opts.env = Env::Default();
  auto starts = [&](const char* p) { return uri.rfind(p, 0) == 0; };
  if (starts("folder:")) return OpenFolderSource(uri, uri.substr(7), opts);
  if (starts("tfrecord:")) {
    SSDFEED_ASSIGN_OR_RETURN(auto files, ExpandGlob(uri.substr(9)));
    return OpenTFRecordSource(uri, files, opts);
  }
  if (starts("tar:")) {
    SSDFEED_ASSIGN_OR_RETURN(auto files, ExpandGlob(uri.substr(4)));
    return OpenTarSource(uri, files, opts);
  }
  size_t colon = uri.find(':');
  if (colon != std::string::npos && uri.find('/') > colon)
    return Status::InvalidArgument("unknown source kind in '" + uri +
                                   "' (use folder:DIR, tfrecord:GLOB or tar:GLOB)");
  return OpenFolderSource("folder:" + uri, uri, opts);  // a bare directory
}

}  // namespace ssdfeed
