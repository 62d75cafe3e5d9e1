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

// One sample's rendered fields, kept in its slot until the batch is whole.
struct StagedFields {
  uint64_t id = 0;  // the sample rendered here (a skip may have replaced the planned one)
  std::vector<Field> fields;
  std::vector<FieldView> views;  // the renderer's scratch: the record's fields
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
Status CollateFields(const std::vector<const StagedFields*>& samples, BatchBuffer* buf,
                     const DescribeSample& describe);

// The name of the per-sample box count that goes with boxes field `boxes`:
// "num_boxes" for "boxes", else "num_" + name.
std::string BoxCountName(const std::string& boxes);

}  // namespace ssdfeed
