"""The link step through nvJitLink (include/kjit/link.h): kjit binaries and device code
from elsewhere (LTO-IR, PTX, CUBIN, fatbinaries, objects, static libraries) linked into a
CUBIN, cached like a compile.

    caller = compiler.compile(caller_src, arch="sm_90", outputs=kjit.Output.LTOIR,
                              options=["-rdc=true"])
    callee = compiler.compile(callee_src, arch="sm_90", outputs=kjit.Output.LTOIR,
                              options=["-rdc=true"])
    linked = kjit.link([caller, callee], cache=cache, lto=True)
    apply = linked.kernel("apply")
"""
from __future__ import annotations

import ctypes
import os
from ctypes import POINTER, c_char_p, c_int, c_size_t, c_uint, c_void_p
TYPE_CHECKING = False  # typing only for type checkers: annotations are strings
if TYPE_CHECKING:
    from typing import Iterable, Optional, Union

from . import _lib
from ._cache import Cache, _cache_handle
from ._binary import Binary
from ._errors import IntEnum, InvalidArgument, make_error
from ._util import Handle, as_int, check, cstr, last_error, out_handle, text

# The C functions of link.h, declared with the others when the library is loaded (or
# now, when this module is imported after that: it is imported on first use).
_lib.declare({
    "kjit_linker_create": (c_int, [c_void_p, POINTER(c_void_p)]),
    "kjit_linker_destroy": (None, [c_void_p]),
    "kjit_linker_set_target": (c_int, [c_void_p, c_char_p]),
    "kjit_linker_add_option": (c_int, [c_void_p, c_char_p]),
    "kjit_linker_set_outputs": (c_int, [c_void_p, c_uint]),
    "kjit_linker_add_binary": (c_int, [c_void_p, c_void_p, c_char_p]),
    "kjit_linker_add_data": (c_int, [c_void_p, c_int, c_void_p, c_size_t, c_char_p]),
    "kjit_linker_add_file": (c_int, [c_void_p, c_int, c_char_p]),
    "kjit_link": (c_int, [c_void_p, POINTER(c_void_p)]),
    "kjit_linker_key": (c_int, [c_void_p, c_char_p]),
    "kjit_nvjitlink_version": (c_int, [POINTER(c_char_p)]),
})


class InputKind(IntEnum):
    """Kinds of link input (``kjit_link_input``)."""
    AUTO = 0     #: files only: from the name (.cubin .ptx .ltoir .fatbin .o .a)
    CUBIN = 1    #: relocatable CUBIN (compiled with -rdc=true)
    PTX = 2      #: PTX text (compiled with -rdc=true)
    LTOIR = 3    #: LTO-IR (compiled to Output.LTOIR; link with lto=True)
    FATBIN = 4   #: fatbinary
    OBJECT = 5   #: host object file with device code
    LIBRARY = 6  #: static library of such objects


if TYPE_CHECKING:
    Input = Union[Binary, str, "os.PathLike[str]", tuple]


