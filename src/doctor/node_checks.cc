#include "doctor/node_checks.h"

#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <sstream>

#include "util/units.h"

namespace ssdfeed::doctor {

namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string ReadLine(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

std::string RealPath(const std::string& p) {
  char real[PATH_MAX];
  return ::realpath(p.c_str(), real) ? std::string(real) : p;
}

// The root may not exist before the first warm; its filesystem is then the
// nearest existing parent's.
std::string ExistingAncestor(std::string p) {
  struct stat st {};
  while (!p.empty() && ::stat(p.c_str(), &st) != 0) {
    auto slash = p.find_last_of('/');
    p = slash == 0 ? "/" : slash == std::string::npos ? "." : p.substr(0, slash);
  }
  return p.empty() ? "." : p;
}

bool IsUnder(const std::string& path, const std::string& point) {
  return path.compare(0, point.size(), point) == 0 &&
         (point == "/" || path.size() == point.size() || path[point.size()] == '/');
}

void GatherSpace(const DoctorInput& in, NodeFacts* f) {
  f->space_known = Env::Default()->FsSpace(f->fs_path, &f->free_bytes, &f->total_bytes).ok();
  if (!f->root_exists) return;
  auto held = RootBytes(in.cache);
  if (held.ok()) f->held_bytes = *held;
}

void GatherShm(const std::string& shm, NodeFacts* f) {
  struct statfs fs {};
  if (::statfs(shm.c_str(), &fs) != 0) return;
  f->shm_found = true;
  f->shm_bytes = static_cast<uint64_t>(fs.f_blocks) * fs.f_bsize;
}

}  // namespace

MountFacts FindMount(const std::string& mountinfo, const std::string& real_path, dev_t dev) {
  // The line of path's device whose mount point is the longest prefix of
  // its real path (bind mounts share a device); a later line over the same
  // point hides an earlier one. Without a line of the device (a table from
  // elsewhere), the longest prefix.
  char want[32];
  std::snprintf(want, sizeof want, "%u:%u", major(dev), minor(dev));
  MountFacts best;
  bool best_dev = false;
  std::istringstream lines(mountinfo);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream in(line);
    std::string id, parent, mm, root, point, opts, tok;
    if (!(in >> id >> parent >> mm >> root >> point >> opts)) continue;
    while (in >> tok && tok != "-") {
    }
    MountFacts m;
    m.found = true;
    m.point = point;
    m.options = opts;
    in >> m.fstype >> m.source;
    if (!IsUnder(real_path, point)) continue;
    bool same_dev = mm == want;
    if (!best.found || (same_dev && !best_dev) ||
        (same_dev == best_dev && point.size() >= best.point.size())) {
      best = m;
      best_dev = same_dev;
    }
  }
  return best;
}

// The block device's disk directory under sys (a partition's queue/ is its
// disk's), by the device number /sys/dev/block names it with.
void ReadDisk(const std::string& sys, dev_t dev, NodeFacts* f) {
  if (major(dev) == 0) return;  // no block device: tmpfs, overlay, NFS
  char link[64];
  std::snprintf(link, sizeof link, "/dev/block/%u:%u", major(dev), minor(dev));
  char real[PATH_MAX];
  if (!::realpath((sys + link).c_str(), real)) return;
  std::string dir = real;
  if (ReadLine(dir + "/queue/rotational").empty()) dir = dir.substr(0, dir.find_last_of('/'));
  f->disk = dir.substr(dir.find_last_of('/') + 1);
  f->rotational = ReadLine(dir + "/queue/rotational");
  std::string sched = ReadLine(dir + "/queue/scheduler");
  auto open = sched.find('['), close = sched.find(']');
  f->scheduler =
      open != std::string::npos && close > open ? sched.substr(open + 1, close - open - 1) : sched;
}

Limit ParseLimit(const std::string& limits, const std::string& name) {
  // "Max open files            1024                 1048576              files"
  std::istringstream lines(limits);
  std::string line;
  Limit l;
  while (std::getline(lines, line)) {
    if (line.compare(0, name.size(), name) != 0) continue;
    std::istringstream in(line.substr(name.size()));
    std::string soft, hard;
    if (!(in >> soft >> hard)) continue;
    auto value = [](const std::string& s) {
      return s == "unlimited" ? Limit::kUnlimited : std::strtoull(s.c_str(), nullptr, 10);
    };
    l.found = true;
    l.soft = value(soft);
    l.hard = value(hard);
  }
  return l;
}

