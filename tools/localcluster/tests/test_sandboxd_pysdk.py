"""The real sandboxd in the local cluster, driven by the upstream Python SDK
1.0.8 with its [grpc] extra (PyPI k8s-agent-sandbox[grpc]) as a user would:
a claim on the sandboxd warm pool, its sandboxd pod tunnel (`kubectl
port-forward pod/<pod> :8080 :9090`, which kwok relays into the pod's own
network namespace), commands over gRPC, a file written, listed, read and
deleted over REST, then the sandbox terminated.

  KUBECONFIG=... <venv>/bin/python test_sandboxd_pysdk.py STATE_DIR

Also checks, outside the SDK, what makes it the real thing: sandboxd's own
/v1/health and log, that in the pod's namespace only 127.0.0.1:8080 and
:9090 listen, that a command runs in that namespace (it sees only lo), and
that terminating the sandbox stops sandboxd, leaves no process in the pod's
namespace and removes its PortForward. One "ok - " line per check; exits
non-zero at the first failure."""
import glob
import json
import os
import subprocess
import sys
import time

from k8s_agent_sandbox import SandboxClient
from k8s_agent_sandbox.models import SandboxdPodTunnelConnectionConfig

WARMPOOL = "sandboxd-warmpool"
NS = "default"
checks = 0


def ok(what):
    global checks
    checks += 1
    print("ok - " + what, flush=True)


def fail(what):
    print("FAIL - " + what, flush=True)
    sys.exit(1)


def check(cond, what):
    if cond:
        ok(what)
    else:
        fail(what)


def podrunner_meta(state, pod):
    for fn in glob.glob(os.path.join(state, "podrunner", "*.json")):
        with open(fn) as f:
            d = json.load(f)
        if d["pod"] == "%s/%s" % (NS, pod):
            return d
    return None


def in_netns(pid, argv):
    return subprocess.run(["nsenter", "--net=/proc/%d/ns/net" % pid, "--"] + argv,
                          capture_output=True, text=True, timeout=30)


