#!/usr/bin/env bash
# Installs the Debian 12 packages tfserve needs to build, test and run. Idempotent: packages already
# present are skipped by apt. Runs as root (or through sudo when available).
set -euo pipefail

pkgs=(
  build-essential cmake pkg-config git curl ca-certificates openssl libssl-dev
  libmicrohttpd-dev libjansson-dev libprotobuf-c-dev protobuf-c-compiler libprotobuf-dev protobuf-compiler
  libgrpc-dev libopenblas-dev check libsubunit-dev libsnappy-dev libre2-dev zlib1g-dev
  python3-grpcio python3-protobuf python3-numpy
  libopenmpi-dev openmpi-bin
  dataset-fashion-mnist
  valgrind clang libclang-rt-14-dev
  podman runc debootstrap
  prometheus
  nghttp2-client python3-yaml nginx
)
# kubectl for the manifest checks (tests/deploy): Debian's kubernetes-client, unless a kubectl is
# already on PATH (another kubectl package conflicts with it).
if ! command -v kubectl >/dev/null 2>&1; then pkgs+=(kubernetes-client); fi

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#pkgs[@]} packages already installed"
  exit 0
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get -o DPkg::Lock::Timeout=600 update -q
$SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}"
