#!/usr/bin/env bash
# Regenerate go.mod and go.sum from versions.env (only after a bump; both
# are committed so builds are pinned). -e: the proxy may lack modules only
# the components' own tests import.
set -euo pipefail
D=$(cd "$(dirname "$0")" && pwd)
# shellcheck disable=SC1091
. "$D/versions.env"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod
cd "$D"; rm -f go.mod go.sum
go mod init local/otelcol-asb >/dev/null 2>&1; go mod edit -go=1.26.0
go mod edit -require="go.opentelemetry.io/collector/otelcol@$OTELCOL_CORE_VERSION" \
  -require="go.opentelemetry.io/collector/receiver/otlpreceiver@$OTELCOL_CORE_VERSION" \
  -require="github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter@$OTELCOL_CONTRIB_VERSION"
go mod tidy -e
