#!/usr/bin/python3
"""System test of tfserve's gRPC API with a real gRPC client.

Generates Python stubs at test time (Debian's protoc, into a temporary folder) from the project's
own .proto files, starts <build>/server/tfserve on free loopback ports and calls every RPC the way
tensorflow-serving-api clients do: Predict (float_val and tensor_content, output_filter, version
pinning), GetModelMetadata, GetModelStatus, the counter model's stateful signatures, and the
errors TF Serving clients see (codes and texts). With --fixtures, the same checks on TF Serving's
own exports (the TensorFlow fixtures, $TFS_FIXTURES) instead of the demo model: exit 77 (skipped)
when they are absent. Prints "N passed, M failed"; exit 1 on a failure.

Run: /usr/bin/python3 grpc_client_test.py --build BUILD_DIR --source SOURCE_DIR [--fixtures]
"""
import argparse
import glob
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

import grpc

PASSED = 0
FAILED = 0
PS = "/tensorflow.serving.PredictionService/"
MS = "/tensorflow.serving.ModelService/"


def check(cond, what):
    global PASSED, FAILED
    if cond:
        PASSED += 1
    else:
        FAILED += 1
        print("FAIL: " + what, flush=True)
    return cond


def close(a, b, tol=1e-6):
    return len(a) == len(b) and all(abs(x - y) <= tol for x, y in zip(a, b))


def fixtures_dir(source, rel):
    """A folder of the TensorFlow fixtures: under $TFS_FIXTURES, else the shared/fixtures folder
    beside the checkout (as tfs_test_fixture in tests/support/tfs-test.c)."""
    root = os.environ.get("TFS_FIXTURES") or os.path.join(source, "..", "shared", "fixtures")
    return os.path.normpath(os.path.join(root, rel))


def gen_stubs(source, out):
    proto = os.path.join(source, "proto")
    files = sorted(os.path.relpath(p, proto) for p in
                   glob.glob(os.path.join(proto, "tensorflow*", "**", "*.proto"), recursive=True))
    subprocess.run(["protoc", "--python_out=" + out, "-I" + proto, "-I/usr/include"] + files,
                   check=True)
    sys.path.insert(0, out)


_given_ports = []


def free_port():
    """A port that was free a moment ago and was not given out before by this process: the
    kernel can hand the same ephemeral port to two binds in a row, and a server's REST and gRPC
    ports must differ."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _given_ports:
            break
    _given_ports.append(port)
    return port


class Server:
    """The real tfserve binary serving one model on a free port; always killed."""

    def __init__(self, build, name, base, logdir, extra=()):
        self.port = free_port()
        self.log = open(os.path.join(logdir, "tfserve-%s-%d.log" % (name, self.port)), "w+")
        self.proc = subprocess.Popen(
            [os.path.join(build, "server", "tfserve"), "--port=%d" % self.port,
             "--model_name=" + name, "--model_base_path=" + base] + list(extra),
            stdout=self.log, stderr=subprocess.STDOUT)
        self.channel = grpc.insecure_channel(
            "127.0.0.1:%d" % self.port,
            options=[("grpc.max_receive_message_length", -1),
                     ("grpc.max_send_message_length", -1)])
        try:
            grpc.channel_ready_future(self.channel).result(timeout=30)
        except grpc.FutureTimeoutError:
            text = self.logs()
            self.stop()
            raise RuntimeError("tfserve did not open gRPC port %d:\n%s" % (self.port, text))
        # Readiness of the port does not mean the model is loaded: wait for AVAILABLE.
        from tensorflow_serving.apis import get_model_status_pb2 as gms
        deadline = time.time() + 30
        while time.time() < deadline:
            req = gms.GetModelStatusRequest()
            req.model_spec.name = name
            try:
                r = self.call(MS + "GetModelStatus", req, gms.GetModelStatusResponse)
                if any(v.state == gms.ModelVersionStatus.AVAILABLE for v in r.model_version_status):
                    return
            except grpc.RpcError:
                pass
            time.sleep(0.05)

    def call(self, path, req, resp_type, timeout=10):
        f = self.channel.unary_unary(path, request_serializer=lambda m: m.SerializeToString(),
                                     response_deserializer=resp_type.FromString)
        return f(req, timeout=timeout)

    def raw(self, path, data, timeout=10):
        return self.channel.unary_unary(path)(data, timeout=timeout)

    def logs(self):
        if self.log.closed:
            return "(log closed)"
        self.log.seek(0)
        return self.log.read()

    def dump_stacks(self):
        """Says where a server that did not exit hangs: its log tail and, where gdb exists,
        every thread's stack."""
        sys.stderr.write("tfserve has not exited since SIGTERM; log tail:\n%s\n"
                         % self.logs()[-3000:])
        if shutil.which("gdb"):
            subprocess.run(["gdb", "-p", str(self.proc.pid), "-batch", "-ex",
                            "thread apply all bt"], stdout=sys.stderr,
                           stderr=subprocess.STDOUT, timeout=60)
        sys.stderr.flush()

    def terminate(self):
        """SIGTERM and wait for the exit, saying where it waits (dump_stacks) when it has not
        exited after 5 s, then 5 s more; returns (exit status or "hung", seconds taken)."""
        t0 = time.time()
        self.proc.terminate()
        try:
            rc = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.dump_stacks()
            try:
                rc = self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                rc = "hung"
        return rc, time.time() - t0

    def stop(self):
        """SIGTERM, then check the exit is clean and prompt."""
        self.channel.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                rc = self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.dump_stacks()
                self.proc.kill()
                self.proc.wait()
                rc = None
            check(rc == 0, "tfserve exits 0 on SIGTERM (rc %s)" % rc)
        self.log.close()


def expect_error(fn, code, text, what):
    """fn fails with `code` and details that are not empty and hold `text` (a string, or a tuple
    of strings that must all be there)."""
    texts = text if isinstance(text, tuple) else (text,)
    try:
        fn()
        check(False, what + ": expected %s, got OK" % code)
    except grpc.RpcError as e:
        details = e.details() or ""
        ok = e.code() == code and details.strip() and all(t in details for t in texts)
        check(ok, "%s: expected %s %r, got %s %r" % (what, code, text, e.code(), details))


def rest_post(port, path, body):
    """POSTs body (text) to tfserve's REST port: (HTTP status, the parsed JSON answer)."""
    import json
    import urllib.error
    import urllib.request
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=body.encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as f:
            return f.status, json.loads(f.read().decode())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read().decode())


def expect_rest_error(port, path, body, status, text, what):
    got_status, doc = rest_post(port, path, body)
    err = doc.get("error", "") if isinstance(doc, dict) else ""
    check(got_status == status and err.strip() and text in err,
          "REST %s: expected %d %r, got %d %r" % (what, status, text, got_status, doc))


def predict_req(name, values=None, content=False, version=None, label=None, signature=None,
                dtype=1, shape=None, key="x"):
    from tensorflow_serving.apis import predict_pb2
    req = predict_pb2.PredictRequest()
    req.model_spec.name = name
    if version is not None:
        req.model_spec.version.value = version
    if label is not None:
        req.model_spec.version_label = label
    if signature is not None:
        req.model_spec.signature_name = signature
    if values is not None:
        t = req.inputs[key]
        t.dtype = dtype
        for d in (shape if shape is not None else [len(values)]):
            t.tensor_shape.dim.add().size = d
        if content:
            t.tensor_content = struct.pack("<%df" % len(values), *values)
        else:
            t.float_val.extend(values)
    return req


def predict(srv, req):
    from tensorflow_serving.apis import predict_pb2
    return srv.call(PS + "Predict", req, predict_pb2.PredictResponse)


