#!/bin/bash
# Runs a command with the HTTP test peers up, then stops them whatever happens.
#
#   tests/http/with-peers.sh STATEDIR COMMAND [ARGS...]
#
# The command sees STATEDIR/peers.env exported (ASB_PEER_*) plus
# ASB_PEERS_JSON=STATEDIR/peers.json; its exit status is ours.
set -uo pipefail
state=${1:?usage: with-peers.sh STATEDIR COMMAND [ARGS...]}
shift
here=$(cd "$(dirname "$0")" && pwd)
trap 'python3 "$here/peers.py" stop "$state"' EXIT
trap 'exit 130' INT TERM
python3 "$here/peers.py" start "$state" >/dev/null || exit 1
set -a
# shellcheck disable=SC1091
. "$state/peers.env"
set +a
export ASB_PEERS_JSON="$state/peers.json"
"$@"
