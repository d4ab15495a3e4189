# servesim — the two commands of the quick start:
#   make demo   install the Debian packages if missing, build, run the embedded quickstart scenario
#   make test   build and run the whole test suite (unit, golden, regression gate)
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo
DEB_PACKAGES = cmake g++ make pkg-config libboost-dev libeigen3-dev nlohmann-json3-dev \
  libcli11-dev libfmt-dev libsqlite3-dev sqlite3 libnlopt-dev libgtest-dev libgmock-dev googletest \
  libbenchmark-dev libopenmpi-dev openmpi-bin python3 chromium

.PHONY: demo deps build test bench clean

demo: build
	./$(BUILD)/app/servesim run --db results.db

# Installs the missing Debian packages (as root, or through sudo).
deps:
	@missing=""; for p in $(DEB_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q $$missing; \
	fi

build: deps
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j$(JOBS)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

bench: build
	./$(BUILD)/bench/servesim_bench
	./$(BUILD)/bench/servesim_micro_bench --benchmark_min_time=0.2

clean:
	rm -rf $(BUILD)
