// JPEG through TurboJPEG (with DCT-domain scaling), PNG through libspng.
#include <turbojpeg.h>

#include <cstring>
#include <opencv2/imgproc.hpp>

#include "image/cv_call.h"
#include "image/jpeg_planes.h"
#include "image/png.h"
#include "ssdfeed/image.h"

namespace ssdfeed {

ImageFormat SniffFormat(std::string_view b) {
  if (b.size() >= 3 && static_cast<uint8_t>(b[0]) == 0xFF && static_cast<uint8_t>(b[1]) == 0xD8 &&
      static_cast<uint8_t>(b[2]) == 0xFF)
    return ImageFormat::kJpeg;
  if (b.size() >= 8 && std::memcmp(b.data(), "\x89PNG\r\n\x1a\n", 8) == 0) return ImageFormat::kPng;
  return ImageFormat::kUnknown;
}

Decoder::Decoder() : tj_(tjInitDecompress()) {}
Decoder::~Decoder() {
  if (tj_ != nullptr) tjDestroy(static_cast<tjhandle>(tj_));
}

namespace {

Status TooLarge(uint64_t w, uint64_t h, uint64_t limit) {
  return Status::InvalidArgument("image of " + std::to_string(w) + "x" + std::to_string(h) +
                                 " pixels exceeds the decode limit of " + std::to_string(limit) +
                                 " pixels");
}

// Adobe CMYK JPEGs store inverted ink; libjpeg hands them back as is.
void CmykToRgb(const uint8_t* cmyk, size_t pixels, uint8_t* rgb) {
  for (size_t i = 0; i < pixels; ++i) {
    unsigned k = cmyk[4 * i + 3];
    rgb[3 * i + 0] = static_cast<uint8_t>(cmyk[4 * i + 0] * k / 255);
    rgb[3 * i + 1] = static_cast<uint8_t>(cmyk[4 * i + 1] * k / 255);
    rgb[3 * i + 2] = static_cast<uint8_t>(cmyk[4 * i + 2] * k / 255);
  }
}

Status DecodeJpeg(tjhandle tj, std::string_view bytes, bool gray, int min_h, int min_w,
                  const DecodeLimits& limits, Image* scratch, Image* out) {
  if (tj == nullptr) return Status::IOError("TurboJPEG could not be initialised");
  const auto* src = reinterpret_cast<const unsigned char*>(bytes.data());
  int w = 0, h = 0, subsamp = 0, cs = 0;
  if (tjDecompressHeader3(tj, src, bytes.size(), &w, &h, &subsamp, &cs) != 0)
    return Status::Corruption(std::string("bad JPEG header: ") + tjGetErrorStr2(tj));
  if (w <= 0 || h <= 0) return Status::Corruption("JPEG with zero size");
  if (static_cast<uint64_t>(w) * h > limits.max_pixels) return TooLarge(w, h, limits.max_pixels);
  tjscalingfactor sf = PickDctScale(w, h, min_w, min_h);
  int sw = TJSCALED(w, sf), sh = TJSCALED(h, sf);
  bool cmyk = (cs == TJCS_CMYK || cs == TJCS_YCCK);
  int pf = gray && !cmyk ? TJPF_GRAY : (cmyk ? TJPF_CMYK : TJPF_RGB);
  Image* target = cmyk ? scratch : out;
  target->Reset(sh, sw, tjPixelSize[pf]);
  if (tjDecompress2(tj, src, bytes.size(), target->pixels.data(), sw, 0, sh, pf, 0) != 0) {
    // Warnings (a truncated scan, bad Huffman data) mean missing pixels: for
    // training data that is corruption, not a usable image.
    return Status::Corruption(std::string("corrupt JPEG: ") + tjGetErrorStr2(tj));
  }
  if (!cmyk) return Status::OK();
  out->Reset(sh, sw, 3);
  CmykToRgb(scratch->pixels.data(), static_cast<size_t>(sw) * sh, out->pixels.data());
  if (!gray) return Status::OK();
  cv::Mat g;
  SSDFEED_RETURN_IF_ERROR(CvCall("CMYK JPEG to grey", [&] {
    cv::Mat rgb(sh, sw, CV_8UC3, out->pixels.data());
    cv::cvtColor(rgb, g, cv::COLOR_RGB2GRAY);
  }));
  out->Reset(sh, sw, 1);
  std::memcpy(out->pixels.data(), g.data, out->bytes());
  return Status::OK();
}

Status DecodePng(std::string_view bytes, bool gray, const DecodeLimits& limits, Image* scratch,
                 Image* out) {
  SpngContext ctx;
  spng_ihdr ihdr;
  SSDFEED_RETURN_IF_ERROR(OpenPng(bytes, &ctx, &ihdr));
  if (static_cast<uint64_t>(ihdr.width) * ihdr.height > limits.max_pixels)
    return TooLarge(ihdr.width, ihdr.height, limits.max_pixels);
  size_t size = 0;
  if (int e = spng_decoded_image_size(ctx.get(), SPNG_FMT_RGB8, &size); e != 0)
    return Status::Corruption(std::string("bad PNG: ") + spng_strerror(e));
  Image* target = gray ? scratch : out;
  target->Reset(static_cast<int>(ihdr.height), static_cast<int>(ihdr.width), 3);
  if (size != target->bytes()) return Status::Corruption("PNG size mismatch");
  if (int e = spng_decode_image(ctx.get(), target->pixels.data(), size, SPNG_FMT_RGB8, 0); e != 0)
    return Status::Corruption(std::string("corrupt PNG: ") + spng_strerror(e));
  if (!gray) return Status::OK();
  out->Reset(target->height, target->width, 1);
  return CvCall("PNG to grey", [&] {
    cv::Mat rgb(target->height, target->width, CV_8UC3, target->pixels.data());
    cv::Mat g(out->height, out->width, CV_8UC1, out->pixels.data());
    cv::cvtColor(rgb, g, cv::COLOR_RGB2GRAY);
  });
}

}  // namespace

Status Decoder::Decode(std::string_view bytes, bool gray, int min_h, int min_w, Image* out) {
  if (bytes.empty()) return Status::Corruption("empty file (0 bytes)");
  switch (SniffFormat(bytes)) {
    case ImageFormat::kJpeg:
      return DecodeJpeg(static_cast<tjhandle>(tj_), bytes, gray, min_h, min_w, limits, &scratch_,
                        out);
    case ImageFormat::kPng:
      return DecodePng(bytes, gray, limits, &scratch_, out);
    default:
      return Status::Corruption("not a JPEG or PNG (unknown signature)");
  }
}

Status EncodeJpeg(const Image& img, int quality, std::string* out) {
  tjhandle tj = tjInitCompress();
  if (tj == nullptr) return Status::IOError("TurboJPEG could not be initialised");
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  int pf = img.channels == 1 ? TJPF_GRAY : TJPF_RGB;
  int ss = img.channels == 1 ? TJSAMP_GRAY : TJSAMP_420;
  int r =
      tjCompress2(tj, img.pixels.data(), img.width, 0, img.height, pf, &buf, &size, ss, quality, 0);
  Status s = r == 0 ? Status::OK()
                    : Status::IOError(std::string("JPEG encode failed: ") + tjGetErrorStr2(tj));
  if (r == 0) out->assign(reinterpret_cast<char*>(buf), size);
  tjFree(buf);
  tjDestroy(tj);
  return s;
}

Status OpenPng(std::string_view bytes, SpngContext* ctx, spng_ihdr* ihdr) {
  ctx->reset(spng_ctx_new(0));
  if (!*ctx) return Status::IOError("libspng could not be initialised");
  // Bounds on dimensions and on ancillary chunk sizes defeat PNG bombs.
  spng_set_image_limits(ctx->get(), 1u << 24, 1u << 24);
  spng_set_chunk_limits(ctx->get(), 64u << 20, 64u << 20);
  spng_set_png_buffer(ctx->get(), bytes.data(), bytes.size());
  if (int e = spng_get_ihdr(ctx->get(), ihdr); e != 0)
    return Status::Corruption(std::string("bad PNG header: ") + spng_strerror(e));
  return Status::OK();
}

}  // namespace ssdfeed
