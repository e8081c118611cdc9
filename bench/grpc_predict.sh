#!/usr/bin/env bash
# gRPC Predict throughput of tfserve on the demo model half_plus_two (target: >= 40k
# calls/s on the 2-core machine), with h2load (nghttp2-client) holding 64 concurrent streams
# (-c 4 connections x -m 16 streams). The body is one gRPC-framed PredictRequest (grpc_request.py,
# stubs generated from proto/ with protoc into a temp dir); one call is checked with nghttp for
# grpc-status 0 and the right outputs before timing, and again after. Prints calls/s medians of
# RUNS runs of DURATION s, and tfserve's CPU seconds per call from /proc/PID/stat (utime+stime of
# all its threads, before/after each run). In the same run and the same way it loads grpc_echo
# (bench/grpc_echo.c: a trivial gRPC C-core server echoing the request, the transport's ceiling)
# and prints tfserve/grpc_echo. A benchmark, not a test. Env: TFS_BUILD_DIR (default build/), RUNS,
# DURATION, WARMUP, CLIENTS (4), STREAMS (16), H2LOAD_THREADS (2), ECHO_CQ_THREADS (2, as
# tfserve's default), TFSERVE_ARGS (extra tfserve flags, e.g. more CQ threads). See README.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CLIENTS=${CLIENTS:-4}
STREAMS=${STREAMS:-16}
H2LOAD_THREADS=${H2LOAD_THREADS:-2}
ECHO_CQ_THREADS=${ECHO_CQ_THREADS:-2}
METHOD=/tensorflow.serving.PredictionService/Predict

need h2load nghttp2-client
need nghttp nghttp2-client
need protoc protobuf-compiler
require_tfserve
GRPC_ECHO=${GRPC_ECHO:-$BUILD/bench/grpc_echo}
if [[ ! -x $GRPC_ECHO ]]; then
    echo "bench: building grpc_echo in $BUILD" >&2
    { cmake -S "$ROOT" -B "$BUILD" && cmake --build "$BUILD" --target grpc_echo -j2; } >/dev/null ||
        die "cannot build grpc_echo in $BUILD"
fi

# The request body, from the project's own .proto files.
mkdir -p "$BENCH_TMP/py"
(cd "$ROOT/proto" && find . -name '*.proto' | sed 's|^\./||' | xargs protoc -I . --python_out="$BENCH_TMP/py") ||
    die "protoc failed on $ROOT/proto"
PYTHONPATH=$BENCH_TMP/py /usr/bin/python3 "$BENCH_DIR/grpc_request.py" write "$BENCH_TMP/req.bin"

GRPC_PORT=$(free_port)
REST_PORT=$(free_port)
# TFSERVE_ARGS is split into words on purpose.
# shellcheck disable=SC2086
start tfserve "$BENCH_TMP/tfserve.log" "$TFSERVE" --port="$GRPC_PORT" --rest_api_port="$REST_PORT" \
    --rest_api_num_threads=2 --model_name=half_plus_two --model_base_path="$MODEL" --verbosity=warn ${TFSERVE_ARGS:-}
