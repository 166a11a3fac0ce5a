"""kjit: compile CUDA C++ at run time with NVRTC, cache the results in a database shared
by every thread, process and language of the machine (C, Rust, Go, Julia, Python), and
launch kernels on CuPy, PyTorch or Numba arrays.

    import cupy as cp
    import kjit

    with kjit.Cache() as cache, kjit.Compiler(cache) as compiler:
        add = compiler.kernel(r'''
        extern "C" __global__ void my_add(const float* x1, const float* x2, float* y) {
            int tid = blockDim.x * blockIdx.x + threadIdx.x;
            y[tid] = x1[tid] + x2[tid];
        }''', "my_add")
        x1 = cp.arange(25, dtype=cp.float32)
        x2 = cp.arange(25, dtype=cp.float32)
        y = cp.zeros(25, dtype=cp.float32)
        add((5,), (5,), (x1, x2, y))

A binding of libkjit.so.0 through ctypes, standard library only, plus an optional C
extension (``kjit._fastlaunch``, built by setup.py or install.py where a C compiler and the
Python headers exist) that packs kernel arguments and launches in one call; without it
launches take the ctypes path with the same checks and errors. The
library is found through :func:`load_library`'s search order (``KJIT_LIBRARY``, a copy
next to the package, the system loader) the first time it is needed.
"""
from __future__ import annotations

import ctypes as _ctypes
import threading as _threading

TYPE_CHECKING = False  # typing only for type checkers: annotations are strings
if TYPE_CHECKING:
    from typing import Any, Optional

from . import _lib
from ._arrays import ArrayInfo, array_info, device_pointer, stream_handle
from ._cache import Cache, DiskState, RemoteState
from ._binary import Binary, Tier
from ._compile import CompileFuture, Compiler, compute_key, hash_options, hash_source
from ._errors import FastPathWarning, LinkError, NvJitLinkError
from ._errors import (ArgumentMismatch, BufferTooSmall, CacheCorrupt, CacheError,
                      Cancelled, CompileError, CublasError, CudaError, CudaSticky,
                      CudaUnavailable, InternalError, InvalidArgument, InvalidHandle,
                      InvalidOption, InvalidSource, KjitError, KjitIOError, LibraryNotFound,
                      NameNotFound, NotFound, NvrtcError, OutOfMemory, ReadOnly, StaleHandle,
                      Status, Timeout, Unsupported, UnsupportedTarget)
from ._kernel import (Kernel, LoadPath, Pointer, Scalar, bfloat16, bool_, float16, float32,
                      float64, int8, int16, int32, int64, launch_path, launch_path_reason,
                      uint8, uint16, uint32, uint64)
from ._lib import LIBRARY_NAME, library_path, load_library
from ._options import Options, Output
from ._util import as_int as _as_int, check as _check, complete as _complete, text as _text

# Imported on first use (PEP 562), so that `import kjit` stays cheap: GEMM and linking
# are not needed to compile and launch kernels, and the dataclasses of results are
# completed when first needed (_util.record: dataclasses imports inspect, ast, ...).
_LAZY = dict.fromkeys(("Gemm", "GemmCompute", "GemmDesc", "GemmDtype", "GemmEpilogue", "GemmOp",
                       "GemmOrder", "GemmStats", "cublaslt_version", "gemm_check",
                       "matmul_desc"), "._gemm")
_LAZY.update(dict.fromkeys(("InputKind", "Linker", "link", "nvjitlink_version"), "._link"))
_LAZY.update(dict.fromkeys(("GroupedGemm", "GroupedBOrder", "GroupedActivation", "grouped_check",
                            "grouped_compile"),
                           "._grouped"))
_LAZY.update(CacheStats="._cache", CacheEntry="._cache", KernelAttributes="._kernel")


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError("module 'kjit' has no attribute %r" % name)
    from importlib import import_module
    value = getattr(import_module(module, __name__), name)
    if isinstance(value, type):
        _complete(value)  # a dataclass made on first use (see _util.record)
    globals()[name] = value
    return value


def __dir__() -> "list[str]":
    # Not the module's own machinery: `from __future__ import annotations` and the
    # TYPE_CHECKING flag are no part of the API.
    return sorted((set(globals()) | set(_LAZY)) - {"annotations", "TYPE_CHECKING"})


__version__ = "0.3.0"
"""Version of this Python package (the library's is :func:`version_string`)."""


def version() -> int:
    """The library's version as major * 10000 + minor * 100 + patch."""
    return _lib.lib().kjit_version()


def version_string() -> str:
    """The library's version as "major.minor.patch"."""
    return _text(_lib.lib().kjit_version_string())


def status_string(status: int) -> str:
    """The library's name of a status, e.g. "KJIT_ERROR_COMPILE: compilation failed"."""
    return _text(_lib.lib().kjit_status_string(_as_int(status, "status", -2**31, 2**31 - 1)))


