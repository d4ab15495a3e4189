# servesim — the two commands of the quick start:
#   make demo   install the Debian packages if missing, build, run the embedded quickstart scenario
#   make test   build and run the whole test suite (unit, golden, regression gate)
# and, to put servesim on PATH:
#   make install   the servesim executable and its data under PREFIX (default /usr/local)
# and the reliability checks (docs/fuzzing.md):
#   make test-sanitize   the whole test suite again, built with AddressSanitizer and UBSan
#   make fuzz-smoke      every libFuzzer target of fuzz/ for FUZZ_SMOKE_S seconds (needs clang)
#   make fuzz-campaign   the same for FUZZ_CAMPAIGN_S seconds each, corpus kept in FUZZ_WORK
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo
# What servesim itself needs (make demo), then the test, benchmark, MPI, browser-test and fuzzing
# tool chains (make test and the reliability targets).
CORE_PACKAGES = cmake ninja-build g++ make pkg-config libboost-dev libeigen3-dev \
  nlohmann-json3-dev libcli11-dev libfmt-dev libsqlite3-dev libnlopt-dev
DEB_PACKAGES = $(CORE_PACKAGES) sqlite3 libgtest-dev libgmock-dev googletest \
  libbenchmark-dev libopenmpi-dev openmpi-bin python3 chromium \
  clang libclang-rt-14-dev
PREFIX ?= /usr/local
# A new build folder is generated for Ninja (it compiles every library's sources in parallel, where
# make waits for each library's dependencies); an existing one keeps the generator it has.
generator = $(if $(wildcard $(1)/CMakeCache.txt),,$(if $(shell command -v ninja),-G Ninja))
# make demo builds the servesim target alone: -O2 without debug information, each library compiled
# as a few unity sources (docs/speed.md "Build time"). The simulation runs as fast as at -O3.
DEMO_FLAGS ?= -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
  -DCMAKE_UNITY_BUILD=ON
SANITIZE_BUILD ?= build-sanitize
# The sanitizer and fuzzing builds keep line tables only (-g1): enough for the sanitizers' stack traces,
# and half the disk of full debug information (2.7 GB against 5.6 GB: some 30 test executables link
# every library).
SANITIZE_FLAGS ?= -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" -DSERVESIM_SANITIZE=ON \
  -DSERVESIM_BUILD_BENCH=OFF
FUZZ_BUILD ?= build-fuzz
FUZZ_FLAGS ?= -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DSERVESIM_FUZZ=ON -DSERVESIM_BUILD_TESTS=OFF \
  -DSERVESIM_BUILD_BENCH=OFF
FUZZ_SMOKE_S ?= 20
FUZZ_CAMPAIGN_S ?= 3600
FUZZ_WORK ?= $(FUZZ_BUILD)/campaign

.PHONY: demo servesim install deps deps-core build test test-sanitize fuzz-build fuzz-smoke \
  fuzz-campaign bench clean

demo: servesim
	./$(BUILD)/app/servesim run --db results.db

servesim: deps-core
	cmake $(call generator,$(BUILD)) -S . -B $(BUILD) $(DEMO_FLAGS) -DSERVESIM_BUILD_TESTS=OFF \
	  -DSERVESIM_BUILD_BENCH=OFF -DSERVESIM_BUILD_HARNESS=OFF
	cmake --build $(BUILD) -j$(JOBS) --target servesim

# Installs as root, or through sudo when PREFIX is not writable.
install: servesim
	@if [ -w "$(PREFIX)" ] || [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
	  $$SUDO cmake --install $(BUILD) --prefix "$(PREFIX)"

# Installs the missing Debian packages of $(1) (as root, or through sudo).
define install_missing
	@missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q $$missing; \
	fi
endef

deps-core:
	$(call install_missing,$(CORE_PACKAGES))

deps:
	$(call install_missing,$(DEB_PACKAGES))

# The libraries as unity sources here too (test files one by one); test-sanitize compiles every
# file on its own, so CI builds both ways.
build: deps
	cmake $(call generator,$(BUILD)) -S . -B $(BUILD) $(CMAKE_FLAGS) -DCMAKE_UNITY_BUILD=ON \
	  -DSERVESIM_BUILD_TESTS=ON -DSERVESIM_BUILD_BENCH=ON -DSERVESIM_BUILD_HARNESS=ON
	cmake --build $(BUILD) -j$(JOBS)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

# Left out under the sanitizers: tests labelled no_sanitize (too slow there) and the test that runs
# servesim under mpirun, whose Open MPI plugins (dlopen'ed, then closed) leak at exit in frames
# LeakSanitizer can neither symbolize nor suppress.
SANITIZE_SKIP ?= PlanDeterminism.MpiRanksGiveTheSingleProcessResult
test-sanitize: deps
	cmake $(call generator,$(SANITIZE_BUILD)) -S . -B $(SANITIZE_BUILD) $(SANITIZE_FLAGS)
	cmake --build $(SANITIZE_BUILD) -j$(JOBS)
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir $(SANITIZE_BUILD) --output-on-failure -j$(JOBS) -LE no_sanitize \
	    -E '$(SANITIZE_SKIP)'

fuzz-build: deps
	cmake $(call generator,$(FUZZ_BUILD)) -S . -B $(FUZZ_BUILD) $(FUZZ_FLAGS)
	cmake --build $(FUZZ_BUILD) -j$(JOBS) --target servesim_fuzzers

fuzz-smoke: fuzz-build
	rm -rf $(FUZZ_BUILD)/smoke
	fuzz/run_fuzzers.sh $(FUZZ_BUILD) $(FUZZ_SMOKE_S) $(FUZZ_BUILD)/smoke

fuzz-campaign: fuzz-build
	fuzz/run_fuzzers.sh $(FUZZ_BUILD) $(FUZZ_CAMPAIGN_S) $(FUZZ_WORK)

bench: build
	./$(BUILD)/bench/servesim_bench
	./$(BUILD)/bench/servesim_micro_bench --benchmark_min_time=0.2

clean:
	rm -rf $(BUILD) $(SANITIZE_BUILD) $(FUZZ_BUILD)
