/*
 * pisa_first_order.cu: PISA's first-order term on the device (docs/spec.md §3.6, src/policy/peers.h),
 * the twin of peers.c dg_pisa_combine: for every query i and every key block c of `bs` keys its group
 * did not select, w = exp(s q_i.kbar_c - lse_i) and
 *   num_i += w (vsum_c + s H_c^T q_i),  den_i += w |c|,   H_c = sum_{j in c} (k_j - kbar_c) v_j^T,
 * from num_i = mass_i o_sp_i, den_i = mass_i; out_i = num_i / den_i. Per key block: kbar (the pooled
 * block mean), vsum and H in fp32; a block is selected when any of its keys is in the group's list.
 * The combine: a CTA per 64 queries of a group (the group's dropped blocks are the same for all of
 * them), 256 threads, each 4 queries x D/16 columns: per dropped block the queries' weights (w in
 * double from the fp32 logit, as the CPU), then Q H_c from 16-row slices of H_c in shared memory,
 * accumulated in fp32; num and den finished in double. Not bit for bit the CPU's (its sums run in
 * other orders): the replay's metrics agree to fp32 accumulation level (tests/replay/gpu_replay.sh,
 * tests/kernels/gpu_meta.c).
 * Build: part of dsgapkernels; test: tests/kernels/gpu_meta.c, tests/replay/gpu_replay.sh.
 */
#include "dsgap_kernels.h"
#include "pooled_common.cuh"

