/*
 * select_topk.cu: per-group key selection from a score matrix, GPU twin of dg_select_groups /
 * dg_select_row (src/policy/select.c), with exactly its semantics: rank by (score desc, index asc);
 *   topk  kv=token: the K = dg_topk_count(rho, n) best keys outside the sinks (at most all of them);
 *         kv=block: the best blocks in rank order until they hold >= K keys (last block may be short);
 *   topp  the shortest rank prefix whose running mass (double, summed in rank order) before the last
 *         kept item is below topp * total (double, summed in index order); at least 1; kv=token
 *         rounds the count up to a multiple of 128 keys, both cap it at the rankable count;
 *   sinks [sink_lo, sink_hi) always kept; never ranked for kv=token (blocks are all ranked).
 * Output CSR: soff (ngroups+1) int64, sidx ascending per group, blocks expanded to keys.
 *
 * Paths: token topk: one CTA per group (rows_topk_kernel of meta_common.cuh: radix select in
 * shared memory, ties by index, ordered ballot emission; counts are fixed). token topp: CUB
 * segmented radix sort of (~key, index) pairs (stable, so ties stay in index order), then one CTA
 * per group replays the CPU's sequential double sums exactly, giving the threshold (key, index) of
 * the last kept item; block: one CTA per group sorts its block scores (bitonic, 64-bit composite
 * keys) and marks the kept blocks. Then a CUB exclusive scan of the counts gives soff, and the
 * ordered emission writes sidx. dg_fixed_offsets writes the offsets of equal-count lists (the
 * per-query oracle's) with the same fill kernel as token topk.
 * Build: part of dsgapkernels; test: tests/kernels/gpu_meta.c.
 */
#include "dsgap_kernels.h"
#define DGM_WANT_ROWS_TOPK
#include "meta_common.cuh"

#include <cub/cub.cuh>

namespace {

#define EMIT_NT 512
#define WALK_NT 256
#define WALK_CHUNK 4096
#define BLK_NT 256

__global__ void fill_soff_fixed(long long *soff, int ngroups, long long cnt)
{
	for (int g = blockIdx.x * blockDim.x + threadIdx.x; g <= ngroups; g += gridDim.x * blockDim.x)
		soff[g] = (long long)g * cnt;
}

/* token topp, step 1: sort keys ~key (ascending = score descending), sinks last; values = index */
__global__ void topp_prep(const float *scores, int ngroups, int n, int slo, int shi, uint32_t *keys, int32_t *vals,
			  int *offsets)
{
	const long long total = (long long)ngroups * n;
	for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
	     e += (long long)gridDim.x * blockDim.x) {
		const int j = (int)(e % n);
		keys[e] = (j >= slo && j < shi) ? 0xffffffffu : ~f2key(scores[e]);
		vals[e] = j;
	}
	for (long long g = blockIdx.x * (long long)blockDim.x + threadIdx.x; g <= ngroups;
	     g += (long long)gridDim.x * blockDim.x)
		offsets[g] = (int)(g * n);
}

