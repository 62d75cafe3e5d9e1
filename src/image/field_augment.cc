#include "image/field_augment.h"

#include <algorithm>
#include <cstring>

#include "image/field_geometry.h"
#include "image/mask_rle.h"

namespace ssdfeed {

namespace {

std::string Dims(const std::vector<uint64_t>& s) {
  std::string r = "(";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0) r += ',';
    r += std::to_string(s[i]);
  }
  r += ')';
  return r;
}

// The source index of each of n outputs of a window at off of the source
// (src_n elements) resized to dst_n, nearest as NearestIndex; -1 where the
// window is past the resized image (padding). Mirrored as NearestIndex.
void WindowIndex(int src_n, int dst_n, int off, int n, bool mirror, std::vector<int>* idx) {
  thread_local std::vector<int> all;
  NearestIndex(src_n, dst_n, 0, dst_n, false, &all);
  idx->resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    int p = off + i;
    (*idx)[static_cast<size_t>(mirror ? n - 1 - i : i)] =
        p >= 0 && p < dst_n ? all[static_cast<size_t>(p)] : -1;
  }
}

// RemapNearest where an index of -1 is the padding: `fill` (1 or 2 bytes
// wide, as the mask's elements).
void RemapNearestPadded(const uint8_t* src, size_t src_stride, int elem, const std::vector<int>& ys,
                        const std::vector<int>& xs, uint16_t fill, uint8_t* dst) {
  for (int y : ys) {
    for (int x : xs) {
      if (y < 0 || x < 0) {
        if (elem == 1)
          *dst = static_cast<uint8_t>(fill);
        else
          std::memcpy(dst, &fill, 2);  // little-endian, as "<u2"
      } else {
        std::memcpy(dst, src + y * src_stride + static_cast<size_t>(x) * elem, elem);
      }
      dst += elem;
    }
  }
}

// The source row and column of each output pixel of a mask under box
// (-1 in a scale-jitter window's padding), as RenderMask samples them.
void MaskIndex(const CropBox& box, int in_h, int in_w, int out_h, int out_w, std::vector<int>* ys,
               std::vector<int>* xs) {
  if (box.windowed()) {
    WindowIndex(in_h, box.resize_h, box.top, out_h, false, ys);
    WindowIndex(in_w, box.resize_w, box.left, out_w, box.flip, xs);
    return;
  }
  NearestIndex(box.height, out_h, 0, out_h, false, ys);
  NearestIndex(box.width, out_w, 0, out_w, box.flip, xs);
  for (int& y : *ys) y += box.top;
  for (int& x : *xs) x += box.left;
}

// into: where the rendered mask goes (out_h * out_w elements) when not
// into out->data, which is then left empty.
// The first and last source rows ys samples (-1: padding, none); lo > hi
// when it samples none.
void RowSpan(const std::vector<int>& ys, int* lo, int* hi) {
  *lo = 1 << 30;
  *hi = -1;
  for (int y : ys) {
    if (y < 0) continue;
    *lo = std::min(*lo, y);
    *hi = std::max(*hi, y);
  }
}

// A plane of in_h x in_w bytes as the remap reads it: raw, v's own bytes
// at plane; run-length, its rows [lo, hi] decoded into *scratch (the rows
// the remap samples; the rest left as they were). Planes are asked for in
// increasing order, as *runs only moves forward.
const uint8_t* PlaneRows(const FieldView& v, MaskRleRows* runs, size_t plane, int in_h, int in_w,
                         int lo, int hi, std::vector<uint8_t>* scratch) {
  const size_t bytes = static_cast<size_t>(in_h) * in_w;
  if (v.codec == FieldCodec::kRaw) return v.data + plane * bytes;
  // 16 bytes of slack: the remap reads 8-bit rows 16 bytes at a time.
  if (scratch->size() < bytes + 16) scratch->resize(bytes + 16);
  const uint64_t first = static_cast<uint64_t>(plane) * in_h;
  runs->SkipTo(first + static_cast<uint64_t>(std::max(lo, 0)));
  for (int y = lo; y <= hi; ++y) runs->Read(scratch->data() + static_cast<size_t>(y) * in_w);
  return scratch->data();
}

