// Sub-commands whose issues have not landed: they parse and say so (exit 2).
// (none at present)
#include "cli/commands.h"
