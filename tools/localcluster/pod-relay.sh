#!/bin/sh
# kwok runs this for every connection of a `kubectl port-forward` to a
# sandboxd pod (the PortForward the pod runner declares for it), with the
# connection on stdin/stdout:
#
#   pod-relay.sh PID STARTTIME PORT
#
# PID is the process that holds the pod's network namespace (the pod runner's
# `unshare --net` for that pod) and STARTTIME its kernel start time (field 22
# of /proc/PID/stat). The relay dials 127.0.0.1:PORT inside that namespace,
# where sandboxd listens, and never anything else.
#
# The namespace is opened first and the start time checked after, so a PID
# that was reused meanwhile is refused rather than entered; a namespace that is
# the host's own (the pod runner's unshare not yet done, or gone) is refused
# too, so a forward can never reach a host service on the same port.
set -eu
[ $# -eq 3 ] || { echo "usage: pod-relay.sh PID STARTTIME PORT" >&2; exit 2; }
pid=$1 start=$2 port=$3
case $pid$start$port in *[!0-9]*) echo "pod-relay: bad arguments" >&2; exit 2 ;; esac
exec 3</proc/"$pid"/ns/net || { echo "pod-relay: pod process $pid is gone" >&2; exit 1; }
# Shell builtins only until socat: this runs for every connection.
read -r stat </proc/"$pid"/stat || { echo "pod-relay: pod process $pid is gone" >&2; exit 1; }
# Field 22 is the 20th after the ")" that closes the command name (which may hold spaces).
set -f
# shellcheck disable=SC2086
set -- ${stat##*) }
[ "${20:-}" = "$start" ] || { echo "pod-relay: pid $pid is another process now" >&2; exit 1; }
! [ /proc/self/fd/3 -ef /proc/self/ns/net ] ||
  { echo "pod-relay: pid $pid is in the host network namespace" >&2; exit 1; }
exec nsenter --net=/proc/self/fd/3 -- socat STDIO TCP:127.0.0.1:"$port",nodelay
