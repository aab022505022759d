/*
 * backend_gpu.c: the GPU backend of the replay engine (backend.h) over the kernels of kernels/.
 * Built only with CUDA (DG_HAVE_CUDA); without it dg_backend_gpu says so and returns NULL.
 */
#include "backend.h"

#include "util.h"

#ifdef DG_HAVE_CUDA

#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "cuda_check.h"
#include "dsgap_kernels.h"
#include "groups.h"

/*
 * Handles: groupings and selections are kept on the host (the CPU twin builds them where no
 * kernel does yet) and mirrored on the device for the attention kernels; residuals live on the
 * device only.
 */
struct dg_bgroups {
	dg_groups g;
	int32_t *perm, *off; /* device mirrors */
};
struct dg_bscores {
	int rows, cols;
	float *s; /* host (rows, cols) */
};
struct dg_bsel {
	dg_selection s;
	int64_t *off; /* device mirrors */
	int32_t *idx;
};
struct dg_bvec {
	float *x; /* device (n, d) */
};

typedef struct {
	const float *q, *k, *v;      /* host unit (caller's buffers) */
	uint16_t *hq;                /* host bf16 staging (3, n, d) */
	uint16_t *dq, *dk, *dv;      /* device bf16 (n, d) */
	float *o_ref, *lse, *out, *o_sp, *mass; /* device */
	float *h_ref, *h_out, *h_mass, *h_lse; /* host copies for the metrics and the twins */
	cudaStream_t stream;
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
	for (int t = 0; t < 3; t++) {
		uint16_t *h = g->hq + t * nd;
		for (size_t e = 0; e < nd; e++)
			h[e] = dg_f32_to_bf16(src[t][e]); /* exact: trace values are bf16 */
		CUDA_CHECK(cudaMemcpyAsync(dst[t], h, nd * 2, cudaMemcpyHostToDevice, g->stream));
	}
}

static double gpu_dense(dg_backend *be)
{
	gpu *g = be->impl;
	size_t nd = (size_t)be->n * be->d;
	cudaEvent_t a, b;
	CUDA_CHECK(cudaEventCreate(&a));
	CUDA_CHECK(cudaEventCreate(&b));
	CUDA_CHECK(cudaEventRecord(a, g->stream));
	KERNEL_CHECK(dg_flash_fwd(g->dq, g->dk, g->dv, 1, be->n, be->d, g->o_ref, NULL, g->lse,
				  (dg_stream)g->stream));
	CUDA_CHECK(cudaEventRecord(b, g->stream));
	CUDA_CHECK(cudaMemcpyAsync(g->h_ref, g->o_ref, nd * 4, cudaMemcpyDeviceToHost, g->stream));
	CUDA_CHECK(cudaMemcpyAsync(g->h_lse, g->lse, (size_t)be->n * 4, cudaMemcpyDeviceToHost, g->stream));
	CUDA_CHECK(cudaStreamSynchronize(g->stream));
	float ms;
	CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
	cudaEventDestroy(a);
	cudaEventDestroy(b);
	return ms * 1e-3;
}

static dg_bgroups *gpu_groups(dg_backend *be, dg_group_kind kind, const int grid[3], int text)
{
	gpu *g = be->impl;
	dg_bgroups *bg = dg_calloc(1, sizeof *bg);
	if (dg_groups_build(&bg->g, kind, g->q, be->n, be->d, grid, text)) {
		free(bg);
		return NULL;
	}
	bg->perm = dmalloc((size_t)be->n * 4);
	bg->off = dmalloc((size_t)(bg->g.ngroups + 1) * 4);
	CUDA_CHECK(cudaMemcpy(bg->perm, bg->g.perm, (size_t)be->n * 4, cudaMemcpyHostToDevice));
	CUDA_CHECK(cudaMemcpy(bg->off, bg->g.off, (size_t)(bg->g.ngroups + 1) * 4, cudaMemcpyHostToDevice));
	return bg;
}

static dg_bscores *scores_new(int rows, int cols)
{
	dg_bscores *s = dg_malloc(sizeof *s);
	s->rows = rows, s->cols = cols;
	s->s = dg_malloc((size_t)rows * cols * sizeof(float));
	return s;
}

static dg_bsel *sel_upload(dg_bsel *s)
{
	int64_t total = s->s.off[s->s.ngroups];
	s->off = dmalloc((size_t)(s->s.ngroups + 1) * 8);
	s->idx = dmalloc((size_t)total * 4);
	CUDA_CHECK(cudaMemcpy(s->off, s->s.off, (size_t)(s->s.ngroups + 1) * 8, cudaMemcpyHostToDevice));
	CUDA_CHECK(cudaMemcpy(s->idx, s->s.idx, (size_t)total * 4, cudaMemcpyHostToDevice));
	return s;
}

