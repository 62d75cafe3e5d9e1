#include <gtest/gtest.h>

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

TEST(Cli, UnknownCommandFailsWithOneLine) {
  std::string out;
  int rc = test::RunCommand(test::CliPath() + " frobnicate", &out);
  EXPECT_NE(rc, 0);
  EXPECT_EQ(out.find("ssdfeed: "), 0u) << out;
}

}  // namespace
}  // namespace ssdfeed
