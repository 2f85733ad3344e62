# zinc: one entry point. `make` builds build/zinc; `make test` runs the suite.
# Targets: all demo test test-gpu coverage memcheck sanitize bench clean
CC      ?= gcc
BUILD   ?= build
OPT     ?= -O2
# -ffp-contract=off: no FMA contraction, so the host math is the exact twin of
# the CUDA kernels in exact mode (spec Z-OPT-003). -fno-math-errno lets sqrtf
# vectorize; it changes no value, only that errno is never set.
CFLAGS_BASE := -std=c11 -D_GNU_SOURCE -g -Wall -Wextra -Werror -Wshadow \
               -Wno-missing-field-initializers -ffp-contract=off -fno-math-errno -pthread
CFLAGS  += $(CFLAGS_BASE) $(OPT) $(EXTRA_CFLAGS)
LDFLAGS += $(EXTRA_LDFLAGS)
LDLIBS  := -lcjson -lm -pthread

# MPI (the mpi backend, Z-PROC-003) when mpicc is found; its headers as
# system headers so -Werror judges zinc's code, not theirs.
MPICC := $(shell command -v mpicc 2>/dev/null)
ifneq ($(MPICC),)
MPI_CFLAGS := $(patsubst -I%,-isystem %,$(shell $(MPICC) --showme:compile 2>/dev/null)) -DZN_HAVE_MPI
MPI_LIBS := $(shell $(MPICC) --showme:link 2>/dev/null)
LDLIBS += $(MPI_LIBS)
endif

LIB_SRC := $(filter-out src/main.c,$(wildcard src/*.c)) $(wildcard sim/*.c)
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
HDRS    := $(wildcard src/*.h sim/*.h)

# Dependencies are installed by ci/setup.sh when a header is missing, so a
# fresh Debian machine needs nothing by hand.
DEPS_STAMP := $(BUILD)/.deps-ok

.PHONY: all demo test test-gpu coverage memcheck sanitize bench clean deps
all: $(BUILD)/zinc

$(DEPS_STAMP):
	@mkdir -p $(BUILD)
	@if [ ! -f /usr/include/cjson/cJSON.h ] || [ ! -f /usr/include/cmocka.h ] \
	    || ! command -v gcovr >/dev/null || ! command -v valgrind >/dev/null \
	    || ! command -v mpirun >/dev/null || ! command -v mpicc >/dev/null; then \
	  echo "zinc: installing build dependencies (ci/setup.sh)"; sh ci/setup.sh; fi
	@touch $@
deps: $(DEPS_STAMP)

$(BUILD)/%.o: %.c $(HDRS) | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	@echo "  CC  $<"
	@$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/src/comm_mpi.o: CFLAGS += $(MPI_CFLAGS)

$(BUILD)/libzinc.a: $(LIB_OBJ)
	@echo "  AR  $@"
	@ar rcs $@ $^

$(BUILD)/zinc: $(BUILD)/src/main.o $(BUILD)/libzinc.a
	@echo "  LD  $@"
	@$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: tests/%.c tests/testutil.h $(BUILD)/libzinc.a $(HDRS) | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	@echo "  LD  $@"
	@$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libzinc.a -lcmocka $(LDLIBS)

tests: $(TEST_BIN) $(BUILD)/zinc

demo: $(BUILD)/zinc
	$(BUILD)/zinc train

test: tests
	@sh ci/run_tests.sh $(BUILD)

# Coverage: the suite built with gcov, a gcovr report (HTML under
# coverage/html, text summary in coverage/summary.txt) and the per-stage table
# (coverage/stages.txt).
coverage:
	$(MAKE) BUILD=build-cov OPT=-O0 EXTRA_CFLAGS="--coverage -fprofile-update=atomic" \
	        EXTRA_LDFLAGS=--coverage tests
	sh coverage/run.sh build-cov

# Valgrind: memcheck over the unit tests and a short run of every stage,
# helgrind and DRD over the simulator's threads.
memcheck:
	$(MAKE) BUILD=build-vg OPT=-O1 tests
	sh ci/memcheck.sh build-vg

# AddressSanitizer + UndefinedBehaviorSanitizer over the whole suite.
sanitize:
	$(MAKE) BUILD=build-asan OPT=-O1 \
	        EXTRA_CFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
	        EXTRA_LDFLAGS="-fsanitize=address,undefined" tests
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 sh ci/run_tests.sh build-asan

# Benchmarks print ratios measured side by side in one run; never asserted.
$(BUILD)/bench: tests/bench.c $(BUILD)/libzinc.a $(HDRS)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libzinc.a $(LDLIBS)
bench: $(BUILD)/bench
	$(BUILD)/bench

test-gpu:
	@echo "zinc: make test-gpu needs the CUDA engine, which this build does not have yet" >&2; exit 1

clean:
	rm -rf build build-* coverage/html coverage/*.txt coverage/*.json
