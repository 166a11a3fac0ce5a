#!/usr/bin/env bash
# The main job: build kjit and compile a kernel through a fresh cache twice, in two
# processes (cold compile + memory hit, then a disk hit); on a GPU, launch and check it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKJIT_BUILD_TESTS=OFF >/dev/null
cmake --build build --target kjit-quickstart >/dev/null
cache=$(mktemp -d /tmp/kjit-quickstart-XXXXXX)
trap 'rm -rf "$cache"' EXIT
echo "== first process (cold cache)"
./build/kjit-quickstart "$cache/cache"
echo "== second process (warm cache)"
./build/kjit-quickstart "$cache/cache"
