// Field lists of the layouts: kinds, checks, identity text, URI queries.
#include "source/field_specs.h"

#include <cctype>
#include <cstring>
#include <set>

#include "ssdfeed/enum_names.h"
#include "ssdfeed/sample.h"

namespace ssdfeed {

namespace {}  // namespace

Result<std::vector<FieldSpec>> ResolveFields(const std::vector<FieldSpec>& in,
                                             const std::string& layout) {
  std::vector<FieldSpec> out;
  std::set<std::string> names;
  int images = 0;
  for (const auto& f : in) {
    if (f.name.empty())
      return Status::InvalidArgument(layout + ": a field has an empty name (key '" + f.key + "')");
    if (!names.insert(f.name).second)
      return Status::InvalidArgument(layout + ": field '" + f.name + "' is given twice");
    FieldSpec r = f;
    r.kind = ResolveFieldKind(f);
    if (static_cast<uint8_t>(r.kind) > static_cast<uint8_t>(FieldKind::kInstanceMasks))
      return Status::InvalidArgument(layout + ": field '" + f.name + "' has an unknown kind");
    // Raw planes have no size of their own: only coco: rasterises them.
    if (r.kind == FieldKind::kInstanceMasks)
      return Status::InvalidArgument(layout + ": field '" + f.name +
                                     "' is instance_masks, which only coco: gives (fields=masks)");
    if (r.kind == FieldKind::kImage && ++images > 1)
      return Status::InvalidArgument(layout + ": field '" + f.name +
                                     "' is a second image (a sample has one image)");
    out.push_back(std::move(r));
  }
  return out;
}

std::string FieldsIdentity(const std::vector<FieldSpec>& fields) {
  std::string s = "fields";
  for (const auto& f : fields) {
    s.append("|").append(std::to_string(f.name.size())).append(":").append(f.name);
    s.append(":").append(EnumName(f.kind)).append(":");
    s.append(std::to_string(f.key.size())).append(":").append(f.key);
  }
  // Masks are stored as runs (field codec 1) since this marker: a reader
  // from before it computes another identity, so it never opens such an
  // entry (it would refuse every record's field section).
  for (const auto& f : fields) {
    if (f.kind == FieldKind::kMask || f.kind == FieldKind::kInstanceMasks) {
      s.append("|masks:rle1");
      break;
    }
  }
  return s;
}

Status ParseQuery(const std::string& query, const std::string& uri,
                  std::vector<std::pair<std::string, std::string>>* out) {
  size_t start = 0;
  while (start <= query.size()) {
    size_t amp = query.find('&', start);
    std::string item = query.substr(start, amp == std::string::npos ? amp : amp - start);
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      return Status::InvalidArgument("'" + item + "' in '" + uri + "' is not NAME=VALUE");
    out->emplace_back(item.substr(0, eq), item.substr(eq + 1));
    if (amp == std::string::npos) break;
    start = amp + 1;
  }
  return Status::OK();
}

size_t QueryStart(const std::string& spec) {
  size_t q = spec.rfind('?');
  if (q == std::string::npos || spec.find('=', q) == std::string::npos ||
      spec.find('/', q) != std::string::npos)
    return std::string::npos;
  return q;
}

bool ParseDecimalLabel(std::string_view text, int64_t* out) {
  int64_t v = 0;
  bool digits = false, neg = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n' || c == '\r' || c == ' ') continue;
    if (c == '-' && !digits && !neg) {
      neg = true;
      continue;
    }
    if (!std::isdigit(static_cast<unsigned char>(c)) || v > (INT64_MAX - 9) / 10) return false;
    v = v * 10 + (c - '0');
    digits = true;
  }
  if (!digits) return false;
  *out = neg ? -v : v;
  return true;
}

void AppendInt64(int64_t v, std::string* out) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(static_cast<uint64_t>(v) >> (8 * i));
  out->append(b, 8);
}

}  // namespace ssdfeed
