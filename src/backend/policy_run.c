/*
 * policy_run.c: the schedule state machine and metadata construction of the policies, over the
 * primitives of backend.h (policy_run.h). Metadata is reference-counted: runs with the same key
 * share one selection, and selections of one grouping share it.
 */
#include "backend/policy_run.h"

#include <math.h>
#include <stdlib.h>

#include "util/util.h"

typedef struct {
	int refs;
	dg_bgroups *g;
} shared_groups;

struct dg_policy_meta {
	int refs;
	shared_groups *groups;
	dg_bsel *sel;
};

static void groups_unref(dg_backend *be, shared_groups *s)
{
	if (s && --s->refs == 0) {
		be->groups_free(be, s->g);
		free(s);
	}
}

static void meta_unref(dg_backend *be, dg_policy_meta *m)
{
	if (m && --m->refs == 0) {
		groups_unref(be, m->groups);
		be->sel_free(be, m->sel);
		free(m);
	}
}

static dg_policy_meta *meta_new(shared_groups *g, dg_bsel *sel)
{
	dg_policy_meta *m = dg_malloc(sizeof *m);
	*m = (dg_policy_meta){ 1, g, sel };
	g->refs++;
	return m;
}

/* the seconds since t0 with the device work enqueued so far done (a backend with asynchronous
 * primitives waits here, so that metadata times hold its work) */
/* wall seconds since t0 with the backend's work done (0 untimed: no wait) */
static double since(dg_backend *be, bool timed, double t0)
{
	if (!timed)
		return 0;
	if (be->phases)
		be->phases(be, NULL);
	return dg_now() - t0;
}

/* runs whose metadata is the same function of the unit */
static bool same_key(const dg_policy_run *a, const dg_policy_run *b)
{
	const dg_policy *p = a->p, *q = b->p;
	return !dg_policy_is_peer(p) && !dg_policy_is_peer(q) && p->group == q->group && p->kv == q->kv && p->score == q->score &&
	       p->budget == q->budget && a->budget.rho == b->budget.rho &&
	       a->budget.topp == b->budget.topp && p->sink_lo == q->sink_lo && p->sink_hi == q->sink_hi;
}

void dg_policy_run_init(dg_policy_run *r, const dg_policy *p, double rho)
{
	*r = (dg_policy_run){ .p = p,
			      .budget = { p->kv, p->budget, rho, p->topp, p->sink_lo, p->sink_hi } };
}

void dg_policy_run_plan(dg_policy_run *r, const dg_schedule *sc, int step, int layer)
{
	const dg_policy *p = r->p;
	bool warm = step < sc->warmup;
	r->fresh = NULL;
	r->make_part = false;
	if (p->dense || dg_schedule_dense_layer(sc, layer)) {
		r->dense_out = true;
		r->make_meta = false;
	} else if (p->refresh == DG_REFRESH_STEP) {
		warm |= dg_schedule_dense_step(sc, step); /* outside the sparse window: as in the warm-up */
		r->dense_out = warm;
		r->make_meta = !warm || p->residual == DG_RESIDUAL_CACHED;
	} else {
		bool anchor = dg_schedule_is_anchor(sc, step) || (!warm && !r->meta);
		r->dense_out = warm || anchor || dg_schedule_dense_step(sc, step);
		r->make_meta = anchor;
		r->make_part = !r->dense_out && (p->fresh & (DG_FRESH_GROUPS | DG_FRESH_KEYS));
	}
}

bool dg_policy_run_needs_dense(const dg_policy_run *r)
{
	const dg_policy *p = r->p;
	bool exact = !dg_policy_is_peer(p) && p->score == DG_SCORE_EXACT; /* a peer's scores are its own */
	bool reuse = !r->dense_out && !r->make_meta && p->refresh == DG_REFRESH_ANCHOR;
	return r->dense_out || p->approx == DG_APPROX_PISA ||
	       (r->make_meta && (exact || p->residual == DG_RESIDUAL_CACHED)) ||
	       (reuse && (p->fresh & DG_FRESH_RESIDUAL)) || (r->make_part && (p->fresh & DG_FRESH_KEYS) && exact);
}

