/*
 * experiment_json.c: what identifies an experiment's rows (the fingerprint: everything that decides
 * them, not the output paths) and experiment.json, the resolved experiment as provenance.
 */
#include "batch/experiment.h"
#include "batch/experiment_build.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "util/util.h"

static void ints_str(char *buf, size_t size, const int *v, int n)
{
	int k = snprintf(buf, size, "%s", n ? "" : "-");
	for (int i = 0; i < n && k < (int)size; i++)
		k += snprintf(buf + k, size - k, "%s%d", i ? ";" : "", v[i]);
}

/* what every run's cells run: the device, the policies and the densities */
static uint64_t hash_cells(uint64_t h, const dg_experiment *e)
{
	char buf[64];
	h = dg_fnv_str(h, e->device);
	h = dg_fnv_str(h, "\npolicies");
	for (int i = 0; i < e->npolicies; i++)
		h = dg_fnv_str(dg_fnv_str(h, " "), e->policies[i].name);
	h = dg_fnv_str(h, "\ndensities");
	for (int i = 0; i < e->ndensities; i++) {
		snprintf(buf, sizeof buf, " %.17g", e->densities[i]);
		h = dg_fnv_str(h, buf);
	}
	return h;
}

/* a schedule's given anchors (a default one follows from the warm-up) and dense layers, after its
 * warm-up; anchors=every:N; its sparse layers and steps */
static uint64_t hash_schedule(uint64_t h, const dg_schedule *s)
{
	char buf[4096];
	ints_str(buf, sizeof buf, s->anchors, s->anchors_given ? s->nanchors : 0);
	h = dg_fnv_str(dg_fnv_str(h, buf), " ");
	ints_str(buf, sizeof buf, s->dense_layers, s->ndense_layers);
	h = dg_fnv_str(h, buf);
	if (s->anchor_every) { /* anchors=every:N (absent before it existed: old fingerprints kept) */
		snprintf(buf, sizeof buf, " every %d", s->anchor_every);
		h = dg_fnv_str(h, buf);
	}
	if (s->sparse_window || s->nsparse_layers) { /* issue 50's keys: absent, the hash is as before */
		ints_str(buf, sizeof buf, s->sparse_layers, s->nsparse_layers);
		h = dg_fnv_str(dg_fnv_str(h, " sparse_layers "), buf);
		snprintf(buf, sizeof buf, " sparse_steps %d %d-%d", s->sparse_window, s->sparse_lo, s->sparse_hi);
		h = dg_fnv_str(h, buf);
	}
	return h;
}

static uint64_t fingerprint_open(const dg_experiment *e)
{
	char buf[4096];
	uint64_t h = dg_fnv_str(DG_FNV_OFFSET, "dsgap-experiment 1\ndevice ");
	h = hash_cells(h, e);
	for (int r = 0; r < e->nruns; r++) {
		const dg_exp_run *run = &e->runs[r];
		const dg_exp_trace *t = &e->traces[run->trace];
		const dg_schedule *s = &e->schedules[run->schedule].schedule;
		const char *base = strrchr(t->spec, '/');
		/* the trace's contents are not here but in each cell (CELL/input.sum, checked by
		 * dg_batch_validate): a trace changed in place invalidates only the cells it changed, and
		 * its size no more than its contents (0 kept where the size was, as for synthetic traces) */
		snprintf(buf, sizeof buf, "\nrun %s trace %s %lld %s %dx%dx%dx%dx%d schedule warmup=%d given=%d ",
			 run->name, t->synth ? t->spec : base ? base + 1 : t->spec, 0LL,
			 t->dtype, t->meta.steps, t->meta.layers, t->meta.heads, t->meta.tokens, t->meta.head_dim,
			 s->warmup, s->anchors_given);
		h = dg_fnv_str(h, buf);
		h = hash_schedule(h, s);
	}
	return h;
}

/* bytes of a checkpoint: the file, or the folder's *.safetensors, *.json */
long long dg_exp_model_size(const char *path)
{
	struct stat st;
	if (stat(path, &st))
		return -1;
	if (!S_ISDIR(st.st_mode))
		return (long long)st.st_size;
	long long n = 0;
	DIR *d = opendir(path);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		size_t l = strlen(de->d_name);
		bool want = (l > 12 && !strcmp(de->d_name + l - 12, ".safetensors")) ||
			    (l > 5 && !strcmp(de->d_name + l - 5, ".json"));
		char *p = dg_path_join(path, de->d_name);
		if (want && !stat(p, &st) && S_ISREG(st.st_mode))
			n += (long long)st.st_size;
		free(p);
	}
	if (d)
		closedir(d);
	return n;
}

static const char *base_name(const char *p)
{
	const char *b = strrchr(p, '/');
	return b ? b + 1 : p;
}

