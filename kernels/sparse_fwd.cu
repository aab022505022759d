/*
 * sparse_fwd.cu: gather-KV sparse attention (DESIGN §3, the `token` and `block` kv switches).
 *   For each head h and query group g, the queries perm[goff[g] .. goff[g+1]-1] attend only to the
 *   keys sidx[soff[g] .. soff[g+1]-1] (ascending); online softmax over tiles of gathered keys;
 *   output o (heads, n, d) fp32 in the ORIGINAL query order, + residual (fused epilogue), and the
 *   retained mass sum_j exp(scale q.k_j - lse_ref) when lse_ref and mass are given.
 * One kernel serves token lists, block lists (runs of 128 keys) and groups of any size: groups of more
 * than DG_SPARSE_SMALL_GROUP queries go to the tensor-core kernel (one CTA walks the group's list in
 * tiles of 128 gathered keys, cp.async 16-byte rows into swizzled shared memory; groups over 128
 * queries in chunks of 128); smaller groups (the per-query oracle) go to a warp-per-group CUDA-core
 * kernel that reads each selected key once per group, not once per 128-row tile.
 * Modes (per call, as dg_flash_fwd): the tensor-core kernels round P to bf16 before P.V, or (precise)
 * split it into bf16 hi + lo for two P.V products; the small-group kernel keeps P in fp32 in both
 * (CUDA-core fmaf), so it is already at the precise level. Row sums, LSE and retained mass: fp32 P.
 * At d=128 the persistent versions (v7, v8) run the precise mode without overlap (registers:
 * attn_sm90.cuh); its cost: results/bench/BENCH.md.
 * Launchers: dg_sparse_fwd / dg_sparse_fwd_v (dsgap_kernels.h). Test: tests/gpu_kernels.cu.
 * Bench: dsgap-bench-kernels (effective TFLOP/s on computed pairs, ratios to dense and cuDNN).
 *
 * Versions (the tensor-core kernel; the small-group kernel is the same in all). H200, d=128, 12 heads,
 * N=32760, groups of 128, 15% token lists (4992 keys each), time of our dense v4 over sparse time,
 * 2026-12-02 (results/bench/BENCH.md; x cuDNN = this x 0.92):
 *   v1  FA2 style, 64-query x 64-key tiles, mma.sync (attn_fa2.cuh)                           2.67x
 *   v2  Hopper warp-specialised wgmma, 128x128 tiles, 2 stages (attn_sm90.cuh)                 4.12x
 *   v3  v2 + intra-warpgroup overlap                                                            4.03x
 *   v4  v3 + ping-pong consumer warpgroups                                                      4.03x
 *   v5  v4 with 3 stages (4 at d=64)                                                            4.03x
 *   v6  v2 + key-list entries prefetched a tile ahead (row indices by warp shuffle, no dependent
 *       load before each copy) + persistent grid (one CTA per SM over the flattened items)    6.10x, 6.40x
 *   v7  v4 + the same      PROMOTED: 494 TFLOP/s effective, 5.62x cuDNN, 1.64x Flex          6.22x, 6.01x
 *   v8  v7 with 3 stages (4 at d=64)                                                            6.16x, 6.09x
 *   (two numbers: runs 2 and 3; v6 vs v7 is within run-to-run spread)
 * Per-query oracle (groups of one, small-group kernel): 269 ms, gather-bound (1 TB of K/V rows).
 */
#include "dsgap_kernels.h"
#include "attn_fa2.cuh"
#include "attn_sm90.cuh"

#include <algorithm>

#define SMALL_WARPS 8

/* One warp per group of <= DG_SPARSE_SMALL_GROUP queries: lane j scores key j of each chunk of 32
 * (a 16-byte-vector read of its K row), warp-wide online softmax, then the warp reads each V row
 * once (coalesced, D/32 dims per lane) for all queries of the group. */
