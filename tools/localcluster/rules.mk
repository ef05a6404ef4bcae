# tools/localcluster: a real local Kubernetes control plane with the
# agent-sandbox controller, built from Go modules (see README.md here).
#
#   make cluster-build                       build what is missing into ~/.cache/agentsandbox
#   make cluster-up [AGENT_SANDBOX=v0.4.6|v0.5.6]
#                                            start it; last line: export KUBECONFIG=...
#   make cluster-down                        stop everything it started, remove state
#   make cluster-status                      what runs
#   make cluster-e2e                         build, then for each release: up, proof tests, down

LC_DIR        := tools/localcluster
LC_PYTHON     ?= /usr/bin/python3
AGENT_SANDBOX ?= v0.4.6
LC_RELEASES   ?= v0.4.6 v0.5.6
# The runtime server the pod runner starts in each sandbox pod. Point
# LC_RUNTIME_BIN elsewhere to skip building the project's own.
LC_RUNTIME_BIN ?= $(BUILD)/runtime/agentsandbox-runtime
export LC_RUNTIME_BIN := $(abspath $(LC_RUNTIME_BIN))

EXTRA_DEB_PACKAGES += python3-yaml openssl curl iproute2
# sandboxd pods: kwok relays each port-forward connection into the pod's
# network namespace (pod-relay.sh: nsenter from util-linux, socat).
EXTRA_DEB_PACKAGES += socat util-linux
# The e2e tier: from a clean clone with empty Go caches it builds everything
# (about 14 min on this 2-core machine), then runs both releases (about 1 min).
TEST_TIERS += cluster-e2e

.PHONY: cluster-build cluster-up cluster-down cluster-status cluster-e2e cluster-runtime

cluster-build:
	@$(LC_DIR)/scripts/build.sh

# Build the runtime only when the default (the project's own) is used.
cluster-runtime:
	@if [ "$(LC_RUNTIME_BIN)" = "$(abspath $(BUILD)/runtime/agentsandbox-runtime)" ]; then \
	  $(MAKE) --no-print-directory $(BUILD)/runtime/agentsandbox-runtime; fi

cluster-up: cluster-build cluster-runtime
	@$(LC_PYTHON) $(LC_DIR)/lc.py up --agent-sandbox $(AGENT_SANDBOX)

cluster-down:
	@$(LC_PYTHON) $(LC_DIR)/lc.py down

cluster-status:
	@$(LC_PYTHON) $(LC_DIR)/lc.py status

# The cluster DNS on the wire first (no cluster needed), then the real thing.
EXTRA_DEB_PACKAGES += python3-dnspython
cluster-e2e: cluster-build cluster-runtime
	@mkdir -p $(BUILD); echo "--- cluster DNS against dnspython"; \
	  if $(LC_PYTHON) $(LC_DIR)/tests/test_clusterdns.py > $(BUILD)/clusterdns.log 2>&1; \
	  then tail -1 $(BUILD)/clusterdns.log; else cat $(BUILD)/clusterdns.log; exit 1; fi
	@LC_PYSDK_PYTHON=$(abspath $(UPSTREAM_SDK_VENV))/bin/python $(LC_DIR)/tests/run-e2e.sh $(LC_RELEASES)
