/*
 * sparse_fwd.cu: gather-KV sparse attention (docs/spec.md §3, the `token` and `block` kv switches).
 *   For each head h and query group g, the queries perm[goff[g] .. goff[g+1]-1] attend only to the
 *   keys sidx[soff[g] .. soff[g+1]-1] (ascending); online softmax over tiles of gathered keys;
 *   output o (heads, n, d) fp32 in the ORIGINAL query order, + residual (fused epilogue), and the
 *   retained mass sum_j exp(scale q.k_j - lse_ref) when lse_ref and mass are given.
 * One kernel serves token lists, block lists (runs of 128 keys) and groups of any size: groups of more
 * than DG_SPARSE_SMALL_GROUP queries go to the tensor-core kernel, smaller groups (the per-query
 * oracle) to the warp-per-group CUDA-core kernel of sparse_small.cuh.
 * The tensor-core kernel: attn_sm90.cuh's Hopper kernel (producer warpgroup + 2 consumer warpgroups,
 * wgmma 128x128 tiles, 2 stages of K/V, intra-warpgroup overlap, ping-pong consumers) with the key-list
 * entries prefetched a tile ahead (row indices by warp shuffle, no dependent load before each copy)
 * and a persistent grid (one CTA per SM over the flattened (head, group) items). One CTA walks a
 * group's list in tiles of 128 gathered keys (cp.async 16-byte rows into swizzled shared memory);
 * groups over 128 queries in chunks of 128. Where some group has more than one chunk (svg2's
 * k-means clusters: thousands of queries in one), the items are the chunks instead, so a large
 * group is spread over the CTAs: a one-CTA kernel before the launch (sparse_chunks) writes every
 * item's first chunk (a block scan), and each CTA finds its chunks' items by binary search. A launch
 * with at most DG_SPARSE_SMALL_PROMOTE small groups gives them a chunk each there too (the small-group
 * kernel then skips them).
 * Modes (per call, as dg_flash_fwd): the tensor-core kernel rounds P to bf16 before P.V, or (precise)
 * splits it into bf16 hi + lo for two P.V products; the small-group kernel keeps P in fp32 in both
 * (CUDA-core fmaf), so it is already at the precise level. Row sums, LSE and retained mass: fp32 P.
 * At d=128 the precise mode runs without the overlap (registers: attn_sm90.cuh).
 * Stored residuals (issue 21): bf16 or fp8 e4m3 with row scales, read in their dtype by the epilogue
 * (template parameter RES; the fp32 kernels are the RES = DG_RES_F32 instances, unchanged).
 * Launchers: dg_sparse_fwd, dg_sparse_fwd_rq, dg_sparse_fwd_heads (dsgap_kernels.h). Test: tests/kernels/gpu_kernels.cu.
 * Bench: dsgap-bench-kernels (effective TFLOP/s on computed pairs, ratios to dense and cuDNN).
 * Earlier versions, their test and benchmark: dev/kernels/ (measured in docs/history.md, "Kernel versions").
 */
#include "dsgap_kernels.h"
#include "attn_sm90.cuh"
#include "sparse_small.cuh"

#include <cub/cub.cuh>

/* chunk_off (items + 2, dg_attn_params) of the launch's (h, g) items: one CTA; a first pass counts
 * the small groups (block reduce), a second writes the offsets, CHUNK_THREADS x CHUNK_PER items a
 * round (a block-wide scan each); the total and the flag last */
#define CHUNK_THREADS 1024
#define CHUNK_PER 4
__global__ void __launch_bounds__(CHUNK_THREADS) sparse_chunks(const __grid_constant__ dg_attn_params p, int32_t *chunk_off)
{
	typedef cub::BlockScan<int, CHUNK_THREADS> scan;
	typedef cub::BlockReduce<int, CHUNK_THREADS> reduce;
	__shared__ union {
		typename scan::TempStorage scan;
		typename reduce::TempStorage reduce;
	} tmp;
	__shared__ int carry_s, multi_s, promote_s;
	const int total = p.heads * p.ngroups, tid = threadIdx.x;
	int small = 0;
	for (int i = tid; i < total; i += CHUNK_THREADS) {
		const int h = i / p.ngroups, g = i - h * p.ngroups;
		const int32_t *goff = head_goff(p, h);
		const int gs = __ldg(goff + g + 1) - __ldg(goff + g);
		small += gs >= 1 && gs <= p.small_max;
	}
	small = reduce(tmp.reduce).Sum(small);
	if (tid == 0)
		carry_s = 0, promote_s = small > 0 && small <= DG_SPARSE_SMALL_PROMOTE, multi_s = promote_s;
	__syncthreads();
	const bool promote = promote_s;
	for (int base = 0; base < total; base += CHUNK_THREADS * CHUNK_PER) {
		int cnt[CHUNK_PER], multi = 0;
		for (int u = 0; u < CHUNK_PER; u++) {
			const int i = base + tid * CHUNK_PER + u;
			cnt[u] = 0;
			if (i < total) {
				const int h = i / p.ngroups, g = i - h * p.ngroups;
				const int32_t *goff = head_goff(p, h);
				const int gs = __ldg(goff + g + 1) - __ldg(goff + g);
				cnt[u] = gs > p.small_max ? (gs + 127) / 128 : promote && gs >= 1;
				multi |= cnt[u] > 1;
			}
		}
		int agg;
		scan(tmp.scan).ExclusiveSum(cnt, cnt, agg);
		const int carry = carry_s;
		for (int u = 0; u < CHUNK_PER; u++) {
			const int i = base + tid * CHUNK_PER + u;
			if (i < total)
				chunk_off[i] = carry + cnt[u];
		}
		if (multi)
			multi_s = 1;
		__syncthreads(); /* every thread has read carry_s and the scan's storage */
		if (tid == 0)
			carry_s = carry + agg;
		__syncthreads();
	}
	if (tid == 0)
		chunk_off[total] = carry_s, chunk_off[total + 1] = multi_s;
}

