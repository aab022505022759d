/*
 * test_decompose.c: the decomposition's identities and statistics (docs/spec.md §5, §9): the ladder's
 * sources sum to E(est-block), Shapley shares sum to the total and recover an additive design,
 * a hand-computable 2 layers x 2 heads case, the cluster bootstrap (contains the estimate,
 * degenerate on identical clusters, reproducible), post-warm-up filtering, and metrics.csv +
 * run.json loading. Fresh random values from GSL's mt19937, several seeds.
 *   ctest -R test_decompose      or      ./test_decompose
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gsl/gsl_rng.h>

#include "analysis/decompose.h"
#include "analysis/results.h"
#include "analysis/shapley.h"
#include "testhelp.h"
#include "util/util.h"

#define EPS 1e-15

static const char *const ladder[6] = { "est-block", "oracle-block", "oracle-tile", "oracle-pca",
				       "oracle", "oracle+res" };
static const char *const cells[8] = { "baseline", "mc-grouping", "mc-selection", "mc-gs",
				      "mc-residual", "mc-gr", "mc-sr", "mc-sparse" };

static void add(dg_results *r, const char *policy, double density, int step, int layer, int head,
		double rel_l2, int staleness)
{
	dg_unit u = { .density_target = density, .step = step, .layer = layer, .head = head,
		      .rel_l2 = rel_l2, .staleness = staleness, .mass_mean = 0.9 };
	dg_results_add(r, policy, &u);
}

static void set_schedule(dg_results *r, int warmup, int dense_layer)
{
	r->warmup = warmup;
	r->n_dense_layers = dense_layer >= 0;
	r->dense_layer = dg_malloc(sizeof(int));
	r->dense_layer[0] = dense_layer;
	r->dir = dg_strdup("memory");
	r->trace_path = dg_strdup("synthetic_trace.h5");
	r->model = dg_strdup("test");
	r->source = dg_strdup("synthetic");
	r->git_commit = dg_strdup("test");
	r->device = dg_strdup("cpu");
	r->date = dg_strdup("today");
}

/* fp64 mean of rel_l2 over post-warm-up units of a policy (layer: DG_ANY or one), by hand */
static double direct_mean(const dg_results *r, const char *policy, int layer)
{
	double s = 0;
	long n = 0;
	int p = dg_results_policy(r, policy);
	for (size_t i = 0; i < r->n_units; i++) {
		const dg_unit *u = &r->unit[i];
		if (u->policy != p || u->step < r->warmup || u->layer == r->dense_layer[0] ||
		    (layer != DG_ANY && u->layer != layer))
			continue;
		s += u->rel_l2;
		n++;
	}
	return s / n;
}

/* random results: L layers (layer 0 dense), H heads, S steps (warm-up 2), both tables' policies */
static void random_results(dg_results *r, gsl_rng *rng, int L, int H, int S)
{
	memset(r, 0, sizeof *r);
	set_schedule(r, 2, 0);
	for (int l = 0; l < L; l++)
		for (int h = 0; h < H; h++) {
			double lvl = 0.5 + gsl_rng_uniform(rng); /* cluster effect */
			for (int s = 0; s < S; s++) {
				for (int p = 0; p < 6; p++)
					add(r, ladder[p], 0.15, s, l, h,
					    lvl * (0.3 - 0.04 * p) * (0.5 + gsl_rng_uniform(rng)), 0);
				for (int c = 0; c < 8; c++)
					add(r, cells[c], 0.15, s, l, h,
					    lvl * (0.4 - 0.04 * c) * (0.5 + gsl_rng_uniform(rng)),
					    s - 1);
			}
		}
	DG_ASSERT(dg_results_index(r) == 0);
}

