/*
 * peers.c: the peer methods' metadata (svg2 k-means and centroid scores, SpargeAttn's stage-1
 * filter, XAttention's antidiagonal scores, Radial and STA static masks, DiTFastAttn's window,
 * PISA's block selection, Skip-Softmax's running-max gaps) and PISA's first-order output term. See peers.h.
 */
#include "policy/peers.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cblas.h>

#include "util/util.h"

#define KB DG_KV_BLOCK_SIZE /* the 128-key blocks of sparge, xattention and radial */

struct dg_peer_state {
	int qc, kc, d;
	float *cq, *ck;            /* (qc, d), (kc, d) svg2 centroids (the CPU's) */
	void *dev;                 /* a backend's own centroids (dg_peer_state_slot), freed by dev_free */
	void (*dev_free)(void *);
};

void dg_peer_state_free(dg_peer_state *s)
{
	if (s) {
		free(s->cq), free(s->ck);
		if (s->dev && s->dev_free)
			s->dev_free(s->dev);
	}
	free(s);
}

void dg_peer_svg2_clusters(const dg_policy *p, int n, int *qc, int *kc, int *min_parts)
{
	*qc = p->qc < n ? p->qc : n;
	*kc = p->kc < n ? p->kc : n;
	*min_parts = (int)ceil(p->minkc * *kc - 1e-9);
}

void **dg_peer_state_slot(dg_peer_state **state, int qc, int kc, int d, void (*dev_free)(void *), bool *cold)
{
	dg_peer_state *st = *state;
	*cold = !st || st->qc != qc || st->kc != kc || st->d != d || !st->dev_free;
	if (*cold) {
		dg_peer_state_free(st);
		st = *state = dg_calloc(1, sizeof *st);
		st->qc = qc, st->kc = kc, st->d = d, st->dev_free = dev_free;
	}
	return &st->dev;
}

/* svg2's Lloyd iterations (the device's, kernels/peer_kmeans.cu): x (n, d) against c (kc, d), labels
 * (n) the last assignment: argmax_a 2 x.c_a - |c_a|^2 with the dots and norms in double (exact
 * products; the norms summed in component order), ties to the lower cluster; then each centroid the
 * double sum of its members in token order over their count, rounded to fp32 (an empty one stays).
 * The device sums the dots in another order: its labels are the same unless two clusters' scores
 * are within the fp64 rounding of the dots (a near-tie of ~d 2^-53 relative); its centroids then
 * are the same bit for bit. */
static void svg2_kmeans(const float *x, int n, int d, float *c, int kc, int iters, int *labels)
{
	double *xd = dg_malloc((size_t)n * d * sizeof(double)), *cd = dg_malloc((size_t)kc * d * sizeof(double));
	double *dots = dg_malloc((size_t)n * kc * sizeof(double)), *cn = dg_malloc((size_t)kc * sizeof(double));
	double *sum = dg_malloc((size_t)kc * d * sizeof(double));
	int *cnt = dg_malloc((size_t)kc * sizeof(int));
	for (size_t e = 0; e < (size_t)n * d; e++)
		xd[e] = x[e];
	for (int it = 0; it < iters; it++) {
		for (int a = 0; a < kc; a++) {
			cn[a] = 0;
			for (int e = 0; e < d; e++) {
				cd[(size_t)a * d + e] = c[(size_t)a * d + e];
				cn[a] += (double)c[(size_t)a * d + e] * c[(size_t)a * d + e];
			}
		}
		cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, kc, d, 1.0, xd, d, cd, d, 0.0, dots, kc);
		for (int i = 0; i < n; i++) {
			const double *r = dots + (size_t)i * kc;
			int best = 0;
			double bs = 2 * r[0] - cn[0];
			for (int a = 1; a < kc; a++)
				if (2 * r[a] - cn[a] > bs)
					best = a, bs = 2 * r[a] - cn[a];
			labels[i] = best;
		}
		dg_kmeans_centroids(x, n, d, labels, kc, sum, cnt, c);
	}
	free(xd), free(cd), free(dots), free(cn), free(sum), free(cnt);
}

/* ---------------------------------------------------------------------------------------------- */
/* the device-reproducible arithmetic of the scores (kernels/peer_scores.cu does the same operations
 * in the same order, so that both backends' scores agree bit for bit)                              */

/* exp(x) within 2 ulp from fp32 operations alone (the device's peer_expf): x = k ln2 + r, k =
 * rint(x log2 e), r by a two-part ln2, a degree-6 Taylor polynomial in r by fmaf, scaled by 2^k;
 * 0 below -87 (no subnormal results) */
static float det_expf(float x)
{
	if (!(x >= -87.0f))
		return 0.0f;
	float kf = rintf(x * 1.44269504f);
	float r = fmaf(-kf, 0.693145752f, x);
	r = fmaf(-kf, 1.42860677e-06f, r);
	float p = 1.38888889e-03f;
	p = fmaf(p, r, 8.33333377e-03f);
	p = fmaf(p, r, 4.16666679e-02f);
	p = fmaf(p, r, 1.66666672e-01f);
	p = fmaf(p, r, 0.5f);
	p = fmaf(p, r, 1.0f);
	p = fmaf(p, r, 1.0f);
	return ldexpf(p, (int)kf);
}

/* S (M, N) = scale * A (M, K) . B (N, K)^T, each dot a chain of fmaf in k order from +0 */
static void logits_seq(const float *A, int M, const float *B, int N, int K, float scale, float *S)
{
#pragma omp parallel for schedule(static)
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++) {
			float acc = 0.0f;
			for (int c = 0; c < K; c++)
				acc = fmaf(A[(size_t)i * K + c], B[(size_t)j * K + c], acc);
			S[(size_t)i * N + j] = scale * acc;
		}
}

/* softmax of a row in place over the finite entries (-INFINITY entries get 0), each exp(x - max)
 * weighted by w (cols, or NULL), summed in double in 32 stripes (entry j into stripe j % 32, in
 * order) that are then added in stripe order: the device's warp per row (lane = stripe) */
static void softmax(float *x, int cols, const double *w)
{
	float mx = -INFINITY;
	for (int j = 0; j < cols; j++)
		mx = x[j] > mx ? x[j] : mx;
	if (mx == -INFINITY) {
		memset(x, 0, (size_t)cols * sizeof(float));
		return;
	}
	double part[32] = { 0 }, sum = 0;
	for (int j = 0; j < cols; j++) {
		x[j] = det_expf(x[j] - mx);
		part[j % 32] += w ? x[j] * w[j] : x[j];
	}
	for (int l = 0; l < 32; l++)
		sum += part[l];
	for (int j = 0; j < cols; j++)
		x[j] = (float)((w ? x[j] * w[j] : x[j]) / sum);
}

/* ---------------------------------------------------------------------------------------------- */
/* selection over key parts                                                                        */

typedef struct {
	float s;
	int i;
} item;

/* the sort key of a score, ascending in rank order (score descending): the float's bits made
 * ascending in float order, then inverted; -0 keyed as +0, since the two are equal scores */
static uint32_t rank_key(float s)
{
	uint32_t u;
	s = s == 0 ? 0.0f : s;
	memcpy(&u, &s, sizeof u);
	u = u >> 31 ? ~u : u | 0x80000000u;
	return ~u;
}

/* a part by its sort key */
typedef struct {
	uint32_t key;
	int i;
} keyed;

