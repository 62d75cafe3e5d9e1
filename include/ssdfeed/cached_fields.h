// Fields encoded into a record's field section and a parsed field's
// elements: what code outside the cache (the renderer, the CLI, ItemStore,
// the bindings) uses instead of the section, whose layout stays private to
// src/cache (docs/cache-format.md, "Fields"). A cached sample parses its
// own (CachedSample::ParsedFields, ssdfeed/cache.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ssdfeed/cache.h"
#include "ssdfeed/sample.h"
#include "ssdfeed/status.h"

namespace ssdfeed {

// cs.ParsedFields(out) (ssdfeed/cache.h), under the name readers used
// before the sample handed out its own fields.
inline Status ParseFields(const CachedSample& cs, std::vector<FieldView>* out) {
  return cs.ParsedFields(out);
}
// Fields as the section a CachedSample given to
// CacheEntry::Put holds (its `fields` then points into *section), appended
// to *section. InvalidArgument for a field whose data is not
// product(shape) * itemsize, or too many fields.
Status EncodeFields(const std::vector<Field>& fields, std::string* section);
// A parsed field's elements (product(shape) * itemsize bytes): the view's
// own bytes when stored raw, else (a run-length mask, FieldView::codec 1)
// decoded into *scratch, which the result then points into.
std::string_view FieldData(const FieldView& v, std::string* scratch);

}  // namespace ssdfeed
