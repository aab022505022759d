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

#include "backend.h"
#include "trace.h"
#include "util.h"

/* ---------------------------------------------------------------------------------------------- */
/* shared, reference-counted metadata (handles of the backend)                                     */

typedef struct {
	int refs;
	dg_bgroups *g;
} shared_groups;

typedef struct {
	int refs;
	shared_groups *groups;
	dg_bsel *sel;
} shared_meta;

static void groups_unref(dg_backend *be, shared_groups *s)
{
	if (s && --s->refs == 0) {
		be->groups_free(be, s->g);
		free(s);
	}
}

static void meta_unref(dg_backend *be, shared_meta *m)
{
	if (m && --m->refs == 0) {
		groups_unref(be, m->groups);
		be->sel_free(be, m->sel);
		free(m);
	}
}

static shared_meta *meta_new(shared_groups *g, dg_bsel *sel)
{
	shared_meta *m = dg_malloc(sizeof *m);
	*m = (shared_meta){ 1, g, sel };
	g->refs++;
	return m;
}

/* A policy at one density, and its state within the current (layer, head) cluster. */
typedef struct {
	const dg_policy *p;
	double rho;
	dg_budget budget;
	shared_meta *meta; /* groups + selection, or NULL */
	int meta_step;     /* step index the metadata was made at */
	dg_bvec *residual; /* O_dense - O_sparse at the anchor (or previous step), or NULL */
	double meta_s;     /* metadata seconds, summed over units (run.json) */
	double attn_s;     /* attention seconds, summed */
	/* per unit */
	bool dense_out, make_meta;
	shared_meta *fresh; /* metadata made at this unit */
} instance;

/* instances whose metadata is the same function of the unit */
static bool same_key(const instance *a, const instance *b)
{
	const dg_policy *p = a->p, *q = b->p;
	return p->group == q->group && p->kv == q->kv && p->score == q->score &&
	       p->budget == q->budget && a->budget.rho == b->budget.rho &&
	       a->budget.topp == b->budget.topp && p->sink_lo == q->sink_lo && p->sink_hi == q->sink_hi;
}

/* ---------------------------------------------------------------------------------------------- */
/* one unit                                                                                        */

