/*
 * backend_gpu.c: the GPU backend of the policies (backend.h) over the kernels of kernels/.
 * Built only with CUDA (DG_HAVE_CUDA); without it dg_backend_gpu says so and returns NULL.
 *
 * Everything runs in order on one stream and the host waits only where it needs a result: the
 * dense time, metrics, attention times asked for, and the key counts of a selection whose counts
 * are not known up front (top-p, block), read when first needed. The one exception is the PCA
 * groupings of the units hinted at (prefetch_groups): they run ahead on a second, high-priority
 * stream, all hinted units in one batched call (its chain of small kernels is latency bound, so
 * twelve heads cost little more than one), overlapping whatever runs meanwhile, and are joined by
 * an event when groups() takes one. Device loads (load_device) and outputs (output_device) are
 * ordered against the DiT op table's default stream by events, without waiting on the host. The
 * DiT's sparse calls (a cached residual added in the kernel's epilogue, the output written in bf16
 * straight into the table's merged buffer) wait in a batch while their units are consecutive heads
 * of the same buffers, and go as one launch (dg_sparse_fwd_heads) when any other primitive, or
 * phases, needs the stream: one launch per site instead of one per head. Handles and the
 * kernels' scratch come from the device's stream-ordered pool (cudaMallocAsync), which keeps freed
 * memory cached.
 * A sparse output is kept with the ids of its grouping and selection, so that policies sharing a
 * selection on one unit (oracle and oracle+res, a factorial cell with and without the residual)
 * run the sparse kernel once.
 * Joint attention (a text prefix, docs/spec.md §3.7) as the CPU backend: the text queries grouped
 * first (PCA of the video rows alone, pca_joint), every selection made joint on the device
 * (joint_keys), the text rows of every output the dense pass's (text_rows); such units' sparse
 * calls are not batched (their text rows are written after the launch).
 * DiTFastAttn's window keeps its lists (shared by every selection of one (n, text, w)) for the
 * metrics, but attends through the window kernel (dg_window_fwd, batched dg_window_fwd_heads:
 * contiguous key tiles, no gather).
 */
#include "backend/backend.h"

#include "util/util.h"

const char *dg_phase_name(dg_phase p)
{
	static const char *const names[DG_PHASE_COUNT] = { "dense", "groups", "scores", "select", "attend" };
	return p >= 0 && p < DG_PHASE_COUNT ? names[p] : "?";
}

#ifdef DG_HAVE_CUDA

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "policy/attention.h"
#include "policy/cache_store.h"
#include "util/cuda_check.h"
#include "dsgap_kernels.h"
#include "policy/groups.h"

/*
 * Handles live on the device. Groupings keep their host offsets too (group sizes count the
 * computed pairs), selections their host offsets once known; everything the kernels read is on the
 * device. ids (unique per backend) key the kept sparse output.
 */
/* --cache-offload (park, fetch): where a cached handle's bytes are */
typedef struct {
	void *host;   /* pinned copy (cudaHostAlloc), or NULL: never parked */
	size_t bytes; /* of host */
	bool dirty;   /* the device copy changed after host was written */
	bool parked;  /* no device copy: host is the one */
	long seq;     /* the fetch batch that brings the device copy (backend's off.seq numbering) */
} parking;

struct dg_bgroups {
	dg_groups g;         /* host: perm and off (perm only where built on the host) */
	int32_t *perm, *off; /* device */
	int text_groups;     /* joint attention: its first groups are the text queries' (text_groups_of) */
	long id;
};
struct dg_bscores {
	int rows, cols;
	float *s;                /* device (rows, cols) */
	struct dg_bscores *blocks; /* exact token scores: their block sums, made in the same pass */
	int owned;
};
struct dg_bsel {
	int ngroups;
	bool hoff_known; /* hoff filled (else read from off when first needed) */
	int64_t *hoff;   /* host (ngroups+1) */
	int64_t *off;    /* device (ngroups+1) */
	int32_t *idx;    /* device; NULL once compact (keys=bitmap) */
	uint32_t *bits;  /* keys=bitmap: device (ngroups, dg_bitmap_words(n)) after compact, else NULL */
	bool compact;    /* bits is the storage (idx and bits are both NULL while parked) */
	int n;           /* keys the bitmaps cover */
	long id;
	parking pk;      /* of idx or bits */
	struct shared_lists *shared; /* off and idx are its (never parked, compacted or freed here), or NULL */
	long made;       /* > 0: made on side as selection `made` of made_ahead (sel_ready), else on stream */
};
struct dg_bvec {
	void *x;         /* device: dg_res_bytes(t, n, d), stored as t says (cache_store.h); NULL parked */
	dg_resdtype t;
	parking pk;
};

#define OFF_RING 8    /* fetch batches whose events are kept (a later one implies an earlier) */
#define OFF_PAIRS 1024 /* timed event pairs between two reads of the offload's times (~3 a site) */

#define PHASE_MAX 64 /* event pairs recorded between two reads of the phase times */
#define MADE_RING 16 /* selections made on side whose events are kept (a later one implies an earlier) */
#define MASKS_KEPT 4 /* static masks kept on the device (gpu_peer_static) */

/* a static mask's metadata on the device (radial, sta: dg_peer_static_key) */
typedef struct {
	dg_peer_mask_key key;
	dg_groups g;          /* host perm and off */
	int64_t *hoff;        /* host list offsets (ngroups + 1) */
	int32_t *perm, *off;  /* device groups */
	int64_t *soff;        /* device list offsets (ngroups + 1) */
	int32_t *idx;         /* device keys */
} static_mask;

/* DiTFastAttn's window lists on the device (gpu_peer_window): a function of (n, text, w) alone, so
 * one copy serves every selection made from them; freed when the last one is (refs) */
typedef struct shared_lists {
	int n, text, w, refs;
	int64_t *off;         /* device list offsets (n + 1) */
	int32_t *idx;         /* device keys */
	struct shared_lists *next;
} shared_lists;

typedef struct {
	const float *q, *k, *v;  /* host unit (caller's buffers), for the host twins */
	uint16_t *hq;            /* pinned bf16 staging (3, n, d) */
	uint16_t *bq, *bk, *bv;  /* device bf16 (n, d): the unit as loaded by load or load_device */
	const uint16_t *dq, *dk, *dv; /* the loaded unit: bq.. or the caller's bf16 (load_device_bf16) */
	float *o_ref, *lse, *out, *o_sp, *mass; /* device */
	uint16_t *o16;           /* load_device_bf16's output (row stride ldo), or NULL */
	int ldo;
	long batched;            /* the unit whose sparse output waits in the batch */
	struct {                 /* sparse attends of consecutive heads waiting for one launch (flush) */
		int count, ngroups;
		bool precise;
		const uint16_t *q, *k, *v; /* the first head's; head i's are i (n, d) further */
		uint16_t *o16;             /* the first head's; head i's columns are i d further */
		int ldo;
		dg_resdtype rdt;           /* the heads' residual storage */
		const shared_lists *win;   /* DiTFastAttn's window of every head (dg_window_fwd_heads), or NULL */
		dg_sparse_head tab[DG_SPARSE_HEADS_MAX]; /* a window's: the residual alone */
	} batch;
	double *dmet;            /* device (6) */
	float *res_old, *res_new; /* device (n, d) fp32, made when first needed: a stored residual other
				   * than fp32 decoded, and a new one before its encoding */
	int32_t *dec[DG_SPARSE_HEADS_MAX]; /* keys=bitmap: lists decoded for a launch (batch slot i: dec[i]) */
	size_t dec_cap[DG_SPARSE_HEADS_MAX];
	float *h_lse;            /* host copy, for the host twin of the per-query top-p */
	int text;                /* the loaded unit's text prefix (joint attention), from groups or peer */
	bool dense_current;      /* o_ref and lse are the loaded unit's (its dense pass ran) */
	cudaStream_t stream;
	cudaEvent_t ev[2];
	cudaStream_t side;       /* high priority: the PCA groupings ahead */
	cudaEvent_t ev_legacy;   /* recorded on the default stream (the DiT op table's) to order against it */
	cudaEvent_t ev_out;      /* an output_device copy done (stream) */
	cudaEvent_t ev_ahead;    /* the groupings ahead done (side) */
	cudaEvent_t ev_join;     /* svg2's k-means of K done (side): the stream waits before its counts */
	struct {                 /* selections made on side (gpu_peer_blocks): the stream waits at first use */
		cudaEvent_t fork;          /* the stream's work so far (the scores), which side waits for */
		cudaEvent_t ev[MADE_RING]; /* selection seq done: ev[seq % MADE_RING] */
		long seq, waited;          /* the last made; the last the stream waited for */
	} made;
	long unit, next_id;      /* loads so far (every load of Q/K/V bumps it); the next handle id */
	struct {                 /* PCA groupings made ahead on side (prefetch_groups) */
		int count;       /* bg[i] is for the unit loaded from the Q buffer q[i], until loaded */
		const float **q;
		dg_bgroups **bg;
		dg_bgroups *cur; /* the loaded unit's, not yet taken by groups() */
		size_t cap;      /* units the staging below holds */
		uint16_t *hq;    /* pinned (cap, n, d): host Q converted to bf16 */
		uint16_t *dq;    /* device (cap, n, d) bf16 */
	} ahead;
	struct {                 /* o_sp and mass hold the sparse output of (groups, sel) on unit */
		long unit, groups, sel;
		bool timed;
		double seconds;
	} kept;
	bool profiling;          /* phases: events around each primitive */
	int nph;                 /* event pairs pending */
	cudaEvent_t pev[2 * PHASE_MAX];
	dg_phase pph[PHASE_MAX];
	double pacc[DG_PHASE_COUNT];
	static_mask masks[MASKS_KEPT]; /* the last static masks made (first in, first out) */
	int nmasks, next_mask;
	shared_lists *windows;   /* DiTFastAttn's window lists held by selections */
	struct {                 /* --cache-offload (park, fetch), set up by the first call */
		bool on;
		cudaStream_t copy;
		cudaEvent_t main;            /* the compute stream's work so far (park's write-backs wait) */
		cudaEvent_t batch[OFF_RING]; /* fetch batch seq done: batch[seq % OFF_RING] */
		long seq, waited;            /* the last fetch batch; the last one the compute stream waited for */
		int np;                      /* timed pairs pending: copy-stream busy or compute-stream wait */
		cudaEvent_t pev[2 * OFF_PAIRS];
		bool pwait[OFF_PAIRS];
		dg_offload_stats st;
	} off;
} gpu;

static void flush(dg_backend *be);
static const int64_t *sel_hoff(gpu *g, dg_bsel *s);
static void vec_resident(dg_backend *be, dg_bvec *v);
static void sel_resident(dg_backend *be, dg_bsel *s);
static void sel_ready(gpu *g, const dg_bsel *s);
static void settle(gpu *g, parking *pk);
static void unpin(gpu *g, parking *pk);
static void gpu_vec_free(dg_backend *be, dg_bvec *v);
static void gpu_sel_free(dg_backend *be, dg_bsel *s);

/* device memory from the stream-ordered pool, in the order of stream st (dmalloc: the main
 * stream), freed in the order of the main stream */
static void *dmalloc_on(cudaStream_t st, size_t bytes)
{
	void *p;
	CUDA_CHECK(cudaMallocAsync(&p, bytes ? bytes : 16, st));
	return p;
}

static void *dmalloc(gpu *g, size_t bytes)
{
	return dmalloc_on(g->stream, bytes);
}

static void dfree(gpu *g, void *p)
{
	if (p)
		CUDA_CHECK(cudaFreeAsync(p, g->stream));
}

/* here rather than with the other handles' frees: a load drops an unconsumed grouping ahead */
static void gpu_groups_free(dg_backend *be, dg_bgroups *bg)
{
	if (!bg)
		return;
	flush(be);
	dg_groups_free(&bg->g);
	dfree(be->impl, bg->perm);
	dfree(be->impl, bg->off);
	free(bg);
}

/* phase accounting (phases): an event pair around a primitive's work on stream st */
static void phase_begin_on(gpu *g, cudaStream_t st)
{
	if (g->profiling)
		CUDA_CHECK(cudaEventRecord(g->pev[2 * g->nph], st));
}

