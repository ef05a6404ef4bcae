#!/usr/bin/python3
"""Local Kubernetes control plane with the agent-sandbox controller.

  lc.py up [--agent-sandbox v0.4.6|v0.5.6]   start everything, wait, print KUBECONFIG
  lc.py down                                 stop what `up` started (by pid), remove state
  lc.py status                               what runs
  lc.py restart-apiserver                    stop kube-apiserver and start it again
                                             with the same arguments (watch tests)
  lc.py stop-router / start-router           SIGKILL the sandbox-router (a pod that dies
                                             under a tunnel), start it again with the same
                                             arguments and port (tunnel recovery tests)
  lc.py pod-exec NS/POD -- COMMAND...        run COMMAND beside sandboxd in a sandboxd pod:
                                             in its network namespace, with its container's
                                             env, in its root dir (a sidecar, as kubectl exec
                                             into a second container would; no API involved)
  lc.py pod-expose NS/POD                    serve a sandboxd pod's ports on its pod IP (a proxy
                                             in the pod, as ASB_CONNECT_IN_CLUSTER needs: sandboxd
                                             binds 127.0.0.1 only) until SIGTERM or the parent's end
  lc.py podrunner                            (internal) the pod runner daemon

Everything is real and built from Go modules (scripts/build.sh): etcd,
kube-apiserver, kube-controller-manager, kube-scheduler, kwok (the fake
kubelet), the agent-sandbox controller and the Go sandbox-router. Every
listener is on 127.0.0.1 (pods get 127.1.0.x addresses), TLS and RBAC are on.

Environment:
  AGENTSANDBOX_CACHE   build cache (default ~/.cache/agentsandbox)
  LC_STATE_DIR         runtime state (default <repo>/build/localcluster)
  LC_POD_CIDR          pod CIDR, must be loopback (default 127.1.0.0/24)
  LC_RUNTIME_BIN       runtime server started for each sandbox pod
                       (default <repo>/build/runtime/agentsandbox-runtime)
  LC_RUNTIME_PORT      port the runtime listens on in each pod (default 8888)
  LC_SANDBOXD_BIN      sandboxd started, in a network namespace of its own, for
                       each sandboxd pod (default: the cache's sandboxd-<version>)
  LC_SERVICE_CIDR      service range, must be loopback (default 127.2.0.0/24)
  LC_MAX_PODS          pods the kwok node takes (default 110, a kubelet's; the
                       scale tier sets 1000 with a /22 pod range); its CPU and
                       memory grow to fit (32 CPUs and 256Gi at least)
  LC_NO_DNS_ISOLATION  set: run daemons without the private loopback-only resolv.conf
  LC_OTLP_ENDPOINT     an OTLP/gRPC collector (http://127.0.0.1:PORT): the agent-sandbox
                       controller (--enable-tracing) and the router send it their spans
"""

import base64
import ctypes
import http.client
import ipaddress
import json
import os
import queue
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import yaml

LC = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(LC))


def read_versions():
    v = {}
    with open(os.path.join(LC, "versions.env")) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                k, val = line.split("=", 1)
                v[k] = val
    return v


VERSIONS = read_versions()
CACHE = os.environ.get("AGENTSANDBOX_CACHE") or os.path.expanduser("~/.cache/agentsandbox")
STATE = os.environ.get("LC_STATE_DIR") or os.path.join(REPO, "build", "localcluster")
POD_CIDR = os.environ.get("LC_POD_CIDR") or "127.1.0.0/24"


def dns_address(pod_cidr):
    """The cluster DNS's address: a loopback address of its own per pod
    range (127.53.<2nd>.<3rd> octet of it), because a resolver listens on
    port 53 and clusters with different pod ranges run side by side."""
    o = ipaddress.ip_network(pod_cidr).network_address.packed
    return "127.53.%d.%d" % (o[1], o[2])


DNS_ADDR = dns_address(POD_CIDR)
RUNTIME_BIN = os.path.abspath(os.environ.get("LC_RUNTIME_BIN") or os.path.join(REPO, "build", "runtime", "agentsandbox-runtime"))
RUNTIME_PORT = int(os.environ.get("LC_RUNTIME_PORT") or "8888")
# Loopback too: only the `kubernetes` Service gets an address (the router
# Service is headless) and nothing dials it, but no address we hand out
# should point off the machine.
SERVICE_CIDR = os.environ.get("LC_SERVICE_CIDR") or "127.2.0.0/24"
MAX_PODS = int(os.environ.get("LC_MAX_PODS") or "110")
# room for that many sandbox pods (the template asks 250m CPU and 512Mi each)
NODE_RESOURCES = {"cpu": str(max(32, MAX_PODS // 2)), "memory": "%dGi" % max(256, MAX_PODS),
                  "pods": str(MAX_PODS)}
# sandboxd (KEP-539.2), built unmodified from the pinned release, for pods of
# the sandboxd template (pod_runtime). It always binds 127.0.0.1, so each
# such pod gets a network namespace of its own.
SANDBOXD_BIN = os.path.abspath(os.environ.get("LC_SANDBOXD_BIN") or os.path.join(
    CACHE, "sandboxd-" + VERSIONS["SANDBOXD_VERSION"], "sandboxd"))
SANDBOXD_TEMPLATE = "sandboxd-template"
SANDBOXD_WARMPOOL = "sandboxd-warmpool"
POD_RELAY = os.path.join(LC, "pod-relay.sh")
KWOK_PORTFORWARD_CRD = os.path.join(CACHE, "kwok-" + VERSIONS["KWOK_VERSION"], "crds",
                                    "kwok.x-k8s.io_portforwards.yaml")
NODE_NAME = "kwok-node-0"
ROUTER_NS = "agent-sandbox-system"
TEMPLATE = "python-sandbox-template"
WARMPOOL = "python-sandbox-warmpool"
SANDBOX_LABEL = "agents.x-k8s.io/sandbox-name-hash"

# Component start order; `down` stops them in reverse.
COMPONENTS = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler",
              "kwok", "agent-sandbox-controller", "sandbox-router", "podrunner"]

T0 = time.monotonic()


def log(msg):
    print("lc: [%5.1fs] %s" % (time.monotonic() - T0, msg), flush=True)


def die(msg):
    print("lc: error: " + msg, file=sys.stderr, flush=True)
    sys.exit(1)


def p(*parts):
    return os.path.join(STATE, *parts)


def binpath(component):
    k8s = os.path.join(CACHE, "k8s-" + VERSIONS["K8S_VERSION"])
    table = {
        "etcd": os.path.join(CACHE, "etcd-" + VERSIONS["ETCD_VERSION"], "etcd"),
        "kube-apiserver": os.path.join(k8s, "kube-apiserver"),
        "kube-controller-manager": os.path.join(k8s, "kube-controller-manager"),
        "kube-scheduler": os.path.join(k8s, "kube-scheduler"),
        "kwok": os.path.join(CACHE, "kwok-" + VERSIONS["KWOK_VERSION"], "kwok"),
        "sandbox-router": os.path.join(CACHE, "agent-sandbox-" + VERSIONS["ROUTER_VERSION"], "sandbox-router"),
    }
    return table[component]


# ---------------------------------------------------------------- processes

def proc_starttime(pid):
    """Kernel start time of pid (field 22 of /proc/pid/stat), or None."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            data = f.read()
        return data[data.rindex(")") + 2:].split()[19]
    except (OSError, ValueError, IndexError):
        return None


def write_pidfile(path, pid):
    with open(path + ".tmp", "w") as f:
        f.write("%d %s\n" % (pid, proc_starttime(pid)))
    os.replace(path + ".tmp", path)


def read_pidfile(path):
    """pid if the recorded process still runs (same pid AND start time)."""
    try:
        with open(path) as f:
            pid_s, start = f.read().split()
        pid = int(pid_s)
    except (OSError, ValueError):
        return None
    st = proc_starttime(pid)
    if st is None or st != start:
        return None
    try:
        with open("/proc/%d/stat" % pid) as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                return None
    except OSError:
        return None
    return pid


def stop_pid(pid, name, grace=10.0):
    """SIGTERM the process group led by pid, SIGKILL after grace."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        except PermissionError:
            os.kill(pid, sig)
        deadline = time.monotonic() + (grace if sig == signal.SIGTERM else 5)
        while time.monotonic() < deadline:
            try:
                wpid, status = os.waitpid(pid, os.WNOHANG)
                if wpid == pid:
                    return os.waitstatus_to_exitcode(status)
            except ChildProcessError:
                pass
            if proc_starttime(pid) is None:
                return
            try:
                with open("/proc/%d/stat" % pid) as f:
                    if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                        return
            except OSError:
                return
            time.sleep(0.05)
        if sig == signal.SIGTERM:
            log("%s (pid %d) ignored SIGTERM for %.0fs, sending SIGKILL" % (name, pid, grace))


def start(name, argv, env=None):
    """Start a daemon in its own session, logging to logs/<name>.log."""
    os.makedirs(p("logs"), exist_ok=True)
    os.makedirs(p("pids"), exist_ok=True)
    out = open(p("logs", name + ".log"), "ab")
    full_env = dict(os.environ)
    full_env.pop("KUBECONFIG", None)
    if env:
        full_env.update(env)
    proc = subprocess.Popen(isolate_dns(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                            start_new_session=True, env=full_env, cwd=STATE)
    out.close()
    write_pidfile(p("pids", name + ".pid"), proc.pid)
    with open(p("logs", name + ".cmdline"), "w") as f:
        f.write(" ".join(argv) + "\n")
    # The exact argv and env, so `restart-apiserver` starts the same thing.
    with open(p("logs", name + ".argv.json"), "w") as f:
        json.dump({"argv": list(argv), "env": env or {}}, f)
    return proc


def isolate_dns(argv):
    """Run argv in a private mount namespace whose /etc/resolv.conf names only
    the cluster DNS (DNS_ADDR, on loopback), so that no name lookup ever
    leaves loopback. The sandbox-router falls back to DNS
    (<id>.<ns>.svc.cluster.local) for a sandbox it has not cached, and the
    host resolver is not on loopback. Same pid: unshare and
    sh both exec. Needs root (CAP_SYS_ADMIN); without it, run unconfined."""
    if os.environ.get("LC_NO_DNS_ISOLATION") or os.geteuid() != 0 or not shutil.which("unshare"):
        return argv
    resolv = p("resolv.conf")
    if not os.path.exists(resolv):
        with open(resolv, "w") as f:
            f.write("# agentsandbox localcluster: name lookups stay on loopback, answered by\n"
                    "# the cluster DNS in the pod runner (lc.py ClusterDNS)\nnameserver %s\n" % DNS_ADDR)
    return ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
            'mount --bind "$0" /etc/resolv.conf && exec "$@"', resolv] + list(argv)


def free_ports(names):
    """Distinct free ports on 127.0.0.1: all sockets stay bound until every
    port is picked (one at a time, the kernel may hand out a port twice)."""
    socks = []
    try:
        for _ in names:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return {n: s.getsockname()[1] for n, s in zip(names, socks)}
    finally:
        for s in socks:
            s.close()


# ---------------------------------------------------------------- PKI

def openssl(*args, stdin=None):
    r = subprocess.run(["openssl"] + list(args), input=stdin, capture_output=True)
    if r.returncode != 0:
        die("openssl %s failed: %s" % (" ".join(args), r.stderr.decode(errors="replace")))
    return r.stdout


def make_key(path):
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path)
    os.chmod(path, 0o600)


