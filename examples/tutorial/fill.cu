// The application's own CUDA code, compiled by nvcc when the project is built. kjit's
// kernels run beside it in the same (primary) context, on the same streams.
#include "fill.h"

__global__ void fill(float* x, int n, float value) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = value;
}

extern "C" cudaError_t fill_on_device(float* x, int n, float value, cudaStream_t stream) {
  fill<<<(n + 255) / 256, 256, 0, stream>>>(x, n, value);
  return cudaGetLastError();
}
