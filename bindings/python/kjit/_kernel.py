"""Loaded kernels, launches and kernel argument types (include/kjit/kernel.h)."""
from __future__ import annotations

import ctypes
import math
import os
import struct
import sys
from operator import attrgetter
TYPE_CHECKING = False  # typing only for type checkers: annotations are strings
if TYPE_CHECKING:
    from typing import (Any, Callable, ClassVar, Dict, List, Optional, Sequence, Tuple,
                        Union)

from . import _lib
from ._arrays import pointer_getter, pointer_kind, stream_handle
from ._errors import ArgumentMismatch, FastPathWarning, IntEnum, InvalidArgument, InternalError
from ._util import Handle, as_int, check, record, text

_U32 = (1 << 32) - 1


class LoadPath(IntEnum):
    """How a kernel's code was loaded (``kjit_load_path``)."""
    CUBIN = 0  #: CUBIN for the device's exact architecture
    PTX = 1    #: PTX JIT-compiled by the driver (no matching CUBIN)


def _flags(no_reload: Any, force_ptx: Any) -> int:
    f = 0
    if no_reload:
        f |= 1  # KJIT_KERNEL_NO_RELOAD
    if force_ptx:
        f |= 2  # KJIT_KERNEL_FORCE_PTX
    return f


# ---- explicit scalar types --------------------------------------------------------------

class Scalar:
    """Base of the explicit kernel argument types (``kjit.int32(n)``, ``kjit.float32(a)``,
    ...). Each packs its value to the C type's bytes when it is created, so a value that
    does not fit raises there. A launch checks the type's size against the parameter's.

    Bare Python values need no wrapper: an ``int`` fills an integer parameter of any
    size (1, 2, 4 or 8 bytes, range-checked, two's complement) and a ``float`` a
    ``float`` (4 bytes) or ``double`` (8 bytes) parameter. Use a wrapper to say which
    type you mean where the size alone cannot (``float`` for an ``int`` parameter is
    not detectable: the kernel's parameter layout has sizes, not types), and for half
    precision. NumPy scalars (``numpy.float32(2)``) work the same way.
    """
    __slots__ = ("value", "_raw")
    format: ClassVar[str] = ""
    size: ClassVar[int] = 0
    #: the C type, for messages
    ctype: ClassVar[str] = ""

    def __init__(self, value: Any) -> None:
        self.value = self._convert(value)
        try:
            self._raw = struct.pack("<" + self.format, self.value)
        except (struct.error, OverflowError):
            raise InvalidArgument(None, "%r does not fit kjit.%s (%s)"
                                  % (value, type(self).__name__, self.ctype)) from None

    @classmethod
    def _convert(cls, value: Any) -> Any:
        raise NotImplementedError

    def __bytes__(self) -> bytes:
        return self._raw

    def __repr__(self) -> str:
        return "kjit.%s(%r)" % (type(self).__name__, self.value)

    def __eq__(self, other: Any) -> bool:
        return type(other) is type(self) and other._raw == self._raw

    def __hash__(self) -> int:
        return hash((type(self), self._raw))


class _Int(Scalar):
    __slots__ = ()

    @classmethod
    def _convert(cls, value: Any) -> int:
        if isinstance(value, bool) or not hasattr(value, "__index__"):
            raise TypeError("kjit.%s needs an integer, not %s"
                            % (cls.__name__, type(value).__name__))
        return value.__index__()


class _Float(Scalar):
    __slots__ = ()

    @classmethod
    def _convert(cls, value: Any) -> float:
        if isinstance(value, (str, bytes)) or not hasattr(value, "__float__"):
            raise TypeError("kjit.%s needs a real number, not %s"
                            % (cls.__name__, type(value).__name__))
        return float(value)


def _scalar(name: str, base: type, fmt: str, ctype: str) -> type:
    size = struct.calcsize("<" + fmt)
    doc = "Kernel argument of C type ``%s`` (%d byte%s)." % (ctype, size,
                                                            "" if size == 1 else "s")
    return type(name, (base,), {"__slots__": (), "format": fmt, "size": size,
                                "ctype": ctype, "__doc__": doc, "__module__": "kjit"})


