/*
 * group_scores.cuh: the exact group scores' kernels and their launches (not a public header), shared
 * by group_scores.cu (the promoted launcher, dg_exact_scores: group_scores_sm90<D>, and
 * group_scores_kernel<D> for block-only calls) and dev/kernels/group_scores_v.cu (the other numbered
 * versions, on group_scores_lab.cuh's copies of both kernels with the switches).
 *   s(G, j) = mean_{i in G} exp(scale q_i.k_j - LSE_i),  scale = 1/sqrt(d)
 * q, k (n, d) bf16; lse (n) fp32 natural log; scores (ngroups, n) and/or block_scores
 * (ngroups, ceil(n/128)) fp32. Launches are asynchronous on the given stream and return 0, or -1
 * after one line.
 */
#ifndef DG_GROUP_SCORES_CUH
#define DG_GROUP_SCORES_CUH

#include "meta_common.cuh"
#include "attn_sm90.cuh" /* dg_sm90_cfg, qk_gemm */

namespace {

struct GSParams {
	const uint16_t *q, *k;
	const float *lse;
	const int32_t *perm, *goff;
	int n, ngroups, ntiles, tiles_per_cta;
	float chi, clo; /* log2(e)/sqrt(d), hi + lo */
	float *scores, *block_scores;
};

/* v[2j + e] = p(row A) + p(row B) at the lane's column 8j + 2tq + e of a 16 x 128 score tile in the
 * accumulator layout (acc[4j + e] row A, acc[4j + 2 + e] row B); columns >= nvalid give 0 */
DGM_DEV void pair_probs(float (&v)[32], const float *acc, const GSParams &p, float nAh, float nAl, float nBh,
			float nBl, int nvalid, int tq)
{
#pragma unroll
	for (int j = 0; j < QK_BN / 8; j++)
#pragma unroll
		for (int e = 0; e < 2; e++) {
			float pa = prob_of(acc[4 * j + e], p.chi, p.clo, nAh, nAl);
			float pb = prob_of(acc[4 * j + 2 + e], p.chi, p.clo, nBh, nBl);
			if (nvalid < QK_BN && 8 * j + 2 * tq + e >= nvalid)
				pa = pb = 0.f;
			v[2 * j + e] = pa + pb;
		}
}

/* group_scores_kernel (mma.sync): one CTA per (group, run of 128-key tiles), 8 warps of 16
 * query rows; the probability tile's column sums over the warp (colsum_scatter), then across warps
 * in shared memory; token and block scores from the same pass. GS_MINB CTAs per SM (__launch_bounds__) */
enum { GS_MINB = 2 };
template <int D> __global__ void __launch_bounds__(QK_THREADS, GS_MINB) group_scores_kernel(GSParams p)
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

template <int D> int launch(const GSParams &p, cudaStream_t st)
{
	const size_t smem = 2 * QK_BN * D * 2 + (8 * QK_BN + 4) * sizeof(float);
	if (dgm_dyn_smem((const void *)group_scores_kernel<D>, smem))
		DGM_ARG(0, "exact group scores: cannot get %zu bytes of shared memory", smem);
	dim3 grid(p.ngroups, (p.ntiles + p.tiles_per_cta - 1) / p.tiles_per_cta);
	group_scores_kernel<D><<<grid, QK_THREADS, smem, st>>>(p);
	DGM_LAUNCHED();
	return 0;
}

/* a consumer thread's sums of its two keys' probabilities (keys t * 128 + krow and + 8) over its
 * query columns, reduced over the quad, into group g's token scores: chunk c > 0 adds to what the
 * earlier chunks wrote, the group's last chunk (c == nch - 1) scales by 1 / cnt; write false: none */
DGM_DEV void put_key_sums(float r0, float r1, const GSParams &p, int g, int c, int nch, int cnt, int t, int krow,
			  int tq, bool write)
{
	r0 += __shfl_xor_sync(0xffffffffu, r0, 1);
	r1 += __shfl_xor_sync(0xffffffffu, r1, 1);
	r0 += __shfl_xor_sync(0xffffffffu, r0, 2);
	r1 += __shfl_xor_sync(0xffffffffu, r1, 2);
	if (tq == 0 && write) {
		const int ka = t * QK_BN + krow, kb = ka + 8;
		const float scale = c == nch - 1 ? 1.0f / (float)cnt : 1.f;
		float *row = p.scores + (size_t)g * p.n;
		if (ka < p.n)
			row[ka] = (c > 0 ? row[ka] + r0 : r0) * scale;
		if (kb < p.n)
			row[kb] = (c > 0 ? row[kb] + r1 : r1) * scale;
	}
}

/*
 * group_scores_sm90 (sm_90a): S^T = K Q^T on wgmma, so that the sum over the group's queries is a row sum in the
 * accumulator (each thread adds its 32 columns, then 2 quad shuffles) and no warp waits for another.
 * One CTA = 3 warpgroups, as the attention kernels of attn_sm90.cuh: WG0 (producer) copies chunk c
 * (128 queries, gathered through perm) of each of the CTA's two groups and the run's K tiles into a
 * GS_STAGES-deep ring (cp.async, mbarriers); WG1 and WG2 (consumers) take 64 keys of each tile each
 * (M = 64 keys, N = 128 queries), hold the chunk's 32 per-column -LSE terms of each group in
 * registers, and write their keys' scores directly. Every K tile copied from L2 serves both groups
 * (half the K traffic of one group a CTA: docs/history.md, "Kernel versions").
 * Ping-pong: the two consumer warpgroups take turns to issue their wgmma (named barriers, FA3's
 * ping-pong), so one's exponentials (the issue-bound part) run under the other's wgmma.
 * Arithmetic: the attention kernels', p = ex2.approx.ftz(fma(s, c, -LSE log2(e))) with c and the
 * column term one fp32 value each (3 instructions per probability with the row sum's add); its error
 * model: tests/kernels/gpu_meta.c; probabilities under 2^-126 flush to 0.
 * Groups of more than 128 queries: the chunks run one after the other, accumulating in the token
 * scores (so this kernel needs them: block-only calls go to group_scores_kernel); block scores come
 * from the token scores by block_sums. The CTA runs the larger chunk count of its two groups; a group
 * without chunk c gets zero rows and skips its turns (both consumers alike).
 * The earlier versions' switches (stages, no ping-pong, prob_of's hi + lo arithmetic, one group a CTA,
 * exponentials on the FMA pipe, two accumulators): dev/kernels/group_scores_lab.cuh.
 */
enum { GS_STAGES = 4, GS_NG = 2 }; /* K stages; groups a CTA */
template <int D> __global__ void __launch_bounds__(384, 1) group_scores_sm90(const __grid_constant__ GSParams p)
{
	constexpr int STAGES = GS_STAGES, NG = GS_NG;
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
	if (cwg == 0) /* the first turn is WG1's */
		named_arrive(1, 256);
	int kvit = 0;
	for (int c = 0; c < nchunks; c++) {
		/* -LSE log2(e) of group x's query at column 8j + 2tq + e */
		float nh[NG][32];
#pragma unroll
		for (int x = 0; x < NG; x++)
#pragma unroll
			for (int j = 0; j < 16; j++)
#pragma unroll
				for (int e = 0; e < 2; e++) {
					const int r = c * QK_BM + 8 * j + 2 * tq + e;
					nh[x][2 * j + e] = -INFINITY;
					if (c < nch[x] && r < cnt[x]) {
						const float lse = __ldg(p.lse + __ldg(p.perm + q0[x] + r));
						nh[x][2 * j + e] = (float)(-(double)lse * 1.4426950408889634);
					}
				}
		const int xlast = c < nch[NG - 1] ? NG - 1 : 0; /* the tile's last gemm */
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
				named_sync(1 + cwg, 256);
				wg_fence();
				qk_gemm<D>(s, sK + st * C::KVB + cwg * 64 * 128, sQ + x * C::QB); /* (64 keys, 128 queries) */
				wg_commit();
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
						r0 += ex2(fmaf(s[4 * j + e], p.chi, nh[x][2 * j + e]));
						r1 += ex2(fmaf(s[4 * j + 2 + e], p.chi, nh[x][2 * j + e]));
					}
				put_key_sums(r0, r1, p, g0 + x, c, nch[x], cnt[x], t, krow, tq, true);
			}
		}
	}
