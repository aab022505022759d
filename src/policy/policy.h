/*
 * policy.h: a sparse-attention policy as a point in a space of orthogonal switches (docs/spec.md §3),
 * parsed from a spec that starts at a named preset (presets.h), and the schedule.
 *
 * Policy spec grammar (the --policies list is comma-separated, so specs never hold commas):
 *   NAME[/key=value]...     e.g.  mc-sparse   oracle-tile/group=tile3d   mc-sparse/budget=topp:0.9
 *   custom/group=pca/kv=token/score=exact/residual=cached/refresh=anchor/sinks=0-256
 * keys: group=raster|tile3d|pca|query|kmeans|voxel  kv=token|block
 *       score=exact|pooled|antidiag|sparge|centroid|runmax  mask=none|radial|sta|window
 *       approx=none|pisa  budget=topk|topp:P|matched  sinks=A-B  residual=none|cached  refresh=anchor|step
 *       peer parameters (peers.h): theta= stride= qc= kc= minkc= decay= window= block= threshold=
 *       cache storage (cache_store.h, issue 21): residual_dtype=fp32|bf16|fp8 (needs
 *       residual=cached)  keys=list|bitmap (needs kv=token)  cfg_meta=own|shared (the closed loop's
 *       unconditional CFG pass takes the conditional pass's groups and key lists; needs
 *       refresh=anchor; one stream in the replay: no effect there)
 *       staleness (issue 50): fresh=groups|keys|residual, combinable as fresh=groups+keys (needs
 *       refresh=anchor): that cached component is remade at every step past the anchor while
 *       the others stay at the anchor (policy_run.h says how); groups and keys need the shared
 *       metadata path (no peer), residual needs residual=cached, groups needs budget=topk
 * With budget=topk the density comes from --density; topp ignores it (one run per density still).
 * budget=matched (peer presets only): the peer's own knob (top-p, decay, window, threshold) is calibrated per
 * unit so that its computed density is --density's (peers.h); top-k peers (chipmunk, pisa) run topk.
 *
 * The peers of docs/spec.md §3 are presets over these switches (peers.h says what each one computes,
 * its published defaults and its deviations): svg2 (group=kmeans, score=centroid, topp:0.9),
 * spargeattn (score=sparge, topp:0.98), xattention (score=antidiag, topp:0.9), radial (mask=radial),
 * sta (mask=sta), ditfastattn (mask=window, residual=cached), chipmunk (group=voxel, exact
 * column sums, residual=cached), pisa (approx=pisa) and skipsoftmax (score=runmax: a tile is skipped
 * when its running-max gap exceeds threshold=). Their metadata comes from peers.c, except
 * chipmunk's, which is the shared exact-score path on its voxel groups.
 */
#ifndef DG_POLICY_H
#define DG_POLICY_H

#include <stdbool.h>
#include <stddef.h>

#include "policy/presets.h"  /* the named policies (and switches.h, the switches' values) */

/* fresh=: the cached components a refresh=anchor policy remakes every step (bits) */
enum { DG_FRESH_GROUPS = 1, DG_FRESH_KEYS = 2, DG_FRESH_RESIDUAL = 4 };

const char *dg_group_name(dg_group_kind k);
const char *dg_kv_name(dg_kv_kind k);
const char *dg_score_name(dg_score_kind k);
const char *dg_budget_name(dg_budget_kind k);
const char *dg_residual_name(dg_residual_kind k);
const char *dg_refresh_name(dg_refresh_kind k);
const char *dg_mask_name(dg_mask_kind k);
const char *dg_approx_name(dg_approx_kind k);
const char *dg_resdtype_name(dg_resdtype k);
const char *dg_keys_name(dg_keys_kind k);
const char *dg_cfg_meta_name(dg_cfg_meta k);
int dg_group_parse(const char *s, dg_group_kind *k); /* 0 or -1 (no message) */

#define DG_POLICY_NAME_MAX 96

typedef struct {
	char name[DG_POLICY_NAME_MAX]; /* the spec as written: the policy column of metrics.csv */
	bool dense;                    /* the dense reference: no selection at all */
	dg_group_kind group;
	dg_kv_kind kv;
	dg_score_kind score;
	dg_budget_kind budget;
	double topp;                   /* budget=topp: mass to reach */
	bool matched;                  /* budget=matched: a peer's knob calibrated to rho (peers.h) */
	int sink_lo, sink_hi;          /* keys [sink_lo, sink_hi) always kept; empty when equal */
	dg_residual_kind residual;
	dg_refresh_kind refresh;
	dg_mask_kind mask;             /* a static mask gives groups and key lists (peers.h) */
	dg_approx_kind approx;         /* a term for the keys not selected (peers.h) */
	/* cache storage (cache_store.h): none changes which keys are selected */
	dg_resdtype residual_dtype;    /* how a cached residual is stored between steps */
	dg_keys_kind keys;             /* how key lists are stored between steps */
	dg_cfg_meta cfg_meta;          /* CFG's two passes: own metadata each, or the conditional's */
	unsigned fresh;                /* DG_FRESH_* bits: components remade every step (staleness) */
	/* peer parameters (peers.h; the presets set the published defaults) */
	double theta;   /* spargeattn: self-similarity threshold */
	double minkc;   /* svg2: minimum fraction of key clusters kept */
	double decay;   /* radial: decay factor of the window width */
	int stride;     /* xattention: antidiagonal stride S */
	int qc, kc;     /* svg2: query and key clusters */
	int window;     /* sta: window in tiles per axis; ditfastattn: half-width in tokens */
	int block;      /* pisa: query and key block size */
	double threshold; /* skipsoftmax: skip a tile whose running-max gap exceeds it (natural-log units,
			   * >= 0, inf allowed); < 0: ln(n), TensorRT-LLM's threshold scale factor 1 */
} dg_policy;

