/*
 * test_policy_run.c: the dense pass that policy_run.h lets a caller skip (dg_policy_run_needs_dense),
 * on the CPU backend, whose load poisons the last unit's dense O, LSE and mass (NaN):
 *   - for every preset policy (ladder, factorial, peers), over a schedule with warm-up, an anchor and
 *     reuse steps, the outputs with the dense pass run only where needs_dense says are those with it
 *     run at every unit, bit for bit and finite (a skipped pass that was read gives NaN);
 *   - the skips happen where they should: every reuse step of refresh=anchor, and every step past the
 *     warm-up of refresh=step policies whose metadata is their own estimate (est-block, the peers'
 *     masks and scores); never for exact scores, a new residual or PISA's term;
 *   - staleness (fresh=groups|keys|residual, issue 50): mc-sparse's outputs at every step against an
 *     fp64 composition written here from the pieces (groups, exact scores and top-k of the library;
 *     the votes, the residuals and the sparse attention computed here), each component taken from the
 *     anchor or from the step as fresh says; with queries that do not move, fresh=groups is mc-sparse;
 *   - the schedule's sparse_steps and sparse_layers: dense outside (fp64 reference), the policy's own
 *     outputs inside, bit for bit (a refresh=step policy's window starts as past a warm-up: svg2's
 *     k-means starts cold there).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/policy_run.h"
#include "policy/attention.h"
#include "policy/groups.h"
#include "policy/select.h"
#include "policy/policy.h"
#include "ref64.h"
#include "testhelp.h"
#include "util/util.h"

enum { N = 512, D = 64, STEPS = 5 };
static const int GRID[3] = { 2, 16, 16 };

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void)
{
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return (rng >> 11) * 0x1p-53;
}
static double nrand(void) { return sqrt(-2 * log(urand() + 1e-300)) * cos(6.283185307179586 * urand()); }

/* q, k, v (STEPS, N, D): a random walk over the steps, as a denoising run's units drift */
static float *units(void)
{
	float *u = dg_malloc(sizeof(float) * 3 * STEPS * N * D);
	size_t s3 = (size_t)3 * N * D;
	for (size_t i = 0; i < s3; i++)
		u[i] = (float)nrand();
	for (int s = 1; s < STEPS; s++)
		for (size_t i = 0; i < s3; i++)
			u[s * s3 + i] = u[(s - 1) * s3 + i] + (float)(0.3 * nrand());
	return u;
}

/* the run of spec over the steps into out (STEPS, N, D); all_dense: the dense pass at every unit,
 * else where needs_dense says (skip[s] = it was skipped at step s). 0, or -1 if metadata failed. */
static int run(const char *spec, const dg_schedule *sc, const float *u, bool all_dense, float *out, bool *skip)
{
	dg_policy p;
	if (dg_policy_parse(spec, &p))
		return -1;
	dg_backend *be = dg_backend_cpu(N, D);
	dg_policy_run r;
	dg_policy_run_init(&r, &p, 0.25);
	dg_policy_run *rp = &r;
	int rc = 0;
	size_t nd = (size_t)N * D;
	for (int s = 0; s < STEPS && !rc; s++) {
		const float *q = u + (size_t)3 * s * nd;
		dg_policy_run_plan(&r, sc, s, 1);
		be->load(be, q, q + nd, q + 2 * nd);
		bool dense = all_dense || dg_policy_run_needs_dense(&r);
		if (skip)
			skip[s] = !dense;
		if (dense)
			be->dense(be);
		rc = dg_policy_run_metadata(be, &rp, 1, GRID, 0);
		if (!rc)
			dg_policy_run_apply(be, &r, s, NULL, out + s * nd, false);
	}
	dg_policy_run_clear(be, &r);
	be->destroy(be);
	return rc;
}

