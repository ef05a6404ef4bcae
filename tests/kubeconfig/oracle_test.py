#!/usr/bin/env python3
"""kubeconfig reading, checked against kubectl.

For every valid file and every context in it (and for merged KUBECONFIG
lists), `kubectl config view --raw --flatten --minify -o json` is the
oracle: our resolution (tests/kubeconfig_dump) must agree on server, CA,
client certificate and key, token, token file, basic auth, namespace,
tls-server-name, proxy-url, insecure flag and the exec plugin. Every broken
file must fail in both, ours with file:line:col. kubectl here may be a
dispatcher that complains on stderr: only its stdout and status count.

Usage: oracle_test.py DUMP_BINARY
"""
import base64, json, os, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
DUMP = sys.argv[1]
passed = failed = 0


def kubectl(args, env=None):
    r = subprocess.run(["kubectl", "config", "view", "--raw", "--flatten", "--minify",
                        "-o", "json"] + args, capture_output=True, text=True, env=env)
    return r.returncode, (json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else None)


def ours(args, env=None):
    r = subprocess.run([DUMP] + args, capture_output=True, text=True, env=env)
    try:
        return r.returncode, json.loads(r.stdout)
    except ValueError:
        return r.returncode, {"ok": False, "error": "unparseable output: %r %r" % (r.stdout, r.stderr)}


def expected(view, origin_dir):
    """What kubectl resolved, in our dump's shape."""
    ctx = view["contexts"][0]
    cl = view["clusters"][0]["cluster"] if view.get("clusters") else {}
    us = view["users"][0]["user"] if view.get("users") else {}
    ex = us.get("exec")
    tf = us.get("tokenFile")
    if tf and not tf.startswith("/"):
        tf = os.path.normpath(os.path.join(origin_dir, tf))
    e = {
        "context": ctx["name"],
        "cluster": ctx["context"].get("cluster"),
        "user": ctx["context"].get("user") or None,
        "server": cl.get("server"),
        "namespace": ctx["context"].get("namespace") or "default",
        "tls_server_name": cl.get("tls-server-name"),
        "proxy_url": cl.get("proxy-url"),
        "insecure": bool(cl.get("insecure-skip-tls-verify", False)),
        "ca": cl.get("certificate-authority-data"),
        "client_cert": us.get("client-certificate-data"),
        "client_key": us.get("client-key-data"),
        "token": us.get("token") or None,
        "token_file": tf,
        "username": us.get("username"),
        "password": us.get("password"),
    }
    if ex:
        e["exec"] = {"command": ex.get("command"), "apiVersion": ex.get("apiVersion"),
                     "installHint": ex.get("installHint") or None,
                     "interactiveMode": ex.get("interactiveMode") or None,
                     "provideClusterInfo": bool(ex.get("provideClusterInfo")),
                     "args": ex.get("args") or [], "env": ex.get("env") or []}
    else:
        e["exec"] = None
    return e


def compare(label, exp, got):
    global passed, failed
    diffs = []
    for k, v in exp.items():
        g = got.get(k)
        if k == "exec" and v and g:
            cmd = v["command"]
            if cmd and "/" in cmd and not cmd.startswith("/"):
                v = dict(v, command=None)
                g = dict(g, command=None)
        if k == "token_file" and g:
            g = os.path.normpath(g)
        if g != v:
            diffs.append("%s: kubectl %r, ours %r" % (k, v, g))
    if diffs:
        failed += 1
        print("FAIL %s\n    %s" % (label, "\n    ".join(diffs)))
    else:
        passed += 1
        print("ok   %s" % label)


def check_file(path, env_list=None):
    global passed, failed
    env = dict(os.environ)
    base = []
    if env_list:
        env["KUBECONFIG"] = ":".join(env_list)
    else:
        base = ["--kubeconfig", path]
    rc, full = subprocess.run(["kubectl", "config", "view", "--raw", "-o", "json"] + base,
                              capture_output=True, text=True, env=env).returncode, None
    r = subprocess.run(["kubectl", "config", "view", "--raw", "-o", "json"] + base,
                       capture_output=True, text=True, env=env)
    contexts = [c["name"] for c in json.loads(r.stdout).get("contexts") or []]
    label0 = os.path.relpath(path, HERE) if not env_list else "KUBECONFIG=" + ":".join(
        os.path.relpath(p, HERE) for p in env_list)
    for c in [None] + contexts:
        args = base + (["--context", c] if c else [])
        krc, view = kubectl(args, env)
        orc, got = ours(args, env)
        label = "%s%s" % (label0, " --context " + c if c else " (current-context)")
        if krc != 0 or not view or not view.get("contexts"):
            if orc == 0:
                failed += 1
                print("FAIL %s: kubectl fails, ours resolves" % label)
            else:
                passed += 1
                print("ok   %s (both fail)" % label)
            continue
        if orc != 0:
            failed += 1
            print("FAIL %s: ours fails: %s" % (label, got.get("error")))
            continue
        # the stanza's origin decides relative paths: the first listed file
        # that defines the user (kubectl's merge rule)
        origin = os.path.dirname(path)
        if env_list:
            for p in env_list:
                rr = subprocess.run(["kubectl", "config", "view", "--raw", "-o", "json",
                                     "--kubeconfig", p], capture_output=True, text=True)
                users = [u["name"] for u in json.loads(rr.stdout).get("users") or []]
                if view.get("users") and view["users"][0]["name"] in users:
                    origin = os.path.dirname(p)
                    break
        compare(label, expected(view, origin), got)
        if env_list:
            # the same list as asb_kubeconfig_desc.paths, no KUBECONFIG
            penv = dict(env, ASB_DUMP_PATHS="1")
            prc, pgot = ours(args, penv)
            if prc != 0:
                failed += 1
                print("FAIL %s (paths): ours fails: %s" % (label, pgot.get("error")))
            else:
                compare(label + " (paths)", expected(view, origin), pgot)


for name in sorted(os.listdir(os.path.join(HERE, "valid"))):
    check_file(os.path.join(HERE, "valid", name))
for d in sorted(os.listdir(os.path.join(HERE, "merge"))):
    files = sorted(os.path.join(HERE, "merge", d, f) for f in os.listdir(os.path.join(HERE, "merge", d)))
    check_file(files[0], files)
    check_file(files[0], list(reversed(files)))
for name in sorted(os.listdir(os.path.join(HERE, "broken"))):
    path = os.path.join(HERE, "broken", name)
    krc, _ = kubectl(["--kubeconfig", path])
    orc, got = ours(["--kubeconfig", path])
    err = got.get("error") or ""
    import re
    has_line = re.search(r"\.yaml:\d+:\d+: ", err) is not None
    if orc != 0 and has_line and krc != 0:
        passed += 1
        print("ok   broken/%s: %s" % (name, err))
    else:
        failed += 1
        print("FAIL broken/%s: kubectl rc %d, ours rc %d: %s" % (name, krc, orc, err))
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
