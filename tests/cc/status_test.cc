// Status and Result: names of codes, Is helpers, and the aborts on misuse.
#include "ssdfeed/status.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <string>

namespace ssdfeed {
namespace {

TEST(Status, EveryCodeHasItsNameAndIsHelper) {
  struct Case {
    Status s;
    const char* name;
    bool (Status::*is)() const;
  };
  const Case cases[] = {
      {Status::NotFound("m"), "NotFound", &Status::IsNotFound},
      {Status::Corruption("m"), "Corruption", &Status::IsCorruption},
      {Status::InvalidArgument("m"), "InvalidArgument", &Status::IsInvalidArgument},
      {Status::IOError("m"), "IOError", &Status::IsIOError},
      {Status::NoSpace("m"), "NoSpace", &Status::IsNoSpace},
      {Status::NotSupported("m"), "NotSupported", &Status::IsNotSupported},
      {Status::Busy("m"), "Busy", &Status::IsBusy},
      {Status::Aborted("m"), "Aborted", &Status::IsAborted},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.s.ToString(), std::string(c.name) + ": m");
    EXPECT_FALSE(c.s.ok());
    for (const Case& other : cases) EXPECT_EQ((c.s.*other.is)(), &c == &other) << c.name;
  }
  EXPECT_EQ(Status::OK().ToString(), "OK");
}

TEST(Status, FromErrnoNamesTheFileAndMapsTheCode) {
  Status s = Status::FromErrno(ENOENT, "open /x");
  EXPECT_TRUE(s.IsNotFound());
  EXPECT_EQ(s.message().rfind("open /x: ", 0), 0u) << s.message();
  EXPECT_TRUE(Status::FromErrno(ENOSPC, "w").IsNoSpace());
  EXPECT_TRUE(Status::FromErrno(EDQUOT, "w").IsNoSpace());
  EXPECT_TRUE(Status::FromErrno(EWOULDBLOCK, "l").IsBusy());
  EXPECT_TRUE(Status::FromErrno(EIO, "r").IsIOError());
}

TEST(Status, WithContextKeepsTheCode) {
  Status s = Status::Corruption("bad magic").WithContext("/c/seg-0-0.dat");
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_EQ(s.message(), "/c/seg-0-0.dat: bad magic");
  EXPECT_TRUE(Status::OK().WithContext("x").ok());
}

TEST(Result, HoldsAValueOrAnError) {
  Result<int> v = 7;
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 7);
  EXPECT_TRUE(v.status().ok());
  Result<int> e = Status::NotFound("nothing");
  EXPECT_TRUE(e.status().IsNotFound());
}

// In every build type, not only with assertions on: the alternative is
// reading an empty optional.
TEST(ResultDeathTest, ValueOfAnErrorAbortsNamingTheStatus) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Result<int> e = Status::NotFound("open /data/x");
  EXPECT_DEATH((void)e.value(),
               "value\\(\\) of a Result that holds an error: NotFound: open /data/x");
  EXPECT_DEATH((void)*e, "NotFound: open /data/x");
  Result<std::string> s = Status::Corruption("torn");
  EXPECT_DEATH((void)s->size(), "Corruption: torn");
  EXPECT_DEATH((void)std::move(s).value(), "Corruption: torn");
}

TEST(ResultDeathTest, MadeFromAnOkStatusAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(Result<int>{Status::OK()}.IgnoreError(), "Result made from an OK Status");
}

}  // namespace
}  // namespace ssdfeed
