#include "source/s3_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <random>
#include <thread>

namespace ssdfeed::s3 {

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

Status IntFromEnv(const char* name, int lo, int* out) {
  std::string v = Env(name);
  if (v.empty()) return Status::OK();
  char* end = nullptr;
  long x = std::strtol(v.c_str(), &end, 10);
  if (*end != '\0' || x < lo || x > 1000000)
    return Status::InvalidArgument(
        std::string(name) + " must be an integer >= " + std::to_string(lo) + ", not '" + v + "'");
  *out = static_cast<int>(x);
  return Status::OK();
}

// Text of the first <tag>...</tag> in xml at or after *pos, XML entities
// decoded; *pos moves past it. False when there is none.
bool NextTag(const std::string& xml, const std::string& tag, size_t* pos, std::string* out) {
  std::string open = "<" + tag + ">", close = "</" + tag + ">";
  size_t a = xml.find(open, *pos);
  if (a == std::string::npos) return false;
  a += open.size();
  size_t b = xml.find(close, a);
  if (b == std::string::npos) return false;
  *pos = b + close.size();
  out->clear();
  for (size_t i = a; i < b; ++i) {
    if (xml[i] != '&') {
      out->push_back(xml[i]);
      continue;
    }
    size_t semi = xml.find(';', i);
    if (semi == std::string::npos || semi > b) {
      out->push_back('&');
      continue;
    }
    std::string ent = xml.substr(i + 1, semi - i - 1);
    unsigned long cp = 0;
    if (ent == "amp")
      cp = '&';
    else if (ent == "lt")
      cp = '<';
    else if (ent == "gt")
      cp = '>';
    else if (ent == "quot")
      cp = '"';
    else if (ent == "apos")
      cp = '\'';
    else if (ent.size() > 1 && ent[0] == '#')
      cp = ent[1] == 'x' ? std::strtoul(ent.c_str() + 2, nullptr, 16)
                         : std::strtoul(ent.c_str() + 1, nullptr, 10);
    if (cp == 0 || cp > 0x10FFFF) {
      out->push_back('&');
      continue;
    }
    // UTF-8 encode the code point.
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
    i = semi;
  }
  return true;
}

std::string Tag(const std::string& xml, const std::string& tag) {
  size_t pos = 0;
  std::string v;
  return NextTag(xml, tag, &pos, &v) ? v : "";
}

std::string StripQuotes(std::string s) {
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
  return s;
}

// Parses one ListObjectsV2 page into out; *next is the continuation token
// ("" on the last page).
Status ParseListPage(const std::string& xml, const std::string& what, std::vector<ObjectInfo>* out,
                     std::string* next) {
  if (xml.find("<ListBucketResult") == std::string::npos)
    return Status::Corruption(what + ": not a ListObjectsV2 answer: " + xml.substr(0, 200));
  size_t pos = 0;
  std::string block;
  while (NextTag(xml, "Contents", &pos, &block)) {
    ObjectInfo o;
    o.key = Tag(block, "Key");
    std::string size = Tag(block, "Size");
    o.etag = StripQuotes(Tag(block, "ETag"));
    if (o.key.empty() || size.empty() || size.find_first_not_of("0123456789") != std::string::npos)
      return Status::Corruption(what + ": listing entry without a key or size");
    o.size = std::stoull(size);
    out->push_back(std::move(o));
  }
  *next = Tag(xml, "IsTruncated") == "true" ? Tag(xml, "NextContinuationToken") : "";
  return Status::OK();
}

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Body {
  std::string* data;
  uint64_t limit;  // more than this is no answer we asked for
};

size_t WriteBody(char* p, size_t size, size_t n, void* user) {
  auto* b = static_cast<Body*>(user);
  if (b->data->size() + size * n > b->limit) return 0;  // aborts the transfer
  b->data->append(p, size * n);
  return size * n;
}

bool Retryable(long code) { return code >= 500 || code == 429 || code == 408; }

}  // namespace

struct Client::Request {
  std::string what;  // "s3://bucket/key", for messages
  std::string url;
  SignRequest sign;
};

struct Client::Response {
  long code = 0;
  std::string body;
};

