/*
 * peer_kmeans.cu: svg2's k-means on the device (docs/spec.md §3.6, src/policy/peers.h), the twin of
 * peers.c svg2_kmeans. Per Lloyd iteration:
 *   norms    |c_a|^2 in double, components in order (exact products: the CPU's bits);
 *   assign   a thread per token: argmax_a 2 x.c_a - |c_a|^2, the dot in double from exact products
 *            in component order (the CPU's dgemm adds them in its own order: equal but at fp64
 *            near-ties), ties to the lower cluster; the centroids in tiles of eight rows as
 *            doubles in shared memory, eight chains at once (the same sums, compared in cluster
 *            order);
 *   runs     each token's run key 2 cluster + (j >= text) and the runs' counts (integer atomics),
 *            their prefix sums, then the tokens ordered by run with CUB's stable radix sort (token
 *            order within a run: the keys' values are the tokens in ascending order);
 *   update   a CTA per cluster, a thread per component: the double sum of its members in token
 *            order over their count, rounded to fp32 (the CPU's bits given the same labels), the
 *            members' rows staged through shared memory a tile ahead of the sum; an empty cluster
 *            keeps its centroid.
 * Build: part of dsgapkernels; test: tests/kernels/gpu_meta.c (--peers: svg2's key lists identical to the
 * CPU's over a cold and a warm step).
 */
#include "dsgap_kernels.h"
#include "meta_common.cuh"

#include <cub/cub.cuh>

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

/* labels (n): a thread per token, its row staged in shared memory (padded against bank conflicts);
 * the centroids in tiles of KM_CHAINS rows, converted to double once into shared memory (each read is
 * a broadcast: every thread of the CTA reads the same entry), one fp64 chain per row of the tile, each
 * summed in component order */
#define KM_TOK 64
#define KM_CHAINS 8
template <int D>
__global__ void __launch_bounds__(KM_TOK) assign(const uint16_t *x, int n, const float *c, const double *cn, int kc,
						 int32_t *labels)
{
	__shared__ float xs[KM_TOK][D + 1];
	__shared__ __align__(16) double cs[KM_CHAINS][D];
	const int t = threadIdx.x, i0 = blockIdx.x * KM_TOK;
	for (int e = t; e < KM_TOK * D; e += KM_TOK) {
		const int r = e / D, col = e % D;
		xs[r][col] = i0 + r < n ? bf2f(x[(size_t)(i0 + r) * D + col]) : 0.f;
	}
	const bool live = i0 + t < n;
	int best = 0;
	double bs = 0;
	for (int a = 0; a < kc; a += KM_CHAINS) {
		const int m = min(KM_CHAINS, kc - a);
		__syncthreads(); /* the last tile is read (and, the first time, xs written) */
		for (int e = t; e < KM_CHAINS * D; e += KM_TOK) /* rows past kc: zeros, never compared */
			cs[e / D][e % D] = e / D < m ? (double)c[(size_t)(a + e / D) * D + e % D] : 0.0;
		__syncthreads();
		if (!live)
			continue;
		double dot[KM_CHAINS] = {};
#pragma unroll 2
		for (int e = 0; e < D; e += 2) {
			const double x0 = xs[t][e], x1 = xs[t][e + 1];
#pragma unroll
			for (int u = 0; u < KM_CHAINS; u++) { /* exact products, in component order */
				const double2 cv = *reinterpret_cast<const double2 *>(&cs[u][e]);
				dot[u] = __fma_rn(x1, cv.y, __fma_rn(x0, cv.x, dot[u]));
			}
		}
#pragma unroll
		for (int u = 0; u < KM_CHAINS; u++) {
			if (u >= m)
				break;
			const double s = __dsub_rn(2.0 * dot[u], cn[a + u]);
			if (a + u == 0 || s > bs)
				best = a + u, bs = s;
		}
	}
	if (live)
		labels[i0 + t] = best;
}

/* key (n) = the token's run 2 labels[j] + (j >= text); cnt (2 kc) += tokens per run */
__global__ void run_keys(const int32_t *labels, int n, int text, uint32_t *key, int32_t *cnt)
{
	const int j = blockIdx.x * blockDim.x + threadIdx.x;
	if (j >= n)
		return;
	const uint32_t r = 2u * (uint32_t)labels[j] + (j >= text);
	key[j] = r;
	atomicAdd(&cnt[r], 1);
}

/* off (runs + 1) = prefix sums of cnt; one thread */
__global__ void run_offsets(const int32_t *cnt, int runs, int32_t *off)
{
	int at = 0;
	off[0] = 0;
	for (int r = 0; r < runs; r++)
		off[r + 1] = at += cnt[r];
}

/* tok (n) = 0 .. n-1, the sort's values */
__global__ void iota(int32_t *tok, int n)
{
	const int j = blockIdx.x * blockDim.x + threadIdx.x;
	if (j < n)
		tok[j] = j;
}

