#!/usr/bin/python3
"""Writes docs/ops.md, the list of runtime ops, from the sources that define them.

The ops and their TensorFlow signatures come from runtime/ops.def (one
TFS_OP(ENUM, "Name", cpu_kernel, output_count_rule, flags, "signature") entry each). Which ops the
CUDA executor runs, and when, comes from runtime/cuda/ops.c: the GPU kernel table
(tfs__gpu_kernels) and the placement function (tfs__gpu_supports_op), whose switch says, per op,
what a node must be (dtype, layout, fused activations) to be placed on the GPU.

The placement conditions are C expressions; this script turns each term of them into words with
the PHRASES table below. A term it does not know stops the script (exit 1) naming it, so a new
placement rule cannot leave the document silently wrong: add its wording to PHRASES.

Usage: python3 scripts/gen-ops-doc.py            rewrite docs/ops.md
       python3 scripts/gen-ops-doc.py --check    exit 1 when docs/ops.md is not what it would write
(stdlib only; paths are relative to the repository root, found from this file's location)
"""
import argparse
import difflib
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPS_DEF = "runtime/ops.def"
GPU_OPS = "runtime/cuda/ops.c"
OUT = "docs/ops.md"

# Words for the terms of the placement conditions in tfs__gpu_supports_op. "{acts}" is replaced by
# the activations fused_bias_act accepts, read from its table.
PHRASES = {
    'attr_is(n, "T", TFS_DTYPE_FLOAT)': "T float",
    'attr_is(n, "U", TFS_DTYPE_FLOAT)': "U float",
    "nhwc(n)": "NHWC",
    "fused_bias_act(n, &act)": "fused_ops BiasAdd or BiasAdd + one of {acts}",
    "!training": "is_training false",
}

FLAG_WORDS = [
    ("TFS_OPF_STATEFUL", "stateful"),
    ("TFS_OPF_FUNCTIONS", "calls functions"),
    ("TFS_OPF_RANDOM", "random"),
    ("TFS_OPF_REF_INPUTS", "reference inputs"),
]


class GenError(Exception):
    pass


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def strip_comments(text):
    return re.sub(r"/\*.*?\*/", " ", re.sub(r"//[^\n]*", " ", text), flags=re.S)


def split_args(body):
    """Splits a macro call's arguments at top-level commas (not inside strings or parentheses)."""
    args, depth, cur, i = [], 0, [], 0
    while i < len(body):
        c = body[i]
        if c == '"':
            j = i + 1
            while body[j] != '"':
                j += 2 if body[j] == "\\" else 1
            cur.append(body[i:j + 1])
            i = j + 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        if c == "," and depth == 0:
            args.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
        i += 1
    args.append("".join(cur).strip())
    return args


def c_string(expr):
    """The value of adjacent C string literals ("a " "b")."""
    parts = re.findall(r'"((?:[^"\\]|\\.)*)"', expr)
    if not parts or re.sub(r'"(?:[^"\\]|\\.)*"', "", expr).strip():
        raise GenError("not a string literal: %s" % expr)
    return "".join(bytes(p, "utf-8").decode("unicode_escape") for p in parts)


def parse_ops():
    text = strip_comments(read(OPS_DEF))
    ops = []
    for m in re.finditer(r"\bTFS_OP\(", text):
        i, depth = m.end(), 1
        while depth:
            c = text[i]
            if c == '"':
                i = text.index('"', i + 1)
            elif c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
            i += 1
        args = split_args(text[m.end():i - 1])
        if len(args) != 6:
            raise GenError("%s: TFS_OP entry with %d arguments: %s" % (OPS_DEF, len(args),
                                                                      args[:2]))
        enum, name, kernel, _nout, flags, sig = args
        flags_set = set(f.strip() for f in flags.split("|")) - {"0"}
        unknown = flags_set - set(f for f, _ in FLAG_WORDS)
        if unknown:
            raise GenError("%s: %s: unknown flags %s" % (OPS_DEF, enum, sorted(unknown)))
        ops.append({"enum": enum, "name": c_string(name), "kernel": kernel,
                    "flags": [w for f, w in FLAG_WORDS if f in flags_set],
                    "signature": c_string(sig)})
    if not ops:
        raise GenError("%s: no TFS_OP entries" % OPS_DEF)
    return ops


def function_body(text, name):
    m = re.search(r"\b%s\s*\([^)]*\)\s*\{" % re.escape(name), text)
    if not m:
        raise GenError("%s: function %s not found" % (GPU_OPS, name))
    i, depth = m.end(), 1
    while depth:
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        i += 1
    return text[m.end():i - 1]


