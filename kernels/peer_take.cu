/*
 * peer_take.cu: the scored peers' part selection on the device (dg_peer_take_dev), byte for byte
 * peers.c's dg_peer_take, so that no block-level selection runs on the host in a timed call:
 *   rank     a CTA per query group: the group's finite scores sorted in shared memory by the 64-bit
 *            key (~f2key(score), part): score descending, ties by lower part, -0 as +0 (the CPU's
 *            stable radix order on the same 32-bit key); then, one warp each and in the CPU's order,
 *            the running sums of the ranked scores in double (cum), the total in part order, and the
 *            running key counts (the forced parts' keys plus the ranked parts', sinks excluded);
 *   budget   one CTA: every group's keep count (top-k: ranked parts until K keys; top-p: the first k
 *            with cum[k] >= mass by a binary search over the nonnegative prefix, else all; at least
 *            min_parts), and under budget=matched the CPU's bisection of the top-p mass, four halvings a
 *            round (the 15 midpoints they can visit evaluated together, choose_keeps): the computed
 *            density of a take is an exact int64 sum of gsize x keys over n^2 (every partial sum an
 *            integer below 2^53, so the CPU's double sum in group order is the same number);
 *   write    a CTA per group: take = the forced parts and the first keep ranked parts.
 * Parts are given by their sizes and sink counts, or (psize NULL) are the raster blocks of bs tokens
 * of the block peers, whose query groups are the same blocks.
 * Build: part of dsgapkernels; test: tests/gpu_meta.c (peer take, and the backend's block peers).
 */
#include "dsgap_kernels.h"
#include "meta_common.cuh"

