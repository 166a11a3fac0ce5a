"""Grouped GEMM for mixture-of-experts layers with kjit's own kernels
(include/kjit/grouped_gemm.h).

    out[rows of group g] = act(alpha * a[rows of g] @ b[g] + beta * c + bias[g])

The same call as ``torch._grouped_mm(a, b, offs=offs)``::

    import kjit
    gg = kjit.GroupedGemm()
    out = gg(x, w, offs)   # x (rows, K) bf16, w (G, K, N) bf16, offs int32 cumulative ends

``w`` may be a (G, K, N) tensor with contiguous rows or the transposed view of a (G, N, K)
tensor (``w_nk.transpose(-2, -1)``), the two memory orders torch uses.

fp8 e4m3 (``torch.float8_e4m3fn``) x and w with row-wise scales, as
``torch._scaled_grouped_mm(x, w, scale_a, scale_b, offs=offs, out_dtype=torch.bfloat16)``::

    out = gg(x8, w8, offs, scale_a=sa, scale_b=sb)  # sa (rows,) fp32, sb (G, N) fp32

(bf16 out; the fast kernel on sm_90 wants w as the transposed view of a (G, N, K) tensor).
"""
from __future__ import annotations

import ctypes
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

from . import _lib
from ._arrays import array_info, stream_handle
from ._errors import IntEnum, InvalidArgument
from ._util import Handle, as_bool, as_int, check, out_handle


class GroupedBOrder(IntEnum):
    """Memory order of B's G matrices (``kjit_grouped_b_order``)."""
    KN = 0  #: (G, K, N), rows of N contiguous
    NK = 1  #: (G, N, K), a linear layer's weight; passed to torch as its transposed view


class GroupedActivation(IntEnum):
    """Activation applied last (``kjit_grouped_activation``); GELU is the tanh form."""
    NONE = 0
    RELU = 1
    GELU = 2
    SILU = 3
    #: gated: b's first N/2 columns are the gate, the next N/2 the up projection
    #: (``gate, up = (x @ w13.T).chunk(2, -1)``); out = silu(gate) * up has N/2 columns
    SWIGLU = 4


_ACTS = {"none": 0, "relu": 1, "gelu": 2, "silu": 3, "swiglu": 4}


def _activation(a: Any) -> int:
    if isinstance(a, str):
        if a.lower() not in _ACTS:
            raise InvalidArgument(None, "activation %r is not one of %s" % (a, sorted(_ACTS)))
        return _ACTS[a.lower()]
    return as_int(a, "activation", 0, 4)


def _compiler_handle(compiler: Any) -> int:
    h = getattr(compiler, "_h", None)
    if h is None:
        raise InvalidArgument(None, "compiler must be an open kjit.Compiler")
    return h


_INPUT_TYPES = {"bfloat16": 3, "float8_e4m3fn": 4}  # kjit_gemm_dtype


