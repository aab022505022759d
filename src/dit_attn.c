/*
 * dit_attn.c: the DiT engine's self-attention entry point: capture hook, then dense or a sparse
 * policy in the closed loop with per-(pass, layer, head) metadata and residuals (dit_attn.h).
 */
#include "dit_attn.h"

#include <omp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "groups.h"
#include "select.h"
#include "util.h"

typedef struct {
	bool have;      /* metadata made (refresh=anchor) */
	int meta_step;
	dg_groups g;
	dg_selection sel;
	float *residual; /* (n, d) or NULL */
} unit_state;

struct dg_dit_attn {
	dg_wan_ops *ops;
	bool sparse;         /* a non-dense policy */
	dg_policy policy;
	dg_budget budget;
	dg_schedule sched;
	int grid[3], n, d, layers, heads, passes;
	unit_state *units;   /* (passes, layers, heads) */
	float *o_dense, *o_sp, *lse; /* (n, d), (n, d), (n) scratch of one head */
	dg_attn_capture_fn capture;
	void *capture_user;
	dg_dit_attn_stats stats;
};

dg_dit_attn *dg_dit_attn_new(dg_wan_ops *ops, const dg_policy *policy, double rho,
			     const dg_schedule *schedule, const int grid[3], int layers, int heads, int d,
			     int passes)
{
	bool sparse = policy && !policy->dense;
	if (sparse && strcmp(ops->name, "cpu")) {
		dg_error("policy %s: sparse policies in the DiT loop run on the cpu only for now", policy->name);
		return NULL;
	}
	if (sparse && policy->budget == DG_BUDGET_TOPK && !(rho > 0 && rho <= 1)) {
		dg_error("policy %s: density %g is outside (0, 1]", policy->name, rho);
		return NULL;
	}
	dg_dit_attn *a = dg_calloc(1, sizeof *a);
	a->ops = ops;
	a->sparse = sparse;
	if (policy)
		a->policy = *policy;
	else
		a->policy.dense = true;
	if (schedule)
		a->sched = *schedule;
	if (!a->sched.anchors_given) { /* MC-Sparse: the last warm-up step, else the first step */
		a->sched.nanchors = 1;
		a->sched.anchors[0] = a->sched.warmup > 0 ? a->sched.warmup - 1 : 0;
	}
	memcpy(a->grid, grid, sizeof a->grid);
	a->n = grid[0] * grid[1] * grid[2];
	a->d = d;
	a->layers = layers;
	a->heads = heads;
	a->passes = passes;
	if (sparse) {
		const dg_policy *p = &a->policy;
		a->budget = (dg_budget){ p->kv, p->budget, rho, p->topp, p->sink_lo, p->sink_hi };
		a->units = dg_calloc((size_t)passes * layers * heads, sizeof *a->units);
		a->o_dense = dg_malloc((size_t)a->n * d * sizeof(float));
		a->o_sp = dg_malloc((size_t)a->n * d * sizeof(float));
		a->lse = dg_malloc((size_t)a->n * sizeof(float));
	}
	return a;
}

void dg_dit_attn_set_capture(dg_dit_attn *a, dg_attn_capture_fn fn, void *user)
{
	a->capture = fn;
	a->capture_user = user;
}

static void unit_clear_meta(unit_state *u)
{
	dg_groups_free(&u->g);
	dg_selection_free(&u->sel);
	u->have = false;
}

void dg_dit_attn_free(dg_dit_attn *a)
{
	if (!a)
		return;
	if (a->units)
		for (long long i = 0; i < (long long)a->passes * a->layers * a->heads; i++) {
			unit_clear_meta(&a->units[i]);
			free(a->units[i].residual);
		}
	free(a->units);
	free(a->o_dense);
	free(a->o_sp);
	free(a->lse);
	free(a);
}

void dg_dit_attn_get_stats(const dg_dit_attn *a, dg_dit_attn_stats *s) { *s = a->stats; }

/* ---------------------------------------------------------------------------------------------- */
/* metadata: groups, scores, selection                                                             */

typedef struct {
	int n, cols;
	const dg_budget *b;
	int **rows, *counts;
	void **work;
	int **buf;
	float **blocks;
} query_rows;