MaskRleRows RunsOf(const FieldView& v) {
  uint64_t width = v.shape.empty() ? 0 : v.shape.back();
  return {std::string_view(reinterpret_cast<const char*>(v.data), v.size), width};
}

// A run-length "|u1" plane straight into dst, for a crop (no window
// padding): each output row is its source row's runs, each a memset over
// the outputs whose source column lies in it (xs runs one way, or the
// other when mirrored); a row sampling the same source row as the one
// before is a copy of it. A flat mask is a few memsets a row, where a
// decode and a gather touch every byte twice.
void RenderRunsInto(MaskRleRows* runs, uint64_t first_row, int in_w, const std::vector<int>& ys,
                    const std::vector<int>& xs, uint8_t* dst) {
  const size_t n = xs.size();
  const bool mirror = n > 1 && xs.front() > xs.back();
  // before[c]: how many outputs (from the low-column end) sample a source
  // column below c; a run [start, end) then fills outputs [before[start],
  // before[end]) in that order, without a look at each.
  thread_local std::vector<uint32_t> before;
  before.resize(static_cast<size_t>(in_w) + 1);
  size_t j = 0;
  for (int c = 0; c <= in_w; ++c) {
    while (j < n && xs[mirror ? n - 1 - j : j] < c) ++j;
    before[static_cast<size_t>(c)] = static_cast<uint32_t>(j);
  }
  for (size_t y = 0; y < ys.size(); ++y) {
    uint8_t* out = dst + y * n;
    if (y > 0 && ys[y] == ys[y - 1]) {
      std::memcpy(out, out - n, n);
      continue;
    }
    runs->SkipTo(first_row + static_cast<uint64_t>(ys[y]));
    runs->ReadRuns([&](uint8_t v, uint64_t start, uint64_t len) {
      const size_t from = before[start], to = before[start + len];
      if (to > from) std::memset(out + (mirror ? n - to : from), v, to - from);
    });
  }
}

Status RenderMask(const FieldView& v, const CropBox& box, int in_h, int in_w, int out_h, int out_w,
                  uint8_t* into, Field* out) {
  int elem = v.dtype == "|u1" ? 1 : v.dtype == "<u2" ? 2 : 0;
  if (elem == 0 || v.shape.size() != 2 || v.shape[0] != static_cast<uint64_t>(in_h) ||
      v.shape[1] != static_cast<uint64_t>(in_w))
    return Status::InvalidArgument("mask '" + std::string(v.name) + "' is " + std::string(v.dtype) +
                                   " " + Dims(v.shape) + ", its image is (" + std::to_string(in_h) +
                                   "," + std::to_string(in_w) + ")");
  thread_local std::vector<int> ys, xs;
  MaskIndex(box, in_h, in_w, out_h, out_w, &ys, &xs);
  out->dtype = v.dtype;
  out->shape = {static_cast<uint64_t>(out_h), static_cast<uint64_t>(out_w)};
  uint8_t* dst = into;
  if (into == nullptr) {
    out->data.resize(static_cast<size_t>(out_h) * out_w * elem);
    dst = reinterpret_cast<uint8_t*>(out->data.data());
  } else {
    out->data.clear();
  }
  size_t stride = static_cast<size_t>(in_w) * elem;
  MaskRleRows runs = RunsOf(v);
  if (v.codec != FieldCodec::kRaw && !box.windowed()) {
    RenderRunsInto(&runs, 0, in_w, ys, xs, dst);
    return Status::OK();
  }
  int lo = 0, hi = -1;
  if (v.codec != FieldCodec::kRaw) RowSpan(ys, &lo, &hi);
  thread_local std::vector<uint8_t> rows;
  const uint8_t* src = PlaneRows(v, &runs, 0, in_h, in_w, lo, hi, &rows);
  if (box.windowed())
    RemapNearestPadded(src, stride, elem, ys, xs, box.mask_fill, dst);
  else
    RemapNearest(src, stride, elem, ys, xs, dst);
  return Status::OK();
}

