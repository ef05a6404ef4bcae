#!/usr/bin/env bash
# Build the local-cluster binaries into the cache (default
# ~/.cache/agentsandbox), from the committed wrapper modules in gomod/.
# Each component lands in a directory named after its pinned version, so a
# version bump never reuses a stale binary and a warm cache costs nothing.
#
#   build.sh [k8s|etcd|kwok|agent-sandbox-vX.Y.Z|sandboxd ...]   (default: all)
set -euo pipefail
LC=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck disable=SC1091
. "$LC/versions.env"
CACHE=${AGENTSANDBOX_CACHE:-$(cd ~ && pwd)/.cache/agentsandbox}
export GOTOOLCHAIN=local CGO_ENABLED=0
# Two cores: never more than two compile jobs; reuse Go's own caches.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-p=2 -mod=readonly -trimpath -buildvcs=false"

stamp_ok() { [ -f "$1/.built" ] && [ "$(cat "$1/.built")" = "$2" ]; }

# Go itself, checked only when something is to be built (a warm cache
# needs no Go): the pinned modules need their go.mod's Go or newer, and
# GOTOOLCHAIN=local never downloads one, so say so before any work.
go_checked=
check_go() {
  local need have
  [ -n "$go_checked" ] && return 0
  need=$(sed -n 's/^go \([0-9][0-9.]*\)$/\1/p' "$LC"/gomod/*/go.mod | sort -V | tail -1)
  have=$(go env GOVERSION 2>/dev/null | sed 's/^go//') || have=
  if [ -z "$have" ] || [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -1)" != "$need" ]; then
    echo "build: the local cluster is built from Go modules and needs Go $need or newer" >&2
    echo "build: (found: ${have:-no go on PATH}); install it and put its bin directory" >&2
    echo "build: on PATH (e.g. export PATH=\$PATH:/usr/local/go/bin), then run make again" >&2
    exit 1
  fi
  go_checked=1
}

# Runs "$@" in the background and, every 30 s while it runs, prints
# "build: LABEL: XmYs, " followed by what the shell function PROGRESS prints.
#   ticking LABEL PROGRESS CMD...
ticking() {
  local label=$1 progress=$2 t0 pid rc=0 next=30
  shift 2
  t0=$(date +%s)
  "$@" &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if [ $(( $(date +%s) - t0 )) -ge $next ]; then
      echo "build: $label: $(( ($(date +%s) - t0) / 60 ))m$(( ($(date +%s) - t0) % 60 ))s, $($progress)"
      next=$(( next + 30 ))
    fi
  done
  wait "$pid" || rc=$?
  return $rc
}

# go build with progress: a cold build prints nothing for minutes
# otherwise (Kubernetes alone is ~10 min on two cores). First the package
# list (on a cold module cache, go downloads the modules for it: the
# cache's size is reported), then the packages go build -v names as it
# compiles them, counted against that list, every 30 s.
#   gob LABEL OUT LDFLAGS PKG...
gob() {
  local label=$1 out=$2 ldf=$3 log list total rc=0 modcache
  shift 3
  check_go
  log=$(mktemp); list=$(mktemp)
  modcache=$(go env GOMODCACHE)/cache/download
  fetched() { echo "$(du -sm "$modcache" 2>/dev/null | cut -f1) MiB in the module cache"; }
  compiled() { echo "$(wc -l < "$log") of $total packages compiled"; }
  echo "build: $label: listing packages (downloading any missing modules)"
  if ! ticking "$label" fetched bash -c 'exec go list -deps "${@:2}" > "$0" 2>"$1"' "$list" "$log" "$@"; then
    tail -20 "$log" >&2; rm -f "$log" "$list"
    echo "build: $label: go list failed (above)" >&2
    return 1
  fi
  total=$(wc -l < "$list")
  echo "build: $label: compiling up to $total packages"
  : > "$log"
  ticking "$label" compiled bash -c 'exec go build -v -ldflags "$1" -o "$2" "${@:3}" 2>"$0"' \
    "$log" "$ldf" "$out" "$@" || rc=$?
  if [ $rc -ne 0 ]; then grep -v '^[a-zA-Z0-9._/-]*$' "$log" | tail -40 >&2; fi
  rm -f "$log" "$list"
  return $rc
}

build_k8s() {
  local out=$CACHE/k8s-$K8S_VERSION minor ldf="" p
  stamp_ok "$out" "$K8S_VERSION" && return 0
  minor=$(echo "$K8S_VERSION" | cut -d. -f2)
  # Same variables as kubernetes' hack/lib/version.sh: `--version` and the
  # apiserver's /version report the real release (kubectl, kwok rely on it).
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf="$ldf -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ldf="$ldf -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  mkdir -p "$out"; cd "$LC/gomod/k8s"
  gob "k8s $K8S_VERSION (apiserver, controller-manager, scheduler)" "$out/" "-s -w $ldf" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler
  echo "$K8S_VERSION" > "$out/.built"
}

build_etcd() {
  local out=$CACHE/etcd-$ETCD_VERSION
  stamp_ok "$out" "$ETCD_VERSION" && return 0
  mkdir -p "$out"; cd "$LC/gomod/etcd"
  gob "etcd $ETCD_VERSION" "$out/etcd" "-s -w" go.etcd.io/etcd/server/v3
  echo "$ETCD_VERSION" > "$out/.built"
}

# kwok's PortForward CRD: the pod runner declares one PortForward per sandboxd
# pod (its command enters the pod's network namespace). Copied apart from the
# stamped build so a cache built before it was needed gains it without a
# rebuild, and clones that do not use it see the same stamp.
kwok_crds() {
  local out=$CACHE/kwok-$KWOK_VERSION dir
  [ -f "$out/crds/kwok.x-k8s.io_portforwards.yaml" ] && return 0
  cd "$LC/gomod/kwok"
  dir=$(go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" |
        python3 -c 'import json,sys;print(json.load(sys.stdin)["Dir"])')
  mkdir -p "$out/crds.tmp"
  cp "$dir/kustomize/crd/bases/kwok.x-k8s.io_portforwards.yaml" "$out/crds.tmp/"
  chmod u+w "$out"/crds.tmp/*.yaml
  rm -rf "$out/crds"; mv "$out/crds.tmp" "$out/crds"
}

build_kwok() {
  local out=$CACHE/kwok-$KWOK_VERSION dir
  stamp_ok "$out" "$KWOK_VERSION" && { kwok_crds; return 0; }
  mkdir -p "$out"; cd "$LC/gomod/kwok"
  gob "kwok $KWOK_VERSION" "$out/kwok" "-s -w" sigs.k8s.io/kwok/cmd/kwok
  # kwok's own default stages (what kwokctl feeds it): node fast + lease
  # heartbeat, pod fast.
  dir=$(go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" |
        python3 -c 'import json,sys;print(json.load(sys.stdin)["Dir"])')
  rm -rf "$out/stages"; mkdir -p "$out/stages"
  cp "$dir/kustomize/stage/node/fast/node-initialize.yaml" \
     "$dir/kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml" \
     "$dir"/kustomize/stage/pod/fast/pod-*.yaml "$out/stages/"
  chmod u+w "$out"/stages/*.yaml
  kwok_crds
  echo "$KWOK_VERSION" > "$out/.built"
}

build_agent_sandbox() { # version
  local v=$1 out=$CACHE/agent-sandbox-$1 dir
  stamp_ok "$out" "$v" && return 0
  mkdir -p "$out"; cd "$LC/gomod/agent-sandbox-$v"
  gob "agent-sandbox $v controller" "$out/agent-sandbox-controller" "-s -w" \
    sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller
  if [ "$v" = "$ROUTER_VERSION" ]; then
    gob "agent-sandbox $v router" "$out/sandbox-router" "-s -w" \
      sigs.k8s.io/agent-sandbox/sandbox-router/cmd
  fi
  # The release's own CRDs, from the module it was built from.
  dir=$(go mod download -json "sigs.k8s.io/agent-sandbox@$v" |
        python3 -c 'import json,sys;print(json.load(sys.stdin)["Dir"])')
  rm -rf "$out/crds" "$out/k8s" "$out/router-deploy"; mkdir -p "$out/crds" "$out/k8s"
  cp "$dir"/k8s/crds/*.yaml "$out/crds/"
  cp "$dir"/k8s/*.yaml "$out/k8s/"          # upstream RBAC for the controller
  if [ "$v" = "$ROUTER_VERSION" ]; then
    mkdir -p "$out/router-deploy"; cp "$dir"/sandbox-router/deploy/*.yaml "$out/router-deploy/"
  fi
  chmod -R u+w "$out"
  echo "$v" > "$out/.built"
}

# sandboxd, the KEP-539.2 runtime daemon, built unmodified from the pinned
# release (it lives in the agent-sandbox module, so the same wrapper module
# pins it). Its own directory and stamp: the controller's cache entry stays
# valid. The version variable is the one upstream's Makefile stamps, so
# `sandboxd --version` names the release.
build_sandboxd() {
  local v=$SANDBOXD_VERSION out=$CACHE/sandboxd-$SANDBOXD_VERSION
  stamp_ok "$out" "$v" && return 0
  mkdir -p "$out"; cd "$LC/gomod/agent-sandbox-$v"
  gob "sandboxd $v" "$out/sandboxd" "-s -w -X sigs.k8s.io/agent-sandbox/internal/version.gitVersion=$v" \
    sigs.k8s.io/agent-sandbox/packages/sandboxd/cmd/sandboxd
  echo "$v" > "$out/.built"
}

# One build at a time per cache: two clones (or a test and a demo) running
# make at once would otherwise compile Kubernetes twice on two cores, and
# one could see the other's half-written binary before its .built stamp.
mkdir -p "$CACHE"
exec 8>"$CACHE/.build.lock"
if ! flock -n 8; then
  echo "build: another build is using $CACHE; waiting for it"
  flock 8
fi

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(etcd kwok "agent-sandbox-$AGENT_SANDBOX_V04" "agent-sandbox-$AGENT_SANDBOX_V05" sandboxd k8s)
i=0
for t in "${targets[@]}"; do
  i=$((i + 1))
  start=$(date +%s)
  echo "build: [$i/${#targets[@]}] $t"
  case $t in
    k8s) build_k8s ;;
    etcd) build_etcd ;;
    kwok) build_kwok ;;
    sandboxd) build_sandboxd ;;
    agent-sandbox-v*) build_agent_sandbox "${t#agent-sandbox-}" ;;
    *) echo "build.sh: unknown target $t" >&2; exit 2 ;;
  esac
  echo "build: $t ok ($(( $(date +%s) - start ))s)"
done