/* it (m, parts of the score row s) into rank order (score descending, ties by lower index): a
 * stable LSD radix sort on rank_key, 8 bits a pass (the four histograms made in one sweep; a pass
 * whose digit every key shares is skipped), so the items, which arrive in index order, keep it
 * among ties; x, y (m) scratch */
static void sort_by_rank(const float *s, item *it, keyed *x, keyed *y, int m)
{
	int at[4][256] = { { 0 } };
	for (int k = 0; k < m; k++) {
		x[k] = (keyed){ rank_key(it[k].s), it[k].i };
		for (int p = 0; p < 4; p++)
			at[p][x[k].key >> 8 * p & 255]++;
	}
	for (int p = 0; p < 4; p++) {
		if (m == 0 || at[p][x[0].key >> 8 * p & 255] == m)
			continue;
		for (int b = 0, sum = 0; b < 256; b++) {
			int c = at[p][b];
			at[p][b] = sum, sum += c;
		}
		for (int k = 0; k < m; k++)
			y[at[p][x[k].key >> 8 * p & 255]++] = x[k];
		keyed *t = x;
		x = y, y = t;
	}
	for (int k = 0; k < m; k++)
		it[k] = (item){ s[x[k].i], x[k].i };
}

/* each group's finite part scores in rank order with their running sums and key counts, made
 * once for every budget a matched search tries (the order does not depend on the budget) */
typedef struct {
	int ngroups, P;
	int *m;         /* (ngroups) finite scores of each group (INFINITY marks a part always kept) */
	int *nonneg;    /* (ngroups) of them >= 0: the first in rank order, over which cum rises */
	item *it;       /* (ngroups, P) the group's finite scores by rank */
	double *cum;    /* (ngroups, P + 1) cum[k]: the sum of the first k in rank order */
	double *total;  /* (ngroups) the sum of the finite scores in part order */
	int64_t *keys;  /* (ngroups, P + 1) keys[k]: the non-sink keys of the forced parts and the first k */
} ranked;

static void rank_parts(const float *scores, int ngroups, int P, const int *psize, const int *psink, ranked *r)
{
	size_t sz = (size_t)ngroups * P, sz1 = (size_t)ngroups * (P + 1) + 1;
	r->ngroups = ngroups, r->P = P;
	r->m = dg_malloc((size_t)(ngroups ? ngroups : 1) * sizeof *r->m);
	r->nonneg = dg_malloc((size_t)(ngroups ? ngroups : 1) * sizeof *r->nonneg);
	r->it = dg_malloc((sz ? sz : 1) * sizeof *r->it);
	r->cum = dg_malloc(sz1 * sizeof *r->cum);
	r->total = dg_malloc((size_t)(ngroups ? ngroups : 1) * sizeof *r->total);
	r->keys = dg_malloc(sz1 * sizeof *r->keys);
#pragma omp parallel
	{
		keyed *x = dg_malloc((size_t)(P ? P : 1) * sizeof *x), *y = dg_malloc((size_t)(P ? P : 1) * sizeof *y);
#pragma omp for schedule(static)
		for (int g = 0; g < ngroups; g++) {
			const float *s = scores + (size_t)g * P;
			item *it = r->it + (size_t)g * P;
			double *cum = r->cum + (size_t)g * (P + 1), total = 0;
			int64_t *keys = r->keys + (size_t)g * (P + 1), forced = 0;
			int m = 0, nonneg = 0;
			for (int c = 0; c < P; c++)
				if (s[c] != INFINITY) {
					it[m++] = (item){ s[c], c };
					total += s[c];
				} else {
					forced += psize[c] - psink[c];
				}
			sort_by_rank(s, it, x, y, m);
			cum[0] = 0, keys[0] = forced;
			for (int k = 0; k < m; k++) {
				cum[k + 1] = cum[k] + it[k].s;
				keys[k + 1] = keys[k] + psize[it[k].i] - psink[it[k].i];
				nonneg += it[k].s >= 0;
			}
			r->m[g] = m, r->nonneg[g] = nonneg, r->total[g] = total;
		}
		free(x), free(y);
	}
}

static void ranked_free(ranked *r)
{
	free(r->m), free(r->nonneg), free(r->it), free(r->cum), free(r->total), free(r->keys);
}

/* the ranked parts group g keeps by dg_peer_take's rule at one budget: by rank until the top-k keys
 * (K) are held or the top-p mass reached (the first k with cum[k] >= mass, else all: cum rises over
 * the nonnegative scores and falls after them, so a binary search over [0, nonneg] finds it), at
 * least min_parts (or all) */
static int keep_count(const ranked *r, int g, const int *psize, int K, const dg_budget *b, int min_parts)
{
	const item *it = r->it + (size_t)g * r->P;
	const double *cum = r->cum + (size_t)g * (r->P + 1);
	int m = r->m[g], keep = 0;
	if (b->budget == DG_BUDGET_TOPK) {
		for (int held = 0; keep < m && held < K; keep++)
			held += psize[it[keep].i];
	} else {
		double mass = b->topp * r->total[g];
		int lo = 0, hi = r->nonneg[g];
		if (!(cum[hi] < mass)) {
			while (lo < hi) {
				int mid = lo + (hi - lo) / 2;
				if (cum[mid] < mass)
					lo = mid + 1;
				else
					hi = mid;
			}
			keep = lo;
		} else {
			keep = m;
		}
	}
	return keep > min_parts ? keep : min_parts < m ? min_parts : m;
}

/* every group's keep count at budget b (keep, ngroups), and the computed density of that take:
 * each group's queries against its kept parts' keys and the sinks (counted once) over n^2 */
static double keep_counts(const ranked *r, const int *gsize, const int *psize, int n, int sinks, const dg_budget *b,
			  int min_parts, int *keep)
{
	int K = dg_topk_count(b->rho, n);
	double pairs = 0;
	for (int g = 0; g < r->ngroups; g++) {
		keep[g] = keep_count(r, g, psize, K, b, min_parts);
		int64_t keys = sinks + r->keys[(size_t)g * (r->P + 1) + keep[g]];
		pairs += (double)gsize[g] * (double)keys;
	}
	return pairs / ((double)n * n);
}

/* take (ngroups, P) 0/1 from the keep counts: the parts marked INFINITY and the first keep[g] by rank */
static void take_parts(const ranked *r, const float *scores, const int *keep, unsigned char *take)
{
	int P = r->P;
#pragma omp parallel for schedule(static)
	for (int g = 0; g < r->ngroups; g++) {
		const float *s = scores + (size_t)g * P;
		const item *it = r->it + (size_t)g * P;
		unsigned char *t = take + (size_t)g * P;
		for (int c = 0; c < P; c++)
			t[c] = s[c] == INFINITY;
		for (int k = 0; k < keep[g]; k++)
			t[it[k].i] = 1;
	}
}

/* the sinks [sink_lo, sink_hi) clipped to n: their count */
static int sink_count(const dg_budget *b, int n)
{
	int lo = b->sink_lo < n ? b->sink_lo : n, hi = b->sink_hi < n ? b->sink_hi : n;
	return hi > lo ? hi - lo : 0;
}

