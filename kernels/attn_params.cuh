/*
 * attn_params.cuh: the attention kernels' parameter block and work items (not a public header).
 * dg_attn_params is what one launch of a dense, sparse or window attention kernel reads (filled on
 * the host by attn_launch.cuh); the head_* accessors give head h's sparse arrays and residual either
 * way they are passed (offsets by h, or a per-head table); the stored residual's values are decoded
 * by dg_e4m3_value, dg_res_row_scale and dg_res_pair; dg_for_each_item is the order in which a CTA
 * walks its work items (producer and consumers walk the same sequence).
 * Contract: device code only; every function is pure given p (reads only, __ldg for global loads).
 */
#ifndef DG_ATTN_PARAMS_CUH
#define DG_ATTN_PARAMS_CUH

#include <math.h>

#include "attn_ptx.cuh"
#include "dsgap_kernels.h"

/* Parameters of one attention launch (dense or sparse). */
struct dg_attn_params {
	const bf16 *q, *k, *v; /* q (heads, n, d); k, v (heads, nk, d); or, ldi > 0, token-major */
	int heads, n;
	int nk;                /* dense: keys per head (cross-attention); 0 = n (always 0 for sparse) */
	float scale_log2;      /* log2(e)/sqrt(d) */
	/* outputs: O in (heads, n, d), or token-major with row stride ldo (> 0: head h's row r at
	 * r * ldo + h * d); lse and mass (heads, n) */
	float *o_f32;          /* or NULL */
	bf16 *o_bf16;          /* used when o_f32 is NULL */
	int ldo;
	float *lse;            /* dense: or NULL */
	/* sparse inputs and outputs: per head h the arrays below offset by h (dg_sparse_fwd), or, with
	 * ntab > 0, the head's own from tab[h] (dg_sparse_fwd_heads) */
	const int32_t *perm, *goff;
	int ngroups;
	const int64_t *soff;
	const int32_t *sidx;
	const void *residual;  /* stored as residual_dtype says (dsgap_kernels.h, DG_RES_*) */
	int residual_dtype;    /* one per launch; the kernels take it as their RES template parameter */
	const float *lse_ref;
	float *mass;
	int small_max;         /* groups of <= small_max queries are left to the small-group kernel */
	/* the persistent sparse kernel's chunks (or NULL: an item is walked whole by one CTA):
	 * chunk_off (heads * ngroups + 2) = the exclusive prefix sums over the items (h, g) of their
	 * chunks of up to 128 queries (a small group: 0, or 1 where the launch has at most
	 * DG_SPARSE_SMALL_PROMOTE of them), then 1 if the chunks are the items (some item has more than
	 * one, or small groups are the tensor-core kernel's) */
	const int32_t *chunk_off;
	int ntab;
	dg_sparse_head tab[DG_SPARSE_HEADS_MAX];
	/* window attention (dg_window_fwd; read by its kernels only): query i attends key j iff
	 * i < win_text or j < win_text or |i - j| <= win_w */
	int win_text, win_w;
	/* 0, or the inputs' row stride (sparse): head h's row r at r * ldi + h * d; last, so that the head-major
	 * kernels read every other field where they did before it */
	int ldi;
};

/* head h's sparse arrays */
DG_DEV const int32_t *head_perm(const dg_attn_params &p, int h)
{
	return p.ntab ? p.tab[h].perm : p.perm + (size_t)h * p.n;
}
DG_DEV const int32_t *head_goff(const dg_attn_params &p, int h)
{
	return p.ntab ? p.tab[h].goff : p.goff + (size_t)h * (p.ngroups + 1);
}
DG_DEV const int64_t *head_soff(const dg_attn_params &p, int h)
{
	return p.ntab ? p.tab[h].soff : p.soff + (size_t)h * (p.ngroups + 1);
}
DG_DEV const int32_t *head_sidx(const dg_attn_params &p, int h) { return p.ntab ? p.tab[h].sidx : p.sidx; }
template <int D> DG_DEV const float *head_residual(const dg_attn_params &p, int h)
{
	if (p.ntab)
		return static_cast<const float *>(p.tab[h].residual);
	return p.residual ? static_cast<const float *>(p.residual) + (size_t)h * p.n * D : nullptr;
}
/* head h's stored residual of dtype RES (DG_RES_BF16 or DG_RES_FP8), as bytes */
template <int D, int RES> DG_DEV const unsigned char *head_residual_q(const dg_attn_params &p, int h)
{
	if (p.ntab)
		return static_cast<const unsigned char *>(p.tab[h].residual);
	const size_t hb = RES == DG_RES_BF16 ? (size_t)p.n * D * 2 : (size_t)dg_res_fp8_scales(p.n, D) + (size_t)p.n * 4;
	return p.residual ? static_cast<const unsigned char *>(p.residual) + (size_t)h * hb : nullptr;
}
/* e4m3 (E4M3FN) byte -> fp32, exactly dg_e4m3_to_f32 (0x7f/0xff NaN) */
DG_DEV float dg_e4m3_value(unsigned b)
{
	const unsigned e = (b >> 3) & 15, m = b & 7;
	float v;
	if (e == 15 && m == 7)
		v = __int_as_float(0x7fc00000);
	else if (e == 0)
		v = (float)m * 0x1p-9f;
	else
		v = __int_as_float((int)(((e + 120u) << 23) | (m << 20)));
	return (b & 0x80) ? -v : v;
}
/* a stored residual's row `row`: its values at column col (RES: its dtype); the fp8 row scale
 * comes from dg_res_row_scale */
