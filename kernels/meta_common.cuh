/*
 * meta_common.cuh: device helpers shared by the metadata kernels (group_scores.cu, query_topk.cu,
 * select_topk.cu, pca_group.cu, pooled_scores.cu, metrics.cu). Not a public header.
 *
 * What is here:
 *   - launcher plumbing: one-line argument errors, CUDA error checks that return -1, stream-ordered
 *     scratch (cudaMallocAsync) that the launchers free on the same stream;
 *   - the order-preserving float -> uint32 map used by every selection (higher key = higher score;
 *     -0.0 and +0.0 map to the same key, as they compare equal in the CPU twin);
 *   - the 128-query x 128-key QK^T tile engine on mma.sync (qk_mma; the PTX wrappers are those of
 *     attn_common.cuh) that the exact group scores and the per-query probability rows use, and the
 *     column-sum reduce-scatter of a probability tile over a warp's 16 rows (colsum_scatter);
 *   - the per-row top-K radix select (row_select_*): 3 passes (11, 11, 10 bits) over orderable keys,
 *     ties resolved by the lower index, and the warp-range emission that writes the kept indices in
 *     ascending order.
 *
 * Accumulator layout of an m16n8 MMA tile (per warp of 16 query rows): lane holds rows g = lane/4 and
 * g+8, columns 8j + 2*(lane%4) + {0,1}: acc[j][0..1] row g, acc[j][2..3] row g+8.
 */
#ifndef DG_META_COMMON_CUH
#define DG_META_COMMON_CUH

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <limits.h>
#include <math.h>

#include "dsgap_budget.h"  /* dg_topk_count: the budget rule the harness shares (include/) */
#include "attn_common.cuh" /* smem_u32, cp.async, ldmatrix, mma.sync and wgmma wrappers, swizzled tiles */

#define DGM_DEV static __device__ __forceinline__

/* ------------------------------------------------------------------------------------------------ */
/* Launcher plumbing                                                                                 */

/* bad argument: one line, return -1 */
#define DGM_ARG(cond, ...) do { \
	if (!(cond)) { \
		fprintf(stderr, "dsgap: error: "); \
		fprintf(stderr, __VA_ARGS__); \
		fputc('\n', stderr); \
		return -1; \
	} \
} while (0)

/* CUDA runtime failure: one line, return -1 */
#define DGM_CUDA(x) do { \
	cudaError_t e_ = (x); \
	if (e_ != cudaSuccess) { \
		fprintf(stderr, "dsgap: error: %s failed: %s (%s:%d)\n", #x, cudaGetErrorString(e_), \
			__FILE__, __LINE__); \
		return -1; \
	} \
} while (0)

/* after a launch */
#define DGM_LAUNCHED() DGM_CUDA(cudaGetLastError())

static inline size_t dgm_smem_optin(void)
{
	int dev = 0, v = 0;
	cudaGetDevice(&dev);
	cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
	return (size_t)v;
}

/*
 * let `kernel` launch with `bytes` of dynamic shared memory. Without an opt-in a block may hold 48 KB
 * of shared memory in all, static included, so the opt-in is needed as soon as static + dynamic passes
 * 48 KB, not only when the dynamic part alone does (rows_topk_kernel: 16.3 KB of static histograms
 * plus 32 KB of keys at n = 8192 failed with "invalid argument"). The limit set never shrinks (a
 * launch of the same kernel with more bytes may have set it). -1 when static + dynamic passes the
 * device's opt-in limit.
 */
static inline int dgm_dyn_smem(const void *kernel, size_t bytes)
{
	cudaFuncAttributes a;
	if (cudaFuncGetAttributes(&a, kernel) != cudaSuccess)
		return -1;
	if (a.sharedSizeBytes + bytes <= 48 * 1024)
		return 0;
	if (a.sharedSizeBytes + bytes > dgm_smem_optin())
		return -1;
	const size_t want = bytes > (size_t)a.maxDynamicSharedSizeBytes ? bytes : (size_t)a.maxDynamicSharedSizeBytes;
	return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)want) == cudaSuccess
		       ? 0 : -1;
}

