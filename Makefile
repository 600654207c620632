# The two Quickstart commands (README): `make demo` and `make test`. Both install what is
# missing (scripts/install-deps.sh), configure and build. PRESET=asan|debug|tsan picks another build.
PRESET ?= release
BUILD_DIR := $(if $(filter release,$(PRESET)),build,build-$(PRESET))
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps configure build test demo bench clean

all: build

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake --preset $(PRESET) $(CMAKE_FLAGS) > $(BUILD_DIR).configure.log 2>&1 || (cat $(BUILD_DIR).configure.log; exit 1)
	@grep -E "ddp (backends|torch)" $(BUILD_DIR).configure.log || true

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) $(CTEST_FLAGS)

demo: build
	@bash scripts/demo.sh $(BUILD_DIR)

clean:
	rm -rf build build-debug build-asan build-tsan build*.configure.log
