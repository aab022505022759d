/*
 * plot.h: the figures of a results directory, written as gnuplot inputs and rendered by gnuplot
 * (run as a child process, its exit status checked). For each figure NAME, DIR/figures/ holds
 *   NAME.dat  whitespace columns, '#' header with provenance (trace, commits, date, bootstrap)
 *   NAME.gp   loads style.gp, renders NAME.pdf (pdfcairo, paper size) and NAME.png (pngcairo,
 *             300 dpi); re-renders standalone: cd DIR/figures && gnuplot NAME.gp
 *   NAME.pdf, NAME.png
 * and style.gp (analysis/style.gp, compiled in). Figures (E = mean rel_l2, post-warm-up units):
 *   error_vs_density    E against density_target per policy, log y, 95% bootstrap error bars;
 *                       one panel per family (oracle ladder, factorial, others); dense left out
 *   sources_per_layer   selection, grouping, lost contributions per layer (and all layers) at the
 *                       chosen density, diverging stacks (positive terms up from 0, a negative
 *                       term below 0), their sum E(est-block) a point with its interval
 *   ablation            E of the 8 factorial cells at the chosen density, with intervals
 *   shapley             Shapley shares of G, S, R per density, with intervals
 *   error_vs_staleness  E against steps since the anchor for the refresh=anchor policies
 *   mass_distribution   empirical CDF over units of the retained probability mass (mass_mean),
 *                       per policy at the chosen density; dense left out
 * The per-density figures (sources_per_layer, ablation, error_vs_staleness, mass_distribution) are
 * named NAME-rhoX (X the density_target) and their titles give the computed density beside the
 * target; plotting another density keeps them (issue 19).
 * A sample set (the folder of `dsgap decompose DIR1 DIR2 ... --out DIR`: the tables and their
 * -samples.csv, no run.json) has one figure, dg_plot_samples':
 *   samples-rhoX        at one density, one row per sample and a first row "all samples" (the pooled
 *                       estimate with its two-level 95% interval): (a) the ladder's sources
 *                       selection, grouping, lost contributions; (b) the factorial's Shapley shares
 *                       phi_G, phi_S, phi_R; a zero line shows which samples flip sign
 * Every source has one colour in every figure (style.gp's ls_selection, ls_grouping, ls_lost, ...;
 * a factorial component takes the colour of the source it repairs: G grouping, S selection,
 * R lost contributions).
 * A figure whose policies are absent is skipped with a warning. The whole directory is built as
 * DIR/figures.tmp.PID and renamed into place at the end: an older figures/ is replaced only on
 * success, and a failure leaves nothing behind.
 */
#ifndef DG_PLOT_H
#define DG_PLOT_H

#include "analysis/results.h"

typedef struct {
	int density; /* index into dg_results.density: the density of the per-density figures */
	int boot;    /* bootstrap replicates for the error bars (0: none) */
	unsigned long seed;
} dg_plot_opts;

#define DG_PLOT_DENSITY 0.15 /* the density of the per-density figures unless one is asked for */

/* Make DIR/figures (r->dir). Returns the number of figures made (0: all skipped) or -1. */
int dg_plot(const dg_results *r, const dg_plot_opts *o);

/* Whether dir is a sample set: no run.json, a {decomposition,ablation}-samples.csv. */
bool dg_plot_is_sample_set(const char *dir);
/* Make dir/figures/samples-rhoX at the tables' density closest to `density` (NaN:
 * DG_PLOT_DENSITY; not NaN: that density or an error), from dir/{decomposition,ablation}{,-samples}.csv
 * (either pair may be absent); the other densities' figures are kept. 1 (made) or -1. */
int dg_plot_samples(const char *dir, double density);

/* Run gnuplot NAME.gp inside dir (the gnuplot found at configure time, else the one on PATH); its
 * output is kept and its last line reported on failure. 0 or -1. */
int dg_gnuplot(const char *dir, const char *name);
/* s into a gnuplot script as a single-quoted string: a quote doubled, a control character (a line
 * break would end the command) as '?'; nothing in it is expanded (a double-quoted string would run
 * `backquoted` commands) */
void dg_gp_string(FILE *f, const char *s);
/* Whether dg_gnuplot has a gnuplot to run (the configure-time one, else one on PATH). */
bool dg_gnuplot_found(void);

#endif
