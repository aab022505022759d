/*
 * backend_gpu.c: the GPU backend of the policies (backend.h) over the kernels of kernels/.
 * Built only with CUDA (DG_HAVE_CUDA); without it dg_backend_gpu says so and returns NULL.
 */
#include "backend.h"

#include "util.h"

#ifdef DG_HAVE_CUDA

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "cuda_check.h"
#include "dsgap_kernels.h"
#include "groups.h"

/*
 * Handles live on the device. Groupings keep their host offsets too (group sizes count the
 * computed pairs), selections their host offsets; everything the kernels read is on the device.
 */
struct dg_bgroups {
	dg_groups g;         /* host: perm and off (perm only where built on the host) */
	int32_t *perm, *off; /* device */
};
struct dg_bscores {
	int rows, cols;
	float *s;                /* device (rows, cols) */
	struct dg_bscores *blocks; /* exact token scores: their block sums, made in the same pass */
	int owned;
};
struct dg_bsel {
	int ngroups;
	int64_t *hoff;   /* host (ngroups+1) */
	int64_t *off;    /* device (ngroups+1) */
	int32_t *idx;    /* device */
};
struct dg_bvec {
	float *x; /* device (n, d) */
};

typedef struct {
	const float *q, *k, *v;  /* host unit (caller's buffers), for the host twins */
	uint16_t *hq;            /* pinned bf16 staging (3, n, d) */
	uint16_t *dq, *dk, *dv;  /* device bf16 (n, d) */
	float *o_ref, *lse, *out, *o_sp, *mass; /* device */
	double *dmet;            /* device (6) */
	float *h_lse;            /* host copy, for the host twin of the per-query top-p */
	cudaStream_t stream;
	cudaEvent_t ev[2];
} gpu;

static void *dmalloc(size_t bytes)
{
	void *p;
	CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 16));
	return p;
}

static void gpu_load(dg_backend *be, const float *q, const float *k, const float *v)
{
	gpu *g = be->impl;
	size_t nd = (size_t)be->n * be->d;
	g->q = q, g->k = k, g->v = v;
	const float *src[3] = { q, k, v };
	uint16_t *dst[3] = { g->dq, g->dk, g->dv };
	CUDA_CHECK(cudaStreamSynchronize(g->stream)); /* the staging buffer may still be in flight */
	for (int t = 0; t < 3; t++) {
		uint16_t *h = g->hq + t * nd;
		for (size_t e = 0; e < nd; e++)
			h[e] = dg_f32_to_bf16(src[t][e]); /* exact: trace values are bf16 */
		CUDA_CHECK(cudaMemcpyAsync(dst[t], h, nd * 2, cudaMemcpyHostToDevice, g->stream));
	}
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
	timed_begin(g);
	KERNEL_CHECK(dg_flash_fwd(g->dq, g->dk, g->dv, 1, be->n, be->d, g->o_ref, NULL, g->lse,
				  (dg_stream)g->stream));
	double s = timed_end(g);
	CUDA_CHECK(cudaMemcpyAsync(g->h_lse, g->lse, (size_t)be->n * 4, cudaMemcpyDeviceToHost, g->stream));
	return s;
}

/* a host grouping's perm and offsets onto the device */
static void groups_upload(dg_bgroups *bg)
{
	bg->perm = dmalloc((size_t)bg->g.n * 4);
	bg->off = dmalloc((size_t)(bg->g.ngroups + 1) * 4);
	CUDA_CHECK(cudaMemcpy(bg->perm, bg->g.perm, (size_t)bg->g.n * 4, cudaMemcpyHostToDevice));
	CUDA_CHECK(cudaMemcpy(bg->off, bg->g.off, (size_t)(bg->g.ngroups + 1) * 4, cudaMemcpyHostToDevice));
}

static dg_bgroups *gpu_groups(dg_backend *be, dg_group_kind kind, const int grid[3], int text)
{
	gpu *g = be->impl;
	int n = be->n;
	dg_bgroups *bg = dg_calloc(1, sizeof *bg);
	if (kind == DG_GROUP_PCA) {
		int ng = (n + DG_GROUP_SIZE - 1) / DG_GROUP_SIZE;
		bg->perm = dmalloc((size_t)n * 4);
		bg->off = dmalloc((size_t)(ng + 1) * 4);
		KERNEL_CHECK(dg_pca_groups(g->dq, n, be->d, bg->perm, bg->off, (dg_stream)g->stream));
		bg->g.n = n;
		bg->g.ngroups = ng;
		bg->g.off = dg_malloc((size_t)(ng + 1) * sizeof(int));
		CUDA_CHECK(cudaMemcpyAsync(bg->g.off, bg->off, (size_t)(ng + 1) * 4, cudaMemcpyDeviceToHost, g->stream));
		CUDA_CHECK(cudaStreamSynchronize(g->stream));
		return bg;
	}
	if (dg_groups_build(&bg->g, kind, g->q, n, be->d, grid, text)) {
		free(bg);
		return NULL;
	}
	groups_upload(bg);
	return bg;
}