Result<NodeFacts> GatherFacts(const DoctorInput& in) {
  NodeFacts f;
  struct stat st {};
  f.root_exists = ::stat(in.cache.root.c_str(), &st) == 0;
  if (f.root_exists && !S_ISDIR(st.st_mode))
    return Status::InvalidArgument(in.cache.root + ": not a directory");
  f.fs_path = f.root_exists ? in.cache.root : ExistingAncestor(in.cache.root);
  if (!f.root_exists && ::stat(f.fs_path.c_str(), &st) != 0)
    return Status::InvalidArgument(in.cache.root + ": no existing parent");
  f.dev = st.st_dev;
  f.root_mode = st.st_mode & 07777;
  f.root_uid = st.st_uid;
  f.root_gid = st.st_gid;
  f.mount = FindMount(ReadAll(in.sysroot + "/proc/self/mountinfo"), RealPath(f.fs_path), f.dev);
  ReadDisk(in.sysroot + "/sys", f.dev, &f);
  GatherSpace(in, &f);
  std::string limits = ReadAll(in.sysroot + "/proc/self/limits");
  f.nofile = ParseLimit(limits, "Max open files");
  f.memlock = ParseLimit(limits, "Max locked memory");
  GatherShm(in.sysroot + "/dev/shm", &f);
  return f;
}

