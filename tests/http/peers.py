#!/usr/bin/env python3
"""Real and scripted HTTP/TLS peers for the HTTP client tests (issue 3).

    tests/http/peers.py start STATEDIR   start every peer, write STATEDIR/peers.json, exit
    tests/http/peers.py stop  STATEDIR   stop exactly the processes `start` recorded
    tests/http/peers.py serve STATEDIR   (internal) the Python peers' process

Everything listens on loopback only, on ports the kernel picks. One set of
peers per STATEDIR: `start` first stops whatever that STATEDIR already runs. `start` returns
once every peer accepts connections, and fails loudly (exit 1, logs printed)
otherwise. Certificates come from certs.sh into STATEDIR/certs.

Peers
  nginx (Debian's), own prefix/config/pid/logs under STATEDIR/nginx:
    http, https (cert `server`), https_ec (cert `server-ec`), each on
    127.0.0.1 and [::1] with the same port; keep-alive on; docroot STATEDIR/www.
  Python ssl (OpenSSL) servers, one port each, every path answers 200 with a
    JSON echo (see TlsEchoHandler): mtls, mtls-optional, ok, wrongname, expired, future,
    otherca, iponly, dnsonly, tls12 (TLS 1.2 only), tls12-ec, tls12-clientorder
    (see TLS12_NOTE), tls13 (TLS 1.3 only).
  The fault server (FaultHandler; its paths are in the table below), its
    redirect target, a CONNECT proxy, a closed port and a port whose connects hang.

Fault server paths (plain HTTP/1.1; the path picks the scenario; any method
unless said; connections are kept alive unless said; `?k=v` where noted):
  /chunked-bytewise        200, chunked, every byte in its own send() with 2 ms
                           between (TCP_NODELAY); chunk extensions (`;a=1`,
                           `;name="quoted;value"`), a trailer block
                           (X-Trailer-One, X-Trailer-Two). Body:
                           "hello, bytewise world\\n" (22 bytes)
  /chunked-bad-size        200, chunked, first size line "zz" -> must fail
  /chunked-huge-size       200, chunked, size "ffffffffffffffffff" (72 bits), then a
                           few bytes and close -> must fail, never allocate
  /chunked-overflow-64     size "10000000000000000" (exactly 2^64) -> must fail
  /chunked-negative-size   size "-5" -> must fail
  /chunked-missing-crlf    chunk data not followed by CRLF -> must fail
  /chunked-multi/<n>       n bytes, chunked in chunks of 1000; keep-alive. Body:
                           bytes i%251 for i in 0..n-1 (same pattern as /bytes/<n>)
  /headers-over-limit      1024 header lines of 1 KiB each (~1 MiB block), then a body
  /header-huge-line        one header line of 1 MiB
  /many-headers            10 000 header lines `X-H-<i>: <i>`, then "ok\\n"
  /short-body              Content-Length: 100, 5 bytes, close
  /close-mid-body          chunked, "10" size line then 5 bytes, close
  /close-before-response   reads the request, closes without answering
  /stall[?s=N]             status line + headers (Content-Length: 10), then
                           nothing for N s (default 60), then close
  /stall-headers[?s=N]     nothing at all for N s (default 60), then close
  /trickle[?ms=M&n=N]      200, Content-Length N (default 1000), one byte every
                           M ms (default 200): idle timeouts never fire, an
                           overall deadline must
  /flaky-503/<key>/<n>     503 ("try again\\n") for the first n requests for
                           key, then 200 with JSON {"key","attempt","headers"}
                           (headers: [name, value] in order, as sent)
                           ?status=S answers S instead of 503 (429, 500...);
                           ?retry_after=V adds "Retry-After: V" to those
                           answers (V as given, e.g. 1, 120, an HTTP date)
  /flaky-close/<key>/<n>   closes without answering for the first n requests for
                           key (the request DID reach the server), then 200 JSON
  /count/<key>             200 JSON {"key","count"}: requests seen for key (flaky-*,
                           keepalive-then-close, connection-close, and every
                           request under its own path, e.g. key "/echo"; a
                           key with a slash: /count//echo)
  /reset                   clears every counter and the redirect target's record
  /redirect                302, Location: http://127.0.0.1:<redirect_target>/target
  /redirect/<code>         the same with status <code> (301, 303, 307, 308; 304
                           without a body)
  /contacted               200 JSON {"contacted": bool, "count": n} for the
                           redirect target (which answers 200 "target\\n")
  /keepalive-then-close[/<key>]  200 "ok\\n" with "Connection: keep-alive",
                           then the server closes the idle connection at once
                           (a pooled reuse finds it closed). Counted under key
                           (default "keepalive-then-close")
  /keepalive-then-drop[/<key>]  200 "ok\n", kept alive; the NEXT request on
                           that connection (any path) is read, counted under
                           "<key>-dropped", and the connection closed with no
                           answer: a reused connection that fails after the
                           request was written (retry only if idempotent)
  /keepalive-then-swallow[/<key>]  200 "ok\n", kept alive; every later request
                           on that connection is read, counted under
                           "<key>-swallowed" and never answered, the connection
                           left open until the client closes it (120 s at most):
                           what a client sees when the server closed an idle
                           connection behind a tunnel that hides the close
                           (kwok's port-forward)
  /connection-close[/<key>]  200 "ok\\n" with "Connection: close", then closes
  /echo                    200 JSON of what was received: method, target, version,
                           headers ([name, value] in order, as sent), raw_head
                           (request line + headers, latin-1), body_len,
                           body_sha256, body_b64 (only up to 1 MiB), chunked
                           (bool), chunk_sizes, chunk_exts, trailers.
                           Expect: 100-continue gets "100 Continue" first
  /garbage                 non-HTTP bytes, then close
  /http10                  "HTTP/1.0 200 OK", no length, body until close:
                           "http/1.0 body until close\\n" x 100 (2600 bytes)
  /no-length               "HTTP/1.1 200 OK", Connection: close, no length, same body
  /no-body-304             304 with ETag and Content-Length: 1234, no body; kept alive
  /no-body-204             204, no body; kept alive
  /head                    GET: 200, Content-Length 1000, 1000 x "h".
                           HEAD: the same headers, no body; kept alive
  /bytes/<n>               200, Content-Length n, bytes i%251 (for body caps)
  /status/<code>           that status, body "status <code>\\n"
  /gone/<key>/...          410 Gone with a Kubernetes Status (Expired), for any
                           path under it (a kubeconfig server URL with this
                           prefix makes every watch answer 410); counted
                           under <key>. /gone-event/<key>/... answers 200
                           with one watch line, an ERROR event with code 410;
                           /gone-after-event/<key>/... an ADDED event first;
                           /empty-watch/<key>/... 200 with an empty body (a
                           watch that ends at once, cleanly)
  /list-then/<watch>/<key>/...  a list (GET without watch=true) answers 200
                           with one object, "s" (uid "u-s", resourceVersion 5);
                           a watch answers as /<watch>/ does ("gone": 410,
                           "empty-watch": 200, empty body): a shared watch's
                           list works, its watch never does. Counted under
                           <key>, and the lists also under <key>-lists
  /list-continue/<key>/<mode>/...  every GET answers as an apiserver answers a
                           list (items [], preferredVersion for discovery) with a
                           metadata.continue that never ends: mode "same" always
                           "again" (paging in place), "endless" p<n+1> after the
                           request's continue=p<n>, "long" a 5000-byte token;
                           counted under <key>
  /status-echo/<code>      that status with a Kubernetes Status whose message
                           lists the request headers as received (a server
                           that echoes credentials into its errors)
  /header-echo/<code>      that status with the request's Authorization
                           credential (after its scheme) echoed in
                           X-Request-ID, Retry-After and Content-Type, and
                           for a 3xx in Location (http://127.0.0.1/login?t=
                           <credential>); a 4xx/5xx body is a Kubernetes
                           Status whose reason is the credential, message
                           "denied" (a server that echoes credentials into
                           the headers and fields an error keeps)
  /slow-upload-sink[?rate=B]  reads the request body (Content-Length or chunked)
                           at about B bytes/s (default 4 MiB/s) with a small
                           receive buffer, then 200 JSON {"bytes","sha256","chunked"}
Anything else: 404.

CONNECT proxy: `CONNECT host:port` to loopback targets only (127.0.0.0/8, ::1,
localhost; otherwise 403), 200 then a byte tunnel. Each CONNECT is appended as
one JSON line to proxy.log: {"target","allowed","proxy_authorization","headers"}.
`GET /log` (origin or absolute form) returns them as a JSON array;
`GET /reset` clears them (and the file). Other requests: 405.
"""

