/*
 * replay.c: the open-loop replay engine. See replay.h for what it writes; docs/spec.md §3 for the
 * meaning of each switch. Per unit:
 *   1. every instance (policy x density) is a run of policy_run.h: planned first
 *   2. read Q, K, V; dense attention -> O (the reference) and LSE, with the PCA grouping that the
 *      metadata will take computed alongside where the backend can (prefetch_groups)
 *   3. metadata built for all instances together, each output with its metrics
 *   4. one metrics row per instance
 * A second thread reads the next unit from the trace (HDF5 decompression) while this one runs the
 * current unit; only that thread calls HDF5 during the loop.
 */
#include "replay/replay.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <gsl/gsl_version.h>

#include "backend/backend.h"
#include "backend/policy_run.h"
#include "policy/peers.h"
#include "replay/replay_check.h"
#include "trace/trace.h"
#include "util/files.h"
#include "util/json.h"
#include "util/util.h"

/* a policy at one density: its run, and its time at the outputs */
typedef struct {
	dg_policy_run run;
	double attn_s; /* output seconds (sparse attention, or the dense pass), summed (run.json) */
	double dens_sum; /* computed densities of its sparse units (not dense outputs), summed */
	long dens_n, dens_far; /* those units; of them outside rho +- DG_PEER_MATCH_TOL */
} instance;

typedef struct {
	const dg_trace *t;
	const dg_replay_opts *o;
	dg_backend *be;
	int n, d;
	float *q, *k, *v; /* (n, d) host copies of the unit */
	instance *inst;
	dg_policy_run **runs; /* &inst[i].run */
	int ninst;
	FILE *csv;
	double dense_s;
	cJSON *excluded; /* units whose dense output is zero: relative metrics undefined, no rows */
	cJSON *unreached; /* budget=matched runs whose mean computed density misses rho (peers.h) */
} replay_ctx;

static void emit(replay_ctx *c, const instance *in, int s, int l, int h, const dg_policy_out *r,
		 const dg_metrics *m, double seconds)
{
	const dg_trace_meta *tm = &c->t->meta;
	fprintf(c->csv, "%s,%g,%.9g,%d,%d,%d,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%d,%.6g\n", in->run.p->name,
		in->run.budget.rho, (double)r->pairs / ((double)c->n * c->n), tm->step_index[s],
		tm->layer_index[l], tm->head_index[h], m->rel_l1, m->rel_l2, m->cosine, m->psnr,
		m->mass_mean, m->mass_p5, r->staleness, 1e3 * seconds);
}

/* one unit's Q, K, V read from the trace, on the reader thread */
typedef struct {
	dg_trace *t;
	int s, l, h;
	float *q, *k, *v; /* (n, d) each */
	int rc;
	bool thread;      /* read by a thread still to be joined */
	pthread_t id;
} unit_read;

static void *read_unit(void *arg)
{
	unit_read *u = arg;
	u->rc = dg_trace_read(u->t, DG_QKV_Q, u->s, u->l, u->h, u->q) ||
			dg_trace_read(u->t, DG_QKV_K, u->s, u->l, u->h, u->k) ||
			dg_trace_read(u->t, DG_QKV_V, u->s, u->l, u->h, u->v) ? -1 : 0;
	return NULL;
}

/* start reading unit number i (layer, head, step order) into u: on a thread, else now */
static void read_start(unit_read *u, const dg_trace_meta *m, long i)
{
	u->s = (int)(i % m->steps);
	u->h = (int)(i / m->steps % m->heads);
	u->l = (int)(i / m->steps / m->heads);
	u->thread = pthread_create(&u->id, NULL, read_unit, u) == 0;
	if (!u->thread)
		read_unit(u);
}

static int read_wait(unit_read *u)
{
	if (u->thread)
		pthread_join(u->id, NULL);
	u->thread = false;
	return u->rc;
}

/* Whether V is zero everywhere: then so is the dense output, and every relative metric is undefined. */
static bool all_zero(const float *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] != 0)
			return false;
	return true;
}

/* A unit with no rows: named in a warning and in run.json's excluded_units. */
static void exclude(replay_ctx *c, int s, int l, int h, const char *reason)
{
	const dg_trace_meta *tm = &c->t->meta;
	dg_warn("%s: unit (step %d, layer %d, head %d) excluded: %s", c->t->path, tm->step_index[s],
		tm->layer_index[l], tm->head_index[h], reason);
	cJSON *u = cJSON_CreateObject();
	cJSON_AddNumberToObject(u, "step", tm->step_index[s]);
	cJSON_AddNumberToObject(u, "layer", tm->layer_index[l]);
	cJSON_AddNumberToObject(u, "head", tm->head_index[h]);
	cJSON_AddStringToObject(u, "reason", reason);
	cJSON_AddItemToArray(c->excluded, u);
}

