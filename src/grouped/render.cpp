#include "grouped/render.h"

#include <string>

#include "util/error.h"

namespace kjit::grouped {
namespace {

const char* act_name(Act a) {
  switch (a) {
    case Act::None:
      return "";
    case Act::Relu:
      return "relu";
    case Act::Gelu:
      return "gelu";
    case Act::Silu:
      return "silu";
    case Act::Swiglu:
      return "swiglu";
  }
  return "?";
}

std::string num(long long v) {
  return std::to_string(v);
}

// ---- pieces shared by both kernels ----------------------------------------------------------

// Types, bf16 conversions (round to nearest even, NaN kept quiet), the persistent scheduler.
const char* kCommon = R"(typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned short bf16_t;

__device__ __forceinline__ float bf2f(bf16_t h) { return __uint_as_float(((u32)h) << 16); }
__device__ __forceinline__ bf16_t f2bf(float f) {
  u32 u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (bf16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (bf16_t)(u >> 16);
}

// One output tile: group g, rows [row0, min(row0 + TILE_M, row_end)), columns from n0.
struct Tile {
  int g, row0, row_end, n0;
};

// Maps the launch's tile numbers, visited in increasing order, to groups. Group g owns rows
// [end(g-1), end(g)) where end() is offs clamped to [end(g-1), rows]; its tiles are
// ceil(rows_g / TILE_M) x n_tiles, rows fastest; a tile covers OUT_N columns of D.
struct Sched {
  const int* offs;
  int G, rows, n_tiles;
  int g, g_start, g_end, base, g_tiles, m_tiles;
  __device__ __forceinline__ void init(const int* o, int groups, int total_rows, int nt) {
    offs = o; G = groups; rows = total_rows; n_tiles = nt;
    g = -1; g_start = 0; g_end = 0; base = 0; g_tiles = 0; m_tiles = 1;
  }
  __device__ __forceinline__ bool next(int t, Tile& tile) {
    while (t >= base + g_tiles) {
      base += g_tiles;
      if (++g >= G) return false;
      g_start = g_end;
      int e = __ldg(offs + g);
      e = e < g_start ? g_start : (e > rows ? rows : e);
      g_end = e;
      m_tiles = (g_end - g_start + TILE_M - 1) / TILE_M;
      g_tiles = m_tiles * n_tiles;
    }
    const int local = t - base;
    tile.g = g;
    tile.row0 = g_start + (local % m_tiles) * TILE_M;
    tile.row_end = g_end;
    tile.n0 = (local / m_tiles) * OUT_N;
    return true;
  }
};
)";

// fp8 e4m3 (the OCP "fn" form: no infinities, S.1111.111 is NaN) to float, exactly; for the
// portable kernel (sm_80 has no fp8 conversion instruction).
const char* kFp8 = R"(__device__ __forceinline__ float f82f(unsigned char x) {
  const u32 s = ((u32)x & 0x80u) << 24, e = ((u32)x >> 3) & 0xfu, m = (u32)x & 7u;
  if (e == 0xfu && m == 7u) return __uint_as_float(s | 0x7fc00000u);
  if (e == 0u) return __uint_as_float(s | __float_as_uint((float)m * 0.001953125f));
  return __uint_as_float(s | ((e + 120u) << 23) | (m << 20));
}
)";

bool fp8(const Config& c) {
  return c.in == DType::E4m3;
}

// The row scale `sa` and the group's column scales `sbg` of output row `row` (scaled
// configurations only; the epilogue call multiplies the accumulators by them).
std::string scale_setup(const Config& c, const std::string& ind) {
  if (c.scale != Scale::Row) return "";
  return ind + "const float sa = __ldg(scale_a + row);\n" + ind +
         "const float* sbg = scale_b + (long long)tile.g * N;\n";
}

// The activation piece applied to the variable `v`.
std::string act_piece(Act a, const std::string& v) {
  switch (a) {
    case Act::Relu:
      return "  " + v + " = fmaxf(" + v + ", 0.0f);\n";
    case Act::Gelu:
      return "  " + v + " = 0.5f * " + v + " * (1.0f + tanhf(0.7978845608028654f * (" + v +
             " + 0.044715f * " + v + " * " + v + " * " + v + ")));\n";
    case Act::Silu:
      return "  " + v + " = " + v + " / (1.0f + __expf(-" + v + "));\n";
    case Act::None:
    case Act::Swiglu:
      break;
  }
  return "";
}

// The epilogue, composed of the pieces the configuration asks for. Plain:
//   epilogue(acc) = act(alpha * acc + beta * C + bias[g, col])
// Gated (SwiGLU), from the gate and up accumulators of output column col (B columns col and
// nh + col; the bias has the same 2 * nh columns as B):
//   epilogue_glu(gate, up) = silu(alpha * gate + bias[g, col]) * (alpha * up + bias[g, nh + col])
//                            + beta * C
std::string epilogue_source(const Config& c) {
  const char* head =
      "    const bf16_t* __restrict__ C, long long ldc, const bf16_t* __restrict__ bias,\n"
      "    long long stride_bias, float alpha, float beta";
  std::string s;
  if (c.act == Act::Swiglu) {
    s = "__device__ __forceinline__ float epilogue_glu(float gate, float up, int row, int col,\n"
        "    int g,\n";
    s += head;
    s += ", int nh) {\n  float vg = alpha * gate, vu = alpha * up;\n";
    if (c.has_bias)
      s += "  vg += bf2f(bias[(long long)g * stride_bias + col]);\n"
           "  vu += bf2f(bias[(long long)g * stride_bias + nh + col]);\n";
    s += act_piece(Act::Silu, "vg");
    s += "  float v = vg * vu;\n";
    if (c.has_c) s += "  v += beta * bf2f(C[(long long)row * ldc + col]);\n";
    s += "  return v;\n}\n";
    return s;
  }
  s = "__device__ __forceinline__ float epilogue(float acc, int row, int col, int g,\n";
  s += head;
  s += ") {\n  float v = alpha * acc;\n";
  if (c.has_c) s += "  v += beta * bf2f(C[(long long)row * ldc + col]);\n";
  if (c.has_bias) s += "  v += bf2f(bias[(long long)g * stride_bias + col]);\n";
  s += act_piece(c.act, "v");
  s += "  return v;\n}\n";
  return s;
}

// The call of the epilogue for the value `v` (gated: and its up partner `u`) at (row, col).
// Scaled: the accumulators times the row's and the column's scale first (the scales commute
// with the K sum); the gated up value's column scale is B's column NO + col.
std::string epilogue_call(const Config& c, const char* v, const char* u, const char* col) {
  std::string vs = v, us = u;
  if (c.scale == Scale::Row) {
    vs = std::string(v) + " * sa * __ldg(sbg + " + col + ")";
    us = std::string(u) + " * sa * __ldg(sbg + NO + " + col + ")";
  }
  if (c.act == Act::Swiglu)
    return "epilogue_glu(" + vs + ", " + us + ", row, " + col +
           ", tile.g, C, ldc, bias, stride_bias, alpha, beta, NO)";
  return "epilogue(" + vs + ", row, " + col + ", tile.g, C, ldc, bias, stride_bias, alpha, beta)";
}

