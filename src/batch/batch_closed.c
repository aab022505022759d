/*
 * batch_closed.c: closed-loop cells (one generate run each) and their merge into per-run rows
 * and summary lines (batch_closed.h; the grid is in experiment.h, the folders in batch.h).
 *   dsgap run experiments/closed_loop.ini   (cmd_run.c -> batch.c -> here)
 */
#include "batch/batch_closed.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "analysis/decompose.h"
#include "loop/generate.h"
#include "dit/tensorfile.h"
#include "util/json.h"
#include "util/files.h"
#include "util/util.h"

static bool exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

bool dg_closed_cell_done(const char *dir)
{
	char *j = dg_path_join(dir, "run.json"), *l = dg_path_join(dir, "latents.h5");
	bool done = exists(j) && exists(l);
	free(j);
	free(l);
	return done;
}

/* ---------------------------------------------------------------------------------------------- */
/* one cell                                                                                        */

/* The model of this process's last cell: the next cell of the same checkpoint and device uses it
 * (one load per process for all its generations; dg_closed_release frees it). */
static struct {
	char *path, *device;
	dg_wan_model *model;
} loaded;

void dg_closed_release(void)
{
	if (loaded.model)
		dg_wan_free(loaded.model);
	free(loaded.path);
	free(loaded.device);
	memset(&loaded, 0, sizeof loaded);
}

/* the model at path on device, loaded unless it is loaded already (*reused) */
static dg_wan_model *model_for(const char *path, const char *device, bool *reused)
{
	*reused = loaded.model && !strcmp(loaded.path, path) && !strcmp(loaded.device, device);
	if (*reused)
		return loaded.model;
	dg_closed_release();
	if (dg_wan_load(&loaded.model, path, device))
		return NULL;
	loaded.path = dg_strdup(path);
	loaded.device = dg_strdup(device);
	return loaded.model;
}

/* rel-L2 of x against r, n values each (0 where both are zero) */
static double rel_l2(const float *x, const float *r, size_t n)
{
	double e2 = 0, r2 = 0;
	for (size_t e = 0; e < n; e++) {
		double df = (double)x[e] - r[e];
		e2 += df * df, r2 += (double)r[e] * r[e];
	}
	return r2 > 0 ? sqrt(e2 / r2) : (e2 > 0 ? INFINITY : 0);
}

/* drift.csv (step,rel_l2: each step's latents x against the reference's, (steps, numel) each) */
static int write_drift(const char *path, const float *x, const float *ref, int steps, size_t numel)
{
	dg_out o;
	if (dg_out_open(&o, path))
		return -1;
	fprintf(o.f, "step,rel_l2\n");
	for (int i = 0; i < steps; i++)
		fprintf(o.f, "%d,%.9g\n", i, rel_l2(x + (size_t)i * numel, ref + (size_t)i * numel, numel));
	return dg_out_commit(&o);
}

/* a cell's per-step latents (steps.h5) when they fit this, else no drift is recorded */
#define DRIFT_MAX_BYTES ((size_t)256 << 20)

/* Where the loop drifts (issue 50, batch_closed.h): the reference writes its per-step latents to
 * steps.h5; a sparse cell writes drift.csv against the reference's steps.h5 when that cell is done
 * already (beside this one in the run's folder), else its own steps.h5 for the merge. */
