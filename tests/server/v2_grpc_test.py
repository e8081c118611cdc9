#!/usr/bin/python3
"""System test of KServe's v2 inference protocol over gRPC (inference.GRPCInferenceService) with
the real tfserve and a real gRPC client.

Python message classes are generated at test time from the project's own
proto/kserve/grpc_predict_v2.proto (Debian's protoc; Debian has no grpc_tools) and the methods
called with channel.unary_unary, as grpc_client_test.py does for TF Serving's protos. On the demo
half_plus_two (y = x / 2 + 2, computed here by hand): every RPC, FP32 through typed and raw
contents, requested outputs, the id and version echoed, ModelMetadata against TF Serving's own
GetModelMetadata of the same model, every other datatype through both encodings and its decode
errors (no demo input takes them), the errors a client sees (unknown model and version, wrong
shape, datatype, content count, raw length, raw and typed together, a malformed and a deeply
nested message), answers under batching beside v1 Predict, and the drain (ServerReady and
ModelReady false while --drain_delay_seconds keeps ModelInfer answering).

With --fixtures: the real models of the TensorFlow fixtures ($TFS_FIXTURES/real: INT32, UINT8,
BYTES and FP32 tensors, two outputs) through typed and raw contents against their golden outputs,
and TF Serving's two-version half_plus_two for version choice; exit 77 (skipped) when absent.
Prints "N passed, M failed"; exit 1 on a failure.

Run: /usr/bin/python3 v2_grpc_test.py --build BUILD_DIR --source SOURCE_DIR [--fixtures]
"""
import argparse
import json
import math
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # expects to sit in tests/server/
import grpc_client_test as g  # noqa: E402  (stubs, Server, check, expect_error)
import nesting_test as nt  # noqa: E402  (hand-written wire data)

V2 = "/inference.GRPCInferenceService/"
check = g.check
expect_error = g.expect_error
INVALID = grpc.StatusCode.INVALID_ARGUMENT
pb = None   # the generated grpc_predict_v2_pb2

# datatype -> (typed field, struct format of one raw element, sample values)
TYPES = {
    "BOOL": ("bool_contents", "?", [True, False, True]),
    "UINT8": ("uint_contents", "B", [0, 7, 255]),
    "UINT16": ("uint_contents", "H", [0, 7, 65535]),
    "UINT32": ("uint_contents", "I", [0, 7, 4294967295]),
    "UINT64": ("uint64_contents", "Q", [0, 7, 2 ** 64 - 1]),
    "INT8": ("int_contents", "b", [-128, 7, 127]),
    "INT16": ("int_contents", "h", [-32768, 7, 32767]),
    "INT32": ("int_contents", "i", [-2 ** 31, 7, 2 ** 31 - 1]),
    "INT64": ("int64_contents", "q", [-2 ** 63, 7, 2 ** 63 - 1]),
    "FP16": (None, "e", [0.5, -2.0, 65504.0]),
    "BF16": (None, "H", [0x3F00, 0xC000, 0x4000]),   # raw bits of 0.5, -2, 2
    "FP32": ("fp32_contents", "f", [1.0, 2.0, 5.0]),
    "FP64": ("fp64_contents", "d", [1.0, 2.0, 5.0]),
    "BYTES": ("bytes_contents", None, [b"a", b"", b"xyz"]),
}


def gen_stubs(source, out):
    """TF Serving's stubs (grpc_client_test) and ours, loaded by file path."""
    global pb
    g.gen_stubs(source, out)
    subprocess.run(["protoc", "--python_out=" + out, "-I" + os.path.join(source, "proto"),
                    "kserve/grpc_predict_v2.proto"], check=True)
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "tfs_grpc_predict_v2_pb2", os.path.join(out, "kserve", "grpc_predict_v2_pb2.py"))
    pb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pb)


def call(srv, method, req, timeout=10):
    resp = getattr(pb, method + "Response")
    return srv.call(V2 + method, req, resp, timeout=timeout)


def raw_bytes(dtype, values):
    """One raw_input_contents entry: little-endian elements; BYTES as 4-byte length + bytes."""
    if dtype == "BYTES":
        return b"".join(struct.pack("<I", len(v)) + v for v in values)
    return struct.pack("<%d%s" % (len(values), TYPES[dtype][1]), *values)


