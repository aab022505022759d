/*
 * refreshstats.c: dsgap refreshstats's statistics (refreshstats.h): the refresh experiment's runs of
 * a sample set loaded, E per schedule and staleness, the growth slope and E(first) - E(last) with
 * two-level bootstrap intervals and sign counts, the tables and figures.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/bootstrap.h"
#include "analysis/decompose.h"
#include "analysis/plot.h"
#include "analysis/refreshstats.h"
#include "analysis/results.h"
#include "analysis/style_gp.h"
#include "util/csv.h"
#include "util/files.h"
#include "util/util.h"

#define MAX_SCHED DG_REFRESH_MAX_SCHED
#define MAX_POL 32
#define MAX_STALE 64

typedef struct {
	const dg_results *run; /* (n_samples, n_sched) */
	int ns, nk, nc;        /* samples, schedules, pooled clusters */
	int *off;              /* (ns + 1) pooled cluster offsets */
	double rho;            /* the density target */
	int boot;
	unsigned long seed;
} ctx;

/* a statistic with its interval, over all samples and per sample */
typedef struct {
	double est, lo, hi, n_units, *per; /* per: (ns) each sample's own (NaN: none) */
	int n_clusters, n_samples, n_pos, n_fin;
} stat;

/* the slope statistic's "policies": slope_n staleness levels slope_x (dg_boot_stat_fn has no
 * context; compare.c does the same) */
static double slope_x[MAX_STALE];
static int slope_n;

static void stat_mean(const double *E, double *q) { q[0] = E[0]; }
static void stat_diff(const double *E, double *q) { q[0] = E[0] - E[1]; }
/* the least-squares slope of E over slope_x (finite E only) */
static void stat_slope(const double *E, double *q)
{
	double sx = 0, sy = 0, sxx = 0, sxy = 0, n = 0;
	for (int i = 0; i < slope_n; i++)
		if (isfinite(E[i])) {
			sx += slope_x[i], sy += E[i], sxx += slope_x[i] * slope_x[i];
			sxy += slope_x[i] * E[i], n++;
		}
	double den = n * sxx - sx * sx;
	q[0] = n >= 2 && den > 0 ? (n * sxy - sx * sy) / den : NAN;
}

/* per-cluster sums of policy name in schedule k at the density, staleness st (DG_ANY: all), of
 * every sample into sum, count (nc) */
static void sums(const ctx *C, int k, const char *name, int st, double *sum, double *count)
{
	for (int s = 0; s < C->ns; s++) {
		const dg_results *r = &C->run[s * C->nk + k];
		int p = dg_results_policy(r, name), d = dg_results_density(r, C->rho);
		if (p >= 0 && d >= 0) {
			dg_results_cluster_sums(r, p, d, st, sum + C->off[s], count + C->off[s]);
		} else {
			memset(sum + C->off[s], 0, r->n_clusters * sizeof *sum);
			memset(count + C->off[s], 0, r->n_clusters * sizeof *count);
		}
	}
}

/* the statistic fn of n_pol "policies" (sum, count: (n_pol, nc)) over the clusters where the first
 * has units: pooled estimate, two-level interval, each sample's own, sign counts */
static void estimate(const ctx *C, int n_pol, const double *sum, const double *count,
		     dg_boot_stat_fn fn, stat *o)
{
	unsigned char *keep = dg_malloc(C->nc + 1);
	int *member = dg_malloc((C->nc + 1) * sizeof *member), *group = dg_malloc((C->ns + 1) * sizeof *group),
	    *gsample = dg_malloc((C->ns + 1) * sizeof *gsample), nm;
	*o = (stat){ .n_units = 0 };
	for (int c = 0; c < C->nc; c++) {
		double n = 0;
		for (int p = 0; p < n_pol; p++)
			n += count[(size_t)p * C->nc + c];
		keep[c] = n > 0;
		o->n_units += count[c];
	}
	int ng = dg_boot_members(C->off, C->ns, keep, member, &nm, group, gsample);
	dg_boot_data data = { .n_pol = n_pol, .n_clusters = C->nc, .sum = sum, .count = count,
			      .member = member, .n_member = nm, .group = group, .n_groups = ng };
	o->n_clusters = nm;
	o->n_samples = ng;
	o->est = o->lo = o->hi = NAN;
	if (nm)
		dg_boot_stat(&data, fn, 1, C->boot, C->seed, &o->est, &o->lo, &o->hi);
	o->per = dg_malloc(C->ns * sizeof *o->per);
	for (int s = 0; s < C->ns; s++)
		o->per[s] = NAN;
	dg_boot_signs(&data, fn, 1, gsample, 1, o->per, &o->n_pos, &o->n_fin);
	free(keep), free(member), free(group), free(gsample);
}

