#!/usr/bin/python3
"""TLS on both APIs of the real tfserve, with certificates made by openssl for this run.

Makes a CA, a server certificate for 127.0.0.1/localhost (subjectAltName) and a client
certificate signed by the CA, then checks:
  gRPC (--ssl_config_file, TensorFlow Serving's SSLConfig text): a grpcio client trusting the CA
  gets half_plus_two's answer; an insecure channel to the TLS port fails; with client_verify a
  client without a certificate is refused (UNAVAILABLE), one with a certificate the CA did not sign
  too, and one with the CA-signed certificate is answered; an unreadable file, bad PEM, a key
  that does not match its certificate and client_verify without custom_ca stop the start with
  exit 1 and a message naming the file.
  REST (--rest_api_ssl_cert_file/--rest_api_ssl_key_file): curl --cacert gets the predict answer,
  curl without --cacert fails verification, a plain-HTTP client gets no answer and neither
  crashes nor stalls the server, one flag without the other and bad PEM stop the start (before any
  model loads).

Exit 77 (skipped, saying why) without openssl or curl. Prints "N passed, M failed".
Run: /usr/bin/python3 tls_test.py --build BUILD_DIR --source SOURCE_DIR
"""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpc_client_test as g  # noqa: E402  (its check(), stubs, ports and counters)

import grpc  # noqa: E402

MODEL = "half_plus_two"
PREDICT = g.PS + "Predict"


def openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.PIPE)


def make_certs(d):
    """ca.pem/ca.key, server.pem/server.key (127.0.0.1, localhost), client.pem/client.key signed
    by the CA, and other-ca's client (other.pem/other.key) that the CA did not sign."""
    for ca in ("ca", "other-ca"):
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                "-subj", "/CN=tfserve test %s" % ca, "-keyout", ca + ".key", "-out", ca + ".pem",
                cwd=d)
    with open(os.path.join(d, "server.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                "extendedKeyUsage=serverAuth\n")
    with open(os.path.join(d, "client.ext"), "w") as f:
        f.write("extendedKeyUsage=clientAuth\n")
    for name, ca, ext in (("server", "ca", "server.ext"), ("client", "ca", "client.ext"),
                          ("other", "other-ca", "client.ext")):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=" + name,
                "-keyout", name + ".key", "-out", name + ".csr", cwd=d)
        openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key",
                "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", name + ".pem", cwd=d)


def read(d, name):
    with open(os.path.join(d, name), "rb") as f:
        return f.read()


def pbtxt_string(b):
    """A PEM as a text-format string literal."""
    return '"' + b.decode().replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def write_ssl_config(d, name, key, cert, ca=None, verify=False):
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write("server_key: %s\nserver_cert: %s\n" % (pbtxt_string(key), pbtxt_string(cert)))
        if ca is not None:
            f.write("custom_ca: %s\n" % pbtxt_string(ca))
        f.write("client_verify: %s\n" % ("true" if verify else "false"))
    return path


def tfserve(build, demo, logdir, extra, port=None):
    port = port or g.free_port()
    log = open(os.path.join(logdir, "tfserve-tls-%d.log" % port), "w+")
    proc = subprocess.Popen([os.path.join(build, "server", "tfserve"), "--port=%d" % port,
                             "--model_name=" + MODEL, "--model_base_path=" + demo] + extra,
                            stdout=log, stderr=subprocess.STDOUT)
    return proc, log, port


def log_text(log):
    log.seek(0)
    return log.read()


def stop(proc, log, what):
    if proc.poll() is None:
        proc.terminate()
        try:
            rc = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
        g.check(rc == 0, "%s: tfserve exits 0 on SIGTERM (rc %s)\n%s"
                % (what, rc, log_text(log)[-2000:]))
    log.close()


