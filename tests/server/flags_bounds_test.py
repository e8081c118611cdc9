#!/usr/bin/python3
"""System test of the ranges of tfserve's numeric flags, on the real binary over loopback:

  - for each bounded flag, the value one below its range and (where the range has a finite top)
    one above it stop the start with exit status 1 and "Failed to start server. Error:
    INVALID_ARGUMENT: --NAME=VALUE is not in [MIN, MAX]";
  - --help prints each bounded flag's range, and what 0 means where it is not a count;
  - the boundary values are accepted: a server given the lowest values (gRPC on --port=0, one
    REST thread and one connection, no drain time) answers a REST predict (y = 0.5 x + 2) and
    exits on SIGTERM (0, or 1 when the zero drain time ran out); a server given the highest of the others (64 gRPC threads, the largest
    connection timeout and limit) answers a gRPC Predict from a real gRPC client;
  - --rest_api_port equal to --port is not fatal: the server logs tensorflow_model_server's
    error, skips REST and serves gRPC.

The ranges below are the flags' documented contract (docs and --help), written out here rather
than read from the binary. Uses the bundled demo model (half_plus_two): exit 77 (skipped) when
the build has not made it. Prints "N passed, M failed"; exit 1 on a failure.
Run: /usr/bin/python3 flags_bounds_test.py --build BUILD_DIR --source SOURCE_DIR
"""
import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # expects to sit in tests/server/
import grpc_client_test as g  # noqa: E402

MODEL = "half_plus_two"
I32_MAX = 2**31 - 1
I64_MAX = 2**63 - 1

# flag, lowest, highest, what 0 means (None: 0 is just a number)
BOUNDS = [
    ("port", 0, 65535, "any free port"),
    ("rest_api_port", 0, 65535, "off"),
    ("rest_api_num_threads", 1, 4096, None),
    ("rest_connection_timeout_seconds", 0, I32_MAX, "never"),
    ("rest_max_connections", 1, 1000000, None),
    ("grpc_num_threads", 1, 64, None),
    ("tensorflow_intra_op_parallelism", 0, I64_MAX, "the number of CPUs"),
    ("model_config_file_poll_wait_seconds", 0, I64_MAX, "read it once"),
    ("max_model_memory_bytes", 0, I64_MAX, "no limit"),
    ("max_tensor_bytes", 0, I64_MAX, "half the memory"),
    ("drain_timeout_seconds", 0, I64_MAX, None),
    ("drain_delay_seconds", 0, I64_MAX, None),
]


def tfserve(build):
    return os.path.join(build, "server", "tfserve")


def run_to_exit(build, args):
    p = subprocess.run([tfserve(build)] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=60)
    return p.returncode, p.stdout.decode(errors="replace")


def check_refused(build, demo):
    """One value past each end of each range is refused before anything loads."""
    base = ["--model_name=" + MODEL, "--model_base_path=" + demo]
    for name, lo, hi, _ in BOUNDS:
        outside = [lo - 1] + ([hi + 1] if hi < I64_MAX else [])
        for v in outside:
            rc, out = run_to_exit(build, base + ["--%s=%d" % (name, v)])
            want = ("Failed to start server. Error: INVALID_ARGUMENT: --%s=%d is not in [%d, %d]"
                    % (name, v, lo, hi))
            g.check(rc == 1 and want in out,
                    "--%s=%d: rc %d, want 1 and %r: %s" % (name, v, rc, want, out[-300:]))
            g.check("Running gRPC ModelServer" not in out,
                    "--%s=%d: refused before serving: %s" % (name, v, out[-300:]))


def check_help(build):
    rc, out = run_to_exit(build, ["--help"])
    g.check(rc == 0, "--help exits 0 (rc %d)" % rc)
    lines = {}
    for line in out.splitlines():
        m = re.match(r"\s*--(\w+)=", line)
        if m:
            lines[m.group(1)] = line
    for name, lo, hi, zero in BOUNDS:
        line = lines.get(name, "")
        want = "(range [%d, %d]" % (lo, hi) + ("; 0: " + zero if zero else ")")
        g.check(want in line, "--help on --%s shows %r: %r" % (name, want, line))


