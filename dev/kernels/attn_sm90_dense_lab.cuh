/*
 * attn_sm90_dense_lab.cuh: the kernel lab's dense Hopper attention with TMA tile loads (dev/kernels only;
 * dense v6 and v7 of flash_fwd_v.cu). kernels/attn_sm90.cuh's consumers (two warpgroups of 64 query rows,
 * wgmma, the softmax of tile t+1 under P(t) V(t), ping-pong), with two changes FA3's d = 128 forward has
 * and the promoted kernel has not:
 *   TMA       one producer thread copies each Q tile and each K or V tile as D/64 boxes of 64 columns x
 *             rows (cp.async.bulk.tensor, 128B swizzle: the layout of attn_tiles.cuh), the stage's
 *             mbarrier counting its one arrival and the tile's bytes; rows past the keys or queries are
 *             zero-filled by the copy (the tensor map's bounds). The producer warpgroup keeps 24 registers,
 *             the consumers get 240 (the promoted kernel's cp.async producer: 128 threads, 40 / 232).
 *   BN        keys a tile (128, or 176 as FA3's non-causal d = 128 tile: S is 88 registers a thread, P 44,
 *             11 P V steps a tile; 214 KB of shared memory with 2 stages).
 *   CLUSTER   2: two CTAs of one head (neighbouring query blocks) form a cluster and share each K and V
 *             tile: CTA r copies column block r of the tile (d = 128) to both CTAs' shared memory by TMA
 *             multicast, so each tile crosses from L2 once for 256 queries (half the L2 -> SM bytes of
 *             CLUSTER 1, as FA3's d >= 128 forward). A stage's full barrier takes its CTA's expect-tx
 *             and both halves' bytes; its empty barrier counts the consumer warps of both CTAs (each
 *             releases its own CTA's and the peer's); a cluster barrier after the barriers' set-up and
 *             before exit keeps remote arrivals inside the peer's lifetime. The grid's x is even (a
 *             padding CTA past n copies its halves and writes nothing).
 * Contract: launched with 384 threads, dg_dense_lab_cfg<D, BN>::SMEM bytes of dynamic shared memory and
 * the grid (query blocks of 128, rounded up to CLUSTER; heads); p as dg_flash_params fills it (head-major
 * inputs, any n); the tensor maps of dg_lab_tile_map (tma_map.h) over q (n rows, boxes of 128), k and v
 * (nk rows, boxes of BN).
 */
#ifndef DG_ATTN_SM90_DENSE_LAB_CUH
#define DG_ATTN_SM90_DENSE_LAB_CUH

#include <cuda.h>

#include "attn_sm90_lab.cuh"

template <int D, int BN> struct dg_dense_lab_cfg {
	static constexpr int BM = 128, STAGES = 2;
	static constexpr uint32_t QB = BM * D * 2, KVB = BN * D * 2;
	static_assert(KVB % 1024 == 0, "tiles at 1024-byte boundaries (the 128B swizzle's period)");
	static constexpr uint32_t BARS = 8 * (2 + 4 * STAGES);
	static constexpr size_t SMEM = 1024 + QB + 2 * STAGES * KVB + BARS;
};

/* S (64 x 176, fp32) (+)= A (64 x 16, shared) * B (16 x 176, K-major in shared): FA3's d = 128 tile */
DG_DEV void wgmma_m64n176k16_ss(float (&d)[88], uint64_t da, uint64_t db, int scale_d)
{
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %90, 0;\n"
		"wgmma.mma_async.sync.aligned.m64n176k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87}, %88, %89, p, 1, 1, 0, 0;\n}\n"
		: "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87])
		: "l"(da), "l"(db), "r"(scale_d));
}

