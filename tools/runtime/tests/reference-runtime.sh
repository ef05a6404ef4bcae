#!/bin/sh
# Sets up the reference runtime, the Python web app agent-sandbox ships as
# examples/python-runtime-sandbox (FastAPI under uvicorn), for
# bench_runtime.py to measure ours against: its main.py from the
# agent-sandbox Go module of the release the local cluster pins, and the
# server packages its requirements.txt pins, from PyPI, in a venv.
# Nothing of it is committed. Usage: reference-runtime.sh DIR
set -eu
dir=$1
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck disable=SC1091
. "$here/../../localcluster/versions.env"
dir=$(mkdir -p "$dir" && cd "$dir" && pwd)
stamp=$dir/.ready-$AGENT_SANDBOX_V05
[ -f "$stamp" ] && exit 0
rm -rf "$dir"
mkdir -p "$dir/app"
mod=$(go mod download -json "sigs.k8s.io/agent-sandbox@$AGENT_SANDBOX_V05" |
      python3 -c 'import json,sys;print(json.load(sys.stdin)["Dir"])')
# Its base directory is the literal "/app" (the image's); here it is
# $dir/base, the only change made to it (the two places that name it).
mkdir -p "$dir/base"
sed -e "s|os.path.realpath(\"/app\")|os.path.realpath(\"$dir/base\")|" \
    -e "s|cwd=\"/app\"|cwd=\"$dir/base\"|" \
    "$mod/examples/python-runtime-sandbox/main.py" > "$dir/app/main.py"
[ "$(grep -c "$dir/base" "$dir/app/main.py")" = 2 ] || {
  echo "reference-runtime.sh: main.py no longer names /app where expected" >&2; exit 1; }
pins=$(grep -E '^(fastapi|uvicorn|python-multipart)==' "$mod/examples/python-runtime-sandbox/requirements.txt" |
       sed 's/ .*//' | tr '\n' ' ')
/usr/bin/python3 -m venv "$dir/venv"
# shellcheck disable=SC2086
"$dir/venv/bin/pip" install --quiet --disable-pip-version-check $pins
echo "$pins" > "$dir/pins.txt"
touch "$stamp"
