#!/usr/bin/env bash
# What a CPU-only user pays for a tfserve built with CUDA: tfserve serving the demo model
# half_plus_two with --device=cpu, from the CUDA build (the module libtfserve-cuda.so beside it,
# never opened with --device=cpu) against a build configured with -DTFS_CUDA=OFF. For each, the
# median of RUNS starts (interleaved) of
#   start to first predict: fork+exec of tfserve until the first REST predict answered
#                           {"predictions": [2.5, 3.0, 4.5]} (polled every millisecond);
#   idle VmRSS:             /proc/PID/status one second after that answer.
# Targets: the CUDA build within 10% of the CPU-only build on both. Env: TFS_BUILD_DIR (the CUDA
# build, default build/), CPU_BUILD_DIR (default build-cpu/; configured and built here when it has
# no tfserve), RUNS (5), DEVICE (cpu; auto shows what the module costs once opened). A benchmark,
# not a test. See bench/README.md.
set -euo pipefail
RUNS=${RUNS:-5} # before lib.sh, whose default is 3
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DEVICE=${DEVICE:-cpu}
CPU_BUILD=${CPU_BUILD_DIR:-$ROOT/build-cpu}
[[ $CPU_BUILD = /* ]] || CPU_BUILD=$ROOT/$CPU_BUILD
require_tfserve
[[ -e $BUILD/server/libtfserve-cuda.so ]] ||
    echo "bench: no $BUILD/server/libtfserve-cuda.so: $BUILD is not a CUDA build" >&2
if [[ ! -x $CPU_BUILD/server/tfserve || ! -d $CPU_BUILD/models/half_plus_two ]]; then
    echo "bench: building the CPU-only tfserve in $CPU_BUILD" >&2
    { cmake -S "$ROOT" -B "$CPU_BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTFS_CUDA=OFF &&
        cmake --build "$CPU_BUILD" --target tfserve demo-model -j2; } >/dev/null ||
        die "cannot build $CPU_BUILD"
fi

/usr/bin/python3 - "$RUNS" "$DEVICE" "$BENCH_TMP" "CUDA build:$TFSERVE:$MODEL" \
    "CPU-only build:$CPU_BUILD/server/tfserve:$CPU_BUILD/models/half_plus_two" <<'EOF'
import http.client, json, os, socket, statistics, subprocess, sys, time

runs, device, tmp = int(sys.argv[1]), sys.argv[2], sys.argv[3]
targets = [a.split(":", 2) for a in sys.argv[4:]]
body = json.dumps({"instances": [1.0, 2.0, 5.0]})

def port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

def predict(p):
    c = http.client.HTTPConnection("127.0.0.1", p, timeout=2)
    try:
        c.request("POST", "/v1/models/half_plus_two:predict", body)
        r = c.getresponse()
        return r.status == 200 and json.loads(r.read())["predictions"] == [2.5, 3.0, 4.5]
    finally:
        c.close()

def one(binary, model):
    rest = port()
    log = open(os.path.join(tmp, "tfserve-%d.log" % rest), "w")
    t0 = time.monotonic()
    proc = subprocess.Popen([binary, "--port=%d" % port(), "--rest_api_port=%d" % rest,
                             "--model_name=half_plus_two", "--model_base_path=" + model,
                             "--device=" + device], stdout=log, stderr=subprocess.STDOUT)
    try:
        while True:
            if proc.poll() is not None or time.monotonic() - t0 > 30:
                raise SystemExit("bench: %s did not answer (see %s)" % (binary, log.name))
            try:
                if predict(rest):
                    break
            except (OSError, http.client.HTTPException, ValueError):
                pass
            time.sleep(0.001)
        ms = (time.monotonic() - t0) * 1e3
        time.sleep(1)
        with open("/proc/%d/status" % proc.pid) as f:
            kb = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
        with open("/proc/%d/maps" % proc.pid) as f:
            cuda = any("libcud" in l or "libcublas" in l for l in f)
        return ms, kb, cuda
    finally:
        proc.terminate()
        proc.wait()
        log.close()

res = {name: [] for name, _, _ in targets}
for _ in range(runs):
    for name, binary, model in targets:
        res[name].append(one(binary, model))

print("tfserve --device=%s serving half_plus_two, median of %d starts" % (device, runs))
print("%-16s %24s %16s %s" % ("", "start to 1st predict ms", "idle VmRSS MB", "CUDA mapped"))
med = {}
for name, _, _ in targets:
    ms = statistics.median(r[0] for r in res[name])
    kb = statistics.median(r[1] for r in res[name])
    med[name] = (ms, kb)
    print("%-16s %24.1f %16.1f %s   (ms %s; MB %s)" % (
        name, ms, kb / 1024, "yes" if any(r[2] for r in res[name]) else "no",
        " ".join("%.1f" % r[0] for r in res[name]),
        " ".join("%.1f" % (r[1] / 1024) for r in res[name])))
a, b = (med[t[0]] for t in targets)
print("CUDA/CPU-only: start %.3f, idle VmRSS %.3f (targets <= 1.10)" % (a[0] / b[0], a[1] / b[1]))
EOF
