#include "image/field_prepare.h"

#include <cstring>
#include <memory>

#include "image/field_geometry.h"
#include "image/png.h"

namespace ssdfeed {

namespace {

std::string Size(int w, int h) { return std::to_string(w) + "x" + std::to_string(h); }

// Sub-byte samples are packed most significant first, rows byte aligned.
void UnpackBits(const uint8_t* packed, int h, int w, int depth, uint8_t* out) {
  size_t row = (static_cast<size_t>(w) * depth + 7) / 8;
  unsigned mask = (1u << depth) - 1;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      size_t bit = static_cast<size_t>(x) * depth;
      unsigned byte = packed[y * row + bit / 8];
      out[static_cast<size_t>(y) * w + x] =
          static_cast<uint8_t>((byte >> (8 - depth - bit % 8)) & mask);
    }
}

}  // namespace

Status DecodeMaskPng(std::string_view bytes, const DecodeLimits& limits, MaskPixels* out) {
  SpngContext ctx;
  spng_ihdr ihdr;
  SSDFEED_RETURN_IF_ERROR(OpenPng(bytes, &ctx, &ihdr));
  if (ihdr.color_type != SPNG_COLOR_TYPE_GRAYSCALE && ihdr.color_type != SPNG_COLOR_TYPE_INDEXED)
    return Status::InvalidArgument(
        "a mask must be a grey or palette PNG of class ids, this one has colour type " +
        std::to_string(ihdr.color_type) + " (RGB or with alpha)");
  if (static_cast<uint64_t>(ihdr.width) * ihdr.height > limits.max_pixels)
    return Status::InvalidArgument("mask of " + Size(ihdr.width, ihdr.height) +
                                   " pixels exceeds the decode limit");
  size_t size = 0;
  // SPNG_FMT_PNG: the samples as stored (palette indices, not colours), 16
  // bits in host order, sub-byte depths packed.
  if (int e = spng_decoded_image_size(ctx.get(), SPNG_FMT_PNG, &size); e != 0)
    return Status::Corruption(std::string("bad PNG: ") + spng_strerror(e));
  int h = static_cast<int>(ihdr.height), w = static_cast<int>(ihdr.width), depth = ihdr.bit_depth;
  out->height = h;
  out->width = w;
  out->elem = depth == 16 ? 2 : 1;
  std::vector<uint8_t> packed;
  std::vector<uint8_t>* target = depth < 8 ? &packed : &out->data;
  target->resize(size);
  if (depth >= 8 && size != static_cast<size_t>(h) * w * out->elem)
    return Status::Corruption("PNG size mismatch");
  if (int e = spng_decode_image(ctx.get(), target->data(), size, SPNG_FMT_PNG, 0); e != 0)
    return Status::Corruption(std::string("corrupt PNG: ") + spng_strerror(e));
  if (depth < 8) {
    if (size < static_cast<size_t>(h) * ((static_cast<size_t>(w) * depth + 7) / 8))
      return Status::Corruption("PNG size mismatch");
    out->data.resize(static_cast<size_t>(h) * w);
    UnpackBits(packed.data(), h, w, depth, out->data.data());
  }
  return Status::OK();
}

namespace {

// As many as a cache record's field may have (cache_format::kMaxFieldDims).
constexpr size_t kMaxNpyDims = 32;

// The header of a .npy: a Python dict literal with 'descr', 'fortran_order'
// and 'shape', written by numpy.lib.format.
class NpyHeader {
 public:
  explicit NpyHeader(std::string_view text) : s_(text) {}

