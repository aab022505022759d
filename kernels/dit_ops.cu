/*
 * dit_ops.cu: the elementwise and row ops of the DiT engine's GPU op table (src/dit/wan_ops_gpu.c), the
 * twins of src/dit/wan_ops_cpu.c: LayerNorm (affine and/or modulation, after a gated residual add), split into heads with RMSNorm
 * over the row and RoPE on interleaved pairs, merge heads, GELU-tanh, gated residual add, fp32 -> bf16.
 * fp32 activations in and out (docs/spec.md §7: fp32 norms, modulation, residual stream); every op that
 * makes the input of a GEMM or an attention may also write a bf16 copy of its output (y16, NULL:
 * none), so that no separate conversion pass reads the fp32 buffer again. Row statistics in fp32,
 * two passes (mean, then centred squares). Rows up to 2048 wide with 16-byte aligned operands go to
 * the warp-per-row kernels: 16-byte loads and stores, the row in the lane's registers, reductions
 * by shuffles alone (the block-per-row kernels move 4 to 8 bytes a thread; their measured bandwidth:
 * docs/history.md, "Kernel versions"); other rows go to the block-per-row kernels, one row per block so that no
 * thread divides a 64-bit index. Launchers declared in dsgap_kernels.h.
 * Check: tests/dit/gpu_dit.c (against the CPU op table and fp64, docs/spec.md §9).
 */
#include <cuda_bf16.h>
#include <stdio.h>

#include <type_traits>

#include "dsgap_kernels.h"

#define ROW_THREADS 256

static __device__ __forceinline__ uint16_t to_bf16(float v)
{
	__nv_bfloat16 b = __float2bfloat16_rn(v);
	return *reinterpret_cast<uint16_t *>(&b);
}

/* sum of v over the block (ROW_THREADS threads); sh has ROW_THREADS/32 floats; every thread gets it */
static __device__ float block_sum(float v, float *sh)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
	__syncthreads(); /* sh may still be read from the last call */
	if (lane == 0)
		sh[w] = v;
	__syncthreads();
	float s = 0.f;
	for (int i = 0; i < ROW_THREADS / 32; i++)
		s += sh[i];
	return s;
}

/* ---------------------------------------------------------------------------------------------- */
/* warp-per-row kernels: WARP_ROWS rows a block, a lane's part of its row in registers             */

#define WARP_ROWS 8

static __device__ __forceinline__ float warp_sum(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

static __device__ __forceinline__ float4 ld4(const float *p) { return *reinterpret_cast<const float4 *>(p); }
static __device__ __forceinline__ void st4(float *p, float4 v) { *reinterpret_cast<float4 *>(p) = v; }

/* 8 values from 8 fp32 or 8 bf16 (16-byte aligned) */
static __device__ __forceinline__ void ld8(const float *p, float v[8])
{
	const float4 a = ld4(p), b = ld4(p + 4);
	v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}

static __device__ __forceinline__ void ld8(const uint16_t *p, float v[8])
{
	const uint4 u = *reinterpret_cast<const uint4 *>(p);
	const uint32_t w[4] = { u.x, u.y, u.z, u.w };
#pragma unroll
	for (int i = 0; i < 4; i++) {
		const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&w[i]));
		v[2 * i] = f.x, v[2 * i + 1] = f.y;
	}
}

static __device__ __forceinline__ uint32_t bf16x2(float a, float b)
{
	const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
	return *reinterpret_cast<const uint32_t *>(&h);
}

/* 8 values to y (fp32, or NULL) and y16 (bf16, or NULL), 16-byte aligned */
static __device__ __forceinline__ void st8(float *y, uint16_t *y16, const float v[8])
{
	if (y) {
		st4(y, make_float4(v[0], v[1], v[2], v[3]));
		st4(y + 4, make_float4(v[4], v[5], v[6], v[7]));
	}
	if (y16)
		*reinterpret_cast<uint4 *>(y16) =
			make_uint4(bf16x2(v[0], v[1]), bf16x2(v[2], v[3]), bf16x2(v[4], v[5]), bf16x2(v[6], v[7]));
}

/* LayerNorm of rows n <= 128 * C (n % 4 == 0): lane chunks of 4 (chunk c = lane + 32 k); with res,
 * x += res * gate first, written back; y and/or y16 as layernorm_kernel */
