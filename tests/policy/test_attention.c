/*
 * test_attention.c: the CPU attention, grouping, scoring, selection and metrics against fp64
 * references and identities (docs/spec.md §9). Fresh random inputs each run (seed printed; set
 * DSGAP_TEST_SEED to repeat one). Run: ctest -R test_attention, or build/tests/test_attention.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "policy/attention.h"
#include "policy/groups.h"
#include "policy/metrics.h"
#include "policy/presets.h"
#include "ref64.h"
#include "policy/select.h"
#include "testhelp.h"
#include "util/util.h"

static gsl_rng *rng;

static float *randn(size_t n, double sigma)
{
	float *x = dg_malloc(n * sizeof(float));
	for (size_t i = 0; i < n; i++)
		x[i] = (float)gsl_ran_gaussian(rng, sigma);
	return x;
}

/* a random permutation of 0..n-1 cut into groups of random sizes (1, 2, 3 and up to 200) */
static void random_groups(dg_groups *g, int n)
{
	g->n = n;
	g->perm = dg_malloc(n * sizeof(int));
	g->off = dg_malloc((n + 1) * sizeof(int));
	for (int i = 0; i < n; i++)
		g->perm[i] = i;
	gsl_ran_shuffle(rng, g->perm, n, sizeof(int));
	static const int sizes[] = { 1, 2, 3, 7, 64, 128, 200 };
	int k = 0, pos = 0;
	while (pos < n) {
		g->off[k++] = pos;
		pos += sizes[gsl_rng_uniform_int(rng, 7)];
		pos = pos < n ? pos : n;
	}
	g->off[k] = n;
	g->ngroups = k;
}

/* random ascending key lists, each of 1..n keys */
static void random_selection(dg_selection *s, int ngroups, int n)
{
	s->ngroups = ngroups;
	s->off = dg_malloc((ngroups + 1) * sizeof(int64_t));
	s->off[0] = 0;
	int *tmp = dg_malloc(n * sizeof(int));
	int **lists = dg_malloc(ngroups * sizeof(int *));
	for (int g = 0; g < ngroups; g++) {
		int c = 1 + (int)gsl_rng_uniform_int(rng, n);
		for (int j = 0; j < n; j++)
			tmp[j] = j;
		lists[g] = dg_malloc(c * sizeof(int));
		gsl_ran_choose(rng, lists[g], c, tmp, n, sizeof(int)); /* sorted, as chosen in order */
		s->off[g + 1] = s->off[g] + c;
	}
	s->idx = dg_malloc(s->off[ngroups] * sizeof(int));
	for (int g = 0; g < ngroups; g++) {
		memcpy(s->idx + s->off[g], lists[g], (s->off[g + 1] - s->off[g]) * sizeof(int));
		free(lists[g]);
	}
	free(lists);
	free(tmp);
}