def predict(channel, timeout=10):
    from tensorflow_serving.apis import predict_pb2
    f = channel.unary_unary(PREDICT, request_serializer=lambda m: m.SerializeToString(),
                            response_deserializer=predict_pb2.PredictResponse.FromString)
    return list(f(g.predict_req(MODEL, [1.0, 2.0, 5.0]), timeout=timeout).outputs["y"].float_val)


def secure(port, ca, key=None, cert=None):
    creds = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key,
                                         certificate_chain=cert)
    return grpc.secure_channel("127.0.0.1:%d" % port, creds)


def wait_log(proc, log, text, what):
    """Waits for a line of tfserve's log: a client that connects before the port is open
    backs off for seconds."""
    deadline = time.time() + 30
    while time.time() < deadline and proc.poll() is None:
        if text in log_text(log):
            return
        time.sleep(0.05)
    raise RuntimeError("%s: no %r in the log\n%s" % (what, text, log_text(log)[-3000:]))


def wait_predict(proc, log, channel, what):
    """Predict until the model answers or 30 s pass."""
    deadline = time.time() + 30
    last = None
    while time.time() < deadline and proc.poll() is None:
        try:
            return predict(channel, timeout=5)
        except grpc.RpcError as e:
            last = e
            time.sleep(0.1)
    raise RuntimeError("%s: no answer (%s)\n%s" % (what, last, log_text(log)[-3000:]))


def rpc_code(fn):
    try:
        fn()
        return grpc.StatusCode.OK
    except grpc.RpcError as e:
        return e.code()


def check_grpc(build, demo, tmp, d):
    ca, key, cert = read(d, "ca.pem"), read(d, "server.key"), read(d, "server.pem")
    ckey, ccert = read(d, "client.key"), read(d, "client.pem")

    # Server authentication only.
    cfg = write_ssl_config(d, "ssl.config", key, cert)
    proc, log, port = tfserve(build, demo, tmp, ["--ssl_config_file=" + cfg])
    try:
        wait_log(proc, log, "Running gRPC ModelServer", "gRPC TLS")
        ch = secure(port, ca)
        y = wait_predict(proc, log, ch, "gRPC TLS")
        g.check(y == [2.5, 3.0, 4.5], "gRPC TLS Predict answers %s" % y)
        ch.close()
        with grpc.insecure_channel("127.0.0.1:%d" % port) as ins:
            c = rpc_code(lambda: predict(ins, timeout=5))
            g.check(c == grpc.StatusCode.UNAVAILABLE,
                    "plaintext channel to the TLS port fails UNAVAILABLE (got %s)" % c)
        # A CA the client trusts that did not sign the server certificate.
        with secure(port, read(d, "other-ca.pem")) as bad:
            c = rpc_code(lambda: predict(bad, timeout=5))
            g.check(c == grpc.StatusCode.UNAVAILABLE,
                    "client trusting another CA fails UNAVAILABLE (got %s)" % c)
        with secure(port, ca) as again:
            y = predict(again)
            g.check(y == [2.5, 3.0, 4.5], "TLS server still answers after refused handshakes")
        g.check("gRPC serves TLS" in log_text(log), "the log says gRPC serves TLS")
    finally:
        stop(proc, log, "gRPC TLS")

    # Client certificates required.
    cfg = write_ssl_config(d, "ssl-verify.config", key, cert, ca=ca, verify=True)
    proc, log, port = tfserve(build, demo, tmp, ["--ssl_config_file=" + cfg])
    try:
        wait_log(proc, log, "Running gRPC ModelServer", "gRPC mutual TLS")
        with secure(port, ca, ckey, ccert) as ch:
            y = wait_predict(proc, log, ch, "gRPC mutual TLS")
            g.check(y == [2.5, 3.0, 4.5], "mutual TLS with the CA-signed client cert answers %s"
                    % y)
        with secure(port, ca) as ch:
            c = rpc_code(lambda: predict(ch, timeout=5))
            g.check(c == grpc.StatusCode.UNAVAILABLE,
                    "client_verify: a client without a certificate is refused (got %s)" % c)
        with secure(port, ca, read(d, "other.key"), read(d, "other.pem")) as ch:
            c = rpc_code(lambda: predict(ch, timeout=5))
            g.check(c == grpc.StatusCode.UNAVAILABLE,
                    "client_verify: a certificate from another CA is refused (got %s)" % c)
    finally:
        stop(proc, log, "gRPC mutual TLS")

    # Start errors: exit 1 naming the file and the part.
    bad_cases = [
        ("missing file", os.path.join(d, "no-such.config"), ("no-such.config",)),
        ("bad PEM key", write_ssl_config(d, "badkey.config", b"-----BEGIN PRIVATE KEY-----\n"
                                         b"bm90IGEga2V5\n-----END PRIVATE KEY-----\n", cert),
         ("badkey.config", "server_key")),
        ("cert not PEM", write_ssl_config(d, "badcert.config", key, b"hello"),
         ("badcert.config", "server_cert")),
        ("key of another cert", write_ssl_config(d, "mismatch.config", ckey, cert),
         ("mismatch.config", "does not match")),
        ("client_verify without custom_ca", write_ssl_config(d, "noca.config", key, cert,
                                                             verify=True),
         ("noca.config", "custom_ca")),
        ("unknown field", os.path.join(d, "typo.config"), ("typo.config", "server_keys")),
    ]
    with open(os.path.join(d, "typo.config"), "w") as f:
        f.write('server_keys: "x"\n')
    for what, path, texts in bad_cases:
        p = subprocess.run([os.path.join(build, "server", "tfserve"), "--port=%d" % g.free_port(),
                            "--model_name=" + MODEL, "--model_base_path=" + demo,
                            "--ssl_config_file=" + path], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=60)
        out = p.stdout.decode(errors="replace")
        g.check(p.returncode == 1 and all(t in out for t in texts),
                "--ssl_config_file %s: rc %d, wanted %s in %s" % (what, p.returncode, texts,
                                                                  out[-600:]))
        # Checked before any model loads: a bad file costs no model load first.
        g.check("AVAILABLE" not in out, "--ssl_config_file %s: stopped before loading models"
                % what)


