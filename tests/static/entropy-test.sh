#!/bin/bash
# Where a static binary's randomness comes from, and the error when there
# is none. The static musl https_get in an empty root (the binary and a CA
# bundle: no /dev) against nginx over loopback:
#   1. it works: getrandom alone feeds the DRBG and PSA, no /dev/urandom;
#   2. with getrandom failing (ENOSYS, tests/static/no_getrandom) it has no
#      source left: the client fails at creation with an error naming both
#      sources and why each failed;
#   3. a plain http:// GET still works there: no TLS set up, no entropy used;
# and the glibc build on the host, getrandom failing but /dev/urandom
# present, falls back to the device and works.
#   tests/static/entropy-test.sh NO_GETRANDOM MUSL_HTTPS_GET GLIBC_HTTPS_GET HTTP_PORT HTTPS_PORT CA
set -euo pipefail
nogr=${1:?}; musl=${2:?}; glibc=${3:?}; http=${4:?}; https=${5:?}; ca=${6:?}
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
cp "$musl" "$root/https_get"
cp "$ca" "$root/ca.pem"
want='hello from nginx'
in_root() { env -i /usr/sbin/chroot "$root" /https_get "$@"; }

out=$(in_root "https://127.0.0.1:$https/small.txt" /ca.pem)
[ "$out" = "$want" ] || { echo "entropy: the empty root's HTTPS GET printed '$out'"; exit 1; }
echo "entropy: empty root ($(ls "$root" | tr '\n' ' ')), getrandom only: HTTPS GET ok"

rc=0; err=$("$nogr" env -i /usr/sbin/chroot "$root" /https_get \
  "https://127.0.0.1:$https/small.txt" /ca.pem 2>&1 >/dev/null) || rc=$?
echo "entropy: no getrandom, no /dev: exit $rc: $err"
[ "$rc" = 1 ] || { echo "entropy: want exit 1"; exit 1; }
[ "$err" = "https_get: tls: no random source: getrandom failed (Function not implemented) and /dev/urandom: No such file or directory" ] ||
  { echo "entropy: not the error that names both sources"; exit 1; }

out=$("$nogr" env -i /usr/sbin/chroot "$root" /https_get "http://127.0.0.1:$http/small.txt")
[ "$out" = "$want" ] || { echo "entropy: the plain HTTP GET without entropy printed '$out'"; exit 1; }
echo "entropy: no getrandom, no /dev: a plain http:// GET still works (no TLS set up)"

out=$("$nogr" "$glibc" "https://127.0.0.1:$https/small.txt" "$ca")
[ "$out" = "$want" ] || { echo "entropy: the glibc HTTPS GET over /dev/urandom printed '$out'"; exit 1; }
echo "entropy: glibc, no getrandom, /dev/urandom present: HTTPS GET ok"