void dg_peer_take(const float *scores, int ngroups, const int *gsize, int P, const int *psize, const int *psink,
		  int n, const dg_policy *p, const dg_budget *b, int min_parts, unsigned char *take)
{
	ranked r;
	rank_parts(scores, ngroups, P, psize, psink, &r);
	size_t ng = (size_t)(ngroups ? ngroups : 1);
	int sinks = sink_count(b, n);
	int *lo_k = dg_malloc(ng * sizeof(int)), *hi_k = dg_malloc(ng * sizeof(int)), *mid_k = dg_malloc(ng * sizeof(int));
	if (!p->matched || b->budget != DG_BUDGET_TOPP) {
		keep_counts(&r, gsize, psize, n, sinks, b, min_parts, hi_k);
		take_parts(&r, scores, hi_k, take);
		free(lo_k), free(hi_k), free(mid_k);
		ranked_free(&r);
		return;
	}
	dg_budget t = *b;
	double lo = ldexp(1.0, -30), hi = 1, dlo = 0;
	t.topp = hi;
	double dhi = keep_counts(&r, gsize, psize, n, sinks, &t, min_parts, hi_k);
	bool take_lo = false;
	if (dhi > b->rho) { /* else the densest the knob gives */
		t.topp = lo;
		dlo = keep_counts(&r, gsize, psize, n, sinks, &t, min_parts, lo_k);
		if (dlo > b->rho + DG_PEER_MATCH_TOL && min_parts > 1) {
			/* the minimum part count is the floor: the largest m < min_parts at which the
			 * fewest parts fit rho (density nondecreasing in m), else 1 (peers.h) */
			int m_lo = 1, m_hi = min_parts;
			while (m_hi - m_lo > 1) {
				int m = m_lo + (m_hi - m_lo) / 2;
				if (keep_counts(&r, gsize, psize, n, sinks, &t, m, mid_k) <= b->rho)
					m_lo = m;
				else
					m_hi = m;
			}
			min_parts = m_lo;
			t.topp = hi;
			dhi = keep_counts(&r, gsize, psize, n, sinks, &t, min_parts, hi_k);
			t.topp = lo;
			dlo = keep_counts(&r, gsize, psize, n, sinks, &t, min_parts, lo_k);
		}
		for (int it = 0; it < DG_PEER_MATCH_STEPS && dlo < b->rho; it++) {
			t.topp = 0.5 * (lo + hi);
			double dm = keep_counts(&r, gsize, psize, n, sinks, &t, min_parts, mid_k);
			int *x = mid_k;
			if (dm >= b->rho)
				mid_k = hi_k, hi_k = x, hi = t.topp, dhi = dm;
			else
				mid_k = lo_k, lo_k = x, lo = t.topp, dlo = dm;
		}
		take_lo = dlo >= b->rho || b->rho - dlo <= dhi - b->rho;
	}
	take_parts(&r, scores, take_lo ? lo_k : hi_k, take);
	free(lo_k), free(hi_k), free(mid_k);
	ranked_free(&r);
}

/* key lists of the groups from take (ngroups, P) over the parts, plus the sinks; ascending */
static void take_expand(const unsigned char *take, int ngroups, const dg_groups *parts, int n, const dg_budget *b,
			dg_selection *sel)
{
	int P = parts->ngroups;
	int lo = b->sink_lo < n ? b->sink_lo : n, hi = b->sink_hi < n ? b->sink_hi : n;
	sel->ngroups = ngroups;
	sel->off = dg_malloc((size_t)(ngroups + 1) * sizeof(int64_t));
	int64_t cap = (int64_t)ngroups * n;
	sel->idx = dg_malloc((size_t)(cap ? cap : 1) * sizeof(int));
	unsigned char *in = dg_malloc((size_t)n);
	sel->off[0] = 0;
	for (int g = 0; g < ngroups; g++) {
		memset(in, 0, (size_t)n);
		for (int c = 0; c < P; c++)
			for (int j = parts->off[c]; take[(size_t)g * P + c] && j < parts->off[c + 1]; j++)
				in[parts->perm[j]] = 1;
		for (int j = lo; j < hi; j++)
			in[j] = 1;
		int64_t at = sel->off[g];
		for (int j = 0; j < n; j++)
			if (in[j])
				sel->idx[at++] = j;
		sel->off[g + 1] = at;
	}
	free(in);
}

/*
 * The selection over key parts of the groups g: dg_peer_take on the parts' sizes (and the sinks
 * inside each), then expanded to key lists.
 */
static void peer_select(const float *scores, const dg_groups *g, const dg_groups *parts, int n, const dg_policy *p,
			const dg_budget *b, int min_parts, dg_selection *sel)
{
	int G = g->ngroups, P = parts->ngroups;
	int lo = b->sink_lo < n ? b->sink_lo : n, hi = b->sink_hi < n ? b->sink_hi : n;
	int *gsize = dg_malloc((size_t)(G ? G : 1) * sizeof(int)), *psize = dg_malloc((size_t)(P ? P : 1) * sizeof(int));
	int *psink = dg_calloc(P ? P : 1, sizeof(int));
	for (int r = 0; r < G; r++)
		gsize[r] = g->off[r + 1] - g->off[r];
	for (int c = 0; c < P; c++) {
		psize[c] = parts->off[c + 1] - parts->off[c];
		for (int j = parts->off[c]; j < parts->off[c + 1]; j++)
			psink[c] += parts->perm[j] >= lo && parts->perm[j] < hi;
	}
	unsigned char *take = dg_malloc((size_t)G * P + 1);
	dg_peer_take(scores, G, gsize, P, psize, psink, n, p, b, min_parts, take);
	take_expand(take, G, parts, n, b, sel);
	free(gsize), free(psize), free(psink), free(take);
}

/* ---------------------------------------------------------------------------------------------- */
/* pooled blocks                                                                                   */

/* means of x (n, d) minus sub (d, or NULL) over raster blocks of bs tokens -> out (ceil(n/bs), d):
 * fp32 sums in token order, then divided by the count (the device's block_mean) */
static void block_means(const float *x, int n, int d, int bs, const float *sub, float *out)
{
	int nb = (n + bs - 1) / bs;
	for (int c = 0; c < nb; c++) {
		int a = c * bs, e = a + bs < n ? a + bs : n;
		for (int t = 0; t < d; t++) {
			float s = 0.0f;
			for (int j = a; j < e; j++)
				s += sub ? x[(size_t)j * d + t] - sub[t] : x[(size_t)j * d + t];
			out[(size_t)c * d + t] = s / (float)(e - a);
		}
	}
}

/* mean pairwise cosine similarity of each raster block of bs tokens of x - sub: |sum of unit
 * vectors|^2 / size^2, in double (norms and sums in token and component order, as the device) */
static void block_self_similarity(const float *x, int n, int d, int bs, const float *sub, float *sim)
{
	int nb = (n + bs - 1) / bs;
	double *u = dg_malloc((size_t)d * sizeof(double));
	float *xi = dg_malloc((size_t)d * sizeof(float));
	for (int c = 0; c < nb; c++) {
		int a = c * bs, e = a + bs < n ? a + bs : n;
		memset(u, 0, (size_t)d * sizeof(double));
		for (int j = a; j < e; j++) {
			double nrm = 0;
			for (int t = 0; t < d; t++) {
				xi[t] = sub ? x[(size_t)j * d + t] - sub[t] : x[(size_t)j * d + t];
				nrm += (double)xi[t] * xi[t];
			}
			nrm = nrm > 0 ? 1 / sqrt(nrm) : 0;
			for (int t = 0; t < d; t++)
				u[t] += xi[t] * nrm;
		}
		double sq = 0, cnt = e - a;
		for (int t = 0; t < d; t++)
			sq += u[t] * u[t];
		sim[c] = (float)(sq / (cnt * cnt));
	}
	free(u), free(xi);
}

