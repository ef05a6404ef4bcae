#!/usr/bin/env python3
"""Provokes each error of the README's Troubleshooting section against the
local cluster (with tests/troubleshooting.c) and checks that the README
quotes the library's code and message exactly.

In the README each case is a marker and a text block:

    <!-- troubleshooting: CASE ASB_ERR_CODE -->
    ```text
    the message, with <placeholders> where it names paths, ports, pods
    ```

A <placeholder> stands for any text. Every case below must be in the
README and every marker in the README must be a case below. The short
list under TROUBLESHOOTING in agentsandbox.h (next to the README) is
checked too: each message the library printed starts like one of its
entries, and each entry matches a message.
Usage: troubleshooting_test.py BINARY STATE_DIR README.md
"""
import base64
import os
import re
import subprocess
import sys
import tempfile

import yaml

binary, state, readme = sys.argv[1:4]
admin = os.path.join(state, "kubeconfig", "admin.kubeconfig")
restricted = os.path.join(state, "kubeconfig", "restricted.kubeconfig")
tmp = tempfile.mkdtemp(prefix="asb-troubleshooting-")

# A kubeconfig that trusts a CA that did not sign the apiserver's certificate.
subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                "-nodes", "-subj", "/CN=not-the-cluster-ca", "-days", "1",
                "-keyout", os.path.join(tmp, "other-ca.key"), "-out", os.path.join(tmp, "other-ca.crt")],
               check=True, capture_output=True)
cfg = yaml.safe_load(open(admin))
cfg["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(
    open(os.path.join(tmp, "other-ca.crt"), "rb").read()).decode()
bad_ca = os.path.join(tmp, "other-ca.kubeconfig")
with open(bad_ca, "w") as f:
    yaml.safe_dump(cfg, f)
empty_dir = os.path.join(tmp, "empty")
os.mkdir(empty_dir)

# Not a pod either: in one, no kubeconfig means the service account.
base = {k: v for k, v in os.environ.items()
        if k not in ("KUBECONFIG", "HOME", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")}
base["HOME"] = empty_dir
TEMPLATE = "python-sandbox-template"
CASES = {
    # name: (arguments, environment changes)
    "no-kubeconfig": (["client"], {}),
    "kubeconfig-list-missing": (["client"], {"KUBECONFIG": os.path.join(tmp, "no-such-file")}),
    "no-kubectl": (["create", TEMPLATE], {"KUBECONFIG": admin, "PATH": empty_dir}),
    "router-not-found": (["create", TEMPLATE, "default"], {"KUBECONFIG": admin}),
    "template-not-found": (["create", "no-such-template"], {"KUBECONFIG": admin}),
    # what a cluster whose preferred claim version is v1beta1 (agent-sandbox
    # v0.5+) answers a template name with; the tier's cluster runs v0.4.6
    "warm-pool-needed": (["create", TEMPLATE, "", "v1beta1"], {"KUBECONFIG": admin}),
    "rbac-denied": (["create", TEMPLATE], {"KUBECONFIG": restricted}),
    "tls-unknown-ca": (["create", TEMPLATE], {"KUBECONFIG": bad_ca}),
}

text = open(readme, encoding="utf-8").read()
documented = {}
for m in re.finditer(r"<!-- troubleshooting: (\S+) (ASB_\w+) -->\n```text\n(.*?)\n```", text, re.S):
    documented[m.group(1)] = (m.group(2), m.group(3).strip())

failures = []
seen = {}  # case: the message the library printed
for name in sorted(set(documented) - set(CASES)):
    failures.append("%s: in %s but this test does not provoke it" % (name, readme))
for name, (args, env) in CASES.items():
    if name not in documented:
        failures.append("%s: not in %s (add a '<!-- troubleshooting: %s CODE -->' marker and "
                        "a text block)" % (name, readme, name))
        continue
    e = dict(base)
    e.update(env)
    p = subprocess.run([binary] + args, env=e, capture_output=True, text=True, timeout=300)
    if p.returncode != 0 or "\t" not in p.stdout:
        failures.append("%s: the error was not provoked (exit %d): %s%s" %
                        (name, p.returncode, p.stdout, p.stderr))
        continue
    code, message = p.stdout.rstrip("\n").split("\t", 1)
    want_code, want = documented[name]
    pattern = "".join(".+?" if re.fullmatch(r"<[A-Za-z][A-Za-z' -]*>", part) else re.escape(part)
                      for part in re.split(r"(<[A-Za-z][A-Za-z' -]*>)", " ".join(want.split())))
    if code != want_code or not re.fullmatch(pattern, message, re.S):
        failures.append("%s: the library says\n    %s  %s\n  the README says\n    %s  %s" %
                        (name, code, message, want_code, want))
    else:
        print("ok %s: %s %s" % (name, code, message))
    seen[name] = message

# The header's short list: lines indented by exactly five spaces, each the
# start of a message ("..." for the rest).
header = os.path.join(os.path.dirname(os.path.abspath(readme)), "agentsandbox.h")
hl = open(header, encoding="utf-8").read().split("\n")
start = next(i for i, l in enumerate(hl) if l.strip().startswith("TROUBLESHOOTING:"))
end = next(i for i in range(start, len(hl)) if hl[i].strip() == "*/")
entries = [l.strip() for l in hl[start:end] if re.match(r"     \S", l)]


def entry_pattern(entry):
    parts = re.split(r"(<[A-Za-z][A-Za-z' -]*>|\.\.\.)", entry)
    return "".join(".*" if p == "..." else ".+?" if p.startswith("<") else re.escape(p)
                   for p in parts)


matched = set()
for name, message in seen.items():
    hits = [e for e in entries if re.fullmatch(entry_pattern(e), message, re.S)]
    if not hits:
        failures.append("%s: no entry of the header's TROUBLESHOOTING list (%s:%d) starts "
                        "like\n    %s" % (name, header, start + 1, message))
    matched.update(hits)
if len(seen) == len(CASES):
    for e in entries:
        if e not in matched:
            failures.append("the header's TROUBLESHOOTING entry '%s' (%s) matches no message "
                            "the library printed" % (e, header))

for f in failures:
    print("troubleshooting: " + f)
if failures:
    sys.exit(1)
print("troubleshooting: %d messages in %s match the library" % (len(CASES), readme))
