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
stat=$(cat /proc/"$pid"/stat 2>/dev/null) || { echo "pod-relay: pod process $pid is gone" >&2; exit 1; }
# Field 22 counted after the ")" that closes the command name (which may hold spaces).
now=$(printf '%s\n' "${stat##*) }" | cut -d' ' -f20)
[ "$now" = "$start" ] || { echo "pod-relay: pid $pid is another process now" >&2; exit 1; }
[ "$(stat -L -c %i /proc/self/fd/3)" != "$(stat -L -c %i /proc/$$/ns/net)" ] ||
  { echo "pod-relay: pid $pid is in the host network namespace" >&2; exit 1; }
exec nsenter --net=/proc/self/fd/3 -- socat STDIO TCP:127.0.0.1:"$port"