static void test_dense(int n, int d)
{
	float *q = randn((size_t)n * d, 1.6), *k = randn((size_t)n * d, 1.6), *v = randn((size_t)n * d, 1);
	float *o = dg_alloc_poisoned((size_t)n * d), *lse = dg_alloc_poisoned(n);
	dg_attn_dense(q, k, v, n, n, d, o, lse);
	double *ref = dg_malloc((size_t)n * d * sizeof(double)), lerr = 0;
	for (int i = 0; i < n; i++) {
		double l = ref_attn_row(q + (size_t)i * d, k, v, d, NULL, n, ref + (size_t)i * d);
		double e = fabs(lse[i] - l) / fmax(1, fabs(l));
		lerr = e > lerr || isnan(e) ? e : lerr;
	}
	double oerr = max_rel_diff(o, ref, (size_t)n * d);
	CHECKF(oerr < 2e-5, "dense n=%d d=%d output vs fp64: max rel %.2e", n, d, oerr);
	CHECKF(lerr < 2e-6, "dense n=%d d=%d lse vs fp64: max rel %.2e", n, d, lerr);
	float *lse_only = dg_alloc_poisoned(n);
	dg_attn_dense(q, k, NULL, n, n, d, NULL, lse_only); /* no V, no output: the LSE pass alone */
	CHECKF(!memcmp(lse_only, lse, (size_t)n * sizeof(float)), "dense n=%d d=%d: the LSE alone (o NULL) has the "
	       "same bits as with the output", n, d);
	free(lse_only);
	/* permuting queries permutes outputs */
	int *perm = dg_malloc(n * sizeof(int));
	for (int i = 0; i < n; i++)
		perm[i] = i;
	gsl_ran_shuffle(rng, perm, n, sizeof(int));
	float *qp = dg_malloc((size_t)n * d * sizeof(float)), *op = dg_alloc_poisoned((size_t)n * d);
	for (int i = 0; i < n; i++)
		memcpy(qp + (size_t)i * d, q + (size_t)perm[i] * d, d * sizeof(float));
	dg_attn_dense(qp, k, v, n, n, d, op, NULL);
	double perr = 0;
	for (int i = 0; i < n; i++)
		for (int c = 0; c < d; c++)
			perr = fmax(perr, fabs(op[(size_t)i * d + c] - o[(size_t)perm[i] * d + c]));
	CHECKF(perr < 1e-5, "dense n=%d d=%d: permuted queries give permuted outputs (%.1e)", n, d, perr);
	free(q), free(k), free(v), free(o), free(lse), free(ref), free(perm), free(qp), free(op);
}

static void test_sparse(int n, int d)
{
	float *q = randn((size_t)n * d, 1.6), *k = randn((size_t)n * d, 1.6), *v = randn((size_t)n * d, 1);
	float *res = randn((size_t)n * d, 0.1);
	float *lse = dg_alloc_poisoned(n), *o = dg_alloc_poisoned((size_t)n * d);
	float *mass = dg_alloc_poisoned(n);
	dg_attn_dense(q, k, v, n, n, d, o, lse);
	dg_groups g;
	dg_selection s;
	random_groups(&g, n);
	random_selection(&s, g.ngroups, n);
	for (size_t e = 0; e < (size_t)n * d; e++)
		o[e] = NAN;
	int64_t pairs = dg_attn_sparse(q, k, v, n, d, &g, &s, res, lse, o, mass);
	double *ref = dg_malloc((size_t)n * d * sizeof(double)), *mref = dg_malloc(n * sizeof(double));
	double full[256];
	int64_t want = 0;
	for (int grp = 0; grp < g.ngroups; grp++) {
		const int *keys = s.idx + s.off[grp];
		int nk = (int)(s.off[grp + 1] - s.off[grp]);
		for (int p = g.off[grp]; p < g.off[grp + 1]; p++) {
			int i = g.perm[p];
			double *r = ref + (size_t)i * d;
			ref_attn_row(q + (size_t)i * d, k, v, d, keys, nk, r);
			for (int c = 0; c < d; c++)
				r[c] += res[(size_t)i * d + c];
			double l = ref_attn_row(q + (size_t)i * d, k, v, d, NULL, n, full);
			mref[i] = 0;
			for (int t = 0; t < nk; t++)
				mref[i] += ref_prob(q + (size_t)i * d, k + (size_t)keys[t] * d, d, l);
			want += nk;
		}
	}
	double oerr = max_rel_diff(o, ref, (size_t)n * d), merr = max_rel_diff(mass, mref, n);
	CHECKF(oerr < 2e-5, "sparse n=%d d=%d (%d groups, sizes 1..200) + residual vs fp64: %.2e", n, d,
	       g.ngroups, oerr);
	CHECKF(merr < 1e-5, "sparse n=%d d=%d retained mass vs fp64: %.2e", n, d, merr);
	CHECKF(pairs == want, "sparse n=%d d=%d counts %lld computed pairs", n, d, (long long)pairs);
	dg_groups_free(&g);
	dg_selection_free(&s);
	free(q), free(k), free(v), free(res), free(lse), free(o), free(mass), free(ref), free(mref);
}

