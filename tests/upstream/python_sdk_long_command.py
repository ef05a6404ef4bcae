"""The upstream Python SDK (PyPI k8s-agent-sandbox 1.0.8) as a client of
agentsandbox-runtime behind the real Go sandbox-router (v0.5.6 cluster,
v1beta1 warm-pool claims, kubectl port-forward): issue 13 asks that the
runtime's early /execute head (chunked body at the end) be parsed by the
reference client too, and that a command longer than the router's 30 s
response-header timeout gets through.

Also records how 1.0.8 sends file names with `"` and `\\` (urllib3's HTML
form quoting: `"` as %22, `\\` bare) and what the runtime stores, since
agentsandbox.h escapes them differently (tests/test_sdk_cluster.c).

Run by `make test-kube-cluster` with the venv from tests/upstream/rules.mk.
Prints one line per check; exits non-zero on the first failure."""
import os
import sys
import time

from k8s_agent_sandbox import SandboxClient


def main():
    seconds = int(sys.argv[1]) if len(sys.argv) > 1 else 35
    client = SandboxClient()
    sb = client.create_sandbox("python-sandbox-warmpool", namespace="default",
                               sandbox_ready_timeout=120)
    try:
        t0 = time.monotonic()
        r = sb.commands.run("sleep %d" % seconds, timeout=seconds + 30)
        took = time.monotonic() - t0
        assert r.exit_code == 0, r
        assert took >= seconds, took
        print("python-sdk 1.0.8: sleep %d through the Go router: exit 0 after %.1f s" % (seconds, took))
        r = sb.commands.run("echo back to back", timeout=30)
        assert r.exit_code == 0 and r.stdout == "back to back\n", r
        print("python-sdk 1.0.8: the next command on the same session: ok")
        # a backslash goes bare and the runtime now keeps it (it used to drop it)
        sb.files.write("back\\slash.txt", b"b")
        assert sb.files.read("back\\slash.txt") == b"b"
        print("python-sdk 1.0.8: back\\slash.txt round-trips")
        # 1.0.8 sends '"' as %22, which no runtime decodes: stored as %22
        sb.files.write('quo"te.txt', b"q")
        assert sb.files.exists("quo%22te.txt") and not sb.files.exists('quo"te.txt')
        print('python-sdk 1.0.8: quo"te.txt is stored as quo%22te.txt (urllib3 quoting; '
              'as with the upstream runtime)')
    finally:
        sb.terminate()
    return 0


if __name__ == "__main__":
    sys.exit(main())