static void query_row(void *ctx, int i, const float *p)
{
	query_rows *qr = ctx;
	int t = omp_get_thread_num();
	const float *score = p;
	if (qr->b->kv == DG_KV_BLOCK) {
		dg_scores_to_blocks(p, 1, qr->n, qr->blocks[t]);
		score = qr->blocks[t];
	}
	int c = dg_select_row(score, qr->n, qr->b, qr->buf[t], qr->work[t]);
	qr->counts[i] = c;
	qr->rows[i] = memcpy(dg_malloc((size_t)(c ? c : 1) * sizeof(int)), qr->buf[t], (size_t)c * sizeof(int));
}

/* per-query selections from the exact probabilities (the oracle) */
static void select_per_query(const dg_dit_attn *a, const float *q, const float *k, const float *lse,
			     dg_selection *sel)
{
	int n = a->n, threads = omp_get_max_threads();
	query_rows qr = { .n = n, .b = &a->budget };
	qr.rows = dg_malloc((size_t)n * sizeof(int *));
	qr.counts = dg_malloc((size_t)n * sizeof(int));
	qr.work = dg_malloc((size_t)threads * sizeof(void *));
	qr.buf = dg_malloc((size_t)threads * sizeof(int *));
	qr.blocks = dg_malloc((size_t)threads * sizeof(float *));
	for (int t = 0; t < threads; t++) {
		qr.work[t] = dg_malloc(dg_select_work_size(n));
		qr.buf[t] = dg_malloc((size_t)n * sizeof(int));
		qr.blocks[t] = dg_malloc((size_t)(n / DG_KV_BLOCK_SIZE + 1) * sizeof(float));
	}
	dg_scores_exact(q, k, lse, n, a->d, NULL, 0, query_row, &qr);
	sel->ngroups = n;
	sel->off = dg_malloc((size_t)(n + 1) * sizeof(int64_t));
	sel->off[0] = 0;
	for (int i = 0; i < n; i++)
		sel->off[i + 1] = sel->off[i] + qr.counts[i];
	sel->idx = dg_malloc((size_t)(sel->off[n] ? sel->off[n] : 1) * sizeof(int));
	for (int i = 0; i < n; i++) {
		memcpy(sel->idx + sel->off[i], qr.rows[i], (size_t)qr.counts[i] * sizeof(int));
		free(qr.rows[i]);
	}
	for (int t = 0; t < threads; t++) {
		free(qr.work[t]);
		free(qr.buf[t]);
		free(qr.blocks[t]);
	}
	free(qr.work), free(qr.buf), free(qr.blocks), free(qr.rows), free(qr.counts);
}

