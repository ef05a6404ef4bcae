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

ALL_TARGETS += $(CLI_BIN)
TEST_TIERS  += test-cli

.PHONY: cli test-cli
cli: $(CLI_BIN)

$(CLI_BIN): $(CLI_DIR)/agentsandbox.c agentsandbox.h $(CLI_DIR)/rules.mk
	@mkdir -p $(@D)
	$(CC) -std=c99 $(OPT) $(CFLAGS_WARN) $< -o $@ $(TLS_LIBS) -lm -pthread

test-cli: $(CLI_BIN)
	@$(CLI_DIR)/tests/offline.sh $(CLI_BIN)

# The end-to-end script runs inside test-kube-cluster (tests/rules.mk).
test-kube-cluster: $(CLI_BIN)

# make static: the tool too, fully static with musl like the examples
# (tests/static/rules.mk), its stripped size printed.
$(ST)/agentsandbox: $(CLI_DIR)/agentsandbox.c agentsandbox.h | $(MUSL_MBEDTLS)/lib/libmbedtls.a
	@mkdir -p $(@D)
	$(MUSL_CC) $(STATIC_CFLAGS) $(MUSL_TLS_CFLAGS) $< -o $@ $(STATIC_LDFLAGS) \
	  $(MUSL_TLS_LIBS) -lm -pthread
.PHONY: static-cli
static-cli: $(ST)/agentsandbox
	@printf 'static: %-34s %7d bytes (%d KiB; goal 700 KiB)\n' $< $$(stat -c %s $<) $$(( $$(stat -c %s $<) / 1024 ))
static-bins: static-cli
