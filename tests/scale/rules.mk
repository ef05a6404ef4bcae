# One client driving many sandboxes (issue 20, "Client at scale"), on a local
# control plane of its own: agent-sandbox v0.5.6, claims from the warm pool,
# a /22 pod range and a kwok node that takes 1000 pods (LC_MAX_PODS), so 500
# sandbox pods fit. State directory and address ranges apart from every other
# tier's; override SCALE_POD_CIDR / SCALE_SERVICE_CIDR to run it beside
# another cluster of yours.
#
#   make test-scale-cluster   500 creates from one client at once: all Ready,
#                             all deleted, no orphan claim, no leaked fd or
#                             thread, one namespaced watch on the apiserver
#   make bench-scale          create-to-ready of 500 and peak RSS: ours, the
#                             Python SDK 1.0.8 (thread pool of the same width)
#                             and kubectl apply + wait (the floor)

SCALE_STATE        := $(abspath $(BUILD))/localcluster-scale
SCALE_POD_CIDR     ?= 127.64.0.0/22
SCALE_SERVICE_CIDR ?= 127.65.0.0/24
SCALE_COUNT        ?= 500
SCALE_ENV = LC_STATE_DIR=$(SCALE_STATE) LC_POD_CIDR=$(SCALE_POD_CIDR) \
            LC_SERVICE_CIDR=$(SCALE_SERVICE_CIDR) LC_MAX_PODS=1000

$(TB)/asan/test_scale_cluster: tests/scale/test_scale_cluster.c $(TEST_DEPS)
	@mkdir -p $(@D)
	$(CLANG) -std=c11 -O1 -g $(SAN) $(CFLAGS_WARN) $< -o $@ $(LINK)
# The batch's threads, the shared watch's thread and the waiters' hand-off
# under ThreadSanitizer too (a smaller batch: TSan is slow)
$(TB)/tsan/test_scale_cluster: tests/scale/test_scale_cluster.c $(TEST_DEPS)
	@mkdir -p $(@D)
	$(CLANG) -std=c11 -O1 -g -fsanitize=thread $(CFLAGS_WARN) $< -o $@ $(LINK)
ALL_TARGETS += $(TB)/asan/test_scale_cluster $(TB)/tsan/test_scale_cluster

.PHONY: test-scale-cluster
TEST_TIERS += test-scale-cluster
# (lc.py directly, not $(MAKE) cluster-up: see tests/bench/rules.mk)
test-scale-cluster: $(TB)/asan/test_scale_cluster $(TB)/tsan/test_scale_cluster cluster-build \
                    cluster-runtime
	@export $(SCALE_ENV); lc="$(LC_PYTHON) $(LC_DIR)/lc.py"; \
	trap '$$lc down >/dev/null 2>&1' EXIT; \
	$$lc down >/dev/null 2>&1; t0=$$(date +%s); \
	$$lc up --agent-sandbox v0.5.6 > $(TB)/scale-cluster-up.log 2>&1 || \
	  { tail -20 $(TB)/scale-cluster-up.log; exit 1; }; \
	export ASB_CLUSTER_KUBECONFIGS=$(SCALE_STATE)/kubeconfig; \
	echo "--- tsan/test_scale_cluster (40 sandboxes, ThreadSanitizer)"; \
	ASB_SCALE_COUNT=40 TSAN_OPTIONS=halt_on_error=1 $(TB)/tsan/test_scale_cluster || exit 1; \
	echo "--- asan/test_scale_cluster ($(SCALE_COUNT) sandboxes)"; \
	ASB_SCALE_COUNT=$(SCALE_COUNT) $(TB)/asan/test_scale_cluster; rc=$$?; \
	echo "test-scale-cluster: $$(( $$(date +%s) - t0 )) s with the cluster's start and stop"; \
	exit $$rc

BENCH_SCALE_BIN := $(TB)/bench_scale
$(BENCH_SCALE_BIN): tests/bench/bench_scale.c $(HDR)
	@mkdir -p $(@D)
	$(CC) -std=c99 -O2 -DNDEBUG $(CFLAGS_WARN) $< -o $@ $(LINK)
ALL_TARGETS += $(BENCH_SCALE_BIN)

BENCH_TIERS += bench-scale
.PHONY: bench-scale
# One cluster, the three sides one after the other, the cluster settled
# (claims gone, only the warm pool's sandbox left) before each; a sampler
# reads the apiserver's watch count during each side. Always cluster-down.
bench-scale: $(BENCH_SCALE_BIN) upstream-sdk-venv cluster-build cluster-runtime
	@export $(SCALE_ENV); lc="$(LC_PYTHON) $(LC_DIR)/lc.py"; out=$(BUILD)/bench-scale; \
	rm -rf $$out; mkdir -p $$out; py=tests/bench/bench_scale.py; \
	trap '$$lc down >/dev/null 2>&1' EXIT; \
	$$lc down >/dev/null 2>&1; \
	$$lc up --agent-sandbox v0.5.6 > $$out/cluster-up.log 2>&1 || \
	  { tail -20 $$out/cluster-up.log; exit 1; }; \
	export KUBECONFIG=$(SCALE_STATE)/kubeconfig/admin.kubeconfig; \
	for side in ours python floor; do \
	  /usr/bin/python3 $$py settle || exit 1; \
	  /usr/bin/python3 $$py sampler $$out/$$side.watches & sp=$$!; \
	  case $$side in \
	    ours) $(BENCH_SCALE_BIN) $(SCALE_COUNT) $(SCALE_COUNT) b-ours > $$out/ours.txt 2> $$out/ours.err;; \
	    python) $(UPSTREAM_SDK_VENV)/bin/python $$py python $(SCALE_COUNT) $(SCALE_COUNT) b-py \
	              > $$out/python.txt 2> $$out/python.err;; \
	    floor) /usr/bin/python3 $$py floor $(SCALE_COUNT) b-floor > $$out/floor.txt 2> $$out/floor.err;; \
	  esac; rc=$$?; kill $$sp; wait $$sp; \
	  [ $$rc = 0 ] || { echo "bench-scale: the $$side side failed:"; tail -20 $$out/$$side.err; exit 1; }; \
	done; \
	/usr/bin/python3 $$py report $$out $(SCALE_COUNT) $(SCALE_COUNT) \
	  python-k8s-agent-sandbox-$(UPSTREAM_PY_SDK_VERSION)
