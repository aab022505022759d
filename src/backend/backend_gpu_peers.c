/*
 * backend_gpu_peers.c: the GPU backend's peers (backend_gpu.h): the block peers' scores and takes
 * (on the side stream), DiTFastAttn's shared window lists, svg2's k-means, the static masks (radial,
 * sta) and PISA's first-order term.
 * Built only with CUDA (DG_HAVE_CUDA).
 */
#include "backend/backend_gpu.h"

#ifdef DG_HAVE_CUDA

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
 * metadata for every head before its attends); the selection's users wait for it (gb_sel_ready). */
static int gpu_peer_blocks(dg_backend *be, const dg_policy *p, const dg_budget *b, int text, dg_bgroups **groups,
			   dg_bsel **sel)
{
	gpu *g = be->impl;
	int n = be->n, bs = dg_peer_block_size(p), G = (n + bs - 1) / bs;
	int kind = p->score == DG_SCORE_SPARGE ? DG_PEER_SPARGE : p->score == DG_SCORE_ANTIDIAG ? DG_PEER_ANTIDIAG
												  : DG_PEER_POOLED;
	size_t gg = (size_t)G * G;
	float *ds = gb_dmalloc(g, gg * 4);       /* (G, G) block scores */
	uint8_t *dtake = gb_dmalloc(g, gg);      /* (G, G) taken blocks */
	dg_bgroups *bg = dg_calloc(1, sizeof *bg);
	int *row;
	int forced = dg_peer_block_groups(n, p, text, &bg->g, &row);
	bg->id = g->next_id++;
	gb_groups_upload(g, bg);
	int ng = bg->g.ngroups;
	int32_t *drow = gb_dmalloc(g, (size_t)ng * 4); /* (ng) each group's block row */
	CUDA_CHECK(cudaMemcpyAsync(drow, row, (size_t)ng * 4, cudaMemcpyHostToDevice, g->stream));
	free(row);
	dg_bsel *s = gb_sel_new(g, ng);
	s->n = n;
	s->bits = gb_dmalloc(g, (size_t)ng * dg_bitmap_words(n) * 4);
	bool skip = p->score == DG_SCORE_RUNMAX;
	gb_phase_begin(g);
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
	gb_phase_end(g, DG_PHASE_SCORES);
	CUDA_CHECK(cudaEventRecord(g->made.fork, g->stream)); /* the scores, and every buffer above, made */
	CUDA_CHECK(cudaStreamWaitEvent(g->side, g->made.fork, 0));
	gb_phase_begin_on(g, g->side);
	if (!skip)
		KERNEL_CHECK(dg_peer_take_dev(ds, G, G, NULL, NULL, NULL, bs, n, b->budget == DG_BUDGET_TOPK,
					      dg_topk_count(b->rho, n), b->topp, p->matched, b->rho, DG_PEER_MATCH_STEPS,
					      b->sink_lo, b->sink_hi, 0, dtake, (dg_stream)g->side));
	KERNEL_CHECK(dg_peer_expand(dtake, G, bs, NULL, NULL, drow, ng, n, b->sink_lo, b->sink_hi, forced, s->bits, s->off,
				    (dg_stream)g->side));
	gb_phase_end_on(g, g->side, DG_PHASE_SELECT);
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
		sh->off = gb_dmalloc(g, (size_t)(n + 1) * 8);
		sh->idx = gb_dmalloc(g, (size_t)total * 4);
		g->windows = sh;
		gb_phase_begin(g);
		KERNEL_CHECK(dg_peer_window(n, text, w, sh->off, sh->idx, (dg_stream)g->stream));
		gb_phase_end(g, DG_PHASE_SELECT);
	}
	dg_bgroups *bg = dg_calloc(1, sizeof *bg);
	dg_groups_raster(&bg->g, n, 1);
	bg->id = g->next_id++;
	gb_groups_upload(g, bg);
	dg_bsel *s = gb_sel_new(g, n);
	gb_dfree(g, s->off);
	s->off = sh->off;
	s->idx = sh->idx;
	s->shared = sh;
	sh->refs++;
	*groups = bg;
	*sel = s;
	return 0;
}

