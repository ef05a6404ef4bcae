#!/bin/bash
# Builds mbedTLS 3.6 from Debian trixie's source package into a cache dir:
#   PREFIX/include/{mbedtls,psa}/  PREFIX/lib/lib{mbedtls,mbedx509,mbedcrypto}.a
# The build host stays on bookworm: only a deb-src line for trixie is added,
# never a trixie binary package. A no-op once PREFIX/.stamp exists.
#
#   tests/http/mbedtls3.sh [PREFIX]   (default ~/.cache/agentsandbox/mbedtls-3.6)
#
# Configuration follows debian/rules of the package (threading on, CMAC,
# DTLS-SRTP, deprecation warnings), so the library matches what Debian
# ships as libmbedtls-dev 3.6; programs and the test suite are not built.
set -euo pipefail

HOME=${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}
PREFIX=${1:-${MBEDTLS3_PREFIX:-$HOME/.cache/agentsandbox/mbedtls-3.6}}
SRC=${MBEDTLS3_SRC:-$HOME/.cache/agentsandbox/src}
SOURCES=/etc/apt/sources.list.d/agentsandbox-trixie-src.sources

if [ -f "$PREFIX/.stamp" ] && [ -f "$PREFIX/lib/libmbedtls.a" ]; then
  exit 0
fi

mkdir -p "$SRC" "$(dirname "$PREFIX")"
# Two builds at once (two clones on one machine) take turns; the second
# finds the stamp and stops.
exec 9>"$SRC/.lock"
flock 9
if [ -f "$PREFIX/.stamp" ] && [ -f "$PREFIX/lib/libmbedtls.a" ]; then
  exit 0
fi

if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
start=$(date +%s)

for tool in cmake dpkg-source python3 cc; do
  command -v "$tool" >/dev/null || { echo "mbedtls3: $tool is missing (make deps installs cmake, dpkg-dev)" >&2; exit 1; }
done

# Source packages of trixie only: "Types: deb-src" brings no binaries.
have_src() { apt-cache showsrc mbedtls 2>/dev/null | grep -q '^Version: 3\.6\.'; }
if ! have_src; then
  if [ ! -f "$SOURCES" ]; then
    echo "mbedtls3: adding $SOURCES (deb-src only)"
    printf '%s\n' 'Types: deb-src' 'URIs: http://deb.debian.org/debian' 'Suites: trixie' \
      'Components: main' 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' |
      $SUDO tee "$SOURCES" >/dev/null
  fi
  # Another list being unreachable must not stop us: have_src decides.
  $SUDO apt-get update -qq || true
  have_src || { echo "mbedtls3: no mbedtls 3.6 source package after apt-get update" >&2; exit 1; }
fi

cd "$SRC"
version=$(apt-cache showsrc mbedtls | awk '/^Version: 3\.6\./ {print $2; exit}')
dsc="mbedtls_${version}.dsc"
if [ ! -f "$dsc" ]; then
  echo "mbedtls3: fetching source package mbedtls $version"
  apt-get source --download-only -qq "mbedtls=$version" 2>&1 | grep -v 'unsandboxed' || true
fi
[ -f "$dsc" ] || { echo "mbedtls3: $dsc was not fetched" >&2; exit 1; }

tree="$SRC/mbedtls-$version"
rm -rf "$tree" "$tree.build"
# apt checked the files against trixie's signed Release file; dpkg-source's
# own signature check only warns for lack of the uploader's key.
dpkg-source -q -x "$dsc" "$tree" >/dev/null 2>&1 || { dpkg-source -x "$dsc" "$tree"; exit 1; }

cd "$tree"
for opt in MBEDTLS_DEPRECATED_WARNING MBEDTLS_THREADING_C MBEDTLS_THREADING_PTHREAD \
           MBEDTLS_CMAC_C MBEDTLS_SSL_DTLS_SRTP; do
  python3 scripts/config.py set "$opt"
done

stage="$PREFIX.tmp.$$"
rm -rf "$stage"
cmake -S . -B "$tree.build" -DCMAKE_BUILD_TYPE=Release \
  -DUSE_STATIC_MBEDTLS_LIBRARY=ON -DUSE_SHARED_MBEDTLS_LIBRARY=OFF \
  -DENABLE_PROGRAMS=OFF -DENABLE_TESTING=OFF -DMBEDTLS_FATAL_WARNINGS=OFF \
  -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DCMAKE_INSTALL_PREFIX="$stage" \
  -DCMAKE_INSTALL_LIBDIR=lib >/dev/null
cmake --build "$tree.build" -j "$(nproc)" >/dev/null
cmake --install "$tree.build" >/dev/null
grep -E '^#define MBEDTLS_(SSL_PROTO_TLS1_[23]|PSA_CRYPTO_C|USE_PSA_CRYPTO|THREADING_C)\b' \
  "$stage/include/mbedtls/mbedtls_config.h" > "$stage/config-summary.txt" || true
echo "mbedtls $version from Debian trixie source, built $(date -u +%FT%TZ)" > "$stage/.stamp"

rm -rf "$PREFIX"
mv "$stage" "$PREFIX"
rm -rf "$tree" "$tree.build"
echo "mbedtls3: mbedtls $version in $PREFIX ($(( $(date +%s) - start )) s)"
