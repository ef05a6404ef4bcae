#!/usr/bin/env python3
"""Checks that agentsandbox.h documents what it declares.

1. Every public declaration (a line starting with ASB_API between the
   opening comment and the end of the declarations) has a doc comment: a
   /* ... */ comment ending right above it, or right above the run of
   declarations it belongs to (declarations on consecutive lines, no blank
   line between, share the comment above the first). The comment stands
   on lines of its own, says something (four words at least), and for a
   call returning asb_result names its errors ("Errors:" or an ASB_ERR_
   code).
2. Every log record id the implementation sends (asb__log(..., "id", ...))
   is in the CONVENTIONS list of ids, and every listed id is sent.
3. Every asb_* / ASB_* name the opening comment or the README mentions
   exists in the header (a renamed function leaves no stale name in the
   docs).
4. The table of contents lists every implementation banner
   (`/* >>name ===`) as ">>name", lists no banner that does not exist, and
   every other "quoted" search target it names occurs in the header.

Each failure names the declaration or banner and its line.
Usage: tools/check_docs.py [agentsandbox.h]
"""
import os
import re
import sys

path = sys.argv[1] if len(sys.argv) > 1 else "agentsandbox.h"
lines = open(path, encoding="utf-8").read().split("\n")
failures = []

# --- 1. doc comments ---------------------------------------------------------
opening_end = next(i for i, l in enumerate(lines) if l.strip() == "*/")
decl_end = next(i for i, l in enumerate(lines) if l.startswith("#endif /* AGENTSANDBOX_H */"))
count = 0
i = opening_end + 1
while i < decl_end:
    if not lines[i].startswith("ASB_API"):
        i += 1
        continue
    # the whole declaration, up to its ';'
    j = i
    while ";" not in lines[j]:
        j += 1
    text = " ".join(l.strip() for l in lines[i:j + 1])
    m = re.search(r"\(?\*?\s*(asb_\w+)\s*\(", text)
    name = m.group(1) if m else text
    count += 1
    # walk up over the run of declarations this one belongs to
    k = i - 1
    while k > opening_end:
        s = lines[k].rstrip()
        if s.startswith("#define"):
            k -= 1  # a constant the comment above also covers
            continue
        if s.endswith("*/"):
            break  # documented
        if s == "" or s.startswith("#") or s.startswith("}") or s.startswith("typedef") \
                or s.endswith("{"):
            k = -1
            break
        k -= 1  # a line of an earlier declaration in the same run
    if k <= opening_end:
        failures.append("%s:%d: %s has no doc comment: put a /* ... */ comment right above "
                        "it (ownership, defaults, thread safety, errors; see CONVENTIONS)"
                        % (path, i + 1, name))
        i = j + 1
        continue
    # the comment found: it must stand on lines of its own (a trailing
    # /* ... */ of the line above documents that line) and say something
    e = k
    while e > opening_end and "/*" not in lines[e]:
        e -= 1
    before = lines[e][:lines[e].index("/*")] if "/*" in lines[e] else "?"
    comment = " ".join(l.strip() for l in lines[e:k + 1])
    comment = comment.replace("/*", " ").replace("*/", " ")
    if before.strip():
        failures.append("%s:%d: %s has no doc comment of its own: the comment above it "
                        "(line %d) ends a line of code" % (path, i + 1, name, e + 1))
    elif len(re.findall(r"[A-Za-z_]\w*", comment)) < 4:
        failures.append("%s:%d: %s's doc comment (line %d) says nearly nothing: what does "
                        "the call do?" % (path, i + 1, name, e + 1))
    elif re.match(r"ASB_API\s+asb_result\b", text) and "Errors" not in comment \
            and "ASB_ERR_" not in comment:
        failures.append("%s:%d: %s returns asb_result but its doc comment (line %d) names "
                        "no error: add \"Errors:\" (see CONVENTIONS)" % (path, i + 1, name, e + 1))
    i = j + 1

