/*
 * replay.c: the open-loop replay engine. See replay.h for what it writes; DESIGN §3 for the
 * meaning of each switch. Per unit:
 *   1. read Q, K, V; dense attention -> O (the reference) and LSE
 *   2. decide per policy instance (policy x density): dense output, new metadata, or reuse
 *   3. build the groupings and scores the new metadata needs, once each (shared by instances)
 *   4. select keys per (grouping, kv, score, budget), once each
 *   5. sparse attention per instance, residual bookkeeping, metrics row
 */
#include "replay.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <gsl/gsl_version.h>

#include "attention.h"
#include "groups.h"
#include "metrics.h"
#include "select.h"
#include "trace.h"
#include "util.h"

/* ---------------------------------------------------------------------------------------------- */
/* shared, reference-counted metadata                                                             */

typedef struct {
	int refs;
	dg_groups g;
} shared_groups;

typedef struct {
	int refs;
	shared_groups *groups;
	dg_selection sel;
} shared_meta;

static void groups_unref(shared_groups *s)
{
	if (s && --s->refs == 0) {
		dg_groups_free(&s->g);
		free(s);
	}
}

static void meta_unref(shared_meta *m)
{
	if (m && --m->refs == 0) {
		groups_unref(m->groups);
		dg_selection_free(&m->sel);
		free(m);
	}
}

/* A policy at one density, and its state within the current (layer, head) cluster. */
typedef struct {
	const dg_policy *p;
	double rho;
	dg_budget budget;
	shared_meta *meta; /* groups + selection, or NULL */
	int meta_step;     /* step index the metadata was made at */
	float *residual;   /* (n, d) when valid, else NULL */
	double meta_s;     /* metadata seconds, summed over units (run.json) */
	double attn_s;     /* attention seconds, summed */
	/* per unit */
	bool dense_out, make_meta;
	shared_meta *fresh; /* metadata made at this unit */
} instance;

static bool same_key(const instance *a, const instance *b)
{
	const dg_policy *p = a->p, *q = b->p;
	return p->group == q->group && p->kv == q->kv && p->score == q->score &&
	       p->budget == q->budget && a->budget.rho == b->budget.rho &&
	       a->budget.topp == b->budget.topp && p->sink_lo == q->sink_lo && p->sink_hi == q->sink_hi;
}

/* ---------------------------------------------------------------------------------------------- */
/* per-query oracle selection, streamed from the exact probability rows                            */

typedef struct {
	int n;
	int nb;             /* budgets */
	const dg_budget **budgets;
	int ***rows;        /* [budget][query] kept keys */
	int **counts;       /* [budget][query] */
	void **work;        /* [thread] */
	int **buf;          /* [thread] */
} query_select;

static void query_select_row(void *ctx, int i, const float *p)
{
	query_select *qs = ctx;
	int t = omp_get_thread_num();
	for (int b = 0; b < qs->nb; b++) {
		int c = dg_select_row(p, qs->n, qs->budgets[b], qs->buf[t], qs->work[t]);
		qs->counts[b][i] = c;
		qs->rows[b][i] = memcpy(dg_malloc((size_t)c * sizeof(int)), qs->buf[t], (size_t)c * sizeof(int));
	}
}

static void rows_to_selection(dg_selection *sel, int **rows, const int *counts, int n)
{
	sel->ngroups = n;
	sel->off = dg_malloc((size_t)(n + 1) * sizeof(int64_t));
	sel->off[0] = 0;
	for (int i = 0; i < n; i++)
		sel->off[i + 1] = sel->off[i] + counts[i];
	sel->idx = dg_malloc((size_t)sel->off[n] * sizeof(int));
	for (int i = 0; i < n; i++) {
		memcpy(sel->idx + sel->off[i], rows[i], (size_t)counts[i] * sizeof(int));
		free(rows[i]);
	}
}

/* ---------------------------------------------------------------------------------------------- */
/* one unit                                                                                        */

