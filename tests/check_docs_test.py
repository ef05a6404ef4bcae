#!/usr/bin/env python3
"""tools/check_docs.py can fail: each case below breaks one rule in a copy
of the header and expects the check to refuse it, naming the rule. The
unmodified header must pass. Usage: tests/check_docs_test.py HEADER OUTDIR"""
import os
import re
import subprocess
import sys

header, outdir = sys.argv[1], sys.argv[2]
here = os.path.dirname(os.path.abspath(__file__))
check = os.path.join(here, "..", "tools", "check_docs.py")
text = open(header, encoding="utf-8").read()
os.makedirs(outdir, exist_ok=True)


def run(src):
    path = os.path.join(outdir, "agentsandbox.h")
    with open(path, "w", encoding="utf-8") as f:
        f.write(src)
    p = subprocess.run([sys.executable, check, path], capture_output=True, text=True)
    return p.returncode, p.stdout


def cancel_comment():
    # the comment right above asb_grpc_call_cancel's declaration
    m = re.search(r"/\*[^/]*?\*/\n(ASB_API void asb_grpc_call_cancel\()", text)
    assert m, "asb_grpc_call_cancel's comment not found"
    return m


def mutate(name):
    m = cancel_comment()
    if name == "missing comment":
        return text[:m.start()] + "\n" + text[m.start(1):]
    if name == "trailing comment":
        return text[:m.start()] + "int asb_docs_test_x; /* a comment of that line */\n" \
            + text[m.start(1):]
    if name == "empty comment":
        return text[:m.start()] + "/* Cancels. */\n" + text[m.start(1):]
    if name == "no errors":
        old = "   Errors: ASB_ERR_IO when the OS has no randomness to give. */"
        assert text.count(old) == 1
        return text.replace(old, "   */")
    if name == "unlisted log id":
        old = '"http.hold"'
        assert old in text
        return text.replace(old, '"http.holdx"', 1)
    if name == "banner missing from the contents":
        old = '">>json", '
        assert old in text
        return text.replace(old, "", 1)
    if name == "stale name":
        assert "QUICK START" in text
        return text.replace("QUICK START", "QUICK START asb_no_such_call", 1)
    raise KeyError(name)


expect = {
    "missing comment": "asb_grpc_call_cancel has no doc comment",
    "trailing comment": "asb_grpc_call_cancel has no doc comment of its own",
    "empty comment": "asb_grpc_call_cancel's doc comment",
    "no errors": "asb_claim_name_generate returns asb_result but",
    "unlisted log id": '"http.holdx" is not in the list',
    "banner missing from the contents": '">>json" is not in the TABLE OF CONTENTS',
    "stale name": "asb_no_such_call, which the header does not declare",
}

failed = 0
rc, out = run(text)
if rc != 0:
    print("FAIL the unmodified header is refused:\n" + out)
    failed += 1
else:
    print("ok   the unmodified header passes")
for name, want in expect.items():
    rc, out = run(mutate(name))
    if rc == 0 or want not in out:
        print("FAIL %s: rc %d, expected a line with %r:\n%s" % (name, rc, want, out))
        failed += 1
    else:
        print("ok   %s is refused" % name)
sys.exit(1 if failed else 0)
