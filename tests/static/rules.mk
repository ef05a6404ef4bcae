# Static binaries and other toolchains (issue 16).
#
#   make static        the examples, the CLI and the runtime server fully
#                      static with musl-gcc against a client-only mbedTLS
#                      3.6 built by the same compiler (cached in
#                      ~/.cache/agentsandbox/mbedtls-3.6-musl-client),
#                      stripped, into $(BUILD)/static/; prints each size
#   make test-static   what a static binary relies on, on glibc and on musl
#                      (test_static under the HTTP peers, also under a
#                      64 KiB `ulimit -s`), its entropy with getrandom alone
#                      and with no source at all (entropy-test.sh), the
#                      static runtime server in an empty root and under its
#                      quick suite, the unit tests with musl and -Werror,
#                      the unit tests on i686 with TLS, tcc and -Os -flto
#                      in the compile matrix
#   make test-cross    the unit tests under qemu-user on aarch64, armhf and
#                      s390x, each with TLS, and one HTTPS GET from each
#
# The empty-root run of the static examples against the local control plane
# is part of test-kube-cluster (tests/static/empty-root.sh).

ST := $(BUILD)/static
MUSL_CC ?= musl-gcc
MUSL_MBEDTLS ?= $(or $(HOME),/root)/.cache/agentsandbox/mbedtls-3.6-musl
MUSL_TLS_CFLAGS := -I$(MUSL_MBEDTLS)/include
MUSL_TLS_LIBS := $(MUSL_MBEDTLS)/lib/libmbedtls.a $(MUSL_MBEDTLS)/lib/libmbedx509.a \
                 $(MUSL_MBEDTLS)/lib/libmbedcrypto.a
# Size first: -Os, one section per function and data object, unused ones
# dropped by the linker, symbols stripped.
# No unwind tables: C needs none (no exceptions, no pthread_cancel); they
# were 72 KiB of the CLI's .eh_frame.
STATIC_CFLAGS := -std=c99 -Os -ffunction-sections -fdata-sections -fno-asynchronous-unwind-tables \
                 -fno-unwind-tables $(CFLAGS_WARN)
STATIC_LDFLAGS := -static -s -Wl,--gc-sections

EXTRA_DEB_PACKAGES += musl-tools gcc-i686-linux-gnu libc6-dev-i386-cross tcc

.PHONY: static mbedtls-musl test-static
mbedtls-musl: | mbedtls3
	@tests/static/mbedtls-static.sh $(MUSL_CC) $(MUSL_MBEDTLS)
$(MUSL_MBEDTLS)/lib/libmbedtls.a:
	@$(MAKE) --no-print-directory mbedtls-musl

# The examples link a client-only mbedTLS: the same source and options
# with those in tools/cli/mbedtls-client.unset off (no TLS server, no
# static-RSA/DHE/PSK key exchanges, no unused ciphers and curves, no
# certificate writing), which the rule in tools/cli/rules.mk builds for
# the CLI into the same cache directory: about 170 KiB less than mbedTLS's
# default options. The quick start is built with those too
# ($(ST)/mbedtls-default/quickstart) for the size a user's own
# mbedTLS would give.
MUSL_CLIENT_MBEDTLS ?= $(or $(HOME),/root)/.cache/agentsandbox/mbedtls-3.6-musl-client
CLI_MUSL_MBEDTLS ?= $(MUSL_CLIENT_MBEDTLS)
MUSL_CLIENT_LIBS := $(foreach l,mbedtls mbedx509 mbedcrypto,$(MUSL_CLIENT_MBEDTLS)/lib/lib$(l).a)
$(ST)/%: examples/%.c agentsandbox.h tests/static/rules.mk $(MUSL_CLIENT_MBEDTLS)/lib/libmbedtls.a
	@mkdir -p $(@D)
	$(MUSL_CC) $(STATIC_CFLAGS) -I$(MUSL_CLIENT_MBEDTLS)/include $< -o $@ $(STATIC_LDFLAGS) \
	  $(MUSL_CLIENT_LIBS) -lm -pthread
