// s3:// sources in the C++ suite, so the sanitizer builds cover the client:
// a real moto_server (started through Python; skipped when moto or boto3 is
// missing), shards uploaded with boto3, every sample read from many threads
// at once and compared with the local copy. $SSDFEED_TEST_PYTHON picks the
// interpreter (default python3). tests/py/test_s3.py covers the rest.
// HostileS3Test: a fake endpoint on loopback (FakeS3) that answers with
// what a hostile or broken server may send.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <thread>
#include <tuple>

#include "source/s3_client.h"
#include "ssdfeed/dataset.h"
#include "ssdfeed/source.h"
#include "test_util.h"
#include "util/fake_env.h"

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
    const std::string data_uri = test::MakeTestDataset({.dir = tmp_.Sub(format),
                                                        .format = format,
                                                        .count = 30,
                                                        .classes = 3,
                                                        .shard_size = 8,
                                                        .min_side = 32,
                                                        .max_side = 32});
    ASSERT_FALSE(data_uri.empty());
    Upload(tmp_.Sub(format), format + "/");
    auto local = OpenSource(data_uri);
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

// Layouts with fields read over S3 as they are read locally: WebDataset
// tars with masks and arrays (fields in the URI), and a tfrecord whose
// fields are given in the options.
TEST_F(S3SourceTest, FieldsOfTarAndTFRecordShardsMatchTheLocalCopy) {
  MakeDatasetOptions o;
  o.dir = tmp_.Sub("seg");
  o.format = "wds-seg";
  o.count = 12;
  o.classes = 3;
  o.shard_size = 5;
  o.min_side = o.max_side = 32;
  const std::string seg_uri = test::MakeTestDataset(o);
  ASSERT_FALSE(seg_uri.empty());
  Upload(tmp_.Sub("seg"), "seg/");
  const std::string tf_uri =
      test::MakeTestDataset({.dir = tmp_.Sub("tf"), .format = "tfrecord", .count = 6});
  ASSERT_FALSE(tf_uri.empty());
  Upload(tmp_.Sub("tf"), "tf/");
  SourceOptions fields;
  fields.fields = {{"label", FieldKind::kLabel, ""}, {"format", FieldKind::kAuto, "image/format"}};
  std::string query = seg_uri.substr(seg_uri.find('?'));
  std::vector<std::tuple<std::string, std::string, SourceOptions>> cases = {
      {seg_uri, "tar:s3://bkt/seg/*.tar" + query, {}},
      {tf_uri, "tfrecord:s3://bkt/tf/*.tfrecord", fields}};
  for (const auto& [local_uri, remote_uri, opts] : cases) {
    auto local = OpenSource(local_uri, opts);
    auto remote = OpenSource(remote_uri, opts);
    ASSERT_TRUE(local.ok() && remote.ok()) << remote_uri << ": " << remote.status().message();
    ASSERT_EQ((*remote)->size(), (*local)->size());
    ASSERT_EQ((*remote)->fields().size(), (*local)->fields().size());
    EXPECT_GT((*remote)->fields().size(), 2u);
    for (size_t i = 0; i < (*local)->size(); ++i) {
      EncodedSample a, b;
      ASSERT_TRUE((*local)->Read(i, &a).ok() && (*remote)->Read(i, &b).ok()) << remote_uri;
      EXPECT_EQ(a.bytes, b.bytes);
      EXPECT_EQ(a.label, b.label);
      ASSERT_EQ(a.fields.size(), b.fields.size());
      for (size_t k = 0; k < a.fields.size(); ++k) EXPECT_EQ(a.fields[k].bytes, b.fields[k].bytes);
    }
  }
}

TEST(S3Layouts, FilesAndCocoInABucketAreAClearError) {
  for (std::string uri : {"files:s3://b/voc?image=JPEGImages/{stem}.jpg",
                          "coco:s3://b/images?annotations=s3://b/a.json"}) {
    auto src = OpenSource(uri);
    ASSERT_FALSE(src.ok());
    EXPECT_NE(src.status().message().find("not supported"), std::string::npos)
        << src.status().message();
  }
}

// A listening socket on loopback; a connection to it is counted, never served.
class Listener {
 public:
  Listener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(fd_, 16), 0);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~Listener() { ::close(fd_); }
  int fd() const { return fd_; }
  int port() const { return port_; }
  // Whether a client has connected (the kernel completes the handshake
  // before connect() returns, so one made earlier is pending by now).
  bool Connected() const {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
  }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// A one-request-per-connection HTTP server whose answer to each request
