# tools/cli: `agentsandbox`, the command-line tool (tools/cli/README.md).
#
#   make cli           build $(BUILD)/cli/agentsandbox
#   make test-cli      what needs no cluster: usage errors, help, exit codes,
#                      an unreachable apiserver; the end-to-end part runs in
#                      test-kube-cluster, on the cluster that tier brings up
#                      (tools/cli/tests/e2e.sh), so make test starts no
#                      cluster of its own for it

CLI_DIR := tools/cli
CLI_BIN := $(BUILD)/cli/agentsandbox
# the same tool under UBSan (any undefined behaviour stops it): offline.sh
# feeds it the numbers a hostile sandbox may send (a mod_time of 1e300)
CLI_UBSAN_BIN := $(BUILD)/cli/agentsandbox-ubsan

ALL_TARGETS += $(CLI_BIN)
# test-cli runs the zsh completion in zsh
EXTRA_DEB_PACKAGES += zsh
TEST_TIERS  += test-cli

.PHONY: cli test-cli
cli: $(CLI_BIN)

$(CLI_BIN): $(CLI_DIR)/agentsandbox.c agentsandbox.h $(CLI_DIR)/rules.mk
	@mkdir -p $(@D)
	$(CC) -std=c99 $(OPT) $(CFLAGS_WARN) $< -o $@ $(TLS_LIBS) -lm -pthread

$(CLI_UBSAN_BIN): $(CLI_DIR)/agentsandbox.c agentsandbox.h $(CLI_DIR)/rules.mk
	@mkdir -p $(@D)
	$(CLANG) -std=c99 -O1 -g -fsanitize=undefined -fno-sanitize-recover=all $(CFLAGS_WARN) $< -o $@ \
	  $(TLS_LIBS) -lm -pthread

# The tool is the header's first user: it may call its public API only
# (an asb__ internal it needs is a gap in that API).
test-cli: $(CLI_BIN) $(CLI_UBSAN_BIN)
	@! grep -n 'asb__' $(CLI_DIR)/*.c || \
	  { echo "test-cli: the CLI calls the header's internals (above)"; exit 1; }
	@$(CLI_DIR)/tests/offline.sh $(CLI_BIN) $(CLI_UBSAN_BIN)

# The end-to-end script runs inside test-kube-cluster (tests/rules.mk), the
# static build in its empty root (tests/static/empty-root.sh).
test-kube-cluster: $(CLI_BIN) $(ST)/agentsandbox

# make static: the tool too, fully static with musl like the examples
# (tests/static/rules.mk), its stripped size printed. Its mbedTLS is a
# client-only build of its own (the options in mbedtls-client.unset off:
# no TLS server, DTLS, static-RSA/DHE/PSK key exchanges, unused ciphers
# and curves, certificate writing): 738 KiB -> 546 KiB. The empty-root
# run in test-kube-cluster drives it against the real API server's TLS.
CLI_MUSL_MBEDTLS ?= $(or $(HOME),/root)/.cache/agentsandbox/mbedtls-3.6-musl-client
CLI_MUSL_TLS_LIBS := $(CLI_MUSL_MBEDTLS)/lib/libmbedtls.a $(CLI_MUSL_MBEDTLS)/lib/libmbedx509.a \
                     $(CLI_MUSL_MBEDTLS)/lib/libmbedcrypto.a
.PHONY: mbedtls-musl-client
mbedtls-musl-client: | mbedtls3
	@tests/static/mbedtls-static.sh $(MUSL_CC) $(CLI_MUSL_MBEDTLS) $(CLI_DIR)/mbedtls-client.unset
$(CLI_MUSL_MBEDTLS)/lib/libmbedtls.a: $(CLI_DIR)/mbedtls-client.unset
	@$(MAKE) --no-print-directory mbedtls-musl-client
$(ST)/agentsandbox: $(CLI_DIR)/agentsandbox.c agentsandbox.h $(CLI_MUSL_MBEDTLS)/lib/libmbedtls.a
	@mkdir -p $(@D)
	$(MUSL_CC) $(STATIC_CFLAGS) -I$(CLI_MUSL_MBEDTLS)/include $< -o $@ $(STATIC_LDFLAGS) \
	  $(CLI_MUSL_TLS_LIBS) -lm -pthread
	@# issue 18's goal, kept: the build fails above 700 KiB (it was 714 KiB
	@# unnoticed on 2026-12-04, 682 KiB once unwind tables went)
	@sz=$$(stat -c %s $@); [ $$sz -le 716800 ] || \
	  { echo "static CLI: $$sz bytes, above the 700 KiB (716800) goal"; rm -f $@; exit 1; }
.PHONY: static-cli
static-cli: $(ST)/agentsandbox
	@printf 'static: %-34s %7d bytes (%d KiB; goal 700 KiB)\n' $< $$(stat -c %s $<) $$(( $$(stat -c %s $<) / 1024 ))
static-bins: static-cli

# make bench: the tool against the upstream Python SDK (tools/cli/tests/bench.sh),
# on a v0.5.6 cluster of its own (state and pod range apart from the tiers').
CLI_BENCH_STATE := $(abspath $(BUILD))/localcluster-clibench
CLI_BENCH_ENV := LC_STATE_DIR=$(CLI_BENCH_STATE) LC_POD_CIDR=127.1.66.0/24 LC_SERVICE_CIDR=127.2.66.0/24
BENCH_TIERS += bench-cli
.PHONY: bench-cli
bench-cli: $(CLI_BIN) $(UPSTREAM_SDK_STAMP)
	@$(CLI_BENCH_ENV) $(MAKE) --no-print-directory cluster-up AGENT_SANDBOX=v0.5.6 > $(BUILD)/cli-bench-cluster.log 2>&1 || \
	  { tail -20 $(BUILD)/cli-bench-cluster.log; $(CLI_BENCH_ENV) $(MAKE) --no-print-directory cluster-down; exit 1; }; \
	KUBECONFIG=$(CLI_BENCH_STATE)/kubeconfig/admin.kubeconfig $(CLI_DIR)/tests/bench.sh $(CLI_BIN) \
	  $(UPSTREAM_SDK_VENV)/bin/python \
	  $$(python3 -c "import json;print(json.load(open('$(CLI_BENCH_STATE)/cluster.json'))['ports']['router'])"); \
	rc=$$?; $(CLI_BENCH_ENV) $(MAKE) --no-print-directory cluster-down >/dev/null 2>&1; exit $$rc
