/*
 * results.h: a results directory in memory (docs/spec.md §6): DIR/metrics.csv, one row per unit
 * (policy x density_target x step x layer x head), and the parts of DIR/run.json that the
 * analysis needs (schedule, provenance). Used by decompose and plot.
 *
 *   metrics.csv  policy,density_target,density,step,layer,head,rel_l1,rel_l2,cosine,psnr,
 *                mass_mean,mass_p5,staleness,time_ms         (psnr may be inf)
 *   run.json     {"schedule": {"warmup": W, "dense_layers": [..]}, "trace": {"path", "model",
 *                "source"}, "git_commit", "device", "date", ...}
 *
 * A unit is post-warm-up when step >= W and its layer is not a dense layer: warm-up and
 * dense-layer units give the dense output by construction and are left out of every mean.
 * A cluster is one (layer, head) pair: the unit the bootstrap resamples (all its units move
 * together). Invariants after dg_results_load or dg_results_index: units are sorted by
 * (policy, density, cluster, step), policies keep their order of first appearance, densities
 * are the distinct density_target values ascending, clusters are sorted by (layer, head).
 */
#ifndef DG_RESULTS_H
#define DG_RESULTS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define DG_ANY INT_MIN /* a filter field that does not restrict */

typedef struct {
	int policy;            /* index into dg_results.policy */
	int density;           /* index into dg_results.density (set by dg_results_index) */
	int cluster;           /* index into dg_results.cluster (set by dg_results_index) */
	int step, layer, head; /* the trace's own indices */
	int staleness;         /* steps since the policy's metadata was made */
	int line;              /* line of metrics.csv (0 for units built in memory) */
	double density_target, density_eff;
	double rel_l1, rel_l2, cosine, psnr, mass_mean, mass_p5, time_ms;
} dg_unit;

/* One metrics.csv data row, split into its 14 fields f (the header's order), into u (not its
 * indices): the bad field's name into *bad (NULL when the row is good) and -1, else 0. A value
 * that does not parse or lies outside its metric's range is bad (density_target in (0, 1],
 * density and the masses in [0, 1], errors and times >= 0, |cosine| <= 1, PSNR finite or +inf,
 * indices >= 0), and so is a policy name that is empty or holds a control character. The one
 * reader of rows: dg_results_load and merge. */
int dg_metrics_row_parse(char **f, dg_unit *u, const char **bad);

typedef struct {
	int layer, head;
} dg_cluster;

typedef struct {
	dg_unit *unit;
	size_t n_units, cap_units;
	char **policy;
	int n_policies;
	double *density; /* (n_densities) distinct density_target, ascending */
	int n_densities;
	dg_cluster *cluster; /* (n_clusters) distinct (layer, head), sorted */
	int n_clusters;
	size_t *range; /* (n_policies * n_densities + 1): units of (p, d) are [range[p*D+d], next) */
	/* from run.json */
	int warmup;
	int *dense_layer;
	int n_dense_layers;
	char *trace_path, *model, *source, *git_commit, *device, *date;
	char *dir; /* the results directory (for messages) */
} dg_results;

/* Which units a mean covers, beyond "post-warm-up, this policy, this density". */
typedef struct {
	int layer;            /* trace layer index, or DG_ANY */
	int staleness;        /* or DG_ANY */
	const double *weight; /* (n_clusters) bootstrap multiplicities, or NULL: each cluster once */
} dg_filter;
#define DG_FILTER_ALL ((dg_filter){ .layer = DG_ANY, .staleness = DG_ANY, .weight = NULL })

/*
 * Read DIR/metrics.csv and DIR/run.json into r (zeroed by the call) and index them. Any problem
 * (missing file, wrong header, wrong field count, bad number, duplicate unit, invalid JSON,
 * missing schedule) is reported once as "FILE:LINE: problem" and returns -1 with r freed.
 */
int dg_results_load(dg_results *r, const char *dir);
void dg_results_free(dg_results *r);

/*
 * The command line of the commands that read a results directory (decompose, plot):
 * CMD DIR [--density X] [--boot N] [--seed X], --density only where with_density. Defaults:
 * density NaN (not given), boot 1000, seed 1. Prints usage(stdout) on --help and one line on a
 * bad command line (dg_opt_bad, a bad value, no DIR or several). Returns 0 (go on), 1 (--help:
 * exit 0) or -1 (bad: exit 2).
 */
typedef struct {
	const char *dir;
	double density;
	long boot;
	unsigned long seed;
} dg_results_args;
int dg_results_args_parse(dg_results_args *a, const char *cmd, bool with_density, int argc,
			  char **argv, void (*usage)(FILE *f));

/* Building in memory (tests): add units (policy by name; u->policy is ignored), then index. */
void dg_results_add(dg_results *r, const char *policy, const dg_unit *u);
/* Sort and index the units; reports a duplicate unit and returns -1. */
int dg_results_index(dg_results *r);

/* Index of a policy or of a density_target (exact value), or -1. */
int dg_results_policy(const dg_results *r, const char *name);
int dg_results_density(const dg_results *r, double density_target);
/* Index of the density_target closest to x (ties: the lower). n_densities must be > 0. */
int dg_results_density_near(const dg_results *r, double x);

bool dg_results_dense_layer(const dg_results *r, int layer);
bool dg_results_post_warmup(const dg_results *r, const dg_unit *u);

/*
 * Per-cluster sums of rel_l2 and unit counts over the post-warm-up units of policy p at density
 * d that pass the staleness filter (DG_ANY: all): sum and count are (n_clusters), overwritten.
 */
void dg_results_cluster_sums(const dg_results *r, int p, int d, int staleness, double *sum,
			     double *count);
/* sum_c w_c sum_c / sum_c w_c count_c over n clusters (w NULL: 1 each); NaN when no unit. */
double dg_weighted_mean(const double *sum, const double *count, const double *w, int n);

/*
 * Mean rel_l2 over the post-warm-up units of policy p at density d that pass f, each cluster
 * counted weight[c] times. NaN when no unit passes. n_units (may be NULL) gets the weighted count.
 */
double dg_results_mean(const dg_results *r, int p, int d, const dg_filter *f, double *n_units);

/* Sorted distinct layers of the clusters that have post-warm-up units; returns the count. */
int dg_results_layers(const dg_results *r, int *layers);

#endif
