// The CUTLASS GEMM example (docs/cutlass.md): compiles gemm_kernel.cu through kjit (a miss
// the first time, a disk hit in every later process), checks the host's GemmKernel::Params
// against the compiled kernel, and, on a GPU, launches it and compares D with cuBLASLt's
// (kjit_gemm_run).
//   cutlass_gemm CUTLASS_INCLUDE [M N K]      (default 4096 4096 4096)
// Without a GPU it compiles for sm_90a and stops after the check.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <kjit/kjit.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gemm_host.h"

#ifndef EXAMPLE_DIR
#define EXAMPLE_DIR "."
#endif

namespace {

int fail(const char* what) {
  std::fprintf(stderr, "cutlass_gemm: %s: %s\n", what, kjit_last_error());
  return 1;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 5) {
    std::fprintf(stderr, "usage: cutlass_gemm CUTLASS_INCLUDE [M N K]\n");
    return 2;
  }
  const std::string cutlass = argv[1];
  const int m = argc == 5 ? std::atoi(argv[2]) : 4096;
  const int n = argc == 5 ? std::atoi(argv[3]) : 4096;
  const int k = argc == 5 ? std::atoi(argv[4]) : 4096;

  // The options: CUTLASS's include directory, this directory (gemm_config.hpp), the
  // built-ins CUTLASS uses without including them, and the TMA descriptor stand-in aligned
  // as the host's CUtensorMap (an in-memory header of the same name wins over the file).
  kjit_options* opts = nullptr;
  kjit_options_create(&opts);
  kjit_options_add_include_path(opts, cutlass.c_str());
  kjit_options_add_include_path(opts, EXAMPLE_DIR);
  for (size_t i = 0; i < gemm_host_option_count(); ++i) kjit_options_add(opts, gemm_host_option(i));
  kjit_options_add(opts, "--pre-include=type_traits");
  kjit_options_add(opts, "--pre-include=algorithm");
  const char* why = nullptr;
  char* tma = gemm_host_tma_header(cutlass.c_str(), &why);
  if (!tma) {
    std::fprintf(stderr, "cutlass_gemm: %s\n", why);
    return 1;
  }
  kjit_options_add_header(opts, "cute/arch/copy_sm90_desc.hpp", tma);
  std::free(tma);
  kjit_options_set_name(opts, EXAMPLE_DIR "/gemm_kernel.cu");
  const std::string source = read_text(EXAMPLE_DIR "/gemm_kernel.cu");

  // Compile (or hit), and check Params against the compiled kernel: no GPU needed.
  // The default disk cache ($KJIT_CACHE_DIR, else ~/.cache/kjit), shared by every process.
  kjit_cache* cache = nullptr;
  if (kjit_cache_open(nullptr, &cache) != KJIT_OK) return fail("cache");
  kjit_compiler* compiler = nullptr;
  if (kjit_compiler_create(cache, 1, &compiler) != KJIT_OK) return fail("compiler");
  kjit_binary* bin = nullptr;
  if (kjit_compile(compiler, source.c_str(), opts, &bin) != KJIT_OK) {
    std::fprintf(stderr, "%s\n", bin ? kjit_binary_log(bin) : "");
    return fail("compile");
  }
  const int tier = kjit_binary_tier(bin);
  std::printf("compile: %s, NVRTC took %.1f s when it compiled [key %.16s]\n",
              tier == KJIT_TIER_COMPILED ? "miss (compiled)" : "hit",
              kjit_binary_compile_ms(bin) / 1000.0, kjit_binary_key(bin));
  for (size_t i = 0; i < kjit_binary_advisory_count(bin); ++i) {
    std::printf("advisory: %s\n", kjit_binary_advisory(bin, i));
  }
  size_t size = 0, align = 0;
  if (kjit_binary_param_info(bin, gemm_host_kernel_name(), 0, &size, &align) != KJIT_OK) {
    return fail("parameter layout");
  }
  std::printf("Params: host %zu bytes aligned to %zu, kernel %zu aligned to %zu\n",
              gemm_host_params_size(), gemm_host_params_align(), size, align);
  if (size != gemm_host_params_size() || align != gemm_host_params_align()) {
    std::fprintf(stderr, "cutlass_gemm: the host and the kernel lay Params out differently\n");
    return 1;
  }
  int devices = 0;
  if (kjit_device_count(&devices) != KJIT_OK || devices == 0) {
    std::printf("no GPU: compiled and checked only\n");
    return 0;
  }

