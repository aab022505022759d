/*
 * attn_sm90_dense.cuh: the Hopper (sm_90a) dense attention kernel (not a public header), FlashAttention-3
 * style with TMA loads. One CTA = 3 warpgroups, 128 query rows of one head (grid: query blocks, heads):
 *   WG0 producer (setmaxnreg 24): one thread copies the Q tile once and each K and V tile (BN keys) as D/64
 *       TMA boxes of 64 columns x rows (cp.async.bulk.tensor, 128B swizzle: attn_tiles.cuh's layout) into
 *       a 2-deep ring; each stage's full mbarrier takes the thread's expect-tx arrival and the bytes. Rows
 *       past n or the keys are zero-filled by the copy (the tensor map's bounds, tma_map.h).
 *   WG1, WG2 consumers (setmaxnreg 240), 64 query rows each: S = Q K^T (wgmma m64n{BN}k16, both operands
 *       in shared memory), online softmax in registers, O += P V (wgmma m64n{D}k16, P from registers, V
 *       an MN-major operand); the softmax of tile t+1 under the P V product of tile t (intra-warpgroup
 *       overlap) and named barriers making the two consumer warpgroups take turns issuing (ping-pong).
 * BN = 176 at d = 128 in the fast mode (FA3's non-causal tile: S 88 registers a thread, P 44, 214 KB of
 * shared memory), 128 otherwise (d = 64; the precise mode's second P V chain needs P's lo half too).
 * PRECISE: P.V as hi.V + lo.V (attn_sm90.cuh's header). The epilogue is attn_epilogue.cuh's write_rows
 * (O fp32 or bf16, head-major or merged, and the LSE).
 * Measured against the cp.async kernel it replaced (attn_sm90.cuh's dense walk, now the window
 * kernel's): docs/history.md, "Kernel versions". dev/kernels/attn_sm90_dense_lab.cuh runs these
 * consumers in clusters of two CTAs sharing K/V tiles (dense v8).
 * Contract: launched with 384 threads, dg_dense_cfg<D, BN>::SMEM bytes of dynamic shared memory and the
 * grid (query blocks of 128, heads); p as dg_flash_params fills it (head-major Q/K/V); tmq, tmk, tmv the
 * tensor maps of dg_tile_map (tma_map.h) over q (n rows, boxes of 128 rows) and k, v (their key count,
 * boxes of BN rows).
 */
#ifndef DG_ATTN_SM90_DENSE_CUH
#define DG_ATTN_SM90_DENSE_CUH

#include <cuda.h>

#include "attn_common.cuh"

template <int D, int BN> struct dg_dense_cfg {
	static constexpr int BM = 128, STAGES = 2;
	static constexpr uint32_t QB = BM * D * 2, KVB = BN * D * 2;
	static_assert(KVB % 1024 == 0, "tiles at 1024-byte boundaries (the 128B swizzle's period)");
	static constexpr uint32_t BARS = 8 * (1 + 4 * STAGES);
	static constexpr size_t SMEM = 1024 + QB + 2 * STAGES * KVB + BARS;
};

/* the CTA's shared memory: the Q tile, the K and V rings, their mbarriers (shared-window addresses) */
template <int D, int BN> struct dg_dense_ring {
	using C = dg_dense_cfg<D, BN>;
	uint32_t sQ, sK, sV, bar;
	__device__ explicit dg_dense_ring(const void *smem)
	{
		sQ = (smem_u32(smem) + 1023u) & ~1023u;
		sK = sQ + C::QB;
		sV = sK + C::STAGES * C::KVB;
		bar = sV + C::STAGES * C::KVB;
	}
	__device__ uint32_t fullq() const { return bar; }
	__device__ uint32_t fullk(int s) const { return bar + 8 + 8 * s; }
	__device__ uint32_t emptyk(int s) const { return bar + 8 + 8 * (C::STAGES + s); }
	__device__ uint32_t fullv(int s) const { return bar + 8 + 8 * (2 * C::STAGES + s); }
	__device__ uint32_t emptyv(int s) const { return bar + 8 + 8 * (3 * C::STAGES + s); }
	/* thread 0: the barriers, an empty slot released by releases consumer warps */
	__device__ void init(int releases) const
	{
		mbar_init(fullq(), 1);
		for (int s = 0; s < C::STAGES; s++) {
			mbar_init(fullk(s), 1);
			mbar_init(emptyk(s), releases);
			mbar_init(fullv(s), 1);
			mbar_init(emptyv(s), releases);
		}
		mbar_fence_init();
	}
	/* the producer thread: each of the nk keys' K and V tiles into its stage once wait(empty barrier,
	 * parity) says the stage's consumers released it, the tile's bytes expected on its full barrier,
	 * then copy(stage, tensor map, first row, full barrier) */
	template <typename Wait, typename Copy>
	__device__ void load_kv(const CUtensorMap *tmk, const CUtensorMap *tmv, int nk, Wait &&wait, Copy &&copy) const
	{
		for (int t = 0; t < (nk + BN - 1) / BN; t++) {
			const int s = t % C::STAGES, ph = (t / C::STAGES) & 1;
			wait(emptyk(s), ph ^ 1);
			mbar_arrive_expect_tx(fullk(s), C::KVB);
			copy(sK + s * C::KVB, tmk, t * BN, fullk(s));
			wait(emptyv(s), ph ^ 1);
			mbar_arrive_expect_tx(fullv(s), C::KVB);
			copy(sV + s * C::KVB, tmv, t * BN, fullv(s));
		}
	}
	/* the producer thread: the Q tile of query block q0 of head h */
	__device__ void load_q(const CUtensorMap *tmq, int q0, int h) const
	{
		mbar_arrive_expect_tx(fullq(), C::QB);
#pragma unroll
		for (int hf = 0; hf < D / 64; hf++)
			tma_load_3d(sQ + hf * (C::BM * 128), tmq, 64 * hf, q0, h, fullq());
	}
};