def gone(pid):
    """Exited: no /proc entry, or a zombie (reaped by whoever inherits it,
    maybe a PID 1 that reaps late)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


def wait_for(fn, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if fn():
            return True
        time.sleep(0.1)
    return False


def procs_in_netns(ino):
    left = []
    for d in glob.glob("/proc/[0-9]*/ns/net"):
        try:
            if os.stat(d).st_ino == ino:
                left.append(int(d.split("/")[2]))
        except OSError:
            pass
    return left


def main():
    state = sys.argv[1]
    client = SandboxClient(connection_config=SandboxdPodTunnelConnectionConfig())
    sb = client.create_sandbox(WARMPOOL, namespace=NS, sandbox_ready_timeout=120)
    pod = sb.get_pod_name()
    ok("python-sdk 1.0.8: sandbox from warm pool %s is up (pod %s)" % (WARMPOOL, pod))
    meta = podrunner_meta(state, pod)
    check(meta is not None and meta.get("runtime") == "sandboxd",
          "the pod runner serves %s with sandboxd (%s)" % (pod, meta and meta.get("runtime")))
    pid = meta["pid"]
    ns_ino = os.stat("/proc/%d/ns/net" % pid).st_ino
    check(ns_ino != os.stat("/proc/self/ns/net").st_ino, "the pod has a network namespace of its own")
    try:
        r = sb.commands.run("echo hello from sandboxd; echo to-stderr >&2; exit 3", timeout=60)
        check(r.exit_code == 3 and r.stdout == "hello from sandboxd\n" and r.stderr == "to-stderr\n",
              "run over gRPC Execute: exit %d, stdout %r, stderr %r" % (r.exit_code, r.stdout, r.stderr))
        data = bytes(range(256)) * 4096 + b"end"
        sb.files.write("dir/blob.bin", data)
        ok("write dir/blob.bin (%d bytes) over REST PUT" % len(data))
        entries = sb.files.list("dir")
        check([(e.name, e.size) for e in entries] == [("blob.bin", len(data))],
              "list dir: %s" % [(e.name, e.size, e.type) for e in entries])
        back = sb.files.read("dir/blob.bin")
        check(back == data, "read dir/blob.bin gives the same %d bytes" % len(back))
        check(sb.files.exists("dir/blob.bin"), "exists dir/blob.bin")
        r = sb.commands.run("pwd; echo $GREETING; wc -c < blob.bin", timeout=60, env={"GREETING": "hi"}, cwd="dir")
        want = "%s\nhi\n%d\n" % (os.path.join(meta["base_dir"], "workspace", "dir"), len(data))
        check(r.exit_code == 0 and r.stdout == want,
              "run with env and cwd sees the written file in the sandbox root: %r" % r.stdout)
        try:
            sb.files.delete("dir")
            fail("delete of the non-empty dir without recursive succeeded")
        except Exception as e:  # noqa: BLE001 - what the SDK raises is the check
            code = getattr(e, "status_code", None)
            body = getattr(getattr(e, "response", None), "text", "")
            check(code == 409, "delete of a non-empty directory is refused: %s %s" % (code, body.strip()[:100]))
        check(sb.files.exists("dir/blob.bin"), "the directory is still there")
        sb.files.delete("dir", recursive=True)
        check(not sb.files.exists("dir"), "delete recursive removes it")

        # The real sandboxd, in the pod's own network namespace, loopback only.
        r = in_netns(pid, ["curl", "-sS", "--max-time", "5", "http://127.0.0.1:8080/v1/health"])
        check(r.returncode == 0 and json.loads(r.stdout).get("status") == "ok" and "uptime_seconds" in r.stdout,
              "sandboxd answers /v1/health in the pod's namespace: %s" % r.stdout.strip())
        with open(os.path.join(state, "logs", "runtime-%s_%s.log" % (NS, pod))) as f:
            log = f.read()
        check('"msg":"sandboxd listening","version":"v0.5.6"' in log, "its log says sandboxd v0.5.6 is listening")
        lc = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lc.py")
        r = subprocess.run(["/usr/bin/python3", lc, "pod-exec", "%s/%s" % (NS, pod), "--", "sh", "-c",
                            'curl -sS --max-time 5 "http://$SANDBOXD_REST_ADDR/v1/health"'],
                           capture_output=True, text=True, timeout=30, env=dict(os.environ, LC_STATE_DIR=state))
        check(r.returncode == 0 and '"status":"ok"' in r.stdout,
              "lc.py pod-exec: a sidecar reaches sandboxd on $SANDBOXD_REST_ADDR: %s" % (r.stdout or r.stderr).strip()[:90])
        r = in_netns(pid, ["ss", "-Hltn"])
        listen = sorted(line.split()[3] for line in r.stdout.splitlines() if line.strip())
        check(listen == ["127.0.0.1:8080", "127.0.0.1:9090"],
              "in the pod's namespace only 127.0.0.1:8080 and 127.0.0.1:9090 listen: %s" % listen)
        r = sb.commands.run("tail -n +3 /proc/net/dev | cut -d: -f1", timeout=60)
        check(r.stdout.split() == ["lo"], "a command sees only lo: it runs in the pod's namespace (%r)"
              % r.stdout.strip())
        r = sb.commands.run("sleep 600 >/dev/null 2>&1 & echo $!", timeout=60)
        check(r.exit_code == 0 and r.stdout.strip().isdigit(), "a background sleep 600 is left running")
    finally:
        sb.terminate()
    ok("terminate")
    check(wait_for(lambda: gone(pid), 60.0), "sandboxd of %s stopped (pid %d)" % (pod, pid))
    check(wait_for(lambda: not procs_in_netns(ns_ino)),
          "no process is left in the pod's network namespace (the sleep went with it): %s" % procs_in_netns(ns_ino))
    r = subprocess.run(["kubectl", "get", "portforwards.kwok.x-k8s.io", pod, "-n", NS],
                       capture_output=True, text=True)
    check(r.returncode != 0 and "NotFound" in r.stderr, "its PortForward is removed")
    check(wait_for(lambda: not os.path.exists(meta["base_dir"])), "its root directory is removed")
    print("%d passed" % checks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
