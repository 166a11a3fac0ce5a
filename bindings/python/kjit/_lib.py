"""Finding and loading libkjit.so.0, and the ctypes prototypes of the C API.

The library is loaded on first use (or by :func:`load_library`), so ``import kjit`` is
cheap and works on machines without kjit until something is actually called.

The library is opened with :class:`ctypes.CDLL`, *not* :class:`ctypes.PyDLL`: CDLL
releases the GIL for the duration of every foreign call, so a compile (NVRTC can take
seconds) or a cache lookup never blocks the other Python threads. PyDLL would hold the
GIL. The C API is thread-safe, so calls from several Python threads may run in C at once.
"""
from __future__ import annotations

import ctypes
import os
import threading
from ctypes import (POINTER, c_char, c_char_p, c_double, c_int, c_int64, c_size_t,
                    c_uint, c_uint32, c_uint64, c_void_p)
TYPE_CHECKING = False  # typing only for type checkers: annotations are strings
if TYPE_CHECKING:
    from typing import List, Optional

from ._errors import LibraryNotFound, KjitError

LIBRARY_NAME = "libkjit.so.0"
"""The file name (SONAME) of the library this package binds."""

#: Oldest library version (major * 10000 + minor * 100 + patch) these bindings accept.
MIN_VERSION = 300

_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None
_path: Optional[str] = None

# ---- C structs (mirrors of include/kjit/*.h; struct_size is always sizeof these) -------


class CacheOptionsStruct(ctypes.Structure):
    """``kjit_cache_options`` (cache.h)."""
    _fields_ = [
        ("struct_size", c_uint32),
        ("directory", c_char_p),
        ("max_size_bytes", c_uint64),
        ("memory_max_bytes", c_uint64),
        ("read_only", c_int),
        ("memory_only", c_int),
        ("remote_url", c_char_p),
        ("remote_read_only", c_int),
    ]


class WorkerInfoStruct(ctypes.Structure):
    """``kjit_worker_info`` (compile.h, since 0.2): the compile worker's state."""
    _fields_ = [
        ("struct_size", c_uint32),
        ("running", c_int),
        ("pch_in_use", c_int),
        ("pid", c_int64),
        ("uptime_s", c_double),
        ("idle_s", c_double),
        ("compiles", c_uint64),
        ("failures", c_uint64),
        ("timeouts", c_uint64),
        ("in_flight", c_uint64),
        ("crashes", c_uint64),
        ("pch_created", c_uint64),
        ("pch_used", c_uint64),
        ("idle_limit_s", c_uint64),
        ("rss_bytes", c_uint64),
    ]


class CacheStatsStruct(ctypes.Structure):
    """``kjit_cache_stats`` (cache.h), ``not_stored`` (since 0.2) included."""
    _fields_ = [
        ("struct_size", c_uint32),
        ("disk_state", c_int),
        ("memory_hits", c_uint64),
        ("disk_hits", c_uint64),
        ("remote_hits", c_uint64),
        ("misses", c_uint64),
        ("compiles", c_uint64),
        ("stores", c_uint64),
        ("store_failures", c_uint64),
        ("corrupt_entries", c_uint64),
        ("evictions", c_uint64),
        ("waits", c_uint64),
        ("compile_ms_saved", c_double),
        ("memory_entries", c_uint64),
        ("memory_bytes", c_uint64),
        ("disk_entries", c_uint64),
        ("disk_bytes", c_uint64),
        ("max_size_bytes", c_uint64),
        ("remote_errors", c_uint64),
        ("remote_timeouts", c_uint64),
        ("message", c_char * 256),
        ("total_memory_hits", c_uint64),
        ("total_disk_hits", c_uint64),
        ("total_remote_hits", c_uint64),
        ("total_misses", c_uint64),
        ("total_compiles", c_uint64),
        ("total_corrupt_entries", c_uint64),
        ("total_evictions", c_uint64),
        ("total_remote_errors", c_uint64),
        ("total_remote_timeouts", c_uint64),
        ("total_compile_ms_saved", c_double),
        ("remote_state", c_int),
        ("not_stored", c_uint64),
        ("pch_created", c_uint64),
        ("pch_used", c_uint64),
        ("pch_failed", c_uint64),
        ("total_not_stored", c_uint64),
        ("total_pch_created", c_uint64),
        ("total_pch_used", c_uint64),
        ("total_pch_failed", c_uint64),
        ("remote_claims", c_uint64),
        ("remote_claim_waits", c_uint64),
        ("remote_claim_wait_hits", c_uint64),
        ("remote_claim_wait_timeouts", c_uint64),
        ("total_remote_claims", c_uint64),
        ("total_remote_claim_waits", c_uint64),
        ("total_remote_claim_wait_hits", c_uint64),
        ("total_remote_claim_wait_timeouts", c_uint64),
    ]


