"""Compile options (the kjit_options builder of include/kjit/compile.h)."""
from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable, Mapping

TYPE_CHECKING = False  # typing only for type checkers: annotations are strings
if TYPE_CHECKING:
    from typing import Any, List, Optional, Tuple, Union

from . import _lib
from ._errors import IntFlag, InvalidArgument
from ._util import Handle, as_bool, as_int, check, cstr, out_handle


class Output(IntFlag):
    """What a compile produces (``kjit_output``); combine with ``|``. DEFAULT (0) means
    PTX + CUBIN for sm_ targets, PTX for compute_ targets."""
    DEFAULT = 0
    PTX = 1
    CUBIN = 2
    LTOIR = 4


_OUTPUT_NAMES = {"ptx": Output.PTX, "cubin": Output.CUBIN, "ltoir": Output.LTOIR}

if TYPE_CHECKING:
    Defines = Union[Mapping[str, Any], Iterable[str]]
    PathLike = Union[str, "os.PathLike[str]"]


def _arch(arch: Any) -> str:
    if isinstance(arch, bool):
        raise TypeError("arch must be a str such as 'sm_90' or an int such as 90, not bool")
    if isinstance(arch, int):
        if arch <= 0:
            raise InvalidArgument(None, "arch must be positive, got %d" % arch)
        return "sm_%d" % arch
    if isinstance(arch, str):
        return arch
    raise TypeError("arch must be a str such as 'sm_90' or an int such as 90, not %s"
                    % type(arch).__name__)


def _std(std: Any) -> str:
    if isinstance(std, bool):
        raise TypeError("std must be a str such as 'c++17' or an int such as 17, not bool")
    if isinstance(std, int):
        return "-std=c++%d" % std
    if isinstance(std, str):
        s = std[len("-std="):] if std.startswith("-std=") else std
        if s.isdigit():
            s = "c++" + s
        return "-std=" + s
    raise TypeError("std must be a str such as 'c++17' or an int such as 17, not %s"
                    % type(std).__name__)


