# The two commands README opens with: `make demo` and `make test`.
# Each installs what it needs and runs: Debian packages via scripts/deps.sh,
# Python packages into the project's virtual environment $(VENV) (never the
# system Python), then builds.
PYTHON ?= python3
VENV   ?= .venv
BUILD  ?= build
SAN    ?= build-san
JOBS   ?= $(shell nproc)
CMAKE_FLAGS ?=
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c

PY  := $(VENV)/bin/python
PIP := $(PY) -m pip install --disable-pip-version-check
# Build requirements from pyproject.toml: `pip install --no-build-isolation`
# builds against these, so the build directory stays valid between installs.
BUILD_REQS := "scikit-build-core>=0.10" "nanobind>=2.0"
# ccache, where installed (scripts/deps.sh installs it), under every compile:
# build/, pip's build of the module, the sanitizer builds. CCACHE_BASEDIR makes
# the cached paths relative, so another clone of the repo hits the same cache.
ifneq ($(shell command -v ccache 2>/dev/null),)
export CMAKE_C_COMPILER_LAUNCHER ?= ccache
export CMAKE_CXX_COMPILER_LAUNCHER ?= ccache
export CCACHE_BASEDIR ?= $(CURDIR)
export CCACHE_NOHASHDIR ?= 1
# Needed to cache compiles that use the precompiled headers (CMakeLists.txt).
export CCACHE_SLOPPINESS ?= pch_defines,time_macros,include_file_mtime,include_file_ctime
endif
# The venv's bin first: pytest and the demo find the venv's `ssdfeed` command.
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: all deps venv build install-py test test-cc test-py test-consumer demo \
        san-build asan tsan fuzz format format-check clean image image-test \
        wheel wheel-test

all: build

deps:
	@bash scripts/deps.sh

# Stamps make a second run skip pip when nothing it installs from changed.
$(VENV)/.ssdfeed-base: scripts/deps.sh Makefile
	@bash scripts/deps.sh
	@$(PY) -m pip --version >/dev/null 2>&1 || \
	  { echo "== creating virtual environment $(VENV)"; $(PYTHON) -m venv $(VENV); }
	@echo "== installing build requirements into $(VENV)"
	$(PIP) -q $(BUILD_REQS) numpy
	@touch $@

$(VENV)/.ssdfeed-test: $(VENV)/.ssdfeed-base tests/requirements.txt
	@bash scripts/deps.sh --test
	@echo "== installing test requirements (pytest, torch, tensorflow, ...) into $(VENV)"
	$(PIP) -q -r tests/requirements.txt
	@touch $@

venv: $(VENV)/.ssdfeed-base

build: deps
	@echo "== configuring $(BUILD)/"
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS) >/dev/null
	@echo "== building $(BUILD)/ (library, CLI, C++ tests, bench)"
	cmake --build $(BUILD) -j $(JOBS)

# The package as users get it: `pip install .` (extension + `ssdfeed` command).
# -v shows CMake's and Ninja's progress; the build directory is per
# interpreter (build-py-<tag>), so reinstalling only rebuilds what changed. It
# sits beside build/ at the same depth: with ccache, the core and CLI objects
# `make build` compiled are cache hits here (the same relative paths).
# scikit-build-core hands CMake Python's compiler (sysconfig's CXX: g++ or
# x86_64-linux-gnu-g++) unless CC/CXX are set, and ccache keys on the
# compiler's name: CMake's own default for `make build` (cc, c++) keeps the
# objects shared.
install-py: $(VENV)/.ssdfeed-base
	@echo "== pip install . into $(VENV) (compiles the C++ core and the extension)"
	CC=$${CC:-cc} CXX=$${CXX:-c++} $(PIP) -v --no-build-isolation . 2>&1 | grep --line-buffered -v -E '^ *(Link requirement|Skipping link|Found link|Given no hashes)'

test-cc: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# Two passes, the same tests as one plain `pytest`: those that are safe beside
# others on $(JOBS) workers (pytest-xdist), then the `serial` ones (ports picked
# free then bound, torchrun ranks, drop_caches, timing) alone. Both always run;
# either failing fails the target.
PYTEST := $(abspath $(PY)) -m pytest -q -p no:cacheprovider
test-py: install-py $(VENV)/.ssdfeed-test
	cd tests/py && { rc=0; \
	  $(PYTEST) -n $(JOBS) -m "not serial" . || rc=$$?; \
	  $(PYTEST) -m serial . || rc=$$?; \
	  exit $$rc; }