namespace {

/* vsum (P, D): fp32 sums over raster blocks of bs values; grid P, D threads */
template <int D>
__global__ void block_vsum(const uint16_t *v, int n, int bs, float *vsum)
{
	const int c = blockIdx.x, y = threadIdx.x, a = c * bs, b = min(a + bs, n);
	float s = 0.f;
	for (int j = a; j < b; j++)
		s += bf2f(v[(size_t)j * D + y]);
	vsum[(size_t)c * D + y] = s;
}

/* H (P, D, D): H_c[x][y] = sum_j (k_j[x] - kbar_c[x]) v_j[y]; grid (P, D / 8), D threads (y), 8 rows x each */
template <int D>
__global__ void block_h(const uint16_t *k, const uint16_t *v, int n, int bs, const float *kbar, float *H)
{
	const int c = blockIdx.x, x0 = blockIdx.y * 8, y = threadIdx.x, a = c * bs, b = min(a + bs, n);
	float h[8];
#pragma unroll
	for (int r = 0; r < 8; r++)
		h[r] = 0.f;
	for (int j = a; j < b; j++) {
		const float vy = bf2f(v[(size_t)j * D + y]);
#pragma unroll
		for (int r = 0; r < 8; r++)
			h[r] = fmaf(bf2f(k[(size_t)j * D + x0 + r]) - kbar[(size_t)c * D + x0 + r], vy, h[r]);
	}
#pragma unroll
	for (int r = 0; r < 8; r++)
		H[((size_t)c * D + x0 + r) * D + y] = h[r];
}

/* taken (G, P): 1 where group g's list holds a key of block c (set beforehand to 0); grid G */
__global__ void taken_blocks(const int64_t *soff, const int32_t *sidx, int bs, int P, uint8_t *taken)
{
	const int g = blockIdx.x;
	for (int64_t t = soff[g] + threadIdx.x; t < soff[g + 1]; t += blockDim.x)
		taken[(size_t)g * P + sidx[t] / bs] = 1;
}

#define PQ 64 /* queries per CTA */
template <int D>
__global__ void __launch_bounds__(256) combine(const uint16_t *q, const int32_t *perm, const int32_t *goff,
					       const float *lse, const uint8_t *taken, int P, int bs, int n,
					       const float *kbar, const float *vsum, const float *H, float scale,
					       const float *o_sp, const float *mass, float *out)
{
	constexpr int NJ = D / 16;
	__shared__ float qs[PQ][D + 1];
	__shared__ float hs[16][D];
	__shared__ float w[PQ];
	__shared__ double den[PQ];
	__shared__ int qi[PQ];
	const int g = blockIdx.y, a = goff[g] + blockIdx.x * PQ, b = min(goff[g + 1], a + PQ);
	if (a >= b)
		return;
	const int nq = b - a, tid = threadIdx.x, ty = tid >> 4, tx = tid & 15;
	for (int e = tid; e < PQ * D; e += 256) {
		const int r = e / D, x = e % D;
		qs[r][x] = r < nq ? bf2f(q[(size_t)perm[a + r] * D + x]) : 0.f;
	}
	if (tid < PQ) {
		qi[tid] = tid < nq ? perm[a + tid] : -1;
		den[tid] = tid < nq ? (double)mass[perm[a + tid]] : 1.0;
	}
	float acc[4][NJ];
#pragma unroll
	for (int i = 0; i < 4; i++)
#pragma unroll
		for (int j = 0; j < NJ; j++)
			acc[i][j] = 0.f;
	const uint8_t *tk = taken + (size_t)g * P;
	for (int c = 0; c < P; c++) {
		if (tk[c])
			continue;
		__syncthreads(); /* the last block's w and hs are read */
		if (tid < PQ && tid < nq) {
			float dot = 0.f;
			for (int x = 0; x < D; x++)
				dot = fmaf(qs[tid][x], kbar[(size_t)c * D + x], dot);
			const double wi = exp((double)(scale * dot - lse[qi[tid]]));
			w[tid] = (float)wi;
			den[tid] += wi * (double)(min((c + 1) * bs, n) - c * bs);
		} else if (tid < PQ) {
			w[tid] = 0.f;
		}
		float y[4][NJ];
#pragma unroll
		for (int i = 0; i < 4; i++)
#pragma unroll
			for (int j = 0; j < NJ; j++)
				y[i][j] = 0.f;
		const float *hc = H + (size_t)c * D * D;
		for (int x0 = 0; x0 < D; x0 += 16) {
			__syncthreads();
			for (int e = tid; e < 16 * D; e += 256)
				hs[e / D][e % D] = hc[(size_t)(x0 + e / D) * D + e % D];
			__syncthreads();
#pragma unroll 4
			for (int xx = 0; xx < 16; xx++)
#pragma unroll
				for (int i = 0; i < 4; i++) {
					const float qv = qs[ty * 4 + i][x0 + xx];
#pragma unroll
					for (int j = 0; j < NJ; j++)
						y[i][j] = fmaf(qv, hs[xx][tx + 16 * j], y[i][j]);
				}
		}
#pragma unroll
		for (int i = 0; i < 4; i++) {
			const float wi = w[ty * 4 + i];
#pragma unroll
			for (int j = 0; j < NJ; j++)
				acc[i][j] = fmaf(wi, vsum[(size_t)c * D + tx + 16 * j] + scale * y[i][j], acc[i][j]);
		}
	}
	__syncthreads();
#pragma unroll
	for (int i = 0; i < 4; i++) {
		const int r = ty * 4 + i;
		if (r >= nq)
			continue;
		const int qq = qi[r];
#pragma unroll
		for (int j = 0; j < NJ; j++) {
			const size_t o = (size_t)qq * D + tx + 16 * j;
			out[o] = (float)(((double)mass[qq] * o_sp[o] + acc[i][j]) / den[r]);
		}
	}
}

template <int D>
int run(const uint16_t *q, const uint16_t *k, const uint16_t *v, int n, int bs, const int32_t *perm,
	const int32_t *goff, int ngroups, const int64_t *soff, const int32_t *sidx, const float *lse, const float *o_sp,
	const float *mass, float *out, cudaStream_t st)
{
	const int P = (n + bs - 1) / bs;
	const size_t a_m = dgm_align((size_t)P * D * 4), a_h = dgm_align((size_t)P * D * D * 4);
	char *buf = NULL;
	DGM_CUDA(cudaMallocAsync((void **)&buf, 2 * a_m + a_h + dgm_align((size_t)ngroups * P), st));
	float *kbar = (float *)buf, *vsum = (float *)(buf + a_m), *H = (float *)(buf + 2 * a_m);
	uint8_t *taken = (uint8_t *)(buf + 2 * a_m + a_h);
	pooled::block_mean<D><<<P, D, 0, st>>>(k, n, bs, NULL, kbar, NULL);
	block_vsum<D><<<P, D, 0, st>>>(v, n, bs, vsum);
	block_h<D><<<dim3(P, D / 8), D, 0, st>>>(k, v, n, bs, kbar, H);
	DGM_CUDA(cudaMemsetAsync(taken, 0, (size_t)ngroups * P, st));
	taken_blocks<<<ngroups, 256, 0, st>>>(soff, sidx, bs, P, taken);
	combine<D><<<dim3((bs + PQ - 1) / PQ, ngroups), 256, 0, st>>>(q, perm, goff, lse, taken, P, bs, n, kbar, vsum, H,
								       1.0f / sqrtf((float)D), o_sp, mass, out);
	DGM_LAUNCHED();
	DGM_CUDA(cudaFreeAsync(buf, st));
	return 0;
}

} // namespace

extern "C" int dg_pisa_first_order(const uint16_t *q, const uint16_t *k, const uint16_t *v, int n, int d, int bs,
				   const int32_t *perm, const int32_t *goff, int ngroups, const int64_t *soff,
				   const int32_t *sidx, const float *lse, const float *o_sp, const float *mass, float *out,
				   dg_stream stream)
{
	DGM_ARG(d == 64 || d == 128, "pisa first order: head_dim %d (64 or 128 supported)", d);
	DGM_ARG(n >= 1 && bs >= 1 && ngroups >= 1 && ngroups <= 65535, "pisa first order: n %d, block %d, %d groups", n,
		bs, ngroups);
	DGM_ARG(q && k && v && perm && goff && soff && sidx && lse && o_sp && mass && out,
		"pisa first order: NULL argument");
	cudaStream_t st = (cudaStream_t)stream;
	return d == 64 ? run<64>(q, k, v, n, bs, perm, goff, ngroups, soff, sidx, lse, o_sp, mass, out, st)
		       : run<128>(q, k, v, n, bs, perm, goff, ngroups, soff, sidx, lse, o_sp, mass, out, st);
}