/* one selection fewer holds sh: freed with the last */
void gb_shared_release(gpu *g, shared_lists *sh)
{
	if (--sh->refs > 0)
		return;
	shared_lists **p = &g->windows;
	while (*p != sh)
		p = &(*p)->next;
	*p = sh->next;
	gb_dfree(g, sh->off);
	gb_dfree(g, sh->idx);
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
	int32_t *qperm = gb_dmalloc(g, (size_t)n * 4), *scratch = gb_dmalloc(g, ((size_t)3 * n + 2 * qc + 2 * kc) * 4);
	int32_t *ql = scratch, *kl = ql + n, *kperm = kl + n, *cnt = kperm + n;
	/* K's k-means on side while Q's runs on the stream: a cluster's update is one CTA's chain, and a
	 * launch of either has ~100 CTAs, so the two fill the device together */
	gb_phase_begin(g);
	CUDA_CHECK(cudaEventRecord(g->made.fork, g->stream)); /* the scratch above, and Q and K, made */
	CUDA_CHECK(cudaStreamWaitEvent(g->side, g->made.fork, 0));
	KERNEL_CHECK(dg_peer_kmeans(g->dk, n, d, ck, kc, cold ? 50 : 2, cold, 0, kl, kperm, cnt + 2 * qc,
				    (dg_stream)g->side));
	CUDA_CHECK(cudaEventRecord(g->ev_join, g->side));
	KERNEL_CHECK(dg_peer_kmeans(g->dq, n, d, cq, qc, cold ? 50 : 2, cold, text, ql, qperm, cnt, (dg_stream)g->stream));
	CUDA_CHECK(cudaStreamWaitEvent(g->stream, g->ev_join, 0));
	gb_phase_end(g, DG_PHASE_GROUPS);
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
	int32_t *dk = gb_dmalloc(g, ((size_t)3 * qc + 4 * kc) * 4); /* hk's layout */
	int32_t *dqkeep = dk, *dkkeep = dk + qc, *dgsize = dkkeep + kc, *dpsize = dgsize + qc, *dpsink = dpsize + kc,
		*dkidx = dpsink + kc;
	double *dw = gb_dmalloc(g, (size_t)P * 8);
	float *ds = gb_dmalloc(g, (size_t)G * P * 4);
	uint8_t *dtake = gb_dmalloc(g, (size_t)G * P);
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
	bg->off = gb_dmalloc(g, (size_t)(ng + 1) * 4);
	int32_t *drow = gb_dmalloc(g, (size_t)ng * 4);
	CUDA_CHECK(cudaMemcpyAsync(bg->off, bg->g.off, (size_t)(ng + 1) * 4, cudaMemcpyHostToDevice, g->stream));
	CUDA_CHECK(cudaMemcpyAsync(drow, row, (size_t)ng * 4, cudaMemcpyHostToDevice, g->stream));
	gb_phase_begin(g);
	KERNEL_CHECK(dg_peer_svg2_scores(cq, dqkeep, G, ck, dkkeep, P, dw, d, ds, (dg_stream)g->stream));
	gb_phase_end(g, DG_PHASE_SCORES);
	gb_phase_begin(g);
	KERNEL_CHECK(dg_peer_take_dev(ds, G, P, dgsize, dpsize, dpsink, 1, n, b->budget == DG_BUDGET_TOPK,
				      dg_topk_count(b->rho, n), b->topp, p->matched, b->rho, DG_PEER_MATCH_STEPS, b->sink_lo,
				      b->sink_hi, min_parts, dtake, (dg_stream)g->stream));
	gb_phase_end(g, DG_PHASE_SELECT);
	dg_bsel *s = gb_sel_new(g, ng);
	s->n = n;
	s->bits = gb_dmalloc(g, (size_t)ng * dg_bitmap_words(n) * 4);
	gb_phase_begin(g);
	KERNEL_CHECK(dg_peer_expand(dtake, P, 1, kl, dkidx, drow, ng, n, lo, hi, text, s->bits, s->off,
				    (dg_stream)g->stream));
	gb_phase_end(g, DG_PHASE_SELECT);
	/* the uploads above are from pageable memory, staged before the calls returned, and queued
	 * before the kernels (a pageable upload waits for the stream's earlier work) */
	gb_dfree(g, scratch), gb_dfree(g, dk), gb_dfree(g, dw), gb_dfree(g, ds), gb_dfree(g, dtake), gb_dfree(g, drow);
	free(hc), free(hk), free(wsize), free(row);
	*groups = bg;
	*sel = s;
	return 0;
}

