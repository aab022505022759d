/*
 * groups.c: raster, tile3d, voxel, PCA (Fast PDDP) and per-query groupings. See groups.h.
 * (kmeans, svg2's clusters, carries state across steps: peers.c.)
 */
#include "policy/groups.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cblas.h>

#include <stdint.h>

#include "util/util.h"

static void alloc_groups(dg_groups *g, int n, int ngroups)
{
	g->n = n;
	g->ngroups = ngroups;
	g->perm = dg_malloc((size_t)n * sizeof(int));
	g->off = dg_malloc((size_t)(ngroups + 1) * sizeof(int));
}

void dg_groups_raster(dg_groups *g, int n, int size)
{
	alloc_groups(g, n, (n + size - 1) / size);
	for (int i = 0; i < n; i++)
		g->perm[i] = i;
	for (int k = 0; k <= g->ngroups; k++)
		g->off[k] = k * size < n ? k * size : n;
}

int dg_groups_tiles(dg_groups *g, int n, const int grid[3], int text, const int tile[3])
{
	int F = grid[0], H = grid[1], W = grid[2];
	if ((long)F * H * W + text != n || F < 1 || H < 1 || W < 1)
		return dg_error("tile grouping: grid %dx%dx%d + %d text tokens does not match %d tokens",
				F, H, W, text, n);
	int tf = tile[0], th = tile[1], tw = tile[2];
	int nf = (F + tf - 1) / tf, nh = (H + th - 1) / th, nw = (W + tw - 1) / tw;
	int ntext = (text + DG_GROUP_SIZE - 1) / DG_GROUP_SIZE;
	alloc_groups(g, n, ntext + nf * nh * nw);
	int pos = 0, k = 0;
	for (; k < ntext; k++) {
		g->off[k] = pos;
		for (int i = 0; i < DG_GROUP_SIZE && pos < text; i++, pos++)
			g->perm[pos] = pos;
	}
	for (int a = 0; a < nf; a++)
		for (int b = 0; b < nh; b++)
			for (int c = 0; c < nw; c++, k++) {
				g->off[k] = pos;
				for (int f = a * tf; f < F && f < (a + 1) * tf; f++)
					for (int y = b * th; y < H && y < (b + 1) * th; y++)
						for (int x = c * tw; x < W && x < (c + 1) * tw; x++)
							g->perm[pos++] = text + (f * H + y) * W + x;
			}
	g->off[k] = pos;
	DG_ASSERT(pos == n && k == g->ngroups);
	return 0;
}

void dg_pca_start(float *v, int d)
{
	/* exactly representable, not orthogonal to any direction that matters in practice */
	float norm = 0;
	for (int i = 0; i < d; i++) {
		v[i] = 1.0f + 0.25f * (float)(i % 3);
		norm += v[i] * v[i];
	}
	for (int i = 0; i < d; i++)
		v[i] /= sqrtf(norm);
}

typedef struct {
	float proj;
	int pos; /* query index, the tie break */
	int row; /* row in the node's current order */
} proj_item;

static int by_projection(const void *a, const void *b)
{
	const proj_item *x = a, *y = b;
	if (x->proj != y->proj)
		return x->proj < y->proj ? -1 : 1;
	return (x->pos > y->pos) - (x->pos < y->pos);
}

/* Sort rows [start, end) of X (and perm) along the principal direction of their centred Gram. */
static void pca_split_node(float *X, int *perm, int start, int end, int d, float *gram, float *v,
			   float *w, proj_item *items, float *rows)
{
	int cnt = end - start;
	const float *x = X + (size_t)start * d;
	/* centred Gram: X^T X - s s^T / cnt, fp32 (gram (d, d)) */
	cblas_ssyrk(CblasRowMajor, CblasUpper, CblasTrans, d, cnt, 1.0f, x, d, 0.0f, gram, d);
	for (int j = 0; j < d; j++)
		w[j] = 0;
	for (int i = 0; i < cnt; i++)
		for (int j = 0; j < d; j++)
			w[j] += x[(size_t)i * d + j];
	for (int a = 0; a < d; a++)
		for (int b = a; b < d; b++) {
			float c = gram[a * d + b] - w[a] * w[b] / (float)cnt;
			gram[a * d + b] = gram[b * d + a] = c;
		}
	dg_pca_start(v, d);
	for (int it = 0; it < 4; it++) {
		cblas_sgemv(CblasRowMajor, CblasNoTrans, d, d, 1.0f, gram, d, v, 1, 0.0f, w, 1);
		float norm = cblas_snrm2(d, w, 1);
		if (!(norm > 0))
			break; /* all queries equal: keep the start vector */
		for (int j = 0; j < d; j++)
			v[j] = w[j] / norm;
	}
	for (int i = 0; i < cnt; i++) {
		items[i].proj = cblas_sdot(d, x + (size_t)i * d, 1, v, 1);
		items[i].pos = perm[start + i];
		items[i].row = i;
	}
	qsort(items, cnt, sizeof *items, by_projection);
	memcpy(rows, x, (size_t)cnt * d * sizeof(float));
	for (int i = 0; i < cnt; i++) {
		memcpy(X + (size_t)(start + i) * d, rows + (size_t)items[i].row * d, d * sizeof(float));
		perm[start + i] = items[i].pos;
	}
}

