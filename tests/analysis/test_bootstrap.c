/*
 * test_bootstrap.c: the two-level bootstrap of src/analysis/bootstrap.c (issue 19) on simulated
 * data with a known truth. Each simulation draws 24 samples x 6 (layer, head) clusters x 10 units
 * of two policies:
 *   E0(s, c) = mu0 + a_s + b_sc            (a: between samples, b: between clusters of a sample)
 *   E1(s, c) = E0(s, c) + delta + c_s + d_sc
 * and the two-level bootstrap (999 replicates) gives 95% percentile intervals for E0 and for the
 * paired difference E1 - E0. Over 2000 simulations each interval must cover its truth (mu0,
 * delta) in 93-97% of them (Monte Carlo standard error about 0.5%). Also: per-sample estimates
 * equal the direct means; one group reproduces the one-level bootstrap; a one-level bootstrap
 * that ignores the samples undercovers (the reason for the second level).
 * Also: dg_sig3, the tables' number format (3 significant figures, never e-notation).
 *   ctest -R test_bootstrap      or      ./test_bootstrap [simulations]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "analysis/bootstrap.h"
#include "analysis/decompose.h"
#include "testhelp.h"
#include "util/util.h"

#define S 24
#define C 6
#define UNITS 10
#define BOOT 999

static const double mu0 = 0.30, delta = -0.05;
static const double sd_a = 0.04, sd_b = 0.06, sd_c = 0.02, sd_d = 0.02;

static void stat(const double *E, double *q)
{
	q[0] = E[0];
	q[1] = E[1] - E[0];
}

/* one simulated data set: sum (2, S*C), count (2, S*C) */
static void simulate(gsl_rng *rng, double *sum, double *count)
{
	for (int s = 0; s < S; s++) {
		double a = gsl_ran_gaussian(rng, sd_a), c = gsl_ran_gaussian(rng, sd_c);
		for (int k = 0; k < C; k++) {
			int i = s * C + k;
			double e0 = mu0 + a + gsl_ran_gaussian(rng, sd_b);
			double e1 = e0 + delta + c + gsl_ran_gaussian(rng, sd_d);
			sum[i] = UNITS * e0;
			sum[S * C + i] = UNITS * e1;
			count[i] = count[S * C + i] = UNITS;
		}
	}
}

/* dg_median (util.h, the timings' one median) against GSL's on random arrays, odd and even n */
static void median_check(void)
{
	gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
	gsl_rng_set(rng, 7);
	for (int n = 1; n <= 9; n++) {
		double x[9], y[9];
		for (int i = 0; i < n; i++)
			x[i] = y[i] = gsl_ran_gaussian(rng, 3) + 0.5;
		gsl_sort(y, 1, n);
		double want = gsl_stats_median_from_sorted_data(y, 1, n), got = dg_median(x, n);
		CHECKF(got == want, "dg_median of %d random values %.17g = GSL's %.17g", n, got, want);
	}
	gsl_rng_free(rng);
}

