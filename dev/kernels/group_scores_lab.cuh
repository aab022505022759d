/*
 * group_scores_lab.cuh: the kernel lab's exact group scores kernel (dev/kernels only):
 * kernels/group_scores.cuh's group_scores_kernel and group_scores_sm90 with every switch the numbered
 * versions need (group_scores_v.cu: MINB for v1, v2; the others for v3..v10); kernels/ ships the
 * promoted variants alone (group_scores_kernel_lab<D, 2> is kernels/' group_scores_kernel<D>, and
 * group_scores_sm90_lab<D, 4, true, true, 2> its group_scores_sm90<D>: the same code).
 * Contract: as kernels/group_scores.cuh's launch and launch_sm90 (asynchronous on st; 0, or -1 after one line).
 */
#ifndef DG_GROUP_SCORES_LAB_CUH
#define DG_GROUP_SCORES_LAB_CUH

#include "group_scores.cuh"

namespace {

/* group_scores_kernel_lab: kernels/' group_scores_kernel with MINB (mma.sync): one CTA per (group,
 * run of 128-key tiles), 8 warps of 16
 * query rows; the probability tile's column sums over the warp (colsum_scatter), then across warps
 * in shared memory; token and block scores from the same pass. MINB: CTAs per SM (__launch_bounds__) */
template <int D, int MINB>
__global__ void __launch_bounds__(QK_THREADS, MINB) group_scores_kernel_lab(GSParams p)
{
	extern __shared__ __align__(128) uint8_t smem[];
	constexpr int KT = QK_BN * D * 2; /* bytes of one K tile */
	float *red = (float *)(smem + 2 * KT); /* (8, 128) */
	float *bsum = red + 8 * QK_BN;        /* (4) */
	const uint32_t kb0 = smem_u32(smem), kb1 = kb0 + KT;

	const int g = blockIdx.x;
	const int t0 = blockIdx.y * p.tiles_per_cta, t1 = min(p.ntiles, t0 + p.tiles_per_cta);
	if (t0 >= t1)
		return;
	const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gq = lane >> 2, tq = lane & 3;
	const int q0 = __ldg(p.goff + g), cnt = __ldg(p.goff + g + 1) - q0;
	const float inv = 1.0f / (float)cnt;
	const int nchunks = max(1, (cnt + QK_BM - 1) / QK_BM);
	const int nb = p.ntiles;

	uint32_t qa[D / 16][4];
	float nAh = -INFINITY, nAl = 0.f, nBh = -INFINITY, nBl = 0.f;
	auto load_chunk = [&](int c) {
		const int ra = c * QK_BM + warp * 16 + gq, rb = ra + 8;
		const uint16_t *pa = NULL, *pb = NULL;
		nAh = nBh = -INFINITY;
		nAl = nBl = 0.f;
		if (ra < cnt) {
			const int qi = __ldg(p.perm + q0 + ra);
			pa = p.q + (size_t)qi * D;
			nl_split(__ldg(p.lse + qi), nAh, nAl);
		}
		if (rb < cnt) {
			const int qi = __ldg(p.perm + q0 + rb);
			pb = p.q + (size_t)qi * D;
			nl_split(__ldg(p.lse + qi), nBh, nBl);
		}
		load_q_frags<D>(qa, pa, pb);
	};
	load_chunk(0);

	load_k_tile<D>(kb0, p.k, p.n, t0 * QK_BN);
	cp_async_commit();

	for (int t = t0; t < t1; t++) {
		const int buf = (t - t0) & 1;
		cp_async_wait_all();
		__syncthreads();
		if (t + 1 < t1) {
			load_k_tile<D>(buf ? kb0 : kb1, p.k, p.n, (t + 1) * QK_BN);
			cp_async_commit();
		}
		const int key0 = t * QK_BN;
		const int nvalid = min(QK_BN, p.n - key0);
		float cs[4] = {0.f, 0.f, 0.f, 0.f};
		for (int c = 0; c < nchunks; c++) {
			if (nchunks > 1)
				load_chunk(c);
			float acc[QK_BN / 8][4];
			qk_mma<D>(acc, qa, buf ? kb1 : kb0);
			float v[32];
			pair_probs(v, &acc[0][0], p, nAh, nAl, nBh, nBl, nvalid, tq);
			colsum_scatter(v, lane);
#pragma unroll
			for (int i = 0; i < 4; i++)
				cs[i] += v[i];
		}
#pragma unroll
		for (int i = 0; i < 4; i++)
			red[warp * QK_BN + colsum_col(lane, i)] = cs[i];
		__syncthreads();
		if (tid < QK_BN) {
			float s = 0.f;
#pragma unroll
			for (int w = 0; w < 8; w++)
				s += red[w * QK_BN + tid];
			s *= inv;
			const int key = key0 + tid;
			if (p.scores && key < p.n)
				p.scores[(size_t)g * p.n + key] = s;
			if (p.block_scores) {
				float bs = key < p.n ? s : 0.f;
#pragma unroll
				for (int o = 16; o > 0; o >>= 1)
					bs += __shfl_xor_sync(0xffffffffu, bs, o);
				if (lane == 0)
					bsum[warp] = bs;
				asm volatile("bar.sync 1, 128;\n" ::: "memory");
				if (tid == 0)
					p.block_scores[(size_t)g * nb + t] = (bsum[0] + bsum[1]) + (bsum[2] + bsum[3]);
			}
		}
	}
}

template <int D, int MINB>
int launch_lab(const GSParams &p, cudaStream_t st)
{
	const size_t smem = 2 * QK_BN * D * 2 + (8 * QK_BN + 4) * sizeof(float);
	if (dgm_dyn_smem((const void *)group_scores_kernel_lab<D, MINB>, smem))
		DGM_ARG(0, "exact group scores: cannot get %zu bytes of shared memory", smem);
	dim3 grid(p.ngroups, (p.ntiles + p.tiles_per_cta - 1) / p.tiles_per_cta);
	group_scores_kernel_lab<D, MINB><<<grid, QK_THREADS, smem, st>>>(p);
	DGM_LAUNCHED();
	return 0;
}

/* 2^x on the FMA pipe, for the exponentials the MUFU does not take (PX): j = rint(x) by the 1.5 2^23
 * shift, f = x - j in [-0.5, 0.5], 2^f by its Taylor polynomial of degree 7 (remainder under 2^-27
 * there; Horner's roundings about 2^-23), 2^j added to the exponent; x < -125 gives 0 (ex2.approx.ftz
 * flushes below 2^-126) */
DGM_DEV float poly_ex2(float x)
{
	const float xc = fmaxf(x, -127.f), t = __fadd_rn(xc, 12582912.f), j = __fsub_rn(t, 12582912.f);
	const float f = __fsub_rn(xc, j);
	float q = 1.525273380405984e-05f;
	q = fmaf(q, f, 1.5403530393381608e-04f);
	q = fmaf(q, f, 1.3333558146428443e-03f);
	q = fmaf(q, f, 9.618129107628477e-03f);
	q = fmaf(q, f, 5.550410866482158e-02f);
	q = fmaf(q, f, 2.402265069591007e-01f);
	q = fmaf(q, f, 6.931471805599453e-01f);
	q = fmaf(q, f, 1.0f);
	const unsigned e = ((unsigned)__float_as_int(t) - 0x4B400000u) << 23;
	return x < -125.f ? 0.f : __int_as_float((int)((unsigned)__float_as_int(q) + e));
}

/*
 * group_scores_sm90_lab (sm_90a): S^T = K Q^T on wgmma, so that the sum over the group's queries is a row sum in the
 * accumulator (each thread adds its 32 columns, then 2 quad shuffles) and no warp waits for another.
 * One CTA = 3 warpgroups, as the attention kernels of attn_sm90.cuh: WG0 (producer) copies the
 * group's 128-query chunk (gathered through perm) once and the run's K tiles into a STAGES-deep ring
 * (cp.async, mbarriers); WG1 and WG2 (consumers) take 64 keys of each tile each (M = 64 keys,
 * N = 128 queries), hold the chunk's 32 per-column -LSE terms in registers, and write their keys'
 * scores directly; the two warpgroups never synchronise, so one's exponentials may run under the
 * other's wgmma.
 * PINGPONG: the two consumer warpgroups take turns to issue their wgmma (named barriers, FA3's
 * ping-pong): without it they start each tile together on the same K tile, both wait for the
 * tensor cores, then both exponentiate while the tensor cores idle; in turns, one's exponentials
 * (the issue-bound part: ~9 instructions per probability) run under the other's wgmma.
 * PX (dev/kernels' v7, v8; FAST only): the probabilities of every PX-th column block j (j % PX == PX - 1: a
 * quarter or an eighth of them) take poly_ex2 on the FMA pipe instead of the MUFU's ex2 (FlashAttention-4's
 * split), which with the tensor cores bounds the exponentials' turn.
 * FAST: the attention kernels' arithmetic, p = ex2.approx.ftz(fma(s, c, -LSE log2(e))) with c and the
 * column term one fp32 value each (3 instructions per probability with the row sum's add); without
 * it prob_of's hi + lo terms and the accurate exp2f (about 9). The error grows from one rounding of
 * t to roundings of |s c| and |LSE log2(e)| too (tests/kernels/gpu_meta.c's error model); probabilities
 * under 2^-126 flush to 0.
 * NG: groups a CTA (1, or 2 with FAST). With 2, the producer copies chunk c of both groups (Q of 256
 * queries) and each consumer runs two wgmma turns and their exponentials per K tile, one group each:
 * every K tile copied from L2 serves twice the queries (v5 at 0.69 ms a head moved 2.1 GB of K a head,
 * about 3 TB/s, and was bound by neither the MUFU nor the tensor cores: docs/history.md, "Kernel versions").
 * OVL (NG 2 only; dev/kernels' v9, v10): each consumer holds two accumulators and issues both
 * groups' wgmma chains on a K tile in one turn, taking group 0's exponentials while group 1's chain
 * runs (the attention kernels' intra-warpgroup overlap); both groups' chains run for every chunk (an
 * absent group's are zeros and write nothing). The same arithmetic in the same order: its scores equal NG 2's bit for bit.
 * Groups of more than 128 queries: the chunks run one after the other, accumulating in the token
 * scores (so this kernel needs them: block-only calls go to group_scores_kernel); block scores come
 * from the token scores by block_sums. With NG 2 the CTA runs the larger chunk count of its two groups;
 * a group without chunk c gets zero rows and skips its turns (both consumers alike).
 */
template <int D, int STAGES, bool PINGPONG, bool FAST, int NG = 1, int PX = 0, bool OVL = false>
__global__ void __launch_bounds__(384, 1) group_scores_sm90_lab(const __grid_constant__ GSParams p)
{
	static_assert(PX == 0 || FAST, "exponentials on the FMA pipe: FAST only");
	static_assert(NG == 1 || (NG == 2 && FAST), "two groups a CTA: FAST only (the hi + lo terms would not fit)");
	static_assert(!OVL || (NG == 2 && PX == 0), "the overlapped turns: two groups a CTA, exponentials on the MUFU");
	using C = dg_sm90_cfg<D, STAGES>;
	extern __shared__ uint8_t smem_raw[];
	uint8_t *base = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
	const uint32_t sQ = smem_u32(base), sK = sQ + NG * C::QB, bar = sK + STAGES * C::KVB;
	const uint32_t fullQ = bar, emptyQ = bar + 8;
#define FULLK(s) (bar + 16 + 8 * (s))
#define EMPTYK(s) (bar + 16 + 8 * (STAGES + (s)))
	const int t0 = blockIdx.y * p.tiles_per_cta, t1 = min(p.ntiles, t0 + p.tiles_per_cta);
	if (t0 >= t1)
		return;
	const int tid = threadIdx.x, wg = tid >> 7;
	/* the CTA's groups g0 + x (x < NG; past ngroups: none, nch 0), each in nch[x] chunks of 128 queries;
	 * chunk c of every group shares the K tiles (the CTA runs max nch chunks) */
	const int g0 = blockIdx.x * NG;
	int q0[NG], cnt[NG], nch[NG], nchunks = 0;
#pragma unroll
	for (int x = 0; x < NG; x++) {
		const bool has = g0 + x < p.ngroups;
		q0[x] = has ? __ldg(p.goff + g0 + x) : 0;
		cnt[x] = has ? __ldg(p.goff + g0 + x + 1) - q0[x] : 0;
		nch[x] = has ? max(1, (cnt[x] + QK_BM - 1) / QK_BM) : 0;
		nchunks = max(nchunks, nch[x]);
	}
	if (tid == 0) {
		mbar_init(fullQ, 128);
		mbar_init(emptyQ, 8);
		for (int s = 0; s < STAGES; s++) {
			mbar_init(FULLK(s), 128);
			mbar_init(EMPTYK(s), 8);
		}
		mbar_fence_init();
	}
	__syncthreads();

	if (wg == 0) {
		/* ------------------------------------------------------------------ producer */
		reg_dealloc<40>();
		int kvit = 0;
		for (int c = 0; c < nchunks; c++) {
			mbar_wait(emptyQ, (c & 1) ^ 1);
#pragma unroll
			for (int x = 0; x < NG; x++) /* a group without chunk c: zeros (its gemm is skipped) */
				load_tile<QK_BM, D, 128, true>(sQ + x * C::QB, (const bf16 *)p.q, p.perm + q0[x] + c * QK_BM, 0,
							       c < nch[x] ? min(QK_BM, cnt[x] - c * QK_BM) : 0, tid);
			mbar_arrive_cpasync(fullQ);
			for (int t = t0; t < t1; t++, kvit++) {
				const int st = kvit % STAGES, ph = (kvit / STAGES) & 1;
				mbar_wait(EMPTYK(st), ph ^ 1);
				load_tile<QK_BN, D, 128, false>(sK + st * C::KVB, (const bf16 *)p.k, nullptr, t * QK_BN,
								min(QK_BN, p.n - t * QK_BN), tid);
				mbar_arrive_cpasync(FULLK(st));
			}
		}
		asm volatile("cp.async.wait_all;\n" ::: "memory"); /* copies never committed to groups */
		return;
	}
	/* ---------------------------------------------------------------------- consumers */
	reg_alloc<232>();
	const int cwg = wg - 1, lane = tid & 31, wq = (tid >> 5) & 3, tq = lane & 3;
	const int krow = cwg * 64 + wq * 16 + (lane >> 2); /* this thread's keys in a tile: krow, krow + 8 */
	if (PINGPONG && cwg == 0) /* the first turn is WG1's */
		named_arrive(1, 256);
	int kvit = 0;
	if constexpr (OVL) {
		/* two accumulators: each K tile's two wgmma chains (group 0, group 1) issued in one turn, group
		 * 0's exponentials under group 1's chain; nothing in flight at the loop's back edge (else ptxas
		 * serialises the wgmmas: C7514) */
		for (int c = 0; c < nchunks; c++) {
			float nh[2][32];
#pragma unroll
			for (int x = 0; x < 2; x++)
#pragma unroll
				for (int i = 0; i < 32; i++) {
					const int r = c * QK_BM + 8 * (i >> 1) + 2 * tq + (i & 1);
					nh[x][i] = c < nch[x] && r < cnt[x]
							   ? (float)(-(double)__ldg(p.lse + __ldg(p.perm + q0[x] + r)) * 1.4426950408889634)
							   : -INFINITY;
				}
			mbar_wait(fullQ, c & 1);
			/* group x's probabilities of this thread's two keys of tile t, summed over its queries */
			auto take = [&](const float (&s)[64], int t, int x) {
				float r0 = 0.f, r1 = 0.f;
#pragma unroll
				for (int i = 0; i < 32; i++) {
					const int j = i >> 1, e = i & 1;
					r0 += ex2(fmaf(s[4 * j + e], p.chi, nh[x][i]));
					r1 += ex2(fmaf(s[4 * j + 2 + e], p.chi, nh[x][i]));
				}
				put_key_sums(r0, r1, p, g0 + x, c, nch[x], cnt[x], t, krow, tq, c < nch[x]);
			};
			float sa[64], sb[64];
			for (int t = t0; t < t1; t++, kvit++) {
				const int st = kvit % STAGES;
				mbar_wait(FULLK(st), (kvit / STAGES) & 1);
				fence_proxy_async();
				if (PINGPONG)
					named_sync(1 + cwg, 256);
				wg_fence();
				qk_gemm<D>(sa, sK + st * C::KVB + cwg * 64 * 128, sQ);
				wg_commit();
				qk_gemm<D>(sb, sK + st * C::KVB + cwg * 64 * 128, sQ + C::QB);
				wg_commit();
				if (PINGPONG)
					named_arrive(2 - cwg, 256);
				wg_wait<1>();
				reg_fence(sa);
				take(sa, t, 0);
				wg_wait<0>();
				reg_fence(sb);
				if (lane == 0) {
					mbar_arrive(EMPTYK(st));
					if (t == t1 - 1)
						mbar_arrive(emptyQ);
				}
				take(sb, t, 1);
			}
		}
	} else {
		for (int c = 0; c < nchunks; c++) {
			/* -LSE log2(e) of group x's query at column 8j + 2tq + e, hi + lo (FAST: hi alone) */
			float nh[NG][32], nl[NG][FAST ? 1 : 32];
	#pragma unroll
			for (int x = 0; x < NG; x++)
	#pragma unroll
				for (int j = 0; j < 16; j++)
	#pragma unroll
					for (int e = 0; e < 2; e++) {
						const int r = c * QK_BM + 8 * j + 2 * tq + e;
						nh[x][2 * j + e] = -INFINITY;
						if (!FAST)
							nl[x][FAST ? 0 : 2 * j + e] = 0.f;
						if (c < nch[x] && r < cnt[x]) {
							const float lse = __ldg(p.lse + __ldg(p.perm + q0[x] + r));
							if (FAST)
								nh[x][2 * j + e] = (float)(-(double)lse * 1.4426950408889634);
							else
								nl_split(lse, nh[x][2 * j + e], nl[x][FAST ? 0 : 2 * j + e]);
						}
					}
			const int xlast = NG == 2 && c < nch[NG - 1] ? NG - 1 : 0; /* the tile's last gemm */
			mbar_wait(fullQ, c & 1);
			for (int t = t0; t < t1; t++, kvit++) {
				const int st = kvit % STAGES;
				mbar_wait(FULLK(st), (kvit / STAGES) & 1);
				fence_proxy_async();
	#pragma unroll
				for (int x = 0; x < NG; x++) {
					if (c >= nch[x]) /* the same for both warpgroups: their turns stay paired */
						continue;
					float s[64];
					if (PINGPONG)
						named_sync(1 + cwg, 256);
					wg_fence();
					qk_gemm<D>(s, sK + st * C::KVB + cwg * 64 * 128, sQ + x * C::QB); /* (64 keys, 128 queries) */
					wg_commit();
					if (PINGPONG)
						named_arrive(2 - cwg, 256);
					wg_wait<0>();
					reg_fence(s);
					if (lane == 0 && x == xlast) {
						mbar_arrive(EMPTYK(st));
						if (t == t1 - 1)
							mbar_arrive(emptyQ);
					}
					float r0 = 0.f, r1 = 0.f;
	#pragma unroll
					for (int j = 0; j < 16; j++)
	#pragma unroll
						for (int e = 0; e < 2; e++) {
							if (FAST && PX > 0 && j % (PX > 0 ? PX : 1) == PX - 1) {
								r0 += poly_ex2(fmaf(s[4 * j + e], p.chi, nh[x][2 * j + e]));
								r1 += poly_ex2(fmaf(s[4 * j + 2 + e], p.chi, nh[x][2 * j + e]));
							} else if (FAST) {
								r0 += ex2(fmaf(s[4 * j + e], p.chi, nh[x][2 * j + e]));
								r1 += ex2(fmaf(s[4 * j + 2 + e], p.chi, nh[x][2 * j + e]));
							} else {
								r0 += prob_of(s[4 * j + e], p.chi, p.clo, nh[x][2 * j + e],
									      nl[x][FAST ? 0 : 2 * j + e]);
								r1 += prob_of(s[4 * j + 2 + e], p.chi, p.clo, nh[x][2 * j + e],
									      nl[x][FAST ? 0 : 2 * j + e]);
							}
						}
					put_key_sums(r0, r1, p, g0 + x, c, nch[x], cnt[x], t, krow, tq, true);
				}
			}
		}
	}
#undef FULLK
#undef EMPTYK
}

template <int D, int STAGES, bool PINGPONG, bool FAST, int NG = 1, int PX = 0, bool OVL = false>
int launch_sm90_lab(GSParams p, cudaStream_t st)
{
	using C = dg_sm90_cfg<D, STAGES>;
	const size_t smem = 1024 + NG * C::QB + STAGES * C::KVB + 8 * (2 + 2 * STAGES);
	if (dgm_dyn_smem((const void *)group_scores_sm90_lab<D, STAGES, PINGPONG, FAST, NG, PX, OVL>, smem))
		DGM_ARG(0, "exact group scores: cannot get %zu bytes of shared memory", smem);
	/* one CTA per SM at a time: runs of equal length, about 8 CTAs per SM in all */
	const int ctas = (p.ngroups + NG - 1) / NG;
	const long long want = 8LL * dgm_num_sms();
	int runs = (int)((want + ctas - 1) / ctas);
	runs = runs < 1 ? 1 : runs > p.ntiles ? p.ntiles : runs;
	p.tiles_per_cta = (p.ntiles + runs - 1) / runs;
	dim3 grid(ctas, (p.ntiles + p.tiles_per_cta - 1) / p.tiles_per_cta);
	group_scores_sm90_lab<D, STAGES, PINGPONG, FAST, NG, PX, OVL><<<grid, 384, smem, st>>>(p);
	DGM_LAUNCHED();
	if (p.block_scores) {
		const long long entries = (long long)p.ngroups * p.ntiles;
		block_sums<<<(unsigned)((entries * 32 + 255) / 256), 256, 0, st>>>(p.scores, p.n, p.ntiles, entries,
										  p.block_scores);
		DGM_LAUNCHED();
	}
	return 0;
}


} // namespace

#endif