namespace {

Finding Pass(std::string value) { return {Outcome::kPass, std::move(value), ""}; }
Finding Fail(std::string value, std::string fix = "") {
  return {Outcome::kFail, std::move(value), std::move(fix)};
}
Finding Skip(std::string why) { return {Outcome::kSkip, std::move(why), ""}; }

std::string Mode(uint32_t mode) {
  char s[16];
  std::snprintf(s, sizeof s, "%04o", mode & 07777);
  return s;
}

std::string RootLine(const DoctorInput& in, const NodeFacts& f) {
  return in.cache.root + " uid " + std::to_string(f.root_uid) + " gid " +
         std::to_string(f.root_gid) + " mode " + Mode(f.root_mode);
}

// --- the root ---------------------------------------------------------------

// Writable by others, not sticky: they could plant entries that would be
// served, so the cache refuses the root (CheckRootTrusted).
bool OpenToOthers(const DoctorInput& in, const NodeFacts& f) {
  bool sticky = f.root_mode & 01000;
  if (sticky) return false;
  return (f.root_mode & 002) || ((f.root_mode & 020) && !in.cache.group_shared);
}

Finding RootOpenToOthers(const DoctorInput& in, const NodeFacts& f) {
  if (!f.root_exists) return Skip(in.cache.root + " does not exist yet");
  if (!OpenToOthers(in, f)) return Pass(RootLine(in, f));
  bool world = f.root_mode & 002;
  return Fail(RootLine(in, f) + (world ? ": writable by all users" : ": writable by its group"));
}

Finding RootAccess(const DoctorInput& in, const NodeFacts& f) {
  if (!f.root_exists)
    return Pass(in.cache.root + " does not exist yet (warm or a loader creates it " +
                (in.cache.group_shared ? "2770)" : "0700)"));
  if (OpenToOthers(in, f)) return Skip("see root-open-to-others");
  if (Status s = CheckRootTrusted(Env::Default(), in.cache); !s.ok())
    return Fail(RootLine(in, f), s.message());
  if (::access(in.cache.root.c_str(), W_OK) != 0)
    return Fail(RootLine(in, f) + ": not writable by uid " + std::to_string(::geteuid()));
  return Pass(RootLine(in, f));
}

Finding RootOwner(const DoctorInput& in, const NodeFacts& f) {
  if (!f.root_exists) return Skip(in.cache.root + " does not exist yet");
  if (in.cache.group_shared) return Skip("--group-shared: see root-group-shared");
  if (f.root_uid != ::geteuid())
    return Fail(RootLine(in, f) + ": owned by another user; entries it made are only read");
  return Pass(RootLine(in, f));
}

Finding RootGroupShared(const DoctorInput& in, const NodeFacts& f) {
  if (!in.cache.group_shared) return Skip("no --group-shared");
  if (!f.root_exists) return Skip(in.cache.root + " does not exist yet");
  bool group_rwx = (f.root_mode & 070) == 070, setgid = f.root_mode & 02000;
  if (group_rwx && setgid) return Pass(RootLine(in, f));
  std::string what = !group_rwx ? ": its group may not create entries in it"
                                : ": no setgid bit, so new entries get each user's own group";
  return Fail(RootLine(in, f) + what, "chgrp GROUP " + in.cache.root + " && chmod 2770 " +
                                          in.cache.root + " (the group every job's user is in)");
}

// --- the filesystem and its mount -------------------------------------------

bool FsIs(const NodeFacts& f, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (f.mount.fstype == n) return true;
  return false;
}

std::string FsLine(const NodeFacts& f) {
  return f.mount.fstype + " on " + f.mount.point + " (" + f.mount.source + ")";
}

Finding FsCheck(const NodeFacts& f, bool bad) {
  if (!f.mount.found) return Skip(f.fs_path + ": not in the mount table");
  return bad ? Fail(FsLine(f)) : Pass(FsLine(f));
}

Finding FsMemory(const DoctorInput&, const NodeFacts& f) {
  return FsCheck(f, FsIs(f, {"tmpfs", "ramfs"}));
}

Finding FsOverlay(const DoctorInput&, const NodeFacts& f) {
  return FsCheck(f, FsIs(f, {"overlay", "aufs", "fuse-overlayfs", "fuse.fuse-overlayfs"}));
}

Finding FsRemote(const DoctorInput&, const NodeFacts& f) {
  bool fuse = f.mount.fstype.rfind("fuse", 0) == 0 && !FsIs(f, {"fuse.fuse-overlayfs"});
  return FsCheck(
      f, fuse || FsIs(f, {"nfs", "nfs4", "cifs", "smb3", "9p", "ceph", "glusterfs", "lustre"}));
}

Finding FsNoOwners(const DoctorInput&, const NodeFacts& f) {
  return FsCheck(f, FsIs(f, {"vfat", "exfat", "msdos", "ntfs", "ntfs3"}));
}

Finding FsUntested(const DoctorInput& in, const NodeFacts& f) {
  if (!f.mount.found) return Skip(f.fs_path + ": not in the mount table");
  // The blocking filesystems are their own checks.
  for (auto* other : {FsMemory, FsOverlay, FsRemote, FsNoOwners})
    if (other(in, f).outcome == Outcome::kFail) return Skip(f.mount.fstype);
  return FsCheck(f, !FsIs(f, {"xfs", "ext4"}));
}

bool HasOption(const NodeFacts& f, const std::string& o) {
  return ("," + f.mount.options + ",").find("," + o + ",") != std::string::npos;
}

std::string MountLine(const NodeFacts& f) {
  return f.mount.point + " (" + f.mount.source + ", " + f.mount.options + ")";
}

Finding MountReadOnly(const DoctorInput&, const NodeFacts& f) {
  if (!f.mount.found) return Skip(f.fs_path + ": not in the mount table");
  return HasOption(f, "ro") ? Fail(MountLine(f)) : Pass(MountLine(f));
}

Finding MountNoatime(const DoctorInput&, const NodeFacts& f) {
  if (!f.mount.found) return Skip(f.fs_path + ": not in the mount table");
  if (HasOption(f, "noatime")) return Pass(MountLine(f));
  return Fail(MountLine(f), "remount with noatime: mount -o remount,noatime " + f.mount.point +
                                " (and add noatime to its fstab line)");
}

// --- the device ---------------------------------------------------------------

Finding DeviceRotational(const DoctorInput&, const NodeFacts& f) {
  if (f.disk.empty() || f.rotational.empty()) return Skip("no block device found");
  if (f.rotational == "1") return Fail(f.disk + " rotational");
  return Pass(f.disk + " non-rotational");
}

Finding IoScheduler(const DoctorInput&, const NodeFacts& f) {
  if (f.disk.empty() || f.scheduler.empty()) return Skip("no block device found");
  std::string v = f.disk + ": " + f.scheduler;
  if (f.disk.rfind("nvme", 0) != 0 || f.scheduler == "none") return Pass(v);
  return Fail(v, "echo none > /sys/block/" + f.disk +
                     "/queue/scheduler (persist it with a udev rule: ACTION==\"add|change\", "
                     "KERNEL==\"nvme*n*\", ATTR{queue/scheduler}=\"none\")");
}

// --- space ----------------------------------------------------------------------

std::string SpaceLine(const DoctorInput& in, const NodeFacts& f) {
  std::string v = FormatBytes(f.free_bytes) + " free of " + FormatBytes(f.total_bytes) +
                  ", cache holds " + FormatBytes(f.held_bytes);
  if (in.cache.capacity_bytes > 0) v += ", capacity " + FormatBytes(in.cache.capacity_bytes);
  return v;
}

Finding SpaceCapacity(const DoctorInput& in, const NodeFacts& f) {
  if (!f.space_known) return Skip("statvfs failed");
  if (in.cache.capacity_bytes == 0) return Skip("no --capacity");
  if (in.cache.capacity_bytes <= f.held_bytes + f.free_bytes) return Pass(SpaceLine(in, f));
  CacheOptions unset = in.cache;
  unset.capacity_bytes = 0;
  auto fits = f.root_exists ? EffectiveCapacity(unset) : Result<uint64_t>(f.free_bytes / 5 * 4);
  return Fail(SpaceLine(in, f), "lower --capacity to " +
                                    (fits.ok() ? FormatBytes(*fits) : std::string("less")) +
                                    " or free space on the filesystem");
}

Finding SpaceLow(const DoctorInput& in, const NodeFacts& f) {
  if (!f.space_known) return Skip("statvfs failed");
  if (f.total_bytes && f.free_bytes < f.total_bytes / 20) return Fail(SpaceLine(in, f));
  return Pass(SpaceLine(in, f));
}

// --- limits and shared memory ------------------------------------------------------

std::string LimitValue(uint64_t v, bool bytes) {
  if (v == Limit::kUnlimited) return "unlimited";
  return bytes ? FormatBytes(v) : std::to_string(v);
}

std::string LimitLine(const Limit& l, bool bytes) {
  return "soft " + LimitValue(l.soft, bytes) + ", hard " + LimitValue(l.hard, bytes);
}

// ssdfeed raises its soft limit to the hard one at start, so the hard limit
// is what counts. A reader keeps at most an eighth of it open for segment
// files and reopens the rest; every worker and job on the node shares it.
constexpr uint64_t kMinFiles = 4096;

Finding Nofile(const DoctorInput&, const NodeFacts& f) {
  if (!f.nofile.found) return Skip("/proc/self/limits does not say");
  if (f.nofile.hard < kMinFiles) return Fail(LimitLine(f.nofile, false) + " (< 4096)");
  return Pass(LimitLine(f.nofile, false));
}

// a * b * c, or UINT64_MAX past it (--batch-bytes 1000000T).
uint64_t SaturatingProduct(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t ab = 0, abc = 0;
  if (__builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, &abc)) return UINT64_MAX;
  return abc;
}