def curl(*args):
    p = subprocess.run(["curl", "-sS", "--max-time", "10"] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=30)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def check_rest(build, demo, tmp, d):
    cert, key = os.path.join(d, "server.pem"), os.path.join(d, "server.key")
    ca = os.path.join(d, "ca.pem")
    rest = g.free_port()
    proc, log, port = tfserve(build, demo, tmp, [
        "--rest_api_port=%d" % rest, "--rest_api_ssl_cert_file=" + cert,
        "--rest_api_ssl_key_file=" + key])
    url = "https://127.0.0.1:%d/v1/models/%s:predict" % (rest, MODEL)
    body = '{"instances": [1.0, 2.0, 5.0]}'
    try:
        deadline = time.time() + 30
        rc, out, err = 1, "", ""
        while time.time() < deadline and proc.poll() is None:
            rc, out, err = curl("--cacert", ca, "-d", body, url)
            if rc == 0 and "predictions" in out:
                break
            time.sleep(0.1)
        try:
            doc = json.loads(out)
        except ValueError:
            doc = None
        g.check(rc == 0 and doc == {"predictions": [2.5, 3.0, 4.5]},
                "HTTPS predict with --cacert: rc %d %r %r\n%s" % (rc, out, err,
                                                                  log_text(log)[-2000:]))
        rc, out, err = curl("https://localhost:%d/v1/models/%s" % (rest, MODEL), "--cacert", ca)
        g.check(rc == 0 and "AVAILABLE" in out, "HTTPS by the name localhost: rc %d %r %r"
                % (rc, out, err))
        rc, out, err = curl("-d", body, url)
        g.check(rc == 60 and not out, "HTTPS without --cacert fails verification: rc %d %r"
                % (rc, err))
        # Plain HTTP against the HTTPS port: no answer, and the server neither crashes nor
        # stalls (a raw client that sends a request and one that sends nothing at all).
        rc, out, err = curl("-d", body, "http://127.0.0.1:%d/v1/models/%s:predict" % (rest, MODEL))
        g.check(rc != 0 and "predictions" not in out, "plain HTTP to the HTTPS port gets no "
                "answer: rc %d %r" % (rc, out))
        idle = socket.create_connection(("127.0.0.1", rest), timeout=5)
        raw = socket.create_connection(("127.0.0.1", rest), timeout=5)
        raw.sendall(b"GET /v1/models/half_plus_two HTTP/1.1\r\nHost: x\r\n\r\n")
        try:
            got = raw.recv(4096)
        except (socket.timeout, ConnectionError):
            got = b""
        g.check(b"AVAILABLE" not in got and not got.startswith(b"HTTP/1.1 200"),
                "raw plain HTTP request gets no HTTP answer (%r)" % got[:80])
        raw.close()
        t0 = time.time()
        rc, out, err = curl("--cacert", ca, "-d", body, url)
        took = time.time() - t0
        g.check(rc == 0 and "predictions" in out and took < 5 and proc.poll() is None,
                "HTTPS still answers (%.2f s) with a plain-HTTP client connected: rc %d %r"
                % (took, rc, err))
        idle.close()
        # gRPC stays plaintext when only REST has TLS.
        with grpc.insecure_channel("127.0.0.1:%d" % port) as ch:
            y = predict(ch)
            g.check(y == [2.5, 3.0, 4.5], "plaintext gRPC beside HTTPS REST answers %s" % y)
    finally:
        stop(proc, log, "REST HTTPS")

    bad_cases = [
        ("cert without key", ["--rest_api_ssl_cert_file=" + cert], ("--rest_api_ssl_key_file",)),
        ("missing key file", ["--rest_api_ssl_cert_file=" + cert,
                              "--rest_api_ssl_key_file=" + os.path.join(d, "nokey.pem")],
         ("nokey.pem",)),
        ("key that is a cert", ["--rest_api_ssl_cert_file=" + cert,
                                "--rest_api_ssl_key_file=" + cert], ("server.pem", "private key")),
        ("key of another cert", ["--rest_api_ssl_cert_file=" + cert,
                                 "--rest_api_ssl_key_file=" + os.path.join(d, "client.key")],
         ("client.key", "does not match")),
    ]
    for what, flags, texts in bad_cases:
        p = subprocess.run([os.path.join(build, "server", "tfserve"), "--port=%d" % g.free_port(),
                            "--rest_api_port=%d" % g.free_port(), "--model_name=" + MODEL,
                            "--model_base_path=" + demo] + flags, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=60)
        out = p.stdout.decode(errors="replace")
        g.check(p.returncode == 1 and all(t in out for t in texts),
                "REST TLS %s: rc %d, wanted %s in %s" % (what, p.returncode, texts, out[-600:]))
        g.check("AVAILABLE" not in out, "REST TLS %s: stopped before loading models" % what)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    for tool in ("openssl", "curl"):
        if not shutil.which(tool):
            print("SKIP: %s is not installed (scripts/setup.sh installs it)" % tool)
            return 77
    build, source = os.path.abspath(a.build), os.path.abspath(a.source)
    demo = os.path.join(build, "models", MODEL)
    tmp = tempfile.mkdtemp(prefix="tfs-tls-test-")
    try:
        g.gen_stubs(source, tmp)
        d = os.path.join(tmp, "certs")
        os.mkdir(d)
        make_certs(d)
        check_grpc(build, demo, tmp, d)
        check_rest(build, demo, tmp, d)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (g.PASSED, g.FAILED))
    return 1 if g.FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
