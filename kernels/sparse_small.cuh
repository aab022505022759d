/*
 * sparse_small.cuh: the gather-KV sparse attention kernel for small groups (not a public header).
 * Groups of at most DG_SPARSE_SMALL_GROUP queries (the per-query oracle's groups of one) are left by
 * the tensor-core kernels (p.small_max) to this warp-per-group CUDA-core kernel, which reads each
 * selected key once per group instead of once per 128-row tile. It keeps P in fp32 (fmaf), so both
 * P.V modes get the precise result. Groups the launch's chunk table gives a chunk (p.chunk_off: a
 * launch with few small groups) are the tensor-core kernel's and skipped here. Every sparse launch runs it after its tensor-core kernel:
 * kernels/sparse_fwd.cu and dev/kernels/sparse_fwd_v.cu (dg_sparse_small_launch).
 */
#ifndef DG_SPARSE_SMALL_CUH
#define DG_SPARSE_SMALL_CUH

#include "attn_common.cuh"

#define SMALL_WARPS 8

/* One warp per group of <= DG_SPARSE_SMALL_GROUP queries: lane j scores key j of each chunk of 32
 * (a 16-byte-vector read of its K row), warp-wide online softmax, then the warp reads each V row
 * once (coalesced, D/32 dims per lane) for all queries of the group. */
template <int D, int RES = DG_RES_F32, bool TM = false>
__global__ void __launch_bounds__(32 * SMALL_WARPS) dg_sparse_small_kernel(const __grid_constant__ dg_attn_params p)
{
	constexpr int MAXQ = DG_SPARSE_SMALL_GROUP, DPL = D / 32;
	__shared__ __align__(16) float qs[SMALL_WARPS][MAXQ][D];
	__shared__ float ps[SMALL_WARPS][MAXQ][32];
	__shared__ int ks[SMALL_WARPS][32];
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const long long gw = (long long)blockIdx.x * SMALL_WARPS + warp;
	if (gw >= (long long)p.ngroups * p.heads)
		return;
	const int h = (int)(gw / p.ngroups), g = (int)(gw % p.ngroups);
	const int32_t *goff = head_goff(p, h);
	const int q0 = __ldg(goff + g), qn = __ldg(goff + g + 1) - q0;
	if (qn <= 0 || qn > p.small_max)
		return;
	if (p.chunk_off && __ldg(p.chunk_off + gw + 1) > __ldg(p.chunk_off + gw)) /* the tensor-core kernel's */
		return;
	const int32_t *perm = head_perm(p, h) + q0, *sidx = head_sidx(p, h);
	const size_t hoff = in_head<D, TM>(p, h, p.n);
	const int ld = in_ld<D, TM>(p);
	const float sl2 = p.scale_log2;
	for (int qi = 0; qi < qn; qi++) {
		const bf16 *qr = p.q + hoff + (size_t)__ldg(perm + qi) * ld;
		for (int c = lane; c < D; c += 32)
			qs[warp][qi][c] = __bfloat162float(qr[c]); /* exact; products q*k are exact in fp32 */
	}
	__syncwarp();
	float m[MAXQ], l[MAXQ], o[MAXQ][DPL];
#pragma unroll
	for (int qi = 0; qi < MAXQ; qi++) {
		m[qi] = -INFINITY;
		l[qi] = 0.f;
#pragma unroll
		for (int e = 0; e < DPL; e++)
			o[qi][e] = 0.f;
	}
	const int64_t *soff = head_soff(p, h);
	const long long s0 = __ldg(soff + g), s1 = __ldg(soff + g + 1);
	const bf16 *kh = p.k + hoff, *vh = p.v + hoff;
	for (long long base = s0; base < s1; base += 32) {
		const int cnt = (int)min(32LL, s1 - base);
		const bool valid = lane < cnt;
		const int key = valid ? __ldg(sidx + base + lane) : 0;
		ks[warp][lane] = key;
		float s[MAXQ];
#pragma unroll
		for (int qi = 0; qi < MAXQ; qi++)
			s[qi] = 0.f;
		const uint4 *kr = reinterpret_cast<const uint4 *>(kh + (size_t)key * ld);
#pragma unroll 4
		for (int c = 0; c < D / 8; c++) {
			const uint4 kv = __ldg(kr + c);
			const uint32_t kw[4] = {kv.x, kv.y, kv.z, kv.w};
			float kf[8];
#pragma unroll
			for (int e = 0; e < 4; e++) {
				const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&kw[e]));
				kf[2 * e] = f.x;
				kf[2 * e + 1] = f.y;
			}
#pragma unroll
			for (int qi = 0; qi < MAXQ; qi++) {
				if (qi < qn) {
					const float4 qa = *reinterpret_cast<const float4 *>(&qs[warp][qi][c * 8]);
					const float4 qb = *reinterpret_cast<const float4 *>(&qs[warp][qi][c * 8 + 4]);
					float acc = s[qi];
					acc = fmaf(qa.x, kf[0], acc);
					acc = fmaf(qa.y, kf[1], acc);
					acc = fmaf(qa.z, kf[2], acc);
					acc = fmaf(qa.w, kf[3], acc);
					acc = fmaf(qb.x, kf[4], acc);
					acc = fmaf(qb.y, kf[5], acc);
					acc = fmaf(qb.z, kf[6], acc);
					acc = fmaf(qb.w, kf[7], acc);
					s[qi] = acc;
				}
			}
		}
