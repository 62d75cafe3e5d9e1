// tar:GLOB — WebDataset shards read with libarchive. Members sharing a key
// (path up to the first '.' of the file name) form a sample: the image from
// .jpg/.jpeg/.png, the label from .cls (decimal text). Member names are only
// ever compared, never used as paths on disk; unsafe ones are refused.
#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <cctype>
#include <map>

#include "source/shard_files.h"
#include "source/sources.h"

namespace ssdfeed {

namespace {

struct TarSample {
  uint32_t file = 0;
  std::string key;
  uint64_t data_offset = 0;
  uint64_t size = 0;
  int64_t label = -1;
};

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

// *ext is the type: the part after the last dot, lower case.
void SplitKey(const std::string& name, std::string* key, std::string* ext) {
  size_t slash = name.find_last_of('/');
  size_t base = slash == std::string::npos ? 0 : slash + 1;
  size_t dot = name.find('.', base);
  *key = name.substr(0, dot);
  // "k.seg.png" is key "k", extension "seg.png", type "png".
  size_t last = name.find_last_of('.');
  *ext = dot == std::string::npos || last < base ? "" : name.substr(last + 1);
  std::transform(ext->begin(), ext->end(), ext->begin(),
                 [](unsigned char c) { return std::tolower(c); });
}

struct ArchiveCloser {
  void operator()(archive* a) const { archive_read_free(a); }
};

struct Member {
  std::string name;
  uint64_t header_pos;
  uint64_t size;
  std::string small_data;  // contents of .cls members
};

// Feeds libarchive from a RandomAccessFile (a local file or an object in a
// bucket), in large sequential reads; skips only move the position.
struct ArchiveInput {
  const RandomAccessFile* f = nullptr;
  uint64_t size = 0;
  uint64_t pos = 0;
  std::string buf;
  Status error;  // why a read failed: reported instead of "bad tar"
};

la_ssize_t ReadInput(archive* a, void* user, const void** out) {
  auto* in = static_cast<ArchiveInput*>(user);
  size_t want = static_cast<size_t>(std::min<uint64_t>(1 << 20, in->size - in->pos));
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

Status ListArchive(const std::string& path, ArchiveInput* in, std::vector<Member>* members,
                   uint64_t* end_pos) {
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
    std::string key, ext;
    SplitKey(m.name, &key, &ext);
    if (ext == "cls" && m.size <= 64) {
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
Status ListMembers(const RandomAccessFile& f, std::vector<Member>* members, uint64_t* end_pos) {
  const std::string& path = f.path();
  ArchiveInput in;
  in.f = &f;
  SSDFEED_ASSIGN_OR_RETURN(in.size, f.Size());
  Status s = ListArchive(path, &in, members, end_pos);
  return in.error.ok() ? s : in.error;
}

Status Group(const std::string& path, uint32_t file, const std::vector<Member>& members,
             uint64_t end_pos, uint64_t file_size, OnError on_error, std::vector<TarSample>* out,
             size_t* skipped) {
  std::map<std::string, size_t> by_key;  // key -> index in out (this file)
  std::vector<TarSample> samples;
  std::vector<bool> has_image;
  for (size_t i = 0; i < members.size(); ++i) {
    const Member& m = members[i];
    Status bad;
    if (UnsafeName(m.name))
      bad = Status::Corruption(path + ": unsafe member path '" + m.name + "'");
    // Data ends where the next header starts, padded to 512-byte blocks.
    uint64_t next = i + 1 < members.size() ? members[i + 1].header_pos : end_pos;
    uint64_t padded = (m.size + 511) / 512 * 512;
    if (bad.ok() && (next < padded || next - padded + m.size > file_size))
      bad = Status::Corruption(path + ": member " + m.name + " cut short");
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
          samples.push_back({file, key, 0, 0, -1});
          has_image.push_back(false);
        }
        samples[it->second].label = label;
      }
    } else if (bad.ok() && (ext == "jpg" || ext == "jpeg" || ext == "png")) {
      auto it = by_key.find(key);
      if (it == by_key.end()) {
        it = by_key.emplace(key, samples.size()).first;
        samples.push_back({file, key, 0, 0, -1});
        has_image.push_back(false);
      }
      samples[it->second].data_offset = next - padded;
      samples[it->second].size = m.size;
      has_image[it->second] = true;
    }
    if (!bad.ok()) {
      if (on_error == OnError::kRaise) return bad;
      ++*skipped;
    }
  }
  for (size_t i = 0; i < samples.size(); ++i) {
    if (has_image[i]) {
      out->push_back(std::move(samples[i]));
      continue;
    }
    if (on_error == OnError::kRaise)
      return Status::Corruption(path + ": sample '" + samples[i].key +
                                "' has no .jpg/.jpeg/.png member");
    ++*skipped;
  }
  return Status::OK();
}

class TarSource final : public ShardedSource {
 public:
  TarSource(std::string uri, ShardFiles files, std::vector<TarSample> samples, size_t skipped)
      : ShardedSource(std::move(uri), std::move(files), skipped, "tar", ""),
        samples_(std::move(samples)) {}
  size_t size() const override { return samples_.size(); }
  Status Read(size_t id, EncodedSample* out) const override {
    const TarSample& s = samples_[id];
    SSDFEED_ASSIGN_OR_RETURN(const RandomAccessFile* f, files().Get(s.file));
    out->bytes.resize(s.size);
    out->label = s.label;
    return ReadExact(*f, s.data_offset, s.size, out->bytes.data()).WithContext(Describe(id));
  }
  std::string Describe(size_t id) const override {
    return file_path(samples_[id].file) + " sample " + samples_[id].key;
  }

 private:
  std::vector<TarSample> samples_;
};

}  // namespace

Result<std::unique_ptr<Source>> OpenTarShards(const std::string& uri, ShardFiles files,
                                              const ShardScan& scan, const SourceOptions& opts) {
  size_t n = files.files().size();
  std::vector<std::vector<TarSample>> per_file(n);
  std::vector<size_t> skipped(n, 0);
  SSDFEED_RETURN_IF_ERROR(ForEachShard(files, scan, [&](size_t i, const RandomAccessFile& f) {
    const InputFile& input = files.files()[i];
    std::vector<Member> members;
    uint64_t end_pos = 0;
    Status s = ListMembers(f, &members, &end_pos);
    if (s.ok())
      s = Group(input.path, static_cast<uint32_t>(i), members, end_pos, input.size, opts.on_error,
                &per_file[i], &skipped[i]);
    if (s.ok() || opts.on_error == OnError::kRaise) return s;
    per_file[i].clear();  // a shard that cannot be listed is left out whole
    ++skipped[i];
    return Status::OK();
  }));
  std::vector<TarSample> samples;
  size_t total_skipped = 0;
  for (size_t i = 0; i < n; ++i) {
    total_skipped += skipped[i];
    for (auto& smp : per_file[i]) samples.push_back(std::move(smp));
  }
  if (samples.empty()) return Status::NotFound(uri + ": no samples with an image member");
  return std::unique_ptr<Source>(
      new TarSource(uri, std::move(files), std::move(samples), total_skipped));
}

Result<std::unique_ptr<Source>> OpenTarSource(const std::string& uri,
                                              const std::vector<std::string>& paths,
                                              const SourceOptions& opts) {
  SSDFEED_ASSIGN_OR_RETURN(auto inputs, StatInputs(opts.env, paths));
  return OpenTarShards(uri, ShardFiles(opts.env, std::move(inputs)), ShardScan{}, opts);
}

}  // namespace ssdfeed