int main(int argc, char **argv)
{
	int nsim = argc > 1 ? atoi(argv[1]) : 2000;
	double sum[2 * S * C], count[2 * S * C];
	int member[S * C], group[S + 1];
	for (int i = 0; i < S * C; i++)
		member[i] = i;
	for (int s = 0; s <= S; s++)
		group[s] = s * C;
	dg_boot_data two = { .n_pol = 2, .n_clusters = S * C, .sum = sum, .count = count,
			     .member = member, .n_member = S * C, .group = group, .n_groups = S };
	dg_boot_data one = two;
	one.group = NULL;
	one.n_groups = 0;
	static const struct { double x; const char *s; } fmt[] = {
		{ 0.0000985312, "0.0000985" }, { 0.12549, "0.125" }, { 12.34, "12.3" },
		{ 0.09996, "0.100" }, { -0.0034567, "-0.00346" }, { 1234.6, "1235" }, { 0, "0" },
		{ 1, "1.00" }, { 0.5, "0.500" }, { 29892.4, "29892" }, { NAN, "nan" }, { INFINITY, "inf" },
		{ -INFINITY, "-inf" },
	};
	for (size_t i = 0; i < sizeof fmt / sizeof *fmt; i++) {
		char b[32];
		dg_sig3(b, fmt[i].x);
		CHECKF(!strcmp(b, fmt[i].s), "dg_sig3(%g) = %s (want %s)", fmt[i].x, b, fmt[i].s);
	}
	gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
	gsl_rng_set(rng, 19);
	median_check();

	/* per-sample estimates are the direct means; one group = the one-level bootstrap */
	simulate(rng, sum, count);
	double g[S * 2];
	dg_boot_groups(&two, stat, 2, g);
	double worst = 0;
	for (int s = 0; s < S; s++) {
		double m0 = 0, m1 = 0;
		for (int k = 0; k < C; k++) {
			m0 += sum[s * C + k] / (UNITS * C);
			m1 += sum[S * C + s * C + k] / (UNITS * C);
		}
		worst = fmax(worst, fabs(g[2 * s] - m0) + fabs(g[2 * s + 1] - (m1 - m0)));
	}
	CHECKF(worst < 1e-12, "per-sample estimates equal the direct means (off by %.2g)", worst);
	{
		double e1[2], l1[2], h1[2], e2[2], l2[2], h2[2];
		int g1[2] = { 0, S * C };
		dg_boot_data single = two;
		single.group = g1;
		single.n_groups = 1;
		dg_boot_stat(&one, stat, 2, 200, 5, e1, l1, h1);
		dg_boot_stat(&single, stat, 2, 200, 5, e2, l2, h2);
		CHECK("one group is the one-level bootstrap, draw for draw",
		      e1[0] == e2[0] && l1[0] == l2[0] && h1[1] == h2[1]);
	}

	int cover2[2] = { 0, 0 }, cover1[2] = { 0, 0 };
	double width2 = 0, width1 = 0;
	for (int i = 0; i < nsim; i++) {
		simulate(rng, sum, count);
		double est[2], lo[2], hi[2];
		dg_boot_stat(&two, stat, 2, BOOT, (unsigned long)i + 1, est, lo, hi);
		cover2[0] += lo[0] <= mu0 && mu0 <= hi[0];
		cover2[1] += lo[1] <= delta && delta <= hi[1];
		width2 += hi[0] - lo[0];
		if (i < nsim / 4) { /* the one-level bootstrap, on fewer simulations */
			dg_boot_stat(&one, stat, 2, BOOT, (unsigned long)i + 1, est, lo, hi);
			cover1[0] += lo[0] <= mu0 && mu0 <= hi[0];
			cover1[1] += lo[1] <= delta && delta <= hi[1];
			width1 += hi[0] - lo[0];
		}
	}
	double c0 = 100.0 * cover2[0] / nsim, c1 = 100.0 * cover2[1] / nsim;
	printf("two-level: coverage of mu0 %.1f%%, of delta %.1f%% over %d simulations (mean width "
	       "%.4f)\n", c0, c1, nsim, width2 / nsim);
	printf("one-level (samples ignored): coverage of mu0 %.1f%%, of delta %.1f%% over %d "
	       "simulations (mean width %.4f)\n", 100.0 * cover1[0] / (nsim / 4),
	       100.0 * cover1[1] / (nsim / 4), nsim / 4, width1 / (nsim / 4));
	CHECKF(c0 >= 93 && c0 <= 97, "two-level 95%% interval covers the mean in 93-97%% (%.1f%%)", c0);
	CHECKF(c1 >= 93 && c1 <= 97, "two-level 95%% interval covers the paired difference in 93-97%% "
	       "(%.1f%%)", c1);
	CHECKF(100.0 * cover1[0] / (nsim / 4) < 90, "the one-level bootstrap undercovers when samples "
	       "vary (%.1f%%)", 100.0 * cover1[0] / (nsim / 4));
	gsl_rng_free(rng);
	return test_report();
}
