"""make bench-native-sdk, the upstream Python SDK's side (k8s-agent-sandbox[grpc]
1.0.8, the venv of tests/upstream/rules.mk), and the report of both sides.

    bench_native_sdk.py first CLAIM START_NS   a fresh process attaches to
                                               CLAIM and runs `true`
    bench_native_sdk.py hundred N WIDTH        N sandboxes open at once
    bench_native_sdk.py report OURS THEIRS BASELINE

The same cluster (KUBECONFIG, agent-sandbox v0.5.6), warm pool
(sandboxd-warmpool, the real sandboxd in every pod) and runtime as
bench_native_sdk.c, through the SDK's sandboxd pod tunnel
(SandboxdPodTunnelConnectionConfig: one `kubectl port-forward pod/<pod>
:8080 :9090` per pod, started by the first call on it).

first: from START_NS (taken by the shell that started this process, as for
ours) to the result of run("true") on a claim made beforehand
(SandboxClient.get_sandbox); the handle's connection is closed after, the
claim stays. hundred: N creates on a ThreadPoolExecutor of WIDTH threads,
run("true") on each (its tunnel up), then with all N open: this process's
RSS and peak RSS, its descendants and their RSS summed; then all deleted.
Results go to stdout as "result <name> <value>" lines."""
import os
import resource
import sys
import time

from sdk_measures import command, load, median_of, peak_rss_kib, result

WARMPOOL = "sandboxd-warmpool"


def rss_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def parent_of(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            s = f.read()
        return int(s[s.rindex(")") + 2:].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def descendants():
    me, n, kib = os.getpid(), 0, 0
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        p, depth = parent_of(int(e)), 0
        while p > 1 and depth < 16:
            if p == me:
                n += 1
                kib += rss_kib(int(e))
                break
            p, depth = parent_of(p), depth + 1
    return n, kib


def client():
    from k8s_agent_sandbox import SandboxClient
    from k8s_agent_sandbox.models import SandboxdPodTunnelConnectionConfig

    return SandboxClient(connection_config=SandboxdPodTunnelConnectionConfig())


def first(claim, start_ns):
    sandbox = client().get_sandbox(claim)
    try:
        r = sandbox.commands.run("true")
        if r.exit_code != 0:
            raise RuntimeError('run("true") exited %d' % r.exit_code)
        result("first_python_ms", "%.3f" % ((time.time_ns() - start_ns) / 1e6))
        ru = resource.getrusage(resource.RUSAGE_SELF)  # its kubectl child's not in it
        result("first_python_cpu_ms", "%.3f" % ((ru.ru_utime + ru.ru_stime) * 1e3))
    finally:
        sandbox.close_connection()
    return 0


def hundred(n, width):
    from concurrent.futures import ThreadPoolExecutor

    c = client()
    try:
        with ThreadPoolExecutor(max_workers=width) as pool:
            sandboxes = list(pool.map(
                lambda _: c.create_sandbox(WARMPOOL, sandbox_ready_timeout=900), range(n)))
        for s in sandboxes:
            r = s.commands.run("true")
            if r.exit_code != 0:
                raise RuntimeError('run("true") exited %d' % r.exit_code)
        kids, kids_kib = descendants()
        me = rss_kib(os.getpid())
        result("hundred_n", n)
        result("hundred_rss_kib", me)
        result("hundred_peak_rss_kib", peak_rss_kib())
        result("hundred_children", kids)
        result("hundred_children_rss_kib", kids_kib)
        result("hundred_total_rss_kib", me + kids_kib)
    finally:
        with ThreadPoolExecutor(max_workers=16) as pool:  # untimed cleanup
            list(pool.map(lambda k: c.delete_sandbox(k[1], namespace=k[0]),
                          list(c._active_connection_sandboxes.keys())))
    return 0


def report(ours_path, theirs_path, baseline):
    ours, theirs = load(ours_path), load(theirs_path)

    def one(d, key):
        return median_of(d, key, "bench-native-sdk")

    def line(name, a, b, unit, goal, fmt="%.1f", base=baseline):
        ratio = "%.1f" % (b / a) if a > 0 else "inf"
        print("bench: %s: %s %s vs %s %s %s = %sx (goal %s)" % (
            name, fmt % a, unit, base, fmt % b, unit, ratio, goal))

    starts = len(ours.get("first_native_ms", []))
    native, kubectl, python = (one(ours, "first_native_ms"), one(ours, "first_kubectl_ms"),
                               one(theirs, "first_python_ms"))
    what = 'process start to first result of run("true") on an existing sandboxd claim'
    line("%s, native tunnel, median of %d" % (what, starts), native, python, "ms", ">= 50x")
    line("%s, native tunnel vs our kubectl mode, median of %d" % (what, starts), native, kubectl,
         "ms", "none, kubectl's start-up", base="agentsandbox.h-kubectl-port-forward")
    line("%s, our kubectl mode, median of %d" % (what, starts), kubectl, python, "ms", "none")
    # Where the native time goes: this process's own CPU against its wall
    # time; the rest is the apiserver, kwok and sandboxd answering, which
    # no client's code can shorten (the 50x goal is python / 50).
    line("%s, native tunnel: this process's CPU vs its wall time, median of %d"
         % (what, starts), one(ours, "first_native_cpu_ms"), native, "ms",
         "none; the rest is waiting on the apiserver, kwok and sandboxd; 50x would be %.1f ms"
         % (python / 50), base="wall")
    line("%s: this process's own CPU, median of %d (Python's kubectl child not counted)"
         % (what, starts), one(ours, "first_native_cpu_ms"), one(theirs, "first_python_cpu_ms"),
         "ms", "none")
    n = int(one(ours, "hundred_n"))
    line("client RSS with %d sandboxd sandboxes open (native tunnel)" % n,
         one(ours, "hundred_rss_kib"), one(theirs, "hundred_rss_kib"), "KiB", "smaller", "%.0f")
    line("client peak RSS, %d sandboxd sandboxes" % n, one(ours, "hundred_peak_rss_kib"),
         one(theirs, "hundred_peak_rss_kib"), "KiB", "smaller", "%.0f")
    line("child processes with %d sandboxd sandboxes open" % n, one(ours, "hundred_children"),
         one(theirs, "hundred_children"), "processes", "0", "%.0f")
    line("RSS of those child processes, summed", one(ours, "hundred_children_rss_kib"),
         one(theirs, "hundred_children_rss_kib"), "KiB", "0", "%.0f")
    line("client + child processes RSS, %d sandboxd sandboxes" % n,
         one(ours, "hundred_total_rss_kib"), one(theirs, "hundred_total_rss_kib"), "KiB",
         "smaller", "%.0f")
    return 0


if __name__ == "__main__":
    sys.exit(command(sys.argv, __doc__, {"first": (first, (str, int)),
                                         "hundred": (hundred, (int, int)),
                                         "report": (report, (str, str, str))}))
