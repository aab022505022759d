/*
 * bootstrap.c: cluster bootstrap with percentile intervals. See bootstrap.h.
 */
#include "analysis/bootstrap.h"

#include <math.h>
#include <stdlib.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "util/util.h"

#define DG_BOOT_LEVEL 0.95

void dg_boot_percentile(double *rep, int n, double level, double *lo, double *hi)
{
	int m = 0;
	for (int i = 0; i < n; i++)
		if (isfinite(rep[i]))
			rep[m++] = rep[i];
	if (!m) {
		*lo = *hi = NAN;
		return;
	}
	gsl_sort(rep, 1, m);
	*lo = gsl_stats_quantile_from_sorted_data(rep, 1, m, (1 - level) / 2);
	*hi = gsl_stats_quantile_from_sorted_data(rep, 1, m, (1 + level) / 2);
}

/* E_p over the clusters idx[0..n) (repeats count again) */
static void means(const dg_boot_data *d, const int *idx, int n, double *E)
{
	for (int p = 0; p < d->n_pol; p++) {
		const double *S = d->sum + (size_t)p * d->n_clusters;
		const double *N = d->count + (size_t)p * d->n_clusters;
		double s = 0, c = 0;
		for (int k = 0; k < n; k++) {
			s += S[idx[k]];
			c += N[idx[k]];
		}
		E[p] = c > 0 ? s / c : NAN;
	}
}

/* one replicate's clusters into idx; returns their number */
static int draw(const dg_boot_data *d, gsl_rng *rng, int *idx)
{
	if (d->n_groups <= 1 || !d->group) {
		gsl_ran_sample(rng, idx, d->n_member, (void *)d->member, d->n_member, sizeof *idx);
		return d->n_member;
	}
	int m = 0;
	for (int k = 0; k < d->n_groups; k++) {
		int g = (int)gsl_rng_uniform_int(rng, (unsigned long)d->n_groups);
		int first = d->group[g], size = d->group[g + 1] - first;
		for (int j = 0; j < size; j++)
			idx[m++] = d->member[first + (int)gsl_rng_uniform_int(rng, (unsigned long)size)];
	}
	return m;
}

/* the most clusters one replicate can draw */
static int max_draw(const dg_boot_data *d)
{
	if (d->n_groups <= 1 || !d->group)
		return d->n_member;
	int big = 0;
	for (int g = 0; g < d->n_groups; g++)
		if (d->group[g + 1] - d->group[g] > big)
			big = d->group[g + 1] - d->group[g];
	return big * d->n_groups;
}

void dg_boot_groups(const dg_boot_data *data, dg_boot_stat_fn fn, int n_q, double *est)
{
	double *E = dg_malloc(data->n_pol * sizeof *E);
	for (int g = 0; g < (data->group ? data->n_groups : 1); g++) {
		int first = data->group ? data->group[g] : 0;
		int n = data->group ? data->group[g + 1] - first : data->n_member;
		means(data, data->member + first, n, E);
		fn(E, est + (size_t)g * n_q);
	}
	free(E);
}

int dg_boot_members(const int *off, int n, const unsigned char *keep, int *member, int *n_member,
		    int *group, int *gsample)
{
	int ng = 0, nm = 0;
	for (int s = 0; s < n; s++) {
		int start = nm;
		for (int c = off[s]; c < off[s + 1]; c++)
			if (keep[c])
				member[nm++] = c;
		if (nm > start) {
			gsample[ng] = s;
			group[ng++] = start;
		}
	}
	group[ng] = nm;
	*n_member = nm;
	return ng;
}

void dg_boot_signs(const dg_boot_data *data, dg_boot_stat_fn fn, int n_q, const int *gsample,
		   int stride, double *est, int *n_pos, int *n_fin)
{
	for (int j = 0; j < n_q; j++)
		n_pos[j] = n_fin[j] = 0;
	if (!data->n_groups || !data->group)
		return;
	double *g = dg_malloc((size_t)data->n_groups * n_q * sizeof *g);
	dg_boot_groups(data, fn, n_q, g);
	for (int k = 0; k < data->n_groups; k++)
		for (int j = 0; j < n_q; j++) {
			double x = g[(size_t)k * n_q + j];
			est[(size_t)gsample[k] * stride + j] = x;
			n_fin[j] += isfinite(x);
			n_pos[j] += isfinite(x) && x > 0;
		}
	free(g);
}

void dg_boot_stat(const dg_boot_data *data, dg_boot_stat_fn fn, int n_q, int boot,
		  unsigned long seed, double *est, double *lo, double *hi)
{
	double *E = dg_malloc(data->n_pol * sizeof *E), *q = dg_malloc(n_q * sizeof *q);
	means(data, data->member, data->n_member, E);
	fn(E, est);
	for (int j = 0; j < n_q; j++)
		lo[j] = hi[j] = NAN;
	if (boot > 0 && data->n_member > 0) {
		double *rep = dg_malloc((size_t)n_q * boot * sizeof *rep);
		int *idx = dg_malloc(max_draw(data) * sizeof *idx);
		gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
		if (!rng)
			dg_die("out of memory (gsl_rng_alloc)");
		gsl_rng_set(rng, seed);
		for (int b = 0; b < boot; b++) {
			means(data, idx, draw(data, rng, idx), E);
			fn(E, q);
			for (int j = 0; j < n_q; j++)
				rep[(size_t)j * boot + b] = q[j];
		}
		for (int j = 0; j < n_q; j++)
			dg_boot_percentile(rep + (size_t)j * boot, boot, DG_BOOT_LEVEL, &lo[j], &hi[j]);
		gsl_rng_free(rng);
		free(idx);
		free(rep);
	}
	free(q);
	free(E);
}
