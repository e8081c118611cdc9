#!/usr/bin/env bash
# Dynamic batching with tfserve-perf (bench/perf/): CONCURRENCY REST clients (default 1,4,16,64),
# each sending one row back to back, against three tfserve processes on the same model: one
# without batching ("off"), and two with --enable_batching (BATCH_CONF, default max_batch_size
# MAX_BATCH=64, batch_timeout_micros TIMEOUT_US=2000, num_batch_threads BATCH_THREADS=1), one with
# --batching_scheduler=fixed (TF Serving's behaviour: a batch that is not full waits its timeout)
# and one with the default adaptive scheduler (a free batch thread takes what is queued at once).
# Prints the table (req/s, p50 and p99 per concurrency for the three, the adaptive server's own
# compute and queue times from its X-Tfserve-*-Micros headers), the pre-batched ceiling (the
# unbatched server fed requests that each hold 64 copies of the row, over 2 connections, in rows/s),
# the adaptive/unbatched throughput ratio and the ceiling fraction at the top concurrency, and at
# 1 client the batched p50s against the unbatched one.
# One batch thread by default: each batch already runs on every CPU through the intra-op pool, and
# on 2 CPUs a second batch thread only makes two batches share them (CNN, 64 clients, same minutes:
# 1 thread 4.76k req/s, p99 22.0 ms; 2 threads 4.15-4.43k req/s, p99 27-32 ms; bench/README.md).
# A benchmark, not a test. Env: TFS_BUILD_DIR (build/), MODEL_DIR (a model base path; default the
# demo model half_plus_two), MODEL_NAME, INPUT_JSON (one request body with one instance, default
# one row for half_plus_two), INPUT_NAME (x), CONCURRENCY, WARMUP, DURATION, TIMEOUT_US,
# MAX_BATCH, BATCH_THREADS, BATCH_CONF (a BatchingParameters file instead of the default),
# CEILING=0 to skip the pre-batched run. See bench/README.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CONCURRENCY=${CONCURRENCY:-1,4,16,64}
TIMEOUT_US=${TIMEOUT_US:-2000}
MAX_BATCH=${MAX_BATCH:-64}
BATCH_THREADS=${BATCH_THREADS:-1}
TOP=${CONCURRENCY##*,}
# MODEL_DIR names the model before require_tfserve checks it (no demo model needed for another one).
MODEL=${MODEL_DIR:-${MODEL:-}}
[[ -n $MODEL ]] || unset MODEL
require_tfserve
MODEL_NAME=${MODEL_NAME:-half_plus_two}
INPUT_NAME=${INPUT_NAME:-x}
PERF=${PERF:-$BUILD/bench/tfserve-perf}
[[ -x $PERF ]] || die "no tfserve-perf at $PERF: cmake --build $BUILD --target tfserve-perf"

if [[ -z ${INPUT_JSON:-} ]]; then
    INPUT_JSON=$BENCH_TMP/in.json
    echo '{"instances": [1.0]}' >"$INPUT_JSON"
fi
if [[ -n ${BATCH_CONF:-} ]]; then # the bounds below use the file's timeout
    t=$(tr '\n' ' ' <"$BATCH_CONF" | grep -o 'batch_timeout_micros *{ *value: *[0-9]*' | grep -o '[0-9]*$' || true)
    TIMEOUT_US=${t:-0}
else
    BATCH_CONF=$BENCH_TMP/batching.txt
    printf 'max_batch_size { value: %s }\nbatch_timeout_micros { value: %s }\nnum_batch_threads { value: %s }\nmax_enqueued_batches { value: 1000 }\n' \
        "$MAX_BATCH" "$TIMEOUT_US" "$BATCH_THREADS" >"$BATCH_CONF"
fi

# The pre-batched request: the body's one instance, 64 times.
CEILING=${CEILING:-1}
if [[ $CEILING == 1 ]]; then
    /usr/bin/python3 -c 'import json, sys
d = json.load(open(sys.argv[1])); d["instances"] = d["instances"][:1] * 64
json.dump(d, open(sys.argv[2], "w"))' "$INPUT_JSON" "$BENCH_TMP/in64.json" ||
        die "INPUT_JSON is not a predict body with \"instances\""
fi

MODES=(off fixed adaptive)
declare -A PORT
for mode in "${MODES[@]}"; do
    PORT[$mode]=$(free_port)
    extra=()
    [[ $mode != off ]] && extra=(--enable_batching --batching_parameters_file="$BATCH_CONF"
        --batching_scheduler="$mode")
    start "$mode" "$BENCH_TMP/tfserve-$mode.log" "$TFSERVE" --port=0 --rest_api_port="${PORT[$mode]}" \
        --rest_api_num_threads=2 --model_name="$MODEL_NAME" --model_base_path="$MODEL" \
        --verbosity=warn "${extra[@]}"
    wait_port "${PID[$mode]}" "${PORT[$mode]}" || { cat "$BENCH_TMP/tfserve-$mode.log" >&2; die "tfserve ($mode) did not start"; }
done

echo "batching: $MODEL_NAME, one row per request, ${WARMUP}s warmup + ${DURATION}s per step, $(tr '\n' ' ' <"$BATCH_CONF" | tr -s ' '), $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')), load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"
perf_run() { # NAME PORT BODY CONCURRENCY
    "$PERF" --protocol=rest --port="$2" --model="$MODEL_NAME" --input-json="$3" \
        --input-name="$INPUT_NAME" --concurrency="$4" --warmup="$WARMUP" \
        --duration="$DURATION" --threads=2 --csv="$BENCH_TMP/$1.csv" >"$BENCH_TMP/$1.txt" ||
        { cat "$BENCH_TMP/$1.txt" >&2; die "tfserve-perf failed ($1)"; }
}
for mode in "${MODES[@]}"; do
    perf_run "$mode" "${PORT[$mode]}" "$INPUT_JSON" "$CONCURRENCY"
done
[[ $CEILING == 1 ]] && perf_run ceiling "${PORT[off]}" "$BENCH_TMP/in64.json" 2

# The CSV's columns are named in its header; pick them by name.
col() { head -1 "$1" | tr ',' '\n' | grep -n -x "$2" | cut -d: -f1; }
fields() { # value req/s p99 server_compute_p50 server_compute_p99 server_queue_p50 p50
    local f=$BENCH_TMP/$1.csv
    awk -F, -v v="$(col "$f" value)" -v r="$(col "$f" throughput_rps)" -v p="$(col "$f" p99_us)" \
        -v c5="$(col "$f" server_compute_p50_us)" -v c9="$(col "$f" server_compute_p99_us)" \
        -v q5="$(col "$f" server_queue_p50_us)" -v p5="$(col "$f" p50_us)" \
        'NR > 1 { print $v, $r, $p, ($c5 == "" ? "-" : $c5), ($c9 == "" ? "-" : $c9),
                  ($q5 == "" ? "-" : $q5), $p5 }' "$f"
}
# "compute" is the run of the batch each request was in, as tfserve's X-Tfserve-Compute-Micros
# header says (p50 / p99 over the step's requests); "queue" its wait for that batch.
printf '%-7s %22s %22s %22s %8s %8s %17s %9s\n' clients "off req/s p50/p99 us" \
    "fixed req/s p50/p99" "adaptive req/s p50/p99" "fix/off" "ada/off" "ada compute p50/99" \
    "ada queue"
