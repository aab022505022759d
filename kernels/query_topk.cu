/*
 * query_topk.cu: the per-query oracle selection (group = query, kv = token, topk), GPU twin of
 * dg_scores_exact's probability rows fed to dg_select_row (src/policy/select.c): for every query i its K
 * most probable keys by p_ij = exp(scale q_i.k_j - LSE_i) (fp32), ties by the lower index, sinks
 * always kept and never ranked, written ascending, for several K at once.
 *
 * Streamed by blocks of R query rows: query_probs_kernel writes the (R, n) fp32 probabilities with
 * mma.sync tiles (the exact-scores tile engine of meta_common.cuh), then rows_topk_kernel (one CTA
 * of 1024 threads per row) stages the row's orderable keys in shared memory and radix-selects the
 * K-th best (11/11/10-bit passes; the first histogram shared by every K), resolves ties at the
 * threshold by index, and emits the kept indices in order with warp ballots.
 *
 *   q, k (n, d) bf16; lse (n) fp32; sidx[i] (n, dg_query_topk_row(n, K[i], sinks)) int32.
 * Build: part of dsgapkernels; test: tests/kernels/gpu_meta.c.
 */
#include "dsgap_kernels.h"
#define DGM_WANT_ROWS_TOPK
#include "meta_common.cuh"

namespace {

struct QPParams {
	const uint16_t *q, *k;
	const float *lse;
	int n, row0, rows, ntiles, tiles_per_cta;
	float chi, clo; /* log2(e)/sqrt(d), hi + lo */
	float *P;
	long long ldp;
};

template <int D>
__global__ void __launch_bounds__(QK_THREADS, 2) query_probs_kernel(QPParams p)
{
	extern __shared__ __align__(128) uint8_t smem[];
	constexpr int KT = QK_BN * D * 2;
	const uint32_t kb0 = smem_u32(smem), kb1 = kb0 + KT;
	const int t0 = blockIdx.y * p.tiles_per_cta, t1 = min(p.ntiles, t0 + p.tiles_per_cta);
	if (t0 >= t1)
		return;
	const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gq = lane >> 2, tq = lane & 3;
	const int rA = blockIdx.x * QK_BM + warp * 16 + gq, rB = rA + 8; /* rows local to the block */
	const bool okA = rA < p.rows, okB = rB < p.rows;
	float nAh = -INFINITY, nAl = 0.f, nBh = -INFINITY, nBl = 0.f;
	if (okA)
		nl_split(__ldg(p.lse + p.row0 + rA), nAh, nAl);
	if (okB)
		nl_split(__ldg(p.lse + p.row0 + rB), nBh, nBl);
	uint32_t qa[D / 16][4];
	load_q_frags<D>(qa, okA ? p.q + (size_t)(p.row0 + rA) * D : NULL, okB ? p.q + (size_t)(p.row0 + rB) * D : NULL);
	float *outA = p.P + (long long)rA * p.ldp, *outB = p.P + (long long)rB * p.ldp;
	const bool vec = (p.ldp & 1) == 0;

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
		float acc[QK_BN / 8][4];
		qk_mma<D>(acc, qa, buf ? kb1 : kb0);
		const int key0 = t * QK_BN;
#pragma unroll
		for (int j = 0; j < QK_BN / 8; j++) {
			const int col = key0 + 8 * j + 2 * tq;
			const float a0 = prob_of(acc[j][0], p.chi, p.clo, nAh, nAl);
			const float a1 = prob_of(acc[j][1], p.chi, p.clo, nAh, nAl);
			const float b0 = prob_of(acc[j][2], p.chi, p.clo, nBh, nBl);
			const float b1 = prob_of(acc[j][3], p.chi, p.clo, nBh, nBl);
			if (vec && col + 1 < p.n) {
				if (okA)
					*(float2 *)(outA + col) = make_float2(a0, a1);
				if (okB)
					*(float2 *)(outB + col) = make_float2(b0, b1);
			} else {
				if (okA && col < p.n)
					outA[col] = a0;
				if (okA && col + 1 < p.n)
					outA[col + 1] = a1;
				if (okB && col < p.n)
					outB[col] = b0;
				if (okB && col + 1 < p.n)
					outB[col + 1] = b1;
			}
		}
	}
}

