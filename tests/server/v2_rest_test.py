#!/usr/bin/python3
"""System test of KServe's v2 protocol (Open Inference Protocol) over REST, on the real tfserve
over loopback with real clients (urllib, http.client, curl):

  - GET /v2 (name, version, the binary_tensor_data extension), /v2/health/live, /v2/health/ready
    (200 once the models are AVAILABLE, 503 while the server drains), model metadata (platform,
    versions, inputs and outputs with -1 for unknown dimensions; ?signature_name= for another
    signature) and model ready, with and without /versions/N;
  - infer on half_plus_two (y = x/2 + 2, by hand), flat and nested data, the request's id echoed;
  - every datatype (BOOL, INT8..INT64, UINT8..UINT64, FP16, FP32, FP64, BYTES) through a model
    whose signatures pass each type through an Identity (written by v2-dtype-model with tfserve's
    own SavedModel writer): JSON in and out, binary in and out against struct.pack'ed bytes, the
    edges of each type's range, and a value out of range refused;
  - requested outputs, per output binary_data and binary_data_output, on a two-input signature;
  - errors: unknown model and version, a version label, wrong element count, wrong datatype,
    binary sizes off by one, Inference-Header-Content-Length past the body or not a number,
    trailing binary bytes, BYTES lengths past the end, data nested 100,000 deep and a body of
    1,000,000 open brackets (the server keeps serving);
  - the metrics count the requests under protocol "v2-rest" and the v2 method names;
  - with batching on, concurrent infers each get their own rows back; while draining, readiness
    is 503 and liveness 200;
  - a model whose version failed to load is 503 (ready, metadata, infer) naming its state;
  - --max_tensor_bytes bounds a request's tensors.

With --fixtures, the TensorFlow fixtures' models instead (exit 77 when absent): INT32 and UINT8
scalars and vectors (tfjs_times_two_int, tfjs_uint8_multiply), a string-in, string-and-float-out
retrieval model (tfrs_retrieval_topk) in JSON and binary, and a second signature by
signature_name (tfjs_module_with_multiple_signatures), each against its golden outputs.

Prints "N passed, M failed"; exit 1 on a failure.
Run: /usr/bin/python3 v2_rest_test.py --build BUILD_DIR --source SOURCE_DIR --dtype-model EXE
"""
import argparse
import http.client
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
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # expects to sit in tests/server/
import grpc_client_test as g  # noqa: E402  (check, free_port, fixtures_dir)

check = g.check
HDR = "Inference-Header-Content-Length"

# (datatype, struct code, values): the edges of each type's range and one value inside.
TYPES = [
    ("BOOL", "?", [True, False, True]),
    ("INT8", "b", [-128, 0, 127]),
    ("INT16", "h", [-32768, 5, 32767]),
    ("INT32", "i", [-2 ** 31, 7, 2 ** 31 - 1]),
    ("INT64", "q", [-2 ** 63, 9, 2 ** 63 - 1]),
    ("UINT8", "B", [0, 200, 255]),
    ("UINT16", "H", [0, 1000, 65535]),
    ("UINT32", "I", [0, 7, 2 ** 32 - 1]),
    ("UINT64", "Q", [0, 7, 2 ** 64 - 1]),
    ("FP16", "e", [0.5, -2.25, 65504.0]),
    ("FP32", "f", [1.5, -0.25, 3.0e38]),
    ("FP64", "d", [0.1, -1e300, 2.5]),
]
# One value past each type's range (or of the wrong JSON type): refused, naming the input.
OUT_OF_RANGE = {"BOOL": 1, "INT8": 128, "INT16": -32769, "INT32": 2 ** 31, "INT64": 2 ** 63,
                "UINT8": -1, "UINT16": 65536, "UINT32": 2 ** 32, "UINT64": -1, "FP16": 70000.0,
                "FP32": 1e39, "FP64": "x", "BYTES": 5}