def check_half_plus_two(srv, name, version, what):
    for content in (False, True):
        r = predict(srv, predict_req(name, [1.0, 2.0, 5.0], content=content))
        y = r.outputs["y"]
        check(list(r.outputs.keys()) == ["y"], "%s: outputs %s" % (what, list(r.outputs.keys())))
        check(close(list(y.float_val), [2.5, 3.0, 4.5]) and y.dtype == 1,
              "%s predict (tensor_content=%s): %s" % (what, content, y))
        check([d.size for d in y.tensor_shape.dim] in ([3], [3, 1]),
              "%s output shape %s" % (what, y.tensor_shape))
        check(not y.tensor_content, "%s: response uses typed fields" % what)
        check(r.model_spec.name == name and r.model_spec.version.value == version and
              r.model_spec.signature_name == "serving_default",
              "%s response model_spec %s" % (what, r.model_spec))
    # A single float_val broadcasts to the shape (TF's last-value rule).
    r = predict(srv, predict_req(name, [4.0], shape=[3]))
    check(close(list(r.outputs["y"].float_val), [4.0, 4.0, 4.0]),
          "%s broadcast float_val: %s" % (what, r.outputs["y"].float_val))
    # output_filter: the named output only; unknown and duplicate aliases refused.
    req = predict_req(name, [1.0])
    req.output_filter.append("y")
    r = predict(srv, req)
    check(close(list(r.outputs["y"].float_val), [2.5]), "%s output_filter y" % what)
    req.output_filter.append("y")
    expect_error(lambda: predict(srv, req), grpc.StatusCode.INVALID_ARGUMENT,
                 "duplicate output tensor alias: y", what + " duplicate output_filter")
    req = predict_req(name, [1.0])
    req.output_filter.append("nope")
    expect_error(lambda: predict(srv, req), grpc.StatusCode.INVALID_ARGUMENT,
                 "output tensor alias not found in signature: nope", what + " bad output_filter")


def check_metadata(srv, name, version, what, signatures):
    from tensorflow_serving.apis import get_model_metadata_pb2 as gmm
    req = gmm.GetModelMetadataRequest()
    req.model_spec.name = name
    req.metadata_field.append("signature_def")
    r = srv.call(PS + "GetModelMetadata", req, gmm.GetModelMetadataResponse)
    anyv = r.metadata["signature_def"]
    check(anyv.type_url == "type.googleapis.com/tensorflow.serving.SignatureDefMap",
          "%s metadata type_url %r" % (what, anyv.type_url))
    m = gmm.SignatureDefMap()
    check(anyv.Unpack(m), what + " metadata Any unpacks")
    for s in signatures:
        check(s in m.signature_def, "%s metadata has signature %s (%s)"
              % (what, s, sorted(m.signature_def.keys())))
    sd = m.signature_def["serving_default"]
    x = sd.inputs["x"]
    check(x.name in ("x:0", "serving_default_x:0") and x.dtype == 1, "%s serving_default input x: %s" % (what, x))
    check("y" in sd.outputs and sd.method_name == "tensorflow/serving/predict",
          "%s serving_default outputs/method: %s" % (what, sd))
    check(r.model_spec.name == name and r.model_spec.version.value == version,
          "%s metadata model_spec %s" % (what, r.model_spec))
    req.ClearField("metadata_field")
    expect_error(lambda: srv.call(PS + "GetModelMetadata", req, gmm.GetModelMetadataResponse),
                 grpc.StatusCode.INVALID_ARGUMENT,
                 "GetModelMetadataRequest must specify at least one metadata_field",
                 what + " metadata without metadata_field")
    req.metadata_field.append("graph")
    expect_error(lambda: srv.call(PS + "GetModelMetadata", req, gmm.GetModelMetadataResponse),
                 grpc.StatusCode.INVALID_ARGUMENT, "Metadata field graph is not supported",
                 what + " metadata field graph")


def check_metadata_json(srv, name, path, what):
    """The SignatureDefMap equals what TF Serving answers for the same model (fixture JSON)."""
    import json
    from google.protobuf import json_format
    from tensorflow_serving.apis import get_model_metadata_pb2 as gmm
    req = gmm.GetModelMetadataRequest()
    req.model_spec.name = name
    req.metadata_field.append("signature_def")
    r = srv.call(PS + "GetModelMetadata", req, gmm.GetModelMetadataResponse)
    m = gmm.SignatureDefMap()
    r.metadata["signature_def"].Unpack(m)
    got = json_format.MessageToDict(m, preserving_proto_field_name=True,
                                    including_default_value_fields=True)
    with open(path) as f:
        want = json.load(f)["metadata"]["signature_def"]
    check(got == want, "%s SignatureDefMap equals %s:\n%s" % (what, path, json.dumps(got)))


def examples(inp, values, key="x"):
    for v in values:
        e = inp.examples.add()
        if v is not None:
            e.features.feature[key].float_list.value.append(v)


def check_classify_regress(srv, name, version, what):
    from tensorflow_serving.apis import classification_pb2 as C
    from tensorflow_serving.apis import inference_pb2 as I
    from tensorflow_serving.apis import regression_pb2 as R
    E = grpc.StatusCode
    q = C.ClassificationRequest()
    q.model_spec.name = name
    q.model_spec.signature_name = "classify_x_to_y"
    examples(q.input.example_list, [1.0, 2.0])
    r = srv.call(PS + "Classify", q, C.ClassificationResponse)
    got = [[(c.label, c.score) for c in cl.classes] for cl in r.result.classifications]
    check(got == [[("", 2.5)], [("", 3.0)]], "%s classify_x_to_y: %s" % (what, got))
    check(r.model_spec.name == name and r.model_spec.version.value == version and
          r.model_spec.signature_name == "classify_x_to_y", "%s classify model_spec %s"
          % (what, r.model_spec))
    for sig, want in (("regress_x_to_y", [2.5, 3.0]), ("regress_x_to_y2", [3.5, 4.0])):
        q = R.RegressionRequest()
        q.model_spec.name = name
        q.model_spec.signature_name = sig
        examples(q.input.example_list, [1.0, 2.0])
        r = srv.call(PS + "Regress", q, R.RegressionResponse)
        got = [x.value for x in r.result.regressions]
        check(close(got, want), "%s %s: %s, want %s" % (what, sig, got, want))
    # A context fills the features an example leaves out; the example's own value wins.
    q = R.RegressionRequest()
    q.model_spec.name = name
    q.model_spec.signature_name = "regress_x_to_y"
    c = q.input.example_list_with_context
    c.context.features.feature["x"].float_list.value.append(4.0)
    examples(c, [None, 1.0])
    r = srv.call(PS + "Regress", q, R.RegressionResponse)
    got = [x.value for x in r.result.regressions]
    check(close(got, [4.0, 2.5]), "%s regress with context: %s" % (what, got))
    q.model_spec.signature_name = "nope"
    expect_error(lambda: srv.call(PS + "Regress", q, R.RegressionResponse), E.INVALID_ARGUMENT,
                 "No signature was found with the name: nope", what + " regress unknown signature")
    q = C.ClassificationRequest()
    q.model_spec.name = name
    q.model_spec.signature_name = "classify_x_to_y"
    expect_error(lambda: srv.call(PS + "Classify", q, C.ClassificationResponse),
                 E.INVALID_ARGUMENT, "Input is empty.", what + " classify without examples")
    # MultiInference: classify and regress over one input, results in task order.
    q = I.MultiInferenceRequest()
    for sig, method in (("classify_x_to_y", "tensorflow/serving/classify"),
                        ("regress_x_to_y2", "tensorflow/serving/regress")):
        t = q.tasks.add()
        t.model_spec.name = name
        t.model_spec.signature_name = sig
        t.method_name = method
    examples(q.input.example_list, [1.0, 2.0])
    r = srv.call(PS + "MultiInference", q, I.MultiInferenceResponse)
    ok = (len(r.results) == 2 and
          [c.classes[0].score for c in r.results[0].classification_result.classifications] ==
          [2.5, 3.0] and
          close([x.value for x in r.results[1].regression_result.regressions], [3.5, 4.0]) and
          r.results[1].model_spec.signature_name == "regress_x_to_y2" and
          r.results[0].model_spec.version.value == version)
    check(ok, "%s multi-inference: %s" % (what, r))
    q.tasks[1].model_spec.signature_name = "classify_x_to_y"
    expect_error(lambda: srv.call(PS + "MultiInference", q, I.MultiInferenceResponse),
                 E.INVALID_ARGUMENT, "Duplicate evaluation of signature: classify_x_to_y",
                 what + " multi-inference duplicate signature")
    q.tasks[1].model_spec.signature_name = "regress_x_to_y"
    q.tasks[1].model_spec.name = "other"
    expect_error(lambda: srv.call(PS + "MultiInference", q, I.MultiInferenceResponse),
                 E.INVALID_ARGUMENT, "must access the same model name",
                 what + " multi-inference two models")
    q.tasks[1].model_spec.name = name
    q.tasks[1].method_name = "tensorflow/serving/predict"
    expect_error(lambda: srv.call(PS + "MultiInference", q, I.MultiInferenceResponse),
                 E.UNIMPLEMENTED, "Unsupported signature method_name: tensorflow/serving/predict",
                 what + " multi-inference predict task")


