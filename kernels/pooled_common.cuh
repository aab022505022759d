/*
 * pooled_common.cuh: the pooled-score pieces that pooled_scores.cu (the ladder's pooled scores) and
 * peer_scores.cu (the block peers' scores) share. Not a public header.
 *   block_mean  means over raster blocks of bs rows of bf16 x (minus sub, or not): fp32 sums in row
 *               order, then divided by the count, as the CPU twins (dg_scores_pooled,
 *               peers.c block_means) do;
 *   logits      S (M, N) = scale * A (M, K) . B (N, K)^T (+ add (N)) by an fp32 SIMT tile product
 *               (64 x 64 per CTA, 4 x 4 per thread); each dot is one chain of fmaf in k order from
 *               +0, so it equals the CPU's sequential fmaf loop bit for bit; A and B are loaders
 *               (rows_f32, rows_bf16, or a gather such as xattention's antidiagonal rows).
 */
#ifndef DG_POOLED_COMMON_CUH
#define DG_POOLED_COMMON_CUH

#include "meta_common.cuh"

namespace pooled {

/* mean (nb, D) over raster blocks of bs rows of x (n, D) bf16, each value minus sub[c] (sub (D) or
 * NULL); logw (nb) = logf(block size), or NULL. Grid nb, D threads (thread c: component c). */
template <int D>
__global__ void block_mean(const uint16_t *x, int n, int bs, const float *sub, float *mean, float *logw)
{
	const int blk = blockIdx.x, c = threadIdx.x;
	const int a = blk * bs, b = min(a + bs, n);
	const float m = sub ? sub[c] : 0.f;
	float s = 0.f;
	for (int j = a; j < b; j++) {
		const float v = bf2f(x[(size_t)j * D + c]);
		s += sub ? __fsub_rn(v, m) : v;
	}
	mean[(size_t)blk * D + c] = s / (float)(b - a);
	if (logw && c == 0)
		logw[blk] = logf((float)(b - a));
}

/* row r of an (rows, D) fp32 or bf16 matrix */
template <int D>
struct rows_f32 {
	const float *p;
	__device__ float operator()(int r, int c) const { return p[(size_t)r * D + c]; }
};
template <int D>
struct rows_bf16 {
	const uint16_t *p;
	__device__ float operator()(int r, int c) const { return bf2f(p[(size_t)r * D + c]); }
};

/* S (M, N) = scale * A . B^T over K (a multiple of 32) (+ add[j]); grid (ceil(N/64), ceil(M/64)), 256 threads */
template <class LA, class LB>
__global__ void __launch_bounds__(256) logits(LA A, int M, LB B, int N, int K, float scale, const float *add, float *S)
{
	__shared__ float as[32][64 + 1], bs[32][64 + 1]; /* a K-slice of 32: [c][row] */
	const int tid = threadIdx.x, ty = tid >> 4, tx = tid & 15;
	const int g0 = blockIdx.y * 64, j0 = blockIdx.x * 64;
	float acc[4][4];
#pragma unroll
	for (int i = 0; i < 4; i++)
#pragma unroll
		for (int j = 0; j < 4; j++)
			acc[i][j] = 0.f;
	for (int c0 = 0; c0 < K; c0 += 32) {
		for (int e = tid; e < 64 * 32; e += 256) {
			const int r = e / 32, c = e % 32;
			const int g = g0 + r, j = j0 + r;
			as[c][r] = g < M ? A(g, c0 + c) : 0.f;
			bs[c][r] = j < N ? B(j, c0 + c) : 0.f;
		}
		__syncthreads();
#pragma unroll 8
		for (int c = 0; c < 32; c++) {
			float a[4], b[4];
#pragma unroll
			for (int i = 0; i < 4; i++) {
				a[i] = as[c][ty + 16 * i];
				b[i] = bs[c][tx + 16 * i];
			}
#pragma unroll
			for (int i = 0; i < 4; i++)
#pragma unroll
				for (int j = 0; j < 4; j++)
					acc[i][j] = __fmaf_rn(a[i], b[j], acc[i][j]);
		}
		__syncthreads();
	}
#pragma unroll
	for (int i = 0; i < 4; i++)
#pragma unroll
		for (int j = 0; j < 4; j++) {
			const int g = g0 + ty + 16 * i, jj = j0 + tx + 16 * j;
			if (g < M && jj < N) {
				const float v = __fmul_rn(scale, acc[i][j]);
				S[(size_t)g * N + jj] = add ? __fadd_rn(v, add[jj]) : v;
			}
		}
}

template <class LA, class LB>
static inline void launch_logits(LA A, int M, LB B, int N, int K, float scale, const float *add, float *S, cudaStream_t st)
{
	const dim3 grid((N + 63) / 64, (M + 63) / 64);
	logits<<<grid, 256, 0, st>>>(A, M, B, N, K, scale, add, S);
}

} // namespace pooled

#endif
