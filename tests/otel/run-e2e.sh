#!/usr/bin/env bash
# make test-otel: the SDK with tracing on, end to end, against a real
# OpenTelemetry Collector (tools/otelcol: OTLP receiver + file exporter,
# loopback only) and the local control plane (agent-sandbox v0.5.6), whose
# controller and router send their own spans to the same collector.
#
#   run-e2e.sh COLLECTOR DRIVER STATE [bench BENCH RUNS]
# With "bench": the same collector and cluster, then BENCH (make
# bench-otel) instead of the tests.
# STATE: a directory of its own (the cluster's state, the collector's
# config and output). LC_POD_CIDR / LC_SERVICE_CIDR come from the caller.
set -uo pipefail
COL=$1 DRIVER=$2 STATE=$3
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OT=$STATE/otelcol
# before any cluster-down can run (the trap): never another state directory
export LC_STATE_DIR=$STATE/cluster
mkdir -p "$OT"; rm -f "$OT"/*.json "$OT"/*.log
read -r HTTP_PORT GRPC_PORT < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
cat > "$OT/config.yaml" <<EOT
receivers:
  otlp:
    protocols:
      http: {endpoint: "127.0.0.1:$HTTP_PORT"}
      grpc: {endpoint: "127.0.0.1:$GRPC_PORT"}
exporters:
  file:
    path: $OT/out.json
    flush_interval: 100ms
service:
  telemetry:
    logs: {level: warn}
    metrics: {level: none}
  pipelines:
    traces: {receivers: [otlp], exporters: [file]}
    metrics: {receivers: [otlp], exporters: [file]}
EOT
COLPID=
cleanup() {
  [ -n "$COLPID" ] && { kill -CONT "$COLPID" 2>/dev/null; kill "$COLPID" 2>/dev/null; wait "$COLPID" 2>/dev/null; }
  make -C "$ROOT" --no-print-directory cluster-down >/dev/null 2>&1
}
trap cleanup EXIT
start_collector() {
  "$COL" --config "file:$OT/config.yaml" >>"$OT/collector.log" 2>&1 &
  COLPID=$!
  for _ in $(seq 100); do
    curl -s -o /dev/null -X POST -H 'Content-Type: application/json' -d '{}' \
      "http://127.0.0.1:$HTTP_PORT/v1/traces" && return 0
    sleep 0.1
  done
  echo "the collector did not start:"; cat "$OT/collector.log"; return 1
}
start_collector || exit 1
echo "otel: collector $COL on 127.0.0.1:$HTTP_PORT (OTLP/HTTP) and :$GRPC_PORT (gRPC)"

export LC_OTLP_ENDPOINT=http://127.0.0.1:$GRPC_PORT
make -C "$ROOT" --no-print-directory cluster-up AGENT_SANDBOX=v0.5.6 > "$OT/cluster-up.log" 2>&1 ||
  { tail -20 "$OT/cluster-up.log"; exit 1; }
export KUBECONFIG=$LC_STATE_DIR/kubeconfig/admin.kubeconfig
export OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$HTTP_PORT
unset OTEL_SERVICE_NAME OTEL_SDK_DISABLED OTEL_EXPORTER_OTLP_TRACES_ENDPOINT OTEL_EXPORTER_OTLP_HEADERS

if [ "${4:-}" = bench ]; then
  port=$(python3 -c 'import json,sys;print(json.load(open(sys.argv[1]))["ports"]["router"])' \
         "$LC_STATE_DIR/cluster.json") || exit 1
  "$5" "http://127.0.0.1:$port" "${6:-2000}"; exit $?
fi

echo "--- otel: a traced sandbox life"
"$DRIVER" traced "$OT/facts.txt" || { echo "otel: the traced run failed"; exit 1; }
# The controller and router batch their spans (5 s): the checker waits
# for them (bounded) before it judges.
python3 "$HERE/check_collector.py" "$OT/out.json" "$OT/facts.txt" || exit 1
# The runtime in the pod got the trace too (the router forwards it, with
# its own span as the parent): its access log has our trace id.
tid=$(sed -n 's/^lifecycle 00-\([0-9a-f]*\)-.*/\1/p' "$OT/facts.txt")
n=$(cat "$LC_STATE_DIR"/logs/runtime-*.log 2>/dev/null | grep -c "^.*POST /execute 200 .* traceparent=00-$tid-")
echo "otel: the runtime logged $n /execute requests in trace $tid"
[ "$n" = 2 ] || { echo "otel: want the 2 runs' requests"; grep -h traceparent "$LC_STATE_DIR"/logs/runtime-*.log | tail -5; exit 1; }

echo "--- otel: through a Gateway: the discovery histogram (mode gateway)"
gwport=$("$ROOT/tests/kube/gateway-setup.sh" "$LC_STATE_DIR") || { echo "otel: gateway setup failed"; exit 1; }
"$DRIVER" gateway "$gwport" || { echo "otel: the runs through a Gateway failed"; exit 1; }
python3 "$HERE/check_collector.py" "$OT/out.json" discovery sandbox-client-gw gateway success \
  sandbox-client-gw-none gateway failure || exit 1

echo "--- otel: through the native tunnel: the discovery histogram (mode native_port_forward)"
"$DRIVER" native || { echo "otel: the run through the native tunnel failed"; exit 1; }
python3 "$HERE/check_collector.py" "$OT/out.json" discovery sandbox-client-native \
  native_port_forward success || exit 1

echo "--- otel: the collector stalled (SIGSTOP): calls go on"
kill -STOP "$COLPID"
out=$("$DRIVER" stalled 20); rc=$?
echo "$out"
kill -CONT "$COLPID"
[ $rc = 0 ] || { echo "otel: calls failed or waited with a stalled collector"; exit 1; }

echo "--- otel: the collector gone: calls go on"
kill "$COLPID"; wait "$COLPID" 2>/dev/null; COLPID=
out=$("$DRIVER" down 20); rc=$?
echo "$out"
[ $rc = 0 ] || { echo "otel: calls failed with the collector gone"; exit 1; }
echo "otel: ok"
