#!/bin/bash
# The static musl examples in an empty root: a directory holding only the
# binary, a kubeconfig and a CA bundle (no /dev, no /etc, no /proc, no
# resolver, no kubectl), entered with chroot, against the local control
# plane by IP: the API server over TLS (the kubeconfig's client
# certificate), the router's loopback port for the sandbox calls; then
# the native tunnel (ASB_CONNECT_NATIVE_TUNNEL: the router reached by
# port-forward over WebSocket through the API server alone, issue 17),
# from the example and from the tool, with no PATH and no kubectl to find.
#   tests/static/empty-root.sh STATE_DIR STATIC_BIN_DIR
#       a v0.4.x cluster (claims name python-sandbox-template): all of it
#   tests/static/empty-root.sh STATE_DIR STATIC_BIN_DIR --native POOL...
#       a v0.5.x cluster (claims name a warm pool): the native tunnel
#       only, a sandbox from each POOL (the sandboxd pool's pods are
#       reached on both of sandboxd's ports, each its own stream)
set -euo pipefail
state=${1:?state dir}; bins=${2:?static bin dir}
pools=()
if [ "${3:-}" = --native ]; then shift 3; pools=("$@"); [ ${#pools[@]} -gt 0 ]; fi
root=$(mktemp -d) # 0700: the kubeconfig holds a client key
trap 'rm -rf "$root"' EXIT
if [ ${#pools[@]} = 0 ]; then
  cp "$bins/direct_url" "$bins/json_lookup" "$bins/agentsandbox" "$bins/native_tunnel" "$root/"
else
  cp "$bins/agentsandbox" "$bins/native_tunnel" "$root/"
fi
python3 - "$state/kubeconfig/admin.kubeconfig" "$root" <<'PY'
import base64, sys, yaml
kc = yaml.safe_load(open(sys.argv[1]))
root = sys.argv[2]
c = kc["clusters"][0]["cluster"]
assert c["server"].startswith("https://127."), c["server"]
with open(root + "/ca.pem", "wb") as f:
    f.write(base64.b64decode(c.pop("certificate-authority-data")))
c["certificate-authority"] = "/ca.pem"
with open(root + "/kubeconfig", "w") as f:
    yaml.safe_dump(kc, f)
PY
echo "empty root: $(cd "$root" && ls | tr '\n' ' ')"
# The native tunnel: nothing in the root but the API server's address in
# the kubeconfig; env -i leaves no PATH, and there is no kubectl to run
# (nor a bin directory to look in).
[ ! -e "$root/kubectl" ]
[ ! -e "$root/bin" ]
[ ! -e "$root/usr" ]
native_example() { # $1: its argument (a template, pool:NAME, "" for its default)
  local out
  out=$(env -i KUBECONFIG=/kubeconfig /usr/sbin/chroot "$root" /native_tunnel $1)
  echo "native_tunnel $1: $out"
  [ "$out" = "run: exit 0, stdout: hello without kubectl" ]
}
native_tool() { # $@: the claim source (the tool picks the runtime from its template)
  local out rc
  out=$(env -i KUBECONFIG=/kubeconfig /usr/sbin/chroot "$root" /agentsandbox --connect native \
        run "$@" --label suite=static-native -- sh -c 'echo static-native; exit 4') && rc=0 || rc=$?
  echo "agentsandbox --connect native run $*: exit $rc, stdout: $out"
  # (one test a line: set -e ignores a failure before the last && of a list)
  [ "$rc" = 4 ]
  [ "$out" = static-native ]
}
if [ ${#pools[@]} -gt 0 ]; then
  [ "$(ls -A "$root" | wc -l)" = 4 ]
  # the example speaks the router's runtime: the first pool is for it
  native_example "pool:${pools[0]}"
  for p in "${pools[@]}"; do native_tool --warm-pool "$p"; done
  exit 0
fi
[ "$(ls -A "$root" | wc -l)" = 6 ]
router=$(python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['ports']['router'])" "$state/cluster.json")
out=$(printf '%s' '{"status":{"sandbox":{"name":"sb-static"}}}' | env -i /usr/sbin/chroot "$root" /json_lookup)
echo "json_lookup: $out"
[ "$out" = "sandbox: sb-static" ]
out=$(env -i KUBECONFIG=/kubeconfig /usr/sbin/chroot "$root" /direct_url "http://127.0.0.1:$router")
echo "$out"
grep -qx 'run: exit 0, stdout: hello through the router URL' <<<"$out"
grep -qx 'read back: by URL' <<<"$out"
grep -qx 'sandbox deleted' <<<"$out"
# The tool, linked against its client-only mbedTLS (tools/cli/rules.mk):
# the API server's TLS (its certificate, the kubeconfig's client
# certificate) for create, ls and delete, the router by URL for the command.
out=$(env -i KUBECONFIG=/kubeconfig /usr/sbin/chroot "$root" /agentsandbox \
      --connect "direct=http://127.0.0.1:$router" run python-sandbox-template \
      --label suite=static-cli -- sh -c 'echo static-cli; exit 3') && rc=0 || rc=$?
echo "agentsandbox run: exit $rc, stdout: $out"
[ "$rc" = 3 ]
[ "$out" = static-cli ]
out=$(env -i KUBECONFIG=/kubeconfig /usr/sbin/chroot "$root" /agentsandbox ls -l suite=static-cli -o json)
python3 -c 'import json, sys; sys.exit(0 if json.loads(sys.argv[1])["kind"].endswith("List") else 1)' "$out"
echo "agentsandbox ls -o json: a list"
native_example ""
native_tool python-sandbox-template
