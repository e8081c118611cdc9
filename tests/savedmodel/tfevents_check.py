#!/usr/bin/python3
"""Reads what tfserve wrote with Google's protobuf library instead of ours: an event file and a
checkpoint state file, checked against the expectations the C test (test_events.c) passes as JSON.

Python classes are generated at run time by Debian's protoc from the project's own .proto files
(as tests/server/grpc_client_test.py does), so this also checks that our .proto files declare what
TensorFlow's declare. The TFRecord framing is parsed here with an independent CRC32C. Histograms
are recomputed here from the raw values with TensorFlow's default buckets and compared exactly.
The state file must parse with text_format and print back byte for byte as
text_format.MessageToString prints it (what TensorFlow's Python writes).

Run: /usr/bin/python3 tfevents_check.py --source SRC --expect EXPECT.json
Exit 0: all good; 1: a check failed; 77: skipped (no protoc or no google.protobuf).
"""
import argparse
import bisect
import glob
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

FAILED = []


def check(cond, what):
    if not cond:
        FAILED.append(what)
        print("FAIL: " + what, flush=True)


def crc32c(data):
    table = crc32c.table
    if table is None:
        table = []
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
            table.append(c)
        crc32c.table = table
    c = 0xFFFFFFFF
    for b in data:
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


crc32c.table = None


def masked(c):
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    with open(path, "rb") as f:
        data = f.read()
    out, at = [], 0
    while at < len(data):
        check(at + 12 <= len(data), "record header cut short at %d" % at)
        (n,) = struct.unpack_from("<Q", data, at)
        (lcrc,) = struct.unpack_from("<I", data, at + 8)
        check(lcrc == masked(crc32c(data[at:at + 8])), "length crc of record %d" % len(out))
        body = data[at + 12:at + 12 + n]
        (dcrc,) = struct.unpack_from("<I", data, at + 12 + n)
        check(dcrc == masked(crc32c(body)), "data crc of record %d" % len(out))
        out.append(body)
        at += 12 + n + 4
    return out


def default_limits():
    """tensorflow/core/lib/histogram/histogram.cc InitDefaultBucketsInner."""
    pos, v = [], 1e-12
    while v < 1e20:
        pos.append(v)
        v *= 1.1
    pos.append(sys.float_info.max)
    return [-x for x in reversed(pos)] + [0.0] + pos


def expected_histogram(values):
    limits = default_limits()
    counts = [0.0] * len(limits)
    lo, hi, s, s2 = limits[-1], -sys.float_info.max, 0.0, 0.0
    for x in values:
        counts[min(bisect.bisect_right(limits, x), len(limits) - 1)] += 1.0
        lo, hi, s, s2 = min(lo, x), max(hi, x), s + x, s2 + x * x
    out_l, out_c, i = [], [], 0
    while i < len(limits):
        end, c = limits[i], counts[i]
        i += 1
        if c <= 0.0:
            while i < len(limits) and counts[i] <= 0.0:
                end, c = limits[i], counts[i]
                i += 1
        out_l.append(end)
        out_c.append(c)
    return lo, hi, float(len(values)), s, s2, out_l, out_c


def gen_classes(source, out):
    proto = os.path.join(source, "proto")
    files = sorted(os.path.relpath(p, proto) for p in
                   glob.glob(os.path.join(proto, "tensorflow", "core", "framework", "*.proto")))
    files += ["tensorflow/core/util/event.proto",
              "tensorflow/python/training/checkpoint_state.proto"]
    subprocess.run(["protoc", "--python_out=" + out, "-I" + proto, "-I/usr/include"] + files,
                   check=True)
    sys.path.insert(0, out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--expect", required=True)
    args = ap.parse_args()
    if not shutil.which("protoc"):
        print("SKIP: protoc not installed")
        return 77
    try:
        from google.protobuf import text_format  # noqa: F401
    except ImportError:
        print("SKIP: python3-protobuf not installed")
        return 77
    with open(args.expect) as f:
        exp = json.load(f)
    tmp = tempfile.mkdtemp(prefix="tfevents-check-")
    try:
        gen_classes(args.source, tmp)
        from google.protobuf import text_format
        from tensorflow.core.framework import graph_pb2
        from tensorflow.core.util import event_pb2
        from tensorflow.python.training import checkpoint_state_pb2

        recs = records(exp["events"])
        events = []
        for r in recs:
            ev = event_pb2.Event()
            ev.ParseFromString(r)
            events.append(ev)
        check(len(events) == 1 + len(exp["scalars"]) + len(exp["histograms"]) + 1,
              "event count %d" % len(events))
        first = events[0]
        check(first.WhichOneof("what") == "file_version" and
              first.file_version == "brain.Event:2", "first event: %s" % first)
        check(first.wall_time == float(int(first.wall_time)), "first wall_time whole seconds")
        name = os.path.basename(exp["events"])
        check(name == "events.out.tfevents.%010d.%s" % (int(first.wall_time), exp["hostname"]),
              "file name %s" % name)
        i = 1
        for tag, step, value in exp["scalars"]:
            ev = events[i]
            i += 1
            check(ev.step == step and len(ev.summary.value) == 1, "scalar event %s" % ev)
            v = ev.summary.value[0]
            check(v.tag == tag and v.WhichOneof("value") == "simple_value" and
                  v.simple_value == struct.unpack("<f", struct.pack("<f", value))[0],
                  "scalar %s: %s" % (tag, v))
            check(ev.wall_time >= first.wall_time, "scalar wall_time")
        for tag, step, values in exp["histograms"]:
            ev = events[i]
            i += 1
            v = ev.summary.value[0]
            check(ev.step == step and v.tag == tag and v.WhichOneof("value") == "histo",
                  "histogram event %s" % tag)
            lo, hi, num, s, s2, limits, counts = expected_histogram(values)
            h = v.histo
            check((h.min, h.max, h.num, h.sum, h.sum_squares) == (lo, hi, num, s, s2),
                  "histogram %s stats: %s vs %s" % (tag, (h.min, h.max, h.num, h.sum,
                                                          h.sum_squares), (lo, hi, num, s, s2)))
            check(list(h.bucket_limit) == limits, "histogram %s bucket limits" % tag)
            check(list(h.bucket) == counts, "histogram %s bucket counts" % tag)
        ev = events[i]
        check(ev.WhichOneof("what") == "graph_def", "graph event")
        g = graph_pb2.GraphDef()
        g.ParseFromString(ev.graph_def)
        check([[n.name, n.op] for n in g.node] == exp["graph_nodes"],
              "graph nodes %s" % [[n.name, n.op] for n in g.node])
        check(list(g.node[-1].input) == exp["last_node_inputs"], "graph inputs")

        with open(exp["state"]) as f:
            text = f.read()
        cs = checkpoint_state_pb2.CheckpointState()
        text_format.Parse(text, cs)
        check(cs.model_checkpoint_path == exp["state_model"], "state model path %s" % cs)
        check(list(cs.all_model_checkpoint_paths) == exp["state_paths"], "state paths %s" % cs)
        check(len(cs.all_model_checkpoint_timestamps) == len(cs.all_model_checkpoint_paths),
              "state timestamps")
        check(text_format.MessageToString(cs) == text,
              "state file differs from text_format's output:\n%s---\n%s" %
              (text, text_format.MessageToString(cs)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("tfevents_check: %s" % ("%d checks failed" % len(FAILED) if FAILED else "OK"))
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