def from_raw(dtype, data, n):
    if dtype == "BYTES":
        out, pos = [], 0
        for _ in range(n):
            (k,) = struct.unpack_from("<I", data, pos)
            out.append(data[pos + 4:pos + 4 + k])
            pos += 4 + k
        check(pos == len(data), "raw BYTES output used up exactly (%d of %d)" % (pos, len(data)))
        return out
    return list(struct.unpack("<%d%s" % (n, TYPES[dtype][1]), data))


def infer_req(name, inputs, raw=False, version="", outputs=(), rid="", params=None):
    """inputs: [(name, datatype, shape, values)]."""
    req = pb.ModelInferRequest(model_name=name, model_version=version, id=rid)
    for iname, dt, shape, values in inputs:
        t = req.inputs.add(name=iname, datatype=dt, shape=shape)
        enc = dt if dt in TYPES else "FP32"   # a name v2 lacks: FP32's values
        if raw:
            req.raw_input_contents.append(raw_bytes(enc, values))
        elif TYPES[enc][0]:
            getattr(t.contents, TYPES[enc][0]).extend(values)
    for o in outputs:
        req.outputs.add(name=o)
    for k, v in (params or {}).items():
        req.parameters[k].string_param = v
    return req


def output_values(resp, i):
    """Output i's values, wherever the answer put them."""
    o = resp.outputs[i]
    n = 1
    for d in o.shape:
        n *= d
    if resp.raw_output_contents:
        return from_raw(o.datatype, resp.raw_output_contents[i], n)
    return list(getattr(o.contents, TYPES[o.datatype][0]))


def hp2(values):
    return [v / 2 + 2 for v in values]


# ---- the demo model ------------------------------------------------------------------------------

def check_probes(srv, name):
    check(call(srv, "ServerLive", pb.ServerLiveRequest()).live, "ServerLive")
    check(call(srv, "ServerReady", pb.ServerReadyRequest()).ready, "ServerReady")
    check(call(srv, "ModelReady", pb.ModelReadyRequest(name=name)).ready, "ModelReady latest")
    check(call(srv, "ModelReady", pb.ModelReadyRequest(name=name, version="1")).ready,
          "ModelReady version 1")
    check(not call(srv, "ModelReady", pb.ModelReadyRequest(name=name, version="7")).ready,
          "ModelReady of a version not served: false")
    expect_error(lambda: call(srv, "ModelReady", pb.ModelReadyRequest(name="nope")),
                 grpc.StatusCode.NOT_FOUND, "nope", "ModelReady of an unknown model")
    # grpc.health.v1 knows the service: HealthCheckRequest{service} -> {status: SERVING (1)}.
    check(srv.raw("/grpc.health.v1.Health/Check", nt.field(1, b"inference.GRPCInferenceService"))
          == b"\x08\x01", "grpc.health.v1 Check(inference.GRPCInferenceService): SERVING")
    out = subprocess.run([srv.proc.args[0], "--version"], stdout=subprocess.PIPE,
                         check=True).stdout.decode()
    want = out.split("\n")[0].split(": ")[1]
    m = call(srv, "ServerMetadata", pb.ServerMetadataRequest())
    check(m.name == "tfserve" and m.version == want and list(m.extensions) == [],
          "ServerMetadata %s (--version says %s)" % (m, want))


