# Tests of the header itself: compile matrix, exported symbols, unit tests
# (C, C++, ASan+UBSan, tiny limits), the differential JSON tests against
# jsmn, fuzzing, the README's examples, and the JSON benchmark.

TB := $(BUILD)/tests
HDR := agentsandbox.h
TEST_SRCS := tests/test_json.c tests/test_rules.c tests/test_http.c tests/test_yaml.c tests/test_sdk.c \
             tests/test_ws.c tests/test_trace.c
TEST_DEPS := $(HDR) tests/asbtest.h tests/recorder.h tests/logsink.h tests/cluster.h \
             tests/nocluster.h tests/cancel_later.h
ORACLE_HDRS := tests/oracle/jsmn_oracle.h tests/oracle/json_ref.h \
               tests/oracle/json_contract.h tests/oracle/k8s_gen.h
SAN := -fsanitize=address,undefined -fno-sanitize-recover=all
LINK := $(TLS_LIBS) -lm -pthread
UNIT_NAMES := $(basename $(notdir $(TEST_SRCS)))

# --- jsmn oracle, one object per mode, per build flavour (plain, asan) ----
JSMN_MODES := default parent strict
JSMN_DEFS_default := -DORACLE_FN=oracle_jsmn_default -DORACLE_DEFINE_SIZE
JSMN_DEFS_parent  := -DORACLE_FN=oracle_jsmn_parent -DJSMN_PARENT_LINKS
JSMN_DEFS_strict  := -DORACLE_FN=oracle_jsmn_strict -DJSMN_PARENT_LINKS -DJSMN_STRICT
$(TB)/oracle/jsmn_%.o: tests/oracle/jsmn_oracle.c tests/oracle/jsmn_oracle.h
	@mkdir -p $(@D)
	$(CC) -O2 -g -c $< $(JSMN_DEFS_$*) -o $@
$(TB)/oracle/asan_jsmn_%.o: tests/oracle/jsmn_oracle.c tests/oracle/jsmn_oracle.h
	@mkdir -p $(@D)
	$(CLANG) -O1 -g $(SAN) -c $< $(JSMN_DEFS_$*) -o $@
JSMN_OBJS := $(JSMN_MODES:%=$(TB)/oracle/jsmn_%.o)
JSMN_ASAN_OBJS := $(JSMN_MODES:%=$(TB)/oracle/asan_jsmn_%.o)

# --- unit tests in every flavour ---------------------------------------------
$(TB)/c/%: tests/%.c $(TEST_DEPS)
	@mkdir -p $(@D)
	$(CC) -std=c99 $(OPT) $(CFLAGS_WARN) $< -o $@ $(LINK)
# The C++ and no-TLS flavours check the language and the switch, not the
# optimiser (the C flavour does, at $(OPT)): -O1 halves their compile time.
$(TB)/cxx/%: tests/%.c $(TEST_DEPS)
	@mkdir -p $(@D)
	$(CXX) -x c++ -std=c++11 -O1 -g $(CFLAGS_WARN) $< -o $@ $(LINK)
$(TB)/notls/%: tests/%.c $(TEST_DEPS)
	@mkdir -p $(@D)
	$(CLANG) -std=c11 -DASB_TLS=0 -O1 -g $(CFLAGS_WARN) $< -o $@ -lm
$(TB)/asan/%: tests/%.c $(TEST_DEPS)
	@mkdir -p $(@D)
	$(CLANG) -std=c11 -O1 -g $(SAN) $(CFLAGS_WARN) $< -o $@ $(LINK)
# Tiny limits: the same tests must hold with the smallest sane settings.
$(TB)/tiny/%: tests/%.c $(TEST_DEPS)
	@mkdir -p $(@D)
	$(CLANG) -std=c11 -O1 -g $(SAN) $(CFLAGS_WARN) -DASB_JSON_MAX_DEPTH=8 \
	  -DASB_JSON_MAX_DOC_TOKENS=64 $< -o $@ $(LINK)
$(TB)/c/test_json_diff: tests/test_json_diff.c $(TEST_DEPS) $(ORACLE_HDRS) $(JSMN_OBJS)
	@mkdir -p $(@D)
	$(CC) -std=c99 $(OPT) $(CFLAGS_WARN) $< $(JSMN_OBJS) -o $@ $(LINK)
$(TB)/asan/test_json_diff: tests/test_json_diff.c $(TEST_DEPS) $(ORACLE_HDRS) $(JSMN_ASAN_OBJS)
	@mkdir -p $(@D)
	$(CLANG) -std=c11 -O1 -g $(SAN) $(CFLAGS_WARN) $< $(JSMN_ASAN_OBJS) -o $@ $(LINK)

UNIT_BINS := $(foreach f,c cxx notls asan tiny,$(UNIT_NAMES:%=$(TB)/$(f)/%)) \
             $(TB)/c/test_json_diff $(TB)/asan/test_json_diff
ALL_TARGETS += $(UNIT_BINS)

# Descriptors close-on-exec from their first instant (review finding R5):
# one flavour, the creating calls wrapped behind macros (needs _GNU_SOURCE).
$(TB)/asan/test_cloexec: tests/test_cloexec.c $(TEST_DEPS)
	@mkdir -p $(@D)
	$(CLANG) -std=c11 -O1 -g $(SAN) $(CFLAGS_WARN) -D_GNU_SOURCE $< -o $@ $(LINK)
ALL_TARGETS += $(TB)/asan/test_cloexec

.PHONY: test-compile-matrix test-symbols test-unit test-asan test-tiny \
        test-json-diff test-fuzz-replay test-fuzz-short test-readme \
        bench-json
TEST_TIERS += test-compile-matrix test-symbols test-unit test-json-diff \
              test-asan test-tiny test-fuzz-replay test-fuzz-short test-readme
