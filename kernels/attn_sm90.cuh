/*
 * attn_sm90.cuh: the Hopper (sm_90a) gather-KV sparse and window attention kernel (not a public header),
 * FlashAttention-3 style with cp.async producers (the rows a list names, or a window's; dense attention
 * is attn_sm90_dense.cuh's TMA kernel). One CTA = 3 warpgroups:
 *   WG0 producer (setmaxnreg 40; 96 in the sparse kernel, whose unrolled shuffle loops need more):
 *       cp.async 16-byte copies of Q (once per item) and of each K and V tile (128 keys; contiguous
 *       rows, or rows gathered through the key list) into a 2-deep ring of 128B-swizzled
 *       shared-memory tiles; each copy batch signals an mbarrier (cp.async.mbarrier.arrive.noinc), so
 *       the producer never blocks on data.
 *   WG1, WG2 consumers (setmaxnreg 232; 200 in the sparse kernel), 64 query rows each: S = Q K^T with
 *       wgmma m64n128k16 (A and B from shared memory), online softmax in registers, O += P V with
 *       wgmma m64n{D}k16 (P from registers, V as an MN-major B operand), empty-slot mbarriers back to
 *       the producer. The softmax of tile t+1 runs under the P V product of tile t (FA3's
 *       intra-warpgroup overlap), and named barriers make the two consumer warpgroups take turns
 *       issuing their GEMMs (FA3's ping-pong), so one warpgroup's softmax hides under the other's.
 * The kernels (each with PRECISE both ways): dg_attn_sm90_kernel<D, true, PRECISE, RES, TM> (sparse_fwd.cu),
 * dg_attn_sm90_window_kernel (window_fwd.cu); the body's plain dense walk (neither SPARSE nor WINDOW) was
 * the dense kernel until attn_sm90_dense.cuh's (dev/kernels' dense v4).
 * Template parameters of the body:
 *   TM        (sparse) Q, K, V token-major as the caller keeps them (row stride p.ldi), else head-major
 *             with the constant row stride D (a separate instance, so the head-major code is unchanged).
 *   SPARSE    gather-KV sparse attention: the producer holds the key-list entries one tile ahead in
 *             registers and takes each row index by warp shuffle, and the grid is persistent (one CTA
 *             per SM walks the flattened (head, group) items, attn_params.cuh dg_for_each_item), so
 *             the next item's Q and K/V load under this epilogue; the epilogue writes O at the
 *             original query index, + residual (RES: its stored dtype), and the retained mass.
 *   WINDOW    (dense walk) DiTFastAttn's window: each item walks its window's key tiles
 *             (window_tiles.h: contiguous rows, no list), the tiles that cross the window's edge
 *             masked per pair (mask_window), and the sparse epilogue in place.
 *   PRECISE   P.V as hi.V + lo.V, P split into two bf16 register operands (pack_p): a second wgmma
 *             chain per tile on the same accumulator, P exact to 2^-16 instead of 2^-8 (the precise
 *             mode of the launchers); 32 more live registers per consumer thread, so with the sparse
 *             kernel's 200 consumer registers at d=128 it runs without the overlap and ping-pong.
 * The earlier versions and the experiments (other stage counts, no overlap, no ping-pong, the
 * non-persistent sparse walk, TMA or lean gathers, the phase clock, K ahead of V, staged epilogues):
 * dev/kernels/attn_sm90_lab.cuh, measured in docs/history.md, "Kernel versions".
 * Contract: launched with 384 threads, dg_sm90_cfg<D, 2>::SMEM bytes of dynamic shared memory, and the
 * grid of its launcher (window: (query blocks of 128, heads); sparse:
 * dg_sparse_persistent_grid); reads p only as dg_attn_params states.
 */
#ifndef DG_ATTN_SM90_CUH
#define DG_ATTN_SM90_CUH

#include "attn_common.cuh"