def nvrtc_version() -> str:
    """The NVRTC in use, e.g. "13.0.88 (CL-36424714)"."""
    p = _ctypes.c_char_p()
    _check(_lib.lib().kjit_nvrtc_version(_ctypes.byref(p)))
    return _text(p.value)


def device_count() -> int:
    """Number of CUDA devices; raises :class:`CudaUnavailable` without a driver."""
    n = _ctypes.c_int()
    _check(_lib.lib().kjit_device_count(_ctypes.byref(n)))
    return n.value


def device_arch(device: int = 0) -> str:
    """A device's exact architecture as an NVRTC target, e.g. "sm_90"."""
    buf = _ctypes.create_string_buffer(64)
    _check(_lib.lib().kjit_device_arch(_as_int(device, "device", 0, 2**31 - 1), buf, 64))
    return buf.value.decode()


def device_name(device: int = 0) -> str:
    """A device's name, e.g. "NVIDIA H200"."""
    buf = _ctypes.create_string_buffer(256)
    _check(_lib.lib().kjit_device_name(_as_int(device, "device", 0, 2**31 - 1), buf, 256))
    return buf.value.decode("utf-8", "replace")


def driver_version() -> int:
    """The CUDA driver version, e.g. 13000; raises :class:`CudaUnavailable` without one."""
    v = _ctypes.c_int()
    _check(_lib.lib().kjit_driver_version(_ctypes.byref(v)))
    return v.value


_default_lock = _threading.Lock()
_default: Optional[Compiler] = None


def default_compiler() -> Compiler:
    """A process-wide :class:`Compiler` over the default :class:`Cache` (``KJIT_CACHE_DIR``
    or ``~/.cache/kjit``), created on first use and shared by :func:`kernel`. Do not close
    it."""
    global _default
    with _default_lock:
        if _default is None or _default.closed:
            _default = Compiler(Cache())
        return _default


def kernel(source: Any, name: str, options: Optional[Options] = None, *, device: int = 0,
           **option_kwargs: Any) -> Kernel:
    """Compile-or-hit `source` through :func:`default_compiler` and load kernel `name`
    on `device`: the one-line form of CuPy's ``RawKernel(source, name)``. Keyword
    arguments are :class:`Options` arguments (``std=17``, ``defines={...}``, ...)."""
    return default_compiler().kernel(source, name, options, device=device, **option_kwargs)


def compile(source: Any, options: Optional[Options] = None,  # noqa: A001 (as re.compile)
            **option_kwargs: Any) -> Binary:
    """Compile-or-hit `source` through :func:`default_compiler`, for compile-only use: the
    one-line form of :meth:`Compiler.compile` beside :func:`kernel`. Keyword arguments are
    :class:`Options` arguments (``arch="sm_90"``, ``std=17``, ...). The :class:`Binary`
    holds the PTX / CUBIN (``binary.cubin``), the key, the log and ``not_stored``."""
    return default_compiler().compile(source, options, **option_kwargs)


__all__ = [
    # library
    "load_library", "library_path", "LIBRARY_NAME", "version", "version_string",
    "status_string", "nvrtc_version", "__version__",
    # devices
    "device_count", "device_arch", "device_name", "driver_version",
    # cache, compile
    "Cache", "CacheStats", "CacheEntry", "DiskState", "RemoteState", "Options", "Output",
    "Compiler", "Binary", "CompileFuture", "Tier", "compute_key", "hash_source",
    "hash_options", "default_compiler", "kernel", "compile",
    # kernels
    "Kernel", "KernelAttributes", "LoadPath", "Scalar", "Pointer", "int8", "uint8", "int16",
    "uint16", "int32", "uint32", "int64", "uint64", "float16", "bfloat16", "float32",
    "float64", "bool_", "ArrayInfo", "array_info", "device_pointer", "stream_handle",
    "launch_path", "launch_path_reason",
    # gemm
    "Gemm", "GemmDesc", "GemmStats", "GemmDtype", "GemmCompute", "GemmOrder", "GemmOp",
    "GemmEpilogue", "gemm_check", "matmul_desc", "cublaslt_version",
    # grouped GEMM
    "GroupedGemm", "GroupedBOrder", "GroupedActivation", "grouped_check", "grouped_compile",
    # errors
    "Status", "KjitError", "LibraryNotFound", "InvalidArgument", "InvalidHandle",
    "OutOfMemory", "InvalidSource", "CompileError", "FastPathWarning", "InvalidOption", "UnsupportedTarget",
    "NameNotFound", "NvrtcError", "CacheError", "CacheCorrupt", "NotFound", "ReadOnly",
    "CudaError", "CudaUnavailable", "StaleHandle", "CudaSticky", "ArgumentMismatch",
    "Unsupported", "Cancelled", "Timeout", "BufferTooSmall", "CublasError", "KjitIOError",
    "InternalError",
]
__all__ += ["Linker", "InputKind", "link", "nvjitlink_version", "LinkError", "NvJitLinkError"]
