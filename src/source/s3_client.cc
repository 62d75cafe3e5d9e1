#include "source/s3_client.h"

#include <curl/curl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <thread>

namespace ssdfeed::s3 {

namespace {

// An environment variable through env (a test's, or the process's); "" when unset.
std::string Var(ssdfeed::Env* env, const char* name) { return env->GetEnvVar(name).value_or(""); }

// Whole-string decimal parse; false on anything else (sign, space, overflow).
template <typename T>
bool ParseInt(std::string_view s, T* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return !s.empty() && ec == std::errc{} && p == s.data() + s.size();
}

template <typename T>
Status IntFromEnv(ssdfeed::Env* env, const char* name, int64_t lo, int64_t hi, T* out) {
  std::string v = Var(env, name);
  if (v.empty()) return Status::OK();
  int64_t x = 0;
  if (!ParseInt(v, &x) || x < lo || x > hi)
    return Status::InvalidArgument(std::string(name) + " must be an integer from " +
                                   std::to_string(lo) + " to " + std::to_string(hi) + ", not '" +
                                   v + "'");
  *out = static_cast<T>(x);
  return Status::OK();
}

// s with control bytes as \xNN and cut at 200 bytes: safe in a message.
std::string Printable(std::string_view s) {
  std::string out;
  for (unsigned char c : s.substr(0, 200)) {
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  if (s.size() > 200) out += "...";
  return out;
}

bool HasControl(std::string_view s) {
  return std::any_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

// "x1F" or "31" (after "&#"); 0 when it is no number or out of range.
unsigned long CodePoint(std::string_view s) {
  bool hex = !s.empty() && s[0] == 'x';
  if (hex) s.remove_prefix(1);
  unsigned long cp = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), cp, hex ? 16 : 10);
  return !s.empty() && ec == std::errc{} && p == s.data() + s.size() ? cp : 0;
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
    // An entity is short ("&#x10FFFF;"): looking further would make a page
    // of bare '&' quadratic.
    size_t semi = std::string_view(xml).substr(0, std::min(b, i + 12)).find(';', i);
    if (semi == std::string::npos) {
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
      cp = CodePoint(std::string_view(ent).substr(1));
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

// S3 keys are at most 1024 bytes; an ETag is a quoted hash.
constexpr size_t kMaxKey = 1024, kMaxEtag = 1024;

// One <Contents> block: a key, a decimal size and an ETag that are safe to
// put into a URL, a header and a message.
Status ParseEntry(const std::string& block, const std::string& what, ObjectInfo* o) {
  o->key = Tag(block, "Key");
  if (o->key.empty()) return Status::Corruption(what + ": listing entry without a key");
  std::string named = what + ": key '" + Printable(o->key) + "'";
  if (o->key.size() > kMaxKey)
    return Status::Corruption(named + " is longer than " + std::to_string(kMaxKey) + " bytes");
  if (HasControl(o->key)) return Status::Corruption(named + " holds a control character");
  std::string size = Tag(block, "Size");
  if (!ParseInt(size, &o->size))
    return Status::Corruption(named + ": size '" + Printable(size) +
                              "' is not a number of bytes below 2^64");
  o->etag = StripQuotes(Tag(block, "ETag"));
  if (o->etag.size() > kMaxEtag || HasControl(o->etag) || o->etag.find('"') != std::string::npos)
    return Status::Corruption(named + ": malformed ETag '" + Printable(o->etag) + "'");
  return Status::OK();
}

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Body {
  std::string* data;
  uint64_t limit;  // more than this is no answer we asked for
  bool overflow = false;
};

size_t WriteBody(char* p, size_t size, size_t n, void* user) {
  auto* b = static_cast<Body*>(user);
  if (b->data->size() + size * n > b->limit) {
    b->overflow = true;
    return 0;  // aborts the transfer
  }
  b->data->append(p, size * n);
  return size * n;
}

struct UrlFree {
  void operator()(CURLU* u) const { curl_url_cleanup(u); }
};
using Url = std::unique_ptr<CURLU, UrlFree>;

// A part of a parsed URL; "" when it has none.
std::string UrlPart(CURLU* u, CURLUPart part, unsigned flags = 0) {
  char* v = nullptr;
  if (curl_url_get(u, part, &v, flags) != CURLUE_OK || v == nullptr) return "";
  std::string out = v;
  curl_free(v);
  return out;
}

// "host" or "host:port" as curl parsed u (no port when it is the scheme's
// default: curl leaves it out of the Host header, and the signature must
// agree).
std::string Authority(CURLU* u) {
  std::string port = UrlPart(u, CURLUPART_PORT, CURLU_NO_DEFAULT_PORT);
  return UrlPart(u, CURLUPART_HOST) + (port.empty() ? "" : ":" + port);
}

bool IsIPv4(const std::string& s) {
  int parts = 0;
  for (size_t i = 0; i <= s.size(); ++parts) {
    size_t dot = std::min(s.find('.', i), s.size());
    int x = 0;
    if (dot - i > 3 || !ParseInt(std::string_view(s).substr(i, dot - i), &x) || x > 255)
      return false;
    i = dot + 1;
  }
  return parts == 4;
}

// An endpoint "http(s)://host[:port][/]" -> its scheme and authority.
Status ParseEndpoint(const std::string& ep, std::string* scheme, std::string* authority) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("S3 endpoint '" + Printable(ep) + "': " + why);
  };
  Url u(curl_url());
  if (!u) return Status::InvalidArgument("out of memory parsing an URL");
  if (HasControl(ep) || curl_url_set(u.get(), CURLUPART_URL, ep.c_str(), 0) != CURLUE_OK)
    return bad("not a URL");
  *scheme = UrlPart(u.get(), CURLUPART_SCHEME);
  if (*scheme != "http" && *scheme != "https") return bad("must start with http:// or https://");
  if (!UrlPart(u.get(), CURLUPART_USER).empty() || !UrlPart(u.get(), CURLUPART_QUERY).empty() ||
      !UrlPart(u.get(), CURLUPART_FRAGMENT).empty())
    return bad("expected http(s)://host[:port], without user, query or fragment");
  *authority = Authority(u.get());
  return Status::OK();
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

Status ParseListPage(const std::string& xml, const std::string& what, std::vector<ObjectInfo>* out,
                     std::string* next) {
  if (xml.find("<ListBucketResult") == std::string::npos)
    return Status::Corruption(what + ": not a ListObjectsV2 answer: " + Printable(xml));
  size_t pos = 0;
  std::string block;
  while (NextTag(xml, "Contents", &pos, &block)) {
    ObjectInfo o;
    SSDFEED_RETURN_IF_ERROR(ParseEntry(block, what, &o));
    out->push_back(std::move(o));
  }
  *next = "";
  if (Tag(xml, "IsTruncated") != "true") return Status::OK();
  *next = Tag(xml, "NextContinuationToken");
  if (next->empty())
    return Status::Corruption(what + ": a truncated page without a NextContinuationToken");
  return Status::OK();
}

Result<Config> Config::FromEnv(ssdfeed::Env* env) {
  Config c;
  c.endpoint = Var(env, "AWS_ENDPOINT_URL_S3");
  if (c.endpoint.empty()) c.endpoint = Var(env, "AWS_ENDPOINT_URL");
  while (!c.endpoint.empty() && c.endpoint.back() == '/') c.endpoint.pop_back();
  std::string scheme, authority;
  if (!c.endpoint.empty()) {
    Status s = ParseEndpoint(c.endpoint, &scheme, &authority);
    if (!s.ok()) return Status::InvalidArgument("AWS_ENDPOINT_URL: " + s.message());
  }
  std::string region = Var(env, "AWS_REGION");
  if (region.empty()) region = Var(env, "AWS_DEFAULT_REGION");
  if (!region.empty()) c.region = region;
  // The region names the default endpoint's host: one DNS label, as botocore requires.
  if (c.region.size() > 63 || c.region.front() == '-' || c.region.back() == '-' ||
      c.region.find_first_not_of(
          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") != std::string::npos)
    return Status::InvalidArgument("AWS_REGION '" + Printable(c.region) +
                                   "' is not a region name (letters, digits, '-')");
  c.ca_bundle = Var(env, "AWS_CA_BUNDLE");
  if (!c.ca_bundle.empty() && ::access(c.ca_bundle.c_str(), R_OK) != 0)
    return Status::InvalidArgument("AWS_CA_BUNDLE '" + c.ca_bundle + "': no readable file there");
  c.creds = {Var(env, "AWS_ACCESS_KEY_ID"), Var(env, "AWS_SECRET_ACCESS_KEY"),
             Var(env, "AWS_SESSION_TOKEN")};
  if (!c.creds.access_key.empty() && c.creds.secret_key.empty())
    return Status::InvalidArgument("AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not");
  std::string style = Var(env, "SSDFEED_S3_ADDRESSING_STYLE");
  if (style.empty() || style == "auto")
    c.path_style = !c.endpoint.empty();
  else if (style == "path" || style == "virtual")
    c.path_style = style == "path";
  else
    return Status::InvalidArgument(
        "SSDFEED_S3_ADDRESSING_STYLE must be path, virtual or auto, not '" + style + "'");
  constexpr int64_t kM = 1000000;
  SSDFEED_RETURN_IF_ERROR(IntFromEnv(env, "SSDFEED_S3_MAX_REQUESTS", 1, kM, &c.max_requests));
  SSDFEED_RETURN_IF_ERROR(IntFromEnv(env, "SSDFEED_S3_MAX_ATTEMPTS", 1, kM, &c.max_attempts));
  SSDFEED_RETURN_IF_ERROR(IntFromEnv(env, "SSDFEED_S3_BACKOFF_MS", 0, kM, &c.backoff_ms));
  SSDFEED_RETURN_IF_ERROR(IntFromEnv(env, "SSDFEED_S3_TIMEOUT_S", 1, kM, &c.timeout_s));
  SSDFEED_RETURN_IF_ERROR(IntFromEnv(env, "SSDFEED_S3_LIST_PAGE_SIZE", 0, kM, &c.list_page_size));
  SSDFEED_RETURN_IF_ERROR(IntFromEnv(env, "SSDFEED_S3_MAX_KEYS", 1, 1000 * kM, &c.max_keys));
  SSDFEED_RETURN_IF_ERROR(
      IntFromEnv(env, "SSDFEED_S3_MAX_OBJECT_MB", 1, int64_t{1} << 24, &c.max_object_mb));
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
  Status s = ValidateBucket(*bucket);
  if (!s.ok()) return Status::InvalidArgument(Printable(uri) + ": " + s.message());
  return Status::OK();
}

Status ValidateBucket(const std::string& bucket) {
  bool ok =
      !bucket.empty() && bucket.size() <= 255 &&
      std::all_of(bucket.begin(), bucket.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
      });
  if (ok) return Status::OK();
  return Status::InvalidArgument("bucket name '" + Printable(bucket) +
                                 "' is not valid (1-255 of letters, digits, '.', '-', '_')");
}

bool VirtualHostable(const std::string& bucket, bool allow_dots) {
  if (bucket.size() < 3 || bucket.size() > 63 || IsIPv4(bucket)) return false;
  if (!allow_dots && bucket.find('.') != std::string::npos) return false;
  for (size_t i = 0; i <= bucket.size();) {
    size_t dot = std::min(bucket.find('.', i), bucket.size());
    std::string_view label = std::string_view(bucket).substr(i, dot - i);
    if (label.empty() || label.front() == '-' || label.back() == '-') return false;
    for (char c : label)
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
    i = dot + 1;
  }
  return true;
}

Client::Client(Config config) : config_(std::move(config)) {
  GlobalInit();
  std::string ep = config_.endpoint.empty() ? "https://s3." + config_.region + ".amazonaws.com"
                                            : config_.endpoint;
  endpoint_status_ = ParseEndpoint(ep, &scheme_, &host_);
  std::string name = host_.substr(0, host_.rfind(':'));
  endpoint_is_ip_ = IsIPv4(name) || (!host_.empty() && host_[0] == '[');
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

Result<Client::Request> Client::MakeRequest(const std::string& bucket,
                                            const std::string& key) const {
  SSDFEED_RETURN_IF_ERROR(endpoint_status_);
  SSDFEED_RETURN_IF_ERROR(ValidateBucket(bucket));
  Request r;
  r.what = "s3://" + bucket + "/" + key;
  // (Built by append: GCC 12 warns falsely on "literal" + std::string&&.)
  std::string path("/");
  path.append(UriEncode(key, true));
  bool path_style = config_.path_style || endpoint_is_ip_ ||
                    !VirtualHostable(bucket, /*allow_dots=*/scheme_ == "http");
  if (path_style) {
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

namespace {

// The request's URL, parsed by curl and checked to go to the host it is
// signed for (and nowhere else) before any credential leaves.
Result<Url> BuildUrl(const std::string& what, const std::string& scheme, const SignRequest& sr,
                     const std::string& query) {
  std::string text =
      scheme + "://" + sr.host + sr.encoded_path + (query.empty() ? "" : "?" + query);
  Url u(curl_url());
  if (!u) return Status::InvalidArgument("out of memory parsing an URL");
  // PATH_AS_IS: a key may hold "." and ".." segments; S3 takes them literally.
  bool ok = curl_url_set(u.get(), CURLUPART_URL, text.c_str(), CURLU_PATH_AS_IS) == CURLUE_OK;
  if (ok) {
    std::string host = Authority(u.get());
    ok = host.size() == sr.host.size() &&
         std::equal(host.begin(), host.end(), sr.host.begin(),
                    [](char a, char b) {
                      return std::tolower(static_cast<unsigned char>(a)) ==
                             std::tolower(static_cast<unsigned char>(b));
                    }) &&
         UrlPart(u.get(), CURLUPART_PATH) == sr.encoded_path &&
         UrlPart(u.get(), CURLUPART_FRAGMENT).empty() && UrlPart(u.get(), CURLUPART_USER).empty();
  }
  if (!ok)
    return Status::InvalidArgument(what + ": refusing to send a request whose URL '" +
                                   Printable(text) + "' does not parse to host '" +
                                   Printable(sr.host) + "'");
  return u;
}

}  // namespace

Status Client::Perform(const Request& req, uint64_t limit, Response* resp) {
  SignRequest sr = req.sign;
  sr.amz_date = AmzDateNow();
  std::vector<std::pair<std::string, std::string>> headers = sr.headers;
  std::string query = CanonicalQuery(sr.query);
  SSDFEED_ASSIGN_OR_RETURN(Url url, BuildUrl(req.what, scheme_, sr, query));
  if (!config_.creds.access_key.empty()) {
    Signed s = Sign(sr, config_.creds);
    headers = s.headers;
  }
  curl_slist* list = nullptr;
  list = curl_slist_append(list, ("Host: " + sr.host).c_str());
  for (const auto& [k, v] : headers) list = curl_slist_append(list, (k + ": " + v).c_str());
  CURL* h = static_cast<CURL*>(Acquire());
  curl_easy_reset(h);
  resp->body.clear();
  Body body{&resp->body, limit};
  resp->code = 0;
  char err[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(h, CURLOPT_CURLU, url.get());
#if LIBCURL_VERSION_NUM >= 0x075500
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
  // libcurl before 7.85 (Debian 11's 7.74, which the binary wheel carries)
  // has only the bitmask options, deprecated since.
  curl_easy_setopt(h, CURLOPT_PROTOCOLS, static_cast<long>(CURLPROTO_HTTP | CURLPROTO_HTTPS));
  curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS, static_cast<long>(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
  if (!config_.ca_bundle.empty()) curl_easy_setopt(h, CURLOPT_CAINFO, config_.ca_bundle.c_str());
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
  curl_easy_setopt(h, CURLOPT_CURLU, nullptr);  // url dies before the pooled handle
  Release(h);
  curl_slist_free_all(list);
  if (rc != CURLE_OK) {
    resp->body.clear();
    std::string msg = err[0] ? err : curl_easy_strerror(rc);
    if (body.overflow)
      return Status::Corruption(req.what + ": the answer is longer than " + std::to_string(limit) +
                                " bytes");
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
    // error document always fits. A listing page over kMaxListPage is an
    // error: no retry would shorten it.
    Status s = Perform(
        req, want_bytes > 0 ? std::min<uint64_t>(want_bytes, ~0ull - 65536) + 65536 : kMaxListPage,
        resp);
    if (s.code() == Status::Code::kInvalidArgument) return s;
    if (s.code() == Status::Code::kCorruption && want_bytes == 0) return s;
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
    // The server's words, without the control characters that could
    // rewrite a terminal or a log line.
    std::string detail = Printable(Tag(resp->body, "Code"));
    std::string msg = Printable(Tag(resp->body, "Message"));
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
  int empty_pages = 0;  // in a row: a server may not page on forever without keys
  do {
    SSDFEED_ASSIGN_OR_RETURN(Request req, MakeRequest(bucket, ""));
    req.what = "s3://" + bucket + "/" + prefix + " (listing)";
    req.sign.query = {{"list-type", "2"}, {"prefix", prefix}};
    if (!token.empty()) req.sign.query.emplace_back("continuation-token", token);
    if (config_.list_page_size > 0)
      req.sign.query.emplace_back("max-keys", std::to_string(config_.list_page_size));
    Response resp;
    SSDFEED_RETURN_IF_ERROR(Execute(req, 0, &resp));
    std::string next;
    size_t before = out.size();
    SSDFEED_RETURN_IF_ERROR(ParseListPage(resp.body, req.what, &out, &next));
    if (!next.empty() && next == token)
      return Status::Corruption(req.what + ": the server repeats its continuation token");
    if (static_cast<int64_t>(out.size()) > config_.max_keys)
      return Status::Corruption(req.what + ": more than " + std::to_string(config_.max_keys) +
                                " keys (raise SSDFEED_S3_MAX_KEYS if that many are expected)");
    empty_pages = out.size() == before ? empty_pages + 1 : 0;
    if (empty_pages > 100)
      return Status::Corruption(req.what + ": the server sends page after page without a key");
    token = next;
  } while (!token.empty());
  std::sort(out.begin(), out.end(),
            [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
  auto dup = std::adjacent_find(out.begin(), out.end(),
                                [](const auto& a, const auto& b) { return a.key == b.key; });
  if (dup != out.end())
    return Status::Corruption("s3://" + bucket + "/" + prefix + " (listing): key '" +
                              Printable(dup->key) + "' is listed twice");
  return out;
}

Status Client::Get(const std::string& bucket, const ObjectInfo& obj, uint64_t offset, uint64_t n,
                   std::string* out) {
  out->clear();
  if (offset >= obj.size) return Status::OK();
  n = std::min(n, obj.size - offset);
  SSDFEED_ASSIGN_OR_RETURN(Request req, MakeRequest(bucket, obj.key));
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
  object_bytes_.fetch_add(out->size(), std::memory_order_relaxed);
  return Status::OK();
}

}  // namespace ssdfeed::s3
