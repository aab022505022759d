/*
 * metrics.c: output fidelity and retained mass, in double. See metrics.h.
 */
#include "policy/metrics.h"

#include <math.h>
#include <string.h>
#include <stdlib.h>

#include <gsl/gsl_sort_float.h>
#include <gsl/gsl_statistics_float.h>

#include "util/util.h"

void dg_metrics_compute(const float *ref, const float *o, size_t count, const float *mass, int nq,
			dg_metrics *m)
{
	double l1 = 0, r1 = 0, d2 = 0, r2 = 0, o2 = 0, dot = 0, lo = INFINITY, hi = -INFINITY;
	for (size_t i = 0; i < count; i++) {
		double r = ref[i], x = o[i], e = x - r;
		l1 += fabs(e);
		r1 += fabs(r);
		d2 += e * e;
		r2 += r * r;
		o2 += x * x;
		dot += r * x;
		lo = r < lo ? r : lo;
		hi = r > hi ? r : hi;
	}
	m->rel_l1 = l1 / r1;
	m->rel_l2 = sqrt(d2 / r2);
	m->cosine = dot / sqrt(r2 * o2);
	m->psnr = d2 > 0 ? 20.0 * log10((hi - lo) / sqrt(d2 / count)) : INFINITY;
	if (!mass) {
		m->mass_mean = m->mass_p5 = 1.0;
		return;
	}
	float *sorted = dg_malloc((size_t)nq * sizeof(float));
	memcpy(sorted, mass, (size_t)nq * sizeof(float));
	gsl_sort_float(sorted, 1, nq);
	double sum = 0;
	for (int i = 0; i < nq; i++)
		sum += sorted[i];
	m->mass_mean = sum / nq;
	m->mass_p5 = gsl_stats_float_quantile_from_sorted_data(sorted, 1, nq, 0.05);
	free(sorted);
}
