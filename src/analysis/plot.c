/*
 * plot.c: the figures of a results directory: .dat + .gp per figure, rendered by gnuplot as a
 * child process into a temporary directory that replaces DIR/figures on success. See plot.h.
 *   dsgap plot DIR [--density X] [--boot N] [--seed X]     (cmd_plot.c)
 *   cd DIR/figures && gnuplot NAME.gp    re-renders one figure without dsgap
 */
#include "analysis/plot.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gsl/gsl_sort_double.h>
#include <gsl/gsl_sort_int.h>
#include <gsl/gsl_statistics_double.h>

#include "analysis/bootstrap.h"
#include "analysis/decompose.h"
#include "policy/presets.h"
#include "analysis/style_gp.h"
#include "util/files.h"
#include "util/util.h"

#ifndef DG_GNUPLOT
#define DG_GNUPLOT "gnuplot"
#endif

#define PANEL_W 3.4 /* inches: one column of a two-column paper */
#define PANEL_H 2.4
#define PAGE_W 7.0 /* inches: the text width a multi-panel figure must fit */
#define KEY_ROW_H 0.13 /* inches per row of a key at 7 pt */
#define AXIS_H 0.42    /* inches under a plot area for the tic labels and the axis label */
#define PNG_DPI 300
#define MASS_POINTS 201 /* quantiles drawn per empirical CDF */
#define MAX_FIGURES 8
#define FAMILY_MAX 64 /* policies drawn per family */
/* how bar charts draw a 95% interval: a black I-beam */
#define INTERVAL "heads size screen 0.006,90 lc rgb '#000000' lw 1"

enum { FAM_LADDER, FAM_FACTORIAL, FAM_OTHER, FAM_COUNT };
static const char *const family_title[FAM_COUNT] = {
	"oracle ladder (refresh=step)", "MC-Sparse factorial (refresh=anchor)", "other policies"
};
static const char *const family_short[FAM_COUNT] = { "oracle ladder", "MC-Sparse factorial",
						     "other policies" };
/* the factorial's k-th cell in display order (the presets table's: by the number of components on) */
static const dg_preset *cell(int k)
{
	const dg_preset *c[8];
	dg_preset_family(DG_FAMILY_FACTORIAL, c, 8);
	return c[k];
}

/* "none", "G", "S+R", ...: the components a cell has on */
static const char *cell_short(int k, char buf[8])
{
	unsigned m = cell(k)->components;
	snprintf(buf, 8, "%s%s%s%s", m & 1u << DG_COMP_G ? "G" : "",
		 (m & 1u << DG_COMP_G) && (m & 1u << DG_COMP_S) ? "+" : "", m & 1u << DG_COMP_S ? "S" : "",
		 m & 1u << DG_COMP_R ? (m & 3 ? "+R" : "R") : "");
	if (!m)
		snprintf(buf, 8, "none");
	return buf;
}

typedef struct {
	const dg_results *r;
	const dg_plot_opts *o;
	const char *dir;           /* the temporary figures directory */
	const char *made[MAX_FIGURES]; /* figures written, to render */
	int n_made;
	char names[MAX_FIGURES][64];   /* the per-density figures' names: NAME-rhoX */
	int n_names;
} plotter;

/* NAME-rhoX: a per-density figure carries its density_target, so that plotting another density
 * into the same folder keeps this one (issue 19) */
static const char *density_name(plotter *pl, const char *base)
{
	DG_ASSERT(pl->n_names < MAX_FIGURES);
	char *b = pl->names[pl->n_names++];
	snprintf(b, 64, "%s-rho%g", base, pl->r->density[pl->o->density]);
	return b;
}

/* The mean computed (effective) density of policy p at density index d over its post-warm-up
 * units; NaN without any. */
static double policy_density(const dg_results *r, int p, int d)
{
	const size_t j = (size_t)p * r->n_densities + d;
	double s = 0, n = 0;
	for (size_t i = r->range[j]; i < r->range[j + 1]; i++)
		if (dg_results_post_warmup(r, &r->unit[i])) {
			s += r->unit[i].density_eff;
			n++;
		}
	return n > 0 ? s / n : NAN;
}

/* The computed density at density index d: that of the first of est-block, baseline, mc-sparse
 * present there; NaN without any. */
static double computed_density(const dg_results *r, int d)
{
	static const char *const ref[] = { "est-block", "baseline", "mc-sparse" };
	for (int k = 0; k < 3; k++) {
		int p = dg_results_policy(r, ref[k]);
		double c = p < 0 ? NAN : policy_density(r, p, d);
		if (!isnan(c))
			return c;
	}
	return NAN;
}

/* gnuplot title text: "target density ρ = 0.1, computed 0.125 (est-block)" */
static void gp_density_title(FILE *f, const dg_results *r, int d)
{
	double c = computed_density(r, d);
	fprintf(f, "set title 'target density {/:Italic ρ} = %g", r->density[d]);
	if (!isnan(c))
		fprintf(f, ", computed %.3g", c);
	fprintf(f, "'\n");
}

/* A gnuplot tic label of density index d: the target over its computed density, "0.1\n(0.125)"
 * (issue 19: at 4096 tokens 0.1 computes to 0.125); the target alone where none is computed. */
static void gp_density_tic(FILE *f, const dg_results *r, int d)
{
	double c = computed_density(r, d);
	fprintf(f, isnan(c) ? "\"%g\"" : "\"%g\\n(%.3g)\"", r->density[d], c);
}

/* A policy of a family with its line style (fixed per policy within a family). */
typedef struct {
	int policy, style;
} member;

/* The family's policies present in r, in display order (at most FAMILY_MAX); the count. */
static int family_members(const dg_results *r, int fam, member *out)
{
	const char *const *ladder;
	const int nl = dg_table_policies(DG_TABLE_LADDER, &ladder);
	int n = 0;
	if (fam == FAM_LADDER || fam == FAM_FACTORIAL) {
		for (int i = 0; i < (fam == FAM_LADDER ? nl : 8); i++) {
			int p = dg_results_policy(r, fam == FAM_LADDER ? ladder[i] : cell(i)->name);
			if (p >= 0)
				out[n++] = (member){ p, i + 1 };
		}
		return n;
	}
	for (int p = 0; p < r->n_policies; p++) {
		const dg_preset *pr = dg_preset_find(r->policy[p]);
		if (pr && (pr->family == DG_FAMILY_DENSE || pr->family == DG_FAMILY_LADDER ||
			   pr->family == DG_FAMILY_FACTORIAL))
			continue;
		if (n == FAMILY_MAX) {
			dg_warn("plot: more than %d other policies: %s and later ones not drawn",
				FAMILY_MAX, r->policy[p]);
			break;
		}
		out[n] = (member){ p, n % 15 + 1 };
		n++;
	}
	return n;
}

/* ---- files ---------------------------------------------------------------------------------- */

static FILE *create(const plotter *pl, const char *name, const char *ext)
{
	char file[128];
	snprintf(file, sizeof file, "%s.%s", name, ext);
	char *path = dg_path_join(pl->dir, file);
	FILE *f = fopen(path, "w");
	if (!f)
		dg_error("cannot write %s: %s", path, strerror(errno));
	free(path);
	return f;
}

static const char *figures_dir = "figures"; /* DIR/figures while dg_plot runs: for messages */

static int finish(FILE *f, const char *name, const char *ext)
{
	int bad = dg_out_close_errno(f);
	if (bad)
		return dg_error("cannot write %s/%s.%s: %s", figures_dir, name, ext, strerror(bad));
	return 0;
}

/* NAME.dat then NAME.gp: one line for the first that fails (the other is closed quietly) */
static int finish_pair(FILE *dat, FILE *gp, const char *name)
{
	if (finish(dat, name, "dat")) {
		fclose(gp);
		return -1;
	}
	return finish(gp, name, "gp");
}

void dg_gp_string(FILE *f, const char *s)
{
	fputc('\'', f);
	for (; *s; s++) {
		if (*s == '\'')
			fputc('\'', f);
		fputc((unsigned char)*s < 0x20 ? '?' : *s, f);
	}
	fputc('\'', f);
}

static void provenance(FILE *f, const plotter *pl)
{
	const dg_results *r = pl->r;
	char *dir = dg_path_shown(r->dir), *tp = dg_path_shown(r->trace_path), *src = dg_path_shown(r->source);
	fprintf(f, "# made by dsgap plot (dsgap %s, commit %s) from %s\n", DG_VERSION, dg_git_commit(), dir);
	fprintf(f, "# trace %s (model %s, source %s); metrics by commit %s on %s, %s\n", tp, r->model,
		src, r->git_commit, r->device, r->date);
	free(dir), free(tp), free(src);
}

