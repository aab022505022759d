/*
 * cuda_check.h: fatal checks of CUDA runtime, kernel launcher and cuBLAS calls (docs/spec.md §11): print
 * the statement, the function and file:line, then exit. For C code calling the CUDA runtime API.
 */
#ifndef DG_CUDA_CHECK_H
#define DG_CUDA_CHECK_H

#include <cuda_runtime_api.h>

#include "util/util.h"

#define CUDA_CHECK(stmt) do { \
	cudaError_t e_ = (stmt); \
	if (e_ != cudaSuccess) \
		dg_die("%s: %s (%s at %s:%d)", #stmt, cudaGetErrorString(e_), __func__, __FILE__, __LINE__); \
} while (0)

#define KERNEL_CHECK(stmt) do { \
	if ((stmt) != 0) \
		dg_die("%s failed (%s at %s:%d)", #stmt, __func__, __FILE__, __LINE__); \
	CUDA_CHECK(cudaGetLastError()); \
} while (0)

/* a cuBLAS or cuBLASLt call (status 0 = success) */
#define CUBLAS_CHECK(stmt) do { \
	int s_ = (int)(stmt); \
	if (s_ != 0) \
		dg_die("%s: cuBLAS status %d (%s at %s:%d)", #stmt, s_, __func__, __FILE__, __LINE__); \
} while (0)

#endif
