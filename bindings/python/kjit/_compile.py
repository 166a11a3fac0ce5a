"""The compiler and pending compiles (include/kjit/compile.h); binaries are in _binary."""
from __future__ import annotations

import ctypes

from . import _lib
from ._binary import Binary, Tier, _compile_failure
from ._cache import Cache, _cache_handle
from ._errors import InvalidArgument
from ._options import Options, resolve_options
from ._util import Handle, as_int, check, cstr, out_handle, text

from collections.abc import Sequence

TYPE_CHECKING = False  # typing only for type checkers: annotations are strings
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Union

    from ._kernel import Kernel


    Source = Union[str, bytes]


def _source(source: Any) -> bytes:
    return cstr(source, "source", allow_bytes=True, allow_empty=False)


class CompileFuture(Handle):
    """A compile running on the compiler's worker pool (:meth:`Compiler.compile_async`).
    :meth:`result` waits (without holding the GIL) and returns the :class:`Binary` or
    raises what :meth:`Compiler.compile` would have."""

    _kind = "CompileFuture"

    def __init__(self) -> None:
        raise TypeError("kjit.CompileFuture objects come from Compiler.compile_async()")

    @classmethod
    def _wrap(cls, h: int) -> "CompileFuture":
        self = cls.__new__(cls)
        self._h = h
        return self

    def _destroy(self, h: int) -> None:
        _lib.lib().kjit_future_destroy(h)

    def done(self) -> bool:
        """True when :meth:`result` would not block."""
        return _lib.lib().kjit_future_ready(self._handle()) == 1

    def cancel(self) -> None:
        """Ask the compile to stop; a compile that already finished keeps its result."""
        check(_lib.lib().kjit_future_cancel(self._handle()))

    def result(self, timeout: Optional[float] = None) -> Binary:
        """Wait up to `timeout` seconds (None = forever) and return the binary; raises
        :class:`Timeout` when not done yet, :class:`Cancelled` after :meth:`cancel`, or
        the compile's own error. The binary can be taken once."""
        if timeout is None:
            ms = -1
        else:
            if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
                raise TypeError("timeout must be a number of seconds or None")
            if not timeout >= 0:
                raise InvalidArgument(None, "timeout must be >= 0, got %r" % timeout)
            ms = min(int(timeout * 1000), 2**62)
        out = ctypes.c_void_p()
        st = _lib.lib().kjit_future_wait(self._handle(), ms, ctypes.byref(out))
        if st:
            raise _compile_failure(st, out.value)
        return Binary._wrap(out_handle(out))