/* the cluster's PTX (CLUSTER 2) */
DG_DEV uint32_t cluster_rank()
{
	uint32_t r;
	asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
	return r;
}
DG_DEV void cluster_sync()
{
	asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
/* the address of this CTA's shared-memory location a in the cluster's CTA rank */
DG_DEV uint32_t cluster_map(uint32_t a, uint32_t rank)
{
	uint32_t r;
	asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(rank));
	return r;
}
/* arrive on the mbarrier at cluster address bar (another CTA's), releasing at cluster scope */
DG_DEV void mbar_arrive_cluster(uint32_t bar)
{
	asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
/* mbar_wait acquiring at cluster scope (arrivals of another CTA's threads) */
DG_DEV void mbar_wait_cluster(uint32_t bar, int parity)
{
	asm volatile("{\n"
		     ".reg .pred P1;\n"
		     "DG_WAITC:\n"
		     "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 P1, [%0], %1;\n"
		     "@P1 bra DG_DONEC;\n"
		     "bra DG_WAITC;\n"
		     "DG_DONEC:\n"
		     "}\n" ::"r"(bar),
		     "r"(parity)
		     : "memory");
}
/* tma_load_3d to the same offset dst in each CTA of mask, completing on bar there */
DG_DEV void tma_load_3d_multicast(uint32_t dst, const void *tmap, int c0, int c1, int c2, uint32_t bar, uint16_t mask)
{
	asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
		     " [%0], [%1, {%2, %3, %4}], [%5], %6;\n" ::"r"(dst),
		     "l"(reinterpret_cast<uint64_t>(tmap)), "r"(c0), "r"(c1), "r"(c2), "r"(bar), "h"(mask)
		     : "memory");
}

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