static void dat_header(FILE *f, const plotter *pl, const char *name, const char *what,
		       const char *columns)
{
	fprintf(f, "# %s.dat: %s\n", name, what);
	provenance(f, pl);
	fprintf(f, "# E: mean rel_l2 over post-warm-up units (step >= %d, dense layers left out); "
		   "lo, hi: 95%% percentile bootstrap over (layer, head) clusters, %d replicates, "
		   "seed %lu\n# columns: %s\n", pl->r->warmup, pl->o->boot, pl->o->seed, columns);
}

/* Header of NAME.gp and the start of the loop over the two terminals; gp_end closes it. */
static void gp_begin(FILE *f, const plotter *pl, const char *name, const char *what, double w,
		     double h)
{
	fprintf(f, "# %s.gp: %s\n", name, what);
	provenance(f, pl);
	fprintf(f, "# re-render inside this directory: gnuplot %s.gp   (writes %s.pdf and %s.png)\n"
		   "load 'style.gp'\n"
		   "do for [fmt in \"pdf png\"] {\n"
		   "if (fmt eq \"pdf\") {\n"
		   "\tset terminal pdfcairo size %.2fin,%.2fin font 'Liberation Sans,8'\n"
		   "} else {\n"
		   "\tset terminal pngcairo size %d,%d font 'Liberation Sans,8' fontscale %g "
		   "linewidth %g\n"
		   "}\n"
		   "set output '%s.'.fmt\n",
		name, name, name, w, h, (int)(w * PNG_DPI), (int)(h * PNG_DPI), PNG_DPI / 100.0,
		PNG_DPI / 150.0, name);
}

static void gp_end(FILE *f) { fprintf(f, "unset output\n}\n"); }

static void made(plotter *pl, const char *name)
{
	DG_ASSERT(pl->n_made < MAX_FIGURES);
	pl->made[pl->n_made++] = name;
}

/* the script's end: closed, checked, and the figure counted as made; 0 or -1 after one line */
static int gp_done(plotter *pl, FILE *gp, const char *name)
{
	gp_end(gp);
	if (finish(gp, name, "gp"))
		return -1;
	made(pl, name);
	return 0;
}

/* ---- statistics ----------------------------------------------------------------------------- */

static void identity(const double *E, double *q) { q[0] = E[0]; }

/*
 * E of policy p at density d over the post-warm-up units with this staleness (DG_ANY: all),
 * with its interval. Returns the number of units (0: none; e, lo, hi untouched).
 */
static double policy_mean(const plotter *pl, int p, int d, int staleness, double *e, double *lo,
			  double *hi)
{
	const int nc = pl->r->n_clusters;
	double *sum = dg_malloc(2 * nc * sizeof *sum), *count = sum + nc, n = 0;
	int *member = dg_malloc(nc * sizeof *member), nm = 0;
	dg_results_cluster_sums(pl->r, p, d, staleness, sum, count);
	for (int c = 0; c < nc; c++)
		if (count[c] > 0) {
			member[nm++] = c;
			n += count[c];
		}
	if (nm) {
		dg_boot_data data = { .n_pol = 1, .n_clusters = nc, .sum = sum, .count = count,
				      .member = member, .n_member = nm };
		dg_boot_stat(&data, identity, 1, pl->o->boot, pl->o->seed, e, lo, hi);
	}
	free(member);
	free(sum);
	return n;
}

/*
 * The plot clause of data block `index`: points with error bars when there are intervals. The
 * x column is `x` (a gnuplot expression), to dodge the series of a panel so that their error
 * bars do not hide each other.
 */
static void gp_series(FILE *f, const plotter *pl, const char *file, int index, const member *m,
		      const char *x, bool first)
{
	fprintf(f, "%s'%s' index %d using %s:2%s with %s ls %d title ", first ? "plot " : ", \\\n\t",
		file, index, x, pl->o->boot ? ":3:4" : "", pl->o->boot ? "yerrorlines" : "linespoints",
		m->style);
	dg_gp_string(f, pl->r->policy[m->policy]);
	fprintf(f, " noenhanced");
}

/* ---- figures: each returns 0 (written), 1 (skipped, with a warning) or -1 ------------------- */

/*
 * A log axis over the data range [lo, hi]: the range widened to the nearest "nice" values and a
 * tic at each: 1-2-5 per decade, or 1-2-3-5, or 1..9, the first that gives at least 3 tics.
 */
static void gp_log_axis(FILE *f, char axis, double lo, double hi)
{
	static const int steps[3][9] = { { 1, 2, 5 }, { 1, 2, 3, 5 }, { 1, 2, 3, 4, 5, 6, 7, 8, 9 } };
	static const int nsteps[3] = { 3, 4, 9 };
	for (int k = 0; k < 3; k++) {
		double nice[64], a = 0, b = 0;
		int n = 0;
		for (double dec = pow(10, floor(log10(lo)) - 1); n < 55 && dec <= hi * 10; dec *= 10)
			for (int j = 0; j < nsteps[k]; j++)
				nice[n++] = steps[k][j] * dec;
		for (int i = 0; i < n; i++) {
			if (nice[i] <= lo * (1 + 1e-9))
				a = nice[i];
			if (!b && nice[i] >= hi * (1 - 1e-9))
				b = nice[i];
		}
		int tics = 0;
		for (int i = 0; i < n; i++)
			tics += nice[i] >= a && nice[i] <= b;
		if (tics < 3 && k < 2)
			continue;
		fprintf(f, "set %crange [%.3g:%.3g]\nset %ctics (", axis, a, b, axis);
		for (int i = 0, m = 0; i < n; i++)
			if (nice[i] >= a && nice[i] <= b)
				fprintf(f, "%s%.3g", m++ ? ", " : "", nice[i]);
		fprintf(f, ")\n");
		return;
	}
}

/*
 * Panel i of n side by side in a figure w x h inches with `bottom` inches below the plot area
 * (tics, label, key): the same plot-area geometry for every panel.
 */
static void gp_panel(FILE *f, int i, int n, double w, double h, double bottom)
{
	const double pw = w / n;
	fprintf(f, "set lmargin at screen %.4f\nset rmargin at screen %.4f\n"
		   "set bmargin at screen %.4f\nset tmargin at screen %.4f\n",
		(i * pw + 0.6) / w, ((i + 1) * pw - 0.12) / w, bottom / h, 1 - 0.28 / h);
}

/* A key of `rows` rows in columns, under panel i's axis label, room for max_rows there. */
static void gp_key_below(FILE *f, int i, int n, double w, double h, int rows, int max_rows)
{
	fprintf(f, "set key at screen %.4f, screen %.4f left top vertical maxrows %d Left reverse "
		   "samplen 1.5 width -2 font ',7'\n", (i * w / n + 0.45) / w,
		(max_rows * KEY_ROW_H + 0.05) / h, rows);
}


/* The longest policy name of these members. */
static size_t longest_name(const dg_results *r, const member *m, int n)
{
	size_t longest = 0;
	for (int i = 0; i < n; i++)
		if (strlen(r->policy[m[i].policy]) > longest)
			longest = strlen(r->policy[m[i].policy]);
	return longest;
}

/* Rows of a key of n entries (the longest `longest` characters) in up to 3 columns at 7 pt. */
static int key_rows(size_t longest, int n, double width)
{
	int cols = (int)((width - 0.45) / (0.046 * longest + 0.25));
	cols = cols < 1 ? 1 : cols > 3 ? 3 : cols;
	return (n + cols - 1) / cols;
}

/*
 * E against density, each point at its policy's own computed density (issue 19: a peer with a
 * density of its own, e.g. STA's window or Radial at 0.91, is drawn where it ran, not at the target
 * it was listed under; a run repeated unchanged at several targets is drawn once).
 */
