// The SigV4 signer against AWS's published S3 example (GET /test.txt with
// a Range header, "Example: GET Object" in the S3 API reference). Keys with
// special characters are compared with botocore in tests/py/test_s3.py.
#include "source/s3_sigv4.h"

#include <gtest/gtest.h>

namespace ssdfeed::s3 {
namespace {

TEST(S3SigV4, MatchesAwsPublishedExample) {
  SignRequest r;
  r.host = "examplebucket.s3.amazonaws.com";
  r.encoded_path = "/test.txt";
  r.headers = {{"Range", "bytes=0-9"}};
  r.region = "us-east-1";
  r.amz_date = "20130524T000000Z";
  Signed s = Sign(r, {"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""});
  EXPECT_EQ(s.canonical_request,
            "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
            "x-amz-content-sha256:"
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
            "x-amz-date:20130524T000000Z\n\nhost;range;x-amz-content-sha256;x-amz-date\n"
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(s.signature, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(S3SigV4, EncodesEveryReservedByteOnce) {
  EXPECT_EQ(UriEncode("a b/c=d+e:f~g.h_i-j", true), "a%20b/c%3Dd%2Be%3Af~g.h_i-j");
  EXPECT_EQ(UriEncode("a/b", false), "a%2Fb");
  EXPECT_EQ(UriEncode("\xc3\xa9", true), "%C3%A9");
  EXPECT_EQ(CanonicalQuery({{"prefix", "a b/"}, {"list-type", "2"}}),
            "list-type=2&prefix=a%20b%2F");
}

}  // namespace
}  // namespace ssdfeed::s3
