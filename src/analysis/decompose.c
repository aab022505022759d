/*
 * decompose.c: the oracle ladder and the MC-Sparse factorial ablation with cluster-bootstrap
 * intervals, and their tables (.csv .md .tex). See decompose.h for the quantities and formats.
 *   dsgap decompose DIR [--boot N] [--seed X]     (cmd_decompose.c)
 */
#include "analysis/decompose.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/bootstrap.h"
#include "analysis/shapley.h"
#include "policy/peers.h"
#include "util/csv.h"
#include "util/files.h"
#include "util/util.h"

/* ladder rungs, in the order the statistic receives their means */
enum { R_EST, R_OBLOCK, R_OTILE, R_OPCA, R_ORACLE, R_ORES, R_COUNT };

/* the names of the ladder's rungs (table order) and of the factorial's cells by component mask */
static const char *const *ladder_policy(void)
{
	static const char *names[R_COUNT];
	const dg_preset *p[R_COUNT];
	for (int i = 0; i < dg_preset_family(DG_FAMILY_LADDER, p, R_COUNT); i++)
		names[i] = p[i]->name;
	return names;
}

static const char *const *cell_policy(void)
{
	static const char *names[8];
	for (unsigned m = 0; m < 8; m++)
		names[m] = dg_factorial_cell(m)->name;
	return names;
}

/* display order of the cells: by number of components on */
static const int cell_order[8] = { 0, 1, 2, 4, 3, 5, 6, 7 };

/* How a quantity is named, and which quantity its share is a fraction of (-1: none). */
typedef struct {
	const char *key, *md, *tex;
	int share_of;
	const char *share_name;
} quantity;

static const quantity ladder_q[DG_LAD_COUNT] = {
	[DG_LAD_E_EST] = { "E(est-block)", "E(est-block): block-sparse estimator (raster query groups, "
			   "key blocks, pooled scores)", "$E$(est-block): block-sparse estimator",
			   DG_LAD_E_EST, "E(est-block)" },
	[DG_LAD_SELECTION] = { "selection", "selection = E(est-block) − E(oracle-block)",
			       "selection: $E$(est-block) $-$ $E$(oracle-block)", DG_LAD_E_EST,
			       "E(est-block)" },
	[DG_LAD_GROUPING] = { "grouping", "grouping = E(oracle-block) − E(oracle) = query grouping + "
			      "key blocking", "grouping: $E$(oracle-block) $-$ $E$(oracle)", DG_LAD_E_EST,
			      "E(est-block)" },
	[DG_LAD_QGROUP] = { "query_grouping", "· query grouping = E(oracle-tile) − E(oracle): 128 "
			    "queries share one key list", "\\quad query grouping: $E$(oracle-tile) $-$ "
			    "$E$(oracle)", DG_LAD_E_EST, "E(est-block)" },
	[DG_LAD_KBLOCK] = { "key_blocking", "· key blocking = E(oracle-block) − E(oracle-tile): keys "
			    "in blocks of 128", "\\quad key blocking: $E$(oracle-block) $-$ "
			    "$E$(oracle-tile)", DG_LAD_E_EST, "E(est-block)" },
	[DG_LAD_LOST] = { "lost", "lost contributions = E(oracle)",
			  "lost contributions: $E$(oracle)", DG_LAD_E_EST, "E(est-block)" },
	[DG_LAD_LOST_MINUS_GROUPING] = { "lost-grouping", "paired: lost − grouping",
					 "paired: lost $-$ grouping", -1 },
	[DG_LAD_LOST_MINUS_SELECTION] = { "lost-selection", "paired: lost − selection",
					  "paired: lost $-$ selection", -1 },
	[DG_LAD_GROUPING_MINUS_SELECTION] = { "grouping-selection", "paired: grouping − selection",
					      "paired: grouping $-$ selection", -1 },
	[DG_LAD_QGROUP_MINUS_KBLOCK] = { "query_grouping-key_blocking",
					 "paired: query grouping − key blocking",
					 "paired: query grouping $-$ key blocking", -1 },
	[DG_LAD_RESIDUAL] = { "residual_recovers", "residual recovers E(oracle) − E(oracle+res)",
			      "residual recovers: $E$(oracle) $-$ $E$(oracle+res)", DG_LAD_LOST,
			      "lost" },
	[DG_LAD_PCA] = { "pca_over_raster", "PCA instead of raster query groups win back "
			 "E(oracle-tile) − E(oracle-pca)", "PCA query groups win back: $E$(oracle-tile) "
			 "$-$ $E$(oracle-pca)", DG_LAD_QGROUP, "query grouping" },
	[DG_LAD_E_ORACLE_BLOCK] = { "E(oracle-block)", "E(oracle-block): raster query groups, key "
				    "blocks, exact scores", "$E$(oracle-block)", -1 },
	[DG_LAD_E_ORACLE_TILE] = { "E(oracle-tile)", "E(oracle-tile): raster query groups (runs of "
				   "128 in token order, not 3D tiles), single keys", "$E$(oracle-tile)",
				   -1 },
	[DG_LAD_E_ORACLE_PCA] = { "E(oracle-pca)", "E(oracle-pca): PCA query groups, single keys",
				  "$E$(oracle-pca)", -1 },
	[DG_LAD_E_ORACLE] = { "E(oracle)", "E(oracle): each query its own keys", "$E$(oracle)", -1 },
	[DG_LAD_E_ORACLE_RES] = { "E(oracle+res)", "E(oracle+res)", "$E$(oracle+res)", -1 },
};

static const quantity ablation_q[DG_ABL_COUNT] = {
	[DG_ABL_E + 0] = { "E(baseline)", "E(baseline)", "$E$(baseline)", -1 },
	[DG_ABL_E + 1] = { "E(mc-grouping)", "E(mc-grouping)", "$E$(mc-grouping)", -1 },
	[DG_ABL_E + 2] = { "E(mc-selection)", "E(mc-selection)", "$E$(mc-selection)", -1 },
	[DG_ABL_E + 3] = { "E(mc-gs)", "E(mc-gs)", "$E$(mc-gs)", -1 },
	[DG_ABL_E + 4] = { "E(mc-residual)", "E(mc-residual)", "$E$(mc-residual)", -1 },
	[DG_ABL_E + 5] = { "E(mc-gr)", "E(mc-gr)", "$E$(mc-gr)", -1 },
	[DG_ABL_E + 6] = { "E(mc-sr)", "E(mc-sr)", "$E$(mc-sr)", -1 },
	[DG_ABL_E + 7] = { "E(mc-sparse)", "E(mc-sparse)", "$E$(mc-sparse)", -1 },
	[DG_ABL_TOTAL] = { "total_reduction", "total reduction E(baseline) − E(mc-sparse)",
			   "total reduction: $E$(baseline) $-$ $E$(mc-sparse)", DG_ABL_TOTAL, "total" },
	[DG_ABL_PHI + DG_COMP_G] = { "shapley_G", "φ_G: grouping (PCA groups, token KV)",
				     "$\\phi_G$: grouping (PCA groups, token KV)", DG_ABL_TOTAL,
				     "total" },
	[DG_ABL_PHI + DG_COMP_S] = { "shapley_S", "φ_S: selection (exact scores)",
				     "$\\phi_S$: selection (exact scores)", DG_ABL_TOTAL, "total" },
	[DG_ABL_PHI + DG_COMP_R] = { "shapley_R", "φ_R: residual (cached at the anchor)",
				     "$\\phi_R$: residual (cached at the anchor)", DG_ABL_TOTAL,
				     "total" },
	[DG_ABL_I_GS] = { "I_GS", "interaction I_GS", "interaction $I_{GS}$", -1 },
	[DG_ABL_I_GR] = { "I_GR", "interaction I_GR", "interaction $I_{GR}$", -1 },
	[DG_ABL_I_SR] = { "I_SR", "interaction I_SR", "interaction $I_{SR}$", -1 },
	[DG_ABL_I_GSR] = { "I_GSR", "interaction I_GSR", "interaction $I_{GSR}$", -1 },
	[DG_ABL_R_MINUS_G] = { "shapley_R-shapley_G", "paired: φ_R − φ_G", "paired: $\\phi_R - \\phi_G$",
			       -1 },
	[DG_ABL_R_MINUS_S] = { "shapley_R-shapley_S", "paired: φ_R − φ_S", "paired: $\\phi_R - \\phi_S$",
			       -1 },
	[DG_ABL_G_MINUS_S] = { "shapley_G-shapley_S", "paired: φ_G − φ_S", "paired: $\\phi_G - \\phi_S$",
			       -1 },
};

/* columns of the per-layer tables */
static const int ladder_layer_q[] = { DG_LAD_E_EST, DG_LAD_SELECTION, DG_LAD_GROUPING,
				      DG_LAD_LOST, DG_LAD_RESIDUAL };
static const char *const ladder_layer_head[] = { "E(est-block)", "selection", "grouping", "lost",
						 "residual recovers" };
static const char *const ladder_layer_tex[] = { "$E$(est-block)", "Selection", "Grouping", "Lost",
						"Res.\\ recovers" };
static const int ablation_layer_q[] = { DG_ABL_E + 0, DG_ABL_E + 7, DG_ABL_PHI + DG_COMP_G,
					DG_ABL_PHI + DG_COMP_S, DG_ABL_PHI + DG_COMP_R };
static const char *const ablation_layer_head[] = { "E(baseline)", "E(mc-sparse)", "φ_G", "φ_S",
						   "φ_R" };
static const char *const ablation_layer_tex[] = { "$E$(baseline)", "$E$(mc-sparse)", "$\\phi_G$",
						  "$\\phi_S$", "$\\phi_R$" };
#define LAYER_COLS 5

const char *dg_table_reference(dg_table_kind kind)
{
	return kind == DG_TABLE_LADDER ? ladder_policy()[R_EST] : cell_policy()[7];
}

const char *dg_table_name(dg_table_kind kind)
{
	return kind == DG_TABLE_LADDER ? "decomposition" : "ablation";
}