static int cell_steps(const dg_experiment *e, const dg_exp_cell *c, const char *dir, const float *steps,
		      const int shape[4])
{
	int n = e->model.steps, sshape[4] = { n * shape[0], shape[1], shape[2], shape[3] };
	size_t numel = (size_t)shape[0] * shape[1] * shape[2] * shape[3];
	char ns[32], ref[4096];
	snprintf(ns, sizeof ns, "%d", n);
	const char *attrs[] = { "steps", ns, NULL };
	char *own = dg_path_join(dir, "steps.h5");
	int rc = 0;
	snprintf(ref, sizeof ref, "%s", dir);
	char *slash = strrchr(ref, '/');
	if (slash)
		snprintf(slash + 1, sizeof ref - (size_t)(slash + 1 - ref), "%s/steps.h5", e->cells[c->reference].id);
	dg_tensor t = { 0 };
	struct stat st;
	if (c->policy < 0 || !slash || stat(ref, &st)) {
		rc = dg_latents_write(own, steps, sshape, attrs);
	} else if (!(rc = dg_tensor_read(ref, "reference steps", &t))) {
		if (t.ndim != 4 || t.shape[0] != sshape[0] || t.shape[1] != shape[1] || t.shape[2] != shape[2] ||
		    t.shape[3] != shape[3]) {
			rc = dg_error("%s: per-step latents of another shape than this cell's", ref);
		} else {
			char *dp = dg_path_join(dir, "drift.csv");
			rc = write_drift(dp, steps, t.data, n, numel);
			free(dp);
		}
		dg_tensor_free(&t);
	}
	free(own);
	return rc;
}

