#!/usr/bin/env bash
# The trainer end to end on a fresh Debian 12 machine: sets up, builds, trains the Fashion-MNIST
# MLP of examples/fashion_mnist_mlp.ini briefly (EPOCHS, default 1), exports it as a SavedModel,
# serves it with tfserve, and sends real test images over TensorFlow Serving's REST API: the
# predicted classes are printed next to the true labels.
#   scripts/train-demo.sh                  # work dir /tmp/tfserve-train-demo
#   EPOCHS=5 WORK=/tmp/run scripts/train-demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
EPOCHS=${EPOCHS:-1}
WORK=${WORK:-/tmp/tfserve-train-demo}
REST_PORT=${REST_PORT:-8511}
IMAGES=/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz
LABELS=/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz
NAMES=(T-shirt/top Trouser Pullover Dress Coat Sandal Shirt Sneaker Bag "Ankle boot")

bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"${JOBS:-2}" --target tfserve tfserve-train

rm -rf "$WORK"
mkdir -p "$WORK"
echo "== training (examples/fashion_mnist_mlp.ini, $EPOCHS epoch(s)) =="
build/train/tfserve-train examples/fashion_mnist_mlp.ini --epochs="$EPOCHS" \
  --checkpoint_dir="$WORK/ckpt" --log_dir="$WORK/logs" --export_dir="$WORK/export" \
  --plot="$WORK/curves.svg"

echo "== serving $WORK/export on REST port $REST_PORT =="
build/server/tfserve --port=0 --rest_api_port="$REST_PORT" --model_name=fashion_mnist \
  --model_base_path="$WORK/export" >"$WORK/tfserve.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  curl -sf "http://localhost:$REST_PORT/v1/models/fashion_mnist" | grep -q AVAILABLE && break
  sleep 0.1
done

# The first N test images as {"instances": [[784 pixels / 255], ...]} (IDX: 16-byte header).
# (zcat ends with SIGPIPE when head has read enough: no pipefail for these pipelines.)
set +o pipefail
N=${N:-5}
body=$(zcat "$IMAGES" | tail -c +17 | head -c $((N * 784)) | od -An -v -tu1 |
  awk -v n="$N" 'BEGIN { printf "{\"instances\": [" }
    { for (i = 1; i <= NF; i++) { k = c++; if (k % 784 == 0) printf "%s[", (k ? "], " : "");
        else printf ", "; printf "%.6g", $i / 255 } }
    END { printf "]]}" }')
labels=($(zcat "$LABELS" | tail -c +9 | head -c "$N" | od -An -v -tu1))
set -o pipefail
echo "POST /v1/models/fashion_mnist:predict with $N test images"
answer=$(curl -sf -d "$body" -X POST "http://localhost:$REST_PORT/v1/models/fashion_mnist:predict")
classes=($(printf '%s' "$answer" | grep -o '"classes": *[0-9]*' | grep -o '[0-9]*$'))
right=0
for i in $(seq 0 $((N - 1))); do
  ok="wrong"
  [ "${classes[$i]:-?}" = "${labels[$i]}" ] && { ok="right"; right=$((right + 1)); }
  printf '  image %d: predicted %s (%s), label %s (%s): %s\n' "$i" "${classes[$i]:-?}" \
    "${NAMES[${classes[$i]:-0}]}" "${labels[$i]}" "${NAMES[${labels[$i]}]}" "$ok"
done
echo "$right of $N right. Curves: $WORK/curves.svg; TensorBoard logs: $WORK/logs"