def check_status(srv, name, versions, what):
    from tensorflow_serving.apis import get_model_status_pb2 as gms
    req = gms.GetModelStatusRequest()
    req.model_spec.name = name
    r = srv.call(MS + "GetModelStatus", req, gms.GetModelStatusResponse)
    got = sorted((v.version, v.state, v.status.error_code) for v in r.model_version_status)
    want = sorted((v, gms.ModelVersionStatus.AVAILABLE, 0) for v in versions)
    check(got == want, "%s status %s, want %s" % (what, got, want))
    req.model_spec.name = "nope"
    expect_error(lambda: srv.call(MS + "GetModelStatus", req, gms.GetModelStatusResponse),
                 grpc.StatusCode.NOT_FOUND, "nope", what + " status of unknown model")


def check_errors(srv, name, what):
    from tensorflow_serving.apis import predict_pb2
    E = grpc.StatusCode
    expect_error(lambda: predict(srv, predict_req("nope", [1.0])), E.NOT_FOUND,
                 "Servable not found for request: Latest(nope)", what + " unknown model")
    expect_error(lambda: predict(srv, predict_req(name, [1.0], version=999)), E.NOT_FOUND,
                 "Servable not found for request: Specific(%s, 999)" % name,
                 what + " unknown version")
    expect_error(lambda: predict(srv, predict_req(name, [1.0], signature="nope")),
                 E.FAILED_PRECONDITION, 'Serving signature key "nope" not found.',
                 what + " unknown signature")
    expect_error(lambda: predict(srv, predict_pb2.PredictRequest()), E.INVALID_ARGUMENT,
                 "Missing ModelSpec", what + " no model_spec")
    expect_error(lambda: predict(srv, predict_req("", [1.0])), E.INVALID_ARGUMENT,
                 "ModelSpec has no name specified.", what + " empty model name")
    req = predict_req(name)
    t = req.inputs["x"]
    t.dtype = 7
    t.tensor_shape.dim.add().size = 1
    t.string_val.append(b"abc")
    expect_error(lambda: predict(srv, req), E.INVALID_ARGUMENT,
                 "input 'x': expected dtype DT_FLOAT, got DT_STRING",
                 what + " wrong dtype (string)")
    req = predict_req(name, [1.0, 2.0], content=True, shape=[3])
    expect_error(lambda: predict(srv, req), E.INVALID_ARGUMENT, "tensor_content",
                 what + " tensor_content size mismatch")
    req = predict_req(name)
    t = req.inputs["x"]
    t.dtype = 19
    t.tensor_shape.dim.add().size = 1
    t.half_val.append(0x3C00)
    expect_error(lambda: predict(srv, req), E.INVALID_ARGUMENT, "half_val", what + " half_val")
    req = predict_req(name, [1.0], key="nope")
    expect_error(lambda: predict(srv, req), E.INVALID_ARGUMENT, "nope",
                 what + " unknown input name")
    # One value broadcast to 2^40 floats (4 TiB) by a 20-byte tensor: refused before allocating.
    req = predict_req(name, [1.0], shape=[1 << 40])
    expect_error(lambda: predict(srv, req), E.INVALID_ARGUMENT, "shape too large",
                 what + " one float_val declared as 2^40 values")
    expect_error(lambda: srv.raw(PS + "Predict", b"\xff\xff\xff\xff garbage"), E.INVALID_ARGUMENT,
                 "", what + " garbage bytes")
    t0 = time.time()
    expect_error(lambda: srv.raw("/tensorflow.serving.PredictionService/Nope", b"", timeout=5),
                 E.UNIMPLEMENTED, "", what + " unknown method")
    check(time.time() - t0 < 1.0, "%s unknown method answered in %.2f s" % (what, time.time() - t0))
    from tensorflow_serving.apis import classification_pb2 as C
    q = C.ClassificationRequest()
    q.model_spec.name = name
    examples(q.input.example_list, [1.0])
    expect_error(lambda: srv.call(PS + "Classify", q, C.ClassificationResponse),
                 E.INVALID_ARGUMENT, "" if what != "demo" else "No classification inputs found",
                 what + " classify on a predict signature")
    # A request without a model_config_list is refused with TF Serving's text.
    expect_error(lambda: srv.raw(MS + "HandleReloadConfigRequest", b""), E.INVALID_ARGUMENT,
                 "Only ModelConfigList is currently supported",
                 what + " HandleReloadConfigRequest without a config")
    # Still serving after all of that.
    r = predict(srv, predict_req(name, [1.0]))
    check(close(list(r.outputs["y"].float_val), [2.5]), what + " still answers after errors")