static int fig_error_vs_density(plotter *pl)
{
	static const char *name = "error_vs_density";
	const dg_results *r = pl->r;
	member fam[FAM_COUNT][FAMILY_MAX];
	int nfam[FAM_COUNT], npanel = 0, index = 0, rows = 0, block[FAM_COUNT][FAMILY_MAX];
	double ylo[FAM_COUNT], yhi[FAM_COUNT], xlo = INFINITY, xhi = 0;
	FILE *dat = create(pl, name, "dat");
	if (!dat)
		return -1;
	dat_header(dat, pl, name, "mean rel_l2 against the policy's computed density (mean "
		   "density_eff over the same units), one block per policy; a run that gives the same "
		   "density and E at several targets is one point (its first target)",
		   "density E lo hi n_units density_target");
	for (int k = 0; k < FAM_COUNT; k++) {
		member all[FAMILY_MAX];
		int n = family_members(r, k, all);
		nfam[k] = 0;
		ylo[k] = INFINITY;
		yhi[k] = 0;
		for (int i = 0; i < n; i++) {
			int points = 0;
			double done_x[64], done_e[64];
			for (int d = 0; d < r->n_densities; d++) {
				double e = NAN, lo = NAN, hi = NAN;
				double units = policy_mean(pl, all[i].policy, d, DG_ANY, &e, &lo, &hi);
				double x = policy_density(r, all[i].policy, d);
				if (units == 0 || !(e > 0) || !(x > 0)) /* log axes: zero error (dense) */
					continue;
				bool again = false;
				for (int j = 0; j < points; j++)
					again |= done_x[j] == x && done_e[j] == e;
				if (again || points == 64)
					continue;
				if (!points)
					fprintf(dat, "# policy %s\n", r->policy[all[i].policy]);
				done_x[points] = x;
				done_e[points++] = e;
				fprintf(dat, "%.6g %.8g %.8g %.8g %.0f %.10g\n", x, e, lo, hi, units,
					r->density[d]);
				ylo[k] = fmin(ylo[k], lo > 0 ? lo : e);
				yhi[k] = fmax(yhi[k], hi > 0 ? hi : e);
				xlo = fmin(xlo, x);
				xhi = fmax(xhi, x);
			}
			if (points) {
				fprintf(dat, "\n\n");
				block[k][nfam[k]] = index++;
				fam[k][nfam[k]++] = all[i];
			}
		}
		npanel += nfam[k] > 0;
	}
	if (finish(dat, name, "dat"))
		return -1;
	if (!npanel) {
		dg_warn("plot: no sparse policy with post-warm-up units: %s skipped", name);
		return 1;
	}
	FILE *gp = create(pl, name, "gp");
	if (!gp)
		return -1;
	const double pw = fmin(PANEL_W, PAGE_W / npanel), w = pw * npanel;
	for (int k = 0; k < FAM_COUNT; k++)
		rows = fmax(rows, key_rows(longest_name(r, fam[k], nfam[k]), nfam[k], pw));
	const double bottom = AXIS_H + rows * KEY_ROW_H + 0.05, h = PANEL_H + rows * KEY_ROW_H;
	gp_begin(gp, pl, name, "mean rel_l2 against the computed density, per policy", w, h);
	/* the series of a panel dodged by a factor exp(step) apart, together at most 10% */
	double step[FAM_COUNT], half = 0;
	for (int k = 0; k < FAM_COUNT; k++) {
		step[k] = nfam[k] > 1 ? fmin(0.015, 0.1 / (nfam[k] - 1)) : 0;
		half = fmax(half, step[k] * (nfam[k] - 1) / 2);
	}
	fprintf(gp, "set multiplot\nset logscale xy\n");
	gp_log_axis(gp, 'x', xlo * exp(-half), xhi * exp(half));
	fprintf(gp, "set mxtics default\nset mytics default\n"
		    "set offsets graph 0.06, graph 0.06, 0, 0\n"
		    "set xlabel 'computed density {/:Italic ρ} (targets ");
	for (int d = 0; d < r->n_densities; d++)
		fprintf(gp, "%s%g", d ? ", " : "", r->density[d]);
	fprintf(gp, ")' offset 0,0.3\nset ylabel 'relative L_2 error (mean)'\n");
	for (int k = 0, panel = 0; k < FAM_COUNT; k++) {
		if (!nfam[k])
			continue;
		gp_panel(gp, panel, npanel, w, h, bottom);
		gp_key_below(gp, panel, npanel, w, h,
			     key_rows(longest_name(r, fam[k], nfam[k]), nfam[k], pw), rows);
		gp_log_axis(gp, 'y', ylo[k], yhi[k]);
		fprintf(gp, "set title '(%c) %s' noenhanced\n", 'a' + panel++, family_title[k]);
		for (int i = 0; i < nfam[k]; i++) {
			char x[32];
			snprintf(x, sizeof x, "($1*%.4f)", exp(step[k] * (i - (nfam[k] - 1) / 2.0)));
			gp_series(gp, pl, "error_vs_density.dat", block[k][i], &fam[k][i], x, i == 0);
		}
		fprintf(gp, "\n");
	}
	fprintf(gp, "unset multiplot\n");
	return gp_done(pl, gp, name);
}

static bool have_units(const dg_results *r, const char *policy, int d)
{
	int p = dg_results_policy(r, policy);
	if (p < 0)
		return false;
	size_t k = (size_t)p * r->n_densities + d;
	for (size_t i = r->range[k]; i < r->range[k + 1]; i++)
		if (dg_results_post_warmup(r, &r->unit[i]))
			return true;
	return false;
}

static int fig_sources_per_layer(plotter *pl)
{
	const char *name = density_name(pl, "sources_per_layer");
	const dg_results *r = pl->r;
	const int d = pl->o->density;
	if (!have_units(r, "est-block", d) || !have_units(r, "oracle-block", d) ||
	    !have_units(r, "oracle", d)) {
		dg_warn("plot: %s skipped: needs est-block, oracle-block and oracle after warm-up at "
			"density_target %g", name, r->density[d]);
		return 1;
	}
	dg_table t;
	if (dg_table_build(r, DG_TABLE_LADDER, d, pl->o->boot, pl->o->seed, &t)) {
		dg_table_free(&t);
		return 1;
	}
	const int nl = t.n_rows - 1; /* row 0: all layers, then one row per layer */
	const double density_eff = t.row[0].density_eff;
	FILE *dat = create(pl, name, "dat"), *gp = dat ? create(pl, name, "gp") : NULL;
	if (!gp) {
		if (dat)
			fclose(dat);
		dg_table_free(&t);
		return -1;
	}
	char what[200];
	snprintf(what, sizeof what, "sources of the gap per layer at density_target %g, diverging "
		 "stacks: positive terms stacked up from 0, negative ones down from 0 (x: bar position; "
		 "lo, hi: interval of E(est-block))", r->density[d]);
	dat_header(dat, pl, name, what, "x layer lost_lo lost_hi grouping_lo grouping_hi "
		   "selection_lo selection_hi E(est-block) lo hi n_units lost grouping selection");
	gp_begin(gp, pl, name, "sources of the dense-sparse gap per layer, diverging stacks (their "
		 "sum: E(est-block), the black point)", PANEL_W, PANEL_H + 0.25);
	const int every = nl > 16 ? (nl + 9) / 10 : 1;
	double ymin = 0, ymax = 0;
	fprintf(gp, "set xtics (");
	for (int i = 0; i <= nl; i++) {
		const dg_row *w = &t.row[i < nl ? i + 1 : 0];
		double x = i < nl ? i : nl + 1.0;
		char label[16] = "all";
		if (i < nl)
			snprintf(label, sizeof label, "%d", w->layer);
		static const int order[3] = { DG_LAD_LOST, DG_LAD_GROUPING, DG_LAD_SELECTION };
		double up = 0, down = 0, lo[3], hi[3];
		for (int k = 0; k < 3; k++) { /* a negative term hangs below zero */
			double v = w->est[order[k]];
			if (v >= 0) {
				lo[k] = up;
				hi[k] = up += v;
			} else {
				hi[k] = down;
				lo[k] = down += v;
			}
		}
		ymax = fmax(ymax, fmax(up, isnan(w->hi[DG_LAD_E_EST]) ? 0 : w->hi[DG_LAD_E_EST]));
		ymin = fmin(ymin, fmin(down, isnan(w->lo[DG_LAD_E_EST]) ? 0 : w->lo[DG_LAD_E_EST]));
		fprintf(dat, "%g %s %.8g %.8g %.8g %.8g %.8g %.8g %.8g %.8g %.8g %.0f %.8g %.8g %.8g\n",
			x, label, lo[0], hi[0], lo[1], hi[1], lo[2], hi[2], w->est[DG_LAD_E_EST],
			w->lo[DG_LAD_E_EST], w->hi[DG_LAD_E_EST], w->n_units, w->est[DG_LAD_LOST],
			w->est[DG_LAD_GROUPING], w->est[DG_LAD_SELECTION]);
		if (i == nl || i % every == 0)
			fprintf(gp, "%s\"%s\" %g", i ? ", " : "", label, x);
	}
	dg_table_free(&t);
	const double pad = 0.08 * (ymax - ymin);
	fprintf(gp, ")\nset xrange [-0.7:%g]\nset yrange [%g:%g]\n"
		    "set arrow from %g, graph 0 to %g, graph 1 nohead dt 2 lc rgb '#999999'\n"
		    "set xlabel 'layer'\nset ylabel 'relative L_2 error (mean)'\n",
		nl + 1.7, ymin < 0 ? ymin - pad : 0, ymax + pad, (double)nl, (double)nl);
	fprintf(gp, "set title 'target density {/:Italic ρ} = %g, computed %.3g (est-block)'\n",
		r->density[d], density_eff);
	fprintf(gp, "set key outside top center horizontal maxrows 2 Left reverse samplen 1 "
		    "font ',7'\n"
		    "set style fill solid 0.85 noborder\n"
		    "set xzeroaxis lt -1 lw 1\n"
		    "f = '%s.dat'\n"
		    "plot f using 1:(($3+$4)/2):($1-0.4):($1+0.4):3:4 with boxxyerror ls ls_lost "
		    "title 'lost contributions', \\\n"
		    "\tf using 1:(($5+$6)/2):($1-0.4):($1+0.4):5:6 with boxxyerror ls ls_grouping "
		    "title 'grouping', \\\n"
		    "\tf using 1:(($7+$8)/2):($1-0.4):($1+0.4):7:8 with boxxyerror ls ls_selection "
		    "title 'selection', \\\n"
		    "\tf using 1:9%s with %s pt 7 ps 0.6 lc rgb '#000000' lw 1 title "
		    "'E(est-block) = sum%s'\n",
		name, pl->o->boot ? ":10:11" : "", pl->o->boot ? "yerrorbars" : "points",
		pl->o->boot ? " (95% CI)" : "");
	gp_end(gp);
	int rc = finish_pair(dat, gp, name);
	if (rc)
		return -1;
	made(pl, name);
	return 0;
}