void gb_static_mask_free(gpu *g, static_mask *m)
{
	dg_groups_free(&m->g);
	free(m->hoff);
	gb_dfree(g, m->perm), gb_dfree(g, m->off), gb_dfree(g, m->soff), gb_dfree(g, m->idx);
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
			gb_static_mask_free(g, m);
		const int ng = hg.ngroups;
		const int64_t total = hs.off[ng];
		*m = (static_mask){ .key = *key, .g = hg, .hoff = hs.off };
		m->perm = gb_dmalloc(g, (size_t)hg.n * 4);
		m->off = gb_dmalloc(g, (size_t)(ng + 1) * 4);
		m->soff = gb_dmalloc(g, (size_t)(ng + 1) * 8);
		m->idx = gb_dmalloc(g, (size_t)total * 4);
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
	bg->perm = gb_dmalloc(g, (size_t)n * 4);
	bg->off = gb_dmalloc(g, (size_t)(ng + 1) * 4);
	CUDA_CHECK(cudaMemcpyAsync(bg->perm, m->perm, (size_t)n * 4, cudaMemcpyDeviceToDevice, g->stream));
	CUDA_CHECK(cudaMemcpyAsync(bg->off, m->off, (size_t)(ng + 1) * 4, cudaMemcpyDeviceToDevice, g->stream));
	dg_bsel *s = gb_sel_new(g, ng);
	memcpy(s->hoff, m->hoff, (size_t)(ng + 1) * 8);
	s->hoff_known = true;
	s->idx = gb_dmalloc(g, (size_t)total * 4);
	CUDA_CHECK(cudaMemcpyAsync(s->off, m->soff, (size_t)(ng + 1) * 8, cudaMemcpyDeviceToDevice, g->stream));
	CUDA_CHECK(cudaMemcpyAsync(s->idx, m->idx, (size_t)total * 4, cudaMemcpyDeviceToDevice, g->stream));
	*groups = bg;
	*sel = s;
	return 0;
}

/* the peers' metadata, on the device: the block peers', svg2's and DiTFastAttn's window
 * (gpu_peer_blocks, gpu_peer_svg2, gpu_peer_window) and the static masks kept there
 * (gpu_peer_static: radial, sta); the host twin only for a static mask's first call */
int gb_peer(dg_backend *be, const dg_policy *p, const dg_budget *b, const int grid[3], int text,
		    dg_peer_state **state, dg_bgroups **groups, dg_bsel **sel)
{
	gpu *g = be->impl;
	gb_flush(be);
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
void gb_approx(dg_backend *be, const dg_bgroups *bg, const dg_bsel *sel, int block, dg_metrics *m)
{
	gpu *g = be->impl;
	gb_flush(be);
	gb_phase_begin(g);
	KERNEL_CHECK(dg_pisa_first_order(g->dq, g->dk, g->dv, be->n, be->d, block, bg->perm, bg->off, bg->g.ngroups,
					 sel->off, gb_sel_keys(be, sel, 0), g->lse, g->out, g->mass, g->out,
					 (dg_stream)g->stream));
	gb_phase_end(g, DG_PHASE_ATTEND);
	if (m)
		gb_out_metrics(be, m);
}

#endif
