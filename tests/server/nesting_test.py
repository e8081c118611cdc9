#!/usr/bin/python3
"""System test of the nesting limit on protobuf wire data, with the real tfserve and a real gRPC
client. protobuf-c unpacks recursively, so a message nested a few thousand levels deep through a
recursive type (TensorProto -> variant_val -> tensors -> TensorProto ...) would overflow the
server's stack; tfserve refuses nesting deeper than 100 levels before unpacking. Checked here:

- a raw Predict request nested 20000 levels deep gets INVALID_ARGUMENT with the reason, and the
  same server then still answers a normal Predict over gRPC and over REST;
- a version whose saved_model.pb nests 20000 levels deep fails with the reason in its status while
  version 1 of the model keeps serving, both at startup and when the version appears later;
- a version whose warmup record nests 20000 levels deep fails its warmup with the reason;
- a text config nested 10000 levels deep is refused with its position, without a crash.

The deep bytes are written by hand (not with python protobuf, which has its own limit). Stubs and
the Server wrapper come from grpc_client_test.py. Uses the bundled demo model only. Prints
"N passed, M failed"; exit 1 on a failure.

Run: /usr/bin/python3 nesting_test.py --build BUILD_DIR --source SOURCE_DIR
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # expects to sit in tests/server/
import grpc_client_test as g  # noqa: E402

REASON = "message nests deeper than 100 levels"
# 10000 levels (34 KB) were enough to crash the server before the limit; twice that, to be sure.
DEEP = 20000


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(num, payload):
    """A length-delimited field: tag, length, payload."""
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def nest(fields, levels, inner=b""):
    """inner wrapped in `levels` length-delimited fields, fields[0] innermost, cycling through
    fields; built in one pass (headers first, then joined) so that deep nesting costs O(size)."""
    headers = []
    n = len(inner)
    for i in range(levels):
        h = varint(fields[i % len(fields)] << 3 | 2) + varint(n)
        headers.append(h)
        n += len(h)
    return b"".join(reversed(headers)) + inner


def deep_tensor(levels):
    """TensorProto bytes with `levels` (even) messages nested below: variant_val (15) holds a
    VariantTensorDataProto whose tensors (3) hold a TensorProto, and so on."""
    return nest([3, 15], levels)


def deep_predict_request(name, levels):
    """PredictRequest{model_spec{name}, inputs{"x": deep TensorProto}}."""
    entry = field(1, b"x") + field(2, deep_tensor(levels))
    return field(1, field(1, name.encode())) + field(2, entry)


def deep_meta_graph(levels):
    """A SavedModel.meta_graphs element (field 2) whose graph_def's one node has an attr holding a
    deep tensor: MetaGraphDef.graph_def (2) -> GraphDef.node (1) -> NodeDef.attr (5, map entry
    key 1 value 2) -> AttrValue.tensor (8)."""
    attr = field(1, b"a") + field(2, field(8, deep_tensor(levels)))
    node = field(1, b"deep") + field(5, attr)
    return field(2, field(2, field(1, node)))


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked_crc(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecord(records):
    out = b""
    for r in records:
        n = struct.pack("<Q", len(r))
        out += n + struct.pack("<I", masked_crc(n)) + r + struct.pack("<I", masked_crc(r))
    return out


def http(port, method, path, body=None):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), method=method,
                                 data=body.encode() if body is not None else None)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def serves(srv, name, version=None):
    try:
        r = g.predict(srv, g.predict_req(name, [1.0, 2.0, 5.0], version=version))
        return g.close(list(r.outputs["y"].float_val), [2.5, 3.0, 4.5])
    except grpc.RpcError:
        return False


def statuses(srv, name):
    """{version: (state, error_code, error_message)} from GetModelStatus."""
    from tensorflow_serving.apis import get_model_status_pb2 as gms
    req = gms.GetModelStatusRequest()
    req.model_spec.name = name
    r = srv.call(g.MS + "GetModelStatus", req, gms.GetModelStatusResponse)
    return {v.version: (v.state, v.status.error_code, v.status.error_message)
            for v in r.model_version_status}


def wait_failed(srv, name, versions, timeout=60):
    """Waits until every version in `versions` has ended (failed to load); returns the statuses."""
    from tensorflow_serving.apis import get_model_status_pb2 as gms
    deadline = time.time() + timeout
    while True:
        st = statuses(srv, name)
        if all(v in st and st[v][0] == gms.ModelVersionStatus.END for v in versions):
            return st
        if time.time() > deadline:
            return st
        time.sleep(0.1)


def check_request(build, demo, tmp):
    rest = g.free_port()
    s = g.Server(build, "half_plus_two", demo, tmp, ["--rest_api_port=%d" % rest])
    try:
        data = deep_predict_request("half_plus_two", DEEP)
        g.check(len(data) < 100 * 1024, "request: %d levels take %d bytes" % (DEEP, len(data)))
        g.expect_error(lambda: s.raw(g.PS + "Predict", data), grpc.StatusCode.INVALID_ARGUMENT,
                       REASON, "request: Predict nested %d deep" % DEEP)
        # Also just past the limit (the tensor starts two levels down: entry, value).
        g.expect_error(lambda: s.raw(g.PS + "Predict",
                                     deep_predict_request("half_plus_two", 100)),
                       grpc.StatusCode.INVALID_ARGUMENT, REASON, "request: 102 levels")
        # At the limit the request unpacks; what is wrong with it is then its content.
        try:
            s.raw(g.PS + "Predict", deep_predict_request("half_plus_two", 98))
            g.check(False, "request: 100 levels: expected an error about the tensor")
        except grpc.RpcError as e:
            g.check(REASON not in (e.details() or ""),
                    "request: 100 levels unpack: %s %r" % (e.code(), e.details()))
        g.check(s.proc.poll() is None, "request: the server is still running")
        g.check(serves(s, "half_plus_two"), "request: a normal Predict is answered afterwards")
        st, body = http(rest, "POST", "/v1/models/half_plus_two:predict",
                        '{"instances": [1.0, 2.0, 5.0]}')
        g.check(st == 200 and json.loads(body).get("predictions") == [2.5, 3.0, 4.5],
                "request: REST predict afterwards: %d %s" % (st, body[:200]))
    finally:
        s.stop()


def check_files(build, demo, tmp):
    base = os.path.join(tmp, "deep")
    good = os.path.join(demo, "1")
    shutil.copytree(good, os.path.join(base, "1"))
    # Version 2: the demo's saved_model.pb with a second MetaGraphDef nested 20000 deep.
    v2 = os.path.join(base, "2")
    shutil.copytree(good, v2)
    with open(os.path.join(v2, "saved_model.pb"), "ab") as f:
        f.write(deep_meta_graph(DEEP))
    # Version 3: a sound model whose warmup record (a PredictionLog with predict_log (6) ->
    # request (1)) nests 20000 deep.
    v3 = os.path.join(base, "3")
    shutil.copytree(good, v3)
    os.makedirs(os.path.join(v3, "assets.extra"), exist_ok=True)
    log = field(6, field(1, deep_predict_request("deep", DEEP)))
    with open(os.path.join(v3, "assets.extra", "tf_serving_warmup_requests"), "wb") as f:
        f.write(tfrecord([log]))
    cfg = os.path.join(tmp, "deep.config")
    with open(cfg, "w") as f:
        f.write("model_config_list { config { name: 'deep' base_path: %r model_platform: "
                "'tensorflow' model_version_policy { all {} } } }\n" % base)
    s = g.Server(build, "deep", base, tmp, ["--model_config_file=" + cfg,
                                            "--file_system_poll_wait_seconds=1"])
    try:
        from tensorflow_serving.apis import get_model_status_pb2 as gms
        st = wait_failed(s, "deep", [2, 3])
        g.check(st.get(1, (None,))[0] == gms.ModelVersionStatus.AVAILABLE,
                "files: version 1 is available: %s" % (st.get(1),))
        e2 = st.get(2, (None, 0, ""))
        g.check(e2[0] == gms.ModelVersionStatus.END and e2[1] != 0 and REASON in e2[2]
                and "saved_model.pb" in e2[2],
                "files: version 2 (deep saved_model.pb) failed with the reason: %s" % (e2,))
        e3 = st.get(3, (None, 0, ""))
        g.check(e3[0] == gms.ModelVersionStatus.END and e3[1] != 0 and REASON in e3[2]
                and "warmup record 0" in e3[2],
                "files: version 3 (deep warmup record) failed with the reason: %s" % (e3,))
        g.check(serves(s, "deep", version=1), "files: version 1 serves")
        # A version that appears while the server runs fails the same way.
        v4 = os.path.join(base, "4")
        shutil.copytree(v2, v4 + ".tmp")
        os.rename(v4 + ".tmp", v4)
        st = wait_failed(s, "deep", [4])
        e4 = st.get(4, (None, 0, ""))
        g.check(e4[0] == gms.ModelVersionStatus.END and REASON in e4[2],
                "files: hot-added version 4 failed with the reason: %s" % (e4,))
        g.check(s.proc.poll() is None and serves(s, "deep", version=1),
                "files: the server runs and version 1 serves after version 4 failed")
        logs = s.logs()
        g.check(REASON in logs, "files: the log says why")
    finally:
        s.stop()


def check_text_config(build, demo, tmp):
    """No config file's message type is recursive, so 10000 levels of braces stop at the first
    level the schema does not have; the parser itself also refuses more than 100 levels (its unit
    tests use a recursive type). Either way: an error with a position, not a crash."""
    cfg = os.path.join(tmp, "nested.config")
    with open(cfg, "w") as f:
        f.write("model_config_list { config { model_version_policy { specific " +
                "{ " * 10000 + "} " * 10004 + "}\n")
    p = subprocess.run([os.path.join(build, "server", "tfserve"), "--port=%d" % g.free_port(),
                        "--model_config_file=" + cfg], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=30)
    out = p.stdout.decode(errors="replace")
    g.check(p.returncode == 1 and cfg + ":1:" in out,
            "text config nested 10000 deep: rc %d (1 = refused, not a signal): %s"
            % (p.returncode, out[-300:]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    tmp = tempfile.mkdtemp(prefix="tfs-nesting-test-")
    try:
        g.gen_stubs(os.path.abspath(a.source), tmp)
        demo = os.path.join(build, "models", "half_plus_two")
        check_request(build, demo, tmp)
        check_files(build, demo, tmp)
        check_text_config(build, demo, tmp)
    except Exception as e:  # a crash of the test itself is a failure
        g.check(False, "nesting test raised %r" % e)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (g.PASSED, g.FAILED), flush=True)
    return 1 if g.FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
