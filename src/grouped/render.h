// Grouped GEMM kernels rendered as CUDA source per configuration. Pure text: no driver, no
// compiler. The handle (grouped.h) compiles what this renders through the Compiler.
//
// Two kernel families share one scheduler and one epilogue:
//  - Tma (target sm_90a): persistent, warp-specialised. Warpgroup 0 is the producer (one
//    thread issues TMA bulk tensor copies of A and B tiles into a ring of shared-memory
//    stages, each guarded by a "full" and an "empty" mbarrier); warpgroups 1..2 are
//    consumers, each owning 64 rows of the 128-row tile and issuing wgmma from shared memory
//    (128-byte swizzle) into fp32 registers, then the epilogue straight from registers.
//    In the pingpong schedule each consumer owns every other tile whole instead. In the
//    cooperative one, the consumer of a 64-row half that holds no row of its group (a
//    group's last, partial tile; decode tiles) issues no wgmma.
//    The 64-row tile (bf16, cooperative; for decode, groups of fewer than 64 rows) has one
//    consumer warpgroup (256 threads) and loads 64 rows of A per stage, not 128.
//  - Simt (any target from sm_70): a plain tiled kernel (64x64 tiles, fp32 FMA), for
//    devices without wgmma and for shapes the TMA kernel cannot take.
// Both walk tiles persistently: tile t of the launch belongs to the group whose tiles
// (ceil(rows_g / tile_m) x ceil(N / tile_n), rows fastest) contain it, found from the device
// offsets as the CTA advances.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace kjit::grouped {

enum class Path { Tma = 0, Simt = 1 };
enum class BOrder { KN = 0, NK = 1 };  // as kjit_grouped_b_order
// As kjit_grouped_activation. Swiglu is gated: B's first N/2 columns are the gate, the next
// N/2 the up projection, and D = silu(gate) * up has N/2 columns.
enum class Act { None = 0, Relu = 1, Gelu = 2, Silu = 3, Swiglu = 4 };
// Input data type of A and B (D is bf16 either way, the accumulator fp32).
enum class DType { Bf16 = 0, E4m3 = 1 };
// Scales (kjit_grouped_scale_mode). Row: D = epilogue(scale_a[r] * scale_b[g, n] *
// (A B_g)[r, n]), one fp32 per row of A and per column of each B_g, applied in the epilogue.
// Block128 (DeepSeek's form): scale_a[r, kb] per row and 128-wide K block (rows x KB, KB =
// ceil(K / 128)), scale_b[g, nb, kb] per 128 x 128 block of each B_g (G x NB x KB), applied
// to each K block's partial product as it is promoted into an fp32 main accumulator.
enum class Scale { None = 0, Row = 1, Block128 = 2 };

struct Config {
  Path path = Path::Simt;
  int tile_m = 64, tile_n = 64, tile_k = 16;
  int stages = 1;
  int cluster_m = 1, cluster_n = 1;  // thread-block cluster; only 1x1 is implemented
  // Tma only. False (cooperative): both consumer warpgroups share each tile, 64 rows each.
  // True (pingpong, tile 128x128): each consumer takes every other tile whole, so one's
  // epilogue overlaps the other's mainloop.
  bool pingpong = false;
  // Tma only. True: the epilogue gathers each row's 8 consecutive columns into one lane with
  // warp shuffles (a 4x4 transpose inside each quad of lanes) and writes them as one 16-byte
  // store (a warp's store covers 64 contiguous bytes of 8 rows), where D's pitch and base
  // allow it; false: each lane writes its column pairs (4-byte stores). Key: " st=v16".
  bool vec_store = false;
  // Tma only. True: each consumer warpgroup writes its 64 rows of the tile into shared memory
  // (64-column pieces in the 128-byte swizzled layout, two buffers per warpgroup) and one
  // thread stores each piece with a TMA bulk tensor copy (a third tensor map, D's), which
  // runs while the consumers go on to the next tile; a half that is not all rows of the
  // group (its last tile) is stored from registers. Needs D 16-byte aligned with a pitch
  // of a multiple of 8 elements. Key: " st=tma".
  bool tma_store = false;
  // Tma only. True: B's TMA copies carry an L2 evict-first cache policy (the weights are
  // streamed once per call; A and D keep the cache). Key: " l2b=ef".
  bool b_evict_first = false;
  BOrder b_order = BOrder::KN;
  bool has_c = false;     // beta * C piece
  bool has_bias = false;  // per-group bias piece
  Act act = Act::None;
  // fp8 e4m3 inputs: the TMA kernel takes B order NK only (fp8 wgmma reads both operands
  // K-major) with the tile 128x{128,256}x128 (128 bytes of K per row, as bf16's 64);
  // the portable kernel takes both orders.
  DType in = DType::Bf16;
  Scale scale = Scale::None;
  std::string target;  // "sm_90a" for Tma; the device's "sm_XY" for Simt

  bool operator==(const Config& o) const { return key() == o.key(); }
  // The plan key: every field, e.g. "grouped-v1 sm_90a tma 128x256x64 s4 c1x1 b=nk
  // epi=alpha+bias+silu" (fp8: "... b=nk in=e4m3 scale=row epi=..."). Equal keys render
  // equal sources.
  std::string key() const;
};

// Shared memory a block may have on sm_90 (227 KiB, the opt-in limit).
constexpr size_t kMaxShared = 232448;

// The entry point's name in every rendered source.
constexpr const char* kKernelName = "kjit_grouped_gemm";

// Throws kjit::Error(KJIT_ERROR_INVALID_ARGUMENT) naming what is wrong with `c` (tile shape
// not offered, stages out of range, a cluster other than 1x1, a Tma config not for sm_90a).
void validate(const Config& c);

// CUDA source of `c` (validated first). Holds no preprocessor directive that reads files,
// so NVRTC opens nothing and the cache key is the text and options alone.
std::string render(const Config& c);

int threads(const Config& c);          // threads per block
size_t shared_bytes(const Config& c);  // dynamic shared memory per block

// The kernel's parameters as (name, size in bytes, alignment), in order. The TMA kernel
// starts with the 128-byte tensor maps (A, then B, then D's with tma_store); a scaled
// configuration ends with the scale_a and scale_b pointers.
struct Param {
  const char* name;
  size_t size;
  size_t align;
};
std::vector<Param> params(const Config& c);

// Columns of D one tile covers: tile_n, or tile_n / 2 with the gated (SwiGLU) epilogue,
// whose tile holds tile_n / 2 gate columns and the tile_n / 2 up columns that pair with them.
int out_tile_n(const Config& c);

// The box of B's TMA tensor map (dims K, N, G for order NK; N, K, G for KN) along its first
// two dimensions: {64, 64} for KN (the tile is loaded in 64-column pieces), {tile_k, rows
// of N per copy} for NK (tile_n, or tile_n / 2 for the two halves of the gated epilogue).
struct Box {
  unsigned inner, outer;
};
Box b_box(const Config& c);

// Bytes per element of A and B: 2 (bf16) or 1 (e4m3).
int in_bytes(const Config& c);

}  // namespace kjit::grouped
