# Issue 15 end to end: the sandboxd runtime against the real sandboxd
# (agent-sandbox v0.5.6, built unmodified; tools/localcluster runs it in
# each pod of the sandboxd template, in a network namespace of its own).
#
#   make test-sandboxd-cluster    tests/test_sandboxd_cluster.c (ASan; the
#                                 1 GiB flat-memory case from the plain build,
#                                 where RSS means what it says) and
#                                 examples/sandboxd_session, on a v0.5.6 cluster;
#                                 with 100 sandboxes driven in native-tunnel
#                                 mode (no kubectl, no child process)
#   make bench-sandboxd           ours vs the Python SDK 1.0.8 [grpc] on the
#                                 same sandboxd, same run
#
# Each has its own cluster (state directory and pod range apart from the
# other tiers' and the default cluster), brought up and always taken down.
# (Read after tests/rules.mk: TB, SAN, LINK and KC_* are set.)

SBD_STATE    := $(abspath $(BUILD))/localcluster-sandboxd
# Room for the 100 sandboxes of the native-tunnel case beside the warm
# pools, the router and pods of earlier cases still being deleted.
SBD_ENV      := LC_STATE_DIR=$(SBD_STATE) LC_POD_CIDR=127.1.96.0/24 LC_MAX_PODS=200
SBD_BENCH_STATE := $(abspath $(BUILD))/localcluster-bench-sandboxd
SBD_BENCH_ENV   := LC_STATE_DIR=$(SBD_BENCH_STATE) LC_POD_CIDR=127.1.224.0/24

# Cases run from the ASan build (by name substring) and from the plain one.
SBD_ASAN_CASES  := handle_suite files_go_up 10000_lines while_the_process_runs through_cat \
                   held_by_a_full_pipe sigint_ends pty_process non_empty_directory killed_pod_tunnel n_sandboxes \
                   pod_named_like_the_router
SBD_PLAIN_CASES := 1_gib
# test_sdk_cluster's handle cases again, on the sandboxd warm pool (auto
# runtime): issue 15's "the whole existing handle suite on a sandboxd
# template", for the cases that are not about the router or kubectl.
SBD_SDK_CASES := quick_start a_second_client list_all a_64_mib files_go_up status_pod_name \
                 command_output long_commands one_client_serves_threads many_cycles
# Last, on its own: 100 sandboxes leave the pod runner 100 pods to stop
# and the pools to refill (the case waits for that before it ends).
SBD_NATIVE_CASES := 100_sandboxd_sandboxes

ALL_TARGETS += $(TB)/asan/test_sandboxd_cluster $(TB)/c/test_sandboxd_cluster

.PHONY: test-sandboxd-cluster
TEST_TIERS += test-sandboxd-cluster
test-sandboxd-cluster: $(TB)/asan/test_sandboxd_cluster $(TB)/c/test_sandboxd_cluster \
                       $(TB)/asan/test_sdk_cluster cluster-build cluster-runtime
	@lc="$(LC_PYTHON) $(LC_DIR)/lc.py"; export $(SBD_ENV); \
	trap '$$lc down >/dev/null 2>&1' EXIT; $$lc down >/dev/null 2>&1; \
	$$lc up --agent-sandbox v0.5.6 > $(TB)/sandboxd-cluster-up.log 2>&1 || \
	  { tail -20 $(TB)/sandboxd-cluster-up.log; exit 1; }; \
	export ASB_CLUSTER_KUBECONFIGS=$(SBD_STATE)/kubeconfig ASB_LC="$$lc"; rc=0; \
	echo "--- test_sandboxd_cluster (ASan)"; \
	$(TB)/asan/test_sandboxd_cluster $(SBD_ASAN_CASES) || rc=1; \
	echo "--- test_sdk_cluster's handle cases on the sandboxd pool (ASan)"; \
	ASB_TEST_POOL=sandboxd-warmpool ASB_SOAK_CYCLES=30 \
	  $(TB)/asan/test_sdk_cluster $(SBD_SDK_CASES) || rc=1; \
	echo "--- test_sandboxd_cluster in_cluster (ASan; after a template with a Service, its pool"; \
	echo "    of one and an account that may not read Sandboxes: tests/kube/dns-fallback-setup.sh)"; \
	tests/kube/dns-fallback-setup.sh $(SBD_STATE) sandboxd-template asb-sandboxd-service-template \
	  asb-sandboxd-service-warmpool || { echo "dns fallback setup failed"; rc=1; }; \
	$(TB)/asan/test_sandboxd_cluster in_cluster || rc=1; \
	echo "--- test_sandboxd_cluster (plain build: peak RSS)"; \
	$(TB)/c/test_sandboxd_cluster $(SBD_PLAIN_CASES) || rc=1; \
	$(SBD_EXAMPLE) \
	echo "--- test_sandboxd_cluster, 100 sandboxes in native-tunnel mode (ASan)"; \
	$(TB)/asan/test_sandboxd_cluster $(SBD_NATIVE_CASES) || rc=1; \
	exit $$rc

