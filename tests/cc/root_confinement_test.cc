// The cache root as a trust boundary: nothing outside it is touched through
// a symlink planted inside it (at any component, even one swapped in after
// the trust check), and nothing planted by an untrusted user is served.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>

#include <filesystem>
#include <fstream>

#include "cache/capacity.h"
#include "cache_test_util.h"
#include "ssdfeed/cache.h"
#include "ssdfeed/dataset.h"
#include "ssdfeed/metrics.h"
#include "test_util.h"

namespace ssdfeed {
namespace {

using test::FakeKey;
using test::PutFake;

CacheOptions Opts(const std::string& root, Env* env = nullptr) {
  CacheOptions o;
  o.root = root;
  o.env = env;
  o.capacity_bytes = 1ull << 30;
  o.reserve_chunk = 1 << 20;
  return o;
}

// A directory of someone's files that must survive: dir/keep and dir/sub/keep.
void MakeVictim(const std::string& dir) {
  std::filesystem::create_directories(dir + "/sub");
  std::ofstream(dir + "/keep") << "mine";
  std::ofstream(dir + "/sub/keep") << "mine too";
}

void ExpectIntact(const std::string& dir) {
  EXPECT_TRUE(std::filesystem::exists(dir + "/keep")) << dir << "/keep was deleted";
  EXPECT_TRUE(std::filesystem::exists(dir + "/sub/keep")) << dir << "/sub/keep was deleted";
}

// An entry last used long ago, so gc --older-than takes it.
std::string OldEntry(const CacheOptions& o) {
  std::string dir;
  {
    auto e = CacheEntry::Open(o, FakeKey(20, "old"));
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    for (uint64_t id = 0; id < 20; ++id) EXPECT_TRUE(PutFake(e->get(), id).ok());
    dir = (*e)->dir();
  }
  struct utimbuf u {
    1000, 1000
  };
  ::utime(JoinPath(dir, "last_used").c_str(), &u);
  ::utime(dir.c_str(), &u);
  return dir;
}

// What a group member can do in a group-writable root: trash/ becomes a
// link to `outside`.
void SymlinkTrashTo(const std::string& root, const std::string& outside) {
  ASSERT_EQ(::rename((root + "/trash").c_str(), (root + "/.t").c_str()), 0);
  ASSERT_EQ(::symlink(outside.c_str(), (root + "/trash").c_str()), 0);
}

bool CanChown() {
  test::TempDir d;
  std::string f = d.Sub("f");
  std::ofstream(f) << "x";
  return ::chown(f.c_str(), 4311, 4311) == 0;
}

TEST(RootConfinement, EnvRefusesASymlinkAtAnyComponentBelowTheRoot) {
  test::TempDir tmp;
  std::string root = tmp.Sub("c"), outside = tmp.Sub("outside");
  ASSERT_EQ(::mkdir(root.c_str(), 0700), 0);
  MakeVictim(outside + "/x");
  ASSERT_EQ(::symlink(outside.c_str(), (root + "/trash").c_str()), 0);
  Env* env = Env::Default();
  ASSERT_TRUE(env->ConfineRoot(root).ok());
  Status rm = env->RemoveDirAndFiles(root + "/trash/x");
  EXPECT_FALSE(rm.ok());
  EXPECT_NE(rm.message().find("symlink"), std::string::npos) << rm.ToString();
  std::vector<std::string> names;
  EXPECT_FALSE(env->GetChildren(root + "/trash", &names).ok());
  EXPECT_FALSE(env->RemoveFile(root + "/trash/x/keep").ok());
  EXPECT_FALSE(env->NewWritableFile(root + "/trash/new").ok());
  EXPECT_FALSE(env->CreateDir(root + "/trash/newdir").ok());
  EXPECT_FALSE(env->RenameFile(root + "/trash/x", root + "/moved").ok());
  EXPECT_FALSE(env->Stat(root + "/trash").ok() && env->Stat(root + "/trash")->is_dir)
      << "Stat followed the link";
  ExpectIntact(outside + "/x");
  EXPECT_FALSE(std::filesystem::exists(outside + "/new"));
  EXPECT_FALSE(std::filesystem::exists(outside + "/newdir"));
  // Outside the root, paths resolve as before (datasets may be symlinks).
  ASSERT_EQ(::symlink(outside.c_str(), tmp.Sub("link").c_str()), 0);
  EXPECT_TRUE(env->GetChildren(tmp.Sub("link"), &names).ok());
}

// The exporter (often run as root) reads a root nobody checked first: a
// stats/ that another user made a symlink (in a sticky root, before the
// owner's first job) must not let the fold lock and the folded files be
// written or deleted where it points.
TEST(RootConfinement, CollectingStatsNeverWritesThroughASymlinkedStatsDir) {
  test::TempDir tmp;
  std::string root = tmp.Sub("c"), outside = tmp.Sub("outside");
  ASSERT_EQ(::mkdir(root.c_str(), 0700), 0);
  MakeVictim(outside);
  ASSERT_EQ(::symlink(outside.c_str(), (root + "/stats").c_str()), 0);
  auto s = CollectRootStats(nullptr, Opts(root));
  if (!s.ok()) {
    EXPECT_NE(s.status().message().find("symlink"), std::string::npos) << s.status().ToString();
  }
  EXPECT_FALSE(std::filesystem::exists(outside + "/.fold.lock"))
      << "the fold lock was made outside";
  ExpectIntact(outside);
}

// Listing (ls, the exporter, node labels) reads manifests and indexes any
// member of a group-shared root, or an imported stream, may have written: a
// samples_total near 2^64 and a sparse terabyte .idx or manifest must cost neither a
// bitmap of that size (whose word count wrapped to 0, so marks were written
// out of bounds) nor an allocation of the file's size.
TEST(RootConfinement, ListingAnEntryWithHugeSamplesTotalAndSparseIdxStaysBounded) {
  test::TempDir tmp;
  CacheOptions o = Opts(tmp.Sub("c"));
  std::string dir = OldEntry(o);
  std::string manifest = JoinPath(dir, "manifest.json");
  std::ifstream in(manifest);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string was = "\"samples_total\": 20";
  size_t at = text.find(was);
  ASSERT_NE(at, std::string::npos) << text;
  // The largest samples_total a manifest may declare (2^32): listing it
  // must not cost memory in proportion to it.
  std::string big = text;
  big.replace(at, was.size(), "\"samples_total\": 4294967296");
  std::ofstream(manifest, std::ios::trunc) << big;
  auto list = ListEntries(o);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].state, "partial");
  EXPECT_EQ((*list)[0].samples_present, 20u);
  std::string idx;
  for (const auto& f : std::filesystem::directory_iterator(dir))
    if (f.path().extension() == ".idx") idx = f.path();
  ASSERT_FALSE(idx.empty());
  ASSERT_EQ(::truncate(idx.c_str(), 1ll << 40), 0);
  list = ListEntries(o);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ((*list)[0].samples_present, 20u);
  // Past it (2^64 - 1 once wrapped a bit vector's size to 0): listed as
  // broken, naming what is wrong.
  std::string huge = text;
  huge.replace(at, was.size(), "\"samples_total\": 18446744073709551615");
  std::ofstream(manifest, std::ios::trunc) << huge;
  list = ListEntries(o);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ((*list)[0].state.rfind("broken:", 0), 0u) << (*list)[0].state;
  EXPECT_NE((*list)[0].state.find("samples_total"), std::string::npos) << (*list)[0].state;
  ASSERT_EQ(::truncate(manifest.c_str(), 1ll << 40), 0);
  list = ListEntries(o);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_NE((*list)[0].state.find("too large for a manifest"), std::string::npos)
      << (*list)[0].state;
}

