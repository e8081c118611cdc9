#!/usr/bin/env bash
# Inference, tfserve's runtime against PyTorch and ONNX Runtime: the MLP
# 784-512-256-10, the small CNN and ResNet-50, built in C with the graph API
# (build/bench/tfserve-infer-bench, bench/infer/), the same seeded weights loaded into PyTorch
# (Debian's python3-torch, OPENBLAS_NUM_THREADS=1) and, exported from it as ONNX (opset 13), into
# ONNX Runtime (npm's onnxruntime-node, installed into a temp dir). Checks that the outputs agree
# (relative error < 1e-4), times every (model, batch) in interleaved rounds, prints samples/s,
# tfserve's ratio to the faster peer, each one's GFLOP/s and the kernel sets; then runs
# build/bench/nn-gflops (the GEMM's and MatMul/Conv2D's GFLOP/s) in the same run.
# A benchmark, not a test. Env: TFS_BUILD_DIR (build/), MODELS (mlp,cnn,resnet50), BATCHES
# (1,8,64), RESNET_BATCHES (1,8,64), RUNS (3), DURATION (2 s per framework and round), WARMUP
# (0.5 s), THREADS (2 per framework), ORT_DIR (an existing `npm install onnxruntime-node` folder
# to reuse), REWRITE (default 1: tfserve runs its graphs through the graph rewrites, as the
# server does at load; 0: the plain ops as built), TORCH_JIT (1: PyTorch runs traced, frozen TorchScript;
# default 0: eager, as the peer baselines were measured), NN_GFLOPS (1: run nn-gflops; 0: skip),
# NN_GFLOPS_ARGS.
# See bench/README.md.
set -euo pipefail
DURATION=${DURATION:-2}
WARMUP=${WARMUP:-0.5}
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

MODELS=${MODELS:-mlp,cnn,resnet50}
BATCHES=${BATCHES:-1,8,64}
RESNET_BATCHES=${RESNET_BATCHES:-1,8,64}
THREADS=${THREADS:-2}
REWRITE=${REWRITE:-1}
TORCH_JIT=${TORCH_JIT:-0}
NN_GFLOPS=${NN_GFLOPS:-1}
PY=/usr/bin/python3   # Debian's numpy and torch work only with this interpreter

# Build what this needs (configure first when the build folder is new).
if [[ ! -f $BUILD/CMakeCache.txt ]]; then
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || die "cmake failed"
fi
cmake --build "$BUILD" -j2 --target tfserve-infer-bench nn-gflops >/dev/null ||
    die "build failed: cmake --build $BUILD --target tfserve-infer-bench nn-gflops"

# Peers.
$PY -c 'import numpy' 2>/dev/null || need_pkg=python3-numpy
$PY -c 'import torch' 2>/dev/null || need_pkg="${need_pkg:-} python3-torch"
if [[ -n ${need_pkg:-} ]]; then
    echo "bench: installing$need_pkg with apt" >&2
    # shellcheck disable=SC2086 # a list of package names
    apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends $need_pkg >/dev/null ||
        die "cannot install$need_pkg"
fi
need node nodejs
need npm npm
if [[ -z ${ORT_DIR:-} ]]; then
    ORT_DIR=$BENCH_TMP/ort
    mkdir -p "$ORT_DIR"
    echo "bench: npm install onnxruntime-node into $ORT_DIR" >&2
    # The package's post-install step would fetch GPU binaries from a host we cannot reach; the
    # CPU binaries are in the package itself.
    (cd "$ORT_DIR" && ONNXRUNTIME_NODE_INSTALL=skip npm install --no-audit --no-fund \
        onnxruntime-node >/dev/null 2>&1) || die "npm install onnxruntime-node failed"
fi
[[ -d $ORT_DIR/node_modules/onnxruntime-node ]] || die "no onnxruntime-node under $ORT_DIR"

mkdir -p "$BENCH_TMP/data"
extra=()
[[ $REWRITE == 1 ]] && extra=(--rewrite)
[[ $TORCH_JIT == 1 ]] && extra+=(--torch-jit)
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs," \
    "OpenBLAS env: OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset)}" \
    "OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-(unset)}"
$PY "$BENCH_DIR/infer/driver.py" --dir "$BENCH_TMP/data" \
    --worker "$BUILD/bench/tfserve-infer-bench" --ort-dir "$ORT_DIR" --models "$MODELS" \
    --batches "$BATCHES" --resnet-batches "$RESNET_BATCHES" --runs "$RUNS" \
    --duration "$DURATION" --warmup "$WARMUP" --threads "$THREADS" "${extra[@]}"

if [[ $NN_GFLOPS == 1 ]]; then
    echo
    echo "nn-gflops (the GEMM alone and tfserve's MatMul/Conv2D, same process;" \
        "load $(cut -d' ' -f1-3 /proc/loadavg)):"
    # shellcheck disable=SC2086 # flags
    "$BUILD/bench/nn-gflops" ${NN_GFLOPS_ARGS:-}
fi
