/*
 * peer_scores.cu: the block peers' scores and the expansion of their block selections (docs/spec.md
 * §3, src/policy/peers.h), GPU twins of peers.c's dg_peer_block_scores and of its key lists, bit for
 * bit: every value is made by the same fp32/fp64 operations in the same order as the CPU twin
 * (explicitly rounded intrinsics, so that nothing is contracted or reassociated):
 *   sparge    key mean = fp32 sum of the 128-key blocks' fp32 sums over n; block means of Q and of
 *             K - mean (pooled_common.cuh block_mean); self-similarities in double (token norms
 *             in component order, sums of unit vectors in token order, |u|^2 in component order);
 *             logits (pooled_common.cuh); K blocks below theta -INF; softmax_det; low
 *             self-similarity +INF;
 *   antidiag  the reduced logits (R, R), R = ceil(n/S), of the antidiagonal gathers (queries of a
 *             stride reversed, zero past n) as one fmaf chain over (t, component); softmax_det per
 *             reduced row; each 128 x 128 block the fp32 sum over its reduced rows, then columns.
 *             fast: the reduced logits instead by one tensor-core GEMM of the gathers (bf16 copies,
 *             cuBLASLt, fp32 accumulation: XAttention's own arithmetic), not bit for bit the twin's
 *             fmaf chain (its order of additions is the GEMM's), the rest as above;
 *   pooled    (pisa) block means of Q and K over bs (any size), logits.
 * softmax_det: a warp per row; the max; e = peer_expf(x - max) (peers.c det_expf, operation for
 * operation); lane l sums e_j for j = l, l+32, .. in double, the 32 lane sums added in lane order;
 * x = (float)(e / sum).
 * svg2: the logits of the kept query and key centroids, the softmax weighted by the key clusters'
 * sizes (peers.c svg2). dg_peer_window: DiTFastAttn's window lists, from (n, text, w) alone.
 * Build: part of dsgapkernels; test: tests/kernels/gpu_meta.c (--peers), tests/replay/gpu_replay.sh.
 */
#include "dsgap_kernels.h"
#include "pooled_common.cuh"

#include <cublasLt.h>
#include <mutex>

namespace {

/* exp(x) as peers.c det_expf: 2^k p(r), x = k ln2 + r */
DGM_DEV float peer_expf(float x)
{
	if (!(x >= -87.0f))
		return 0.0f;
	const float kf = rintf(__fmul_rn(x, 1.44269504f));
	float r = __fmaf_rn(-kf, 0.693145752f, x);
	r = __fmaf_rn(-kf, 1.42860677e-06f, r);
	float p = 1.38888889e-03f;
	p = __fmaf_rn(p, r, 8.33333377e-03f);
	p = __fmaf_rn(p, r, 4.16666679e-02f);
	p = __fmaf_rn(p, r, 1.66666672e-01f);
	p = __fmaf_rn(p, r, 0.5f);
	p = __fmaf_rn(p, r, 1.0f);
	p = __fmaf_rn(p, r, 1.0f);
	return ldexpf(p, (int)kf);
}

/* softmax of each of rows rows of S (rows, cols; row stride ld) in place, a warp per row (see the
 * top); each e_j weighted by w[j] (cols) where w is given (svg2's cluster sizes). Each pass reads its lane's
 * entries SOFTMAX_U at a time (loads in flight together; stores would otherwise order every load
 * after the last store), and the third recomputes e_j from the logit instead of reading it back
 * (the same operations: the same bits), so the row is read three times and written once. */
constexpr int SOFTMAX_U = 8;
__global__ void softmax_det(float *S, int rows, int cols, int ld, const double *w)
{
	const int row = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5), lane = threadIdx.x & 31;
	if (row >= rows)
		return;
	float *x = S + (size_t)row * ld;
	float v[SOFTMAX_U];
	/* the lane's entries j0, j0 + 32, .. (SOFTMAX_U of them) into v, -INF past cols */
	auto load = [&](int j0) {
#pragma unroll
		for (int u = 0; u < SOFTMAX_U; u++)
			v[u] = j0 + 32 * u < cols ? x[j0 + 32 * u] : -INFINITY;
	};
	float mx = -INFINITY;
	for (int j0 = lane; j0 < cols; j0 += 32 * SOFTMAX_U) {
		load(j0);
#pragma unroll
		for (int u = 0; u < SOFTMAX_U; u++)
			mx = fmaxf(mx, v[u]);
	}
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
	if (mx == -INFINITY) {
		for (int j = lane; j < cols; j += 32)
			x[j] = 0.f;
		return;
	}
	/* f(j, e_j weighted) over the lane's entries, SOFTMAX_U loads at a time */
	auto each = [&](auto f) {
		for (int j0 = lane; j0 < cols; j0 += 32 * SOFTMAX_U) {
			load(j0);
#pragma unroll
			for (int u = 0; u < SOFTMAX_U; u++) {
				const int j = j0 + 32 * u;
				if (j < cols) {
					const float e = peer_expf(__fsub_rn(v[u], mx));
					f(j, w ? __dmul_rn((double)e, w[j]) : (double)e);
				}
			}
		}
	};
	double part = 0;
	each([&](int, double e) { part = __dadd_rn(part, e); });
	double sum = 0;
	for (int l = 0; l < 32; l++)
		sum = __dadd_rn(sum, __shfl_sync(0xffffffffu, part, l));
	each([&](int j, double e) { x[j] = (float)__ddiv_rn(e, sum); });
}

