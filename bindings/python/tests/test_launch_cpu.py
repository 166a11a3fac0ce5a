"""Kernel arguments, launch configurations, streams and device arrays, without a GPU.

A kernel handle needs a driver, so these tests give the launch code a known parameter
layout and capture what it would hand to kjit_kernel_launch_packed instead of calling
it (a C function pointer made with ctypes, which records its arguments). The layouts are
those the C compiler gives the kernels' parameters.

Every launch test runs twice: through ctypes, and through the compiled path
(kjit._fastlaunch) when it is built; KJIT_REQUIRE_FAST=1 makes its absence a failure
(bindings/test_bindings.sh sets it where it builds the extension).
"""
import ctypes
import os
import struct
import unittest

from _support import kjit
from kjit import _arrays, _kernel, _lib
from kjit._kernel import Kernel

try:
    import numpy
except ImportError:  # the NumPy tests are skipped; the package never needs it
    numpy = None

SAXPY_LAYOUT = [(0, 4), (8, 8), (16, 8), (24, 4)]  # (float, float*, float*, int)


class FakeKernel(Kernel):
    """A Kernel with a given layout whose launches are recorded, not run."""

    def _destroy(self, h):
        pass


LAUNCH_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                             ctypes.c_size_t)  # kjit_kernel_launch_packed
CONFIG_SIZE = struct.calcsize(_lib.LAUNCH_CONFIG_FORMAT)
FAST_REQUIRED = os.environ.get("KJIT_REQUIRE_FAST") == "1"


class Mode:
    """Which launch path fake_kernel() gives its kernels."""
    fast = False


def fake_kernel(params, bufsize=None, status=0, fast=None):
    k = FakeKernel.__new__(FakeKernel)
    k._h = 1
    if bufsize is None:
        bufsize = params[-1][0] + params[-1][1] if params else 0
    k.calls = []

    def launch(h, cfg, buf, n):
        k.calls.append((h, ctypes.string_at(cfg, CONFIG_SIZE),
                        ctypes.string_at(buf, n) if n else b"", n))
        return status

    k.c_launch = LAUNCH_FN(launch)  # kept alive with the kernel
    k._init(0, "fake_kernel", params, bufsize, k.c_launch,
            fast=Mode.fast if fast is None else fast)
    return k


class BothPaths(unittest.TestCase):
    """Runs its tests through ctypes; its subclass made by fast_variant() runs them
    through kjit._fastlaunch."""
    fast = False

    def setUp(self):
        if self.fast and _kernel._fastlaunch is None:
            if FAST_REQUIRED:
                self.fail("KJIT_REQUIRE_FAST=1 but %s" % _kernel.launch_path_reason())
            self.skipTest(_kernel.launch_path_reason())
        Mode.fast = self.fast
        self.addCleanup(setattr, Mode, "fast", False)


def fast_variant(cls):
    """`cls` again, through the compiled launch path."""
    return type(cls.__name__ + "Fast", (cls,), {"fast": True, "__doc__": cls.__doc__})


class FakeCudaArray:
    """An object with __cuda_array_interface__ (as CuPy, PyTorch and Numba arrays)."""

    def __init__(self, ptr, shape=(16,), typestr="<f4", strides=None, mask=None):
        self.cai = {"shape": shape, "typestr": typestr, "data": (ptr, False),
                    "strides": strides, "version": 3}
        if mask is not None:
            self.cai["mask"] = mask

    @property
    def __cuda_array_interface__(self):
        return self.cai


_capi = ctypes.pythonapi
_capi.PyCapsule_New.restype = ctypes.py_object
_capi.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_DLTENSOR = b"dltensor"
_DLTENSOR_VERSIONED = b"dltensor_versioned"


