/*
 * policy.h: a sparse-attention policy as a point in a space of orthogonal switches (docs/spec.md §3),
 * parsed from a spec that starts at a named preset (presets.h), and the schedule.
 *
 * Policy spec grammar (the --policies list is comma-separated, so specs never hold commas):
 *   NAME[/key=value]...     e.g.  mc-sparse   oracle-tile/group=tile3d   mc-sparse/budget=topp:0.9
 *   custom/group=pca/kv=token/score=exact/residual=cached/refresh=anchor/sinks=0-256
 * keys: group=raster|tile3d|pca|query|kmeans|voxel  kv=token|block
 *       score=exact|pooled|antidiag|sparge|centroid  mask=none|radial|sta|window
 *       approx=none|pisa  budget=topk|topp:P|matched  sinks=A-B  residual=none|cached  refresh=anchor|step
 *       peer parameters (peers.h): theta= stride= qc= kc= minkc= decay= window= block=
 *       cache storage (cache_store.h, issue 21): residual_dtype=fp32|bf16|fp8 (needs
 *       residual=cached)  keys=list|bitmap (needs kv=token)  cfg_meta=own|shared (the closed loop's
 *       unconditional CFG pass takes the conditional pass's groups and key lists; needs
 *       refresh=anchor; one stream in the replay: no effect there)
 *       staleness (issue 50): fresh=groups|keys|residual, combinable as fresh=groups+keys (needs
 *       refresh=anchor): that cached component is remade at every step past the anchor while
 *       the others stay at the anchor (policy_run.h says how); groups and keys need the shared
 *       metadata path (no peer), residual needs residual=cached, groups needs budget=topk
 * With budget=topk the density comes from --density; topp ignores it (one run per density still).
 * budget=matched (peer presets only): the peer's own knob (top-p, decay, window) is calibrated per
 * unit so that its computed density is --density's (peers.h); top-k peers (chipmunk, pisa) run topk.
 *
 * The peers of docs/spec.md §3 are presets over these switches (peers.h says what each one computes,
 * its published defaults and its deviations): svg2 (group=kmeans, score=centroid, topp:0.9),
 * spargeattn (score=sparge, topp:0.98), xattention (score=antidiag, topp:0.9), radial (mask=radial),
 * sta (mask=sta), ditfastattn (mask=window, residual=cached), chipmunk (group=voxel, exact
 * column sums, residual=cached) and pisa (approx=pisa). Their metadata comes from peers.c, except
 * chipmunk's, which is the shared exact-score path on its voxel groups.
 */
#ifndef DG_POLICY_H
#define DG_POLICY_H

#include <stdbool.h>

typedef enum { DG_GROUP_RASTER, DG_GROUP_TILE3D, DG_GROUP_PCA, DG_GROUP_QUERY, DG_GROUP_KMEANS,
	       DG_GROUP_VOXEL, DG_GROUP_COUNT } dg_group_kind;
typedef enum { DG_KV_TOKEN, DG_KV_BLOCK, DG_KV_COUNT } dg_kv_kind;
typedef enum { DG_SCORE_EXACT, DG_SCORE_POOLED, DG_SCORE_ANTIDIAG, DG_SCORE_SPARGE, DG_SCORE_CENTROID,
	       DG_SCORE_COUNT } dg_score_kind;
typedef enum { DG_MASK_NONE, DG_MASK_RADIAL, DG_MASK_STA, DG_MASK_WINDOW, DG_MASK_COUNT } dg_mask_kind;
typedef enum { DG_APPROX_NONE, DG_APPROX_PISA, DG_APPROX_COUNT } dg_approx_kind;
typedef enum { DG_BUDGET_TOPK, DG_BUDGET_TOPP, DG_BUDGET_COUNT } dg_budget_kind;
typedef enum { DG_RESIDUAL_NONE, DG_RESIDUAL_CACHED, DG_RESIDUAL_COUNT } dg_residual_kind;
typedef enum { DG_REFRESH_ANCHOR, DG_REFRESH_STEP, DG_REFRESH_COUNT } dg_refresh_kind;
typedef enum { DG_RESDTYPE_FP32, DG_RESDTYPE_BF16, DG_RESDTYPE_FP8, DG_RESDTYPE_COUNT } dg_resdtype;
typedef enum { DG_KEYS_LIST, DG_KEYS_BITMAP, DG_KEYS_COUNT } dg_keys_kind;
typedef enum { DG_CFG_META_OWN, DG_CFG_META_SHARED, DG_CFG_META_COUNT } dg_cfg_meta;
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
} dg_policy;

/* Whether the policy's metadata is made by peers.c (dg_peer_metadata) rather than the shared
 * grouping / exact / pooled / select path. */
bool dg_policy_is_peer(const dg_policy *p);

/* Parse a spec into p. Reports "unknown policy 'x' (known: ...)" or the bad switch; returns -1. */
int dg_policy_parse(const char *spec, dg_policy *p);

#define DG_SCHEDULE_MAX 256

/*
 * When policies act. Steps and layers are the trace's own indices (/step_index, /layer_index).
 *   warmup=W        steps < W give the dense output
 *   anchors=a,b     steps where refresh=anchor policies make their metadata (output dense there);
 *                   default: the last stored step < W, else the first stored step
 *   dense_layers=.. layers that always give the dense output
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
	bool sparse_window;            /* sparse_steps given: [sparse_lo, sparse_hi] */
	int sparse_lo, sparse_hi;
	int nsparse_layers;            /* > 0: sparse_layers given */
	int sparse_layers[DG_SCHEDULE_MAX];
} dg_schedule;

int dg_schedule_parse(const char *s, dg_schedule *out);
bool dg_schedule_is_anchor(const dg_schedule *s, int step);
/* Resolve the anchors against the steps that exist: step_index[nsteps] (a trace's own indices,
 * ascending), or steps 0 .. nsteps-1 of a denoising loop when step_index is NULL (nsteps INT_MAX
 * where the loop's length is not known). Given anchors must be
 * among them; by default the anchor is the last step before the end of warm-up, else the first step
 * (MC-Sparse: step W-1). Returns -1, or the position in s->anchors of the first given anchor that
 * is not a step (the caller reports it). */
int dg_schedule_resolve_anchors(dg_schedule *s, const int *step_index, int nsteps);
/* A layer whose output is always dense: in dense_layers, or not in a given sparse_layers. */
bool dg_schedule_dense_layer(const dg_schedule *s, int layer);
/* A step outside a given sparse_steps window (the output dense there). */
bool dg_schedule_dense_step(const dg_schedule *s, int step);

#endif
