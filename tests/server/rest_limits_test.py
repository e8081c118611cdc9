#!/usr/bin/python3
"""System test of the REST side's connection limits and request edges, on the real tfserve over
loopback with real clients (Python sockets for raw HTTP framing):

  - 1,500 idle connections (scaled down, saying so, when the open-file limit is lower) still let a
    new client get an answer within a second; with --rest_connection_timeout_seconds=2 idle and
    half-sent connections are closed by the server after the timeout, while a connection that
    keeps sending requests stays open;
  - a flood of 2,000 connect-and-close (FIN, RST, half a request) leaves no socket of the
    server's port in CLOSE-WAIT, and the server still answers; nor does a server whose
    --rest_max_connections is reached while clients give up;
  - model names with %00, other control characters or a raw control byte are 404 NOT_FOUND
    (never served as the name before the NUL), a label with one is 400;
  - two Content-Length headers (equal or not), Content-Length with Transfer-Encoding, two
    Transfer-Encoding headers are 400 and the connection is closed (a request hidden behind them
    gets no answer); plain and chunked requests still work;
  - 1,000 distinct unknown model names leave the metrics page's size (roughly) unchanged: they
    are counted under model "~unknown~"; so do 1,000 made-up signatures of the served model
    (signature "~unknown~");
  - a negative timeout or a connection limit below the thread count stops the start;
  - --grpc_channel_arguments reaches the gRPC server: grpc.max_connection_age_ms=1000 makes the
    server send an HTTP/2 GOAWAY on a raw connection after about a second (none without it).

Uses the bundled demo model (half_plus_two). Prints "N passed, M failed"; exit 1 on a failure.
Run: /usr/bin/python3 rest_limits_test.py --build BUILD_DIR --source SOURCE_DIR
"""
import argparse
import errno
import os
import resource
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # expects to sit in tests/server/
import grpc_client_test as g  # noqa: E402

MODEL = "half_plus_two"
N_IDLE = 1500
N_FLOOD = 2000
N_NAMES = 1000


class Rest(g.Server):
    """g.Server with REST and metrics on."""

    def __init__(self, build, base, tmp, extra=()):
        self.rest = g.free_port()
        super().__init__(build, MODEL, base, tmp,
                         ["--rest_api_port=%d" % self.rest, "--metrics_path=/metrics",
                          "--rest_api_num_threads=4"] + list(extra))


def read_response(s):
    """One HTTP/1.1 response from s: (status, headers dict (lower-case names), body bytes); the
    body by Content-Length (tfserve always sends one). None when the peer closed first."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:])}
    n = int(headers.get("content-length", "0"))
    while len(body) < n:
        chunk = s.recv(65536)
        if not chunk:
            break
        body += chunk
    return int(lines[0].split()[1]), headers, body[:n]


def raw(port, data, timeout=5):
    """Sends bytes, reads one response; returns (response or None, closed_after) where
    closed_after says the server closed the connection after it."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        r = read_response(s)
        try:
            s.settimeout(1)
            closed = s.recv(65536) == b""
        except (socket.timeout, ConnectionResetError):
            closed = False
        return r, closed