BENCH_TIERS += bench-json
EXTRA_DEPS_TARGETS += deps-locale

# A decimal-comma locale, so the JSON number tests prove locale
# independence (they fail if it is missing: ASBT_REQUIRE_LOCALE).
.PHONY: deps-locale
deps-locale:
	@locale -a 2>/dev/null | grep -qi '^de_DE.utf8$$' || \
	  { dpkg-query -W -f='$${Status}' locales 2>/dev/null | grep -q 'ok installed' || \
	    apt-get install -y --no-install-recommends locales >/dev/null; \
	    localedef -i de_DE -f UTF-8 de_DE.UTF-8; }

# Every compiler, standard and TLS switch; the implementation alone and a
# second translation unit using only the declarations; ASB_STATIC. The 48
# compiles are independent, so they run TEST_JOBS at a time, each into its
# own object; any failure names its command and fails the tier.
MATRIX_CC := "gcc -std=c99" "gcc -std=c11" "clang -std=c99" "clang -std=c11" \
             "g++ -x c++ -std=c++11" "clang++ -x c++ -std=c++11"
test-compile-matrix:
	@mkdir -p $(TB)/matrix; rm -f $(TB)/matrix/*.o $(TB)/matrix/failed; \
	printf '#define AGENTSANDBOX_IMPLEMENTATION\n#include "agentsandbox.h"\n' > $(TB)/matrix/impl.c; \
	printf '#include "agentsandbox.h"\nint use(void);\nint use(void) { return (int)asb_result_str(ASB_OK)[0]; }\n' > $(TB)/matrix/user.c; \
	printf '#define ASB_STATIC\n#define AGENTSANDBOX_IMPLEMENTATION\n#include "agentsandbox.h"\n' > $(TB)/matrix/static.c; \
	i=0; for cc in $(MATRIX_CC); do for tls in 0 1; do for tr in 1 0; do for f in impl user static; do \
	  i=$$((i+1)); echo "$$cc -DASB_TLS=$$tls -DASB_TRACING=$$tr -I. $(CFLAGS_WARN) -c $(TB)/matrix/$$f.c -o $(TB)/matrix/m$$i.o"; \
	done; done; done; done > $(TB)/matrix/jobs; \
	xargs -P $(TEST_JOBS) -I CMD sh -c 'CMD || echo "CMD" >> $(TB)/matrix/failed' < $(TB)/matrix/jobs; \
	if [ -s $(TB)/matrix/failed ]; then sed 's/^/compile-matrix: FAILED: /' $(TB)/matrix/failed; exit 1; fi; \
	n=$$(ls $(TB)/matrix/m*.o | wc -l); want=$$(wc -l < $(TB)/matrix/jobs); \
	[ "$$n" = "$$want" ] || { echo "compile-matrix: $$n objects for $$want builds"; exit 1; }; \
	echo "compile-matrix: $$n builds clean"

# The implementation exports only asb_* symbols and, under ASB_STATIC, none.
test-symbols:
	@mkdir -p $(TB)/matrix; \
	printf '#define AGENTSANDBOX_IMPLEMENTATION\n#include "agentsandbox.h"\n' > $(TB)/matrix/impl.c; \
	for tls in 0 1; do \
	  $(CC) -std=c99 -DASB_TLS=$$tls -I. -O2 -c $(TB)/matrix/impl.c -o $(TB)/matrix/sym.o || exit 1; \
	  bad=$$(nm -g --defined-only $(TB)/matrix/sym.o | awk '{print $$3}' | grep -v '^asb_[a-z0-9]' || true); \
	  if [ -n "$$bad" ]; then echo "symbols: exported without the asb_ prefix:"; echo "$$bad"; exit 1; fi; \
	  n=$$(nm -g --defined-only $(TB)/matrix/sym.o | wc -l); \
	  echo "symbols (ASB_TLS=$$tls): $$n exported, all asb_*"; \
	done; \
	printf '#define ASB_STATIC\n#define AGENTSANDBOX_IMPLEMENTATION\n#include "agentsandbox.h"\n' > $(TB)/matrix/static.c; \
	$(CC) -std=c99 -I. -O2 -c $(TB)/matrix/static.c -o $(TB)/matrix/static.o || exit 1; \
	if nm -g --defined-only $(TB)/matrix/static.o | grep -q .; then \
	  echo "symbols: ASB_STATIC still exports:"; nm -g --defined-only $(TB)/matrix/static.o; exit 1; fi; \
	echo "symbols (ASB_STATIC): none exported"

RUN_UNIT = set -e; for t in $(UNIT_NAMES); do echo "--- $(1)/$$t"; \
  ASBT_REQUIRE_LOCALE=1 $(TB)/$(1)/$$t; done

test-unit: $(UNIT_NAMES:%=$(TB)/c/%) $(UNIT_NAMES:%=$(TB)/cxx/%) $(UNIT_NAMES:%=$(TB)/notls/%)
	@$(call RUN_UNIT,c)
	@$(call RUN_UNIT,cxx)
	@$(call RUN_UNIT,notls)
test-asan: $(UNIT_NAMES:%=$(TB)/asan/%) $(TB)/asan/test_json_diff $(TB)/asan/test_cloexec
	@$(call RUN_UNIT,asan)
	@echo "--- asan/test_json_diff"; $(TB)/asan/test_json_diff
	@echo "--- asan/test_cloexec"; $(TB)/asan/test_cloexec
test-tiny: $(UNIT_NAMES:%=$(TB)/tiny/%)
	@$(call RUN_UNIT,tiny)
test-json-diff: $(TB)/c/test_json_diff
	@$(TB)/c/test_json_diff

# --- fuzzing ------------------------------------------------------------------
# One target per area of untrusted input; a target may take a selector byte
# to pick among related entry points (see the comment atop each file).
FUZZ_TARGETS := json rules http yaml watch sandbox kube kubeconfig proxy
FUZZ_TARGETS += h2 hpack protobuf ws
# (after FUZZ_TARGETS: FUZZ_TIERS is expanded where it is appended to)
FUZZ_TIERS += $(FUZZ_TARGETS:%=fuzz-%)
.PHONY: $(FUZZ_TARGETS:%=fuzz-%)
FUZZ_EXTRA_json := $(JSMN_ASAN_OBJS)
FUZZ_SEEDS_http := tests/fuzz/seeds_http
FUZZ_SEEDS_yaml := tests/fuzz/seeds_yaml
FUZZ_SEEDS_watch := tests/fuzz/seeds_watch
FUZZ_SEEDS_json := tests/json/valid tests/json/invalid tests/json/forbidden
FUZZ_SEEDS_rules := tests/fuzz/seeds_rules
FUZZ_SEEDS_sandbox := tests/fuzz/seeds_sandbox
FUZZ_SEEDS_kube := tests/fuzz/seeds_kube
FUZZ_SEEDS_kubeconfig := tests/fuzz/seeds_kubeconfig
FUZZ_SEEDS_proxy := tests/fuzz/seeds_proxy
FUZZ_SEEDS_ws := tests/fuzz/seeds_ws
$(TB)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_main.h $(HDR) $(ORACLE_HDRS) $(JSMN_ASAN_OBJS)
	@mkdir -p $(@D)
	$(CLANG) -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	  $< $(FUZZ_EXTRA_$*) -o $@ $(LINK)
$(TB)/fuzz/replay_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_main.h $(HDR) $(ORACLE_HDRS) $(JSMN_ASAN_OBJS)
	@mkdir -p $(@D)
	$(CLANG) -g -O1 -DASB_FUZZ_REPLAY $(SAN) $< $(FUZZ_EXTRA_$*) -o $@ $(LINK)
ALL_TARGETS += $(FUZZ_TARGETS:%=$(TB)/fuzz/replay_%)

# The committed seeds plus whatever the fuzzers found so far, each input
# once, through the libFuzzer builds test-fuzz-short runs next (-runs=0: no
# mutation, nothing written), so make test compiles each target once. One
# replay build (no libFuzzer: what a gcc-only user runs) keeps that main
# honest too. replay.sh fails a target when fewer inputs ran than its seed
# directories hold: libFuzzer with an empty or no corpus runs one empty
# input and exits 0 (its selftest, first, checks that against fuzz_json).
test-fuzz-replay: $(FUZZ_TARGETS:%=$(TB)/fuzz/fuzz_%) $(TB)/fuzz/fuzz_json $(TB)/fuzz/replay_json
	@sh tests/fuzz/replay.sh --selftest $(TB)/fuzz/fuzz_json
	@echo "--- replay json (the libFuzzer-free replay main)"; \
	  $(TB)/fuzz/replay_json $(FUZZ_SEEDS_json) $(wildcard $(TB)/fuzz/corpus_json)
	@$(foreach t,$(FUZZ_TARGETS),sh tests/fuzz/replay.sh $(t) $(TB)/fuzz/fuzz_$(t) \
	  $(TB)/fuzz/replay_$(t).log $(FUZZ_SEEDS_$(t)) $(wildcard $(TB)/fuzz/corpus_$(t)) &&) true

# Bounded runs in make test (FUZZ_SECONDS split over the targets by their
# shares, which sum to 60 with tests/h2/rules.mk's); make fuzz runs each target for FUZZ_SECONDS.
# Each run ends with one line "fuzz <target>: N execs/s, ..." taken from
# libFuzzer's final stats. Findings go to build/tests/fuzz/findings.
FUZZ_SHARE_json := 8
FUZZ_SHARE_rules := 4
FUZZ_SHARE_http := 8
FUZZ_SHARE_yaml := 8
FUZZ_SHARE_ws := 2
FUZZ_SHARE_watch := 5
FUZZ_SHARE_sandbox := 4
FUZZ_SHARE_kube := 5
FUZZ_SHARE_kubeconfig := 5
FUZZ_SHARE_proxy := 3
define FUZZ_RUN
	@mkdir -p $(TB)/fuzz/corpus_$(1) $(TB)/fuzz/findings; \
	secs=$$(( $(2) )); [ $$secs -ge 1 ] || secs=1; \
	echo "--- fuzz $(1) for $${secs}s"; \
	log=$(TB)/fuzz/last_$(1).log; \
	$(TB)/fuzz/fuzz_$(1) -max_total_time=$$secs -timeout=10 -rss_limit_mb=2048 \
	  -print_final_stats=1 -artifact_prefix=$(TB)/fuzz/findings/$(1)- \
	  $(TB)/fuzz/corpus_$(1) $(FUZZ_SEEDS_$(1)) > $$log 2>&1; rc=$$?; \
	grep -E '^==[0-9]+==ERROR|^SUMMARY|property failed' $$log; \
	awk -v t=$(1) -v s=$$secs '/stat::average_exec_per_sec/ {e=$$2} \
	  /stat::number_of_executed_units/ {n=$$2} /stat::new_units_added/ {u=$$2} \
	  END {printf "fuzz %s: %s execs/s (%s runs in %ss, %s new units)\n", t, e, n, s, u}' $$log; \
	if [ $$rc -ne 0 ]; then tail -n 40 $$log; exit 1; fi
endef
test-fuzz-short: $(FUZZ_TARGETS:%=$(TB)/fuzz/fuzz_%)
	$(call FUZZ_RUN,json,$(FUZZ_SECONDS) * $(FUZZ_SHARE_json) / 60)
	$(call FUZZ_RUN,rules,$(FUZZ_SECONDS) * $(FUZZ_SHARE_rules) / 60)
	$(call FUZZ_RUN,http,$(FUZZ_SECONDS) * $(FUZZ_SHARE_http) / 60)
	$(call FUZZ_RUN,yaml,$(FUZZ_SECONDS) * $(FUZZ_SHARE_yaml) / 60)
	$(call FUZZ_RUN,watch,$(FUZZ_SECONDS) * $(FUZZ_SHARE_watch) / 60)
	$(call FUZZ_RUN,sandbox,$(FUZZ_SECONDS) * $(FUZZ_SHARE_sandbox) / 60)
	$(call FUZZ_RUN,kube,$(FUZZ_SECONDS) * $(FUZZ_SHARE_kube) / 60)
	$(call FUZZ_RUN,kubeconfig,$(FUZZ_SECONDS) * $(FUZZ_SHARE_kubeconfig) / 60)
	$(call FUZZ_RUN,proxy,$(FUZZ_SECONDS) * $(FUZZ_SHARE_proxy) / 60)
	$(call FUZZ_RUN,h2,$(FUZZ_SECONDS) * $(FUZZ_SHARE_h2) / 60)
	$(call FUZZ_RUN,hpack,$(FUZZ_SECONDS) * $(FUZZ_SHARE_hpack) / 60)
	$(call FUZZ_RUN,protobuf,$(FUZZ_SECONDS) * $(FUZZ_SHARE_protobuf) / 60)
	$(call FUZZ_RUN,ws,$(FUZZ_SECONDS) * $(FUZZ_SHARE_ws) / 60)
$(FUZZ_TARGETS:%=fuzz-%): fuzz-%: $(TB)/fuzz/fuzz_%
	$(call FUZZ_RUN,$*,$(FUZZ_SECONDS))

# --- the C examples of the README and of the header's opening compile; the -----
# quick start in both is examples/quickstart.c (which test-kube-cluster runs)
test-readme:
	@tools/readme_examples.sh README.md $(TB)/readme examples/quickstart.c
	@tools/readme_examples.sh agentsandbox.h $(TB)/readme-header examples/quickstart.c

# --- the header documents what it declares: a comment on every public
# declaration, every log record id listed, every banner in the table of
# contents (tools/check_docs.py says which declaration or banner lacks it)
.PHONY: test-docs
TEST_TIERS += test-docs
test-docs:
	@python3 tools/check_docs.py agentsandbox.h
	@python3 tests/check_docs_test.py agentsandbox.h $(TB)/check-docs

# --- benchmark ---------------------------------------------------------------------
$(TB)/bench_json: tests/bench/bench_json.c $(HDR) $(ORACLE_HDRS) $(JSMN_OBJS)
	@mkdir -p $(@D)
	$(CC) -std=c99 -O2 -DNDEBUG -Wno-unused-function $< $(JSMN_OBJS) -o $@ $(LINK)
ALL_TARGETS += $(TB)/bench_json
bench-json: $(TB)/bench_json
	@$(TB)/bench_json

# --- HTTP/TLS against real peers, with mbedTLS 2.28 (Debian) and 3.6 -------
# (MBEDTLS3_* and the peers come from tests/http/rules.mk.)
$(TB)/asan/test_http_peers: tests/test_http_peers.c $(TEST_DEPS)
	@mkdir -p $(@D)
	$(CLANG) -std=c11 -O1 -g $(SAN) $(CFLAGS_WARN) $< -o $@ $(LINK)
$(TB)/asan3/test_http_peers: tests/test_http_peers.c $(TEST_DEPS) | mbedtls3
	@mkdir -p $(@D)
	$(CLANG) -std=c11 -O1 -g $(SAN) $(CFLAGS_WARN) $(MBEDTLS3_CFLAGS) $< -o $@ \
	  $(MBEDTLS3_LIBS) -lm -pthread
$(TB)/cxx3/test_http: tests/test_http.c $(TEST_DEPS) | mbedtls3
	@mkdir -p $(@D)
	$(CXX) -x c++ -std=c++11 $(OPT) $(CFLAGS_WARN) $(MBEDTLS3_CFLAGS) $< -x none -o $@ \
	  $(MBEDTLS3_LIBS) -pthread
ALL_TARGETS += $(TB)/asan/test_http_peers

.PHONY: test-http-peers
TEST_TIERS += test-http-peers
test-http-peers: $(TB)/asan/test_http_peers $(TB)/asan3/test_http_peers $(TB)/cxx3/test_http
	@echo "--- cxx3/test_http (mbedTLS 3.6, C++)"; $(TB)/cxx3/test_http | tail -1
	@tests/http/with-peers.sh $(HTTP_PEERS_DIR) sh -c '\
	  echo "--- asan/test_http_peers (mbedTLS 2.28)" && $(TB)/asan/test_http_peers && \
	  echo "--- asan3/test_http_peers (mbedTLS 3.6)" && $(TB)/asan3/test_http_peers'

$(TB)/bench_http: tests/bench/bench_http.c $(HDR)
	@mkdir -p $(@D)
	$(CC) -std=c99 -O2 -DNDEBUG $< -o $@ $(LINK)
ALL_TARGETS += $(TB)/bench_http
BENCH_TIERS += bench-http
.PHONY: bench-http
bench-http: $(TB)/bench_http
	@tests/http/with-peers.sh $(HTTP_PEERS_DIR) $(TB)/bench_http

# --- kubeconfig against kubectl (the oracle) -------------------------------------
$(TB)/asan/kubeconfig_dump: tests/kubeconfig_dump.c $(HDR)
	@mkdir -p $(@D)
	$(CLANG) -std=c11 -O1 -g $(SAN) $(CFLAGS_WARN) $< -o $@ $(LINK)
ALL_TARGETS += $(TB)/asan/kubeconfig_dump
.PHONY: test-kubeconfig
TEST_TIERS += test-kubeconfig
test-kubeconfig: $(TB)/asan/kubeconfig_dump
	@python3 tests/kubeconfig/oracle_test.py $(TB)/asan/kubeconfig_dump | grep -v '^ok '; \
	  exit $${PIPESTATUS[0]}

# --- YAML against PyYAML (Debian's python3-yaml, BaseLoader) -------------------
EXTRA_DEB_PACKAGES += python3-yaml
$(TB)/asan/yaml_dump: tests/yaml_dump.c $(HDR)
	@mkdir -p $(@D)
	$(CLANG) -std=c11 -O1 -g $(SAN) $(CFLAGS_WARN) $< -o $@ $(LINK)
ALL_TARGETS += $(TB)/asan/yaml_dump
.PHONY: test-yaml-oracle fuzz-yaml-oracle
TEST_TIERS += test-yaml-oracle
test-yaml-oracle: $(TB)/asan/yaml_dump
	@/usr/bin/python3 tests/yaml_oracle_test.py $(TB)/asan/yaml_dump tests/yaml/corpus \
	  tests/fuzz/seeds_yaml tests/kubeconfig/valid tests/kubeconfig/broken tests/kubeconfig/merge/1
# after make fuzz: everything the YAML fuzzer collected goes through PyYAML too
FUZZ_TIERS += fuzz-yaml-oracle
fuzz-yaml-oracle: $(TB)/asan/yaml_dump
	@/usr/bin/python3 tests/yaml_oracle_test.py $(TB)/asan/yaml_dump $(TB)/fuzz/corpus_yaml

# --- Kubernetes credentials (exec plugins, token files, basic auth) ------------
$(TB)/asan/test_kube_creds: tests/test_kube_creds.c $(TEST_DEPS)
	@mkdir -p $(@D)
	$(CLANG) -std=c11 -O1 -g $(SAN) $(CFLAGS_WARN) -D_GNU_SOURCE $< -o $@ $(LINK)
ALL_TARGETS += $(TB)/asan/test_kube_creds
# The client certificate rotation under concurrent watches (review finding
# R1), the pool grown beside keep-alive calls (R43) and the shared watch's
# pauses (R48) again under ThreadSanitizer.
$(TB)/tsan/test_kube_creds: tests/test_kube_creds.c $(TEST_DEPS)
	@mkdir -p $(@D)
	$(CLANG) -std=c11 -O1 -g -fsanitize=thread $(CFLAGS_WARN) -D_GNU_SOURCE $< -o $@ $(LINK)
ALL_TARGETS += $(TB)/tsan/test_kube_creds
.PHONY: test-kube-creds
TEST_TIERS += test-kube-creds
test-kube-creds: $(TB)/asan/test_kube_creds $(TB)/tsan/test_kube_creds
	@tests/http/with-peers.sh $(HTTP_PEERS_DIR) sh -c '\
	  echo "--- asan/test_kube_creds" && $(TB)/asan/test_kube_creds && \
	  echo "--- tsan/test_kube_creds client_certificates_rotate pool_grows shared_watch (ThreadSanitizer)" && \
	  TSAN_OPTIONS=halt_on_error=1 $(TB)/tsan/test_kube_creds client_certificates_rotate pool_grows \
	    shared_watch'

# Threads sharing one client, without a cluster, under ThreadSanitizer
# (review finding R11: the cached claim API version).
$(TB)/tsan/test_sdk: tests/test_sdk.c $(TEST_DEPS)
	@mkdir -p $(@D)
	$(CLANG) -std=c11 -O1 -g -fsanitize=thread $(CFLAGS_WARN) $< -o $@ $(LINK)
ALL_TARGETS += $(TB)/tsan/test_sdk
# The tracer's exporter thread beside the calls that queue its spans.
$(TB)/tsan/test_trace: tests/test_trace.c $(TEST_DEPS)
	@mkdir -p $(@D)
	$(CLANG) -std=c11 -O1 -g -fsanitize=thread $(CFLAGS_WARN) $< -o $@ $(LINK)
ALL_TARGETS += $(TB)/tsan/test_trace
.PHONY: test-tsan
TEST_TIERS += test-tsan
test-tsan: $(TB)/tsan/test_sdk $(TB)/tsan/test_trace
	@echo "--- tsan/test_sdk from_many_threads, cancel (a token triggered from another thread)"; \
	  TSAN_OPTIONS=halt_on_error=1 $(TB)/tsan/test_sdk from_many_threads cancel && \
	echo "--- tsan/test_trace (the OTLP exporter's thread)" && \
	  TSAN_OPTIONS=halt_on_error=1 $(TB)/tsan/test_trace

# --- the Kubernetes layer on the real local control plane --------------------
# Brings a cluster up (tools/localcluster), runs the tests, always tears it
# down. The kubeconfigs it writes are the credentials under test.
$(TB)/asan/test_kube_cluster: tests/test_kube_cluster.c $(TEST_DEPS)
	@mkdir -p $(@D)
	$(CLANG) -std=c11 -O1 -g $(SAN) $(CFLAGS_WARN) $< -o $@ $(LINK)
ALL_TARGETS += $(TB)/asan/test_kube_cluster
.PHONY: test-kube-cluster
TEST_TIERS += test-kube-cluster
$(TB)/asan/test_sdk_cluster: tests/test_sdk_cluster.c $(TEST_DEPS)
	@mkdir -p $(@D)
	$(CLANG) -std=c11 -O1 -g $(SAN) $(CFLAGS_WARN) $< -o $@ $(LINK)
ALL_TARGETS += $(TB)/asan/test_sdk_cluster $(TB)/asan/troubleshooting
# The kubectl-free port-forward (WebSocket, v4.channel.k8s.io) on the same
# cluster's v0.5.6 start: the router Service, RBAC, the error channel, the
# sandboxd pods.
$(TB)/asan/test_portforward_cluster: tests/test_portforward_cluster.c $(TEST_DEPS)
	@mkdir -p $(@D)
	$(CLANG) -std=c11 -O1 -g $(SAN) $(CFLAGS_WARN) $< -o $@ $(LINK)
ALL_TARGETS += $(TB)/asan/test_portforward_cluster
# test_sdk_cluster's cases that do not test kubectl itself, run again with
# ASB_CONNECT_MODE=native (the client's kubectl-free tunnel).
NATIVE_SDK_CASES := quick_start missing_template a_ready_timeout bad_labels a_second_client \
                    list_all a_64_mib files_go_up status_pod_name long_commands \
                    one_client_serves_threads set_based_label command_output probe_runtime \
                    a_batch_ends many_cycles
# The threaded case again under ThreadSanitizer: one client shared by
# threads that each drive their own sandbox.
$(TB)/tsan/test_sdk_cluster: tests/test_sdk_cluster.c $(TEST_DEPS)
	@mkdir -p $(@D)
	$(CLANG) -std=c11 -O1 -g -fsanitize=thread $(CFLAGS_WARN) $< -o $@ $(LINK)
ALL_TARGETS += $(TB)/tsan/test_sdk_cluster
# The Kubernetes layer and the sandbox SDK share one cluster start, in a
# state directory and pod range of their own, so a developer's cluster (or
# another tier's) is never the one stopped.
KC_STATE := $(abspath $(BUILD))/localcluster-kube
KC_ENV := LC_STATE_DIR=$(KC_STATE) LC_POD_CIDR=127.1.64.0/24
# The examples of the other connection modes run here too, each output
# checked: direct_url against the real router's loopback port, gateway
# through the Gateway gateway-setup.sh made, in_cluster as a pod would run
# it (a service account's token and CA, KUBERNETES_SERVICE_HOST/_PORT, no
# kubeconfig) talking to the sandbox's loopback pod IP.
KC_CLUSTER_PORT = $$(python3 -c "import json;print(json.load(open('$(KC_STATE)/cluster.json'))['ports']['$(1)'])")
test-kube-cluster: $(TB)/asan/test_kube_cluster $(TB)/asan/test_sdk_cluster \
                   $(TB)/asan/test_portforward_cluster \
                   $(TB)/tsan/test_sdk_cluster $(EX)/quickstart \
                   $(EX)/attach $(EX)/bigfile $(EX)/direct_url $(EX)/gateway $(EX)/in_cluster \
                   $(EX)/local_tunnel $(EX)/native_tunnel $(TB)/asan/troubleshooting
	@$(KC_ENV) $(MAKE) --no-print-directory cluster-up AGENT_SANDBOX=v0.4.6 > $(TB)/cluster-up.log 2>&1 || \
	  { tail -20 $(TB)/cluster-up.log; $(KC_ENV) $(MAKE) --no-print-directory cluster-down; exit 1; }; \
	export ASB_CLUSTER_KUBECONFIGS=$(KC_STATE)/kubeconfig; \
	ASB_GATEWAY_PORT=$$(tests/kube/gateway-setup.sh $(KC_STATE)) || \
	  { echo "gateway setup failed"; $(KC_ENV) $(MAKE) --no-print-directory cluster-down; exit 1; }; \
	export ASB_GATEWAY_PORT ASB_ROUTER_PORT=$(call KC_CLUSTER_PORT,router); \
	tests/kube/dns-fallback-setup.sh $(KC_STATE) || \
	  { echo "dns fallback setup failed"; $(KC_ENV) $(MAKE) --no-print-directory cluster-down; exit 1; }; \
	echo "--- test_sdk_cluster" && $(TB)/asan/test_sdk_cluster && \
	echo "--- test_sdk_cluster, the cases that are not about kubectl, in native-tunnel mode" && \
	ASB_CONNECT_MODE=native ASB_SOAK_CYCLES=50 $(TB)/asan/test_sdk_cluster $(NATIVE_SDK_CASES) && \
	echo "--- test_sdk_cluster one_client_serves_threads, gateway_mode (ThreadSanitizer)" && \
	TSAN_OPTIONS=halt_on_error=1 $(TB)/tsan/test_sdk_cluster one_client_serves_threads \
	  gateway_mode_skips_bad_addresses && \
	export KUBECONFIG=$(KC_STATE)/kubeconfig/admin.kubeconfig && \
	echo "--- examples/quickstart" && $(EX)/quickstart && \
	echo "--- examples/attach (two processes)" && claim=$$($(EX)/attach create) && \
	$(EX)/attach use "$$claim" && \
	echo "--- examples/bigfile" && $(EX)/bigfile 64 && \
	echo "--- examples/local_tunnel" && out=$$($(EX)/local_tunnel agent-sandbox-system) && \
	echo "$$out" && [ "$$(grep -c '^sandbox-claim-[0-9a-f]*: sandbox [12] through the tunnel$$' <<<"$$out")" = 2 ] && \
	echo "--- examples/native_tunnel (no kubectl)" && out=$$($(EX)/native_tunnel) && \
	echo "$$out" && grep -qx 'run: exit 0, stdout: hello without kubectl' <<<"$$out" && \
	echo "--- tools/cli end to end (agentsandbox, tools/cli/tests/e2e.sh)" && \
	tools/cli/tests/e2e.sh $(CLI_BIN) && \
	echo "--- examples/direct_url" && out=$$($(EX)/direct_url "http://127.0.0.1:$$ASB_ROUTER_PORT") && \
	echo "$$out" && grep -qx 'run: exit 0, stdout: hello through the router URL' <<<"$$out" && \
	echo "--- static musl examples in an empty root (no /dev, no /etc; then the native tunnel, no kubectl)" && \
	tests/static/empty-root.sh $(KC_STATE) $(ST) && \
	echo "--- examples/gateway" && out=$$($(EX)/gateway asb-gw default "$$ASB_GATEWAY_PORT") && \
	echo "$$out" && grep -qx 'run: exit 0, stdout: hello through the gateway' <<<"$$out" && \
	echo "--- examples/in_cluster (as a pod: service account, pod IP)" && \
	apiport=$$(tests/kube/serviceaccount-setup.sh $(KC_STATE) $(KC_STATE)/serviceaccount) && \
	out=$$(env -u KUBECONFIG KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=$$apiport \
	       $(EX)/in_cluster python-sandbox-template $(KC_STATE)/serviceaccount) && \
	echo "$$out" && ip=$$(sed -n 's/^sandbox .* at pod IP \([0-9.]*\), no router$$/\1/p' <<<"$$out") && \
	python3 -c "import ipaddress as a,json,sys; n=a.ip_network(json.load(open('$(KC_STATE)/cluster.json'))['pod_cidr']); \
	  i=a.ip_address(sys.argv[1]); sys.exit(0 if i in n and i.is_loopback else 'pod IP %s not in %s' % (i, n))" "$$ip" && \
	grep -qx 'run: exit 0, stdout: hello from the pod next door' <<<"$$out" && \
	grep -qx 'read back: no hops' <<<"$$out" && \
	echo "--- troubleshooting: the README quotes the library's first errors" && \
	python3 tests/troubleshooting_test.py $(TB)/asan/troubleshooting $(KC_STATE) README.md && \
	echo "--- test_kube_cluster (last: it restarts the apiserver)" && \
	$(TB)/asan/test_kube_cluster; rc=$$?; \
	$(KC_ENV) $(MAKE) --no-print-directory cluster-down >/dev/null 2>&1; [ $$rc = 0 ] || exit $$rc; \
	echo "--- test_sdk_cluster warm_pool, v1beta1 (agent-sandbox v0.5.6, v1beta1)"; \
	$(KC_ENV) $(MAKE) --no-print-directory cluster-up AGENT_SANDBOX=v0.5.6 > $(TB)/cluster-up.log 2>&1 || \
	  { tail -20 $(TB)/cluster-up.log; $(KC_ENV) $(MAKE) --no-print-directory cluster-down; exit 1; }; \
	echo "--- upstream Python SDK $(UPSTREAM_PY_SDK_VERSION) on agentsandbox-runtime behind the Go router (beside warm_pool)"; \
	KUBECONFIG=$(KC_STATE)/kubeconfig/admin.kubeconfig $(UPSTREAM_SDK_VENV)/bin/python \
	  tests/upstream/python_sdk_long_command.py > $(TB)/python-sdk.log 2>&1 & pypid=$$!; \
	ASB_AGENT_SANDBOX=v0.5.6 $(TB)/asan/test_sdk_cluster warm_pool v1beta1; rc=$$?; \
	wait $$pypid; pyrc=$$?; cat $(TB)/python-sdk.log; [ $$pyrc = 0 ] || rc=1; \
	echo "--- test_sdk_cluster warm_pool, v1beta1 in native-tunnel mode"; \
	ASB_CONNECT_MODE=native ASB_AGENT_SANDBOX=v0.5.6 $(TB)/asan/test_sdk_cluster warm_pool v1beta1 || rc=1; \
	echo "--- test_portforward_cluster (no kubectl; the router, and sandboxd pods over HTTP/1.1 and HTTP/2)"; \
	ASB_CLUSTER_KUBECONFIGS=$(KC_STATE)/kubeconfig $(TB)/asan/test_portforward_cluster || rc=1; \
	echo "--- static musl binaries in an empty root through the native tunnel (v1beta1: the router's and the sandboxd pool)"; \
	tests/static/empty-root.sh $(KC_STATE) $(ST) --native python-sandbox-warmpool sandboxd-warmpool || rc=1; \
	echo "--- examples/quickstart pool:python-sandbox-warmpool (v0.5.6 claims from a warm pool)"; \
	KUBECONFIG=$(KC_STATE)/kubeconfig/admin.kubeconfig $(EX)/quickstart pool:python-sandbox-warmpool || rc=1; \
	echo "--- tools/cli end to end on v1beta1 (tools/cli/tests/e2e-v1beta1.sh)"; \
	KUBECONFIG=$(KC_STATE)/kubeconfig/admin.kubeconfig tools/cli/tests/e2e-v1beta1.sh $(CLI_BIN) || rc=1; \
	$(KC_ENV) $(MAKE) --no-print-directory cluster-down >/dev/null 2>&1; exit $$rc

# make demo: the quick start against a local cluster built and started here.
# It says what it does; the cluster is stopped at the end unless KEEP=1,
# which leaves it up and prints how to use it (never a kubeconfig for a
# cluster that is gone).
DEMO_STATE = $${LC_STATE_DIR:-$(abspath $(BUILD))/localcluster}
DEMO_EXAMPLES := $(EX)/quickstart $(EX)/attach $(EX)/bigfile $(EX)/local_tunnel $(EX)/direct_url
# The first command on a fresh machine: kubectl checked, the Debian
# packages (mbedTLS among them) installed before anything compiles (not
# deps-extra: what only the tests need), then the cluster's components
# built with progress lines, then the start, quietly, into a log.
.PHONY: demo demo-run
demo:
	@command -v kubectl >/dev/null || { echo "demo: kubectl is not on PATH: the quick start's tunnel"; \
	  echo "demo: and the local cluster's set-up use it; install kubectl, then run make demo again"; exit 1; }
	@$(MAKE) --no-print-directory deps-debian
	@$(MAKE) --no-print-directory demo-run
demo-run: $(DEMO_EXAMPLES)
	@echo "demo: building a local Kubernetes with agent-sandbox v0.4.6 (the first time from Go"; \
	echo "demo: modules into ~/.cache/agentsandbox: about 15 minutes, progress below)"; \
	$(MAKE) --no-print-directory cluster-build || exit 1; \
	echo "demo: starting it on 127.0.0.1 (log in $(BUILD)/demo-cluster-up.log)"; \
	$(MAKE) --no-print-directory cluster-up AGENT_SANDBOX=v0.4.6 > $(BUILD)/demo-cluster-up.log 2>&1 || \
	  { tail -20 $(BUILD)/demo-cluster-up.log; echo "demo: the cluster did not start; stopping what did"; \
	    $(MAKE) --no-print-directory cluster-down >/dev/null 2>&1; exit 1; }; \
	state=$(DEMO_STATE); \
	echo "demo: cluster up; running examples/quickstart.c (create a sandbox, run a command, write"; \
	echo "demo: a file, read it back, delete the sandbox):"; \
	KUBECONFIG=$$state/kubeconfig/admin.kubeconfig $(EX)/quickstart; rc=$$?; \
	[ $$rc = 0 ] && echo "demo: the quick start worked" || echo "demo: the quick start FAILED (exit $$rc)"; \
	if [ "$(KEEP)" = 1 ]; then \
	  router=$$(python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['ports']['router'])" $$state/cluster.json); \
	  echo "demo: the cluster is still running (KEEP=1). Try the other examples against it:"; \
	  echo "    export KUBECONFIG=$$state/kubeconfig/admin.kubeconfig"; \
	  echo "    $(EX)/quickstart                          # again"; \
	  echo "    $(EX)/attach create                       # then: $(EX)/attach use <claim>"; \
	  echo "    $(EX)/bigfile 64                          # 64 MiB up and down, flat memory"; \
	  echo "    $(EX)/local_tunnel agent-sandbox-system   # the tunnel's settings spelled out"; \
	  echo "    $(EX)/direct_url http://127.0.0.1:$$router   # the router's own port, no kubectl"; \
	  echo "    kubectl get sandboxclaims,sandboxes -A"; \
	  echo "demo: when done: make cluster-down"; \
	else \
	  $(MAKE) --no-print-directory cluster-down >/dev/null 2>&1; \
	  echo "demo: cluster stopped. To keep it running and try the other examples against it:"; \
	  echo "    make demo KEEP=1"; \
	fi; exit $$rc

$(TB)/bench_kube: tests/bench/bench_kube.c $(HDR)
	@mkdir -p $(@D)
	$(CC) -std=c99 -O2 -DNDEBUG $< -o $@ $(LINK)
ALL_TARGETS += $(TB)/bench_kube
BENCH_TIERS += bench-kube
.PHONY: bench-kube
bench-kube: $(TB)/bench_kube
	@$(KC_ENV) $(MAKE) --no-print-directory cluster-up AGENT_SANDBOX=v0.4.6 > $(TB)/cluster-up.log 2>&1 || \
	  { tail -20 $(TB)/cluster-up.log; $(KC_ENV) $(MAKE) --no-print-directory cluster-down; exit 1; }; \
	ASB_CLUSTER_KUBECONFIGS=$(KC_STATE)/kubeconfig $(TB)/bench_kube; rc=$$?; \
	$(KC_ENV) $(MAKE) --no-print-directory cluster-down >/dev/null 2>&1; exit $$rc

# --- the sandboxd runtime against the real sandboxd, on loopback (issue 15) ---
# sandboxd is built unmodified from the pinned module by the local cluster's
# build (cached in ~/.cache/agentsandbox) and run here as a sidecar's
# neighbour would see it (ASB_CONNECT_IN_POD); no cluster. ASan+UBSan, C++,
# and ThreadSanitizer (stdin typed on one thread while another reads).
SANDBOXD_VERSION := $(shell sed -n 's/^SANDBOXD_VERSION=//p' tools/localcluster/versions.env)
SANDBOXD_BIN := $(or $(AGENTSANDBOX_CACHE),$(HOME)/.cache/agentsandbox)/sandboxd-$(SANDBOXD_VERSION)/sandboxd
$(TB)/tsan/test_sandboxd: tests/test_sandboxd.c $(TEST_DEPS)
	@mkdir -p $(@D)
	$(CLANG) -std=c11 -O1 -g -fsanitize=thread $(CFLAGS_WARN) $< -o $@ $(LINK)
SANDBOXD_TESTS := $(TB)/asan/test_sandboxd $(TB)/cxx/test_sandboxd $(TB)/tsan/test_sandboxd
ALL_TARGETS += $(SANDBOXD_TESTS)
.PHONY: test-sandboxd
TEST_TIERS += test-sandboxd
test-sandboxd: $(SANDBOXD_TESTS)
	@tools/localcluster/scripts/build.sh sandboxd > $(TB)/sandboxd-build.log 2>&1 || \
	  { tail -20 $(TB)/sandboxd-build.log; exit 1; }
	@set -e; for f in asan cxx tsan; do echo "--- $$f/test_sandboxd"; \
	  TSAN_OPTIONS=halt_on_error=1 ASB_SANDBOXD=$(SANDBOXD_BIN) $(TB)/$$f/test_sandboxd; done