/* anchors of schedule k: the distinct steps whose metadata policy name reuses after the warm-up
 * (step - staleness; an anchor may lie in the warm-up) in the first sample's first cluster */
static int anchors(const ctx *C, int k, const char *name)
{
	const dg_results *r = &C->run[k];
	int p = dg_results_policy(r, name), d = dg_results_density(r, C->rho), n = 0, seen[MAX_STALE * 4];
	if (p < 0 || d < 0)
		return 0;
	size_t j = (size_t)p * r->n_densities + d;
	for (size_t i = r->range[j]; i < r->range[j + 1]; i++) {
		const dg_unit *u = &r->unit[i];
		if (u->cluster != r->unit[r->range[j]].cluster || !dg_results_post_warmup(r, u))
			continue;
		int a = u->step - u->staleness, m = 0;
		while (m < n && seen[m] != a)
			m++;
		if (m == n && n < MAX_STALE * 4)
			seen[n++] = a;
	}
	return n;
}

/* the largest post-warm-up staleness of schedule k over the samples */
static int max_staleness(const ctx *C, int k)
{
	int m = 0;
	for (int s = 0; s < C->ns; s++) {
		const dg_results *r = &C->run[s * C->nk + k];
		for (size_t i = 0; i < r->n_units; i++)
			if (dg_results_post_warmup(r, &r->unit[i]) && r->unit[i].staleness > m)
				m = r->unit[i].staleness;
	}
	return m < MAX_STALE ? m : MAX_STALE - 1;
}

typedef struct {
	int np, nk, nst[MAX_SCHED];
	const char *policy[MAX_POL];
	const char *sched[MAX_SCHED];
	int n_anchors[MAX_SCHED];
	stat E[MAX_SCHED][MAX_POL];             /* E per schedule, policy */
	stat stale[MAX_SCHED][MAX_POL][MAX_STALE]; /* E per staleness (n_units 0: none) */
	stat slope[MAX_POL], drop[MAX_POL];     /* growth per step of schedule 0; E(0) - E(last) */
	/* schedule k >= 1: the samples whose own E is below their E in schedule k - 1 (fewer anchors),
	 * of those with both finite */
	int lower[MAX_SCHED][MAX_POL], paired[MAX_SCHED][MAX_POL];
	double density_eff;
} tables;

/* the mean computed density of policy name on the reuse steps (staleness > 0) of schedule 0 */
static double reuse_density(const ctx *C, const char *name)
{
	double sd = 0, nd = 0;
	for (int s = 0; s < C->ns; s++) {
		const dg_results *r = &C->run[s * C->nk];
		int p = dg_results_policy(r, name), d = dg_results_density(r, C->rho);
		if (p < 0 || d < 0)
			continue;
		size_t j = (size_t)p * r->n_densities + d;
		for (size_t i = r->range[j]; i < r->range[j + 1]; i++)
			if (dg_results_post_warmup(r, &r->unit[i]) && r->unit[i].staleness > 0)
				sd += r->unit[i].density_eff, nd++;
	}
	return nd > 0 ? sd / nd : NAN;
}

static void build(const ctx *C, tables *T)
{
	double *sum = dg_malloc(2 * (size_t)MAX_STALE * C->nc * sizeof *sum), *count = sum + (size_t)MAX_STALE * C->nc;
	for (int k = 0; k < C->nk; k++) {
		T->nst[k] = max_staleness(C, k) + 1;
		T->n_anchors[k] = anchors(C, k, T->policy[0]);
		for (int p = 0; p < T->np; p++) {
			sums(C, k, T->policy[p], DG_ANY, sum, count);
			estimate(C, 1, sum, count, stat_mean, &T->E[k][p]);
			for (int st = 0; st < T->nst[k]; st++) {
				sums(C, k, T->policy[p], st, sum, count);
				estimate(C, 1, sum, count, stat_mean, &T->stale[k][p][st]);
			}
		}
	}
	for (int p = 0; p < T->np; p++) {
		slope_n = 0;
		for (int st = 1; st < T->nst[0]; st++) { /* the reuse steps: staleness 0 is the anchor */
			sums(C, 0, T->policy[p], st, sum + (size_t)slope_n * C->nc, count + (size_t)slope_n * C->nc);
			slope_x[slope_n++] = st;
		}
		estimate(C, slope_n, sum, count, stat_slope, &T->slope[p]);
		T->slope[p].n_units = 0; /* estimate counts the first level's: the slope's are every level's */
		for (size_t i = 0; i < (size_t)slope_n * C->nc; i++)
			T->slope[p].n_units += count[i];
		sums(C, 0, T->policy[p], DG_ANY, sum, count);
		sums(C, C->nk - 1, T->policy[p], DG_ANY, sum + C->nc, count + C->nc);
		estimate(C, 2, sum, count, stat_diff, &T->drop[p]);
		for (int k = 1; k < C->nk; k++)
			for (int s = 0; s < C->ns; s++) {
				double e = T->E[k][p].per[s], prev = T->E[k - 1][p].per[s];
				if (isfinite(e) && isfinite(prev))
					T->paired[k][p]++, T->lower[k][p] += e < prev;
			}
	}
	free(sum);
}