int dg_table_policies(dg_table_kind kind, const char *const **names)
{
	*names = kind == DG_TABLE_LADDER ? ladder_policy() : cell_policy();
	return kind == DG_TABLE_LADDER ? R_COUNT : 8;
}

int dg_table_quantities(dg_table_kind kind)
{
	return kind == DG_TABLE_LADDER ? DG_LAD_COUNT : DG_ABL_COUNT;
}

static const quantity *quantities(dg_table_kind kind)
{
	return kind == DG_TABLE_LADDER ? ladder_q : ablation_q;
}

const char *dg_quantity_key(dg_table_kind kind, int q) { return quantities(kind)[q].key; }

/* ---- the statistics ------------------------------------------------------------------------- */

static void ladder_stat(const double *E, double *q)
{
	q[DG_LAD_E_EST] = E[R_EST];
	q[DG_LAD_SELECTION] = E[R_EST] - E[R_OBLOCK];
	q[DG_LAD_GROUPING] = E[R_OBLOCK] - E[R_ORACLE];
	q[DG_LAD_QGROUP] = E[R_OTILE] - E[R_ORACLE];
	q[DG_LAD_KBLOCK] = E[R_OBLOCK] - E[R_OTILE];
	q[DG_LAD_LOST] = E[R_ORACLE];
	q[DG_LAD_LOST_MINUS_GROUPING] = q[DG_LAD_LOST] - q[DG_LAD_GROUPING];
	q[DG_LAD_LOST_MINUS_SELECTION] = q[DG_LAD_LOST] - q[DG_LAD_SELECTION];
	q[DG_LAD_GROUPING_MINUS_SELECTION] = q[DG_LAD_GROUPING] - q[DG_LAD_SELECTION];
	q[DG_LAD_QGROUP_MINUS_KBLOCK] = q[DG_LAD_QGROUP] - q[DG_LAD_KBLOCK];
	q[DG_LAD_RESIDUAL] = E[R_ORACLE] - E[R_ORES];
	q[DG_LAD_PCA] = E[R_OTILE] - E[R_OPCA];
	q[DG_LAD_E_ORACLE_BLOCK] = E[R_OBLOCK];
	q[DG_LAD_E_ORACLE_TILE] = E[R_OTILE];
	q[DG_LAD_E_ORACLE_PCA] = E[R_OPCA];
	q[DG_LAD_E_ORACLE] = E[R_ORACLE];
	q[DG_LAD_E_ORACLE_RES] = E[R_ORES];
}

static void ablation_stat(const double *E, double *q)
{
	for (int s = 0; s < 8; s++)
		q[DG_ABL_E + s] = E[s];
	q[DG_ABL_TOTAL] = E[0] - E[7];
	dg_shapley(DG_COMP_COUNT, E, q + DG_ABL_PHI);
	q[DG_ABL_I_GS] = dg_interaction(1u << DG_COMP_G | 1u << DG_COMP_S, E);
	q[DG_ABL_I_GR] = dg_interaction(1u << DG_COMP_G | 1u << DG_COMP_R, E);
	q[DG_ABL_I_SR] = dg_interaction(1u << DG_COMP_S | 1u << DG_COMP_R, E);
	q[DG_ABL_I_GSR] = dg_interaction(7, E);
	q[DG_ABL_R_MINUS_G] = q[DG_ABL_PHI + DG_COMP_R] - q[DG_ABL_PHI + DG_COMP_G];
	q[DG_ABL_R_MINUS_S] = q[DG_ABL_PHI + DG_COMP_R] - q[DG_ABL_PHI + DG_COMP_S];
	q[DG_ABL_G_MINUS_S] = q[DG_ABL_PHI + DG_COMP_G] - q[DG_ABL_PHI + DG_COMP_S];
}

static double row_check(dg_table_kind kind, const double *q)
{
	if (kind == DG_TABLE_LADDER)
		return q[DG_LAD_SELECTION] + q[DG_LAD_GROUPING] + q[DG_LAD_LOST] - q[DG_LAD_E_EST];
	return q[DG_ABL_PHI + DG_COMP_G] + q[DG_ABL_PHI + DG_COMP_S] + q[DG_ABL_PHI + DG_COMP_R] -
	       q[DG_ABL_TOTAL];
}

/* a peer against the reference: E[0] the peer, E[1] the reference */
static void peer_stat(const double *E, double *q)
{
	q[0] = E[0];
	q[1] = E[0] - E[1];
}

/* ---- building -------------------------------------------------------------------------------- */

/* The peer preset policy name (PRESET or PRESET/...) starts from, or NULL. */
static const dg_preset *peer_method(const char *name)
{
	const dg_preset *p = dg_preset_of_spec(name);
	return p && p->family == DG_FAMILY_PEER ? p : NULL;
}

/* Whether a spec's budget is budget=matched (its last budget= switch). */
static bool spec_matched(const char *spec)
{
	const char *b = NULL;
	for (const char *s = strstr(spec, "/budget="); s; s = strstr(s + 1, "/budget="))
		b = s + 8;
	return b && !strncmp(b, "matched", 7) && (b[7] == '/' || !b[7]);
}

/* The samples' clusters pooled: global cluster i = off[s] + a cluster of sample s. */
typedef struct {
	const dg_results *r;
	int n, nc;       /* samples, pooled clusters */
	int *off;        /* (n + 1) */
	int *layer;      /* (nc) */
	double *dens;    /* (nc) sum of the effective density of the reference policy's units */
	const double *rho; /* the density targets (r[0]'s) */
} pool;

/* policy and density index of sample s for a name and r[0]'s density d; -1 when absent */
static int sample_pd(const pool *P, int s, const char *name, int d, int *ds)
{
	*ds = dg_results_density(&P->r[s], P->rho[d]);
	int p = dg_results_policy(&P->r[s], name);
	return *ds < 0 ? -1 : p;
}

/* per-cluster sums of policy name at density d over all samples into sum, count (nc) */
static void pooled_sums(const pool *P, const char *name, int d, double *sum, double *count)
{
	for (int s = 0; s < P->n; s++) {
		int ds, p = sample_pd(P, s, name, d, &ds);
		if (p >= 0) {
			dg_results_cluster_sums(&P->r[s], p, ds, DG_ANY, sum + P->off[s],
						count + P->off[s]);
		} else { /* absent: no unit, so E is NaN */
			memset(sum + P->off[s], 0, P->r[s].n_clusters * sizeof *sum);
			memset(count + P->off[s], 0, P->r[s].n_clusters * sizeof *count);
		}
	}
}

/* Mean effective density of the post-warm-up units of policy name at density d over all samples
 * (NaN without any); per pooled cluster sums into dens when not NULL. */
static double pooled_density(const pool *P, const char *name, int d, double *n_units,
			     double *dens)
{
	double s = 0, n = 0;
	if (dens)
		memset(dens, 0, P->nc * sizeof *dens);
	for (int k = 0; k < P->n; k++) {
		const dg_results *r = &P->r[k];
		int ds, p = sample_pd(P, k, name, d, &ds);
		if (p < 0)
			continue;
		const size_t j = (size_t)p * r->n_densities + ds;
		for (size_t i = r->range[j]; i < r->range[j + 1]; i++)
			if (dg_results_post_warmup(r, &r->unit[i])) {
				s += r->unit[i].density_eff;
				n += 1;
				if (dens)
					dens[P->off[k] + r->unit[i].cluster] += r->unit[i].density_eff;
			}
	}
	*n_units = n;
	return n > 0 ? s / n : NAN;
}

/* members: the clusters with count > 0 (and of layer, unless DG_ANY) grouped by sample;
 * group (n + 1), gsample (n): the sample of each group; returns the number of groups */
static int members(const pool *P, const double *count, int layer, int *member, int *nm,
		   int *group, int *gsample)
{
	unsigned char *keep = dg_malloc(P->nc + 1);
	for (int c = 0; c < P->nc; c++)
		keep[c] = count[c] > 0 && (layer == DG_ANY || P->layer[c] == layer);
	int ng = dg_boot_members(P->off, P->n, keep, member, nm, group, gsample);
	free(keep);
	return ng;
}

