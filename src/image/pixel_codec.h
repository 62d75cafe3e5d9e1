// Record codecs: how a cache record stores its prepared pixels. raw keeps
// them as they are; zstd is lossless (a delta filter, then zstd); jpeg
// re-encodes them with libjpeg-turbo (lossy: the served pixels are its
// decode). The codec is chosen per entry (PrepareSpec::codec, part of the
// fingerprint) and written in every record's byte 22, so a record says how
// to read it. docs/cache-format.md, "Codecs".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ssdfeed/image.h"
#include "ssdfeed/status.h"

namespace ssdfeed {

// Per-thread state of the codecs (zstd contexts, a TurboJPEG handle, a
// filter row). Reused, so encoding and decoding allocate nothing once warm.
// Not thread-safe: one per thread.
class PixelCodecScratch {
 public:
  PixelCodecScratch();
  ~PixelCodecScratch();
  PixelCodecScratch(const PixelCodecScratch&) = delete;
  PixelCodecScratch& operator=(const PixelCodecScratch&) = delete;
  struct State;
  State* state() { return state_; }

 private:
  State* state_;
};

// The calling thread's scratch, made on its first use: a worker's cache
// reads and renders decode through the one.
PixelCodecScratch* ThisThreadCodecScratch();

// True for the codecs whose served pixels are the decode of their stored
// bytes, not the prepared pixels (jpeg, yuv420): a sample prepared from the
// origin is served through the same round trip, so every epoch serves the
// same pixels.
inline bool IsLossy(RecordCodec codec) {
  return codec == RecordCodec::kJpeg || codec == RecordCodec::kYuv420;
}

// Stores h x w x c uint8 HWC pixels as codec's bytes, appended to *out.
// quality: jpeg's (1-100); ignored by the others.
Status EncodePixels(RecordCodec codec, int quality, const uint8_t* pixels, int h, int w, int c,
                    std::string* out, PixelCodecScratch* scratch);

// Decodes stored bytes back to exactly h x w x c pixels into out (which
// holds h*w*c bytes). Bytes that do not decode to that shape (damage, a
// foreign codec) are Corruption saying what is wrong; the caller names the
// record. Never reads or writes outside the given spans.
Status DecodePixels(RecordCodec codec, std::string_view stored, int h, int w, int c, uint8_t* out,
                    PixelCodecScratch* scratch);

}  // namespace ssdfeed
