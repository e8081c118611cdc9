#!/usr/bin/python3
"""What tfserve writes, read with Google's protobuf and TensorFlow's schemas instead of our code.

Runs the real tfserve-train on the CSV regression example (examples/csv_regression.ini and its
data script, two epochs, events every 10 steps, a checkpoint per epoch, an export at the end) and
reads back, here in Python, with classes that Debian's protoc generates at run time from the
TensorFlow .proto files in proto/:

- saved_model.pb of the export and of the bundled half_plus_two demo model: a SavedModel with one
  MetaGraphDef tagged "serve", serving_default with TensorFlow's method name and the inputs' and
  outputs' dtypes and shapes, signature tensors and node inputs that name nodes of the graph, a
  V2 SaverDef whose filename tensor and restore op exist, and, as TensorFlow's loader restores
  them, every variable assigned from a RestoreV2 output that the restore op runs, whose key is an
  entry of the variable's dtype and shape, every entry restored;
- the TensorBundles (the export's variables/ and the last training checkpoint): the .index file
  read as a LevelDB table by hand (footer, index block, data blocks with their masked CRC32C,
  prefix-compressed keys in strictly increasing order), the "" entry a BundleHeaderProto, every
  other one a BundleEntryProto whose dtype, shape and size agree, whose bytes tile the .data file
  exactly, and whose crc32c is the masked CRC32C of those bytes; the checkpoint has global_step
  50, Adam's beta powers and slots (TensorFlow's names, the variables' shapes) and the exported
  weights byte for byte;
- the TensorBoard event file: TFRecord framing with both masked CRCs checked, every record an
  Event; the learning_rate scalars equal the schedule's formula, the per-epoch scalars the
  --metrics_json figures, histograms are consistent, and the graph is a GraphDef.

With --tf-ops FILE (TensorFlow's op list, an OpList in text format) it also checks that every node
of every graph written uses an op TensorFlow has, with each attr that has no default; exit 77
(skipped) when FILE is absent.

Run: /usr/bin/python3 tf_format_test.py --build BUILD_DIR --source SOURCE_DIR [--tf-ops FILE]
Prints "N passed, M failed"; exit 1 on a failure.
"""
import argparse
import glob
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "server"))
sys.path.insert(0, os.path.join(HERE, "..", "savedmodel"))
import grpc_client_test as g  # noqa: E402  (check(), the counters, gen_stubs)
import tfevents_check as tfe  # noqa: E402  (crc32c, masked, TFRecord records)

check = g.check

# Bytes per element of TensorFlow's fixed-width DataTypes (types.proto), by enum value.
DTYPE_SIZE = {1: 4, 2: 8, 3: 4, 4: 1, 5: 2, 6: 1, 8: 8, 9: 8, 10: 1, 14: 2, 17: 2, 18: 16,
              19: 2, 22: 4, 23: 8}
TABLE_MAGIC = 0xdb4775248b80fb57   # LevelDB's kTableMagicNumber


def varint(buf, at):
    v, shift = 0, 0
    while True:
        b = buf[at]
        at += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            return v, at
        shift += 7


def block_entries(data, off, size, what):
    """The (key, value) pairs of one table block, its trailer (type, masked CRC32C) checked."""
    check(off + size + 5 <= len(data), "%s: block at %d+%d inside the file" % (what, off, size))
    body = data[off:off + size]
    btype = data[off + size]
    (crc,) = struct.unpack_from("<I", data, off + size + 1)
    check(crc == tfe.masked(tfe.crc32c(body + bytes([btype]))),
          "%s: block at %d: masked crc32c of contents and type" % (what, off))
    check(btype == 0, "%s: block at %d: compression type %d (0 = none)" % (what, off, btype))
    (nrestarts,) = struct.unpack_from("<I", body, len(body) - 4)
    limit = len(body) - 4 - 4 * nrestarts
    restarts = list(struct.unpack_from("<%dI" % nrestarts, body, limit))
    check(nrestarts >= 1 and restarts[0] == 0, "%s: restart points %s" % (what, restarts))
    out, at, key = [], 0, b""
    while at < limit:
        start = at
        shared, at = varint(body, at)
        unshared, at = varint(body, at)
        vlen, at = varint(body, at)
        if start in restarts:
            check(shared == 0, "%s: entry at a restart point shares %d bytes" % (what, shared))
        key = key[:shared] + body[at:at + unshared]
        at += unshared
        out.append((key, body[at:at + vlen]))
        at += vlen
    check(at == limit, "%s: entries end at %d, restarts begin at %d" % (what, at, limit))
    return out


