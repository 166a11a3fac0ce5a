"""GPU tests: launches on PyTorch and CuPy memory and streams checked against the CPU, a
templated kernel through a name expression, and GEMM against torch.matmul.

Skipped with the reason when there is no CUDA driver or device; the PyTorch and CuPy
parts are skipped when those are not installed. Run on a GPU host with

    KJIT_LIBRARY=/path/to/libkjit.so.0 python3 -m unittest discover -s bindings/python/tests -v
"""
import atexit
import os
import shutil
import tempfile
import threading
import unittest

from _support import SAXPY, TEMPLATED, kjit, no_gpu_reason

NO_GPU = no_gpu_reason()

try:
    import torch
    HAVE_TORCH = torch.cuda.is_available()
    TORCH_WHY = "" if HAVE_TORCH else "PyTorch sees no CUDA device"
except Exception as e:  # noqa: BLE001 - any import failure means no PyTorch tests
    torch, HAVE_TORCH, TORCH_WHY = None, False, "PyTorch not importable: %s" % e

try:
    import cupy
    cupy.cuda.runtime.getDeviceCount()
    HAVE_CUPY, CUPY_WHY = True, ""
except Exception as e:  # noqa: BLE001
    cupy, HAVE_CUPY, CUPY_WHY = None, False, "CuPy not usable: %s" % e

try:
    import numpy
except ImportError:
    numpy = None

N = 1 << 20
BLOCK = 256