// What one job's loader pins: its ring of prefetch + 1 batches
// (ssdfeed.torch.Loader registers each with CUDA when pin_memory is on).
uint64_t PinnedBytes(const DoctorInput& in) {
  return SaturatingProduct(static_cast<uint64_t>(in.prefetch) + 1, 1, in.batch_bytes);
}

Finding Memlock(const DoctorInput& in, const NodeFacts& f) {
  if (!f.memlock.found) return Skip("/proc/self/limits does not say");
  uint64_t need = PinnedBytes(in);
  std::string v = LimitLine(f.memlock, true) + ", pinned batches need " + FormatBytes(need) +
                  " ((prefetch " + std::to_string(in.prefetch) + " + 1) x batch " +
                  FormatBytes(in.batch_bytes) + ")";
  return f.memlock.soft >= need ? Pass(v) : Fail(v);
}

// PyTorch DataLoader workers are processes: each hands its batches to the
// trainer through /dev/shm, and keeps prefetch of them in flight.
uint64_t ShmBytes(const DoctorInput& in) {
  return SaturatingProduct(static_cast<uint64_t>(in.workers), static_cast<uint64_t>(in.prefetch),
                           in.batch_bytes);
}

Finding ShmSize(const DoctorInput& in, const NodeFacts& f) {
  if (!f.shm_found) return Fail("/dev/shm missing", "mount a tmpfs on /dev/shm (--shm-size=8g)");
  uint64_t need = ShmBytes(in);
  std::string v = "/dev/shm " + FormatBytes(f.shm_bytes) + ", workers need " + FormatBytes(need) +
                  " (" + std::to_string(in.workers) + " workers x prefetch " +
                  std::to_string(in.prefetch) + " x batch " + FormatBytes(in.batch_bytes) + ")";
  return f.shm_bytes >= need ? Pass(v) : Fail(v);
}

}  // namespace