int dg_closed_cell(const dg_experiment *e, int k, const char *dir, const char *device,
		   const char *command_line, bool progress)
{
	const dg_exp_cell *c = &e->cells[k];
	const dg_exp_model *m = &e->model;
	dg_policy dense;
	if (dg_policy_parse("dense", &dense))
		return -1;
	const dg_policy *p = c->policy < 0 ? &dense : &e->policies[c->policy];
	double rho = c->policy < 0 ? 1 : e->densities[c->density];
	dg_dit_input_opts io = { .model = m->path, .text = e->prompts[c->prompt].spec,
				 .negative = m->negative, .device = device, .seed = m->seeds[c->seed],
				 .guidance = m->guidance };
	memcpy(io.latent, m->latent, sizeof io.latent);
	dg_dit_inputs di;
	bool reused;
	dg_wan_model *model = model_for(m->path, device, &reused);
	if (!model || dg_dit_inputs_load_with(&io, model, &di))
		return -1;
	dg_dit_sample_opts so = { .model = di.model, .noise = di.noise, .steps = m->steps,
				  .shift = m->shift, .guidance = m->guidance, .sampler = m->sampler,
				  .cond = di.cond, .uncond = di.uncond };
	memcpy(so.latent, di.latent, sizeof so.latent);
	int shape[4] = { di.model->cfg.out_dim, di.latent[0], di.latent[1], di.latent[2] };
	size_t numel = (size_t)shape[0] * shape[1] * shape[2] * shape[3];
	float *lat = dg_malloc(numel * sizeof(float));
	float *steps = numel * m->steps * sizeof(float) <= DRIFT_MAX_BYTES ? dg_malloc(numel * m->steps * sizeof(float))
									   : NULL;
	so.step_latents = steps;
	dg_generate_stats st;
	int rc = dg_generate_run(&so, di.grid, p, rho, &e->runs[c->run].resolved, e->cache_offload, !progress,
				 lat, &st);
	char dstr[32], seed[32];
	snprintf(dstr, sizeof dstr, "%g", rho);
	snprintf(seed, sizeof seed, "%lu", m->seeds[c->seed]);
	const char *attrs[] = { "policy", p->name, "density_target", dstr, "prompt",
				e->prompts[c->prompt].label, "seed", seed, NULL };
	char *path = dg_path_join(dir, "latents.h5");
	if (!rc)
		rc = dg_latents_write(path, lat, shape, attrs);
	if (!rc && steps)
		rc = cell_steps(e, c, dir, steps, shape);
	free(path);
	free(lat);
	free(steps);
	if (!rc) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "format", "dsgap-closed-cell");
		cJSON_AddStringToObject(j, "dsgap_version", DG_VERSION);
		cJSON_AddStringToObject(j, "git_commit", dg_git_commit());
		char date[32];
		dg_utc_now(date, sizeof date);
		cJSON_AddStringToObject(j, "date", date);
		cJSON_AddStringToObject(j, "device", di.model->ops->device);
		cJSON_AddStringToObject(j, "command_line", command_line ? command_line : "");
		cJSON_AddStringToObject(j, "model", di.model->name);
		cJSON_AddStringToObject(j, "weights", di.model->weights_path);
		cJSON_AddNumberToObject(j, "load_s", reused ? 0 : di.model->load_s); /* this cell's own load */
		cJSON_AddNumberToObject(j, "load_bytes", di.model->load_bytes);
		cJSON_AddBoolToObject(j, "model_reused", reused); /* loaded by an earlier cell of the process */
		cJSON_AddStringToObject(j, "prompt", e->prompts[c->prompt].label);
		cJSON_AddNumberToObject(j, "seed", (double)m->seeds[c->seed]);
		cJSON_AddStringToObject(j, "policy", p->name);
		cJSON_AddNumberToObject(j, "density_target", rho);
		cJSON_AddStringToObject(j, "reference", e->cells[c->reference].id);
		cJSON_AddNumberToObject(j, "density", st.density);
		cJSON_AddNumberToObject(j, "transformer_s", st.ss.transformer_s);
		cJSON_AddNumberToObject(j, "total_s", st.ss.total_s);
		cJSON_AddNumberToObject(j, "forwards", st.ss.forwards);
		cJSON_AddNumberToObject(j, "attention_s", st.as.seconds);
		cJSON_AddNumberToObject(j, "metadata_s", st.as.meta_seconds);
		cJSON_AddNumberToObject(j, "attend_s", st.as.attend_seconds);
		cJSON_AddItemToObject(j, "step_s", cJSON_CreateDoubleArray(st.ss.step_s, m->steps < DG_DIT_STEP_TIMES ? m->steps
													       : DG_DIT_STEP_TIMES));
		cJSON_AddBoolToObject(j, "cache_offload", e->cache_offload);
		const dg_offload_stats *os = &st.as.offload;
		cJSON_AddNumberToObject(j, "offload_up_bytes", os->up_bytes);
		cJSON_AddNumberToObject(j, "offload_down_bytes", os->down_bytes);
		cJSON_AddNumberToObject(j, "offload_copy_s", os->copy_s);
		cJSON_AddNumberToObject(j, "offload_wait_s", os->wait_s);
		cJSON_AddNumberToObject(j, "offload_pin_s", os->pin_s);
		cJSON_AddNumberToObject(j, "offload_pin_ahead_bytes", os->pin_ahead_bytes);
		cJSON_AddNumberToObject(j, "offload_pin_ahead_s", os->pin_ahead_s);
		cJSON_AddNumberToObject(j, "units", (double)st.as.calls);
		cJSON_AddNumberToObject(j, "sparse_units", (double)st.as.sparse_calls);
		dg_json_paths_shown(j);
		char *text = cJSON_Print(j);
		cJSON_Delete(j);
		char *jp = dg_path_join(dir, "run.json");
		dg_out o;
		rc = dg_out_open(&o, jp);
		if (!rc) {
			fprintf(o.f, "%s\n", text);
			rc = dg_out_commit(&o);
		}
		free(jp);
		cJSON_free(text);
	}
	dg_dit_inputs_free(&di);
	return rc;
}

/* ---------------------------------------------------------------------------------------------- */
/* merge                                                                                           */

static const char *jstr(const cJSON *o, const char *key)
{
	const cJSON *s = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsString(s) ? s->valuestring : "";
}

/* key of o, else def (folders of older runs name no source_run: every cell in its own run) */
static const char *jstr_or(const cJSON *o, const char *key, const char *def)
{
	const char *s = jstr(o, key);
	return *s ? s : def;
}

const char *dg_closed_cell_run(const cJSON *run, int i)
{
	const cJSON *ci = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(run, "cell_info"), i);
	return jstr_or(ci, "source_run", jstr(run, "name"));
}

static double jnum(const cJSON *o, const char *key)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