static void test_skips(void)
{
	static const struct {
		const char *spec;
		const char *skips; /* per step: 1 = the dense pass is skipped (warm-up 1: step 0, also the
				    * default anchor, the warm-up's last step) */
	} cases[] = {
		{ "est-block", "01111" },            /* its own pooled estimate every step */
		{ "est-block/residual=cached", "00000" }, /* R = O_dense - O_sparse every step */
		{ "oracle-block", "00000" },         /* exact scores read the dense LSE */
		{ "oracle+res", "00000" },
		{ "mc-sparse", "01111" },            /* the anchor, then reuse */
		{ "baseline", "01111" },
		{ "mc-residual", "01111" },
		{ "chipmunk", "01111" },
		{ "ditfastattn", "01111" },
		{ "sta", "01111" },                  /* a static mask */
		{ "radial", "01111" },
		{ "spargeattn", "01111" },           /* its own block scores */
		{ "xattention", "01111" },
		{ "svg2", "01111" },                 /* its own k-means and centroid scores */
		{ "pisa", "00000" },                 /* the first-order term reads the dense LSE */
		{ "mc-sparse/fresh=keys", "00000" }, /* exact scores every step */
		{ "mc-sparse/fresh=groups", "01111" }, /* votes of the anchor's lists: no dense pass */
		{ "mc-sparse/fresh=residual", "00000" }, /* R = O_dense - O_sparse every step */
		{ "mc-gr/fresh=keys", "01111" },     /* pooled scores: their own estimate */
		{ "mc-sr/fresh=keys", "00000" },
	};
	dg_schedule sc;
	CHECK("schedule warmup=1", dg_schedule_parse("warmup=1", &sc) == 0);
	float *u = units();
	size_t all = (size_t)STEPS * N * D;
	float *a = dg_malloc(all * sizeof(float)), *b = dg_malloc(all * sizeof(float));
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		bool skip[STEPS];
		int ra = run(cases[c].spec, &sc, u, true, a, NULL);
		dg_poison(b, all);
		int rb = run(cases[c].spec, &sc, u, false, b, skip);
		char got[STEPS + 1];
		for (int s = 0; s < STEPS; s++)
			got[s] = skip[s] ? '1' : '0';
		got[STEPS] = 0;
		size_t bad = 0;
		for (size_t i = 0; i < all; i++)
			bad += !isfinite(b[i]) || memcmp(&a[i], &b[i], sizeof(float));
		CHECKF(ra == 0 && rb == 0 && bad == 0, "%s: outputs with the dense pass skipped where needs_dense "
		       "says = with it at every unit, bit for bit, finite (%zu differ)", cases[c].spec, bad);
		CHECKF(!strcmp(got, cases[c].skips), "%s: dense pass skipped at steps %s (want %s)", cases[c].spec,
		       got, cases[c].skips);
	}
	free(a), free(b), free(u);
}

/* o (N, D) in double: unit u's sparse attention of groups g with lists l (ref_attn_row) */
static void sparse64(const float *u, const dg_groups *g, const dg_selection *l, double *o)
{
	size_t nd = (size_t)N * D;
	for (int grp = 0; grp < g->ngroups; grp++)
		for (int i = g->off[grp]; i < g->off[grp + 1]; i++) {
			int qi = g->perm[i];
			ref_attn_row(u + (size_t)qi * D, u + nd, u + 2 * nd, D, l->idx + l->off[grp],
				     (int)(l->off[grp + 1] - l->off[grp]), o + (size_t)qi * D);
		}
}

/* unit u's exact top-k lists over groups g (the library's exact scores and selection) */
static void exact_lists(const float *u, const dg_groups *g, dg_selection *l)
{
	size_t nd = (size_t)N * D;
	float *o = dg_malloc(nd * sizeof(float)), *lse = dg_malloc(N * sizeof(float));
	float *sc = dg_malloc((size_t)g->ngroups * N * sizeof(float));
	dg_attn_dense(u, u + nd, u + 2 * nd, N, N, D, o, lse);
	dg_score_acc acc = { g, sc };
	dg_scores_exact(u, u + nd, lse, N, D, &acc, 1, NULL, NULL);
	dg_budget b = { DG_KV_TOKEN, DG_BUDGET_TOPK, 0.25, 0, 0, 0 };
	dg_select_groups(l, sc, g->ngroups, N, &b);
	free(o), free(lse), free(sc);
}

