"""What the Python SDK sides of make bench-sdk (bench_sdk.py), make
bench-sandboxd (bench_sandboxd.py) and make bench-native-sdk
(bench_native_sdk.py) measure alike, and how they write, read and compare
their results.

A workload process prints "result <name> <value>" lines (several processes
may append to one file); load() reads a file back into name -> values, and
compare() prints one "bench: ..." line per measure, ours against theirs;
command() is a script's main (its subcommands and their arguments)."""
import resource
import statistics
import sys
import time


def result(name, value):
    print("result %s %s" % (name, value), flush=True)


def file_results(write_ms, read_ms, prefix=""):
    """One 64 MiB round: write, read and their sum, as the report reads them."""
    result(prefix + "write_64m_ms", "%.3f" % write_ms)
    result(prefix + "read_64m_ms", "%.3f" % read_ms)
    result(prefix + "write_read_64m_ms", "%.3f" % (write_ms + read_ms))


def peak_rss_kib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def cpu_ms():
    """CPU this process used (user + system; not kubectl's)."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return (ru.ru_utime + ru.ru_stime) * 1e3


def run_true_latencies(sandbox, runs):
    """run("true") `runs` times: each call's milliseconds, in order; a call
    that does not exit 0 ends the bench."""
    lat = []
    for _ in range(runs):
        t0 = time.monotonic()
        r = sandbox.commands.run("true")
        lat.append((time.monotonic() - t0) * 1e3)
        if r.exit_code != 0:
            raise RuntimeError('run("true") exited %d' % r.exit_code)
    return lat


def run_true_results(lat):
    result("runs", len(lat))
    result("run_true_median_ms", "%.3f" % statistics.median(lat))
    result("run_true_best_ms", "%.3f" % min(lat))


def file_rounds(sandbox, data, reps):
    """`data` written to bench-64m.bin and read back `reps` times, each
    round timed and checked whole."""
    for _ in range(reps):
        t0 = time.monotonic()
        sandbox.files.write("bench-64m.bin", data)
        tw = (time.monotonic() - t0) * 1e3
        t0 = time.monotonic()
        back = sandbox.files.read("bench-64m.bin")
        tr = (time.monotonic() - t0) * 1e3
        if back != data:
            raise RuntimeError("read back %d bytes, not what was written" % len(back))
        del back
        file_results(tw, tr)


def load(path):
    out = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[0] == "result":
                out.setdefault(parts[1], []).append(float(parts[2]))
    return out


def median_of(d, key, bench):
    """The median of a measure's values; a measure missing from the results
    ends the report (`bench` names it, e.g. bench-sdk)."""
    v = d.get(key)
    if not v:
        raise SystemExit("%s: no %s in the results" % (bench, key))
    return statistics.median(v)


def compare(lines, ours, theirs, baseline, bench):
    """lines: (name, key, unit, goal). Prints each measure's medians and
    theirs / ours: how many times faster, or smaller, we are."""
    for name, key, unit, goal in lines:
        a, b = median_of(ours, key, bench), median_of(theirs, key, bench)
        ratio = b / a if a > 0 else float("inf")
        fmt = "%.0f" if unit == "KiB" else "%.2f"
        print("bench: %s: %s %s vs %s %s %s = %.1fx (goal %s)" % (
            name, fmt % a, unit, baseline, fmt % b, unit, ratio, goal))


def command(argv, doc, commands):
    """A workload script's main: argv[1] names one of commands (name ->
    (function, a conversion per argument)); the rest are its arguments.
    Anything else prints the usage (doc) and returns 2."""
    fn, kinds = commands.get(argv[1] if len(argv) > 1 else "", (None, ()))
    if fn is None or len(argv) - 2 != len(kinds):
        print(doc, file=sys.stderr)
        return 2
    return fn(*[kind(a) for kind, a in zip(kinds, argv[2:])])
