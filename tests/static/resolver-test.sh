#!/bin/bash
# Runs tests/static/test_resolve builds in a network + mount namespace of
# their own: loopback only, /etc/resolv.conf naming 127.0.0.1 where a UDP
# and TCP port 53 take queries and never answer; then with /etc empty.
#   tests/static/resolver-test.sh BINARY...
set -euo pipefail
if [ -z "${ASB_IN_NS:-}" ]; then
  exec env ASB_IN_NS=1 unshare --net --mount --propagation private "$0" "$@"
fi
ip link set lo up
tmp=$(mktemp -d)
trap 'kill $dns 2>/dev/null || true; umount /etc 2>/dev/null || true; umount /etc/resolv.conf 2>/dev/null || true; rm -rf "$tmp"' EXIT
python3 - <<'PY' &
import socket, select
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", 53))
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind(("127.0.0.1", 53)); t.listen(16)
held = []
while True:  # swallow everything, answer nothing
    r, _, _ = select.select([u, t], [], [])
    if u in r: u.recv(4096)
    if t in r: held.append(t.accept()[0])
PY
dns=$!
printf 'nameserver 127.0.0.1\n' > "$tmp/resolv.conf"
for i in $(seq 50); do python3 -c 'import socket;s=socket.socket();s.connect(("127.0.0.1",53))' 2>/dev/null && break; sleep 0.1; done
mount --bind "$tmp/resolv.conf" /etc/resolv.conf
for b in "$@"; do "$b" blackhole; done
umount /etc/resolv.conf
mkdir "$tmp/emptyetc"
mount --bind "$tmp/emptyetc" /etc
for b in "$@"; do "$b" noresolver; done