TEST(RootConfinement, ARootThatIsASymlinkIsRefusedWithWhatToGiveInstead) {
  test::TempDir tmp;
  ASSERT_EQ(::mkdir(tmp.Sub("real").c_str(), 0700), 0);
  ASSERT_EQ(::symlink(tmp.Sub("real").c_str(), tmp.Sub("c").c_str()), 0);
  auto e = CacheEntry::Open(Opts(tmp.Sub("c")), FakeKey(5));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("is a symlink"), std::string::npos) << e.status().ToString();
}

TEST(RootConfinement, ARootMadeAnewAtTheSamePathIsUsed) {
  test::TempDir tmp;
  CacheOptions o = Opts(tmp.Sub("c"));
  ASSERT_TRUE(CacheEntry::Open(o, FakeKey(5)).ok());
  std::filesystem::remove_all(tmp.Sub("c"));
  auto e = CacheEntry::Open(o, FakeKey(5));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_TRUE(PutFake(e->get(), 1).ok());
  EXPECT_TRUE(std::filesystem::exists(tmp.Sub("c/entries")));
}

TEST(RootConfinement, GcRefusesASymlinkedTrashAndDeletesNothingOutside) {
  test::TempDir tmp;
  CacheOptions o = Opts(tmp.Sub("c"));
  OldEntry(o);
  std::string outside = tmp.Sub("outside");
  MakeVictim(outside + "/x");
  SymlinkTrashTo(o.root, outside);
  auto removed = CollectGarbage(o, 0, 60);
  ASSERT_FALSE(removed.ok()) << "gc went on with a symlinked trash/";
  EXPECT_NE(removed.status().message().find("trash"), std::string::npos)
      << removed.status().ToString();
  EXPECT_FALSE(CacheEntry::Open(o, FakeKey(5)).ok()) << "a job went on with a symlinked trash/";
  EXPECT_FALSE(RemoveEntry(o, "0000").ok());
  ExpectIntact(outside + "/x");
}