template <int C>
__global__ void __launch_bounds__(32 * WARP_ROWS)
layernorm_warp_kernel(float *__restrict__ x, const float *__restrict__ res, const float *__restrict__ gate, int m,
		      int n, float eps, const float *__restrict__ w, const float *__restrict__ b,
		      const float *__restrict__ scale, const float *__restrict__ shift, float *__restrict__ y,
		      uint16_t *__restrict__ y16)
{
	const int lane = threadIdx.x & 31, r = blockIdx.x * WARP_ROWS + (threadIdx.x >> 5), nc = n / 4;
	if (r >= m)
		return;
	const size_t ro = (size_t)r * n;
	float v[C][4];
	float s = 0.f;
#pragma unroll
	for (int k = 0; k < C; k++) {
		const int c = lane + 32 * k;
		if (c >= nc)
			continue;
		float4 e = ld4(x + ro + 4 * c);
		if (res) {
			const float4 q = ld4(res + ro + 4 * c);
			const float4 g = gate ? ld4(gate + 4 * c) : make_float4(1.f, 1.f, 1.f, 1.f);
			e = make_float4(e.x + q.x * g.x, e.y + q.y * g.y, e.z + q.z * g.z, e.w + q.w * g.w);
			st4(x + ro + 4 * c, e);
		}
		v[k][0] = e.x, v[k][1] = e.y, v[k][2] = e.z, v[k][3] = e.w;
		s += (e.x + e.y) + (e.z + e.w);
	}
	const float mu = warp_sum(s) / n;
	float ss = 0.f;
#pragma unroll
	for (int k = 0; k < C; k++)
		if (lane + 32 * k < nc)
#pragma unroll
			for (int i = 0; i < 4; i++)
				ss += (v[k][i] - mu) * (v[k][i] - mu);
	const float inv = 1.0f / sqrtf(warp_sum(ss) / n + eps);
#pragma unroll
	for (int k = 0; k < C; k++) {
		const int c = lane + 32 * k;
		if (c >= nc)
			continue;
		const float4 z = make_float4(0.f, 0.f, 0.f, 0.f);
		const float4 w4 = w ? ld4(w + 4 * c) : z, b4 = w && b ? ld4(b + 4 * c) : z;
		const float4 s4 = scale ? ld4(scale + 4 * c) : z, h4 = shift ? ld4(shift + 4 * c) : z;
		const float wv[4] = { w4.x, w4.y, w4.z, w4.w }, bv[4] = { b4.x, b4.y, b4.z, b4.w };
		const float sv[4] = { s4.x, s4.y, s4.z, s4.w }, hv[4] = { h4.x, h4.y, h4.z, h4.w };
		float o[4];
#pragma unroll
		for (int i = 0; i < 4; i++) {
			o[i] = (v[k][i] - mu) * inv;
			if (w)
				o[i] = o[i] * wv[i] + bv[i];
			if (scale)
				o[i] *= 1.0f + sv[i];
			if (shift)
				o[i] += hv[i];
		}
		if (y)
			st4(y + ro + 4 * c, make_float4(o[0], o[1], o[2], o[3]));
		if (y16)
			*reinterpret_cast<uint2 *>(y16 + ro + 4 * c) = make_uint2(bf16x2(o[0], o[1]), bf16x2(o[2], o[3]));
	}
}

/* to_heads of rows D = heads * d <= 256 * C, d % 8 == 0: lane chunks of 8 (inside one head), x fp32
 * or bf16 (T), RMSNorm over the row if w, pairs rotated if cs; y and/or y16 (heads, m, d) */