def make_cert(name, cn, orgs=(), sans=None, server=False, client=False):
    """Key + certificate signed by the cluster CA in pki/<name>.{key,crt}."""
    key, crt, csr = p("pki", name + ".key"), p("pki", name + ".crt"), p("pki", name + ".csr")
    make_key(key)
    subj = "".join("/O=" + o for o in orgs) + "/CN=" + cn
    openssl("req", "-new", "-key", key, "-subj", subj, "-out", csr)
    usage = []
    if server:
        usage.append("serverAuth")
    if client:
        usage.append("clientAuth")
    ext = ["basicConstraints=critical,CA:FALSE",
           "keyUsage=critical,digitalSignature,keyEncipherment",
           "extendedKeyUsage=" + ",".join(usage)]
    if sans:
        ext.append("subjectAltName=" + ",".join(sans))
    extfile = p("pki", name + ".ext")
    with open(extfile, "w") as f:
        f.write("\n".join(ext) + "\n")
    openssl("x509", "-req", "-in", csr, "-CA", p("pki", "ca.crt"), "-CAkey", p("pki", "ca.key"),
            "-CAcreateserial", "-days", "30", "-sha256", "-extfile", extfile, "-out", crt)
    os.unlink(csr)
    os.unlink(extfile)


def make_pki():
    os.makedirs(p("pki"), exist_ok=True)
    make_key(p("pki", "ca.key"))
    openssl("req", "-x509", "-new", "-key", p("pki", "ca.key"), "-subj", "/CN=agentsandbox-localcluster-ca",
            "-days", "30", "-sha256", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature", "-out", p("pki", "ca.crt"))
    sans = ["DNS:localhost", "DNS:kubernetes", "DNS:kubernetes.default", "DNS:kubernetes.default.svc",
            "DNS:kubernetes.default.svc.cluster.local", "IP:127.0.0.1", "IP:::1",
            "IP:" + str(next(ipaddress.ip_network(SERVICE_CIDR).hosts()))]
    make_cert("apiserver", "kube-apiserver", sans=sans, server=True)
    make_cert("apiserver-kubelet-client", "kube-apiserver-kubelet-client", orgs=["system:masters"], client=True)
    make_cert("kwok-serving", NODE_NAME, sans=["DNS:localhost", "DNS:" + NODE_NAME, "IP:127.0.0.1"], server=True)
    make_cert("admin", "lc-admin", orgs=["system:masters"], client=True)
    make_cert("kube-controller-manager", "system:kube-controller-manager", client=True)
    make_cert("kube-scheduler", "system:kube-scheduler", client=True)
    make_cert("kwok", "system:node:" + NODE_NAME, orgs=["system:masters"], client=True)
    make_cert("sandbox-router", "system:serviceaccount:%s:sandbox-router" % ROUTER_NS,
              orgs=["system:serviceaccounts", "system:serviceaccounts:" + ROUTER_NS], client=True)
    make_cert("podrunner", "lc-podrunner", client=True)
    make_cert("restricted", "lc-restricted-user", orgs=["lc-restricted"], client=True)
    # ServiceAccount token signing key.
    openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", p("pki", "sa.key"))
    openssl("pkey", "-in", p("pki", "sa.key"), "-pubout", "-out", p("pki", "sa.pub"))
    for f in os.listdir(p("pki")):
        if f.endswith(".key"):
            os.chmod(p("pki", f), 0o600)


def b64file(path):
    with open(path, "rb") as f:
        return base64.b64encode(f.read()).decode()


def write_kubeconfig(path, server, user, embed=True):
    """user: dict of kubeconfig `user` fields."""
    cluster = {"server": server}
    if embed:
        cluster["certificate-authority-data"] = b64file(p("pki", "ca.crt"))
    else:
        cluster["certificate-authority"] = p("pki", "ca.crt")
    cfg = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "agentsandbox-local", "cluster": cluster}],
        "users": [{"name": os.path.basename(path).replace(".kubeconfig", ""), "user": user}],
        "contexts": [{"name": "agentsandbox-local", "context": {
            "cluster": "agentsandbox-local", "user": os.path.basename(path).replace(".kubeconfig", ""),
            "namespace": "default"}}],
        "current-context": "agentsandbox-local",
        "preferences": {},
    }
    with open(path, "w") as f:
        yaml.safe_dump(cfg, f, default_flow_style=False)
    os.chmod(path, 0o600)


def cert_user(name, embed=True):
    if embed:
        return {"client-certificate-data": b64file(p("pki", name + ".crt")),
                "client-key-data": b64file(p("pki", name + ".key"))}
    return {"client-certificate": p("pki", name + ".crt"), "client-key": p("pki", name + ".key")}


# ---------------------------------------------------------------- HTTP checks

def https_get(url, cert="admin", timeout=2.0):
    ctx = ssl.create_default_context(cafile=p("pki", "ca.crt"))
    if cert:
        ctx.load_cert_chain(p("pki", cert + ".crt"), p("pki", cert + ".key"))
    with urllib.request.urlopen(url, context=ctx, timeout=timeout) as r:
        return r.status, r.read()


def http_get(url, timeout=2.0, insecure_tls=False):
    ctx = None
    if insecure_tls:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    with urllib.request.urlopen(url, timeout=timeout, context=ctx) as r:
        return r.status, r.read()


API = {"server": None}


def api_get(path):
    """GET an API path as admin; the decoded object, or None on 404."""
    try:
        return json.loads(https_get(API["server"] + path)[1])
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return None
        raise


