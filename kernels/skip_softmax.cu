/*
 * skip_softmax.cu: Skip-Softmax (BLASST, arXiv 2512.12087; src/policy/peers.h skipsoftmax) on the
 * device: FlashAttention's loop over 128-key tiles in ascending key order, per 128-query tile, that
 * skips a tile's exp and P.V when every row of the query tile has its tile maximum more than
 * `threshold` (natural-log units, of the scaled scores) below its running maximum.
 *   dg_skip_gaps         the running-max gaps (heads, G, G), G = ceil(n/128): the CPU twin's
 *                        dg_peer_block_scores of score=runmax (min over the tile's rows of running max
 *                        before the tile - the row's tile max; -inf for key tile 0), from bf16 Q, K
 *                        with fp32 accumulation; the GPU backend thresholds them on the host
 *                        (dg_peer_skip_threshold, budget=matched included) and attends the kept tiles
 *                        through the sparse kernel, as the other block peers;
 *   dg_skip_softmax_fwd  the fused forward at one threshold: O (heads, n, d) fp32, the LSE (heads, n)
 *                        of the computed tiles, and which tiles were computed (heads, G, G) bytes.
 *                        Skipped tiles never raise the running maximum (their maxima are below it),
 *                        so O equals sparse attention over the kept tiles' keys: the CPU twin's.
 * The kernel: kernels/attn_common.cuh's pieces (swizzled cp.async tile loads, ldmatrix, mma.sync
 * m16n8k16 bf16 -> fp32, softmax_step, pack_p, the dense epilogue write_rows) in a FlashAttention-2
 * style body: 8 warps of 16 query rows, K and V double-buffered. QK^T is computed for every tile
 * (the skip is decided on its scores) and V is loaded for every tile (a kernel tuned for speed would
 * load V after the decision); the skip vote is one __syncthreads_and per tile. Modes as dg_flash_fwd
 * (P to bf16, or precise hi + lo). Check: tests/kernels/gpu_kernels.cu (against the CPU twin's gaps and an
 * fp64 sparse attention over the tiles the kernel computed).
 */
#include "dsgap_kernels.h"
#include "attn_common.cuh"

namespace {

constexpr int SKIP_TILE = 128, SKIP_THREADS = 256;

/* wait until at most N committed cp.async groups of this thread are pending */
template <int N> DG_DEV void skip_cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

DG_DEV void skip_ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		     : "r"(addr));
}

template <int D, bool PV> struct skip_cfg {
	static constexpr uint32_t QB = SKIP_TILE * D * 2, KVB = SKIP_TILE * D * 2;
	static constexpr size_t SMEM = 1024 + QB + (PV ? 4 : 2) * (size_t)KVB;
};

/*
 * One CTA per (128-query tile, head). PV = false: the gaps only (no softmax, no V); PV = true: the
 * skipping forward. thr2: the threshold in log2 units (threshold * log2 e); gap (heads, G, G) nats;
 * computed (heads, G, G) or NULL.
 */
