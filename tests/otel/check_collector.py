#!/usr/bin/env python3
"""Checks what the OpenTelemetry Collector's file exporter wrote after
otel_e2e traced (tests/otel/run-e2e.sh): the span tree of one sandbox
life, its attributes and statuses, the service name, the claim's
trace-context annotation, the router's and the controller's spans in the
same trace, the latency histograms, and that no secret reached it.

  check_collector.py OUT.json FACTS
  check_collector.py OUT.json discovery SERVICE MODE STATUS [SERVICE MODE STATUS...]
      each SERVICE exported sandbox_client_discovery_latency_ms with a
      point {mode: MODE, status: STATUS} holding a count, and no point of
      another mode (otel_e2e gateway: the Gateway's address lookup)
"""
import json
import sys
import time

SECRETS = ["otelsecretENV7f3a", "otelsecretARG91c2", "otelsecretFILE44d1"]
OPS = ["lifecycle", "create_claim", "wait_for_claim_ready", "run", "run", "write", "read",
       "read", "exists", "list", "delete_claim"]


def load(path):
    spans, metrics = [], []
    try:
        text = open(path).read()
    except FileNotFoundError:
        text = ""
    # The collector appends while we read: a last line without its newline
    # is one it has not finished writing (CI once cut one at 4096 bytes).
    # Leave it for the next poll; every finished line must parse.
    lines = text.split("\n")[:-1]
    for line in lines:
        if not line.strip():
            continue
        doc = json.loads(line)
        for rs in doc.get("resourceSpans", []):
            svc = attr_map(rs.get("resource", {}).get("attributes", [])).get("service.name")
            for ss in rs.get("scopeSpans", []):
                for s in ss.get("spans", []):
                    s["service"] = svc
                    s["attrs"] = attr_map(s.get("attributes", []))
                    spans.append(s)
        for rm in doc.get("resourceMetrics", []):
            svc = attr_map(rm.get("resource", {}).get("attributes", [])).get("service.name")
            for sm in rm.get("scopeMetrics", []):
                for m in sm.get("metrics", []):
                    m["service"] = svc
                    metrics.append(m)
    return spans, metrics


def attr_map(attrs):
    out = {}
    for a in attrs:
        v = a.get("value", {})
        if "stringValue" in v:
            out[a["key"]] = v["stringValue"]
        elif "intValue" in v:
            out[a["key"]] = int(v["intValue"])
        elif "boolValue" in v:
            out[a["key"]] = v["boolValue"]
        else:
            out[a["key"]] = v
    return out


def fail(msg):
    print("check_collector: FAIL: " + msg)
    sys.exit(1)


