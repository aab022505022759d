/*
 * experiment_grid.c: a read experiment (experiment.c) expanded into runs and cells, and what is
 * done with the grid afterwards: where synth traces go, the device, shards, freeing. The grid's
 * definition is in experiment.h.
 */
#include "batch/experiment.h"
#include "batch/experiment_build.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

int dg_exp_fail(dg_exp_error *err, int line, const char *fmt, ...)
{
	if (err->line)
		return 0;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof err->msg, fmt, ap);
	va_end(ap);
	err->line = line > 0 ? line : -1;
	return 0;
}

static int resolve_anchors(dg_exp_error *err, const dg_exp_schedule *s, const dg_exp_trace *t, dg_schedule *sc)
{
	*sc = s->schedule;
	const dg_trace_meta *m = &t->meta;
	char why[256];
	if (dg_schedule_check_trace(sc, m->step_index, m->steps, m->layer_index, m->layers, why, sizeof why))
		return dg_exp_fail(err, s->line, "schedule '%s' on trace '%s': %s", s->label, t->label, why), -1;
	int missing = dg_schedule_resolve_anchors(sc, m->step_index, m->steps);
	DG_ASSERT(missing < 0); /* given anchors are stored steps: checked above */
	return 0;
}

/* open loop: a run per (trace, schedule), trace-major; cells (layer, head) within a run */
int dg_exp_grid_open(dg_experiment *e, dg_exp_error *err)
{
	e->nruns = e->ntraces * e->nschedules;
	e->runs = dg_calloc(e->nruns, sizeof *e->runs);
	long long ncells = 0;
	for (int ti = 0, r = 0; ti < e->ntraces; ti++)
		for (int si = 0; si < e->nschedules; si++, r++) {
			dg_exp_run *run = &e->runs[r];
			const dg_exp_trace *t = &e->traces[ti];
			size_t n = strlen(t->label) + strlen(e->schedules[si].label) + 2;
			run->name = dg_malloc(n);
			snprintf(run->name, n, "%s.%s", t->label, e->schedules[si].label);
			run->trace = ti;
			run->schedule = si;
			if (resolve_anchors(err, &e->schedules[si], t, &run->resolved))
				return -1;
			run->first_cell = (int)ncells;
			run->ncells = t->meta.layers * t->meta.heads;
			ncells += run->ncells;
			if (ncells > 10000000)
				return dg_exp_fail(err, -1, "the grid has more than 10 million cells"), -1;
		}
	e->ncells = (int)ncells;
	e->cells = dg_calloc(e->ncells, sizeof *e->cells);
	for (int r = 0; r < e->nruns; r++) {
		const dg_exp_run *run = &e->runs[r];
		const dg_trace_meta *m = &e->traces[run->trace].meta;
		for (int l = 0, k = run->first_cell; l < m->layers; l++)
			for (int h = 0; h < m->heads; h++, k++) {
				dg_exp_cell *cell = &e->cells[k];
				*cell = (dg_exp_cell){ .run = r, .l = l, .h = h, .layer = m->layer_index[l],
						       .head = m->head_index[h] };
				snprintf(cell->id, sizeof cell->id, "l%d-h%d", cell->layer, cell->head);
			}
	}
	/* cells of one run must have distinct folders, l<layer>-h<head>: no layer or head index twice */
	for (int t = 0; t < e->ntraces; t++) {
		const dg_trace_meta *m = &e->traces[t].meta;
		int a, b;
		bool layer = dg_ints_repeat(m->layer_index, m->layers, &a, &b);
		if (layer || dg_ints_repeat(m->head_index, m->heads, &a, &b))
			return dg_exp_fail(err, e->traces[t].line, "trace '%s' repeats %s index %d (positions %d and "
				    "%d)", e->traces[t].label, layer ? "layer" : "head",
				    layer ? m->layer_index[a] : m->head_index[a], a, b), -1;
	}
	e->fingerprint = dg_exp_fingerprint(e);
	if (e->trace_dir)
		dg_experiment_set_out(e, NULL);
	return 0;
}

/* a cell's folder name: '/', ':' and ' ' of a policy spec made '_' */
static void closed_cell_id(dg_exp_cell *cell, const dg_experiment *e)
{
	const char *pr = e->prompts[cell->prompt].label;
	unsigned long seed = e->model.seeds[cell->seed];
	if (cell->policy < 0)
		snprintf(cell->id, sizeof cell->id, "%s.s%lu.dense", pr, seed);
	else
		snprintf(cell->id, sizeof cell->id, "%s.s%lu.%s@%g", pr, seed, e->policies[cell->policy].name,
			 e->densities[cell->density]);
	for (char *s = cell->id; *s; s++)
		if (*s == '/' || *s == ':' || *s == ' ')
			*s = '_';
}

/* closed loop: one run per schedule; cells run, prompt, seed, then the reference first and the
 * policies x densities (experiment.h) */
