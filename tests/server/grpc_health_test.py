#!/usr/bin/python3
"""System test of tfserve's gRPC health service and gRPC drain, with a real gRPC client.

grpc.health.v1.Health/Check as load balancers and grpc_health_probe call it: SERVING with the
model loaded, for the whole server ("") and for PredictionService / ModelService; NOT_FOUND for an
unknown service; NOT_SERVING when the model has no loadable version and as soon as SIGTERM starts
a drain (while --drain_delay_seconds keeps the server answering); Watch is UNIMPLEMENTED.
Then SIGTERM under gRPC load: the calls in flight complete OK, later calls are refused with
UNAVAILABLE (never another code), the port is refused afterwards and tfserve exits 0.

Stubs come from the project's own .proto files (protoc at test time), as grpc_client_test.py
does. Prints "N passed, M failed"; exit 1 on a failure.

Run: /usr/bin/python3 grpc_health_test.py --build BUILD_DIR --source SOURCE_DIR
"""
import argparse
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpc_client_test as gct  # noqa: E402  (stubs, free_port, predict_req, check)

HEALTH = "/grpc.health.v1.Health/"
PS = gct.PS
check = gct.check


HEALTH_PB2 = None


def gen_stubs(source, out):
    """TF Serving's stubs, plus health_pb2 loaded by file path: the package name grpc.health.v1
    would otherwise resolve inside the installed grpc package."""
    global HEALTH_PB2
    gct.gen_stubs(source, out)
    proto = os.path.join(source, "proto")
    subprocess.run(["protoc", "--python_out=" + out, "-I" + proto,
                    "grpc/health/v1/health.proto"], check=True)
    spec = importlib.util.spec_from_file_location(
        "tfs_health_pb2", os.path.join(out, "grpc", "health", "v1", "health_pb2.py"))
    HEALTH_PB2 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(HEALTH_PB2)


class Proc:
    """tfserve on a free gRPC port; waits for the port only (the model may be absent)."""

    def __init__(self, build, base, logdir, extra=()):
        self.port = gct.free_port()
        self.log = open(os.path.join(logdir, "tfserve-health-%d.log" % self.port), "w+")
        self.proc = subprocess.Popen(
            [os.path.join(build, "server", "tfserve"), "--port=%d" % self.port,
             "--model_name=half_plus_two", "--model_base_path=" + base] + list(extra),
            stdout=self.log, stderr=subprocess.STDOUT)
        self.channel = grpc.insecure_channel("127.0.0.1:%d" % self.port)
        grpc.channel_ready_future(self.channel).result(timeout=30)

    def check_health(self, service, timeout=5):
        health_pb2 = HEALTH_PB2
        f = self.channel.unary_unary(HEALTH + "Check",
                                     request_serializer=lambda m: m.SerializeToString(),
                                     response_deserializer=health_pb2.HealthCheckResponse.FromString)
        return f(health_pb2.HealthCheckRequest(service=service), timeout=timeout).status

    def call(self, path, req, resp_type, timeout=10):
        f = self.channel.unary_unary(path, request_serializer=lambda m: m.SerializeToString(),
                                     response_deserializer=resp_type.FromString)
        return f(req, timeout=timeout)

    def logs(self):
        self.log.seek(0)
        return self.log.read()

    def wait(self, timeout):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def close(self):
        self.channel.close()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def expect_code(fn, code, what):
    try:
        fn()
        check(False, "%s: expected %s, got OK" % (what, code))
    except grpc.RpcError as e:
        check(e.code() == code, "%s: expected %s, got %s %r" % (what, code, e.code(), e.details()))


