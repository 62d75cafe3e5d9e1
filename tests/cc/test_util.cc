#include "test_util.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "ssdfeed/env.h"

namespace ssdfeed::test {

TempDir::TempDir(const char* base_dir) {
  const char* base = base_dir ? base_dir : std::getenv("TMPDIR");
  std::string tmpl = std::string(base ? base : "/tmp") + "/ssdfeed-test-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string MakeTestDataset(const MakeDatasetOptions& o) {
  MakeDatasetReport r;
  Status s = MakeDataset(o, &r);
  if (s.ok()) return r.uri;
  ADD_FAILURE() << "cannot make the test dataset in " << o.dir << ": " << s.message();
  return "";
}

bool DirectIoWorks(const std::string& dir) {
  std::string p = JoinPath(dir, "direct-probe");
  WritableFileOptions o;
  o.direct = true;
  bool ok = Env::Default()->NewWritableFile(p, o).ok();
  ::unlink(p.c_str());
  return ok;
}

int RunCommand(const std::string& cmd, std::string* out) {
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  std::string o;
  while (size_t n = std::fread(buf, 1, sizeof(buf), p)) o.append(buf, n);
  int st = ::pclose(p);
  if (out) *out = o;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

std::string CliPath() { return SSDFEED_CLI_PATH; }

std::string CannotActAs(int uid, int gid) {
  std::string out;
  // The CLI itself, not `true`: a checkout under a directory others cannot
  // search (/root, in a fresh container) leaves setpriv working and the
  // test's commands unrunnable. Through a shell, as the tests run it:
  // setpriv's own exec still has root's capabilities and gets through.
  std::string cmd = "setpriv --reuid=" + std::to_string(uid) + " --regid=" + std::to_string(uid) +
                    " --groups=" + std::to_string(gid) + " /bin/sh -c '" + CliPath() +
                    " --version' 2>&1";
  if (RunCommand(cmd, &out) == 0) return "";
  return "cannot run the CLI as uid " + std::to_string(uid) + " (" + cmd + ": " +
         (out.empty() ? "failed" : out.substr(0, out.find('\n'))) +
         "; a directory above the build that other users cannot search?)";
}

std::string CannotUnsharePid() {
  std::string out;
  if (RunCommand("unshare --pid --fork --mount-proc true", &out) == 0) return "";
  return "unshare --pid --fork --mount-proc fails here: " +
         (out.empty() ? std::string("failed") : out.substr(0, out.find('\n')));
}

Image PreparedPhoto(uint64_t index, int crop, bool gray) {
  Image full, out;
  int label = 0;
  EXPECT_TRUE(GenerateImage(7, index, 10, 280, 360, &full, &label).ok());
  std::string jpg;
  EXPECT_TRUE(EncodeJpeg(full, 90, &jpg).ok());
  PrepareSpec spec;
  spec.resize_short = 256;
  spec.crop_h = spec.crop_w = crop;
  spec.gray = gray;
  Decoder dec;
  EXPECT_TRUE(dec.DecodeAndPrepare(jpg, spec, &out).ok());
  return out;
}

}  // namespace ssdfeed::test