template <int C, typename T>
__global__ void __launch_bounds__(32 * WARP_ROWS)
to_heads_warp_kernel(const T *__restrict__ x, int m, int heads, int d, const float *__restrict__ w, float eps,
		     const float *__restrict__ cs, const float *__restrict__ sn, float *__restrict__ y,
		     uint16_t *__restrict__ y16)
{
	const int lane = threadIdx.x & 31, r = blockIdx.x * WARP_ROWS + (threadIdx.x >> 5), D = heads * d, nc = D / 8;
	if (r >= m)
		return;
	const int half = d / 2;
	float v[C][8];
	float ss = 0.f;
#pragma unroll
	for (int k = 0; k < C; k++) {
		const int c = lane + 32 * k;
		if (c >= nc)
			continue;
		ld8(x + (size_t)r * D + 8 * c, v[k]);
#pragma unroll
		for (int i = 0; i < 8; i++)
			ss += v[k][i] * v[k][i];
	}
	const float inv = w ? 1.0f / sqrtf(warp_sum(ss) / D + eps) : 1.0f;
#pragma unroll
	for (int k = 0; k < C; k++) {
		const int c = lane + 32 * k;
		if (c >= nc)
			continue;
		const int j = 8 * c, h = j / d, e0 = j - h * d;
		if (w) {
			float g[8];
			ld8(w + j, g);
#pragma unroll
			for (int i = 0; i < 8; i++)
				v[k][i] = v[k][i] * inv * g[i];
		}
		if (cs) {
			const float4 c4 = ld4(cs + (size_t)r * half + e0 / 2), s4 = ld4(sn + (size_t)r * half + e0 / 2);
			const float cv[4] = { c4.x, c4.y, c4.z, c4.w }, sv[4] = { s4.x, s4.y, s4.z, s4.w };
#pragma unroll
			for (int i = 0; i < 4; i++) {
				const float a = v[k][2 * i], bb = v[k][2 * i + 1];
				v[k][2 * i] = a * cv[i] - bb * sv[i];
				v[k][2 * i + 1] = a * sv[i] + bb * cv[i];
			}
		}
		const size_t o = ((size_t)h * m + r) * d + e0;
		st8(y ? y + o : NULL, y16 ? y16 + o : NULL, v[k]);
	}
}

/* from_heads of rows D = heads * d <= 256 * C, d % 8 == 0: y (m, D) row r from x (heads, m, d) */
template <int C>
__global__ void __launch_bounds__(32 * WARP_ROWS)
from_heads_warp_kernel(const float *__restrict__ x, int m, int heads, int d, float *__restrict__ y,
		       uint16_t *__restrict__ y16)
{
	const int lane = threadIdx.x & 31, r = blockIdx.x * WARP_ROWS + (threadIdx.x >> 5), D = heads * d, nc = D / 8;
	if (r >= m)
		return;
	float v[C][8];
#pragma unroll
	for (int k = 0; k < C; k++) {
		const int c = lane + 32 * k;
		if (c < nc) {
			const int j = 8 * c, h = j / d;
			ld8(x + ((size_t)h * m + r) * d + (j - h * d), v[k]);
		}
	}
#pragma unroll
	for (int k = 0; k < C; k++) {
		const int c = lane + 32 * k;
		if (c < nc)
			st8(y ? y + (size_t)r * D + 8 * c : NULL, y16 ? y16 + (size_t)r * D + 8 * c : NULL, v[k]);
	}
}

/* ---------------------------------------------------------------------------------------------- */
/* block-per-row kernels                                                                           */

/* one row per block: with res, x += res * gate first (written back: the residual add of the op
 * before); then y = (x - mean) / sqrt(var + eps) [* w + b] [* (1 + scale)] [+ shift], into y and/or
 * y16. PER > 0: the row (n <= PER * ROW_THREADS) held in registers, read once; PER == 0: any n,
 * read three times (a thread reads back only the elements it wrote). Both sum a thread's elements
 * in the same order, so they give the same bits. */
template <int PER>
__global__ void __launch_bounds__(ROW_THREADS)
layernorm_kernel(float *__restrict__ x, const float *__restrict__ res, const float *__restrict__ gate, int n,
		 float eps, const float *__restrict__ w, const float *__restrict__ b,
		 const float *__restrict__ scale, const float *__restrict__ shift, float *__restrict__ y,
		 uint16_t *__restrict__ y16)
{
	__shared__ float sh[ROW_THREADS / 32];
	const size_t r = blockIdx.x;
	float *xr = x + r * n;
	constexpr int K = PER > 0 ? PER : 1;
	float v[K] = {};
	const int steps = PER > 0 ? PER : (n + ROW_THREADS - 1) / ROW_THREADS;
	auto at = [&](int k) { /* element threadIdx.x + k * ROW_THREADS (< n) */
		if constexpr (PER > 0)
			return v[k];
		else
			return xr[threadIdx.x + k * ROW_THREADS];
	};
	float s = 0.f;
#pragma unroll
	for (int k = 0; k < steps; k++) {
		const int j = threadIdx.x + k * ROW_THREADS;
		if (j >= n)
			continue;
		float e = xr[j];
		if (res) {
			e += gate ? res[r * n + j] * gate[j] : res[r * n + j];
			xr[j] = e;
		}
		if constexpr (PER > 0)
			v[k] = e;
		s += e;
	}
	const float mu = block_sum(s, sh) / n;
	float ss = 0.f;
#pragma unroll
	for (int k = 0; k < steps; k++)
		if (threadIdx.x + k * ROW_THREADS < n) {
			const float dv = at(k) - mu;
			ss += dv * dv;
		}
	const float inv = 1.0f / sqrtf(block_sum(ss, sh) / n + eps);
#pragma unroll
	for (int k = 0; k < steps; k++) {
		const int j = threadIdx.x + k * ROW_THREADS;
		if (j >= n)
			continue;
		float o = (at(k) - mu) * inv;
		if (w)
			o = o * w[j] + (b ? b[j] : 0.0f);
		if (scale)
			o *= 1.0f + scale[j];
		if (shift)
			o += shift[j];
		if (y)
			y[r * n + j] = o;
		if (y16)
			y16[r * n + j] = to_bf16(o);
	}
}