/* token topp, step 2: the CPU's sequential sums, one CTA per group (thread 0 adds, all load) */
__global__ void __launch_bounds__(WALK_NT) topp_walk(const float *scores, int n, int slo, int shi, double topp,
						     const uint32_t *skeys, const int32_t *svals, RowSel *desc,
						     long long *counts)
{
	__shared__ float buf[WALK_CHUNK];
	__shared__ int s_done;
	const int g = blockIdx.x, tid = threadIdx.x;
	const float *row = scores + (size_t)g * n;
	const uint32_t *sk = skeys + (size_t)g * n;
	const int ns = shi - slo, m = n - ns;
	double total = 0, cum = 0;
	int keep = 0;
	/* total over the rankable keys in index order */
	for (int base = 0; base < n; base += WALK_CHUNK) {
		const int c = min(WALK_CHUNK, n - base);
		for (int i = tid; i < c; i += WALK_NT)
			buf[i] = row[base + i];
		__syncthreads();
		if (tid == 0) {
			/* index order, skipping the sinks: [base, slo) then [shi, base + c) */
			const int e1 = min(c, max(0, slo - base)), s2 = max(e1, min(c, shi - base));
#pragma unroll 8
			for (int i = 0; i < e1; i++)
				total += (double)buf[i];
#pragma unroll 8
			for (int i = s2; i < c; i++)
				total += (double)buf[i];
		}
		__syncthreads();
	}
	const double lim = topp * total;
	if (tid == 0)
		s_done = 0;
	__syncthreads();
	for (int base = 0; base < m; base += WALK_CHUNK) {
		if (s_done)
			break;
		const int c = min(WALK_CHUNK, m - base);
		for (int i = tid; i < c; i += WALK_NT)
			buf[i] = key2f(~sk[base + i]);
		__syncthreads();
		if (tid == 0) {
			/* while (cum < lim) cum += next, 8 loads ahead of the serial adds */
			int i = 0;
			bool stop = false;
			for (; i + 8 <= c && !stop; i += 8) {
				float x[8];
#pragma unroll
				for (int u = 0; u < 8; u++)
					x[u] = buf[i + u];
				int u = 0;
#pragma unroll
				for (; u < 8; u++) {
					if (!(cum < lim))
						break;
					cum += (double)x[u];
				}
				if (u < 8) {
					i += u;
					stop = true;
					break;
				}
			}
			for (; !stop && i < c; i++) {
				if (!(cum < lim)) {
					stop = true;
					break;
				}
				cum += (double)buf[i];
			}
			keep += i;
			if (stop)
				s_done = 1;
		}
		__syncthreads();
	}
	if (tid == 0) {
		keep = keep ? keep : 1;
		keep = (keep + 127) / 128 * 128;
		keep = keep < m ? keep : m;
		RowSel s;
		if (keep >= 1) {
			s.T = ~sk[keep - 1];
			s.jT = svals[(size_t)g * n + keep - 1];
		} else {
			s.T = 0xffffffffu;
			s.jT = -1;
		}
		desc[g] = s;
		counts[g] = keep + ns;
		if (g == 0)
			counts[gridDim.x] = 0;
	}
}

/* kv=block (topk or topp): rank the blocks, mark the kept ones, count the keys (with sinks) */
__global__ void __launch_bounds__(BLK_NT) block_select(const float *scores, int n, int nb, int P2, int budget,
						       int K, double topp, int slo, int shi, uint8_t *flags,
						       long long *counts)
{
	extern __shared__ unsigned long long comp[]; /* (P2) then nb flag bytes */
	uint8_t *fl = (uint8_t *)(comp + P2);
	__shared__ int s_keep, wsum[BLK_NT / 32];
	const int g = blockIdx.x, tid = threadIdx.x;
	const float *row = scores + (size_t)g * nb;
	for (int i = tid; i < P2; i += BLK_NT)
		comp[i] = i < nb ? ((unsigned long long)f2key(row[i]) << 32) | (uint32_t)(~(uint32_t)i) : 0ull;
	for (int i = tid; i < nb; i += BLK_NT)
		fl[i] = 0;
	__syncthreads();
	/* bitonic sort, descending */
	for (int k = 2; k <= P2; k <<= 1)
		for (int j = k >> 1; j > 0; j >>= 1) {
			for (int i = tid; i < P2; i += BLK_NT) {
				const int ixj = i ^ j;
				if (ixj > i) {
					const unsigned long long a = comp[i], b = comp[ixj];
					const bool desc = (i & k) == 0;
					if (desc ? a < b : a > b) {
						comp[i] = b;
						comp[ixj] = a;
					}
				}
			}
			__syncthreads();
		}
	if (tid == 0) {
		int keep = 0;
		if (budget == 0) {
			long long held = 0;
			while (keep < nb && held < K) {
				const int i = (int)~(uint32_t)comp[keep];
				held += (i + 1) * 128 <= n ? 128 : n - i * 128;
				keep++;
			}
		} else {
			double total = 0, cum = 0;
			for (int i = 0; i < nb; i++)
				total += (double)row[i];
			const double lim = topp * total;
			while (keep < nb && cum < lim) {
				cum += (double)row[(int)~(uint32_t)comp[keep]];
				keep++;
			}
			keep = keep ? keep : 1;
			keep = keep < nb ? keep : nb;
		}
		s_keep = keep;
	}
	__syncthreads();
	for (int r = tid; r < s_keep; r += BLK_NT)
		fl[(int)~(uint32_t)comp[r]] = 1;
	__syncthreads();
	for (int i = tid; i < nb; i += BLK_NT)
		flags[(size_t)g * nb + i] = fl[i];
	int c = 0;
	for (int j = tid; j < n; j += BLK_NT)
		c += (fl[j >> 7] || (j >= slo && j < shi)) ? 1 : 0;
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		c += __shfl_xor_sync(0xffffffffu, c, o);
	if ((tid & 31) == 0)
		wsum[tid >> 5] = c;
	__syncthreads();
	if (tid == 0) {
		long long t = 0;
		for (int w = 0; w < BLK_NT / 32; w++)
			t += wsum[w];
		counts[g] = t;
		if (g == 0)
			counts[gridDim.x] = 0;
	}
}