import base64
import hashlib
import ipaddress
import json
import os
import select
import shutil
import signal
import socket
import socketserver
import ssl
import subprocess
import sys
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

HERE = os.path.dirname(os.path.abspath(__file__))
LOOP4 = "127.0.0.1"
LOOP6 = "::1"
TLS_SERVERS = {
    # name: (certificate, options)
    "ok": ("server", {}),
    "mtls": ("server", {"client_ca": "ca.crt"}),
    # asks for a client certificate, takes a connection without one too
    # (client_cert_subject null): shows whether a client sent one
    "mtls-optional": ("server", {"client_ca": "ca.crt", "optional": True}),
    "wrongname": ("server-wrongname", {}),
    "expired": ("server-expired", {}),
    "future": ("server-future", {}),
    "otherca": ("server-otherca", {}),
    "iponly": ("server-iponly", {}),
    "dnsonly": ("server-dnsonly", {}),
    "tls12": ("server", {"max": ssl.TLSVersion.TLSv1_2}),
    # See TLS12_NOTE.
    "tls12-ec": ("server-ec", {"max": ssl.TLSVersion.TLSv1_2}),
    "tls12-clientorder": ("server", {"max": ssl.TLSVersion.TLSv1_2, "client_order": True}),
    "tls13": ("server", {"min": ssl.TLSVersion.TLSv1_3}),
}
BIG_SIZE = 256 * 1024 * 1024
TLS12_NOTE = """
mbedTLS 3.6.6 (Debian trixie) with TLS 1.3 enabled offers rsa_pss_rsae_* in its
ClientHello but rejects them in a TLS 1.2 ServerKeyExchange (-0x6600,
MBEDTLS_ERR_SSL_ILLEGAL_PARAMETER; fixed upstream after 3.6.6). OpenSSL picks
PSS for an RSA key, so against `tls12` a 3.6.6 client fails whatever it does;
`tls12-clientorder` lets the client's signature_algorithms order decide (as Go's
crypto/tls and `openssl s_server` do), so a client listing rsa_pkcs1_* before
rsa_pss_rsae_* (mbedtls_ssl_conf_sig_algs) gets through; `tls12-ec` uses ECDSA
and works with both 2.28 and 3.6.
"""


def log(msg):
    sys.stderr.write("peers: %s\n" % msg)
    sys.stderr.flush()


