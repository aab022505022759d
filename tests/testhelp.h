/*
 * testhelp.h: the whole test framework (after redis's testhelp.h). One line per check,
 * then "N passed, N failed"; the test binary exits 1 if any check failed, 77 if skipped.
 */
#ifndef DG_TESTHELP_H
#define DG_TESTHELP_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int dg_tests_passed, dg_tests_failed;

#define CHECK(descr, cond) do { \
	if (cond) { dg_tests_passed++; printf("ok   %s\n", descr); } \
	else { dg_tests_failed++; printf("FAIL %s  (%s:%d: %s)\n", descr, __FILE__, __LINE__, #cond); } \
} while (0)

#define CHECKF(cond, ...) do { \
	char dg_descr_[256]; snprintf(dg_descr_, sizeof dg_descr_, __VA_ARGS__); CHECK(dg_descr_, cond); \
} while (0)

static inline int test_report(void)
{
	printf("%d passed, %d failed\n", dg_tests_passed, dg_tests_failed);
	return dg_tests_failed ? 1 : 0;
}

/* max_i |a_i - b_i| / max(max_i |b_i|, tiny) */
static inline double max_rel_diff(const float *a, const double *b, size_t n)
{
	double m = 0, s = 1e-30;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - b[i]);
		if (!(d <= m)) m = d; /* NaN propagates */
		if (fabs(b[i]) > s) s = fabs(b[i]);
	}
	return m / s;
}

#endif