Result<Config> Config::FromEnv() {
  Config c;
  c.endpoint = Env("AWS_ENDPOINT_URL_S3");
  if (c.endpoint.empty()) c.endpoint = Env("AWS_ENDPOINT_URL");
  while (!c.endpoint.empty() && c.endpoint.back() == '/') c.endpoint.pop_back();
  if (!c.endpoint.empty() && c.endpoint.rfind("http://", 0) != 0 &&
      c.endpoint.rfind("https://", 0) != 0)
    return Status::InvalidArgument("AWS_ENDPOINT_URL must start with http:// or https://, not '" +
                                   c.endpoint + "'");
  std::string region = Env("AWS_REGION");
  if (region.empty()) region = Env("AWS_DEFAULT_REGION");
  if (!region.empty()) c.region = region;
  c.creds = {Env("AWS_ACCESS_KEY_ID"), Env("AWS_SECRET_ACCESS_KEY"), Env("AWS_SESSION_TOKEN")};
  if (!c.creds.access_key.empty() && c.creds.secret_key.empty())
    return Status::InvalidArgument("AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not");
  std::string style = Env("SSDFEED_S3_ADDRESSING_STYLE");
  if (style.empty() || style == "auto")
    c.path_style = !c.endpoint.empty();
  else if (style == "path" || style == "virtual")
    c.path_style = style == "path";
  else
    return Status::InvalidArgument(
        "SSDFEED_S3_ADDRESSING_STYLE must be path, virtual or auto, not '" + style + "'");
  SSDFEED_RETURN_IF_ERROR(IntFromEnv("SSDFEED_S3_MAX_REQUESTS", 1, &c.max_requests));
  SSDFEED_RETURN_IF_ERROR(IntFromEnv("SSDFEED_S3_MAX_ATTEMPTS", 1, &c.max_attempts));
  SSDFEED_RETURN_IF_ERROR(IntFromEnv("SSDFEED_S3_BACKOFF_MS", 0, &c.backoff_ms));
  SSDFEED_RETURN_IF_ERROR(IntFromEnv("SSDFEED_S3_TIMEOUT_S", 1, &c.timeout_s));
  SSDFEED_RETURN_IF_ERROR(IntFromEnv("SSDFEED_S3_LIST_PAGE_SIZE", 0, &c.list_page_size));
  return c;
}

Status ParseUri(const std::string& uri, std::string* bucket, std::string* key) {
  if (uri.rfind("s3://", 0) != 0) return Status::InvalidArgument(uri + ": not an s3:// URI");
  std::string rest = uri.substr(5);
  size_t slash = rest.find('/');
  *bucket = rest.substr(0, slash);
  *key = slash == std::string::npos ? "" : rest.substr(slash + 1);
  if (bucket->empty())
    return Status::InvalidArgument(uri + ": no bucket (expected s3://BUCKET/PREFIX)");
  return Status::OK();
}

Client::Client(Config config) : config_(std::move(config)) {
  GlobalInit();
  std::string ep = config_.endpoint.empty() ? "https://s3." + config_.region + ".amazonaws.com"
                                            : config_.endpoint;
  size_t colon = ep.find("://");
  scheme_ = ep.substr(0, colon);
  host_ = ep.substr(colon + 3);
  host_ = host_.substr(0, host_.find('/'));
  // curl leaves a scheme's default port out of Host; the signature must agree.
  std::string dflt = scheme_ == "https" ? ":443" : ":80";
  if (host_.size() > dflt.size() &&
      host_.compare(host_.size() - dflt.size(), dflt.size(), dflt) == 0)
    host_.resize(host_.size() - dflt.size());
}

Client::~Client() {
  for (void* h : free_) curl_easy_cleanup(static_cast<CURL*>(h));
}

uint64_t Client::requests() const {
  std::lock_guard<std::mutex> l(mu_);
  return requests_;
}

uint64_t Client::retries() const {
  std::lock_guard<std::mutex> l(mu_);
  return retries_;
}

void* Client::Acquire() {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return !free_.empty() || created_ < config_.max_requests; });
  ++requests_;
  if (!free_.empty()) {
    void* h = free_.back();
    free_.pop_back();
    return h;
  }
  ++created_;
  return curl_easy_init();
}

void Client::Release(void* h) {
  {
    std::lock_guard<std::mutex> l(mu_);
    free_.push_back(h);
  }
  cv_.notify_one();
}

Client::Request Client::MakeRequest(const std::string& bucket, const std::string& key) const {
  Request r;
  r.what = "s3://" + bucket + "/" + key;
  // (Built by append: GCC 12 warns falsely on "literal" + std::string&&.)
  std::string path("/");
  path.append(UriEncode(key, true));
  if (config_.path_style) {
    r.sign.host = host_;
    r.sign.encoded_path = std::string("/").append(UriEncode(bucket, false));
    if (!key.empty()) r.sign.encoded_path.append(path);
  } else {
    r.sign.host = bucket + "." + host_;
    r.sign.encoded_path = path;
  }
  r.sign.region = config_.region;
  return r;
}

Status Client::Perform(const Request& req, uint64_t limit, Response* resp) {
  SignRequest sr = req.sign;
  sr.amz_date = AmzDateNow();
  std::vector<std::pair<std::string, std::string>> headers = sr.headers;
  std::string query = CanonicalQuery(sr.query);
  if (!config_.creds.access_key.empty()) {
    Signed s = Sign(sr, config_.creds);
    headers = s.headers;
  }
  std::string url =
      scheme_ + "://" + sr.host + sr.encoded_path + (query.empty() ? "" : "?" + query);
  curl_slist* list = nullptr;
  list = curl_slist_append(list, ("Host: " + sr.host).c_str());
  for (const auto& [k, v] : headers) list = curl_slist_append(list, (k + ": " + v).c_str());
  CURL* h = static_cast<CURL*>(Acquire());
  curl_easy_reset(h);
  resp->body.clear();
  Body body{&resp->body, limit};
  resp->code = 0;
  char err[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, WriteBody);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, err);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, static_cast<long>(config_.timeout_s));
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, static_cast<long>(config_.timeout_s));
  curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
  CURLcode rc = curl_easy_perform(h);
  long code = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
  Release(h);
  curl_slist_free_all(list);
  if (rc != CURLE_OK) {
    resp->body.clear();
    std::string msg = err[0] ? err : curl_easy_strerror(rc);
    if (rc == CURLE_URL_MALFORMAT || rc == CURLE_UNSUPPORTED_PROTOCOL)
      return Status::InvalidArgument(req.what + ": " + msg);
    return Status::IOError(req.what + ": " + msg);  // retried
  }
  resp->code = code;
  return Status::OK();
}

