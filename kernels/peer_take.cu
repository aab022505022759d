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
 *            min_parts), and under budget=matched the CPU's bisection of the top-p mass: the computed
 *            density of a take is an exact int64 sum of gsize x keys over n^2 (every partial sum an
 *            integer below 2^53, so the CPU's double sum in group order is the same number);
 *   write    a CTA per group: take = the forced parts and the first keep ranked parts.
 * Parts are given by their sizes and sink counts, or (psize NULL) are the raster blocks of bs tokens
 * of the block peers, whose query groups are the same blocks.
 * Build: part of dsgapkernels; test: tests/kernels/gpu_meta.c (peer take, and the backend's block peers).
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

/* peers.c keep_count: the ranked parts group g keeps at mass fraction topp */
__device__ int keep_count(const ranked &r, int P, const parts &pt, const budget &b, int g, double topp)
{
	const int32_t *idx = r.idx + (size_t)g * P;
	const double *cum = r.cum + (size_t)g * (P + 1);
	int m = r.m[g], keep = 0;
	if (b.topk) {
		for (int held = 0; keep < m && held < b.K; keep++)
			held += pt.size(idx[keep]);
	} else {
		double mass = topp * r.total[g];
		int lo = 0, hi = r.nonneg[g];
		if (!(cum[hi] < mass)) {
			while (lo < hi) {
				int mid = lo + (hi - lo) / 2;
				if (cum[mid] < mass)
					lo = mid + 1;
				else
					hi = mid;
			}
			keep = lo;
		} else {
			keep = m;
		}
	}
	return keep > b.min_parts ? keep : b.min_parts < m ? b.min_parts : m;
}

/* every group's keep count at topp into keep (ngroups); returns the computed density (all threads) */
__device__ double keep_counts(const ranked &r, int ngroups, int P, const parts &pt, const budget &b, double topp,
			      int *keep, long long *red)
{
	long long pairs = 0;
	for (int g = threadIdx.x; g < ngroups; g += blockDim.x) {
		keep[g] = keep_count(r, P, pt, b, g, topp);
		pairs += (long long)pt.group(g) * (b.sinks + r.keys[(size_t)g * (P + 1) + keep[g]]);
	}
	for (int o = 16; o > 0; o >>= 1)
		pairs += __shfl_down_sync(0xffffffffu, pairs, o);
	if ((threadIdx.x & 31) == 0)
		red[threadIdx.x >> 5] = pairs;
	__syncthreads();
	if (threadIdx.x == 0) {
		long long t = 0;
		for (int w = 0; w < (int)(blockDim.x >> 5); w++)
			t += red[w];
		red[32] = t;
	}
	__syncthreads();
	double d = (double)red[32] / ((double)pt.n * pt.n);
	__syncthreads(); /* red is reused by the next call */
	return d;
}

/* peers.c dg_peer_take's budget: keep (3, ngroups) scratch; *chosen: the row of keep to write */
__global__ void __launch_bounds__(1024) choose_keeps(ranked r, int ngroups, int P, parts pt, budget b, int *keep,
						      int *chosen)
{
	__shared__ long long red[33];
	int lo_k = 0, hi_k = 1, mid_k = 2;
	if (!b.matched || b.topk) {
		keep_counts(r, ngroups, P, pt, b, b.topp, keep + (size_t)hi_k * ngroups, red);
	} else {
		double lo = ldexp(1.0, -30), hi = 1, dlo = 0;
		double dhi = keep_counts(r, ngroups, P, pt, b, hi, keep + (size_t)hi_k * ngroups, red);
		bool take_lo = false;
		if (dhi > b.rho) {
			dlo = keep_counts(r, ngroups, P, pt, b, lo, keep + (size_t)lo_k * ngroups, red);
			if (dlo > b.rho + DG_PEER_MATCH_TOL && b.min_parts > 1) { /* peers.c: the floor lowered */
				int m_lo = 1, m_hi = b.min_parts;
				while (m_hi - m_lo > 1) {
					b.min_parts = m_lo + (m_hi - m_lo) / 2;
					if (keep_counts(r, ngroups, P, pt, b, lo, keep + (size_t)mid_k * ngroups, red) <= b.rho)
						m_lo = b.min_parts;
					else
						m_hi = b.min_parts;
				}
				b.min_parts = m_lo;
				dhi = keep_counts(r, ngroups, P, pt, b, hi, keep + (size_t)hi_k * ngroups, red);
				dlo = keep_counts(r, ngroups, P, pt, b, lo, keep + (size_t)lo_k * ngroups, red);
			}
			for (int it = 0; it < b.steps && dlo < b.rho; it++) {
				double t = 0.5 * (lo + hi);
				double dm = keep_counts(r, ngroups, P, pt, b, t, keep + (size_t)mid_k * ngroups, red);
				int x = mid_k;
				if (dm >= b.rho)
					mid_k = hi_k, hi_k = x, hi = t, dhi = dm;
				else
					mid_k = lo_k, lo_k = x, lo = t, dlo = dm;
			}
			take_lo = dlo >= b.rho || b.rho - dlo <= dhi - b.rho;
		}
		hi_k = take_lo ? lo_k : hi_k;
	}
	if (threadIdx.x == 0)
		*chosen = hi_k;
}

__global__ void write_take(const float *scores, int P, ranked r, const int *keep, const int *chosen, int ngroups,
			   uint8_t *take)
{
	const int g = blockIdx.x;
	const float *s = scores + (size_t)g * P;
	const int32_t *idx = r.idx + (size_t)g * P;
	const int kg = keep[(size_t)*chosen * ngroups + g];
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
	const size_t bytes = dgm_align(cells * 4) + 2 * dgm_align(cells1 * 8) + dgm_align(ng * 8) + dgm_align(5 * ng * 4) + 256;
	char *w = NULL;
	DGM_CUDA(cudaMallocAsync((void **)&w, bytes, st));
	ranked r;
	size_t at = 0;
	r.idx = (int32_t *)(w + at), at += dgm_align(cells * 4);
	r.cum = (double *)(w + at), at += dgm_align(cells1 * 8);
	r.keys = (long long *)(w + at), at += dgm_align(cells1 * 8);
	r.total = (double *)(w + at), at += dgm_align(ng * 8);
	r.m = (int32_t *)(w + at), r.nonneg = r.m + ng;
	int *keep = r.nonneg + ng, *chosen = (int *)(w + at + dgm_align(5 * ng * 4));
	rank_groups<<<ngroups, kRankThreads, smem, st>>>(scores, P, P2, pt, r);
	choose_keeps<<<1, 1024, 0, st>>>(r, ngroups, P, pt, b, keep, chosen);
	write_take<<<ngroups, 256, 0, st>>>(scores, P, r, keep, chosen, ngroups, take);
	DGM_LAUNCHED();
	DGM_CUDA(cudaFreeAsync(w, st));
	return 0;
}
