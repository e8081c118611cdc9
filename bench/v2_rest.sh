#!/usr/bin/env bash
# KServe v2 REST infer: the binary tensor data extension against plain JSON, on the same server in
# the same run. tfserve-train exports the benchmarks' MLP (examples/fashion_mnist_mlp.ini,
# 784-512-256-10; a few steps are enough, the weights do not matter for timing) and tfserve
# serves it; wrk -t2 -cCONNECTIONS POSTs one 64x784 FP32 input to
# /v2/models/mlp/infer asking for the 64x10 "probabilities":
#   (a) json:   the input as a flat JSON "data" array, the output as JSON;
#   (b) binary: the input as 200,704 raw bytes after the JSON header
#               (Inference-Header-Content-Length), the output as 2,560 raw bytes.
# Both answers are checked against each other before timing. Prints req/s medians of RUNS runs of
# DURATION s (rounds interleave the two, so machine noise hits both alike), CPU per request, and
# the ratio binary/json (target >= 1.5).
# A benchmark, not a test. Env: TFS_BUILD_DIR (default build/), RUNS, DURATION, WARMUP,
# CONNECTIONS (8), THREADS (2), TFSERVE_ARGS (extra tfserve flags). See bench/README.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CONNECTIONS=${CONNECTIONS:-8}
THREADS=${THREADS:-2}
BATCH=64
PY=/usr/bin/python3

need wrk wrk
need curl curl
TFSERVE=${TFSERVE:-$BUILD/server/tfserve}
TRAIN=${TRAIN:-$BUILD/train/tfserve-train}
if [[ ! -x $TFSERVE || ! -x $TRAIN ]]; then
    echo "bench: building tfserve and tfserve-train in $BUILD" >&2
    cmake --build "$BUILD" -j2 --target tfserve tfserve-train >/dev/null ||
        die "cannot build tfserve and tfserve-train in $BUILD"
fi

# The MLP, exported after a few steps.
"$TRAIN" "$ROOT/examples/fashion_mnist_mlp.ini" --max_steps=20 \
    --export_dir="$BENCH_TMP/export" >"$BENCH_TMP/train.log" 2>&1 ||
    { cat "$BENCH_TMP/train.log" >&2; die "tfserve-train failed"; }

# The two request bodies, the same seeded input; the binary one's JSON length for the header.
$PY - "$BENCH_TMP" "$BATCH" <<'PY'
import json, random, struct, sys
tmp, batch = sys.argv[1], int(sys.argv[2])
random.seed(7)
xs = [round(random.random(), 4) for _ in range(batch * 784)]
out = [{"name": "probabilities"}]
with open(tmp + "/json.body", "w") as f:
    json.dump({"inputs": [{"name": "x", "datatype": "FP32", "shape": [batch, 784], "data": xs}],
               "outputs": out}, f)
head = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [batch, 784],
                               "parameters": {"binary_data_size": 4 * len(xs)}}],
                   "outputs": [{"name": "probabilities", "parameters": {"binary_data": True}}]})
with open(tmp + "/binary.body", "wb") as f:
    f.write(head.encode() + struct.pack("<%df" % len(xs), *xs))
with open(tmp + "/binary.len", "w") as f:
    f.write(str(len(head.encode())))
PY
HEAD_LEN=$(cat "$BENCH_TMP/binary.len")
for kind in json binary; do
    cat >"$BENCH_TMP/$kind.lua" <<LUA
wrk.method = "POST"
local f = io.open("$BENCH_TMP/$kind.body", "rb")
wrk.body = f:read("*a")
f:close()
LUA
done
cat >>"$BENCH_TMP/json.lua" <<'LUA'
wrk.headers["Content-Type"] = "application/json"
LUA
cat >>"$BENCH_TMP/binary.lua" <<LUA
wrk.headers["Content-Type"] = "application/octet-stream"
wrk.headers["Inference-Header-Content-Length"] = "$HEAD_LEN"
LUA

TFS_PORT=$(free_port)
TFS_GRPC_PORT=$(free_port)
# TFSERVE_ARGS is split into words on purpose.
# shellcheck disable=SC2086
start tfserve "$BENCH_TMP/tfserve.log" "$TFSERVE" --port="$TFS_GRPC_PORT" \
    --rest_api_port="$TFS_PORT" --rest_api_num_threads=2 --model_name=mlp \
    --model_base_path="$BENCH_TMP/export" --verbosity=warn ${TFSERVE_ARGS:-}