static void tables_free(tables *T)
{
	for (int k = 0; k < T->nk; k++)
		for (int p = 0; p < T->np; p++) {
			free(T->E[k][p].per);
			for (int st = 0; st < T->nst[k]; st++)
				free(T->stale[k][p][st].per);
		}
	for (int p = 0; p < T->np; p++)
		free(T->slope[p].per), free(T->drop[p].per);
}

static const char *ci(char *buf, const stat *s)
{
	char a[32], b[32];
	if (isnan(s->lo))
		return strcpy(buf, "—");
	snprintf(buf, 80, "[%s, %s]", dg_sig3(a, s->lo), dg_sig3(b, s->hi));
	return buf;
}

/* "k of n" samples, "—" with none */
static const char *k_of_n(char *buf, int k, int n)
{
	if (!n)
		return strcpy(buf, "—");
	snprintf(buf, 64, "%d of %d", k, n);
	return buf;
}

static int write_csvs(const char *out, const ctx *C, const tables *T, const dg_sample_list *l)
{
	dg_out o;
	if (dg_out_open_in(&o, out, "anchors.csv"))
		return -1;
	fprintf(o.f, "schedule,n_anchors,policy,rel_l2,lo,hi,n_units,n_clusters,n_samples,n_lower,n_paired\n");
	for (int k = 0; k < T->nk; k++)
		for (int p = 0; p < T->np; p++) {
			const stat *s = &T->E[k][p];
			fprintf(o.f, "%s,%d,%s,%.8g,%.8g,%.8g,%.0f,%d,%d,%d,%d\n", T->sched[k], T->n_anchors[k],
				T->policy[p], s->est, s->lo, s->hi, s->n_units, s->n_clusters, s->n_samples,
				T->lower[k][p], T->paired[k][p]);
		}
	if (dg_out_commit(&o) || dg_out_open_in(&o, out, "staleness.csv"))
		return -1;
	fprintf(o.f, "schedule,policy,staleness,rel_l2,lo,hi,n_units,n_clusters,n_samples\n");
	for (int k = 0; k < T->nk; k++)
		for (int p = 0; p < T->np; p++)
			for (int st = 0; st < T->nst[k]; st++) {
				const stat *s = &T->stale[k][p][st];
				if (s->n_units > 0)
					fprintf(o.f, "%s,%s,%d,%.8g,%.8g,%.8g,%.0f,%d,%d\n", T->sched[k],
						T->policy[p], st, s->est, s->lo, s->hi, s->n_units,
						s->n_clusters, s->n_samples);
			}
	if (dg_out_commit(&o) || dg_out_open_in(&o, out, "trends.csv"))
		return -1;
	fprintf(o.f, "policy,quantity,estimate,lo,hi,n_samples,n_pos,n_fin,n_units,n_clusters\n");
	for (int p = 0; p < T->np; p++)
		for (int j = 0; j < 2; j++) {
			const stat *s = j ? &T->drop[p] : &T->slope[p];
			fprintf(o.f, "%s,%s%s%s%s%s,%.8g,%.8g,%.8g,%d,%d,%d,%.0f,%d\n", T->policy[p],
				j ? "E(" : "slope(", T->sched[0], j ? ")-E(" : ")", j ? T->sched[T->nk - 1] : "",
				j ? ")" : "", s->est, s->lo, s->hi, s->n_samples, s->n_pos, s->n_fin, s->n_units,
				s->n_clusters);
		}
	if (dg_out_commit(&o))
		return -1;
	if (C->ns < 2)
		return 0;
	if (dg_out_open_in(&o, out, "samples.csv"))
		return -1;
	fprintf(o.f, "sample,policy,quantity,estimate\n");
	for (int s = 0; s < C->ns; s++)
		for (int p = 0; p < T->np; p++) {
			for (int k = 0; k < T->nk; k++) {
				dg_csv_field(o.f, l->label[s]);
				fprintf(o.f, ",%s,E(%s),%.8g\n", T->policy[p], T->sched[k], T->E[k][p].per[s]);
			}
			dg_csv_field(o.f, l->label[s]);
			fprintf(o.f, ",%s,slope(%s),%.8g\n", T->policy[p], T->sched[0], T->slope[p].per[s]);
			dg_csv_field(o.f, l->label[s]);
			fprintf(o.f, ",%s,E(%s)-E(%s),%.8g\n", T->policy[p], T->sched[0], T->sched[T->nk - 1],
				T->drop[p].per[s]);
		}
	return dg_out_commit(&o);
}