typedef struct {
	const dg_trace *t;
	const dg_replay_opts *o;
	dg_backend *be;
	int n, d;
	float *q, *k, *v; /* (n, d) host copies of the unit */
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

/* Build the metadata of every instance with make_meta set, sharing groupings, the exact-score
 * pass and selections among instances. Sets in->fresh (one reference each) and adds to
 * in->meta_s what the instance's metadata would cost alone. */
static void make_metadata(replay_ctx *c)
{
	dg_backend *be = c->be;
	const dg_trace_meta *tm = &c->t->meta;
	shared_groups *groups[DG_GROUP_COUNT] = { 0 };
	double group_s[DG_GROUP_COUNT] = { 0 };
	/* 1. groupings */
	for (int i = 0; i < c->ninst; i++) {
		instance *in = &c->inst[i];
		if (!in->make_meta || groups[in->p->group])
			continue;
		double t0 = dg_now();
		shared_groups *sg = dg_malloc(sizeof *sg);
		sg->refs = 1;
		sg->g = be->groups(be, in->p->group, tm->grid, tm->text_tokens);
		if (!sg->g)
			dg_die("%s: cannot group queries", c->t->path); /* grid validated at open */
		groups[in->p->group] = sg;
		group_s[in->p->group] = dg_now() - t0;
	}
	/* 2. exact scores: one pass for every grouping that needs them, plus per-query selections */
	dg_bscores *exact[DG_GROUP_COUNT] = { 0 };
	dg_bgroups *acc_groups[DG_GROUP_COUNT];
	dg_group_kind acc_kind[DG_GROUP_COUNT];
	int nacc = 0, nq = 0;
	const dg_budget *qb[64];
	instance *qinst[64];
	for (int i = 0; i < c->ninst; i++) {
		instance *in = &c->inst[i];
		if (!in->make_meta || in->p->score != DG_SCORE_EXACT)
			continue;
		dg_group_kind gk = in->p->group;
		if (gk == DG_GROUP_QUERY) {
			bool dup = false;
			for (int j = 0; j < nq; j++)
				dup |= same_key(qinst[j], in);
			if (!dup && nq < 64) {
				qinst[nq] = in;
				qb[nq++] = &in->budget;
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
	shared_meta *qmeta[64] = { 0 };
	if (nacc || nq) {
		double t0 = dg_now();
		dg_bscores *out[DG_GROUP_COUNT];
		dg_bsel *qsel[64];
		be->exact(be, acc_groups, out, nacc, qb, qsel, nq);
		for (int a = 0; a < nacc; a++)
			exact[acc_kind[a]] = out[a];
		for (int b = 0; b < nq; b++)
			qmeta[b] = meta_new(groups[DG_GROUP_QUERY], qsel[b]);
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
			dg_bgroups *g = groups[p->group]->g;
			dg_bscores *scores = p->score == DG_SCORE_POOLED ? be->pooled(be, g, p->kv)
					   : p->kv == DG_KV_BLOCK ? be->to_blocks(be, exact[p->group])
								  : exact[p->group];
			m = meta_new(groups[p->group], be->select(be, g, scores, &in->budget));
			if (scores != exact[p->group])
				be->scores_free(be, scores);
		}
		in->fresh = m;
		in->meta_s += dg_now() - t0 + group_s[p->group] + (p->score == DG_SCORE_EXACT ? exact_s : 0);
	}
	for (int b = 0; b < nq; b++)
		meta_unref(be, qmeta[b]);
	for (int gk = 0; gk < DG_GROUP_COUNT; gk++) {
		be->scores_free(be, exact[gk]);
		groups_unref(be, groups[gk]);
	}
}

static int replay_unit(replay_ctx *c, int s, int l, int h)
{
	const dg_trace_meta *tm = &c->t->meta;
	const dg_schedule *sc = &c->o->schedule;
	dg_backend *be = c->be;
	int step = tm->step_index[s];
	dg_trace *t = (dg_trace *)c->t;
	if (dg_trace_read(t, DG_QKV_Q, s, l, h, c->q) || dg_trace_read(t, DG_QKV_K, s, l, h, c->k) ||
	    dg_trace_read(t, DG_QKV_V, s, l, h, c->v))
		return -1;
	be->load(be, c->q, c->k, c->v);
	double dense_s = be->dense(be);
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

	const dg_metrics exact_m = { 0, 0, 1, INFINITY, 1, 1 }; /* a dense output */
	for (int i = 0; i < c->ninst; i++) {
		instance *in = &c->inst[i];
		const dg_policy *p = in->p;
		bool cached = p->residual == DG_RESIDUAL_CACHED;
		if (in->fresh && p->refresh == DG_REFRESH_ANCHOR) {
			/* an anchor: new metadata, and R = O_dense - O_sparse with its own selection */
			meta_unref(be, in->meta);
			in->meta = in->fresh;
			in->meta_step = step;
			in->fresh = NULL;
			if (cached)
				be->attend(be, in->meta->groups->g, in->meta->sel, NULL, &in->residual, NULL, NULL);
		}
		if (in->dense_out && p->refresh == DG_REFRESH_STEP && in->fresh)
			/* warm-up step of an oracle with residual: keep R for the next step */
			be->attend(be, in->fresh->groups->g, in->fresh->sel, NULL, &in->residual, NULL, NULL);
		if (in->dense_out) {
			meta_unref(be, in->fresh);
			emit(c, in, s, l, h, 1.0, &exact_m, 0, 1e3 * dense_s);
			in->attn_s += dense_s;
			continue;
		}
		dg_metrics met;
		double attn_s;
		int64_t pairs;
		if (p->refresh == DG_REFRESH_STEP) {
			/* output O_sparse + R(previous step); R becomes this step's O_dense - O_sparse */
			pairs = be->attend(be, in->fresh->groups->g, in->fresh->sel, cached ? in->residual : NULL,
					   cached ? &in->residual : NULL, &met, &attn_s);
			meta_unref(be, in->fresh);
		} else {
			pairs = be->attend(be, in->meta->groups->g, in->meta->sel, cached ? in->residual : NULL,
					   NULL, &met, &attn_s);
		}
		in->attn_s += attn_s;
		int staleness = p->refresh == DG_REFRESH_STEP ? 0 : step - in->meta_step;
		emit(c, in, s, l, h, (double)pairs / ((double)c->n * c->n), &met, staleness, 1e3 * attn_s);
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
	cJSON_AddStringToObject(root, "device", c->be->device);
	cJSON_AddStringToObject(root, "backend", c->be->name);
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
	c.be = o.device && !strcmp(o.device, "gpu") ? dg_backend_gpu(c.n, c.d) : dg_backend_cpu(c.n, c.d);
	if (!c.be) {
		dg_out_abort(&csv);
		goto out_paths;
	}
	c.q = dg_malloc(nd * sizeof(float));
	c.k = dg_malloc(nd * sizeof(float));
	c.v = dg_malloc(nd * sizeof(float));
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
				meta_unref(c.be, c.inst[i].meta);
				c.inst[i].meta = NULL;
				c.be->vec_free(c.be, c.inst[i].residual);
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
	free(c.inst);
	c.be->destroy(c.be);
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