/* each sample's own statistic and the sign counts (several samples only) */
static void per_sample(const pool *P, const dg_boot_data *data, dg_boot_stat_fn fn, int nq,
		       const int *gsample, double **sample_est, int *n_pos, int *n_fin)
{
	memset(n_pos, 0, nq * sizeof *n_pos);
	memset(n_fin, 0, nq * sizeof *n_fin);
	*sample_est = NULL;
	if (P->n < 2)
		return;
	double *e = dg_malloc((size_t)P->n * DG_Q_MAX * sizeof *e);
	for (size_t i = 0; i < (size_t)P->n * DG_Q_MAX; i++)
		e[i] = NAN;
	dg_boot_signs(data, fn, nq, gsample, DG_Q_MAX, e, n_pos, n_fin);
	*sample_est = e;
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

/* The peers at matched density of density d (see decompose.h). sum, count: (2, nc) scratch
 * (every table has at least 2 policies, so the caller's buffers hold them). */
static void build_peers(const pool *P, dg_table *t, int d, double *sum, double *count,
			int *member, int *group, int *gsample)
{
	const int nc = P->nc;
	const dg_results *r0 = &P->r[0];
	const char *ref = dg_table_reference(t->kind);
	const dg_preset *peers[32];
	const int npeers = dg_preset_family(DG_FAMILY_PEER, peers, 32);
	for (int i = 0; i < npeers; i++) {
		const dg_preset *m = peers[i];
		dg_peer_row best = { .density = d, .policy = -1, .method = m };
		for (int p = 0; p < r0->n_policies; p++) {
			double n, rho = peer_method(r0->policy[p]) == m ?
					pooled_density(P, r0->policy[p], d, &n, NULL) : NAN;
			if (!isnan(rho) && (best.policy < 0 || fabs(rho - P->rho[d]) <
								 fabs(best.density_eff - P->rho[d]))) {
				best.policy = p;
				best.density_eff = rho;
				best.n_units = n;
			}
		}
		if (best.policy < 0)
			continue;
		best.unreached = spec_matched(r0->policy[best.policy]) &&
				 fabs(best.density_eff - P->rho[d]) > DG_PEER_MATCH_TOL;
		pooled_sums(P, r0->policy[best.policy], d, sum, count);
		pooled_sums(P, ref, d, sum + nc, count + nc);
		int nm, ng = members(P, count, DG_ANY, member, &nm, group, gsample);
		best.n_clusters = nm;
		best.n_samples = ng;
		dg_boot_data data = { .n_pol = 2, .n_clusters = nc, .sum = sum, .count = count,
				      .member = member, .n_member = nm, .group = group,
				      .n_groups = ng };
		dg_boot_stat(&data, peer_stat, 2, t->boot, t->seed, best.est, best.lo, best.hi);
		if (P->n > 1) {
			double *e;
			int pos[2], fin[2];
			per_sample(P, &data, peer_stat, 2, gsample, &e, pos, fin);
			best.n_pos = pos[1];
			best.n_fin = fin[1];
			free(e);
		}
		t->peer = dg_realloc(t->peer, (t->n_peers + 1) * sizeof *t->peer);
		t->peer[t->n_peers++] = best;
	}
}

/* Rows of one density: all layers, then each layer. sum, count: (np, nc). */
static void build_density(const pool *P, dg_table *t, int d, const double *sum,
			  const double *count, int np, int *member, int *layers, int *group,
			  int *gsample)
{
	const int nc = P->nc, nq = dg_table_quantities(t->kind);
	const dg_boot_stat_fn fn = t->kind == DG_TABLE_LADDER ? ladder_stat : ablation_stat;
	double *used = dg_calloc(nc, sizeof *used);
	for (int p = 0; p < np; p++)
		for (int c = 0; c < nc; c++)
			used[c] += count[(size_t)p * nc + c];
	int nl = 0;
	for (int c = 0; c < nc; c++)
		if (used[c] > 0)
			layers[nl++] = P->layer[c];
	qsort(layers, nl, sizeof *layers, cmp_int);
	int k = 0;
	for (int i = 0; i < nl; i++)
		if (!k || layers[k - 1] != layers[i])
			layers[k++] = layers[i];
	nl = k;
	for (int s = -1; s < nl; s++) {
		dg_row row = { .density = d, .layer = s < 0 ? DG_ANY : layers[s] };
		int nm, ng = members(P, used, row.layer, member, &nm, group, gsample);
		double dn = 0;
		for (int j = 0; j < nm; j++) {
			row.n_units += count[member[j]]; /* policy 0: est-block, baseline */
			dn += P->dens[member[j]];
		}
		row.density_eff = row.n_units > 0 ? dn / row.n_units : NAN;
		row.n_clusters = nm;
		row.n_samples = ng;
		dg_boot_data data = { .n_pol = np, .n_clusters = nc, .sum = sum, .count = count,
				      .member = member, .n_member = nm, .group = group,
				      .n_groups = ng };
		dg_boot_stat(&data, fn, nq, t->boot, t->seed, row.est, row.lo, row.hi);
		per_sample(P, &data, fn, nq, gsample, &row.sample_est, row.n_pos, row.n_fin);
		row.check = row_check(t->kind, row.est);
		t->row = dg_realloc(t->row, (t->n_rows + 1) * sizeof *t->row);
		t->row[t->n_rows++] = row;
	}
	free(used);
}

int dg_table_build_samples(const dg_results *r, int n, const char *const *label,
			   dg_table_kind kind, int density, int boot, unsigned long seed,
			   dg_table *t)
{
	*t = (dg_table){ .kind = kind, .boot = boot, .seed = seed, .n_samples = n,
			 .sample = label };
	const char *const *name;
	const int np = dg_table_policies(kind, &name);
	pool P = { .r = r, .n = n, .rho = r[0].density };
	P.off = dg_malloc((n + 1) * sizeof *P.off);
	P.off[0] = 0;
	for (int s = 0; s < n; s++)
		P.off[s + 1] = P.off[s] + r[s].n_clusters;
	const int nc = P.nc = P.off[n];
	P.layer = dg_malloc((nc ? nc : 1) * sizeof *P.layer);
	P.dens = dg_malloc((nc ? nc : 1) * sizeof *P.dens);
	for (int s = 0; s < n; s++)
		for (int c = 0; c < r[s].n_clusters; c++)
			P.layer[P.off[s] + c] = r[s].cluster[c].layer;
	double *sum = dg_malloc((2 * (size_t)np * nc + 1) * sizeof *sum);
	double *count = sum + (size_t)np * nc;
	int *member = dg_malloc((nc + 1) * sizeof *member), *layers = dg_malloc((nc + 1) * sizeof *layers);
	int *group = dg_malloc((n + 1) * sizeof *group), *gsample = dg_malloc((n + 1) * sizeof *gsample);
	int d0 = density < 0 ? 0 : density, d1 = density < 0 ? r[0].n_densities : density + 1;
	bool any = false; /* none of the table's policies at all: no warning per density */
	for (int p = 0; p < np; p++)
		for (int s = 0; s < n; s++)
			any |= dg_results_policy(&r[s], name[p]) >= 0;
	const char *where = n > 1 ? "samples" : r[0].dir;
	for (int d = any ? d0 : d1; d < d1; d++) {
		char missing[256] = "", absent[256] = "";
		for (int p = 0; p < np; p++) {
			pooled_sums(&P, name[p], d, sum + (size_t)p * nc, count + (size_t)p * nc);
			double m = 0;
			for (int c = 0; c < nc; c++)
				m += count[(size_t)p * nc + c];
			bool needed = kind == DG_TABLE_ABLATION || p == R_EST || p == R_OBLOCK ||
				      p == R_ORACLE;
			char *list = needed ? missing : absent;
			if (m == 0)
				snprintf(list + strlen(list), 256 - strlen(list), "%s%s",
					 *list ? ", " : "", name[p]);
		}
		if (*missing) {
			dg_warn("%s: density_target %g: no post-warm-up units of %s: no %s rows there",
				where, P.rho[d], missing, dg_table_name(kind));
			continue;
		}
		if (*absent)
			dg_warn("%s: density_target %g: no post-warm-up units of %s: their %s rows "
				"left out", where, P.rho[d], absent, dg_table_name(kind));
		double nu;
		pooled_density(&P, name[0], d, &nu, P.dens);
		build_density(&P, t, d, sum, count, np, member, layers, group, gsample);
		build_peers(&P, t, d, sum, count, member, group, gsample);
	}
	free(gsample);
	free(group);
	free(layers);
	free(member);
	free(sum);
	free(P.dens);
	free(P.layer);
	free(P.off);
	return t->n_rows ? 0 : 1;
}

int dg_table_build(const dg_results *r, dg_table_kind kind, int density, int boot,
		   unsigned long seed, dg_table *t)
{
	return dg_table_build_samples(r, 1, NULL, kind, density, boot, seed, t);
}

void dg_table_free(dg_table *t)
{
	for (int i = 0; i < t->n_rows; i++)
		free(t->row[i].sample_est);
	free(t->row);
	free(t->peer);
	memset(t, 0, sizeof *t);
}

double dg_table_check(const dg_table *t)
{
	double m = 0;
	for (int i = 0; i < t->n_rows; i++)
		if (fabs(t->row[i].check) > m)
			m = fabs(t->row[i].check);
	return m;
}

/* ---- writing --------------------------------------------------------------------------------- */

bool dg_row_few(const dg_table *t, int n_samples, int n_clusters)
{
	return (t->n_samples > 1 ? n_samples : n_clusters) < DG_FEW_RESAMPLED;
}

/* the file stem: "decomposition", "ablation", closed loop in PSNR with "-psnr" */
static const char *stem(char *buf, const dg_table *t)
{
	snprintf(buf, 48, "%s%s", dg_table_name(t->kind),
		 t->loop && t->loop->measure == DG_MEASURE_PSNR ? "-psnr" : "");
	return buf;
}

/* the LaTeX label stem: the file stem, "closed-" before it in the closed loop */
static const char *label_of(char *buf, const dg_table *t)
{
	char st[48];
	snprintf(buf, 64, "%s%s", t->loop ? "closed-" : "", stem(st, t));
	return buf;
}

/* the sentence under a table with rows marked § (md: Markdown, else LaTeX) */
static void few_note(FILE *f, bool md)
{
	fprintf(f, "%s an interval from fewer than %d resampled samples (or, with one sample, "
		   "clusters): with 2 or 3 a 95%s percentile interval is about their minimum and "
		   "maximum, no confidence interval%s", md ? "§" : "$\\S$", DG_FEW_RESAMPLED,
		md ? "%" : "\\%", md ? ".\n\n" : "");
}

const char *dg_sig3(char *buf, double x)
{
	if (isnan(x))
		return strcpy(buf, "nan");
	if (isinf(x))
		return strcpy(buf, x > 0 ? "inf" : "-inf");
	if (x == 0)
		return strcpy(buf, "0");
	int e = (int)floor(log10(fabs(x)));
	/* rounding may carry into the next decade: 0.09996 -> 0.100 */
	double r = round(x * pow(10, 2 - e)) / pow(10, 2 - e);
	if (r != 0)
		e = (int)floor(log10(fabs(r)));
	int dec = 2 - e;
	if (dec < 0)
		dec = 0;
	if (dec > 15)
		dec = 15;
	snprintf(buf, 32, "%.*f", dec, x);
	return buf;
}

void dg_tex_name(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '_' || *s == '%' || *s == '&' || *s == '#')
			fputc('\\', f);
		fputc(*s, f);
	}
}

static const char *num(char *buf, double x) { return dg_sig3(buf, x); }

/* "[lo, hi]", or "" when there is no interval */
static const char *interval(char *buf, double lo, double hi)
{
	char a[32], b[32];
	if (isnan(lo) || isnan(hi))
		buf[0] = 0;
	else
		snprintf(buf, 80, "[%s, %s]", num(a, lo), num(b, hi));
	return buf;
}

