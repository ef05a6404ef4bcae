#!/bin/sh
# Compiles every C example of a document against the header (as C99, and as
# C++11), so the docs never show code that does not build.
#   - Markdown: every ```c block. A block whose first line is `// run` is
#     also executed and must exit 0.
#   - agentsandbox.h: every complete program in the opening comment, i.e.
#     an indented block that starts with `//` or `#define
#     AGENTSANDBOX_IMPLEMENTATION` and ends with `}` at the same indent.
# With a third argument, the document's first example must be that program
# (its "../agentsandbox.h" read as "agentsandbox.h"): the quick start shown
# in the docs is the one make test runs against a real cluster.
# Usage: tools/readme_examples.sh FILE OUTDIR [PROGRAM]
set -eu
doc=$1
out=$2
same=${3:-}
top=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
rm -f "$out"/example_*
case "$doc" in
*.md)
  awk -v dir="$out" '
    /^```c[ \t]*$/ { n++; f = sprintf("%s/example_%d.c", dir, n); inblock = 1; next }
    /^```/ && inblock { inblock = 0; close(f); next }
    inblock { print > f }
  ' "$doc" ;;
*.h)
  # Only the opening comment (up to the first line that is just "*/").
  awk -v dir="$out" '
    /^\*\/[ \t]*$/ { exit }
    function indent(s) { match(s, /^ */); return RLENGTH }
    !inblock && prev_blank && /^ +(\/\/|#define AGENTSANDBOX_IMPLEMENTATION$)/ {
      inblock = 1; ind = indent($0); nl = 0
    }
    inblock {
      if ($0 != "" && indent($0) < ind) { inblock = 0 }   # prose: not a program
      else {
        line[++nl] = ($0 == "" ? "" : substr($0, ind + 1))
        if ($0 == sprintf("%" ind "s}", "")) {
          n++; f = sprintf("%s/example_%d.c", dir, n)
          for (i = 1; i <= nl; i++) print line[i] > f
          close(f); inblock = 0
        }
      }
    }
    { prev_blank = ($0 ~ /^[ \t]*$/) }
  ' "$doc" ;;
*) echo "readme: $doc is neither Markdown nor the header"; exit 1 ;;
esac
count=0
for f in "$out"/example_*.c; do
  [ -e "$f" ] || continue
  count=$((count + 1))
  gcc -std=c99 -Wall -Wextra -Wpedantic -Werror -I"$top" "$f" -o "${f%.c}" \
      -lmbedtls -lmbedx509 -lmbedcrypto -lm -pthread || { echo "readme: $f ($doc) does not compile (C99)"; exit 1; }
  g++ -x c++ -std=c++11 -Wall -Wextra -Werror -I"$top" "$f" -o "${f%.c}.cxx" \
      -lmbedtls -lmbedx509 -lmbedcrypto -pthread || { echo "readme: $f ($doc) does not compile (C++11)"; exit 1; }
  if head -n 1 "$f" | grep -q '^// run'; then
    "${f%.c}" > "${f%.c}.out" || { echo "readme: $f ($doc) failed when run"; exit 1; }
  fi
done
[ "$count" -gt 0 ] || { echo "readme: no C examples found in $doc"; exit 1; }
if [ -n "$same" ]; then
  sed 's|"\.\./agentsandbox\.h"|"agentsandbox.h"|' "$same" > "$out/same.c"
  diff -u "$out/same.c" "$out/example_1.c" > "$out/same.diff" ||
    { echo "readme: the first example of $doc is not $same:"; cat "$out/same.diff"; exit 1; }
fi
echo "readme: $count C example(s) in $doc compile as C99 and C++11${same:+; the first is $same}"