static __device__ __forceinline__ float2 pair(float2 v) { return v; }
static __device__ __forceinline__ float2 pair(__nv_bfloat162 v) { return __bfloat1622float2(v); }

/* one row r per block: its pairs (head h, pair i) of x (fp32 or bf16 pairs, T), RMSNorm-ed over
 * the row if w, rotated if cs, into y (heads, m, half) pairs. PER > 0: the row's pairs (at most
 * PER * ROW_THREADS) loaded into registers all at once before anything is written (three times
 * the loads in flight of a loop that stores between them); PER == 0: any width, read twice with
 * the norm. */
template <int PER, typename T>
__global__ void __launch_bounds__(ROW_THREADS)
to_heads_kernel(const T *__restrict__ x, int m, int heads, int half, const float2 *__restrict__ w, float eps,
		const float *__restrict__ cs, const float *__restrict__ sn, float2 *__restrict__ y,
		__nv_bfloat162 *__restrict__ y16)
{
	__shared__ float sh[ROW_THREADS / 32];
	const size_t r = blockIdx.x;
	const int pairs = heads * half, steps = PER > 0 ? PER : (pairs + ROW_THREADS - 1) / ROW_THREADS;
	const T *xr = x + r * pairs;
	float2 v[PER > 0 ? PER : 1] = {};
	auto at = [&](int k) {
		if constexpr (PER > 0)
			return v[k];
		else
			return pair(xr[threadIdx.x + k * ROW_THREADS]);
	};
	if constexpr (PER > 0) {
#pragma unroll
		for (int k = 0; k < PER; k++)
			if (threadIdx.x + k * ROW_THREADS < pairs)
				v[k] = pair(xr[threadIdx.x + k * ROW_THREADS]);
	}
	float inv = 1.0f;
	if (w) {
		float ss = 0.f;
#pragma unroll
		for (int k = 0; k < steps; k++)
			if (threadIdx.x + k * ROW_THREADS < pairs) {
				const float2 e = at(k);
				ss += e.x * e.x + e.y * e.y;
			}
		inv = 1.0f / sqrtf(block_sum(ss, sh) / (2 * pairs) + eps);
	}
#pragma unroll
	for (int k = 0; k < steps; k++) {
		const int j = threadIdx.x + k * ROW_THREADS;
		if (j >= pairs)
			continue;
		const int h = j / half, i = j - h * half;
		float2 e = at(k);
		if (w) {
			const float2 g = w[j];
			e = make_float2(e.x * inv * g.x, e.y * inv * g.y);
		}
		if (cs) {
			const float c = cs[r * half + i], s = sn[r * half + i];
			e = make_float2(e.x * c - e.y * s, e.x * s + e.y * c);
		}
		const size_t o = ((size_t)h * m + r) * half + i;
		if (y)
			y[o] = e;
		if (y16)
			y16[o] = __floats2bfloat162_rn(e.x, e.y);
	}
}

/* one row r of the output per block: y (m, heads*d) from x (heads, m, d) (pairs); PER as in
 * to_heads */
