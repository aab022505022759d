/*
 * attn_sm90_lab.cuh: the kernel lab's Hopper attention kernel (dev/kernels only): kernels/attn_sm90.cuh's
 * kernel with every switch the numbered versions need, and the lab-only helpers (the non-persistent
 * sparse walk, the TMA gather's PTX, the lean shuffle loader, the staged epilogues, the phase clock).
 * kernels/attn_sm90.cuh ships the promoted variants alone: <D, 2, true, true, true, true, PR, RES> is
 * kernels/' sparse kernel (the same code; scripts/kernels_sass.sh checks the shipped kernels' SASS across
 * a refactor); <D, 2, true, true, false, false, PR> was kernels/' dense kernel up to dense v4 (kernels/
 * attn_sm90_dense.cuh's TMA kernel since).
 * Contract: as kernels/attn_sm90.cuh (384 threads, dg_lab_sm90_cfg<D, STAGES>::SMEM bytes, or
 * SMEM_STAGED with the staged epilogues); the versions that use each switch: flash_fwd_v.cu,
 * sparse_fwd_v.cu, measured in docs/history.md, "Kernel versions".
 * Template switches (the promoted kernels are <D, 2, OVERLAP, PINGPONG, SPARSE, FAST> (sparse_fwd.cu) and the dense one with WINDOW (window_fwd.cu),
 * each with PRECISE both ways; the other combinations are the earlier numbered versions):
 *   STAGES    depth of the K/V ring (shared-memory stages);
 *   OVERLAP   issue S(t+1) = Q K(t+1)^T and O += P(t) V(t) back to back, do softmax(t+1) while the
 *             P V product runs (FA3's intra-warpgroup overlap);
 *   PINGPONG  named barriers make the two consumer warpgroups take turns issuing their GEMMs, so
 *             one warpgroup's softmax hides under the other's GEMMs (FA3's inter-warpgroup overlap).
 *   FAST      (sparse) the producer holds the key-list entries one tile ahead in registers and takes
 *             each row index by warp shuffle, and the grid is persistent (one CTA per SM walks the
 *             flattened (head, group) items), so the next item's Q and K/V load under this epilogue.
 *   GATHER    (dg_lab_sm90_body only; FAST) how the producer gathers: DG_GATHER_SHFL (the kernel's:
 *             every copy pass unrolled, producer 96 registers, consumers 200), DG_GATHER_LEAN (dev/kernels'
 *             sparse v10: passes unrolled by 4, so the producer fits 40 registers and the consumers
 *             get 232, as the dense kernel's; faster in the kernel bench, slower in the DiT call:
 *             docs/history.md, "Kernel versions"), DG_GATHER_TMA (sparse v9: K and V rows by TMA, warp 0 of the
 *             producer, one 64-column box a row half).
 *   KAHEAD    (dg_lab_sm90_body only; not with DG_GATHER_TMA) the producer copies K one tile ahead of V:
 *             K(0), then K(t+1) and V(t), the consumers' order (dev/kernels' sparse v13, v14);
 *             otherwise K(t) and V(t) in turn.
 *   EPI       (dg_lab_sm90_body only; the sparse FAST kernel, fp32 residuals) the epilogue: DG_EPI_DIRECT
 *             (the kernels': write_rows from the registers), DG_EPI_STAGED (dev/kernels' sparse v15:
 *             write_rows_staged, whole rows through 64 KiB more shared memory), DG_EPI_PREFETCH (v17: the
 *             producer copies the item's residual rows into the staging rows); neither faster where it
 *             counts (docs/history.md, "Kernel versions").
 *   WINDOW    (dense walk) DiTFastAttn's window: each item walks its window's key tiles
 *             (window_tiles.h: contiguous rows, no list), the tiles that cross the
 *             window's edge masked per pair (mask_window), and the sparse epilogue in place.
 *   PRECISE   P.V as hi.V + lo.V, P split into two bf16 register operands (pack_p): a second wgmma
 *             chain per tile on the same accumulator, P exact to 2^-16 instead of 2^-8 (the precise
 *             mode of the launchers); 32 more live registers per consumer thread, so with 200
 *             consumer registers (FAST but not LEAN) at d=128 it drops OVERLAP and PINGPONG (the
 *             promoted sparse kernel's precise mode at d=128 runs without overlap).
 */
#ifndef DG_ATTN_SM90_LAB_CUH
#define DG_ATTN_SM90_LAB_CUH

#include "attn_sm90.cuh"

/* the ring's layout, and for the staged epilogues 16 fp32 rows of O for each consumer warp (128 rows
 * a CTA), then fullR and emptyR */
template <int D, int STAGES> struct dg_lab_sm90_cfg : dg_sm90_cfg<D, STAGES> {
	static constexpr uint32_t STG = 8 * 16 * D * 4;
	static constexpr size_t SMEM_STAGED = dg_sm90_cfg<D, STAGES>::SMEM + STG + 16;
};