/* ordered emission of group g's keys at soff[g] (mode 0: token threshold; 1: block flags) */
__global__ void __launch_bounds__(EMIT_NT) emit_groups(int mode, const float *scores, int n, int nb, int slo,
						       int shi, const RowSel *desc, const uint8_t *flags,
						       const long long *soff, int32_t *sidx, long long cap)
{
	__shared__ int wcnt[EMIT_NT / 32];
	const int g = blockIdx.x;
	const long long base = soff[g];
	int32_t *out = sidx + base;
	const long long capg = cap - base;
	if (mode == 0) {
		const float *row = scores + (size_t)g * n;
		const RowSel s = desc[g];
		auto keep = [&](int j) -> bool {
			if (j >= slo && j < shi)
				return true;
			const uint32_t kv = f2key(__ldg(row + j));
			return kv > s.T || (kv == s.T && j <= s.jT);
		};
		emit_ascending<EMIT_NT>(wcnt, keep, n, out, capg);
	} else {
		const uint8_t *fl = flags + (size_t)g * nb;
		auto keep = [&](int j) -> bool { return (j >= slo && j < shi) || fl[j >> 7]; };
		emit_ascending<EMIT_NT>(wcnt, keep, n, out, capg);
	}
}

int scan_counts(long long *counts, int ngroups, int64_t *soff, cudaStream_t st)
{
	size_t bytes = 0;
	DGM_CUDA(cub::DeviceScan::ExclusiveSum(NULL, bytes, counts, (long long *)soff, ngroups + 1, st));
	void *tmp = NULL;
	DGM_CUDA(cudaMallocAsync(&tmp, bytes, st));
	DGM_CUDA(cub::DeviceScan::ExclusiveSum(tmp, bytes, counts, (long long *)soff, ngroups + 1, st));
	DGM_CUDA(cudaFreeAsync(tmp, st));
	return 0;
}

} // namespace

extern "C" int64_t dg_select_keys_cap(int ngroups, int n, int kv, int budget, double rho, int sink_lo, int sink_hi)
{
	if (ngroups < 1 || n < 1)
		return 0;
	const int ns = dgm_clamp_sinks(n, &sink_lo, &sink_hi), m = n - ns;
	long long per;
	if (budget == 1)
		per = n;
	else if (kv == 0) {
		const int K = dg_topk_count(rho, n);
		per = (K < m ? K : m) + ns;
	} else {
		const long long K = dg_topk_count(rho, n);
		per = K + 127 + ns;
		per = per < n ? per : n;
	}
	return (int64_t)ngroups * per;
}

extern "C" int dg_fixed_offsets(int64_t *soff, int ngroups, int64_t cnt, dg_stream stream)
{
	DGM_ARG(soff && ngroups >= 1 && cnt >= 0, "fixed offsets: %d groups of %lld keys", ngroups, (long long)cnt);
	fill_soff_fixed<<<(ngroups + 256) / 256, 256, 0, (cudaStream_t)stream>>>((long long *)soff, ngroups, cnt);
	DGM_LAUNCHED();
	return 0;
}

