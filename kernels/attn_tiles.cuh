/*
 * attn_tiles.cuh: tile loads of the attention and metadata kernels (not a public header): cp.async
 * 16-byte copies of R rows x D bf16 into 128-byte-swizzled shared memory, contiguous or gathered.
 * Shared-memory tile layout (all kernels): a tile of R rows x D bf16 is stored as D/64 column blocks
 * of R rows x 128 bytes; inside a block, the 16-byte chunk c of row r sits at r*128 + ((c ^ (r%8))*16)
 * (CUTLASS's Swizzle<3,4,3>, the wgmma "128B" mode, which both ldmatrix and wgmma read without bank
 * conflicts). Tiles start at 1024-byte boundaries.
 * Contract: the loaders issue the copies only (no commit, no wait, no barrier arrival): the caller
 * commits them or arrives on an mbarrier (mbar_arrive_cpasync). Rows past nvalid are zero-filled.
 */
#ifndef DG_ATTN_TILES_CUH
#define DG_ATTN_TILES_CUH

#include "attn_ptx.cuh"

/* byte offset of 16-byte chunk c of row r in a swizzled tile of R rows */
template <int R> DG_DEV uint32_t swz(int r, int c)
{
	return (uint32_t)((c >> 3) * (R * 128) + r * 128 + (((c & 7) ^ (r & 7)) << 4));
}

/*
 * Copy R rows of D bf16 into the swizzled tile at sdst with NT threads (tid in 0..NT-1):
 * row r comes from base + row(r)*ld, row(r) = idx[r] (INDEXED: rows gathered through a list) or
 * row0 + r (contiguous); rows r >= nvalid are zero-filled. ld: elements between two rows (D: packed).
 */
template <int R, int D, int NT, bool INDEXED>
DG_DEV void load_tile(uint32_t sdst, const bf16 *base, const int32_t *idx, int row0, int nvalid, int tid,
		      int ld = D)
{
	constexpr int CPR = D / 8, RPP = NT / CPR;
	static_assert(R % RPP == 0, "tile rows");
	const int c = tid % CPR, rin = tid / CPR;
#pragma unroll 4
	for (int i = 0; i < R / RPP; i++) {
		const int r = i * RPP + rin;
		const bool ok = r < nvalid;
		int row = 0;
		if (ok)
			row = INDEXED ? __ldg(idx + r) : row0 + r;
		cp_async16(sdst + swz<R>(r, c), base + (size_t)row * ld + c * 8, ok ? 16 : 0);
	}
}

/*
 * Gather loader with the list entries prefetched: for a tile of 128 rows copied by 128 threads, each
 * warp needs 32 list entries; lane l of warp w holds entry tile_lane_row(tid) (loaded a tile ahead),
 * and each copy pass takes its row index by warp shuffle instead of a dependent global load; UNROLL
 * passes are unrolled (all by default; fewer need fewer of the producer's registers). ld as load_tile's.
 */
template <int D, int NT> DG_DEV int tile_lane_row(int tid)
{
	constexpr int CPR = D / 8, RPP = NT / CPR, RPW = 32 / CPR;
	const int lane = tid & 31, w = tid >> 5;
	return (lane / RPW) * RPP + w * RPW + lane % RPW;
}
template <int R, int D, int NT>
DG_DEV void load_tile_shfl(uint32_t sdst, const bf16 *base, int idx, int nvalid, int tid, int ld = D)
{
	constexpr int CPR = D / 8, RPP = NT / CPR, RPW = 32 / CPR;
	static_assert(R == NT && (R / RPP) * RPW == 32, "one list entry per lane");
	const int c = tid % CPR, rin = tid / CPR, lane = tid & 31;
	auto pass = [&](int i) {
		const int r = i * RPP + rin;
		const int row = __shfl_sync(0xffffffffu, idx, i * RPW + lane / CPR);
		const bool ok = r < nvalid;
		cp_async16(sdst + swz<R>(r, c), base + (size_t)(ok ? row : 0) * ld + c * 8, ok ? 16 : 0);
	};
#pragma unroll
	for (int i = 0; i < R / RPP; i++)
		pass(i);
}

#endif
