"""GEMM through cuBLASLt with a plan cache that survives restarts (include/kjit/gemm.h).

    D = epilogue(alpha * op(A) * op(B) + beta * C)

:meth:`Gemm.matmul` takes device arrays (PyTorch, CuPy, ...) and derives the problem
from their shapes, strides and dtypes; :meth:`Gemm.run` takes a :class:`GemmDesc` and
pointers for full control.
"""
from __future__ import annotations

import ctypes
import dataclasses
from dataclasses import dataclass
TYPE_CHECKING = False  # typing only for type checkers: annotations are strings
if TYPE_CHECKING:
    from typing import Any, Optional, Tuple

from . import _lib
from ._arrays import ArrayInfo, array_info, device_pointer, stream_handle
from ._cache import Cache, _cache_handle
from ._errors import IntEnum, InvalidArgument
from ._util import Handle, as_bool, as_int, check, out_handle


class GemmDtype(IntEnum):
    """Element types (``kjit_gemm_dtype``)."""
    DEFAULT = 0   #: derive it (see GemmDesc)
    F32 = 1
    F16 = 2
    BF16 = 3
    F8_E4M3 = 4   #: compute capability 8.9+
    F8_E5M2 = 5   #: compute capability 8.9+
    F64 = 6


class GemmCompute(IntEnum):
    """Compute (accumulation) type (``kjit_gemm_compute``)."""
    DEFAULT = 0        #: F64 for f64 data, F32 otherwise
    F32 = 1
    TF32 = 2           #: f32 inputs rounded to TF32 on tensor cores
    F16 = 3
    F64 = 4
    F32_FAST_F16 = 5
    F32_FAST_BF16 = 6


class GemmOrder(IntEnum):
    """Storage order shared by A, B, C and D (``kjit_gemm_order``)."""
    COL_MAJOR = 0
    ROW_MAJOR = 1


class GemmOp(IntEnum):
    """Operation applied to A or B (``kjit_gemm_op``)."""
    N = 0  #: as stored
    T = 1  #: transposed


class GemmEpilogue(IntEnum):
    """Epilogue (``kjit_gemm_epilogue``); GELU is the tanh approximation. The bias has
    one element per column of a row-major D (per row of a column-major D)."""
    NONE = 0
    BIAS = 1
    RELU = 2
    RELU_BIAS = 3
    GELU = 4
    GELU_BIAS = 5


_DTYPES = {"float32": GemmDtype.F32, "float16": GemmDtype.F16, "bfloat16": GemmDtype.BF16,
           "float8_e4m3fn": GemmDtype.F8_E4M3, "float8_e5m2": GemmDtype.F8_E5M2,
           "float64": GemmDtype.F64}

_I64 = 2**63 - 1