template <int D, int RES> DG_DEV float dg_res_row_scale(const dg_attn_params &p, const unsigned char *base, int row)
{
	if constexpr (RES == DG_RES_FP8)
		return __ldg(reinterpret_cast<const float *>(base + dg_res_fp8_scales(p.n, D)) + row);
	return 1.f;
}
template <int D, int RES> DG_DEV float2 dg_res_pair(const unsigned char *base, int row, int col, float scale)
{
	if constexpr (RES == DG_RES_BF16) {
		const unsigned w = __ldg(reinterpret_cast<const unsigned *>(base) + ((size_t)row * D + col) / 2);
		return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
	} else {
		const unsigned short w = __ldg(reinterpret_cast<const unsigned short *>(base) + ((size_t)row * D + col) / 2);
		return make_float2(dg_e4m3_value(w & 0xff) * scale, dg_e4m3_value(w >> 8) * scale);
	}
}
/* where O's row `row` of head h starts */
template <int D> DG_DEV size_t out_offset(const dg_attn_params &p, int h, int row)
{
	return p.ldo ? (size_t)row * p.ldo + (size_t)h * D : ((size_t)h * p.n + row) * D;
}

/* Keys per head: p.nk for dense attention with its own key count, else n. */
DG_DEV int dg_kv_len(const dg_attn_params &p) { return p.nk > 0 ? p.nk : p.n; }

/* where head h's rows of an input of `rows` rows a head start, and the elements between two rows:
 * (heads, rows, d), or (TM, a compile-time choice so that the head-major kernels keep their constant
 * row stride) token-major with row stride p.ldi */
template <int D, bool TM> DG_DEV size_t in_head(const dg_attn_params &p, int h, int rows)
{
	return TM ? (size_t)h * D : (size_t)h * rows * D;
}
template <int D, bool TM> DG_DEV int in_ld(const dg_attn_params &p) { return TM ? p.ldi : D; }

/* One unit of work: up to BM query rows of one head against one key list. */
struct dg_item {
	int h;
	int qpos;        /* dense: first query row; sparse: first position in the head's perm */
	int qcount;      /* valid query rows */
	long long kbase; /* sparse: offset of the key list in sidx */
	int nkeys;       /* keys in the list (dense: n) */
};

/* The work items of this CTA, in order (producer and consumers walk the same sequence).
 * Dense (SPARSE false): blockIdx.x = query block, blockIdx.y = head. Sparse (the promoted sparse
 * kernel, a persistent grid): see below. (dev/kernels' attn_sm90_lab.cuh adds the earlier,
 * non-persistent sparse walk.) */
template <bool SPARSE, int BM, typename F> DG_DEV void dg_for_each_item(const dg_attn_params &p, F &&f)
{
	if (SPARSE) {
		/* persistent: CTA b takes items b, b + gridDim.x, ... of the (h, g) items flattened
		 * (consecutive items are in the same head, so the CTAs in flight share one or two heads' K/V
		 * in L2); where a group has more than BM queries (chunk_off's flag), the items are its chunks
		 * instead, so that one large group is spread over the CTAs rather than walked by one */
		const int total = p.heads * p.ngroups; /* < 2^31, checked by the launcher */
		const bool chunked = p.chunk_off && __ldg(p.chunk_off + total + 1);
		const int nitems = chunked ? __ldg(p.chunk_off + total) : total;
		for (int t = blockIdx.x; t < nitems; t += gridDim.x) {
			int i = t, c0 = 0;
			if (chunked) { /* the item whose chunks hold t: chunk_off[i] <= t < chunk_off[i + 1] */
				int lo = 0, hi = total;
				while (hi - lo > 1) {
					const int mid = (lo + hi) >> 1;
					if (__ldg(p.chunk_off + mid) <= t)
						lo = mid;
					else
						hi = mid;
				}
				i = lo, c0 = (t - __ldg(p.chunk_off + lo)) * BM;
			}
			const int h = i / p.ngroups, g = i - h * p.ngroups;
			const int32_t *goff = head_goff(p, h);
			const int q0 = __ldg(goff + g), gs = __ldg(goff + g + 1) - q0;
			if (!chunked && gs <= p.small_max) /* the small-group kernel's */
				continue;
			const int64_t *soff = head_soff(p, h);
			const long long s0 = __ldg(soff + g);
			const int nk = (int)(__ldg(soff + g + 1) - s0);
			for (; c0 < gs; c0 += BM) {
				dg_item it = {h, q0 + c0, min(BM, gs - c0), s0, nk};
				f(it);
				if (chunked)
					break;
			}
		}
		return;
	}
	const int h = blockIdx.y;
	const int m0 = blockIdx.x * BM;
	dg_item it = {h, m0, min(BM, p.n - m0), 0, dg_kv_len(p)};
	f(it);
}

#endif
