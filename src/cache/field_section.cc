#include "cache/field_section.h"

#include <cstring>

namespace ssdfeed::cache_format {

namespace {

// Each field: u8 kind, u8 ndim, u8 name length, u8 dtype length, u32 zero,
// u64 data length, u64 dims[ndim], name, dtype, zero padding to 8, data,
// zero padding to 8. The section starts with u32 field count and u32 zero.
constexpr size_t kFieldHead = 16;

size_t Pad8(size_t n) { return (n + 7) & ~size_t{7}; }

template <typename T>
void Append(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}
template <typename T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

Status CheckField(const Field& f) {
  size_t item = DTypeItemSize(f.dtype);
  if (item == 0) return Status::InvalidArgument("field " + f.name + ": unknown dtype " + f.dtype);
  if (f.name.empty() || f.name.size() > 255 || f.dtype.size() > 255)
    return Status::InvalidArgument("field name or dtype empty or longer than 255 bytes");
  if (f.shape.size() > kMaxFieldDims)
    return Status::InvalidArgument("field " + f.name + " has more than 32 dimensions");
  unsigned __int128 n = item;
  for (uint64_t d : f.shape) n *= d;
  if (n != f.data.size())
    return Status::InvalidArgument("field " + f.name + " holds " + std::to_string(f.data.size()) +
                                   " bytes, its shape and dtype say otherwise");
  return Status::OK();
}

}  // namespace

Status EncodeFields(const std::vector<Field>& fields, std::string* out) {
  if (fields.size() > kMaxFields) return Status::InvalidArgument("more than 255 fields");
  for (const Field& f : fields) SSDFEED_RETURN_IF_ERROR(CheckField(f));
  Append<uint32_t>(out, static_cast<uint32_t>(fields.size()));
  Append<uint32_t>(out, 0);
  for (const Field& f : fields) {
    Append<uint8_t>(out, static_cast<uint8_t>(f.kind));
    Append<uint8_t>(out, static_cast<uint8_t>(f.shape.size()));
    Append<uint8_t>(out, static_cast<uint8_t>(f.name.size()));
    Append<uint8_t>(out, static_cast<uint8_t>(f.dtype.size()));
    Append<uint32_t>(out, 0);
    Append<uint64_t>(out, f.data.size());
    for (uint64_t d : f.shape) Append<uint64_t>(out, d);
    out->append(f.name).append(f.dtype);
    out->append(Pad8(f.name.size() + f.dtype.size()) - f.name.size() - f.dtype.size(), '\0');
    out->append(f.data);
    out->append(Pad8(f.data.size()) - f.data.size(), '\0');
  }
  return Status::OK();
}

std::string ParseFields(std::string_view section, std::vector<FieldView>* out) {
  out->clear();
  if (section.empty()) return "";
  const char* p = section.data();
  size_t left = section.size();
  if (left < 8) return "field section shorter than its count";
  uint32_t count = Load<uint32_t>(p);
  if (count > kMaxFields || Load<uint32_t>(p + 4) != 0) return "bad field count";
  p += 8;
  left -= 8;
  for (uint32_t i = 0; i < count; ++i) {
    if (left < kFieldHead) return "field " + std::to_string(i) + " cut short";
    FieldView v;
    uint8_t kind = Load<uint8_t>(p), ndim = Load<uint8_t>(p + 1);
    size_t name_len = Load<uint8_t>(p + 2), dtype_len = Load<uint8_t>(p + 3);
    uint64_t size = Load<uint64_t>(p + 8);
    if (kind > static_cast<uint8_t>(FieldKind::kBytes) || ndim > kMaxFieldDims ||
        Load<uint32_t>(p + 4) != 0 || name_len == 0)
      return "field " + std::to_string(i) + " has a bad header";
    p += kFieldHead;
    left -= kFieldHead;
    size_t text = Pad8(name_len + dtype_len);
    if (left < ndim * 8 + text) return "field " + std::to_string(i) + " cut short";
    v.kind = static_cast<FieldKind>(kind);
    unsigned __int128 elems = 1;
    for (int d = 0; d < ndim; ++d) {
      v.shape.push_back(Load<uint64_t>(p + 8 * d));
      elems *= v.shape.back();
    }
    p += ndim * 8;
    left -= ndim * 8;
    v.name = std::string_view(p, name_len);
    v.dtype = std::string_view(p + name_len, dtype_len);
    p += text;
    left -= text;
    size_t item = DTypeItemSize(v.dtype);
    if (item == 0 || elems * item != size)
      return "field " + std::string(v.name) + ": shape, dtype and length disagree";
    if (size > left || Pad8(size) > left) return "field " + std::string(v.name) + " cut short";
    v.data = reinterpret_cast<const uint8_t*>(p);
    v.size = size;
    p += Pad8(size);
    left -= Pad8(size);
    out->push_back(std::move(v));
  }
  if (left != 0) return "bytes after the last field";
  return "";
}

Field ToField(const FieldView& v) {
  Field f;
  f.name = std::string(v.name);
  f.kind = v.kind;
  f.dtype = std::string(v.dtype);
  f.shape = v.shape;
  f.data.assign(reinterpret_cast<const char*>(v.data), v.size);
  return f;
}

}  // namespace ssdfeed::cache_format
