// api_convert.cu: libdsgap's layout conversions (api_convert.h). Where both sides are 2-byte types
// with unit element stride and every row starts on 16 bytes (torch's bf16/fp16 tensors as diffusers
// passes them), a thread moves 8 elements (16 bytes) at a time: half a warp per row of 128, both sides
// coalesced. Otherwise a warp per (t, h) row of d elements, its lanes along e, so that the packed side
// (and a caller's side with unit element stride) is coalesced.
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

// The 16-byte path: 8 elements of a row per thread; chunks c = r * (d / 8) + j over every row r of
// the packed side. Src and dst of a pair are both bf16, or fp16 on the caller's side (converted
// through float, rounded to nearest even).
__device__ __forceinline__ uint4 fp16x8_to_bf16x8(uint4 x)
{
	const __half2 *h = reinterpret_cast<const __half2 *>(&x);
	uint4 y;
	__nv_bfloat162 *b = reinterpret_cast<__nv_bfloat162 *>(&y);
	for (int i = 0; i < 4; i++)
		b[i] = __float22bfloat162_rn(__half22float2(h[i]));
	return y;
}

__device__ __forceinline__ uint4 bf16x8_to_fp16x8(uint4 x)
{
	const __nv_bfloat162 *b = reinterpret_cast<const __nv_bfloat162 *>(&x);
	uint4 y;
	__half2 *h = reinterpret_cast<__half2 *>(&y);
	for (int i = 0; i < 4; i++)
		h[i] = __float22half2_rn(__bfloat1622float2(b[i]));
	return y;
}

// dst (heads, tokens, d) = src; st, sh in 8-element chunks, DC = d / 8 chunks a row, chunk indices
// in 32 bits (vector_path)
template <int DC>
__global__ void gather_vec(const uint4 *src, bool fp16, int64_t st, int64_t sh, unsigned tokens, unsigned heads,
			   uint4 *dst)
{
	unsigned chunks = heads * tokens * DC, step = gridDim.x * blockDim.x;
	for (unsigned c = blockIdx.x * blockDim.x + threadIdx.x; c < chunks; c += step) {
		unsigned r = c / DC, j = c % DC, t = r % tokens, h = r / tokens;
		uint4 x = __ldg(src + (int64_t)t * st + (int64_t)h * sh + j);
		dst[c] = fp16 ? fp16x8_to_bf16x8(x) : x;
	}
}

// dst (strided) = src (tokens, heads*d)
template <int DC>
__global__ void scatter_vec(const uint4 *src, unsigned tokens, unsigned heads, uint4 *dst, bool fp16, int64_t st,
			    int64_t sh)
{
	unsigned chunks = heads * tokens * DC, step = gridDim.x * blockDim.x;
	for (unsigned c = blockIdx.x * blockDim.x + threadIdx.x; c < chunks; c += step) {
		unsigned r = c / DC, j = c % DC, h = r % heads, t = r / heads;
		uint4 x = __ldg(src + c);
		dst[(int64_t)t * st + (int64_t)h * sh + j] = fp16 ? bf16x8_to_fp16x8(x) : x;
	}
}

// whether a conversion takes the 16-byte path: a 2-byte caller type, unit element stride, head_dim
// 64 or 128, the strides and both addresses in whole 16-byte chunks, and the chunks counted in 32 bits
bool vector_path(const void *p, const void *packed, int dtype, int64_t st, int64_t sh, int64_t se, int d,
		 int64_t rows)
{
	return (dtype == DG_API_BF16 || dtype == DG_API_FP16) && se == 1 && (d == 64 || d == 128) &&
	       st % 8 == 0 && sh % 8 == 0 && ((uintptr_t)p & 15) == 0 && ((uintptr_t)packed & 15) == 0 &&
	       rows * (d / 8) < 0x80000000LL;
}

// threads of 256: enough blocks to fill an H200 several times over, grid-stride beyond
unsigned vec_blocks(int64_t chunks)
{
	int64_t b = (chunks + 255) / 256;
	return (unsigned)(b < 4096 ? (b ? b : 1) : 4096);
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
	auto *vs = reinterpret_cast<const uint4 *>(src);
	auto *vd = reinterpret_cast<uint4 *>(dst);
	bool f16 = dtype == DG_API_FP16;
	if (rows && vector_path(src, dst, dtype, st, sh, se, d, rows) && d == 128)
		gather_vec<16><<<vec_blocks(rows * 16), 256, 0, s>>>(vs, f16, st / 8, sh / 8, tokens, heads, vd);
	else if (rows && vector_path(src, dst, dtype, st, sh, se, d, rows))
		gather_vec<8><<<vec_blocks(rows * 8), 256, 0, s>>>(vs, f16, st / 8, sh / 8, tokens, heads, vd);
	else if (rows && d && narrow(rows))
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
	auto *vs = reinterpret_cast<const uint4 *>(src);
	auto *vd = reinterpret_cast<uint4 *>(dst);
	bool f16 = dtype == DG_API_FP16;
	if (rows && vector_path(dst, src, dtype, st, sh, se, d, rows) && d == 128)
		scatter_vec<16><<<vec_blocks(rows * 16), 256, 0, s>>>(vs, tokens, heads, vd, f16, st / 8, sh / 8);
	else if (rows && vector_path(dst, src, dtype, st, sh, se, d, rows))
		scatter_vec<8><<<vec_blocks(rows * 8), 256, 0, s>>>(vs, tokens, heads, vd, f16, st / 8, sh / 8);
	else if (rows && d && narrow(rows))
		scatter_bf16<unsigned><<<blocks_for(rows), 32 * WARPS, 0, s>>>(in, tokens, heads, d, dst, dtype, st, sh, se);
	else if (rows && d)
		scatter_bf16<uint64_t><<<blocks_for(rows), 32 * WARPS, 0, s>>>(in, tokens, heads, d, dst, dtype, st, sh, se);
	return (int)cudaGetLastError();
}