/* the unit, read into c->q, c->k, c->v */
static int replay_unit(replay_ctx *c, int s, int l, int h)
{
	const dg_trace_meta *tm = &c->t->meta;
	dg_backend *be = c->be;
	int step = tm->step_index[s];
	/* the policies still run on it (their state carries across steps); its rows are not written */
	bool undefined = all_zero(c->v, (size_t)c->n * c->d);
	if (undefined)
		exclude(c, s, l, h, "V is all zero, so the dense output is zero and relative metrics are undefined");
	for (int i = 0; i < c->ninst; i++)
		dg_policy_run_plan(c->runs[i], &c->o->schedule, step, tm->layer_index[l]);
	/* the PCA grouping the metadata will take, computed alongside where it can be (of the whole
	 * sequence: not with a text prefix, whose joint grouping is of the video queries alone) */
	if (be->prefetch_groups && !tm->text_tokens && dg_policy_run_groups_with(c->runs, c->ninst, DG_GROUP_PCA))
		be->prefetch_groups(be, DG_GROUP_PCA, 1, (const float *const *)&c->q, NULL, false);
	be->load(be, c->q, c->k, c->v);
	double dense_s = be->dense(be);
	c->dense_s += dense_s;
	if (dg_policy_run_metadata(be, c->runs, c->ninst, tm->grid, tm->text_tokens))
		return dg_error("%s: cannot group queries", c->t->path);
	for (int i = 0; i < c->ninst; i++) {
		instance *in = &c->inst[i];
		dg_metrics m;
		dg_policy_out r = dg_policy_run_apply(be, &in->run, step, &m, NULL, true);
		double seconds = r.dense ? dense_s : r.seconds;
		in->attn_s += seconds;
		if (!undefined)
			emit(c, in, s, l, h, &r, &m, seconds);
		if (!undefined && !r.dense) {
			double dens = (double)r.pairs / ((double)c->n * c->n);
			in->dens_sum += dens;
			in->dens_n++;
			in->dens_far += fabs(dens - in->run.budget.rho) > DG_PEER_MATCH_TOL;
		}
	}
	/* the stream's first failed write set errno; later calls may have changed it */
	return ferror(c->csv) ? dg_error("cannot write %s/metrics.csv: %s", c->o->out_dir,
					 strerror(errno ? errno : EIO)) : 0;
}

/* The budget=matched runs whose mean computed density over their sparse units is more than
 * DG_PEER_MATCH_TOL from rho: the peer's knob cannot reach it (peers.h). One warning line each, and
 * an entry of c->unreached (run.json's unreached_densities). */
static void report_unreached(replay_ctx *c)
{
	for (int i = 0; i < c->ninst; i++) {
		const instance *in = &c->inst[i];
		double rho = in->run.budget.rho, mean = in->dens_n ? in->dens_sum / in->dens_n : NAN;
		if (!in->run.p->matched || !in->dens_n || fabs(mean - rho) <= DG_PEER_MATCH_TOL)
			continue;
		dg_warn("policy %s cannot reach density %g: its knob gives %.4f at the closest (mean over "
			"%ld sparse units; %ld of them outside %g +- %g)", in->run.p->name, rho, mean,
			in->dens_n, in->dens_far, rho, DG_PEER_MATCH_TOL);
		cJSON *u = cJSON_CreateObject();
		cJSON_AddStringToObject(u, "policy", in->run.p->name);
		cJSON_AddNumberToObject(u, "density", rho);
		cJSON_AddNumberToObject(u, "computed", mean);
		cJSON_AddNumberToObject(u, "units", (double)in->dens_n);
		cJSON_AddNumberToObject(u, "units_outside", (double)in->dens_far);
		cJSON_AddItemToArray(c->unreached, u);
	}
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
	/* the P.V product: fp32 P on the CPU; on the GPU bf16 P, or P as bf16 hi + lo (precise) */
	const char *pv = strcmp(c->be->name, "gpu") ? "fp32" : c->be->precise ? "precise" : "bf16";
	cJSON_AddStringToObject(root, "pv", pv);
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
	cJSON_AddItemToObject(root, "excluded_units", cJSON_Duplicate(c->excluded, 1));
	bool matched = false;
	for (int i = 0; i < o->npolicies; i++)
		matched |= o->policies[i].matched;
	if (matched) /* budget=matched runs: the densities their knob cannot reach */
		cJSON_AddItemToObject(root, "unreached_densities", cJSON_Duplicate(c->unreached, 1));
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
			if (p->matched)
				cJSON_AddBoolToObject(j, "matched", 1);
			if (p->budget == DG_BUDGET_TOPP)
				cJSON_AddNumberToObject(j, "topp", p->topp);
			if (p->sink_hi > p->sink_lo) {
				int sk[2] = { p->sink_lo, p->sink_hi };
				cJSON_AddItemToObject(j, "sinks", int_array(sk, 2));
			}
			cJSON_AddStringToObject(j, "residual", dg_residual_name(p->residual));
			cJSON_AddStringToObject(j, "refresh", dg_refresh_name(p->refresh));
			if (p->mask != DG_MASK_NONE)
				cJSON_AddStringToObject(j, "mask", dg_mask_name(p->mask));
			if (p->approx != DG_APPROX_NONE)
				cJSON_AddStringToObject(j, "approx", dg_approx_name(p->approx));
			if (p->residual_dtype != DG_RESDTYPE_FP32)
				cJSON_AddStringToObject(j, "residual_dtype", dg_resdtype_name(p->residual_dtype));
			if (p->keys != DG_KEYS_LIST)
				cJSON_AddStringToObject(j, "keys", dg_keys_name(p->keys));
			if (p->cfg_meta != DG_CFG_META_OWN)
				cJSON_AddStringToObject(j, "cfg_meta", dg_cfg_meta_name(p->cfg_meta));
		}
		double meta_s = 0, attn_s = 0;
		for (int k = 0; k < c->ninst; k++)
			if (c->inst[k].run.p == p) {
				meta_s += c->inst[k].run.meta_s;
				attn_s += c->inst[k].attn_s;
			}
		cJSON_AddNumberToObject(j, "metadata_s", meta_s);
		cJSON_AddNumberToObject(j, "attention_s", attn_s);
		cJSON_AddItemToArray(pols, j);
	}
	cJSON *tm = cJSON_AddObjectToObject(root, "timing");
	cJSON_AddNumberToObject(tm, "wall_s", wall_s);
	cJSON_AddNumberToObject(tm, "dense_s", c->dense_s);
	dg_json_paths_shown(root);
	char *s = cJSON_Print(root);
	cJSON_Delete(root);
	return s;
}

