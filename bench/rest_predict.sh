#!/usr/bin/env bash
# REST predict throughput of tfserve against two static baselines, measured in the same run
# (the serving targets): wrk -t2 -c64 POSTing {"instances": [1.0, 2.0, 5.0]} (post.lua) to
#   (a) tfserve serving the demo model half_plus_two, --rest_api_num_threads=2;
#   (b) static_mhd: libmicrohttpd, pool of 2 + epoll, static {"predictions": [2.5, 3.0, 4.5]};
#   (c) nginx (2 workers) returning the same static body.
# Prints req/s medians of RUNS runs of DURATION s (rounds interleave the targets, so machine noise
# hits all three alike) and the ratios tfserve/static_mhd (target >= 0.8) and tfserve/nginx.
# A benchmark, not a test. Env: TFS_BUILD_DIR (default build/), RUNS, DURATION, WARMUP,
# CONNECTIONS (64), THREADS (2), TFSERVE_ARGS (extra tfserve flags). See bench/README.md.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CONNECTIONS=${CONNECTIONS:-64}
THREADS=${THREADS:-2}
EXPECT='{"predictions": [2.5, 3.0, 4.5]}'

need wrk wrk
need nginx nginx-light
need curl curl
require_tfserve
STATIC_MHD=${STATIC_MHD:-$BUILD/bench/static_mhd}
if [[ ! -x $STATIC_MHD ]]; then
    echo "bench: building static_mhd in $BUILD" >&2
    { cmake -S "$ROOT" -B "$BUILD" && cmake --build "$BUILD" --target static_mhd -j2; } >/dev/null || die "cannot build static_mhd in $BUILD"
fi

# (a) tfserve. Its gRPC port must be free too, though this script does not use it.
TFS_PORT=$(free_port)
TFS_GRPC_PORT=$(free_port)
# TFSERVE_ARGS is split into words on purpose.
# shellcheck disable=SC2086
start tfserve "$BENCH_TMP/tfserve.log" "$TFSERVE" --port="$TFS_GRPC_PORT" \
    --rest_api_port="$TFS_PORT" --rest_api_num_threads=2 --model_name=half_plus_two \
    --model_base_path="$MODEL" --verbosity=warn ${TFSERVE_ARGS:-}

# (b) static libmicrohttpd.
MHD_PORT=$(free_port)
start mhd "$BENCH_TMP/static_mhd.log" "$STATIC_MHD" "$MHD_PORT"

# (c) nginx, prefix and config in the temp dir; no access log (tfserve and MHD write none either).
NGINX_PORT=$(free_port)
mkdir -p "$BENCH_TMP/nginx"
cat >"$BENCH_TMP/nginx/nginx.conf" <<CONF
worker_processes 2;
pid $BENCH_TMP/nginx/nginx.pid;
error_log $BENCH_TMP/nginx/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $BENCH_TMP/nginx/body;
    proxy_temp_path $BENCH_TMP/nginx/proxy;
    fastcgi_temp_path $BENCH_TMP/nginx/fastcgi;
    uwsgi_temp_path $BENCH_TMP/nginx/uwsgi;
    scgi_temp_path $BENCH_TMP/nginx/scgi;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$NGINX_PORT;
        location / {
            default_type application/json;
            return 200 '$EXPECT';
        }
    }
}
CONF
start nginx "$BENCH_TMP/nginx/stdout.log" nginx -p "$BENCH_TMP/nginx" -c "$BENCH_TMP/nginx/nginx.conf" -g 'daemon off;'

PATH_PREDICT=/v1/models/half_plus_two:predict
declare -A URL=(
    [tfserve]=http://127.0.0.1:$TFS_PORT$PATH_PREDICT
    [static_mhd]=http://127.0.0.1:$MHD_PORT$PATH_PREDICT
    [nginx]=http://127.0.0.1:$NGINX_PORT$PATH_PREDICT
)
declare -A PIDOF=([tfserve]=${PID[tfserve]} [static_mhd]=${PID[mhd]} [nginx]=${PID[nginx]})
declare -A PORTOF=([tfserve]=$TFS_PORT [static_mhd]=$MHD_PORT [nginx]=$NGINX_PORT)
TARGETS=(tfserve static_mhd nginx)

# Every target must be up and answer the request with the expected predictions before timing.
for t in "${TARGETS[@]}"; do
    wait_port "${PIDOF[$t]}" "${PORTOF[$t]}" || {
        cat "$BENCH_TMP"/*.log "$BENCH_TMP"/nginx/*.log >&2 2>/dev/null || true
        die "$t did not start listening"
    }
    got=$(curl -sS -m 5 -H 'Content-Type: application/json' -d '{"instances": [1.0, 2.0, 5.0]}' "${URL[$t]}") ||
        die "$t: request failed"
    norm=$(printf '%s' "$got" | tr -d ' \n')
    [[ $norm == '{"predictions":[2.5,3.0,4.5]}' || $norm == '{"predictions":[2.5,3,4.5]}' ]] ||
        die "$t answered $got, expected $EXPECT"
done

# run_wrk URL SECONDS: prints "req/s requests"; fails on socket errors or non-2xx answers.
run_wrk() {
    local out
    out=$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"$2"s -s "$BENCH_DIR/post.lua" "$1")
    if grep -q 'Non-2xx\|Socket errors' <<<"$out"; then
        echo "$out" >&2
        die "errors while loading $1"
    fi
    awk '/ requests in / { n = $1 } /^Requests\/sec:/ { r = $2 } END { print r, n }' <<<"$out"
}

echo "rest_predict: wrk -t$THREADS -c$CONNECTIONS, $RUNS runs x ${DURATION}s per target, $(nproc) CPUs, $(date -u +%FT%TZ)"
for t in "${TARGETS[@]}"; do
    run_wrk "${URL[$t]}" "$WARMUP" >/dev/null
done
# CPU per request (utime+stime of the server process; nginx: its master only, so not shown).
HZ=$(getconf CLK_TCK)
declare -A RESULTS CPUS
for ((r = 1; r <= RUNS; r++)); do
    line="  run $r:"
    for t in "${TARGETS[@]}"; do
        t0=$(cpu_ticks "${PIDOF[$t]}")
        res=$(run_wrk "${URL[$t]}" "$DURATION")
        t1=$(cpu_ticks "${PIDOF[$t]}")
        read -r v n <<<"$res"
        us=$(awk -v d=$((t1 - t0)) -v hz="$HZ" -v n="$n" 'BEGIN { printf "%.2f", d / hz / n * 1e6 }')
        RESULTS[$t]+="$v "
        CPUS[$t]+="$us "
        if [[ $t == nginx ]]; then
            line+=" $t $v"
        else
            line+=" $t $v ($us us CPU/req)"
        fi
    done
    echo "$line"
done
declare -A MED CPU
for t in "${TARGETS[@]}"; do
    MED[$t]=$(tr ' ' '\n' <<<"${RESULTS[$t]}" | grep . | median)
    CPU[$t]=$(tr ' ' '\n' <<<"${CPUS[$t]}" | grep . | median)
    if [[ $t == nginx ]]; then
        printf '%-11s median %10.1f req/s\n' "$t" "${MED[$t]}"
    else
        printf '%-11s median %10.1f req/s, CPU %s us/req\n' "$t" "${MED[$t]}" "${CPU[$t]}"
    fi
done
echo "ratio tfserve/static_mhd = $(ratio "${MED[tfserve]}" "${MED[static_mhd]}") (target >= 0.8)"
echo "ratio tfserve/nginx      = $(ratio "${MED[tfserve]}" "${MED[nginx]}")"