def _desc(a: Any, b: Any, out: Any, c: Any, bias: Any, alpha: float, beta: float,
          activation: Any):
    """The kjit_grouped_gemm_desc of a call and its pointers (A, B, C, D, bias)."""
    ai, bi = array_info(a), array_info(b)
    if len(ai.shape) != 2 or len(bi.shape) != 3:
        raise InvalidArgument(None, "a must be 2-D (rows, K) and b 3-D (G, K, N); got "
                              "%s and %s" % (ai.shape, bi.shape))
    for name, info in (("a", ai), ("b", bi)):
        if info.dtype not in _INPUT_TYPES:
            raise InvalidArgument(None, "%s is %s; bfloat16 and float8_e4m3fn are offered" %
                                  (name, info.dtype))
    if ai.dtype != bi.dtype:
        raise InvalidArgument(None, "a is %s but b is %s; they must have one type" %
                              (ai.dtype, bi.dtype))
    rows, k = ai.shape
    g, kb, n = bi.shape
    if kb != k:
        raise InvalidArgument(None, "a has K = %d but b has K = %d" % (k, kb))
    if ai.strides[1] != 1:
        raise InvalidArgument(None, "a's rows must be contiguous")
    s = _lib.GroupedGemmDescStruct()
    check(_lib.lib().kjit_grouped_gemm_desc_init_sized(ctypes.byref(s), ctypes.sizeof(s)))
    s.groups, s.rows, s.n, s.k = g, rows, n, k
    s.a_type = s.b_type = _INPUT_TYPES[ai.dtype]
    s.lda = ai.strides[0] if rows > 1 else k
    if bi.strides[2] == 1:
        s.b_order, s.ldb = GroupedBOrder.KN, bi.strides[1] if k > 1 else n
    elif bi.strides[1] == 1:
        s.b_order, s.ldb = GroupedBOrder.NK, bi.strides[2] if n > 1 else k
    else:
        raise InvalidArgument(None, "b needs contiguous rows along N or along K")
    s.stride_b = bi.strides[0] if g > 1 else 0
    s.activation = _activation(activation)
    # SwiGLU writes N/2 columns (silu(gate) * up); n stays B's width (checked even by kjit).
    no = n // 2 if s.activation == GroupedActivation.SWIGLU else n
    oi = array_info(out)
    if tuple(oi.shape) != (rows, no) or oi.strides[1] != 1 or oi.dtype != "bfloat16":
        raise InvalidArgument(None, "out must be a (%d, %d) bfloat16 array with contiguous "
                              "rows" % (rows, no))
    s.ldd = oi.strides[0] if rows > 1 else no
    pc = 0
    if c is not None and beta != 0:
        ci = array_info(c)
        if tuple(ci.shape) != (rows, no) or ci.strides[1] != 1 or ci.dtype != "bfloat16":
            raise InvalidArgument(None, "c must be like out")
        s.ldc, pc = (ci.strides[0] if rows > 1 else no), ci.ptr
    pbias = 0
    if bias is not None:
        bb = array_info(bias)
        if tuple(bb.shape) != (g, n) or bb.strides[1] != 1 or bb.dtype != "bfloat16":
            raise InvalidArgument(None, "bias must be a (%d, %d) bfloat16 array" % (g, n))
        s.stride_bias, pbias = (bb.strides[0] if g > 1 else n), bb.ptr
    s.alpha, s.beta = float(alpha), float(beta)
    return s, ai.ptr, bi.ptr, pc, oi.ptr, pbias


def _scales(s: Any, scale_a: Any, scale_b: Any):
    """Row-wise scales (scale_a (rows,) and scale_b (G, N), float32) or block scales
    (scale_a (rows, ceil(K/128)) and scale_b (G, ceil(N/128), ceil(K/128)), float32, packed):
    sets s.scale_mode and returns their pointers; (0, 0) and no scales when both are None."""
    if scale_a is None and scale_b is None:
        return 0, 0
    if scale_a is None or scale_b is None:
        raise InvalidArgument(None, "scale_a and scale_b come together")
    sa, sb = array_info(scale_a), array_info(scale_b)
    if len(sb.shape) == 3:
        kb, nb = (s.k + 127) // 128, (s.n + 127) // 128
        if sa.dtype != "float32" or tuple(sa.shape) != (s.rows, kb) or (
                sa.strides[1] != 1 or (s.rows > 1 and sa.strides[0] != kb)):
            raise InvalidArgument(None, "block scale_a must be a packed (%d, %d) float32 array"
                                  % (s.rows, kb))
        if sb.dtype != "float32" or tuple(sb.shape) != (s.groups, nb, kb) or (
                sb.strides[2] != 1 or sb.strides[1] != kb or
                (s.groups > 1 and sb.strides[0] != nb * kb)):
            raise InvalidArgument(None, "block scale_b must be a packed (%d, %d, %d) float32 "
                                  "array" % (s.groups, nb, kb))
        s.scale_mode = 2  # KJIT_GROUPED_SCALE_BLOCK128
        return sa.ptr, sb.ptr
    if sa.dtype != "float32" or tuple(sa.shape) not in ((s.rows,), (s.rows, 1)) or (
            s.rows > 1 and sa.strides[0] != 1):
        raise InvalidArgument(None, "scale_a must be a contiguous float32 array of %d rows"
                              % s.rows)
    if sb.dtype != "float32" or tuple(sb.shape) != (s.groups, s.n) or (
            sb.strides[1] != 1 or (s.groups > 1 and sb.strides[0] != s.n)):
        raise InvalidArgument(None, "scale_b must be a packed (%d, %d) float32 array"
                              % (s.groups, s.n))
    s.scale_mode = 1  # KJIT_GROUPED_SCALE_ROWWISE
    return sa.ptr, sb.ptr


def _offs(offs: Any, groups: int) -> int:
    oi = array_info(offs)
    if oi.dtype != "int32" or len(oi.shape) != 1 or oi.shape[0] != groups:
        raise InvalidArgument(None, "offs must be a 1-D int32 array of %d entries" % groups)
    return oi.ptr


