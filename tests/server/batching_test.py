#!/usr/bin/python3
"""System test of dynamic batching on the real tfserve (--enable_batching with a
--batching_parameters_file), with real REST (raw HTTP over sockets) and gRPC clients:

  - the adaptive scheduler (the default): with a 1 s batch_timeout, one client's predicts are
    answered at once (queue time well under the timeout) with half_plus_two's values; after a
    burst of predicts the idle server uses no CPU (at most 0.05 s in 3 s: no thread spins or
    polls once requests stop); after 1100 more one-row predicts and no scrape between, the
    tfserve_batch_size and tfserve_batch_queue_delay_seconds histograms count every batch and
    task (count = tfserve_batches_total, sum = rows + padding rows); an unknown
    --batching_scheduler fails the start;
  - the checks below use --batching_scheduler=fixed (TF Serving's behaviour), whose timeout they
    count on to hold tasks in the queue:
  - concurrent one-row REST predicts get answers byte-identical to a server without batching, and
    the metrics show batches of more than one row, the batch size histogram's count and sum
    equal to the batches and rows (+ padding) counters; the queue/compute headers are present;
  - a full queue answers 503 at once (max_enqueued_batches 1, a waiting batch, a task that needs a
    second one);
  - a gRPC deadline shorter than batch_timeout: DEADLINE_EXCEEDED, and the metrics show the task
    dropped, not run (rows run unchanged);
  - REST clients that close their sockets while queued: their tasks are cancelled, the server
    stays healthy;
  - SIGTERM with predicts queued: each gets its answer, exit 0;
  - a bad batching_parameters_file: exit 1 naming file:line:col;
  - batching_params.pbtxt in a version folder (--enable_per_model_batching_params) is honoured.

Uses the bundled demo model (half_plus_two). Prints "N passed, M failed"; exit 1 on a failure.
Run: /usr/bin/python3 batching_test.py --build BUILD_DIR --source SOURCE_DIR
"""
import argparse
import json
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # expects to sit in tests/server/
import grpc_client_test as g  # noqa: E402

MODEL = "half_plus_two"


