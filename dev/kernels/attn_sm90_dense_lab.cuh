/*
 * attn_sm90_dense_lab.cuh: the kernel lab's dense Hopper attention in clusters (dev/kernels only; dense v8
 * of flash_fwd_v.cu): kernels/attn_sm90_dense.cuh's consumers and ring, two CTAs of one head (neighbouring
 * query blocks) a cluster sharing each K and V tile: CTA r copies column block r of the tile (d = 128) to
 * both CTAs' shared memory by TMA multicast, so a tile crosses from L2 once for 256 queries (as FA3's
 * d >= 128 forward). A stage's full barrier takes its CTA's expect-tx and both halves' bytes; its empty
 * barrier counts the consumer warps of both CTAs (each releases its own CTA's and the peer's); cluster
 * barriers after the barriers' set-up and before exit keep remote arrivals inside the peer's lifetime.
 * Measured slower than the promoted kernel (docs/history.md, "Kernel versions").
 * Contract: as kernels/attn_sm90_dense.cuh's kernel, d = 128, launched in clusters of 2 along x with the
 * grid's x even (a padding CTA past n copies its halves and writes nothing).
 */
#ifndef DG_ATTN_SM90_DENSE_LAB_CUH
#define DG_ATTN_SM90_DENSE_LAB_CUH

#include "attn_sm90_dense.cuh"

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
	asm volatile(DG_MBAR_WAIT(".acquire.cluster")::"r"(bar), "r"(parity) : "memory");
}
/* tma_load_3d to the same offset dst in each CTA of mask, completing on bar there */
DG_DEV void tma_load_3d_multicast(uint32_t dst, const void *tmap, int c0, int c1, int c2, uint32_t bar, uint16_t mask)
{
	asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
		     " [%0], [%1, {%2, %3, %4}], [%5], %6;\n" ::"r"(dst),
		     "l"(reinterpret_cast<uint64_t>(tmap)), "r"(c0), "r"(c1), "r"(c2), "r"(bar), "h"(mask)
		     : "memory");
}

template <int BN, bool PRECISE>
__global__ void __launch_bounds__(384, 1)
	dg_dense_cluster_kernel(const __grid_constant__ dg_attn_params p, const __grid_constant__ CUtensorMap tmq,
				const __grid_constant__ CUtensorMap tmk, const __grid_constant__ CUtensorMap tmv)
{
	constexpr int D = 128;
	using C = dg_dense_cfg<D, BN>;
	extern __shared__ uint8_t smem_raw[];
	const dg_dense_ring<D, BN> r(smem_raw);
	const int tid = threadIdx.x, h = blockIdx.y, q0 = blockIdx.x * C::BM, nk = dg_kv_len(p);
	if (tid == 0)
		r.init(16);
	cluster_sync(); /* the peer's barriers are set up before any multicast or remote arrival */
	const uint32_t rank = cluster_rank();
	if (tid < 128) {
		/* ------------------------------------------------------------------ producer: one thread */
		reg_dealloc<24>();
		if (tid == 0) {
			r.load_q(&tmq, q0, h);
			/* both CTAs' consumers done with a stage, column block rank of its tile to both CTAs */
			r.load_kv(&tmk, &tmv, nk, mbar_wait_cluster,
				  [h, rank](uint32_t dst, const CUtensorMap *tm, int row, uint32_t full) {
					  tma_load_3d_multicast(dst + rank * (BN * 128), tm, 64 * rank, row, h, full, 0x3);
				  });
		}
		__syncwarp();
		cluster_sync(); /* the peer's consumers' last arrivals land while this CTA lives */
		return;
	}
	reg_alloc<240>();
	dg_dense_consumers<D, BN, PRECISE>(p, r, h, q0, nk, [rank](uint32_t b) {
		if ((threadIdx.x & 31) == 0) {
			mbar_arrive(b);
			mbar_arrive_cluster(cluster_map(b, rank ^ 1));
		}
	});
	__syncwarp();
	cluster_sync();
}

#endif
