// api_convert.cu: libdsgap's layout conversions (api_convert.h): one thread per element, the
// element index decomposed as (t, h, e) of the packed layout so that the packed side is coalesced.
#include "api_convert.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace {

__device__ __forceinline__ float load_as_float(const void *p, int dtype, int64_t at)
{
	if (dtype == DG_API_BF16)
		return __bfloat162float(reinterpret_cast<const __nv_bfloat16 *>(p)[at]);
	if (dtype == DG_API_FP16)
		return __half2float(reinterpret_cast<const __half *>(p)[at]);
	return reinterpret_cast<const float *>(p)[at];
}

// dst (heads, tokens, d): i = (h * tokens + t) * d + e
__global__ void gather_bf16(const void *src, int dtype, int64_t st, int64_t sh, int64_t se, int tokens,
			    int heads, int d, __nv_bfloat16 *dst)
{
	int64_t all = (int64_t)heads * tokens * d;
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < all;
	     i += (int64_t)gridDim.x * blockDim.x) {
		int e = (int)(i % d);
		int64_t r = i / d;
		int t = (int)(r % tokens), h = (int)(r / tokens);
		int64_t at = t * st + h * sh + e * se;
		if (dtype == DG_API_BF16)
			dst[i] = reinterpret_cast<const __nv_bfloat16 *>(src)[at];
		else
			dst[i] = __float2bfloat16_rn(load_as_float(src, dtype, at));
	}
}

// src (tokens, heads*d): i = (t * heads + h) * d + e
__global__ void scatter_bf16(const __nv_bfloat16 *src, int tokens, int heads, int d, void *dst, int dtype,
			     int64_t st, int64_t sh, int64_t se)
{
	int64_t all = (int64_t)heads * tokens * d;
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < all;
	     i += (int64_t)gridDim.x * blockDim.x) {
		int e = (int)(i % d);
		int64_t r = i / d;
		int h = (int)(r % heads), t = (int)(r / heads);
		int64_t at = t * st + h * sh + e * se;
		if (dtype == DG_API_BF16)
			reinterpret_cast<__nv_bfloat16 *>(dst)[at] = src[i];
		else if (dtype == DG_API_FP16)
			reinterpret_cast<__half *>(dst)[at] = __float2half_rn(__bfloat162float(src[i]));
		else
			reinterpret_cast<float *>(dst)[at] = __bfloat162float(src[i]);
	}
}

unsigned blocks_for(int64_t all)
{
	int64_t b = (all + 255) / 256;
	return (unsigned)(b < 65535 * 8 ? (b ? b : 1) : 65535 * 8);
}

} // namespace

extern "C" int dg_api_gather_bf16(const void *src, int dtype, int64_t st, int64_t sh, int64_t se, int tokens,
				  int heads, int d, uint16_t *dst, void *stream)
{
	int64_t all = (int64_t)heads * tokens * d;
	if (all)
		gather_bf16<<<blocks_for(all), 256, 0, (cudaStream_t)stream>>>(
			src, dtype, st, sh, se, tokens, heads, d, reinterpret_cast<__nv_bfloat16 *>(dst));
	return (int)cudaGetLastError();
}

extern "C" int dg_api_scatter_bf16(const uint16_t *src, int tokens, int heads, int d, void *dst, int dtype,
				   int64_t st, int64_t sh, int64_t se, void *stream)
{
	int64_t all = (int64_t)heads * tokens * d;
	if (all)
		scatter_bf16<<<blocks_for(all), 256, 0, (cudaStream_t)stream>>>(
			reinterpret_cast<const __nv_bfloat16 *>(src), tokens, heads, d, dst, dtype, st, sh, se);
	return (int)cudaGetLastError();
}
