"""The compiled launch path (kjit._fastlaunch) against the ctypes path, without a GPU.

Each case launches one fake kernel per path (test_launch_cpu.fake_kernel: the launch is
recorded, not run) and requires the same outcome from both: the same launch
configuration and parameter buffer handed to kjit_kernel_launch_packed, or the same
exception type and message, with nothing launched.
"""
import ctypes
import enum
import struct
import subprocess
import sys
import unittest

from _support import kjit, subprocess_env
from kjit import _kernel
from test_launch_cpu import (FAST_REQUIRED, SAXPY_LAYOUT, FakeCudaArray, FakeDLPack,
                             fake_kernel)

try:
    import numpy
except ImportError:
    numpy = None

NO_FAST = None if _kernel._fastlaunch is not None else _kernel.launch_path_reason()


class Color(enum.IntEnum):
    RED = 3


class TorchLike:
    """A PyTorch tensor's pointer attributes (CUDA or not)."""
    __cuda_array_interface__ = property(lambda self: {"data": (self.ptr, False),
                                                      "shape": (1,), "typestr": "<f4"})

    is_cuda = property(lambda self: self.cuda)

    def __init__(self, ptr, is_cuda=True):
        self.ptr, self.cuda = ptr, is_cuda

    def data_ptr(self):
        return self.ptr


class CupyData:
    def __init__(self, ptr):
        self.ptr = ptr


def cupy_like(ptr):
    cls = type("ndarray", (), {"__module__": "cupy._core.core",
                               "__cuda_array_interface__": property(lambda s: {})})
    a = cls()
    a.data = CupyData(ptr)
    return a


class Pair(ctypes.Structure):
    _fields_ = [("a", ctypes.c_int32), ("b", ctypes.c_float)]


class Streams:
    class Proto:
        def __init__(self, v):
            self.v = v

        def __cuda_stream__(self):
            return self.v

    class Attr:
        def __init__(self, **kw):
            self.__dict__.update(kw)

    class Raising:
        @property
        def cuda_stream(self):
            raise RuntimeError("no stream here")


def outcome(params, launch, bufsize=None, fast=False):
    """What one launch did: ("launched", h, cfg, buf, n) or ("raised", type, message)."""
    k = fake_kernel(params, bufsize, fast=fast)
    try:
        launch(k)
    except Exception as e:  # noqa: BLE001 - compared between the paths
        assert not k.calls, "launched, then raised %r" % e
        return ("raised", type(e), str(e))
    assert len(k.calls) == 1, k.calls
    return ("launched",) + k.calls[0]