static void phase_begin(gpu *g)
{
	phase_begin_on(g, g->stream);
}

static void phases_collect(gpu *g)
{
	CUDA_CHECK(cudaStreamSynchronize(g->side));
	CUDA_CHECK(cudaStreamSynchronize(g->stream));
	for (int i = 0; i < g->nph; i++) {
		float ms;
		CUDA_CHECK(cudaEventElapsedTime(&ms, g->pev[2 * i], g->pev[2 * i + 1]));
		g->pacc[g->pph[i]] += ms * 1e-3;
	}
	g->nph = 0;
}

static void phase_end_on(gpu *g, cudaStream_t st, dg_phase ph)
{
	if (!g->profiling)
		return;
	CUDA_CHECK(cudaEventRecord(g->pev[2 * g->nph + 1], st));
	g->pph[g->nph++] = ph;
	if (g->nph == PHASE_MAX)
		phases_collect(g);
}

static void phase_end(gpu *g, dg_phase ph)
{
	phase_end_on(g, g->stream, ph);
}

static void gpu_phases(dg_backend *be, double s[DG_PHASE_COUNT])
{
	gpu *g = be->impl;
	flush(be);
	if (!s) {
		CUDA_CHECK(cudaStreamSynchronize(g->side));
		CUDA_CHECK(cudaStreamSynchronize(g->stream));
		return;
	}
	if (!g->profiling) {
		for (int i = 0; i < 2 * PHASE_MAX; i++)
			CUDA_CHECK(cudaEventCreate(&g->pev[i]));
		g->profiling = true;
	}
	phases_collect(g);
	for (int p = 0; p < DG_PHASE_COUNT; p++) {
		s[p] = g->pacc[p];
		g->pacc[p] = 0;
	}
}

/* the batched sparse attends in one launch, then the DiT op table's stream waits for it */
static void flush(dg_backend *be)
{
	gpu *g = be->impl;
	if (!g->batch.count)
		return;
	phase_begin(g);
	if (g->batch.win) {
		const void *res[DG_SPARSE_HEADS_MAX];
		for (int i = 0; i < g->batch.count; i++)
			res[i] = g->batch.tab[i].residual;
		KERNEL_CHECK(dg_window_fwd_heads(g->batch.q, g->batch.k, g->batch.v, g->batch.count, be->n, be->d,
						 g->batch.win->text, g->batch.win->w, res, g->batch.tab[0].residual_dtype,
						 g->batch.o16, g->batch.ldo, g->batch.precise, (dg_stream)g->stream));
	} else {
		KERNEL_CHECK(dg_sparse_fwd_heads(g->batch.q, g->batch.k, g->batch.v, g->batch.count, be->n, be->d,
						 g->batch.tab, g->batch.ngroups, g->batch.o16, g->batch.ldo, g->batch.precise,
						 (dg_stream)g->stream));
	}
	phase_end(g, DG_PHASE_ATTEND);
	CUDA_CHECK(cudaEventRecord(g->ev_out, g->stream));
	CUDA_CHECK(cudaStreamWaitEvent(0, g->ev_out, 0));
	g->batch.count = 0;
}

/* the DG_RES_* code of a storage (kernels/dsgap_kernels.h) */
static int res_code(dg_resdtype t)
{
	return t == DG_RESDTYPE_BF16 ? DG_RES_BF16 : t == DG_RESDTYPE_FP8 ? DG_RES_FP8 : DG_RES_F32;
}

/* the key lists the sparse kernel reads: the selection's own, or (keys=bitmap) its bitmaps decoded into
 * the scratch of launch slot `slot` (a batched launch's head; 0 otherwise), in stream order: the slot
 * is reused only after the launch that read it (flush) */
static const int32_t *sel_keys(dg_backend *be, const dg_bsel *csel, int slot)
{
	gpu *g = be->impl;
	dg_bsel *sel = (dg_bsel *)csel;
	sel_resident(be, sel);
	if (!sel->bits)
		return sel->idx;
	size_t need = (size_t)sel_hoff(g, sel)[sel->ngroups] * 4;
	if (g->dec_cap[slot] < need) {
		dfree(g, g->dec[slot]);
		g->dec[slot] = dmalloc(g, need);
		g->dec_cap[slot] = need;
	}
	KERNEL_CHECK(dg_bitmap_to_keys(sel->bits, sel->off, sel->ngroups, sel->n, g->dec[slot], (dg_stream)g->stream));
	return g->dec[slot];
}

/* the loaded unit's sparse attention with its cached residual into o16, joining the batch when it
 * is the next head of the batch's buffers (and, DiTFastAttn's window, of the batch's window) */
static void batch_add(dg_backend *be, const dg_bgroups *bg, const dg_bsel *sel, const dg_bvec *residual)
{
	gpu *g = be->impl;
	size_t hs = (size_t)be->n * be->d;
	int c = g->batch.count;
	bool next = c < DG_SPARSE_HEADS_MAX && g->batch.ngroups == bg->g.ngroups && g->batch.precise == be->precise &&
		    g->batch.ldo == g->ldo && g->dq == g->batch.q + c * hs && g->dk == g->batch.k + c * hs &&
		    g->dv == g->batch.v + c * hs && g->o16 == g->batch.o16 + (size_t)c * be->d &&
		    g->batch.rdt == residual->t && g->batch.win == sel->shared;
	if (c && !next)
		flush(be);
	if (!g->batch.count) {
		g->batch.ngroups = bg->g.ngroups, g->batch.precise = be->precise;
		g->batch.q = g->dq, g->batch.k = g->dk, g->batch.v = g->dv;
		g->batch.o16 = g->o16, g->batch.ldo = g->ldo;
		g->batch.rdt = residual->t;
		g->batch.win = sel->shared;
	}
	const int32_t *keys = sel->shared ? NULL : sel_keys(be, sel, g->batch.count);
	g->batch.tab[g->batch.count++] = (dg_sparse_head){ bg->perm, bg->off, sel->off, keys, residual->x,
							   res_code(residual->t) };
	g->batched = g->unit;
}

/* a grouping made ahead and not taken: freed in the main stream's order, after the side's work */
static void ahead_free(dg_backend *be, dg_bgroups *bg)
{
	gpu *g = be->impl;
	if (!bg)
		return;
	flush(be);
	CUDA_CHECK(cudaStreamWaitEvent(g->stream, g->ev_ahead, 0));
	gpu_groups_free(be, bg);
}

/* a new unit, loaded from the Q buffer q: the last unit's grouping ahead, if not taken, is dropped;
 * a grouping made ahead for q becomes the unit's */
static void unit_begin(dg_backend *be, const float *q)
{
	gpu *g = be->impl;
	ahead_free(be, g->ahead.cur);
	g->ahead.cur = NULL;
	g->unit++; /* a kept sparse output belongs to the previous unit */
	g->o16 = NULL;
	g->dense_current = false;
	for (int i = 0; i < g->ahead.count; i++)
		if (g->ahead.q[i] == q) {
			g->ahead.cur = g->ahead.bg[i];
			g->ahead.q[i] = NULL;
			g->ahead.bg[i] = NULL;
			break;
		}
}

static void gpu_load(dg_backend *be, const float *q, const float *k, const float *v)
{
	gpu *g = be->impl;
	size_t nd = (size_t)be->n * be->d;
	flush(be);
	unit_begin(be, q);
	g->q = q, g->k = k, g->v = v;
	const float *src[3] = { q, k, v };
	uint16_t *dst[3] = { g->bq, g->bk, g->bv };
	g->dq = g->bq, g->dk = g->bk, g->dv = g->bv;
	CUDA_CHECK(cudaStreamSynchronize(g->stream)); /* the staging buffer may still be in flight */
	for (int t = 0; t < 3; t++) {
		uint16_t *h = g->hq + t * nd;
		for (size_t e = 0; e < nd; e++)
			h[e] = dg_f32_to_bf16(src[t][e]); /* exact: trace values are bf16 */
		CUDA_CHECK(cudaMemcpyAsync(dst[t], h, nd * 2, cudaMemcpyHostToDevice, g->stream));
	}
}

/* Q/K/V already on the device (the DiT engine's fp32 buffers, written on the default stream): no
 * host copy, so the host twins have no unit (dit_attn.c loads from the host for the policies that
 * need one); the conversions wait for the default stream's work by an event */
static void gpu_load_device(dg_backend *be, const float *q, const float *k, const float *v)
{
	gpu *g = be->impl;
	size_t nd = (size_t)be->n * be->d;
	flush(be);
	unit_begin(be, q);
	g->q = g->k = g->v = NULL;
	CUDA_CHECK(cudaEventRecord(g->ev_legacy, 0));
	CUDA_CHECK(cudaStreamWaitEvent(g->stream, g->ev_legacy, 0));
	KERNEL_CHECK(dg_to_bf16(q, g->bq, nd, (dg_stream)g->stream));
	KERNEL_CHECK(dg_to_bf16(k, g->bk, nd, (dg_stream)g->stream));
	KERNEL_CHECK(dg_to_bf16(v, g->bv, nd, (dg_stream)g->stream));
	g->dq = g->bq, g->dk = g->bk, g->dv = g->bv;
}

/* as load_device, the bf16 copies read in place (no conversion pass) and the output going to o16;
 * the caller keeps them unchanged until its default stream has waited for this unit's output */
static void gpu_load_device_bf16(dg_backend *be, const float *q, const uint16_t *q16, const uint16_t *k16,
				 const uint16_t *v16, uint16_t *o16, int ldo, bool order)
{
	gpu *g = be->impl;
	unit_begin(be, q);
	g->q = g->k = g->v = NULL;
	if (order) {
		CUDA_CHECK(cudaEventRecord(g->ev_legacy, 0));
		CUDA_CHECK(cudaStreamWaitEvent(g->stream, g->ev_legacy, 0));
	}
	g->dq = q16, g->dk = k16, g->dv = v16;
	g->o16 = o16, g->ldo = ldo;
}

/* device time of the work enqueued between timed_begin and timed_end (which waits for it) */
static void timed_begin(gpu *g)
{
	CUDA_CHECK(cudaEventRecord(g->ev[0], g->stream));
}

static double timed_end(gpu *g)
{
	float ms;
	CUDA_CHECK(cudaEventRecord(g->ev[1], g->stream));
	CUDA_CHECK(cudaEventSynchronize(g->ev[1]));
	CUDA_CHECK(cudaEventElapsedTime(&ms, g->ev[0], g->ev[1]));
	return ms * 1e-3;
}

static double gpu_dense(dg_backend *be)
{
	gpu *g = be->impl;
	flush(be);
	timed_begin(g);
	KERNEL_CHECK(dg_flash_fwd(g->dq, g->dk, g->dv, 1, be->n, be->d, g->o_ref, NULL, g->lse, be->precise,
				  (dg_stream)g->stream));
	double s = timed_end(g);
	g->dense_current = true;
	if (g->profiling)
		g->pacc[DG_PHASE_DENSE] += s;
	CUDA_CHECK(cudaMemcpyAsync(g->h_lse, g->lse, (size_t)be->n * 4, cudaMemcpyDeviceToHost, g->stream));
	return s;
}

/* a host grouping's perm and offsets onto the device (pageable sources: staged by the copy) */
static void groups_upload(gpu *g, dg_bgroups *bg)
{
	bg->perm = dmalloc(g, (size_t)bg->g.n * 4);
	bg->off = dmalloc(g, (size_t)(bg->g.ngroups + 1) * 4);
	CUDA_CHECK(cudaMemcpyAsync(bg->perm, bg->g.perm, (size_t)bg->g.n * 4, cudaMemcpyHostToDevice, g->stream));
	CUDA_CHECK(cudaMemcpyAsync(bg->off, bg->g.off, (size_t)(bg->g.ngroups + 1) * 4, cudaMemcpyHostToDevice,
				   g->stream));
}

/* a PCA grouping's handle on stream st: leaves of exactly 128 (the last short), so the offsets are
 * known here; perm and off (device) still to be written */