typedef struct {
	const dg_trace *t;
	const dg_replay_opts *o;
	int n, d;
	float *q, *k, *v;  /* (n, d) */
	float *o_ref, *lse; /* (n, d), (n) */
	float *o_sp, *out, *mass, *rnew; /* (n, d), (n, d), (n), (n, d) */
	instance *inst;
	int ninst;
	FILE *csv;
	double dense_s;
} replay_ctx;

static void emit(replay_ctx *c, const instance *in, int s, int l, int h, double density,
		 const dg_metrics *m, int staleness, double ms)
{
	const dg_trace_meta *tm = &c->t->meta;
	fprintf(c->csv, "%s,%g,%.9g,%d,%d,%d,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%d,%.6g\n", in->p->name,
		in->rho, density, tm->step_index[s], tm->layer_index[l], tm->head_index[h], m->rel_l1,
		m->rel_l2, m->cosine, m->psnr, m->mass_mean, m->mass_p5, staleness, ms);
}

/* Build the metadata of every instance with make_meta set, sharing groupings, scores and
 * selections. Sets in->fresh (one reference each) and adds the time to in->meta_s. */
static void make_metadata(replay_ctx *c)
{
	int n = c->n, d = c->d;
	const dg_trace_meta *tm = &c->t->meta;
	shared_groups *groups[DG_GROUP_COUNT] = { 0 };
	double group_s[DG_GROUP_COUNT] = { 0 };
	/* 1. groupings */
	for (int i = 0; i < c->ninst; i++) {
		instance *in = &c->inst[i];
		if (!in->make_meta || groups[in->p->group])
			continue;
		double t0 = dg_now();
		shared_groups *sg = dg_calloc(1, sizeof *sg);
		if (dg_groups_build(&sg->g, in->p->group, c->q, n, d, tm->grid, tm->text_tokens))
			dg_die("%s: cannot group queries", c->t->path); /* grid validated at open */
		groups[in->p->group] = sg;
		sg->refs = 1;
		group_s[in->p->group] = dg_now() - t0;
	}
	/* 2. exact scores: one pass for every grouping that needs them, plus per-query rows */
	float *exact[DG_GROUP_COUNT] = { 0 };
	dg_score_acc acc[DG_GROUP_COUNT];
	int nacc = 0;
	const dg_budget *qb[64];
	instance *qinst[64];
	int nq = 0;
	for (int i = 0; i < c->ninst; i++) {
		instance *in = &c->inst[i];
		if (!in->make_meta || in->p->score != DG_SCORE_EXACT)
			continue;
		dg_group_kind gk = in->p->group;
		if (gk == DG_GROUP_QUERY) {
			int dup = 0;
			for (int j = 0; j < nq; j++)
				dup |= same_key(qinst[j], in);
			if (!dup && nq < 64) {
				qinst[nq] = in;
				qb[nq++] = &in->budget;
			}
		} else if (!exact[gk]) {
			exact[gk] = dg_malloc((size_t)groups[gk]->g.ngroups * n * sizeof(float));
			acc[nacc++] = (dg_score_acc){ &groups[gk]->g, exact[gk] };
		}
	}
	double exact_s = 0;
	shared_meta *qmeta[64] = { 0 };
	if (nacc || nq) {
		double t0 = dg_now();
		query_select qs = { .n = n, .nb = nq, .budgets = qb };
		int threads = omp_get_max_threads();
		if (nq) {
			qs.rows = dg_malloc(nq * sizeof(int **));
			qs.counts = dg_malloc(nq * sizeof(int *));
			for (int b = 0; b < nq; b++) {
				qs.rows[b] = dg_malloc((size_t)n * sizeof(int *));
				qs.counts[b] = dg_malloc((size_t)n * sizeof(int));
			}
			qs.work = dg_malloc(threads * sizeof(void *));
			qs.buf = dg_malloc(threads * sizeof(int *));
			for (int t = 0; t < threads; t++) {
				qs.work[t] = dg_malloc(dg_select_work_size(n));
				qs.buf[t] = dg_malloc((size_t)n * sizeof(int));
			}
		}
		dg_scores_exact(c->q, c->k, c->lse, n, d, acc, nacc, nq ? query_select_row : NULL, &qs);
		for (int b = 0; b < nq; b++) {
			shared_meta *m = dg_calloc(1, sizeof *m);
			m->refs = 1;
			m->groups = groups[DG_GROUP_QUERY];
			m->groups->refs++;
			rows_to_selection(&m->sel, qs.rows[b], qs.counts[b], n);
			qmeta[b] = m;
			free(qs.rows[b]);
			free(qs.counts[b]);
		}
		if (nq) {
			for (int t = 0; t < threads; t++) {
				free(qs.work[t]);
				free(qs.buf[t]);
			}
			free(qs.work);
			free(qs.buf);
			free(qs.rows);
			free(qs.counts);
		}
		exact_s = dg_now() - t0;
	}
	/* 3. selections, shared by instances with the same key */
	for (int i = 0; i < c->ninst; i++) {
		instance *in = &c->inst[i];
		if (!in->make_meta)
			continue;
		double t0 = dg_now();
		const dg_policy *p = in->p;
		shared_meta *m = NULL;
		for (int j = 0; j < i && !m; j++)
			if (c->inst[j].make_meta && same_key(&c->inst[j], in))
				m = c->inst[j].fresh;
		for (int b = 0; b < nq && !m; b++)
			if (same_key(qinst[b], in))
				m = qmeta[b];
		if (m) {
			m->refs++;
		} else {
			m = dg_calloc(1, sizeof *m);
			m->refs = 1;
			m->groups = groups[p->group];
			m->groups->refs++;
			const dg_groups *g = &m->groups->g;
			int cols = p->kv == DG_KV_BLOCK ? (n + DG_KV_BLOCK_SIZE - 1) / DG_KV_BLOCK_SIZE : n;
			float *scores;
			if (p->score == DG_SCORE_POOLED) {
				scores = dg_malloc((size_t)g->ngroups * cols * sizeof(float));
				dg_scores_pooled(c->q, c->k, n, d, g, p->kv, scores);
			} else if (p->kv == DG_KV_BLOCK) {
				scores = dg_malloc((size_t)g->ngroups * cols * sizeof(float));
				dg_scores_to_blocks(exact[p->group], g->ngroups, n, scores);
			} else {
				scores = exact[p->group];
			}
			dg_select_groups(&m->sel, scores, g->ngroups, n, &in->budget);
			if (scores != exact[p->group])
				free(scores);
		}
		in->fresh = m;
		in->meta_s += dg_now() - t0 + group_s[p->group] + (p->score == DG_SCORE_EXACT ? exact_s : 0);
	}
	for (int b = 0; b < nq; b++)
		meta_unref(qmeta[b]);
	for (int gk = 0; gk < DG_GROUP_COUNT; gk++) {
		free(exact[gk]);
		groups_unref(groups[gk]);
	}
}

