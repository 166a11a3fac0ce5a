"""The link step through nvJitLink: LTO-IR and PTX of two sources linked into a CUBIN, a
cache hit the second time, nvJitLink's log for an undefined symbol, bad input, the key.
CPU only (explicit target), except the last class (CuPy on a GPU)."""
import os
import unittest

from _support import kjit, no_gpu_reason, tempdir

CALLER = r'''
extern __device__ float combine(float a, float b);
extern "C" __global__ void apply(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = combine(x[i], y[i]);
}
template <int N>
__global__ void scaled(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = combine(x[i] * N, y[i]);
}
'''

CALLEE = r'''
__device__ float combine(float a, float b) { return a * 3.0f + b * 0.5f; }
'''

ARCH = "sm_90"


class LinkTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempdir(self)
        self.cache = kjit.Cache(self.dir)
        self.compiler = kjit.Compiler(self.cache)
        self.addCleanup(self.cache.close)
        self.addCleanup(self.compiler.close)

    def compile(self, src, outputs=kjit.Output.LTOIR, arch=ARCH, **kw):
        b = self.compiler.compile(src, arch=arch, outputs=outputs, options=["-rdc=true"], **kw)
        self.addCleanup(b.close)
        return b

    def test_lto_ir_links_to_a_cubin_then_hits(self):
        caller = self.compile(CALLER, name_expressions=["scaled<2>"])
        callee = self.compile(CALLEE)
        with kjit.Linker(self.cache, lto=True) as linker:
            linker.add_binary(caller).add_binary(callee)
            first = linker.link()
            second = linker.link()
            key = linker.key
        self.addCleanup(first.close)
        self.addCleanup(second.close)
        self.assertEqual(first.tier, kjit.Tier.COMPILED)
        self.assertNotEqual(second.tier, kjit.Tier.COMPILED)
        self.assertTrue(first.cubin.startswith(b"\x7fELF"))
        self.assertEqual(first.cubin, second.cubin)
        self.assertEqual(first.target, ARCH)
        self.assertEqual(first.key, key)
        self.assertIn("apply", first.kernel_names)
        lowered = first.lowered_name("scaled<2>")
        self.assertEqual(lowered, caller.lowered_name("scaled<2>"))
        self.assertIn(lowered, first.kernel_names)
        # A fresh cache handle on the same directory: a disk hit.
        with kjit.Cache(self.dir) as again:
            hit = kjit.link([caller, callee], cache=again, lto=True)
            self.assertEqual(hit.tier, kjit.Tier.DISK)
            self.assertEqual(hit.cubin, first.cubin)
            hit.close()

    def test_ptx_inputs_with_rdc_and_files(self):
        caller = self.compile(CALLER, outputs=kjit.Output.PTX)
        callee = self.compile(CALLEE, outputs=kjit.Output.PTX)
        path = os.path.join(self.dir, "callee.ptx")
        with open(path, "w") as f:
            f.write(callee.ptx)
        out = kjit.link([caller, path], cache=self.cache, target=ARCH)
        self.addCleanup(out.close)
        self.assertTrue(out.cubin.startswith(b"\x7fELF"))
        self.assertIn("apply", out.kernel_names)
        raw = kjit.link([(kjit.InputKind.PTX, caller.ptx), (kjit.InputKind.PTX, callee.ptx, "b")],
                        target=ARCH)
        self.addCleanup(raw.close)
        self.assertIn("apply", raw.kernel_names)

    def test_lto_ptx_output(self):
        out = kjit.link([self.compile(CALLER), self.compile(CALLEE)], lto=True, ptx="also")
        self.addCleanup(out.close)
        self.assertIn(".entry apply", out.ptx)
        self.assertTrue(out.cubin.startswith(b"\x7fELF"))

    def test_undefined_symbol_gives_the_log(self):
        caller = self.compile(CALLER)
        for _ in range(2):
            with self.assertRaises(kjit.LinkError) as cm:
                kjit.link([caller], cache=self.cache, lto=True)
            self.assertIn("Unresolved extern function", cm.exception.log)
            self.assertEqual(cm.exception.status, kjit.Status.LINK)
            self.assertIn("Unresolved", str(cm.exception))

    def test_bad_input(self):
        with kjit.Linker(target=ARCH) as linker:
            with self.assertRaises(kjit.InvalidArgument):
                linker.add_data(kjit.InputKind.CUBIN, b"garbage")
            with self.assertRaises(kjit.InvalidArgument):
                linker.add_data(kjit.InputKind.FATBIN, b"garbage")
            with self.assertRaises(kjit.InvalidArgument):
                linker.add_data(kjit.InputKind.LTOIR, b"")
            with self.assertRaises(kjit.InvalidArgument):
                linker.add_file(os.path.join(self.dir, "x.unknown"))
            with self.assertRaises(kjit.KjitIOError):
                linker.add_file(os.path.join(self.dir, "missing.ptx"))
            with self.assertRaises(kjit.InvalidArgument):
                linker.link()  # no inputs
            linker.add_option("-lto")
            linker.add_data(kjit.InputKind.LTOIR, b"garbage bytes", "g")
            with self.assertRaises(kjit.LinkError) as cm:
                linker.link()
            self.assertIn("bad input", cm.exception.log)
        with self.assertRaises(kjit.UnsupportedTarget):
            kjit.link([self.compile(CALLER), self.compile(CALLEE)], target="sm_80", lto=True)
        with self.assertRaises(kjit.InvalidOption):
            kjit.link([self.compile(CALLEE)], options=["-no-such-option"])
        with self.assertRaises(TypeError):
            kjit.Linker().add_binary("not a binary")

    def test_the_key_follows_bytes_and_options(self):
        a = self.compile(CALLER).ltoir
        b = self.compile(CALLEE).ltoir

        def key(x, options=("-lto",), target=ARCH):
            with kjit.Linker(target=target, options=options) as l:
                l.add_data(kjit.InputKind.LTOIR, x).add_data(kjit.InputKind.LTOIR, b)
                return l.key

        base = key(a)
        self.assertRegex(base, r"^[0-9a-f]{64}$")
        self.assertEqual(key(a), base)
        flipped = bytes([a[0] ^ 1]) + a[1:]
        keys = {base, key(flipped), key(a, ("-lto", "-O3")), key(a, target="sm_100")}
        self.assertEqual(len(keys), 4)

    def test_nvjitlink_version(self):
        self.assertTrue(kjit.nvjitlink_version().startswith("nvJitLink 13."))


@unittest.skipIf(no_gpu_reason(), no_gpu_reason() or "")
class LinkGpuTest(unittest.TestCase):
    def test_linked_kernel_matches_numpy(self):
        try:
            import cupy
        except Exception as e:  # noqa: BLE001
            self.skipTest("CuPy not usable: %s" % e)
        d = tempdir(self)
        with kjit.Cache(d) as cache, kjit.Compiler(cache) as compiler:
            arch = kjit.device_arch(0)
            parts = [compiler.compile(s, arch=arch, outputs=kjit.Output.LTOIR,
                                      options=["-rdc=true"]) for s in (CALLER, CALLEE)]
            linked = kjit.link(parts, cache=cache, lto=True)
            x = cupy.arange(1000, dtype=cupy.float32)
            y = cupy.ones(1000, dtype=cupy.float32)
            want = x.get() * 3.0 + y.get() * 0.5
            with linked.kernel("apply") as k:
                k((4,), (256,), (x, y, kjit.int32(1000)))
            cupy.cuda.runtime.deviceSynchronize()
            self.assertTrue(bool((abs(y.get() - want) <= 1e-5 * abs(want) + 1e-5).all()))
            for p in parts:
                p.close()
            linked.close()


if __name__ == "__main__":
    unittest.main()