class CacheEntryInfoStruct(ctypes.Structure):
    """``kjit_cache_entry_info`` (cache.h)."""
    _fields_ = [
        ("struct_size", c_uint32),
        ("key", c_char_p),
        ("target", c_char_p),
        ("kernels", c_char_p),
        ("bytes", c_uint64),
        ("created", c_int64),
        ("last_used", c_int64),
        ("compile_ms", c_double),
    ]


class KernelAttributesStruct(ctypes.Structure):
    """``kjit_kernel_attributes`` (kernel.h)."""
    _fields_ = [
        ("struct_size", c_uint32),
        ("num_regs", c_int),
        ("static_shared_bytes", c_int),
        ("const_bytes", c_int),
        ("local_bytes", c_int),
        ("max_threads_per_block", c_int),
        ("max_dynamic_shared_bytes", c_int),
        ("ptx_version", c_int),
        ("binary_version", c_int),
    ]


class LaunchConfigStruct(ctypes.Structure):
    """``kjit_launch_config`` (kernel.h). Launches pack it with :data:`LAUNCH_CONFIG_FORMAT`
    instead (faster); the tests check that both agree with the C layout."""
    _fields_ = [
        ("struct_size", c_uint32),
        ("grid", c_uint32 * 3),
        ("block", c_uint32 * 3),
        ("shared_bytes", c_uint32),
        ("stream", c_void_p),
        ("cluster", c_uint32 * 3),
        ("cooperative", c_int),
    ]


#: struct module format of kjit_launch_config on LP64 little-endian Linux: struct_size,
#: grid[3], block[3], shared_bytes, stream, cluster[3], cooperative (56 bytes, no padding).
LAUNCH_CONFIG_FORMAT = "<I3I3IIQ3Ii"


class GemmDescStruct(ctypes.Structure):
    """``kjit_gemm_desc`` (gemm.h)."""
    _fields_ = [
        ("struct_size", c_uint32),
        ("order", ctypes.c_int32),
        ("trans_a", ctypes.c_int32),
        ("trans_b", ctypes.c_int32),
        ("m", c_int64), ("n", c_int64), ("k", c_int64),
        ("lda", c_int64), ("ldb", c_int64), ("ldc", c_int64), ("ldd", c_int64),
        ("a_type", ctypes.c_int32),
        ("b_type", ctypes.c_int32),
        ("c_type", ctypes.c_int32),
        ("d_type", ctypes.c_int32),
        ("compute", ctypes.c_int32),
        ("epilogue", ctypes.c_int32),
        ("bias_type", ctypes.c_int32),
        ("reserved0", ctypes.c_int32),
        ("batch_count", c_int64),
        ("stride_a", c_int64), ("stride_b", c_int64), ("stride_c", c_int64),
        ("stride_d", c_int64), ("stride_bias", c_int64),
        ("alpha", c_double),
        ("beta", c_double),
        ("a_scale", c_void_p),
        ("b_scale", c_void_p),
        ("d_scale", c_void_p),
    ]


class GemmOptionsStruct(ctypes.Structure):
    """``kjit_gemm_options`` (gemm.h)."""
    _fields_ = [
        ("struct_size", c_uint32),
        ("plan_capacity", c_uint32),
        ("autotune", c_int),
        ("autotune_candidates", c_uint32),
        ("autotune_warmup", c_uint32),
        ("autotune_reps", c_uint32),
        ("max_workspace_bytes", c_uint64),
    ]


