// libspng, opened the one way every PNG here is read (images in decode.cc,
// masks in field_prepare.cc): bounded dimensions and ancillary chunks, so a
// PNG bomb is refused before anything is allocated for it.
#pragma once

#include <spng.h>

#include <memory>
#include <string_view>

#include "ssdfeed/status.h"

namespace ssdfeed {

struct SpngDeleter {
  void operator()(spng_ctx* c) const { spng_ctx_free(c); }
};
using SpngContext = std::unique_ptr<spng_ctx, SpngDeleter>;

// A context reading bytes (which must outlive it), and its header. A bad
// header is Corruption saying so.
Status OpenPng(std::string_view bytes, SpngContext* ctx, spng_ihdr* ihdr);

}  // namespace ssdfeed
