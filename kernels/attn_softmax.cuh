/*
 * attn_softmax.cuh: the online softmax on an MMA accumulator (not a public header): quad reductions,
 * the masks (past the keys; window attention's pairs), the step that rescales the running max and
 * sums, the output rescale, and P's packing to bf16 A fragments (hi, and lo in the precise mode).
 * Contract: register-only (warp shuffles within a quad, no memory); accumulator layout as
 * attn_ptx.cuh states; scores in raw units, maxima in log2 units (score * scale_log2).
 */
#ifndef DG_ATTN_SOFTMAX_CUH
#define DG_ATTN_SOFTMAX_CUH

#include <math.h>

#include "attn_ptx.cuh"
#include "window_tiles.h"

DG_DEV float quad_max(float x)
{
	x = fmaxf(x, __shfl_xor_sync(0xffffffff, x, 1));
	return fmaxf(x, __shfl_xor_sync(0xffffffff, x, 2));
}
DG_DEV float quad_sum(float x)
{
	x += __shfl_xor_sync(0xffffffff, x, 1);
	return x + __shfl_xor_sync(0xffffffff, x, 2);
}

/* scores of key columns >= nvalid to -inf (accumulator layout, NS floats = NS/2 columns) */
template <int NS> DG_DEV void mask_cols(float (&s)[NS], int nvalid, int t4)
{
#pragma unroll
	for (int j = 0; j < NS / 4; j++) {
		const int col = 8 * j + 2 * t4;
		if (col >= nvalid) {
			s[4 * j] = -INFINITY;
			s[4 * j + 2] = -INFINITY;
		}
		if (col + 1 >= nvalid) {
			s[4 * j + 1] = -INFINITY;
			s[4 * j + 3] = -INFINITY;
		}
	}
}

/* window attention's mask (window_tiles.h): of the scores of rows ia and ib against keys j0 + column,
 * -inf where the column is >= nvalid or the pair is outside the window */
template <int NS>
DG_DEV void mask_window(float (&s)[NS], int j0, int nvalid, int ia, int ib, int text, int w, int t4)
{
#pragma unroll
	for (int j = 0; j < NS / 4; j++)
#pragma unroll
		for (int e = 0; e < 2; e++) {
			const int col = 8 * j + 2 * t4 + e, key = j0 + col;
			const bool in = col < nvalid;
			if (!(in && dg_window_attends(ia, key, text, w)))
				s[4 * j + e] = -INFINITY;
			if (!(in && dg_window_attends(ib, key, text, w)))
				s[4 * j + 2 + e] = -INFINITY;
		}
}

/*
 * Online softmax step on raw scores s (two rows per thread). m0/m1 are running maxima in
 * log2 units (score * scale_log2), l0/l1 per-thread partial row sums (reduced over the quad only
 * at the end). On return s holds p = 2^(score*sl2 - m) and a0/a1 the factors for the old sums.
 */
template <int NS>
DG_DEV void softmax_step(float (&s)[NS], float &m0, float &m1, float &l0, float &l1, float &a0, float &a1, float sl2)
{
	float x0 = -INFINITY, x1 = -INFINITY;
#pragma unroll
	for (int j = 0; j < NS / 4; j++) {
		x0 = fmaxf(x0, fmaxf(s[4 * j], s[4 * j + 1]));
		x1 = fmaxf(x1, fmaxf(s[4 * j + 2], s[4 * j + 3]));
	}
	x0 = quad_max(x0);
	x1 = quad_max(x1);
	const float n0 = fmaxf(m0, x0 * sl2), n1 = fmaxf(m1, x1 * sl2);
	a0 = ex2(m0 - n0);
	a1 = ex2(m1 - n1);
	m0 = n0;
	m1 = n1;
	float r0 = 0.f, r1 = 0.f;
#pragma unroll
	for (int j = 0; j < NS / 4; j++) {
		s[4 * j] = ex2(fmaf(s[4 * j], sl2, -n0));
		s[4 * j + 1] = ex2(fmaf(s[4 * j + 1], sl2, -n0));
		s[4 * j + 2] = ex2(fmaf(s[4 * j + 2], sl2, -n1));
		s[4 * j + 3] = ex2(fmaf(s[4 * j + 3], sl2, -n1));
		r0 += s[4 * j] + s[4 * j + 1];
		r1 += s[4 * j + 2] + s[4 * j + 3];
	}
	l0 = l0 * a0 + r0;
	l1 = l1 * a1 + r1;
}

template <int NO> DG_DEV void rescale(float (&o)[NO], float a0, float a1)
{
#pragma unroll
	for (int j = 0; j < NO / 4; j++) {
		o[4 * j] *= a0;
		o[4 * j + 1] *= a0;
		o[4 * j + 2] *= a1;
		o[4 * j + 3] *= a1;
	}
}

/*
 * P (accumulator layout, fp32) to bf16 A fragments: 16 keys per k-step, 4 registers each.
 * hi = bf16(P) (the bf16 mode: |hi - P| <= 2^-8 P). PRECISE also gives lo = bf16(P - hi), P - hi being
 * exact in fp32, for a second product lo.V: hi + lo carries 16 of P's 24 bits, |hi + lo - P| <= 2^-16 P.
 */
template <bool PRECISE, int NS>
DG_DEV void pack_p(uint32_t (&hi)[NS / 2], uint32_t (&lo)[NS / 2], const float (&s)[NS])
{
#pragma unroll
	for (int i = 0; i < NS / 2; i++) {
		const __nv_bfloat162 h = __floats2bfloat162_rn(s[2 * i], s[2 * i + 1]);
		hi[i] = *reinterpret_cast<const uint32_t *>(&h);
		if constexpr (PRECISE) {
			const float2 hf = __bfloat1622float2(h);
			lo[i] = pack_bf16(s[2 * i] - hf.x, s[2 * i + 1] - hf.y);
		}
	}
}

#endif
