/*
 * shapley.c: Shapley shares and interaction contrasts of a 2^k factorial. See shapley.h.
 */
#include "analysis/shapley.h"

#include <gsl/gsl_errno.h>
#include <gsl/gsl_permutation.h>

#include "util/util.h"

void dg_shapley(int k, const double *E, double *phi)
{
	DG_ASSERT(k >= 1 && k <= DG_SHAPLEY_MAX);
	gsl_permutation *order = gsl_permutation_calloc(k);
	if (!order)
		dg_die("out of memory (gsl_permutation_calloc)");
	for (int i = 0; i < k; i++)
		phi[i] = 0;
	long orders = 0;
	do {
		unsigned S = 0;
		for (int j = 0; j < k; j++) {
			size_t i = gsl_permutation_get(order, j);
			phi[i] += E[S] - E[S | 1u << i];
			S |= 1u << i;
		}
		orders++;
	} while (gsl_permutation_next(order) == GSL_SUCCESS);
	for (int i = 0; i < k; i++)
		phi[i] /= orders;
	gsl_permutation_free(order);
}

double dg_interaction(unsigned T, const double *E)
{
	double I = 0;
	for (unsigned S = T;; S = (S - 1) & T) { /* every subset of T */
		int odd = __builtin_popcount(T ^ S) & 1;
		I += odd ? -E[S] : E[S];
		if (!S)
			break;
	}
	return I;
}