static dg_bgroups *pca_handle(dg_backend *be, cudaStream_t st)
{
	gpu *g = be->impl;
	int n = be->n, ng = (n + DG_GROUP_SIZE - 1) / DG_GROUP_SIZE;
	dg_bgroups *bg = dg_calloc(1, sizeof *bg);
	bg->id = g->next_id++;
	bg->perm = dmalloc_on(st, (size_t)n * 4);
	bg->off = dmalloc_on(st, (size_t)(ng + 1) * 4);
	bg->g.n = n;
	bg->g.ngroups = ng;
	bg->g.off = dg_malloc((size_t)(ng + 1) * sizeof(int));
	for (int k = 0; k <= ng; k++)
		bg->g.off[k] = k * DG_GROUP_SIZE < n ? k * DG_GROUP_SIZE : n;
	return bg;
}

/* the hinted units' Q as bf16 into ahead.dq on side (host: converted into the pinned staging first) */
static void ahead_stage(dg_backend *be, int count, const float *const *q, const uint16_t *const *q16, bool device)
{
	gpu *g = be->impl;
	size_t nd = (size_t)be->n * be->d;
	CUDA_CHECK(cudaEventSynchronize(g->ev_ahead)); /* the last hint's staging is read */
	if (g->ahead.cap < (size_t)count) {
		if (g->ahead.hq)
			CUDA_CHECK(cudaFreeHost(g->ahead.hq));
		if (g->ahead.dq)
			CUDA_CHECK(cudaFreeAsync(g->ahead.dq, g->side));
		g->ahead.hq = NULL;
		g->ahead.dq = dmalloc_on(g->side, count * nd * 2);
		g->ahead.cap = count;
	}
	if (device) { /* written on the default stream (the DiT op table's) */
		CUDA_CHECK(cudaEventRecord(g->ev_legacy, 0));
		CUDA_CHECK(cudaStreamWaitEvent(g->side, g->ev_legacy, 0));
		for (int i = 0; i < count; i++)
			if (q16)
				CUDA_CHECK(cudaMemcpyAsync(g->ahead.dq + i * nd, q16[i], nd * 2, cudaMemcpyDeviceToDevice,
							   g->side));
			else
				KERNEL_CHECK(dg_to_bf16(q[i], g->ahead.dq + i * nd, nd, (dg_stream)g->side));
		return;
	}
	if (!g->ahead.hq)
		CUDA_CHECK(cudaMallocHost((void **)&g->ahead.hq, g->ahead.cap * nd * 2));
	for (int i = 0; i < count; i++) {
		uint16_t *h = g->ahead.hq + i * nd;
		for (size_t e = 0; e < nd; e++)
			h[e] = dg_f32_to_bf16(q[i][e]); /* exact: trace values are bf16 */
		CUDA_CHECK(cudaMemcpyAsync(g->ahead.dq + i * nd, h, nd * 2, cudaMemcpyHostToDevice, g->side));
	}
}

/* the PCA groupings of the hinted units, all in one batched call on side (accounted as the groups
 * phase where phases are on), each then copied into its own handle */
static void gpu_prefetch_groups(dg_backend *be, dg_group_kind kind, int count, const float *const *q,
				const uint16_t *const *q16, bool device)
{
	gpu *g = be->impl;
	flush(be);
	if (kind != DG_GROUP_PCA || count < 1)
		return;
	for (int i = 0; i < g->ahead.count; i++)
		ahead_free(be, g->ahead.bg[i]);
	g->ahead.q = dg_realloc(g->ahead.q, (size_t)count * sizeof *g->ahead.q);
	g->ahead.bg = dg_realloc(g->ahead.bg, (size_t)count * sizeof *g->ahead.bg);
	g->ahead.count = count;
	ahead_stage(be, count, q, q16, device);
	int n = be->n, ng = (n + DG_GROUP_SIZE - 1) / DG_GROUP_SIZE;
	phase_begin_on(g, g->side);
	int32_t *perm = dmalloc_on(g->side, (size_t)count * n * 4), *off = dmalloc_on(g->side, (size_t)(ng + 1) * 4);
	KERNEL_CHECK(dg_pca_groups(g->ahead.dq, count, n, be->d, perm, off, (dg_stream)g->side));
	for (int i = 0; i < count; i++) {
		dg_bgroups *bg = pca_handle(be, g->side);
		CUDA_CHECK(cudaMemcpyAsync(bg->perm, perm + (size_t)i * n, (size_t)n * 4, cudaMemcpyDeviceToDevice,
					   g->side));
		CUDA_CHECK(cudaMemcpyAsync(bg->off, off, (size_t)(ng + 1) * 4, cudaMemcpyDeviceToDevice, g->side));
		g->ahead.q[i] = q[i];
		g->ahead.bg[i] = bg;
	}
	CUDA_CHECK(cudaFreeAsync(perm, g->side));
	CUDA_CHECK(cudaFreeAsync(off, g->side));
	phase_end_on(g, g->side, DG_PHASE_GROUPS);
	CUDA_CHECK(cudaEventRecord(g->ev_ahead, g->side));
}

/* joint attention's groups (docs/spec.md §3.7): how many of a grouping's first groups hold the text
 * queries (they come first, positions [0, text) in order, never mixed with video queries) */
static int text_groups_of(const dg_groups *g, int text)
{
	int k = 0;
	while (k < g->ngroups && g->off[k] < text)
		k++;
	return k;
}

/* joint attention's PCA grouping (groups.c joint_groups): the text queries in runs of 128, then the
 * PCA leaves of the video queries alone (dg_pca_groups on rows [text, n), put behind the text) */
static dg_bgroups *pca_joint(dg_backend *be, int text)
{
	gpu *g = be->impl;
	int n = be->n, nv = n - text;
	if (nv < 1) {
		dg_error("grouping: %d text tokens leave no video query of %d", text, n);
		return NULL;
	}
	int ntext = (text + DG_GROUP_SIZE - 1) / DG_GROUP_SIZE, nvg = (nv + DG_GROUP_SIZE - 1) / DG_GROUP_SIZE;
	dg_bgroups *bg = dg_calloc(1, sizeof *bg);
	bg->id = g->next_id++;
	bg->g.n = n;
	bg->g.ngroups = ntext + nvg;
	bg->g.off = dg_malloc((size_t)(ntext + nvg + 1) * sizeof(int));
	for (int k = 0; k < ntext; k++)
		bg->g.off[k] = k * DG_GROUP_SIZE;
	for (int k = 0; k <= nvg; k++)
		bg->g.off[ntext + k] = text + (k * DG_GROUP_SIZE < nv ? k * DG_GROUP_SIZE : nv);
	bg->text_groups = ntext;
	bg->perm = dmalloc(g, (size_t)n * 4);
	bg->off = dmalloc(g, (size_t)(bg->g.ngroups + 1) * 4);
	int32_t *vperm = dmalloc(g, (size_t)nv * 4), *voff = dmalloc(g, (size_t)(nvg + 1) * 4);
	phase_begin(g);
	KERNEL_CHECK(dg_pca_groups(g->dq + (size_t)text * be->d, 1, nv, be->d, vperm, voff, (dg_stream)g->stream));
	KERNEL_CHECK(dg_joint_perm(vperm, n, text, bg->perm, (dg_stream)g->stream));
	phase_end(g, DG_PHASE_GROUPS);
	CUDA_CHECK(cudaMemcpyAsync(bg->off, bg->g.off, (size_t)(bg->g.ngroups + 1) * 4, cudaMemcpyHostToDevice,
				   g->stream));
	dfree(g, vperm);
	dfree(g, voff);
	return bg;
}

static dg_bgroups *gpu_groups(dg_backend *be, dg_group_kind kind, const int grid[3], int text)
{
	gpu *g = be->impl;
	flush(be);
	g->text = text;
	if (kind == DG_GROUP_PCA && text > 0) /* a grouping made ahead is of the whole sequence: unused */
		return pca_joint(be, text);
	if (kind == DG_GROUP_PCA && g->ahead.cur) { /* made ahead: the main stream waits for it */
		dg_bgroups *bg = g->ahead.cur;
		CUDA_CHECK(cudaStreamWaitEvent(g->stream, g->ev_ahead, 0));
		g->ahead.cur = NULL;
		return bg;
	}
	if (kind == DG_GROUP_PCA) {
		phase_begin(g);
		dg_bgroups *bg = pca_handle(be, g->stream);
		KERNEL_CHECK(dg_pca_groups(g->dq, 1, be->n, be->d, bg->perm, bg->off, (dg_stream)g->stream));
		phase_end(g, DG_PHASE_GROUPS);
		return bg;
	}
	int n = be->n;
	dg_bgroups *bg = dg_calloc(1, sizeof *bg);
	bg->id = g->next_id++;
	if (dg_groups_build(&bg->g, kind, g->q, n, be->d, grid, text)) {
		free(bg);
		return NULL;
	}
	bg->text_groups = text_groups_of(&bg->g, text);
	groups_upload(g, bg);
	return bg;
}

static dg_bscores *scores_new(gpu *g, int rows, int cols)
{
	dg_bscores *s = dg_calloc(1, sizeof *s);
	s->rows = rows, s->cols = cols, s->owned = 1;
	s->s = dmalloc(g, (size_t)rows * cols * 4);
	return s;
}

static dg_bsel *sel_new(gpu *g, int ngroups)
{
	dg_bsel *s = dg_calloc(1, sizeof *s);
	s->ngroups = ngroups;
	s->id = g->next_id++;
	s->hoff = dg_malloc((size_t)(ngroups + 1) * 8);
	s->off = dmalloc(g, (size_t)(ngroups + 1) * 8);
	return s;
}

/* ngroups lists of cnt keys each: host offsets made here, device offsets by a kernel (fill; else
 * the selection kernel writes them), no transfer */
static dg_bsel *sel_fixed(gpu *g, int ngroups, int64_t cnt, bool fill)
{
	dg_bsel *s = sel_new(g, ngroups);
	for (int i = 0; i <= ngroups; i++)
		s->hoff[i] = i * cnt;
	s->hoff_known = true;
	if (fill)
		KERNEL_CHECK(dg_fixed_offsets(s->off, ngroups, cnt, (dg_stream)g->stream));
	s->idx = dmalloc(g, (size_t)(ngroups * cnt) * 4);
	return s;
}

/* a selection made on side usable on the stream: its event waited for there once */
static void sel_ready(gpu *g, const dg_bsel *s)
{
	if (s->made <= g->made.waited)
		return;
	CUDA_CHECK(cudaStreamWaitEvent(g->stream, g->made.ev[s->made % MADE_RING], 0));
	g->made.waited = s->made;
}

/* the host offsets of a selection, read from the device the first time they are needed */
static const int64_t *sel_hoff(gpu *g, dg_bsel *s)
{
	if (!s->hoff_known) { /* a selection made on side: read there (the stream's later work not waited for) */
		cudaStream_t st = s->made ? g->side : g->stream;
		CUDA_CHECK(cudaMemcpyAsync(s->hoff, s->off, (size_t)(s->ngroups + 1) * 8, cudaMemcpyDeviceToHost, st));
		CUDA_CHECK(cudaStreamSynchronize(st));
		s->hoff_known = true;
	}
	return s->hoff;
}

/* a host selection (the twin's) onto the device */
static dg_bsel *sel_from_host(gpu *g, const dg_selection *h)
{
	dg_bsel *s = sel_new(g, h->ngroups);
	int64_t total = h->off[h->ngroups];
	memcpy(s->hoff, h->off, (size_t)(h->ngroups + 1) * 8);
	s->hoff_known = true;
	s->idx = dmalloc(g, (size_t)total * 4);
	CUDA_CHECK(cudaMemcpyAsync(s->off, h->off, (size_t)(h->ngroups + 1) * 8, cudaMemcpyHostToDevice, g->stream));
	CUDA_CHECK(cudaMemcpyAsync(s->idx, h->idx, (size_t)total * 4, cudaMemcpyHostToDevice, g->stream));
	return s;
}

/* joint attention (docs/spec.md §3.7, dg_joint_selection): selection s, of a grouping whose first
 * text_groups groups are the text queries and with room for cap keys, replaced by its joint lists:
 * every key for the text groups, the text keys [0, text) added to the video groups' (dg_joint_keys).
 * No-op without text. */
