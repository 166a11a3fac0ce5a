"""fp8 e4m3 grouped GEMM from Python with torch tensors: row-wise scales against a float64
reference per group and against torch._scaled_grouped_mm (where the installed torch has it
and the device is sm_90), ragged and empty groups, the gated SwiGLU epilogue, both weight
orders. Skipped without a GPU or PyTorch."""
import unittest

from _support import kjit

try:
    import torch
    HAVE_TORCH = torch.cuda.is_available()
    WHY = "no CUDA device visible to PyTorch"
except Exception as e:  # noqa: BLE001 (any import failure means: skip)
    torch, HAVE_TORCH, WHY = None, False, "PyTorch not importable: %s" % e


def reference(a, w_nk, offs, sa, sb, glu=False):
    """float64 out[r] = sa[r] * sb[g] * (a[r] @ w_nk[g].T), per group; SwiGLU halves."""
    out = torch.zeros(a.shape[0], w_nk.shape[1], dtype=torch.float64, device=a.device)
    start = 0
    for g, end in enumerate(offs.tolist()):
        if end > start:
            h = a[start:end].double() @ w_nk[g].double().T
            out[start:end] = h * sa[start:end].double()[:, None] * sb[g].double()[None, :]
        start = end
    if glu:
        n2 = out.shape[1] // 2
        out = torch.nn.functional.silu(out[:, :n2]) * out[:, n2:]
    return out


def rel(x, ref):
    return ((x.double() - ref).norm() / ref.norm()).item()


@unittest.skipUnless(HAVE_TORCH, WHY)
class GroupedFp8Test(unittest.TestCase):
    def setUp(self):
        self.gg = kjit.GroupedGemm()
        self.gen = torch.Generator(device="cuda").manual_seed(7)

    def data(self, sizes, n, k):
        rows = sum(sizes)
        f8 = torch.float8_e4m3fn
        a = torch.randn(rows, k, device="cuda", generator=self.gen).to(f8)
        w = torch.randn(len(sizes), n, k, device="cuda", generator=self.gen).to(f8)
        sa = torch.rand(rows, device="cuda", generator=self.gen) + 0.5
        sb = (torch.rand(len(sizes), n, device="cuda", generator=self.gen) + 0.5) / 16
        offs = torch.tensor(sizes, device="cuda").cumsum(0).to(torch.int32)
        return a, w, sa, sb, offs

    def test_ragged_groups_against_float64(self):
        a, w, sa, sb, offs = self.data([0, 1, 130, 0, 77, 128], 200, 208)
        out = self.gg(a, w.transpose(-2, -1), offs, scale_a=sa, scale_b=sb)
        self.assertEqual(out.dtype, torch.bfloat16)
        self.assertLess(rel(out, reference(a, w, offs, sa, sb)), 1e-2)
        self.assertIn("in=e4m3 scale=row", self.gg.plan_key(a, w.transpose(-2, -1), out,
                                                             scaled=True))
        # The (G, K, N) order: the portable kernel, the same result.
        out_kn = self.gg(a, w.transpose(-2, -1).contiguous(), offs, scale_a=sa, scale_b=sb)
        self.assertLess(rel(out_kn, reference(a, w, offs, sa, sb)), 1e-2)

    def test_swiglu(self):
        a, w, sa, sb, offs = self.data([64, 0, 129, 31], 2 * 144, 256)
        out = self.gg(a, w.transpose(-2, -1), offs, scale_a=sa, scale_b=sb, activation="swiglu")
        self.assertEqual(tuple(out.shape), (a.shape[0], 144))
        self.assertLess(rel(out, reference(a, w, offs, sa, sb, glu=True)), 1e-2)

    @unittest.skipUnless(HAVE_TORCH and hasattr(torch, "_scaled_grouped_mm") and
                         torch.cuda.get_device_capability() == (9, 0),
                         "torch._scaled_grouped_mm needs an sm_90 device and a torch that has it")
    def test_matches_torch_scaled_grouped_mm(self):
        a, w, sa, sb, offs = self.data([128, 64, 0, 192], 512, 1024)
        ref = reference(a, w, offs, sa, sb)
        t = torch._scaled_grouped_mm(a, w.transpose(-2, -1), sa, sb, offs=offs,
                                     out_dtype=torch.bfloat16)
        k = self.gg(a, w.transpose(-2, -1), offs, scale_a=sa, scale_b=sb)
        self.assertLess(rel(t, ref), 1e-2)
        self.assertLess(rel(k, ref), 1e-2)
        self.assertLess(rel(k, t.double()), 2e-2)

    def test_block_scales_against_float64(self):
        sizes, n, k = [0, 1, 130, 77, 300], 200, 400
        a, w, _, _, offs = self.data(sizes, n, k)
        kb, nb = (k + 127) // 128, (n + 127) // 128
        sa = torch.rand(a.shape[0], kb, device="cuda", generator=self.gen) + 0.5
        sb = (torch.rand(len(sizes), nb, kb, device="cuda", generator=self.gen) + 0.5) / 16
        out = self.gg(a, w.transpose(-2, -1), offs, scale_a=sa, scale_b=sb)
        # float64: each K block's product times its scales.
        sa_full = sa.double().repeat_interleave(128, dim=1)[:, :k]  # (rows, k)
        sb_full = sb.double().repeat_interleave(128, dim=1)[:, :n].repeat_interleave(
            128, dim=2)[:, :, :k]  # (G, n, k)
        ref = torch.zeros(a.shape[0], n, dtype=torch.float64, device="cuda")
        start = 0
        for g, end in enumerate(offs.tolist()):
            if end > start:
                ref[start:end] = torch.einsum("rk,nk->rn",
                                              a[start:end].double() * sa_full[start:end],
                                              w[g].double() * sb_full[g])
            start = end
        self.assertLess(rel(out, ref), 1e-2)
        with self.assertRaises(kjit.InvalidArgument):  # scale_b of the wrong block count
            self.gg(a, w.transpose(-2, -1), offs, scale_a=sa, scale_b=sb[:, :1])

    def test_scales_are_checked(self):
        a, w, sa, sb, offs = self.data([16, 16], 128, 128)
        with self.assertRaises(kjit.InvalidArgument):
            self.gg(a, w.transpose(-2, -1), offs, scale_a=sa)  # scale_b missing
        with self.assertRaises(kjit.InvalidArgument):
            self.gg(a, w.transpose(-2, -1), offs, scale_a=sa, scale_b=sb[:, :64])
        with self.assertRaises(kjit.InvalidArgument):  # fp8 A with bf16 B
            self.gg(a, w.transpose(-2, -1).to(torch.bfloat16), offs, scale_a=sa, scale_b=sb)


if __name__ == "__main__":
    unittest.main()
