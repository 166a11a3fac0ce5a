"""GEMM problems derived from array shapes, strides and dtypes, and the C library's own
checks of them, without a GPU (kjit_gemm_check)."""
import unittest

from _support import kjit
from test_launch_cpu import FakeCudaArray, FakeDLPack


def arr(shape, typestr="<f2", ptr=0x10000, strides=None):
    """A fake CUDA array; strides in elements (converted to bytes for the interface)."""
    itemsize = int(typestr[2:])
    return FakeCudaArray(ptr, shape=shape, typestr=typestr,
                         strides=None if strides is None else tuple(s * itemsize
                                                                   for s in strides))


class MatmulDescTest(unittest.TestCase):
    def check(self, desc, ptrs):
        kjit.gemm_check(desc, *ptrs)

    def test_row_major(self):
        a, b, out = arr((4, 8), ptr=0x1000), arr((8, 16), ptr=0x2000), arr((4, 16), ptr=0x3000)
        desc, ptrs = kjit.matmul_desc(a, b, out)
        self.assertEqual((desc.m, desc.n, desc.k), (4, 16, 8))
        self.assertEqual(desc.order, kjit.GemmOrder.ROW_MAJOR)
        self.assertEqual((desc.trans_a, desc.trans_b), (kjit.GemmOp.N, kjit.GemmOp.N))
        self.assertEqual((desc.lda, desc.ldb, desc.ldd), (8, 16, 16))
        self.assertEqual((desc.a_type, desc.b_type, desc.d_type),
                         (kjit.GemmDtype.F16,) * 3)
        self.assertEqual(desc.batch_count, 1)
        self.assertEqual(ptrs, (0x1000, 0x2000, None, 0x3000, None))
        self.check(desc, ptrs)

    def test_transposed_views_and_padded_rows(self):
        # b.T of a row-major (16 x 8) matrix: shape (8, 16), strides (1, 8).
        a = arr((4, 8), strides=(12, 1))                 # rows padded to 12
        bt = arr((8, 16), strides=(1, 8))
        out = arr((4, 16))
        desc, ptrs = kjit.matmul_desc(a, bt, out)
        self.assertEqual((desc.trans_a, desc.trans_b), (kjit.GemmOp.N, kjit.GemmOp.T))
        self.assertEqual((desc.lda, desc.ldb), (12, 8))
        self.check(desc, ptrs)
        at = arr((4, 8), strides=(1, 4))
        desc, ptrs = kjit.matmul_desc(at, arr((8, 16)), out)
        self.assertEqual((desc.trans_a, desc.lda), (kjit.GemmOp.T, 4))
        self.check(desc, ptrs)

    def test_batches_bias_and_c(self):
        a = arr((3, 4, 8), "<f4")
        b = arr((3, 8, 16), "<f4", ptr=0x20000)
        out = arr((3, 4, 16), "<f4", ptr=0x30000)
        c = arr((3, 4, 16), "<f4", ptr=0x40000)
        bias = arr((16,), "<f4", ptr=0x50000)
        desc, ptrs = kjit.matmul_desc(a, b, out, c=c, beta=1.0, bias=bias,
                                      epilogue=kjit.GemmEpilogue.RELU_BIAS,
                                      compute=kjit.GemmCompute.TF32)
        self.assertEqual(desc.batch_count, 3)
        self.assertEqual((desc.stride_a, desc.stride_b, desc.stride_c, desc.stride_d),
                         (32, 128, 64, 64))
        self.assertEqual((desc.c_type, desc.bias_type, desc.ldc), (kjit.GemmDtype.F32,
                                                                    kjit.GemmDtype.F32, 16))
        self.assertEqual(ptrs, (0x10000, 0x20000, 0x40000, 0x30000, 0x50000))
        self.check(desc, ptrs)

    def test_bfloat16_through_dlpack(self):
        a = FakeDLPack(0x1000, shape=(4, 8), code=4, bits=16)
        b = FakeDLPack(0x2000, shape=(8, 16), code=4, bits=16)
        out = FakeDLPack(0x3000, shape=(4, 16), code=2, bits=32)
        desc, ptrs = kjit.matmul_desc(a, b, out)
        self.assertEqual((desc.a_type, desc.b_type, desc.d_type),
                         (kjit.GemmDtype.BF16, kjit.GemmDtype.BF16, kjit.GemmDtype.F32))
        self.check(desc, ptrs)

    def test_rejected_problems(self):
        bad = [
            ((arr((4, 8)), arr((9, 16)), arr((4, 16))), {}, "do not multiply"),
            ((arr((4, 8)), arr((8, 16)), arr((4, 15))), {}, "do not multiply"),
            ((arr((8,)), arr((8, 16)), arr((4, 16))), {}, "must be 2-D"),
            ((arr((4, 8), "<i4"), arr((8, 16)), arr((4, 16))), {}, "dtype int32"),
            ((arr((4, 8), strides=(16, 2)), arr((8, 16)), arr((4, 16))), {},
             "not contiguous"),
            ((arr((4, 8)), arr((8, 16)), arr((4, 16), strides=(1, 4))), {}, "row-major"),
            ((arr((4, 8)), arr((8, 16)), arr((4, 16))), {"bias": arr((15,))},
             "15 elements"),
            ((arr((4, 8)), arr((8, 16)), arr((4, 16))), {"c": arr((4, 8))}, "c must be"),
            ((arr((2, 4, 8)), arr((3, 8, 16)), arr((3, 4, 16))), {}, "batch sizes differ"),
            ((arr((2, 4, 8)), arr((8, 16)), arr((2, 4, 16))), {}, "both be batched"),
            ((arr((2, 4, 8), strides=(0, 8, 1)), arr((2, 8, 16)), arr((2, 4, 16))), {},
             "batch stride 0"),
        ]
        for args, kw, what in bad:
            with self.assertRaises(kjit.InvalidArgument, msg=what) as cm:
                kjit.matmul_desc(*args, **kw)
            self.assertIn(what, str(cm.exception))
        with self.assertRaises(TypeError):
            kjit.matmul_desc(object(), arr((8, 16)), arr((4, 16)))
        with self.assertRaises(kjit.InvalidArgument):
            kjit.matmul_desc(FakeDLPack(1, shape=(4, 8), device_type=1), arr((8, 16)),
                             arr((4, 16)))