/* rho = 1 and a same-step residual both give the dense output, for every grouping */
static void test_identities(int n, int d)
{
	float *q = randn((size_t)n * d, 1.6), *k = randn((size_t)n * d, 1.6), *v = randn((size_t)n * d, 1);
	float *od = dg_alloc_poisoned((size_t)n * d), *lse = dg_alloc_poisoned(n);
	float *os = dg_alloc_poisoned((size_t)n * d), *mass = dg_alloc_poisoned(n);
	dg_attn_dense(q, k, v, n, n, d, od, lse);
	int grid[3] = { 1, 1, n };
	for (int kind = 0; kind < DG_GROUP_COUNT; kind++) {
		dg_groups g;
		if (dg_groups_build(&g, kind, q, n, d, grid, 0))
			continue;
		float *scores = dg_malloc((size_t)g.ngroups * n * sizeof(float));
		dg_scores_pooled(q, k, n, d, &g, DG_KV_TOKEN, scores);
		dg_budget all = { DG_KV_TOKEN, DG_BUDGET_TOPK, 1.0, 0, 0, 0 };
		dg_selection s;
		dg_select_groups(&s, scores, g.ngroups, n, &all);
		int64_t pairs = dg_attn_sparse(q, k, v, n, d, &g, &s, NULL, lse, os, mass);
		double e = 0, me = 0, peak = 0;
		for (size_t x = 0; x < (size_t)n * d; x++)
			peak = fmax(peak, fabs(od[x]));
		for (size_t x = 0; x < (size_t)n * d; x++)
			e = fmax(e, fabs(os[x] - od[x]) / peak);
		for (int i = 0; i < n; i++)
			me = fmax(me, fabs(mass[i] - 1));
		CHECKF(e < 1e-5 && me < 1e-5 && pairs == (int64_t)n * n,
		       "rho=1 with %s groups equals dense (max |diff| / max |o| %.1e, mass %.1e)", dg_group_name(kind), e, me);
		/* same-step residual: sparse(sel) + (dense - sparse(sel)) == dense */
		dg_budget b = { DG_KV_TOKEN, DG_BUDGET_TOPK, 0.1, 0, 0, 0 };
		dg_selection s2;
		dg_select_groups(&s2, scores, g.ngroups, n, &b);
		dg_attn_sparse(q, k, v, n, d, &g, &s2, NULL, NULL, os, NULL);
		float *r = dg_malloc((size_t)n * d * sizeof(float));
		for (size_t x = 0; x < (size_t)n * d; x++)
			r[x] = od[x] - os[x];
		dg_attn_sparse(q, k, v, n, d, &g, &s2, r, NULL, os, NULL);
		e = 0;
		for (size_t x = 0; x < (size_t)n * d; x++)
			e = fmax(e, fabs(os[x] - od[x]));
		CHECKF(e < 1e-5, "same-step residual with %s groups is exact (%.1e)", dg_group_name(kind), e);
		free(r);
		free(scores);
		dg_selection_free(&s);
		dg_selection_free(&s2);
		dg_groups_free(&g);
	}
	free(q), free(k), free(v), free(od), free(lse), free(os), free(mass);
}

static int is_permutation(const dg_groups *g)
{
	char *seen = calloc(g->n, 1);
	int ok = g->off[0] == 0 && g->off[g->ngroups] == g->n;
	for (int i = 0; i < g->n && ok; i++) {
		ok = g->perm[i] >= 0 && g->perm[i] < g->n && !seen[g->perm[i]];
		if (ok)
			seen[g->perm[i]] = 1;
	}
	for (int k = 0; k < g->ngroups && ok; k++)
		ok = g->off[k + 1] > g->off[k];
	free(seen);
	return ok;
}

