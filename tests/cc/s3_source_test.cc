// s3:// sources in the C++ suite, so the sanitizer builds cover the client:
// a real moto_server (started through Python; skipped when moto or boto3 is
// missing), shards uploaded with boto3, every sample read from many threads
// at once and compared with the local copy. $SSDFEED_TEST_PYTHON picks the
// interpreter (default python3). tests/py/test_s3.py covers the rest.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "ssdfeed/dataset.h"
#include "ssdfeed/source.h"
#include "test_util.h"

namespace ssdfeed {
namespace {

std::string Python() {
  const char* p = std::getenv("SSDFEED_TEST_PYTHON");
  return p && *p ? p : "python3";
}

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

bool Accepts(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

class MotoServer {
 public:
  bool Start() {
    port_ = FreePort();
    std::string port = std::to_string(port_), py = Python();
    pid_ = ::fork();
    if (pid_ == 0) {
      int null = ::open("/dev/null", O_WRONLY);
      ::dup2(null, 1);
      ::dup2(null, 2);
      ::execlp(py.c_str(), py.c_str(), "-c", "from moto.server import main; main()", "-H",
               "127.0.0.1", "-p", port.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; i < 600; ++i) {
      if (Accepts(port_)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  ~MotoServer() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

class S3SourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (test::RunCommand(Python() + " -c 'import moto.server, boto3' 2>/dev/null") != 0)
      GTEST_SKIP() << "moto[server] and boto3 are not installed for " << Python();
    ASSERT_TRUE(server_.Start()) << "moto_server did not start";
    ::setenv("AWS_ENDPOINT_URL", server_.url().c_str(), 1);
    ::setenv("AWS_ACCESS_KEY_ID", "testing", 1);
    ::setenv("AWS_SECRET_ACCESS_KEY", "testing", 1);
    ::setenv("AWS_REGION", "us-east-1", 1);
    ::setenv("SSDFEED_S3_MAX_REQUESTS", "4", 1);
  }
  void TearDown() override {
    for (const char* v : {"AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                          "AWS_REGION", "SSDFEED_S3_MAX_REQUESTS"})
      ::unsetenv(v);
  }
  // Uploads every file of dir to bucket "bkt" under prefix.
  void Upload(const std::string& dir, const std::string& prefix) {
    std::string script =
        "import boto3,os,sys\n"
        "s3=boto3.client('s3',endpoint_url=sys.argv[1],region_name='us-east-1')\n"
        "try: s3.create_bucket(Bucket='bkt')\n"
        "except s3.exceptions.BucketAlreadyOwnedByYou: pass\n"
        "for f in os.listdir(sys.argv[2]): s3.upload_file(os.path.join(sys.argv[2],f),'bkt',"
        "sys.argv[3]+f)\n";
    ASSERT_EQ(test::RunCommand(Python() + " -c \"" + script + "\" " + server_.url() + " " + dir +
                               " " + prefix),
              0);
  }
  MotoServer server_;
  test::TempDir tmp_;
};

TEST_F(S3SourceTest, ShardsReadFromManyThreadsMatchTheLocalCopy) {
  for (std::string format : {"tfrecord", "tar"}) {
    MakeDatasetOptions o;
    o.dir = tmp_.Sub(format);
    o.format = format;
    o.count = 30;
    o.classes = 3;
    o.shard_size = 8;
    o.min_side = o.max_side = 32;
    MakeDatasetReport rep;
    ASSERT_TRUE(MakeDataset(o, &rep).ok());
    Upload(o.dir, format + "/");
    auto local = OpenSource(rep.uri);
    auto remote = OpenSource(format + ":s3://bkt/" + format + "/*." + format);
    ASSERT_TRUE(local.ok() && remote.ok()) << remote.status().message();
    ASSERT_EQ((*remote)->size(), (*local)->size());
    std::vector<std::thread> ts;
    std::atomic<int> bad{0};
    for (int t = 0; t < 8; ++t) {
      ts.emplace_back([&, t] {
        for (size_t i = t % 3; i < (*local)->size(); ++i) {
          EncodedSample a, b;
          if (!(*local)->Read(i, &a).ok() || !(*remote)->Read(i, &b).ok() || a.bytes != b.bytes ||
              a.label != b.label)
            ++bad;
        }
      });
    }
    for (auto& t : ts) t.join();
    EXPECT_EQ(bad.load(), 0) << format;
  }
}

}  // namespace
}  // namespace ssdfeed