@unittest.skipIf(NO_FAST and not FAST_REQUIRED, NO_FAST)
class SamePathsTest(unittest.TestCase):
    def same(self, params, launch, bufsize=None, expect=None):
        slow = outcome(params, launch, bufsize, fast=False)
        fast = outcome(params, launch, bufsize, fast=True)
        self.assertEqual(fast, slow)
        if expect is not None:
            self.assertEqual(slow[0], expect, slow)
        return slow

    def args(self, params, values, expect=None, **kw):
        return self.same(params, lambda k: k(1, 1, values, **kw), expect=expect)

    def test_ints(self):
        for size in (1, 2, 4, 8):
            lo, hi = -(1 << (8 * size - 1)), (1 << (8 * size)) - 1
            for v in (0, 1, -1, lo, hi, True, False, Color.RED):
                self.args([(0, size)], (v,), "launched")
            for v in (lo - 1, hi + 1, 2**200, -2**200):
                self.args([(0, size)], (v,), "raised")
        for size in (3, 16):
            self.args([(0, size)], (1,), "raised")

    def test_floats(self):
        for v in (0.0, -1.5, 1e38, 3.4028235e38, float("inf"), float("-inf"), 1e-50):
            self.args([(0, 4)], (v,), "launched")
        nan = self.args([(0, 4), (8, 8)], (float("nan"), float("nan")), "launched")
        self.assertTrue(struct.unpack("<f4xd", nan[3]) != (0.0, 0.0))
        for v in (1e39, -1e300):
            self.args([(0, 4)], (v,), "raised")
        self.args([(0, 8)], (1e300,), "launched")
        self.args([(0, 2)], (1.0,), "raised")

    def test_kjit_scalars(self):
        for t in kjit._kernel.SCALAR_TYPES:
            v = t(1) if t is not kjit.bool_ else t(True)
            self.args([(0, t.size)], (v,), "launched")
            self.args([(0, t.size * 2 + 1)], (v,), "raised")

    def test_bytes_and_ctypes(self):
        for v in (b"abcd", bytearray(b"abcd"), memoryview(b"abcd"), ctypes.c_int32(-5),
                  ctypes.c_float(2.0), (ctypes.c_uint8 * 4)(1, 2, 3, 4)):
            self.args([(0, 4)], (v,), "launched")
        self.args([(0, 8)], (Pair(7, 0.5),), "launched")
        self.args([(0, 12)], (Pair(7, 0.5),), "raised")
        for v in (b"abc", bytearray(5), memoryview(b"abcdefgh")[::2][:3]):
            self.args([(0, 4)], (v,), "raised")
        self.args([(0, 4)], (memoryview(b"abcdefgh")[::2],), "launched")
        released = memoryview(b"abcd")
        released.release()
        self.args([(0, 4)], (released,), "raised")

    def test_rejected_types(self):
        for v in (None, "abcd", 1j, object(), [1], {"a": 1}, 1.5j):
            self.args([(0, 8)], (v,), "raised")

    def test_device_arrays(self):
        for v in (FakeCudaArray(0x1000), FakeCudaArray(0), FakeCudaArray(None),
                  FakeDLPack(0x2000, byte_offset=16), FakeDLPack(0x3000, versioned=True),
                  FakeDLPack(0x4000, device_type=3), FakeDLPack(0x5000, device_type=13),
                  TorchLike(0x6000), cupy_like(0x7000)):
            self.args([(0, 8)], (v,), "launched")
        for v in (FakeCudaArray(0x1000, mask=FakeCudaArray(1)), FakeCudaArray(-1),
                  FakeCudaArray(2**64), FakeCudaArray("x"), FakeDLPack(0x2000, device_type=1),
                  TorchLike(0x6000, is_cuda=False), TorchLike(-1), TorchLike(None),
                  cupy_like(-1), cupy_like("x"), cupy_like(None)):
            self.args([(0, 8)], (v,), "raised")
        self.args([(0, 4)], (FakeCudaArray(0x1000),), "raised")
        bad = FakeCudaArray(0x1000)
        bad.cai = ["not", "a", "dict"]
        self.args([(0, 8)], (bad,), "raised")
        del FakeCudaArray(1).cai["data"]
        nodata = FakeCudaArray(1)
        del nodata.cai["data"]
        self.args([(0, 8)], (nodata,), "raised")

    @unittest.skipIf(numpy is None, "NumPy is not installed (Debian: python3-numpy)")
    def test_numpy(self):
        for t in (numpy.int8, numpy.uint8, numpy.int16, numpy.uint16, numpy.int32,
                  numpy.uint32, numpy.int64, numpy.uint64, numpy.float16, numpy.float32,
                  numpy.float64, numpy.bool_, numpy.complex64):
            v = t(1)
            self.args([(0, v.itemsize)], (v,), "launched")
            self.args([(0, v.itemsize * 2 + 2)], (v,), "raised")
        for v in (numpy.float32("nan"), numpy.float64("-nan"), numpy.float32("inf"),
                  numpy.uint64(2**64 - 1), numpy.int64(-2**63), numpy.int8(-128),
                  numpy.frombuffer(b"\x01\x00\x80\x7f", numpy.float32)[0]):  # signalling
            self.args([(0, v.itemsize)], (v,), "launched")
        self.args([(0, 4)], (numpy.array(1.5, dtype=numpy.float32),), "launched")
        self.args([(0, 8)], (numpy.zeros(1),), "raised")
        self.args([(0, 8)], (numpy.datetime64(5, "s"),), None)
        self.args([(0, 8)], (numpy.str_("abcdefgh"),), "raised")

    @unittest.skipIf(numpy is None, "NumPy is not installed (Debian: python3-numpy)")
    def test_numpy_values_read_from_the_object(self):
        # Where NumPy's layout checks out, its scalars are copied from the object itself
        # (kind 11); every value, NaN payloads and extremes included, packs as the ctypes
        # path packs it, and a size that does not match is the ctypes path's error.
        types = (numpy.bool_, numpy.int8, numpy.uint8, numpy.int16, numpy.uint16,
                 numpy.int32, numpy.uint32, numpy.int64, numpy.uint64, numpy.float16,
                 numpy.float32, numpy.float64, numpy.complex64)
        for t in types:
            self.assertEqual(_kernel._fast_kind(t) & 0xFF, _kernel._K_NP_VALUE, t)
            self.assertEqual(_kernel._fast_kind(t) >> 8, numpy.dtype(t).itemsize, t)
        raw = bytes(range(7, 7 + 64)) + b"\xff" * 16 + b"\x00" * 16 + b"\x01\x00\x80\x7f" * 4
        for t in types:
            size = numpy.dtype(t).itemsize
            for at in range(0, len(raw) - size + 1, size):
                v = numpy.frombuffer(raw[at:at + size], t)[0]
                got = self.args([(0, size)], (v,), "launched")
                self.assertEqual(got[3], v.tobytes(), (t, at))
            self.args([(0, size + 1 if size < 8 else size // 2)], (t(1),), "raised")

    @unittest.skipIf(numpy is None, "NumPy is not installed (Debian: python3-numpy)")
    def test_value_in_head_checks_size_and_bytes(self):
        fl = _kernel._fastlaunch
        v = numpy.float32(1.5)
        self.assertTrue(fl.value_in_head(v, v.tobytes()))
        self.assertFalse(fl.value_in_head(v, numpy.float32(2.5).tobytes()))
        self.assertFalse(fl.value_in_head(v, b"\x00" * 64))  # beyond the object
        self.assertFalse(fl.value_in_head(v, b""))
        self.assertFalse(fl.value_in_head(7, b"\x07"))  # an int's digits have another layout
        with self.assertRaises(TypeError):
            fl.value_in_head(v, bytearray(4))

    def test_counts_and_containers(self):
        x = FakeCudaArray(0x1000)
        for values in ((2.0, x, x, 4), [2.0, x, x, 4]):
            self.args(SAXPY_LAYOUT, values, "launched")
        for values in ((2.0, x, x), (2.0, x, x, 4, 5), (), "abcd", None, 5,
                       (v for v in (2.0, x, x, 4)), {2.0: 0}):
            self.args(SAXPY_LAYOUT, values, "raised")
        self.same([], lambda k: k(1, 1), expect="launched")
        self.same([], lambda k: k(1, 1, []), expect="launched")

        class TupleSub(tuple):
            pass
        self.args(SAXPY_LAYOUT, TupleSub((2.0, x, x, 4)), "launched")
        # padding between and after the parameters is zero
        r = self.same([(0, 1), (8, 2)], lambda k: k(1, 1, (255, 7)), bufsize=16,
                      expect="launched")
        self.assertEqual(r[3], b"\xff" + b"\0" * 7 + b"\x07\0" + b"\0" * 6)

    def test_launch_configurations(self):
        good = (1, 7, 2**32 - 1, (1,), (2, 3), (2, 3, 4), [5], [2, 3, 4], Color.RED,
                (Color.RED, 1))
        for dims in good:
            self.same([], lambda k, d=dims: k(d, d), expect="launched")
        bad = (0, -1, 2**32, 2**70, (), (1, 2, 3, 4), (1, 0), [0], 1.0, True, "1", None,
               (1.5,), (True,), (1, "2"), range(3))
        for dims in bad:
            self.same([], lambda k, d=dims: k(d, 1), expect="raised")
            self.same([], lambda k, d=dims: k(1, d), expect="raised")
        for shared in (0, 1, 2**32 - 1, Color.RED):
            self.same([], lambda k, s=shared: k(1, 1, shared_mem=s), expect="launched")
        for shared in (-1, 2**32, 1.0, "0", None, True):
            self.same([], lambda k, s=shared: k(1, 1, shared_mem=s))
        for cluster, coop in ((None, True), ((2, 1), False), ((2,), 1), ((0,), False)):
            self.same([], lambda k, c=cluster, p=coop: k(1, 1, cluster=c, cooperative=p))

    def test_streams(self):
        good = (None, 0, 0x55, 2**64 - 1, Color.RED, ctypes.c_void_p(0x99),
                Streams.Proto((0, 0x77)), Streams.Proto(0x78), Streams.Attr(cuda_stream=5),
                Streams.Attr(ptr=6), Streams.Attr(handle=ctypes.c_void_p(7)),
                Streams.Attr(cuda_stream=None, ptr=8), Streams.Attr(ptr=Color.RED),
                Streams.Attr(__cuda_stream__=(0, 9)), Streams.Attr(ptr=2**63))
        for s in good:
            self.same([], lambda k, s=s: k(1, 1, stream=s), expect="launched")
        bad = (-1, 2**64, True, 1.0, "s", object(), Streams.Proto("x"),
               Streams.Proto((0, -1)), Streams.Attr(cuda_stream=True),
               Streams.Attr(ptr="x"), Streams.Attr(ptr=-3), Streams.Raising())
        for s in bad:
            self.same([], lambda k, s=s: k(1, 1, stream=s), expect="raised")
        # the arguments are checked before the stream, on both paths
        self.same([(0, 4)], lambda k: k(1, 1, (None,), stream="s"), expect="raised")
        self.same([(0, 4)], lambda k: k(0, 1, (1,), stream="s"), expect="raised")

    def test_call_forms(self):
        x = FakeCudaArray(0x1000)
        args = (2.0, x, x, 4)
        forms = [lambda k: k(1, 1, args), lambda k: k(1, 1, args=args),
                 lambda k: k(grid=1, block=1, args=args), lambda k: k(1, block=1, args=args),
                 lambda k: k(1, 1, args, stream=None, shared_mem=0, cluster=None,
                             cooperative=False),
                 lambda k: k(1, 1, args, cooperative=0), lambda k: k(1, 1, args, cluster=(1,)),
                 lambda k: k(1, 1, args, **{"stream": 3, "shared_mem": 5}),
                 lambda k: k.launch(1, 1, args, stream=3), lambda k: k.launch(1, 1, args=args)]
        for form in forms:
            self.same(SAXPY_LAYOUT, form, expect="launched")
        self.same([], lambda k: k(1, 1), expect="launched")
        for form in (lambda k: k(1), lambda k: k(), lambda k: k(1, 1, args, 5),
                     lambda k: k(1, 1, args, args=args), lambda k: k(1, 1, args, bogus=1),
                     lambda k: k(1, 1, args, stream=None, stream_=1), lambda k: k(1, 1, (1,))):
            self.same(SAXPY_LAYOUT, form, expect="raised")

    def test_compiled_call_launches_itself(self):
        k = fake_kernel(SAXPY_LAYOUT, fast=True)
        k._call_python = None  # not called: the compiled __call__ launches these itself
        x = FakeCudaArray(0x1000)
        k(1, 1, (2.0, x, x, 4))
        k((2, 2), [32], args=(2.0, x, x, 4), stream=7, shared_mem=16, cluster=None,
          cooperative=False)
        self.assertEqual(len(k.calls), 2)
        self.assertIn("($self, grid, block, args=()", kjit.Kernel.__call__.__text_signature__)

    def test_launch_packed(self):
        buf = struct.pack("<f4xQQi", 2.0, 1, 2, 3)
        for b in (buf, bytearray(buf), memoryview(buf)):
            self.same(SAXPY_LAYOUT, lambda k, b=b: k.launch_packed(1, 1, b, stream=5),
                      expect="launched")
        for b in (buf[:-1], buf + b"\0", "text", None, list(buf)):
            self.same(SAXPY_LAYOUT, lambda k, b=b: k.launch_packed(1, 1, b), expect="raised")
        self.same(SAXPY_LAYOUT, lambda k: k.launch_packed(0, 1, buf), expect="raised")
        self.same(SAXPY_LAYOUT, lambda k: k.launch_packed(1, 1, buf, stream=-1),
                  expect="raised")
        self.same(SAXPY_LAYOUT, lambda k: k.launch_packed(1, 1, buf, cooperative=True),
                  expect="launched")

    def test_large_parameter_buffer(self):
        layout = [(0, 8), (8000, 4)]
        self.same(layout, lambda k: k(1, 1, (FakeCudaArray(0x10), 5)), bufsize=8192,
                  expect="launched")

    def test_overlapping_layout_is_the_python_paths_error(self):
        self.same([(0, 8), (4, 4)], lambda k: k(1, 1, (1, 2)), expect="raised")

    def test_status_and_closed(self):
        k = fake_kernel([], status=int(kjit.Status.CUDA), fast=True)
        try:
            with self.assertRaises(kjit.CudaError):
                k(1, 1)
        except kjit.LibraryNotFound:
            self.skipTest("libkjit.so.0 is not found (needed for the error message)")
        self.assertEqual(len(k.calls), 1)
        k = fake_kernel([], fast=True)
        k.close()
        with self.assertRaises(kjit.InvalidHandle):
            k(1, 1)
        with self.assertRaises(kjit.InvalidHandle):
            k.launch_packed(1, 1, b"")
        self.assertEqual(k.calls, [])

    def test_common_arguments_are_converted_in_c(self):
        # The compiled path itself launches these (None would mean "the Python path").
        streams = (None, 7, Streams.Proto((0, 8)), Streams.Attr(cuda_stream=9),
                   Streams.Attr(ptr=10), Streams.Attr(handle=11))
        values = [2.0, FakeCudaArray(0x10), FakeDLPack(0x20), 1000]
        if numpy is not None:
            values[0] = numpy.float32(2.0)
        for s in streams:
            for v in ((2.0, TorchLike(0x10), cupy_like(0x20), 1000), tuple(values),
                      (kjit.float32(1), FakeCudaArray(0), FakeDLPack(1, versioned=True),
                       kjit.int32(3)),
                      (ctypes.c_float(1), TorchLike(1), TorchLike(2), True)):
                k = fake_kernel(SAXPY_LAYOUT, fast=True)
                self.assertEqual(k._fast_launch(1, (4, 2), [256], v, s, 64), 0, (v, s))
                self.assertEqual(k._fast_packed(1, 4, 256, k.pack(v), s, 0), 0)
                self.assertEqual(len(k.calls), 2)

    def test_type_cache_follows_new_types(self):
        # classes made and dropped one after another: each is decided anew
        for i in range(3000):
            cls = type("Arr%d" % i, (FakeCudaArray,), {})
            self.assertEqual(outcome([(0, 8)], lambda k, c=cls: k(1, 1, (c(i),)),
                                     fast=True)[3], struct.pack("<Q", i))


class LaunchPathTest(unittest.TestCase):
    def test_launch_path(self):
        self.assertIn(kjit.launch_path(), ("fast", "ctypes"))
        self.assertEqual(kjit.launch_path() == "fast", _kernel._fastlaunch is not None)
        if FAST_REQUIRED:
            self.assertEqual(kjit.launch_path(), "fast", _kernel.launch_path_reason())

    def test_environment_forces_ctypes(self):
        code = "import kjit; print(kjit.launch_path(), kjit.launch_path_reason())"
        out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                             text=True, env=subprocess_env(KJIT_PYTHON_FAST="0")).stdout
        self.assertEqual(out.split()[0], "ctypes")
        self.assertIn("KJIT_PYTHON_FAST=0", out)
        env = subprocess_env()
        env.pop("KJIT_PYTHON_FAST", None)
        code = ("import importlib.util, kjit; print(kjit.launch_path(), "
                "importlib.util.find_spec('kjit._fastlaunch') is not None)")
        path, built = subprocess.run([sys.executable, "-c", code], check=True,
                                     capture_output=True, text=True, env=env).stdout.split()
        self.assertEqual(path, "fast" if built == "True" else "ctypes")

    @unittest.skipIf(NO_FAST, NO_FAST)
    def test_noop_launch(self):
        k = kjit.Kernel.__new__(kjit.Kernel)
        k._h = 1
        k._init(0, "noop", [(0, 4)], 4,
                ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                 ctypes.c_void_p, ctypes.c_size_t)(
                                     _kernel._fastlaunch.NOOP_LAUNCH), fast=True)
        k(1, 1, (1,))
        k._h = None


@unittest.skipIf(NO_FAST, NO_FAST)
class CompiledKernelTest(unittest.TestCase):
    """kjit.Kernel on the compiled path: its C base, and calls that reach C directly."""
    VECTORCALL = 1 << 11  # Py_TPFLAGS_HAVE_VECTORCALL

    def test_handle_and_launcher_are_c_fields(self):
        k = fake_kernel(SAXPY_LAYOUT, fast=True)
        self.assertIsInstance(k, _kernel._fastlaunch.KernelBase)
        self.assertNotIn("_h", vars(k))
        self.assertNotIn("_launcher", vars(k))
        self.assertEqual(k._h, 1)
        self.assertIsInstance(k._launcher, _kernel._fastlaunch.Launcher)
        self.assertFalse(k.closed)
        k.close()
        self.assertIsNone(k._h)
        self.assertTrue(k.closed)
        k = kjit.Kernel.__new__(kjit.Kernel)  # nothing set yet: None, as Handle._h
        self.assertIsNone(k._h)
        self.assertIsNone(k._launcher)
        with self.assertRaises(kjit.InvalidHandle):
            k(1, 1)

    def test_every_call_form_launches_in_c(self):
        x = FakeCudaArray(0x1000)
        k = fake_kernel(SAXPY_LAYOUT, fast=True)
        k._call_python = None  # not called
        k(1, 1, (2.0, x, x, 4))                        # vectorcall
        kjit.Kernel.__call__(k, 1, 1, [2.0, x, x, 4])  # the method descriptor
        k(*(1, 1), **{"args": (2.0, x, x, 4), "stream": 5})  # tp_call: a tuple and dict
        self.assertEqual(len(k.calls), 3)
        self.assertEqual(k.calls[0], k.calls[1])

    def test_vectorcall_is_used_by_kernel_and_subclasses(self):
        for cls in (kjit.Kernel, type(fake_kernel([], fast=True))):
            self.assertTrue(cls.__flags__ & self.VECTORCALL, cls)

        class OwnCall(kjit.Kernel):
            def __call__(self, *args, **kwargs):
                return "own"

        self.assertFalse(OwnCall.__flags__ & self.VECTORCALL)
        k = OwnCall.__new__(OwnCall)
        self.assertEqual(k(1, 1), "own")
        with self.assertRaises(TypeError):
            _kernel._fastlaunch.use_vectorcall(int)

    def test_kind_cache_follows_types_per_parameter(self):
        # One kernel launched again and again with other types at each parameter: each
        # launch packs what the ctypes path packs (the last type's kind is remembered).
        fast = fake_kernel([(0, 8), (8, 8)], fast=True)
        slow = fake_kernel([(0, 8), (8, 8)], fast=False)
        values = [FakeCudaArray(0x10), 5, cupy_like(0x20), kjit.int64(-3), TorchLike(0x30),
                  b"12345678", FakeDLPack(0x40), kjit.float64(1.5), ctypes.c_int64(9), 2.5]
        for i in range(3 * len(values)):
            args = (values[i % len(values)], values[(i * 3) % len(values)])
            fast(1, 1, args)
            slow(1, 1, args)
        self.assertEqual(fast.calls, slow.calls)

    def test_setup_makes_cached_kinds_stale(self):
        fl = _kernel._fastlaunch
        k = fake_kernel([(0, 8)], fast=True)
        x = FakeCudaArray(0x10)
        self.assertEqual(k._fast_launch(1, 1, 1, (x,), None, 0), 0)
        fl.setup(lambda tp: 0, _kernel.stream_handle, _kernel.check)  # nothing is C's
        try:
            self.assertIsNone(k._fast_launch(1, 1, 1, (x,), None, 0))
        finally:
            fl.setup(_kernel._fast_kind, _kernel.stream_handle, _kernel.check)
        self.assertEqual(k._fast_launch(1, 1, 1, (x,), None, 0), 0)
        self.assertEqual(len(k.calls), 2)

    def test_gil_is_released_when_other_threads_exist(self):
        # libc's usleep as the launch function: it blocks for `handle` microseconds
        # without touching Python. A thread counting meanwhile must get to run.
        import threading
        libc = ctypes.CDLL(None)
        launch = ctypes.cast(libc.usleep, ctypes.c_void_p).value
        k = kjit.Kernel.__new__(kjit.Kernel)
        k._h = 300000
        k._init(0, "sleep", [], 0, ctypes.CFUNCTYPE(
            ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
            ctypes.c_size_t)(launch), fast=True)
        k(1, 1)  # no other thread: the GIL is kept, nothing waits for it
        counts, stop, started = [0], threading.Event(), threading.Event()

        def count():
            started.set()
            while not stop.is_set():
                counts[0] += 1

        t = threading.Thread(target=count)
        t.start()
        started.wait()
        try:
            before = counts[0]
            k(1, 1)
            during = counts[0] - before
        finally:
            stop.set()
            t.join()
            k._h = None
        self.assertGreater(during, 1000)

    def test_launch_packed_launches_in_c(self):
        k = fake_kernel(SAXPY_LAYOUT, fast=True)
        buf = k.pack((2.0, 1, 2, 3))
        k._launch_packed_python = None  # not called
        k.launch_packed(1, 1, buf)
        k.launch_packed((2, 2), [32], buffer=buf, stream=7, shared_mem=16, cluster=None,
                        cooperative=False)
        self.assertEqual(len(k.calls), 2)
        self.assertIn("($self, grid, block, buffer",
                      kjit.Kernel.launch_packed.__text_signature__)
        self.assertIn("param_buffer_size", kjit.Kernel.launch_packed.__doc__)
        for form in (lambda k: k.launch_packed(1, 1, buf, cluster=(1,)),
                     lambda k: k.launch_packed(1, 1), lambda k: k.launch_packed(1, 1, buf, 2),
                     lambda k: k.launch_packed(1, 1, buf, buffer=buf),
                     lambda k: k.launch_packed(grid=1, block=1, buffer=buf),
                     lambda k: k.launch_packed(1, 1, bytearray(buf)),
                     lambda k: k.launch_packed(1, 1, buf[:-1])):
            SamePathsTest.same(self, SAXPY_LAYOUT, form)

    def test_kernel_in_a_cycle_is_collected(self):
        import gc
        import weakref
        k = fake_kernel([], fast=True)
        k.me = k
        ref = weakref.ref(k)
        del k
        gc.collect()
        self.assertIsNone(ref())


if __name__ == "__main__":
    unittest.main()