static void tex_puts(FILE *f, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '\\': fputs("\\textbackslash{}", f); break;
		case '~': fputs("\\textasciitilde{}", f); break;
		case '^': fputs("\\textasciicircum{}", f); break;
		case '&': case '%': case '$': case '#': case '_': case '{': case '}':
			fputc('\\', f);
			fputc(*s, f);
			break;
		default: fputc(*s, f);
		}
	}
}

static const char *layer_name(char *buf, int layer)
{
	if (layer == DG_ANY)
		return "all";
	snprintf(buf, 16, "%d", layer);
	return buf;
}

static const char *sample_label(const dg_results *r, const dg_table *t, int s)
{
	return t->sample && t->sample[s] ? t->sample[s] : r[s].dir;
}

/* the rows of t: [first[k], first[k + 1]) are density k's (its "all" row first); returns the
 * number of densities */
static int density_blocks(const dg_table *t, int *first)
{
	int k = 0;
	for (int i = 0; i < t->n_rows; i++)
		if (!i || t->row[i].density != t->row[i - 1].density)
			first[k++] = i;
	first[k] = t->n_rows;
	return k;
}

static void write_csv(FILE *f, const dg_results *r, const dg_table *t)
{
	const quantity *Q = quantities(t->kind);
	fprintf(f, "density_target,layer,quantity,estimate,lo,hi,n_units,n_clusters,n_samples,"
		   "density,n_positive\n");
	for (int i = 0; i < t->n_rows; i++) {
		const dg_row *w = &t->row[i];
		char lb[16], pos[16] = "";
		for (int q = 0; q < dg_table_quantities(t->kind); q++) {
			if (isnan(w->est[q]))
				continue;
			if (w->sample_est)
				snprintf(pos, sizeof pos, "%d", w->n_pos[q]);
			fprintf(f, "%.10g,%s,%s,%.10g,%.10g,%.10g,%.0f,%d,%d,%.6g,%s\n",
				r->density[w->density], layer_name(lb, w->layer), Q[q].key, w->est[q],
				w->lo[q], w->hi[q], w->n_units, w->n_clusters, w->n_samples,
				w->density_eff, pos);
		}
	}
	for (int i = 0; i < t->n_peers; i++) {
		const dg_peer_row *w = &t->peer[i];
		const char *spec = r->policy[w->policy], *ref = dg_table_reference(t->kind);
		double rho = r->density[w->density];
		char pos[16] = "";
		if (t->n_samples > 1)
			snprintf(pos, sizeof pos, "%d", w->n_pos);
		fprintf(f, "%.10g,all,peer:density(%s),%.10g,nan,nan,%.0f,%d,%d,%.6g,\n", rho, spec,
			w->density_eff, w->n_units, w->n_clusters, w->n_samples, w->density_eff);
		if (w->unreached) { /* cannot reach rho: no E at another density */
			fprintf(f, "%.10g,all,peer:unreached(%s),%.10g,nan,nan,%.0f,%d,%d,%.6g,\n", rho,
				spec, w->density_eff, w->n_units, w->n_clusters, w->n_samples,
				w->density_eff);
			continue;
		}
		fprintf(f, "%.10g,all,peer:E(%s),%.10g,%.10g,%.10g,%.0f,%d,%d,%.6g,\n", rho, spec,
			w->est[0], w->lo[0], w->hi[0], w->n_units, w->n_clusters, w->n_samples,
			w->density_eff);
		fprintf(f, "%.10g,all,peer:E(%s)-E(%s),%.10g,%.10g,%.10g,%.0f,%d,%d,%.6g,%s\n", rho,
			spec, ref, w->est[1], w->lo[1], w->hi[1], w->n_units, w->n_clusters,
			w->n_samples, w->density_eff, pos);
	}
}

/* NAME-samples.csv: every sample's own estimates */
static void write_samples_csv(FILE *f, const dg_results *r, const dg_table *t)
{
	const quantity *Q = quantities(t->kind);
	fprintf(f, "sample,density_target,layer,quantity,estimate\n");
	for (int i = 0; i < t->n_rows; i++) {
		const dg_row *w = &t->row[i];
		char lb[16];
		for (int s = 0; s < t->n_samples && w->sample_est; s++)
			for (int q = 0; q < dg_table_quantities(t->kind); q++) {
				double x = w->sample_est[(size_t)s * DG_Q_MAX + q];
				if (!isnan(x) && !isnan(w->est[q])) {
					dg_csv_field(f, sample_label(r, t, s)); /* a label may hold a comma */
					fprintf(f, ",%.10g,%s,%s,%.10g\n", r->density[w->density],
						layer_name(lb, w->layer), Q[q].key, x);
				}
			}
	}
}

static void dense_layer_list(char *buf, size_t n, const dg_results *r)
{
	buf[0] = 0;
	for (int i = 0; i < r->n_dense_layers && strlen(buf) + 16 < n; i++)
		snprintf(buf + strlen(buf), n - strlen(buf), "%s%d", i ? ", " : "",
			 r->dense_layer[i]);
	if (!r->n_dense_layers)
		snprintf(buf, n, "none");
}

/* how the intervals were made, one sentence (plain text) */
static void boot_sentence(FILE *f, const dg_table *t)
{
	if (t->loop)
		fprintf(f, "Intervals: 95%% percentile bootstrap over the %d samples: each replicate "
			   "draws the samples with replacement (a sample is one generation with one "
			   "final latent: no (layer, head) clusters in the closed loop), the same draw "
			   "for every policy (paired); %d replicates, seed %lu.", t->n_samples, t->boot,
			t->seed);
	else if (t->n_samples > 1)
		fprintf(f, "Intervals: 95%% percentile two-level bootstrap over %d samples: each "
			   "replicate draws the samples with replacement, then (layer, head) clusters "
			   "with replacement within each drawn sample; %d replicates, seed %lu (every "
			   "row its own clusters: all of them, or one layer's heads). Estimates pool "
			   "all samples' units.", t->n_samples, t->boot, t->seed);
	else
		fprintf(f, "Intervals: 95%% percentile bootstrap resampling (layer, head) clusters "
			   "with replacement, %d replicates, seed %lu (every row its own clusters: "
			   "all of them, or one layer's heads). One sample: the intervals do not "
			   "include the variation between samples (prompt, seed).", t->boot, t->seed);
}

/* what E is in a closed-loop table, one sentence */
static void loop_measure(FILE *f, const dg_table *t)
{
	const dg_loop_info *L = t->loop;
	if (L->measure == DG_MEASURE_PSNR)
		fprintf(f, "E(p) = −(mean over the samples of the PSNR in dB of p's final latents "
			   "against the dense run of the same sample): every difference below is dB "
			   "of PSNR lost (a Shapley share: dB won), E of a policy is minus its PSNR");
	else
		fprintf(f, "E(p) = mean over the samples of rel-L2 = ‖x_p − x_dense‖ / ‖x_dense‖ of "
			   "the final latents against the dense run of the same sample (noise, prompt), "
			   "the open loop's error measure on whole generations");
	fprintf(f, " (%d steps, the first %d dense). ", L->steps, L->warmup);
}

static void md_preamble(FILE *f, const dg_results *r, const dg_table *t)
{
	char dl[256];
	dense_layer_list(dl, sizeof dl, r);
	if (t->loop) {
		const bool lad = t->kind == DG_TABLE_LADDER;
		fprintf(f, "# %s in the closed loop%s\n\n", lad ? "Sources of the dense–sparse gap "
			"(oracle ladder)" : "MC-Sparse factorial ablation: Shapley attribution",
			t->loop->measure == DG_MEASURE_PSNR ? ", in PSNR" : "");
		fprintf(f, "Generated by `dsgap decompose --closed` (dsgap %s, commit %s) from the "
			   "closed-loop runs %s (device: %s), %d samples: ", DG_VERSION, dg_git_commit(),
			t->loop->runs, t->loop->device, t->n_samples);
		for (int s = 0; s < t->n_samples; s++)
			fprintf(f, "%s`%s`", s ? ", " : "", sample_label(r, t, s));
		fprintf(f, ".\n\n");
		loop_measure(f, t);
		boot_sentence(f, t);
		fprintf(f, " Numbers to 3 significant figures. ρ: the target density; computed: the "
			   "mean computed density of the %s runs over the calls past the warm-up.\n",
			dg_table_reference(t->kind));
		if (lad)
			fprintf(f, "Every rung makes its selection anew at every call (refresh=step): "
				   "nothing is stale. The three sources — selection, grouping, lost "
				   "contributions — sum to E(est-block); grouping = query grouping + key "
				   "blocking. \"paired\" rows: the difference of two sources with its own "
				   "paired interval (which dominates).\n\n");
		else
			fprintf(f, "Components: G = PCA query groups with single keys (instead of raster "
				   "groups with key blocks), S = exact scores (instead of pooled), R = cached "
				   "residual; metadata made at the anchor (the last warm-up step) and reused "
				   "(refresh=anchor). Shapley share φ_i: the error reduction from switching "
				   "i on, averaged over the 6 orders; φ_G + φ_S + φ_R = E(baseline) − "
				   "E(mc-sparse). Interactions on the error scale (I < 0: synergy) as in the "
				   "open loop.\n\n");
		return;
	}
	if (t->kind == DG_TABLE_LADDER)
		fprintf(f, "# Sources of the dense–sparse attention gap (oracle ladder)\n\n");
	else
		fprintf(f, "# MC-Sparse factorial ablation: Shapley attribution\n\n");
	if (t->n_samples > 1) {
		fprintf(f, "Generated by `dsgap decompose` (dsgap %s, commit %s) from %d samples "
			   "(results directories): ", DG_VERSION, dg_git_commit(), t->n_samples);
		for (int s = 0; s < t->n_samples; s++)
			fprintf(f, "%s`%s`", s ? ", " : "", sample_label(r, t, s));
		char *src = dg_path_shown(r->source);
		fprintf(f, "; model %s, source %s; metrics made by commit %s on %s.\n\n", r->model,
			src, r->git_commit, r->device);
		free(src);
	} else {
		char *dir = dg_path_shown(r->dir), *tp = dg_path_shown(r->trace_path),
		     *src = dg_path_shown(r->source);
		fprintf(f, "Generated by `dsgap decompose` (dsgap %s, commit %s) from `%s`: trace `%s` "
			   "(model %s, source %s); metrics made by commit %s on %s, %s.\n\n",
			DG_VERSION, dg_git_commit(), dir, tp, r->model, src, r->git_commit, r->device,
			r->date);
		free(dir), free(tp), free(src);
	}
	fprintf(f, "E = mean rel_l2 = ‖Ô − O‖ / ‖O‖ over post-warm-up units (step ≥ %d; dense "
		   "layers: %s). ", r->warmup, dl);
	boot_sentence(f, t);
	fprintf(f, " Numbers to 3 significant figures. ρ: the target density; computed: the "
		   "mean effective density of the %s units.\n", dg_table_reference(t->kind));
	if (t->kind == DG_TABLE_LADDER)
		fprintf(f, "The oracles recompute their selection every step (refresh=step). The "
			   "three sources — selection, grouping, lost contributions — sum to "
			   "E(est-block).\n\n");
	else
		fprintf(f, "Components, switched on one by one (refresh=anchor: metadata made at the "
			   "anchor step and reused): G = PCA query groups with token KV (instead of "
			   "raster groups with KV blocks), S = exact scores (instead of pooled), "
			   "R = cached residual. Shapley share φ_i: the error reduction from switching "
			   "i on, averaged over the 6 orders of switching G, S, R on; positive = error "
			   "reduced; φ_G + φ_S + φ_R = E(baseline) − E(mc-sparse). Interactions, on the "
			   "error scale: I_GS = E(mc-gs) − E(mc-grouping) − E(mc-selection) + "
			   "E(baseline) (I_GR, I_SR likewise), I_GSR = E(mc-sparse) − E(mc-gs) − "
			   "E(mc-gr) − E(mc-sr) + E(mc-grouping) + E(mc-selection) + E(mc-residual) − "
			   "E(baseline); I < 0: together the components reduce the error more than "
			   "separately (synergy), I > 0: their effects overlap.\n\n");
}

