#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds tfserve, and serves a model over TensorFlow Serving's
# REST API on port 8501 (gRPC port flag 8500). By default it serves the bundled demo model
# half_plus_two (y = 0.5 * x + 2, written at build time by tfserve's own SavedModel writer).
# Serve another model like TF Serving's Docker image does:
#   MODEL_NAME=half_plus_two MODEL_BASE_PATH=/path/to/saved_model_half_plus_two_cpu scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)

bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"${JOBS:-2}" --target tfserve demo-model

MODEL_NAME=${MODEL_NAME:-half_plus_two}
MODEL_BASE_PATH=${MODEL_BASE_PATH:-$REPO/build/models/half_plus_two}
REST_PORT=${REST_PORT:-8501}
cat <<MSG

tfserve is starting: model '$MODEL_NAME' from $MODEL_BASE_PATH, REST on port $REST_PORT.
Try, from another terminal:

  curl -d '{"instances": [1.0, 2.0, 5.0]}' -X POST http://localhost:$REST_PORT/v1/models/$MODEL_NAME:predict

(expected: {"predictions": [2.5, 3.0, 4.5]})   Stop with Ctrl-C.

MSG
exec build/server/tfserve --port="${GRPC_PORT:-8500}" --rest_api_port="$REST_PORT" \
  --model_name="$MODEL_NAME" --model_base_path="$MODEL_BASE_PATH" "$@"