static int replay_unit(replay_ctx *c, int s, int l, int h)
{
	const dg_trace_meta *tm = &c->t->meta;
	const dg_schedule *sc = &c->o->schedule;
	int n = c->n, d = c->d, step = tm->step_index[s];
	size_t nd = (size_t)n * d;
	dg_trace *t = (dg_trace *)c->t;
	if (dg_trace_read(t, DG_QKV_Q, s, l, h, c->q) || dg_trace_read(t, DG_QKV_K, s, l, h, c->k) ||
	    dg_trace_read(t, DG_QKV_V, s, l, h, c->v))
		return -1;
	double t0 = dg_now();
	dg_attn_dense(c->q, c->k, c->v, n, n, d, c->o_ref, c->lse);
	double dense_s = dg_now() - t0;
	c->dense_s += dense_s;

	bool dense_layer = dg_schedule_dense_layer(sc, tm->layer_index[l]);
	bool warm = step < sc->warmup;
	for (int i = 0; i < c->ninst; i++) {
		instance *in = &c->inst[i];
		const dg_policy *p = in->p;
		in->fresh = NULL;
		if (p->dense || dense_layer) {
			in->dense_out = true;
			in->make_meta = false;
		} else if (p->refresh == DG_REFRESH_STEP) {
			in->dense_out = warm;
			in->make_meta = !warm || p->residual == DG_RESIDUAL_CACHED;
		} else {
			bool anchor = dg_schedule_is_anchor(sc, step) || (!warm && !in->meta);
			in->dense_out = warm || anchor;
			in->make_meta = anchor;
		}
	}
	make_metadata(c);

	dg_metrics dense_m;
	dg_metrics_compute(c->o_ref, c->o_ref, nd, NULL, n, &dense_m);
	for (int i = 0; i < c->ninst; i++) {
		instance *in = &c->inst[i];
		const dg_policy *p = in->p;
		if (in->fresh && p->refresh == DG_REFRESH_ANCHOR) {
			meta_unref(in->meta);
			in->meta = in->fresh;
			in->meta_step = step;
			in->fresh = NULL;
			free(in->residual);
			in->residual = NULL;
			if (p->residual == DG_RESIDUAL_CACHED) {
				/* R = O_dense - O_sparse with the anchor's own selection */
				dg_attn_sparse(c->q, c->k, c->v, n, d, &in->meta->groups->g, &in->meta->sel,
					       NULL, NULL, c->o_sp, NULL);
				in->residual = dg_malloc(nd * sizeof(float));
				for (size_t e = 0; e < nd; e++)
					in->residual[e] = c->o_ref[e] - c->o_sp[e];
			}
		}
		if (in->dense_out && p->refresh == DG_REFRESH_STEP && in->fresh) {
			/* warm-up step of an oracle with residual: keep R for the next step */
			dg_attn_sparse(c->q, c->k, c->v, n, d, &in->fresh->groups->g, &in->fresh->sel, NULL,
				       NULL, c->o_sp, NULL);
			if (!in->residual)
				in->residual = dg_malloc(nd * sizeof(float));
			for (size_t e = 0; e < nd; e++)
				in->residual[e] = c->o_ref[e] - c->o_sp[e];
		}
		if (in->dense_out) {
			meta_unref(in->fresh);
			emit(c, in, s, l, h, 1.0, &dense_m, 0, 1e3 * dense_s);
			in->attn_s += dense_s;
			continue;
		}
		const shared_meta *m = p->refresh == DG_REFRESH_STEP ? in->fresh : in->meta;
		const float *res = p->residual == DG_RESIDUAL_CACHED ? in->residual : NULL;
		double a0 = dg_now();
		int64_t pairs;
		if (p->refresh == DG_REFRESH_STEP && p->residual == DG_RESIDUAL_CACHED) {
			/* output O_sparse + R(previous step); then R = O_dense - O_sparse of this step */
			pairs = dg_attn_sparse(c->q, c->k, c->v, n, d, &m->groups->g, &m->sel, NULL, c->lse,
					       c->o_sp, c->mass);
			for (size_t e = 0; e < nd; e++)
				c->out[e] = c->o_sp[e] + (res ? res[e] : 0.0f);
			if (!in->residual)
				in->residual = dg_malloc(nd * sizeof(float));
			for (size_t e = 0; e < nd; e++)
				in->residual[e] = c->o_ref[e] - c->o_sp[e];
		} else {
			pairs = dg_attn_sparse(c->q, c->k, c->v, n, d, &m->groups->g, &m->sel, res, c->lse,
					       c->out, c->mass);
		}
		double attn_s = dg_now() - a0;
		in->attn_s += attn_s;
		dg_metrics met;
		dg_metrics_compute(c->o_ref, c->out, nd, c->mass, n, &met);
		int staleness = p->refresh == DG_REFRESH_STEP ? 0 : step - in->meta_step;
		emit(c, in, s, l, h, (double)pairs / ((double)n * n), &met, staleness, 1e3 * attn_s);
		if (p->refresh == DG_REFRESH_STEP)
			meta_unref(in->fresh);
	}
	return ferror(c->csv) ? dg_error("%s: write error", c->o->out_dir) : 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* run.json                                                                                        */

static cJSON *int_array(const int *v, int n)
{
	return cJSON_CreateIntArray(v, n);
}

static char *run_json(const replay_ctx *c, double wall_s, const char *date)
{
	const dg_trace *t = c->t;
	const dg_replay_opts *o = c->o;
	cJSON *root = cJSON_CreateObject();
	cJSON_AddStringToObject(root, "format", "dsgap-run");
	cJSON_AddStringToObject(root, "dsgap_version", DG_VERSION);
	cJSON_AddStringToObject(root, "git_commit", dg_git_commit());
	cJSON_AddStringToObject(root, "date", date);
	cJSON_AddStringToObject(root, "device", dg_cpu_name());
	cJSON_AddStringToObject(root, "backend", "cpu");
	cJSON_AddNumberToObject(root, "threads", omp_get_max_threads());
	if (o->command_line)
		cJSON_AddStringToObject(root, "command", o->command_line);
	char libs[128];
	unsigned maj, min, rel;
	H5get_libversion(&maj, &min, &rel);
	snprintf(libs, sizeof libs, "hdf5 %u.%u.%u, gsl %s, openblas", maj, min, rel, GSL_VERSION);
	cJSON_AddStringToObject(root, "libraries", libs);
	cJSON *tr = cJSON_AddObjectToObject(root, "trace");
	cJSON_AddStringToObject(tr, "path", t->path);
	cJSON_AddStringToObject(tr, "model", t->meta.model ? t->meta.model : "");
	cJSON_AddStringToObject(tr, "source", t->meta.source ? t->meta.source : "");
	cJSON_AddStringToObject(tr, "dtype", t->dtype ? t->dtype : "");
	cJSON_AddNumberToObject(tr, "steps", t->meta.steps);
	cJSON_AddNumberToObject(tr, "layers", t->meta.layers);
	cJSON_AddNumberToObject(tr, "heads", t->meta.heads);
	cJSON_AddNumberToObject(tr, "tokens", t->meta.tokens);
	cJSON_AddNumberToObject(tr, "head_dim", t->meta.head_dim);
	cJSON_AddItemToObject(tr, "grid", int_array(t->meta.grid, 3));
	cJSON_AddItemToObject(tr, "step_index", int_array(t->meta.step_index, t->meta.steps));
	cJSON_AddItemToObject(tr, "layer_index", int_array(t->meta.layer_index, t->meta.layers));
	cJSON_AddItemToObject(tr, "head_index", int_array(t->meta.head_index, t->meta.heads));
	cJSON_AddItemToObject(root, "densities", cJSON_CreateDoubleArray(o->densities, o->ndensities));
	cJSON *sc = cJSON_AddObjectToObject(root, "schedule");
	cJSON_AddNumberToObject(sc, "warmup", o->schedule.warmup);
	cJSON_AddItemToObject(sc, "anchors", int_array(o->schedule.anchors, o->schedule.nanchors));
	cJSON_AddItemToObject(sc, "dense_layers",
			      int_array(o->schedule.dense_layers, o->schedule.ndense_layers));
	cJSON *pols = cJSON_AddArrayToObject(root, "policies");
	for (int i = 0; i < o->npolicies; i++) {
		const dg_policy *p = &o->policies[i];
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "name", p->name);
		if (p->dense) {
			cJSON_AddBoolToObject(j, "dense", 1);
		} else {
			cJSON_AddStringToObject(j, "group", dg_group_name(p->group));
			cJSON_AddStringToObject(j, "kv", dg_kv_name(p->kv));
			cJSON_AddStringToObject(j, "score", dg_score_name(p->score));
			cJSON_AddStringToObject(j, "budget", dg_budget_name(p->budget));
			if (p->budget == DG_BUDGET_TOPP)
				cJSON_AddNumberToObject(j, "topp", p->topp);
			if (p->sink_hi > p->sink_lo) {
				int sk[2] = { p->sink_lo, p->sink_hi };
				cJSON_AddItemToObject(j, "sinks", int_array(sk, 2));
			}
			cJSON_AddStringToObject(j, "residual", dg_residual_name(p->residual));
			cJSON_AddStringToObject(j, "refresh", dg_refresh_name(p->refresh));
		}
		double meta_s = 0, attn_s = 0;
		for (int k = 0; k < c->ninst; k++)
			if (c->inst[k].p == p) {
				meta_s += c->inst[k].meta_s;
				attn_s += c->inst[k].attn_s;
			}
		cJSON_AddNumberToObject(j, "metadata_s", meta_s);
		cJSON_AddNumberToObject(j, "attention_s", attn_s);
		cJSON_AddItemToArray(pols, j);
	}
	cJSON *tm = cJSON_AddObjectToObject(root, "timing");
	cJSON_AddNumberToObject(tm, "wall_s", wall_s);
	cJSON_AddNumberToObject(tm, "dense_s", c->dense_s);
	char *s = cJSON_Print(root);
	cJSON_Delete(root);
	return s;
}