static dg_bsel *joint_keys(dg_backend *be, dg_bsel *s, int text_groups, int64_t cap)
{
	gpu *g = be->impl;
	if (g->text <= 0)
		return s;
	int n = be->n, ng = s->ngroups, forced = g->text < n ? g->text : n;
	dg_bsel *j = sel_new(g, ng);
	j->idx = dmalloc(g, (size_t)((int64_t)text_groups * n + (int64_t)(ng - text_groups) * forced + cap) * 4);
	KERNEL_CHECK(dg_joint_keys(s->off, s->idx, ng, n, text_groups, forced, j->off, j->idx, (dg_stream)g->stream));
	gpu_sel_free(be, s);
	return j;
}

/* per-query selections by the host twin, from the exact probability rows (top-p, kv=block,
 * mixed sinks) */
static void query_select_host(dg_backend *be, const dg_budget *const *qb, dg_bsel **qsel, int nq)
{
	gpu *g = be->impl;
	CUDA_CHECK(cudaStreamSynchronize(g->stream)); /* h_lse */
	dg_query_select *qs = dg_query_select_new(be->n, qb, nq);
	dg_scores_exact(g->q, g->k, g->h_lse, be->n, be->d, NULL, 0, dg_query_select_row, qs);
	dg_selection *h = dg_malloc((size_t)nq * sizeof *h);
	dg_query_select_finish(qs, h);
	for (int b = 0; b < nq; b++) {
		dg_joint_selection(NULL, &h[b], be->n, g->text, 1); /* query r is group r */
		qsel[b] = sel_from_host(g, &h[b]);
		dg_selection_free(&h[b]);
	}
	free(h);
}

static void gpu_exact(dg_backend *be, dg_bgroups *const *groups, dg_bscores **scores, int nacc,
		      const dg_budget *const *qb_in, dg_bsel **qsel, int nq)
{
	gpu *g = be->impl;
	flush(be);
	int n = be->n, nb = (n + DG_KV_BLOCK_SIZE - 1) / DG_KV_BLOCK_SIZE;
	phase_begin(g);
	for (int a = 0; a < nacc; a++) {
		scores[a] = scores_new(g, groups[a]->g.ngroups, n);
		scores[a]->blocks = scores_new(g, groups[a]->g.ngroups, nb);
		KERNEL_CHECK(dg_exact_scores(g->dq, g->dk, g->lse, n, be->d, groups[a]->perm, groups[a]->off,
					     groups[a]->g.ngroups, scores[a]->s, scores[a]->blocks->s,
					     (dg_stream)g->stream));
	}
	if (!nq) {
		phase_end(g, DG_PHASE_SCORES);
		return;
	}
	/* the budgets with the text keys outside the ranking (dg_joint_budget), as the CPU twin's */
	dg_budget *jb = dg_malloc((size_t)nq * sizeof *jb);
	const dg_budget **qb = dg_malloc((size_t)nq * sizeof *qb);
	for (int b = 0; b < nq; b++)
		jb[b] = dg_joint_budget(qb_in[b], n, g->text), qb[b] = &jb[b];
	/* the oracle's top-k on the device: every budget top-k over tokens with the same sinks */
	bool device = nq <= 8;
	for (int b = 0; b < nq; b++)
		device &= qb[b]->budget == DG_BUDGET_TOPK && qb[b]->kv == DG_KV_TOKEN &&
			  qb[b]->sink_lo == qb[0]->sink_lo && qb[b]->sink_hi == qb[0]->sink_hi;
	if (!device) {
		query_select_host(be, qb, qsel, nq);
		phase_end(g, DG_PHASE_SCORES);
		free(jb), free(qb);
		return;
	}
	int K[8];
	int32_t *rows[8];
	int64_t row[8];
	for (int b = 0; b < nq; b++) {
		K[b] = dg_topk_count(qb[b]->rho, n);
		row[b] = dg_query_topk_row(n, K[b], qb[b]->sink_lo, qb[b]->sink_hi);
		qsel[b] = sel_fixed(g, n, row[b], true);
		rows[b] = qsel[b]->idx;
	}
	KERNEL_CHECK(dg_query_topk(g->dq, g->dk, g->lse, n, be->d, nq, K, qb[0]->sink_lo, qb[0]->sink_hi,
				   rows, (dg_stream)g->stream));
	for (int b = 0; b < nq; b++) /* query r is group r: the first text groups are the text queries */
		qsel[b] = joint_keys(be, qsel[b], g->text, (int64_t)n * row[b]);
	phase_end(g, DG_PHASE_SCORES);
	free(jb), free(qb);
}

static dg_bscores *gpu_pooled(dg_backend *be, dg_bgroups *bg, dg_kv_kind kv)
{
	gpu *g = be->impl;
	flush(be);
	int cols = kv == DG_KV_BLOCK ? (be->n + DG_KV_BLOCK_SIZE - 1) / DG_KV_BLOCK_SIZE : be->n;
	dg_bscores *s = scores_new(g, bg->g.ngroups, cols);
	phase_begin(g);
	KERNEL_CHECK(dg_pooled_scores(g->dq, g->dk, be->n, be->d, bg->perm, bg->off, bg->g.ngroups,
				      kv == DG_KV_BLOCK, s->s, (dg_stream)g->stream));
	phase_end(g, DG_PHASE_SCORES);
	return s;
}

/* the block sums were made with the token scores: a view of them */
static dg_bscores *gpu_to_blocks(dg_backend *be, const dg_bscores *t)
{
	flush(be);
	dg_bscores *view = dg_malloc(sizeof *view);
	*view = *t->blocks;
	view->owned = 0;
	view->blocks = NULL;
	return view;
}

static void gpu_sel_lists(dg_backend *be, const dg_bsel *csel, dg_selection *out);

/* a grouping's host perm and offsets (dg_groups, perm downloaded where made on the device) */
static dg_groups groups_host(gpu *g, const dg_bgroups *bg)
{
	dg_groups h = { bg->g.n, bg->g.ngroups, dg_malloc((size_t)bg->g.n * sizeof(int)),
			dg_malloc((size_t)(bg->g.ngroups + 1) * sizeof(int)) };
	memcpy(h.off, bg->g.off, (size_t)(h.ngroups + 1) * sizeof(int));
	if (bg->g.perm) {
		memcpy(h.perm, bg->g.perm, (size_t)h.n * sizeof(int));
	} else {
		CUDA_CHECK(cudaMemcpyAsync(h.perm, bg->perm, (size_t)h.n * 4, cudaMemcpyDeviceToHost, g->stream));
		CUDA_CHECK(cudaStreamSynchronize(g->stream));
	}
	return h;
}

/* fresh=groups' votes (backend.h): the host twin (dg_scores_vote) on the lists and groupings brought
 * to the host, the scores uploaded */
static dg_bscores *gpu_vote(dg_backend *be, const dg_bgroups *to, const dg_bgroups *from, const dg_bsel *sel,
			    dg_kv_kind kv)
{
	gpu *g = be->impl;
	flush(be);
	int cols = kv == DG_KV_BLOCK ? (be->n + DG_KV_BLOCK_SIZE - 1) / DG_KV_BLOCK_SIZE : be->n;
	dg_groups ht = groups_host(g, to), hf = groups_host(g, from);
	dg_selection lists;
	gpu_sel_lists(be, sel, &lists);
	float *hs = dg_malloc((size_t)ht.ngroups * cols * sizeof(float)); /* (to groups, cols) */
	dg_scores_vote(&ht, &hf, &lists, be->n, kv, hs);
	dg_bscores *s = scores_new(g, ht.ngroups, cols);
	CUDA_CHECK(cudaMemcpyAsync(s->s, hs, (size_t)ht.ngroups * cols * 4, cudaMemcpyHostToDevice, g->stream));
	CUDA_CHECK(cudaStreamSynchronize(g->stream)); /* hs is pageable and freed here */
	free(hs);
	dg_selection_free(&lists);
	dg_groups_free(&ht), dg_groups_free(&hf);
	return s;
}

static dg_bsel *gpu_select(dg_backend *be, const dg_bgroups *bg, const dg_bscores *sc, const dg_budget *b_in)
{
	gpu *g = be->impl;
	flush(be);
	const dg_budget jb = dg_joint_budget(b_in, be->n, g->text), *b = &jb; /* text keys outside the ranking */
	int kv = b->kv == DG_KV_BLOCK, budget = b->budget == DG_BUDGET_TOPP, ng = bg->g.ngroups;
	int64_t cap = dg_select_keys_cap(ng, be->n, kv, budget, b->rho, b->sink_lo, b->sink_hi);
	dg_bsel *s;
	if (!kv && !budget) { /* token top-k: the same count in every group, known here */
		s = sel_fixed(g, ng, dg_query_topk_row(be->n, dg_topk_count(b->rho, be->n), b->sink_lo, b->sink_hi),
			      false);
	} else {
		s = sel_new(g, ng);
		s->idx = dmalloc(g, (size_t)cap * 4);
	}
	phase_begin(g);
	KERNEL_CHECK(dg_select_keys(sc->s, ng, be->n, kv, budget, b->rho, b->topp, b->sink_lo, b->sink_hi,
				    s->off, s->idx, cap, (dg_stream)g->stream));
	s = joint_keys(be, s, bg->text_groups, cap);
	phase_end(g, DG_PHASE_SELECT);
	return s;
}

/* metrics of the output against the dense O, with the retained mass */
static void out_metrics(dg_backend *be, dg_metrics *m)
{
	gpu *g = be->impl;
	double h[6];
	KERNEL_CHECK(dg_metrics_device(g->o_ref, g->out, (size_t)be->n * be->d, g->mass, be->n, g->dmet,
				       (dg_stream)g->stream));
	CUDA_CHECK(cudaMemcpyAsync(h, g->dmet, sizeof h, cudaMemcpyDeviceToHost, g->stream));
	CUDA_CHECK(cudaStreamSynchronize(g->stream));
	*m = (dg_metrics){ h[0], h[1], h[2], h[3], h[4], h[5] };
}

/* joint attention (backend_cpu.c text_rows): the text queries' rows of o (n, d) (every key in their
 * lists, their pairs counted) become the dense pass's rows bit for bit, whatever the blocking of the
 * sparse kernel; on a unit without a dense pass (the closed loop's reuse steps) those rows of it are
 * computed here (dg_flash_fwd_rows) */
static void text_rows(dg_backend *be, float *o)
{
	gpu *g = be->impl;
	if (g->text <= 0)
		return;
	if (g->dense_current)
		CUDA_CHECK(cudaMemcpyAsync(o, g->o_ref, (size_t)g->text * be->d * 4, cudaMemcpyDeviceToDevice, g->stream));
	else
		KERNEL_CHECK(dg_flash_fwd_rows(g->dq, g->dk, g->dv, g->text, be->n, be->d, o, NULL, be->precise,
					       (dg_stream)g->stream));
}

/* the loaded unit's dense LSE and the retained mass the sparse kernels make from it, or NULL both where
 * its dense pass did not run (the DiT loop's reuse steps and refresh=step estimates: mass then
 * unwritten, and unread) */
static const float *dense_lse(const gpu *g)
{
	return g->dense_current ? g->lse : NULL;
}

static float *mass_out(const gpu *g)
{
	return g->dense_current ? g->mass : NULL;
}

/* o = the sparse attention of (bg, sel) on the loaded unit (+ residual), with the retained mass where
 * the dense pass ran: DiTFastAttn's window (its lists are the shared window lists) by the window kernel,
 * which walks the window's key tiles without a list, any other selection by the gather kernel */
static void attend_into(dg_backend *be, const dg_bgroups *bg, const dg_bsel *sel, const dg_bvec *residual, float *o)
{
	gpu *g = be->impl;
	const void *r = residual ? residual->x : NULL;
	const int rdt = residual ? res_code(residual->t) : DG_RES_F32;
	if (sel->shared) {
		KERNEL_CHECK(dg_window_fwd(g->dq, g->dk, g->dv, 1, be->n, be->d, sel->shared->text, sel->shared->w, r, rdt,
					   dense_lse(g), o, mass_out(g), be->precise, (dg_stream)g->stream));
		return;
	}
	const int32_t *keys = sel_keys(be, sel, 0);
	KERNEL_CHECK(dg_sparse_fwd_rq(g->dq, g->dk, g->dv, 1, be->n, be->d, bg->perm, bg->off, bg->g.ngroups, sel->off,
				      keys, r, rdt, dense_lse(g), o, mass_out(g), be->precise, (dg_stream)g->stream));
}

