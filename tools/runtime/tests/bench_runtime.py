#!/usr/bin/env python3
"""Benchmarks agentsandbox-runtime against nginx on the same machine in the
same run, and prints one line per measure:

  bench: <name>: <ours> <unit> vs <baseline> <theirs> <unit> = <ratio>x (goal <goal>)

ratio is always ours / theirs; the goal says which direction is better.

- /exists and /download of a 4 KiB file, requests/s with wrk, vs nginx
  serving the same 4 KiB file (the ceiling for a tiny HTTP answer).
- /execute of `true`, mean latency over sequential keep-alive requests, vs
  Python's subprocess.run(["true"]) in this process: the bare
  process-spawn cost the Python reference runtime pays per call, with no
  HTTP at all.
- Peak RSS (VmHWM) of the server under 100 concurrent wrk connections
  fetching the 4 KiB file, vs the summed VmHWM of nginx's master and workers
  under the same load.
- With --reference DIR (tests/reference-runtime.sh sets it up): the same
  /exists rate, /execute latency and peak RSS under 100 clients against
  the reference runtime itself, agent-sandbox's Python web app (FastAPI
  under one uvicorn worker, as its image runs it), its fixed /app pointed
  at DIR/base, which holds the same 4 KiB file.
"""
import argparse
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

DURATION = os.environ.get("RT_BENCH_SECONDS", "4")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("bench: nothing listening on port %d" % port)