def norm(expr):
    return re.sub(r"\s+", " ", expr).strip()


def strip_parens(expr):
    while expr.startswith("(") and expr.endswith(")"):
        depth = 0
        for i, c in enumerate(expr):
            depth += {"(": 1, ")": -1}.get(c, 0)
            if depth == 0 and i < len(expr) - 1:
                return expr
        expr = expr[1:-1].strip()
    return expr


def parse_gpu():
    """{enum: condition in words} for the ops the CUDA executor may run."""
    text = strip_comments(read(GPU_OPS))
    table = re.search(r"tfs__gpu_kernels\[TFS_OP_COUNT\]\s*=\s*\{(.*?)\};", text, re.S)
    if not table:
        raise GenError("%s: the tfs__gpu_kernels table was not found" % GPU_OPS)
    kernels = re.findall(r"\[TFS_OP_([A-Z0-9_]+)\]\s*=", table.group(1))
    acts_body = function_body(text, "fused_bias_act")
    acts = re.findall(r'\{\s*"([A-Za-z0-9]+)"\s*,\s*TFS_CUDA_ACT_', acts_body)
    if not acts:
        raise GenError("%s: fused_bias_act's activation table was not found" % GPU_OPS)
    acts_words = ", ".join(acts[:-1]) + " or " + acts[-1] if len(acts) > 1 else acts[0]

    body = function_body(text, "tfs__gpu_supports_op")
    sw = re.search(r"\bswitch\s*\(\s*op\s*\)\s*\{", body)
    if not sw:
        raise GenError("%s: tfs__gpu_supports_op has no switch (op)" % GPU_OPS)
    # Case groups: labels, then the statements up to the next label.
    pieces = re.split(r"(\bcase\s+TFS_OP_[A-Z0-9_]+\s*:|\bdefault\s*:)", body[sw.end():])
    groups, labels = [], []
    for p in pieces[1:]:
        lab = re.match(r"case\s+TFS_OP_([A-Z0-9_]+)\s*:|default\s*:", p)
        if lab:
            labels.append(lab.group(1) or "default")
            continue
        if p.strip():
            groups.append((labels, p))
            labels = []

    def words(term, enum, stmts):
        term = strip_parens(norm(term))
        if term in PHRASES:
            return [PHRASES[term].replace("{acts}", acts_words)]
        local = re.search(r"\bbool\s+%s\s*=\s*([^;]*);" % re.escape(term), stmts)
        if local:
            alts = []
            for alt in local.group(1).split("||"):
                alt = norm(alt)
                eq = re.fullmatch(r"op == TFS_OP_([A-Z0-9_]+)", alt)
                if eq:
                    if eq.group(1) == enum:
                        return []   # true for this op: no condition
                    continue
                alts.append(" and ".join(words(alt, enum, stmts)))
            return [" or ".join(alts)] if alts else []
        raise GenError("%s: tfs__gpu_supports_op: no words for the condition '%s' (add them to "
                       "PHRASES in scripts/gen-ops-doc.py)" % (GPU_OPS, term))

    def condition(enum, stmts):
        ret = re.search(r"\breturn\s+([^;]*);", stmts)
        if not ret:
            raise GenError("%s: a case of tfs__gpu_supports_op without a return" % GPU_OPS)
        expr = norm(ret.group(1))
        if expr == "TFS_PLACE_FOLLOW":
            return "with its input (a view: on the GPU when its input 0 is)"
        if expr == "TFS_PLACE_DEVICE":
            return "yes"
        m = re.fullmatch(r"(.*?)\s*\?\s*TFS_PLACE_DEVICE\s*:\s*TFS_PLACE_CPU", expr)
        if not m:
            raise GenError("%s: tfs__gpu_supports_op: cannot read 'return %s'" % (GPU_OPS, expr))
        terms = []
        for t in strip_parens(m.group(1)).split("&&"):
            terms += words(t, enum, stmts)
        return "when " + ", ".join(terms) if terms else "yes"

    by_label = {}
    for labels, stmts in groups:
        for lab in labels:
            by_label[lab] = stmts
    gpu = {}
    for enum in kernels:
        stmts = by_label.get(enum, by_label.get("default"))
        if stmts is None:
            raise GenError("%s: %s has a GPU kernel but no placement rule" % (GPU_OPS, enum))
        gpu[enum] = condition(enum, stmts)
    return gpu


