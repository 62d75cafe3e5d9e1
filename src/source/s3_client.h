// A small S3 client over libcurl: ListObjectsV2 and (ranged) GetObject,
// SigV4-signed (s3_sigv4.h), with a bounded pool of connections and retries
// with exponential backoff and full jitter on 5xx, throttling, timeouts and
// dropped connections. A body is handed back only when it is complete (its
// length is the one asked for); 403 and 404 are errors naming the key.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "source/s3_sigv4.h"
#include "ssdfeed/env.h"
#include "ssdfeed/status.h"

namespace ssdfeed::s3 {

// Read from the environment by FromEnv(); every field says where.
struct Config {
  // AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL ("http://127.0.0.1:9000").
  // Default empty: AWS itself, https://s3.<region>.amazonaws.com.
  std::string endpoint;
  // AWS_REGION, else AWS_DEFAULT_REGION. Default "us-east-1".
  std::string region = "us-east-1";
  // AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN. Without an
  // access key requests go unsigned (public buckets).
  Credentials creds;
  // SSDFEED_S3_ADDRESSING_STYLE: "path" (endpoint/bucket/key) or "virtual"
  // (bucket.endpoint/key). Default: path when an endpoint is set (what
  // S3-compatible servers expect), virtual on AWS.
  bool path_style = false;
  // SSDFEED_S3_MAX_REQUESTS: requests in flight at once per source (the
  // connection pool's size; also how many shards are indexed at once).
  // Default 16.
  int max_requests = 16;
  // SSDFEED_S3_MAX_ATTEMPTS: tries of one request before giving up. Default 8.
  int max_attempts = 8;
  // SSDFEED_S3_BACKOFF_MS: first retry waits up to this (then doubling, up
  // to 20 s), a uniformly random share of it. Default 100.
  int backoff_ms = 100;
  // SSDFEED_S3_TIMEOUT_S: connect timeout, and how long a transfer may move
  // no byte before it counts as dropped. Default 30.
  int timeout_s = 30;
  // SSDFEED_S3_LIST_PAGE_SIZE: keys per ListObjectsV2 page. Default 0: the
  // server's (1000 on AWS).
  int list_page_size = 0;
  // SSDFEED_S3_MAX_KEYS: a listing with more keys is an error, so a server
  // that never ends its listing cannot exhaust memory. Default 10 million.
  int64_t max_keys = 10'000'000;
  // SSDFEED_S3_MAX_OBJECT_MB: the largest image object of a folder layout
  // (each is read whole into memory). Default 256.
  int64_t max_object_mb = 256;
  // AWS_CA_BUNDLE: PEM file of the certificate authorities to trust for
  // https, as the AWS SDKs read it. Default empty: the system's.
  std::string ca_bundle;

  // The variables come through env (Env::Default(): the process's own).
  static Result<Config> FromEnv(ssdfeed::Env* env);
};

struct ObjectInfo {
  std::string key;
  uint64_t size = 0;
  std::string etag;  // without quotes
};

class Client {
 public:
  explicit Client(Config config);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const Config& config() const { return config_; }

  // Every object whose key starts with prefix, sorted by key (all pages).
  Result<std::vector<ObjectInfo>> List(const std::string& bucket, const std::string& prefix);

  // Bytes [offset, offset + n) of obj (n clamped to its end), only while its
  // ETag is still obj.etag (If-Match): a replaced object is an error, never
  // a mix of old and new bytes. *out holds exactly the bytes or is cleared.
  Status Get(const std::string& bucket, const ObjectInfo& obj, uint64_t offset, uint64_t n,
             std::string* out);

  // Requests sent, including retries and listings (for tests, benches and
  // the job's origin metrics).
  uint64_t requests() const;
  // Object body bytes Get returned (what the origin served this client).
  uint64_t object_bytes() const { return object_bytes_.load(std::memory_order_relaxed); }
  uint64_t retries() const;

 private:
  struct Request;
  struct Response;
  void* Acquire();
  void Release(void* handle);
  Status Perform(const Request& req, uint64_t limit, Response* resp);
  Status Execute(const Request& req, uint64_t want_bytes, Response* resp);
  Result<Request> MakeRequest(const std::string& bucket, const std::string& key) const;

  Config config_;
  Status endpoint_status_;     // a bad endpoint fails every request
  std::string scheme_, host_;  // from the endpoint; host_ with :port unless the default
  bool endpoint_is_ip_ = false;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<void*> free_;  // idle CURL handles (keep their connections)
  int created_ = 0;
  uint64_t requests_ = 0, retries_ = 0;
  std::atomic<uint64_t> object_bytes_{0};
};

// "s3://bucket/key..." -> bucket and the rest; InvalidArgument otherwise,
// and for a bucket name ValidateBucket refuses.
Status ParseUri(const std::string& uri, std::string* bucket, std::string* key);

// The bucket names botocore accepts: 1-255 of [a-zA-Z0-9._-]. Anything else
// (':', '#', '@', '/', '?', control characters) could move the request, its
// credentials and its signature, to another host.
Status ValidateBucket(const std::string& bucket);

// Whether bucket may be addressed as bucket.endpoint (botocore's rule):
// 3-63 characters, dot-separated labels of lowercase letters, digits and
// hyphens that begin and end with a letter or digit, not an IPv4 address,
// and without dots when allow_dots is false (https: a dotted name fails the
// wildcard certificate). Other names go path style.
bool VirtualHostable(const std::string& bucket, bool allow_dots);

// The largest ListObjectsV2 page accepted (a page of 1000 keys of 1 KiB is
// about 1.5 MiB).
constexpr uint64_t kMaxListPage = 16 << 20;

// Parses one ListObjectsV2 page (what names it in errors), appending its
// objects to out; *next is the continuation token ("" on the last page).
// Every malformed entry is a Corruption naming its key. Exposed for tests
// and the fuzzer.
Status ParseListPage(const std::string& xml, const std::string& what, std::vector<ObjectInfo>* out,
                     std::string* next);

}  // namespace ssdfeed::s3
