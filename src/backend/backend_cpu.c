/*
 * backend_cpu.c: the CPU backend of the policies: the reference implementation of every
 * primitive of backend.h, on host memory, through attention.c, groups.c, select.c and metrics.c.
 */
#include "backend/backend.h"

#include <stdlib.h>
#include <string.h>

#include "policy/attention.h"
#include "policy/cache_store.h"
#include "policy/groups.h"
#include "util/util.h"

struct dg_bgroups {
	dg_groups g;
};
struct dg_bscores {
	int rows, cols;
	float *s; /* (rows, cols) */
};
struct dg_bsel {
	dg_selection s;  /* its lists; off and idx NULL once compact */
	uint32_t *bits;  /* keys=bitmap: (ngroups, words of n) after compact, else NULL */
	int ngroups, n;
};
struct dg_bvec {
	dg_resdtype t;
	void *store; /* dg_residual_bytes(t, n, d) */
};

typedef struct {
	const float *q, *k, *v; /* the loaded unit (caller's buffers) */
	float *o_ref, *lse, *o_sp, *out, *mass;
	float *res; /* a stored residual decoded */
	int text;   /* the loaded unit's text prefix (joint attention), from groups or peer */
	bool dense_current; /* o_ref and lse are the loaded unit's (its dense pass ran) */
} cpu;

/* the residual's values (fp32 storage: its own; else decoded into c->res) */
static const float *res_values(dg_backend *be, const dg_bvec *r)
{
	cpu *c = be->impl;
	if (!r)
		return NULL;
	if (r->t == DG_RESDTYPE_FP32)
		return r->store;
	dg_residual_decode(r->t, r->store, be->n, be->d, c->res);
	return c->res;
}

static void cpu_load(dg_backend *be, const float *q, const float *k, const float *v)
{
	cpu *c = be->impl;
	c->q = q, c->k = k, c->v = v;
	c->dense_current = false;
	/* the last unit's dense O and LSE are not this one's: a reader of a skipped dense pass (the
	 * DiT loop skips it where dg_policy_run_needs_dense says so) gets NaN, not stale numbers */
	dg_poison(c->o_ref, (size_t)be->n * be->d);
	dg_poison(c->lse, (size_t)be->n);
	dg_poison(c->mass, (size_t)be->n);
}

static double cpu_dense(dg_backend *be)
{
	cpu *c = be->impl;
	double t0 = dg_now();
	dg_attn_dense(c->q, c->k, c->v, be->n, be->n, be->d, c->o_ref, c->lse);
	c->dense_current = true;
	return dg_now() - t0;
}

static dg_bgroups *cpu_groups(dg_backend *be, dg_group_kind kind, const int grid[3], int text)
{
	cpu *c = be->impl;
	c->text = text;
	dg_bgroups *g = dg_malloc(sizeof *g);
	if (dg_groups_build(&g->g, kind, c->q, be->n, be->d, grid, text)) {
		free(g);
		return NULL;
	}
	return g;
}

static dg_bscores *scores_new(int rows, int cols)
{
	dg_bscores *s = dg_malloc(sizeof *s);
	s->rows = rows, s->cols = cols;
	s->s = dg_malloc((size_t)rows * cols * sizeof(float));
	return s;
}

static void cpu_exact(dg_backend *be, dg_bgroups *const *groups, dg_bscores **scores, int nacc,
		      const dg_budget *const *qb, dg_bsel **qsel, int nq)
{
	cpu *c = be->impl;
	int n = be->n;
	dg_score_acc *acc = dg_malloc((size_t)nacc * sizeof *acc);
	for (int a = 0; a < nacc; a++) {
		scores[a] = scores_new(groups[a]->g.ngroups, n);
		acc[a] = (dg_score_acc){ &groups[a]->g, scores[a]->s };
	}
	dg_budget *jb = dg_malloc((size_t)(nq ? nq : 1) * sizeof *jb); /* text keys outside the ranking */
	const dg_budget **jq = dg_malloc((size_t)(nq ? nq : 1) * sizeof *jq);
	for (int b = 0; b < nq; b++)
		jb[b] = dg_joint_budget(qb[b], n, c->text), jq[b] = &jb[b];
	dg_query_select *qs = nq ? dg_query_select_new(n, jq, nq) : NULL;
	dg_scores_exact(c->q, c->k, c->lse, n, be->d, acc, nacc, qs ? dg_query_select_row : NULL, qs);
	if (qs) {
		dg_selection *sel = dg_malloc((size_t)nq * sizeof *sel);
		dg_query_select_finish(qs, sel);
		for (int b = 0; b < nq; b++) {
			dg_joint_selection(NULL, &sel[b], n, c->text, 1); /* query r is group r */
			qsel[b] = dg_calloc(1, sizeof(dg_bsel));
			qsel[b]->s = sel[b];
		}
		free(sel);
	}
	free(jb), free(jq);
	free(acc);
}

