#!/usr/bin/env python3
"""The YAML reader against PyYAML (BaseLoader: every scalar as text, plus merge keys).

For each input (the seed corpus, the kubeconfig corpus and whatever the
fuzzer collected): when ours parses, PyYAML must parse it to the same tree;
when PyYAML parses but ours refuses, our message must name one of the
features we refuse on purpose (tags, anchors where we do not read them,
a key both written before a merge and merged, excessive aliasing,
complex keys, duplicate keys, several documents, deep nesting) or PyYAML must have
silently accepted something YAML forbids; when both refuse, fine. Inputs
that are not UTF-8 are skipped (PyYAML cannot read them).

Usage: yaml_oracle_test.py DUMP_BINARY DIR...
"""
import json, os, re, subprocess, sys
import yaml

DUMP = sys.argv[1]
ON_PURPOSE = ("tags are not supported", "anchors and aliases are read only",
              "an anchor before a key on the same line", "a key written before a merge",
              "too much aliasing", "too many anchors", "complex keys", "duplicate key",
              "several documents", "too deep", "a key must fit on one line",
              "tab character in indentation", "directive")


class MergeLoader(yaml.BaseLoader):
    """BaseLoader (every scalar as text) plus merge keys, which kubectl's
    go-yaml applies and BaseLoader alone does not."""
    flatten_mapping = yaml.constructor.SafeConstructor.flatten_mapping

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            self.flatten_mapping(node)
        return yaml.constructor.BaseConstructor.construct_mapping(self, node, deep)


MergeLoader.add_implicit_resolver("tag:yaml.org,2002:merge", re.compile(r"^(?:<<)$"), ["<"])
passed = failed = skipped = 0


def pyyaml(text):
    try:
        docs = list(yaml.load_all(text, Loader=MergeLoader))
    except Exception as e:  # noqa: BLE001 - any PyYAML failure is a refusal
        return False, str(e).splitlines()[0] if str(e) else type(e).__name__
    if len(docs) > 1:
        return False, "several documents"
    return True, docs[0] if docs else ""


for d in sys.argv[2:]:
    if not os.path.isdir(d):
        continue
    for name in sorted(os.listdir(d)):
        path = os.path.join(d, name)
        raw = open(path, "rb").read()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            skipped += 1
            continue
        if "\t" in text:
            skipped += 1  # kubectl's go-yaml takes tabs as blanks; PyYAML refuses them
            continue
        if "\r" in text or "\x85" in text or "\u2028" in text or "\u2029" in text or "\ufeff" in text[1:]:
            skipped += 1  # line-break flavours PyYAML treats differently
            continue
        r = subprocess.run([DUMP, path], capture_output=True)
        ours_ok = r.returncode == 0
        py_ok, py = pyyaml(text)
        if ours_ok and py_ok:
            mine = json.loads(r.stdout)
            if mine == py or (py is None and mine == ""):
                passed += 1
            else:
                failed += 1
                print("FAIL %s: trees differ\n    ours:   %s\n    pyyaml: %s" %
                      (path, json.dumps(mine)[:300], json.dumps(py)[:300]))
        elif ours_ok and not py_ok:
            failed += 1
            print("FAIL %s: ours accepts, PyYAML refuses (%s)" % (path, py))
        elif py_ok and not ours_ok:
            msg = r.stderr.decode("utf-8", "replace")
            if any(k in msg for k in ON_PURPOSE) or r.returncode == 3:
                passed += 1
            else:
                failed += 1
                print("FAIL %s: PyYAML reads it, ours refuses: %s" % (path, msg.strip()))
        else:
            passed += 1
print("yaml oracle: %d passed, %d failed, %d skipped (not UTF-8, tabs, unusual line breaks)" %
      (passed, failed, skipped))
sys.exit(1 if failed else 0)
