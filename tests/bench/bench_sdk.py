"""make bench-sdk, the upstream Python SDK's side (k8s-agent-sandbox, the
version pinned in tests/bench/rules.mk), and the report of both sides.

    bench_sdk.py workload RUNS           the same workload as bench_sdk.c
    bench_sdk.py creates N               create-to-ready, N times
    bench_sdk.py first START_NS          fresh process to first result
    bench_sdk.py floor RUNS              the path alone: curl through kubectl
                                         port-forward, no SDK (system python)
    bench_sdk.py report OURS THEIRS BASELINE [FLOOR]
                                         compare the result files

Same cluster (KUBECONFIG), template (python-sandbox-template in `default`)
and connection mode as bench_sdk.c: the SDK's default local tunnel
(`kubectl port-forward svc/sandbox-router-svc`). Results go to stdout as
"result <name> <value>" lines, between the SDK's own log lines.

One adjustment: k8s-agent-sandbox 0.4.6 starts its port-forward in the
*sandbox's* namespace (`-n default` here) and has no setting for the
router's namespace (0.5.x added `router_namespace`, default
agent-sandbox-system). The router runs in agent-sandbox-system, as it does
upstream, so `router_namespace_tunnel()` points the tunnel there and changes
nothing else: same kubectl command, same readiness polling, same headers.
"""
import json
import os
import re
import secrets
import statistics
import subprocess
import sys
import tempfile
import time

from sdk_measures import (compare, cpu_ms, file_results, file_rounds, load, median_of,
                          peak_rss_kib, result, run_true_latencies, run_true_results)

TEMPLATE = "python-sandbox-template"
ROUTER_NAMESPACE = "agent-sandbox-system"
FILE_BYTES = 64 << 20
FILE_REPS = 3  # the report takes the median


SETTLE_S = 0.3  # between creates, untimed (BENCH_SETTLE_MS in bench_sdk.c)


def router_namespace_tunnel():
    """The SDK's own tunnel, run in the router's namespace (see above)."""
    from k8s_agent_sandbox import connector

    base = connector.LocalTunnelConnectionStrategy

    class RouterNamespaceTunnel(base):
        def __init__(self, sandbox_id, namespace, config):
            super().__init__(sandbox_id, ROUTER_NAMESPACE, config)

    connector.LocalTunnelConnectionStrategy = RouterNamespaceTunnel


def workload(runs):
    from k8s_agent_sandbox import SandboxClient

    router_namespace_tunnel()
    data = os.urandom(FILE_BYTES)  # made before timing, as bench_sdk.c does
    client = SandboxClient()
    sandbox = None
    try:
        sandbox = client.create_sandbox(TEMPLATE)
        t0 = time.monotonic()  # the first call starts the tunnel: timed apart
        sandbox.commands.run("true")
        result("first_run_ms", "%.3f" % ((time.monotonic() - t0) * 1e3))
        c0 = cpu_ms()
        lat = run_true_latencies(sandbox, runs)
        result("run_true_cpu_us", "%.3f" % ((cpu_ms() - c0) * 1000.0 / runs))
        run_true_results(lat)
        file_rounds(sandbox, data, FILE_REPS)
    finally:
        if sandbox is not None:
            sandbox.terminate()
        client.delete_all()
    result("peak_rss_kib", peak_rss_kib())
    result("cpu_ms", "%.3f" % cpu_ms())
    return 0


def creates(n):
    from k8s_agent_sandbox import SandboxClient

    client = SandboxClient()
    for i in range(n):
        t0 = time.monotonic()
        s = client.create_sandbox(TEMPLATE)
        result("create_ready_ms", "%.3f" % ((time.monotonic() - t0) * 1e3))
        result("create_ready_%s_ms" % ("first" if i == 0 else "next"),
               "%.3f" % ((time.monotonic() - t0) * 1e3))
        s.terminate()
        time.sleep(SETTLE_S)  # untimed, as in bench_sdk.c: the cluster settles
    return 0


def first_result(start_ns):
    from k8s_agent_sandbox import SandboxClient

    router_namespace_tunnel()
    client = SandboxClient()
    sandbox = client.create_sandbox(TEMPLATE)
    try:
        r = sandbox.commands.run("echo hi")
        sys.stdout.write(r.stdout)
        result("first_result_ms", "%.3f" % ((time.time_ns() - start_ns) / 1e6))
    finally:
        sandbox.terminate()
    result("first_peak_rss_kib", peak_rss_kib())
    result("first_cpu_ms", "%.3f" % cpu_ms())
    return 0