/*
 * o_sp and mass = the sparse output without residual of (bg, sel): computed, or kept from an attend
 * of the same grouping and selection on this unit. Returns its device seconds when timed (seconds
 * asked for), else 0 (a kept output: the time measured when it was made; an untimed one is made
 * again when a time is asked for).
 */
static double sparse_out(dg_backend *be, const dg_bgroups *bg, const dg_bsel *sel, bool timed)
{
	gpu *g = be->impl;
	if (g->kept.unit == g->unit && g->kept.groups == bg->id && g->kept.sel == sel->id &&
	    (g->kept.timed || !timed))
		return g->kept.seconds;
	if (timed)
		timed_begin(g);
	attend_into(be, bg, sel, NULL, g->o_sp);
	text_rows(be, g->o_sp);
	double s = timed ? timed_end(g) : 0;
	g->kept.unit = g->unit, g->kept.groups = bg->id, g->kept.sel = sel->id;
	g->kept.timed = timed, g->kept.seconds = s;
	return s;
}

static int64_t gpu_attend(dg_backend *be, const dg_bgroups *bg, const dg_bsel *csel,
			  const dg_bvec *residual, dg_bvec **new_residual, dg_metrics *m, double *seconds)
{
	gpu *g = be->impl;
	dg_bsel *sel = (dg_bsel *)csel; /* its host offsets may be filled in */
	size_t nd = (size_t)be->n * be->d;
	if (residual)
		vec_resident(be, (dg_bvec *)residual);
	if (new_residual && *new_residual && (*new_residual)->t != be->residual_dtype) {
		gpu_vec_free(be, *new_residual);
		*new_residual = NULL;
	}
	if (new_residual && !*new_residual) {
		*new_residual = dg_calloc(1, sizeof(dg_bvec));
		(*new_residual)->t = be->residual_dtype;
		(*new_residual)->x = dmalloc(g, dg_res_bytes(res_code(be->residual_dtype), be->n, be->d));
	} else if (new_residual && (*new_residual)->pk.parked) { /* overwritten whole: no fetch */
		(*new_residual)->x = dmalloc(g, dg_res_bytes(res_code(be->residual_dtype), be->n, be->d));
		(*new_residual)->pk.parked = false;
	} else if (new_residual) {
		settle(g, &(*new_residual)->pk);
	}
	if (new_residual)
		(*new_residual)->pk.dirty = true;
	double s = 0;
	bool fused = !new_residual && !seconds && !m; /* no O_sparse of its own needed */
	if (fused && residual && g->o16 && !g->text) {
		/* batched: a site's reuse steps. Not with text rows (written after the launch), nor without a
		 * residual (then g->out: PISA's term reads it, and a per-step policy's metadata of the next
		 * head would flush the batch anyway) */
		batch_add(be, bg, sel, residual);
	} else if (fused) {
		/* out = O_sparse (+ R from the kernel's epilogue: a reuse step of a cached residual), the DiT's
		 * sparse calls: no O_sparse pass through memory, so none is kept for this unit */
		flush(be);
		phase_begin(g);
		attend_into(be, bg, sel, residual, g->out);
		text_rows(be, g->out);
		g->kept.unit = -1;
		phase_end(g, DG_PHASE_ATTEND);
	} else {
		flush(be);
		phase_begin(g);
		s = sparse_out(be, bg, sel, seconds != NULL);
		/* out = O_sparse + old residual; the new residual needs O_sparse alone. Stored other than in
		 * fp32 (cache_store.h): the old one decoded first, the new one made in fp32, then encoded */
		const float *r_old = NULL;
		float *r_new = NULL;
		if (residual && residual->t == DG_RESDTYPE_FP32) {
			r_old = residual->x;
		} else if (residual) {
			if (!g->res_old)
				g->res_old = dmalloc(g, nd * 4);
			KERNEL_CHECK(dg_residual_decode_dev(residual->x, be->n, be->d, res_code(residual->t), g->res_old,
							    (dg_stream)g->stream));
			r_old = g->res_old;
		}
		dg_bvec *rn = new_residual ? *new_residual : NULL;
		if (rn && rn->t == DG_RESDTYPE_FP32) {
			r_new = rn->x;
		} else if (rn) {
			if (!g->res_new)
				g->res_new = dmalloc(g, nd * 4);
			r_new = g->res_new;
		}
		KERNEL_CHECK(dg_residual_update(g->o_ref, g->o_sp, r_old, g->out, r_new, nd, (dg_stream)g->stream));
		if (rn && rn->t != DG_RESDTYPE_FP32)
			KERNEL_CHECK(dg_residual_encode_dev(g->res_new, be->n, be->d, res_code(rn->t), rn->x,
							    (dg_stream)g->stream));
		if (m)
			out_metrics(be, m);
		phase_end(g, DG_PHASE_ATTEND);
	}
	if (seconds)
		*seconds = s;
	const int64_t *hoff = sel_hoff(g, sel);
	int64_t pairs = 0;
	for (int grp = 0; grp < bg->g.ngroups; grp++)
		pairs += (int64_t)(bg->g.off[grp + 1] - bg->g.off[grp]) * (hoff[grp + 1] - hoff[grp]);
	return pairs;
}

/* a block peer's metadata (spargeattn, xattention, pisa, skipsoftmax; peers.h dg_peer_block_*): the
 * block scores on the device (dg_peer_scores, bit for bit the CPU twin's; xattention's in the fast P.V
 * mode by a tensor-core GEMM, within fp32 accumulation of them; skipsoftmax's running-max gaps by
 * dg_skip_gaps, within bf16-input fp32 accumulation, then copied back and thresholded on the host by
 * the twin's dg_peer_skip_threshold / dg_peer_skip_take: G x G values), the block selection on the device
 * (dg_peer_take_dev, byte for byte dg_peer_block_take: the budget, matched included) and the key
 * lists made on the device as bitmaps (dg_peer_expand). The query groups are the shape's (raster,
 * split at the text; their rows to the device). Q, K, scores and take stay on the device.
 * The take (one CTA a group row block: a long serial bisection) and the expansion run on side, after
 * the scores: the stream goes on to the next unit's scores meanwhile (dit_attn.c makes a site's
 * metadata for every head before its attends); the selection's users wait for it (sel_ready). */
static int gpu_peer_blocks(dg_backend *be, const dg_policy *p, const dg_budget *b, int text, dg_bgroups **groups,
			   dg_bsel **sel)
{
	gpu *g = be->impl;
	int n = be->n, bs = dg_peer_block_size(p), G = (n + bs - 1) / bs;
	int kind = p->score == DG_SCORE_SPARGE ? DG_PEER_SPARGE : p->score == DG_SCORE_ANTIDIAG ? DG_PEER_ANTIDIAG
												  : DG_PEER_POOLED;
	size_t gg = (size_t)G * G;
	float *ds = dmalloc(g, gg * 4);       /* (G, G) block scores */
	uint8_t *dtake = dmalloc(g, gg);      /* (G, G) taken blocks */
	dg_bgroups *bg = dg_calloc(1, sizeof *bg);
	int *row;
	int forced = dg_peer_block_groups(n, p, text, &bg->g, &row);
	bg->id = g->next_id++;
	groups_upload(g, bg);
	int ng = bg->g.ngroups;
	int32_t *drow = dmalloc(g, (size_t)ng * 4); /* (ng) each group's block row */
	CUDA_CHECK(cudaMemcpyAsync(drow, row, (size_t)ng * 4, cudaMemcpyHostToDevice, g->stream));
	free(row);
	dg_bsel *s = sel_new(g, ng);
	s->n = n;
	s->bits = dmalloc(g, (size_t)ng * dg_bitmap_words(n) * 4);
	bool skip = p->score == DG_SCORE_RUNMAX;
	phase_begin(g);
	if (skip) { /* Skip-Softmax: the gaps on the device, thresholded on the host (G x G values) */
		float *hgap = dg_malloc(gg * 4);
		unsigned char *htake = dg_malloc(gg);
		KERNEL_CHECK(dg_skip_gaps(g->dq, g->dk, 1, n, be->d, ds, (dg_stream)g->stream));
		CUDA_CHECK(cudaMemcpyAsync(hgap, ds, gg * 4, cudaMemcpyDeviceToHost, g->stream));
		CUDA_CHECK(cudaStreamSynchronize(g->stream));
		dg_peer_skip_take(hgap, n, dg_peer_skip_threshold(hgap, n, p, b), htake);
		CUDA_CHECK(cudaMemcpyAsync(dtake, htake, gg, cudaMemcpyHostToDevice, g->stream));
		CUDA_CHECK(cudaStreamSynchronize(g->stream));
		free(hgap), free(htake);
	} else {
		KERNEL_CHECK(dg_peer_scores(g->dq, g->dk, n, be->d, kind, bs, p->stride, p->theta, !be->precise, ds,
					    (dg_stream)g->stream));
	}
	phase_end(g, DG_PHASE_SCORES);
	CUDA_CHECK(cudaEventRecord(g->made.fork, g->stream)); /* the scores, and every buffer above, made */
	CUDA_CHECK(cudaStreamWaitEvent(g->side, g->made.fork, 0));
	phase_begin_on(g, g->side);
	if (!skip)
		KERNEL_CHECK(dg_peer_take_dev(ds, G, G, NULL, NULL, NULL, bs, n, b->budget == DG_BUDGET_TOPK,
					      dg_topk_count(b->rho, n), b->topp, p->matched, b->rho, DG_PEER_MATCH_STEPS,
					      b->sink_lo, b->sink_hi, 0, dtake, (dg_stream)g->side));
	KERNEL_CHECK(dg_peer_expand(dtake, G, bs, NULL, NULL, drow, ng, n, b->sink_lo, b->sink_hi, forced, s->bits, s->off,
				    (dg_stream)g->side));
	phase_end_on(g, g->side, DG_PHASE_SELECT);
	CUDA_CHECK(cudaFreeAsync(ds, g->side));
	CUDA_CHECK(cudaFreeAsync(dtake, g->side));
	CUDA_CHECK(cudaFreeAsync(drow, g->side));
	s->made = ++g->made.seq;
	CUDA_CHECK(cudaEventRecord(g->made.ev[s->made % MADE_RING], g->side));
	*groups = bg;
	*sel = s;
	return 0;
}

/* DiTFastAttn's window (peers.h dg_peer_window_width): groups of one query, the lists made on the
 * device from (n, text, w) alone (dg_peer_window; their total: dg_peer_window_keys) once, and shared
 * by every selection of the same (n, text, w): per site they would be n (2w + 1) int32 each, 464 GB
 * for the 720 sites of Wan2.1-1.3B at 480p with CFG */
static int gpu_peer_window(dg_backend *be, const dg_policy *p, const dg_budget *b, int text, dg_bgroups **groups,
			   dg_bsel **sel)
{
	gpu *g = be->impl;
	int n = be->n, w = dg_peer_window_width(p, b, n, text);
	shared_lists *sh = g->windows;
	while (sh && !(sh->n == n && sh->text == text && sh->w == w))
		sh = sh->next;
	if (!sh) {
		const int64_t total = dg_peer_window_keys(n, text, w);
		sh = dg_calloc(1, sizeof *sh);
		*sh = (shared_lists){ .n = n, .text = text, .w = w, .next = g->windows };
		sh->off = dmalloc(g, (size_t)(n + 1) * 8);
		sh->idx = dmalloc(g, (size_t)total * 4);
		g->windows = sh;
		phase_begin(g);
		KERNEL_CHECK(dg_peer_window(n, text, w, sh->off, sh->idx, (dg_stream)g->stream));
		phase_end(g, DG_PHASE_SELECT);
	}
	dg_bgroups *bg = dg_calloc(1, sizeof *bg);
	dg_groups_raster(&bg->g, n, 1);
	bg->id = g->next_id++;
	groups_upload(g, bg);
	dg_bsel *s = sel_new(g, n);
	dfree(g, s->off);
	s->off = sh->off;
	s->idx = sh->idx;
	s->shared = sh;
	sh->refs++;
	*groups = bg;
	*sel = s;
	return 0;
}