/* a cell as found in the folders: its run.json and final latents */
typedef struct {
	char id[DG_EXP_CELL_ID_MAX];
	char dir[4096]; /* the folder it was read from */
	cJSON *json;
	dg_tensor lat;
} found_cell;

static void found_free(found_cell *f)
{
	cJSON_Delete(f->json);
	dg_tensor_free(&f->lat);
	memset(f, 0, sizeof *f);
}

static bool same_tensor(const dg_tensor *a, const dg_tensor *b)
{
	if (a->ndim != b->ndim)
		return false;
	size_t n = 1;
	for (int i = 0; i < a->ndim; i++) {
		if (a->shape[i] != b->shape[i])
			return false;
		n *= (size_t)a->shape[i];
	}
	return !memcmp(a->data, b->data, n * sizeof(float));
}

/* Read cell id of run rname from the first folder that has it; a copy in a later folder must hold
 * the same latents. */
static int load_cell(const char *rname, const char *id, char *const *dirs, int ndirs, found_cell *f)
{
	memset(f, 0, sizeof *f);
	snprintf(f->id, sizeof f->id, "%s", id);
	char where[4200] = "";
	for (int i = 0; i < ndirs; i++) {
		char d[4096], lp[4200];
		snprintf(d, sizeof d, "%s/cells/%s/%s", dirs[i], rname, id);
		if (!dg_closed_cell_done(d))
			continue;
		snprintf(lp, sizeof lp, "%s/latents.h5", d);
		dg_tensor t;
		if (dg_tensor_read(lp, "latents", &t))
			return found_free(f), -1;
		if (!f->json) {
			char *jp = dg_path_join(d, "run.json"), *text = dg_read_all(jp, 1u << 24, NULL);
			const char *why = "missing";
			int line = 0;
			f->json = text ? dg_json_parse(text, strlen(text), &why, &line) : NULL;
			free(text);
			if (!f->json) {
				if (line)
					dg_error("merge: %s:%d: %s", jp, line, why);
				else
					dg_error("merge: %s: %s", jp, why);
				free(jp);
				dg_tensor_free(&t);
				return found_free(f), -1;
			}
			free(jp);
			if (t.ndim != 4) {
				dg_tensor_free(&t);
				dg_error("merge: %s: latents of %d dimensions, expected 4", lp, t.ndim);
				return found_free(f), -1;
			}
			f->lat = t;
			snprintf(f->dir, sizeof f->dir, "%s", d);
			snprintf(where, sizeof where, "%s", lp);
			continue;
		}
		bool same = same_tensor(&f->lat, &t);
		dg_tensor_free(&t);
		if (!same) {
			dg_error("merge: cell %s/%s differs between %s and %s", rname, id, where, lp);
			return found_free(f), -1;
		}
	}
	if (!f->json)
		return dg_error("merge: cell %s/%s is in none of the folders", rname, id);
	return 0;
}

/* whether cell id of run rname is finished in one of dirs[0..ndirs) */
static bool cell_found(const char *rname, const char *id, char *const *dirs, int ndirs)
{
	for (int i = 0; i < ndirs; i++) {
		char d[4096];
		snprintf(d, sizeof d, "%s/cells/%s/%s", dirs[i], rname, id);
		if (dg_closed_cell_done(d))
			return true;
	}
	return false;
}

/* the cell's per-step drift rows (prompt,seed,policy,density_target,step,rel_l2) into b: from its
 * drift.csv, else from its steps.h5 against the reference's; nothing where neither is there (the
 * latents did not fit DRIFT_MAX_BYTES). 0 or -1 (reported). */
