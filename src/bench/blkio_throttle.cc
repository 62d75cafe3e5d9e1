// A cgroup-v1 blkio read limit, to emulate a slower device on the one the
// cache is on: `bench loader --throttle-read-bps 500M` measures a SATA-class
// SSD's warm epochs on an NVMe drive. The process joins a child cgroup of
// its own blkio cgroup whose blkio.throttle.read_bps_device limits the
// cache's whole disk; it leaves it (and removes it) when done.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bench/bench.h"

namespace ssdfeed {

namespace {

constexpr char kBlkioRoot[] = "/sys/fs/cgroup/blkio";

std::string ReadLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

Status WriteFile(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Status::IOError(path + ": " + std::strerror(errno));
  ssize_t n = ::write(fd, text.data(), text.size());
  int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size()))
    return Status::IOError(path + ": writing '" + text + "': " + std::strerror(n < 0 ? err : EIO));
  return Status::OK();
}

// This process's blkio cgroup (the v1 line "N:blkio:/path" of
// /proc/self/cgroup), as a directory under kBlkioRoot.
Result<std::string> OwnBlkioDir() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::string controllers = line.substr(a + 1, b - a - 1);
    if (("," + controllers + ",").find(",blkio,") == std::string::npos) continue;
    std::string rel = line.substr(b + 1);
    return std::string(kBlkioRoot) + (rel == "/" ? "" : rel);
  }
  return Status::InvalidArgument(
      "/proc/self/cgroup has no blkio line: no cgroup-v1 blkio controller here (cgroup v2 "
      "only?)");
}

constexpr char kThrottlePrefix[] = "ssdfeed-throttle-";

// digits as a number: 1 to 9 digits, no sign, no leading zero; else -1.
long ParseDecimal(const std::string& digits) {
  if (digits.empty() || digits.size() > 9 || digits[0] == '0') return -1;
  long v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

}  // namespace

pid_t ThrottleCgroupPid(const std::string& name) {
  if (name.rfind(kThrottlePrefix, 0) != 0) return 0;
  std::string rest = name.substr(sizeof kThrottlePrefix - 1);
  size_t dash = rest.find('-');
  if (dash != std::string::npos && ParseDecimal(rest.substr(dash + 1)) < 0) return 0;
  long pid = ParseDecimal(rest.substr(0, dash));
  return pid > 0 ? static_cast<pid_t>(pid) : 0;
}

void RemoveStaleThrottles(const std::string& home) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(home, ec)) {
    pid_t pid = ThrottleCgroupPid(e.path().filename().string());
    if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) ::rmdir(e.path().c_str());
  }
}

Result<std::string> MakeThrottleCgroup(const std::string& home) {
  std::string base = home + "/" + kThrottlePrefix + std::to_string(::getpid());
  constexpr int kTries = 16;
  for (int n = 0; n < kTries; ++n) {
    std::string dir = n == 0 ? base : base + "-" + std::to_string(n);
    if (::mkdir(dir.c_str(), 0755) == 0) return dir;
    if (errno != EEXIST) return Status::IOError(dir + ": " + std::strerror(errno));
  }
  return Status::IOError(base + " and " + std::to_string(kTries - 1) +
                         " numbered names after it exist, made by someone else while this "
                         "process lives: not joining a cgroup it did not make");
}

Result<BlockDevice> BlockDeviceOf(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Status::IOError(path + ": " + std::strerror(errno));
  unsigned maj = major(st.st_dev), min = minor(st.st_dev);
  std::string sys = "/sys/dev/block/" + std::to_string(maj) + ":" + std::to_string(min);
  struct stat s2;
  if (::stat(sys.c_str(), &s2) != 0)
    return Status::InvalidArgument(path + " is on device " + std::to_string(maj) + ":" +
                                   std::to_string(min) +
                                   ", not a block device (tmpfs, overlay or a network "
                                   "filesystem?): no block device to throttle");
  // A partition: the limit applies to its whole disk, the parent directory.
  if (::stat((sys + "/partition").c_str(), &s2) == 0) sys += "/..";
  BlockDevice d;
  d.dev = ReadLine(sys + "/dev");
  std::string uevent;
  std::ifstream ue(sys + "/uevent");
  std::string line;
  while (std::getline(ue, line))
    if (line.rfind("DEVNAME=", 0) == 0) d.name = line.substr(8);
  if (d.dev.empty())
    return Status::InvalidArgument(sys + "/dev: unreadable: cannot name " + path + "'s disk");
  return d;
}

Status CanThrottleReads(const std::string& path) {
  if (::geteuid() != 0)
    return Status::InvalidArgument("a blkio read limit needs root (it creates a cgroup)");
  std::string file = std::string(kBlkioRoot) + "/blkio.throttle.read_bps_device";
  if (::access(file.c_str(), F_OK) != 0)
    return Status::InvalidArgument(file +
                                   ": absent: no cgroup-v1 blkio controller mounted "
                                   "(cgroup v2 only?)");
  SSDFEED_RETURN_IF_ERROR(OwnBlkioDir().status());
  return BlockDeviceOf(path).status();
}

Result<std::unique_ptr<ReadThrottle>> ReadThrottle::Start(const std::string& path,
                                                          uint64_t bytes_per_s) {
  SSDFEED_RETURN_IF_ERROR(CanThrottleReads(path));
  SSDFEED_ASSIGN_OR_RETURN(BlockDevice d, BlockDeviceOf(path));
  SSDFEED_ASSIGN_OR_RETURN(std::string home, OwnBlkioDir());
  RemoveStaleThrottles(home);
  SSDFEED_ASSIGN_OR_RETURN(std::string dir, MakeThrottleCgroup(home));
  std::unique_ptr<ReadThrottle> t(new ReadThrottle(home, dir, d, bytes_per_s));
  SSDFEED_RETURN_IF_ERROR(WriteFile(dir + "/blkio.throttle.read_bps_device",
                                    d.dev + " " + std::to_string(bytes_per_s)));
  // cgroup.procs moves every thread of the process, the loader's workers
  // and io_uring's among them, and threads started later are born there.
  SSDFEED_RETURN_IF_ERROR(WriteFile(dir + "/cgroup.procs", std::to_string(::getpid())));
  t->joined_ = true;
  return t;
}

ReadThrottle::~ReadThrottle() {
  if (joined_) WriteFile(home_ + "/cgroup.procs", std::to_string(::getpid())).IgnoreError();
  ::rmdir(dir_.c_str());
}

}  // namespace ssdfeed