class GroupedGemmDescStruct(ctypes.Structure):
    """``kjit_grouped_gemm_desc`` (grouped_gemm.h)."""
    _fields_ = [
        ("struct_size", c_uint32),
        ("groups", ctypes.c_int32),
        ("rows", c_int64), ("n", c_int64), ("k", c_int64),
        ("a_type", ctypes.c_int32),
        ("b_type", ctypes.c_int32),
        ("d_type", ctypes.c_int32),
        ("b_order", ctypes.c_int32),
        ("activation", ctypes.c_int32),
        ("reserved0", ctypes.c_int32),
        ("lda", c_int64), ("ldb", c_int64), ("ldc", c_int64), ("ldd", c_int64),
        ("stride_b", c_int64),
        ("stride_bias", c_int64),
        ("alpha", c_double),
        ("beta", c_double),
        ("scale_mode", ctypes.c_int32),  # 0.3
        ("reserved1", ctypes.c_int32),  # 0.3
    ]


class GroupedGemmOptionsStruct(ctypes.Structure):
    """``kjit_grouped_gemm_options`` (grouped_gemm.h)."""
    _fields_ = [
        ("struct_size", c_uint32),
        ("tile_n", c_uint32),
        ("stages", c_uint32),
        ("portable_only", c_int),
        ("schedule", c_int),
        ("check_offsets", c_int),  # 0.3
        ("autotune", c_int),  # 0.3
        ("cluster_m", c_uint32),  # 0.3
    ]


class GemmStatsStruct(ctypes.Structure):
    """``kjit_gemm_stats`` (gemm.h)."""
    _fields_ = [
        ("struct_size", c_uint32),
        ("runs", c_uint64),
        ("memory_hits", c_uint64),
        ("disk_hits", c_uint64),
        ("misses", c_uint64),
        ("heuristic_queries", c_uint64),
        ("autotunes", c_uint64),
        ("disk_rejected", c_uint64),
        ("disk_writes", c_uint64),
        ("evictions", c_uint64),
        ("plans", c_uint64),
        ("workspace_bytes", c_uint64),
    ]


#: Callback type of kjit_cache_list().
CACHE_LIST_FN = ctypes.CFUNCTYPE(c_int, POINTER(CacheEntryInfoStruct), c_void_p)

_st = c_int  # kjit_status
_p = c_void_p  # every opaque handle
_pp = POINTER(c_void_p)