/* S (64 x BN) = Q rows of this warpgroup (64 x D, a 128-row tile) times K tile^T (D x BN, a BN-row tile) */
template <int D, int BN> DG_DEV void qk_gemm_bn(float (&s)[BN / 2], uint32_t sQw, uint32_t sKs)
{
#pragma unroll
	for (int kk = 0; kk < D / 16; kk++) {
		const uint32_t col = (kk & 3) * 32;
		const uint64_t da = wg_desc(sQw + (kk >> 2) * (128 * 128) + col, 16, 1024);
		const uint64_t db = wg_desc(sKs + (kk >> 2) * (BN * 128) + col, 16, 1024);
		if constexpr (BN == 176)
			wgmma_m64n176k16_ss(s, da, db, kk > 0);
		else
			wgmma_m64n128k16_ss(s, da, db, kk > 0);
	}
}

/* O (64 x D) += P (64 x BN: hi, + lo when PRECISE; bf16 registers) times V tile (BN x D, MN-major) */
template <int D, int BN, bool PRECISE>
DG_DEV void pv_gemm_bn(float (&o)[D / 2], const uint32_t (&pr)[BN / 4], const uint32_t (&pl)[BN / 4], uint32_t sVs)
{
	auto k16 = [&](const uint32_t(&a)[BN / 4], int c, uint64_t db) {
		if constexpr (D == 128)
			wgmma_m64n128k16_rs_tb(o, a[4 * c], a[4 * c + 1], a[4 * c + 2], a[4 * c + 3], db);
		else
			wgmma_m64n64k16_rs_tb(o, a[4 * c], a[4 * c + 1], a[4 * c + 2], a[4 * c + 3], db);
	};
#pragma unroll
	for (int c = 0; c < BN / 16; c++) {
		const uint64_t db = wg_desc(sVs + c * 2048, BN * 128, 1024);
		k16(pr, c, db);
		if constexpr (PRECISE)
			k16(pl, c, db);
	}
}

/*
 * The consumer warpgroups' part (tid 128..383, after reg_alloc): the item's tiles and its epilogue.
 * release(b): this warp's release of empty barrier b (its lane 0 arrives; dev/kernels' clusters also
 * arrive on the peer's).
 */