static int cell_drift(const found_cell *cell, const found_cell *ref, const char *prefix, dg_sbuf *b)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/drift.csv", cell->dir);
	FILE *f = fopen(path, "r");
	if (f) {
		char line[256];
		int lineno = 0, rc = 0;
		while (fgets(line, sizeof line, f) && !rc) {
			int step;
			double v;
			char tail;
			if (++lineno == 1)
				rc = strcmp(line, "step,rel_l2\n") ? dg_error("merge: %s:1: expected the header step,rel_l2",
									  path) : 0;
			else if (sscanf(line, "%d,%lf%c", &step, &v, &tail) != 3 || tail != '\n' || step < 0)
				rc = dg_error("merge: %s:%d: expected STEP,REL_L2", path, lineno);
			else
				dg_sb_printf(b, "%s,%d,%.9g\n", prefix, step, v);
		}
		fclose(f);
		return rc;
	}
	char rp[4200];
	snprintf(path, sizeof path, "%s/steps.h5", cell->dir);
	snprintf(rp, sizeof rp, "%s/steps.h5", ref->dir);
	struct stat st;
	if (stat(path, &st) || stat(rp, &st))
		return 0;
	dg_tensor x, r;
	if (dg_tensor_read(path, "per-step latents", &x))
		return -1;
	if (dg_tensor_read(rp, "reference steps", &r))
		return dg_tensor_free(&x), -1;
	int rc = 0;
	size_t numel = (size_t)cell->lat.shape[0] * cell->lat.shape[1] * cell->lat.shape[2] * cell->lat.shape[3];
	bool same = x.ndim == 4 && r.ndim == 4 && numel > 0;
	for (int i = 0; same && i < 4; i++)
		same = x.shape[i] == r.shape[i];
	if (!same || x.shape[0] % cell->lat.shape[0])
		rc = dg_error("merge: %s: per-step latents of another shape than %s's", path, rp);
	for (int64_t i = 0; !rc && i < x.shape[0] / cell->lat.shape[0]; i++)
		dg_sb_printf(b, "%s,%lld,%.9g\n", prefix, (long long)i,
			     rel_l2(x.data + (size_t)i * numel, r.data + (size_t)i * numel, numel));
	dg_tensor_free(&x), dg_tensor_free(&r);
	return rc;
}

/* means over the samples of one policy x density */
typedef struct {
	char policy[DG_POLICY_NAME_MAX];
	double rho, n, density, psnr, psnr_min, ssim, ssim_min, time, ref_time;
	double first_extra, n_first; /* the first sparse step's time over the later ones' mean */
} acc;

/* A cell's first step past the warm-up minus the mean of its later steps (seconds; its run.json's
 * step_s): a one-off cost of that step (svg2's first k-means; an anchor's metadata), so that a
 * projection to more steps counts it once. NaN where the cell has fewer than two such steps. */
static double first_sparse_extra(const cJSON *cell, int warmup)
{
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(cell, "step_s");
	int n = cJSON_GetArraySize(st);
	if (!cJSON_IsArray(st) || n < warmup + 2)
		return NAN;
	double later = 0;
	for (int i = warmup + 1; i < n; i++) {
		const cJSON *x = cJSON_GetArrayItem(st, i);
		if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble))
			return NAN;
		later += x->valuedouble;
	}
	const cJSON *f = cJSON_GetArrayItem(st, warmup);
	return cJSON_IsNumber(f) ? f->valuedouble - later / (n - warmup - 1) : NAN;
}

char *dg_closed_md_head(const char *name, const char *fp)
{
	dg_sbuf b = { 0 };
	dg_sb_printf(&b, "# %s: closed loop, mean over the samples per run, policy and density\n\n"
		     "Every sample (prompt, seed) is generated densely and under each policy from the same "
		     "noise; PSNR (dB) and SSIM of the final latents against the dense run, per frame, "
		     "averaged over frames and then over samples (min: the worst frame of any sample); "
		     "speedup = mean transformer time of the dense runs / that of the policy; 3 significant "
		     "figures (summary.csv: full precision). Experiment fingerprint %s.\n\n| run | policy | density_target | samples | density | PSNR | "
		     "PSNR min | SSIM | SSIM min | transformer s | speedup |\n"
		     "|:--|:--|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n", name, fp);
	return b.buf;
}