wait_port "${PID[tfserve]}" "$GRPC_PORT" || {
    cat "$BENCH_TMP/tfserve.log" >&2
    die "tfserve did not start listening on $GRPC_PORT"
}
ECHO_PORT=$(free_port)
start echo "$BENCH_TMP/grpc_echo.log" "$GRPC_ECHO" "$ECHO_PORT" "$ECHO_CQ_THREADS" "$METHOD"
wait_port "${PID[echo]}" "$ECHO_PORT" || {
    cat "$BENCH_TMP/grpc_echo.log" >&2
    die "grpc_echo did not start listening on $ECHO_PORT"
}
declare -A URL=([tfserve]=http://127.0.0.1:$GRPC_PORT$METHOD [grpc_echo]=http://127.0.0.1:$ECHO_PORT$METHOD)
declare -A PIDOF=([tfserve]=${PID[tfserve]} [grpc_echo]=${PID[echo]})
TARGETS=(tfserve grpc_echo)
HDRS=(-H 'content-type: application/grpc' -H 'te: trailers')

# check_call URL [echo]: one Predict with the same body: grpc-status 0 and outputs
# y = [2.5, 3, 4.5] (from the echo server: the request itself, byte for byte).
check_call() {
    local i url=$1
    # The server can take a moment after listen() before the model is available.
    for ((i = 0; i < 50; i++)); do
        nghttp -v "${HDRS[@]}" -d "$BENCH_TMP/req.bin" "$url" >"$BENCH_TMP/check.log" 2>&1 || true
        grep -q 'grpc-status: 0' "$BENCH_TMP/check.log" && break
        sleep 0.2
    done
    grep -q 'grpc-status: 0' "$BENCH_TMP/check.log" || {
        cat "$BENCH_TMP/check.log" >&2
        die "Predict did not answer grpc-status 0"
    }
    nghttp "${HDRS[@]}" -d "$BENCH_TMP/req.bin" "$url" >"$BENCH_TMP/resp.bin" || die "nghttp failed"
    if [[ ${2:-} == echo ]]; then
        cmp -s "$BENCH_TMP/req.bin" "$BENCH_TMP/resp.bin" || die "grpc_echo did not echo the request"
    else
        PYTHONPATH=$BENCH_TMP/py /usr/bin/python3 "$BENCH_DIR/grpc_request.py" check "$BENCH_TMP/resp.bin"
    fi
}
check_call "${URL[tfserve]}"
check_call "${URL[grpc_echo]}" echo

# run_h2load URL SECONDS: prints "calls/s succeeded"; fails if any call failed or errored.
run_h2load() {
    local out
    out=$(h2load -t "$H2LOAD_THREADS" -c "$CLIENTS" -m "$STREAMS" -D "$2" "${HDRS[@]}" \
        -d "$BENCH_TMP/req.bin" "$1")
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
echo "grpc_predict: h2load -t$H2LOAD_THREADS -c$CLIENTS -m$STREAMS ($((CLIENTS * STREAMS)) streams), $RUNS runs x ${DURATION}s per target, grpc_echo $ECHO_CQ_THREADS CQ thread(s), $(nproc) CPUs, $(date -u +%FT%TZ)"
for t in "${TARGETS[@]}"; do
    run_h2load "${URL[$t]}" "$WARMUP" >/dev/null
done
declare -A RATES CPUS
for ((r = 1; r <= RUNS; r++)); do
    line="  run $r:"
    for t in "${TARGETS[@]}"; do
        t0=$(cpu_ticks "${PIDOF[$t]}")
        res=$(run_h2load "${URL[$t]}" "$DURATION")
        read -r rate ok <<<"$res"
        t1=$(cpu_ticks "${PIDOF[$t]}")
        us=$(awk -v d=$((t1 - t0)) -v hz="$HZ" -v n="$ok" 'BEGIN { printf "%.2f", d / hz / n * 1e6 }')
        RATES[$t]+="$rate "
        CPUS[$t]+="$us "
        line+=" $t $rate calls/s ($us us CPU/call)"
    done
    echo "$line"
done
check_call "${URL[tfserve]}" # still serving right after the load
declare -A MED CPU
for t in "${TARGETS[@]}"; do
    MED[$t]=$(tr ' ' '\n' <<<"${RATES[$t]}" | grep . | median)
    CPU[$t]=$(tr ' ' '\n' <<<"${CPUS[$t]}" | grep . | median)
    printf '%-9s median %9.1f calls/s, CPU %s us/call (%s CPU s/call)\n' "$t" "${MED[$t]}" \
        "${CPU[$t]}" "$(awk -v u="${CPU[$t]}" 'BEGIN { printf "%.2e", u / 1e6 }')"
done
echo "ratio tfserve/40000 target     = $(ratio "${MED[tfserve]}" 40000) (target >= 1)"
echo "ratio tfserve/grpc_echo calls  = $(ratio "${MED[tfserve]}" "${MED[grpc_echo]}")"
echo "ratio tfserve/grpc_echo CPU    = $(ratio "${CPU[tfserve]}" "${CPU[grpc_echo]}") (CPU per call)"
