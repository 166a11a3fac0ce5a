#!/usr/bin/env bash
# Builds kjit with warnings as errors and runs every test (C/C++, CLI, examples, install,
# ABI, Rust, Go, Python and Julia checks) through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/deps.sh --test
jobs=$(nproc)
cmake -S . -B build-test -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKJIT_WERROR=ON -DKJIT_QUICK_TEST_BUILD=ON >/dev/null
cmake --build build-test -j"$jobs"
cd build-test
ctest --output-on-failure -j"$jobs" --timeout 900