static void test_ladder_sums(void)
{
	for (unsigned long seed = 1; seed <= 5; seed++) {
		gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
		gsl_rng_set(rng, seed);
		dg_results r;
		random_results(&r, rng, 2 + gsl_rng_uniform_int(rng, 5), 1 + gsl_rng_uniform_int(rng, 6),
			       3 + gsl_rng_uniform_int(rng, 5));
		dg_table t;
		CHECKF(dg_table_build(&r, DG_TABLE_LADDER, -1, 200, seed, &t) == 0,
		       "seed %lu: ladder builds", seed);
		double worst = 0, worst_e = 0;
		for (int i = 0; i < t.n_rows; i++) {
			const dg_row *w = &t.row[i];
			double sum = w->est[DG_LAD_SELECTION] + w->est[DG_LAD_GROUPING] +
				     w->est[DG_LAD_LOST];
			worst = fmax(worst, fabs(sum - w->est[DG_LAD_E_EST]) / w->est[DG_LAD_E_EST]);
			for (int p = 0; p < 6; p++) {
				static const int q[6] = { DG_LAD_E_EST, DG_LAD_E_ORACLE_BLOCK,
							  DG_LAD_E_ORACLE_TILE, DG_LAD_E_ORACLE_PCA,
							  DG_LAD_E_ORACLE, DG_LAD_E_ORACLE_RES };
				double e = direct_mean(&r, ladder[p], w->layer);
				worst_e = fmax(worst_e, fabs(w->est[q[p]] - e) / e);
			}
		}
		double worst_split = 0;
		for (int i = 0; i < t.n_rows; i++) {
			const dg_row *w = &t.row[i];
			double ob = direct_mean(&r, "oracle-block", w->layer),
			       ot = direct_mean(&r, "oracle-tile", w->layer),
			       o = direct_mean(&r, "oracle", w->layer),
			       op = direct_mean(&r, "oracle-pca", w->layer),
			       eb = direct_mean(&r, "est-block", w->layer);
			const double want[][2] = {
				{ w->est[DG_LAD_QGROUP], ot - o },
				{ w->est[DG_LAD_KBLOCK], ob - ot },
				{ w->est[DG_LAD_LOST_MINUS_GROUPING], o - (ob - o) },
				{ w->est[DG_LAD_LOST_MINUS_SELECTION], o - (eb - ob) },
				{ w->est[DG_LAD_GROUPING_MINUS_SELECTION], (ob - o) - (eb - ob) },
				{ w->est[DG_LAD_QGROUP_MINUS_KBLOCK], (ot - o) - (ob - ot) },
				{ w->est[DG_LAD_PCA], ot - op },
			};
			for (size_t j = 0; j < sizeof want / sizeof *want; j++)
				worst_split = fmax(worst_split, fabs(want[j][0] - want[j][1]));
		}
		CHECKF(worst_split <= 1e-15, "seed %lu: query grouping, key blocking, the paired rows "
		       "and PCA over raster from the direct fp64 means (%.1e)", seed, worst_split);
		CHECKF(worst <= 4 * EPS, "seed %lu: selection + grouping + lost = E(est-block) "
		       "(rel. %.1e, %d rows)", seed, worst, t.n_rows);
		CHECKF(worst_e <= 4 * EPS, "seed %lu: every rung's E equals the direct fp64 mean "
		       "(rel. %.1e)", seed, worst_e);
		CHECKF(dg_table_check(&t) <= 4 * EPS, "seed %lu: table check %.1e", seed,
		       dg_table_check(&t));
		dg_table_free(&t);
		dg_results_free(&r);
		gsl_rng_free(rng);
	}
}

