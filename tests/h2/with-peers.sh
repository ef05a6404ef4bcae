#!/bin/bash
# Runs a command with the HTTP/2 test peers up on loopback, then stops
# exactly those (by their pids):
#   nghttpd (h2c, --no-tls) serving DIR/docroot; ASB_NGHTTPD_PORT, and
#   ASB_NGHTTPD_SMALL_PORT for one with 64 KiB receive windows
#   nghttpd over TLS (certificates from tests/http/certs.sh in DIR/certs):
#   ASB_NGHTTPD_TLS_PORT; ASB_H2_CA is the CA file
#   openssl s_server without ALPN (an HTTP/1.1 TLS server): ASB_H1_ONLY_TLS_PORT
#   the grpcio test ProcessService (tests/h2/grpc_server.py): ASB_GRPC_PORT,
#   and one that ends connections after 1.5 s (GOAWAY, 20 s of grace):
#   ASB_GRPC_AGED_PORT
# Usage: with-peers.sh DIR PYTHON COMMAND...
set -eu
dir=$1 py=$2
shift 2
mkdir -p "$dir/docroot" "$dir/logs"
# 8 MiB with a position-dependent pattern (i % 251), so a misplaced byte shows
[ -s "$dir/docroot/big.bin" ] || /usr/bin/python3 -c '
import sys; sys.stdout.buffer.write(bytes(i % 251 for i in range(8 << 20)))' > "$dir/docroot/big.bin"
echo "hello from nghttpd" > "$dir/docroot/hello.txt"
freeport() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
wait_port() { for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; sleep 0.1; done; echo "peer on port $1 did not start" >&2; return 1; }
p1=$(freeport)
nghttpd --no-tls -a 127.0.0.1 -d "$dir/docroot" "$p1" > "$dir/logs/nghttpd.log" 2>&1 &
pids+=($!)
tests/http/certs.sh "$dir/certs" > "$dir/logs/certs.log" 2>&1
p4=$(freeport)
nghttpd -a 127.0.0.1 -d "$dir/docroot" "$p4" "$dir/certs/server.key" "$dir/certs/server.crt" \
  > "$dir/logs/nghttpd-tls.log" 2>&1 &
pids+=($!)
p5=$(freeport)
openssl s_server -quiet -accept "127.0.0.1:$p5" -cert "$dir/certs/server.crt" \
  -key "$dir/certs/server.key" -www < /dev/null > "$dir/logs/s_server.log" 2>&1 &
pids+=($!)
p2=$(freeport)
nghttpd --no-tls -a 127.0.0.1 -w 16 -W 16 -d "$dir/docroot" "$p2" > "$dir/logs/nghttpd-small.log" 2>&1 &
pids+=($!)
"$py" tests/h2/grpc_server.py "$dir/gen" > "$dir/logs/grpc.out" 2> "$dir/logs/grpc.err" &
pids+=($!)
"$py" tests/h2/grpc_server.py "$dir/gen" 1500 > "$dir/logs/grpc-aged.out" 2> "$dir/logs/grpc-aged.err" &
pids+=($!)
grpc_port() {
  for _ in $(seq 200); do grep -q '^port ' "$1" 2>/dev/null && break; sleep 0.1; done
  awk '/^port /{print $2; exit}' "$1"
}
p3=$(grpc_port "$dir/logs/grpc.out")
p6=$(grpc_port "$dir/logs/grpc-aged.out")
[ -n "$p3" ] && [ -n "$p6" ] || { echo "grpc server did not start:" >&2; cat "$dir/logs/grpc.err" "$dir/logs/grpc-aged.err" >&2; exit 1; }
wait_port "$p1"; wait_port "$p2"; wait_port "$p4"; wait_port "$p5"
export ASB_NGHTTPD_PORT=$p1 ASB_NGHTTPD_SMALL_PORT=$p2 ASB_GRPC_PORT=$p3 ASB_H2_DOCROOT=$dir/docroot \
  ASB_NGHTTPD_TLS_PORT=$p4 ASB_H1_ONLY_TLS_PORT=$p5 ASB_GRPC_AGED_PORT=$p6 ASB_H2_CA=$dir/certs/ca.crt
"$@"
