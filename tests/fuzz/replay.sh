#!/bin/sh
# Usage: replay.sh NAME FUZZER LOG DIR...
# Runs every input in the directories once through FUZZER, a libFuzzer
# build (-runs=0: no mutation, nothing written), its output in LOG, and
# fails when an input fails or when fewer inputs ran than the directories
# hold. libFuzzer given an empty directory (or none) runs one empty input
# and exits 0, so without the count a replay whose seeds were gone, or a
# target with no seeds named, passed having replayed nothing (the
# replay main it replaced fails on "replayed 0 inputs").
# Self-check (make test-fuzz-replay runs it first): replay.sh --selftest FUZZER
set -u

if [ "${1:-}" = "--selftest" ]; then
    # each case is judged by what it says, so a script that cannot run at
    # all does not pass the cases that expect a failure
    fuzzer=$2
    tmp=$(mktemp -d) || exit 1
    trap 'rm -rf "$tmp"' EXIT
    mkdir "$tmp/empty" "$tmp/one"
    printf '{"a":1}' >"$tmp/one/seed"
    check() { # check WANT_RC WANT_TEXT ARGS...: replay.sh ARGS exits WANT_RC saying WANT_TEXT
        want_rc=$1 want_text=$2
        shift 2
        sh "$0" selftest "$fuzzer" "$tmp/log" "$@" >"$tmp/out" 2>&1
        rc=$?
        if [ "$rc" != "$want_rc" ] || ! grep -qF -- "$want_text" "$tmp/out"; then
            echo "replay.sh selftest: seeds '$*': exit $rc, not $want_rc saying '$want_text':"
            cat "$tmp/out"
            exit 1
        fi
    }
    check 1 "replay selftest: no input in $tmp/empty" "$tmp/empty"
    check 1 "replay selftest: no seed directory named"
    check 0 "--- replay selftest: 1 inputs, none failed" "$tmp/one" "$tmp/empty"
    echo "--- replay.sh selftest: empty or no seeds fail, one seed runs once"
    exit 0
fi

[ $# -ge 3 ] || { echo "usage: replay.sh NAME FUZZER LOG DIR..." >&2; exit 2; }
name=$1 fuzzer=$2 log=$3
shift 3
[ $# -ge 1 ] || { echo "replay $name: no seed directory named"; exit 1; }
want=0
for d in "$@"; do
    [ -d "$d" ] || { echo "replay $name: $d is not a directory"; exit 1; }
    # libFuzzer reads regular files and skips empty ones
    n=$(find "$d" -type f -size +0c | wc -l)
    want=$((want + n))
done
[ "$want" -gt 0 ] || { echo "replay $name: no input in $*"; exit 1; }
"$fuzzer" -runs=0 -timeout=10 -rss_limit_mb=2048 "$@" >"$log" 2>&1 || {
    tail -n 40 "$log"
    exit 1
}
got=$(sed -n 's/^INFO: seed corpus: files: \([0-9]*\) .*/\1/p' "$log" | head -n 1)
if [ -z "$got" ] || [ "$got" -lt "$want" ]; then
    echo "replay $name: libFuzzer ran ${got:-no} seed inputs of the $want in $*"
    tail -n 20 "$log"
    exit 1
fi
echo "--- replay $name: $got inputs, none failed"
