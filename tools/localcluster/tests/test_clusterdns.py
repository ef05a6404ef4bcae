#!/usr/bin/python3
"""The local cluster's DNS (lc.py ClusterDNS) on the wire, asked by a real
resolver library (dnspython) over UDP and TCP. The apiserver behind it is
replaced by canned objects (its `get`), so every answer shape can be had on
demand; the e2e run (e2e.sh) asks the same server about real Services.
Needs root (port 53). Prints one line per check, then "N passed, N failed"."""

import importlib.util
import os
import socket
import sys

import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("lc", os.path.join(HERE, "..", "lc.py"))
lc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lc)

ADDR = "127.53.255.254"  # no cluster's: those are 127.53.<octets of a 127.1.x.0/24 range>
READY = [{"type": "Ready", "status": "True"}]


def pod(ip, ready=True, deleting=False):
    md = {"name": "p-" + ip}
    if deleting:
        md["deletionTimestamp"] = "2026-11-30T00:00:00Z"
    return {"metadata": md, "status": {"podIP": ip, "conditions": READY if ready else []}}


MANY = ["127.1.9.%d" % i for i in range(1, 61)]  # 60 records: past 512 bytes
SERVICES = {
    "default/api": {"spec": {"clusterIP": "127.2.0.7"}},
    "default/sb": {"spec": {"clusterIP": "None", "selector": {"h": "1"}}},
    "default/many": {"spec": {"clusterIP": "None", "selector": {"h": "2"}}},
    "default/empty": {"spec": {"clusterIP": "None", "selector": {"h": "3"}}},
    "default/broken": None,  # the apiserver lookup fails
}
PODS = {
    "h=1": [pod("127.1.0.5"), pod("127.1.0.6", ready=False), pod("127.1.0.7", deleting=True),
            pod("10.0.0.1")],  # not loopback: must never be handed out
    "h=2": [pod(ip) for ip in MANY],
    "h=3": [pod("127.1.0.8", ready=False)],
}


def fake_get(path):
    """What the apiserver would answer for the two kinds of path asked."""
    parts = path.split("?")[0].split("/")
    ns = parts[4]
    if parts[5] == "services":
        key = ns + "/" + parts[6]
        if key not in SERVICES:
            return 404, None
        if SERVICES[key] is None:
            raise OSError("connection refused (canned)")
        return 200, SERVICES[key]
    sel = lc.urllib.parse.unquote(path.split("labelSelector=")[1])
    return 200, {"items": PODS.get(sel, [])}


passed = failed = 0


def check(what, ok):
    global passed, failed
    if ok:
        passed += 1
        print("ok - " + what)
    else:
        failed += 1
        print("FAIL - " + what)


def a_records(resp):
    return sorted(r.address for rrset in resp.answer for r in rrset
                  if rrset.rdtype == dns.rdatatype.A)


def ask(name, rdtype="A", tcp=False):
    q = dns.message.make_query(name, rdtype)
    if tcp:
        return dns.query.tcp(q, ADDR, timeout=5)
    return dns.query.udp(q, ADDR, timeout=5)


def main():
    logged = []
    server = lc.ClusterDNS("https://127.0.0.1:1", None, logged.append)
    server.get = fake_get
    server.start(ADDR)

    r = ask("api.default.svc.cluster.local")
    check("ClusterIP Service: its ClusterIP (%s)" % a_records(r),
          r.rcode() == dns.rcode.NOERROR and a_records(r) == ["127.2.0.7"])
    check("answers are authoritative and never offer recursion",
          r.flags & dns.flags.AA and not r.flags & dns.flags.RA)
    r = ask("SB.Default.svc.cluster.local.")
    check("headless Service: only its Ready, live, loopback pods (%s)" % a_records(r),
          a_records(r) == ["127.1.0.5"])
    check("the non-loopback pod IP was refused and logged",
          any("10.0.0.1 is not a loopback" in m for m in logged))
    r = ask("sb.default.svc.cluster.local", "AAAA")
    check("AAAA of an existing name: NOERROR, no records",
          r.rcode() == dns.rcode.NOERROR and not r.answer)
    r = ask("empty.default.svc.cluster.local")
    check("headless Service without Ready pods: NXDOMAIN", r.rcode() == dns.rcode.NXDOMAIN)
    r = ask("nope.default.svc.cluster.local")
    check("unknown Service: NXDOMAIN", r.rcode() == dns.rcode.NXDOMAIN)
    r = ask("pod.sb.default.svc.cluster.local")
    check("names below a Service: NXDOMAIN", r.rcode() == dns.rcode.NXDOMAIN)
    r = ask("example.com")
    check("outside cluster.local: REFUSED, nothing forwarded", r.rcode() == dns.rcode.REFUSED)
    r = ask("broken.default.svc.cluster.local")
    check("apiserver unreachable: SERVFAIL", r.rcode() == dns.rcode.SERVFAIL)
    r = ask("many.default.svc.cluster.local")
    check("60 records over UDP: truncated (TC), no records",
          r.flags & dns.flags.TC and not r.answer)
    r, used_tcp = dns.query.udp_with_fallback(
        dns.message.make_query("many.default.svc.cluster.local", "A"), ADDR, timeout=5)
    check("a resolver falls back to TCP and gets all 60 (tcp: %s)" % used_tcp,
          used_tcp and a_records(r) == sorted(MANY))
    r = ask("api.default.svc.cluster.local", tcp=True)
    check("TCP answers like UDP", a_records(r) == ["127.2.0.7"])

    # garbage never stops it
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for junk in (b"", b"\x00", b"\xff" * 11, b"\x12\x34\x01\x00\x00\x01" + b"\x00" * 6 + b"\x3f",
                 os.urandom(300), b"\x12\x34\x81\x80" + b"\x00" * 8):
        s.sendto(junk, (ADDR, 53))
    t = socket.create_connection((ADDR, 53), timeout=5)
    t.sendall(b"\x00\x05abc")  # promises 5 bytes, sends 3, closes
    t.close()
    r = ask("api.default.svc.cluster.local")
    check("after garbage over UDP and a cut TCP query it still answers",
          a_records(r) == ["127.2.0.7"])

    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