int8 = _scalar("int8", _Int, "b", "int8_t / signed char")
uint8 = _scalar("uint8", _Int, "B", "uint8_t / unsigned char")
int16 = _scalar("int16", _Int, "h", "int16_t / short")
uint16 = _scalar("uint16", _Int, "H", "uint16_t / unsigned short")
int32 = _scalar("int32", _Int, "i", "int32_t / int")
uint32 = _scalar("uint32", _Int, "I", "uint32_t / unsigned")
int64 = _scalar("int64", _Int, "q", "int64_t / long long")
uint64 = _scalar("uint64", _Int, "Q", "uint64_t / size_t")
float16 = _scalar("float16", _Float, "e", "__half")
float32 = _scalar("float32", _Float, "f", "float")
float64 = _scalar("float64", _Float, "d", "double")


class bool_(Scalar):
    """Kernel argument of C++ type ``bool`` (1 byte)."""
    __slots__ = ()
    format = "?"
    size = 1
    ctype = "bool"

    @classmethod
    def _convert(cls, value: Any) -> bool:
        return bool(value)


class bfloat16(Scalar):
    """Kernel argument of type ``__nv_bfloat16`` (2 bytes; rounded to nearest even)."""
    __slots__ = ()
    format = "H"
    size = 2
    ctype = "__nv_bfloat16"

    def __init__(self, value: Any) -> None:
        f = _Float._convert.__func__(type(self), value)  # type: ignore[attr-defined]
        if math.isnan(f):
            bits = 0x7FC0
        else:
            try:
                b32 = struct.unpack("<I", struct.pack("<f", f))[0]
            except OverflowError:
                raise InvalidArgument(None, "%r does not fit kjit.bfloat16" % value) from None
            bits = ((b32 + 0x7FFF + ((b32 >> 16) & 1)) >> 16) & 0xFFFF
        self.value = f
        self._raw = struct.pack("<H", bits)

    @classmethod
    def _convert(cls, value: Any) -> float:  # pragma: no cover - __init__ overrides
        return float(value)


class Pointer(Scalar):
    """A raw device address (``CUdeviceptr``, 8 bytes), e.g. ``kjit.Pointer(0)`` for a
    null pointer or an address from another library's allocator."""
    __slots__ = ()
    format = "Q"
    size = 8
    ctype = "void* (device)"

    @classmethod
    def _convert(cls, value: Any) -> int:
        if isinstance(value, ctypes.c_void_p):
            return value.value or 0
        return _Int._convert.__func__(cls, value)  # type: ignore[attr-defined]


SCALAR_TYPES = (int8, uint8, int16, uint16, int32, uint32, int64, uint64, float16,
                bfloat16, float32, float64, bool_, Pointer)

# ---- argument packing ---------------------------------------------------------------------

_INT_FORMATS = {1: "B", 2: "H", 4: "I", 8: "Q"}
_FLOAT_FORMATS = {4: "f", 8: "d"}
_CTYPES_BASES = (ctypes._SimpleCData, ctypes.Structure, ctypes.Union, ctypes.Array)
_raw_of = attrgetter("_raw")
_PLAN_LIMIT = 64


def _type_name(tp: type) -> str:
    m = tp.__module__
    return tp.__qualname__ if m in ("builtins", "kjit") else "%s.%s" % (m, tp.__qualname__)


def _int_converter(size: int, index: int) -> Callable[[int], int]:
    lo, hi, mask = -(1 << (8 * size - 1)), (1 << (8 * size)) - 1, (1 << (8 * size)) - 1

    def conv(v: int) -> int:
        if lo <= v <= hi:
            return v & mask
        raise ArgumentMismatch(None, "argument %d: %d does not fit the kernel's %d-byte "
                                     "integer parameter" % (index, v, size))
    return conv