namespace {

constexpr int kRankThreads = 256;

struct parts {
	const int32_t *gsize, *psize, *psink; /* NULL: raster blocks of bs */
	int n, bs, slo, shi;
	__device__ __forceinline__ int size(int c) const { return psize ? psize[c] : min(bs, n - c * bs); }
	__device__ __forceinline__ int group(int g) const { return gsize ? gsize[g] : min(bs, n - g * bs); }
	__device__ __forceinline__ int sink(int c) const
	{
		if (psize)
			return psink[c];
		int a = c * bs, e = min(a + bs, n), l = max(a, slo), h = min(e, shi);
		return h > l ? h - l : 0;
	}
};

/* per group: idx (P) ranked parts, cum (P + 1), keys (P + 1), m, nonneg, total */
struct ranked {
	int32_t *idx, *m, *nonneg;
	double *cum, *total;
	long long *keys;
};

__global__ void __launch_bounds__(kRankThreads) rank_groups(const float *scores, int P, int P2, parts pt, ranked r)
{
	extern __shared__ unsigned long long key[]; /* (P2) sort keys, then the score row (P) */
	float *s = (float *)(key + P2);
	const int g = blockIdx.x, tid = threadIdx.x;
	for (int c = tid; c < P; c += blockDim.x)
		s[c] = scores[(size_t)g * P + c];
	__syncthreads();
	for (int c = tid; c < P2; c += blockDim.x)
		key[c] = c < P && s[c] != INFINITY ? (unsigned long long)~f2key(s[c]) << 32 | (unsigned)c : ~0ull;
	__syncthreads();
	for (int k = 2; k <= P2; k <<= 1) /* bitonic sort, ascending */
		for (int j = k >> 1; j > 0; j >>= 1) {
			for (int i = tid; i < P2; i += blockDim.x) {
				int l = i ^ j;
				if (l > i) {
					unsigned long long a = key[i], b = key[l];
					if ((a > b) == ((i & k) == 0))
						key[i] = b, key[l] = a;
				}
			}
			__syncthreads();
		}
	int32_t *idx = r.idx + (size_t)g * P;
	for (int c = tid; c < P; c += blockDim.x)
		idx[c] = (int32_t)(key[c] & 0xffffffffu);
	/* the CPU's sequential sums, each by one lane of its own warp */
	if (tid == 0) { /* cum and nonneg over the ranked parts, m */
		double *cum = r.cum + (size_t)g * (P + 1), run = 0;
		int m = 0, nonneg = 0;
		cum[0] = 0;
		for (; m < P && key[m] != ~0ull; m++) {
			float v = s[key[m] & 0xffffffffu];
			cum[m + 1] = run = run + v;
			nonneg += v >= 0;
		}
		r.m[g] = m, r.nonneg[g] = nonneg;
	} else if (tid == 32) { /* total: the finite scores in part order */
		double total = 0;
		for (int c = 0; c < P; c++)
			if (s[c] != INFINITY)
				total += s[c];
		r.total[g] = total;
	} else if (tid == 64) { /* keys: the forced parts', then the ranked parts' running count */
		long long *keys = r.keys + (size_t)g * (P + 1), forced = 0;
		for (int c = 0; c < P; c++)
			if (s[c] == INFINITY)
				forced += pt.size(c) - pt.sink(c);
		keys[0] = forced;
		for (int k = 0; k < P && key[k] != ~0ull; k++) {
			int c = (int)(key[k] & 0xffffffffu);
			keys[k + 1] = forced = forced + pt.size(c) - pt.sink(c);
		}
	}
}

struct budget {
	int topk, K, min_parts, matched, steps, sinks;
	double topp, rho;
};

/* peers.c keep_count under top-k: the ranked parts group g keeps until K keys (at least min_parts) */
__device__ int keep_topk(const ranked &r, int P, const parts &pt, const budget &b, int g)
{
	const int32_t *idx = r.idx + (size_t)g * P;
	const int m = r.m[g];
	int keep = 0;
	for (int held = 0; keep < m && held < b.K; keep++)
		held += pt.size(idx[keep]);
	return keep > b.min_parts ? keep : b.min_parts < m ? b.min_parts : m;
}

/*
 * peers.c keep_count under top-p for NS (group, mass fraction) items of this thread at once: the first
 * k with cum[k] >= topp x total by a binary search over the nonnegative prefix (else all ranked parts),
 * at least min_parts. The NS searches step together, each step's NS loads of cum issued before any is
 * used (a search that is done loads its own index again), so that they are in flight together.
 */
template <int NS>
__device__ void keep_topp(const ranked &r, int P, const budget &b, const int (&g)[NS], const double (&topp)[NS],
			  int ns, int (&keep)[NS])
{
	int lo[NS], hi[NS];
	double mass[NS];
	bool all[NS];
	const double *cum[NS];
#pragma unroll
	for (int i = 0; i < NS; i++) {
		const int gi = i < ns ? g[i] : g[0];
		cum[i] = r.cum + (size_t)gi * (P + 1);
		mass[i] = topp[i] * r.total[gi];
		lo[i] = 0, hi[i] = r.nonneg[gi];
		all[i] = cum[i][hi[i]] < mass[i];
		if (all[i] || i >= ns)
			hi[i] = 0;
	}
	for (bool any = true; any;) {
		double c[NS];
#pragma unroll
		for (int i = 0; i < NS; i++)
			c[i] = cum[i][lo[i] + (hi[i] - lo[i]) / 2];
		any = false;
#pragma unroll
		for (int i = 0; i < NS; i++)
			if (lo[i] < hi[i]) {
				const int mid = lo[i] + (hi[i] - lo[i]) / 2;
				if (c[i] < mass[i])
					lo[i] = mid + 1;
				else
					hi[i] = mid;
				any |= lo[i] < hi[i];
			}
	}
#pragma unroll
	for (int i = 0; i < NS; i++)
		if (i < ns) {
			const int m = r.m[g[i]], k = all[i] ? m : lo[i];
			keep[i] = k > b.min_parts ? k : b.min_parts < m ? b.min_parts : m;
		}
}

/* group g's pairs when it keeps keep ranked parts */
__device__ long long group_pairs(const ranked &r, int P, const parts &pt, const budget &b, int g, int keep)
{
	return (long long)pt.group(g) * (b.sinks + r.keys[(size_t)g * (P + 1) + keep]);
}

/* every group's keep count at mass fraction topp (or top-k) into keep (ngroups) */
__device__ void keep_counts(const ranked &r, int ngroups, int P, const parts &pt, const budget &b, double topp,
			    int *keep)
{
	for (int g = threadIdx.x; g < ngroups; g += blockDim.x) {
		if (b.topk) {
			keep[g] = keep_topk(r, P, pt, b, g);
		} else {
			int gg[1] = {g}, k[1];
			const double tp[1] = {topp};
			keep_topp<1>(r, P, b, gg, tp, 1, k);
			keep[g] = k[0];
		}
	}
}

/*
 * The computed densities of the takes at the T mass fractions t (shared memory) into d (shared
 * memory): a warp per fraction, its lanes KS groups each at a time (keep_topp), the pairs summed exactly
 * in int64 (the order does not matter) over n^2 as peers.c's density. All threads.
 */
constexpr int KS = 8;
__device__ void densities(const ranked &r, int ngroups, int P, const parts &pt, const budget &b, const double *t, int T,
			  double *d)
{
	const int lane = threadIdx.x & 31, nw = blockDim.x >> 5;
	for (int i = threadIdx.x >> 5; i < T; i += nw) {
		long long pairs = 0;
		for (int g0 = lane; g0 < ngroups; g0 += 32 * KS) {
			int g[KS], k[KS];
			double tp[KS];
			const int ns = min(KS, (ngroups - g0 + 31) / 32); /* groups g0, g0 + 32, .. below ngroups */
#pragma unroll
			for (int u = 0; u < KS; u++)
				g[u] = g0 + 32 * u, tp[u] = t[i];
			keep_topp<KS>(r, P, b, g, tp, ns, k);
#pragma unroll
			for (int u = 0; u < KS; u++)
				if (u < ns)
					pairs += group_pairs(r, P, pt, b, g[u], k[u]);
		}
#pragma unroll
		for (int o = 16; o > 0; o >>= 1)
			pairs += __shfl_down_sync(0xffffffffu, pairs, o);
		if (lane == 0)
			d[i] = (double)pairs / ((double)pt.n * pt.n);
	}
	__syncthreads();
}

/*
 * peers.c dg_peer_take's budget, keep (ngroups) at the chosen mass fraction. budget=matched: the CPU's
 * bisection of the top-p mass between 2^-30 and 1 (DG_PEER_MATCH_STEPS halvings, stopping once the
 * low end reaches rho; then the end nearer rho), LEVELS halvings a round: the round evaluates the
 * 2^LEVELS - 1 midpoints the next LEVELS halvings can visit (node k of the tree the midpoint of its
 * interval, 0.5 (lo + hi) as the CPU computes it: the same doubles), then walks the tree as the CPU's
 * loop would. 30 halvings take 8 rounds of 15 densities (a warp each, with 512 threads) instead of
 * 30 of one.
 */
constexpr int LEVELS = 4, NODES = (1 << LEVELS) - 1;
__global__ void __launch_bounds__(512) choose_keeps(ranked r, int ngroups, int P, parts pt, budget b, int *keep)
{
	__shared__ double t[NODES + 1], lo_t[NODES + 1], hi_t[NODES + 1], d[NODES];
	double topp = b.topp;
	if (b.matched && !b.topk) {
		double lo = ldexp(1.0, -30), hi = 1, dlo = 0, dhi;
		if (threadIdx.x == 0)
			t[0] = hi, t[1] = lo;
		__syncthreads();
		densities(r, ngroups, P, pt, b, t, 2, d); /* dlo is read only where dhi > rho */
		dhi = d[0];
		bool take_lo = false;
		if (dhi > b.rho) {
			dlo = d[1];
			for (int it = 0; it < b.steps && dlo < b.rho;) {
				if (threadIdx.x == 0) /* the tree of midpoints, node k (1-based) at t[k - 1] */
					for (int k = 1; k <= NODES; k++) {
						const double a = k == 1 ? lo : (k & 1) ? t[k / 2 - 1] : lo_t[k / 2];
						const double e = k == 1 ? hi : (k & 1) ? hi_t[k / 2] : t[k / 2 - 1];
						lo_t[k] = a, hi_t[k] = e, t[k - 1] = 0.5 * (a + e);
					}
				__syncthreads();
				densities(r, ngroups, P, pt, b, t, NODES, d);
				for (int k = 1, lv = 0; lv < LEVELS && it < b.steps && dlo < b.rho; lv++, it++) {
					const double tm = t[k - 1], dm = d[k - 1];
					if (dm >= b.rho)
						hi = tm, dhi = dm, k = 2 * k;
					else
						lo = tm, dlo = dm, k = 2 * k + 1;
				}
				__syncthreads(); /* t and d are read before the next round writes them */
			}
			take_lo = dlo >= b.rho || b.rho - dlo <= dhi - b.rho;
		}
		topp = take_lo ? lo : hi;
	}
	keep_counts(r, ngroups, P, pt, b, topp, keep);
}

__global__ void write_take(const float *scores, int P, ranked r, const int *keep, uint8_t *take)
{
	const int g = blockIdx.x;
	const float *s = scores + (size_t)g * P;
	const int32_t *idx = r.idx + (size_t)g * P;
	const int kg = keep[g];
	uint8_t *t = take + (size_t)g * P;
	for (int c = threadIdx.x; c < P; c += blockDim.x)
		t[c] = s[c] == INFINITY;
	__syncthreads();
	for (int k = threadIdx.x; k < kg; k += blockDim.x)
		t[idx[k]] = 1;
}

} // namespace

