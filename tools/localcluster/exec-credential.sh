#!/bin/sh
# Exec credential plugin for the local cluster's exec.kubeconfig user.
#   exec-credential.sh --token-file FILE
# Prints an ExecCredential (same apiVersion as KUBERNETES_EXEC_INFO asked for)
# carrying the token in FILE, valid for an hour. Each call appends one line
# (time and KUBERNETES_EXEC_INFO) to $LC_EXEC_LOG when that is set, so tests
# can count how often a client ran the plugin.
set -eu
[ "${1:-}" = "--token-file" ] && [ -n "${2:-}" ] || { echo "usage: $0 --token-file FILE" >&2; exit 2; }
token=$(cat "$2")
info=${KUBERNETES_EXEC_INFO:-}
api=client.authentication.k8s.io/v1
case $info in *client.authentication.k8s.io/v1beta1*) api=client.authentication.k8s.io/v1beta1 ;; esac
if [ -n "${LC_EXEC_LOG:-}" ]; then
  printf '%s %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$info" >> "$LC_EXEC_LOG"
fi
exp=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)
printf '{"apiVersion":"%s","kind":"ExecCredential","status":{"token":"%s","expirationTimestamp":"%s"}}\n' \
  "$api" "$token" "$exp"