def pattern(n):
    """The /bytes/<n> body: byte i is i % 251 (no period that divides 2^k)."""
    unit = bytes(range(251))
    return (unit * (n // 251 + 1))[:n]


# ---------------------------------------------------------------------------
# Raw connection helper for the fault server and the proxy
# ---------------------------------------------------------------------------

class Closed(Exception):
    pass


class Conn:
    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def fill(self, limit):
        if len(self.buf) >= limit:
            raise Closed("buffer limit")
        data = self.sock.recv(65536)
        if not data:
            raise Closed("eof")
        self.buf += data

    def read_until(self, sep, limit=1 << 20):
        while True:
            i = self.buf.find(sep)
            if i >= 0:
                out, self.buf = self.buf[:i + len(sep)], self.buf[i + len(sep):]
                return out
            self.fill(limit)

    def read_exact(self, n):
        while len(self.buf) < n:
            self.fill(n + 65536)
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_some(self, maxn):
        if not self.buf:
            self.fill(1 << 30)
        out, self.buf = self.buf[:maxn], self.buf[maxn:]
        return out

    def send(self, data):
        self.sock.sendall(data)


def parse_head(raw):
    """Request head bytes -> (method, target, version, [(name, value)])."""
    lines = raw.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        raise Closed("bad request line")
    headers = []
    for line in lines[1:]:
        if not line:
            continue
        name, _, value = line.partition(":")
        headers.append((name, value.strip(" \t")))
    return parts[0], parts[1], parts[2], headers


def header(headers, name):
    for k, v in headers:
        if k.lower() == name.lower():
            return v
    return None


def read_body(conn, headers, sink, rate=None):
    """Reads a request body by Content-Length or chunked into sink(bytes).
    Returns (chunked, chunk_sizes, chunk_exts, trailers)."""
    def pace(n):
        if rate:
            time.sleep(n / rate)
    te = header(headers, "Transfer-Encoding")
    if te and "chunked" in te.lower():
        sizes, exts, trailers = [], [], []
        while True:
            line = conn.read_until(b"\r\n", 4096)[:-2].decode("latin-1")
            size_s, _, ext = line.partition(";")
            size = int(size_s.strip(), 16)
            sizes.append(size)
            exts.append(ext)
            if size == 0:
                break
            left = size
            while left:
                data = conn.read_some(min(left, 65536))
                left -= len(data)
                sink(data)
                pace(len(data))
            if conn.read_exact(2) != b"\r\n":
                raise Closed("chunk not followed by CRLF")
        while True:
            line = conn.read_until(b"\r\n", 65536)[:-2].decode("latin-1")
            if not line:
                break
            trailers.append(line)
        return True, sizes, exts, trailers
    cl = header(headers, "Content-Length")
    left = int(cl) if cl else 0
    while left:
        data = conn.read_some(min(left, 65536))
        left -= len(data)
        sink(data)
        pace(len(data))
    return False, [], [], []


def response(status, reason, headers=(), body=b"", length=True):
    head = "HTTP/1.1 %d %s\r\n" % (status, reason)
    for k, v in headers:
        head += "%s: %s\r\n" % (k, v)
    if length:
        head += "Content-Length: %d\r\n" % len(body)
    return head.encode("latin-1") + b"\r\n" + body


def json_response(obj, status=200, reason="OK", extra=()):
    body = (json.dumps(obj, sort_keys=True) + "\n").encode()
    return response(status, reason, [("Content-Type", "application/json")] + list(extra), body)


# ---------------------------------------------------------------------------
# Fault server
# ---------------------------------------------------------------------------

class State:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}
        self.target_count = 0
        self.proxy_log = []

    def bump(self, key):
        with self.lock:
            self.counts[key] = self.counts.get(key, 0) + 1
            return self.counts[key]

    def count(self, key):
        with self.lock:
            return self.counts.get(key, 0)


STATE = State()
UNTIL_CLOSE_BODY = b"http/1.0 body until close\n" * 100
CHUNKED_BYTEWISE = (
    b"5;a=1\r\nhello\r\n"
    b"9;name=\"quoted;value\"\r\n, bytewis\r\n"
    b"8\r\ne world\n\r\n"
    b"0;last\r\nX-Trailer-One: 1\r\nX-Trailer-Two: two\r\n\r\n")


class KeepAlive(Exception):
    """Raised by a scenario that leaves the connection usable."""


class FaultHandler(socketserver.BaseRequestHandler):
    def handle(self):
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = Conn(self.request)
        self.drop_next = None
        self.swallow_next = None
        try:
            while True:
                try:
                    raw = conn.read_until(b"\r\n\r\n", 1 << 20)
                except Closed:
                    return
                method, target, version, headers = parse_head(raw)
                keep = self.dispatch(conn, raw, method, target, version, headers)
                if not keep or (header(headers, "Connection") or "").lower() == "close":
                    return
        except (Closed, OSError, ValueError):
            return

    def dispatch(self, conn, raw, method, target, version, headers):
        """Serves one request. Returns True to keep the connection."""
        url = urlsplit(target)
        path = url.path
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        seg = path.strip("/").split("/")
        if self.swallow_next:
            STATE.bump(self.swallow_next + "-swallowed")
            self.wait_or_peer_close(120)
            return False
        if self.drop_next:
            # /keepalive-then-drop: the second request on the connection is
            # read and dropped unanswered, as when an idle timeout races it.
            STATE.bump(self.drop_next + "-dropped")
            return False
        if not path.startswith("/count/"):
            STATE.bump(path)
        send = conn.send
        if path not in ("/echo", "/slow-upload-sink"):
            read_body(conn, headers, lambda b: None)

        if path == "/echo":
            if (header(headers, "Expect") or "").lower() == "100-continue":
                send(b"HTTP/1.1 100 Continue\r\n\r\n")
            h = hashlib.sha256()
            kept = []
            size = [0]

            def sink(b):
                h.update(b)
                size[0] += len(b)
                if size[0] <= (1 << 20):
                    kept.append(b)
            chunked, sizes, exts, trailers = read_body(conn, headers, sink)
            body = b"".join(kept)
            obj = {"method": method, "target": target, "version": version,
                   "headers": [[k, v] for k, v in headers],
                   "raw_head": raw.decode("latin-1"),
                   "body_len": size[0], "body_sha256": h.hexdigest(),
                   "body_b64": base64.b64encode(body).decode() if size[0] <= (1 << 20) else None,
                   "chunked": chunked, "chunk_sizes": sizes, "chunk_exts": exts,
                   "trailers": trailers}
            send(json_response(obj))
            return True
        if path == "/slow-upload-sink":
            self.request.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
            rate = float(query.get("rate", 4 * 1024 * 1024))
            h = hashlib.sha256()
            size = [0]

            def sink(b):
                h.update(b)
                size[0] += len(b)
            chunked = read_body(conn, headers, sink, rate)[0]
            send(json_response({"bytes": size[0], "sha256": h.hexdigest(), "chunked": chunked}))
            return True
        if path == "/chunked-bytewise":
            send(response(200, "OK", [("Content-Type", "text/plain"),
                                      ("Transfer-Encoding", "chunked"),
                                      ("Trailer", "X-Trailer-One, X-Trailer-Two")], length=False))
            for i in range(len(CHUNKED_BYTEWISE)):
                time.sleep(0.002)
                send(CHUNKED_BYTEWISE[i:i + 1])
            return True
        bad_chunked = {
            "/chunked-bad-size": b"zz\r\nhello\r\n0\r\n\r\n",
            "/chunked-huge-size": b"ffffffffffffffffff\r\nhello",
            "/chunked-overflow-64": b"10000000000000000\r\nhello",
            "/chunked-negative-size": b"-5\r\nhello\r\n0\r\n\r\n",
            "/chunked-missing-crlf": b"5\r\nhelloXX5\r\nhello\r\n0\r\n\r\n",
        }
        if path in bad_chunked:
            send(response(200, "OK", [("Transfer-Encoding", "chunked")], length=False)
                 + bad_chunked[path])
            time.sleep(0.2)
            return False
        if seg[0] == "chunked-multi" and len(seg) == 2:
            n = int(seg[1])
            body = pattern(n)
            out = [response(200, "OK", [("Content-Type", "application/octet-stream"),
                                        ("Transfer-Encoding", "chunked")], length=False)]
            for i in range(0, n, 1000):
                part = body[i:i + 1000]
                out.append(b"%x\r\n" % len(part) + part + b"\r\n")
            out.append(b"0\r\n\r\n")
            send(b"".join(out))
            return True
        if path == "/headers-over-limit":
            fill = "x" * 1000
            lines = "".join("X-Fill-%d: %s\r\n" % (i, fill) for i in range(1024))
            send(("HTTP/1.1 200 OK\r\n" + lines + "Content-Length: 3\r\n\r\nok\n").encode())
            return False
        if path == "/header-huge-line":
            send(("HTTP/1.1 200 OK\r\nX-Huge: " + "y" * (1 << 20) +
                  "\r\nContent-Length: 3\r\n\r\nok\n").encode())
            return False
        if path == "/many-headers":
            lines = "".join("X-H-%d: %d\r\n" % (i, i) for i in range(10000))
            send(("HTTP/1.1 200 OK\r\n" + lines + "Content-Length: 3\r\n\r\nok\n").encode())
            return True
        if path == "/short-body":
            send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhello")
            time.sleep(0.05)
            return False
        if path == "/close-mid-body":
            send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nhello")
            time.sleep(0.05)
            return False
        if path == "/close-before-response":
            return False
        if path in ("/stall", "/stall-headers"):
            if path == "/stall":
                send(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n")
            self.wait_or_peer_close(float(query.get("s", 60)))
            return False
        if path == "/trickle":
            n = int(query.get("n", 1000))
            ms = float(query.get("ms", 200))
            send(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % n)
            for _ in range(n):
                time.sleep(ms / 1000.0)
                send(b"t")
            return True
        if seg[0] in ("flaky-503", "flaky-close") and len(seg) == 3:
            key, n = seg[1], int(seg[2])
            k = STATE.bump(key)
            if k <= n:
                if seg[0] == "flaky-close":
                    return False
                code = int(query.get("status", 503))
                hdrs = [("Content-Type", "text/plain")]
                if "retry_after" in query:
                    hdrs.append(("Retry-After", query["retry_after"]))
                reason = {429: "Too Many Requests", 503: "Service Unavailable"}.get(code, "Error")
                send(response(code, reason, hdrs, b"try again\n"))
                return True
            send(json_response({"key": key, "attempt": k,
                                "headers": [[hk, hv] for hk, hv in headers]}))
            return True
        if seg[0] == "count" and len(seg) >= 2:
            key = "/".join(seg[1:])
            if path.startswith("/count//"):
                key = path[len("/count/"):]
            send(json_response({"key": key, "count": STATE.count(key)}))
            return True
        if path == "/reset":
            with STATE.lock:
                STATE.counts.clear()
                STATE.target_count = 0
            send(json_response({"reset": True}))
            return True
        if seg[0] == "redirect" and len(seg) <= 2:
            code = int(seg[1]) if len(seg) == 2 else 302
            loc = "http://%s:%d/target" % (LOOP4, self.server.target_port)
            if code == 304:  # never has a body
                send(response(304, "Not Modified", [("Location", loc)], b""))
                return True
            send(response(code, "Redirect", [("Location", loc), ("Content-Type", "text/plain")],
                          b"moved\n"))
            return True
        if path == "/contacted":
            with STATE.lock:
                c = STATE.target_count
            send(json_response({"contacted": c > 0, "count": c}))
            return True
        if seg[0] in ("keepalive-then-close", "connection-close") and len(seg) <= 2:
            key = seg[1] if len(seg) == 2 else seg[0]
            STATE.bump(key)
            conn_h = "keep-alive" if seg[0] == "keepalive-then-close" else "close"
            send(response(200, "OK", [("Content-Type", "text/plain"), ("Connection", conn_h),
                                      ("Keep-Alive", "timeout=60")] if conn_h == "keep-alive"
                          else [("Content-Type", "text/plain"), ("Connection", "close")],
                          b"ok\n"))
            return False
        if seg[0] == "keepalive-then-swallow" and len(seg) <= 2:
            key = seg[1] if len(seg) == 2 else seg[0]
            STATE.bump(key)
            self.swallow_next = key
            send(response(200, "OK", [("Content-Type", "text/plain"), ("Connection", "keep-alive")],
                          b"ok\n"))
            return True
        if seg[0] == "keepalive-then-drop" and len(seg) <= 2:
            key = seg[1] if len(seg) == 2 else seg[0]
            STATE.bump(key)
            self.drop_next = key
            send(response(200, "OK", [("Content-Type", "text/plain"), ("Connection", "keep-alive")],
                          b"ok\n"))
            return True
        if path == "/garbage":
            send(b"\x00\x01\x02SSH-2.0-not-http\r\n\xff\xfe garbage \x7f\r\n\r\n")
            time.sleep(0.05)
            return False
        if path == "/http10":
            send(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n" + UNTIL_CLOSE_BODY)
            return False
        if path == "/no-length":
            send(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"
                 + UNTIL_CLOSE_BODY)
            return False
        if path == "/no-body-304":
            send(b"HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\nContent-Length: 1234\r\n\r\n")
            return True
        if path == "/no-body-204":
            send(b"HTTP/1.1 204 No Content\r\nX-Note: none\r\n\r\n")
            return True
        if path == "/head":
            head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\n"
            send(head if method == "HEAD" else head + b"h" * 1000)
            return True
        if seg[0] == "bytes" and len(seg) == 2:
            n = int(seg[1])
            send(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                 b"Content-Length: %d\r\n\r\n" % n)
            unit = pattern(251 * 261)  # 65511 bytes, a whole number of periods
            left = n
            while left:
                part = unit[:min(left, len(unit))]
                send(part)
                left -= len(part)
            return True
        if seg[0] == "list-then" and len(seg) >= 3 and seg[1] in ("gone", "empty-watch"):
            # a faulty apiserver: the list answers, every watch fails at once
            STATE.bump(seg[2])
            if query.get("watch") != "true":
                STATE.bump(seg[2] + "-lists")
                send(json_response({"kind": "List", "apiVersion": "v1",
                                    "metadata": {"resourceVersion": "5"},
                                    "items": [{"metadata": {"name": "s", "uid": "u-s",
                                                            "resourceVersion": "5"}}]}))
                return True
            if seg[1] == "gone":
                send(json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                    "reason": "Expired", "code": 410,
                                    "message": "too old resource version: 5 (6)"},
                                   status=410, reason="Gone"))
                return True
            send(response(200, "OK", [("Content-Type", "application/json")], b""))
            return True
        if seg[0] == "empty-watch" and len(seg) >= 2:
            STATE.bump(seg[1])
            send(response(200, "OK", [("Content-Type", "application/json")], b""))
            return True
        if seg[0] in ("gone", "gone-event", "gone-after-event") and len(seg) >= 2:
            STATE.bump(seg[1])
            status = {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                      "reason": "Expired", "code": 410,
                      "message": "too old resource version: 1 (2)"}
            if seg[0] == "gone":
                send(json_response(status, status=410, reason="Gone"))
                return True
            lines = []
            if seg[0] == "gone-after-event":
                lines.append({"type": "ADDED", "object": {
                    "kind": "Sandbox", "metadata": {"name": "s", "resourceVersion": "5"}}})
            lines.append({"type": "ERROR", "object": status})
            body = "".join(json.dumps(x) + "\n" for x in lines).encode()
            send(response(200, "OK", [("Content-Type", "application/json")], body))
            return True
        if seg[0] == "list-continue" and len(seg) >= 3:
            # a faulty apiserver no real one imitates on demand
            STATE.bump(seg[1])
            prev = query.get("continue", "")
            if seg[2] == "same":
                token = "again"
            elif seg[2] == "long":
                token = "L" * 5000
            else:
                token = "p%d" % (int(prev[1:]) + 1 if prev.startswith("p") else 1)
            send(json_response({"kind": "List", "apiVersion": "v1",
                                "preferredVersion": {"groupVersion":
                                                     "extensions.agents.x-k8s.io/v1alpha1"},
                                "metadata": {"resourceVersion": "7", "continue": token},
                                "items": []}))
            return True
        if seg[0] == "status-echo" and len(seg) == 2:
            code = int(seg[1])
            seen = "; ".join("%s: %s" % (k, v) for k, v in headers)
            send(json_response({"message": "request headers: " + seen, "kind": "Status",
                                "apiVersion": "v1", "status": "Failure",
                                "reason": "BadRequest", "code": code},
                               status=code, reason="Status"))
            return True
        if seg[0] == "header-echo" and len(seg) == 2:
            code = int(seg[1])
            auth = next((v for k, v in headers if k.lower() == "authorization"), "")
            cred = auth.split(" ", 1)[1] if " " in auth else auth
            echo = [("X-Request-ID", cred), ("Retry-After", cred), ("Content-Type", cred)]
            body = b""
            if 300 <= code < 400:
                echo.append(("Location", "http://127.0.0.1/login?t=" + cred))
            elif code >= 400:
                body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                   "reason": cred, "message": "denied", "code": code}).encode()
            send(response(code, "Echo", echo, body))
            return True
        if seg[0] == "status" and len(seg) == 2:
            code = int(seg[1])
            body = b"" if code in (204, 304) or code < 200 else b"status %d\n" % code
            send(response(code, "Status", [("Content-Type", "text/plain")], body,
                          length=code not in (204, 304)))
            return True
        send(response(404, "Not Found", [("Content-Type", "text/plain")], b"no such scenario\n"))
        return True

    def wait_or_peer_close(self, seconds):
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return
            r, _, _ = select.select([self.request], [], [], min(left, 1.0))
            if r:
                try:
                    if not self.request.recv(65536):
                        return
                except OSError:
                    return


