#!/usr/bin/env bash
# The CLI without a cluster: help, usage errors (exit 2, nothing sent),
# version, a missing kubeconfig and an apiserver that refuses the
# connection (exit 5), and -v logging that never shows the credential.
# Usage: offline.sh BIN
set -u
B=$(realpath "$1")
. "$(dirname "$0")/lib.sh"

t 0 help "$B" --help
ok help-lists-exit-codes has_out 'Exit codes'
ok help-lists-commands has_out 'run TEMPLATE -- CMD'
for sub in create get status ls rm exec cp cat ls-files stat run version completion; do
    t 0 "help-$sub" "$B" "$sub" --help
    ok "help-$sub-usage" has_out "Usage: agentsandbox"
    t 0 "help-word-$sub" "$B" help "$sub"
    ok "help-word-$sub-usage" has_out "Usage: agentsandbox"
done
t 2 no-command "$B"
ok no-command-prints-usage has_err 'Usage: agentsandbox'
t 2 unknown-command "$B" frob
ok unknown-command-named has_err 'unknown command "frob"'
t 2 unknown-flag "$B" ls --frob
ok unknown-flag-named has_err 'unknown flag --frob'
t 2 flag-without-value "$B" ls -n
t 2 bad-output "$B" ls -o yaml2
t 2 bad-duration "$B" create tpl --ttl 5x
ok bad-duration-explained has_err 'a duration is a positive number'
t 2 zero-duration "$B" exec c --timeout 0 -- true
t 2 bad-label "$B" create tpl --label novalue
ok bad-label-explained has_err 'expected KEY=VALUE'
t 2 exec-without-command "$B" exec claim
ok exec-without-command-explained has_err 'needs a command after --'
t 2 exec-without-claim "$B" exec -- true
t 2 run-without-command "$B" run tpl
t 2 create-without-template "$B" create
t 2 rm-without-names "$B" rm
t 2 rm-names-and-selector "$B" rm a -l x=y
t 2 cp-two-local "$B" cp a b
t 2 cp-missing-dst "$B" cp a
t 2 cat-without-path "$B" cat claim
t 2 bad-verbosity "$B" -v=x version

t 0 version "$B" version
ok version-names-library has_out "agentsandbox.h"
t 0 version-json "$B" version -o json
ok version-json-parses py 'd["cli"] and d["library"] and d["tls"]'

t 5 missing-kubeconfig "$B" --kubeconfig /nonexistent/kubeconfig ls
ok missing-kubeconfig-named has_err '/nonexistent/kubeconfig'
ok missing-kubeconfig-hint has_err 'hint:'

# An apiserver address nothing listens on: a port bound and closed.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
secret="cli-offline-secret-$RANDOM$RANDOM"
cat >"$OUT/kc" <<KC
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "http://127.0.0.1:$port"}
users:
- name: u
  user: {token: "$secret"}
contexts:
- name: x
  context: {cluster: c, user: u, namespace: team-a}
current-context: x
KC
t 5 refused-connection "$B" --kubeconfig "$OUT/kc" -v=2 ls
ok refused-says-what has_err 'cannot list claims\|cannot reach the Kubernetes API'
ok refused-hint has_err 'kubectl cluster-info'
ok refused-logged-at-v2 has_err 'agentsandbox: \(debug\|info\|warn\|error\) '
ok refused-no-secret-on-stderr eval "! grep -q '$secret' '$OUT/e' '$OUT/o'"
t 5 refused-get "$B" --kubeconfig "$OUT/kc" get some-claim
ok refused-get-no-secret eval "! grep -q '$secret' '$OUT/e'"
t 2 bad-connect-mode "$B" --kubeconfig "$OUT/kc" --connect carrier-pigeon exec c -- true
ok bad-connect-mode-explained has_err 'the modes are tunnel'
t 2 bad-namespace "$B" --kubeconfig "$OUT/kc" -n Bad_NS get c
ok bad-namespace-named has_err 'Bad_NS'
t 2 bad-claim-name "$B" --kubeconfig "$OUT/kc" get Not_A_Name
ok bad-claim-name-named has_err 'Not_A_Name'
t 2 bad-create-name "$B" --kubeconfig "$OUT/kc" create tpl --name UPPER

# Completion: bash runs the function; the zsh script is the same function
# behind zsh's bashcompinit (no zsh on the test machine to run it).
t 0 completion-bash "$B" completion bash
cp "$OUT/o" "$OUT/comp.bash"
ok completion-commands eval "[ \"\$(bash -c 'source \"$OUT/comp.bash\"; COMP_WORDS=(agentsandbox ex); COMP_CWORD=1; _agentsandbox; echo \"\${COMPREPLY[*]}\"')\" = exec ]"
ok completion-output-formats eval "[ \"\$(bash -c 'source \"$OUT/comp.bash\"; COMP_WORDS=(agentsandbox ls -o j); COMP_CWORD=3; _agentsandbox; echo \"\${COMPREPLY[*]}\"')\" = json ]"
ok completion-flags eval "bash -c 'source \"$OUT/comp.bash\"; COMP_WORDS=(agentsandbox cp --rec); COMP_CWORD=2; _agentsandbox; echo \"\${COMPREPLY[*]}\"' | grep -qx -- --recursive"
t 0 completion-zsh "$B" completion zsh
ok completion-zsh-uses-bashcompinit has_out 'bashcompinit'
t 2 completion-unknown-shell "$B" completion fish

finish "test-cli (offline)"
