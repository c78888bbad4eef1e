# cpht — compact GPU hash sets of bigint keys for PostgreSQL (PGXS build)
#
#   make               build (with CUDA kernels when nvcc is found)
#   make install       install into the PostgreSQL found by pg_config
#   make test          install missing Debian packages, build, install, and run
#                      every test against a throwaway server (no GPU needed)
#   make demo          build, install and run the deduplication demo
#   make plots         draw docs/figures/ again from test/bench/results/*.csv
#   make unit          C unit tests of kernels/ (no PostgreSQL needed)
#   make CPHT_GPU=0    build without CUDA even where nvcc exists

EXTENSION = cpht
MODULE_big = cpht
DATA = $(wildcard sql/$(EXTENSION)--*.sql)
PGFILEDESC = "cpht - compact GPU hash sets of bigint keys"

# pg_regress tests: sql/<name>.sql next to the extension scripts, expected/<name>.out
REGRESS = $(patsubst sql/%.sql,%,$(sort $(filter-out sql/$(EXTENSION)--%,$(wildcard sql/*.sql))))
REGRESS_OPTS = --load-extension=$(EXTENSION)
# TAP tests (t/*.pl, PostgreSQL::Test::Cluster): servers of their own that
# they start, crash, restart.  PGXS 15 runs them at the end of installcheck
# and has no target for them alone; prove_installcheck below is one.  They
# start clusters as the user that runs them, which must not be root
# (test/run-tests.sh runs them as postgres).
TAP_TESTS = 1

# kernels/: one folder per part (docs/layout.md); kernels/gpu/gpu_none.c
# stands in for the GPU where the CUDA files are not built
KERNEL_C = $(sort $(wildcard kernels/*/*.c))
KERNEL_H = $(wildcard kernels/*.h kernels/*/*.h)
# src/: _PG_init and the leaves (settings, errors, memory cap) at the top,
# one folder per layer below (docs/layout.md); includes are written
# "folder/door.h" against -Isrc
SRC_C = $(sort $(wildcard src/*.c src/*/*.c))
OBJS = $(SRC_C:.c=.o) $(KERNEL_C:.c=.o)

PG_CONFIG ?= pg_config

# ---- CUDA ------------------------------------------------------------------
CPHT_GPU ?= 1
CUDA_HOME ?= /usr/local/cuda
NVCC ?= $(shell command -v nvcc 2>/dev/null || ( [ -x $(CUDA_HOME)/bin/nvcc ] && echo $(CUDA_HOME)/bin/nvcc ))
ifeq ($(CPHT_GPU),1)
ifneq ($(NVCC),)
CUDA_SRC = $(sort $(wildcard kernels/gpu/*.cu))
ifneq ($(CUDA_SRC),)
WITH_GPU = 1
endif
endif
endif

ifdef WITH_GPU
KERNEL_C := $(filter-out kernels/gpu/gpu_none.c,$(KERNEL_C))
OBJS = $(SRC_C:.c=.o) $(KERNEL_C:.c=.o) $(CUDA_SRC:.cu=.o)
# sm_90 machine code for the H100/H200 plus compute_90 PTX so newer GPUs JIT it.
NVCC_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
NVCC_FLAGS = -O3 -std=c++17 $(NVCC_ARCH) -Xcompiler -fPIC -Xcompiler -fvisibility=hidden -DCPHT_WITH_GPU -Ikernels
PG_CPPFLAGS += -DCPHT_WITH_GPU
# The CUDA runtime is linked statically and the driver is loaded at run time,
# so the library loads where no driver exists (never link -lcuda).
SHLIB_LINK += -L$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt -lpthread -lstdc++
kernels/gpu/%.o: kernels/gpu/%.cu $(KERNEL_H)
	$(NVCC) $(NVCC_FLAGS) -c $< -o $@
endif

PG_CPPFLAGS += -Isrc -Ikernels -std=gnu11
SHLIB_LINK += -lpthread

EXTRA_CLEAN = results regression.diffs regression.out test/unit/*.bin test/bench/*/*.bin kernels/*/*.o

PGXS := $(shell $(PG_CONFIG) --pgxs 2>/dev/null)
# Debian's PGXS emits LLVM bitcode for JIT; with CUDA objects (and no clang
# on GPU machines) that step is skipped.
override with_llvm = no
# On a fresh machine there is no PGXS until test/install-deps.sh has run;
# make test, make demo and make deps install it first, so only they (and
# make unit and its test binaries, which need no PostgreSQL) go on without it.
ifneq ($(wildcard $(PGXS)),)
include $(PGXS)
else ifneq ($(filter-out test demo deps plots unit test/unit/%.bin,$(or $(MAKECMDGOALS),all)),)
$(error PostgreSQL server headers not found ($(PG_CONFIG) --pgxs): install postgresql-server-dev-15, or run test/install-deps.sh)
endif

# every header of src/: a struct that changes (a handle, say) must not meet
# objects built with its old layout
$(OBJS): $(wildcard src/*.h src/*/*.h)
$(OBJS): src/shmem/protocol.h $(KERNEL_H)

# ---- tests and demo --------------------------------------------------------
.PHONY: test demo unit bench-cpu deps check-layout plots

deps:
	test/install-deps.sh

# C unit tests of kernels/ (no PostgreSQL).  Exit status 77 means skipped
# (the GPU tests where no GPU is usable), reported as such, never as passed.
#
# The tests link the kernel objects that ship: with PGXS present (always
# under make test, which installs it first) they are the very kernels/*/*.o
# the extension links, built by PGXS's rule with its CFLAGS (-fPIC
# included) and PG_CPPFLAGS.  On a machine without the PostgreSQL server
# headers make unit still runs: it then builds kernels/*/*.unit.o with the
# flags below (those of Debian's PostgreSQL 15 build, and -fPIC), says so,
# and never touches kernels/*/*.o, which only PGXS builds, so no object built
# without PGXS can end up in the extension.
UNIT_TESTS = $(patsubst %.c,%.bin,$(sort $(wildcard test/unit/test_*.c)))
ifneq ($(wildcard $(PGXS)),)
UNIT_KERNEL_OBJS = $(KERNEL_C:.c=.o)
UNIT_NOTE = unit tests link the extension's kernel objects (PGXS flags)
else
UNIT_KERNEL_OBJS = $(KERNEL_C:.c=.unit.o)
UNIT_NOTE = no PGXS: unit tests link kernel objects built with cpht's fallback flags, not PGXS's
UNIT_FALLBACK_CFLAGS = -Wall -Wmissing-prototypes -Wpointer-arith -Werror=vla -fno-strict-aliasing -fwrapv \
	-fexcess-precision=standard -g -O2 -fstack-protector-strong -fno-omit-frame-pointer -fPIC -std=gnu11
kernels/%.unit.o: kernels/%.c $(KERNEL_H)
	$(CC) $(UNIT_FALLBACK_CFLAGS) $(if $(WITH_GPU),-DCPHT_WITH_GPU) -Ikernels -c $< -o $@
endif
UNIT_OBJS = $(UNIT_KERNEL_OBJS) $(if $(WITH_GPU),$(CUDA_SRC:.cu=.o))
UNIT_LIBS = -lpthread -lm $(if $(WITH_GPU),-L$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt -lstdc++)
test/unit/%.bin: test/unit/%.c $(UNIT_OBJS) $(KERNEL_H) test/unit/*.h
	$(CC) -O2 -g -std=gnu11 -Wall -Wextra $(if $(WITH_GPU),-DCPHT_WITH_GPU) -Ikernels -o $@ $< $(UNIT_OBJS) $(UNIT_LIBS)

# keep the unit objects between runs (they are intermediates of a pattern rule)
.SECONDARY: $(UNIT_OBJS)

unit: $(UNIT_TESTS)
	@echo "$(UNIT_NOTE)"
	@set -e; for t in $(UNIT_TESTS); do \
		echo "== $$t"; rc=0; ./$$t || rc=$$?; \
		if [ $$rc -eq 77 ]; then echo "SKIPPED: $$t"; elif [ $$rc -ne 0 ]; then exit $$rc; fi; \
	done

test:
	test/run-tests.sh

# The door rules of docs/layout.md (make test runs it first).
check-layout:
	test/check-layout.sh

# The TAP tests alone, against the installed cpht (PROVE_TESTS=t/NAME.pl
# for one).  PGXS sets PG_REGRESS (Cluster.pm's initdb uses it) and the
# perl path of PostgreSQL::Test; the clusters live in tmp_check/.
.PHONY: prove_installcheck
prove_installcheck:
	$(prove_installcheck)

demo:
	test/run-demo.sh

# The figures of docs/results.md (matplotlib, for Debian's python3: a
# benchmark tool, which no test needs).
plots:
	test/install-deps.sh --plots
	/usr/bin/python3 test/bench/plot-results.py

bench-cpu:
	test/bench/kernels/run-cpu-bench.sh
