#include "pipeline/sample_renderer.h"

#include <cstring>
#include <string>
#include <utility>

#include "image/augment.h"
#include "image/field_augment.h"
#include "image/flip.h"
#include "image/pixel_codec.h"
#include "image/yuv420_crop.h"
#include "ssdfeed/cached_fields.h"
#include "util/stage_clock.h"

namespace ssdfeed {

SampleRenderer::SampleRenderer(const PrepareSpec& prepare, const AugmentSpec& augment,
                               const OutputSpec& output, uint64_t seed, bool image_less)
    : augment_(augment), output_(output), seed_(seed), image_less_(image_less) {
  if (image_less_) {  // every sample 0x0x0: a fixed shape of no bytes
    channels_ = out_h_ = out_w_ = 0;
    fixed_ = true;
    return;
  }
  SampleShape s = ServedSampleShape(prepare, augment);
  channels_ = s.channels;
  out_h_ = s.height;
  out_w_ = s.width;
  fixed_ = s.fixed();
}

size_t SampleRenderer::sample_bytes(int h, int w) const {
  return static_cast<size_t>(h) * w * channels_ * DTypeSize(output_.dtype);
}

std::vector<MaskPlane> SampleRenderer::MaskPlanes(const std::vector<FieldSpec>& fields) const {
  std::vector<MaskPlane> planes;
  if (!fixed_ || image_less_) return planes;
  for (const FieldSpec& f : fields) {
    if (f.kind != FieldKind::kMask) continue;
    planes.emplace_back();
    planes.back().name = f.name;
    planes.back().sample_bytes = static_cast<size_t>(out_h_) * out_w_;
  }
  return planes;
}

namespace {

// The pixels of cs: its own, or for a sample served coded (a yuv420 one as
// its planes: SampleFetcher::ServeYuv420Planes) its decode, in this
// thread's buffer until the next call.
Result<const uint8_t*> PixelsOf(const CachedSample& cs) {
  if (cs.pixels != nullptr || cs.bytes() == 0) return cs.pixels;
  thread_local std::vector<uint8_t> pixels;
  pixels.resize(cs.bytes());
  MarkStage(Tmr::kAugment);  // the render so far; the decode is record_decode's, as in a read
  SSDFEED_RETURN_IF_ERROR(DecodePixels(cs.codec, cs.stored, cs.height, cs.width, cs.channels,
                                       pixels.data(), ThisThreadCodecScratch()));
  MarkStage(Tmr::kRecordDecode);
  return pixels.data();
}

}  // namespace

Status SampleRenderer::Render(const CachedSample& cs, uint64_t epoch, uint64_t id, BatchBuffer* buf,
                              size_t pos, Image* staging, std::vector<uint8_t>* scratch,
                              StagedFields* fields, std::vector<MaskPlane>* planes) const {
  buf->labels[pos] = cs.label;
  if (fields != nullptr) fields->id = id;
  if (image_less_) {
    if (cs.bytes() != 0)
      return Status::Corruption("a sample of a source without images has " +
                                std::to_string(cs.height) + "x" + std::to_string(cs.width) + "x" +
                                std::to_string(cs.channels) + " pixels");
    if (fields == nullptr) return Status::OK();
    return RenderSampleFields(cs, {0, 0, 0, 0, false}, 0, 0, fields);
  }
  // Either path sizes the batch by channels_: another count would overrun it.
  if (cs.channels != channels_)
    return Status::Corruption("prepared sample has " + std::to_string(cs.channels) +
                              " channels, the batch " + std::to_string(channels_));
  CropBox box{0, 0, cs.height, cs.width, false};
  if (!fixed_) {  // served as prepared (or flipped); shapes checked in RenderStaged
    if (augment_.enabled)
      box = SampleCrop(augment_, cs.height, cs.width, AugmentKey(seed_, epoch, id));
    if (fields != nullptr)
      SSDFEED_RETURN_IF_ERROR(RenderSampleFields(cs, box, cs.height, cs.width, fields));
    const uint8_t* px = nullptr;
    SSDFEED_ASSIGN_OR_RETURN(px, PixelsOf(cs));
    staging->Reset(cs.height, cs.width, cs.channels);
    if (box.flip)
      FlipHorizontalInto(px, staging->pixels.data(), cs.height, cs.width, cs.channels);
    else
      std::memcpy(staging->pixels.data(), px, staging->bytes());
    return Status::OK();
  }
  if (augment_.enabled && augment_.kind == AugmentKind::kFlip &&
      (cs.height != out_h_ || cs.width != out_w_)) {
    return Status::InvalidArgument("prepared size " + std::to_string(cs.height) + "x" +
                                   std::to_string(cs.width) + " differs from the batch's");
  }
  if (augment_.enabled) {
    box = SampleCrop(augment_, cs.height, cs.width, AugmentKey(seed_, epoch, id));
  } else if (cs.height != out_h_ || cs.width != out_w_) {
    return Status::InvalidArgument("prepared size " + std::to_string(cs.height) + "x" +
                                   std::to_string(cs.width) + " differs from the batch's");
  }
  if (fields != nullptr)
    SSDFEED_RETURN_IF_ERROR(RenderSampleFields(cs, box, out_h_, out_w_, fields, planes, pos));
  void* dst = buf->images.data() + pos * sample_bytes();
  // A crop of yuv420's planes converts only the output to RGB.
  if (cs.pixels == nullptr && cs.codec == RecordCodec::kYuv420 &&
      Yuv420CropApplies(cs.height, cs.width, cs.channels, box, out_h_, out_w_))
    return RenderYuv420Sample(cs.stored, cs.height, cs.width, box, out_h_, out_w_, output_, dst,
                              scratch);
  const uint8_t* px = nullptr;
  SSDFEED_ASSIGN_OR_RETURN(px, PixelsOf(cs));
  return RenderSample({px, cs.height, cs.width, cs.channels}, box, out_h_, out_w_, output_, dst,
                      scratch);
}

namespace {

// A view into a pooled Field, reusing the storage it already has; a
// run-length mask decoded.
void CopyView(const FieldView& v, Field* f) {
  f->name.assign(v.name);
  f->kind = v.kind;
  f->dtype.assign(v.dtype);
  f->shape = v.shape;
  if (v.codec == FieldCodec::kRaw)
    f->data.assign(reinterpret_cast<const char*>(v.data), v.size);
  else
    FieldData(v, &f->data);  // not raw: decoded into f->data
}

// Where each of `in`'s fields goes when rendered out_h x out_w: (*into)[i]
// into a plane of *planes at pos for a "|u1" mask of the image's size
// (in_h x in_w) that a plane is named for, else null (its Field's data).
// placed[i]: that plane's index, or -1.
void PlaceMasks(const std::vector<FieldView>& in, int in_h, int in_w,
                std::vector<MaskPlane>* planes, size_t pos, std::vector<uint8_t*>* into,
                std::vector<int>* placed) {
  into->assign(in.size(), nullptr);
  placed->assign(in.size(), -1);
  if (planes == nullptr) return;
  for (size_t i = 0; i < in.size(); ++i) {
    const FieldView& v = in[i];
    if (v.kind != FieldKind::kMask || v.dtype != "|u1" || v.shape.size() != 2 ||
        v.shape[0] != static_cast<uint64_t>(in_h) || v.shape[1] != static_cast<uint64_t>(in_w))
      continue;  // rendered (or refused) as any other field
    for (size_t k = 0; k < planes->size(); ++k) {
      MaskPlane& p = (*planes)[k];
      if (p.name != v.name || p.data.size() < (pos + 1) * p.sample_bytes) continue;
      (*into)[i] = p.data.data() + pos * p.sample_bytes;
      (*placed)[i] = static_cast<int>(k);
    }
  }
}

}  // namespace

Status SampleRenderer::RenderSampleFields(const CachedSample& cs, const CropBox& box, int out_h,
                                          int out_w, StagedFields* fields,
                                          std::vector<MaskPlane>* planes, size_t pos) const {
  SSDFEED_RETURN_IF_ERROR(cs.ParsedFields(&fields->views));
  const std::vector<FieldView>& in = fields->views;
  thread_local std::vector<uint8_t*> into;
  PlaceMasks(in, cs.height, cs.width, planes, pos, &into, &fields->placed);
  bool identity = box.top == 0 && box.left == 0 && box.height == cs.height &&
                  box.width == cs.width && !box.flip && out_h == cs.height && out_w == cs.width;
  if (!identity)
    return RenderFields(in, box, cs.height, cs.width, out_h, out_w, augment_.min_box_visible,
                        &fields->fields, &into);
  // Served as cached: a copy, into storage the slot already has.
  fields->fields.resize(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (into[i] == nullptr) {
      CopyView(in[i], &fields->fields[i]);
      continue;
    }
    FieldView header = in[i];
    header.size = 0;
    header.codec = FieldCodec::kRaw;
    CopyView(header, &fields->fields[i]);
    thread_local std::string decoded;
    std::string_view raw = FieldData(in[i], &decoded);
    std::memcpy(into[i], raw.data(), raw.size());
  }
  return Status::OK();
}

Status SampleRenderer::RenderStaged(const std::vector<const Image*>& ims, BatchBuffer* buf,
                                    int* out_h, int* out_w) const {
  int h = ims.empty() ? 0 : ims[0]->height, w = ims.empty() ? 0 : ims[0]->width;
  for (const Image* im : ims) {
    if (im->height != h || im->width != w)
      return Status::InvalidArgument(
          "samples of unequal shape in one batch (" + std::to_string(h) + "x" + std::to_string(w) +
          " and " + std::to_string(im->height) + "x" + std::to_string(im->width) +
          "): set Prepare(resize=...) or center_crop, or an augment, or batch_size=1");
  }
  *out_h = h;
  *out_w = w;
  size_t sb = sample_bytes(h, w);
  buf->images.resize(sb * ims.size());
  std::vector<uint8_t> render;
  for (size_t i = 0; i < ims.size(); ++i) {
    PixelsView px{ims[i]->pixels.data(), ims[i]->height, ims[i]->width, ims[i]->channels};
    SSDFEED_RETURN_IF_ERROR(
        RenderSample(px, {0, 0, h, w, false}, h, w, output_, buf->images.data() + i * sb, &render));
  }
  return Status::OK();
}

void SampleRenderer::Fill(std::shared_ptr<BatchBuffer> buf, size_t n, int h, int w,
                          Batch* out) const {
  out->buffer = std::move(buf);
  out->size = n;
  out->dtype = output_.dtype;
  bool nchw = output_.layout == Layout::kNCHW;
  size_t H = static_cast<size_t>(h), W = static_cast<size_t>(w), C = static_cast<size_t>(channels_);
  out->shape = nchw ? std::array<size_t, 4>{n, C, H, W} : std::array<size_t, 4>{n, H, W, C};
}

}  // namespace ssdfeed
