# zinc: one entry point. `make` builds build/zinc; `make test` runs the suite.
# Targets: all demo test test-peer test-deepspeed test-nodes test-gpu bench-gpu gpu-pack gpu-rehearse install coverage memcheck sanitize fuzz fuzz-replay bench bench-peers clean
CC      ?= gcc
BUILD   ?= build
OPT     ?= -O2
# -ffp-contract=off: no FMA contraction, so the host math is the exact twin of
# the CUDA kernels in exact mode (spec Z-OPT-003). -fno-math-errno lets sqrtf
# vectorize; it changes no value, only that errno is never set.
CFLAGS_BASE := -std=c11 -D_GNU_SOURCE -Isrc -g -Wall -Wextra -Werror -Wshadow \
               -Wno-missing-field-initializers -ffp-contract=off -fno-math-errno -pthread
CFLAGS  += $(CFLAGS_BASE) $(OPT) $(EXTRA_CFLAGS)
LDFLAGS += $(EXTRA_LDFLAGS)
LDLIBS  := -lcjson -lxxhash -luring -lm -pthread

# The toolchains are detected by ci/configure.sh AFTER it has installed what
# is missing (ci/setup.sh), and recorded in $(BUILD)/config.mk: make remakes
# that file first on every run (and restarts when it changed), and every
# object depends on it, so a toolchain that appears (OpenMPI installed by
# the first `make`) or goes rebuilds what it must. `make clean` needs none.
CONFIG_MK := $(BUILD)/config.mk
# `make` builds zinc: the config rule below is the first in the file, not the goal
.DEFAULT_GOAL := all
ifeq ($(filter clean,$(MAKECMDGOALS)),)
-include $(CONFIG_MK)
endif
$(CONFIG_MK): FORCE
	@sh ci/configure.sh $(BUILD)
FORCE:

# MPI (the mpi backend, Z-PROC-003) when mpicc is found; its headers as
# system headers so -Werror judges zinc's code, not theirs.
ifneq ($(MPICC),)
MPI_CFLAGS := $(patsubst -I%,-isystem %,$(MPI_COMPILE)) -DZN_HAVE_MPI
MPI_LIBS := $(MPI_LINK)
LDLIBS += $(MPI_LIBS)
endif

