/*
 * group_scores.cu: exact group scores (DESIGN §3, score=exact), GPU twin of dg_scores_exact
 * (src/select.c):
 *   s(G, j) = mean_{i in G} exp(scale q_i.k_j - LSE_i),  scale = 1/sqrt(d)
 * for every group G of a grouping (perm, goff) and every key j, streamed: each CTA takes one group
 * and a run of 128-key tiles, computes the 128 x 128 probability tile with mma.sync (bf16 in, fp32
 * accumulate), and reduces it over the group's queries (warp reduce-scatter, then across warps).
 * Groups of more than 128 queries are done in chunks of 128. The block form (sums over runs of 128
 * keys = one tile, dg_scores_to_blocks) comes out of the same pass.
 *
 *   q, k (n, d) bf16; lse (n) fp32 natural log; scores (ngroups, n) and/or block_scores
 *   (ngroups, ceil(n/128)) fp32.
 * Build: part of dsgapkernels (kernels/CMakeLists.txt); test: tests/gpu_meta.c.
 */
#include "dsgap_kernels.h"
#include "meta_common.cuh"

namespace {

struct GSParams {
	const uint16_t *q, *k;
	const float *lse;
	const int32_t *perm, *goff;
	int n, ngroups, ntiles, tiles_per_cta;
	float chi, clo; /* log2(e)/sqrt(d), hi + lo */
	float *scores, *block_scores;
};

template <int D, int MINB>
__global__ void __launch_bounds__(QK_THREADS, MINB) group_scores_kernel(GSParams p)
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
	const bool b4 = lane & 16, b3 = lane & 8, b2 = lane & 4;
	const int obase = (b4 ? 16 : 0) + (b3 ? 8 : 0) + (b2 ? 4 : 0);

	for (int t = t0; t < t1; t++) {
		const int buf = (t - t0) & 1;
		cp_async_wait_all();
		__syncthreads();
		if (t + 1 < t1) {
			load_k_tile<D>(buf ? kb0 : kb1, p.k, p.n, (t + 1) * QK_BN);
			cp_async_commit();
		}
		const int key0 = t * QK_BN;
		const bool tail = key0 + QK_BN > p.n;
		float cs[4] = {0.f, 0.f, 0.f, 0.f};
		for (int c = 0; c < nchunks; c++) {
			if (nchunks > 1)
				load_chunk(c);
			float acc[QK_BN / 8][4];
			qk_mma<D>(acc, qa, buf ? kb1 : kb0);
			float v[32];
#pragma unroll
			for (int j = 0; j < QK_BN / 8; j++)
#pragma unroll
				for (int e = 0; e < 2; e++) {
					float pa = prob_of(acc[j][e], p.chi, p.clo, nAh, nAl);
					float pb = prob_of(acc[j][2 + e], p.chi, p.clo, nBh, nBl);
					if (tail && key0 + 8 * j + 2 * tq + e >= p.n)
						pa = pb = 0.f;
					v[2 * j + e] = pa + pb;
				}
			/* reduce-scatter over the 8 lanes that share tq (lane bits 4, 3, 2) */
#pragma unroll
			for (int i = 0; i < 16; i++) {
				const float send = b4 ? v[i] : v[i + 16], keep = b4 ? v[i + 16] : v[i];
				v[i] = keep + __shfl_xor_sync(0xffffffffu, send, 16);
			}
#pragma unroll
			for (int i = 0; i < 8; i++) {
				const float send = b3 ? v[i] : v[i + 8], keep = b3 ? v[i + 8] : v[i];
				v[i] = keep + __shfl_xor_sync(0xffffffffu, send, 8);
			}
#pragma unroll
			for (int i = 0; i < 4; i++) {
				const float send = b2 ? v[i] : v[i + 4], keep = b2 ? v[i + 4] : v[i];
				v[i] = keep + __shfl_xor_sync(0xffffffffu, send, 4);
			}
#pragma unroll
			for (int i = 0; i < 4; i++)
				cs[i] += v[i];
		}
#pragma unroll
		for (int i = 0; i < 4; i++) {
			const int o = obase + i, col = 8 * (o >> 1) + 2 * tq + (o & 1);
			red[warp * QK_BN + col] = cs[i];
		}
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
int launch(const GSParams &p, cudaStream_t st)
{
	const size_t smem = 2 * QK_BN * D * 2 + (8 * QK_BN + 4) * sizeof(float);
	if (dgm_dyn_smem((const void *)group_scores_kernel<D, MINB>, smem))
		DGM_ARG(0, "exact group scores: cannot get %zu bytes of shared memory", smem);
	dim3 grid(p.ngroups, (p.ntiles + p.tiles_per_cta - 1) / p.tiles_per_cta);
	group_scores_kernel<D, MINB><<<grid, QK_THREADS, smem, st>>>(p);
	DGM_LAUNCHED();
	return 0;
}

} // namespace

/* numbered versions (v0 = the promoted one) */
static const char *const names[] = {
	"v1: mma.sync 128x128 tiles, 8 warps, 1 CTA/SM (171 registers)",
	"v2: as v1 with 2 CTAs/SM (128 registers)",
};
#define NVERSIONS 2
#define PROMOTED 2

extern "C" const char *dg_exact_scores_name(int version)
{
	return version >= 1 && version <= NVERSIONS ? names[version - 1] : NULL;
}

extern "C" int dg_exact_scores_v(int version, const uint16_t *q, const uint16_t *k, const float *lse, int n,
				 int d, const int32_t *perm, const int32_t *goff, int ngroups, float *scores,
				 float *block_scores, dg_stream stream)
{
	DGM_ARG(d == 64 || d == 128, "exact group scores: head_dim %d (64 or 128 supported)", d);
	DGM_ARG(n >= 1 && ngroups >= 1, "exact group scores: n %d, ngroups %d", n, ngroups);
	DGM_ARG(q && k && lse && perm && goff, "exact group scores: NULL input");
	DGM_ARG(scores || block_scores, "exact group scores: no output");
	DGM_ARG(((uintptr_t)q & 15) == 0 && ((uintptr_t)k & 15) == 0, "exact group scores: q, k not 16-byte aligned");
	GSParams p;
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
	cudaStream_t st = (cudaStream_t)stream;
	if (version == 0)
		version = PROMOTED;
	DGM_ARG(version >= 1 && version <= NVERSIONS, "exact group scores: no version %d", version);
	if (version == 1)
		return d == 64 ? launch<64, 1>(p, st) : launch<128, 1>(p, st);
	return d == 64 ? launch<64, 2>(p, st) : launch<128, 2>(p, st);
}

extern "C" int dg_exact_scores(const uint16_t *q, const uint16_t *k, const float *lse, int n, int d,
			       const int32_t *perm, const int32_t *goff, int ngroups, float *scores,
			       float *block_scores, dg_stream stream)
{
	return dg_exact_scores_v(0, q, k, lse, n, d, perm, goff, ngroups, scores, block_scores, stream);
}
