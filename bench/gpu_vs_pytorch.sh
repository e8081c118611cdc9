#!/usr/bin/env bash
# tfserve's CUDA executor against PyTorch on the same GPU: builds tfserve with CUDA
# (nvcc + cuDNN; build folder build-cuda unless TFS_BUILD_DIR says otherwise), runs the CPU/GPU
# parity tests (test-runtime-gpu), then times the MLP 784-512-256-10, the small CNN and ResNet-50
# (bench/infer/models.c, resnet.c) at batch 1, 8, 64 and 256 through bench/infer/gpu_driver.py:
# tfserve's sessions on gpu:0 against the same seeded weights in PyTorch on CUDA, each run taking
# a host input and returning a host output. Prints samples/s and the ratio tfserve / PyTorch.
#
# Without a GPU (or without nvcc) it says so and exits 0. Where the PyTorch at $PYTHON
# (default /usr/bin/python3) has no CUDA (Debian's python3-torch is CPU-only), it says so and
# compares tfserve's GPU path with tfserve's CPU path instead; point PYTHON at an interpreter
# with a CUDA build of torch (and numpy) for the PyTorch comparison.
# Env: TFS_BUILD_DIR (build-cuda), NVCC (/usr/local/cuda/bin/nvcc), PYTHON, MODELS
# (mlp,cnn,resnet50), BATCHES (1,8,64,256), RUNS (3), DURATION (2 s), WARMUP (0.5 s), THREADS
# (2), TF32 (0; 1 lets both sides use TF32 tensor cores), CUDA_VISIBLE_DEVICES (which GPU is
# gpu:0). Not a test.
set -euo pipefail
export TFS_BUILD_DIR=${TFS_BUILD_DIR:-build-cuda}
DURATION=${DURATION:-2}
WARMUP=${WARMUP:-0.5}
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
PYTHON=${PYTHON:-/usr/bin/python3}
MODELS=${MODELS:-mlp,cnn,resnet50}
BATCHES=${BATCHES:-1,8,64,256}
THREADS=${THREADS:-2}

if [[ ! -x $NVCC ]]; then
    echo "gpu_vs_pytorch: no CUDA compiler at $NVCC (set NVCC): no GPU executor to time"
    exit 0
fi
echo "gpu_vs_pytorch: configuring $BUILD with CUDA ($NVCC)" >&2
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CUDA_COMPILER="$NVCC" \
    >"$BENCH_TMP/cmake.log" 2>&1 || { cat "$BENCH_TMP/cmake.log" >&2; die "cmake failed"; }
if ! grep -q "CUDA executor ON" "$BENCH_TMP/cmake.log"; then
    grep "tfserve:" "$BENCH_TMP/cmake.log" || true
    echo "gpu_vs_pytorch: this build has no CUDA executor (nvcc or cuDNN missing): nothing to time"
    exit 0
fi
cmake --build "$BUILD" -j"${JOBS:-2}" --target test-runtime-gpu tfserve-infer-bench >/dev/null ||
    die "build failed: cmake --build $BUILD --target test-runtime-gpu tfserve-infer-bench"

# Parity first; test-runtime-gpu says "no GPU: <why>" on a machine without one.
set +e
CK_FORK=no "$BUILD/tests/runtime/test-runtime-gpu" >"$BENCH_TMP/parity.log" 2>&1
parity=$?
set -e
if grep -q "no GPU: " "$BENCH_TMP/parity.log"; then
    sed -n 's/^test-runtime-gpu: //p' "$BENCH_TMP/parity.log" | head -1
    echo "gpu_vs_pytorch: no GPU here: nothing to time (exit 0)"
    exit 0
fi
grep -E "^[0-9]+%: Checks" "$BENCH_TMP/parity.log" || true
if [[ $parity -ne 0 ]]; then
    grep -E ":[FE]:" "$BENCH_TMP/parity.log" | head -20 >&2 || true
    die "CPU/GPU parity tests failed (log: $BENCH_TMP/parity.log is removed at exit): not timing"
fi
echo "gpu_vs_pytorch: parity tests passed"

peer=torch
if ! "$PYTHON" -c 'import numpy, torch; assert torch.cuda.is_available()' 2>/dev/null; then
    v=$("$PYTHON" -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)' \
        2>/dev/null || echo "not importable")
    echo "gpu_vs_pytorch: PyTorch at $PYTHON ($v) cannot use the GPU; comparing with" \
        "tfserve's CPU path instead (set PYTHON to an interpreter with CUDA PyTorch)"
    peer=cpu
fi
mkdir -p "$BENCH_TMP/infer"
args=(--dir "$BENCH_TMP/infer" --worker "$BUILD/bench/tfserve-infer-bench" --peer "$peer"
      --python "$PYTHON" --models "$MODELS" --batches "$BATCHES" --runs "$RUNS"
      --duration "$DURATION" --warmup "$WARMUP" --threads "$THREADS")
[[ ${TF32:-0} = 1 ]] && args+=(--tf32)
"$PYTHON" "$BENCH_DIR/infer/gpu_driver.py" "${args[@]}"
