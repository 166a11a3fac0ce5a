#!/usr/bin/env bash
# Installs the Debian packages kjit needs to build and test, if any are missing.
# The CUDA toolkit (NVRTC, headers) is expected at /usr/local/cuda.
set -euo pipefail
packages=(build-essential cmake ninja-build pkg-config libsqlite3-dev libcjson-dev nettle-dev libxxhash-dev
          libgtest-dev sqlite3 python3)
if [[ "${1:-}" == "--test" ]]; then
  packages+=(abigail-tools clang libclang-rt-14-dev redis-server redis-sentinel libhiredis-dev
            python3-numpy python3-pip python3-setuptools python3-dev)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Toolchains that may come from elsewhere than Debian: install only when the command is absent.
if [[ "${1:-}" == "--test" ]]; then
  command -v go >/dev/null || missing+=(golang-go)
  command -v node >/dev/null || missing+=(nodejs)
  command -v npm >/dev/null || missing+=(npm)
fi
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [[ ! -x /usr/local/cuda/bin/nvcc && ! -e /usr/local/cuda/include/nvrtc.h ]]; then
  echo "error: the CUDA toolkit (NVRTC) is expected at /usr/local/cuda" >&2
  exit 1
fi