/* the lists of groups `to` carried from lists la of groups `from` by votes, written plainly: per group
 * and key, the members whose `from` group lists the key; the top-k (count, then lower key) of them */
static void vote_lists(const dg_groups *to, const dg_groups *from, const dg_selection *la, dg_selection *l)
{
	char *has = dg_calloc((size_t)from->ngroups * N, 1); /* (from groups, N) key listed */
	int *owner = dg_malloc(N * sizeof(int));
	for (int a = 0; a < from->ngroups; a++) {
		for (int64_t e = la->off[a]; e < la->off[a + 1]; e++)
			has[(size_t)a * N + la->idx[e]] = 1;
		for (int i = from->off[a]; i < from->off[a + 1]; i++)
			owner[from->perm[i]] = a;
	}
	int k = dg_topk_count(0.25, N);
	l->ngroups = to->ngroups;
	l->off = dg_malloc((size_t)(to->ngroups + 1) * sizeof(int64_t));
	l->idx = dg_malloc((size_t)to->ngroups * k * sizeof(int));
	double *pair = dg_malloc((size_t)N * 2 * sizeof(double)); /* (score, key) */
	l->off[0] = 0;
	for (int b = 0; b < to->ngroups; b++) {
		for (int j = 0; j < N; j++) {
			int votes = 0;
			for (int i = to->off[b]; i < to->off[b + 1]; i++)
				votes += has[(size_t)owner[to->perm[i]] * N + j];
			pair[2 * j] = votes, pair[2 * j + 1] = j;
		}
		qsort(pair, N, 2 * sizeof(double), ref_rank_desc);
		char keep[N] = { 0 };
		for (int t = 0; t < k; t++)
			keep[(int)pair[2 * t + 1]] = 1;
		int64_t e = l->off[b];
		for (int j = 0; j < N; j++)
			if (keep[j])
				l->idx[e++] = j;
		l->off[b + 1] = e;
	}
	free(has), free(owner), free(pair);
}

/* mc-sparse with fresh bits at warm-up 1 (anchor step 0) over the units, composed in fp64 into
 * ref (STEPS, N, D): the anchor's groups A and lists LA, residual R0 = O_dense - O_sparse there;
 * at step s the groups (A or the step's), the lists (LA, the step's exact top-k, or the votes of LA),
 * O = sparse + R (R0, or fresh=residual: the last step's O_dense - O_sparse) */
static void compose64(unsigned fresh, const float *u, double *ref)
{
	size_t nd = (size_t)N * D;
	double *P = dg_malloc((size_t)N * N * sizeof(double)), *od = dg_malloc(nd * sizeof(double));
	double *os = dg_malloc(nd * sizeof(double)), *R = dg_malloc(nd * sizeof(double));
	dg_groups A;
	dg_selection LA;
	dg_groups_build(&A, DG_GROUP_PCA, u, N, D, GRID, 0);
	exact_lists(u, &A, &LA);
	ref_probs64(u, u + nd, u + 2 * nd, N, D, P, od);
	sparse64(u, &A, &LA, os);
	for (size_t e = 0; e < nd; e++)
		R[e] = od[e] - os[e], ref[e] = od[e];
	for (int s = 1; s < STEPS; s++) {
		const float *us = u + (size_t)3 * s * nd;
		dg_groups G = A, Gs;
		dg_selection L = LA, Ls = { 0 };
		if (fresh & DG_FRESH_GROUPS) {
			dg_groups_build(&Gs, DG_GROUP_PCA, us, N, D, GRID, 0);
			G = Gs;
		}
		if (fresh & DG_FRESH_KEYS)
			exact_lists(us, &G, &Ls), L = Ls;
		else if (fresh & DG_FRESH_GROUPS)
			vote_lists(&G, &A, &LA, &Ls), L = Ls;
		sparse64(us, &G, &L, os);
		for (size_t e = 0; e < nd; e++)
			ref[s * nd + e] = os[e] + R[e];
		if (fresh & DG_FRESH_RESIDUAL) {
			ref_probs64(us, us + nd, us + 2 * nd, N, D, P, od);
			for (size_t e = 0; e < nd; e++)
				R[e] = od[e] - os[e];
		}
		if (fresh & DG_FRESH_GROUPS)
			dg_groups_free(&Gs);
		if (Ls.off)
			dg_selection_free(&Ls);
	}
	dg_groups_free(&A), dg_selection_free(&LA);
	free(P), free(od), free(os), free(R);
}

