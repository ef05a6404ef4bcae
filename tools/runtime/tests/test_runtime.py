#!/usr/bin/env python3
"""Functional tests for agentsandbox-runtime, driven by real clients: curl
and Python requests (plus a raw socket for bytes no polite client sends).

Every test starts from a real server process on 127.0.0.1 with its own base
dir. Python's shlex.split is the oracle for command splitting; os.stat for
/list. --quick leaves out the two big-data tests (the 1 GiB upload and the
50 MiB output) so the ASan+UBSan build can run the rest in a few seconds.

Prints "N passed, N failed" and exits non-zero on any failure.
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse

import requests

BINARY = None
QUICK = False


def q(path):
    """Percent-encode a path as one segment, as the SDKs do."""
    return urllib.parse.quote(path, safe="")


class Server:
    def __init__(self, env=None, args=(), base_flag=False):
        self.base = os.path.realpath(tempfile.mkdtemp(prefix="rt-base-"))
        self.outside = os.path.realpath(tempfile.mkdtemp(prefix="rt-outside-"))
        full_env = dict(os.environ)
        full_env.pop("SANDBOX_EXEC_TIMEOUT_SECONDS", None)
        full_env.pop("SANDBOX_BASE_DIR", None)
        cmd = [BINARY, "--listen", "127.0.0.1", "--port", "0"]
        if base_flag:
            cmd += ["--base-dir", self.base]
        else:
            full_env["SANDBOX_BASE_DIR"] = self.base
        full_env.update(env or {})
        self.proc = subprocess.Popen(cmd + list(args), env=full_env, stdin=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        line = self.proc.stderr.readline().decode(errors="replace")
        m = re.search(r"listening on \S+ port (\d+)", line)
        if not m:
            self.proc.kill()
            raise AssertionError("server did not start: %r" % line)
        self.port = int(m.group(1))
        self.url = "http://127.0.0.1:%d" % self.port
        self.log = [line]
        self._reader = threading.Thread(target=self._read_log, daemon=True)
        self._reader.start()

    def _read_log(self):
        for line in self.proc.stderr:
            self.log.append(line.decode(errors="replace"))

    def fd_count(self):
        return len(os.listdir("/proc/%d/fd" % self.proc.pid))

    def status_field(self, name):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith(name + ":"):
                    return int(line.split()[1])
        raise AssertionError("no %s" % name)

    def stop(self, expect_rc=0):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = "hung"
        self._reader.join(timeout=2)
        shutil.rmtree(self.base, ignore_errors=True)
        shutil.rmtree(self.outside, ignore_errors=True)
        if rc != expect_rc:
            raise AssertionError("server exit status %r, log:\n%s" % (rc, "".join(self.log[-40:])))


def execute(srv, command, session=requests):
    r = session.post(srv.url + "/execute", json={"command": command}, timeout=60)
    assert r.status_code == 200, (r.status_code, r.text[:300])
    return r.json()


def raw(srv, data, timeout=5, half_close=False):
    """Sends bytes on a fresh connection and returns everything read until
    the server closes (or timeout)."""
    s = socket.create_connection(("127.0.0.1", srv.port))
    s.settimeout(timeout)
    s.sendall(data)
    if half_close:
        s.shutdown(socket.SHUT_WR)
    out = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
    except socket.timeout:
        pass
    s.close()
    return out


def raw_status(srv, data, **kw):
    out = raw(srv, data, **kw)
    m = re.match(rb"HTTP/1\.1 (\d{3}) ", out)
    assert m, "no HTTP response: %r" % out[:200]
    return int(m.group(1)), out


def curl(*args):
    p = subprocess.run(["curl", "-sS", "-o", "-", "-w", "\n%{http_code}", *args],
                       capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    body, _, code = p.stdout.rpartition(b"\n")
    return int(code), body


def multipart(filename, content, boundary="xYzBoUnDaRy", name="file"):
    return (("--%s\r\nContent-Disposition: form-data; name=\"%s\"; filename=\"%s\"\r\n"
             "Content-Type: application/octet-stream\r\n\r\n" % (boundary, name, filename)).encode("latin-1")
            + content + ("\r\n--%s--\r\n" % boundary).encode())


def post_raw_upload(srv, body, boundary="xYzBoUnDaRy"):
    head = ("POST /upload HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
            "Content-Type: multipart/form-data; boundary=%s\r\nContent-Length: %d\r\n\r\n"
            % (boundary, len(body))).encode()
    return raw_status(srv, head + body)


def tree(path):
    out = []
    for root, dirs, files in os.walk(path):
        for n in dirs + files:
            out.append(os.path.relpath(os.path.join(root, n), path))
    return sorted(out)


# ---------------------------------------------------------------- tests

def test_health_answers_ok_to_curl_and_requests(srv):
    expect = {"status": "ok", "message": "Sandbox Runtime is active."}
    r = requests.get(srv.url + "/")
    assert r.status_code == 200 and r.json() == expect
    code, body = curl(srv.url + "/")
    assert code == 200 and json.loads(body) == expect
    r = requests.head(srv.url + "/")
    assert r.status_code == 200 and r.content == b""


def test_execute_sends_its_head_when_it_accepts_the_command(srv):
    # A command still running after 1 s gets its head sent (a proxy bounding
    # its wait for a head, like the Go sandbox-router's 30 s, lets long
    # commands through); the body follows when it ends: chunked on HTTP/1.1
    # (which requests parses), close-delimited on HTTP/1.0, the same JSON.
    # A quick command is answered whole, with a Content-Length.
    body = b'{"command": "sleep 3"}'
    s = socket.create_connection(("127.0.0.1", srv.port))
    s.settimeout(10)
    t0 = time.time()
    s.sendall(b"POST /execute HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(4096)
    t_head = time.time() - t0
    rest = head.split(b"\r\n\r\n", 1)[1]
    while not rest.endswith(b"\r\n0\r\n\r\n"):
        chunk = s.recv(4096)
        assert chunk, rest
        rest += chunk
    t_body = time.time() - t0
    s.close()
    assert head.startswith(b"HTTP/1.1 200 ") and b"Transfer-Encoding: chunked\r\n" in head, head
    assert t_head < 2.5 and t_body >= 3, (t_head, t_body)  # the head after ~1 s
    size, _, data = rest.partition(b"\r\n")
    payload = data[:int(size, 16)]
    assert json.loads(payload) == {"stdout": "", "stderr": "", "exit_code": 0}, rest
    # requests, on a kept-alive session: several in a row
    with requests.Session() as sess:
        for i in range(3):
            assert execute(srv, "echo %d" % i, sess)["stdout"] == "%d\n" % i
    r = requests.post(srv.url + "/execute", json={"command": "echo quick"}, timeout=10)
    assert r.headers.get("Content-Length") and "Transfer-Encoding" not in r.headers, r.headers
    # HTTP/1.0, a slow command: no chunks; the close ends the body
    cmd = b'{"command": "sh -c \'sleep 1.5; echo a\'"}'
    out = raw(srv, b"POST /execute HTTP/1.0\r\nContent-Type: application/json\r\n"
                   b"Content-Length: %d\r\n\r\n%s" % (len(cmd), cmd))
    h, _, b = out.partition(b"\r\n\r\n")
    assert b"Transfer-Encoding" not in h and b"Content-Length" not in h and b"Connection: close" in h, h
    assert json.loads(b) == {"stdout": "a\n", "stderr": "", "exit_code": 0}, out


def test_execute_runs_no_shell(srv):
    res = execute(srv, "echo $HOME && echo x")
    assert res == {"stdout": "$HOME && echo x\n", "stderr": "", "exit_code": 0}, res
    code, body = curl("-H", "Content-Type: application/json", "-d", '{"command": "echo hi"}', srv.url + "/execute")
    assert code == 200 and json.loads(body) == {"stdout": "hi\n", "stderr": "", "exit_code": 0}


def test_execute_splits_words_like_python_shlex(srv):
    prog = "%s -c 'import sys,json;print(json.dumps(sys.argv[1:]))' " % sys.executable
    cases = ["a b  c", "'a b' \"c d\"", r'"a \" b"', r"a\ b", r'"x\y"', "''", "a''b", "\"$HOME\" '$HOME'",
             "é ü 😀", "a\tb\nc", "\"a'b\"", "'a\"b'", r"\'", r'"\\"', r"a\\b", "x'y'\"z\"",
             "--opt=\"v w\"", "'#' # not-a-comment", "\"a\\\nb\"", "&& | ; > <"]
    s = requests.Session()
    for case in cases:
        res = execute(srv, prog + case, s)
        assert res["exit_code"] == 0, (case, res)
        got = json.loads(res["stdout"])
        assert got == shlex.split(case), (case, got, shlex.split(case))


def test_execute_reports_commands_that_cannot_start(srv):
    for command, why in [("echo 'unterminated", "No closing quotation"), ("echo \\", "No escaped character"),
                         ("no-such-program-xyz arg", "No such file or directory"), ("", "empty command"),
                         ("   ", "empty command"), ("./", "Permission denied")]:
        res = execute(srv, command)
        assert res["exit_code"] == 1 and res["stdout"] == "", (command, res)
        assert res["stderr"].startswith("Failed to execute command: ") and why in res["stderr"], (command, res)


def test_execute_returns_exit_codes_and_signals(srv):
    assert execute(srv, "sh -c 'exit 3'")["exit_code"] == 3
    assert execute(srv, "sh -c 'kill -9 $$'")["exit_code"] == -9
    res = execute(srv, "sh -c 'echo out; echo err >&2; exit 0'")
    assert res == {"stdout": "out\n", "stderr": "err\n", "exit_code": 0}, res


def test_execute_runs_in_the_base_dir_with_no_stdin(srv):
    assert execute(srv, "pwd")["stdout"] == srv.base + "\n"
    assert execute(srv, "cat")["stdout"] == ""  # stdin is at end-of-file: no hang
    # SIGPIPE is back to default for the child although the server ignores it.
    res = execute(srv, "sh -c 'yes | head -c 3; exit 0'")
    assert res["stdout"] == "y\ny", res


def test_execute_binary_output_stays_valid_json(srv):
    res = execute(srv, "printf '\\377\\000a\\342\\202\\254\\r\\n'")
    assert res["stdout"] == "\ufffd\x00a\u20ac\r\n", repr(res["stdout"])


def test_execute_rejects_bad_bodies_with_422(srv):
    u = srv.url + "/execute"
    for data, ctype in [(b"not json", "application/json"), (b'{"cmd": "x"}', "application/json"),
                        (b'{"command": 1}', "application/json"), (b'["echo"]', "application/json"),
                        (b'{"command": "x"} extra', "application/json"), (b"", "application/json"),
                        (b'{"command": "\\ud800"}', "application/json"),
                        (b'{"command": "echo"}', "text/plain")]:
        r = requests.post(u, data=data, headers={"Content-Type": ctype})
        assert r.status_code == 422, (data, r.status_code, r.text)
        assert isinstance(r.json()["detail"], list), r.text
    r = requests.post(u, data=b'{"command": "echo a", "other": [1, {"x": null}], "command": "echo b"}',
                      headers={"Content-Type": "application/json"})
    assert r.status_code == 200 and r.json()["stdout"] == "b\n", r.text
    r = requests.post(u, data=b'{"command": "echo nt"}')  # no Content-Type at all is JSON
    assert r.status_code == 200 and r.json()["stdout"] == "nt\n", r.text


def test_execute_captures_50_mib_without_deadlock(srv):
    if QUICK:
        return "skipped in --quick"
    out_n, err_n = 50 << 20, 10 << 20
    # stderr first: a server reading only stdout would deadlock here.
    cmd = ("sh -c \"head -c %d /dev/zero | tr '\\\\0' e >&2; head -c %d /dev/zero | tr '\\\\0' o\"" % (err_n, out_n))
    # A deadlock would end in execute()'s 60 s read timeout, not here.
    res = execute(srv, cmd)
    assert res["exit_code"] == 0, res["stderr"][:200]
    assert len(res["stdout"]) == out_n and res["stdout"].count("o") == out_n
    assert len(res["stderr"]) == err_n and res["stderr"].count("e") == err_n


def test_execute_ends_a_command_at_its_own_timeout_seconds(srv):
    # The Python SDK 1.0.8 sends run(command_timeout=N) as "timeout_seconds":
    # the command (its whole group) ends then, exit 124, its output so far
    # kept, "timed_out": true; a command within its limit answers as before.
    body = {"command": "sh -c 'echo before; echo err >&2; sleep 30 & echo $! > bg2.pid; sleep 30'",
            "timeout_seconds": 1}
    t = time.time()
    r = requests.post(srv.url + "/execute", json=body, timeout=60)
    took = time.time() - t
    assert r.status_code == 200, (r.status_code, r.text[:300])
    res = r.json()
    assert took < 30, took  # before the sleeps would end
    assert res["exit_code"] == 124 and res["timed_out"] is True, res
    assert res["stdout"] == "before\n", res
    assert res["stderr"] == "err\nCommand timed out after 1 seconds\n", res
    pid = int(open(os.path.join(srv.base, "bg2.pid")).read())
    deadline = time.time() + 10
    while time.time() < deadline and os.path.exists("/proc/%d" % pid):
        if open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[0] == "Z":
            break
        time.sleep(0.05)
    else:
        assert not os.path.exists("/proc/%d" % pid), "the background sleep outlived the limit"
    # within the limit, or null: the same answer as without it, no timed_out key
    for limit in (30, 2.5, None):
        r = requests.post(srv.url + "/execute", json={"command": "echo ok", "timeout_seconds": limit},
                          timeout=60)
        assert r.status_code == 200 and r.json() == {"stdout": "ok\n", "stderr": "", "exit_code": 0}, r.text
    # not a positive number: refused before anything runs, as pydantic would
    for bad in ("1", 0, -1, True, [1], 1e10):
        r = requests.post(srv.url + "/execute", json={"command": "touch ran", "timeout_seconds": bad},
                          timeout=60)
        assert r.status_code == 422 and "timeout_seconds" in r.text, (bad, r.status_code, r.text)
    assert not os.path.exists(os.path.join(srv.base, "ran"))
    # a long number is read whole (it was cut at 63 characters and judged
    # on the wrong value): 1.000...e100 is too large, 0.000...1e70 is 1e7
    for num, want in ((b"1." + b"0" * 64 + b"e100", 422), (b"0." + b"0" * 62 + b"1e70", 200)):
        r = requests.post(srv.url + "/execute", data=b'{"command": "echo n", "timeout_seconds": ' + num + b"}",
                          headers={"Content-Type": "application/json"}, timeout=60)
        assert r.status_code == want, (num, r.status_code, r.text)


def test_execute_timeout_kills_the_whole_group():
    srv = Server(env={"SANDBOX_EXEC_TIMEOUT_SECONDS": "1"})
    try:
        t = time.time()
        res = execute(srv, "sh -c 'sleep 30 & echo $! > bg.pid; sleep 30'")
        took = time.time() - t
        assert took < 30, took  # before the sleeps would end: the group was killed
        assert res["exit_code"] == 1 and res["stdout"] == "", res
        assert "timed out after 1 seconds" in res["stderr"], res
        pid = int(open(os.path.join(srv.base, "bg.pid")).read())
        deadline = time.time() + 5
        while time.time() < deadline:
            try:
                state = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[0]
            except FileNotFoundError:
                break
            if state == "Z":
                break
            time.sleep(0.05)
        else:
            raise AssertionError("background child %d survived the timeout" % pid)
        # The server still works after a timeout.
        assert execute(srv, "echo ok")["stdout"] == "ok\n"
    finally:
        srv.stop()


def test_slow_upload_does_not_block_execute(srv):
    result = {}
    executed = threading.Event()

    def slow_body():
        yield b"--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"slow.txt\"\r\n\r\n"
        for i in range(40):
            time.sleep(0.1)
            yield b"x" * 10
        # The body ends only after the command was answered: an order, so
        # a loaded machine cannot turn this into a race.
        executed.wait(60)
        yield b"\r\n--B--\r\n"

    def upload():
        r = requests.post(srv.url + "/upload", data=slow_body(),
                          headers={"Content-Type": "multipart/form-data; boundary=B"})
        result["status"] = r.status_code

    th = threading.Thread(target=upload)
    th.start()
    time.sleep(0.3)
    assert execute(srv, "true")["exit_code"] == 0
    assert th.is_alive(), "upload finished before the command: it proves nothing"
    executed.set()
    th.join()
    assert result["status"] == 200
    assert open(os.path.join(srv.base, "slow.txt"), "rb").read() == b"x" * 400


def test_hundred_concurrent_requests(srv):
    with open(os.path.join(srv.base, "f.txt"), "wb") as f:
        f.write(b"data" * 1000)
    barrier = threading.Barrier(100)

    def one(i):
        barrier.wait()
        if i % 3 == 0:
            res = execute(srv, "echo %d" % i)
            return res["stdout"] == "%d\n" % i
        if i % 3 == 1:
            r = requests.get(srv.url + "/download/f.txt", timeout=30)
            return r.status_code == 200 and r.content == b"data" * 1000
        r = requests.get(srv.url + "/exists/f.txt", timeout=30)
        return r.json() == {"path": "f.txt", "exists": True}

    with concurrent.futures.ThreadPoolExecutor(100) as ex:
        results = list(ex.map(one, range(100)))
    assert all(results), results.count(False)


def test_upload_writes_files_and_creates_parents(srv):
    data = os.urandom(100000)
    r = requests.post(srv.url + "/upload", files={"file": ("d1/d2/f.bin", data)})
    assert r.status_code == 200 and r.json() == {"message": "File 'd1/d2/f.bin' uploaded successfully."}, r.text
    assert open(os.path.join(srv.base, "d1/d2/f.bin"), "rb").read() == data
    r = requests.post(srv.url + "/upload", files={"file": ("/abs/c.txt", b"abs")})
    assert r.status_code == 200 and r.json()["message"] == "File '/abs/c.txt' uploaded successfully."
    assert open(os.path.join(srv.base, "abs/c.txt"), "rb").read() == b"abs"
    # curl sends Content-Length (and Expect: 100-continue above 1 MiB).
    src = os.path.join(srv.outside, "src.bin")
    with open(src, "wb") as f:
        f.write(os.urandom(3 << 20))
    code, body = curl("-F", "file=@%s;filename=big/curl.bin" % src, srv.url + "/upload")
    assert code == 200, body
    assert open(os.path.join(srv.base, "big/curl.bin"), "rb").read() == open(src, "rb").read()
    # Other form fields around the file part are ignored.
    r = requests.post(srv.url + "/upload", data={"note": "n"}, files={"file": ("n.txt", b"n")})
    assert r.status_code == 200 and open(os.path.join(srv.base, "n.txt"), "rb").read() == b"n"
    # Non-ASCII names go through as UTF-8, and come back with RFC 5987 quoting.
    r = requests.post(srv.url + "/upload", files={"file": ("ü/é €.txt", b"unicode")})
    assert r.status_code == 200 and r.json()["message"] == "File 'ü/é €.txt' uploaded successfully.", r.text
    r = requests.get(srv.url + "/download/" + q("ü/é €.txt"))
    assert r.content == b"unicode", r.status_code
    assert r.headers["Content-Disposition"] == "attachment; filename*=utf-8''%C3%BC/%C3%A9%20%E2%82%AC.txt", r.headers
    # An empty file is a file.
    r = requests.post(srv.url + "/upload", files={"file": ("empty", b"")})
    assert r.status_code == 200 and os.path.getsize(os.path.join(srv.base, "empty")) == 0


def test_upload_filename_escapes_decode_like_python_multipart(srv):
    # Only \\ and \" are escapes in the quoted filename (python-multipart,
    # the reference's parser, decodes exactly those); any other backslash
    # is a byte of the name.
    cases = [(r'quo\"te.txt', 'quo"te.txt'), (r'back\\slash.txt', 'back\\slash.txt'),
             (r'bare\slash.txt', 'bare\\slash.txt'), (r'both\\\"x', 'both\\"x'),
             ('pct%22.txt', 'pct%22.txt'), ('sp ace.txt', 'sp ace.txt')]
    for sent, stored in cases:
        code, out = post_raw_upload(srv, multipart(sent, b"data:" + stored.encode()))
        assert code == 200, (sent, out[-200:])
        path = os.path.join(srv.base, stored)
        assert os.path.isfile(path), (sent, stored, tree(srv.base))
        assert open(path, "rb").read() == b"data:" + stored.encode()
        r = requests.get(srv.url + "/download/" + q(stored))
        assert r.status_code == 200 and r.content == b"data:" + stored.encode(), (stored, r.status_code)


def test_upload_replaces_atomically_and_keeps_mode(srv):
    p = os.path.join(srv.base, "keep.sh")
    with open(p, "wb") as f:
        f.write(b"old contents that are longer")
    os.chmod(p, 0o750)
    r = requests.post(srv.url + "/upload", files={"file": ("keep.sh", b"new")})
    assert r.status_code == 200
    assert open(p, "rb").read() == b"new" and (os.stat(p).st_mode & 0o777) == 0o750
    assert tree(srv.base) == ["keep.sh"], tree(srv.base)  # no temporary left behind
    r = requests.post(srv.url + "/upload", files={"file": ("", b"x")})
    assert r.status_code == 500 and r.json()["message"].startswith("File upload failed:"), r.text
    os.mkdir(os.path.join(srv.base, "adir"))
    r = requests.post(srv.url + "/upload", files={"file": ("adir", b"x")})
    assert r.status_code == 500 and "Is a directory" in r.json()["message"], r.text
    r = requests.post(srv.url + "/upload", files={"file": ("keep.sh/x", b"x")})
    assert r.status_code == 500 and "Not a directory" in r.json()["message"], r.text


def test_upload_without_a_file_part_is_422(srv):
    r = requests.post(srv.url + "/upload", data={"other": "x"}, files={"notfile": ("a", b"a")})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "file"], r.text
    r = requests.post(srv.url + "/upload", data=b"plain", headers={"Content-Type": "text/plain"})
    assert r.status_code == 422, r.text
    status, out = post_raw_upload(srv, b"--xYzBoUnDaRy\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nv\r\n--xYzBoUnDaRy--\r\n")
    assert status == 422, out
    status, out = post_raw_upload(srv, b"no boundary anywhere")
    assert status == 400, out
    assert tree(srv.base) == []


def test_upload_path_escapes_are_denied_and_touch_nothing(srv):
    os.symlink(srv.outside, os.path.join(srv.base, "out_abs"))
    os.symlink(os.path.relpath(srv.outside, srv.base), os.path.join(srv.base, "out_rel"))
    os.symlink("/etc", os.path.join(srv.base, "etc_link"))
    before = tree(srv.base)
    for name in ["../x", "a/../../x", "newdir/../../x", "out_abs/x", "out_rel/x", "out_abs/new/deeper/x",
                 "etc_link/x", "//../x", "./../x"]:
        r = requests.post(srv.url + "/upload", files={"file": (name, b"pwned")})
        assert r.status_code == 403 and r.json() == {"message": "Access denied"}, (name, r.status_code, r.text)
    status, out = post_raw_upload(srv, multipart("a\x00b", b"pwned"))
    assert status == 403, out
    assert tree(srv.base) == before, tree(srv.base)
    assert tree(srv.outside) == [], tree(srv.outside)


def test_upload_cut_off_leaves_no_file(srv):
    body = multipart("cut.bin", b"y" * 100000)
    head = ("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=xYzBoUnDaRy\r\n"
            "Content-Length: %d\r\n\r\n" % (len(body) + 1000)).encode()
    s = socket.create_connection(("127.0.0.1", srv.port))
    s.sendall(head + body[:60000])
    time.sleep(0.2)
    s.close()
    deadline = time.time() + 3
    while time.time() < deadline and tree(srv.base):
        time.sleep(0.05)
    assert tree(srv.base) == [], tree(srv.base)


def test_download_returns_bytes_or_404(srv):
    data = bytes(range(256)) * 1000
    os.makedirs(os.path.join(srv.base, "d"))
    with open(os.path.join(srv.base, "d/b.bin"), "wb") as f:
        f.write(data)
    r = requests.get(srv.url + "/download/" + q("d/b.bin"))
    assert r.status_code == 200 and r.content == data
    assert r.headers["Content-Type"] == "application/octet-stream"
    code, body = curl(srv.url + "/download/d%2Fb.bin")
    assert code == 200 and body == data
    code, body = curl(srv.url + "/download/d/b.bin")  # unencoded slashes work too
    assert code == 200 and body == data
    r = requests.get(srv.url + "/download/" + q("/d/b.bin"))  # leading slash dropped
    assert r.status_code == 200 and r.content == data
    for missing in ["nope", "d", "d/b.bin/x", ""]:
        r = requests.get(srv.url + "/download/" + q(missing))
        assert r.status_code == 404 and r.json() == {"message": "File not found"}, (missing, r.text)
    r = requests.head(srv.url + "/download/" + q("d/b.bin"))
    assert r.status_code == 200 and r.headers["Content-Length"] == str(len(data)) and r.content == b""
    small = b"0123456789" * 409 + b"abcdef"  # 4 KiB: the single-writev path
    with open(os.path.join(srv.base, "small"), "wb") as f:
        f.write(small)
    s = requests.Session()
    for _ in range(3):
        assert s.get(srv.url + "/download/small").content == small


def test_download_path_escapes_are_denied(srv):
    os.symlink("/etc", os.path.join(srv.base, "link"))
    os.symlink(srv.outside, os.path.join(srv.base, "out"))
    with open(os.path.join(srv.outside, "secret"), "w") as f:
        f.write("secret")
    os.symlink(os.path.join(srv.outside, "secret"), os.path.join(srv.base, "secret_link"))
    for p in ["../etc/passwd", "link/passwd", "out/secret", "secret_link", "a/../../x", "../", "link"]:
        r = requests.get(srv.url + "/download/" + q(p))
        assert r.status_code == 403 and r.json() == {"message": "Access denied"}, (p, r.status_code)
    for target in ["/download/..%2F..%2Fetc%2Fpasswd", "/download/../../etc/passwd", "/download/%2e%2e%2fx",
                   "/download/a%00b", "/exists/..", "/list/../"]:
        status, out = raw_status(srv, ("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % target).encode())
        assert status == 403, (target, out[:200])
    status, out = raw_status(srv, b"GET /download/%zz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert status == 400, out
    # An absolute path is relative to the base, as in the reference.
    r = requests.get(srv.url + "/download/" + q("/etc/passwd"))
    assert r.status_code == 404, r.status_code


def test_symlinks_inside_the_base_are_followed(srv):
    os.makedirs(os.path.join(srv.base, "real/sub"))
    with open(os.path.join(srv.base, "real/sub/f"), "w") as f:
        f.write("inside")
    os.symlink(os.path.join(srv.base, "real"), os.path.join(srv.base, "abs_in"))
    os.symlink("real/sub", os.path.join(srv.base, "rel_in"))
    os.symlink("loop", os.path.join(srv.base, "loop"))
    assert requests.get(srv.url + "/download/" + q("abs_in/sub/f")).content == b"inside"
    assert requests.get(srv.url + "/download/" + q("rel_in/f")).content == b"inside"
    assert requests.get(srv.url + "/download/" + q("rel_in/../sub/f")).content == b"inside"
    assert requests.get(srv.url + "/exists/" + q("abs_in/sub")).json()["exists"] is True
    assert requests.get(srv.url + "/exists/" + q("loop")).json()["exists"] is False
    assert requests.get(srv.url + "/download/loop").status_code == 404
    r = requests.post(srv.url + "/upload", files={"file": ("rel_in/new.txt", b"via link")})
    assert r.status_code == 200
    assert open(os.path.join(srv.base, "real/sub/new.txt"), "rb").read() == b"via link"


def test_list_matches_os_stat(srv):
    os.makedirs(os.path.join(srv.base, "dir/inner"))
    with open(os.path.join(srv.base, "dir/a.txt"), "wb") as f:
        f.write(b"12345")
    os.symlink("/etc", os.path.join(srv.base, "dir/etc_link"))
    os.symlink("inner", os.path.join(srv.base, "dir/in_link"))
    os.symlink("nowhere", os.path.join(srv.base, "dir/dangling"))
    r = requests.get(srv.url + "/list/" + q("dir"))
    assert r.status_code == 200, r.text
    got = {e["name"]: e for e in r.json()}
    assert set(got) == {"inner", "a.txt", "etc_link", "in_link", "dangling"}, got
    for name in ["inner", "a.txt", "in_link"]:
        st = os.stat(os.path.join(srv.base, "dir", name))
        e = got[name]
        assert e["size"] == st.st_size and e["mod_time"] == st.st_mtime, (name, e, st)
        assert e["type"] == ("directory" if name != "a.txt" else "file"), e
    # A link out of the base is described as the link itself, not its target.
    # So is a dangling link (the reference's whole listing fails with 500).
    for name in ["etc_link", "dangling"]:
        lst = os.lstat(os.path.join(srv.base, "dir", name))
        e = got[name]
        assert e["type"] == "file" and e["size"] == lst.st_size and e["mod_time"] == lst.st_mtime, (name, e)
    code, body = curl(srv.url + "/list/")
    assert code == 200 and [e["name"] for e in json.loads(body)] == ["dir"]
    for p in ["dir/a.txt", "missing"]:
        r = requests.get(srv.url + "/list/" + q(p))
        assert r.status_code == 404 and r.json() == {"message": "Path is not a directory"}, r.text
    for p in ["../", "dir/etc_link", "../../", "dir/../.."]:
        r = requests.get(srv.url + "/list/" + q(p))
        assert r.status_code == 403 and r.json() == {"message": "Access denied"}, (p, r.text)


def test_exists_reports_decoded_path(srv):
    open(os.path.join(srv.base, "here.txt"), "w").close()
    os.symlink(srv.outside, os.path.join(srv.base, "out"))
    r = requests.get(srv.url + "/exists/" + q("/here.txt"))
    assert r.json() == {"path": "/here.txt", "exists": True}, r.text
    r = requests.get(srv.url + "/exists/" + q("gone/ü.txt"))
    assert r.json() == {"path": "gone/ü.txt", "exists": False}, r.text
    code, body = curl(srv.url + "/exists/here.txt")
    assert code == 200 and json.loads(body)["exists"] is True
    for p in ["../x", "out", "out/x", "a\x00"]:
        r = requests.get(srv.url + "/exists/" + q(p))
        assert r.status_code == 403 and r.json() == {"message": "Access denied"}, (p, r.text)


def test_malformed_http_gets_clear_errors(srv):
    H = b"Host: x\r\n"
    cases = [
        (b"garbage\r\n\r\n", 400, "malformed request line"),
        (b"GET / HTTP/2.0\r\n" + H + b"\r\n", 505, "HTTP version"),
        (b"GET / HTTP/1.1\nHost: x\n\n", 400, "CRLF"),
        (b"GET  / HTTP/1.1\r\n" + H + b"\r\n", 400, "malformed request line"),
        (b"GET / HTTP/1.1\r\n" + H + b"Bad Header: x\r\n\r\n", 400, "header name"),
        (b"GET / HTTP/1.1\r\n" + H + b"X: a\x01b\r\n\r\n", 400, "control character"),
        (b"GET / HTTP/1.1\r\n" + H + b" folded: x\r\n\r\n", 400, "header"),
        (b"GET http://evil/ HTTP/1.1\r\n" + H + b"\r\n", 400, "must start with /"),
        (b"GET / HTTP/1.1\r\n\r\n", 400, "missing Host"),
        (b"GET / HTTP/1.1\r\n" + H + H + b"\r\n", 400, "repeated Host"),
        (b"GET / HTTP/1.1\r\n" + H + b"X-Big: " + b"a" * 20000 + b"\r\n\r\n", 431, "max-header-bytes"),
        (b"GET / HTTP/1.1\r\n" + H + b"X: y\r\n" * 101 + b"\r\n", 431, "100 header fields"),
        (b"POST /execute HTTP/1.1\r\n" + H + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
         "both Content-Length and Transfer-Encoding"),
        (b"POST /execute HTTP/1.1\r\n" + H + b"Content-Length: 5\r\nContent-Length: 6\r\n\r\n", 400, "conflicting"),
        (b"POST /execute HTTP/1.1\r\n" + H + b"Content-Length: -1\r\n\r\n", 400, "invalid Content-Length"),
        (b"POST /execute HTTP/1.1\r\n" + H + b"Content-Length: 99999999999999999999999\r\n\r\n", 400, "invalid Content-Length"),
        (b"POST /execute HTTP/1.1\r\n" + H + b"Transfer-Encoding: gzip\r\n\r\n", 501, "chunked"),
        (b"POST /execute HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "needs HTTP/1.1"),
        (b"POST /execute HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n", 400, "body"),
        (b"POST /execute HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n", 400, "body"),
        (b"POST /execute HTTP/1.1\r\n" + H + b"Content-Length: 10\r\n\r\nshort", 400, "body"),
        (b"POST /execute HTTP/1.1\r\n" + H + b"Expect: magic\r\n\r\n", 417, "100-continue"),
        (b"GET /nowhere HTTP/1.1\r\n" + H + b"\r\n", 404, "Not Found"),
        (b"DELETE /upload HTTP/1.1\r\n" + H + b"\r\n", 405, "Method Not Allowed"),
        (b"POST /download/x HTTP/1.1\r\n" + H + b"Content-Length: 0\r\n\r\n", 405, "Method Not Allowed"),
    ]
    for data, want, why in cases:
        status, out = raw_status(srv, data, half_close=True)
        assert status == want, (data[:60], status, out[:200])
        body = json.loads(out.split(b"\r\n\r\n", 1)[1])  # every error is a JSON body
        assert why in body["detail"], (data[:60], body)
    # A half-sent head is not answered with anything but a close (no crash).
    assert raw(srv, b"GET / HTTP/1.1\r\nHost:", timeout=1, half_close=True) == b""
    r = requests.get(srv.url + "/nowhere")
    assert r.status_code == 404 and r.json() == {"detail": "Not Found"}
    # The server is unharmed by all of that.
    assert requests.get(srv.url + "/").status_code == 200


def test_body_limits_answer_413():
    srv = Server(args=["--max-body-bytes", "5000", "--max-json-bytes", "200", "--max-header-bytes", "1024"],
                 base_flag=True)
    try:
        r = requests.post(srv.url + "/upload", files={"file": ("big", b"z" * 6000)})
        assert r.status_code == 413, r.status_code
        r = requests.post(srv.url + "/upload", files={"file": ("ok", b"z" * 1000)})
        assert r.status_code == 200
        r = requests.post(srv.url + "/execute", json={"command": "echo " + "a" * 300})
        assert r.status_code == 413, r.status_code

        def gen():
            for _ in range(10):
                yield b"z" * 1000
        r = requests.post(srv.url + "/upload", data=gen(), headers={"Content-Type": "multipart/form-data; boundary=q"})
        assert r.status_code == 413, r.status_code
        r = requests.get(srv.url + "/", headers={"X-Pad": "p" * 2000})
        assert r.status_code == 431, r.status_code
        code, _ = curl("-F", "file=@/dev/null;filename=x", "-H", "X-Pad: " + "p" * 2000, srv.url + "/upload")
        assert code == 431
        assert tree(srv.base) == ["ok"], tree(srv.base)
    finally:
        srv.stop()


def test_keep_alive_and_pipelining(srv):
    two = b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /exists/a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    out = raw(srv, two)
    assert out.count(b"HTTP/1.1 200 OK") == 2, out
    assert b'"path":"a","exists":false' in out
    # Chunked request bodies and pipelining after them.
    body = b'{"command": "echo chunked"}'
    req = (b"POST /execute HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n"
           + b"%x;ext=1\r\n%s\r\n0\r\nTrailer: t\r\n\r\n" % (len(body), body)
           + b"GET / HTTP/1.0\r\n\r\n")
    out = raw(srv, req)
    assert out.count(b"HTTP/1.1 200 OK") == 2 and b"chunked\\n" in out, out
    s = requests.Session()
    for i in range(30):
        assert s.get(srv.url + "/exists/x").status_code == 200
    # Pipelined downloads: the small-file fast path must not eat the next request.
    with open(os.path.join(srv.base, "p.bin"), "wb") as f:
        f.write(b"P" * 3000)
    out = raw(srv, b"GET /download/p.bin HTTP/1.1\r\nHost: x\r\n\r\n" * 3
              + b"GET /exists/p.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert out.count(b"HTTP/1.1 200 OK") == 4 and out.count(b"P" * 3000) == 3, out[:300]
    assert out.endswith(b'{"path":"p.bin","exists":true}'), out[-100:]


def test_no_fd_or_child_leaks(srv):
    s = requests.Session()
    s.get(srv.url + "/")
    time.sleep(0.2)
    before = srv.fd_count()
    open(os.path.join(srv.base, "f"), "w").close()
    for i in range(20):
        execute(srv, "echo %d" % i, s)
        execute(srv, "no-such-program", s)
        s.post(srv.url + "/upload", files={"file": ("u/%d" % i, b"x")})
        s.post(srv.url + "/upload", files={"file": ("../x", b"x")})
        s.get(srv.url + "/download/f")
        s.get(srv.url + "/list/u")
        s.get(srv.url + "/exists/..%2Fx")
        raw(srv, b"bad request\r\n\r\n")
    s.close()
    deadline = time.time() + 5
    while time.time() < deadline and srv.fd_count() > before:
        time.sleep(0.05)
    assert srv.fd_count() <= before, (before, os.listdir("/proc/%d/fd" % srv.proc.pid))
    zombies = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                stat = open("/proc/%s/stat" % pid).read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == srv.proc.pid and stat[0] == "Z":
                zombies.append(pid)
    assert not zombies, zombies


def test_sigterm_stops_promptly_with_idle_connections():
    srv = Server()
    s = socket.create_connection(("127.0.0.1", srv.port))
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    s.recv(4096)  # now an idle keep-alive connection
    t = time.time()
    srv.proc.send_signal(signal.SIGTERM)
    rc = srv.proc.wait(timeout=10)
    # before the 10 s --shutdown-grace: the idle connection did not hold it
    assert rc == 0 and time.time() - t < 10, (rc, time.time() - t)
    s.close()
    srv.stop()


def test_bad_flags_and_environment_fail_clearly():
    def run(args, env=None):
        e = dict(os.environ)
        e.update(env or {})
        return subprocess.run([BINARY] + args, env=e, capture_output=True, text=True, timeout=10)
    p = run(["--help"])
    assert p.returncode == 0 and "--base-dir" in p.stdout and "SANDBOX_EXEC_TIMEOUT_SECONDS" in p.stdout
    for args, env, why in [(["--port", "70000"], None, "bad value for --port"),
                           (["--bogus", "1"], None, "unknown option --bogus"),
                           (["--port"], None, "missing value"),
                           (["--listen", "localhost", "--base-dir", "/"], None, "not an IPv4 or IPv6 address"),
                           (["--base-dir", "/nonexistent-rt-dir"], None, "No such file or directory"),
                           (["--exec-timeout", "-1"], None, "bad value for --exec-timeout")]:
        p = run(args, env)
        assert p.returncode == 2 and why in p.stderr, (args, p.returncode, p.stderr)


def test_expect_100_continue_is_honoured(srv):
    body = multipart("exp.txt", b"expected")
    head = ("POST /upload HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nConnection: close\r\n"
            "Content-Type: multipart/form-data; boundary=xYzBoUnDaRy\r\nContent-Length: %d\r\n\r\n" % len(body)).encode()
    s = socket.create_connection(("127.0.0.1", srv.port))
    s.settimeout(5)
    s.sendall(head)
    assert s.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
    s.sendall(body)
    out = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        out += chunk
    s.close()
    assert out.startswith(b"HTTP/1.1 200 OK"), out
    assert open(os.path.join(srv.base, "exp.txt"), "rb").read() == b"expected"
    # HTTP/1.0 keep-alive is answered as such.
    out = raw(srv, b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET / HTTP/1.0\r\n\r\n")
    assert out.count(b"200 OK") == 2 and b"Connection: keep-alive" in out, out


def test_output_over_the_cap_is_cut_with_a_note():
    srv = Server(args=["--max-output-bytes", "1000"])
    try:
        res = execute(srv, "sh -c 'head -c 300000 /dev/zero | tr \"\\\\0\" a; echo done >&2'")
        assert res["exit_code"] == 0, res
        assert res["stdout"].startswith("a" * 1000) and "stdout cut after 1000 bytes" in res["stdout"], res["stdout"][-200:]
        assert res["stderr"] == "done\n", res
    finally:
        srv.stop()


def test_stalled_clients_are_timed_out():
    srv = Server(args=["--header-timeout", "1", "--idle-timeout", "1", "--max-connections", "2"])
    try:
        # A head trickled past the header timeout gets 408; an idle one is closed.
        s = socket.create_connection(("127.0.0.1", srv.port))
        s.settimeout(10)
        for piece in [b"GET / HTTP/1.1\r\n", b"Host: x\r\n", b"X-Slow: 1\r\n", b"X-Slow: 2\r\n"]:
            try:
                s.sendall(piece)
            except OSError:
                break
            time.sleep(0.6)
        out = b""
        try:
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                out += chunk
        except OSError:
            pass
        s.close()
        assert out.startswith(b"HTTP/1.1 408 "), out  # the header timeout's answer (idle closes quietly)
        idle = socket.create_connection(("127.0.0.1", srv.port))
        idle.settimeout(10)
        assert idle.recv(10) == b""  # closed by the server after --idle-timeout
    finally:
        srv.stop()


def test_a_full_server_sheds_waiting_connections_and_refuses_only_when_all_work():
    """Issue 20: a connection over --max-connections is accepted, not left
    in the backlog: it takes the slot of the connection waiting longest for
    its client, or gets a 503 when every slot runs a request."""
    srv = Server(args=["--max-connections", "2"])
    try:
        # Two connections that send nothing fill the server; a third is
        # served at once in the slot of the older one, which is closed.
        a = socket.create_connection(("127.0.0.1", srv.port))
        a.settimeout(10)
        assert raw_status(srv, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")[0] == 200
        b = socket.create_connection(("127.0.0.1", srv.port))
        b.settimeout(10)
        assert raw_status(srv, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")[0] == 200
        r = requests.get(srv.url + "/", timeout=10)
        assert r.status_code == 200, r.status_code
        assert a.recv(10) == b"" and b.recv(10) == b""  # both shed, oldest first
        a.close()
        b.close()
        # Two slots running commands are not shed: a third client gets a
        # 503 at once instead of waiting in the backlog.
        def run(i):
            return execute(srv, "sh -c 'touch started%d; while [ ! -e release ]; do sleep 0.05; done'" % i)
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            running = [pool.submit(run, i) for i in (1, 2)]
            deadline = time.time() + 30
            while not all(os.path.exists(os.path.join(srv.base, "started%d" % i)) for i in (1, 2)):
                assert time.time() < deadline, "commands did not start"
                time.sleep(0.05)
            r = requests.get(srv.url + "/", timeout=10)
            assert r.status_code == 503 and r.headers["Retry-After"] == "1", (r.status_code, r.headers)
            assert "every connection slot" in r.json()["detail"], r.text
            open(os.path.join(srv.base, "release"), "w").close()
            assert [f.result()["exit_code"] for f in running] == [0, 0]
        assert requests.get(srv.url + "/", timeout=10).status_code == 200
        # The log says what was shed and refused (a line a second at most).
        deadline = time.time() + 10
        while True:
            counts = [tuple(map(int, m.groups())) for m in
                      (re.search(r"load: closed \d+ .*\((\d+) that sent nothing.* (\d+) refused with 503", l) for l in srv.log) if m]
            if sum(c[0] for c in counts) >= 2 and sum(c[1] for c in counts) == 1:
                break
            assert time.time() < deadline, srv.log[-5:]
            time.sleep(0.1)
    finally:
        srv.stop()


def test_when_slots_run_short_silent_and_stalled_clients_go_sooner():
    """Issue 20: with three of four slots taken, a connection that sent
    nothing is closed after about 5 s, and ones stalled in a request head or
    body after about 10 s, long before the 60 s idle and 30 s header
    timeouts; the upload that was cut off leaves no file behind."""
    srv = Server(args=["--max-connections", "4"])
    try:
        t0 = time.time()
        idle = socket.create_connection(("127.0.0.1", srv.port))
        head = socket.create_connection(("127.0.0.1", srv.port))
        head.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
        body = multipart("stalled.txt", b"x" * 1000)
        bodies = []
        for _ in range(2):
            s = socket.create_connection(("127.0.0.1", srv.port))
            s.sendall(("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
                       "Content-Type: multipart/form-data; boundary=xYzBoUnDaRy\r\n\r\n" % len(body)).encode()
                      + body[:200])
            bodies.append(s)
        closed_after = []
        for s in [idle, head] + bodies:
            s.settimeout(28)  # under the 30 s header and 60 s idle timeouts
            assert s.recv(4096) == b"", "answered instead of closed"
            closed_after.append(round(time.time() - t0, 1))
            s.close()
        deadline = time.time() + 10  # the thread removes its temporary file after the close
        while os.listdir(srv.base):
            assert time.time() < deadline, os.listdir(srv.base)
            time.sleep(0.05)
        assert requests.get(srv.url + "/", timeout=10).status_code == 200
        deadline = time.time() + 5
        while True:
            totals = [0, 0, 0, 0]
            for l in srv.log:
                m = re.search(r"\((\d+) that sent nothing, (\d+) in a request head, (\d+) idle between "
                              r"requests, (\d+) in a body\)", l)
                if m:
                    totals = [a + int(b) for a, b in zip(totals, m.groups())]
            if totals == [1, 1, 0, 2]:
                break
            assert time.time() < deadline, (totals, srv.log)
            time.sleep(0.1)
        return "closed after %s s" % closed_after
    finally:
        srv.stop()


def _exec_timeout_in_force(value):
    """Starts the server with SANDBOX_EXEC_TIMEOUT_SECONDS=value (bytes) and
    returns (timeout it reports, the lines before that report)."""
    env = dict(os.environb)
    env.pop(b"SANDBOX_BASE_DIR", None)
    env[b"SANDBOX_EXEC_TIMEOUT_SECONDS"] = value
    base = tempfile.mkdtemp(prefix="rt-base-")
    p = subprocess.Popen([BINARY, "--listen", "127.0.0.1", "--port", "0", "--base-dir", base],
                         env=env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        lines = []
        while True:
            line = p.stderr.readline().decode(errors="replace")
            assert line, "server exited: %r" % lines
            m = re.search(r"listening on .* exec timeout (\S+)s$", line.strip())
            if m:
                return float(m.group(1)), lines
            lines.append(line)
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=20) == 0
        shutil.rmtree(base, ignore_errors=True)


def test_exec_timeout_env_is_read_as_the_reference_reads_it():
    """Issue 20: agent-sandbox's python runtime takes whatever Python's
    float() takes, if finite and above 0, and otherwise warns and uses 300
    (a pod must not crash-loop on a typo). Python's float() is the oracle."""
    import math
    cases = ["3 ", " 3", "\t7\n", "1e8", "12345678901", "1e300", "5e-324", "+.5", "3.", "0.25",
             "1_0", "1_000.5", "1e1_0", "\u00a03\u3000", "\u20003", "\u0663\u0660", "\uff11\uff12",
             "\u0663_\u0660", "\x853",
             "", "  ", "soon", "0", "-1", "-0", "inf", "Infinity", "nan", "1e400", "1e-400", "0x10",
             "1__0", "_1", "1_", "1_.5", "1_e5", "1e", "1e+", ".", "3 3", "\x1c3", "3\x1f", "\x7f3", "3s",
             "\u00ff", "1,5"]
    for text in cases:
        try:
            v = float(text)
            want = v if math.isfinite(v) and v > 0 else 300.0
        except ValueError:
            want = 300.0
        got, before = _exec_timeout_in_force(text.encode())
        warned = any("ignoring invalid SANDBOX_EXEC_TIMEOUT_SECONDS" in l for l in before)
        assert got == want and warned == (want == 300.0 and text != "300"), (text, got, want, before)
    # Bytes that are not UTF-8 are not a number to Python either.
    got, before = _exec_timeout_in_force(b"3\xff")
    assert got == 300.0 and "\\xff" in before[0], (got, before)
    # Digits added in Unicode 15 and 16 (Kirat Rai THREE, Kawi ONE): the
    # reference's image runs Python 3.14 (Unicode 16.0); this Python's
    # tables may be older, so these two are stated, not asked of it.
    for text, want in [("\U00016d73", 3.0), ("\U00011f51\U00011f50", 10.0)]:
        assert _exec_timeout_in_force(text.encode())[0] == want, text
    # The value is the one in force: "0.5 " stops a sleep, 1e300 waits.
    srv = Server(env={"SANDBOX_EXEC_TIMEOUT_SECONDS": "0.5 "})
    try:
        res = execute(srv, "sleep 5")
        assert res["exit_code"] == 1 and "timed out" in res["stderr"], res
    finally:
        srv.stop()
    srv = Server(env={"SANDBOX_EXEC_TIMEOUT_SECONDS": "1e300"})
    try:
        assert execute(srv, "sh -c 'sleep 0.2; echo done'") == {"stdout": "done\n", "stderr": "", "exit_code": 0}
    finally:
        srv.stop()