#undef FULLK
#undef EMPTYK
}

/* block_scores (ngroups, nb) = sums of scores (ngroups, n) over runs of 128 keys: a warp per entry */
__global__ void block_sums(const float *scores, int n, int nb, long long entries, float *block_scores)
{
	const long long e = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	if (e >= entries)
		return;
	const int lane = threadIdx.x & 31, b = (int)(e % nb);
	const float *row = scores + (e / nb) * n;
	float s = 0.f;
	for (int j = b * QK_BN + lane; j < min(n, (b + 1) * QK_BN); j += 32)
		s += row[j];
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		s += __shfl_xor_sync(0xffffffffu, s, o);
	if (lane == 0)
		block_scores[e] = s;
}

template <int D> int launch_sm90(GSParams p, cudaStream_t st)
{
	constexpr int STAGES = GS_STAGES, NG = GS_NG;
	using C = dg_sm90_cfg<D, STAGES>;
	const size_t smem = 1024 + NG * C::QB + STAGES * C::KVB + 8 * (2 + 2 * STAGES);
	if (dgm_dyn_smem((const void *)group_scores_sm90<D>, smem))
		DGM_ARG(0, "exact group scores: cannot get %zu bytes of shared memory", smem);
	/* one CTA per SM at a time: runs of equal length, about 8 CTAs per SM in all */
	const int ctas = (p.ngroups + NG - 1) / NG;
	const long long want = 8LL * dgm_num_sms();
	int runs = (int)((want + ctas - 1) / ctas);
	runs = runs < 1 ? 1 : runs > p.ntiles ? p.ntiles : runs;
	p.tiles_per_cta = (p.ntiles + runs - 1) / runs;
	dim3 grid(ctas, (p.ntiles + p.tiles_per_cta - 1) / p.tiles_per_cta);
	group_scores_sm90<D><<<grid, 384, smem, st>>>(p);
	DGM_LAUNCHED();
	if (p.block_scores) {
		const long long entries = (long long)p.ngroups * p.ntiles;
		block_sums<<<(unsigned)((entries * 32 + 255) / 256), 256, 0, st>>>(p.scores, p.n, p.ntiles, entries,
										  p.block_scores);
		DGM_LAUNCHED();
	}
	return 0;
}