static void pca(dg_groups *g, const float *q, int n, int d)
{
	dg_groups_raster(g, n, DG_GROUP_SIZE);
	int nb = g->ngroups;
	float *X = dg_malloc((size_t)n * d * sizeof(float)), *rows = dg_malloc((size_t)n * d * sizeof(float));
	float *gram = dg_malloc((size_t)d * d * sizeof(float)), *v = dg_malloc(d * sizeof(float));
	float *w = dg_malloc(d * sizeof(float));
	proj_item *items = dg_malloc((size_t)n * sizeof *items);
	memcpy(X, q, (size_t)n * d * sizeof(float));
	/* nodes are block ranges [lo, hi) of the grouped order; split level by level */
	int *lo = dg_malloc((size_t)nb * 2 * sizeof(int)), *hi = lo + nb, nodes = 1;
	lo[0] = 0;
	hi[0] = nb;
	for (;;) {
		int next = 0, split = 0;
		int *nlo = dg_malloc((size_t)nb * 2 * sizeof(int)), *nhi = nlo + nb;
		for (int k = 0; k < nodes; k++) {
			int blocks = hi[k] - lo[k];
			if (blocks <= 1) {
				nlo[next] = lo[k];
				nhi[next++] = hi[k];
				continue;
			}
			int start = lo[k] * DG_GROUP_SIZE, end = hi[k] * DG_GROUP_SIZE;
			pca_split_node(X, g->perm, start, end < n ? end : n, d, gram, v, w, items, rows);
			int mid = lo[k] + (blocks + 1) / 2;
			nlo[next] = lo[k];
			nhi[next++] = mid;
			nlo[next] = mid;
			nhi[next++] = hi[k];
			split = 1;
		}
		free(lo);
		lo = nlo;
		hi = nhi;
		nodes = next;
		if (!split)
			break;
	}
	free(lo);
	free(X);
	free(rows);
	free(gram);
	free(v);
	free(w);
	free(items);
}

/* Lloyd's update: each centroid c (kc, d) the double sum of its members' rows of x (n, d) in token
 * order over their count, rounded to fp32; an empty cluster's centroid stays. sum (kc, d) and cnt
 * (kc) are the caller's scratch. */
void dg_kmeans_centroids(const float *x, int n, int d, const int *labels, int kc, double *sum, int *cnt, float *c)
{
	memset(sum, 0, (size_t)kc * d * sizeof(double));
	memset(cnt, 0, (size_t)kc * sizeof(int));
	for (int i = 0; i < n; i++) {
		cnt[labels[i]]++;
		for (int e = 0; e < d; e++)
			sum[(size_t)labels[i] * d + e] += x[(size_t)i * d + e];
	}
	for (int a = 0; a < kc; a++)
		for (int e = 0; e < d && cnt[a]; e++)
			c[(size_t)a * d + e] = (float)(sum[(size_t)a * d + e] / cnt[a]);
}

void dg_kmeans(const float *x, int n, int d, float *c, int kc, int iters, int *labels)
{
	float *dots = dg_malloc((size_t)n * kc * sizeof(float)), *cn = dg_malloc((size_t)kc * sizeof(float));
	double *sum = dg_malloc((size_t)kc * d * sizeof(double));
	int *cnt = dg_malloc((size_t)kc * sizeof(int));
	for (int it = 0; it < iters; it++) {
		for (int a = 0; a < kc; a++)
			cn[a] = cblas_sdot(d, c + (size_t)a * d, 1, c + (size_t)a * d, 1);
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, kc, d, 2.0f, x, d, c, d, 0.0f, dots, kc);
		for (int i = 0; i < n; i++) { /* argmin |x - c|^2 = argmax 2 x.c - |c|^2 */
			const float *r = dots + (size_t)i * kc;
			int best = 0;
			for (int a = 1; a < kc; a++)
				best = r[a] - cn[a] > r[best] - cn[best] ? a : best;
			labels[i] = best;
		}
		dg_kmeans_centroids(x, n, d, labels, kc, sum, cnt, c);
	}
	free(dots), free(cn), free(sum), free(cnt);
}

void dg_groups_from_labels(const int *labels, int n, int kc, dg_groups *g, int *keep)
{
	int *cnt = dg_calloc(kc + 1, sizeof(int));
	for (int i = 0; i < n; i++)
		cnt[labels[i] + 1]++;
	int ng = 0;
	for (int a = 0; a < kc; a++)
		if (cnt[a + 1])
			keep[ng++] = a;
	for (int a = 0; a < kc; a++)
		cnt[a + 1] += cnt[a];
	g->n = n;
	g->ngroups = ng;
	g->perm = dg_malloc((size_t)n * sizeof(int));
	g->off = dg_malloc((size_t)(ng + 1) * sizeof(int));
	for (int t = 0; t < ng; t++)
		g->off[t] = cnt[keep[t]];
	g->off[ng] = n;
	int *pos = dg_malloc((size_t)kc * sizeof(int));
	memcpy(pos, cnt, (size_t)kc * sizeof(int));
	for (int i = 0; i < n; i++)
		g->perm[pos[labels[i]]++] = i;
	free(cnt), free(pos);
}