static void test_shapley(void)
{
	for (unsigned long seed = 1; seed <= 5; seed++) {
		gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
		gsl_rng_set(rng, seed);
		double E[8], phi[3], a[3], A[8];
		for (int s = 0; s < 8; s++)
			E[s] = gsl_rng_uniform(rng);
		dg_shapley(3, E, phi);
		double total = E[0] - E[7];
		CHECKF(fabs(phi[0] + phi[1] + phi[2] - total) <= 4 * EPS,
		       "seed %lu: Shapley shares of random cells sum to E(baseline) - E(mc-sparse)",
		       seed);
		/* additive design: E[S] = E0 - sum_{i in S} a_i */
		for (int i = 0; i < 3; i++)
			a[i] = gsl_rng_uniform(rng) - 0.3;
		for (int s = 0; s < 8; s++) {
			A[s] = 1;
			for (int i = 0; i < 3; i++)
				if (s >> i & 1)
					A[s] -= a[i];
		}
		dg_shapley(3, A, phi);
		double err = 0, inter = 0;
		for (int i = 0; i < 3; i++)
			err = fmax(err, fabs(phi[i] - a[i]));
		for (unsigned T = 3; T < 8; T++)
			if (T != 4)
				inter = fmax(inter, fabs(dg_interaction(T, A)));
		CHECKF(err <= 4 * EPS, "seed %lu: additive design: each share is the component's "
		       "effect (%.1e)", seed, err);
		CHECKF(inter <= 4 * EPS, "seed %lu: additive design: interactions are 0 (%.1e)", seed,
		       inter);
		/* the single-component contrast is the main effect: E[i] - E[0] = -a_i */
		CHECKF(fabs(dg_interaction(1, A) + a[0]) <= 4 * EPS, "seed %lu: I_{G} = E(g) - E(0)",
		       seed);
		gsl_rng_free(rng);
	}
	/* pure redundancy: any one component gives the whole effect */
	double R[8] = { 1, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5 }, phi[3];
	dg_shapley(3, R, phi);
	CHECK("redundant components share the total equally (1/6 each)",
	      fabs(phi[0] - 1.0 / 6) <= EPS && fabs(phi[1] - 1.0 / 6) <= EPS &&
	      fabs(phi[2] - 1.0 / 6) <= EPS);
	CHECK("redundant components: I_GS = +0.5 (overlap), I_GSR = -0.5",
	      fabs(dg_interaction(3, R) - 0.5) <= EPS && fabs(dg_interaction(5, R) - 0.5) <= EPS &&
	      fabs(dg_interaction(6, R) - 0.5) <= EPS && fabs(dg_interaction(7, R) + 0.5) <= EPS);
	/* two components only: phi = average of the two marginal contributions */
	double two[4] = { 1.0, 0.7, 0.8, 0.3 }, p2[2];
	dg_shapley(2, two, p2);
	CHECK("two components: phi_1 = ((1-0.7) + (0.8-0.3))/2 = 0.4, phi_2 = 0.3",
	      fabs(p2[0] - 0.4) <= 4 * EPS && fabs(p2[1] - 0.3) <= 4 * EPS);
}

/* Ablation through the table on unit data: shares sum, and an additive design per unit. */
static void test_ablation_table(void)
{
	for (unsigned long seed = 1; seed <= 3; seed++) {
		gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
		gsl_rng_set(rng, seed);
		dg_results r;
		random_results(&r, rng, 4, 3, 5);
		dg_table t;
		CHECKF(dg_table_build(&r, DG_TABLE_ABLATION, -1, 100, seed, &t) == 0,
		       "seed %lu: ablation builds", seed);
		double worst = 0;
		for (int i = 0; i < t.n_rows; i++)
			worst = fmax(worst, fabs(t.row[i].check) / fabs(t.row[i].est[DG_ABL_TOTAL]));
		CHECKF(worst <= 8 * EPS, "seed %lu: shares sum to the total in every row (rel. %.1e)",
		       seed, worst);
		double pr = 0;
		for (int i = 0; i < t.n_rows; i++) {
			const double *q = t.row[i].est;
			pr = fmax(pr, fabs(q[DG_ABL_R_MINUS_G] - (q[DG_ABL_PHI + DG_COMP_R] -
								 q[DG_ABL_PHI + DG_COMP_G])));
			pr = fmax(pr, fabs(q[DG_ABL_G_MINUS_S] - (q[DG_ABL_PHI + DG_COMP_G] -
								 q[DG_ABL_PHI + DG_COMP_S])));
		}
		CHECKF(pr <= 4 * EPS, "seed %lu: paired differences of the shares (%.1e)", seed, pr);
		CHECKF(fabs(t.row[0].est[DG_ABL_E + 7] - direct_mean(&r, "mc-sparse", DG_ANY)) <=
		       4 * EPS, "seed %lu: E(mc-sparse) is the direct mean", seed);
		dg_table_free(&t);
		dg_results_free(&r);

		/* additive per unit: cell value = b - sum of a_i on; means stay additive */
		memset(&r, 0, sizeof r);
		set_schedule(&r, 1, -1);
		double a[3] = { 0.05, 0.03, 0.08 }, amean[3] = { 0, 0, 0 };
		int n = 0;
		for (int l = 0; l < 3; l++)
			for (int h = 0; h < 3; h++)
				for (int s = 0; s < 4; s++) {
					double b = 0.5 + 0.2 * gsl_rng_uniform(rng), ai[3];
					for (int i = 0; i < 3; i++)
						ai[i] = a[i] * (0.5 + gsl_rng_uniform(rng));
					for (int c = 0; c < 8; c++) {
						double v = b;
						for (int i = 0; i < 3; i++)
							v -= (c >> i & 1) ? ai[i] : 0;
						add(&r, cells[c], 0.2, s, l, h, v, s);
					}
					if (s >= 1) {
						for (int i = 0; i < 3; i++)
							amean[i] += ai[i];
						n++;
					}
				}
		DG_ASSERT(dg_results_index(&r) == 0);
		CHECKF(dg_table_build(&r, DG_TABLE_ABLATION, -1, 100, seed, &t) == 0,
		       "seed %lu: additive ablation builds", seed);
		double err = 0, inter = 0;
		for (int i = 0; i < 3; i++)
			err = fmax(err, fabs(t.row[0].est[DG_ABL_PHI + i] - amean[i] / n));
		for (int q = DG_ABL_I_GS; q <= DG_ABL_I_GSR; q++)
			inter = fmax(inter, fabs(t.row[0].est[q]));
		CHECKF(err <= 1e-14, "seed %lu: additive units: Shapley shares = mean effects (%.1e)",
		       seed, err);
		CHECKF(inter <= 1e-14, "seed %lu: additive units: interactions 0 (%.1e)", seed, inter);
		dg_table_free(&t);
		dg_results_free(&r);
		gsl_rng_free(rng);
	}
}

