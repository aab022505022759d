/*
 * backend.h: where the policies compute: the CPU (backend_cpu.c, the reference) or the GPU
 * (backend_gpu.c, kernels/). The policy logic lives once, in policy_run.c (used by the replay and
 * the DiT engine); a backend only provides these primitives on one loaded (step, layer, head) unit
 * of n tokens and head_dim d.
 *
 * Groupings, scores, selections and residuals are opaque handles that live where the backend
 * computes (host memory or device memory); policy_run.c only passes them around and frees them.
 */
#ifndef DG_BACKEND_H
#define DG_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "policy/metrics.h"
#include "policy/peers.h"
#include "policy/policy.h"
#include "policy/select.h"

typedef struct dg_backend dg_backend;
typedef struct dg_bgroups dg_bgroups; /* a grouping of the unit's queries */
typedef struct dg_bscores dg_bscores; /* (ngroups, cols) key or block scores */
typedef struct dg_bsel dg_bsel;       /* key lists per group */
typedef struct dg_bvec dg_bvec;       /* (n, d), e.g. a residual, stored as residual_dtype says */

/* What the primitives spend device time on (dg_backend.phases, dsgap bench's anchor breakdown). */
typedef enum {
	DG_PHASE_DENSE,  /* dense */
	DG_PHASE_GROUPS, /* groups */
	DG_PHASE_SCORES, /* exact (with the per-query oracle's selection), pooled */
	DG_PHASE_SELECT, /* select */
	DG_PHASE_ATTEND, /* attend (sparse attention, residual bookkeeping, metrics) */
	DG_PHASE_COUNT
} dg_phase;
const char *dg_phase_name(dg_phase p);

/* --cache-offload's traffic (backend.offload_stats) */
typedef struct {
	double up_bytes, down_bytes; /* host to device (fetch), device to host (park's write-backs) */
	double copy_s;               /* the copy stream's busy time (device events) */
	double wait_s;               /* the compute stream's waits for a fetch (device events) */
	double pin_s;                /* host time allocating pinned memory (or waiting for pin_ahead's) */
	double pin_ahead_bytes;      /* pinned ahead (pin_ahead), off the caller's thread */
	double pin_own_bytes;        /* pinned by park itself (no pool, or beyond it) */
	double pin_ahead_s;          /* wall seconds from pin_ahead to its last chunk pinned (0: not done) */
} dg_offload_stats;

