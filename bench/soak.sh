#!/usr/bin/env bash
# Soak test of tfserve under ASan+UBSan (not run by CI; see README.md): bench/soak.sh [SECONDS]
# (default 600). Builds or reuses the sanitized build (TFS_BUILD_DIR, default build-asan; a plain
# build is accepted for an RSS figure free of ASan's own memory), serves the demo model and a
# second model "swap" whose version is replaced every SWAP_EVERY s (20; the demo copied in as N+1,
# N removed) from a config file with --file_system_poll_wait_seconds=1, and drives a mixed load of
# good and hostile requests on REST and gRPC (soak_driver.py, THREADS threads, 8) for SECONDS.
# tfserve's VmRSS, threads and open fds are sampled every 5 s into rss.csv. At the end: SIGTERM,
# wait for the exit, then report crashes (exit status, ASan/UBSan reports), leaks (LSan), RSS
# growth (medians: 20-40 % of the load against its last 20 %; target < 5 %), and the good
# requests that failed or took over 1 s. Exit 0 only when all of these are clean. Everything goes
# to SOAK_DIR (default out/soak-DATE), which is kept.
set -euo pipefail
: "${TFS_BUILD_DIR:=build-asan}"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DURATION_S=${1:-600}
[[ $DURATION_S =~ ^[0-9]+$ && $DURATION_S -ge 20 ]] || die "usage: bench/soak.sh [SECONDS >= 20]"
THREADS=${THREADS:-8}
SWAP_EVERY=${SWAP_EVERY:-20}
SAMPLE_EVERY=5
RUN=${SOAK_DIR:-$ROOT/out/soak-$(date -u +%Y%m%d-%H%M%S)}
[[ $RUN = /* ]] || RUN=$ROOT/$RUN

need protoc protobuf-compiler
/usr/bin/python3 -c 'import grpc' 2>/dev/null ||
    die "needs Debian's python3-grpcio for /usr/bin/python3"

# The sanitized build: configured once, then brought up to date (tfserve and the demo model only).
if [[ ! -f $BUILD/CMakeCache.txt ]]; then
    echo "soak: configuring $BUILD (Debug, ASan+UBSan)" >&2
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Debug -DTFS_WERROR=ON \
        -DTFS_SANITIZE="address;undefined" >/dev/null || die "cannot configure $BUILD"
fi
# A build without ASan (TFS_BUILD_DIR=build) measures the RSS without ASan's own memory (its stack
# depot and quarantine grow with the load); crashes are then seen by the exit status only, and
# leaks not at all.
SANITIZED=yes
grep -q '^TFS_SANITIZE:STRING=.*address' "$BUILD/CMakeCache.txt" || SANITIZED=no
[[ $SANITIZED = yes ]] ||
    echo "soak: $BUILD is not an ASan build: RSS and crashes only, leaks are not checked" >&2
echo "soak: building tfserve and demo-model in $BUILD" >&2
cmake --build "$BUILD" -j2 --target tfserve demo-model >/dev/null || die "cannot build $BUILD"
require_tfserve

mkdir -p "$RUN/stage" "$RUN/models/swap"
cp -r "$MODEL/1" "$RUN/models/swap/1"
cat >"$RUN/models.config" <<EOF
model_config_list {
  config { name: 'half_plus_two' base_path: '$MODEL' model_platform: 'tensorflow' }
  config { name: 'swap' base_path: '$RUN/models/swap' model_platform: 'tensorflow' }
}
EOF
GRPC_PORT=$(free_port)
REST_PORT=$(free_port)

# A small quarantine: ASan's default (256 MiB) fills over minutes at this load and would read as
# RSS growth; 16 MiB still catches a use after a recent free. The exit stats give the size of
# ASan's stack depot (every distinct allocation stack, never freed), which is part of the RSS.
ASAN="detect_leaks=1:log_path=$RUN/asan:quarantine_size_mb=16:print_summary=1:atexit=1"
ASAN+=":print_stats=1"
[[ -z ${SOAK_ASAN_OPTIONS:-} ]] || ASAN+=":$SOAK_ASAN_OPTIONS"
UBSAN="print_stacktrace=1:log_path=$RUN/asan"
start tfserve "$RUN/tfserve.log" env ASAN_OPTIONS="$ASAN" UBSAN_OPTIONS="$UBSAN" "$TFSERVE" \
    --port="$GRPC_PORT" --rest_api_port="$REST_PORT" --model_config_file="$RUN/models.config" \
    --file_system_poll_wait_seconds=1
TFS_PID=${PID[tfserve]}
for ((i = 0; i < 1200; i++)); do # up to 2 min: the sanitized start is slow on a busy machine
    kill -0 "$TFS_PID" 2>/dev/null || break
    (exec 3<>"/dev/tcp/127.0.0.1/$GRPC_PORT") 2>/dev/null && break
    sleep 0.1
done
if ! kill -0 "$TFS_PID" 2>/dev/null; then
    tail -20 "$RUN/tfserve.log" >&2
    die "tfserve exited at start"
fi
echo "soak: tfserve pid $TFS_PID, gRPC :$GRPC_PORT, REST :$REST_PORT, run folder $RUN" >&2

sample() { # one rss.csv line: epoch s, VmRSS kB, threads, open fds
    local rss thr fds
    rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$TFS_PID/status" 2>/dev/null) || return 0
    thr=$(awk '/^Threads:/ { print $2 }' "/proc/$TFS_PID/status" 2>/dev/null) || return 0
    fds=$(find "/proc/$TFS_PID/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
    [[ -n $rss ]] && echo "$(date +%s),$rss,$thr,$fds" >>"$RUN/rss.csv"
    return 0
}
sampler() {
    while kill -0 "$TFS_PID" 2>/dev/null; do
        sample
        sleep "$SAMPLE_EVERY"
    done
}
swapper() { # version N+1 appears whole (a rename), then N goes
    local n=1
    while sleep "$SWAP_EVERY"; do
        cp -r "$MODEL/1" "$RUN/stage/$((n + 1))"
        mv "$RUN/stage/$((n + 1))" "$RUN/models/swap/$((n + 1))"
        rm -rf "$RUN/models/swap/$n"
        n=$((n + 1))
        echo "$(date +%s) version $n" >>"$RUN/swaps.log"
    done
}
echo "epoch_s,vmrss_kb,threads,fds" >"$RUN/rss.csv"
sampler &
SAMPLER_PID=$!
BENCH_PIDS+=("$SAMPLER_PID")
swapper &
SWAPPER_PID=$!
BENCH_PIDS+=("$SWAPPER_PID")

echo "soak: driving load for $DURATION_S s ($THREADS threads)" >&2
DRIVER_RC=0
/usr/bin/python3 "$BENCH_DIR/soak_driver.py" --source "$ROOT" --grpc-port "$GRPC_PORT" \
    --rest-port "$REST_PORT" --model half_plus_two --swap-model swap --seconds "$DURATION_S" \
    --threads "$THREADS" --pid "$TFS_PID" --out "$RUN/driver.json" \
    --started-file "$RUN/load-started" | tee "$RUN/driver.txt" || DRIVER_RC=$?

sample
END_KB=$(tail -1 "$RUN/rss.csv" | cut -d, -f2)
kill "$SAMPLER_PID" "$SWAPPER_PID" 2>/dev/null || true
wait "$SAMPLER_PID" "$SWAPPER_PID" 2>/dev/null || true

# SIGTERM, and the exit (LeakSanitizer runs at exit: give it time).
ALIVE_AT_END=yes
kill -0 "$TFS_PID" 2>/dev/null || ALIVE_AT_END=no
kill -TERM "$TFS_PID" 2>/dev/null || true
T_TERM=$(date +%s.%N)
for ((i = 0; i < 1200; i++)); do
    kill -0 "$TFS_PID" 2>/dev/null || break
    sleep 0.1
done
if kill -0 "$TFS_PID" 2>/dev/null; then
    EXIT="hung"
    kill -KILL "$TFS_PID" 2>/dev/null || true
    wait "$TFS_PID" 2>/dev/null || true
else
    EXIT=0
    wait "$TFS_PID" || EXIT=$?
fi
STOP_S=$(awk -v a="$T_TERM" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
EXIT_TEXT="$EXIT after SIGTERM (${STOP_S} s)"
[[ $ALIVE_AT_END = yes ]] || EXIT_TEXT="$EXIT (died during the load)"

# Sanitizer reports: ASan/UBSan errors are crashes, LSan reports leaks.
SAN_ERROR='ERROR: (AddressSanitizer|UndefinedBehaviorSanitizer)|runtime error:'
shopt -s nullglob
REPORTS=("$RUN"/asan.*)
CRASH_REPORTS=0
LEAK_REPORTS=0
if ((${#REPORTS[@]})); then
    CRASH_REPORTS=$(cat "${REPORTS[@]}" | grep -c -E "$SAN_ERROR" || true)
    LEAK_REPORTS=$(cat "${REPORTS[@]}" | grep -c -E '^(Direct|Indirect) leak of' || true)
fi
LOG_CRASH=$(grep -c -E "$SAN_ERROR" "$RUN/tfserve.log" || true)
CRASH_REPORTS=$((CRASH_REPORTS + LOG_CRASH))
# A leak alone also makes the exit status non-zero (LSan's exitcode): only then is it no crash.
CRASHED=no
[[ $ALIVE_AT_END = no || $EXIT = hung || $CRASH_REPORTS -gt 0 ]] && CRASHED=yes
[[ $EXIT != hung && $EXIT -ne 0 && ($EXIT -ge 128 || $LEAK_REPORTS -eq 0) ]] && CRASHED=yes
LEAKED=no
((LEAK_REPORTS > 0)) && LEAKED=yes

# RSS: a sample catches whatever requests are in flight then (a 100000-deep JSON body parsed, a
# huge shape refused), so single samples swing by a fifth under this load. The growth compares
# medians: the samples from 20 % to 40 % of the load (after warm-up) against the last 20 %.
START=$(cat "$RUN/load-started" 2>/dev/null || head -2 "$RUN/rss.csv" | tail -1 | cut -d, -f1)
WARM_AT=$(awk -v s="$START" -v d="$DURATION_S" 'BEGIN { printf "%d", s + 0.2 * d }')
window_median() { # median VmRSS kB of the samples with epoch in [from, to)
    awk -F, -v a="$1" -v b="$2" 'NR > 1 && $1 >= a && $1 < b { print $2 }' "$RUN/rss.csv" |
        sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'
}
WARM_KB=$(window_median "$WARM_AT" "$(awk -v s="$START" -v d="$DURATION_S" \
    'BEGIN { printf "%d", s + 0.4 * d }')")
LAST_KB=$(window_median "$(awk -v s="$START" -v d="$DURATION_S" 'BEGIN { printf "%d", s + 0.8 * d }')" \
    99999999999)
[[ -n $WARM_KB ]] || WARM_KB=$END_KB
[[ -n $LAST_KB ]] || LAST_KB=$END_KB
GROWTH=$(awk -v a="$WARM_KB" -v b="$LAST_KB" 'BEGIN { printf "%.2f", a ? 100 * (b - a) / a : 0 }')
RSS_OK=$(awk -v g="$GROWTH" 'BEGIN { print (g < 5) ? "yes" : "no" }')
read -r FIRST_FDS FIRST_THR < <(awk -F, -v w="$WARM_AT" 'NR > 1 && $1 >= w { print $4, $3; exit }' \
    "$RUN/rss.csv") || true
read -r LAST_FDS LAST_THR < <(tail -1 "$RUN/rss.csv" | awk -F, '{ print $4, $3 }') || true

read -r REQS GOOD VIOL WORST WORST_AT P99 UNEXP < <(/usr/bin/python3 -c '
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    print("0 0 -1 nan nan nan 0"); sys.exit()
g = d["good"]
print(d["requests"], g["requests"], g["violations"], g["worst_latency_s"], g["worst_at_s"],
      g["latency_p99_s"], sum(c["unexpected"] for c in d["classes"].values()))' \
    "$RUN/driver.json") || true
SWAPS=$(wc -l <"$RUN/swaps.log" 2>/dev/null || echo 0)
DEPOT=none
((${#REPORTS[@]})) && DEPOT=$(cat "${REPORTS[@]}" |
    sed -n 's/^Stats: StackDepot: \([0-9]*\) ids; \([0-9]*M\) allocated.*/\1 stacks, \2/p' |
    tail -1)

echo
CPU=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
echo "soak summary ($DURATION_S s, $CPU, $(nproc) CPUs)"
printf '%-28s %s\n' \
    "requests (all classes)" "$REQS" \
    "version swaps" "$SWAPS" \
    "tfserve exit" "$EXIT_TEXT" \
    "crashes" "$CRASHED (ASan/UBSan reports: $CRASH_REPORTS, alive at end: $ALIVE_AT_END)" \
    "leaks" "$LEAKED (LSan leak records: $LEAK_REPORTS; sanitized build: $SANITIZED)" \
    "RSS median 20-40% / last 20%" "$WARM_KB kB / $LAST_KB kB: growth $GROWTH % (target < 5 %)" \
    "RSS last sample" "$END_KB kB" \
    "threads, fds at 20% / end" "$FIRST_THR, $FIRST_FDS / $LAST_THR, $LAST_FDS" \
    "ASan stack depot at exit" "${DEPOT:-none} (ASan's own memory, part of the RSS)" \
    "good requests" "$GOOD, failed or over 1 s: $VIOL, p99 $P99 s, worst $WORST s" \
    "worst good latency at" "${WORST_AT} s into the load" \
    "unexpected bad answers" "$UNEXP (informative; see driver.json)"
if [[ $CRASHED = yes || $LEAKED = yes ]] && ((${#REPORTS[@]})); then
    echo "first sanitizer report's top frames:"
    grep -h -m1 -A14 -E "$SAN_ERROR|ERROR: LeakSanitizer" "${REPORTS[@]}" |
        grep -E 'ERROR|runtime error|#[0-9]+ ' | head -14 || true
fi
echo "run folder: $RUN"

if [[ $CRASHED = no && $LEAKED = no && $VIOL = 0 && $RSS_OK = yes && $DRIVER_RC = 0 ]]; then
    echo "soak: PASS"
    exit 0
fi
echo "soak: FAIL"
exit 1