/* per-query selections on the host twin: the rows of the exact pass */
typedef struct {
	int n, nb;
	const dg_budget *const *budgets;
	int **rows, *counts; /* [b * n + i] */
} qsel_ctx;

static void qsel_row(void *ctx, int i, const float *p)
{
	qsel_ctx *q = ctx;
	int *buf = dg_malloc((size_t)q->n * sizeof(int));
	void *work = dg_malloc(dg_select_work_size(q->n));
	for (int b = 0; b < q->nb; b++) {
		int c = dg_select_row(p, q->n, q->budgets[b], buf, work);
		q->counts[(size_t)b * q->n + i] = c;
		q->rows[(size_t)b * q->n + i] = memcpy(dg_malloc((size_t)c * sizeof(int)), buf, (size_t)c * sizeof(int));
	}
	free(buf);
	free(work);
}

static void gpu_exact(dg_backend *be, dg_bgroups *const *groups, dg_bscores **scores, int nacc,
		      const dg_budget *const *qb, dg_bsel **qsel, int nq)
{
	gpu *g = be->impl;
	int n = be->n;
	dg_score_acc *acc = dg_malloc((size_t)(nacc ? nacc : 1) * sizeof *acc);
	for (int a = 0; a < nacc; a++) {
		scores[a] = scores_new(groups[a]->g.ngroups, n);
		acc[a] = (dg_score_acc){ &groups[a]->g, scores[a]->s };
	}
	qsel_ctx qs = { n, nq, qb, dg_malloc((size_t)(nq ? nq : 1) * n * sizeof(int *)),
			dg_malloc((size_t)(nq ? nq : 1) * n * sizeof(int)) };
	dg_scores_exact(g->q, g->k, g->h_lse, n, be->d, acc, nacc, nq ? qsel_row : NULL, &qs);
	for (int b = 0; b < nq; b++) {
		dg_bsel *s = dg_calloc(1, sizeof *s);
		s->s.ngroups = n;
		s->s.off = dg_malloc((size_t)(n + 1) * sizeof(int64_t));
		s->s.off[0] = 0;
		for (int i = 0; i < n; i++)
			s->s.off[i + 1] = s->s.off[i] + qs.counts[(size_t)b * n + i];
		s->s.idx = dg_malloc((size_t)s->s.off[n] * sizeof(int));
		for (int i = 0; i < n; i++) {
			memcpy(s->s.idx + s->s.off[i], qs.rows[(size_t)b * n + i],
			       (size_t)qs.counts[(size_t)b * n + i] * sizeof(int));
			free(qs.rows[(size_t)b * n + i]);
		}
		qsel[b] = sel_upload(s);
	}
	free(qs.rows);
	free(qs.counts);
	free(acc);
}

static dg_bscores *gpu_pooled(dg_backend *be, dg_bgroups *bg, dg_kv_kind kv)
{
	gpu *g = be->impl;
	int cols = kv == DG_KV_BLOCK ? (be->n + DG_KV_BLOCK_SIZE - 1) / DG_KV_BLOCK_SIZE : be->n;
	dg_bscores *s = scores_new(bg->g.ngroups, cols);
	dg_scores_pooled(g->q, g->k, be->n, be->d, &bg->g, kv, s->s);
	return s;
}

static dg_bscores *gpu_to_blocks(dg_backend *be, const dg_bscores *t)
{
	dg_bscores *s = scores_new(t->rows, (be->n + DG_KV_BLOCK_SIZE - 1) / DG_KV_BLOCK_SIZE);
	dg_scores_to_blocks(t->s, t->rows, be->n, s->s);
	return s;
}

static dg_bsel *gpu_select(dg_backend *be, const dg_bgroups *bg, const dg_bscores *sc, const dg_budget *b)
{
	dg_bsel *s = dg_calloc(1, sizeof *s);
	dg_select_groups(&s->s, sc->s, bg->g.ngroups, be->n, b);
	return sel_upload(s);
}