/* one selection fewer holds sh: freed with the last */
static void shared_release(gpu *g, shared_lists *sh)
{
	if (--sh->refs > 0)
		return;
	shared_lists **p = &g->windows;
	while (*p != sh)
		p = &(*p)->next;
	*p = sh->next;
	dfree(g, sh->off);
	dfree(g, sh->idx);
	free(sh);
}

/* svg2's device centroids, freed with the run's state */
static void centroids_free(void *c)
{
	CUDA_CHECK(cudaFree(c));
}

/* svg2 on the device (peers.h dg_peer_svg2_clusters, dg_peer_state_slot): the k-means of Q and K
 * (dg_peer_kmeans, K's on side beside Q's; the centroids kept in the run's state on the device),
 * the run counts and the sinks' key labels to the host (the groups' shape: clusters and sinks
 * only), the kept clusters' scores (dg_peer_svg2_scores), the cluster selection (dg_peer_take_dev,
 * byte for byte dg_peer_take: per query cluster, matched included) and the key lists made by the
 * key labels (dg_peer_expand, a label's column of the take by kidx), all on the device. The groups
 * are the query clusters, split at the text (runs by (cluster, side): perm stays on the device). */
static int gpu_peer_svg2(dg_backend *be, const dg_policy *p, const dg_budget *b, int text, dg_peer_state **state,
			 dg_bgroups **groups, dg_bsel **sel)
{
	gpu *g = be->impl;
	int n = be->n, d = be->d, qc, kc, min_parts;
	dg_peer_svg2_clusters(p, n, &qc, &kc, &min_parts);
	bool cold;
	void **slot = dg_peer_state_slot(state, qc, kc, d, centroids_free, &cold);
	if (cold)
		CUDA_CHECK(cudaMalloc(slot, (size_t)(qc + kc) * d * 4));
	float *cq = *slot, *ck = cq + (size_t)qc * d;
	int lo = b->sink_lo < n ? b->sink_lo : n, hi = b->sink_hi < n ? b->sink_hi : n, nsink = hi > lo ? hi - lo : 0;
	int32_t *qperm = dmalloc(g, (size_t)n * 4), *scratch = dmalloc(g, ((size_t)3 * n + 2 * qc + 2 * kc) * 4);
	int32_t *ql = scratch, *kl = ql + n, *kperm = kl + n, *cnt = kperm + n;
	/* K's k-means on side while Q's runs on the stream: a cluster's update is one CTA's chain, and a
	 * launch of either has ~100 CTAs, so the two fill the device together */
	phase_begin(g);
	CUDA_CHECK(cudaEventRecord(g->made.fork, g->stream)); /* the scratch above, and Q and K, made */
	CUDA_CHECK(cudaStreamWaitEvent(g->side, g->made.fork, 0));
	KERNEL_CHECK(dg_peer_kmeans(g->dk, n, d, ck, kc, cold ? 50 : 2, cold, 0, kl, kperm, cnt + 2 * qc,
				    (dg_stream)g->side));
	CUDA_CHECK(cudaEventRecord(g->ev_join, g->side));
	KERNEL_CHECK(dg_peer_kmeans(g->dq, n, d, cq, qc, cold ? 50 : 2, cold, text, ql, qperm, cnt, (dg_stream)g->stream));
	CUDA_CHECK(cudaStreamWaitEvent(g->stream, g->ev_join, 0));
	phase_end(g, DG_PHASE_GROUPS);
	int *hc = dg_malloc(((size_t)2 * qc + 2 * kc + nsink + 1) * sizeof(int)), *hsl = hc + 2 * qc + 2 * kc;
	CUDA_CHECK(cudaMemcpyAsync(hc, cnt, ((size_t)2 * qc + 2 * kc) * 4, cudaMemcpyDeviceToHost, g->stream));
	if (nsink)
		CUDA_CHECK(cudaMemcpyAsync(hsl, kl + lo, (size_t)nsink * 4, cudaMemcpyDeviceToHost, g->stream));
	CUDA_CHECK(cudaStreamSynchronize(g->stream));
	/* the kept (non-empty) clusters, their sizes and sinks, each label's part (kidx, -1 empty):
	 * hk = [qkeep (G) | kkeep (P) | gsize (G) | psize (P) | psink (P) | kidx (kc)] */
	int G = 0, P = 0, *hk = dg_calloc((size_t)3 * qc + 4 * kc, sizeof(int));
	int *qkeep = hk, *kkeep = qkeep + qc, *gsize = kkeep + kc, *psize = gsize + qc, *psink = psize + kc,
	    *kidx = psink + kc;
	double *wsize = dg_malloc((size_t)kc * sizeof(double));
	for (int a = 0; a < qc; a++)
		if (hc[2 * a] + hc[2 * a + 1])
			qkeep[G] = a, gsize[G++] = hc[2 * a] + hc[2 * a + 1];
	for (int a = 0; a < kc; a++) {
		const int *kcnt = hc + 2 * qc;
		kidx[a] = kcnt[2 * a + 1] ? P : -1;
		if (kcnt[2 * a + 1])
			kkeep[P] = a, psize[P] = kcnt[2 * a + 1], wsize[P++] = kcnt[2 * a + 1];
	}
	for (int j = 0; j < nsink; j++)
		psink[kidx[hsl[j]]]++;
	int32_t *dk = dmalloc(g, ((size_t)3 * qc + 4 * kc) * 4); /* hk's layout */
	int32_t *dqkeep = dk, *dkkeep = dk + qc, *dgsize = dkkeep + kc, *dpsize = dgsize + qc, *dpsink = dpsize + kc,
		*dkidx = dpsink + kc;
	double *dw = dmalloc(g, (size_t)P * 8);
	float *ds = dmalloc(g, (size_t)G * P * 4);
	uint8_t *dtake = dmalloc(g, (size_t)G * P);
	CUDA_CHECK(cudaMemcpyAsync(dk, hk, ((size_t)3 * qc + 4 * kc) * 4, cudaMemcpyHostToDevice, g->stream));
	CUDA_CHECK(cudaMemcpyAsync(dw, wsize, (size_t)P * 8, cudaMemcpyHostToDevice, g->stream));
	/* groups: each kept query cluster's text run, then its video run (the non-empty ones); a text
	 * run's list is every key (row -1) */
	dg_bgroups *bg = dg_calloc(1, sizeof *bg);
	int ng = 0, *row = dg_malloc((size_t)2 * G * sizeof(int));
	bg->g.n = n;
	bg->g.off = dg_malloc(((size_t)2 * G + 1) * sizeof(int));
	bg->g.off[0] = 0;
	for (int t = 0; t < G; t++)
		for (int side = 0; side < 2; side++)
			if (hc[2 * qkeep[t] + side]) {
				row[ng] = side ? t : -1;
				bg->g.off[ng + 1] = bg->g.off[ng] + hc[2 * qkeep[t] + side];
				ng++;
			}
	bg->g.ngroups = ng;
	bg->id = g->next_id++;
	bg->perm = qperm;
	bg->off = dmalloc(g, (size_t)(ng + 1) * 4);
	int32_t *drow = dmalloc(g, (size_t)ng * 4);
	CUDA_CHECK(cudaMemcpyAsync(bg->off, bg->g.off, (size_t)(ng + 1) * 4, cudaMemcpyHostToDevice, g->stream));
	CUDA_CHECK(cudaMemcpyAsync(drow, row, (size_t)ng * 4, cudaMemcpyHostToDevice, g->stream));
	phase_begin(g);
	KERNEL_CHECK(dg_peer_svg2_scores(cq, dqkeep, G, ck, dkkeep, P, dw, d, ds, (dg_stream)g->stream));
	phase_end(g, DG_PHASE_SCORES);
	phase_begin(g);
	KERNEL_CHECK(dg_peer_take_dev(ds, G, P, dgsize, dpsize, dpsink, 1, n, b->budget == DG_BUDGET_TOPK,
				      dg_topk_count(b->rho, n), b->topp, p->matched, b->rho, DG_PEER_MATCH_STEPS, b->sink_lo,
				      b->sink_hi, min_parts, dtake, (dg_stream)g->stream));
	phase_end(g, DG_PHASE_SELECT);
	dg_bsel *s = sel_new(g, ng);
	s->n = n;
	s->bits = dmalloc(g, (size_t)ng * dg_bitmap_words(n) * 4);
	phase_begin(g);
	KERNEL_CHECK(dg_peer_expand(dtake, P, 1, kl, dkidx, drow, ng, n, lo, hi, text, s->bits, s->off,
				    (dg_stream)g->stream));
	phase_end(g, DG_PHASE_SELECT);
	/* the uploads above are from pageable memory, staged before the calls returned, and queued
	 * before the kernels (a pageable upload waits for the stream's earlier work) */
	dfree(g, scratch), dfree(g, dk), dfree(g, dw), dfree(g, ds), dfree(g, dtake), dfree(g, drow);
	free(hc), free(hk), free(wsize), free(row);
	*groups = bg;
	*sel = s;
	return 0;
}

static void static_mask_free(gpu *g, static_mask *m)
{
	dg_groups_free(&m->g);
	free(m->hoff);
	dfree(g, m->perm), dfree(g, m->off), dfree(g, m->soff), dfree(g, m->idx);
}

/* radial's and STA's metadata (the shape and knobs alone: dg_peer_static_key): a key's first call
 * makes it with the host twin (dg_peer_metadata, memoised there per process) and keeps it on the
 * device (the last MASKS_KEPT keys); every call then copies the kept lists into its own handles,
 * device to device on the stream, so a later call of that key runs no host twin and no upload */
static int gpu_peer_static(dg_backend *be, const dg_policy *p, const dg_budget *b, const int grid[3], int text,
			   const dg_peer_mask_key *key, dg_peer_state **state, dg_bgroups **groups, dg_bsel **sel)
{
	gpu *g = be->impl;
	int i = 0;
	while (i < g->nmasks && !dg_peer_mask_key_eq(&g->masks[i].key, key))
		i++;
	if (i == g->nmasks) { /* not kept: the twin's, onto the device */
		dg_groups hg;
		dg_selection hs;
		if (dg_peer_metadata(g->q, g->k, be->n, be->d, p, b, grid, text, state, &hg, &hs))
			return -1;
		i = g->nmasks < MASKS_KEPT ? g->nmasks++ : g->next_mask;
		if (g->nmasks == MASKS_KEPT)
			g->next_mask = (i + 1) % MASKS_KEPT;
		static_mask *m = &g->masks[i];
		if (m->perm) /* evicted */
			static_mask_free(g, m);
		const int ng = hg.ngroups;
		const int64_t total = hs.off[ng];
		*m = (static_mask){ .key = *key, .g = hg, .hoff = hs.off };
		m->perm = dmalloc(g, (size_t)hg.n * 4);
		m->off = dmalloc(g, (size_t)(ng + 1) * 4);
		m->soff = dmalloc(g, (size_t)(ng + 1) * 8);
		m->idx = dmalloc(g, (size_t)total * 4);
		/* pageable sources: each copy has left the host buffer when it returns */
		CUDA_CHECK(cudaMemcpyAsync(m->perm, hg.perm, (size_t)hg.n * 4, cudaMemcpyHostToDevice, g->stream));
		CUDA_CHECK(cudaMemcpyAsync(m->off, hg.off, (size_t)(ng + 1) * 4, cudaMemcpyHostToDevice, g->stream));
		CUDA_CHECK(cudaMemcpyAsync(m->soff, hs.off, (size_t)(ng + 1) * 8, cudaMemcpyHostToDevice, g->stream));
		CUDA_CHECK(cudaMemcpyAsync(m->idx, hs.idx, (size_t)total * 4, cudaMemcpyHostToDevice, g->stream));
		free(hs.idx);
	}
	const static_mask *m = &g->masks[i];
	const int n = m->g.n, ng = m->g.ngroups;
	const int64_t total = m->hoff[ng];
	dg_bgroups *bg = dg_calloc(1, sizeof *bg);
	bg->g = (dg_groups){ n, ng, dg_malloc((size_t)(n ? n : 1) * sizeof(int)), dg_malloc((size_t)(ng + 1) * sizeof(int)) };
	memcpy(bg->g.perm, m->g.perm, (size_t)n * sizeof(int));
	memcpy(bg->g.off, m->g.off, (size_t)(ng + 1) * sizeof(int));
	bg->id = g->next_id++;
	bg->perm = dmalloc(g, (size_t)n * 4);
	bg->off = dmalloc(g, (size_t)(ng + 1) * 4);
	CUDA_CHECK(cudaMemcpyAsync(bg->perm, m->perm, (size_t)n * 4, cudaMemcpyDeviceToDevice, g->stream));
	CUDA_CHECK(cudaMemcpyAsync(bg->off, m->off, (size_t)(ng + 1) * 4, cudaMemcpyDeviceToDevice, g->stream));
	dg_bsel *s = sel_new(g, ng);
	memcpy(s->hoff, m->hoff, (size_t)(ng + 1) * 8);
	s->hoff_known = true;
	s->idx = dmalloc(g, (size_t)total * 4);
	CUDA_CHECK(cudaMemcpyAsync(s->off, m->soff, (size_t)(ng + 1) * 8, cudaMemcpyDeviceToDevice, g->stream));
	CUDA_CHECK(cudaMemcpyAsync(s->idx, m->idx, (size_t)total * 4, cudaMemcpyDeviceToDevice, g->stream));
	*groups = bg;
	*sel = s;
	return 0;
}