def _attack(port, idle_n, slow_n, stop, report):
    """The hostile side of the starvation test, in its own process so its
    Python does not share a GIL with the normal client: idle_n connections
    that never send a byte and slow_n slowloris clients that trickle a
    request head a header line a second and never end it. Whatever the
    server closes is reconnected at once, as an attacker would."""
    import selectors
    sel = selectors.DefaultSelector()
    idle, slow = set(), {}
    stats = {"idle_closed": 0, "slow_closed": 0, "connect_failed": 0, "slow_answered": 0}

    def connect(kind):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
        except OSError:
            stats["connect_failed"] += 1
            return
        s.setblocking(False)
        if kind == "slow":
            try:
                s.send(b"GET / HTTP/1.1\r\nHost: x\r\n")
            except OSError:
                pass
            slow[s] = 0
        else:
            idle.add(s)
        sel.register(s, selectors.EVENT_READ, kind)

    for _ in range(idle_n):
        connect("idle")
    for _ in range(slow_n):
        connect("slow")
    report.send(("ready", len(idle), len(slow)))
    last_trickle = time.time()
    while not stop.is_set():
        lost = {"idle": 0, "slow": 0}
        for key, _ in sel.select(timeout=0.05):
            s = key.fileobj
            try:
                data = s.recv(4096)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                data = b""
            if data:
                stats["slow_answered"] += 1  # an answer (408) before the close
                continue
            sel.unregister(s)
            s.close()
            (idle.discard(s) if key.data == "idle" else slow.pop(s, None))
            stats[key.data + "_closed"] += 1
            lost[key.data] += 1
        for kind, n in lost.items():
            for _ in range(n):
                connect(kind)
        if time.time() - last_trickle >= 1:
            last_trickle = time.time()
            for s in list(slow):
                slow[s] += 1
                try:
                    s.send(b"X-Slow-%d: 1\r\n" % slow[s])
                except OSError:
                    pass
    report.send(("done", stats))


