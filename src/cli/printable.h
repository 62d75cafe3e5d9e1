// Printable(): text from files (a manifest's source URI, key, spec, paths)
// made safe to print on a terminal.
#pragma once

#include <string>
#include <string_view>

namespace ssdfeed::cli {

// text with every byte a terminal could act on written as \xNN: C0 controls
// (ESC, BEL, CR, ...), DEL, C1 controls (U+0080..U+009F, 8-bit CSI among
// them) and bytes that are not valid UTF-8. Printable ASCII and valid UTF-8
// beyond U+009F (non-English file names) are kept as they are.
std::string Printable(std::string_view text);

}  // namespace ssdfeed::cli