class TargetHandler(socketserver.BaseRequestHandler):
    """The redirect target: records that it was contacted."""
    def handle(self):
        conn = Conn(self.request)
        try:
            conn.read_until(b"\r\n\r\n")
            with STATE.lock:
                STATE.target_count += 1
            conn.send(response(200, "OK", [("Connection", "close")], b"target\n"))
        except (Closed, OSError):
            pass


# ---------------------------------------------------------------------------
# CONNECT proxy
# ---------------------------------------------------------------------------

def is_loopback(host):
    h = host.strip("[]")
    if h == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


class ProxyHandler(socketserver.BaseRequestHandler):
    def handle(self):
        conn = Conn(self.request)
        try:
            raw = conn.read_until(b"\r\n\r\n", 65536)
            method, target, _, headers = parse_head(raw)
        except (Closed, OSError):
            return
        if method != "CONNECT":
            path = urlsplit(target).path
            if method == "GET" and path == "/log":
                with STATE.lock:
                    entries = list(STATE.proxy_log)
                conn.send(json_response(entries, extra=[("Connection", "close")]))
            elif method == "GET" and path == "/reset":
                with STATE.lock:
                    STATE.proxy_log.clear()
                    open(self.server.log_path, "w").close()
                conn.send(json_response({"reset": True}, extra=[("Connection", "close")]))
            else:
                conn.send(response(405, "Method Not Allowed", [("Connection", "close")],
                                   b"CONNECT only\n"))
            return
        host, _, port = target.rpartition(":")
        allowed = bool(host) and port.isdigit() and is_loopback(host)
        entry = {"target": target, "allowed": allowed,
                 "proxy_authorization": header(headers, "Proxy-Authorization"),
                 "headers": [[k, v] for k, v in headers]}
        with STATE.lock:
            STATE.proxy_log.append(entry)
            with open(self.server.log_path, "a") as f:
                f.write(json.dumps(entry, sort_keys=True) + "\n")
        if not allowed:
            conn.send(response(403, "Forbidden", [("Connection", "close")],
                               b"loopback targets only\n"))
            return
        try:
            up = socket.create_connection((host.strip("[]"), int(port)), timeout=5)
        except OSError:
            conn.send(response(502, "Bad Gateway", [("Connection", "close")], b"connect failed\n"))
            return
        up.settimeout(None)
        try:
            conn.send(b"HTTP/1.1 200 Connection established\r\n\r\n")
            if conn.buf:
                up.sendall(conn.buf)
            relay(self.request, up)
        except OSError:
            pass
        finally:
            up.close()


