// A batch's fields other than images and labels: each sample's rendered
// fields are staged in its batch slot by the worker that rendered it, and
// collated into BatchBuffer::fields once the whole batch is there (by the
// consumer, after the ring says the chunk is done: no worker touches it
// then). The layouts are the ones docs/python.md ("Sample fields") lists.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ssdfeed/loader.h"
#include "ssdfeed/sample.h"
#include "ssdfeed/status.h"

namespace ssdfeed {

// One "|u1" mask field of a fixed-shape batch rendered straight into the
// batch's layout: the worker that renders position pos writes its
// sample_bytes at data + pos * sample_bytes, and CollateFields hands data
// to the batch whole (a swap, no copy). Mask planes are how a mask costs
// about what its bytes do: no staging copy on the worker, no copy on the
// consumer.
struct MaskPlane {
  std::string name;           // the mask field's name
  size_t sample_bytes = 0;    // one sample's mask: height x width of the batch
  std::vector<uint8_t> data;  // batch_size x sample_bytes
};

// One sample's rendered fields, kept in its slot until the batch is whole.
struct StagedFields {
  uint64_t id = 0;  // the sample rendered here (a skip may have replaced the planned one)
  std::vector<Field> fields;
  std::vector<FieldView> views;  // the renderer's scratch: the record's fields
  // placed[i] >= 0: fields[i] was rendered into MaskPlane placed[i] at this
  // sample's position; fields[i].data is then empty (its dtype and shape
  // are set). Empty or -1: fields[i].data holds it.
  std::vector<int> placed;
};

// Names a sample for errors ("tar:/d/a.tar: member 0007.jpg").
using DescribeSample = std::function<std::string(uint64_t id)>;

// Collates the staged fields of one batch into buf->fields, reusing the
// storage a pooled buffer already has. Every sample must have the first
// one's fields (names and kinds); else an error naming the field and the
// sample. Stacks a field when every sample's has one dtype and shape;
// pads boxes (N,B,4) with 0 and classes (N,B) with -1 to the batch's most
// boxes B, with "num_boxes" (N,) after boxes; bytes, and other fields whose
// shapes differ, become items (one Field per sample).
//
// planes: the chunk's mask planes, samples[j] at position j. A mask every
// sample placed in one plane becomes the batch's field by a swap with the
// plane's storage (the plane gets the pooled field's, for the next chunk).
// Call UnplaceMasks first for any other arrangement.
Status CollateFields(const std::vector<const StagedFields*>& samples, BatchBuffer* buf,
                     const DescribeSample& describe, std::vector<MaskPlane>* planes = nullptr);

// Copies the placed masks of samples (samples[j] at position first + j of
// planes) into their fields' data, where not all samples placed a plane (a
// batch with a sample whose mask was not "|u1" or not the batch's size), or
// every one when all is set (a batch gathered across chunks).
void UnplaceMasks(const std::vector<StagedFields*>& samples, size_t first,
                  const std::vector<MaskPlane>& planes, bool all);

// The name of the per-sample box count that goes with boxes field `boxes`:
// "num_boxes" for "boxes", else "num_" + name.
std::string BoxCountName(const std::string& boxes);

}  // namespace ssdfeed