def grid_for(n, block=BLOCK):
    return ((n + block - 1) // block,)


@unittest.skipIf(NO_GPU, NO_GPU or "")
class GpuTestBase(unittest.TestCase):
    #: launch through ctypes even where kjit._fastlaunch is built (the *Ctypes classes)
    ctypes_path = False

    @classmethod
    def setUpClass(cls):
        if cls.ctypes_path:
            from kjit import _kernel
            if _kernel._fastlaunch is None:
                raise unittest.SkipTest("the ctypes path is the only one here: tested above")
            cls.addClassCleanup(setattr, _kernel, "_fastlaunch", _kernel._fastlaunch)
            _kernel._fastlaunch = None  # kernels loaded from now on launch through ctypes
        cls.dir = tempfile.mkdtemp(prefix="kjit-py-gpu-")
        cls.cache = kjit.Cache(cls.dir)
        cls.compiler = kjit.Compiler(cls.cache)
        cls.saxpy = cls.compiler.kernel(SAXPY, "saxpy")

    @classmethod
    def tearDownClass(cls):
        cls.saxpy.close()
        cls.compiler.close()
        cls.cache.close()
        shutil.rmtree(cls.dir, True)


class KernelTest(GpuTestBase):
    def test_kernel_properties(self):
        k = self.saxpy
        self.assertEqual(k.symbol, "saxpy")
        self.assertEqual(k.params, [(0, 4), (8, 8), (16, 8), (24, 4)])
        self.assertEqual(k.param_buffer_size, 28)
        self.assertIn(k.load_path, (kjit.LoadPath.CUBIN, kjit.LoadPath.PTX))
        a = k.attributes
        self.assertGreater(a.num_regs, 0)
        self.assertGreaterEqual(a.max_threads_per_block, BLOCK)
        self.assertGreater(k.occupancy(BLOCK), 0)
        min_grid, block = k.suggest_block_size()
        self.assertGreater(min_grid, 0)
        self.assertGreater(block, 0)
        self.assertEqual(kjit.device_arch(0)[:3], "sm_")
        self.assertTrue(kjit.device_name(0))
        self.assertGreater(kjit.driver_version(), 0)
        self.assertGreater(kjit.device_count(), 0)

    def test_second_load_is_a_cache_hit(self):
        before = self.cache.stats()
        with self.compiler.kernel(SAXPY, "saxpy") as k2:
            self.assertEqual(k2.symbol, "saxpy")
        after = self.cache.stats()
        self.assertEqual(after.compiles, before.compiles)
        self.assertGreater(after.hits, before.hits)

    def test_unknown_kernel_name(self):
        with self.assertRaises(kjit.NameNotFound):
            self.compiler.kernel(SAXPY, "no_such_kernel")

    def test_compile_error_from_kernel(self):
        with self.assertRaises(kjit.CompileError) as cm:
            self.compiler.kernel('extern "C" __global__ void bad() { nope; }', "bad")
        self.assertIn("nope", cm.exception.log)

    def test_module_level_kernel(self):
        if "KJIT_CACHE_DIR" not in os.environ:  # keep the user's cache out of the tests
            d = tempfile.mkdtemp(prefix="kjit-py-default-")
            atexit.register(shutil.rmtree, d, True)
            os.environ["KJIT_CACHE_DIR"] = d
        k = kjit.kernel(SAXPY, "saxpy", std=17)
        self.assertIs(kjit.default_compiler(), kjit.default_compiler())
        self.assertEqual(k.symbol, "saxpy")
        k.close()


@unittest.skipUnless(HAVE_TORCH, TORCH_WHY)
class TorchTest(GpuTestBase):
    def test_saxpy_on_a_torch_stream(self):
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            x = torch.randn(N, device="cuda")
            y = torch.randn(N, device="cuda")
            y0 = y.clone()
        self.saxpy(grid_for(N), (BLOCK,), (2.5, x, y, N), stream=s)
        s.synchronize()
        expected = 2.5 * x.cpu() + y0.cpu()
        torch.testing.assert_close(y.cpu(), expected, rtol=1e-6, atol=1e-6)

    def test_saxpy_default_stream_explicit_types_and_dlpack_only_objects(self):
        x = torch.arange(1000, device="cuda", dtype=torch.float32)
        y = torch.ones(1000, device="cuda")

        class DLPackOnly:  # exercises the DLPack path on a real tensor
            def __init__(self, t):
                self.t = t

            def __dlpack__(self, stream=None):
                return self.t.__dlpack__()

            def __dlpack_device__(self):
                return self.t.__dlpack_device__()

        self.saxpy(grid_for(1000), BLOCK, [kjit.float32(3.0), DLPackOnly(x), y,
                                           kjit.int32(1000)])
        torch.cuda.synchronize()
        torch.testing.assert_close(y.cpu(), 3.0 * torch.arange(1000.0) + 1.0)

    def test_subrange_pointer_and_stream_objects(self):
        x = torch.ones(2048, device="cuda")
        y = torch.zeros(2048, device="cuda")
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        self.saxpy(grid_for(1024), BLOCK, (1.0, x[1024:], y[1024:], 1024),
                   stream=s.cuda_stream)
        s.synchronize()
        out = y.cpu()
        self.assertEqual(out[:1024].sum().item(), 0.0)
        self.assertEqual(out[1024:].sum().item(), 1024.0)

    def test_cpu_tensors_are_refused_before_the_launch(self):
        with self.assertRaises(kjit.ArgumentMismatch) as cm:
            self.saxpy(1, 1, (1.0, torch.zeros(4), torch.zeros(4), 4))
        self.assertIn("cpu", str(cm.exception).lower())
        with self.assertRaises(kjit.ArgumentMismatch):
            self.saxpy(1, 1, (1.0, torch.zeros(4, device="cuda"), 4))

    def test_templated_kernel_through_a_name_expression(self):
        k = self.compiler.kernel(TEMPLATED, "fill<float, 2>")
        self.addCleanup(k.close)
        out = torch.zeros(1000, device="cuda")
        k(grid_for(1000), BLOCK, (out, 0.5, 1000))
        ki = self.compiler.kernel(TEMPLATED, "fill<int, 3>")
        self.addCleanup(ki.close)
        outi = torch.zeros(1000, device="cuda", dtype=torch.int32)
        ki(grid_for(1000), BLOCK, (outi, 4, 1000))
        torch.cuda.synchronize()
        self.assertTrue(bool((out.cpu() == 2.5).all()))
        self.assertTrue(bool((outi.cpu() == 7).all()))
        with self.compiler.compile(TEMPLATED, arch=kjit.device_arch(0),
                                   name_expressions=["fill<double, 1>"]) as b, \
                b.kernel("fill<double, 1>") as kd:
            self.assertEqual(kd.symbol, b.lowered_name("fill<double, 1>"))
            outd = torch.zeros(10, device="cuda", dtype=torch.float64)
            kd(1, 32, (outd, kjit.float64(0.25), 10))
            torch.cuda.synchronize()
            self.assertTrue(bool((outd.cpu() == 1.25).all()))

    def test_launches_from_threads_on_their_own_streams(self):
        def work(i, results):
            s = torch.cuda.Stream()
            with torch.cuda.stream(s):
                x = torch.full((N,), float(i), device="cuda")
                y = torch.zeros(N, device="cuda")
            for _ in range(10):
                self.saxpy(grid_for(N), BLOCK, (1.0, x, y, N), stream=s)
            s.synchronize()
            results[i] = bool((y == 10.0 * i).all().item())
        results = {}
        threads = [threading.Thread(target=work, args=(i, results)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(results, {i: True for i in range(4)})


@unittest.skipUnless(HAVE_TORCH, TORCH_WHY)
class TorchGemmTest(GpuTestBase):
    def setUp(self):
        self.gemm = kjit.Gemm(self.cache)
        self.addCleanup(self.gemm.close)

    def assert_bf16_close(self, got, ref):
        # bf16 has 8 bits of mantissa: both results round to it, from f32 sums.
        torch.testing.assert_close(got.float(), ref.float(), rtol=1.6e-2, atol=1e-1)

    def test_bf16_matmul_matches_torch(self):
        torch.manual_seed(0)
        m, n, k = 256, 192, 320
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        self.assertIs(self.gemm.matmul(a, b, out), out)
        ref = torch.matmul(a, b)
        torch.cuda.synchronize()
        self.assert_bf16_close(out, ref)
        exact = a.double() @ b.double()
        rel = ((out.double() - exact).norm() / exact.norm()).item()
        self.assertLess(rel, 1e-2)
        st = self.gemm.stats()
        self.assertEqual(st.runs, 1)
        self.assertEqual(st.misses + st.memory_hits + st.disk_hits, 1)
        self.gemm.matmul(a, b, out)
        self.assertEqual(self.gemm.stats().memory_hits, st.memory_hits + 1)

    def test_linear_layer_with_bias_on_a_stream(self):
        torch.manual_seed(1)
        x = torch.randn(128, 256, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(64, 256, device="cuda", dtype=torch.bfloat16)   # (out, in)
        bias = torch.randn(64, device="cuda", dtype=torch.bfloat16)
        y = torch.empty(128, 64, device="cuda", dtype=torch.bfloat16)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        self.gemm.matmul(x, w.T, y, bias=bias, epilogue=kjit.GemmEpilogue.BIAS, stream=s)
        s.synchronize()
        self.assert_bf16_close(y, torch.nn.functional.linear(x, w, bias))

    def test_f32_batched_and_beta(self):
        torch.manual_seed(2)
        a = torch.randn(3, 64, 32, device="cuda")
        b = torch.randn(3, 32, 48, device="cuda")
        c = torch.randn(3, 64, 48, device="cuda")
        out = torch.empty(3, 64, 48, device="cuda")
        self.gemm.matmul(a, b, out, c=c, alpha=0.5, beta=2.0)
        torch.cuda.synchronize()
        torch.testing.assert_close(out, 0.5 * torch.matmul(a, b) + 2.0 * c,
                                   rtol=1e-4, atol=1e-4)

    def test_persisted_plan_in_a_new_handle(self):
        a = torch.randn(64, 64, device="cuda", dtype=torch.float16)
        out = torch.empty(64, 64, device="cuda", dtype=torch.float16)
        self.gemm.matmul(a, a, out)
        torch.cuda.synchronize()
        with kjit.Gemm(self.cache) as g2:
            g2.matmul(a, a, out)
            torch.cuda.synchronize()
            st = g2.stats()
        self.assertEqual((st.disk_hits, st.misses), (1, 0))

    def test_low_level_run(self):
        a = torch.randn(32, 16, device="cuda")
        b = torch.randn(16, 8, device="cuda")
        d = torch.empty(32, 8, device="cuda")
        desc = kjit.GemmDesc(m=32, n=8, k=16, a_type=kjit.GemmDtype.F32,
                             order=kjit.GemmOrder.ROW_MAJOR)
        self.gemm.run(desc, a, b.data_ptr(), None, d)
        torch.cuda.synchronize()
        torch.testing.assert_close(d, a @ b, rtol=1e-4, atol=1e-4)


@unittest.skipUnless(HAVE_CUPY, CUPY_WHY)
class CupyTest(GpuTestBase):
    def test_saxpy_on_a_cupy_stream(self):
        with cupy.cuda.Stream(non_blocking=True) as s:
            x = cupy.random.rand(N, dtype=cupy.float32)
            y = cupy.random.rand(N, dtype=cupy.float32)
            x_host, y_host = cupy.asnumpy(x, stream=s), cupy.asnumpy(y, stream=s)
            self.saxpy(grid_for(N), (BLOCK,), (cupy.float32(2.0), x, y, cupy.int32(N)),
                       stream=s)
            s.synchronize()
        got = cupy.asnumpy(y)
        expected = numpy.float32(2.0) * x_host + y_host
        numpy.testing.assert_allclose(got, expected, rtol=1e-6)

    def test_cupy_raw_kernel_example(self):
        # The CuPy RawKernel documentation example, as in the README.
        add = self.compiler.kernel(r'''
        extern "C" __global__
        void my_add(const float* x1, const float* x2, float* y) {
            int tid = blockDim.x * blockIdx.x + threadIdx.x;
            y[tid] = x1[tid] + x2[tid];
        }''', "my_add")
        self.addCleanup(add.close)
        x1 = cupy.arange(25, dtype=cupy.float32).reshape(5, 5)
        x2 = cupy.arange(25, dtype=cupy.float32).reshape(5, 5)
        y = cupy.zeros((5, 5), dtype=cupy.float32)
        add((5,), (5,), (x1, x2, y))
        cupy.cuda.runtime.deviceSynchronize()
        numpy.testing.assert_array_equal(cupy.asnumpy(y), 2 * numpy.arange(25.0).reshape(5, 5))

    def test_templated_kernel_on_cupy(self):
        k = self.compiler.kernel(TEMPLATED, "fill<float, 2>")
        self.addCleanup(k.close)
        out = cupy.zeros(100, dtype=cupy.float32)
        k(1, 128, (out, numpy.float32(1.0), 100))
        cupy.cuda.runtime.deviceSynchronize()
        self.assertTrue(bool((out == 3.0).all()))

    def test_cupy_gemm(self):
        a = cupy.random.rand(64, 32).astype(cupy.float16)
        b = cupy.random.rand(32, 16).astype(cupy.float16)
        out = cupy.empty((64, 16), dtype=cupy.float16)
        with kjit.Gemm(self.cache) as g:
            g.matmul(a, b, out)
        ref = cupy.asnumpy(a).astype(numpy.float32) @ cupy.asnumpy(b).astype(numpy.float32)
        numpy.testing.assert_allclose(cupy.asnumpy(out).astype(numpy.float32), ref,
                                      rtol=1e-2, atol=5e-2)


@unittest.skipIf(NO_GPU, NO_GPU or "")
class CudaCoreTest(unittest.TestCase):
    def test_cuda_core_stream(self):
        try:
            from cuda.core.experimental import Device
        except Exception:  # noqa: BLE001
            try:
                from cuda.core import Device
            except Exception as e:  # noqa: BLE001
                self.skipTest("cuda.core not installed: %s" % e)
        dev = Device(0)
        dev.set_current()
        s = dev.create_stream()
        h = kjit.stream_handle(s)
        self.assertNotEqual(h, 0)
        self.assertEqual(h, int(s.handle))


# The array and stream tests again, through the ctypes launch path.
TorchTestCtypes = type("TorchTestCtypes", (TorchTest,), {"ctypes_path": True})
CupyTestCtypes = type("CupyTestCtypes", (CupyTest,), {"ctypes_path": True})


if __name__ == "__main__":
    unittest.main()


@unittest.skipUnless(HAVE_TORCH, TORCH_WHY)
class GroupedGemmTorchTest(unittest.TestCase):
    def test_matches_a_per_group_loop(self):
        g, k, n = 5, 192, 200
        sizes = [3, 0, 130, 1, 66]
        offs = torch.tensor(sizes).cumsum(0).to(torch.int32).cuda()
        x = torch.randn(sum(sizes), k, device="cuda", dtype=torch.bfloat16)
        w_nk = torch.randn(g, n, k, device="cuda", dtype=torch.bfloat16) * 0.1
        bias = torch.randn(g, n, device="cuda", dtype=torch.bfloat16)
        gg = kjit.GroupedGemm(kjit.Compiler())
        for w in (w_nk.transpose(-2, -1), w_nk.transpose(-2, -1).contiguous()):
            out = gg(x, w, offs, bias=bias, activation="relu")
            torch.cuda.synchronize()
            start = 0
            for e, s in enumerate(sizes):
                if s == 0:
                    continue
                ref = torch.relu(x[start:start + s].float() @ w[e].float() + bias[e].float())
                self.assertLess((out[start:start + s].float() - ref).abs().max().item(),
                                0.05 + 0.02 * ref.abs().max().item())
                start += s

    def test_swiglu_matches_chunked_silu(self):
        # w13 = cat([w1, w3]) along the output: out = silu(x @ w1.T) * (x @ w3.T), N/2 wide.
        g, k, inter = 4, 136, 100
        sizes = [70, 0, 1, 129]
        offs = torch.tensor(sizes).cumsum(0).to(torch.int32).cuda()
        x = torch.randn(sum(sizes), k, device="cuda", dtype=torch.bfloat16)
        w13 = torch.randn(g, 2 * inter, k, device="cuda", dtype=torch.bfloat16) * 0.1
        gg = kjit.GroupedGemm(kjit.Compiler())
        for w in (w13.transpose(-2, -1), w13.transpose(-2, -1).contiguous()):
            out = gg(x, w, offs, activation="swiglu")
            torch.cuda.synchronize()
            self.assertEqual(tuple(out.shape), (sum(sizes), inter))
            start = 0
            for e, s in enumerate(sizes):
                h = x[start:start + s].float() @ w[e].float()
                gate, up = h.chunk(2, dim=-1)
                ref = torch.nn.functional.silu(gate) * up
                if s:
                    self.assertLess((out[start:start + s].float() - ref).abs().max().item(),
                                    0.05 + 0.02 * ref.abs().max().item())
                start += s