class Rest:
    """The real tfserve serving a model config file, REST on a free port; always killed."""

    def __init__(self, build, config, tmp, extra=(), ready="/v2/health/ready"):
        self.rest = g.free_port()
        self.log = open(os.path.join(tmp, "tfserve-v2-%d.log" % self.rest), "w+")
        self.proc = subprocess.Popen(
            [os.path.join(build, "server", "tfserve"), "--port=%d" % g.free_port(),
             "--rest_api_port=%d" % self.rest, "--model_config_file=" + config,
             "--metrics_path=/metrics"] + list(extra),
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                if self.get(ready)[0] == 200:
                    return
            except OSError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("tfserve did not become ready:\n" + self.logs())

    def request(self, method, path, body=None, headers=None):
        """(status, headers (lower-case names), body bytes) over http.client."""
        c = http.client.HTTPConnection("127.0.0.1", self.rest, timeout=30)
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            c.close()

    def get(self, path):
        """(status, parsed JSON body) over urllib."""
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d%s" % (self.rest, path),
                                        timeout=30) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def infer(self, model, doc, binary=b"", version=None, headers=None):
        """POST .../infer: (status, JSON part, binary part, response headers). With binary, the
        JSON goes first and Inference-Header-Content-Length says its length."""
        path = "/v2/models/%s%s/infer" % (model, "/versions/%s" % version if version else "")
        head = json.dumps(doc).encode() if not isinstance(doc, bytes) else doc
        h = dict(headers or {})
        if binary:
            h.setdefault(HDR, str(len(head)))
            h.setdefault("Content-Type", "application/octet-stream")
        status, rh, body = self.request("POST", path, head + binary, h)
        n = int(rh[HDR.lower()]) if HDR.lower() in rh else len(body)
        try:
            js = json.loads(body[:n])
        except ValueError:
            js = {"unparsed": body[:200]}
        return status, js, body[n:], rh

    def alive(self):
        return self.proc.poll() is None and self.get("/v2/health/live")[0] == 200

    def logs(self):
        self.log.seek(0)
        return self.log.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def write_config(tmp, models):
    """A model config file for (name, base path) pairs."""
    path = os.path.join(tmp, "models-%d.config" % len(os.listdir(tmp)))
    with open(path, "w") as f:
        f.write("model_config_list {\n")
        for name, base in models:
            f.write('  config { name: "%s" base_path: "%s" model_platform: "tensorflow" }\n'
                    % (name, base))
        f.write("}\n")
    return path


def inp(name, datatype, shape, data=None, binary_size=None):
    d = {"name": name, "datatype": datatype, "shape": shape}
    if data is not None:
        d["data"] = data
    if binary_size is not None:
        d["parameters"] = {"binary_data_size": binary_size}
    return d


def bytes_binary(items):
    """BYTES in the binary form: a 4-byte little-endian length, then the bytes, per element."""
    return b"".join(struct.pack("<I", len(b)) + b for b in items)


def expect_error(s, what, got, status, *words):
    st, js = got[0], got[1]
    msg = js.get("error", "") if isinstance(js, dict) else ""
    check(st == status and all(w in msg for w in words),
          "%s: want %d with %s, got %d %r" % (what, status, words, st, js))


# ---- the demo model ---------------------------------------------------------------------------

