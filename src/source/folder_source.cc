// folder:DIR — ImageFolder layout DIR/<class>/<file>; label = index of the
// class in sorted order; .jpg .jpeg .png in any case. Classes are found as
// torchvision's find_classes finds them (every directory entry that is a
// directory through symlinks, dot-directories included), and a class with
// no image is refused unless empty classes are allowed, where it keeps its
// index: labels are what ImageFolder gives on the same tree. Links are
// followed while they stay inside DIR (OriginRoot; follow_links=1: anywhere).
#include <algorithm>
#include <cctype>

#include "source/origin_root.h"
#include "source/shard_files.h"
#include "source/sources.h"

namespace ssdfeed {

namespace {

// Every class name with its index: a new class folder shifts labels even
// when the list of files stays the same.
std::string LabelMap(const std::vector<std::string>& classes) {
  std::string m = "labels";
  for (size_t i = 0; i < classes.size(); ++i) {
    m.append("|").append(std::to_string(i)).append(":");
    m.append(std::to_string(classes[i].size())).append(":").append(classes[i]);
  }
  return m;
}

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
  FolderSource(std::string uri, std::vector<InputFile> files, std::vector<int64_t> labels,
               const std::vector<std::string>& classes, RandomAccessFileOptions read, Env* env)
      : uri_(std::move(uri)),
        files_(std::move(files)),
        labels_(std::move(labels)),
        read_(std::move(read)),
        env_(env) {
    identity_ = IdentityDigest("folder", files_, LabelMap(classes));
  }

  size_t size() const override { return files_.size(); }
  Status Read(size_t id, EncodedSample* out) const override {
    out->label = labels_[id];
    return env_->ReadFileToString(files_[id].path, &out->bytes, read_);
  }
  std::string Describe(size_t id) const override { return files_[id].path; }
  const std::string& identity() const override { return identity_; }
  const std::string& uri() const override { return uri_; }

 private:
  std::string uri_;
  std::vector<InputFile> files_;
  std::vector<int64_t> labels_;
  RandomAccessFileOptions read_;
  Env* env_;
  std::string identity_;
};

// The class folders of dir, sorted: what os.scandir + is_dir() gives. A
// class folder that leads out of the root is an error naming it.
Status FindClasses(Env* env, const std::string& dir, OriginRoot* root,
                   std::vector<std::string>* classes) {
  std::vector<std::string> names;
  SSDFEED_RETURN_IF_ERROR(env->GetChildren(dir, &names));
  classes->clear();
  for (const auto& n : names) {
    auto info = env->Stat(JoinPath(dir, n));  // a broken link is no class
    if (!info.ok() || !info->is_dir) continue;
    SSDFEED_RETURN_IF_ERROR(root->Check(JoinPath(dir, n)));
    classes->push_back(n);
  }
  std::sort(classes->begin(), classes->end());
  if (classes->empty())
    return Status::NotFound(dir + ": no class folder found (expected DIR/<class>/<file>.jpg|.png)");
  return Status::OK();
}

// Appends the images directly inside cdir, sorted by name, with label.
Status AddClassFiles(Env* env, const std::string& cdir, int64_t label, OriginRoot* root,
                     std::vector<InputFile>* files, std::vector<int64_t>* labels) {
  std::vector<std::string> names;
  SSDFEED_RETURN_IF_ERROR(env->GetChildren(cdir, &names));
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    if (!IsImageName(n)) continue;
    std::string path = JoinPath(cdir, n);
    SSDFEED_ASSIGN_OR_RETURN(FileInfo fi, env->Stat(path));
    if (fi.is_dir) continue;  // a folder named like an image
    SSDFEED_RETURN_IF_ERROR(root->Check(path));
    files->push_back(InputFile{path, fi.size, fi.mtime_ns, fi.inode, fi.ctime_ns, {}});
    labels->push_back(label);
  }
  return Status::OK();
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) {
    if (!s.empty()) s.append(", ");
    s.append(n);
  }
  return s;
}

}  // namespace

Result<std::unique_ptr<Source>> OpenFolderSource(const std::string& uri, const std::string& dir,
                                                 const SourceOptions& opts) {
  Env* env = opts.env;
  SSDFEED_ASSIGN_OR_RETURN(FileInfo root, env->Stat(dir));
  if (!root.is_dir) return Status::InvalidArgument(dir + ": not a directory");
  SSDFEED_ASSIGN_OR_RETURN(OriginRoot origin, OriginRoot::Open(env, dir, opts.follow_links));
  std::vector<std::string> classes, empty;
  SSDFEED_RETURN_IF_ERROR(FindClasses(env, dir, &origin, &classes));
  std::vector<InputFile> files;
  std::vector<int64_t> labels;
  for (size_t label = 0; label < classes.size(); ++label) {
    size_t before = files.size();
    SSDFEED_RETURN_IF_ERROR(AddClassFiles(env, JoinPath(dir, classes[label]),
                                          static_cast<int64_t>(label), &origin, &files, &labels));
    if (files.size() == before) empty.push_back(classes[label]);
  }
  if (!empty.empty() && !opts.allow_empty_classes)
    return Status::NotFound(dir + ": found no valid file for the classes " + JoinNames(empty) +
                            " (supported extensions: .jpg, .jpeg, .png; remove those folders, "
                            "or allow empty classes with folder:DIR?allow_empty=1)");
  if (files.empty())
    return Status::NotFound(dir + ": no images found (expected DIR/<class>/<file>.jpg|.png)");
  return std::unique_ptr<Source>(new FolderSource(uri, std::move(files), std::move(labels), classes,
                                                  origin.ReadOptions(), env));
}

}  // namespace ssdfeed
