"""Device arrays and streams of other libraries, without depending on any of them.

Arrays: any object with ``__cuda_array_interface__`` (CuPy, PyTorch, Numba, JAX, ...) or
DLPack (``__dlpack__``) stands for its device pointer. Streams: an int (a ``CUstream``),
or any object with ``__cuda_stream__`` (the CUDA stream protocol: cuda.core, recent
PyTorch and CuPy), ``.cuda_stream`` (PyTorch) or ``.ptr`` (CuPy).
"""
from __future__ import annotations

import ctypes
from ctypes import POINTER, c_int32, c_int64, c_uint8, c_uint16, c_uint32, c_uint64, c_void_p
from collections import namedtuple

TYPE_CHECKING = False  # typing only for type checkers: annotations are strings
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, Optional, Tuple

from ._errors import ArgumentMismatch, InvalidArgument

_U64 = (1 << 64) - 1

# ---- DLPack (dlpack.h) ------------------------------------------------------------------

DL_CPU, DL_CUDA, DL_CUDA_HOST, DL_CUDA_MANAGED = 1, 2, 3, 13
#: DLPack device types whose memory a CUDA kernel can address.
DL_DEVICE_OK = (DL_CUDA, DL_CUDA_HOST, DL_CUDA_MANAGED)
_DL_DEVICE_NAMES = {1: "CPU", 2: "CUDA", 3: "CUDA host (pinned)", 4: "OpenCL", 7: "Vulkan",
                    8: "Metal", 10: "ROCm", 11: "ROCm host", 13: "CUDA managed",
                    14: "oneAPI"}

# (code, bits) -> dtype name. Codes from dlpack.h's DLDataTypeCode.
_DL_DTYPES = {
    (0, 8): "int8", (0, 16): "int16", (0, 32): "int32", (0, 64): "int64",
    (1, 8): "uint8", (1, 16): "uint16", (1, 32): "uint32", (1, 64): "uint64",
    (2, 16): "float16", (2, 32): "float32", (2, 64): "float64",
    (4, 16): "bfloat16", (5, 64): "complex64", (5, 128): "complex128", (6, 8): "bool",
    (10, 8): "float8_e4m3fn", (12, 8): "float8_e5m2",
}

# __cuda_array_interface__ typestr (without the byte order) -> dtype name
_CAI_DTYPES = {
    "i1": "int8", "i2": "int16", "i4": "int32", "i8": "int64",
    "u1": "uint8", "u2": "uint16", "u4": "uint32", "u8": "uint64",
    "f2": "float16", "f4": "float32", "f8": "float64",
    "c8": "complex64", "c16": "complex128", "b1": "bool",
}


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(ctypes.Structure):
    """``DLTensor`` of dlpack.h."""
    _fields_ = [("data", c_void_p), ("device", _DLDevice), ("ndim", c_int32),
                ("dtype", _DLDataType), ("shape", POINTER(c_int64)),
                ("strides", POINTER(c_int64)), ("byte_offset", c_uint64)]


class DLManagedTensor(ctypes.Structure):
    """``DLManagedTensor`` of dlpack.h (capsule name "dltensor")."""
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p), ("deleter", c_void_p)]