template <int PER>
__global__ void __launch_bounds__(ROW_THREADS)
from_heads_kernel(const float2 *__restrict__ x, int m, int heads, int half, float2 *__restrict__ y,
		  __nv_bfloat162 *__restrict__ y16)
{
	const size_t r = blockIdx.x;
	const int pairs = heads * half, steps = PER > 0 ? PER : (pairs + ROW_THREADS - 1) / ROW_THREADS;
	auto src = [&](int j) {
		const int h = j / half;
		return pair(x[((size_t)h * m + r) * half + (j - h * half)]);
	};
	float2 v[PER > 0 ? PER : 1] = {};
	if constexpr (PER > 0) {
#pragma unroll
		for (int k = 0; k < PER; k++)
			if (threadIdx.x + k * ROW_THREADS < pairs)
				v[k] = src(threadIdx.x + k * ROW_THREADS);
	}
#pragma unroll
	for (int k = 0; k < steps; k++) {
		const int j = threadIdx.x + k * ROW_THREADS;
		if (j >= pairs)
			continue;
		float2 e;
		if constexpr (PER > 0)
			e = v[k];
		else
			e = src(j);
		if (y)
			y[r * pairs + j] = e;
		if (y16)
			y16[r * pairs + j] = __floats2bfloat162_rn(e.x, e.y);
	}
}

__global__ void gelu_tanh_kernel(float *__restrict__ x, size_t n, uint16_t *__restrict__ x16)
{
	const float k = 0.7978845608028654f; /* sqrt(2/pi) */
	for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x) {
		const float v = x[e], g = 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v)));
		x[e] = g;
		if (x16)
			x16[e] = to_bf16(g);
	}
}

/* one row r per block: x (m, n) += y * gate (gate (n) or NULL) */
__global__ void __launch_bounds__(ROW_THREADS)
add_gated_kernel(float *__restrict__ x, const float *__restrict__ y, const float *__restrict__ gate, int n,
		 uint16_t *__restrict__ x16)
{
	const size_t r0 = (size_t)blockIdx.x * n;
	for (int j = threadIdx.x; j < n; j += ROW_THREADS) {
		const size_t e = r0 + j;
		const float v = x[e] + (gate ? y[e] * gate[j] : y[e]);
		x[e] = v;
		if (x16)
			x16[e] = to_bf16(v);
	}
}

/* y (rows of cols, row stride ldy) = bf16(x (n = rows * cols, contiguous)) */
__global__ void to_bf16_kernel(const float *__restrict__ x, uint16_t *__restrict__ y, size_t n, size_t cols,
			       size_t ldy)
{
	for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x)
		y[e / cols * ldy + e % cols] = to_bf16(x[e]);
}

/* ---------------------------------------------------------------------------------------------- */
/* launchers                                                                                       */

/* p (or NULL) aligned to a bytes */
static bool aligned(const void *p, unsigned a) { return ((uintptr_t)p & (a - 1)) == 0; }

static unsigned warp_grid(int m) { return (unsigned)((m + WARP_ROWS - 1) / WARP_ROWS); }

static unsigned grid_for(size_t n)
{
	size_t b = (n + 255) / 256;
	return (unsigned)(b < 1 ? 1 : b > (1u << 20) ? (1u << 20) : b);
}

static int launched(const char *op)
{
	cudaError_t e = cudaGetLastError();
	if (e != cudaSuccess) {
		fprintf(stderr, "%s: launch failed: %s\n", op, cudaGetErrorString(e));
		return -1;
	}
	return 0;
}

static int bad_rows(const char *op, int m, int n)
{
	if (m < 0 || m > 2147483647 || n < 1) {
		fprintf(stderr, "%s: bad shape (%d, %d)\n", op, m, n);
		return 1;
	}
	return 0;
}