static void test_groups(void)
{
	/* 8 clusters of 128 queries in random token order: PCA bisection should recover them */
	int F = 4, H = 16, W = 16, n = F * H * W, d = 64;
	float *centres = randn(8 * d, 1), *q = randn((size_t)n * d, 0.3);
	int *cl = dg_malloc(n * sizeof(int));
	for (int i = 0; i < n; i++)
		cl[i] = i % 8;
	gsl_ran_shuffle(rng, cl, n, sizeof(int));
	for (int i = 0; i < n; i++) {
		int c = cl[i];
		for (int j = 0; j < d; j++)
			q[(size_t)i * d + j] += centres[c * d + j];
	}
	int grid[3] = { F, H, W };
	for (int kind = 0; kind < DG_GROUP_COUNT; kind++) {
		dg_groups g;
		int rc = dg_groups_build(&g, kind, q, n, d, grid, 0);
		CHECKF(rc == 0 && is_permutation(&g), "%s grouping is a permutation into non-empty groups",
		       dg_group_name(kind));
		if (kind == DG_GROUP_PCA || kind == DG_GROUP_RASTER) {
			int ok = g.ngroups == (n + 127) / 128;
			for (int k = 0; k + 1 < g.ngroups; k++)
				ok &= g.off[k + 1] - g.off[k] == 128;
			CHECKF(ok, "%s groups hold exactly 128 queries but the last (%d)", dg_group_name(kind),
			       g.off[g.ngroups] - g.off[g.ngroups - 1]);
		}
		if (kind == DG_GROUP_TILE3D) {
			int ok = 1;
			for (int k = 0; k < g.ngroups; k++) {
				int fmin = 1 << 30, fmax_ = -1, ymin = 1 << 30, ymax = -1, xmin = 1 << 30, xmax = -1;
				for (int p = g.off[k]; p < g.off[k + 1]; p++) {
					int t = g.perm[p], f = t / (H * W), y = t / W % H, x = t % W;
					fmin = f < fmin ? f : fmin, fmax_ = f > fmax_ ? f : fmax_;
					ymin = y < ymin ? y : ymin, ymax = y > ymax ? y : ymax;
					xmin = x < xmin ? x : xmin, xmax = x > xmax ? x : xmax;
				}
				ok &= fmax_ - fmin < 2 && ymax - ymin < 8 && xmax - xmin < 8 && g.off[k + 1] - g.off[k] <= 128;
			}
			CHECKF(ok, "tile3d groups lie in 2x8x8 boxes (%d groups)", g.ngroups);
		}
		dg_groups_free(&g);
	}
	dg_groups raster, pca;
	dg_groups_build(&raster, DG_GROUP_RASTER, q, n, d, grid, 0);
	dg_groups_build(&pca, DG_GROUP_PCA, q, n, d, grid, 0);
	double ir = dg_groups_inertia(&raster, q, d), ip = dg_groups_inertia(&pca, q, d);
	CHECKF(ip < 0.5 * ir, "pca groups are tighter than raster on clustered queries (%.1f vs %.1f)", ip, ir);
	/* deterministic */
	dg_groups again;
	dg_groups_build(&again, DG_GROUP_PCA, q, n, d, grid, 0);
	CHECK("pca grouping is deterministic", !memcmp(again.perm, pca.perm, n * sizeof(int)));
	dg_groups_free(&raster), dg_groups_free(&pca), dg_groups_free(&again);
	free(centres), free(q), free(cl);
}

static int cmp_desc(const void *a, const void *b)
{
	const float *x = a, *y = b; /* pairs (score, index) */
	if (x[0] != y[0])
		return x[0] > y[0] ? -1 : 1;
	return (x[1] > y[1]) - (x[1] < y[1]);
}

static int desc(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return x > y ? -1 : x < y ? 1 : 0;
}

/* dg_topk_sum against a sort: many ties, negatives, -0.0, k from 0 past n; one value throughout
 * (the radix select's bucket holds every item: more than its stack buffer when n > 2048) */
