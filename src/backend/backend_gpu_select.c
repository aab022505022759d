/*
 * backend_gpu_select.c: the GPU backend's groupings (the PCA groupings ahead on the side stream,
 * joint attention's text groups), scores and selections (backend_gpu.h).
 * Built only with CUDA (DG_HAVE_CUDA).
 */
#include "backend/backend_gpu.h"

#ifdef DG_HAVE_CUDA

/* a host grouping's perm and offsets onto the device (pageable sources: staged by the copy) */
void gb_groups_upload(gpu *g, dg_bgroups *bg)
{
	bg->perm = gb_dmalloc(g, (size_t)bg->g.n * 4);
	bg->off = gb_dmalloc(g, (size_t)(bg->g.ngroups + 1) * 4);
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
	bg->perm = gb_dmalloc_on(st, (size_t)n * 4);
	bg->off = gb_dmalloc_on(st, (size_t)(ng + 1) * 4);
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
		g->ahead.dq = gb_dmalloc_on(g->side, count * nd * 2);
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
void gb_prefetch_groups(dg_backend *be, dg_group_kind kind, int count, const float *const *q,
				const uint16_t *const *q16, bool device)
{
	gpu *g = be->impl;
	gb_flush(be);
	if (kind != DG_GROUP_PCA || count < 1)
		return;
	for (int i = 0; i < g->ahead.count; i++)
		gb_ahead_free(be, g->ahead.bg[i]);
	g->ahead.q = dg_realloc(g->ahead.q, (size_t)count * sizeof *g->ahead.q);
	g->ahead.bg = dg_realloc(g->ahead.bg, (size_t)count * sizeof *g->ahead.bg);
	g->ahead.count = count;
	ahead_stage(be, count, q, q16, device);
	int n = be->n, ng = (n + DG_GROUP_SIZE - 1) / DG_GROUP_SIZE;
	gb_phase_begin_on(g, g->side);
	int32_t *perm = gb_dmalloc_on(g->side, (size_t)count * n * 4), *off = gb_dmalloc_on(g->side, (size_t)(ng + 1) * 4);
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
	gb_phase_end_on(g, g->side, DG_PHASE_GROUPS);
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
	bg->perm = gb_dmalloc(g, (size_t)n * 4);
	bg->off = gb_dmalloc(g, (size_t)(bg->g.ngroups + 1) * 4);
	int32_t *vperm = gb_dmalloc(g, (size_t)nv * 4), *voff = gb_dmalloc(g, (size_t)(nvg + 1) * 4);
	gb_phase_begin(g);
	KERNEL_CHECK(dg_pca_groups(g->dq + (size_t)text * be->d, 1, nv, be->d, vperm, voff, (dg_stream)g->stream));
	KERNEL_CHECK(dg_joint_perm(vperm, n, text, bg->perm, (dg_stream)g->stream));
	gb_phase_end(g, DG_PHASE_GROUPS);
	CUDA_CHECK(cudaMemcpyAsync(bg->off, bg->g.off, (size_t)(bg->g.ngroups + 1) * 4, cudaMemcpyHostToDevice,
				   g->stream));
	gb_dfree(g, vperm);
	gb_dfree(g, voff);
	return bg;
}

dg_bgroups *gb_groups(dg_backend *be, dg_group_kind kind, const int grid[3], int text)
{
	gpu *g = be->impl;
	gb_flush(be);
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
		gb_phase_begin(g);
		dg_bgroups *bg = pca_handle(be, g->stream);
		KERNEL_CHECK(dg_pca_groups(g->dq, 1, be->n, be->d, bg->perm, bg->off, (dg_stream)g->stream));
		gb_phase_end(g, DG_PHASE_GROUPS);
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
	gb_groups_upload(g, bg);
	return bg;
}

static dg_bscores *scores_new(gpu *g, int rows, int cols)
{
	dg_bscores *s = dg_calloc(1, sizeof *s);
	s->rows = rows, s->cols = cols, s->owned = 1;
	s->s = gb_dmalloc(g, (size_t)rows * cols * 4);
	return s;
}

dg_bsel *gb_sel_new(gpu *g, int ngroups)
{
	dg_bsel *s = dg_calloc(1, sizeof *s);
	s->ngroups = ngroups;
	s->id = g->next_id++;
	s->hoff = dg_malloc((size_t)(ngroups + 1) * 8);
	s->off = gb_dmalloc(g, (size_t)(ngroups + 1) * 8);
	return s;
}

/* ngroups lists of cnt keys each: host offsets made here, device offsets by a kernel (fill; else
 * the selection kernel writes them), no transfer */
static dg_bsel *sel_fixed(gpu *g, int ngroups, int64_t cnt, bool fill)
{
	dg_bsel *s = gb_sel_new(g, ngroups);
	for (int i = 0; i <= ngroups; i++)
		s->hoff[i] = i * cnt;
	s->hoff_known = true;
	if (fill)
		KERNEL_CHECK(dg_fixed_offsets(s->off, ngroups, cnt, (dg_stream)g->stream));
	s->idx = gb_dmalloc(g, (size_t)(ngroups * cnt) * 4);
	return s;
}

/* a selection made on side usable on the stream: its event waited for there once */
void gb_sel_ready(gpu *g, const dg_bsel *s)
{
	if (s->made <= g->made.waited)
		return;
	CUDA_CHECK(cudaStreamWaitEvent(g->stream, g->made.ev[s->made % MADE_RING], 0));
	g->made.waited = s->made;
}

/* the host offsets of a selection, read from the device the first time they are needed */
const int64_t *gb_sel_hoff(gpu *g, dg_bsel *s)
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
	dg_bsel *s = gb_sel_new(g, h->ngroups);
	int64_t total = h->off[h->ngroups];
	memcpy(s->hoff, h->off, (size_t)(h->ngroups + 1) * 8);
	s->hoff_known = true;
	s->idx = gb_dmalloc(g, (size_t)total * 4);
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
	dg_bsel *j = gb_sel_new(g, ng);
	j->idx = gb_dmalloc(g, (size_t)((int64_t)text_groups * n + (int64_t)(ng - text_groups) * forced + cap) * 4);
	KERNEL_CHECK(dg_joint_keys(s->off, s->idx, ng, n, text_groups, forced, j->off, j->idx, (dg_stream)g->stream));
	gb_sel_free(be, s);
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

void gb_exact(dg_backend *be, dg_bgroups *const *groups, dg_bscores **scores, int nacc,
		      const dg_budget *const *qb_in, dg_bsel **qsel, int nq)
{
	gpu *g = be->impl;
	gb_flush(be);
	int n = be->n, nb = (n + DG_KV_BLOCK_SIZE - 1) / DG_KV_BLOCK_SIZE;
	gb_phase_begin(g);
	for (int a = 0; a < nacc; a++) {
		scores[a] = scores_new(g, groups[a]->g.ngroups, n);
		scores[a]->blocks = scores_new(g, groups[a]->g.ngroups, nb);
		KERNEL_CHECK(dg_exact_scores(g->dq, g->dk, g->lse, n, be->d, groups[a]->perm, groups[a]->off,
					     groups[a]->g.ngroups, scores[a]->s, scores[a]->blocks->s,
					     (dg_stream)g->stream));
	}
	if (!nq) {
		gb_phase_end(g, DG_PHASE_SCORES);
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
		gb_phase_end(g, DG_PHASE_SCORES);
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
	gb_phase_end(g, DG_PHASE_SCORES);
	free(jb), free(qb);
}

dg_bscores *gb_pooled(dg_backend *be, dg_bgroups *bg, dg_kv_kind kv)
{
	gpu *g = be->impl;
	gb_flush(be);
	int cols = kv == DG_KV_BLOCK ? (be->n + DG_KV_BLOCK_SIZE - 1) / DG_KV_BLOCK_SIZE : be->n;
	dg_bscores *s = scores_new(g, bg->g.ngroups, cols);
	gb_phase_begin(g);
	KERNEL_CHECK(dg_pooled_scores(g->dq, g->dk, be->n, be->d, bg->perm, bg->off, bg->g.ngroups,
				      kv == DG_KV_BLOCK, s->s, (dg_stream)g->stream));
	gb_phase_end(g, DG_PHASE_SCORES);
	return s;
}

/* the block sums were made with the token scores: a view of them */
dg_bscores *gb_to_blocks(dg_backend *be, const dg_bscores *t)
{
	gb_flush(be);
	dg_bscores *view = dg_malloc(sizeof *view);
	*view = *t->blocks;
	view->owned = 0;
	view->blocks = NULL;
	return view;
}


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
dg_bscores *gb_vote(dg_backend *be, const dg_bgroups *to, const dg_bgroups *from, const dg_bsel *sel,
			    dg_kv_kind kv)
{
	gpu *g = be->impl;
	gb_flush(be);
	int cols = kv == DG_KV_BLOCK ? (be->n + DG_KV_BLOCK_SIZE - 1) / DG_KV_BLOCK_SIZE : be->n;
	dg_groups ht = groups_host(g, to), hf = groups_host(g, from);
	dg_selection lists;
	gb_sel_lists(be, sel, &lists);
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

dg_bsel *gb_select(dg_backend *be, const dg_bgroups *bg, const dg_bscores *sc, const dg_budget *b_in)
{
	gpu *g = be->impl;
	gb_flush(be);
	const dg_budget jb = dg_joint_budget(b_in, be->n, g->text), *b = &jb; /* text keys outside the ranking */
	int kv = b->kv == DG_KV_BLOCK, budget = b->budget == DG_BUDGET_TOPP, ng = bg->g.ngroups;
	int64_t cap = dg_select_keys_cap(ng, be->n, kv, budget, b->rho, b->sink_lo, b->sink_hi);
	dg_bsel *s;
	if (!kv && !budget) { /* token top-k: the same count in every group, known here */
		s = sel_fixed(g, ng, dg_query_topk_row(be->n, dg_topk_count(b->rho, be->n), b->sink_lo, b->sink_hi),
			      false);
	} else {
		s = gb_sel_new(g, ng);
		s->idx = gb_dmalloc(g, (size_t)cap * 4);
	}
	gb_phase_begin(g);
	KERNEL_CHECK(dg_select_keys(sc->s, ng, be->n, kv, budget, b->rho, b->topp, b->sink_lo, b->sink_hi,
				    s->off, s->idx, cap, (dg_stream)g->stream));
	s = joint_keys(be, s, bg->text_groups, cap);
	gb_phase_end(g, DG_PHASE_SELECT);
	return s;
}

/* a selection's lists on the host, as the kernel reads them (a bitmap decoded on the device) */
void gb_sel_lists(dg_backend *be, const dg_bsel *csel, dg_selection *out)
{
	gpu *g = be->impl;
	gb_flush(be);
	dg_bsel *sel = (dg_bsel *)csel;
	const int64_t *hoff = gb_sel_hoff(g, sel);
	out->ngroups = sel->ngroups;
	out->off = dg_malloc((size_t)(sel->ngroups + 1) * sizeof *out->off);
	memcpy(out->off, hoff, (size_t)(sel->ngroups + 1) * sizeof *out->off);
	out->idx = dg_malloc((size_t)(hoff[sel->ngroups] > 0 ? hoff[sel->ngroups] : 1) * 4);
	CUDA_CHECK(cudaMemcpyAsync(out->idx, gb_sel_keys(be, sel, 0), (size_t)hoff[sel->ngroups] * 4,
				   cudaMemcpyDeviceToHost, g->stream));
	CUDA_CHECK(cudaStreamSynchronize(g->stream));
}

#endif
