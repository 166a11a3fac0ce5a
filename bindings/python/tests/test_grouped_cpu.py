"""Grouped GEMM calls derived from array shapes, strides and dtypes, and the C library's own
checks of them, without a GPU (kjit_grouped_gemm_check)."""
import unittest

from _support import kjit
from test_launch_cpu import FakeDLPack

BF16 = dict(code=4, bits=16)  # DLPack kDLBfloat
I32 = dict(code=0, bits=32)


def bf16(shape, ptr, strides=None):
    return FakeDLPack(ptr, shape=shape, strides=strides, **BF16)


class GroupedCheckTest(unittest.TestCase):
    def test_fp8_inputs(self):
        f8 = dict(code=10, bits=8)  # DLPack kDLFloat8_e4m3fn
        a = FakeDLPack(0x10001, shape=(100, 64), **f8)  # 1-byte elements: any address
        offs = FakeDLPack(0x20000, shape=(4,), **I32)
        out = bf16((100, 96), 0x30000)
        b = FakeDLPack(0x40000, shape=(4, 64, 96), strides=(96 * 64, 1, 64), **f8)
        kjit.grouped_check(a, b, offs, out, activation="relu")
        with self.assertRaises(kjit.InvalidArgument):  # A and B of different types
            kjit.grouped_check(a, bf16((4, 64, 96), 0x40000), offs, out)
        with self.assertRaises(kjit.InvalidArgument):  # fp8 out
            kjit.grouped_check(a, b, offs, FakeDLPack(0x30000, shape=(100, 96), **f8))

    def test_both_b_orders(self):
        a = bf16((100, 64), 0x10000)
        offs = FakeDLPack(0x20000, shape=(4,), **I32)
        out = bf16((100, 96), 0x30000)
        kjit.grouped_check(a, bf16((4, 64, 96), 0x40000), offs, out)  # (G, K, N)
        # The transposed view of (G, N, K) weights: shape (G, K, N), strides (N*K, 1, K).
        kjit.grouped_check(a, bf16((4, 64, 96), 0x40000, strides=(96 * 64, 1, 64)), offs, out,
                           bias=bf16((4, 96), 0x50000), activation="silu")

    def test_swiglu_writes_half_the_columns(self):
        a = bf16((100, 64), 0x10000)
        offs = FakeDLPack(0x20000, shape=(4,), **I32)
        b = bf16((4, 64, 96), 0x40000)  # 48 gate and 48 up columns
        half = bf16((100, 48), 0x30000)
        kjit.grouped_check(a, b, offs, half, activation="swiglu",
                           bias=bf16((4, 96), 0x50000))  # the bias spans both halves
        kjit.grouped_check(a, b, offs, half, activation=kjit.GroupedActivation.SWIGLU,
                           beta=0.5, c=bf16((100, 48), 0x60000))
        with self.assertRaises(kjit.InvalidArgument):  # out as wide as B
            kjit.grouped_check(a, b, offs, bf16((100, 96), 0x30000), activation="swiglu")
        with self.assertRaises(kjit.InvalidArgument):  # half the columns without the gate
            kjit.grouped_check(a, b, offs, half, activation="silu")
        with self.assertRaises(kjit.InvalidArgument) as e:  # odd N: no two halves
            kjit.grouped_check(a, bf16((4, 64, 95), 0x40000), offs, bf16((100, 47), 0x30000),
                               activation="swiglu")
        self.assertIn("even n", str(e.exception))
        with self.assertRaises(kjit.InvalidArgument):
            kjit.grouped_check(a, b, offs, half, activation=5)

    def test_bad_calls(self):
        a = bf16((100, 64), 0x10000)
        offs = FakeDLPack(0x20000, shape=(4,), **I32)
        out = bf16((100, 96), 0x30000)
        b = bf16((4, 64, 96), 0x40000)
        with self.assertRaises(kjit.InvalidArgument):
            kjit.grouped_check(a, bf16((4, 32, 96), 0x40000), offs, out)  # K mismatch
        with self.assertRaises(kjit.InvalidArgument):
            kjit.grouped_check(a, b, FakeDLPack(0x20000, shape=(3,), **I32), out)  # G
        with self.assertRaises(kjit.InvalidArgument):
            kjit.grouped_check(FakeDLPack(0x10000, shape=(100, 64), code=2, bits=16), b, offs,
                               out)  # float16
        with self.assertRaises(kjit.InvalidArgument):
            kjit.grouped_check(a, b, offs, out, activation="tanh")
        with self.assertRaises(kjit.InvalidArgument) as e:
            kjit.grouped_check(bf16((100, 64), 0x10001), b, offs, out)  # misaligned A
        self.assertIn("aligned", str(e.exception))
        with self.assertRaises(kjit.InvalidArgument):
            kjit.grouped_check(a, b, offs, out, beta=1.0, c=None)  # C missing


if __name__ == "__main__":
    unittest.main()


class GroupedCompileTest(unittest.TestCase):
    """grouped_compile(): the kernel a handle on a device of a target picks, compiled
    without a GPU into the compiler's cache (what `kjit warm --grouped` does)."""

    def test_compile_then_hit(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            compiler = kjit.Compiler(kjit.Cache(d))
            first = kjit.grouped_compile(compiler, "sm_80", 8, 64, 64, 100, bias=True,
                                         activation="silu")
            self.assertEqual(first.tier, kjit.Tier.COMPILED)
            self.assertEqual(first.target, "sm_80")
            again = kjit.grouped_compile(compiler, "sm_80", 16, 64, 64, 3000, bias=True,
                                         activation="silu")
            self.assertNotEqual(again.tier, kjit.Tier.COMPILED)  # same configuration
            self.assertEqual(again.key, first.key)
            with self.assertRaises(kjit.InvalidArgument) as e:
                kjit.grouped_compile(compiler, "compute_90", 8, 64, 64, 100)
            self.assertIn("not an exact architecture", str(e.exception))
            with self.assertRaises(kjit.InvalidArgument):
                kjit.grouped_compile(compiler, "sm_90", 8, 64, 64, 100)

    def test_new_options_are_checked(self):
        with self.assertRaises(kjit.InvalidArgument) as e:
            kjit.GroupedGemm(kjit.Compiler(kjit.Cache(memory_only=True)), autotune=True,
                             tile_n=128)
        self.assertIn("autotune", str(e.exception))
        with self.assertRaises(kjit.InvalidArgument) as e:
            kjit.GroupedGemm(kjit.Compiler(kjit.Cache(memory_only=True)), cluster_m=2,
                             schedule=2)
        self.assertIn("cluster", str(e.exception))
        with self.assertRaises((ValueError, kjit.InvalidArgument)):
            kjit.GroupedGemm(kjit.Compiler(kjit.Cache(memory_only=True)), cluster_m=3)
