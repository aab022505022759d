/*
 * dit_attn.c: the DiT engine's self-attention entry point: capture hook, then dense, or a sparse
 * policy in the closed loop as runs of policy_run.h, one per (pass, layer, head) (dit_attn.h).
 */
#include "dit_attn.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "policy_run.h"
#include "util.h"

struct dg_dit_attn {
	dg_wan_ops *ops;
	dg_backend *be;      /* a sparse policy: where it runs; NULL for dense */
	dg_policy policy;
	dg_schedule sched;
	int grid[3], n, d, layers, heads, passes;
	dg_policy_run *runs; /* (passes, layers, heads) */
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
		size_t units = (size_t)passes * layers * heads;
		a->be = dg_backend_cpu(a->n, d);
		a->runs = dg_malloc(units * sizeof *a->runs);
		for (size_t u = 0; u < units; u++)
			dg_policy_run_init(&a->runs[u], &a->policy, rho);
	}
	return a;
}

void dg_dit_attn_set_capture(dg_dit_attn *a, dg_attn_capture_fn fn, void *user)
{
	a->capture = fn;
	a->capture_user = user;
}

void dg_dit_attn_free(dg_dit_attn *a)
{
	if (!a)
		return;
	if (a->be) {
		for (size_t u = 0; u < (size_t)a->passes * a->layers * a->heads; u++)
			dg_policy_run_clear(a->be, &a->runs[u]);
		a->be->destroy(a->be);
	}
	free(a->runs);
	free(a);
}

void dg_dit_attn_get_stats(const dg_dit_attn *a, dg_dit_attn_stats *s) { *s = a->stats; }

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
	/* the site's runs; with nothing but dense outputs, all heads go through the op table */
	dg_policy_run *runs = a->be ? a->runs + ((size_t)s->pass * a->layers + s->layer) * H : NULL;
	bool policy = false;
	for (int h = 0; runs && h < H; h++) {
		dg_policy_run_plan(&runs[h], &a->sched, s->step, s->layer);
		policy |= !runs[h].dense_out || runs[h].make_meta;
	}
	if (!policy) {
		a->ops->attention(a->ops, q, k, v, H, n, n, d, o, NULL);
		a->stats.pairs += H * full;
	}
	size_t hs = (size_t)n * d;
	for (int h = 0; policy && h < H; h++) {
		dg_backend *be = a->be;
		dg_policy_run *r = &runs[h];
		be->load(be, q + h * hs, k + h * hs, v + h * hs);
		be->dense(be);
		double tm = dg_now();
		if (dg_policy_run_metadata(be, &r, 1, a->grid, 0))
			return -1;
		a->stats.meta_seconds += dg_now() - tm;
		dg_policy_out out = dg_policy_run_apply(be, r, s->step, NULL, o + h * hs);
		a->stats.pairs += (double)out.pairs;
		a->stats.sparse_calls += !out.dense;
	}
	a->stats.seconds += dg_now() - t0;
	return 0;
}