/* ---------------------------------------------------------------------------------------------- */

/* The tables and figures that decompose and plot derived from an earlier metrics.csv in DIR: they
 * no longer match the new one, so they go (one warning line naming them) */
static void remove_derived(const char *dir)
{
	static const char *const names[] = { "decomposition.csv", "decomposition.md", "decomposition.tex",
					     "ablation.csv", "ablation.md", "ablation.tex", "figures", NULL };
	dg_sbuf gone = { 0 };
	for (int i = 0; names[i]; i++) {
		char *p = dg_path_join(dir, names[i]);
		struct stat st;
		if (lstat(p, &st) == 0 && dg_remove_tree(p) == 0)
			dg_sb_printf(&gone, "%s%s%s", gone.n ? ", " : "", names[i], S_ISDIR(st.st_mode) ? "/" : "");
		free(p);
	}
	if (gone.n)
		dg_warn("replay: removed %s from %s: derived from the earlier metrics.csv (run dsgap decompose "
			"and plot again)", gone.buf, dir);
	free(gone.buf);
}

static void progress(dg_progress *pr, double start, long done, long total)
{
	double el = dg_now() - start, eta = done ? el * (total - done) / done : 0;
	dg_progress_show(pr, done == total, "replay: %ld/%ld units  %.0fs elapsed  ETA %.0fs   ", done, total, el, eta);
}