# name: (restype, argtypes). Every public function of include/kjit/*.h except
# kjit_set_log_callback (a callback from kjit's worker threads into Python could run
# during interpreter shutdown; use KJIT_LOG=... for diagnostics) and the void** launch
# forms (launches use kjit_kernel_launch_packed).
PROTOTYPES = {
    # common.h
    "kjit_version": (c_int, []),
    "kjit_version_string": (c_char_p, []),
    "kjit_status_string": (c_char_p, [c_int]),
    "kjit_last_error": (c_char_p, []),
    "kjit_nvrtc_version": (_st, [POINTER(c_char_p)]),
    # compile.h
    "kjit_options_create": (_st, [_pp]),
    "kjit_options_clone": (_st, [_p, _pp]),
    "kjit_options_destroy": (None, [_p]),
    "kjit_options_set_target": (_st, [_p, c_char_p]),
    "kjit_options_set_device": (_st, [_p, c_int]),
    "kjit_options_set_outputs": (_st, [_p, c_uint]),
    "kjit_options_set_name": (_st, [_p, c_char_p]),
    "kjit_options_set_toolkit": (_st, [_p, c_char_p]),
    "kjit_options_set_pch": (_st, [_p, c_int]),
    "kjit_toolkit_include_path": (c_char_p, []),
    "kjit_options_add": (_st, [_p, c_char_p]),
    "kjit_options_add_define": (_st, [_p, c_char_p, c_char_p]),
    "kjit_options_add_include_path": (_st, [_p, c_char_p]),
    "kjit_options_add_header": (_st, [_p, c_char_p, c_char_p]),
    "kjit_options_add_name_expression": (_st, [_p, c_char_p]),
    "kjit_compiler_create": (_st, [_p, c_uint, _pp]),
    "kjit_compiler_destroy": (None, [_p]),
    "kjit_compiler_set_compile_mode": (_st, [_p, c_int]),
    "kjit_compiler_get_compile_mode": (_st, [_p, POINTER(c_int)]),
    "kjit_worker_info_get": (_st, [_p, POINTER(WorkerInfoStruct)]),
    "kjit_compile": (_st, [_p, c_char_p, _p, _pp]),
    "kjit_source_create": (_st, [c_char_p, c_size_t, _pp]),
    "kjit_source_destroy": (None, [_p]),
    "kjit_compile_source": (_st, [_p, _p, _p, _pp]),
    "kjit_compile_async": (_st, [_p, c_char_p, _p, _pp]),
    "kjit_future_wait": (_st, [_p, c_int64, _pp]),
    "kjit_future_ready": (c_int, [_p]),
    "kjit_future_cancel": (_st, [_p]),
    "kjit_future_destroy": (None, [_p]),
    "kjit_compile_many": (_st, [_p, c_size_t, POINTER(c_char_p), _pp, _pp, POINTER(c_int)]),
    "kjit_binary_destroy": (None, [_p]),
    "kjit_binary_status": (_st, [_p]),
    "kjit_binary_data": (c_void_p, [_p, c_int, POINTER(c_size_t)]),
    "kjit_binary_log": (c_char_p, [_p]),
    "kjit_binary_target": (c_char_p, [_p]),
    "kjit_binary_key": (c_char_p, [_p]),
    "kjit_binary_tier": (c_int, [_p]),
    "kjit_binary_stored": (c_int, [_p, POINTER(c_char_p)]),
    "kjit_binary_param_count": (_st, [_p, c_char_p, POINTER(c_size_t)]),
    "kjit_binary_param_info": (_st, [_p, c_char_p, c_size_t, POINTER(c_size_t), POINTER(c_size_t)]),
    "kjit_binary_advisory_count": (c_size_t, [_p]),
    "kjit_binary_advisory": (c_char_p, [_p, c_size_t]),
    "kjit_binary_compile_ms": (c_double, [_p]),
    "kjit_binary_lowered_name": (c_char_p, [_p, c_char_p]),
    "kjit_binary_name_count": (c_size_t, [_p]),
    "kjit_binary_name_expression": (c_char_p, [_p, c_size_t]),
    "kjit_binary_lowered_name_at": (c_char_p, [_p, c_size_t]),
    "kjit_binary_kernel_count": (c_size_t, [_p]),
    "kjit_binary_kernel_name": (c_char_p, [_p, c_size_t]),
    "kjit_binary_metadata_json": (c_char_p, [_p]),
    "kjit_hash_source": (_st, [c_char_p, c_size_t, c_char_p]),
    "kjit_hash_options": (_st, [POINTER(c_char_p), c_size_t, c_char_p]),
    "kjit_compute_key": (_st, [c_char_p, _p, c_char_p]),
    "kjit_compute_key_cached": (_st, [_p, c_char_p, _p, c_char_p, POINTER(c_int)]),
    # cache.h
    "kjit_cache_options_init": (None, [POINTER(CacheOptionsStruct)]),
    "kjit_cache_options_init_sized": (_st, [POINTER(CacheOptionsStruct), c_size_t]),
    "kjit_cache_stats_init_sized": (_st, [POINTER(CacheStatsStruct), c_size_t]),
    "kjit_cache_open": (_st, [POINTER(CacheOptionsStruct), _pp]),
    "kjit_cache_close": (None, [_p]),
    "kjit_cache_directory": (c_char_p, [_p]),
    "kjit_cache_stats_get": (_st, [_p, POINTER(CacheStatsStruct)]),
    "kjit_cache_remote_info": (_st, [_p, c_int, POINTER(c_char_p)]),
    "kjit_cache_clear_memory": (_st, [_p]),
    "kjit_cache_clear": (_st, [_p]),
    "kjit_cache_get": (_st, [_p, c_char_p, _pp]),
    "kjit_cache_put": (_st, [_p, _p]),
    "kjit_cache_remove": (_st, [_p, c_char_p]),
    "kjit_cache_list": (_st, [_p, CACHE_LIST_FN, c_void_p]),
    "kjit_cache_verify": (_st, [_p, POINTER(c_uint64), POINTER(c_uint64)]),
    "kjit_cache_prune": (_st, [_p, c_uint64, POINTER(c_uint64)]),
    "kjit_cache_export": (_st, [_p, c_char_p, POINTER(c_uint64)]),
    "kjit_cache_import": (_st, [_p, c_char_p, POINTER(c_uint64), POINTER(c_uint64)]),
    # kernel.h
    "kjit_device_count": (_st, [POINTER(c_int)]),
    "kjit_device_arch": (_st, [c_int, c_char_p, c_size_t]),
    "kjit_device_arch_cached": (_st, [_p, c_int, c_char_p, c_size_t, POINTER(c_int)]),
    "kjit_device_name": (_st, [c_int, c_char_p, c_size_t]),
    "kjit_driver_version": (_st, [POINTER(c_int)]),
    "kjit_kernel_create": (_st, [_p, c_char_p, c_char_p, _p, c_int, c_uint, _pp, _pp]),
    "kjit_kernel_from_binary": (_st, [_p, c_char_p, c_int, c_uint, _pp]),
    "kjit_kernel_destroy": (None, [_p]),
    "kjit_kernel_load_path": (c_int, [_p]),
    "kjit_kernel_symbol": (c_char_p, [_p]),
    "kjit_kernel_param_count": (_st, [_p, POINTER(c_size_t)]),
    "kjit_kernel_param_info": (_st, [_p, c_size_t, POINTER(c_size_t), POINTER(c_size_t)]),
    "kjit_kernel_param_buffer_size": (_st, [_p, POINTER(c_size_t)]),
    "kjit_kernel_get_attributes": (_st, [_p, POINTER(KernelAttributesStruct)]),
    "kjit_kernel_set_max_dynamic_shared": (_st, [_p, c_int]),
    "kjit_kernel_occupancy": (_st, [_p, c_int, c_size_t, POINTER(c_int)]),
    "kjit_kernel_suggest_block_size": (_st, [_p, c_size_t, POINTER(c_int), POINTER(c_int)]),
    "kjit_launch_config_init": (None, [POINTER(LaunchConfigStruct)]),
    "kjit_launch_config_init_sized": (_st, [POINTER(LaunchConfigStruct), c_size_t]),
    "kjit_kernel_attributes_init_sized": (_st, [POINTER(KernelAttributesStruct), c_size_t]),
    "kjit_worker_info_init_sized": (_st, [POINTER(WorkerInfoStruct), c_size_t]),
    # The launch config and the parameter buffer are passed as c_void_p so that a bytes
    # object goes through without a copy (the C side only reads them).
    "kjit_kernel_launch_packed": (_st, [_p, c_void_p, c_void_p, c_size_t]),
    "kjit_kernel_launch_params": (_st, [_p, c_void_p, c_void_p, c_size_t, c_size_t]),
    # gemm.h
    "kjit_gemm_desc_init": (None, [POINTER(GemmDescStruct)]),
    "kjit_gemm_options_init": (None, [POINTER(GemmOptionsStruct)]),
    "kjit_gemm_desc_init_sized": (_st, [POINTER(GemmDescStruct), c_size_t]),
    "kjit_gemm_options_init_sized": (_st, [POINTER(GemmOptionsStruct), c_size_t]),
    "kjit_gemm_stats_init_sized": (_st, [POINTER(GemmStatsStruct), c_size_t]),
    "kjit_gemm_create": (_st, [_p, c_int, POINTER(GemmOptionsStruct), _pp]),
    "kjit_gemm_destroy": (None, [_p]),
    "kjit_gemm_check": (_st, [POINTER(GemmDescStruct), _p, _p, _p, _p, _p]),
    "kjit_gemm_run": (_st, [_p, POINTER(GemmDescStruct), _p, _p, _p, _p, _p, _p]),
    "kjit_gemm_clear_plans": (_st, [_p]),
    "kjit_gemm_stats_get": (_st, [_p, POINTER(GemmStatsStruct)]),
    # grouped_gemm.h
    "kjit_grouped_gemm_desc_init_sized": (_st, [POINTER(GroupedGemmDescStruct), c_size_t]),
    "kjit_grouped_gemm_options_init_sized": (_st, [POINTER(GroupedGemmOptionsStruct),
                                                   c_size_t]),
    "kjit_grouped_gemm_create": (_st, [_p, c_int, POINTER(GroupedGemmOptionsStruct), _pp]),
    "kjit_grouped_gemm_destroy": (None, [_p]),
    "kjit_grouped_gemm_check": (_st, [POINTER(GroupedGemmDescStruct), _p, _p, _p, _p, _p,
                                      _p]),
    "kjit_grouped_gemm_run": (_st, [_p, POINTER(GroupedGemmDescStruct), _p, _p, _p, _p, _p,
                                    _p, _p]),
    "kjit_grouped_gemm_run_scaled": (_st, [_p, POINTER(GroupedGemmDescStruct), _p, _p, _p, _p,
                                           _p, _p, _p, _p, _p]),
    "kjit_grouped_gemm_prepare": (_st, [_p, POINTER(GroupedGemmDescStruct), c_int]),
    "kjit_grouped_gemm_plan_key": (_st, [_p, POINTER(GroupedGemmDescStruct), _p, _p, _p, _p,
                                         _p, ctypes.c_char_p, c_size_t,
                                         POINTER(c_size_t)]),
    "kjit_grouped_gemm_offsets_status": (_st, [_p]),
    "kjit_grouped_gemm_compile": (_st, [_p, c_char_p, POINTER(GroupedGemmDescStruct),
                                        POINTER(GroupedGemmOptionsStruct), c_int, _pp]),
    "kjit_cublaslt_version": (_st, [POINTER(c_size_t)]),
}


