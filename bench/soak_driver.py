#!/usr/bin/python3
"""Load driver of bench/soak.sh (not a test): a bounded, mixed load on a running tfserve's REST and
gRPC ports, all on 127.0.0.1.

Each of --threads workers picks a request class at random (weighted) until --seconds have passed
or --max-requests were sent: good predicts over REST and gRPC on both served models (answers and
latency checked), malformed JSON, wrong dtypes and shapes, unknown models, versions and
signatures, huge declared shapes and Content-Lengths, deeply nested JSON, a PredictRequest whose
TensorProto nests DEEP levels through variant_val -> tensors (bytes built by hand), connections
dropped mid-request, slow clients and short gRPC deadlines.

Per class it counts the requests and their outcomes (HTTP status, gRPC code or connection error),
and "unexpected" outcomes: a bad request answered 200/OK, a 5xx or INTERNAL/UNKNOWN answer, a
connection error where an answer was due. A good request is a violation when its answer is wrong,
missing or later than --good-latency seconds. Writes everything to --out (JSON) and prints a table.

Stubs, the request builders and the HTTP reader come from tests/server/ (generated with protoc as
the system tests do).

Run by bench/soak.sh; by hand:
  /usr/bin/python3 bench/soak_driver.py --source . --grpc-port P --rest-port R --model M \
      --swap-model S --seconds 60 --out /tmp/driver.json
"""
import argparse
import collections
import json
import os
import random
import socket
import sys
import tempfile
import threading
import time

import grpc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "server"))
import grpc_client_test as g  # noqa: E402
import nesting_test as nest  # noqa: E402
import rest_limits_test as rl  # noqa: E402

DEEP = 20000
VALUES = [1.0, 2.0, 5.0]
WANT = [0.5 * v + 2 for v in VALUES]
# Answers the server may give to a bad request: a refusal, never OK, 5xx, INTERNAL or UNKNOWN.
BAD_GRPC_OK = {"INVALID_ARGUMENT", "NOT_FOUND", "FAILED_PRECONDITION", "RESOURCE_EXHAUSTED",
               "OUT_OF_RANGE", "UNIMPLEMENTED"}


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.count = collections.Counter()
        self.codes = collections.defaultdict(collections.Counter)
        self.unexpected = collections.Counter()
        self.unexpected_examples = []
        self.good = collections.Counter()   # requests, violations, keep-alive retries
        self.lat = []                       # good latencies (s)
        self.worst = (0.0, None)            # (latency, elapsed time it happened)
        self.violations = []                # first few, with time and reason

    def record(self, cls, outcome, expected, why=""):
        with self.lock:
            self.count[cls] += 1
            self.codes[cls][outcome] += 1
            if not expected:
                self.unexpected[cls] += 1
                if len(self.unexpected_examples) < 20:
                    self.unexpected_examples.append("%s: %s %s" % (cls, outcome, why[:200]))

    def good_result(self, t, latency, ok, what, limit):
        """what: the protocol and model, and why the answer was wrong when it was."""
        with self.lock:
            self.good["requests"] += 1
            self.lat.append(latency)
            if latency > self.worst[0]:
                self.worst = (latency, round(t, 1))
            if not ok or latency > limit:
                self.good["violations"] += 1
                if len(self.violations) < 20:
                    self.violations.append("t=%.1fs %.3fs %s" % (t, latency, what))


