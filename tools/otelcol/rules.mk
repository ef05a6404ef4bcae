# tools/otelcol: the OpenTelemetry Collector the tracing tests talk to (the
# OTLP receiver and the file exporter, built from the pinned Go modules in
# this directory into ~/.cache/agentsandbox), and the test-otel tier: the
# SDK with tracing on against it and the local control plane (v0.5.6).
#
#   make otelcol      build it (cold: ~2-10 min on two cores); prints its path
#   make test-otel    the end-to-end tier (tests/otel/run-e2e.sh)

OTELCOL_DIR := tools/otelcol
# A pod and service range of the tier's own (override for a private run).
OTEL_POD_CIDR ?= 127.1.66.0/24
OTEL_SERVICE_CIDR ?= 127.2.66.0/24
OTEL_STATE := $(abspath $(BUILD))/otel-e2e

.PHONY: otelcol test-otel
otelcol:
	@$(OTELCOL_DIR)/build.sh

$(TB)/asan/otel_e2e: tests/otel/otel_e2e.c $(TEST_DEPS)
	@mkdir -p $(@D)
	$(CLANG) -std=c11 -O1 -g $(SAN) $(CFLAGS_WARN) $< -o $@ $(LINK)
ALL_TARGETS += $(TB)/asan/otel_e2e

TEST_TIERS += test-otel
test-otel: $(TB)/asan/otel_e2e cluster-build cluster-runtime
	@col=$$($(OTELCOL_DIR)/build.sh | tail -1) || exit 1; \
	LC_POD_CIDR=$(OTEL_POD_CIDR) LC_SERVICE_CIDR=$(OTEL_SERVICE_CIDR) \
	  tests/otel/run-e2e.sh "$$col" $(TB)/asan/otel_e2e $(OTEL_STATE)

# make bench-otel: run("true") with tracing off, on (exporting to the
# collector) and built without the tracer, interleaved in one process
# (tests/otel/bench_otel.c); the same collector and cluster setup.
BENCH_OTEL_RUNS ?= 2000
$(BUILD)/tests/bench_otel: tests/otel/bench_otel.c tests/otel/bench_otel_nt.c agentsandbox.h
	@mkdir -p $(@D)
	$(CC) -std=c99 -O2 -DNDEBUG $(CFLAGS_WARN) tests/otel/bench_otel.c tests/otel/bench_otel_nt.c \
	  -o $@ $(LINK)
ALL_TARGETS += $(BUILD)/tests/bench_otel
BENCH_TIERS += bench-otel
.PHONY: bench-otel
bench-otel: $(BUILD)/tests/bench_otel $(TB)/asan/otel_e2e cluster-build cluster-runtime
	@col=$$($(OTELCOL_DIR)/build.sh | tail -1) || exit 1; \
	LC_POD_CIDR=$(OTEL_POD_CIDR) LC_SERVICE_CIDR=$(OTEL_SERVICE_CIDR) \
	  tests/otel/run-e2e.sh "$$col" $(TB)/asan/otel_e2e $(OTEL_STATE) bench \
	  $(BUILD)/tests/bench_otel $(BENCH_OTEL_RUNS)