static inline int dgm_num_sms(void)
{
	int dev = 0, v = 0;
	cudaGetDevice(&dev);
	cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev);
	return v > 0 ? v : 1;
}

static inline size_t dgm_align(size_t x) { return (x + 255) & ~(size_t)255; }

/* ------------------------------------------------------------------------------------------------ */
/* Order-preserving keys                                                                             */

DGM_DEV uint32_t f2key(float f)
{
	uint32_t u = __float_as_uint(f);
	if (u == 0x80000000u)
		u = 0; /* -0.0 == +0.0 */
	return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

DGM_DEV float key2f(uint32_t k)
{
	return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

/* ------------------------------------------------------------------------------------------------ */
/* PTX wrappers                                                                                      */

DGM_DEV void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

DGM_DEV float bf2f(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

/*
 * p = exp(scale * s - lse) evaluated as 2^t, t = s * c - lse * log2(e) with c = log2(e) / sqrt(d)
 * and the row's -lse * log2(e) each split into fp32 hi + lo parts (c: host, in double; the row term:
 * nl_split, in double), so that t carries one fp32 rounding of t itself rather than of the large
 * terms it is the difference of. Invalid rows: nhi = -inf, nlo = 0 -> p = 0.
 */
DGM_DEV void nl_split(float lse, float &hi, float &lo)
{
	const double x = -(double)lse * 1.4426950408889634;
	hi = (float)x;
	lo = (float)(x - (double)hi);
}
DGM_DEV float prob_of(float s, float chi, float clo, float nhi, float nlo)
{
	float t = fmaf(s, chi, nhi);
	t = fmaf(s, clo, t);
	return exp2f(t + nlo);
}
static inline void dgm_scale_split(int d, float *hi, float *lo)
{
	const double c = 1.4426950408889634 / sqrt((double)d);
	*hi = (float)c;
	*lo = (float)(c - (double)*hi);
}

/* ------------------------------------------------------------------------------------------------ */
/* QK^T tile engine: 8 warps x 16 query rows = 128 rows against 128-key tiles                        */

#define QK_THREADS 256
#define QK_BM 128
#define QK_BN 128

/* K tile smem layout: row r (key) of D bf16 = D/8 chunks of 16 bytes; chunk c at ((c ^ (r&7)) * 16). */
template <int D>
DGM_DEV void load_k_tile(uint32_t sbase, const uint16_t *k, int n, int key0)
{
	constexpr int CH = D / 8; /* 16-byte chunks per row */
	for (int e = threadIdx.x; e < QK_BN * CH; e += QK_THREADS) {
		const int r = e / CH, c = e % CH, key = key0 + r;
		const bool ok = key < n;
		const uint16_t *src = k + (size_t)(ok ? key : 0) * D + c * 8;
		cp_async16(sbase + r * (D * 2) + ((c ^ (r & 7)) * 16), src, ok ? 16 : 0);
	}
}

/* A fragments of the warp's 16 rows (rows ra = row of lane/4, rb = row + 8; NULL = zero row). */
template <int D>
DGM_DEV void load_q_frags(uint32_t qa[D / 16][4], const uint16_t *ra, const uint16_t *rb)
{
	const int t = threadIdx.x & 3;
#pragma unroll
	for (int kk = 0; kk < D / 16; kk++) {
		const int c0 = kk * 16 + 2 * t, c1 = c0 + 8;
		qa[kk][0] = ra ? *(const uint32_t *)(ra + c0) : 0u;
		qa[kk][1] = rb ? *(const uint32_t *)(rb + c0) : 0u;
		qa[kk][2] = ra ? *(const uint32_t *)(ra + c1) : 0u;
		qa[kk][3] = rb ? *(const uint32_t *)(rb + c1) : 0u;
	}
}

/* acc[j][..] = Q(16 rows) . K(tile key 8j..8j+7)^T over D, for the 128 keys of the smem tile */
template <int D>
DGM_DEV void qk_mma(float acc[QK_BN / 8][4], const uint32_t qa[D / 16][4], uint32_t sbase)
{
	const int lane = threadIdx.x & 31;
#pragma unroll
	for (int j = 0; j < QK_BN / 8; j++)
		acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
	const int mat = lane >> 3, rr = lane & 7;
#pragma unroll
	for (int kk = 0; kk < D / 16; kk++) {
#pragma unroll
		for (int jp = 0; jp < QK_BN / 16; jp++) {
			const int key = jp * 16 + rr + ((mat >> 1) << 3);
			const int chunk = kk * 2 + (mat & 1);
			uint32_t b[4];
			ldmatrix_x4(b, sbase + key * (D * 2) + ((chunk ^ (key & 7)) * 16));
			mma_16816(acc[2 * jp], qa[kk], b[0], b[1]);
			mma_16816(acc[2 * jp + 1], qa[kk], b[2], b[3]);
		}
	}
}

/*
 * Column sums of a 16-row x 128-column tile held in the MMA accumulator layout, reduced over the
 * warp's 16 rows: in, v[2j + e] = the lane's two rows' sum at column 8j + 2(lane%4) + e; out, v[0..3]
 * = the warp's sums at columns colsum_col(lane, 0..3) (a reduce-scatter over the 8 lanes that share
 * lane%4: lane bits 4, 3, 2; 28 shuffles instead of 96 for a full reduction).
 */
DGM_DEV void colsum_scatter(float (&v)[32], int lane)
{
	const bool b4 = lane & 16, b3 = lane & 8, b2 = lane & 4;
#pragma unroll
	for (int i = 0; i < 16; i++) {
		const float send = b4 ? v[i] : v[i + 16], keep = b4 ? v[i + 16] : v[i];
		v[i] = keep + __shfl_xor_sync(0xffffffffu, send, 16);
	}
#pragma unroll
	for (int i = 0; i < 8; i++) {
		const float send = b3 ? v[i] : v[i + 8], keep = b3 ? v[i + 8] : v[i];
		v[i] = keep + __shfl_xor_sync(0xffffffffu, send, 8);
	}
#pragma unroll
	for (int i = 0; i < 4; i++) {
		const float send = b2 ? v[i] : v[i + 4], keep = b2 ? v[i + 4] : v[i];
		v[i] = keep + __shfl_xor_sync(0xffffffffu, send, 4);
	}
}
DGM_DEV int colsum_col(int lane, int i)
{
	const int o = (lane & 16) + (lane & 8) + (lane & 4) + i;
	return 8 * (o >> 1) + 2 * (lane & 3) + (o & 1);
}

/* ------------------------------------------------------------------------------------------------ */
/* Block-wide helpers                                                                                */

/* exclusive scan of one int per thread; wbuf holds NT/32 ints; *total gets the block sum */
template <int NT>
DGM_DEV int block_excl_scan(int v, int *wbuf, int *total)
{
	constexpr int NW = NT / 32;
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	int x = v;
#pragma unroll
	for (int o = 1; o < 32; o <<= 1) {
		int y = __shfl_up_sync(0xffffffffu, x, o);
		if (lane >= o)
			x += y;
	}
	if (lane == 31)
		wbuf[warp] = x;
	__syncthreads();
	if (warp == 0) {
		int w = lane < NW ? wbuf[lane] : 0;
#pragma unroll
		for (int o = 1; o < 32; o <<= 1) {
			int y = __shfl_up_sync(0xffffffffu, w, o);
			if (lane >= o)
				w += y;
		}
		if (lane < NW)
			wbuf[lane] = w;
	}
	__syncthreads();
	const int pre = warp ? wbuf[warp - 1] : 0;
	if (total)
		*total = wbuf[NW - 1];
	__syncthreads();
	return pre + x - v;
}

/* ------------------------------------------------------------------------------------------------ */
/* Per-row top-K select over orderable keys (higher = better, ties by lower index)                  */
/*
 * A row selection is (T, jT): a rankable index j (outside the sinks) is kept iff
 * key_j > T || (key_j == T && j <= jT). Keep all: T = 0, jT = INT_MAX. Keep none: T = 0xffffffff,
 * jT = -1. Sinks [slo, shi) are always kept and never ranked.
 */
struct RowSel {
	uint32_t T;
	int jT;
};

template <int NT>
struct SelShared {
	uint32_t hist1[2048]; /* pass-1 histogram (kept for several K) */
	uint32_t hist[2048];
	int wbuf[NT / 32];
	int wcnt[NT / 32];
	uint32_t bin;
	int above;
	int jT;
	int wt, rem;
};

/* Find the bin holding the Krem-th highest element: above(b) < Krem <= above(b) + hist[b]. */
template <int NT>
DGM_DEV void find_bin(SelShared<NT> &sh, const uint32_t *hist, int nbins, int Krem)
{
	const int per = nbins / NT; /* 1 or 2 (NT = 1024) or more */
	const int hi = nbins - 1 - threadIdx.x * per;
	int local = 0;
	for (int i = 0; i < per; i++)
		local += (int)hist[hi - i];
	int above = block_excl_scan<NT>(local, sh.wbuf, NULL);
	for (int i = 0; i < per; i++) {
		const int h = (int)hist[hi - i];
		if (above < Krem && Krem <= above + h) {
			sh.bin = (uint32_t)(hi - i);
			sh.above = above;
		}
		above += h;
	}
	__syncthreads();
}

/* histogram of the digit at shift (nbins bins) over rankable keys matching prefix under pmask */
template <int NT, class KeyAt>
DGM_DEV void sel_hist(uint32_t *hist, int nbins, int shift, uint32_t prefix, uint32_t pmask, const KeyAt &key,
		      int n, int slo, int shi)
{
	for (int b = threadIdx.x; b < nbins; b += NT)
		hist[b] = 0;
	__syncthreads();
#pragma unroll 4
	for (int j = threadIdx.x; j < n; j += NT) {
		const uint32_t kv = key(j);
		if ((kv & pmask) == prefix && !(j >= slo && j < shi))
			atomicAdd(&hist[(kv >> shift) & (uint32_t)(nbins - 1)], 1u);
	}
	__syncthreads();
}

/* warp-contiguous index ranges for ordered passes: warp w owns [w*chunk, min(n, (w+1)*chunk)) */
template <int NT>
DGM_DEV int warp_chunk(int n)
{
	constexpr int NW = NT / 32;
	return (((n + NW - 1) / NW) + 31) & ~31;
}

/*
 * (T, jT) of the K best rankable keys (m = rankable count). hist1 must hold the pass-1 histogram
 * (digit bits 21..31 of every rankable key) on entry; it is left unchanged.
 */
template <int NT, class KeyAt>
DGM_DEV RowSel row_select_threshold(SelShared<NT> &sh, const KeyAt &key, int n, int slo, int shi, int m, int K)
{
	RowSel s;
	if (K >= m) {
		s.T = 0;
		s.jT = INT_MAX;
		return s;
	}
	if (K <= 0) {
		s.T = 0xffffffffu;
		s.jT = -1;
		return s;
	}
	int Krem = K;
	find_bin<NT>(sh, sh.hist1, 2048, Krem);
	uint32_t prefix = sh.bin << 21, pmask = 0xffe00000u;
	Krem -= sh.above;
	__syncthreads();
	sel_hist<NT>(sh.hist, 2048, 10, prefix, pmask, key, n, slo, shi);
	find_bin<NT>(sh, sh.hist, 2048, Krem);
	prefix |= sh.bin << 10;
	pmask |= 0x001ffc00u;
	Krem -= sh.above;
	__syncthreads();
	sel_hist<NT>(sh.hist, 1024, 0, prefix, pmask, key, n, slo, shi);
	find_bin<NT>(sh, sh.hist, 1024, Krem);
	const uint32_t T = prefix | sh.bin;
	Krem -= sh.above;
	const int ceq = (int)sh.hist[sh.bin]; /* rankable keys equal to T */
	__syncthreads();
	s.T = T;
	if (Krem >= ceq) {
		s.jT = INT_MAX;
		return s;
	}
	/* true ties across the boundary: the Krem-th lowest index among keys == T */
	constexpr int NW = NT / 32;
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	const int chunk = warp_chunk<NT>(n);
	const int lo = warp * chunk, hi = min(n, lo + chunk);
	int cnt = 0;
	for (int base = lo; base < hi; base += 32) {
		const int j = base + lane;
		const bool e = j < hi && !(j >= slo && j < shi) && key(j) == T;
		cnt += __popc(__ballot_sync(0xffffffffu, e));
	}
	if (lane == 0)
		sh.wcnt[warp] = cnt;
	__syncthreads();
	if (threadIdx.x == 0) {
		int pre = 0, w = 0;
		for (; w < NW; w++) {
			if (pre + sh.wcnt[w] >= Krem)
				break;
			pre += sh.wcnt[w];
		}
		sh.wt = w;
		sh.rem = Krem - pre;
	}
	__syncthreads();
	if (warp == sh.wt) {
		int rem = sh.rem;
		for (int base = lo; base < hi; base += 32) {
			const int j = base + lane;
			const bool e = j < hi && !(j >= slo && j < shi) && key(j) == T;
			const unsigned bal = __ballot_sync(0xffffffffu, e);
			const int c = __popc(bal);
			if (rem <= c) {
				/* the lane holding the rem-th set bit */
				if (e && __popc(bal & ((2u << lane) - 1u)) == rem)
					sh.jT = j;
				break;
			}
			rem -= c;
		}
	}
	__syncthreads();
	s.jT = sh.jT;
	__syncthreads();
	return s;
}

/*
 * Write every j in [0, n) with keep(j) to out[0..] in ascending order (out capacity cap: positions
 * past it are not written). Returns the count (all threads).
 */
template <int NT, class Keep>
DGM_DEV int emit_ascending(int *wcnt /* NT/32 shared */, const Keep &keep, int n, int32_t *out, long long cap)
{
	constexpr int NW = NT / 32;
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	const int chunk = warp_chunk<NT>(n);
	const int lo = warp * chunk, hi = min(n, lo + chunk);
	int cnt = 0;
#pragma unroll 4
	for (int base = lo; base < hi; base += 32) {
		const int j = base + lane;
		cnt += __popc(__ballot_sync(0xffffffffu, j < hi && keep(j)));
	}
	if (lane == 0)
		wcnt[warp] = cnt;
	__syncthreads();
	int pre = 0, total = 0;
	for (int w = 0; w < NW; w++) {
		const int c = wcnt[w];
		pre += w < warp ? c : 0;
		total += c;
	}
	const unsigned lt = (1u << lane) - 1u;
	for (int base = lo; base < hi; base += 32) {
		const int j = base + lane;
		const bool e = j < hi && keep(j);
		const unsigned bal = __ballot_sync(0xffffffffu, e);
		const long long pos = pre + __popc(bal & lt);
		if (e && pos < cap)
			out[pos] = j;
		pre += __popc(bal);
	}
	__syncthreads();
	return total;
}

#ifdef DGM_WANT_ROWS_TOPK
/* ------------------------------------------------------------------------------------------------ */
/* Fused per-row top-K (fixed counts): one CTA per score row (query_topk.cu, select_topk.cu)          */

#define DGM_MAXK 8
struct TopkList {
	int nk;
	int K[DGM_MAXK];          /* budget (clamped to the rankable count) */
	int cnt[DGM_MAXK];        /* keys per output row = min(K, m) + sinks */
	int32_t *out[DGM_MAXK];   /* (rows, cnt) */
};

namespace {
/*
 * Row r = blockIdx.x of P (ld ldp, n scores): for each budget, the sinks [slo, shi) plus the K best
 * other keys, ascending, to out[i] + (out_row0 + r) * cnt[i]. SMEM: stage the row's keys in dynamic
 * shared memory (n * 4 bytes), else read them from P on every pass.
 */
template <int NT, bool SMEM>
__global__ void __launch_bounds__(NT, 1)
	rows_topk_kernel(const float *P, long long ldp, int n, long long out_row0, int slo, int shi, TopkList L)
{
	extern __shared__ uint32_t dyn_keys[];
	__shared__ SelShared<NT> sh;
	const float *row = P + (long long)blockIdx.x * ldp;
	auto key = [&](int j) -> uint32_t { return SMEM ? dyn_keys[j] : f2key(__ldg(row + j)); };
	if (SMEM) {
		/* stage the keys, 8 loads in flight per thread, and take the pass-1 histogram on the way */
		for (int b = threadIdx.x; b < 2048; b += NT)
			sh.hist1[b] = 0;
		__syncthreads();
		for (int base = 0; base < n; base += NT * 8) {
			float v[8];
#pragma unroll
			for (int u = 0; u < 8; u++) {
				const int j = base + u * NT + threadIdx.x;
				v[u] = j < n ? __ldg(row + j) : 0.f;
			}
#pragma unroll
			for (int u = 0; u < 8; u++) {
				const int j = base + u * NT + threadIdx.x;
				if (j < n) {
					const uint32_t kv = f2key(v[u]);
					dyn_keys[j] = kv;
					if (!(j >= slo && j < shi))
						atomicAdd(&sh.hist1[kv >> 21], 1u);
				}
			}
		}
		__syncthreads();
	} else {
		sel_hist<NT>(sh.hist1, 2048, 21, 0u, 0u, key, n, slo, shi);
	}
	const int m = n - (shi - slo);
	for (int i = 0; i < L.nk; i++) {
		const RowSel s = row_select_threshold<NT>(sh, key, n, slo, shi, m, L.K[i]);
		auto keep = [&](int j) -> bool {
			if (j >= slo && j < shi)
				return true;
			const uint32_t kv = key(j);
			return kv > s.T || (kv == s.T && j <= s.jT);
		};
		emit_ascending<NT>(sh.wcnt, keep, n, L.out[i] + (out_row0 + blockIdx.x) * (long long)L.cnt[i], L.cnt[i]);
	}
}
} // namespace

#define DGM_ROWS_NT 1024

/* launch rows_topk_kernel over `rows` rows of P; sinks already clamped (slo <= shi, within [0, n]) */
static inline int dgm_rows_topk(const float *P, long long ldp, int n, int rows, long long out_row0, int slo,
				int shi, const TopkList &L, cudaStream_t st)
{
	if (rows <= 0)
		return 0;
	const size_t stat = sizeof(SelShared<DGM_ROWS_NT>), dyn = (size_t)n * 4;
	if (stat + dyn + 1024 <= dgm_smem_optin()) {
		if (dgm_dyn_smem((const void *)rows_topk_kernel<DGM_ROWS_NT, true>, dyn))
			DGM_ARG(0, "top-k select: cannot get %zu bytes of shared memory", dyn);
		rows_topk_kernel<DGM_ROWS_NT, true><<<rows, DGM_ROWS_NT, dyn, st>>>(P, ldp, n, out_row0, slo, shi, L);
	} else {
		rows_topk_kernel<DGM_ROWS_NT, false><<<rows, DGM_ROWS_NT, 0, st>>>(P, ldp, n, out_row0, slo, shi, L);
	}
	DGM_LAUNCHED();
	return 0;
}

#endif /* DGM_WANT_ROWS_TOPK */

/* clamp a sink range to [0, n] (empty: 0, 0) as src/policy/select.c does; returns the sink count */
static inline int dgm_clamp_sinks(int n, int *lo, int *hi)
{
	int a = *lo < n ? *lo : n, b = *hi < n ? *hi : n;
	if (a < 0)
		a = 0;
	if (b <= a)
		a = b = 0;
	*lo = a;
	*hi = b;
	return b - a;
}

#endif