template <int D>
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
	const int32_t *perm = head_perm(p, h) + q0, *sidx = head_sidx(p, h);
	const size_t hoff = (size_t)h * p.n * D;
	const float sl2 = p.scale_log2;
	for (int qi = 0; qi < qn; qi++) {
		const bf16 *qr = p.q + hoff + (size_t)__ldg(perm + qi) * D;
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
		const uint4 *kr = reinterpret_cast<const uint4 *>(kh + (size_t)key * D);
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
			const bf16 *vr = vh + (size_t)ks[warp][j] * D + lane * DPL;
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
	const float *hres = head_residual<D>(p, h);
#pragma unroll
	for (int qi = 0; qi < MAXQ; qi++) {
		if (qi < qn) {
			const int row = __ldg(perm + qi);
			const size_t ri = (size_t)h * p.n + row, oi = out_offset<D>(p, h, row) + lane * DPL;
			const float inv = l[qi] > 0.f ? 1.f / l[qi] : 0.f;
			const float *res = hres ? hres + (size_t)row * D + lane * DPL : nullptr;
#pragma unroll
			for (int e = 0; e < DPL; e++) {
				const float v = o[qi][e] * inv + (res ? __ldg(res + e) : 0.f);
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

static const char *const sparse_names[] = {
	"v1 fa2 gather: 64-query x 64-key tiles, mma.sync, cp.async row gather",
	"v2 sm90 gather: producer warpgroup gathers rows (cp.async->mbarrier, 2 stages), wgmma 128x128",
	"v3 sm90 gather: v2 + intra-warpgroup overlap",
	"v4 sm90 gather: v3 + ping-pong consumer warpgroups",
	"v5 sm90 gather: v4 with 3 stages (4 at d=64)",
	"v6 sm90 gather: v2 + list entries prefetched a tile ahead (rows by shuffle) + persistent grid",
	"v7 sm90 gather: v4 + list prefetch + persistent grid",
	"v8 sm90 gather: v7 with 3 stages (4 at d=64)",
};
#define SPARSE_NVER ((int)(sizeof sparse_names / sizeof sparse_names[0]))
#define SPARSE_BEST 7

extern "C" const char *dg_sparse_fwd_name(int version)
{
	if (version == 0)
		version = SPARSE_BEST;
	return version >= 1 && version <= SPARSE_NVER ? sparse_names[version - 1] : NULL;
}

template <int D, bool PR> static int sparse_run(int ver, const dg_attn_params &p, cudaStream_t st)
{
	const char *op = "sparse_fwd";
	const dim3 grid(min(p.ngroups, 2048), p.heads);
	static int nsm = 0; /* persistent versions: one CTA per SM */
	if (!nsm) {
		int dev = 0;
		if (cudaGetDevice(&dev) != cudaSuccess ||
		    cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || nsm < 1)
			nsm = 132;
	}
	const dim3 pgrid((unsigned)std::min<long long>((long long)p.ngroups * p.heads, nsm));
	int rc = -1;
	switch (ver) {
	case 1:
		rc = dg_launch(op, dg_attn_fa2_kernel<D, true, PR>, grid, 128, dg_fa2_cfg<D>::SMEM, p, st);
		break;
	case 2:
		rc = dg_launch(op, dg_attn_sm90_kernel<D, 2, false, false, true, false, PR>, grid, 384,
			       dg_sm90_cfg<D, 2>::SMEM, p, st);
		break;
	case 3:
		rc = dg_launch(op, dg_attn_sm90_kernel<D, 2, true, false, true, false, PR>, grid, 384,
			       dg_sm90_cfg<D, 2>::SMEM, p, st);
		break;
	case 4:
		rc = dg_launch(op, dg_attn_sm90_kernel<D, 2, true, true, true, false, PR>, grid, 384,
			       dg_sm90_cfg<D, 2>::SMEM, p, st);
		break;
	case 5: {
		constexpr int S = D == 128 ? 3 : 4;
		rc = dg_launch(op, dg_attn_sm90_kernel<D, S, true, true, true, false, PR>, grid, 384,
			       dg_sm90_cfg<D, S>::SMEM, p, st);
		break;
	}
	case 6:
		rc = dg_launch(op, dg_attn_sm90_kernel<D, 2, false, false, true, true, PR>, pgrid, 384,
			       dg_sm90_cfg<D, 2>::SMEM, p, st);
		break;
	case 7:
		rc = dg_launch(op, dg_attn_sm90_kernel<D, 2, true, true, true, true, PR>, pgrid, 384,
			       dg_sm90_cfg<D, 2>::SMEM, p, st);
		break;
	case 8: {
		constexpr int S = D == 128 ? 3 : 4;
		rc = dg_launch(op, dg_attn_sm90_kernel<D, S, true, true, true, true, PR>, pgrid, 384,
			       dg_sm90_cfg<D, S>::SMEM, p, st);
		break;
	}
	}
	if (rc)
		return rc;
	const long long warps = (long long)p.ngroups * p.heads;
	const dim3 sgrid((unsigned)((warps + SMALL_WARPS - 1) / SMALL_WARPS));
	return dg_launch(op, dg_sparse_small_kernel<D>, sgrid, 32 * SMALL_WARPS, 0, p, st);
}

/* the launch of either launcher: version checked, p filled but for the common fields */
static int sparse_launch(int version, dg_attn_params &p, const uint16_t *q, const uint16_t *k, const uint16_t *v,
			 int heads, int n, int d, int ngroups, int precise, dg_stream stream)
{
	if (version == 0)
		version = SPARSE_BEST;
	if (version < 1 || version > SPARSE_NVER) {
		fprintf(stderr, "sparse_fwd: no version %d (1..%d)\n", version, SPARSE_NVER);
		return -1;
	}
	if (dg_check_qkv("sparse_fwd", q, k, v, heads, n, d))
		return -1;
	if (ngroups < 1 || (long long)ngroups * heads > 2147483647LL) {
		fprintf(stderr, "sparse_fwd: bad group count %d\n", ngroups);
		return -1;
	}
	p.q = reinterpret_cast<const bf16 *>(q);
	p.k = reinterpret_cast<const bf16 *>(k);
	p.v = reinterpret_cast<const bf16 *>(v);
	p.heads = heads;
	p.n = n;
	p.scale_log2 = (float)(1.4426950408889634 / sqrt((double)d));
	p.ngroups = ngroups;
	p.small_max = DG_SPARSE_SMALL_GROUP;
	cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
	if (precise)
		return d == 128 ? sparse_run<128, true>(version, p, st) : sparse_run<64, true>(version, p, st);
	return d == 128 ? sparse_run<128, false>(version, p, st) : sparse_run<64, false>(version, p, st);
}

extern "C" int dg_sparse_fwd_v(int version, const uint16_t *q, const uint16_t *k, const uint16_t *v, int heads, int n,
			       int d, const int32_t *perm, const int32_t *goff, int ngroups, const int64_t *soff,
			       const int32_t *sidx, const float *residual, const float *lse_ref, float *o, float *mass,
			       int precise, dg_stream stream)
{
	if (!perm || !goff || !soff || !sidx || !o) {
		fprintf(stderr, "sparse_fwd: perm, goff, soff, sidx and o must not be NULL\n");
		return -1;
	}
	if (mass && !lse_ref) {
		fprintf(stderr, "sparse_fwd: mass needs lse_ref\n");
		return -1;
	}
	if (((uintptr_t)o | (uintptr_t)residual) & 7) {
		fprintf(stderr, "sparse_fwd: o and residual must be 8-byte aligned\n");
		return -1;
	}
	dg_attn_params p = {};
	p.perm = perm;
	p.goff = goff;
	p.soff = soff;
	p.sidx = sidx;
	p.residual = residual;
	p.lse_ref = lse_ref;
	p.o_f32 = o;
	p.mass = mass;
	return sparse_launch(version, p, q, k, v, heads, n, d, ngroups, precise, stream);
}

extern "C" int dg_sparse_fwd_heads(const uint16_t *q, const uint16_t *k, const uint16_t *v, int heads, int n, int d,
				   const dg_sparse_head *tab, int ngroups, uint16_t *o16, int ldo, int precise,
				   dg_stream stream)
{
	if (heads < 1 || heads > DG_SPARSE_HEADS_MAX || !tab || !o16) {
		fprintf(stderr, "sparse_fwd_heads: %d heads (1..%d), tab and o16 needed\n", heads, DG_SPARSE_HEADS_MAX);
		return -1;
	}
	if (ldo < heads * d || (ldo & 1) || ((uintptr_t)o16 & 3)) {
		fprintf(stderr, "sparse_fwd_heads: row stride %d below %d x %d, odd, or o16 not 4-byte aligned\n", ldo,
			heads, d);
		return -1;
	}
	dg_attn_params p = {};
	for (int h = 0; h < heads; h++) {
		const dg_sparse_head &t = tab[h];
		if (!t.perm || !t.goff || !t.soff || !t.sidx || ((uintptr_t)t.residual & 7)) {
			fprintf(stderr, "sparse_fwd_heads: head %d: perm, goff, soff, sidx missing or residual misaligned\n", h);
			return -1;
		}
		p.tab[h] = t;
	}
	p.ntab = heads;
	p.o_bf16 = reinterpret_cast<bf16 *>(o16);
	p.ldo = ldo;
	return sparse_launch(0, p, q, k, v, heads, n, d, ngroups, precise, stream);
}

extern "C" int dg_sparse_fwd(const uint16_t *q, const uint16_t *k, const uint16_t *v, int heads, int n, int d,
			     const int32_t *perm, const int32_t *goff, int ngroups, const int64_t *soff,
			     const int32_t *sidx, const float *residual, const float *lse_ref, float *o, float *mass,
			     int precise, dg_stream stream)
{
	return dg_sparse_fwd_v(0, q, k, v, heads, n, d, perm, goff, ngroups, soff, sidx, residual, lse_ref, o, mass,
			       precise, stream);
}