def endpoint_checks(s):
    st, js = s.get("/v2")
    check(st == 200 and js.get("name") == "tfserve" and js.get("version")
          and "binary_tensor_data" in js.get("extensions", []), "GET /v2: %d %r" % (st, js))
    check(s.get("/v2/") == (200, js), "GET /v2/ is GET /v2")
    check(s.get("/v2/health/live") == (200, {"live": True}), "live")
    check(s.get("/v2/health/ready") == (200, {"ready": True}), "ready")
    want = {"name": "half_plus_two", "versions": ["1"], "platform": "tensorflow_savedmodel",
            "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1]}],
            "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1]}]}
    for path in ("/v2/models/half_plus_two", "/v2/models/half_plus_two/versions/1"):
        st, js = s.get(path)
        check(st == 200 and js == want, "metadata %s: %d %r" % (path, st, js))
    st, js = s.get("/v2/models/dtypes?signature_name=INT8")
    check(st == 200 and js["inputs"] == [{"name": "x", "datatype": "INT8", "shape": [-1]}],
          "metadata of signature INT8: %d %r" % (st, js))
    st, js = s.get("/v2/models/dtypes")
    check(st == 200 and [i["name"] for i in js["inputs"]] == ["a", "b"]
          and [o["datatype"] for o in js["outputs"]] == ["INT64", "FP64"],
          "metadata of serving_default (two inputs): %r" % js)
    expect_error(s, "metadata of an unknown signature", s.get("/v2/models/dtypes?signature_name=no"),
                 400, "no")
    check(s.get("/v2/models/half_plus_two/ready") == (200, {"ready": True}), "model ready")
    check(s.get("/v2/models/half_plus_two/versions/1/ready") == (200, {"ready": True}),
          "model version 1 ready")
    expect_error(s, "ready of an unknown model", s.get("/v2/models/nope/ready"), 404, "nope")
    expect_error(s, "ready of an unknown version", s.get("/v2/models/half_plus_two/versions/7/ready"),
                 404, "7")
    expect_error(s, "metadata of an unknown model", s.get("/v2/models/nope"), 404, "nope")
    expect_error(s, "metadata of an unknown version", s.get("/v2/models/half_plus_two/versions/2"),
                 404, "half_plus_two")
    expect_error(s, "a version label", s.get("/v2/models/half_plus_two/versions/stable"), 404,
                 "stable", "labels")
    st, _, body = s.request("DELETE", "/v2/models/half_plus_two")
    check(st == 400, "DELETE on a v2 path: %d %r" % (st, body))


def half_plus_two_checks(s):
    doc = {"id": "req-7", "inputs": [inp("x", "FP32", [3], [1.0, 2.0, 5.0])]}
    st, js, _, rh = s.infer("half_plus_two", doc)
    check(st == 200 and js.get("id") == "req-7" and js.get("model_name") == "half_plus_two"
          and js.get("model_version") == "1"
          and js.get("outputs") == [{"name": "y", "datatype": "FP32", "shape": [3],
                                     "data": [x / 2 + 2 for x in (1.0, 2.0, 5.0)]}]
          and rh.get("content-type") == "application/json",
          "flat infer: %d %r %r" % (st, js, rh))
    # Nested data for a [2, 2] tensor; the answer is flat, row-major.
    doc = {"inputs": [inp("x", "FP32", [2, 2], [[1, 2], [5, 6]])]}
    st, js, _, _ = s.infer("half_plus_two", doc, version=1)
    check(st == 200 and "id" not in js and js["outputs"][0]["shape"] == [2, 2]
          and js["outputs"][0]["data"] == [2.5, 3.0, 4.5, 5.0], "nested infer: %d %r" % (st, js))
    # Binary in and out: little-endian float32 both ways.
    xs = [1.0, -3.0, 0.25, 100.0]
    doc = {"inputs": [inp("x", "FP32", [4], binary_size=16)],
           "outputs": [{"name": "y", "parameters": {"binary_data": True}}]}
    st, js, out, rh = s.infer("half_plus_two", doc, struct.pack("<4f", *xs))
    check(st == 200 and js["outputs"] == [{"name": "y", "datatype": "FP32", "shape": [4],
                                           "parameters": {"binary_data_size": 16}}]
          and out == struct.pack("<4f", *[x / 2 + 2 for x in xs])
          and rh.get("content-type") == "application/octet-stream",
          "binary infer: %d %r %r %r" % (st, js, out, rh))

    # Errors, each naming the input and what was expected.
    ok = [inp("x", "FP32", [3], [1, 2, 3])]
    expect_error(s, "unknown model", s.infer("nope", {"inputs": ok}), 404, "nope")
    expect_error(s, "unknown version", s.infer("half_plus_two", {"inputs": ok}, version=9), 404,
                 "half_plus_two", "9")
    expect_error(s, "wrong element count",
                 s.infer("half_plus_two", {"inputs": [inp("x", "FP32", [4], [1, 2, 3])]}), 400,
                 "'x'", "3 elements", "[4]", "needs 4")
    expect_error(s, "wrong datatype",
                 s.infer("half_plus_two", {"inputs": [inp("x", "FP64", [3], [1, 2, 3])]}), 400,
                 "'x'", "FP64", "FP32")
    expect_error(s, "unknown datatype",
                 s.infer("half_plus_two", {"inputs": [inp("x", "FLOAT", [3], [1, 2, 3])]}), 400,
                 "'x'", "FLOAT", "FP32")
    expect_error(s, "unknown input", s.infer("half_plus_two",
                                             {"inputs": [inp("z", "FP32", [1], [1])]}), 400, "x")
    expect_error(s, "binary size one short",
                 s.infer("half_plus_two", {"inputs": [inp("x", "FP32", [3], binary_size=11)]},
                         b"\0" * 11), 400, "'x'", "11", "needs 12")
    expect_error(s, "binary size past the body",
                 s.infer("half_plus_two", {"inputs": [inp("x", "FP32", [3], binary_size=12)]},
                         b"\0" * 8), 400, "'x'", "past the end")
    expect_error(s, "trailing binary bytes",
                 s.infer("half_plus_two", {"inputs": [inp("x", "FP32", [3], binary_size=12)]},
                         b"\0" * 13), 400, "1 bytes")
    head = json.dumps({"inputs": [inp("x", "FP32", [1], binary_size=4)]}).encode()
    expect_error(s, "header length past the body",
                 s.infer("half_plus_two", head, b"\0\0\0\0", headers={HDR: str(len(head) + 5)}),
                 400, HDR, "past the end")
    expect_error(s, "header length not a number",
                 s.infer("half_plus_two", head, b"\0\0\0\0", headers={HDR: "12x"}), 400, HDR)
    expect_error(s, "both data and binary_data_size",
                 s.infer("half_plus_two", {"inputs": [dict(inp("x", "FP32", [1], [1]),
                                                           parameters={"binary_data_size": 4})]},
                         b"\0" * 4), 400, "'x'", "both")
    expect_error(s, "unknown requested output",
                 s.infer("half_plus_two", {"inputs": ok, "outputs": [{"name": "q"}]}), 400,
                 "'q'", "y")
    # Hostile bodies: data nested far deeper than the shape, and a bracket bomb; the server
    # answers 400 and keeps serving.
    deep = b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": ' + \
        b"[" * 100000 + b"1" + b"]" * 100000 + b"}]}"
    expect_error(s, "data nested 100,000 deep", s.infer("half_plus_two", deep), 400, "'x'",
                 "nested deeper")
    expect_error(s, "1,000,000 open brackets", s.infer("half_plus_two", b"[" * 1000000), 400,
                 "JSON Parse error")
    check(s.alive(), "the server serves after the hostile bodies")


