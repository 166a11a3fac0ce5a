// GEMM benchmark: (1) TFLOP/s of kjit_gemm_run (heuristic plan, and autotuned) for bf16,
// f16 and tf32 at 4096^3 and 8192^3 against torch.matmul on the same GPU; (2) per-call
// host overhead for bf16 256^3 and 1024^3 against raw cublasLtMatmul with prebuilt
// descriptors and algorithm, and against a heuristic query on every call (no plan cache).
// Prints one table.
//
//   bench_gemm [--torch bench/torch_gemm.py] [--quick]
//
// --torch runs the script with python3 after kjit's own measurements and merges its
// numbers. --quick runs only the smaller sizes (for a smoke test).
//
// Throughput: one event pair per run, no synchronisation between runs, median of the runs;
// the heuristic and autotuned handles alternate over three rounds and each keeps its best
// median (torch_gemm.py times torch.matmul the same way). Overhead: host time per call to
// enqueue, in batches synchronised between batches so that the launch queue never fills.
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "blas/lt.h"
#include "cuda/context.h"
#include "cuda/driver.h"
#include "kjit/gemm.h"
#include "kjit/kjit.h"

namespace {

namespace cu = kjit::cuda;
using kjit::blas::lt;

void die(const char* what, kjit_status s) {
  std::fprintf(stderr, "%s failed: %s: %s\n", what, kjit_status_string(s), kjit_last_error());
  std::exit(1);
}

void lt_ok(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "%s failed: %s\n", what, kjit::blas::lt_status_text(s).c_str());
    std::exit(1);
  }
}

class DevMem {
 public:
  explicit DevMem(size_t bytes) { cu::check(cu::driver().cuMemAlloc(&p_, bytes), "cuMemAlloc"); }
  ~DevMem() { cu::driver().cuMemFree(p_); }
  DevMem(const DevMem&) = delete;
  DevMem& operator=(const DevMem&) = delete;
  void* get() const { return reinterpret_cast<void*>(p_); }

 private:
  CUdeviceptr p_ = 0;
};

uint16_t to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

uint16_t to_f16(float f) {  // values here are normal and small: no subnormal/overflow path
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u, abs = x & 0x7fffffffu;
  if (abs < 0x38800000u) return uint16_t(sign);
  return uint16_t(sign | ((abs + 0xfffu + ((abs >> 13) & 1u) - 0x38000000u) >> 13));
}

// Fills `elems` elements of `type` with N(0,1) values (a 1 Mi-value block, tiled).
void fill_normal(void* dst, size_t elems, int32_t type) {
  constexpr size_t kBlock = size_t(1) << 20;
  std::mt19937 rng(12345);
  std::normal_distribution<float> dist(0.f, 1.f);
  const size_t es = type == KJIT_GEMM_F32 ? 4 : 2;
  std::vector<uint8_t> block(kBlock * es);
  for (size_t i = 0; i < kBlock; ++i) {
    const float v = dist(rng);
    if (type == KJIT_GEMM_F32) std::memcpy(&block[i * 4], &v, 4);
    else {
      const uint16_t h = type == KJIT_GEMM_BF16 ? to_bf16(v) : to_f16(v);
      std::memcpy(&block[i * 2], &h, 2);
    }
  }
  const CUdeviceptr base = reinterpret_cast<CUdeviceptr>(dst);
  for (size_t off = 0; off < elems; off += kBlock) {
    const size_t n = std::min(kBlock, elems - off);
    cu::check(cu::driver().cuMemcpyHtoD(base + off * es, block.data(), n * es), "cuMemcpyHtoD");
  }
}

