"""make bench-sandboxd, the upstream Python SDK's side (k8s-agent-sandbox[grpc]
1.0.8, the venv of tests/upstream/rules.mk), and the report of both sides.

    bench_sandboxd.py workload RUNS        the same workload as bench_sandboxd.c
    bench_sandboxd.py report OURS THEIRS BASELINE
                                           compare the result files

Same cluster (KUBECONFIG, agent-sandbox v0.5.6), warm pool (sandboxd-warmpool
in `default`, the real sandboxd in every pod) and connection as
bench_sandboxd.c: the sandboxd pod tunnel (`kubectl port-forward pod/<pod>
:8080 :9090`), commands over gRPC, files over REST. Results go to stdout as
"result <name> <value>" lines.

The first-output measure: our SDK streams a process's output as it comes;
1.0.8 has only the unary Execute, so its first output is its run()'s
result. Measured for `echo first` (where the two mean the same thing) and
for `echo first; sleep 1` (a process that goes on working after its first
line, where they do not: the report says which is which)."""
import os
import sys
import time

from sdk_measures import (command, compare, cpu_ms, file_rounds, load, median_of, peak_rss_kib,
                          result, run_true_latencies, run_true_results)

WARMPOOL = "sandboxd-warmpool"
FILE_BYTES = 64 << 20
FILE_REPS = 3  # the report takes the median
FIRST_REPS = 5


def workload(runs):
    from k8s_agent_sandbox import SandboxClient
    from k8s_agent_sandbox.models import SandboxdPodTunnelConnectionConfig

    data = os.urandom(FILE_BYTES)  # made before timing, as bench_sandboxd.c does
    client = SandboxClient(connection_config=SandboxdPodTunnelConnectionConfig())
    sandbox = None
    try:
        sandbox = client.create_sandbox(WARMPOOL, sandbox_ready_timeout=120)
        t0 = time.monotonic()  # the first call starts the pod tunnel: timed apart
        r = sandbox.commands.run("true")
        result("first_run_ms", "%.3f" % ((time.monotonic() - t0) * 1e3))
        if r.exit_code != 0:
            raise RuntimeError('run("true") exited %d' % r.exit_code)
        run_true_results(run_true_latencies(sandbox, runs))
        file_rounds(sandbox, data, FILE_REPS)

        for key, cmd in (("first_output_echo_ms", "echo first"),
                         ("first_output_echo_sleep_ms", "echo first; sleep 1")):
            for _ in range(FIRST_REPS):
                t0 = time.monotonic()
                r = sandbox.commands.run(cmd)
                ms = (time.monotonic() - t0) * 1e3
                if r.exit_code != 0 or r.stdout != "first\n":
                    raise RuntimeError("%r: exit %d, stdout %r" % (cmd, r.exit_code, r.stdout))
                result(key, "%.3f" % ms)
    finally:
        if sandbox is not None:
            sandbox.terminate()
    result("peak_rss_kib", peak_rss_kib())
    result("cpu_ms", "%.3f" % cpu_ms())
    return 0


def report(ours_path, theirs_path, baseline):
    ours, theirs = load(ours_path), load(theirs_path)
    runs = int(median_of(ours, "runs", "bench-sandboxd"))
    procs = len(ours.get("runs", []))
    reps = len(ours.get("write_read_64m_ms", []))
    firsts = len(ours.get("first_output_echo_ms", []))
    lines = [
        ('sandboxd run("true") latency, median of %d processes x %d' % (procs, runs),
         "run_true_median_ms", "ms", "faster"),
        ('sandboxd run("true") latency, best of %d (median of processes)' % runs,
         "run_true_best_ms", "ms", "faster"),
        ('sandboxd first run("true") of a process (starts the pod tunnel), median of %d' % procs,
         "first_run_ms", "ms", "none"),
        ("sandboxd 64 MiB write + read, median of %d" % reps, "write_read_64m_ms", "ms", "faster"),
        ("sandboxd 64 MiB write, median of %d" % reps, "write_64m_ms", "ms", "none, part of write + read"),
        ("sandboxd 64 MiB read, median of %d" % reps, "read_64m_ms", "ms", "none, part of write + read"),
        ("sandboxd first output of `echo first` (ours: streaming start to first stdout chunk; "
         "theirs: run), median of %d" % firsts, "first_output_echo_ms", "ms", "faster"),
        ("sandboxd first output of `echo first; sleep 1` (ours: streaming; theirs: run, which "
         "returns at exit), median of %d" % firsts, "first_output_echo_sleep_ms", "ms",
         "none; shows what streaming gives"),
        ("sandboxd peak RSS (workload process, 64 MiB files), median of %d" % procs,
         "peak_rss_kib", "KiB", "smaller"),
        ("sandboxd CPU time user+sys (workload process), median of %d" % procs, "cpu_ms", "ms", "none"),
    ]
    compare(lines, ours, theirs, baseline, "bench-sandboxd")
    return 0


if __name__ == "__main__":
    sys.exit(command(sys.argv, __doc__, {"workload": (workload, (int,)),
                                         "report": (report, (str, str, str))}))