/* SpargeAttn stage 1 (§2.4): scores (G, G) of 128-query blocks against 128-key blocks */
static void sparge_scores(const float *q, const float *k, int n, int d, double theta, float *scores)
{
	int G = (n + KB - 1) / KB;
	/* smooth_k: the mean key, the fp32 sum of the blocks' fp32 sums (token order) over n */
	float *bsum = dg_malloc((size_t)G * d * sizeof(float)), *mean = dg_malloc((size_t)d * sizeof(float));
	for (int c = 0; c < G; c++)
		for (int t = 0; t < d; t++) {
			float s = 0.0f;
			for (int j = c * KB; j < n && j < (c + 1) * KB; j++)
				s += k[(size_t)j * d + t];
			bsum[(size_t)c * d + t] = s;
		}
	for (int t = 0; t < d; t++) {
		float s = 0.0f;
		for (int c = 0; c < G; c++)
			s += bsum[(size_t)c * d + t];
		mean[t] = s / (float)n;
	}
	float *qbar = dg_malloc((size_t)G * d * sizeof(float)), *kbar = dg_malloc((size_t)G * d * sizeof(float));
	float *qsim = dg_malloc((size_t)G * sizeof(float)), *ksim = dg_malloc((size_t)G * sizeof(float));
	block_means(q, n, d, KB, NULL, qbar);
	block_means(k, n, d, KB, mean, kbar);
	block_self_similarity(q, n, d, KB, NULL, qsim);
	block_self_similarity(k, n, d, KB, mean, ksim);
	logits_seq(qbar, G, kbar, G, d, 1.0f / sqrtf((float)d), scores);
	for (int r = 0; r < G; r++) {
		float *s = scores + (size_t)r * G;
		for (int c = 0; c < G; c++)
			s[c] = ksim[c] < theta ? -INFINITY : s[c];
		softmax(s, G, NULL);
		for (int c = 0; c < G; c++) /* low self-similarity: always kept */
			s[c] = qsim[r] < theta || ksim[c] < theta ? INFINITY : s[c];
	}
	free(bsum), free(mean), free(qbar), free(kbar), free(qsim), free(ksim);
}

/* XAttention (§2.5): antidiagonal block scores (G, G) of 128-query blocks against 128-key blocks:
 * reduced row r's logits in fmaf order (t, component) with the zero padding computed as zeros,
 * its softmax, then each block score the fp32 sum over its reduced rows, then columns, in order */
static void antidiag_scores(const float *q, const float *k, int n, int d, int S, float *scores)
{
	int R = (n + S - 1) / S, G = (n + KB - 1) / KB; /* reduced rows and columns, the last stride zero-padded */
	float scale = 1.0f / (sqrtf((float)d) * S);
	memset(scores, 0, (size_t)G * G * sizeof(float));
#pragma omp parallel
	{
		float *row = dg_malloc((size_t)R * sizeof(float));
#pragma omp for schedule(dynamic)
		for (int rb = 0; rb < G; rb++) /* a block row's reduced rows in order, on one thread */
			for (int r = 0; r < R; r++) {
				if (r * S / KB != rb)
					continue;
				for (int c = 0; c < R; c++) {
					float acc = 0.0f;
					for (int t = 0; t < S; t++) {
						int iq = r * S + S - 1 - t, ik = c * S + t;
						for (int e = 0; e < d; e++)
							acc = fmaf(iq < n ? q[(size_t)iq * d + e] : 0.0f,
								   ik < n ? k[(size_t)ik * d + e] : 0.0f, acc);
					}
					row[c] = scale * acc;
				}
				softmax(row, R, NULL);
				float *s = scores + (size_t)rb * G;
				for (int c = 0; c < R; c++)
					s[c * S / KB] += row[c];
			}
		free(row);
	}
}

int dg_peer_block_size(const dg_policy *p)
{
	if (p->mask != DG_MASK_NONE || p->score == DG_SCORE_CENTROID)
		return 0;
	if (p->approx == DG_APPROX_PISA)
		return p->block;
	return p->score == DG_SCORE_SPARGE || p->score == DG_SCORE_ANTIDIAG || p->score == DG_SCORE_RUNMAX ? KB : 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* Skip-Softmax                                                                                    */

/* the running-max gaps (G, G) of 128-query tiles against 128-key tiles, the key tiles in ascending
 * order: per query tile one fp32 GEMM of its rows against every key (scale folded in), then per row
 * the tile maxima and the running maximum over the earlier tiles */
static void skip_gaps(const float *q, const float *k, int n, int d, float *gap)
{
	int G = (n + KB - 1) / KB;
	float scale = 1.0f / sqrtf((float)d);
#pragma omp parallel
	{
		float *s = dg_malloc((size_t)KB * n * sizeof(float)), *run = dg_malloc(KB * sizeof(float));
#pragma omp for schedule(dynamic)
		for (int r = 0; r < G; r++) {
			int a = r * KB, rows = a + KB < n ? KB : n - a;
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, n, d, scale, q + (size_t)a * d, d, k, d,
				    0.0f, s, n);
			for (int i = 0; i < rows; i++)
				run[i] = -INFINITY;
			for (int c = 0; c < G; c++) {
				int c0 = c * KB, c1 = c0 + KB < n ? c0 + KB : n;
				float gmin = INFINITY;
				for (int i = 0; i < rows; i++) {
					const float *si = s + (size_t)i * n;
					float mx = -INFINITY;
					for (int j = c0; j < c1; j++)
						mx = si[j] > mx ? si[j] : mx;
					float gi = run[i] - mx; /* -inf before the first tile */
					gmin = gi < gmin ? gi : gmin;
					run[i] = mx > run[i] ? mx : run[i];
				}
				gap[(size_t)r * G + c] = gmin;
			}
		}
		free(s), free(run);
	}
}

/* a tile of the calibration: its gap (NaN as -inf: computed) and its pairs */
typedef struct {
	float gap;
	int i;
	double pairs;
} skip_tile;

static int skip_tile_cmp(const void *x, const void *y)
{
	const skip_tile *a = x, *b = y;
	return a->gap < b->gap ? -1 : a->gap > b->gap ? 1 : a->i - b->i;
}

double dg_peer_skip_threshold(const float *gap, int n, const dg_policy *p, const dg_budget *b)
{
	if (!p->matched)
		return p->threshold < 0 ? log((double)n) : p->threshold;
	int G = (n + KB - 1) / KB;
	size_t T = (size_t)G * G;
	skip_tile *t = dg_malloc(T * sizeof *t);
	for (size_t e = 0; e < T; e++) {
		int r = (int)(e / G), c = (int)(e % G);
		double rows = r * KB + KB < n ? KB : n - r * KB, cols = c * KB + KB < n ? KB : n - c * KB;
		t[e] = (skip_tile){ isnan(gap[e]) ? -INFINITY : gap[e], (int)e, rows * cols };
	}
	qsort(t, T, sizeof *t, skip_tile_cmp);
	/* the candidates: 0 (every tile at or above its running maximum computed), then each positive
	 * gap (every tile up to it computed); the density closest to rho, ties to the lower threshold */
	double nn = (double)n * n, pairs = 0, best_t = 0, best_e = INFINITY;
	size_t e = 0;
	while (e < T && t[e].gap <= 0)
		pairs += t[e++].pairs;
	best_e = fabs(pairs / nn - b->rho);
	while (e < T) {
		float v = t[e].gap;
		while (e < T && t[e].gap == v)
			pairs += t[e++].pairs;
		double err = fabs(pairs / nn - b->rho);
		if (err < best_e)
			best_e = err, best_t = v;
	}
	free(t);
	return best_t;
}

