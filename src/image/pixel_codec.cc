// The record codecs. zstd: PNG's "Up" filter (each byte minus the byte one
// row above), then zstd level 1 with its content checksum. Up was chosen by
// measurement (docs/cache-format.md, "Codecs"): it shrinks noisy photos as
// well as Sub, Average or Paeth do within 0.04x, and undoing it is one
// vectorised add per row in place, where the others are a serial chain per
// byte. jpeg: TurboJPEG at the spec's quality, 4:2:0 (gray for 1 channel),
// then 4 bytes of XXH3 over the JPEG bytes, so a damaged stream is refused
// even where libjpeg would decode it silently to other pixels. yuv420:
// image/yuv420.h.
#include "image/pixel_codec.h"

#include <turbojpeg.h>
#include <xxhash.h>
#include <zstd.h>

#include <cstring>
#include <vector>

#include "image/yuv420.h"
#include "ssdfeed/enum_names.h"

namespace ssdfeed {

// The spellings of RecordCodec (ssdfeed/enum_names.h).
SSDFEED_ENUM_TABLE(RecordCodec, "codec", {RecordCodec::kRaw, "raw"}, {RecordCodec::kZstd, "zstd"},
                   {RecordCodec::kJpeg, "jpeg"}, {RecordCodec::kYuv420, "yuv420"})

namespace {

constexpr int kZstdLevel = 1;
constexpr size_t kJpegTrailer = 4;

size_t PixelBytes(int h, int w, int c) {
  return static_cast<size_t>(h) * static_cast<size_t>(w) * static_cast<size_t>(c);
}

uint32_t JpegCheck(const void* data, size_t n) {
  return static_cast<uint32_t>(XXH3_64bits(data, n));
}

// rows[y] - rows[y-1], row 0 as it is.
void UpFilter(const uint8_t* __restrict in, size_t rows, size_t row_bytes,
              uint8_t* __restrict out) {
  std::memcpy(out, in, row_bytes);
  for (size_t i = row_bytes; i < rows * row_bytes; ++i) out[i] = in[i] - in[i - row_bytes];
}

void UpUnfilterRow(const uint8_t* __restrict above, uint8_t* __restrict row, size_t row_bytes) {
  for (size_t i = 0; i < row_bytes; ++i) row[i] += above[i];
}

void UpUnfilter(uint8_t* pixels, size_t rows, size_t row_bytes) {
  for (size_t y = 1; y < rows; ++y)
    UpUnfilterRow(pixels + (y - 1) * row_bytes, pixels + y * row_bytes, row_bytes);
}

Status BadShape(int h, int w, int c) {
  return Status::InvalidArgument("pixel codec: bad shape " + std::to_string(h) + "x" +
                                 std::to_string(w) + "x" + std::to_string(c));
}

}  // namespace

struct PixelCodecScratch::State {
  ZSTD_CCtx* cctx = nullptr;
  ZSTD_DCtx* dctx = nullptr;
  tjhandle tj_enc = nullptr;
  tjhandle tj_dec = nullptr;
  std::vector<uint8_t> buffer;  // the filtered image / the JPEG being written / upsampled chroma