int dg_replay(const dg_replay_opts *opt)
{
	for (int i = 0; i < opt->ndensities; i++)
		if (!(opt->densities[i] > 0 && opt->densities[i] <= 1))
			return dg_error("density %g is outside (0, 1]", opt->densities[i]);
	dg_trace t;
	if (dg_trace_open(&t, opt->trace_path))
		return -1;
	if (opt->trace_name) {
		free(t.path);
		t.path = dg_strdup(opt->trace_name);
	}
	dg_replay_opts o = *opt;
	int rc = -1;
	if (dg_replay_check(&o, &t.meta)) goto out_trace;
	int missing = dg_schedule_resolve_anchors(&o.schedule, t.meta.step_index, t.meta.steps);
	if (missing >= 0 &&
	    dg_error("%s: anchor step %d is not in the trace", t.path, o.schedule.anchors[missing]))
		goto out_trace;
	static const char *const outputs[] = { "metrics.csv", "run.json", NULL };
	if (dg_output_check(o.out_dir) || dg_output_dir_check(o.out_dir, outputs))
		goto out_trace;
	dg_made_dirs made = { 0 };
	dg_dir_lock_t lock = { .fd = -1 };
	dg_publish pub = { 0 };
	if (dg_mkdir_track(o.out_dir, &made))
		goto out_trace;
	char *csv_path = dg_path_join(o.out_dir, "metrics.csv");
	char *json_path = dg_path_join(o.out_dir, "run.json");
	dg_out csv = { 0 }, js = { 0 };
	if (dg_dir_lock(&lock, o.out_dir) || dg_out_open(&csv, csv_path))
		goto out_paths;
	fprintf(csv.f, "%s\n", DG_METRICS_HEADER);

	replay_ctx c = { .t = &t, .o = &o, .n = t.meta.tokens, .d = t.meta.head_dim, .csv = csv.f,
			 .excluded = cJSON_CreateArray(), .unreached = cJSON_CreateArray() };
	size_t nd = (size_t)c.n * c.d;
	c.be = o.device && !strcmp(o.device, "gpu") ? dg_backend_gpu(c.n, c.d) : dg_backend_cpu(c.n, c.d);
	if (!c.be) {
		dg_out_abort(&csv);
		goto out_paths;
	}
	c.be->precise = !o.bf16_pv;
	c.q = dg_malloc(nd * sizeof(float));
	c.k = dg_malloc(nd * sizeof(float));
	c.v = dg_malloc(nd * sizeof(float));
	c.ninst = o.npolicies * o.ndensities;
	c.inst = dg_calloc(c.ninst, sizeof *c.inst);
	c.runs = dg_malloc(c.ninst * sizeof *c.runs);
	for (int p = 0, i = 0; p < o.npolicies; p++)
		for (int di = 0; di < o.ndensities; di++, i++) {
			dg_policy_run_init(&c.inst[i].run, &o.policies[p], o.densities[di]);
			c.runs[i] = &c.inst[i].run;
		}
	char date[32];
	dg_utc_now(date, sizeof date);
	double start = dg_now();
	long total = (long)t.meta.layers * t.meta.heads * t.meta.steps, done = 0;
	dg_progress pr = { 0 };
	int err = 0;
	uint64_t sum = DG_FNV_OFFSET;
	/* units in (layer, head, step) order, the next one read while this one runs */
	unit_read rd[2] = { { .t = &t, .q = c.q, .k = c.k, .v = c.v },
			    { .t = &t, .q = dg_malloc(nd * sizeof(float)), .k = dg_malloc(nd * sizeof(float)),
			      .v = dg_malloc(nd * sizeof(float)) } };
	read_start(&rd[0], &t.meta, 0);
	for (long i = 0; i < total && !err; i++) {
		unit_read *u = &rd[i & 1];
		if ((err = read_wait(u)) ||
		    (o.check_as_read && (err = dg_replay_check_unit(&t, u->s, u->l, u->h, u->q, u->k, u->v))))
			break;
		if (o.input_sum)
			sum = dg_fnv_words(dg_fnv_words(dg_fnv_words(sum, u->q, nd), u->k, nd), u->v, nd);
		if (i + 1 < total)
			read_start(&rd[(i + 1) & 1], &t.meta, i + 1);
		c.q = u->q, c.k = u->k, c.v = u->v;
		err = replay_unit(&c, u->s, u->l, u->h);
		if (o.progress && !err)
			progress(&pr, start, ++done, total);
		if (u->s == t.meta.steps - 1) /* the end of a (layer, head) stream */
			for (int r = 0; r < c.ninst; r++)
				dg_policy_run_clear(c.be, c.runs[r]);
	}
	read_wait(&rd[0]), read_wait(&rd[1]);
	c.q = rd[0].q, c.k = rd[0].k, c.v = rd[0].v;
	free(rd[1].q), free(rd[1].k), free(rd[1].v);
	if (err) {
		if (o.progress)
			fputc('\n', stderr);
		dg_out_abort(&csv);
	} else {
		report_unreached(&c);
		if (o.input_sum)
			*o.input_sum = sum;
		char *json = run_json(&c, dg_now() - start, date);
		/* metrics.csv and run.json are published together or not at all */
		if (dg_out_finish(&csv, &pub) == 0 && dg_out_open(&js, json_path) == 0) {
			fputs(json, js.f);
			fputc('\n', js.f);
			if (dg_out_finish(&js, &pub) == 0) {
				remove_derived(o.out_dir);
				rc = dg_publish_commit(&pub);
			}
		}
		dg_publish_abort(&pub);
		free(json);
	}
	free(c.q);
	free(c.k);
	free(c.v);
	free(c.inst);
	free(c.runs);
	cJSON_Delete(c.excluded);
	cJSON_Delete(c.unreached);
	c.be->destroy(c.be);
out_paths:
	dg_dir_unlock(&lock);
	if (rc)
		dg_made_dirs_remove(&made); /* the folders this replay made, if empty */
	dg_made_dirs_free(&made);
	free(csv_path);
	free(json_path);
out_trace:
	dg_trace_close(&t);
	return rc;
}
