// The cache entry of (source, preparation), and the manifest JSON that lets
// `cache verify --repair` rebuild both.
#pragma once

#include "ssdfeed/cache.h"
#include "ssdfeed/image.h"
#include "ssdfeed/source.h"

namespace ssdfeed {

EntryKey MakeEntryKey(const Source& source, const SourceOptions& so, const PrepareSpec& spec);
// Inverse of what MakeEntryKey records in prepare_json.
Status ParsePrepareJson(const std::string& json, PrepareSpec* spec, SourceOptions* so);

}  // namespace ssdfeed