def check_serving(build, demo, tmp):
    health_pb2 = HEALTH_PB2
    H = health_pb2.HealthCheckResponse
    p = Proc(build, demo, tmp)
    try:
        for svc in ("", "tensorflow.serving.PredictionService", "tensorflow.serving.ModelService"):
            st = p.check_health(svc)
            check(st == H.SERVING, "Check(%r) with the model loaded: %s" % (svc, H.ServingStatus.Name(st)))
        expect_code(lambda: p.check_health("no.such.Service"), grpc.StatusCode.NOT_FOUND,
                    "Check of an unknown service")
        watch = p.channel.unary_stream(HEALTH + "Watch",
                                       request_serializer=lambda m: m.SerializeToString(),
                                       response_deserializer=H.FromString)
        expect_code(lambda: list(watch(health_pb2.HealthCheckRequest(), timeout=5)),
                    grpc.StatusCode.UNIMPLEMENTED, "Watch")
    finally:
        p.proc.send_signal(signal.SIGTERM)
        check(p.wait(10) == 0, "exit 0 after SIGTERM")
        p.close()


def check_not_serving(build, tmp):
    health_pb2 = HEALTH_PB2
    H = health_pb2.HealthCheckResponse
    empty = tempfile.mkdtemp(dir=tmp)
    p = Proc(build, empty, tmp)
    try:
        for svc in ("", "tensorflow.serving.PredictionService"):
            st = p.check_health(svc)
            check(st == H.NOT_SERVING, "Check(%r) with no loadable version: %s"
                  % (svc, H.ServingStatus.Name(st)))
    finally:
        p.proc.send_signal(signal.SIGTERM)
        check(p.wait(10) == 0, "exit 0 after SIGTERM (no model)")
        p.close()


def check_drain_delay(build, demo, tmp):
    health_pb2 = HEALTH_PB2
    H = health_pb2.HealthCheckResponse
    p = Proc(build, demo, tmp, ["--drain_delay_seconds=2"])
    try:
        check(p.check_health("") == H.SERVING, "SERVING before SIGTERM")
        t0 = time.time()
        p.proc.send_signal(signal.SIGTERM)
        st = H.SERVING
        while st == H.SERVING and time.time() - t0 < 1:
            st = p.check_health("")
        check(st == H.NOT_SERVING, "NOT_SERVING %.2fs after SIGTERM (got %s)"
              % (time.time() - t0, H.ServingStatus.Name(st)))
        r = gct.predict(p, gct.predict_req("half_plus_two", [1.0, 2.0, 5.0]))
        check(gct.close(list(r.outputs["y"].float_val), [2.5, 3.0, 4.5]),
              "Predict still answered during the delay")
        check(time.time() - t0 < 1.8, "delay checks done within the delay")
        rc = p.wait(10)
        check(rc == 0 and time.time() - t0 >= 1.9,
              "exit 0 after the 2 s delay (rc %s after %.2fs)" % (rc, time.time() - t0))
        with socket.socket() as s:
            check(s.connect_ex(("127.0.0.1", p.port)) != 0, "gRPC port refused after exit")
    finally:
        p.close()


