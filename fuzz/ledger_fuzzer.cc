// The capacity ledger's parser (capacity.ledger, shared by every process
// filling a root, so any of them may have left it damaged): never a crash,
// and what it parses is what it formats back.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "cache/capacity.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ssdfeed;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<LedgerRow> rows = ParseLedger(text);
  // Every row comes from one line of the text.
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  if (rows.size() > lines + 1) std::abort();
  if (ParseLedger(FormatLedger(rows)) != rows) std::abort();
  return 0;
}
