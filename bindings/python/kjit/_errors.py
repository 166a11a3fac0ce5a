"""Status codes and the exception hierarchy.

Every failure of a kjit call raises a :class:`KjitError` subclass chosen by the C status
(``KJIT_ERROR_*``); its ``status`` attribute is the :class:`Status` and ``message`` the
library's description of what failed. Arguments this package can check itself are
checked before the C library sees them: a value it rejects raises
:class:`InvalidArgument` (also a :class:`ValueError`), a value of the wrong Python type
raises :class:`TypeError`, and kernel launch arguments that do not fit the kernel raise
:class:`ArgumentMismatch` (also a :class:`TypeError`).
"""
from __future__ import annotations

import enum
TYPE_CHECKING = False  # typing only for type checkers: annotations are strings
if TYPE_CHECKING:
    from typing import Dict, Optional, Tuple, Type


_NUMERIC_FORMATS = frozenset("bcdeEfFgGnoxX%")


def _enum_str(self: enum.Enum) -> str:
    return enum.Flag.__str__(self) if isinstance(self, enum.Flag) else enum.Enum.__str__(self)


def _enum_format(self: enum.Enum, spec: str) -> str:
    if spec and spec[-1] in _NUMERIC_FORMATS:
        return int.__format__(int(self), spec)  # type: ignore[call-overload]
    return format(str(self), spec)


class IntEnum(enum.IntEnum):
    """An ``enum.IntEnum`` that prints as ``Tier.COMPILED`` on every Python (3.11 made
    ``str()`` and ``format()`` of an IntEnum its number); ``%d`` and ``{:d}`` give the
    number."""
    __str__ = _enum_str
    __format__ = _enum_format


class IntFlag(enum.IntFlag):
    """An ``enum.IntFlag`` that prints as ``Output.PTX|CUBIN`` on every Python."""
    __str__ = _enum_str
    __format__ = _enum_format


class Status(IntEnum):
    """``kjit_status`` values (stable numbers, include/kjit/common.h)."""
    OK = 0
    INVALID_ARGUMENT = 1
    INVALID_HANDLE = 2
    OUT_OF_MEMORY = 3
    INVALID_SOURCE = 4
    COMPILE = 5
    INVALID_OPTION = 6
    UNSUPPORTED_TARGET = 7
    NAME_NOT_FOUND = 8
    NVRTC = 9
    CACHE = 10
    CACHE_CORRUPT = 11
    NOT_FOUND = 12
    READ_ONLY = 13
    CUDA_UNAVAILABLE = 14
    CUDA = 15
    ARGUMENT_MISMATCH = 16
    STALE_HANDLE = 17
    CUDA_STICKY = 18
    UNSUPPORTED = 19
    CANCELLED = 20
    TIMEOUT = 21
    BUFFER_TOO_SMALL = 22
    CUBLAS = 23
    IO = 24
    LINK = 25
    NVJITLINK = 26
    INTERNAL = 99


class KjitError(Exception):
    """Base class of every error this package raises on purpose.

    Attributes:
        status: the :class:`Status` of the failed call (None for errors that have no C
            status, such as a library that cannot be loaded).
        message: what failed, with which input, and why.
    """

    #: Status a subclass stands for (used when one is raised without a C status).
    default_status: Optional[Status] = None

    def __init__(self, status: Optional[int] = None, message: str = "") -> None:
        if status is None:
            status = self.default_status
        self.status: Optional[Status] = Status(status) if status is not None else None
        self.message: str = message
        super().__init__(self._text())

    def _text(self) -> str:
        if self.status is None:
            return self.message
        name = "KJIT_" + ("ERROR_" if self.status else "") + self.status.name
        return "%s: %s" % (name, self.message) if self.message else name

    def __reduce__(self):  # keep exceptions picklable (multiprocessing)
        return (self.__class__, (self.status, self.message))


class FastPathWarning(RuntimeWarning):
    """Said once, at import, when the compiled launch path (``kjit._fastlaunch``) is not
    there: kernels then launch through ctypes (the same behaviour, a few microseconds more
    per launch). ``KJIT_PYTHON_FAST=0`` chooses ctypes and silences it."""


class LibraryNotFound(KjitError, OSError):
    """libkjit.so.0 could not be found or loaded; the message lists what was tried."""

    def __init__(self, message: str = "") -> None:
        KjitError.__init__(self, None, message)

    def __reduce__(self):
        return (self.__class__, (self.message,))


