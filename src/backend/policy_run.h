/*
 * policy_run.h: the policies of docs/spec.md §3 at work on a stream of units, on any backend (backend.h).
 * The one implementation of the schedule state machine and of metadata construction: the
 * open-loop replay (replay.c) and the closed-loop DiT entry point (dit_attn.c) both run on it.
 *
 * A dg_policy_run is one policy at one density on one stream of units of the same (layer, head)
 * across steps (a (pass, layer, head) in the DiT): metadata and residual carry over from unit to
 * unit. Per unit:
 *   1. dg_policy_run_plan      per run: does it output the dense O, does it make metadata? It
 *                              reads no data: callers plan before loading the unit, so that they
 *                              can hint the backend at groupings ahead (dg_policy_run_groups_with,
 *                              be->prefetch_groups). Then, with the unit loaded into the backend
 *                              and its dense pass done (be->dense):
 *   2. dg_policy_run_metadata  the new metadata of every run that makes some, built together:
 *                              each grouping once, one exact-score pass for all groupings and the
 *                              per-query (oracle) budgets, selections shared by identical keys;
 *                              a peer's (dg_policy_is_peer) made alone by be->peer (peers.h)
 *   3. dg_policy_run_apply     per run: residual bookkeeping, the output (approx=pisa: plus its
 *                              first-order term), optionally its metrics
 *
 * At step s (W = warm-up, anchor = a schedule anchor, or past the warm-up with no metadata yet):
 *   dense policy / dense layer        O = dense
 *   refresh=anchor: s < W, no anchor  O = dense
 *                   anchor            O = dense; metadata from this step's Q/K (exact scores use
 *                                     the dense LSE); residual R = O_dense - O_sparse (cached)
 *                   otherwise         O = sparse(metadata) [+ R]
 *   refresh=step:   s < W             O = dense (with a residual: metadata and R for next step)
 *                   otherwise         metadata from this step; O = sparse [+ R of the previous
 *                                     step]; R = O_dense - O_sparse
 *   a step outside the schedule's sparse_steps window gives O = dense (anchors still make metadata)
 * The default anchor depends on which steps exist, so callers resolve it into the schedule.
 *
 * Staleness (fresh=, issue 50): at a refresh=anchor policy's reuse steps the components named in
 * fresh are remade from the step's unit, only for that step (the anchor's metadata is kept):
 *   keys      the key lists selected again from this step's scores (exact: the dense LSE) over
 *             the groups in use
 *   groups    the queries grouped again (the policy's kind) from this step's Q; without keys, each
 *             new group's keys are the anchor's lists carried by votes (dg_scores_vote: the top-k
 *             of the fraction of its queries whose anchor group lists the key)
 *   residual  R remade every step as refresh=step does: O = sparse + R of the previous step, then
 *             R = O_dense - O_sparse of this step (so it is one step old, not since the anchor)
 */
#ifndef DG_POLICY_RUN_H
#define DG_POLICY_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "policy/policy.h"

typedef struct dg_policy_meta dg_policy_meta; /* groups + selection, shared between runs */

typedef struct {
	const dg_policy *p;
	dg_budget budget;      /* the policy's budget at the run's density */
	dg_policy_meta *meta;  /* refresh=anchor: the last anchor's metadata, or NULL */
	int meta_step;         /* the step it was made at */
	dg_bvec *residual;     /* R, or NULL */
	double meta_s;         /* metadata seconds summed over units, as if made alone */
	bool untimed;          /* meta_s not kept: dg_policy_run_metadata does not wait for the backend's
				* work to time it (the DiT entry point, which times by phases) */
	dg_peer_state *peer;   /* a peer's state carried across steps (svg2's centroids), or NULL */
	/* the current unit, from dg_policy_run_plan */
	bool dense_out, make_meta;
	bool make_part;        /* a reuse step of fresh=groups|keys: metadata for this step alone */
	dg_policy_meta *fresh; /* metadata made at this unit */
} dg_policy_run;

/* A run of policy p (kept by pointer) at top-k density rho, with no state yet. */
void dg_policy_run_init(dg_policy_run *r, const dg_policy *p, double rho);
/* What the run does at the unit of (step, layer) under schedule sc: sets dense_out, make_meta. */
void dg_policy_run_plan(dg_policy_run *r, const dg_schedule *sc, int step, int layer);
/* Whether the run, as planned, reads the unit's dense O or LSE (be->dense must have run): its output
 * is dense, PISA's term needs the LSE, or it makes metadata that reads them: exact scores (from the
 * dense LSE; not a peer's) or a new residual (O_dense - O_sparse). Otherwise the dense pass can be
 * skipped, as the DiT loop does: a reuse step of refresh=anchor, and every step of a refresh=step
 * policy whose metadata is its own estimate (est-block's pooled scores, a peer's masks and scores). */
bool dg_policy_run_needs_dense(const dg_policy_run *r);
/* Whether the run, as planned, is a plain reuse step: its cached metadata's sparse attention plus its
 * cached residual and nothing else (no metadata, no dense pass, no new residual, no term), so that
 * the unit's Q, K, V are read by the sparse attention alone. */
bool dg_policy_run_plain_reuse(const dg_policy_run *r);
/* Whether dg_policy_run_metadata, as the runs are planned, groups the unit by kind (be->groups): a
 * run that makes metadata, not a peer's, groups by it. Known before the unit is loaded: the hint of
 * be->prefetch_groups. */
bool dg_policy_run_groups_with(dg_policy_run *const *runs, int nruns, dg_group_kind kind);
/* The metadata of every run with make_meta set (into its fresh), for the loaded unit on a token
 * grid whose first text_tokens keys are text. 0, or -1 after reporting (queries not groupable). */
int dg_policy_run_metadata(dg_backend *be, dg_policy_run *const *runs, int nruns, const int grid[3],
			   int text_tokens);

typedef struct {
	bool dense;      /* the output is the dense O */
	int64_t pairs;   /* computed (query, key) pairs of the output: n^2 when dense */
	int staleness;   /* steps since its metadata was made: 0 when dense or fresh */
	double seconds;  /* sparse attention time when timed; 0 when dense */
} dg_policy_out;

/* The run's output at the unit of `step`: m (or NULL) gets its metrics against the dense O, o (or
 * NULL) the output itself, (n, d) on the host; timed: out.seconds is measured (a backend may then
 * wait for the attention; untimed, the work may stay queued). */
dg_policy_out dg_policy_run_apply(dg_backend *be, dg_policy_run *r, int step, dg_metrics *m, float *o,
				  bool timed);
/* cfg_meta=shared (policy.h): instead of making its own metadata at this unit, run r (planned to
 * make some at `step`) takes the metadata that src made at the same step (the conditional CFG pass's,
 * same layer and head; src applied first), shared by reference; its residual stays its own (made by
 * apply from r's unit with that selection). Returns whether it did (false: r makes its own). */
bool dg_policy_run_adopt(dg_policy_run *r, const dg_policy_run *src, int step);
/* The run's cached handles (--cache-offload moves them, backend.park/fetch): its residual and the
 * key lists of its metadata (either NULL if none). */
void dg_policy_run_caches(const dg_policy_run *r, dg_bvec **residual, dg_bsel **sel);
/* Drop the run's metadata and residual (the end of its stream). */
void dg_policy_run_clear(dg_backend *be, dg_policy_run *r);

#endif