/* Whether the policy's metadata is made by peers.c (dg_peer_metadata) rather than the shared
 * grouping / exact / pooled / select path. */
bool dg_policy_is_peer(const dg_policy *p);

/* A preset's switches as a spec would set them, e.g. "group=pca kv=token score=exact
 * residual=cached refresh=anchor budget=topk" (peers add budget=topp:P, mask=, window=, approx=;
 * dense: ""): what `dsgap presets` lists. Writes at most n bytes to buf and returns buf. */
char *dg_preset_switches(const dg_preset *p, char *buf, size_t n);

/* Parse a spec into p. Reports "unknown policy 'x' (known: ...)" or the bad switch; returns -1. */
int dg_policy_parse(const char *spec, dg_policy *p);
/* Expand a comma-separated list of specs and aliases (presets.h) into out[] (at most max), each
 * parsed; a spec given twice is kept once. Returns the count, or -1 after one line (no policies,
 * too many, a bad spec). */
int dg_policies_expand(const char *list, dg_policy *out, int max);

#define DG_SCHEDULE_MAX 256

/*
 * When policies act. Steps and layers are the trace's own indices (/step_index, /layer_index).
 *   warmup=W        steps < W give the dense output
 *   anchors=a,b     steps where refresh=anchor policies make their metadata (output dense there);
 *                   default (anchors=once): the last stored step < W, else the first stored step
 *   anchors=every:N the default anchor a0, then a0 + N, a0 + 2N, ... (the steps that exist)
 *   dense_layers=.. layers that always give the dense output (none: no layer)
 *   sparse_steps=a-b  the policy's output only at steps a..b (inclusive); dense elsewhere (anchors
 *                   still make their metadata there): the step x layer sensitivity map (issue 50)
 *   sparse_layers=l;m only these layers sparse; every other layer dense (as dense_layers)
 * Written "warmup=10,anchors=9;25,dense_layers=0" (lists inside a key use ';' or '-' ranges).
 */
typedef struct {
	int warmup;
	int nanchors;
	int anchors[DG_SCHEDULE_MAX];
	int ndense_layers;
	int dense_layers[DG_SCHEDULE_MAX];
	bool anchors_given;
	int anchor_every;    /* anchors=every:N: N; 0 otherwise */
	bool sparse_window;            /* sparse_steps given: [sparse_lo, sparse_hi] */
	int sparse_lo, sparse_hi;
	int nsparse_layers;            /* > 0: sparse_layers given */
	int sparse_layers[DG_SCHEDULE_MAX];
} dg_schedule;

/* Parse s ("" or NULL: no warm-up, no dense layer) into out. The default anchor is resolved here,
 * the one place that owns it: without anchors=, the anchor is the last warm-up step W-1, else step
 * 0 (MC-Sparse: step W-1), which is what a denoising loop of unknown length uses as parsed. */
int dg_schedule_parse(const char *s, dg_schedule *out);
bool dg_schedule_is_anchor(const dg_schedule *s, int step);
/* Check and fit the anchors to the steps that exist: step_index[nsteps] (a trace's own indices,
 * ascending), or steps 0 .. nsteps-1 of a denoising loop of known length when step_index is NULL.
 * Given anchors must be among them; every:N adds the steps every N after the default. The parsed default moves onto them: for a loop, the last
 * step where W-1 is past the end; for a trace, the last stored step before the end of warm-up,
 * else the first stored step. Returns -1, or the position in s->anchors of the first given anchor
 * that is not a step (the caller reports it). */
int dg_schedule_resolve_anchors(dg_schedule *s, const int *step_index, int nsteps);
/* A layer whose output is always dense: in dense_layers, or not in a given sparse_layers. */
bool dg_schedule_dense_layer(const dg_schedule *s, int layer);
/* Whether a and b (both parsed by dg_schedule_parse, so zeroed past their items) differ at most in
 * their anchors: a refresh=step policy (and dense) acts the same under both. */
bool dg_schedule_same_but_anchors(const dg_schedule *a, const dg_schedule *b);
/* Whether s fits a denoising loop of steps steps through a model of layers layers (either <= 0:
 * not known, not checked): warm-up below the step count, given anchors and dense layers that
 * exist. 0, or -1 with the problem in why[size] (no report: the caller names the input). */
int dg_schedule_check_loop(const dg_schedule *s, int steps, int layers, char *why, size_t size);
/* Whether s fits the steps and layers a trace stored (step_index[nsteps], layer_index[nlayers]): warm-up not past every stored step, given anchors and dense layers stored.
 * 0, or -1 with why[size] = "warmup=5 covers every step of the trace (its steps: 0..2), so no policy
 * would be sparse", "anchor step 9 is not in the trace (its steps: 0..3)" or "dense layer 99 is not
 * in the trace (its layers: 0,1)" (no report: the caller names the trace). The one rule of `dsgap
 * replay` and of every trace x schedule of an experiment (`dsgap run`). */
int dg_schedule_check_trace(const dg_schedule *s, const int *step_index, int nsteps, const int *layer_index,
			    int nlayers, char *why, size_t size);
/* A step outside a given sparse_steps window (the output dense there). */
bool dg_schedule_dense_step(const dg_schedule *s, int step);

#endif