static void boot_words(FILE *f, const ctx *C, bool tex)
{
	if (C->ns > 1)
		fprintf(f, "95%s intervals from a two-level bootstrap (%d replicates, seed %lu: the %d "
			   "samples with replacement, then (layer, head) clusters within each)",
			tex ? "\\%" : "%", C->boot, C->seed, C->ns);
	else
		fprintf(f, "95%s intervals from a bootstrap of the (layer, head) clusters (%d replicates, "
			   "seed %lu; one sample)", tex ? "\\%" : "%", C->boot, C->seed);
}

static int write_md(const char *out, const ctx *C, const tables *T, const dg_sample_list *l,
		    const char *cmdline)
{
	dg_out o;
	if (dg_out_open_in(&o, out, "refresh.md"))
		return -1;
	FILE *f = o.f;
	char a[32], b[80], c[64], e[32];
	fprintf(f, "# The refresh interval over %d sample%s\n\n`%s` (dsgap %s, commit %s).\n\n", C->ns,
		C->ns > 1 ? "s" : "", cmdline, DG_VERSION, dg_git_commit());
	fprintf(f, "E = mean relative L2 error over the post-warm-up units at density %g (computed %s on the reuse steps; "
		   "anchor steps included, with their zero error), pooled over the sample%s ",
		C->rho, dg_sig3(e, T->density_eff), C->ns > 1 ? "s" : "");
	for (int s = 0; s < C->ns; s++)
		fprintf(f, "%s%s", s ? ", " : "", l->label[s]);
	fputs("; ", f);
	boot_words(f, C, false);
	fputs(". Numbers to 3 significant figures.\n\n## Trends, with the samples where they hold\n\n", f);
	fputs("| policy | quantity | estimate | 95% CI | > 0 in | units | clusters | samples |\n"
	      "|:--|:--|--:|:--|:--|--:|--:|--:|\n", f);
	for (int p = 0; p < T->np; p++)
		for (int j = 0; j < 2; j++) {
			const stat *q = j ? &T->drop[p] : &T->slope[p];
			fprintf(f, "| %s | ", T->policy[p]);
			if (j)
				fprintf(f, "E(%s) − E(%s): more anchors help", T->sched[0], T->sched[T->nk - 1]);
			else
				fprintf(f, "error growth per step since the anchor (%s)", T->sched[0]);
			fprintf(f, " | %s | %s | %s | %.0f%s | %d | %d |\n", dg_sig3(a, q->est), ci(b, q),
				k_of_n(c, q->n_pos, q->n_fin), q->n_units, j ? " per schedule" : "", q->n_clusters,
				q->n_samples);
		}
	fprintf(f, "\nGrowth: the least-squares slope of E over the reuse steps (1 to %d steps since the "
		   "anchor) of schedule %s; with one anchor the steps since it advance with the denoising step, so the "
		   "slope holds both the staleness and how attention changes over denoising (the anchors table "
		   "separates them: same steps, more anchors); \"> 0 in k of n\": the samples whose own estimate "
		   "is positive; units: the post-warm-up units of the estimate (growth: the reuse steps of %s; "
		   "the difference: of each schedule), in (layer, head) clusters of the samples.\n\n",
		T->nst[0] - 1, T->sched[0], T->sched[0]);
	fputs("## Error vs number of anchors\n\n| anchors | schedule | policy | E | 95% CI | units | "
	      "clusters | samples | E below fewer anchors in |\n|--:|:--|:--|--:|:--|--:|--:|--:|:--|\n", f);
	for (int k = 0; k < T->nk; k++)
		for (int p = 0; p < T->np; p++) {
			const stat *q = &T->E[k][p];
			fprintf(f, "| %d | %s | %s | %s | %s | %.0f | %d | %d | %s |\n", T->n_anchors[k], T->sched[k],
				T->policy[p], dg_sig3(a, q->est), ci(b, q), q->n_units, q->n_clusters, q->n_samples,
				k_of_n(c, T->lower[k][p], T->paired[k][p]));
		}
	fputs("\nUnits: per policy. \"E below fewer anchors in k of n\": the samples whose own E is below their "
	      "own E in the schedule of the row above it (fewer anchors).\n", f);
	fprintf(f, "\n## Error vs steps since the anchor (schedule %s)\n\n| steps since anchor |", T->sched[0]);
	for (int p = 0; p < T->np; p++)
		fprintf(f, " %s | 95%% CI |", T->policy[p]);
	fputs(" units per policy | clusters | samples |\n|--:|", f);
	for (int p = 0; p < T->np; p++)
		fputs("--:|:--|", f);
	fputs("--:|--:|--:|\n", f);
	for (int st = 0; st < T->nst[0]; st++) {
		const stat *q = &T->stale[0][0][st];
		if (!(q->n_units > 0))
			continue;
		fprintf(f, "| %d |", st);
		for (int p = 0; p < T->np; p++)
			fprintf(f, " %s | %s |", dg_sig3(a, T->stale[0][p][st].est), ci(b, &T->stale[0][p][st]));
		fprintf(f, " %.0f | %d | %d |\n", q->n_units, q->n_clusters, q->n_samples);
	}
	if (C->ns > 1) {
		fprintf(f, "\n## Each sample\n\n| sample |");
		for (int p = 0; p < T->np; p++)
			fprintf(f, " %s growth | %s E(%s) − E(%s) |", T->policy[p], T->policy[p], T->sched[0],
				T->sched[T->nk - 1]);
		fputs("\n|:--|", f);
		for (int p = 0; p < T->np; p++)
			fputs("--:|--:|", f);
		fputc('\n', f);
		for (int s = 0; s < C->ns; s++) {
			fprintf(f, "| %s |", l->label[s]);
			for (int p = 0; p < T->np; p++)
				fprintf(f, " %s | %s |", dg_sig3(a, T->slope[p].per[s]), dg_sig3(e, T->drop[p].per[s]));
			fputc('\n', f);
		}
	}
	return dg_out_commit(&o);
}