def http(port, method, path, body=b"", timeout=10):
    """One HTTP/1.1 request; returns (status, headers dict (lower-case names), body bytes)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(("%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                   % (method, path, len(body))).encode() + body)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:])}
    return status, headers, rest


def predict_body(rows):
    return ('{"instances": [%s]}' % ", ".join(repr(float(v)) for v in rows)).encode()


def metric(port, name, labels=""):
    """Sum of the samples of `name` whose label text contains `labels`."""
    _, _, text = http(port, "GET", "/metrics")
    total = 0.0
    for line in text.decode().splitlines():
        m = re.match(r"^(\w+)(\{[^}]*\})? (\S+)$", line)
        if m and m.group(1) == name and labels in (m.group(2) or ""):
            total += float(m.group(3))
    return total


class Rest(g.Server):
    """g.Server with REST and metrics on, and batching flags."""

    def __init__(self, build, base, tmp, extra=()):
        self.rest = g.free_port()
        super().__init__(build, MODEL, base, tmp,
                         ["--rest_api_port=%d" % self.rest, "--metrics_path=/metrics"] +
                         list(extra))


def batching_file(tmp, name, text):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def concurrent(port, rows_list):
    out = [None] * len(rows_list)

    def one(i):
        out[i] = http(port, "POST", "/v1/models/%s:predict" % MODEL, predict_body(rows_list[i]))
    ts = [threading.Thread(target=one, args=(i,)) for i in range(len(rows_list))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


def check_identical(build, demo, tmp):
    conf = batching_file(tmp, "b.txt", "max_batch_size { value: 8 }\n"
                         "batch_timeout_micros { value: 20000 }\nnum_batch_threads { value: 2 }\n")
    rows = [[0.1 * i + 1.0 / 3] for i in range(16)]
    plain = Rest(build, demo, tmp)
    try:
        want = concurrent(plain.rest, rows)
    finally:
        plain.stop()
    srv = Rest(build, demo, tmp, ["--enable_batching", "--batching_parameters_file=" + conf,
                                  "--batching_scheduler=fixed"])
    try:
        got = concurrent(srv.rest, rows)
        for i, (w, r) in enumerate(zip(want, got)):
            g.check(r[0] == 200 and r[2] == w[2],
                    "batched answer %d equals the unbatched one: %r vs %r" % (i, r[2], w[2]))
        g.check(all("x-tfserve-queue-micros" in r[1] and "x-tfserve-compute-micros" in r[1]
                    for r in got), "batched answers carry the queue/compute headers")
        batches = metric(srv.rest, "tfserve_batches_total", 'signature="serving_default"')
        rows_run = metric(srv.rest, "tfserve_batch_rows_total")
        g.check(rows_run == 16 and 0 < batches < 16,
                "16 rows ran in fewer than 16 batches (%s batches, %s rows)" % (batches, rows_run))
        g.check(metric(srv.rest, "tfserve_batch_size_count") == batches,
                "the batch size histogram counts every batch")
        padding = metric(srv.rest, "tfserve_batch_padding_rows_total")
        g.check(metric(srv.rest, "tfserve_batch_size_sum") == rows_run + padding,
                "the batch size histogram's sum is the rows run plus the padding rows")
    finally:
        srv.stop()


def check_full_and_deadline(build, demo, tmp):
    conf = batching_file(tmp, "full.txt", "max_batch_size { value: 2 }\n"
                         "batch_timeout_micros { value: 1500000 }\n"
                         "max_enqueued_batches { value: 1 }\nnum_batch_threads { value: 1 }\n")
    srv = Rest(build, demo, tmp, ["--enable_batching", "--batching_parameters_file=" + conf,
                                  "--batching_scheduler=fixed"])
    try:
        first = []
        t = threading.Thread(target=lambda: first.append(
            http(srv.rest, "POST", "/v1/models/%s:predict" % MODEL, predict_body([1]))))
        t.start()
        time.sleep(0.2)   # the first task's batch now waits for its timeout
        t0 = time.time()
        st, _, body = http(srv.rest, "POST", "/v1/models/%s:predict" % MODEL,
                           predict_body([1, 2]))
        took = time.time() - t0
        g.check(st == 503 and b"full" in body and took < 0.5,
                "a task needing a second batch is refused at once: %d %r in %.2fs"
                % (st, body, took))
        t.join()
        g.check(first and first[0][0] == 200, "the queued task still runs: %r" % first)
        g.check(metric(srv.rest, "tfserve_batch_rejections_total", 'reason="queue_full"') == 1,
                "the rejection is counted")

        # gRPC deadline shorter than the batch timeout: dropped, never run.
        rows_before = metric(srv.rest, "tfserve_batch_rows_total")
        req = g.predict_req(MODEL, [5.0])
        from tensorflow_serving.apis import predict_pb2
        g.expect_error(lambda: srv.call(g.PS + "Predict", req, predict_pb2.PredictResponse,
                                        timeout=0.3),
                       grpc.StatusCode.DEADLINE_EXCEEDED, "", "gRPC deadline before the batch")
        time.sleep(1.6)   # the batch thread takes the batch and drops the expired task
        g.check(metric(srv.rest, "tfserve_batch_rejections_total", 'reason="deadline"') == 1,
                "the expired task is counted as dropped")
        g.check(metric(srv.rest, "tfserve_batch_rows_total") == rows_before,
                "the expired task never ran (rows run unchanged)")
        # A gRPC predict that does get batched carries the trailing metadata.
        f = srv.channel.unary_unary(g.PS + "Predict",
                                    request_serializer=lambda m: m.SerializeToString(),
                                    response_deserializer=predict_pb2.PredictResponse.FromString)
        resp, call = f.with_call(g.predict_req(MODEL, [2.0]), timeout=10)
        md = dict(call.trailing_metadata())
        g.check(list(resp.outputs["y"].float_val) == [3.0] and
                "tfserve-queue-micros" in md and int(md["tfserve-queue-micros"]) > 1000000,
                "gRPC answer after the batch timeout with its queue time: %r" % md)
    finally:
        srv.stop()


def check_disconnect_and_shutdown(build, demo, tmp):
    conf = batching_file(tmp, "slow.txt", "max_batch_size { value: 64 }\n"
                         "batch_timeout_micros { value: 1000000 }\n")
    srv = Rest(build, demo, tmp, ["--enable_batching", "--batching_parameters_file=" + conf,
                                  "--batching_scheduler=fixed"])
    try:
        body = predict_body([3])

        def send_predict():
            s = socket.create_connection(("127.0.0.1", srv.rest))
            s.sendall(("POST /v1/models/%s:predict HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
                       "\r\n" % (MODEL, len(body))).encode() + body)
            return s

        # Two queued predicts; the one sent second hangs up first (it is not the connection
        # that woke the watcher), then the other.
        first = send_predict()
        time.sleep(0.1)
        second = send_predict()
        time.sleep(0.1)
        second.close()
        time.sleep(0.3)
        g.check(metric(srv.rest, "tfserve_batch_rejections_total", 'reason="cancelled"') == 1,
                "the task of a client that hung up is cancelled while another stays queued")
        first.close()
        time.sleep(0.3)
        g.check(metric(srv.rest, "tfserve_batch_rejections_total", 'reason="cancelled"') == 2,
                "the task of a client that hung up is cancelled while queued")
        st, _, _ = http(srv.rest, "POST", "/v1/models/%s:predict" % MODEL, predict_body([1]))
        g.check(st == 200, "the server still answers after the hang-up (%d)" % st)

        # SIGTERM with four predicts queued: each is answered, then exit 0.
        results = []
        lock = threading.Lock()

        def one(v):
            r = http(srv.rest, "POST", "/v1/models/%s:predict" % MODEL, predict_body([v]))
            with lock:
                results.append(r)
        ts = [threading.Thread(target=one, args=(v,)) for v in range(4)]
        for t in ts:
            t.start()
        time.sleep(0.3)
        srv.proc.send_signal(signal.SIGTERM)
        for t in ts:
            t.join(timeout=10)
        rc = srv.proc.wait(timeout=10)
        g.check(len(results) == 4 and all(r[0] == 200 for r in results),
                "queued predicts answered during shutdown: %r" % [r[0] for r in results])
        g.check(rc == 0, "exit 0 after shutdown with queued tasks (rc %s)" % rc)
    finally:
        srv.stop()


def cpu_seconds(pid):
    """utime + stime of every thread of pid, from /proc/PID/stat."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def check_idle_cpu(srv):
    """After a burst of back-to-back predicts a server with no requests uses no CPU: whatever
    waits for work between requests by spinning (the intra-op pool's workers, for a bounded time
    after a run) stops soon after the last one, and every thread then sleeps."""
    for i in range(200):
        st, _, _ = http(srv.rest, "POST", "/v1/models/%s:predict" % MODEL, predict_body([i]))
    time.sleep(0.5)
    before, t0 = cpu_seconds(srv.proc.pid), time.time()
    time.sleep(3)
    used, took = cpu_seconds(srv.proc.pid) - before, time.time() - t0
    g.check(st == 200 and used <= 0.05,
            "adaptive: an idle server uses no CPU (%.2f s of CPU in %.1f s after 200 predicts)"
            % (used, took))


