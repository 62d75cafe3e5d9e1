#include "cache/field_section.h"

#include <cstring>

#include "ssdfeed/cached_fields.h"

namespace ssdfeed::cache_format {

namespace {

// Each field: u8 kind, u8 ndim, u8 name length, u8 dtype length, u32 zero,
// u64 data length, u64 dims[ndim], name, dtype, zero padding to 8, data,
// zero padding to 8. The section starts with u32 field count and u32 zero.
constexpr size_t kFieldHead = 16;

size_t Pad8(size_t n) { return (n + 7) & ~size_t{7}; }

// Bytes of ndim dims of item bytes each; false when that does not fit in 64
// bits (a dim of 0 makes any shape empty, however large the others).
template <typename DimAt>
bool ShapeBytes(size_t ndim, DimAt dim, size_t item, uint64_t* bytes) {
  uint64_t n = item;
  bool overflow = false;
  for (size_t d = 0; d < ndim; ++d) {
    if (dim(d) == 0) {
      *bytes = 0;
      return true;
    }
    overflow |= __builtin_mul_overflow(n, dim(d), &n);
  }
  *bytes = n;
  return !overflow;
}

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
  uint64_t n = 0;
  if (!ShapeBytes(
          f.shape.size(), [&f](size_t d) { return f.shape[d]; }, item, &n) ||
      n != f.data.size())
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

namespace {

bool AllZero(const char* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != 0) return false;
  return true;
}

// One field as the walk finds it; dims are ndim unaligned u64s.
struct RawField {
  FieldKind kind;
  uint8_t ndim;
  const char* dims;
  std::string_view name, dtype;
  const char* data;
  uint64_t size;
};

// Checks a section and calls fn(RawField) for each field. Every length is
// checked against what is left before it is used, and every padding and
// reserved byte must be zero, so one section has one meaning (and one
// encoding: EncodeFields gives back the very bytes it parsed).
template <typename Fn>
std::string WalkFields(std::string_view section, uint32_t* count_out, Fn&& fn) {
  *count_out = 0;
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
    RawField f;
    uint8_t kind = Load<uint8_t>(p);
    f.ndim = Load<uint8_t>(p + 1);
    size_t name_len = Load<uint8_t>(p + 2), dtype_len = Load<uint8_t>(p + 3);
    f.size = Load<uint64_t>(p + 8);
    if (kind > static_cast<uint8_t>(FieldKind::kInstanceMasks) || f.ndim > kMaxFieldDims ||
        Load<uint32_t>(p + 4) != 0 || name_len == 0)
      return "field " + std::to_string(i) + " has a bad header";
    f.kind = static_cast<FieldKind>(kind);
    p += kFieldHead;
    left -= kFieldHead;
    size_t text = Pad8(name_len + dtype_len);
    if (left < f.ndim * 8 + text) return "field " + std::to_string(i) + " cut short";
    f.dims = p;
    p += f.ndim * 8;
    left -= f.ndim * 8;
    f.name = std::string_view(p, name_len);
    f.dtype = std::string_view(p + name_len, dtype_len);
    if (!AllZero(p + name_len + dtype_len, text - name_len - dtype_len))
      return "field " + std::string(f.name) + ": padding is not zero";
    p += text;
    left -= text;
    uint64_t want = 0;
    const char* dims = f.dims;
    size_t item = DTypeItemSize(f.dtype);
    if (item == 0 ||
        !ShapeBytes(
            f.ndim, [dims](size_t d) { return Load<uint64_t>(dims + 8 * d); }, item, &want) ||
        want != f.size)
      return "field " + std::string(f.name) + ": shape, dtype and length disagree";
    if (f.size > left || Pad8(f.size) > left) return "field " + std::string(f.name) + " cut short";
    f.data = p;
    if (!AllZero(p + f.size, Pad8(f.size) - f.size))
      return "field " + std::string(f.name) + ": padding is not zero";
    p += Pad8(f.size);
    left -= Pad8(f.size);
    fn(f);
  }
  if (left != 0) return "bytes after the last field";
  *count_out = count;
  return "";
}

}  // namespace

std::string ParseFields(std::string_view section, std::vector<FieldView>* out) {
  out->clear();
  uint32_t count = 0;
  std::string bad = WalkFields(section, &count, [out](const RawField& f) {
    FieldView v;
    v.name = f.name;
    v.kind = f.kind;
    v.dtype = f.dtype;
    for (int d = 0; d < f.ndim; ++d) v.shape.push_back(Load<uint64_t>(f.dims + 8 * d));
    v.data = reinterpret_cast<const uint8_t*>(f.data);
    v.size = f.size;
    out->push_back(std::move(v));
  });
  if (!bad.empty()) out->clear();
  return bad;
}

std::string CheckFields(std::string_view section, uint32_t* count) {
  return WalkFields(section, count, [](const RawField&) {});
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

namespace ssdfeed {

// Public (ssdfeed/cached_fields.h): readers outside src/cache get parsed
// fields, never the section's layout.
Status ParseFields(const CachedSample& cs, std::vector<FieldView>* out) {
  out->clear();
  if (cs.fields.empty()) return Status::OK();  // a sample of only an image and a label
  std::string bad = cache_format::ParseFields(cs.fields, out);
  if (!bad.empty()) return Status::Corruption("cached fields: " + bad);
  return Status::OK();
}

Status EncodeFields(const std::vector<Field>& fields, std::string* section) {
  return cache_format::EncodeFields(fields, section);
}

}  // namespace ssdfeed