static void test_fresh(void)
{
	static const struct {
		const char *spec;
		unsigned fresh;
	} cases[] = {
		{ "mc-sparse", 0 },
		{ "mc-sparse/fresh=keys", DG_FRESH_KEYS },
		{ "mc-sparse/fresh=groups", DG_FRESH_GROUPS },
		{ "mc-sparse/fresh=residual", DG_FRESH_RESIDUAL },
		{ "mc-sparse/fresh=groups+keys", DG_FRESH_GROUPS | DG_FRESH_KEYS },
		{ "mc-sparse/fresh=keys+residual", DG_FRESH_KEYS | DG_FRESH_RESIDUAL },
		{ "mc-sparse/fresh=residual+groups+keys", 7 },
	};
	dg_schedule sc;
	CHECK("schedule warmup=1", dg_schedule_parse("warmup=1", &sc) == 0);
	dg_schedule_resolve_anchors(&sc, NULL, STEPS);
	float *u = units();
	size_t nd = (size_t)N * D, all = STEPS * nd;
	float *out = dg_malloc(all * sizeof(float)), *plain = dg_malloc(all * sizeof(float));
	double *ref = dg_malloc(all * sizeof(double));
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		int rc = run(cases[c].spec, &sc, u, false, out, NULL);
		compose64(cases[c].fresh, u, ref);
		double err = 0, diff = 0, scale = 0;
		for (size_t e = 0; e < all; e++) {
			err = fmax(err, fabs(out[e] - ref[e]));
			scale = fmax(scale, fabs(ref[e]));
		}
		if (c == 0)
			memcpy(plain, out, all * sizeof(float));
		for (size_t e = nd * 2; e < all; e++) /* steps 2..: the stale and fresh components differ */
			diff = fmax(diff, fabs(out[e] - plain[e]));
		CHECKF(rc == 0 && err <= 1e-5 * scale, "%s: outputs = the fp64 composition of the anchor's and the "
		       "step's components (max err %.3g, scale %.3g)", cases[c].spec, err, scale);
		CHECKF(c == 0 || diff > 1e-3 * scale, "%s: outputs differ from mc-sparse's past step 1 (%.3g)",
		       cases[c].spec, diff);
	}
	/* queries that do not move: new groups are the anchor's, the votes give its lists back */
	float *still = dg_malloc((size_t)3 * all * sizeof(float));
	for (int s = 0; s < STEPS; s++)
		for (size_t e = 0; e < 3 * nd; e++)
			still[s * 3 * nd + e] = e < nd ? u[e] : u[s * 3 * nd + e];
	run("mc-sparse", &sc, still, false, plain, NULL);
	run("mc-sparse/fresh=groups", &sc, still, false, out, NULL);
	CHECK("Q still: fresh=groups outputs = mc-sparse's, bit for bit", !memcmp(out, plain, all * sizeof(float)));
	free(still), free(u), free(out), free(plain), free(ref);
}