# --- 2. log record ids --------------------------------------------------------
text = "\n".join(lines)
sent = {}
for m in re.finditer(r'asb__log\([^;]*?ASB_LOG_[A-Z]+,\s*"([a-z0-9_.]+)"', text, re.S):
    sent.setdefault(m.group(1), text.count("\n", 0, m.start()) + 1)
log_start = next(i for i, l in enumerate(lines) if l.strip().startswith("Logging. Nothing is printed"))
log_end = next(i for i in range(log_start, opening_end) if lines[i].strip().startswith("Records never carry"))
listed_ids = {m.group(1) for l in lines[log_start:log_end]
              for m in [re.match(r"     ([a-z0-9_]+\.[a-z0-9_.]+)\s", l)] if m}
for rid, n in sorted(sent.items(), key=lambda x: x[1]):
    if rid not in listed_ids:
        failures.append('%s:%d: the log record id "%s" is not in the list under "Logging." in '
                        'CONVENTIONS (line %d): add it with its level and what it says'
                        % (path, n, rid, log_start + 1))
for rid in sorted(listed_ids - set(sent)):
    failures.append('%s:%d: CONVENTIONS lists the log record id "%s", which nothing sends'
                    % (path, log_start + 1, rid))

# --- 3. names in the docs exist ----------------------------------------------
code = "\n".join(lines[opening_end + 1:])
known = set(re.findall(r"\b(?:asb|ASB)_\w+", code))
readme_path = os.path.join(os.path.dirname(os.path.abspath(path)), "README.md")
docs = [("the opening comment", "\n".join(lines[:opening_end + 1]), path)]
if os.path.exists(readme_path):
    docs.append(("README.md", open(readme_path, encoding="utf-8").read(), readme_path))
for what, text_, where in docs:
    for m in re.finditer(r"\b(?:asb|ASB)_\w+", text_):
        name = m.group(0)
        if name.endswith("_") or name in known:
            continue  # a prefix (asb_json_get_*) or a real name
        known.add(name)  # report each once
        failures.append("%s:%d: %s names %s, which the header does not declare or define"
                        % (where, text_.count("\n", 0, m.start()) + 1, what, name))

# --- 4. table of contents ----------------------------------------------------
toc_start = next(i for i, l in enumerate(lines) if l.strip() == "TABLE OF CONTENTS")
toc_end = next(i for i in range(toc_start + 2, len(lines)) if lines[i].strip().startswith("====="))
toc = "\n".join(lines[toc_start:toc_end])
listed = set(re.findall(r'">>([^"]+)"', toc))
banners = {}
for n, l in enumerate(lines):
    m = re.match(r"/\* >>(.+?) ={3,}", l)
    if m:
        banners[m.group(1).strip()] = n + 1
for b, n in sorted(banners.items(), key=lambda x: x[1]):
    if b not in listed:
        failures.append('%s:%d: the banner ">>%s" is not in the TABLE OF CONTENTS (add '
                        '">>%s" to its "Implementation banners" entry)' % (path, n, b, b))
for b in sorted(listed - set(banners)):
    failures.append('%s:%d: the TABLE OF CONTENTS lists ">>%s", but no such banner exists'
                    % (path, toc_start + 1, b))
rest = "\n".join(lines[:toc_start] + lines[toc_end:])
for target in re.findall(r'"([^">][^"]*)"', toc):
    if target not in rest:
        failures.append('%s:%d: the TABLE OF CONTENTS says search "%s", which is nowhere '
                        'else in the header' % (path, toc_start + 1, target))

for f in failures:
    print("docs: " + f)
if failures:
    print("docs: %d problem(s)" % len(failures))
    sys.exit(1)
print("docs: %d public declarations documented; %d log record ids, all listed; %d banners, "
      "all in the table of contents" % (count, len(sent), len(banners)))