static void test_topk_sum(void)
{
	int bad = 0, trials = 0;
	for (int trial = 0; trial < 60; trial++) {
		int n = 1 + (int)gsl_rng_uniform_int(rng, trial % 5 == 1 ? 6000 : 3000);
		float *x = dg_malloc(n * sizeof(float)), *sorted = dg_malloc(n * sizeof(float));
		for (int j = 0; j < n; j++) {
			x[j] = trial % 5 == 1   ? 0.75f
			     : trial % 3 == 0 ? (float)gsl_rng_uniform_int(rng, 4) - 1.0f /* ties, -1 */
			     : (float)(gsl_ran_gaussian(rng, 1) * pow(10, gsl_ran_flat(rng, -8, 2)));
			if (x[j] == 0.0f && j % 2)
				x[j] = -0.0f;
		}
		memcpy(sorted, x, n * sizeof(float));
		qsort(sorted, n, sizeof(float), desc);
		int ks[] = { 0, 1, (int)gsl_rng_uniform_int(rng, n + 1), n - 1, n, n + 5 };
		for (size_t t = 0; t < sizeof ks / sizeof *ks; t++, trials++) {
			int k = ks[t] < 0 ? 0 : ks[t];
			double ref = 0, got = dg_topk_sum(x, n, k);
			for (int j = 0; j < k && j < n; j++)
				ref += sorted[j];
			bad += fabs(got - ref) > 1e-9 * fmax(1, fabs(ref));
		}
		free(x), free(sorted);
	}
	CHECKF(bad == 0, "topk_sum: the k largest summed, as a sort gives, in %d cases (ties, negatives, k 0..n+5)",
	       trials - bad);
}

static void test_budget(void)
{
	CHECK("topk count rounds up to 128 and caps at n",
	      dg_topk_count(0.15, 4096) == 640 && dg_topk_count(0.1, 1000) == 128 &&
		      dg_topk_count(1.0, 1000) == 1000 && dg_topk_count(0.5, 300) == 256 &&
		      dg_topk_count(0.001, 100) == 100);
	int bad = 0;
	for (int trial = 0; trial < 40; trial++) {
		int n = 1 + (int)gsl_rng_uniform_int(rng, 3000);
		float *s = dg_malloc(n * sizeof(float)), *pairs = dg_malloc(2 * n * sizeof(float));
		for (int j = 0; j < n; j++) { /* few distinct values: many ties; negatives and -0.0 too */
			s[j] = (float)gsl_rng_uniform_int(rng, trial % 2 ? 5 : 100000) - (trial % 4 == 1 ? 2.0f : 0.0f);
			if (s[j] == 0.0f && j % 2)
				s[j] = -0.0f;
		}
		int lo = (int)gsl_rng_uniform_int(rng, n), hi = lo + (int)gsl_rng_uniform_int(rng, 40);
		dg_budget b = { DG_KV_TOKEN, DG_BUDGET_TOPK, gsl_rng_uniform_pos(rng), 0, lo, hi };
		int *out = dg_malloc(n * sizeof(int));
		void *work = dg_malloc(dg_select_work_size(n));
		int cnt = dg_select_row(s, n, &b, out, work);
		/* reference: sort (score desc, index asc) excluding sinks, take K, add sinks, sort */
		int m = 0, hic = hi < n ? hi : n;
		for (int j = 0; j < n; j++)
			if (j < lo || j >= hic)
				pairs[2 * m] = s[j], pairs[2 * m + 1] = (float)j, m++;
		qsort(pairs, m, 2 * sizeof(float), cmp_desc);
		int K = dg_topk_count(b.rho, n);
		K = K < m ? K : m;
		char *want = calloc(n, 1);
		for (int t = 0; t < K; t++)
			want[(int)pairs[2 * t + 1]] = 1;
		for (int j = lo; j < hic; j++)
			want[j] = 1;
		int wc = 0, ok = 1;
		for (int j = 0; j < n; j++)
			wc += want[j];
		ok = cnt == wc;
		for (int t = 0; t < cnt && ok; t++)
			ok = want[out[t]] && (t == 0 || out[t] > out[t - 1]);
		bad += !ok;
		/* top-p: smallest prefix reaching p, rounded up to 128 */
		b.budget = DG_BUDGET_TOPP;
		b.topp = gsl_rng_uniform_pos(rng);
		b.sink_lo = b.sink_hi = 0;
		cnt = dg_select_row(s, n, &b, out, work);
		for (int j = 0; j < n; j++)
			pairs[2 * j] = s[j], pairs[2 * j + 1] = (float)j;
		qsort(pairs, n, 2 * sizeof(float), cmp_desc);
		double tot = 0, cum = 0;
		for (int j = 0; j < n; j++)
			tot += s[j];
		int need = 0;
		while (need < n && cum < b.topp * tot)
			cum += pairs[2 * need++];
		need = need ? need : 1;
		need = (need + 127) / 128 * 128;
		need = need < n ? need : n;
		for (int j = 0; j < n; j++)
			want[j] = 0;
		for (int t = 0; t < need; t++)
			want[(int)pairs[2 * t + 1]] = 1;
		ok = cnt == need;
		for (int t = 0; t < cnt && ok; t++)
			ok = want[out[t]];
		bad += !ok;
		/* block: runs of 128, ceil(rho n / 128) of them */
		b = (dg_budget){ DG_KV_BLOCK, DG_BUDGET_TOPK, gsl_rng_uniform_pos(rng), 0, 0, 0 };
		int nb = (n + 127) / 128;
		float *bs = randn(nb, 1);
		cnt = dg_select_row(bs, n, &b, out, work);
		int Kb = dg_topk_count(b.rho, n), expect = 0;
		for (int j = 0; j < nb; j++)
			pairs[2 * j] = bs[j], pairs[2 * j + 1] = (float)j;
		qsort(pairs, nb, 2 * sizeof(float), cmp_desc);
		for (int t = 0; t < nb && expect < Kb; t++) {
			int blk = (int)pairs[2 * t + 1];
			expect += (blk + 1) * 128 < n ? 128 : n - blk * 128;
		}
		ok = cnt == expect;
		for (int t = 0; t < cnt && ok; t++)
			ok = t == 0 || out[t] > out[t - 1];
		bad += !ok;
		free(bs), free(want), free(out), free(work), free(s), free(pairs);
	}
	CHECKF(bad == 0, "top-k (with sinks and ties), top-p and block selection (blocks until K keys) match a full sort (%d bad)", bad);
}

