/*
 * peer_kmeans.cu: svg2's k-means on the device (docs/spec.md §3.6, src/policy/peers.h), the twin of
 * peers.c svg2_kmeans. Per Lloyd iteration:
 *   norms    |c_a|^2 in double, components in order (exact products: the CPU's bits);
 *   assign   a thread per token: argmax_a 2 x.c_a - |c_a|^2, the dot in double from exact products
 *            in component order (the CPU's dgemm adds them in its own order: equal but at fp64
 *            near-ties), ties to the lower cluster;
 *   runs     the tokens ordered by (cluster, j >= text, j): counts per run (integer atomics), their
 *            prefix sums, then a thread per run placing its tokens in token order (stable);
 *   update   a CTA per cluster, a thread per component: the double sum of its members in token
 *            order over their count, rounded to fp32 (the CPU's bits given the same labels); an
 *            empty cluster keeps its centroid.
 * Build: part of dsgapkernels; test: tests/gpu_meta.c (--peers).
 */
#include "dsgap_kernels.h"
#include "meta_common.cuh"

namespace {

/* c[a] = x[a n / kc] (the CPU's evenly spaced start); grid kc, D threads */
template <int D>
__global__ void init_rows(const uint16_t *x, int n, int kc, float *c)
{
	const int a = blockIdx.x;
	c[(size_t)a * D + threadIdx.x] = bf2f(x[(size_t)((int64_t)a * n / kc) * D + threadIdx.x]);
}

/* cn (kc) = |c_a|^2 in double, in component order */
template <int D>
__global__ void norms(const float *c, int kc, double *cn)
{
	const int a = blockIdx.x * blockDim.x + threadIdx.x;
	if (a >= kc)
		return;
	double s = 0;
	for (int e = 0; e < D; e++)
		s = __dadd_rn(s, __dmul_rn((double)c[(size_t)a * D + e], (double)c[(size_t)a * D + e]));
	cn[a] = s;
}

/* labels (n): a thread per token, its row staged in shared memory (padded against bank conflicts) */
#define KM_TOK 64
template <int D>
__global__ void __launch_bounds__(KM_TOK) assign(const uint16_t *x, int n, const float *c, const double *cn, int kc,
						 int32_t *labels)
{
	__shared__ float xs[KM_TOK][D + 1];
	const int t = threadIdx.x, i0 = blockIdx.x * KM_TOK;
	for (int e = t; e < KM_TOK * D; e += KM_TOK) {
		const int r = e / D, col = e % D;
		xs[r][col] = i0 + r < n ? bf2f(x[(size_t)(i0 + r) * D + col]) : 0.f;
	}
	__syncthreads();
	if (i0 + t >= n)
		return;
	int best = 0;
	double bs = 0;
	for (int a = 0; a < kc; a++) {
		double dot = 0;
		for (int e = 0; e < D; e++)
			dot = __fma_rn((double)xs[t][e], (double)c[(size_t)a * D + e], dot); /* exact products */
		const double s = __dsub_rn(2.0 * dot, cn[a]);
		if (a == 0 || s > bs)
			best = a, bs = s;
	}
	labels[i0 + t] = best;
}

/* cnt (2 kc): tokens per (cluster, side) run */
__global__ void count_runs(const int32_t *labels, int n, int text, int32_t *cnt)
{
	const int j = blockIdx.x * blockDim.x + threadIdx.x;
	if (j < n)
		atomicAdd(&cnt[2 * labels[j] + (j >= text)], 1);
}

/* off (runs + 1) = prefix sums of cnt; one thread */
__global__ void run_offsets(const int32_t *cnt, int runs, int32_t *off)
{
	int at = 0;
	off[0] = 0;
	for (int r = 0; r < runs; r++)
		off[r + 1] = at += cnt[r];
}

/* perm: a thread per run writes its tokens in token order */
__global__ void place_runs(const int32_t *labels, int n, int text, const int32_t *off, int runs, int32_t *perm)
{
	const int r = blockIdx.x * blockDim.x + threadIdx.x;
	if (r >= runs)
		return;
	int at = off[r];
	const int lo = r & 1 ? text : 0, hi = r & 1 ? n : min(text, n);
	for (int j = lo; j < hi; j++)
		if (2 * labels[j] + (r & 1) == r)
			perm[at++] = j;
}

/* c[a] = the double sum of cluster a's members (positions off[2a] .. off[2a+2] of perm: token order)
 * over their count; grid kc, D threads */
template <int D>
__global__ void update(const uint16_t *x, const int32_t *perm, const int32_t *off, float *c)
{
	const int a = blockIdx.x, e = threadIdx.x, lo = off[2 * a], hi = off[2 * a + 2];
	if (hi == lo)
		return;
	double s = 0;
	for (int p = lo; p < hi; p++)
		s = __dadd_rn(s, (double)bf2f(x[(size_t)perm[p] * D + e]));
	c[(size_t)a * D + e] = (float)__ddiv_rn(s, (double)(hi - lo));
}

template <int D>
int run(const uint16_t *x, int n, float *c, int kc, int iters, int init, int text, int32_t *labels, int32_t *perm,
	int32_t *cnt, cudaStream_t st)
{
	const int runs = 2 * kc;
	double *cn = NULL;
	int32_t *off = NULL;
	DGM_CUDA(cudaMallocAsync((void **)&cn, (size_t)kc * 8, st));
	DGM_CUDA(cudaMallocAsync((void **)&off, (size_t)(runs + 1) * 4, st));
	if (init)
		init_rows<D><<<kc, D, 0, st>>>(x, n, kc, c);
	for (int it = 0; it < iters; it++) {
		norms<D><<<(kc + 127) / 128, 128, 0, st>>>(c, kc, cn);
		assign<D><<<(n + KM_TOK - 1) / KM_TOK, KM_TOK, 0, st>>>(x, n, c, cn, kc, labels);
		DGM_CUDA(cudaMemsetAsync(cnt, 0, (size_t)runs * 4, st));
		count_runs<<<(n + 255) / 256, 256, 0, st>>>(labels, n, text, cnt);
		run_offsets<<<1, 1, 0, st>>>(cnt, runs, off);
		place_runs<<<(runs + 127) / 128, 128, 0, st>>>(labels, n, text, off, runs, perm);
		update<D><<<kc, D, 0, st>>>(x, perm, off, c);
	}
	DGM_LAUNCHED();
	DGM_CUDA(cudaFreeAsync(cn, st));
	DGM_CUDA(cudaFreeAsync(off, st));
	return 0;
}

} // namespace

extern "C" int dg_peer_kmeans(const uint16_t *x, int n, int d, float *c, int kc, int iters, int init, int text,
			      int32_t *labels, int32_t *perm, int32_t *cnt, dg_stream stream)
{
	DGM_ARG(d == 64 || d == 128, "peer kmeans: head_dim %d (64 or 128 supported)", d);
	DGM_ARG(n >= 1 && kc >= 1 && kc <= n && iters >= 1 && text >= 0, "peer kmeans: n %d, %d clusters, %d iterations, "
		"text %d", n, kc, iters, text);
	DGM_ARG(x && c && labels && perm && cnt, "peer kmeans: NULL argument");
	cudaStream_t st = (cudaStream_t)stream;
	return d == 64 ? run<64>(x, n, c, kc, iters, init, text, labels, perm, cnt, st)
		       : run<128>(x, n, c, kc, iters, init, text, labels, perm, cnt, st);
}
