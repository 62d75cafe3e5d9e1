// Constructors of the concrete sources, called by OpenSource.
#pragma once

#include "ssdfeed/source.h"

namespace ssdfeed {

Result<std::unique_ptr<Source>> OpenFolderSource(const std::string& uri, const std::string& dir,
                                                 const SourceOptions& opts);
Result<std::unique_ptr<Source>> OpenTFRecordSource(const std::string& uri,
                                                   const std::vector<std::string>& files,
                                                   const SourceOptions& opts);
Result<std::unique_ptr<Source>> OpenTarSource(const std::string& uri,
                                              const std::vector<std::string>& files,
                                              const SourceOptions& opts);

}  // namespace ssdfeed
