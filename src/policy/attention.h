/*
 * attention.h: CPU attention, the reference twin of kernels/flash_fwd.cu and kernels/sparse_fwd.cu.
 *
 * Blocked over keys with an online softmax (OpenBLAS SGEMM per block, fp32 accumulation, exact
 * LSE), so memory is O(block * (n + d)) and a 32760-token head never needs an n x n matrix.
 * scale = 1/sqrt(d); lse = natural log of sum_j exp(scale * q.k_j). Parallel over query blocks or
 * groups with OpenMP (OpenBLAS itself single-threaded inside).
 */
#ifndef DG_ATTENTION_H
#define DG_ATTENTION_H

#include <stdint.h>

#include "policy/groups.h"
#include "policy/select.h"

/* Dense attention. q (nq, d), k v (nk, d) -> o (nq, d), lse (nq) (may be NULL). o NULL: the LSE
 * alone, no P.V (v unused, may be NULL); the same LSE bits as with o. */
void dg_attn_dense(const float *q, const float *k, const float *v, int nq, int nk, int d, float *o,
		   float *lse);

/*
 * Sparse attention: the queries of group g (g->perm[g->off[g]..]) attend to the keys of
 * sel->idx[sel->off[g]..] only. q (n, d), k v (n, d) -> o (n, d) in the original query order.
 * residual (n, d) or NULL: added to the output. lse_ref (n) or NULL: with it, mass (n) receives
 * each query's retained exact probability mass sum_{j selected} exp(scale q.k_j - lse_ref).
 * Returns the computed (query, key) pairs.
 */
int64_t dg_attn_sparse(const float *q, const float *k, const float *v, int n, int d,
		       const dg_groups *g, const dg_selection *sel, const float *residual,
		       const float *lse_ref, float *o, float *mass);

/*
 * Every probability row of dense attention, each made once (attention statistics: dsgap attnstats):
 * per block of query rows, S = scale Q_b K^T by one SGEMM over all n keys, then per row i the
 * probabilities p (n) = softmax(S_i) and their natural logs lp (n) = S_i - LSE_i (from the scores,
 * not the log of a rounded p), handed to fn(ctx, i, p, lp). fn runs on several threads at once,
 * once per row, rows in any order; p and lp are valid during the call. q, k (n, d).
 */
typedef void (*dg_attn_row_fn)(void *ctx, int query, const float *p, const float *lp);
void dg_attn_rows(const float *q, const float *k, int n, int d, dg_attn_row_fn fn, void *ctx);

/* Keep OpenBLAS on one thread: dsgap parallelises across blocks itself. Call once at start. */
void dg_attn_init_threads(void);

#endif