  Status Parse(std::string* descr, bool* fortran, std::vector<uint64_t>* shape) {
    bool got_descr = false, got_order = false, got_shape = false;
    if (!Eat('{')) return Bad("does not start with {");
    while (!Eat('}')) {
      std::string key;
      if (!String(&key) || !Eat(':')) return Bad("has a malformed key");
      if (key == "descr") {
        Skip();
        if (i_ < s_.size() && s_[i_] == '[')
          return Status::InvalidArgument("structured dtypes are not supported (a field list)");
        if (!String(descr)) return Bad("has a descr that is not a string");
        got_descr = true;
      } else if (key == "fortran_order") {
        if (Word("True")) {
          *fortran = true;
        } else if (Word("False")) {
          *fortran = false;
        } else {
          return Bad("has a fortran_order that is not True or False");
        }
        got_order = true;
      } else if (key == "shape") {
        SSDFEED_RETURN_IF_ERROR(Shape(shape));
        got_shape = true;
      } else {
        return Bad("has an unknown key '" + key + "'");
      }
      if (!Eat(',') && !Peek('}')) return Bad("misses a comma");
    }
    if (!got_descr || !got_order || !got_shape) return Bad("lacks descr, fortran_order or shape");
    return Status::OK();
  }

 private:
  Status Bad(const std::string& what) { return Status::InvalidArgument("npy header " + what); }
  void Skip() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t')) ++i_;
  }
  bool Peek(char c) {
    Skip();
    return i_ < s_.size() && s_[i_] == c;
  }
  bool Eat(char c) {
    if (!Peek(c)) return false;
    ++i_;
    return true;
  }
  bool Word(std::string_view w) {
    Skip();
    if (s_.substr(i_, w.size()) != w) return false;
    i_ += w.size();
    return true;
  }
  bool String(std::string* out) {
    Skip();
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"')) return false;
    char q = s_[i_++];
    size_t end = s_.find(q, i_);
    if (end == std::string_view::npos) return false;
    out->assign(s_.substr(i_, end - i_));
    i_ = end + 1;
    return true;
  }
  Status Shape(std::vector<uint64_t>* shape) {
    shape->clear();
    if (!Eat('(')) return Bad("has a shape that is not a tuple");
    while (!Eat(')')) {
      Skip();
      uint64_t d = 0;
      size_t start = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
        if (d > (uint64_t{1} << 56)) return Bad("has a dimension too large");
        d = d * 10 + static_cast<uint64_t>(s_[i_++] - '0');
      }
      if (i_ == start) return Bad("has a dimension that is not a number");
      if (i_ < s_.size() && s_[i_] == 'L') ++i_;  // Python 2's long literals
      shape->push_back(d);
      if (shape->size() > kMaxNpyDims) return Bad("has more than 32 dimensions");
      if (!Eat(',') && !Peek(')')) return Bad("has a malformed shape");
    }
    return Status::OK();
  }

  std::string_view s_;
  size_t i_ = 0;
};

// Fortran order (first index fastest) to C order (last index fastest).
void FortranToC(const std::string& in, const std::vector<uint64_t>& shape, size_t item,
                std::string* out) {
  size_t nd = shape.size(), n = in.size() / std::max<size_t>(item, 1);
  out->resize(in.size());
  uint64_t idx[kMaxNpyDims] = {}, stride[kMaxNpyDims];  // nd <= kMaxNpyDims (the parser's limit)
  stride[0] = 1;
  for (size_t k = 1; k < nd; ++k) stride[k] = stride[k - 1] * shape[k - 1];
  uint64_t off = 0;  // Fortran offset of idx, in elements
  for (size_t c = 0; c < n; ++c) {
    std::memcpy(out->data() + c * item, in.data() + off * item, item);
    for (size_t k = nd; k-- > 0;) {  // odometer over the C order
      if (++idx[k] < shape[k]) {
        off += stride[k];
        break;
      }
      off -= stride[k] * (shape[k] - 1);
      idx[k] = 0;
    }
  }
}

}  // namespace

