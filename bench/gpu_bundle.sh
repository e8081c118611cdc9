#!/usr/bin/env bash
# Packs tfserve's CUDA build for a GPU machine that cannot build it: a GPU machine lent
# for a few minutes often has CUDA, cuDNN and a CUDA PyTorch but none of Debian's packages
# (libmicrohttpd, gRPC, OpenBLAS, Check), so bench/gpu_vs_pytorch.sh cannot build there.
#
#     bench/gpu_bundle.sh [OUT.tar.xz]     # here: build, then pack (default gpu-bundle.tar.xz)
#     mkdir b && tar xJf gpu-bundle.tar.xz -C b && b/run.sh [RESULTS_DIR]     # there
#
# Builds test-runtime-gpu, tfserve-infer-bench and tfserve with CUDA in TFS_BUILD_DIR (build-cuda;
# `build` works too where its CMake found nvcc and cuDNN), and packs them stripped, with every
# shared library they link except the C library, libstdc++ and CUDA's own (cudart, cuBLAS, cuDNN:
# the GPU machine's are used; same major versions as here), plus bench/infer's Python drivers
# and run.sh (bench/gpu_bundle_run.sh) and the demo's half_plus_two. About 12 MB. run.sh finds the CUDA libraries (CUDA's
# folders, then Python wheels under /opt and /usr), runs the CPU/GPU parity suite, serves a
# bundled half_plus_two on gpu:0 and predicts over REST, runs gpu_driver.py against the CUDA
# PyTorch of `python3` (MODELS, BATCHES, RUNS, DURATION as gpu_vs_pytorch.sh) and measures the
# card's float32 matrix rate; everything also goes to RESULTS_DIR. Not a test.
set -euo pipefail
export TFS_BUILD_DIR=${TFS_BUILD_DIR:-build-cuda}
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
OUT=$(realpath -m "${1:-gpu-bundle.tar.xz}")

[[ -x $NVCC ]] || die "no CUDA compiler at $NVCC (set NVCC)"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CUDA_COMPILER="$NVCC" \
    >"$BENCH_TMP/cmake.log" 2>&1 || { cat "$BENCH_TMP/cmake.log" >&2; die "cmake failed"; }
grep -q "CUDA executor ON" "$BENCH_TMP/cmake.log" || die "no CUDA executor in $BUILD (cuDNN?)"
cmake --build "$BUILD" -j"${JOBS:-2}" --target test-runtime-gpu tfserve-infer-bench tfserve \
    demo-model >/dev/null || die "build failed"

B=$BENCH_TMP/bundle
mkdir -p "$B/bin" "$B/lib" "$B/infer" "$B/model"
bins=("$BUILD/tests/runtime/test-runtime-gpu" "$BUILD/bench/tfserve-infer-bench"
      "$BUILD/server/tfserve")
for b in "${bins[@]}"; do
    strip -o "$B/bin/$(basename "$b")" "$b"
done
skip='^(libc|libm|libpthread|libdl|librt|libgcc_s|libstdc\+\+|libcuda|libcudart|libcublas'
skip+='|libcublasLt|libcudnn[a-z_]*)\.so'
ldd "${bins[@]}" | awk '/=> \// {print $1, $3}' | sort -u | while read -r name path; do
    [[ $name =~ $skip ]] || cp -L "$path" "$B/lib/$name"
done
cp "$BENCH_DIR"/infer/{gpu_driver.py,driver.py,torch_worker.py} "$B/infer/"
cp -r "$BUILD/models/half_plus_two" "$B/model/"   # demo-model: y = 0.5 x + 2, our own writer
cp "$BENCH_DIR/gpu_bundle_run.sh" "$B/run.sh"
chmod +x "$B/run.sh"
tar cJf "$OUT" -C "$B" .
echo "gpu_bundle: $OUT ($(du -h "$OUT" | cut -f1)): $(ls "$B/lib" | wc -l) libraries," \
     "$(git -C "$ROOT" rev-parse --short HEAD)"