# The object lists follow the folders (DESIGN.md's map). The libraries are
# layered, each depending only on those after it on the link line:
#   libzinc_app  src/app: the CLI, the run driver, process setup
#   libzinc_sim  sim/: the in-process world (implements src/comm/world.h)
#   libzinc_cuda kernels/: the CUDA device and NCCL (src/device/cuda.h, src/comm/nccl.h)
#   libzinc      src/core, device, engine, comm, io: includes nothing of sim/ or kernels/
LAYERS  := core device engine comm io
LIB_SRC := $(foreach d,$(LAYERS),$(wildcard src/$(d)/*.c))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
APP_SRC := $(filter-out src/app/main.c,$(wildcard src/app/*.c))
APP_OBJ := $(APP_SRC:%.c=$(BUILD)/%.o)
SIM_SRC := $(wildcard sim/*.c)
SIM_OBJ := $(SIM_SRC:%.c=$(BUILD)/%.o)
# tests/*_gpu.c need a GPU: built and run by make test-gpu only
TEST_SRC := $(filter-out %_gpu.c,$(wildcard tests/test_*.c))
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
HDRS    := $(wildcard src/*/*.h sim/*.h)

# --- CUDA engine (kernels/, spec Z-CUDA-*): built whenever nvcc is found, so
# every CI run compiles it; nothing here needs a GPU to build. One nvcc
# invocation per file, sm_90 only. The exact-mode flags apply to every
# kernel: no FMA contraction, IEEE division and square root (the fast table
# differs only in its GEMMs, which are cuBLAS).
NVCC ?= $(NVCC_FOUND)
ifneq ($(NVCC),)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(realpath $(NVCC)))
CU_SRC  := $(wildcard kernels/*.cu)
CU_OBJ  := $(CU_SRC:%.cu=$(BUILD)/%.o)
CU_HDRS := $(wildcard kernels/*.h) $(HDRS)
NVFLAGS := -O2 -arch=sm_90 -std=c++20 -Isrc -I$(CUDA_HOME)/include -fmad=false -prec-div=true -prec-sqrt=true -D_GNU_SOURCE -g \
           -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror,-Wno-missing-field-initializers,-ffp-contract=off
CFLAGS  += -DZN_HAVE_CUDA=1
CUDA_A  := $(BUILD)/libzinc_cuda.a
# static cudart (runs without library paths); cuBLAS and NCCL are loaded at
# run time (kernels/cublas_dl.cu, kernels/comm_nccl.cu), so zinc starts fast
# and runs where they are absent; the rpath finds the toolkit's cuBLAS
CUDA_LDLIBS := -L$(CUDA_HOME)/lib64 -lcudart_static -Wl,-rpath,$(CUDA_HOME)/lib64 -lrt -ldl -lstdc++
endif
ZN_LIBS = $(BUILD)/libzinc_app.a $(BUILD)/libzinc_sim.a $(CUDA_A) $(BUILD)/libzinc.a
ZN_DEPS = $(BUILD)/libzinc_app.a $(BUILD)/libzinc_sim.a $(CUDA_A) $(BUILD)/libzinc.a

.PHONY: FORCE all demo test test-peer test-deepspeed test-nodes test-gpu bench-gpu gpu-pack gpu-rehearse install coverage memcheck sanitize fuzz fuzz-replay bench bench-peers clean deps
all: $(BUILD)/zinc

deps: $(CONFIG_MK)

$(BUILD)/%.o: %.c $(HDRS) $(CONFIG_MK)
	@mkdir -p $(dir $@)
	@echo "  CC  $<"
	@$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/src/comm/comm_mpi.o: CFLAGS += $(MPI_CFLAGS)

$(BUILD)/libzinc.a: $(LIB_OBJ)
	@echo "  AR  $@"
	@rm -f $@; ar rcs $@ $^
$(BUILD)/libzinc_app.a: $(APP_OBJ)
	@echo "  AR  $@"
	@rm -f $@; ar rcs $@ $^
$(BUILD)/libzinc_sim.a: $(SIM_OBJ)
	@echo "  AR  $@"
	@rm -f $@; ar rcs $@ $^

$(BUILD)/kernels/%.o: kernels/%.cu $(CU_HDRS) $(CONFIG_MK)
	@mkdir -p $(dir $@)
	@echo "  NVCC $<"
	@$(NVCC) $(NVFLAGS) -c $< -o $@

$(BUILD)/libzinc_cuda.a: $(CU_OBJ)
	@echo "  AR  $@"
	@rm -f $@; ar rcs $@ $^

$(BUILD)/zinc: $(BUILD)/src/app/main.o $(ZN_DEPS)
	@echo "  LD  $@"
	@$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(ZN_LIBS) $(LDLIBS) $(CUDA_LDLIBS)

$(BUILD)/tests/%: tests/%.c $(wildcard tests/*.h) $(ZN_DEPS) $(HDRS)
	@mkdir -p $(dir $@)
	@echo "  LD  $@"
	@$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(ZN_LIBS) -lcmocka $(LDLIBS) $(CUDA_LDLIBS)

# test_step_alloc counts zinc's malloc/calloc/realloc calls (spec Z-ENG-017);
# test_alloc fails them on demand (Z-ERR-002), test_io_alloc and test_app_alloc each in turn
# under the checkpoint readers and writers (Z-DSCK-010)
$(BUILD)/tests/test_step_alloc $(BUILD)/tests/test_alloc $(BUILD)/tests/test_io_alloc $(BUILD)/tests/test_app_alloc: LDFLAGS += -Wl,--wrap=malloc -Wl,--wrap=calloc -Wl,--wrap=realloc
# test_hjson fails the reader's buffer growth on demand (Z-CFG-047)
$(BUILD)/tests/test_hjson: LDFLAGS += -Wl,--wrap=realloc

# the allocation-failure shim (tests/alloc_test.sh): plain flags, never a
# sanitizer's or gcov's, since it stands in for malloc itself
$(BUILD)/tests/libfailmalloc.so: tests/failmalloc.c
	@mkdir -p $(dir $@)
	@echo "  SO  $@"
	@$(CC) -shared -fPIC -O1 -g -Wall -Wextra -Werror -o $@ $< -ldl

tests: $(TEST_BIN) $(BUILD)/zinc $(BUILD)/tests/libfailmalloc.so

demo: $(BUILD)/zinc
	$(BUILD)/zinc train

test: tests
	@sh ci/run_tests.sh $(BUILD)

# zinc's GPT-2 against Hugging Face transformers (tests/peer_gpt2.py, spec
# Z-HF-009..011): a venv under $(BUILD) with torch (CPU), transformers,
# safetensors and numpy (ci/test_peer.sh)
test-peer: $(BUILD)/zinc
	@sh ci/test_peer.sh $(BUILD)

# DeepSpeed itself as the peer (spec Z-DSP-*): differential tests of its
# plain-Python parts against tests/ds_probe, and the scenario matrix trained
# by DeepSpeed on this CPU and by zinc from one ds_config (ci/test_deepspeed.sh)
test-deepspeed: $(BUILD)/zinc $(BUILD)/tests/ds_probe
	@sh ci/test_deepspeed.sh $(BUILD)

# A small cluster on this machine (spec Z-NODE-*): network namespaces joined
# by a bridge, links shaped with tbf, zinc launch across them
# (tests/nodes_test.sh; needs root, else it says so and passes)
test-nodes: $(BUILD)/zinc
	@sh ci/setup_nodes.sh
	@ZINC=$(BUILD)/zinc sh tests/nodes_test.sh

# Coverage: the suite built with gcov, a gcovr report (HTML under
# coverage/html, per-file lines and branches in coverage/lines.txt and
# coverage/branches.txt) and the table per stage and per plan feature
# (coverage/stages.txt, coverage/stages-unreached.txt). ZN_COVERAGE names the
# object folder: the build's counts are split by plan under it
# (src/core/covmark.h).
coverage:
	$(MAKE) BUILD=build-cov OPT=-O0 EXTRA_CFLAGS="--coverage -fprofile-update=atomic -DZN_LIGHT_TESTS \
	        -DZN_COVERAGE='\"$(CURDIR)/build-cov\"'" EXTRA_LDFLAGS=--coverage tests
	ZINC_REHEARSE=0 sh coverage/run.sh build-cov

# Valgrind: memcheck over the unit tests and a short run of every stage,
# helgrind and DRD over the simulator's threads.
memcheck:
	$(MAKE) BUILD=build-vg OPT=-O1 tests
	sh ci/memcheck.sh build-vg

# AddressSanitizer + UndefinedBehaviorSanitizer over the whole suite (the
# fuzz corpora replayed included).
SAN_CFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
SAN_ENV := ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1
sanitize:
	$(MAKE) BUILD=build-asan OPT=-O1 EXTRA_CFLAGS="$(SAN_CFLAGS)" EXTRA_LDFLAGS="-fsanitize=address,undefined" tests
	$(SAN_ENV) ZINC_REHEARSE=0 sh ci/run_tests.sh build-asan

# Fuzzing (spec Z-FUZZ-*): tests/fuzz/fuzz_T.c is a libFuzzer harness for
# one reader of hostile input, tests/fuzz/T/ its corpus (seeds and every
# crash input ever found). `make fuzz` builds them with clang (build-fuzz,
# no CUDA) and runs each FUZZ_SECONDS on a copy of its corpus. Every build
# also links each harness with a plain main (tests/fuzz/replay_main.c) that
# replays the corpus: run_tests.sh does it in make test, and under
# ASan/UBSan in make sanitize; `make fuzz-replay` does only that.
FUZZ_TARGETS := config model cli safetensors manifest dsck
FUZZ_SECONDS ?= 60
tests: $(FUZZ_TARGETS:%=$(BUILD)/fuzz/replay_%)
FUZZ_DEPS := tests/fuzz/fuzz.h $(ZN_DEPS) $(HDRS)
$(BUILD)/fuzz/replay_%: tests/fuzz/fuzz_%.c tests/fuzz/replay_main.c $(FUZZ_DEPS)
	@mkdir -p $(dir $@)
	@echo "  LD  $@"
	@$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< tests/fuzz/replay_main.c $(ZN_LIBS) $(LDLIBS) $(CUDA_LDLIBS)
$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_DEPS)
	@mkdir -p $(dir $@)
	@echo "  LD  $@"
	@$(CC) $(CFLAGS) -fsanitize=fuzzer $(LDFLAGS) -o $@ $< $(ZN_LIBS) $(LDLIBS)
fuzz-replay:
	@$(MAKE) --no-print-directory BUILD=build-asan OPT=-O1 EXTRA_CFLAGS="$(SAN_CFLAGS)" \
	        EXTRA_LDFLAGS="-fsanitize=address,undefined" $(FUZZ_TARGETS:%=build-asan/fuzz/replay_%)
	@$(SAN_ENV) sh tests/fuzz/replay.sh build-asan $(FUZZ_TARGETS)
# clang warns about launch.c's skip-the-flag's-value loop, which is deliberate
fuzz:
	@command -v clang >/dev/null || { echo "zinc: make fuzz needs clang with libFuzzer (Debian: clang libclang-rt-14-dev)" >&2; exit 1; }
	@$(MAKE) --no-print-directory BUILD=build-fuzz CC=clang NVCC= OPT=-O1 \
	        EXTRA_CFLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all \
	                      -Wno-for-loop-analysis" \
	        EXTRA_LDFLAGS="-fsanitize=address,undefined" $(FUZZ_TARGETS:%=build-fuzz/fuzz/fuzz_%)
	@sh tests/fuzz/fuzz.sh build-fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# Benchmarks print ratios measured side by side in one run; never asserted.
$(BUILD)/bench: tests/bench.c $(ZN_DEPS) $(HDRS)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(ZN_LIBS) $(LDLIBS) $(CUDA_LDLIBS) -ldl
$(BUILD)/bench_proc: tests/bench_proc.c $(ZN_DEPS) $(HDRS)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(ZN_LIBS) $(LDLIBS) $(CUDA_LDLIBS)
bench: $(BUILD)/bench $(BUILD)/bench_proc $(BUILD)/zinc
	$(BUILD)/bench
	OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np 2 --bind-to none $(BUILD)/bench_proc mpi
	OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np 4 --oversubscribe --bind-to none $(BUILD)/bench_proc mpi
	$(BUILD)/zinc launch --nproc-per-node 2 --master-port 29517 -- $(BUILD)/bench_proc tcp
	$(BUILD)/zinc launch --nproc-per-node 4 --master-port 29517 -- $(BUILD)/bench_proc tcp
	@sh tests/bench_plan.sh $(BUILD)

# zinc against PyTorch and DeepSpeed on this CPU (tests/bench_peers.py): a
# venv under $(BUILD) with torch and deepspeed from PyPI (ci/bench_peers.sh)
$(BUILD)/bench_peer_zinc: tests/bench_peer_zinc.c $(ZN_DEPS) $(HDRS)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(ZN_LIBS) $(LDLIBS) $(CUDA_LDLIBS)
bench-peers: $(BUILD)/bench_peer_zinc $(BUILD)/zinc
	@sh ci/bench_peers.sh $(BUILD)

# GPU checks (spec Z-CUDA-*): the probe says in one line why there is no GPU;
# then every kernel against its host twin, the digests of exact runs against
# the simulator, fast runs within tolerance. Needs nvcc to build.
GPU_BIN := $(BUILD)/tests/gpu_probe $(BUILD)/tests/test_kernels_gpu $(BUILD)/tests/bench_gpu
gpu-rehearse:
	@$(MAKE) --no-print-directory BUILD=build-gpu MPICC= build-gpu/zinc
	@sh ci/gpu_check.sh --rehearse
ifneq ($(NVCC),)
test-gpu: $(GPU_BIN) $(BUILD)/zinc
	@sh ci/test_gpu.sh $(BUILD)
bench-gpu: $(GPU_BIN) $(BUILD)/zinc
	@sh ci/bench_gpu.sh $(BUILD)
# build-gpu/ for a GPU machine without packages (ci/gpu_pack.sh), then
# ci/gpu_check.sh runs there; gpu-rehearse runs that script here, the GPU
# side of each check on the simulator
gpu-pack:
	@sh ci/gpu_pack.sh
else
test-gpu bench-gpu gpu-pack:
	@echo "zinc: make $@ needs nvcc (the CUDA toolkit) to build the CUDA engine" >&2; exit 1
endif

# make install [PREFIX=/usr/local] [DESTDIR=]: the zinc binary to PREFIX/bin
# (the example configs stay in the repository's examples/)
PREFIX ?= /usr/local
install: $(BUILD)/zinc
	@install -d "$(DESTDIR)$(PREFIX)/bin"
	@install -m 755 $(BUILD)/zinc "$(DESTDIR)$(PREFIX)/bin/zinc"
	@install -d "$(DESTDIR)$(PREFIX)/share/zinc"
	@install -m 644 tests/peer_ds_worker.py tests/peer_common.py "$(DESTDIR)$(PREFIX)/share/zinc/"
	@echo "installed $(DESTDIR)$(PREFIX)/bin/zinc and, for zinc stepper --peer deepspeed, $(DESTDIR)$(PREFIX)/share/zinc/peer_ds_worker.py"

clean:
	rm -rf build build-* coverage/html coverage/*.txt coverage/*.json
