#!/usr/bin/env bash
# Builds the libFuzzer drivers of tests/fuzz with clang (ASan + UBSan, libraries instrumented) in
# build-fuzz and runs each for SECONDS (default 20). Exits non-zero when any driver finds a crash,
# a sanitizer report, a leak, a timeout or an out-of-memory; its reproducer is kept under
# build-fuzz/fuzz-artifacts/ (replay: build-fuzz/tests/fuzz/DRIVER FILE).
#
#   bash scripts/fuzz.sh [SECONDS]
#
# Seeds, copied into a temporary working corpus (the repository is never written to):
#   tests/fuzz/corpus/DRIVER/   files as they are; *.pbtxt text protos are encoded with protoc first
#   the demo model that the build writes (saved_model.pb, variables.index)
#   the TensorFlow fixtures (saved_model.pb, variables.index) from $TFS_FIXTURES (default: the fixtures folder beside the checkout)
#     when present
# Environment: JOBS (build parallelism, default 2), TFS_FUZZ_BUILD (build dir, default build-fuzz),
# TFS_FUZZ_DRIVERS (space-separated drivers to run, default all).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${1:-20}
JOBS=${JOBS:-2}
BUILD=${TFS_FUZZ_BUILD:-build-fuzz}
FIXTURES=${TFS_FIXTURES:-../shared/fixtures}
DRIVERS=(fuzz_bundle_index fuzz_example fuzz_gunzip fuzz_infer_request fuzz_predict_json
  fuzz_predict_request fuzz_saved_model fuzz_textformat fuzz_train_config fuzz_v2_infer fuzz_warmup)
if [ -n "${TFS_FUZZ_DRIVERS:-}" ]; then
  read -r -a DRIVERS <<<"$TFS_FUZZ_DRIVERS"
fi

if ! command -v clang >/dev/null; then
  echo "fuzz: clang not found (scripts/setup.sh installs it)" >&2
  exit 1
fi

start=$(date +%s)
mkdir -p "$BUILD"
CC=clang CXX=clang++ cmake -S . -B "$BUILD" -DTFS_FUZZ=ON -DTFS_BUILD_TESTS=OFF -DTFS_CUDA=OFF \
  -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-g -O1" >"$BUILD/configure.log" 2>&1 ||
  { cat "$BUILD/configure.log"; exit 1; }
# demo-model: the bundled model, written by an instrumented build of our own writer, is a seed.
cmake --build "$BUILD" -j"$JOBS" --target fuzzers demo-model
echo "fuzz: build took $(($(date +%s) - start)) s"

work=$(mktemp -d "${TMPDIR:-/tmp}/tfs-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
artifacts="$BUILD/fuzz-artifacts"
mkdir -p "$artifacts"

# The message type protoc encodes a driver's .pbtxt seeds as.
pbtxt_type() {
  case "$1" in
    fuzz_saved_model) echo "tensorflow/core/protobuf/saved_model.proto tensorflow.SavedModel" ;;
    fuzz_example)     echo "tensorflow/core/example/example.proto tensorflow.Example" ;;
    fuzz_predict_request)
      echo "tensorflow_serving/apis/predict.proto tensorflow.serving.PredictRequest" ;;
    fuzz_infer_request) echo "kserve/grpc_predict_v2.proto inference.ModelInferRequest" ;;
    *)                echo "" ;;
  esac
}

# Fills the working corpus of driver $1 in directory $2.
seed() {
  local d=$1 dir=$2 f proto type n=0
  if [ -d "tests/fuzz/corpus/$d" ]; then
    for f in "tests/fuzz/corpus/$d"/*; do
      [ -f "$f" ] || continue
      if [[ $f == *.pbtxt ]]; then
        read -r proto type <<<"$(pbtxt_type "$d")"
        if [ -z "$type" ] || ! command -v protoc >/dev/null; then
          echo "fuzz: $d: skipping seed $f (no message type or no protoc)" >&2
          continue
        fi
        protoc --encode="$type" -Iproto -I/usr/include "$proto" <"$f" >"$dir/$(basename "$f" .pbtxt).pb"
      else
        cp "$f" "$dir/"
      fi
    done
  fi
  local model="$BUILD/models/half_plus_two/1"
  case "$d" in
    fuzz_saved_model)
      cp "$model/saved_model.pb" "$dir/demo_saved_model.pb"
      if [ -d "$FIXTURES" ]; then
        while IFS= read -r f; do cp "$f" "$dir/fixture$((n++)).pb"; done \
          < <(find "$FIXTURES" -name saved_model.pb -size -256k | sort)
      fi ;;
    fuzz_bundle_index)
      cp "$model/variables/variables.index" "$dir/demo.index"
      if [ -d "$FIXTURES" ]; then
        while IFS= read -r f; do cp "$f" "$dir/fixture$((n++)).index"; done \
          < <(find "$FIXTURES" -name '*.index' -size -256k | sort)
      fi ;;
  esac
}

failed=()
for d in "${DRIVERS[@]}"; do
  corpus="$work/$d"
  mkdir -p "$corpus"
  seed "$d" "$corpus"
  seeds=$(find "$corpus" -type f | wc -l)
  log="$work/$d.log"
  rc=0
  # -timeout: one input taking this long is a finding (a hang); -rss_limit_mb likewise for memory.
  UBSAN_OPTIONS=print_stacktrace=1 "$BUILD/tests/fuzz/$d" -max_total_time="$DURATION" -timeout=25 \
    -rss_limit_mb=2560 -print_final_stats=1 -artifact_prefix="$artifacts/$d-" "$corpus" \
    >"$log" 2>&1 || rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -1)
  cov=$(grep -ao 'cov: [0-9]* ft: [0-9]* corp: [0-9]*/[0-9a-zA-Z]*' "$log" | tail -1 || true)
  if [ "$rc" -eq 0 ]; then
    printf 'fuzz: %-18s ok    %9s runs in %ss, %s (from %d seeds)\n' "$d" "${runs:-?}" "$DURATION" \
      "${cov:-no coverage line}" "$seeds"
  else
    printf 'fuzz: %-18s FAIL  exit %d after %s runs, %s\n' "$d" "$rc" "${runs:-?}" "${cov:-}"
    # The report without libFuzzer's progress lines.
    grep -av '^#[0-9]\|NEW_FUNC\|^INFO:' "$log" | tail -n 80
    failed+=("$d")
  fi
done

echo "fuzz: done in $(($(date +%s) - start)) s"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]} (reproducers in $artifacts)" >&2
  exit 1
fi