/*
 * Hand case: layers 0, 1 (layer 2 dense), heads 0, 1, steps 0 (warm-up), 1, 2. Post-warm-up
 * rel_l2 per cluster (l,h) at steps 1, 2:
 *   est-block     (0,0) .5 .7  (0,1) .3 .5  (1,0) .9 1.1  (1,1) .2 .4   -> 4.6/8 = 0.575
 *   oracle-block  (0,0) .4 .4  (0,1) .2 .2  (1,0) .6 .8   (1,1) .2 .2   -> 3.0/8 = 0.375
 *   oracle        (0,0) .1 .3  (0,1) .1 .1  (1,0) .3 .3   (1,1) .1 .1   -> 1.4/8 = 0.175
 * selection 0.2, grouping 0.2, lost 0.175; layer 0: 0.5 0.3 0.15 -> 0.2 0.15 0.15;
 * layer 1: 0.65 0.45 0.2 -> 0.2 0.25 0.2. Warm-up (9.0) and dense-layer (7.0) units must not count.
 */
static const double hand[3][2][2][2] = {
	{ { { .5, .7 }, { .3, .5 } }, { { .9, 1.1 }, { .2, .4 } } },
	{ { { .4, .4 }, { .2, .2 } }, { { .6, .8 }, { .2, .2 } } },
	{ { { .1, .3 }, { .1, .1 } }, { { .3, .3 }, { .1, .1 } } },
};
static const char *const hand_policy[3] = { "est-block", "oracle-block", "oracle" };

static void hand_results(dg_results *r)
{
	memset(r, 0, sizeof *r);
	set_schedule(r, 1, 2);
	for (int p = 0; p < 3; p++)
		for (int l = 0; l < 3; l++)
			for (int h = 0; h < 2; h++)
				for (int s = 0; s < 3; s++)
					add(r, hand_policy[p], 0.15, s, l, h,
					    s == 0 ? 9.0 : l == 2 ? 7.0 : hand[p][l][h][s - 1], 0);
	DG_ASSERT(dg_results_index(r) == 0);
}

