/*
 * host_common.h: the host-side pieces that the kernel benchmark (bench/bench_attn.cu) and the GPU tests
 * (tests/kernels/gpu_kernels.cu, tests/kernels/gpu_meta.c, and dev/kernels' variants of all three) share, for C and
 * CUDA C++ alike: the build's commit, a fatal CUDA_CHECK that prints the failing call, the
 * splitmix64 generator of the test inputs (seeded through rng_state), and the exit-77 skip of a
 * machine without a CUDA device.
 */
#ifndef DG_HOST_COMMON_H
#define DG_HOST_COMMON_H

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef DG_GIT_COMMIT
#define DG_GIT_COMMIT "unknown"
#endif

#define CUDA_CHECK(x) do { \
	cudaError_t e_ = (x); \
	if (e_ != cudaSuccess) { \
		fprintf(stderr, "CUDA error %s at %s in %s (%s:%d): %s\n", cudaGetErrorName(e_), #x, __func__, __FILE__, \
			__LINE__, cudaGetErrorString(e_)); \
		exit(1); \
	} \
} while (0)

static uint64_t rng_state __attribute__((unused));
static inline uint64_t rng_u64(void)
{
	uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}
static inline double rng_uniform(void) { return (rng_u64() >> 11) * (1.0 / 9007199254740992.0); }
static inline int rng_int(int n) { return (int)(rng_uniform() * n); }
static inline double rng_normal(void)
{
	double u = rng_uniform(), v = rng_uniform();
	return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

/* Device 0's properties into prop and 0; or, with no CUDA device, a "skipped" line and 77 (the
 * exit status ctest counts as skipped). */
static inline int gpu_device_or_skip(struct cudaDeviceProp *prop)
{
	int ndev = 0;
	cudaError_t e = cudaGetDeviceCount(&ndev);
	if (e != cudaSuccess || ndev == 0) {
		printf("skipped: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
		return 77;
	}
	CUDA_CHECK(cudaGetDeviceProperties(prop, 0));
	return 0;
}

#endif
