// Turns cached samples into a batch: each sample's augmentation (a crop
// and flip keyed by (seed, epoch, id), so output never depends on workers
// or timing), then the output dtype and layout. Errors do not name the
// sample: the caller knows its source and adds that.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "image/augment.h"
#include "pipeline/batch_fields.h"
#include "ssdfeed/augment.h"
#include "ssdfeed/cache.h"
#include "ssdfeed/image.h"
#include "ssdfeed/loader.h"
#include "ssdfeed/status.h"

namespace ssdfeed {

class SampleRenderer {
 public:
  // image_less: the source has no image (IsImageLess): samples are their
  // fields only, served as cached, and batches hold no pixels (fixed, 0x0x0).
  SampleRenderer(const PrepareSpec& prepare, const AugmentSpec& augment, const OutputSpec& output,
                 uint64_t seed, bool image_less = false);

  // Every sample comes out height() x width(); else each keeps its
  // prepared shape and a batch is rendered whole by RenderStaged.
  bool fixed() const { return fixed_; }
  int height() const { return out_h_; }
  int width() const { return out_w_; }
  int channels() const { return channels_; }
  size_t sample_bytes(int h, int w) const;
  size_t sample_bytes() const { return sample_bytes(out_h_, out_w_); }

  // The mask planes of a batch of this renderer's samples whose fields are
  // `fields` (the source's): one per mask field when every sample comes out
  // height() x width(), else none. Their data is left empty (BatchRing
  // sizes it per chunk).
  std::vector<MaskPlane> MaskPlanes(const std::vector<FieldSpec>& fields) const;

  // Sample id of epoch, read from the cache as cs, into position pos of
  // buf: rendered there with a fixed shape, else copied into *staging.
  // Its other fields (cs.fields) get the image's crop and flip and go to
  // *fields (when given), for CollateFields at the batch's end; a "|u1"
  // mask named as one of *planes (when given) is rendered straight into
  // that plane at pos instead (StagedFields::placed).
  Status Render(const CachedSample& cs, uint64_t epoch, uint64_t id, BatchBuffer* buf, size_t pos,
                Image* staging, std::vector<uint8_t>* scratch, StagedFields* fields = nullptr,
                std::vector<MaskPlane>* planes = nullptr) const;

  // Without a fixed shape: the staged samples of one batch must agree;
  // renders them (dtype, layout) into buf and gives their shape.
  Status RenderStaged(const std::vector<const Image*>& ims, BatchBuffer* buf, int* out_h,
                      int* out_w) const;

  // Hands n samples of h x w in buf out as a batch, in the output layout.
  void Fill(std::shared_ptr<BatchBuffer> buf, size_t n, int h, int w, Batch* out) const;

 private:
  // The sample's fields under the image's crop box (in_h x in_w -> out_h x out_w).
  // Masks named in *planes go there, at pos.
  Status RenderSampleFields(const CachedSample& cs, const CropBox& box, int out_h, int out_w,
                            StagedFields* fields, std::vector<MaskPlane>* planes = nullptr,
                            size_t pos = 0) const;

  AugmentSpec augment_;
  OutputSpec output_;
  uint64_t seed_;
  int out_h_ = 0, out_w_ = 0, channels_ = 3;
  bool fixed_ = false;
  bool image_less_ = false;
};

}  // namespace ssdfeed
