#!/usr/bin/python3
"""A fleet of tfserve replicas behind a real nginx, restarted one by one under load.

Three tfserve replicas serve the bundled half_plus_two on free loopback ports with
--drain_delay_seconds; Debian's nginx, run as this user with a config the test writes into a
temporary folder, balances them: an HTTP upstream for REST (keep-alive, and a request that meets
a closed or refusing replica goes to the next one: proxy_next_upstream error timeout http_502
http_503) and an HTTP/2 server that grpc_passes gRPC (grpc_next_upstream). Clients run for the
whole test through nginx, each in its own threads: TF Serving's v1 REST predict (http.client,
keep-alive), v1 gRPC Predict (grpcio with stubs from proto/, as grpc_client_test.py makes
them) and KServe's v2 REST infer; CLIENTS is the list, one entry per protocol. Every answer is
checked against y = x / 2 + 2.

The rolling restart: for each replica in turn, SIGTERM, wait for its exit (status 0: its drain
finished every request in flight), start it again on the same ports, wait for /readyz 200.
Asserted: no client request failed; nginx's access log (a log_format with $status,
$upstream_status, $upstream_addr and the gRPC status trailer) has one line per client request,
no 5xx status and no gRPC status but 0; every replica answered through nginx. Printed: the
requests per client, the retries nginx made ($upstream_status lists every try) and each drain's
time.

Exit 77 (skipped) when nginx is not installed. Prints "N passed, M failed"; exit 1 on a failure.

Run: /usr/bin/python3 fleet_test.py --build BUILD_DIR --source SOURCE_DIR
"""
import argparse
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
import grpc_client_test as gct  # noqa: E402  (gen_stubs, free_port, predict_req, check)

check = gct.check
MODEL = "half_plus_two"
REPLICAS = 3
DRAIN_DELAY_S = 3
THREADS_PER_CLIENT = 2


def find_nginx():
    # Debian puts it in /usr/sbin, which a user's PATH may lack.
    return shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.access(p, os.X_OK)), None)


def poll(what, fn, timeout):
    """Calls fn until it returns true or timeout seconds pass; returns whether it did."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if fn():
            return True
        time.sleep(0.05)
    print("timed out after %ds waiting for %s" % (timeout, what), flush=True)
    return False


def accepts(port):
    import socket
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


class Replica:
    """One tfserve on fixed loopback ports, started again on the same ports after each exit."""

    def __init__(self, build, tmp, index):
        self.build, self.tmp, self.index = build, tmp, index
        self.grpc_port, self.rest_port = gct.free_port(), gct.free_port()
        self.proc = None
        self.starts = 0

    def start(self):
        self.starts += 1
        self.log = open(os.path.join(self.tmp, "tfserve-%d-%d.log" % (self.index, self.starts)),
                        "w+")
        self.proc = subprocess.Popen(
            [os.path.join(self.build, "server", "tfserve"), "--port=%d" % self.grpc_port,
             "--rest_api_port=%d" % self.rest_port, "--model_name=" + MODEL,
             "--model_base_path=" + os.path.join(self.build, "models", MODEL),
             "--drain_delay_seconds=%d" % DRAIN_DELAY_S, "--tensorflow_intra_op_parallelism=1"],
            stdout=self.log, stderr=subprocess.STDOUT)

    def ready(self):
        if self.proc is None or self.proc.poll() is not None:
            raise RuntimeError("replica %d exited with %s:\n%s"
                               % (self.index, self.proc.returncode, self.logs()[-2000:]))
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/readyz" % self.rest_port,
                                        timeout=5) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def wait_ready(self, timeout=60):
        return poll("replica %d's /readyz" % self.index, self.ready, timeout)

    def terminate(self, timeout=60):
        """SIGTERM; (exit status or None when it did not exit, seconds to the exit)."""
        t0 = time.time()
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            rc = None
        return rc, time.time() - t0

    def logs(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


LOG_FORMAT = ('$status "$upstream_status" "$upstream_addr" $server_port $request_method '
              '$uri grpc=$sent_trailer_grpc_status rt=$request_time')


def nginx_conf(tmp, replicas, ready, rest_port, grpc_port):
    """The nginx.conf the test runs (docs/deploy.md shows it); the replicas whose index is not in
    ready are `down`."""
    def servers(attr):
        # fail_timeout: how long a replica that failed a request is passed over; short, so a
        # restarted replica takes requests again soon.
        return "".join("        server 127.0.0.1:%d max_fails=1 fail_timeout=2s%s;\n"
                       % (getattr(r, attr), "" if r.index in ready else " down")
                       for r in replicas)
    user = "user root;\n" if os.geteuid() == 0 else ""
    return """{user}worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log info;