void dg_peer_skip_take(const float *gap, int n, double threshold, unsigned char *take)
{
	size_t G = (size_t)(n + KB - 1) / KB;
	for (size_t e = 0; e < G * G; e++)
		take[e] = !(gap[e] > threshold);
}

void dg_peer_block_scores(const float *q, const float *k, int n, int d, const dg_policy *p, float *scores)
{
	int bs = dg_peer_block_size(p), G = (n + bs - 1) / bs;
	if (p->score == DG_SCORE_RUNMAX) {
		skip_gaps(q, k, n, d, scores);
	} else if (p->score == DG_SCORE_SPARGE) {
		sparge_scores(q, k, n, d, p->theta, scores);
	} else if (p->score == DG_SCORE_ANTIDIAG) {
		antidiag_scores(q, k, n, d, p->stride, scores);
	} else { /* pisa: s * qbar.kbar */
		float *qbar = dg_malloc((size_t)G * d * sizeof(float)), *kbar = dg_malloc((size_t)G * d * sizeof(float));
		block_means(q, n, d, bs, NULL, qbar);
		block_means(k, n, d, bs, NULL, kbar);
		logits_seq(qbar, G, kbar, G, d, 1.0f / sqrtf((float)d), scores);
		free(qbar), free(kbar);
	}
}

void dg_peer_block_take(const float *scores, int n, const dg_policy *p, const dg_budget *b, unsigned char *take)
{
	if (p->score == DG_SCORE_RUNMAX) {
		dg_peer_skip_take(scores, n, dg_peer_skip_threshold(scores, n, p, b), take);
		return;
	}
	int bs = dg_peer_block_size(p), G = (n + bs - 1) / bs;
	int lo = b->sink_lo < n ? b->sink_lo : n, hi = b->sink_hi < n ? b->sink_hi : n;
	int *size = dg_malloc((size_t)G * sizeof(int)), *sink = dg_malloc((size_t)G * sizeof(int));
	for (int c = 0; c < G; c++) { /* raster blocks: the same for queries and keys */
		int a = c * bs, e = a + bs < n ? a + bs : n, l = a > lo ? a : lo, h = e < hi ? e : hi;
		size[c] = e - a;
		sink[c] = h > l ? h - l : 0;
	}
	dg_peer_take(scores, G, size, G, size, sink, n, p, b, 0, take);
	free(size), free(sink);
}

int dg_peer_block_groups(int n, const dg_policy *p, int text, dg_groups *g, int **row)
{
	int bs = dg_peer_block_size(p), G = (n + bs - 1) / bs;
	dg_groups_raster(g, n, bs);
	dg_selection one = { G, dg_malloc((size_t)(G + 1) * sizeof(int64_t)), dg_malloc((size_t)G * sizeof(int)) };
	for (int r = 0; r <= G; r++)
		one.off[r] = r;
	for (int r = 0; r < G; r++)
		one.idx[r] = r; /* each group's list: its own score row */
	dg_joint_split(g, &one, text);
	*row = dg_malloc((size_t)g->ngroups * sizeof(int));
	for (int r = 0; r < g->ngroups; r++)
		(*row)[r] = g->perm[g->off[r]] < text ? -1 : one.idx[one.off[r]];
	dg_selection_free(&one);
	if (text <= 0)
		return 0;
	int64_t forced = p->approx == DG_APPROX_PISA ? ((int64_t)text + bs - 1) / bs * bs : text;
	return forced < n ? (int)forced : n;
}

/* ---------------------------------------------------------------------------------------------- */
/* svg2                                                                                            */

static void svg2(const float *q, const float *k, int n, int d, const dg_policy *p, const dg_budget *b,
		 dg_peer_state **state, dg_groups *g, dg_selection *sel)
{
	int qc, kc, min_parts, iters = 2;
	dg_peer_svg2_clusters(p, n, &qc, &kc, &min_parts);
	dg_peer_state *st = *state;
	if (!st || st->qc != qc || st->kc != kc || st->d != d || !st->cq) {
		dg_peer_state_free(st);
		st = *state = dg_malloc(sizeof *st);
		*st = (dg_peer_state){ qc, kc, d, dg_malloc((size_t)qc * d * sizeof(float)),
				       dg_malloc((size_t)kc * d * sizeof(float)), NULL, NULL };
		for (int a = 0; a < qc; a++) /* evenly spaced tokens */
			memcpy(st->cq + (size_t)a * d, q + (size_t)((int64_t)a * n / qc) * d, d * sizeof(float));
		for (int a = 0; a < kc; a++)
			memcpy(st->ck + (size_t)a * d, k + (size_t)((int64_t)a * n / kc) * d, d * sizeof(float));
		iters = 50;
	}
	int *ql = dg_malloc((size_t)n * sizeof(int)), *kl = dg_malloc((size_t)n * sizeof(int));
	int *qkeep = dg_malloc((size_t)qc * sizeof(int)), *kkeep = dg_malloc((size_t)kc * sizeof(int));
	svg2_kmeans(q, n, d, st->cq, qc, iters, ql);
	svg2_kmeans(k, n, d, st->ck, kc, iters, kl);
	dg_groups kp;
	dg_groups_from_labels(ql, n, qc, g, qkeep);
	dg_groups_from_labels(kl, n, kc, &kp, kkeep);
	/* size-weighted softmax over key clusters of s * Cq.Ck */
	int G = g->ngroups, P = kp.ngroups;
	float *cq = dg_malloc((size_t)G * d * sizeof(float)), *ck = dg_malloc((size_t)P * d * sizeof(float));
	for (int t = 0; t < G; t++)
		memcpy(cq + (size_t)t * d, st->cq + (size_t)qkeep[t] * d, d * sizeof(float));
	for (int t = 0; t < P; t++)
		memcpy(ck + (size_t)t * d, st->ck + (size_t)kkeep[t] * d, d * sizeof(float));
	float *s = dg_malloc((size_t)G * P * sizeof(float));
	double *size = dg_malloc((size_t)P * sizeof(double));
	for (int c = 0; c < P; c++)
		size[c] = kp.off[c + 1] - kp.off[c];
	logits_seq(cq, G, ck, P, d, 1.0f / sqrtf((float)d), s);
	for (int r = 0; r < G; r++)
		softmax(s + (size_t)r * P, P, size);
	free(size);
	peer_select(s, g, &kp, n, p, b, min_parts, sel);
	dg_groups_free(&kp);
	free(ql), free(kl), free(qkeep), free(kkeep), free(cq), free(ck), free(s);
}

/* ---------------------------------------------------------------------------------------------- */
/* static masks                                                                                    */

static int bitlen(long x)
{
	int b = 0;
	for (; x > 0; x >>= 1)
		b++;
	return b;
}

/* key lists from a block mask (G, P) over 128-key blocks of the video tokens after text; text
 * rows and columns dense (g: text in raster runs, then 128-query blocks of the video tokens) */