def main():
    out, facts_path = sys.argv[1], sys.argv[2]
    facts = {}
    for line in open(facts_path):
        k, _, v = line.rstrip("\n").partition(" ")
        facts.setdefault(k, []).append(v)
    claim = facts["claim"][0]
    life_tp = facts["lifecycle"][0]
    trace_id, life_id = life_tp.split("-")[1], life_tp.split("-")[2]
    run_ids = [v.split()[1].split("-")[2] for v in facts["span"] if v.startswith("sandbox-client.run ")]

    # The other services batch for 5 s: wait (bounded) for theirs too.
    deadline = time.time() + 60
    while True:
        spans, metrics = load(out)
        # this life's (a later phase may have written more to the file)
        ours = [s for s in spans if s["service"] == "sandbox-client" and s["traceId"] == trace_id]
        theirs = [s for s in spans if s["service"] != "sandbox-client" and s["traceId"] == trace_id]
        router = [s for s in theirs if s.get("parentSpanId") in run_ids]
        controller = [s for s in theirs if s["service"] == "agent-sandbox-controller"]
        if (len(ours) >= len(OPS) and router and controller) or time.time() > deadline:
            break
        time.sleep(1)

    names = sorted(s["name"] for s in ours)
    want = sorted("sandbox-client." + o for o in OPS)
    if names != want:
        fail("our spans: %s, want %s" % (names, want))
    by = {}
    for s in ours:
        by.setdefault(s["name"].split(".", 1)[1], []).append(s)
    life = by["lifecycle"][0]
    if life["traceId"] != trace_id or life["spanId"] != life_id or life.get("parentSpanId"):
        fail("lifecycle span %s/%s parent %r, want root %s/%s" %
             (life["traceId"], life["spanId"], life.get("parentSpanId"), trace_id, life_id))
    for s in ours:
        if s["traceId"] != trace_id:
            fail("%s in trace %s, want %s" % (s["name"], s["traceId"], trace_id))
        if s is not life and s.get("parentSpanId") != life_id:
            fail("%s has parent %r, want the lifecycle %s" % (s["name"], s.get("parentSpanId"), life_id))
        if int(s["endTimeUnixNano"]) < int(s["startTimeUnixNano"]):
            fail("%s ends before it starts" % s["name"])
    if life["attrs"].get("sandbox.claim.name") != claim:
        fail("lifecycle attributes %r" % life["attrs"])

    cc = by["create_claim"][0]["attrs"]
    if cc.get("sandbox.claim.name") != claim or cc.get("sandbox.lifecycle.shutdown_policy") != "Delete" \
            or not str(cc.get("sandbox.lifecycle.shutdown_time", "")).endswith("Z"):
        fail("create_claim attributes %r" % cc)
    if by["wait_for_claim_ready"][0]["attrs"].get("sandbox.claim.name") != claim:
        fail("wait_for_claim_ready attributes %r" % by["wait_for_claim_ready"][0]["attrs"])
    if by["delete_claim"][0]["attrs"].get("sandbox.claim.name") != claim:
        fail("delete_claim attributes %r" % by["delete_claim"][0]["attrs"])
    runs = sorted((s["attrs"] for s in by["run"]), key=lambda a: a.get("sandbox.command.executable"))
    if runs != [{"sandbox.command.executable": "echo", "sandbox.exit_code": 0},
                {"sandbox.command.executable": "run.sh",
                 "sandbox.exit_code": int(facts["exit_code"][0])}]:
        fail("run attributes %r" % runs)
    w = by["write"][0]["attrs"]
    if w != {"sandbox.file.path": "otel/f.txt", "sandbox.file.size": 28}:
        fail("write attributes %r" % w)
    reads = sorted(by["read"], key=lambda s: s.get("status", {}).get("code", 0))
    if reads[0]["attrs"] != {"sandbox.file.path": "otel/f.txt", "sandbox.file.size": 28}:
        fail("read attributes %r" % reads[0]["attrs"])
    st = reads[1].get("status", {})
    if st.get("code") != 2 or st.get("message") != "ASB_ERR_NOT_FOUND" or \
            reads[1]["attrs"].get("http.response.status_code") != 404 or \
            reads[1]["attrs"].get("asb.error.code") != -600:
        fail("the failed read: status %r attributes %r" % (st, reads[1]["attrs"]))
    for s in ours:
        if s is not reads[1] and s.get("status", {}).get("code", 0) != 0:
            fail("%s has status %r" % (s["name"], s.get("status")))
    if by["exists"][0]["attrs"] != {"sandbox.file.path": "otel/f.txt", "sandbox.file.exists": True}:
        fail("exists attributes %r" % by["exists"][0]["attrs"])
    if by["list"][0]["attrs"] != {"sandbox.file.path": "otel", "sandbox.file.count": 1}:
        fail("list attributes %r" % by["list"][0]["attrs"])

    # The claim's annotation: the create_claim span's context, the
    # reference's JSON shape.
    ann = json.loads(facts["annotation"][0])
    create_id = by["create_claim"][0]["spanId"]
    if ann != {"traceparent": "00-%s-%s-01" % (trace_id, create_id)}:
        fail("claim annotation %r, want the create_claim span 00-%s-%s-01" % (ann, trace_id, create_id))

    # The router extracted our traceparent: its server spans are children
    # of our run spans; the controller continued the claim's trace.
    if not router:
        fail("no router span is a child of a run span (%s); spans in our trace from others: %r" %
             (run_ids, [(s["service"], s["name"]) for s in theirs]))
    if not controller:
        fail("no controller span in trace %s (services seen: %r)" %
             (trace_id, sorted({s["service"] for s in spans})))
    print("check_collector: router spans %s (service %s) under our run spans; controller spans %s" %
          (sorted({s["name"] for s in router}), router[0]["service"],
           sorted({s["name"] for s in controller})[:4]))

    # Histograms.
    mine = {m["name"]: m for m in metrics if m["service"] == "sandbox-client"}
    for name in ["sandbox_client_call_latency_ms", "sandbox_client_create_ready_latency_ms",
                 "sandbox_client_discovery_latency_ms"]:  # the local tunnel's start
        if name not in mine:
            fail("metric %s missing (have %s)" % (name, sorted(mine)))
    # one export of this life's client (cumulative: the last has every call;
    # later phases' clients export their own)
    seen = []
    for call in (m for m in metrics if m["service"] == "sandbox-client" and
                 m["name"] == "sandbox_client_call_latency_ms"):
        points = {(attr_map(p["attributes"]).get("op"), attr_map(p["attributes"]).get("status")):
                  int(p["count"]) for p in call["histogram"]["dataPoints"]}
        seen.append(points)
        if points.get(("run", "success")) == 2 and points.get(("read", "failure")) == 1 and \
                points.get(("read", "success")) == 1 and points.get(("delete_claim", "success")) == 1:
            break
    else:
        fail("no call latency export with 2 runs, 1 failed read, 1 delete: %r" % seen)
    if call["histogram"].get("aggregationTemporality") not in (2, "AGGREGATION_TEMPORALITY_CUMULATIVE"):
        fail("temporality %r" % call["histogram"].get("aggregationTemporality"))

    # No secret anywhere the collector wrote.
    text = open(out).read()
    for sec in SECRETS:
        if sec in text:
            fail("the secret %s reached the collector" % sec)
    print("check_collector: %d spans of ours, tree, attributes, annotation, histograms ok; "
          "no secret in %d bytes" % (len(ours), len(text)))