/* groups and selection of unit u from q, k (n, d) and the dense lse (for exact scores) */
static int make_meta(dg_dit_attn *a, unit_state *u, const float *q, const float *k, const float *lse,
		     int step)
{
	const dg_policy *p = &a->policy;
	int n = a->n, d = a->d;
	double t0 = dg_now();
	unit_clear_meta(u);
	if (dg_groups_build(&u->g, p->group, q, n, d, a->grid, 0))
		return -1;
	int ng = u->g.ngroups, nb = (n + DG_KV_BLOCK_SIZE - 1) / DG_KV_BLOCK_SIZE;
	if (p->score == DG_SCORE_EXACT && p->group == DG_GROUP_QUERY) {
		select_per_query(a, q, k, lse, &u->sel);
	} else {
		float *scores;
		if (p->score == DG_SCORE_EXACT) {
			float *tok = dg_malloc((size_t)ng * n * sizeof(float));
			dg_score_acc acc = { &u->g, tok };
			dg_scores_exact(q, k, lse, n, d, &acc, 1, NULL, NULL);
			if (p->kv == DG_KV_BLOCK) {
				scores = dg_malloc((size_t)ng * nb * sizeof(float));
				dg_scores_to_blocks(tok, ng, n, scores);
				free(tok);
			} else {
				scores = tok;
			}
		} else {
			scores = dg_malloc((size_t)ng * (p->kv == DG_KV_BLOCK ? nb : n) * sizeof(float));
			dg_scores_pooled(q, k, n, d, &u->g, p->kv, scores);
		}
		dg_select_groups(&u->sel, scores, ng, n, &a->budget);
		free(scores);
	}
	u->have = true;
	u->meta_step = step;
	a->stats.meta_seconds += dg_now() - t0;
	return 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* the entry point                                                                                 */

/* R = o_dense - o_sp into u->residual */
static void set_residual(dg_dit_attn *a, unit_state *u, const float *o_dense, const float *o_sp)
{
	size_t nd = (size_t)a->n * a->d;
	if (!u->residual)
		u->residual = dg_malloc(nd * sizeof(float));
	for (size_t e = 0; e < nd; e++)
		u->residual[e] = o_dense[e] - o_sp[e];
}

static int64_t sparse(dg_dit_attn *a, unit_state *u, const float *q, const float *k, const float *v,
		      const float *residual, float *o)
{
	return dg_attn_sparse(q, k, v, a->n, a->d, &u->g, &u->sel, residual, NULL, o, NULL);
}

/* one head under a sparse policy; returns computed pairs or -1 */
static int64_t policy_head(dg_dit_attn *a, const dg_attn_site *s, int h, const float *q,
			   const float *k, const float *v, float *o, bool *sparse_out)
{
	const dg_policy *p = &a->policy;
	unit_state *u = &a->units[((size_t)s->pass * a->layers + s->layer) * a->heads + h];
	int n = a->n, d = a->d;
	int64_t full = (int64_t)n * n;
	bool warm = s->step < a->sched.warmup, cached = p->residual == DG_RESIDUAL_CACHED;
	*sparse_out = false;
	if (p->refresh == DG_REFRESH_STEP) {
		if (warm && !cached) {
			a->ops->attention(a->ops, q, k, v, 1, n, n, d, o, NULL);
			return full;
		}
		a->ops->attention(a->ops, q, k, v, 1, n, n, d, a->o_dense, a->lse);
		if (make_meta(a, u, q, k, a->lse, s->step))
			return -1;
		int64_t pairs = sparse(a, u, q, k, v, NULL, a->o_sp);
		if (warm) {
			memcpy(o, a->o_dense, (size_t)n * d * sizeof(float));
			pairs = full;
		} else {
			size_t nd = (size_t)n * d;
			for (size_t e = 0; e < nd; e++)
				o[e] = a->o_sp[e] + (cached && u->residual ? u->residual[e] : 0.0f);
			*sparse_out = true;
		}
		if (cached)
			set_residual(a, u, a->o_dense, a->o_sp);
		unit_clear_meta(u);
		return pairs;
	}
	bool anchor = dg_schedule_is_anchor(&a->sched, s->step) || (!warm && !u->have);
	if (warm && !anchor) {
		a->ops->attention(a->ops, q, k, v, 1, n, n, d, o, NULL);
		return full;
	}
	if (anchor) {
		a->ops->attention(a->ops, q, k, v, 1, n, n, d, o, a->lse);
		if (make_meta(a, u, q, k, a->lse, s->step))
			return -1;
		if (cached) {
			sparse(a, u, q, k, v, NULL, a->o_sp);
			set_residual(a, u, o, a->o_sp);
		}
		return full;
	}
	*sparse_out = true;
	return sparse(a, u, q, k, v, cached ? u->residual : NULL, o);
}

int dg_dit_attention(dg_dit_attn *a, const dg_attn_site *s, const float *q, const float *k,
		     const float *v, float *o)
{
	DG_ASSERT(s->layer >= 0 && s->layer < a->layers && s->pass >= 0 && s->pass < a->passes);
	int n = a->n, d = a->d, H = a->heads;
	if (a->capture && a->capture(a->capture_user, s, H, n, d, q, k, v))
		return -1;
	double t0 = dg_now();
	double full = (double)n * n;
	a->stats.calls += H;
	a->stats.full_pairs += H * full;
	if (!a->sparse || dg_schedule_dense_layer(&a->sched, s->layer)) {
		a->ops->attention(a->ops, q, k, v, H, n, n, d, o, NULL);
		a->stats.pairs += H * full;
	} else {
		size_t hs = (size_t)n * d;
		for (int h = 0; h < H; h++) {
			bool sp;
			int64_t pairs = policy_head(a, s, h, q + h * hs, k + h * hs, v + h * hs, o + h * hs, &sp);
			if (pairs < 0)
				return -1;
			a->stats.pairs += (double)pairs;
			a->stats.sparse_calls += sp;
		}
	}
	a->stats.seconds += dg_now() - t0;
	return 0;
}