class FakeDLPack:
    """An object exporting DLPack (as PyTorch, CuPy, JAX and NumPy arrays)."""

    def __init__(self, ptr, shape=(16,), device_type=2, device_id=0, code=2, bits=32,
                 strides=None, byte_offset=0, versioned=False):
        self._shape = (ctypes.c_int64 * len(shape))(*shape)
        self._strides = (ctypes.c_int64 * len(strides))(*strides) if strides else None
        t = _arrays.DLTensor()
        t.data = ptr
        t.device.device_type, t.device.device_id = device_type, device_id
        t.ndim = len(shape)
        t.dtype.code, t.dtype.bits, t.dtype.lanes = code, bits, 1
        t.shape = ctypes.cast(self._shape, ctypes.POINTER(ctypes.c_int64))
        if self._strides is not None:
            t.strides = ctypes.cast(self._strides, ctypes.POINTER(ctypes.c_int64))
        t.byte_offset = byte_offset
        self.versioned = versioned
        if versioned:
            self._mt = _arrays.DLManagedTensorVersioned()
            self._mt.version.major = 1
        else:
            self._mt = _arrays.DLManagedTensor()
        self._mt.dl_tensor = t
        self.exports = 0

    def __dlpack__(self, stream=None):
        self.exports += 1
        name = _DLTENSOR_VERSIONED if self.versioned else _DLTENSOR
        return _capi.PyCapsule_New(ctypes.addressof(self._mt), name, None)

    def __dlpack_device__(self):
        return (self._mt.dl_tensor.device.device_type, self._mt.dl_tensor.device.device_id)


def config_bytes(grid=(1, 1, 1), block=(1, 1, 1), shared=0, stream=0, cluster=(0, 0, 0),
                 cooperative=0):
    c = _lib.LaunchConfigStruct()
    c.struct_size = ctypes.sizeof(c)
    c.grid[:] = grid
    c.block[:] = block
    c.shared_bytes = shared
    c.stream = stream or None
    c.cluster[:] = cluster
    c.cooperative = cooperative
    return bytes(c)


