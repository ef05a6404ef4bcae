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