template <int D, int STAGES> struct dg_sm90_cfg {
	static constexpr int BM = 128, BN = 128, NT = 384;
	static constexpr uint32_t QB = BM * D * 2, KVB = BN * D * 2;
	static constexpr uint32_t BARS = 8 * (2 + 4 * STAGES);
	static constexpr size_t SMEM = 1024 + QB + 2 * STAGES * KVB + BARS;
};
/* S (64 x 128, fp32) = Q rows of this warpgroup (64 x D) times K tile^T (D x 128) */
template <int D> DG_DEV void qk_gemm(float (&s)[64], uint32_t sQw, uint32_t sKs)
{
#pragma unroll
	for (int kk = 0; kk < D / 16; kk++) {
		const uint32_t off = (kk >> 2) * (128 * 128) + (kk & 3) * 32;
		wgmma_m64n128k16_ss(s, wg_desc(sQw + off, 16, 1024), wg_desc(sKs + off, 16, 1024), kk > 0);
	}
}

/* O (64 x D) += A (16 keys of P, bf16 registers a[4c..4c+3]) times rows 16c.. of the V tile */
template <int D> DG_DEV void pv_k16(float (&o)[D / 2], const uint32_t (&a)[32], int c, uint64_t db)
{
	if constexpr (D == 128)
		wgmma_m64n128k16_rs_tb(o, a[4 * c], a[4 * c + 1], a[4 * c + 2], a[4 * c + 3], db);
	else
		wgmma_m64n64k16_rs_tb(o, a[4 * c], a[4 * c + 1], a[4 * c + 2], a[4 * c + 3], db);
}

/* O (64 x D) += P (64 x 128: hi, + lo when PRECISE; bf16 registers) times V tile (128 x D, MN-major) */
template <int D, bool PRECISE>
DG_DEV void pv_gemm(float (&o)[D / 2], const uint32_t (&pr)[32], const uint32_t (&pl)[32], uint32_t sVs)
{
#pragma unroll
	for (int c = 0; c < 8; c++) {
		const uint64_t db = wg_desc(sVs + c * 2048, 128 * 128, 1024);
		pv_k16<D>(o, pr, c, db);
		if constexpr (PRECISE)
			pv_k16<D>(o, pl, c, db);
	}
}