static void test_scores(int n, int d)
{
	float *q = randn((size_t)n * d, 1.6), *k = randn((size_t)n * d, 1.6), *v = randn((size_t)n * d, 1);
	float *o = dg_malloc((size_t)n * d * sizeof(float)), *lse = dg_malloc(n * sizeof(float));
	dg_attn_dense(q, k, v, n, n, d, o, lse);
	dg_groups g;
	random_groups(&g, n);
	float *scores = dg_alloc_poisoned((size_t)g.ngroups * n);
	dg_score_acc acc = { &g, scores };
	dg_scores_exact(q, k, lse, n, d, &acc, 1, NULL, NULL);
	double *lref = dg_malloc(n * sizeof(double)), tmp[256], *sref = dg_calloc((size_t)g.ngroups * n, sizeof(double));
	for (int i = 0; i < n; i++)
		lref[i] = ref_attn_row(q + (size_t)i * d, k, v, d, NULL, n, tmp);
	for (int grp = 0; grp < g.ngroups; grp++) {
		int cnt = g.off[grp + 1] - g.off[grp];
		for (int p = g.off[grp]; p < g.off[grp + 1]; p++)
			for (int j = 0; j < n; j++)
				sref[(size_t)grp * n + j] += ref_prob(q + (size_t)g.perm[p] * d, k + (size_t)j * d, d, lref[g.perm[p]]) / cnt;
	}
	double err = max_rel_diff(scores, sref, (size_t)g.ngroups * n);
	CHECKF(err < 1e-5, "exact group scores n=%d d=%d vs fp64: %.2e", n, d, err);
	/* pooled block scores: softmax over blocks of (mean q).(mean k block) + log(size) */
	int nb = (n + 127) / 128;
	float *ps = dg_alloc_poisoned((size_t)g.ngroups * nb);
	dg_scores_pooled(q, k, n, d, &g, DG_KV_BLOCK, ps);
	double *pref = dg_malloc((size_t)g.ngroups * nb * sizeof(double));
	for (int grp = 0; grp < g.ngroups; grp++) {
		double qm[256] = { 0 }, mx = -INFINITY, sum = 0;
		int cnt = g.off[grp + 1] - g.off[grp];
		for (int p = g.off[grp]; p < g.off[grp + 1]; p++)
			for (int c = 0; c < d; c++)
				qm[c] += q[(size_t)g.perm[p] * d + c] / (double)cnt;
		for (int b = 0; b < nb; b++) {
			int a = b * 128, e = a + 128 < n ? a + 128 : n;
			double dot = 0;
			for (int c = 0; c < d; c++) {
				double km = 0;
				for (int j = a; j < e; j++)
					km += k[(size_t)j * d + c];
				dot += qm[c] * km / (e - a);
			}
			pref[(size_t)grp * nb + b] = dot / sqrt((double)d) + log((double)(e - a));
			mx = fmax(mx, pref[(size_t)grp * nb + b]);
		}
		for (int b = 0; b < nb; b++)
			sum += pref[(size_t)grp * nb + b] = exp(pref[(size_t)grp * nb + b] - mx);
		for (int b = 0; b < nb; b++)
			pref[(size_t)grp * nb + b] /= sum;
	}
	err = max_rel_diff(ps, pref, (size_t)g.ngroups * nb);
	CHECKF(err < 1e-5, "pooled block scores n=%d d=%d vs fp64: %.2e", n, d, err);
	dg_groups_free(&g);
	free(q), free(k), free(v), free(o), free(lse), free(scores), free(lref), free(sref), free(ps), free(pref);
}