def read_table(path):
    """Every (key, value) of a LevelDB table (table/format.cc): the 48-byte footer holds the
    metaindex and index block handles and the magic number; the index maps to data blocks."""
    with open(path, "rb") as f:
        data = f.read()
    what = os.path.basename(path)
    check(len(data) >= 48, "%s: %d bytes, shorter than a footer" % (what, len(data)))
    footer = data[-48:]
    (magic,) = struct.unpack_from("<Q", footer, 40)
    check(magic == TABLE_MAGIC, "%s: table magic %#x" % (what, magic))
    at = 0
    _, at = varint(footer, at)        # metaindex handle: offset, size
    _, at = varint(footer, at)
    ioff, at = varint(footer, at)
    isize, at = varint(footer, at)
    out = []
    for _, handle in block_entries(data, ioff, isize, what + " index"):
        boff, hat = varint(handle, 0)
        bsize, _ = varint(handle, hat)
        out += block_entries(data, boff, bsize, what)
    keys = [k for k, _ in out]
    check(all(a < b for a, b in zip(keys, keys[1:])), "%s: keys strictly increase" % what)
    return out


def check_bundle(prefix, pb):
    """The TensorBundle at prefix against tensor_bundle.proto; returns {key: BundleEntryProto}."""
    what = os.path.basename(os.path.dirname(prefix)) + "/" + os.path.basename(prefix)
    entries = read_table(prefix + ".index")
    check(entries and entries[0][0] == b"", "%s: the first key is the header's \"\"" % what)
    header = pb.tensor_bundle_pb2.BundleHeaderProto()
    header.ParseFromString(entries[0][1])
    check(header.num_shards == 1 and header.endianness == header.LITTLE and
          header.version.producer == 1, "%s: header %s" % (what, header))
    shard = prefix + ".data-00000-of-00001"
    with open(shard, "rb") as f:
        data = f.read()
    out = {}
    for key, value in entries[1:]:
        e = pb.tensor_bundle_pb2.BundleEntryProto()
        e.ParseFromString(value)
        name = key.decode()
        out[name] = e
        dims = [d.size for d in e.shape.dim]
        check(all(d >= 0 for d in dims) and e.shard_id == 0 and not e.slices,
              "%s: %s: shape %s, shard %d" % (what, name, dims, e.shard_id))
        if e.dtype in DTYPE_SIZE:
            check(e.size == math.prod(dims) * DTYPE_SIZE[e.dtype],
                  "%s: %s: %d bytes for %s of %s" % (what, name, e.size, dims,
                                                     pb.types_pb2.DataType.Name(e.dtype)))
        check(e.offset + e.size <= len(data), "%s: %s: bytes %d+%d in a %d-byte shard"
              % (what, name, e.offset, e.size, len(data)))
        check(e.crc32c == tfe.masked(tfe.crc32c(data[e.offset:e.offset + e.size])),
              "%s: %s: crc32c of its bytes" % (what, name))
    # TensorFlow's BundleWriter appends each tensor's bytes in turn, unpadded.
    at = 0
    for name, e in sorted(out.items(), key=lambda kv: kv[1].offset):
        check(e.offset == at, "%s: %s starts at %d, the previous entry ends at %d"
              % (what, name, e.offset, at))
        at = e.offset + e.size
    check(at == len(data), "%s: the entries cover %d of the shard's %d bytes" % (what, at,
                                                                                len(data)))
    return out


def shape_dims(shape):
    return None if shape.unknown_rank else [d.size for d in shape.dim]


def check_graph(graph, what, ops):
    """Node names unique, inputs naming nodes; with ops, TensorFlow's op and required attrs."""
    names = [n.name for n in graph.node]
    check(len(names) == len(set(names)), "%s: node names are unique" % what)
    known = set(names)
    for n in graph.node:
        for i in n.input:
            src = i[1:] if i.startswith("^") else i.split(":")[0]
            check(src in known, "%s: node %s: input %s names no node" % (what, n.name, i))
        if ops is None:
            continue
        op = ops.get(n.op)
        if not check(op is not None, "%s: node %s: %s is not a TensorFlow op" % (what, n.name,
                                                                                 n.op)):
            continue
        for a in op.attr:
            if not a.HasField("default_value"):
                check(a.name in n.attr, "%s: node %s (%s) lacks attr %s" % (what, n.name, n.op,
                                                                           a.name))