def dtype_checks(s):
    for name, code, values in TYPES:
        sig = {"signature_name": name}
        doc = {"parameters": sig, "inputs": [inp("x", name, [3], values)]}
        st, js, _, _ = s.infer("dtypes", doc)
        o = js.get("outputs", [{}])[0]
        got = o.get("data")
        packed = struct.pack("<3" + code, *values)
        # Floats come back as the shortest text that reads back as the same FP16/FP32 value:
        # compared as the type's bytes.
        same = (isinstance(got, list) and len(got) == 3
                and struct.pack("<3" + code, *got) == packed) if code in "ef" else got == values
        check(st == 200 and o.get("datatype") == name and o.get("shape") == [3] and same,
              "%s JSON round trip: %d %r (want %r)" % (name, st, js, values))
        doc = {"parameters": dict(sig, binary_data_output=True),
               "inputs": [inp("x", name, [3], binary_size=len(packed))]}
        st, js, out, _ = s.infer("dtypes", doc, packed)
        check(st == 200 and out == packed
              and js["outputs"][0]["parameters"] == {"binary_data_size": len(packed)},
              "%s binary round trip: %d %r %r" % (name, st, js, out))
        expect_error(s, "%s value out of range" % name,
                     s.infer("dtypes", {"parameters": sig,
                                        "inputs": [inp("x", name, [1], [OUT_OF_RANGE[name]])]}),
                     400, "'x'", name)
        expect_error(s, "%s binary size off by one" % name,
                     s.infer("dtypes", {"parameters": sig,
                                        "inputs": [inp("x", name, [3],
                                                       binary_size=len(packed) - 1)]},
                             packed[:-1]), 400, "'x'", str(len(packed)))
    # BYTES: JSON strings, and the 4-byte length form with arbitrary bytes.
    sig = {"signature_name": "BYTES"}
    st, js, _, _ = s.infer("dtypes", {"parameters": sig,
                                      "inputs": [inp("x", "BYTES", [3], ["abc", "", "h\u00e9"])]})
    check(st == 200 and js["outputs"][0]["data"] == ["abc", "", "h\u00e9"]
          and js["outputs"][0]["datatype"] == "BYTES", "BYTES JSON round trip: %d %r" % (st, js))
    items = [b"\x00\xff\x01", b"", b"tfserve"]
    blob = bytes_binary(items)
    st, js, out, _ = s.infer("dtypes", {"parameters": dict(sig, binary_data_output=True),
                                        "inputs": [inp("x", "BYTES", [3], binary_size=len(blob))]},
                             blob)
    check(st == 200 and out == blob
          and js["outputs"][0]["parameters"]["binary_data_size"] == len(blob),
          "BYTES binary round trip: %d %r %r" % (st, js, out))
    bad = struct.pack("<I", 50) + b"abc"
    expect_error(s, "BYTES length past the end",
                 s.infer("dtypes", {"parameters": sig,
                                    "inputs": [inp("x", "BYTES", [1], binary_size=len(bad))]}, bad),
                 400, "'x'", "50 bytes")
    two = bytes_binary([b"a", b"b"])
    expect_error(s, "BYTES with more elements than the shape",
                 s.infer("dtypes", {"parameters": sig,
                                    "inputs": [inp("x", "BYTES", [1], binary_size=len(two))]}, two),
                 400, "'x'", "more than")