def check_histograms_count_everything(srv, done):
    """Over a thousand one-row predicts between two scrapes, one at a time (so one batch each,
    `done` of them before), then one scrape: the histograms count every batch and task, not a
    sample, and agree with the counters."""
    n = 1100
    for i in range(n):
        st, _, _ = http(srv.rest, "POST", "/v1/models/%s:predict" % MODEL, predict_body([i]))
        if st != 200:
            break
    want = done + n
    _, _, text = http(srv.rest, "GET", "/metrics")
    got = {}   # name, or name{le="L"} for a bucket -> value
    for line in text.decode().splitlines():
        m = re.match(r"^(tfserve_batch\w+)(\{[^}]*\}) (\S+)$", line)
        if not m or 'signature="serving_default"' not in m.group(2):
            continue
        le = re.search(r'le="[^"]*"', m.group(2))
        key = m.group(1) + ("{%s}" % le.group(0) if le else "")
        got[key] = got.get(key, 0) + float(m.group(3))
    batches = got.get("tfserve_batches_total")
    g.check(st == 200 and batches == want,
            "%d one-row predicts ran as %d batches: %r" % (want, want, batches))
    g.check(got.get("tfserve_batch_size_count") == batches and
            got.get('tfserve_batch_size_bucket{le="1"}') == want,
            "the batch size histogram counts all %d batches, each in le=1: count %r, le=1 %r"
            % (want, got.get("tfserve_batch_size_count"),
               got.get('tfserve_batch_size_bucket{le="1"}')))
    g.check(got.get("tfserve_batch_size_sum") == want and
            got.get("tfserve_batch_rows_total", 0) +
            got.get("tfserve_batch_padding_rows_total", 0) == want,
            "the batch size sum is the rows run plus padding: %r"
            % got.get("tfserve_batch_size_sum"))
    g.check(got.get("tfserve_batch_queue_delay_seconds_count") == want and
            got.get('tfserve_batch_queue_delay_seconds_bucket{le="+Inf"}') == want,
            "the queue delay histogram counts every task: %r"
            % got.get("tfserve_batch_queue_delay_seconds_count"))