def check_saved_model(version_dir, pb, ops, want_inputs, want_outputs):
    """saved_model.pb of version_dir against TensorFlow's schema; checks its variables too."""
    what = version_dir
    sm = pb.saved_model_pb2.SavedModel()
    with open(os.path.join(version_dir, "saved_model.pb"), "rb") as f:
        sm.ParseFromString(f.read())
    check(sm.saved_model_schema_version == 1 and len(sm.meta_graphs) == 1,
          "%s: schema version %d, %d meta graphs" % (what, sm.saved_model_schema_version,
                                                    len(sm.meta_graphs)))
    mg = sm.meta_graphs[0]
    check(list(mg.meta_info_def.tags) == ["serve"], "%s: tags %s" % (what,
                                                                   mg.meta_info_def.tags))
    check_graph(mg.graph_def, what, ops)
    nodes = {n.name: n for n in mg.graph_def.node}
    sig = mg.signature_def.get("serving_default")
    if not check(sig is not None, "%s: no serving_default in %s" % (what,
                                                                   list(mg.signature_def))):
        return {}
    check(sig.method_name == "tensorflow/serving/predict", "%s: method %s" % (what,
                                                                            sig.method_name))
    for got, want, side in ((sig.inputs, want_inputs, "input"),
                            (sig.outputs, want_outputs, "output")):
        check(sorted(got) == sorted(want), "%s: %ss %s, want %s" % (what, side, sorted(got),
                                                                  sorted(want)))
        for alias, (dtype, dims) in want.items():
            if alias not in got:
                continue
            t = got[alias]
            check(t.dtype == dtype and shape_dims(t.tensor_shape) == dims,
                  "%s: %s %s: %s %s, want %s %s" % (
                      what, side, alias, pb.types_pb2.DataType.Name(t.dtype),
                      shape_dims(t.tensor_shape), pb.types_pb2.DataType.Name(dtype), dims))
            check(t.name.split(":")[0] in nodes, "%s: %s %s names tensor %s of no node"
                  % (what, side, alias, t.name))
    # What TensorFlow's loader uses to restore: it feeds the variables' prefix to the SaverDef's
    # filename tensor and runs its restore op.
    sd = mg.saver_def
    check(sd.version == pb.saver_pb2.SaverDef.V2, "%s: saver version %d" % (what, sd.version))
    for tname in (sd.filename_tensor_name, sd.restore_op_name):
        check(tname.split(":")[0] in nodes, "%s: saver tensor %s names no node" % (what, tname))
    bundle = check_bundle(os.path.join(version_dir, "variables", "variables"), pb)
    check_restore(nodes, sd.restore_op_name, bundle, what)
    return bundle


def node_of(tensor):
    return tensor[1:] if tensor.startswith("^") else tensor.split(":")[0]


def check_restore(nodes, restore_op, bundle, what):
    """Every variable is assigned output k of a RestoreV2, run by the restore op, whose key k
    (its tensor_names constant) is a bundle entry of the variable's dtype and shape; every entry
    is restored."""
    reach, todo = set(), [restore_op]
    while todo:
        n = todo.pop()
        if n in nodes and n not in reach:
            reach.add(n)
            todo += [node_of(i) for i in nodes[n].input]
    restored = {}
    for n in nodes.values():
        if n.op not in ("Assign", "AssignVariableOp") or len(n.input) < 2:
            continue
        src, _, k = n.input[1].partition(":")
        r = nodes.get(src)
        if r is None or r.op != "RestoreV2":
            continue
        k = int(k or 0)
        names = [v.decode() for v in nodes[node_of(r.input[1])].attr["value"].tensor.string_val]
        dtype = r.attr["dtypes"].list.type[k]
        var = nodes[node_of(n.input[0])]
        e = bundle.get(names[k])
        restored[names[k]] = var.name
        check(n.name in reach, "%s: %s is not run by the restore op" % (what, n.name))
        check(e is not None and e.dtype == dtype == var.attr["dtype"].type and
              shape_dims(var.attr["shape"].shape) == [d.size for d in e.shape.dim],
              "%s: variable %s (%s %s) restored from %s: %s" % (
                  what, var.name, var.attr["dtype"].type, shape_dims(var.attr["shape"].shape),
                  names[k], e))
    variables = sorted(n.name for n in nodes.values() if n.op in ("VariableV2", "VarHandleOp"))
    check(variables and sorted(restored.values()) == variables,
          "%s: variables %s, restored %s" % (what, variables, sorted(restored.values())))
    check(sorted(restored) == sorted(bundle), "%s: restored keys %s, bundle keys %s"
          % (what, sorted(restored), sorted(bundle)))