$(ST)/mbedtls-default/%: examples/%.c agentsandbox.h | $(MUSL_MBEDTLS)/lib/libmbedtls.a
	@mkdir -p $(@D)
	$(MUSL_CC) $(STATIC_CFLAGS) $(MUSL_TLS_CFLAGS) $< -o $@ $(STATIC_LDFLAGS) \
	  $(MUSL_TLS_LIBS) -lm -pthread
$(ST)/notls/%: examples/%.c agentsandbox.h
	@mkdir -p $(@D)
	$(MUSL_CC) $(STATIC_CFLAGS) -DASB_TLS=0 $< -o $@ $(STATIC_LDFLAGS) -lm -pthread
STATIC_EXAMPLES := $(patsubst examples/%.c,$(ST)/%,$(wildcard examples/*.c))

# deps first (musl-tools, cmake for the source), then the binaries.
static:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory static-bins
.PHONY: static-bins
static-bins: $(STATIC_EXAMPLES) $(ST)/notls/quickstart $(ST)/mbedtls-default/quickstart
	@echo "static: musl, -Os, gc-sections, stripped (client-only mbedTLS 3.6 from $(MUSL_CLIENT_MBEDTLS);"; \
	echo "static: mbedtls-default/: mbedTLS's default options, from $(MUSL_MBEDTLS)):"; \
	for f in $(STATIC_EXAMPLES) $(ST)/notls/quickstart $(ST)/mbedtls-default/quickstart; do \
	  printf '  %-34s %7d bytes (%d KiB)\n' $$f $$(stat -c %s $$f) $$(( $$(stat -c %s $$f) / 1024 )); \
	done

# --- the tests ----------------------------------------------------------------
# test-kube-cluster runs these in an empty root (tests/static/empty-root.sh).
test-kube-cluster: $(ST)/direct_url $(ST)/json_lookup $(ST)/native_tunnel
# A cold cluster build shows its progress (the tier logs cluster-up itself).
test-kube-cluster: cluster-build

$(TB)/static/glibc/test_static: tests/test_static.c $(TEST_DEPS)
	@mkdir -p $(@D)
	$(CC) -std=c99 -O2 -g $(CFLAGS_WARN) $< -o $@ $(LINK)
$(TB)/static/musl/%: tests/%.c $(TEST_DEPS) tests/scanalloc.h | $(MUSL_MBEDTLS)/lib/libmbedtls.a
	@mkdir -p $(@D)
	$(MUSL_CC) -std=c99 -O2 $(CFLAGS_WARN) $(MUSL_TLS_CFLAGS) $< -o $@ -static \
	  $(MUSL_TLS_LIBS) -lm -pthread
# 32-bit x86 with Debian's i686 cross compiler (gcc -m32 needs gcc-multilib,
# which Debian will not install beside the cross compilers of test-cross),
# static, run natively, with TLS against mbedTLS 3.6 built by the same
# compiler into the cache (the rule is with the other cross targets below).
M32_CC ?= i686-linux-gnu-gcc
M32_MBEDTLS ?= $(or $(HOME),/root)/.cache/agentsandbox/mbedtls-3.6-i686
$(TB)/static/m32/%: tests/%.c $(TEST_DEPS) tests/scanalloc.h | $(M32_MBEDTLS)/lib/libmbedtls.a
	@mkdir -p $(@D)
	$(M32_CC) -std=c99 -O2 $(CFLAGS_WARN) -I$(M32_MBEDTLS)/include $< -o $@ -static \
	  $(M32_MBEDTLS)/lib/libmbedtls.a $(M32_MBEDTLS)/lib/libmbedx509.a \
	  $(M32_MBEDTLS)/lib/libmbedcrypto.a -lm -pthread
$(M32_MBEDTLS)/lib/libmbedtls.a: | mbedtls3
	@tests/static/mbedtls-static.sh $(M32_CC) $(M32_MBEDTLS)

$(TB)/static/glibc/test_resolve: tests/static/test_resolve.c $(HDR)
	@mkdir -p $(@D)
	$(CC) -std=c99 -O2 $(CFLAGS_WARN) $< -o $@ $(LINK)
$(TB)/static/musl/test_resolve: tests/static/test_resolve.c $(HDR) | $(MUSL_MBEDTLS)/lib/libmbedtls.a
	@mkdir -p $(@D)
	$(MUSL_CC) -std=c99 -O2 $(CFLAGS_WARN) $(MUSL_TLS_CFLAGS) $< -o $@ -static \
	  $(MUSL_TLS_LIBS) -lm -pthread

$(TB)/static/https_get: tests/static/https_get.c $(HDR) | $(MUSL_MBEDTLS)/lib/libmbedtls.a
	@mkdir -p $(@D)
	$(MUSL_CC) $(STATIC_CFLAGS) $(MUSL_TLS_CFLAGS) $< -o $@ $(STATIC_LDFLAGS) \
	  $(MUSL_TLS_LIBS) -lm -pthread
$(TB)/static/glibc/https_get: tests/static/https_get.c $(HDR)
	@mkdir -p $(@D)
	$(CC) -std=c99 -O2 $(CFLAGS_WARN) $< -o $@ $(LINK)
$(TB)/static/no_getrandom: tests/static/no_getrandom.c
	@mkdir -p $(@D)
	$(CC) -std=c99 -O2 $(CFLAGS_WARN) $< -o $@
$(TB)/static/peak_rss: tests/static/peak_rss.c
	@mkdir -p $(@D)
	$(CC) -std=c99 -O2 $(CFLAGS_WARN) $< -o $@

TEST_TIERS += test-static
STATIC_TEST_BINS := $(TB)/static/glibc/test_static $(TB)/static/musl/test_static \
             $(TB)/static/https_get $(TB)/static/peak_rss \
             $(TB)/static/glibc/https_get $(TB)/static/no_getrandom \
             $(TB)/static/glibc/test_resolve $(TB)/static/musl/test_resolve \
             $(UNIT_NAMES:%=$(TB)/static/musl/%) $(UNIT_NAMES:%=$(TB)/static/m32/%)
.PHONY: static-test-bins cross-bins
static-test-bins: $(STATIC_TEST_BINS)
# Compiling is most of the cost of this tier and of test-cross (each unit
# test includes the whole implementation): two builds at a time, whatever
# -j make test runs with.
test-static:
	@$(MAKE) --no-print-directory -j2 static-test-bins
	@echo "--- name resolution: a silent nameserver, then no /etc/resolv.conf (glibc, musl)"; \
	tests/static/resolver-test.sh $(TB)/static/glibc/test_resolve $(TB)/static/musl/test_resolve
	@echo "--- the static musl runtime server in an empty root, then its quick suite"; \
	tests/static/runtime-empty-root.sh $(ST)/agentsandbox-runtime && \
	python3 tools/runtime/tests/test_runtime.py --binary $(ST)/agentsandbox-runtime --quick \
	  > $(TB)/static/runtime-quick.log 2>&1 && tail -1 $(TB)/static/runtime-quick.log || \
	  { cat $(TB)/static/runtime-quick.log; exit 1; }
	@$(call RUN_UNIT,static/musl)
	@$(call RUN_UNIT,static/m32)
	@echo "--- compile matrix: tcc (ASB_TLS=0), gcc -Os -flto, musl-gcc"; \
	mkdir -p $(TB)/matrix; \
	printf '#define AGENTSANDBOX_IMPLEMENTATION\n#include "agentsandbox.h"\n' > $(TB)/matrix/impl.c; \
	tcc -DASB_TLS=0 -I. -Wall -Werror -c $(TB)/matrix/impl.c -o $(TB)/matrix/tcc.o && \
	tcc -DASB_TLS=0 -Wall -Werror examples/json_lookup.c -o $(TB)/matrix/tcc_json_lookup && \
	test "$$(printf '{"status":{"sandbox":{"name":"t"}}}' | $(TB)/matrix/tcc_json_lookup)" = "sandbox: t" && \
	for tls in 0 1; do \
	  gcc -std=c99 -Os -flto -DASB_TLS=$$tls -I. $(CFLAGS_WARN) -c $(TB)/matrix/impl.c -o $(TB)/matrix/lto.o || exit 1; \
	done && \
	$(MUSL_CC) -std=c99 -DASB_TLS=1 $(MUSL_TLS_CFLAGS) -I. $(CFLAGS_WARN) -c $(TB)/matrix/impl.c -o $(TB)/matrix/musl.o && \
	printf '#include <stdio.h>\n#define AGENTSANDBOX_IMPLEMENTATION\n#include "agentsandbox.h"\n' > $(TB)/matrix/late.c && \
	{ ! $(M32_CC) -std=c99 -D_DEFAULT_SOURCE -DASB_TLS=0 -I. -c $(TB)/matrix/late.c -o $(TB)/matrix/late.o \
	    > $(TB)/matrix/late.log 2>&1 && grep -q '32-bit time_t here' $(TB)/matrix/late.log || \
	  { echo "i686 with a system header first: not refused for its 32-bit time_t"; cat $(TB)/matrix/late.log; exit 1; }; } && \
	$(M32_CC) -std=c99 -D_DEFAULT_SOURCE -D_FILE_OFFSET_BITS=64 -D_TIME_BITS=64 -DASB_TLS=0 -I. $(CFLAGS_WARN) \
	  -c $(TB)/matrix/late.c -o $(TB)/matrix/late.o && \
	echo "compile-matrix (static): tcc, gcc -Os -flto, musl-gcc clean; i686 refuses a 32-bit time_t"
	@tests/http/with-peers.sh $(HTTP_PEERS_DIR)-static sh -c '\
	  echo "--- static/glibc/test_static (mbedTLS 2.28)" && $(TB)/static/glibc/test_static && \
	  echo "--- static/glibc/test_static under ulimit -s 64" && \
	    ( ulimit -s 64 && $(TB)/static/glibc/test_static ) && \
	  echo "--- static/musl/test_static (static, mbedTLS 3.6 built with musl-gcc)" && \
	    $(TB)/static/musl/test_static && \
	  echo "--- one HTTPS GET, static musl ($$(stat -c %s $(TB)/static/https_get) bytes stripped)" && \
	    $(TB)/static/peak_rss $(TB)/static/https_get \
	      https://127.0.0.1:$$ASB_PEER_NGINX_HTTPS/small.txt $$ASB_PEER_CERTS_CA && \
	  echo "--- entropy: getrandom alone in an empty root, then no source at all" && \
	    tests/static/entropy-test.sh $(TB)/static/no_getrandom $(TB)/static/https_get \
	      $(TB)/static/glibc/https_get $$ASB_PEER_NGINX_HTTP $$ASB_PEER_NGINX_HTTPS $$ASB_PEER_CERTS_CA'

# --- cross builds under qemu-user -----------------------------------------------
# The unit tests built by cross compilers (static, so qemu-user needs no
# sysroot; -O1: they test the byte order and word size, not the optimiser,
# and -O2 doubled the tier's compile time) and run under qemu, each with TLS against mbedTLS 3.6 built by
# the same cross compiler into the cache: aarch64, armhf (32-bit ARM) and
# s390x (big-endian).
CROSS_TARGETS := aarch64 armhf s390x
CROSS_CC_aarch64 := aarch64-linux-gnu-gcc
CROSS_CC_armhf := arm-linux-gnueabihf-gcc
CROSS_CC_s390x := s390x-linux-gnu-gcc
CROSS_QEMU_aarch64 := qemu-aarch64
CROSS_QEMU_armhf := qemu-arm
CROSS_QEMU_s390x := qemu-s390x
CROSS_MBEDTLS = $(or $(HOME),/root)/.cache/agentsandbox/mbedtls-3.6-$(1)
EXTRA_DEB_PACKAGES += qemu-user gcc-aarch64-linux-gnu gcc-arm-linux-gnueabihf gcc-s390x-linux-gnu \
                      libc6-dev-arm64-cross libc6-dev-armhf-cross libc6-dev-s390x-cross

define CROSS_RULES
$(call CROSS_MBEDTLS,$(1))/lib/libmbedtls.a: | mbedtls3
	@tests/static/mbedtls-static.sh $(CROSS_CC_$(1)) $(call CROSS_MBEDTLS,$(1))
$(TB)/cross/$(1)/%: tests/%.c $(TEST_DEPS) tests/scanalloc.h | $(call CROSS_MBEDTLS,$(1))/lib/libmbedtls.a
	@mkdir -p $$(@D)
	$(CROSS_CC_$(1)) -std=c99 -O1 $(CFLAGS_WARN) -I$(call CROSS_MBEDTLS,$(1))/include $$< -o $$@ -static \
	  $(foreach l,mbedtls mbedx509 mbedcrypto,$(call CROSS_MBEDTLS,$(1))/lib/lib$(l).a) -lm -pthread
$(TB)/cross/$(1)/https_get: tests/static/https_get.c $(HDR) | $(call CROSS_MBEDTLS,$(1))/lib/libmbedtls.a
	@mkdir -p $$(@D)
	$(CROSS_CC_$(1)) -std=c99 -O2 $(CFLAGS_WARN) -I$(call CROSS_MBEDTLS,$(1))/include $$< -o $$@ -static \
	  $(foreach l,mbedtls mbedx509 mbedcrypto,$(call CROSS_MBEDTLS,$(1))/lib/lib$(l).a) -lm -pthread
endef
$(foreach t,$(CROSS_TARGETS),$(eval $(call CROSS_RULES,$(t))))

.PHONY: test-cross
# Measured on this 2-core machine under load: cold, about 8 minutes (an
# mbedTLS per cross compiler, 0.5 to 2 min each, 18 cross builds, the
# runs); warm, 1m10s.
TEST_TIERS += test-cross
# The host's locale archive is little-endian: s390x gets its own de_DE
# (localedef --big-endian), found through LOCPATH.
cross-bins: $(foreach t,$(CROSS_TARGETS),$(UNIT_NAMES:%=$(TB)/cross/$(t)/%) $(TB)/cross/$(t)/https_get)
test-cross:
	@$(MAKE) --no-print-directory -j2 cross-bins
	@set -e; loc=$(TB)/cross/s390x/locale; \
	[ -d $$loc/de_DE.UTF-8 ] || { mkdir -p $$loc && localedef --big-endian -i de_DE -f UTF-8 $$loc/de_DE.UTF-8; }; \
	for t in $(CROSS_TARGETS); do \
	  case $$t in aarch64) q=$(CROSS_QEMU_aarch64);; armhf) q=$(CROSS_QEMU_armhf);; \
	    s390x) q=$(CROSS_QEMU_s390x); export LOCPATH=$$loc;; esac; \
	  for u in $(UNIT_NAMES); do echo "--- cross/$$t/$$u (under $$q)"; \
	    ASBT_REQUIRE_LOCALE=1 ASB_UNDER_QEMU=$$q $$q $(TB)/cross/$$t/$$u | tail -1; \
	    test "$${PIPESTATUS[0]}" = 0; \
	  done; done
	@tests/http/with-peers.sh $(HTTP_PEERS_DIR)-cross sh -c 'for t in $(CROSS_TARGETS); do \
	  case $$t in aarch64) q=$(CROSS_QEMU_aarch64);; armhf) q=$(CROSS_QEMU_armhf);; s390x) q=$(CROSS_QEMU_s390x);; esac; \
	  out=$$($$q $(TB)/cross/$$t/https_get https://127.0.0.1:$$ASB_PEER_NGINX_HTTPS/small.txt $$ASB_PEER_CERTS_CA) || exit 1; \
	  [ "$$out" = "hello from nginx" ] || { echo "cross/$$t/https_get printed: $$out"; exit 1; }; \
	  echo "--- cross/$$t/https_get: an HTTPS GET (handshake, certificate check) under $$q: ok"; \
	done'