# The example, interactive style, fed from a pipe: sh gets the lines, the
# output streams back, the exit status of `exit 3` is reported.
SBD_SESSION_IN := echo hello from sh\necho to stderr >&2\ncd sub 2>/dev/null || mkdir sub\nls\nexit 3\n
test-sandboxd-cluster: $(EX)/sandboxd_session
test-sandboxd-cluster: SBD_EXAMPLE = \
	echo "--- examples/sandboxd_session (sh fed from a pipe)"; \
	out=$$(printf '$(SBD_SESSION_IN)' | KUBECONFIG=$(SBD_STATE)/kubeconfig/admin.kubeconfig \
	       $(EX)/sandboxd_session 2>$(TB)/sandboxd_session.err); erc=$$?; \
	echo "$$out"; cat $(TB)/sandboxd_session.err; \
	{ [ $$erc = 0 ] && [ "$$out" = "$$(printf 'hello from sh\nsub')" ] && \
	  grep -qx 'to stderr' $(TB)/sandboxd_session.err && \
	  grep -qx 'sh exited with 3' $(TB)/sandboxd_session.err; } || \
	  { echo "examples/sandboxd_session printed the wrong thing (exit $$erc)"; rc=1; };

# --- make bench-sandboxd -------------------------------------------------------
SBD_BENCH_DIR       := $(BUILD)/bench-sandboxd
SBD_BENCH_BIN       := $(TB)/bench_sandboxd
SBD_BENCH_BASELINE  = python-k8s-agent-sandbox[grpc]-$(UPSTREAM_PY_SDK_VERSION)
SBD_BENCH_WORKLOADS ?= 3
SBD_BENCH_RUNS      ?= 200
$(SBD_BENCH_BIN): tests/bench/bench_sandboxd.c tests/bench/bench_file.h agentsandbox.h
	@mkdir -p $(@D)
	$(CC) -std=c99 -O2 -DNDEBUG $(CFLAGS_WARN) $< -o $@ $(LINK)
ALL_TARGETS += $(SBD_BENCH_BIN)

BENCH_TIERS += bench-sandboxd
.PHONY: bench-sandboxd
# One v0.5.6 cluster; workload processes of both sides in turns (same load);
# the report; the cluster always goes down. The Python venv's prerequisite
# is added in tests/upstream/rules.mk (read after this file).
bench-sandboxd: $(SBD_BENCH_BIN) cluster-build cluster-runtime
	@lc="$(LC_PYTHON) $(LC_DIR)/lc.py"; export $(SBD_BENCH_ENV); \
	out=$(SBD_BENCH_DIR)/results; rm -rf $$out; mkdir -p $$out; \
	trap '$$lc down >/dev/null 2>&1' EXIT; $$lc down >/dev/null 2>&1; \
	$$lc up --agent-sandbox v0.5.6 > $$out/cluster-up.log 2>&1 || \
	  { tail -20 $$out/cluster-up.log; exit 1; }; \
	export KUBECONFIG=$(SBD_BENCH_STATE)/kubeconfig/admin.kubeconfig; \
	for i in $$(seq $(SBD_BENCH_WORKLOADS)); do \
	  $(SBD_BENCH_BIN) workload $(SBD_BENCH_RUNS) >> $$out/ours.txt 2>> $$out/ours.err || \
	    { echo "bench-sandboxd: our workload failed:"; tail -20 $$out/ours.err; exit 1; }; \
	  $(UPSTREAM_SDK_VENV)/bin/python tests/bench/bench_sandboxd.py workload $(SBD_BENCH_RUNS) \
	    >> $$out/theirs.txt 2>> $$out/theirs.err || \
	    { echo "bench-sandboxd: the Python workload failed:"; tail -20 $$out/theirs.err; exit 1; }; \
	done; \
	/usr/bin/python3 tests/bench/bench_sandboxd.py report $$out/ours.txt $$out/theirs.txt \
	  '$(SBD_BENCH_BASELINE)'