const char* kParamsRest =
    "    bf16_t* __restrict__ D, const bf16_t* __restrict__ C, const bf16_t* __restrict__ bias,\n"
    "    long long lda, long long ldb, long long stride_b, long long ldc, long long ldd,\n"
    "    long long stride_bias, int G, int rows, int N, int K, float alpha, float beta";

// The parameters both kernels share: A and B of the input type, then kParamsRest, then the
// scale pointers of a scaled configuration.
std::string params_common(const Config& c) {
  const std::string t = fp8(c) ? "unsigned char" : "bf16_t";
  std::string s = "const " + t + "* __restrict__ A, const " + t +
                  "* __restrict__ B, const int* __restrict__ offs,\n";
  s += kParamsRest;
  if (c.scale != Scale::None)
    s += ",\n    const float* __restrict__ scale_a, const float* __restrict__ scale_b";
  return s;
}

// ---- the portable kernel ------------------------------------------------------------------

std::string simt_source(const Config& c) {
  const bool glu = c.act == Act::Swiglu;
  std::string s;
  s += "#define TILE_M " + num(c.tile_m) + "\n#define TILE_N " + num(c.tile_n) +
       "\n#define TILE_K " + num(c.tile_k) + "\n#define OUT_N TILE_N\n";
  s += kCommon;
  if (fp8(c)) s += kFp8;
  s += epilogue_source(c);
  s += "extern \"C\" __global__ void __launch_bounds__(256) kjit_grouped_gemm(";
  s += params_common(c);
  s += ") {\n";
  s += R"(  __shared__ float sA[TILE_K][TILE_M + 4];
  __shared__ float sB[TILE_K][TILE_N + 4];
)";
  // Gated: the up columns (nh + col) beside the gate columns (col), and their accumulators.
  if (glu) s += "  __shared__ float sU[TILE_K][TILE_N + 4];\n";
  s += std::string("  const int NO = ") + (glu ? "N / 2" : "N") + ";  // columns of D\n";
  s += R"(  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  Sched sched;
  sched.init(offs, G, rows, (NO + TILE_N - 1) / TILE_N);
  Tile tile;
  for (int t = blockIdx.x; sched.next(t, tile); t += gridDim.x) {
    const bf16_t* Bg = B + (long long)tile.g * stride_b;
    float acc[4][4];
)";
  if (glu) s += "    float accu[4][4];\n";
  s += R"(#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
)";
  if (glu)
    s += "#pragma unroll\n    for (int i = 0; i < 4; ++i)\n#pragma unroll\n"
         "      for (int j = 0; j < 4; ++j) accu[i][j] = 0.0f;\n";
  s += R"(    for (int k0 = 0; k0 < K; k0 += TILE_K) {
      for (int e = threadIdx.x; e < TILE_M * TILE_K; e += 256) {
        const int m = e / TILE_K, k = e % TILE_K, r = tile.row0 + m, kk = k0 + k;
        sA[k][m] = (r < tile.row_end && kk < K) ? bf2f(A[(long long)r * lda + kk]) : 0.0f;
      }
      for (int e = threadIdx.x; e < TILE_N * TILE_K; e += 256) {
)";
  if (c.b_order == BOrder::KN) {
    s += "        const int k = e / TILE_N, n = e % TILE_N, kk = k0 + k, col = tile.n0 + n;\n"
         "        const bool in = col < NO && kk < K;\n"
         "        sB[k][n] = in ? bf2f(Bg[(long long)kk * ldb + col]) : 0.0f;\n";
    if (glu) s += "        sU[k][n] = in ? bf2f(Bg[(long long)kk * ldb + NO + col]) : 0.0f;\n";
  } else {
    s += "        const int n = e / TILE_K, k = e % TILE_K, kk = k0 + k, col = tile.n0 + n;\n"
         "        const bool in = col < NO && kk < K;\n"
         "        sB[k][n] = in ? bf2f(Bg[(long long)col * ldb + kk]) : 0.0f;\n";
    if (glu) s += "        sU[k][n] = in ? bf2f(Bg[(long long)(NO + col) * ldb + kk]) : 0.0f;\n";
  }
  s += R"(      }
      __syncthreads();
#pragma unroll
      for (int k = 0; k < TILE_K; ++k) {
        float a[4], b[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) a[i] = sA[k][ty + 16 * i];
#pragma unroll
        for (int j = 0; j < 4; ++j) b[j] = sB[k][tx + 16 * j];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
)";
  if (glu)
    s += "#pragma unroll\n        for (int j = 0; j < 4; ++j) b[j] = sU[k][tx + 16 * j];\n"
         "#pragma unroll\n        for (int i = 0; i < 4; ++i)\n#pragma unroll\n"
         "          for (int j = 0; j < 4; ++j) accu[i][j] = fmaf(a[i], b[j], accu[i][j]);\n";
  s += R"(      }
      __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = tile.row0 + ty + 16 * i;
      if (row >= tile.row_end) continue;
)";
  s += scale_setup(c, "      ");
  s += R"(#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int col = tile.n0 + tx + 16 * j;
        if (col < NO)
          D[(long long)row * ldd + col] = f2bf()";
  s += epilogue_call(c, "acc[i][j]", "accu[i][j]", "col");
  s += R"();
      }
    }
  }
}
)";
  if (fp8(c)) {
    // The operand loads convert from e4m3 (the epilogue's bf2f of C and bias stays).
    for (const char* from : {"bf2f(A[", "bf2f(Bg["}) {
      const std::string f = from, t = "f82f" + f.substr(4);
      for (size_t at = s.find(f); at != std::string::npos; at = s.find(f, at + t.size()))
        s.replace(at, f.size(), t);
    }
    const std::string bg = "const bf16_t* Bg", bg8 = "const unsigned char* Bg";
    s.replace(s.find(bg), bg.size(), bg8);
  }
  if (c.scale == Scale::Block128) {
    // Block scales: each operand element times its block's scale as it is loaded (a K
    // step of 16 lies in one 128-wide block).
    const auto sub = [&](const std::string& from, const std::string& to) {
      const size_t at = s.find(from);
      if (at != std::string::npos) s.replace(at, from.size(), to);
    };
    sub("f82f(A[(long long)r * lda + kk])",
        "f82f(A[(long long)r * lda + kk]) * __ldg(scale_a + (long long)r * KB + kk / 128)");
    const bool kn = c.b_order == BOrder::KN;
    sub(kn ? "f82f(Bg[(long long)kk * ldb + col])" : "f82f(Bg[(long long)col * ldb + kk])",
        std::string(kn ? "f82f(Bg[(long long)kk * ldb + col])"
                       : "f82f(Bg[(long long)col * ldb + kk])") +
            " * __ldg(sbg + (long long)(col / 128) * KB + kk / 128)");
    sub(kn ? "f82f(Bg[(long long)kk * ldb + NO + col])"
           : "f82f(Bg[(long long)(NO + col) * ldb + kk])",
        std::string(kn ? "f82f(Bg[(long long)kk * ldb + NO + col])"
                       : "f82f(Bg[(long long)(NO + col) * ldb + kk])") +
            " * __ldg(sbg + (long long)((NO + col) / 128) * KB + kk / 128)");
    sub("    const unsigned char* Bg = B + (long long)tile.g * stride_b;\n",
        "    const unsigned char* Bg = B + (long long)tile.g * stride_b;\n"
        "    const int KB = (K + 127) / 128;\n"
        "    const float* sbg = scale_b + (long long)tile.g * ((N + 127) / 128) * KB;\n");
  }
  return s;
}