static void tex_policy(FILE *f, const char *p)
{
	fputs("\\texttt{", f);
	dg_tex_name(f, p);
	fputc('}', f);
}

/* a table's first lines up to \caption{ and its words on the estimates and their intervals */
static void tex_head(FILE *f, const ctx *C, const tables *T, const char *name, const char *what)
{
	char b[32];
	fprintf(f, "%% %s.tex: generated by dsgap refreshstats (dsgap %s, commit %s) from %d sample%s.\n"
		   "%% Needs \\usepackage{booktabs}.\n\n\\begin{table*}[t]\n\\centering\n\\small\n\\caption{%s: "
		   "mean relative $L_2$ error $E$ over the post-warm-up units at $\\rho=%g$ (computed %s on the "
		   "reuse steps; anchor steps included, with their zero error), with ", name, DG_VERSION,
		dg_git_commit(), C->ns, C->ns > 1 ? "s" : "", what, C->rho, dg_sig3(b, T->density_eff));
	boot_words(f, C, true);
	fputs(". 3 significant figures.", f);
}

/* "$est$" with its interval "$[lo, hi]$" under it in small type (one cell: the tables fit the page
 * of a two-column paper, issue 49) */
static void tex_est(FILE *f, const stat *q)
{
	char a[32], b[32], c[32];
	if (isnan(q->lo))
		fprintf(f, "$%s$", dg_sig3(a, q->est));
	else
		fprintf(f, "\\begin{tabular}[t]{@{}r@{}}$%s$\\\\{\\scriptsize$[%s, %s]$}\\end{tabular}",
			dg_sig3(a, q->est), dg_sig3(b, q->lo), dg_sig3(c, q->hi));
}