template <int D, bool PV, bool PRECISE>
__global__ void __launch_bounds__(SKIP_THREADS)
dg_skip_kernel(const __grid_constant__ dg_attn_params p, float thr2, float *gap, uint8_t *computed)
{
	using C = skip_cfg<D, PV>;
	constexpr int BM = SKIP_TILE, BN = SKIP_TILE, NT = SKIP_THREADS;
	extern __shared__ uint8_t smem_raw[];
	__shared__ float wgap[NT / 32];
	const uint32_t sQ = (smem_u32(smem_raw) + 1023u) & ~1023u;
	const uint32_t sK = sQ + C::QB, sV = sK + 2 * C::KVB;
	const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
	const float sl2 = p.scale_log2;
	const int h = blockIdx.y, n = p.n, m0 = blockIdx.x * BM, qcount = min(BM, n - m0);
	const int G = (n + BN - 1) / BN;
	const size_t hoff = (size_t)h * n * D, tiles = ((size_t)h * G + blockIdx.x) * G;
	const bf16 *kh = p.k + hoff, *vh = p.v + hoff;
	/* rows g and g + 8 of the warp's 16: inside the query tile? (rows past n do not vote) */
	const bool in0 = w * 16 + g < qcount, in1 = w * 16 + g + 8 < qcount;

	load_tile<BM, D, NT, false>(sQ, p.q + hoff, nullptr, m0, qcount, tid);
	load_tile<BN, D, NT, false>(sK, kh, nullptr, 0, min(BN, n), tid);
	if constexpr (PV)
		load_tile<BN, D, NT, false>(sV, vh, nullptr, 0, min(BN, n), tid);
	cp_async_commit();

	float o[PV ? D / 2 : 2];
#pragma unroll
	for (int i = 0; i < (PV ? D / 2 : 2); i++)
		o[i] = 0.f;
	float m0r = -INFINITY, m1r = -INFINITY, l0 = 0.f, l1 = 0.f; /* running maxima (log2 units), sums */

	for (int t = 0; t < G; t++) {
		if (t + 1 < G) {
			const int b = (t + 1) & 1, nv = min(BN, n - (t + 1) * BN);
			load_tile<BN, D, NT, false>(sK + b * C::KVB, kh, nullptr, (t + 1) * BN, nv, tid);
			if constexpr (PV)
				load_tile<BN, D, NT, false>(sV + b * C::KVB, vh, nullptr, (t + 1) * BN, nv, tid);
		}
		cp_async_commit();
		skip_cp_wait<1>();
		__syncthreads();
		const uint32_t k_s = sK + (t & 1) * C::KVB, v_s = sV + (t & 1) * C::KVB;
		float s[BN / 2];
#pragma unroll
		for (int i = 0; i < BN / 2; i++)
			s[i] = 0.f;
#pragma unroll
		for (int kk = 0; kk < D / 16; kk++) {
			uint32_t qf[4];
			ldmatrix_x4(qf, sQ + swz<BM>(w * 16 + (lane & 15), kk * 2 + (lane >> 4)));
#pragma unroll
			for (int np = 0; np < BN / 16; np++) {
				uint32_t b[4];
				ldmatrix_x4(b, k_s + swz<BN>(np * 16 + (lane & 7) + ((lane >> 4) << 3), kk * 2 + ((lane >> 3) & 1)));
				mma_16816(&s[8 * np], qf, b[0], b[1]);
				mma_16816(&s[8 * np + 4], qf, b[2], b[3]);
			}
		}
		const int nv = min(BN, n - t * BN);
		if (nv < BN)
			mask_cols<BN / 2>(s, nv, t4);
		/* the rows' maxima in this tile, log2 units (softmax_step's arithmetic) */
		float x0 = -INFINITY, x1 = -INFINITY;
#pragma unroll
		for (int j = 0; j < BN / 8; j++) {
			x0 = fmaxf(x0, fmaxf(s[4 * j], s[4 * j + 1]));
			x1 = fmaxf(x1, fmaxf(s[4 * j + 2], s[4 * j + 3]));
		}
		x0 = quad_max(x0) * sl2;
		x1 = quad_max(x1) * sl2;
		if constexpr (!PV) {
			float gg = INFINITY;
			if (in0)
				gg = fminf(gg, t ? m0r - x0 : -INFINITY);
			if (in1)
				gg = fminf(gg, t ? m1r - x1 : -INFINITY);
#pragma unroll
			for (int off = 4; off < 32; off <<= 1)
				gg = fminf(gg, __shfl_xor_sync(0xffffffffu, gg, off));
			if (lane == 0)
				wgap[w] = gg;
			m0r = fmaxf(m0r, x0);
			m1r = fmaxf(m1r, x1);
			__syncthreads();
			if (tid == 0) {
				float mn = wgap[0];
#pragma unroll
				for (int i = 1; i < NT / 32; i++)
					mn = fminf(mn, wgap[i]);
				gap[tiles + t] = mn * 0.6931471805599453f;
			}
		} else {
			/* skipped iff every row in the tile: tile max < running max - threshold (never at the
			 * first tile: the running max is -inf) */
			const bool sk = (!in0 || x0 < m0r - thr2) && (!in1 || x1 < m1r - thr2);
			const bool skip = __syncthreads_and(sk);
			if (computed && tid == 0)
				computed[tiles + t] = !skip;
			if (!skip) {
				float a0, a1;
				softmax_step<BN / 2>(s, m0r, m1r, l0, l1, a0, a1, sl2);
				rescale<D / 2>(o, a0, a1);
				uint32_t pr[BN / 4], pl[BN / 4]; /* P hi, lo (PRECISE) */
				pack_p<PRECISE>(pr, pl, s);
#pragma unroll
				for (int kk = 0; kk < BN / 16; kk++) {
					const uint32_t a[4] = {pr[4 * kk], pr[4 * kk + 1], pr[4 * kk + 2], pr[4 * kk + 3]};
#pragma unroll
					for (int dp = 0; dp < D / 16; dp++) {
						uint32_t b[4];
						skip_ldmatrix_x4_trans(b, v_s + swz<BN>(kk * 16 + (lane & 15), dp * 2 + (lane >> 4)));
						mma_16816(&o[8 * dp], a, b[0], b[1]);
						mma_16816(&o[8 * dp + 4], a, b[2], b[3]);
						if constexpr (PRECISE) {
							const uint32_t al[4] = {pl[4 * kk], pl[4 * kk + 1], pl[4 * kk + 2],
										pl[4 * kk + 3]};
							mma_16816(&o[8 * dp], al, b[0], b[1]);
							mma_16816(&o[8 * dp + 4], al, b[2], b[3]);
						}
					}
				}
			}
		}
		__syncthreads(); /* the stage is read before the next prefetch overwrites it */
	}
	skip_cp_wait<0>();
	if constexpr (PV) {
		const dg_item it = {h, m0, qcount, 0, n};
		write_rows<D, false>(p, it, w * 16, g, t4, o, m0r, m1r, l0, l1);
	}
}