class _DLPackVersion(ctypes.Structure):
    _fields_ = [("major", c_uint32), ("minor", c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    """``DLManagedTensorVersioned`` of dlpack.h >= 1.0 (capsule "dltensor_versioned")."""
    _fields_ = [("version", _DLPackVersion), ("manager_ctx", c_void_p), ("deleter", c_void_p),
                ("flags", c_uint64), ("dl_tensor", DLTensor)]


_capi = ctypes.pythonapi  # PyDLL: the Python C API must be called with the GIL held
_capi.PyCapsule_IsValid.restype = ctypes.c_int
_capi.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capi.PyCapsule_GetPointer.restype = c_void_p
_capi.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


class ArrayInfo(namedtuple("ArrayInfo", "ptr shape strides dtype itemsize device")):
    """What kjit needs to know of a device array: ``ptr`` (int, address of the first
    element), ``shape`` (tuple of ints), ``strides`` (tuple of ints, in elements),
    ``dtype`` (str, e.g. "float32", "bfloat16", or "?<code>/<bits>"), ``itemsize`` (int,
    bytes per element), ``device`` (CUDA device ordinal when the protocol says (DLPack),
    else None). A named tuple (collections.namedtuple: typing is not imported)."""
    __slots__ = ()
    ptr: int
    shape: Tuple[int, ...]
    strides: Tuple[int, ...]
    dtype: str
    itemsize: int
    device: Optional[int]


def _what(obj: Any) -> str:
    return type(obj).__module__ + "." + type(obj).__qualname__


def _dl_tensor(capsule: Any, obj: Any) -> DLTensor:
    if _capi.PyCapsule_IsValid(capsule, b"dltensor"):
        p = _capi.PyCapsule_GetPointer(capsule, b"dltensor")
        return DLManagedTensor.from_address(p).dl_tensor
    if _capi.PyCapsule_IsValid(capsule, b"dltensor_versioned"):
        p = _capi.PyCapsule_GetPointer(capsule, b"dltensor_versioned")
        return DLManagedTensorVersioned.from_address(p).dl_tensor
    raise InvalidArgument(None, "%s.__dlpack__() did not return a DLPack capsule" % _what(obj))


def dlpack_info(obj: Any) -> ArrayInfo:
    """ArrayInfo of an object that exports DLPack; raises for memory a CUDA kernel cannot
    address (host arrays)."""
    try:
        capsule = obj.__dlpack__()
    except (TypeError, RuntimeError, BufferError, ValueError) as e:
        raise InvalidArgument(None, "%s.__dlpack__() failed: %s" % (_what(obj), e)) from None
    t = _dl_tensor(capsule, obj)
    dev = t.device.device_type
    if dev not in DL_DEVICE_OK:
        raise InvalidArgument(
            None, "%s is in %s memory; kernels need device memory (a CuPy or PyTorch CUDA "
                  "array)" % (_what(obj), _DL_DEVICE_NAMES.get(dev, "device type %d" % dev)))
    if t.dtype.lanes != 1:
        raise InvalidArgument(None, "%s: vector dtypes (lanes=%d) are not supported"
                              % (_what(obj), t.dtype.lanes))
    ndim = t.ndim
    shape = tuple(t.shape[i] for i in range(ndim))
    if t.strides:
        strides = tuple(t.strides[i] for i in range(ndim))
    else:
        strides = _contiguous(shape)
    bits = t.dtype.bits
    name = _DL_DTYPES.get((t.dtype.code, bits), "?%d/%d" % (t.dtype.code, bits))
    ptr = (t.data or 0) + t.byte_offset
    device = t.device.device_id if dev in (DL_CUDA, DL_CUDA_MANAGED) else None
    del t
    del capsule  # its destructor calls the producer's deleter
    return ArrayInfo(ptr, shape, strides, name, max(1, bits // 8), device)


def _contiguous(shape: Tuple[int, ...]) -> Tuple[int, ...]:
    strides = []
    acc = 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(1, n)
    return tuple(reversed(strides))


def cai_info(obj: Any, cai: Dict[str, Any]) -> ArrayInfo:
    """ArrayInfo from a ``__cuda_array_interface__`` dict."""
    if not isinstance(cai, dict) or "data" not in cai or "shape" not in cai:
        raise InvalidArgument(None, "%s.__cuda_array_interface__ is malformed" % _what(obj))
    if cai.get("mask") is not None:
        raise InvalidArgument(None, "%s: masked arrays are not supported" % _what(obj))
    typestr = cai.get("typestr", "")
    if not isinstance(typestr, str) or len(typestr) < 3 or typestr[0] not in "<|=>":
        raise InvalidArgument(None, "%s: unknown typestr %r" % (_what(obj), typestr))
    if typestr[0] == ">":
        raise InvalidArgument(None, "%s: big-endian data is not supported" % _what(obj))
    try:
        itemsize = int(typestr[2:])
    except ValueError:
        raise InvalidArgument(None, "%s: unknown typestr %r" % (_what(obj), typestr)) from None
    name = _CAI_DTYPES.get(typestr[1:], "?" + typestr[1:])
    shape = tuple(int(n) for n in cai["shape"])
    raw = cai.get("strides")
    if raw is None:
        strides = _contiguous(shape)
    else:
        if any(int(s) % itemsize for s in raw):
            raise InvalidArgument(None, "%s: strides %r are not multiples of the item size %d"
                                  % (_what(obj), tuple(raw), itemsize))
        strides = tuple(int(s) // itemsize for s in raw)
    ptr = cai["data"][0] or 0
    return ArrayInfo(int(ptr), shape, strides, name, itemsize, None)


def array_info(obj: Any) -> ArrayInfo:
    """ArrayInfo of a device array (``__cuda_array_interface__`` first, DLPack next)."""
    err: Optional[Exception] = None
    if hasattr(type(obj), "__cuda_array_interface__"):
        try:
            info = cai_info(obj, obj.__cuda_array_interface__)
            # bfloat16 has no typestr: PyTorch raises TypeError or (newer) says "<V2"
            # (opaque bytes). DLPack knows it.
            if not info.dtype.startswith("?") or not hasattr(type(obj), "__dlpack__"):
                return info
        except (TypeError, RuntimeError, AttributeError, KeyError) as e:
            err = e
    if hasattr(type(obj), "__dlpack__"):
        return dlpack_info(obj)
    if err is not None:
        raise InvalidArgument(None, "%s.__cuda_array_interface__ failed: %s"
                              % (_what(obj), err)) from None
    if hasattr(obj, "__array_interface__") or hasattr(obj, "__array__"):
        raise InvalidArgument(None, "%s is a host array; kernels need device memory "
                                    "(a CuPy or PyTorch CUDA array)" % _what(obj))
    raise TypeError("%s is not a device array: it has neither __cuda_array_interface__ nor "
                    "__dlpack__" % _what(obj))


# ---- device pointers of kernel arguments (hot path: one getter per type) ---------------

def _torch_ptr(t: Any) -> int:
    if t.is_cuda:
        return t.data_ptr()
    raise ArgumentMismatch(None, "a PyTorch tensor on %s: kernels need CUDA tensors" % t.device)


def _cupy_ptr(a: Any) -> int:
    return a.data.ptr


def _cai_ptr(obj: Any) -> int:
    try:
        cai = obj.__cuda_array_interface__
    except (TypeError, RuntimeError, AttributeError, KeyError):
        if hasattr(type(obj), "__dlpack__"):
            return dlpack_info(obj).ptr
        raise
    if not isinstance(cai, dict):
        raise InvalidArgument(None, "%s.__cuda_array_interface__ is malformed" % _what(obj))
    if cai.get("mask") is not None:
        raise InvalidArgument(None, "%s: masked arrays are not supported" % _what(obj))
    return cai["data"][0] or 0


def _dlpack_ptr(obj: Any) -> int:
    return dlpack_info(obj).ptr


def pointer_kind(tp: type) -> Optional[str]:
    """How the device pointer of objects of type `tp` is read: "torch" (``.is_cuda`` and
    ``.data_ptr()``), "cupy" (``.data.ptr``), "cai" (``__cuda_array_interface__``),
    "dlpack", or None when `tp` is not a device array type."""
    has_cai = hasattr(tp, "__cuda_array_interface__")
    if has_cai and hasattr(tp, "data_ptr") and hasattr(tp, "is_cuda"):
        return "torch"  # torch.Tensor and subclasses: no dict built per call
    if has_cai and tp.__module__.split(".")[0] == "cupy" and tp.__name__ == "ndarray":
        return "cupy"
    if has_cai:
        return "cai"
    if hasattr(tp, "__dlpack__"):
        return "dlpack"
    return None


_POINTER_GETTERS = {"torch": _torch_ptr, "cupy": _cupy_ptr, "cai": _cai_ptr,
                    "dlpack": _dlpack_ptr, None: None}


def pointer_getter(tp: type) -> Optional[Callable[[Any], int]]:
    """A function giving the device pointer of objects of type `tp`, or None when `tp`
    is not a device array type. Decided once per type."""
    return _POINTER_GETTERS[pointer_kind(tp)]


def device_pointer(obj: Any) -> int:
    """The device address of an array (or an int address itself)."""
    if isinstance(obj, int) and not isinstance(obj, bool):
        if not 0 <= obj <= _U64:
            raise InvalidArgument(None, "device pointer %d is out of range" % obj)
        return obj
    if isinstance(obj, ctypes.c_void_p):
        return obj.value or 0
    g = pointer_getter(type(obj))
    if g is None:
        raise TypeError("%s is not a device pointer: pass an int address or an object with "
                        "__cuda_array_interface__ or __dlpack__" % _what(obj))
    return g(obj)


# ---- streams -----------------------------------------------------------------------------

def stream_handle(stream: Any) -> int:
    """The CUstream value of `stream`: None (0, the legacy default stream), an int, or an
    object with ``__cuda_stream__`` (method or attribute giving ``(version, handle)``),
    ``.cuda_stream`` (PyTorch) or ``.ptr`` (CuPy), or ``.handle`` (Numba, cuda.core)."""
    if stream is None:
        return 0
    if type(stream) is int:
        if 0 <= stream <= _U64:
            return stream
        raise InvalidArgument(None, "stream handle %d is out of range" % stream)
    if isinstance(stream, bool):
        raise TypeError("stream must be None, an int handle or a stream object, not bool")
    if isinstance(stream, int):
        return stream_handle(int(stream))
    if isinstance(stream, ctypes.c_void_p):
        return stream.value or 0
    proto = getattr(stream, "__cuda_stream__", None)
    if proto is not None:
        v = proto() if callable(proto) else proto
        if isinstance(v, tuple) and len(v) == 2:
            return _int_handle(v[1], stream, "__cuda_stream__")
        if isinstance(v, int) and not isinstance(v, bool):
            return _int_handle(v, stream, "__cuda_stream__")
        raise TypeError("%s.__cuda_stream__ gave %r; expected (version, handle)"
                        % (_what(stream), v))
    for attr in ("cuda_stream", "ptr", "handle"):
        v = getattr(stream, attr, None)
        if v is not None:
            return _int_handle(v, stream, attr)
    raise TypeError("stream must be None, an int (CUstream) or a stream object with "
                    "__cuda_stream__, .cuda_stream (PyTorch) or .ptr (CuPy); got %s"
                    % _what(stream))


def _int_handle(v: Any, stream: Any, attr: str) -> int:
    if isinstance(v, ctypes.c_void_p):
        return v.value or 0
    if isinstance(v, bool):
        raise TypeError("%s.%s is a bool, not a stream handle" % (_what(stream), attr))
    try:
        h = int(v)
    except (TypeError, ValueError):
        raise TypeError("%s.%s (%r) is not an integer stream handle"
                        % (_what(stream), attr, v)) from None
    if not 0 <= h <= _U64:
        raise InvalidArgument(None, "%s.%s = %d is out of range" % (_what(stream), attr, h))
    return h
