# The upstream Python SDK 1.0.8 (PyPI k8s-agent-sandbox[grpc], the release issue
# 13 compares with) in a venv under build/, installed by this rule; nothing
# of it is committed. test-kube-cluster runs
# tests/upstream/python_sdk_long_command.py with it on the v0.5.6 cluster
# (1.0.8 sends v1beta1 claims, which v0.4.6 does not serve).
UPSTREAM_PY_SDK_VERSION := 1.0.8
UPSTREAM_SDK_DIR        := $(BUILD)/python-sdk-$(UPSTREAM_PY_SDK_VERSION)
UPSTREAM_SDK_VENV       := $(UPSTREAM_SDK_DIR)/venv
# With the [grpc] extra: its sandboxd runtime (gRPC ProcessService) is what
# tools/localcluster's sandboxd proof test and bench-sandboxd drive.
UPSTREAM_SDK_STAMP      := $(UPSTREAM_SDK_VENV)/.k8s-agent-sandbox-grpc-$(UPSTREAM_PY_SDK_VERSION)

EXTRA_DEB_PACKAGES += python3-venv

$(UPSTREAM_SDK_STAMP):
	@mkdir -p $(UPSTREAM_SDK_DIR)
	@rm -rf $(UPSTREAM_SDK_VENV)
	/usr/bin/python3 -m venv $(UPSTREAM_SDK_VENV)
	$(UPSTREAM_SDK_VENV)/bin/pip install --quiet --disable-pip-version-check \
	  'k8s-agent-sandbox[grpc]==$(UPSTREAM_PY_SDK_VERSION)'
	@$(UPSTREAM_SDK_VENV)/bin/pip freeze --disable-pip-version-check > $(UPSTREAM_SDK_DIR)/pip-freeze.txt
	@touch $@

.PHONY: upstream-sdk-venv
upstream-sdk-venv: $(UPSTREAM_SDK_STAMP)

# (read after tests/rules.mk: a prerequisite added to its target here)
test-kube-cluster: $(UPSTREAM_SDK_STAMP)
# cluster-e2e's sandboxd proof (tools/localcluster/tests/test_sandboxd_pysdk.py)
cluster-e2e: $(UPSTREAM_SDK_STAMP)
# the Python side of bench-sandboxd (tests/sandboxd/rules.mk)
bench-sandboxd: $(UPSTREAM_SDK_STAMP)
# and of bench-native-sdk (tests/sandboxd/rules.mk)
bench-native-sdk: $(UPSTREAM_SDK_STAMP)

# File names with quotes, backslashes, spaces, % and unicode, written and
# read back by the library against agentsandbox-runtime and against the
# reference Python runtime, both on loopback (no cluster).
$(BUILD)/tests/asan/test_runtime_names: tests/upstream/test_runtime_names.c agentsandbox.h tests/asbtest.h
	@mkdir -p $(@D)
	$(CLANG) -std=c11 -O1 -g $(SAN) $(CFLAGS_WARN) $< -o $@ $(LINK)
ALL_TARGETS += $(BUILD)/tests/asan/test_runtime_names

.PHONY: test-runtime-names
TEST_TIERS += test-runtime-names
test-runtime-names: $(BUILD)/tests/asan/test_runtime_names $(BUILD)/runtime/agentsandbox-runtime runtime-deps
	@tools/runtime/tests/reference-runtime.sh $(RT_BUILD)/reference
	@tests/upstream/names.sh $(BUILD)/tests/asan/test_runtime_names $(RT_BIN) \
	  $(RT_BUILD)/reference $(BUILD)/runtime-names