// Swaps trash/ for a symlink to `outside` the first time trash/ is listed:
// after every check, as a racing group member would.
class SwapTrashEnv : public EnvWrapper {
 public:
  SwapTrashEnv(std::string root, std::string outside)
      : EnvWrapper(Env::Default()), root_(std::move(root)), outside_(std::move(outside)) {}
  Status GetChildren(const std::string& dir, std::vector<std::string>* names) override {
    Status s = EnvWrapper::GetChildren(dir, names);
    if (dir == root_ + "/trash" && !swapped_) {
      swapped_ = true;
      EXPECT_EQ(::rename(dir.c_str(), (root_ + "/.t").c_str()), 0);
      EXPECT_EQ(::symlink(outside_.c_str(), dir.c_str()), 0);
    }
    return s;
  }
  bool swapped_ = false;

 private:
  std::string root_, outside_;
};

TEST(RootConfinement, TrashSwappedForASymlinkAfterTheCheckDeletesNothingOutside) {
  test::TempDir tmp;
  std::string root = tmp.Sub("c"), outside = tmp.Sub("outside");
  CacheOptions o = Opts(root);
  OldEntry(o);
  // A name in trash/ that also exists outside: emptying trash/x through the
  // link would delete outside/x's files.
  MakeVictim(outside + "/x");
  ASSERT_EQ(::mkdir((root + "/trash/x").c_str(), 0700), 0);
  SwapTrashEnv env(root, outside);
  o.env = &env;
  auto removed = CollectGarbage(o, 0, 60);
  EXPECT_TRUE(env.swapped_);
  (void)removed;  // it may fail or not; what matters is what is left outside
  ExpectIntact(outside + "/x");
}

TEST(RootConfinement, EntriesDirSwappedForASymlinkIsNeverWrittenThrough) {
  test::TempDir tmp;
  std::string root = tmp.Sub("c"), outside = tmp.Sub("outside");
  CacheOptions o = Opts(root);
  ASSERT_TRUE(CacheEntry::Open(o, FakeKey(5)).ok());
  ASSERT_EQ(::mkdir(outside.c_str(), 0700), 0);
  ASSERT_EQ(::rename((root + "/entries").c_str(), (root + "/.e").c_str()), 0);
  ASSERT_EQ(::symlink(outside.c_str(), (root + "/entries").c_str()), 0);
  // Between the trust check and the create, as a race would have it: the
  // Env is confined, so the create through entries/ fails.
  ASSERT_TRUE(Env::Default()->ConfineRoot(root).ok());
  auto f = Env::Default()->NewWritableFile(root + "/entries/planted");
  EXPECT_FALSE(f.ok());
  EXPECT_TRUE(std::filesystem::is_empty(outside)) << "a file was created outside the root";
  EXPECT_FALSE(CacheEntry::Open(o, FakeKey(6)).ok());
  EXPECT_TRUE(std::filesystem::is_empty(outside));
}

