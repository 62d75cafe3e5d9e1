#include <gtest/gtest.h>

#include <algorithm>

#include "test_util.h"

namespace ssdfeed {
namespace {

TEST(Cli, VersionAndHelp) {
  std::string out;
  ASSERT_EQ(test::RunCommand(test::CliPath() + " --version", &out), 0);
  EXPECT_NE(out.find(SSDFEED_VERSION), std::string::npos);
  ASSERT_EQ(test::RunCommand(test::CliPath() + " --help", &out), 0);
  EXPECT_NE(out.find("make-dataset"), std::string::npos);
  EXPECT_NE(out.find("cache"), std::string::npos);
}

// The smallest sides it accepts: an uncaught OpenCV exception aborted it.
TEST(Cli, MakeDatasetWithTheSmallestSides) {
  test::TempDir dir;
  std::string out;
  EXPECT_EQ(test::RunCommand(test::CliPath() + " make-dataset " + dir.Sub("d") +
                                 " --count 40 --min-side 16 --max-side 20",
                             &out),
            0)
      << out;
  EXPECT_NE(out.find("wrote 40 samples"), std::string::npos) << out;
}

TEST(Cli, ShortVersionFlag) {
  std::string out;
  ASSERT_EQ(test::RunCommand(test::CliPath() + " -V", &out), 0);
  EXPECT_NE(out.find(SSDFEED_VERSION), std::string::npos);
}

// Exit 2 and one stderr line naming the flag and the accepted range.
void ExpectUsageError(const std::string& args, const std::string& want) {
  std::string out;
  // stderr only: (cmd 2>&1 >/dev/null) 2>&1
  std::string cmd = "(";
  cmd.append(test::CliPath()).append(" ").append(args).append(" 2>&1 >/dev/null)");
  int rc = test::RunCommand(cmd, &out);
  EXPECT_EQ(rc, 2) << args << ": " << out;
  EXPECT_EQ(out.find("ssdfeed: "), 0u) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_NE(out.find(want), std::string::npos) << args << ": " << out;
}

TEST(Cli, BadNumbersAreUsageErrorsNamingTheRange) {
  test::TempDir d;
  std::string src = " --source folder:" + d.path() + " --cache " + d.Sub("c");
  ExpectUsageError("bench loader --batch 0" + src, "--batch");
  ExpectUsageError("bench loader --batch 0" + src, ">= 1");
  ExpectUsageError("warm --workers -2" + src, "--workers");
  ExpectUsageError("warm --workers -2" + src, ">= 0 (0: one per core)");
  ExpectUsageError("warm --resize-short 0" + src, "--resize-short");
  ExpectUsageError("warm --resize 0x10" + src, "--resize: expected HxW with H, W >= 1");
  ExpectUsageError("cache gc --max-bytes 0 --cache " + d.path(),
                   "--max-bytes: expected a size > 0");
}

TEST(Cli, MistypedCacheRootIsAnErrorNamingIt) {
  test::TempDir d;
  std::string missing = d.Sub("no-such-cache");
  for (std::string verb : {"ls", "verify", "gc --max-bytes 1G", "rm 0123456789"}) {
    ExpectUsageError("cache " + verb + " --cache " + missing, missing + " does not exist");
  }
}

TEST(Cli, UnknownCommandFailsWithOneLine) {
  std::string out;
  int rc = test::RunCommand(test::CliPath() + " frobnicate", &out);
  EXPECT_NE(rc, 0);
  EXPECT_EQ(out.find("ssdfeed: "), 0u) << out;
}

}  // namespace
}  // namespace ssdfeed
