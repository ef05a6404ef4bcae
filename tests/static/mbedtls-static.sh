#!/bin/bash
# Builds mbedTLS 3.6 with another compiler (musl-gcc, a cross gcc) for the
# static and cross builds: size-tuned (-Os, one section per function) and
# with MBEDTLS_PSA_CRYPTO_EXTERNAL_RNG, so PSA draws its randomness from
# agentsandbox.h's own getrandom source (mbedTLS's own entropy code reads
# /dev/urandom on musl, and a static binary in an empty root has no /dev).
#
#   tests/static/mbedtls-static.sh CC PREFIX [UNSET_FILE]
#     CC      the compiler, e.g. musl-gcc or aarch64-linux-gnu-gcc
#     PREFIX  where PREFIX/include and PREFIX/lib/lib{mbedtls,mbedx509,mbedcrypto}.a go
#     UNSET_FILE  optional: mbedtls_config.h options to turn off, one a
#             line, `#` comments (tools/cli/mbedtls-client.unset trims a
#             TLS-client-only build); a changed file rebuilds PREFIX
#
# The source is the Debian trixie source package tests/http/mbedtls3.sh
# already fetched into ~/.cache/agentsandbox/src (make mbedtls3 first).
# A no-op once PREFIX/.stamp exists; builds of one cache take turns.
set -euo pipefail
CC_=${1:?compiler}; PREFIX=${2:?prefix}; UNSET=${3:-}
HOME=${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}
SRC=${MBEDTLS3_SRC:-$HOME/.cache/agentsandbox/src}
trim=none
[ -n "$UNSET" ] && trim=$(sed 's/#.*//' "$UNSET" | tr -s ' \t\n' '\n' | grep . | sha256sum | cut -c1-16)
built() { [ -f "$PREFIX/.stamp" ] && [ "$(cat "$PREFIX/.trim" 2>/dev/null || echo none)" = "$trim" ]; }
built && exit 0
mkdir -p "$(dirname "$PREFIX")"
exec 9>"$PREFIX.lock"
flock 9
built && exit 0
orig=$(ls "$SRC"/mbedtls_3.6.*.orig.tar.* 2>/dev/null | sort -V | tail -1)
[ -n "$orig" ] || { echo "mbedtls-static: no mbedTLS 3.6 source in $SRC (run make mbedtls3)" >&2; exit 1; }
command -v "${CC_%% *}" >/dev/null || { echo "mbedtls-static: $CC_ is missing (make deps)" >&2; exit 1; }
start=$(date +%s)
work=$(mktemp -d "${TMPDIR:-/tmp}/mbedtls-static.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "mbedtls-static: building $(basename "$orig") with $CC_ into $PREFIX"
[ -z "$UNSET" ] || UNSET=$(realpath "$UNSET") # the build cds into the tree
tar -xf "$orig" -C "$work"
tree=$(echo "$work"/mbedtls-*)
cd "$tree"
for opt in MBEDTLS_THREADING_C MBEDTLS_THREADING_PTHREAD MBEDTLS_PSA_CRYPTO_EXTERNAL_RNG; do
  python3 scripts/config.py set "$opt"
done
# Never compiled in, so never a path to a device: the PSA core uses the
# external RNG above, the library seeds its DRBG itself.
python3 scripts/config.py unset MBEDTLS_ENTROPY_NV_SEED 2>/dev/null || true
if [ -n "$UNSET" ]; then
  for opt in $(sed 's/#.*//' "$UNSET"); do python3 scripts/config.py unset "$opt"; done
fi
ar=${CC_%gcc}ar
case "$CC_" in musl-gcc|cc|gcc|clang) ar=ar;; esac
make -C library -j "$(nproc)" CC="$CC_" AR="$ar" \
  CFLAGS="-Os -ffunction-sections -fdata-sections" \
  libmbedtls.a libmbedx509.a libmbedcrypto.a >/dev/null
stage="$PREFIX.tmp.$$"
rm -rf "$stage"; mkdir -p "$stage/lib"
cp -r include "$stage/include"
cp library/libmbedtls.a library/libmbedx509.a library/libmbedcrypto.a "$stage/lib/"
echo "mbedtls $(basename "$orig") with $CC_ (-Os, PSA external RNG${UNSET:+, without the options in $UNSET}), built $(date -u +%FT%TZ)" > "$stage/.stamp"
[ "$trim" = none ] || echo "$trim" > "$stage/.trim"
rm -rf "$PREFIX"; mv "$stage" "$PREFIX"
echo "mbedtls-static: $PREFIX ($(( $(date +%s) - start )) s)"