# A separate CMake project that finds the installed package with
# find_package(ssdfeed) and links ssdfeed::ssdfeed.
test-consumer: build
	rm -rf $(BUILD)/consumer-prefix $(BUILD)/consumer
	cmake --install $(BUILD) --prefix $(BUILD)/consumer-prefix >/dev/null
	cmake -S tests/consumer -B $(BUILD)/consumer -G Ninja \
	  -DCMAKE_PREFIX_PATH=$(abspath $(BUILD))/consumer-prefix >/dev/null
	cmake --build $(BUILD)/consumer
	$(BUILD)/consumer/ssdfeed_consumer $(BUILD)/consumer/work

test: test-cc test-py

demo: install-py
	$(PY) -m ssdfeed.demo

# One clang build with ASan + UBSan whose -Wthread-safety (an error, as every
# warning) checks the GUARDED_BY / REQUIRES annotations, and which also links
# the libFuzzer targets: `make asan` runs the C++ tests in it, `make fuzz` the
# fuzzers, so CI compiles the sources once for both.
san-build:
	@bash scripts/deps.sh --dev
	CC=clang CXX=clang++ cmake -S . -B $(SAN) -G Ninja -DCMAKE_BUILD_TYPE=Debug \
	  -DSSDFEED_SANITIZE=ON -DSSDFEED_FUZZ=ON -DSSDFEED_BUILD_BENCH=OFF >/dev/null
	cmake --build $(SAN) -j $(JOBS) $(SAN_TARGETS)

asan: san-build
	cd $(SAN) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS)

# ThreadSanitizer over the concurrency tests (loader, cache, claims).
tsan: deps
	cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSSDFEED_TSAN=ON \
	  -DSSDFEED_BUILD_BENCH=OFF >/dev/null
	cmake --build build-tsan -j $(JOBS)
	TSAN_OPTIONS="halt_on_error=1 report_mutex_bugs=0 suppressions=$(CURDIR)/tests/tsan.supp" \
	  build-tsan/tests/cc/ssdfeed_tests --gtest_filter='Loader*:Cache.*:CacheDirect*:CacheCapacity*:CacheProcess*:SharedNode*:Metrics*:EpochOrder*:S3Source*:BatchRing*:SegmentWriter*:BufferedAppender*:DirectChunkWriter*:Claims*:Capacity*:EpochState*:Warm*'

# Only the fuzzers (and the CLI that makes their seeds) when run alone; after
# `make asan` nothing is left to build.
fuzz: SAN_TARGETS = --target ssdfeed_fuzzers
fuzz: san-build
	bash fuzz/run_all.sh $(SAN) $${FUZZ_SECONDS:-20}

format:
	@bash scripts/deps.sh --dev
	clang-format -i $$(git ls-files '*.cc' '*.h')

# What CI checks: every tracked .cc/.h as clang-format writes it.
format-check:
	@bash scripts/deps.sh --dev
	bash scripts/check-format.sh

# The container image (Dockerfile), from a local Debian 12 base made with
# mmdebstrap when missing (BASE=...): it installs the manylinux wheel from
# dist/ (made first, cp311 only, when missing; compiles nothing in the image).
# Tag: IMAGE=localhost/ssdfeed:latest.
image:
	JOBS=$${WHEEL_JOBS:-2} bash scripts/image.sh build

# Builds the image, then two containers warm one dataset into one fresh host
# cache mounted on /var/cache/ssdfeed at once, as one uid and as two uids of
# one group (each sample prepared about once, cache verify clean). Needs root
# (buildah, chown); not part of `make test`. `bash scripts/image.sh check`
# runs the test alone on an image built before.
image-test:
	JOBS=$${WHEEL_JOBS:-2} bash scripts/image.sh test

# Binary wheels into dist/ (manylinux_2_31: glibc >= 2.31, no compiler or
# -dev package needed to install): built in a Debian 11 root that mmdebstrap
# makes once under build-wheel/, repaired with auditwheel. Needs root.
# Never more than 2 compile jobs (WHEEL_JOBS).
wheel:
	JOBS=$${WHEEL_JOBS:-2} bash scripts/wheel.sh build

# The wheels installed as uid 1000 into bare Debian minbase images (python3,
# python3-venv only), each serving a cache round trip there:
# `./dev wheel-test` for every release a wheel in dist/ serves,
# `./dev wheel-test WHICH=all` for bullseye, bookworm and trixie. Needs root.
wheel-test:
	bash scripts/wheel.sh test $(WHICH)

clean:
	rm -rf $(BUILD) $(SAN) build-tsan build-py-*