static void launch_softmax_det(float *S, int rows, int cols, int ld, const double *w, cudaStream_t st)
{
	softmax_det<<<(int)(((size_t)rows * 32 + 255) / 256), 256, 0, st>>>(S, rows, cols, ld, w);
}

/* ---- sparge ---- */

/* bsum (nb, D): fp32 sums over raster blocks of 128 keys, in key order; grid nb, D threads */
template <int D>
__global__ void block_sums(const uint16_t *k, int n, float *bsum)
{
	const int blk = blockIdx.x, c = threadIdx.x, a = blk * 128, b = min(a + 128, n);
	float s = 0.f;
	for (int j = a; j < b; j++)
		s = __fadd_rn(s, bf2f(k[(size_t)j * D + c]));
	bsum[(size_t)blk * D + c] = s;
}

/* mean (D) = the block sums added in block order, over n; one CTA of D threads */
template <int D>
__global__ void key_mean(const float *bsum, int nb, int n, float *mean)
{
	const int c = threadIdx.x;
	float s = 0.f;
	for (int b = 0; b < nb; b++)
		s = __fadd_rn(s, bsum[(size_t)b * D + c]);
	mean[c] = __fdiv_rn(s, (float)n);
}

/* sim (nb): mean pairwise cosine similarity of each raster block of bs <= 128 rows of x - sub (sub (D)
 * or NULL), in double: |sum_j x_j / |x_j||^2 / size^2; grid nb, D threads */
template <int D>
__global__ void self_sim(const uint16_t *x, int n, int bs, const float *sub, float *sim)
{
	__shared__ double nrm[128], u[D];
	const int blk = blockIdx.x, c = threadIdx.x, a = blk * bs, b = min(a + bs, n);
	for (int j = a + c; j < b; j += D) {
		double s = 0;
		for (int t = 0; t < D; t++) {
			float v = bf2f(x[(size_t)j * D + t]);
			v = sub ? __fsub_rn(v, sub[t]) : v;
			s = __dadd_rn(s, __dmul_rn((double)v, (double)v));
		}
		nrm[j - a] = s > 0 ? __ddiv_rn(1.0, __dsqrt_rn(s)) : 0.0;
	}
	__syncthreads();
	const float m = sub ? sub[c] : 0.f;
	double acc = 0;
	for (int j = a; j < b; j++) {
		float v = bf2f(x[(size_t)j * D + c]);
		v = sub ? __fsub_rn(v, m) : v;
		acc = __dadd_rn(acc, __dmul_rn((double)v, nrm[j - a]));
	}
	u[c] = acc;
	__syncthreads();
	if (c == 0) {
		double sq = 0;
		for (int t = 0; t < D; t++)
			sq = __dadd_rn(sq, __dmul_rn(u[t], u[t]));
		const double cnt = b - a;
		sim[blk] = (float)__ddiv_rn(sq, cnt * cnt);
	}
}

/* S (G, G): force = 0: key blocks below theta to -INF; force = 1: rows or columns below theta to +INF */
__global__ void sparge_mark(float *S, int G, const float *qsim, const float *ksim, double theta, int force)
{
	const int r = blockIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= G)
		return;
	float *s = S + (size_t)r * G + c;
	if (!force && (double)ksim[c] < theta)
		*s = -INFINITY;
	if (force && ((double)qsim[r] < theta || (double)ksim[c] < theta))
		*s = INFINITY;
}

/* ---- svg2 ---- */