def wait_for_log(proc, logpath, pattern, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        with open(logpath, errors="replace") as f:
            m = re.search(pattern, f.read())
        if m or proc.poll() is not None:
            return m
        time.sleep(0.05)
    return None


def check_lowest(build, demo, tmp):
    """The lowest value of every range at once (and the highest connection timeout, which only
    matters with REST on)."""
    rest = g.free_port()
    logpath = os.path.join(tmp, "lowest.log")
    args = ["--port=0", "--rest_api_port=%d" % rest, "--model_name=" + MODEL,
            "--model_base_path=" + demo] + ["--%s=%d" % (name, lo) for name, lo, _, _ in BOUNDS
                                            if name not in ("port", "rest_api_port")]
    args.append("--rest_connection_timeout_seconds=%d" % I32_MAX)
    with open(logpath, "w") as log:
        proc = subprocess.Popen([tfserve(build)] + args, stdout=log, stderr=subprocess.STDOUT)
    try:
        m = wait_for_log(proc, logpath, r"Running gRPC ModelServer at 0\.0\.0\.0:(\d+)")
        g.check(m is not None and int(m.group(1)) > 0,
                "--port=0: gRPC on a port the kernel chose (%s)" % (m and m.group(1)))
        if m:
            with socket.create_connection(("127.0.0.1", int(m.group(1))), timeout=5):
                pass
        ok = wait_for_log(proc, logpath, r"Exporting HTTP/REST API at:localhost:%d" % rest)
        g.check(ok is not None, "REST started with the lowest values")
        status, doc = None, None
        deadline = time.time() + 30
        while ok and time.time() < deadline:
            try:
                status, doc = g.rest_post(rest, "/v1/models/%s:predict" % MODEL,
                                          '{"instances": [1.0, 2.0, 5.0]}')
                if status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        g.check(status == 200 and g.close(doc.get("predictions", []), [2.5, 3.0, 4.5]),
                "REST predict with the lowest values: %s %s" % (status, doc))
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = "hung"
        with open(logpath, errors="replace") as f:
            text = f.read()
        # --drain_timeout_seconds=0 gives the listeners no time to close: status 1 then.
        g.check(rc == 0 or (rc == 1 and "timed out after 0s" in text),
                "lowest values: exit on SIGTERM (rc %s): %s" % (rc, text[-600:]))


def check_highest(build, demo, tmp):
    """The highest value of each range that costs nothing to honour (REST is off here, so its
    thread count and limits are checked but not used), with --rest_api_port equal to --port."""
    port = g.free_port()
    extra = ["--rest_api_port=%d" % port, "--grpc_num_threads=64",
             "--rest_api_num_threads=4096", "--rest_max_connections=1000000",
             "--rest_connection_timeout_seconds=0"]
    # g.Server picks its gRPC port with g.free_port: make that the REST port given above.
    free_port, g.free_port = g.free_port, lambda: port
    try:
        s = g.Server(build, MODEL, demo, tmp, extra)
    finally:
        g.free_port = free_port
    try:
        r = g.predict(s, g.predict_req(MODEL, [1.0, 2.0, 5.0]))
        g.check(g.close(list(r.outputs["y"].float_val), [2.5, 3.0, 4.5]),
                "gRPC Predict with the highest values: %s" % r.outputs["y"])
        logs = s.logs()
        g.check("--rest_api_port cannot be the same as --port (%d)" % port in logs and
                "Skipped exporting HTTP/REST API." in logs,
                "the port clash is logged as tensorflow_model_server does: %s" % logs[-600:])
        g.check("serving gRPC with 64 threads" in logs, "64 gRPC threads: %s" % logs[-600:])
    finally:
        s.stop()


def run(fn, *args):
    """One group of checks; a crash of the test itself is a failure, and the next group runs."""
    try:
        fn(*args)
    except Exception as e:
        g.check(False, "%s raised %r" % (fn.__name__, e))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    demo = os.path.join(build, "models", MODEL)
    if not os.path.isdir(demo) or not os.access(tfserve(build), os.X_OK):
        print("SKIP: %s or %s is missing (build the tfserve and demo-model targets)"
              % (tfserve(build), demo))
        return 77
    tmp = tempfile.mkdtemp(prefix="tfs-flags-bounds-test-")
    try:
        g.gen_stubs(os.path.abspath(a.source), tmp)
        run(check_refused, build, demo)
        run(check_help, build)
        run(check_lowest, build, demo, tmp)
        run(check_highest, build, demo, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (g.PASSED, g.FAILED), flush=True)
    return 1 if g.FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