def check_metadata(srv, name):
    """ModelMetadata against TF Serving's GetModelMetadata of the same model (serving_default)."""
    from tensorflow_serving.apis import get_model_metadata_pb2 as gmm
    req = gmm.GetModelMetadataRequest()
    req.model_spec.name = name
    req.metadata_field.append("signature_def")
    v1 = srv.call(g.PS + "GetModelMetadata", req, gmm.GetModelMetadataResponse)
    from tensorflow_serving.apis import get_model_metadata_pb2
    sigs = get_model_metadata_pb2.SignatureDefMap()
    v1.metadata["signature_def"].Unpack(sigs)
    sd = sigs.signature_def["serving_default"]
    names = {1: "FP32", 2: "FP64", 3: "INT32", 4: "UINT8", 7: "BYTES", 9: "INT64", 10: "BOOL"}

    def want(m):
        return sorted((k, names[v.dtype], [d.size for d in v.tensor_shape.dim])
                      for k, v in m.items())

    def got(ts):
        return sorted((t.name, t.datatype, list(t.shape)) for t in ts)

    r = call(srv, "ModelMetadata", pb.ModelMetadataRequest(name=name))
    check(r.name == name and list(r.versions) == ["1"] and r.platform == "tensorflow_savedmodel",
          "ModelMetadata name, versions, platform: %s" % r)
    check(got(r.inputs) == want(sd.inputs) and got(r.outputs) == want(sd.outputs),
          "ModelMetadata tensors %s %s match GetModelMetadata's %s %s"
          % (got(r.inputs), got(r.outputs), want(sd.inputs), want(sd.outputs)))
    r = call(srv, "ModelMetadata", pb.ModelMetadataRequest(name=name, version="1"))
    check(r.name == name and len(r.inputs) == len(sd.inputs), "ModelMetadata version 1")
    expect_error(lambda: call(srv, "ModelMetadata", pb.ModelMetadataRequest(name="nope")),
                 grpc.StatusCode.NOT_FOUND, "nope", "ModelMetadata of an unknown model")
    expect_error(lambda: call(srv, "ModelMetadata", pb.ModelMetadataRequest(name=name,
                                                                            version="7")),
                 grpc.StatusCode.NOT_FOUND, "7", "ModelMetadata of an unknown version")
    return r


def check_infer(srv, name, xshape):
    x = [1.0, 2.0, 5.0, -3.0]
    shape = [4] if len(xshape) == 1 else [4, 1]
    for raw in (False, True):
        what = "raw" if raw else "typed"
        r = call(srv, "ModelInfer", infer_req(name, [("x", "FP32", shape, x)], raw=raw,
                                              rid="req-%s" % what))
        check(r.model_name == name and r.model_version == "1" and r.id == "req-" + what,
              "%s: name, version, id echoed: %s %s %s" % (what, r.model_name, r.model_version,
                                                          r.id))
        check(len(r.outputs) == 1 and r.outputs[0].name == "y" and
              r.outputs[0].datatype == "FP32" and list(r.outputs[0].shape) == shape,
              "%s: one FP32 output y of shape %s: %s" % (what, shape, r.outputs))
        check(bool(r.raw_output_contents) == raw and
              (not raw or not r.outputs[0].HasField("contents")),
              "%s request answered %s" % (what, what))
        check(output_values(r, 0) == hp2(x), "%s: y = x/2 + 2: %s" % (what, output_values(r, 0)))
    # Requested outputs; the version pinned; the signature named as a parameter.
    r = call(srv, "ModelInfer", infer_req(name, [("x", "FP32", shape, x)], outputs=["y"],
                                          version="1", params={"signature_name":
                                                               "serving_default"}))
    check([o.name for o in r.outputs] == ["y"] and output_values(r, 0) == hp2(x),
          "requested output y, version 1, signature_name serving_default")
    # An empty batch is a tensor too.
    r = call(srv, "ModelInfer", infer_req(name, [("x", "FP32", [0] + shape[1:], [])], raw=True))
    check(list(r.outputs[0].shape) == [0] + shape[1:] and r.raw_output_contents[0] == b"",
          "empty batch: %s" % r)
    return x, shape


