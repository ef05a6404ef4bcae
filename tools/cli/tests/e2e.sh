#!/usr/bin/env bash
# The CLI end to end on a real cluster (the local control plane the
# test-kube-cluster tier brings up; or yours): every subcommand, JSON
# output parsed, exit codes, Ctrl-C and SIGTERM during `run` leave no
# claim. Every claim it makes carries the label suite=cli-e2e, and it
# deletes them all at the end.
# Usage: KUBECONFIG=... e2e.sh BIN [TEMPLATE]   (ASB_ROUTER_PORT: also
#        --connect direct=http://127.0.0.1:PORT)
set -u
B=$(realpath "$1")
TPL=${2:-python-sandbox-template}
. "$(dirname "$0")/lib.sh"
L=suite=cli-e2e
cleanup() { "$B" rm -l "$L" >/dev/null 2>&1; rm -rf "$OUT"; }
trap cleanup EXIT

# count of our claims now
ours() { "$B" ls -l "$L" -o name | grep -c . ; }
# waits (up to 60 s) until our claims number $1
wait_ours() {
    local i
    for i in $(seq 1 300); do [ "$(ours)" = "$1" ] && return 0; sleep 0.2; done
    return 1
}

# --- create, get, status, ls -------------------------------------------------
t 0 create-named "$B" create "$TPL" --label "$L" --label role=first --ttl 10m --name cli-e2e-one
ok create-prints-the-name out_is cli-e2e-one
t 0 create-json "$B" create "$TPL" --label "$L" --timeout 3m -o json
ok create-json-parses py 'd["claim"].startswith("sandbox-claim-") and d["namespace"] == "default" and d["sandbox"] and d["pod"]'
two=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["claim"])' "$OUT/o")
t 0 get-json "$B" get cli-e2e-one -o json
ok get-json-is-the-claim py 'd["kind"] == "SandboxClaim" and d["metadata"]["name"] == "cli-e2e-one" and d["metadata"]["labels"]["role"] == "first" and d["metadata"]["labels"]["suite"] == "cli-e2e"'
ok get-json-has-the-ttl py '"shutdownTime" in json.dumps(d["spec"])'
t 0 get-yaml "$B" get cli-e2e-one -o yaml
cp "$OUT/o" "$OUT/get.yaml"
t 0 get-json-again "$B" get cli-e2e-one -o json
ok get-yaml-is-the-json python3 -c 'import json, sys, yaml; sys.exit(0 if yaml.safe_load(open(sys.argv[1])) == json.load(open(sys.argv[2])) else 1)' "$OUT/get.yaml" "$OUT/o"
t 0 ls-wide "$B" ls -l "$L" -o wide
ok ls-wide-has-created eval "grep -q '^cli-e2e-one .* True .* [0-9-]*T[0-9:]*Z ' '$OUT/o'"
t 0 status-table "$B" status cli-e2e-one
ok status-table-ready eval "grep -q '^cli-e2e-one .* True ' '$OUT/o'"
t 0 get-several-json "$B" get cli-e2e-one "$two" -o json
ok get-several-is-a-list py 'd["kind"] == "List" and sorted(i["metadata"]["name"] for i in d["items"]) == sorted(["cli-e2e-one", "'"$two"'"])'
t 3 get-missing "$B" get cli-e2e-nope
ok get-missing-says-which has_err 'claim cli-e2e-nope not found in namespace default'
t 3 get-missing-among "$B" get cli-e2e-one cli-e2e-nope
ok get-missing-among-prints-the-other has_out 'cli-e2e-one'
t 0 ls-json "$B" ls -l "$L" -o json
ok ls-json-lists-ours py 'sorted(i["metadata"]["name"] for i in d["items"]) == sorted(["cli-e2e-one", "'"$two"'"])'
t 0 ls-selector "$B" ls -l "$L,role=first" -o name
ok ls-selector-filters out_is sandboxclaim/cli-e2e-one
t 0 ls-all-namespaces "$B" ls -A -l "$L" -o json
ok ls-all-namespaces-json py 'all(i["metadata"]["namespace"] == "default" for i in d["items"]) and len(d["items"]) == 2'
t 0 ls-all-namespaces-table "$B" ls -A -l "$L"
ok ls-all-namespaces-table-has-column eval "head -1 '$OUT/o' | grep -q '^NAMESPACE'"
t 0 ls-namespace-flag "$B" -n default ls -l "$L" -o name
ok ls-namespace-flag-two eval '[ "$(grep -c . "$OUT/o")" = 2 ]'
t 3 create-missing-template "$B" create cli-e2e-no-such-template --label "$L"
ok create-missing-template-says-which has_err 'template cli-e2e-no-such-template'
ok create-missing-template-leaves-nothing wait_ours 2
t 1 create-name-taken "$B" create "$TPL" --label "$L" --name cli-e2e-one
ok create-name-taken-hint has_err 'pick another --name'

