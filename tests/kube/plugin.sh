#!/bin/sh
# A scripted exec credential plugin for the tests. Its behaviour comes from
# PLUGIN_MODE (set through the kubeconfig's exec.env: `given` prints the
# token $PLUGIN_TOKEN, `certkey` the PEM files $PLUGIN_CERT and $PLUGIN_KEY
# as a client certificate and key); every run appends a
# line to $PLUGIN_LOG so tests can count runs. KUBERNETES_EXEC_INFO is
# copied to $PLUGIN_LOG.info for inspection, and the arguments (count, then
# one "[arg]" line each) to $PLUGIN_LOG.args.
# Mode cert prints the certificate and key $CERTS/<name>.{crt,key}, <name>
# read from $PLUGIN_LOG.cert, already expired (every call runs it again:
# a rotation per call); the name "token" prints a token only instead
# (tok-N, expired too), so a plugin can switch kinds. Mode closed closes
# its stdout and stderr and then waits on a child that sleeps (as a
# plugin waiting on a browser login would), its process group id (its
# own pid) first written to $PLUGIN_LOG.pgid. Mode fds lists its open descriptors ("N target"
# lines) in $PLUGIN_LOG.fds, then answers as mode token.
echo run >> "$PLUGIN_LOG"
printf '%s' "$KUBERNETES_EXEC_INFO" > "$PLUGIN_LOG.info"
{ echo "$#"; for a in "$@"; do printf '[%s]\n' "$a"; done; } > "$PLUGIN_LOG.args"
n=$(wc -l < "$PLUGIN_LOG" | tr -d ' ')
case "$PLUGIN_MODE" in
token)   printf '{"apiVersion":"%s","kind":"ExecCredential","status":{"token":"tok-%s"}}\n' "$API" "$n" ;;
expired) printf '{"apiVersion":"%s","kind":"ExecCredential","status":{"token":"tok-%s","expirationTimestamp":"2020-01-01T00:00:00Z"}}\n' "$API" "$n" ;;
future)  printf '{"apiVersion":"%s","kind":"ExecCredential","status":{"token":"tok-%s","expirationTimestamp":"2999-01-01T00:00:00Z"}}\n' "$API" "$n" ;;
fds)
  # listed by a child that redirects its own output: this shell's
  # descriptors as they are, no pipe of a $(...) or saved stdout among them
  sh -c 'exec > "$1"; find /proc/$PPID/fd -mindepth 1 -printf "%f %l\n"' sh "$PLUGIN_LOG.fds"
  printf '{"apiVersion":"%s","kind":"ExecCredential","status":{"token":"tok-%s"}}\n' "$API" "$n" ;;
cert)
  name=$(cat "$PLUGIN_LOG.cert")
  if [ "$name" = token ]; then
    printf '{"apiVersion":"%s","kind":"ExecCredential","status":{"token":"tok-%s","expirationTimestamp":"2020-01-01T00:00:00Z"}}\n' "$API" "$n"
    exit 0
  fi
  pem() { awk 'BEGIN { ORS = "" } { print $0 "\\n" }' "$1"; }
  printf '{"apiVersion":"%s","kind":"ExecCredential","status":{"clientCertificateData":"%s","clientKeyData":"%s","expirationTimestamp":"2020-01-01T00:00:00Z"}}\n' \
    "$API" "$(pem "$CERTS/$name.crt")" "$(pem "$CERTS/$name.key")" ;;
given)   printf '{"apiVersion":"%s","kind":"ExecCredential","status":{"token":"%s"}}\n' "$API" "$PLUGIN_TOKEN" ;;
certkey) printf '{"apiVersion":"%s","kind":"ExecCredential","status":{"clientCertificateData":"%s","clientKeyData":"%s"}}\n' \
           "$API" "$(awk '{printf "%s\\n", $0}' "$PLUGIN_CERT")" "$(awk '{printf "%s\\n", $0}' "$PLUGIN_KEY")" ;;
garbage) echo "this is not json" ;;
wrongapi) printf '{"apiVersion":"client.authentication.k8s.io/v1alpha1","kind":"ExecCredential","status":{"token":"x"}}\n' ;;
onlycert) printf '{"apiVersion":"%s","kind":"ExecCredential","status":{"clientCertificateData":"x"}}\n' "$API" ;;
fail)    echo "login required: run 'cloud auth login'" >&2; exit 3 ;;
hang)    sleep 30 ;;
closed)  echo $$ > "$PLUGIN_LOG.pgid.tmp" && mv "$PLUGIN_LOG.pgid.tmp" "$PLUGIN_LOG.pgid"
         exec 1>&- 2>&-
         sleep 300 &
         wait ;;
*)       echo "unknown PLUGIN_MODE" >&2; exit 9 ;;
esac
