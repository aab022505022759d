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
#include "backend/backend_gpu.h"
#include "util/util.h"

const char *dg_phase_name(dg_phase p)
{
	static const char *const names[DG_PHASE_COUNT] = { "dense", "groups", "scores", "select", "attend" };
	return p >= 0 && p < DG_PHASE_COUNT ? names[p] : "?";
}

#ifdef DG_HAVE_CUDA

static void gpu_vec_free(dg_backend *be, dg_bvec *v);

/* device memory from the stream-ordered pool, in the order of stream st (gb_dmalloc: the main
 * stream), freed in the order of the main stream */
void *gb_dmalloc_on(cudaStream_t st, size_t bytes)
{
	void *p;
	CUDA_CHECK(cudaMallocAsync(&p, bytes ? bytes : 16, st));
	return p;
}

void *gb_dmalloc(gpu *g, size_t bytes)
{
	return gb_dmalloc_on(g->stream, bytes);
}

void gb_dfree(gpu *g, void *p)
{
	if (p)
		CUDA_CHECK(cudaFreeAsync(p, g->stream));
}

/* freed in the stream's order after the waiting batch's launch (which may read it), without
 * launching the batch now: a per-step policy frees each head's metadata right after its attend */
void gb_dfree_later(dg_backend *be, void *p)
{
	gpu *g = be->impl;
	if (!p)
		return;
	if (!g->batch.count) {
		gb_dfree(g, p);
		return;
	}
	if (g->batch.nlater == BATCH_LATER)
		gb_flush(be);
	if (g->batch.count)
		g->batch.later[g->batch.nlater++] = p;
	else
		gb_dfree(g, p);
}

/* here rather than with the other handles' frees: a load drops an unconsumed grouping ahead */
static void gpu_groups_free(dg_backend *be, dg_bgroups *bg)
{
	if (!bg)
		return;
	dg_groups_free(&bg->g);
	gb_dfree_later(be, bg->perm);
	gb_dfree_later(be, bg->off);
	free(bg);
}

/* phase accounting (phases): an event pair around a primitive's work on stream st */
void gb_phase_begin_on(gpu *g, cudaStream_t st)
{
	if (g->profiling)
		CUDA_CHECK(cudaEventRecord(g->pev[2 * g->nph], st));
}

