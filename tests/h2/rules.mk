# HTTP/2, gRPC and protobuf (issue 14).
#
#   make test-h2         offline: HPACK vectors, frames, protobuf, gRPC
#                        framing; C, C++, no-TLS and ASan+UBSan builds
#   make test-h2-peers   against real peers on loopback: nghttpd (Debian's
#                        nghttp2-server) and a grpcio server (PyPI, in a
#                        venv under build/) implementing a test
#                        process.v1.ProcessService from sandboxd's .proto
#   make bench-grpc      our client vs grpcio's Python client, same server
#
# (Read before tests/rules.mk: target names spell $(BUILD)/tests out.)

H2_TB        := $(BUILD)/tests
H2_DIR       := $(BUILD)/h2
H2_VENV      := $(H2_DIR)/venv
H2_GRPCIO    := 1.85.1
H2_STAMP     := $(H2_VENV)/.grpcio-$(H2_GRPCIO)
AGENT_SANDBOX_MODULE ?= sigs.k8s.io/agent-sandbox@v0.5.6
H2_UNIT      := $(foreach f,c cxx notls asan,$(H2_TB)/$(f)/test_h2)

EXTRA_DEB_PACKAGES += nghttp2-server python3-venv

$(H2_STAMP):
	@mkdir -p $(H2_DIR)
	@rm -rf $(H2_VENV)
	/usr/bin/python3 -m venv $(H2_VENV)
	$(H2_VENV)/bin/pip install --quiet --disable-pip-version-check \
	  grpcio==$(H2_GRPCIO) grpcio-tools==$(H2_GRPCIO)
	@touch $@
# Python stubs generated from sandboxd's process.proto as the agent-sandbox
# module ships it (the Go module cache), into build/; nothing committed.
$(H2_DIR)/gen/process_pb2_grpc.py: $(H2_STAMP)
	@mkdir -p $(@D)
	@dir=$$(cd /tmp && go mod download -json $(AGENT_SANDBOX_MODULE) | \
	  /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])') && \
	  cp $$dir/packages/sandboxd/spec/process/v1/process.proto $(@D)/process.proto
	$(H2_VENV)/bin/python -m grpc_tools.protoc -I$(@D) --python_out=$(@D) \
	  --grpc_python_out=$(@D) $(@D)/process.proto
.PHONY: h2-venv
h2-venv: $(H2_DIR)/gen/process_pb2_grpc.py
EXTRA_DEPS_TARGETS += h2-venv

$(H2_TB)/asan/test_h2_peers: tests/test_h2_peers.c agentsandbox.h tests/asbtest.h
	@mkdir -p $(@D)
	$(CLANG) -std=c11 -O1 -g $(SAN) $(CFLAGS_WARN) $< -o $@ $(LINK)
# the TLS cases also against mbedTLS 3.6 (TLS 1.3 with nghttpd)
$(H2_TB)/asan3/test_h2_peers: tests/test_h2_peers.c agentsandbox.h tests/asbtest.h | mbedtls3
	@mkdir -p $(@D)
	$(CLANG) -std=c11 -O1 -g $(SAN) $(CFLAGS_WARN) $(MBEDTLS3_CFLAGS) $< -o $@ \
	  $(MBEDTLS3_LIBS) -lm -pthread
# and under ThreadSanitizer: the I/O thread, callers on several threads
$(H2_TB)/tsan/test_h2_peers: tests/test_h2_peers.c agentsandbox.h tests/asbtest.h
	@mkdir -p $(@D)
	$(CLANG) -std=c11 -O1 -g -fsanitize=thread $(CFLAGS_WARN) $< -o $@ $(LINK)
ALL_TARGETS += $(H2_UNIT) $(H2_TB)/asan/test_h2_peers $(H2_TB)/tsan/test_h2_peers

.PHONY: test-h2 test-h2-peers
TEST_TIERS += test-h2 test-h2-peers
test-h2: $(H2_UNIT)
	@set -e; for f in c cxx notls asan; do echo "--- $$f/test_h2"; $(H2_TB)/$$f/test_h2; done
test-h2-peers: $(H2_TB)/asan/test_h2_peers $(H2_TB)/tsan/test_h2_peers \
               $(H2_TB)/asan3/test_h2_peers $(H2_DIR)/gen/process_pb2_grpc.py
	@tests/h2/with-peers.sh $(H2_DIR) $(H2_VENV)/bin/python sh -c '\
	  echo "--- asan/test_h2_peers" && $(H2_TB)/asan/test_h2_peers && \
	  echo "--- tsan/test_h2_peers" && TSAN_OPTIONS=halt_on_error=1 $(H2_TB)/tsan/test_h2_peers && \
	  echo "--- asan3/test_h2_peers tls (mbedTLS 3.6)" && $(H2_TB)/asan3/test_h2_peers tls'

# Fuzz targets (FUZZ_TARGETS names them in tests/rules.mk).
FUZZ_SEEDS_h2 := tests/fuzz/seeds_h2
FUZZ_SEEDS_hpack := tests/fuzz/seeds_hpack
FUZZ_SEEDS_protobuf := tests/fuzz/seeds_protobuf
# (shares: json gave up 8 of its 16 for these)
FUZZ_SHARE_h2 := 4
FUZZ_SHARE_hpack := 2
FUZZ_SHARE_protobuf := 2

# make bench: our gRPC client vs grpcio's Python client, same server, one run.
$(H2_TB)/bench_grpc: tests/bench/bench_grpc.c agentsandbox.h
	@mkdir -p $(@D)
	$(CC) -std=c99 -O2 -DNDEBUG $(CFLAGS_WARN) $< -o $@ $(LINK)
ALL_TARGETS += $(H2_TB)/bench_grpc
BENCH_TIERS += bench-grpc
.PHONY: bench-grpc
bench-grpc: $(H2_TB)/bench_grpc $(H2_DIR)/gen/process_pb2_grpc.py
	@tests/h2/with-peers.sh $(H2_DIR) $(H2_VENV)/bin/python $(H2_TB)/bench_grpc \
	  $(H2_VENV)/bin/python $(H2_DIR)/gen
