"""Shared helpers of the kjit Python tests (standard library unittest only).

The tests import the package from the source tree next to them (bindings/python/kjit),
and find libkjit.so.0 the way users do (KJIT_LIBRARY, a bundled copy, the system
loader). Environment:

    KJIT_LIBRARY       path of libkjit.so.0 (e.g. build/libkjit.so.0)
    KJIT_TEST_ARCH     target of the compile-only tests (default sm_80)
    KJIT_CROSSLANG_C   the C leg of the shared-cache test (tests/crosslang/crosslang.c,
                       built by bindings/test_bindings.sh)
    KJIT_CLI           the kjit command line tool (default: build/src/cli/kjit of the
                       repository, when there)
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import zlib
from typing import Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
PKG_ROOT = os.path.dirname(HERE)                       # bindings/python
REPO = os.path.dirname(os.path.dirname(PKG_ROOT))      # the kjit checkout, when it is one
if PKG_ROOT not in sys.path:
    sys.path.insert(0, PKG_ROOT)

import kjit  # noqa: E402

ARCH = os.environ.get("KJIT_TEST_ARCH", "sm_80")

SAXPY = r'''
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
'''

TEMPLATED = r'''
template <typename T, int N>
__global__ void fill(T* out, T value, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value + T(N);
}
'''


def tempdir(test: unittest.TestCase, prefix: str = "kjit-py-") -> str:
    """A temporary directory removed when the test ends."""
    d = tempfile.mkdtemp(prefix=prefix)
    test.addCleanup(shutil.rmtree, d, True)
    return d


def unique_source(tag: str) -> str:
    """A small kernel whose text (so whose cache key) is unique to `tag`."""
    return 'extern "C" __global__ void k_%s(int* p) { if (p) *p = %d; }\n' % (
        tag, zlib.crc32(tag.encode()) % 100000)


def no_gpu_reason() -> Optional[str]:
    """Why there is no usable GPU (None when there is one)."""
    try:
        n = kjit.device_count()
    except kjit.CudaUnavailable as e:
        return "no CUDA driver: %s" % e.message
    except kjit.KjitError as e:
        return "CUDA unusable: %s" % e
    return None if n > 0 else "no CUDA device"


def subprocess_env(**extra: str) -> Dict[str, str]:
    """The environment for a child Python that imports this source tree."""
    env = dict(os.environ)
    env["PYTHONPATH"] = PKG_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def run_python(code: str, env: Optional[Dict[str, str]] = None,
               cwd: Optional[str] = None) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter (the one running the tests)."""
    return subprocess.run([sys.executable, "-c", code], env=env or subprocess_env(),
                          cwd=cwd, capture_output=True, text=True, timeout=300)


def find_cli() -> Optional[str]:
    """The kjit CLI, if one can be found."""
    p = os.environ.get("KJIT_CLI")
    if p:
        return p if os.access(p, os.X_OK) else None
    for build in sorted(d for d in os.listdir(REPO) if d.startswith("build")) \
            if os.path.isdir(REPO) else []:
        c = os.path.join(REPO, build, "src", "cli", "kjit")
        if os.access(c, os.X_OK):
            return c
    return shutil.which("kjit")


def header_dir() -> Optional[str]:
    """include/ holding kjit/kjit.h (the checkout's), if present."""
    for d in (os.environ.get("KJIT_INCLUDE_DIR"), os.path.join(REPO, "include")):
        if d and os.path.isfile(os.path.join(d, "kjit", "kjit.h")):
            return d
    return None


def public_functions(include: str) -> Dict[str, List[str]]:
    """Every function of include/kjit/*.h mapped to its parameter list (as text)."""
    import re
    out: Dict[str, List[str]] = {}
    for name in sorted(os.listdir(os.path.join(include, "kjit"))):
        if not name.endswith(".h"):
            continue
        with open(os.path.join(include, "kjit", name)) as f:
            src = f.read()
        src = re.sub(r"/\*.*?\*/", "", src, flags=re.S)
        src = re.sub(r"//[^\n]*", "", src)
        for m in re.finditer(r"\bKJIT_EXPORT\b[^;{}#]*?\b(kjit_\w+)\s*\(([^)]*)\)", src, re.S):
            params = [p.strip() for p in m.group(2).split(",")]
            out[m.group(1)] = [] if params == ["void"] else params
    return out