struct dg_backend {
	const char *name;  /* "cpu" or "gpu" */
	char device[192];  /* what it runs on, for run.json */
	int n, d;
	void *impl;
	/* P.V of dense and attend (dsgap_kernels.h, `precise`): false (the constructors' default) rounds
	 * P to bf16 on the GPU, the fast mode; true splits it into bf16 hi + lo, fp32-level outputs (the
	 * replay's default). The CPU keeps P in fp32 either way. Set it before a load: a backend may
	 * keep the sparse output of a loaded unit. */
	bool precise;
	/* How attend stores the residuals it makes (cache_store.h: fp32, bf16, fp8 with per-row
	 * scales); the constructors' default fp32. policy_run.c sets it from the policy before every
	 * attend that makes one; a residual keeps its own storage, and reads decode it. */
	dg_resdtype residual_dtype;
	/* The next attend's sparse output is read after it by approx (PISA's term): policy_run.c sets it
	 * around that attend; the GPU then writes the output where approx reads it instead of batching
	 * the launch. */
	bool term_follows;
	/* Load the unit's Q, K, V (host, (n, d) each). */
	void (*load)(dg_backend *, const float *q, const float *k, const float *v);
	/* Load the unit's Q, K, V from where the backend computes, fp32 (n, d) each (device memory on the
	 * GPU, e.g. the DiT engine's own buffers: no host round trip; the work that wrote them is waited
	 * for). The primitives that run a host twin on the unit (k-means groups outside the peers,
	 * per-query selections other than top-k over tokens) need a unit from load instead. */
	void (*load_device)(dg_backend *, const float *q, const float *k, const float *v);
	/* Optional (NULL: use load_device). load_device with the bf16 copies q16, k16, v16 (n, d) of
	 * q, k, v read in place of a conversion (q names the unit for prefetch_groups), and the unit's
	 * output, dense or not, going to o16 in bf16 (n rows of d, row stride ldo; a head's columns of
	 * the DiT's merged attention output), where the backend computes: output_device writes it
	 * there (its o unused), or only orders where attend wrote there already. q16.. must stay
	 * unchanged, and o16 unread, until output_device's order holds, which may be as late as the
	 * next phases call (the GPU backend batches the sparse attention of consecutive units whose
	 * buffers are consecutive heads into one launch there). order: the unit's work first waits for
	 * the DiT op table's work queued so far; true at a site's first load, and false only where the
	 * table has queued nothing since the last load that ordered (a later head of the same site: an
	 * event and a wait fewer a head). ldi: 0, or q16, k16, v16 are token-major rows ldi apart (the
	 * caller's own buffers, libdsgap's direct path) and q NULL: such a unit is read by nothing but a
	 * plain reuse step's sparse attention (dg_policy_run_plain_reuse), which joins the batch. */
	void (*load_device_bf16)(dg_backend *, const float *q, const uint16_t *q16, const uint16_t *k16,
				 const uint16_t *v16, int ldi, uint16_t *o16, int ldo, bool order);
	/* Optional (NULL: nothing ahead). A hint before loads: the units whose Q buffers are q[0 ..
	 * count) ((n, d) fp32 each; on the host, or where the backend computes if device) will be loaded
	 * (load or load_device from the same q pointer, in any order) and grouped by this kind. The
	 * backend may compute their groupings ahead, e.g. all at once while other work runs, and
	 * groups() of that kind on such a unit then returns its grouping. The buffers must not change
	 * until loaded; a new hint drops what the last one left. q16: NULL, or the units' bf16 Q
	 * where the backend computes (as load_device_bf16's), read in place of q, which then only
	 * names the units. */
	void (*prefetch_groups)(dg_backend *, dg_group_kind, int count, const float *const *q,
				const uint16_t *const *q16, bool device);
	/* Dense attention of the loaded unit: the reference O and its LSE. Returns seconds. */
	double (*dense)(dg_backend *);
	/* Group the loaded unit's queries (groups.h). NULL after reporting on failure. With a text
	 * prefix (docs/spec.md §3.7, both backends, every policy): the text queries come first, never
	 * mixed with video ones; select and exact then give text groups every key and add the text keys
	 * to every other list (dg_joint_selection), and attend and approx write the text queries' rows
	 * as the dense pass's (on a unit without one, as dense attention of those rows). */
	dg_bgroups *(*groups)(dg_backend *, dg_group_kind, const int grid[3], int text_tokens);
	/* Exact scores (select.h) of nacc groupings in one pass over the probabilities, into
	 * scores[a]; and per-query selections (the oracle) for the nq budgets into qsel[b]. */
	void (*exact)(dg_backend *, dg_bgroups *const *groups, dg_bscores **scores, int nacc,
		      const dg_budget *const *qbudgets, dg_bsel **qsel, int nq);
	/* Pooled scores of a grouping, for kv=token or kv=block. */
	dg_bscores *(*pooled)(dg_backend *, dg_bgroups *, dg_kv_kind);
	/* Block sums of token scores. */
	dg_bscores *(*to_blocks)(dg_backend *, const dg_bscores *);
	/* Votes (dg_scores_vote) of the groups `to` from the lists `sel` of the groups `from`, as scores
	 * for select (cols per kv): fresh=groups (policy_run.h). Both backends run the host twin. */
	dg_bscores *(*vote)(dg_backend *, const dg_bgroups *to, const dg_bgroups *from, const dg_bsel *sel,
			    dg_kv_kind kv);
	/* Per-group key lists from scores under a budget. */
	dg_bsel *(*select)(dg_backend *, const dg_bgroups *, const dg_bscores *, const dg_budget *);
	/*
	 * Sparse attention of the loaded unit with a selection: out = sparse + residual (NULL: none).
	 * new_residual (or NULL): receives O_ref - sparse, allocated when *new_residual is NULL.
	 * m (or NULL): metrics of out against O_ref, with the retained mass. seconds (or NULL): the
	 * sparse attention's time (a backend may reuse the sparse output of the same grouping and
	 * selection on the same loaded unit, reporting the time it took then).
	 * Returns the computed (query, key) pairs.
	 */
	int64_t (*attend)(dg_backend *, const dg_bgroups *, const dg_bsel *, const dg_bvec *residual,
			  dg_bvec **new_residual, dg_metrics *m, double *seconds);
	/* Optional (NULL: lists stay lists). Store a token selection compactly from now on (keys=bitmap,
	 * cache_store.h: one bitmap per group); attend decodes it to the same ascending lists. */
	void (*compact)(dg_backend *, dg_bsel *);
	/* A peer policy's grouping and selection (peers.h, dg_peer_metadata) for the loaded unit under
	 * budget b; state is the run's carried state. -1 after reporting. Both backends run the
	 * host twin and place the result where they compute. */
	int (*peer)(dg_backend *, const dg_policy *, const dg_budget *, const int grid[3], int text,
		    dg_peer_state **state, dg_bgroups **groups, dg_bsel **sel);
	/* PISA's first-order term of the keys not selected (dg_pisa_combine, key blocks of `block`)
	 * folded into the output of the last attend, which had no residual; m (or NULL): metrics of
	 * the new output. */
	void (*approx)(dg_backend *, const dg_bgroups *, const dg_bsel *, int block, dg_metrics *m);
	/*
	 * Optional (NULL: every primitive is synchronous, as on the CPU). Waits for the work enqueued so
	 * far. With s: s gets the device seconds per phase since the previous such call; the first one
	 * starts the accounting (the primitives then record device events around their work).
	 */
	void (*phases)(dg_backend *, double s[DG_PHASE_COUNT]);
	/* Optional (NULL: nothing is held back). The work the backend holds back (the GPU backend's
	 * batch of sparse attends) enqueued now, ordered before the DiT op table's later work, without
	 * waiting for it: what phases does, less the wait. */
	void (*submit)(dg_backend *);
	/* o (n, d) on the host = the dense O (dense), or the output (out) of the last attend. */
	void (*output)(dg_backend *, bool dense, float *o);
	/* The same into o (n, d) where the backend computes (device memory on the GPU), ordered before
	 * the DiT op table's later work (on the GPU: its default stream waits for the copy); after
	 * load_device_bf16, into its o16 instead. */
	void (*output_device)(dg_backend *, bool dense, float *o);
	/*
	 * Optional (NULL: the caches stay where the backend computes; the CPU's are host memory
	 * already). --cache-offload (docs/spec.md §3.1): residuals and key lists kept in pinned host
	 * memory between their uses. NULL entries of vecs/sels (count each) are skipped.
	 *   park   each handle whose device copy changed since it was last parked (made by attend or
	 *          compact) is written back to host memory on a copy stream, after the work enqueued
	 *          so far; every device copy is released once that is done. No host wait.
	 *   fetch  each parked handle's device copy comes back on the copy stream; the primitives that
	 *          read it (attend) make the compute stream wait for that copy (an event, no host wait).
	 * A parked handle that a primitive needs is fetched then (exposed). Outputs are bit-identical.
	 */
	void (*park)(dg_backend *, int count, dg_bvec *const *vecs, dg_bsel *const *sels);
	/* Optional, with park: start pinning about `bytes` of host memory for park's copies now, on the
	 * backend's own threads, so that the first park (an anchor) finds it pinned instead of pinning
	 * it then; park waits only for what is not pinned yet, and pins beyond it as before. */
	void (*pin_ahead)(dg_backend *, double bytes);
	void (*fetch)(dg_backend *, int count, dg_bvec *const *vecs, dg_bsel *const *sels);
	/* Optional, with park: the offload's totals since the backend was made (waits for the copies
	 * so far): bytes to and from the host, copy-stream seconds, and the seconds the compute stream
	 * spent waiting for a copy (what the overlap did not hide), pinning (host allocation) seconds. */
	void (*offload_stats)(dg_backend *, dg_offload_stats *st);
	/* Optional (tests/backend/gpu_cache.c): the bytes of a stored residual (dg_residual_bytes of its
	 * storage), copied to host (or NULL: only the size); a selection's lists on the host as attend
	 * reads them (a bitmap decoded; free with dg_selection_free). */
	size_t (*vec_bytes)(dg_backend *, const dg_bvec *, void *host);
	void (*sel_lists)(dg_backend *, const dg_bsel *, dg_selection *out);
	void (*groups_free)(dg_backend *, dg_bgroups *);
	void (*scores_free)(dg_backend *, dg_bscores *);
	void (*sel_free)(dg_backend *, dg_bsel *);
	void (*vec_free)(dg_backend *, dg_bvec *);
	void (*destroy)(dg_backend *);
};

dg_backend *dg_backend_cpu(int n, int d);
/* The GPU backend, or NULL after one line saying why (no CUDA in this build, no device, head_dim
 * other than 64 or 128). */
dg_backend *dg_backend_gpu(int n, int d);
/* Whether this build has the GPU backend and a device answers (no message). */
int dg_backend_gpu_available(void);

#endif
