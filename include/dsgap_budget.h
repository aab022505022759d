/*
 * dsgap_budget.h: the budget rule, how many keys a top-k density buys (docs/spec.md §3, switch
 * `budget`). The one definition that the harness (C11, src/policy/select.c and its callers) and the
 * kernels (CUDA C++, kernels/select_topk.cu) both include, so the CPU twin and the GPU selection
 * cannot drift apart. Written in the common subset of C11 and CUDA C++: static inline functions of
 * plain ints and doubles, no C++-only features.
 *
 *   DG_KV_BLOCK_SIZE  keys per block: kv=block scores blocks of this many contiguous keys, and the
 *                     budgets are whole blocks of keys
 *   dg_topk_count     K = min(n, max(128, 128 * ceil(rho * n / 128))): the keys kept by topk at
 *                     density rho over n keys, before sinks (the 1e-9 keeps rho * n an exact
 *                     multiple of 128 from rounding up a block)
 *   DG_PEER_MATCH_TOL  |computed density - rho| a peer under budget=matched must reach (src/policy/
 *                     peers.h; kernels/peer_take.cu lowers svg2's cluster floor by it as peers.c does)
 */
#ifndef DSGAP_BUDGET_H
#define DSGAP_BUDGET_H

#include <math.h>

#define DG_KV_BLOCK_SIZE 128
#define DG_PEER_MATCH_TOL 0.02

#ifdef __CUDACC__
#define DG_BUDGET_FN static inline __host__ __device__
#else
#define DG_BUDGET_FN static inline
#endif

/* keys kept by topk at density rho over n keys (before sinks) */
DG_BUDGET_FN int dg_topk_count(double rho, int n)
{
	long k = (long)ceil(rho * n / DG_KV_BLOCK_SIZE - 1e-9) * DG_KV_BLOCK_SIZE;
	if (k < DG_KV_BLOCK_SIZE)
		k = DG_KV_BLOCK_SIZE;
	return k < n ? (int)k : n;
}

#endif