def test_idle_and_slowloris_clients_cannot_starve_others():
    """Issue 20: 2,000 connections that send nothing plus 50 slowloris
    clients, all reconnecting when closed, against the default
    --max-connections 512, while a normal client keeps making requests:
    every one of them is answered, and the server logs what it shed. The
    worst latency is printed, not asserted (the machine may be loaded)."""
    import multiprocessing
    import resource
    idle_n, slow_n = 2000, 50
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = idle_n + slow_n + 256
    if soft < need:
        assert hard == resource.RLIM_INFINITY or hard >= need, "RLIMIT_NOFILE hard limit %d < %d" % (hard, need)
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    srv = Server()
    ctx = multiprocessing.get_context("fork")
    stop = ctx.Event()
    mine, theirs = ctx.Pipe()
    attacker = ctx.Process(target=_attack, args=(srv.port, idle_n, slow_n, stop, theirs), daemon=True)
    try:
        attacker.start()
        assert mine.poll(120), "the attacker did not connect"
        ready = mine.recv()
        assert ready[0] == "ready" and ready[1] + ready[2] > 512, ready
        worst, answered, reconnects, threads = 0.0, 0, 0, 0
        session = requests.Session()
        # Threads are sampled every millisecond in a thread of its own: a
        # short peak (threads that counted themselves out but were still
        # the kernel's) is what broke the bound before; this caught it in
        # one run of three under load. Closer sampling costs a core.
        peak = [0]
        sampling = threading.Event()

        def sample():
            # 1 ms apart: most of a core otherwise, on a 2-core machine
            while not sampling.wait(0.001):
                try:
                    peak[0] = max(peak[0], srv.status_field("Threads"))
                except (OSError, AssertionError):
                    return  # the server is gone: the test says why
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        for i in range(30):
            threads = max(threads, srv.status_field("Threads"))
            t = time.time()
            # A fresh connection each time. One whose request has not
            # arrived when max_connections newer ones have (the attacker
            # connects thousands a second; a loaded machine can hold this
            # process back that long) is as silent as theirs and may be
            # shed: like any HTTP client, this one then connects again.
            for attempt in range(5):
                try:
                    r = requests.get(srv.url + "/", timeout=30)
                    break
                except requests.exceptions.ConnectionError:
                    reconnects += 1
            assert r.status_code == 200 and r.json()["status"] == "ok", (r.status_code, r.text)
            res = execute(srv, "echo %d" % i, session=session)  # a keep-alive one
            assert res == {"stdout": "%d\n" % i, "stderr": "", "exit_code": 0}, res
            worst = max(worst, time.time() - t)
            answered += 2
            time.sleep(0.1)
        threads = max(threads, srv.status_field("Threads"))
        sampling.set()
        sampler.join(timeout=10)
        threads = max(threads, peak[0])
        stop.set()
        assert mine.poll(60), "the attacker did not stop"
        stats = mine.recv()[1]
        attacker.join(timeout=10)
        shed_lines = [l for l in srv.log if "load: closed" in l]
        assert shed_lines and stats["idle_closed"] > 0, (stats, srv.log[-5:])
        # Threads (a 256 KiB stack each) stay under the documented bound
        # however fast shed ones end: 512 slots, 32 ending, main, reaper.
        assert threads <= 512 + 32 + 2, threads
        return "%d requests answered (%d fresh connections shed before their request came), worst %.2fs; " \
               "attacker: %s; server threads %d; %s" % (
                   answered, reconnects, worst, stats, threads, shed_lines[-1].strip()[:260])
    finally:
        stop.set()
        if attacker.is_alive():
            attacker.join(timeout=10)
            if attacker.is_alive():
                attacker.kill()
        srv.stop()


