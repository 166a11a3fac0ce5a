/* A kernel built ahead of time by nvcc, as part of the application's own CUDA target. */
#ifndef TUTORIAL_FILL_H
#define TUTORIAL_FILL_H

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* x[i] = value for i < n, enqueued on `stream`. */
cudaError_t fill_on_device(float* x, int n, float value, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