def output_checks(s):
    a, b = [1, -2, 3], [0.5, 1.5, -2.5]
    ins = [inp("b", "FP64", [3], b), inp("a", "INT64", [3], a)]
    st, js, _, _ = s.infer("dtypes", {"inputs": ins})
    check(st == 200 and [o["name"] for o in js["outputs"]] == ["a_out", "b_out"]
          and js["outputs"][0]["data"] == a and js["outputs"][1]["data"] == b,
          "both outputs, inputs in any order: %d %r" % (st, js))
    st, js, _, _ = s.infer("dtypes", {"inputs": ins, "outputs": [{"name": "b_out"}]})
    check(st == 200 and js["outputs"] == [{"name": "b_out", "datatype": "FP64", "shape": [3],
                                           "data": b}], "only b_out requested: %r" % js)
    st, js, out, _ = s.infer("dtypes", {"inputs": ins, "outputs": [
        {"name": "b_out"}, {"name": "a_out", "parameters": {"binary_data": True}}]})
    check(st == 200 and [o["name"] for o in js["outputs"]] == ["b_out", "a_out"]
          and js["outputs"][0]["data"] == b
          and js["outputs"][1]["parameters"] == {"binary_data_size": 24}
          and out == struct.pack("<3q", *a), "a_out binary, b_out JSON: %r %r" % (js, out))
    expect_error(s, "a missing input", s.infer("dtypes", {"inputs": ins[:1]}), 400, "a")
    expect_error(s, "an output requested twice",
                 s.infer("dtypes", {"inputs": ins, "outputs": [{"name": "a_out"}] * 2}), 400,
                 "a_out")