static dg_bscores *scores_new(int rows, int cols)
{
	dg_bscores *s = dg_calloc(1, sizeof *s);
	s->rows = rows, s->cols = cols, s->owned = 1;
	s->s = dmalloc((size_t)rows * cols * 4);
	return s;
}

static dg_bsel *sel_new(int ngroups)
{
	dg_bsel *s = dg_calloc(1, sizeof *s);
	s->ngroups = ngroups;
	s->hoff = dg_malloc((size_t)(ngroups + 1) * 8);
	s->off = dmalloc((size_t)(ngroups + 1) * 8);
	return s;
}

/* a host selection (the twin's) onto the device */
static dg_bsel *sel_from_host(const dg_selection *h)
{
	dg_bsel *s = sel_new(h->ngroups);
	int64_t total = h->off[h->ngroups];
	memcpy(s->hoff, h->off, (size_t)(h->ngroups + 1) * 8);
	s->idx = dmalloc((size_t)total * 4);
	CUDA_CHECK(cudaMemcpy(s->off, h->off, (size_t)(h->ngroups + 1) * 8, cudaMemcpyHostToDevice));
	CUDA_CHECK(cudaMemcpy(s->idx, h->idx, (size_t)total * 4, cudaMemcpyHostToDevice));
	return s;
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
		qsel[b] = sel_from_host(&h[b]);
		dg_selection_free(&h[b]);
	}
	free(h);
}

static void gpu_exact(dg_backend *be, dg_bgroups *const *groups, dg_bscores **scores, int nacc,
		      const dg_budget *const *qb, dg_bsel **qsel, int nq)
{
	gpu *g = be->impl;
	int n = be->n, nb = (n + DG_KV_BLOCK_SIZE - 1) / DG_KV_BLOCK_SIZE;
	for (int a = 0; a < nacc; a++) {
		scores[a] = scores_new(groups[a]->g.ngroups, n);
		scores[a]->blocks = scores_new(groups[a]->g.ngroups, nb);
		KERNEL_CHECK(dg_exact_scores(g->dq, g->dk, g->lse, n, be->d, groups[a]->perm, groups[a]->off,
					     groups[a]->g.ngroups, scores[a]->s, scores[a]->blocks->s,
					     (dg_stream)g->stream));
	}
	if (!nq)
		return;
	/* the oracle's top-k on the device: every budget top-k over tokens with the same sinks */
	bool device = nq <= 8;
	for (int b = 0; b < nq; b++)
		device &= qb[b]->budget == DG_BUDGET_TOPK && qb[b]->kv == DG_KV_TOKEN &&
			  qb[b]->sink_lo == qb[0]->sink_lo && qb[b]->sink_hi == qb[0]->sink_hi;
	if (!device) {
		query_select_host(be, qb, qsel, nq);
		return;
	}
	int K[8];
	int32_t *rows[8];
	for (int b = 0; b < nq; b++) {
		K[b] = dg_topk_count(qb[b]->rho, n);
		int row = dg_query_topk_row(n, K[b], qb[b]->sink_lo, qb[b]->sink_hi);
		qsel[b] = sel_new(n);
		for (int i = 0; i <= n; i++)
			qsel[b]->hoff[i] = (int64_t)i * row;
		CUDA_CHECK(cudaMemcpyAsync(qsel[b]->off, qsel[b]->hoff, (size_t)(n + 1) * 8,
					   cudaMemcpyHostToDevice, g->stream));
		rows[b] = qsel[b]->idx = dmalloc((size_t)n * row * 4);
	}
	KERNEL_CHECK(dg_query_topk(g->dq, g->dk, g->lse, n, be->d, nq, K, qb[0]->sink_lo, qb[0]->sink_hi,
				   rows, (dg_stream)g->stream));
	CUDA_CHECK(cudaStreamSynchronize(g->stream)); /* hoff staging */
}

static dg_bscores *gpu_pooled(dg_backend *be, dg_bgroups *bg, dg_kv_kind kv)
{
	gpu *g = be->impl;
	int cols = kv == DG_KV_BLOCK ? (be->n + DG_KV_BLOCK_SIZE - 1) / DG_KV_BLOCK_SIZE : be->n;
	dg_bscores *s = scores_new(bg->g.ngroups, cols);
	KERNEL_CHECK(dg_pooled_scores(g->dq, g->dk, be->n, be->d, bg->perm, bg->off, bg->g.ngroups,
				      kv == DG_KV_BLOCK, s->s, (dg_stream)g->stream));
	return s;
}