class InvalidArgument(KjitError, ValueError):
    """A bad value: NULL/empty where a value is needed, out of range, malformed
    (``KJIT_ERROR_INVALID_ARGUMENT``), or rejected by these bindings before the call."""
    default_status = Status.INVALID_ARGUMENT


class InvalidHandle(KjitError):
    """A closed (or foreign) handle was used (``KJIT_ERROR_INVALID_HANDLE``)."""
    default_status = Status.INVALID_HANDLE


class OutOfMemory(KjitError, MemoryError):
    """A host allocation failed (``KJIT_ERROR_OUT_OF_MEMORY``)."""
    default_status = Status.OUT_OF_MEMORY


class InvalidSource(InvalidArgument):
    """Empty or non-UTF-8 source (``KJIT_ERROR_INVALID_SOURCE``)."""
    default_status = Status.INVALID_SOURCE


class _WithLog(KjitError):
    """An error that comes with a tool's log (``log``), shown after the message."""

    def __init__(self, status: Optional[int] = None, message: str = "",
                 log: str = "") -> None:
        self.log: str = python_log(log)
        super().__init__(status, message)

    def _text(self) -> str:
        log = self.log.rstrip("\n")
        if not log:
            return super()._text()
        # The library's message quotes the log's first lines ("...failed: <error>"), and a
        # kjit log repeats the message as its "kjit: error:" line: each is said once.
        message = self.message
        first = log.split("\n", 1)[0].strip()
        at = message.find(first) if first else -1
        if at > 0:
            message = message[:at].rstrip().rstrip(":")
        elif message and message in log:
            message = ""
        name = ("KJIT_" + ("ERROR_" if self.status else "") + self.status.name
                if self.status is not None else "")
        head = "%s: %s" % (name, message) if name and message else (name or message)
        return head + "\n" + log

    def __reduce__(self):
        return (self.__class__, (self.status, self.message, self.log))


_NAME_NOTE = "kjit: note: a name expression is looked up in every program"


def python_log(log: str) -> str:
    """A log with the library's advice to C callers said in this binding's terms."""
    at = log.find(_NAME_NOTE)
    if at < 0 or (at > 0 and log[at - 1] != "\n"):
        return log
    end = log.find("\n", at)
    end = len(log) if end < 0 else end + 1
    return (log[:at] + "kjit: note: a name expression is looked up in every program compiled "
            "with the Options it was given to; give each program its own Options "
            "(Options.clone() of a shared base, then its name_expressions)\n" + log[end:])


class CompileError(_WithLog):
    """NVRTC reported a compile error (``KJIT_ERROR_COMPILE``).

    Attributes:
        log: NVRTC's full log (the errors with their lines).
    """
    default_status = Status.COMPILE


class InvalidOption(InvalidArgument):
    """An option NVRTC or kjit does not accept (``KJIT_ERROR_INVALID_OPTION``)."""
    default_status = Status.INVALID_OPTION


class UnsupportedTarget(InvalidArgument):
    """The target architecture is not supported by this NVRTC
    (``KJIT_ERROR_UNSUPPORTED_TARGET``); the message lists the supported ones."""
    default_status = Status.UNSUPPORTED_TARGET


class NameNotFound(_WithLog, LookupError):
    """A name expression or kernel name is not in the program
    (``KJIT_ERROR_NAME_NOT_FOUND``).

    Attributes:
        log: the compile log, with a line for each name expression that names nothing
            ("" when the error did not come from a compile).
    """
    default_status = Status.NAME_NOT_FOUND


class NvrtcError(KjitError):
    """Any other NVRTC failure (``KJIT_ERROR_NVRTC``)."""
    default_status = Status.NVRTC


class CacheError(KjitError):
    """The cache could not be opened, read or written (``KJIT_ERROR_CACHE``)."""
    default_status = Status.CACHE


class CacheCorrupt(CacheError):
    """Cache data failed an integrity check (``KJIT_ERROR_CACHE_CORRUPT``)."""
    default_status = Status.CACHE_CORRUPT


class NotFound(KjitError, LookupError):
    """A raw cache lookup found nothing (``KJIT_ERROR_NOT_FOUND``)."""
    default_status = Status.NOT_FOUND


