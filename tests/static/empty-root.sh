#!/bin/bash
# The static musl examples in an empty root: a directory holding only the
# binary, a kubeconfig and a CA bundle (no /dev, no /etc, no /proc, no
# resolver, no kubectl), entered with chroot, against the local control
# plane by IP: the API server over TLS (the kubeconfig's client
# certificate), the router's loopback port for the sandbox calls.
#   tests/static/empty-root.sh STATE_DIR STATIC_BIN_DIR
set -euo pipefail
state=${1:?state dir}; bins=${2:?static bin dir}
root=$(mktemp -d) # 0700: the kubeconfig holds a client key
trap 'rm -rf "$root"' EXIT
cp "$bins/direct_url" "$bins/json_lookup" "$bins/agentsandbox" "$root/"
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
router=$(python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['ports']['router'])" "$state/cluster.json")
echo "empty root: $(cd "$root" && ls | tr '\n' ' ')"
[ "$(ls -A "$root" | wc -l)" = 5 ]
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
[ "$rc" = 3 ] && [ "$out" = static-cli ]
out=$(env -i KUBECONFIG=/kubeconfig /usr/sbin/chroot "$root" /agentsandbox ls -l suite=static-cli -o json)
python3 -c 'import json, sys; sys.exit(0 if json.loads(sys.argv[1])["kind"].endswith("List") else 1)' "$out"
echo "agentsandbox ls -o json: a list"