template <int D, bool PV, bool PR>
int skip_run(const dg_attn_params &p, float thr2, float *gap, uint8_t *computed, cudaStream_t st)
{
	const dim3 grid((p.n + SKIP_TILE - 1) / SKIP_TILE, p.heads);
	return dg_launch_args(PV ? "skip_softmax_fwd" : "skip_gaps", dg_skip_kernel<D, PV, PR>, grid, SKIP_THREADS,
			      skip_cfg<D, PV>::SMEM, st, p, thr2, gap, computed);
}

} // namespace

extern "C" int dg_skip_gaps(const uint16_t *q, const uint16_t *k, int heads, int n, int d, float *gap,
			    dg_stream stream)
{
	if (dg_check_qkv("skip_gaps", q, k, k, heads, n, d))
		return -1;
	if (!gap) {
		fprintf(stderr, "skip_gaps: gap must not be NULL\n");
		return -1;
	}
	dg_attn_params p = dg_attn_params{};
	p.q = reinterpret_cast<const bf16 *>(q);
	p.k = p.v = reinterpret_cast<const bf16 *>(k);
	p.heads = heads;
	p.n = n;
	p.scale_log2 = (float)(1.4426950408889634 / sqrt((double)d));
	cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
	return d == 128 ? skip_run<128, false, false>(p, 0.f, gap, nullptr, st)
			: skip_run<64, false, false>(p, 0.f, gap, nullptr, st);
}

extern "C" int dg_skip_softmax_fwd(const uint16_t *q, const uint16_t *k, const uint16_t *v, int heads, int n, int d,
				   float threshold, float *o, float *lse, uint8_t *computed, int precise, dg_stream stream)
{
	if (!(threshold >= 0.f)) {
		fprintf(stderr, "skip_softmax_fwd: threshold %g (>= 0, inf allowed)\n", (double)threshold);
		return -1;
	}
	dg_attn_params p;
	if (dg_flash_params(p, q, k, v, heads, n, n, d, o, NULL, lse, false))
		return -1;
	const float thr2 = threshold * 1.4426950408889634f;
	cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
	if (precise)
		return d == 128 ? skip_run<128, true, true>(p, thr2, nullptr, computed, st)
				: skip_run<64, true, true>(p, thr2, nullptr, computed, st);
	return d == 128 ? skip_run<128, true, false>(p, thr2, nullptr, computed, st)
			: skip_run<64, true, false>(p, thr2, nullptr, computed, st);
}