TEST(RootConfinement, AnEntryPlantedByAnotherUserIsNotServed) {
  if (!CanChown()) GTEST_SKIP() << "needs root (chown to another uid)";
  test::TempDir tmp;
  std::string root = tmp.Sub("c");
  CacheOptions o = Opts(root);
  std::string dir;
  {
    auto e = CacheEntry::Open(o, FakeKey(16));
    ASSERT_TRUE(e.ok());
    for (uint64_t id = 0; id < 16; ++id) ASSERT_TRUE(PutFake(e->get(), id).ok());
    dir = (*e)->dir();
  }
  // Another user's entry under our fingerprint (in a sticky root they can
  // make one), readable, not writable by us: before, it was served read-only.
  ASSERT_EQ(test::RunCommand("chown -R 4311:4311 " + dir + " && chmod -R go+rX " + dir), 0);
  auto e = CacheEntry::Open(o, FakeKey(16));
  ASSERT_FALSE(e.ok()) << "a planted entry was opened (read_only=" << (*e)->read_only() << ")";
  EXPECT_NE(e.status().message().find("owned by uid 4311"), std::string::npos)
      << e.status().ToString();
  // The root's owner is trusted: a cache someone made for others to read.
  ASSERT_EQ(::chown(root.c_str(), 4311, 4311), 0);
  ASSERT_EQ(::chmod(root.c_str(), 0755), 0);
  auto theirs = CacheEntry::Open(o, FakeKey(16));
  ASSERT_TRUE(theirs.ok()) << theirs.status().ToString();
  EXPECT_TRUE((*theirs)->read_only());
}

