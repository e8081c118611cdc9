#!/usr/bin/python3
"""Real SavedModels that other projects published answer as TensorFlow does, over REST and gRPC.

Serves every model under real/NAME/model of the TensorFlow fixtures ($TFS_FIXTURES): Keras,
Estimator, TensorFlow.js and TFX exports, none written for tfserve, from one real tfserve started
with a --model_config_file, then sends each golden request (NAME/golden/SIGNATURE.json: inputs
and the outputs TensorFlow's semantics give, computed by an independent evaluator) as REST JSON
and as gRPC TensorProtos with a real grpcio client, and compares every output within the
fixtures' stated tolerance. Also checks that each model's load failure, if any, names its
cause, and tfserve-inspect --check on every model.

Exit 77 (skipped, saying why) when the fixtures' real/ folder is absent; prints "N passed, M failed".
Run: /usr/bin/python3 real_models_test.py --build BUILD_DIR --source SOURCE_DIR
"""
import argparse
import base64
import glob
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpc_client_test as g  # noqa: E402  (its check(), stubs, ports and counters)

import grpc  # noqa: E402

# Deep models (CNN, LSTM, transformer) accumulate more float32 rounding; the README of the
# fixtures states both tolerances.
DEEP = ("cnn", "lstm", "transformer")

DTYPES = {  # golden dtype -> (tensorflow DataType enum, TensorProto field)
    "float32": (1, "float_val"), "float64": (2, "double_val"), "int32": (3, "int_val"),
    "uint8": (4, "int_val"), "int16": (5, "int_val"), "int8": (6, "int_val"),
    "string": (7, "string_val"), "int64": (9, "int64_val"), "bool": (10, "bool_val"),
    "uint16": (17, "int_val"), "uint32": (22, "uint32_val"), "uint64": (23, "uint64_val"),
}


def tolerance(fixture):
    return (1e-4, 1e-3) if any(k in fixture for k in DEEP) else (1e-5, 1e-4)


def want_value(v):
    if isinstance(v, str) and v in ("nan", "inf", "-inf"):
        return float(v)
    return v