/* row r of centroids c (.., D) is centroid keep[r] */
template <int D>
struct kept_rows {
	const float *c;
	const int32_t *keep;
	__device__ float operator()(int r, int e) const { return c[(size_t)keep[r] * D + e]; }
};

/* ---- antidiag ---- */

/* reduced row r of the queries: q[rS+S-1], .., q[rS] (zero past n); of the keys: k[rS], .., k[rS+S-1] */
template <int D, bool REV>
struct stride_rows {
	const uint16_t *x;
	int n, S;
	__device__ float operator()(int r, int kk) const
	{
		const int t = kk / D, e = kk % D, i = REV ? r * S + S - 1 - t : r * S + t;
		return i < n ? bf2f(x[(size_t)i * D + e]) : 0.f;
	}
};

/* xr (R, S*D) bf16: reduced row r of x as stride_rows<D, REV> reads it (zero past n); grid R, 128 threads */
template <int D, bool REV>
__global__ void stride_gather(const uint16_t *x, int n, int S, uint16_t *xr)
{
	const int r = blockIdx.x;
	for (int kk = threadIdx.x; kk < S * D; kk += blockDim.x) {
		const int t = kk / D, e = kk % D, i = REV ? r * S + S - 1 - t : r * S + t;
		xr[(size_t)r * S * D + kk] = i < n ? x[(size_t)i * D + e] : (uint16_t)0;
	}
}

/* L (R, R) fp32 row-major = scale * Qr Kr^T (Qr, Kr (R, K) bf16 row-major): one cuBLASLt GEMM, bf16
 * products exact in its fp32 accumulator (column-major: L^T = op(A) B with op(A) = T on Kr as (K, R)).
 * The caller pads R to a multiple of 32 with zero rows: cuBLASLt's fast Hopper kernels want D's rows a
 * multiple of 4 (its heuristic says so; at R = 4095, n = 32760 stride 8, the GEMM took ~0.33 ms for
 * 34 GFLOP, 2026-12-06).
 * The handle, descriptors and algorithm of the last shape are kept (a heuristic query costs more than
 * the GEMM): made under a lock, which the enqueue holds too, so that no other thread's new shape
 * destroys them meanwhile; never destroyed (they live as long as the CUDA context). */
static int gemm_logits(const uint16_t *qr, const uint16_t *kr, int R, int K, float scale, float *L, cudaStream_t st)
{
	static std::mutex mu;
	static struct {
		cublasLtHandle_t h;
		int R, K;
		cublasLtMatmulDesc_t op;
		cublasLtMatrixLayout_t a, b, c;
		cublasLtMatmulAlgo_t algo;
	} plan;
	std::lock_guard<std::mutex> lock(mu);
	bool ok = plan.h || cublasLtCreate(&plan.h) == CUBLAS_STATUS_SUCCESS;
	if (ok && !(plan.op && plan.R == R && plan.K == K)) {
		cublasLtMatmulDescDestroy(plan.op);
		cublasLtMatrixLayoutDestroy(plan.a);
		cublasLtMatrixLayoutDestroy(plan.b);
		cublasLtMatrixLayoutDestroy(plan.c);
		plan.op = NULL, plan.a = plan.b = plan.c = NULL;
		const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
		cublasLtMatmulPreference_t pref = NULL;
		cublasLtMatmulHeuristicResult_t res;
		int nres = 0;
		ok = cublasLtMatmulDescCreate(&plan.op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS &&
		     cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) == CUBLAS_STATUS_SUCCESS &&
		     cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) == CUBLAS_STATUS_SUCCESS &&
		     cublasLtMatrixLayoutCreate(&plan.a, CUDA_R_16BF, K, R, K) == CUBLAS_STATUS_SUCCESS &&
		     cublasLtMatrixLayoutCreate(&plan.b, CUDA_R_16BF, K, R, K) == CUBLAS_STATUS_SUCCESS &&
		     cublasLtMatrixLayoutCreate(&plan.c, CUDA_R_32F, R, R, R) == CUBLAS_STATUS_SUCCESS &&
		     cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS &&
		     cublasLtMatmulAlgoGetHeuristic(plan.h, plan.op, plan.a, plan.b, plan.c, plan.c, pref, 1, &res, &nres) ==
			     CUBLAS_STATUS_SUCCESS && nres > 0;
		cublasLtMatmulPreferenceDestroy(pref);
		if (ok)
			plan.R = R, plan.K = K, plan.algo = res.algo;
		else
			plan.R = plan.K = 0;
	}
	const float beta = 0.f;
	ok = ok && cublasLtMatmul(plan.h, plan.op, &scale, kr, plan.a, qr, plan.b, &beta, L, plan.c, L, plan.c, &plan.algo,
				  NULL, 0, st) == CUBLAS_STATUS_SUCCESS;
	DGM_ARG(ok, "xattention scores: the cuBLASLt GEMM of the reduced logits (%d x %d over %d) failed", R, R, K);
	return 0;
}

