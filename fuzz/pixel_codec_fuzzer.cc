// The record codecs over arbitrary stored bytes, and over valid streams with
// one byte changed: never a crash, never a write outside the output, and a
// stream that decodes is the shape asked for (zstd: the exact pixels when
// undamaged; yuv420: any bytes of the planes' length decode).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "image/pixel_codec.h"

namespace {

constexpr size_t kHeader = 7;

struct Case {
  ssdfeed::RecordCodec codec;
  bool round_trip;  // encode the rest as pixels, damage one byte, decode
  int h, w, c, quality;
  size_t flip_at;
};

Case Parse(const uint8_t* d) {
  static constexpr int kChannels[] = {1, 3, 2, 4};
  Case k;
  k.codec = static_cast<ssdfeed::RecordCodec>(d[0] % 4);
  k.round_trip = (d[0] & 4) != 0;
  k.h = 1 + d[1] % 40;
  k.w = 1 + d[2] % 40;
  k.c = kChannels[d[3] % 4];
  k.quality = 1 + d[4] % 100;
  k.flip_at = size_t{d[5]} << 8 | d[6];
  return k;
}

void RoundTrip(const Case& k, const uint8_t* rest, size_t n, ssdfeed::PixelCodecScratch* s) {
  size_t bytes = static_cast<size_t>(k.h) * k.w * k.c;
  std::vector<uint8_t> pixels(bytes);
  for (size_t i = 0; i < bytes && n > 0; ++i) pixels[i] = rest[i % n];
  std::string stored;
  if (!ssdfeed::EncodePixels(k.codec, k.quality, pixels.data(), k.h, k.w, k.c, &stored, s).ok())
    return;  // jpeg or yuv420 of 2 or 4 channels: refused, as they should be
  std::vector<uint8_t> out(bytes);
  ssdfeed::Status st = ssdfeed::DecodePixels(k.codec, stored, k.h, k.w, k.c, out.data(), s);
  if (!st.ok()) abort();  // a stream the encoder wrote must decode
  // The lossless ones give the pixels back (yuv420 of one channel is its
  // gray plane as it is).
  bool lossy = k.codec == ssdfeed::RecordCodec::kJpeg ||
               (k.codec == ssdfeed::RecordCodec::kYuv420 && k.c == 3);
  if (!lossy && out != pixels) abort();
  if (stored.empty()) return;
  stored[k.flip_at % stored.size()] ^= static_cast<char>(1 + (k.flip_at >> 8) % 255);
  st = ssdfeed::DecodePixels(k.codec, stored, k.h, k.w, k.c, out.data(), s);
  // jpeg's check covers its stream; zstd's covers the content, so a change
  // that still decodes (a match offset onto equal bytes) gives the same
  // pixels; raw and yuv420 have no stream to check (the record's checksum
  // covers them).
  if (st.ok() && k.codec == ssdfeed::RecordCodec::kJpeg) abort();
  if (st.ok() && k.codec == ssdfeed::RecordCodec::kZstd && out != pixels) abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < kHeader) return 0;
  static ssdfeed::PixelCodecScratch scratch;  // reused across inputs, as by a worker
  Case k = Parse(data);
  const uint8_t* rest = data + kHeader;
  size_t n = size - kHeader;
  if (k.round_trip) {
    RoundTrip(k, rest, n, &scratch);
    return 0;
  }
  // The exact output size, so ASan sees any write past it.
  std::vector<uint8_t> out(static_cast<size_t>(k.h) * k.w * k.c);
  std::string_view stored(reinterpret_cast<const char*>(rest), n);
  (void)ssdfeed::DecodePixels(k.codec, stored, k.h, k.w, k.c, out.data(), &scratch);
  return 0;
}
