#!/usr/bin/env bash
# KServe v2 ModelInfer against TF Serving's Predict on one tfserve, over gRPC, on the demo model
# half_plus_two (target: v2 typed / v1 >= 0.9). h2load (nghttp2-client) holds 64 concurrent
# streams (-c 4 connections x -m 16 streams) with one gRPC-framed body per target
# (grpc_request.py, stubs generated from proto/ with protoc into a temp dir): v1 Predict
# (float_val), v2 ModelInfer with fp32_contents and with raw_input_contents. Each body is checked
# once with nghttp for grpc-status 0 and the right outputs before timing and again after. The
# targets take turns within each run, so drift on a shared machine hits them alike. Prints each
# target's calls/s median of RUNS runs of DURATION s, tfserve's CPU microseconds per call from
# /proc/PID/stat, and the ratios of the medians to v1. A benchmark, not a test. Env: TFS_BUILD_DIR
# (default build/), RUNS, DURATION, WARMUP, CLIENTS (4), STREAMS (16), H2LOAD_THREADS (2),
# TFSERVE_ARGS (extra tfserve flags). See README.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CLIENTS=${CLIENTS:-4}
STREAMS=${STREAMS:-16}
H2LOAD_THREADS=${H2LOAD_THREADS:-2}

need h2load nghttp2-client
need nghttp nghttp2-client
need protoc protobuf-compiler
require_tfserve

# The request bodies, from the project's own .proto files.
mkdir -p "$BENCH_TMP/py"
(cd "$ROOT/proto" && find . -name '*.proto' | sed 's|^\./||' | xargs protoc -I . --python_out="$BENCH_TMP/py") ||
    die "protoc failed on $ROOT/proto"
req() { PYTHONPATH=$BENCH_TMP/py /usr/bin/python3 "$BENCH_DIR/grpc_request.py" "$@"; }
req write "$BENCH_TMP/v1.bin"
req write-v2 "$BENCH_TMP/v2_typed.bin" typed
req write-v2 "$BENCH_TMP/v2_raw.bin" raw

GRPC_PORT=$(free_port)
# TFSERVE_ARGS is split into words on purpose.
# shellcheck disable=SC2086
start tfserve "$BENCH_TMP/tfserve.log" "$TFSERVE" --port="$GRPC_PORT" \
    --model_name=half_plus_two --model_base_path="$MODEL" --verbosity=warn ${TFSERVE_ARGS:-}
wait_port "${PID[tfserve]}" "$GRPC_PORT" || {
    cat "$BENCH_TMP/tfserve.log" >&2
    die "tfserve did not start listening on $GRPC_PORT"
}
BASE=http://127.0.0.1:$GRPC_PORT
declare -A URL=([v1]=$BASE/tensorflow.serving.PredictionService/Predict
    [v2_typed]=$BASE/inference.GRPCInferenceService/ModelInfer
    [v2_raw]=$BASE/inference.GRPCInferenceService/ModelInfer)
declare -A CHECK=([v1]=check [v2_typed]=check-v2 [v2_raw]=check-v2)
TARGETS=(v1 v2_typed v2_raw)
HDRS=(-H 'content-type: application/grpc' -H 'te: trailers')

# check_call TARGET: one call with the target's body: grpc-status 0 and outputs y = [2.5, 3, 4.5].
check_call() {
    local i t=$1
    # The server can take a moment after listen() before the model is available.
    for ((i = 0; i < 50; i++)); do
        nghttp -v "${HDRS[@]}" -d "$BENCH_TMP/$t.bin" "${URL[$t]}" >"$BENCH_TMP/check.log" 2>&1 || true
        grep -q 'grpc-status: 0' "$BENCH_TMP/check.log" && break
        sleep 0.2
    done
    grep -q 'grpc-status: 0' "$BENCH_TMP/check.log" || {
        cat "$BENCH_TMP/check.log" >&2
        die "$t did not answer grpc-status 0"
    }
    nghttp "${HDRS[@]}" -d "$BENCH_TMP/$t.bin" "${URL[$t]}" >"$BENCH_TMP/resp.bin" || die "nghttp failed"
    req "${CHECK[$t]}" "$BENCH_TMP/resp.bin"
}
for t in "${TARGETS[@]}"; do
    check_call "$t"
done

# run_h2load TARGET SECONDS: prints "calls/s succeeded"; fails if any call failed or errored.
run_h2load() {
    local out
    out=$(h2load -t "$H2LOAD_THREADS" -c "$CLIENTS" -m "$STREAMS" -D "$2" "${HDRS[@]}" \
        -d "$BENCH_TMP/$1.bin" "${URL[$1]}")
    local ok bad
    ok=$(awk '/^requests:/ { print $8 }' <<<"$out")
    bad=$(awk '/^requests:/ { print $10 + $12 + $14 }' <<<"$out")
    if [[ -z $ok || $bad != 0 ]]; then
        echo "$out" >&2
        die "h2load: failed, errored or timed-out calls"
    fi
    awk -v ok="$ok" '/^finished in/ { gsub(",", "", $4); print $4, ok }' <<<"$out"
}

HZ=$(getconf CLK_TCK)
CPU_MODEL=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
echo "v2_grpc: h2load -t$H2LOAD_THREADS -c$CLIENTS -m$STREAMS ($((CLIENTS * STREAMS)) streams), $RUNS runs x ${DURATION}s per target, $(nproc) CPUs ($CPU_MODEL), $(date -u +%FT%TZ)"
for t in "${TARGETS[@]}"; do
    run_h2load "$t" "$WARMUP" >/dev/null
done
declare -A RATES CPUS
for ((r = 1; r <= RUNS; r++)); do
    line="  run $r:"
    for t in "${TARGETS[@]}"; do
        t0=$(cpu_ticks "${PID[tfserve]}")
        res=$(run_h2load "$t" "$DURATION")
        read -r rate ok <<<"$res"
        t1=$(cpu_ticks "${PID[tfserve]}")
        us=$(awk -v d=$((t1 - t0)) -v hz="$HZ" -v n="$ok" 'BEGIN { printf "%.2f", d / hz / n * 1e6 }')
        RATES[$t]+="$rate "
        CPUS[$t]+="$us "
        line+=" $t $rate calls/s ($us us CPU/call)"
    done
    echo "$line"
done
for t in "${TARGETS[@]}"; do
    check_call "$t" # still serving right after the load
done
declare -A MED CPU
for t in "${TARGETS[@]}"; do
    MED[$t]=$(tr ' ' '\n' <<<"${RATES[$t]}" | grep . | median)
    CPU[$t]=$(tr ' ' '\n' <<<"${CPUS[$t]}" | grep . | median)
    printf '%-9s median %9.1f calls/s, CPU %s us/call\n' "$t" "${MED[$t]}" "${CPU[$t]}"
done
echo "ratio v2_typed/v1 calls = $(ratio "${MED[v2_typed]}" "${MED[v1]}") (target >= 0.9)"
echo "ratio v2_raw/v1 calls   = $(ratio "${MED[v2_raw]}" "${MED[v1]}")"
echo "ratio v2_typed/v1 CPU   = $(ratio "${CPU[v2_typed]}" "${CPU[v1]}") (CPU per call)"