Status ParseNpy(std::string_view b, Field* out) {
  if (b.size() < 10 || b.substr(0, 6) != "\x93NUMPY")
    return Status::InvalidArgument("not a .npy file (no \\x93NUMPY magic)");
  int major = static_cast<uint8_t>(b[6]);
  if (major < 1 || major > 3)
    return Status::InvalidArgument(".npy format version " + std::to_string(major) +
                                   " is not supported (1-3 are)");
  size_t len = 0, start = major == 1 ? 10 : 12;
  if (b.size() < start) return Status::InvalidArgument(".npy header cut short");
  for (size_t i = start; i-- > 8;) len = len * 256 + static_cast<uint8_t>(b[i]);
  if (len > b.size() - start) return Status::InvalidArgument(".npy header cut short");
  std::string descr;
  bool fortran = false;
  std::vector<uint64_t> shape;
  SSDFEED_RETURN_IF_ERROR(NpyHeader(b.substr(start, len)).Parse(&descr, &fortran, &shape));
  size_t item = DTypeItemSize(descr);
  if (descr.size() >= 2 && descr[1] == 'O')
    return Status::InvalidArgument("object arrays (dtype " + descr + ") are not supported");
  if (item == 0) return Status::InvalidArgument("unsupported dtype '" + descr + "'");
  // Checked at every step: a product that wraps (any fixed width wraps;
  // 2^128 + 4 is 4) could match the data's size while the shape describes
  // an array far larger, and FortranToC walks the shape's strides.
  uint64_t total = item;
  for (uint64_t d : shape)
    if (__builtin_mul_overflow(total, d, &total))
      return Status::InvalidArgument(".npy shape's size overflows 64 bits (" +
                                     std::to_string(shape.size()) + " dimensions)");
  std::string_view data = b.substr(start + len);
  if (total != data.size())
    return Status::InvalidArgument(".npy data is " + std::to_string(data.size()) +
                                   " bytes, its header says " + std::to_string(total));
  out->dtype = descr;
  out->shape = shape;
  if (fortran && shape.size() > 1) {
    FortranToC(std::string(data), shape, item, &out->data);
  } else {
    out->data.assign(data);
  }
  return Status::OK();
}