static void test_metrics(void)
{
	size_t n = 5000;
	float *ref = randn(n, 1), *o = dg_malloc(n * sizeof(float)), *mass = dg_malloc(1000 * sizeof(float));
	double *r64 = dg_malloc(n * sizeof(double)), *o64 = dg_malloc(n * sizeof(double));
	for (size_t i = 0; i < n; i++) {
		o[i] = ref[i] + (float)gsl_ran_gaussian(rng, 0.01);
		r64[i] = ref[i], o64[i] = o[i];
	}
	for (int i = 0; i < 1000; i++)
		mass[i] = (float)gsl_rng_uniform(rng);
	dg_metrics m;
	ref_metrics r;
	dg_metrics_compute(ref, o, n, mass, 1000, &m);
	ref_metrics_compute(r64, o64, n, &r);
	CHECKF(fabs(m.rel_l1 / r.rel_l1 - 1) < 1e-6 && fabs(m.rel_l2 / r.rel_l2 - 1) < 1e-6 &&
		       fabs(m.cosine / r.cosine - 1) < 1e-9 && fabs(m.psnr / r.psnr - 1) < 1e-6,
	       "metrics vs fp64 (rel_l2 %.4g / %.4g, psnr %.4g / %.4g)", m.rel_l2, r.rel_l2, m.psnr, r.psnr);
	/* 5th percentile by its definition: linear interpolation at (n-1)*0.05 of the sorted data */
	float *srt = dg_malloc(1000 * sizeof(float));
	memcpy(srt, mass, 1000 * sizeof(float));
	for (int i = 1; i < 1000; i++)
		for (int j = i; j > 0 && srt[j - 1] > srt[j]; j--) {
			float t = srt[j]; srt[j] = srt[j - 1]; srt[j - 1] = t;
		}
	double pos = 999 * 0.05, p5 = srt[(int)pos] + (pos - (int)pos) * (srt[(int)pos + 1] - srt[(int)pos]);
	CHECKF(fabs(m.mass_p5 - p5) < 1e-6, "mass_p5 is the 5th percentile (%.6f vs %.6f)", m.mass_p5, p5);
	dg_metrics_compute(ref, ref, n, NULL, 0, &m);
	CHECK("identical outputs: rel errors 0, cosine 1, psnr inf", m.rel_l2 == 0 && m.rel_l1 == 0 &&
	      fabs(m.cosine - 1) < 1e-12 && isinf(m.psnr));
	free(ref), free(o), free(mass), free(r64), free(o64), free(srt);
}