// Instance masks "|u1" (K,H,W): each kept box's plane rendered as a mask
// is, in the kept boxes' order (all planes when there are no boxes). A
// scale-jitter window's padding is 0: no instance is there.
Status RenderInstanceMasks(const FieldView& v, const CropBox& box, int in_h, int in_w, int out_h,
                           int out_w, const FieldView* boxes, const std::vector<size_t>& kept,
                           Field* out) {
  if (v.dtype != "|u1" || v.shape.size() != 3 || v.shape[1] != static_cast<uint64_t>(in_h) ||
      v.shape[2] != static_cast<uint64_t>(in_w) ||
      (boxes != nullptr && v.shape[0] != boxes->shape[0]))
    return Status::InvalidArgument(
        "instance_masks '" + std::string(v.name) + "' are " + std::string(v.dtype) + " " +
        Dims(v.shape) + ", not |u1 (K," + std::to_string(in_h) + "," + std::to_string(in_w) + ")" +
        (boxes != nullptr ? " for " + std::to_string(boxes->shape[0]) + " boxes" : ""));
  thread_local std::vector<int> ys, xs;
  MaskIndex(box, in_h, in_w, out_h, out_w, &ys, &xs);
  const size_t n = boxes != nullptr ? kept.size() : v.shape[0];
  const size_t out_plane = static_cast<size_t>(out_h) * out_w;
  out->dtype = "|u1";
  out->shape = {n, static_cast<uint64_t>(out_h), static_cast<uint64_t>(out_w)};
  out->data.resize(n * out_plane);
  int lo = 0, hi = -1;
  if (v.codec != FieldCodec::kRaw) RowSpan(ys, &lo, &hi);
  thread_local std::vector<uint8_t> rows;
  MaskRleRows runs = RunsOf(v);
  for (size_t k = 0; k < n; ++k) {
    const size_t plane = boxes != nullptr ? kept[k] : k;
    uint8_t* dst = reinterpret_cast<uint8_t*>(out->data.data()) + k * out_plane;
    if (v.codec != FieldCodec::kRaw && !box.windowed()) {
      RenderRunsInto(&runs, static_cast<uint64_t>(plane) * in_h, in_w, ys, xs, dst);
      continue;
    }
    const uint8_t* src = PlaneRows(v, &runs, plane, in_h, in_w, lo, hi, &rows);
    if (box.windowed())
      RemapNearestPadded(src, static_cast<size_t>(in_w), 1, ys, xs, 0, dst);
    else
      RemapNearest(src, static_cast<size_t>(in_w), 1, ys, xs, dst);
  }
  return Status::OK();
}

Status RenderBoxes(const FieldView& v, const CropBox& box, int in_h, int in_w, int out_h, int out_w,
                   double min_visible, Field* out, std::vector<size_t>* kept) {
  if (v.dtype != "<f4" || v.shape.size() != 2 || v.shape[1] != 4)
    return Status::InvalidArgument("boxes '" + std::string(v.name) + "' are " +
                                   std::string(v.dtype) + " " + Dims(v.shape) + ", not <f4 (K,4)");
  BoxMap m;
  if (box.windowed()) {  // resized whole, then the window: a shift in resized pixels
    m.sx = static_cast<double>(box.resize_w) / in_w;
    m.sy = static_cast<double>(box.resize_h) / in_h;
    m.bx = -box.left;
    m.by = -box.top;
  } else {
    m.sx = static_cast<double>(out_w) / box.width;
    m.sy = static_cast<double>(out_h) / box.height;
    m.bx = -box.left * m.sx;
    m.by = -box.top * m.sy;
  }
  m.width = out_w;
  m.height = out_h;
  m.flip = box.flip;
  m.min_visible = min_visible;
  thread_local std::vector<float> boxes;
  MapBoxes(v.data, v.shape[0], m, &boxes, kept);
  out->dtype = "<f4";
  out->shape = {kept->size(), 4};
  out->data.assign(reinterpret_cast<const char*>(boxes.data()), boxes.size() * sizeof(float));
  return Status::OK();
}

