/*
 * groups.h: query groups that share one KV selection (docs/spec.md §3, switch `group`).
 *
 *   raster  contiguous runs of 128 queries in token order (the last run may be short)
 *   tile3d  3D tiles of the latent grid, 2x8x8 tokens (1x8x16 for one frame); edge tiles short;
 *           a text prefix, if any, in raster runs first
 *   pca     MC-Sparse's Fast PDDP: recursive principal-direction bisection of the head's queries
 *           into leaves of exactly 128 (only the last leaf short): per node the centred Gram
 *           matrix in fp32, 4 power iterations from a fixed start, queries sorted by projection
 *           (ties by index), the node's block range split at ceil(blocks/2)
 *   query   one query per group (the per-query oracle)
 *   voxel   Chipmunk's 3D voxels of 4x6x8 = 192 tokens (mcsparse-and-peers.md §2.11), edges short
 *   kmeans  svg2's variable-size k-means clusters (Euclidean, Lloyd; empty clusters dropped):
 *           dg_groups_build makes ceil(n/128) clusters cold (evenly spaced starts, 50
 *           iterations); svg2 itself (peers.c) uses its qc clusters warm-started across steps
 *
 * A grouping is a permutation of the queries plus group offsets into it.
 */
#ifndef DG_GROUPS_H
#define DG_GROUPS_H

#include "policy/policy.h"

#define DG_GROUP_SIZE 128

typedef struct {
	int n;       /* queries */
	int ngroups;
	int *perm;   /* (n) query index at each position of the grouped order */
	int *off;    /* (ngroups+1) group g holds positions off[g] .. off[g+1]-1 */
} dg_groups;

/* Build groups of kind for queries q (n, d). grid (frames, height, width) is used by tile3d and
 * voxel (grid product + text_tokens must equal n). Joint attention (text_tokens > 0, docs/spec.md
 * §3.7): every kind but query puts the text queries [0, text_tokens) first, in raster runs of 128,
 * and groups the video queries alone (raster runs, tiles, pca, kmeans over [text_tokens, n)); no
 * group mixes text and video. Returns 0 or -1 (reported). */
int dg_groups_build(dg_groups *g, dg_group_kind kind, const float *q, int n, int d,
		    const int grid[3], int text_tokens);
void dg_groups_free(dg_groups *g);

/* Lloyd iterations of k-means of x (n, d) from centroids c (kc, d), updated in place; labels (n)
 * of the last assignment (ties to the lower cluster); an empty cluster keeps its centroid. */
void dg_kmeans(const float *x, int n, int d, float *c, int kc, int iters, int *labels);
/* Lloyd's centroid update of dg_kmeans and svg2 (peers.c): c (kc, d) from x (n, d) and labels (n) */
void dg_kmeans_centroids(const float *x, int n, int d, const int *labels, int kc, double *sum, int *cnt, float *c);
/* The non-empty clusters of labels (n, in [0, kc)) as a grouping (clusters in index order, members
 * ascending); keep (kc) receives each group's cluster index. */
void dg_groups_from_labels(const int *labels, int n, int kc, dg_groups *g, int *keep);

/* Contiguous runs of size tokens in token order (the last run short). */
void dg_groups_raster(dg_groups *g, int n, int size);
/* 3D tiles of tile[0] x tile[1] x tile[2] (frames, height, width) tokens over the grid, edge tiles
 * short, a text prefix of text tokens first in raster runs of 128. 0 or -1 (reported). */
int dg_groups_tiles(dg_groups *g, int n, const int grid[3], int text, const int tile[3]);

/* The PCA start vector (d): fixed, so that the CPU and GPU paths agree exactly. */
void dg_pca_start(float *v, int d);

/* Mean inertia of the groups: mean over queries of |q_i - centroid(group(i))|^2. Diagnostic of how
 * similar grouped queries are (lower is tighter). */
double dg_groups_inertia(const dg_groups *g, const float *q, int d);

#endif