events {{
    worker_connections 1024;
}}
http {{
    log_format fleet '{fmt}';
    access_log {tmp}/access.log fleet;
    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;

    upstream tfserve_rest {{
{rest}        keepalive 16;
    }}
    upstream tfserve_grpc {{
{grpc}        keepalive 16;
    }}

    # REST: HTTP/1.1 keep-alive to the replicas. A request that meets a refused or closed
    # connection, a timeout, or a 502/503 goes to the next replica.
    server {{
        listen 127.0.0.1:{rest_port};
        location / {{
            proxy_pass http://tfserve_rest;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_next_upstream error timeout http_502 http_503;
            proxy_next_upstream_timeout 10s;
            proxy_connect_timeout 2s;
            proxy_read_timeout 30s;
        }}
    }}

    # gRPC: HTTP/2 without TLS from the clients, grpc_pass to the replicas.
    server {{
        listen 127.0.0.1:{grpc_port} http2;
        location / {{
            grpc_pass grpc://tfserve_grpc;
            grpc_next_upstream error timeout;
            grpc_next_upstream_timeout 10s;
            grpc_connect_timeout 2s;
            grpc_read_timeout 30s;
        }}
    }}
}}
""".format(user=user, tmp=tmp, fmt=LOG_FORMAT, rest=servers("rest_port"),
           grpc=servers("grpc_port"), rest_port=rest_port, grpc_port=grpc_port)


class Endpoints:
    """What Kubernetes does between a Service's pods and a load balancer that follows their
    readiness (an ingress controller): polls every replica's /readyz, as the kubelet's readiness
    probe does, and when the set of ready replicas changes, rewrites nginx's upstreams (the
    others `down`) and reloads nginx (SIGHUP: new workers take the new upstreams, the old ones
    finish their requests and exit). So a draining replica stops getting requests during its
    --drain_delay_seconds, before its listeners close."""

    def __init__(self, tmp, replicas, rest_port, grpc_port):
        self.tmp, self.replicas = tmp, replicas
        self.rest_port, self.grpc_port = rest_port, grpc_port
        self.conf = os.path.join(tmp, "nginx.conf")
        self.ready = {r.index for r in replicas}
        self.write()
        self.nginx = None
        self.reloads = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def write(self):
        with open(self.conf + ".new", "w") as f:
            f.write(nginx_conf(self.tmp, self.replicas, self.ready, self.rest_port,
                               self.grpc_port))
        os.replace(self.conf + ".new", self.conf)

    def run(self):
        while not self.stop.wait(0.1):
            ready = set()
            for r in self.replicas:
                try:
                    if r.ready():
                        ready.add(r.index)
                except RuntimeError:  # exited: not ready
                    pass
            if ready != self.ready and ready:
                self.ready = ready
                self.write()
                self.nginx.send_signal(signal.SIGHUP)
                self.reloads += 1

    def start(self, nginx):
        self.nginx = nginx
        self.thread.start()

    def finish(self):
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join(timeout=30)


def values_for(i):
    """Inputs whose halves are exact in float32, different for each request."""
    return [float((i + k) % 64) * 0.25 for k in range(4)]


def want_for(i):
    return [x / 2 + 2 for x in values_for(i)]


def rest_client(rest_port, note, path, body_of, check):
    """A REST client over one keep-alive connection per thread: POSTs body_of(i) to path and
    hands the decoded JSON answer to check(i, answer). As HTTP/1.1 allows (RFC 9112, 9.3.1) and
    HTTP client libraries do, a request whose reused keep-alive connection turns out closed
    before any byte of an answer (nginx closes its idle client connections when it reloads) is
    sent once more on a new connection; a predict is idempotent. Those are counted, and a
    failure on a new connection is a failure."""
    conn = [None, False]  # the connection, whether it has carried a request

    def once(body):
        if conn[0] is None:
            conn[0], conn[1] = http.client.HTTPConnection("127.0.0.1", rest_port, timeout=30), False
        reused = conn[1]
        conn[1] = True
        try:
            conn[0].request("POST", path, body, {"Content-Type": "application/json"})
            r = conn[0].getresponse()
            return r.status, r.read().decode()
        except (ConnectionError, http.client.RemoteDisconnected) as e:
            conn[0].close()
            conn[0] = None
            if not reused:
                raise
            note("REST requests sent again after nginx closed an idle keep-alive connection")
            return None, e

    def call(i):
        body = json.dumps(body_of(i))
        status, text = once(body)
        if status is None:
            status, text = once(body)
        if status != 200:
            raise AssertionError("HTTP %d %s" % (status, text[:200]))
        check(i, json.loads(text))
    return call


def rest_v1_client(rest_port, grpc_port, note):
    """TF Serving's REST predict."""
    def check(i, answer):
        got = answer["predictions"]
        if not gct.close(got, want_for(i)):
            raise AssertionError("predictions %s for %s" % (got, values_for(i)))
    return rest_client(rest_port, note, "/v1/models/%s:predict" % MODEL,
                       lambda i: {"instances": values_for(i)}, check)