# ------------------------------------------------------------------ report

def floor(runs):
    """The same calls with no SDK at all: a claim made and awaited with
    kubectl, one `kubectl port-forward` to the router Service, and curl
    sending exactly the router headers our client sends (X-Sandbox-ID,
    -Namespace, -Port; keep-alive, one curl process for all the runs; -w
    gives each request's own time). What is left of a client's latency
    above these numbers is the client's."""
    ns = "default"
    claim = "bench-floor-" + secrets.token_hex(4)
    manifest = {
        "apiVersion": "extensions.agents.x-k8s.io/v1alpha1", "kind": "SandboxClaim",
        "metadata": {"name": claim, "namespace": ns,
                     "labels": {"agents.x-k8s.io/created-by": "agentsandbox-bench-floor"}},
        "spec": {"sandboxTemplateRef": {"name": TEMPLATE}},
    }
    work = tempfile.mkdtemp(prefix="asb-bench-floor-")
    pf = None

    def kubectl(*args, **kw):
        return subprocess.run(["kubectl"] + list(args), check=True, capture_output=True,
                              text=True, **kw).stdout

    try:
        kubectl("apply", "-f", "-", input=json.dumps(manifest))
        kubectl("wait", "--for=condition=Ready", "sandboxclaim/" + claim, "-n", ns,
                "--timeout=90s")
        st = json.loads(kubectl("get", "sandboxclaim", claim, "-n", ns, "-o", "json"))
        sb = (st.get("status", {}).get("sandbox") or {})
        sandbox = sb.get("name") or sb.get("Name")
        if not sandbox:
            raise RuntimeError("claim %s names no sandbox: %r" % (claim, st.get("status")))
        pflog = open(os.path.join(work, "pf.log"), "w+")
        pf = subprocess.Popen(["kubectl", "port-forward", "-n", ROUTER_NAMESPACE,
                               "svc/sandbox-router-svc", ":8080"],
                              stdout=pflog, stderr=subprocess.STDOUT)
        port = None
        for _ in range(300):
            pflog.seek(0)
            m = re.search(r"Forwarding from 127\.0\.0\.1:(\d+)", pflog.read())
            if m:
                port = int(m.group(1))
                break
            time.sleep(0.05)
        if port is None:
            raise RuntimeError("kubectl port-forward did not listen")
        base = "http://127.0.0.1:%d" % port
        headers = ["X-Sandbox-ID: " + sandbox, "X-Sandbox-Namespace: " + ns,
                   "X-Sandbox-Port: 8888"]

        def curl_times(blocks):
            """One curl process; blocks: (url, [extra curl config lines]).
            Returns each transfer's time_total in ms, in order."""
            cfg = os.path.join(work, "curl.cfg")
            with open(cfg, "w") as f:
                for i, (url, extra) in enumerate(blocks):
                    if i:
                        f.write("next\n")
                    f.write('url = "%s"\n' % url)
                    f.write('silent\nshow-error\nfail\noutput = "/dev/null"\n')
                    f.write('write-out = "%{time_total}\\n"\n')
                    for h in headers:
                        f.write('header = "%s"\n' % h)
                    for line in extra:
                        f.write(line + "\n")
            out = subprocess.run(["curl", "-K", cfg], check=True, capture_output=True,
                                 text=True).stdout
            return [float(x) * 1e3 for x in out.split()]

        execute = (base + "/execute",
                   ['header = "Content-Type: application/json"',
                    'data = "{\\"command\\": \\"true\\"}"'])
        # the first request opens the connection (and kubectl's stream): apart
        lat = curl_times([execute] * (runs + 1))[1:]
        if len(lat) != runs:
            raise RuntimeError("curl gave %d times for %d runs" % (len(lat), runs))
        result("floor_run_true_median_ms", "%.3f" % statistics.median(lat))
        result("floor_run_true_best_ms", "%.3f" % min(lat))

        path = os.path.join(work, "bench-64m.bin")
        with open(path, "wb") as f:
            f.write(os.urandom(FILE_BYTES))
        for _ in range(FILE_REPS):
            tw, = curl_times([(base + "/upload",
                               ['form = "file=@%s;filename=bench-64m.bin"' % path])])
            tr, = curl_times([(base + "/download/bench-64m.bin", [])])
            file_results(tw, tr, "floor_")
    finally:
        if pf is not None:
            pf.terminate()
            pf.wait()
        subprocess.run(["kubectl", "delete", "sandboxclaim", claim, "-n", ns,
                        "--ignore-not-found", "--wait=false"], capture_output=True)
        for name in os.listdir(work):
            os.unlink(os.path.join(work, name))
        os.rmdir(work)
    return 0


