/*
 * callspeed.h: `dsgap callspeed`: the time of one attention call (all heads of a site) under each
 * policy against sequence length (issue 23 item 3), its metadata amortised over its refresh schedule:
 *
 *   dsgap callspeed [--device gpu|cpu] [--grids LIST] [--heads LIST] [--head-dim D] [--policies LIST]
 *                   [--density LIST] [--path dit|backend|both] [--every K] [--reps R]
 *                   [--max-call S] [--budget S] --csv FILE
 *
 * Paths:
 *   dit      the DiT engine's self-attention entry point (dit_attn.h), exactly as the closed loop calls
 *            it: Q/K/V (heads, n, d) in the op table's bf16 operand buffers, a site's heads together
 *            (one sparse launch for all heads on the GPU), the P.V mode the engine runs (fast: P in
 *            bf16). Dense = the op table's attention (our flash kernel, all heads).
 *   backend  the replay's path (backend.h + policy_run.h), one head at a time from host Q/K/V, in both
 *            P.V modes (dg_backend.precise off = fast, on = precise: P as bf16 hi + lo); times are the
 *            backend's own (device events on the GPU): dense = be->dense, sparse = the attend's, metadata
 *            = dg_policy_run's meta_s, summed over heads.
 * Schedule: warm-up 1 (step 0 = the anchor of refresh=anchor policies: dense + metadata + the sparse
 * pass for the residual; refresh=step policies make metadata at every step), one untimed call (step
 * 1: a refresh=step policy's first metadata, cold k-means or a static mask's first build, a one-time
 * cost of a run, left out), then --reps timed calls (steps 2..R+1; median). refresh=anchor: amortised = call + anchor / K, anchor = what the anchor step
 * costs beyond a dense call (dit) or its metadata (backend), K = --every (default 40: 50 steps, warm-up
 * 10, one anchor, as scripts/gpu_dit.sh's Wan2.1 runs); refresh=step: amortised = call (metadata
 * inside), refresh_every 1. A warm-up instance (anchor, the untimed call, one timed call) runs first.
 * Inputs: random Q/K/V with row scales in [0.5, 2) (a hash generator: fast at 128k tokens x 40 heads;
 * flat attention rows, so data-dependent selections run at their budgets, not at a model's
 * sparsity). --max-call S: a policy whose call took more than S seconds (default 5) at n tokens is not
 * run at n tokens or more from then on, at this or a later head count (one over it in the warm-up
 * instance: that instance's one timed call is its row, reps 1); --budget S: no configuration starts after S seconds (0: none).
 * Rows (CSV, appended together at the end: a run stopped by --budget keeps them, a failure or a
 * signal leaves the file as it was; util/csv.h):
 *   path,pv,policy,density_target,n,grid,heads,d,refresh_every,density,dense_ms,call_ms,anchor_ms,
 *   amortised_ms,meta_ms,reps,device,date,commit
 * policy "dense" rows: call_ms = dense_ms. density: computed pairs / n^2 of the timed calls. meta_ms:
 * the metadata (groups, scores, selections; device time where measured) of one refresh: the anchor's
 * for refresh=anchor, a call's for refresh=step (inside call_ms there). Path dit, refresh=step: the
 * call less its sparse attention's device time, i.e. what the metadata adds to the call (its host
 * share in, its work overlapped with the attention or other heads' metadata not counted: the GPU
 * makes a head's block take on a side stream during the next head's scores). Rows dated before
 * 2026-12-06T14:00Z have the metadata's device time there, the same while nothing overlapped.
 */
#ifndef DG_CALLSPEED_H
#define DG_CALLSPEED_H

#include "policy/policy.h"

#define DG_CALLSPEED_MAXL 64 /* grids, head counts, densities */

/* what dsgap callspeed measures (the command line's defaults: cli/cmd_callspeed.c) */
typedef struct {
	const char *device, *csv, *path;
	int grids[DG_CALLSPEED_MAXL][3], ngrids, heads[DG_CALLSPEED_MAXL], nheads, d, reps, every;
	double dens[DG_CALLSPEED_MAXL], max_call, budget;
	int ndens;
	dg_policy pol[64];
	int npol;
} dg_callspeed_opts;

/* Appends the rows of every grid, head count, policy and density to o->csv (its header when new;
 * refused when the file's first line is another); progress on stderr. A problem: one line, -1. */
int dg_callspeed(const dg_callspeed_opts *o);

#endif