class GemmCheckTest(unittest.TestCase):
    def desc(self, **kw):
        d = dict(m=64, n=32, k=16, a_type=kjit.GemmDtype.F16)
        d.update(kw)
        return kjit.GemmDesc(**d)

    def test_the_c_checks(self):
        ok = (0x1000, 0x2000, None, 0x3000)
        kjit.gemm_check(self.desc(), *ok)
        kjit.gemm_check(self.desc(order=kjit.GemmOrder.ROW_MAJOR, lda=32, ldb=64, ldd=64),
                        *ok)
        cases = [
            (self.desc(m=0), ok, "desc->m must be >= 1"),
            (self.desc(a_type=77), ok, "desc->a_type: unknown value 77"),
            (self.desc(lda=3), ok, "desc->lda (3)"),
            (self.desc(), (0x1001, 0x2000, None, 0x3000), "misaligned"),
            (self.desc(), (None, 0x2000, None, 0x3000), "A is NULL"),
            (self.desc(beta=1.0), ok, "C is NULL"),
            (self.desc(epilogue=kjit.GemmEpilogue.BIAS), ok, "bias is NULL"),
            (self.desc(batch_count=0), ok, "batch_count"),
        ]
        for desc, ptrs, what in cases:
            with self.assertRaises(kjit.InvalidArgument, msg=what) as cm:
                kjit.gemm_check(desc, *ptrs)
            self.assertIn(what, str(cm.exception))

    def test_python_side_checks(self):
        ptrs = (0x1000, 0x2000, None, 0x3000)
        with self.assertRaises(TypeError):
            kjit.gemm_check("desc", *ptrs)
        for field, value in (("alpha", "1"), ("m", 1.5), ("beta", True), ("trans_a", None)):
            with self.assertRaises(TypeError, msg=field):
                kjit.gemm_check(self.desc(**{field: value}), *ptrs)
        with self.assertRaises(kjit.InvalidArgument):
            kjit.gemm_check(self.desc(m=2**64), *ptrs)
        with self.assertRaises(TypeError):
            kjit.gemm_check(self.desc(), "A", 0x2000, None, 0x3000)
        with self.assertRaises(TypeError):
            kjit.gemm_check(self.desc(a_scale=object()), *ptrs)

    def test_cublaslt_version(self):
        try:
            v = kjit.cublaslt_version()
        except kjit.CublasError as e:
            self.assertIn("cublaslt", str(e).lower())
        else:
            self.assertGreater(v, 100000)


if __name__ == "__main__":
    unittest.main()