template <int D, bool PR, int RES, bool TM> static int sparse_run(const dg_attn_params &p, cudaStream_t st)
{
	const int rc = dg_launch("sparse_fwd", dg_attn_sm90_kernel<D, true, PR, RES, TM>,
				 dg_sparse_persistent_grid(p), 384, dg_sm90_cfg<D, 2>::SMEM, p, st);
	if (rc)
		return rc;
	return dg_sparse_small_launch<D, RES, TM>(p, st);
}

template <int D, bool PR, int RES> static int sparse_run_tm(const dg_attn_params &p, cudaStream_t st)
{
	return p.ldi ? sparse_run<D, PR, RES, true>(p, st) : sparse_run<D, PR, RES, false>(p, st);
}

template <int D, int RES> static int sparse_run_d(const dg_attn_params &p, int precise, cudaStream_t st)
{
	return precise ? sparse_run_tm<D, true, RES>(p, st) : sparse_run_tm<D, false, RES>(p, st);
}

template <int RES> static int sparse_run_res(const dg_attn_params &p, int d, int precise, cudaStream_t st)
{
	return d == 128 ? sparse_run_d<128, RES>(p, precise, st) : sparse_run_d<64, RES>(p, precise, st);
}

/* p checked and filled (dg_sparse_params); d is 64 or 128. A stored residual other than fp32
 * (p.residual_dtype) takes the epilogue that reads its dtype; fp32 or none, the fp32 kernels. */
static int sparse_launch(dg_attn_params &p, int d, int precise, dg_stream stream)
{
	cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
	int32_t *chunk_off = NULL;
	if (cudaMallocAsync((void **)&chunk_off, ((size_t)p.heads * p.ngroups + 2) * 4, st) != cudaSuccess) {
		fprintf(stderr, "sparse_fwd: no device memory for the chunk table (%s)\n", cudaGetErrorString(cudaGetLastError()));
		return -1;
	}
	sparse_chunks<<<1, CHUNK_THREADS, 0, st>>>(p, chunk_off);
	p.chunk_off = chunk_off;
	const bool any = p.residual || p.ntab; /* with tab: some head may have one */
	const int rc = any && p.residual_dtype == DG_RES_BF16  ? sparse_run_res<DG_RES_BF16>(p, d, precise, st)
		       : any && p.residual_dtype == DG_RES_FP8 ? sparse_run_res<DG_RES_FP8>(p, d, precise, st)
							     : sparse_run_res<DG_RES_F32>(p, d, precise, st);
	cudaFreeAsync(chunk_off, st);
	return rc;
}

extern "C" int dg_sparse_fwd_heads(const uint16_t *q, const uint16_t *k, const uint16_t *v, int ldi, int heads, int n,
				   int d, const dg_sparse_head *tab, int ngroups, uint16_t *o16, int ldo, int precise,
				   dg_stream stream)
{
	dg_attn_params p;
	if (dg_sparse_heads_params(p, q, k, v, ldi, heads, n, d, tab, ngroups, o16, ldo))
		return -1;
	return sparse_launch(p, d, precise, stream);
}

extern "C" int dg_sparse_fwd_rq(const uint16_t *q, const uint16_t *k, const uint16_t *v, int heads, int n, int d,
				const int32_t *perm, const int32_t *goff, int ngroups, const int64_t *soff,
				const int32_t *sidx, const void *residual, int residual_dtype, const float *lse_ref,
				float *o, float *mass, int precise, dg_stream stream)
{
	if (!dg_res_dtype_ok(residual_dtype)) {
		fprintf(stderr, "sparse_fwd: residual dtype %d (0..2)\n", residual_dtype);
		return -1;
	}
	dg_attn_params p;
	if (dg_sparse_fwd_params(p, q, k, v, heads, n, d, perm, goff, ngroups, soff, sidx, (const float *)residual,
				 lse_ref, o, mass))
		return -1;
	p.residual_dtype = residual_dtype;
	return sparse_launch(p, d, precise, stream);
}

extern "C" int dg_sparse_fwd(const uint16_t *q, const uint16_t *k, const uint16_t *v, int heads, int n, int d,
			     const int32_t *perm, const int32_t *goff, int ngroups, const int64_t *soff,
			     const int32_t *sidx, const float *residual, const float *lse_ref, float *o, float *mass,
			     int precise, dg_stream stream)
{
	return dg_sparse_fwd_rq(q, k, v, heads, n, d, perm, goff, ngroups, soff, sidx, residual, DG_RES_F32, lse_ref,
				o, mass, precise, stream);
}