def discovery(out, triples):
    want = [tuple(triples[i:i + 3]) for i in range(0, len(triples), 3)]
    if not want or any(len(w) != 3 for w in want):
        fail("discovery wants SERVICE MODE STATUS triples, got %r" % triples)
    deadline = time.time() + 60
    while True:
        _, metrics = load(out)
        found, why = {}, {}
        for service, mode, status in want:
            for m in metrics:
                if m["service"] != service or m["name"] != "sandbox_client_discovery_latency_ms":
                    continue
                for pt in m["histogram"]["dataPoints"]:
                    a = attr_map(pt.get("attributes", []))
                    if a.get("mode") != mode:
                        why[service] = "a point of mode %r: %r" % (a.get("mode"), a)
                        continue
                    count = int(pt.get("count", 0))
                    buckets = sum(int(x) for x in pt.get("bucketCounts", []))
                    if a.get("status") == status and count >= 1 and buckets == count:
                        found[service] = (count, a)
        if len(found) == len(want) or time.time() > deadline:
            break
        time.sleep(0.5)
    for service, mode, status in want:
        if service in why:
            fail("%s: %s" % (service, why[service]))
        if service not in found:
            fail("%s exported no sandbox_client_discovery_latency_ms point {mode: %s, status: %s} "
                 "(its points: %r)" % (service, mode, status,
                                       sorted({(m["name"], tuple(sorted(attr_map(pt.get("attributes", [])).items())))
                                               for m in metrics if m["service"] == service
                                               for pt in m.get("histogram", {}).get("dataPoints", [])})))
        print("check_collector: %s: sandbox_client_discovery_latency_ms %r, count %d" %
              (service, found[service][1], found[service][0]))


if __name__ != "__main__":
    pass
elif len(sys.argv) > 2 and sys.argv[2] == "discovery":
    discovery(sys.argv[1], sys.argv[3:])
else:
    main()