def relay(a, b):
    socks = [a, b]
    open_ = {a: True, b: True}
    while open_[a] or open_[b]:
        r, _, _ = select.select([s for s in socks if open_[s]], [], [], 300)
        if not r:
            return
        for s in r:
            other = b if s is a else a
            data = s.recv(65536)
            if not data:
                open_[s] = False
                try:
                    other.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
            else:
                other.sendall(data)


# ---------------------------------------------------------------------------
# Python ssl servers
# ---------------------------------------------------------------------------

DN_SHORT = {"commonName": "CN", "organizationName": "O", "countryName": "C",
            "organizationalUnitName": "OU"}


def dn_string(dn):
    """Python's subject tuples -> "O=agentsandbox tests,CN=client-rsa"."""
    return ",".join("%s=%s" % (DN_SHORT.get(k, k), v) for rdn in dn for k, v in rdn)


class TlsEchoHandler(BaseHTTPRequestHandler):
    """Every method and path: 200 with JSON {server, method, path, headers,
    body_len, tls_version, cipher, sni, client_cert_subject, alpn,
    session_reused}. A GET whose query has watch=true is answered as an API
    server answers a watch instead (see watch())."""
    protocol_version = "HTTP/1.1"

    def setup(self):
        self.request.settimeout(30)
        self.request = self.server.ctx.wrap_socket(self.request, server_side=True)
        super().setup()

    def finish(self):
        try:
            super().finish()
        finally:
            self.request.close()

    def watch(self, query):
        """A Kubernetes watch stream, for the client certificate rotation
        test (a real API server needs a cluster): chunked, one ADDED event
        line every 100 ms (?interval_ms=M) until timeoutSeconds (default 1)
        have passed, then the end of the body, as an API server ends a
        watch. Each event's object names this connection's client
        certificate and counts events (resourceVersion)."""
        cert = self.connection.getpeercert()
        subject = dn_string(cert["subject"]) if cert else None
        interval = float(query.get("interval_ms", 100)) / 1000.0
        end = time.monotonic() + float(query.get("timeoutSeconds", 1))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        n = 0
        try:
            while time.monotonic() < end:
                n += 1
                ev = {"type": "ADDED", "object": {
                    "kind": "ConfigMap", "client_cert_subject": subject,
                    "metadata": {"name": "ev-%d" % n, "resourceVersion": str(n)}}}
                line = (json.dumps(ev, sort_keys=True) + "\n").encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                self.wfile.flush()
                time.sleep(interval)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            pass  # the client ended the watch

    def answer(self):
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        if self.command == "GET" and query.get("watch") == "true":
            self.watch(query)
            return
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        sock = self.connection
        cert = sock.getpeercert()
        obj = {"server": self.server.name, "method": self.command, "path": self.path,
               "headers": [[k, v] for k, v in self.headers.items()],
               "body_len": len(body), "tls_version": sock.version(),
               "cipher": (sock.cipher() or [None])[0],
               "sni": getattr(sock, "asb_sni", None),
               "alpn": sock.selected_alpn_protocol(),
               "session_reused": sock.session_reused,
               "client_cert_subject": dn_string(cert["subject"]) if cert else None}
        out = (json.dumps(obj, sort_keys=True) + "\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(out)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = answer

    def log_message(self, fmt, *args):
        pass


class TlsServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        log("tls %s: %s" % (self.name, sys.exc_info()[1]))


def tls_context(certs, cert, opts):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(certs, cert + ".crt"), os.path.join(certs, cert + ".key"))
    ctx.minimum_version = opts.get("min", ssl.TLSVersion.TLSv1_2)
    if "max" in opts:
        ctx.maximum_version = opts["max"]
    if opts.get("client_order"):
        # Python sets server preference; OpenSSL then also picks the TLS 1.2
        # signature algorithm by its own order (PSS first for RSA).
        ctx.options &= ~ssl.OP_CIPHER_SERVER_PREFERENCE
    if "client_ca" in opts:
        ctx.verify_mode = ssl.CERT_OPTIONAL if opts.get("optional") else ssl.CERT_REQUIRED
        ctx.load_verify_locations(os.path.join(certs, opts["client_ca"]))
    ctx.set_alpn_protocols(["http/1.1"])

    def sni(sock, name, _ctx):
        sock.asb_sni = name
    ctx.sni_callback = sni
    return ctx


class RawServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def handle_error(self, request, client_address):
        log("%s: %s" % (type(self).__name__, traceback.format_exc(limit=3)))


def serve(statedir):
    """The Python peers' process: binds every listener on port 0, writes
    py-ports.json, serves until SIGTERM."""
    certs = os.path.join(statedir, "certs")
    ports = {"tls": {}}
    servers = []
    for name, (cert, opts) in TLS_SERVERS.items():
        s = TlsServer((LOOP4, 0), TlsEchoHandler)
        s.name = name
        s.ctx = tls_context(certs, cert, opts)
        ports["tls"][name] = s.server_address[1]
        servers.append(s)
    target = RawServer((LOOP4, 0), TargetHandler)
    fault = RawServer((LOOP4, 0), FaultHandler)
    fault.target_port = target.server_address[1]
    proxy = RawServer((LOOP4, 0), ProxyHandler)
    proxy.log_path = os.path.join(statedir, "proxy.log")
    open(proxy.log_path, "w").close()
    servers += [target, fault, proxy]
    ports["fault"] = fault.server_address[1]
    ports["redirect_target"] = target.server_address[1]
    ports["proxy"] = proxy.server_address[1]

    # Connect-timeout target: a listener with a full accept queue and syncookies
    # or not, Linux drops further SYNs, so connect() hangs until its timeout.
    hang = socket.socket()
    hang.bind((LOOP4, 0))
    hang.listen(0)
    fillers = []
    for _ in range(2):
        c = socket.socket()
        c.settimeout(0.5)
        try:
            c.connect(hang.getsockname())
        except OSError:
            pass
        fillers.append(c)
    ports["hang"] = hang.getsockname()[1]
    # Closed port: bound and never listened on, so nobody else gets it while
    # we hold it and connects are refused.
    closed = socket.socket()
    closed.bind((LOOP4, 0))
    ports["closed"] = closed.getsockname()[1]

    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    tmp = os.path.join(statedir, "py-ports.json.tmp")
    with open(tmp, "w") as f:
        json.dump(ports, f)
    os.rename(tmp, os.path.join(statedir, "py-ports.json"))
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    while True:
        time.sleep(3600)