/* The all-layers ablation rows of every density with the 8 cells (density < 0) or of one. */
static int ablation_rows(const plotter *pl, int density, dg_table *t)
{
	for (int d = 0; d < pl->r->n_densities; d++) {
		bool all = true;
		for (int s = 0; s < 8; s++)
			all &= have_units(pl->r, cell(s)->name, d);
		if (all && (density < 0 || d == density))
			return dg_table_build(pl->r, DG_TABLE_ABLATION, density, pl->o->boot,
					      pl->o->seed, t);
	}
	*t = (dg_table){ 0 };
	return 1;
}

static int fig_ablation(plotter *pl)
{
	const char *name = density_name(pl, "ablation");
	const dg_results *r = pl->r;
	const int d = pl->o->density;
	dg_table t;
	if (ablation_rows(pl, d, &t)) {
		dg_warn("plot: %s skipped: needs the 8 factorial cells after warm-up at "
			"density_target %g", name, r->density[d]);
		return 1;
	}
	const dg_row *w = &t.row[0];
	const double density_eff = w->density_eff;
	FILE *dat = create(pl, name, "dat"), *gp = dat ? create(pl, name, "gp") : NULL;
	if (!gp) {
		if (dat)
			fclose(dat);
		dg_table_free(&t);
		return -1;
	}
	char what[160];
	snprintf(what, sizeof what, "E of the 8 factorial cells at density_target %g (all layers)",
		 r->density[d]);
	dat_header(dat, pl, name, what, "x components policy E lo hi");
	for (int k = 0; k < 8; k++) {
		int q = DG_ABL_E + (int)cell(k)->components;
		char sh[8];
		fprintf(dat, "%d %s %s %.8g %.8g %.8g\n", k, cell_short(k, sh), cell(k)->name, w->est[q],
			w->lo[q], w->hi[q]);
	}
	dg_table_free(&t);
	gp_begin(gp, pl, name, "E of the MC-Sparse factorial cells with 95% intervals", PANEL_W,
		 PANEL_H);
	fprintf(gp, "set xrange [-0.6:7.6]\nset yrange [0:*]\nset boxwidth 0.7\n"
		    "set style fill solid 0.85 noborder\nset grid noxtics\n"
		    "set xlabel 'components on (G: grouping, S: selection, R: residual)'\n"
		    "set ylabel 'relative L_2 error (mean)'\n"
		    "set title 'target density {/:Italic ρ} = %g, computed %.3g'\n"
		    "f = '%s.dat'\n"
		    "plot f using 1:4:xtic(2) with boxes ls 9 notitle%s\n",
		r->density[d], density_eff, name,
		pl->o->boot ? ", \\\n\tf using 1:5:(0):($6-$5) with vectors " INTERVAL " notitle" :
			      "");
	gp_end(gp);
	int rc = finish_pair(dat, gp, name);
	if (rc)
		return -1;
	made(pl, name);
	return 0;
}

static int fig_shapley(plotter *pl)
{
	static const char *name = "shapley";
	const dg_results *r = pl->r;
	dg_table t;
	if (ablation_rows(pl, -1, &t)) {
		dg_warn("plot: %s skipped: no density has the 8 factorial cells after warm-up", name);
		return 1;
	}
	FILE *dat = create(pl, name, "dat"), *gp = dat ? create(pl, name, "gp") : NULL;
	if (!gp) {
		if (dat)
			fclose(dat);
		dg_table_free(&t);
		return -1;
	}
	dat_header(dat, pl, name, "Shapley shares of the error reduction E(baseline) - "
		   "E(mc-sparse) per density (all layers; positive = error reduced)",
		   "x density_target G lo hi S lo hi R lo hi total lo hi");
	gp_begin(gp, pl, name, "Shapley shares of G, S, R per density with 95% intervals",
		 PANEL_W, PANEL_H);
	fprintf(gp, "set xtics (");
	int x = 0;
	for (int i = 0; i < t.n_rows; i++) {
		const dg_row *w = &t.row[i];
		if (w->layer != DG_ANY)
			continue;
		fprintf(dat, "%d %.10g", x, r->density[w->density]);
		for (int k = 0; k <= DG_COMP_COUNT; k++) {
			int q = k < DG_COMP_COUNT ? DG_ABL_PHI + k : DG_ABL_TOTAL;
			fprintf(dat, " %.8g %.8g %.8g", w->est[q], w->lo[q], w->hi[q]);
		}
		fprintf(dat, "\n");
		fprintf(gp, "%s", x ? ", " : "");
		gp_density_tic(gp, r, w->density);
		fprintf(gp, " %d", x);
		x++;
	}
	dg_table_free(&t);
	fprintf(gp, ")\nset xlabel 'target density {/:Italic ρ} (computed below it)' offset 0,-0.7\nset bmargin 4.2"
		    "\nset xrange [-0.6:%g]\nset boxwidth 0.24\n"
		    "set style fill solid 0.85 noborder\nset grid noxtics\n"
		    "set xzeroaxis lt -1 lw 0.5\nset yrange [*<0:0<*]\n"
		    "set ylabel 'error reduction (rel. L_2)'\n"
		    "set key outside top center horizontal maxrows 2 Left reverse samplen 1 "
		    "font ',7'\n"
		    "f = '%s.dat'\n"
		    "titles = \"'{/:Italic φ}_G grouping' '{/:Italic φ}_S selection' '{/:Italic φ}_R residual'\"\n"
		    "src(k) = k == 0 ? ls_grouping : k == 1 ? ls_selection : ls_lost\n"
		    "plot for [k=0:2] f using ($1+(k-1)*0.26):(column(3+3*k)) with boxes ls src(k) "
		    "title word(titles, k+1)%s\n",
		x - 0.4, name,
		pl->o->boot ? ", \\\n\tfor [k=0:2] f using ($1+(k-1)*0.26):(column(4+3*k)):(0):"
			      "(column(5+3*k)-column(4+3*k)) with vectors " INTERVAL " notitle" : "");
	gp_end(gp);
	int rc = finish_pair(dat, gp, name);
	if (rc)
		return -1;
	made(pl, name);
	return 0;
}

/* refresh=anchor policies: their metadata is reused after the anchor (policy.h) */
static bool refresh_anchor(const char *spec)
{
	dg_policy p;
	return dg_preset_of_spec(spec) && dg_policy_parse(spec, &p) == 0 && !p.dense &&
	       p.refresh == DG_REFRESH_ANCHOR;
}