/* "ρ 0.1 (computed 0.125)" */
static const char *rho_name(char *buf, const dg_results *r, const dg_row *w)
{
	char a[32];
	snprintf(buf, 64, "ρ %g (computed %s)", r->density[w->density], num(a, w->density_eff));
	return buf;
}

/* the counts of a row: "n = 42 units in 6 clusters of 3 samples" */
static const char *counts(char *buf, const dg_table *t, const dg_row *w)
{
	if (t->loop) {
		snprintf(buf, 96, "n = %d samples", w->n_samples); /* closed loop: a sample a unit */
		return buf;
	}
	int k = snprintf(buf, 96, "n = %.0f units in %d clusters", w->n_units, w->n_clusters);
	if (w->sample_est)
		snprintf(buf + k, 96 - k, " of %d samples", w->n_samples);
	return buf;
}

static const char *share(char *buf, const dg_table *t, const dg_row *w, int q)
{
	const quantity *Q = quantities(t->kind);
	int s = Q[q].share_of;
	buf[0] = 0;
	if (t->loop && t->loop->measure == DG_MEASURE_PSNR && t->kind == DG_TABLE_LADDER)
		return buf; /* a share of minus a PSNR means nothing */
	if (s >= 0 && w->est[s] != 0 && !isnan(w->est[s]) && !isnan(w->est[q])) {
		char a[32];
		snprintf(buf, 64, "%s%%", num(a, 100 * w->est[q] / w->est[s]));
	}
	return buf;
}

static const char *stability(char *buf, const dg_row *w, int q)
{
	buf[0] = 0;
	if (w->sample_est && w->n_fin[q])
		snprintf(buf, 32, "%d of %d", w->n_pos[q], w->n_fin[q]);
	return buf;
}

/* after a negative estimate's sentence: whether its interval settles the sign */
static const char *hedge(double lo, double hi)
{
	return !isnan(lo) && !isnan(hi) && hi >= 0 && lo <= 0 ?
	       " Its interval includes 0: the sign is not established." : "";
}

/* Plain-language notes on one density's all-layers row: what a negative source means, what the
 * interactions whose interval excludes zero say. md: Markdown, else LaTeX-safe text. */
static void notes(FILE *f, const dg_results *r, const dg_table *t, const dg_row *w, bool md)
{
	char rho[32], a[32], b[32], c[32], d[32], ci[80];
	snprintf(rho, sizeof rho, md ? "ρ %g" : "$\\rho=%g$", r->density[w->density]);
	const char *minus = md ? "−" : "$-$";
	const double *q = w->est;
	if (t->kind == DG_TABLE_LADDER) {
		if (q[DG_LAD_SELECTION] < 0)
			fprintf(f, "%s%s: selection is negative (%s %s): the estimator's blocks give "
				   "a smaller output error than the oracle's, which keep the most "
				   "probability mass; retained mass is not output error.%s\n",
				md ? "- " : "", rho, num(a, q[DG_LAD_SELECTION]),
				interval(ci, w->lo[DG_LAD_SELECTION], w->hi[DG_LAD_SELECTION]),
				hedge(w->lo[DG_LAD_SELECTION], w->hi[DG_LAD_SELECTION]));
		if (q[DG_LAD_GROUPING] < 0)
			fprintf(f, "%s%s: grouping is negative (%s %s): the block oracle beats the "
				   "per-query oracle, which keeps each query's most probable keys; "
				   "the most retained mass is not the smallest output error.%s\n",
				md ? "- " : "", rho, num(a, q[DG_LAD_GROUPING]),
				interval(ci, w->lo[DG_LAD_GROUPING], w->hi[DG_LAD_GROUPING]),
				hedge(w->lo[DG_LAD_GROUPING], w->hi[DG_LAD_GROUPING]));
		if (q[DG_LAD_RESIDUAL] < 0)
			fprintf(f, "%s%s: the one-step-old residual adds more error than it removes "
				   "(residual recovers %s %s).%s\n", md ? "- " : "", rho,
				num(a, q[DG_LAD_RESIDUAL]),
				interval(ci, w->lo[DG_LAD_RESIDUAL], w->hi[DG_LAD_RESIDUAL]),
				hedge(w->lo[DG_LAD_RESIDUAL], w->hi[DG_LAD_RESIDUAL]));
		if (q[DG_LAD_KBLOCK] < 0)
			fprintf(f, "%s%s: key blocking is negative (%s %s): raster query groups sharing "
				   "the top key blocks give a smaller output error than the same groups "
				   "sharing their top single keys by the same exact scores, though the "
				   "single keys keep at least as much probability mass (docs/spec.md "
				   "§5).%s\n", md ? "- " : "", rho, num(a, q[DG_LAD_KBLOCK]),
				interval(ci, w->lo[DG_LAD_KBLOCK], w->hi[DG_LAD_KBLOCK]),
				hedge(w->lo[DG_LAD_KBLOCK], w->hi[DG_LAD_KBLOCK]));
		if (q[DG_LAD_PCA] < 0)
			fprintf(f, "%s%s: PCA query groups give a larger error than raster query groups, "
				   "both with single keys (win back %s %s).%s\n", md ? "- " : "", rho,
				num(a, q[DG_LAD_PCA]), interval(ci, w->lo[DG_LAD_PCA], w->hi[DG_LAD_PCA]),
				hedge(w->lo[DG_LAD_PCA], w->hi[DG_LAD_PCA]));
		return;
	}
	static const char comp[3] = { 'G', 'S', 'R' };
	static const char *const what[3] = { "grouping", "selection", "the residual" };
	if (q[DG_ABL_TOTAL] < 0)
		fprintf(f, "%s%s: MC-Sparse has a larger error than its baseline (total reduction "
			   "%s).\n", md ? "- " : "", rho, num(a, q[DG_ABL_TOTAL]));
	for (int i = 0; i < 3; i++)
		if (q[DG_ABL_PHI + i] < 0)
			fprintf(f, "%s%s: %s%s < 0 (%s %s): switching %c on raises the error, "
				   "averaged over the orders of switching the components on.%s\n",
				md ? "- " : "", rho, md ? "φ_" : "$\\phi_", md ? (char[]){ comp[i], 0 } :
				(i == 0 ? "G$" : i == 1 ? "S$" : "R$"), num(a, q[DG_ABL_PHI + i]),
				interval(ci, w->lo[DG_ABL_PHI + i], w->hi[DG_ABL_PHI + i]), comp[i],
				hedge(w->lo[DG_ABL_PHI + i], w->hi[DG_ABL_PHI + i]));
	static const int pair_q[3] = { DG_ABL_I_GS, DG_ABL_I_GR, DG_ABL_I_SR };
	static const int pair[3][2] = { { 0, 1 }, { 0, 2 }, { 1, 2 } };
	for (int k = 0; k < 3; k++) {
		int iq = pair_q[k], x = pair[k][0], y = pair[k][1];
		unsigned mx = 1u << x, my = 1u << y;
		if (isnan(w->lo[iq]) || (w->lo[iq] <= 0 && w->hi[iq] >= 0))
			continue; /* interval includes 0 (or none): no claim */
		/* the effect of x alone and with y on (negative = error reduced) */
		double alone = q[DG_ABL_E + mx] - q[DG_ABL_E + 0];
		double with = q[DG_ABL_E + (mx | my)] - q[DG_ABL_E + my];
		fprintf(f, "%s%s: I_%c%c = %s %s: switching %c on changes E by %s alone and by %s "
			   "with %c on", md ? "- " : "", rho, comp[x], comp[y], num(a, q[iq]),
			interval(ci, w->lo[iq], w->hi[iq]), comp[x], num(b, alone), num(c, with),
			comp[y]);
		if (alone > 0 && with < 0)
			fprintf(f, ": %s helps only together with %s.\n", what[x], what[y]);
		else if (alone < 0 && with > 0)
			fprintf(f, ": %s helps alone but hurts together with %s.\n", what[x], what[y]);
		else if (q[iq] < 0)
			fprintf(f, ": %s and %s reinforce each other (together they reduce the error "
				   "by %s more than separately).\n", what[x], what[y], num(d, -q[iq]));
		else
			fprintf(f, ": %s and %s overlap (together they win back %s less than the sum "
				   "of their separate effects).\n", what[x], what[y], num(d, q[iq]));
	}
	int g = DG_ABL_I_GSR;
	if (!isnan(w->lo[g]) && (w->lo[g] > 0 || w->hi[g] < 0))
		fprintf(f, "%s%s: the three-way interaction I_GSR = %s %s %s 0: the pairwise "
			   "interactions change when the third component is on.\n", md ? "- " : "",
			rho, num(a, q[g]), interval(ci, w->lo[g], w->hi[g]),
			q[g] < 0 ? "<" : ">");
	(void)minus;
}