def test_as_pid_1_it_reaps_orphans_and_obeys_sigterm():
    """In a pod the runtime is PID 1: orphans of commands become its children."""
    base = tempfile.mkdtemp(prefix="rt-pid1-")
    proc = subprocess.Popen(["unshare", "--pid", "--fork", BINARY, "--listen", "127.0.0.1", "--port", "0",
                             "--base-dir", base], stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        line = proc.stderr.readline().decode()
        port = int(re.search(r"port (\d+)", line).group(1))
        server_pid = None
        deadline = time.time() + 5
        while server_pid is None and time.time() < deadline:
            for p in os.listdir("/proc"):
                if p.isdigit():
                    try:
                        stat = open("/proc/%s/stat" % p).read().rsplit(")", 1)[1].split()
                    except OSError:
                        continue
                    if int(stat[1]) == proc.pid:
                        server_pid = int(p)
        assert server_pid, "no server process under unshare"

        class S:
            url = "http://127.0.0.1:%d" % port
        res = execute(S, "sh -c '(sleep 0.3 >/dev/null 2>&1 &); echo $PPID'")
        assert res["stdout"] == "1\n", res  # the server is PID 1 in its namespace
        time.sleep(1.0)  # the orphaned sleep has exited by now

        def kids(state=None):
            out = []
            for p in os.listdir("/proc"):
                if p.isdigit():
                    try:
                        st = open("/proc/%s/stat" % p).read().rsplit(")", 1)[1].split()
                    except OSError:
                        continue
                    if int(st[1]) == server_pid and (state is None or st[0] == state):
                        out.append(p)
            return out
        assert kids() == [], "orphans left as zombies: %s" % kids()
        os.kill(server_pid, signal.SIGTERM)
        rc = proc.wait(timeout=10)
        assert rc == 0, rc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(base, ignore_errors=True)


def test_one_gib_upload_keeps_memory_flat(srv):
    if QUICK:
        return "skipped in --quick"
    r = requests.post(srv.url + "/upload", files={"file": ("warm", b"w" * (1 << 20))})
    assert r.status_code == 200
    rss_before = srv.status_field("VmHWM")
    total, block = 1 << 30, 1 << 20
    digest = hashlib.sha256()
    seed = os.urandom(block)

    def body():
        yield b"--GiB\r\nContent-Disposition: form-data; name=\"file\"; filename=\"gib/one.bin\"\r\n\r\n"
        for i in range(total // block):
            chunk = i.to_bytes(8, "little") + seed[8:]
            digest.update(chunk)
            yield chunk
        yield b"\r\n--GiB--\r\n"

    t = time.time()
    r = requests.post(srv.url + "/upload", data=body(), headers={"Content-Type": "multipart/form-data; boundary=GiB"})
    took = time.time() - t
    assert r.status_code == 200, r.text
    path = os.path.join(srv.base, "gib/one.bin")
    assert os.path.getsize(path) == total
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(4 << 20)
            if not b:
                break
            h.update(b)
    assert h.hexdigest() == digest.hexdigest()
    os.unlink(path)
    growth_kib = srv.status_field("VmHWM") - rss_before
    assert growth_kib < 16 * 1024, "peak RSS grew by %d KiB during a 1 GiB upload" % growth_kib
    return "1 GiB in %.1f s, peak RSS growth %d KiB" % (took, growth_kib)


# ---------------------------------------------------------------- runner

SHARED = [f for n, f in sorted(globals().items()) if n.startswith("test_") and f.__code__.co_argcount == 1]
OWN = [f for n, f in sorted(globals().items()) if n.startswith("test_") and f.__code__.co_argcount == 0]


def main():
    global BINARY, QUICK
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("-k", default="", help="run only tests whose name contains this")
    a = ap.parse_args()
    BINARY, QUICK = os.path.abspath(a.binary), a.quick
    passed = failed = 0
    for f in SHARED + OWN:
        if a.k not in f.__name__:
            continue
        t = time.time()
        srv = None
        try:
            if f in SHARED:
                srv = Server()
                note = f(srv)
                srv.stop()
            else:
                note = f()
            passed += 1
            print("ok   %-55s %5.2fs %s" % (f.__name__[5:], time.time() - t, note or ""), flush=True)
        except Exception:
            failed += 1
            print("FAIL %s\n%s" % (f.__name__[5:], traceback.format_exc()), flush=True)
            if srv is not None:
                try:
                    srv.stop()
                except Exception as e:
                    print("     (and at stop: %s)" % e)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