static int fig_error_vs_staleness(plotter *pl)
{
	const char *name = density_name(pl, "error_vs_staleness");
	const dg_results *r = pl->r;
	const int d = pl->o->density;
	member fam[2][FAMILY_MAX], m[2 * FAMILY_MAX];
	int nf[2] = { family_members(r, FAM_FACTORIAL, fam[0]), family_members(r, FAM_OTHER, fam[1]) };
	int n = 0, smax = 0;
	double ylo = INFINITY, yhi = 0;
	int *stale = dg_malloc(r->n_units * sizeof *stale);
	FILE *dat = create(pl, name, "dat");
	if (!dat) {
		free(stale);
		return -1;
	}
	char what[160];
	snprintf(what, sizeof what, "mean rel_l2 against steps since the anchor at density_target "
		 "%g, one block per refresh=anchor policy", r->density[d]);
	dat_header(dat, pl, name, what, "staleness E lo hi n_units");
	for (int k = 0; k < 2; k++) {
		for (int i = 0; i < nf[k]; i++) {
			int p = fam[k][i].policy, points = 0;
			if (!refresh_anchor(r->policy[p]))
				continue;
			size_t b = (size_t)p * r->n_densities + d, ns = 0;
			for (size_t u = r->range[b]; u < r->range[b + 1]; u++)
				if (dg_results_post_warmup(r, &r->unit[u]))
					stale[ns++] = r->unit[u].staleness;
			gsl_sort_int(stale, 1, ns);
			for (size_t j = 0; j < ns; j++) {
				double e = NAN, lo = NAN, hi = NAN;
				if (j && stale[j] == stale[j - 1])
					continue;
				double units = policy_mean(pl, p, d, stale[j], &e, &lo, &hi);
				if (!(e > 0)) /* log axis */
					continue;
				if (!points++)
					fprintf(dat, "# policy %s\n", r->policy[p]);
				fprintf(dat, "%d %.8g %.8g %.8g %.0f\n", stale[j], e, lo, hi, units);
				ylo = fmin(ylo, lo > 0 ? lo : e);
				yhi = fmax(yhi, hi > 0 ? hi : e);
				smax = stale[j] > smax ? stale[j] : smax;
			}
			if (points) {
				fprintf(dat, "\n\n");
				m[n++] = (member){ p, k ? 8 + fam[k][i].style : fam[k][i].style };
			}
		}
	}
	free(stale);
	if (finish(dat, name, "dat"))
		return -1;
	if (!n) {
		dg_warn("plot: %s skipped: no refresh=anchor policy after warm-up at "
			"density_target %g", name, r->density[d]);
		return 1;
	}
	FILE *gp = create(pl, name, "gp");
	if (!gp)
		return -1;
	const int rows = key_rows(longest_name(r, m, n), n, PANEL_W);
	const double h = PANEL_H + rows * KEY_ROW_H;
	gp_begin(gp, pl, name, "mean rel_l2 against steps since the anchor", PANEL_W, h);
	gp_panel(gp, 0, 1, PANEL_W, h, AXIS_H + rows * KEY_ROW_H + 0.05);
	gp_key_below(gp, 0, 1, PANEL_W, h, rows, rows);
	gp_log_axis(gp, 'y', ylo, yhi);
	fprintf(gp, "set logscale y\nset mytics default\n"
		    "set xtics %d\nset mxtics 1\n"
		    "set offsets graph 0.04, graph 0.04, 0, 0\n"
		    "set xlabel 'steps since the anchor' offset 0,0.3\n"
		    "set ylabel 'relative L_2 error (mean)'\n",
		smax > 10 ? (smax + 9) / 10 : 1);
	gp_density_title(gp, r, d);
	char datf[80];
	snprintf(datf, sizeof datf, "%s.dat", name);
	for (int i = 0; i < n; i++) { /* dodged 0.04 steps apart */
		char x[32];
		snprintf(x, sizeof x, "($1%+.3f)", 0.04 * (i - (n - 1) / 2.0));
		gp_series(gp, pl, datf, i, &m[i], x, i == 0);
	}
	fprintf(gp, "\n");
	return gp_done(pl, gp, name);
}

static int fig_mass_distribution(plotter *pl)
{
	const char *name = density_name(pl, "mass_distribution");
	const dg_results *r = pl->r;
	const int d = pl->o->density;
	member fam[FAM_COUNT][FAMILY_MAX];
	int nfam[FAM_COUNT], npanel = 0, index = 0, rows = 0, block[FAM_COUNT][FAMILY_MAX];
	int same[FAM_COUNT][FAMILY_MAX]; /* an earlier series with the same quantiles, or -1 */
	double *mass = dg_malloc(r->n_units * sizeof *mass), xlo[FAM_COUNT];
	double *quant = dg_malloc(FAMILY_MAX * MASS_POINTS * sizeof *quant);
	FILE *dat = create(pl, name, "dat");
	if (!dat) {
		free(mass);
		return -1;
	}
	char what[200];
	snprintf(what, sizeof what, "empirical CDF over post-warm-up units of the retained "
		 "probability mass (mass_mean) at density_target %g, one block per policy (%d "
		 "quantiles)", r->density[d], MASS_POINTS);
	dat_header(dat, pl, name, what, "mass_mean fraction_of_units");
	for (int k = 0; k < FAM_COUNT; k++) {
		member all[FAMILY_MAX];
		int nall = family_members(r, k, all);
		nfam[k] = 0;
		xlo[k] = 1;
		for (int i = 0; i < nall; i++) {
			size_t b = (size_t)all[i].policy * r->n_densities + d, n = 0;
			for (size_t u = r->range[b]; u < r->range[b + 1]; u++)
				if (dg_results_post_warmup(r, &r->unit[u]))
					mass[n++] = r->unit[u].mass_mean;
			if (!n)
				continue;
			gsl_sort(mass, 1, n);
			xlo[k] = fmin(xlo[k], mass[0]);
			fprintf(dat, "# policy %s: %zu units\n", r->policy[all[i].policy], n);
			double *q = quant + nfam[k] * MASS_POINTS;
			for (int j = 0; j < MASS_POINTS; j++) {
				double p = (double)j / (MASS_POINTS - 1);
				q[j] = gsl_stats_quantile_from_sorted_data(mass, 1, n, p);
				fprintf(dat, "%.8g %.6g\n", q[j], p);
			}
			fprintf(dat, "\n\n");
			same[k][nfam[k]] = -1;
			for (int j = nfam[k] - 1; j >= 0; j--)
				if (!memcmp(quant + j * MASS_POINTS, q, MASS_POINTS * sizeof *q))
					same[k][nfam[k]] = j;
			block[k][nfam[k]] = index++;
			fam[k][nfam[k]++] = all[i];
		}
		npanel += nfam[k] > 0;
	}
	free(quant);
	free(mass);
	if (finish(dat, name, "dat"))
		return -1;
	if (!npanel) {
		dg_warn("plot: %s skipped: no sparse policy after warm-up at density_target %g",
			name, r->density[d]);
		return 1;
	}
	FILE *gp = create(pl, name, "gp");
	if (!gp)
		return -1;
	const double pw = fmin(PANEL_W, PAGE_W / npanel), w = pw * npanel;
	size_t longest[FAM_COUNT]; /* of the key's titles: "name" or "name = earlier name" */
	for (int k = 0; k < FAM_COUNT; k++) {
		longest[k] = 0;
		for (int i = 0; i < nfam[k]; i++) {
			size_t len = strlen(r->policy[fam[k][i].policy]);
			if (same[k][i] >= 0)
				len += 3 + strlen(r->policy[fam[k][same[k][i]].policy]);
			longest[k] = len > longest[k] ? len : longest[k];
		}
		rows = fmax(rows, key_rows(longest[k], nfam[k], pw));
	}
	const double bottom = AXIS_H + rows * KEY_ROW_H + 0.05, h = PANEL_H + rows * KEY_ROW_H;
	gp_begin(gp, pl, name, "distribution over units of the retained attention mass", w, h);
	fprintf(gp, "set multiplot\nset yrange [0:1]\n"
		    "set xlabel 'retained mass (mean over queries)' offset 0,0.3\n"
		    "set ylabel 'fraction of units'\n");
	for (int k = 0, panel = 0; k < FAM_COUNT; k++) {
		if (!nfam[k])
			continue;
		const double x0 = fmin(floor(xlo[k] * 20) / 20, 0.95), span = 1 - x0;
		gp_panel(gp, panel, npanel, w, h, bottom);
		gp_key_below(gp, panel, npanel, w, h, key_rows(longest[k], nfam[k], pw), rows);
		double cd = computed_density(r, d);
		fprintf(gp, "set xrange [%g:1]\nset xtics %g\nset title '(%c) %s, {/:Italic ρ} = %g",
			x0, span > 0.5 ? 0.2 : span > 0.25 ? 0.1 : 0.05, 'a' + panel++,
			family_short[k], r->density[d]);
		if (!isnan(cd))
			fprintf(gp, " (computed %.3g)", cd);
		fprintf(gp, "'\n");
		for (int i = 0; i < nfam[k]; i++) { /* a curve equal to an earlier one is dashed */
			char title[2 * DG_POLICY_NAME_MAX + 8];
			int j = same[k][i];
			snprintf(title, sizeof title, "%s%s%s", r->policy[fam[k][i].policy],
				 j >= 0 ? " = " : "", j >= 0 ? r->policy[fam[k][j].policy] : "");
			fprintf(gp, "%s'%s.dat' index %d using 1:2 with lines ls %d%s title ",
				i ? ", \\\n\t" : "plot ", name, block[k][i], fam[k][i].style,
				j >= 0 ? " dt (4,4)" : "");
			dg_gp_string(gp, title);
			fprintf(gp, " noenhanced");
		}
		fprintf(gp, "\n");
	}
	fprintf(gp, "unset multiplot\n");
	return gp_done(pl, gp, name);
}

