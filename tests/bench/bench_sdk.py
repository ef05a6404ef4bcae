"""make bench-sdk, the upstream Python SDK's side (k8s-agent-sandbox, the
version pinned in tests/bench/rules.mk), and the report of both sides.

    bench_sdk.py workload RUNS           the same workload as bench_sdk.c
    bench_sdk.py creates N               create-to-ready, N times
    bench_sdk.py first START_NS          fresh process to first result
    bench_sdk.py report OURS THEIRS BASELINE
                                         compare the two result files

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
import os
import resource
import statistics
import sys
import time

TEMPLATE = "python-sandbox-template"
ROUTER_NAMESPACE = "agent-sandbox-system"
FILE_BYTES = 64 << 20
FILE_REPS = 3  # the report takes the median


def result(name, value):
    print("result %s %s" % (name, value), flush=True)


def peak_rss_kib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


SETTLE_S = 0.3  # between creates, untimed (BENCH_SETTLE_MS in bench_sdk.c)


def cpu_ms():
    """CPU this process used (user + system; not kubectl's)."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return (ru.ru_utime + ru.ru_stime) * 1e3


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
        lat = []
        c0 = cpu_ms()
        for _ in range(runs):
            t0 = time.monotonic()
            r = sandbox.commands.run("true")
            lat.append((time.monotonic() - t0) * 1e3)
            if r.exit_code != 0:
                raise RuntimeError('run("true") exited %d' % r.exit_code)

        result("run_true_cpu_us", "%.3f" % ((cpu_ms() - c0) * 1000.0 / runs))
        result("runs", runs)
        result("run_true_median_ms", "%.3f" % statistics.median(lat))
        result("run_true_best_ms", "%.3f" % min(lat))

        for _ in range(FILE_REPS):
            t0 = time.monotonic()
            sandbox.files.write("bench-64m.bin", data)
            tw = (time.monotonic() - t0) * 1e3
            t0 = time.monotonic()
            back = sandbox.files.read("bench-64m.bin")
            tr = (time.monotonic() - t0) * 1e3
            if back != data:
                raise RuntimeError("read back %d bytes, not what was written" % len(back))
            del back
            result("write_64m_ms", "%.3f" % tw)
            result("read_64m_ms", "%.3f" % tr)
            result("write_read_64m_ms", "%.3f" % (tw + tr))
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

def load(path):
    out = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[0] == "result":
                out.setdefault(parts[1], []).append(float(parts[2]))
    return out


def report(ours_path, theirs_path, baseline):
    ours, theirs = load(ours_path), load(theirs_path)

    def one(d, key):
        v = d.get(key)
        if not v:
            raise SystemExit("bench-sdk: no %s in the results" % key)
        return statistics.median(v)

    runs = int(one(ours, "runs"))
    n_creates = len(ours.get("create_ready_ms", []))
    n_first = len(ours.get("create_ready_first_ms", []))
    reps = len(ours.get("write_read_64m_ms", []))
    starts = len(ours.get("first_result_ms", []))
    # (name, key, unit, goal); ratio = theirs / ours: how many times
    # faster, or smaller, we are
    lines = [
        ('run("true") latency, median of %d' % runs, "run_true_median_ms", "ms",
         ">= 20x faster"),
        ('run("true") latency, best of %d' % runs, "run_true_best_ms", "ms",
         ">= 20x faster"),
        ('run("true") client CPU per call (user+sys, mean of %d)' % runs, "run_true_cpu_us",
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
        ("peak RSS (workload process)", "peak_rss_kib", "KiB", "<= 1/20, >= 20x"),
        ("peak RSS (first-result process), median of %d" % starts, "first_peak_rss_kib", "KiB",
         "none"),
        ("CPU time user+sys (workload process)", "cpu_ms", "ms", "none"),
        ("CPU time user+sys (first-result process), median of %d" % starts, "first_cpu_ms",
         "ms", "none"),
    ]
    for name, key, unit, goal in lines:
        a, b = one(ours, key), one(theirs, key)
        ratio = b / a if a > 0 else float("inf")
        fmt = "%.0f" if unit == "KiB" else "%.2f"
        print("bench: %s: %s %s vs %s %s %s = %.1fx (goal %s)" % (
            name, fmt % a, unit, baseline, fmt % b, unit, ratio, goal))
    return 0


def main(argv):
    if len(argv) == 3 and argv[1] == "workload":
        return workload(int(argv[2]))
    if len(argv) == 3 and argv[1] == "creates":
        return creates(int(argv[2]))
    if len(argv) == 3 and argv[1] == "first":
        return first_result(int(argv[2]))
    if len(argv) == 5 and argv[1] == "report":
        return report(argv[2], argv[3], argv[4])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