// ---- the sm_90a kernel -----------------------------------------------------------------

// TMA, mbarrier and wgmma wrappers (PTX ISA 8.0: cp.async.bulk.tensor, mbarrier try_wait
// with parity and expect_tx, wgmma.mma_async with shared-memory descriptors).
const char* kHopper = R"(struct __align__(64) TmaDesc {
  u64 v[16];
};

__device__ __forceinline__ u32 smem_u32(const void* p) {
  return (u32)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void mbar_init(u32 bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(u32 bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
  u32 done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}
__device__ __forceinline__ void tma_load_2d(u32 dst, const TmaDesc* map, int c0, int c1, u32 bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
      "l"((u64)map), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void tma_load_3d(u32 dst, const TmaDesc* map, int c0, int c1, int c2,
                                            u32 bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(dst),
      "l"((u64)map), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}
// Shared-memory matrix descriptor, 128-byte swizzle; offsets in bytes.
__device__ __forceinline__ u64 smem_desc(u32 addr, u32 lbo, u32 sbo) {
  return (u64)((addr & 0x3FFFFu) >> 4) | ((u64)((lbo >> 4) & 0x3FFFu) << 16) |
         ((u64)((sbo >> 4) & 0x3FFFu) << 32) | (1ull << 62);
}
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_wait0() {
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
}
__device__ __forceinline__ void wgmma_wait1() {
  asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
}
// Two floats to two bf16 (round to nearest even) in one word, lo in the low half.
__device__ __forceinline__ u32 pack_bf16x2(float lo, float hi) {
  u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
// a[i] for a run-time i in 0..3 of a 4-element register array (selects, no local memory).
__device__ __forceinline__ u32 sel4(const u32* a, int i) {
  return i == 0 ? a[0] : i == 1 ? a[1] : i == 2 ? a[2] : a[3];
}
__device__ __forceinline__ void store_pair(bf16_t* __restrict__ D, long long ldd, int row, int col,
                                           int N, float v0, float v1, bool pairs) {
  bf16_t* p = D + (long long)row * ldd + col;
  if (pairs && col + 1 < N) {
    *(u32*)p = pack_bf16x2(v0, v1);
  } else {
    if (col < N) p[0] = f2bf(v0);
    if (col + 1 < N) p[1] = f2bf(v1);
  }
}
)";

// A cluster of CTAs along M (cluster_m 2): the CTAs of a cluster take the row tiles of one
// column tile of B; each copies its share of B's stage and multicasts it into both CTAs'
// shared memory, so each CTA reads half of B from L2. A stage is free again when the
// consumers of every CTA of the cluster released it: one arrival per consumer warp on the
// stage's empty barrier of each CTA (remote arrivals through mapa).
const char* kClusterRank = R"(__device__ __forceinline__ int cta_rank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return (int)r;
}
)";
const char* kCluster = R"(__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::
                   : "memory");
}
__device__ __forceinline__ void mbar_arrive_cta(u32 bar, u32 cta) {
  u32 remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(bar), "r"(cta));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote)
               : "memory");
}
// The calling warp's release of a stage: lane 0 arrives on the stage's barrier in every CTA.
__device__ __forceinline__ void release_stage(u32 bar) {
  if ((threadIdx.x & 31) == 0) {
#pragma unroll
    for (u32 c = 0; c < CM; ++c) mbar_arrive_cta(bar, c);
  }
}
__device__ __forceinline__ void tma_load_3d_mc(u32 dst, const TmaDesc* map, int c0, int c1, int c2,
                                               u32 bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3, %4}], [%5], %6;" ::"r"(dst),
      "l"((u64)map), "r"(c0), "r"(c1), "r"(c2), "r"(bar), "h"((unsigned short)((1u << CM) - 1u))
      : "memory");
}
)";

// One CTA: a consumer warp's release of a stage, one arrival (lane 0) per warp, after the
// warp's wgmma reads of the stage completed (the empty barriers count consumer warps).
const char* kRelease = R"(__device__ __forceinline__ void release_stage(u32 bar) {
  if ((threadIdx.x & 31) == 0) mbar_arrive(bar);
}
)";

// The TMA store epilogue's pieces (PTX ISA 8.0: cp.async.bulk.tensor shared::cta to global
// in bulk groups; a proxy fence makes the threads' shared-memory writes visible to it).
const char* kTmaStore = R"(__device__ __forceinline__ void wg_sync(u32 id) {
  asm volatile("bar.sync %0, 128;" ::"r"(id) : "memory");
}
__device__ __forceinline__ void st_shared_u32(u32 addr, u32 v) {
  asm volatile("st.shared.u32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
}
// Each writing thread's shared-memory stores made visible to the copies (before the sync).
__device__ __forceinline__ void fence_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
__device__ __forceinline__ void tma_store_2d(const TmaDesc* map, u32 src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
                   (u64)map),
               "r"(src), "r"(c0), "r"(c1)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
__device__ __forceinline__ void bulk_wait_read1() {
  asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
}
__device__ __forceinline__ void bulk_wait0() {
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}
)";

// B's copies with an L2 evict-first policy (the weights are read once per call; A, read by
// every tile of its rows, and D keep the cache).
const char* kEvictFirst =
    R"(__device__ __forceinline__ void tma_load_3d_ef(u32 dst, const TmaDesc* map, int c0, int c1,
                                               int c2, u32 bar) {
  u64 policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%2, %3, %4}], [%5], %6;" ::"r"(dst),
      "l"((u64)map), "r"(c0), "r"(c1), "r"(c2), "r"(bar), "l"(policy)
      : "memory");
}
)";

