#include "cache/field_section.h"

#include <cstring>

#include "image/mask_rle.h"
#include "ssdfeed/cached_fields.h"

namespace ssdfeed::cache_format {

namespace {

// Each field: u8 kind, u8 ndim, u8 name length, u8 dtype length, u8 codec,
// 3 zero bytes, u64 data length (stored), u64 dims[ndim], name, dtype, zero
// padding to 8, data, zero padding to 8. The section starts with u32 field
// count and u32 zero.
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

// A field that may be stored run-length: a "|u1" mask or instance masks
// of at least one dimension.
bool RleAllowed(FieldKind kind, std::string_view dtype, size_t ndim) {
  return (kind == FieldKind::kMask || kind == FieldKind::kInstanceMasks) && dtype == "|u1" &&
         ndim > 0;
}

// A field's runs: its rows are its last dimension.
void EncodeRuns(const Field& f, std::string* out) {
  uint64_t width = f.shape.back();
  uint64_t rows = width == 0 ? 0 : f.data.size() / width;
  EncodeMaskRle(reinterpret_cast<const uint8_t*>(f.data.data()), rows, width, out);
}

}  // namespace

Status EncodeFields(const std::vector<Field>& fields, std::string* out,
                    const std::vector<FieldCodec>* codecs) {
  if (fields.size() > kMaxFields) return Status::InvalidArgument("more than 255 fields");
  if (codecs != nullptr && codecs->size() != fields.size())
    return Status::InvalidArgument("a codec for each field, or none");
  for (size_t i = 0; i < fields.size(); ++i) {
    const Field& f = fields[i];
    SSDFEED_RETURN_IF_ERROR(CheckField(f));
    if (codecs != nullptr && (*codecs)[i] == FieldCodec::kRle &&
        !RleAllowed(f.kind, f.dtype, f.shape.size()))
      return Status::InvalidArgument("field " + f.name + " cannot be stored run-length");
  }
  Append<uint32_t>(out, static_cast<uint32_t>(fields.size()));
  Append<uint32_t>(out, 0);
  std::string runs;
  for (size_t i = 0; i < fields.size(); ++i) {
    const Field& f = fields[i];
    FieldCodec codec = codecs != nullptr ? (*codecs)[i] : FieldCodec::kRaw;
    std::string_view data = f.data;
    if (codec == FieldCodec::kRle) {
      runs.clear();
      EncodeRuns(f, &runs);
      data = runs;
    }
    Append<uint8_t>(out, static_cast<uint8_t>(f.kind));
    Append<uint8_t>(out, static_cast<uint8_t>(f.shape.size()));
    Append<uint8_t>(out, static_cast<uint8_t>(f.name.size()));
    Append<uint8_t>(out, static_cast<uint8_t>(f.dtype.size()));
    Append<uint32_t>(out, static_cast<uint8_t>(codec));  // codec, then 3 zero bytes
    Append<uint64_t>(out, data.size());
    for (uint64_t d : f.shape) Append<uint64_t>(out, d);
    out->append(f.name).append(f.dtype);
    out->append(Pad8(f.name.size() + f.dtype.size()) - f.name.size() - f.dtype.size(), '\0');
    out->append(data);
    out->append(Pad8(data.size()) - data.size(), '\0');
  }
  return Status::OK();
}

std::vector<FieldCodec> PreparedCodecs(const std::vector<Field>& fields) {
  std::vector<FieldCodec> codecs(fields.size(), FieldCodec::kRaw);
  std::string runs;
  for (size_t i = 0; i < fields.size(); ++i) {
    const Field& f = fields[i];
    if (!RleAllowed(f.kind, f.dtype, f.shape.size()) || f.data.empty()) continue;
    runs.clear();
    EncodeRuns(f, &runs);
    if (runs.size() < f.data.size()) codecs[i] = FieldCodec::kRle;
  }
  return codecs;
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
  uint64_t size;  // stored bytes
  FieldCodec codec;
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
    uint8_t codec = Load<uint8_t>(p + 4);
    if (kind > static_cast<uint8_t>(FieldKind::kInstanceMasks) || f.ndim > kMaxFieldDims ||
        codec > static_cast<uint8_t>(FieldCodec::kRle) || !AllZero(p + 5, 3) || name_len == 0)
      return "field " + std::to_string(i) + " has a bad header";
    f.kind = static_cast<FieldKind>(kind);
    f.codec = static_cast<FieldCodec>(codec);
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
        (f.codec == FieldCodec::kRaw && want != f.size))
      return "field " + std::string(f.name) + ": shape, dtype and length disagree";
    if (f.size > left || Pad8(f.size) > left) return "field " + std::string(f.name) + " cut short";
    f.data = p;
    if (f.codec == FieldCodec::kRle) {
      if (!RleAllowed(f.kind, f.dtype, f.ndim))
        return "field " + std::string(f.name) + ": run-length, but not a |u1 mask";
      if (want > kMaxDecodedField)  // before anyone allocates what it claims
        return "field " + std::string(f.name) + ": run-length mask of " + std::to_string(want) +
               " bytes, over the record limit";
      uint64_t width = Load<uint64_t>(dims + 8 * (f.ndim - 1));
      std::string bad =
          CheckMaskRle(std::string_view(p, f.size), width == 0 ? 0 : want / width, width);
      if (!bad.empty()) return "field " + std::string(f.name) + ": " + bad;
    }
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
    v.codec = f.codec;
    out->push_back(std::move(v));
  });
  if (!bad.empty()) out->clear();
  return bad;
}

