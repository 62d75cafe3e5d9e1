#include "pipeline/batch_fields.h"

#include <algorithm>
#include <cstring>

namespace ssdfeed {

namespace {

using Rows = std::vector<const Field*>;  // one field of every sample, in batch order

// Where sample s holds field `name` of kind `kind`; nullptr if it has none.
const Field* Find(const StagedFields& s, size_t hint, const Field& like) {
  const std::vector<Field>& f = s.fields;
  if (hint < f.size() && f[hint].name == like.name) return &f[hint];
  for (const Field& x : f)
    if (x.name == like.name) return &x;
  return nullptr;
}

std::string Named(const DescribeSample& describe, uint64_t id) {
  return describe ? describe(id) : "sample " + std::to_string(id);
}

// rows[i][j]: field i of the first sample's schema in sample j. The
// schema is the first sample's: any sample with a field missing, extra or
// of another kind is an error naming both.
Status Align(const std::vector<const StagedFields*>& samples, const DescribeSample& describe,
             std::vector<Rows>* rows) {
  const StagedFields& first = *samples[0];
  rows->assign(first.fields.size(), Rows(samples.size(), nullptr));
  for (size_t j = 0; j < samples.size(); ++j) {
    const StagedFields& s = *samples[j];
    for (size_t i = 0; i < first.fields.size(); ++i) {
      const Field& want = first.fields[i];
      const Field* got = Find(s, i, want);
      if (got == nullptr)
        return Status::InvalidArgument(Named(describe, s.id) + ": has no field '" + want.name +
                                       "', which " + Named(describe, first.id) +
                                       " of the same batch has");
      if (got->kind != want.kind)
        return Status::InvalidArgument(Named(describe, s.id) + ": field '" + want.name +
                                       "' is of another kind than in " + Named(describe, first.id));
      (*rows)[i][j] = got;
    }
    if (s.fields.size() != first.fields.size()) {
      for (const Field& f : s.fields)
        if (Find(first, 0, f) == nullptr)
          return Status::InvalidArgument(Named(describe, s.id) + ": has a field '" + f.name +
                                         "' that " + Named(describe, first.id) +
                                         " of the same batch lacks");
      return Status::InvalidArgument(Named(describe, s.id) + ": field names repeat");
    }
  }
  return Status::OK();
}

bool SameLayout(const Rows& r) {
  for (const Field* f : r)
    if (f->dtype != r[0]->dtype || f->shape != r[0]->shape || f->data.size() != r[0]->data.size())
      return false;
  return true;
}

void Stack(const Rows& r, BatchField* out) {
  size_t each = r[0]->data.size();
  out->stacked = true;
  out->dtype = r[0]->dtype;
  out->shape.assign(1, r.size());
  out->shape.insert(out->shape.end(), r[0]->shape.begin(), r[0]->shape.end());
  out->data.resize(each * r.size());
  for (size_t j = 0; j < r.size(); ++j)
    if (each > 0) std::memcpy(out->data.data() + j * each, r[j]->data.data(), each);
  out->items.clear();
}

void Items(const Rows& r, BatchField* out) {
  out->stacked = false;
  out->dtype = r[0]->dtype;
  out->shape.assign(1, r.size());
  out->data.clear();
  out->items.resize(r.size());
  for (size_t j = 0; j < r.size(); ++j) {
    Field& it = out->items[j];
    it.name = r[j]->name;
    it.kind = r[j]->kind;
    it.dtype = r[j]->dtype;
    it.shape = r[j]->shape;
    it.data.assign(r[j]->data);  // keeps the pooled item's capacity
  }
}

// Boxes "<f4" (K,4), classes "<i8" (K,) or box_floats "<f4" (K,): each
// sample's K rows, then padding up to the batch's most rows (classes -1,
// the others 0).
Status Pad(const Rows& r, const DescribeSample& describe, const std::vector<uint64_t>& ids,
           BatchField* out) {
  const bool boxes = r[0]->kind == FieldKind::kBoxes;
  const bool floats = r[0]->kind == FieldKind::kBoxFloats;
  const char* dtype = boxes || floats ? "<f4" : "<i8";
  const size_t row = boxes ? 16 : floats ? 4 : 8;
  uint64_t most = 0;
  for (size_t j = 0; j < r.size(); ++j) {
    const Field& f = *r[j];
    bool ok = f.dtype == dtype && f.shape.size() == (boxes ? 2u : 1u) &&
              (!boxes || f.shape[1] == 4) && f.data.size() == f.shape[0] * row;
    if (!ok)
      return Status::Corruption(Named(describe, ids[j]) + ": field '" + f.name + "' is not " +
                                (boxes    ? "\"<f4\" (K,4) boxes"
                                 : floats ? "\"<f4\" (K,) box_floats"
                                          : "\"<i8\" (K,) classes"));
    most = std::max(most, f.shape[0]);
  }
  out->stacked = true;
  out->dtype = dtype;
  out->shape =
      boxes ? std::vector<uint64_t>{r.size(), most, 4} : std::vector<uint64_t>{r.size(), most};
  out->data.resize(r.size() * most * row);
  out->items.clear();
  for (size_t j = 0; j < r.size(); ++j) {
    uint8_t* dst = out->data.data() + j * most * row;
    size_t have = r[j]->data.size();
    if (have > 0) std::memcpy(dst, r[j]->data.data(), have);
    if (boxes || floats) {
      std::memset(dst + have, 0, most * row - have);
    } else {
      std::fill(reinterpret_cast<int64_t*>(dst + have),
                reinterpret_cast<int64_t*>(dst + most * row), int64_t{-1});
    }
  }
  return Status::OK();
}

// Instance masks "|u1" (K,H,W) of one H,W: each sample's K planes, then
// zero planes up to the batch's most (B,Kmax,H,W), as boxes are padded; the
// batch's num_boxes tells the real ones. False (nothing written) when the
// samples' planes differ in size: the batch then lists them.
bool PadPlanes(const Rows& r, BatchField* out) {
  const Field& first = *r[0];
  if (first.shape.size() != 3) return false;
  uint64_t most = 0;
  for (const Field* f : r) {
    if (f->dtype != "|u1" || f->shape.size() != 3 || f->shape[1] != first.shape[1] ||
        f->shape[2] != first.shape[2] || f->data.size() != f->shape[0] * f->shape[1] * f->shape[2])
      return false;
    most = std::max(most, f->shape[0]);
  }
  const size_t plane = first.shape[1] * first.shape[2];
  out->stacked = true;
  out->dtype = "|u1";
  out->shape = {r.size(), most, first.shape[1], first.shape[2]};
  out->data.resize(r.size() * most * plane);
  out->items.clear();
  for (size_t j = 0; j < r.size(); ++j) {
    uint8_t* dst = out->data.data() + j * most * plane;
    size_t have = r[j]->data.size();
    if (have > 0) std::memcpy(dst, r[j]->data.data(), have);
    std::memset(dst + have, 0, most * plane - have);
  }
  return true;
}

void Counts(const Rows& boxes, BatchField* out) {
  out->name = BoxCountName(boxes[0]->name);
  out->kind = FieldKind::kLabel;
  out->stacked = true;
  out->dtype = "<i8";
  out->shape.assign(1, boxes.size());
  out->data.resize(boxes.size() * sizeof(int64_t));
  out->items.clear();
  for (size_t j = 0; j < boxes.size(); ++j) {
    auto k = static_cast<int64_t>(boxes[j]->shape[0]);
    std::memcpy(out->data.data() + j * sizeof(int64_t), &k, sizeof(k));
  }
}

// The plane sample s placed field f in, or -1.
int PlaneOf(const StagedFields& s, const Field* f) {
  size_t i = static_cast<size_t>(f - s.fields.data());
  return i < s.placed.size() ? s.placed[i] : -1;
}

// The batch's mask of row r when every sample placed it in one plane: that
// plane's storage, swapped in. False when the row was not placed.
bool TakePlane(const Rows& r, const std::vector<const StagedFields*>& samples,
               std::vector<MaskPlane>* planes, BatchField* out) {
  if (planes == nullptr) return false;
  int k = PlaneOf(*samples[0], r[0]);
  if (k < 0) return false;
  MaskPlane& p = (*planes)[static_cast<size_t>(k)];
  out->stacked = true;
  out->dtype = r[0]->dtype;
  out->shape.assign(1, r.size());
  out->shape.insert(out->shape.end(), r[0]->shape.begin(), r[0]->shape.end());
  out->data.swap(p.data);
  out->data.resize(r.size() * p.sample_bytes);  // a short last batch: shrinks, no copy
  out->items.clear();
  return true;
}

}  // namespace

void UnplaceMasks(const std::vector<StagedFields*>& samples, size_t first,
                  const std::vector<MaskPlane>& planes, bool all) {
  for (size_t k = 0; k < planes.size(); ++k) {
    bool whole = !all;
    for (const StagedFields* s : samples)
      whole = whole &&
              std::find(s->placed.begin(), s->placed.end(), static_cast<int>(k)) != s->placed.end();
    if (whole) continue;
    const MaskPlane& p = planes[k];
    for (size_t j = 0; j < samples.size(); ++j) {
      StagedFields& s = *samples[j];
      for (size_t i = 0; i < s.placed.size(); ++i) {
        if (s.placed[i] != static_cast<int>(k)) continue;
        const uint8_t* from = p.data.data() + (first + j) * p.sample_bytes;
        s.fields[i].data.assign(reinterpret_cast<const char*>(from), p.sample_bytes);
        s.placed[i] = -1;
      }
    }
  }
}

std::string BoxCountName(const std::string& boxes) {
  return boxes == "boxes" ? "num_boxes" : "num_" + boxes;
}

Status CollateFields(const std::vector<const StagedFields*>& samples, BatchBuffer* buf,
                     const DescribeSample& describe, std::vector<MaskPlane>* planes) {
  if (samples.empty() || samples[0]->fields.empty()) {
    bool none = std::all_of(samples.begin(), samples.end(),
                            [](const StagedFields* s) { return s->fields.empty(); });
    if (!none) {
      auto it = std::find_if(samples.begin(), samples.end(),
                             [](const StagedFields* s) { return !s->fields.empty(); });
      return Status::InvalidArgument(Named(describe, (*it)->id) + ": has a field '" +
                                     (*it)->fields[0].name + "' that " +
                                     Named(describe, samples[0]->id) + " of the same batch lacks");
    }
    buf->fields.clear();
    return Status::OK();
  }
  std::vector<Rows> rows;
  SSDFEED_RETURN_IF_ERROR(Align(samples, describe, &rows));
  std::vector<uint64_t> ids;
  for (const StagedFields* s : samples) ids.push_back(s->id);
  size_t count = rows.size();
  for (const Rows& r : rows) count += r[0]->kind == FieldKind::kBoxes ? 1 : 0;
  buf->fields.resize(count);  // a pooled buffer keeps each field's storage
  size_t o = 0;
  for (const Rows& r : rows) {
    BatchField& out = buf->fields[o++];
    out.name = r[0]->name;
    out.kind = r[0]->kind;
    if (out.kind == FieldKind::kBoxes || out.kind == FieldKind::kClasses ||
        out.kind == FieldKind::kBoxFloats) {
      SSDFEED_RETURN_IF_ERROR(Pad(r, describe, ids, &out));
      if (out.kind == FieldKind::kBoxes) Counts(r, &buf->fields[o++]);
    } else if (TakePlane(r, samples, planes, &out)) {
      continue;
    } else if (out.kind == FieldKind::kInstanceMasks) {
      if (!PadPlanes(r, &out)) Items(r, &out);
    } else if (out.kind != FieldKind::kBytes && SameLayout(r)) {
      Stack(r, &out);
    } else {
      Items(r, &out);
    }
  }
  return Status::OK();
}

}  // namespace ssdfeed

namespace ssdfeed {

bool IsClassicSchema(const std::vector<FieldSpec>& fields) {
  return fields.size() == 2 && fields[0].kind == FieldKind::kImage &&
         fields[1].kind == FieldKind::kLabel;
}

bool IsImageLess(const Source& source) {
  for (const FieldSpec& f : source.fields())
    if (f.kind == FieldKind::kImage) return false;
  return true;
}

}  // namespace ssdfeed