// wgmma m64nNk16, bf16 x bf16 -> f32 (fp8: m64nNk32, e4m3 x e4m3 -> f32, both operands
// K-major, no transpose operands), A and B from shared memory; the accumulator is d[0..N/2).
std::string wgmma_source(int n, bool trans_b, bool e4m3) {
  const int regs = n / 2;
  std::string s =
      "__device__ __forceinline__ void wgmma_tile(float* d, u64 da, u64 db, int scale_d) {\n"
      "  asm volatile(\n"
      "      \"{\\n.reg .pred p;\\nsetp.ne.b32 p, %" +
      num(regs + 2) + ", 0;\\n\"\n      \"wgmma.mma_async.sync.aligned.m64n" + num(n) +
      (e4m3 ? "k32.f32.e4m3.e4m3 {" : "k16.f32.bf16.bf16 {");
  for (int i = 0; i < regs; ++i) {
    s += (i ? "," : "") + std::string("%") + num(i);
    if (i % 16 == 15 && i + 1 < regs) s += "\"\n      \"";
  }
  s += "}, %" + num(regs) + ", %" + num(regs + 1) + ", p, 1, 1" +
       (e4m3 ? std::string("") : std::string(", 0, ") + (trans_b ? "1" : "0")) +
       ";\\n}\\n\"\n      : ";
  for (int i = 0; i < regs; ++i) {
    s += (i ? ", " : "") + std::string("\"+f\"(d[") + num(i) + "])";
    if (i % 8 == 7 && i + 1 < regs) s += "\n        ";
  }
  s += "\n      : \"l\"(da), \"l\"(db), \"r\"(scale_d));\n}\n";
  return s;
}

// The TMA store epilogue's buffers: two 64 x 64 bf16 pieces per consumer warpgroup.
size_t staging_bytes(const Config& c) {
  if (!c.tma_store) return 0;
  return size_t(c.tile_m == 64 ? 1 : 2) * 2 * 8192;
}

size_t a_stage_bytes(const Config& c) {
  return size_t(c.tile_m) * c.tile_k * in_bytes(c);
}
size_t b_stage_bytes(const Config& c) {
  return size_t(c.tile_n) * c.tile_k * in_bytes(c);
}

// One consumer's main loop over the k-blocks of a tile, issuing the wgmma of its first
// `halves` 64-row halves (0: none, the stages are only waited for and released).
// Each wgmma takes 32 bytes of K per row (16 bf16 or 32 e4m3): `kstep` elements.
// Block scales (cooperative, one 64-row half, B order NK, fp8): each 128-wide K block's
// wgmma product (a fresh accumulator per block) is promoted into the fp32 main accumulator
// times its row's A scale and its 128-column block's B scale (the gated tile's up half has
// a block of its own), then the main accumulator is the epilogue's input.
std::string consumer_loop_block() {
  return R"(        float main_acc[ACC];
#pragma unroll
        for (int i = 0; i < ACC; ++i) main_acc[i] = 0.0f;
        const int KB = (K + 127) / 128, NB = (N + 127) / 128;
        const int rb = tile.row0 + cw * 64 + warp * 16 + (lane >> 2);
        const float* sa0p = scale_a + (long long)min(rb, tile.row_end - 1) * KB;
        const float* sa1p = scale_a + (long long)min(rb + 8, tile.row_end - 1) * KB;
        const float* sb0p = scale_b + ((long long)tile.g * NB + tile.n0 / 128) * KB;
        const float* sb1p =
            GLU ? scale_b + ((long long)tile.g * NB + (NO + tile.n0) / 128) * KB : sb0p;
        for (int kb = 0; kb < k_blocks; ++kb) {
          mbar_wait(full + 8 * stage, phase);
          wgmma_fence();
          const u32 a_base = sA + stage * A_STAGE + cw * (64 * 128);
          const u32 b_base = sB + stage * B_STAGE;
#pragma unroll
          for (int kk = 0; kk < TILE_K / 32; ++kk) {
            wgmma_tile(acc, smem_desc(a_base + kk * 32, 16, 1024),
                       smem_desc(b_base + kk * 32, 16, 1024), kk != 0);
          }
          wgmma_commit();
          const float a0 = __ldg(sa0p + kb), a1 = __ldg(sa1p + kb);
          const float b0 = __ldg(sb0p + kb), b1 = __ldg(sb1p + kb);
          wgmma_wait0();
          release_stage(empty + 8 * stage);
          const float s00 = a0 * b0, s10 = a1 * b0, s01 = a0 * b1, s11 = a1 * b1;
#pragma unroll
          for (int j = 0; j < ACC / 4; ++j) {
            const bool hi = j >= OUT_N / 8;  // the gated tile's up half
            main_acc[4 * j] += acc[4 * j] * (hi ? s01 : s00);
            main_acc[4 * j + 1] += acc[4 * j + 1] * (hi ? s01 : s00);
            main_acc[4 * j + 2] += acc[4 * j + 2] * (hi ? s11 : s10);
            main_acc[4 * j + 3] += acc[4 * j + 3] * (hi ? s11 : s10);
          }
          if (++stage == STAGES) {
            stage = 0;
            phase ^= 1;
          }
        }
#pragma unroll
        for (int i = 0; i < ACC; ++i) acc[i] = main_acc[i];
)";
}

std::string consumer_loop(bool kn, int halves, int kstep) {
  if (halves == 0) {
    return R"(        for (int kb = 0; kb < k_blocks; ++kb) {
          mbar_wait(full + 8 * stage, phase);
          release_stage(empty + 8 * stage);
          if (++stage == STAGES) {
            stage = 0;
            phase ^= 1;
          }
        }
)";
  }
  std::string s = R"(        int prev = -1;
        for (int kb = 0; kb < k_blocks; ++kb) {
          mbar_wait(full + 8 * stage, phase);
          wgmma_fence();
          const u32 a_base = sA + stage * A_STAGE + (PINGPONG ? 0 : cw * (64 * 128));
          const u32 b_base = sB + stage * B_STAGE;
#pragma unroll
          for (int kk = 0; kk < TILE_K / )" +
                  num(kstep) + R"(; ++kk) {
)";
  for (int h = 0; h < halves; ++h) {
    s += "            wgmma_tile(acc + " + num(h) + " * ACC, smem_desc(a_base + " + num(h * 8192) +
         " + kk * 32, 16, 1024),\n";
    s += kn ? "                       smem_desc(b_base + kk * 2048, 8192, 1024), (kb | kk) != 0);\n"
            : "                       smem_desc(b_base + kk * 32, 16, 1024), (kb | kk) != 0);\n";
  }
  s += R"(          }
          wgmma_commit();
          if (prev >= 0) {
            wgmma_wait1();
            release_stage(empty + 8 * prev);
          }
          prev = stage;
          if (++stage == STAGES) {
            stage = 0;
            phase ^= 1;
          }
        }
        wgmma_wait0();
        release_stage(empty + 8 * prev);
)";
  return s;
}

// Gated: the up value paired with v0, v1 sits OUT_N columns right of its gate in the tile.
std::string glu_partners(const Config& c, const std::string& ind) {
  if (c.act != Act::Swiglu) return "";
  return ind + "const float u0 = acc[hf * ACC + 4 * (j + OUT_N / 8) + 2 * h],\n" + ind +
         "            u1 = acc[hf * ACC + 4 * (j + OUT_N / 8) + 2 * h + 1];\n";
}