void Copy(const FieldView& v, Field* out) {
  out->dtype.assign(v.dtype);
  out->shape = v.shape;
  if (v.size == 0) return out->data.clear();  // an empty field may have no data pointer
  out->data.assign(reinterpret_cast<const char*>(v.data), v.size);
}

}  // namespace

Status RenderFields(const std::vector<FieldView>& in, const CropBox& box, int in_h, int in_w,
                    int out_h, int out_w, double min_box_visible, std::vector<Field>* out,
                    const std::vector<uint8_t*>* into) {
  if (out_h <= 0 || out_w <= 0) return Status::InvalidArgument("an empty output");
  if (box.windowed() ? box.resize_w <= 0 || box.height != out_h || box.width != out_w
                     : box.top < 0 || box.left < 0 || box.height <= 0 || box.width <= 0 ||
                           box.top + box.height > in_h || box.left + box.width > in_w)
    return Status::InvalidArgument(box.windowed() ? "a scale-jitter window must be the output size"
                                                  : "crop outside the image");
  out->resize(in.size());
  thread_local std::vector<size_t> kept;
  const FieldView* boxes = nullptr;
  for (size_t i = 0; i < in.size(); ++i) {
    (*out)[i].name.assign(in[i].name);
    (*out)[i].kind = in[i].kind;
    if (in[i].kind != FieldKind::kBoxes) continue;
    if (boxes != nullptr)
      return Status::InvalidArgument("two boxes fields: '" + std::string(boxes->name) + "' and '" +
                                     std::string(in[i].name) + "'");
    boxes = &in[i];
    SSDFEED_RETURN_IF_ERROR(
        RenderBoxes(in[i], box, in_h, in_w, out_h, out_w, min_box_visible, &(*out)[i], &kept));
  }
  for (size_t i = 0; i < in.size(); ++i) {
    const FieldView& v = in[i];
    Field& f = (*out)[i];
    if (v.kind == FieldKind::kMask) {
      uint8_t* dst = into != nullptr && i < into->size() ? (*into)[i] : nullptr;
      SSDFEED_RETURN_IF_ERROR(RenderMask(v, box, in_h, in_w, out_h, out_w, dst, &f));
    } else if (v.kind == FieldKind::kInstanceMasks) {
      SSDFEED_RETURN_IF_ERROR(
          RenderInstanceMasks(v, box, in_h, in_w, out_h, out_w, boxes, kept, &f));
    } else if ((v.kind == FieldKind::kClasses || v.kind == FieldKind::kBoxFloats) &&
               boxes != nullptr) {
      // One value per box (classes int64, box_floats float32): kept with it.
      const bool floats = v.kind == FieldKind::kBoxFloats;
      const size_t row = floats ? 4 : 8;
      const char* dtype = floats ? "<f4" : "<i8";
      if (v.dtype != dtype || v.shape.size() != 1 || v.shape[0] != boxes->shape[0])
        return Status::InvalidArgument(std::string(floats ? "box_floats '" : "classes '") +
                                       std::string(v.name) + "' are " + std::string(v.dtype) + " " +
                                       Dims(v.shape) + " for " + std::to_string(boxes->shape[0]) +
                                       " boxes");
      f.dtype = dtype;
      f.shape = {kept.size()};
      f.data.resize(kept.size() * row);
      for (size_t k = 0; k < kept.size(); ++k)
        std::memcpy(f.data.data() + k * row, v.data + kept[k] * row, row);
    } else if (v.kind != FieldKind::kBoxes) {
      Copy(v, &f);
    }
  }
  return Status::OK();
}

}  // namespace ssdfeed