extern "C" int dg_dit_layernorm(float *x, const float *r, const float *gate, int m, int n, float eps, const float *w,
				const float *b, const float *scale, const float *shift, float *y, uint16_t *y16,
				dg_stream stream)
{
	if (bad_rows("dit_layernorm", m, n))
		return -1;
	cudaStream_t st = (cudaStream_t)stream;
	const void *a16[] = { x, r, gate, w, b, scale, shift, y };
	bool warp = n % 4 == 0 && n <= 2048 && aligned(y16, 8);
	for (int i = 0; i < 8; i++)
		warp = warp && aligned(a16[i], 16);
	const unsigned G = warp_grid(m), T = 32 * WARP_ROWS;
	if (m && warp && n <= 512)
		layernorm_warp_kernel<4><<<G, T, 0, st>>>(x, r, gate, m, n, eps, w, b, scale, shift, y, y16);
	else if (m && warp && n <= 1024)
		layernorm_warp_kernel<8><<<G, T, 0, st>>>(x, r, gate, m, n, eps, w, b, scale, shift, y, y16);
	else if (m && warp && n <= 1536)
		layernorm_warp_kernel<12><<<G, T, 0, st>>>(x, r, gate, m, n, eps, w, b, scale, shift, y, y16);
	else if (m && warp)
		layernorm_warp_kernel<16><<<G, T, 0, st>>>(x, r, gate, m, n, eps, w, b, scale, shift, y, y16);
	else if (m && n <= 8 * ROW_THREADS)
		layernorm_kernel<8><<<m, ROW_THREADS, 0, st>>>(x, r, gate, n, eps, w, b, scale, shift, y, y16);
	else if (m && n <= 24 * ROW_THREADS)
		layernorm_kernel<24><<<m, ROW_THREADS, 0, st>>>(x, r, gate, n, eps, w, b, scale, shift, y, y16);
	else if (m)
		layernorm_kernel<0><<<m, ROW_THREADS, 0, st>>>(x, r, gate, n, eps, w, b, scale, shift, y, y16);
	return launched("dit_layernorm");
}

static int bad_heads(const char *op, int m, int heads, int d)
{
	if (m < 0 || heads < 1 || d < 2 || d % 2) {
		fprintf(stderr, "%s: bad shape m=%d heads=%d d=%d (d even)\n", op, m, heads, d);
		return 1;
	}
	return 0;
}

/* whether rows of heads x d go to the warp kernels: d % 8 == 0, at most 2048 wide, the operands
 * 16-byte aligned; and the kernels' chunks per lane for them */
static bool heads_warp(int heads, int d, const void *const *ptrs, int count)
{
	bool ok = d % 8 == 0 && (long)heads * d <= 2048;
	for (int i = 0; i < count; i++)
		ok = ok && aligned(ptrs[i], 16);
	return ok;
}

static int chunks(int D) { return D <= 512 ? 2 : D <= 1024 ? 4 : D <= 1536 ? 6 : 8; }

template <typename T>
static void to_heads_launch(const T *x, int m, int heads, int half, const float2 *w, float eps, const float *cos,
			    const float *sin, float2 *y, __nv_bfloat162 *y16, cudaStream_t st)
{
	int pairs = heads * half, d = 2 * half;
	const void *ptrs[] = { x, w, cos, sin, y, y16 };
	if (m && heads_warp(heads, d, ptrs, 6)) {
		using E = std::conditional_t<std::is_same_v<T, float2>, float, uint16_t>;
		const E *xe = reinterpret_cast<const E *>(x);
		const float *wf = reinterpret_cast<const float *>(w);
		float *yf = reinterpret_cast<float *>(y);
		uint16_t *yh = reinterpret_cast<uint16_t *>(y16);
		const unsigned G = warp_grid(m), TH = 32 * WARP_ROWS;
		switch (chunks(heads * d)) {
		case 2: to_heads_warp_kernel<2, E><<<G, TH, 0, st>>>(xe, m, heads, d, wf, eps, cos, sin, yf, yh); break;
		case 4: to_heads_warp_kernel<4, E><<<G, TH, 0, st>>>(xe, m, heads, d, wf, eps, cos, sin, yf, yh); break;
		case 6: to_heads_warp_kernel<6, E><<<G, TH, 0, st>>>(xe, m, heads, d, wf, eps, cos, sin, yf, yh); break;
		default: to_heads_warp_kernel<8, E><<<G, TH, 0, st>>>(xe, m, heads, d, wf, eps, cos, sin, yf, yh); break;
		}
	} else if (m && pairs <= 4 * ROW_THREADS)
		to_heads_kernel<4><<<m, ROW_THREADS, 0, st>>>(x, m, heads, half, w, eps, cos, sin, y, y16);
	else if (m && pairs <= 12 * ROW_THREADS)
		to_heads_kernel<12><<<m, ROW_THREADS, 0, st>>>(x, m, heads, half, w, eps, cos, sin, y, y16);
	else if (m)
		to_heads_kernel<0><<<m, ROW_THREADS, 0, st>>>(x, m, heads, half, w, eps, cos, sin, y, y16);
}