def rest_v2_client(rest_port, grpc_port, note):
    """KServe's v2 REST infer (Open Inference Protocol), JSON tensors."""
    def body_of(i):
        x = values_for(i)
        return {"id": str(i), "inputs": [{"name": "x", "shape": [len(x)], "datatype": "FP32",
                                          "data": x}]}

    def check(i, answer):
        out = answer["outputs"]
        if answer.get("id") != str(i) or len(out) != 1 or out[0]["name"] != "y" or \
                out[0]["datatype"] != "FP32" or not gct.close(out[0]["data"], want_for(i)):
            raise AssertionError("v2 answer %s for %s" % (answer, values_for(i)))
    return rest_client(rest_port, note, "/v2/models/%s/infer" % MODEL, body_of, check)


def grpc_v1_client(rest_port, grpc_port, note):
    """TF Serving's gRPC Predict, over one channel per thread."""
    from tensorflow_serving.apis import predict_pb2
    channel = grpc.insecure_channel("127.0.0.1:%d" % grpc_port)
    stub = channel.unary_unary(gct.PS + "Predict",
                               request_serializer=lambda m: m.SerializeToString(),
                               response_deserializer=predict_pb2.PredictResponse.FromString)

    def call(i):
        r = stub(gct.predict_req(MODEL, values_for(i)), timeout=30)
        got = list(r.outputs["y"].float_val)
        if not gct.close(got, want_for(i)):
            raise AssertionError("y %s for %s" % (got, values_for(i)))
    return call


# One entry per protocol the fleet serves: (name, the nginx server it goes through, a factory of
# one thread's call function, given the nginx ports and a function counting notable events).
CLIENTS = [
    ("v1 REST predict", "rest", rest_v1_client),
    ("v1 gRPC Predict", "grpc", grpc_v1_client),
    ("v2 REST infer", "rest", rest_v2_client),
]