std::string CheckFields(std::string_view section, uint32_t* count) {
  return WalkFields(section, count, [](const RawField&) {});
}

std::string_view RawData(const FieldView& v, std::string* scratch) {
  if (v.codec == FieldCodec::kRaw) return {reinterpret_cast<const char*>(v.data), v.size};
  // A parsed run-length view: a |u1 mask of at least one dimension whose
  // decoded size ParseFields bounded.
  uint64_t width = v.shape.back(), bytes = 1;
  for (uint64_t d : v.shape) bytes *= d;
  scratch->resize(bytes);
  DecodeMaskRle(std::string_view(reinterpret_cast<const char*>(v.data), v.size),
                width == 0 ? 0 : bytes / width, width, reinterpret_cast<uint8_t*>(scratch->data()));
  return *scratch;
}

size_t PreparedSectionSize(const std::vector<Field>& fields) {
  if (fields.empty()) return 0;  // no section
  std::vector<FieldCodec> codecs = PreparedCodecs(fields);
  std::string section;
  return EncodeFields(fields, &section, &codecs).ok() ? section.size() : 0;
}

Field ToField(const FieldView& v) {
  Field f;
  f.name = std::string(v.name);
  f.kind = v.kind;
  f.dtype = std::string(v.dtype);
  f.shape = v.shape;
  if (v.codec == FieldCodec::kRaw)
    f.data.assign(reinterpret_cast<const char*>(v.data), v.size);
  else
    RawData(v, &f.data);
  return f;
}

}  // namespace ssdfeed::cache_format

namespace ssdfeed {

// Public (ssdfeed/cache.h): readers outside src/cache get parsed fields,
// never the section's layout.
Status CachedSample::ParsedFields(std::vector<FieldView>* out) const {
  out->clear();
  if (fields.empty()) return Status::OK();  // a sample of only an image and a label
  std::string bad = cache_format::ParseFields(fields, out);
  if (!bad.empty()) return Status::Corruption("cached fields: " + bad);
  return Status::OK();
}

Status EncodeFields(const std::vector<Field>& fields, std::string* section) {
  return cache_format::EncodeFields(fields, section);
}

std::string_view FieldData(const FieldView& v, std::string* scratch) {
  return cache_format::RawData(v, scratch);
}

}  // namespace ssdfeed
