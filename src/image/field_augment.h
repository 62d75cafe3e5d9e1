// Augmentation of a sample's fields with its image: the crop and flip of
// RenderSample (image/augment.h) applied to masks (nearest neighbour) and
// boxes (shifted, scaled, clipped, dropped with their classes when mostly
// cut away); every other field passed through.
#pragma once

#include <vector>

#include "image/augment.h"
#include "ssdfeed/sample.h"

namespace ssdfeed {

// in: the prepared fields of a sample whose image is in_h x in_w; box: its
// crop or window (SampleCrop); the image is rendered out_h x out_w. A
// window's padding is box.mask_fill in masks; boxes lie on the image. Masks must be
// in_h x in_w ("|u1" or "<u2"), else InvalidArgument; the caller names the
// sample. *out is resized to in.size(); its strings keep their capacity
// from call to call. into (default none): (*into)[i], when given and not
// null for a mask field i, is where that mask's out_h x out_w elements are
// rendered (a batch slot), leaving (*out)[i].data empty; its dtype and shape
// are still set.
Status RenderFields(const std::vector<FieldView>& in, const CropBox& box, int in_h, int in_w,
                    int out_h, int out_w, double min_box_visible, std::vector<Field>* out,
                    const std::vector<uint8_t*>* into = nullptr);

}  // namespace ssdfeed