int dg_closed_merge_run(const cJSON *plan, const cJSON *run, char *const *dirs, int ndirs, bool partial,
			dg_closed_merged *out)
{
	memset(out, 0, sizeof *out);
	const char *rname = jstr(run, "name");
	const cJSON *cells = cJSON_GetObjectItemCaseSensitive(run, "cells");
	const cJSON *info = cJSON_GetObjectItemCaseSensitive(run, "cell_info");
	const cJSON *sched = cJSON_GetObjectItemCaseSensitive(run, "schedule");
	const cJSON *model = cJSON_GetObjectItemCaseSensitive(plan, "model");
	int ncells = cJSON_GetArraySize(cells);
	if (cJSON_GetArraySize(info) != ncells)
		return dg_error("merge: experiment.json: run %s has no cell_info for its %d cells", rname, ncells);
	dg_sbuf rows = { 0 }, summary = { 0 }, md = { 0 }, devices = { 0 }, drift = { 0 };
	dg_sb_printf(&rows, "%s\n", DG_CLOSED_HEADER);
	/* the schedule's columns: anchor_every, anchors, dense_layers (older experiment.json: no
	 * anchor_every, so a list when the spec gives anchors, else once) */
	char anchors[256] = "", dense[256] = "", every[32];
	const cJSON *an, *ae = cJSON_GetObjectItemCaseSensitive(sched, "anchor_every");
	cJSON_ArrayForEach(an, cJSON_GetObjectItemCaseSensitive(sched, "anchors"))
		snprintf(anchors + strlen(anchors), sizeof anchors - strlen(anchors), "%s%d", *anchors ? ";" : "",
			 an->valueint);
	cJSON_ArrayForEach(an, cJSON_GetObjectItemCaseSensitive(sched, "dense_layers"))
		snprintf(dense + strlen(dense), sizeof dense - strlen(dense), "%s%d", *dense ? ";" : "", an->valueint);
	if (!*dense)
		snprintf(dense, sizeof dense, "none");
	if (cJSON_IsNumber(ae))
		snprintf(every, sizeof every, "%d", ae->valueint);
	else
		snprintf(every, sizeof every, "%s", cJSON_IsString(ae) ? ae->valuestring :
			 strstr(jstr(sched, "spec"), "anchors=") ? "given" : "once");
	int warmup = (int)jnum(sched, "warmup");
	dg_sb_printf(&drift, "%s\n", DG_CLOSED_DRIFT_HEADER);
	acc *a = dg_calloc((size_t)ncells, sizeof *a);
	int na = 0, rc = 0, mixed = 0;
	found_cell ref = { 0 };
	cJSON *missing = cJSON_CreateArray(); /* --partial: the cells left out */
	char first_date[64] = "";
	double transformer_total = 0;
	for (int i = 0; i < ncells && !rc; i++) {
		const char *id = cJSON_GetArrayItem(cells, i)->valuestring;
		const cJSON *ci = cJSON_GetArrayItem(info, i);
		const char *rid = jstr(ci, "reference");
		found_cell cell;
		if (partial && (!cell_found(dg_closed_cell_run(run, i), id, dirs, ndirs) ||
				!cell_found(jstr_or(ci, "reference_run", rname), rid, dirs, ndirs))) {
			cJSON_AddItemToArray(missing, cJSON_CreateString(id)); /* it, or its sample's reference */
			continue;
		}
		if (strcmp(ref.id, rid)) { /* the sample's reference: the cell before its policies */
			found_free(&ref);
			if ((rc = load_cell(jstr_or(ci, "reference_run", rname), rid, dirs, ndirs, &ref)))
				break;
		}
		if ((rc = load_cell(dg_closed_cell_run(run, i), id, dirs, ndirs, &cell)))
			break;
		const dg_tensor *x = &cell.lat, *r = &ref.lat;
		if (x->shape[0] != r->shape[0] || x->shape[1] != r->shape[1] || x->shape[2] != r->shape[2] ||
		    x->shape[3] != r->shape[3]) {
			rc = dg_error("merge: cell %s/%s: latents of another shape than its reference %s", rname,
				      id, rid);
			found_free(&cell);
			break;
		}
		dg_fidelity_summary fs;
		dg_fidelity_summarise(r->data, x->data, (int)x->shape[0], (int)x->shape[1], (int)x->shape[2],
				      (int)x->shape[3], &fs);
		double e2 = 0, r2 = 0; /* rel_l2 of the whole latents */
		size_t numel = (size_t)x->shape[0] * x->shape[1] * x->shape[2] * x->shape[3];
		for (size_t e = 0; e < numel; e++) {
			double df = (double)x->data[e] - r->data[e];
			e2 += df * df, r2 += (double)r->data[e] * r->data[e];
		}
		double t = jnum(cell.json, "transformer_s"), tref = jnum(ref.json, "transformer_s");
		const char *dev = jstr(cell.json, "device"), *date = jstr(cell.json, "date");
		mixed += strcmp(dev, jstr(ref.json, "device")) != 0;
		if (!devices.buf || !strstr(devices.buf, dev)) {
			if (devices.buf)
				dg_sb_add(&devices, " | ", 3);
			dg_sb_add(&devices, dev, strlen(dev));
		}
		if (!*first_date || strcmp(date, first_date) < 0)
			snprintf(first_date, sizeof first_date, "%s", date);
		transformer_total += t;
		double rho = jnum(ci, "density_target"), dens = jnum(cell.json, "density");
		const char *pol = jstr(ci, "policy");
		dg_sb_printf(&rows, "%s,%.0f,%s,%g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.4g,%.6g,%d,%s,%s,%s\n",
			     jstr(ci, "prompt"), jnum(ci, "seed"), pol, rho, dens, fs.psnr, fs.ssim, fs.psnr_min,
			     fs.ssim_min, t, jnum(cell.json, "total_s"), tref / t,
			     r2 > 0 ? sqrt(e2 / r2) : (e2 > 0 ? INFINITY : 0), warmup, every, anchors, dense);
		if (strcmp(id, rid)) { /* a sparse cell: its drift against the reference, per step */
			char prefix[512];
			snprintf(prefix, sizeof prefix, "%s,%.0f,%s,%g", jstr(ci, "prompt"), jnum(ci, "seed"), pol, rho);
			if ((rc = cell_drift(&cell, &ref, prefix, &drift))) {
				found_free(&cell);
				break;
			}
		}
		int k = 0;
		while (k < na && (strcmp(a[k].policy, pol) || a[k].rho != rho))
			k++;
		if (k == na) {
			a[na] = (acc){ .rho = rho, .psnr_min = INFINITY, .ssim_min = INFINITY };
			snprintf(a[na++].policy, sizeof a[k].policy, "%s", pol);
		}
		a[k].n += 1;
		a[k].density += dens;
		a[k].psnr += fs.psnr;
		a[k].ssim += fs.ssim;
		a[k].psnr_min = fmin(a[k].psnr_min, fs.psnr_min);
		a[k].ssim_min = fmin(a[k].ssim_min, fs.ssim_min);
		a[k].time += t;
		a[k].ref_time += tref;
		double fx = strcmp(id, rid) ? first_sparse_extra(cell.json, warmup) : NAN;
		if (isfinite(fx))
			a[k].first_extra += fx, a[k].n_first += 1;
		found_free(&cell);
	}
	found_free(&ref);
	if (!rc) {
		if (mixed)
			dg_warn("merge: run %s: %d cells ran on another device than their dense reference: their "
				"speedups compare times of different machines", rname, mixed);
		for (int k = 0; k < na; k++) {
			const acc *x = &a[k];
			dg_sb_printf(&summary, "%s,%s,%s,%d,%s,%s,%g,%.0f,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.4g,%s,%s\n", rname,
				     jstr(model, "label"), jstr(sched, "label"), warmup, anchors,
				     x->policy, x->rho, x->n, x->density / x->n, x->psnr / x->n, x->psnr_min,
				     x->ssim / x->n, x->ssim_min, x->time / x->n, x->ref_time / x->time, every, dense);
			char v[7][32];
			dg_sb_printf(&md, "| %s | %s | %g | %.0f | %s | %s | %s | %s | %s | %s | %s |\n", rname,
				     x->policy, x->rho, x->n, dg_sig3(v[0], x->density / x->n),
				     dg_sig3(v[1], x->psnr / x->n), dg_sig3(v[2], x->psnr_min),
				     dg_sig3(v[3], x->ssim / x->n), dg_sig3(v[4], x->ssim_min),
				     dg_sig3(v[5], x->time / x->n), dg_sig3(v[6], x->ref_time / x->time));
		}
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "format", "dsgap-closed-loop");
		cJSON_AddStringToObject(j, "date", first_date);
		cJSON_AddStringToObject(j, "device", devices.buf ? devices.buf : "");
		cJSON_AddStringToObject(j, "git_commit", dg_git_commit());
		cJSON_AddItemToObject(j, "model", cJSON_Duplicate(model, 1));
		cJSON_AddItemToObject(j, "seeds", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(plan, "seeds"), 1));
		cJSON_AddItemToObject(j, "prompts", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(plan, "prompts"), 1));
		cJSON_AddItemToObject(j, "schedule", cJSON_Duplicate(sched, 1));
		cJSON *fe = cJSON_AddArrayToObject(j, "first_sparse_extra_s"); /* per policy and density */
		for (int k = 0; k < na; k++)
			if (a[k].n_first > 0) {
				cJSON *o = cJSON_CreateObject();
				cJSON_AddStringToObject(o, "policy", a[k].policy);
				cJSON_AddNumberToObject(o, "density_target", a[k].rho);
				cJSON_AddNumberToObject(o, "seconds", a[k].first_extra / a[k].n_first);
				cJSON_AddNumberToObject(o, "samples", a[k].n_first);
				cJSON_AddItemToArray(fe, o);
			}
		cJSON *t = cJSON_AddObjectToObject(j, "timing");
		cJSON_AddNumberToObject(t, "transformer_s", transformer_total);
		cJSON *x = cJSON_AddObjectToObject(j, "experiment");
		cJSON_AddStringToObject(x, "name", jstr(plan, "name"));
		cJSON_AddStringToObject(x, "run", rname);
		cJSON_AddStringToObject(x, "fingerprint", jstr(plan, "fingerprint"));
		cJSON_AddStringToObject(x, "config_path", jstr(plan, "config_path"));
		cJSON_AddNumberToObject(x, "cells", ncells);
		if (partial) /* merged with --partial: the cells it lacks (none: complete) */
			cJSON_AddItemToObject(x, "cells_missing", cJSON_Duplicate(missing, 1));
		cJSON *in = cJSON_AddArrayToObject(x, "merged_from");
		for (int i = 0; i < ndirs; i++)
			cJSON_AddItemToArray(in, cJSON_CreateString(dirs[i]));
		dg_json_paths_shown(j);
		char *text = cJSON_Print(j);
		cJSON_Delete(j);
		dg_sbuf js = { 0 };
		dg_sb_printf(&js, "%s\n", text);
		cJSON_free(text);
		out->run_json = js.buf;
		out->rows = rows.buf;
		out->drift = drift.buf;
		out->summary = summary.buf ? summary.buf : dg_strdup("");
		out->md = md.buf ? md.buf : dg_strdup("");
	} else {
		free(rows.buf);
		free(drift.buf);
		free(summary.buf);
		free(md.buf);
	}
	out->missing = cJSON_GetArraySize(missing);
	cJSON_Delete(missing);
	free(devices.buf);
	free(a);
	return rc;
}

void dg_closed_merged_free(dg_closed_merged *m)
{
	free(m->rows);
	free(m->drift);
	free(m->run_json);
	free(m->summary);
	free(m->md);
	memset(m, 0, sizeof *m);
}
