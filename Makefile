# The two commands README opens with: `make demo` and `make test`.
# Each installs what it needs (apt + pip), builds, and runs.
PY     ?= python3
BUILD  ?= build
ASAN   ?= build-asan
JOBS   ?= $(shell nproc)
CMAKE_FLAGS ?=
PIP_INSTALL = $(PY) -m pip install -q --disable-pip-version-check --root-user-action=ignore

.PHONY: all deps build install-py test test-cc test-py demo asan tsan fuzz format clean

all: build

deps:
	bash scripts/deps.sh --with-frameworks

build: deps
	cmake -S . -B $(BUILD) -G Ninja -DSSDFEED_BUILD_PYTHON=ON $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

# The package as users get it: `pip install .` (extension + `ssdfeed` command).
install-py: deps
	$(PIP_INSTALL) --no-build-isolation .

test-cc: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-py: install-py
	cd tests/py && $(PY) -m pytest -q -p no:cacheprovider .

test: test-cc test-py

demo: install-py
	$(PY) -m ssdfeed.demo

asan: deps
	cmake -S . -B $(ASAN) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSSDFEED_SANITIZE=ON \
	  -DSSDFEED_BUILD_BENCH=OFF >/dev/null
	cmake --build $(ASAN) -j $(JOBS)
	cd $(ASAN) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS)

# ThreadSanitizer over the concurrency tests (loader, cache, claims).
tsan: deps
	cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSSDFEED_TSAN=ON \
	  -DSSDFEED_BUILD_BENCH=OFF >/dev/null
	cmake --build build-tsan -j $(JOBS)
	TSAN_OPTIONS="halt_on_error=1 report_mutex_bugs=0 suppressions=$(CURDIR)/tests/tsan.supp" \
	  build-tsan/tests/cc/ssdfeed_tests --gtest_filter='Loader*:Cache.*:CacheCapacity*:CacheProcess*:SharedNode*:EpochOrder*:S3Source*'

fuzz: deps
	CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DSSDFEED_FUZZ=ON \
	  -DSSDFEED_BUILD_TESTS=OFF -DSSDFEED_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build build-fuzz -j $(JOBS)
	bash fuzz/run_all.sh build-fuzz $${FUZZ_SECONDS:-20}

format:
	clang-format -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf $(BUILD) $(ASAN) build-fuzz build-tsan