def check_errors(srv, name, x, shape):
    def infer(req):
        return call(srv, "ModelInfer", req)

    ok = [("x", "FP32", shape, x)]
    expect_error(lambda: infer(infer_req("nope", ok)), grpc.StatusCode.NOT_FOUND, "nope",
                 "unknown model")
    expect_error(lambda: infer(infer_req(name, ok, version="7")), grpc.StatusCode.NOT_FOUND,
                 "7", "unknown version")
    expect_error(lambda: infer(infer_req(name, ok, version="v1")), INVALID,
                 "'v1' is not a version number", "version not a number")
    expect_error(lambda: infer(infer_req(name, ok, outputs=["z"])), INVALID,
                 "output tensor alias not found in signature: z", "unknown requested output")
    expect_error(lambda: infer(infer_req(name, ok, outputs=["y", "y"])), INVALID,
                 "duplicate output tensor alias: y", "requested output twice")
    expect_error(lambda: infer(infer_req(name, ok, params={"signature_name": "nosig"})),
                 grpc.StatusCode.FAILED_PRECONDITION, "nosig", "unknown signature_name")
    expect_error(lambda: infer(infer_req(name, [("w", "FP32", shape, x)])), INVALID, "w",
                 "unknown input name")
    expect_error(lambda: infer(infer_req(name, ok + ok)), INVALID,
                 "duplicate input tensor alias: x", "input given twice")
    wrong = [2, 2] if len(shape) == 1 else [4]
    for raw in (False, True):
        what = "raw" if raw else "typed"
        expect_error(lambda: infer(infer_req(name, [("x", "FP32", wrong, x)], raw=raw)), INVALID,
                     ("input 'x': shape", "does not match the model's"),
                     "%s: wrong shape %s" % (what, wrong))
        expect_error(lambda: infer(infer_req(name, [("x", "FP64", shape, x)], raw=raw)), INVALID,
                     "input 'x': expected datatype FP32, got FP64", "%s: wrong datatype" % what)
        expect_error(lambda: infer(infer_req(name, [("x", "FLOAT", shape, x)], raw=raw)),
                     INVALID, "unknown datatype 'FLOAT'", "%s: datatype name not v2's" % what)
        expect_error(lambda: infer(infer_req(name, [("x", "FP32", [-1], x)], raw=raw)), INVALID,
                     "is not a tensor shape", "%s: negative dim" % what)
    bad = [s + 1 if i == 0 else s for i, s in enumerate(shape)]
    expect_error(lambda: infer(infer_req(name, [("x", "FP32", bad, x)])), INVALID,
                 "4 values in fp32_contents, shape", "typed: content count mismatch")
    expect_error(lambda: infer(infer_req(name, [("x", "FP32", bad, x)], raw=True)), INVALID,
                 "raw_input_contents has 16 bytes", "raw: content length mismatch")
    req = infer_req(name, ok)
    req.inputs[0].contents.int_contents.extend([1, 2, 3, 4])
    expect_error(lambda: infer(req), INVALID, "datatype FP32 takes fp32_contents, got 4 values in "
                 "int_contents", "typed values in another datatype's field")
    req = infer_req(name, ok, raw=True)
    req.inputs[0].contents.fp32_contents.extend(x)
    expect_error(lambda: infer(req), INVALID, "contents given as well as raw_input_contents",
                 "both raw and typed contents")
    req = infer_req(name, ok, raw=True)
    req.raw_input_contents.append(b"")
    expect_error(lambda: infer(req), INVALID, "raw_input_contents has 2 entries for 1 inputs",
                 "two raw entries for one input")
    # Wire data that is not a ModelInferRequest.
    expect_error(lambda: srv.raw(V2 + "ModelInfer", b"\x0a\xff"), INVALID,
                 "Could not parse the request as inference.ModelInferRequest", "malformed bytes")
    # The v2 messages are not recursive, so deep nesting can only come in a field the server
    # does not know (kept as bytes, never walked) or a packed field: 20000 levels in either
    # leave the server answering.
    good = infer_req(name, ok).SerializeToString()
    deep = nt.nest([15], 20000)
    r = pb.ModelInferResponse.FromString(srv.raw(V2 + "ModelInfer", good + nt.field(15, deep)))
    check(output_values(r, 0) == hp2(x), "20000 levels in an unknown field: ignored, answered")
    tensor = infer_req(name, ok).inputs[0].SerializeToString()
    req = nt.field(1, name.encode()) + nt.field(5, tensor + nt.field(3, nt.nest([3], 20000)))
    expect_error(lambda: srv.raw(V2 + "ModelInfer", req), INVALID, "", "20000 levels as the "
                 "packed shape: refused, not a crash")
    r = call(srv, "ModelInfer", infer_req(name, ok))
    check(output_values(r, 0) == hp2(x), "the server still answers after the deep messages")


