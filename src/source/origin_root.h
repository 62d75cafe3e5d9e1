// OriginRoot: keeps what a local source reads (folder:, files:, coco:)
// inside its root folder. Links that stay inside the root are followed, as
// datasets are often assembled from them; a file or folder that leads out
// of it is refused, unless the user asked to follow links anywhere
// (SourceOptions::follow_links, "?follow_links=1"). Without this, whoever
// can write a shared dataset folder could link a caption file to the
// reader's credentials and read them back from a group-shared cache entry.
// The check is made when the source lists its files, and again on every
// file actually opened (RandomAccessFileOptions::beneath), so a link
// swapped in later is refused too.
#pragma once

#include <map>
#include <string>

#include "ssdfeed/env.h"

namespace ssdfeed {

class OriginRoot {
 public:
  // root as the URI names it (it may itself be a link: its target is the
  // root then).
  static Result<OriginRoot> Open(Env* env, const std::string& root, bool follow_links);

  // OK when path (below the root as the URI names it), every link
  // resolved, lies inside the root, or links may be followed anywhere.
  // Else InvalidArgument naming path, where it leads and the opt-in. A
  // missing path is OK here: the caller's stat names it.
  Status Check(const std::string& path);

  // How the source reads its files: through links, inside the root.
  RandomAccessFileOptions ReadOptions() const;

  bool follow_links() const { return follow_; }

 private:
  OriginRoot(Env* env, std::string root, std::string real, bool follow)
      : env_(env), root_(std::move(root)), real_(std::move(real)), follow_(follow) {}
  bool Inside(const std::string& real) const;
  Status Refuse(const std::string& path, const std::string& target) const;
  // Check of a folder, remembered: every file of a folder shares it.
  Status CheckDir(const std::string& dir);

  Env* env_;
  std::string root_;  // as given
  std::string real_;  // canonical
  bool follow_;
  std::map<std::string, Status> dirs_;
};

}  // namespace ssdfeed
