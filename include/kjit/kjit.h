/*
 * kjit — compile CUDA C++ at run time with NVRTC, cache the results on the machine in
 * SQLite, and load and launch kernels through the CUDA Driver API.
 *
 * Umbrella header: include this one. Plain C99, also valid C++. No CUDA header needed.
 */
#ifndef KJIT_KJIT_H
#define KJIT_KJIT_H

#include "common.h"
#include "compile.h"
#include "cache.h"
#include "kernel.h"
#include "gemm.h"
#include "grouped_gemm.h"
#include "link.h"

#endif /* KJIT_KJIT_H */