template <int D, int BN, bool PRECISE, typename Release>
DG_DEV void dg_dense_consumers(const dg_attn_params &p, const dg_dense_ring<D, BN> &r, int h, int q0, int nk,
			       Release &&release)
{
	using C = dg_dense_cfg<D, BN>;
	constexpr int STAGES = C::STAGES, NS = BN / 2, NP = BN / 4;
	const int tid = threadIdx.x, cwg = (tid >> 7) - 1, wq = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2,
		  t4 = lane & 3;
	const int ntiles = (nk + BN - 1) / BN;
	const uint32_t sQw = r.sQ + cwg * 64 * 128, sK = r.sK, sV = r.sV;
	const float sl2 = p.scale_log2;
	if (cwg == 0)
		named_arrive(1, 256);
	float o[D / 2];
#pragma unroll
	for (int i = 0; i < D / 2; i++)
		o[i] = 0.f;
	float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f, a0, a1;
	float s[NS];
	uint32_t pr[NP], pl[NP]; /* P hi, lo (PRECISE) */
	auto mask_tile = [&](int t) {
		const int nv = nk - t * BN;
		if (nv < BN)
			mask_cols<NS>(s, nv, t4);
	};
	mbar_wait(r.fullq(), 0);
	/* tile 0: S(0), its softmax */
	mbar_wait(r.fullk(0), 0);
	named_sync(1 + cwg, 256);
	wg_fence();
	qk_gemm_bn<D, BN>(s, sQw, sK);
	wg_commit();
	named_arrive(2 - cwg, 256);
	wg_wait<0>();
	reg_fence(s);
	release(r.emptyk(0));
	mask_tile(0);
	softmax_step<NS>(s, m0, m1, l0, l1, a0, a1, sl2);
	pack_p<PRECISE>(pr, pl, s);
	/* tile t: S(t) issued with P(t-1) V(t-1) behind it, softmax(t) under the P V product */
	for (int t = 1; t < ntiles; t++) {
		const int st = t % STAGES, ph = (t / STAGES) & 1, sp = (t - 1) % STAGES, php = ((t - 1) / STAGES) & 1;
		mbar_wait(r.fullk(st), ph);
		named_sync(1 + cwg, 256);
		wg_fence();
		qk_gemm_bn<D, BN>(s, sQw, sK + st * C::KVB);
		wg_commit();
		mbar_wait(r.fullv(sp), php);
		wg_fence();
		pv_gemm_bn<D, BN, PRECISE>(o, pr, pl, sV + sp * C::KVB);
		wg_commit();
		named_arrive(2 - cwg, 256);
		wg_wait<1>();
		reg_fence(s);
		release(r.emptyk(st));
		mask_tile(t);
		softmax_step<NS>(s, m0, m1, l0, l1, a0, a1, sl2);
		wg_wait<0>();
		reg_fence(o);
		reg_fence(pr);
		if constexpr (PRECISE)
			reg_fence(pl);
		release(r.emptyv(sp));
		rescale<D / 2>(o, a0, a1);
		pack_p<PRECISE>(pr, pl, s);
	}
	const int sl = (ntiles - 1) % STAGES, phl = ((ntiles - 1) / STAGES) & 1;
	mbar_wait(r.fullv(sl), phl);
	named_sync(1 + cwg, 256);
	wg_fence();
	pv_gemm_bn<D, BN, PRECISE>(o, pr, pl, sV + sl * C::KVB);
	wg_commit();
	named_arrive(2 - cwg, 256);
	wg_wait<0>();
	reg_fence(o);
	const dg_item it = {h, q0, min(C::BM, p.n - q0), 0, nk};
	write_rows<D, false, DG_RES_F32, false>(p, it, cwg * 64 + wq * 16, g, t4, o, m0, m1, l0, l1);
}

template <int D, int BN, bool PRECISE>
__global__ void __launch_bounds__(384, 1)
	dg_attn_sm90_dense_kernel(const __grid_constant__ dg_attn_params p, const __grid_constant__ CUtensorMap tmq,
				  const __grid_constant__ CUtensorMap tmk, const __grid_constant__ CUtensorMap tmv)
{
	static_assert(BN == 128 || (BN == 176 && D == 128 && !PRECISE), "tiles: 128 keys, or 176 at d = 128, fast");
	using C = dg_dense_cfg<D, BN>;
	extern __shared__ uint8_t smem_raw[];
	const dg_dense_ring<D, BN> r(smem_raw);
	const int tid = threadIdx.x, h = blockIdx.y, q0 = blockIdx.x * C::BM, nk = dg_kv_len(p);
	if (tid == 0)
		r.init(8);
	__syncthreads();
	if (tid < 128) {
		/* ------------------------------------------------------------------ producer: one thread */
		reg_dealloc<24>();
		if (tid == 0) {
			r.load_q(&tmq, q0, h);
			r.load_kv(&tmk, &tmv, nk, mbar_wait, [h](uint32_t dst, const CUtensorMap *tm, int row, uint32_t full) {
#pragma unroll
				for (int hf = 0; hf < D / 64; hf++)
					tma_load_3d(dst + hf * (BN * 128), tm, 64 * hf, row, h, full);
			});
		}
		return;
	}
	reg_alloc<240>();
	dg_dense_consumers<D, BN, PRECISE>(p, r, h, q0, nk, [](uint32_t b) {
		if ((threadIdx.x & 31) == 0)
			mbar_arrive(b);
	});
}

#endif