namespace {

Status PrepareMask(const EncodedField& in, const PrepareGeometry& g, const DecodeLimits& limits,
                   Field* out) {
  MaskPixels m;
  SSDFEED_RETURN_IF_ERROR(DecodeMaskPng(in.bytes, limits, &m));
  if (m.height != g.origin_h || m.width != g.origin_w)
    return Status::InvalidArgument("mask is " + Size(m.width, m.height) +
                                   " (WxH) but its image is " + Size(g.origin_w, g.origin_h));
  std::vector<int> ys, xs;
  NearestIndex(g.origin_h, g.resized_h, g.crop_top, g.out_h, false, &ys);
  NearestIndex(g.origin_w, g.resized_w, g.crop_left, g.out_w, false, &xs);
  out->dtype = m.elem == 1 ? "|u1" : "<u2";
  out->shape = {static_cast<uint64_t>(g.out_h), static_cast<uint64_t>(g.out_w)};
  out->data.resize(static_cast<size_t>(g.out_h) * g.out_w * m.elem);
  RemapNearest(m.data.data(), static_cast<size_t>(m.width) * m.elem, m.elem, ys, xs,
               reinterpret_cast<uint8_t*>(out->data.data()));
  return Status::OK();
}

Status PrepareBoxes(const EncodedField& in, const PrepareGeometry& g, double min_visible,
                    Field* out, std::vector<size_t>* kept) {
  if (in.bytes.size() % 16 != 0)
    return Status::InvalidArgument("holds " + std::to_string(in.bytes.size()) +
                                   " bytes, not a whole number of float32 xyxy boxes");
  BoxMap m;
  // Normalised coordinates are fractions of the origin: * origin * resized / origin.
  m.sx = in.normalized ? g.resized_w : static_cast<double>(g.resized_w) / g.origin_w;
  m.sy = in.normalized ? g.resized_h : static_cast<double>(g.resized_h) / g.origin_h;
  m.bx = -g.crop_left;
  m.by = -g.crop_top;
  m.width = g.out_w;
  m.height = g.out_h;
  m.min_visible = min_visible;
  std::vector<float> boxes;
  MapBoxes(reinterpret_cast<const uint8_t*>(in.bytes.data()), in.bytes.size() / 16, m, &boxes,
           kept);
  out->dtype = "<f4";
  out->shape = {kept->size(), 4};
  out->data.assign(reinterpret_cast<const char*>(boxes.data()), boxes.size() * sizeof(float));
  return Status::OK();
}

// The values of the kept boxes, in order: classes (int64) or box_floats
// (float32), one per box.
Status KeepClasses(const EncodedField& in, const std::vector<size_t>* kept, size_t boxes,
                   Field* out) {
  const bool floats = in.kind == FieldKind::kBoxFloats;
  const size_t row = floats ? 4 : 8;
  const char* what = floats ? " float32 values" : " int64 classes";
  if (in.bytes.size() % row != 0)
    return Status::InvalidArgument("holds " + std::to_string(in.bytes.size()) +
                                   " bytes, not a whole number of" + what);
  out->dtype = floats ? "<f4" : "<i8";
  if (kept == nullptr) {  // no boxes field: passed through
    out->shape = {in.bytes.size() / row};
    out->data = in.bytes;
    return Status::OK();
  }
  if (in.bytes.size() / row != boxes)
    return Status::InvalidArgument("has " + std::to_string(in.bytes.size() / row) +
                                   (floats ? " values" : " classes") + " for " +
                                   std::to_string(boxes) + " boxes");
  out->shape = {kept->size()};
  out->data.resize(kept->size() * row);
  for (size_t i = 0; i < kept->size(); ++i)
    std::memcpy(out->data.data() + i * row, in.bytes.data() + (*kept)[i] * row, row);
  return Status::OK();
}

// Instance masks: uint32 H, uint32 W, then K planes of H x W, which must be
// the origin image's size. Each plane is resized and centre-cropped as the
// image (nearest, as a mask); only the kept boxes' planes, in order, so
// plane k stays box k's.
Status PrepareInstanceMasks(const EncodedField& in, const PrepareGeometry& g,
                            const std::vector<size_t>* kept, size_t boxes, Field* out) {
  uint32_t dims[2];
  if (in.bytes.size() < sizeof dims)
    return Status::InvalidArgument("holds " + std::to_string(in.bytes.size()) +
                                   " bytes, no mask height and width");
  std::memcpy(dims, in.bytes.data(), sizeof dims);
  if (dims[0] != static_cast<uint32_t>(g.origin_h) || dims[1] != static_cast<uint32_t>(g.origin_w))
    return Status::InvalidArgument("masks are " +
                                   Size(static_cast<int>(dims[1]), static_cast<int>(dims[0])) +
                                   " (WxH) but its image is " + Size(g.origin_w, g.origin_h));
  const size_t plane = static_cast<size_t>(g.origin_h) * static_cast<size_t>(g.origin_w);
  const size_t bytes = in.bytes.size() - sizeof dims;
  if (bytes % plane != 0)
    return Status::InvalidArgument("holds " + std::to_string(bytes) +
                                   " bytes of masks, not whole " + Size(g.origin_w, g.origin_h) +
                                   " (WxH) planes");
  const size_t planes = bytes / plane;
  if (kept != nullptr && planes != boxes)
    return Status::InvalidArgument("has " + std::to_string(planes) + " masks for " +
                                   std::to_string(boxes) + " boxes");
  std::vector<int> ys, xs;
  NearestIndex(g.origin_h, g.resized_h, g.crop_top, g.out_h, false, &ys);
  NearestIndex(g.origin_w, g.resized_w, g.crop_left, g.out_w, false, &xs);
  const size_t n = kept != nullptr ? kept->size() : planes;
  const size_t out_plane = static_cast<size_t>(g.out_h) * static_cast<size_t>(g.out_w);
  out->dtype = "|u1";
  out->shape = {n, static_cast<uint64_t>(g.out_h), static_cast<uint64_t>(g.out_w)};
  out->data.resize(n * out_plane);
  for (size_t k = 0; k < n; ++k) {
    const size_t from = kept != nullptr ? (*kept)[k] : k;
    RemapNearest(reinterpret_cast<const uint8_t*>(in.bytes.data()) + sizeof dims + from * plane,
                 static_cast<size_t>(g.origin_w), 1, ys, xs,
                 reinterpret_cast<uint8_t*>(out->data.data()) + k * out_plane);
  }
  return Status::OK();
}

Status PrepareOne(const EncodedField& in, const PrepareGeometry& g, const DecodeLimits& limits,
                  double min_visible, Field* out, std::vector<size_t>* kept) {
  switch (in.kind) {
    case FieldKind::kMask:
      return PrepareMask(in, g, limits, out);
    case FieldKind::kBoxes:
      return PrepareBoxes(in, g, min_visible, out, kept);
    case FieldKind::kLabel:
      if (in.bytes.size() != 8) return Status::InvalidArgument("is not one int64");
      out->dtype = "<i8";
      out->shape = {};
      out->data = in.bytes;
      return Status::OK();
    case FieldKind::kArray:
      return ParseNpy(in.bytes, out);
    default:  // bytes; an image field other than the sample's own is passed on too
      out->dtype = "|u1";
      out->shape = {in.bytes.size()};
      out->data = in.bytes;
      return Status::OK();
  }
}

Status Named(const Status& s, const EncodedField& f) {
  return s.WithContext("field '" + f.name + "'" + (f.origin.empty() ? "" : " (" + f.origin + ")"));
}

}  // namespace

