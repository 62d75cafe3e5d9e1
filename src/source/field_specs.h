// What the layouts share about sample fields: resolving the kind of each
// requested field, the identity text of a field list, URI queries
// (FIELD=VALUE&...) and the little encodings of labels.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ssdfeed/source.h"

namespace ssdfeed {

// Resolves every kind and checks the list: names non-empty and unique, at
// most one image field. `layout` names the source in errors.
Result<std::vector<FieldSpec>> ResolveFields(const std::vector<FieldSpec>& in,
                                             const std::string& layout);

// "fields|name:kind:key|...": lengths included, so no two lists collide;
// then "|masks:rle1" when a field is a mask or instance masks (their records
// store them run-length: an entry of the raw layout is another entry).
std::string FieldsIdentity(const std::vector<FieldSpec>& fields);

// Splits "a=1&b=2" into pairs, in order; an item without '=' or with an
// empty name is InvalidArgument naming it and `uri`.
Status ParseQuery(const std::string& query, const std::string& uri,
                  std::vector<std::pair<std::string, std::string>>* out);

// Where a URI's query starts: the last '?' followed by a '=' and no '/'
// (a '?' elsewhere is part of a glob or a name); npos when there is none.
size_t QueryStart(const std::string& spec);

// A decimal label as WebDataset's .cls holds it ("7\n"); false if not one.
bool ParseDecimalLabel(std::string_view text, int64_t* out);
// int64 little endian, as EncodedField holds a label or classes.
void AppendInt64(int64_t v, std::string* out);

}  // namespace ssdfeed