int dg_exp_grid_closed(dg_experiment *e, dg_exp_error *err)
{
	const dg_exp_model *m = &e->model;
	for (int i = 0; i < e->nschedules; i++) {
		char why[256];
		if (dg_schedule_check_loop(&e->schedules[i].schedule, m->steps, m->layers, why, sizeof why))
			return dg_exp_fail(err, e->schedules[i].line, "schedule '%s': %s", e->schedules[i].label, why), -1;
	}
	int nsparse = 0;
	for (int p = 0; p < e->npolicies; p++)
		nsparse += !e->policies[p].dense;
	e->nruns = e->nschedules;
	e->runs = dg_calloc(e->nruns, sizeof *e->runs);
	long long per_run = (long long)e->nprompts * m->nseeds * (1 + (long long)nsparse * e->ndensities);
	if (per_run * e->nruns > 10000000)
		return dg_exp_fail(err, -1, "the grid has more than 10 million cells"), -1;
	e->ncells = (int)(per_run * e->nruns);
	e->cells = dg_calloc(e->ncells, sizeof *e->cells);
	int k = 0;
	for (int r = 0; r < e->nruns; r++) {
		dg_exp_run *run = &e->runs[r];
		size_t n = strlen(m->label) + strlen(e->schedules[r].label) + 2;
		run->name = dg_malloc(n);
		snprintf(run->name, n, "%s.%s", m->label, e->schedules[r].label);
		*run = (dg_exp_run){ .name = run->name, .trace = -1, .schedule = r,
				     .resolved = e->schedules[r].schedule, .first_cell = k, .ncells = (int)per_run };
		for (int pr = 0; pr < e->nprompts; pr++)
			for (int sd = 0; sd < m->nseeds; sd++) {
				int ref = k;
				for (int p = -1; p < e->npolicies; p++)
					for (int d = 0; d < (p < 0 ? 1 : e->ndensities); d++) {
						if (p >= 0 && e->policies[p].dense)
							break;
						dg_exp_cell *cell = &e->cells[k++];
						*cell = (dg_exp_cell){ .run = r, .prompt = pr, .seed = sd, .policy = p,
								       .density = p < 0 ? -1 : d, .reference = ref };
						closed_cell_id(cell, e);
					}
			}
	}
	/* generations made once: the dense reference in run 0; a refresh=step policy under the first
	 * schedule that differs from this run's only in anchors (cells sit at the same place in each run) */
	for (int r = 1; r < e->nruns; r++) {
		const dg_schedule *sr = &e->schedules[r].schedule;
		int same = r;
		for (int q = 0; q < r && same == r; q++)
			if (dg_schedule_same_but_anchors(&e->schedules[q].schedule, sr))
				same = q;
		for (long long i = 0; i < per_run; i++) {
			dg_exp_cell *cell = &e->cells[r * per_run + i];
			const dg_policy *p = cell->policy < 0 ? NULL : &e->policies[cell->policy];
			int src = !p ? 0 : p->refresh == DG_REFRESH_STEP ? same : r;
			if (src < r)
				cell->shared = true, cell->source = (int)(src * per_run + i);
		}
	}
	for (int r = 0; r < e->nruns; r++) { /* distinct folders: specs that differ only in '/' vs '_' */
		const dg_exp_run *run = &e->runs[r];
		for (int a = run->first_cell; a < run->first_cell + run->ncells && run->ncells < 20000; a++)
			for (int b = a + 1; b < run->first_cell + run->ncells; b++)
				if (!strcmp(e->cells[a].id, e->cells[b].id))
					return dg_exp_fail(err, -1, "[policies]: two cells would share the folder %s (policies "
						    "that differ only in '/', ':' or ' ' against '_')", e->cells[a].id), -1;
	}
	e->fingerprint = dg_exp_fingerprint(e);
	return 0;
}

void dg_experiment_set_out(dg_experiment *e, const char *out_dir)
{
	for (int i = 0; i < e->ntraces; i++) {
		dg_exp_trace *t = &e->traces[i];
		if (!t->synth)
			continue;
		/* the label and a hash of the spec: a changed spec never reuses an old file */
		char name[DG_EXP_LABEL_MAX + 32];
		snprintf(name, sizeof name, "%s-%08llx.h5", t->label,
			 (unsigned long long)(dg_fnv_str(DG_FNV_OFFSET, t->spec) & 0xffffffffull));
		char *dir = e->trace_dir ? dg_strdup(e->trace_dir) : out_dir ? dg_path_join(out_dir, "traces") : NULL;
		if (!dir)
			continue;
		free(t->path);
		t->path = dg_path_join(dir, name);
		free(dir);
	}
}

void dg_experiment_set_device(dg_experiment *e, const char *device)
{
	free(e->device);
	e->device = dg_strdup(device);
	e->fingerprint = dg_exp_fingerprint(e);
}

void dg_experiment_free(dg_experiment *e)
{
	for (int i = 0; i < e->ntraces; i++) {
		free(e->traces[i].label);
		free(e->traces[i].spec);
		free(e->traces[i].path);
		dg_trace_meta_free(&e->traces[i].meta);
	}
	for (int i = 0; i < e->nschedules; i++) {
		free(e->schedules[i].label);
		free(e->schedules[i].spec);
	}
	for (int i = 0; i < e->nruns; i++)
		free(e->runs[i].name);
	for (int i = 0; i < e->nprompts; i++) {
		free(e->prompts[i].label);
		free(e->prompts[i].spec);
	}
	free(e->prompts);
	free(e->model.label);
	free(e->model.path);
	free(e->model.negative);
	free(e->model.seeds);
	free(e->traces);
	free(e->schedules);
	free(e->runs);
	free(e->cells);
	free(e->path);
	free(e->dir);
	free(e->text);
	free(e->name);
	free(e->description);
	free(e->policy_list);
	free(e->policies);
	free(e->densities);
	free(e->device);
	free(e->out_dir);
	free(e->trace_dir);
	memset(e, 0, sizeof *e);
}

int dg_experiment_slice(const dg_experiment *e, int shard, int nshards, int worker, int nworkers, int *idx)
{
	DG_ASSERT(nshards >= 1 && shard >= 0 && shard < nshards);
	DG_ASSERT(nworkers >= 1 && worker >= 0 && worker < nworkers);
	int n = 0, pos = 0, computed = 0;
	for (int k = 0; k < e->ncells; k++) {
		if (e->cells[k].shared || computed++ % nshards != shard)
			continue;
		if (pos++ % nworkers == worker)
			idx[n++] = k;
	}
	return n;
}
