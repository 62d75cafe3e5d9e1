// What `ssdfeed plan` measures to choose a record codec: the cache device's
// random-read rate at each codec's record size, and what one core spends
// decoding, checking and cropping a record of each codec. The warm rate a
// codec allows is the lower of the two: the device's reads/s, and one core's
// images/s times the loader's cores (docs/deploy.md, "Choose a record codec").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ssdfeed/augment.h"
#include "ssdfeed/image.h"
#include "ssdfeed/source.h"
#include "ssdfeed/status.h"

namespace ssdfeed {

// The reads the loader's direct path keeps in flight (Loader: GroupSize).
constexpr int kPlanQueueDepth = 32;

// Random reads of one block size on the cache root's filesystem.
struct DeviceReadRate {
  uint32_t block = 0;  // bytes per read: a record's 4 KiB-aligned window
  int qd = 0;          // reads in flight
  double iops = 0, mb_s = 0;
  bool direct = true;  // O_DIRECT (false: the filesystem refused it; page cache)
};

struct DeviceReadOptions {
  double seconds = 1.0;                // per block size
  uint64_t file_bytes = 256ull << 20;  // scratch file, written once. Default 256 MiB
  int qd = kPlanQueueDepth;
};

// A scratch file in dir (the cache root, or the directory it will be made
// in) that random reads of several block sizes are timed on. It has no name
// from the moment it is open (O_TMPFILE, else unlinked at once), so a plan
// killed mid-measurement leaves nothing in dir; destroying the probe frees
// its blocks. The file is written (not just allocated) so that reads reach
// the device.
class DeviceReadProbe {
 public:
  static Result<std::unique_ptr<DeviceReadProbe>> Create(const std::string& dir,
                                                         const DeviceReadOptions& o);
  ~DeviceReadProbe();
  DeviceReadRate Measure(uint32_t block) const;
  const std::string& path() const { return path_; }

 private:
  DeviceReadProbe(std::string path, int fd, bool direct, DeviceReadOptions o)
      : path_(std::move(path)), fd_(fd), direct_(direct), o_(o) {}
  std::string path_;
  int fd_;
  bool direct_;
  DeviceReadOptions o_;
};

// The 4 KiB-aligned window a packed record of record_bytes is read in.
uint32_t RecordReadWindow(double record_bytes);

// One codec's row of the plan. The measured inputs first, then what the
// model makes of them (ApplyPlanModel).
struct CodecPlan {
  RecordCodec codec = RecordCodec::kRaw;
  int quality = 90;
  // Measured: mean record on disk (header, stored pixels, fields), one
  // core's images/s of decode + checksum + crop from a record in memory (in
  // CPU time: the bound), and the images/s the loader's cores did together
  // in wall-clock time (0: not measured), which is less where other work
  // shares them.
  double record_bytes = 0;
  double per_core_images_per_s = 0;
  double cores_measured_images_per_s = 0;
  DeviceReadRate device;  // device.iops == 0: not measured
  // Fidelity: whether every probe decodes to its prepared pixels, else their
  // PSNR (dB, over all probes' pixels) against them.
  bool identical = false;
  double psnr_db = 0;
  // Derived.
  double footprint_x_raw = 0;         // record_bytes / raw's (0 when no raw row)
  double cores_images_per_s = 0;      // per core x cores: warm from the page cache
  double device_images_per_s = 0;     // one record per read: device.iops
  double predicted_images_per_s = 0;  // warm from the device: min of the two
};

// Predictions within this fraction of the best count as a tie, won by the
// smaller footprint: closer than that is within a measurement's noise, and
// the smaller entry then costs nothing.
constexpr double kPlanTie = 0.05;

// Fills the derived fields of every row for `cores` loader cores. Pure.
void ApplyPlanModel(std::vector<CodecPlan>* rows, int cores);
// The row to recommend: the best predicted warm rate (the device's, or the
// cores' alone when the device was not measured), ties (kPlanTie) broken by
// the smaller record. -1 when rows is empty. Pure.
int RecommendCodec(const std::vector<CodecPlan>& rows);

struct CodecPlanOptions {
  std::vector<std::pair<RecordCodec, int>> codecs = {{RecordCodec::kRaw, 90},
                                                     {RecordCodec::kZstd, 90},
                                                     {RecordCodec::kJpeg, 90},
                                                     {RecordCodec::kYuv420, 90}};
  int probes = 24;      // samples prepared from the source for the codec timings
  AugmentSpec augment;  // the crop timed (enabled: RandomResizedCrop)
  OutputSpec output;
  int cores = 1;
  // The cache root; empty: the device is not measured.
  std::string device_dir;
  DeviceReadOptions device;
};

// "raw,zstd,jpeg,yuv420" (any of them, in any order, no repeats); jpeg at quality.
// InvalidArgument names option and the bad item.
Result<std::vector<std::pair<RecordCodec, int>>> ParseCodecList(std::string_view text, int quality,
                                                                std::string_view option);
// "raw", "zstd", "jpeg q90".
std::string CodecLabel(RecordCodec codec, int quality);

// Prepares probes from the source with spec (its codec is ignored), stores
// them in each codec, and measures each codec's record size, per-core cost
// and (device_dir set) the device's reads/s at its record size. Rows are
// in options order, with the model applied.
Result<std::vector<CodecPlan>> PlanCodecs(const Source& source, const PrepareSpec& spec,
                                          const CodecPlanOptions& o);

}  // namespace ssdfeed
