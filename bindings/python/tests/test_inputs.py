"""Every kind of bad input raises a clear exception (never a crash): wrong types, NUL
characters, text that is not UTF-8, values out of range, options NVRTC rejects, and
kernels or GEMM handles without a driver."""
import os
import unittest

from _support import ARCH, SAXPY, kjit, no_gpu_reason, tempdir

NUL = "a\0b"
SURROGATE = "a\udcffb"  # not encodable as UTF-8


class InputsTest(unittest.TestCase):
    def setUp(self):
        self.cache = kjit.Cache(tempdir(self))
        self.compiler = kjit.Compiler(self.cache)
        self.addCleanup(self.cache.close)
        self.addCleanup(self.compiler.close)

    def assertRaisesMsg(self, exc, fragment, fn, *args, **kw):
        with self.assertRaises(exc) as cm:
            fn(*args, **kw)
        self.assertIn(fragment, str(cm.exception))
        return cm.exception

    def test_sources(self):
        c = self.compiler.compile
        self.assertRaisesMsg(TypeError, "source must be str or bytes", c, None, arch=ARCH)
        self.assertRaisesMsg(TypeError, "not int", c, 42, arch=ARCH)
        self.assertRaisesMsg(kjit.InvalidArgument, "source is empty", c, "", arch=ARCH)
        self.assertRaisesMsg(kjit.InvalidArgument, "NUL character at byte 1", c, NUL,
                             arch=ARCH)
        self.assertRaisesMsg(kjit.InvalidArgument, "not valid Unicode", c, SURROGATE,
                             arch=ARCH)
        e = self.assertRaisesMsg(kjit.InvalidSource, "UTF-8", c, b"__global__ void \xff();",
                                 arch=ARCH)
        self.assertEqual(e.status, kjit.Status.INVALID_SOURCE)
        self.assertIsInstance(e, ValueError)

    def test_options_values(self):
        O = kjit.Options
        self.assertRaisesMsg(TypeError, "arch must be", O, arch=3.5)
        self.assertRaisesMsg(TypeError, "arch must be", O, arch=True)
        self.assertRaisesMsg(kjit.InvalidArgument, "arch must be positive", O, arch=-90)
        self.assertRaises(kjit.InvalidArgument, O, arch="sm_")
        self.assertRaises(kjit.InvalidArgument, O, arch="banana")
        self.assertRaisesMsg(kjit.InvalidArgument, "arch is empty", O, arch="")
        self.assertRaisesMsg(kjit.InvalidArgument, "NUL", O, arch="sm_80\0")
        self.assertRaisesMsg(TypeError, "std must be", O, std=True)
        self.assertRaisesMsg(TypeError, "std must be", O, std=[17])
        self.assertRaisesMsg(kjit.InvalidArgument, "NUL", O, defines={NUL: 1})
        self.assertRaisesMsg(kjit.InvalidArgument, "NUL", O, defines={"A": NUL})
        self.assertRaisesMsg(kjit.InvalidArgument, "define name is empty", O,
                             defines={"": 1})
        self.assertRaisesMsg(TypeError, "value must be", O, defines={"A": object()})
        self.assertRaisesMsg(kjit.InvalidArgument, "False is ambiguous", O,
                             defines={"A": False})
        self.assertRaisesMsg(TypeError, "single str", O, defines="ABC")
        self.assertRaisesMsg(TypeError, "'NAME' or 'NAME=VALUE'", O, defines=[1])
        self.assertRaisesMsg(TypeError, "single str", O, include_paths="/usr/include")
        self.assertRaisesMsg(TypeError, "must be iterable", O, include_paths=5)
        self.assertRaisesMsg(kjit.InvalidArgument, "NUL", O, include_paths=[NUL])
        self.assertRaisesMsg(TypeError, "headers must be a mapping", O, headers=["h"])
        self.assertRaisesMsg(TypeError, "must be str", O, headers={"h.h": None})
        self.assertRaisesMsg(kjit.InvalidArgument, "NUL", O, headers={"h.h": NUL})
        self.assertRaisesMsg(kjit.InvalidArgument, "not valid Unicode", O,
                             headers={SURROGATE: ""})
        self.assertRaisesMsg(kjit.InvalidArgument, "NUL", O, name_expressions=["f<int>\0"])
        self.assertRaisesMsg(kjit.InvalidArgument, "name expression is empty", O,
                             name_expressions=[""])
        self.assertRaisesMsg(TypeError, "fast_math must be a bool", O, fast_math="yes")
        self.assertRaisesMsg(kjit.InvalidArgument, "max_registers", O, max_registers=0)
        self.assertRaisesMsg(TypeError, "max_registers must be an int", O,
                             max_registers=32.0)
        self.assertRaisesMsg(kjit.InvalidArgument, "unknown output", O, outputs=["sass"])
        self.assertRaisesMsg(kjit.InvalidArgument, "outputs must be in", O, outputs=8)
        self.assertRaisesMsg(TypeError, "outputs must be", O, outputs=1.0)
        self.assertRaisesMsg(kjit.InvalidArgument, "device must be in", O, device=-1)
        self.assertRaisesMsg(kjit.InvalidArgument, "option is empty", O, options=[""])
        self.assertRaisesMsg(kjit.InvalidArgument, "NUL", O, options=["-DA\0"])
        self.assertRaisesMsg(kjit.InvalidArgument, "name is empty", O, name="")
        self.assertRaises(TypeError, O, not_an_option=1)
        self.assertRaises(TypeError, O, "sm_80")  # keyword-only

    def test_options_nvrtc_rejects_at_compile_time(self):
        c = self.compiler.compile
        e = self.assertRaisesMsg(kjit.InvalidOption, "--no-such-option", c, SAXPY,
                                 arch=ARCH, options=["--no-such-option"])
        self.assertEqual(e.status, kjit.Status.INVALID_OPTION)
        e = self.assertRaisesMsg(kjit.UnsupportedTarget, "sm_10", c, SAXPY, arch="sm_10")
        self.assertIn("sm_", e.message)
        self.assertRaises(kjit.KjitError, c, SAXPY, arch=ARCH, outputs=["ltoir", "ptx"])
        self.assertRaises(kjit.KjitError, c, SAXPY, arch="compute_80", outputs=["cubin"])
        self.assertRaises(kjit.CompileError, c, '#include "missing_header.h"\n', arch=ARCH)
        self.assertRaisesMsg(kjit.InvalidOption, "line break", c, SAXPY, arch=ARCH,
                             options=["-DA\nB"])

    def test_compiler_and_compile_arguments(self):
        self.assertRaisesMsg(TypeError, "cache must be a kjit.Cache", kjit.Compiler, "dir")
        self.assertRaisesMsg(kjit.InvalidArgument, "threads", kjit.Compiler, None, -1)
        self.assertRaisesMsg(TypeError, "threads must be an int", kjit.Compiler, None, 1.5)
        c = self.compiler
        self.assertRaisesMsg(TypeError, "options must be a kjit.Options", c.compile, SAXPY,
                             "-std=c++17")
        with kjit.Options(arch=ARCH) as o:
            self.assertRaisesMsg(TypeError, "not both", c.compile, SAXPY, o, std=17)
        self.assertRaisesMsg(TypeError, "kernel name must be str", c.kernel, SAXPY, None)
        self.assertRaisesMsg(kjit.InvalidArgument, "kernel name is empty", c.kernel, SAXPY,
                             "")
        self.assertRaisesMsg(kjit.InvalidArgument, "device must be in", c.kernel, SAXPY,
                             "saxpy", device=-1)
        self.assertRaisesMsg(kjit.InvalidArgument, "NUL", kjit.compute_key, NUL)
        self.assertRaisesMsg(TypeError, "options must be a sequence", kjit.hash_options,
                             "abc")
        self.assertRaisesMsg(kjit.InvalidArgument, "NUL", kjit.hash_options, [NUL])
        self.assertRaisesMsg(TypeError, "data must be str or bytes", kjit.hash_source, 5)
        self.assertRaisesMsg(kjit.InvalidArgument, "not valid Unicode", kjit.hash_source,
                             SURROGATE)
        fut = c.compile_async(SAXPY, arch=ARCH)
        with fut:
            self.assertRaisesMsg(kjit.InvalidArgument, "timeout must be >= 0", fut.result,
                                 -1)
            self.assertRaisesMsg(TypeError, "timeout must be", fut.result, "1")
            fut.result(timeout=120).close()

    def test_cache_arguments(self):
        C = kjit.Cache
        self.assertRaisesMsg(TypeError, "directory must be str or os.PathLike", C, 42)
        self.assertRaisesMsg(kjit.InvalidArgument, "NUL", C, NUL)
        self.assertRaisesMsg(kjit.InvalidArgument, "directory is empty", C, "")
        self.assertRaisesMsg(kjit.InvalidArgument, "max_size_bytes", C, max_size_bytes=-1)
        self.assertRaisesMsg(kjit.InvalidArgument, "memory_max_bytes", C,
                             memory_max_bytes=2**64)
        self.assertRaisesMsg(TypeError, "read_only must be a bool", C, read_only="no")
        self.assertRaisesMsg(kjit.InvalidArgument, "remote_url is empty", C, remote_url="")
        c = self.cache
        self.assertRaisesMsg(kjit.InvalidArgument, "64 hex digits", c.get, "abc")
        self.assertRaisesMsg(kjit.InvalidArgument, "64 hex digits", c.get, "g" * 64)
        self.assertRaisesMsg(TypeError, "key must be str", c.get, None)
        self.assertRaises(kjit.NotFound, c.get, "0" * 64)
        self.assertRaises(kjit.NotFound, c.remove, "f" * 64)
        self.assertRaisesMsg(TypeError, "kjit.Binary", c.put, "binary")
        self.assertRaisesMsg(kjit.InvalidArgument, "max_bytes", c.prune, -5)
        self.assertRaisesMsg(kjit.InvalidArgument, "path is empty", c.export_to, "")
        self.assertRaisesMsg(TypeError, "path must be", c.import_from, 3)
        missing = os.path.join(tempdir(self), "missing.kjit")
        self.assertRaises(kjit.KjitError, c.import_from, missing)
        self.assertRaises(kjit.KjitError, c.export_to, os.path.join(missing, "x", "y"))

    def test_binary_accessors(self):
        b = self.compiler.compile(SAXPY, arch=ARCH)
        self.addCleanup(b.close)
        self.assertRaisesMsg(TypeError, "must be str", b.lowered_name, 1)
        self.assertRaisesMsg(kjit.InvalidArgument, "NUL", b.lowered_name, NUL)
        self.assertRaises(kjit.NameNotFound, b.lowered_name, "saxpy")
        self.assertRaisesMsg(kjit.InvalidArgument, "kind must be", b.data, 3)
        self.assertRaisesMsg(kjit.InvalidArgument, "kind must be in", b.data, 0)
        self.assertRaisesMsg(TypeError, "must be an int", b.data, "ptx")
        self.assertRaisesMsg(kjit.InvalidArgument, "device must be in", b.kernel, "saxpy",
                             -1)
        self.assertRaises(TypeError, kjit.Binary)
        self.assertRaises(TypeError, kjit.CompileFuture)

    @unittest.skipUnless(no_gpu_reason(), "a GPU is present")
    def test_kernels_without_a_driver(self):
        e = self.assertRaisesMsg(kjit.CudaUnavailable, "CUDA", self.compiler.kernel, SAXPY,
                                 "saxpy")
        self.assertIsInstance(e, kjit.CudaError)
        with self.compiler.compile(SAXPY, arch=ARCH) as b:
            self.assertRaises(kjit.CudaUnavailable, b.kernel, "saxpy")
        self.assertRaises(kjit.CudaUnavailable, kjit.device_count)
        self.assertRaises(kjit.CudaUnavailable, kjit.device_arch, 0)
        self.assertRaises(kjit.CudaUnavailable, kjit.device_name, 0)
        self.assertRaises(kjit.CudaUnavailable, kjit.driver_version)
        self.assertRaises(kjit.CudaUnavailable, self.compiler.compile, SAXPY, arch="auto")
        self.assertRaises(kjit.CudaUnavailable, kjit.Gemm)
        self.assertRaises(kjit.CudaUnavailable, kjit.Gemm, self.cache)
        self.assertRaises(kjit.CudaUnavailable, kjit.kernel, SAXPY, "saxpy")

    def test_gemm_arguments(self):
        self.assertRaisesMsg(kjit.InvalidArgument, "device", kjit.Gemm, None, -1)
        self.assertRaisesMsg(TypeError, "cache must be a kjit.Cache", kjit.Gemm, "cache")
        self.assertRaisesMsg(TypeError, "autotune must be a bool", kjit.Gemm,
                             autotune="yes")
        self.assertRaisesMsg(kjit.InvalidArgument, "plan_capacity", kjit.Gemm,
                             plan_capacity=-1)
        closed = kjit.Cache(memory_only=True)
        closed.close()
        self.assertRaisesMsg(kjit.InvalidHandle, "Cache is closed", kjit.Gemm, closed)


if __name__ == "__main__":
    unittest.main()
