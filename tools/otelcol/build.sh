#!/usr/bin/env bash
# Build the test collector (main.go here: OTLP receiver + file exporter)
# into the cache, default ~/.cache/agentsandbox/otelcol-<core version>/,
# from the committed go.mod/go.sum. A warm cache costs nothing; prints the
# binary's path last.
set -euo pipefail
D=$(cd "$(dirname "$0")" && pwd)
# shellcheck disable=SC1091
. "$D/versions.env"
CACHE=${AGENTSANDBOX_CACHE:-$(cd ~ && pwd)/.cache/agentsandbox}
OUT=$CACHE/otelcol-$OTELCOL_CORE_VERSION
STAMP="$OTELCOL_CORE_VERSION $OTELCOL_CONTRIB_VERSION $(cat "$D/main.go" "$D/go.sum" | cksum | cut -d' ' -f1)"
export GOTOOLCHAIN=local CGO_ENABLED=0
# Two cores shared: at most two compile jobs, like the cluster build.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-p=2 -mod=readonly -trimpath -buildvcs=false"
built() { [ -x "$OUT/otelcol-asb" ] && [ "$(cat "$OUT/.built" 2>/dev/null)" = "$STAMP" ]; }
mkdir -p "$CACHE"
if ! built; then
  # One build per cache at a time (two clones running make together would
  # otherwise compile ~950 packages twice on two cores).
  exec 8>"$CACHE/otelcol.lock"
  if ! flock -n 8; then echo "otelcol: another build holds $CACHE/otelcol.lock; waiting" >&2; flock 8; fi
  if ! built; then
    echo "otelcol: building $OTELCOL_CORE_VERSION (cold: several minutes on two cores)" >&2
    mkdir -p "$OUT"; cd "$D"
    go build -ldflags "-s -w" -o "$OUT/otelcol-asb.tmp" .
    mv "$OUT/otelcol-asb.tmp" "$OUT/otelcol-asb"
    echo "$STAMP" > "$OUT/.built"
  fi
fi
echo "$OUT/otelcol-asb"