/* ---------------------------------------------------------------------------------------------- */

static int resolve_anchors(dg_schedule *sc, const dg_trace_meta *m, const char *path)
{
	if (sc->anchors_given) {
		for (int a = 0; a < sc->nanchors; a++) {
			int found = 0;
			for (int s = 0; s < m->steps; s++)
				found |= m->step_index[s] == sc->anchors[a];
			if (!found)
				return dg_error("%s: anchor step %d is not in the trace", path, sc->anchors[a]);
		}
		return 0;
	}
	/* default: the last stored step before the end of warm-up (MC-Sparse: step W-1) */
	sc->nanchors = 0;
	for (int s = 0; s < m->steps; s++)
		if (m->step_index[s] < sc->warmup) {
			sc->anchors[0] = m->step_index[s];
			sc->nanchors = 1;
		}
	return 0;
}

static void progress(double start, long done, long total)
{
	double el = dg_now() - start, eta = done ? el * (total - done) / done : 0;
	fprintf(stderr, "\rreplay: %ld/%ld units  %.0fs elapsed  ETA %.0fs   ", done, total, el, eta);
	if (done == total)
		fputc('\n', stderr);
}

int dg_replay(const dg_replay_opts *opt)
{
	for (int i = 0; i < opt->ndensities; i++)
		if (!(opt->densities[i] > 0 && opt->densities[i] <= 1))
			return dg_error("density %g is outside (0, 1]", opt->densities[i]);
	dg_trace t;
	if (dg_trace_open(&t, opt->trace_path))
		return -1;
	dg_replay_opts o = *opt;
	int rc = -1;
	if (resolve_anchors(&o.schedule, &t.meta, t.path))
		goto out_trace;
	struct stat st;
	bool made_dir = stat(o.out_dir, &st) != 0;
	if (dg_mkdir_p(o.out_dir))
		goto out_trace;
	char *csv_path = dg_path_join(o.out_dir, "metrics.csv");
	char *json_path = dg_path_join(o.out_dir, "run.json");
	dg_out csv = { 0 }, js = { 0 };
	if (dg_out_open(&csv, csv_path))
		goto out_paths;
	fprintf(csv.f, "%s\n", DG_METRICS_HEADER);

	replay_ctx c = { .t = &t, .o = &o, .n = t.meta.tokens, .d = t.meta.head_dim, .csv = csv.f };
	size_t nd = (size_t)c.n * c.d;
	c.q = dg_malloc(nd * sizeof(float));
	c.k = dg_malloc(nd * sizeof(float));
	c.v = dg_malloc(nd * sizeof(float));
	c.o_ref = dg_alloc_poisoned(nd);
	c.lse = dg_alloc_poisoned(c.n);
	c.o_sp = dg_alloc_poisoned(nd);
	c.out = dg_alloc_poisoned(nd);
	c.mass = dg_alloc_poisoned(c.n);
	c.ninst = o.npolicies * o.ndensities;
	c.inst = dg_calloc(c.ninst, sizeof *c.inst);
	for (int p = 0, i = 0; p < o.npolicies; p++)
		for (int di = 0; di < o.ndensities; di++, i++) {
			instance *in = &c.inst[i];
			in->p = &o.policies[p];
			in->rho = o.densities[di];
			in->budget = (dg_budget){ in->p->kv, in->p->budget, in->rho, in->p->topp,
						  in->p->sink_lo, in->p->sink_hi };
		}
	dg_attn_init_threads();
	char date[32];
	dg_utc_now(date, sizeof date);
	double start = dg_now();
	long total = (long)t.meta.layers * t.meta.heads * t.meta.steps, done = 0;
	int err = 0;
	for (int l = 0; l < t.meta.layers && !err; l++)
		for (int h = 0; h < t.meta.heads && !err; h++) {
			for (int s = 0; s < t.meta.steps && !err; s++) {
				err = replay_unit(&c, s, l, h);
				if (o.progress && !err)
					progress(start, ++done, total);
			}
			for (int i = 0; i < c.ninst; i++) {
				meta_unref(c.inst[i].meta);
				c.inst[i].meta = NULL;
				free(c.inst[i].residual);
				c.inst[i].residual = NULL;
			}
		}
	if (err) {
		if (o.progress)
			fputc('\n', stderr);
		dg_out_abort(&csv);
	} else {
		char *json = run_json(&c, dg_now() - start, date);
		if (dg_out_commit(&csv) == 0 && dg_out_open(&js, json_path) == 0) {
			fputs(json, js.f);
			fputc('\n', js.f);
			if (dg_out_commit(&js) == 0)
				rc = 0;
		}
		free(json);
		if (rc)
			remove(csv_path);
	}
	free(c.q);
	free(c.k);
	free(c.v);
	free(c.o_ref);
	free(c.lse);
	free(c.o_sp);
	free(c.out);
	free(c.mass);
	free(c.inst);
out_paths:
	if (rc && made_dir)
		rmdir(o.out_dir);
	free(csv_path);
	free(json_path);
out_trace:
	dg_trace_close(&t);
	return rc;
}