  // On the GPU: the kernel (a hit now), Params for the problem, the launch, cuBLASLt.
  kjit_kernel* kernel = nullptr;
  if (kjit_kernel_from_binary(bin, gemm_host_kernel_name(), 0, 0, &kernel) != KJIT_OK) {
    return fail("load");
  }
  std::vector<__nv_bfloat16> ha(size_t(m) * k), hb(size_t(k) * n);
  for (size_t i = 0; i < ha.size(); ++i) ha[i] = __float2bfloat16(float(int(i % 7) - 3) / 4);
  for (size_t i = 0; i < hb.size(); ++i) hb[i] = __float2bfloat16(float(int(i % 5) - 2) / 4);
  void *a, *b, *d, *ref, *workspace = nullptr;
  cudaMalloc(&a, ha.size() * 2);
  cudaMalloc(&b, hb.size() * 2);
  cudaMalloc(&d, size_t(m) * n * 2);
  cudaMalloc(&ref, size_t(m) * n * 2);
  cudaMemcpy(a, ha.data(), ha.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(b, hb.data(), hb.size() * 2, cudaMemcpyHostToDevice);
  std::vector<unsigned char> params(gemm_host_params_size() + gemm_host_params_align());
  void* p = params.data() + (gemm_host_params_align() -
                             reinterpret_cast<uintptr_t>(params.data()) % gemm_host_params_align());
  gemm_host_launch launch{};
  if (gemm_host_make_params(m, n, k, 1.f, 0.f, a, b, nullptr, d, 0, nullptr, p, &launch, &why) ||
      (launch.workspace_bytes && (cudaMalloc(&workspace, launch.workspace_bytes),
                                  gemm_host_make_params(m, n, k, 1.f, 0.f, a, b, nullptr, d, 0,
                                                        workspace, p, &launch, &why)))) {
    std::fprintf(stderr, "cutlass_gemm: %s\n", why);
    return 1;
  }
  kjit_launch_config cfg = KJIT_LAUNCH_CONFIG_INIT;
  for (int i = 0; i < 3; ++i) {
    cfg.grid[i] = launch.grid[i];
    cfg.block[i] = launch.block[i];
    cfg.cluster[i] = launch.cluster[i];
  }
  cfg.shared_bytes = launch.shared_bytes;  // above 48 KiB: raised by the launch
  if (kjit_kernel_launch_params(kernel, &cfg, p, gemm_host_params_size(),
                                gemm_host_params_align()) != KJIT_OK) {
    return fail("launch");
  }
  if (cudaDeviceSynchronize() != cudaSuccess) return fail("kernel");

  kjit_gemm* gemm = nullptr;
  kjit_gemm_create(nullptr, 0, nullptr, &gemm);
  kjit_gemm_desc desc;
  kjit_gemm_desc_init(&desc);
  desc.order = KJIT_GEMM_ROW_MAJOR;
  desc.trans_b = KJIT_GEMM_OP_T;  // B is K x N column-major: N x K row-major
  desc.m = m;
  desc.n = n;
  desc.k = k;
  desc.a_type = KJIT_GEMM_BF16;
  desc.compute = KJIT_GEMM_COMPUTE_F32;
  if (kjit_gemm_run(gemm, &desc, a, b, nullptr, ref, nullptr, nullptr) != KJIT_OK) {
    return fail("cuBLASLt");
  }
  cudaDeviceSynchronize();
  std::vector<__nv_bfloat16> hd(size_t(m) * n), hr(size_t(m) * n);
  cudaMemcpy(hd.data(), d, hd.size() * 2, cudaMemcpyDeviceToHost);
  cudaMemcpy(hr.data(), ref, hr.size() * 2, cudaMemcpyDeviceToHost);
  size_t differ = 0;
  double worst = 0;
  for (size_t i = 0; i < hd.size(); ++i) {
    const double x = __bfloat162float(hd[i]), y = __bfloat162float(hr[i]);
    differ += x != y;
    worst = std::fmax(worst, std::fabs(x - y) / std::fmax(1.0, std::fabs(y)));
  }
  std::printf("%dx%dx%d: %zu of %zu elements differ from cuBLASLt, worst relative %.3g\n", m, n, k,
              differ, hd.size(), worst);

  // Side by side with cuBLASLt: rounds interleaved (the GPU's clocks drift within a run),
  // each round 20 launches of one after 20 of the other, timed with events; the medians.
  cudaEvent_t t0, t1;
  cudaEventCreate(&t0);
  cudaEventCreate(&t1);
  auto time_ms = [&](auto&& run) {
    cudaEventRecord(t0);
    for (int i = 0; i < 20; ++i) run();
    cudaEventRecord(t1);
    cudaEventSynchronize(t1);
    float ms = 0;
    cudaEventElapsedTime(&ms, t0, t1);
    return double(ms) / 20;
  };
  auto ours = [&] { kjit_kernel_launch_params(kernel, &cfg, p, gemm_host_params_size(),
                                              gemm_host_params_align()); };
  auto lt = [&] { kjit_gemm_run(gemm, &desc, a, b, nullptr, ref, nullptr, nullptr); };
  time_ms(ours);  // warm-up
  time_ms(lt);
  std::vector<double> t_ours, t_lt;
  for (int round = 0; round < 7; ++round) {
    if (round % 2) {
      t_lt.push_back(time_ms(lt));
      t_ours.push_back(time_ms(ours));
    } else {
      t_ours.push_back(time_ms(ours));
      t_lt.push_back(time_ms(lt));
    }
  }
  std::sort(t_ours.begin(), t_ours.end());
  std::sort(t_lt.begin(), t_lt.end());
  const double flop = 2.0 * m * n * k;
  const double tf_ours = flop / (t_ours[3] * 1e-3) / 1e12, tf_lt = flop / (t_lt[3] * 1e-3) / 1e12;
  std::printf("%dx%dx%d: CUTLASS through kjit %.1f TFLOPS, cuBLASLt %.1f TFLOPS (%.3fx), "
              "medians of 7 interleaved rounds\n",
              m, n, k, tf_ours, tf_lt, tf_ours / tf_lt);
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  kjit_gemm_destroy(gemm);
  kjit_kernel_destroy(kernel);
  kjit_binary_destroy(bin);
  kjit_compiler_destroy(compiler);
  kjit_cache_close(cache);
  kjit_options_destroy(opts);
  return worst < 1e-2 ? 0 : 1;
}