static void check_hand_table(const dg_table *t, const char *how)
{
	static const double want[3][4] = { /* E(est), selection, grouping, lost */
		{ 0.575, 0.2, 0.2, 0.175 }, { 0.5, 0.2, 0.15, 0.15 }, { 0.65, 0.2, 0.25, 0.2 }
	};
	static const int q[4] = { DG_LAD_E_EST, DG_LAD_SELECTION, DG_LAD_GROUPING, DG_LAD_LOST };
	CHECKF(t->n_rows == 3, "%s: rows all, layer 0, layer 1 (dense layer 2 has none)", how);
	if (t->n_rows != 3)
		return;
	double err = 0;
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 4; j++)
			err = fmax(err, fabs(t->row[i].est[q[j]] - want[i][j]));
	CHECKF(err <= 1e-15, "%s: hand-computed E, selection, grouping, lost (%.1e)", how, err);
	CHECKF(t->row[0].layer == DG_ANY && t->row[1].layer == 0 && t->row[2].layer == 1,
	       "%s: row scopes", how);
	CHECKF(t->row[0].n_units == 8 && t->row[0].n_clusters == 4 && t->row[1].n_units == 4 &&
	       t->row[1].n_clusters == 2, "%s: n units and clusters counted after warm-up", how);
	CHECKF(isnan(t->row[0].est[DG_LAD_RESIDUAL]) && isnan(t->row[0].est[DG_LAD_PCA]),
	       "%s: quantities of absent rungs are NaN", how);
}

static void test_hand_case(void)
{
	dg_results r;
	hand_results(&r);
	dg_table t;
	CHECK("hand case: ladder builds without the optional rungs",
	      dg_table_build(&r, DG_TABLE_LADDER, -1, 100, 1, &t) == 0);
	check_hand_table(&t, "hand case");
	dg_table_free(&t);
	dg_table a;
	CHECK("hand case: no ablation without the factorial cells",
	      dg_table_build(&r, DG_TABLE_ABLATION, -1, 100, 1, &a) == 1 && a.n_rows == 0);
	dg_table_free(&a);

	/* post-warm-up filtering and the mean helper */
	int layers[8];
	CHECK("post-warm-up layers are 0 and 1 (2 is dense)",
	      dg_results_layers(&r, layers) == 2 && layers[0] == 0 && layers[1] == 1);
	int warm = 0, dense = 0, post = 0;
	for (size_t i = 0; i < r.n_units; i++) {
		bool pw = dg_results_post_warmup(&r, &r.unit[i]);
		warm += r.unit[i].step == 0 && pw;
		dense += r.unit[i].layer == 2 && pw;
		post += pw;
	}
	CHECK("warm-up steps and dense layers are never post-warm-up", !warm && !dense && post == 24);
	int p = dg_results_policy(&r, "est-block"), d = dg_results_density(&r, 0.15);
	double n, m = dg_results_mean(&r, p, d, &DG_FILTER_ALL, &n);
	CHECK("dg_results_mean: 0.575 over 8 units", fabs(m - 0.575) <= EPS && n == 8);
	dg_filter f = DG_FILTER_ALL;
	f.layer = 1;
	m = dg_results_mean(&r, p, d, &f, &n);
	CHECK("dg_results_mean, layer 1: 0.65 over 4 units", fabs(m - 0.65) <= EPS && n == 4);
	/* clusters sorted (0,0) (0,1) (1,0) (1,1) (2,0) (2,1): weights 2, 0, 1, 0 */
	double w[6] = { 2, 0, 1, 0, 5, 5 };
	f = DG_FILTER_ALL;
	f.weight = w;
	m = dg_results_mean(&r, p, d, &f, &n);
	CHECK("dg_results_mean, cluster weights (2,0,1,0): (2*1.2 + 2.0)/6",
	      fabs(m - 4.4 / 6) <= EPS && n == 6);
	dg_results_free(&r);
}