/* ---------------------------------------------------------------------------------------------- */

static const char *const ladder[] = { "dense", "est-block", "oracle-block", "oracle-tile",
				      "oracle-pca", "oracle", "oracle+res", NULL };
static const char *const factorial[] = { "baseline", "mc-grouping", "mc-selection", "mc-residual",
					 "mc-gs", "mc-gr", "mc-sr", "mc-sparse", NULL };

static int add_policy(const char *spec, dg_policy *out, int *n, int max)
{
	for (int i = 0; i < *n; i++)
		if (!strcmp(out[i].name, spec))
			return 0; /* listed twice: once is enough */
	if (*n == max)
		return dg_error("too many policies (at most %d)", max);
	if (dg_policy_parse(spec, &out[*n]))
		return -1;
	(*n)++;
	return 0;
}

int dg_policies_expand(const char *list, dg_policy *out, int max)
{
	char *copy = dg_strdup(list), *items[128];
	int k = dg_split(copy, ',', items, 128), n = 0;
	if (k <= 0) {
		free(copy);
		return dg_error("no policies given");
	}
	for (int i = 0; i < k && n >= 0; i++) {
		const char *const *alias = !strcmp(items[i], "ladder") ? ladder
					 : !strcmp(items[i], "factorial") ? factorial : NULL;
		if (!strcmp(items[i], "all")) {
			for (int j = 0; ladder[j] && n >= 0; j++)
				n = add_policy(ladder[j], out, &n, max) ? -1 : n;
			alias = factorial;
		}
		if (alias) {
			for (int j = 0; alias[j] && n >= 0; j++)
				n = add_policy(alias[j], out, &n, max) ? -1 : n;
		} else if (strcmp(items[i], "all")) {
			n = add_policy(items[i], out, &n, max) ? -1 : n;
		}
	}
	free(copy);
	return n;
}