class Options(Handle):
    """Compile options: a ``kjit_options`` builder, set up from keyword arguments.

    Args:
        arch: target, e.g. ``"sm_90"``, ``"sm_90a"``, ``"compute_90"`` (PTX only),
            ``"auto"`` (the exact architecture of ``device``; needs a CUDA driver), or an
            int such as ``90`` for ``"sm_90"``. Default ``"auto"``.
        std: C++ dialect, e.g. ``"c++17"`` or ``17`` (``-std=c++17``).
        defines: macros, as a mapping ``{"N": 256, "USE_X": None}`` (None or True: no
            value) or an iterable of ``"NAME"`` / ``"NAME=VALUE"`` strings.
        include_paths: ``-I`` directories; files reachable through them are hashed into
            the cache key, so editing them invalidates cached results.
        headers: in-memory headers, ``{"name.h": "contents"}``: ``#include "name.h"``
            resolves to them.
        name_expressions: e.g. ``["my_kernel<float, 256>"]``; the binary maps each to its
            lowered (mangled) name, and kernels accept them as names.
        fast_math: ``--use_fast_math``.
        max_registers: ``-maxrregcount=N``.
        line_info: ``-lineinfo``.
        debug: ``-G`` (device debug information).
        options: further raw NVRTC options, passed as they are (e.g.
            ``["--Ofast-compile=max"]``); ``"--no-builtin-std"`` is kjit's own and turns
            off its built-in standard headers (``<cstdint>``, ``<cmath>`` ...).
        name: program name (appears in the log and ``__FILE__``); default "kernel.cu".
        outputs: :class:`Output` flags, or names from {"ptx", "cubin", "ltoir"}.
        device: the device whose architecture ``arch="auto"`` resolves to (default 0).
        toolkit: the CUDA toolkit whose headers (``<cuda_fp16.h>``, ``<cub/...>`` ...) are
            found without ``-I``: None finds it automatically (default), ``""`` turns it
            off, a path names a toolkit root.
        pch: automatic precompiled headers for programs whose includes reach the toolkit
            (default on; the results are byte-identical either way).

    The keyword arguments are applied in the order listed above (std before defines,
    defines before raw options, ...). NVRTC options are part of the cache key in the
    order they were added, as in the C API: to share cache entries with a C, Rust or Go
    program, add the same options in the same order (``std=17, defines={"N": 1}`` is
    ``-std=c++17`` then ``-DN=1``). Options can also be changed later with the methods
    below, which append. An Options object may be
    used by any number of concurrent compiles, but must not be changed while they run.
    Compiles copy what they need, so it may be closed as soon as they return.
    """

    _kind = "Options"

    def __init__(self, *, arch: Optional[Union[str, int]] = None,
                 std: Optional[Union[str, int]] = None,
                 defines: Optional[Defines] = None,
                 include_paths: Iterable[PathLike] = (),
                 headers: Optional[Mapping[str, str]] = None,
                 name_expressions: Iterable[str] = (),
                 fast_math: bool = False,
                 max_registers: Optional[int] = None,
                 line_info: bool = False,
                 debug: bool = False,
                 options: Iterable[str] = (),
                 name: Optional[str] = None,
                 outputs: Optional[Union[Output, int, Iterable[str]]] = None,
                 device: Optional[int] = None,
                 toolkit: Optional[PathLike] = None,
                 pch: Optional[bool] = None) -> None:
        self._items: List[Tuple[str, Any]] = []
        h = ctypes.c_void_p()
        check(_lib.lib().kjit_options_create(ctypes.byref(h)))
        self._h = out_handle(h)
        try:
            if arch is not None:
                self.set_arch(arch)
            if std is not None:
                self.add(_std(std))
            if defines is not None:
                self.define_all(defines)
            for p in _iterable(include_paths, "include_paths"):
                self.include_path(p)
            if headers is not None:
                if not isinstance(headers, Mapping):
                    raise TypeError("headers must be a mapping of name to contents, not %s"
                                    % type(headers).__name__)
                for hname, contents in headers.items():
                    self.header(hname, contents)
            for e in _iterable(name_expressions, "name_expressions"):
                self.name_expression(e)
            if as_bool(fast_math, "fast_math"):
                self.add("--use_fast_math")
            if max_registers is not None:
                self.add("-maxrregcount=%d" % as_int(max_registers, "max_registers", 1, 255))
            if as_bool(line_info, "line_info"):
                self.add("-lineinfo")
            if as_bool(debug, "debug"):
                self.add("-G")
            for o in _iterable(options, "options"):
                self.add(o)
            if name is not None:
                self.set_name(name)
            if outputs is not None:
                self.set_outputs(outputs)
            if device is not None:
                self.set_device(device)
            if toolkit is not None:
                self.set_toolkit(toolkit)
            if pch is not None:
                self.set_pch(pch)
        except BaseException:
            self.close()
            raise

    @classmethod
    def _wrap(cls, h: int, items: List[Tuple[str, Any]]) -> "Options":
        self = cls.__new__(cls)
        self._items = list(items)
        self._h = h
        return self

    def _destroy(self, h: int) -> None:
        _lib.lib().kjit_options_destroy(h)

    def __repr__(self) -> str:
        if self._h is None:
            return "<kjit.Options closed>"
        return "<kjit.Options %s>" % " ".join("%s=%r" % kv for kv in self._items)

    def clone(self) -> "Options":
        """A deep copy."""
        h = ctypes.c_void_p()
        check(_lib.lib().kjit_options_clone(self._handle(), ctypes.byref(h)))
        return Options._wrap(out_handle(h), self._items)

    def _call1(self, fn: str, value: Any, what: str, **kw: Any) -> "Options":
        b = cstr(value, what, **kw)
        check(getattr(_lib.lib(), fn)(self._handle(), b))
        self._items.append((what, value))
        return self

    def set_arch(self, arch: Union[str, int]) -> "Options":
        """Set the target (see the ``arch`` argument). Returns self."""
        return self._call1("kjit_options_set_target", _arch(arch), "arch", allow_empty=False)

    def set_device(self, device: int) -> "Options":
        """Set the device whose architecture ``arch="auto"`` resolves to. Returns self."""
        d = as_int(device, "device", 0, 2**31 - 1)
        check(_lib.lib().kjit_options_set_device(self._handle(), d))
        self._items.append(("device", d))
        return self

    def set_outputs(self, outputs: Union[Output, int, Iterable[str]]) -> "Options":
        """Select the outputs: :class:`Output` flags or names ("ptx", "cubin", "ltoir").
        Returns self."""
        if isinstance(outputs, str):
            outputs = [outputs]
        if isinstance(outputs, int) and not isinstance(outputs, bool):
            mask = as_int(outputs, "outputs", 0, 7)
        elif isinstance(outputs, Iterable):
            mask = 0
            for o in outputs:
                if not isinstance(o, str) or o.lower() not in _OUTPUT_NAMES:
                    raise InvalidArgument(None, "outputs: unknown output %r (use %s)"
                                          % (o, ", ".join(_OUTPUT_NAMES)))
                mask |= _OUTPUT_NAMES[o.lower()]
        else:
            raise TypeError("outputs must be kjit.Output flags or output names, not %s"
                            % type(outputs).__name__)
        check(_lib.lib().kjit_options_set_outputs(self._handle(), int(mask)))
        self._items.append(("outputs", Output(mask)))
        return self

    def set_name(self, name: str) -> "Options":
        """Set the program name (appears in the log and ``__FILE__``; its directory is
        searched for ``#include "..."`` files). Returns self."""
        return self._call1("kjit_options_set_name", name, "name", allow_empty=False)

    def set_toolkit(self, root: Optional[PathLike]) -> "Options":
        """Choose the CUDA toolkit whose headers NVRTC finds without ``-I``: None finds it
        automatically, ``""`` turns it off, a path names a toolkit root. Returns self."""
        if root is None:
            check(_lib.lib().kjit_options_set_toolkit(self._handle(), None))
            self._items.append(("toolkit", None))
            return self
        return self._call1("kjit_options_set_toolkit", os.fspath(root), "toolkit")

    def set_pch(self, enabled: bool) -> "Options":
        """Turn automatic precompiled headers on or off. Returns self."""
        on = as_bool(enabled, "pch")
        check(_lib.lib().kjit_options_set_pch(self._handle(), 1 if on else 0))
        self._items.append(("pch", on))
        return self

    def add(self, option: str) -> "Options":
        """Append one raw NVRTC option, e.g. ``"-std=c++17"``. Returns self."""
        return self._call1("kjit_options_add", option, "option", allow_empty=False)

    def define(self, name: str, value: Any = None) -> "Options":
        """Append ``-Dname`` (value None or True) or ``-Dname=value`` (value converted
        with str()). Returns self."""
        n = cstr(name, "define name", allow_empty=False)
        if value is None or value is True:
            v = None
        elif value is False:
            raise InvalidArgument(None, "define %s: value False is ambiguous; pass 0 or "
                                        "leave the macro out" % name)
        elif isinstance(value, (str, int, float)):
            v = cstr(str(value), "define %s value" % name)
        else:
            raise TypeError("define %s: value must be str, int, float, True or None, not %s"
                            % (name, type(value).__name__))
        check(_lib.lib().kjit_options_add_define(self._handle(), n, v))
        self._items.append(("define", name if v is None else "%s=%s" % (name, value)))
        return self

    def define_all(self, defines: Defines) -> "Options":
        """Append several macros: a mapping name -> value, or "NAME[=VALUE]" strings."""
        if isinstance(defines, Mapping):
            for k, v in defines.items():
                self.define(k, v)
        else:
            for d in _iterable(defines, "defines"):
                if not isinstance(d, str):
                    raise TypeError("defines: items must be 'NAME' or 'NAME=VALUE' strings, "
                                    "not %s" % type(d).__name__)
                name, eq, value = d.partition("=")
                self.define(name, value if eq else None)
        return self

    def include_path(self, path: PathLike) -> "Options":
        """Append ``-I<path>``. Returns self."""
        return self._call1("kjit_options_add_include_path", path, "include path",
                           path=True, allow_empty=False)

    def header(self, name: str, contents: str) -> "Options":
        """Add an in-memory header: ``#include "<name>"`` resolves to `contents`.
        Returns self."""
        n = cstr(name, "header name", allow_empty=False)
        c = cstr(contents, "header %s contents" % name)
        check(_lib.lib().kjit_options_add_header(self._handle(), n, c))
        self._items.append(("header", name))
        return self

    def name_expression(self, expr: str) -> "Options":
        """Add a name expression, e.g. ``"my_kernel<float, 256>"``. Returns self."""
        return self._call1("kjit_options_add_name_expression", expr, "name expression",
                           allow_empty=False)


