#!/usr/bin/env bash
# Data-parallel training benchmark: the Fashion-MNIST CNN (examples/fashion_mnist_cnn.ini, as
# bench/train_vs_pytorch.sh trains it) in 1 process with 2 intra-op threads at batch 64, against
# 2 MPI ranks with 1 thread each at batch 32 per rank (the same global batch of 64, so the same
# trajectory up to rounding). One run of each, back to back: run it once, on a quiet machine. Not
# a test: not registered with ctest, not run by CI. See bench/README.md.
#
#   bench/train_mpi.sh
#   EPOCHS=1 bench/train_mpi.sh
#
# Prints, for each: examples/s over the training steps (from --metrics_json's per-epoch seconds),
# the test accuracy after the last epoch, and for the MPI run the allreduce figures its summary
# line gives (payload bytes per step and milliseconds per step spent waiting for the
# allreduces); then the examples/s ratio (2 ranks / 1 process).
# Knobs: TFS_BUILD_DIR (build), EPOCHS (2), DATA_DIR (/usr/share/datasets/fashion-mnist),
# MAX_STEPS (stop each run after that many steps: a quick check of the script; the figures then
# cover partial epochs), OUT_DIR (keep the logs and JSON files there).
# Exit status: 0 when both runs finished; 1 otherwise.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

EPOCHS=${EPOCHS:-2}
MAX_STEPS=${MAX_STEPS:-0}
DEFAULT_DATA=/usr/share/datasets/fashion-mnist
DATA_DIR=${DATA_DIR:-$DEFAULT_DATA}
PY=/usr/bin/python3
OUT=${OUT_DIR:-$BENCH_TMP}
mkdir -p "$OUT"

[ -x "$PY" ] || die "$PY missing (Debian's python3)"
[ -f "$DATA_DIR/train-images-idx3-ubyte.gz" ] ||
    die "$DATA_DIR: no Fashion-MNIST IDX files (Debian: dataset-fashion-mnist)"
command -v mpirun >/dev/null || die "mpirun missing (Debian: openmpi-bin)"
TRAIN=$BUILD/train/tfserve-train
if [ ! -x "$TRAIN" ]; then
    [ -f "$BUILD/CMakeCache.txt" ] ||
        cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
    cmake --build "$BUILD" -j2 --target tfserve-train >/dev/null ||
        die "building tfserve-train in $BUILD failed"
fi
"$TRAIN" --help | grep -q -- --intra_op_threads || die "$TRAIN has no --intra_op_threads (old?)"
if [ "$(id -u)" = 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

# The example without checkpoints, event files and export (they would land in the timed
# epochs), at the global batch; the 2-rank config halves the per-rank batch.
grep -v -E '^\s*(checkpoint_[a-z_]*|keep_checkpoint_max|log_dir|export_dir)\s*=' \
    "$ROOT/examples/fashion_mnist_cnn.ini" | sed "s#$DEFAULT_DATA#$DATA_DIR#" >"$OUT/one.ini"
batch=$(sed -n 's/^batch_size *= *\([0-9]*\).*/\1/p' "$OUT/one.ini")
sed "s/^batch_size *=.*/batch_size = $((batch / 2))/" "$OUT/one.ini" >"$OUT/two.ini"

echo "train_mpi: Fashion-MNIST CNN, global batch $batch, $EPOCHS epoch(s), $(nproc) CPUs," \
    "$(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"
args=(--epochs="$EPOCHS" --max_steps="$MAX_STEPS" --progress=lines)
echo "-- 1 process x 2 threads, batch $batch"
"$TRAIN" "$OUT/one.ini" "${args[@]}" --intra_op_threads=2 --metrics_json="$OUT/one.json" \
    >"$OUT/one.log" 2>&1 || { tail -n 20 "$OUT/one.log" >&2; die "1-process run failed"; }
echo "-- 2 ranks x 1 thread, batch $((batch / 2)) per rank"
# mpirun's default placement, as a user gets it: for 2 ranks, each bound to a core of its own
# (--bind-to none let them and their data threads wander: 3-4 % slower, bench/README.md).
mpirun --oversubscribe -np 2 "$TRAIN" "$OUT/two.ini" "${args[@]}" \
    --intra_op_threads=1 --metrics_json="$OUT/two.json" >"$OUT/two.log" 2>&1 ||
    { tail -n 20 "$OUT/two.log" >&2; die "2-rank run failed"; }

"$PY" - "$OUT" <<'PY'
import json, re, sys
out = sys.argv[1]
def figures(name):
    m = json.load(open(f"{out}/{name}.json"))
    log = open(f"{out}/{name}.log").read()
    # examples per epoch: the last progress line of each epoch says how many were done
    done = {}
    for e, n in re.findall(r"^epoch (\d+)/\d+: (\d+)/\d+ examples", log, re.M):
        done[int(e)] = int(n)
    secs = sum(s for s in m["seconds"] if s is not None)
    rate = sum(done.values()) / secs if secs > 0 else 0
    acc = m["eval_accuracy"][-1] if m["eval_accuracy"] else None
    return rate, acc, log
r1, a1, _ = figures("one")
r2, a2, log2 = figures("two")
print(f"1 process x 2 threads: {r1:.0f} examples/s, test accuracy {a1}")
print(f"2 ranks x 1 thread:    {r2:.0f} examples/s, test accuracy {a2}")
s = re.search(r"^mpi: .*$", log2, re.M)
if s:
    b = re.search(r"(\d+) bytes, ([\d.]+) ms waiting \(([\d.]+)% of the step\)", s.group(0))
    if b:
        print(f"  allreduce per step: {int(b.group(1))} bytes payload per rank, "
              f"{b.group(2)} ms waiting ({b.group(3)}% of the step)")
    print(f"  {s.group(0)}")
print(f"ratio (2 ranks / 1 process): {r2 / r1:.2f}x" if r1 > 0 else "ratio: n/a")
PY