wait_port "${PID[tfserve]}" "$TFS_PORT" || { cat "$BENCH_TMP/tfserve.log" >&2; die "tfserve did not start"; }
URL=http://127.0.0.1:$TFS_PORT/v2/models/mlp/infer
for ((i = 0; i < 100; i++)); do
    curl -sf -o /dev/null "http://127.0.0.1:$TFS_PORT/v2/models/mlp/ready" && break
    sleep 0.1
done

# Both forms must give the same probabilities (JSON's text is the float's shortest form).
curl -sS -m 30 -H 'Content-Type: application/json' --data-binary @"$BENCH_TMP/json.body" \
    "$URL" >"$BENCH_TMP/json.out" || die "JSON infer failed"
curl -sS -m 30 -D "$BENCH_TMP/binary.hdr" -H 'Content-Type: application/octet-stream' \
    -H "Inference-Header-Content-Length: $HEAD_LEN" --data-binary @"$BENCH_TMP/binary.body" \
    "$URL" >"$BENCH_TMP/binary.out" || die "binary infer failed"
$PY - "$BENCH_TMP" "$BATCH" <<'PY' || die "the two forms disagree"
import json, re, struct, sys
tmp, batch = sys.argv[1], int(sys.argv[2])
js = json.load(open(tmp + "/json.out"))
hdr = open(tmp + "/binary.hdr").read()
n = int(re.search(r"(?i)inference-header-content-length:\s*(\d+)", hdr).group(1))
raw = open(tmp + "/binary.out", "rb").read()
head = json.loads(raw[:n])
a = js["outputs"][0]["data"]
b = struct.unpack("<%df" % (batch * 10), raw[n:])
assert js["outputs"][0]["shape"] == [batch, 10] and head["outputs"][0]["shape"] == [batch, 10]
assert all(struct.pack("<f", x) == struct.pack("<f", y) for x, y in zip(a, b)), "values differ"
PY

# run_wrk KIND SECONDS: prints "req/s requests"; fails on socket errors or non-2xx answers.
run_wrk() {
    local out
    out=$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"$2"s -s "$BENCH_TMP/$1.lua" "$URL")
    if grep -q 'Non-2xx\|Socket errors' <<<"$out"; then
        echo "$out" >&2
        die "errors while loading $URL ($1)"
    fi
    awk '/ requests in / { n = $1 } /^Requests\/sec:/ { r = $2 } END { print r, n }' <<<"$out"
}

CPU_MODEL=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
echo "v2_rest: ${BATCH}x784 FP32 in, ${BATCH}x10 out; wrk -t$THREADS -c$CONNECTIONS, $RUNS runs x ${DURATION}s per form, $(nproc) CPUs ($CPU_MODEL), $(date -u +%FT%TZ)"
KINDS=(json binary)
for k in "${KINDS[@]}"; do
    run_wrk "$k" "$WARMUP" >/dev/null
done
HZ=$(getconf CLK_TCK)
declare -A RESULTS CPUS
for ((r = 1; r <= RUNS; r++)); do
    line="  run $r:"
    for k in "${KINDS[@]}"; do
        t0=$(cpu_ticks "${PID[tfserve]}")
        res=$(run_wrk "$k" "$DURATION")
        t1=$(cpu_ticks "${PID[tfserve]}")
        read -r v n <<<"$res"
        us=$(awk -v d=$((t1 - t0)) -v hz="$HZ" -v n="$n" 'BEGIN { printf "%.0f", d / hz / n * 1e6 }')
        RESULTS[$k]+="$v "
        CPUS[$k]+="$us "
        line+=" $k $v ($us us CPU/req)"
    done
    echo "$line"
done
declare -A MED
for k in "${KINDS[@]}"; do
    MED[$k]=$(tr ' ' '\n' <<<"${RESULTS[$k]}" | grep . | median)
    printf '%-7s median %9.1f req/s, CPU %s us/req\n' "$k" "${MED[$k]}" \
        "$(tr ' ' '\n' <<<"${CPUS[$k]}" | grep . | median)"
done
echo "ratio binary/json = $(ratio "${MED[binary]}" "${MED[json]}") (target >= 1.5)"
