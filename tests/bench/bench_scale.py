"""make bench-scale: N sandboxes created at once from one process, three ways,
on one local cluster (agent-sandbox v0.5.6, warm pool python-sandbox-warmpool
in `default`), one after the other:

    bench_scale.py python N WIDTH TAG   the upstream Python SDK (version in
                                        tests/upstream/rules.mk): one
                                        SandboxClient, create_sandbox() from
                                        a ThreadPoolExecutor of WIDTH threads
    bench_scale.py floor N TAG          no client library: the N claims
                                        applied by one `kubectl apply` (one
                                        List), then `kubectl get` once a
                                        second until all are Ready (see
                                        floor_side: not `kubectl wait`)
    bench_scale.py sampler OUT          the apiserver's WATCH requests on
                                        sandboxclaims of a namespace or one
                                        claim (not the controller's)
                                        (apiserver_longrunning_requests, its
                                        /metrics through `kubectl get --raw`,
                                        the admin kubeconfig), every 0.5 s,
                                        until SIGTERM: one count per line
    bench_scale.py settle               wait until only the warm pool's
                                        sandbox and its pod are left
    bench_scale.py report DIR N WIDTH BASELINE
                                        the "bench:" lines

Our side is tests/bench/bench_scale.c. Each side prints "result <name>
<value>" lines; peak RSS is the creating process's own (ru_maxrss), taken
when every create has returned."""
import calendar
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time

POOL = "python-sandbox-warmpool"


def result(name, value):
    print("result %s %s" % (name, value), flush=True)


def rss_file_kib():
    """The file-backed part of this process's RSS (interpreter, modules'
    shared objects), as bench_scale.c reads it."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssFile:"):
                return int(line.split()[1])
    return -1


def python_side(n, width, tag):
    from concurrent.futures import ThreadPoolExecutor
    from k8s_agent_sandbox import SandboxClient

    client = SandboxClient()
    labels = {"asb-bench": tag}

    def one(_):
        return client.create_sandbox(POOL, namespace="default", sandbox_ready_timeout=900,
                                     labels=labels)

    t0 = time.monotonic()
    ok = 0
    with ThreadPoolExecutor(max_workers=width) as pool:
        futures = [pool.submit(one, i) for i in range(n)]
        for f in futures:
            try:
                f.result()
                ok += 1
            except Exception as e:  # counted: the report shows it
                print("create failed: %s" % e, file=sys.stderr)
    took = time.monotonic() - t0
    result("create_ready_s", "%.3f" % took)
    ru = resource.getrusage(resource.RUSAGE_SELF)
    result("peak_rss_kib", ru.ru_maxrss)
    result("rss_file_kib", rss_file_kib())
    result("cpu_s", "%.3f" % (ru.ru_utime + ru.ru_stime))
    result("ready", ok)
    with ThreadPoolExecutor(max_workers=32) as pool:  # untimed cleanup
        list(pool.map(lambda key: client.delete_sandbox(key[1], namespace=key[0]),
                      list(client._active_connection_sandboxes.keys())))
    return 0 if ok == n else 1


def ready_claims(tag):
    """The claims of a run and how many are Ready (one kubectl get)."""
    claims = json.loads(subprocess.run(
        ["kubectl", "get", "sandboxclaims", "-n", "default", "-l", "asb-bench=" + tag, "-o",
         "json"], check=True, capture_output=True, text=True).stdout)["items"]
    ready = [c for c in claims if any(x["type"] == "Ready" and x["status"] == "True"
                                      for x in c.get("status", {}).get("conditions", []))]
    return claims, ready


def floor_side(n, tag):
    """One kubectl apply of the n claims, then the wait for all of them to be
    Ready. Not `kubectl wait`: over 500 claims it waits for one after the
    other, each with a list and a watch of its own (0.1-0.5 s apiece here),
    and took over 15 minutes, so it measured kubectl and not the cluster.
    Instead one `kubectl get` a second until all are Ready, and the
    controller's own word: the last Ready condition's time."""
    items = [{"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxClaim",
              "metadata": {"name": "floor-%s-%d" % (tag, i), "namespace": "default",
                           "labels": {"asb-bench": tag}},
              "spec": {"warmPoolRef": {"name": POOL}}} for i in range(n)]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"apiVersion": "v1", "kind": "List", "items": items}, f)
        path = f.name
    try:
        t0 = time.monotonic()
        wall0 = time.time()
        subprocess.run(["kubectl", "apply", "-f", path], check=True, stdout=subprocess.DEVNULL)
        applied = time.monotonic() - t0
        while True:
            claims, ready = ready_claims(tag)
            if len(ready) == n:
                break
            if time.monotonic() - t0 > 1800:
                raise SystemExit("floor: not all Ready within 1800 s")
            time.sleep(1)
        took = time.monotonic() - t0
    finally:
        os.unlink(path)
    result("create_ready_s", "%.3f" % took)
    result("apply_s", "%.3f" % applied)
    result("ready", n)
    last = 0
    for c in claims:
        for cond in c.get("status", {}).get("conditions", []):
            if cond["type"] == "Ready" and cond["status"] == "True":
                last = max(last, calendar.timegm(time.strptime(cond["lastTransitionTime"],
                                                                "%Y-%m-%dT%H:%M:%SZ")))
    if last:
        result("last_ready_s", "%.0f" % (last - wall0))
    subprocess.run(["kubectl", "delete", "sandboxclaim", "-l", "asb-bench=" + tag, "-n",
                    "default", "--wait=false"], check=True, stdout=subprocess.DEVNULL)
    return 0


def claim_watches():
    out = subprocess.run(["kubectl", "get", "--raw", "/metrics"], check=True,
                         capture_output=True, text=True).stdout
    # scope "namespace": a watch of the namespace; "resource": of one object
    # (a fieldSelector on metadata.name, as one watch per claim is);
    # "cluster" is the controller's own
    keys = ['resource="sandboxclaims",scope="%s",subresource="",verb="WATCH"' % scope
            for scope in ("namespace", "resource")]
    total = 0
    for line in out.splitlines():
        if line.startswith("apiserver_longrunning_requests{") and any(k in line for k in keys):
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


def sampler(out):
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    with open(out, "a") as f:
        while not stop:
            try:
                f.write("%d\n" % claim_watches())
                f.flush()
            except subprocess.CalledProcessError:
                pass
            time.sleep(0.5)
    return 0


def settle():
    """Until the claims of a run are gone and only the warm pool's sandbox
    (and the router pod) are left, so each side starts from the same state."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        claims = json.loads(subprocess.run(
            ["kubectl", "get", "sandboxclaims", "-n", "default", "-o", "json"],
            check=True, capture_output=True, text=True).stdout)["items"]
        pods = json.loads(subprocess.run(
            ["kubectl", "get", "pods", "-n", "default", "-o", "json"],
            check=True, capture_output=True, text=True).stdout)["items"]
        ready = [p for p in pods if any(c["type"] == "Ready" and c["status"] == "True"
                                        for c in p["status"].get("conditions", []))]
        if not claims and len(pods) <= 2 and len(ready) == len(pods) and pods:
            return 0
        time.sleep(1)
    print("settle: the cluster did not settle in 600 s", file=sys.stderr)
    return 1


