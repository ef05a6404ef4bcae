#!/usr/bin/env bash
# The CLI on agent-sandbox v0.5 (v1beta1 claims from a warm pool):
# create --warm-pool, --env into the sandbox (a template that allows it,
# and one that refuses it), the errors a v0.4 habit meets, run.
# On the sandboxd pool: exec streams output as it comes, -i forwards
# stdin, -t gives a terminal typed into through tmux (its size, a
# resize), Ctrl-C ends the process; -i/-t on the legacy runtime fail
# clearly.
# Usage: KUBECONFIG=... e2e-v1beta1.sh BIN   (the local cluster's
#        python-sandbox-template, python-sandbox-warmpool and
#        sandboxd-warmpool)
set -u
B=$(realpath "$1")
. "$(dirname "$0")/lib.sh"
L=suite=cli-e2e-v1beta1
cleanup() {
    "$B" rm -l "$L" >/dev/null 2>&1
    kubectl delete sandboxwarmpool cli-open-pool --ignore-not-found >/dev/null 2>&1
    kubectl delete sandboxtemplate cli-open --ignore-not-found >/dev/null 2>&1
    rm -rf "$OUT"
}
trap cleanup EXIT
ours() { "$B" ls -l "$L" -o name | grep -c . ; }
wait_ours() {
    local i
    for i in $(seq 1 300); do [ "$(ours)" = "$1" ] && return 0; sleep 0.2; done
    return 1
}

t 0 create-from-pool "$B" create --warm-pool python-sandbox-warmpool --label "$L" -o json
ok create-from-pool-json py 'd["claim"].startswith("sandbox-claim-") and d["sandbox"]'
claim=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["claim"])' "$OUT/o")
t 0 get-pool-claim "$B" get "$claim" -o json
ok get-pool-claim-names-the-pool py 'd["spec"]["warmPoolRef"]["name"] == "python-sandbox-warmpool"'
t 0 exec-pool-claim "$B" exec "$claim" -- echo pooled
ok exec-pool-claim-output out_is pooled
t 2 create-template-on-v1beta1 "$B" create python-sandbox-template --label "$L"
ok create-template-on-v1beta1-hint has_err 'use --warm-pool'
t 3 create-missing-pool "$B" create --warm-pool cli-no-such-pool --label "$L"
ok create-missing-pool-named has_err 'warm pool cli-no-such-pool'
t 1 env-refused-by-template "$B" create --warm-pool python-sandbox-warmpool --label "$L" --env A=b
ok env-refused-reason has_err 'EnvVarsInjectionRejected'
ok env-refused-leaves-one wait_ours 1

# A template that allows injection, and a pool of it.
kubectl get sandboxtemplate python-sandbox-template -o json | python3 -c '
import json, sys
d = json.load(sys.stdin)
m = d["metadata"]
d["metadata"] = {"name": "cli-open", "namespace": m["namespace"]}
d["spec"]["envVarsInjectionPolicy"] = "Allowed"
d.pop("status", None)
print(json.dumps(d))' | kubectl create -f - >/dev/null
kubectl create -f - >/dev/null <<'POOL'
{"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxWarmPool",
 "metadata": {"name": "cli-open-pool", "namespace": "default"},
 "spec": {"replicas": 0, "sandboxTemplateRef": {"name": "cli-open"}}}
POOL
# The local cluster's pods do not pass container env to the runtime's
# commands, so the Sandbox object is where the variable is checked.
t 0 create-with-env "$B" create --warm-pool cli-open-pool --label "$L" --env 'CLI_GREETING=hello there' -o json
sb=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sandbox"])' "$OUT/o")
kubectl get sandbox "$sb" -o json >"$OUT/o"
ok create-with-env-on-the-sandbox py '{"name": "CLI_GREETING", "value": "hello there"} in [e for c in d["spec"]["podTemplate"]["spec"]["containers"] for e in c.get("env", [])]'
# --env KEY: the value from the tool's environment, never in its argv
t 0 create-with-env-from-environment env 'CLI_SECRET=from the environment' "$B" create --warm-pool cli-open-pool --label "$L" --env CLI_SECRET -o json
sb=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sandbox"])' "$OUT/o")
kubectl get sandbox "$sb" -o json >"$OUT/o"
ok create-with-env-from-environment-on-the-sandbox py '{"name": "CLI_SECRET", "value": "from the environment"} in [e for c in d["spec"]["podTemplate"]["spec"]["containers"] for e in c.get("env", [])]'
t 4 run-from-pool "$B" run --warm-pool cli-open-pool --label "$L" -- sh -c 'echo ran; exit 4'
ok run-from-pool-output out_is ran
# --- exec on sandboxd ------------------------------------------------------------
t 2 exec-it-on-legacy "$B" exec -it "$claim" -- sh
ok exec-it-on-legacy-says-why has_err 'runs the legacy runtime'
t 2 exec-i-on-legacy "$B" exec -i "$claim" -- cat
t 0 sandboxd-claim "$B" create --warm-pool sandboxd-warmpool --label "$L"
sd=$(cat "$OUT/o")
t 7 sandboxd-exec-exit-code "$B" exec "$sd" -- sh -c 'echo to-out; echo to-err >&2; exit 7'
ok sandboxd-exec-stdout out_is to-out
ok sandboxd-exec-stderr eval "[ \"\$(cat '$OUT/e')\" = to-err ]"
t 0 sandboxd-exec-arguments-kept "$B" exec "$sd" -- printf '%s|' "it's" "two  spaces" '$HOME' ''
ok sandboxd-exec-arguments-exact out_is "it's|two  spaces|\$HOME||"
# output that cannot be written here (stdout on /dev/full): exit 1 and
# said once, not the command's 0 (R58)
t 1 sandboxd-exec-output-lost sh -c 'exec "$@" >/dev/full' sh "$B" exec "$sd" -- echo lost
ok sandboxd-exec-output-lost-says-so has_err 'its output could not be written here (No space left on device)'
ok sandboxd-exec-output-lost-said-once eval "[ \"\$(grep -c 'could not be written' '$OUT/e')\" = 1 ]"
# Output as it comes: the first line is there while the command still
# waits for a file only a second exec makes (order, not timing).
"$B" exec "$sd" -- sh -c 'rm -f go; echo first; while [ ! -e go ]; do sleep 0.1; done; echo second' \
    >"$OUT/stream" 2>&1 & spid=$!