static void sel_from_block_mask(const unsigned char *mask, int G, int P, int n, int text,
				const dg_groups *g, dg_selection *sel)
{
	sel->ngroups = g->ngroups;
	sel->off = dg_malloc((size_t)(g->ngroups + 1) * sizeof(int64_t));
	sel->idx = dg_malloc((size_t)g->ngroups * n * sizeof(int));
	int ntext = g->ngroups - G;
	sel->off[0] = 0;
	for (int r = 0; r < g->ngroups; r++) {
		int64_t at = sel->off[r];
		for (int j = 0; j < n; j++)
			if (r < ntext || j < text || mask[(size_t)(r - ntext) * P + (j - text) / KB])
				sel->idx[at++] = j;
		sel->off[r + 1] = at;
	}
}

/*
 * Radial attention (§2.6) for Wan: the block mask (G, G) of the video tokens (F frames). Per frame
 * pair (i, j) the released code builds a token mask local (rows, cols) (get_window_width,
 * get_diagonal_split_mask): entry (rr + a, rc + c) for frame tokens a, c < tpf is set when j == 0 or
 * (split and |c - a| <= width), rr and rc the frames' offsets in their first 128-block; then
 * shrinkMaskStrict keeps the block (x, y) (whole 128 x 128 blocks of local) whose columns with
 * more than KB/3 set entries exceed 0.6 of its non-empty columns. A column's count is the length of
 * an interval (the block's rows, the frame's rows and the band |c - a| <= floor(width)), so each
 * block is counted in O(KB) instead of building the O(tpf^2) token mask: the same counts, the same
 * mask (tests/policy/test_peers.c checks it against the token-mask form).
 */
static void radial_mask(int F, int video, double decay, unsigned char *mask)
{
	int G = (video + KB - 1) / KB;
	long tpf = video / F;
	long bl = bitlen(tpf), pad = ((tpf - 1) / KB + 1) * KB;
	memset(mask, 0, (size_t)G * G);
	for (int i = 0; i < F; i++)
		for (int j = 0; j < F; j++) {
			long dist = labs((long)i - j), rr = (long)i * tpf % KB, rc = (long)j * tpf % KB;
			long rows = rr + pad, cols = rc + pad;
			double len = ldexp(1.0, (int)bl - bitlen(dist));
			double width = dist == 0 ? (double)tpf : dist == 1 ? (double)(tpf / 2)
					: len * decay >= KB ? len * decay : KB;
			bool split = len >= KB || dist % (long)(KB / len) == 0;
			if (j != 0 && !split)
				continue; /* an empty token mask keeps no block */
			long w = (long)floor(width); /* |c - a| <= width for integers */
			long br = rows / KB, bc = cols / KB;
			for (long x = 0; x < br; x++) {
				/* frame rows a of block x: [a0, a1] */
				long a0 = x * KB - rr > 0 ? x * KB - rr : 0, a1 = x * KB + KB - 1 - rr < tpf - 1 ? x * KB + KB - 1 - rr : tpf - 1;
				for (long y = 0; y < bc; y++) {
					int nonzero = 0, high = 0;
					for (long cc = 0; cc < KB; cc++) {
						long c = y * KB + cc - rc, lo = a0, hi = a1;
						if (c < 0 || c >= tpf || lo > hi)
							continue;
						if (j != 0) { /* the band */
							lo = c - w > lo ? c - w : lo;
							hi = c + w < hi ? c + w : hi;
						}
						long cnt = hi >= lo ? hi - lo + 1 : 0;
						nonzero += cnt > 0;
						high += cnt * 3 > KB;
					}
					long R = (long)i * tpf / KB + x, C = (long)j * tpf / KB + y;
					if (R < G && C < G && high > 0.6 * (nonzero + 1e-9))
						mask[R * G + C] = 1;
				}
			}
		}
}

/* Radial's computed density from its block mask (G, G) of the video tokens: text rows and columns
 * dense */
static double radial_density(const unsigned char *mask, int G, int video, int text)
{
	double n = (double)video + text, pairs = text * n + (double)video * text;
	for (int R = 0; R < G; R++)
		for (int C = 0; C < G; C++)
			if (mask[(size_t)R * G + C])
				pairs += (double)(R * KB + KB < video ? KB : video - R * KB) *
					 (C * KB + KB < video ? KB : video - C * KB);
	return pairs / (n * n);
}

/*
 * Radial with budget=matched: the decay in [2^-10, 2^10] whose mask's density is closest to rho
 * (ties: the lower decay), bisected on log2(decay) (the mask widens with the decay). The mask
 * depends on the shape alone, so the decay is calibrated once per (frames, video, text, rho) in a
 * process-wide table (the same answer on every unit and backend).
 */
static double radial_matched(int F, int video, int text, double rho)
{
	enum { SLOTS = 64 };
	static struct memo { int F, video, text; double rho, decay; } memo[SLOTS];
	static int nmemo;
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < nmemo; i++)
		if (memo[i].F == F && memo[i].video == video && memo[i].text == text && memo[i].rho == rho) {
			double dec = memo[i].decay;
			pthread_mutex_unlock(&lock);
			return dec;
		}
	int G = (video + KB - 1) / KB;
	unsigned char *mask = dg_malloc((size_t)G * G);
	double lo = -10, hi = 10, dlo, dhi;
	radial_mask(F, video, exp2(lo), mask);
	dlo = radial_density(mask, G, video, text);
	radial_mask(F, video, exp2(hi), mask);
	dhi = radial_density(mask, G, video, text);
	if (dlo >= rho) {
		hi = lo, dhi = dlo;
	} else if (dhi > rho) {
		for (int it = 0; it < DG_PEER_MATCH_STEPS; it++) {
			double mid = 0.5 * (lo + hi);
			radial_mask(F, video, exp2(mid), mask);
			double dm = radial_density(mask, G, video, text);
			if (dm >= rho)
				hi = mid, dhi = dm;
			else
				lo = mid, dlo = dm;
		}
	}
	double dec = exp2(dlo < rho && rho - dlo <= dhi - rho ? lo : hi);
	free(mask);
	if (nmemo < SLOTS)
		memo[nmemo++] = (struct memo){ F, video, text, rho, dec };
	pthread_mutex_unlock(&lock);
	return dec;
}

/* Sliding tile attention (§2.7): tiles of 6x8x8, each query tile attends the tiles of a window of
 * w tiles per axis, its centre clamped inside the tile grid */
static const int sta_tile[3] = { 6, 8, 8 };

/* the token range [lo, hi) per axis of the window of w[a] tiles on axis a of video tile t
 * (row-major in the tile grid nt) */
static void sta_window(int t, const int nt[3], const int w[3], int lo[3], int hi[3])
{
	int pos[3] = { t / (nt[1] * nt[2]), t / nt[2] % nt[1], t % nt[2] };
	for (int a = 0; a < 3; a++) {
		int h = w[a] / 2, c = pos[a] < h ? h : pos[a] > nt[a] - 1 - h ? nt[a] - 1 - h : pos[a];
		lo[a] = (c - h) * sta_tile[a];
		hi[a] = (c - h + w[a]) * sta_tile[a];
	}
}

/* STA's computed density with a window of w tiles: text rows dense, each video tile's queries
 * against the text and its window's tokens (g: the tiles of sta()) */
