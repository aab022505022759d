/*
 * pca_group.cu: PCA grouping, MC-Sparse's Fast PDDP, GPU twin of dg_groups_build(DG_GROUP_PCA)
 * (src/policy/groups.c) with its semantics: nodes are ranges of 128-query blocks of the grouped
 * order, split level by level; per node the centred Gram matrix X^T X - s s^T / cnt in fp32, 4 power
 * iterations from dg_pca_start's normalised vector (a zero norm keeps the vector), projections
 * x.v in fp32, a stable sort by (projection, query index), and the node's block range split at
 * ceil(blocks/2); leaves of exactly 128 queries (the last short).
 *
 * The node structure does not depend on the data, so the host lays out every level first, and
 * every head of a batch shares it: each kernel (pca_group.cuh) runs all heads at once (grid y =
 * head), so a batch of H heads costs the same number of dependent launches as one. Per level:
 * gram_partial_mma (one CTA per chunk of up to 8 consecutive 128-row blocks of a node, accumulated in
 * the MMA registers: fp32 X^T X and column sums, exact products of bf16 values on tensor cores, the
 * block's rows staged a row per lane with 16-byte loads: STAGE_VEC), gram_reduce (sum of the node's
 * chunk partials, in chunk order; skipped at levels whose split nodes are one chunk, where the partial
 * is the Gram matrix), power_iter (one CTA per node: centre, 4 iterations, norm in double), project
 * (8 lanes a row, 16-byte loads: a 64-bit sort key head | node | orderable(projection) | query index;
 * rows of unsplit nodes keep their order) and one CUB radix sort of all heads' keys, whose low bits
 * are the new order (levels whose nodes hold at most 4096 rows: a bitonic sort per node in shared
 * memory instead, without the head bits; larger node sorts are one CTA per (node, head), too few to
 * fill the GPU, so CUB sorts those levels: docs/history.md, "Kernel versions", v7 to v9).
 * fp32 sums are ordered differently from OpenBLAS, so near-ties of projection may order
 * differently from the CPU (tests/kernels/gpu_meta.c).
 *
 *   q (heads, n, d) bf16 -> perm (heads, n) int32, goff (ceil(n/128)+1) int32 (the same for all).
 * Build: part of dsgapkernels; test and timing: tests/kernels/gpu_meta.c (--bench). Earlier versions:
 * dev/kernels/ (measured in docs/history.md, "Kernel versions").
 */
#include "dsgap_kernels.h"
#include "pca_group.cuh"

extern "C" int dg_pca_groups(const uint16_t *q, int heads, int n, int d, int32_t *perm, int32_t *goff,
			     dg_stream stream)
{
	if (pca_check(q, heads, n, d, perm, goff))
		return -1;
	cudaStream_t st = (cudaStream_t)stream;
	if (d == 64)
		return pca_run<64>(q, heads, n, perm, goff, st);
	return pca_run<128>(q, heads, n, perm, goff, st);
}
