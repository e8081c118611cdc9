#!/usr/bin/python3
"""System test: one client's very large predict does not starve the others' one-row predicts
on a batching server, and its own answer is right.

The model: an MLP 3-1024-1024-1 (ReLU), trained for two steps on the CSV regression example by
the real tfserve-train, so that a batch of 64 rows costs milliseconds. The server: the real
tfserve with --enable_batching, one batch thread, batches of 64 rows (max_execution_batch_size;
enable_large_batch_splitting on, max_batch_size 10000 the largest request taken, as TF Serving's
BatchingParameters put it; without splitting TF Serving and tfserve refuse such a request).

  - a 10,000-row REST predict is split into 157 batches; while it runs, four clients send one-row
    predicts back to back; their p99 latency stays a small fraction of the large request's time
    (they are not queued behind all its batches), and many of them complete meanwhile;
  - the large answer equals, row for row, what a server without batching answers for the same
    request (one run of 10,000 rows), and rows predicted alone on the batching server;
  - the metrics count every row run.

Prints "N passed, M failed"; exit 1 on a failure.
Run: /usr/bin/python3 large_batch_test.py --build BUILD_DIR --source SOURCE_DIR
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # expects to sit in tests/server/
import grpc_client_test as g  # noqa: E402
from batching_test import http, metric  # noqa: E402

MODEL = "wide"
BIG_ROWS = 10000

TRAIN_INI = """[data]
format = csv
train_file = {tmp}/data/train.csv
eval_file = {tmp}/data/eval.csv
label_column = y
batch_size = 32
seed = 7

[model]
input_shape = 3
loss = mean_squared_error
seed = 7

[layer]
type = dense
units = 1024
activation = relu

[layer]
type = dense
units = 1024
activation = relu

[layer]
type = dense
units = 1

[optimizer]
name = adam
learning_rate = 0.001

[train]
epochs = 1
max_steps = 2
export_dir = {tmp}/export
"""

BATCHING = """max_batch_size { value: 10000 }
enable_large_batch_splitting { value: true }
max_execution_batch_size { value: 64 }
max_enqueued_batches { value: 1000 }
batch_timeout_micros { value: 0 }
num_batch_threads { value: 1 }
"""


def train(build, source, tmp):
    subprocess.run(["sh", os.path.join(source, "examples", "make_regression_csv.sh"),
                    os.path.join(tmp, "data")], check=True, stdout=subprocess.DEVNULL)
    ini = os.path.join(tmp, "wide.ini")
    with open(ini, "w") as f:
        f.write(TRAIN_INI.format(tmp=tmp))
    subprocess.run([os.path.join(build, "train", "tfserve-train"), ini], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    return os.path.join(tmp, "export")


def body(rows):
    return json.dumps({"instances": rows}).encode()


def predict(port, rows, timeout=120):
    """(seconds, status, predictions or the error body)."""
    t0 = time.monotonic()
    st, _, data = http(port, "POST", "/v1/models/%s:predict" % MODEL, body(rows), timeout=timeout)
    took = time.monotonic() - t0
    if st != 200:
        return took, st, data
    return took, st, [p[0] if isinstance(p, list) else p for p in json.loads(data)["predictions"]]


class Rest(g.Server):
    def __init__(self, build, base, tmp, extra=()):
        self.rest = g.free_port()
        super().__init__(build, MODEL, base, tmp,
                         ["--rest_api_port=%d" % self.rest, "--metrics_path=/metrics"] +
                         list(extra))


def close_rows(a, b, tol=1e-4):
    return len(a) == len(b) and all(abs(x - y) <= tol * max(1.0, abs(y)) for x, y in zip(a, b))


def check_large_and_small(build, base, tmp):
    rnd = random.Random(11)
    big = [[round(rnd.uniform(-1, 1), 6) for _ in range(3)] for _ in range(BIG_ROWS)]

    plain = Rest(build, base, tmp)
    try:
        _, st, want = predict(plain.rest, big)
        g.check(st == 200 and len(want) == BIG_ROWS,
                "the unbatched server answers the large request: %d" % st)
    finally:
        plain.stop()

    conf = os.path.join(tmp, "batching.txt")
    with open(conf, "w") as f:
        f.write(BATCHING)
    srv = Rest(build, base, tmp, ["--enable_batching", "--batching_parameters_file=" + conf])
    try:
        # One-row latency with nothing else running: what "bounded" is measured against.
        idle = sorted(predict(srv.rest, [big[i]])[0] for i in range(30))
        rows_before = metric(srv.rest, "tfserve_batch_rows_total")

        result = {}

        def send_big():
            result["big"] = predict(srv.rest, big)
        started = threading.Event()
        small, lock = [], threading.Lock()

        def send_small(k):
            started.wait()
            i = k
            while "big" not in result:
                took, st, pred = predict(srv.rest, [big[i % BIG_ROWS]])
                with lock:
                    small.append((took, st, i % BIG_ROWS, pred))
                i += 4
        clients = [threading.Thread(target=send_small, args=(k,)) for k in range(4)]
        for c in clients:
            c.start()
        t_big = threading.Thread(target=send_big)
        t_big.start()
        time.sleep(0.05)   # the large request is queued: its batches run from now on
        started.set()
        t_big.join()
        for c in clients:
            c.join()

        big_took, st, got = result["big"]
        g.check(st == 200 and len(got) == BIG_ROWS,
                "the large request is answered: %d, %s rows" % (st, len(got)))
        g.check(st == 200 and close_rows(got, want),
                "the large answer equals the unbatched server's, row for row")
        lat = sorted(s[0] for s in small)
        ok = all(s[1] == 200 for s in small)
        g.check(ok, "every small request is answered")
        g.check(all(s[1] != 200 or close_rows(s[3], [want[s[2]]]) for s in small),
                "each small answer is its row's")
        p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] if lat else float("inf")
        print("large request %.3f s; %d one-row requests meanwhile, p50 %.1f ms, p99 %.1f ms; "
              "idle one-row p50 %.1f ms" % (big_took, len(lat), 1e3 * lat[len(lat) // 2]
                                            if lat else 0, 1e3 * p99, 1e3 * idle[len(idle) // 2]),
              flush=True)
        # Queued behind all 157 batches, requests sent at the start would take nearly the whole
        # large request's time; alternating with its batches, about two batches' time.
        g.check(p99 < big_took / 4,
                "one-row p99 %.1f ms while the large request ran is under a quarter of its %.0f ms"
                % (1e3 * p99, 1e3 * big_took))
        g.check(len(lat) >= 20, "one-row requests kept completing meanwhile: %d" % len(lat))

        # Rows asked alone equal the large answer's.
        for i in (0, 63, 64, 4999, BIG_ROWS - 1):
            _, st, one = predict(srv.rest, [big[i]])
            g.check(st == 200 and close_rows(one, [got[i]]),
                    "row %d alone equals row %d of the large answer" % (i, i))
        rows_run = metric(srv.rest, "tfserve_batch_rows_total") - rows_before
        g.check(rows_run == BIG_ROWS + len(lat) + 5,
                "the metrics count every row run: %s" % rows_run)
    finally:
        srv.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="tfs-large-batch-")
    try:
        os.mkdir(os.path.join(tmp, "stubs"))
        g.gen_stubs(a.source, os.path.join(tmp, "stubs"))
        base = train(a.build, a.source, tmp)
        check_large_and_small(a.build, base, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (g.PASSED, g.FAILED), flush=True)
    sys.exit(1 if g.FAILED else 0)


if __name__ == "__main__":
    main()
