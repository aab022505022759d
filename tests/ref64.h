/*
 * ref64.h: independent fp64 references for the tests: naive attention (full softmax rows, no
 * blocking), exact probabilities, and the metrics of DESIGN §4. Deliberately the plainest code.
 */
#ifndef DG_REF64_H
#define DG_REF64_H

#include <math.h>
#include <stdlib.h>

/* Attention of query row qi (d) over the keys listed in keys (or all nk when keys is NULL).
 * out (d) in double; returns the log-sum-exp over the listed keys. */
static double ref_attn_row(const float *qi, const float *k, const float *v, int d, const int *keys,
			   int nkeys, double *out)
{
	double scale = 1.0 / sqrt((double)d), mx = -INFINITY;
	double *s = malloc(sizeof(double) * (nkeys ? nkeys : 1));
	for (int t = 0; t < nkeys; t++) {
		int j = keys ? keys[t] : t;
		double dot = 0;
		for (int c = 0; c < d; c++)
			dot += (double)qi[c] * k[(size_t)j * d + c];
		s[t] = dot * scale;
		mx = s[t] > mx ? s[t] : mx;
	}
	double sum = 0;
	for (int c = 0; c < d; c++)
		out[c] = 0;
	for (int t = 0; t < nkeys; t++) {
		int j = keys ? keys[t] : t;
		double p = exp(s[t] - mx);
		sum += p;
		for (int c = 0; c < d; c++)
			out[c] += p * v[(size_t)j * d + c];
	}
	for (int c = 0; c < d; c++)
		out[c] /= sum;
	free(s);
	return mx + log(sum);
}

/* exact probability of key j for query i given the dense lse (double) */
static double ref_prob(const float *qi, const float *kj, int d, double lse)
{
	double dot = 0;
	for (int c = 0; c < d; c++)
		dot += (double)qi[c] * kj[c];
	return exp(dot / sqrt((double)d) - lse);
}

typedef struct {
	double rel_l1, rel_l2, cosine, psnr;
} ref_metrics;

static void ref_metrics_compute(const double *ref, const double *o, size_t n, ref_metrics *m)
{
	double l1 = 0, r1 = 0, d2 = 0, r2 = 0, o2 = 0, dot = 0, lo = INFINITY, hi = -INFINITY;
	for (size_t i = 0; i < n; i++) {
		l1 += fabs(o[i] - ref[i]);
		r1 += fabs(ref[i]);
		d2 += (o[i] - ref[i]) * (o[i] - ref[i]);
		r2 += ref[i] * ref[i];
		o2 += o[i] * o[i];
		dot += o[i] * ref[i];
		if (ref[i] < lo) lo = ref[i];
		if (ref[i] > hi) hi = ref[i];
	}
	m->rel_l1 = l1 / r1;
	m->rel_l2 = sqrt(d2) / sqrt(r2);
	m->cosine = dot / (sqrt(r2) * sqrt(o2));
	m->psnr = 10 * log10((hi - lo) * (hi - lo) / (d2 / n));
}

#endif