for i in $(seq 1 600); do grep -q first "$OUT/stream" && break; sleep 0.1; done
ok sandboxd-exec-first-line-while-running eval "grep -q first '$OUT/stream' && kill -0 $spid && ! grep -q second '$OUT/stream'"
"$B" exec "$sd" -- touch go >/dev/null 2>&1
wait $spid
ok sandboxd-exec-streamed-all eval "[ \"\$(cat '$OUT/stream')\" = \"\$(printf 'first\nsecond')\" ]"
# -i: stdin reaches the process, EOF ends it; without -i no stdin goes
# (cat ends at once although this stdin never ends)
printf 'line one\nline two\n' >"$OUT/in"
t 0 sandboxd-exec-stdin "$B" exec -i "$sd" -- cat <"$OUT/in"
ok sandboxd-exec-stdin-echoed eval "cmp -s '$OUT/in' '$OUT/o'"
# -i, and the process ends while a stdin write waits for sandboxd (the
# pipe full: a child holds it open and never reads): the tool exits with
# the command's code and all its output once it ended, not after that
# write's 30 s (R64). The write blocks within the 3 s the command lasts
# (20 MB offered). The bound only tells the two apart: the old code
# could not exit before the write's 30 s read timeout, the new one has
# no wait of its own left; 28 s leaves a loaded machine 25 s of slack.
start=$SECONDS
t 5 sandboxd-exec-stdin-held-by-a-child sh -c 'head -c 20000000 /dev/zero | "$@"' sh \
    timeout 120 "$B" exec -i "$sd" -- sh -c 'exec 3<&0; sleep 40 <&3 >/dev/null 2>&1 & echo started; sleep 3; echo done; exit 5'
took=$((SECONDS - start))
ok sandboxd-exec-stdin-held-by-a-child-output eval "[ \"\$(cat '$OUT/o')\" = \"\$(printf 'started\ndone')\" ]"
ok sandboxd-exec-stdin-held-by-a-child-at-once eval "[ $took -lt 28 ] || { echo \"took $took s\"; false; }"
ok sandboxd-exec-stdin-held-by-a-child-nothing-said eval "[ ! -s '$OUT/e' ]"
mkfifo "$OUT/never"
exec 7<>"$OUT/never" # a stdin that never ends
ok sandboxd-exec-no-stdin-without-i eval "[ \"\$(timeout 120 '$B' exec '$sd' -- sh -c 'cat; echo eof' <'$OUT/never')\" = eof ]"
exec 7>&-
# Ctrl-C (SIGINT) without -t: the process is ended, exit 130
"$B" exec "$sd" -- sleep 600 >/dev/null 2>&1 & spid=$!
sleep 2
kill -INT $spid
wait $spid
ok sandboxd-exec-sigint-130 eval "[ $? = 130 ]"
# -it typed into through tmux: a prompt, the terminal's size, a resize
# (SIGWINCH), the exit code
TM="tmux -L cli-e2e-$$ -f /dev/null"
$TM new-session -d -x 100 -y 30 "'$B' exec -it '$sd' -- sh; echo \"EXITED=\$?\" >'$OUT/tmux.rc'; sleep 600"
tmux_has() { # waits (up to 60 s) for a line on the tmux screen; shows it if none
    local i
    for i in $(seq 1 300); do $TM capture-pane -p | grep -q -- "$1" && return 0; sleep 0.2; done
    $TM capture-pane -p | grep -v '^$' | sed 's/^/  screen: /'
    return 1
}
# the shell's prompt first: keys typed before the remote terminal exists
# are echoed twice and the output can follow the prompt on its line
ok sandboxd-exec-it-prompt tmux_has '[#$] *$'
$TM send-keys 'echo typed-$((6*7))' Enter
ok sandboxd-exec-it-typed tmux_has 'typed-42'
$TM send-keys 'stty size' Enter
ok sandboxd-exec-it-size tmux_has '^30 100'
$TM resize-window -x 120 -y 40
sleep 1
$TM send-keys 'stty size' Enter
ok sandboxd-exec-it-resized tmux_has '^40 120'
$TM send-keys 'exit 3' Enter
for i in $(seq 1 300); do [ -s "$OUT/tmux.rc" ] && break; sleep 0.2; done
ok sandboxd-exec-it-exit-code eval "[ \"\$(cat '$OUT/tmux.rc')\" = EXITED=3 ]"
$TM kill-server 2>/dev/null
t 0 rm-pool-claims "$B" rm -l "$L"
ok rm-left-none wait_ours 0

finish "test-cli (end to end, v1beta1)"