@dataclass
class GemmDesc:
    """One GEMM problem (``kjit_gemm_desc``); sizes, leading dimensions and strides count
    elements. Set at least m, n, k and a_type. See include/kjit/gemm.h for each field."""
    m: int = 0
    n: int = 0
    k: int = 0
    a_type: int = GemmDtype.DEFAULT
    b_type: int = GemmDtype.DEFAULT   #: DEFAULT = a_type
    c_type: int = GemmDtype.DEFAULT   #: DEFAULT = d_type
    d_type: int = GemmDtype.DEFAULT   #: DEFAULT = a_type
    order: int = GemmOrder.COL_MAJOR
    trans_a: int = GemmOp.N
    trans_b: int = GemmOp.N
    lda: int = 0                      #: 0 = packed
    ldb: int = 0
    ldc: int = 0
    ldd: int = 0
    compute: int = GemmCompute.DEFAULT
    epilogue: int = GemmEpilogue.NONE
    bias_type: int = GemmDtype.DEFAULT
    batch_count: int = 1
    stride_a: int = 0                 #: 0 = packed
    stride_b: int = 0
    stride_c: int = 0
    stride_d: int = 0
    stride_bias: int = 0              #: 0 = one bias for every batch
    alpha: float = 1.0
    beta: float = 0.0                 #: 0: C is not read and may be None
    a_scale: Any = None               #: fp8 scale factors: device pointers (or arrays)
    b_scale: Any = None
    d_scale: Any = None

    def _struct(self) -> _lib.GemmDescStruct:
        s = _lib.GemmDescStruct()
        s.struct_size = ctypes.sizeof(s)
        for name in ("order", "trans_a", "trans_b", "a_type", "b_type", "c_type", "d_type",
                     "compute", "epilogue", "bias_type"):
            setattr(s, name, as_int(getattr(self, name), name, -2**31, 2**31 - 1))
        for name in ("m", "n", "k", "lda", "ldb", "ldc", "ldd", "batch_count", "stride_a",
                     "stride_b", "stride_c", "stride_d", "stride_bias"):
            setattr(s, name, as_int(getattr(self, name), name, -2**63, _I64))
        for name in ("alpha", "beta"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise TypeError("%s must be a real number, not %s" % (name, type(v).__name__))
            setattr(s, name, float(v))
        for name in ("a_scale", "b_scale", "d_scale"):
            v = getattr(self, name)
            setattr(s, name, None if v is None else (device_pointer(v) or None))
        return s


@dataclass(frozen=True)
class GemmStats:
    """Counters of one :class:`Gemm` handle since it was created (``kjit_gemm_stats``)."""
    runs: int
    memory_hits: int        #: plan found in the memory tier
    disk_hits: int          #: plan read from the cache database and verified
    misses: int             #: heuristic (or autotune) needed
    heuristic_queries: int
    autotunes: int
    disk_rejected: int
    disk_writes: int
    evictions: int
    plans: int              #: plans in the memory tier now
    workspace_bytes: int    #: device memory held for workspaces now


def _ptr(v: Any, what: str) -> Optional[int]:
    if v is None:
        return None
    try:
        return device_pointer(v) or None
    except TypeError as e:
        raise TypeError("%s: %s" % (what, e)) from None


def gemm_check(desc: GemmDesc, a: Any, b: Any, c: Any, d: Any, bias: Any = None) -> None:
    """Check a problem and its pointers without a GPU: everything :meth:`Gemm.run` checks
    before it needs the device (pointers are compared with NULL and checked for
    alignment, never dereferenced). Raises :class:`InvalidArgument` or
    :class:`Unsupported` naming the field."""
    if not isinstance(desc, GemmDesc):
        raise TypeError("desc must be a kjit.GemmDesc, not %s" % type(desc).__name__)
    s = desc._struct()
    check(_lib.lib().kjit_gemm_check(ctypes.byref(s), _ptr(a, "A"), _ptr(b, "B"),
                                     _ptr(c, "C"), _ptr(d, "D"), _ptr(bias, "bias")))


def _matrix(info: ArrayInfo, name: str) -> Tuple[int, int, int, int, bool, int]:
    """(batch, rows, cols, ld, transposed, batch stride) of a 2-D or 3-D array in
    row-major terms; a view with unit stride along its rows (e.g. ``x.T``) is a
    transposed row-major matrix."""
    if len(info.shape) not in (2, 3):
        raise InvalidArgument(None, "%s must be 2-D (or 3-D for a batch), got shape %s"
                              % (name, info.shape))
    batch, stride = 1, 0
    shape, strides = info.shape, info.strides
    if len(shape) == 3:
        batch, stride = shape[0], strides[0]
        shape, strides = shape[1:], strides[1:]
        if batch > 1 and stride <= 0:
            raise InvalidArgument(None, "%s: batch stride %d is not supported (broadcast "
                                        "batches must be materialised)" % (name, stride))
    rows, cols = shape
    rs, cs = strides
    if cs == 1 or cols == 1 and rs >= max(1, cols):
        return batch, rows, cols, max(rs, cols, 1), False, stride
    if rs == 1 or rows == 1:
        return batch, rows, cols, max(cs, rows, 1), True, stride
    raise InvalidArgument(None, "%s (shape %s, strides %s elements) is not contiguous in "
                                "either dimension; make it contiguous first"
                          % (name, info.shape, info.strides))


def _dtype(info: ArrayInfo, name: str) -> GemmDtype:
    t = _DTYPES.get(info.dtype)
    if t is None:
        raise InvalidArgument(None, "%s has dtype %s; GEMM takes %s" % (
            name, info.dtype, ", ".join(_DTYPES)))
    return t


def matmul_desc(a: Any, b: Any, out: Any, *, c: Any = None, bias: Any = None,
                alpha: float = 1.0, beta: float = 0.0,
                epilogue: int = GemmEpilogue.NONE, compute: int = GemmCompute.DEFAULT,
                a_scale: Any = None, b_scale: Any = None, d_scale: Any = None
                ) -> Tuple[GemmDesc, Tuple[int, int, Optional[int], int, Optional[int]]]:
    """The :class:`GemmDesc` and pointers (A, B, C, D, bias) of ``out = a @ b`` for
    row-major device arrays, as :meth:`Gemm.matmul` runs it. Needs no GPU."""
    ia, ib, io = array_info(a), array_info(b), array_info(out)
    ba, m, ka, lda, ta, sa = _matrix(ia, "a")
    bb, kb, n, ldb, tb, sb = _matrix(ib, "b")
    bo, mo, no, ldo, to, so = _matrix(io, "out")
    if to:
        raise InvalidArgument(None, "out must be row-major with contiguous rows "
                                    "(strides %s)" % (io.strides,))
    if ka != kb or (m, n) != (mo, no):
        raise InvalidArgument(None, "shapes do not multiply: a %s @ b %s -> out %s"
                              % (ia.shape, ib.shape, io.shape))
    batch = max(ba, bb, bo)
    for bn, nm in ((ba, "a"), (bb, "b"), (bo, "out")):
        if bn not in (1, batch):
            raise InvalidArgument(None, "batch sizes differ: a %s, b %s, out %s"
                                  % (ia.shape, ib.shape, io.shape))
        if batch > 1 and bn == 1 and nm == "out":
            raise InvalidArgument(None, "out must hold every batch (%d)" % batch)
    if batch > 1 and (ba == 1 or bb == 1):
        raise InvalidArgument(None, "a and b must both be batched (%d) or neither" % batch)
    desc = GemmDesc(m=m, n=n, k=ka, a_type=_dtype(ia, "a"), b_type=_dtype(ib, "b"),
                    d_type=_dtype(io, "out"), order=GemmOrder.ROW_MAJOR,
                    trans_a=GemmOp.T if ta else GemmOp.N,
                    trans_b=GemmOp.T if tb else GemmOp.N,
                    lda=lda, ldb=ldb, ldd=ldo, compute=compute, epilogue=epilogue,
                    batch_count=batch, stride_a=sa, stride_b=sb, stride_d=so,
                    alpha=alpha, beta=beta, a_scale=a_scale, b_scale=b_scale,
                    d_scale=d_scale)
    pc: Optional[int] = None
    if c is not None:
        ic = array_info(c)
        bc, mc, nc, ldc, tc, sc = _matrix(ic, "c")
        if tc or (mc, nc) != (m, n) or bc not in (1, batch) or (batch > 1 and bc == 1):
            raise InvalidArgument(None, "c must be a row-major %s matrix like out, got "
                                        "shape %s strides %s" % ((m, n), ic.shape,
                                                                 ic.strides))
        desc.c_type, desc.ldc, desc.stride_c = _dtype(ic, "c"), ldc, sc
        pc = ic.ptr
    pbias: Optional[int] = None
    if bias is not None:
        iv = array_info(bias)
        if len(iv.shape) == 2 and batch > 1:
            if iv.shape[0] != batch or iv.strides[1] != 1:
                raise InvalidArgument(None, "bias must be (n,) or (batch, n) contiguous, "
                                            "got shape %s" % (iv.shape,))
            desc.stride_bias = iv.strides[0]
            blen = iv.shape[1]
        elif len(iv.shape) == 1 and (iv.strides[0] == 1 or iv.shape[0] == 1):
            blen = iv.shape[0]
        else:
            raise InvalidArgument(None, "bias must be a contiguous vector of n = %d "
                                        "elements, got shape %s" % (n, iv.shape))
        if blen != n:
            raise InvalidArgument(None, "bias has %d elements, out has n = %d columns"
                                  % (blen, n))
        desc.bias_type = _dtype(iv, "bias")
        pbias = iv.ptr
    return desc, (ia.ptr, ib.ptr, pc, io.ptr, pbias)


class Gemm(Handle):
    """A cuBLASLt GEMM handle for one device, with a plan cache: bound to a
    :class:`Cache`, its plans persist in the cache database, so a new process runs a
    known problem without a heuristic query.

    Args:
        cache: the cache for persistent plans, or None (memory only). Must stay open
            while the handle is.
        device: the CUDA device ordinal.
        plan_capacity: plans kept in memory (0 = 64).
        autotune: on a plan miss, time the best candidates on the real buffers.
        autotune_candidates, autotune_warmup, autotune_reps: autotuning effort
            (0 = 8, 2, 7).
        max_workspace_bytes: workspace cap per stream (0 = 32 MiB).

    Raises :class:`CudaUnavailable` without a driver or device, :class:`CublasError` when
    cuBLASLt cannot be loaded. Thread-safe: any number of threads may run on one handle.
    """

    _kind = "Gemm"

    def __init__(self, cache: Optional[Cache] = None, device: int = 0, *,
                 plan_capacity: int = 0, autotune: bool = False,
                 autotune_candidates: int = 0, autotune_warmup: int = 0,
                 autotune_reps: int = 0, max_workspace_bytes: int = 0) -> None:
        ch = _cache_handle(cache, "Gemm")
        d = as_int(device, "device", 0, 2**31 - 1)
        o = _lib.GemmOptionsStruct()
        check(_lib.lib().kjit_gemm_options_init_sized(ctypes.byref(o), ctypes.sizeof(o)))
        o.plan_capacity = as_int(plan_capacity, "plan_capacity", 0, 2**32 - 1)
        o.autotune = as_bool(autotune, "autotune")
        o.autotune_candidates = as_int(autotune_candidates, "autotune_candidates", 0,
                                       2**32 - 1)
        o.autotune_warmup = as_int(autotune_warmup, "autotune_warmup", 0, 2**32 - 1)
        o.autotune_reps = as_int(autotune_reps, "autotune_reps", 0, 2**32 - 1)
        o.max_workspace_bytes = as_int(max_workspace_bytes, "max_workspace_bytes", 0,
                                       2**64 - 1)
        h = ctypes.c_void_p()
        check(_lib.lib().kjit_gemm_create(ch, d, ctypes.byref(o), ctypes.byref(h)))
        self._cache = cache
        self._device = d
        if cache is not None:
            cache._acquire()
        self._h = out_handle(h)

    def _destroy(self, h: int) -> None:
        _lib.lib().kjit_gemm_destroy(h)
        if self._cache is not None:
            self._cache._release()

    def __repr__(self) -> str:
        if self._h is None:
            return "<kjit.Gemm closed>"
        return "<kjit.Gemm device=%d cache=%r>" % (self._device, self._cache)

    @property
    def device(self) -> int:
        """The device ordinal."""
        return self._device

    def run(self, desc: GemmDesc, a: Any, b: Any, c: Any, d: Any, bias: Any = None, *,
            stream: Any = None) -> None:
        """Enqueue the problem `desc` on `stream`. A, B, C, D and bias are device arrays or
        int addresses (C may be None when beta is 0; bias only with a bias epilogue)."""
        h = self._handle()
        if not isinstance(desc, GemmDesc):
            raise TypeError("desc must be a kjit.GemmDesc, not %s" % type(desc).__name__)
        s = desc._struct()
        check(_lib.lib().kjit_gemm_run(h, ctypes.byref(s), _ptr(a, "A"), _ptr(b, "B"),
                                       _ptr(c, "C"), _ptr(d, "D"), _ptr(bias, "bias"),
                                       stream_handle(stream) or None))

    def matmul(self, a: Any, b: Any, out: Any, *, c: Any = None, bias: Any = None,
               alpha: float = 1.0, beta: float = 0.0,
               epilogue: int = GemmEpilogue.NONE, compute: int = GemmCompute.DEFAULT,
               a_scale: Any = None, b_scale: Any = None, d_scale: Any = None,
               stream: Any = None) -> Any:
        """``out = epilogue(alpha * a @ b + beta * c (+ bias))`` for device arrays, as
        ``torch.matmul(a, b, out=out)`` (2-D, or 3-D batches). Shapes, dtypes (float32,
        float16, bfloat16, float64, fp8) and layouts come from the arrays: rows must be
        contiguous, or columns (a transposed view such as ``w.T`` is passed as op = T).
        `out` must be row-major with contiguous rows. Returns `out`.

        The call is asynchronous on `stream` (None = the legacy default stream, which is
        PyTorch's and CuPy's default too).
        """
        h = self._handle()
        desc, (pa, pb, pc, pd, pbias) = matmul_desc(
            a, b, out, c=c, bias=bias, alpha=alpha, beta=beta, epilogue=epilogue,
            compute=compute, a_scale=a_scale, b_scale=b_scale, d_scale=d_scale)
        s = desc._struct()
        check(_lib.lib().kjit_gemm_run(h, ctypes.byref(s), pa or None, pb or None, pc,
                                       pd or None, pbias, stream_handle(stream) or None))
        return out

    def clear_plans(self) -> None:
        """Drop every plan of the memory tier (the cache database keeps its copies)."""
        check(_lib.lib().kjit_gemm_clear_plans(self._handle()))

    def stats(self) -> GemmStats:
        """The handle's counters."""
        s = _lib.GemmStatsStruct()
        s.struct_size = ctypes.sizeof(s)
        check(_lib.lib().kjit_gemm_stats_get(self._handle(), ctypes.byref(s)))
        return GemmStats(**{f.name: getattr(s, f.name) for f in dataclasses.fields(GemmStats)})


def cublaslt_version() -> int:
    """cuBLASLt's run-time version (e.g. 130100), loading cuBLASLt if needed; raises
    :class:`CublasError` when it cannot be loaded."""
    v = ctypes.c_size_t()
    check(_lib.lib().kjit_cublaslt_version(ctypes.byref(v)))
    return v.value