def _package_dir() -> str:
    return os.path.dirname(os.path.abspath(__file__))


def candidates(path: Optional[str] = None) -> List[str]:
    """The places :func:`load_library` tries, in order, as descriptions (for messages)."""
    out = []
    if path is not None:
        out.append("explicit path %s" % path)
    env = os.environ.get("KJIT_LIBRARY")
    out.append("KJIT_LIBRARY=%s" % env if env else "KJIT_LIBRARY (unset)")
    pkg = _package_dir()
    out.append(os.path.join(pkg, LIBRARY_NAME))
    out.append(os.path.join(os.path.dirname(pkg), LIBRARY_NAME))
    out.append("system loader (%s)" % LIBRARY_NAME)
    return out


def _open(target: str) -> ctypes.CDLL:
    # CDLL, not PyDLL: the GIL is released around every call (see the module docstring).
    return ctypes.CDLL(target, mode=ctypes.RTLD_LOCAL)


def declare(prototypes: "dict[str, tuple]") -> None:
    """Add prototypes of a module loaded after this one (kjit._link, imported on first
    use): declared on the library now when it is loaded already, else when it loads."""
    with _lock:
        PROTOTYPES.update(prototypes)
        if _lib is not None:
            for name, (restype, argtypes) in prototypes.items():
                fn = getattr(_lib, name, None)
                if fn is not None:  # a library without it says so when it is called
                    fn.restype = restype
                    fn.argtypes = argtypes