static int write_tex(const char *out, const ctx *C, const tables *T)
{
	dg_out o;
	char a[64];
	if (dg_out_open_in(&o, out, "anchors.tex"))
		return -1;
	FILE *f = o.f;
	tex_head(f, C, T, "anchors", "Error against the number of anchors");
	fputs(" $n$: units per policy, $c$: (layer, head) clusters, $s$: samples; $<$ fewer: the samples "
	      "whose own $E$ is below their own $E$ in the schedule of the row above (fewer anchors).}\n"
	      "\\label{tab:refresh-anchors}\n\\begin{tabular}{rllrrrrl}\n\\toprule\nAnchors & Schedule & "
	      "Policy & $E$ (95\\% CI) & $n$ & $c$ & $s$ & $<$ fewer \\\\\n\\midrule\n", f);
	for (int k = 0; k < T->nk; k++)
		for (int p = 0; p < T->np; p++) {
			const stat *q = &T->E[k][p];
			fprintf(f, "%d & %s & ", T->n_anchors[k], T->sched[k]);
			tex_policy(f, T->policy[p]);
			fputs(" & ", f);
			tex_est(f, q);
			fprintf(f, " & %.0f & %d & %d & %s \\\\\n", q->n_units, q->n_clusters, q->n_samples,
				T->paired[k][p] ? k_of_n(a, T->lower[k][p], T->paired[k][p]) : "---");
		}
	fputs("\\bottomrule\n\\end{tabular}\n\\end{table*}\n", f);
	if (dg_out_commit(&o) || dg_out_open_in(&o, out, "trends.tex"))
		return -1;
	f = o.f;
	tex_head(f, C, T, "trends", "Trends of the refresh error");
	fprintf(f, " Growth: the least-squares slope of $E$ over the reuse steps (1 to %d steps since the "
		   "anchor) of schedule %s; $E$(%s) $-$ $E$(%s) $>0$: more anchors help. $n$: units (growth: the "
		   "reuse steps of %s; the difference: of each schedule), $c$: (layer, head) clusters, $s$: "
		   "samples; $>0$: the samples whose own estimate is positive.}\n\\label{tab:refresh-trends}\n"
		   "\\begin{tabular}{llrrrrl}\n\\toprule\nPolicy & Quantity & Estimate (95\\%% CI) & $n$ & $c$ & "
		   "$s$ & $>0$ \\\\\n\\midrule\n", T->nst[0] - 1, T->sched[0], T->sched[0], T->sched[T->nk - 1],
		T->sched[0]);
	for (int p = 0; p < T->np; p++)
		for (int j = 0; j < 2; j++) {
			const stat *q = j ? &T->drop[p] : &T->slope[p];
			if (j)
				fprintf(f, " & $E$(%s) $-$ $E$(%s) & ", T->sched[0], T->sched[T->nk - 1]);
			else {
				tex_policy(f, T->policy[p]);
				fprintf(f, " & growth per step (%s) & ", T->sched[0]);
			}
			tex_est(f, q);
			fprintf(f, " & %.0f & %d & %d & %s \\\\\n", q->n_units, q->n_clusters, q->n_samples,
				q->n_fin ? k_of_n(a, q->n_pos, q->n_fin) : "---");
		}
	fputs("\\bottomrule\n\\end{tabular}\n\\end{table*}\n", f);
	return dg_out_commit(&o);
}

/* figure `which` (0: error vs anchors, 1: vs steps since the anchor) at density rho: its name,
 * NAME-rhoX, so that the figures of another density never overwrite these (issue 19) */
static const char *fig_name(char buf[64], int which, double rho)
{
	snprintf(buf, 64, "%s-rho%g", which ? "error_vs_staleness" : "error_vs_anchors", rho);
	return buf;
}