/* the main table: all layers, the densities side by side */
static void md_main(FILE *f, const dg_results *r, const dg_table *t, const int *first, int nd)
{
	const bool multi = t->n_samples > 1;
	char a[32], b[80], s[64], c[96], rn[64];
	bool few = false;
	fprintf(f, "## %s, densities side by side\n\n*", t->loop ? "Final latents" : "All layers");
	for (int k = 0; k < nd; k++) {
		const dg_row *w = &t->row[first[k]];
		const bool fw = dg_row_few(t, w->n_samples, w->n_clusters);
		few |= fw;
		fprintf(f, "%s%s: %s%s", k ? "; " : "", rho_name(rn, r, w), counts(c, t, w),
			fw ? " §" : "");
	}
	fprintf(f, " (per policy). %s*\n\n", multi ? "\"> 0 in\": samples whose own estimate is "
		"positive." : "");
	if (t->kind == DG_TABLE_ABLATION) {
		fprintf(f, "| cell | G | S | R |");
		for (int k = 0; k < nd; k++)
			fprintf(f, " E at %s | 95%% CI |", rho_name(rn, r, &t->row[first[k]]));
		fprintf(f, "\n|:--|:-:|:-:|:-:|");
		for (int k = 0; k < nd; k++)
			fprintf(f, "--:|:-:|");
		fputc('\n', f);
		for (int j = 0; j < 8; j++) {
			int m = cell_order[j];
			fprintf(f, "| %s | %s | %s | %s |", cell_policy()[m], m & 1 ? "✓" : "",
				m & 2 ? "✓" : "", m & 4 ? "✓" : "");
			for (int k = 0; k < nd; k++) {
				const dg_row *w = &t->row[first[k]];
				fprintf(f, " %s | %s |", num(a, w->est[DG_ABL_E + m]),
					interval(b, w->lo[DG_ABL_E + m], w->hi[DG_ABL_E + m]));
			}
			fputc('\n', f);
		}
		fputc('\n', f);
	}
	fprintf(f, "| quantity |");
	for (int k = 0; k < nd; k++)
		fprintf(f, " %s | 95%% CI | share |%s", rho_name(rn, r, &t->row[first[k]]),
			multi ? " > 0 in |" : "");
	fprintf(f, "\n|:--|");
	for (int k = 0; k < nd; k++)
		fprintf(f, "--:|:-:|--:|%s", multi ? "--:|" : "");
	fputc('\n', f);
	const quantity *Q = quantities(t->kind);
	for (int q = t->kind == DG_TABLE_LADDER ? 0 : DG_ABL_TOTAL; q < dg_table_quantities(t->kind);
	     q++) {
		bool any = false;
		for (int k = 0; k < nd; k++)
			any |= !isnan(t->row[first[k]].est[q]);
		if (!any)
			continue;
		fprintf(f, "| %s |", Q[q].md);
		for (int k = 0; k < nd; k++) {
			const dg_row *w = &t->row[first[k]];
			if (isnan(w->est[q]))
				fprintf(f, " — | | |%s", multi ? " |" : "");
			else
				fprintf(f, " %s | %s | %s |", num(a, w->est[q]),
					interval(b, w->lo[q], w->hi[q]), share(s, t, w, q));
			if (multi && !isnan(w->est[q]))
				fprintf(f, " %s |", stability(s, w, q));
		}
		fputc('\n', f);
	}
	double chk = 0;
	for (int k = 0; k < nd; k++)
		chk = fmax(chk, fabs(t->row[first[k]].check));
	fprintf(f, "\nShares: of %s. Check: %s = %.2g at most (zero to rounding).\n\n",
		t->kind == DG_TABLE_LADDER ? "E(est-block) for the sources, of lost for the "
		"residual, of query grouping for PCA groups" : "the total reduction",
		t->kind == DG_TABLE_LADDER ? "|selection + grouping + lost − E(est-block)|" :
		"|φ_G + φ_S + φ_R − total reduction|", chk);
	if (few)
		few_note(f, true);
	bool head = false;
	for (int k = 0; k < nd; k++) {
		char *buf = NULL;
		size_t len = 0;
		FILE *m = open_memstream(&buf, &len);
		notes(m, r, t, &t->row[first[k]], true);
		fclose(m);
		if (len && !head) {
			fprintf(f, "What the signs say (interactions only where their interval "
				   "excludes 0):\n\n");
			head = true;
		}
		fputs(buf, f);
		free(buf);
	}
	if (head)
		fputc('\n', f);
}

static const int *layer_cols(const dg_table *t)
{
	return t->kind == DG_TABLE_LADDER ? ladder_layer_q : ablation_layer_q;
}

static const char *const *layer_heads(const dg_table *t, bool tex)
{
	if (tex)
		return t->kind == DG_TABLE_LADDER ? ladder_layer_tex : ablation_layer_tex;
	return t->kind == DG_TABLE_LADDER ? ladder_layer_head : ablation_layer_head;
}

static void md_layers(FILE *f, const dg_table *t, int first, int end)
{
	const int *cols = layer_cols(t);
	const char *const *head = layer_heads(t, false);
	const bool multi = t->n_samples > 1;
	int nfew = 0;
	fprintf(f, "Per layer (each row resamples that layer's heads%s; n: units per policy):\n\n"
		   "| layer | n | clusters |%s", multi ? " within the samples" : "",
		multi ? " samples |" : "");
	for (int j = 0; j < LAYER_COLS; j++)
		fprintf(f, " %s |", head[j]);
	fprintf(f, "\n|--:|--:|--:|%s", multi ? "--:|" : "");
	for (int j = 0; j < LAYER_COLS; j++)
		fprintf(f, "--:|");
	fputc('\n', f);
	for (int i = first; i < end; i++) {
		const dg_row *w = &t->row[i];
		const bool few = dg_row_few(t, w->n_samples, w->n_clusters);
		nfew += few;
		fprintf(f, "| %d%s | %.0f | %d |", w->layer, few ? " §" : "", w->n_units,
			w->n_clusters);
		if (multi)
			fprintf(f, " %d |", w->n_samples);
		for (int j = 0; j < LAYER_COLS; j++) {
			char a[32], b[80];
			int q = cols[j];
			if (isnan(w->est[q]))
				fprintf(f, " — |");
			else
				fprintf(f, " %s %s |", num(a, w->est[q]),
					interval(b, w->lo[q], w->hi[q]));
		}
		fputc('\n', f);
	}
	fputc('\n', f);
	if (nfew)
		few_note(f, true);
}

/* each sample's own estimates of the all-layers row w */
static void md_samples(FILE *f, const dg_results *r, const dg_table *t, const dg_row *w)
{
	if (!w->sample_est)
		return;
	const int *cols = layer_cols(t);
	const char *const *head = layer_heads(t, false);
	fprintf(f, "Per sample (all layers, each sample alone):\n\n| sample |");
	for (int j = 0; j < LAYER_COLS; j++)
		fprintf(f, " %s |", head[j]);
	fprintf(f, "\n|:--|");
	for (int j = 0; j < LAYER_COLS; j++)
		fprintf(f, "--:|");
	fputc('\n', f);
	for (int s = 0; s < t->n_samples; s++) {
		const double *e = w->sample_est + (size_t)s * DG_Q_MAX;
		if (isnan(e[cols[0]]))
			continue;
		fprintf(f, "| %s |", sample_label(r, t, s));
		for (int j = 0; j < LAYER_COLS; j++) {
			char a[32];
			fprintf(f, " %s |", isnan(e[cols[j]]) ? "—" : num(a, e[cols[j]]));
		}
		fputc('\n', f);
	}
	fprintf(f, "| **> 0 in** |");
	for (int j = 0; j < LAYER_COLS; j++) {
		char s[32];
		fprintf(f, " %s |", stability(s, w, cols[j]));
	}
	fprintf(f, "\n\n");
}

