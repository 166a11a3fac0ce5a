// Sum of each row of a row-major matrix, one block of TILE threads per row.
#include "tile.cuh"

template <typename T>
__global__ void rowsum(const T* m, T* out, int cols) {
  __shared__ T partial[TILE / 32];
  const T* row = m + static_cast<long long>(blockIdx.x) * cols;
  T acc = 0;
  for (int c = threadIdx.x; c < cols; c += TILE) acc += row[c];
  acc = warp_sum(acc);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = acc;
  __syncthreads();
  if (threadIdx.x < 32) {
    acc = threadIdx.x < TILE / 32 ? partial[threadIdx.x] : T(0);
    acc = warp_sum(acc);
    if (threadIdx.x == 0) out[blockIdx.x] = acc;
  }
}