# --- exec ----------------------------------------------------------------------
t 7 exec-exit-code "$B" exec cli-e2e-one -- sh -c 'echo to-out; echo to-err >&2; exit 7'
ok exec-stdout out_is to-out
ok exec-stderr eval "[ \"\$(cat '$OUT/e')\" = to-err ]"
t 0 exec-arguments-kept "$B" exec cli-e2e-one -- printf '%s|' "it's" "two  spaces" '$HOME' ''
ok exec-arguments-exact out_is "it's|two  spaces|\$HOME||"
t 3 exec-missing-claim "$B" exec cli-e2e-nope -- true
ok exec-missing-claim-says-which has_err 'claim cli-e2e-nope in namespace default'
t 4 exec-timeout "$B" exec cli-e2e-one --timeout 1s -- sleep 20
ok exec-timeout-hint has_err 'raise --timeout'
t 0 exec-verbose "$B" -v=2 exec cli-e2e-one -- true
ok exec-verbose-logs has_err '^agentsandbox: debug '
ok exec-verbose-no-key eval "! grep -q 'BEGIN\|PRIVATE\|client-key' '$OUT/e'"
# the router through the apiserver's port-forward from inside the tool,
# with no kubectl on PATH
t 0 exec-native "env" PATH=/nonexistent "$B" --connect native exec cli-e2e-one -- echo native
ok exec-native-output out_is native
if [ -n "${ASB_ROUTER_PORT:-}" ]; then
    t 0 exec-direct "$B" --connect "direct=http://127.0.0.1:$ASB_ROUTER_PORT" exec cli-e2e-one -- echo direct
    ok exec-direct-output out_is direct
fi

# --- cp and cat ----------------------------------------------------------------
head -c 1048577 /dev/urandom >"$OUT/up.bin"
t 0 cp-up "$B" cp "$OUT/up.bin" cli-e2e-one:dir/up.bin
t 0 cp-down "$B" cp cli-e2e-one:dir/up.bin "$OUT/down.bin"
ok cp-round-trip-identical cmp -s "$OUT/up.bin" "$OUT/down.bin"
mkdir -p "$OUT/into"
t 0 cp-down-into-dir "$B" cp cli-e2e-one:dir/up.bin "$OUT/into"
ok cp-into-dir-identical cmp -s "$OUT/up.bin" "$OUT/into/up.bin"
t 0 cp-down-stdout "$B" cp cli-e2e-one:dir/up.bin -
ok cp-stdout-identical cmp -s "$OUT/up.bin" "$OUT/o"
t 3 cp-down-missing "$B" cp cli-e2e-one:dir/nope.bin "$OUT/into"
ok cp-down-missing-leaves-nothing eval '[ "$(ls "$OUT/into")" = up.bin ]'
ok cp-down-missing-hint has_err 'no such file'
t 3 cp-up-missing-local "$B" cp "$OUT/nope" cli-e2e-one:x
t 2 cp-up-directory "$B" cp "$OUT/into" cli-e2e-one:x
t 0 cat "$B" cat cli-e2e-one dir/up.bin
ok cat-identical cmp -s "$OUT/up.bin" "$OUT/o"
"$B" exec cli-e2e-one -- sh -c 'printf a > a.txt; printf b > b.txt' >/dev/null 2>&1
t 0 cat-several "$B" cat cli-e2e-one a.txt b.txt
ok cat-several-in-order out_is ab
t 3 cat-missing "$B" cat cli-e2e-one a.txt nope.txt b.txt
ok cat-missing-goes-on out_is ab
ok cat-missing-says-which has_err 'cli-e2e-one:nope.txt'

