#pragma once

#include <unistd.h>

#include <string>

#include "ssdfeed/dataset.h"
#include "ssdfeed/image.h"

namespace ssdfeed::test {

// A fresh directory under $TMPDIR, removed (recursively) when destroyed.
class TempDir {
 public:
  // Under base_dir if given, else $TMPDIR, else /tmp.
  explicit TempDir(const char* base_dir = nullptr);
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A memory filesystem (fsync costs nothing) when the machine has one: for
// tests of logic over thousands of opens, not of durability.
inline const char* FastTmp() { return ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : nullptr; }

// The generated dataset a test reads, from options written in one line
// (`{.dir = d.Sub("data"), .format = "tfrecord", .count = 40}`). Returns its
// source URI; when it cannot be made, the calling test fails, naming the
// directory and why, and "" comes back.
std::string MakeTestDataset(const MakeDatasetOptions& o);

// The filesystem under `dir` takes O_DIRECT (tmpfs does not): a probe file
// is opened for direct writes there, then removed.
bool DirectIoWorks(const std::string& dir);

// Runs a shell command, returns its exit status; output into *out if given.
int RunCommand(const std::string& cmd, std::string* out = nullptr);

std::string CliPath();

// make-dataset's image `index` (seed 7, 10 classes, 280-360 px) as a q90
// JPEG, prepared as a record: the shorter side resized to 256, then the
// centre crop x crop where crop > 0, gray when asked. A photo-like record
// for the codec tests.
Image PreparedPhoto(uint64_t index, int crop = 0, bool gray = false);

// Privileges a test may lack (not root; root in a container without a
// capability, or in a user namespace without the other ids): each probes
// for the real thing and returns why it is missing, "" when present.
// setpriv(1) can run the CLI as uid `uid` with supplementary group `gid`.
std::string CannotActAs(int uid, int gid);
// `unshare --pid --fork --mount-proc` works.
std::string CannotUnsharePid();

}  // namespace ssdfeed::test
