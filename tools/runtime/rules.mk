# tools/runtime: agentsandbox-runtime, the static in-pod runtime server.
#
#   make runtime                 build $(BUILD)/runtime/agentsandbox-runtime (static)
#   make runtime-test            functional tests with curl and Python requests,
#                                then the same quick suite against an ASan+UBSan build
#   make runtime-fuzz-short      fuzz the request parsers for RT_FUZZ_SHORT seconds
#   make runtime-fuzz            fuzz for FUZZ_SECONDS
#   make runtime-bench           ours vs nginx and vs the reference Python runtime,
#                                one "bench:" line per measure

RT_DIR      := tools/runtime
RT_BUILD    := $(BUILD)/runtime
RT_SRC      := $(RT_DIR)/agentsandbox-runtime.c
RT_BIN      := $(RT_BUILD)/agentsandbox-runtime
RT_ASAN_BIN := $(RT_BUILD)/agentsandbox-runtime-asan
RT_FUZZ_BIN := $(RT_BUILD)/fuzz_request
RT_REPLAY   := $(RT_BUILD)/fuzz_request_replay
RT_REFUSE   := $(RT_BUILD)/test_refuse_busy
RT_CFLAGS   := -std=c11 $(CFLAGS_WARN)
RT_SAN      := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
RT_FUZZ_SHORT ?= 25

ALL_TARGETS        += $(RT_BIN)
TEST_TIERS         += runtime-test runtime-fuzz-short
BENCH_TIERS        += runtime-bench
FUZZ_TIERS         += runtime-fuzz
EXTRA_DEB_PACKAGES += wrk
EXTRA_DEPS_TARGETS += runtime-deps

.PHONY: runtime runtime-deps runtime-test runtime-fuzz-short runtime-fuzz runtime-bench

runtime: $(RT_BIN)

# Static: the binary resolves no host names, so static glibc is safe, and a
# sandbox image needs nothing but this file.
$(RT_BIN): $(RT_SRC) $(RT_DIR)/rules.mk
	@mkdir -p $(@D)
	$(CC) $(RT_CFLAGS) -O2 -ffunction-sections -fdata-sections -Wl,--gc-sections -static -pthread -o $@ $(RT_SRC) -lm
	@strip -o $@.stripped $@ && echo "runtime: static binary, stripped size $$(stat -c %s $@.stripped) bytes"

$(RT_ASAN_BIN): $(RT_SRC) $(RT_DIR)/rules.mk
	@mkdir -p $(@D)
	$(CC) $(RT_CFLAGS) -O1 -g $(RT_SAN) -pthread -o $@ $(RT_SRC) -lm

$(RT_FUZZ_BIN): $(RT_SRC) $(RT_DIR)/tests/fuzz_request.c $(RT_DIR)/rules.mk
	@mkdir -p $(@D)
	$(CLANG) -std=c11 -g -O1 -Wall -Wextra -Wno-unused-function -fsanitize=fuzzer,address,undefined \
	  -fno-sanitize-recover=all -pthread -o $@ $(RT_DIR)/tests/fuzz_request.c -lm

$(RT_REPLAY): $(RT_SRC) $(RT_DIR)/tests/fuzz_request.c $(RT_DIR)/rules.mk
	@mkdir -p $(@D)
	$(CC) -std=c11 -g -O1 -Wall -Wextra -Wno-unused-function -Werror $(RT_SAN) -DRT_FUZZ_REPLAY \
	  -pthread -o $@ $(RT_DIR)/tests/fuzz_request.c -lm

$(RT_REFUSE): $(RT_SRC) $(RT_DIR)/tests/test_refuse_busy.c $(RT_DIR)/rules.mk
	@mkdir -p $(@D)
	$(CC) $(RT_CFLAGS) -Wno-unused-function -g -O1 $(RT_SAN) -pthread -o $@ $(RT_DIR)/tests/test_refuse_busy.c -lm

# Python's requests is one of the two independent clients the tests use.
runtime-deps:
	@python3 -c 'import requests' 2>/dev/null || python3 -m pip install -q requests || \
	  python3 -m pip install -q --break-system-packages requests

runtime-test: $(RT_BIN) $(RT_ASAN_BIN) $(RT_REPLAY) $(RT_REFUSE) runtime-deps
	$(RT_REPLAY) $(RT_DIR)/tests/corpus
	$(RT_REFUSE)
	python3 $(RT_DIR)/tests/test_runtime.py --binary $(RT_BIN)
	python3 $(RT_DIR)/tests/test_runtime.py --binary $(RT_ASAN_BIN) --quick

# The corpus grows in the build dir; the seeds in the tree stay as they are.
runtime-fuzz-short: $(RT_FUZZ_BIN)
	@mkdir -p $(RT_BUILD)/fuzz-corpus
	@$(RT_FUZZ_BIN) -max_total_time=$(RT_FUZZ_SHORT) -max_len=4096 \
	  $(RT_BUILD)/fuzz-corpus $(RT_DIR)/tests/corpus > $(RT_BUILD)/fuzz-short.log 2>&1 || \
	  { tail -n 60 $(RT_BUILD)/fuzz-short.log; echo "runtime-fuzz-short: FAILED (log: $(RT_BUILD)/fuzz-short.log)"; exit 1; }
	@grep -E '^Done|stat::number_of_executed_units' $(RT_BUILD)/fuzz-short.log | tail -n 1; \
	  echo "runtime-fuzz-short: $(RT_FUZZ_SHORT) s of fuzzing, no crash"

runtime-fuzz: $(RT_FUZZ_BIN)
	@mkdir -p $(RT_BUILD)/fuzz-corpus
	$(RT_FUZZ_BIN) -max_total_time=$(FUZZ_SECONDS) -max_len=4096 $(RT_BUILD)/fuzz-corpus $(RT_DIR)/tests/corpus

# The reference runtime (agent-sandbox's Python app) for the second set of
# lines: set up under build/ from the pinned Go module and PyPI.
runtime-bench: $(RT_BIN) runtime-deps
	@$(RT_DIR)/tests/reference-runtime.sh $(RT_BUILD)/reference
	python3 $(RT_DIR)/tests/bench_runtime.py --binary $(RT_BIN) --reference $(RT_BUILD)/reference

# make static: the runtime too, with musl like the examples
# (tests/static/rules.mk): a scratch image needs only this file. test-static
# runs it in an empty root and runs the quick suite against it.
$(ST)/agentsandbox-runtime: $(RT_SRC) $(RT_DIR)/rules.mk
	@mkdir -p $(@D)
	$(MUSL_CC) $(RT_CFLAGS) -Os -ffunction-sections -fdata-sections $(RT_SRC) -o $@ \
	  $(STATIC_LDFLAGS) -pthread -lm
.PHONY: static-runtime
static-runtime: $(ST)/agentsandbox-runtime
	@printf 'static: %-34s %7d bytes (%d KiB)\n' $< $$(stat -c %s $<) $$(( $$(stat -c %s $<) / 1024 ))
static-bins: static-runtime
test-static: $(ST)/agentsandbox-runtime runtime-deps