// The TMA kernel's epilogue with 16-byte stores: each quad of lanes transposes its packed
// pairs with three shuffles, so that each lane writes 8 consecutive columns of its row.
void tma_vec_store_epilogue(const Config& c, std::string& s) {
  s += R"(
      const int col_base = tile.n0 + (lane & 3) * 2;
      const int q = lane & 3;
      {
#pragma unroll
        for (int hf = 0; hf < HALVES; ++hf) {
          const int row_base = tile.row0 + (PINGPONG ? hf : cw) * 64 + warp * 16 + (lane >> 2);
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int row = row_base + 8 * h;
            const bool live = row < tile.row_end;
#pragma unroll
            for (int jq = 0; jq < OUT_N / 32; ++jq) {
              u32 w[4];
#pragma unroll
              for (int jj = 0; jj < 4; ++jj) {
                const int j = 4 * jq + jj;
                const int col = col_base + 8 * j;
                float v0 = acc[hf * ACC + 4 * j + 2 * h], v1 = acc[hf * ACC + 4 * j + 2 * h + 1];
)";
  s += glu_partners(c, "                ");
  s += "                if (live) {\n";
  s += scale_setup(c, "                  ");
  s += "                  if (col < NO) v0 = " + epilogue_call(c, "v0", "u0", "col") + ";\n";
  s += "                  if (col + 1 < NO) v1 = " + epilogue_call(c, "v1", "u1", "col + 1") +
       ";\n                }\n";
  s += R"(                w[jj] = pack_bf16x2(v0, v1);
              }
              // Quad transpose: lane q ends with columns 8 * (4 * jq + q) + 0..7 of its row,
              // x[r] coming from lane q ^ r (its pair at columns + 2 * (q ^ r)).
              u32 x[4];
#pragma unroll
              for (int r = 0; r < 4; ++r)
                x[r] = __shfl_xor_sync(0xffffffffu, sel4(w, q ^ r), r);
              u32 o[4];
#pragma unroll
              for (int k = 0; k < 4; ++k) o[k] = sel4(x, k ^ q);
              const int col = tile.n0 + 8 * (4 * jq + q);
              if (!live) continue;
              bf16_t* p = D + (long long)row * ldd + col;
              if (vec16 && col + 8 <= NO) {
                *(uint4*)p = make_uint4(o[0], o[1], o[2], o[3]);
              } else {
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                  if (col + 2 * k < NO) p[2 * k] = (bf16_t)(o[k] & 0xffffu);
                  if (col + 2 * k + 1 < NO) p[2 * k + 1] = (bf16_t)(o[k] >> 16);
                }
              }
            }
          }
        }
      }
    }
  }
}
)";
}

// Lines of `text` indented by `ind` (preprocessor lines stay at the margin).
std::string indent(const std::string& text, const std::string& ind) {
  std::string out;
  for (size_t at = 0; at < text.size();) {
    const size_t nl = text.find('\n', at);
    const size_t end = nl == std::string::npos ? text.size() : nl + 1;
    if (text[at] != '#' && text[at] != '\n') out += ind;
    out.append(text, at, end - at);
    at = end;
  }
  return out;
}

// The epilogue applied to the accumulator pair (v0, v1) of `row`, columns col and col + 1
// (j: the pair's 8-column group, h: its row of two, hf: the tile half).
std::string pair_values(const Config& c, const std::string& ind) {
  return scale_setup(c, ind) + ind +
         "float v0 = acc[hf * ACC + 4 * j + 2 * h], v1 = acc[hf * ACC + 4 * j + 2 * h + 1];\n" +
         glu_partners(c, ind) + ind + "if (col < NO) v0 = " + epilogue_call(c, "v0", "u0", "col") +
         ";\n" + ind + "if (col + 1 < NO) v1 = " + epilogue_call(c, "v1", "u1", "col + 1") +
         ";\n";
}

// One half's pairs stored from registers (4-byte stores), rows past the group's end left.
std::string pair_store_loop(const Config& c, const std::string& ind) {
  return indent(R"(#pragma unroll
for (int j = 0; j < OUT_N / 8; ++j) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = row_base + 8 * h, col = col_base + 8 * j;
    if (row >= tile.row_end) continue;
)",
                ind) +
         pair_values(c, ind + "    ") +
         indent(R"(    store_pair(D, ldd, row, col, NO, v0, v1, pairs);
  }
}
)",
                ind);
}

// The TMA kernel's epilogue with a store per pair of columns.
void tma_pair_store_epilogue(const Config& c, std::string& s) {
  s += R"(      const int col_base = tile.n0 + (lane & 3) * 2;
      {
#pragma unroll
        for (int hf = 0; hf < HALVES; ++hf) {
          const int row_base = tile.row0 + (PINGPONG ? hf : cw) * 64 + warp * 16 + (lane >> 2);
)";
  s += pair_store_loop(c, "          ");
  s += R"(        }
      }
    }
  }
}
)";
}

// The TMA kernel's epilogue through shared memory (tma_store): per 64-row half of the tile
// that holds rows of the group only, 64-column pieces are written to one of the consumer's
// two 8 KB buffers in the 128-byte swizzled layout (16-byte unit u of row r at unit
// u ^ (r & 7): a warp's 4-byte writes fall in 32 banks) and stored by the warpgroup's first
// thread with one bulk tensor copy, which reads the buffer while the consumers go on; before
// a buffer is written again, the copy that read it (two pieces earlier) has read it. Halves
// with rows past the group's end (they belong to the next group) are stored from registers.
void tma_async_store_epilogue(const Config& c, std::string& s) {
  s += R"(      const int col_base = tile.n0 + (lane & 3) * 2;
      const bool lead = (threadIdx.x & 127) == 0;
#pragma unroll
      for (int hf = 0; hf < HALVES; ++hf) {
        const int half_row0 = tile.row0 + (PINGPONG ? hf : cw) * 64;
        const int row_base = half_row0 + warp * 16 + (lane >> 2);
        if (half_row0 + 64 <= tile.row_end) {
#pragma unroll
          for (int q = 0; q < OUT_N / 64; ++q, ++pieces) {
            const u32 buf = stg + cw * 16384 + (pieces & 1u) * 8192;
            if (lead) bulk_wait_read1();
            wg_sync(1 + cw);
#pragma unroll
            for (int jj = 0; jj < 8; ++jj) {
              const int j = 8 * q + jj;
#pragma unroll
              for (int h = 0; h < 2; ++h) {
                const int row = row_base + 8 * h, col = col_base + 8 * j;
)";
  s += pair_values(c, "                ");
  s += R"(                const int r = row - half_row0;
                st_shared_u32(buf + r * 128 + ((jj ^ (r & 7)) << 4) + (lane & 3) * 4,
                              pack_bf16x2(v0, v1));
              }
            }
            fence_async_shared();
            wg_sync(1 + cw);
            if (lead) tma_store_2d(&tma_d, buf, tile.n0 + 64 * q, half_row0);
          }
          continue;
        }
)";
  s += pair_store_loop(c, "        ");
  s += R"(      }
    }
    // The buffers must stay until the last copies have read them.
    if ((threadIdx.x & 127) == 0) bulk_wait0();
  }
}
)";
}