def _bytes_converter(size: int, index: int, how: Callable[[Any], bytes]) -> Callable:
    def conv(v: Any) -> bytes:
        b = how(v)
        if len(b) != size:
            raise ArgumentMismatch(None, "argument %d: the kernel expects %d bytes, %s has %d"
                                   % (index, size, _type_name(type(v)), len(b)))
        return b
    return conv


def _host_scalar_bytes(index: int) -> Callable[[Any], bytes]:
    def how(v: Any) -> bytes:
        if getattr(v, "shape", ()) != ():
            raise ArgumentMismatch(None, "argument %d: %s of shape %s is a host array; "
                                         "kernels take device arrays (CuPy, PyTorch CUDA) "
                                         "or scalars" % (index, _type_name(type(v)), v.shape))
        b = v.tobytes()
        return b
    return how


def _arg_plan(index: int, arg: Any, size: int) -> Tuple[str, Optional[Callable]]:
    """(struct format, converter or None) for argument `index` into a `size`-byte
    parameter, decided from the argument's type."""
    tp = type(arg)

    def mismatch(what: str) -> ArgumentMismatch:
        return ArgumentMismatch(None, "argument %d (%s): %s" % (index, _type_name(tp), what))

    if tp is bool or tp is int or (issubclass(tp, int) and not issubclass(tp, Scalar)):
        if size not in _INT_FORMATS:
            raise mismatch("an int cannot fill a %d-byte parameter" % size)
        return _INT_FORMATS[size], _int_converter(size, index)
    if tp is float:
        if size not in _FLOAT_FORMATS:
            raise mismatch("a float fills a 4-byte (float) or 8-byte (double) parameter, "
                           "not %d bytes%s" % (size, "; use kjit.float16(x) or "
                                               "kjit.bfloat16(x) for 2-byte types"
                                               if size == 2 else ""))
        return _FLOAT_FORMATS[size], None
    if issubclass(tp, Scalar):
        if tp.size != size:
            raise mismatch("%d bytes (%s), the kernel's parameter has %d"
                           % (tp.size, tp.ctype, size))
        return "%ds" % size, _raw_of
    if issubclass(tp, _CTYPES_BASES):
        n = ctypes.sizeof(tp)
        if n != size:
            raise mismatch("%d bytes, the kernel's parameter has %d" % (n, size))
        return "%ds" % size, bytes
    if issubclass(tp, (bytes, bytearray, memoryview)):
        return "%ds" % size, _bytes_converter(size, index, bytes)
    if arg is None:
        raise mismatch("None is not a kernel argument; pass kjit.Pointer(0) for a null "
                       "pointer")
    if isinstance(arg, (str, complex)):
        raise mismatch("not a kernel argument type")
    if tp.__module__ == "numpy" and tp.__name__ != "ndarray" and hasattr(tp, "tobytes") \
            and getattr(getattr(arg, "dtype", None), "kind", None) in tuple("biufc") \
            and getattr(arg, "itemsize", -1) == size:
        # A NumPy scalar type: every value has this size, so the bytes need no check.
        return "%ds" % size, tp.tobytes
    if not hasattr(tp, "__cuda_array_interface__") and hasattr(tp, "dtype") \
            and hasattr(tp, "tobytes"):
        # NumPy scalars (and 0-d host arrays) by value; bigger host arrays are refused.
        return "%ds" % size, _bytes_converter(size, index, _host_scalar_bytes(index))
    getter = pointer_getter(tp)
    if getter is not None:
        if size != 8:
            raise mismatch("a device array is passed as its 8-byte pointer, the kernel's "
                           "parameter has %d bytes" % size)
        return "Q", getter
    raise mismatch("unsupported argument type: pass an int, float, kjit scalar (e.g. "
                   "kjit.int32), NumPy scalar, ctypes value, bytes, or a device array "
                   "(__cuda_array_interface__ or __dlpack__)")


# ---- the compiled launch path (kjit/_fastlaunch.c, optional) ----------------------------
#
# kjit._fastlaunch packs the arguments and calls kjit_kernel_launch_packed in one C call.
# It converts only what it is sure of and hands anything else back (None), and this
# module then does the launch as without it: the same checks and the same errors.

