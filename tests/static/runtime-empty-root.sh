#!/bin/bash
# The static musl runtime server (make static) as a scratch image runs it:
# a root holding only the binary and an empty /app (no /dev, no /etc, no
# /proc, no shell), entered with chroot and an empty environment. Driven
# over loopback with curl: health, an upload and its download byte for
# byte, list, exists, a command (the binary itself, the only program
# there), a missing command's error, and a prompt exit on SIGTERM.
#   tests/static/runtime-empty-root.sh STATIC_RUNTIME
set -euo pipefail
bin=${1:?static runtime binary}
root=$(mktemp -d); tmp=$(mktemp -d); pid=
cleanup() {
  [ -z "$pid" ] || kill -KILL "$pid" 2>/dev/null || true
  rm -rf "$root" "$tmp"
}
trap cleanup EXIT
cp "$bin" "$root/agentsandbox-runtime"
mkdir "$root/app"
echo "runtime empty root: $(cd "$root" && ls | tr '\n' ' ')"
env -i /usr/sbin/chroot "$root" /agentsandbox-runtime --listen 127.0.0.1 --port 0 \
  --base-dir /app 2>"$tmp/log" &
pid=$!
port=
for _ in $(seq 100); do
  port=$(sed -n 's/^agentsandbox-runtime: listening on 127.0.0.1 port \([0-9]*\),.*/\1/p' "$tmp/log")
  [ -n "$port" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$tmp/log"; echo "runtime empty root: the server exited"; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { cat "$tmp/log"; echo "runtime empty root: no listening line"; exit 1; }
url=http://127.0.0.1:$port
fail() { echo "runtime empty root: $*"; cat "$tmp/log"; exit 1; }
expect() { # what got want
  [ "$2" = "$3" ] || fail "$1: got $2, want $3"
}

expect health "$(curl -sS "$url/")" '{"status":"ok","message":"Sandbox Runtime is active."}'
head -c 300000 /dev/urandom > "$tmp/blob"
expect upload "$(curl -sS -F "file=@$tmp/blob;filename=d/blob.bin" "$url/upload")" \
  "{\"message\":\"File 'd/blob.bin' uploaded successfully.\"}"
curl -sS -o "$tmp/back" "$url/download/d/blob.bin"
cmp -s "$tmp/blob" "$tmp/back" || fail "download: the bytes differ from the upload"
cmp -s "$tmp/blob" "$root/app/d/blob.bin" || fail "upload: the file in /app differs"
curl -sS "$url/list/d" | grep -q '^\[{"name":"blob.bin","size":300000,"type":"file",' ||
  fail "list: $(curl -sS "$url/list/d")"
expect exists "$(curl -sS "$url/exists/d%2Fblob.bin")" '{"path":"d/blob.bin","exists":true}'
ex() { curl -sS -H 'content-type: application/json' -d "{\"command\":\"$1\"}" "$url/execute"; }
out=$(ex "/agentsandbox-runtime --help")
python3 -c 'import json,sys; r=json.loads(sys.argv[1]); sys.exit(0 if r["exit_code"] == 0 and r["stdout"].startswith("usage: agentsandbox-runtime") else "execute --help: %r" % r)' "$out" ||
  fail "a command in the empty root did not run"
expect "a missing command" "$(ex "ls -l")" \
  "{\"stdout\":\"\",\"stderr\":\"Failed to execute command: [Errno 2] No such file or directory: 'ls'\",\"exit_code\":1}"
kill -TERM "$pid"
rc=0; wait "$pid" || rc=$?; pid=
expect "exit status after SIGTERM" "$rc" 0
grep -q 'received SIGTERM, shutting down' "$tmp/log" || fail "no shutdown line"
echo "runtime empty root: health, upload/download (300000 bytes), list, exists, execute, SIGTERM: ok ($(stat -c %s "$bin") bytes stripped)"