static dg_bscores *cpu_pooled(dg_backend *be, dg_bgroups *g, dg_kv_kind kv)
{
	cpu *c = be->impl;
	int cols = kv == DG_KV_BLOCK ? (be->n + DG_KV_BLOCK_SIZE - 1) / DG_KV_BLOCK_SIZE : be->n;
	dg_bscores *s = scores_new(g->g.ngroups, cols);
	dg_scores_pooled(c->q, c->k, be->n, be->d, &g->g, kv, s->s);
	return s;
}

static dg_bscores *cpu_to_blocks(dg_backend *be, const dg_bscores *t)
{
	dg_bscores *s = scores_new(t->rows, (be->n + DG_KV_BLOCK_SIZE - 1) / DG_KV_BLOCK_SIZE);
	dg_scores_to_blocks(t->s, t->rows, be->n, s->s);
	return s;
}

static dg_bscores *cpu_vote(dg_backend *be, const dg_bgroups *to, const dg_bgroups *from, const dg_bsel *sel,
			    dg_kv_kind kv)
{
	dg_bscores *s = scores_new(to->g.ngroups, kv == DG_KV_BLOCK ? (be->n + DG_KV_BLOCK_SIZE - 1) / DG_KV_BLOCK_SIZE
								 : be->n);
	dg_selection lists = sel->s;
	if (sel->bits)
		dg_bitmap_decode(sel->bits, sel->ngroups, sel->n, &lists);
	dg_scores_vote(&to->g, &from->g, &lists, be->n, kv, s->s);
	if (sel->bits)
		dg_selection_free(&lists);
	return s;
}

static dg_bsel *cpu_select(dg_backend *be, const dg_bgroups *g, const dg_bscores *s, const dg_budget *b)
{
	cpu *c = be->impl;
	dg_bsel *sel = dg_calloc(1, sizeof *sel);
	dg_budget jb = dg_joint_budget(b, be->n, c->text); /* text keys outside the ranking */
	dg_select_groups(&sel->s, s->s, g->g.ngroups, be->n, &jb);
	dg_joint_selection(&g->g, &sel->s, be->n, c->text, 1);
	return sel;
}

static void cpu_compact(dg_backend *be, dg_bsel *sel)
{
	if (sel->bits)
		return;
	sel->ngroups = sel->s.ngroups, sel->n = be->n;
	sel->bits = dg_malloc((size_t)(sel->ngroups * dg_bitmap_words(be->n)) * sizeof *sel->bits);
	dg_bitmap_encode(&sel->s, be->n, sel->bits);
	dg_selection_free(&sel->s);
	sel->s = (dg_selection){ 0 };
}

/* joint attention: the text queries' rows (every key in their lists, their pairs counted) are the
 * dense pass's rows bit for bit, whatever the blocking of the sparse kernel; on a step without a
 * dense pass (the closed loop's reuse steps) they are computed densely here (lse as scratch) */
static void text_rows(dg_backend *be, float *o)
{
	cpu *c = be->impl;
	if (!c->text)
		return;
	if (c->dense_current)
		memcpy(o, c->o_ref, (size_t)c->text * be->d * sizeof(float));
	else
		dg_attn_dense(c->q, c->k, c->v, c->text, be->n, be->d, o, c->lse);
}

static int64_t cpu_attend(dg_backend *be, const dg_bgroups *g, const dg_bsel *sel,
			  const dg_bvec *residual, dg_bvec **new_residual, dg_metrics *m, double *seconds)
{
	cpu *c = be->impl;
	size_t nd = (size_t)be->n * be->d;
	double t0 = dg_now();
	int64_t pairs;
	dg_selection lists = sel->s;
	if (sel->bits) /* keys=bitmap: the lists back */
		dg_bitmap_decode(sel->bits, sel->ngroups, sel->n, &lists);
	const float *rx = res_values(be, residual);
	const float *lse = c->dense_current ? c->lse : NULL; /* the retained mass needs the dense LSE */
	if (new_residual) {
		/* O_sparse first: the new residual needs it without the old residual */
		pairs = dg_attn_sparse(c->q, c->k, c->v, be->n, be->d, &g->g, &lists, NULL, lse,
				       c->o_sp, c->mass);
		text_rows(be, c->o_sp);
		for (size_t e = 0; e < nd; e++)
			c->out[e] = c->o_sp[e] + (rx ? rx[e] : 0.0f);
	} else {
		pairs = dg_attn_sparse(c->q, c->k, c->v, be->n, be->d, &g->g, &lists, rx, lse, c->out,
				       c->mass);
		text_rows(be, c->out);
	}
	if (sel->bits)
		dg_selection_free(&lists);
	if (seconds)
		*seconds = dg_now() - t0;
	if (m)
		dg_metrics_compute(c->o_ref, c->out, nd, c->mass, be->n, m);
	if (new_residual) {
		dg_bvec *r = *new_residual;
		if (r && r->t != be->residual_dtype) {
			free(r->store);
			free(r);
			r = NULL;
		}
		if (!r) {
			r = dg_malloc(sizeof *r);
			r->t = be->residual_dtype;
			r->store = dg_malloc(dg_residual_bytes(r->t, be->n, be->d));
		}
		/* R = O_ref - O_sparse in fp32 (o_sp is free now), stored as r->t says */
		for (size_t e = 0; e < nd; e++)
			c->o_sp[e] = c->o_ref[e] - c->o_sp[e];
		dg_residual_encode(r->t, c->o_sp, be->n, be->d, r->store);
		*new_residual = r;
	}
	return pairs;
}

