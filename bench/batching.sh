#!/usr/bin/env bash
# Dynamic batching with tfserve-perf (bench/perf/): CONCURRENCY REST clients (default 1,4,16,64),
# each sending one row back to back, against three tfserve processes on the same model: one
# without batching ("off"), and two with --enable_batching (BATCH_CONF, default max_batch_size
# MAX_BATCH=64, batch_timeout_micros TIMEOUT_US=2000, num_batch_threads below), one with
# --batching_scheduler=fixed (TF Serving's behaviour: a batch that is not full waits its timeout)
# and one with the default adaptive scheduler (a free batch thread takes what is queued at once).
# Prints the table (req/s, p50 and p99 per concurrency for the three, the adaptive server's own
# compute and queue times from its X-Tfserve-*-Micros headers), the pre-batched ceiling (the
# unbatched server fed requests that each hold 64 copies of the row, over CEILING_CLIENTS=8
# connections, in rows/s: with 2, both could land on one of its 2 REST threads, which then runs
# them one at a time and halves the figure),
# the adaptive/unbatched throughput ratio and the ceiling fraction at the top concurrency, and at
# 1 client the batched p50s against the unbatched one.
# Models: by default the Fashion-MNIST MLP and CNN of examples/fashion_mnist_mlp.ini and
# examples/fashion_mnist_cnn.ini, each exported by tfserve-train after TRAIN_STEPS (20) steps (the
# cost of a run does not depend on the weights), one after the other, each request one image of
# the Fashion-MNIST test set (FMNIST_DIR). MODELS=mlp or MODELS=cnn runs one of them.
# MODEL_DIR=/abs/base/path runs another model instead (MODEL_NAME, INPUT_JSON: one request body
# with one instance, INPUT_NAME).
# Batch threads (BATCH_THREADS): by default 1 for the MLP and other models, 2 for the CNN, the
# better of the two for each on 2 CPUs (64 clients, same minutes, bench/README.md: MLP 11.6k req/s
# with 1, 9.8k with 2; CNN 1.9-2.0k with 1, 2.2-2.4k with 2, whose two batches each run on one
# core rather than one batch on both through the intra-op pool).
# A benchmark, not a test. Env: TFS_BUILD_DIR (build/), MODELS, TRAIN_STEPS, FMNIST_DIR, MODEL_DIR,
# MODEL_NAME, INPUT_JSON, INPUT_NAME (x), CONCURRENCY, WARMUP, DURATION, TIMEOUT_US, MAX_BATCH,
# BATCH_THREADS, BATCH_CONF (a BatchingParameters file instead of the default), CEILING=0 to skip
# the pre-batched run, CEILING_CLIENTS. See bench/README.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CONCURRENCY=${CONCURRENCY:-1,4,16,64}
TIMEOUT_US=${TIMEOUT_US:-2000}
MAX_BATCH=${MAX_BATCH:-64}
TOP=${CONCURRENCY##*,}
MODELS=${MODELS:-mlp,cnn}
TRAIN_STEPS=${TRAIN_STEPS:-20}
FMNIST_DIR=${FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
CEILING=${CEILING:-1}
CEILING_CLIENTS=${CEILING_CLIENTS:-8}
TFSERVE=${TFSERVE:-$BUILD/server/tfserve}
TRAIN=${TRAIN:-$BUILD/train/tfserve-train}
PERF=${PERF:-$BUILD/bench/tfserve-perf}
[[ -x $TFSERVE ]] || die "no tfserve at $TFSERVE: cmake --build $BUILD --target tfserve"
[[ -x $PERF ]] || die "no tfserve-perf at $PERF: cmake --build $BUILD --target tfserve-perf"

# batch_conf NAME: the BatchingParameters file for model NAME (BATCH_CONF when given).
batch_conf() {
    if [[ -n ${BATCH_CONF:-} ]]; then
        echo "$BATCH_CONF"
        return
    fi
    local threads=${BATCH_THREADS:-1}
    [[ -z ${BATCH_THREADS:-} && $1 == cnn && -z ${MODEL_DIR:-} ]] && threads=2
    printf 'max_batch_size { value: %s }\nbatch_timeout_micros { value: %s }\nnum_batch_threads { value: %s }\nmax_enqueued_batches { value: 1000 }\n' \
        "$MAX_BATCH" "$TIMEOUT_US" "$threads" >"$BENCH_TMP/batching-$1.txt"
    echo "$BENCH_TMP/batching-$1.txt"
}

# export_model NAME: trains examples/fashion_mnist_NAME.ini for TRAIN_STEPS steps into
# $BENCH_TMP/NAME/export, and writes the first test image as a predict body ($BENCH_TMP/NAME/row.json,
# shaped as the model's input: 784 values for the MLP, 28x28x1 for the CNN).
export_model() {
    local name=$1 dir=$BENCH_TMP/$1
    [[ -x $TRAIN ]] || die "no tfserve-train at $TRAIN: cmake --build $BUILD --target tfserve-train"
    [[ -f $FMNIST_DIR/t10k-images-idx3-ubyte.gz ]] ||
        die "no Fashion-MNIST test set in $FMNIST_DIR (scripts/setup.sh installs dataset-fashion-mnist)"
    mkdir -p "$dir"
    "$TRAIN" "$ROOT/examples/fashion_mnist_$name.ini" --max_steps="$TRAIN_STEPS" \
        --export_dir="$dir/export" --checkpoint_dir="$dir/ckpt" --log_dir="$dir/logs" \
        >"$dir/train.log" 2>&1 || { cat "$dir/train.log" >&2; die "tfserve-train failed ($name)"; }
    /usr/bin/python3 - "$FMNIST_DIR/t10k-images-idx3-ubyte.gz" "$name" "$dir/row.json" <<'PY'
import gzip, json, sys
px = [b / 255 for b in gzip.open(sys.argv[1]).read()[16:16 + 784]]
row = px if sys.argv[2] == "mlp" else [[[v] for v in px[r * 28:(r + 1) * 28]] for r in range(28)]
json.dump({"instances": [row]}, open(sys.argv[3], "w"))
PY
}

# bench_model NAME BASE_PATH INPUT_JSON INPUT_NAME: the three servers, the sweeps and the table.
bench_model() {
    local name=$1 model=$2 input=$3 input_name=$4 out=$BENCH_TMP/$1 mode extra conf
    conf=$(batch_conf "$name")
    mkdir -p "$out"
    # The pre-batched request: the body's one instance, 64 times.
    if [[ $CEILING == 1 ]]; then
        /usr/bin/python3 -c 'import json, sys
d = json.load(open(sys.argv[1])); d["instances"] = d["instances"][:1] * 64
json.dump(d, open(sys.argv[2], "w"))' "$input" "$out/in64.json" ||
            die "INPUT_JSON is not a predict body with \"instances\""
    fi
    local modes=(off fixed adaptive)
    local -A port
    for mode in "${modes[@]}"; do
        port[$mode]=$(free_port)
        extra=()
        [[ $mode != off ]] && extra=(--enable_batching --batching_parameters_file="$conf"
            --batching_scheduler="$mode")
        start "$name-$mode" "$out/tfserve-$mode.log" "$TFSERVE" --port=0 \
            --rest_api_port="${port[$mode]}" --rest_api_num_threads=2 --model_name="$name" \
            --model_base_path="$model" --verbosity=warn "${extra[@]}"
        wait_port "${PID[$name-$mode]}" "${port[$mode]}" ||
            { cat "$out/tfserve-$mode.log" >&2; die "tfserve ($name, $mode) did not start"; }
    done

    echo "=== batching: $name, one row per request, ${WARMUP}s warmup + ${DURATION}s per step, $(tr '\n' ' ' <"$conf" | tr -s ' '), $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ') model $(grep -m1 '^model[[:space:]]*:' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')), load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"
    perf_run() { # NAME PORT BODY CONCURRENCY
        "$PERF" --protocol=rest --port="$2" --model="$name" --input-json="$3" \
            --input-name="$input_name" --concurrency="$4" --warmup="$WARMUP" \
            --duration="$DURATION" --threads=2 --csv="$out/$1.csv" >"$out/$1.txt" ||
            { cat "$out/$1.txt" >&2; die "tfserve-perf failed ($name, $1)"; }
    }
    for mode in "${modes[@]}"; do
        perf_run "$mode" "${port[$mode]}" "$input" "$CONCURRENCY"
    done
    [[ $CEILING == 1 ]] && perf_run ceiling "${port[off]}" "$out/in64.json" "$CEILING_CLIENTS"
    for mode in "${modes[@]}"; do # each model's servers stop before the next model's start
        kill "${PID[$name-$mode]}" 2>/dev/null || true
        wait "${PID[$name-$mode]}" 2>/dev/null || true
    done

    # The CSV's columns are named in its header; pick them by name.
    col() { head -1 "$1" | tr ',' '\n' | grep -n -x "$2" | cut -d: -f1; }
    fields() { # value req/s p99 server_compute_p50 server_compute_p99 server_queue_p50 p50
        local f=$out/$1.csv
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
    local r0 r2 ceil
    r0=$(rps off "$TOP") r2=$(rps adaptive "$TOP")
    echo "at $TOP clients: adaptive/unbatched = $(ratio "$r2" "$r0"), fixed/unbatched = $(ratio "$(rps fixed "$TOP")" "$r0")"
    if [[ $CEILING == 1 ]]; then
        ceil=$(fields ceiling | awk '{ printf "%.1f", $2 * 64 }')
        echo "pre-batched ceiling (64 rows per request, $CEILING_CLIENTS connections, unbatched server): $ceil rows/s = $(ratio "$ceil" "$r0")x unbatched at $TOP clients; adaptive at $TOP clients = $(ratio "$r2" "$ceil") of it"
    fi
    if [[ ,$CONCURRENCY, == *,1,* ]]; then
        for mode in fixed adaptive; do
            awk -v m="$mode" -v on="$(p50 "$mode" 1)" -v off="$(p50 off 1)" 'BEGIN {
                printf "1 client, %s: batched p50 %.0f us, unbatched %.0f us, added %.0f us\n",
                    m, on, off, on - off }'
        done
    fi
}

if [[ -n ${MODEL_DIR:-} ]]; then
    [[ -d $MODEL_DIR ]] || die "no model base path at $MODEL_DIR"
    if [[ -z ${INPUT_JSON:-} ]]; then # half_plus_two's one row
        INPUT_JSON=$BENCH_TMP/in.json
        echo '{"instances": [1.0]}' >"$INPUT_JSON"
    fi
    bench_model "${MODEL_NAME:-model}" "$MODEL_DIR" "$INPUT_JSON" "${INPUT_NAME:-x}"
else
    for name in ${MODELS//,/ }; do
        [[ -f $ROOT/examples/fashion_mnist_$name.ini ]] || die "MODELS: no examples/fashion_mnist_$name.ini"
        export_model "$name"
        bench_model "$name" "$BENCH_TMP/$name/export" "$BENCH_TMP/$name/row.json" x
    done
fi
