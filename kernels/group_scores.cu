/*
 * group_scores.cu: exact group scores (docs/spec.md §3, score=exact), GPU twin of dg_scores_exact
 * (src/policy/select.c):
 *   s(G, j) = mean_{i in G} exp(scale q_i.k_j - LSE_i),  scale = 1/sqrt(d)
 * for every group G of a grouping (perm, goff) and every key j, streamed: each CTA takes one group
 * and a run of 128-key tiles and computes the 128-key x 128-query probability tile as S^T = K Q^T on
 * wgmma (sm_90a; bf16 in, fp32 accumulate), so that the sum over the group's queries is a row sum in
 * the accumulator: a producer warpgroup and two consumer warpgroups of 64 keys each that take turns
 * to issue their wgmma (ping-pong), 4 K stages, two groups a CTA (the producer copies both groups'
 * 128-query chunks and each K tile serves both: half the K traffic from L2), and the attention
 * kernels' arithmetic (one fma and ex2.approx a probability: group_scores_sm90<D>
 * in group_scores.cuh).
 * Groups of more than 128 queries are done in chunks of 128, accumulated in the token scores; the
 * block form (sums over runs of 128 keys, dg_scores_to_blocks) is summed from the token scores.
 * Calls without token scores (block scores only) run the mma.sync kernel (group_scores_kernel,
 * 2 CTAs per SM), which makes both forms in one pass.
 *
 *   q, k (n, d) bf16; lse (n) fp32 natural log; scores (ngroups, n) and/or block_scores
 *   (ngroups, ceil(n/128)) fp32.
 * Build: part of dsgapkernels (kernels/CMakeLists.txt); test: tests/kernels/gpu_meta.c. Earlier versions:
 * dev/kernels/ (measured in docs/history.md, "Kernel versions").
 */
#include "dsgap_kernels.h"
#include "group_scores.cuh"

extern "C" int dg_exact_scores(const uint16_t *q, const uint16_t *k, const float *lse, int n, int d,
			       const int32_t *perm, const int32_t *goff, int ngroups, float *scores,
			       float *block_scores, dg_stream stream)
{
	GSParams p;
	if (gs_params(p, q, k, lse, n, d, perm, goff, ngroups, scores, block_scores))
		return -1;
	cudaStream_t st = (cudaStream_t)stream;
	if (!scores) /* the wgmma kernel accumulates chunked groups in the token scores */
		return d == 64 ? launch<64>(p, st) : launch<128>(p, st);
	return d == 64 ? launch_sm90<64>(p, st) : launch_sm90<128>(p, st);
}
