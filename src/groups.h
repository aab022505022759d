/*
 * groups.h: query groups that share one KV selection (DESIGN §3, switch `group`).
 *
 *   raster  contiguous runs of 128 queries in token order (the last run may be short)
 *   tile3d  3D tiles of the latent grid, 2x8x8 tokens (1x8x16 for one frame); edge tiles short;
 *           a text prefix, if any, in raster runs first
 *   pca     MC-Sparse's Fast PDDP: recursive principal-direction bisection of the head's queries
 *           into leaves of exactly 128 (only the last leaf short): per node the centred Gram
 *           matrix in fp32, 4 power iterations from a fixed start, queries sorted by projection
 *           (ties by index), the node's block range split at ceil(blocks/2)
 *   query   one query per group (the per-query oracle)
 *
 * A grouping is a permutation of the queries plus group offsets into it.
 */
#ifndef DG_GROUPS_H
#define DG_GROUPS_H

#include "policy.h"

#define DG_GROUP_SIZE 128

typedef struct {
	int n;       /* queries */
	int ngroups;
	int *perm;   /* (n) query index at each position of the grouped order */
	int *off;    /* (ngroups+1) group g holds positions off[g] .. off[g+1]-1 */
} dg_groups;

/* Build groups of kind for queries q (n, d). grid (frames, height, width) and text_tokens are
 * used by tile3d only (grid product + text_tokens must equal n). Returns 0 or -1 (reported). */
int dg_groups_build(dg_groups *g, dg_group_kind kind, const float *q, int n, int d,
		    const int grid[3], int text_tokens);
void dg_groups_free(dg_groups *g);

/* The PCA start vector (d): fixed, so that the CPU and GPU paths agree exactly. */
void dg_pca_start(float *v, int d);

/* Mean inertia of the groups: mean over queries of |q_i - centroid(group(i))|^2. Diagnostic of how
 * similar grouped queries are (lower is tighter). */
double dg_groups_inertia(const dg_groups *g, const float *q, int d);

#endif