  ~State() {
    ZSTD_freeCCtx(cctx);
    ZSTD_freeDCtx(dctx);
    if (tj_enc != nullptr) tjDestroy(tj_enc);
    if (tj_dec != nullptr) tjDestroy(tj_dec);
  }
  uint8_t* Buffer(size_t n) {
    if (buffer.size() < n) buffer.resize(n);
    return buffer.data();
  }
};

PixelCodecScratch::PixelCodecScratch() : state_(new State) {}
PixelCodecScratch::~PixelCodecScratch() { delete state_; }

namespace {

Status ZstdEncode(const uint8_t* pixels, int h, int w, int c, std::string* out,
                  PixelCodecScratch::State* s) {
  if (s->cctx == nullptr) {
    s->cctx = ZSTD_createCCtx();
    if (s->cctx == nullptr) return Status::IOError("zstd: cannot create a compression context");
    ZSTD_CCtx_setParameter(s->cctx, ZSTD_c_compressionLevel, kZstdLevel);
    ZSTD_CCtx_setParameter(s->cctx, ZSTD_c_checksumFlag, 1);
  }
  size_t n = PixelBytes(h, w, c);
  uint8_t* filtered = s->Buffer(n);
  UpFilter(pixels, static_cast<size_t>(h), static_cast<size_t>(w) * c, filtered);
  size_t at = out->size();
  out->resize(at + ZSTD_compressBound(n));
  size_t z = ZSTD_compress2(s->cctx, out->data() + at, out->size() - at, filtered, n);
  if (ZSTD_isError(z)) {
    out->resize(at);
    return Status::IOError(std::string("zstd compression failed: ") + ZSTD_getErrorName(z));
  }
  out->resize(at + z);
  return Status::OK();
}

Status ZstdDecode(std::string_view stored, int h, int w, int c, uint8_t* out,
                  PixelCodecScratch::State* s) {
  if (s->dctx == nullptr) {
    s->dctx = ZSTD_createDCtx();
    if (s->dctx == nullptr) return Status::IOError("zstd: cannot create a decompression context");
  }
  size_t n = PixelBytes(h, w, c);
  // The frame must carry its content checksum (RFC 8878: bit 2 of the frame
  // header descriptor after the 4-byte magic), or damage in its literals
  // would decode to other pixels unnoticed.
  if (stored.size() < 5 || (static_cast<uint8_t>(stored[4]) & 0x04) == 0)
    return Status::Corruption("zstd pixels: not a frame with a content checksum");
  // The frame must say its size: a frame for another shape is refused
  // before anything is written.
  unsigned long long declared = ZSTD_getFrameContentSize(stored.data(), stored.size());
  if (declared != n)
    return Status::Corruption("zstd pixels: the frame does not hold " + std::to_string(n) +
                              " bytes");
  size_t got = ZSTD_decompressDCtx(s->dctx, out, n, stored.data(), stored.size());
  if (ZSTD_isError(got))
    return Status::Corruption(std::string("zstd pixels: ") + ZSTD_getErrorName(got));
  if (got != n)
    return Status::Corruption("zstd pixels: decoded " + std::to_string(got) + " bytes, want " +
                              std::to_string(n));
  UpUnfilter(out, static_cast<size_t>(h), static_cast<size_t>(w) * c);
  return Status::OK();
}

Status JpegEncode(int quality, const uint8_t* pixels, int h, int w, int c, std::string* out,
                  PixelCodecScratch::State* s) {
  if (c != 1 && c != 3)
    return Status::InvalidArgument("jpeg codec: " + std::to_string(c) +
                                   " channels (it stores 1 or 3)");
  if (quality < 1 || quality > 100)
    return Status::InvalidArgument("jpeg codec: quality " + std::to_string(quality) +
                                   " is outside 1-100");
  if (s->tj_enc == nullptr && (s->tj_enc = tjInitCompress()) == nullptr)
    return Status::IOError("TurboJPEG could not be initialised");
  int samp = c == 1 ? TJSAMP_GRAY : TJSAMP_420;
  unsigned long cap = tjBufSize(w, h, samp);
  if (cap == static_cast<unsigned long>(-1)) return BadShape(h, w, c);
  unsigned char* dst = s->Buffer(cap);
  unsigned long size = cap;
  int pf = c == 1 ? TJPF_GRAY : TJPF_RGB;
  // NOREALLOC: TurboJPEG writes into the scratch buffer, sized for the worst case.
  if (tjCompress2(s->tj_enc, pixels, w, 0, h, pf, &dst, &size, samp, quality, TJFLAG_NOREALLOC) !=
      0)
    return Status::IOError(std::string("jpeg encoding failed: ") + tjGetErrorStr2(s->tj_enc));
  uint32_t check = JpegCheck(dst, size);
  out->append(reinterpret_cast<const char*>(dst), size);
  out->append(reinterpret_cast<const char*>(&check), kJpegTrailer);
  return Status::OK();
}

Status JpegDecode(std::string_view stored, int h, int w, int c, uint8_t* out,
                  PixelCodecScratch::State* s) {
  if (c != 1 && c != 3)
    return Status::Corruption("jpeg pixels: " + std::to_string(c) + " channels (1 or 3 expected)");
  if (stored.size() <= kJpegTrailer) return Status::Corruption("jpeg pixels: truncated");
  size_t len = stored.size() - kJpegTrailer;
  uint32_t check;
  std::memcpy(&check, stored.data() + len, kJpegTrailer);
  if (check != JpegCheck(stored.data(), len))
    return Status::Corruption("jpeg pixels: the stream does not match its check");
  if (s->tj_dec == nullptr && (s->tj_dec = tjInitDecompress()) == nullptr)
    return Status::IOError("TurboJPEG could not be initialised");
  const auto* src = reinterpret_cast<const unsigned char*>(stored.data());
  int jw = 0, jh = 0, samp = 0, cs = 0;
  if (tjDecompressHeader3(s->tj_dec, src, len, &jw, &jh, &samp, &cs) != 0)
    return Status::Corruption(std::string("jpeg pixels: ") + tjGetErrorStr2(s->tj_dec));
  if (jw != w || jh != h || (c == 1) != (cs == TJCS_GRAY))
    return Status::Corruption("jpeg pixels: the stream is " + std::to_string(jh) + "x" +
                              std::to_string(jw) + (cs == TJCS_GRAY ? " gray" : " colour") +
                              ", the record " + std::to_string(h) + "x" + std::to_string(w) + "x" +
                              std::to_string(c));
  int pf = c == 1 ? TJPF_GRAY : TJPF_RGB;
  if (tjDecompress2(s->tj_dec, src, len, out, w, 0, h, pf, TJFLAG_STOPONWARNING) != 0)
    return Status::Corruption(std::string("jpeg pixels: ") + tjGetErrorStr2(s->tj_dec));
  return Status::OK();
}

// yuv420: 3 channels as Y, Cb, Cr planes (image/yuv420.h); 1 channel as
// the gray plane, which is already its own luma.
Status Yuv420Encode(const uint8_t* pixels, int h, int w, int c, std::string* out) {
  size_t n = Yuv420StoredBytes(h, w, c);
  if (n == 0)
    return Status::InvalidArgument("yuv420 codec: " + std::to_string(c) +
                                   " channels (it stores 1 or 3)");
  size_t at = out->size();
  out->resize(at + n);
  auto* dst = reinterpret_cast<uint8_t*>(out->data() + at);
  if (c == 1)
    std::memcpy(dst, pixels, n);
  else
    RgbToYuv420(pixels, h, w, dst);
  return Status::OK();
}

Status Yuv420Decode(std::string_view stored, int h, int w, int c, uint8_t* out,
                    PixelCodecScratch::State* s) {
  size_t n = Yuv420StoredBytes(h, w, c);
  if (n == 0)
    return Status::Corruption("yuv420 pixels: " + std::to_string(c) +
                              " channels (1 or 3 expected)");
  if (stored.size() != n)
    return Status::Corruption("yuv420 pixels: " + std::to_string(stored.size()) + " bytes, want " +
                              std::to_string(n) + " for " + std::to_string(h) + "x" +
                              std::to_string(w) + "x" + std::to_string(c));
  const auto* planes = reinterpret_cast<const uint8_t*>(stored.data());
  if (c == 1) {
    std::memcpy(out, planes, n);
    return Status::OK();
  }
  // Chroma upsampled by the triangle filter (nearest upsampling, which
  // TurboJPEG's planar decode is limited to, loses about 1 dB on photos),
  // then YCbCr -> RGB: bit for bit the documented arithmetic (Yuv420ToRgb,
  // its reference), fused in one pass with AVX2, else in two with TurboJPEG.
  if (Yuv420ToRgbAvx2(planes, h, w, out)) return Status::OK();
  if (s->tj_dec == nullptr && (s->tj_dec = tjInitDecompress()) == nullptr)
    return Status::IOError("TurboJPEG could not be initialised");
  Yuv420Layout l = Yuv420Of(h, w);
  uint8_t* full = s->Buffer(2 * l.y_bytes);
  UpsampleChroma(planes + l.y_bytes, h, w, full);
  UpsampleChroma(planes + l.y_bytes + l.chroma_bytes(), h, w, full + l.y_bytes);
  const unsigned char* src[3] = {planes, full, full + l.y_bytes};
  int strides[3] = {w, w, w};
  if (tjDecodeYUVPlanes(s->tj_dec, src, strides, TJSAMP_444, out, w, 0, h, TJPF_RGB, 0) != 0)
    return Status::IOError(std::string("yuv420 conversion failed: ") + tjGetErrorStr2(s->tj_dec));
  return Status::OK();
}

}  // namespace

PixelCodecScratch* ThisThreadCodecScratch() {
  thread_local PixelCodecScratch scratch;
  return &scratch;
}

Status EncodePixels(RecordCodec codec, int quality, const uint8_t* pixels, int h, int w, int c,
                    std::string* out, PixelCodecScratch* scratch) {
  if (h < 0 || w < 0 || c < 0) return BadShape(h, w, c);
  size_t n = PixelBytes(h, w, c);
  // No pixels (an image-less sample): nothing stored, whatever the codec.
  if (n == 0) return Status::OK();
  switch (codec) {
    case RecordCodec::kRaw:
      out->append(reinterpret_cast<const char*>(pixels), n);
      return Status::OK();
    case RecordCodec::kZstd:
      return ZstdEncode(pixels, h, w, c, out, scratch->state());
    case RecordCodec::kJpeg:
      return JpegEncode(quality, pixels, h, w, c, out, scratch->state());
    case RecordCodec::kYuv420:
      return Yuv420Encode(pixels, h, w, c, out);
  }
  return Status::InvalidArgument("pixel codec: unknown codec " +
                                 std::to_string(static_cast<int>(codec)));
}

Status DecodePixels(RecordCodec codec, std::string_view stored, int h, int w, int c, uint8_t* out,
                    PixelCodecScratch* scratch) {
  if (h < 0 || w < 0 || c < 0) return Status::Corruption("pixel codec: negative shape");
  size_t n = PixelBytes(h, w, c);
  if (n == 0) {
    if (stored.empty()) return Status::OK();
    return Status::Corruption("pixel codec: " + std::to_string(stored.size()) +
                              " stored bytes for no pixels");
  }
  switch (codec) {
    case RecordCodec::kRaw:
      if (stored.size() != n)
        return Status::Corruption("raw pixels: " + std::to_string(stored.size()) + " bytes, want " +
                                  std::to_string(n));
      std::memcpy(out, stored.data(), n);
      return Status::OK();
    case RecordCodec::kZstd:
      return ZstdDecode(stored, h, w, c, out, scratch->state());
    case RecordCodec::kJpeg:
      return JpegDecode(stored, h, w, c, out, scratch->state());
    case RecordCodec::kYuv420:
      return Yuv420Decode(stored, h, w, c, out, scratch->state());
  }
  return Status::Corruption("pixel codec: unknown codec " +
                            std::to_string(static_cast<int>(codec)));
}

}  // namespace ssdfeed
