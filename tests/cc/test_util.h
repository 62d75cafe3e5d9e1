#pragma once

#include <string>

namespace ssdfeed::test {

// A fresh directory under $TMPDIR, removed (recursively) when destroyed.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Runs a shell command, returns its exit status; output into *out if given.
int RunCommand(const std::string& cmd, std::string* out = nullptr);

std::string CliPath();

}  // namespace ssdfeed::test
