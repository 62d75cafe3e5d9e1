// ssdfeed doctor's checks against fixtures: a mount table, /proc/self/limits
// and /sys/dev/block written under a sysroot, and real root directories
// whose modes and owners the tests set. Each check is made to fail and to
// pass. The real-machine cases (a tmpfs, prlimit, chmod 777) run the CLI in
// tests/py/test_doctor.py.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "doctor/node_checks.h"
#include "test_util.h"

namespace ssdfeed::doctor {
namespace {

namespace fs = std::filesystem;

void Write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

std::string DevName(dev_t dev) {
  return std::to_string(major(dev)) + ":" + std::to_string(minor(dev));
}

constexpr char kGoodLimits[] =
    "Limit                     Soft Limit           Hard Limit           Units     \n"
    "Max open files            65536                65536                files     \n"
    "Max locked memory         unlimited            unlimited            bytes     \n";

// A node whose kernel files are fixtures, holding a real root directory.
class NodeChecks : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_.Sub("root");
    ASSERT_EQ(::mkdir(root_.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(root_.c_str(), 0700), 0);  // whatever the umask
    in_.cache.root = root_;
    in_.sysroot = dir_.Sub("sysroot");
    Mount("xfs", "rw,noatime");
    Write(in_.sysroot + "/proc/self/limits", kGoodLimits);
    // A directory of the test's filesystem: small batches pass on any disk.
    fs::create_directories(in_.sysroot + "/dev/shm");
    in_.batch_bytes = 1 << 20;
  }

  // The mount table: / on the disk, and the test's directory mounted as
  // `fstype` with `options`, on the device the root really has.
  void Mount(const std::string& fstype, const std::string& options) {
    struct stat st {};
    ASSERT_EQ(::stat(dir_.path().c_str(), &st), 0);
    std::string point = fs::canonical(dir_.path()).string();
    Write(in_.sysroot + "/proc/self/mountinfo",
          "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
          "40 22 " +
              DevName(st.st_dev) + " / " + point + " " + options + " shared:9 - " + fstype +
              " /dev/nvme0n1p1 rw\n");
  }

  std::map<std::string, CheckResult> Run() {
    auto facts = GatherFacts(in_);
    EXPECT_TRUE(facts.ok()) << facts.status().ToString();
    facts_ = *facts;
    return RunFacts();
  }
  std::map<std::string, CheckResult> RunFacts() {
    std::map<std::string, CheckResult> by_id;
    for (auto& r : RunChecks(in_, facts_)) by_id.emplace(r.check->id, r);
    return by_id;
  }
  Outcome Of(const std::string& id) { return Run().at(id).finding.outcome; }

