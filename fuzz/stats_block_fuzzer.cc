// Stats blocks and ended-file totals as any user of a group-shared root may
// write them: the block and ended-file checks, and the exporter's whole
// collection over a process file and an ended file of arbitrary bytes.
// Never a crash, a huge allocation or a label that is not 12 hex digits.
#include <unistd.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "metrics/stats_file.h"
#include "ssdfeed/metrics.h"

namespace {

bool IsLabel(const std::string& s) {
  if (s.size() != 12) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

void CheckParsers(const uint8_t* data, size_t size) {
  using namespace ssdfeed::metrics;
  std::array<uint64_t, kBlockBytes / 8 + 1> aligned{};  // the readers' buffers are aligned
  size_t got = std::min(size, sizeof aligned);
  std::memcpy(aligned.data(), data, got);
  auto* b = reinterpret_cast<const uint8_t*>(aligned.data());
  BlockHeader h;
  if (ValidateBlock(b, got, &h).ok()) {
    if (got < kBlockBytes || h.id.size() != 32 || h.entry.size() > 16) __builtin_trap();
    (void)ReadBlock(b);
  }
  uint32_t n = 0;
  if (CheckEnded(b, got, size, &n).ok() &&
      (n > kMaxFoldedIds || size != uint64_t{kBlockBytes} + 4 + uint64_t{n} * 16))
    __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ssdfeed;
  CheckParsers(data, size);
  // The same bytes as a dead process's file and as an entry's ended totals.
  static std::string root = "/tmp/ssdfeed-stats-fuzz-" + std::to_string(getpid());
  static bool cleanup = std::atexit([] {
                          std::error_code ec;
                          std::filesystem::remove_all(root, ec);
                        }) == 0;
  (void)cleanup;
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root + "/stats");
  const char* p = reinterpret_cast<const char*>(data);
  std::ofstream(root + "/stats/p-0.stats", std::ios::binary).write(p, static_cast<long>(size));
  std::ofstream(root + "/stats/ended-0123456789ab.stats", std::ios::binary)
      .write(p, static_cast<long>(size));
  CacheOptions o;
  o.root = root;
  auto stats = CollectRootStats(nullptr, o);
  if (stats.ok())
    for (const auto& [entry, e] : stats->entries)
      if (!IsLabel(entry)) __builtin_trap();
  (void)RenderRootMetrics(o);
  return 0;
}
