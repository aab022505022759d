/*
 * attn_sm90.cuh: the Hopper (sm_90a) dense and gather-KV attention kernel (not a public header),
 * FlashAttention-3 style. One CTA = 3 warpgroups:
 *   WG0 producer (setmaxnreg 40; 96 in FAST, whose unrolled shuffle loops need more): cp.async 16-byte copies of Q (once per item) and of each K and V
 *       tile (128 keys; contiguous rows, or rows gathered through the key list) into a STAGES-deep
 *       ring of 128B-swizzled shared-memory tiles; each copy batch signals an mbarrier
 *       (cp.async.mbarrier.arrive.noinc), so the producer never blocks on data.
 *   WG1, WG2 consumers (setmaxnreg 232; 200 in FAST), 64 query rows each: S = Q K^T with wgmma m64n128k16
 *       (A and B from shared memory), online softmax in registers, O += P V with wgmma
 *       m64n{D}k16 (P from registers, V as an MN-major B operand), empty-slot mbarriers back to
 *       the producer.
 * Template switches: flash_fwd.cu instantiates <D, 2, OVERLAP, PINGPONG, dense, !FAST>, sparse_fwd.cu
 * <D, 2, OVERLAP, PINGPONG, SPARSE, FAST>, window_fwd.cu the dense one with WINDOW, each with PRECISE
 * both ways; the other combinations are
 * the earlier numbered versions in dev/kernels/ (flash_fwd_v.cu, sparse_fwd_v.cu):
 *   STAGES    depth of the K/V ring (shared-memory stages);
 *   OVERLAP   issue S(t+1) = Q K(t+1)^T and O += P(t) V(t) back to back, do softmax(t+1) while the
 *             P V product runs (FA3's intra-warpgroup overlap);
 *   PINGPONG  named barriers make the two consumer warpgroups take turns issuing their GEMMs, so
 *             one warpgroup's softmax hides under the other's GEMMs (FA3's inter-warpgroup overlap).
 *   FAST      (sparse) the producer holds the key-list entries one tile ahead in registers and takes
 *             each row index by warp shuffle, and the grid is persistent (one CTA per SM walks the
 *             flattened (head, group) items), so the next item's Q and K/V load under this epilogue.
 *   GATHER    (dg_attn_sm90_body only; FAST) how the producer gathers: DG_GATHER_SHFL (the kernel's:
 *             every copy pass unrolled, producer 96 registers, consumers 200), DG_GATHER_LEAN (dev/kernels'
 *             sparse v10: passes unrolled by 4, so the producer fits 40 registers and the consumers
 *             get 232, as the dense kernel's; faster in the kernel bench, slower in the DiT call:
 *             dev/kernels/HISTORY.md), DG_GATHER_TMA (sparse v9: K and V rows by TMA, warp 0 of the
 *             producer, one 64-column box a row half).
 *   KAHEAD    (dg_attn_sm90_body only; not with DG_GATHER_TMA) the producer copies K one tile ahead of V:
 *             K(0), then K(t+1) and V(t), the consumers' order (dev/kernels' sparse v13, v14);
 *             otherwise K(t) and V(t) in turn.
 *   EPI       (dg_attn_sm90_body only; the sparse FAST kernel, fp32 residuals) the epilogue: DG_EPI_DIRECT
 *             (the kernels': write_rows from the registers), DG_EPI_STAGED (dev/kernels' sparse v15:
 *             write_rows_staged, whole rows through 64 KiB more shared memory), DG_EPI_PREFETCH (v17: the
 *             producer copies the item's residual rows into the staging rows); neither faster where it
 *             counts (dev/kernels/HISTORY.md).
 *   WINDOW    (dense walk) DiTFastAttn's window: each item walks its window's key tiles
 *             (window_tiles.h: contiguous rows, no list), the tiles that cross the
 *             window's edge masked per pair (mask_window), and the sparse epilogue in place.
 *   PRECISE   P.V as hi.V + lo.V, P split into two bf16 register operands (pack_p): a second wgmma
 *             chain per tile on the same accumulator, P exact to 2^-16 instead of 2^-8 (the precise
 *             mode of the launchers); 32 more live registers per consumer thread, so with 200
 *             consumer registers (FAST but not LEAN) at d=128 it drops OVERLAP and PINGPONG (the
 *             promoted sparse kernel's precise mode at d=128 runs without overlap).
 */