class ReadOnly(CacheError):
    """A write to a cache opened read-only (``KJIT_ERROR_READ_ONLY``)."""
    default_status = Status.READ_ONLY


class CudaError(KjitError):
    """A CUDA driver call failed (``KJIT_ERROR_CUDA``); the message has the driver's
    error name. Base class of the other CUDA errors."""
    default_status = Status.CUDA


class CudaUnavailable(CudaError):
    """No CUDA driver or no device (``KJIT_ERROR_CUDA_UNAVAILABLE``)."""
    default_status = Status.CUDA_UNAVAILABLE


class StaleHandle(CudaError):
    """The kernel's context was reset and reloading is off (``KJIT_ERROR_STALE_HANDLE``)."""
    default_status = Status.STALE_HANDLE


class CudaSticky(CudaError):
    """A sticky device error: the context is unusable (``KJIT_ERROR_CUDA_STICKY``)."""
    default_status = Status.CUDA_STICKY


class ArgumentMismatch(KjitError, TypeError):
    """Launch arguments do not match the kernel's parameters: count, size or type
    (``KJIT_ERROR_ARGUMENT_MISMATCH``)."""
    default_status = Status.ARGUMENT_MISMATCH


class Unsupported(KjitError):
    """A valid request this build or device cannot serve (``KJIT_ERROR_UNSUPPORTED``)."""
    default_status = Status.UNSUPPORTED


class Cancelled(KjitError):
    """The operation was cancelled (``KJIT_ERROR_CANCELLED``)."""
    default_status = Status.CANCELLED


class Timeout(KjitError, TimeoutError):
    """A wait timed out; the operation continues (``KJIT_ERROR_TIMEOUT``)."""
    default_status = Status.TIMEOUT


class BufferTooSmall(KjitError):
    """A buffer was too small (``KJIT_ERROR_BUFFER_TOO_SMALL``)."""
    default_status = Status.BUFFER_TOO_SMALL


class CublasError(KjitError):
    """A cuBLASLt call failed, or cuBLASLt cannot be loaded (``KJIT_ERROR_CUBLAS``)."""
    default_status = Status.CUBLAS


class KjitIOError(KjitError, OSError):
    """A file system error outside the cache (``KJIT_ERROR_IO``)."""
    default_status = Status.IO

    def __init__(self, status: Optional[int] = None, message: str = "") -> None:
        KjitError.__init__(self, status, message)


class LinkError(_WithLog):
    """nvJitLink reported a link error: undefined or duplicate symbols, an input it
    cannot read (``KJIT_ERROR_LINK``).

    Attributes:
        log: nvJitLink's error and info log.
    """
    default_status = Status.LINK


class NvJitLinkError(KjitError):
    """nvJitLink is not available (not installed, too old) or failed internally
    (``KJIT_ERROR_NVJITLINK``)."""
    default_status = Status.NVJITLINK


class InternalError(KjitError):
    """A bug in kjit (``KJIT_ERROR_INTERNAL``); please report it."""
    default_status = Status.INTERNAL


_CLASSES: Tuple[Type[KjitError], ...] = (
        InvalidArgument, InvalidHandle, OutOfMemory, InvalidSource, CompileError,
        InvalidOption, UnsupportedTarget, NameNotFound, NvrtcError, CacheError,
        CacheCorrupt, NotFound, ReadOnly, CudaUnavailable, CudaError, ArgumentMismatch,
        StaleHandle, CudaSticky, Unsupported, Cancelled, Timeout, BufferTooSmall,
        CublasError, KjitIOError, LinkError, NvJitLinkError, InternalError)
_BY_STATUS: Dict[int, Type[KjitError]] = {
    int(cls.default_status): cls for cls in _CLASSES if cls.default_status is not None}


def error_class(status: int) -> Type[KjitError]:
    """The exception class raised for a C status (KjitError for unknown values)."""
    return _BY_STATUS.get(status, KjitError)


def make_error(status: int, message: str, log: str = "") -> KjitError:
    """An exception object for a failed call."""
    cls = error_class(status)
    try:
        st: Optional[int] = Status(status)
    except ValueError:
        st = None
        message = "unknown kjit status %d%s" % (status, ": " + message if message else "")
    if issubclass(cls, _WithLog):
        return cls(st, message, log)
    return cls(st, message)