extern "C" int dg_peer_take_dev(const float *scores, int ngroups, int P, const int32_t *gsize, const int32_t *psize,
				const int32_t *psink, int bs, int n, int topk, int K, double topp, int matched, double rho,
				int steps, int sink_lo, int sink_hi, int min_parts, uint8_t *take, dg_stream stream)
{
	DGM_ARG(ngroups >= 1 && P >= 1 && P <= DG_PEER_TAKE_MAX_P && n >= 1,
		"peer take: %d groups of %d parts (at most %d), n %d", ngroups, P, DG_PEER_TAKE_MAX_P, n);
	DGM_ARG(scores && take && (psize ? gsize && psink : bs >= 1 && P == (n + bs - 1) / bs && ngroups == P),
		"peer take: NULL argument, or raster blocks of %d that are not %d x %d parts", bs, ngroups, P);
	cudaStream_t st = (cudaStream_t)stream;
	int P2 = 1;
	while (P2 < P)
		P2 <<= 1;
	const size_t smem = (size_t)P2 * 8 + (size_t)P * 4;
	if (smem > 48 * 1024)
		DGM_CUDA(cudaFuncSetAttribute(rank_groups, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
	const int slo = max(0, min(sink_lo, n)), shi = max(0, min(sink_hi, n));
	parts pt = { gsize, psize, psink, n, bs, slo, shi };
	budget b = { topk, K, min_parts, matched, steps, shi > slo ? shi - slo : 0, topp, rho };
	const size_t ng = (size_t)ngroups, cells = ng * P, cells1 = ng * (P + 1);
	const size_t bytes = dgm_align(cells * 4) + 2 * dgm_align(cells1 * 8) + dgm_align(ng * 8) + dgm_align(3 * ng * 4);
	char *w = NULL;
	DGM_CUDA(cudaMallocAsync((void **)&w, bytes, st));
	ranked r;
	size_t at = 0;
	r.idx = (int32_t *)(w + at), at += dgm_align(cells * 4);
	r.cum = (double *)(w + at), at += dgm_align(cells1 * 8);
	r.keys = (long long *)(w + at), at += dgm_align(cells1 * 8);
	r.total = (double *)(w + at), at += dgm_align(ng * 8);
	r.m = (int32_t *)(w + at), r.nonneg = r.m + ng;
	int *keep = r.nonneg + ng;
	rank_groups<<<ngroups, kRankThreads, smem, st>>>(scores, P, P2, pt, r);
	choose_keeps<<<1, 512, 0, st>>>(r, ngroups, P, pt, b, keep);
	write_take<<<ngroups, 256, 0, st>>>(scores, P, r, keep, take);
	DGM_LAUNCHED();
	DGM_CUDA(cudaFreeAsync(w, st));
	return 0;
}