/* the block sums were made with the token scores: a view of them */
static dg_bscores *gpu_to_blocks(dg_backend *be, const dg_bscores *t)
{
	dg_bscores *view = dg_malloc(sizeof *view);
	*view = *t->blocks;
	view->owned = 0;
	view->blocks = NULL;
	return view;
}

static dg_bsel *gpu_select(dg_backend *be, const dg_bgroups *bg, const dg_bscores *sc, const dg_budget *b)
{
	gpu *g = be->impl;
	int kv = b->kv == DG_KV_BLOCK, budget = b->budget == DG_BUDGET_TOPP;
	dg_bsel *s = sel_new(bg->g.ngroups);
	int64_t cap = dg_select_keys_cap(bg->g.ngroups, be->n, kv, budget, b->rho, b->sink_lo, b->sink_hi);
	s->idx = dmalloc((size_t)cap * 4);
	KERNEL_CHECK(dg_select_keys(sc->s, bg->g.ngroups, be->n, kv, budget, b->rho, b->topp, b->sink_lo,
				    b->sink_hi, s->off, s->idx, cap, (dg_stream)g->stream));
	CUDA_CHECK(cudaMemcpyAsync(s->hoff, s->off, (size_t)(bg->g.ngroups + 1) * 8, cudaMemcpyDeviceToHost,
				   g->stream));
	CUDA_CHECK(cudaStreamSynchronize(g->stream));
	DG_ASSERT(s->hoff[bg->g.ngroups] <= cap);
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

static int64_t gpu_attend(dg_backend *be, const dg_bgroups *bg, const dg_bsel *sel,
			  const dg_bvec *residual, dg_bvec **new_residual, dg_metrics *m, double *seconds)
{
	gpu *g = be->impl;
	size_t nd = (size_t)be->n * be->d;
	dg_stream st = (dg_stream)g->stream;
	if (new_residual && !*new_residual) {
		*new_residual = dg_malloc(sizeof(dg_bvec));
		(*new_residual)->x = dmalloc(nd * 4);
	}
	timed_begin(g);
	if (new_residual) {
		/* O_sparse without the old residual first: the new residual needs it alone */
		KERNEL_CHECK(dg_sparse_fwd(g->dq, g->dk, g->dv, 1, be->n, be->d, bg->perm, bg->off,
					   bg->g.ngroups, sel->off, sel->idx, NULL, g->lse, g->o_sp, g->mass, st));
		KERNEL_CHECK(dg_residual_update(g->o_ref, g->o_sp, residual ? residual->x : NULL, g->out,
						(*new_residual)->x, nd, st));
	} else {
		KERNEL_CHECK(dg_sparse_fwd(g->dq, g->dk, g->dv, 1, be->n, be->d, bg->perm, bg->off,
					   bg->g.ngroups, sel->off, sel->idx, residual ? residual->x : NULL,
					   g->lse, g->out, g->mass, st));
	}
	double s = timed_end(g);
	if (seconds)
		*seconds = s;
	if (m)
		out_metrics(be, m);
	int64_t pairs = 0;
	for (int grp = 0; grp < bg->g.ngroups; grp++)
		pairs += (int64_t)(bg->g.off[grp + 1] - bg->g.off[grp]) * (sel->hoff[grp + 1] - sel->hoff[grp]);
	return pairs;
}

/* the peers' metadata: the host twin (peers.c), as the per-query top-p does, then onto the device
 * (no device kernel for their scoring yet) */
static int gpu_peer(dg_backend *be, const dg_policy *p, const dg_budget *b, const int grid[3], int text,
		    dg_peer_state **state, dg_bgroups **groups, dg_bsel **sel)
{
	gpu *g = be->impl;
	dg_bgroups *bg = dg_calloc(1, sizeof *bg);
	dg_selection h;
	if (dg_peer_metadata(g->q, g->k, be->n, be->d, p, b, grid, text, state, &bg->g, &h)) {
		free(bg);
		return -1;
	}
	groups_upload(bg);
	*groups = bg;
	*sel = sel_from_host(&h);
	dg_selection_free(&h);
	return 0;
}

/* PISA's first-order term: the host twin on the sparse output and mass brought back */
static void gpu_approx(dg_backend *be, const dg_bgroups *bg, const dg_bsel *sel, int block, dg_metrics *m)
{
	gpu *g = be->impl;
	size_t nd = (size_t)be->n * be->d;
	float *out = dg_malloc(nd * 4), *mass = dg_malloc((size_t)be->n * 4);
	dg_selection hs = { sel->ngroups, sel->hoff, dg_malloc((size_t)sel->hoff[sel->ngroups] * 4) };
	CUDA_CHECK(cudaMemcpyAsync(out, g->out, nd * 4, cudaMemcpyDeviceToHost, g->stream));
	CUDA_CHECK(cudaMemcpyAsync(mass, g->mass, (size_t)be->n * 4, cudaMemcpyDeviceToHost, g->stream));
	CUDA_CHECK(cudaMemcpyAsync(hs.idx, sel->idx, (size_t)sel->hoff[sel->ngroups] * 4,
				   cudaMemcpyDeviceToHost, g->stream));
	CUDA_CHECK(cudaStreamSynchronize(g->stream)); /* and h_lse */
	dg_pisa_combine(g->q, g->k, g->v, g->h_lse, be->n, be->d, block, &bg->g, &hs, out, mass, out);
	CUDA_CHECK(cudaMemcpyAsync(g->out, out, nd * 4, cudaMemcpyHostToDevice, g->stream));
	if (m)
		out_metrics(be, m);
	CUDA_CHECK(cudaStreamSynchronize(g->stream));
	free(out), free(mass), free(hs.idx);
}

static void gpu_output(dg_backend *be, bool dense, float *o)
{
	gpu *g = be->impl;
	CUDA_CHECK(cudaMemcpyAsync(o, dense ? g->o_ref : g->out, (size_t)be->n * be->d * 4,
				   cudaMemcpyDeviceToHost, g->stream));
	CUDA_CHECK(cudaStreamSynchronize(g->stream));
}

static void gpu_groups_free(dg_backend *be, dg_bgroups *g)
{
	if (!g)
		return;
	dg_groups_free(&g->g);
	CUDA_CHECK(cudaFree(g->perm));
	CUDA_CHECK(cudaFree(g->off));
	free(g);
}

static void gpu_scores_free(dg_backend *be, dg_bscores *s)
{
	if (!s)
		return;
	if (s->owned)
		CUDA_CHECK(cudaFree(s->s));
	gpu_scores_free(be, s->blocks);
	free(s);
}

static void gpu_sel_free(dg_backend *be, dg_bsel *s)
{
	if (!s)
		return;
	free(s->hoff);
	CUDA_CHECK(cudaFree(s->off));
	CUDA_CHECK(cudaFree(s->idx));
	free(s);
}

static void gpu_vec_free(dg_backend *be, dg_bvec *v)
{
	if (!v)
		return;
	CUDA_CHECK(cudaFree(v->x));
	free(v);
}

static void gpu_destroy(dg_backend *be)
{
	gpu *g = be->impl;
	CUDA_CHECK(cudaStreamSynchronize(g->stream));
	void *dev[] = { g->o_ref, g->lse, g->out, g->o_sp, g->mass, g->dmet, g->dq, g->dk, g->dv };
	for (size_t i = 0; i < sizeof dev / sizeof *dev; i++)
		CUDA_CHECK(cudaFree(dev[i]));
	CUDA_CHECK(cudaEventDestroy(g->ev[0]));
	CUDA_CHECK(cudaEventDestroy(g->ev[1]));
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
	CUDA_CHECK(cudaEventCreate(&g->ev[0]));
	CUDA_CHECK(cudaEventCreate(&g->ev[1]));
	CUDA_CHECK(cudaMallocHost((void **)&g->hq, 3 * nd * 2));
	CUDA_CHECK(cudaMallocHost((void **)&g->h_lse, (size_t)n * 4));
	g->dq = dmalloc(nd * 2), g->dk = dmalloc(nd * 2), g->dv = dmalloc(nd * 2);
	g->o_ref = dmalloc(nd * 4), g->out = dmalloc(nd * 4), g->o_sp = dmalloc(nd * 4);
	g->lse = dmalloc((size_t)n * 4), g->mass = dmalloc((size_t)n * 4), g->dmet = dmalloc(6 * 8);
	*be = (dg_backend){ .name = "gpu", .n = n, .d = d, .impl = g, .load = gpu_load,
			    .dense = gpu_dense, .groups = gpu_groups, .exact = gpu_exact,
			    .pooled = gpu_pooled, .to_blocks = gpu_to_blocks, .select = gpu_select,
			    .attend = gpu_attend, .peer = gpu_peer, .approx = gpu_approx,
			    .output = gpu_output, .groups_free = gpu_groups_free,
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