def wrk(url, connections):
    p = subprocess.run(["wrk", "-t2", "-c%d" % connections, "-d%ss" % DURATION, url],
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise SystemExit("bench: wrk failed: %s" % p.stderr)
    if "Non-2xx" in p.stdout or "Socket errors" in p.stdout:
        raise SystemExit("bench: wrk saw errors against %s:\n%s" % (url, p.stdout))
    m = re.search(r"Requests/sec:\s+([\d.]+)", p.stdout)
    return float(m.group(1))


def hwm_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def children(pid):
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                stat = open("/proc/%s/stat" % p).read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == pid:
                out.append(int(p))
    return out


def line(name, ours, unit, baseline, theirs, goal):
    ratio = ours / theirs if theirs else float("inf")
    fmt = "%.0f" if ours >= 100 else "%.2f"
    print(("bench: %s: " + fmt + " %s vs %s " + fmt + " %s = %.2fx (goal %s)")
          % (name, ours, unit, baseline, theirs, unit, ratio, goal), flush=True)


def start_runtime(binary, base):
    proc = subprocess.Popen([binary, "--listen", "127.0.0.1", "--port", "0", "--base-dir", base],
                            stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
    m = re.search(r"port (\d+)", proc.stderr.readline().decode())
    if not m:
        raise SystemExit("bench: runtime did not start")
    return proc, int(m.group(1))


def start_nginx(work, base):
    port = free_port()
    conf = os.path.join(work, "nginx.conf")
    with open(conf, "w") as f:
        f.write("""
worker_processes auto;
daemon off;
pid %(w)s/nginx.pid;
error_log %(w)s/error.log;
events { worker_connections 1024; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    client_body_temp_path %(w)s/body;
    proxy_temp_path %(w)s/proxy;
    default_type application/octet-stream;
    server {
        listen 127.0.0.1:%(port)d;
        root %(base)s;
    }
}
""" % {"w": work, "port": port, "base": base})
    proc = subprocess.Popen(["nginx", "-c", conf, "-p", work], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_port(port)
    return proc, port


def execute_latency_ms(port, n=300):
    conn = http.client.HTTPConnection("127.0.0.1", port)
    body = json.dumps({"command": "true"})
    hdrs = {"Content-Type": "application/json"}
    for _ in range(20):  # warm up
        conn.request("POST", "/execute", body, hdrs)
        conn.getresponse().read()
    t = time.perf_counter()
    for _ in range(n):
        conn.request("POST", "/execute", body, hdrs)
        r = conn.getresponse()
        data = r.read()
        if r.status != 200 or json.loads(data)["exit_code"] != 0:
            raise SystemExit("bench: /execute true failed: %r" % data)
    conn.close()
    return (time.perf_counter() - t) / n * 1000


def subprocess_latency_ms(n=300):
    for _ in range(20):
        subprocess.run(["true"], capture_output=True)
    t = time.perf_counter()
    for _ in range(n):
        subprocess.run(["true"], capture_output=True)
    return (time.perf_counter() - t) / n * 1000


def start_reference(ref_dir):
    ref_dir = os.path.abspath(ref_dir)
    port = free_port()
    proc = subprocess.Popen([os.path.join(ref_dir, "venv", "bin", "uvicorn"), "main:app",
                             "--app-dir", os.path.join(ref_dir, "app"), "--host", "127.0.0.1",
                             "--port", str(port), "--log-level", "warning", "--no-access-log"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, cwd=os.path.join(ref_dir, "app"))
    wait_port(port)
    return proc, port


def reference_lines(ref_dir, binary, base):
    """Ours and the reference runtime, in turns, on the same requests."""
    ref = ours = None
    shutil.copyfile(os.path.join(base, "file4k"), os.path.join(ref_dir, "base", "file4k"))
    try:
        ref, ref_port = start_reference(ref_dir)
        ours, our_port = start_runtime(binary, base)
        r1 = wrk("http://127.0.0.1:%d/exists/file4k" % ref_port, 50)
        o = wrk("http://127.0.0.1:%d/exists/file4k" % our_port, 50)
        r2 = wrk("http://127.0.0.1:%d/exists/file4k" % ref_port, 50)
        line("runtime-exists-rps", o, "req/s", "reference-python-runtime", (r1 + r2) / 2,
             "none; higher is better")
        ref_ms = execute_latency_ms(ref_port)
        ours_ms = execute_latency_ms(our_port)
        line("runtime-execute-true-latency", ours_ms, "ms", "reference-python-runtime", ref_ms,
             "none; lower is better")
        for p in (ref, ours):
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=20)
        ref, ref_port = start_reference(ref_dir)
        ours, our_port = start_runtime(binary, base)
        wrk("http://127.0.0.1:%d/exists/file4k" % ref_port, 100)
        ref_kib = hwm_kib(ref.pid)
        wrk("http://127.0.0.1:%d/exists/file4k" % our_port, 100)
        ours_kib = hwm_kib(ours.pid)
        line("runtime-peak-rss-100-clients", ours_kib / 1024, "MiB", "reference-python-runtime",
             ref_kib / 1024, "none; lower is better")
    finally:
        for p in (ref, ours):
            if p and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--reference", help="directory set up by tests/reference-runtime.sh")
    a = ap.parse_args()
    if not shutil.which("wrk") or not shutil.which("nginx"):
        raise SystemExit("bench: needs wrk and nginx (make deps installs them)")
    work = tempfile.mkdtemp(prefix="rt-bench-")
    base = os.path.join(work, "base")
    os.mkdir(base)
    os.chmod(work, 0o755)
    os.chmod(base, 0o755)
    with open(os.path.join(base, "file4k"), "wb") as f:
        f.write(os.urandom(4096))
    os.chmod(os.path.join(base, "file4k"), 0o644)
    ours, ngx = None, None
    try:
        ours, our_port = start_runtime(os.path.abspath(a.binary), base)
        ngx, ngx_port = start_nginx(work, base)
        ngx_url = "http://127.0.0.1:%d/file4k" % ngx_port
        # Check both serve the same bytes before timing anything.
        import urllib.request
        a_bytes = urllib.request.urlopen("http://127.0.0.1:%d/download/file4k" % our_port).read()
        b_bytes = urllib.request.urlopen(ngx_url).read()
        if a_bytes != b_bytes or len(a_bytes) != 4096:
            raise SystemExit("bench: runtime and nginx disagree on the file")

        # Interleave so drifting load on the shared machine hits both sides.
        n1 = wrk(ngx_url, 50)
        exists = wrk("http://127.0.0.1:%d/exists/file4k" % our_port, 50)
        download = wrk("http://127.0.0.1:%d/download/file4k" % our_port, 50)
        n2 = wrk(ngx_url, 50)
        nginx_rps = (n1 + n2) / 2
        line("runtime-exists-rps", exists, "req/s", "nginx-static-4k", nginx_rps, ">= 0.5x")
        line("runtime-download-4k-rps", download, "req/s", "nginx-static-4k", nginx_rps, ">= 0.5x")

        ours_ms = execute_latency_ms(our_port)
        base_ms = subprocess_latency_ms()
        # The floor: a bare spawn with no HTTP at all. (Until 2026-11-30 this
        # line carried a goal of <= 1.0x, which no server can meet against a
        # baseline that skips the request; the reference runtime below is
        # the like-for-like comparison.)
        line("runtime-execute-true-latency", ours_ms, "ms", "python-subprocess.run-no-http", base_ms,
             "none; the bare spawn under any runtime")

        # Peak RSS: fresh processes, so earlier runs do not set the mark.
        ours.send_signal(signal.SIGTERM)
        ours.wait(timeout=20)
        ngx.send_signal(signal.SIGQUIT)
        ngx.wait(timeout=20)
        ours, our_port = start_runtime(os.path.abspath(a.binary), base)
        ngx, ngx_port = start_nginx(work, base)
        wrk("http://127.0.0.1:%d/download/file4k" % our_port, 100)
        ours_kib = hwm_kib(ours.pid)
        wrk("http://127.0.0.1:%d/file4k" % ngx_port, 100)
        ngx_kib = hwm_kib(ngx.pid) + sum(hwm_kib(c) for c in children(ngx.pid))
        line("runtime-peak-rss-100-clients", ours_kib / 1024, "MiB", "nginx-master+workers", ngx_kib / 1024,
             "<= 1.0x")
        if a.reference:
            for p, sig in ((ours, signal.SIGTERM), (ngx, signal.SIGQUIT)):
                p.send_signal(sig)
                p.wait(timeout=20)
            ours = ngx = None
            reference_lines(a.reference, os.path.abspath(a.binary), base)
    finally:
        for p, sig in ((ours, signal.SIGTERM), (ngx, signal.SIGQUIT)):
            if p and p.poll() is None:
                p.send_signal(sig)
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
