/*
 * ref64.h: independent fp64 references for the tests: naive attention (full softmax rows, no
 * blocking), exact probabilities (whole matrices too), sparse outputs of 0/1 selections, and the
 * metrics of docs/spec.md §4. Deliberately the plainest code.
 */
#ifndef DG_REF64_H
#define DG_REF64_H

#include <math.h>
#include <stdlib.h>

/* Attention of query row qi (d) over the keys listed in keys (or all nk when keys is NULL).
 * out (d) in double; returns the log-sum-exp over the listed keys. */
static inline double ref_attn_row(const float *qi, const float *k, const float *v, int d, const int *keys,
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
static inline double ref_prob(const float *qi, const float *kj, int d, double lse)
{
	double dot = 0;
	for (int c = 0; c < d; c++)
		dot += (double)qi[c] * kj[c];
	return exp(dot / sqrt((double)d) - lse);
}

/* The exact probabilities P (n, n) and the dense output O (n, d) of one head q, k, v (n, d). */
static inline void ref_probs64(const float *q, const float *k, const float *v, int n, int d, double *P,
			       double *O)
{
	for (int i = 0; i < n; i++) {
		double mx = -INFINITY, sum = 0, *p = P + (size_t)i * n;
		for (int j = 0; j < n; j++) {
			double dot = 0;
			for (int c = 0; c < d; c++)
				dot += (double)q[(size_t)i * d + c] * k[(size_t)j * d + c];
			p[j] = dot / sqrt((double)d);
			mx = fmax(mx, p[j]);
		}
		for (int j = 0; j < n; j++)
			sum += p[j] = exp(p[j] - mx);
		for (int j = 0; j < n; j++)
			p[j] /= sum;
		for (int c = 0; c < d; c++) {
			double o = 0;
			for (int j = 0; j < n; j++)
				o += p[j] * v[(size_t)j * d + c];
			O[(size_t)i * d + c] = o;
		}
	}
}

/* The sparse output o (n, d) of a 0/1 selection sel (n, n): the selected probabilities of P
 * renormalised; their sum per query into mass (n) unless NULL. */
static inline void ref_sparse64(const double *P, const float *v, int n, int d, const char *sel,
				double *o, double *mass)
{
	for (int i = 0; i < n; i++) {
		double m = 0;
		for (int j = 0; j < n; j++)
			m += sel[(size_t)i * n + j] ? P[(size_t)i * n + j] : 0;
		if (mass)
			mass[i] = m;
		for (int c = 0; c < d; c++) {
			double acc = 0;
			for (int j = 0; j < n; j++)
				if (sel[(size_t)i * n + j])
					acc += P[(size_t)i * n + j] * v[(size_t)j * d + c];
			o[(size_t)i * d + c] = acc / m;
		}
	}
}

/* qsort order of (score, index) double pairs: score descending, then index ascending */
static inline int ref_rank_desc(const void *a, const void *b)
{
	const double *x = a, *y = b;
	if (x[0] != y[0])
		return x[0] > y[0] ? -1 : 1;
	return (x[1] > y[1]) - (x[1] < y[1]);
}

typedef struct {
	double rel_l1, rel_l2, cosine, psnr;
} ref_metrics;

static inline void ref_metrics_compute(const double *ref, const double *o, size_t n, ref_metrics *m)
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
