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

// An entry of items (ItemStore, ssdfeed.cache, ssdfeed.tf.cache: kItemsRecordSpec,
// ...): its origin is a compute (Python, C++) no tool outside the job reopens,
// so tools check and drop its records but never re-prepare them.
inline bool IsItemsKey(const EntryKey& k) { return k.spec.rfind("items", 0) == 0; }

}  // namespace ssdfeed