static double sta_density(int n, const int grid[3], int text, const int nt[3], const int w[3],
			  const dg_groups *g)
{
	int ntext = (text + DG_GROUP_SIZE - 1) / DG_GROUP_SIZE, lo[3], hi[3];
	double pairs = (double)text * n;
	for (int r = ntext; r < g->ngroups; r++) {
		sta_window(r - ntext, nt, w, lo, hi);
		double keys = 1;
		for (int a = 0; a < 3; a++) {
			int l = lo[a] > 0 ? lo[a] : 0, h = hi[a] < grid[a] ? hi[a] : grid[a];
			keys *= h > l ? h - l : 0;
		}
		pairs += (double)(g->off[r + 1] - g->off[r]) * (text + keys);
	}
	return pairs / ((double)n * n);
}

static int sta(int n, const int grid[3], int text, int win, double rho, bool matched, dg_groups *g,
	       dg_selection *sel)
{
	const int *tile = sta_tile;
	if (dg_groups_tiles(g, n, grid, text, tile))
		return -1;
	int nt[3], ntext = (text + DG_GROUP_SIZE - 1) / DG_GROUP_SIZE;
	for (int a = 0; a < 3; a++)
		nt[a] = (grid[a] + tile[a] - 1) / tile[a];
	int w[3] = { win, win, win };
	if (matched) { /* the per-axis windows (1 .. tiles on the axis) whose density is closest to rho;
			* ties: the first in (T, H, W) lexicographic order */
		double best = INFINITY;
		int c[3];
		for (c[0] = 1; c[0] <= nt[0]; c[0]++)
			for (c[1] = 1; c[1] <= nt[1]; c[1]++)
				for (c[2] = 1; c[2] <= nt[2]; c[2]++) {
					double e = fabs(sta_density(n, grid, text, nt, c, g) - rho);
					if (e < best)
						best = e, memcpy(w, c, sizeof w);
				}
	}
	sel->ngroups = g->ngroups;
	sel->off = dg_malloc((size_t)(g->ngroups + 1) * sizeof(int64_t));
	sel->idx = dg_malloc((size_t)g->ngroups * n * sizeof(int));
	unsigned char *in = dg_malloc((size_t)n);
	sel->off[0] = 0;
	for (int r = 0; r < g->ngroups; r++) {
		int lo[3], hi[3];
		sta_window(r - ntext, nt, w, lo, hi);
		memset(in, r < ntext, (size_t)n);
		memset(in, 1, (size_t)text);
		for (int f = lo[0] > 0 ? lo[0] : 0; f < hi[0] && f < grid[0]; f++)
			for (int y = lo[1] > 0 ? lo[1] : 0; y < hi[1] && y < grid[1]; y++)
				for (int x = lo[2] > 0 ? lo[2] : 0; x < hi[2] && x < grid[2]; x++)
					in[text + ((size_t)f * grid[1] + y) * grid[2] + x] = 1;
		int64_t at = sel->off[r];
		for (int j = 0; j < n; j++)
			if (in[j])
				sel->idx[at++] = j;
		sel->off[r + 1] = at;
	}
	free(in);
	return 0;
}

/* DiTFastAttn's computed density with half-width w: text rows and columns dense, each video query
 * the video keys within w */
int64_t dg_peer_window_keys(int n, int text, int w)
{
	int64_t pairs = (int64_t)text * n + (int64_t)(n - text) * text;
	for (int i = text; i < n; i++)
		pairs += (i + w < n - 1 ? i + w : n - 1) - (i - w > text ? i - w : text) + 1;
	return pairs;
}

static double window_density(int n, int text, int w)
{
	return (double)dg_peer_window_keys(n, text, w) / ((double)n * n);
}

/* the half-width in 0 .. n whose density is closest to rho (ties: the narrower; the density is
 * nondecreasing in w: bisection for the narrowest w reaching rho, then it or w - 1) */
static int window_matched(int n, int text, double rho)
{
	int lo = 0, hi = n;
	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;
		if (window_density(n, text, mid) >= rho)
			hi = mid;
		else
			lo = mid + 1;
	}
	if (lo > 0 && rho - window_density(n, text, lo - 1) <= window_density(n, text, lo) - rho)
		lo--;
	return lo;
}

int dg_peer_window_width(const dg_policy *p, const dg_budget *b, int n, int text)
{
	return p->matched ? window_matched(n, text, b->rho) : p->window;
}

/* DiTFastAttn's window (§2.9): query i attends keys |i - j| <= w, text rows and columns dense */
static void window(int n, int text, int w, dg_groups *g, dg_selection *sel)
{
	dg_groups_raster(g, n, 1);
	sel->ngroups = n;
	sel->off = dg_malloc((size_t)(n + 1) * sizeof(int64_t));
	int64_t row = text + 2 * (int64_t)w + 1 < n ? text + 2 * (int64_t)w + 1 : n;
	sel->idx = dg_malloc((size_t)((int64_t)text * n + (n - text) * row) * sizeof(int));
	sel->off[0] = 0;
	for (int i = 0; i < n; i++) {
		int64_t at = sel->off[i];
		for (int j = 0; j < n; j++)
			if (i < text || j < text || abs(i - j) <= w)
				sel->idx[at++] = j;
		sel->off[i + 1] = at;
	}
}

/* ---------------------------------------------------------------------------------------------- */

/* Radial's metadata: the block mask of the video tokens, raster 128-query blocks after the text */
static int radial(int n, const int grid[3], int text, const dg_policy *p, const dg_budget *b, dg_groups *g,
		  dg_selection *sel)
{
	int F = grid[0], video = n - text;
	if ((long)grid[0] * grid[1] * grid[2] != video || F < 1)
		return dg_error("radial mask: grid %dx%dx%d + %d text tokens does not match %d tokens", grid[0],
				grid[1], grid[2], text, n);
	int G = (video + KB - 1) / KB;
	unsigned char *mask = dg_malloc((size_t)G * G);
	radial_mask(F, video, p->matched ? radial_matched(F, video, text, b->rho) : p->decay, mask);
	int one[3] = { 1, 1, video }; /* raster 128-query blocks of the video after the text */
	int tile[3] = { 1, 1, KB };
	int rc = dg_groups_tiles(g, n, one, text, tile);
	DG_ASSERT(rc == 0 && g->ngroups == (text + KB - 1) / KB + G);
	sel_from_block_mask(mask, G, G, n, text, g, sel);
	free(mask);
	return 0;
}

/* a deep copy of groups and lists */
static void meta_copy(const dg_groups *g, const dg_selection *s, dg_groups *go, dg_selection *so)
{
	int64_t keys = s->off[s->ngroups];
	*go = (dg_groups){ g->n, g->ngroups, dg_malloc((size_t)(g->n ? g->n : 1) * sizeof(int)),
			   dg_malloc((size_t)(g->ngroups + 1) * sizeof(int)) };
	memcpy(go->perm, g->perm, (size_t)g->n * sizeof(int));
	memcpy(go->off, g->off, (size_t)(g->ngroups + 1) * sizeof(int));
	*so = (dg_selection){ s->ngroups, dg_malloc((size_t)(s->ngroups + 1) * sizeof(int64_t)),
			      dg_malloc((size_t)(keys ? keys : 1) * sizeof(int)) };
	memcpy(so->off, s->off, (size_t)(s->ngroups + 1) * sizeof(int64_t));
	memcpy(so->idx, s->idx, (size_t)keys * sizeof(int));
}