static int64_t gpu_attend(dg_backend *be, const dg_bgroups *bg, const dg_bsel *sel,
			  const dg_bvec *residual, dg_bvec **new_residual, dg_metrics *m, double *seconds)
{
	gpu *g = be->impl;
	size_t nd = (size_t)be->n * be->d;
	cudaEvent_t a, b;
	CUDA_CHECK(cudaEventCreate(&a));
	CUDA_CHECK(cudaEventCreate(&b));
	CUDA_CHECK(cudaEventRecord(a, g->stream));
	/* with a new residual to make, the sparse output without the old residual comes first */
	float *dst = new_residual ? g->o_sp : g->out;
	KERNEL_CHECK(dg_sparse_fwd(g->dq, g->dk, g->dv, 1, be->n, be->d, bg->perm, bg->off,
				   bg->g.ngroups, sel->off, sel->idx,
				   new_residual || !residual ? NULL : residual->x, g->lse, dst, g->mass,
				   (dg_stream)g->stream));
	CUDA_CHECK(cudaEventRecord(b, g->stream));
	CUDA_CHECK(cudaMemcpyAsync(g->h_out, dst, nd * 4, cudaMemcpyDeviceToHost, g->stream));
	CUDA_CHECK(cudaMemcpyAsync(g->h_mass, g->mass, (size_t)be->n * 4, cudaMemcpyDeviceToHost, g->stream));
	CUDA_CHECK(cudaStreamSynchronize(g->stream));
	float ms;
	CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
	cudaEventDestroy(a);
	cudaEventDestroy(b);
	if (seconds)
		*seconds = ms * 1e-3;
	if (new_residual) {
		/* R_new = O_ref - O_sparse (host, then device); out = O_sparse + R_old */
		float *r = dg_malloc(nd * sizeof(float));
		for (size_t e = 0; e < nd; e++)
			r[e] = g->h_ref[e] - g->h_out[e];
		if (residual) {
			float *old = dg_malloc(nd * sizeof(float));
			CUDA_CHECK(cudaMemcpy(old, residual->x, nd * 4, cudaMemcpyDeviceToHost));
			for (size_t e = 0; e < nd; e++)
				g->h_out[e] += old[e];
			free(old);
		}
		if (!*new_residual) {
			*new_residual = dg_malloc(sizeof(dg_bvec));
			(*new_residual)->x = dmalloc(nd * 4);
		}
		CUDA_CHECK(cudaMemcpy((*new_residual)->x, r, nd * 4, cudaMemcpyHostToDevice));
		free(r);
	}
	if (m)
		dg_metrics_compute(g->h_ref, g->h_out, nd, g->h_mass, be->n, m);
	int64_t pairs = 0;
	for (int grp = 0; grp < bg->g.ngroups; grp++)
		pairs += (int64_t)(bg->g.off[grp + 1] - bg->g.off[grp]) * (sel->s.off[grp + 1] - sel->s.off[grp]);
	return pairs;
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
	if (s)
		free(s->s);
	free(s);
}

static void gpu_sel_free(dg_backend *be, dg_bsel *s)
{
	if (!s)
		return;
	dg_selection_free(&s->s);
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
	float *dev[] = { g->o_ref, g->lse, g->out, g->o_sp, g->mass };
	for (size_t i = 0; i < sizeof dev / sizeof *dev; i++)
		CUDA_CHECK(cudaFree(dev[i]));
	CUDA_CHECK(cudaFree(g->dq));
	CUDA_CHECK(cudaFree(g->dk));
	CUDA_CHECK(cudaFree(g->dv));
	CUDA_CHECK(cudaStreamDestroy(g->stream));
	CUDA_CHECK(cudaFreeHost(g->hq));
	CUDA_CHECK(cudaFreeHost(g->h_ref));
	CUDA_CHECK(cudaFreeHost(g->h_out));
	free(g->h_mass);
	free(g->h_lse);
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
	CUDA_CHECK(cudaStreamCreate(&g->stream));
	CUDA_CHECK(cudaMallocHost((void **)&g->hq, 3 * nd * 2));
	CUDA_CHECK(cudaMallocHost((void **)&g->h_ref, nd * 4));
	CUDA_CHECK(cudaMallocHost((void **)&g->h_out, nd * 4));
	g->h_mass = dg_malloc((size_t)n * 4);
	g->h_lse = dg_malloc((size_t)n * 4);
	g->dq = dmalloc(nd * 2), g->dk = dmalloc(nd * 2), g->dv = dmalloc(nd * 2);
	g->o_ref = dmalloc(nd * 4), g->out = dmalloc(nd * 4), g->o_sp = dmalloc(nd * 4);
	g->lse = dmalloc((size_t)n * 4), g->mass = dmalloc((size_t)n * 4);
	*be = (dg_backend){ .name = "gpu", .n = n, .d = d, .impl = g, .load = gpu_load,
			    .dense = gpu_dense, .groups = gpu_groups, .exact = gpu_exact,
			    .pooled = gpu_pooled, .to_blocks = gpu_to_blocks, .select = gpu_select,
			    .attend = gpu_attend, .groups_free = gpu_groups_free,
			    .scores_free = gpu_scores_free, .sel_free = gpu_sel_free,
			    .vec_free = gpu_vec_free, .destroy = gpu_destroy };
	struct cudaDeviceProp prop;
	CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
	snprintf(be->device, sizeof be->device, "gpu: %s (sm_%d%d, %d SMs, %.0f GiB)", prop.name,
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