def check_datatypes(srv, name, shape):
    """Every other datatype, typed and raw: decoded (then refused for the FP32 input by its
    datatype), and its decode errors."""
    for dt, (fld, _, values) in sorted(TYPES.items()):
        if dt == "FP32":
            continue
        n = len(values)
        s = [n] if len(shape) == 1 else [n, 1]
        wrong_type = "input 'x': expected datatype FP32, got %s" % dt
        for raw in (False, True):
            what = "%s %s" % (dt, "raw" if raw else "typed")
            if not raw and fld is None:
                expect_error(lambda: call(srv, "ModelInfer",
                                          infer_req(name, [("x", dt, s, values)])),
                             INVALID, "datatype %s has no typed contents" % dt, what)
                continue
            expect_error(lambda: call(srv, "ModelInfer",
                                      infer_req(name, [("x", dt, s, values)], raw=raw)),
                         INVALID, wrong_type, what + ": decoded, then refused by datatype")
            more = [n + 1] + s[1:]
            text = ("raw_input_contents" if raw else "%d values in %s" % (n, fld))
            expect_error(lambda: call(srv, "ModelInfer",
                                      infer_req(name, [("x", dt, more, values)], raw=raw)),
                         INVALID, text, what + ": too few values for the shape")
        if dt == "BYTES":
            req = infer_req(name, [("x", dt, s, values)], raw=True)
            req.raw_input_contents[0] = raw_bytes(dt, values)[:-1]
            expect_error(lambda: call(srv, "ModelInfer", req), INVALID, "ends before the 3 BYTES",
                         "BYTES raw: truncated record")
            req.raw_input_contents[0] = raw_bytes(dt, values) + b"\0"
            expect_error(lambda: call(srv, "ModelInfer", req), INVALID, "has 1 bytes after",
                         "BYTES raw: bytes after the last record")


def check_batching_mix(build, demo, tmp, servers):
    """v2 ModelInfer (typed and raw) and v1 Predict together through one batching queue: every
    answer right for its own request."""
    rest_port = g.free_port()
    s = g.Server(build, "half_plus_two", demo, tmp, ["--enable_batching", "--rest_api_port=%d"
                                                     % rest_port, "--metrics_path=/metrics"])
    servers.append(s)
    meta = call(s, "ModelMetadata", pb.ModelMetadataRequest(name="half_plus_two"))
    one = len(meta.inputs[0].shape) == 1
    errors = []

    def worker(k):
        for i in range(15):
            x = [float(k * 100 + i), float(i)]
            shape = [2] if one else [2, 1]
            try:
                if (k + i) % 3 == 2:
                    r = g.predict(s, g.predict_req("half_plus_two", x, shape=shape))
                    got = list(r.outputs["y"].float_val)
                else:
                    r = call(s, "ModelInfer", infer_req("half_plus_two", [("x", "FP32", shape, x)],
                                                        raw=(k + i) % 3 == 1))
                    got = output_values(r, 0)
                if got != hp2(x):
                    errors.append("%s for %s" % (got, x))
            except grpc.RpcError as e:
                errors.append("%s %s" % (e.code(), e.details()))

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    check(not errors, "batched v1 and v2 calls, each answered right: %s" % errors[:3])
    # Each ModelInfer is recorded once, as protocol v2-grpc, method infer.
    n_v2 = sum((k + i) % 3 != 2 for k in range(6) for i in range(15))
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % rest_port, timeout=10) as f:
        text = f.read().decode()
    series = ('tfserve_request_duration_seconds_count{model="half_plus_two",'
              'signature="serving_default",protocol="v2-grpc",method="infer",code="OK"} ')
    counts = [line[len(series):] for line in text.splitlines() if line.startswith(series)]
    check(counts == [str(n_v2)], "metrics: %s ModelInfer calls recorded as v2-grpc infer: %s"
          % (n_v2, counts or [line for line in text.splitlines() if "v2-grpc" in line][:5]))
    s.stop()
    servers.remove(s)


