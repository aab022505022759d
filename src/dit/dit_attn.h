/*
 * dit_attn.h: the one self-attention entry point of the DiT engine. Every self-attention call of
 * the forward (wan_forward.c) comes here with its site (step, layer, pass) and its Q, K, V exactly
 * as attention receives them: post-qk-norm, post-RoPE, head-major (heads, tokens, head_dim) fp32,
 * in the op table's buffers (host or device memory).
 *
 *   capture  a hook sees those Q/K/V first (dsgap capture streams them into a trace);
 *   policy   then the output is computed under the policy (policy.h, docs/spec.md §3) in the closed
 *            loop: dense, or a sparse policy whose metadata (groups, selections) and cached
 *            residual live per (pass, layer, head) across denoising steps, following the
 *            schedule (warm-up steps dense, anchors, dense layers) through the same code as the
 *            replay engine in the open loop (policy_run.h, where the state machine is written
 *            out), on the backend of the op table's kind (backend.h: CPU, or GPU reading and
 *            writing the table's device buffers); the default anchor is step W-1, else 0.
 * Sites where every head gives the dense output go through the op table (ops->attention).
 */
#ifndef DG_DIT_ATTN_H
#define DG_DIT_ATTN_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "policy/policy.h"
#include "dit/wan_ops.h"

typedef struct {
	int step;     /* denoising step, 0-based */
	int layer;    /* block */
	int pass;     /* 0 conditional, 1 unconditional (CFG) */
	double sigma; /* noise level of the step */
} dg_attn_site;

/* The capture hook: q, k, v (heads, n, d) on the host (copied there from a device). Nonzero return
 * aborts the forward. */
typedef int (*dg_attn_capture_fn)(void *user, const dg_attn_site *site, int heads, int n, int d,
				  const float *q, const float *k, const float *v);

typedef struct dg_dit_attn dg_dit_attn;

/*
 * An entry point for a model of `layers` blocks of `heads` heads of head_dim d on a token grid
 * (frames, height, width); passes = 1 or 2 (CFG). policy NULL (or dense) = dense; rho: top-k
 * density; schedule may be NULL (no warm-up; the first step is the anchor). Returns NULL after
 * reporting (a bad density; a sparse policy whose GPU backend is not available).
 */
dg_dit_attn *dg_dit_attn_new(dg_wan_ops *ops, const dg_policy *policy, double rho,
			     const dg_schedule *schedule, const int grid[3], int layers, int heads, int d,
			     int passes);
/* What dg_dit_attn_new_opts adds (libdsgap's contexts, src/api/, use it for any DiT's attention). */
typedef struct {
	const double *layer_rho; /* NULL: rho for every layer; else one density per layer (layers) */
	int text_tokens;         /* tokens before the grid's (a joint attention's text prefix), 0 for Wan;
				  * the sequence is then text_tokens + frames*height*width tokens */
	bool no_wait;            /* the caller orders its device work after the call by the op table's
				  * stream and reads no host clock of it: the entry point queues its work and
				  * returns without waiting for the device (without --cache-offload); its
				  * stats.seconds is then the host's time, and the phases' device times come in
				  * at dg_dit_attn_settle */
} dg_dit_attn_opts;
/* dg_dit_attn_new with opts (NULL: as dg_dit_attn_new). */
dg_dit_attn *dg_dit_attn_new_opts(dg_wan_ops *ops, const dg_policy *policy, double rho,
				  const dg_schedule *schedule, const int grid[3], int layers, int heads, int d,
				  int passes, const dg_dit_attn_opts *opts);
void dg_dit_attn_set_capture(dg_dit_attn *a, dg_attn_capture_fn fn, void *user);
/* --cache-offload (before the first call): the caches (residuals, key lists) live in pinned host
 * memory; a site's are fetched onto the device while the site before it runs, on a copy stream,
 * and parked again (written back where an anchor changed them) after it (backend.h park/fetch;
 * nothing on a backend without them, the CPU, whose caches are host memory already). The op
 * table's syncs wait for every stream, so the fetches are issued right after a site's opening sync
 * (they overlap its attention) and the parking right after its closing one (the rest of its layer);
 * copies those do not hide lengthen the step, beyond the compute stream's own waits that the
 * backend counts. log: one line a step on stderr, the copies and the compute stream's waits.
 * pin_bytes (> 0: the memory plan's pinned host bytes): the backend starts pinning them now, on
 * threads of its own (backend.h pin_ahead), so that the first anchor finds its host memory ready. */
void dg_dit_attn_set_offload(dg_dit_attn *a, bool offload, bool log, double pin_bytes);
/* out (n, heads*d), the heads merged, in an operand buffer of the op table (alloc_operand) =
 * attention of q, k, v (heads, n, d) at site under the policy. 0 or -1. */
int dg_dit_attention(dg_dit_attn *a, const dg_attn_site *site, const float *q, const float *k,
		     const float *v, float *out);
/* The same for bf16 inputs where the caller keeps them, token-major: head h's row r of q at
 * q[r * ldi + h * d] (k, v likewise), the output into o[r * ldo + h * d], with no layout conversion,
 * where the site is a plain reuse step for every head (dg_policy_run_plain_reuse) on a backend that
 * reads such inputs (the GPU's) with no text prefix, capture hook or offload. 0 done; 1 not such a
 * site (nothing done: the caller converts and calls dg_dit_attention); -1 after reporting. */
int dg_dit_attention_direct(dg_dit_attn *a, const dg_attn_site *site, const uint16_t *q, const uint16_t *k,
			    const uint16_t *v, int ldi, uint16_t *o, int ldo);

/* Whether the sites of this layer give the same output in every pass whenever their inputs agree
 * (dense at every step under the policy and schedule, no capture hook), so that a forward may
 * reuse another pass's result for one (dg_wan_call.reuse_first); a NULL entry point is dense. */
bool dg_dit_attn_passes_agree(const dg_dit_attn *a, int layer);

/* Whether the site's output is plain dense attention that leaves the entry point's state as it is:
 * every head dense under the policy and schedule at site's step and layer (a warm-up step that is
 * not an anchor, a dense layer, the dense policy), no metadata made or adopted there, no capture
 * hook. A caller may then compute that attention by other means and skip the call (libdsgap's
 * dsgap_site_is_dense); nothing is changed by asking. */
bool dg_dit_attn_site_dense(const dg_dit_attn *a, const dg_attn_site *site);

typedef struct {
	long long calls;        /* (site, head) units */
	long long sparse_calls; /* units whose output was sparse */
	double pairs;           /* computed (query, key) pairs of the outputs */
	double full_pairs;      /* calls * n^2 */
	double seconds;         /* time inside the entry point (metadata included; device work waited for) */
	double policy_seconds;  /* of which the calls that ran the policy (anchors and sparse calls) */
	double meta_seconds;    /* of which groups, scores, selections (device time where measured) */
	double attend_seconds;  /* and the sparse attention with its residual (device time where measured) */
	dg_offload_stats offload; /* --cache-offload's copies (zeros without) */
} dg_dit_attn_stats;
/* Waits for the entry point's device work and folds its device times into the stats (no_wait). */
void dg_dit_attn_settle(dg_dit_attn *a);
void dg_dit_attn_get_stats(const dg_dit_attn *a, dg_dit_attn_stats *s);
void dg_dit_attn_free(dg_dit_attn *a);

#endif
