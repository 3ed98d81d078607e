# ickpt: `make demo` runs the heat-diffusion demo with a kill -9 and restart;
# `make test` runs every test. Both install what they need first.

PREFIX   ?= /usr/local
CARGO    ?= cargo
BUILD    := build
STAGE    := $(abspath $(BUILD)/prefix)
RELEASE  := target/release
CFLAGS   ?= -O2 -g -Wall -Wextra -Werror

# rustup's cargo looks for its toolchain under $HOME (~/.rustup, ~/.cargo). Run with another
# HOME (a batch job, a container), it finds none ("could not choose a version of rustup to
# run"): take the toolchain the set-up installed in the user's own home, from the password
# database, unless RUSTUP_HOME says where it is.
OWN_HOME := $(shell getent passwd "$$(id -u)" | cut -d: -f6)
ifeq ($(origin RUSTUP_HOME),undefined)
ifeq ($(wildcard $(HOME)/.rustup/toolchains),)
ifneq ($(wildcard $(OWN_HOME)/.rustup/toolchains),)
export RUSTUP_HOME := $(OWN_HOME)/.rustup
ifeq ($(origin CARGO_HOME),undefined)
export CARGO_HOME := $(OWN_HOME)/.cargo
endif
export PATH := $(OWN_HOME)/.cargo/bin:$(PATH)
endif
endif
endif

.PHONY: all deps core-deps s3-deps build build-testing header install uninstall stage testfs test test-rust test-c test-asan test-mpi test-install check lint demo bench bench-mpi bench-tiers bench-cape bench-prwip bench-incremental bench-aickpt bench-tracking bench-transparent plot-deps clean

all: build

# Debian packages and a Rust toolchain, installed only when missing.
deps: core-deps s3-deps

# What building needs (compilers, MPI, cffi): make demo and make build stop here.
core-deps:
	@scripts/deps.sh

# The S3 server the object-store tier's tests start (Garage, built once into ~/.cache/ickpt).
s3-deps: core-deps
	@scripts/deps.sh s3

# What `make install` ships; the tests' FUSE file system (crates/testfs) is built by `testfs`.
build: core-deps
	$(CARGO) build --release -p ickpt -p ickpt-cli -p ickpt-run

# The tests' build: the library and command with their test-only code (the `testing` feature:
# store fault injection, ICKPT_DISCARD_WRITES, the power-loss file system, fuzz targets), and
# the test programs. libickpt and libickpt_run are cdylibs, whose files carry no hash: every
# build that resolves their dependencies' features otherwise (cargo unifies features over the
# packages and targets it is given: `-p ickpt` alone, or without the tests' dev-dependencies,
# leaves libc, zerocopy, num-traits... with other features) writes the same files, and the
# next build compiles the library and every test again (about 4 minutes a `make test`). So
# everything on the tests' side builds and tests the whole workspace, lib, bins and tests,
# as `cargo test --workspace` does, and selects tests with --test, never with -p.
TESTING := --features ickpt/raw-sys,ickpt/testing
WORKSPACE_TESTS := --release --workspace $(TESTING)
build-testing: core-deps
	$(CARGO) build $(WORKSPACE_TESTS) --lib --bins --tests

# Regenerate include/ickpt.h and include/ickpt_coord.h from the Rust C API (the header test
# fails when they drift).
header:
	ICKPT_BLESS_HEADER=1 $(CARGO) test -q $(WORKSPACE_TESTS) --test header

# libickpt_mpi is built with the MPI compiler wrapper MPICC (the first mpicc in PATH unless
# set: MPICC=mpicc.mpich), so it serves the MPI it was built with (docs/mpi.md).
MPICC ?= mpicc

install: build
	scripts/install.sh "$(DESTDIR)$(PREFIX)" "$(PREFIX)"
	scripts/install-mpi.sh "$(DESTDIR)$(PREFIX)" "$(PREFIX)" "$(MPICC)"

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/lib/libickpt.so $(DESTDIR)$(PREFIX)/lib/libickpt.so.* $(DESTDIR)$(PREFIX)/lib/libickpt.a \
	      $(DESTDIR)$(PREFIX)/include/ickpt.h $(DESTDIR)$(PREFIX)/include/ickpt_coord.h \
	      $(DESTDIR)$(PREFIX)/lib/pkgconfig/ickpt.pc \
	      $(DESTDIR)$(PREFIX)/lib/libickpt_mpi.so $(DESTDIR)$(PREFIX)/lib/libickpt_mpi.so.* \
	      $(DESTDIR)$(PREFIX)/include/ickpt_mpi.h \
	      $(DESTDIR)$(PREFIX)/lib/pkgconfig/ickpt-mpi.pc \
	      $(DESTDIR)$(PREFIX)/lib/libickpt_fortran.so $(DESTDIR)$(PREFIX)/lib/libickpt_mpi_fortran.so \
	      $(DESTDIR)$(PREFIX)/include/ickpt.mod $(DESTDIR)$(PREFIX)/include/ickpt_mpi.mod \
	      $(DESTDIR)$(PREFIX)/lib/pkgconfig/ickpt-fortran.pc $(DESTDIR)$(PREFIX)/lib/pkgconfig/ickpt-mpi-fortran.pc \
	      $(DESTDIR)$(PREFIX)/lib/pkgconfig/ickpt-static.pc $(DESTDIR)$(PREFIX)/bin/ickpt

