#!/usr/bin/python3
"""System test: a real Prometheus server scrapes the real tfserve.

Starts <build>/server/tfserve with --metrics_path on free loopback ports, sends predictions over
REST (some failing) and gRPC (with the stubs grpc_client_test.py generates), then starts Debian's
`prometheus` scraping tfserve every second at that path and asks Prometheus' HTTP API
(/api/v1/query) for TF Serving's request counter and latency histogram counts, and for ours. The
counts must be exactly what was sent; the histograms' sums and a histogram_quantile median must
be plausible. Skips (exit 77) when prometheus is not installed.

Run: /usr/bin/python3 prometheus_test.py --build BUILD_DIR --source SOURCE_DIR
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpc_client_test as gct  # noqa: E402  (Server, stubs, predict requests)

PATH = "/monitoring/prometheus/metrics"
N_REST_OK, N_REST_BAD, N_GRPC_OK = 6, 4, 5


def http(port, method, path, body=None):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), method=method,
                                 data=body.encode() if body is not None else None)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def query(prom_port, promql):
    """The value of a PromQL instant query that returns one series, or None."""
    qs = urllib.parse.urlencode({"query": promql})
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/api/v1/query?%s" % (prom_port, qs),
                                    timeout=5) as r:
            doc = json.load(r)
    except (urllib.error.URLError, ConnectionError, OSError):
        return None
    res = doc.get("data", {}).get("result", [])
    if doc.get("status") != "success" or len(res) != 1:
        return None
    return float(res[0]["value"][1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    args = ap.parse_args()
    prometheus = shutil.which("prometheus")
    if not prometheus:
        print("SKIP: prometheus is not installed (apt-get install prometheus)")
        return 77

    tmp = tempfile.mkdtemp(prefix="tfs-prom-")
    srv = prom = None
    try:
        gct.gen_stubs(args.source, tmp)
        rest_port = gct.free_port()
        demo = os.path.join(args.build, "models", "half_plus_two")
        srv = gct.Server(args.build, "half_plus_two", demo, tmp,
                         ["--rest_api_port=%d" % rest_port, "--metrics_path=" + PATH])
        pp = "/v1/models/half_plus_two:predict"
        for _ in range(N_REST_OK):
            st, body = http(rest_port, "POST", pp, '{"instances": [1.0, 2.0]}')
            gct.check(st == 200, "REST predict: %d %s" % (st, body))
        for _ in range(N_REST_BAD):
            st, _ = http(rest_port, "POST", pp, '{"instances": [1.0,')
            gct.check(st == 400, "bad REST predict: %d" % st)
        for _ in range(N_GRPC_OK):
            r = gct.predict(srv, gct.predict_req("half_plus_two", [1.0, 2.0]))
            gct.check(list(r.outputs["y"].float_val) == [2.5, 3.0], "gRPC predict")

        # Our own scrape first: the numbers Prometheus must end up with.
        st, text = http(rest_port, "GET", PATH)
        gct.check(st == 200, "GET %s: %d" % (PATH, st))
        want_line = (':tensorflow:serving:request_count{model_name="half_plus_two",'
                     'status="OK"} %d' % (N_REST_OK + N_GRPC_OK))
        gct.check(want_line in text.splitlines(), "scrape has " + want_line)

        prom_port = gct.free_port()
        cfg = os.path.join(tmp, "prom.yml")
        with open(cfg, "w") as f:
            f.write("global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                    "scrape_configs:\n"
                    "  - job_name: tfserve\n"
                    "    metrics_path: %s\n"
                    "    static_configs: [{targets: ['127.0.0.1:%d']}]\n" % (PATH, rest_port))
        plog = open(os.path.join(tmp, "prometheus.log"), "w+")
        prom = subprocess.Popen(
            [prometheus, "--config.file=" + cfg, "--storage.tsdb.path=" + os.path.join(tmp, "db"),
             "--web.listen-address=127.0.0.1:%d" % prom_port],
            stdout=plog, stderr=subprocess.STDOUT)

        name = ':tensorflow:serving:request_count'
        checks = [
            ('{__name__="%s",job="tfserve",model_name="half_plus_two",status="OK"}' % name,
             N_REST_OK + N_GRPC_OK),
            ('{__name__="%s",model_name="half_plus_two",status="INVALID_ARGUMENT"}' % name,
             N_REST_BAD),
            ('{__name__=":tensorflow:serving:request_latency_count",model_name="half_plus_two",'
             'API="Predict",entrypoint="REST"}', N_REST_OK + N_REST_BAD),
            ('{__name__=":tensorflow:serving:request_latency_count",model_name="half_plus_two",'
             'API="Predict",entrypoint="GRPC"}', N_GRPC_OK),
            ('tfserve_request_duration_seconds_count{model="half_plus_two",protocol="grpc",'
             'method="predict",code="OK"}', N_GRPC_OK),
            ('sum(tfserve_request_duration_seconds_bucket{model="half_plus_two",'
             'method="predict",le="+Inf"})', N_REST_OK + N_REST_BAD + N_GRPC_OK),
            ('tfserve_models_loaded', 1),
            ('{__name__=":tensorflow:cc:saved_model:load_attempt_count",status="success"}', 1),
            # The histograms' shape: the +Inf bucket holds every observation, the sum is positive
            # and below N requests x 10 s, and PromQL's histogram_quantile finds a median inside
            # the bucket range (it needs cumulative, ordered "le" buckets to do so).
            ('{__name__=":tensorflow:serving:request_latency_bucket",model_name="half_plus_two",'
             'API="Predict",entrypoint="GRPC",le="+Inf"}', N_GRPC_OK),
            ('sum(:tensorflow:serving:request_latency_sum{model_name="half_plus_two"})',
             (lambda v: 0 < v < (N_REST_OK + N_REST_BAD + N_GRPC_OK) * 1e7, "in (0, N x 10 s) us")),
            ('histogram_quantile(0.5, sum by (le) (tfserve_request_duration_seconds_bucket'
             '{model="half_plus_two",method="predict"}))',
             (lambda v: 0 < v < 10, "in (0, 10) s")),
        ]
        got = {}

        def ok(v, want):
            return v is not None and (want[0](v) if isinstance(want, tuple) else v == want)

        deadline = time.time() + 30
        while time.time() < deadline and len(got) < len(checks):
            for q, want in checks:
                if q not in got:
                    v = query(prom_port, q)
                    if ok(v, want):
                        got[q] = v
            time.sleep(0.5)
        for q, want in checks:
            gct.check(q in got, "Prometheus %s %s (last: %s)" % (
                q, want[1] if isinstance(want, tuple) else "== %d" % want, query(prom_port, q)))
        print("Prometheus: median predict latency %.6f s, request_latency sum %.0f us" % (
            got.get(checks[-1][0], float("nan")), got.get(checks[-2][0], float("nan"))))
        if len(got) < len(checks):
            plog.seek(0)
            print("prometheus log:\n" + plog.read()[-3000:])
        else:
            print("Prometheus saw every series after %.1f s" % (30 - (deadline - time.time())))
    except Exception as e:  # a crash is a failure, with its reason
        gct.check(False, "unexpected %s: %s" % (type(e).__name__, e))
    finally:
        if prom is not None:
            prom.send_signal(signal.SIGTERM)
            try:
                gct.check(prom.wait(timeout=15) == 0, "prometheus exits 0")
            except subprocess.TimeoutExpired:
                prom.kill()
                prom.wait()
        if srv is not None:
            srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (gct.PASSED, gct.FAILED))
    return 1 if gct.FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