# ---------------------------------------------------------------------------
# nginx
# ---------------------------------------------------------------------------

NGINX_LOCATIONS = """
    location / { }
    # ssi makes nginx drop the length and stream: Transfer-Encoding: chunked.
    location /chunked/ { ssi on; }
    location = /redirect { return 302 /small.txt; }
    location = /nocontent { return 204; }
    location = /status/503 { return 503 "unavailable\\n"; }
    location = /discard { client_max_body_size 0; return 200 "ok\\n"; }
"""


def free_port():
    s = socket.socket()
    s.bind((LOOP4, 0))
    port = s.getsockname()[1]
    s.close()
    return port


def write_docroot(www):
    os.makedirs(os.path.join(www, "chunked"), exist_ok=True)
    files = {}

    def put(rel, data):
        p = os.path.join(www, rel)
        with open(p, "wb") as f:
            f.write(data)
        files[rel] = {"path": "/" + rel, "size": len(data),
                      "sha256": hashlib.sha256(data).hexdigest()}
    put("small.txt", b"hello from nginx\n")
    put("4k.bin", pattern(4096))
    # 256 MiB of zeros, sparse: instant to make, read from the page cache.
    big = os.path.join(www, "big.bin")
    if not os.path.exists(big) or os.path.getsize(big) != BIG_SIZE:
        with open(big, "wb") as f:
            f.truncate(BIG_SIZE)
    files["big.bin"] = {"path": "/big.bin", "size": BIG_SIZE,
                        "sha256": "a6d72ac7690f53be6ae46ba88506bd97302a093f7108472bd9efc3cefda06484"}
    # SSI pages: nginx answers them chunked. Their sources are not listed in
    # files; "chunked" in peers.json gives the bodies a client must decode.
    for rel, src in (("chunked/small.html",
                      b"chunked <!--# echo var=\"ssi_marker\" default=\"from nginx\" -->\n"),
                     ("chunked/64k.html", b'<!--# include virtual="/4k.bin" -->' * 16),
                     ("chunked/big.html", b'<!--# include virtual="/big.bin" -->')):
        with open(os.path.join(www, rel), "wb") as f:
            f.write(src)
    small = b"chunked from nginx\n"
    k64 = pattern(4096) * 16
    chunked = {
        "small": {"path": "/chunked/small.html", "size": len(small),
                  "sha256": hashlib.sha256(small).hexdigest()},
        "64k": {"path": "/chunked/64k.html", "size": len(k64),
                "sha256": hashlib.sha256(k64).hexdigest()},
        "big": {"path": "/chunked/big.html", "size": BIG_SIZE,
                "sha256": files["big.bin"]["sha256"]},
    }
    return files, chunked


def nginx_conf(statedir, ports, certs, www, ipv6):
    nd = os.path.join(statedir, "nginx")
    user = ""
    if os.geteuid() == 0:
        # Workers keep root so they read the docroot wherever the clone is.
        user = "user root root;"

    def listen(port, tls=False):
        out = "listen %s:%d%s;" % (LOOP4, port, " ssl" if tls else "")
        if ipv6:
            out += " listen [%s]:%d%s;" % (LOOP6, port, " ssl" if tls else "")
        return out
    tls_common = "ssl_protocols TLSv1.2 TLSv1.3;"
    return f"""
{user}
worker_processes 1;
daemon on;
pid {nd}/nginx.pid;
error_log {nd}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log {nd}/access.log combined buffer=64k flush=1s;
    client_body_temp_path {nd}/body;
    proxy_temp_path {nd}/proxy;
    fastcgi_temp_path {nd}/fastcgi;
    uwsgi_temp_path {nd}/uwsgi;
    scgi_temp_path {nd}/scgi;
    types {{ text/plain txt; text/html html; application/octet-stream bin; }}
    default_type application/octet-stream;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 75s;
    keepalive_requests 1000000;
    server_tokens off;
    root {www};
    server {{
        {listen(ports["http"])}
        {NGINX_LOCATIONS}
    }}
    server {{
        {listen(ports["https"], True)}
        ssl_certificate {certs}/server.crt;
        ssl_certificate_key {certs}/server.key;
        {tls_common}
        {NGINX_LOCATIONS}
    }}
    server {{
        {listen(ports["https_ec"], True)}
        ssl_certificate {certs}/server-ec.crt;
        ssl_certificate_key {certs}/server-ec.key;
        {tls_common}
        {NGINX_LOCATIONS}
    }}
}}
"""


# ---------------------------------------------------------------------------
# start / stop
# ---------------------------------------------------------------------------

def pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def ours(pid, statedir):
    """True when pid still runs one of our commands for this statedir, so a
    recycled pid is never killed."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    return statedir in cmd


def read_pid(path):
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def stop(statedir):
    statedir = os.path.abspath(statedir)
    pids_path = os.path.join(statedir, "pids")
    pids = []
    if os.path.exists(pids_path):
        with open(pids_path) as f:
            pids = [int(x) for x in f.read().split()]
    ngx = read_pid(os.path.join(statedir, "nginx", "nginx.pid"))
    if ngx and ngx not in pids:
        pids.append(ngx)
    targets = [p for p in pids if pid_alive(p) and ours(p, statedir)]
    for p in targets:
        try:
            os.kill(p, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(pid_alive(p) for p in targets):
        time.sleep(0.05)
        for p in targets:  # reap our own children when stop runs after start in one process
            try:
                os.waitpid(p, os.WNOHANG)
            except ChildProcessError:
                pass
    for p in targets:
        if pid_alive(p):
            log("pid %d ignored SIGTERM, killing" % p)
            os.kill(p, signal.SIGKILL)
    for name in ("pids", "peers.json", "peers.env", "py-ports.json"):
        try:
            os.remove(os.path.join(statedir, name))
        except FileNotFoundError:
            pass


def wait_accepting(port, host=LOOP4, timeout=10.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection((host, port), timeout=1).close()
            return True
        except OSError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)


def fail(statedir, msg):
    log("FAILED: " + msg)
    for name in ("py.log", "nginx/error.log", "nginx/start.log"):
        p = os.path.join(statedir, name)
        if os.path.exists(p) and os.path.getsize(p):
            log("--- %s" % p)
            with open(p, errors="replace") as f:
                sys.stderr.write(f.read()[-4000:])
    stop(statedir)
    sys.exit(1)


def flatten(prefix, obj, out):
    if isinstance(obj, dict):
        for k, v in obj.items():
            flatten(prefix + "_" + k.upper().replace("-", "_").replace(".", "_"), v, out)
    elif isinstance(obj, (int, str, bool)):
        out.append("%s=%s" % (prefix, json.dumps(obj) if isinstance(obj, str) else
                              (int(obj) if isinstance(obj, bool) else obj)))


def start(statedir):
    statedir = os.path.abspath(statedir)
    os.makedirs(statedir, exist_ok=True)
    stop(statedir)
    certs = os.path.join(statedir, "certs")
    r = subprocess.run([os.path.join(HERE, "certs.sh"), certs])
    if r.returncode != 0:
        fail(statedir, "certs.sh exited %d" % r.returncode)
    www = os.path.join(statedir, "www")
    files, chunked = write_docroot(www)
    pids = []

    # Python peers
    pylog = open(os.path.join(statedir, "py.log"), "w")
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "serve", statedir],
                            stdin=subprocess.DEVNULL, stdout=pylog, stderr=pylog,
                            start_new_session=True, close_fds=True)
    pids.append(proc.pid)
    with open(os.path.join(statedir, "pids"), "w") as f:
        f.write("%d\n" % proc.pid)
    ports_path = os.path.join(statedir, "py-ports.json")
    deadline = time.monotonic() + 15
    while not os.path.exists(ports_path):
        if proc.poll() is not None:
            fail(statedir, "python peers exited %d" % proc.returncode)
        if time.monotonic() > deadline:
            fail(statedir, "python peers did not report their ports")
        time.sleep(0.05)
    with open(ports_path) as f:
        py = json.load(f)

    # nginx: ports picked here, so retry if another process takes one first.
    nd = os.path.join(statedir, "nginx")
    ipv6 = True
    try:
        s6 = socket.socket(socket.AF_INET6)
        s6.bind((LOOP6, 0))
        s6.close()
    except OSError:
        ipv6 = False
    nginx_bin = shutil.which("nginx") or "/usr/sbin/nginx"
    for attempt in range(5):
        shutil.rmtree(nd, ignore_errors=True)
        os.makedirs(nd)
        nports = {"http": free_port(), "https": free_port(), "https_ec": free_port()}
        conf = os.path.join(nd, "nginx.conf")
        with open(conf, "w") as f:
            f.write(nginx_conf(statedir, nports, certs, www, ipv6))
        with open(os.path.join(nd, "start.log"), "w") as out:
            r = subprocess.run([nginx_bin, "-p", nd, "-e", os.path.join(nd, "error.log"),
                                "-c", conf], stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        if r.returncode == 0:
            break
        text = ""
        for name in ("start.log", "error.log"):
            if os.path.exists(os.path.join(nd, name)):
                with open(os.path.join(nd, name)) as f:
                    text += f.read()
        if "Address already in use" not in text or attempt == 4:
            fail(statedir, "nginx exited %d" % r.returncode)
    deadline = time.monotonic() + 10
    ngx = None
    while ngx is None:
        ngx = read_pid(os.path.join(nd, "nginx.pid"))
        if ngx is None and time.monotonic() > deadline:
            fail(statedir, "nginx wrote no pid file")
        time.sleep(0.02)
    pids.append(ngx)
    with open(os.path.join(statedir, "pids"), "w") as f:
        f.write("".join("%d\n" % p for p in pids))

    checks = [("nginx " + k, v) for k, v in nports.items()]
    checks += [("tls " + k, v) for k, v in py["tls"].items()]
    checks += [(k, py[k]) for k in ("fault", "redirect_target", "proxy")]
    for name, port in checks:
        if not wait_accepting(port):
            fail(statedir, "%s on port %d does not accept connections" % (name, port))
        if ipv6 and name.startswith("nginx") and not wait_accepting(port, LOOP6):
            fail(statedir, "%s on [::1]:%d does not accept connections" % (name, port))

    peers = {
        "statedir": statedir,
        "host": LOOP4,
        "ipv6": ipv6,
        "certs": {"dir": certs, "ca": os.path.join(certs, "ca.crt"),
                  "ca_der": os.path.join(certs, "ca.der"),
                  "ca2": os.path.join(certs, "ca2.crt"),
                  "bundle": os.path.join(certs, "bundle.crt"),
                  "cadir": os.path.join(certs, "cadir")},
        "nginx": dict(nports, pid=ngx, docroot=www, files=files, chunked=chunked,
                      paths={"redirect": "/redirect", "no_content": "/nocontent",
                             "status_503": "/status/503", "discard": "/discard",
                             "head": "/small.txt"}),
        "tls": py["tls"],
        "fault": {"port": py["fault"], "redirect_target": py["redirect_target"]},
        "proxy": {"port": py["proxy"], "log": os.path.join(statedir, "proxy.log")},
        "closed_port": py["closed"],
        "hang_port": py["hang"],
        "pids": {"python": proc.pid, "nginx": ngx},
    }
    tmp = os.path.join(statedir, "peers.json.tmp")
    with open(tmp, "w") as f:
        json.dump(peers, f, indent=2, sort_keys=True)
        f.write("\n")
    os.rename(tmp, os.path.join(statedir, "peers.json"))
    env = []
    flatten("ASB_PEER", {k: v for k, v in peers.items() if k != "nginx"}, env)
    flatten("ASB_PEER_NGINX", {k: v for k, v in peers["nginx"].items() if k not in ("files", "chunked")}, env)
    with open(os.path.join(statedir, "peers.env"), "w") as f:
        f.write("\n".join(env) + "\n")
    print(os.path.join(statedir, "peers.json"))


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("start", "stop", "serve"):
        sys.stderr.write(__doc__.split("\n\n")[0] + "\n")
        sys.exit(2)
    cmd, statedir = sys.argv[1], os.path.abspath(sys.argv[2])
    if cmd == "start":
        start(statedir)
    elif cmd == "stop":
        stop(statedir)
    else:
        serve(statedir)


if __name__ == "__main__":
    main()