# Argument kinds of _fastlaunch.c, decided once per type in _arg_plan's order.
_K_OTHER, _K_INT, _K_SCALAR, _K_BUFFER, _K_NP_INT, _K_NP_FLOAT, _K_NP_VALUE = \
    0, 1, 3, 4, 9, 10, 11
_K_POINTERS = {"torch": 5, "cupy": 6, "cai": 7, "dlpack": 8}


# Probe values per NumPy kind: two distinct, mostly non-zero values.
_NP_PROBES = {"b": (True, False), "i": (1, 0x5A), "u": (1, 0x5A), "f": (1.5, -0.375),
              "c": (1.5 - 0.375j, -2 + 0.5j)}


def _value_in_head(tp: type, kind: str) -> bool:
    """Whether instances of the NumPy scalar type `tp` hold their value right after the
    object header (NumPy's PyArrayScalar_VAL layout), checked on two probe instances
    against their tobytes(): then _fastlaunch.c copies the value from there."""
    if _fastlaunch is None:
        return False
    try:
        probes = [tp(v) for v in _NP_PROBES[kind]]
        return all(_fastlaunch.value_in_head(p, p.tobytes()) for p in probes)
    except Exception:  # noqa: BLE001 - no probe, no direct read: the slower kinds below
        return False


def _numpy_kind(tp: type) -> int:
    """NumPy booleans, integers, floats and complex numbers read from the object itself
    where their layout checks out (_value_in_head); else integers by value, float32 and
    float64 likewise (faster than their buffer); the item size in bits 8 and up; other
    NumPy scalars by their buffer."""
    np = sys.modules.get("numpy")
    try:
        dt = np.dtype(tp)  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001 - not a NumPy scalar type after all
        return _K_BUFFER
    if dt.kind in _NP_PROBES and dt.itemsize <= 16 and _value_in_head(tp, dt.kind):
        return _K_NP_VALUE | dt.itemsize << 8
    if dt.kind in ("i", "u") and dt.itemsize in (1, 2, 4, 8):
        return _K_NP_INT | dt.itemsize << 8
    if dt.kind == "f" and dt.itemsize in (4, 8):
        return _K_NP_FLOAT | dt.itemsize << 8
    return _K_BUFFER


def _fast_kind(tp: type) -> int:
    """How _fastlaunch.c converts an argument of type `tp` (_K_OTHER: it does not)."""
    if issubclass(tp, int) and not issubclass(tp, Scalar):
        return _K_INT
    if issubclass(tp, Scalar):
        return _K_SCALAR
    if issubclass(tp, _CTYPES_BASES) or issubclass(tp, (bytes, bytearray, memoryview)):
        return _K_BUFFER
    if tp is float or tp is type(None) or issubclass(tp, (str, complex)):
        return _K_OTHER
    if tp.__module__ == "numpy" and tp.__name__ != "ndarray" and hasattr(tp, "tobytes") \
            and hasattr(tp, "dtype") and not hasattr(tp, "__cuda_array_interface__"):
        return _numpy_kind(tp)  # NumPy scalars: their buffer is their bytes
    if not hasattr(tp, "__cuda_array_interface__") and hasattr(tp, "dtype") \
            and hasattr(tp, "tobytes"):
        return _K_OTHER  # host scalars and arrays: the Python path checks the shape
    return _K_POINTERS.get(pointer_kind(tp), _K_OTHER)


def _load_fastlaunch() -> Tuple[Any, str]:
    """(the kjit._fastlaunch module or None, why not)."""
    if os.environ.get("KJIT_PYTHON_FAST", "").strip() in ("0", "false", "no", "off"):
        return None, "KJIT_PYTHON_FAST=%s" % os.environ["KJIT_PYTHON_FAST"]
    name = __name__.rpartition(".")[0] + "._fastlaunch"
    try:
        __import__(name)  # not importlib: import kjit does not need that package
    except ModuleNotFoundError:
        return None, ("kjit._fastlaunch is not built (pip install builds it where a C "
                      "compiler and the Python headers are)")
    except ImportError as e:
        return None, "kjit._fastlaunch does not load: %s" % e
    _fastlaunch = sys.modules[name]
    _fastlaunch.setup(_fast_kind, stream_handle, check)
    return _fastlaunch, ""


