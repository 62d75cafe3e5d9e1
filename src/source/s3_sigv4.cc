#include "source/s3_sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cctype>
#include <ctime>

namespace ssdfeed::s3 {

namespace {

constexpr char kEmptySha256[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

std::string Hex(const unsigned char* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = d[p[i] >> 4];
    s[2 * i + 1] = d[p[i] & 15];
  }
  return s;
}

std::string Sha256Hex(const std::string& data) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), md);
  return Hex(md, sizeof md);
}

std::string Hmac(const std::string& key, const std::string& data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), md, &len);
  return std::string(reinterpret_cast<char*>(md), len);
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// Header values are signed trimmed, with inner runs of spaces made one.
std::string TrimValue(const std::string& v) {
  std::string out;
  bool space = false;
  for (char c : v) {
    if (c == ' ' || c == '\t') {
      space = !out.empty();
      continue;
    }
    if (space) out.push_back(' ');
    space = false;
    out.push_back(c);
  }
  return out;
}

}  // namespace

std::string UriEncode(const std::string& s, bool keep_slash) {
  static const char* d = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' ||
        (keep_slash && c == '/')) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(d[c >> 4]);
      out.push_back(d[c & 15]);
    }
  }
  return out;
}

std::string CanonicalQuery(const std::vector<std::pair<std::string, std::string>>& query) {
  std::vector<std::pair<std::string, std::string>> enc;
  for (const auto& [k, v] : query) enc.emplace_back(UriEncode(k, false), UriEncode(v, false));
  std::sort(enc.begin(), enc.end());
  std::string q;
  for (const auto& [k, v] : enc) {
    if (!q.empty()) q.push_back('&');
    q.append(k).append("=").append(v);
  }
  return q;
}

std::string AmzDateNow() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[20];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

Signed Sign(const SignRequest& req, const Credentials& creds) {
  Signed out;
  std::vector<std::pair<std::string, std::string>> hs;  // lower-case name, trimmed value
  hs.emplace_back("host", req.host);
  hs.emplace_back("x-amz-content-sha256", kEmptySha256);
  hs.emplace_back("x-amz-date", req.amz_date);
  if (!creds.session_token.empty()) hs.emplace_back("x-amz-security-token", creds.session_token);
  for (const auto& [k, v] : req.headers) hs.emplace_back(Lower(k), TrimValue(v));
  std::sort(hs.begin(), hs.end());
  std::string canon_headers, signed_headers;
  for (const auto& [k, v] : hs) {
    canon_headers.append(k).append(":").append(v).append("\n");
    if (!signed_headers.empty()) signed_headers.push_back(';');
    signed_headers.append(k);
  }
  out.query_string = CanonicalQuery(req.query);
  out.canonical_request = req.method + "\n" + req.encoded_path + "\n" + out.query_string + "\n" +
                          canon_headers + "\n" + signed_headers + "\n" + kEmptySha256;
  std::string date = req.amz_date.substr(0, 8);
  std::string scope = date + "/" + req.region + "/s3/aws4_request";
  out.string_to_sign =
      "AWS4-HMAC-SHA256\n" + req.amz_date + "\n" + scope + "\n" + Sha256Hex(out.canonical_request);
  std::string key = Hmac("AWS4" + creds.secret_key, date);
  key = Hmac(Hmac(Hmac(key, req.region), "s3"), "aws4_request");
  std::string sig = Hmac(key, out.string_to_sign);
  out.signature = Hex(reinterpret_cast<const unsigned char*>(sig.data()), sig.size());
  for (const auto& h : hs)
    if (h.first != "host") out.headers.push_back(h);
  out.headers.emplace_back("authorization", "AWS4-HMAC-SHA256 Credential=" + creds.access_key +
                                                "/" + scope + ", SignedHeaders=" + signed_headers +
                                                ", Signature=" + out.signature);
  return out;
}

}  // namespace ssdfeed::s3
