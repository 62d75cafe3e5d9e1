// AWS Signature Version 4 for S3 requests, computed here rather than by
// libcurl: CURLOPT_AWS_SIGV4 of bookworm's libcurl 7.88 is known to sign a
// canonical URI other than the one S3 checks for some keys (spaces, '=',
// '+', ':', non-ASCII), and its canonical request cannot be inspected. Here
// it is built as botocore's S3SigV4Auth builds it, and tests compare both.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace ssdfeed::s3 {

// RFC 3986 percent-encoding: unreserved characters (A-Z a-z 0-9 - . _ ~)
// stay, every other byte becomes %XX; '/' stays too when keep_slash.
std::string UriEncode(const std::string& s, bool keep_slash);

struct Credentials {
  std::string access_key;
  std::string secret_key;
  std::string session_token;  // empty: none
};

struct SignRequest {
  std::string method = "GET";
  std::string host;  // as sent in the Host header (with :port if not default)
  // The encoded path as sent ("/bucket/some%20key"): S3 signs it as is.
  std::string encoded_path;
  // Query parameters, not encoded (the signer encodes and sorts them).
  std::vector<std::pair<std::string, std::string>> query;
  // Extra headers to send and sign (e.g. range, if-match), any case.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string region;
  std::string amz_date;  // "20250101T000000Z"
};

struct Signed {
  std::string canonical_request;
  std::string string_to_sign;
  std::string signature;  // hex
  // Every header to send, Authorization included.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string query_string;  // encoded, sorted: what goes after '?'
};

// Signs req with creds (service "s3", payload: the empty body's SHA-256).
Signed Sign(const SignRequest& req, const Credentials& creds);

// The query string alone (encoded, sorted), for unsigned requests.
std::string CanonicalQuery(const std::vector<std::pair<std::string, std::string>>& query);

// x-amz-date for now (UTC).
std::string AmzDateNow();

}  // namespace ssdfeed::s3