static uint64_t fingerprint_closed(const dg_experiment *e)
{
	char buf[4096];
	const dg_exp_model *m = &e->model;
	uint64_t h = dg_fnv_str(DG_FNV_OFFSET, "dsgap-experiment closed 1\ndevice ");
	h = hash_cells(h, e);
	snprintf(buf, sizeof buf, "\nmodel %s %s %lld negative %s latent %dx%dx%d steps %d shift %.17g "
		 "guidance %.17g sampler %s\nseeds", m->label, base_name(m->path), m->size,
		 m->negative ? base_name(m->negative) : "-", m->latent[0], m->latent[1], m->latent[2],
		 m->steps, m->shift, m->guidance, dg_sampler_name(m->sampler));
	h = dg_fnv_str(h, buf);
	for (int i = 0; i < m->nseeds; i++) {
		snprintf(buf, sizeof buf, " %lu", m->seeds[i]);
		h = dg_fnv_str(h, buf);
	}
	for (int i = 0; i < e->nprompts; i++) {
		snprintf(buf, sizeof buf, "\nprompt %s %s %lld", e->prompts[i].label,
			 base_name(e->prompts[i].spec), e->prompts[i].file_size);
		h = dg_fnv_str(h, buf);
	}
	for (int r = 0; r < e->nruns; r++) {
		const dg_schedule *s = &e->runs[r].resolved;
		snprintf(buf, sizeof buf, "\nrun %s warmup=%d given=%d ", e->runs[r].name, s->warmup,
			 s->anchors_given);
		h = dg_fnv_str(h, buf);
		h = hash_schedule(h, s);
	}
	return h;
}

uint64_t dg_exp_fingerprint(const dg_experiment *e)
{
	return e->closed ? fingerprint_closed(e) : fingerprint_open(e);
}

void dg_experiment_fingerprint_str(const dg_experiment *e, char *buf)
{
	snprintf(buf, 17, "%016llx", (unsigned long long)e->fingerprint);
}

/* ---------------------------------------------------------------------------------------------- */
/* experiment.json                                                                                 */

static cJSON *trace_json(const dg_exp_trace *t)
{
	const dg_trace_meta *m = &t->meta;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "label", t->label);
	/* synthetic traces are named by their spec: it regenerates them, wherever they were written */
	cJSON_AddStringToObject(j, "path", t->spec);
	cJSON_AddStringToObject(j, "kind", t->synth ? "synthetic" : "file");
	cJSON_AddStringToObject(j, "model", m->model ? m->model : "");
	cJSON_AddStringToObject(j, "source", m->source ? m->source : "");
	cJSON_AddStringToObject(j, "dtype", t->dtype ? t->dtype : "");
	cJSON_AddNumberToObject(j, "steps", m->steps);
	cJSON_AddNumberToObject(j, "layers", m->layers);
	cJSON_AddNumberToObject(j, "heads", m->heads);
	cJSON_AddNumberToObject(j, "tokens", m->tokens);
	cJSON_AddNumberToObject(j, "head_dim", m->head_dim);
	cJSON_AddItemToObject(j, "grid", cJSON_CreateIntArray(m->grid, 3));
	cJSON_AddNumberToObject(j, "text_tokens", m->text_tokens);
	cJSON_AddItemToObject(j, "step_index", cJSON_CreateIntArray(m->step_index, m->steps));
	cJSON_AddItemToObject(j, "layer_index", cJSON_CreateIntArray(m->layer_index, m->layers));
	cJSON_AddItemToObject(j, "head_index", cJSON_CreateIntArray(m->head_index, m->heads));
	return j;
}

/* the closed-loop settings: model, sampling, seeds, prompts */
static void closed_json(const dg_experiment *e, cJSON *root)
{
	const dg_exp_model *m = &e->model;
	cJSON *j = cJSON_AddObjectToObject(root, "model");
	cJSON_AddStringToObject(j, "label", m->label);
	cJSON_AddStringToObject(j, "path", m->path);
	cJSON_AddStringToObject(j, "negative", m->negative ? m->negative : "");
	cJSON_AddItemToObject(j, "latent", cJSON_CreateIntArray(m->latent, 3));
	cJSON_AddNumberToObject(j, "steps", m->steps);
	cJSON_AddNumberToObject(j, "shift", m->shift);
	cJSON_AddNumberToObject(j, "guidance", m->guidance);
	cJSON_AddStringToObject(j, "sampler", dg_sampler_name(m->sampler));
	cJSON_AddNumberToObject(j, "bytes", (double)m->size);
	cJSON *seeds = cJSON_AddArrayToObject(root, "seeds");
	for (int i = 0; i < m->nseeds; i++)
		cJSON_AddItemToArray(seeds, cJSON_CreateNumber((double)m->seeds[i]));
	cJSON *prompts = cJSON_AddArrayToObject(root, "prompts");
	for (int i = 0; i < e->nprompts; i++) {
		cJSON *p = cJSON_CreateObject();
		cJSON_AddStringToObject(p, "label", e->prompts[i].label);
		cJSON_AddStringToObject(p, "path", e->prompts[i].spec);
		cJSON_AddItemToArray(prompts, p);
	}
}

