#!/usr/bin/env bash
# System test of the shipped CPU image (docker/Dockerfile), built and run with Debian's podman on a
# machine that reaches no registry: the Debian 12 base is made with debootstrap and imported, then
# substituted through the Dockerfile's BASE arg.
# Checks what a user of the image relies on: it builds, it is small (< 100 MB), it runs as a
# non-root user, the entrypoint exec()s tfserve (PID 1 is tfserve, so SIGTERM reaches it), the
# bundled model answers predictions over REST, the HEALTHCHECK probe passes, and `podman stop`
# (SIGTERM) ends it with exit code 0 well before the stop timeout.
# With "gpu", the same for the GPU image (docker/Dockerfile.gpu, the toolkit from
# TFS_CUDA_CONTEXT, default /usr/local/cuda), under 1.5 GB (it holds NVIDIA's libraries but no
# toolkit), run with no GPU given to it: tfserve serves on the CPU and logs once that there is no
# CUDA driver. Skipped (77) where the build made no CUDA module or there is no toolkit.
#
# Skipped (exit 77) where podman cannot run: not root, podman/runc/debootstrap missing,
# TFS_SKIP_DOCKER=1, or no container can start at all (inside an unprivileged container, say, where
# runc may not mount /proc): a probe runs /usr/bin/true in a container first, and the skip message
# quotes podman's error. The image store lives in TFS_DOCKER_TEST_DIR (default
# /var/tmp/tfserve-docker-test, outside any build tree): like ccache, it keeps between runs the
# debootstrapped base, the build stage's package layer and the compiler cache mount, so a rerun
# (another clone, a CI run on the same machine) rebuilds only what the sources changed.
# The GPU image's build takes a quarter of an hour on 2 cores, and its test half the CI's time:
# it runs only with TFS_TEST_GPU_IMAGE=1 (skipped, saying so, otherwise).
#   test_image.sh SOURCE_DIR BUILD_DIR [gpu]
set -euo pipefail
src=$1
build=$2
gpu=${3:-}

skip() { echo "SKIP docker image test: $*"; exit 77; }
[ "${TFS_SKIP_DOCKER:-0}" = 1 ] && skip "TFS_SKIP_DOCKER=1"
dockerfile=$src/docker/Dockerfile
image=localhost/tfserve:test
max_size=100000000
build_args=()
run_args=()
if [ "$gpu" = gpu ]; then
  [ "${TFS_TEST_GPU_IMAGE:-0}" = 1 ] ||
    skip "the GPU image takes about 15 minutes to build on 2 cores; TFS_TEST_GPU_IMAGE=1 runs it"
  cuda=${TFS_CUDA_CONTEXT:-/usr/local/cuda}
  [ -e "$build/server/libtfserve-cuda.so" ] || skip "the CUDA build is off (no libtfserve-cuda.so)"
  [ -x "$cuda/bin/nvcc" ] || skip "no CUDA toolkit at $cuda (TFS_CUDA_CONTEXT) to build the GPU image"
  dockerfile=$src/docker/Dockerfile.gpu
  image=localhost/tfserve-gpu:test
  max_size=1500000000
  build_args=(--build-context "cuda=$cuda")
  # No GPU for it even where the NVIDIA hook is installed (the image asks for all of them).
  run_args=(-e NVIDIA_VISIBLE_DEVICES=void)
fi
[ "$(id -u)" = 0 ] || skip "podman's image store needs root here"
for t in podman runc debootstrap curl; do
  command -v "$t" >/dev/null || skip "$t is not installed (scripts/setup.sh installs it)"
done

export CONTAINERS_CONF=$src/docker/containers.conf
work=${TFS_DOCKER_TEST_DIR:-/var/tmp/tfserve-docker-test}
mkdir -p "$work"
P=(podman --root "$work/store" --runroot "$work/run" --storage-driver overlay)
name=tfserve-test-$$

# The test image and the build stages it leaves untagged go at the end; the tagged base and the
# cache layers stay.
cleanup() {
  "${P[@]}" rm -f "$name" >/dev/null 2>&1 || true
  "${P[@]}" rmi -f "$image" >/dev/null 2>&1 || true
  "${P[@]}" image prune -f >/dev/null 2>&1 || true
}
trap cleanup EXIT

step() { echo "--- $* ($(date +%T))"; }

# The probe's root file system: /usr/bin/true and the libraries it loads, copied (a few MB, no
# image and no network needed), so a failure here is the engine's, not the image build's.
probe=$work/probe-rootfs
rm -rf "$probe"
mkdir -p "$probe"
for f in /usr/bin/true $(ldd /usr/bin/true | grep -o '/[^ ]*'); do
  cp --parents -L "$f" "$probe"
done
if ! out=$("${P[@]}" run --rm --network=none --rootfs "$probe" /usr/bin/true 2>&1); then
  skip "no container can start here: $(printf '%s' "$out" | tail -3 | tr '\n' ' ')"
fi

if ! "${P[@]}" image exists localhost/bookworm-minbase:local; then
  step "debootstrap a Debian 12 base"
  mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  rm -rf "$work/rootfs"
  debootstrap --variant=minbase bookworm "$work/rootfs" "${mirror:-http://deb.debian.org/debian}" \
    > "$work/debootstrap.log" 2>&1 || { tail -20 "$work/debootstrap.log"; exit 1; }
  tar -C "$work/rootfs" -c . | "${P[@]}" import - localhost/bookworm-minbase:local >/dev/null
  rm -rf "$work/rootfs"
