"""Helpers shared by the modules: string conversion, status checks, the handle base."""
from __future__ import annotations

import ctypes
import os
import threading

TYPE_CHECKING = False  # typing only for type checkers: annotations are strings
if TYPE_CHECKING:
    from typing import Any, Optional

from . import _lib
from ._errors import InvalidArgument, InvalidHandle, make_error


def cstr(value: Any, what: str, *, path: bool = False, allow_bytes: bool = False,
         allow_empty: bool = True) -> bytes:
    """`value` as NUL-terminated-safe UTF-8 bytes, checked before it reaches C.

    Raises TypeError for a value that is not a str (or os.PathLike when `path`, or bytes
    when `allow_bytes`), InvalidArgument for an embedded NUL, text that cannot be
    encoded as UTF-8 (lone surrogates) or, unless `allow_empty`, an empty value.
    """
    if path and isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, str):
        try:
            data = value.encode("utf-8")
        except UnicodeEncodeError as e:
            raise InvalidArgument(None, "%s is not valid Unicode text (%s)" % (what, e)) from None
    elif allow_bytes and isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
    else:
        kinds = "str" + (" or os.PathLike" if path else "") + (" or bytes" if allow_bytes else "")
        raise TypeError("%s must be %s, not %s" % (what, kinds, type(value).__name__))
    nul = data.find(b"\0")
    if nul >= 0:
        raise InvalidArgument(None, "%s contains a NUL character at byte %d" % (what, nul))
    if not allow_empty and not data:
        raise InvalidArgument(None, "%s is empty" % what)
    return data


_record_lock = threading.Lock()

if TYPE_CHECKING:
    from dataclasses import dataclass as record
else:
    def record(**params: Any) -> Any:
        """``@dataclasses.dataclass(**params)``, applied to the class the first time it is
        instantiated or read as ``kjit.<name>`` (:func:`complete`), so that ``import kjit``
        does not import dataclasses (and inspect, ast, dis, ...). The class object stays
        the same."""
        def wrap(cls: type) -> type:
            def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
                complete(cls)
                cls.__init__(self, *args, **kwargs)  # type: ignore[misc]
            cls.__init__ = __init__  # type: ignore[misc]
            cls._record_params = params  # type: ignore[attr-defined]
            return cls
        return wrap


def complete(cls: type) -> type:
    """Make a class decorated with :func:`record` the dataclass it declares (once)."""
    if "_record_params" in cls.__dict__:
        with _record_lock:
            params = cls.__dict__.get("_record_params")
            if params is not None:
                from dataclasses import dataclass
                del cls.__init__  # type: ignore[misc]
                del cls._record_params  # type: ignore[attr-defined]
                dataclass(**params)(cls)
    return cls


def text(p: Optional[bytes]) -> str:
    """A C string returned by kjit as str ("" for NULL)."""
    return p.decode("utf-8", "replace") if p else ""


def last_error() -> str:
    """kjit_last_error() of this thread (Python threads are OS threads, so the message
    read right after a failed call on the same thread belongs to that call)."""
    return text(_lib.lib().kjit_last_error())


def check(status: int, log: str = "") -> None:
    """Raise the exception for a non-zero kjit_status."""
    if status:
        raise make_error(status, last_error(), log)


def out_handle(p: ctypes.c_void_p) -> int:
    """The handle a successful C call wrote to an out-parameter (never NULL)."""
    if not p.value:
        from ._errors import InternalError
        raise InternalError(None, "kjit returned success without a handle")
    return p.value


def as_int(value: Any, what: str, lo: int, hi: int) -> int:
    """`value` as an int in [lo, hi]; TypeError for non-integers (bool included),
    InvalidArgument when out of range."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError("%s must be an int, not %s" % (what, type(value).__name__))
    v = value.__index__()
    if v < lo or v > hi:
        raise InvalidArgument(None, "%s must be in [%d, %d], got %d" % (what, lo, hi, v))
    return v


def as_bool(value: Any, what: str) -> bool:
    """`value` as a bool: True, False, 0 or 1."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise TypeError("%s must be a bool, not %r" % (what, value))


class Handle:
    """Base of every object that owns a C handle: close() is idempotent, the object is a
    context manager, a closed handle raises :class:`InvalidHandle`, and the garbage
    collector closes what the program forgot to (a safety net only: close explicitly or
    use ``with``). Closing must not race with calls on the same object from other
    threads, as in the C API."""

    _kind = "handle"
    _h: Optional[int] = None

    def _handle(self) -> int:
        h = self._h
        if h is None:
            raise InvalidHandle(None, "%s is closed" % self._kind)
        return h

    @property
    def closed(self) -> bool:
        """True once close() has run."""
        return self._h is None

    def _destroy(self, h: int) -> None:  # overridden
        raise NotImplementedError

    def close(self) -> None:
        """Release the C handle. Closing twice is a no-op."""
        h = self._h
        if h is not None:
            self._h = None
            self._destroy(h)

    def __repr__(self) -> str:
        return "<kjit.%s%s>" % (self._kind, " closed" if self._h is None else "")

    def __enter__(self):
        self._handle()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if self._h is not None and _lib._lib is not None:
                self.close()
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass


class Users:
    """Counts the open objects that depend on a handle (compilers and GEMM handles on a
    cache), so the handle refuses to close under them."""

    def __init__(self) -> None:
        self._n = 0
        self._lock = threading.Lock()

    def add(self) -> None:
        with self._lock:
            self._n += 1

    def remove(self) -> None:
        with self._lock:
            self._n -= 1

    @property
    def count(self) -> int:
        return self._n
