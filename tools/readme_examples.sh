#!/bin/sh
# Extracts every ```c block from a Markdown file and compiles it against the
# header (as C99, and as C++11), so the README never shows code that does not
# build. A block whose first line is `// run` is also executed and must exit 0.
# Usage: tools/readme_examples.sh README.md OUTDIR
set -eu
md=$1
out=$2
top=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
rm -f "$out"/example_*.c
awk -v dir="$out" '
  /^```c[ \t]*$/ { n++; f = sprintf("%s/example_%d.c", dir, n); inblock = 1; next }
  /^```/ && inblock { inblock = 0; close(f); next }
  inblock { print > f }
' "$md"
count=0
for f in "$out"/example_*.c; do
  [ -e "$f" ] || continue
  count=$((count + 1))
  gcc -std=c99 -Wall -Wextra -Wpedantic -Werror -I"$top" "$f" -o "${f%.c}" \
      -lmbedtls -lmbedx509 -lmbedcrypto -lm -pthread || { echo "readme: $f does not compile (C99)"; exit 1; }
  g++ -x c++ -std=c++11 -Wall -Wextra -Werror -I"$top" "$f" -o "${f%.c}.cxx" \
      -lmbedtls -lmbedx509 -lmbedcrypto -pthread || { echo "readme: $f does not compile (C++11)"; exit 1; }
  if head -n 1 "$f" | grep -q '^// run'; then
    "${f%.c}" > "${f%.c}.out" || { echo "readme: $f failed when run"; exit 1; }
  fi
done
[ "$count" -gt 0 ] || { echo "readme: no C examples found in $md"; exit 1; }
echo "readme: $count C example(s) compile as C99 and C++11"