/* The kernel's body: SPARSE, WINDOW, PRECISE, RES as the header comment says. */
template <int D, bool SPARSE, bool PRECISE, int RES, bool WINDOW, bool TM>
DG_DEV void dg_attn_sm90_body(const dg_attn_params &p)
{
	static_assert(!(WINDOW && SPARSE), "window: the dense walk's items");
	static_assert(!TM || SPARSE, "token-major inputs: the sparse kernel's");
	constexpr int STAGES = 2;
	/* registers of the producer and of each consumer: the sparse producer's fully unrolled shuffle
	 * loops need 96 (released (168-P)*128 must cover (C-168)*256) */
	constexpr int PREGS = SPARSE ? 96 : 40, CREGS = SPARSE ? 200 : 232;
	/* 200 consumer registers cannot hold S, O and both P halves at once at d=128 (ptxas spills and
	 * serialises the wgmmas), so PRECISE runs there without the overlap */
	constexpr bool OVERLAP = !(PRECISE && CREGS < 232 && D == 128);
	constexpr bool PINGPONG = OVERLAP;
	using C = dg_sm90_cfg<D, STAGES>;
	constexpr int BM = C::BM, BN = C::BN;
	extern __shared__ uint8_t smem_raw[];
	const uint32_t sQ = (smem_u32(smem_raw) + 1023u) & ~1023u;
	const uint32_t sK = sQ + C::QB, sV = sK + STAGES * C::KVB, bar = sV + STAGES * C::KVB;
	const uint32_t fullQ = bar, emptyQ = bar + 8;
#define FULLK(s) (bar + 16 + 8 * (s))
#define EMPTYK(s) (bar + 16 + 8 * (STAGES + (s)))
#define FULLV(s) (bar + 16 + 8 * (2 * STAGES + (s)))
#define EMPTYV(s) (bar + 16 + 8 * (3 * STAGES + (s)))
	const int tid = threadIdx.x, wg = tid >> 7;
	if (tid == 0) {
		mbar_init(fullQ, 128);
		mbar_init(emptyQ, 8);
		for (int s = 0; s < STAGES; s++) {
			mbar_init(FULLK(s), 128);
			mbar_init(EMPTYK(s), 8);
			mbar_init(FULLV(s), 128);
			mbar_init(EMPTYV(s), 8);
		}
		mbar_fence_init();
	}
	__syncthreads();

	if (wg == 0) {
		/* ------------------------------------------------------------------ producer */
		reg_dealloc<PREGS>();
		int kvit = 0, iq = 0;
		dg_for_each_item<SPARSE, BM>(p, [&](const dg_item &it) {
			const size_t hoff = in_head<D, TM>(p, it.h, p.n), kvoff = in_head<D, TM>(p, it.h, dg_kv_len(p));
			const bf16 *kh = p.k + kvoff, *vh = p.v + kvoff;
			const int ld = in_ld<D, TM>(p);
			if constexpr (SPARSE) { /* one perm load per thread, rows by shuffle */
				const int myr = tile_lane_row<D, 128>(tid);
				const int qidx = myr < it.qcount ? __ldg(head_perm(p, it.h) + it.qpos + myr) : 0;
				mbar_wait(emptyQ, (iq & 1) ^ 1);
				load_tile_shfl<BM, D, 128>(sQ, p.q + hoff, qidx, it.qcount, tid, ld);
			} else {
				mbar_wait(emptyQ, (iq & 1) ^ 1);
				load_tile<BM, D, 128, false>(sQ, p.q + hoff, nullptr, it.qpos, it.qcount, tid, ld);
			}
			mbar_arrive_cpasync(fullQ);
			iq++;
			const dg_window_tiles wt = dg_window_tiles_of(p.n, p.win_text, p.win_w, it.qpos, it.qcount, BN);
			const int ntiles = WINDOW ? dg_window_tiles_count(&wt) : (it.nkeys + BN - 1) / BN; /* wt: WINDOW only */
			const int32_t *klist = SPARSE ? head_sidx(p, it.h) + it.kbase : nullptr;
			if constexpr (SPARSE) {
				/* list entries one tile ahead, rows by shuffle: no dependent load before a copy */
				const int myr = tile_lane_row<D, 128>(tid);
				int idx = myr < it.nkeys ? __ldg(klist + myr) : 0;
				for (int t = 0; t < ntiles; t++, kvit++) {
					const int s = kvit % STAGES, ph = (kvit / STAGES) & 1;
					const int nv = min(BN, it.nkeys - t * BN);
					const int rn = (t + 1) * BN + myr;
					const int nidx = rn < it.nkeys ? __ldg(klist + rn) : 0;
					mbar_wait(EMPTYK(s), ph ^ 1);
					load_tile_shfl<BN, D, 128>(sK + s * C::KVB, kh, idx, nv, tid, ld);
					mbar_arrive_cpasync(FULLK(s));
					mbar_wait(EMPTYV(s), ph ^ 1);
					load_tile_shfl<BN, D, 128>(sV + s * C::KVB, vh, idx, nv, tid, ld);
					mbar_arrive_cpasync(FULLV(s));
					idx = nidx;
				}
			} else {
				for (int t = 0; t < ntiles; t++, kvit++) {
					const int s = kvit % STAGES, ph = (kvit / STAGES) & 1;
					int row0 = t * BN, nv = min(BN, it.nkeys - t * BN);
					if constexpr (WINDOW)
						dg_window_tile(&wt, t, BN, &row0, &nv);
					mbar_wait(EMPTYK(s), ph ^ 1);
					load_tile<BN, D, 128, false>(sK + s * C::KVB, kh, nullptr, row0, nv, tid, ld);
					mbar_arrive_cpasync(FULLK(s));
					mbar_wait(EMPTYV(s), ph ^ 1);
					load_tile<BN, D, 128, false>(sV + s * C::KVB, vh, nullptr, row0, nv, tid, ld);
					mbar_arrive_cpasync(FULLV(s));
				}
			}
		});
		asm volatile("cp.async.wait_all;\n" ::: "memory"); /* the copies above were never committed to groups */
	} else {
		/* ------------------------------------------------------------------ consumers */
		reg_alloc<CREGS>();
		const int cwg = wg - 1, lane = tid & 31, wq = (tid >> 5) & 3, g = lane >> 2, t4 = lane & 3;
		const uint32_t sQw = sQ + cwg * 64 * 128;
		const float sl2 = p.scale_log2;
		if (PINGPONG && cwg == 0)
			named_arrive(1, 256);
		int kvit = 0, iq = 0;
		dg_for_each_item<SPARSE, BM>(p, [&](const dg_item &it) {
			mbar_wait(fullQ, iq & 1);
			fence_proxy_async();
			iq++;
			float o[D / 2];
#pragma unroll
			for (int i = 0; i < D / 2; i++)
				o[i] = 0.f;
			float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f, a0, a1;
			float s[64];
			uint32_t pr[32], pl[32]; /* P hi, lo (PRECISE) */
			const dg_window_tiles wt = dg_window_tiles_of(p.n, p.win_text, p.win_w, it.qpos, it.qcount, BN);
			const int ntiles = WINDOW ? dg_window_tiles_count(&wt) : (it.nkeys + BN - 1) / BN; /* wt: WINDOW only */
			/* tile t's scores past the keys (or, WINDOW, outside the window) to -inf */
			auto mask_tile = [&](int t) {
				if constexpr (WINDOW) {
					int j0, nv;
					dg_window_tile(&wt, t, BN, &j0, &nv);
					const int ia = it.qpos + cwg * 64 + wq * 16 + g;
					if (nv < BN || !dg_window_tile_full(&wt, j0, nv))
						mask_window<64>(s, j0, nv, ia, ia + 8, wt.text, wt.w, t4);
				} else {
					const int nv = it.nkeys - t * BN;
					if (nv < BN)
						mask_cols<64>(s, nv, t4);
				}
			};
			if (ntiles == 0) {
				if (lane == 0)
					mbar_arrive(emptyQ);
			} else if (!OVERLAP) {
				for (int t = 0; t < ntiles; t++, kvit++) {
					const int st = kvit % STAGES, ph = (kvit / STAGES) & 1;
					mbar_wait(FULLK(st), ph);
					fence_proxy_async();
					wg_fence();
					qk_gemm<D>(s, sQw, sK + st * C::KVB);
					wg_commit();
					wg_wait<0>();
					reg_fence(s);
					if (lane == 0) {
						mbar_arrive(EMPTYK(st));
						if (t == ntiles - 1)
							mbar_arrive(emptyQ);
					}
					mask_tile(t);
					softmax_step<64>(s, m0, m1, l0, l1, a0, a1, sl2);
					rescale<D / 2>(o, a0, a1);
					pack_p<PRECISE>(pr, pl, s);
					mbar_wait(FULLV(st), ph);
					fence_proxy_async();
					wg_fence();
					pv_gemm<D, PRECISE>(o, pr, pl, sV + st * C::KVB);
					wg_commit();
					wg_wait<0>();
					reg_fence(o);
					reg_fence(pr);
					if constexpr (PRECISE)
						reg_fence(pl);
					if (lane == 0)
						mbar_arrive(EMPTYV(st));
				}
			} else {
				int st = kvit % STAGES, ph = (kvit / STAGES) & 1;
				mbar_wait(FULLK(st), ph);
				fence_proxy_async();
				if (PINGPONG)
					named_sync(1 + cwg, 256);
				wg_fence();
				qk_gemm<D>(s, sQw, sK + st * C::KVB);
				wg_commit();
				if (PINGPONG)
					named_arrive(2 - cwg, 256);
				wg_wait<0>();
				reg_fence(s);
				if (lane == 0) {
					mbar_arrive(EMPTYK(st));
					if (ntiles == 1)
						mbar_arrive(emptyQ);
				}
				mask_tile(0);
				softmax_step<64>(s, m0, m1, l0, l1, a0, a1, sl2);
				pack_p<PRECISE>(pr, pl, s);
				for (int t = 1; t < ntiles; t++) {
					const int sp = st, php = ph;
					kvit++;
					st = kvit % STAGES;
					ph = (kvit / STAGES) & 1;
					mbar_wait(FULLK(st), ph);
					fence_proxy_async();
					if (PINGPONG)
						named_sync(1 + cwg, 256);
					wg_fence();
					qk_gemm<D>(s, sQw, sK + st * C::KVB);
					wg_commit();
					mbar_wait(FULLV(sp), php);
					fence_proxy_async();
					wg_fence();
					pv_gemm<D, PRECISE>(o, pr, pl, sV + sp * C::KVB);
					wg_commit();
					if (PINGPONG)
						named_arrive(2 - cwg, 256);
					wg_wait<1>();
					reg_fence(s);
					if (lane == 0) {
						mbar_arrive(EMPTYK(st));
						if (t == ntiles - 1)
							mbar_arrive(emptyQ);
					}
					mask_tile(t);
					softmax_step<64>(s, m0, m1, l0, l1, a0, a1, sl2);
					wg_wait<0>();
					reg_fence(o);
					reg_fence(pr);
					if constexpr (PRECISE)
						reg_fence(pl);
					if (lane == 0)
						mbar_arrive(EMPTYV(sp));
					rescale<D / 2>(o, a0, a1);
					pack_p<PRECISE>(pr, pl, s);
				}
				mbar_wait(FULLV(st), ph);
				fence_proxy_async();
				if (PINGPONG)
					named_sync(1 + cwg, 256);
				wg_fence();
				pv_gemm<D, PRECISE>(o, pr, pl, sV + st * C::KVB);
				wg_commit();
				if (PINGPONG)
					named_arrive(2 - cwg, 256);
				wg_wait<0>();
				reg_fence(o);
				reg_fence(pr);
				if constexpr (PRECISE)
					reg_fence(pl);
				if (lane == 0)
					mbar_arrive(EMPTYV(st));
				kvit++;
			}
			write_rows<D, SPARSE || WINDOW, RES, SPARSE>(p, it, cwg * 64 + wq * 16, g, t4, o, m0, m1, l0, l1);
		});
	}
#undef FULLK
#undef EMPTYK
#undef FULLV
#undef EMPTYV
}

/* gather-KV sparse attention (sparse_fwd.cu); TM: token-major inputs (p.ldi) */
template <int D, bool SPARSE, bool PRECISE, int RES = DG_RES_F32, bool TM = false>
__global__ void __launch_bounds__(384, 1) dg_attn_sm90_kernel(const __grid_constant__ dg_attn_params p)
{
	static_assert(SPARSE, "dense attention: attn_sm90_dense.cuh's kernel");
	dg_attn_sm90_body<D, SPARSE, PRECISE, RES, false, TM>(p);
}

/* window attention (window_fwd.cu): the dense kernel's walk over the window's key tiles, the sparse
 * epilogue (residual, retained mass) in place */
template <int D, bool PRECISE, int RES>
__global__ void __launch_bounds__(384, 1) dg_attn_sm90_window_kernel(const __grid_constant__ dg_attn_params p)
{
	dg_attn_sm90_body<D, false, PRECISE, RES, true, false>(p);
}

#endif