  test::TempDir dir_;
  std::string root_;
  DoctorInput in_;
  NodeFacts facts_;
};

TEST_F(NodeChecks, AGoodNodePassesEveryCheckAndExitsZero) {
  auto results = RunChecks(in_, *GatherFacts(in_));
  for (const auto& r : results)
    EXPECT_NE(r.finding.outcome, Outcome::kFail) << r.check->id << ": " << r.finding.value;
  EXPECT_EQ(ExitCode(results), 0);
}

TEST_F(NodeChecks, EveryCheckHasAnIdASeverityAndAOneLineFix) {
  std::set<std::string> ids;
  for (const Check& c : AllChecks()) {
    EXPECT_TRUE(ids.insert(c.id).second) << "duplicate id " << c.id;
    EXPECT_FALSE(std::string(c.fix).empty()) << c.id;
    EXPECT_EQ(std::string(c.fix).find('\n'), std::string::npos) << c.id;
  }
  for (const char* id : {"fs-memory", "fs-overlay", "mount-noatime", "io-scheduler", "shm-size",
                         "memlock", "nofile", "root-open-to-others", "root-group-shared"})
    EXPECT_TRUE(ids.count(id)) << id;
}

TEST_F(NodeChecks, ExitCodeIsTheWorstFailedSeverity) {
  Mount("xfs", "rw,relatime");  // a warning
  auto warn = Run();
  EXPECT_EQ(warn.at("mount-noatime").finding.outcome, Outcome::kFail);
  std::vector<CheckResult> v;
  for (auto& [id, r] : warn) v.push_back(r);
  EXPECT_EQ(ExitCode(v), 1);
  Mount("tmpfs", "rw,noatime");  // blocking
  v.clear();
  for (auto& [id, r] : Run()) v.push_back(r);
  EXPECT_EQ(ExitCode(v), 2);
}

TEST_F(NodeChecks, TmpfsAndRamfsAreBlocking) {
  EXPECT_EQ(Of("fs-memory"), Outcome::kPass);
  for (const char* type : {"tmpfs", "ramfs"}) {
    Mount(type, "rw,noatime");
    auto r = Run().at("fs-memory");
    EXPECT_EQ(r.finding.outcome, Outcome::kFail) << type;
    EXPECT_EQ(r.check->severity, Severity::kBlocking);
    EXPECT_NE(r.finding.value.find(type), std::string::npos) << r.finding.value;
  }
  EXPECT_EQ(Of("fs-untested"), Outcome::kSkip);  // not also "untested"
}

TEST_F(NodeChecks, OverlayIsBlocking) {
  EXPECT_EQ(Of("fs-overlay"), Outcome::kPass);
  Mount("overlay", "rw,relatime");
  EXPECT_EQ(Of("fs-overlay"), Outcome::kFail);
}

TEST_F(NodeChecks, NetworkFilesystemsAndFatAreBlocking) {
  Mount("nfs4", "rw,noatime");
  EXPECT_EQ(Of("fs-remote"), Outcome::kFail);
  Mount("fuse.sshfs", "rw,noatime");
  EXPECT_EQ(Of("fs-remote"), Outcome::kFail);
  Mount("vfat", "rw,noatime");
  EXPECT_EQ(Of("fs-no-owners"), Outcome::kFail);
  EXPECT_EQ(Of("fs-remote"), Outcome::kPass);
}

TEST_F(NodeChecks, BtrfsIsAWarning) {
  EXPECT_EQ(Of("fs-untested"), Outcome::kPass);
  Mount("btrfs", "rw,noatime");
  auto r = Run().at("fs-untested");
  EXPECT_EQ(r.finding.outcome, Outcome::kFail);
  EXPECT_EQ(r.check->severity, Severity::kWarning);
}

TEST_F(NodeChecks, NoatimeMissingIsAWarningWhoseFixNamesTheMountPoint) {
  EXPECT_EQ(Of("mount-noatime"), Outcome::kPass);
  Mount("xfs", "rw,relatime");
  auto r = Run().at("mount-noatime");
  EXPECT_EQ(r.finding.outcome, Outcome::kFail);
  EXPECT_EQ(r.check->severity, Severity::kWarning);
  EXPECT_NE(r.fix().find("remount,noatime " + fs::canonical(dir_.path()).string()),
            std::string::npos)
      << r.fix();
}

TEST_F(NodeChecks, AReadOnlyMountIsBlocking) {
  EXPECT_EQ(Of("mount-readonly"), Outcome::kPass);
  Mount("xfs", "ro,noatime");
  EXPECT_EQ(Of("mount-readonly"), Outcome::kFail);
}

TEST(NodeMountTable, TheRootsMountIsTheLongestPrefixOnItsDevice) {
  std::string table =
      "22 1 8:1 / / rw shared:1 - ext4 /dev/sda1 rw\n"
      "30 22 259:1 / /mnt/nvme rw,noatime - xfs /dev/nvme0n1 rw\n"
      "31 22 0:50 / /mnt/nvme/other rw - tmpfs tmpfs rw\n"
      "32 30 259:1 /cache /srv/cache rw,noatime - xfs /dev/nvme0n1 rw\n";
  auto m = FindMount(table, "/mnt/nvme/ssdfeed", makedev(259, 1));
  EXPECT_EQ(m.point, "/mnt/nvme");
  EXPECT_EQ(m.fstype, "xfs");
  EXPECT_EQ(FindMount(table, "/mnt/nvme/other/x", makedev(0, 50)).fstype, "tmpfs");
  EXPECT_EQ(FindMount(table, "/srv/cache/e", makedev(259, 1)).point, "/srv/cache");
  EXPECT_EQ(FindMount(table, "/mnt/nvmeX", makedev(8, 1)).point, "/");  // not a prefix by name
  // A tmpfs mounted over the same point later hides the first.
  auto over = FindMount(table + "33 30 0:51 / /mnt/nvme rw - tmpfs tmpfs rw\n", "/mnt/nvme/ssdfeed",
                        makedev(0, 51));
  EXPECT_EQ(over.fstype, "tmpfs");
}

// /sys/dev/block/MAJ:MIN links to the partition, whose queue/ is its disk's.
void FakeDisk(const std::string& sys, const std::string& disk, const std::string& rotational,
              const std::string& scheduler) {
  std::string dev = sys + "/devices/pci0000:00/" + disk;
  Write(dev + "/queue/rotational", rotational + "\n");
  Write(dev + "/queue/scheduler", scheduler + "\n");
  fs::create_directories(dev + "/" + disk + "p1");
  fs::create_directories(sys + "/dev/block");
  fs::remove(sys + "/dev/block/259:1");
  fs::create_directory_symlink("../../devices/pci0000:00/" + disk + "/" + disk + "p1",
                               sys + "/dev/block/259:1");
}

TEST_F(NodeChecks, NvmeWantsTheNoneScheduler) {
  std::string sys = in_.sysroot + "/sys";
  FakeDisk(sys, "nvme0n1", "0", "[mq-deadline] kyber none");
  Run();
  ReadDisk(sys, makedev(259, 1), &facts_);
  EXPECT_EQ(facts_.disk, "nvme0n1");
  EXPECT_EQ(facts_.scheduler, "mq-deadline");
  auto r = RunFacts().at("io-scheduler");
  EXPECT_EQ(r.finding.outcome, Outcome::kFail);
  EXPECT_EQ(r.check->severity, Severity::kWarning);
  EXPECT_NE(r.fix().find("/sys/block/nvme0n1/queue/scheduler"), std::string::npos) << r.fix();

  FakeDisk(sys, "nvme0n1", "0", "mq-deadline kyber [none]");
  ReadDisk(sys, makedev(259, 1), &facts_);
  EXPECT_EQ(RunFacts().at("io-scheduler").finding.outcome, Outcome::kPass);
  EXPECT_EQ(RunFacts().at("device-rotational").finding.outcome, Outcome::kPass);
}

TEST_F(NodeChecks, ASpinningDiskIsAWarning) {
  std::string sys = in_.sysroot + "/sys";
  FakeDisk(sys, "sda", "1", "[mq-deadline] none");
  Run();
  ReadDisk(sys, makedev(259, 1), &facts_);
  auto r = RunFacts();
  EXPECT_EQ(r.at("device-rotational").finding.outcome, Outcome::kFail);
  EXPECT_EQ(r.at("io-scheduler").finding.outcome, Outcome::kPass);  // not NVMe
}

TEST_F(NodeChecks, ADescriptorLimitUnder4096IsAWarning) {
  EXPECT_EQ(Of("nofile"), Outcome::kPass);
  Write(in_.sysroot + "/proc/self/limits",
        "Max open files            1024                 1024                 files     \n");
  auto r = Run().at("nofile");
  EXPECT_EQ(r.finding.outcome, Outcome::kFail);
  EXPECT_EQ(r.finding.value, "soft 1024, hard 1024 (< 4096)");
  Write(in_.sysroot + "/proc/self/limits", "");
  EXPECT_EQ(Of("nofile"), Outcome::kSkip);  // unknown is not a failure
}

TEST_F(NodeChecks, MemlockMustHoldThePinnedBatches) {
  // (prefetch 2 + 1) x 64 MiB = 192 MiB pinned.
  in_.batch_bytes = 64 << 20;
  Write(in_.sysroot + "/proc/self/limits",
        "Max locked memory         8388608              8388608              bytes     \n");
  auto r = Run().at("memlock");
  EXPECT_EQ(r.finding.outcome, Outcome::kFail);
  EXPECT_NE(r.finding.value.find("pinned batches need 192.0 MiB"), std::string::npos)
      << r.finding.value;
  Write(in_.sysroot + "/proc/self/limits",
        "Max locked memory         201326592            201326592            bytes     \n");
  EXPECT_EQ(Of("memlock"), Outcome::kPass);
  in_.batch_bytes = 64 << 20 | 1;
  EXPECT_EQ(Of("memlock"), Outcome::kFail);
}

TEST_F(NodeChecks, ShmMustHoldEveryWorkersBatchesInFlight) {
  auto facts = *GatherFacts(in_);
  ASSERT_TRUE(facts.shm_found);
  EXPECT_EQ(Of("shm-size"), Outcome::kPass);
  // workers x prefetch x batch just over what the fixture's filesystem has.
  in_.workers = 2;
  in_.prefetch = 1;
  in_.batch_bytes = facts.shm_bytes / 2 + 1;
  auto r = Run().at("shm-size");
  EXPECT_EQ(r.finding.outcome, Outcome::kFail);
  EXPECT_NE(r.finding.value.find("2 workers x prefetch 1"), std::string::npos) << r.finding.value;
  in_.batch_bytes = facts.shm_bytes / 2;
  EXPECT_EQ(Of("shm-size"), Outcome::kPass);
  fs::remove(in_.sysroot + "/dev/shm");
  EXPECT_EQ(Of("shm-size"), Outcome::kFail);
}

TEST_F(NodeChecks, SizesPastTwoToThe64thNeverWrapToSmallOnes) {
  // 4096 x 1024 x 2^52 = 2^74, which wraps to 0 in 64 bits.
  in_.workers = 4096;
  in_.prefetch = 1024;
  in_.batch_bytes = 1ull << 52;
  auto r = Run();
  EXPECT_EQ(r.at("shm-size").finding.outcome, Outcome::kFail) << r.at("shm-size").finding.value;
  Write(in_.sysroot + "/proc/self/limits",
        "Max locked memory         1048576              1048576              bytes     \n");
  in_.prefetch = (1 << 12) - 1;  // (prefetch + 1) x 2^52 = 2^64
  EXPECT_EQ(Of("memlock"), Outcome::kFail);
}

TEST_F(NodeChecks, ARootOthersCanWriteIsBlockingUnlessSticky) {
  EXPECT_EQ(Of("root-open-to-others"), Outcome::kPass);
  ASSERT_EQ(::chmod(root_.c_str(), 0777), 0);
  auto r = Run();
  EXPECT_EQ(r.at("root-open-to-others").finding.outcome, Outcome::kFail);
  EXPECT_EQ(r.at("root-open-to-others").check->severity, Severity::kBlocking);
  EXPECT_EQ(r.at("root-access").finding.outcome, Outcome::kSkip);
  ASSERT_EQ(::chmod(root_.c_str(), 01777), 0);
  EXPECT_EQ(Of("root-open-to-others"), Outcome::kPass);
  ASSERT_EQ(::chmod(root_.c_str(), 0770), 0);  // the group may write, not asked to share
  EXPECT_EQ(Of("root-open-to-others"), Outcome::kFail);
  in_.cache.group_shared = true;
  EXPECT_EQ(Of("root-open-to-others"), Outcome::kPass);
}

TEST_F(NodeChecks, AGroupSharedRootWantsGroupWriteAndSetgid) {
  in_.cache.group_shared = true;
  EXPECT_EQ(Of("root-group-shared"), Outcome::kFail);  // 0700: the group may not write
  ASSERT_EQ(::chmod(root_.c_str(), 0770), 0);
  auto r = Run().at("root-group-shared");
  EXPECT_EQ(r.finding.outcome, Outcome::kFail);
  EXPECT_NE(r.finding.value.find("no setgid bit"), std::string::npos) << r.finding.value;
  EXPECT_NE(r.fix().find("chmod 2770 " + root_), std::string::npos) << r.fix();
  ASSERT_EQ(::chmod(root_.c_str(), 02770), 0);
  EXPECT_EQ(Of("root-group-shared"), Outcome::kPass);
  in_.cache.group_shared = false;
  EXPECT_EQ(Of("root-group-shared"), Outcome::kSkip);
}

TEST_F(NodeChecks, ARootTheCacheRefusesIsBlocking) {
  EXPECT_EQ(Of("root-access"), Outcome::kPass);
  ASSERT_EQ(::symlink("/tmp", (root_ + "/entries").c_str()), 0);
  auto r = Run().at("root-access");
  EXPECT_EQ(r.finding.outcome, Outcome::kFail);
  EXPECT_NE(r.fix().find("not a directory (a symlink?)"), std::string::npos) << r.fix();
}

TEST_F(NodeChecks, ARootOwnedByAnotherUserIsAWarning) {
  EXPECT_EQ(Of("root-owner"), Outcome::kPass);
  if (::geteuid() != 0) GTEST_SKIP() << "chown to another uid needs root";
  ASSERT_EQ(::chown(root_.c_str(), 12345, 12345), 0);
  auto r = Run().at("root-owner");
  EXPECT_EQ(r.finding.outcome, Outcome::kFail);
  EXPECT_EQ(r.check->severity, Severity::kWarning);
}

TEST_F(NodeChecks, ACapacityLargerThanTheFilesystemIsBlocking) {
  EXPECT_EQ(Of("space-capacity"), Outcome::kSkip);  // none given
  in_.cache.capacity_bytes = 1ull << 30;
  EXPECT_EQ(Of("space-capacity"), Outcome::kPass);
  in_.cache.capacity_bytes = 1ull << 60;
  EXPECT_EQ(Of("space-capacity"), Outcome::kFail);
}

TEST_F(NodeChecks, LowSpaceIsAWarning) {
  Run();
  facts_.free_bytes = facts_.total_bytes / 20;
  EXPECT_EQ(RunFacts().at("space-low").finding.outcome, Outcome::kPass);
  facts_.free_bytes = facts_.total_bytes / 20 - 1;
  EXPECT_EQ(RunFacts().at("space-low").finding.outcome, Outcome::kFail);
}

}  // namespace
}  // namespace ssdfeed::doctor