const std::vector<Check>& AllChecks() {
  using S = Severity;
  static const std::vector<Check> checks = {
      {"root-open-to-others", S::kBlocking,
       "chmod o-w,g-w the root (the cache refuses it), or share it with a group: chgrp GROUP, "
       "chmod 2770, --group-shared",
       RootOpenToOthers},
      {"root-access", S::kBlocking,
       "run as the root's owner (--user UID:GID, securityContext.runAsUser) or chown it",
       RootAccess},
      {"root-owner", S::kWarning,
       "use a root you own, or share it with a group (chgrp GROUP, chmod 2770, --group-shared)",
       RootOwner},
      {"root-group-shared", S::kWarning, "chgrp GROUP ROOT && chmod 2770 ROOT", RootGroupShared},
      {"fs-memory", S::kBlocking,
       "tmpfs is RAM, lost at reboot and taken from training: mount the local SSD (XFS or ext4) "
       "on the cache root",
       FsMemory},
      {"fs-overlay", S::kBlocking,
       "this is a container's writable layer, not the SSD: mount a host directory (-v, hostPath) "
       "on the cache root",
       FsOverlay},
      {"fs-remote", S::kBlocking,
       "a network or FUSE filesystem is not local storage: put the cache on the node's own SSD",
       FsRemote},
      {"fs-no-owners", S::kBlocking,
       "this filesystem has no owners, modes or locks: format the SSD XFS or ext4", FsNoOwners},
      {"fs-untested", S::kWarning,
       "XFS or ext4 are tested (btrfs and ZFS copy on write, adding write amplification)",
       FsUntested},
      {"mount-readonly", S::kBlocking, "remount it read-write (mount -o remount,rw MOUNTPOINT)",
       MountReadOnly},
      {"mount-noatime", S::kWarning, "remount with noatime (mount -o remount,noatime MOUNTPOINT)",
       MountNoatime},
      {"device-rotational", S::kWarning,
       "a spinning disk (or a virtual disk that says so): the cache wants an SSD, NVMe ideally",
       DeviceRotational},
      {"io-scheduler", S::kWarning, "echo none > /sys/block/DEV/queue/scheduler (NVMe)",
       IoScheduler},
      {"space-capacity", S::kBlocking, "lower --capacity or free space on the filesystem",
       SpaceCapacity},
      {"space-low", S::kWarning,
       "less than 5% free, so the cache evicts often: free space or use a larger volume", SpaceLow},
      {"nofile", S::kWarning,
       "raise the descriptor limit to 65536 (ulimit -n, --ulimit nofile=65536, LimitNOFILE=)",
       Nofile},
      {"memlock", S::kWarning,
       "raise the locked-memory limit for pinned memory (ulimit -l unlimited, --ulimit "
       "memlock=-1, LimitMEMLOCK=infinity)",
       Memlock},
      {"shm-size", S::kWarning,
       "give /dev/shm what the workers need (--shm-size=8g, an emptyDir medium: Memory) or lower "
       "--workers: DataLoader workers fail with 'bus error' when it fills",
       ShmSize},
  };
  return checks;
}

std::vector<CheckResult> RunChecks(const DoctorInput& in, const NodeFacts& facts) {
  std::vector<CheckResult> out;
  for (const Check& c : AllChecks()) out.push_back({&c, c.run(in, facts)});
  return out;
}

int ExitCode(const std::vector<CheckResult>& results) {
  int code = 0;
  for (const auto& r : results) {
    if (r.finding.outcome != Outcome::kFail) continue;
    code = std::max(code, r.check->severity == Severity::kBlocking ? 2 : 1);
  }
  return code;
}

const char* SeverityName(Severity s) { return s == Severity::kBlocking ? "blocking" : "warning"; }

const char* OutcomeName(Outcome o) {
  return o == Outcome::kPass ? "pass" : o == Outcome::kFail ? "fail" : "skip";
}

}  // namespace ssdfeed::doctor