/* c[a] = the double sum of cluster a's members (positions off[2a] .. off[2a+2] of perm: token order)
 * over their count; grid kc, D threads. The members' rows come through shared memory in tiles of
 * KM_TILE (every thread loads 16 bytes of a row), the next tile's loads in flight while each thread adds
 * its component of the current one in order (a cluster of thousands of members is one CTA's chain) */
#define KM_TILE 64
template <int D>
__global__ void __launch_bounds__(D) update(const uint16_t *x, const int32_t *perm, const int32_t *off, float *c)
{
	constexpr int TPR = D / 8, RPP = D / TPR, PASSES = KM_TILE / RPP; /* threads a row, rows a pass */
	__shared__ __align__(16) uint16_t xs[2][KM_TILE][D];
	const int a = blockIdx.x, e = threadIdx.x, lo = off[2 * a], hi = off[2 * a + 2];
	if (hi == lo)
		return;
	const int ntiles = (hi - lo + KM_TILE - 1) / KM_TILE, rr = e / TPR, col = e % TPR * 8;
	uint4 next[PASSES];
	auto load = [&](int t) { /* tile t's rows into registers */
#pragma unroll
		for (int u = 0; u < PASSES; u++) {
			const int q = lo + t * KM_TILE + u * RPP + rr;
			next[u] = q < hi ? *reinterpret_cast<const uint4 *>(x + (size_t)__ldg(perm + q) * D + col)
					 : make_uint4(0, 0, 0, 0);
		}
	};
	auto store = [&](int buf) {
#pragma unroll
		for (int u = 0; u < PASSES; u++)
			*reinterpret_cast<uint4 *>(&xs[buf][u * RPP + rr][col]) = next[u];
	};
	load(0);
	store(0);
	__syncthreads();
	double s = 0;
	for (int t = 0; t < ntiles; t++) {
		if (t + 1 < ntiles)
			load(t + 1);
		/* the whole tile, its shared loads issued ahead of the chain of adds: the rows past hi are
		 * loaded as +0, and s + 0 = s exactly (s is never -0: it starts at +0) */
#pragma unroll 16
		for (int r = 0; r < KM_TILE; r++)
			s = __dadd_rn(s, (double)bf2f(xs[t & 1][r][e]));
		if (t + 1 < ntiles)
			store((t + 1) & 1);
		__syncthreads();
	}
	c[(size_t)a * D + e] = (float)__ddiv_rn(s, (double)(hi - lo));
}

template <int D>
int run(const uint16_t *x, int n, float *c, int kc, int iters, int init, int text, int32_t *labels, int32_t *perm,
	int32_t *cnt, cudaStream_t st)
{
	const int runs = 2 * kc;
	int bits = 1;
	while ((1 << bits) < runs)
		bits++;
	size_t sort_bytes = 0;
	DGM_CUDA(cub::DeviceRadixSort::SortPairs(NULL, sort_bytes, (const uint32_t *)NULL, (uint32_t *)NULL,
						 (const int32_t *)NULL, (int32_t *)NULL, n, 0, bits, st));
	/* scratch: cn (kc) | key, sorted key, tok (n each) | off (runs + 1) | the sort's temporary */
	const size_t a_cn = (size_t)kc * 8, a_keys = (size_t)3 * n * 4, a_off = ((size_t)runs + 1) * 4;
	char *base = NULL;
	DGM_CUDA(cudaMallocAsync((void **)&base, a_cn + a_keys + a_off + sort_bytes + 256, st));
	double *cn = (double *)base;
	uint32_t *key = (uint32_t *)(base + a_cn), *sorted = key + n;
	int32_t *tok = (int32_t *)(sorted + n), *off = tok + n;
	void *tmp = base + ((a_cn + a_keys + a_off + 255) & ~(size_t)255);
	iota<<<(n + 255) / 256, 256, 0, st>>>(tok, n);
	if (init)
		init_rows<D><<<kc, D, 0, st>>>(x, n, kc, c);
	for (int it = 0; it < iters; it++) {
		norms<D><<<(kc + 127) / 128, 128, 0, st>>>(c, kc, cn);
		assign<D><<<(n + KM_TOK - 1) / KM_TOK, KM_TOK, 0, st>>>(x, n, c, cn, kc, labels);
		DGM_CUDA(cudaMemsetAsync(cnt, 0, (size_t)runs * 4, st));
		run_keys<<<(n + 255) / 256, 256, 0, st>>>(labels, n, text, key, cnt);
		run_offsets<<<1, 1, 0, st>>>(cnt, runs, off);
		DGM_CUDA(cub::DeviceRadixSort::SortPairs(tmp, sort_bytes, key, sorted, tok, perm, n, 0, bits, st));
		update<D><<<kc, D, 0, st>>>(x, perm, off, c);
	}
	DGM_LAUNCHED();
	DGM_CUDA(cudaFreeAsync(base, st));
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