def md_code(s):
    return "`%s`" % s.replace("|", "\\|") if s else ""


def render(ops, gpu):
    unknown = set(gpu) - set(o["enum"] for o in ops)
    if unknown:
        raise GenError("%s names ops %s that %s lacks" % (GPU_OPS, sorted(unknown), OPS_DEF))
    n_gpu = sum(1 for o in ops if o["enum"] in gpu)
    out = []
    w = out.append
    w("# Runtime ops")
    w("")
    w("<!-- Generated by scripts/gen-ops-doc.py from %s and %s." % (OPS_DEF, GPU_OPS))
    w("     Do not edit: change the sources and run `python3 scripts/gen-ops-doc.py`")
    w("     (the docs-ops test fails until you do). -->")
    w("")
    w("The TensorFlow ops tfserve's runtime implements: %d ops, %d of them with a kernel on the "
      "GPU." % (len(ops), n_gpu))
    w("A SavedModel whose graph (or any function it calls) uses an op that is not in this list "
      "fails")
    w("to load, with one message naming every missing op; the server keeps serving the other "
      "versions")
    w("and models. `build/savedmodel/tfserve-inspect --check DIR` says so before a deploy.")
    w("")
    w("- **Signature** is what TensorFlow's op registry says of the op (its OpDef), in the "
      "syntax of")
    w("  TensorFlow's `REGISTER_OP`: inputs `->` outputs, then `; attr` for each attr, with its "
      "kind,")
    w("  allowed values (`{...}`), minimum (`>= n`) and default (`= v`). `N * T` is a list of N "
      "tensors,")
    w("  `Ref(T)` a reference (TF1 variables). The allowed types are TensorFlow's; a kernel may "
      "support")
    w("  fewer of them and then refuses a node with another type when the model loads or runs.")
    w("- **CPU**: every op has a CPU kernel; the CPU executor runs all of them, and is the one "
      "training")
    w("  (`tfserve-train`) uses.")
    w("- **GPU**: ops the CUDA executor runs (a build with CUDA, `--device=auto|gpu|gpu:N`), "
      "and the")
    w("  conditions a node must meet to be placed there (types are attr values: `T float` means "
      "the")
    w("  node's attr `T` is `DT_FLOAT`). Every other node runs on the CPU, with one copy per "
      "value that")
    w("  crosses between the two; Const values are uploaded once. With `--device=auto` a model "
      "none of")
    w("  whose nodes qualify stays on the CPU. Serving only: training runs on the CPU.")
    w("- **Notes**: stateful ops are never constant-folded or merged; ops that call functions "
      "(While,")
    w("  If, Case) run library functions of the graph; random ops keep a Philox generator per "
      "node;")
    w("  reference-input ops update TF1 variables in place.")
    w("")
    w("| Op | Signature | CPU | GPU | Notes |")
    w("| --- | --- | --- | --- | --- |")
    for o in sorted(ops, key=lambda o: (o["name"].lower(), o["name"])):
        w("| %s | %s | yes | %s | %s |" % (o["name"], md_code(o["signature"]),
                                            gpu.get(o["enum"], ""), ", ".join(o["flags"])))
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description="Writes or checks %s." % OUT)
    ap.add_argument("--check", action="store_true",
                    help="exit 1 when %s differs from what this script writes" % OUT)
    args = ap.parse_args()
    try:
        text = render(parse_ops(), parse_gpu())
    except (GenError, OSError) as e:
        print("gen-ops-doc.py: %s" % e, file=sys.stderr)
        return 1
    path = os.path.join(ROOT, OUT)
    if args.check:
        try:
            with open(path, encoding="utf-8") as f:
                have = f.read()
        except OSError as e:
            print("gen-ops-doc.py: %s" % e, file=sys.stderr)
            have = ""
        if have == text:
            print("%s is current (%d lines)" % (OUT, text.count("\n")))
            return 0
        diff = difflib.unified_diff(have.splitlines(), text.splitlines(), OUT + " (committed)",
                                    OUT + " (from the sources)", lineterm="", n=0)
        for i, line in enumerate(diff):
            if i == 40:
                print("...")
                break
            print(line)
        print("%s is out of date with %s / %s: run `python3 scripts/gen-ops-doc.py` and commit "
              "the result" % (OUT, OPS_DEF, GPU_OPS), file=sys.stderr)
        return 1
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    print("wrote %s" % OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
