# shellcheck shell=bash
# Shared helpers for bench/*.sh (sourced, not run). Benchmarks are not tests: nothing here is
# registered with ctest or run by CI. Everything binds or connects to 127.0.0.1 only, and
# everything a script starts is stopped by the EXIT trap installed here.

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$BENCH_DIR/.." && pwd)
BUILD=${TFS_BUILD_DIR:-$ROOT/build}
[[ $BUILD = /* ]] || BUILD=$ROOT/$BUILD
RUNS=${RUNS:-3}          # repeated runs per target; the median is reported
DURATION=${DURATION:-8}  # seconds per run
WARMUP=${WARMUP:-2}      # seconds of untimed load before the first timed run of each target

BENCH_PIDS=()
declare -A PID=() # start NAME ...: PID[NAME]
BENCH_TMP=$(mktemp -d /tmp/tfs-bench.XXXXXX)

bench_cleanup() {
    local pid
    for pid in "${BENCH_PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${BENCH_PIDS[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$BENCH_TMP"
}
trap bench_cleanup EXIT
trap 'exit 130' INT TERM

die() {
    echo "bench: $*" >&2
    exit 1
}

# need CMD PACKAGE: install PACKAGE with apt when CMD is missing.
need() {
    command -v "$1" >/dev/null 2>&1 && return 0
    echo "bench: $1 missing; installing $2 with apt" >&2
    apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends "$2" >/dev/null ||
        die "cannot install $2 (needed for $1)"
}

# free_port: a TCP port on 127.0.0.1 that nothing listens on right now, and not one this script
# got before (the kernel can hand out the same ephemeral port twice in a row). The ports given
# are listed in a file, since callers run it in a subshell: PORT=$(free_port).
free_port() {
    local p given=$BENCH_TMP/ports-given
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        p=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
        grep -qx "$p" "$given" 2>/dev/null || break
    done
    echo "$p" >>"$given"
    echo "$p"
}

# start NAME LOGFILE CMD...: run CMD in the background as a direct child; PID[NAME] is its pid,
# which the trap stops.
start() {
    local name=$1 log=$2
    shift 2
    "$@" >"$log" 2>&1 &
    BENCH_PIDS+=($!)
    # shellcheck disable=SC2034 # read by the scripts that source this file
    PID[$name]=$!
}

# wait_port PID PORT: until something accepts on 127.0.0.1:PORT (20 s), or PID dies.
wait_port() {
    local pid=$1 port=$2 i
    for ((i = 0; i < 200; i++)); do
        kill -0 "$pid" 2>/dev/null || return 1
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}

# median: of the numbers on stdin, one a line.
median() {
    sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# ratio A B: A/B with 3 decimals.
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 == 0) print "nan"; else printf "%.3f\n", a / b }'
}

# cpu_ticks PID: utime + stime of PID (all its threads) in clock ticks, from /proc/PID/stat.
cpu_ticks() {
    # Field 2 (comm) may contain spaces; strip through the last ')' first.
    sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'
}

# require_tfserve: sets TFSERVE and MODEL (the binary and demo model under test, from $BUILD).
require_tfserve() {
    TFSERVE=${TFSERVE:-$BUILD/server/tfserve}
    MODEL=${MODEL:-$BUILD/models/half_plus_two}
    [[ -x $TFSERVE ]] || die "no tfserve at $TFSERVE: build it (cmake --build $BUILD --target tfserve) or set TFS_BUILD_DIR/TFSERVE"
    [[ -d $MODEL ]] || die "no demo model at $MODEL: cmake --build $BUILD --target demo-model, or set MODEL"
}