class PackingTest(BothPaths):
    def test_saxpy_arguments_and_config(self):
        k = fake_kernel(SAXPY_LAYOUT)
        x, y = FakeCudaArray(0x7f0000001000), FakeCudaArray(0x7f0000002000)
        k((4,), (256,), (2.5, x, y, 1000), stream=0x55, shared_mem=128)
        h, cfg, buf, n = k.calls[-1]
        self.assertEqual(h, 1)
        self.assertEqual(buf, struct.pack("<f4xQQi", 2.5, 0x7f0000001000, 0x7f0000002000,
                                          1000))
        self.assertEqual(n, 28)
        self.assertEqual(cfg, config_bytes((4, 1, 1), (256, 1, 1), 128, 0x55))
        self.assertEqual(k.pack([2.5, x, y, 1000]), buf)
        # launch is __call__; lists work as well as tuples; the plan is reused.
        k.launch((2, 3), [16, 16], [2.5, x, y, 7], cluster=(2, 1), cooperative=True)
        _, cfg, buf, _ = k.calls[-1]
        self.assertEqual(cfg, config_bytes((2, 3, 1), (16, 16, 1), 0, 0, (2, 1, 1), 1))
        self.assertEqual(len(k._plans), 1)  # made by pack(), or by the cluster launch
        k((1,), (1,), (kjit.float32(2.5), x, y, kjit.int32(7)))
        self.assertEqual(k.calls[-1][2], buf)
        self.assertEqual(len(k._plans), 1 if self.fast else 2)
        self.assertEqual(k._fast_launch is not None, self.fast)

    def test_int_sizes_and_ranges(self):
        k = fake_kernel([(0, 1), (2, 2), (4, 4), (8, 8)])
        k(1, 1, (-1, -1, -1, -1))
        self.assertEqual(k.calls[-1][2], b"\xff\x00" + b"\xff" * 14)
        k(1, 1, (255, 65535, 2**32 - 1, 2**64 - 1))
        self.assertEqual(k.calls[-1][2], b"\xff\x00" + b"\xff" * 14)
        k(1, 1, (True, False, 7, 2**40))
        self.assertEqual(k.calls[-1][2],
                         struct.pack("<BxHIQ", 1, 0, 7, 2**40))
        for bad, index in (((256, 0, 0, 0), 0), ((0, -32769, 0, 0), 1),
                           ((0, 0, 2**32, 0), 2), ((0, 0, 0, -2**63 - 1), 3),
                           ((0, 0, 0, 2**64), 3)):
            with self.assertRaises(kjit.ArgumentMismatch) as cm:
                k(1, 1, bad)
            self.assertIn("argument %d" % index, str(cm.exception))
            self.assertIsInstance(cm.exception, TypeError)

    def test_floats(self):
        k = fake_kernel([(0, 4), (8, 8)])
        k(1, 1, (1.5, 2.25))
        self.assertEqual(k.calls[-1][2], struct.pack("<f4xd", 1.5, 2.25))
        with self.assertRaises(kjit.ArgumentMismatch) as cm:
            k(1, 1, (1e39, 1.0))  # does not fit a float
        self.assertIn("argument 0", str(cm.exception))
        half = fake_kernel([(0, 2)])
        with self.assertRaises(kjit.ArgumentMismatch) as cm:
            half(1, 1, (1.0,))
        self.assertIn("kjit.float16", str(cm.exception))
        half(1, 1, (kjit.float16(1.0),))
        self.assertEqual(half.calls[-1][2], b"\x00\x3c")
        half(1, 1, (kjit.bfloat16(1.0),))
        self.assertEqual(half.calls[-1][2], b"\x80\x3f")

    def test_explicit_scalar_types(self):
        cases = [(kjit.int8(-2), b"\xfe"), (kjit.uint8(200), b"\xc8"),
                 (kjit.int16(-2), b"\xfe\xff"), (kjit.uint16(65535), b"\xff\xff"),
                 (kjit.int32(-2), struct.pack("<i", -2)),
                 (kjit.uint32(2**32 - 1), b"\xff" * 4),
                 (kjit.int64(-2), struct.pack("<q", -2)),
                 (kjit.uint64(2**64 - 1), b"\xff" * 8),
                 (kjit.float32(0.5), struct.pack("<f", 0.5)),
                 (kjit.float64(0.5), struct.pack("<d", 0.5)),
                 (kjit.bool_(True), b"\x01"), (kjit.Pointer(0), b"\0" * 8),
                 (kjit.Pointer(ctypes.c_void_p(0x1234)), struct.pack("<Q", 0x1234))]
        for value, raw in cases:
            self.assertEqual(bytes(value), raw, value)
            self.assertEqual(type(value).size, len(raw))
            k = fake_kernel([(0, len(raw))])
            k(1, 1, (value,))
            self.assertEqual(k.calls[-1][2], raw)
            other = fake_kernel([(0, 16)])
            with self.assertRaises(kjit.ArgumentMismatch):
                other(1, 1, (value,))
        self.assertEqual(kjit.int32(5), kjit.int32(5))
        self.assertNotEqual(kjit.int32(5), kjit.uint32(5))
        self.assertEqual(repr(kjit.float32(2.0)), "kjit.float32(2.0)")
        for bad in (lambda: kjit.int8(128), lambda: kjit.uint8(-1),
                    lambda: kjit.uint64(2**64), lambda: kjit.float32(1e39),
                    lambda: kjit.float16(1e6), lambda: kjit.bfloat16(1e39)):
            with self.assertRaises(kjit.InvalidArgument):
                bad()
        for bad in (lambda: kjit.int32(1.5), lambda: kjit.int32("1"),
                    lambda: kjit.float32("1.0"), lambda: kjit.int32(True),
                    lambda: kjit.Pointer(None)):
            with self.assertRaises(TypeError):
                bad()

    def test_bfloat16_rounds_to_nearest_even(self):
        def bits(v):
            return struct.unpack("<H", bytes(kjit.bfloat16(v)))[0]
        f32 = lambda b: struct.unpack("<f", struct.pack("<I", b))[0]  # noqa: E731
        self.assertEqual(bits(f32(0x3F808000)), 0x3F80)  # tie, even stays
        self.assertEqual(bits(f32(0x3F818000)), 0x3F82)  # tie, odd rounds up
        self.assertEqual(bits(f32(0x3F808001)), 0x3F81)  # above the tie
        self.assertEqual(bits(float("nan")), 0x7FC0)
        self.assertEqual(bits(float("-inf")), 0xFF80)
        self.assertEqual(bits(-2.0), 0xC000)

    def test_ctypes_and_bytes_values(self):
        class Pair(ctypes.Structure):
            _fields_ = [("a", ctypes.c_int32), ("b", ctypes.c_float), ("c", ctypes.c_int32)]
        k = fake_kernel([(0, 12), (16, 4)])
        k(1, 1, (Pair(1, 2.0, 3), ctypes.c_float(0.5)))
        self.assertEqual(k.calls[-1][2], bytes(Pair(1, 2.0, 3)) + b"\0" * 4 +
                         struct.pack("<f", 0.5))
        k(1, 1, (b"x" * 12, bytearray(b"abcd")))
        self.assertEqual(k.calls[-1][2][:12], b"x" * 12)
        with self.assertRaises(kjit.ArgumentMismatch) as cm:
            k(1, 1, (b"x" * 11, 1))
        self.assertIn("expects 12 bytes", str(cm.exception))
        with self.assertRaises(kjit.ArgumentMismatch):
            k(1, 1, (Pair(), ctypes.c_double(1.0)))
        with self.assertRaises(kjit.ArgumentMismatch):
            k(1, 1, (7, 1))  # an int cannot fill 12 bytes

    def test_rejected_values(self):
        k = fake_kernel(SAXPY_LAYOUT)
        x = FakeCudaArray(0x1000)
        for bad, what in (((1.0, x, x), "takes 4 arguments, 3 given"),
                          ((1.0, x, x, 1, 2), "5 given"),
                          ((1.0, None, x, 1), "kjit.Pointer(0)"),
                          ((1.0, "x", x, 1), "not a kernel argument"),
                          ((1.0, object(), x, 1), "unsupported argument type"),
                          ((1.0, 1j, x, 1), "not a kernel argument"),
                          ((x, x, x, 1), "8-byte pointer"),
                          ((1.0, x, x, 2**40), "argument 3")):
            with self.assertRaises(kjit.ArgumentMismatch, msg=what) as cm:
                k(1, 1, bad)
            self.assertIn(what, str(cm.exception))
        for bad in ((i for i in range(4)), {"a": 1}, "abcd", 5, None):
            with self.assertRaises(TypeError):
                k(1, 1, bad)
        self.assertEqual(k.calls, [])

    def test_launch_status_is_raised(self):
        k = fake_kernel([], status=int(kjit.Status.CUDA))
        with self.assertRaises(kjit.CudaError):
            k(1, 1)
        sticky = fake_kernel([], status=int(kjit.Status.CUDA_STICKY))
        with self.assertRaises(kjit.CudaSticky) as cm:
            sticky(1, 1, ())
        self.assertIsInstance(cm.exception, kjit.CudaError)

    def test_no_parameters(self):
        k = fake_kernel([])
        k(1, 1)
        self.assertEqual(k.calls[-1][2:], (b"", 0))

    def test_launch_packed(self):
        k = fake_kernel(SAXPY_LAYOUT)
        buf = k.pack((1.0, 0x10, 0x20, 3))
        k.launch_packed(1, 32, buf)
        self.assertEqual(k.calls[-1][2], buf)
        with self.assertRaises(kjit.ArgumentMismatch):
            k.launch_packed(1, 32, buf[:-1])
        with self.assertRaises(TypeError):
            k.launch_packed(1, 32, "text")

    def test_bad_launch_configurations(self):
        k = fake_kernel([])
        for grid in (0, -1, (1, 0), (1, 1, 1, 1), (), 2**32):
            with self.assertRaises(kjit.InvalidArgument, msg=grid):
                k(grid, 1)
        for grid in (1.0, True, "1", (1, "2"), None, (1.5,)):
            with self.assertRaises(TypeError, msg=grid):
                k(grid, 1)
        with self.assertRaises(kjit.InvalidArgument):
            k(1, (1024, 0))
        with self.assertRaises(kjit.InvalidArgument):
            k(1, 1, shared_mem=-1)
        with self.assertRaises(kjit.InvalidArgument):
            k(1, 1, shared_mem=2**32)
        with self.assertRaises(TypeError):
            k(1, 1, shared_mem="0")
        with self.assertRaises(kjit.InvalidArgument):
            k(1, 1, cluster=(0, 1, 1))
        self.assertEqual(k.calls, [])

    def test_closed_kernel(self):
        k = fake_kernel([])
        k.close()
        with self.assertRaises(kjit.InvalidHandle):
            k(1, 1)
        with self.assertRaises(kjit.InvalidHandle):
            k.symbol
        with self.assertRaises(kjit.InvalidHandle):
            k.params
        with self.assertRaises(kjit.InvalidHandle):
            k.pack(())
        self.assertEqual(k.calls, [])
        self.assertIn("closed", repr(k))

    def test_kernel_objects_come_from_a_compiler(self):
        with self.assertRaises(TypeError):
            kjit.Kernel()

    @unittest.skipIf(numpy is None, "NumPy is not installed (Debian: python3-numpy)")
    def test_numpy_scalars_and_host_arrays(self):
        k = fake_kernel([(0, 4), (8, 8), (16, 2)])
        k(1, 1, (numpy.float32(2.5), numpy.int64(-3), numpy.float16(1.0)))
        self.assertEqual(k.calls[-1][2], struct.pack("<f4xq", 2.5, -3) + b"\x00\x3c")
        k(1, 1, (numpy.array(1.5, dtype=numpy.float32), numpy.uint64(7),
                 numpy.int16(-1)))
        self.assertEqual(k.calls[-1][2][:4], struct.pack("<f", 1.5))
        with self.assertRaises(kjit.ArgumentMismatch) as cm:
            k(1, 1, (numpy.float64(2.5), 0, 0))
        self.assertIn("expects 4 bytes", str(cm.exception))
        with self.assertRaises(kjit.ArgumentMismatch) as cm:
            k(1, 1, (0.0, numpy.zeros(3), 0))
        self.assertIn("host array", str(cm.exception))
        with self.assertRaises(kjit.InvalidArgument) as cm:
            kjit.device_pointer(numpy.zeros(3))
        self.assertIn("CPU", str(cm.exception))