/* scores (G, G): block (rb, cb) = sum over the reduced rows r with rS/128 = rb, in order, of the
 * reduced columns c with cS/128 = cb, in order, of L (R, R; row stride ld); grid (ceil(G/128), G),
 * 128 threads */
__global__ void antidiag_blocks(const float *L, int R, int ld, int S, int G, float *scores)
{
	const int rb = blockIdx.y, cb = blockIdx.x * blockDim.x + threadIdx.x;
	if (cb >= G)
		return;
	const int r0 = (rb * 128 + S - 1) / S, r1 = min(R, ((rb + 1) * 128 + S - 1) / S);
	const int c0 = (cb * 128 + S - 1) / S, c1 = min(R, ((cb + 1) * 128 + S - 1) / S);
	float s = 0.f;
	for (int r = r0; r < r1; r++)
		for (int c = c0; c < c1; c++)
			s = __fadd_rn(s, L[(size_t)r * ld + c]);
	scores[(size_t)rb * G + cb] = s;
}

template <int D>
int run(const uint16_t *q, const uint16_t *k, int n, int kind, int bs, int S, double theta, int fast, float *scores,
	cudaStream_t st)
{
	const int G = (n + bs - 1) / bs;
	if (kind == DG_PEER_ANTIDIAG) {
		/* L (R, R) in a buffer of ld x ld; the fast mode's GEMM fills all of it from ld - R zero rows */
		const int R = (n + S - 1) / S, ld = fast ? (R + 31) / 32 * 32 : R;
		float *L = NULL;
		DGM_CUDA(cudaMallocAsync((void **)&L, (size_t)ld * ld * 4, st));
		const float scale = 1.0f / (sqrtf((float)D) * S);
		if (fast) {
			const size_t width = (size_t)S * D; /* bf16 entries of a reduced row */
			uint16_t *qr = NULL, *kr = NULL;
			DGM_CUDA(cudaMallocAsync((void **)&qr, (size_t)2 * ld * width * 2, st));
			kr = qr + (size_t)ld * width;
			DGM_CUDA(cudaMemsetAsync(qr + (size_t)R * width, 0, (size_t)(ld - R) * width * 2, st));
			DGM_CUDA(cudaMemsetAsync(kr + (size_t)R * width, 0, (size_t)(ld - R) * width * 2, st));
			stride_gather<D, true><<<R, 128, 0, st>>>(q, n, S, qr);
			stride_gather<D, false><<<R, 128, 0, st>>>(k, n, S, kr);
			DGM_LAUNCHED();
			const int rc = gemm_logits(qr, kr, ld, S * D, scale, L, st);
			DGM_CUDA(cudaFreeAsync(qr, st));
			if (rc) {
				cudaFreeAsync(L, st);
				return rc;
			}
		} else {
			pooled::launch_logits(stride_rows<D, true>{ q, n, S }, R, stride_rows<D, false>{ k, n, S }, R, S * D,
					      scale, NULL, L, st);
		}
		launch_softmax_det(L, R, R, ld, NULL, st);
		antidiag_blocks<<<dim3((G + 127) / 128, G), 128, 0, st>>>(L, R, ld, S, G, scores);
		DGM_LAUNCHED();
		DGM_CUDA(cudaFreeAsync(L, st));
		return 0;
	}
	const float scale = 1.0f / sqrtf((float)D);
	float *buf = NULL;
	const size_t a_m = dgm_align((size_t)G * D * 4), a_v = dgm_align((size_t)G * 4), a_d = dgm_align(D * 4);
	DGM_CUDA(cudaMallocAsync((void **)&buf, 3 * a_m + 2 * a_v + a_d, st));
	float *qbar = buf, *kbar = (float *)((char *)buf + a_m), *bsum = (float *)((char *)buf + 2 * a_m);
	float *qsim = (float *)((char *)buf + 3 * a_m), *ksim = (float *)((char *)buf + 3 * a_m + a_v);
	float *mean = (float *)((char *)buf + 3 * a_m + 2 * a_v);
	const float *sub = NULL;
	if (kind == DG_PEER_SPARGE) { /* smooth_k */
		block_sums<D><<<G, D, 0, st>>>(k, n, bsum);
		key_mean<D><<<1, D, 0, st>>>(bsum, G, n, mean);
		sub = mean;
	}
	pooled::block_mean<D><<<G, D, 0, st>>>(q, n, bs, NULL, qbar, NULL);
	pooled::block_mean<D><<<G, D, 0, st>>>(k, n, bs, sub, kbar, NULL);
	pooled::launch_logits(pooled::rows_f32<D>{ qbar }, G, pooled::rows_f32<D>{ kbar }, G, D, scale, NULL, scores, st);
	if (kind == DG_PEER_SPARGE) {
		self_sim<D><<<G, D, 0, st>>>(q, n, bs, NULL, qsim);
		self_sim<D><<<G, D, 0, st>>>(k, n, bs, sub, ksim);
		const dim3 grid((G + 127) / 128, G);
		sparge_mark<<<grid, 128, 0, st>>>(scores, G, qsim, ksim, theta, 0);
		launch_softmax_det(scores, G, G, G, NULL, st);
		sparge_mark<<<grid, 128, 0, st>>>(scores, G, qsim, ksim, theta, 1);
	}
	DGM_LAUNCHED();
	DGM_CUDA(cudaFreeAsync(buf, st));
	return 0;
}