/* the launchers' argument checks and parameter block (dg_exact_scores; dev/kernels' versions): 0, or
 * -1 after one line */
static int gs_params(GSParams &p, const uint16_t *q, const uint16_t *k, const float *lse, int n, int d,
		     const int32_t *perm, const int32_t *goff, int ngroups, float *scores, float *block_scores)
{
	DGM_ARG(d == 64 || d == 128, "exact group scores: head_dim %d (64 or 128 supported)", d);
	DGM_ARG(n >= 1 && ngroups >= 1, "exact group scores: n %d, ngroups %d", n, ngroups);
	DGM_ARG(q && k && lse && perm && goff, "exact group scores: NULL input");
	DGM_ARG(scores || block_scores, "exact group scores: no output");
	DGM_ARG(((uintptr_t)q & 15) == 0 && ((uintptr_t)k & 15) == 0, "exact group scores: q, k not 16-byte aligned");
	p.q = q;
	p.k = k;
	p.lse = lse;
	p.perm = perm;
	p.goff = goff;
	p.n = n;
	p.ngroups = ngroups;
	p.ntiles = (n + QK_BN - 1) / QK_BN;
	dgm_scale_split(d, &p.chi, &p.clo);
	p.scores = scores;
	p.block_scores = block_scores;
	/* enough CTAs for ~8 per SM, each a run of tiles (the group's Q fragments are loaded once) */
	const long long units = (long long)ngroups * p.ntiles, want = 8LL * dgm_num_sms();
	long long per = (units + want - 1) / want;
	p.tiles_per_cta = (int)(per < 1 ? 1 : per > p.ntiles ? p.ntiles : per);
	return 0;
}

} // namespace

#endif