class Compiler(Handle):
    """The NVRTC front end. With a :class:`Cache`, every compile goes through it: hits
    return stored results, misses compile and store.

    Thread-safe: compiles from several Python threads run in parallel (the GIL is
    released while NVRTC runs and while waiting for the cache).

    Args:
        cache: the cache to go through, or None (compile every time).
        threads: worker pool size of :meth:`compile_async` (0 = CPU cores).
    """

    _kind = "Compiler"

    def __init__(self, cache: Optional[Cache] = None, threads: int = 0) -> None:
        ch = _cache_handle(cache, "Compiler")
        n = as_int(threads, "threads", 0, 2**32 - 1)
        h = ctypes.c_void_p()
        check(_lib.lib().kjit_compiler_create(ch, n, ctypes.byref(h)))
        self._cache = cache
        if cache is not None:
            cache._acquire()
        self._h = out_handle(h)

    def _destroy(self, h: int) -> None:
        _lib.lib().kjit_compiler_destroy(h)
        if self._cache is not None:
            self._cache._release()

    def __repr__(self) -> str:
        state = "closed" if self._h is None else repr(self._cache)
        return "<kjit.Compiler %s>" % state

    @property
    def cache(self) -> Optional[Cache]:
        """The cache this compiler goes through (or None)."""
        return self._cache

    def compile(self, source: Source, options: Optional[Options] = None,
                **option_kwargs: Any) -> Binary:
        """Compile `source` (CUDA C++, str or UTF-8 bytes), or return the cached result.

        Options come from `options` or, as a shortcut, from keyword arguments of
        :class:`Options` (``compiler.compile(src, arch="sm_90", std=17)``).
        Raises :class:`CompileError` (with ``.log``) when NVRTC rejects the source,
        :class:`InvalidOption`, :class:`UnsupportedTarget`, :class:`NameNotFound`, or
        :class:`CudaUnavailable` for ``arch="auto"`` without a driver.
        """
        src = _source(source)
        opts, owned = resolve_options(options, option_kwargs, "compile")
        try:
            out = ctypes.c_void_p()
            st = _lib.lib().kjit_compile(self._handle(), src, opts._h if opts else None,
                                         ctypes.byref(out))
        finally:
            if owned and opts is not None:
                opts.close()
        if st:
            raise _compile_failure(st, out.value)
        return Binary._wrap(out_handle(out))

    def compile_async(self, source: Source, options: Optional[Options] = None,
                      **option_kwargs: Any) -> CompileFuture:
        """Start compiling on the compiler's worker pool; returns a
        :class:`CompileFuture` at once. The source and options are copied."""
        src = _source(source)
        opts, owned = resolve_options(options, option_kwargs, "compile_async")
        try:
            out = ctypes.c_void_p()
            check(_lib.lib().kjit_compile_async(self._handle(), src,
                                                opts._h if opts else None,
                                                ctypes.byref(out)))
        finally:
            if owned and opts is not None:
                opts.close()
        return CompileFuture._wrap(out_handle(out))

    def kernel(self, source: Source, name: str, options: Optional[Options] = None, *,
               device: int = 0, no_reload: bool = False, force_ptx: bool = False,
               **option_kwargs: Any) -> "Kernel":
        """Compile-or-hit `source` for `device` and load kernel `name`: an
        ``extern "C"`` name, a mangled name, or a name expression such as
        ``"scale<float>"`` (added to the options automatically).

        The target is forced to the device's exact architecture (unless the options ask
        for its ``sm_XYa`` variant); PTX is loaded when NVRTC cannot make a CUBIN for it.
        Raises what :meth:`compile` raises, and :class:`CudaUnavailable` without a
        driver or device.
        """
        from ._kernel import Kernel, _flags
        src = _source(source)
        n = cstr(name, "kernel name", allow_empty=False)
        d = as_int(device, "device", 0, 2**31 - 1)
        flags = _flags(no_reload, force_ptx)
        opts, owned = resolve_options(options, option_kwargs, "kernel")
        try:
            out, log = ctypes.c_void_p(), ctypes.c_void_p()
            st = _lib.lib().kjit_kernel_create(self._handle(), src, n,
                                               opts._h if opts else None, d, flags,
                                               ctypes.byref(out), ctypes.byref(log))
        finally:
            if owned and opts is not None:
                opts.close()
        if st:
            raise _compile_failure(st, log.value)
        return Kernel._wrap(out_handle(out), d)


def compute_key(source: Source, options: Optional[Options] = None,
                **option_kwargs: Any) -> str:
    """The cache key :meth:`Compiler.compile` would use for (source, options), without
    compiling (64 hex digits). Reads the files reachable through ``#include``."""
    src = _source(source)
    opts, owned = resolve_options(options, option_kwargs, "compute_key")
    out = ctypes.create_string_buffer(65)
    try:
        check(_lib.lib().kjit_compute_key(src, opts._h if opts else None, out))
    finally:
        if owned and opts is not None:
            opts.close()
    return out.value.decode()


def hash_source(data: Union[str, bytes]) -> str:
    """SHA-256 of `data` (str is hashed as UTF-8) as 64 lowercase hex digits."""
    if isinstance(data, str):
        try:
            b = data.encode("utf-8")
        except UnicodeEncodeError as e:
            raise InvalidArgument(None, "data is not valid Unicode text (%s)" % e) from None
    elif isinstance(data, (bytes, bytearray, memoryview)):
        b = bytes(data)
    else:
        raise TypeError("data must be str or bytes, not %s" % type(data).__name__)
    out = ctypes.create_string_buffer(65)
    # A zero-length bytes object still passes a valid pointer.
    check(_lib.lib().kjit_hash_source(b, len(b), out))
    return out.value.decode()


def hash_options(options: Sequence[str]) -> str:
    """SHA-256 over a length-prefixed, order-sensitive encoding of `options`."""
    if isinstance(options, (str, bytes)) or not isinstance(options, Sequence):
        raise TypeError("options must be a sequence of str")
    items = [cstr(o, "options[%d]" % i) for i, o in enumerate(options)]
    arr = (ctypes.c_char_p * max(1, len(items)))(*items)
    out = ctypes.create_string_buffer(65)
    check(_lib.lib().kjit_hash_options(arr, len(items), out))
    return out.value.decode()