/* the peers at matched density of density index d */
static void md_peers(FILE *f, const dg_results *r, const dg_table *t, int d)
{
	const char *ref = dg_table_reference(t->kind);
	const bool multi = t->n_samples > 1;
	bool any = false;
	int nfar = 0, nun = 0;
	for (int i = 0; i < t->n_peers; i++) {
		const dg_peer_row *w = &t->peer[i];
		if (w->density != d)
			continue;
		char a[32], b[80], c[32], e[80], g[32];
		if (!any)
			fprintf(f, "Peers at matched density: per method, the configuration run whose "
				   "effective density is closest to %g; E over its %s; "
				   "Δ = E(peer) − E(%s), paired 95%% bootstrap%s:\n\n"
				   "| method | configuration | n | clusters | computed density | E | 95%% CI "
				   "| Δ vs E(%s) | 95%% CI |%s\n|:--|:--|--:|--:|--:|--:|:-:|--:|:-:|%s\n",
				r->density[d], t->loop ? "samples' final latents" : "post-warm-up units",
				ref, t->loop ? " over the samples" : multi ? " (two levels: samples, clusters)" :
				"", ref,
				multi ? " Δ > 0 in |" : "", multi ? "--:|" : "");
		any = true;
		if (w->unreached) {
			nun++;
			fprintf(f, "| %s | `%s` | %.0f | %d | cannot reach ρ ‡ | — | — | — | — |%s\n",
				w->method->method, r->policy[w->policy], w->n_units, w->n_clusters,
				multi ? " — |" : "");
			continue;
		}
		bool far = fabs(w->density_eff - r->density[d]) > 0.2 * r->density[d];
		nfar += far;
		fprintf(f, "| %s | `%s` | %.0f | %d | %s%s | %s | %s | %s | %s |", w->method->method,
			r->policy[w->policy], w->n_units, w->n_clusters, num(g, w->density_eff),
			far ? " †" : "", num(a, w->est[0]), interval(b, w->lo[0], w->hi[0]),
			num(c, w->est[1]), interval(e, w->lo[1], w->hi[1]));
		if (multi)
			fprintf(f, " %d of %d |", w->n_pos, w->n_fin);
		fputc('\n', f);
	}
	if (nfar)
		fprintf(f, "\n† more than 20%% away from the target: no configuration of the method in "
			   "this experiment comes closer.\n");
	if (nun) {
		fprintf(f, "\n‡ `budget=matched`: the method's own knob cannot bring its computed density "
			   "within %g of %g on this trace (closest:", DG_PEER_MATCH_TOL, r->density[d]);
		for (int i = 0, k = 0; i < t->n_peers; i++)
			if (t->peer[i].density == d && t->peer[i].unreached)
				fprintf(f, "%s `%s` %.3f", k++ ? ";" : "", r->policy[t->peer[i].policy],
					t->peer[i].density_eff);
		fprintf(f, "); no E is given at another density.\n");
	}
	if (any)
		fputc('\n', f);
}

static void write_md(FILE *f, const dg_results *r, const dg_table *t)
{
	int *first = dg_malloc((t->n_rows + 1) * sizeof *first);
	int nd = density_blocks(t, first);
	md_preamble(f, r, t);
	md_main(f, r, t, first, nd);
	for (int k = 0; k < nd; k++) {
		const dg_row *w = &t->row[first[k]];
		char rn[64], c[96];
		fprintf(f, "## %s\n\n*%s: %s.*\n\n", rho_name(rn, r, w), t->loop ? "Final latents" :
			"All layers", counts(c, t, w));
		md_peers(f, r, t, w->density);
		if (first[k + 1] > first[k] + 1)
			md_layers(f, t, first[k] + 1, first[k + 1]);
		md_samples(f, r, t, w);
	}
	free(first);
}

/*
 * The LaTeX tables are laid out for a two-column paper by design (issue 49): each one is a table*
 * (the page's \textwidth, about 505 pt) or a table (a column's \columnwidth, about 241 pt), one
 * table per density, without \resizebox; an interval sits under its estimate (tex_stack) so that
 * no column is wider than its widest number. tests/cli/tex_tables.sh compiles them in a two-column
 * article and fails on any overfull box.
 */

/* two lines in one cell, the first on the row's baseline: "\begin{tabular}[t]{@{}r@{}}a\\b\end{tabular}" */
static void tex_stack_begin(FILE *f, char align) { fprintf(f, "\\begin{tabular}[t]{@{}%c@{}}", align); }
static void tex_stack_end(FILE *f) { fputs("\\end{tabular}", f); }

/* tex: $0.123$ and $[lo, hi]$: in a column of its own (two cells), or stacked under the estimate
 * in small type (one cell) */
static void tex_num(FILE *f, double est, double lo, double hi, bool stacked)
{
	char a[32], b[32], c[32];
	if (isnan(est)) {
		fputs(stacked ? "--" : "-- & ", f);
		return;
	}
	const bool ci = !isnan(lo) && !isnan(hi);
	if (stacked && ci)
		tex_stack_begin(f, 'r');
	fprintf(f, "$%s$", num(a, est));
	if (ci)
		fprintf(f, stacked ? "\\\\{\\scriptsize$[%s, %s]$}" : " & $[%s, %s]$", num(b, lo),
			num(c, hi));
	else if (!stacked)
		fputs(" & ", f);
	if (stacked && ci)
		tex_stack_end(f);
}

static void tex_boot(FILE *f, const dg_table *t)
{
	if (t->loop)
		fprintf(f, "95\\%% percentile bootstrap intervals over the %d samples (one generation "
			   "each; paired across policies; %d replicates, seed %lu)", t->n_samples,
			t->boot, t->seed);
	else if (t->n_samples > 1)
		fprintf(f, "95\\%% percentile two-level bootstrap intervals over %d samples (samples, "
			   "then (layer, head) clusters within each; %d replicates, seed %lu)", t->n_samples,
			t->boot, t->seed);
	else
		fprintf(f, "95\\%% percentile bootstrap intervals (%d replicates resampling (layer, "
			   "head) clusters, seed %lu; one sample)", t->boot, t->seed);
}

static void tex_counts(FILE *f, const dg_table *t, const dg_row *w)
{
	if (t->loop) {
		fprintf(f, "$n=%d$ samples", w->n_samples);
		return;
	}
	fprintf(f, "$n=%.0f$ units per policy in %d clusters", w->n_units, w->n_clusters);
	if (w->sample_est)
		fprintf(f, " of %d samples", w->n_samples);
}

static void tex_source(FILE *f, const dg_results *r, const dg_table *t)
{
	if (t->loop) {
		fprintf(f, "Closed loop: final latents of whole generations (%d steps, the first %d "
			   "dense) against the dense run of the same sample; ", t->loop->steps,
			t->loop->warmup);
		fprintf(f, t->loop->measure == DG_MEASURE_PSNR ? "$E = -$PSNR in dB, differences "
			"are dB lost" : "$E$ = mean relative $L_2$ error");
		fprintf(f, "; runs \\texttt{");
		tex_puts(f, t->loop->runs);
		fputc('}', f);
	} else if (t->n_samples > 1) {
		fprintf(f, "%d samples of model ", t->n_samples);
		tex_puts(f, r->model);
	} else {
		fprintf(f, "Trace \\texttt{");
		char *tp = dg_path_shown(r->trace_path);
		tex_puts(f, tp);
		free(tp);
		fprintf(f, "} (model ");
		tex_puts(f, r->model);
		fputc(')', f);
	}
}

/* the main table of one density (row w: all layers), spanning the page: quantity, estimate, 95% CI,
 * share (and in how many samples > 0), then the notes */
static void tex_main(FILE *f, const dg_results *r, const dg_table *t, const dg_row *w)
{
	const quantity *Q = quantities(t->kind);
	const bool multi = t->n_samples > 1, abl = t->kind == DG_TABLE_ABLATION;
	char a[32];
	fprintf(f, "\n\\begin{table*}[t]\n\\centering\n\\small\n\\caption{%s%s at $\\rho=%g$ (computed "
		   "%s), %s: %s $E$ and its sources, with ", t->loop ? "Closed loop: " : "",
		abl ? "MC-Sparse factorial ablation" : "Sources of the dense--sparse attention gap",
		r->density[w->density], num(a, w->density_eff), t->loop ? "final latents" : "all layers",
		t->loop && t->loop->measure == DG_MEASURE_PSNR ? "minus the PSNR (dB)" : "mean relative $L_2$ error");
	tex_boot(f, t);
	fprintf(f, "; ");
	tex_counts(f, t, w);
	if (dg_row_few(t, w->n_samples, w->n_clusters)) {
		fputs(". ", f);
		few_note(f, false);
	}
	fprintf(f, ". ");
	tex_source(f, r, t);
	fprintf(f, ".%s%s}\n", abl ? " $\\phi_i$: Shapley share of the total reduction, averaged "
		"over the 6 orders, positive = error reduced. Interactions on the error scale, "
		"$I_{GS} = E_{gs} - E_{g} - E_{s} + E_0$, $I_{GSR}$ the three-way contrast; $I<0$: "
		"synergy." : " Selection, grouping and lost contributions sum to $E$(est-block); "
		"grouping = query grouping + key blocking. Query groups: raster runs of 128 queries in "
		"token order (est-block, oracle-block, oracle-tile: not 3D tiles), PCA groups "
		"(oracle-pca), one query (oracle); keys in blocks of 128 (est-block, oracle-block) or "
		"single. Shares of $E$(est-block), of lost (residual), of query grouping (PCA).",
		multi ? " $>0$: samples whose own estimate is positive." : "");
	char lb[64];
	fprintf(f, "\\label{tab:%s-%g}\n\\begin{tabular}{lrlr%s}\n\\toprule\n"
		   "Quantity & Estimate & 95\\%% CI & Share%s \\\\\n\\midrule\n",
		label_of(lb, t), r->density[w->density], multi ? "r" : "", multi ? " & $>0$" : "");
	if (abl) {
		for (int j = 0; j < 8; j++) {
			int m = cell_order[j];
			fprintf(f, "$E$(%s) [%s%s%s%s] & ", cell_policy()[m], m & 1 ? "G" : "",
				m & 2 ? "S" : "", m & 4 ? "R" : "", m ? "" : "none");
			tex_num(f, w->est[m], w->lo[m], w->hi[m], false);
			fprintf(f, " & %s \\\\\n", multi ? " & " : "");
		}
		fprintf(f, "\\midrule\n");
	}
	for (int q = abl ? DG_ABL_TOTAL : 0; q < dg_table_quantities(t->kind); q++) {
		if (isnan(w->est[q]))
			continue;
		char s[64], st[32];
		fprintf(f, "%s%s & ", !abl && q == DG_LAD_E_ORACLE_BLOCK ? "\\midrule\n" : "", Q[q].tex);
		tex_num(f, w->est[q], w->lo[q], w->hi[q], false);
		share(s, t, w, q);
		fputs(" & ", f);
		if (*s) {
			s[strlen(s) - 1] = 0;
			fprintf(f, "$%s$\\%%", s);
		}
		if (multi)
			fprintf(f, " & %s", stability(st, w, q));
		fprintf(f, " \\\\\n");
	}
	fprintf(f, "\\bottomrule\n\\end{tabular}\n");
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	notes(m, r, t, w, false);
	fclose(m);
	if (len) { /* the notes under the table; already LaTeX-safe except _ */
		fprintf(f, "\n\\smallskip\n\\begin{minipage}{0.95\\textwidth}\\footnotesize\n");
		for (char *p = buf; *p; p++) {
			if (*p == '_')
				fputs("\\_", f);
			else if (*p == '\n')
				fputs("\\par\n", f);
			else
				fputc(*p, f);
		}
		fprintf(f, "\\end{minipage}\n");
	}
	free(buf);
	fprintf(f, "\\end{table*}\n");
}