# A private install of the tests' build, which the C tests, the MPI tests, the benchmarks and
# the demo build against through pkg-config.
stage: build-testing
	scripts/install.sh "$(STAGE)" "$(STAGE)"
	scripts/install-mpi.sh "$(STAGE)" "$(STAGE)" "$(MPICC)"

# The FUSE file system the C tests mount to inject store faults (tests only, never installed),
# built with the rest of the tests' build (see build-testing).
testfs: build-testing

lint: core-deps
	scripts/check-commits.sh
	$(CARGO) fmt --all -- --check
	rustfmt --edition 2021 --check fuzz/fuzz_targets/*.rs
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings

# Everything under `auto`, then the core's integration tests (the conformance suite every
# backend must pass) and the C tests with each backend this kernel offers forced in turn.
# Each run of the tests (built first, outside the bound) is bounded: a hang fails the run
# instead of holding CI. The tests bound their own waits too (ICKPT_TEST_WAIT_SECS).
TEST_TIMEOUT ?= 900
BOUNDED  := timeout -k 10 $(TEST_TIMEOUT)

# The library's tests (what `-p ickpt --tests` would select, by the file names cargo finds
# them by), for the runs once per backend: named with --test so that the workspace's build
# serves them (see build-testing). --lib adds the other crates' unit tests (under a second).
CORE_TESTS := --lib $(addprefix --test ,$(sort $(basename $(notdir $(wildcard crates/core/tests/*.rs))) \
	$(notdir $(patsubst %/main.rs,%,$(wildcard crates/core/tests/*/main.rs)))))

# build-testing: the library `ickpt run` preloads, which the tests of `ickpt run` find beside
# the command (a cdylib, which `cargo test` does not build).
test-rust: core-deps s3-deps build-testing
	$(CARGO) test $(WORKSPACE_TESTS) --no-run
	$(BOUNDED) $(CARGO) test $(WORKSPACE_TESTS)
	scripts/each-backend.sh $(RELEASE)/ickpt $(BOUNDED) $(CARGO) test $(WORKSPACE_TESTS) $(CORE_TESTS)
	@echo "== auto, with the kernel features hidden (each fallback of auto)"
	ICKPT_NO_UFFD=1 $(BOUNDED) $(CARGO) test $(WORKSPACE_TESTS) --test conformance --test syscalls
	ICKPT_NO_PAGEMAP_SCAN=1 $(BOUNDED) $(CARGO) test $(WORKSPACE_TESTS) --test conformance --test syscalls

test-c: stage testfs
	tests/c/run.sh "$(STAGE)"
	scripts/each-backend.sh $(RELEASE)/ickpt env ICKPT_TEST_BACKEND=@ tests/c/run.sh "$(STAGE)"
	scripts/each-backend.sh $(RELEASE)/ickpt tests/prwip.sh "$(STAGE)"

# The C tests once more (auto's backend), each built with AddressSanitizer and UBSan against
# the staged library, whose C boundary, heap and leaks they then check (tests/c/run.sh,
# ICKPT_TEST_SANITIZE; about 45 s). ICKPT_TEST_BACKEND=mprotect picks another backend.
test-asan: stage testfs
	ICKPT_TEST_SANITIZE=address,undefined tests/c/run.sh "$(STAGE)"

# The MPI layer with Open MPI and MPICH, 2 and 4 ranks, kills at random and inside the
# protocol (tests/mpi/run.sh; each mpirun bounded).
test-mpi: build-testing
	tests/mpi/run.sh

# The inner loop: the Rust tests and the C tests once (auto's backend), with nothing
# installed beyond the Rust toolchain and a C compiler: no apt-get, no S3 server, no MPI.
# What needs more (the S3 tier's tests, the FUSE mounts, the cffi example) says SKIPPED;
# `make test` runs everything.
check:
	$(CARGO) build $(WORKSPACE_TESTS) --lib --bins --tests
	ICKPT_ALLOW_NO_S3=1 ICKPT_ALLOW_NO_LANGS=1 $(BOUNDED) $(CARGO) test $(WORKSPACE_TESTS)
	scripts/install.sh "$(STAGE)" "$(STAGE)"
	ICKPT_ALLOW_NO_FUSE=1 ICKPT_ALLOW_NO_CFFI=1 tests/c/run.sh "$(STAGE)"

# `make install` as a batch job runs it: with a HOME of its own (tests/install_home.sh), and
# what it installs carries no test-only code (the stage, which does, is the check's control).
test-install: stage
	tests/install_home.sh

test: lint test-rust test-c test-asan test-mpi test-install
	@echo "make test: all suites passed"

