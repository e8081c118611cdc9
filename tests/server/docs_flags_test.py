#!/usr/bin/python3
"""docs/flags.md against the real `tfserve --help`.

Runs <build>/server/tfserve --help and reads every flag it lists (`--name=default  type  help`),
then reads the flag tables of docs/flags.md's "## tfserve" section (rows whose first cell is
`--name`). Fails naming each flag --help lists that the page lacks, each flag the page documents
that --help does not know, and each flag whose type or default differs between the two.

Run: /usr/bin/python3 docs_flags_test.py --build BUILD_DIR --source SOURCE_DIR
"""
import argparse
import os
import re
import subprocess
import sys


def help_flags(tfserve):
    """{name: (type, default)} from tfserve --help."""
    p = subprocess.run([tfserve, "--help"], capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        sys.exit("tfserve --help exited %d: %s" % (p.returncode, p.stderr))
    flags = {}
    for line in p.stdout.splitlines():
        m = re.match(r"\s*--([A-Za-z0-9_]+)=([^\t]*)\t(\w+)\t", line)
        if m:
            flags[m.group(1)] = (m.group(3), m.group(2).rstrip())  # padded to a column
    if not flags:
        sys.exit("tfserve --help listed no flags:\n" + p.stdout)
    return flags


def doc_flags(path):
    """{name: (type, default)} from the tables of the '## tfserve' section."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    flags, inside = {}, False
    for line in lines:
        if line.startswith("## "):
            inside = line.strip() == "## tfserve"
            continue
        m = re.match(r"\|\s*`--([A-Za-z0-9_]+)`\s*\|([^|]*)\|([^|]*)\|", line)
        if inside and m:
            if m.group(1) in flags:
                sys.exit("%s documents --%s twice" % (path, m.group(1)))
            flags[m.group(1)] = (m.group(2).strip(), m.group(3).strip())
    if not flags:
        sys.exit("%s has no flag table under '## tfserve'" % path)
    return flags


def same_default(doc, helped):
    # The page writes an empty string as "" and a computed default in words ("4 × CPUs" for
    # --help's "4xCPUs").
    doc = "" if doc == '""' else doc.replace(" × ", "x")
    return doc == helped


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    args = ap.parse_args()
    tfserve = os.path.join(args.build, "server", "tfserve")
    if not os.access(tfserve, os.X_OK):
        sys.exit("%s is not built" % tfserve)
    doc_path = os.path.join(args.source, "docs", "flags.md")
    have, documented = help_flags(tfserve), doc_flags(doc_path)

    errors = []
    for name in sorted(set(have) - set(documented)):
        errors.append("--%s: listed by tfserve --help, missing from docs/flags.md" % name)
    for name in sorted(set(documented) - set(have)):
        errors.append("--%s: in docs/flags.md, unknown to tfserve --help" % name)
    for name in sorted(set(have) & set(documented)):
        (htype, hdef), (dtype, ddef) = have[name], documented[name]
        if htype != dtype:
            errors.append("--%s: type %s in docs/flags.md, %s in --help" % (name, dtype, htype))
        if not same_default(ddef, hdef):
            errors.append("--%s: default '%s' in docs/flags.md, '%s' in --help" %
                          (name, ddef, hdef))
    for e in errors:
        print("FAIL " + e)
    if errors:
        print("%d problem(s): update docs/flags.md (or server/flags.c)" % len(errors))
        return 1
    print("docs/flags.md documents the %d flags of tfserve --help, with their types and defaults"
          % len(have))
    return 0


if __name__ == "__main__":
    sys.exit(main())