// (its request line and Host) is the 200 body respond() makes.
class FakeS3 {
 public:
  using Respond = std::function<std::string(const std::string& line, int n)>;
  explicit FakeS3(Respond respond) : respond_(std::move(respond)) {
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeS3() {
    stop_ = true;
    ::shutdown(listener_.fd(), SHUT_RDWR);  // wakes accept()
    thread_.join();
  }
  int port() const { return listener_.port(); }
  std::atomic<int> code{200};  // of every answer
  std::string url(const std::string& host = "127.0.0.1") const {
    return "http://" + host + ":" + std::to_string(port());
  }
  // "GET /path?query host" per request so far.
  std::vector<std::string> seen() {
    std::lock_guard<std::mutex> l(mu_);
    return seen_;
  }

 private:
  void Serve() {
    while (!stop_) {
      int c = ::accept(listener_.fd(), nullptr, nullptr);
      if (c < 0) continue;
      std::string head;
      char buf[4096];
      while (head.find("\r\n\r\n") == std::string::npos) {
        ssize_t n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        head.append(buf, static_cast<size_t>(n));
      }
      std::string line = head.substr(0, head.find(" HTTP/"));
      size_t h = head.find("\r\nHost: ");
      if (h != std::string::npos)
        line.append(" ").append(head.substr(h + 8, head.find("\r\n", h + 2) - h - 8));
      int n;
      {
        std::lock_guard<std::mutex> l(mu_);
        seen_.push_back(line);
        n = static_cast<int>(seen_.size()) - 1;
      }
      std::string body = respond_(line, n);
      std::string out =
          "HTTP/1.1 " + std::to_string(code.load()) +
          " X\r\nContent-Type: application/xml\r\nContent-Length: " + std::to_string(body.size()) +
          "\r\nConnection: close\r\n\r\n" + body;
      for (size_t off = 0; off < out.size();) {
        ssize_t w = ::send(c, out.data() + off, out.size() - off, MSG_NOSIGNAL);
        if (w <= 0) break;  // the client gave up on the answer
        off += static_cast<size_t>(w);
      }
      ::close(c);
    }
  }
  Listener listener_;
  Respond respond_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> seen_;
};

std::string Page(const std::string& contents, const std::string& next = "") {
  return "<?xml version=\"1.0\"?><ListBucketResult>" + contents + "<IsTruncated>" +
         (next.empty() ? "false" : "true") + "</IsTruncated>" +
         (next.empty() ? "" : "<NextContinuationToken>" + next + "</NextContinuationToken>") +
         "</ListBucketResult>";
}

std::string Entry(const std::string& key, const std::string& size,
                  const std::string& etag = "&quot;abc&quot;") {
  return "<Contents><Key>" + key + "</Key><Size>" + size + "</Size><ETag>" + etag +
         "</ETag></Contents>";
}

class HostileS3Test : public ::testing::Test {
 protected:
  static constexpr const char* kVars[] = {"AWS_ENDPOINT_URL",
                                          "AWS_ENDPOINT_URL_S3",
                                          "AWS_ACCESS_KEY_ID",
                                          "AWS_SECRET_ACCESS_KEY",
                                          "AWS_SESSION_TOKEN",
                                          "AWS_REGION",
                                          "AWS_DEFAULT_REGION",
                                          "AWS_CA_BUNDLE",
                                          "SSDFEED_S3_ADDRESSING_STYLE",
                                          "SSDFEED_S3_MAX_KEYS",
                                          "SSDFEED_S3_MAX_OBJECT_MB",
                                          "SSDFEED_S3_MAX_ATTEMPTS",
                                          "SSDFEED_S3_TIMEOUT_S",
                                          "SSDFEED_S3_BACKOFF_MS"};
  void SetUp() override {
    for (const char* v : kVars) ::unsetenv(v);
    ::setenv("AWS_ACCESS_KEY_ID", "AKIDSECRETID", 1);
    ::setenv("AWS_SECRET_ACCESS_KEY", "secret", 1);
    ::setenv("AWS_SESSION_TOKEN", "SESSIONTOKEN", 1);
    ::setenv("SSDFEED_S3_MAX_ATTEMPTS", "1", 1);
    ::setenv("SSDFEED_S3_TIMEOUT_S", "2", 1);
  }
  void TearDown() override {
    for (const char* v : kVars) ::unsetenv(v);
  }
  // Opens uri against server; the error it must fail with.
  Status OpenFails(const FakeS3& server, const std::string& uri) {
    ::setenv("AWS_ENDPOINT_URL", server.url().c_str(), 1);
    auto src = OpenSource(uri);
    EXPECT_FALSE(src.ok()) << uri << " opened";
    return src.ok() ? Status::OK() : src.status();
  }
};

TEST_F(HostileS3Test, BucketNamingAnotherHostIsRefusedBeforeAnyRequest) {
  // No endpoint: AWS, virtual-hosted, where the bucket becomes part of the
  // host name ("127.0.0.1:PORT#.s3.us-east-1.amazonaws.com" is 127.0.0.1).
  Listener victim;
  std::string port = std::to_string(victim.port());
  for (const std::string& bucket :
       std::vector<std::string>{"127.0.0.1:" + port + "#", "127.0.0.1:" + port + "?",
                                "x@127.0.0.1:" + port + "#", "a\nb"}) {
    auto src = OpenSource("tar:s3://" + bucket + "/x.tar");
    ASSERT_FALSE(src.ok()) << bucket;
    EXPECT_EQ(src.status().code(), Status::Code::kInvalidArgument) << src.status().message();
    EXPECT_NE(src.status().message().find("bucket name"), std::string::npos)
        << src.status().message();
  }
  EXPECT_FALSE(victim.Connected()) << "a request (with the credentials) reached 127.0.0.1:" << port;
}

TEST_F(HostileS3Test, NamesThatAreNoDnsLabelGoPathStyle) {
  FakeS3 server([](const std::string&, int) { return Page(""); });
  ::setenv("AWS_ENDPOINT_URL", server.url("localhost").c_str(), 1);
  ::setenv("SSDFEED_S3_ADDRESSING_STYLE", "virtual", 1);
  std::string host = "localhost:" + std::to_string(server.port());
  for (std::string bucket : {"Upper_case", "1.2.3.4", "ab", "-lead", "a..b", "bkt"}) {
    auto src = OpenSource("tar:s3://" + bucket + "/x.tar");
    EXPECT_FALSE(src.ok());
  }
  auto seen = server.seen();
  ASSERT_EQ(seen.size(), 6u);
  EXPECT_EQ(seen[0], "GET /Upper_case?list-type=2&prefix=x.tar " + host);
  EXPECT_EQ(seen[1], "GET /1.2.3.4?list-type=2&prefix=x.tar " + host);
  EXPECT_EQ(seen[2], "GET /ab?list-type=2&prefix=x.tar " + host);
  EXPECT_EQ(seen[3], "GET /-lead?list-type=2&prefix=x.tar " + host);
  EXPECT_EQ(seen[4], "GET /a..b?list-type=2&prefix=x.tar " + host);
  // The control: a DNS-compatible name is virtual-hosted.
  EXPECT_EQ(seen[5], "GET /?list-type=2&prefix=x.tar bkt." + host);
}

TEST_F(HostileS3Test, AnIpEndpointIsAddressedPathStyle) {
  FakeS3 server([](const std::string&, int) { return Page(""); });
  ::setenv("SSDFEED_S3_ADDRESSING_STYLE", "virtual", 1);
  Status s = OpenFails(server, "tar:s3://bkt/x.tar");
  EXPECT_EQ(s.code(), Status::Code::kNotFound) << s.message();
  ASSERT_EQ(server.seen().size(), 1u);
  EXPECT_EQ(server.seen()[0],
            "GET /bkt?list-type=2&prefix=x.tar 127.0.0.1:" + std::to_string(server.port()));
}

TEST_F(HostileS3Test, SizeOfManyDigitsIsCorruptionNamingTheKey) {
  for (std::string size : {"1234567890123456789012345", "18446744073709551616", "-1", "1e3", ""}) {
    FakeS3 server([&](const std::string&, int) { return Page(Entry("big.tar", size)); });
    Status s = OpenFails(server, "tar:s3://bkt/*.tar");
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.message();
    EXPECT_NE(s.message().find("key 'big.tar'"), std::string::npos) << s.message();
  }
}

TEST_F(HostileS3Test, ControlCharactersInKeysAndEtagsAreCorruption) {
  FakeS3 key([](const std::string&, int) { return Page(Entry("a&#10;b.tar", "10")); });
  Status s = OpenFails(key, "tar:s3://bkt/*.tar");
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.message();
  EXPECT_NE(s.message().find("key 'a\\x0ab.tar' holds a control character"), std::string::npos)
      << s.message();
  FakeS3 etag([](const std::string&, int) {
    return Page(Entry("a.tar", "10", "&quot;x&#13;&#10;X-Evil: 1&quot;"));
  });
  s = OpenFails(etag, "tar:s3://bkt/*.tar");
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.message();
  EXPECT_NE(s.message().find("key 'a.tar': malformed ETag"), std::string::npos) << s.message();
}

TEST_F(HostileS3Test, ControlCharactersInAnErrorDocumentAreEscaped) {
  FakeS3 server([](const std::string&, int) {
    return std::string(
        "<Error><Code>Denied&#27;[2J</Code><Message>no&#13;&#10;pe</Message></Error>");
  });
  server.code = 403;
  Status s = OpenFails(server, "tar:s3://bkt/*.tar");
  EXPECT_NE(s.message().find("HTTP 403 (Denied\\x1b[2J: no\\x0d\\x0ape)"), std::string::npos)
      << s.message();
}

TEST_F(HostileS3Test, OversizedPageIsAnErrorNotRetried) {
  // 40 MiB of one page (a server may claim up to any length): cut at 16 MiB.
  FakeS3 server([](const std::string&, int) {
    return Page(Entry("a.tar", "1") + std::string(40 << 20, ' '));
  });
  ::setenv("SSDFEED_S3_MAX_ATTEMPTS", "3", 1);
  Status s = OpenFails(server, "tar:s3://bkt/*.tar");
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.message();
  EXPECT_NE(s.message().find("longer than 16777216 bytes"), std::string::npos) << s.message();
  EXPECT_EQ(server.seen().size(), 1u);
}

TEST_F(HostileS3Test, EndlessListingStopsAtTheKeyCap) {
  // A new key and token on every page, for 2000 pages (endless, in effect).
  FakeS3 server([](const std::string&, int n) {
    std::string k = std::to_string(n);
    return Page(Entry("k" + k + ".tar", "1"), n < 2000 ? std::string("t").append(k) : "");
  });
  ::setenv("SSDFEED_S3_MAX_KEYS", "50", 1);
  Status s = OpenFails(server, "tar:s3://bkt/*.tar");
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.message();
  EXPECT_NE(s.message().find("more than 50 keys"), std::string::npos) << s.message();
  EXPECT_EQ(server.seen().size(), 51u);
}

TEST_F(HostileS3Test, EndlessEmptyPagesAreAnError) {
  FakeS3 server([](const std::string&, int n) {
    return Page("", n < 2000 ? std::string("t").append(std::to_string(n)) : "");
  });
  Status s = OpenFails(server, "tar:s3://bkt/*.tar");
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.message();
  EXPECT_NE(s.message().find("page after page without a key"), std::string::npos) << s.message();
  EXPECT_LT(server.seen().size(), 200u);
}

TEST_F(HostileS3Test, TruncatedPageWithoutTokenAndRepeatedKeysAreErrors) {
  FakeS3 notoken([](const std::string&, int) {
    return "<ListBucketResult>" + Entry("a.tar", "1") +
           "<IsTruncated>true</IsTruncated></ListBucketResult>";
  });
  Status s = OpenFails(notoken, "tar:s3://bkt/*.tar");
  EXPECT_NE(s.message().find("truncated page without a NextContinuationToken"), std::string::npos)
      << s.message();
  FakeS3 cycle(
      [](const std::string&, int n) { return Page(Entry("a.tar", "1"), n == 0 ? "t1" : ""); });
  s = OpenFails(cycle, "tar:s3://bkt/*.tar");
  EXPECT_NE(s.message().find("key 'a.tar' is listed twice"), std::string::npos) << s.message();
}

TEST_F(HostileS3Test, HugeFolderObjectIsRefusedAtOpen) {
  FakeS3 server([](const std::string&, int) {
    return Page(Entry("f/cls/a.jpg", "1099511627776") + Entry("f/cls/b.jpg", "100"));
  });
  Status s = OpenFails(server, "folder:s3://bkt/f");
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.message();
  EXPECT_NE(s.message().find("s3://bkt/f/cls/a.jpg: 1099511627776 bytes"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("SSDFEED_S3_MAX_OBJECT_MB"), std::string::npos);
  ::setenv("SSDFEED_S3_MAX_OBJECT_MB", "1048576", 1);
  EXPECT_TRUE(OpenSource("folder:s3://bkt/f").ok());  // the cap is the user's to raise
}

TEST_F(HostileS3Test, EndpointMustBePlainHttpOrHttps) {
  for (const char* ep : {"ftp://127.0.0.1:1", "file:///etc/passwd", "http://u:p@127.0.0.1:1",
                         "http://127.0.0.1:1/?x=1", "http://127.0.0.1:1#f", "http://a\rb:1"}) {
    ::setenv("AWS_ENDPOINT_URL", ep, 1);
    auto src = OpenSource("tar:s3://bkt/x.tar");
    ASSERT_FALSE(src.ok()) << ep;
    EXPECT_EQ(src.status().code(), Status::Code::kInvalidArgument) << ep;
    EXPECT_NE(src.status().message().find("AWS_ENDPOINT_URL"), std::string::npos)
        << src.status().message();
  }
  ::unsetenv("AWS_ENDPOINT_URL");
  ::setenv("AWS_REGION", "evil.example#", 1);
  auto src = OpenSource("tar:s3://bkt/x.tar");
  ASSERT_FALSE(src.ok());
  EXPECT_NE(src.status().message().find("is not a region name"), std::string::npos)
      << src.status().message();
}

TEST(S3ListPageTest, KeyOfBareAmpersandsIsRefusedWithoutQuadraticWork) {
  // Each '&' used to look for its ';' to the end of the page: 8 MiB of them
  // took hours. Entities are short, so the look is bounded.
  std::string xml = Page(Entry(std::string(8 << 20, '&'), "1"));
  std::vector<s3::ObjectInfo> out;
  std::string next;
  Status s = s3::ParseListPage(xml, "s3://bkt/ (listing)", &out, &next);
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  EXPECT_NE(s.message().find("is longer than 1024 bytes"), std::string::npos) << s.message();
  // The control: entities still decode.
  out.clear();
  ASSERT_TRUE(
      s3::ParseListPage(Page(Entry("a&amp;b&#233;&#x41;&bogus;&.tar", "7")), "x", &out, &next)
          .ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].key,
            "a&b\xc3\xa9"
            "A&bogus;&.tar");
  EXPECT_EQ(out[0].size, 7u);
  EXPECT_EQ(out[0].etag, "abc");
}

TEST(S3BucketNameTest, VirtualHostableFollowsBotocore) {
  for (const std::string& ok :
       std::vector<std::string>{"abc", "my-bucket", "a1b", std::string(63, 'a')})
    EXPECT_TRUE(s3::VirtualHostable(ok, false)) << ok;
  EXPECT_TRUE(s3::VirtualHostable("my.bucket", true));
  for (const std::string& bad :
       std::vector<std::string>{"ab", std::string(64, 'a'), "Abc", "a_b", "-ab", "ab-", "a..b",
                                ".ab", "192.168.1.1", "my.bucket"})
    EXPECT_FALSE(s3::VirtualHostable(bad, false)) << bad;
  EXPECT_FALSE(s3::VirtualHostable("10.0.0.1", true));
  EXPECT_TRUE(s3::ValidateBucket("Legacy_Bucket.1").ok());
  for (const std::string& bad : std::vector<std::string>{"", "a:1", "a#", "a?b", "a@b", "a b",
                                                         "a%2f", std::string(256, 'a')})
    EXPECT_FALSE(s3::ValidateBucket(bad).ok()) << bad;
}

// The configuration comes from the Env's variables, not the process's own.
TEST(S3Config, ReadsTheVariablesThroughTheEnv) {
  SurroundingsEnv env(Env::Default());
  env.SetVar("AWS_ENDPOINT_URL", "http://127.0.0.1:9/");
  env.SetVar("AWS_REGION", "eu-west-3");
  env.SetVar("SSDFEED_S3_MAX_REQUESTS", "7");
  auto c = s3::Config::FromEnv(&env);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->endpoint, "http://127.0.0.1:9");
  EXPECT_EQ(c->region, "eu-west-3");
  EXPECT_EQ(c->max_requests, 7);
  EXPECT_TRUE(c->path_style) << "an endpoint given: path style";
  env.SetVar("SSDFEED_S3_MAX_REQUESTS", "0");
  auto bad = s3::Config::FromEnv(&env);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("SSDFEED_S3_MAX_REQUESTS"), std::string::npos);
}

}  // namespace
}  // namespace ssdfeed
