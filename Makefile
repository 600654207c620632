# The two Quickstart commands (README): `make demo` and `make test`. Both install what is
# missing (scripts/install-deps.sh) and configure; `make test` builds everything, `make demo` only
# what it runs. PRESET=asan|debug|tsan picks another build.
PRESET ?= release
BUILD_DIR := $(if $(filter release,$(PRESET)),build,build-$(PRESET))
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
# The build prints its progress, not every sub-make's "Entering directory" line.
MAKEFLAGS += --no-print-directory

FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= config_file error_file init_method hostlist store_protocol wire_header multicast_datagram mesh_handshake etcd_response

.PHONY: all deps configure build test cluster-test torch-suite-test torch-suite-control demo bench benchmarks clean fuzz fuzz-build soak tsan-build tsan-test \
  format format-check lint

all: build

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake --preset $(PRESET) $(CMAKE_FLAGS) > $(BUILD_DIR).configure.log 2>&1 || (cat $(BUILD_DIR).configure.log; exit 1)
	@grep -E "ddp (backends|torch)" $(BUILD_DIR).configure.log || true

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

# Under ASan (PRESET=asan) the suite leaves out what runs others' uninstrumented code or no
# code of ours in memory (ASAN_EXCLUDE): the gloo and mpi conformance suites (Gloo's and Open
# MPI's collectives; our adapters run under ASan in their own suites), the benchmark across
# emulated hosts, the package tests and the funneled mpi runs (a thread level: TSan runs them);
# and the launchers' end-to-end runs whose seconds go to waiting out heartbeat bounds, with
# Python or probe workers: PyTorch scripts through a node lost (uninstrumented workers), false
# eviction, and etcd's modes (the launcher's etcd code runs under ASan in its own suites, against a
# real etcd). The release suite runs them all.
ASAN_EXCLUDE ?= conformance_gloo conformance_mpi netns_hosts_conformance_2x2_gloo netns_bench_hosts_test \
  install_test bench_report_test comm_mpi_process_group_test_funneled comm_mpi_runtime_caller_test_funneled \
  netns_hosts_torch_checkpoint_.* netns_hosts_false_eviction_.* netns_hosts_etcd_.*
# A test that fails runs once more (CTEST_RETRY; empty: none): two failures fail the suite, and a
# failure the second run passes stays in the log above the summary, for a flake to be fixed.
CTEST_RETRY ?= --repeat until-pass:2
test: build
	cd $(BUILD_DIR) && ctest --output-on-failure $(CTEST_RETRY) -j $(JOBS) -LE '^(cluster|torch_suite)$$' \
	  $(if $(filter asan,$(PRESET)),-E '^($(subst $(space),|,$(strip $(ASAN_EXCLUDE))))$$') $(CTEST_FLAGS)

# The cluster tests too slow for `make test` (ctest label "cluster": a Slurm job reaching its time
# limit, Slurm's least being a minute; tests/cluster/). Root only; Skipped otherwise.
cluster-test: build
	cd $(BUILD_DIR) && ctest --output-on-failure $(CTEST_RETRY) -L '^cluster$$' $(CTEST_FLAGS)

# PyTorch's own distributed suite on backend "ddp" at worlds 2 and 3 (ctest label "torch_suite"; not
# in `make test`): every test that passes on gloo here must pass (tests/ddp/torch/python/
# distributed_suite.py). torch-suite-control runs gloo itself against the checked-in list of what it
# passes (distributed_suite_gloo.txt); after a python3-torch upgrade, record it again with --record.
torch-suite-test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -L '^torch_suite$$' $(CTEST_FLAGS)
torch-suite-control: build
	@for w in 2 3; do PYTHONPATH=$(BUILD_DIR)/python /usr/bin/python3 tests/ddp/torch/python/distributed_suite.py \
	  --backend gloo --world $$w --expect tests/ddp/torch/python/distributed_suite_gloo.txt || exit 1; done

# libFuzzer, each target FUZZ_SECONDS over its seeds in tests/fuzz/corpus/<target>/, one target per
# core at a time (FUZZ_JOBS); clang, in
# build-fuzz (only the fuzz targets and the libraries they need are built; -O1 with line tables
# only and asserts on: quick to build, stack traces still name lines).
fuzz: fuzz-build
	@bash scripts/fuzz.sh build-fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)
fuzz-build:
	@DDP_FUZZ_DEPS=1 bash scripts/install-deps.sh
	@CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDDP_FUZZ=ON \
	  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
	  -DDDP_BUILD_TESTS=OFF -DDDP_WITH_GLOO=OFF -DDDP_WITH_MPI=OFF -DDDP_WITH_NCCL=OFF $(FUZZ_CMAKE_FLAGS) \
	  > build-fuzz.configure.log 2>&1 || (cat build-fuzz.configure.log; exit 1)
	@cmake --build build-fuzz -j $(JOBS) --target ddp_fuzz_targets

# Not in CI: SOAK_SECONDS of checked all_reduces and DDP steps by 4 workers (RSS and descriptors printed at
# start and end), then SOAK_ITERATIONS jobs each with a random fault (seed: SOAK_SEED), each
# checked for leftover processes, /dev/shm segments and hangs.
SOAK_ITERATIONS ?= 20
SOAK_SECONDS ?= 60
soak: build
	@bash scripts/soak.sh $(BUILD_DIR) $(SOAK_ITERATIONS) $(SOAK_SECONDS)