# --- cp -r, ls-files, stat, progress ------------------------------------------------
mkdir -p "$OUT/tree/sub/deeper"
head -c 104857600 /dev/urandom >"$OUT/tree/sub/big.bin" # 100 MiB
printf 'top\n' >"$OUT/tree/top.txt"
printf 'spaced\n' >"$OUT/tree/sub/deeper/with space.txt"
t 2 cp-dir-without-r "$B" cp "$OUT/tree" cli-e2e-one:tree
ok cp-dir-without-r-hint has_err 'add -r'
t 0 cp-r-up "$B" cp -r "$OUT/tree" cli-e2e-one:tree
ok cp-r-up-silent-when-piped eval '[ ! -s "$OUT/e" ]'
t 0 ls-files-json "$B" ls-files cli-e2e-one tree/sub -o json
ok ls-files-json-entries py 'sorted((e["name"], e["type"]) for e in d) == [("big.bin", "file"), ("deeper", "directory")] and [e["size"] for e in d if e["name"] == "big.bin"] == [104857600]'
t 0 ls-files-name "$B" ls-files cli-e2e-one tree -o name
ok ls-files-name-lists eval '[ "$(sort "$OUT/o" | tr "\n" " ")" = "sub/ top.txt " ]'
t 0 stat-json "$B" stat cli-e2e-one "tree/sub/deeper/with space.txt" -o json
ok stat-json-object py 'd["name"] == "with space.txt" and d["type"] == "file" and d["size"] == 7 and d["mod_time"] > 0'
t 3 stat-missing "$B" stat cli-e2e-one tree/nope
ok stat-missing-hint has_err 'ls-files cli-e2e-one tree'
t 0 cp-r-down "$B" cp -r cli-e2e-one:tree "$OUT/back"
ok cp-r-round-trip-identical diff -r "$OUT/tree" "$OUT/back"
# A progress bar on a terminal (script(1) gives a pseudo-terminal), with
# bytes, rate and the total; none when stderr is piped (checked above).
script -q -e -c "'$B' cp -r cli-e2e-one:tree/sub '$OUT/back2'" "$OUT/typescript" >/dev/null 2>&1
ok cp-progress-on-a-terminal grep -q 'big.bin .*100.0 MiB / 100.0 MiB .*/s' "$OUT/typescript"
ok cp-progress-copy-identical cmp -s "$OUT/tree/sub/big.bin" "$OUT/back2/big.bin"
rm -rf "$OUT/tree" "$OUT/back" "$OUT/back2"