static void test_bootstrap(void)
{
	gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
	gsl_rng_set(rng, 7);
	dg_results r;
	random_results(&r, rng, 6, 6, 4);
	dg_table a, b, c;
	dg_table_build(&r, DG_TABLE_LADDER, -1, 500, 11, &a);
	dg_table_build(&r, DG_TABLE_LADDER, -1, 500, 11, &b);
	dg_table_build(&r, DG_TABLE_LADDER, -1, 500, 12, &c);
	bool same = a.n_rows == b.n_rows, differ = false, inside = true;
	for (int i = 0; i < a.n_rows && same; i++)
		for (int q = 0; q < DG_LAD_COUNT; q++) {
			same &= a.row[i].lo[q] == b.row[i].lo[q] && a.row[i].hi[q] == b.row[i].hi[q];
			differ |= a.row[i].lo[q] != c.row[i].lo[q];
		}
	for (int q = 0; q < DG_LAD_COUNT; q++)
		inside &= a.row[0].lo[q] <= a.row[0].est[q] && a.row[0].est[q] <= a.row[0].hi[q] &&
			  a.row[0].lo[q] < a.row[0].hi[q];
	CHECK("bootstrap: the same seed gives the same intervals", same);
	CHECK("bootstrap: another seed gives other intervals", differ);
	CHECK("bootstrap: every all-layers interval contains its estimate", inside);
	dg_table_free(&a);
	dg_table_free(&b);
	dg_table_free(&c);
	dg_results_free(&r);

	/* identical clusters: every resample gives the same mean */
	memset(&r, 0, sizeof r);
	set_schedule(&r, 0, -1);
	for (int l = 0; l < 3; l++)
		for (int h = 0; h < 4; h++)
			for (int s = 0; s < 2; s++)
				for (int p = 0; p < 6; p++)
					add(&r, ladder[p], 0.1, s, l, h, (s ? 0.5 : 0.25) / (p + 1), 0);
	DG_ASSERT(dg_results_index(&r) == 0);
	dg_table_build(&r, DG_TABLE_LADDER, -1, 300, 3, &a);
	bool degenerate = true;
	for (int i = 0; i < a.n_rows; i++)
		for (int q = 0; q < DG_LAD_COUNT; q++)
			degenerate &= a.row[i].lo[q] == a.row[i].hi[q] &&
				      fabs(a.row[i].lo[q] - a.row[i].est[q]) <= EPS;
	CHECK("bootstrap: identical clusters give lo = hi = estimate", degenerate);
	dg_table_free(&a);
	dg_results_free(&r);
	gsl_rng_free(rng);
}

/* metrics.csv + run.json of the hand case, loaded back */
static void test_load(void)
{
	char dir[] = "/tmp/dg_test_decompose.XXXXXX";
	CHECK("make a temporary results directory", mkdtemp(dir) != NULL);
	char *csv = dg_path_join(dir, "metrics.csv"), *json = dg_path_join(dir, "run.json");
	FILE *f = fopen(json, "w");
	fprintf(f, "{\"schedule\": {\"warmup\": 1, \"anchors\": [0], \"dense_layers\": [2]},\n"
		   " \"densities\": [0.15], \"trace\": {\"path\": \"t.h5\", \"model\": \"m\", "
		   "\"source\": \"synthetic\"},\n \"git_commit\": \"abc\", \"device\": \"cpu\", "
		   "\"date\": \"2026-12-02\", \"policies\": [{\"name\": \"est-block\"}]}\n");
	fclose(f);
	f = fopen(csv, "w");
	fprintf(f, "policy,density_target,density,step,layer,head,rel_l1,rel_l2,cosine,psnr,"
		   "mass_mean,mass_p5,staleness,time_ms\n");
	for (int p = 0; p < 3; p++)
		for (int l = 0; l < 3; l++)
			for (int h = 0; h < 2; h++)
				for (int s = 0; s < 3; s++) {
					bool dense = s == 0 || l == 2;
					fprintf(f, "%s,0.15,%s,%d,%d,%d,0.1,%.17g,0.99,%s,0.9,0.8,0,1.5\n",
						hand_policy[p], dense ? "1" : "0.16", s, l, h,
						dense ? 0.0 : hand[p][l][h][s - 1], dense ? "inf" : "30.5");
				}
	fclose(f);
	dg_results r;
	CHECK("load metrics.csv and run.json", dg_results_load(&r, dir) == 0);
	if (r.n_units) {
		CHECK("loaded: units, policies, clusters, schedule",
		      r.n_units == 54 && r.n_policies == 3 && r.n_clusters == 6 && r.warmup == 1 &&
		      r.n_dense_layers == 1 && r.dense_layer[0] == 2 && isinf(r.unit[0].psnr));
		dg_table t;
		dg_table_build(&r, DG_TABLE_LADDER, -1, 50, 1, &t);
		check_hand_table(&t, "loaded hand case");
		dg_table_free(&t);
		dg_results_free(&r);
	}
	remove(csv);
	remove(json);
	rmdir(dir);
	free(csv);
	free(json);
}

int main(void)
{
	test_ladder_sums();
	test_shapley();
	test_ablation_table();
	test_hand_case();
	test_bootstrap();
	test_load();
	return test_report();
}
