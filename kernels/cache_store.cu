/*
 * cache_store.cu: how the GPU backend stores a cached-residual policy's cache between steps (issue 21,
 * docs/spec.md §3.1 `residual_dtype`, `keys`), the device twins of src/policy/cache_store.c, which is
 * the specification: the same bytes bit for bit (tests/backend/gpu_cache.c).
 *   residual  fp32 R -> bf16 (round to nearest even, NaN quietened as dg_f32_to_bf16) or fp8 e4m3
 *             with a power-of-two scale per row (one warp per row: the row's max |r|, its exponent
 *             as dg_fp8_row_exp, then each value as dg_f32_to_e4m3); and back (the replay's
 *             bookkeeping; the sparse kernel's epilogue reads the stored dtype itself, sparse_fwd.cu);
 *   keys      int32 lists -> one bitmap per group (atomicOr, one warp per group), and back: one warp
 *             per group walks its words in chunks of 32, a warp prefix sum of their popcounts placing
 *             each word's keys, ascending, at the group's offset.
 * Launchers: dsgap_kernels.h ("cache storage").
 */
#include <cstdio>

#include "attn_common.cuh"

#define CS_WARPS 8

/* dg_f32_to_bf16 (src/util/util.h) */
static __device__ __forceinline__ uint16_t cs_bf16(float f)
{
	unsigned u = __float_as_uint(f);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

/* dg_f32_to_e4m3 (src/policy/cache_store.c), line for line */
static __device__ __forceinline__ uint8_t cs_e4m3(float x)
{
	if (isnan(x))
		return 0x7f;
	const uint8_t sign = signbit(x) ? 0x80 : 0;
	const float a = fabsf(x);
	if (a >= 448.0f)
		return sign | 0x7e;
	if (a < 0x1p-6f)
		return sign | (uint8_t)rintf(a * 512.0f);
	int x2;
	const float f = frexpf(a, &x2);
	int e = x2 - 1;
	int m = (int)rintf((2.0f * f - 1.0f) * 8.0f);
	if (m == 8)
		m = 0, e++;
	const int code = ((e + 7) << 3) | m;
	return sign | (uint8_t)(code > 0x7e ? 0x7e : code);
}

/* dg_fp8_row_exp of a row's max |r| (NaN never wins) */
static __device__ __forceinline__ int cs_row_exp(float amax)
{
	if (amax == 0 || isinf(amax))
		return amax == 0 ? 0 : 100;
	int x;
	frexpf(amax, &x);
	const int e = amax <= ldexpf(448.0f, x - 9) ? x - 9 : x - 8;
	return e < -100 ? -100 : e > 100 ? 100 : e;
}

__global__ void __launch_bounds__(32 * CS_WARPS) cs_encode_kernel(const float *__restrict__ r, int n, int d, int dtype,
								  unsigned char *__restrict__ store)
{
	const int lane = threadIdx.x & 31;
	const long long row = (long long)blockIdx.x * CS_WARPS + (threadIdx.x >> 5);
	if (row >= n)
		return;
	const float *rr = r + (size_t)row * d;
	if (dtype == DG_RES_BF16) {
		uint16_t *h = reinterpret_cast<uint16_t *>(store) + (size_t)row * d;
		for (int j = lane; j < d; j += 32)
			h[j] = cs_bf16(rr[j]);
		return;
	}
	float amax = 0.f;
	for (int j = lane; j < d; j += 32) {
		const float a = fabsf(rr[j]);
		if (a > amax)
			amax = a;
	}
#pragma unroll
	for (int off = 16; off > 0; off >>= 1) {
		const float o = __shfl_xor_sync(0xffffffffu, amax, off);
		if (o > amax)
			amax = o;
	}
	const int e = cs_row_exp(amax);
	const float inv = ldexpf(1.0f, -e);
	uint8_t *b = store + (size_t)row * d;
	for (int j = lane; j < d; j += 32)
		b[j] = cs_e4m3(rr[j] * inv);
	if (lane == 0)
		reinterpret_cast<float *>(store + dg_res_fp8_scales(n, d))[row] = ldexpf(1.0f, e);
}

__global__ void cs_decode_kernel(const unsigned char *__restrict__ store, int n, int d, int dtype, float *__restrict__ r)
{
	const uint64_t count = (uint64_t)n * d;
	const float *scale = reinterpret_cast<const float *>(store + dg_res_fp8_scales(n, d));
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < count; i += (uint64_t)gridDim.x * blockDim.x)
		r[i] = dtype == DG_RES_BF16 ? __uint_as_float((unsigned)reinterpret_cast<const uint16_t *>(store)[i] << 16)
					    : dg_e4m3_value(store[i]) * scale[i / d];
}

static int cs_check(const char *op, const void *a, const void *b, int n, int d, int dtype)
{
	if (!a || !b || n < 0 || d < 32 || d > 1024 || d % 32 || (dtype != DG_RES_BF16 && dtype != DG_RES_FP8 &&
								  dtype != DG_RES_F32)) {
		fprintf(stderr, "%s: NULL buffer, n %d, d %d (a multiple of 32 up to 1024) or dtype %d\n", op, n, d, dtype);
		return -1;
	}
	return 0;
}

