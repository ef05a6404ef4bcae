# Shared by the CLI's test scripts: run a command, keep its exit code,
# stdout and stderr, and check them. Every check can fail.
FAILS=0
PASSES=0
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

# t EXPECTED_RC NAME CMD...: runs CMD, stdout in $OUT/o, stderr in $OUT/e.
t() {
    local want=$1 name=$2 rc
    shift 2
    "$@" >"$OUT/o" 2>"$OUT/e"
    rc=$?
    if [ "$rc" = "$want" ]; then
        PASSES=$((PASSES + 1))
    else
        FAILS=$((FAILS + 1))
        echo "FAIL $name: exit $rc, want $want: $*"
        sed 's/^/  stdout: /' "$OUT/o" | head -5
        sed 's/^/  stderr: /' "$OUT/e" | head -5
    fi
}
# ok NAME CONDITION...: a check on what the last t left.
ok() {
    local name=$1
    shift
    if "$@"; then
        PASSES=$((PASSES + 1))
    else
        FAILS=$((FAILS + 1))
        echo "FAIL $name"
        sed 's/^/  stdout: /' "$OUT/o" | head -5
        sed 's/^/  stderr: /' "$OUT/e" | head -5
    fi
}
has_out() { grep -q -- "$1" "$OUT/o"; }
has_err() { grep -q -- "$1" "$OUT/e"; }
out_is() { [ "$(cat "$OUT/o")" = "$1" ]; }
# py EXPR: python3 reads stdout as JSON into d, EXPR must be true.
py() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if ($1) else 1)" "$OUT/o"; }
finish() {
    echo "$1: $PASSES checks passed, $FAILS failed"
    [ "$FAILS" = 0 ]
}