Status PrepareFields(const std::vector<EncodedField>& in, const PrepareGeometry& g,
                     const DecodeLimits& limits, std::vector<Field>* out, double min_visible) {
  if (g.origin_h <= 0 || g.origin_w <= 0 || g.crop_top < 0 || g.crop_left < 0 ||
      g.crop_top + g.out_h > g.resized_h || g.crop_left + g.out_w > g.resized_w)
    return Status::InvalidArgument("centre crop " + Size(g.out_w, g.out_h) +
                                   " is outside the resized image " +
                                   Size(g.resized_w, g.resized_h));
  out->resize(in.size());
  // Boxes first: the classes (and per-box values and masks) fields keep
  // what their boxes keep, wherever they are listed.
  std::vector<size_t> kept;
  size_t boxes = 0;
  const EncodedField* box_field = nullptr;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].kind != FieldKind::kBoxes) continue;
    if (box_field != nullptr)
      return Status::InvalidArgument("fields '" + box_field->name + "' and '" + in[i].name +
                                     "' are both boxes; a sample has one boxes field");
    box_field = &in[i];
    boxes = in[i].bytes.size() / 16;
  }
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].kind != FieldKind::kBoxes) continue;
    (*out)[i].name = in[i].name;
    (*out)[i].kind = in[i].kind;
    SSDFEED_RETURN_IF_ERROR(
        Named(PrepareOne(in[i], g, limits, min_visible, &(*out)[i], &kept), in[i]));
  }
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].kind == FieldKind::kBoxes) continue;
    Field& f = (*out)[i];
    f.name = in[i].name;
    f.kind = in[i].kind;
    const std::vector<size_t>* keep = box_field != nullptr ? &kept : nullptr;
    Status s = in[i].kind == FieldKind::kClasses || in[i].kind == FieldKind::kBoxFloats
                   ? KeepClasses(in[i], keep, boxes, &f)
               : in[i].kind == FieldKind::kInstanceMasks
                   ? PrepareInstanceMasks(in[i], g, keep, boxes, &f)
                   : PrepareOne(in[i], g, limits, min_visible, &f, nullptr);
    SSDFEED_RETURN_IF_ERROR(Named(s, in[i]));
  }
  return Status::OK();
}

}  // namespace ssdfeed
