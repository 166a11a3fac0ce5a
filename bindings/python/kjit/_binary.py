"""Compiled binaries (``kjit_binary``): outputs, log, lowered names, loading a kernel.

Its own module so that both the cache (:meth:`Cache.get`) and the compiler can return one
without importing each other."""
from __future__ import annotations

import ctypes

from . import _lib
from ._errors import IntEnum, InvalidArgument, NameNotFound, make_error
from ._util import Handle, as_int, check, cstr, last_error, out_handle, text

TYPE_CHECKING = False  # typing only for type checkers: annotations are strings
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional

    from ._kernel import Kernel


class Tier(IntEnum):
    """Where a binary came from (``kjit_tier``)."""
    COMPILED = 0  #: NVRTC ran for this request
    MEMORY = 1    #: in-process memory tier hit
    DISK = 2      #: SQLite tier hit (this or another process, in any language, compiled it)
    REMOTE = 3    #: remote (fleet) tier hit


def _compile_failure(status: int, h: Optional[int]) -> Exception:
    """The exception for a failed compile; reads and frees the log binary if any."""
    msg = last_error()
    log = ""
    if h:
        lib = _lib.lib()
        log = text(lib.kjit_binary_log(h))
        lib.kjit_binary_destroy(h)
    return make_error(status, msg, log)


class Binary(Handle):
    """A compiled result: PTX and/or CUBIN, the log, the lowered names of the name
    expressions. Immutable and thread-safe. Obtained from :meth:`Compiler.compile` or
    :meth:`Cache.get`."""

    _kind = "Binary"

    def __init__(self) -> None:
        raise TypeError("kjit.Binary objects come from Compiler.compile() or Cache.get()")

    @classmethod
    def _wrap(cls, h: int) -> "Binary":
        self = cls.__new__(cls)
        self._h = h
        return self

    def _destroy(self, h: int) -> None:
        _lib.lib().kjit_binary_destroy(h)

    def __repr__(self) -> str:
        if self._h is None:
            return "<kjit.Binary closed>"
        return "<kjit.Binary %s target=%s tier=%s>" % (self.key[:12], self.target,
                                                       self.tier.name.lower())

    def data(self, kind: int) -> Optional[bytes]:
        """A copy of one output (an :class:`Output` value), or None when absent."""
        k = as_int(kind, "kind", 1, 4)
        if k not in (1, 2, 4):
            raise InvalidArgument(None, "kind must be Output.PTX, Output.CUBIN or "
                                        "Output.LTOIR, got %d" % k)
        size = ctypes.c_size_t()
        p = _lib.lib().kjit_binary_data(self._handle(), k, ctypes.byref(size))
        if not p:
            return None
        return ctypes.string_at(p, size.value)

    @property
    def ptx(self) -> Optional[str]:
        """The PTX text, or None when the binary has none (LTO-IR only)."""
        d = self.data(1)
        return d.decode("utf-8", "replace") if d is not None else None

    @property
    def cubin(self) -> Optional[bytes]:
        """The CUBIN (ELF), or None (compute_ targets, or PTX requested only)."""
        return self.data(2)

    @property
    def ltoir(self) -> Optional[bytes]:
        """The LTO-IR, or None."""
        return self.data(4)

    @property
    def log(self) -> str:
        """NVRTC's log: warnings on success ("" when there were none)."""
        return text(_lib.lib().kjit_binary_log(self._handle()))

    @property
    def target(self) -> str:
        """The exact target compiled for, e.g. "sm_90" (never "auto")."""
        return text(_lib.lib().kjit_binary_target(self._handle()))

    @property
    def key(self) -> str:
        """The cache key: 64 lowercase hex digits."""
        return text(_lib.lib().kjit_binary_key(self._handle()))

    @property
    def tier(self) -> Tier:
        """Where the binary came from (:class:`Tier`)."""
        return Tier(_lib.lib().kjit_binary_tier(self._handle()))

    @property
    def not_stored(self) -> Optional[str]:
        """Why the cache did not keep this compiled result ("disk full (...)", "the cache is
        read-only", a file NVRTC read that the key cannot vouch for ...), or None when it
        did (or the binary came from the cache). The result is usable either way."""
        why = ctypes.c_char_p()
        if _lib.lib().kjit_binary_stored(self._handle(), ctypes.byref(why)) == 0 and why.value:
            return why.value.decode("utf-8", "replace")
        return None

    @property
    def compile_ms(self) -> float:
        """Milliseconds NVRTC took when this result was first compiled."""
        return _lib.lib().kjit_binary_compile_ms(self._handle())

    @property
    def metadata_json(self) -> str:
        """The entry's metadata as a JSON text (options, target, names, toolchain, ...)."""
        return text(_lib.lib().kjit_binary_metadata_json(self._handle()))

    @property
    def metadata(self) -> Dict[str, Any]:
        """The entry's metadata, parsed."""
        import json  # not at module level: keeps `import kjit` light
        return json.loads(self.metadata_json)

    def lowered_name(self, expr: str) -> str:
        """The lowered (mangled) name of a name expression given at compile time.
        Raises :class:`NameNotFound` for an expression that was not given."""
        e = cstr(expr, "name expression")
        p = _lib.lib().kjit_binary_lowered_name(self._handle(), e)
        if p is None:
            raise NameNotFound(None, "name expression %r was not given to this compile "
                                     "(given: %s)" % (expr, list(self.name_expressions) or
                                                      "none"))
        return text(p)

    @property
    def name_expressions(self) -> Dict[str, str]:
        """Every name expression of the compile mapped to its lowered name, in order."""
        lib = _lib.lib()
        h = self._handle()
        return {text(lib.kjit_binary_name_expression(h, i)):
                text(lib.kjit_binary_lowered_name_at(h, i))
                for i in range(lib.kjit_binary_name_count(h))}

    @property
    def kernel_names(self) -> List[str]:
        """The ``__global__`` entry points found in the PTX, in order."""
        lib = _lib.lib()
        h = self._handle()
        return [text(lib.kjit_binary_kernel_name(h, i))
                for i in range(lib.kjit_binary_kernel_count(h))]

    def kernel(self, name: str, device: int = 0, *, no_reload: bool = False,
               force_ptx: bool = False) -> "Kernel":
        """Load kernel `name` (an ``extern "C"`` name, a mangled name or a name
        expression of this compile) onto `device`. The binary may be closed afterwards."""
        from ._kernel import Kernel, _flags
        n = cstr(name, "kernel name", allow_empty=False)
        d = as_int(device, "device", 0, 2**31 - 1)
        out = ctypes.c_void_p()
        check(_lib.lib().kjit_kernel_from_binary(self._handle(), n, d,
                                                 _flags(no_reload, force_ptx),
                                                 ctypes.byref(out)))
        return Kernel._wrap(out_handle(out), d)