def grouped_check(a: Any, b: Any, offs: Any, out: Any, *, bias: Any = None, c: Any = None,
                  alpha: float = 1.0, beta: float = 0.0, activation: Any = "none") -> None:
    """Check a GroupedGemm call's arrays as kjit_grouped_gemm_check() does, without a GPU
    (pointers are looked at, never read). Raises InvalidArgument or Unsupported."""
    s, pa, pb, pc, pd, pbias = _desc(a, b, out, c, bias, alpha, beta, activation)
    po = _offs(offs, s.groups)
    check(_lib.lib().kjit_grouped_gemm_check(ctypes.byref(s), pa or None, pb or None,
                                             po or None, pc or None, pd or None,
                                             pbias or None))


class GroupedGemm(Handle):
    """A grouped-GEMM handle on one device.

    Args:
        compiler: the kjit.Compiler that compiles the kernels (its cache, single flight
            and compile worker), or None for one with the default cache.
        device: CUDA device ordinal.
        tile_n, stages: the sm_90a kernel's tile width (128 or 256) and pipeline depth
            (2..8); 0 chooses per shape.
        portable_only: use the portable kernel even on sm_90.
        schedule: the sm_90a kernel's schedule, 0 chosen per shape, 1 cooperative, 2
            pingpong (tile 128x128).
        check_offsets: check every call's offsets on the device (one small extra kernel
            per call); offsets_status() reports bad ones after the calls completed.
        autotune: the first call of a shape class with no tuned plan times the candidate
            configurations on its own arrays, keeps the fastest and persists it in the
            compiler's cache for later handles and processes (needs tile_n, stages and
            schedule 0 and portable_only off).
        cluster_m: CTAs per thread-block cluster along the rows of the sm_90a kernel, 0
            chosen per shape, 1, or 2 (two CTAs share each copy of B's tile: cooperative
            schedule, 128-row tiles; bf16 inputs, fp8 keeps 1).

    Thread-safe: any number of threads may call one handle.
    """

    _kind = "GroupedGemm"

    def __init__(self, compiler: Any = None, device: int = 0, *, tile_n: int = 0,
                 stages: int = 0, portable_only: bool = False, schedule: int = 0,
                 check_offsets: bool = False, autotune: bool = False,
                 cluster_m: int = 0) -> None:
        if compiler is None:
            from ._cache import Cache
            from ._compile import Compiler
            compiler = Compiler(Cache())
        d = as_int(device, "device", 0, 2**31 - 1)
        o = _lib.GroupedGemmOptionsStruct()
        check(_lib.lib().kjit_grouped_gemm_options_init_sized(ctypes.byref(o),
                                                             ctypes.sizeof(o)))
        o.tile_n = as_int(tile_n, "tile_n", 0, 2**32 - 1)
        o.stages = as_int(stages, "stages", 0, 2**32 - 1)
        o.portable_only = as_bool(portable_only, "portable_only")
        o.schedule = as_int(schedule, "schedule", 0, 2)
        o.check_offsets = as_bool(check_offsets, "check_offsets")
        o.autotune = as_bool(autotune, "autotune")
        o.cluster_m = as_int(cluster_m, "cluster_m", 0, 2)
        h = ctypes.c_void_p()
        check(_lib.lib().kjit_grouped_gemm_create(_compiler_handle(compiler), d,
                                                  ctypes.byref(o), ctypes.byref(h)))
        self._compiler = compiler  # kept alive as long as the handle
        self._device = d
        self._h = out_handle(h)

    def _destroy(self, h: int) -> None:
        _lib.lib().kjit_grouped_gemm_destroy(h)

    def __repr__(self) -> str:
        if self._h is None:
            return "<kjit.GroupedGemm closed>"
        return "<kjit.GroupedGemm device=%d>" % self._device

    def __call__(self, a: Any, b: Any, offs: Any, out: Any = None, *, bias: Any = None,
                 c: Any = None, alpha: float = 1.0, beta: float = 0.0,
                 activation: Any = "none", stream: Any = None, scale_a: Any = None,
                 scale_b: Any = None) -> Any:
        """``out = act(alpha * a @ b[g] + beta * c + bias[g])`` for the rows of each group
        g, as ``torch._grouped_mm(a, b, offs=offs)``: a (rows, K), b (G, K, N) (either
        memory order), offs a device int32 array of G cumulative row ends, bias (G, N),
        c and out (rows, N); all bfloat16 except offs. a and b may instead both be
        float8_e4m3fn (out, c and bias stay bfloat16), with row-wise scales scale_a
        (rows,) and scale_b (G, N) float32 (torch._scaled_grouped_mm's form): out =
        act(alpha * scale_a[r] * scale_b[g] * (a @ b[g]) + ...), or DeepSeek-style block
        scales, scale_a (rows, ceil(K/128)) and scale_b (G, ceil(N/128), ceil(K/128)), each
        128-wide K block's product scaled by its row's and its 128 x 128 block's scale.
        ``activation="swiglu"``:
        out = silu(h[:, :N/2]) * h[:, N/2:] + beta * c with h = alpha * a @ b[g] + bias[g],
        out and c (rows, N/2). `out` None allocates it with
        PyTorch (for PyTorch inputs). Asynchronous on `stream` (None = the legacy default
        stream). Returns `out`."""
        h = self._handle()
        if out is None:
            torch = sys.modules.get("torch")
            if torch is None or not isinstance(a, torch.Tensor):
                raise InvalidArgument(None, "out is required for arrays other than torch "
                                      "tensors")
            glu = _activation(activation) == GroupedActivation.SWIGLU
            out = torch.empty((a.shape[0], b.shape[2] // 2 if glu else b.shape[2]),
                              dtype=torch.bfloat16, device=a.device)
        s, pa, pb, pc, pd, pbias = _desc(a, b, out, c, bias, alpha, beta, activation)
        po = _offs(offs, s.groups)
        psa, psb = _scales(s, scale_a, scale_b)
        check(_lib.lib().kjit_grouped_gemm_run_scaled(h, ctypes.byref(s), pa or None,
                                                      pb or None, po or None, pc or None,
                                                      pd or None, pbias or None, psa or None,
                                                      psb or None,
                                                      stream_handle(stream) or None))
        return out

    def plan_key(self, a: Any, b: Any, out: Any, *, bias: Any = None, c: Any = None,
                 beta: float = 0.0, activation: Any = "none", scaled: bool = False) -> str:
        """The configuration the call with these arrays runs, e.g.
        ``"grouped-v1 sm_90a tma 128x256x64 s4 c1x1 b=nk epi=alpha"`` (`scaled`: the call
        with row-wise scales)."""
        s, pa, pb, pc, pd, pbias = _desc(a, b, out, c, bias, 1.0, beta, activation)
        if scaled:
            s.scale_mode = 1
        buf = ctypes.create_string_buffer(256)
        check(_lib.lib().kjit_grouped_gemm_plan_key(self._handle(), ctypes.byref(s),
                                                    pa or None, pb or None, pc or None,
                                                    pd or None, pbias or None, buf, 256,
                                                    None))
        return buf.value.decode()

    def offsets_status(self) -> None:
        """Read and clear the offset record of a handle made with ``check_offsets=True``:
        returns None when no call since the last read had bad offsets, else raises
        InvalidArgument naming the call, the group and the values. Call it after the
        calls' stream is synchronised."""
        check(_lib.lib().kjit_grouped_gemm_offsets_status(self._handle()))


def grouped_compile(compiler: Any, target: str, groups: int, k: int, n: int, rows: int, *,
                    b_order: Any = GroupedBOrder.KN, bias: bool = False, beta: float = 0.0,
                    activation: Any = "none", portable_only: bool = False) -> Any:
    """Compile (or find in the cache) the kernel a GroupedGemm on a device of `target`
    ("sm_90a", "sm_80", ...) would use for this shape, without a GPU (as ``kjit warm
    --grouped``). Returns the kjit.Binary (``.tier`` says whether it was a cache hit)."""
    from ._binary import Binary
    s = _lib.GroupedGemmDescStruct()
    check(_lib.lib().kjit_grouped_gemm_desc_init_sized(ctypes.byref(s), ctypes.sizeof(s)))
    s.groups = as_int(groups, "groups", 1, 2**31 - 1)
    s.k = as_int(k, "k", 1, 2**31 - 1)
    s.n = as_int(n, "n", 1, 2**31 - 1)
    s.rows = as_int(rows, "rows", 0, 2**31 - 1)
    s.b_order = as_int(b_order, "b_order", 0, 1)
    s.beta = float(beta)
    s.activation = _activation(activation)
    o = _lib.GroupedGemmOptionsStruct()
    check(_lib.lib().kjit_grouped_gemm_options_init_sized(ctypes.byref(o), ctypes.sizeof(o)))
    o.portable_only = as_bool(portable_only, "portable_only")
    h = ctypes.c_void_p()
    st = _lib.lib().kjit_grouped_gemm_compile(_compiler_handle(compiler),
                                              str(target).encode(), ctypes.byref(s),
                                              ctypes.byref(o), 1 if bias else 0,
                                              ctypes.byref(h))
    binary = Binary._wrap(h.value) if h.value else None
    check(st)
    return binary