// The consumer warpgroups of the TMA kernel: main loop (wgmma from the stages) and epilogue.
void tma_consumer_source(const Config& c, std::string& s) {
  const bool kn = c.b_order == BOrder::KN;
  s += R"(  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int cw = wg - 1;
    const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
    const bool pairs = ((ldd & 1) == 0) && ((((size_t)D) & 3) == 0);
    const bool vec16 = ((ldd & 7) == 0) && ((((size_t)D) & 15) == 0);
    (void)pairs;
    (void)vec16;
    // Cooperative: both consumers share each tile, 64 rows each (HALVES 1). Pingpong: each
    // consumer takes every other tile whole (HALVES 2), so one's epilogue runs while the
    // other's mainloop does; the producer's order of tiles staggers them.
    constexpr int HALVES = PINGPONG ? 2 : 1;
    float acc[HALVES * ACC];
#pragma unroll
    for (int i = 0; i < HALVES * ACC; ++i) acc[i] = 0.0f;
    int done = 0;  // k-blocks of earlier tiles of this CTA (both consumers')
    int ti = 0;
    int turns = 0;  // main loops this consumer ran
)";
  if (c.tma_store) s += "    u32 pieces = 0;  // 64-column pieces of D this consumer staged\n";
  s += R"(    for (int t = blockIdx.x; sched.next(t, tile); t += gridDim.x, ++ti) {
      if (PINGPONG && (ti & 1) != cw) {
        done += k_blocks;
        continue;
      }
      stage = done % STAGES;
      phase = (u32)(done / STAGES) & 1u;
      done += k_blocks;
      if (PINGPONG) {
        // Main loops take strict turns (consumer 0, 1, 0, ...): a consumer never waits on a
        // stage more than one phase ahead of it (an mbarrier's parity cannot tell phases two
        // apart), and one's epilogue runs during the other's main loop.
        if (cw == 1) {
          mbar_wait(order, (u32)turns & 1u);
        } else if (turns > 0) {
          mbar_wait(order + 8, (u32)(turns - 1) & 1u);
        }
      }
      // Cooperative: when rows 64..127 of the tile hold no row of the group (a group's last,
      // partial tile; every tile of a decode step), consumer 1 issues no wgmma and only
      // keeps the stages turning, so the tensor cores do the math of 64 rows, not 128 (on
      // H200 decode: 3.59 -> 3.88 TB/s of weights for 128 experts x 4 rows). Each case is a
      // main loop of its own: a wgmma on a conditional path inside one makes ptxas serialise
      // every wgmma of the kernel. Pingpong keeps one loop over both halves (the split loop
      // measured slower there: Mixtral w1/w3 skewed 3.93 ms against 3.68 ms).
)";
  if (c.pingpong) {
    s += consumer_loop(kn, 2, fp8(c) ? 32 : 16);
  } else if (c.tile_m == 64) {
    // One consumer warpgroup owns the 64-row tile whole.
    s += consumer_loop(kn, 1, 16);
  } else {
    s += "      if (cw == 0 || tile.row0 + 64 < tile.row_end) {\n" +
         (c.scale == Scale::Block128 ? consumer_loop_block()
                                     : consumer_loop(kn, 1, fp8(c) ? 32 : 16)) +
         "      } else {\n" + consumer_loop(kn, 0, 0) + "      }\n";
  }
  s += R"(
      if (PINGPONG) {
        mbar_arrive(order + 8 * cw);
        ++turns;
      }
)";
  if (c.tma_store) {
    tma_async_store_epilogue(c, s);
    return;
  }
  if (c.vec_store) {
    tma_vec_store_epilogue(c, s);
    return;
  }
  tma_pair_store_epilogue(c, s);
}

// Replaces the one occurrence of `from` in `s` (after `pos`) with `to`.
void replace_once(std::string& s, const std::string& from, const std::string& to,
                  size_t pos = 0) {
  const size_t at = s.find(from, pos);
  if (at == std::string::npos) fail(KJIT_ERROR_INTERNAL, "grouped render: no '" + from + "'");
  s.replace(at, from.size(), to);
}

