// The fields of a cached sample, parsed and encoded: what code outside the
// cache (the renderer, the CLI, ItemStore, the bindings) uses instead of the
// record's field section, whose layout stays private to src/cache
// (docs/cache-format.md, "Fields").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ssdfeed/cache.h"
#include "ssdfeed/sample.h"
#include "ssdfeed/status.h"

namespace ssdfeed {

// cs.fields as views (pointing into it, valid as long as it is) into *out,
// replacing what it held; none for a sample of only an image and a label.
// Corruption saying what is wrong when the section is malformed: every
// length is checked against its bounds, so a flipped byte never reads
// outside it.
Status ParseFields(const CachedSample& cs, std::vector<FieldView>* out);
// The inverse: fields as the section a CachedSample given to
// CacheEntry::Put holds (its `fields` then points into *section), appended
// to *section. InvalidArgument for a field whose data is not
// product(shape) * itemsize, or too many fields.
Status EncodeFields(const std::vector<Field>& fields, std::string* section);
// A parsed field's elements (product(shape) * itemsize bytes): the view's
// own bytes when stored raw, else (a run-length mask, FieldView::codec 1)
// decoded into *scratch, which the result then points into.
std::string_view FieldData(const FieldView& v, std::string* scratch);

}  // namespace ssdfeed