def check_drain_under_load(build, demo, tmp):
    """SIGTERM while 6 threads keep 1 MB Predicts going on 2 channels to one server thread (so
    calls queue in the server and some are in flight at the signal)."""
    p = Proc(build, demo, tmp, ["--grpc_num_threads=1"])
    channels = [p.channel, grpc.insecure_channel("127.0.0.1:%d" % p.port)]
    values = [float(i % 7) for i in range(256 * 1024)]
    req = gct.predict_req("half_plus_two", values, content=True)
    want_last = 0.5 * values[-1] + 2
    stop = threading.Event()
    t_sig = [None]
    res = {"ok": 0, "ok_after": 0, "unavailable": 0, "cancelled": 0, "other": [], "wrong": 0}
    lock = threading.Lock()

    def hammer(ch):
        from tensorflow_serving.apis import predict_pb2
        f = ch.unary_unary(PS + "Predict", request_serializer=lambda m: m.SerializeToString(),
                           response_deserializer=predict_pb2.PredictResponse.FromString)
        while not stop.is_set():
            try:
                r = f(req, timeout=20)
                good = len(r.outputs["y"].float_val) == len(values) and \
                    r.outputs["y"].float_val[-1] == want_last
                with lock:
                    res["ok"] += 1
                    res["wrong"] += not good
                    if t_sig[0] is not None:
                        res["ok_after"] += 1
            except grpc.RpcError as e:
                with lock:
                    if e.code() == grpc.StatusCode.UNAVAILABLE:
                        res["unavailable"] += 1
                    elif e.code() == grpc.StatusCode.CANCELLED and t_sig[0] is not None:
                        res["cancelled"] += 1
                    else:
                        res["other"].append("%s %s" % (e.code(), e.details()))
                time.sleep(0.005)

    ts = [threading.Thread(target=hammer, args=(channels[i % 2],)) for i in range(6)]
    try:
        for t in ts:
            t.start()
        # Load until some calls have been answered (a fixed sleep saw only 8 under ASan on a
        # busy machine), then signal.
        t_end = time.time() + 15
        while res["ok"] <= 20 and time.time() < t_end:
            time.sleep(0.05)
        time.sleep(0.2)
        t_sig[0] = time.time()
        p.proc.send_signal(signal.SIGTERM)
        rc = p.wait(20)
        dt = time.time() - t_sig[0]
        time.sleep(0.1)
        stop.set()
        for t in ts:
            t.join()
        print("gRPC SIGTERM under load: %d OK (%d completed after the signal), %d UNAVAILABLE, "
              "%d CANCELLED, %d other; exit %s %.3fs after SIGTERM"
              % (res["ok"], res["ok_after"], res["unavailable"], res["cancelled"],
                 len(res["other"]), rc, dt), flush=True)
        check(rc == 0, "exit 0 after SIGTERM under gRPC load (rc %s)" % rc)
        check(not res["other"], "calls failed with other codes than UNAVAILABLE or CANCELLED "
              "(or CANCELLED before the signal): %s" % res["other"][:3])
        # The C core cancels a call whose request message is still arriving at shutdown (it
        # never reached a handler); at most one per client thread can be in that state.
        check(res["cancelled"] <= len(ts), "%d calls CANCELLED, more than the %d clients"
              % (res["cancelled"], len(ts)))
        check(res["wrong"] == 0, "%d OK answers had wrong outputs" % res["wrong"])
        check(res["ok"] > 10, "calls answered before the signal (%d)" % res["ok"])
        # The server logs how many calls were being answered when it stopped accepting: each of
        # them must have reached its client OK.
        m = re.search(r"drain: all (\d+) calls answered during the drain", p.logs())
        print("gRPC calls answered during the drain: %s" % (m.group(1) if m else "?"), flush=True)
        # Whether one of those was cut off, the server knows (RECV_CLOSE_ON_SERVER's cancelled
        # flag); the client's clock cannot tell a call answered just before the signal from one
        # answered just after it.
        logs = p.logs()
        check("calls answered during the drain completed" in logs and
              "were cancelled before their status went out" not in logs,
              "calls in flight at the drain completed: %s"
              % [l for l in logs.splitlines() if "during the drain" in l])
        check(res["unavailable"] >= 1, "calls after the drain are refused UNAVAILABLE")
    finally:
        stop.set()
        for t in ts:
            t.join()
        channels[1].close()
        p.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    a.source = os.path.abspath(a.source)
    tmp = tempfile.mkdtemp(prefix="tfs-grpc-health-")
    try:
        gen_stubs(a.source, tmp)
        demo = os.path.join(a.build, "models", "half_plus_two")
        check_serving(a.build, demo, tmp)
        check_not_serving(a.build, tmp)
        check_drain_delay(a.build, demo, tmp)
        check_drain_under_load(a.build, demo, tmp)
    except Exception as e:  # a crash of the test itself is a failure
        check(False, "test raised %r" % e)
        for f in sorted(os.listdir(tmp)):
            if f.endswith(".log"):
                with open(os.path.join(tmp, f)) as fh:
                    print("---- %s ----\n%s" % (f, fh.read()[-3000:]), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (gct.PASSED, gct.FAILED), flush=True)
    return 1 if gct.FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
