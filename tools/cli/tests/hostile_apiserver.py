#!/usr/bin/env python3
"""A scripted, hostile Kubernetes apiserver for tools/cli/tests/offline.sh.

A real apiserver validates names and never sends terminal escapes; this
one does on purpose (a compromised or malicious endpoint the kubeconfig
points at), to show the tool prints none of them raw. It also records the
Authorization header of every request, so the test knows the bearer token
really went over the wire while checking it never reaches the output.

    hostile_apiserver.py STATEDIR
Listens on 127.0.0.1 (a port the kernel picks), writes the port to
STATEDIR/port once it accepts, appends each request's "METHOD PATH
AUTHORIZATION" to STATEDIR/requests, and serves until killed.

  GET  /apis/extensions.agents.x-k8s.io           discovery: v1alpha1
  GET  .../namespaces/NS/sandboxclaims            a list of two claims whose
  GET  .../sandboxclaims                          name, reason and template
                                                  carry escapes (see EVIL)
  GET  .../sandboxclaims/NAME                     403, a Status whose message
                                                  carries the escapes
  GET  .../sandboxclaims/deep                     a claim bound to Sandbox
  GET  /apis/agents.x-k8s.io/.../sandboxes/deep-sb   "deep-sb", which exists
  GET  /list/w...                                as the legacy runtime behind
                                                  --connect direct=URL: 10,000
                                                  directories in each, 200 deep
  GET  /list/f...                                 "a/" and eight files with 1 MiB names,
                                                  40 deep
  GET  /list/p, /list/p/sub                       "sub/" and "g"; "sub/f"
  GET  /list/q, /list/q/sub                       the same, "sub" also holding
                                                  a name with a control byte
  GET  /download/{p,q}/g, /download/{p,q}/sub/f   "from-the-sandbox\n"
  GET  /list/v                                    "gone" (its download 404s,
                                                  a file removed since the
                                                  listing), "locked" (403),
                                                  then "kept"
  GET  /download/v/kept                           "kept-by-the-copy\n"
  GET  /list/t                                    files whose mod_time is no
                                                  time: 1e300, -1e300, year
                                                  10000; and 0, the epoch
  POST /execute                                   stdout "out-of-the-sandbox\n",
                                                  exit code 0
  GET  /list/PATH                                 (other paths) one directory
                                                  "a" in every directory,
                                                  without end
  DELETE .../sandboxclaims/NAME                   404 for "gone", else 200
  anything else                                   404 Status

Namespace "hang": an apiserver whose deletes never answer (one that went
away mid-run; a real one will not do that on demand). A claim POSTed
there is stored and Ready at once (bound to a Sandbox of its name), or
never Ready when its template is "never-ready"; the list and watch of
the namespace show it; a DELETE there (or a POST
/execute whose command holds "hang-here") is recorded, then held
without an answer until the client goes.
"""
import json
import re
import os
import socket
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# OSC window title + BEL, a colour CSI, a UTF-8 C1 CSI (U+009B), a bidi
# override (U+202E), the bidi marks RLM, LRM and ALM, an isolate (U+2067)
# and the line and paragraph separators: each would act on a terminal (or
# make the name display as another) if printed raw.
EVIL = "evil\x1b]0;pwned\x07\x1b[31mred\u009bx\u202e\u200f\u200e\u061c\u2067\u2028\u2029\u200b\u00ad\u2060\ufeff\u206f\u180e"
CLAIMS = "/apis/extensions.agents.x-k8s.io/v1alpha1"
# 10,000 directories: a hundred such listings are past cp -r's cap of a
# million entries, long before its depth cap
WIDE_LISTING = json.dumps([{"name": "d%d" % i, "type": "directory", "size": 0}
                           for i in range(10000)]).encode()


# a directory "a", then eight files whose names are 1 MiB each: 8 MiB a
# listing, which cp -r held at every level it descended through
FAT_LISTING = json.dumps([{"name": "a", "type": "directory", "size": 0}] +
                         [{"name": chr(98 + i) * (1 << 20), "type": "file", "size": 1}
                          for i in range(8)]).encode()


HANG = "/namespaces/hang/sandboxclaims"
hang_claims = {}
hang_cond = threading.Condition()