bool dg_policy_run_plain_reuse(const dg_policy_run *r)
{
	const dg_policy *p = r->p;
	return !r->dense_out && !r->make_meta && !r->make_part && r->meta && r->residual &&
	       p->refresh == DG_REFRESH_ANCHOR && p->residual == DG_RESIDUAL_CACHED && !(p->fresh & DG_FRESH_RESIDUAL) &&
	       p->approx != DG_APPROX_PISA && !dg_policy_run_needs_dense(r);
}

bool dg_policy_run_groups_with(dg_policy_run *const *runs, int nruns, dg_group_kind kind)
{
	for (int i = 0; i < nruns; i++)
		if (!dg_policy_is_peer(runs[i]->p) && runs[i]->p->group == kind &&
		    (runs[i]->make_meta || (runs[i]->make_part && (runs[i]->p->fresh & DG_FRESH_GROUPS))))
			return true;
	return false;
}

/* a reuse step's metadata of fresh=groups|keys (policy_run.h) into r->fresh: new groups or the
 * anchor's, new key lists (scores) or the anchor's carried by votes. 0, or -1 after reporting. */
static int part_metadata(dg_backend *be, dg_policy_run *r, const int grid[3], int text_tokens)
{
	const dg_policy *p = r->p;
	double t0 = dg_now();
	shared_groups *sg = r->meta->groups;
	if (p->fresh & DG_FRESH_GROUPS) {
		dg_bgroups *g = be->groups(be, p->group, grid, text_tokens);
		if (!g)
			return -1;
		sg = dg_malloc(sizeof *sg);
		*sg = (shared_groups){ 0, g };
	}
	dg_bsel *sel;
	if (p->fresh & DG_FRESH_KEYS) {
		dg_bscores *tok = NULL, *sc;
		if (p->score == DG_SCORE_POOLED) {
			sc = be->pooled(be, sg->g, p->kv);
		} else {
			be->exact(be, &sg->g, &tok, 1, NULL, NULL, 0);
			sc = p->kv == DG_KV_BLOCK ? be->to_blocks(be, tok) : tok;
		}
		sel = be->select(be, sg->g, sc, &r->budget);
		if (sc != tok)
			be->scores_free(be, sc);
		be->scores_free(be, tok);
	} else {
		dg_bscores *sc = be->vote(be, sg->g, r->meta->groups->g, r->meta->sel, p->kv);
		sel = be->select(be, sg->g, sc, &r->budget);
		be->scores_free(be, sc);
	}
	r->fresh = meta_new(sg, sel);
	r->meta_s += since(be, !r->untimed, t0);
	return 0;
}

