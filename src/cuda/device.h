// Device queries needed below the kernel layer (target "auto").
#pragma once

#include <string>

namespace kjit::cuda {

// Exact NVRTC target of a device, e.g. "sm_90". Throws kjit::Error with
// KJIT_ERROR_CUDA_UNAVAILABLE (no driver / no such device) or KJIT_ERROR_CUDA.
std::string device_arch(int device);

}  // namespace kjit::cuda