// Median of `reps` runs of `fn`, each between its own pair of events, after `warmup` runs.
double median_ms(const std::function<void()>& fn, CUstream stream, int warmup, int reps) {
  const auto& d = cu::driver();
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<CUevent> ev(size_t(reps) * 2);
  for (auto& e : ev) cu::check(d.cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
  for (int i = 0; i < reps; ++i) {
    cu::check(d.cuEventRecord(ev[size_t(2 * i)], stream), "cuEventRecord");
    fn();
    cu::check(d.cuEventRecord(ev[size_t(2 * i + 1)], stream), "cuEventRecord");
  }
  cu::check(d.cuStreamSynchronize(stream), "cuStreamSynchronize");
  std::vector<float> ms(static_cast<size_t>(reps));
  for (int i = 0; i < reps; ++i)
    cu::check(d.cuEventElapsedTime(&ms[size_t(i)], ev[size_t(2 * i)], ev[size_t(2 * i + 1)]),
              "cuEventElapsedTime");
  for (auto e : ev) d.cuEventDestroy(e);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Host time per call to enqueue `fn`: batches of `batch` calls, synchronised between
// batches so that the launch queue never fills; median of 5 rounds.
double enqueue_us(const std::function<void()>& fn, CUstream stream, int calls, int batch) {
  const auto& d = cu::driver();
  for (int i = 0; i < batch; ++i) fn();
  cu::check(d.cuStreamSynchronize(stream), "cuStreamSynchronize");
  std::vector<double> rounds;
  for (int round = 0; round < 5; ++round) {
    double total = 0;
    for (int done = 0; done < calls; done += batch) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < batch; ++i) fn();
      const auto t1 = std::chrono::steady_clock::now();
      total += std::chrono::duration<double, std::micro>(t1 - t0).count();
      cu::check(d.cuStreamSynchronize(stream), "cuStreamSynchronize");
    }
    rounds.push_back(total / calls);
  }
  std::sort(rounds.begin(), rounds.end());
  return rounds[rounds.size() / 2];
}

kjit_gemm_desc square_desc(int64_t n, int32_t type, int32_t compute) {
  kjit_gemm_desc d = KJIT_GEMM_DESC_INIT;
  d.order = KJIT_GEMM_ROW_MAJOR;
  d.m = d.n = d.k = n;
  d.a_type = type;
  d.compute = compute;
  return d;
}

struct Row {
  std::string name;
  double kjit = NAN, tuned = NAN, torch = NAN, raw = NAN, heuristic = NAN;
  bool overhead = false;
};

std::string fmt(double v, int decimals = 1) {
  if (std::isnan(v)) return "";
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", decimals, v);
  return b;
}

// ---- raw cuBLASLt baselines (bf16, column-major n x n x n; the same call kjit makes) ----

struct RawLt {
  cublasLtHandle_t h = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t l = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t ws_size = 0;
  int64_t n = 0;
  explicit RawLt(int64_t size) : n(size) {
    const auto& L = lt();
    lt_ok(L.cublasLtCreate(&h), "cublasLtCreate");
    lt_ok(L.cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
    lt_ok(L.cublasLtMatrixLayoutCreate(&l, CUDA_R_16BF, uint64_t(n), uint64_t(n), n), "layout");
    const auto r = query(h, op, l);
    algo = r.algo;
    ws_size = r.workspaceSize;
  }
  ~RawLt() {
    const auto& L = lt();
    L.cublasLtMatrixLayoutDestroy(l);
    L.cublasLtMatmulDescDestroy(op);
    L.cublasLtDestroy(h);
  }
  RawLt(const RawLt&) = delete;
  RawLt& operator=(const RawLt&) = delete;
  static cublasLtMatmulHeuristicResult_t query(cublasLtHandle_t h, cublasLtMatmulDesc_t op,
                                               cublasLtMatrixLayout_t l) {
    const auto& L = lt();
    cublasLtMatmulPreference_t pref = nullptr;
    lt_ok(L.cublasLtMatmulPreferenceCreate(&pref), "pref");
    const uint64_t cap = 32ull << 20;
    lt_ok(L.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                 &cap, sizeof cap),
          "pref workspace");
    cublasLtMatmulHeuristicResult_t r{};
    int got = 0;
    lt_ok(L.cublasLtMatmulAlgoGetHeuristic(h, op, l, l, l, l, pref, 1, &r, &got), "heuristic");
    L.cublasLtMatmulPreferenceDestroy(pref);
    if (got == 0) {
      std::fprintf(stderr, "no cuBLASLt algorithm\n");
      std::exit(1);
    }
    return r;
  }
};

}  // namespace