// One request, retried while the failure may pass. want_bytes: the body
// length a success must have (0: any).
Status Client::Execute(const Request& req, uint64_t want_bytes, Response* resp) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  std::string last;
  for (int attempt = 0; attempt < config_.max_attempts; ++attempt) {
    if (attempt > 0) {
      {
        std::lock_guard<std::mutex> l(mu_);
        ++retries_;
      }
      double cap = std::min(20000.0, config_.backoff_ms * std::pow(2.0, attempt - 1));
      double ms = std::uniform_real_distribution<double>(0, cap)(rng);
      std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(ms * 1000)));
    }
    // A body much longer than asked for is cut off early (and retried); an
    // error document always fits.
    Status s = Perform(req, want_bytes > 0 ? want_bytes + 65536 : (1ull << 36), resp);
    if (s.code() == Status::Code::kInvalidArgument) return s;
    if (!s.ok()) {
      last = s.message();
      continue;
    }
    long code = resp->code;
    if (code == 200 || code == 206) {
      if (want_bytes == 0 || resp->body.size() == want_bytes) return Status::OK();
      last = req.what + ": body of " + std::to_string(resp->body.size()) + " bytes, wanted " +
             std::to_string(want_bytes);
      continue;
    }
    std::string detail = Tag(resp->body, "Code");
    std::string msg = Tag(resp->body, "Message");
    if (!msg.empty()) detail += (detail.empty() ? "" : ": ") + msg;
    std::string what =
        req.what + ": HTTP " + std::to_string(code) + (detail.empty() ? "" : " (" + detail + ")");
    if (Retryable(code)) {
      last = what;
      continue;
    }
    resp->body.clear();
    if (code == 404) return Status::NotFound(what + ": no such bucket or key");
    if (code == 403)
      return Status::IOError(what +
                             ": access denied (check AWS_ACCESS_KEY_ID, "
                             "AWS_SECRET_ACCESS_KEY and the bucket's policy)");
    if (code == 412)
      return Status::Corruption(what +
                                ": the object changed since the source was opened "
                                "(ETag no longer matches); reopen the source");
    return Status::IOError(what);
  }
  resp->body.clear();
  return Status::IOError(last + " (gave up after " + std::to_string(config_.max_attempts) +
                         " attempts)");
}

Result<std::vector<ObjectInfo>> Client::List(const std::string& bucket, const std::string& prefix) {
  std::vector<ObjectInfo> out;
  std::string token;
  do {
    Request req = MakeRequest(bucket, "");
    req.what = "s3://" + bucket + "/" + prefix + " (listing)";
    req.sign.query = {{"list-type", "2"}, {"prefix", prefix}};
    if (!token.empty()) req.sign.query.emplace_back("continuation-token", token);
    if (config_.list_page_size > 0)
      req.sign.query.emplace_back("max-keys", std::to_string(config_.list_page_size));
    Response resp;
    SSDFEED_RETURN_IF_ERROR(Execute(req, 0, &resp));
    std::string next;
    SSDFEED_RETURN_IF_ERROR(ParseListPage(resp.body, req.what, &out, &next));
    if (!next.empty() && next == token)
      return Status::Corruption(req.what + ": the server repeats its continuation token");
    token = next;
  } while (!token.empty());
  std::sort(out.begin(), out.end(),
            [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
  return out;
}

Status Client::Get(const std::string& bucket, const ObjectInfo& obj, uint64_t offset, uint64_t n,
                   std::string* out) {
  out->clear();
  if (offset >= obj.size) return Status::OK();
  n = std::min(n, obj.size - offset);
  Request req = MakeRequest(bucket, obj.key);
  if (!obj.etag.empty()) req.sign.headers.emplace_back("if-match", "\"" + obj.etag + "\"");
  bool whole = offset == 0 && n == obj.size;
  if (!whole)
    req.sign.headers.emplace_back(
        "range", "bytes=" + std::to_string(offset) + "-" + std::to_string(offset + n - 1));
  Response resp;
  SSDFEED_RETURN_IF_ERROR(Execute(req, n, &resp));
  if (!whole && resp.code != 206)
    return Status::IOError(req.what + ": the server ignored the Range header (HTTP " +
                           std::to_string(resp.code) + ")");
  *out = std::move(resp.body);
  return Status::OK();
}

}  // namespace ssdfeed::s3