def read_results(path):
    res = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[0] == "result":
                res[parts[1]] = float(parts[2])
    return res


def peak(path):
    with open(path) as f:
        counts = [int(x) for x in f.read().split()]
    return max(counts) if counts else -1, len(counts)


def report(d, n, width, baseline):
    """One line per measure: bench: <name>: <ours> <unit> vs <baseline>
    <theirs> <unit> = <ratio>x (goal <goal>)."""
    ours, theirs, floor = (read_results(os.path.join(d, s + ".txt"))
                           for s in ("ours", "python", "floor"))
    (wo, so), (wp, sp), (wf, sf) = (peak(os.path.join(d, s + ".watches"))
                                    for s in ("ours", "python", "floor"))
    a, b, f = ours["create_ready_s"], theirs["create_ready_s"], floor["create_ready_s"]
    print("bench: create-to-ready of %d sandboxes from one process (width %d): %.1f s vs %s "
          "%.1f s = %.2fx (goal > 1x, faster)" % (n, width, a, baseline, b, b / a))
    print("bench: create-to-ready of %d sandboxes against the floor (one kubectl apply of the "
          "%d claims, then kubectl get until all are Ready; the apply alone %.1f s): %.1f s vs "
          "kubectl %.1f s = %.2fx (goal <= 1.1x)" % (n, n, floor.get("apply_s", 0), a, f, a / f))
    if "last_ready_s" in floor:
        print("bench: create-to-ready of %d sandboxes against the floor run's last Ready "
              "condition (the controller's clock, whole seconds after the apply began): %.1f s "
              "vs controller %.0f s = %.2fx (goal <= 1.1x)" % (n, a, floor["last_ready_s"],
                                                                 a / floor["last_ready_s"]))
    ra, rb = ours["peak_rss_kib"], theirs["peak_rss_kib"]
    print("bench: peak RSS creating %d sandboxes at once: %.1f MiB vs %s %.1f MiB = %.3fx "
          "(1/%.1f; goal <= 0.020x, 1/50)" % (n, ra / 1024, baseline, rb / 1024, ra / rb,
                                              rb / ra))
    fa, fb = ours.get("rss_file_kib", -1), theirs.get("rss_file_kib", -1)
    if fa > 0 and fb > 0:
        print("bench: peak RSS less its file-backed pages (binary and shared libraries, %.1f "
              "vs %.1f MiB): %.1f MiB vs %s %.1f MiB = %.3fx (1/%.1f; goal none, the part "
              "a client library decides)" % (fa / 1024, fb / 1024, (ra - fa) / 1024, baseline,
                                             (rb - fb) / 1024, (ra - fa) / (rb - fb),
                                             (rb - fb) / (ra - fa)))
    if "cpu_s" in ours and "cpu_s" in theirs:
        print("bench: client CPU time creating %d sandboxes: %.2f s vs %s %.2f s = %.1fx "
              "(goal none)" % (n, ours["cpu_s"], baseline, theirs["cpu_s"],
                               theirs["cpu_s"] / max(ours["cpu_s"], 0.001)))
    print("bench: apiserver WATCHes of sandboxclaims (namespace or one claim), peak while "
          "creating %d: %d vs %s %d = %.0fx fewer, kubectl %d (samples every 0.5 s: %d, %d, "
          "%d; goal O(1) for ours)" % (n, wo, baseline, wp, wp / max(wo, 1), wf, so, sp, sf))
    ok = ours.get("ready") == n and theirs.get("ready") == n
    return 0 if ok else 1


def main(argv):
    if len(argv) == 5 and argv[1] == "python":
        return python_side(int(argv[2]), int(argv[3]), argv[4])
    if len(argv) == 4 and argv[1] == "floor":
        return floor_side(int(argv[2]), argv[3])
    if len(argv) == 3 and argv[1] == "sampler":
        return sampler(argv[2])
    if len(argv) == 2 and argv[1] == "settle":
        return settle()
    if len(argv) == 6 and argv[1] == "report":
        return report(argv[2], int(argv[3]), int(argv[4]), argv[5])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