extern "C" int dg_select_keys(const float *scores, int ngroups, int n, int kv, int budget, double rho, double topp,
			      int sink_lo, int sink_hi, int64_t *soff, int32_t *sidx, int64_t sidx_cap,
			      dg_stream stream)
{
	DGM_ARG(scores && soff && sidx, "key selection: NULL argument");
	DGM_ARG(ngroups >= 1 && n >= 1, "key selection: ngroups %d, n %d", ngroups, n);
	DGM_ARG(kv == 0 || kv == 1, "key selection: kv %d (0 token, 1 block)", kv);
	DGM_ARG(budget == 0 || budget == 1, "key selection: budget %d (0 topk, 1 topp)", budget);
	DGM_ARG(budget == 1 || (rho > 0 && rho <= 1), "key selection: topk density %g outside (0, 1]", rho);
	DGM_ARG(budget == 0 || (topp > 0 && topp <= 1), "key selection: topp mass %g outside (0, 1]", topp);
	DGM_ARG(sidx_cap >= 0, "key selection: capacity %lld", (long long)sidx_cap);
	cudaStream_t st = (cudaStream_t)stream;
	int slo = sink_lo, shi = sink_hi;
	const int ns = dgm_clamp_sinks(n, &slo, &shi), m = n - ns;
	const int nb = (n + 127) / 128;

	if (kv == 0 && budget == 0) {
		const int K = dg_topk_count(rho, n), cnt = (K < m ? K : m) + ns;
		DGM_ARG((long long)ngroups * cnt <= sidx_cap, "key selection: %lld keys exceed the capacity %lld",
			(long long)ngroups * cnt, (long long)sidx_cap);
		TopkList L;
		L.nk = 1;
		L.K[0] = K;
		L.cnt[0] = cnt;
		L.out[0] = sidx;
		fill_soff_fixed<<<(ngroups + 256) / 256, 256, 0, st>>>((long long *)soff, ngroups, cnt);
		DGM_LAUNCHED();
		return dgm_rows_topk(scores, n, n, ngroups, 0, slo, shi, L, st);
	}

	long long *counts = NULL;
	DGM_CUDA(cudaMallocAsync((void **)&counts, (size_t)(ngroups + 1) * sizeof(long long), st));
	int rc = 0;
	if (kv == 0) {
		/* token topp */
		DGM_ARG((long long)ngroups * n < INT_MAX, "key selection: %d x %d scores too many for top-p", ngroups, n);
		const long long tot = (long long)ngroups * n;
		uint32_t *kin = NULL, *kout = NULL;
		int32_t *vin = NULL, *vout = NULL;
		int *offs = NULL;
		RowSel *desc = NULL;
		void *tmp = NULL;
		size_t bytes = 0;
		DGM_CUDA(cub::DeviceSegmentedRadixSort::SortPairs(NULL, bytes, kin, kout, vin, vout, (int)tot, ngroups, offs,
								  offs + 1, 0, 32, st));
		const size_t a = dgm_align(tot * 4), b = dgm_align((size_t)(ngroups + 1) * 4),
			     c = dgm_align((size_t)ngroups * sizeof(RowSel));
		char *base = NULL;
		DGM_CUDA(cudaMallocAsync((void **)&base, 4 * a + b + c + dgm_align(bytes), st));
		kin = (uint32_t *)base;
		kout = (uint32_t *)(base + a);
		vin = (int32_t *)(base + 2 * a);
		vout = (int32_t *)(base + 3 * a);
		offs = (int *)(base + 4 * a);
		desc = (RowSel *)(base + 4 * a + b);
		tmp = base + 4 * a + b + c;
		topp_prep<<<4 * dgm_num_sms(), 256, 0, st>>>(scores, ngroups, n, slo, shi, kin, vin, offs);
		DGM_LAUNCHED();
		DGM_CUDA(cub::DeviceSegmentedRadixSort::SortPairs(tmp, bytes, kin, kout, vin, vout, (int)tot, ngroups, offs,
								  offs + 1, 0, 32, st));
		topp_walk<<<ngroups, WALK_NT, 0, st>>>(scores, n, slo, shi, topp, kout, vout, desc, counts);
		DGM_LAUNCHED();
		rc = scan_counts(counts, ngroups, soff, st);
		if (!rc) {
			emit_groups<<<ngroups, EMIT_NT, 0, st>>>(0, scores, n, nb, slo, shi, desc, NULL, (const long long *)soff,
								 sidx, sidx_cap);
			DGM_LAUNCHED();
		}
		DGM_CUDA(cudaFreeAsync(base, st));
	} else {
		int P2 = 1;
		while (P2 < nb)
			P2 <<= 1;
		const size_t smem = (size_t)P2 * 8 + nb;
		DGM_ARG(smem + 1024 <= dgm_smem_optin(), "key selection: %d blocks too many", nb);
		uint8_t *flags = NULL;
		DGM_CUDA(cudaMallocAsync((void **)&flags, (size_t)ngroups * nb, st));
		if (dgm_dyn_smem((const void *)block_select, smem))
			DGM_ARG(0, "key selection: cannot get %zu bytes of shared memory", smem);
		block_select<<<ngroups, BLK_NT, smem, st>>>(scores, n, nb, P2, budget, dg_topk_count(rho, n), topp, slo,
							    shi, flags, counts);
		DGM_LAUNCHED();
		rc = scan_counts(counts, ngroups, soff, st);
		if (!rc) {
			emit_groups<<<ngroups, EMIT_NT, 0, st>>>(1, scores, n, nb, slo, shi, NULL, flags,
								 (const long long *)soff, sidx, sidx_cap);
			DGM_LAUNCHED();
		}
		DGM_CUDA(cudaFreeAsync(flags, st));
	}
	DGM_CUDA(cudaFreeAsync(counts, st));
	return rc;
}