/* The work items (attn_params.cuh dg_for_each_item), and the earlier non-persistent sparse walk
 * (SPARSE, not PERSIST: dev/kernels' sparse v1..v5): blockIdx.y = head, groups blockIdx.x,
 * +gridDim.x, ...; a group of more than BM queries is done in chunks of BM. */
template <bool SPARSE, int BM, bool PERSIST = false, typename F>
DG_DEV void dg_lab_for_each_item(const dg_attn_params &p, F &&f)
{
	if (!SPARSE || PERSIST) {
		dg_for_each_item<SPARSE, BM>(p, f);
		return;
	}
	const int h = blockIdx.y;
	const int32_t *goff = head_goff(p, h);
	const int64_t *soff = head_soff(p, h);
	for (int g = blockIdx.x; g < p.ngroups; g += gridDim.x) {
		const int q0 = __ldg(goff + g), gs = __ldg(goff + g + 1) - q0;
		if (gs <= p.small_max)
			continue;
		const long long s0 = __ldg(soff + g);
		const int nk = (int)(__ldg(soff + g + 1) - s0);
		for (int c0 = 0; c0 < gs; c0 += BM) {
			dg_item it = {h, q0 + c0, min(BM, gs - c0), s0, nk};
			f(it);
		}
	}
}

/* attn_tiles.cuh's load_tile_shfl with its copy passes unrolled by UNROLL (0: all, the shipped
 * loader; 4: the lean gather, whose producer fits 40 registers) */
template <int R, int D, int NT, int UNROLL = 0 /* every pass */>
DG_DEV void dg_lab_load_tile_shfl(uint32_t sdst, const bf16 *base, int idx, int nvalid, int tid)
{
	constexpr int CPR = D / 8, RPP = NT / CPR, RPW = 32 / CPR;
	static_assert(R == NT && (R / RPP) * RPW == 32, "one list entry per lane");
	const int c = tid % CPR, rin = tid / CPR, lane = tid & 31;
	auto pass = [&](int i) {
		const int r = i * RPP + rin;
		const int row = __shfl_sync(0xffffffffu, idx, i * RPW + lane / CPR);
		const bool ok = r < nvalid;
		cp_async16(sdst + swz<R>(r, c), base + (size_t)(ok ? row : 0) * D + c * 8, ok ? 16 : 0);
	};
	if constexpr (UNROLL == 0) {
#pragma unroll
		for (int i = 0; i < R / RPP; i++)
			pass(i);
	} else {
#pragma unroll UNROLL
		for (int i = 0; i < R / RPP; i++)
			pass(i);
	}
}

/* The sparse kernel's epilogue (dg_lab_sm90_body's EPI): write_rows from the registers, or
 * write_rows_staged (the residual read by the consumers, or prefetched by the producer) */
enum { DG_EPI_DIRECT, DG_EPI_STAGED, DG_EPI_PREFETCH };

/*
 * write_rows through shared memory (the sparse kernel's staged epilogues, dev/kernels' sparse v15 and
 * v17): the warp's 16 rows of O / l go to its 16 x D fp32 staging rows in stage (16-byte chunks
 * XOR-swizzled by row: no bank conflicts either way), then each row is written whole: lane c takes
 * chunk c (4 columns) of a row (two rows a pass at D = 64), so its output is one coalesced store.
 * The residual (fp32): RPRE, already in the staging rows (the producer's cp.async, item row r's chunk
 * c at r * D + 4 (c ^ (r & 7))), added in place; rows are myrow (lane r holds row r, -1 past the
 * item); otherwise read a whole row at a time, every read of the warp in flight before the first add,
 * rows loaded here. The same values as write_rows (fp32 O / l + fp32 residual, rounded once); the
 * retained mass as write_rows.
 */