/* the peers' metadata, on the device: the block peers', svg2's and DiTFastAttn's window
 * (gpu_peer_blocks, gpu_peer_svg2, gpu_peer_window) and the static masks kept there
 * (gpu_peer_static: radial, sta); the host twin only for a static mask's first call */
static int gpu_peer(dg_backend *be, const dg_policy *p, const dg_budget *b, const int grid[3], int text,
		    dg_peer_state **state, dg_bgroups **groups, dg_bsel **sel)
{
	gpu *g = be->impl;
	flush(be);
	g->text = text;
	if (dg_peer_block_size(p))
		return gpu_peer_blocks(be, p, b, text, groups, sel);
	if (p->mask == DG_MASK_WINDOW)
		return gpu_peer_window(be, p, b, text, groups, sel);
	if (p->score == DG_SCORE_CENTROID)
		return gpu_peer_svg2(be, p, b, text, state, groups, sel);
	dg_peer_mask_key key;
	if (dg_peer_static_key(p, b, be->n, grid, text, &key))
		return gpu_peer_static(be, p, b, grid, text, &key, state, groups, sel);
	return dg_error("gpu backend: peer policy %s has no device metadata", p->name);
}

/* PISA's first-order term on the device (dg_pisa_first_order) over the output and mass of the last
 * attend, in place */
static void gpu_approx(dg_backend *be, const dg_bgroups *bg, const dg_bsel *sel, int block, dg_metrics *m)
{
	gpu *g = be->impl;
	flush(be);
	phase_begin(g);
	KERNEL_CHECK(dg_pisa_first_order(g->dq, g->dk, g->dv, be->n, be->d, block, bg->perm, bg->off, bg->g.ngroups,
					 sel->off, sel_keys(be, sel, 0), g->lse, g->out, g->mass, g->out,
					 (dg_stream)g->stream));
	phase_end(g, DG_PHASE_ATTEND);
	if (m)
		out_metrics(be, m);
}

/* keys=bitmap: the selection's lists become one bitmap per group (n bits), its offsets kept (device
 * and host); attend decodes them back into a launch's scratch (sel_keys) */
static void gpu_compact(dg_backend *be, dg_bsel *sel)
{
	gpu *g = be->impl;
	if (sel->compact || sel->shared) /* its bitmap may be parked in host memory (--cache-offload); */
		return;                  /* shared lists stay lists (one copy for every site) */
	flush(be); /* a batched launch may read idx */
	sel_resident(be, sel);
	unpin(g, &sel->pk); /* its bytes change */
	sel_hoff(g, sel); /* the decode's scratch sizes */
	sel->compact = true;
	sel->n = be->n;
	sel->bits = dmalloc(g, (size_t)sel->ngroups * dg_bitmap_words(be->n) * 4);
	KERNEL_CHECK(dg_keys_to_bitmap(sel->off, sel->idx, sel->ngroups, be->n, sel->bits, (dg_stream)g->stream));
	dfree(g, sel->idx);
	sel->idx = NULL;
}

/* the bytes of a stored residual (dg_residual_bytes) onto the host */
static size_t gpu_vec_bytes(dg_backend *be, const dg_bvec *v, void *host)
{
	gpu *g = be->impl;
	flush(be);
	size_t bytes = dg_res_bytes(res_code(v->t), be->n, be->d);
	vec_resident(be, (dg_bvec *)v);
	if (host) {
		CUDA_CHECK(cudaMemcpyAsync(host, v->x, bytes, cudaMemcpyDeviceToHost, g->stream));
		CUDA_CHECK(cudaStreamSynchronize(g->stream));
	}
	return bytes;
}

/* a selection's lists on the host, as the kernel reads them (a bitmap decoded on the device) */
static void gpu_sel_lists(dg_backend *be, const dg_bsel *csel, dg_selection *out)
{
	gpu *g = be->impl;
	flush(be);
	dg_bsel *sel = (dg_bsel *)csel;
	const int64_t *hoff = sel_hoff(g, sel);
	out->ngroups = sel->ngroups;
	out->off = dg_malloc((size_t)(sel->ngroups + 1) * sizeof *out->off);
	memcpy(out->off, hoff, (size_t)(sel->ngroups + 1) * sizeof *out->off);
	out->idx = dg_malloc((size_t)(hoff[sel->ngroups] > 0 ? hoff[sel->ngroups] : 1) * 4);
	CUDA_CHECK(cudaMemcpyAsync(out->idx, sel_keys(be, sel, 0), (size_t)hoff[sel->ngroups] * 4,
				   cudaMemcpyDeviceToHost, g->stream));
	CUDA_CHECK(cudaStreamSynchronize(g->stream));
}

static void gpu_output(dg_backend *be, bool dense, float *o)
{
	gpu *g = be->impl;
	flush(be);
	CUDA_CHECK(cudaMemcpyAsync(o, dense ? g->o_ref : g->out, (size_t)be->n * be->d * 4,
				   cudaMemcpyDeviceToHost, g->stream));
	CUDA_CHECK(cudaStreamSynchronize(g->stream));
}

/* into a device buffer that the DiT engine's op table reads next on the default stream, or into
 * load_device_bf16's o16 in bf16 (nothing to do where attend's batch writes there): that stream
 * waits for it by an event */
static void gpu_output_device(dg_backend *be, bool dense, float *o)
{
	gpu *g = be->impl;
	if (!dense && g->batched == g->unit)
		return; /* in the batch: flush orders it */
	flush(be);
	const float *src = dense ? g->o_ref : g->out;
	if (g->o16)
		KERNEL_CHECK(dg_to_bf16_rows(src, be->n, be->d, g->o16, g->ldo, (dg_stream)g->stream));
	else
		CUDA_CHECK(cudaMemcpyAsync(o, src, (size_t)be->n * be->d * 4, cudaMemcpyDeviceToDevice, g->stream));
	CUDA_CHECK(cudaEventRecord(g->ev_out, g->stream));
	CUDA_CHECK(cudaStreamWaitEvent(0, g->ev_out, 0));
}

/* --- --cache-offload (park, fetch) ----------------------------------------------------------- */

static void off_init(gpu *g)
{
	if (g->off.on)
		return;
	g->off.on = true;
	CUDA_CHECK(cudaStreamCreateWithFlags(&g->off.copy, cudaStreamNonBlocking));
	CUDA_CHECK(cudaEventCreateWithFlags(&g->off.main, cudaEventDisableTiming));
	for (int i = 0; i < OFF_RING; i++)
		CUDA_CHECK(cudaEventCreateWithFlags(&g->off.batch[i], cudaEventDisableTiming));
	for (int i = 0; i < 2 * OFF_PAIRS; i++)
		CUDA_CHECK(cudaEventCreate(&g->off.pev[i]));
}

/* the timed pairs so far into the totals (waits for them) */
static void off_collect(gpu *g)
{
	for (int i = 0; i < g->off.np; i++) {
		float ms;
		CUDA_CHECK(cudaEventSynchronize(g->off.pev[2 * i + 1]));
		CUDA_CHECK(cudaEventElapsedTime(&ms, g->off.pev[2 * i], g->off.pev[2 * i + 1]));
		*(g->off.pwait[i] ? &g->off.st.wait_s : &g->off.st.copy_s) += ms / 1e3;
	}
	g->off.np = 0;
}

/* an event pair around work on st: the copy stream's busy time, or (wait) a compute-stream wait */
static void pair_begin(gpu *g, cudaStream_t st)
{
	if (g->off.np == OFF_PAIRS)
		off_collect(g);
	CUDA_CHECK(cudaEventRecord(g->off.pev[2 * g->off.np], st));
}

static void pair_end(gpu *g, cudaStream_t st, bool wait)
{
	CUDA_CHECK(cudaEventRecord(g->off.pev[2 * g->off.np + 1], st));
	g->off.pwait[g->off.np++] = wait;
}

/* the compute stream waits for the fetch that brings pk's device copy, if it has not yet */
static void settle(gpu *g, parking *pk)
{
	if (pk->seq <= g->off.waited)
		return;
	pair_begin(g, g->stream);
	CUDA_CHECK(cudaStreamWaitEvent(g->stream, g->off.batch[pk->seq % OFF_RING], 0));
	pair_end(g, g->stream, true);
	g->off.waited = pk->seq;
}

/* the pinned copy goes (the copy stream may be writing it) */
static void unpin(gpu *g, parking *pk)
{
	if (!pk->host)
		return;
	CUDA_CHECK(cudaStreamSynchronize(g->off.copy));
	CUDA_CHECK(cudaFreeHost(pk->host));
	pk->host = NULL;
	pk->bytes = 0;
}

/* the bytes of a selection's storage (its lists, or its bitmaps of n keys) */
static size_t sel_bytes(gpu *g, dg_bsel *s, int n)
{
	return s->compact ? (size_t)s->ngroups * dg_bitmap_words(n) * 4 : (size_t)sel_hoff(g, s)[s->ngroups] * 4;
}

static void **sel_dev(dg_bsel *s) { return s->compact ? (void **)&s->bits : (void **)&s->idx; }

/* a parked handle's bytes onto the device on the copy stream, as part of fetch batch off.seq + 1 */
static void fetch_one(gpu *g, parking *pk, void **dev, bool *any)
{
	if (!pk->parked)
		return;
	if (!*any)
		pair_begin(g, g->off.copy);
	*any = true;
	*dev = dmalloc_on(g->off.copy, pk->bytes);
	CUDA_CHECK(cudaMemcpyAsync(*dev, pk->host, pk->bytes, cudaMemcpyHostToDevice, g->off.copy));
	pk->parked = false;
	pk->seq = g->off.seq + 1;
	g->off.st.up_bytes += (double)pk->bytes;
}

static void fetch_end(gpu *g, bool any)
{
	if (!any)
		return;
	g->off.seq++;
	CUDA_CHECK(cudaEventRecord(g->off.batch[g->off.seq % OFF_RING], g->off.copy));
	pair_end(g, g->off.copy, false);
}

static void gpu_fetch(dg_backend *be, int count, dg_bvec *const *vecs, dg_bsel *const *sels)
{
	gpu *g = be->impl;
	off_init(g);
	bool any = false;
	for (int i = 0; i < count; i++) {
		if (vecs && vecs[i])
			fetch_one(g, &vecs[i]->pk, &vecs[i]->x, &any);
		if (sels && sels[i])
			fetch_one(g, &sels[i]->pk, sel_dev(sels[i]), &any);
	}
	fetch_end(g, any);
}