def check_drain(build, demo, tmp):
    """SIGTERM with --drain_delay_seconds=2: not ready at once, ModelInfer still answered."""
    s = g.Server(build, "half_plus_two", demo, tmp, ["--drain_delay_seconds=2"])
    try:
        meta = call(s, "ModelMetadata", pb.ModelMetadataRequest(name="half_plus_two"))
        shape = [1] if len(meta.inputs[0].shape) == 1 else [1, 1]
        t0 = time.time()
        s.proc.send_signal(signal.SIGTERM)
        ready = True
        while ready and time.time() - t0 < 1:
            ready = call(s, "ServerReady", pb.ServerReadyRequest()).ready
        check(not ready, "ServerReady false %.2fs after SIGTERM" % (time.time() - t0))
        check(not call(s, "ModelReady", pb.ModelReadyRequest(name="half_plus_two")).ready,
              "ModelReady false while draining")
        check(call(s, "ServerLive", pb.ServerLiveRequest()).live, "ServerLive while draining")
        r = call(s, "ModelInfer", infer_req("half_plus_two", [("x", "FP32", shape, [4.0])]))
        check(output_values(r, 0) == [4.0], "ModelInfer answered during the drain delay")
        check(time.time() - t0 < 1.8, "drain checks done within the delay")
        try:
            rc = s.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            rc = None
        check(rc == 0, "exit 0 after the drain (rc %s)" % rc)
        expect_error(lambda: call(s, "ServerLive", pb.ServerLiveRequest(), timeout=2),
                     grpc.StatusCode.UNAVAILABLE, "", "after the drain: UNAVAILABLE")
    finally:
        s.channel.close()
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait()
        s.log.close()


def demo_checks(a, tmp, servers):
    demo = os.path.join(a.build, "models", "half_plus_two")
    s = g.Server(a.build, "half_plus_two", demo, tmp)
    servers.append(s)
    check_probes(s, "half_plus_two")
    meta = check_metadata(s, "half_plus_two")
    x, shape = check_infer(s, "half_plus_two", list(meta.inputs[0].shape))
    check_errors(s, "half_plus_two", x, shape)
    check_datatypes(s, "half_plus_two", shape)
    s.stop()
    servers.remove(s)
    check_batching_mix(a.build, demo, tmp, servers)
    check_drain(a.build, demo, tmp)


# ---- the TensorFlow fixtures ---------------------------------------------------------------------

# The real models whose tensors cover v2's other datatypes: INT32 scalars, UINT8 in, two outputs,
# BYTES in and out.
REAL = ["tfjs_times_two_int", "tfjs_uint8_multiply", "tfjs_model_multi_output",
        "tfrs_retrieval_topk"]
DT = {"int32": "INT32", "uint8": "UINT8", "float32": "FP32", "string": "BYTES", "int64": "INT64"}


def golden_close(want, got, dt):
    if dt == "BYTES":
        return [w.encode() for w in want] == got
    if dt == "FP32":
        return len(want) == len(got) and all(
            abs(w - v) <= 1e-5 + 1e-4 * abs(w) or (math.isnan(w) and math.isnan(v))
            for w, v in zip(want, got))
    return want == got