def _iterable(value: Any, what: str) -> Iterable[Any]:
    if isinstance(value, (str, bytes)):
        raise TypeError("%s must be a list of values, not a single %s"
                        % (what, type(value).__name__))
    if not isinstance(value, Iterable):
        raise TypeError("%s must be iterable, not %s" % (what, type(value).__name__))
    return value


def resolve_options(options: Optional[Options], kwargs: Mapping[str, Any],
                    what: str) -> Tuple[Optional[Options], bool]:
    """(options to pass, whether the caller must close them): `options` itself, or a
    new Options from keyword arguments (not both). A list or tuple of strings as
    `options` is a list of raw NVRTC options, as in CuPy's RawKernel."""
    if isinstance(options, (list, tuple)):
        # CuPy style: options=("-std=c++17", ...) are raw NVRTC options.
        if "options" in kwargs:
            raise TypeError("%s: raw options given twice (options=... and the options "
                            "keyword)" % what)
        kwargs = dict(kwargs, options=options)
        options = None
    if options is not None and not isinstance(options, Options):
        raise TypeError("%s: options must be a kjit.Options, a list of raw NVRTC options "
                        "or None, not %s" % (what, type(options).__name__))
    if kwargs:
        if options is not None:
            raise TypeError("%s: pass either options=Options(...) or option keyword "
                            "arguments, not both" % what)
        return Options(**kwargs), True
    if options is not None:
        options._handle()
    return options, False
