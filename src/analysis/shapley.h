/*
 * shapley.h: attribution over a 2^k factorial design (docs/spec.md §5): k components, each off or on;
 * cell S (a bit mask, bit i = component i on) has mean error E[S]. For MC-Sparse k = 3 with
 * bit 0 = G (grouping), bit 1 = S (selection), bit 2 = R (residual): E[0] = baseline,
 * E[7] = mc-sparse.
 *
 * Shapley share of component i: its marginal error reduction E[S] - E[S | i], averaged over the
 * k! orders in which the components can be switched on (S = the components before i). The shares
 * sum to E[0] - E[2^k - 1]; positive = error reduced.
 *
 * Interaction of a set T of components, on the error scale (Moebius inversion):
 *   I_T = sum over S subset of T of (-1)^(|T|-|S|) E[S]
 *   I_{G,S} = E[gs] - E[g] - E[s] + E[0]
 *   I_{G,S,R} = E[gsr] - E[gs] - E[gr] - E[sr] + E[g] + E[s] + E[r] - E[0]
 * I_T = 0 for every |T| >= 2 exactly when the effects add; I_T < 0: together the components
 * reduce error more than the sum of their separate effects (synergy); I_T > 0: they overlap.
 */
#ifndef DG_SHAPLEY_H
#define DG_SHAPLEY_H

#define DG_SHAPLEY_MAX 8 /* components: k! orders are enumerated */

/* phi[k] from E[2^k]; 1 <= k <= DG_SHAPLEY_MAX. */
void dg_shapley(int k, const double *E, double *phi);
/* I_T from E (the cells of the design); T is a bit mask of components. */
double dg_interaction(unsigned T, const double *E);

#endif