int dg_policy_run_metadata(dg_backend *be, dg_policy_run *const *runs, int nruns, const int grid[3],
			   int text_tokens)
{
	for (int i = 0; i < nruns; i++)
		if (runs[i]->make_part && part_metadata(be, runs[i], grid, text_tokens)) {
			for (int j = 0; j < i; j++)
				if (runs[j]->make_part) {
					meta_unref(be, runs[j]->fresh);
					runs[j]->fresh = NULL;
				}
			return -1;
		}
	shared_groups *groups[DG_GROUP_COUNT] = { 0 };
	double group_s[DG_GROUP_COUNT] = { 0 };
	bool timed = false;
	for (int i = 0; i < nruns; i++)
		timed |= !runs[i]->untimed;
	/* 1. groupings */
	for (int i = 0; i < nruns; i++) {
		dg_group_kind gk = runs[i]->p->group;
		if (!runs[i]->make_meta || dg_policy_is_peer(runs[i]->p) || groups[gk])
			continue;
		double t0 = dg_now();
		dg_bgroups *g = be->groups(be, gk, grid, text_tokens);
		if (!g) {
			for (int k = 0; k < DG_GROUP_COUNT; k++)
				groups_unref(be, groups[k]);
			return -1;
		}
		groups[gk] = dg_malloc(sizeof *groups[gk]);
		*groups[gk] = (shared_groups){ 1, g };
		group_s[gk] = since(be, timed, t0);
	}
	/* 2. exact scores: one pass for every grouping that needs them, plus per-query selections */
	dg_bscores *exact[DG_GROUP_COUNT] = { 0 };
	dg_bgroups *acc_groups[DG_GROUP_COUNT];
	dg_group_kind acc_kind[DG_GROUP_COUNT];
	int nacc = 0, nq = 0;
	const dg_budget **qb = dg_malloc((size_t)nruns * sizeof *qb);
	dg_policy_run **qrun = dg_malloc((size_t)nruns * sizeof *qrun);
	for (int i = 0; i < nruns; i++) {
		dg_policy_run *r = runs[i];
		if (!r->make_meta || r->p->score != DG_SCORE_EXACT || dg_policy_is_peer(r->p))
			continue;
		dg_group_kind gk = r->p->group;
		if (gk == DG_GROUP_QUERY) {
			bool dup = false;
			for (int j = 0; j < nq; j++)
				dup |= same_key(qrun[j], r);
			if (!dup) {
				qrun[nq] = r;
				qb[nq++] = &r->budget;
			}
		} else {
			bool have = false;
			for (int a = 0; a < nacc; a++)
				have |= acc_kind[a] == gk;
			if (!have) {
				acc_kind[nacc] = gk;
				acc_groups[nacc++] = groups[gk]->g;
			}
		}
	}
	double exact_s = 0;
	dg_bsel **qsel = dg_malloc((size_t)nruns * sizeof *qsel);
	dg_policy_meta **qmeta = dg_malloc((size_t)nruns * sizeof *qmeta);
	if (nacc || nq) {
		double t0 = dg_now();
		dg_bscores *out[DG_GROUP_COUNT];
		be->exact(be, acc_groups, out, nacc, qb, qsel, nq);
		for (int a = 0; a < nacc; a++)
			exact[acc_kind[a]] = out[a];
		for (int b = 0; b < nq; b++)
			qmeta[b] = meta_new(groups[DG_GROUP_QUERY], qsel[b]);
		exact_s = since(be, timed, t0);
	}
	/* 3. selections, shared by runs with the same key; a peer's made alone */
	int rc = 0;
	for (int i = 0; i < nruns && !rc; i++) {
		dg_policy_run *r = runs[i];
		if (!r->make_meta)
			continue;
		double t0 = dg_now();
		const dg_policy *p = r->p;
		dg_policy_meta *m = NULL;
		for (int j = 0; j < i && !m; j++)
			if (runs[j]->make_meta && same_key(runs[j], r))
				m = runs[j]->fresh;
		for (int b = 0; b < nq && !m; b++)
			if (same_key(qrun[b], r))
				m = qmeta[b];
		if (m) {
			m->refs++;
		} else if (dg_policy_is_peer(p)) {
			shared_groups *sg = dg_malloc(sizeof *sg);
			dg_bsel *sel;
			*sg = (shared_groups){ 1, NULL };
			if (be->peer(be, p, &r->budget, grid, text_tokens, &r->peer, &sg->g, &sel)) {
				free(sg);
				rc = -1;
				break;
			}
			m = meta_new(sg, sel);
			sg->refs--; /* held by m alone */
		} else {
			dg_bgroups *g = groups[p->group]->g;
			dg_bscores *scores = p->score == DG_SCORE_POOLED ? be->pooled(be, g, p->kv)
					   : p->kv == DG_KV_BLOCK ? be->to_blocks(be, exact[p->group])
								  : exact[p->group];
			m = meta_new(groups[p->group], be->select(be, g, scores, &r->budget));
			if (scores != exact[p->group])
				be->scores_free(be, scores);
		}
		r->fresh = m;
		r->meta_s += since(be, timed, t0) + (dg_policy_is_peer(p) ? 0 : group_s[p->group] +
					      (p->score == DG_SCORE_EXACT ? exact_s : 0));
	}
	for (int i = 0; rc && i < nruns; i++) { /* a failed peer: no run keeps half-made metadata */
		meta_unref(be, runs[i]->fresh);
		runs[i]->fresh = NULL;
	}
	for (int b = 0; b < nq; b++)
		meta_unref(be, qmeta[b]);
	for (int gk = 0; gk < DG_GROUP_COUNT; gk++) {
		be->scores_free(be, exact[gk]);
		groups_unref(be, groups[gk]);
	}
	free(qb), free(qrun), free(qsel), free(qmeta);
	return rc;
}