# --- names from a hostile sandbox: escaped, never raw on a terminal -----------------
# A file named with an OSC title sequence, BEL, a colour CSI, a UTF-8 C1
# CSI (U+009B) and a bidi override (U+202E). Plain output shows \xHH and
# \uHHHH escapes; -o json keeps the exact name, JSON-escaped.
evil=$(printf 'evil\033]0;pwned\007\033[31mred\302\233x\342\200\256')
raw_free() { ! LC_ALL=C grep -q "$(printf '\033\|\007\|\302\233\|\342\200\256')" "$@"; }
t 0 hostile-file-made "$B" exec cli-e2e-one -- sh -c 'mkdir -p hostile && cd hostile && printf x > "$1" && printf y > plain' sh "$evil"
t 0 hostile-ls-files "$B" ls-files cli-e2e-one hostile
ok hostile-ls-files-no-raw-controls raw_free "$OUT/o" "$OUT/e"
ok hostile-ls-files-escaped has_out 'evil\\x1b]0;pwned\\x07\\x1b\[31mred\\u009bx\\u202e$'
t 0 hostile-ls-files-name "$B" ls-files cli-e2e-one hostile -o name
ok hostile-ls-files-name-no-raw-controls raw_free "$OUT/o"
t 0 hostile-ls-files-json "$B" ls-files cli-e2e-one hostile -o json
ok hostile-ls-files-json-no-raw-controls raw_free "$OUT/o"
ok hostile-ls-files-json-exact-name py '"evil\x1b]0;pwned\x07\x1b[31mred\x9bx\u202e" in [e["name"] for e in d]'
t 0 hostile-stat "$B" stat cli-e2e-one "hostile/$evil"
ok hostile-stat-no-raw-controls raw_free "$OUT/o"
# the library refuses a path with control bytes (exit 2, nothing sent);
# the message quotes it escaped
t 2 hostile-cat-refused "$B" cat cli-e2e-one "hostile/$evil"
ok hostile-error-no-raw-controls raw_free "$OUT/e"
ok hostile-error-escaped has_err 'evil\\x1b'
# cp -r skips the name it cannot ask for (exit 1) and copies the rest; on
# a terminal the warning is escaped too
script -q -e -c "'$B' cp -r cli-e2e-one:hostile '$OUT/hostile'" "$OUT/typescript" >/dev/null 2>&1
ok hostile-cp-r-exit-1 eval "grep -q 'COMMAND_EXIT_CODE=\"1\"' '$OUT/typescript'"
ok hostile-cp-r-skip-escaped grep -q 'skipping the entry "evil\\x1b\]0;pwned.*control characters' "$OUT/typescript"
ok hostile-cp-r-no-raw-title eval "! LC_ALL=C grep -q \"\$(printf '\\033]0;')\" '$OUT/typescript'"
ok hostile-cp-r-copies-the-rest eval '[ "$(cat "$OUT/hostile/plain")" = y ]'

# --- rm --------------------------------------------------------------------------
t 0 create-third "$B" create "$TPL" --label "$L" --label role=third --name cli-e2e-three
t 3 rm-several "$B" rm cli-e2e-one cli-e2e-nope
ok rm-several-prints-deleted has_out 'sandboxclaim "cli-e2e-one" deleted'
ok rm-several-names-missing has_err 'claim cli-e2e-nope not found'
t 0 rm-selector "$B" rm -l "$L,role=third" -o name
ok rm-selector-prints out_is sandboxclaim/cli-e2e-three
t 0 rm-all "$B" rm --all
ok rm-all-prints has_out "sandboxclaim \"$two\" deleted"
ok rm-left-none wait_ours 0
t 3 exec-after-rm "$B" exec cli-e2e-one -- true

# --- run -------------------------------------------------------------------------
t 5 run-exit-code "$B" run "$TPL" --label "$L" -- sh -c 'echo ran; exit 5'
ok run-output out_is ran
ok run-left-none wait_ours 0
t 0 run-ok "$B" run "$TPL" --label "$L" --name cli-e2e-run -- echo fine
ok run-ok-output out_is fine
ok run-ok-left-none wait_ours 0
# Ctrl-C while create waits, and SIGINT and SIGTERM while the command runs:
# 130, and the claim is gone.
for sig in INT TERM; do
    for phase in create exec; do
        "$B" run "$TPL" --label "$L" --name "cli-e2e-sig-$phase" -- sleep 60 >"$OUT/o" 2>"$OUT/e" &
        pid=$!
        for i in $(seq 1 300); do
            if [ "$phase" = create ]; then [ "$(ours)" = 1 ] && break
            else "$B" status "cli-e2e-sig-$phase" 2>/dev/null | grep -q ' True ' && break; fi
            sleep 0.2
        done
        [ "$phase" = exec ] && sleep 1 # the command is under way
        kill -"$sig" "$pid"
        wait "$pid"
        rc=$?
        ok "run-sig$sig-during-$phase-exit-130" eval "[ $rc = 130 ]"
        ok "run-sig$sig-during-$phase-left-none" wait_ours 0
    done
done

finish "test-cli (end to end)"