def curl_check(s, tmp):
    """A binary infer with curl, as a user would send it from a shell."""
    if not shutil.which("curl"):
        print("SKIP: the curl case: curl is not installed", flush=True)
        return
    head = json.dumps({"inputs": [inp("x", "FP32", [2], binary_size=8)],
                       "parameters": {"binary_data_output": True}}).encode()
    body = os.path.join(tmp, "curl-body")
    with open(body, "wb") as f:
        f.write(head + struct.pack("<2f", 4.0, 10.0))
    r = subprocess.run(["curl", "-s", "-D", "-", "--data-binary", "@" + body,
                        "-H", "Content-Type: application/octet-stream",
                        "-H", "%s: %d" % (HDR, len(head)),
                        "http://127.0.0.1:%d/v2/models/half_plus_two/infer" % s.rest],
                       capture_output=True, timeout=30)
    head_text, _, payload = r.stdout.partition(b"\r\n\r\n")
    hdrs = {ln.split(b":", 1)[0].strip().lower(): ln.split(b":", 1)[1].strip()
            for ln in head_text.split(b"\r\n")[1:] if b":" in ln}
    n = int(hdrs.get(HDR.lower().encode(), b"-1"))
    check(r.returncode == 0 and head_text.startswith(b"HTTP/1.1 200") and n > 0
          and json.loads(payload[:n])["outputs"][0]["parameters"]["binary_data_size"] == 8
          and payload[n:] == struct.pack("<2f", 4.0, 7.0),
          "curl binary infer: %r" % r.stdout[:400])


def metrics_checks(s):
    st, _, body = s.request("GET", "/metrics")
    text = body.decode()
    for method, code in (("infer", "OK"), ("infer", "INVALID_ARGUMENT"), ("infer", "NOT_FOUND"),
                         ("model_metadata", "OK"), ("model_ready", "OK"),
                         ("server_metadata", "OK"), ("server_live", "OK"),
                         ("server_ready", "OK")):
        want = 'protocol="v2-rest",method="%s",code="%s"' % (method, code)
        check(st == 200 and want in text, "metrics have %s" % want)