#pragma unroll
		for (int qi = 0; qi < MAXQ; qi++) {
			if (qi < qn) {
				/* the same arithmetic as the tensor-core kernels: raw scores, m = max * sl2, one fma */
				const float sv = valid ? s[qi] : -INFINITY;
				float mx = sv;
#pragma unroll
				for (int off = 16; off > 0; off >>= 1)
					mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, off));
				const float mn = fmaxf(m[qi], mx * sl2);
				const float a = ex2(m[qi] - mn);
				const float pv = valid ? ex2(fmaf(sv, sl2, -mn)) : 0.f;
				float sum = pv;
#pragma unroll
				for (int off = 16; off > 0; off >>= 1)
					sum += __shfl_xor_sync(0xffffffff, sum, off);
				l[qi] = l[qi] * a + sum;
				m[qi] = mn;
#pragma unroll
				for (int e = 0; e < DPL; e++)
					o[qi][e] *= a;
				ps[warp][qi][lane] = pv;
			}
		}
		__syncwarp();
#pragma unroll 4
		for (int j = 0; j < cnt; j++) {
			const bf16 *vr = vh + (size_t)ks[warp][j] * ld + lane * DPL;
			float vf[DPL];
			if constexpr (DPL == 4) {
				const uint2 raw = __ldg(reinterpret_cast<const uint2 *>(vr));
				const float2 f0 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&raw.x));
				const float2 f1 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&raw.y));
				vf[0] = f0.x;
				vf[1] = f0.y;
				vf[2] = f1.x;
				vf[3] = f1.y;
			} else {
				const uint32_t raw = __ldg(reinterpret_cast<const unsigned int *>(vr));
				const float2 f0 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&raw));
				vf[0] = f0.x;
				vf[1] = f0.y;
			}
#pragma unroll
			for (int qi = 0; qi < MAXQ; qi++) {
				if (qi < qn) {
					const float pj = ps[warp][qi][j];
#pragma unroll
					for (int e = 0; e < DPL; e++)
						o[qi][e] = fmaf(pj, vf[e], o[qi][e]);
				}
			}
		}
		__syncwarp();
	}
	const float *hres = RES == DG_RES_F32 ? head_residual<D>(p, h) : nullptr;
	const unsigned char *hresq = nullptr; /* a stored residual of another dtype (RES) */
	if constexpr (RES != DG_RES_F32)
		hresq = head_residual_q<D, RES>(p, h);
#pragma unroll
	for (int qi = 0; qi < MAXQ; qi++) {
		if (qi < qn) {
			const int row = __ldg(perm + qi);
			const size_t ri = (size_t)h * p.n + row, oi = out_offset<D>(p, h, row) + lane * DPL;
			const float inv = l[qi] > 0.f ? 1.f / l[qi] : 0.f;
			const float *res = hres ? hres + (size_t)row * D + lane * DPL : nullptr;
			float rq[DPL];
			if constexpr (RES != DG_RES_F32) {
				const float sc = hresq ? dg_res_row_scale<D, RES>(p, hresq, row) : 0.f;
#pragma unroll
				for (int e = 0; e < DPL; e += 2) {
					const float2 r2 = hresq ? dg_res_pair<D, RES>(hresq, row, lane * DPL + e, sc)
								: make_float2(0.f, 0.f);
					rq[e] = r2.x;
					rq[e + 1] = r2.y;
				}
			}
#pragma unroll
			for (int e = 0; e < DPL; e++) {
				float rv;
				if constexpr (RES != DG_RES_F32)
					rv = rq[e];
				else
					rv = res ? __ldg(res + e) : 0.f;
				const float v = o[qi][e] * inv + rv;
				if (p.o_f32)
					p.o_f32[oi + e] = v;
				else
					p.o_bf16[oi + e] = __float2bfloat16_rn(v);
			}
			if (lane == 0 && p.mass && p.lse_ref)
				p.mass[ri] = dg_mass(l[qi], m[qi], __ldg(p.lse_ref + ri));
		}
	}
}

/* the small groups of p (the tensor-core kernel skips them), on st: 0, or -1 after one line */
template <int D, int RES = DG_RES_F32, bool TM = false>
static int dg_sparse_small_launch(const dg_attn_params &p, cudaStream_t st)
{
	const long long warps = (long long)p.ngroups * p.heads;
	const dim3 sgrid((unsigned)((warps + SMALL_WARPS - 1) / SMALL_WARPS));
	return dg_launch("sparse_fwd", dg_sparse_small_kernel<D, RES, TM>, sgrid, 32 * SMALL_WARPS, 0, p, st);
}

#endif