void replace_all(std::string& s, const std::string& from, const std::string& to, size_t pos = 0) {
  for (size_t at = s.find(from, pos); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

// B's copies of one stage in a cluster of CM CTAs along M: each CTA copies its share (rank
// r: the r-th part of the tile's rows of B, or the gated tile's gate / up half) and
// multicasts it to every CTA of the cluster, at the same place of each one's stage.
std::string cluster_b_loads(const Config& c) {
  const bool kn = c.b_order == BOrder::KN, glu = c.act == Act::Swiglu;
  if (!kn && !glu)  // NK: rows of N of 128 bytes (TILE_K elements) each
    return "          tma_load_3d_mc(sB + stage * B_STAGE + cta_rank() * (TILE_N / CM) * 128,\n"
           "                         &tma_b, kb * TILE_K, tile.n0 + cta_rank() * (TILE_N / CM),\n"
           "                         tile.g, bar);\n";
  if (!kn)
    return "          tma_load_3d_mc(sB + stage * B_STAGE + cta_rank() * OUT_N * 128, &tma_b,\n"
           "                         kb * TILE_K, cta_rank() * NO + tile.n0, tile.g, bar);\n";
  if (!glu)  // KN: 64-column pieces of 8 KB
    return "          for (int c = cta_rank() * (TILE_N / 64 / CM);\n"
           "               c < (cta_rank() + 1) * (TILE_N / 64 / CM); ++c)\n"
           "            tma_load_3d_mc(sB + stage * B_STAGE + c * 8192, &tma_b, tile.n0 + 64 * c,\n"
           "                           kb * TILE_K, tile.g, bar);\n";
  return "          for (int c = 0; c < OUT_N / 64; ++c)\n"
         "            tma_load_3d_mc(sB + stage * B_STAGE + (cta_rank() * (OUT_N / 64) + c) * 8192,\n"
         "                           &tma_b, cta_rank() * NO + tile.n0 + 64 * c, kb * TILE_K,\n"
         "                           tile.g, bar);\n";
}

// The cluster form of a rendered TMA kernel (cluster_m 2): tiles numbered per cluster, a
// cluster tile CM x TILE_M rows, each CTA its TILE_M of them (the last CTA's may hold no row
// of the group: its consumers then only turn the stages); B copied once per cluster; the
// barriers initialised and the CTAs' exits synchronised cluster-wide.
void clusterise(const Config& c, std::string& s, size_t b_loads, size_t b_loads_end) {
  s.replace(b_loads, b_loads_end - b_loads, cluster_b_loads(c));
  replace_once(s, "TILE_M - 1) / TILE_M;", "CM * TILE_M - 1) / (CM * TILE_M);");
  replace_once(s, "(local % m_tiles) * TILE_M;", "(local % m_tiles) * (CM * TILE_M) + cta_rank() * TILE_M;");
  replace_once(s, "// One output tile", std::string(kClusterRank) + "\n// One output tile");
  replace_once(s, "__device__ __forceinline__ void tma_load_2d", std::string(kCluster) +
                                                                  "__device__ __forceinline__ void tma_load_2d");
  replace_all(s, "int t = blockIdx.x;", "int t = blockIdx.x / CM;");
  replace_all(s, "t += gridDim.x", "t += gridDim.x / CM");
  replace_once(s, "PINGPONG ? 4 : 8);", "8 * CM);");
  replace_once(s, "  __syncthreads();\n  const int NO", "  cluster_sync();\n  const int NO");
  replace_once(s, "if (cw == 0 || tile.row0 + 64 < tile.row_end)",
               "if ((cw == 0 && tile.row0 < tile.row_end) || tile.row0 + 64 < tile.row_end)");
  s.insert(s.size() - 2, "  cluster_sync();\n");
}

std::string tma_source(const Config& c) {
  const bool kn = c.b_order == BOrder::KN;
  const bool glu = c.act == Act::Swiglu;
  std::string s;
  s += "#define TILE_M " + num(c.tile_m) + "\n#define TILE_N " + num(c.tile_n) +
       "\n#define TILE_K " + num(c.tile_k) + "\n#define STAGES " + num(c.stages) +
       "\n#define A_STAGE " + num(long(a_stage_bytes(c))) + "u\n#define B_STAGE " +
       num(long(b_stage_bytes(c))) + "u\n#define ACC " + num(c.tile_n / 2) + "\n#define PINGPONG " +
       (c.pingpong ? "1" : "0") + "\n#define OUT_N " + num(out_tile_n(c)) + "\n";
  if (c.cluster_m > 1) s += "#define CM " + num(c.cluster_m) + "\n";
  if (c.scale == Scale::Block128) s += std::string("#define GLU ") + (glu ? "1" : "0") + "\n";
  s += kCommon;
  s += kHopper;
  if (c.cluster_m == 1) s += kRelease;
  if (c.b_evict_first) s += kEvictFirst;
  if (c.tma_store) s += kTmaStore;
  s += epilogue_source(c);
  s += wgmma_source(c.tile_n, kn, fp8(c));
  s += "extern \"C\" __global__ void __launch_bounds__(" + num(threads(c)) +
       ", 1) kjit_grouped_gemm(\n"
       "    const __grid_constant__ TmaDesc tma_a, const __grid_constant__ TmaDesc tma_b,\n    ";
  if (c.tma_store) s += "const __grid_constant__ TmaDesc tma_d,\n    ";
  s += params_common(c);
  s += ") {\n";
  s += R"(  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = (unsigned char*)(((size_t)smem_raw + 1023) & ~(size_t)1023);
  const u32 sA = smem_u32(smem);
  const u32 sB = sA + STAGES * A_STAGE;
  const u32 full = sB + STAGES * B_STAGE;  // STAGES mbarriers: a stage's data arrived
  const u32 empty = full + STAGES * 8;     // STAGES mbarriers: a stage's data was consumed
  const u32 order = empty + STAGES * 8;    // 2 mbarriers (pingpong): consumer c ended a main loop
  const int wg = threadIdx.x >> 7;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full + 8 * s, 1);
      mbar_init(empty + 8 * s, )" +
       std::string(c.tile_m == 64 ? "4" : "PINGPONG ? 4 : 8") +
       R"();  // the consumer warps of one stage
    }
    mbar_init(order, 128);
    mbar_init(order + 8, 128);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const int NO = )" +
       std::string(glu ? "N / 2" : "N") + R"(;  // columns of D
  const int n_tiles = (NO + OUT_N - 1) / OUT_N;
  const int k_blocks = (K + TILE_K - 1) / TILE_K;
  Sched sched;
  sched.init(offs, G, rows, n_tiles);
  Tile tile;
  int stage = 0;
  u32 phase = 0;
  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (threadIdx.x == 0) {
      asm volatile("prefetch.tensormap [%0];" ::"l"((u64)&tma_a) : "memory");
      asm volatile("prefetch.tensormap [%0];" ::"l"((u64)&tma_b) : "memory");
      for (int t = blockIdx.x; sched.next(t, tile); t += gridDim.x) {
        for (int kb = 0; kb < k_blocks; ++kb) {
          mbar_wait(empty + 8 * stage, phase ^ 1);
          const u32 bar = full + 8 * stage;
          mbar_expect_tx(bar, A_STAGE + B_STAGE);
          tma_load_2d(sA + stage * A_STAGE, &tma_a, kb * TILE_K, tile.row0, bar);
)";
  // Gated: the tile's first half holds the gate columns [n0, n0 + OUT_N), its second half
  // the up columns [NO + n0, NO + n0 + OUT_N) (past N: zero-filled by the copy).
  const size_t b_loads = s.size();
  if (kn && !glu) {
    s += "#pragma unroll\n"
         "          for (int c = 0; c < TILE_N / 64; ++c)\n"
         "            tma_load_3d(sB + stage * B_STAGE + c * 8192, &tma_b, tile.n0 + 64 * c,\n"
         "                        kb * TILE_K, tile.g, bar);\n";
  } else if (kn) {
    s += "#pragma unroll\n"
         "          for (int c = 0; c < OUT_N / 64; ++c) {\n"
         "            tma_load_3d(sB + stage * B_STAGE + c * 8192, &tma_b, tile.n0 + 64 * c,\n"
         "                        kb * TILE_K, tile.g, bar);\n"
         "            tma_load_3d(sB + stage * B_STAGE + (OUT_N / 64 + c) * 8192, &tma_b,\n"
         "                        NO + tile.n0 + 64 * c, kb * TILE_K, tile.g, bar);\n"
         "          }\n";
  } else if (!glu) {
    s +=
        "          tma_load_3d(sB + stage * B_STAGE, &tma_b, kb * TILE_K, tile.n0, tile.g, bar);\n";
  } else {
    s += "          tma_load_3d(sB + stage * B_STAGE, &tma_b, kb * TILE_K, tile.n0, tile.g, bar);\n"
         "          tma_load_3d(sB + stage * B_STAGE + OUT_N * 128, &tma_b, kb * TILE_K,\n"
         "                      NO + tile.n0, tile.g, bar);\n";
  }
  const size_t b_loads_end = s.size();
  if (c.b_evict_first) replace_all(s, "tma_load_3d(", "tma_load_3d_ef(", b_loads);
  s += R"(          if (++stage == STAGES) {
            stage = 0;
            phase ^= 1;
          }
        }
      }
    }
)";
  tma_consumer_source(c, s);
  if (c.cluster_m > 1) clusterise(c, s, b_loads, b_loads_end);  // first: it edits at b_loads
  if (c.tma_store)
    replace_once(s, "  const u32 full = sB + STAGES * B_STAGE;",
                 "  const u32 stg = sB + STAGES * B_STAGE;  // D's staging: 2 x 8 KB per consumer\n"
                 "  const u32 full = stg + " + num(long(staging_bytes(c))) + "u;");
  return s;
}

}  // namespace