class ArraysTest(BothPaths):
    def test_cuda_array_interface(self):
        a = FakeCudaArray(0xabc000, shape=(3, 4), typestr="<f2", strides=(16, 2))
        self.assertEqual(kjit.device_pointer(a), 0xabc000)
        info = kjit.array_info(a)
        self.assertEqual(info, kjit.ArrayInfo(0xabc000, (3, 4), (8, 1), "float16", 2, None))
        self.assertEqual(kjit.array_info(FakeCudaArray(1, (2, 3))).strides, (3, 1))
        with self.assertRaises(kjit.InvalidArgument):
            kjit.device_pointer(FakeCudaArray(1, mask=FakeCudaArray(2)))
        with self.assertRaises(kjit.InvalidArgument):
            kjit.array_info(FakeCudaArray(1, typestr=">f4"))
        with self.assertRaises(kjit.InvalidArgument):
            kjit.array_info(FakeCudaArray(1, typestr="<f4", strides=(6,)))
        self.assertEqual(kjit.array_info(FakeCudaArray(0, shape=(0,))).ptr, 0)

    def test_dlpack(self):
        for versioned in (False, True):
            a = FakeDLPack(0x5000, shape=(4, 8), code=4, bits=16, byte_offset=64,
                           device_id=1, versioned=versioned)
            info = kjit.array_info(a)
            self.assertEqual(info, kjit.ArrayInfo(0x5040, (4, 8), (8, 1), "bfloat16", 2, 1))
            self.assertEqual(kjit.device_pointer(a), 0x5040)
            k = fake_kernel([(0, 8)])
            k(1, 1, (a,))
            self.assertEqual(k.calls[-1][2], struct.pack("<Q", 0x5040))
        t = FakeDLPack(0x6000, shape=(2, 3), strides=(1, 2), code=2, bits=32)
        self.assertEqual(kjit.array_info(t).strides, (1, 2))
        host = FakeDLPack(0x7000, device_type=1)
        with self.assertRaises(kjit.InvalidArgument) as cm:
            kjit.device_pointer(host)
        self.assertIn("CPU memory", str(cm.exception))
        k = fake_kernel([(0, 8)])
        with self.assertRaises(kjit.InvalidArgument):
            k(1, 1, (host,))
        self.assertEqual(kjit.array_info(FakeDLPack(1, device_type=3)).device, None)
        self.assertEqual(kjit.array_info(FakeDLPack(1, code=10, bits=8)).dtype,
                         "float8_e4m3fn")

    def test_not_arrays(self):
        for bad in (object(), "x", 1.5):
            with self.assertRaises(TypeError):
                kjit.device_pointer(bad)
        with self.assertRaises(kjit.InvalidArgument):
            kjit.device_pointer(-1)
        self.assertEqual(kjit.device_pointer(0x10), 0x10)
        self.assertEqual(kjit.device_pointer(ctypes.c_void_p(0x20)), 0x20)

    def test_streams(self):
        class TorchLike:
            cuda_stream = 0x77

        class CupyLike:
            ptr = 0x88

        class ProtocolMethod:
            def __cuda_stream__(self):
                return (0, 0x99)

        class ProtocolAttribute:
            __cuda_stream__ = (0, 0xaa)

        class NumbaLike:
            handle = ctypes.c_void_p(0xbb)

        self.assertEqual(kjit.stream_handle(None), 0)
        self.assertEqual(kjit.stream_handle(0x12), 0x12)
        self.assertEqual(kjit.stream_handle(ctypes.c_void_p(0x13)), 0x13)
        self.assertEqual(kjit.stream_handle(TorchLike()), 0x77)
        self.assertEqual(kjit.stream_handle(CupyLike()), 0x88)
        self.assertEqual(kjit.stream_handle(ProtocolMethod()), 0x99)
        self.assertEqual(kjit.stream_handle(ProtocolAttribute()), 0xaa)
        self.assertEqual(kjit.stream_handle(NumbaLike()), 0xbb)

        class BadProtocol:
            def __cuda_stream__(self):
                return "stream"

        class BadAttribute:
            cuda_stream = "x"

        for bad in (True, object(), BadProtocol(), BadAttribute(), 1.0):
            with self.assertRaises(TypeError, msg=bad):
                kjit.stream_handle(bad)
        for bad in (-1, 2**64):
            with self.assertRaises(kjit.InvalidArgument):
                kjit.stream_handle(bad)
        k = fake_kernel([])
        k(1, 1, stream=CupyLike())
        self.assertEqual(k.calls[-1][1], config_bytes(stream=0x88))
        with self.assertRaises(TypeError):
            k(1, 1, stream="default")


PackingTestFast = fast_variant(PackingTest)
ArraysTestFast = fast_variant(ArraysTest)


class LayoutTest(unittest.TestCase):
    def test_launch_config_format_matches_the_struct(self):
        self.assertEqual(struct.calcsize(_lib.LAUNCH_CONFIG_FORMAT),
                         ctypes.sizeof(_lib.LaunchConfigStruct))
        raw = struct.pack(_lib.LAUNCH_CONFIG_FORMAT, 56, 1, 2, 3, 4, 5, 6, 7, 0x1122334455,
                          8, 9, 10, 1)
        c = _lib.LaunchConfigStruct.from_buffer_copy(raw)
        self.assertEqual((c.struct_size, list(c.grid), list(c.block), c.shared_bytes,
                          c.stream, list(c.cluster), c.cooperative),
                         (56, [1, 2, 3], [4, 5, 6], 7, 0x1122334455, [8, 9, 10], 1))


if __name__ == "__main__":
    unittest.main()
