// folder:DIR — ImageFolder layout DIR/<class>/<file>; label = index of the
// class in sorted order; .jpg .jpeg .png in any case.
#include <algorithm>
#include <cctype>

#include "source/shard_files.h"
#include "source/sources.h"

namespace ssdfeed {

namespace {

bool IsImageName(const std::string& name) {
  size_t dot = name.find_last_of('.');
  if (dot == std::string::npos || name[0] == '.') return false;
  std::string ext = name.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return ext == "jpg" || ext == "jpeg" || ext == "png";
}

class FolderSource final : public Source {
 public:
  FolderSource(std::string uri, std::vector<InputFile> files, std::vector<int64_t> labels, Env* env)
      : uri_(std::move(uri)), files_(std::move(files)), labels_(std::move(labels)), env_(env) {
    identity_ = IdentityDigest("folder", files_, "");
  }

  size_t size() const override { return files_.size(); }
  Status Read(size_t id, EncodedSample* out) const override {
    out->label = labels_[id];
    Status s = env_->ReadFileToString(files_[id].path, &out->bytes);
    return s;
  }
  std::string Describe(size_t id) const override { return files_[id].path; }
  const std::string& identity() const override { return identity_; }
  const std::string& uri() const override { return uri_; }
  size_t file_count() const override { return files_.size(); }

 private:
  std::string uri_;
  std::vector<InputFile> files_;
  std::vector<int64_t> labels_;
  Env* env_;
  std::string identity_;
};

}  // namespace

Result<std::unique_ptr<Source>> OpenFolderSource(const std::string& uri, const std::string& dir,
                                                 const SourceOptions& opts) {
  Env* env = opts.env;
  SSDFEED_ASSIGN_OR_RETURN(FileInfo root, env->Stat(dir));
  if (!root.is_dir) return Status::InvalidArgument(dir + ": not a directory");
  std::vector<std::string> classes;
  SSDFEED_RETURN_IF_ERROR(env->GetChildren(dir, &classes));
  std::sort(classes.begin(), classes.end());
  std::vector<InputFile> files;
  std::vector<int64_t> labels;
  int64_t label = 0;
  for (const auto& c : classes) {
    if (c[0] == '.') continue;
    std::string cdir = JoinPath(dir, c);
    auto ci = env->Stat(cdir);
    if (!ci.ok() || !ci->is_dir) continue;
    std::vector<std::string> names;
    SSDFEED_RETURN_IF_ERROR(env->GetChildren(cdir, &names));
    std::sort(names.begin(), names.end());
    for (const auto& n : names) {
      if (!IsImageName(n)) continue;
      SSDFEED_ASSIGN_OR_RETURN(InputFile f, StatInput(env, JoinPath(cdir, n)));
      files.push_back(std::move(f));
      labels.push_back(label);
    }
    ++label;
  }
  if (files.empty())
    return Status::NotFound(dir + ": no images found (expected DIR/<class>/<file>.jpg|.png)");
  return std::unique_ptr<Source>(new FolderSource(uri, std::move(files), std::move(labels), env));
}

}  // namespace ssdfeed
