#!/usr/bin/env bash
# run.sh of the bundle bench/gpu_bundle.sh makes: run it on the GPU machine, from anywhere.
#
#     run.sh [RESULTS_DIR]     # default ./gpu-results
#
# Steps (STEPS, default parity,server,bench,matmul): the CPU/GPU parity suite; tfserve serving
# the bundled half_plus_two on DEVICE (gpu:0) with a REST predict; gpu_driver.py, tfserve-gpu against the
# CUDA PyTorch of $PYTHON (python3) with MODELS (mlp,cnn,resnet50), BATCHES (1,8,64,256), RUNS
# (3), DURATION (1 s), WARMUP (0.3 s); and the card's float32 matrix rate through PyTorch (TF32
# off), the ceiling to quote GFLOP/s against. Logs go to RESULTS_DIR. Exit 0 when every step ran
# and passed; without a GPU the parity suite says why and the script stops there.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RES=$(realpath -m "${1:-gpu-results}")
STEPS=${STEPS:-parity,server,bench,matmul}
PYTHON=${PYTHON:-python3}
mkdir -p "$RES"
say() { echo "=== $* ($(date -u +%T))"; }
failed=0

# CUDA's libraries from this machine: its CUDA folders first, then Python wheels (nvidia-*).
libdirs=$HERE/lib
for n in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9; do
    f=$(find /usr/local/cuda/lib64 /usr/local/cuda/targets /usr/local /opt /usr/lib -name "$n" \
        2>/dev/null | head -1)
    echo "$n: ${f:-not found}"
    [[ -n $f ]] && libdirs+=:$(dirname "$f")
done
export LD_LIBRARY_PATH=$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if ldd "$HERE"/bin/* | grep "not found"; then
    echo "run.sh: libraries missing (above): point LD_LIBRARY_PATH at them" >&2
    exit 1
fi
command -v nvidia-smi >/dev/null &&
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

if [[ $STEPS == *parity* ]]; then
    say parity
    CK_FORK=no timeout 600 "$HERE/bin/test-runtime-gpu" >"$RES/parity.log" 2>&1
    rc=$?
    grep -E "^test-runtime-gpu:|Checks|:[FE]:" "$RES/parity.log" | head -30
    if grep -q "no GPU: " "$RES/parity.log"; then
        echo "run.sh: no GPU here: nothing more to run"
        exit 0
    fi
    [[ $rc -eq 0 ]] || failed=1
fi

if [[ $STEPS == *server* ]]; then
    say "server on ${DEVICE:-gpu:0}"
    port=$((20000 + RANDOM % 20000))
    "$HERE/bin/tfserve" --port=$((port + 1)) --rest_api_port=$port --model_name=half_plus_two \
        --model_base_path="$HERE/model/half_plus_two" --device="${DEVICE:-gpu:0}" \
        >"$RES/server.log" 2>&1 &
    pid=$!
    reply=""
    for _ in $(seq 1 100); do
        reply=$("$PYTHON" - "$port" 2>/dev/null <<'EOF'
import sys, urllib.request as u
url = f'http://127.0.0.1:{sys.argv[1]}/v1/models/half_plus_two:predict'
print(u.urlopen(u.Request(url, data=b'{"instances": [1.0, 2.0, 5.0]}'), timeout=5).read().decode())
EOF
        ) && break
        sleep 0.1
    done
    kill -TERM $pid
    wait $pid
    st=$?
    echo "predict: $(echo $reply) (want [2.5, 3.0, 4.5]); tfserve exit $st"
    grep -E "device|gpu:|executor" "$RES/server.log" | head -4
    [[ $st -eq 0 && $(echo $reply | tr -d ' \n') == *'[2.5,3.0,4.5]'* ]] || failed=1
fi

if [[ $STEPS == *bench* ]]; then
    say "gpu_driver.py"
    mkdir -p "$RES/infer"
    PYTHONUNBUFFERED=1 "$PYTHON" "$HERE/infer/gpu_driver.py" --dir "$RES/infer" \
        --worker "$HERE/bin/tfserve-infer-bench" --peer torch --python "$PYTHON" \
        --models "${MODELS:-mlp,cnn,resnet50}" --batches "${BATCHES:-1,8,64,256}" \
        --runs "${RUNS:-3}" --duration "${DURATION:-1}" --warmup "${WARMUP:-0.3}" \
        --threads "${THREADS:-2}" 2>&1 | tee "$RES/bench.txt"
    [[ ${PIPESTATUS[0]} -eq 0 ]] || failed=1
    rm -rf "$RES/infer"   # the seeded weights (ResNet-50: 100 MB)
fi

if [[ $STEPS == *matmul* ]]; then
    say "float32 matrix rate (PyTorch, TF32 off)"
    "$PYTHON" - <<'EOF' | tee "$RES/matmul.txt" || failed=1
import torch
torch.backends.cuda.matmul.allow_tf32 = False
n = 8192
a, b = torch.randn(n, n, device='cuda'), torch.randn(n, n, device='cuda')
for _ in range(3):
    a @ b
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
s.record()
for _ in range(10):
    a @ b
e.record()
torch.cuda.synchronize()
print(f'{torch.cuda.get_device_name(0)}: sgemm {n}^3 at '
      f'{2 * n ** 3 * 10 / (s.elapsed_time(e) / 1e3) / 1e12:.1f} TFLOP/s')
EOF
fi
say "done (results in $RES)"
exit $failed