int main(int argc, char** argv) {
  const char* torch_script = nullptr;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--torch") && i + 1 < argc) torch_script = argv[++i];
    else if (!std::strcmp(argv[i], "--quick")) quick = true;
    else {
      std::fprintf(stderr, "usage: %s [--torch torch_gemm.py] [--quick]\n", argv[0]);
      return 2;
    }
  }
  int count = 0;
  if (kjit_device_count(&count) != KJIT_OK || count == 0) {
    std::fprintf(stderr, "no GPU: %s\n", kjit_last_error());
    return 1;
  }
  const auto& d = cu::driver();
  cu::check(d.cuCtxSetCurrent(cu::primary_context(0)), "cuCtxSetCurrent");
  CUstream stream = nullptr;
  cu::check(d.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  char name[256] = {0}, arch[32] = {0};
  kjit_device_name(0, name, sizeof name);
  kjit_device_arch(0, arch, sizeof arch);
  int driver_version = 0;
  kjit_driver_version(&driver_version);
  size_t lt_version = 0;
  if (kjit_status s = kjit_cublaslt_version(&lt_version); s != KJIT_OK) die("kjit_cublaslt_version", s);

  kjit_gemm* g = nullptr;
  if (kjit_status s = kjit_gemm_create(nullptr, 0, nullptr, &g); s != KJIT_OK) die("kjit_gemm_create", s);
  kjit_gemm_options to = KJIT_GEMM_OPTIONS_INIT;
  to.autotune = 1;
  kjit_gemm* tuned = nullptr;
  if (kjit_status s = kjit_gemm_create(nullptr, 0, &to, &tuned); s != KJIT_OK) die("kjit_gemm_create", s);

  std::vector<Row> rows;
  std::map<std::string, size_t> index;

  // (1) throughput
  struct TypeCase {
    const char* name;
    int32_t type, compute;
  } types[] = {{"bf16", KJIT_GEMM_BF16, KJIT_GEMM_COMPUTE_F32},
               {"f16", KJIT_GEMM_F16, KJIT_GEMM_COMPUTE_F32},
               {"tf32", KJIT_GEMM_F32, KJIT_GEMM_COMPUTE_TF32}};
  std::vector<int64_t> sizes = {4096, 8192};
  if (quick) sizes = {1024};
  for (const auto& t : types) {
    for (int64_t n : sizes) {
      const size_t es = t.type == KJIT_GEMM_F32 ? 4 : 2;
      const size_t elems = size_t(n) * size_t(n);
      DevMem A(elems * es), B(elems * es), D(elems * es);
      fill_normal(A.get(), elems, t.type);
      fill_normal(B.get(), elems, t.type);
      const kjit_gemm_desc desc = square_desc(n, t.type, t.compute);
      const int reps = n >= 8192 ? 15 : 30;
      const double flop = 2.0 * double(n) * double(n) * double(n);
      Row r;
      r.name = std::string(t.name) + " " + std::to_string(n) + "^3 TFLOP/s";
      const auto runner = [&](kjit_gemm* h) {
        return [&desc, &A, &B, &D, stream, h] {
          const kjit_status s = kjit_gemm_run(h, &desc, A.get(), B.get(), nullptr, D.get(),
                                              nullptr, stream);
          if (s != KJIT_OK) die("kjit_gemm_run", s);
        };
      };
      // Plan both first (the autotuned handle times its candidates here), then alternate
      // the two in three rounds and keep each one's best median, so that neither is
      // measured only on a GPU already hot from the other.
      runner(g)();
      runner(tuned)();
      cu::check(d.cuStreamSynchronize(stream), "cuStreamSynchronize");
      double best_g = INFINITY, best_t = INFINITY;
      for (int round = 0; round < 3; ++round) {
        best_g = std::min(best_g, median_ms(runner(g), stream, 3, reps));
        best_t = std::min(best_t, median_ms(runner(tuned), stream, 3, reps));
      }
      r.kjit = flop / (best_g * 1e-3) / 1e12;
      r.tuned = flop / (best_t * 1e-3) / 1e12;
      index[std::string(t.name) + " " + std::to_string(n)] = rows.size();
      rows.push_back(r);
    }
  }

  // (2) per-call overhead, bf16
  for (int64_t n : {int64_t(256), int64_t(1024)}) {
    const size_t elems = size_t(n) * size_t(n);
    DevMem A(elems * 2), B(elems * 2), D(elems * 2);
    fill_normal(A.get(), elems, KJIT_GEMM_BF16);
    fill_normal(B.get(), elems, KJIT_GEMM_BF16);
    const kjit_gemm_desc desc = square_desc(n, KJIT_GEMM_BF16, KJIT_GEMM_COMPUTE_F32);
    RawLt raw(n);
    DevMem ws(32u << 20);  // the cap both baselines and kjit use
    const float alpha = 1.f, beta = 0.f;
    const auto& L = lt();
    const int calls = 2000, batch = 100;
    Row r;
    r.overhead = true;
    r.name = "bf16 " + std::to_string(n) + "^3 us/call";
    r.kjit = enqueue_us(
        [&] {
          const kjit_status s = kjit_gemm_run(g, &desc, A.get(), B.get(), nullptr, D.get(),
                                              nullptr, stream);
          if (s != KJIT_OK) die("kjit_gemm_run", s);
        },
        stream, calls, batch);
    // Row-major D = A*B is column-major D^T = B^T A^T: B first, as kjit passes it.
    r.raw = enqueue_us(
        [&] {
          lt_ok(L.cublasLtMatmul(raw.h, raw.op, &alpha, B.get(), raw.l, A.get(), raw.l, &beta,
                                 D.get(), raw.l, D.get(), raw.l, &raw.algo, ws.get(), raw.ws_size,
                                 reinterpret_cast<cudaStream_t>(stream)),
                "cublasLtMatmul");
        },
        stream, calls, batch);
    r.heuristic = enqueue_us(
        [&] {
          cublasLtMatmulDesc_t op = nullptr;
          cublasLtMatrixLayout_t l = nullptr;
          lt_ok(L.cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
          lt_ok(L.cublasLtMatrixLayoutCreate(&l, CUDA_R_16BF, uint64_t(n), uint64_t(n), n), "layout");
          const cublasLtMatmulHeuristicResult_t h = RawLt::query(raw.h, op, l);
          lt_ok(L.cublasLtMatmul(raw.h, op, &alpha, B.get(), l, A.get(), l, &beta, D.get(), l,
                                 D.get(), l, &h.algo, ws.get(), h.workspaceSize,
                                 reinterpret_cast<cudaStream_t>(stream)),
                "cublasLtMatmul");
          L.cublasLtMatrixLayoutDestroy(l);
          L.cublasLtMatmulDescDestroy(op);
        },
        stream, 500, 50);
    rows.push_back(r);
  }
  kjit_gemm_stats st{};
  st.struct_size = sizeof st;
  kjit_gemm_stats_get(g, &st);
  kjit_gemm_stats tst{};
  tst.struct_size = sizeof tst;
  kjit_gemm_stats_get(tuned, &tst);
  kjit_gemm_destroy(tuned);
  kjit_gemm_destroy(g);
  d.cuStreamDestroy(stream);

  // torch.matmul, in its own process after ours (the GPU is otherwise idle).
  std::string torch_note;
  if (torch_script) {
    const std::string cmd = std::string("python3 ") + torch_script;
    if (FILE* p = popen(cmd.c_str(), "r")) {
      char line[256];
      while (std::fgets(line, sizeof line, p)) {
        char dt[32];
        long n = 0;
        double tf = 0;
        if (std::sscanf(line, "%31s %ld %lf", dt, &n, &tf) == 3) {
          auto it = index.find(std::string(dt) + " " + std::to_string(n));
          if (it != index.end()) rows[it->second].torch = tf;
        }
      }
      const int rc = pclose(p);
      if (rc != 0) torch_note = " (torch script exited with " + std::to_string(rc) + ")";
    }
  }

  std::printf("\nGEMM on %s (%s), driver %d, cuBLASLt %zu%s\n\n", name, arch, driver_version,
              lt_version, torch_note.c_str());
  std::printf("| case | kjit | kjit autotuned | torch.matmul | raw cublasLtMatmul | heuristic every call | ratio |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: | --- |\n");
  for (const Row& r : rows) {
    std::string ratio;
    if (!r.overhead && !std::isnan(r.torch))
      ratio = "kjit/torch " + fmt(r.kjit / r.torch, 3) + ", tuned/torch " +
              fmt(r.tuned / r.torch, 3);
    if (r.overhead)
      ratio = "kjit/raw " + fmt(r.kjit / r.raw, 2) + ", heuristic/kjit " +
              fmt(r.heuristic / r.kjit, 1);
    const int f = r.overhead ? 2 : 1;
    std::printf("| %s | %s | %s | %s | %s | %s | %s |\n", r.name.c_str(), fmt(r.kjit, f).c_str(),
                fmt(r.tuned, f).c_str(), fmt(r.torch, f).c_str(), fmt(r.raw, f).c_str(),
                fmt(r.heuristic, f).c_str(), ratio.c_str());
  }
  std::printf("\nkjit handle: %llu runs, %llu plan misses, %llu memory hits, %llu heuristic queries; "
              "autotuned handle: %llu autotunes\n",
              static_cast<unsigned long long>(st.runs), static_cast<unsigned long long>(st.misses),
              static_cast<unsigned long long>(st.memory_hits),
              static_cast<unsigned long long>(st.heuristic_queries),
              static_cast<unsigned long long>(tst.autotunes));
  return 0;
}