def check_adaptive(build, demo, tmp):
    conf = batching_file(tmp, "adaptive.txt", "max_batch_size { value: 64 }\n"
                         "batch_timeout_micros { value: 1000000 }\nnum_batch_threads { value: 1 }\n")
    srv = Rest(build, demo, tmp, ["--enable_batching", "--batching_parameters_file=" + conf])
    try:
        for v in (1.0, 2.5, -4.0):
            t0 = time.time()
            st, hdr, body = http(srv.rest, "POST", "/v1/models/%s:predict" % MODEL,
                                 predict_body([v]))
            took = time.time() - t0
            queue_us = int(hdr.get("x-tfserve-queue-micros", "-1"))
            g.check(st == 200 and json.loads(body) == {"predictions": [0.5 * v + 2.0]},
                    "adaptive: predict(%r) = 0.5 x + 2: %d %r" % (v, st, body))
            g.check(0 <= queue_us < 100000 and took < 0.5,
                    "adaptive: a lone request does not wait for the 1 s timeout (queue %d us, "
                    "answered in %.3f s)" % (queue_us, took))
        g.check(metric(srv.rest, "tfserve_batch_rows_total") == 3,
                "adaptive: the requests went through the batch queue")
        check_idle_cpu(srv)
        check_histograms_count_everything(srv, 3 + 200)
    finally:
        srv.stop()
    p = subprocess.run([os.path.join(build, "server", "tfserve"), "--port=0",
                        "--model_name=" + MODEL, "--model_base_path=" + demo, "--enable_batching",
                        "--batching_scheduler=bogus"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
    g.check(p.returncode != 0 and b"--batching_scheduler=bogus: expected adaptive or fixed"
            in p.stdout, "an unknown scheduler fails the start (rc %d): %r"
            % (p.returncode, p.stdout[-300:]))


def check_bad_file_and_per_model(build, demo, tmp):
    bad = batching_file(tmp, "bad.txt", "max_batch_size { value: 8 }\nbatch_timeout_micros {\n"
                        "  vlaue: 3 }\n")
    p = subprocess.run([os.path.join(build, "server", "tfserve"), "--port=0",
                        "--model_name=" + MODEL, "--model_base_path=" + demo, "--enable_batching",
                        "--batching_parameters_file=" + bad],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
    out = p.stdout.decode()
    g.check(p.returncode == 1 and (bad + ":3:3:") in out,
            "a bad batching file fails the start naming file:line:col (rc %d): %s"
            % (p.returncode, out[-300:]))
    p = subprocess.run([os.path.join(build, "server", "tfserve"), "--port=0",
                        "--model_name=" + MODEL, "--model_base_path=" + demo,
                        "--batching_parameters_file=" + bad],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
    g.check(p.returncode == 1 and b"--enable_batching" in p.stdout,
            "a batching file without --enable_batching is refused")

    base = os.path.join(tmp, "per-model")
    shutil.copytree(demo, base)
    version = sorted(os.listdir(base))[0]
    batching_file(os.path.join(base, version), "batching_params.pbtxt",
                  "max_batch_size { value: 1 }\n")
    srv = Rest(build, base, tmp, ["--enable_batching", "--enable_per_model_batching_params"])
    try:
        st, _, body = http(srv.rest, "POST", "/v1/models/%s:predict" % MODEL,
                           predict_body([1, 2]))
        g.check(st == 400 and b"larger than maximum input batch size 1" in body,
                "the version's batching_params.pbtxt applies: %d %r" % (st, body))
        st, _, body = http(srv.rest, "POST", "/v1/models/%s:predict" % MODEL, predict_body([1]))
        g.check(st == 200, "one row still fits (%d %r)" % (st, body))
    finally:
        srv.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    tmp = tempfile.mkdtemp(prefix="tfs-batching-test-")
    try:
        g.gen_stubs(os.path.abspath(a.source), tmp)
        demo = os.path.join(build, "models", MODEL)
        check_adaptive(build, demo, tmp)
        check_identical(build, demo, tmp)
        check_full_and_deadline(build, demo, tmp)
        check_disconnect_and_shutdown(build, demo, tmp)
        check_bad_file_and_per_model(build, demo, tmp)
    except Exception as e:  # a crash of the test itself is a failure
        g.check(False, "batching test raised %r" % e)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (g.PASSED, g.FAILED), flush=True)
    return 1 if g.FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
