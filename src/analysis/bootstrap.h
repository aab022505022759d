/*
 * bootstrap.h: 95% percentile bootstrap intervals that resample (layer, head) clusters with
 * replacement (docs/spec.md §5), with GSL's mt19937 (gsl_rng) and quantiles (gsl_sort, gsl_stats).
 *
 * The statistic is any function of per-policy means E_p = sum_c w_c S_pc / sum_c w_c N_pc,
 * where S_pc and N_pc are the sum of rel_l2 and the unit count of policy p in cluster c and
 * w_c is the cluster's multiplicity in the replicate: all units of a cluster move together, and
 * every policy sees the same resample (paired), so differences between policies are resampled
 * as differences. Each call seeds a fresh generator with the given seed: an interval does not
 * depend on which other intervals were computed before it.
 *
 * Two levels (issue 19): when the members are split into n_groups >= 2 groups (samples: a class or
 * prompt with a seed, each its own results directory), a replicate first draws n_groups samples
 * with replacement, then within each drawn sample as many of its clusters as it has, with
 * replacement; the means pool every drawn cluster's units. The intervals then include the variation
 * between samples. With one group (or none given) the replicate is the one-level cluster bootstrap,
 * draw for draw as before.
 */
#ifndef DG_BOOTSTRAP_H
#define DG_BOOTSTRAP_H

/* E[n_pol] (NaN where a policy has no unit in the replicate) -> q[n_q] */
typedef void (*dg_boot_stat_fn)(const double *E, double *q);

typedef struct {
	int n_pol, n_clusters;
	const double *sum;   /* (n_pol, n_clusters) sum of rel_l2 per cluster */
	const double *count; /* (n_pol, n_clusters) units per cluster */
	const int *member;   /* (n_member) the clusters resampled (indices into the above) */
	int n_member;
	/* (n_groups + 1) or NULL: member[group[g] .. group[g + 1]) are the clusters of sample g
	 * (each group non-empty); n_groups <= 1: one level */
	const int *group;
	int n_groups;
} dg_boot_data;

/*
 * est: the statistic with each member once; lo, hi: the 2.5% and 97.5% quantiles of its finite
 * values over boot replicates (NaN when none is finite, or when boot == 0). All (n_q).
 */
void dg_boot_stat(const dg_boot_data *data, dg_boot_stat_fn fn, int n_q, int boot,
		  unsigned long seed, double *est, double *lo, double *hi);

/* The statistic of each group alone (its members once): est[g * n_q + j], g < n_groups (one
 * group, all members, when group is NULL). */
void dg_boot_groups(const dg_boot_data *data, dg_boot_stat_fn fn, int n_q, double *est);

/*
 * The two-level members of pooled clusters: sample s owns clusters off[s] .. off[s + 1] (off: n + 1);
 * the clusters with keep[c] become members (member: off[n]), grouped by sample, a sample without
 * any left out; group (n + 1) as in dg_boot_data, gsample (n) the sample of each group. Returns the
 * number of groups; *n_member the members.
 */
int dg_boot_members(const int *off, int n, const unsigned char *keep, int *member, int *n_member,
		    int *group, int *gsample);

/* Each group's own statistic (dg_boot_groups) into est[gsample[g] * stride + j] (other rows are
 * left as they are), and per quantity j how many groups have it finite (n_fin) and > 0 (n_pos). */
void dg_boot_signs(const dg_boot_data *data, dg_boot_stat_fn fn, int n_q, const int *gsample,
		   int stride, double *est, int *n_pos, int *n_fin);

/* Percentile interval of the finite values of rep (n): sorts rep in place. */
void dg_boot_percentile(double *rep, int n, double level, double *lo, double *hi);

#endif
