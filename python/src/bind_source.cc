#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include "python/src/bindings.h"
#include "source/s3_sigv4.h"
#include "ssdfeed/source.h"

namespace nb = nanobind;

namespace ssdfeed::py {

namespace {

std::unique_ptr<Source> OpenSourceOrThrow(const std::string& uri, const SourceOptions& o) {
  Result<std::unique_ptr<Source>> r = Status::Aborted("unset");
  {
    nb::gil_scoped_release nogil;
    r = OpenSource(uri, o);
  }
  return ValueOrThrow(std::move(r));
}

}  // namespace

void BindSource(nb::module_& m) {
  BindEnum<OnError>(m, "OnError", "SourceOptions.on_error");

  nb::class_<Source>(m, "Source",
                     "An origin dataset: folder:DIR, tfrecord:GLOB, tar:GLOB or s3://BUCKET/....")
      .def(nb::new_([](const std::string& uri, const std::string& image_key,
                       const std::string& label_key, const std::string& on_error) {
             SourceOptions o;
             o.image_key = image_key;
             o.label_key = label_key;
             o.on_error = ValueOrThrow(ParseEnum<OnError>(on_error));
             return OpenSourceOrThrow(uri, o);
           }),
           nb::arg("uri"), nb::arg("image_key") = "", nb::arg("label_key") = "",
           nb::arg("on_error") = "raise", "Opens a source URI.")
      .def("__len__", &Source::size)
      .def(
          "read",
          [](const Source& s, size_t i) {
            if (i >= s.size()) throw nb::index_error("sample id out of range");
            EncodedSample e;
            Status st;
            {
              nb::gil_scoped_release nogil;
              st = s.Read(i, &e);
            }
            ThrowIfError(st);
            return nb::make_tuple(nb::bytes(e.bytes.data(), e.bytes.size()), e.label);
          },
          nb::arg("id"), "Encoded bytes and label of sample id.")
      .def("describe", &Source::Describe, nb::arg("id"))
      .def_prop_ro("identity", &Source::identity)
      .def_prop_ro("uri", &Source::uri)
      .def_prop_ro("skipped", &Source::skipped);

  m.def("open_source_with", &OpenSourceOrThrow, nb::arg("uri"), nb::arg("options"),
        "Opens a source URI with a SourceOptions.");

  // For tests only: the SigV4 signature of an S3 request, to compare with
  // botocore's signer.
  m.def(
      "_s3_sign",
      [](const std::string& method, const std::string& host, const std::string& encoded_path,
         const std::vector<std::pair<std::string, std::string>>& query,
         const std::vector<std::pair<std::string, std::string>>& headers, const std::string& access,
         const std::string& secret, const std::string& token, const std::string& region,
         const std::string& amz_date) {
        s3::SignRequest r{method, host, encoded_path, query, headers, region, amz_date};
        s3::Signed sg = s3::Sign(r, {access, secret, token});
        return nb::make_tuple(sg.canonical_request, sg.signature);
      },
      nb::arg("method"), nb::arg("host"), nb::arg("encoded_path"), nb::arg("query"),
      nb::arg("headers"), nb::arg("access_key"), nb::arg("secret_key"), nb::arg("token"),
      nb::arg("region"), nb::arg("amz_date"));
  m.def(
      "_s3_uri_encode", [](const std::string& s) { return s3::UriEncode(s, true); },
      nb::arg("key"));
}

}  // namespace ssdfeed::py