/* each sample's own estimates at one density (row w: all layers), as the Markdown's per-sample
 * table: one row per sample, then in how many samples each is > 0 */
static void tex_samples(FILE *f, const dg_results *r, const dg_table *t, const dg_row *w)
{
	if (!w->sample_est)
		return;
	const int *cols = layer_cols(t);
	const char *const *head = layer_heads(t, true);
	char a[32];
	fprintf(f, "\n\\begin{table*}[t]\n\\centering\n\\small\n\\caption{%s per sample at "
		   "$\\rho=%g$ (computed %s), all layers, each sample alone (its own mean over its "
		   "post-warm-up units); last row: samples whose estimate is $>0$. ",
		t->kind == DG_TABLE_LADDER ? "Sources of the gap" : "Factorial ablation",
		r->density[w->density], num(a, w->density_eff));
	tex_source(f, r, t);
	fprintf(f, ".}\n\\label{tab:%s-samples-%g}\n\\begin{tabular}{l", dg_table_name(t->kind),
		r->density[w->density]);
	for (int j = 0; j < LAYER_COLS; j++)
		fputc('r', f);
	fprintf(f, "}\n\\toprule\nSample");
	for (int j = 0; j < LAYER_COLS; j++)
		fprintf(f, " & %s", head[j]);
	fprintf(f, " \\\\\n\\midrule\n");
	for (int s = 0; s < t->n_samples; s++) {
		const double *e = w->sample_est + (size_t)s * DG_Q_MAX;
		if (isnan(e[cols[0]]))
			continue;
		tex_puts(f, sample_label(r, t, s));
		for (int j = 0; j < LAYER_COLS; j++)
			fprintf(f, isnan(e[cols[j]]) ? " & --" : " & $%s$", num(a, e[cols[j]]));
		fprintf(f, " \\\\\n");
	}
	fprintf(f, "\\midrule\n$>0$ in");
	for (int j = 0; j < LAYER_COLS; j++) {
		char s[32];
		fprintf(f, " & %s", stability(s, w, cols[j]));
	}
	fprintf(f, " \\\\\n\\bottomrule\n\\end{tabular}\n\\end{table*}\n");
}

/* the peers at matched density of density index d, a table of their own spanning the page: the
 * method over its configuration, E and Delta over their intervals */
static void tex_peers(FILE *f, const dg_results *r, const dg_table *t, const dg_row *w)
{
	const char *ref = dg_table_reference(t->kind);
	const bool multi = t->n_samples > 1;
	bool any = false;
	for (int i = 0; i < t->n_peers; i++) {
		const dg_peer_row *p = &t->peer[i];
		if (p->density != w->density)
			continue;
		char a[32], lb[64];
		if (!any) {
			fprintf(f, "\n\\begin{table*}[t]\n\\centering\n\\small\n\\caption{Peers at "
				   "matched density $\\rho=%g$: per method the configuration whose "
				   "computed density is closest to the target; $E$ over its post-warm-up "
				   "units and $\\Delta = E - E$(%s), with ", r->density[w->density], ref);
			tex_boot(f, t);
			fprintf(f, " under each; $n$: units, $c$: clusters. ");
			tex_source(f, r, t);
			fprintf(f, ".}\n\\label{tab:%s-peers-%g}\n\\begin{tabular}{lrrrrr%s}\n\\toprule\n"
				   "Method (configuration) & $n$ & $c$ & Density & $E$ & $\\Delta$%s \\\\\n"
				   "\\midrule\n", label_of(lb, t), r->density[w->density],
				multi ? "r" : "", multi ? " & $\\Delta>0$" : "");
		}
		any = true;
		tex_stack_begin(f, 'l');
		tex_puts(f, p->method->method);
		fputs("\\\\{\\scriptsize\\texttt{", f);
		tex_puts(f, r->policy[p->policy]);
		fputs("}}", f);
		tex_stack_end(f);
		if (p->unreached) {
			fprintf(f, " & %.0f & %d & \\multicolumn{%d}{l}{cannot reach $\\rho$ "
				   "(closest %.3f)} \\\\\n", p->n_units, p->n_clusters, multi ? 4 : 3,
				p->density_eff);
			continue;
		}
		fprintf(f, " & %.0f & %d & $%s$ & ", p->n_units, p->n_clusters,
			num(a, p->density_eff));
		tex_num(f, p->est[0], p->lo[0], p->hi[0], true);
		fputs(" & ", f);
		tex_num(f, p->est[1], p->lo[1], p->hi[1], true);
		if (multi)
			fprintf(f, " & %d of %d", p->n_pos, p->n_fin);
		fprintf(f, " \\\\\n");
	}
	if (any)
		fprintf(f, "\\bottomrule\n\\end{tabular}\n\\end{table*}\n");
}

static void tex_layers(FILE *f, const dg_results *r, const dg_table *t, int first, int end)
{
	const dg_row *w = &t->row[first - 1];
	const int *cols = layer_cols(t);
	const char *const *head = layer_heads(t, true);
	const bool multi = t->n_samples > 1;
	char a[32];
	fprintf(f, "\n\\begin{table*}[t]\n\\centering\n\\small\n\\caption{%s per layer at "
		   "$\\rho=%g$ (computed %s): each row resamples that layer's heads; $n$: units per "
		   "policy, $c$: (layer, head) clusters%s; ", t->kind == DG_TABLE_LADDER ?
		   "Sources of the gap" : "Factorial ablation", r->density[w->density],
		num(a, w->density_eff), multi ? ", $s$: samples" : "");
	tex_boot(f, t);
	fprintf(f, " under each estimate. ");
	tex_source(f, r, t);
	for (int k = first; k < end; k++)
		if (dg_row_few(t, t->row[k].n_samples, t->row[k].n_clusters)) {
			fputs(". ", f);
			few_note(f, false);
			break;
		}
	char lb[64];
	fprintf(f, ".}\n\\label{tab:%s-layers-%g}\n\\begin{tabular}{rrr%srrrrr}\n\\toprule\n"
		   "Layer & $n$ & $c$%s", label_of(lb, t), r->density[w->density],
		multi ? "r" : "", multi ? " & $s$" : "");
	for (int j = 0; j < LAYER_COLS; j++)
		fprintf(f, " & %s", head[j]);
	fprintf(f, " \\\\\n\\midrule\n");
	for (int k = first; k < end; k++) {
		const dg_row *x = &t->row[k];
		fprintf(f, "%d%s & %.0f & %d", x->layer, dg_row_few(t, x->n_samples, x->n_clusters) ?
			"$^\\S$" : "", x->n_units, x->n_clusters);
		if (multi)
			fprintf(f, " & %d", x->n_samples);
		for (int j = 0; j < LAYER_COLS; j++) {
			fputs(" & ", f);
			tex_num(f, x->est[cols[j]], x->lo[cols[j]], x->hi[cols[j]], true);
		}
		fprintf(f, " \\\\\n");
	}
	fprintf(f, "\\bottomrule\n\\end{tabular}\n\\end{table*}\n");
}

static void write_tex(FILE *f, const dg_results *r, const dg_table *t)
{
	char name[48];
	stem(name, t);
	int *first = dg_malloc((t->n_rows + 1) * sizeof *first);
	int nd = density_blocks(t, first);
	fprintf(f, "%% %s.tex: generated by dsgap decompose (dsgap %s, commit %s) from ", name,
		DG_VERSION, dg_git_commit());
	if (t->n_samples > 1)
		fprintf(f, "%d samples", t->n_samples);
	else {
		char *dir = dg_path_shown(r->dir);
		tex_puts(f, dir);
		free(dir);
	}
	fprintf(f, ".\n%% Needs \\usepackage{booktabs}.\n");
	for (int k = 0; k < nd; k++) {
		tex_main(f, r, t, &t->row[first[k]]);
		tex_samples(f, r, t, &t->row[first[k]]);
		tex_peers(f, r, t, &t->row[first[k]]);
		if (first[k + 1] > first[k] + 1)
			tex_layers(f, r, t, first[k] + 1, first[k + 1]);
	}
	free(first);
}

int dg_table_write_dir(const dg_results *r, const dg_table *t, const char *dir)
{
	static const char *const ext[4] = { "csv", "md", "tex", "csv" };
	const int nf = t->n_samples > 1 ? 4 : 3;
	dg_out out[4];
	int n = 0, rc = 0;
	for (; n < nf && !rc; n++) {
		char file[64];
		char st[48];
		snprintf(file, sizeof file, "%s%s.%s", stem(st, t),
			 n == 3 ? "-samples" : "", ext[n]);
		rc = dg_out_open_in(&out[n], dir, file);
	}
	if (rc) {
		for (int i = 0; i < n - 1; i++)
			dg_out_abort(&out[i]);
		return -1;
	}
	write_csv(out[0].f, r, t);
	write_md(out[1].f, r, t);
	write_tex(out[2].f, r, t);
	if (nf == 4)
		write_samples_csv(out[3].f, r, t);
	for (int i = 0; i < nf; i++)
		if (rc)
			dg_out_abort(&out[i]);
		else
			rc = dg_out_commit(&out[i]);
	return rc;
}

int dg_table_write(const dg_results *r, const dg_table *t)
{
	return dg_table_write_dir(r, t, r->dir);
}