class Driver:
    def __init__(self, a):
        self.a = a
        self.stats = Stats()
        self.t0 = time.time()
        self.sent = 0
        self.sent_lock = threading.Lock()
        opts = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
        self.channel = grpc.insecure_channel("127.0.0.1:%d" % a.grpc_port, options=opts)
        from tensorflow_serving.apis import predict_pb2
        self.predict_pb2 = predict_pb2
        self.predict = self.channel.unary_unary(
            g.PS + "Predict", request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=predict_pb2.PredictResponse.FromString)
        self.raw_predict = self.channel.unary_unary(g.PS + "Predict")
        self.deep_proto = nest.deep_predict_request(a.model, DEEP)
        n = 100000
        self.deep_json = [
            '{"instances": ' + "[" * n + "1.0" + "]" * n + "}",
            '{"inputs": ' + '{"x": ' * n + "1.0" + "}" * n + "}",
            '{"instances": [' + '{"x": [' * (n // 2) + "1" + "]}" * (n // 2) + "]}",
        ]
        self.classes = [
            ("good_rest", 6, self.good_rest),
            ("good_grpc", 6, self.good_grpc),
            ("bad_json", 2, self.bad_json),
            ("wrong_type_shape", 2, self.wrong_type_shape),
            ("unknown_names", 2, self.unknown_names),
            ("huge_shape", 1, self.huge_shape),
            ("deep_json", 0.3, self.deep_json_req),
            ("deep_proto", 0.3, self.deep_proto_req),
            ("dropped_conn", 1, self.dropped_conn),
            ("slow_client", 0.2, self.slow_client),
            ("short_deadline", 1, self.short_deadline),
        ]
        self.local = threading.local()

    # ---- helpers ----

    def elapsed(self):
        return time.time() - self.t0

    def http(self, path, body, fresh=False):
        """POST over this thread's keep-alive connection: (status, body bytes, retried). One retry
        on a new connection when a reused one turns out closed before any answer (the server may
        close idle or errored connections; any HTTP client does this)."""
        import http.client
        for attempt in (0, 1):
            conn = None if fresh else getattr(self.local, "conn", None)
            reused = conn is not None
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", self.a.rest_port, timeout=10)
            try:
                conn.request("POST", path, body=body,
                             headers={"Content-Type": "application/json"})
                r = conn.getresponse()
                data = r.read()
                if r.will_close or fresh:
                    conn.close()
                    conn = None
                if not fresh:
                    self.local.conn = conn
                return r.status, data, attempt == 1
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                conn.close()
                self.local.conn = None
                if not reused or attempt == 1:
                    raise

    def rest_outcome(self, cls, path, body, ok_statuses=None):
        """A bad REST request: expected a 4xx (or one of ok_statuses)."""
        try:
            status, data, _ = self.http(path, body)
        except OSError as e:
            self.local.conn = None
            self.stats.record(cls, "conn " + type(e).__name__, False, str(e))
            return
        expected = (400 <= status < 500) if ok_statuses is None else status in ok_statuses
        self.stats.record(cls, "http %d" % status, expected, data[:200].decode("latin-1"))

    def grpc_outcome(self, cls, fn, ok_codes=BAD_GRPC_OK):
        try:
            fn()
            code, why = "OK", ""
        except grpc.RpcError as e:
            code, why = e.code().name, e.details() or ""
        self.stats.record(cls, "grpc " + code, code in ok_codes, why)

    def req(self, model, values=VALUES, **kw):
        return g.predict_req(model, values, **kw)

    # ---- request classes ----

    def good_rest(self):
        model = random.choice([self.a.model, self.a.swap_model])
        if random.random() < 0.5:
            body = json.dumps({"instances": VALUES})
            key = "predictions"
        else:
            body = json.dumps({"inputs": {"x": VALUES}})
            key = "outputs"
        t = time.time()
        try:
            status, data, retried = self.http("/v1/models/%s:predict" % model, body)
            latency = time.time() - t
            got = json.loads(data.decode()).get(key) if status == 200 else None
            ok = status == 200 and isinstance(got, list) and g.close(got, WANT)
            why = "" if ok else "%s: http %d %s" % (model, status, data[:200])
            outcome = "http %d" % status
            if retried:
                with self.stats.lock:
                    self.stats.good["keepalive_retries"] += 1
        except (OSError, ValueError) as e:
            self.local.conn = None
            latency, ok, why = time.time() - t, False, "%s: %r" % (model, e)
            outcome = "conn " + type(e).__name__
        self.stats.record("good_rest", outcome, ok, why)
        self.stats.good_result(self.elapsed(), latency, ok, "rest " + (why or model),
                               self.a.good_latency)

    def good_grpc(self):
        model = random.choice([self.a.model, self.a.swap_model])
        version = 1 if model == self.a.model and random.random() < 0.3 else None
        t = time.time()
        try:
            r = self.predict(self.req(model, content=random.random() < 0.5, version=version),
                             timeout=10)
            latency = time.time() - t
            ok = g.close(list(r.outputs["y"].float_val), WANT)
            why = "" if ok else "%s: values %s" % (model, list(r.outputs["y"].float_val))
            outcome = "grpc OK"
        except grpc.RpcError as e:
            latency, ok = time.time() - t, False
            why = "%s: %s %s" % (model, e.code().name, e.details())
            outcome = "grpc " + e.code().name
        self.stats.record("good_grpc", outcome, ok, why)
        self.stats.good_result(self.elapsed(), latency, ok, "grpc " + (why or model),
                               self.a.good_latency)

    def bad_json(self):
        # Not here: a document followed by NUL bytes, which tfserve reads as the end of input
        # (as TF Serving's rapidjson does) and so answers.
        body = random.choice([
            '{"instances": [1.0,', "{", "", "null", "[]", '{"instances": [1.0]}}',
            '{"instances": [1.0] "x": 1}', "\xff\xfe\x00garbage", '{"instances": 1.0e999999}',
            '{"instances": [1.0], "instances": [2.0]', '{"inputs": }', "'single'",
            '{"instances": [' + "1.0," * 1000 + "]}"])
        self.rest_outcome("bad_json", "/v1/models/%s:predict" % self.a.model,
                          body.encode("utf-8", "surrogateescape"))

    def wrong_type_shape(self):
        m = self.a.model
        if random.random() < 0.5:
            body = random.choice([
                '{"inputs": {"x": ["a"]}}', '{"instances": [[1.0], [1.0, 2.0]]}',
                '{"instances": [{"x": [1.0]}, {"x": [1.0, 2.0]}]}', '{"inputs": {"x": {"b64": 1}}}',
                '{"instances": [{"b64": "AAAA"}]}', '{"inputs": {"x": [[1.0], 2.0]}}'])
            self.rest_outcome("wrong_type_shape", "/v1/models/%s:predict" % m, body)
            return
        k = random.randrange(5)
        if k == 0:
            req = g.predict_req(m)
            t = req.inputs["x"]
            t.dtype = 7
            t.tensor_shape.dim.add().size = 1
            t.string_val.append(b"abc")
        elif k == 1:
            req = self.req(m, dtype=2)
        elif k == 2:
            req = self.req(m, [1.0, 2.0], content=True, shape=[3])
        elif k == 3:
            req = self.req(m, [1.0], shape=[-2])
        else:
            req = self.req(m, dtype=99)
        self.grpc_outcome("wrong_type_shape", lambda: self.predict(req, timeout=10))

    def unknown_names(self):
        m = self.a.model
        if random.random() < 0.5:
            path, body = random.choice([
                ("/v1/models/nope:predict", '{"inputs": [1.0]}'),
                ("/v1/models/%s/versions/999:predict" % m, '{"inputs": [1.0]}'),
                ("/v1/models/%s/versions/-1:predict" % m, '{"inputs": [1.0]}'),
                ("/v1/models/%s/labels/nope:predict" % m, '{"inputs": [1.0]}'),
                ("/v1/models/%s:predict" % m, '{"signature_name": "nope", "inputs": [1.0]}'),
                ("/v1/models/%s:nope" % m, '{"inputs": [1.0]}'),
                ("/v1/models/%s:predict" % ("n" * 5000), '{"inputs": [1.0]}')])
            self.rest_outcome("unknown_names", path, body)
            return
        req = random.choice([self.req("nope"), self.req(m, version=999),
                             self.req(m, signature="nope"), self.req(m, label="nope"),
                             self.req(m, key="nope")])
        self.grpc_outcome("unknown_names", lambda: self.predict(req, timeout=10))

    def huge_shape(self):
        m = self.a.model
        k = random.randrange(5)
        if k == 4:
            # A REST body declared as 1 TiB, of which a few bytes come: refused or closed.
            self.raw_rest("huge_shape", b"POST /v1/models/%s:predict HTTP/1.1\r\nHost: x\r\n"
                          b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                          b'{"instances": [1.0' % (m.encode(), 1 << 40), read=True)
            return
        shape = [[1 << 40], [1 << 32, 1 << 32], [2] * 200, [1 << 62, 4]][k]
        req = self.req(m, [1.0], shape=shape, content=random.random() < 0.5)
        self.grpc_outcome("huge_shape", lambda: self.predict(req, timeout=10))

    def deep_json_req(self):
        self.rest_outcome("deep_json", "/v1/models/%s:predict" % self.a.model,
                          random.choice(self.deep_json))

    def deep_proto_req(self):
        self.grpc_outcome("deep_proto", lambda: self.raw_predict(self.deep_proto, timeout=10),
                          {"INVALID_ARGUMENT"})

    def raw_rest(self, cls, data, read, pause=0.0, chunks=1):
        """Sends data on a new REST connection (in `chunks` pieces, `pause` s apart); with read,
        reads the answer (a 4xx, or the server closing, are both expected) and closes."""
        try:
            with socket.create_connection(("127.0.0.1", self.a.rest_port), timeout=10) as s:
                step = max(1, len(data) // chunks)
                for i in range(0, len(data), step):
                    s.sendall(data[i:i + step])
                    if pause:
                        time.sleep(pause)
                if not read:
                    self.stats.record(cls, "dropped", True)
                    return None
                r = rl.read_response(s)
        except (ConnectionResetError, BrokenPipeError) as e:
            self.stats.record(cls, "closed by server (%s)" % type(e).__name__, True)
            return None
        except OSError as e:
            self.stats.record(cls, "conn " + type(e).__name__, False, str(e))
            return None
        if r is None:
            self.stats.record(cls, "closed by server", True)
            return None
        return r

    def dropped_conn(self):
        m = self.a.model.encode()
        body = b'{"instances": [1.0, 2.0, 5.0]}'
        full = (b"POST /v1/models/%s:predict HTTP/1.1\r\nHost: x\r\nContent-Type: "
                b"application/json\r\nContent-Length: %d\r\n\r\n%s" % (m, len(body), body))
        k = random.randrange(6)
        if k == 0:      # half the request line
            self.raw_rest("dropped_conn", full[:10], read=False)
        elif k == 1:    # headers and half the body
            self.raw_rest("dropped_conn", full[:-10], read=False)
        elif k == 2:    # the whole request, gone before the answer is written
            self.raw_rest("dropped_conn", full, read=False)
        elif k == 3:    # a gRPC call cancelled in flight (RST_STREAM)
            f = self.predict.future(self.req(self.a.model), timeout=10)
            time.sleep(random.random() * 0.002)
            f.cancel()
            try:
                f.result()
                outcome = "grpc OK"
            except grpc.FutureCancelledError:
                outcome = "cancelled"
            except grpc.RpcError as e:
                outcome = "grpc " + e.code().name
            self.stats.record("dropped_conn", outcome, True)
        else:           # raw HTTP/2 on the gRPC port: the preface, maybe half a frame, then gone
            data = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
            if k == 5:
                data += b"\x00\x00\x12\x04\x00\x00\x00\x00\x00\x00\x03"   # SETTINGS, cut short
            try:
                with socket.create_connection(("127.0.0.1", self.a.grpc_port), timeout=10) as s:
                    s.sendall(data)
                self.stats.record("dropped_conn", "h2 dropped", True)
            except OSError as e:
                self.stats.record("dropped_conn", "conn " + type(e).__name__, False, str(e))

    def slow_client(self):
        """A good request sent in 20 pieces over about 1 s; its answer is checked (not timed)."""
        m = self.a.model.encode()
        body = b'{"instances": [1.0, 2.0, 5.0]}'
        full = (b"POST /v1/models/%s:predict HTTP/1.1\r\nHost: x\r\nContent-Type: "
                b"application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s"
                % (m, len(body), body))
        r = self.raw_rest("slow_client", full, read=True, pause=0.05, chunks=20)
        if r is None:
            return
        status, _, data = r
        try:
            ok = status == 200 and g.close(json.loads(data.decode())["predictions"], WANT)
        except (ValueError, KeyError):
            ok = False
        self.stats.record("slow_client", "http %d" % status, ok, data[:200].decode("latin-1"))

    def short_deadline(self):
        """A good call with a 0.1-5 ms deadline: OK with the right values, or DEADLINE_EXCEEDED."""
        req = self.req(random.choice([self.a.model, self.a.swap_model]))
        try:
            r = self.predict(req, timeout=random.uniform(0.0001, 0.005))
            ok = g.close(list(r.outputs["y"].float_val), WANT)
            self.stats.record("short_deadline", "grpc OK", ok, "values %s" % r.outputs["y"])
        except grpc.RpcError as e:
            self.stats.record("short_deadline", "grpc " + e.code().name,
                              e.code() == grpc.StatusCode.DEADLINE_EXCEEDED, e.details() or "")

    # ---- running ----

    def server_alive(self):
        return self.a.pid == 0 or os.path.exists("/proc/%d" % self.a.pid)

    def worker(self):
        names = [c[0] for c in self.classes]
        weights = [c[1] for c in self.classes]
        fns = {c[0]: c[2] for c in self.classes}
        end = self.t0 + self.a.seconds
        while time.time() < end:
            with self.sent_lock:
                if self.sent >= self.a.max_requests:
                    return
                self.sent += 1
            if not self.server_alive():
                return
            cls = random.choices(names, weights)[0]
            try:
                fns[cls]()
            except Exception as e:  # noqa: BLE001 -- a driver bug must not end the soak silently
                self.stats.record(cls, "driver " + type(e).__name__, False, repr(e))

    def wait_ready(self, timeout=120):
        """Until both models answer a good Predict (the loads run under ASan: slow)."""
        deadline = time.time() + timeout
        for m in (self.a.model, self.a.swap_model):
            while True:
                try:
                    r = self.predict(self.req(m), timeout=5)
                    if g.close(list(r.outputs["y"].float_val), WANT):
                        break
                except grpc.RpcError:
                    pass
                if time.time() > deadline or not self.server_alive():
                    raise SystemExit("soak_driver: model %s not served after %d s" % (m, timeout))
                time.sleep(0.2)

    def run(self):
        self.wait_ready()
        self.t0 = time.time()
        if self.a.started_file:
            with open(self.a.started_file, "w") as f:
                f.write("%d\n" % self.t0)
        ts = [threading.Thread(target=self.worker, daemon=True)
              for _ in range(self.a.threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return self.elapsed()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", default=ROOT)
    ap.add_argument("--grpc-port", type=int, required=True)
    ap.add_argument("--rest-port", type=int, required=True)
    ap.add_argument("--model", default="half_plus_two")
    ap.add_argument("--swap-model", default="swap")
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--max-requests", type=int, default=2000000)
    ap.add_argument("--good-latency", type=float, default=1.0)
    ap.add_argument("--pid", type=int, default=0, help="tfserve's pid: stop early once it is gone")
    ap.add_argument("--started-file", help="gets the epoch second the load started")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="tfs-soak-stubs-")
    g.gen_stubs(os.path.abspath(a.source), tmp)
    d = Driver(a)
    wall = d.run()
    s = d.stats
    lat = sorted(s.lat)

    def pct(p):
        return round(lat[min(len(lat) - 1, int(p * len(lat)))], 4) if lat else None

    doc = {
        "seconds": round(wall, 1), "threads": a.threads, "requests": sum(s.count.values()),
        "server_alive_at_end": d.server_alive(),
        "classes": {c: {"count": s.count[c], "unexpected": s.unexpected[c],
                        "outcomes": dict(s.codes[c])} for c, _, _ in d.classes},
        "unexpected_examples": s.unexpected_examples,
        "good": {"requests": s.good["requests"], "violations": s.good["violations"],
                 "keepalive_retries": s.good["keepalive_retries"],
                 "latency_p50_s": pct(0.5), "latency_p99_s": pct(0.99),
                 "worst_latency_s": round(s.worst[0], 4), "worst_at_s": s.worst[1],
                 "violation_examples": s.violations},
    }
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
    print("%-18s %9s %10s  outcomes" % ("class", "count", "unexpected"))
    for c, _, _ in d.classes:
        oc = ", ".join("%s: %d" % kv for kv in sorted(s.codes[c].items(), key=lambda kv: -kv[1]))
        print("%-18s %9d %10d  %s" % (c, s.count[c], s.unexpected[c], oc))
    print("%d requests in %.0f s from %d threads; good: %d, violations %d, p50 %s s, p99 %s s, "
          "worst %s s" % (doc["requests"], wall, a.threads, s.good["requests"],
                          s.good["violations"], pct(0.5), pct(0.99), round(s.worst[0], 4)))
    for v in s.violations[:5]:
        print("  violation: " + v)
    for u in s.unexpected_examples[:5]:
        print("  unexpected: " + u)


if __name__ == "__main__":
    main()