/* usable on the compute stream: fetched now if parked (exposed), and waited for */
static void vec_resident(dg_backend *be, dg_bvec *v)
{
	gpu *g = be->impl;
	bool any = false;
	fetch_one(g, &v->pk, &v->x, &any);
	fetch_end(g, any);
	settle(g, &v->pk);
}

static void sel_resident(dg_backend *be, dg_bsel *s)
{
	gpu *g = be->impl;
	bool any = false;
	sel_ready(g, s);
	fetch_one(g, &s->pk, sel_dev(s), &any);
	fetch_end(g, any);
	settle(g, &s->pk);
}

/* written back (if changed or never parked) and released, in the copy stream's order after the
 * compute stream's work so far */
static void park_one(gpu *g, parking *pk, void **dev, size_t bytes, bool *any)
{
	if (pk->parked || !*dev)
		return;
	if (!*any) {
		CUDA_CHECK(cudaEventRecord(g->off.main, g->stream));
		CUDA_CHECK(cudaStreamWaitEvent(g->off.copy, g->off.main, 0));
		pair_begin(g, g->off.copy);
	}
	*any = true;
	if (pk->host && pk->bytes != bytes)
		unpin(g, pk);
	if (!pk->host) {
		double t0 = dg_now();
		CUDA_CHECK(cudaHostAlloc(&pk->host, bytes ? bytes : 16, cudaHostAllocDefault));
		g->off.st.pin_s += dg_now() - t0;
		pk->bytes = bytes;
		pk->dirty = true;
	}
	if (pk->dirty) {
		CUDA_CHECK(cudaMemcpyAsync(pk->host, *dev, bytes, cudaMemcpyDeviceToHost, g->off.copy));
		g->off.st.down_bytes += (double)bytes;
	}
	CUDA_CHECK(cudaFreeAsync(*dev, g->off.copy));
	*dev = NULL;
	pk->dirty = false;
	pk->parked = true;
}

static void gpu_park(dg_backend *be, int count, dg_bvec *const *vecs, dg_bsel *const *sels)
{
	gpu *g = be->impl;
	off_init(g);
	flush(be); /* a batched launch reads them */
	bool any = false;
	for (int i = 0; i < count; i++) {
		dg_bvec *v = vecs ? vecs[i] : NULL;
		dg_bsel *s = sels ? sels[i] : NULL;
		if (v)
			park_one(g, &v->pk, &v->x, dg_res_bytes(res_code(v->t), be->n, be->d), &any);
		if (s)
			sel_ready(g, s); /* the write-back follows the stream's work */
		if (s && s->bits) /* compacted, or made as bitmaps (the peers') */
			s->compact = true;
		if (s && !s->shared && *sel_dev(s)) /* shared lists: one copy for every site, kept */
			park_one(g, &s->pk, sel_dev(s), sel_bytes(g, s, be->n), &any);
	}
	if (any)
		pair_end(g, g->off.copy, false);
}

static void gpu_offload_stats(dg_backend *be, dg_offload_stats *st)
{
	gpu *g = be->impl;
	if (g->off.on)
		off_collect(g);
	*st = g->off.st;
}

static void gpu_scores_free(dg_backend *be, dg_bscores *s)
{
	if (!s)
		return;
	flush(be);
	if (s->owned)
		dfree(be->impl, s->s);
	gpu_scores_free(be, s->blocks);
	free(s);
}

static void gpu_sel_free(dg_backend *be, dg_bsel *s)
{
	if (!s)
		return;
	flush(be);
	sel_ready(be->impl, s); /* freed in the stream's order, after side's writes */
	settle(be->impl, &s->pk);
	unpin(be->impl, &s->pk);
	free(s->hoff);
	if (s->shared) {
		shared_release(be->impl, s->shared);
	} else {
		dfree(be->impl, s->off);
		dfree(be->impl, s->idx);
	}
	dfree(be->impl, s->bits);
	free(s);
}

static void gpu_vec_free(dg_backend *be, dg_bvec *v)
{
	if (!v)
		return;
	flush(be);
	settle(be->impl, &v->pk);
	unpin(be->impl, &v->pk);
	dfree(be->impl, v->x);
	free(v);
}

static void gpu_destroy(dg_backend *be)
{
	gpu *g = be->impl;
	flush(be);
	CUDA_CHECK(cudaStreamSynchronize(g->side));
	for (int i = 0; i < g->ahead.count; i++)
		gpu_groups_free(be, g->ahead.bg[i]);
	gpu_groups_free(be, g->ahead.cur);
	free(g->ahead.q), free(g->ahead.bg);
	dfree(g, g->ahead.dq);
	if (g->ahead.hq)
		CUDA_CHECK(cudaFreeHost(g->ahead.hq));
	CUDA_CHECK(cudaStreamSynchronize(g->stream));
	for (int i = 0; i < DG_SPARSE_HEADS_MAX; i++)
		dfree(g, g->dec[i]);
	for (int i = 0; i < g->nmasks; i++)
		static_mask_free(g, &g->masks[i]);
	while (g->windows) { /* selections not freed by the caller */
		shared_lists *sh = g->windows;
		g->windows = sh->next;
		dfree(g, sh->off);
		dfree(g, sh->idx);
		free(sh);
	}
	void *dev[] = { g->o_ref, g->lse, g->out, g->o_sp, g->mass, g->dmet, g->bq, g->bk, g->bv, g->res_old, g->res_new };
	for (size_t i = 0; i < sizeof dev / sizeof *dev; i++)
		dfree(g, dev[i]);
	CUDA_CHECK(cudaStreamSynchronize(g->stream));
	CUDA_CHECK(cudaEventDestroy(g->ev[0]));
	CUDA_CHECK(cudaEventDestroy(g->ev[1]));
	CUDA_CHECK(cudaEventDestroy(g->ev_legacy));
	CUDA_CHECK(cudaEventDestroy(g->ev_out));
	CUDA_CHECK(cudaEventDestroy(g->ev_ahead));
	CUDA_CHECK(cudaEventDestroy(g->ev_join));
	CUDA_CHECK(cudaEventDestroy(g->made.fork));
	for (int i = 0; i < MADE_RING; i++)
		CUDA_CHECK(cudaEventDestroy(g->made.ev[i]));
	for (int i = 0; g->profiling && i < 2 * PHASE_MAX; i++)
		CUDA_CHECK(cudaEventDestroy(g->pev[i]));
	if (g->off.on) {
		off_collect(g);
		CUDA_CHECK(cudaStreamSynchronize(g->off.copy));
		CUDA_CHECK(cudaEventDestroy(g->off.main));
		for (int i = 0; i < OFF_RING; i++)
			CUDA_CHECK(cudaEventDestroy(g->off.batch[i]));
		for (int i = 0; i < 2 * OFF_PAIRS; i++)
			CUDA_CHECK(cudaEventDestroy(g->off.pev[i]));
		CUDA_CHECK(cudaStreamDestroy(g->off.copy));
	}
	CUDA_CHECK(cudaStreamDestroy(g->side));
	CUDA_CHECK(cudaStreamDestroy(g->stream));
	CUDA_CHECK(cudaFreeHost(g->hq));
	CUDA_CHECK(cudaFreeHost(g->h_lse));
	free(g);
	free(be);
}

int dg_backend_gpu_available(void)
{
	int count = 0;
	return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

dg_backend *dg_backend_gpu(int n, int d)
{
	int count = 0;
	cudaError_t e = cudaGetDeviceCount(&count);
	if (e != cudaSuccess || count == 0) {
		dg_error("no CUDA device (%s): --device gpu is not available",
			 e != cudaSuccess ? cudaGetErrorString(e) : "none found");
		return NULL;
	}
	if (d != 64 && d != 128) {
		dg_error("the GPU kernels take head_dim 64 or 128, not %d: use --device cpu", d);
		return NULL;
	}
	dg_backend *be = dg_calloc(1, sizeof *be);
	gpu *g = dg_calloc(1, sizeof *g);
	size_t nd = (size_t)n * d;
	CUDA_CHECK(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
	int greatest; /* the most urgent stream priority */
	CUDA_CHECK(cudaDeviceGetStreamPriorityRange(NULL, &greatest));
	CUDA_CHECK(cudaStreamCreateWithPriority(&g->side, cudaStreamNonBlocking, greatest));
	/* the stream-ordered pool keeps what is freed (handles, the kernels' scratch) for reuse
	 * instead of returning it to the driver at every synchronisation; and it does not hand one
	 * stream memory that another freed by inserting a wait for that stream (its default): the
	 * stream would wait for the side's work (a take's scratch freed there), which is to overlap it */
	cudaMemPool_t pool;
	uint64_t keep = UINT64_MAX;
	int no = 0;
	CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
	CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
	CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowInternalDependencies, &no));
	g->kept.unit = -1;
	g->batched = -1;
	CUDA_CHECK(cudaEventCreate(&g->ev[0]));
	CUDA_CHECK(cudaEventCreate(&g->ev[1]));
	CUDA_CHECK(cudaEventCreateWithFlags(&g->ev_legacy, cudaEventDisableTiming));
	CUDA_CHECK(cudaEventCreateWithFlags(&g->ev_out, cudaEventDisableTiming));
	CUDA_CHECK(cudaEventCreateWithFlags(&g->ev_ahead, cudaEventDisableTiming));
	CUDA_CHECK(cudaEventCreateWithFlags(&g->ev_join, cudaEventDisableTiming));
	CUDA_CHECK(cudaEventCreateWithFlags(&g->made.fork, cudaEventDisableTiming));
	for (int i = 0; i < MADE_RING; i++)
		CUDA_CHECK(cudaEventCreateWithFlags(&g->made.ev[i], cudaEventDisableTiming));
	CUDA_CHECK(cudaMallocHost((void **)&g->hq, 3 * nd * 2));
	CUDA_CHECK(cudaMallocHost((void **)&g->h_lse, (size_t)n * 4));
	g->bq = dmalloc(g, nd * 2), g->bk = dmalloc(g, nd * 2), g->bv = dmalloc(g, nd * 2);
	g->dq = g->bq, g->dk = g->bk, g->dv = g->bv;
	g->o_ref = dmalloc(g, nd * 4), g->out = dmalloc(g, nd * 4), g->o_sp = dmalloc(g, nd * 4);
	g->lse = dmalloc(g, (size_t)n * 4), g->mass = dmalloc(g, (size_t)n * 4), g->dmet = dmalloc(g, 6 * 8);
	*be = (dg_backend){ .name = "gpu", .n = n, .d = d, .impl = g, .load = gpu_load, .load_device = gpu_load_device,
			    .load_device_bf16 = gpu_load_device_bf16,
			    .prefetch_groups = gpu_prefetch_groups, .dense = gpu_dense, .groups = gpu_groups,
			    .exact = gpu_exact,
			    .pooled = gpu_pooled, .to_blocks = gpu_to_blocks, .vote = gpu_vote, .select = gpu_select,
			    .attend = gpu_attend, .compact = gpu_compact, .peer = gpu_peer, .approx = gpu_approx,
			    .park = gpu_park, .fetch = gpu_fetch, .offload_stats = gpu_offload_stats,
			    .vec_bytes = gpu_vec_bytes, .sel_lists = gpu_sel_lists, .phases = gpu_phases, .submit = flush, .output = gpu_output, .output_device = gpu_output_device, .groups_free = gpu_groups_free,
			    .scores_free = gpu_scores_free, .sel_free = gpu_sel_free,
			    .vec_free = gpu_vec_free, .destroy = gpu_destroy };
	struct cudaDeviceProp prop;
	CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
	snprintf(be->device, sizeof be->device, "gpu: %.100s (sm_%d%d, %d SMs, %.0f GiB)", prop.name,
		 prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1073741824.0);
	dg_attn_init_threads();
	return be;
}

#else /* no CUDA in this build */

dg_backend *dg_backend_gpu(int n, int d)
{
	dg_error("this dsgap was built without CUDA: --device gpu is not available");
	return NULL;
}

int dg_backend_gpu_available(void) { return 0; }

#endif