# --- make bench-native-sdk -----------------------------------------------------
# Issue 17, the kubectl-free tunnel against the Python SDK 1.0.8 [grpc] on
# sandboxd sandboxes (tests/bench/bench_native_sdk.c and .py), one v0.5.6
# cluster of its own, always taken down:
#  - process start to first result on an existing claim: a claim made
#    first, then NSDK_BENCH_STARTS rounds of three fresh processes that
#    attach to it and run `true` (ours native, ours through kubectl, the
#    Python SDK), after one untimed round (caches warm for all three);
#  - NSDK_BENCH_COUNT sandboxes open at once from one process, ours native
#    then the Python SDK's (one kubectl per pod): the client's RSS, its
#    child processes and their RSS.
# A /23 and room for 300 pods: one side's pods may still be going while
# the other's come.
NSDK_BENCH_STATE    := $(abspath $(BUILD))/localcluster-bench-native-sdk
NSDK_BENCH_ENV      := LC_STATE_DIR=$(NSDK_BENCH_STATE) LC_POD_CIDR=127.1.160.0/23 LC_MAX_PODS=300
NSDK_BENCH_DIR      := $(BUILD)/bench-native-sdk
NSDK_BENCH_BIN      := $(TB)/bench_native_sdk
NSDK_BENCH_BASELINE  = python-k8s-agent-sandbox[grpc]-$(UPSTREAM_PY_SDK_VERSION)
NSDK_BENCH_STARTS   ?= 5
NSDK_BENCH_COUNT    ?= 100
$(NSDK_BENCH_BIN): tests/bench/bench_native_sdk.c agentsandbox.h
	@mkdir -p $(@D)
	$(CC) -std=c99 -O2 -DNDEBUG $(CFLAGS_WARN) $< -o $@ $(LINK)
ALL_TARGETS += $(NSDK_BENCH_BIN)

BENCH_TIERS += bench-native-sdk
.PHONY: bench-native-sdk
# (the Python venv's prerequisite is added in tests/upstream/rules.mk)
bench-native-sdk: $(NSDK_BENCH_BIN) cluster-build cluster-runtime
	@lc="$(LC_PYTHON) $(LC_DIR)/lc.py"; export $(NSDK_BENCH_ENV); \
	out=$(NSDK_BENCH_DIR)/results; rm -rf $$out; mkdir -p $$out; \
	py="$(UPSTREAM_SDK_VENV)/bin/python tests/bench/bench_native_sdk.py"; \
	trap '$$lc down >/dev/null 2>&1' EXIT; $$lc down >/dev/null 2>&1; \
	$$lc up --agent-sandbox v0.5.6 > $$out/cluster-up.log 2>&1 || \
	  { tail -20 $$out/cluster-up.log; exit 1; }; \
	export KUBECONFIG=$(NSDK_BENCH_STATE)/kubeconfig/admin.kubeconfig; \
	claim=$$($(NSDK_BENCH_BIN) claim 2>> $$out/ours.err) || \
	  { echo "bench-native-sdk: the claim failed:"; tail -20 $$out/ours.err; exit 1; }; \
	for i in $$(seq 0 $(NSDK_BENCH_STARTS)); do \
	  [ $$i = 0 ] && o=$$out/warm-up.txt t=$$out/warm-up.txt || o=$$out/ours.txt t=$$out/theirs.txt; \
	  $(NSDK_BENCH_BIN) first native $$claim $$(date +%s%N) >> $$o 2>> $$out/ours.err || \
	    { echo "bench-native-sdk: our native first result failed:"; tail -20 $$out/ours.err; exit 1; }; \
	  $(NSDK_BENCH_BIN) first kubectl $$claim $$(date +%s%N) >> $$o 2>> $$out/ours.err || \
	    { echo "bench-native-sdk: our kubectl first result failed:"; tail -20 $$out/ours.err; exit 1; }; \
	  $$py first $$claim $$(date +%s%N) >> $$t 2>> $$out/theirs.err || \
	    { echo "bench-native-sdk: the Python first result failed:"; tail -20 $$out/theirs.err; exit 1; }; \
	done; \
	$(NSDK_BENCH_BIN) delete $$claim 2>> $$out/ours.err; \
	$(NSDK_BENCH_BIN) hundred $(NSDK_BENCH_COUNT) >> $$out/ours.txt 2>> $$out/ours.err || \
	  { echo "bench-native-sdk: our $(NSDK_BENCH_COUNT) sandboxes failed:"; tail -20 $$out/ours.err; exit 1; }; \
	$$py hundred $(NSDK_BENCH_COUNT) 16 >> $$out/theirs.txt 2>> $$out/theirs.err || \
	  { echo "bench-native-sdk: the Python $(NSDK_BENCH_COUNT) sandboxes failed:"; \
	    tail -20 $$out/theirs.err; exit 1; }; \
	/usr/bin/python3 tests/bench/bench_native_sdk.py report $$out/ours.txt $$out/theirs.txt \
	  '$(NSDK_BENCH_BASELINE)'