def tensor_bytes(prefix, e):
    with open(prefix + ".data-00000-of-00001", "rb") as f:
        f.seek(e.offset)
        return f.read(e.size)


def check_checkpoint(prefix, export, weights, pb):
    """The last training checkpoint: TensorFlow's names for what a TF1 Adam run saves, shapes of
    the slots equal to their variables', global_step 50, and the exported weights byte for byte."""
    ckpt = check_bundle(prefix, pb)
    gs = ckpt.get("global_step")
    if check(gs is not None and gs.dtype == pb.types_pb2.DT_INT64 and not gs.shape.dim,
             "global_step: %s" % gs):
        check(struct.unpack("<q", tensor_bytes(prefix, gs)) == (50,), "global_step is 50")
    check("beta1_power" in ckpt and "beta2_power" in ckpt, "Adam's beta powers: %s" % list(ckpt))
    for name, e in weights.items():
        for slot in ("", "/Adam", "/Adam_1"):
            c = ckpt.get(name + slot)
            check(c is not None and c.dtype == e.dtype and c.shape == e.shape,
                  "checkpoint %s%s: %s, want %s" % (name, slot, c, e))
        if name in ckpt:
            check(tensor_bytes(prefix, ckpt[name]) ==
                  tensor_bytes(os.path.join(export, "variables", "variables"), e),
                  "the export's %s equals the last checkpoint's" % name)


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def check_events(log_dir, pb, ops, metrics, steps_per_epoch, every):
    """The event file: TFRecords of Events, with the scalars, histograms and graph logged."""
    files = glob.glob(os.path.join(log_dir, "events.out.tfevents.*"))
    if not check(len(files) == 1, "one event file in %s: %s" % (log_dir, files)):
        return
    failed_before = len(tfe.FAILED)
    recs = tfe.records(files[0])   # checks both masked CRCs of every record
    check(len(tfe.FAILED) == failed_before, "TFRecord framing and CRCs of %s" % files[0])
    events = []
    for r in recs:
        ev = pb.event_pb2.Event()
        ev.ParseFromString(r)
        events.append(ev)
    check(events and events[0].file_version == "brain.Event:2",
          "first event: %s" % (events[0] if events else None))
    scalars, graphs, histos = {}, 0, 0
    for ev in events[1:]:
        kind = ev.WhichOneof("what")
        if kind == "graph_def":
            gd = pb.graph_pb2.GraphDef()
            gd.ParseFromString(ev.graph_def)
            check_graph(gd, "the event file's graph", ops)
            graphs += 1
            continue
        if not check(kind == "summary", "event of kind %s at step %d" % (kind, ev.step)):
            continue
        for v in ev.summary.value:
            vk = v.WhichOneof("value")
            if vk == "simple_value":
                scalars.setdefault(v.tag, []).append((ev.step, v.simple_value))
            elif check(vk == "histo", "summary %s: value %s" % (v.tag, vk)):
                h = v.histo
                check(len(h.bucket) == len(h.bucket_limit) and sum(h.bucket) == h.num and
                      h.min <= h.max and list(h.bucket_limit) == sorted(h.bucket_limit),
                      "histogram %s at step %d: %s" % (v.tag, ev.step, h))
                histos += 1
    check(graphs == 1 and histos > 0, "%d graph events, %d histograms" % (graphs, histos))
    total = metrics["epochs"] * steps_per_epoch
    # learning_rate = 0.01 * 0.5^(step / 500): csv_regression.ini's exponential schedule.
    lr = scalars.get("learning_rate", [])
    check([s for s, _ in lr] == list(range(every, total + 1, every)),
          "learning_rate steps %s" % [s for s, _ in lr])
    for step, v in lr:
        want = 0.01 * 0.5 ** (step / 500)
        check(abs(v - want) <= 1e-7 * want, "learning_rate at %d: %r, want %r" % (step, v, want))
    loss = scalars.get("loss", [])
    check([s for s, _ in loss] == [s for s, _ in lr] and all(math.isfinite(v) for _, v in loss),
          "loss scalars %s" % loss)
    for tag, key in (("epoch_loss", "train_loss"), ("eval_loss", "eval_loss")):
        got = scalars.get(tag, [])
        want = [((i + 1) * steps_per_epoch, f32(v)) for i, v in enumerate(metrics[key])]
        check(got == want, "%s scalars %s, want (from --metrics_json) %s" % (tag, got, want))


