# Thin wrapper over CMake/CTest. `make test` and `make demo` do every step on a fresh machine.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
DEMO_FLAGS ?=

.PHONY: all deps build test reliability demo bench format clean

all: build

deps:
	@scripts/install-deps

$(BUILD)/build.ninja: | deps
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# Many tests wait on processes, sockets and timers, so ctest runs six times as many at once as
# there are cores (a full run then keeps two cores busy to the end); the longest are started
# first (their COST: seconds in a full run), so none of them is the run's tail.
TEST_JOBS ?= $(shell echo $$(( $(JOBS) * 6 )))
test: build
	cd $(BUILD) && ctest --output-on-failure -j $(TEST_JOBS)

# The standing reliability suite: libFuzzer over every parser (clang, build-fuzz), the
# bad-input HTTP corpus and the long chaos run; prints the figures table and fails unless every
# figure except "requests tried" is 0. FUZZ_SECONDS (default 60) bounds each fuzz target.
reliability: deps $(BUILD)/build.ninja
	BUILD=$(BUILD) scripts/reliability

# Only the binary is needed for the demo: the tests are not built here.
demo: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS) --target proverfleet
	$(BUILD)/proverfleet demo $(DEMO_FLAGS)

# The benches are not part of `make test`'s build: their own target builds them here.
bench: build
	cmake --build $(BUILD) -j $(JOBS) --target benches
	scripts/bench $(BUILD)

format:
	clang-format -i $$(git ls-files '*.cpp' '*.h')

clean:
	rm -rf $(BUILD)