join <(fields off) <(fields fixed) | join - <(fields adaptive) |
    while read -r c r0 p0 _ _ _ m0 r1 p1 _ _ _ m1 r2 p2 c50 c99 q50 m2; do
        printf '%-7s %22s %22s %22s %8s %8s %17s %9s\n' "$c" "$r0 $m0/$p0" "$r1 $m1/$p1" \
            "$r2 $m2/$p2" "$(ratio "$r1" "$r0")" "$(ratio "$r2" "$r0")" "$c50/$c99" "$q50"
    done
rps() { fields "$1" | awk -v c="$2" '$1 == c { print $2 }'; }
p50() { fields "$1" | awk -v c="$2" '$1 == c { print $7 }'; }
r0=$(rps off "$TOP") r2=$(rps adaptive "$TOP")
echo "at $TOP clients: adaptive/unbatched = $(ratio "$r2" "$r0"), fixed/unbatched = $(ratio "$(rps fixed "$TOP")" "$r0")"
if [[ $CEILING == 1 ]]; then
    ceil=$(fields ceiling | awk '{ printf "%.1f", $2 * 64 }')
    echo "pre-batched ceiling (64 rows per request, 2 connections, unbatched server): $ceil rows/s; adaptive at $TOP clients = $(ratio "$r2" "$ceil") of it"
fi
if [[ ,$CONCURRENCY, == *,1,* ]]; then
    for mode in fixed adaptive; do
        awk -v m="$mode" -v on="$(p50 "$mode" 1)" -v off="$(p50 off 1)" 'BEGIN {
            printf "1 client, %s: batched p50 %.0f us, unbatched %.0f us, added %.0f us\n",
                m, on, off, on - off }'
    done
fi
