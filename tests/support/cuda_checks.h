// Driver API checks for GPU tests: the call, its CUresult and the driver's name for it.
#pragma once

#include <gtest/gtest.h>

#include "cuda/driver.h"

#define CU_ASSERT(expr)                                                                 \
  do {                                                                                  \
    const CUresult cu_r_ = (expr);                                                      \
    ASSERT_EQ(cu_r_, CUDA_SUCCESS) << #expr << ": " << ::kjit::cuda::error_text(cu_r_); \
  } while (0)

#define CU_EXPECT(expr)                                                                 \
  do {                                                                                  \
    const CUresult cu_r_ = (expr);                                                      \
    EXPECT_EQ(cu_r_, CUDA_SUCCESS) << #expr << ": " << ::kjit::cuda::error_text(cu_r_); \
  } while (0)
