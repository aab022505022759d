/*
 * attn_epilogue.cuh: the attention kernels' epilogue (not a public header): each thread's two rows of
 * O normalised by the row sums and written in fp32 or bf16, with the sparse kernels' residual (any
 * stored dtype) and retained mass, or the dense kernels' LSE.
 * Contract: called once per item by every consumer thread after its last P.V; reads the residual and
 * lse_ref, writes only its own rows of O, mass and lse.
 */
#ifndef DG_ATTN_EPILOGUE_CUH
#define DG_ATTN_EPILOGUE_CUH

#include "attn_params.cuh"
#include "attn_softmax.cuh"

/*
 * Retained mass sum_j 2^(s_j sl2 - lse_ref log2 e) = l 2^(m - lse_ref log2 e), with l = sum_j 2^(s_j sl2 - m)
 * for the m the sums were taken against. The exponent is a difference of two numbers near |s| sl2
 * (tens): formed in fp64 from the fp32 m and lse_ref so that it is rounded once, not three times.
 */
DG_DEV float dg_mass(float l, float m, float lse_ref)
{
	if (!(l > 0.f))
		return 0.f;
	return (float)((double)l * exp2((double)m - (double)lse_ref * 1.4426950408889634));
}

/*
 * Epilogue for one thread's two rows r0 = rbase + g and r1 = r0 + 8 of the item: normalise,
 * write O in fp32 or bf16 (sparse: at the original query index (PERMUTED) or in place (window
 * attention), + residual), and the LSE (dense) or the retained mass (sparse).
 */
template <int D, bool SPARSE, int RES = DG_RES_F32, bool PERMUTED = SPARSE>
DG_DEV void write_rows(const dg_attn_params &p, const dg_item &it, int rbase, int g, int t4, const float (&o)[D / 2],
		       float m0, float m1, float l0, float l1)
{
	l0 = quad_sum(l0);
	l1 = quad_sum(l1);
#pragma unroll
	for (int half = 0; half < 2; half++) {
		const int r = rbase + g + 8 * half;
		if (r >= it.qcount)
			continue;
		const float l = half ? l1 : l0, m = half ? m1 : m0;
		const float inv = l > 0.f ? 1.f / l : 0.f;
		const int row = PERMUTED ? __ldg(head_perm(p, it.h) + it.qpos + r) : it.qpos + r;
		const size_t ri = (size_t)it.h * p.n + row, oi = out_offset<D>(p, it.h, row);
		const float *res = SPARSE && RES == DG_RES_F32 ? head_residual<D>(p, it.h) : nullptr;
		if (res)
			res += (size_t)row * D;
		const unsigned char *resq = nullptr; /* a stored residual of another dtype (RES) */
		float rscale = 1.f;
		if constexpr (SPARSE && RES != DG_RES_F32) {
			resq = head_residual_q<D, RES>(p, it.h);
			if (resq)
				rscale = dg_res_row_scale<D, RES>(p, resq, row);
		}
#pragma unroll
		for (int j = 0; j < D / 8; j++) {
			const int col = 8 * j + 2 * t4;
			float2 v = make_float2(o[4 * j + 2 * half] * inv, o[4 * j + 2 * half + 1] * inv);
			if (res) {
				const float2 rv = __ldg(reinterpret_cast<const float2 *>(res + col));
				v.x += rv.x;
				v.y += rv.y;
			}
			if constexpr (RES != DG_RES_F32) {
				if (resq) {
					const float2 rv = dg_res_pair<D, RES>(resq, row, col, rscale);
					v.x += rv.x;
					v.y += rv.y;
				}
			}
			if (p.o_f32)
				*reinterpret_cast<float2 *>(p.o_f32 + oi + col) = v;
			else
				*reinterpret_cast<uint32_t *>(p.o_bf16 + oi + col) = pack_bf16(v.x, v.y);
		}
		if (SPARSE && t4 == 0 && p.mass && p.lse_ref)
			p.mass[ri] = dg_mass(l, m, __ldg(p.lse_ref + ri));
		if (!SPARSE && t4 == 0 && p.lse)
			p.lse[ri] = l > 0.f ? (float)(((double)m + log2((double)l)) * 0.6931471805599453) : -INFINITY;
	}
}

#endif