def check_input_errors(srv, name, what, rest_port=None, default_x=False):
    """Each way a Predict's inputs can be wrong gets its code and a reason that names the input,
    over gRPC and (rest_port given) over REST; names are checked before any tensor is decoded.
    default_x: the signature has a default for x (TF2's export), which changes TF Serving's
    checks: no count check, a missing x is fed the default."""
    from tensorflow_serving.apis import predict_pb2
    E = grpc.StatusCode
    bad_in = E.INVALID_ARGUMENT
    req = predict_pb2.PredictRequest()
    req.model_spec.name = name
    if default_x:
        check(len(predict(srv, req).outputs["y"].float_val) > 0,
              what + " missing input with a default: answered")
        unknown = "Inputs contains invalid name. Used request inputs: , request input: nope"
        extra = "Inputs contains invalid name. Used request inputs: x, request input: extra,x"
    else:
        expect_error(lambda: predict(srv, req), bad_in,
                     "input size does not match signature: 0!=1 len({}) != len({x}). "
                     "Sent extra: {}. Missing but required: {x}.", what + " missing input")
        unknown = ("Signature input alias: x(feed name: ", "not found in request and no default "
                   "value provided. Inputs expected to be in the request {nope}, or default "
                   "input alias set: ")
        extra = ("input size does not match signature: 2!=1 len({extra,x}) != len({x}). "
                 "Sent extra: {extra}. Missing but required: {}.")
    req = predict_req(name, [1.0], key="nope")
    expect_error(lambda: predict(srv, req), bad_in, unknown, what + " unknown input")
    req = predict_req(name, [1.0])
    req.inputs["extra"].CopyFrom(req.inputs["x"])
    expect_error(lambda: predict(srv, req), bad_in, extra, what + " extra input")
    # Names come before tensors: an unknown or extra input whose tensor cannot be decoded is
    # refused for its name, not for its tensor.
    for inputs, text in ((["nope"], unknown), (["x", "extra"], extra)):
        req = predict_req(name)
        for k in inputs:
            t = req.inputs[k]
            t.dtype = 1
            t.tensor_shape.dim.add().size = 3
            t.tensor_content = b"\0" * 5   # 5 bytes for 3 floats
        expect_error(lambda: predict(srv, req), bad_in, text,
                     what + " names checked before tensors (%s)" % inputs)
    # A key sent twice on the wire: the last one wins, as protobuf's map parsing does.
    second = predict_req(name, [1.0])
    second.ClearField("model_spec")
    twice = predict_req(name, [100.0]).SerializeToString() + second.SerializeToString()
    r = predict_pb2.PredictResponse.FromString(srv.raw(PS + "Predict", twice))
    check(close(list(r.outputs["y"].float_val), [2.5]), "%s input x sent twice: the last wins: %s"
          % (what, r.outputs["y"]))
    req = predict_req(name)
    t = req.inputs["x"]
    t.dtype = 7
    t.tensor_shape.dim.add().size = 1
    t.string_val.append(b"abc")
    expect_error(lambda: predict(srv, req), bad_in,
                 "input 'x': expected dtype DT_FLOAT, got DT_STRING", what + " wrong dtype")
    req = predict_req(name, [1.0], dtype=2)   # DT_DOUBLE
    expect_error(lambda: predict(srv, req), bad_in,
                 "input 'x': expected dtype DT_FLOAT, got DT_DOUBLE", what + " double for float")
    req = predict_req(name, [1.0], dtype=99)
    expect_error(lambda: predict(srv, req), bad_in,
                 "tensor parsing error: x (dtype DT_INVALID is not supported in a request)",
                 what + " dtype that does not exist")
    req = predict_req(name, [1.0, 2.0], content=True, shape=[3])
    expect_error(lambda: predict(srv, req), bad_in,
                 "tensor parsing error: x (tensor_content has 8 bytes, shape [3] of DT_FLOAT "
                 "needs 12)", what + " too few values")
    if not default_x:   # TF2's x is declared [1]
        # Values past the shape are ignored, as TensorFlow's Tensor::FromProto does.
        r = predict(srv, predict_req(name, [1.0, 2.0, 3.0], shape=[2]))
        check(close(list(r.outputs["y"].float_val), [2.5, 3.0]),
              "%s 3 float_val for shape [2]: the first 2 are used: %s" % (what, r.outputs["y"]))
    req = predict_req(name, [1.0], shape=[-2])
    expect_error(lambda: predict(srv, req), bad_in, "tensor parsing error: x (dimension 0",
                 what + " negative dimension")
    expect_error(lambda: predict(srv, predict_req(name, [1.0], signature="nope")),
                 E.FAILED_PRECONDITION, 'Serving signature key "nope" not found.',
                 what + " unknown signature")
    expect_error(lambda: predict(srv, predict_req("nope", [1.0])), E.NOT_FOUND,
                 "Servable not found for request: Latest(nope)", what + " unknown model")
    expect_error(lambda: predict(srv, predict_req(name, [1.0], version=999)), E.NOT_FOUND,
                 "Servable not found for request: Specific(%s, 999)" % name,
                 what + " unknown version")
    req = predict_req(name, [1.0])
    req.output_filter.extend(["y", "nope"])
    expect_error(lambda: predict(srv, req), bad_in,
                 "output tensor alias not found in signature: nope Outputs expected to be in the "
                 "set {y}.", what + " output_filter with an unknown alias")
    req = predict_req(name, [1.0])
    req.output_filter.extend(["y"] * 3)
    expect_error(lambda: predict(srv, req), bad_in, "duplicate output tensor alias: y",
                 what + " output_filter with y three times")
    if rest_port is None:
        return
    p = "/v1/models/%s:predict" % name
    for body, status, text, case in (
            ('{"inputs": {}}', 400, "Missing named input: x in 'inputs' object.", "missing input"),
            ('{"instances": [{}]}', 400, "JSON object: {} keys must be equal to: x",
             "missing input (rows)"),
            ('{"inputs": {"nope": [1.0]}}', 400, "Missing named input: x in 'inputs' object.",
             "unknown input"),
            ('{"instances": [{"nope": 1.0}]}', 400, "does not have named input: nope",
             "unknown input (rows)"),
            ('{"instances": [{"x": 1.0, "extra": 2.0}]}', 400,
             "does not have named input: extra", "extra input (rows)"),
            ('{"inputs": {"x": ["a"]}}', 400,
             'JSON Value: "a" Type: String is not of expected type: float', "bad dtype"),
            ('{"instances": [[1.0], [1.0, 2.0]]}', 400, "Expecting tensor size: 1 but got: 2",
             "too few values"),
            ('{"signature_name": "nope", "inputs": [1.0]}', 400,
             'Serving signature name: "nope" not found in signature def', "unknown signature")):
        expect_rest_error(rest_port, p, body, status, text, "%s %s" % (what, case))
    expect_rest_error(rest_port, "/v1/models/nope:predict", '{"inputs": [1.0]}', 404,
                      "Servable not found for request: Latest(nope)", what + " unknown model")
    expect_rest_error(rest_port, "/v1/models/%s/versions/999:predict" % name, '{"inputs": [1.0]}',
                      404, "Servable not found for request: Specific(%s, 999)" % name,
                      what + " unknown version")
    # Columnar "inputs" reads only the signature's names, as TF Serving does: an extra key is
    # not an error there.
    status, doc = rest_post(rest_port, p, '{"inputs": {"x": [1.0], "extra": [1.0]}}')
    check(status == 200 and doc == {"outputs": [2.5]},
          "%s REST columnar extra key ignored: %d %r" % (what, status, doc))


def check_method_errors(srv, name, what):
    """The other RPCs' errors carry their reasons too: unknown model and version for each."""
    from tensorflow_serving.apis import classification_pb2 as C
    from tensorflow_serving.apis import get_model_metadata_pb2 as gmm
    from tensorflow_serving.apis import get_model_status_pb2 as gms
    from tensorflow_serving.apis import inference_pb2 as I
    from tensorflow_serving.apis import regression_pb2 as R
    E = grpc.StatusCode
    for model, version, text in (("nope", None, "Latest(nope)"),
                                 (name, 999, "Specific(%s, 999)" % name)):
        def spec(ms):
            ms.name = model
            if version is not None:
                ms.version.value = version
        q = gmm.GetModelMetadataRequest()
        spec(q.model_spec)
        q.metadata_field.append("signature_def")
        expect_error(lambda: srv.call(PS + "GetModelMetadata", q, gmm.GetModelMetadataResponse),
                     E.NOT_FOUND, text, "%s GetModelMetadata %s" % (what, text))
        q = C.ClassificationRequest()
        spec(q.model_spec)
        examples(q.input.example_list, [1.0])
        expect_error(lambda: srv.call(PS + "Classify", q, C.ClassificationResponse),
                     E.NOT_FOUND, text, "%s Classify %s" % (what, text))
        q = R.RegressionRequest()
        spec(q.model_spec)
        examples(q.input.example_list, [1.0])
        expect_error(lambda: srv.call(PS + "Regress", q, R.RegressionResponse),
                     E.NOT_FOUND, text, "%s Regress %s" % (what, text))
        q = I.MultiInferenceRequest()
        t = q.tasks.add()
        spec(t.model_spec)
        t.method_name = "tensorflow/serving/regress"
        examples(q.input.example_list, [1.0])
        expect_error(lambda: srv.call(PS + "MultiInference", q, I.MultiInferenceResponse),
                     E.NOT_FOUND, text, "%s MultiInference %s" % (what, text))
    q = gms.GetModelStatusRequest()
    q.model_spec.name = name
    q.model_spec.version.value = 999
    expect_error(lambda: srv.call(MS + "GetModelStatus", q, gms.GetModelStatusResponse),
                 E.NOT_FOUND, "999", what + " GetModelStatus of an unknown version")
    q = I.MultiInferenceRequest()
    expect_error(lambda: srv.call(PS + "MultiInference", q, I.MultiInferenceResponse),
                 E.INVALID_ARGUMENT, "Found no tasks in the MultiInferenceRequest",
                 what + " MultiInference without tasks")