def ready_claim(name, ready=True):
    return {"apiVersion": "extensions.agents.x-k8s.io/v1alpha1", "kind": "SandboxClaim",
            "metadata": {"name": name, "namespace": "hang", "uid": "u-" + name,
                         "resourceVersion": "11"},
            "spec": {"sandboxTemplateRef": {"name": "tpl"}},
            "status": {"sandbox": {"name": name},
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                       "reason": "" if ready else "Pending"}]}}


def claim(name, ns):
    return {
        "apiVersion": "extensions.agents.x-k8s.io/v1alpha1",
        "kind": "SandboxClaim",
        "metadata": {"name": name, "namespace": ns,
                     "creationTimestamp": "2026-01-01T00:00:00Z",
                     "labels": {"team": EVIL}},
        "spec": {"sandboxTemplateRef": {"name": "tpl-" + EVIL}},
        "status": {"sandbox": {"Name": name},
                   "conditions": [{"type": "Ready", "status": "False",
                                   "reason": "R" + EVIL, "message": "m" + EVIL}]},
    }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send_json(self, code, obj):
        body = json.dumps(obj, ensure_ascii=False).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def send_raw(self, code, body):
        self.send_response(code)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def status(self, code, reason):
        self.send_json(code, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                              "reason": reason, "code": code,
                              "message": "denied: " + EVIL})

    def hold(self):
        # no answer, until the client closes the connection (or 10 min)
        self.connection.settimeout(1)
        for _ in range(600):
            try:
                if not self.connection.recv(1):
                    return
            except socket.timeout:
                continue
            except OSError:
                return

    def hang_get(self, path, query):
        if "watch=true" not in query:
            with hang_cond:
                items = [ready_claim(n, r) for n, r in hang_claims.items()]
            self.send_json(200, {"kind": "SandboxClaimList", "apiVersion":
                                 "extensions.agents.x-k8s.io/v1alpha1",
                                 "metadata": {"resourceVersion": "10"}, "items": items})
            return
        # a watch: each claim once it is there, as ADDED, then silence
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        sent = set()
        for _ in range(300):
            with hang_cond:
                names = [n for n in hang_claims if n not in sent]
                if not names:
                    hang_cond.wait(0.2)
            for n in names:
                line = json.dumps({"type": "ADDED",
                                   "object": ready_claim(n, hang_claims[n])}).encode() + b"\n"
                try:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                    self.wfile.flush()
                except OSError:
                    return
                sent.add(n)
        try:
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass

    def record(self):
        with open(os.path.join(sys.argv[1], "requests"), "a") as f:
            f.write("%s %s %s\n" % (self.command, self.path,
                                    self.headers.get("Authorization", "-")))

    def do_GET(self):
        self.record()
        # the runtime's file paths come as one percent-encoded segment
        path = urllib.parse.unquote(self.path.split("?")[0])
        if path.startswith(CLAIMS) and path.endswith(HANG):
            self.hang_get(path, self.path.partition("?")[2])
        elif path == "/apis/extensions.agents.x-k8s.io":
            self.send_json(200, {"kind": "APIGroup", "name": "extensions.agents.x-k8s.io",
                                 "preferredVersion": {"groupVersion":
                                                      "extensions.agents.x-k8s.io/v1alpha1",
                                                      "version": "v1alpha1"}})
        elif path.startswith(CLAIMS) and path.endswith("/sandboxclaims"):
            parts = path.split("/")
            ns = parts[parts.index("namespaces") + 1] if "namespaces" in parts else "team-a"
            self.send_json(200, {"kind": "SandboxClaimList", "apiVersion":
                                 "extensions.agents.x-k8s.io/v1alpha1", "metadata": {},
                                 "items": [claim("one-" + EVIL, ns), claim("two", ns)]})
        elif path.startswith(CLAIMS) and path.endswith("/sandboxclaims/deep"):
            c = claim("deep", "team-a")
            c["metadata"].update({"uid": "u-deep", "resourceVersion": "1"})
            c["status"] = {"sandbox": {"name": "deep-sb"},
                           "conditions": [{"type": "Ready", "status": "True"}]}
            self.send_json(200, c)
        elif path.startswith(CLAIMS) and "/sandboxclaims/" in path:
            self.status(403, "Forbidden")
        elif path.endswith("/namespaces/team-a/sandboxes/deep-sb"):
            self.send_json(200, {"kind": "Sandbox", "apiVersion": "agents.x-k8s.io/v1alpha1",
                                 "metadata": {"name": "deep-sb", "namespace": "team-a"}})
        elif path.startswith("/list/w"):
            # a tree too wide to end: WIDE directories in each directory
            # down to 200 levels (under cp's depth cap), empty below
            depth = path.count("/") - 2
            self.send_raw(200, WIDE_LISTING if depth < 200 else b"[]")
        elif path.startswith("/list/f"):
            # FAT_LISTING in each directory down to 40 levels, empty below
            depth = path.count("/") - 2
            self.send_raw(200, FAT_LISTING if depth < 40 else b"[]")
        elif path in ("/list/p", "/list/p/sub", "/list/q", "/list/q/sub"):
            # an ordinary tree for a destination with links planted in it;
            # q's "sub" also names a file cp cannot ask for, before "f"
            bad = [{"name": "bad\x01name", "type": "file", "size": 1}] if path == "/list/q/sub" else []
            self.send_json(200, [{"name": "sub", "type": "directory", "size": 0},
                                 {"name": "g", "type": "file", "size": 17}]
                           if path in ("/list/p", "/list/q") else
                           bad + [{"name": "f", "type": "file", "size": 17}])
        elif path == "/list/v":
            # a tree some of whose files cannot be fetched, listed before
            # the one that can: the copy must go on past them
            self.send_json(200, [{"name": n, "type": "file", "size": 17}
                                 for n in ("gone", "locked", "kept")])
        elif path == "/download/v/locked":
            self.status(403, "Forbidden")
        elif path == "/download/v/kept":
            self.send_raw(200, b"kept-by-the-copy\n")
        elif path == "/list/t":
            # a double far outside time_t's range was converted to it
            # (undefined behaviour: UBSan stops the tool on it)
            self.send_json(200, [{"name": n, "type": "file", "size": 1, "mod_time": m}
                                 for n, m in (("huge", 1e300), ("negative", -1e300),
                                              ("year-10000", 253402300800), ("epoch", 0))])
        elif path in ("/download/p/g", "/download/p/sub/f", "/download/q/g", "/download/q/sub/f"):
            self.send_raw(200, b"from-the-sandbox\n")
        elif path.startswith("/list/"):
            # a sandbox (its runtime is the sandboxed code's to replace)
            # whose tree never ends: a recursive copy must stop, not crash
            self.send_json(200, [{"name": "a", "type": "directory", "size": 0}])
        else:
            self.status(404, "NotFound")

    def do_POST(self):
        # the legacy runtime's /upload behind --connect direct: what a
        # copy up sent is kept, whole, for the test to look into
        self.record()
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        if self.path.split("?")[0].endswith(HANG):
            obj = json.loads(body)
            name = obj["metadata"]["name"]
            # template "never-ready": a claim that never becomes Ready
            ready = obj.get("spec", {}).get("sandboxTemplateRef", {}).get("name") != "never-ready"
            with hang_cond:
                hang_claims[name] = ready
                hang_cond.notify_all()
            self.send_json(201, ready_claim(name, ready))
        elif self.path.split("?")[0] == "/execute" and b"hang-here" in body:
            self.hold()
        elif self.path.split("?")[0] == "/upload":
            with open(os.path.join(sys.argv[1], "uploads"), "ab") as f:
                f.write(body)
            self.send_json(200, {"message": "ok"})
        elif self.path.split("?")[0] == "/execute" and b"exit-code=" in body:
            # a runtime that reports the code the command names (256: no
            # process exits so, a lying runtime may say it)
            code = int(re.search(rb"exit-code=(-?[0-9]+)", body).group(1))
            self.send_json(200, {"stdout": "", "stderr": "", "exit_code": code})
        elif self.path.split("?")[0] == "/execute":
            self.send_json(200, {"stdout": "out-of-the-sandbox\n", "stderr": "", "exit_code": 0})
        else:
            self.status(404, "NotFound")

    def do_DELETE(self):
        self.record()
        if HANG + "/" in self.path:
            self.hold()
        elif self.path.split("?")[0].endswith("/sandboxclaims/gone"):
            self.status(404, "NotFound")
        else:
            self.send_json(200, {"kind": "Status", "status": "Success"})


def main():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    tmp = os.path.join(sys.argv[1], "port.tmp")
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, os.path.join(sys.argv[1], "port"))
    srv.serve_forever()


if __name__ == "__main__":
    main()