/* ---- rendering and installing --------------------------------------------------------------- */

bool dg_gnuplot_found(void)
{
	if (access(DG_GNUPLOT, X_OK) == 0)
		return true;
	const char *path = getenv("PATH");
	char buf[4096];
	for (const char *p = path ? path : ""; *p;) {
		size_t len = strcspn(p, ":");
		if (len && len < sizeof buf - 9) {
			snprintf(buf, sizeof buf, "%.*s/gnuplot", (int)len, p);
			if (access(buf, X_OK) == 0)
				return true;
		}
		p += len + (p[len] == ':');
	}
	return false;
}

/* Whether a figure file ends as a whole one does: a PNG with its IEND chunk, a PDF with %%EOF in
 * its last kilobyte (gnuplot exits 0 after a write failed: ENOSPC, EFBIG) */
static bool figure_complete(const char *path, bool png)
{
	static const unsigned char iend[12] = { 0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xae, 0x42, 0x60, 0x82 };
	unsigned char tail[1024];
	FILE *f = fopen(path, "rb");
	if (!f)
		return false;
	long at = 0;
	if (fseek(f, 0, SEEK_END) == 0 && (at = ftell(f)) > (long)sizeof tail)
		fseek(f, at - (long)sizeof tail, SEEK_SET);
	else
		fseek(f, 0, SEEK_SET);
	size_t n = fread(tail, 1, sizeof tail, f);
	fclose(f);
	if (png)
		return n >= sizeof iend && !memcmp(tail + n - sizeof iend, iend, sizeof iend);
	for (size_t i = 0; i + 5 <= n; i++)
		if (!memcmp(tail + i, "%%EOF", 5))
			return true;
	return false;
}

int dg_gnuplot(const char *dir, const char *name)
{
	char gp[128];
	snprintf(gp, sizeof gp, "%s.gp", name);
	int fd[2];
	if (pipe(fd))
		return dg_error("plot: cannot run gnuplot on %s: %s", gp, strerror(errno));
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0) {
		close(fd[0]);
		close(fd[1]);
		return dg_error("plot: cannot run gnuplot on %s: %s", gp, strerror(errno));
	}
	if (pid == 0) {
		signal(SIGXFSZ, SIG_DFL); /* dsgap ignores it; gnuplot then wrote a cut file and exited 0 */
		dup2(fd[1], STDOUT_FILENO);
		dup2(fd[1], STDERR_FILENO);
		close(fd[0]);
		close(fd[1]);
		const char *g = access(DG_GNUPLOT, X_OK) == 0 ? DG_GNUPLOT : "gnuplot";
		if (chdir(dir) == 0)
			execlp(g, g, gp, (char *)NULL);
		dprintf(STDERR_FILENO, "cannot run %s in %s: %s\n", g, dir, strerror(errno));
		_exit(127);
	}
	close(fd[1]);
	char out[4096];
	size_t n = 0;
	for (;;) {
		char buf[1024];
		ssize_t got = read(fd[0], buf, sizeof buf);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		for (ssize_t i = 0; i < got; i++) { /* keep the last sizeof out - 1 bytes */
			if (n == sizeof out - 1) {
				memmove(out, out + 1, n - 1);
				n--;
			}
			out[n++] = buf[i];
		}
	}
	close(fd[0]);
	out[n] = 0;
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	while (n && (out[n - 1] == '\n' || out[n - 1] == ' '))
		out[--n] = 0;
	char *last = strrchr(out, '\n');
	last = last ? last + 1 : out;
	char how[96];
	if (WIFEXITED(status))
		snprintf(how, sizeof how, "exit status %d", WEXITSTATUS(status));
	else
		dg_signal_what(WTERMSIG(status), how, sizeof how);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		return dg_error("plot: gnuplot failed on figures/%s (%s)%s%s", gp, how, *last ? ": " : "", last);
	if (*last)
		dg_warn("plot: gnuplot on figures/%s: %s", gp, last);
	for (int i = 0; i < 2; i++) {
		char file[128];
		snprintf(file, sizeof file, "%s.%s", name, i ? "png" : "pdf");
		char *path = dg_path_join(dir, file);
		struct stat st;
		int bad = stat(path, &st) || st.st_size == 0 ? 1 : !figure_complete(path, i == 1) ? 2 : 0;
		free(path);
		if (bad == 1)
			return dg_error("plot: gnuplot made no figures/%s from %s", file, gp);
		if (bad == 2)
			return dg_error("plot: gnuplot left figures/%s cut short (a full disk or a file size limit?)", file);
	}
	return 0;
}

/* Remove a directory of plain files (our own temporary or replaced figures directory). */
static int remove_dir(const char *path)
{
	DIR *dir = opendir(path);
	if (!dir)
		return -1;
	struct dirent *e;
	int rc = 0;
	while ((e = readdir(dir))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char *file = dg_path_join(path, e->d_name);
		rc |= unlink(file);
		free(file);
	}
	closedir(dir);
	return rc | rmdir(path);
}

/* Carry the other densities' figures (NAME-rhoX.*) of final that tmp does not remake into tmp:
 * plotting one density never removes another's. */
static void keep_other_densities(const char *tmp, const char *final)
{
	DIR *dir = opendir(final);
	if (!dir)
		return;
	struct dirent *e;
	while ((e = readdir(dir))) {
		if (!strstr(e->d_name, "-rho") || strstr(e->d_name, ".tmp."))
			continue;
		char *from = dg_path_join(final, e->d_name), *to = dg_path_join(tmp, e->d_name);
		struct stat st;
		if (stat(to, &st) != 0 && rename(from, to))
			dg_warn("plot: cannot keep %s: %s", from, strerror(errno));
		free(from);
		free(to);
	}
	closedir(dir);
}

/* Replace final (if any) by tmp, keeping the other densities' figures. */
static int install(const char *tmp, const char *final)
{
	struct stat st;
	char old[4096] = "";
	keep_other_densities(tmp, final);
	if (stat(final, &st) == 0) {
		/* a ".tmp.PID" name: removed by the next run into the folder if this one dies */
		snprintf(old, sizeof old, "%s.old.tmp.%ld", final, (long)getpid());
		dg_tmp_register(old);
		if (rename(final, old)) {
			int e = errno;
			dg_tmp_release(old);
			return dg_error("cannot move %s aside: %s", final, strerror(e));
		}
	}
	if (rename(tmp, final)) {
		int e = errno;
		if (*old)
			rename(old, final);
		return dg_error("cannot rename %s to %s: %s", tmp, final, strerror(e));
	}
	if (*old && remove_dir(old))
		dg_warn("plot: cannot remove the replaced figures in %s", old);
	if (*old)
		dg_tmp_release(old);
	return 0;
}

/* ---- the sample-set figure (a dsgap decompose DIR1 DIR2 ... --out folder, no run.json) ------- */

/* the quantities of the figure: panel 0 the ladder's sources, panel 1 the factorial's Shapley
 * shares, each drawn in its source's colour (style.gp's ls_SOURCE) */
static const struct {
	const char *quantity, *title, *style;
	int panel;
} sample_q[] = {
	{ "selection", "selection", "ls_selection", 0 },
	{ "grouping", "grouping", "ls_grouping", 0 },
	{ "lost", "lost contributions", "ls_lost", 0 },
	{ "shapley_G", "{/:Italic φ}_G grouping", "ls_grouping", 1 },
	{ "shapley_S", "{/:Italic φ}_S selection", "ls_selection", 1 },
	{ "shapley_R", "{/:Italic φ}_R residual", "ls_lost", 1 },
};
#define SAMPLE_Q (int)(sizeof sample_q / sizeof *sample_q)
#define SAMPLE_MAX 256
#define SAMPLE_RHO_MAX 64