def sanitized(build):
    """Whether the build under test has sanitizers (TFS_SANITIZE set): everything runs several
    times slower there."""
    try:
        with open(os.path.join(build, "CMakeCache.txt")) as f:
            return any(line.startswith("TFS_SANITIZE:") and line.strip().split("=", 1)[1]
                       for line in f)
    except OSError:
        return False


def check_many_names(build, demo, tmp):
    """Requests with tens of thousands of names are refused in time linear in their size: on a
    server with ONE gRPC thread, a 50,000-input Predict, a 20,000-task MultiInference and a
    20,000-model ReloadConfig each get their error in under a second, and a normal Predict on
    another channel is answered within a second while they are being checked."""
    import threading
    from tensorflow_serving.apis import inference_pb2 as I
    from tensorflow_serving.apis import model_management_pb2 as mm
    from tensorflow_serving.apis import predict_pb2
    name = "half_plus_two"
    # The pairwise checks took 1.1-7.9 s here; ASan and UBSan make the linear ones a few times
    # slower than the second they get otherwise.
    limit = 3.0 if sanitized(build) else 1.0
    s = Server(build, name, demo, tmp, ["--grpc_num_threads=1"])
    other = grpc.insecure_channel("127.0.0.1:%d" % s.port,
                                  options=[("grpc.use_local_subchannel_pool", 1)])
    try:
        big = predict_pb2.PredictRequest()
        big.model_spec.name = name
        for i in range(50000):
            t = big.inputs["in_%06d" % i]
            t.dtype = 1
            t.float_val.append(1.0)
        multi = I.MultiInferenceRequest()
        for i in range(20000):
            t = multi.tasks.add()
            t.model_spec.name = name
            t.model_spec.signature_name = "sig_%06d" % i
            t.method_name = "tensorflow/serving/regress"
        examples(multi.input.example_list, [1.0])
        reload = mm.ReloadConfigRequest()
        for i in range(20000):
            c = reload.config.model_config_list.config.add()
            c.name = "m%06d" % (i % 19999)   # the last repeats the first
            c.base_path = demo
            c.model_platform = "tensorflow"
        normal = predict_req(name, [1.0])
        f = other.unary_unary(PS + "Predict", request_serializer=lambda m: m.SerializeToString(),
                              response_deserializer=predict_pb2.PredictResponse.FromString)
        f(normal, timeout=10)   # the second channel is connected before the clock starts
        for path, msg, text, what in (
                (PS + "Predict", big, "len({in_000000,in_000001,", "50,000 unknown inputs"),
                (PS + "MultiInference", multi, "No signature was found with the name: sig_000000",
                 "20,000 MultiInference tasks"),
                (MS + "HandleReloadConfigRequest", reload,
                 "Illegal to list model m000000 multiple times in config list",
                 "ReloadConfig listing 20,000 models")):
            data = msg.SerializeToString()
            res = {}

            def refused():
                t0 = time.time()
                try:
                    s.raw(path, data, timeout=60)
                    res["got"] = "OK"
                except grpc.RpcError as e:
                    res["got"] = (e.code(), e.details() or "")
                res["took"] = time.time() - t0

            th = threading.Thread(target=refused)
            th.start()
            worst, n = 0.0, 0
            while th.is_alive() or n == 0:
                t0 = time.time()
                try:
                    y = f(normal, timeout=10).outputs["y"].float_val
                    ok = close(list(y), [2.5])
                except grpc.RpcError:
                    ok = False
                worst = max(worst, time.time() - t0 if ok else 1e9)
                n += 1
            th.join()
            got = res["got"]
            check(got != "OK" and got[0] == grpc.StatusCode.INVALID_ARGUMENT and text in got[1],
                  "%s (%d bytes) refused with %r: %r" % (what, len(data), text, got))
            check(res["took"] < limit, "%s refused in %.3f s (limit %.0f s)"
                  % (what, res["took"], limit))
            check(worst < limit, "%s: normal Predicts meanwhile answered within %.3f s (limit "
                  "%.0f s)" % (what, worst, limit))
            print("%s (%d bytes): refused in %.3f s; %d normal Predicts meanwhile, slowest "
                  "%.3f s" % (what, len(data), res["took"], n, worst), flush=True)
    finally:
        other.close()
        s.stop()


def check_counter(srv, what):
    name = "counter"

    def run(sig, delta=None):
        req = predict_req(name, signature=sig)
        if delta is not None:
            t = req.inputs["delta"]
            t.dtype = 1
            t.float_val.append(delta)
        r = predict(srv, req)
        check(len(r.outputs) == 1, "%s %s has one output: %s" % (what, sig, r))
        t = list(r.outputs.values())[0] if r.outputs else None
        check(t is not None and t.dtype == 1, "%s %s output dtype float (not _REF): %s"
              % (what, sig, t))
        return list(t.float_val) if t is not None else []

    run("reset_counter")
    check(close(run("get_counter"), [0.0]), what + " counter is 0 after reset")
    run("incr_counter_by", 3.0)
    check(close(run("get_counter"), [3.0]), what + " counter is 3 after incr_counter_by 3")
    run("incr_counter")
    check(close(run("get_counter"), [4.0]), what + " counter is 4 after incr_counter")
    run("reset_counter")
    check(close(run("get_counter"), [0.0]), what + " counter is 0 after the second reset")


def check_concurrent(srv, name, what, n_good=8, calls=40):
    """8 threads of good Predicts while another sends garbage, wrong dtypes and unknown methods:
    every good call gets its own right values, every bad one its code."""
    import threading
    E = grpc.StatusCode
    lock = threading.Lock()
    res = {"good": 0, "bad": 0, "wrong": []}

    def good(k):
        for i in range(calls):
            v = [float(k), float(i), 0.25 * (k + i)]
            try:
                y = list(predict(srv, predict_req(name, v)).outputs["y"].float_val)
                ok, why = close(y, [0.5 * x + 2 for x in v]), "values %s for %s" % (y, v)
            except grpc.RpcError as e:
                ok, why = False, "%s %s" % (e.code(), e.details())
            with lock:
                if ok:
                    res["good"] += 1
                else:
                    res["wrong"].append("good call %d/%d: %s" % (k, i, why))

    def bad():
        wrong = predict_req(name)
        t = wrong.inputs["x"]
        t.dtype = 7
        t.tensor_shape.dim.add().size = 1
        t.string_val.append(b"abc")
        cases = [(lambda: srv.raw(PS + "Predict", b"\xff\xff\xff\xff garbage"),
                  E.INVALID_ARGUMENT, "garbage"),
                 (lambda: predict(srv, wrong), E.INVALID_ARGUMENT, "wrong dtype"),
                 (lambda: srv.raw(PS + "Nope", b""), E.UNIMPLEMENTED, "unknown method")]
        for i in range(3 * calls):
            fn, code, kind = cases[i % 3]
            try:
                fn()
                got = "OK"
            except grpc.RpcError as e:
                got = e.code()
            with lock:
                if got == code:
                    res["bad"] += 1
                else:
                    res["wrong"].append("bad call %s: got %s, want %s" % (kind, got, code))

    ts = [threading.Thread(target=good, args=(k,)) for k in range(n_good)]
    ts.append(threading.Thread(target=bad))
    t0 = time.time()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    dt = time.time() - t0
    check(not res["wrong"], "%s concurrent calls: %s" % (what, res["wrong"][:5]))
    check(res["good"] == n_good * calls and res["bad"] == 3 * calls,
          "%s concurrent: %d/%d good, %d/%d bad answered right" %
          (what, res["good"], n_good * calls, res["bad"], 3 * calls))
    print("%s: %d good + %d bad calls from %d threads in %.2f s" %
          (what, n_good * calls, 3 * calls, n_good + 1, dt), flush=True)