def get(port, path, timeout=5):
    r, _ = raw(port, ("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path)
               .encode("latin-1"), timeout)
    return r


def state_count(port, state_hex):
    """Sockets whose local port is `port` in the given TCP state (/proc/net/tcp{,6}: 08 is
    CLOSE-WAIT), as `ss -tan` would list them; the kernel's table works in any container."""
    n = 0
    for f in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(f) as fh:
                next(fh)
                for line in fh:
                    p = line.split()
                    if int(p[1].rsplit(":", 1)[1], 16) == port and p[3] == state_hex:
                        n += 1
        except FileNotFoundError:
            pass
    return n


def ss_close_wait(port):
    """CLOSE-WAIT sockets on the server's port by `ss -tan` (None when ss is absent)."""
    if not shutil.which("ss"):
        return None
    out = subprocess.run(["ss", "-tanH", "state", "close-wait", "( sport = :%d )" % port],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout.decode()
    return len([ln for ln in out.splitlines() if ln.strip()])


def fd_budget():
    """Raises this process's open-file soft limit to the hard limit and returns it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def open_idle(port, n):
    """n connections that send nothing; returns the sockets (as many as could be opened)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            socks.append(s)
    except OSError as e:
        print("opened %d of %d idle connections: %r" % (len(socks), n, e), flush=True)
    return socks


def closed_by_peer(s):
    """True when the server has closed s (EOF or reset), without blocking."""
    p = select.poll()   # select() cannot take descriptors past 1023
    p.register(s, select.POLLIN)
    if not p.poll(0):
        return False
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except OSError as e:
        return e.errno in (errno.ECONNRESET, errno.EPIPE)


def check_idle(build, demo, tmp, n_idle):
    """Many idle connections do not shut new clients out (the default timeout is 60 s, so
    nothing here is freed by it)."""
    srv = Rest(build, demo, tmp)
    socks = []
    try:
        socks = open_idle(srv.rest, n_idle)
        g.check(len(socks) == n_idle, "opened %d idle connections (%d wanted)"
                % (len(socks), n_idle))
        time.sleep(0.3)   # let the server accept the last ones
        t0 = time.time()
        try:
            r = get(srv.rest, "/v1/models/%s" % MODEL, timeout=5)
        except OSError as e:   # a timeout: the server no longer accepts
            print("the new client got no answer: %r" % e, flush=True)
            r = None
        dt = time.time() - t0
        print("with %d idle connections open, a new client's answer took %.3f s"
              % (len(socks), dt), flush=True)
        g.check(r is not None and r[0] == 200 and dt < 1.0,
                "a new client is answered within a second with %d idle connections open "
                "(%r in %.2f s)" % (len(socks), r and r[0], dt))
        open_now = sum(1 for s in socks if not closed_by_peer(s))
        g.check(open_now == len(socks), "the idle connections are still open before the 60 s "
                "timeout (%d of %d)" % (open_now, len(socks)))
    finally:
        for s in socks:
            s.close()
        srv.stop()


def check_timeout(build, demo, tmp):
    """--rest_connection_timeout_seconds=2: idle and half-sent connections are closed by the
    server after about 2 s; a connection sending a request every 0.7 s stays open."""
    srv = Rest(build, demo, tmp, ["--rest_connection_timeout_seconds=2"])
    socks = []
    busy = None
    try:
        socks = open_idle(srv.rest, 200)
        half = socket.create_connection(("127.0.0.1", srv.rest), timeout=10)
        half.sendall(b"GET /v1/models/%s HTTP/1.1\r\nHost: x\r\n" % MODEL.encode())
        socks.append(half)
        body = socket.create_connection(("127.0.0.1", srv.rest), timeout=10)
        body.sendall(b"POST /v1/models/%s:predict HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n"
                     b"\r\n{\"instances\"" % MODEL.encode())
        socks.append(body)
        busy = socket.create_connection(("127.0.0.1", srv.rest), timeout=10)
        t0 = time.time()
        answered = 0
        closed_at = {}
        while time.time() - t0 < 6 and len(closed_at) < len(socks):
            busy.sendall(b"GET /v1/models/%s HTTP/1.1\r\nHost: x\r\n\r\n" % MODEL.encode())
            r = read_response(busy)
            answered += 1 if r and r[0] == 200 else 0
            for i, s in enumerate(socks):
                if i not in closed_at and closed_by_peer(s):
                    closed_at[i] = time.time() - t0
            time.sleep(0.1 if time.time() - t0 > 1.5 else 0.7)
        times = sorted(closed_at.values())
        print("timeout 2 s: %d of %d idle/half-sent connections closed by the server, after "
              "%.2f-%.2f s" % (len(times), len(socks), times[0] if times else -1,
                               times[-1] if times else -1), flush=True)
        g.check(len(closed_at) == len(socks), "every idle and half-sent connection is closed "
                "(%d of %d)" % (len(closed_at), len(socks)))
        g.check(times and times[0] >= 1.5 and times[-1] <= 4.5,
                "they are closed about 2 s after their last byte (%s)" % (times[:1] + times[-1:]))
        g.check(answered >= 3, "a connection that keeps sending requests is answered throughout "
                "(%d answers)" % answered)
        busy.sendall(b"GET /v1/models/%s HTTP/1.1\r\nHost: x\r\n\r\n" % MODEL.encode())
        r = read_response(busy)
        g.check(r is not None and r[0] == 200, "the busy connection is still open after the "
                "idle ones were closed")
        g.check(state_count(srv.rest, "01") <= 2, "no server socket is left established but "
                "the busy one (%d)" % state_count(srv.rest, "01"))
    finally:
        for s in socks:
            s.close()
        if busy:
            busy.close()
        srv.stop()


def flood(port, n):
    """n connections closed right after connecting, in three ways: FIN, RST (SO_LINGER 0), and
    FIN after half a request."""
    for i in range(n):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
        except OSError as e:
            print("flood: connect %d failed: %r" % (i, e), flush=True)
            return i
        if i % 3 == 1:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        elif i % 3 == 2:
            s.sendall(b"POST /v1/models/x:predict HTTP/1.1\r\nContent-Length: 10\r\n")
        s.close()
    return n


def wait_close_wait_gone(port, limit_s):
    """Seconds until no server socket of `port` is in CLOSE-WAIT, or None when some still are
    after limit_s; also the count that stayed."""
    t0 = time.time()
    while True:
        n = state_count(port, "08")
        if n == 0:
            return time.time() - t0, 0
        if time.time() - t0 > limit_s:
            return None, n
        time.sleep(0.1)


def check_flood(build, demo, tmp):
    srv = Rest(build, demo, tmp)
    try:
        t0 = time.time()
        done = flood(srv.rest, N_FLOOD)
        dt = time.time() - t0
        g.check(done == N_FLOOD, "the flood's %d connections were all accepted (%d)"
                % (N_FLOOD, done))
        took, left = wait_close_wait_gone(srv.rest, 3)
        ss = ss_close_wait(srv.rest)
        print("flood of %d connect-and-close in %.2f s: CLOSE-WAIT gone %s; ss -tan counts %s"
              % (done, dt, "after %.2f s" % took if took is not None else "NEVER (%d)" % left,
                 ss), flush=True)
        g.check(took is not None, "no server socket stays in CLOSE-WAIT after the flood "
                "(%d left)" % left)
        g.check(ss in (None, 0), "ss -tan lists no CLOSE-WAIT socket on the port (%s)" % ss)
        r = get(srv.rest, "/v1/models/%s" % MODEL)
        g.check(r is not None and r[0] == 200, "the server answers after the flood")
    finally:
        srv.stop()
    # At the connection limit, clients that give up while waiting in the kernel's backlog leave
    # their half of the socket there (CLOSE-WAIT until accepted): the timeout frees the slots, the
    # backlog is accepted and closed.
    srv = Rest(build, demo, tmp, ["--rest_max_connections=8", "--rest_connection_timeout_seconds=1"])
    socks = []
    try:
        socks = open_idle(srv.rest, 8)
        time.sleep(0.2)
        flood(srv.rest, 200)
        took, left = wait_close_wait_gone(srv.rest, 5)
        print("at the connection limit (8), 200 connect-and-close: CLOSE-WAIT gone %s"
              % ("after %.2f s" % took if took is not None else "NEVER (%d)" % left), flush=True)
        g.check(took is not None, "no CLOSE-WAIT is left once the idle connections holding the "
                "limit time out (%d left)" % left)
        r = get(srv.rest, "/v1/models/%s" % MODEL)
        g.check(r is not None and r[0] == 200, "the server answers once the limit frees")
    finally:
        for s in socks:
            s.close()
        srv.stop()


def check_names(srv):
    port = srv.rest
    r = get(port, "/v1/models/%s" % MODEL)
    g.check(r is not None and r[0] == 200, "the model's status is served (%r)" % (r and r[0]))
    for esc in ("%00", "%00x", "%01", "%0a", "%0D", "%1f", "%7F", "%09"):
        for path in ("/v1/models/%s%s" % (MODEL, esc), "/v1/models/%s%s/metadata" % (MODEL, esc)):
            r = get(port, path)
            g.check(r is not None and r[0] == 404 and b"control character" in r[2],
                    "GET %s is 404 naming the control character: %r" % (path, r))
        path = "/v1/models/%s%s:predict" % (MODEL, esc)
        r, _ = raw(port, ("POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 21\r\n\r\n"
                          '{"instances": [1.0]}\n' % path).encode())
        g.check(r is not None and r[0] == 404 and b"control character" in r[2],
                "POST %s is 404, not the prediction of %s: %r" % (path, MODEL, r))
    r = get(port, "/v1/models/%s/labels/stable%%00" % MODEL)
    g.check(r is not None and r[0] == 400 and b"control character" in r[2],
            "a label with %%00 is 400: %r" % (r,))
    # A raw control byte in the request line is a control character of the name; a raw NUL,
    # which the HTTP library would end the target at, is a malformed request.
    for byte in (b"\x01", b"\x7f", b"\x1b"):
        r, _ = raw(port, b"GET /v1/models/" + MODEL.encode() + byte +
                   b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        g.check(r is not None and r[0] == 404 and b"control character" in r[2],
                "a raw %r in the name is 404 (%r)" % (byte, r))
    for target in (b"/v1/models/" + MODEL.encode() + b"\x00",
                   b"/v1/models/" + MODEL.encode() + b"\x00x/metadata?a=b",
                   b"/v1/models/" + MODEL.encode() + b"\x00:predict"):
        r, closed = raw(port, b"POST " + target + b" HTTP/1.1\r\nHost: x\r\n"
                        b"Content-Length: 20\r\n\r\n{\"instances\": [1.0]}")
        g.check(r is not None and r[0] == 400 and b"NUL" in r[2] and closed,
                "a raw NUL in the target %r is 400 and closes (%r)" % (target, r))


def check_framing(srv):
    port = srv.rest
    body = b'{"instances": [1.0, 2.0]}'
    head = b"POST /v1/models/%s:predict HTTP/1.1\r\nHost: x\r\n" % MODEL.encode()
    r, _ = raw(port, head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
    g.check(r is not None and r[0] == 200 and b"2.5" in r[2], "a plain predict works: %r" % (r,))
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    r, _ = raw(port, head + b"Transfer-Encoding: chunked\r\n\r\n" + chunked)
    g.check(r is not None and r[0] == 200 and b"2.5" in r[2], "a chunked predict works: %r"
            % (r,))
    smuggled = b"GET /v1/models/%s HTTP/1.1\r\nHost: x\r\n\r\n" % MODEL.encode()
    cases = [
        ("two equal Content-Length", b"Content-Length: %d\r\nContent-Length: %d\r\n"
         % (len(body), len(body)), body),
        ("two different Content-Length", b"Content-Length: %d\r\nContent-Length: %d\r\n"
         % (len(body), len(body) + len(smuggled)), body + smuggled),
        ("Content-Length and Transfer-Encoding: chunked", b"Content-Length: %d\r\n"
         b"Transfer-Encoding: chunked\r\n" % len(chunked), chunked),
        ("Transfer-Encoding: chunked and Content-Length", b"Transfer-Encoding: chunked\r\n"
         b"Content-Length: 3\r\n", chunked),
        ("two Transfer-Encoding", b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
         chunked),
        ("Content-Length '5, 5'", b"Content-Length: %d, %d\r\n" % (len(body), len(body)), body),
        ("Content-Length '+25'", b"Content-Length: +%d\r\n" % len(body), body),
        ("Transfer-Encoding: gzip, chunked", b"Transfer-Encoding: gzip, chunked\r\n", chunked),
    ]
    for what, hdrs, payload in cases:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(head + hdrs + b"\r\n" + payload + smuggled)
            r = read_response(s)
            try:
                s.settimeout(2)
                rest = b""
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    rest += chunk
                closed = True
            except (socket.timeout, ConnectionResetError):
                closed = False
        reason = " ".join(r[2].decode(errors="replace").split())[:110] if r else ""
        print("%-46s -> %s %s" % (what, r and r[0], reason), flush=True)
        g.check(r is not None and r[0] == 400 and r[2].strip() != b"",
                "%s: 400 with a reason (%r)" % (what, r))
        g.check(closed and b"HTTP/1.1" not in rest, "%s: the connection is closed and the "
                "request behind it gets no answer (%r)" % (what, rest[:80]))


def check_unknown_names(srv):
    port = srv.rest
    # One of each kind first, so that the unknown series exist before the page is measured.
    def burst(names):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            for name in names:
                s.sendall(b"GET /v1/models/%s HTTP/1.1\r\nHost: x\r\n\r\n" % name.encode())
                r1 = read_response(s)
                s.sendall(b"POST /v1/models/%s:predict HTTP/1.1\r\nHost: x\r\n"
                          b"Content-Length: 20\r\n\r\n{\"instances\": [1.0]}" % name.encode())
                r2 = read_response(s)
                if not (r1 and r1[0] == 404 and r2 and r2[0] == 404):
                    return False
        return True
    get(port, "/v1/models/%s" % MODEL)
    burst(["warm-unknown-%d" % i for i in range(20)])
    before = get(port, "/metrics")[2]
    ok = burst(["made-up-%d" % i for i in range(N_NAMES)])
    g.check(ok, "every made-up name is 404")
    after = get(port, "/metrics")[2]
    print("metrics page: %d bytes before, %d after %d unknown names (x2 requests)"
          % (len(before), len(after), N_NAMES), flush=True)
    g.check(len(after) <= len(before) * 1.02 + 512,
            "the metrics page stays about the same size (%d -> %d bytes)"
            % (len(before), len(after)))
    g.check(b"made-up-" not in after and b"warm-unknown-" not in after,
            "no made-up name appears in the metrics")
    want = b':tensorflow:serving:request_count{model_name="~unknown~",status="NOT_FOUND"} %d' \
        % (N_NAMES + 20)
    g.check(want in after, "the made-up names' predicts are counted under ~unknown~")
    g.check(b'model_name="%s"' % MODEL.encode() in after or b'model="%s"' % MODEL.encode()
            in after, "the served model keeps its own series")
    # Made-up signatures of the served model: one series too.
    def sigs(names):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            for name in names:
                body = b'{"signature_name": "%s", "instances": [1.0]}' % name.encode()
                s.sendall(b"POST /v1/models/%s:predict HTTP/1.1\r\nHost: x\r\n"
                          b"Content-Length: %d\r\n\r\n%s" % (MODEL.encode(), len(body), body))
                r = read_response(s)
                if not (r and r[0] == 400):
                    return False
        return True
    sigs(["warm-sig-%d" % i for i in range(20)])
    before = get(port, "/metrics")[2]
    g.check(sigs(["made-up-sig-%d" % i for i in range(N_NAMES)]), "every made-up signature is 400")
    after = get(port, "/metrics")[2]
    print("metrics page: %d bytes before, %d after %d unknown signatures"
          % (len(before), len(after), N_NAMES), flush=True)
    g.check(len(after) <= len(before) * 1.02 + 512,
            "the metrics page stays about the same size (%d -> %d bytes)"
            % (len(before), len(after)))
    g.check(b"-sig-" not in after, "no made-up signature appears in the metrics")
    g.check(b'model="%s",signature="~unknown~"' % MODEL.encode() in after,
            "the made-up signatures are counted under signature ~unknown~")


def h2_goaway_after(port, wait_s):
    """Opens a raw HTTP/2 connection (preface + empty SETTINGS) and returns the seconds until the
    server sends GOAWAY (frame type 7), or None when it sends none within wait_s."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait_s) as s:
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        t0 = time.time()
        buf = b""
        while time.time() - t0 < wait_s:
            s.settimeout(max(0.05, wait_s - (time.time() - t0)))
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                return None
            if not chunk:
                return None
            buf += chunk
            while len(buf) >= 9:
                n = int.from_bytes(buf[:3], "big")
                if len(buf) < 9 + n:
                    break
                ftype, flags = buf[3], buf[4]
                if ftype == 7:
                    return time.time() - t0
                if ftype == 4 and not flags & 1:   # SETTINGS: acknowledge
                    s.sendall(b"\x00\x00\x00\x04\x01\x00\x00\x00\x00")
                buf = buf[9 + n:]
    return None


def check_grpc_channel_args(build, demo, tmp, plain):
    srv = g.Server(build, MODEL, demo, tmp, [
        "--grpc_channel_arguments=grpc.max_connection_age_ms=1000,"
        "grpc.max_connection_age_grace_ms=1000"])
    try:
        t = h2_goaway_after(srv.port, 4)
        print("gRPC with grpc.max_connection_age_ms=1000: GOAWAY after %s s" % t, flush=True)
        g.check(t is not None and 0.5 <= t <= 3,
                "grpc.max_connection_age_ms=1000 sends GOAWAY after about a second (%s)" % t)
    finally:
        srv.stop()
    t = h2_goaway_after(plain.port, 2)
    g.check(t is None, "without it no GOAWAY comes within 2 s (%s)" % t)


def check_bad_flags(build, demo):
    """Values the server cannot honour stop the start with the flag named."""
    for flags, text in ((["--rest_connection_timeout_seconds=-1"],
                         "--rest_connection_timeout_seconds=-1 is not in [0, "),
                        (["--rest_max_connections=3", "--rest_api_num_threads=4"],
                         "--rest_max_connections=3 is not in [--rest_api_num_threads (4)")):
        p = subprocess.run([os.path.join(build, "server", "tfserve"), "--port=%d" % g.free_port(),
                            "--rest_api_port=%d" % g.free_port(), "--model_name=" + MODEL,
                            "--model_base_path=" + demo] + flags,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
        out = p.stdout.decode(errors="replace")
        g.check(p.returncode == 1 and text in out,
                "%s: rc %d, want 1 and %r: %s" % (flags, p.returncode, text, out[-300:]))


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
    tmp = tempfile.mkdtemp(prefix="tfs-rest-limits-test-")
    try:
        g.gen_stubs(os.path.abspath(a.source), tmp)
        demo = os.path.join(build, "models", MODEL)
        # The client holds one descriptor per connection and tfserve one more; tfserve raises
        # its own soft limit to the hard one, as this process does here.
        budget = fd_budget() - 200
        n_idle = min(N_IDLE, budget)
        if n_idle < N_IDLE:
            print("open-file limit %d: %d idle connections instead of %d%s" % (
                budget + 200, max(n_idle, 0), N_IDLE,
                "" if n_idle > 1100 else " (not enough to pass libmicrohttpd's old default "
                "of 1020)"), flush=True)
        if n_idle >= 100:
            run(check_idle, build, demo, tmp, n_idle)
        else:
            print("SKIP: idle connections: the open-file limit allows too few", flush=True)
        run(check_timeout, build, demo, tmp)
        run(check_bad_flags, build, demo)
        if budget >= 100:
            run(check_flood, build, demo, tmp)
        srv = Rest(build, demo, tmp)
        try:
            run(check_names, srv)
            run(check_framing, srv)
            run(check_unknown_names, srv)
            run(check_grpc_channel_args, build, demo, tmp, srv)
        finally:
            srv.stop()
    except Exception as e:  # a crash of the test itself is a failure
        g.check(False, "rest limits test raised %r" % e)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (g.PASSED, g.FAILED), flush=True)
    return 1 if g.FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