def batching_checks(a, tmp, hp2):
    """Concurrent infers through the batching queue: each gets its own rows back."""
    s = Rest(a.build, write_config(tmp, [("half_plus_two", hp2)]), tmp,
             ["--enable_batching", "--rest_api_num_threads=8", "--drain_delay_seconds=3"])
    try:
        results = {}

        def one(k):
            xs = [float(k), float(k) + 0.5]
            st, js, _, _ = s.infer("half_plus_two", {"id": str(k),
                                                     "inputs": [inp("x", "FP32", [2], xs)]})
            results[k] = (st, js, [x / 2 + 2 for x in xs])

        threads = [threading.Thread(target=one, args=(k,)) for k in range(32)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        bad = [k for k, (st, js, want) in results.items()
               if st != 200 or js.get("id") != str(k) or js["outputs"][0]["data"] != want]
        check(len(results) == 32 and not bad, "32 concurrent batched infers: bad %r" % bad[:3])
        st, _, body = s.request("GET", "/metrics")
        check(b'method="infer"' in body, "batched infers in the metrics")
        # Drain: readiness goes to 503 at once (the listener stays open for the delay);
        # liveness stays.
        s.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        st, js = s.get("/v2/health/ready")
        check(st == 503 and "draining" in js.get("error", ""), "ready while draining: %d %r"
              % (st, js))
        st, js = s.get("/v2/models/half_plus_two/ready")
        check(st == 503 and "draining" in js.get("error", ""),
              "model ready while draining: %d %r" % (st, js))
        check(s.get("/v2/health/live") == (200, {"live": True}), "live while draining")
    finally:
        s.stop()


def not_ready_checks(a, tmp, hp2):
    """A configured model whose only version fails to load: 503 with the state and the load
    error, while the other model serves."""
    broken = os.path.join(tmp, "models", "broken")
    os.makedirs(os.path.join(broken, "1"))
    with open(os.path.join(broken, "1", "saved_model.pb"), "wb") as f:
        f.write(b"not a protobuf")
    s = Rest(a.build, write_config(tmp, [("half_plus_two", hp2), ("broken", broken)]), tmp,
             ready="/v2/models/half_plus_two/ready")
    try:
        deadline = time.time() + 20
        while time.time() < deadline and '"END"' not in s.request("GET", "/v1/models/broken")[2] \
                .decode():
            time.sleep(0.05)
        st, js = s.get("/v2/health/ready")
        check(st == 503 and "AVAILABLE" in js.get("error", ""), "server not ready: %d %r"
              % (st, js))
        expect_error(s, "ready of a model that failed to load", s.get("/v2/models/broken/ready"),
                     503, "broken", "END")
        expect_error(s, "metadata of a model that failed to load", s.get("/v2/models/broken"),
                     503, "broken", "END")
        expect_error(s, "infer on a model that failed to load",
                     s.infer("broken", {"inputs": [inp("x", "FP32", [1], [1])]}), 503, "broken",
                     "not ready")
        st, js, _, _ = s.infer("half_plus_two", {"inputs": [inp("x", "FP32", [1], [4])]})
        check(st == 200 and js["outputs"][0]["data"] == [4.0], "the other model serves: %r" % js)
    finally:
        s.stop()


def budget_checks(a, tmp, hp2):
    """--max_tensor_bytes bounds a v2 request's tensors as it bounds v1's."""
    s = Rest(a.build, write_config(tmp, [("half_plus_two", hp2)]), tmp,
             ["--max_tensor_bytes=64"])
    try:
        st, js, _, _ = s.infer("half_plus_two", {"inputs": [inp("x", "FP32", [16], [1] * 16)]})
        check(st == 200, "16 floats within a 64-byte limit: %d %r" % (st, js))
        expect_error(s, "17 floats over a 64-byte limit",
                     s.infer("half_plus_two", {"inputs": [inp("x", "FP32", [17], [1] * 17)]}),
                     400, "'x'", "64-byte limit")
        expect_error(s, "a binary shape over the limit",
                     s.infer("half_plus_two", {"inputs": [inp("x", "FP32", [1 << 40],
                                                              binary_size=4)]}, b"\0" * 4),
                     400, "'x'", "limit")
    finally:
        s.stop()


def demo(a, tmp):
    models = os.path.join(tmp, "models")
    dtypes = os.path.join(models, "dtypes")
    os.makedirs(dtypes)
    subprocess.run([a.dtype_model, os.path.join(dtypes, "1")], check=True,
                   stdout=subprocess.DEVNULL)
    hp2 = os.path.join(a.build, "models", "half_plus_two")
    s = Rest(a.build, write_config(tmp, [("half_plus_two", hp2), ("dtypes", dtypes)]), tmp)
    try:
        for f in (endpoint_checks, half_plus_two_checks, dtype_checks, output_checks):
            f(s)
        curl_check(s, tmp)
        metrics_checks(s)
    except Exception:
        print("---- server log ----\n" + s.logs()[-4000:], flush=True)
        raise
    finally:
        s.stop()
    batching_checks(a, tmp, hp2)
    not_ready_checks(a, tmp, hp2)
    budget_checks(a, tmp, hp2)


# ---- the TensorFlow fixtures ------------------------------------------------------------------

def golden(fx, name, sig="serving_default"):
    with open(os.path.join(fx, name, "golden", sig + ".json")) as f:
        return json.load(f)


def fixtures(a, tmp, fx):
    names = ["tfjs_times_two_int", "tfjs_uint8_multiply", "tfrs_retrieval_topk",
             "tfjs_module_with_multiple_signatures"]
    pairs = []
    for n in names:
        base = os.path.join(tmp, "models", n)
        os.makedirs(base)
        os.symlink(os.path.join(fx, n, "model"), os.path.join(base, "1"))
        pairs.append((n, base))
    s = Rest(a.build, write_config(tmp, pairs), tmp)
    try:
        gd = golden(fx, "tfjs_times_two_int")
        st, js, _, _ = s.infer("tfjs_times_two_int",
                               {"inputs": [inp("x", "INT32", [], gd["inputs"]["x"]["values"])]})
        check(st == 200 and js["outputs"][0]["datatype"] == "INT32"
              and js["outputs"][0]["shape"] == []
              and js["outputs"][0]["data"] == gd["outputs"]["output_0"]["values"],
              "INT32 scalar: %d %r" % (st, js))
        gd = golden(fx, "tfjs_uint8_multiply")
        xs = gd["inputs"]["x"]["values"]
        st, js, out, _ = s.infer("tfjs_uint8_multiply",
                                 {"inputs": [inp("x", "UINT8", [1], binary_size=1)],
                                  "parameters": {"binary_data_output": True}},
                                 struct.pack("<B", xs[0]))
        check(st == 200 and js["outputs"][0]["datatype"] == "INT32"
              and out == struct.pack("<i", gd["outputs"]["output_0"]["values"][0]),
              "UINT8 binary in, INT32 binary out: %d %r %r" % (st, js, out))
        gd = golden(fx, "tfrs_retrieval_topk")
        users = gd["inputs"]["input_1"]["values"]
        want = gd["outputs"]
        blob = bytes_binary([u.encode() for u in users])
        for label, doc, binary in (
                ("JSON", {"inputs": [inp("input_1", "BYTES", [3], users)]}, b""),
                ("binary", {"inputs": [inp("input_1", "BYTES", [3], binary_size=len(blob))]},
                 blob)):
            st, js, _, _ = s.infer("tfrs_retrieval_topk", doc, binary)
            outs = {o["name"]: o for o in js.get("outputs", [])}
            scores = outs.get("output_1", {}).get("data", [])
            ok = (st == 200 and outs["output_2"]["datatype"] == "BYTES"
                  and outs["output_2"]["shape"] == want["output_2"]["shape"]
                  and outs["output_2"]["data"] == want["output_2"]["values"]
                  and len(scores) == len(want["output_1"]["values"])
                  and all(math.isclose(x, y, rel_tol=1e-4, abs_tol=1e-5)
                          for x, y in zip(scores, want["output_1"]["values"])))
            check(ok, "BYTES retrieval (%s in): %d %r" % (label, st, str(js)[:300]))
        st, js, out, _ = s.infer("tfrs_retrieval_topk", {
            "inputs": [inp("input_1", "BYTES", [3], users)],
            "outputs": [{"name": "output_2", "parameters": {"binary_data": True}}]})
        check(st == 200 and out == bytes_binary([v.encode() for v in want["output_2"]["values"]]),
              "BYTES binary out: %d %r" % (st, out[:80]))
        gd = golden(fx, "tfjs_module_with_multiple_signatures", "timestwo")
        x = gd["inputs"]["x"]["values"]
        st, js, _, _ = s.infer("tfjs_module_with_multiple_signatures",
                               {"parameters": {"signature_name": "timestwo"},
                                "inputs": [inp("x", "FP32", [], x[0])]})
        check(st == 200 and math.isclose(js["outputs"][0]["data"][0],
                                         gd["outputs"]["output_0"]["values"][0], rel_tol=1e-6),
              "signature_name timestwo: %d %r" % (st, js))
    except Exception:
        print("---- server log ----\n" + s.logs()[-4000:], flush=True)
        raise
    finally:
        s.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--dtype-model", dest="dtype_model", required=True)
    ap.add_argument("--fixtures", action="store_true",
                    help="run the checks on the TensorFlow fixtures instead")
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    fx = g.fixtures_dir(os.path.abspath(a.source), "real")
    if a.fixtures and not os.path.isdir(fx):
        print("SKIP: the fixture checks: %s is absent (set TFS_FIXTURES)" % fx, flush=True)
        return 77
    tmp = tempfile.mkdtemp(prefix="tfs-v2-rest-test-")
    try:
        if a.fixtures:
            fixtures(a, tmp, fx)
        else:
            demo(a, tmp)
    except Exception as e:  # a crash of the test itself is a failure
        check(False, "test raised %r" % e)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (g.PASSED, g.FAILED), flush=True)
    return 1 if g.FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