typedef struct {
	double rho[SAMPLE_RHO_MAX]; /* the densities of the tables */
	int n_rho;
	double computed;                          /* E(est-block)'s computed density at the chosen one */
	double est[SAMPLE_Q], lo[SAMPLE_Q], hi[SAMPLE_Q]; /* the pooled estimates */
	char label[SAMPLE_MAX][DG_POLICY_NAME_MAX];       /* the samples in the order of their file */
	double v[SAMPLE_MAX][SAMPLE_Q];
	int n;
} sample_set;

/* One CSV line into at most max fields (RFC 4180: "a, b" and "" inside quotes); the count. The
 * fields point into line, which is changed. */
static int csv_split(char *line, char **field, int max)
{
	int n = 0;
	char *p = line;
	line[strcspn(line, "\r\n")] = 0;
	while (n < max) {
		char *out = p;
		field[n++] = p;
		if (*p == '"') {
			for (p++;; p++) {
				if (*p == '"' && p[1] == '"')
					*out++ = *p++;
				else if (*p == '"' || !*p) {
					p += *p == '"';
					break;
				} else
					*out++ = *p;
			}
			while (*p && *p != ',')
				p++;
		} else {
			while (*p && *p != ',')
				*out++ = *p++;
		}
		const bool more = *p == ',';
		*out = 0;
		if (!more)
			break;
		p++;
	}
	return n;
}

static int sample_quantity(const char *q)
{
	for (int k = 0; k < SAMPLE_Q; k++)
		if (!strcmp(sample_q[k].quantity, q))
			return k;
	return -1;
}

/*
 * Read DIR/NAME (decomposition.csv, ablation.csv: pass 0 the densities, pass 1 the pooled rows at
 * rho; or their -samples.csv: each sample's rows at rho). A missing file is no error (a set with
 * the ladder or the factorial alone); 0, or -1 after one line.
 */
static int sample_read(const char *dir, const char *name, bool per_sample, int pass, double rho,
		       sample_set *s)
{
	char *path = dg_path_join(dir, name);
	FILE *f = fopen(path, "r");
	if (!f) {
		free(path);
		return 0;
	}
	char *line = NULL, *fld[16];
	size_t cap = 0;
	int rc = 0, row = 0;
	while (getline(&line, &cap, f) > 0 && !rc) {
		if (row++ == 0)
			continue;
		int nf = csv_split(line, fld, 16);
		char *end;
		if (per_sample) { /* sample,density_target,layer,quantity,estimate */
			if (nf != 5) {
				rc = dg_error("plot: %s line %d: %d fields, not 5", path, row, nf);
				break;
			}
			int k = sample_quantity(fld[3]);
			if (k < 0 || strcmp(fld[2], "all") || fabs(strtod(fld[1], NULL) - rho) > 1e-9)
				continue;
			int i = 0;
			while (i < s->n && strcmp(s->label[i], fld[0]))
				i++;
			if (i == s->n) {
				if (s->n == SAMPLE_MAX) {
					rc = dg_error("plot: %s: more than %d samples", path, SAMPLE_MAX);
					break;
				}
				snprintf(s->label[s->n], DG_POLICY_NAME_MAX, "%s", fld[0]);
				for (int j = 0; j < SAMPLE_Q; j++)
					s->v[s->n][j] = NAN;
				s->n++;
			}
			s->v[i][k] = strtod(fld[4], &end);
			continue;
		}
		/* density_target,layer,quantity,estimate,lo,hi,n_units,n_clusters,n_samples,density,... */
		if (nf < 10) {
			rc = dg_error("plot: %s line %d: %d fields, not 11", path, row, nf);
			break;
		}
		double d = strtod(fld[0], &end);
		if (end == fld[0] || *end) {
			rc = dg_error("plot: %s line %d: density_target '%s' is not a number", path, row,
				      fld[0]);
			break;
		}
		if (strcmp(fld[1], "all"))
			continue;
		if (pass == 0) {
			int j = 0;
			while (j < s->n_rho && s->rho[j] != d)
				j++;
			if (j == s->n_rho && s->n_rho < SAMPLE_RHO_MAX)
				s->rho[s->n_rho++] = d;
			continue;
		}
		if (fabs(d - rho) > 1e-9)
			continue;
		if (!strcmp(fld[2], "E(est-block)"))
			s->computed = strtod(fld[9], NULL);
		int k = sample_quantity(fld[2]);
		if (k >= 0) {
			s->est[k] = strtod(fld[3], NULL);
			s->lo[k] = strtod(fld[4], NULL);
			s->hi[k] = strtod(fld[5], NULL);
		}
	}
	free(line);
	fclose(f);
	free(path);
	return rc;
}

