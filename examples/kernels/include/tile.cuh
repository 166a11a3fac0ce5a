// Shared by the kernels in this directory; hashed into their cache keys, so editing it
// makes `kjit warm` compile them again.
#pragma once
#ifndef TILE
#define TILE 256
#endif
template <typename T>
__device__ T warp_sum(T v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}
