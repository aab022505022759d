/*
 * metrics.h: fidelity of an attention output against the dense reference (docs/spec.md §4), accumulated
 * in double: rel_l1 = sum|o-ref| / sum|ref|, rel_l2 = |o-ref| / |ref|, cosine, psnr with peak =
 * max-min of ref (inf when equal), and the retained mass per query (mean, 5th percentile).
 */
#ifndef DG_METRICS_H
#define DG_METRICS_H

#include <stddef.h>

typedef struct {
	double rel_l1, rel_l2, cosine, psnr;
	double mass_mean, mass_p5;
} dg_metrics;

/* ref, o: count values. mass: nq values or NULL (then mass_mean = mass_p5 = 1, a dense output). */
void dg_metrics_compute(const float *ref, const float *o, size_t count, const float *mass, int nq,
			dg_metrics *m);

#endif