void gb_phase_begin(gpu *g)
{
	gb_phase_begin_on(g, g->stream);
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

void gb_phase_end_on(gpu *g, cudaStream_t st, dg_phase ph)
{
	if (!g->profiling)
		return;
	CUDA_CHECK(cudaEventRecord(g->pev[2 * g->nph + 1], st));
	g->pph[g->nph++] = ph;
	if (g->nph == PHASE_MAX)
		phases_collect(g);
}

void gb_phase_end(gpu *g, dg_phase ph)
{
	gb_phase_end_on(g, g->stream, ph);
}

static void gpu_phases(dg_backend *be, double s[DG_PHASE_COUNT])
{
	gpu *g = be->impl;
	gb_flush(be);
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
void gb_flush(dg_backend *be)
{
	gpu *g = be->impl;
	if (!g->batch.count)
		return;
	gb_phase_begin(g);
	if (g->batch.win) {
		const void *res[DG_SPARSE_HEADS_MAX];
		for (int i = 0; i < g->batch.count; i++)
			res[i] = g->batch.tab[i].residual;
		KERNEL_CHECK(dg_window_fwd_heads(g->batch.q, g->batch.k, g->batch.v, g->batch.count, be->n, be->d,
						 g->batch.win->text, g->batch.win->w, res, g->batch.tab[0].residual_dtype,
						 g->batch.o16, g->batch.ldo, g->batch.precise, (dg_stream)g->stream));
	} else {
		KERNEL_CHECK(dg_sparse_fwd_heads(g->batch.q, g->batch.k, g->batch.v, g->batch.ldi, g->batch.count, be->n, be->d,
						 g->batch.tab, g->batch.ngroups, g->batch.o16, g->batch.ldo, g->batch.precise,
						 (dg_stream)g->stream));
	}
	gb_phase_end(g, DG_PHASE_ATTEND);
	CUDA_CHECK(cudaEventRecord(g->ev_out, g->stream));
	CUDA_CHECK(cudaStreamWaitEvent(0, g->ev_out, 0));
	g->batch.count = 0;
	for (int i = 0; i < g->batch.nlater; i++)
		gb_dfree(g, g->batch.later[i]);
	g->batch.nlater = 0;
}

/* the DG_RES_* code of a storage (kernels/dsgap_kernels.h) */
int gb_res_code(dg_resdtype t)
{
	return t == DG_RESDTYPE_BF16 ? DG_RES_BF16 : t == DG_RESDTYPE_FP8 ? DG_RES_FP8 : DG_RES_F32;
}

/* the key lists the sparse kernel reads: the selection's own, or (keys=bitmap) its bitmaps decoded into
 * the scratch of launch slot `slot` (a batched launch's head; 0 otherwise), in stream order: the slot
 * is reused only after the launch that read it (flush) */
const int32_t *gb_sel_keys(dg_backend *be, const dg_bsel *csel, int slot)
{
	gpu *g = be->impl;
	dg_bsel *sel = (dg_bsel *)csel;
	gb_sel_resident(be, sel);
	if (!sel->bits)
		return sel->idx;
	size_t need = (size_t)gb_sel_hoff(g, sel)[sel->ngroups] * 4;
	if (g->dec_cap[slot] < need) {
		gb_dfree(g, g->dec[slot]);
		g->dec[slot] = gb_dmalloc(g, need);
		g->dec_cap[slot] = need;
	}
	KERNEL_CHECK(dg_bitmap_to_keys(sel->bits, sel->off, sel->ngroups, sel->n, g->dec[slot], (dg_stream)g->stream));
	return g->dec[slot];
}

/* the loaded unit's sparse attention (with its cached residual, or none) into o16, joining the batch
 * when it is the next head of the batch's buffers (and, DiTFastAttn's window, of the batch's window) */
static void batch_add(dg_backend *be, const dg_bgroups *bg, const dg_bsel *sel, const dg_bvec *residual)
{
	gpu *g = be->impl;
	const uint16_t *q = g->ldi ? g->sq : g->dq, *k = g->ldi ? g->sk : g->dk, *v = g->ldi ? g->sv : g->dv;
	size_t hs = g->ldi ? (size_t)be->d : (size_t)be->n * be->d; /* from one head to the next */
	int c = g->batch.count;
	const int rcode = residual ? gb_res_code(residual->t) : -1;
	bool next = c < DG_SPARSE_HEADS_MAX && g->batch.ngroups == bg->g.ngroups && g->batch.precise == be->precise &&
		    g->batch.ldo == g->ldo && g->batch.ldi == g->ldi && q == g->batch.q + c * hs &&
		    k == g->batch.k + c * hs && v == g->batch.v + c * hs && g->o16 == g->batch.o16 + (size_t)c * be->d &&
		    g->batch.rcode == rcode && g->batch.win == sel->shared;
	if (c && !next)
		gb_flush(be);
	if (!g->batch.count) {
		g->batch.ngroups = bg->g.ngroups, g->batch.precise = be->precise;
		g->batch.q = q, g->batch.k = k, g->batch.v = v, g->batch.ldi = g->ldi;
		g->batch.o16 = g->o16, g->batch.ldo = g->ldo;
		g->batch.rcode = rcode;
		g->batch.win = sel->shared;
	}
	const int32_t *keys = sel->shared ? NULL : gb_sel_keys(be, sel, g->batch.count);
	g->batch.tab[g->batch.count++] = (dg_sparse_head){ bg->perm, bg->off, sel->off, keys,
							   residual ? residual->x : NULL, rcode < 0 ? DG_RES_F32 : rcode };
	g->batched = g->unit;
}

/* a grouping made ahead and not taken: freed in the main stream's order, after the side's work */
void gb_ahead_free(dg_backend *be, dg_bgroups *bg)
{
	gpu *g = be->impl;
	if (!bg)
		return;
	gb_flush(be);
	CUDA_CHECK(cudaStreamWaitEvent(g->stream, g->ev_ahead, 0));
	gpu_groups_free(be, bg);
}

/* a new unit, loaded from the Q buffer q: the last unit's grouping ahead, if not taken, is dropped;
 * a grouping made ahead for q becomes the unit's */
static void unit_begin(dg_backend *be, const float *q)
{
	gpu *g = be->impl;
	gb_ahead_free(be, g->ahead.cur);
	g->ahead.cur = NULL;
	g->unit++; /* a kept sparse output belongs to the previous unit */
	g->o16 = NULL;
	g->dense_current = false;
	g->ldi = 0;
	for (int i = 0; q && i < g->ahead.count; i++)
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
	gb_flush(be);
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
	gb_flush(be);
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
				 const uint16_t *v16, int ldi, uint16_t *o16, int ldo, bool order)
{
	gpu *g = be->impl;
	unit_begin(be, q);
	g->q = g->k = g->v = NULL;
	if (order) {
		CUDA_CHECK(cudaEventRecord(g->ev_legacy, 0));
		CUDA_CHECK(cudaStreamWaitEvent(g->stream, g->ev_legacy, 0));
	}
	/* token-major: only the batch reads them (any other primitive finds no head-major unit) */
	g->ldi = ldi;
	g->dq = ldi ? NULL : q16, g->dk = ldi ? NULL : k16, g->dv = ldi ? NULL : v16;
	g->sq = ldi ? q16 : NULL, g->sk = ldi ? k16 : NULL, g->sv = ldi ? v16 : NULL;
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
	gb_flush(be);
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

/* metrics of the output against the dense O, with the retained mass */
void gb_out_metrics(dg_backend *be, dg_metrics *m)
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
	const int rdt = residual ? gb_res_code(residual->t) : DG_RES_F32;
	if (sel->shared) {
		KERNEL_CHECK(dg_window_fwd(g->dq, g->dk, g->dv, 1, be->n, be->d, sel->shared->text, sel->shared->w, r, rdt,
					   dense_lse(g), o, mass_out(g), be->precise, (dg_stream)g->stream));
		return;
	}
	const int32_t *keys = gb_sel_keys(be, sel, 0);
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
		gb_vec_resident(be, (dg_bvec *)residual);
	if (new_residual && *new_residual && (*new_residual)->t != be->residual_dtype) {
		gpu_vec_free(be, *new_residual);
		*new_residual = NULL;
	}
	if (new_residual && !*new_residual) {
		*new_residual = dg_calloc(1, sizeof(dg_bvec));
		(*new_residual)->t = be->residual_dtype;
		(*new_residual)->x = gb_dmalloc(g, dg_res_bytes(gb_res_code(be->residual_dtype), be->n, be->d));
	} else if (new_residual && (*new_residual)->pk.parked) { /* overwritten whole: no fetch */
		(*new_residual)->x = gb_dmalloc(g, dg_res_bytes(gb_res_code(be->residual_dtype), be->n, be->d));
		(*new_residual)->pk.parked = false;
	} else if (new_residual) {
		gb_settle(g, &(*new_residual)->pk);
	}
	if (new_residual)
		(*new_residual)->pk.dirty = true;
	double s = 0;
	bool fused = !new_residual && !seconds && !m; /* no O_sparse of its own needed */
	const bool batch = fused && (residual || !be->term_follows) && g->o16 && !g->text && !(g->ldi && sel->shared);
	DG_ASSERT(batch || !g->ldi); /* a token-major unit is a plain reuse step's: the batch's */
	if (batch) {
		/* batched: a site's reuse steps, and the sparse calls of policies without a residual (the DiT
		 * entry point makes every head's metadata first). Not with text rows (written after the
		 * launch), nor where PISA's term reads g->out after it */
		batch_add(be, bg, sel, residual);
	} else if (fused) {
		/* out = O_sparse (+ R from the kernel's epilogue: a reuse step of a cached residual), the DiT's
		 * sparse calls: no O_sparse pass through memory, so none is kept for this unit */
		gb_flush(be);
		gb_phase_begin(g);
		attend_into(be, bg, sel, residual, g->out);
		text_rows(be, g->out);
		g->kept.unit = -1;
		gb_phase_end(g, DG_PHASE_ATTEND);
	} else {
		gb_flush(be);
		gb_phase_begin(g);
		s = sparse_out(be, bg, sel, seconds != NULL);
		/* out = O_sparse + old residual; the new residual needs O_sparse alone. Stored other than in
		 * fp32 (cache_store.h): the old one decoded first, the new one made in fp32, then encoded */
		const float *r_old = NULL;
		float *r_new = NULL;
		if (residual && residual->t == DG_RESDTYPE_FP32) {
			r_old = residual->x;
		} else if (residual) {
			if (!g->res_old)
				g->res_old = gb_dmalloc(g, nd * 4);
			KERNEL_CHECK(dg_residual_decode_dev(residual->x, be->n, be->d, gb_res_code(residual->t), g->res_old,
							    (dg_stream)g->stream));
			r_old = g->res_old;
		}
		dg_bvec *rn = new_residual ? *new_residual : NULL;
		if (rn && rn->t == DG_RESDTYPE_FP32) {
			r_new = rn->x;
		} else if (rn) {
			if (!g->res_new)
				g->res_new = gb_dmalloc(g, nd * 4);
			r_new = g->res_new;
		}
		KERNEL_CHECK(dg_residual_update(g->o_ref, g->o_sp, r_old, g->out, r_new, nd, (dg_stream)g->stream));
		if (rn && rn->t != DG_RESDTYPE_FP32)
			KERNEL_CHECK(dg_residual_encode_dev(g->res_new, be->n, be->d, gb_res_code(rn->t), rn->x,
							    (dg_stream)g->stream));
		if (m)
			gb_out_metrics(be, m);
		gb_phase_end(g, DG_PHASE_ATTEND);
	}
	if (seconds)
		*seconds = s;
	const int64_t *hoff = gb_sel_hoff(g, sel);
	int64_t pairs = 0;
	for (int grp = 0; grp < bg->g.ngroups; grp++)
		pairs += (int64_t)(bg->g.off[grp + 1] - bg->g.off[grp]) * (hoff[grp + 1] - hoff[grp]);
	return pairs;
}

/* keys=bitmap: the selection's lists become one bitmap per group (n bits), its offsets kept (device
 * and host); attend decodes them back into a launch's scratch (gb_sel_keys) */
static void gpu_compact(dg_backend *be, dg_bsel *sel)
{
	gpu *g = be->impl;
	if (sel->compact || sel->shared) /* its bitmap may be parked in host memory (--cache-offload); */
		return;                  /* shared lists stay lists (one copy for every site) */
	gb_flush(be); /* a batched launch may read idx */
	gb_sel_resident(be, sel);
	gb_unpin(g, &sel->pk); /* its bytes change */
	gb_sel_hoff(g, sel); /* the decode's scratch sizes */
	sel->compact = true;
	sel->n = be->n;
	sel->bits = gb_dmalloc(g, (size_t)sel->ngroups * dg_bitmap_words(be->n) * 4);
	KERNEL_CHECK(dg_keys_to_bitmap(sel->off, sel->idx, sel->ngroups, be->n, sel->bits, (dg_stream)g->stream));
	gb_dfree(g, sel->idx);
	sel->idx = NULL;
}

/* the bytes of a stored residual (dg_residual_bytes) onto the host */
static size_t gpu_vec_bytes(dg_backend *be, const dg_bvec *v, void *host)
{
	gpu *g = be->impl;
	gb_flush(be);
	size_t bytes = dg_res_bytes(gb_res_code(v->t), be->n, be->d);
	gb_vec_resident(be, (dg_bvec *)v);
	if (host) {
		CUDA_CHECK(cudaMemcpyAsync(host, v->x, bytes, cudaMemcpyDeviceToHost, g->stream));
		CUDA_CHECK(cudaStreamSynchronize(g->stream));
	}
	return bytes;
}

static void gpu_output(dg_backend *be, bool dense, float *o)
{
	gpu *g = be->impl;
	gb_flush(be);
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
	gb_flush(be);
	const float *src = dense ? g->o_ref : g->out;
	if (g->o16)
		KERNEL_CHECK(dg_to_bf16_rows(src, be->n, be->d, g->o16, g->ldo, (dg_stream)g->stream));
	else
		CUDA_CHECK(cudaMemcpyAsync(o, src, (size_t)be->n * be->d * 4, cudaMemcpyDeviceToDevice, g->stream));
	CUDA_CHECK(cudaEventRecord(g->ev_out, g->stream));
	CUDA_CHECK(cudaStreamWaitEvent(0, g->ev_out, 0));
}


static void gpu_scores_free(dg_backend *be, dg_bscores *s)
{
	if (!s)
		return;
	if (s->owned)
		gb_dfree_later(be, s->s);
	gpu_scores_free(be, s->blocks);
	free(s);
}

void gb_sel_free(dg_backend *be, dg_bsel *s)
{
	if (!s)
		return;
	if (s->shared) /* a window's lists: shared by the batch's heads, released here */
		gb_flush(be);
	gb_sel_ready(be->impl, s); /* freed in the stream's order, after side's writes */
	gb_settle(be->impl, &s->pk);
	gb_unpin(be->impl, &s->pk);
	free(s->hoff);
	if (s->shared) {
		gb_shared_release(be->impl, s->shared);
	} else { /* after the waiting batch's launch, which may read them */
		gb_dfree_later(be, s->off);
		gb_dfree_later(be, s->idx);
	}
	gb_dfree_later(be, s->bits);
	free(s);
}

static void gpu_vec_free(dg_backend *be, dg_bvec *v)
{
	if (!v)
		return;
	gb_flush(be);
	gb_settle(be->impl, &v->pk);
	gb_unpin(be->impl, &v->pk);
	gb_dfree(be->impl, v->x);
	free(v);
}

static void gpu_destroy(dg_backend *be)
{
	gpu *g = be->impl;
	gb_flush(be);
	CUDA_CHECK(cudaStreamSynchronize(g->side));
	for (int i = 0; i < g->ahead.count; i++)
		gpu_groups_free(be, g->ahead.bg[i]);
	gpu_groups_free(be, g->ahead.cur);
	free(g->ahead.q), free(g->ahead.bg);
	gb_dfree(g, g->ahead.dq);
	if (g->ahead.hq)
		CUDA_CHECK(cudaFreeHost(g->ahead.hq));
	CUDA_CHECK(cudaStreamSynchronize(g->stream));
	for (int i = 0; i < DG_SPARSE_HEADS_MAX; i++)
		gb_dfree(g, g->dec[i]);
	for (int i = 0; i < g->nmasks; i++)
		gb_static_mask_free(g, &g->masks[i]);
	while (g->windows) { /* selections not freed by the caller */
		shared_lists *sh = g->windows;
		g->windows = sh->next;
		gb_dfree(g, sh->off);
		gb_dfree(g, sh->idx);
		free(sh);
	}
	void *dev[] = { g->o_ref, g->lse, g->out, g->o_sp, g->mass, g->dmet, g->bq, g->bk, g->bv, g->res_old, g->res_new };
	for (size_t i = 0; i < sizeof dev / sizeof *dev; i++)
		gb_dfree(g, dev[i]);
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
		gb_off_collect(g);
		CUDA_CHECK(cudaStreamSynchronize(g->off.copy));
		CUDA_CHECK(cudaEventDestroy(g->off.main));
		for (int i = 0; i < OFF_RING; i++)
			CUDA_CHECK(cudaEventDestroy(g->off.batch[i]));
		for (int i = 0; i < 2 * OFF_PAIRS; i++)
			CUDA_CHECK(cudaEventDestroy(g->off.pev[i]));
		CUDA_CHECK(cudaStreamDestroy(g->off.copy));
	}
	gb_pool_free(g);
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
	g->bq = gb_dmalloc(g, nd * 2), g->bk = gb_dmalloc(g, nd * 2), g->bv = gb_dmalloc(g, nd * 2);
	g->dq = g->bq, g->dk = g->bk, g->dv = g->bv;
	g->o_ref = gb_dmalloc(g, nd * 4), g->out = gb_dmalloc(g, nd * 4), g->o_sp = gb_dmalloc(g, nd * 4);
	g->lse = gb_dmalloc(g, (size_t)n * 4), g->mass = gb_dmalloc(g, (size_t)n * 4), g->dmet = gb_dmalloc(g, 6 * 8);
	*be = (dg_backend){ .name = "gpu", .n = n, .d = d, .impl = g, .load = gpu_load, .load_device = gpu_load_device,
			    .load_device_bf16 = gpu_load_device_bf16,
			    .prefetch_groups = gb_prefetch_groups, .dense = gpu_dense, .groups = gb_groups,
			    .exact = gb_exact,
			    .pooled = gb_pooled, .to_blocks = gb_to_blocks, .vote = gb_vote, .select = gb_select,
			    .attend = gpu_attend, .compact = gpu_compact, .peer = gb_peer, .approx = gb_approx,
			    .park = gb_park, .fetch = gb_fetch, .pin_ahead = gb_pin_ahead, .offload_stats = gb_offload_stats,
			    .vec_bytes = gpu_vec_bytes, .sel_lists = gb_sel_lists, .phases = gpu_phases, .submit = gb_flush, .output = gpu_output, .output_device = gpu_output_device, .groups_free = gpu_groups_free,
			    .scores_free = gpu_scores_free, .sel_free = gb_sel_free,
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
