#!/bin/sh
# Runs test_runtime_names against agentsandbox-runtime and against the
# reference runtime (agent-sandbox's Python app, set up under build/ by
# tools/runtime/tests/reference-runtime.sh), each on a free loopback port
# with a base directory of its own, and stops both (by pid) at the end.
# Usage: names.sh TEST_BINARY RUNTIME_BINARY REFERENCE_DIR WORKDIR
set -eu
test_bin=$1 rt_bin=$2 ref=$(cd "$3" && pwd) work=$4
rm -rf "$work"; mkdir -p "$work/ours"
pids=""
stop_all() {
  for p in $pids; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  pids=""
}
trap stop_all EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {
  i=0
  until python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1",int(sys.argv[1])),0.2)' "$1" 2>/dev/null; do
    i=$((i + 1)); [ $i -lt 300 ] || { echo "names.sh: nothing listens on $1"; exit 1; }; sleep 0.1
  done
}
port=$(free_port)
"$rt_bin" --listen 127.0.0.1 --port "$port" --base-dir "$work/ours" 2>"$work/ours.log" &
pids="$pids $!"
wait_port "$port"
echo "--- test_runtime_names: agentsandbox-runtime"
ASB_RUNTIME_URL=http://127.0.0.1:$port "$test_bin"
rm -rf "$ref/base"; mkdir -p "$ref/base"
port=$(free_port)
(cd "$ref/app" && exec "$ref/venv/bin/uvicorn" main:app --app-dir "$ref/app" --host 127.0.0.1 \
   --port "$port" --log-level warning --no-access-log) 2>"$work/reference.log" &
pids="$pids $!"
wait_port "$port"
echo "--- test_runtime_names: the reference runtime ($(cat "$ref/pins.txt"))"
ASB_RUNTIME_URL=http://127.0.0.1:$port ASB_RUNTIME_DOUBLE_DECODES=1 "$test_bin"
stop_all
