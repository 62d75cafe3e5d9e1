// ssdfeed doctor --cache DIR: checks that a node is fit to hold the cache and
// says what to fix. Exit 1 when something is wrong (a check "fail"s);
// warnings are advice and keep exit 0.
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "cli/options.h"
#include "util/units.h"

namespace ssdfeed::cli {

namespace {

struct DoctorArgs {
  CacheArgs cache;
  bool json = false;
};

struct Check {
  std::string name, level, value, advice;  // level: ok | warn | fail
};

struct Doctor {
  std::vector<Check> checks;
  void Add(std::string name, std::string level, std::string value, std::string advice = "") {
    checks.push_back({std::move(name), std::move(level), std::move(value), std::move(advice)});
  }
  bool failed() const {
    for (const auto& c : checks)
      if (c.level == "fail") return true;
    return false;
  }
};

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

void CheckFsType(Doctor* d, const std::string& path) {
  struct statfs fs {};
  if (::statfs(path.c_str(), &fs) != 0)
    return d->Add("filesystem", "fail", path + ": statfs failed");
  struct Kind {
    unsigned long magic;
    const char *name, *level, *advice;
  };
  static const Kind kinds[] = {
      {0x58465342, "xfs", "ok", ""},
      {0xEF53, "ext4", "ok", ""},
      {0x9123683E, "btrfs", "warn",
       "copy-on-write adds write amplification; XFS or ext4 is better"},
      {0x2FC12FC1, "zfs", "warn", "XFS or ext4 on the local NVMe is better"},
      {0x01021994, "tmpfs", "fail",
       "tmpfs is RAM: lost at reboot and competes with training for memory; mount the local SSD "
       "(XFS or ext4) there"},
      {0x794C7630, "overlay", "fail",
       "overlay is a container's writable layer, not the SSD: mount a host directory (-v / "
       "hostPath) on the cache root"},
      {0x6969, "nfs", "fail", "NFS is not local storage: the cache belongs on the node's own SSD"},
      {0xFF534D42, "cifs", "fail", "a network filesystem: the cache belongs on the node's own SSD"},
      {0xFE534D42, "smb2", "fail", "a network filesystem: the cache belongs on the node's own SSD"},
      {0x65735546, "fuse", "fail",
       "FUSE filesystems are not local SSD storage (locks and O_DIRECT may not work)"},
      {0x4D44, "vfat", "fail", "FAT has no owners, modes or locks; format the SSD XFS or ext4"},
      {0x2011BAB0, "exfat", "fail",
       "exFAT has no owners, modes or locks; format the SSD XFS or ext4"},
  };
  for (const auto& k : kinds)
    if (static_cast<unsigned long>(fs.f_type) == k.magic)
      return d->Add("filesystem", k.level, k.name, k.advice);
  char hex[32];
  std::snprintf(hex, sizeof hex, "0x%lx", static_cast<unsigned long>(fs.f_type));
  d->Add("filesystem", "warn", std::string("unknown (magic ") + hex + ")",
         "XFS or ext4 are tested");
}

struct Mount {
  std::string point, options, fstype, source;
  bool found = false;
};

// The mountinfo line of path's device whose mount point is the longest
// prefix of its real path (bind mounts share a device).
Mount FindMount(const std::string& path, dev_t dev) {
  Mount best;
  char real[PATH_MAX];
  std::string rp = ::realpath(path.c_str(), real) ? real : path;
  std::ifstream f("/proc/self/mountinfo");
  std::string line;
  char want[32];
  std::snprintf(want, sizeof want, "%u:%u", major(dev), minor(dev));
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::string id, parent, mm, root, point, opts, tok;
    in >> id >> parent >> mm >> root >> point >> opts;
    if (mm != want) continue;
    while (in >> tok && tok != "-") {
    }
    Mount m;
    m.point = point;
    m.options = opts;
    in >> m.fstype >> m.source;
    bool prefix = rp.compare(0, point.size(), point) == 0 &&
                  (point == "/" || rp.size() == point.size() || rp[point.size()] == '/');
    if (prefix && (!best.found || point.size() > best.point.size())) {
      best = m;
      best.found = true;
    }
  }
  return best;
}

void CheckMount(Doctor* d, const std::string& path, dev_t dev) {
  Mount m = FindMount(path, dev);
  if (!m.found) return d->Add("mount", "warn", "not found in /proc/self/mountinfo");
  std::string v = m.point + " (" + m.source + ", " + m.options + ")";
  auto has = [&](const std::string& o) {
    return ("," + m.options + ",").find("," + o + ",") != std::string::npos;
  };
  if (has("ro")) return d->Add("mount", "fail", v, "mounted read-only");
  if (has("noatime")) return d->Add("mount", "ok", v);
  d->Add("mount", "warn", v, "mount with noatime: reads then never write access times back");
}

std::string ReadLine(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

void CheckDevice(Doctor* d, dev_t dev) {
  if (major(dev) == 0) return d->Add("device", "ok", "no block device (virtual filesystem)");
  char sys[64];
  std::snprintf(sys, sizeof sys, "/sys/dev/block/%u:%u", major(dev), minor(dev));
  char real[PATH_MAX];
  if (!::realpath(sys, real)) return d->Add("device", "warn", std::string(sys) + " not readable");
  std::string dir = real;
  // A partition's queue/ is its disk's.
  if (ReadLine(dir + "/queue/rotational").empty()) dir = dir.substr(0, dir.find_last_of('/'));
  std::string name = dir.substr(dir.find_last_of('/') + 1);
  std::string rot = ReadLine(dir + "/queue/rotational"), sched = ReadLine(dir + "/queue/scheduler");
  auto open = sched.find('['), close = sched.find(']');
  std::string active =
      open != std::string::npos && close > open ? sched.substr(open + 1, close - open - 1) : sched;
  if (rot == "1")
    d->Add(
        "device", "warn", name + " rotational",
        "a spinning disk (or a virtual disk that says so): the cache wants an SSD, NVMe ideally");
  else
    d->Add("device", "ok", name + (rot.empty() ? "" : " non-rotational"));
  if (active.empty()) return;
  if (name.rfind("nvme", 0) == 0 && active != "none")
    return d->Add("scheduler", "warn", name + ": " + active,
                  "NVMe wants the none scheduler: echo none > /sys/block/" + name +
                      "/queue/scheduler (or a udev rule)");
  d->Add("scheduler", "ok", name + ": " + active);
}

void CheckSpace(Doctor* d, const CacheOptions& c, const std::string& fs_path, bool exists) {
  uint64_t free_b = 0, total = 0;
  if (!Env::Default()->FsSpace(fs_path, &free_b, &total).ok())
    return d->Add("space", "warn", "statvfs failed");
  uint64_t held = 0;
  if (exists) {
    auto r = RootBytes(c);
    if (r.ok()) held = *r;
  }
  std::string v =
      FormatBytes(free_b) + " free of " + FormatBytes(total) + ", cache holds " + FormatBytes(held);
  if (c.capacity_bytes > 0) {
    v += ", capacity " + FormatBytes(c.capacity_bytes);
    CacheOptions unset = c;
    unset.capacity_bytes = 0;
    auto fits = exists ? EffectiveCapacity(unset) : Result<uint64_t>(free_b / 5 * 4);
    if (c.capacity_bytes > held + free_b)
      return d->Add("space", "fail", v,
                    "the capacity exceeds what the filesystem can hold: lower --capacity to " +
                        (fits.ok() ? FormatBytes(*fits) : std::string("less")) + " or free space");
  }
  if (total && free_b < total / 20)
    return d->Add(
        "space", "warn", v,
        "less than 5% free: the cache will evict often; free space or use a larger volume");
  d->Add("space", "ok", v);
}

void CheckOwner(Doctor* d, const CacheOptions& c, bool exists) {
  if (!exists)
    return d->Add("root", "ok", c.root + " does not exist yet (warm or a loader creates it 0700)");
  struct stat st {};
  if (::stat(c.root.c_str(), &st) != 0) return d->Add("root", "fail", c.root + ": cannot stat");
  char mode[16];
  std::snprintf(mode, sizeof mode, "%04o", st.st_mode & 07777);
  std::string v = c.root + " uid " + std::to_string(st.st_uid) + " gid " +
                  std::to_string(st.st_gid) + " mode " + mode;
  Status s = CheckRootTrusted(Env::Default(), c);
  if (!s.ok()) return d->Add("root", "fail", v, s.message());
  if (::access(c.root.c_str(), W_OK) != 0)
    return d->Add("root", "fail", v,
                  "not writable by uid " + std::to_string(::geteuid()) +
                      ": run as the owner (--user UID:GID, securityContext.runAsUser) or chown it");
  if (st.st_uid != ::geteuid() && !c.group_shared)
    return d->Add("root", "warn", v,
                  "owned by another user: entries it made are only read; use --group-shared for a "
                  "group's cache");
  d->Add("root", "ok", v);
}

void CheckFiles(Doctor* d) {
  struct rlimit rl {};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  std::string v =
      "soft " + std::to_string(rl.rlim_cur) + ", hard " +
      (rl.rlim_max == RLIM_INFINITY ? std::string("unlimited") : std::to_string(rl.rlim_max));
  // ssdfeed raises its soft limit to the hard one (this process did at
  // start), so the hard limit is what counts. Readers keep an eighth of it
  // for segment files and reopen the rest: a low limit costs reopens, and
  // data loader workers each need their share.
  if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 4096)
    return d->Add(
        "nofile", "warn", v,
        "raise the descriptor limit to 65536 (ulimit -n, --ulimit nofile=65536, LimitNOFILE=)");
  d->Add("nofile", "ok", v);
}

void CheckShm(Doctor* d) {
  struct statfs fs {};
  if (::statfs("/dev/shm", &fs) != 0)
    return d->Add("shm", "warn", "/dev/shm missing",
                  "PyTorch DataLoader workers pass batches through /dev/shm: mount one "
                  "(--shm-size=8g, an emptyDir medium: Memory)");
  uint64_t size = static_cast<uint64_t>(fs.f_blocks) * fs.f_bsize;
  std::string v = "/dev/shm " + FormatBytes(size);
  if (size < (1ull << 30))
    return d->Add("shm", "warn", v,
                  "PyTorch DataLoader workers pass each batch through /dev/shm; 64 MiB (the "
                  "container default) fails with 'bus error': give it several GiB (--shm-size=8g, "
                  "an emptyDir medium: Memory)");
  d->Add("shm", "ok", v);
}

int Report(const DoctorArgs& a, const Doctor& d, const std::string& root) {
  if (a.json) {
    nlohmann::json checks = nlohmann::json::array();
    for (const auto& c : d.checks)
      checks.push_back(
          {{"check", c.name}, {"level", c.level}, {"value", c.value}, {"advice", c.advice}});
    std::cout << nlohmann::json{{"root", root}, {"ok", !d.failed()}, {"checks", checks}}.dump()
              << "\n";
  } else {
    for (const auto& c : d.checks) {
      std::printf("%-4s  %-10s %s\n", c.level.c_str(), c.name.c_str(), c.value.c_str());
      if (!c.advice.empty()) std::printf("      %-10s -> %s\n", "", c.advice.c_str());
    }
  }
  return d.failed() ? kExitFailure : 0;
}

int RunDoctor(const DoctorArgs& a) {
  CacheOptions c;
  if (Status s = a.cache.ToOptions(&c); !s.ok()) return Fail(s.message(), kExitUsage);
  struct stat st {};
  bool exists = ::stat(c.root.c_str(), &st) == 0;
  if (exists && !S_ISDIR(st.st_mode)) return Fail(c.root + ": not a directory", kExitUsage);
  std::string fs_path = exists ? c.root : ExistingAncestor(c.root);
  if (!exists && ::stat(fs_path.c_str(), &st) != 0)
    return Fail(c.root + ": no existing parent", kExitUsage);
  Doctor d;
  CheckOwner(&d, c, exists);
  CheckFsType(&d, fs_path);
  CheckMount(&d, fs_path, st.st_dev);
  CheckDevice(&d, st.st_dev);
  CheckSpace(&d, c, fs_path, exists);
  CheckFiles(&d);
  CheckShm(&d);
  return Report(a, d, c.root);
}

}  // namespace

void AddDoctor(CLI::App& app, RunState* st) {
  auto* c = app.add_subcommand("doctor",
                               "Check that this node can hold the cache well, and say what to fix");
  auto a = std::make_shared<DoctorArgs>();
  a->cache.Add(c, true);
  c->add_flag("--json", a->json, "Print {root, ok, checks: [{check, level, value, advice}]}");
  c->callback([st, a] { st->rc = RunDoctor(*a); });
}

}  // namespace ssdfeed::cli