static int cpu_peer(dg_backend *be, const dg_policy *p, const dg_budget *b, const int grid[3], int text,
		    dg_peer_state **state, dg_bgroups **groups, dg_bsel **sel)
{
	cpu *c = be->impl;
	c->text = text;
	dg_bgroups *g = dg_malloc(sizeof *g);
	dg_bsel *s = dg_calloc(1, sizeof *s);
	if (dg_peer_metadata(c->q, c->k, be->n, be->d, p, b, grid, text, state, &g->g, &s->s)) {
		free(g), free(s);
		return -1;
	}
	*groups = g, *sel = s;
	return 0;
}

static void cpu_approx(dg_backend *be, const dg_bgroups *g, const dg_bsel *sel, int block, dg_metrics *m)
{
	cpu *c = be->impl;
	dg_pisa_combine(c->q, c->k, c->v, c->lse, be->n, be->d, block, &g->g, &sel->s, c->out, c->mass,
			c->out);
	text_rows(be, c->out);
	if (m)
		dg_metrics_compute(c->o_ref, c->out, (size_t)be->n * be->d, c->mass, be->n, m);
}

static size_t cpu_vec_bytes(dg_backend *be, const dg_bvec *v, void *host)
{
	size_t bytes = dg_residual_bytes(v->t, be->n, be->d);
	if (host)
		memcpy(host, v->store, bytes);
	return bytes;
}

static void cpu_sel_lists(dg_backend *be, const dg_bsel *sel, dg_selection *out)
{
	if (sel->bits) {
		dg_bitmap_decode(sel->bits, sel->ngroups, sel->n, out);
		return;
	}
	int64_t total = sel->s.off[sel->s.ngroups];
	out->ngroups = sel->s.ngroups;
	out->off = dg_malloc((size_t)(out->ngroups + 1) * sizeof *out->off);
	memcpy(out->off, sel->s.off, (size_t)(out->ngroups + 1) * sizeof *out->off);
	out->idx = dg_malloc((size_t)(total > 0 ? total : 1) * sizeof *out->idx);
	memcpy(out->idx, sel->s.idx, (size_t)total * sizeof *out->idx);
}

static void cpu_output(dg_backend *be, bool dense, float *o)
{
	cpu *c = be->impl;
	memcpy(o, dense ? c->o_ref : c->out, (size_t)be->n * be->d * sizeof(float));
}

static void cpu_groups_free(dg_backend *be, dg_bgroups *g)
{
	if (g)
		dg_groups_free(&g->g);
	free(g);
}

static void cpu_scores_free(dg_backend *be, dg_bscores *s)
{
	if (s)
		free(s->s);
	free(s);
}

static void cpu_sel_free(dg_backend *be, dg_bsel *s)
{
	if (s) {
		dg_selection_free(&s->s);
		free(s->bits);
	}
	free(s);
}

static void cpu_vec_free(dg_backend *be, dg_bvec *v)
{
	if (v)
		free(v->store);
	free(v);
}

static void cpu_destroy(dg_backend *be)
{
	cpu *c = be->impl;
	free(c->o_ref), free(c->lse), free(c->o_sp), free(c->out), free(c->mass), free(c->res);
	free(c);
	free(be);
}

dg_backend *dg_backend_cpu(int n, int d)
{
	dg_backend *be = dg_calloc(1, sizeof *be);
	cpu *c = dg_calloc(1, sizeof *c);
	size_t nd = (size_t)n * d;
	c->o_ref = dg_alloc_poisoned(nd);
	c->lse = dg_alloc_poisoned(n);
	c->o_sp = dg_alloc_poisoned(nd);
	c->out = dg_alloc_poisoned(nd);
	c->mass = dg_alloc_poisoned(n);
	c->res = dg_alloc_poisoned(nd);
	*be = (dg_backend){ .name = "cpu", .n = n, .d = d, .impl = c, .load = cpu_load, .load_device = cpu_load,
			    .dense = cpu_dense, .groups = cpu_groups, .exact = cpu_exact,
			    .pooled = cpu_pooled, .to_blocks = cpu_to_blocks, .vote = cpu_vote, .select = cpu_select, .compact = cpu_compact,
			    .attend = cpu_attend, .peer = cpu_peer, .approx = cpu_approx,
			    .output = cpu_output, .output_device = cpu_output, .vec_bytes = cpu_vec_bytes,
			    .sel_lists = cpu_sel_lists, .groups_free = cpu_groups_free,
			    .scores_free = cpu_scores_free, .sel_free = cpu_sel_free,
			    .vec_free = cpu_vec_free, .destroy = cpu_destroy };
	snprintf(be->device, sizeof be->device, "%s", dg_cpu_name());
	dg_attn_init_threads();
	return be;
}