def report(ours_path, theirs_path, baseline, floor_path=None):
    ours, theirs = load(ours_path), load(theirs_path)
    floor_res = load(floor_path) if floor_path else {}

    def one(d, key):
        return median_of(d, key, "bench-sdk")

    runs = int(one(ours, "runs"))
    procs = len(ours.get("runs", []))
    # each workload process reports the median and best of its own runs
    runs_label = "median of %d processes x %d" % (procs, runs) if procs > 1 else \
        "median of %d" % runs
    n_creates = len(ours.get("create_ready_ms", []))
    n_first = len(ours.get("create_ready_first_ms", []))
    reps = len(ours.get("write_read_64m_ms", []))
    starts = len(ours.get("first_result_ms", []))
    # (name, key, unit, goal); ratio = theirs / ours: how many times
    # faster, or smaller, we are
    lines = [
        ('run("true") latency, %s' % runs_label, "run_true_median_ms", "ms",
         ">= 20x faster"),
        ('run("true") latency, best of %d (median of processes)' % runs, "run_true_best_ms", "ms",
         ">= 20x faster"),
        ('run("true") client CPU per call (user+sys, mean of %d, median of processes)' % runs,
         "run_true_cpu_us",
         "us", "none; the latency above is mostly the shared path"),
        ("64 MiB write + read, median of %d" % reps, "write_read_64m_ms", "ms",
         ">= 3x faster"),
        ("64 MiB write, median of %d" % reps, "write_64m_ms", "ms", "none, part of write + read"),
        ("64 MiB read, median of %d" % reps, "read_64m_ms", "ms", "none, part of write + read"),
        ("create-to-ready latency, median of %d" % n_creates, "create_ready_ms", "ms",
         "not slower, >= 1x"),
        ("create-to-ready, first create in a process, median of %d" % n_first,
         "create_ready_first_ms", "ms", "none, part of create-to-ready"),
        ("create-to-ready, later creates, median of %d" % (n_creates - n_first),
         "create_ready_next_ms", "ms", "none, part of create-to-ready"),
        ("process start to first result, median of %d" % starts, "first_result_ms", "ms",
         ">= 50x faster"),
        ("peak RSS (workload process), median of %d" % procs, "peak_rss_kib", "KiB",
         "<= 1/20, >= 20x"),
        ("peak RSS (first-result process), median of %d" % starts, "first_peak_rss_kib", "KiB",
         "none"),
        ("CPU time user+sys (workload process), median of %d" % procs, "cpu_ms", "ms", "none"),
        ("CPU time user+sys (first-result process), median of %d" % starts, "first_cpu_ms",
         "ms", "none"),
    ]
    compare(lines, ours, theirs, baseline, "bench-sdk")
    # The floor: what the path costs with no SDK. ratio = floor / ours, so
    # 1.0x means the client adds nothing measurable and no client, ours or
    # upstream's, can go below 1.0x on this path.
    floor_lines = [
        ('run("true") latency, %s' % runs_label, "run_true_median_ms"),
        ("64 MiB write, median of %d" % reps, "write_64m_ms"),
        ("64 MiB read, median of %d" % reps, "read_64m_ms"),
        ("64 MiB write + read, median of %d" % reps, "write_read_64m_ms"),
    ]
    for name, key in floor_lines if floor_path else []:
        a, b = one(ours, key), one(floor_res, "floor_" + key)
        print("bench: %s, against the path alone: %.2f ms vs curl-same-tunnel %.2f ms = "
              "%.2fx (goal none; the floor for any client, 1.0x = nothing added)" % (
                  name, a, b, b / a if a > 0 else float("inf")))
    return 0


def main(argv):
    if len(argv) == 3 and argv[1] == "workload":
        return workload(int(argv[2]))
    if len(argv) == 3 and argv[1] == "creates":
        return creates(int(argv[2]))
    if len(argv) == 3 and argv[1] == "first":
        return first_result(int(argv[2]))
    if len(argv) == 3 and argv[1] == "floor":
        return floor(int(argv[2]))
    if len(argv) in (5, 6) and argv[1] == "report":
        return report(*argv[2:])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