class Load:
    """THREADS_PER_CLIENT threads per client, calling until stopped; counts and failures."""

    def __init__(self, rest_port, grpc_port):
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.ok = {name: 0 for name, _, _ in CLIENTS}
        self.failed = {name: [] for name, _, _ in CLIENTS}
        self.notes = {}
        self.threads = []
        for name, _, factory in CLIENTS:
            for t in range(THREADS_PER_CLIENT):
                self.threads.append(threading.Thread(
                    target=self.run, args=(name, factory, rest_port, grpc_port, t), daemon=True))

    def note(self, what):
        with self.lock:
            self.notes[what] = self.notes.get(what, 0) + 1

    def run(self, name, factory, rest_port, grpc_port, t):
        call = factory(rest_port, grpc_port, self.note)
        i = t * 1000003
        while not self.stop.is_set():
            i += 1
            try:
                call(i)
                with self.lock:
                    self.ok[name] += 1
            except Exception as e:  # every failure is counted, with its reason
                with self.lock:
                    self.failed[name].append("%s: %r" % (time.strftime("%H:%M:%S"), e))
                time.sleep(0.01)

    def total(self):
        with self.lock:
            return sum(self.ok.values())

    def start(self):
        for t in self.threads:
            t.start()

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=60)


def read_access_log(path, rest_port, grpc_port):
    """Per nginx server: lines, statuses, retries (tries past the first), upstream addresses,
    and the lines that are not a clean success."""
    rx = re.compile(r'^(\d{3}) "([^"]*)" "([^"]*)" (\d+) (\S+) (\S+) grpc=(\S*) rt=(\S+)$')
    out = {k: {"lines": 0, "retries": 0, "addrs": {}, "bad": [], "max_rt": 0.0}
           for k in ("rest", "grpc")}
    with open(path) as f:
        for line in f:
            m = rx.match(line.rstrip("\n"))
            if not m:
                out["rest"]["bad"].append("unparsed: " + line.strip())
                continue
            status, ups, addrs, port, grpc_status = (int(m.group(1)), m.group(2), m.group(3),
                                                     int(m.group(4)), m.group(7))
            side = "rest" if port == rest_port else "grpc" if port == grpc_port else None
            if side is None:
                continue
            o = out[side]
            o["lines"] += 1
            o["max_rt"] = max(o["max_rt"], float(m.group(8)))
            tries = [s.strip() for s in re.split(r"[,:]", ups) if s.strip()]
            o["retries"] += max(0, len(tries) - 1)
            last = [a.strip() for a in re.split(r"[,:] ", addrs)][-1]
            o["addrs"][last] = o["addrs"].get(last, 0) + 1
            if status >= 500 or (side == "grpc" and grpc_status != "0"):
                o["bad"].append(line.strip())
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    a.build, a.source = os.path.abspath(a.build), os.path.abspath(a.source)
    nginx = find_nginx()
    if not nginx:
        print("SKIP: nginx is not installed (scripts/setup.sh installs Debian's nginx)")
        return 77
    tmp = tempfile.mkdtemp(prefix="tfs-fleet-")
    replicas, ngx, load, endpoints = [], None, None, None
    t_start = time.time()
    try:
        gct.gen_stubs(a.source, tmp)
        replicas = [Replica(a.build, tmp, i) for i in range(REPLICAS)]
        for r in replicas:
            r.start()
        for r in replicas:
            if not check(r.wait_ready(), "replica %d never became ready" % r.index):
                return 1
        rest_port, grpc_port = gct.free_port(), gct.free_port()
        endpoints = Endpoints(tmp, replicas, rest_port, grpc_port)
        ngx_log = open(os.path.join(tmp, "nginx.out"), "w+")
        ngx = subprocess.Popen([nginx, "-p", tmp, "-c", endpoints.conf, "-g", "daemon off;"],
                               stdout=ngx_log, stderr=subprocess.STDOUT)
        if not check(poll("nginx's ports", lambda: ngx.poll() is None and accepts(rest_port)
                          and accepts(grpc_port), 30), "nginx did not start"):
            ngx_log.seek(0)
            print(ngx_log.read(), flush=True)
            return 1

        endpoints.start(ngx)
        load = Load(rest_port, grpc_port)
        load.start()
        # Load first reaches every replica before the first restart.
        check(poll("the first answers", lambda: load.total() >= 30, 30),
              "the clients got no answers through nginx: %s" % load.failed)
        drains = []
        for r in replicas:
            before = load.total()
            rc, dt = r.terminate()
            check(rc == 0, "replica %d exited %s %.1fs after SIGTERM:\n%s"
                  % (r.index, rc, dt, r.logs()[-2000:]))
            drains.append(dt)
            r.start()
            check(r.wait_ready(), "replica %d not ready again after its restart" % r.index)
            # As a rolling update waits for the new pod to be in the endpoints.
            check(poll("replica %d back in nginx's upstreams" % r.index,
                        lambda: r.index in endpoints.ready, 30),
                  "replica %d never rejoined nginx's upstreams" % r.index)
            print("replica %d: drained and exited %s in %.2fs, ready again; %d requests "
                  "answered meanwhile" % (r.index, rc, dt, load.total() - before), flush=True)
        # Some load on the restarted fleet, then stop.
        after = load.total()
        poll("answers after the restarts", lambda: load.total() >= after + 30, 30)
        load.finish()
        endpoints.finish()
        print("nginx reloaded %d times as replicas left and rejoined" % endpoints.reloads,
              flush=True)
        # At least one reload as each replica left and one as it came back (a probe that timed
        # out on a busy machine may add some).
        check(endpoints.reloads >= 2 * REPLICAS, "nginx reloaded %d times, fewer than %d"
              % (endpoints.reloads, 2 * REPLICAS))

        for what, n in sorted(load.notes.items()):
            print("%s: %d" % (what, n), flush=True)
        for name, _, _ in CLIENTS:
            check(not load.failed[name], "%s: %d requests failed, the first: %s"
                  % (name, len(load.failed[name]), load.failed[name][:3]))
            check(load.ok[name] >= 20, "%s: only %d answers" % (name, load.ok[name]))
            print("%s: %d answered, %d failed" % (name, load.ok[name], len(load.failed[name])),
                  flush=True)

        ngx.send_signal(signal.SIGQUIT)  # graceful: writes out the log
        check(ngx.wait(timeout=30) == 0, "nginx exit status %s" % ngx.returncode)
        seen = read_access_log(os.path.join(tmp, "access.log"), rest_port, grpc_port)
        for side in ("rest", "grpc"):
            s = seen[side]
            sent = sum(load.ok[n] + len(load.failed[n]) for n, via, _ in CLIENTS if via == side)
            check(s["lines"] == sent, "nginx logged %d %s requests, the clients made %d"
                  % (s["lines"], side, sent))
            check(not s["bad"], "nginx %s: %d lines with a 5xx or a gRPC error, the first: %s"
                  % (side, len(s["bad"]), s["bad"][:3]))
            want = {"127.0.0.1:%d" % (r.rest_port if side == "rest" else r.grpc_port)
                    for r in replicas}
            check(want <= set(s["addrs"]), "nginx %s: replicas that answered nothing: %s (%s)"
                  % (side, sorted(want - set(s["addrs"])), s["addrs"]))
            print("nginx %s: %d requests, %d retried on another replica, per replica %s, "
                  "slowest %.3fs" % (side, s["lines"], s["retries"],
                                     sorted(s["addrs"].values()), s["max_rt"]), flush=True)
        print("drains: %s s; test took %.1fs" % (", ".join("%.2f" % d for d in drains),
                                                 time.time() - t_start), flush=True)
    except Exception as e:  # a crash of the test itself is a failure
        check(False, "test raised %r" % e)
    finally:
        if load:
            load.finish()
        if endpoints:
            endpoints.finish()
        if ngx and ngx.poll() is None:
            ngx.kill()
            ngx.wait()
        for r in replicas:
            r.kill()
        if gct.FAILED:
            for f in sorted(os.listdir(tmp)):
                if f.endswith((".log", ".out")):
                    with open(os.path.join(tmp, f)) as fh:
                        print("---- %s ----\n%s" % (f, fh.read()[-3000:]), flush=True)
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (gct.PASSED, gct.FAILED), flush=True)
    return 1 if gct.FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