std::string Config::key() const {
  std::string k = "grouped-v1 " + target + (path == Path::Tma ? " tma " : " simt ") + num(tile_m) +
                  "x" + num(tile_n) + "x" + num(tile_k) + " s" + num(stages) +
                  (pingpong ? " pp" : "") + (vec_store ? " st=v16" : "") + (tma_store ? " st=tma" : "") +
                  (b_evict_first ? " l2b=ef" : "") + " c" + num(cluster_m) + "x" + num(cluster_n) +
                  (b_order == BOrder::KN ? " b=kn" : " b=nk");
  if (in == DType::E4m3) k += " in=e4m3";
  if (scale == Scale::Row) k += " scale=row";
  if (scale == Scale::Block128) k += " scale=block128";
  k += " epi=alpha";
  if (has_c) k += "+beta";
  if (has_bias) k += "+bias";
  if (act != Act::None) k += std::string("+") + act_name(act);
  return k;
}

void validate(const Config& c) {
  auto bad = [&](const std::string& what) {
    fail(KJIT_ERROR_INVALID_ARGUMENT, "grouped GEMM configuration " + c.key() + ": " + what);
  };
  if ((c.cluster_m != 1 && c.cluster_m != 2) || c.cluster_n != 1)
    bad("the clusters offered are 1x1 and 2x1");
  if (c.cluster_m == 2 && (c.path != Path::Tma || c.pingpong || c.tile_m != 128 || fp8(c) ||
                           c.b_evict_first))
    bad("the 2x1 cluster is offered with the cooperative 128-row TMA tile for bf16, without "
        "the evict-first hint");
  if (int(c.act) < 0 || int(c.act) > 4) bad("unknown activation");
  if (c.in != DType::Bf16 && c.in != DType::E4m3) bad("unknown input type");
  if (c.scale != Scale::None && c.scale != Scale::Row && c.scale != Scale::Block128)
    bad("unknown scale form");
  if (c.scale == Scale::Block128 && c.path == Path::Tma && (c.pingpong || c.tile_n != 128))
    bad("block scales are offered with the cooperative 128x128x128 tile");
  if (c.scale != Scale::None && c.in != DType::E4m3) bad("scales are offered with fp8 inputs");
  if (c.vec_store && c.path != Path::Tma) bad("the 16-byte store epilogue is for the TMA kernel");
  if (c.b_evict_first && c.path != Path::Tma) bad("the L2 evict-first hint is for the TMA kernel");
  if (c.tma_store && c.path != Path::Tma) bad("the TMA store epilogue is for the TMA kernel");
  if (c.tma_store && c.vec_store) bad("one store epilogue: TMA stores or 16-byte stores");
  if (c.vec_store && c.scale == Scale::Block128)
    bad("the 16-byte store epilogue is not offered with block scales");
  if (c.path == Path::Tma) {
    if (c.target != "sm_90a") bad("the TMA kernel is for target sm_90a only");
    if (fp8(c)) {
      if (c.b_order != BOrder::NK)
        bad("the fp8 TMA kernel takes B order NK only (fp8 wgmma reads B K-major)");
      if (c.tile_m != 128 || c.tile_k != 128 || (c.tile_n != 128 && c.tile_n != 256))
        bad("the fp8 TMA kernel offers tiles 128x128x128 and 128x256x128");
    } else if ((c.tile_m != 128 && c.tile_m != 64) || c.tile_k != 64 ||
               (c.tile_n != 128 && c.tile_n != 256)) {
      bad("the TMA kernel offers tiles 128x128x64, 128x256x64, 64x128x64 and 64x256x64");
    }
    if (c.tile_m == 64 && (c.pingpong || fp8(c)))
      bad("the 64-row tile is offered with bf16 inputs and the cooperative schedule");
    if (c.pingpong && c.tile_n != 128) bad("the pingpong schedule offers the tile 128x128x64");
    if (c.stages < 2 || c.stages > 8) bad("stages must be 2..8");
    if (shared_bytes(c) > kMaxShared)
      bad(std::to_string(shared_bytes(c)) + " bytes of shared memory is more than the " +
          std::to_string(kMaxShared) + " a block may have");
  } else {
    if (c.tile_m != 64 || c.tile_n != 64 || c.tile_k != 16 || c.stages != 1)
      bad("the portable kernel offers the tile 64x64x16 with 1 stage");
    if (c.pingpong) bad("the portable kernel has no pingpong schedule");
    if (c.target.empty()) bad("no target");
  }
}

std::string render(const Config& c) {
  validate(c);
  return c.path == Path::Tma ? tma_source(c) : simt_source(c);
}

int threads(const Config& c) {
  if (c.path == Path::Tma) return c.tile_m == 64 ? 256 : 384;
  return 256;
}

size_t shared_bytes(const Config& c) {
  if (c.path != Path::Tma) return 0;
  // The stages, D's staging buffers, the stages' mbarriers and two more, and room to align
  // the start to 1024 bytes.
  return size_t(c.stages) * (a_stage_bytes(c) + b_stage_bytes(c)) + staging_bytes(c) +
         size_t(c.stages) * 16 + 16 + 1024;
}

int out_tile_n(const Config& c) {
  return c.path == Path::Tma && c.act == Act::Swiglu ? c.tile_n / 2 : c.tile_n;
}

Box b_box(const Config& c) {
  if (c.b_order == BOrder::KN) return {64, 64};
  // A 2x1 cluster copies half of the tile's rows of N per CTA (the gated tile: one half each).
  if (c.cluster_m > 1 && c.act != Act::Swiglu)
    return {unsigned(c.tile_k), unsigned(c.tile_n / c.cluster_m)};
  return {unsigned(c.tile_k), unsigned(out_tile_n(c))};
}

int in_bytes(const Config& c) {
  return c.in == DType::E4m3 ? 1 : 2;
}

std::vector<Param> params(const Config& c) {
  std::vector<Param> p;
  if (c.path == Path::Tma) {
    p.push_back({"tma_a", 128, 64});
    p.push_back({"tma_b", 128, 64});
    if (c.tma_store) p.push_back({"tma_d", 128, 64});
  }
  for (const char* name : {"A", "B", "offs", "D", "C", "bias"}) p.push_back({name, 8, 8});
  for (const char* name : {"lda", "ldb", "stride_b", "ldc", "ldd", "stride_bias"})
    p.push_back({name, 8, 8});
  for (const char* name : {"G", "rows", "N", "K", "alpha", "beta"}) p.push_back({name, 4, 4});
  if (c.scale != Scale::None)
    for (const char* name : {"scale_a", "scale_b"}) p.push_back({name, 8, 8});
  return p;
}

}  // namespace kjit::grouped
