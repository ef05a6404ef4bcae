#!/usr/bin/env bash
# Regenerate the wrapper Go modules under tools/localcluster/gomod/ from
# versions.env. Only needed after a version bump; the generated go.mod and
# go.sum files are committed so that builds are pinned and reproducible.
#
#   gen-gomod.sh [k8s|etcd|kwok|agent-sandbox-vX.Y.Z ...]   (default: all)
set -euo pipefail
LC=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck disable=SC1091
. "$LC/versions.env"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod

gen_k8s() {
  local d=$LC/gomod/k8s minor stg gomod
  minor=$(echo "$K8S_VERSION" | cut -d. -f2)
  stg="v0.${K8S_VERSION#v1.}"            # v1.34.4 -> v0.34.4
  rm -rf "$d"; mkdir -p "$d"; cd "$d"
  go mod init local/k8sbins >/dev/null 2>&1; go mod edit -go=1.26.0
  gomod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" |
          python3 -c 'import json,sys;print(json.load(sys.stdin)["GoMod"])')
  # Every staging module the release itself replaces with ./staging/src/...
  for m in $(awk '$2=="=>" && $3 ~ /^\.\/staging\/src\// {print $1}' "$gomod"); do
    go mod edit -replace="$m=$m@$stg"
  done
  go mod edit -require="k8s.io/kubernetes@$K8S_VERSION"
  cat > tools.go <<EOT
//go:build tools

// Package tools pins the Kubernetes control-plane commands built from
// k8s.io/kubernetes $K8S_VERSION (minor $minor).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
EOT
  go mod tidy
}

gen_simple() { # dir module-path version package...
  local d=$LC/gomod/$1 mod=$2 ver=$3; shift 3
  rm -rf "$d"; mkdir -p "$d"; cd "$d"
  go mod init "local/$(basename "$d")" >/dev/null 2>&1; go mod edit -go=1.26.0
  go mod edit -require="$mod@$ver"
  {
    echo '//go:build tools'; echo
    echo "// Package tools pins the commands built from $mod $ver."
    echo 'package tools'; echo; echo 'import ('
    for p in "$@"; do echo "	_ \"$p\""; done
    echo ')'
  } > tools.go
  go mod tidy
}

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(k8s etcd kwok "agent-sandbox-$AGENT_SANDBOX_V04" "agent-sandbox-$AGENT_SANDBOX_V05")
for t in "${targets[@]}"; do
  echo "gen-gomod: $t"
  case $t in
    k8s) gen_k8s ;;
    etcd) gen_simple etcd go.etcd.io/etcd/server/v3 "$ETCD_VERSION" go.etcd.io/etcd/server/v3 ;;
    kwok) gen_simple kwok sigs.k8s.io/kwok "$KWOK_VERSION" sigs.k8s.io/kwok/cmd/kwok ;;
    agent-sandbox-v*)
      v=${t#agent-sandbox-}
      pkgs=(sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller)
      [ "$v" = "$ROUTER_VERSION" ] && pkgs+=(sigs.k8s.io/agent-sandbox/sandbox-router/cmd)
      [ "$v" = "$SANDBOXD_VERSION" ] && pkgs+=(sigs.k8s.io/agent-sandbox/packages/sandboxd/cmd/sandboxd)
      gen_simple "$t" sigs.k8s.io/agent-sandbox "$v" "${pkgs[@]}" ;;
    *) echo "unknown target $t" >&2; exit 2 ;;
  esac
done
