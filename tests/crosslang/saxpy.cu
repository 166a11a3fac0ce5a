// The kernel every language compiles in the cross-language cache test.
#ifndef BLOCK
#error "BLOCK must be defined by the options (-DBLOCK=256)"
#endif
extern "C" __global__ void __launch_bounds__(BLOCK) saxpy(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
