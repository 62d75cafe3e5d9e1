"""The `ssdfeed` command of the Python package: runs the C++ CLI it bundles.

The binary sits in the package (ssdfeed/_bin/ssdfeed), not in the scripts
directory: there the binary wheel's repair (auditwheel) can point its RPATH
at the libraries vendored beside the package (ssdfeed.libs/), which a
scripts directory, wherever an installer puts it, cannot count on. This
module is top-level, not in the package, so that starting the command does
not import ssdfeed (numpy and the extension): it only execs the binary, which
then has this process's id (signals, exit status go to it directly).
"""

import os
import sys


def main() -> int:
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ssdfeed", "_bin", "ssdfeed")
    try:
        os.execv(exe, [sys.argv[0], *sys.argv[1:]])
    except OSError as e:
        sys.stderr.write(f"ssdfeed: cannot run the bundled command {exe}: {e.strerror}\n")
        return 127
    return 0  # not reached: execv replaced the process


if __name__ == "__main__":
    sys.exit(main())