def has_condition(obj, ctype):
    conds = ((obj or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == ctype and c.get("status") == "True" for c in conds)


def wait_until(what, fn, timeout, name=None, interval=0.2):
    """Poll fn() until truthy; fail with the component's log tail."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if name and read_pidfile(p("pids", name + ".pid")) is None:
            die("%s exited while waiting for %s; last log lines:\n%s" % (name, what, tail(name)))
        try:
            r = fn()
            if r:
                return r
        except Exception as e:  # noqa: BLE001 - any failure means "not yet"
            last = e
        time.sleep(interval)
    die("timed out after %ds waiting for %s (last: %s)%s" % (
        timeout, what, last, ("\nlast log lines of %s:\n%s" % (name, tail(name))) if name else ""))


def tail(name, n=25):
    try:
        with open(p("logs", name + ".log"), "rb") as f:
            lines = f.read().decode(errors="replace").splitlines()
        return "\n".join("    " + ln for ln in lines[-n:])
    except OSError:
        return "    (no log)"


def kubectl(*args, kubeconfig=None, stdin=None, check=True, timeout=120):
    env = dict(os.environ)
    env["KUBECONFIG"] = kubeconfig or p("kubeconfig", "admin.kubeconfig")
    r = subprocess.run(["kubectl"] + list(args), input=stdin, capture_output=True, env=env, timeout=timeout)
    if check and r.returncode != 0:
        die("kubectl %s failed (%d): %s" % (" ".join(args), r.returncode,
                                            (r.stderr or r.stdout).decode(errors="replace")))
    return r


def apply_docs(docs, server_side=False):
    data = yaml.safe_dump_all(docs, default_flow_style=False).encode()
    args = ["apply", "-f", "-"]
    if server_side:
        args += ["--server-side", "--force-conflicts", "--field-manager=agentsandbox-localcluster"]
    kubectl(*args, stdin=data)


def load_yaml_docs(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


# ---------------------------------------------------------------- readiness

# A pod whose readiness the pod runner decides, like a kubelet's prober: a
# sandbox pod (the label the pod runner watches) with at least one container
# that declares a readinessProbe. kwok evaluates PROBE_GATE (jq) on the pod;
# probe_gated() is the same test in Python. Keep the two in step.
PROBE_GATE = ('(.metadata.labels["%s"] != null) and any(.spec.containers[]?; .readinessProbe != null)'
              % SANDBOX_LABEL)


def probe_gated(pod):
    md, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    return (SANDBOX_LABEL in (md.get("labels") or {})
            and any(c.get("readinessProbe") is not None for c in spec.get("containers") or []))


# What kwok writes when it starts a probe-gated pod: everything its own
# pod-ready stage writes (phase Running, IPs, containers running, readiness
# gates true), except that the containers with a readinessProbe are not ready,
# so neither are ContainersReady and Ready (reason and message as a kubelet
# words them). The pod runner flips them once its probe passes.
UNREADY_STATUS_TEMPLATE = """
{{ $now := Now }}
{{ $unready := list }}
{{ range .spec.containers }}{{ if .readinessProbe }}{{ $unready = append $unready .name }}{{ end }}{{ end }}
conditions:
- type: Initialized
  status: "True"
  lastTransitionTime: {{ $now | Quote }}
- type: ContainersReady
  status: "False"
  reason: ContainersNotReady
  message: {{ printf "containers with unready status: [%s]" (join " " $unready) | Quote }}
  lastTransitionTime: {{ $now | Quote }}
- type: Ready
  status: "False"
  reason: ContainersNotReady
  message: {{ printf "containers with unready status: [%s]" (join " " $unready) | Quote }}
  lastTransitionTime: {{ $now | Quote }}
{{ range .spec.readinessGates }}
- type: {{ .conditionType | Quote }}
  status: "True"
  lastTransitionTime: {{ $now | Quote }}
{{ end }}
containerStatuses:
{{ range .spec.containers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: {{ if .readinessProbe }}false{{ else }}true{{ end }}
  started: true
  restartCount: 0
  state:
    running:
      startedAt: {{ $now | Quote }}
{{ end }}
initContainerStatuses:
{{ range .spec.initContainers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: true
  restartCount: 0
  state:
    terminated:
      exitCode: 0
      reason: Completed
      startedAt: {{ $now | Quote }}
      finishedAt: {{ $now | Quote }}
{{ end }}
{{ with NodeIPsWith .spec.nodeName }}
hostIP: {{ index . 0 | Quote }}
hostIPs:
{{ range . }}
- ip: {{ . | Quote }}
{{ end }}
{{ end }}
{{ with PodIPsWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) }}
podIP: {{ index . 0 | Quote }}
podIPs:
{{ range . }}
- ip: {{ . | Quote }}
{{ end }}
{{ end }}
phase: Running
startTime: {{ $now | Quote }}
"""


def readiness_stages(docs):
    """kwok's default stages, changed so that a probe-gated pod is started
    (Running, IPs) but not Ready: kwok's own pod-ready stage skips such pods
    and an extra stage starts them unready. kwok picks one stage at random
    among those that match, so the two selectors exclude each other."""
    ready = [d for d in docs if d.get("kind") == "Stage" and d["metadata"]["name"] == "pod-ready"]
    if len(ready) != 1:
        die("kwok's stages have no single pod-ready Stage (kwok %s): cannot gate readiness on probes"
            % VERSIONS["KWOK_VERSION"])
    sel = ready[0]["spec"].setdefault("selector", {})
    exprs = sel.setdefault("matchExpressions", [])
    exprs.append({"jq": {"key": PROBE_GATE, "operator": "NotIn", "values": ["true"]}})
    return docs + [{
        "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage",
        "metadata": {"name": "lc-pod-start-unready"},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {"matchExpressions": [
                {"jq": {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}},
                {"jq": {"key": ".status.phase", "operator": "In", "values": ["Pending"]}},
                {"jq": {"key": PROBE_GATE, "operator": "In", "values": ["true"]}}]},
            "steps": [{"patch": {"subresource": "status", "root": "status",
                                 "template": UNREADY_STATUS_TEMPLATE.strip() + "\n"}}]}}]


# ---------------------------------------------------------------- up

def cmd_up(version):
    if version not in (VERSIONS["AGENT_SANDBOX_V04"], VERSIONS["AGENT_SANDBOX_V05"]):
        die("AGENT_SANDBOX must be %s or %s, not %r" % (VERSIONS["AGENT_SANDBOX_V04"],
                                                        VERSIONS["AGENT_SANDBOX_V05"], version))
    net = ipaddress.ip_network(POD_CIDR)
    if not net.is_loopback:
        die("LC_POD_CIDR %s is not a loopback range" % POD_CIDR)
    if not ipaddress.ip_network(SERVICE_CIDR).is_loopback or ipaddress.ip_network(SERVICE_CIDR).overlaps(net):
        die("LC_SERVICE_CIDR %s must be a loopback range apart from the pod CIDR" % SERVICE_CIDR)
    asb = os.path.join(CACHE, "agent-sandbox-" + version)
    need = [binpath(c) for c in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler",
                                 "kwok", "sandbox-router")]
    need += [os.path.join(asb, "agent-sandbox-controller"), os.path.join(asb, "crds"), KWOK_PORTFORWARD_CRD]
    with_sandboxd = version == VERSIONS["SANDBOXD_VERSION"]
    if with_sandboxd:
        need.append(SANDBOXD_BIN)
    missing = [n for n in need if not os.path.exists(n)]
    if missing:
        die("missing build outputs (run `make cluster-build`): " + ", ".join(missing))
    if not os.access(RUNTIME_BIN, os.X_OK):
        die("runtime server %s is missing (build it: make build/runtime/agentsandbox-runtime, "
            "or point LC_RUNTIME_BIN at one)" % RUNTIME_BIN)
    if shutil.which("kubectl") is None:
        die("kubectl is not on PATH")

    if os.path.isdir(STATE) and os.listdir(STATE) and not os.path.exists(p("cluster.json")):
        die("%s exists and is not a local-cluster state directory; refusing to reuse it" % STATE)
    shutil.rmtree(STATE, ignore_errors=True)
    for d in ("pki", "kubeconfig", "logs", "pids", "etcd", "pods", "podrunner"):
        os.makedirs(p(d), mode=0o700, exist_ok=True)
    ports = free_ports(("etcd", "etcd-peer", "apiserver", "kcm", "scheduler", "kwok",
                        "controller-probe", "router", "router-metrics", "router-probe"))
    info = {"agent_sandbox": version, "k8s": VERSIONS["K8S_VERSION"], "ports": ports,
            "pod_cidr": POD_CIDR, "dns": DNS_ADDR, "runtime_bin": RUNTIME_BIN,
            "runtime_port": RUNTIME_PORT,
            "router_bin": binpath("sandbox-router"),
            "router_namespace": ROUTER_NS, "template": TEMPLATE,
            "warmpool": WARMPOOL if version == VERSIONS["AGENT_SANDBOX_V05"] else None,
            "sandboxd_bin": SANDBOXD_BIN if with_sandboxd else None,
            "sandboxd_template": SANDBOXD_TEMPLATE if with_sandboxd else None,
            "sandboxd_warmpool": SANDBOXD_WARMPOOL if with_sandboxd else None}
    with open(p("cluster.json"), "w") as f:
        json.dump(info, f, indent=2)
    log("state in %s; agent-sandbox %s; k8s %s" % (STATE, version, VERSIONS["K8S_VERSION"]))

    make_pki()
    server = "https://127.0.0.1:%d" % ports["apiserver"]
    API["server"] = server
    kc = lambda n: p("kubeconfig", n + ".kubeconfig")  # noqa: E731
    write_kubeconfig(kc("admin"), server, cert_user("admin"))
    for n in ("kube-controller-manager", "kube-scheduler", "kwok", "sandbox-router", "podrunner"):
        write_kubeconfig(kc(n), server, cert_user(n))
    # Test credentials: static token, exec plugin, RBAC-restricted user.
    token = base64.b32encode(os.urandom(20)).decode().lower()
    exec_token = base64.b32encode(os.urandom(20)).decode().lower()
    # The controller runs as its upstream ServiceAccount identity, so the
    # release's own RBAC applies unchanged. That user name does not fit a
    # certificate CN (64 bytes), hence a static token.
    ctl_token = base64.b32encode(os.urandom(20)).decode().lower()
    ctl_user = "system:serviceaccount:%s:agent-sandbox-controller" % ROUTER_NS
    with open(p("pki", "tokens.csv"), "w") as f:
        f.write('%s,lc-token-user,lc-token-user,"lc-clients"\n' % token)
        f.write('%s,lc-exec-user,lc-exec-user,"lc-clients"\n' % exec_token)
        f.write('%s,%s,%s,"system:serviceaccounts,system:serviceaccounts:%s"\n' % (
            ctl_token, ctl_user, ctl_user, ROUTER_NS))
    write_kubeconfig(kc("agent-sandbox-controller"), server, {"token": ctl_token})
    os.chmod(p("pki", "tokens.csv"), 0o600)
    with open(p("kubeconfig", "exec-token"), "w") as f:
        f.write(exec_token + "\n")
    os.chmod(p("kubeconfig", "exec-token"), 0o600)
    write_kubeconfig(kc("token"), server, {"token": token}, embed=False)
    write_kubeconfig(kc("exec"), server, {"exec": {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": os.path.join(LC, "exec-credential.sh"),
        "args": ["--token-file", p("kubeconfig", "exec-token")],
        "env": [{"name": "LC_EXEC_LOG", "value": p("logs", "exec-credential.calls")}],
        "interactiveMode": "Never",
        "provideClusterInfo": False}})
    write_kubeconfig(kc("restricted"), server, cert_user("restricted", embed=False), embed=False)
    log("PKI and kubeconfigs ready")

    # etcd
    etcd_url = "http://127.0.0.1:%d" % ports["etcd"]
    peer_url = "http://127.0.0.1:%d" % ports["etcd-peer"]
    start("etcd", [binpath("etcd"), "--name=lc", "--data-dir=" + p("etcd"),
                   "--listen-client-urls=" + etcd_url, "--advertise-client-urls=" + etcd_url,
                   "--listen-peer-urls=" + peer_url, "--initial-advertise-peer-urls=" + peer_url,
                   "--initial-cluster=lc=" + peer_url, "--initial-cluster-state=new",
                   "--unsafe-no-fsync=true", "--log-level=warn"])
    wait_until("etcd /health", lambda: json.loads(http_get(etcd_url + "/health")[1]).get("health") == "true",
               30, "etcd")
    log("etcd %s ready" % etcd_url)

    start("kube-apiserver", [
        binpath("kube-apiserver"),
        "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=%d" % ports["apiserver"],
        "--etcd-servers=" + etcd_url,
        "--tls-cert-file=" + p("pki", "apiserver.crt"), "--tls-private-key-file=" + p("pki", "apiserver.key"),
        "--client-ca-file=" + p("pki", "ca.crt"),
        "--token-auth-file=" + p("pki", "tokens.csv"),
        "--authorization-mode=Node,RBAC",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        "--service-account-key-file=" + p("pki", "sa.pub"),
        "--service-account-signing-key-file=" + p("pki", "sa.key"),
        "--service-cluster-ip-range=" + SERVICE_CIDR,
        "--endpoint-reconciler-type=none",
        "--kubelet-client-certificate=" + p("pki", "apiserver-kubelet-client.crt"),
        "--kubelet-client-key=" + p("pki", "apiserver-kubelet-client.key"),
        "--kubelet-certificate-authority=" + p("pki", "ca.crt"),
        "--kubelet-preferred-address-types=InternalIP",
        "--cert-dir=" + p("pki", "apiserver-generated"),
        "--profiling=false",
    ])
    wait_until("kube-apiserver /readyz", lambda: https_get(server + "/readyz")[0] == 200, 90, "kube-apiserver")
    log("kube-apiserver %s ready" % server)

    common = ["--leader-elect=false", "--bind-address=127.0.0.1"]
    start("kube-controller-manager", [
        binpath("kube-controller-manager"), "--kubeconfig=" + kc("kube-controller-manager"),
        "--authentication-kubeconfig=" + kc("kube-controller-manager"),
        "--authorization-kubeconfig=" + kc("kube-controller-manager"),
        "--secure-port=%d" % ports["kcm"], "--cert-dir=" + p("pki", "kcm-generated"),
        "--use-service-account-credentials=true",
        "--service-account-private-key-file=" + p("pki", "sa.key"), "--root-ca-file=" + p("pki", "ca.crt"),
        "--cluster-signing-cert-file=" + p("pki", "ca.crt"), "--cluster-signing-key-file=" + p("pki", "ca.key"),
        "--profiling=false"] + common)
    start("kube-scheduler", [
        binpath("kube-scheduler"), "--kubeconfig=" + kc("kube-scheduler"),
        "--authentication-kubeconfig=" + kc("kube-scheduler"),
        "--authorization-kubeconfig=" + kc("kube-scheduler"),
        "--secure-port=%d" % ports["scheduler"], "--cert-dir=" + p("pki", "scheduler-generated"),
        "--profiling=false"] + common)

    # kwok: stages from the kwok module, with readiness left to the pod
    # runner for probe-carrying sandbox pods, + the router port-forward rule.
    stage_dir = os.path.join(CACHE, "kwok-" + VERSIONS["KWOK_VERSION"], "stages")
    kwok_docs = []
    for fn in sorted(os.listdir(stage_dir)):
        kwok_docs += load_yaml_docs(os.path.join(stage_dir, fn))
    kwok_docs = readiness_stages(kwok_docs)
    kwok_docs.append({
        "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "ClusterPortForward",
        "metadata": {"name": "sandbox-router"},
        "spec": {"selector": {"matchNamespaces": [ROUTER_NS], "matchNames": ["sandbox-router"]},
                 "forwards": [{"ports": [8080], "target": {"address": "127.0.0.1", "port": ports["router"]}}]}})
    with open(p("kwok.yaml"), "w") as f:
        yaml.safe_dump_all(kwok_docs, f, default_flow_style=False)
    # PortForward objects come from the apiserver (--enable-crds): the pod
    # runner declares one per sandboxd pod, naming the process that holds the
    # pod's network namespace. kwok watches them, so the CRD comes first.
    apply_docs(load_yaml_docs(KWOK_PORTFORWARD_CRD), server_side=True)
    wait_until("kwok PortForward CRD established", lambda: kubectl(
        "wait", "--for=condition=Established", "--timeout=10s", "crd/portforwards.kwok.x-k8s.io",
        check=False).returncode == 0, 60, "kube-apiserver")
    start("kwok", [
        binpath("kwok"), "--config=" + p("kwok.yaml"), "--kubeconfig=" + kc("kwok"),
        "--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
        "--node-name=" + NODE_NAME, "--node-ip=127.0.0.1", "--cidr=" + POD_CIDR,
        "--node-port=%d" % ports["kwok"], "--server-address=127.0.0.1:%d" % ports["kwok"],
        "--tls-cert-file=" + p("pki", "kwok-serving.crt"), "--tls-private-key-file=" + p("pki", "kwok-serving.key"),
        "--node-lease-duration-seconds=40", "--enable-crds=PortForward"])

    # Objects that need only the apiserver.
    docs = [
        {"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": NODE_NAME, "annotations": {"kwok.x-k8s.io/node": "fake"},
            "labels": {"type": "kwok", "kubernetes.io/hostname": NODE_NAME, "kubernetes.io/os": "linux",
                       "kubernetes.io/arch": "amd64"}},
         "spec": {"podCIDR": POD_CIDR, "podCIDRs": [POD_CIDR]},
         "status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                                  {"type": "Hostname", "address": NODE_NAME}],
                    "allocatable": NODE_RESOURCES, "capacity": NODE_RESOURCES}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ROUTER_NS}},
    ]
    docs += yaml.safe_load_all(open(os.path.join(LC, "manifests", "rbac.yaml")))
    # Upstream RBAC for the controller (ClusterRoles and their bindings).
    upstream = []
    for fn in ("rbac.generated.yaml", "extensions-rbac.generated.yaml", "extensions.yaml", "controller.yaml"):
        path = os.path.join(asb, "k8s", fn)
        if os.path.exists(path):
            upstream += [d for d in load_yaml_docs(path)
                         if d.get("kind") in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                                              "ServiceAccount")]
    # The router's own RBAC, bound to the router identity in agent-sandbox-system.
    router_rbac = []
    for d in load_yaml_docs(os.path.join(CACHE, "agent-sandbox-" + VERSIONS["ROUTER_VERSION"],
                                         "router-deploy", "rbac.yaml")):
        if d.get("kind") == "ClusterRoleBinding":
            for s in d.get("subjects", []):
                if s.get("kind") == "ServiceAccount":
                    s["namespace"] = ROUTER_NS
        router_rbac.append(d)
    router_rbac.append({"apiVersion": "v1", "kind": "ServiceAccount",
                        "metadata": {"name": "sandbox-router", "namespace": ROUTER_NS}})
    apply_docs([d for d in docs + upstream + router_rbac if d])
    log("applied node, namespace, RBAC")

    # CRDs: the release's own, server-side (two exceed the client-side annotation limit).
    crds = []
    for fn in sorted(os.listdir(os.path.join(asb, "crds"))):
        for d in load_yaml_docs(os.path.join(asb, "crds", fn)):
            conv = d.get("spec", {}).get("conversion")
            if conv and conv.get("strategy") == "Webhook":
                # The conversion webhook cannot listen on loopback only (controller-runtime
                # binds :9443 on every interface and the controller has no host flag), so it
                # is disabled; without it the apiserver must not try to call it.
                d["spec"]["conversion"] = {"strategy": "None"}
            crds.append(d)
    apply_docs(crds, server_side=True)
    log("applied CRDs")
    # kubectl wait fails at once ("status.conditions accessor error") when
    # a CRD is so new it has no conditions yet: retry until the deadline.
    names = ["crd/" + d["metadata"]["name"] for d in crds]
    deadline = time.time() + 60
    while True:
        r = kubectl("wait", "--for=condition=Established", "--timeout=60s", *names, check=False)
        if r.returncode == 0:
            break
        if time.time() > deadline:
            die("CRDs not established: %s" % (r.stderr or r.stdout).decode(errors="replace"))
        time.sleep(0.2)
    log("RBAC, node and %d CRDs established" % len(crds))

    wait_until("kube-controller-manager /healthz",
               lambda: http_get("https://127.0.0.1:%d/healthz" % ports["kcm"], insecure_tls=True)[0] == 200,
               60, "kube-controller-manager")
    wait_until("kube-scheduler /healthz",
               lambda: http_get("https://127.0.0.1:%d/healthz" % ports["scheduler"], insecure_tls=True)[0] == 200,
               60, "kube-scheduler")
    wait_until("node %s Ready" % NODE_NAME, lambda: node_ready(), 60, "kwok")
    wait_until("ServiceAccount default/default",
               lambda: api_get("/api/v1/namespaces/default/serviceaccounts/default"), 60,
               "kube-controller-manager")
    log("controller-manager, scheduler, kwok node ready")

    ctl_args = [os.path.join(asb, "agent-sandbox-controller"), "--kubeconfig=" + kc("agent-sandbox-controller"),
                "--extensions=true", "--leader-elect=false", "--metrics-bind-address=0",
                "--health-probe-bind-address=127.0.0.1:%d" % ports["controller-probe"]]
    if version == VERSIONS["AGENT_SANDBOX_V05"]:
        ctl_args += ["--enable-webhook=false"]
    # Tracing tests: both continue a client's trace (the claim's
    # opentelemetry.io/trace-context annotation, the traceparent header).
    otlp = os.environ.get("LC_OTLP_ENDPOINT")
    otlp_env = {"OTEL_EXPORTER_OTLP_ENDPOINT": otlp} if otlp else None
    if otlp:
        ctl_args += ["--enable-tracing"]
    start("agent-sandbox-controller", ctl_args, env=otlp_env)

    start("sandbox-router", [
        binpath("sandbox-router"), "--http-bind-address=127.0.0.1:%d" % ports["router"],
        "--metrics-bind-address=127.0.0.1:%d" % ports["router-metrics"],
        "--health-probe-bind-address=127.0.0.1:%d" % ports["router-probe"],
        "--allow-loopback-pod-ip=true", "--cache-enabled=true", "--kubeconfig=" + kc("sandbox-router"),
        "--access-log=true"], env=otlp_env)

    start("podrunner", [sys.executable, os.path.abspath(__file__), "podrunner"],
          env={"LC_STATE_DIR": STATE, "LC_RUNTIME_BIN": RUNTIME_BIN, "LC_RUNTIME_PORT": str(RUNTIME_PORT),
               "LC_SANDBOXD_BIN": SANDBOXD_BIN})

    # Router pod + Service (the kwok port-forward rule sends its port 8080 to the real router).
    apply_docs(load_yaml_docs(os.path.join(LC, "manifests", "router.yaml")))
    wait_until("agent-sandbox-controller /readyz", lambda: http_get(
        "http://127.0.0.1:%d/readyz" % ports["controller-probe"])[0] == 200, 60, "agent-sandbox-controller")
    wait_until("sandbox-router /healthz", lambda: http_get(
        "http://127.0.0.1:%d/healthz" % ports["router"])[0] == 200, 30, "sandbox-router")
    wait_until("router pod Running", lambda: ((api_get(
        "/api/v1/namespaces/%s/pods/sandbox-router" % ROUTER_NS) or {}).get("status") or {}).get("phase")
        == "Running", 60, "kwok")

    # Sandbox template (and warm pool) for the release's API version.
    api = "v1beta1" if version == VERSIONS["AGENT_SANDBOX_V05"] else "v1alpha1"
    tdocs = []
    for d in load_yaml_docs(os.path.join(LC, "manifests", "template.yaml")):
        d["apiVersion"] = d["apiVersion"].replace("VERSION", api)
        if d["kind"] == "SandboxWarmPool" and api != "v1beta1":
            continue
        tdocs.append(d)
    if with_sandboxd:
        # The sandboxd template and its warm pool, beside the legacy ones.
        tdocs += load_yaml_docs(os.path.join(LC, "manifests", "sandboxd-template.yaml"))
    apply_docs(tdocs)
    if api == "v1beta1":
        # Controller is reconciling: the warm pool's sandboxes come up Ready.
        wait_until("warm pool %s ready" % WARMPOOL, lambda: warmpool_ready(), 90, "agent-sandbox-controller")
    if with_sandboxd:
        # ... and a sandboxd pod passed its /v1/health probe in its own namespace.
        wait_until("warm pool %s ready" % SANDBOXD_WARMPOOL, lambda: warmpool_ready(SANDBOXD_WARMPOOL), 90,
                   "podrunner")
    else:
        # Controller is reconciling: a probe Sandbox becomes Ready, then is collected.
        probe_sandbox(api)
    log("agent-sandbox %s controller reconciling; router answering" % version)
    with open(p("kubeconfig", "README"), "w") as f:
        f.write(KUBECONFIG_README)
    log("cluster up in %.1fs" % (time.monotonic() - T0))
    print("export KUBECONFIG=%s" % kc("admin"), flush=True)


KUBECONFIG_README = """admin.kubeconfig       client certificate (system:masters), data embedded
token.kubeconfig       static bearer token (user lc-token-user, group lc-clients)
exec.kubeconfig        exec credential plugin (../../tools/localcluster/exec-credential.sh),
                       user lc-exec-user, group lc-clients; calls logged in ../logs/exec-credential.calls
restricted.kubeconfig  client certificate and CA as file paths; user lc-restricted-user,
                       which RBAC denies everything but discovery
The lc-clients group may use the agent-sandbox resources, read pods and services
and port-forward (ClusterRole agentsandbox-client).
"""


def node_ready():
    return has_condition(api_get("/api/v1/nodes/" + NODE_NAME), "Ready")


def warmpool_ready(name=WARMPOOL):
    pool = api_get("/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/default/sandboxwarmpools/" + name)
    return ((pool or {}).get("status") or {}).get("readyReplicas", 0) >= 1


def probe_sandbox(api):
    name = "lc-readiness-probe"
    tpl = load_yaml_docs(os.path.join(LC, "manifests", "template.yaml"))[0]
    sb = {"apiVersion": "agents.x-k8s.io/" + api, "kind": "Sandbox",
          "metadata": {"name": name, "namespace": "default"},
          "spec": {"podTemplate": tpl["spec"]["podTemplate"]}}
    apply_docs([sb])

    path = "/apis/agents.x-k8s.io/%s/namespaces/default/sandboxes/%s" % (api, name)
    wait_until("probe Sandbox Ready", lambda: has_condition(api_get(path), "Ready"), 60,
               "agent-sandbox-controller")
    kubectl("delete", "sandbox", name, "-n", "default", "--wait=true", "--timeout=60s")


# ---------------------------------------------------------------- down / status

def cmd_down(remove_state=True):
    stopped = []
    for name in reversed(COMPONENTS):
        pid = read_pidfile(p("pids", name + ".pid"))
        if pid:
            stop_pid(pid, name)
            stopped.append("%s(%d)" % (name, pid))
    # Runtime servers whose pod runner died without stopping them.
    for fn in sorted(os.listdir(p("podrunner"))) if os.path.isdir(p("podrunner")) else []:
        if fn.endswith(".pid"):
            pid = read_pidfile(p("podrunner", fn))
            if pid:
                stop_pid(pid, "runtime " + fn)
                stopped.append("runtime(%d)" % pid)
    log("stopped: " + (", ".join(stopped) or "nothing was running"))
    ours = {"pki", "kubeconfig", "logs", "pids", "etcd", "pods", "podrunner", "cluster.json", "kwok.yaml",
            "resolv.conf"}
    if remove_state and os.path.isdir(STATE):
        if os.path.exists(p("cluster.json")) or set(os.listdir(STATE)) <= ours:
            shutil.rmtree(STATE, ignore_errors=True)
            log("removed " + STATE)
        else:
            log("%s does not look like local-cluster state; left alone" % STATE)


def cmd_status():
    if not os.path.exists(p("cluster.json")):
        print("no local cluster (no state in %s)" % STATE)
        return 0
    info = json.load(open(p("cluster.json")))
    print("cluster state %s: agent-sandbox %s, kubernetes %s, pod CIDR %s" % (
        STATE, info["agent_sandbox"], info["k8s"], info["pod_cidr"]))
    ok = True
    for name in COMPONENTS:
        pid = read_pidfile(p("pids", name + ".pid"))
        ok = ok and pid is not None
        print("  %-26s %s" % (name, ("running, pid %d" % pid) if pid else "NOT RUNNING"))
    for fn in sorted(os.listdir(p("podrunner"))):
        if fn.endswith(".json"):
            d = json.load(open(p("podrunner", fn)))
            pid = read_pidfile(p("podrunner", fn[:-5] + ".pid"))
            where = ("sandboxd, own network namespace, 127.0.0.1:%s" % ",".join(str(x) for x in d["ports"])
                     if d.get("runtime") == "sandboxd" else "%s:%d" % (d["ip"], d["port"]))
            print("  runtime %-18s %s %s" % (d["pod"], where, ("pid %d" % pid) if pid else "NOT RUNNING"))
    print("  apiserver https://127.0.0.1:%d   router 127.0.0.1:%d" % (info["ports"]["apiserver"],
                                                                      info["ports"]["router"]))
    print("export KUBECONFIG=%s" % p("kubeconfig", "admin.kubeconfig"))
    return 0 if ok else 1


def cmd_stop_router():
    """SIGKILL the sandbox-router, as a crash would: its connections end
    without a goodbye; kwok's forward to it fails from then on."""
    pid = read_pidfile(p("pids", "sandbox-router.pid"))
    if not pid:
        die("sandbox-router is not running in %s" % STATE)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    wait_until("sandbox-router gone", lambda: proc_starttime(pid) is None, 10)
    log("sandbox-router killed (pid %d)" % pid)


def cmd_start_router():
    """Start the sandbox-router again with its saved arguments (same port,
    same DNS isolation); wait until its port accepts."""
    info = json.load(open(p("cluster.json")))
    with open(p("logs", "sandbox-router.argv.json")) as f:
        saved = json.load(f)
    start("sandbox-router", saved["argv"], env=saved["env"] or None)

    def accepts():
        try:
            socket.create_connection(("127.0.0.1", info["ports"]["router"]), 1).close()
            return True
        except OSError:
            return False
    wait_until("sandbox-router accepting", accepts, 30, "sandbox-router")
    log("sandbox-router started (pid %d)" % read_pidfile(p("pids", "sandbox-router.pid")))


def cmd_restart_apiserver():
    """Stop kube-apiserver (SIGTERM, as a rolling upgrade would) and start it
    again with the same arguments on the same port; wait for /readyz. Open
    watches see their connection end and must reconnect on their own."""
    info = json.load(open(p("cluster.json")))
    pid = read_pidfile(p("pids", "kube-apiserver.pid"))
    if not pid:
        die("kube-apiserver is not running in %s" % STATE)
    with open(p("logs", "kube-apiserver.argv.json")) as f:
        saved = json.load(f)
    stop_pid(pid, "kube-apiserver", grace=3.0)  # it drains for longer; no need here
    server = "https://127.0.0.1:%d" % info["ports"]["apiserver"]
    API["server"] = server
    start("kube-apiserver", saved["argv"], env=saved["env"] or None)
    wait_until("kube-apiserver /readyz", lambda: https_get(server + "/readyz")[0] == 200, 90,
               "kube-apiserver")
    log("kube-apiserver restarted (pid %d before), %s ready" % (pid, server))
    # The other components reconnect on their own, with their own backoff.
    # Measured: the agent-sandbox controller's informers lag 30-50 s behind
    # ("Pod already exists" reconcile errors) before claims go Ready again,
    # so tests that restart the apiserver run last on a cluster.
    wait_until("node Ready", node_ready, 60, "kwok")


# ---------------------------------------------------------------- pod runner

# The pod runner probes a starting runtime every PROBE_FAST_S (a kubelet
# waits periodSeconds, at least 1 s, between failed probes) so that Ready
# follows listen within milliseconds; PROBE_FAST_FOR_S after the probe's
# initialDelaySeconds without success it falls back to its periodSeconds.
PROBE_FAST_S = 0.01
PROBE_FAST_FOR_S = 30.0


def probe_port(port, container):
    """A probe's port: a number, or the name of one of the container's ports."""
    if isinstance(port, int) or (isinstance(port, str) and port.isdigit()):
        return int(port)
    for cp in container.get("ports") or []:
        if cp.get("name") == port:
            return int(cp["containerPort"])
    raise ValueError("container %s has no port named %r" % (container.get("name"), port))


def probe_once(pod_ip, container, probe, timeout):
    """One readiness probe, as a kubelet runs it: (passed, what happened).
    httpGet passes on a status 200-399, tcpSocket when the connect succeeds.
    Only loopback addresses are dialled. exec and grpc probes are not
    emulated: they count as passed once the runtime runs."""
    kind = "httpGet" if "httpGet" in probe else "tcpSocket" if "tcpSocket" in probe else None
    if kind is None:
        return True, "%s probe not emulated, counted as passed" % (
            ",".join(k for k in ("exec", "grpc") if k in probe) or "unknown")
    spec = probe[kind]
    try:
        host = spec.get("host") or pod_ip
        if not ipaddress.ip_address(host).is_loopback:
            return False, "probe host %s is not a loopback address; not dialled" % host
        port = probe_port(spec.get("port"), container)
    except ValueError as e:
        return False, str(e)
    if kind == "tcpSocket":
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            return True, "connected to %s:%d" % (host, port)
        except OSError as e:
            return False, "tcp %s:%d: %s" % (host, port, e)
    if (spec.get("scheme") or "HTTP").upper() == "HTTPS":
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # a kubelet does not verify probe certificates either
        conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=ctx)
    else:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
    headers = {"User-Agent": "kube-probe/lc-podrunner", "Accept": "*/*"}
    for h in spec.get("httpHeaders") or []:
        headers[h["name"]] = h.get("value", "")
    path = spec.get("path") or "/"
    try:
        conn.request("GET", path if path.startswith("/") else "/" + path, headers=headers)
        r = conn.getresponse()
        r.read()
        return 200 <= r.status < 400, "GET http://%s:%d%s: %d" % (host, port, path, r.status)
    except (OSError, http.client.HTTPException) as e:
        return False, "GET http://%s:%d%s: %s" % (host, port, path, e)
    finally:
        conn.close()


def pod_ready(pod):
    return has_condition(pod, "Ready")


# ---------------------------------------------------------------- sandboxd pods

SANDBOXD_ENV = ("SANDBOXD_REST_ADDR", "SANDBOXD_GRPC_ADDR")


def sandboxd_container(pod):
    """The container of a sandboxd pod that stands for sandboxd, or None for
    a legacy runtime pod: one named `sandboxd`, else the first that declares
    SANDBOXD_REST_ADDR or SANDBOXD_GRPC_ADDR (what SDKs detect the runtime by)."""
    ctrs = (pod.get("spec") or {}).get("containers") or []
    for c in ctrs:
        if c.get("name") == "sandboxd":
            return c
    for c in ctrs:
        if any(e.get("name") in SANDBOXD_ENV for e in c.get("env") or []):
            return c
    return None


def addr_port(addr, default):
    """The port of a host:port address, or default when there is none."""
    if not addr or ":" not in addr:
        return default
    port = addr.rsplit(":", 1)[1]
    return int(port) if port.isdigit() and 0 < int(port) < 65536 else default


CLONE_NEWNET = 0x40000000
_LIBC = ctypes.CDLL(None, use_errno=True)


def enter_netns(pid, inode):
    """Move the calling thread (only it: a network namespace is per thread)
    into the network namespace of pid, which must still be inode. Python
    3.11 has no os.setns."""
    fd = os.open("/proc/%d/ns/net" % pid, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if os.fstat(fd).st_ino != inode:
            raise OSError("pid %d is no longer in the pod's network namespace" % pid)
        if _LIBC.setns(fd, CLONE_NEWNET) != 0:
            e = ctypes.get_errno()
            raise OSError(e, "setns: " + os.strerror(e))
    finally:
        os.close(fd)


class PodRunner:
    """Starts the runtime server for each Running sandbox pod, on the pod's
    loopback IP, and stops it when the pod goes away. For a pod with a
    readinessProbe (probe_gated) it is also the kubelet's prober: kwok starts
    such a pod unready, the pod runner probes the runtime and sets the pod's
    Ready and ContainersReady conditions (and its containers' ready) once the
    probe passes, and clears them when the runtime exits."""

    def __init__(self):
        info = json.load(open(p("cluster.json")))
        self.server = "https://127.0.0.1:%d" % info["ports"]["apiserver"]
        self.ctx = ssl.create_default_context(cafile=p("pki", "ca.crt"))
        self.ctx.load_cert_chain(p("pki", "podrunner.crt"), p("pki", "podrunner.key"))
        self.procs = {}   # uid -> (Popen, meta)
        self.pods = {}    # uid -> pod object (latest seen)
        # uid -> True once the probe passed for the running runtime, False when
        # that runtime exited; absent while the first probe is still pending.
        self.ready = {}
        self.status_q = queue.Queue()  # uids whose Ready condition may need writing
        self.restart_at = {}  # uid -> when the reaper restarts its exited runtime
        self.conn = None  # the status writer's connection to the apiserver
        self.api_lock = threading.Lock()  # for self.conn
        self.lock = threading.Lock()
        self.stopping = False

    def rlog(self, msg):
        t = time.time()
        print("%s.%03d podrunner: %s" % (time.strftime("%H:%M:%S", time.localtime(t)), int(t * 1000) % 1000, msg),
              flush=True)

    def key(self, pod):
        return pod["metadata"]["uid"]

    def wanted(self, pod):
        st = pod.get("status", {})
        return (pod["metadata"].get("deletionTimestamp") is None and st.get("phase") == "Running"
                and bool(st.get("podIP")))

    def sync(self, pod, deleted=False):
        uid = self.key(pod)
        with self.lock:
            if deleted:
                self.pods.pop(uid, None)
            else:
                self.pods[uid] = pod
            running = uid in self.procs
            # A runtime waiting out its restart back-off is the reaper's to start.
            if not deleted and self.wanted(pod) and not running and uid not in self.restart_at:
                self.start_runtime(pod)
            elif running and (deleted or not self.wanted(pod)):
                self.stop_runtime(uid)
            if deleted:
                self.ready.pop(uid, None)
            elif uid in self.ready and self.wanted(pod) and probe_gated(pod) and \
                    pod_ready(pod) != self.ready[uid]:
                # Not what the probe says (kwok replayed a stale start, or the
                # runtime exited): write it (again).
                self.status_q.put(uid)

    def start_runtime(self, pod):
        md, ip = pod["metadata"], pod["status"]["podIP"]
        uid = md["uid"]
        base = p("pods", "%s_%s_%s" % (md["namespace"], md["name"], uid[:8]))
        os.makedirs(base, exist_ok=True)
        logf = open(p("logs", "runtime-%s_%s.log" % (md["namespace"], md["name"])), "ab")
        sbd = sandboxd_container(pod)
        if sbd is None:
            kind, env, port, ports = "legacy", None, RUNTIME_PORT, [RUNTIME_PORT]
            argv = [RUNTIME_BIN, "--listen", ip, "--port", str(RUNTIME_PORT), "--base-dir", base]
            if os.environ.get("LC_OTLP_ENDPOINT"):
                argv.append("--access-log")  # its lines carry each request's traceparent
        else:
            kind, argv, env, ports = "sandboxd", *self.sandboxd_argv(pod, sbd, base)
            port = ports[0]
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                                start_new_session=True, cwd=base, env=env)
        logf.close()
        write_pidfile(p("podrunner", uid + ".pid"), proc.pid)
        meta = {"pod": "%s/%s" % (md["namespace"], md["name"]), "uid": uid, "ip": ip, "runtime": kind,
                "port": port, "ports": ports, "base_dir": base, "pid": proc.pid, "started": time.time()}
        if kind == "sandboxd":
            meta["env"] = env  # for pod-exec: what a container beside it would see
            meta["root_dir"] = os.path.join(base, "workspace")
        self.procs[uid] = (proc, meta)
        if kind == "sandboxd":
            # Its network namespace must exist before anything enters it (the
            # relay and the prober refuse the host's), and kwok must know the
            # forward before the probe can make the pod Ready.
            try:
                meta["netns"] = self.wait_netns(proc)
                meta["starttime"] = proc_starttime(proc.pid)
                meta["portforward_uid"] = self.declare_portforward(pod, proc.pid, meta["starttime"], ports)
            except Exception as e:  # noqa: BLE001 - the reaper restarts it
                self.rlog("cannot set up sandboxd for %s: %r; stopping it" % (meta["pod"], e))
                stop_pid(proc.pid, "sandboxd " + meta["pod"], grace=0.5)
                return
        with open(p("podrunner", uid + ".json"), "w") as f:
            json.dump(meta, f)
        if kind == "sandboxd":
            self.rlog("started sandboxd for %s in its own network namespace (127.0.0.1:%s; pid %d, %s)" % (
                meta["pod"], " 127.0.0.1:".join(str(x) for x in ports), proc.pid, argv[argv.index(SANDBOXD_BIN) + 1]))
        else:
            self.rlog("started runtime for %s at %s:%d (pid %d, base %s)" % (meta["pod"], ip, RUNTIME_PORT,
                                                                            proc.pid, base))
        if probe_gated(pod):
            threading.Thread(target=self.prober, args=(uid, proc), daemon=True).start()

    def sandboxd_argv(self, pod, ctr, base):
        """(argv, env, [rest port, grpc port]) for the pod's sandboxd: in a
        network namespace of its own with lo up (sandboxd binds 127.0.0.1,
        like every pod's own loopback) and a PID namespace whose end, when
        sandboxd exits or unshare is killed, takes every process it started
        with it. unshare stays the parent (and the pid the pod runner keeps):
        SIGTERM to the process group reaches sandboxd, which shuts down
        gracefully. The environment is the container's (literal values), as
        a kubelet would set it, not the pod runner's."""
        md = pod["metadata"]
        env_decl = {e["name"]: str(e["value"]) for e in ctr.get("env") or [] if "value" in e}
        rest = addr_port(env_decl.get("SANDBOXD_REST_ADDR"), 8080)
        grpc = addr_port(env_decl.get("SANDBOXD_GRPC_ADDR"), 9090)
        root = os.path.join(base, "workspace")
        argv = ["unshare", "--net", "--pid", "--fork", "--kill-child", "--", "/bin/sh", "-c",
                'ip link set lo up && exec "$0" "$@"', SANDBOXD_BIN, "--root-dir=" + root,
                "--rest-port=%d" % rest, "--grpc-port=%d" % grpc, "--shutdown-timeout=3s"]
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": root,
               "HOSTNAME": md["name"]}
        env.update(env_decl)
        return argv, env, [rest, grpc]

    def wait_netns(self, proc, timeout=10.0):
        """The inode of proc's network namespace once unshare has made it."""
        own = os.stat("/proc/self/ns/net").st_ino
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise OSError("exited with %s before its network namespace was made" % proc.returncode)
            try:
                ino = os.stat("/proc/%d/ns/net" % proc.pid).st_ino
                if ino != own:
                    return ino
            except OSError:
                pass
            time.sleep(0.002)
        raise OSError("no network namespace after %.0fs" % timeout)

    def declare_portforward(self, pod, pid, starttime, ports):
        """kwok's PortForward for the pod (server-side apply, owned by the
        pod so the garbage collector removes it with the pod): each port
        relayed by pod-relay.sh into the namespace of pid. The uid of the
        object is returned, for a delete that never hits a successor."""
        md = pod["metadata"]
        body = {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "PortForward",
                "metadata": {"name": md["name"], "namespace": md["namespace"],
                             "labels": {"app.kubernetes.io/managed-by": "lc-podrunner"},
                             "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": md["name"],
                                                  "uid": md["uid"]}]},
                "spec": {"forwards": [{"ports": [port], "command": [POD_RELAY, str(pid), str(starttime), str(port)]}
                                      for port in ports]}}
        code, answer = self.api_call("PATCH", "/apis/kwok.x-k8s.io/v1alpha1/namespaces/%s/portforwards/%s"
                                     "?fieldManager=lc-podrunner&force=true" % (md["namespace"], md["name"]),
                                     body, "application/apply-patch+yaml")
        if code not in (200, 201):
            raise OSError("PortForward %s/%s: %s %s" % (md["namespace"], md["name"], code, answer[:200]))
        return json.loads(answer)["metadata"]["uid"]

    def delete_portforward(self, meta):
        ns, name = meta["pod"].split("/", 1)
        try:
            code, answer = self.api_call("DELETE", "/apis/kwok.x-k8s.io/v1alpha1/namespaces/%s/portforwards/%s" % (
                ns, name), {"preconditions": {"uid": meta["portforward_uid"]}}, "application/json")
        except Exception as e:  # noqa: BLE001 - the garbage collector removes it with the pod
            code, answer = None, repr(e)
        if code not in (200, 404, 409):
            self.rlog("deleting PortForward %s failed: %s %s" % (meta["pod"], code, answer[:200]))

    def prober(self, uid, proc):
        """Probe the runtime proc serves for pod uid until every readiness
        probe of the pod has passed once; then have Ready written."""
        t0 = time.monotonic()
        passed, attempts, why, slow = set(), 0, "", False
        with self.lock:
            meta = self.procs.get(uid, (None, {}))[1]
        probe_ip = None
        if meta.get("runtime") == "sandboxd":
            # A kubelet probes the pod IP; sandboxd answers only on the pod's
            # own 127.0.0.1, so this thread probes from inside the pod's
            # network namespace, as a prober in the pod would.
            try:
                enter_netns(proc.pid, meta["netns"])
            except (OSError, KeyError) as e:
                self.rlog("cannot probe %s: %r" % (meta.get("pod"), e))
                return
            probe_ip = "127.0.0.1"
        while True:
            with self.lock:
                pod = self.pods.get(uid)
                if self.stopping or pod is None or self.procs.get(uid, (None,))[0] is not proc:
                    return
            pending = [c for c in pod["spec"]["containers"]
                       if c.get("readinessProbe") is not None and c["name"] not in passed]
            elapsed = time.monotonic() - t0
            for c in pending:
                probe = c["readinessProbe"]
                if elapsed < probe.get("initialDelaySeconds", 0):
                    continue
                attempts += 1
                ok, why = probe_once(probe_ip or pod["status"]["podIP"], c, probe,
                                     float(probe.get("timeoutSeconds", 1)))
                if ok:
                    passed.add(c["name"])
            if all(c["name"] in passed for c in pending):
                with self.lock:
                    if self.procs.get(uid, (None,))[0] is not proc:
                        return
                    self.ready[uid] = True
                self.rlog("readiness probe passed for %s after %.1f ms, %d attempt(s): %s" % (
                    "%s/%s" % (pod["metadata"]["namespace"], pod["metadata"]["name"]),
                    (time.monotonic() - t0) * 1000, attempts, why))
                self.status_q.put(uid)
                return
            delay = max(c["readinessProbe"].get("initialDelaySeconds", 0) for c in pending)
            if elapsed < delay + PROBE_FAST_FOR_S:
                time.sleep(PROBE_FAST_S)
                continue
            if not slow:
                slow = True
                self.rlog("readiness probe for %s/%s still failing after %.0fs (%s); probing every periodSeconds"
                          % (pod["metadata"]["namespace"], pod["metadata"]["name"], elapsed, why))
            time.sleep(min(float(c["readinessProbe"].get("periodSeconds", 10)) for c in pending))

    def status_writer(self):
        """Write the Ready condition the probe decided, one pod at a time."""
        try:  # handshake now, not on the first write
            self.api_call("GET", "/api/v1/pods?limit=1&labelSelector=" + urllib.request.quote(SANDBOX_LABEL))
        except Exception:  # noqa: BLE001 - the first write connects again
            pass
        while True:
            uid = self.status_q.get()
            with self.lock:
                pod = self.pods.get(uid)
            for attempt in range(5):
                with self.lock:
                    want = self.ready.get(uid)
                    current = self.pods.get(uid) is not None
                if (self.stopping or not current or want is None or not self.wanted(pod)
                        or not probe_gated(pod) or pod_ready(pod) == want):
                    break
                md = pod["metadata"]
                try:
                    code, answer = self.write_ready(pod, want)
                except Exception as e:  # noqa: BLE001 - retry with a fresh copy
                    code, answer = None, repr(e)
                if code == 200 or code == 404:
                    break
                if code != 409:  # 409: the pod changed since we saw it
                    self.rlog("writing Ready=%s for %s/%s failed: %s %s" % (
                        want, md["namespace"], md["name"], code, answer[:200]))
                    time.sleep(0.2)
                try:
                    code, answer = self.api_call("GET", "/api/v1/namespaces/%s/pods/%s" % (
                        md["namespace"], md["name"]))
                    fresh = json.loads(answer) if code == 200 else None
                except Exception:  # noqa: BLE001 - unreachable: the watch will tell
                    fresh = None
                if fresh is None or fresh["metadata"]["uid"] != uid:
                    break
                pod = fresh

    def api_call(self, method, path, body=None, content_type=None):
        """(status, body text) over one kept-alive connection (the status
        writer's, also used for PortForward writes, hence the lock): a fresh
        TLS handshake would cost more than the write."""
        with self.api_lock:
            return self.api_call_locked(method, path, body, content_type)

    def api_call_locked(self, method, path, body, content_type):
        headers = {"Accept": "application/json", "User-Agent": "lc-podrunner"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        for attempt in (1, 2):
            if self.conn is None:
                host, port = self.server[len("https://"):].rsplit(":", 1)
                self.conn = http.client.HTTPSConnection(host, int(port), context=self.ctx, timeout=10)
            try:
                self.conn.request(method, path, body=data, headers=headers)
                r = self.conn.getresponse()
                return r.status, r.read().decode(errors="replace")
            except (OSError, http.client.HTTPException):
                self.conn.close()
                self.conn = None
                if attempt == 2:
                    raise
        return None, ""

    def write_ready(self, pod, ready):
        """PATCH pods/status as a kubelet's status manager would: the Ready
        and ContainersReady conditions and the probed containers' ready flag.
        containerStatuses is an atomic list, so it goes whole; the
        resourceVersion makes a stale copy fail with 409 instead of
        overwriting what kwok wrote meanwhile."""
        md = pod["metadata"]
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        probed = [c["name"] for c in pod["spec"]["containers"] if c.get("readinessProbe") is not None]
        statuses = []
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            cs = dict(cs)
            if cs.get("name") in probed:
                cs["ready"] = ready
            statuses.append(cs)
        msg = None if ready else "containers with unready status: [%s]" % " ".join(probed)
        conds = [{"type": t, "status": "True" if ready else "False", "lastTransitionTime": now,
                  "lastProbeTime": None, "reason": None if ready else "ContainersNotReady", "message": msg}
                 for t in ("ContainersReady", "Ready")]
        body = {"metadata": {"resourceVersion": md["resourceVersion"]},
                "status": {"conditions": conds, "containerStatuses": statuses}}
        code, answer = self.api_call("PATCH", "/api/v1/namespaces/%s/pods/%s/status" % (
            md["namespace"], md["name"]), body, "application/strategic-merge-patch+json")
        if code == 200:
            self.rlog("set %s/%s Ready=%s" % (md["namespace"], md["name"], ready))
        return code, answer

    def stop_runtime(self, uid, shutting_down=False):
        proc, meta = self.procs.pop(uid)
        if meta.get("portforward_uid") and not shutting_down:
            # First, so no new connection is relayed to a stopping sandboxd.
            # (Not at shutdown: the signal may have come while the lock of
            # the connection was held; the cluster goes down anyway.)
            self.delete_portforward(meta)
        code = stop_pid(proc.pid, "runtime " + meta["pod"], grace=5)
        if proc.poll() is None:
            proc.wait()
        code = proc.returncode if code is None else code
        for ext in (".pid", ".json"):
            try:
                os.unlink(p("podrunner", uid + ext))
            except FileNotFoundError:
                pass
        shutil.rmtree(meta["base_dir"], ignore_errors=True)
        self.rlog("stopped runtime for %s (pid %d, exit %s)" % (meta["pod"], proc.pid, code))

    def reaper(self):
        """Restart a runtime that exited while its pod still runs (like a
        kubelet would), with a doubling back-off for one that keeps dying."""
        pending, failures = self.restart_at, {}  # uid -> restart time; uid -> quick exits in a row
        while not self.stopping:
            time.sleep(0.5)
            with self.lock:
                for uid, (proc, meta) in list(self.procs.items()):
                    if proc.poll() is not None:
                        del self.procs[uid]
                        # Nothing answers the probe now: the pod is not ready
                        # until the restarted runtime passes it again.
                        if self.ready.get(uid):
                            self.status_q.put(uid)
                        self.ready[uid] = False
                        quick = time.time() - meta["started"] < 10
                        failures[uid] = failures.get(uid, 0) + 1 if quick else 1
                        delay = min(30.0, 0.5 * 2 ** (failures[uid] - 1))
                        self.rlog("runtime for %s exited with %s; restarting in %.1fs" % (
                            meta["pod"], proc.returncode, delay))
                        pending[uid] = time.time() + delay
                for uid in list(failures):
                    if uid not in self.pods:
                        failures.pop(uid, None)
                        pending.pop(uid, None)
                for uid, when in list(pending.items()):
                    pod = self.pods.get(uid)
                    if pod is None or not self.wanted(pod) or uid in self.procs:
                        del pending[uid]
                    elif time.time() >= when:
                        del pending[uid]
                        try:
                            self.start_runtime(pod)
                        except OSError as e:
                            self.rlog("cannot start runtime for %s: %s" % (uid, e))

    def request(self, path, timeout):
        req = urllib.request.Request(self.server + path, headers={"Accept": "application/json"})
        return urllib.request.urlopen(req, context=self.ctx, timeout=timeout)

    def run(self):
        signal.signal(signal.SIGTERM, lambda *_: self.shutdown())
        signal.signal(signal.SIGINT, lambda *_: self.shutdown())
        threading.Thread(target=self.reaper, daemon=True).start()
        threading.Thread(target=self.status_writer, daemon=True).start()
        ClusterDNS(self.server, self.ctx, self.rlog).start(DNS_ADDR)
        sel = "labelSelector=" + urllib.request.quote(SANDBOX_LABEL)
        while not self.stopping:
            try:
                with self.request("/api/v1/pods?" + sel, 30) as r:
                    lst = json.load(r)
                seen = set()
                for pod in lst["items"]:
                    seen.add(self.key(pod))
                    self.sync(pod)
                with self.lock:
                    gone = [u for u in self.procs if u not in seen]
                for u in gone:
                    self.sync({"metadata": {"uid": u}}, deleted=True)
                rv = lst["metadata"]["resourceVersion"]
                while not self.stopping:
                    path = "/api/v1/pods?watch=true&allowWatchBookmarks=true&timeoutSeconds=300&%s" \
                           "&resourceVersion=%s" % (sel, rv)
                    expired = False
                    with self.request(path, 330) as r:
                        for line in r:
                            ev = json.loads(line)
                            obj = ev["object"]
                            if ev["type"] == "ERROR":
                                expired = True
                                break
                            rv = obj["metadata"].get("resourceVersion", rv)
                            if ev["type"] == "BOOKMARK":
                                continue
                            self.sync(obj, deleted=(ev["type"] == "DELETED"))
                    if expired:
                        break
            except Exception as e:  # noqa: BLE001 - reconnect on any failure
                if self.stopping:
                    break
                self.rlog("watch error: %r; relisting in 1s" % (e,))
                time.sleep(1)

    def shutdown(self):
        if self.stopping:
            return
        self.stopping = True
        self.rlog("stopping all runtimes")
        # Runs in the signal handler, possibly while another frame holds the
        # lock: do not take it.
        for uid in list(self.procs):
            self.stop_runtime(uid, shutting_down=True)
        os._exit(0)


class ClusterDNS:
    """What CoreDNS's kubernetes plugin answers, for the names this cluster
    needs: <service>.<namespace>.svc.cluster.local. A ClusterIP Service
    gives its ClusterIP; a headless one (agent-sandbox makes one per
    sandbox) the IPs of its Ready pods, found by its selector, as its
    endpoints would list them (EndpointSlices refuse loopback addresses,
    and every pod address here is one). Looked up in the apiserver at query
    time, so an answer is never staler than the apiserver. Other names get
    REFUSED: nothing is forwarded, no lookup leaves the machine, and an
    address that is not loopback is never handed out. UDP and TCP on
    DNS_ADDR:53; A records with TTL 5 (CoreDNS's default); AAAA and other
    types of an existing name get an empty answer. Runs in the pod runner,
    with its credentials."""

    SUFFIX = ".svc.cluster.local"

    def __init__(self, server, ctx, logf):
        self.server, self.ctx, self.logf = server, ctx, logf
        self.conn = None
        self.lock = threading.Lock()  # one apiserver connection, queries in turn

    def get(self, path):
        """(status, object or None) from the apiserver."""
        with self.lock:
            for attempt in (1, 2):
                if self.conn is None:
                    host, port = self.server[len("https://"):].rsplit(":", 1)
                    self.conn = http.client.HTTPSConnection(host, int(port), context=self.ctx, timeout=5)
                try:
                    self.conn.request("GET", path, headers={"Accept": "application/json",
                                                            "User-Agent": "lc-clusterdns"})
                    r = self.conn.getresponse()
                    body = r.read()
                    return r.status, (json.loads(body) if r.status == 200 else None)
                except (OSError, http.client.HTTPException):
                    self.conn.close()
                    self.conn = None
                    if attempt == 2:
                        raise
        return None, None

    def resolve(self, name):
        """(rcode, [IPv4 addresses]) for a lower-case name without the root dot."""
        if not name.endswith(self.SUFFIX):
            return 5, []  # REFUSED: not ours, and nothing is forwarded
        parts = name[:-len(self.SUFFIX)].split(".")
        if len(parts) != 2 or not all(parts):
            return 3, []  # NXDOMAIN (no pod or hostname records here)
        svc, ns = parts
        q = urllib.request.quote
        try:
            st, obj = self.get("/api/v1/namespaces/%s/services/%s" % (q(ns, safe=""), q(svc, safe="")))
            if st == 404:
                return 3, []
            if st != 200:
                return 2, []  # SERVFAIL
            spec = obj.get("spec") or {}
            cip = spec.get("clusterIP")
            if cip and cip != "None":
                ips = [cip]
            else:
                sel = spec.get("selector") or {}
                if not sel:
                    return 3, []
                st, lst = self.get("/api/v1/namespaces/%s/pods?labelSelector=%s" % (
                    q(ns, safe=""), q(",".join("%s=%s" % kv for kv in sorted(sel.items())), safe="")))
                if st != 200:
                    return 2, []
                ips = [pod["status"]["podIP"] for pod in lst["items"]
                       if pod.get("status", {}).get("podIP") and pod_ready(pod)
                       and not pod["metadata"].get("deletionTimestamp")]
        except (OSError, http.client.HTTPException, ValueError, KeyError) as e:
            self.logf("dns: %s: apiserver lookup failed: %r" % (name, e))
            return 2, []
        good = []
        for ip in ips:
            try:
                a = ipaddress.ip_address(ip)
            except ValueError:
                continue
            if a.version == 4 and a.is_loopback:
                good.append(ip)
            else:
                self.logf("dns: %s: %s is not a loopback IPv4 address: never handed out" % (name, ip))
        return (0, good) if good else (3, [])

    def answer(self, query, udp=False):
        """The response to one DNS message, or None to drop it. Over UDP an
        answer past 512 bytes goes out empty with TC set, so the resolver
        asks again over TCP, which gets it whole."""
        if len(query) < 12:
            return None
        qid, flags, qd = int.from_bytes(query[0:2], "big"), int.from_bytes(query[2:4], "big"), \
            int.from_bytes(query[4:6], "big")
        if flags & 0x8000:
            return None  # a response, not a query

        def reply(rcode, question=b"", answers=(), tc=False):
            f = 0x8000 | (flags & 0x7800) | 0x0400 | (flags & 0x0100) | rcode  # QR, opcode, AA, RD
            if tc:
                f |= 0x0200
            head = qid.to_bytes(2, "big") + f.to_bytes(2, "big") + \
                (1 if question else 0).to_bytes(2, "big") + len(answers).to_bytes(2, "big") + b"\0\0\0\0"
            return head + question + b"".join(answers)

        if (flags >> 11) & 0xF != 0:
            return reply(4)  # NOTIMP: only standard queries
        if qd != 1:
            return reply(1)  # FORMERR
        labels, i = [], 12
        while True:
            if i >= len(query):
                return reply(1)
            n = query[i]
            i += 1
            if n == 0:
                break
            if n & 0xC0 or i + n > len(query):
                return reply(1)  # no compression in a question
            labels.append(query[i:i + n])
            i += n
        if i + 4 > len(query):
            return reply(1)
        qtype, qclass = int.from_bytes(query[i:i + 2], "big"), int.from_bytes(query[i + 2:i + 4], "big")
        question = query[12:i + 4]
        try:
            name = b".".join(labels).decode("ascii").lower()
        except UnicodeDecodeError:
            return reply(3, question)
        if qclass != 1:
            return reply(5, question)
        rcode, ips = self.resolve(name)
        if qtype != 1:
            ips = []  # AAAA and the rest: the name exists, nothing of that type
        self.logf("dns: %s %s -> %s" % ({1: "A", 28: "AAAA"}.get(qtype, str(qtype)), name,
                                        ",".join(ips) or {0: "(no records of that type)", 2: "SERVFAIL",
                                                          3: "NXDOMAIN", 5: "REFUSED"}.get(rcode, rcode)))
        answers = [b"\xc0\x0c" + (1).to_bytes(2, "big") + (1).to_bytes(2, "big") + (5).to_bytes(4, "big") +
                   (4).to_bytes(2, "big") + ipaddress.ip_address(ip).packed for ip in ips]
        out = reply(rcode, question, answers)
        if udp and len(out) > 512:
            out = reply(rcode, question, tc=True)
        return out

    def serve_udp(self, sock):
        while True:
            data, peer = sock.recvfrom(4096)
            try:
                out = self.answer(data, udp=True)
            except Exception as e:  # noqa: BLE001 - a bad query never stops the server
                self.logf("dns: query from %s failed: %r" % (peer, e))
                out = None
            if out:
                sock.sendto(out, peer)

    def serve_tcp_conn(self, conn):
        with conn:
            conn.settimeout(5)
            try:
                while True:
                    head = conn.recv(2, socket.MSG_WAITALL)
                    if len(head) < 2:
                        return
                    n = int.from_bytes(head, "big")
                    data = conn.recv(n, socket.MSG_WAITALL)
                    if len(data) < n:
                        return
                    out = self.answer(data)
                    if not out:
                        return
                    conn.sendall(len(out).to_bytes(2, "big") + out)
            except (OSError, ValueError):
                return

    def serve_tcp(self, sock):
        while True:
            conn, _ = sock.accept()
            threading.Thread(target=self.serve_tcp_conn, args=(conn,), daemon=True).start()

    def start(self, addr):
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.bind((addr, 53))
        t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        t.bind((addr, 53))
        t.listen(16)
        threading.Thread(target=self.serve_udp, args=(u,), daemon=True).start()
        threading.Thread(target=self.serve_tcp, args=(t,), daemon=True).start()
        self.logf("dns: serving %s:53 (udp, tcp) for *%s" % (addr, self.SUFFIX))


def cmd_podrunner():
    PodRunner().run()


def sandboxd_pod_meta(pod):
    """The pod runner's record of the running sandboxd pod NS/NAME (dies
    when there is none, or its sandboxd is not running)."""
    for fn in sorted(os.listdir(p("podrunner"))) if os.path.isdir(p("podrunner")) else []:
        if not fn.endswith(".json"):
            continue
        with open(p("podrunner", fn)) as f:
            meta = json.load(f)
        if meta["pod"] != pod:
            continue
        if meta.get("runtime") != "sandboxd" or not meta.get("netns"):
            die("%s is not a sandboxd pod (runtime %s): it has no namespace of its own" % (pod, meta.get("runtime")))
        if read_pidfile(p("podrunner", fn[:-5] + ".pid")) != meta["pid"]:
            die("the sandboxd of %s is not running" % pod)
        return meta
    die("no sandboxd pod %s in %s (see lc.py status)" % (pod, STATE))


def cmd_pod_exec(pod, argv):
    """Exec argv as a sidecar of the sandboxd pod: in its network namespace
    (so SANDBOXD_REST_ADDR / SANDBOXD_GRPC_ADDR, on the pod's 127.0.0.1,
    reach its sandboxd), with the container's environment, in its root dir."""
    meta = sandboxd_pod_meta(pod)
    enter_netns(meta["pid"], meta["netns"])
    if proc_starttime(meta["pid"]) != meta["starttime"]:
        die("the sandboxd of %s was replaced meanwhile; try again" % pod)
    os.chdir(meta["root_dir"])
    os.execvpe(argv[0], argv, meta["env"])


PR_SET_PDEATHSIG = 1


def cmd_pod_expose(pod):
    """Serve the sandboxd pod's ports on its pod IP until SIGTERM, SIGINT,
    the end of the process that started this one, or of the pod's sandboxd.
    sandboxd binds 127.0.0.1 only ("reachable outside the pod solely through
    explicit proxying"), so ASB_CONNECT_IN_CLUSTER, which dials the pod IP,
    needs a proxy in the pod listening there: this stands for that proxy.
    One socat per port listens on the pod IP (a host loopback address, in the
    host's network namespace, as every pod IP here) and hands each connection
    to pod-relay.sh, which dials sandboxd's 127.0.0.1 inside the pod's
    namespace (as kwok's port-forward does). Prints one line "exposed IP
    PORT..." once every port accepts."""
    meta = sandboxd_pod_meta(pod)
    if any(ch in POD_RELAY for ch in " ,:!'\"\\"):
        die("pod-expose: the path %s cannot go into a socat address" % POD_RELAY)
    # gone with whoever started it: a test that crashes leaves no listener
    _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    procs = []
    try:
        for port in meta["ports"]:
            procs.append(subprocess.Popen(
                ["socat", "TCP-LISTEN:%d,bind=%s,reuseaddr,fork" % (port, meta["ip"]),
                 "EXEC:%s %d %s %d" % (POD_RELAY, meta["pid"], meta["starttime"], port)],
                stdin=subprocess.DEVNULL, preexec_fn=lambda: _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)))
        deadline = time.monotonic() + 30
        for port, proc in zip(meta["ports"], procs):
            while True:
                if proc.poll() is not None:
                    die("pod-expose: socat on %s:%d exited with %s" % (meta["ip"], port, proc.returncode))
                if time.monotonic() > deadline:
                    die("pod-expose: nothing listens on %s:%d after 30 s" % (meta["ip"], port))
                try:
                    # a bound socket is all this checks: the connection is
                    # relayed, and closed before sandboxd reads a byte
                    socket.create_connection((meta["ip"], port), timeout=2).close()
                    break
                except OSError:
                    time.sleep(0.05)
        print("exposed %s %s" % (meta["ip"], " ".join(str(x) for x in meta["ports"])), flush=True)
        while not stop.wait(0.2):
            if proc_starttime(meta["pid"]) != meta["starttime"] or any(x.poll() is not None for x in procs):
                break
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0
    cmd = argv[1]
    if cmd == "up":
        version = VERSIONS["AGENT_SANDBOX_V04"]
        if len(argv) >= 4 and argv[2] == "--agent-sandbox":
            version = argv[3]
        running = [c for c in COMPONENTS if read_pidfile(p("pids", c + ".pid"))]
        if running:
            die("a cluster is already running from %s (%s); run `make cluster-down` first" % (
                STATE, ", ".join(running)))
        try:
            cmd_up(version)
        except (SystemExit, KeyboardInterrupt, Exception):
            # Leave nothing running after a failed start; keep the logs.
            cmd_down(remove_state=False)
            log("cluster-up failed: stopped what it had started; logs kept in %s" % p("logs"))
            raise
    elif cmd == "down":
        cmd_down()
    elif cmd == "status":
        return cmd_status()
    elif cmd == "restart-apiserver":
        cmd_restart_apiserver()
    elif cmd == "stop-router":
        cmd_stop_router()
    elif cmd == "start-router":
        cmd_start_router()
    elif cmd == "podrunner":
        cmd_podrunner()
    elif cmd == "pod-exec":
        if len(argv) < 5 or argv[3] != "--":
            die("usage: lc.py pod-exec NAMESPACE/POD -- COMMAND...")
        cmd_pod_exec(argv[2], argv[4:])
    elif cmd == "pod-expose":
        if len(argv) != 3:
            die("usage: lc.py pod-expose NAMESPACE/POD")
        cmd_pod_expose(argv[2])
    else:
        die("unknown command %r" % cmd)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