template <int D>
int launch_probs(QPParams p, cudaStream_t st)
{
	const size_t smem = 2 * QK_BN * D * 2;
	if (dgm_dyn_smem((const void *)query_probs_kernel<D>, smem))
		DGM_ARG(0, "query probabilities: cannot get %zu bytes of shared memory", smem);
	const int rt = (p.rows + QK_BM - 1) / QK_BM;
	const long long units = (long long)rt * p.ntiles, want = 4LL * dgm_num_sms();
	long long per = (units + want - 1) / want;
	p.tiles_per_cta = (int)(per < 1 ? 1 : per > p.ntiles ? p.ntiles : per);
	dim3 grid(rt, (p.ntiles + p.tiles_per_cta - 1) / p.tiles_per_cta);
	query_probs_kernel<D><<<grid, QK_THREADS, smem, st>>>(p);
	DGM_LAUNCHED();
	return 0;
}

int probs(const uint16_t *q, const uint16_t *k, const float *lse, int n, int d, int row0, int rows, float *P,
	  long long ldp, cudaStream_t st)
{
	QPParams p;
	p.q = q;
	p.k = k;
	p.lse = lse;
	p.n = n;
	p.row0 = row0;
	p.rows = rows;
	p.ntiles = (n + QK_BN - 1) / QK_BN;
	p.tiles_per_cta = 1;
	dgm_scale_split(d, &p.chi, &p.clo);
	p.P = P;
	p.ldp = ldp;
	return d == 64 ? launch_probs<64>(p, st) : launch_probs<128>(p, st);
}

int check_common(const char *what, const uint16_t *q, const uint16_t *k, const float *lse, int n, int d)
{
	DGM_ARG(d == 64 || d == 128, "%s: head_dim %d (64 or 128 supported)", what, d);
	DGM_ARG(n >= 1, "%s: n %d", what, n);
	DGM_ARG(q && k && lse, "%s: NULL input", what);
	DGM_ARG(((uintptr_t)q & 15) == 0 && ((uintptr_t)k & 15) == 0, "%s: q, k not 16-byte aligned", what);
	return 0;
}

} // namespace

extern "C" int dg_query_topk_row(int n, int K, int sink_lo, int sink_hi)
{
	const int ns = dgm_clamp_sinks(n, &sink_lo, &sink_hi), m = n - ns;
	K = K < 0 ? 0 : K;
	return (K < m ? K : m) + ns;
}

extern "C" int dg_query_probs(const uint16_t *q, const uint16_t *k, const float *lse, int n, int d, int row0,
			      int rows, float *p, dg_stream stream)
{
	if (check_common("query probabilities", q, k, lse, n, d))
		return -1;
	DGM_ARG(p, "query probabilities: NULL output");
	DGM_ARG(row0 >= 0 && rows >= 0 && row0 + rows <= n, "query probabilities: rows %d..%d outside 0..%d", row0,
		row0 + rows, n);
	if (rows == 0)
		return 0;
	return probs(q, k, lse, n, d, row0, rows, p, n, (cudaStream_t)stream);
}

extern "C" int dg_query_topk(const uint16_t *q, const uint16_t *k, const float *lse, int n, int d, int nk,
			     const int *K, int sink_lo, int sink_hi, int32_t *const *sidx, dg_stream stream)
{
	if (check_common("query top-k", q, k, lse, n, d))
		return -1;
	DGM_ARG(nk >= 1 && nk <= DGM_MAXK, "query top-k: %d budgets (1..%d)", nk, DGM_MAXK);
	DGM_ARG(K && sidx, "query top-k: NULL budget list");
	TopkList L;
	L.nk = nk;
	for (int i = 0; i < nk; i++) {
		DGM_ARG(K[i] >= 0 && sidx[i], "query top-k: budget %d: K %d, output %p", i, K[i], (void *)sidx[i]);
		L.cnt[i] = dg_query_topk_row(n, K[i], sink_lo, sink_hi);
		L.K[i] = K[i];
		L.out[i] = sidx[i];
	}
	int slo = sink_lo, shi = sink_hi;
	dgm_clamp_sinks(n, &slo, &shi);
	cudaStream_t st = (cudaStream_t)stream;
	/* blocks of R rows: (R, ldp) fp32 scratch */
	const int R = n < 2048 ? n : 2048;
	const long long ldp = (n + 3) & ~3;
	float *P = NULL;
	DGM_CUDA(cudaMallocAsync((void **)&P, (size_t)R * ldp * sizeof(float), st));
	int rc = 0;
	for (int r0 = 0; r0 < n && !rc; r0 += R) {
		const int rows = n - r0 < R ? n - r0 : R;
		rc = probs(q, k, lse, n, d, r0, rows, P, ldp, st);
		if (!rc)
			rc = dgm_rows_topk(P, ldp, n, rows, r0, slo, shi, L, st);
	}
	DGM_CUDA(cudaFreeAsync(P, st));
	return rc;
}