demo: stage
	demo/run.sh "$(STAGE)"

bench: bench-incremental bench-aickpt bench-tracking bench-mpi bench-tiers bench-cape bench-prwip \
       bench-transparent

# Checkpoint and restore against plain file I/O of the same bytes: writes docs/benchmarks/incremental.{json,csv,png} (about 2 minutes).
# The backend is auto's choice, or ICKPT_BACKEND's when set (make bench-incremental
# ICKPT_BACKEND=mprotect, or in the environment); the JSON records the one used.
# INCREMENTAL_ARGS adds options, e.g. INCREMENTAL_ARGS="--reps 9".
INCREMENTAL_ARGS ?=
bench-incremental: build plot-deps
	$(if $(ICKPT_BACKEND),ICKPT_BACKEND=$(ICKPT_BACKEND)) $(RELEASE)/ickpt bench incremental \
	    --dir $(BUILD)/bench --out docs/benchmarks $(INCREMENTAL_ARGS)
	/usr/bin/python3 scripts/plot_incremental.py docs/benchmarks/incremental.json \
	    docs/benchmarks/incremental.png

# Writes docs/benchmarks/aickpt-*.{csv,json,png} (25 minutes on the AMD VM, 36 on the Xeon one).
bench-aickpt: build plot-deps
	scripts/bench-aickpt.sh $(RELEASE)/ickpt docs/benchmarks

# Writes docs/benchmarks/tracking.{json,png} and tracking-*.csv (about 5 minutes).
bench-tracking: build plot-deps
	$(RELEASE)/ickpt bench tracking --dir $(BUILD)/bench-tracking --out docs/benchmarks
	/usr/bin/python3 scripts/plot_tracking.py docs/benchmarks/tracking.json docs/benchmarks/

# Coordination cost of a global checkpoint at 1, 2, 4 ranks, and restart time: writes
# docs/benchmarks/mpi.{json,csv} (a few minutes).
bench-mpi: stage
	scripts/bench-mpi.sh "$(STAGE)" docs/benchmarks

# The tiers' figures (about 6 minutes): what draining to a shared tier costs the application
# (demo/heat.c with and without ICKPT_SHARED_DIR, paired, sync and async: tiers.{json,csv}),
# compression (zstd levels on the heat grid and random bytes, heat with and without it:
# compress.{json,csv,png}, compress-heat.{json,csv}),
# the cost policy against 1:9 (policy.{json,csv}), and a restart from each tier, the object
# store a Garage server the script starts (restart-tiers.json), and the drain against a plain
# copy and a plain upload of the same files (drain.json), all in docs/benchmarks; tiers.png
# plots them, and drain.csv and restart-tiers.csv tabulate them.
bench-tiers: stage s3-deps plot-deps
	scripts/bench-tiers.sh "$(STAGE)" docs/benchmarks
	scripts/bench-compress.sh "$(STAGE)" $(RELEASE)/ickpt docs/benchmarks
	/usr/bin/python3 scripts/plot_compress.py docs/benchmarks
	$(RELEASE)/ickpt bench policy --dir $(BUILD)/bench --out docs/benchmarks
	scripts/bench-restart-tiers.sh $(RELEASE)/ickpt docs/benchmarks
	/usr/bin/python3 scripts/plot_tiers.py docs/benchmarks

# The CAPE paper's Table II with program sections (about 10 minutes): checkpoint sizes
# at locations 1 and 2 (word- against page-level), run time without checkpoints, with all,
# with location 2's only, restart after iteration 50, and CAPE's parallel loop on 1, 2, 4
# ranks: docs/benchmarks/cape.{json,csv,png}, cape-mpi.csv. BENCH_CAPE_BIG=1 adds N=13280.
bench-cape: stage plot-deps
	scripts/bench-cape.sh "$(STAGE)" docs/benchmarks
	/usr/bin/python3 scripts/plot_cape.py docs/benchmarks

bench-prwip: stage plot-deps
	scripts/bench-prwip.sh "$(STAGE)" docs/benchmarks
	/usr/bin/python3 scripts/plot_prwip.py docs/benchmarks

# Whole-process checkpoints (docs/transparent.md) of an unmodified 256 MiB and 4 GiB program
# (examples/transparent/dirty.c) rewriting 1, 10 and 50% of its pages between checkpoints:
# ickpt run, CRIU 4.1.1 (scripts/criu.sh builds it once into ~/.cache/ickpt) and the same
# program on the API, 5 paired repetitions: docs/benchmarks/transparent/transparent.{json,csv,png}
# and summary.md. As root (CRIU; cold restarts drop the page cache); about 13 minutes.
bench-transparent: stage plot-deps
	scripts/bench-transparent.sh "$(STAGE)" docs/benchmarks/transparent
	/usr/bin/python3 scripts/plot_transparent.py docs/benchmarks/transparent

plot-deps:
	@scripts/deps.sh plot

clean:
	$(CARGO) clean
	rm -rf $(BUILD)
