// The host half of the example (gemm_host.h), compiled by nvcc with the same
// gemm_config.hpp the kernel is compiled from through kjit.
#include <cuda.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "gemm_config.hpp"
#include "gemm_host.h"

using kjit_example::GemmKernel;

namespace {

const char* const kOptions[] = {
    "-std=c++17",       // CUTLASS 3.x needs C++17
    "-default-device",  // CUTLASS's unannotated helpers are device code in the kernel
    "-DNDEBUG",         // device asserts make ptxas serialise wgmma (advisory C7509/C7510)
    "-arch=sm_90a",     // wgmma and TMA: the "a" variant of sm_90
    "-w",               // CUTLASS's own warnings are not the caller's
};

// The device-side stand-in for CUtensorMap in CUTLASS 4.7 (cute/arch/copy_sm90_desc.hpp).
const char kStandIn[] = "struct alignas(64) { char bytes[128]; }";

}  // namespace

extern "C" {

size_t gemm_host_params_size(void) {
  return sizeof(GemmKernel::Params);
}
size_t gemm_host_params_align(void) {
  return alignof(GemmKernel::Params);
}
const char* gemm_host_kernel_name(void) {
  return "kjit_cutlass_gemm";
}
size_t gemm_host_option_count(void) {
  return sizeof kOptions / sizeof kOptions[0];
}
const char* gemm_host_option(size_t index) {
  return index < gemm_host_option_count() ? kOptions[index] : nullptr;
}

char* gemm_host_tma_header(const char* cutlass_include, const char** why) {
  const std::string path = std::string(cutlass_include) + "/cute/arch/copy_sm90_desc.hpp";
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *why = "cannot read cute/arch/copy_sm90_desc.hpp under the CUTLASS include directory";
    return nullptr;
  }
  std::ostringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  // Both stand-ins (TmaDescriptor and Im2ColTmaDescriptor) take the host's alignment.
  const std::string aligned = "struct alignas(" + std::to_string(alignof(CUtensorMap)) +
                              ") { char bytes[" + std::to_string(sizeof(CUtensorMap)) + "]; }";
  size_t replaced = 0;
  for (size_t at = 0; (at = s.find(kStandIn, at)) != std::string::npos; at += aligned.size()) {
    s.replace(at, sizeof kStandIn - 1, aligned);
    ++replaced;
  }
  if (replaced != 2) {
    *why =
        "cute/arch/copy_sm90_desc.hpp does not declare the two TMA descriptor stand-ins "
        "this example knows (another CUTLASS version?)";
    return nullptr;
  }
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (!out) {
    *why = "out of memory";
    return nullptr;
  }
  std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

int gemm_host_make_params(int m, int n, int k, float alpha, float beta, const void* A,
                          const void* B, const void* C, void* D, int device, void* workspace,
                          void* params, gemm_host_launch* launch, const char** why) {
  using ElementA = kjit_example::ElementA;
  using ElementB = kjit_example::ElementB;
  using ElementC = kjit_example::ElementC;
  using ElementD = kjit_example::ElementD;
  typename GemmKernel::StrideA stride_a{};
  typename GemmKernel::StrideB stride_b{};
  typename GemmKernel::StrideC stride_c{};
  typename GemmKernel::StrideD stride_d{};
  cute::get<0>(stride_a) = k;  // A: M x K, row-major
  cute::get<2>(stride_a) = int64_t(m) * k;
  cute::get<0>(stride_b) = k;  // B: N x K in CuTe's terms, K-major
  cute::get<2>(stride_b) = int64_t(n) * k;
  cute::get<0>(stride_c) = n;  // C, D: M x N, row-major
  cute::get<2>(stride_c) = int64_t(m) * n;
  cute::get<0>(stride_d) = n;
  cute::get<2>(stride_d) = int64_t(m) * n;

  cutlass::KernelHardwareInfo hw;
  hw.device_id = device;
  hw.sm_count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(device);

  typename GemmKernel::Arguments args{
      cutlass::gemm::GemmUniversalMode::kGemm,
      {m, n, k, 1},
      {static_cast<const ElementA*>(A), stride_a, static_cast<const ElementB*>(B), stride_b},
      {{alpha, beta},
       static_cast<const ElementC*>(C ? C : D),
       stride_c,
       static_cast<ElementD*>(D),
       stride_d},
      hw};
  if (GemmKernel::can_implement(args) == false) {
    *why = "CUTLASS cannot implement this problem (M, N and K must be multiples of 8)";
    return -1;
  }
  launch->workspace_bytes = GemmKernel::get_workspace_size(args);
  if (launch->workspace_bytes > 0 && !workspace) return 0;  // the caller allocates first
  if (launch->workspace_bytes > 0 &&
      GemmKernel::initialize_workspace(args, workspace, nullptr) != cutlass::Status::kSuccess) {
    *why = "CUTLASS could not initialise the workspace";
    return -1;
  }
  const GemmKernel::Params p = GemmKernel::to_underlying_arguments(args, workspace);
  std::memcpy(params, &p, sizeof p);
  const dim3 grid = GemmKernel::get_grid_shape(p);
  const dim3 block = GemmKernel::get_block_shape();
  launch->grid[0] = grid.x;
  launch->grid[1] = grid.y;
  launch->grid[2] = grid.z;
  launch->block[0] = block.x;
  launch->block[1] = block.y;
  launch->block[2] = block.z;
  launch->cluster[0] = cute::size<0>(kjit_example::ClusterShape{});
  launch->cluster[1] = cute::size<1>(kjit_example::ClusterShape{});
  launch->cluster[2] = cute::size<2>(kjit_example::ClusterShape{});
  launch->shared_bytes = GemmKernel::SharedStorageSize;
  return 0;
}

}  // extern "C"
