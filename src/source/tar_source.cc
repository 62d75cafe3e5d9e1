// tar:GLOB — WebDataset shards read with libarchive. Members sharing a key
// (path up to the first '.' of the file name) form a sample: by default the
// image from .jpg/.jpeg/.png, the label from .cls (decimal text). With
// SourceOptions::fields each field is the member whose extension (all after
// the key: "seg.png") is the field's key, or one of its ';'-separated
// alternatives ("jpg;png", as webdataset writes them), and a sample missing
// one is an error naming it. Member names are only ever compared, never
// used as paths on disk; unsafe ones are refused.
#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <cctype>
#include <map>

#include "source/field_specs.h"
#include "source/shard_files.h"
#include "source/shard_index.h"
#include "source/sources.h"

namespace ssdfeed {

namespace {

// Where one field of a sample lies (fields mode).
struct PartRef {
  uint64_t offset = 0;
  uint64_t size = 0;
  int64_t label = 0;  // label fields: parsed while listing
  uint8_t alt = 0;    // which of the key's alternatives matched, for messages
  bool present = false;
};

struct TarSample {
  uint32_t file = 0;
  std::string key;
  uint64_t data_offset = 0;
  uint64_t size = 0;
  int64_t label = -1;
  std::vector<PartRef> parts;  // fields mode: one per field, in order
};

// A requested field with its extensions (lower case, no leading dot).
struct TarField {
  FieldSpec spec;
  std::vector<std::string> exts;
  bool classic_label = false;  // the "label" field: EncodedSample::label
};

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// The extension a field takes when its key is empty.
std::string DefaultExt(const FieldSpec& f) {
  switch (f.kind) {
    case FieldKind::kImage:
      return "jpg;jpeg;png";
    case FieldKind::kMask:
      return "seg.png";
    case FieldKind::kLabel:
      return f.name == "label" ? "cls" : f.name;
    default:
      return f.name;
  }
}

std::vector<TarField> MakeTarFields(const std::vector<FieldSpec>& specs) {
  std::vector<TarField> out;
  bool label_taken = false;
  for (const auto& f : specs) {
    TarField t{f, {}, false};
    std::string keys = Lower(f.key.empty() ? DefaultExt(f) : f.key);
    size_t start = 0;
    while (start <= keys.size()) {
      size_t semi = keys.find(';', start);
      std::string e = keys.substr(start, semi == std::string::npos ? semi : semi - start);
      if (!e.empty() && e[0] == '.') e.erase(0, 1);
      if (!e.empty()) t.exts.push_back(e);
      if (semi == std::string::npos) break;
      start = semi + 1;
    }
    if (f.kind == FieldKind::kLabel && f.name == "label" && !label_taken)
      t.classic_label = label_taken = true;
    out.push_back(std::move(t));
  }
  return out;
}

bool UnsafeName(const std::string& n) {
  if (n.empty() || n[0] == '/') return true;
  size_t start = 0;
  while (start <= n.size()) {
    size_t slash = n.find('/', start);
    std::string part =
        n.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (part == "..") return true;
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return false;
}

// *ext is the type: the part after the last dot, lower case; *full (when
// asked) all after the key ("seg.png"), lower case.
void SplitKey(const std::string& name, std::string* key, std::string* ext,
              std::string* full = nullptr) {
  size_t slash = name.find_last_of('/');
  size_t base = slash == std::string::npos ? 0 : slash + 1;
  size_t dot = name.find('.', base);
  *key = name.substr(0, dot);
  // "k.seg.png" is key "k", extension "seg.png", type "png".
  size_t last = name.find_last_of('.');
  *ext = dot == std::string::npos || last < base ? "" : name.substr(last + 1);
  std::transform(ext->begin(), ext->end(), ext->begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (full != nullptr) *full = dot == std::string::npos ? "" : Lower(name.substr(dot + 1));
}

struct ArchiveCloser {
  void operator()(archive* a) const { archive_read_free(a); }
};

struct Member {
  std::string name;
  uint64_t header_pos;
  uint64_t size;
  std::string small_data;  // contents of .cls members (and label fields')
};

// Feeds libarchive from a RandomAccessFile (a local file or an object in a
// bucket), in large sequential reads; skips only move the position.
struct ArchiveInput {
  const RandomAccessFile* f = nullptr;
  uint64_t size = 0;
  uint64_t pos = 0;
  size_t read_size = 512;  // bytes asked per read (ShardScan::tar_read_size)
  std::string buf;
  Status error;  // why a read failed: reported instead of "bad tar"
};

la_ssize_t ReadInput(archive* a, void* user, const void** out) {
  auto* in = static_cast<ArchiveInput*>(user);
  size_t want = static_cast<size_t>(std::min<uint64_t>(in->read_size, in->size - in->pos));
  if (want == 0) return 0;
  in->buf.resize(want);
  size_t got = 0;
  in->error = in->f->Read(in->pos, want, in->buf.data(), &got);
  if (!in->error.ok()) {
    archive_set_error(a, EIO, "%s", in->error.message().c_str());
    return -1;
  }
  in->pos += got;
  *out = in->buf.data();
  return static_cast<la_ssize_t>(got);
}

la_int64_t SkipInput(archive*, void* user, la_int64_t request) {
  auto* in = static_cast<ArchiveInput*>(user);
  uint64_t n = std::min<uint64_t>(static_cast<uint64_t>(request), in->size - in->pos);
  in->pos += n;
  return static_cast<la_int64_t>(n);
}

// small: full extensions whose (small) members are read while listing.
Status ListArchive(const std::string& path, ArchiveInput* in, const std::vector<std::string>& small,
                   std::vector<Member>* members, uint64_t* end_pos) {
  std::unique_ptr<archive, ArchiveCloser> a(archive_read_new());
  archive_read_support_format_tar(a.get());
  archive_read_support_filter_none(a.get());
  archive_read_set_read_callback(a.get(), ReadInput);
  archive_read_set_skip_callback(a.get(), SkipInput);
  archive_read_set_callback_data(a.get(), in);
  if (archive_read_open1(a.get()) != ARCHIVE_OK)
    return Status::Corruption(path + ": not a readable uncompressed tar (" +
                              archive_error_string(a.get()) + ")");
  archive_entry* e = nullptr;
  while (true) {
    int r = archive_read_next_header(a.get(), &e);
    if (r == ARCHIVE_EOF) break;
    if (r < ARCHIVE_WARN)
      return Status::Corruption(path + ": bad tar header after member " +
                                std::to_string(members->size()) + " (" +
                                archive_error_string(a.get()) + ")");
    if (archive_entry_filetype(e) != AE_IFREG) continue;
    if (archive_entry_sparse_count(e) > 0)
      return Status::Corruption(path + ": sparse member " + archive_entry_pathname(e));
    Member m{archive_entry_pathname(e),
             static_cast<uint64_t>(archive_read_header_position(a.get())),
             static_cast<uint64_t>(archive_entry_size(e)),
             {}};
    std::string key, ext, full;
    SplitKey(m.name, &key, &ext, &full);
    bool wanted = ext == "cls" || std::find(small.begin(), small.end(), full) != small.end();
    if (wanted && m.size <= 64) {
      m.small_data.resize(m.size);
      if (archive_read_data(a.get(), m.small_data.data(), m.size) !=
          static_cast<la_ssize_t>(m.size))
        return Status::Corruption(path + ": member " + m.name + " cut short");
    }
    members->push_back(std::move(m));
  }
  *end_pos = static_cast<uint64_t>(archive_read_header_position(a.get()));
  return Status::OK();
}

// Lists the regular members of one tar with their header positions.
Status ListMembers(const RandomAccessFile& f, const std::vector<std::string>& small,
                   size_t read_size, std::vector<Member>* members, uint64_t* end_pos) {
  const std::string& path = f.path();
  ArchiveInput in;
  in.f = &f;
  in.read_size = std::max<size_t>(read_size, 512);
  SSDFEED_ASSIGN_OR_RETURN(in.size, f.Size());
  Status s = ListArchive(path, &in, small, members, end_pos);
  return in.error.ok() ? s : in.error;
}

// Why member i cannot be used (unsafe path, cut short), else OK and where
// its data starts: data ends where the next header starts, padded to
// 512-byte blocks.
Status CheckMember(const std::string& path, const std::vector<Member>& members, size_t i,
                   uint64_t end_pos, uint64_t file_size, uint64_t* data_offset) {
  const Member& m = members[i];
  if (UnsafeName(m.name)) return Status::Corruption(path + ": unsafe member path '" + m.name + "'");
  uint64_t next = i + 1 < members.size() ? members[i + 1].header_pos : end_pos;
  uint64_t padded = (m.size + 511) / 512 * 512;
  if (next < padded || next - padded + m.size > file_size)
    return Status::Corruption(path + ": member " + m.name + " cut short");
  *data_offset = next - padded;
  return Status::OK();
}

// What a shard gives while opening: its samples, and what was left out.
struct GroupOut {
  std::vector<TarSample>* samples;
  size_t* skipped;
  std::vector<std::string>* reasons;
  // Under kSkip: counts and names what is left out; under kRaise: returns it.
  Status Drop(OnError on_error, Status why) {
    if (on_error == OnError::kRaise) return why;
    ++*skipped;
    reasons->push_back(why.message());
    return Status::OK();
  }
};

Status Group(const std::string& path, uint32_t file, const std::vector<Member>& members,
             uint64_t end_pos, uint64_t file_size, OnError on_error, GroupOut out) {
  std::map<std::string, size_t> by_key;  // key -> index in out (this file)
  std::vector<TarSample> samples;
  std::vector<bool> has_image;
  for (size_t i = 0; i < members.size(); ++i) {
    const Member& m = members[i];
    uint64_t offset = 0;
    Status bad = CheckMember(path, members, i, end_pos, file_size, &offset);
    std::string key, ext;
    SplitKey(m.name, &key, &ext);
    if (bad.ok() && ext == "cls") {
      auto it = by_key.find(key);
      int64_t label = 0;
      bool ok = !m.small_data.empty();
      for (char c : m.small_data) {
        if (c == '\n' || c == '\r' || c == ' ') continue;
        if (!std::isdigit(static_cast<unsigned char>(c)))
          ok = false;
        else
          label = label * 10 + (c - '0');
      }
      if (!ok) bad = Status::Corruption(path + ": member " + m.name + " is not a decimal label");
      if (bad.ok()) {
        if (it == by_key.end()) {
          it = by_key.emplace(key, samples.size()).first;
          samples.push_back({file, key, 0, 0, -1, {}});
          has_image.push_back(false);
        }
        samples[it->second].label = label;
      }
    } else if (bad.ok() && (ext == "jpg" || ext == "jpeg" || ext == "png")) {
      auto it = by_key.find(key);
      if (it == by_key.end()) {
        it = by_key.emplace(key, samples.size()).first;
        samples.push_back({file, key, 0, 0, -1, {}});
        has_image.push_back(false);
      }
      samples[it->second].data_offset = offset;
      samples[it->second].size = m.size;
      has_image[it->second] = true;
    }
    if (!bad.ok()) SSDFEED_RETURN_IF_ERROR(out.Drop(on_error, bad));
  }
  for (size_t i = 0; i < samples.size(); ++i) {
    if (has_image[i]) {
      out.samples->push_back(std::move(samples[i]));
      continue;
    }
    SSDFEED_RETURN_IF_ERROR(
        out.Drop(on_error, Status::Corruption(path + ": sample '" + samples[i].key +
                                              "' has no .jpg/.jpeg/.png member")));
  }
  return Status::OK();
}

// The field (and which of its extensions) a member's full extension names.
bool MatchField(const std::vector<TarField>& fields, const std::string& full, size_t* field,
                uint8_t* alt) {
  for (size_t j = 0; j < fields.size(); ++j) {
    const auto& exts = fields[j].exts;
    for (size_t a = 0; a < exts.size() && a < 256; ++a) {
      if (exts[a] == full) {
        *field = j;
        *alt = static_cast<uint8_t>(a);
        return true;
      }
    }
  }
  return false;
}

// Records member i as field j of its sample; a label must be decimal text.
Status AddPart(const std::string& path, const Member& m, const TarField& f, uint64_t offset,
               uint8_t alt, PartRef* part) {
  if (f.spec.kind == FieldKind::kLabel &&
      (m.size > 64 || !ParseDecimalLabel(m.small_data, &part->label)))
    return Status::Corruption(path + ": member " + m.name + " (field '" + f.spec.name +
                              "') is not a decimal label");
  part->offset = offset;
  part->size = m.size;
  part->alt = alt;
  part->present = true;
  return Status::OK();
}

Status GroupFields(const std::string& path, uint32_t file, const std::vector<Member>& members,
                   uint64_t end_pos, uint64_t file_size, OnError on_error,
                   const std::vector<TarField>& fields, GroupOut out) {
  std::map<std::string, size_t> by_key;
  std::vector<TarSample> samples;
  for (size_t i = 0; i < members.size(); ++i) {
    const Member& m = members[i];
    std::string key, ext, full;
    SplitKey(m.name, &key, &ext, &full);
    size_t j = 0;
    uint8_t alt = 0;
    if (!MatchField(fields, full, &j, &alt)) continue;  // a member no field asks for
    uint64_t offset = 0;
    Status bad = CheckMember(path, members, i, end_pos, file_size, &offset);
    auto it = by_key.find(key);
    if (bad.ok() && it == by_key.end()) {
      it = by_key.emplace(key, samples.size()).first;
      samples.push_back({file, key, 0, 0, -1, std::vector<PartRef>(fields.size())});
    }
    if (bad.ok()) bad = AddPart(path, m, fields[j], offset, alt, &samples[it->second].parts[j]);
    if (!bad.ok()) SSDFEED_RETURN_IF_ERROR(out.Drop(on_error, bad));
  }
  for (auto& smp : samples) {
    size_t missing = fields.size();
    for (size_t j = 0; j < fields.size() && missing == fields.size(); ++j)
      if (!smp.parts[j].present) missing = j;
    if (missing == fields.size()) {
      out.samples->push_back(std::move(smp));
      continue;
    }
    const TarField& f = fields[missing];
    SSDFEED_RETURN_IF_ERROR(out.Drop(
        on_error, Status::Corruption(path + ": sample '" + smp.key + "' has no member for field '" +
                                     f.spec.name + "' (" + smp.key + "." + f.exts[0] + ")")));
  }
  return Status::OK();
}

// The list a source gives as its schema: the image first.
std::vector<FieldSpec> Schema(const std::vector<TarField>& fields) {
  std::vector<FieldSpec> out;
  for (const auto& f : fields) out.push_back(f.spec);
  return out;
}

class TarSource final : public ShardedSource {
 public:
  TarSource(std::string uri, ShardFiles files, std::vector<TarSample> samples, size_t skipped,
            std::vector<std::string> reasons, std::vector<TarField> fields)
      : ShardedSource(std::move(uri), std::move(files), skipped, "tar",
                      fields.empty() ? "" : FieldsIdentity(Schema(fields))),
        samples_(std::move(samples)),
        reasons_(std::move(reasons)),
        fields_(std::move(fields)) {
    std::vector<uint32_t> file_of;
    for (const TarSample& s : samples_) file_of.push_back(s.file);
    TrackReads(file_of);
  }
  size_t size() const override { return samples_.size(); }
  Status Read(size_t id, EncodedSample* out) const override {
    const TarSample& s = samples_[id];
    SSDFEED_ASSIGN_OR_RETURN(const RandomAccessFile* f, files().Get(s.file));
    out->fields.clear();
    Status st;
    if (!fields_.empty()) {
      st = ReadFields(*f, s, out);
    } else {
      out->bytes.resize(s.size);
      out->label = s.label;
      st = ReadExact(*f, s.data_offset, s.size, out->bytes.data());
    }
    if (st.ok()) ReadOnce(id);
    return st.WithContext(Describe(id));
  }
  std::string Describe(size_t id) const override {
    return file_path(samples_[id].file) + " sample " + samples_[id].key;
  }
  std::vector<std::string> skipped_reasons() const override { return reasons_; }
  std::vector<FieldSpec> fields() const override {
    return fields_.empty() ? Source::fields() : Schema(fields_);
  }

 protected:
  // From the first to the end of the last member read (labels were read
  // while listing).
  void Span(size_t id, uint32_t* file, uint64_t* begin, uint64_t* end) const override {
    const TarSample& s = samples_[id];
    *file = s.file;
    *begin = s.data_offset;
    *end = s.data_offset + s.size;
    if (fields_.empty()) return;
    *begin = UINT64_MAX;
    *end = 0;
    for (size_t j = 0; j < fields_.size(); ++j) {
      if (fields_[j].spec.kind == FieldKind::kLabel) continue;
      *begin = std::min(*begin, s.parts[j].offset);
      *end = std::max(*end, s.parts[j].offset + s.parts[j].size);
    }
    if (*begin > *end) *begin = *end = 0;
  }

 public:
  Result<std::string> SaveIndex() const override {
    IndexWriter w;
    w.U32(static_cast<uint32_t>(files().files().size()));
    w.U64(samples_.size());
    for (const TarSample& s : samples_) {
      w.U32(s.file);
      w.Str(s.key);
      w.U64(s.data_offset);
      w.U64(s.size);
      w.I64(s.label);
      w.U32(static_cast<uint32_t>(s.parts.size()));
      for (const PartRef& p : s.parts) {
        w.U64(p.offset);
        w.U64(p.size);
        w.I64(p.label);
        w.U8(p.alt);
        w.U8(p.present ? 1 : 0);
      }
    }
    w.U64(skipped());
    w.U64(reasons_.size());
    for (const auto& r : reasons_) w.Str(r);
    return w.data();
  }

 private:
  // A sample's members usually lie together: one read of their span (one
  // request in a bucket, instead of one per member) unless the gaps between
  // them are larger than the members.
  bool ReadSpan(const RandomAccessFile& f, const TarSample& s, uint64_t* start, std::string* buf,
                Status* st) const {
    uint64_t lo = UINT64_MAX, hi = 0, total = 0;
    for (size_t j = 0; j < fields_.size(); ++j) {
      if (fields_[j].spec.kind == FieldKind::kLabel) continue;
      lo = std::min(lo, s.parts[j].offset);
      hi = std::max(hi, s.parts[j].offset + s.parts[j].size);
      total += s.parts[j].size;
    }
    if (lo >= hi || hi - lo > 2 * total + (64 << 10)) return false;
    buf->resize(hi - lo);
    *start = lo;
    *st = ReadExact(f, lo, hi - lo, buf->data());
    return true;
  }

  Status ReadFields(const RandomAccessFile& f, const TarSample& s, EncodedSample* out) const {
    out->label = -1;
    thread_local std::string span;
    uint64_t start = 0;
    Status st;
    bool whole = ReadSpan(f, s, &start, &span, &st);
    SSDFEED_RETURN_IF_ERROR(st);
    for (size_t j = 0; j < fields_.size(); ++j) {
      const TarField& field = fields_[j];
      const PartRef& p = s.parts[j];
      if (field.classic_label) {
        out->label = p.label;
        continue;
      }
      std::string* dst = &out->bytes;
      if (field.spec.kind != FieldKind::kImage) {
        out->fields.push_back({field.spec.name,
                               field.spec.kind,
                               {},
                               false,
                               file_path(s.file) + " member " + s.key + "." + field.exts[p.alt]});
        dst = &out->fields.back().bytes;
      }
      if (field.spec.kind == FieldKind::kLabel) {
        AppendInt64(p.label, dst);
        continue;
      }
      if (whole) {
        dst->assign(span, p.offset - start, p.size);
        continue;
      }
      dst->resize(p.size);
      SSDFEED_RETURN_IF_ERROR(ReadExact(f, p.offset, p.size, dst->data()));
    }
    return Status::OK();
  }

  std::vector<TarSample> samples_;
  std::vector<std::string> reasons_;
  std::vector<TarField> fields_;  // empty: the classic image + .cls label
};

// The fields of a tar source: none (classic) or the requested ones with an
// image first when none was asked for.
Result<std::vector<TarField>> TarFieldsOf(const SourceOptions& opts) {
  if (opts.fields.empty()) return std::vector<TarField>{};
  SSDFEED_ASSIGN_OR_RETURN(auto specs, ResolveFields(opts.fields, "tar"));
  bool has_image = std::any_of(specs.begin(), specs.end(),
                               [](const FieldSpec& f) { return f.kind == FieldKind::kImage; });
  if (!has_image) specs.insert(specs.begin(), {"image", FieldKind::kImage, ""});
  return MakeTarFields(specs);
}

Result<std::unique_ptr<Source>> ScanTarShards(const std::string& uri, ShardFiles files,
                                              const ShardScan& scan, const SourceOptions& opts) {
  SSDFEED_ASSIGN_OR_RETURN(std::vector<TarField> fields, TarFieldsOf(opts));
  std::vector<std::string> small;
  for (const auto& f : fields)
    if (f.spec.kind == FieldKind::kLabel) small.insert(small.end(), f.exts.begin(), f.exts.end());
  size_t n = files.files().size();
  std::vector<std::vector<TarSample>> per_file(n);
  std::vector<size_t> skipped(n, 0);
  std::vector<std::vector<std::string>> reasons(n);
  SSDFEED_RETURN_IF_ERROR(ForEachShard(files, scan, [&](size_t i, const RandomAccessFile& f) {
    const InputFile& input = files.files()[i];
    std::vector<Member> members;
    uint64_t end_pos = 0;
    Status s = ListMembers(f, small, scan.tar_read_size, &members, &end_pos);
    GroupOut out{&per_file[i], &skipped[i], &reasons[i]};
    auto file = static_cast<uint32_t>(i);
    if (s.ok() && fields.empty())
      s = Group(input.path, file, members, end_pos, input.size, opts.on_error, out);
    else if (s.ok())
      s = GroupFields(input.path, file, members, end_pos, input.size, opts.on_error, fields, out);
    if (s.ok() || opts.on_error == OnError::kRaise) return s;
    per_file[i].clear();  // a shard that cannot be listed is left out whole
    ++skipped[i];
    reasons[i].push_back(s.message());
    return Status::OK();
  }));
  std::vector<TarSample> samples;
  std::vector<std::string> all_reasons;
  size_t total_skipped = 0;
  for (size_t i = 0; i < n; ++i) {
    total_skipped += skipped[i];
    for (auto& smp : per_file[i]) samples.push_back(std::move(smp));
    for (auto& r : reasons[i]) all_reasons.push_back(std::move(r));
  }
  if (samples.empty())
    return Status::NotFound(uri + (fields.empty() ? ": no samples with an image member"
                                                  : ": no samples with every requested field"));
  return std::unique_ptr<Source>(new TarSource(uri, std::move(files), std::move(samples),
                                               total_skipped, std::move(all_reasons),
                                               std::move(fields)));
}

// Where a member lies must be inside its shard as listed.
bool InShard(const ShardFiles& files, uint32_t file, uint64_t offset, uint64_t size) {
  if (file >= files.files().size()) return false;
  uint64_t end = files.files()[file].size;
  return offset <= end && size <= end - offset;
}

Status ReadTarSample(IndexReader& r, const ShardFiles& files, const std::vector<TarField>& fields,
                     TarSample* s) {
  uint32_t nparts = 0;
  if (!r.U32(&s->file) || !r.Str(&s->key) || !r.U64(&s->data_offset) || !r.U64(&s->size) ||
      !r.I64(&s->label) || !r.U32(&nparts))
    return r.Bad("cut short in a sample");
  if (nparts != fields.size()) return r.Bad("sample '" + s->key + "' has another field count");
  if (!InShard(files, s->file, s->data_offset, s->size))
    return r.Bad("sample '" + s->key + "' lies outside its shard");
  s->parts.resize(nparts);
  for (size_t j = 0; j < nparts; ++j) {
    PartRef& p = s->parts[j];
    uint8_t present = 0;
    if (!r.U64(&p.offset) || !r.U64(&p.size) || !r.I64(&p.label) || !r.U8(&p.alt) ||
        !r.U8(&present))
      return r.Bad("cut short in a sample");
    p.present = present != 0;
    if (!p.present || p.alt >= fields[j].exts.size() || !InShard(files, s->file, p.offset, p.size))
      return r.Bad("sample '" + s->key + "' field " + std::to_string(j) + " is out of range");
  }
  return Status::OK();
}

// A TarSource from what its SaveIndex gave (checked against the listing).
Result<std::unique_ptr<Source>> LoadTarShards(const std::string& uri, ShardFiles files,
                                              const std::string& index, const SourceOptions& opts) {
  SSDFEED_ASSIGN_OR_RETURN(std::vector<TarField> fields, TarFieldsOf(opts));
  IndexReader r = IndexReader::Plain(index, uri + " stored index");
  uint32_t nfiles = 0;
  uint64_t n = 0;
  if (!r.U32(&nfiles) || nfiles != files.files().size() || !r.Count(36, &n) || n == 0)
    return r.Bad("shard or sample count does not fit the listing");
  std::vector<TarSample> samples(n);
  for (auto& smp : samples) SSDFEED_RETURN_IF_ERROR(ReadTarSample(r, files, fields, &smp));
  uint64_t skipped = 0, nreasons = 0;
  if (!r.U64(&skipped) || !r.Count(4, &nreasons)) return r.Bad("cut short");
  std::vector<std::string> reasons(nreasons);
  for (auto& why : reasons)
    if (!r.Str(&why)) return r.Bad("cut short");
  if (!r.done()) return r.Bad("trailing bytes");
  return std::unique_ptr<Source>(new TarSource(uri, std::move(files), std::move(samples), skipped,
                                               std::move(reasons), std::move(fields)));
}

}  // namespace

ShardLayout TarLayout(const std::string& uri) {
  ShardLayout l;
  l.kind = "tar";
  l.scan = [uri](ShardFiles files, const ShardScan& scan, const SourceOptions& opts) {
    return ScanTarShards(uri, std::move(files), scan, opts);
  };
  l.load = [uri](ShardFiles files, const std::string& index, const SourceOptions& opts) {
    return LoadTarShards(uri, std::move(files), index, opts);
  };
  return l;
}

Result<std::unique_ptr<Source>> OpenTarSource(const std::string& uri,
                                              const std::vector<std::string>& paths,
                                              const SourceOptions& opts) {
  SSDFEED_ASSIGN_OR_RETURN(auto inputs, StatInputs(opts.env, paths));
  return OpenSharded(uri, TarLayout(uri), ShardFiles(opts.env, std::move(inputs)), ShardScan{},
                     opts);
}

}  // namespace ssdfeed