/* an x tic step of about 5 tics over [lo, hi] and 0: 1, 2 or 5 times a power of 10 */
static double tic_step(double lo, double hi)
{
	lo = fmin(lo, 0);
	hi = fmax(hi, 0);
	const double r = (hi - lo) / 5;
	if (!(r > 0))
		return 1;
	const double p = pow(10, floor(log10(r))), m = r / p;
	return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

bool dg_plot_is_sample_set(const char *dir)
{
	static const char *const need[] = { "decomposition-samples.csv", "ablation-samples.csv" };
	char *run = dg_path_join(dir, "run.json");
	struct stat st;
	bool set = stat(run, &st) != 0;
	free(run);
	bool any = false;
	for (int i = 0; i < 2 && set; i++) {
		char *p = dg_path_join(dir, need[i]);
		any |= stat(p, &st) == 0;
		free(p);
	}
	return set && any;
}

/* the .dat and .gp of samples-rhoX into tmp */
static int samples_files(const char *tmp, const char *dir, const char *name, const sample_set *s,
			 double rho)
{
	char file[96];
	snprintf(file, sizeof file, "%s.dat", name);
	char *path = dg_path_join(tmp, file);
	FILE *dat = fopen(path, "w");
	free(path);
	if (!dat)
		return dg_error("cannot write %s/figures/%s: %s", dir, file, strerror(errno));
	fprintf(dat, "# %s.dat: per sample at density_target %g (row 0: all samples pooled, with the "
		     "two-level 95%% interval; for a sample lo = hi = its estimate)\n"
		     "# made by dsgap plot (dsgap %s, commit %s) from the sample set's "
		     "{decomposition,ablation}{,-samples}.csv\n# columns: row label",
		name, rho, DG_VERSION, dg_git_commit());
	for (int k = 0; k < SAMPLE_Q; k++)
		fprintf(dat, " %s", sample_q[k].quantity);
	fprintf(dat, ", then lo hi of each in that order\n0 \"all samples\"");
	double lo[2] = { 0, 0 }, hi[2] = { 0, 0 };
	for (int k = 0; k < SAMPLE_Q; k++)
		fprintf(dat, " %.10g", s->est[k]);
	for (int k = 0; k < SAMPLE_Q; k++) {
		fprintf(dat, " %.10g %.10g", s->lo[k], s->hi[k]);
		const int p = sample_q[k].panel;
		if (!isnan(s->lo[k]))
			lo[p] = fmin(lo[p], s->lo[k]), hi[p] = fmax(hi[p], s->hi[k]);
	}
	fputc('\n', dat);
	for (int i = 0; i < s->n; i++) {
		fprintf(dat, "%d \"", i + 1);
		for (const char *c = s->label[i]; *c; c++) /* a gnuplot "..." column: no quote in it */
			fputc(*c == '"' || (unsigned char)*c < 0x20 ? '?' : *c, dat);
		fputc('"', dat);
		for (int k = 0; k < SAMPLE_Q; k++)
			fprintf(dat, " %.10g", s->v[i][k]);
		for (int k = 0; k < SAMPLE_Q; k++) {
			fprintf(dat, " %.10g %.10g", s->v[i][k], s->v[i][k]);
			const int p = sample_q[k].panel;
			if (!isnan(s->v[i][k]))
				lo[p] = fmin(lo[p], s->v[i][k]), hi[p] = fmax(hi[p], s->v[i][k]);
		}
		fputc('\n', dat);
	}
	if (dg_out_close_errno(dat))
		return dg_error("cannot write %s/figures/%s", dir, file);
	snprintf(file, sizeof file, "%s.gp", name);
	path = dg_path_join(tmp, file);
	FILE *gp = fopen(path, "w");
	free(path);
	if (!gp)
		return dg_error("cannot write %s/figures/%s: %s", dir, file, strerror(errno));
	const int rows = s->n + 1;
	const double h = 1.7 + 0.17 * rows;
	fprintf(gp, "# %s.gp: per-sample sources (ladder) and Shapley shares (factorial) at "
		    "density_target %g\n# made by dsgap plot (dsgap %s, commit %s); re-render inside this "
		    "directory: gnuplot %s.gp\nload 'style.gp'\ndo for [fmt in \"pdf png\"] {\n"
		    "if (fmt eq \"pdf\") {\n\tset terminal pdfcairo size %.2fin,%.2fin font 'Liberation "
		    "Sans,8'\n} else {\n\tset terminal pngcairo size %d,%d font 'Liberation Sans,8' "
		    "fontscale %g linewidth %g\n}\nset output '%s.'.fmt\n",
		name, rho, DG_VERSION, dg_git_commit(), name, PAGE_W, h, (int)(PAGE_W * PNG_DPI),
		(int)(h * PNG_DPI), PNG_DPI / 100.0, PNG_DPI / 150.0, name);
	fprintf(gp, "set multiplot title 'per sample at target density {/:Italic ρ} = %g", rho);
	if (!isnan(s->computed))
		fprintf(gp, " (computed %.3g)", s->computed);
	fprintf(gp, ": each sample alone; top row: all samples pooled with the two-level 95%% "
		    "interval'\nset tmargin at screen %.3f; set bmargin at screen %.3f\n"
		    "set yrange [%d - 0.5:-0.5]\nset grid xtics noytics\n"
		    "set arrow from 0, graph 0 to 0, graph 1 nohead lc rgb '#000000' lw 1\n"
		    "f = '%s.dat'\n", 1 - 0.55 / h, 0.75 / h, rows, name);
	static const char *const title[2] = { "(a) sources of the gap (oracle ladder)",
					      "(b) Shapley shares (factorial; positive = error reduced)" };
	static const char *const xlabel[2] = { "relative L_2 error", "error reduction" };
	static const double left[2] = { 0.16, 0.60 }, right[2] = { 0.55, 0.98 };
	static const int pt[3] = { 7, 5, 9 };
	for (int p = 0; p < 2; p++) {
		fprintf(gp, "%s\nset xtics nomirror %g\nset lmargin at screen %.2f; set rmargin at screen "
			    "%.2f\nset title '%s'\nset key at screen %.3f, screen 0.01 center bottom "
			    "horizontal maxcols 3 Left reverse width -1 font ',7' samplen 1\nset xlabel '%s'\n",
			p ? "unset ytics" : "set ytics nomirror font ',7' noenhanced ()",
			tic_step(lo[p], hi[p]), left[p], right[p], title[p],
			(left[p] + right[p]) / 2, xlabel[p]);
		for (int k = 0, j = 0; k < SAMPLE_Q; k++) {
			if (sample_q[k].panel != p)
				continue;
			fprintf(gp, "%s f using %d:($1%+.1f):%d:%d%s with xerrorbars ls %s pt %d ps 0.7 "
				    "title '%s'", j ? ", \\\n\t" : "plot", 3 + k, 0.2 * (j - 1),
				3 + SAMPLE_Q + 2 * k, 4 + SAMPLE_Q + 2 * k,
				p == 0 && j == 0 ? ":ytic(stringcolumn(2))" : "", sample_q[k].style,
				pt[j % 3], sample_q[k].title);
			j++;
		}
		fputc('\n', gp);
	}
	fprintf(gp, "unset multiplot\n");
	gp_end(gp);
	if (dg_out_close_errno(gp))
		return dg_error("cannot write %s/figures/%s", dir, file);
	return 0;
}

int dg_plot_samples(const char *dir, double density)
{
	sample_set *s = dg_calloc(1, sizeof *s);
	s->computed = NAN;
	for (int k = 0; k < SAMPLE_Q; k++)
		s->est[k] = s->lo[k] = s->hi[k] = NAN;
	int rc = sample_read(dir, "decomposition.csv", false, 0, 0, s) ||
		 sample_read(dir, "ablation.csv", false, 0, 0, s) ? -1 : 0;
	if (!rc && !s->n_rho)
		rc = dg_error("plot: %s: no table (decomposition.csv or ablation.csv of dsgap decompose "
			      "--samples)", dir);
	double rho = NAN;
	const double want = isnan(density) ? DG_PLOT_DENSITY : density;
	for (int j = 0; j < s->n_rho && !rc; j++)
		if (isnan(rho) || fabs(s->rho[j] - want) < fabs(rho - want))
			rho = s->rho[j];
	if (!rc && !isnan(density) && fabs(rho - density) > 1e-9) {
		char have[512] = "";
		for (int i = 0; i < s->n_rho && strlen(have) + 24 < sizeof have; i++)
			snprintf(have + strlen(have), sizeof have - strlen(have), "%s%g", i ? ", " : "",
				 s->rho[i]);
		rc = dg_error("plot: no density_target %g in %s's tables (there: %s)", density, dir, have);
	}
	if (!rc)
		rc = sample_read(dir, "decomposition.csv", false, 1, rho, s) ||
		     sample_read(dir, "ablation.csv", false, 1, rho, s) ||
		     sample_read(dir, "decomposition-samples.csv", true, 0, rho, s) ||
		     sample_read(dir, "ablation-samples.csv", true, 0, rho, s) ? -1 : 0;
	if (!rc && !s->n)
		rc = dg_error("plot: %s: no sample's estimate at density_target %g in "
			      "{decomposition,ablation}-samples.csv", dir, rho);
	char name[64];
	snprintf(name, sizeof name, "samples-rho%g", rho);
	char *final = dg_path_join(dir, "figures"), *tmp = dg_tmp_name(final);
	bool made_tmp = false;
	if (!rc) {
		made_tmp = mkdir(tmp, 0777) == 0;
		if (!made_tmp)
			rc = dg_error("cannot create directory %s: %s", tmp, strerror(errno));
	}
	if (!rc) {
		char *style = dg_path_join(tmp, "style.gp");
		FILE *f = fopen(style, "w");
		free(style);
		rc = !f || fputs(DG_STYLE_GP, f) < 0 ? -1 : 0;
		if (f && dg_out_close_errno(f))
			rc = -1;
		if (rc)
			dg_error("cannot write %s/figures/style.gp", dir);
	}
	if (!rc)
		rc = samples_files(tmp, dir, name, s, rho);
	if (!rc)
		rc = dg_gnuplot(tmp, name);
	if (!rc)
		rc = install(tmp, final);
	if (rc && made_tmp)
		remove_dir(tmp);
	dg_tmp_release(tmp);
	if (!rc)
		printf("plot: %s/%s.{dat,gp,pdf,png}: %d samples and the pooled estimate at density_target "
		       "%g\n", final, name, s->n, rho);
	free(tmp);
	free(final);
	free(s);
	return rc ? -1 : 1;
}

int dg_plot(const dg_results *r, const dg_plot_opts *o)
{
	static int (*const figure[])(plotter *) = {
		fig_error_vs_density, fig_sources_per_layer, fig_ablation, fig_shapley,
		fig_error_vs_staleness, fig_mass_distribution,
	};
	char *final = dg_path_join(r->dir, "figures"), *tmp = dg_tmp_name(final);
	plotter pl = { .r = r, .o = o, .dir = tmp };
	int rc = 0;
	figures_dir = final;
	if (mkdir(tmp, 0777))
		rc = dg_error("cannot create directory %s: %s", tmp, strerror(errno));
	if (!rc) {
		FILE *f = create(&pl, "style", "gp");
		rc = f ? (fputs(DG_STYLE_GP, f), finish(f, "style", "gp")) : -1;
	}
	for (size_t i = 0; i < sizeof figure / sizeof *figure && !rc; i++)
		rc = figure[i](&pl) < 0 ? -1 : 0;
	for (int i = 0; i < pl.n_made && !rc; i++)
		rc = dg_gnuplot(tmp, pl.made[i]);
	if (!rc && pl.n_made)
		rc = install(tmp, final);
	if (rc || !pl.n_made)
		remove_dir(tmp);
	dg_tmp_release(tmp);
	if (!rc && pl.n_made) {
		printf("plot: %d figures in %s/ (.dat .gp .pdf .png):", pl.n_made, final);
		for (int i = 0; i < pl.n_made; i++)
			printf(" %s", pl.made[i]);
		printf("\n");
	}
	figures_dir = "figures";
	free(tmp);
	free(final);
	return rc ? -1 : pl.n_made;
}