class Linker(Handle):
    """A link: inputs, options and target, linked by :meth:`link` (or answered by the
    cache). Safe to link from several threads at once; not to modify while linking.

    Args:
        cache: the :class:`Cache` the links go through (None: no cache).
        target: "sm_90", "sm_90a", ... or "auto" (device 0). Default: the target of the
            first kjit binary added.
        lto: link-time optimisation (``-lto``), needed for LTO-IR inputs.
        options: further nvJitLink options, e.g. ``["-O3", "-ftz=1"]``.
        ptx: also (``"also"``) or only (True) produce PTX (needs ``lto``).
    """

    _kind = "Linker"

    def __init__(self, cache: Optional[Cache] = None, *, target: Optional[str] = None,
                 lto: bool = False, options: Iterable[str] = (),
                 ptx: Union[bool, str] = False) -> None:
        c = _cache_handle(cache, "Linker")
        out = ctypes.c_void_p()
        check(_lib.lib().kjit_linker_create(c, ctypes.byref(out)))
        self._h = out_handle(out)
        self._cache = cache  # keeps the cache alive while the linker is
        if target is not None:
            self.set_target(target)
        if lto:
            self.add_option("-lto")
        for o in options:
            self.add_option(o)
        if ptx:
            self.set_outputs(1 | (2 if ptx == "also" else 0))

    def _destroy(self, h: int) -> None:
        _lib.lib().kjit_linker_destroy(h)

    def set_target(self, target: str) -> "Linker":
        """Set the target ("sm_90", "auto", ...)."""
        check(_lib.lib().kjit_linker_set_target(self._handle(), cstr(target, "target",
                                                                     allow_empty=False)))
        return self

    def add_option(self, option: str) -> "Linker":
        """Append one nvJitLink option, e.g. "-O3", "-maxrregcount=64", "-ftz=1"."""
        check(_lib.lib().kjit_linker_add_option(self._handle(), cstr(option, "option",
                                                                     allow_empty=False)))
        return self

    def set_outputs(self, outputs: int) -> "Linker":
        """What the link produces: an :class:`Output` mask of CUBIN and/or PTX."""
        check(_lib.lib().kjit_linker_set_outputs(self._handle(),
                                                 as_int(outputs, "outputs", 0, 2**32 - 1)))
        return self

    def add_binary(self, binary: Binary, name: Optional[str] = None) -> "Linker":
        """Add a compile or link result: its LTO-IR, else its CUBIN for the target's
        architecture, else its PTX."""
        if not isinstance(binary, Binary):
            raise TypeError("add_binary needs a kjit.Binary, not %s" % type(binary).__name__)
        n = cstr(name, "name") if name is not None else None
        check(_lib.lib().kjit_linker_add_binary(self._handle(), binary._handle(), n))
        return self

    def add_data(self, kind: int, data: Union[bytes, bytearray, memoryview, str],
                 name: Optional[str] = None) -> "Linker":
        """Add bytes of one :class:`InputKind` (not AUTO); they are copied."""
        k = as_int(kind, "kind", 1, 6)
        if isinstance(data, str):
            data = data.encode("utf-8")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError("data must be bytes or str, not %s" % type(data).__name__)
        buf = bytes(data)
        if not buf:
            raise InvalidArgument(None, "link input data is empty")
        n = cstr(name, "name") if name is not None else None
        check(_lib.lib().kjit_linker_add_data(self._handle(), k, buf, len(buf), n))
        return self

    def add_file(self, path: Union[str, "os.PathLike[str]"],
                 kind: int = InputKind.AUTO) -> "Linker":
        """Add the file at `path`, read now; AUTO takes the kind from the extension."""
        k = as_int(kind, "kind", 0, 6)
        check(_lib.lib().kjit_linker_add_file(self._handle(), k,
                                              cstr(path, "path", path=True, allow_empty=False)))
        return self

    def add(self, item: Input) -> "Linker":
        """Add a :class:`Binary`, a path, or a ``(InputKind, bytes)`` /
        ``(InputKind, bytes, name)`` tuple."""
        if isinstance(item, Binary):
            return self.add_binary(item)
        if isinstance(item, tuple):
            return self.add_data(*item)
        return self.add_file(item)

    @property
    def key(self) -> str:
        """The cache key :meth:`link` would use (64 hex digits), without linking."""
        buf = ctypes.create_string_buffer(65)
        check(_lib.lib().kjit_linker_key(self._handle(), buf))
        return text(buf.value)

    def link(self) -> Binary:
        """Link (or hit the cache) and return the result: its ``cubin`` (and ``ptx``),
        ``kernel(name)`` to load a kernel, ``tier`` to tell whether nvJitLink ran.
        Raises :class:`LinkError` (with ``log``) for undefined or duplicate symbols and
        inputs nvJitLink cannot read, :class:`UnsupportedTarget` for mismatched
        architectures, :class:`InvalidOption`, :class:`NvJitLinkError` without nvJitLink."""
        out = ctypes.c_void_p()
        status = _lib.lib().kjit_link(self._handle(), ctypes.byref(out))
        if status:
            msg = last_error()
            log = ""
            if out.value:
                lib = _lib.lib()
                log = text(lib.kjit_binary_log(out.value))
                lib.kjit_binary_destroy(out.value)
                if log and "\n" in msg:
                    msg = msg.split("\n", 1)[0]  # the log follows on its own
            raise make_error(status, msg, log)
        return Binary._wrap(out_handle(out))


def link(inputs: Iterable[Input], *, cache: Optional[Cache] = None,
         target: Optional[str] = None, lto: bool = False, options: Iterable[str] = (),
         ptx: Union[bool, str] = False) -> Binary:
    """Link `inputs` (:class:`Binary` objects, paths, ``(InputKind, bytes)`` tuples) in
    one call; the arguments are :class:`Linker`'s."""
    with Linker(cache, target=target, lto=lto, options=options, ptx=ptx) as linker:
        for item in inputs:
            linker.add(item)
        return linker.link()


def nvjitlink_version() -> str:
    """The nvJitLink in use, e.g. "nvJitLink 13.0 build-id:157d67e6..." (loads it)."""
    p = ctypes.c_char_p()
    check(_lib.lib().kjit_nvjitlink_version(ctypes.byref(p)))
    return text(p.value)


