// The kernel kjit compiles (NVRTC): an extern "C" entry point around the CUTLASS kernel,
// as CUTLASS's own device_kernel<> is, with a name that needs no name expression. Its one
// parameter is GemmKernel::Params, passed by value in the parameter space
// (__grid_constant__: the TMA descriptors inside must not be copied to local memory).
#include "gemm_config.hpp"

extern "C" __global__ void __launch_bounds__(kjit_example::GemmKernel::MaxThreadsPerBlock,
                                             kjit_example::GemmKernel::MinBlocksPerMultiprocessor)
    kjit_cutlass_gemm(__grid_constant__ const kjit_example::GemmKernel::Params params) {
  extern __shared__ char smem[];
  kjit_example::GemmKernel op;
  op(params, smem);
}