char *dg_experiment_json(const dg_experiment *e)
{
	char fp[17];
	dg_experiment_fingerprint_str(e, fp);
	cJSON *root = cJSON_CreateObject();
	cJSON_AddStringToObject(root, "format", "dsgap-experiment");
	cJSON_AddNumberToObject(root, "version", 1);
	cJSON_AddStringToObject(root, "name", e->name);
	cJSON_AddStringToObject(root, "description", e->description ? e->description : "");
	cJSON_AddStringToObject(root, "fingerprint", fp);
	cJSON_AddStringToObject(root, "dsgap_version", DG_VERSION);
	cJSON_AddStringToObject(root, "git_commit", dg_git_commit());
	cJSON_AddStringToObject(root, "config_path", e->path);
	cJSON_AddStringToObject(root, "config_text", e->text);
	cJSON_AddStringToObject(root, "device", e->device);
	cJSON_AddStringToObject(root, "kind", e->closed ? "closed-loop" : "open-loop");
	cJSON *pols = cJSON_AddArrayToObject(root, "policies");
	for (int i = 0; i < e->npolicies; i++)
		cJSON_AddItemToArray(pols, cJSON_CreateString(e->policies[i].name));
	cJSON_AddItemToObject(root, "densities", cJSON_CreateDoubleArray(e->densities, e->ndensities));
	cJSON_AddNumberToObject(root, "ncells", e->ncells);
	if (e->closed)
		closed_json(e, root);
	cJSON *runs = cJSON_AddArrayToObject(root, "runs");
	for (int r = 0; r < e->nruns; r++) {
		const dg_exp_run *run = &e->runs[r];
		const dg_exp_schedule *s = &e->schedules[run->schedule];
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "name", run->name);
		if (!e->closed)
			cJSON_AddItemToObject(j, "trace", trace_json(&e->traces[run->trace]));
		cJSON *sj = cJSON_AddObjectToObject(j, "schedule");
		cJSON_AddStringToObject(sj, "label", s->label);
		cJSON_AddStringToObject(sj, "spec", s->spec);
		cJSON_AddNumberToObject(sj, "warmup", run->resolved.warmup);
		dg_schedule anchors = run->resolved;
		if (e->closed) /* the denoising loop's steps */
			dg_schedule_resolve_anchors(&anchors, NULL, e->model.steps);
		cJSON_AddItemToObject(sj, "anchors", cJSON_CreateIntArray(anchors.anchors, anchors.nanchors));
		/* the family: every:N (N), a given list ("given") or the default single anchor ("once") */
		if (anchors.anchor_every)
			cJSON_AddNumberToObject(sj, "anchor_every", anchors.anchor_every);
		else
			cJSON_AddStringToObject(sj, "anchor_every", anchors.anchors_given ? "given" : "once");
		cJSON_AddItemToObject(sj, "dense_layers",
				      cJSON_CreateIntArray(run->resolved.dense_layers, run->resolved.ndense_layers));
		cJSON *cells = cJSON_AddArrayToObject(j, "cells");
		for (int k = 0; k < run->ncells; k++)
			cJSON_AddItemToArray(cells, cJSON_CreateString(e->cells[run->first_cell + k].id));
		if (e->closed) { /* what each cell runs, and its sample's dense reference */
			cJSON *info = cJSON_AddArrayToObject(j, "cell_info");
			for (int k = 0; k < run->ncells; k++) {
				const dg_exp_cell *c = &e->cells[run->first_cell + k];
				cJSON *x = cJSON_CreateObject();
				cJSON_AddStringToObject(x, "prompt", e->prompts[c->prompt].label);
				cJSON_AddNumberToObject(x, "seed", (double)e->model.seeds[c->seed]);
				cJSON_AddStringToObject(x, "policy", c->policy < 0 ? "dense" : e->policies[c->policy].name);
				cJSON_AddNumberToObject(x, "density_target", c->policy < 0 ? 1 : e->densities[c->density]);
				cJSON_AddStringToObject(x, "reference", e->cells[c->reference].id);
				/* a shared generation: the run whose folder holds it (the same cell id) */
				const dg_exp_cell *rc = &e->cells[c->reference];
				if (c->shared)
					cJSON_AddStringToObject(x, "source_run", e->runs[e->cells[c->source].run].name);
				if (rc->shared)
					cJSON_AddStringToObject(x, "reference_run", e->runs[e->cells[rc->source].run].name);
				cJSON_AddItemToArray(info, x);
			}
		}
		cJSON_AddItemToArray(runs, j);
	}
	char *s = cJSON_Print(root);
	cJSON_Delete(root);
	return s;
}