template <int D, bool RPRE>
DG_DEV void write_rows_staged(const dg_attn_params &p, const dg_item &it, int rbase, int g, int t4,
			      const float (&o)[D / 2], float m0, float m1, float l0, float l1, float *stage, int myrow)
{
	constexpr int CPR = D / 4, RPP = 32 / CPR, PASSES = 16 / RPP; /* chunks a row, rows a pass, passes */
	const int lane = (threadIdx.x & 31);
	const float *res = head_residual<D>(p, it.h);
	l0 = quad_sum(l0);
	l1 = quad_sum(l1);
	if (!RPRE) {
		myrow = -1;
		if (lane < 16 && rbase + lane < it.qcount)
			myrow = __ldg(head_perm(p, it.h) + it.qpos + rbase + lane);
	}
#pragma unroll
	for (int half = 0; half < 2; half++) {
		const int r = g + 8 * half;
		const float l = half ? l1 : l0, inv = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
		for (int j = 0; j < D / 8; j++) {
			const int chunk = (2 * j + (t4 >> 1)) ^ (r & 7);
			float2 *at = reinterpret_cast<float2 *>(stage + r * D + 4 * chunk + 2 * (t4 & 1));
			float2 v = make_float2(o[4 * j + 2 * half] * inv, o[4 * j + 2 * half + 1] * inv);
			if (RPRE && res) {
				const float2 rv = *at;
				v.x += rv.x;
				v.y += rv.y;
			}
			*at = v;
		}
	}
	__syncwarp();
	const int c = lane % CPR, rsub = lane / CPR;
	int rows[PASSES];
	float4 rv[PASSES];
#pragma unroll
	for (int k = 0; k < PASSES; k++) {
		rows[k] = __shfl_sync(0xffffffffu, myrow, k * RPP + rsub);
		rv[k] = !RPRE && res && rows[k] >= 0
				? __ldg(reinterpret_cast<const float4 *>(res + (size_t)rows[k] * D) + c)
				: make_float4(0.f, 0.f, 0.f, 0.f);
	}
#pragma unroll
	for (int k = 0; k < PASSES; k++) {
		const int r = k * RPP + rsub, row = rows[k];
		if (row < 0)
			continue;
		float4 v = *reinterpret_cast<const float4 *>(stage + r * D + 4 * (c ^ (r & 7)));
		if (!RPRE)
			v = make_float4(v.x + rv[k].x, v.y + rv[k].y, v.z + rv[k].z, v.w + rv[k].w);
		const size_t oi = out_offset<D>(p, it.h, row) + 4 * c;
		if (p.o_f32)
			*reinterpret_cast<float4 *>(p.o_f32 + oi) = v;
		else
			*reinterpret_cast<uint2 *>(p.o_bf16 + oi) = make_uint2(pack_bf16(v.x, v.y), pack_bf16(v.z, v.w));
	}
	__syncwarp(); /* the staging rows are read before they are written again */
#pragma unroll
	for (int half = 0; half < 2; half++) {
		const int row = __shfl_sync(0xffffffffu, myrow, g + 8 * half);
		if (t4 == 0 && row >= 0 && p.mass && p.lse_ref) {
			const size_t ri = (size_t)it.h * p.n + row;
			p.mass[ri] = dg_mass(half ? l1 : l0, half ? m1 : m0, __ldg(p.lse_ref + ri));
		}
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
DG_DEV void dg_lab_sm90_body(const dg_attn_params &p, const void *tmk, const void *tmv,
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
	using C = dg_lab_sm90_cfg<D, STAGES>;
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
		dg_lab_for_each_item<SPARSE, BM, FAST>(p, [&](const dg_item &it) {
			[[maybe_unused]] int qrow = 0; /* SPARSE FAST: this thread's Q row (item row tile_lane_row(tid)) */
			const size_t hoff = (size_t)it.h * p.n * D, kvoff = (size_t)it.h * dg_kv_len(p) * D;
			const bf16 *kh = p.k + kvoff, *vh = p.v + kvoff;
			if constexpr (SPARSE && FAST) { /* one perm load per thread, rows by shuffle */
				const int myr = tile_lane_row<D, 128>(tid);
				const int qidx = myr < it.qcount ? __ldg(head_perm(p, it.h) + it.qpos + myr) : 0;
				qrow = qidx;
				mbar_wait(emptyQ, (iq & 1) ^ 1);
				dg_lab_load_tile_shfl<BM, D, 128, SHFL_UNROLL>(sQ, p.q + hoff, qidx, it.qcount, tid);
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
						dg_lab_load_tile_shfl<BN, D, 128, SHFL_UNROLL>(dst, src, rows, nv, tid);
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
					dg_lab_load_tile_shfl<BN, D, 128, SHFL_UNROLL>(sK + s * C::KVB, kh, idx, nv, tid);
					mbar_arrive_cpasync(FULLK(s));
					pb.lap(DG_PROBE_COPY);
					mbar_wait(EMPTYV(s), ph ^ 1);
					pb.lap(DG_PROBE_EMPTY);
					dg_lab_load_tile_shfl<BN, D, 128, SHFL_UNROLL>(sV + s * C::KVB, vh, idx, nv, tid);
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
		dg_lab_for_each_item<SPARSE, BM, FAST>(p, [&](const dg_item &it) {
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
__global__ void __launch_bounds__(384, 1) dg_lab_sm90_kernel(const __grid_constant__ dg_attn_params p)
{
	dg_lab_sm90_body<D, STAGES, OVERLAP_, PINGPONG_, SPARSE, FAST, PRECISE, RES, DG_GATHER_SHFL>(p, nullptr, nullptr);
}

#endif