def nested(flat, shape):
    if not shape:
        return flat[0]
    step = 1
    for d in shape[1:]:
        step *= d
    return [nested(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


def flatten(x):
    if isinstance(x, list):
        out = []
        for e in x:
            out.extend(flatten(e))
        return out
    return [x]


def shape_of(x):
    s = []
    while isinstance(x, list):
        s.append(len(x))
        x = x[0] if x else None
    return s


def values_match(got, want, dtype, fixture):
    """Every element within |got - want| <= atol + rtol |want| (floats; nan matches nan), equal
    otherwise. Returns None or the first difference as text."""
    if len(got) != len(want):
        return "%d values, want %d" % (len(got), len(want))
    atol, rtol = tolerance(fixture)
    for i, (a, b) in enumerate(zip(got, want)):
        b = want_value(b)
        if dtype in ("float32", "float64"):
            a = float(a)
            if math.isnan(b) and math.isnan(a):
                continue
            if math.isinf(b) and a == b:
                continue
            if not abs(a - b) <= atol + rtol * abs(b):
                return "element %d: got %r, want %r" % (i, a, b)
        elif a != b:
            return "element %d: got %r, want %r" % (i, a, b)
    return None


def rest_json_value(spec):
    vals = spec["values"]
    if spec["dtype"] == "string":
        if spec.get("encoding") == "base64":
            vals = [{"b64": v} for v in vals]
    return nested(vals, spec["shape"])


def rest_predict(port, model, golden):
    body = {"signature_name": golden["signature"],
            "inputs": {k: rest_json_value(v) for k, v in golden["inputs"].items()}}
    req = urllib.request.Request("http://127.0.0.1:%d/v1/models/%s:predict" % (port, model),
                                 data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def check_rest(port, model, golden, what):
    status, doc = rest_predict(port, model, golden)
    if not g.check(status == 200 and "outputs" in doc, "%s REST: HTTP %d %s" % (what, status,
                                                                            str(doc)[:400])):
        return
    outs = doc["outputs"]
    if len(golden["outputs"]) == 1 and not isinstance(outs, dict):
        outs = {next(iter(golden["outputs"])): outs}
    for alias, spec in golden["outputs"].items():
        if not g.check(alias in outs, "%s REST: output %s missing (%s)" % (what, alias,
                                                                         list(outs)[:10])):
            continue
        got = outs[alias]
        got_shape = shape_of(got)
        # JSON cannot tell [] from a 0-sized dimension past the first; compare shapes where both
        # have elements.
        g.check(got_shape == spec["shape"] or 0 in spec["shape"],
                "%s REST %s: shape %s, want %s" % (what, alias, got_shape, spec["shape"]))
        flat = flatten(got)
        if spec["dtype"] == "string":
            flat = [base64.b64encode(v.encode("latin-1")).decode() if isinstance(v, str)
                    else v.get("b64") for v in flat]
            want = spec["values"] if spec.get("encoding") == "base64" else \
                [base64.b64encode(w.encode()).decode() for w in spec["values"]]
            diff = values_match(flat, want, "string", model)
        else:
            diff = values_match(flat, spec["values"], spec["dtype"], model)
        g.check(diff is None, "%s REST %s: %s" % (what, alias, diff))


def tensor_proto(spec):
    from tensorflow.core.framework import tensor_pb2
    t = tensor_pb2.TensorProto()
    enum, field = DTYPES[spec["dtype"]]
    t.dtype = enum
    for d in spec["shape"]:
        t.tensor_shape.dim.add().size = d
    vals = spec["values"]
    if spec["dtype"] == "string":
        vals = [base64.b64decode(v) if spec.get("encoding") == "base64" else v.encode()
                for v in vals]
    getattr(t, field).extend(vals)
    return t


def proto_values(t, dtype):
    from tensorflow.core.framework import tensor_pb2  # noqa: F401
    enum, field = DTYPES[dtype]
    if t.tensor_content:
        import numpy as np
        npt = {"float32": "<f4", "float64": "<f8", "int32": "<i4", "uint8": "u1", "int8": "i1",
               "int16": "<i2", "int64": "<i8", "bool": "?", "uint16": "<u2", "uint32": "<u4",
               "uint64": "<u8"}[dtype]
        return np.frombuffer(t.tensor_content, dtype=npt).tolist()
    return list(getattr(t, field))


def check_grpc(channel, model, golden, what):
    from tensorflow_serving.apis import predict_pb2
    req = predict_pb2.PredictRequest()
    req.model_spec.name = model
    req.model_spec.signature_name = golden["signature"]
    for k, spec in golden["inputs"].items():
        req.inputs[k].CopyFrom(tensor_proto(spec))
    call = channel.unary_unary(g.PS + "Predict", request_serializer=lambda m: m.SerializeToString(),
                               response_deserializer=predict_pb2.PredictResponse.FromString)
    try:
        r = call(req, timeout=120)
    except grpc.RpcError as e:
        g.check(False, "%s gRPC: %s %s" % (what, e.code(), e.details()))
        return
    for alias, spec in golden["outputs"].items():
        if not g.check(alias in r.outputs, "%s gRPC: output %s missing (%s)"
                       % (what, alias, list(r.outputs.keys())[:10])):
            continue
        t = r.outputs[alias]
        got_shape = [d.size for d in t.tensor_shape.dim]
        g.check(got_shape == spec["shape"], "%s gRPC %s: shape %s, want %s"
                % (what, alias, got_shape, spec["shape"]))
        g.check(t.dtype == DTYPES[spec["dtype"]][0], "%s gRPC %s: dtype %d, want %s"
                % (what, alias, t.dtype, spec["dtype"]))
        got = proto_values(t, spec["dtype"])
        if spec["dtype"] == "string":
            got = [base64.b64encode(v).decode() for v in got]
            want = spec["values"] if spec.get("encoding") == "base64" else \
                [base64.b64encode(w.encode()).decode() for w in spec["values"]]
            diff = values_match(got, want, "string", model)
        else:
            diff = values_match(got, spec["values"], spec["dtype"], model)
        g.check(diff is None, "%s gRPC %s: %s" % (what, alias, diff))


def cpu_seconds(pid):
    """User + system CPU seconds the process has used (/proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def check_run_cancelled(channel, pid, what, steps, model=None):
    """An LSTM request whose sequence length sets its While loop's count (about a minute of CPU
    for `steps`) with a 0.5 s deadline: the client gets DEADLINE_EXCEEDED, and the server stops the
    run there (TF Serving's --enforce_session_run_timeout) instead of burning the CPU after."""
    from tensorflow_serving.apis import predict_pb2
    req = predict_pb2.PredictRequest()
    model = model or what
    req.model_spec.name = model
    t = req.inputs["input_6"]
    t.dtype = 1
    for d in (1, steps, 1):
        t.tensor_shape.dim.add().size = d
    t.float_val.extend([0.5] * steps)
    call = channel.unary_unary(g.PS + "Predict", request_serializer=lambda m: m.SerializeToString(),
                               response_deserializer=predict_pb2.PredictResponse.FromString)
    c0 = cpu_seconds(pid)
    t0 = time.time()
    try:
        call(req, timeout=0.5)
        g.check(False, "%s: a %d-step sequence answered within 0.5 s" % (what, steps))
    except grpc.RpcError as e:
        g.check(e.code() == grpc.StatusCode.DEADLINE_EXCEEDED, "%s long run: %s %s"
                % (what, e.code(), e.details()))
    time.sleep(max(0.0, t0 + 1.5 - time.time()))
    c1 = cpu_seconds(pid)
    time.sleep(1.0)
    c2 = cpu_seconds(pid)
    g.check(c2 - c1 < 0.3, "%s: the server used %.2f CPU s in the second after the deadline "
            "(%.2f s in the first 1.5 s)" % (what, c2 - c1, c1 - c0))


def check_batched_run_cancelled(build, tmp, model, steps):
    """The same long request through the batch queue (--enable_batching): the batch's run stops at
    the latest deadline of its tasks, so a lone task's deadline stops it too."""
    grpc_port, rest_port = g.free_port(), g.free_port()
    log = open(os.path.join(tmp, "tfserve-batching.log"), "w+")
    proc = subprocess.Popen([os.path.join(build, "server", "tfserve"), "--port=%d" % grpc_port,
                             "--rest_api_port=%d" % rest_port, "--model_name=" + model,
                             "--model_base_path=" + os.path.join(tmp, "models", model),
                             "--enable_batching"], stdout=log, stderr=subprocess.STDOUT)
    try:
        state = wait_available(rest_port, [model], 120).get(model, ("NO ANSWER", ""))
        if g.check(state[0] == "AVAILABLE", "%s with batching: state %s" % (model, state)):
            channel = grpc.insecure_channel("127.0.0.1:%d" % grpc_port,
                                            options=[("grpc.max_receive_message_length", -1)])
            check_run_cancelled(channel, proc.pid, model + " (batched)", steps, model)
            channel.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if g.FAILED:
            log.seek(0)
            sys.stdout.write("tfserve (batching) log tail:\n" + log.read()[-2000:] + "\n")
        log.close()


def wait_available(port, models, deadline_s):
    """Polls each model's REST status until every one is AVAILABLE or has ended; returns
    {model: (state, error message)}."""
    states = {}
    deadline = time.time() + deadline_s
    while time.time() < deadline:
        for m in models:
            if m in states and states[m][0] in ("AVAILABLE", "END"):
                continue
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/v1/models/%s" % (port, m),
                                            timeout=5) as r:
                    doc = json.loads(r.read())
                v = doc["model_version_status"][0]
                states[m] = (v["state"], v.get("status", {}).get("error_message", ""))
            except (urllib.error.URLError, KeyError, IndexError, ValueError, OSError):
                pass
        if len(states) == len(models) and all(s[0] in ("AVAILABLE", "END")
                                               for s in states.values()):
            break
        time.sleep(0.2)
    return states


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--only", help="a comma-separated list of fixture names")
    a = ap.parse_args()
    build, source = os.path.abspath(a.build), os.path.abspath(a.source)
    fx = g.fixtures_dir(source, "real")
    if not os.path.isdir(fx):
        print("SKIP: real SavedModel tests: %s is absent (set TFS_FIXTURES)" % fx, flush=True)
        return 77
    names = sorted(os.path.basename(os.path.dirname(p))
                   for p in glob.glob(os.path.join(fx, "*", "model")))
    if a.only:
        names = [n for n in names if n in a.only.split(",")]
    if not names:
        print("SKIP: real SavedModel tests: no NAME/model folders under %s" % fx, flush=True)
        return 77
    tmp = tempfile.mkdtemp(prefix="tfs-real-test-")
    proc = None
    log = None
    try:
        g.gen_stubs(source, tmp)
        # tfserve-inspect --check: the same import and a dry run of every signature, no server.
        for n in names:
            p = subprocess.run([os.path.join(build, "savedmodel", "tfserve-inspect"), "--check",
                                os.path.join(fx, n, "model")], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=300)
            g.check(p.returncode == 0, "%s: tfserve-inspect --check exit %d: %s"
                    % (n, p.returncode, p.stdout.decode(errors="replace")[-600:]))
        # One base path per model, its version 1 a link to the fixture (read-only, kept as is).
        config = ["model_config_list {"]
        for n in names:
            base = os.path.join(tmp, "models", n)
            os.makedirs(base)
            os.symlink(os.path.join(fx, n, "model"), os.path.join(base, "1"))
            config.append('  config { name: "%s" base_path: "%s" model_platform: "tensorflow" }'
                          % (n, base))
        config.append("}")
        cfg = os.path.join(tmp, "models.config")
        with open(cfg, "w") as f:
            f.write("\n".join(config) + "\n")
        grpc_port, rest_port = g.free_port(), g.free_port()
        log = open(os.path.join(tmp, "tfserve.log"), "w+")
        proc = subprocess.Popen([os.path.join(build, "server", "tfserve"),
                                 "--port=%d" % grpc_port, "--rest_api_port=%d" % rest_port,
                                 "--model_config_file=" + cfg], stdout=log,
                                stderr=subprocess.STDOUT)
        states = wait_available(rest_port, names, 240)
        channel = grpc.insecure_channel("127.0.0.1:%d" % grpc_port,
                                        options=[("grpc.max_receive_message_length", -1)])
        for n in names:
            state, err = states.get(n, ("NO ANSWER", ""))
            if not g.check(state == "AVAILABLE", "%s: state %s: %s" % (n, state, err[:600])):
                continue
            for gf in sorted(glob.glob(os.path.join(fx, n, "golden", "*.json"))):
                with open(gf) as f:
                    golden = json.load(f)
                what = "%s/%s" % (n, golden["signature"])
                check_rest(rest_port, n, golden, what)
                check_grpc(channel, n, golden, what)
        if "iteam1_lstm" in names and states.get("iteam1_lstm", ("",))[0] == "AVAILABLE":
            check_run_cancelled(channel, proc.pid, "iteam1_lstm", 300000)
            check_batched_run_cancelled(build, tmp, "iteam1_lstm", 300000)
        channel.close()
        g.check(proc.poll() is None, "tfserve still running after every request")
    finally:
        if proc and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if log:
            if g.FAILED:
                log.seek(0)
                sys.stdout.write("tfserve log tail:\n" + log.read()[-4000:] + "\n")
            log.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (g.PASSED, g.FAILED), flush=True)
    return 1 if g.FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
