/*
 * pooled_scores.cu: pooled group scores (docs/spec.md §3, score=pooled), GPU twin of dg_scores_pooled
 * (src/policy/select.c):
 *   kv=token  softmax_j(scale * qbar_G . k_j)                                   (ngroups, n)
 *   kv=block  softmax_b(scale * qbar_G . kbar_b + log|b|)                       (ngroups, ceil(n/128))
 * qbar_G = mean of the group's queries and kbar_b = mean of block b's keys, summed in fp32 in the
 * CPU's order (so bit-identical); logits by the fp32 SIMT tile product of pooled_common.cuh; the
 * softmax per row takes the max, sums exp(x - max) in double and divides in double, as the CPU does.
 * Build: part of dsgapkernels; test: tests/kernels/gpu_meta.c.
 */
#include "dsgap_kernels.h"
#include "pooled_common.cuh"

namespace {

/* qbar (G, D): thread c sums the group's queries in perm order, then divides by the count */
template <int D>
__global__ void group_mean(const uint16_t *q, const int32_t *perm, const int32_t *goff, float *qbar)
{
	const int g = blockIdx.x, c = threadIdx.x;
	const int a = goff[g], b = goff[g + 1];
	float s = 0.f;
	for (int p = a; p < b; p++)
		s += bf2f(q[(size_t)perm[p] * D + c]);
	qbar[(size_t)g * D + c] = s / (float)(b - a);
}

#define SM_NT 512
/* softmax of each row in place: max, sum of exp(x - max) in double, x = (float)(x / sum) */
__global__ void __launch_bounds__(SM_NT) softmax_rows(float *S, int cols)
{
	__shared__ float wm[SM_NT / 32];
	__shared__ double ws[SM_NT / 32];
	float *x = S + (size_t)blockIdx.x * cols;
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	float mx = -INFINITY;
	for (int j = tid; j < cols; j += SM_NT)
		mx = fmaxf(mx, x[j]);
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
	if (lane == 0)
		wm[warp] = mx;
	__syncthreads();
	mx = wm[0];
	for (int w = 1; w < SM_NT / 32; w++)
		mx = fmaxf(mx, wm[w]);
	double sum = 0;
	for (int j = tid; j < cols; j += SM_NT) {
		const float e = expf(x[j] - mx);
		x[j] = e;
		sum += e;
	}
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		sum += __shfl_xor_sync(0xffffffffu, sum, o);
	if (lane == 0)
		ws[warp] = sum;
	__syncthreads();
	sum = 0;
	for (int w = 0; w < SM_NT / 32; w++)
		sum += ws[w];
	for (int j = tid; j < cols; j += SM_NT)
		x[j] = (float)((double)x[j] / sum);
}

template <int D>
int run(const uint16_t *q, const uint16_t *k, int n, const int32_t *perm, const int32_t *goff, int G, int kv,
	float *scores, cudaStream_t st)
{
	const int nb = (n + 127) / 128, cols = kv ? nb : n;
	const float scale = 1.0f / sqrtf((float)D);
	float *buf = NULL;
	const size_t a_q = dgm_align((size_t)G * D * 4), a_k = dgm_align((size_t)nb * D * 4);
	DGM_CUDA(cudaMallocAsync((void **)&buf, a_q + (kv ? a_k + dgm_align((size_t)nb * 4) : 0), st));
	float *qbar = buf, *kbar = (float *)((char *)buf + a_q), *logw = (float *)((char *)buf + a_q + a_k);
	group_mean<D><<<G, D, 0, st>>>(q, perm, goff, qbar);
	const pooled::rows_f32<D> A = { qbar };
	if (kv) {
		pooled::block_mean<D><<<nb, D, 0, st>>>(k, n, 128, NULL, kbar, logw);
		pooled::launch_logits(A, G, pooled::rows_f32<D>{ kbar }, cols, D, scale, logw, scores, st);
	} else {
		pooled::launch_logits(A, G, pooled::rows_bf16<D>{ k }, cols, D, scale, NULL, scores, st);
	}
	softmax_rows<<<G, SM_NT, 0, st>>>(scores, cols);
	DGM_LAUNCHED();
	DGM_CUDA(cudaFreeAsync(buf, st));
	return 0;
}

} // namespace

extern "C" int dg_pooled_scores(const uint16_t *q, const uint16_t *k, int n, int d, const int32_t *perm,
				const int32_t *goff, int ngroups, int kv, float *scores, dg_stream stream)
{
	DGM_ARG(d == 64 || d == 128, "pooled scores: head_dim %d (64 or 128 supported)", d);
	DGM_ARG(n >= 1 && ngroups >= 1, "pooled scores: n %d, ngroups %d", n, ngroups);
	DGM_ARG(kv == 0 || kv == 1, "pooled scores: kv %d (0 token, 1 block)", kv);
	DGM_ARG(q && k && perm && goff && scores, "pooled scores: NULL argument");
	cudaStream_t st = (cudaStream_t)stream;
	return d == 64 ? run<64>(q, k, n, perm, goff, ngroups, kv, scores, st)
		       : run<128>(q, k, n, perm, goff, ngroups, kv, scores, st);
}