def load_ops(path, pb):
    from google.protobuf import text_format
    ol = pb.op_def_pb2.OpList()
    with open(path) as f:
        text_format.Parse(f.read(), ol)
    return {op.name: op for op in ol.op}


class Pb:
    """The generated modules, imported once protoc has written them."""

    def __init__(self):
        from tensorflow.core.framework import graph_pb2, op_def_pb2, types_pb2
        from tensorflow.core.protobuf import saved_model_pb2, saver_pb2, tensor_bundle_pb2
        from tensorflow.core.util import event_pb2
        self.graph_pb2, self.op_def_pb2, self.types_pb2 = graph_pb2, op_def_pb2, types_pb2
        self.saved_model_pb2, self.saver_pb2 = saved_model_pb2, saver_pb2
        self.tensor_bundle_pb2, self.event_pb2 = tensor_bundle_pb2, event_pb2


def train(build, source, tmp, every):
    """Runs tfserve-train on the CSV regression example; returns its --metrics_json figures."""
    subprocess.run(["sh", os.path.join(source, "examples", "make_regression_csv.sh"), tmp],
                   check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(source, "examples", "csv_regression.ini")) as f:
        ini = f.read().replace("/tmp/regression", tmp)
    ini = ini.replace("[train]\n", "[train]\nlog_every_steps = %d\n" % every)
    cfg = os.path.join(tmp, "regression.ini")
    with open(cfg, "w") as f:
        f.write(ini)
    metrics = os.path.join(tmp, "metrics.json")
    p = subprocess.run([os.path.join(build, "train", "tfserve-train"), cfg, "--epochs=2",
                        "--checkpoint_dir=" + os.path.join(tmp, "ckpt"),
                        "--log_dir=" + os.path.join(tmp, "logs"),
                        "--metrics_json=" + metrics, "--progress=lines"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    out = p.stdout.decode(errors="replace")
    if not check(p.returncode == 0, "tfserve-train exit %d:\n%s" % (p.returncode, out[-2000:])):
        return None
    with open(metrics) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--tf-ops", help="TensorFlow's op list (OpList text): check every node's op")
    a = ap.parse_args()
    build, source = os.path.abspath(a.build), os.path.abspath(a.source)
    if a.tf_ops and not os.path.isfile(a.tf_ops):
        print("SKIP: TensorFlow's op list %s is absent" % a.tf_ops, flush=True)
        return 77
    tmp = tempfile.mkdtemp(prefix="tfs-tf-format-test-")
    try:
        g.gen_stubs(source, tmp)
        pb = Pb()
        ops = load_ops(a.tf_ops, pb) if a.tf_ops else None
        flt = pb.types_pb2.DT_FLOAT
        demo = sorted(glob.glob(os.path.join(build, "models", "half_plus_two", "*")))
        if check(len(demo) == 1, "one demo model version: %s" % demo):
            check_saved_model(demo[0], pb, ops, {"x": (flt, [-1])}, {"y": (flt, [-1])})
        every = 10
        metrics = train(build, source, tmp, every)
        if metrics is not None:
            steps_per_epoch = 25   # 800 training rows in batches of 32
            check(metrics["epochs"] == 2 and metrics["global_step"] == 2 * steps_per_epoch,
                  "two epochs of 25 steps: %s" % metrics)
            exports = sorted(glob.glob(os.path.join(tmp, "export", "*")))
            if check(len(exports) == 1, "one exported version: %s" % exports):
                weights = check_saved_model(exports[0], pb, ops, {"x": (flt, [-1, 3])},
                                            {"predictions": (flt, [-1, 1])})
                check_checkpoint(os.path.join(tmp, "ckpt", "model.ckpt-50"), exports[0],
                                 weights, pb)
            check_events(os.path.join(tmp, "logs"), pb, ops, metrics, steps_per_epoch, every)
    except Exception as e:  # a crash of the test itself is a failure
        check(False, "test raised %r" % e)
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (g.PASSED, g.FAILED), flush=True)
    return 1 if g.FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
