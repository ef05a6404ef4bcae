# bench-sdk: this library against the upstream Python SDK (PyPI
# k8s-agent-sandbox) on the same local cluster, in one run:
#   make bench-sdk
# Both sides use the same cluster, template (python-sandbox-template in
# `default`) and connection mode (the local tunnel: kubectl port-forward to
# svc/sandbox-router-svc in agent-sandbox-system). Each side measures itself
# in its own processes; bench_sdk.py report prints the comparison.
#
# The Python SDK release: 0.4.6 is the newest that speaks agent-sandbox
# v0.4.x (v1alpha1 claims naming a template with sandboxTemplateRef, router
# headers X-Sandbox-ID/Namespace/Port); 0.5.x and 1.0.x send v1beta1, which
# a v0.4.6 controller does not serve. It lives in a venv under build/,
# installed from PyPI by the target below; nothing of it is committed.

BENCH_PY_SDK_VERSION := 0.4.6
BENCH_PY_BASELINE    := python-k8s-agent-sandbox-$(BENCH_PY_SDK_VERSION)
BENCH_SDK_DIR        := $(BUILD)/bench-sdk
BENCH_SDK_VENV       := $(BENCH_SDK_DIR)/venv
BENCH_SDK_STAMP      := $(BENCH_SDK_VENV)/.k8s-agent-sandbox-$(BENCH_PY_SDK_VERSION)
# Its own cluster: state directory and pod range apart from the default
# cluster (build/localcluster, 127.1.0.0/24), cluster-e2e's
# (127.1.128.0/24) and test-kube-cluster's (127.1.64.0/24), so nobody's
# `make cluster-down` stops this one and no two pods share an address.
BENCH_SDK_STATE      := $(abspath $(BUILD))/localcluster-bench-sdk
BENCH_SDK_POD_CIDR   := 127.1.192.0/24
# Repetitions: workload processes per side (ours, theirs and the curl floor
# in turns; each does BENCH_SDK_RUNS run("true") calls on one sandbox and
# writes and reads 64 MiB three times: transfers through the tunnel vary
# by +-30% here, so one process's three are too few); rounds of creates
# (each round: one process per side, BENCH_SDK_CREATES creates in each);
# fresh processes started per side for the first result.
BENCH_SDK_WORKLOADS  ?= 3
BENCH_SDK_RUNS       ?= 200
BENCH_SDK_ROUNDS     ?= 8
BENCH_SDK_CREATES    ?= 3
BENCH_SDK_STARTS     ?= 5

EXTRA_DEB_PACKAGES += python3-venv

$(BENCH_SDK_STAMP):
	@mkdir -p $(BENCH_SDK_DIR)
	@rm -rf $(BENCH_SDK_VENV)
	/usr/bin/python3 -m venv $(BENCH_SDK_VENV)
	$(BENCH_SDK_VENV)/bin/pip install --quiet --disable-pip-version-check \
	  k8s-agent-sandbox==$(BENCH_PY_SDK_VERSION)
	@$(BENCH_SDK_VENV)/bin/pip freeze --disable-pip-version-check > $(BENCH_SDK_DIR)/pip-freeze.txt
	@touch $@

.PHONY: bench-sdk-venv
bench-sdk-venv: $(BENCH_SDK_STAMP)

# (This fragment is read before tests/rules.mk, so its TB, HDR and LINK
# are not set yet where a target is named; recipes may use them.)
BENCH_SDK_BIN := $(BUILD)/tests/bench_sdk
$(BENCH_SDK_BIN): tests/bench/bench_sdk.c tests/bench/bench_file.h agentsandbox.h
	@mkdir -p $(@D)
	$(CC) -std=c99 -O2 -DNDEBUG $(CFLAGS_WARN) $< -o $@ $(LINK)
ALL_TARGETS += $(BENCH_SDK_BIN)