template <int D, int BN, bool PRECISE, int CLUSTER>
__global__ void __launch_bounds__(384, 1)
	dg_dense_lab_kernel(const __grid_constant__ dg_attn_params p, const __grid_constant__ CUtensorMap tmq,
			    const __grid_constant__ CUtensorMap tmk, const __grid_constant__ CUtensorMap tmv)
{
	static_assert(BN == 128 || (BN == 176 && D == 128 && !PRECISE), "tiles: 128 keys, or 176 at d = 128, fast");
	static_assert(CLUSTER == 1 || (CLUSTER == 2 && D == 128), "a cluster of two: a column block each");
	using C = dg_dense_lab_cfg<D, BN>;
	constexpr int BM = C::BM, STAGES = C::STAGES, NS = BN / 2, NP = BN / 4;
	extern __shared__ uint8_t smem_raw[];
	const uint32_t sQ = (smem_u32(smem_raw) + 1023u) & ~1023u;
	const uint32_t sK = sQ + C::QB, sV = sK + STAGES * C::KVB, bar = sV + STAGES * C::KVB;
	const uint32_t fullQ = bar;
	auto fullk = [&](int s) { return bar + 16 + 8 * s; };
	auto emptyk = [&](int s) { return bar + 16 + 8 * (STAGES + s); };
	auto fullv = [&](int s) { return bar + 16 + 8 * (2 * STAGES + s); };
	auto emptyv = [&](int s) { return bar + 16 + 8 * (3 * STAGES + s); };
	const int tid = threadIdx.x, wg = tid >> 7;
	const int h = blockIdx.y, q0 = blockIdx.x * BM, nk = dg_kv_len(p);
	const int ntiles = (nk + BN - 1) / BN;
	if (tid == 0) {
		mbar_init(fullQ, 1);
		for (int s = 0; s < STAGES; s++) {
			mbar_init(fullk(s), 1);
			mbar_init(emptyk(s), 8 * CLUSTER);
			mbar_init(fullv(s), 1);
			mbar_init(emptyv(s), 8 * CLUSTER);
		}
		mbar_fence_init();
	}
	if constexpr (CLUSTER > 1)
		cluster_sync(); /* the peer's barriers are set up before any multicast or remote arrival */
	else
		__syncthreads();
	const uint32_t rank = CLUSTER > 1 ? cluster_rank() : 0;

	if (wg == 0) {
		/* ------------------------------------------------------------------ producer: one thread */
		reg_dealloc<24>();
		if (tid == 0) {
			mbar_arrive_expect_tx(fullQ, C::QB);
#pragma unroll
			for (int hf = 0; hf < D / 64; hf++)
				tma_load_3d(sQ + hf * (BM * 128), &tmq, 64 * hf, q0, h, fullQ);
			/* each stage: the consumers (CLUSTER 2: of both CTAs) done with the slot, the tile's bytes
			 * expected here, its column blocks copied (CLUSTER 2: block rank, to both CTAs) */
			for (int t = 0; t < ntiles; t++) {
				const int s = t % STAGES, ph = (t / STAGES) & 1;
				if constexpr (CLUSTER > 1) {
					mbar_wait_cluster(emptyk(s), ph ^ 1);
					mbar_arrive_expect_tx(fullk(s), C::KVB);
					tma_load_3d_multicast(sK + s * C::KVB + rank * (BN * 128), &tmk, 64 * rank, t * BN, h,
							      fullk(s), 0x3);
					mbar_wait_cluster(emptyv(s), ph ^ 1);
					mbar_arrive_expect_tx(fullv(s), C::KVB);
					tma_load_3d_multicast(sV + s * C::KVB + rank * (BN * 128), &tmv, 64 * rank, t * BN, h,
							      fullv(s), 0x3);
				} else {
					mbar_wait(emptyk(s), ph ^ 1);
					mbar_arrive_expect_tx(fullk(s), C::KVB);
#pragma unroll
					for (int hf = 0; hf < D / 64; hf++)
						tma_load_3d(sK + s * C::KVB + hf * (BN * 128), &tmk, 64 * hf, t * BN, h, fullk(s));
					mbar_wait(emptyv(s), ph ^ 1);
					mbar_arrive_expect_tx(fullv(s), C::KVB);
#pragma unroll
					for (int hf = 0; hf < D / 64; hf++)
						tma_load_3d(sV + s * C::KVB + hf * (BN * 128), &tmv, 64 * hf, t * BN, h, fullv(s));
				}
			}
		}
		if constexpr (CLUSTER > 1) { /* the peer's consumers' last arrivals land while this CTA lives */
			__syncwarp();
			cluster_sync();
		}
		return;
	}
	/* ---------------------------------------------------------------------- consumers */
	reg_alloc<240>();
	const int cwg = wg - 1, lane = tid & 31, wq = (tid >> 5) & 3, g = lane >> 2, t4 = lane & 3;
	const uint32_t sQw = sQ + cwg * 64 * 128;
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
	auto release = [&](uint32_t b) { /* this CTA's slot, and (CLUSTER 2) the peer's */
		if (lane == 0) {
			mbar_arrive(b);
			if constexpr (CLUSTER > 1)
				mbar_arrive_cluster(cluster_map(b, rank ^ 1));
		}
	};
	mbar_wait(fullQ, 0);
	/* tile 0: S(0), its softmax */
	mbar_wait(fullk(0), 0);
	named_sync(1 + cwg, 256);
	wg_fence();
	qk_gemm_bn<D, BN>(s, sQw, sK);
	wg_commit();
	named_arrive(2 - cwg, 256);
	wg_wait<0>();
	reg_fence(s);
	release(emptyk(0));
	mask_tile(0);
	softmax_step<NS>(s, m0, m1, l0, l1, a0, a1, sl2);
	pack_p<PRECISE>(pr, pl, s);
	/* tile t: S(t) issued with P(t-1) V(t-1) behind it, softmax(t) under the P V product */
	for (int t = 1; t < ntiles; t++) {
		const int st = t % STAGES, ph = (t / STAGES) & 1, sp = (t - 1) % STAGES, php = ((t - 1) / STAGES) & 1;
		mbar_wait(fullk(st), ph);
		named_sync(1 + cwg, 256);
		wg_fence();
		qk_gemm_bn<D, BN>(s, sQw, sK + st * C::KVB);
		wg_commit();
		mbar_wait(fullv(sp), php);
		wg_fence();
		pv_gemm_bn<D, BN, PRECISE>(o, pr, pl, sV + sp * C::KVB);
		wg_commit();
		named_arrive(2 - cwg, 256);
		wg_wait<1>();
		reg_fence(s);
		release(emptyk(st));
		mask_tile(t);
		softmax_step<NS>(s, m0, m1, l0, l1, a0, a1, sl2);
		wg_wait<0>();
		reg_fence(o);
		reg_fence(pr);
		if constexpr (PRECISE)
			reg_fence(pl);
		release(emptyv(sp));
		rescale<D / 2>(o, a0, a1);
		pack_p<PRECISE>(pr, pl, s);
	}
	const int sl = (ntiles - 1) % STAGES, phl = ((ntiles - 1) / STAGES) & 1;
	mbar_wait(fullv(sl), phl);
	named_sync(1 + cwg, 256);
	wg_fence();
	pv_gemm_bn<D, BN, PRECISE>(o, pr, pl, sV + sl * C::KVB);
	wg_commit();
	named_arrive(2 - cwg, 256);
	wg_wait<0>();
	reg_fence(o);
	const dg_item it = {h, q0, min(BM, p.n - q0), 0, nk};
	write_rows<D, false, DG_RES_F32, false>(p, it, cwg * 64 + wq * 16, g, t4, o, m0, m1, l0, l1);
	if constexpr (CLUSTER > 1) {
		__syncwarp();
		cluster_sync();
	}
}

#endif