/* ---- expansion ---- */

/* bits (ngroups, W) of group g: every key where row[g] < 0, else the keys < forced, the sinks and the
 * keys of the parts take[row[g]] keeps (key j's part: part[j], or j / bs); cnt[g] their number.
 * Grid ngroups, 256 threads. */
__global__ void expand_bits(const uint8_t *take, int nb, int bs, const int32_t *part, const int32_t *pmap,
			    const int32_t *row, int n, int slo, int shi, int forced, uint32_t *bits, int64_t *cnt)
{
	__shared__ int wsum[8];
	const int g = blockIdx.x, W = (n + 31) / 32, r = row[g];
	int c = 0;
	for (int w = threadIdx.x; w < W; w += 256) {
		uint32_t word = 0;
		for (int b = 0; b < 32; b++) {
			const int j = w * 32 + b;
			if (j >= n)
				break;
			const bool in = r < 0 || j < forced || (j >= slo && j < shi) ||
					take[(size_t)r * nb + (part ? (pmap ? pmap[part[j]] : part[j]) : j / bs)];
			word |= (uint32_t)in << b;
		}
		bits[(size_t)g * W + w] = word;
		c += __popc(word);
	}
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		c += __shfl_xor_sync(0xffffffffu, c, o);
	if ((threadIdx.x & 31) == 0)
		wsum[threadIdx.x >> 5] = c;
	__syncthreads();
	if (threadIdx.x == 0) {
		int64_t t = 0;
		for (int i = 0; i < 8; i++)
			t += wsum[i];
		cnt[g] = t;
	}
}

/* soff (ngroups+1) = the prefix sums of cnt; one thread */
__global__ void prefix_offsets(const int64_t *cnt, int ngroups, int64_t *soff)
{
	int64_t at = 0;
	soff[0] = 0;
	for (int g = 0; g < ngroups; g++)
		soff[g + 1] = at += cnt[g];
}

/* DiTFastAttn's window lists: row i's keys (every key for i < text, else [0, text) and the keys
 * j >= text with |i - j| <= w); count (cnt set) or write at soff[i] (sidx set) */
__global__ void window_rows(int n, int text, int w, int64_t *cnt, const int64_t *soff, int32_t *sidx)
{
	const int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	const int lo = i < text ? n : max(text, i - w), hi = i < text ? n - 1 : min(n - 1, i + w);
	if (cnt) {
		cnt[i] = (i < text ? n : text) + (int64_t)max(0, hi - lo + 1);
		return;
	}
	int32_t *o = sidx + soff[i];
	const int head = i < text ? n : text;
	for (int j = 0; j < head; j++)
		*o++ = j;
	for (int j = lo; j <= hi; j++)
		*o++ = j;
}

} // namespace

