/*
 * dit_ops.cu: the elementwise and row ops of the DiT engine's GPU op table (src/wan_ops_gpu.c), the
 * twins of src/wan_ops_cpu.c: LayerNorm (affine and/or modulation, after a gated residual add), split into heads with RMSNorm
 * over the row and RoPE on interleaved pairs, merge heads, GELU-tanh, gated residual add, fp32 -> bf16.
 * fp32 activations in and out (DESIGN §7: fp32 norms, modulation, residual stream); every op that
 * makes the input of a GEMM or an attention may also write a bf16 copy of its output (y16, NULL:
 * none), so that no separate conversion pass reads the fp32 buffer again. Row statistics in fp32,
 * two passes (mean, then centred squares). The row ops take one row per block, so that no thread
 * divides a 64-bit index. Launchers declared in dsgap_kernels.h.
 * Check: tests/gpu_dit.c (against the CPU op table and fp64, DESIGN §9).
 */
#include <cuda_bf16.h>
#include <stdio.h>

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

/* one row r of the output per block: y (m, heads*d) from x (heads, m, d); PER as in to_heads */
template <int PER>
__global__ void __launch_bounds__(ROW_THREADS)
from_heads_kernel(const float2 *__restrict__ x, int m, int heads, int half, float2 *__restrict__ y,
		  __nv_bfloat162 *__restrict__ y16)
{
	const size_t r = blockIdx.x;
	const int pairs = heads * half, steps = PER > 0 ? PER : (pairs + ROW_THREADS - 1) / ROW_THREADS;
	auto src = [&](int j) {
		const int h = j / half;
		return x[((size_t)h * m + r) * half + (j - h * half)];
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

__global__ void to_bf16_kernel(const float *__restrict__ x, uint16_t *__restrict__ y, size_t n)
{
	for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x)
		y[e] = to_bf16(x[e]);
}

/* ---------------------------------------------------------------------------------------------- */
/* launchers                                                                                       */

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
	if (m && n <= 8 * ROW_THREADS)
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

template <typename T>
static void to_heads_launch(const T *x, int m, int heads, int half, const float2 *w, float eps, const float *cos,
			    const float *sin, float2 *y, __nv_bfloat162 *y16, cudaStream_t st)
{
	int pairs = heads * half;
	if (m && pairs <= 4 * ROW_THREADS)
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
	const float2 *x2 = (const float2 *)x;
	float2 *y2 = (float2 *)y;
	__nv_bfloat162 *h2 = (__nv_bfloat162 *)y16;
	cudaStream_t st = (cudaStream_t)stream;
	int pairs = heads * (d / 2);
	if (m && pairs <= 4 * ROW_THREADS)
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
		to_bf16_kernel<<<grid_for(n), 256, 0, (cudaStream_t)stream>>>(x, y, n);
	return launched("to_bf16");
}