class ConfigServer(g.Server):
    """tfserve serving the models of a --model_config_file; waits for its port only."""

    def __init__(self, build, cfg, logdir):
        self.port = g.free_port()
        self.log = open(os.path.join(logdir, "tfserve-config-%d.log" % self.port), "w+")
        self.proc = subprocess.Popen([os.path.join(build, "server", "tfserve"),
                                      "--port=%d" % self.port, "--model_config_file=" + cfg],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self.channel = grpc.insecure_channel("127.0.0.1:%d" % self.port)
        grpc.channel_ready_future(self.channel).result(timeout=30)


def check_real(a, fx, tmp, servers):
    models = [n for n in REAL if os.path.isdir(os.path.join(fx, n, "model"))]
    config = ["model_config_list {"]
    for n in models:
        base = os.path.join(tmp, "models", n)
        os.makedirs(base)
        os.symlink(os.path.join(fx, n, "model"), os.path.join(base, "1"))
        config.append('  config { name: "%s" base_path: "%s" model_platform: "tensorflow" }'
                      % (n, base))
    config.append("}")
    cfg = os.path.join(tmp, "models.config")
    with open(cfg, "w") as f:
        f.write("\n".join(config) + "\n")
    s = ConfigServer(a.build, cfg, tmp)
    servers.append(s)
    # Ready: every configured model has an AVAILABLE version.
    deadline = time.time() + 120
    while time.time() < deadline and not call(s, "ServerReady", pb.ServerReadyRequest()).ready:
        time.sleep(0.1)
    for n in models:
        with open(os.path.join(fx, n, "golden", "serving_default.json")) as f:
            gold = json.load(f)
        ins = []
        for k, v in sorted(gold["inputs"].items()):
            vals = [x.encode() for x in v["values"]] if v["dtype"] == "string" else v["values"]
            ins.append((k, DT[v["dtype"]], v["shape"], vals))
        outs = sorted(gold["outputs"])
        for raw in (False, True):
            what = "%s %s" % (n, "raw" if raw else "typed")
            # Ask for the outputs in reverse order: the answer follows the request.
            r = call(s, "ModelInfer", infer_req(n, ins, raw=raw, outputs=outs[::-1]))
            check([o.name for o in r.outputs] == outs[::-1], "%s: outputs in the order asked: %s"
                  % (what, [o.name for o in r.outputs]))
            for i, o in enumerate(r.outputs):
                w = gold["outputs"][o.name]
                check(o.datatype == DT[w["dtype"]] and list(o.shape) == w["shape"],
                      "%s %s: %s %s, golden %s %s" % (what, o.name, o.datatype, list(o.shape),
                                                     w["dtype"], w["shape"]))
                check(golden_close(w["values"], output_values(r, i), o.datatype),
                      "%s %s: values match the golden" % (what, o.name))
        m = call(s, "ModelMetadata", pb.ModelMetadataRequest(name=n))
        check(sorted((t.name, t.datatype) for t in m.inputs) ==
              sorted((k, DT[v["dtype"]]) for k, v in gold["inputs"].items()),
              "%s: ModelMetadata inputs %s" % (n, m.inputs))
    s.stop()
    servers.remove(s)


def check_two_versions(a, fx, tmp, servers):
    s = g.Server(a.build, "hp2", os.path.join(fx, "saved_model_half_plus_two_2_versions"), tmp)
    servers.append(s)
    m = call(s, "ModelMetadata", pb.ModelMetadataRequest(name="hp2"))
    check(list(m.versions) == ["124"], "served versions (latest policy): %s" % list(m.versions))
    x = [1.0, 2.0, 3.0]
    shape = [3] if len(m.inputs[0].shape) == 1 else [3, 1]
    r = call(s, "ModelInfer", infer_req("hp2", [("x", "FP32", shape, x)]))
    check(r.model_version == "124" and output_values(r, 0) == hp2(x),
          "latest is 124: %s %s" % (r.model_version, output_values(r, 0)))
    expect_error(lambda: call(s, "ModelInfer", infer_req("hp2", [("x", "FP32", shape, x)],
                                                         version="123")),
                 grpc.StatusCode.NOT_FOUND, "Specific(hp2, 123)", "version 123 is not served")
    check(not call(s, "ModelReady", pb.ModelReadyRequest(name="hp2", version="123")).ready,
          "ModelReady 123: false")
    s.stop()
    servers.remove(s)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--fixtures", action="store_true",
                    help="the checks on the TensorFlow fixtures instead of the demo model")
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)   # tfserve wants an absolute --model_base_path
    a.source = os.path.abspath(a.source)
    fx_real = g.fixtures_dir(a.source, "real")
    fx_tfs = g.fixtures_dir(a.source, "tf_serving")
    if a.fixtures and not (os.path.isdir(fx_real) and os.path.isdir(fx_tfs)):
        print("SKIP: the fixture checks: %s or %s is absent (set TFS_FIXTURES)"
              % (fx_real, fx_tfs), flush=True)
        return 77
    tmp = tempfile.mkdtemp(prefix="tfs-v2-grpc-test-")
    servers = []
    try:
        gen_stubs(a.source, tmp)
        if a.fixtures:
            check_real(a, fx_real, tmp, servers)
            check_two_versions(a, fx_tfs, tmp, servers)
        else:
            demo_checks(a, tmp, servers)
    except Exception as e:  # a crash of the test itself is a failure, with the server logs
        import traceback
        traceback.print_exc()
        check(False, "test raised %r" % e)
        for s in servers:
            print("---- server log ----\n" + s.logs()[-5000:], flush=True)
    finally:
        for s in servers:
            if s.proc.poll() is None:
                s.proc.kill()
                s.proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (g.PASSED, g.FAILED), flush=True)
    return 1 if g.FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