fi

step "build the image"
# The package stage is tagged so that pruning at the end keeps it as the next run's cache (the
# GPU image's first stage is the same instructions: the same layer).
"${P[@]}" build --format docker --isolation=chroot --build-arg BASE=localhost/bookworm-minbase:local \
  --target deps -f "$src/docker/Dockerfile" -t localhost/tfserve-deps:test "$src" > "$work/deps.log" 2>&1 \
  || { tail -40 "$work/deps.log"; exit 1; }
log=$work/build${gpu:+-$gpu}.log
"${P[@]}" build --format docker --isolation=chroot --build-arg BASE=localhost/bookworm-minbase:local \
  "${build_args[@]}" -f "$dockerfile" -t "$image" "$src" > "$log" 2>&1 || { tail -40 "$log"; exit 1; }

size=$("${P[@]}" image inspect --format '{{.Size}}' "$image")
echo "image size: $size bytes ($((size / 1000000)) MB)"
[ "$size" -lt "$max_size" ] || { echo "FAIL: image is $size bytes, not under $((max_size / 1000000)) MB"; exit 1; }
user=$("${P[@]}" image inspect --format '{{.Config.User}}' "$image")
[ "$user" = "10001:10001" ] || { echo "FAIL: image user is '$user', want 10001:10001"; exit 1; }
health=$("${P[@]}" image inspect --format '{{.Config.Healthcheck.Test}}' "$image")
echo "healthcheck: $health"
case "$health" in
  *tfserve-probe*) ;;
  *) echo "FAIL: the image has no HEALTHCHECK running tfserve-probe"; exit 1 ;;
esac

# Host networking with free ports: the CNI bridge also works, but this is simpler and robust.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
rest=$(free_port)
grpc=$(free_port)
# The kernel can hand out the same ephemeral port twice in a row; the two must differ.
while [[ $grpc == "$rest" ]]; do grpc=$(free_port); done
step "run it (REST $rest, gRPC $grpc)"
"${P[@]}" run -d --no-healthcheck --name "$name" --network=host "${run_args[@]}" "$image" --port="$grpc" --rest_api_port="$rest" >/dev/null

url=http://127.0.0.1:$rest
ok=0
for _ in $(seq 1 60); do
  if curl -sf "$url/v1/models/half_plus_two" >/dev/null; then ok=1; break; fi
  sleep 0.5
done
[ "$ok" = 1 ] || { echo "FAIL: the container did not serve within 30 s"; "${P[@]}" logs "$name" | tail -20; exit 1; }

pred=$(curl -s -d '{"instances": [1.0, 2.0, 5.0]}' "$url/v1/models/half_plus_two:predict")
echo "predict: $pred"
python3 - "$pred" <<'PY'
import json, sys
got = json.loads(sys.argv[1])["predictions"]
assert got == [2.5, 3.0, 4.5], got
PY
if [ "$gpu" = gpu ]; then
  lines=$("${P[@]}" logs "$name" 2>&1 | grep 'executor: ' || true)
  echo "executor: $lines"
  want='executor: cpu (device auto): no GPU: no CUDA driver: libcuda.so.1: cannot open shared object file'
  [ "$(printf '%s\n' "$lines" | grep -c .)" = 1 ] && [[ $lines == *"$want"* ]] \
    || { echo "FAIL: want one executor line saying '$want'"; exit 1; }
fi

pid=$("${P[@]}" inspect --format '{{.State.Pid}}' "$name")
cmd=$(tr '\0' ' ' < "/proc/$pid/cmdline")
echo "PID 1 of the container: $cmd"
case "$cmd" in
  /usr/bin/tfserve\ *) ;;
  *) echo "FAIL: PID 1 is not tfserve (the entrypoint must exec it)"; exit 1 ;;
esac
status_uid=$(awk '/^Uid:/ {print $2}' "/proc/$pid/status")
[ "$status_uid" = 10001 ] || { echo "FAIL: tfserve runs as uid $status_uid"; exit 1; }

"${P[@]}" exec "$name" /usr/bin/tfserve-probe "$url/readyz" \
  || { echo "FAIL: tfserve-probe inside the container"; exit 1; }
if "${P[@]}" exec "$name" /usr/bin/tfserve-probe "http://127.0.0.1:$rest/v1/models/nope"; then
  echo "FAIL: tfserve-probe passed on a 404"; exit 1
fi

step "podman stop (SIGTERM)"
t0=$(date +%s)
"${P[@]}" stop -t 20 "$name" >/dev/null
t1=$(date +%s)
code=$("${P[@]}" inspect --format '{{.State.ExitCode}}' "$name")
echo "stopped in $((t1 - t0)) s, exit code $code"
[ "$code" = 0 ] || { echo "FAIL: exit code $code after SIGTERM"; "${P[@]}" logs "$name" | tail -20; exit 1; }
[ $((t1 - t0)) -lt 15 ] || { echo "FAIL: SIGTERM did not stop tfserve (podman waited for the kill)"; exit 1; }
echo "PASS docker image"