bool dg_peer_static_key(const dg_policy *p, const dg_budget *b, int n, const int grid[3], int text,
			dg_peer_mask_key *key)
{
	if (p->mask != DG_MASK_STA && p->mask != DG_MASK_RADIAL)
		return false;
	*key = (dg_peer_mask_key){ .mask = p->mask, .n = n, .text = text, .grid = { grid[0], grid[1], grid[2] },
				   .window = p->window, .matched = p->matched, .decay = p->decay,
				   .rho = p->matched ? b->rho : 0 };
	return true;
}

bool dg_peer_mask_key_eq(const dg_peer_mask_key *a, const dg_peer_mask_key *b)
{
	return a->mask == b->mask && a->n == b->n && a->text == b->text && !memcmp(a->grid, b->grid, sizeof a->grid) &&
	       a->window == b->window && a->matched == b->matched && a->decay == b->decay && a->rho == b->rho;
}

/*
 * The static masks (radial, sta: dg_peer_static_key) once per key per process: the last MASK_SLOTS
 * made are kept (process-wide, first in first out), a unit gets a copy.
 */
static int static_mask(const dg_peer_mask_key *key, int n, const int grid[3], int text, const dg_policy *p,
		       const dg_budget *b, dg_groups *g, dg_selection *sel)
{
	enum { MASK_SLOTS = 8 };
	static struct mask_memo {
		dg_peer_mask_key key;
		dg_groups g;
		dg_selection s;
	} memo[MASK_SLOTS];
	static int used, next;
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < used; i++) {
		struct mask_memo *m = &memo[i];
		if (dg_peer_mask_key_eq(&m->key, key)) {
			meta_copy(&m->g, &m->s, g, sel);
			pthread_mutex_unlock(&lock);
			return 0;
		}
	}
	int rc = p->mask == DG_MASK_STA ? sta(n, grid, text, p->window, b->rho, p->matched, g, sel)
					: radial(n, grid, text, p, b, g, sel);
	if (rc == 0) {
		struct mask_memo *m = &memo[next];
		if (used == MASK_SLOTS)
			dg_groups_free(&m->g), dg_selection_free(&m->s);
		m->key = *key;
		meta_copy(g, sel, &m->g, &m->s);
		used += used < MASK_SLOTS;
		next = (next + 1) % MASK_SLOTS;
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

static int peer_metadata(const float *q, const float *k, int n, int d, const dg_policy *p,
			 const dg_budget *b, const int grid[3], int text, dg_peer_state **state,
			 dg_groups *g, dg_selection *sel)
{
	dg_peer_mask_key key;
	if (dg_peer_static_key(p, b, n, grid, text, &key))
		return static_mask(&key, n, grid, text, p, b, g, sel);
	if (p->mask == DG_MASK_WINDOW) {
		window(n, text, dg_peer_window_width(p, b, n, text), g, sel);
		return 0;
	}
	if (p->score == DG_SCORE_CENTROID) {
		svg2(q, k, n, d, p, b, state, g, sel);
		return 0;
	}
	/* block methods: query blocks (128, or pisa's) against key blocks of the same size */
	int bs = dg_peer_block_size(p);
	dg_groups kp;
	dg_groups_raster(g, n, bs);
	dg_groups_raster(&kp, n, bs);
	float *s = dg_malloc((size_t)g->ngroups * kp.ngroups * sizeof(float));
	dg_peer_block_scores(q, k, n, d, p, s);
	if (p->score == DG_SCORE_RUNMAX) { /* Skip-Softmax: the tiles within the threshold, plus the sinks */
		unsigned char *take = dg_malloc((size_t)g->ngroups * kp.ngroups + 1);
		dg_peer_block_take(s, n, p, b, take);
		take_expand(take, g->ngroups, &kp, n, b, sel);
		free(take);
	} else {
		peer_select(s, g, &kp, n, p, b, 0, sel);
	}
	dg_groups_free(&kp);
	free(s);
	return 0;
}

int dg_peer_metadata(const float *q, const float *k, int n, int d, const dg_policy *p,
		     const dg_budget *b, const int grid[3], int text, dg_peer_state **state,
		     dg_groups *g, dg_selection *sel)
{
	memset(g, 0, sizeof *g);
	if (peer_metadata(q, k, n, d, p, b, grid, text, state, g, sel))
		return -1;
	/* joint attention (docs/spec.md §3.7): text rows dense, text keys kept (the masks do so
	 * already); a group of the peer's own that straddles text and video is split in two */
	dg_joint_split(g, sel, text);
	dg_joint_selection(g, sel, n, text, p->approx == DG_APPROX_PISA ? p->block : 1);
	return 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* PISA                                                                                            */

void dg_pisa_combine(const float *q, const float *k, const float *v, const float *lse, int n,
		     int d, int block, const dg_groups *g, const dg_selection *sel,
		     const float *o_sp, const float *mass, float *out)
{
	int P = (n + block - 1) / block;
	float scale = 1.0f / sqrtf((float)d);
	/* per key block: kbar (P, d), vsum (P, d), H (P, d, d) = sum_j (k_j - kbar) v_j^T */
	float *kbar = dg_calloc((size_t)P * d, sizeof(float)), *vsum = dg_calloc((size_t)P * d, sizeof(float));
	float *H = dg_calloc((size_t)P * d * d, sizeof(float));
	for (int c = 0; c < P; c++) {
		int a = c * block, e = a + block < n ? a + block : n;
		float *kb = kbar + (size_t)c * d, *vs = vsum + (size_t)c * d, *h = H + (size_t)c * d * d;
		for (int j = a; j < e; j++)
			for (int x = 0; x < d; x++)
				kb[x] += k[(size_t)j * d + x] / (float)(e - a), vs[x] += v[(size_t)j * d + x];
		for (int j = a; j < e; j++)
			for (int x = 0; x < d; x++) {
				float dk = k[(size_t)j * d + x] - kb[x];
				for (int y = 0; y < d; y++)
					h[(size_t)x * d + y] += dk * v[(size_t)j * d + y];
			}
	}
#pragma omp parallel
	{
		unsigned char *taken = dg_malloc((size_t)P);
		double *num = dg_malloc((size_t)d * sizeof(double));
		float *hq = dg_malloc((size_t)d * sizeof(float));
#pragma omp for schedule(dynamic)
		for (int grp = 0; grp < g->ngroups; grp++) {
			memset(taken, 0, (size_t)P);
			for (int64_t t = sel->off[grp]; t < sel->off[grp + 1]; t++)
				taken[sel->idx[t] / block] = 1;
			for (int pos = g->off[grp]; pos < g->off[grp + 1]; pos++) {
				int i = g->perm[pos];
				const float *qi = q + (size_t)i * d;
				double den = mass[i];
				for (int x = 0; x < d; x++)
					num[x] = (double)mass[i] * o_sp[(size_t)i * d + x];
				for (int c = 0; c < P; c++) {
					if (taken[c])
						continue;
					int cnt = (c + 1) * block <= n ? block : n - c * block;
					double w = exp(scale * cblas_sdot(d, qi, 1, kbar + (size_t)c * d, 1) - lse[i]);
					cblas_sgemv(CblasRowMajor, CblasTrans, d, d, scale, H + (size_t)c * d * d, d,
						    qi, 1, 0.0f, hq, 1);
					for (int x = 0; x < d; x++)
						num[x] += w * (vsum[(size_t)c * d + x] + hq[x]);
					den += w * cnt;
				}
				for (int x = 0; x < d; x++)
					out[(size_t)i * d + x] = (float)(num[x] / den);
			}
		}
		free(taken), free(num), free(hq);
	}
	free(kbar), free(vsum), free(H);
}
