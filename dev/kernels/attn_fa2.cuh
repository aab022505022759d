/*
 * attn_fa2.cuh (dev/kernels): version 1 of the dense and gather-KV attention kernels,
 * FlashAttention-2 style: 4 warps, 64 queries x 64 keys per tile, mma.sync m16n8k16 (bf16 -> fp32),
 * ldmatrix from swizzled shared memory, K/V double-buffered with cp.async (gathered rows for sparse
 * lists). Simple and portable to sm_80; the correctness baseline for the Hopper versions.
 * PRECISE: P.V as hi.V + lo.V with P split into two bf16 operands (pack_p), a second mma per k-step.
 * Not a public header: flash_fwd_v.cu and sparse_fwd_v.cu launch it as their version 1. The shared
 * tile loader, softmax step and epilogue are kernels/attn_common.cuh's (its parts); the two PTX wrappers below
 * are used by this kernel alone.
 */
#ifndef DG_ATTN_FA2_CUH
#define DG_ATTN_FA2_CUH

#include "attn_sm90_lab.cuh" /* attn_common.cuh, dg_lab_for_each_item */

/* wait until at most N committed cp.async groups of this thread are pending */
template <int N> DG_DEV void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

DG_DEV void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		     : "r"(addr));
}

template <int D> struct dg_fa2_cfg {
	static constexpr int BM = 64, BN = 64, NT = 128;
	static constexpr uint32_t QB = BM * D * 2, KVB = BN * D * 2;
	static constexpr size_t SMEM = 1024 + QB + 4 * KVB;
};

template <int D, bool SPARSE, bool PRECISE>
__global__ void __launch_bounds__(128) dg_attn_fa2_kernel(const __grid_constant__ dg_attn_params p)
{
	using C = dg_fa2_cfg<D>;
	constexpr int BM = C::BM, BN = C::BN;
	extern __shared__ uint8_t smem_raw[];
	const uint32_t sQ = (smem_u32(smem_raw) + 1023u) & ~1023u;
	const uint32_t sK = sQ + C::QB, sV = sK + 2 * C::KVB;
	const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
	const float sl2 = p.scale_log2;

	dg_lab_for_each_item<SPARSE, BM>(p, [&](const dg_item &it) {
		const size_t hoff = (size_t)it.h * p.n * D, kvoff = (size_t)it.h * dg_kv_len(p) * D;
		const bf16 *kh = p.k + kvoff, *vh = p.v + kvoff;
		const int32_t *klist = SPARSE ? head_sidx(p, it.h) + it.kbase : nullptr;
		const int ntiles = (it.nkeys + BN - 1) / BN;
		load_tile<BM, D, 128, SPARSE>(sQ, p.q + hoff, SPARSE ? head_perm(p, it.h) + it.qpos : nullptr,
					      it.qpos, it.qcount, tid);
		if (ntiles > 0) {
			const int nv = min(BN, it.nkeys);
			load_tile<BN, D, 128, SPARSE>(sK, kh, klist, 0, nv, tid);
			load_tile<BN, D, 128, SPARSE>(sV, vh, klist, 0, nv, tid);
		}
		cp_async_commit();

		float o[D / 2];
#pragma unroll
		for (int i = 0; i < D / 2; i++)
			o[i] = 0.f;
		float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;
		uint32_t qf[D / 16][4];

		for (int t = 0; t < ntiles; t++) {
			if (t + 1 < ntiles) {
				const int b = (t + 1) & 1, nv = min(BN, it.nkeys - (t + 1) * BN);
				load_tile<BN, D, 128, SPARSE>(sK + b * C::KVB, kh, SPARSE ? klist + (t + 1) * BN : nullptr,
							      (t + 1) * BN, nv, tid);
				load_tile<BN, D, 128, SPARSE>(sV + b * C::KVB, vh, SPARSE ? klist + (t + 1) * BN : nullptr,
							      (t + 1) * BN, nv, tid);
			}
			cp_async_commit();
			cp_async_wait<1>();
			__syncthreads();
			if (t == 0) {
#pragma unroll
				for (int kk = 0; kk < D / 16; kk++)
					ldmatrix_x4(qf[kk], sQ + swz<BM>(w * 16 + (lane & 15), kk * 2 + (lane >> 4)));
			}
			const uint32_t k_s = sK + (t & 1) * C::KVB, v_s = sV + (t & 1) * C::KVB;
			float s[BN / 2];
#pragma unroll
			for (int i = 0; i < BN / 2; i++)
				s[i] = 0.f;
#pragma unroll
			for (int kk = 0; kk < D / 16; kk++) {
#pragma unroll
				for (int np = 0; np < BN / 16; np++) {
					uint32_t b[4];
					ldmatrix_x4(b, k_s + swz<BN>(np * 16 + (lane & 7) + ((lane >> 4) << 3),
								     kk * 2 + ((lane >> 3) & 1)));
					mma_16816(&s[8 * np], qf[kk], b[0], b[1]);
					mma_16816(&s[8 * np + 4], qf[kk], b[2], b[3]);
				}
			}
			const int nv = min(BN, it.nkeys - t * BN);
			if (nv < BN)
				mask_cols<BN / 2>(s, nv, t4);
			float a0, a1;
			softmax_step<BN / 2>(s, m0, m1, l0, l1, a0, a1, sl2);
			rescale<D / 2>(o, a0, a1);
			uint32_t pr[BN / 4], pl[BN / 4]; /* P hi, lo (PRECISE) */
			pack_p<PRECISE>(pr, pl, s);
#pragma unroll
			for (int kk = 0; kk < BN / 16; kk++) {
				const uint32_t a[4] = {pr[4 * kk], pr[4 * kk + 1], pr[4 * kk + 2], pr[4 * kk + 3]};
#pragma unroll
				for (int dp = 0; dp < D / 16; dp++) {
					uint32_t b[4];
					ldmatrix_x4_trans(b, v_s + swz<BN>(kk * 16 + (lane & 15), dp * 2 + (lane >> 4)));
					mma_16816(&o[8 * dp], a, b[0], b[1]);
					mma_16816(&o[8 * dp + 4], a, b[2], b[3]);
					if constexpr (PRECISE) {
						const uint32_t al[4] = {pl[4 * kk], pl[4 * kk + 1], pl[4 * kk + 2], pl[4 * kk + 3]};
						mma_16816(&o[8 * dp], al, b[0], b[1]);
						mma_16816(&o[8 * dp + 4], al, b[2], b[3]);
					}
				}
			}
			__syncthreads();
		}
		cp_async_wait<0>();
		__syncthreads();
		write_rows<D, SPARSE>(p, it, w * 16, g, t4, o, m0, m1, l0, l1);
	});
}

#endif