def check_deadlines(srv, name, what):
    """A call whose deadline passes is DEADLINE_EXCEEDED to the client; the server keeps on."""
    from tensorflow_serving.apis import predict_pb2
    E = grpc.StatusCode
    req = predict_req(name, [1.0, 2.0, 5.0])
    # A deadline already past when the call starts fails in the client.
    expect_error(lambda: srv.call(PS + "Predict", req, predict_pb2.PredictResponse,
                                  timeout=-1.0),
                 E.DEADLINE_EXCEEDED, "", what + " Predict with a past deadline")
    # gRPC rounds 1 us up to 1 ms, which an idle server may meet: OK (right values) or
    # DEADLINE_EXCEEDED. check_queued_deadline makes it expire for sure.
    try:
        r = srv.call(PS + "Predict", req, predict_pb2.PredictResponse, timeout=0.000001)
        check(close(list(r.outputs["y"].float_val), [2.5, 3.0, 4.5]), what + " 1 us deadline met")
    except grpc.RpcError as e:
        check(e.code() == E.DEADLINE_EXCEEDED, "%s 1 us deadline: %s" % (what, e.code()))
    # Many short deadlines at once, some expiring in the client, some in the server's queue:
    # each call ends OK (with the right values) or DEADLINE_EXCEEDED, nothing else.
    f = srv.channel.unary_unary(PS + "Predict", request_serializer=lambda m: m.SerializeToString(),
                                response_deserializer=predict_pb2.PredictResponse.FromString)
    futs = [f.future(req, timeout=0.0002 * (1 + i % 20)) for i in range(200)]
    codes = {}
    for fu in futs:
        try:
            ok = close(list(fu.result().outputs["y"].float_val), [2.5, 3.0, 4.5])
            c = "OK" if ok else "OK with wrong values"
        except grpc.RpcError as e:
            c = str(e.code())
        codes[c] = codes.get(c, 0) + 1
    check(set(codes) <= {"OK", str(E.DEADLINE_EXCEEDED)},
          "%s short deadlines end OK or DEADLINE_EXCEEDED: %s" % (what, codes))
    print("%s: 200 calls with 0.2-4 ms deadlines: %s" % (what, codes), flush=True)
    r = predict(srv, req)
    check(close(list(r.outputs["y"].float_val), [2.5, 3.0, 4.5]),
          what + " still answers after expired deadlines")


def check_queued_deadline(srv, name, what):
    """With one queue thread busy on big Predicts, calls with a 1 us deadline (gRPC rounds it
    up to 1 ms) expire while waiting: the client sees DEADLINE_EXCEEDED every time, the big calls
    and later calls are still answered."""
    from tensorflow_serving.apis import predict_pb2
    f = srv.channel.unary_unary(PS + "Predict", request_serializer=lambda m: m.SerializeToString(),
                                response_deserializer=predict_pb2.PredictResponse.FromString)
    big = predict_req(name, [1.0] * (2 * 1024 * 1024), content=True)
    small = predict_req(name, [1.0, 2.0, 5.0])
    # The expired calls the server sees are those read off the wire together with a big one
    # and queued behind it (calls that expire before they are read are cancelled by the C core
    # itself): interleave them, and try a few rounds.
    for _ in range(10):
        bigs, tiny = [], []
        for _ in range(4):
            bigs.append(f.future(big, timeout=60))
            tiny += [f.future(small, timeout=0.000001) for _ in range(5)]
        codes = []
        for fu in tiny:
            try:
                fu.result()
                codes.append("OK")
            except grpc.RpcError as e:
                codes.append(e.code())
        ok_big = all(len(b.result().outputs["y"].float_val) == 2 * 1024 * 1024 for b in bigs)
        check(ok_big, what + " big Predicts answered")
        check(all(c == grpc.StatusCode.DEADLINE_EXCEEDED for c in codes),
              "%s 1 us deadlines behind big calls: %s" % (what, codes))
        time.sleep(0.2)
        if "deadline passed before it ran; not run" in srv.logs():
            break
    # Whether a call expires in our queue or in the C core's transport first depends on timing
    # (under sanitizers it is mostly the latter), so this is reported, not checked.
    print("%s: the server answered %d expired calls without running the model" %
          (what, srv.logs().count("deadline passed before it ran; not run")), flush=True)
    r = predict(srv, small)
    check(close(list(r.outputs["y"].float_val), [2.5, 3.0, 4.5]),
          what + " still answers after queued calls expired")


def check_stop_under_load(build, demo, tmp):
    """SIGTERM while 6 client threads keep Predicts in flight: tfserve drains its queue, joins
    its threads and exits 0 promptly (under ASan: nothing leaked, no call used after free)."""
    import threading
    s = Server(build, "half_plus_two", demo, tmp, ["--grpc_num_threads=4"])
    stop = threading.Event()
    done = [0]

    def hammer():
        req = predict_req("half_plus_two", [1.0, 2.0, 5.0])
        while not stop.is_set():
            try:
                predict(s, req)
                done[0] += 1
            except (grpc.RpcError, ValueError):   # refused once the server goes
                pass

    ts = [threading.Thread(target=hammer) for _ in range(6)]
    try:
        for t in ts:
            t.start()
        time.sleep(0.5)
        rc, took = s.terminate()
        check(rc == 0, "tfserve exits 0 on SIGTERM under load (rc %s, %d calls answered before)"
              % (rc, done[0]))
        print("stop under load: exit in %.2f s after %d calls" % (took, done[0]), flush=True)
    finally:
        stop.set()
        for t in ts:
            t.join()
        s.stop()


def check_stop_with_idle_connection(build, demo, tmp):
    """SIGTERM while a client holds an HTTP/2 connection open and never answers the GOAWAY's
    ping (a stuck or hostile client): the C core's graceful shutdown would wait 20 s for it;
    tfserve closes it once no call is in flight and exits 0 within a second or two."""
    import socket
    s = Server(build, "half_plus_two", demo, tmp)
    conn = socket.create_connection(("127.0.0.1", s.port))
    try:
        # The client preface and an empty SETTINGS frame, then silence.
        conn.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))
        time.sleep(0.2)
        rc, took = s.terminate()
        check(rc == 0 and took < 5, "tfserve exits 0 promptly on SIGTERM with an idle client "
              "connection open (rc %s after %.2f s)" % (rc, took))
        check("closing the gRPC connections" in s.logs(),
              "the drain log says it closed the idle connection:\n" + s.logs()[-600:])
        print("stop with an idle connection open: exit in %.2f s" % took, flush=True)
    finally:
        conn.close()
        s.stop()