static void test_sparse_window(void)
{
	dg_schedule plain, win, lay0, lay1, warm2;
	CHECK("schedules parse", !dg_schedule_parse("warmup=1", &plain) && !dg_schedule_parse("warmup=2", &warm2) &&
	      !dg_schedule_parse("warmup=1,sparse_steps=2-3", &win) &&
	      !dg_schedule_parse("warmup=1,sparse_layers=0;2", &lay0) &&
	      !dg_schedule_parse("warmup=1,sparse_layers=1", &lay1));
	dg_schedule bad;
	CHECK("sparse_steps=3-2, sparse_steps=2, sparse_layers= refused",
	      dg_schedule_parse("sparse_steps=3-2", &bad) && dg_schedule_parse("sparse_steps=2", &bad) &&
	      dg_schedule_parse("sparse_layers=", &bad) && dg_schedule_parse("sparse_steps=-1-2", &bad));
	dg_schedule *all_sc[5] = { &plain, &win, &lay0, &lay1, &warm2 };
	for (int i = 0; i < 5; i++)
		dg_schedule_resolve_anchors(all_sc[i], NULL, STEPS);
	float *u = units();
	size_t nd = (size_t)N * D, all = STEPS * nd;
	float *a = dg_malloc(all * sizeof(float)), *b = dg_malloc(all * sizeof(float));
	double *P = dg_malloc((size_t)N * N * sizeof(double)), *od = dg_malloc(nd * sizeof(double));
	static const char *const specs[] = { "mc-sparse", "svg2", "mc-sparse/fresh=keys" };
	for (int c = 0; c < 3; c++) {
		/* a refresh=step policy (svg2) starts the window as it starts past a warm-up of 2 */
		run(specs[c], c == 1 ? &warm2 : &plain, u, false, a, NULL);
		run(specs[c], &win, u, false, b, NULL);
		double dense_err = 0, scale = 0;
		bool same = true;
		for (int s = 0; s < STEPS; s++) {
			if (s >= 2 && s <= 3) {
				same &= !memcmp(a + s * nd, b + s * nd, nd * sizeof(float));
				continue;
			}
			const float *us = u + (size_t)3 * s * nd;
			ref_probs64(us, us + nd, us + 2 * nd, N, D, P, od);
			for (size_t e = 0; e < nd; e++)
				dense_err = fmax(dense_err, fabs(b[s * nd + e] - od[e])), scale = fmax(scale, fabs(od[e]));
		}
		CHECKF(same && dense_err <= 1e-5 * scale, "%s sparse_steps=2-3: its outputs at steps 2, 3 bit for "
		       "bit, dense elsewhere (err %.3g)", specs[c], dense_err);
		run(specs[c], &plain, u, false, a, NULL);
		run(specs[c], &lay1, u, false, b, NULL);
		CHECKF(!memcmp(a, b, all * sizeof(float)), "%s sparse_layers=1 on layer 1: its own outputs", specs[c]);
		run(specs[c], &lay0, u, false, b, NULL);
		dense_err = 0;
		for (int s = 0; s < STEPS; s++) {
			const float *us = u + (size_t)3 * s * nd;
			ref_probs64(us, us + nd, us + 2 * nd, N, D, P, od);
			for (size_t e = 0; e < nd; e++)
				dense_err = fmax(dense_err, fabs(b[s * nd + e] - od[e]));
		}
		CHECKF(dense_err <= 1e-5 * scale, "%s sparse_layers=0;2 on layer 1: dense (err %.3g)", specs[c],
		       dense_err);
	}
	free(a), free(b), free(P), free(od), free(u);
}

static void test_parse(void)
{
	dg_policy p;
	CHECK("fresh=groups+keys parses", !dg_policy_parse("mc-sparse/fresh=groups+keys", &p) &&
	      p.fresh == (DG_FRESH_GROUPS | DG_FRESH_KEYS));
	static const char *const bad[] = { "mc-sparse/fresh=", "mc-sparse/fresh=keys+keys", "mc-sparse/fresh=grp",
					   "est-block/fresh=keys", "ditfastattn/fresh=keys", "mc-gs/fresh=residual",
					   "mc-sparse/budget=topp:0.9/fresh=groups", "mc-sparse/fresh=groups+" };
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		CHECKF(dg_policy_parse(bad[i], &p) != 0, "%s refused", bad[i]);
	CHECK("ditfastattn/fresh=residual parses", !dg_policy_parse("ditfastattn/fresh=residual", &p));
}

int main(void)
{
	test_skips();
	test_parse();
	test_fresh();
	test_sparse_window();
	return test_report();
}
