#include "source/origin_root.h"

namespace ssdfeed {

Result<OriginRoot> OriginRoot::Open(Env* env, const std::string& root, bool follow_links) {
  if (follow_links) return OriginRoot(env, root, "", true);
  SSDFEED_ASSIGN_OR_RETURN(std::string real, env->RealPath(root));
  return OriginRoot(env, root, std::move(real), false);
}

bool OriginRoot::Inside(const std::string& real) const {
  if (real_ == "/") return true;
  return real.size() >= real_.size() && real.compare(0, real_.size(), real_) == 0 &&
         (real.size() == real_.size() || real[real_.size()] == '/');
}

Status OriginRoot::Refuse(const std::string& path, const std::string& target) const {
  return Status::InvalidArgument(
      path + ": leads to " + target + ", outside " + root_ +
      " (through a symlink or '..'); links out of a source's root are not followed, since "
      "whoever can write a shared dataset folder could point them at your files. Add "
      "follow_links=1 to the URI to follow them");
}

Status OriginRoot::CheckDir(const std::string& dir) {
  auto known = dirs_.find(dir);
  if (known != dirs_.end()) return known->second;
  Status s;
  auto real = env_->RealPath(dir);
  if (real.ok() && !Inside(*real)) s = Refuse(dir, *real);
  dirs_.emplace(dir, s);
  return s;
}

Status OriginRoot::Check(const std::string& path) {
  if (follow_) return Status::OK();
  auto info = env_->Lstat(path);
  if (!info.ok()) return Status::OK();  // missing: the caller's stat says so
  if (!info->is_symlink) {
    // A plain entry lies where its folder does, except the root itself,
    // whose folder is outside it.
    Status dir = CheckDir(Dirname(path));
    if (!dir.ok()) {
      auto real = env_->RealPath(path);
      if (real.ok() && *real == real_) return Status::OK();
      return Refuse(path, real.ok() ? *real : Dirname(path));
    }
    return Status::OK();
  }
  auto real = env_->RealPath(path);
  if (!real.ok()) return Status::OK();  // a broken link: no file to read
  if (!Inside(*real)) return Refuse(path, *real);
  return Status::OK();
}

RandomAccessFileOptions OriginRoot::ReadOptions() const {
  RandomAccessFileOptions o;
  o.no_follow = false;
  if (!follow_) o.beneath = real_;
  return o;
}

}  // namespace ssdfeed