dg_policy_out dg_policy_run_apply(dg_backend *be, dg_policy_run *r, int step, dg_metrics *m, float *o,
				  bool timed)
{
	const dg_policy *p = r->p;
	bool cached = p->residual == DG_RESIDUAL_CACHED, per_step = p->refresh == DG_REFRESH_STEP;
	dg_policy_out out = { .dense = r->dense_out };
	be->residual_dtype = p->residual_dtype; /* the storage of the residuals attend makes here */
	bool part = r->make_part; /* fresh=groups|keys at a reuse step: r->fresh for this step alone */
	if (r->fresh && !per_step && !part) {
		/* an anchor: new metadata, and R = O_dense - O_sparse with its own selection */
		meta_unref(be, r->meta);
		r->meta = r->fresh;
		r->meta_step = step;
		r->fresh = NULL;
		if (p->keys == DG_KEYS_BITMAP && be->compact) /* kept until the next anchor: compactly */
			be->compact(be, r->meta->sel);
		if (cached)
			be->attend(be, r->meta->groups->g, r->meta->sel, NULL, &r->residual, NULL, NULL);
	}
	if (r->dense_out) {
		if (r->fresh) /* warm-up step of refresh=step with a residual: keep R for the next step */
			be->attend(be, r->fresh->groups->g, r->fresh->sel, NULL, &r->residual, NULL, NULL);
		meta_unref(be, r->fresh);
		r->fresh = NULL;
		out.pairs = (int64_t)be->n * be->n;
		if (m)
			*m = (dg_metrics){ 0, 0, 1, INFINITY, 1, 1 };
		if (o)
			be->output(be, true, o);
		return out;
	}
	/* output O_sparse [+ R]; refresh=step: R becomes this step's O_dense - O_sparse */
	dg_policy_meta *meta = per_step || part ? r->fresh : r->meta;
	bool pisa = p->approx == DG_APPROX_PISA, new_res = per_step || (p->fresh & DG_FRESH_RESIDUAL);
	be->term_follows = pisa;
	out.pairs = be->attend(be, meta->groups->g, meta->sel, cached ? r->residual : NULL,
			       cached && new_res ? &r->residual : NULL, pisa ? NULL : m, timed ? &out.seconds : NULL);
	be->term_follows = false;
	if (pisa) {
		double t0 = dg_now();
		be->approx(be, meta->groups->g, meta->sel, p->block, m);
		if (timed) /* the term's kernels run asynchronously on a device: waited for (since) */
			out.seconds += since(be, timed, t0);
	}
	if (per_step || part) {
		meta_unref(be, r->fresh);
		r->fresh = NULL;
	}
	if (!per_step)
		out.staleness = step - r->meta_step;
	if (o)
		be->output(be, false, o);
	return out;
}

bool dg_policy_run_adopt(dg_policy_run *r, const dg_policy_run *src, int step)
{
	if (!r->make_meta || r->p->refresh != DG_REFRESH_ANCHOR || !src->meta || src->meta_step != step ||
	    dg_policy_is_peer(r->p))
		return false;
	DG_ASSERT(!r->fresh); /* planned, not made */
	r->fresh = src->meta;
	r->fresh->refs++;
	r->make_meta = false;
	return true;
}

void dg_policy_run_caches(const dg_policy_run *r, dg_bvec **residual, dg_bsel **sel)
{
	*residual = r->residual;
	*sel = r->meta ? r->meta->sel : NULL;
}

void dg_policy_run_clear(dg_backend *be, dg_policy_run *r)
{
	meta_unref(be, r->meta);
	r->meta = NULL;
	be->vec_free(be, r->residual);
	r->residual = NULL;
	dg_peer_state_free(r->peer);
	r->peer = NULL;
}