_fastlaunch, _fastlaunch_missing = _load_fastlaunch()
if _fastlaunch is None and not _fastlaunch_missing.startswith("KJIT_PYTHON_FAST="):
    import warnings

    warnings.warn("%s; kernels launch through ctypes instead (the same behaviour, a few "
                  "microseconds more per launch). Build it with `python3 "
                  "bindings/python/install.py` (needs a C compiler and the Python headers), "
                  "or set KJIT_PYTHON_FAST=0 to choose ctypes and silence this"
                  % _fastlaunch_missing, FastPathWarning, stacklevel=2)


def launch_path() -> str:
    """How kernels launch in this process: ``"fast"`` through the compiled extension
    ``kjit._fastlaunch`` (built by ``pip install`` where a C compiler and the Python
    headers are), else ``"ctypes"``. ``KJIT_PYTHON_FAST=0`` forces ``"ctypes"``. Both
    accept the same arguments and raise the same errors."""
    return "ctypes" if _fastlaunch is None else "fast"


def launch_path_reason() -> str:
    """Why :func:`launch_path` is ``"ctypes"`` ("" when it is ``"fast"``)."""
    return _fastlaunch_missing


def _dims(v: Any, what: str) -> Tuple[int, int, int]:
    if type(v) is int:
        t: Sequence[Any] = (v,)
    elif type(v) is tuple or type(v) is list:
        t = v
    elif isinstance(v, int) and not isinstance(v, bool):
        t = (int(v),)
    else:
        raise TypeError("%s must be an int or a tuple of 1 to 3 ints, not %s"
                        % (what, type(v).__name__))
    n = len(t)
    if n == 0 or n > 3:
        raise InvalidArgument(None, "%s must have 1 to 3 dimensions, got %d" % (what, n))
    out = []
    for x in t:
        if isinstance(x, bool) or not hasattr(x, "__index__"):
            raise TypeError("%s dimensions must be ints, not %s" % (what, type(x).__name__))
        x = x.__index__()
        if x < 1 or x > _U32:
            raise InvalidArgument(None, "%s dimensions must be in [1, 2**32 - 1], got %s"
                                  % (what, tuple(t)))
        out.append(x)
    while len(out) < 3:
        out.append(1)
    return out[0], out[1], out[2]


_CFG = struct.Struct(_lib.LAUNCH_CONFIG_FORMAT)
_CFG_SIZE = _CFG.size


@record(frozen=True)
class KernelAttributes:
    """A kernel's attributes (``kjit_kernel_attributes``)."""
    num_regs: int
    static_shared_bytes: int
    const_bytes: int
    local_bytes: int
    max_threads_per_block: int
    max_dynamic_shared_bytes: int
    ptx_version: int     #: e.g. 90
    binary_version: int  #: e.g. 90


if TYPE_CHECKING:
    Dim3 = Union[int, Tuple[int, ...]]

# With the compiled path, Kernel's handle (_h) and Launcher (_launcher) live in the C
# base _fastlaunch.KernelBase, which also lets kernel(...) reach C without a Python frame.
# Type checkers see Handle alone.
if TYPE_CHECKING or _fastlaunch is None:
    _KernelBase = Handle
else:
    class _KernelBase(_fastlaunch.KernelBase, Handle):
        __slots__ = ()