/* the two figures: error (with its interval) vs anchors and vs steps since the anchor */
static int write_figures(const char *out, const ctx *C, const tables *T)
{
	char *fig = dg_path_join(out, "figures");
	int rc = dg_mkdir_p(fig);
	dg_out o;
	char rho[32], eff[32];
	dg_sig3(rho, C->rho);
	dg_sig3(eff, T->density_eff);
	for (int which = 0; which < 2 && !rc; which++) {
		char nbuf[64], file[80];
		const char *name = fig_name(nbuf, which, C->rho);
		snprintf(file, sizeof file, "%s.dat", name);
		if ((rc = dg_out_open_in(&o, fig, file)))
			break;
		fprintf(o.f, "# %s.dat: mean rel_l2 with its 95%% interval, one block per policy (gnuplot "
			     "index), made by dsgap refreshstats (commit %s)\n# columns: %s rel_l2 lo hi\n", name,
			dg_git_commit(), which ? "steps_since_anchor" : "n_anchors");
		for (int p = 0; p < T->np; p++) {
			fprintf(o.f, "# policy %s\n", T->policy[p]);
			int n = which ? T->nst[0] : T->nk;
			for (int i = 0; i < n; i++) {
				const stat *s = which ? &T->stale[0][p][i] : &T->E[i][p];
				if (s->n_units > 0)
					fprintf(o.f, "%d %.8g %.8g %.8g\n", which ? i : T->n_anchors[i], s->est,
						s->lo, s->hi);
			}
			fputs("\n\n", o.f);
		}
		if ((rc = dg_out_commit(&o)))
			break;
		snprintf(file, sizeof file, "%s.gp", name);
		if ((rc = dg_out_open_in(&o, fig, file)))
			break;
		fprintf(o.f, "# %s.gp: re-render inside this directory: gnuplot %s.gp\nload 'style.gp'\n"
			     "do for [fmt in \"pdf png\"] {\n"
			     "if (fmt eq \"pdf\") { set terminal pdfcairo size 4.6in,2.6in font 'Liberation Sans,8' }"
			     " else { set terminal pngcairo size 1380,780 font 'Liberation Sans,8' fontscale 2.5"
			     " linewidth 2 }\nset output '%s.'.fmt\n", name, name, name);
		fprintf(o.f, "set title \"%s\\n{/:Italic ρ} = %s (computed %s on the reuse steps); %d sample%s, "
			     "%s\"\n", which ? "error vs steps since the anchor" : "error vs number of anchors", rho, eff,
			C->ns, C->ns > 1 ? "s" : "", !C->boot ? "no intervals (--boot 0)" : C->ns > 1 ?
			"95% two-level bootstrap intervals" : "95% cluster-bootstrap intervals");
		int first = 0; /* the first staleness with units (an anchor in the warm-up has none at 0) */
		while (first < T->nst[0] - 1 && !(T->stale[0][0][first].n_units > 0))
			first++;
		if (which)
			fprintf(o.f, "set xlabel 'steps since the anchor (schedule %s: one anchor)'\nset xrange [%d.5:%d.5]\n",
				T->sched[0], first - 1, T->nst[0] - 1);
		else {
			fprintf(o.f, "set xlabel 'anchors over the reuse steps'\nset xtics (");
			for (int k = 0; k < T->nk; k++)
				fprintf(o.f, "%s%d", k ? ", " : "", T->n_anchors[k]);
			fprintf(o.f, ")\nset xrange [%g:%g]\n", T->n_anchors[0] - 0.5, T->n_anchors[T->nk - 1] + 0.5);
		}
		fprintf(o.f, "set ylabel 'relative L_2 error (mean)'\nset yrange [0:*]\n"
			     "set key outside right top noenhanced\nplot");
		for (int p = 0; p < T->np; p++) {
			fprintf(o.f, "%s '%s.dat' index %d using ($1%+.3f):2%s with %s ls %d title ", /* --boot 0: */
				p ? ", \\\n " : "", name, p, 0.06 * (p - (T->np - 1) / 2.0), C->boot ? ":3:4" : "",
				C->boot ? "yerrorlines" : "linespoints", p + 1); /* no bars (nan) */
			dg_gp_string(o.f, T->policy[p]);
		}
		fputs("\nunset output\n}\n", o.f);
		if ((rc = dg_out_commit(&o)))
			break;
	}
	if (!rc && !(rc = dg_out_open_in(&o, fig, "style.gp"))) {
		fputs(DG_STYLE_GP, o.f);
		rc = dg_out_commit(&o);
	}
	free(fig);
	return rc;
}

static int render(const char *out, double rho)
{
	char *fig = dg_path_join(out, "figures"), a[64], b[64];
	int rc = 0;
	if (dg_gnuplot_found())
		rc = dg_gnuplot(fig, fig_name(a, 0, rho)) || dg_gnuplot(fig, fig_name(b, 1, rho));
	else
		dg_warn("refreshstats: no gnuplot: %s/*.gp not rendered", fig);
	free(fig);
	return rc;
}

