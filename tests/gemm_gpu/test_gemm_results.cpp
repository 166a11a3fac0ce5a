// GEMM on a GPU: every dtype and epilogue against a float64 CPU reference, large, transposed,
// batched, in-place and fp8 problems. Skips cleanly without a GPU.
#include "gemm_gpu/gemm_gpu.h"

namespace {

using namespace kjit::test::gemm_gpu;  // NOLINT(google-build-using-namespace)

TEST_F(GemmGpu, EveryTypeAndEpilogue) {
  kjit_gemm* g = create();
  ASSERT_NE(g, nullptr);
  for (const TypeConfig& t : kTypes) {
    Case one = typed(t, "1x1x1");
    run_case(g, one);
    for (int32_t e = KJIT_GEMM_EPILOGUE_NONE; e <= KJIT_GEMM_EPILOGUE_GELU_BIAS; ++e) {
      Case c = typed(t, std::string("127x255x63 ") + kEpilogueNames[e]);
      c.m = 127;
      c.n = 255;
      c.k = 63;
      c.epilogue = e;
      // Vary layouts across the epilogues: row/column-major, transposes, padded ld.
      c.order = e % 2 ? KJIT_GEMM_ROW_MAJOR : KJIT_GEMM_COL_MAJOR;
      c.ta = (e / 2) % 2;
      c.tb = e >= 3 ? 1 : 0;
      c.pad = e == 2 ? 5 : 0;
      run_case(g, c);
    }
  }
  // f64: plain and with C omitted.
  Case f64;
  f64.name = "f64 127x255x63";
  f64.a = KJIT_GEMM_F64;
  f64.m = 127;
  f64.n = 255;
  f64.k = 63;
  f64.tol = 1e-12;
  run_case(g, f64);
  f64.name = "f64 1x1x1 C NULL";
  f64.m = f64.n = f64.k = 1;
  f64.c_null = true;
  run_case(g, f64);
  kjit_gemm_destroy(g);
}

TEST_F(GemmGpu, Large1024Cubed) {
  kjit_gemm* g = create();
  ASSERT_NE(g, nullptr);
  for (const TypeConfig& t : kTypes) {
    if (t.compute == KJIT_GEMM_COMPUTE_F16 || t.d) continue;
    Case c = typed(t, "1024^3 row-major bias");
    c.m = c.n = c.k = 1024;
    c.order = KJIT_GEMM_ROW_MAJOR;
    c.epilogue = KJIT_GEMM_EPILOGUE_BIAS;
    run_case(g, c);
  }
  kjit_gemm_destroy(g);
}

TEST_F(GemmGpu, TransposesAndOrders) {
  kjit_gemm* g = create();
  ASSERT_NE(g, nullptr);
  for (int32_t type : {KJIT_GEMM_F32, KJIT_GEMM_BF16})
    for (int32_t order : {KJIT_GEMM_COL_MAJOR, KJIT_GEMM_ROW_MAJOR})
      for (int32_t ta = 0; ta < 2; ++ta)
        for (int32_t tb = 0; tb < 2; ++tb) {
          Case c;
          c.a = type;
          c.tol = type == KJIT_GEMM_F32 ? 1e-5 : 1e-2;
          c.m = 33;
          c.n = 65;
          c.k = 17;
          c.order = order;
          c.ta = ta;
          c.tb = tb;
          c.pad = 3 * (ta + tb);
          c.name = std::string(kjit::blas::dtype_name(type)) + (order ? " row" : " col") +
                   (ta ? " T" : " N") + (tb ? "T" : "N");
          run_case(g, c);
        }
  kjit_gemm_destroy(g);
}

TEST_F(GemmGpu, Batched) {
  kjit_gemm* g = create();
  ASSERT_NE(g, nullptr);
  Case c;
  c.name = "bf16 batch 3 row-major gelu+bias, per-batch bias";
  c.a = KJIT_GEMM_BF16;
  c.tol = 1e-2;
  c.m = 64;
  c.n = 48;
  c.k = 40;
  c.batch = 3;
  c.order = KJIT_GEMM_ROW_MAJOR;
  c.tb = 1;
  c.epilogue = KJIT_GEMM_EPILOGUE_GELU_BIAS;
  run_case(g, c);
  c.name = "f32 batch 4 col-major, padded ld and gaps between matrices";
  c.a = KJIT_GEMM_F32;
  c.tol = 1e-5;
  c.m = 31;
  c.n = 17;
  c.k = 9;
  c.batch = 4;
  c.order = KJIT_GEMM_COL_MAJOR;
  c.tb = 0;
  c.ta = 1;
  c.pad = 4;
  c.gap = 8;
  c.epilogue = KJIT_GEMM_EPILOGUE_RELU;
  run_case(g, c);
  kjit_gemm_destroy(g);
}

TEST_F(GemmGpu, CNullAndInPlace) {
  kjit_gemm* g = create();
  ASSERT_NE(g, nullptr);
  Case c;
  c.a = KJIT_GEMM_F16;
  c.tol = 1e-2;
  c.m = 96;
  c.n = 80;
  c.k = 72;
  c.name = "f16 C NULL";
  c.c_null = true;
  run_case(g, c);
  c.name = "f16 C == D, beta 0.5";
  c.c_null = false;
  c.in_place = true;
  run_case(g, c);
  kjit_gemm_destroy(g);
}

TEST_F(GemmGpu, Fp8) {
  kjit_gemm* g = create();
  ASSERT_NE(g, nullptr);
  Case c;
  c.a = KJIT_GEMM_F8_E4M3;
  c.d = KJIT_GEMM_BF16;
  c.m = 128;
  c.n = 256;
  c.k = 64;
  c.order = KJIT_GEMM_ROW_MAJOR;  // Y = X * W^T: the layout fp8 kernels take
  c.tb = 1;
  c.a_scale = 0.5f;
  c.b_scale = 2.0f;
  c.tol = 1e-2;
  if (cc_ < 89) {
    // Before Ada/Hopper: a clear unsupported status, never a crash.
    DevMem m(1 << 20);
    kjit_gemm_desc d = KJIT_GEMM_DESC_INIT;
    d.m = 128;
    d.n = 256;
    d.k = 64;
    d.order = KJIT_GEMM_ROW_MAJOR;
    d.trans_b = 1;
    d.a_type = KJIT_GEMM_F8_E4M3;
    d.d_type = KJIT_GEMM_BF16;
    EXPECT_EQ(kjit_gemm_run(g, &d, m.get(), m.get(), nullptr, m.get(), nullptr, nullptr),
              KJIT_ERROR_UNSUPPORTED);
    EXPECT_NE(std::string(kjit_last_error()).find("8.9"), std::string::npos);
    kjit_gemm_destroy(g);
    return;
  }
  // The configuration PyTorch's scaled_mm and Transformer Engine run: beta 0, D in C's
  // place (C NULL here, or given and then not read).
  c.beta = 0;
  c.c_null = true;
  c.name = "e4m3 x e4m3 -> bf16 with scales";
  run_case(g, c);
  c.name = "e4m3 x e4m3 -> bf16 gelu+bias";
  c.epilogue = KJIT_GEMM_EPILOGUE_GELU_BIAS;
  c.may_be_unsupported = true;
  run_case(g, c);
  c.may_be_unsupported = false;
  c.name = "e4m3 x e5m2 -> f16 bias";
  c.b = KJIT_GEMM_F8_E5M2;
  c.d = KJIT_GEMM_F16;
  c.epilogue = KJIT_GEMM_EPILOGUE_BIAS;
  run_case(g, c);
  c.name = "e4m3 x e4m3 -> f32, C given with beta 0";
  c.b = 0;
  c.d = KJIT_GEMM_F32;
  c.epilogue = KJIT_GEMM_EPILOGUE_NONE;
  c.c_null = false;
  run_case(g, c);
  // fp8 output: C has a 16-bit type, so it must be a real buffer (C == D needs equal
  // types); with beta 0 it is not read.
  c.name = "e4m3 x e4m3 -> e4m3 (C bf16 given, beta 0) with a D scale";
  c.c_null = false;
  c.c = KJIT_GEMM_BF16;
  c.d = KJIT_GEMM_F8_E4M3;
  c.d_scale = 0.25f;
  c.tol = 0.07;  // 3 mantissa bits in the output
  run_case(g, c);
  // Accumulation: in place (Transformer Engine's wgrad), and out of place, which cuBLASLt
  // may refuse; either way a result or a clear unsupported status, never a wrong result.
  c.c = 0;
  c.d = KJIT_GEMM_BF16;
  c.d_scale = 0;
  c.tol = 1e-2;
  c.c_null = false;
  c.beta = 1.0;
  c.in_place = true;
  c.may_be_unsupported = true;
  c.name = "e4m3 x e4m3 -> bf16, C == D, beta 1";
  run_case(g, c);
  c.in_place = false;
  c.beta = 0.5;
  c.name = "e4m3 x e4m3 -> bf16, C != D, beta 0.5";
  run_case(g, c);
  kjit_gemm_destroy(g);
}

}  // namespace