#ifndef DG_ATTN_SM90_CUH
#define DG_ATTN_SM90_CUH

#include "attn_common.cuh"

template <int D, int STAGES> struct dg_sm90_cfg {
	static constexpr int BM = 128, BN = 128, NT = 384;
	static constexpr uint32_t QB = BM * D * 2, KVB = BN * D * 2;
	static constexpr uint32_t BARS = 8 * (2 + 4 * STAGES);
	static constexpr size_t SMEM = 1024 + QB + 2 * STAGES * KVB + BARS;
	/* EPI staged: 16 fp32 rows of O for each consumer warp (128 rows a CTA), then fullR and emptyR */
	static constexpr uint32_t STG = 8 * 16 * D * 4;
	static constexpr size_t SMEM_STAGED = SMEM + STG + 16;
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

/* how the sparse FAST producer gathers K and V rows (GATHER: the header comment) */
enum { DG_GATHER_SHFL, DG_GATHER_LEAN, DG_GATHER_TMA };

/* Phase clock (PROBE, dev/kernels' sparse v11 and v12 only): thread 0 of each warpgroup adds the SM
 * clocks since its last lap to the phase's counter (shared memory, one set a warpgroup) and, at the
 * end, the counters to out[wg * DG_PROBE_N + phase] in global memory. Off (ON false): no code. */
enum { DG_PROBE_ITEM, DG_PROBE_FULLK, DG_PROBE_TURN, DG_PROBE_ISSUE, DG_PROBE_FULLV, DG_PROBE_QKWAIT,
       DG_PROBE_SOFTMAX, DG_PROBE_PVWAIT, DG_PROBE_RESCALE, DG_PROBE_EPILOGUE, DG_PROBE_EMPTY, DG_PROBE_COPY,
       DG_PROBE_N };
template <bool ON> struct dg_probe {
	uint32_t *cnt = nullptr, t = 0;
	__device__ __forceinline__ void init(int tid)
	{
		if constexpr (ON) {
			__shared__ uint32_t c[3 * DG_PROBE_N];
			if (tid < 3 * DG_PROBE_N)
				c[tid] = 0;
			cnt = c + (tid >> 7) * DG_PROBE_N;
		}
	}
	__device__ __forceinline__ void start()
	{
		if constexpr (ON)
			t = (uint32_t)clock();
	}
	__device__ __forceinline__ void lap(int phase)
	{
		if constexpr (ON) {
			const uint32_t n = (uint32_t)clock();
			if ((threadIdx.x & 127) == 0)
				cnt[phase] += n - t;
			t = n;
		}
	}
	__device__ __forceinline__ void flush(unsigned long long *out)
	{
		if constexpr (ON)
			if ((threadIdx.x & 127) == 0)
				for (int k = 0; k < DG_PROBE_N; k++)
					atomicAdd(out + (threadIdx.x >> 7) * DG_PROBE_N + k, (unsigned long long)cnt[k]);
	}
};

/* The kernel's body; GATHER (SPARSE and FAST only when not DG_GATHER_SHFL). DG_GATHER_TMA: warp 0 of the
 * producer copies each K and V row by TMA (a 64-column box a row half, from the tensor maps at tmk,
 * tmv: kernel parameters), the mbarriers of the K and V stages counting that warp's one arrival and
 * the bytes. */
template <int D, int STAGES, bool OVERLAP_, bool PINGPONG_, bool SPARSE, bool FAST, bool PRECISE, int RES, int GATHER,
	  bool PROBE = false, bool KAHEAD = false, bool WINDOW = false, int EPI = DG_EPI_DIRECT>
DG_DEV void dg_attn_sm90_body(const dg_attn_params &p, const void *tmk, const void *tmv,
			      unsigned long long *probe_out = nullptr)
{
	constexpr bool TMAG = GATHER == DG_GATHER_TMA, LEAN = GATHER == DG_GATHER_LEAN;
	static_assert(GATHER == DG_GATHER_SHFL || (SPARSE && FAST), "another gather: the sparse FAST kernel only");
	static_assert(!(KAHEAD && TMAG), "K ahead: the cp.async producers only");
	static_assert(!(WINDOW && (SPARSE || FAST || KAHEAD)), "window: the dense walk's items");
	static_assert(EPI == DG_EPI_DIRECT || (SPARSE && FAST && RES == DG_RES_F32 && !KAHEAD && !TMAG),
		      "the staged epilogues: the sparse FAST kernel's, fp32 residuals");
	constexpr bool STAGED = EPI != DG_EPI_DIRECT, RPRE = EPI == DG_EPI_PREFETCH;
	/* registers of the producer and of each consumer: the FAST producer's fully unrolled shuffle
	 * loops need 96 (released (168-P)*128 must cover (C-168)*256) */
	constexpr int PREGS = FAST && !LEAN ? 96 : 40, CREGS = FAST && !LEAN ? 200 : 232;
	constexpr int SHFL_UNROLL = LEAN ? 4 : 0; /* load_tile_shfl's copy passes unrolled (0: all) */
	/* 200 consumer registers cannot hold S, O and both P halves at once at d=128 (ptxas spills and
	 * serialises the wgmmas), so PRECISE runs there without the overlap */
	constexpr bool OVERLAP = OVERLAP_ && !(PRECISE && CREGS < 232 && D == 128);
	constexpr bool PINGPONG = PINGPONG_ && OVERLAP;
	using C = dg_sm90_cfg<D, STAGES>;
	constexpr int BM = C::BM, BN = C::BN;
	extern __shared__ uint8_t smem_raw[];
	const uint32_t sQ = (smem_u32(smem_raw) + 1023u) & ~1023u;
	const uint32_t sK = sQ + C::QB, sV = sK + STAGES * C::KVB, bar = sV + STAGES * C::KVB;
	const uint32_t fullQ = bar, emptyQ = bar + 8;
	/* EPI staged: the staging rows (item row r at sStage + r * D * 4 bytes) and, RPRE, their barriers */
	const uint32_t sStage = bar + C::BARS, fullR = sStage + C::STG, emptyR = fullR + 8;
#define FULLK(s) (bar + 16 + 8 * (s))
#define EMPTYK(s) (bar + 16 + 8 * (STAGES + (s)))
#define FULLV(s) (bar + 16 + 8 * (2 * STAGES + (s)))
#define EMPTYV(s) (bar + 16 + 8 * (3 * STAGES + (s)))
	const int tid = threadIdx.x, wg = tid >> 7;
	dg_probe<PROBE> pb;
	pb.init(tid);
	if (tid == 0) {
		mbar_init(fullQ, 128);
		mbar_init(emptyQ, 8);
		for (int s = 0; s < STAGES; s++) {
			mbar_init(FULLK(s), TMAG ? 1 : 128);
			mbar_init(EMPTYK(s), 8);
			mbar_init(FULLV(s), TMAG ? 1 : 128);
			mbar_init(EMPTYV(s), 8);
		}
		if (RPRE) {
			mbar_init(fullR, 128);
			mbar_init(emptyR, 8);
		}
		mbar_fence_init();
	}
	__syncthreads();

	if (wg == 0) {
		/* ------------------------------------------------------------------ producer */
		reg_dealloc<PREGS>();
		pb.start();
		int kvit = 0, iq = 0, ir = 0;
		dg_for_each_item<SPARSE, BM, FAST>(p, [&](const dg_item &it) {
			[[maybe_unused]] int qrow = 0; /* SPARSE FAST: this thread's Q row (item row tile_lane_row(tid)) */
			const size_t hoff = (size_t)it.h * p.n * D, kvoff = (size_t)it.h * dg_kv_len(p) * D;
			const bf16 *kh = p.k + kvoff, *vh = p.v + kvoff;
			if constexpr (SPARSE && FAST) { /* one perm load per thread, rows by shuffle */
				const int myr = tile_lane_row<D, 128>(tid);
				const int qidx = myr < it.qcount ? __ldg(head_perm(p, it.h) + it.qpos + myr) : 0;
				qrow = qidx;
				mbar_wait(emptyQ, (iq & 1) ^ 1);
				load_tile_shfl<BM, D, 128, SHFL_UNROLL>(sQ, p.q + hoff, qidx, it.qcount, tid);
			} else {
				mbar_wait(emptyQ, (iq & 1) ^ 1);
				load_tile<BM, D, 128, SPARSE>(sQ, p.q + hoff,
							      SPARSE ? head_perm(p, it.h) + it.qpos : nullptr, it.qpos,
							      it.qcount, tid);
			}
			mbar_arrive_cpasync(fullQ);
			iq++;
			const dg_window_tiles wt = dg_window_tiles_of(p.n, p.win_text, p.win_w, it.qpos, it.qcount, BN);
			const int ntiles = WINDOW ? dg_window_tiles_count(&wt) : (it.nkeys + BN - 1) / BN; /* wt: WINDOW only */
			const int32_t *klist = SPARSE ? head_sidx(p, it.h) + it.kbase : nullptr;
			/* RPRE: the item's residual rows into the staging rows once the consumers are done with the
			 * last item's (after tile min(2, ntiles - 1)'s copies, by when they are: the slot of tile 2
			 * frees only after this item's tile 0), each warp the 32 rows its lanes hold */
			[[maybe_unused]] auto copy_residual = [&]() {
				mbar_wait(emptyR, (ir & 1) ^ 1);
				const float *res = head_residual<D>(p, it.h);
				if (res) {
					constexpr int RPW = 32 / (D / 8), RPP = 128 / (D / 8), RCH = D / 4;
					const int lane = tid & 31, w = tid >> 5;
#pragma unroll 4
					for (int i = 0; i < 32; i++) {
						const int row = __shfl_sync(0xffffffffu, qrow, i);
						const int r = (i / RPW) * RPP + w * RPW + i % RPW;
						const bool ok = r < it.qcount;
						if (lane < RCH)
							cp_async16(sStage + (r * D + 4 * (lane ^ (r & 7))) * 4,
								   res + (size_t)(ok ? row : 0) * D + 4 * lane, ok ? 16 : 0);
					}
				}
				mbar_arrive_cpasync(fullR);
				ir++;
			};
			if constexpr (TMAG) {
				/* warp 0: lane l copies rows l + 32 j of each tile, their list entries a tile ahead;
				 * rows past the list copy the tile's first row (finite values under P = 0, and
				 * every stage takes one tile's bytes) */
				if (tid < 32) {
					int e[4];
#pragma unroll
					for (int j = 0; j < 4; j++)
						e[j] = 32 * j + tid < it.nkeys ? __ldg(klist + 32 * j + tid) : -1;
					for (int t = 0; t < ntiles; t++, kvit++) {
						const int s = kvit % STAGES, ph = (kvit / STAGES) & 1;
						const int first = __shfl_sync(0xffffffffu, e[0], 0);
						int row[4], ne[4];
#pragma unroll
						for (int j = 0; j < 4; j++) {
							const int rn = (t + 1) * BN + 32 * j + tid;
							ne[j] = rn < it.nkeys ? __ldg(klist + rn) : -1;
							row[j] = e[j] >= 0 ? e[j] : first;
						}
						/* one stage of K or V: wait for the slot, expect the tile's bytes, copy */
						auto stage = [&](uint32_t dst, const void *tm, uint32_t full, uint32_t empty) {
							mbar_wait(empty, ph ^ 1);
							if (tid == 0)
								mbar_arrive_expect_tx(full, C::KVB);
							__syncwarp();
#pragma unroll
							for (int j = 0; j < 4; j++)
#pragma unroll
								for (int hf = 0; hf < D / 64; hf++)
									tma_load_3d(dst + hf * (BN * 128) + (32 * j + tid) * 128, tm,
										    hf * 64, row[j], it.h, full);
						};
						stage(sK + s * C::KVB, tmk, FULLK(s), EMPTYK(s));
						stage(sV + s * C::KVB, tmv, FULLV(s), EMPTYV(s));
#pragma unroll
						for (int j = 0; j < 4; j++)
							e[j] = ne[j];
					}
				}
			} else if constexpr (KAHEAD) {
				/* K one tile ahead of V: K(0), then K(t+1) and V(t) for each t, the order in which the
				 * consumers take them (Q K(t+1)^T is issued before P(t) V(t)), so that no K copy waits
				 * behind a V slot that P V still reads (the sparse FAST path: list entries two tiles
				 * ahead, rows by shuffle) */
				[[maybe_unused]] const int myr = tile_lane_row<D, 128>(tid);
				auto entry = [&](int t) {
					const int r = t * BN + myr;
					return r < it.nkeys ? __ldg(klist + r) : 0;
				};
				auto stage = [&](bool isk, int t, int kv, int rows) {
					const int s = kv % STAGES, ph = (kv / STAGES) & 1, nv = min(BN, it.nkeys - t * BN);
					const uint32_t dst = (isk ? sK : sV) + s * C::KVB;
					const bf16 *src = isk ? kh : vh;
					pb.lap(DG_PROBE_ITEM);
					mbar_wait(isk ? EMPTYK(s) : EMPTYV(s), ph ^ 1);
					pb.lap(DG_PROBE_EMPTY);
					if constexpr (SPARSE && FAST)
						load_tile_shfl<BN, D, 128, SHFL_UNROLL>(dst, src, rows, nv, tid);
					else
						load_tile<BN, D, 128, SPARSE>(dst, src, SPARSE ? klist + t * BN : nullptr, t * BN,
									      nv, tid);
					mbar_arrive_cpasync(isk ? FULLK(s) : FULLV(s));
					pb.lap(DG_PROBE_COPY);
				};
				int idx = 0, nidx = 0; /* FAST: the lane's list entries of tiles t and t + 1 */
				if (ntiles > 0) {
					if constexpr (SPARSE && FAST) {
						idx = entry(0);
						nidx = entry(1);
					}
					stage(true, 0, kvit, idx);
				}
				for (int t = 0; t < ntiles; t++, kvit++) {
					int nnidx = 0;
					if constexpr (SPARSE && FAST)
						nnidx = entry(t + 2);
					if (t + 1 < ntiles)
						stage(true, t + 1, kvit + 1, nidx);
					stage(false, t, kvit, idx);
					idx = nidx;
					nidx = nnidx;
				}
			} else if constexpr (SPARSE && FAST) {
				/* list entries one tile ahead, rows by shuffle: no dependent load before a copy */
				const int myr = tile_lane_row<D, 128>(tid);
				int idx = myr < it.nkeys ? __ldg(klist + myr) : 0;
				for (int t = 0; t < ntiles; t++, kvit++) {
					const int s = kvit % STAGES, ph = (kvit / STAGES) & 1;
					const int nv = min(BN, it.nkeys - t * BN);
					const int rn = (t + 1) * BN + myr;
					const int nidx = rn < it.nkeys ? __ldg(klist + rn) : 0;
					pb.lap(DG_PROBE_ITEM);
					mbar_wait(EMPTYK(s), ph ^ 1);
					pb.lap(DG_PROBE_EMPTY);
					load_tile_shfl<BN, D, 128, SHFL_UNROLL>(sK + s * C::KVB, kh, idx, nv, tid);
					mbar_arrive_cpasync(FULLK(s));
					pb.lap(DG_PROBE_COPY);
					mbar_wait(EMPTYV(s), ph ^ 1);
					pb.lap(DG_PROBE_EMPTY);
					load_tile_shfl<BN, D, 128, SHFL_UNROLL>(sV + s * C::KVB, vh, idx, nv, tid);
					mbar_arrive_cpasync(FULLV(s));
					pb.lap(DG_PROBE_COPY);
					idx = nidx;
					if (RPRE && t == min(2, ntiles - 1))
						copy_residual();
				}
				if (RPRE && ntiles == 0)
					copy_residual();
			} else {
				for (int t = 0; t < ntiles; t++, kvit++) {
					const int s = kvit % STAGES, ph = (kvit / STAGES) & 1;
					int row0 = t * BN, nv = min(BN, it.nkeys - t * BN);
					if constexpr (WINDOW)
						dg_window_tile(&wt, t, BN, &row0, &nv);
					mbar_wait(EMPTYK(s), ph ^ 1);
					load_tile<BN, D, 128, SPARSE>(sK + s * C::KVB, kh, SPARSE ? klist + t * BN : nullptr, row0,
								      nv, tid);
					mbar_arrive_cpasync(FULLK(s));
					mbar_wait(EMPTYV(s), ph ^ 1);
					load_tile<BN, D, 128, SPARSE>(sV + s * C::KVB, vh, SPARSE ? klist + t * BN : nullptr, row0,
								      nv, tid);
					mbar_arrive_cpasync(FULLV(s));
				}
			}
		});
		asm volatile("cp.async.wait_all;\n" ::: "memory"); /* the copies above were never committed to groups */
		pb.lap(DG_PROBE_ITEM);
		pb.flush(probe_out);
	} else {
		/* ------------------------------------------------------------------ consumers */
		reg_alloc<CREGS>();
		pb.start();
		const int cwg = wg - 1, lane = tid & 31, wq = (tid >> 5) & 3, g = lane >> 2, t4 = lane & 3;
		const uint32_t sQw = sQ + cwg * 64 * 128;
		const float sl2 = p.scale_log2;
		if (PINGPONG && cwg == 0)
			named_arrive(1, 256);
		int kvit = 0, iq = 0, ir = 0;
		dg_for_each_item<SPARSE, BM, FAST>(p, [&](const dg_item &it) {
			/* RPRE: lane r's row (r < 16) of this warp's 16, loaded under the item's tiles */
			[[maybe_unused]] int myrow = -1;
			if constexpr (RPRE)
				if (lane < 16 && cwg * 64 + wq * 16 + lane < it.qcount)
					myrow = __ldg(head_perm(p, it.h) + it.qpos + cwg * 64 + wq * 16 + lane);
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
				pb.lap(DG_PROBE_ITEM);
				mbar_wait(FULLK(st), ph);
				fence_proxy_async();
				pb.lap(DG_PROBE_FULLK);
				if (PINGPONG)
					named_sync(1 + cwg, 256);
				pb.lap(DG_PROBE_TURN);
				wg_fence();
				qk_gemm<D>(s, sQw, sK + st * C::KVB);
				wg_commit();
				if (PINGPONG)
					named_arrive(2 - cwg, 256);
				pb.lap(DG_PROBE_ISSUE);
				wg_wait<0>();
				reg_fence(s);
				pb.lap(DG_PROBE_QKWAIT);
				if (lane == 0) {
					mbar_arrive(EMPTYK(st));
					if (ntiles == 1)
						mbar_arrive(emptyQ);
				}
				mask_tile(0);
				softmax_step<64>(s, m0, m1, l0, l1, a0, a1, sl2);
				pack_p<PRECISE>(pr, pl, s);
				pb.lap(DG_PROBE_SOFTMAX);
				for (int t = 1; t < ntiles; t++) {
					const int sp = st, php = ph;
					kvit++;
					st = kvit % STAGES;
					ph = (kvit / STAGES) & 1;
					mbar_wait(FULLK(st), ph);
					fence_proxy_async();
					pb.lap(DG_PROBE_FULLK);
					if (PINGPONG)
						named_sync(1 + cwg, 256);
					pb.lap(DG_PROBE_TURN);
					wg_fence();
					qk_gemm<D>(s, sQw, sK + st * C::KVB);
					wg_commit();
					pb.lap(DG_PROBE_ISSUE);
					mbar_wait(FULLV(sp), php);
					fence_proxy_async();
					pb.lap(DG_PROBE_FULLV);
					wg_fence();
					pv_gemm<D, PRECISE>(o, pr, pl, sV + sp * C::KVB);
					wg_commit();
					if (PINGPONG)
						named_arrive(2 - cwg, 256);
					pb.lap(DG_PROBE_ISSUE);
					wg_wait<1>();
					reg_fence(s);
					pb.lap(DG_PROBE_QKWAIT);
					if (lane == 0) {
						mbar_arrive(EMPTYK(st));
						if (t == ntiles - 1)
							mbar_arrive(emptyQ);
					}
					mask_tile(t);
					softmax_step<64>(s, m0, m1, l0, l1, a0, a1, sl2);
					pb.lap(DG_PROBE_SOFTMAX);
					wg_wait<0>();
					reg_fence(o);
					reg_fence(pr);
					if constexpr (PRECISE)
						reg_fence(pl);
					pb.lap(DG_PROBE_PVWAIT);
					if (lane == 0)
						mbar_arrive(EMPTYV(sp));
					rescale<D / 2>(o, a0, a1);
					pack_p<PRECISE>(pr, pl, s);
					pb.lap(DG_PROBE_RESCALE);
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
			pb.lap(DG_PROBE_ITEM);
			if constexpr (STAGED) {
				float *stage = reinterpret_cast<float *>(smem_raw + (sStage - smem_u32(smem_raw))) +
					       (cwg * 4 + wq) * 16 * D;
				if constexpr (RPRE) {
					mbar_wait(fullR, ir & 1);
					ir++;
				}
				write_rows_staged<D, RPRE>(p, it, cwg * 64 + wq * 16, g, t4, o, m0, m1, l0, l1, stage, myrow);
				if (RPRE && lane == 0)
					mbar_arrive(emptyR); /* after write_rows_staged's last __syncwarp */
			} else
				write_rows<D, SPARSE || WINDOW, RES, SPARSE>(p, it, cwg * 64 + wq * 16, g, t4, o, m0, m1, l0, l1);
			pb.lap(DG_PROBE_EPILOGUE);
		});
		pb.flush(probe_out);
	}
#undef FULLK
#undef EMPTYK
#undef FULLV
#undef EMPTYV
}

template <int D, int STAGES, bool OVERLAP_, bool PINGPONG_, bool SPARSE, bool FAST, bool PRECISE, int RES = DG_RES_F32>
__global__ void __launch_bounds__(384, 1) dg_attn_sm90_kernel(const __grid_constant__ dg_attn_params p)
{
	dg_attn_sm90_body<D, STAGES, OVERLAP_, PINGPONG_, SPARSE, FAST, PRECISE, RES, DG_GATHER_SHFL>(p, nullptr, nullptr);
}

/* window attention (window_fwd.cu): the dense kernel's walk over the window's key tiles, the sparse
 * epilogue (residual, retained mass) in place */
template <int D, bool PRECISE, int RES>
__global__ void __launch_bounds__(384, 1) dg_attn_sm90_window_kernel(const __grid_constant__ dg_attn_params p)
{
	dg_attn_sm90_body<D, 2, true, true, false, false, PRECISE, RES, DG_GATHER_SHFL, false, false, true>(p, nullptr,
													    nullptr);
}

#endif
