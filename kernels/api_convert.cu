// api_convert.cu: libdsgap's layout conversions (api_convert.h): a warp per (t, h) row of d
// elements, its lanes along e, so that the packed side (and a caller's side with unit element
// stride) is coalesced.
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

// A warp per row of the packed side (grid-stride over rows), its lanes over the row's d elements:
// the row's (t, h) come from one division a row, where one thread an element paid two 64-bit
// divisions (tens of instructions each) to move 4 bytes. Rows are counted in 32 bits where they fit
// (Row = unsigned: heads * tokens < 2^31, always in practice), else in 64.
constexpr int WARPS = 8; // a block: 8 warps, 8 rows at a time

// dst (heads, tokens, d): row r = h * tokens + t
template <typename Row>
__global__ void gather_bf16(const void *src, int dtype, int64_t st, int64_t sh, int64_t se, int tokens,
			    int heads, int d, __nv_bfloat16 *dst)
{
	Row rows = (Row)heads * (Row)tokens, step = (Row)gridDim.x * WARPS;
	int lane = threadIdx.x & 31;
	for (Row r = (Row)blockIdx.x * WARPS + (threadIdx.x >> 5); r < rows; r += step) {
		Row t = r % (Row)tokens, h = r / (Row)tokens;
		int64_t base = (int64_t)t * st + (int64_t)h * sh;
		__nv_bfloat16 *row = dst + (int64_t)r * d;
		for (int e = lane; e < d; e += 32) {
			int64_t at = base + e * se;
			if (dtype == DG_API_BF16)
				row[e] = reinterpret_cast<const __nv_bfloat16 *>(src)[at];
			else
				row[e] = __float2bfloat16_rn(load_as_float(src, dtype, at));
		}
	}
}

// src (tokens, heads*d): row r = t * heads + h
template <typename Row>
__global__ void scatter_bf16(const __nv_bfloat16 *src, int tokens, int heads, int d, void *dst, int dtype,
			     int64_t st, int64_t sh, int64_t se)
{
	Row rows = (Row)heads * (Row)tokens, step = (Row)gridDim.x * WARPS;
	int lane = threadIdx.x & 31;
	for (Row r = (Row)blockIdx.x * WARPS + (threadIdx.x >> 5); r < rows; r += step) {
		Row h = r % (Row)heads, t = r / (Row)heads;
		int64_t base = (int64_t)t * st + (int64_t)h * sh;
		const __nv_bfloat16 *row = src + (int64_t)r * d;
		for (int e = lane; e < d; e += 32) {
			int64_t at = base + e * se;
			if (dtype == DG_API_BF16)
				reinterpret_cast<__nv_bfloat16 *>(dst)[at] = row[e];
			else if (dtype == DG_API_FP16)
				reinterpret_cast<__half *>(dst)[at] = __float2half_rn(__bfloat162float(row[e]));
			else
				reinterpret_cast<float *>(dst)[at] = __bfloat162float(row[e]);
		}
	}
}

// blocks for `rows` rows, a warp each: at most 2048 (an H200 holds 132 SMs x 8 such blocks at
// once), grid-stride beyond
unsigned blocks_for(int64_t rows)
{
	int64_t b = (rows + WARPS - 1) / WARPS;
	return (unsigned)(b < 2048 ? (b ? b : 1) : 2048);
}

bool narrow(int64_t rows) { return rows <= 0x7fffffff; }

} // namespace

extern "C" int dg_api_gather_bf16(const void *src, int dtype, int64_t st, int64_t sh, int64_t se, int tokens,
				  int heads, int d, uint16_t *dst, void *stream)
{
	int64_t rows = (int64_t)heads * tokens;
	auto *out = reinterpret_cast<__nv_bfloat16 *>(dst);
	cudaStream_t s = (cudaStream_t)stream;
	if (rows && d && narrow(rows))
		gather_bf16<unsigned><<<blocks_for(rows), 32 * WARPS, 0, s>>>(src, dtype, st, sh, se, tokens, heads, d, out);
	else if (rows && d)
		gather_bf16<uint64_t><<<blocks_for(rows), 32 * WARPS, 0, s>>>(src, dtype, st, sh, se, tokens, heads, d, out);
	return (int)cudaGetLastError();
}

extern "C" int dg_api_scatter_bf16(const uint16_t *src, int tokens, int heads, int d, void *dst, int dtype,
				   int64_t st, int64_t sh, int64_t se, void *stream)
{
	int64_t rows = (int64_t)heads * tokens;
	auto *in = reinterpret_cast<const __nv_bfloat16 *>(src);
	cudaStream_t s = (cudaStream_t)stream;
	if (rows && d && narrow(rows))
		scatter_bf16<unsigned><<<blocks_for(rows), 32 * WARPS, 0, s>>>(in, tokens, heads, d, dst, dtype, st, sh, se);
	else if (rows && d)
		scatter_bf16<uint64_t><<<blocks_for(rows), 32 * WARPS, 0, s>>>(in, tokens, heads, d, dst, dtype, st, sh, se);
	return (int)cudaGetLastError();
}