# ThreadSanitizer (preset tsan, build-tsan: -O1, line tables; nccl and torch off): the suites
# whose threads share state — the tcp, gloo and mpi backends, the stores, init, the DDP engine
# and the launcher's supervisor and sinks. Only these targets are built (every name is also its
# ctest; TSAN_TESTS adds the mpi suite's runs under mpirun). Suppressions (tests/tsan.supp):
# libstdc++'s exception_ptr refcount, invisible to TSan, a lock order inside Open MPI's tcp BTL,
# and races inside libgloo. In .ci/run, which prints each step's seconds.
TSAN_TARGETS ?= comm_work_test comm_tcp_process_group_test comm_tcp_socket_engine_test comm_tcp_peer_mesh_test \
  comm_tcp_processes_test rendezvous_hash_store_test rendezvous_tcp_store_test rendezvous_tcp_store_server_test \
  comm_init_test comm_tcp_hierarchical_collectives_test comm_tcp_shm_segment_test comm_tcp_mailbox_test \
  comm_tcp_shm_allreduce_direct_test comm_tcp_shm_exchange_direct_test comm_tcp_shm_allreduce_cross_test \
  comm_tcp_shm_peer_buffers_test \
  comm_tcp_shm_region_test comm_tcp_shm_oneshot_test \
  comm_tcp_shm_allreduce_chunked_test comm_tcp_shm_channel_test comm_tcp_shm_links_test comm_tcp_routed_links_test \
  rendezvous_file_store_test rendezvous_node_rendezvous_test common_task_thread_test \
  ddp_engine_test ddp_reducer_test ddp_join_test ddp_comm_hook_test \
  launcher_supervisor_test launcher_stderr_sink_test launcher_console_sink_test \
  comm_gloo_process_group_test comm_gloo_context_test comm_mpi_process_group_test comm_mpi_runtime_caller_test \
  comm_mpi_watchdog_test
TSAN_TESTS ?= $(TSAN_TARGETS) comm_tcp_process_group_test_every_op comm_mpi_process_group_test_np2 comm_mpi_process_group_test_np3 \
  comm_mpi_process_group_test_funneled comm_mpi_runtime_caller_test_np2 comm_mpi_runtime_caller_test_np3 \
  comm_mpi_runtime_caller_test_funneled
empty :=
space := $(empty) $(empty)
tsan-build: deps
	@cmake --preset tsan $(CMAKE_FLAGS) > build-tsan.configure.log 2>&1 || (cat build-tsan.configure.log; exit 1)
	@cmake --build build-tsan -j $(JOBS) --target $(TSAN_TARGETS)
tsan-test: tsan-build
	cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$(CURDIR)/tests/tsan.supp" \
	  ctest --output-on-failure -j $(JOBS) -R '^($(subst $(space),|,$(strip $(TSAN_TESTS))))$$'

# House style, enforced (.clang-format, .clang-tidy; docs/style.md). `make format` rewrites every
# tracked C/C++ file in place; `make format-check` (in .ci/run, seconds) lists the files that
# differ, and every file, function or // comment block over the size limits (600, 80, 12 lines;
# scripts/check_sizes.py over SIZE_DIRS, tests included: they are read as the spec of each
# promise) not recorded in scripts/size_exceptions.txt or grown past it, and fails on either;
# `make lint` runs clang-tidy over the library, launcher and bench sources with
# the release build's compile_commands.json (the LibTorch adapter is left out: each of its files
# takes about 35 s) and fails on any warning.
FORMAT_FILES = $(shell git ls-files '*.cc' '*.h' '*.c')
SIZE_DIRS := common rendezvous comm ddp launcher cli bench examples tests
format:
	@DDP_LINT_DEPS=1 bash scripts/install-deps.sh
	@clang-format-14 -i $(FORMAT_FILES)
format-check:
	@DDP_LINT_DEPS=1 bash scripts/install-deps.sh
	@clang-format-14 --dry-run --Werror $(FORMAT_FILES) 2>&1 | grep -o '^[^:]*\.[ch]c\?:' | sort -u | sed 's/:$$/: not formatted (make format)/' ; \
	  clang-format-14 --dry-run --Werror $(FORMAT_FILES) > /dev/null 2>&1; formatted=$$?; \
	  /usr/bin/python3 scripts/check_sizes.py --quiet --exceptions scripts/size_exceptions.txt $(SIZE_DIRS) && \
	  exit $$formatted
# clang-tidy reads a compile database of its own (build-lint, configured, never built): one entry
# per source file (no unity batches) and no precompiled header (clang cannot read GCC's).
lint: configure
	@DDP_LINT_DEPS=1 bash scripts/install-deps.sh
	@cmake --preset release -B build-lint -DDDP_UNITY_BUILD=OFF -DCMAKE_DISABLE_PRECOMPILE_HEADERS=ON \
	  $(CMAKE_FLAGS) > build-lint.configure.log 2>&1 || (cat build-lint.configure.log; exit 1)
	@bash scripts/lint.sh build-lint

# Only what the demo runs: the launcher and the Fashion-MNIST program (with the libraries they
# link), not the suite's executables.
DEMO_TARGETS := ddp-launch ddp-train-fashion-mnist
demo: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target $(DEMO_TARGETS)
	@bash scripts/demo.sh $(BUILD_DIR)

# docs/benchmarks.md, its plots (docs/img/) and the README's headline table, from the result files
# under bench/results/ (bench/report.py; Debian's python3 and python3-matplotlib). Nothing is
# measured here: add a run's files under bench/results/ first (the page says how each was made).
benchmarks: deps
	@/usr/bin/python3 bench/report.py

clean:
	rm -rf build build-debug build-asan build-tsan build-fuzz build*.configure.log