/* svg2's query clustering made cold: ceil(n/128) clusters from evenly spaced tokens, 50 iterations */
static void kmeans_cold(dg_groups *g, const float *q, int n, int d)
{
	int kc = (n + DG_GROUP_SIZE - 1) / DG_GROUP_SIZE;
	float *c = dg_malloc((size_t)kc * d * sizeof(float));
	int *labels = dg_malloc((size_t)n * sizeof(int)), *keep = dg_malloc((size_t)kc * sizeof(int));
	for (int a = 0; a < kc; a++)
		memcpy(c + (size_t)a * d, q + (size_t)((int64_t)a * n / kc) * d, d * sizeof(float));
	dg_kmeans(q, n, d, c, kc, 50, labels);
	dg_groups_from_labels(labels, n, kc, g, keep);
	free(c), free(labels), free(keep);
}

/* joint attention (docs/spec.md §3.7): the text queries [0, text) in raster runs of 128, then
 * kind's (pca or kmeans) grouping of the video queries [text, n) alone */
static void joint_groups(dg_groups *g, dg_group_kind kind, const float *q, int n, int d, int text)
{
	dg_groups v;
	const float *qv = q + (size_t)text * d;
	if (kind == DG_GROUP_PCA)
		pca(&v, qv, n - text, d);
	else
		kmeans_cold(&v, qv, n - text, d);
	int ntext = (text + DG_GROUP_SIZE - 1) / DG_GROUP_SIZE;
	alloc_groups(g, n, ntext + v.ngroups);
	for (int k = 0; k < ntext; k++)
		g->off[k] = k * DG_GROUP_SIZE;
	for (int i = 0; i < text; i++)
		g->perm[i] = i;
	for (int k = 0; k <= v.ngroups; k++)
		g->off[ntext + k] = text + v.off[k];
	for (int i = 0; i < n - text; i++)
		g->perm[text + i] = text + v.perm[i];
	dg_groups_free(&v);
}

int dg_groups_build(dg_groups *g, dg_group_kind kind, const float *q, int n, int d,
		    const int grid[3], int text_tokens)
{
	memset(g, 0, sizeof *g);
	if (text_tokens > 0 && kind != DG_GROUP_QUERY) {
		if (text_tokens >= n)
			return dg_error("grouping: %d text tokens leave no video query of %d", text_tokens, n);
		if (kind == DG_GROUP_RASTER) { /* text runs, then runs of 128 of the video queries */
			int line[3] = { 1, 1, n - text_tokens }, tile[3] = { 1, 1, DG_GROUP_SIZE };
			return dg_groups_tiles(g, n, line, text_tokens, tile);
		}
		if (kind == DG_GROUP_PCA || kind == DG_GROUP_KMEANS) {
			joint_groups(g, kind, q, n, d, text_tokens);
			return 0;
		}
	}
	switch (kind) {
	case DG_GROUP_RASTER:
		dg_groups_raster(g, n, DG_GROUP_SIZE);
		return 0;
	case DG_GROUP_QUERY:
		dg_groups_raster(g, n, 1);
		return 0;
	case DG_GROUP_TILE3D: {
		int tile[3] = { grid[0] >= 2 ? 2 : 1, 8, grid[0] >= 2 ? 8 : 16 };
		return dg_groups_tiles(g, n, grid, text_tokens, tile);
	}
	case DG_GROUP_VOXEL: { /* Chipmunk's voxels (mcsparse-and-peers.md §2.11) */
		int tile[3] = { 4, 6, 8 };
		return dg_groups_tiles(g, n, grid, text_tokens, tile);
	}
	case DG_GROUP_PCA:
		pca(g, q, n, d);
		return 0;
	case DG_GROUP_KMEANS:
		kmeans_cold(g, q, n, d);
		return 0;
	default:
		DG_BUG("grouping %d", kind);
	}
}

void dg_groups_free(dg_groups *g)
{
	free(g->perm);
	free(g->off);
	memset(g, 0, sizeof *g);
}

double dg_groups_inertia(const dg_groups *g, const float *q, int d)
{
	double total = 0, *c = dg_malloc(d * sizeof(double));
	for (int k = 0; k < g->ngroups; k++) {
		int a = g->off[k], b = g->off[k + 1];
		for (int j = 0; j < d; j++)
			c[j] = 0;
		for (int p = a; p < b; p++)
			for (int j = 0; j < d; j++)
				c[j] += q[(size_t)g->perm[p] * d + j];
		for (int j = 0; j < d; j++)
			c[j] /= b - a;
		for (int p = a; p < b; p++)
			for (int j = 0; j < d; j++) {
				double e = q[(size_t)g->perm[p] * d + j] - c[j];
				total += e * e;
			}
	}
	free(c);
	return total / g->n;
}
