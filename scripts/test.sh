#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds tfserve with warnings as errors, runs every test, then
# builds and runs the whole suite again under AddressSanitizer + UndefinedBehaviorSanitizer.
# Tests that need the real TensorFlow fixtures ($TFS_FIXTURES) are ctest entries of their own
# (*-fixtures, real-models) that ctest reports as skipped when they are absent; so is op-registry
# without TensorFlow's op list.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-2}

bash scripts/setup.sh
bash scripts/check-layout.sh

echo "== build (warnings are errors) =="
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTFS_WERROR=ON
cmake --build build -j"$JOBS"
echo "== tests =="
(cd build && ctest --output-on-failure --timeout 900)

echo "== build with AddressSanitizer + UBSan =="
# -O1 as ASan's authors advise: the instrumented checks are the same, the suite runs in about half
# the time of -O0. The CUDA backend is left out here: its tests need a GPU, and the plain build
# above compiles it with -Werror.
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-g -O1" \
  -DCMAKE_CXX_FLAGS_DEBUG="-g -O1" -DTFS_CUDA=OFF -DTFS_WERROR=ON -DTFS_SANITIZE="address;undefined"
cmake --build build-asan -j"$JOBS"
echo "== tests under AddressSanitizer + UBSan =="
# The two runtime suites (the kernels, with and without buffer reuse) are most of this stage's time
# and mostly one thread each: they run side by side (2 jobs, a longer Check timeout for it), then
# everything else one at a time, as the system tests' timing checks expect.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
runtime_suites='^runtime(-noreuse)?$'
(cd build-asan && CK_TIMEOUT_MULTIPLIER=8 ctest --output-on-failure --timeout 1800 -j2 \
   -R "$runtime_suites")
(cd build-asan && CK_TIMEOUT_MULTIPLIER=4 ctest --output-on-failure --timeout 1800 \
   -E "$runtime_suites")
unset ASAN_OPTIONS UBSAN_OPTIONS

# 10 s per driver: a smoke run of each (long runs are by hand: scripts/fuzz.sh SECONDS).
echo "== fuzz ==" ; bash scripts/fuzz.sh 10