def check_max_tensor_bytes(build, demo, tmp):
    """--max_tensor_bytes caps every tensor: a request tensor over it is INVALID_ARGUMENT naming
    the limit, one at it is served; a negative value stops the start."""
    s = Server(build, "half_plus_two", demo, tmp, ["--max_tensor_bytes=4096"])
    try:
        at = [float(i % 7) for i in range(1024)]   # 4096 bytes: in and out at the limit
        r = predict(s, predict_req("half_plus_two", at, content=True))
        check(close(list(r.outputs["y"].float_val), [0.5 * v + 2 for v in at]),
              "1024 floats under --max_tensor_bytes=4096")
        expect_error(lambda: predict(s, predict_req("half_plus_two", at + [1.0], content=True)),
                     grpc.StatusCode.INVALID_ARGUMENT, "over the 4096-byte limit on one tensor",
                     "1025 floats over --max_tensor_bytes=4096")
        # A string counts its bytes, also where one value repeats to fill the shape: 10 elements
        # of a 1000-byte value are 10 KB, not 10 string records.
        req = predict_req("half_plus_two", None)
        t = req.inputs["x"]
        t.dtype = 7
        t.tensor_shape.dim.add().size = 10
        t.string_val.append(b"s" * 1000)
        expect_error(lambda: predict(s, req), grpc.StatusCode.INVALID_ARGUMENT,
                     "strings counted", "a broadcast string over --max_tensor_bytes=4096")
        r = predict(s, predict_req("half_plus_two", [1.0, 2.0, 5.0]))
        check(close(list(r.outputs["y"].float_val), [2.5, 3.0, 4.5]),
              "served after the refusal")
        check("largest tensor: 4096 bytes" in s.logs(), "the log states the limit")
    finally:
        s.stop()
    p = subprocess.run([os.path.join(build, "server", "tfserve"), "--port=%d" % free_port(),
                        "--model_name=half_plus_two", "--model_base_path=" + demo,
                        "--max_tensor_bytes=-1"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
    out = p.stdout.decode(errors="replace")
    check(p.returncode == 1 and "--max_tensor_bytes=-1 is not in [0, " in out,
          "--max_tensor_bytes=-1: rc %d: %s" % (p.returncode, out[-300:]))


def edited_demo(demo, tmp, name, edit):
    """A copy of the demo model's base path as <tmp>/<name> whose saved_model.pb edit(SavedModel)
    has changed; returns (base path, version folder)."""
    from tensorflow.core.protobuf import saved_model_pb2
    base = os.path.join(tmp, name)
    shutil.copytree(demo, base)
    version = os.path.join(base, sorted(os.listdir(base))[0])
    path = os.path.join(version, "saved_model.pb")
    sm = saved_model_pb2.SavedModel()
    with open(path, "rb") as f:
        sm.ParseFromString(f.read())
    edit(sm)
    with open(path, "wb") as f:
        f.write(sm.SerializeToString())
    return base, version


def check_file_ops_at_request_time(build, demo, tmp):
    """A model whose signature feeds a client's string to RestoreV2's file prefix (a hostile or
    careless export): a Predict naming a path is PERMISSION_DENIED naming the node, unless
    --allow_file_ops_at_request_time; the server keeps serving."""
    def expose_restore(sm):
        sd = sm.meta_graphs[0].signature_def["serving_default"]
        sd.inputs["x"].name = "save/Const:0"
        sd.inputs["x"].dtype = 7
        sd.outputs["y"].name = "save/RestoreV2:0"
    base, version = edited_demo(demo, tmp, "restore_sig", expose_restore)
    from tensorflow_serving.apis import predict_pb2
    req = predict_pb2.PredictRequest()
    req.model_spec.name = "restore_sig"
    req.inputs["x"].dtype = 7
    req.inputs["x"].string_val.append(os.path.join(version, "variables", "variables").encode())
    for allow in (False, True):
        s = Server(build, "restore_sig", base, tmp,
                   ["--allow_file_ops_at_request_time"] if allow else [])
        try:
            if allow:
                r = predict(s, req)
                check(r.outputs["y"].dtype == 1, "RestoreV2 allowed by the flag: %s" % r)
            else:
                expect_error(lambda: predict(s, req), grpc.StatusCode.PERMISSION_DENIED,
                             "node 'save/RestoreV2' (RestoreV2): reads files",
                             "RestoreV2 at request time")
                expect_error(lambda: predict(s, req), grpc.StatusCode.PERMISSION_DENIED,
                             "--allow_file_ops_at_request_time", "RestoreV2 again")
        finally:
            s.stop()


def check_load_peak_memory(build, demo, tmp):
    """A few hundred bytes of graph that evaluate to a 1 GiB tensor (Fill with a huge shape, then
    a Sum) must not allocate it while the model loads: constant folding keeps to its 16 MiB
    limit, so the peak RSS after the load stays far below 1 GiB, and a request then computes the
    sum at run time."""
    from tensorflow.core.framework import tensor_pb2
    n_big = 1 << 28   # float32: 1 GiB

    def add_big_fill(sm):
        mg = sm.meta_graphs[0]
        gd = mg.graph_def

        def const(name, dtype, values, dims):
            n = gd.node.add(name=name, op="Const")
            n.attr["dtype"].type = dtype
            t = tensor_pb2.TensorProto(dtype=dtype)
            for d in dims:
                t.tensor_shape.dim.add().size = d
            (t.int_val if dtype == 3 else t.float_val).extend(values)
            n.attr["value"].tensor.CopyFrom(t)
        const("big_dims", 3, [n_big], [1])
        const("big_one", 1, [1.0], [])
        const("big_axis", 3, [0], [1])
        fill = gd.node.add(name="big_fill", op="Fill", input=["big_dims", "big_one"])
        fill.attr["T"].type = 1
        total = gd.node.add(name="big_sum", op="Sum", input=["big_fill", "big_axis"])
        total.attr["T"].type = 1
        out = gd.node.add(name="big_out", op="AddV2", input=["big_sum", "x"])
        out.attr["T"].type = 1
        mg.signature_def["serving_default"].outputs["y"].name = "big_out:0"
    base, _ = edited_demo(demo, tmp, "big_fill", add_big_fill)

    def peak_rss(s):
        with open("/proc/%d/status" % s.proc.pid) as f:
            return [int(l.split()[1]) for l in f if l.startswith("VmHWM:")][0] * 1024
    s = Server(build, "half_plus_two", demo, tmp)   # the same binary's own peak (ASan's is large)
    try:
        plain = peak_rss(s)
    finally:
        s.stop()
    s = Server(build, "big_fill", base, tmp)
    try:
        hwm = peak_rss(s)
        check(hwm < plain + (384 << 20), "peak RSS after loading a 1 GiB Fill: %d MB (the demo "
              "model: %d MB)" % (hwm >> 20, plain >> 20))
        r = predict(s, predict_req("big_fill", [1.0]))
        check(close(list(r.outputs["y"].float_val), [float(n_big) + 1.0], tol=n_big * 1e-6),
              "the sum is computed at run time: %s" % r.outputs["y"].float_val)
    finally:
        s.stop()


def check_channel_args(build, demo, tmp):
    """--grpc_channel_arguments reaches the C core: a 1000-byte receive limit refuses a 2 KB
    request with RESOURCE_EXHAUSTED and still serves small ones; bad values stop the start."""
    s = Server(build, "half_plus_two", demo, tmp,
               ["--grpc_channel_arguments=grpc.max_receive_message_length=1000",
                "--grpc_num_threads=3", "--grpc_max_threads=7"])
    try:
        req = predict_req("half_plus_two", [1.0] * 512, content=True)
        check(len(req.SerializeToString()) > 2048, "the big request is over 2 KB")
        expect_error(lambda: predict(s, req), grpc.StatusCode.RESOURCE_EXHAUSTED, "",
                     "2 KB request to a server limited to 1000 bytes")
        r = predict(s, predict_req("half_plus_two", [1.0, 2.0, 5.0]))
        check(close(list(r.outputs["y"].float_val), [2.5, 3.0, 4.5]),
              "small request under the 1000-byte limit")
        logs = s.logs()
        check("--grpc_max_threads=7 accepted" in logs and "3 threads" in logs,
              "the log names --grpc_max_threads and the thread count:\n" + logs[-600:])
    finally:
        s.stop()
    for flag, text in (("--grpc_channel_arguments=grpc.max_receive_message_length",
                        "is not key=value"),
                       ("--grpc_num_threads=0", "--grpc_num_threads=0 is not in [1, 64]"),
                       ("--grpc_num_threads=65", "is not in [1, 64]")):
        p = subprocess.run([os.path.join(build, "server", "tfserve"), "--port=%d" % free_port(),
                            "--model_name=half_plus_two", "--model_base_path=" + demo, flag],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
        out = p.stdout.decode(errors="replace")
        check(p.returncode == 1 and text in out,
              "%s: rc %d, want 1 and %r: %s" % (flag, p.returncode, text, out[-300:]))


def throughput(srv, name, n=2000):
    req = predict_req(name, [1.0, 2.0, 5.0])
    f = srv.channel.unary_unary(PS + "Predict", request_serializer=lambda m: m.SerializeToString())
    t0 = time.time()
    for _ in range(n):
        f(req, timeout=10)
    dt = time.time() - t0
    print("Predict %s: %d sequential calls in %.2f s = %.0f calls/s (Python client, 1 in flight)"
          % (name, n, dt, n / dt), flush=True)


def demo_checks(a, tmp, servers):
    """Every check on the demo model tfserve's build writes."""
    demo = os.path.join(a.build, "models", "half_plus_two")
    rest_port = free_port()
    s = Server(a.build, "half_plus_two", demo, tmp, ["--rest_api_port=%d" % rest_port])
    servers.append(s)
    check_half_plus_two(s, "half_plus_two", 1, "demo")
    check_input_errors(s, "half_plus_two", "demo", rest_port)
    check_method_errors(s, "half_plus_two", "demo")
    check_metadata(s, "half_plus_two", 1, "demo", ["serving_default"])
    check_status(s, "half_plus_two", [1], "demo")
    check_errors(s, "half_plus_two", "demo")
    check_concurrent(s, "half_plus_two", "demo")
    check_deadlines(s, "half_plus_two", "demo")
    # Messages past gRPC's 4 MiB default: TF Serving lifts the limit to INT32_MAX.
    big = [float(i % 100) for i in range(2 * 1024 * 1024)]
    r = predict(s, predict_req("half_plus_two", big, content=True))
    y = r.outputs["y"].float_val
    check(len(y) == len(big) and y[7] == 0.5 * 7 + 2 and y[-1] == 0.5 * big[-1] + 2,
          "demo 8 MiB request and response (%d values)" % len(y))
    # A port in use is a startup error, not a silently shared port.
    p = subprocess.run([os.path.join(a.build, "server", "tfserve"), "--port=%d" % s.port,
                        "--model_name=half_plus_two", "--model_base_path=" + demo],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
    out = p.stdout.decode(errors="replace")
    check(p.returncode == 1 and "could not bind gRPC" in out,
          "second server on the same port: rc %d, %s" % (p.returncode, out[-300:]))
    if a.bench:
        throughput(s, "half_plus_two")
    s.stop()
    servers.remove(s)
    check_channel_args(a.build, demo, tmp)
    check_max_tensor_bytes(a.build, demo, tmp)
    check_file_ops_at_request_time(a.build, demo, tmp)
    check_load_peak_memory(a.build, demo, tmp)
    check_stop_under_load(a.build, demo, tmp)
    check_stop_with_idle_connection(a.build, demo, tmp)
    check_many_names(a.build, demo, tmp)
    # One thread on the queue: the same concurrent mix still works, and calls that wait
    # behind big ones past their deadline are answered DEADLINE_EXCEEDED without running.
    s = Server(a.build, "half_plus_two", demo, tmp, ["--grpc_num_threads=1",
                                                     "--verbosity=debug"])
    servers.append(s)
    check_concurrent(s, "half_plus_two", "1 thread", calls=10)
    check_queued_deadline(s, "half_plus_two", "1 thread")
    s.stop()
    servers.remove(s)


def fixture_checks(a, fx, tmp, servers):
    """The checks on TF Serving's own half_plus_two exports (TF1, TF2, two versions) and its
    counter model, under fx (the fixtures' tf_serving folder)."""
    sigs = ["serving_default", "classify_x_to_y", "regress_x_to_y", "regress_x_to_y2",
            "regress_x2_to_y3"]
    for d, what in (("saved_model_half_plus_two_cpu", "tf1"),
                    ("saved_model_half_plus_two_tf2_cpu", "tf2")):
        s = Server(a.build, "half_plus_two", os.path.join(fx, d), tmp)
        servers.append(s)
        check_half_plus_two(s, "half_plus_two", 123, what)
        check_metadata(s, "half_plus_two", 123, what, sigs)
        check_status(s, "half_plus_two", [123], what)
        check_classify_regress(s, "half_plus_two", 123, what)
        if what == "tf1":
            check_metadata_json(s, "half_plus_two",
                                os.path.join(fx, "half_plus_two_model_metadata.json"), what)
        check_errors(s, "half_plus_two", what)
        check_input_errors(s, "half_plus_two", what, default_x=what == "tf2")
        s.stop()
        servers.remove(s)
    s = Server(a.build, "hp2", os.path.join(fx, "saved_model_half_plus_two_2_versions"), tmp)
    servers.append(s)
    check_half_plus_two(s, "hp2", 124, "2 versions, latest")
    r = predict(s, predict_req("hp2", [1.0], version=124))
    check(r.model_spec.version.value == 124, "pinned version 124: %s" % r.model_spec)
    expect_error(lambda: predict(s, predict_req("hp2", [1.0], version=123)),
                 grpc.StatusCode.NOT_FOUND, "Specific(hp2, 123)",
                 "version 123 is not served (latest policy)")
    s.stop()
    servers.remove(s)
    s = Server(a.build, "counter", os.path.join(fx, "saved_model_counter"), tmp)
    servers.append(s)
    check_counter(s, "counter")
    s.stop()
    servers.remove(s)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--bench", action="store_true", help="also time sequential Predict calls")
    ap.add_argument("--fixtures", action="store_true",
                    help="run the checks on the TensorFlow fixtures instead of the demo model")
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)   # tfserve wants an absolute --model_base_path
    a.source = os.path.abspath(a.source)
    fx = fixtures_dir(a.source, "tf_serving")
    if a.fixtures and not os.path.isdir(fx):
        print("SKIP: the fixture checks: %s is absent (set TFS_FIXTURES)" % fx, flush=True)
        return 77
    tmp = tempfile.mkdtemp(prefix="tfs-grpc-test-")
    servers = []
    try:
        gen_stubs(a.source, tmp)
        if a.fixtures:
            fixture_checks(a, fx, tmp, servers)
        else:
            demo_checks(a, tmp, servers)
    except Exception as e:  # a crash of the test itself is a failure, with the server logs
        check(False, "test raised %r" % e)
        for s in servers:
            print("---- server log ----\n" + s.logs(), flush=True)
    finally:
        for s in servers:
            if s.proc.poll() is None:
                s.proc.kill()
                s.proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (PASSED, FAILED), flush=True)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