extern "C" int dg_residual_encode_dev(const float *r, int n, int d, int dtype, void *store, dg_stream stream)
{
	if (cs_check("residual_encode", r, store, n, d, dtype))
		return -1;
	cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
	if (n == 0)
		return 0;
	if (dtype == DG_RES_F32)
		return cudaMemcpyAsync(store, r, (size_t)n * d * 4, cudaMemcpyDeviceToDevice, st) == cudaSuccess ? 0 : -1;
	cs_encode_kernel<<<(unsigned)((n + CS_WARPS - 1) / CS_WARPS), 32 * CS_WARPS, 0, st>>>(
		r, n, d, dtype, static_cast<unsigned char *>(store));
	return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

extern "C" int dg_residual_decode_dev(const void *store, int n, int d, int dtype, float *r, dg_stream stream)
{
	if (cs_check("residual_decode", store, r, n, d, dtype))
		return -1;
	cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
	if (n == 0)
		return 0;
	if (dtype == DG_RES_F32)
		return cudaMemcpyAsync(r, store, (size_t)n * d * 4, cudaMemcpyDeviceToDevice, st) == cudaSuccess ? 0 : -1;
	const uint64_t count = (uint64_t)n * d;
	const unsigned blocks = (unsigned)((count + 255) / 256 < 4096 ? (count + 255) / 256 : 4096);
	cs_decode_kernel<<<blocks, 256, 0, st>>>(static_cast<const unsigned char *>(store), n, d, dtype, r);
	return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

__global__ void cs_bitmap_kernel(const int64_t *__restrict__ soff, const int32_t *__restrict__ sidx, int ngroups, int n,
				 uint32_t *__restrict__ bits)
{
	const int lane = threadIdx.x & 31;
	const long long g = (long long)blockIdx.x * CS_WARPS + (threadIdx.x >> 5);
	if (g >= ngroups)
		return;
	uint32_t *row = bits + (size_t)g * ((n + 31) / 32);
	for (int64_t e = soff[g] + lane; e < soff[g + 1]; e += 32) {
		const int j = sidx[e];
		if (j >= 0 && j < n)
			atomicOr(row + (j >> 5), 1u << (j & 31));
	}
}

__global__ void cs_keys_kernel(const uint32_t *__restrict__ bits, const int64_t *__restrict__ soff, int ngroups, int n,
			       int32_t *__restrict__ sidx)
{
	const int lane = threadIdx.x & 31;
	const long long g = (long long)blockIdx.x * CS_WARPS + (threadIdx.x >> 5);
	if (g >= ngroups)
		return;
	const int w = (n + 31) / 32;
	const uint32_t *row = bits + (size_t)g * w;
	int64_t pos = soff[g];
	const int64_t end = soff[g + 1];
	for (int c = 0; c < w; c += 32) {
		const int k = c + lane;
		uint32_t x = k < w ? row[k] : 0u;
		const int cnt = __popc(x);
		int incl = cnt; /* inclusive prefix sum of the popcounts over the chunk's lanes */
#pragma unroll
		for (int off = 1; off < 32; off <<= 1) {
			const int t = __shfl_up_sync(0xffffffffu, incl, off);
			if (lane >= off)
				incl += t;
		}
		int64_t at = pos + incl - cnt;
		for (; x; x &= x - 1)
			if (at < end) /* the offsets bound the writes */
				sidx[at++] = k * 32 + __ffs(x) - 1;
		pos += __shfl_sync(0xffffffffu, incl, 31);
	}
}

static int bm_check(const char *op, const void *a, const void *b, const void *c, int ngroups, int n)
{
	if (!a || !b || !c || ngroups < 0 || n < 1) {
		fprintf(stderr, "%s: NULL buffer, %d groups or n %d\n", op, ngroups, n);
		return -1;
	}
	return 0;
}

extern "C" int dg_keys_to_bitmap(const int64_t *soff, const int32_t *sidx, int ngroups, int n, uint32_t *bits,
				 dg_stream stream)
{
	if (bm_check("keys_to_bitmap", soff, sidx, bits, ngroups, n))
		return -1;
	cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
	if (!ngroups)
		return 0;
	if (cudaMemsetAsync(bits, 0, (size_t)ngroups * ((n + 31) / 32) * 4, st) != cudaSuccess)
		return -1;
	cs_bitmap_kernel<<<(unsigned)((ngroups + CS_WARPS - 1) / CS_WARPS), 32 * CS_WARPS, 0, st>>>(soff, sidx, ngroups, n,
												  bits);
	return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

extern "C" int dg_bitmap_to_keys(const uint32_t *bits, const int64_t *soff, int ngroups, int n, int32_t *sidx,
				 dg_stream stream)
{
	if (bm_check("bitmap_to_keys", bits, soff, sidx, ngroups, n))
		return -1;
	if (!ngroups)
		return 0;
	cs_keys_kernel<<<(unsigned)((ngroups + CS_WARPS - 1) / CS_WARPS), 32 * CS_WARPS, 0,
			 reinterpret_cast<cudaStream_t>(stream)>>>(bits, soff, ngroups, n, sidx);
	return cudaGetLastError() == cudaSuccess ? 0 : -1;
}