/* the policies of the first run but dense, and the same clusters in every run of a sample */
static int check_runs(const ctx *C, const dg_sample_list *l, tables *T)
{
	const dg_results *r0 = &C->run[0];
	for (int p = 0; p < r0->n_policies && T->np < MAX_POL; p++)
		if (strcmp(r0->policy[p], "dense"))
			T->policy[T->np++] = r0->policy[p];
	if (!T->np)
		return dg_error("refreshstats: %s: no policy but dense", r0->dir);
	if (dg_results_density(r0, C->rho) < 0)
		return dg_error("refreshstats: %s: no density_target %g", r0->dir, C->rho);
	for (int s = 0; s < C->ns; s++)
		for (int k = 1; k < C->nk; k++) {
			const dg_results *a = &C->run[s * C->nk], *b = &C->run[s * C->nk + k];
			bool same = a->n_clusters == b->n_clusters;
			for (int c = 0; same && c < a->n_clusters; c++)
				same = a->cluster[c].layer == b->cluster[c].layer &&
				       a->cluster[c].head == b->cluster[c].head;
			if (!same)
				return dg_error("refreshstats: sample %s: %s and %s have other (layer, head) "
						"clusters", l->label[s], a->dir, b->dir);
		}
	return 0;
}

int dg_refreshstats(const dg_refresh_opts *o, const dg_sample_list *l)
{
	tables *T = dg_calloc(1, sizeof *T);
	T->nk = o->nk;
	for (int k = 0; k < o->nk; k++)
		T->sched[k] = o->sched[k];
	ctx C = { .ns = l->n, .nk = T->nk, .boot = o->boot, .seed = o->seed };
	dg_results *run = dg_calloc((size_t)l->n * T->nk + 1, sizeof *run);
	int rc = 0, loaded = 0;
	for (; !rc && loaded < l->n * T->nk; loaded++) {
		size_t len = strlen(l->dir[loaded / T->nk]) + strlen(T->sched[loaded % T->nk]) + 2;
		char *dir = dg_malloc(len);
		snprintf(dir, len, "%s.%s", l->dir[loaded / T->nk], T->sched[loaded % T->nk]);
		rc = dg_results_load(&run[loaded], dir);
		char *m = dg_path_join(dir, "metrics.csv"), *j = dg_path_join(dir, "run.json");
		dg_input_add(m), dg_input_add(j);
		free(m), free(j), free(dir);
	}
	if (rc)
		loaded--;
	C.run = run;
	if (!rc && dg_output_folder_check("refreshstats", o->out)) /* no output may be, hold or lie in an input */
		rc = -1;
	if (!rc) {
		C.rho = isnan(o->rho) ? run[0].density[0] : o->rho;
		rc = check_runs(&C, l, T);
	}
	if (!rc) {
		C.off = dg_malloc((C.ns + 1) * sizeof *C.off);
		C.off[0] = 0;
		for (int s = 0; s < C.ns; s++)
			C.off[s + 1] = C.off[s] + run[s * C.nk].n_clusters;
		C.nc = C.off[C.ns];
		build(&C, T);
		T->density_eff = reuse_density(&C, T->policy[0]);
		/* the tables and the rendered figures made whole in a staging folder, then published: a
		 * gnuplot failure publishes nothing */
		dg_stage st;
		rc = dg_stage_open(&st, o->out, "refreshstats");
		if (!rc) {
			const char *s = st.path;
			rc = write_csvs(s, &C, T, l) || write_md(s, &C, T, l, o->cmdline) || write_tex(s, &C, T) ||
			     write_figures(s, &C, T) || render(s, C.rho);
			rc = dg_stage_close(&st, rc);
		}
		tables_free(T);
		if (!rc) {
			printf("refreshstats: %d sample%s, schedules %s, density %g (computed %.3g); %s\n", C.ns,
			       C.ns > 1 ? "s" : "", o->scheds, C.rho, T->density_eff,
			       C.ns > 1 ? "two-level bootstrap" : "cluster bootstrap");
			for (int p = 0; p < T->np; p++)
				printf("  %s: growth per step %.3g [%.3g, %.3g] (> 0 in %d of %d); E(%s) - E(%s) "
				       "%.3g [%.3g, %.3g] (> 0 in %d of %d)\n", T->policy[p], T->slope[p].est,
				       T->slope[p].lo, T->slope[p].hi, T->slope[p].n_pos, T->slope[p].n_fin,
				       T->sched[0], T->sched[T->nk - 1], T->drop[p].est, T->drop[p].lo,
				       T->drop[p].hi, T->drop[p].n_pos, T->drop[p].n_fin);
			printf("wrote %s: refresh.md, anchors.{csv,tex}, staleness.csv, trends.{csv,tex}%s, figures/\n", o->out,
			       C.ns > 1 ? ", samples.csv" : "");
		}
		free(C.off);
	}
	for (int i = 0; i < loaded; i++)
		dg_results_free(&run[i]);
	free(run);
	free(T);
	return rc ? -1 : 0;
}