extern "C" int dg_dit_to_heads(const float *x, const uint16_t *x16, int m, int heads, int d, const float *norm_w,
			       float eps, const float *cos, const float *sin, float *y, uint16_t *y16, dg_stream stream)
{
	if (bad_heads("dit_to_heads", m, heads, d))
		return -1;
	const float2 *w2 = (const float2 *)norm_w;
	float2 *y2 = (float2 *)y;
	__nv_bfloat162 *h2 = (__nv_bfloat162 *)y16;
	cudaStream_t st = (cudaStream_t)stream;
	if (x16)
		to_heads_launch((const __nv_bfloat162 *)x16, m, heads, d / 2, w2, eps, cos, sin, y2, h2, st);
	else
		to_heads_launch((const float2 *)x, m, heads, d / 2, w2, eps, cos, sin, y2, h2, st);
	return launched("dit_to_heads");
}

extern "C" int dg_dit_from_heads(const float *x, int m, int heads, int d, float *y, uint16_t *y16, dg_stream stream)
{
	if (bad_heads("dit_from_heads", m, heads, d))
		return -1;
	cudaStream_t st = (cudaStream_t)stream;
	const float2 *x2 = reinterpret_cast<const float2 *>(x);
	float2 *y2 = reinterpret_cast<float2 *>(y);
	__nv_bfloat162 *h2 = reinterpret_cast<__nv_bfloat162 *>(y16);
	int pairs = heads * (d / 2);
	const void *ptrs[] = { x, y, y16 };
	if (m && heads_warp(heads, d, ptrs, 3)) {
		const unsigned G = warp_grid(m), TH = 32 * WARP_ROWS;
		switch (chunks(heads * d)) {
		case 2: from_heads_warp_kernel<2><<<G, TH, 0, st>>>(x, m, heads, d, y, y16); break;
		case 4: from_heads_warp_kernel<4><<<G, TH, 0, st>>>(x, m, heads, d, y, y16); break;
		case 6: from_heads_warp_kernel<6><<<G, TH, 0, st>>>(x, m, heads, d, y, y16); break;
		default: from_heads_warp_kernel<8><<<G, TH, 0, st>>>(x, m, heads, d, y, y16); break;
		}
	} else if (m && pairs <= 4 * ROW_THREADS)
		from_heads_kernel<4><<<m, ROW_THREADS, 0, st>>>(x2, m, heads, d / 2, y2, h2);
	else if (m && pairs <= 12 * ROW_THREADS)
		from_heads_kernel<12><<<m, ROW_THREADS, 0, st>>>(x2, m, heads, d / 2, y2, h2);
	else if (m)
		from_heads_kernel<0><<<m, ROW_THREADS, 0, st>>>(x2, m, heads, d / 2, y2, h2);
	return launched("dit_from_heads");
}

extern "C" int dg_dit_gelu_tanh(float *x, uint64_t n, uint16_t *x16, dg_stream stream)
{
	if (n)
		gelu_tanh_kernel<<<grid_for(n), 256, 0, (cudaStream_t)stream>>>(x, n, x16);
	return launched("dit_gelu_tanh");
}

extern "C" int dg_dit_add_gated(float *x, const float *y, const float *gate, int m, int n, uint16_t *x16,
				dg_stream stream)
{
	if (bad_rows("dit_add_gated", m, n))
		return -1;
	if (m)
		add_gated_kernel<<<m, ROW_THREADS, 0, (cudaStream_t)stream>>>(x, y, gate, n, x16);
	return launched("dit_add_gated");
}

extern "C" int dg_to_bf16(const float *x, uint16_t *y, uint64_t n, dg_stream stream)
{
	if (n)
		to_bf16_kernel<<<grid_for(n), 256, 0, (cudaStream_t)stream>>>(x, y, n, n, n);
	return launched("to_bf16");
}

extern "C" int dg_to_bf16_rows(const float *x, int rows, int cols, uint16_t *y, int ldy, dg_stream stream)
{
	if (rows < 0 || cols < 1 || ldy < cols) {
		fprintf(stderr, "to_bf16_rows: %d rows of %d, row stride %d\n", rows, cols, ldy);
		return -1;
	}
	const size_t n = (size_t)rows * cols;
	if (n)
		to_bf16_kernel<<<grid_for(n), 256, 0, (cudaStream_t)stream>>>(x, y, n, cols, ldy);
	return launched("to_bf16_rows");
}
