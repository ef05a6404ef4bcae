# agentsandbox.h — build, test and benchmark driver.
#
#   make          build tests, examples and tools into build/
#   make test     install missing dependencies, then run every test tier
#   make bench    benchmarks, ours vs a named baseline, one line per measure
#   make fuzz     longer fuzzing runs (make test runs them briefly)
#   make deps     install what is missing on a fresh Debian machine
#
# Areas with their own build and tests (tools/*, tests/*) add a rules.mk
# fragment that appends to the variables below; this file stays the one
# place that orders the tiers.

SHELL   := /bin/bash
BUILD   := build
CC      ?= cc
CLANG   ?= clang
CFLAGS_WARN := -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wundef -Werror
OPT     ?= -O2 -g
TLS_LIBS := -lmbedtls -lmbedx509 -lmbedcrypto
FUZZ_SECONDS ?= 60

# Fragments append to these.
ALL_TARGETS  :=
TEST_TIERS   :=
BENCH_TIERS  :=
FUZZ_TIERS   :=

.PHONY: all test bench fuzz deps clean
all: deps-check-quiet

include $(sort $(wildcard tests/rules.mk tests/*/rules.mk tools/*/rules.mk examples/rules.mk))

all: $(ALL_TARGETS)

# make test: every tier, in order; any failure fails the run.
# Each tier's wall time is printed after it and summed at the end: CI gives
# the whole run 90 minutes, and the slow tiers are where to look first.
# A tier's binaries build TEST_JOBS at a time (its checks still run in
# order: they are one recipe); most of the early tiers are compiles of the
# whole header.
TEST_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
test: deps
	@set -e; start=$$(date +%s); times=""; for t in $(TEST_TIERS); do \
	  echo "=== $$t"; t0=$$(date +%s); $(MAKE) --no-print-directory -j$(TEST_JOBS) $$t; \
	  s=$$(( $$(date +%s) - t0 )); echo "=== $$t: $${s} s"; times="$$times $$t=$${s}s"; \
	done; echo "=== all test tiers passed in $$(( $$(date +%s) - start )) s:$$times"

bench: deps
	@set -e; for t in $(BENCH_TIERS); do $(MAKE) --no-print-directory $$t; done

fuzz: deps
	@set -e; for t in $(FUZZ_TIERS); do $(MAKE) --no-print-directory $$t FUZZ_SECONDS=$${FUZZ_SECONDS:-600}; done

# Debian packages the build and the tests use. Installed only when missing,
# so a warm machine pays nothing.
DEB_PACKAGES := libmbedtls-dev libjsmn-dev clang libclang-rt-14-dev \
                nginx-light curl openssl python3 valgrind hyperfine
DEB_PACKAGES += $(EXTRA_DEB_PACKAGES)

# deps-debian alone is what building and running the examples and the local
# cluster need (make demo); deps-extra adds what the tests build or fetch.
deps: deps-debian
	@$(MAKE) --no-print-directory deps-extra

deps-debian:
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "deps: installing$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get install -y --no-install-recommends $$missing >/dev/null 2>&1 || \
	  { $$SUDO apt-get update >/dev/null && $$SUDO apt-get install -y --no-install-recommends $$missing; }; \
	fi

.PHONY: deps-debian deps-extra deps-check-quiet
deps-extra: $(EXTRA_DEPS_TARGETS)
deps-check-quiet: ;

clean:
	rm -rf $(BUILD)