def _declare(lib: ctypes.CDLL, where: str) -> None:
    missing = []
    for name, (restype, argtypes) in PROTOTYPES.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            missing.append(name)
            continue
        fn.restype = restype
        fn.argtypes = argtypes
    if missing:
        raise LibraryNotFound(
            "%s is not a usable kjit library: it lacks %s (too old, or not kjit)"
            % (where, ", ".join(missing[:8]) + (" ..." if len(missing) > 8 else "")))
    version = lib.kjit_version()
    if version // 10000 != MIN_VERSION // 10000 or version < MIN_VERSION:
        raise LibraryNotFound(
            "%s is kjit %s; these bindings need %d.%d.x (at least %d.%d.%d)"
            % (where, lib.kjit_version_string().decode(), MIN_VERSION // 10000,
               MIN_VERSION // 100 % 100, MIN_VERSION // 10000, MIN_VERSION // 100 % 100,
               MIN_VERSION % 100))


def load_library(path: Optional["os.PathLike[str] | str"] = None) -> str:
    """Load libkjit and return the path it was loaded from (idempotent).

    Looks, in this order, at: ``path`` when given; the environment variable
    ``KJIT_LIBRARY``; ``libkjit.so.0`` inside this package's directory and in the
    directory that holds the package (a bundled copy); the system loader
    (``LD_LIBRARY_PATH``, ``ldconfig``). A path given explicitly or through
    ``KJIT_LIBRARY`` is authoritative: when it cannot be loaded this fails instead of
    falling back to another copy.

    Every other function loads the library on first use, so calling this is only needed
    to pick an explicit path, or to fail early. Raises :class:`LibraryNotFound` naming
    every place tried and why each failed, or :class:`KjitError` when a library is already
    loaded from a different path.
    """
    global _lib, _path
    if path is not None:
        path = os.fspath(path)
        if not isinstance(path, str):
            raise TypeError("load_library: path must be a str or os.PathLike of str")
    with _lock:
        if _lib is not None:
            if path is not None and os.path.realpath(path) != os.path.realpath(_path or ""):
                raise KjitError(None, "load_library: libkjit is already loaded from %s; "
                                      "cannot switch to %s in this process" % (_path, path))
            return _path or LIBRARY_NAME
        tried = []

        def attempt(target: str, label: str, authoritative: bool):
            try:
                lib = _open(target)
            except OSError as e:
                tried.append("%s: %s" % (label, e))
                if authoritative:
                    raise LibraryNotFound("could not load libkjit from %s: %s" % (label, e))
                return None
            _declare(lib, label)
            return lib

        lib = None
        where = None
        if path is not None:
            lib, where = attempt(path, "explicit path " + path, True), path
        else:
            env = os.environ.get("KJIT_LIBRARY")
            if env:
                lib, where = attempt(env, "KJIT_LIBRARY=" + env, True), env
            else:
                tried.append("KJIT_LIBRARY: not set")
                pkg = _package_dir()
                for d in (pkg, os.path.dirname(pkg)):
                    f = os.path.join(d, LIBRARY_NAME)
                    if not os.path.exists(f):
                        tried.append("%s: no such file" % f)
                        continue
                    lib, where = attempt(f, f, False), f
                    if lib is not None:
                        break
                if lib is None:
                    lib = attempt(LIBRARY_NAME, "system loader (%s)" % LIBRARY_NAME, False)
                    where = _loaded_path(LIBRARY_NAME) if lib is not None else None
        if lib is None:
            raise LibraryNotFound(
                "libkjit.so.0 not found. Tried:\n  " + "\n  ".join(tried) +
                "\nSet KJIT_LIBRARY to the path of libkjit.so.0 (e.g. build/libkjit.so.0), "
                "add its directory to LD_LIBRARY_PATH, or call kjit.load_library(path).")
        _lib, _path = lib, where
        return where or LIBRARY_NAME


def _loaded_path(name: str) -> str:
    """Where the dynamic loader found `name` (from /proc/self/maps), else `name`."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                fields = line.split(None, 5)
                if len(fields) == 6 and os.path.basename(fields[5].strip()).startswith(
                        name.split(".so")[0] + ".so"):
                    return fields[5].strip()
    except OSError:
        pass
    return name


def library_path() -> Optional[str]:
    """The path libkjit was loaded from, or None when it is not loaded yet."""
    return _path if _lib is not None else None


def lib() -> ctypes.CDLL:
    """The loaded library (loading it on first use)."""
    if _lib is None:
        load_library()
    assert _lib is not None
    return _lib