extern "C" int dg_peer_window(int n, int text, int w, int64_t *soff, int32_t *sidx, dg_stream stream)
{
	DGM_ARG(n >= 1 && text >= 0 && text <= n && w >= 0, "peer window: n %d, text %d, half-width %d", n, text, w);
	DGM_ARG(soff && sidx, "peer window: NULL argument");
	cudaStream_t st = (cudaStream_t)stream;
	int64_t *cnt = NULL;
	DGM_CUDA(cudaMallocAsync((void **)&cnt, (size_t)n * 8, st));
	window_rows<<<(n + 255) / 256, 256, 0, st>>>(n, text, w, cnt, NULL, NULL);
	prefix_offsets<<<1, 1, 0, st>>>(cnt, n, soff);
	window_rows<<<(n + 255) / 256, 256, 0, st>>>(n, text, w, NULL, soff, sidx);
	DGM_LAUNCHED();
	DGM_CUDA(cudaFreeAsync(cnt, st));
	return 0;
}

extern "C" int dg_peer_scores(const uint16_t *q, const uint16_t *k, int n, int d, int kind, int bs, int stride,
			      double theta, int fast, float *scores, dg_stream stream)
{
	DGM_ARG(d == 64 || d == 128, "peer scores: head_dim %d (64 or 128 supported)", d);
	DGM_ARG(kind == DG_PEER_SPARGE || kind == DG_PEER_ANTIDIAG || kind == DG_PEER_POOLED, "peer scores: kind %d",
		kind);
	DGM_ARG(n >= 1 && bs >= 1 && (kind == DG_PEER_POOLED || bs == 128),
		"peer scores: n %d, block %d (128 for sparge and antidiag)", n, bs);
	DGM_ARG(kind != DG_PEER_ANTIDIAG || (stride >= 1 && stride <= 128), "peer scores: stride %d (1 .. 128)", stride);
	DGM_ARG(q && k && scores, "peer scores: NULL argument");
	cudaStream_t st = (cudaStream_t)stream;
	return d == 64 ? run<64>(q, k, n, kind, bs, stride, theta, fast, scores, st)
		       : run<128>(q, k, n, kind, bs, stride, theta, fast, scores, st);
}

extern "C" int dg_peer_svg2_scores(const float *cq, const int32_t *qkeep, int G, const float *ck,
				   const int32_t *kkeep, int P, const double *psize, int d, float *scores, dg_stream stream)
{
	DGM_ARG(d == 64 || d == 128, "svg2 scores: head_dim %d (64 or 128 supported)", d);
	DGM_ARG(G >= 1 && P >= 1, "svg2 scores: %d query clusters, %d key clusters", G, P);
	DGM_ARG(cq && qkeep && ck && kkeep && psize && scores, "svg2 scores: NULL argument");
	cudaStream_t st = (cudaStream_t)stream;
	const float scale = 1.0f / sqrtf((float)d);
	if (d == 64)
		pooled::launch_logits(kept_rows<64>{ cq, qkeep }, G, kept_rows<64>{ ck, kkeep }, P, 64, scale, NULL, scores, st);
	else
		pooled::launch_logits(kept_rows<128>{ cq, qkeep }, G, kept_rows<128>{ ck, kkeep }, P, 128, scale, NULL, scores,
				      st);
	launch_softmax_det(scores, G, P, P, psize, st);
	DGM_LAUNCHED();
	return 0;
}

extern "C" int dg_peer_expand(const uint8_t *take, int nparts, int bs, const int32_t *part, const int32_t *pmap,
			      const int32_t *row, int ngroups, int n, int sink_lo, int sink_hi, int forced, uint32_t *bits, int64_t *soff,
			      dg_stream stream)
{
	DGM_ARG(n >= 1 && ngroups >= 1 && nparts >= 1 && (part || (bs >= 1 && nparts == (n + bs - 1) / bs)),
		"peer expand: n %d, %d groups, %d parts (blocks of %d)", n, ngroups, nparts, bs);
	DGM_ARG(take && row && bits && soff, "peer expand: NULL argument");
	cudaStream_t st = (cudaStream_t)stream;
	const int slo = max(0, min(sink_lo, n)), shi = max(0, min(sink_hi, n));
	int64_t *cnt = NULL;
	DGM_CUDA(cudaMallocAsync((void **)&cnt, (size_t)ngroups * 8, st));
	expand_bits<<<ngroups, 256, 0, st>>>(take, nparts, bs, part, pmap, row, n, slo, shi, forced, bits, cnt);
	prefix_offsets<<<1, 1, 0, st>>>(cnt, ngroups, soff);
	DGM_LAUNCHED();
	DGM_CUDA(cudaFreeAsync(cnt, st));
	return 0;
}