class Kernel(_KernelBase):
    """A loaded, launchable kernel, from :meth:`Compiler.kernel` or
    :meth:`Binary.kernel`. Call it like CuPy's RawKernel::

        kernel(grid, block, (a, x, y, n), stream=s, shared_mem=0)

    The arguments are packed into one buffer laid out by the kernel's parameter layout
    (:attr:`params`) and checked against it first: their number, and each one's size,
    raise :class:`ArgumentMismatch` before the driver sees them. Any number of threads
    may launch one kernel at once; close it when done (not while launches of it run).
    Launches are asynchronous: device memory they use must stay allocated until they
    complete.
    """

    _kind = "Kernel"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if _fastlaunch is not None:
            _fastlaunch.use_vectorcall(cls)  # unless cls has a __call__ of its own

    def __init__(self) -> None:
        raise TypeError("kjit.Kernel objects come from Compiler.kernel() or Binary.kernel()")

    @classmethod
    def _wrap(cls, h: int, device: int) -> "Kernel":
        self = cls.__new__(cls)
        self._h = h
        lib = _lib.lib()
        try:
            n = ctypes.c_size_t()
            check(lib.kjit_kernel_param_count(h, ctypes.byref(n)))
            params = []
            off, size = ctypes.c_size_t(), ctypes.c_size_t()
            for i in range(n.value):
                check(lib.kjit_kernel_param_info(h, i, ctypes.byref(off), ctypes.byref(size)))
                params.append((off.value, size.value))
            total = ctypes.c_size_t()
            check(lib.kjit_kernel_param_buffer_size(h, ctypes.byref(total)))
        except BaseException:
            self.close()
            raise
        self._init(device, text(lib.kjit_kernel_symbol(h)), params, total.value,
                   lib.kjit_kernel_launch_packed)
        return self

    def _init(self, device: int, symbol: str, params: Sequence[Tuple[int, int]],
              bufsize: int, launch: Callable[..., int], fast: Optional[bool] = None) -> None:
        """`launch`: kjit_kernel_launch_packed as a ctypes function (its address is what
        the compiled path calls); `fast`: use the compiled path (None: when built)."""
        self._device = device
        self._symbol = symbol
        self._params: Tuple[Tuple[int, int], ...] = tuple(params)
        self._nparams = len(self._params)
        self._bufsize = bufsize
        self._empty = bytes(bufsize)
        self._plans: Dict[Tuple[type, ...], Tuple[struct.Struct, Optional[List[Any]]]] = {}
        self._launch = launch
        self._launcher = self._fast_launch = self._fast_packed = None
        if fast is None:
            fast = _fastlaunch is not None
        if fast:
            if _fastlaunch is None:
                raise RuntimeError("kjit._fastlaunch is not in use: %s" % _fastlaunch_missing)
            address = ctypes.cast(launch, ctypes.c_void_p).value
            try:
                launcher = _fastlaunch.Launcher(address, self._params, bufsize)
            except (TypeError, ValueError, OverflowError):
                return  # a layout the Python path refuses at launch, with its message
            self._launcher = launcher
            self._fast_launch = launcher.launch
            self._fast_packed = launcher.launch_packed

    def _destroy(self, h: int) -> None:
        _lib.lib().kjit_kernel_destroy(h)

    def __repr__(self) -> str:
        if self._h is None:
            return "<kjit.Kernel closed>"
        return "<kjit.Kernel %s device=%d params=%d>" % (self._symbol, self._device,
                                                          self._nparams)

    @property
    def device(self) -> int:
        """The device ordinal the kernel was loaded for."""
        return self._device

    @property
    def symbol(self) -> str:
        """The mangled symbol of the loaded function."""
        self._handle()
        return self._symbol

    @property
    def load_path(self) -> LoadPath:
        """How the code was loaded (:class:`LoadPath`)."""
        return LoadPath(_lib.lib().kjit_kernel_load_path(self._handle()))

    @property
    def params(self) -> List[Tuple[int, int]]:
        """(offset, size) in bytes of each parameter in the packed parameter buffer."""
        self._handle()
        return list(self._params)

    @property
    def param_buffer_size(self) -> int:
        """Size in bytes of the packed parameter buffer."""
        self._handle()
        return self._bufsize

    @property
    def attributes(self) -> KernelAttributes:
        """The kernel's attributes (registers, shared memory, ...)."""
        a = _lib.KernelAttributesStruct()
        a.struct_size = ctypes.sizeof(a)
        check(_lib.lib().kjit_kernel_get_attributes(self._handle(), ctypes.byref(a)))
        return KernelAttributes(a.num_regs, a.static_shared_bytes, a.const_bytes, a.local_bytes,
                      a.max_threads_per_block, a.max_dynamic_shared_bytes, a.ptx_version,
                      a.binary_version)

    def set_max_dynamic_shared(self, nbytes: int) -> None:
        """Raise the kernel's maximum dynamic shared memory (cuFuncSetAttribute)."""
        check(_lib.lib().kjit_kernel_set_max_dynamic_shared(
            self._handle(), as_int(nbytes, "nbytes", 0, 2**31 - 1)))

    def occupancy(self, block_size: int, dynamic_shared: int = 0) -> int:
        """Maximum active blocks per SM for `block_size` threads."""
        n = ctypes.c_int()
        check(_lib.lib().kjit_kernel_occupancy(
            self._handle(), as_int(block_size, "block_size", 1, 2**31 - 1),
            as_int(dynamic_shared, "dynamic_shared", 0, 2**63 - 1), ctypes.byref(n)))
        return n.value

    def suggest_block_size(self, dynamic_shared: int = 0) -> Tuple[int, int]:
        """(minimum grid to fill the device, block size) maximising occupancy."""
        g, b = ctypes.c_int(), ctypes.c_int()
        check(_lib.lib().kjit_kernel_suggest_block_size(
            self._handle(), as_int(dynamic_shared, "dynamic_shared", 0, 2**63 - 1),
            ctypes.byref(g), ctypes.byref(b)))
        return g.value, b.value

    # ---- packing ----

    def _make_plan(self, args: Tuple[Any, ...], key: Tuple[type, ...]):
        fmt = ["<"]
        convs: List[Any] = []
        pos = 0
        for i, (a, (off, size)) in enumerate(zip(args, self._params)):
            if off < pos:
                raise InternalError(None, "kernel parameter %d overlaps the previous one" % i)
            if off > pos:
                fmt.append("%dx" % (off - pos))
            f, conv = _arg_plan(i, a, size)
            fmt.append(f)
            convs.append(conv)
            pos = off + size
        if self._bufsize > pos:
            fmt.append("%dx" % (self._bufsize - pos))
        plan = (struct.Struct("".join(fmt)),
                None if all(c is None for c in convs) else convs)
        if len(self._plans) >= _PLAN_LIMIT:
            self._plans.clear()
        self._plans[key] = plan
        return plan

    def pack(self, args: Sequence[Any]) -> bytes:
        """The packed parameter buffer for `args` (see :meth:`launch_packed`)."""
        self._handle()
        return self._pack(args)

    def _pack(self, args: Any) -> bytes:
        if type(args) is not tuple:
            if isinstance(args, (list, tuple)):
                args = tuple(args)
            else:
                raise TypeError("kernel arguments must be a tuple or list, not %s"
                                % type(args).__name__)
        if len(args) != self._nparams:
            raise ArgumentMismatch(None, "kernel %s takes %d argument%s, %d given"
                                   % (self._symbol, self._nparams,
                                      "" if self._nparams == 1 else "s", len(args)))
        if not args:
            return self._empty
        key = tuple(map(type, args))
        plan = self._plans.get(key)
        if plan is None:
            plan = self._make_plan(args, key)
        st, convs = plan
        try:
            if convs is None:
                return st.pack(*args)
            return st.pack(*[a if c is None else c(a) for c, a in zip(convs, args)])
        except (struct.error, OverflowError) as e:
            raise self._which(args, e) from None

    def _which(self, args: Tuple[Any, ...], err: Exception) -> ArgumentMismatch:
        for i, (a, (_, size)) in enumerate(zip(args, self._params)):
            f, conv = _arg_plan(i, a, size)
            try:
                struct.pack("<" + f, conv(a) if conv else a)
            except (struct.error, OverflowError) as e:
                return ArgumentMismatch(None, "argument %d (%r): does not fit the kernel's "
                                              "%d-byte parameter (%s)" % (i, a, size, e))
        return ArgumentMismatch(None, "arguments do not fit the kernel: %s" % err)

    # ---- launching ----

    def __call__(self, grid: Dim3, block: Dim3, args: Sequence[Any] = (), *,
                 stream: Any = None, shared_mem: int = 0, cluster: Optional[Dim3] = None,
                 cooperative: bool = False) -> None:
        """Launch asynchronously.

        Args:
            grid: blocks per grid: an int or a tuple of 1 to 3 ints (each >= 1).
            block: threads per block, likewise.
            args: a tuple or list with one value per kernel parameter (see
                :class:`Scalar` for how ints, floats, NumPy scalars, ctypes values,
                bytes and device arrays are passed).
            stream: None (the legacy default stream), an int ``CUstream``, or a PyTorch,
                CuPy or cuda.core stream (``__cuda_stream__``, ``.cuda_stream``, ``.ptr``).
            shared_mem: dynamic shared memory in bytes.
            cluster: thread-block cluster dimensions (sm_90+), or None.
            cooperative: a cooperative launch (grid-wide synchronisation allowed).
        """
        h = self._h
        if h is None:
            self._handle()
        fast = self._fast_launch
        if fast is not None and cluster is None and not cooperative:
            st = fast(h, grid, block, args, stream, shared_mem)
            if st is not None:
                if st:
                    check(st)
                return
        buf = self._pack(args)
        cfg = self._config(grid, block, stream, shared_mem, cluster, cooperative)
        st = self._launch(h, cfg, buf, len(buf))
        if st:
            check(st)

    launch = __call__

    # The Python __call__, which the compiled one (below the class) hands what it does not
    # launch itself: arguments it does not convert, an unusual call, cluster launches.
    _call_python = __call__

    def launch_packed(self, grid: Dim3, block: Dim3, buffer: bytes, *, stream: Any = None,
                      shared_mem: int = 0, cluster: Optional[Dim3] = None,
                      cooperative: bool = False) -> None:
        """Launch with a parameter buffer made by :meth:`pack` (or by hand, laid out by
        :attr:`params`); its length must be :attr:`param_buffer_size`."""
        h = self._handle()
        fast = self._fast_packed
        if fast is not None and cluster is None and not cooperative:
            st = fast(h, grid, block, buffer, stream, shared_mem)
            if st is not None:
                check(st)
                return
        if not isinstance(buffer, (bytes, bytearray, memoryview)):
            raise TypeError("buffer must be bytes, not %s" % type(buffer).__name__)
        buf = bytes(buffer)
        if len(buf) != self._bufsize:
            raise ArgumentMismatch(None, "parameter buffer has %d bytes, the kernel's has %d"
                                   % (len(buf), self._bufsize))
        cfg = self._config(grid, block, stream, shared_mem, cluster, cooperative)
        check(self._launch(h, cfg, buf, len(buf)))

    # The Python launch_packed, to which the compiled one hands what it does not launch.
    _launch_packed_python = launch_packed

    @staticmethod
    def _config(grid: Any, block: Any, stream: Any, shared_mem: Any, cluster: Any,
                cooperative: Any) -> bytes:
        gx, gy, gz = _dims(grid, "grid")
        bx, by, bz = _dims(block, "block")
        if type(shared_mem) is not int or not 0 <= shared_mem <= _U32:
            shared_mem = as_int(shared_mem, "shared_mem", 0, _U32)
        s = stream_handle(stream)
        if cluster is None:
            cx = cy = cz = 0
        else:
            cx, cy, cz = _dims(cluster, "cluster")
        return _CFG.pack(_CFG_SIZE, gx, gy, gz, bx, by, bz, shared_mem, s, cx, cy, cz,
                         1 if cooperative else 0)


if _fastlaunch is not None:
    # kernel(...) straight into C: the compiled launch path without a Python frame, and
    # (use_vectorcall) without an argument tuple or keyword dict; launch_packed likewise.
    # Kernel.launch stays the Python method (same path, one frame more).
    Kernel.__call__ = _fastlaunch.make_call(Kernel)  # type: ignore[method-assign]
    Kernel.launch_packed = _fastlaunch.make_launch_packed(Kernel)  # type: ignore
    _fastlaunch.use_vectorcall(Kernel)