/* Every preset's switches as dsgap presets lists them (dg_preset_switches), set by hand on the
 * blank custom point (those custom has already left out: a spec is at most DG_POLICY_NAME_MAX), give
 * the preset's own policy; the aliases expand to their families. */
static void test_presets(void)
{
	int listed = 0;
	char blank[256];
	dg_preset_switches(dg_preset_find("custom"), blank + 1, sizeof blank - 2);
	blank[0] = ' ';
	strcat(blank, " ");
	for (int i = 0; i < dg_preset_count(); i++) {
		const dg_preset *pr = dg_preset_at(i);
		if (pr->family == DG_FAMILY_DENSE)
			continue;
		char sw[256], spec[DG_POLICY_NAME_MAX] = "custom";
		dg_preset_switches(pr, sw, sizeof sw);
		for (char *t = strtok(sw, " "); t; t = strtok(NULL, " ")) {
			char word[64];
			snprintf(word, sizeof word, " %s ", t);
			if (!strstr(blank, word))
				snprintf(spec + strlen(spec), sizeof spec - strlen(spec), "/%s", t);
		}
		dg_policy a, b;
		int ra = dg_policy_parse(pr->name, &a), rb = dg_policy_parse(spec, &b);
		memset(a.name, 0, sizeof a.name);
		memset(b.name, 0, sizeof b.name);
		CHECKF(ra == 0 && rb == 0 && !memcmp(&a, &b, sizeof a), "preset %s = %s", pr->name, spec);
		listed++;
	}
	CHECK("presets: the ladder, factorial and peers are listed", listed >= 6 + 8 + 8);
	dg_policy pol[64];
	int nl = dg_policies_expand("ladder,ladder", pol, 64);
	CHECK("alias ladder: dense first, then the 6 rungs, once", nl == 7 && !strcmp(pol[0].name, "dense") &&
	      !strcmp(pol[6].name, "oracle+res"));
	int nf = dg_policies_expand("factorial", pol, 64);
	CHECK("alias factorial: the 8 cells, baseline to mc-sparse", nf == 8 && !strcmp(pol[0].name, "baseline") &&
	      !strcmp(pol[7].name, "mc-sparse"));
	const dg_preset *peers[64];
	int npeers = dg_preset_family(DG_FAMILY_PEER, peers, 64);
	CHECK("alias all = ladder + factorial; peers = the peer family", dg_policies_expand("all", pol, 64) == 15 &&
	      dg_policies_expand("peers", pol, 64) == npeers && npeers >= 8 && !strcmp(pol[0].name, "svg2"));
}

int main(void)
{
	unsigned long seed = getenv("DSGAP_TEST_SEED") ? strtoul(getenv("DSGAP_TEST_SEED"), NULL, 10)
						      : (unsigned long)time(NULL) ^ (unsigned long)getpid();
	printf("seed %lu\n", seed);
	rng = gsl_rng_alloc(gsl_rng_mt19937);
	gsl_rng_set(rng, seed);
	dg_attn_init_threads();
	test_dense(1, 64);
	test_dense(130, 32);
	test_dense(1000, 128);
	test_dense(300, 256);
	test_sparse(700, 64);
	test_sparse(333, 128);
	test_identities(1100, 64);
	test_groups();
	test_budget();
	test_presets();
	test_topk_sum();
	test_scores(450, 64);
	test_metrics();
	gsl_rng_free(rng);
	return test_report();
}