// The capacity lock and ledger sit at the top of the root, where anyone may
// create files in a sticky one: another user's lock, held, would stall
// every job; their ledger is read whole by every job.
TEST(RootConfinement, APlantedCapacityLockOrLedgerInAStickyRootIsRefused) {
  if (!CanChown()) GTEST_SKIP() << "needs root (chown to another uid)";
  test::TempDir tmp;
  std::string root = tmp.Sub("c");
  ASSERT_EQ(::mkdir(root.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(root.c_str(), 01777), 0);
  for (const char* f : {"capacity.lock", "capacity.ledger"}) {
    std::string p = JoinPath(root, f);
    std::ofstream(p) << "";
    ASSERT_EQ(::chown(p.c_str(), 4311, 4311), 0);
    auto e = CacheEntry::Open(Opts(root), FakeKey(5));
    ASSERT_FALSE(e.ok()) << f << " made by another user was accepted";
    EXPECT_NE(e.status().message().find(std::string(f) + ": owned by uid 4311"), std::string::npos)
        << e.status().ToString();
    ASSERT_EQ(::unlink(p.c_str()), 0);
  }
  EXPECT_TRUE(CacheEntry::Open(Opts(root), FakeKey(5)).ok());
}

// A sparse ledger (a group member's, in a group-shared root) is an error
// naming it, not its size in memory in every job.
TEST(RootConfinement, ASparseLedgerIsRefusedWithoutReadingIt) {
  test::TempDir tmp;
  CacheOptions o = Opts(tmp.Sub("c"));
  ASSERT_TRUE(CacheEntry::Open(o, FakeKey(5)).ok());
  std::string ledger = tmp.Sub("c/capacity.ledger");
  std::ofstream(ledger, std::ios::app) << "";
  ASSERT_EQ(::truncate(ledger.c_str(), 1ll << 40), 0);
  auto e = CacheEntry::Open(o, FakeKey(6));
  Status s = e.ok() ? PutFake(e->get(), 1) : e.status();
  ASSERT_FALSE(s.ok()) << "a 1 TiB ledger was accepted";
  EXPECT_NE(s.message().find("capacity.ledger"), std::string::npos) << s.ToString();
}

TEST(RootConfinement, PlantedDirectoriesInAStickyRootAreRefused) {
  if (!CanChown()) GTEST_SKIP() << "needs root (chown to another uid)";
  test::TempDir tmp;
  std::string root = tmp.Sub("c");
  ASSERT_EQ(::mkdir(root.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(root.c_str(), 01777), 0);
  for (const char* d : {"entries", "trash", "writers", "stats"}) {
    std::string p = JoinPath(root, d);
    ASSERT_EQ(::mkdir(p.c_str(), 0755), 0);
    ASSERT_EQ(::chown(p.c_str(), 4311, 4311), 0);
    auto e = CacheEntry::Open(Opts(root), FakeKey(5));
    ASSERT_FALSE(e.ok()) << d << "/ made by another user was accepted";
    EXPECT_NE(e.status().message().find(std::string(d) + ": owned by uid 4311"), std::string::npos)
        << e.status().ToString();
    ASSERT_EQ(::chown(p.c_str(), ::geteuid(), ::getegid()), 0);
  }
  EXPECT_TRUE(CacheEntry::Open(Opts(root), FakeKey(5)).ok());
  // Group-shared: a member of our group may own them.
  CacheOptions g = Opts(root);
  g.group_shared = true;
  ASSERT_EQ(::chown(JoinPath(root, "entries").c_str(), 4311, ::getegid()), 0);
  EXPECT_TRUE(CacheEntry::Open(g, FakeKey(5)).ok());
  EXPECT_FALSE(CacheEntry::Open(Opts(root), FakeKey(5)).ok());
}

// --- The same through the CLI, as root and as two other uids ---------------

TEST(RootConfinementCli, GcWithASymlinkedTrashFailsAndDeletesNothingOutside) {
  test::TempDir tmp;
  CacheOptions o = Opts(tmp.Sub("c"));
  OldEntry(o);
  std::string outside = tmp.Sub("outside");
  MakeVictim(outside + "/x");
  SymlinkTrashTo(o.root, outside);
  std::string out;
  int rc = test::RunCommand(test::CliPath() + " cache gc --older-than 1h --cache " + o.root, &out);
  EXPECT_NE(rc, 0) << "gc exited 0 with a symlinked trash/: " << out;
  EXPECT_NE(out.find("trash: not a directory"), std::string::npos) << out;
  ExpectIntact(outside + "/x");
}

std::string CannotRunAsOtherUids() {
  if (!CanChown()) return "needs root (chown to another uid)";
  for (int uid : {4321, 4322})
    if (auto why = test::CannotActAs(uid, uid); !why.empty()) return why;
  return "";
}

// A folder dataset in tmp/data that every uid can read (tmp itself 0711);
// its URI, or "" if it could not be made.
std::string DatasetEveryUidReads(const test::TempDir& tmp, size_t count) {
  if (::chmod(tmp.path().c_str(), 0711) != 0) return "";
  std::string uri = test::MakeTestDataset(
      {.dir = tmp.Sub("data"), .format = "folder", .count = count, .min_side = 40, .max_side = 60});
  if (uri.empty() || test::RunCommand("chmod -R a+rX " + tmp.Sub("data")) != 0) return "";
  return uri;
}

std::string AsUser(int uid, const std::string& cmd) {
  return "/usr/bin/setpriv --reuid=" + std::to_string(uid) + " --regid=" + std::to_string(uid) +
         " --clear-groups /bin/sh -c 'umask 022; " + cmd + "'";
}

TEST(RootConfinementCli, AnEntryPlantedInAStickyRootIsNotServedToAnotherUser) {
  if (auto why = CannotRunAsOtherUids(); !why.empty()) GTEST_SKIP() << why;
  test::TempDir tmp;
  const std::string data_uri = DatasetEveryUidReads(tmp, 16);
  ASSERT_FALSE(data_uri.empty());
  std::string root = tmp.Sub("shared");
  ASSERT_EQ(::mkdir(root.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(root.c_str(), 01777), 0);  // as /tmp
  std::string warm = test::CliPath() + " warm --source " + data_uri + " --cache " + root +
                     " --resize-short 32 --json --quiet --workers 1";
  std::string out;
  // The attacker fills an entry under the victim's fingerprint (they can
  // read the dataset), then opens it up for reading.
  ASSERT_EQ(test::RunCommand(AsUser(4321, warm + " && chmod -R a+rX " + root + "/entries"), &out),
            0)
      << out;
  int rc = test::RunCommand(AsUser(4322, test::CliPath() + " cache verify --cache " + root), &out);
  EXPECT_NE(rc, 0) << "the victim verified (and would be served) the planted entry: " << out;
  EXPECT_NE(out.find("owned by uid 4321"), std::string::npos) << out;
  rc = test::RunCommand(AsUser(4322, warm), &out);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("owned by uid 4321"), std::string::npos) << out;
}

// What a container's process sees when the runtime mounts the image's own
// /var/cache/ssdfeed (uid 10001, 0700) over the host directory given with -v
// (buildah 1.28 does in about one run in four): a root of another uid that
// it may not enter. The error says whose root it is and what to do, where it
// said "lstat ROOT/entries: Permission denied"; nothing is made in it.
TEST(RootConfinementCli, ARootWeMayNotEnterSaysWhoseItIsAndWhatToDo) {
  if (auto why = CannotRunAsOtherUids(); !why.empty()) GTEST_SKIP() << why;
  test::TempDir tmp;
  const std::string data_uri = DatasetEveryUidReads(tmp, 8);
  ASSERT_FALSE(data_uri.empty());
  std::string root = tmp.Sub("image-own");
  ASSERT_EQ(::mkdir(root.c_str(), 0700), 0);
  ASSERT_EQ(::chown(root.c_str(), 4321, 4321), 0);
  const std::string cli = test::CliPath();
  for (const std::string& cmd :
       {cli + " warm --source " + data_uri + " --cache " + root + " --resize-short 32 --quiet",
        cli + " cache ls --cache " + root, cli + " doctor --cache " + root}) {
    std::string out;
    int rc = test::RunCommand(AsUser(4322, cmd + " 2>&1"), &out);
    EXPECT_NE(rc, 0) << cmd << ": " << out;
    EXPECT_NE(out.find(root + ": the cache root is owned by uid 4321 gid 4321 with mode 0700, so "
                              "uid 4322 (gid 4322) may not enter it"),
              std::string::npos)
        << cmd << ": " << out;
    EXPECT_NE(out.find("a VOLUME the image declares at the same path"), std::string::npos) << out;
  }
  EXPECT_TRUE(std::filesystem::is_empty(root));
}

// The same for a root we may enter but not write in (a host directory of
// another uid, mode 0755): the warm-up says so where it said "mkdir
// ROOT/entries: Permission denied". Reading it stays allowed.
TEST(RootConfinementCli, ARootWeMayNotWriteInSaysWhoseItIsAndWhatToDo) {
  if (auto why = CannotRunAsOtherUids(); !why.empty()) GTEST_SKIP() << why;
  test::TempDir tmp;
  const std::string data_uri = DatasetEveryUidReads(tmp, 8);
  ASSERT_FALSE(data_uri.empty());
  std::string root = tmp.Sub("theirs");
  ASSERT_EQ(::mkdir(root.c_str(), 0755), 0);
  ASSERT_EQ(::chmod(root.c_str(), 0755), 0);
  ASSERT_EQ(::chown(root.c_str(), 4321, 4321), 0);
  std::string out;
  int rc =
      test::RunCommand(AsUser(4322, test::CliPath() + " warm --source " + data_uri + " --cache " +
                                        root + " --resize-short 32 --quiet 2>&1"),
                       &out);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find(root +
                     ": the cache root is owned by uid 4321 gid 4321 with mode 0755, so "
                     "uid 4322 (gid 4322) may not write in it (mkdir " +
                     root + "/entries: Permission denied)"),
            std::string::npos)
      << out;
  EXPECT_TRUE(std::filesystem::is_empty(root));
  EXPECT_EQ(test::RunCommand(AsUser(4322, test::CliPath() + " cache ls --cache " + root), &out), 0)
      << out;
}

}  // namespace
}  // namespace ssdfeed