BENCH_TIERS += bench-sdk
.PHONY: bench-sdk
# Cluster up (own state); the workload, ours, theirs, then the same calls
# with curl and no SDK (the floor of the path), in turns; creates and fresh
# starts alternated between the sides, so both meet the same load on a
# shared machine; the report. The cluster always goes down at the end.
# (lc.py is called directly, not through $(MAKE) cluster-up: a recipe line
# naming $(MAKE) runs even under `make -n`.)
bench-sdk: $(BENCH_SDK_BIN) $(BENCH_SDK_STAMP) cluster-build cluster-runtime
	@export LC_STATE_DIR=$(BENCH_SDK_STATE) LC_POD_CIDR=$(BENCH_SDK_POD_CIDR); \
	lc="$(LC_PYTHON) $(LC_DIR)/lc.py"; out=$(BENCH_SDK_DIR)/results; rm -rf $$out; mkdir -p $$out; \
	trap '$$lc down >/dev/null 2>&1' EXIT; \
	$$lc down >/dev/null 2>&1; \
	$$lc up --agent-sandbox v0.4.6 > $$out/cluster-up.log 2>&1 || \
	  { tail -20 $$out/cluster-up.log; exit 1; }; \
	export KUBECONFIG=$(BENCH_SDK_STATE)/kubeconfig/admin.kubeconfig; \
	for i in $$(seq $(BENCH_SDK_WORKLOADS)); do \
	  $(BENCH_SDK_BIN) workload $(BENCH_SDK_RUNS) >> $$out/ours.txt 2>> $$out/ours.err || \
	    { echo "bench-sdk: our workload failed:"; tail -20 $$out/ours.err; exit 1; }; \
	  $(BENCH_SDK_VENV)/bin/python tests/bench/bench_sdk.py workload $(BENCH_SDK_RUNS) \
	    >> $$out/theirs.txt 2>> $$out/theirs.err || \
	    { echo "bench-sdk: the Python workload failed:"; tail -20 $$out/theirs.err; exit 1; }; \
	  /usr/bin/python3 tests/bench/bench_sdk.py floor $(BENCH_SDK_RUNS) >> $$out/floor.txt \
	    2>> $$out/floor.err || \
	    { echo "bench-sdk: the curl floor failed:"; tail -20 $$out/floor.err; exit 1; }; \
	done; \
	for i in $$(seq $(BENCH_SDK_ROUNDS)); do \
	  $(BENCH_SDK_BIN) creates $(BENCH_SDK_CREATES) >> $$out/ours.txt 2>> $$out/ours.err || \
	    { echo "bench-sdk: our creates failed:"; tail -20 $$out/ours.err; exit 1; }; \
	  $(BENCH_SDK_VENV)/bin/python tests/bench/bench_sdk.py creates $(BENCH_SDK_CREATES) \
	    >> $$out/theirs.txt 2>> $$out/theirs.err || \
	    { echo "bench-sdk: the Python creates failed:"; tail -20 $$out/theirs.err; exit 1; }; \
	done; \
	for i in $$(seq $(BENCH_SDK_STARTS)); do \
	  $(BENCH_SDK_BIN) first $$(date +%s%N) >> $$out/ours.txt 2>> $$out/ours.err || \
	    { echo "bench-sdk: our first-result run failed:"; tail -20 $$out/ours.err; exit 1; }; \
	  $(BENCH_SDK_VENV)/bin/python tests/bench/bench_sdk.py first $$(date +%s%N) \
	    >> $$out/theirs.txt 2>> $$out/theirs.err || \
	    { echo "bench-sdk: the Python first-result run failed:"; tail -20 $$out/theirs.err; exit 1; }; \
	done; \
	/usr/bin/python3 tests/bench/bench_sdk.py report $$out/ours.txt $$out/theirs.txt $(BENCH_PY_BASELINE) \
	  $$out/floor.txt

# bench-native: the kubectl-free tunnel (ASB_CONNECT_NATIVE_TUNNEL) against
# kubectl port-forward (the local tunnel), the same run, alternating:
# run("true") latency and 64 MiB write + read (tests/bench/bench_native.c),
# on test-kube-cluster's cluster state (v0.4.6), always stopped after.
BENCH_NATIVE_BIN := $(BUILD)/tests/bench_native
$(BENCH_NATIVE_BIN): tests/bench/bench_native.c tests/bench/bench_file.h agentsandbox.h
	@mkdir -p $(@D)
	$(CC) -std=c99 -O2 -DNDEBUG $(CFLAGS_WARN) $< -o $@ $(LINK)
ALL_TARGETS += $(BENCH_NATIVE_BIN)
BENCH_TIERS += bench-native
.PHONY: bench-native
bench-native: $(BENCH_NATIVE_BIN)
	@$(KC_ENV) $(MAKE) --no-print-directory cluster-up AGENT_SANDBOX=v0.4.6 > $(BUILD)/tests/cluster-up.log 2>&1 || \
	  { tail -20 $(BUILD)/tests/cluster-up.log; $(KC_ENV) $(MAKE) --no-print-directory cluster-down; exit 1; }; \
	KUBECONFIG=$(KC_STATE)/kubeconfig/admin.kubeconfig BENCH_LC_PIDS=$(KC_STATE)/pids $(BENCH_NATIVE_BIN); rc=$$?; \
	$(KC_ENV) $(MAKE) --no-print-directory cluster-down >/dev/null 2>&1; exit $$rc
