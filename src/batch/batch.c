/*
 * batch.c: run the cells of an experiment and merge them (the layout of an output folder is in
 * batch.h, the grid in experiment.h). A cell is dg_replay on a one-cluster view of its trace, so
 * its rows are exactly that cluster's rows of a whole-trace replay; merging concatenates cells in
 * the canonical order (runs, then clusters in (layer, head) order), which is replay's own order.
 */
#include "batch/batch.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "analysis/decompose.h"
#include "analysis/results.h"
#include "batch/batch_closed.h"
#include "replay/replay.h"
#include "trace/trace.h"
#include "trace/trace_view.h"
#include "util/files.h"
#include "util/json.h"
#include "util/util.h"

/* ---------------------------------------------------------------------------------------------- */
/* files                                                                                           */

static bool exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

/* Remove a folder that holds only files (a cell's temporary folder). */
static void remove_flat_dir(const char *path)
{
	DIR *d = opendir(path);
	if (d) {
		struct dirent *de;
		while ((de = readdir(d)))
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
				char *p = dg_path_join(path, de->d_name);
				unlink(p);
				free(p);
			}
		closedir(d);
	}
	rmdir(path);
}

/* Remove cells/RUN/.ID.tmp.* (id NULL: every temporary folder of the run). Returns how many. */
static int remove_temps(const char *run_dir, const char *id)
{
	DIR *d = opendir(run_dir);
	if (!d)
		return 0;
	char prefix[DG_EXP_CELL_ID_MAX + 8];
	snprintf(prefix, sizeof prefix, ".%s.tmp.", id ? id : "");
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		bool match = id ? !strncmp(de->d_name, prefix, strlen(prefix))
				: de->d_name[0] == '.' && strstr(de->d_name, ".tmp.");
		if (!match)
			continue;
		char *p = dg_path_join(run_dir, de->d_name);
		remove_flat_dir(p);
		free(p);
		n++;
	}
	closedir(d);
	return n;
}

static char *cell_dir(const dg_experiment *e, const char *out, int k)
{
	const dg_exp_cell *c = &e->cells[k];
	size_t n = strlen(out) + strlen(e->runs[c->run].name) + strlen(c->id) + 16;
	char *s = dg_malloc(n);
	snprintf(s, n, "%s/cells/%s/%s", out, e->runs[c->run].name, c->id);
	return s;
}

/* an open-loop cell's record of what it read (cell_input_sum): its trace's contents */
#define CELL_INPUT "input.sum"

static bool cell_dir_done(const dg_experiment *e, const char *d)
{
	if (e->closed)
		return dg_closed_cell_done(d);
	char *m = dg_path_join(d, "metrics.csv"), *j = dg_path_join(d, "run.json");
	char *s = dg_path_join(d, CELL_INPUT);
	bool done = exists(m) && exists(j) && exists(s);
	free(m);
	free(j);
	free(s);
	return done;
}

bool dg_batch_cell_done(const dg_experiment *e, const char *out, int k)
{
	char *d = cell_dir(e, out, e->cells[k].shared ? e->cells[k].source : k);
	bool done = cell_dir_done(e, d);
	free(d);
	return done;
}

int dg_batch_count_done(const dg_experiment *e, const char *out, const int *idx, int n)
{
	int done = 0;
	if (!idx)
		n = e->ncells;
	for (int i = 0; i < n; i++)
		done += dg_batch_cell_done(e, out, idx ? idx[i] : i);
	return done;
}

/* ---------------------------------------------------------------------------------------------- */
/* prepare, traces                                                                                 */

static const char *json_str(const cJSON *o, const char *key)
{
	const cJSON *s = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsString(s) ? s->valuestring : NULL;
}

/* the same, "" when absent */
static const char *jstr(const cJSON *o, const char *key)
{
	const char *s = json_str(o, key);
	return s ? s : "";
}

int dg_batch_prepare(const dg_experiment *e, const char *out)
{
	if (dg_mkdir_p(out))
		return -1;
	char *path = dg_path_join(out, "experiment.json"), fp[17];
	dg_experiment_fingerprint_str(e, fp);
	int rc = 0;
	char *old = dg_read_all(path, SIZE_MAX, NULL);
	if (old) {
		const char *why;
		int line;
		cJSON *j = dg_json_parse(old, strlen(old), &why, &line);
		const char *ofp = json_str(j, "fingerprint"), *oname = json_str(j, "name");
		if (!ofp)
			rc = dg_error("%s: not an experiment.json of dsgap run (no fingerprint)", path);
		else if (strcmp(ofp, fp))
			rc = dg_error("%s was made by another experiment ('%s', fingerprint %s; this is '%s', %s): "
				      "use another --out, or remove %s/cells to start over", out,
				      oname ? oname : "?", ofp, e->name, fp, out);
		cJSON_Delete(j);
		free(old);
	} else {
		char *json = dg_experiment_json(e);
		dg_out o;
		if (dg_out_open(&o, path) == 0) {
			fputs(json, o.f);
			fputc('\n', o.f);
			rc = dg_out_commit(&o);
		} else {
			rc = -1;
		}
		free(json);
	}
	free(path);
	return rc;
}

int dg_batch_traces(const dg_experiment *e, const int *idx, int n, bool verbose)
{
	bool *need = dg_calloc(e->ntraces ? e->ntraces : 1, sizeof(bool));
	for (int i = 0; i < n && !e->closed; i++)
		need[e->runs[e->cells[idx[i]].run].trace] = true;
	int rc = 0;
	for (int t = 0; t < e->ntraces && !rc; t++) {
		const dg_exp_trace *tr = &e->traces[t];
		if (!need[t] || !tr->synth || exists(tr->path))
			continue;
		char *dir = dg_strdup(tr->path), *slash = strrchr(dir, '/');
		if (slash)
			*slash = 0;
		if (slash && dg_mkdir_p(dir)) {
			free(dir);
			rc = -1;
			break;
		}
		free(dir);
		double t0 = dg_now();
		if (verbose)
			fprintf(stderr, "run: generating synthetic trace '%s' (%s)\n", tr->label, tr->spec);
		rc = dg_synth(&tr->so, tr->path);
		if (!rc && verbose)
			fprintf(stderr, "run: wrote %s in %.1f s\n", tr->path, dg_now() - t0);
	}
	free(need);
	return rc;
}

/* ---------------------------------------------------------------------------------------------- */
/* what a cell read: resume is exact                                                               */

/* The checksum of what an open-loop cell reads from the open trace tr: Q, K and V of its cluster
 * (positions l, h) at every step, as the replay receives them (the replay's input_sum). */
static int cluster_sum(dg_trace *tr, int l, int h, float *buf, uint64_t *sum)
{
	size_t n = (size_t)tr->meta.tokens * tr->meta.head_dim;
	uint64_t x = DG_FNV_OFFSET;
	for (int s = 0; s < tr->meta.steps; s++)
		for (int q = 0; q < DG_QKV_COUNT; q++) {
			if (dg_trace_read(tr, (dg_qkv)q, s, l, h, buf))
				return -1;
			x = dg_fnv_words(x, buf, n);
		}
	*sum = x;
	return 0;
}

/* dir/input.sum: the trace (label, path, bytes) and the checksum of the cell's units */
static int write_cell_input(const dg_experiment *e, int k, const char *dir, uint64_t sum)
{
	const dg_exp_cell *c = &e->cells[k];
	const dg_exp_trace *t = &e->traces[e->runs[c->run].trace];
	char *p = dg_path_join(dir, CELL_INPUT);
	FILE *f = fopen(p, "w");
	int rc = 0;
	if (!f || fprintf(f, "dsgap-cell-input 1\ntrace %s %s\nbytes %lld\nlayer %d head %d\nsum %016llx\n",
			  t->label, t->path, t->file_size, c->layer, c->head, (unsigned long long)sum) < 0)
		rc = -1;
	if (f && fclose(f))
		rc = -1;
	if (rc)
		rc = dg_error("cannot write %s: %s", p, strerror(errno ? errno : EIO));
	free(p);
	return rc;
}

/* the checksum dir/input.sum records; -1 when it has none */
static int read_cell_input(const char *dir, uint64_t *sum)
{
	char *p = dg_path_join(dir, CELL_INPUT), *text = dg_read_all(p, 1 << 16, NULL);
	free(p);
	const char *s = text ? strstr(text, "\nsum ") : NULL;
	unsigned long long v;
	int rc = s && sscanf(s + 5, "%16llx", &v) == 1 ? 0 : -1;
	if (!rc)
		*sum = v;
	free(text);
	return rc;
}

/* the cluster sums of run's trace, opened on first use */
typedef struct {
	dg_trace tr;
	bool open;
	float *buf;
} sum_ctx;

int dg_batch_validate(const dg_experiment *e, const char *out)
{
	int removed = 0, rc = 0;
	for (int r = 0; r < e->nruns && !rc; r++) {
		const dg_exp_run *run = &e->runs[r];
		const dg_exp_trace *t = e->closed ? NULL : &e->traces[run->trace];
		sum_ctx sc = { .open = false };
		dg_sbuf changed = { 0 };
		int nchanged = 0;
		for (int i = 0; i < run->ncells && !rc; i++) {
			int k = run->first_cell + i;
			const dg_exp_cell *c = &e->cells[k];
			char *d = cell_dir(e, out, k);
			const char *why = NULL;
			uint64_t old, now;
			if (!exists(d)) {
				free(d);
				continue;
			}
			if (!cell_dir_done(e, d)) {
				why = e->closed ? "is incomplete (no run.json or latents.h5)"
						: "is incomplete (no metrics.csv, run.json or " CELL_INPUT ")";
			} else if (!e->closed && exists(t->path)) {
				if (!sc.open && dg_trace_open(&sc.tr, t->path) == 0) {
					sc.open = true;
					sc.buf = dg_malloc((size_t)sc.tr.meta.tokens * sc.tr.meta.head_dim * sizeof *sc.buf);
				}
				if (!sc.open || cluster_sum(&sc.tr, c->l, c->h, sc.buf, &now))
					rc = -1;
				else if (read_cell_input(d, &old))
					why = "records no checksum of its input (no " CELL_INPUT ")";
				else if (old != now)
					why = ""; /* reported with the run's other changed cells */
			}
			if (why && !*why) {
				if (nchanged < 4)
					dg_sb_printf(&changed, "%s%s", nchanged ? ", " : "", c->id);
				nchanged++;
			} else if (why) {
				dg_warn("run: cell %s/%s %s: it is removed and recomputed", run->name, c->id, why);
			}
			if (why && !rc && dg_remove_tree(d) && errno != ENOENT)
				rc = dg_error("run: cannot remove %s: %s", d, strerror(errno));
			removed += why != NULL;
			free(d);
		}
		if (nchanged)
			dg_warn("run: %d cell%s of run %s (%s%s) %s computed from other contents of %s (it changed "
				"since): removed, to be recomputed", nchanged, nchanged == 1 ? "" : "s", run->name,
				changed.buf, nchanged > 4 ? ", ..." : "", nchanged == 1 ? "was" : "were", t->path);
		free(changed.buf);
		if (sc.open)
			dg_trace_close(&sc.tr);
		free(sc.buf);
	}
	return rc ? -1 : removed;
}

/* ---------------------------------------------------------------------------------------------- */
/* cells                                                                                           */

/* An open-loop cell: replay of a one-cluster view of the trace into the folder dir, which reads
 * the cluster once: its data checked and its checksum (*sum) taken as the replay reads it. */
static int replay_cell(const dg_batch_opts *o, int k, const char *dir, uint64_t *sum)
{
	const dg_experiment *e = o->e;
	const dg_exp_cell *c = &e->cells[k];
	const dg_exp_run *run = &e->runs[c->run];
	const dg_exp_trace *t = &e->traces[run->trace];
	char name[DG_EXP_CELL_ID_MAX + DG_EXP_LABEL_MAX + 16];
	snprintf(name, sizeof name, "%s.%s.view.h5", t->label, c->id);
	char *view = dg_path_join(dir, name);
	int rc = -1;
	if (dg_trace_view(t->path, c->l, c->h, view) == 0) {
		dg_replay_opts ro = {
			.trace_path = view, .trace_name = t->path, .out_dir = dir, .policies = e->policies, .npolicies = e->npolicies,
			.densities = e->densities, .ndensities = e->ndensities,
			.schedule = e->schedules[run->schedule].schedule, .device = o->device, .progress = false,
			.command_line = o->command_line, .check_as_read = true, .input_sum = sum,
		};
		rc = dg_replay(&ro);
		unlink(view);
	}
	free(view);
	return rc;
}

/* Run cell k in a temporary folder, renamed to its final name when complete. */
static int run_cell(const dg_batch_opts *o, int k)
{
	const dg_experiment *e = o->e;
	const dg_exp_cell *c = &e->cells[k];
	const dg_exp_run *run = &e->runs[c->run];
	char *run_dir = dg_path_join(o->out_dir, "cells"), *tmp;
	{
		char *r = dg_path_join(run_dir, run->name);
		free(run_dir);
		run_dir = r;
	}
	if (dg_mkdir_p(run_dir)) {
		free(run_dir);
		return -1;
	}
	remove_temps(run_dir, c->id); /* left by a process that was killed on this cell */
	char host[64] = "host", name[DG_EXP_CELL_ID_MAX + 2 * DG_EXP_LABEL_MAX + 96];
	gethostname(host, sizeof host);
	host[sizeof host - 1] = 0;
	for (char *s = host; *s; s++)
		if (*s == '/' || *s == '.')
			*s = '_';
	snprintf(name, sizeof name, ".%s.tmp.%s.%ld", c->id, host, (long)getpid());
	tmp = dg_path_join(run_dir, name);
	char *final = dg_path_join(run_dir, c->id);
	int rc = -1;
	if (mkdir(tmp, 0777)) {
		dg_error("cannot create directory %s: %s", tmp, strerror(errno));
		goto out;
	}
	dg_tmp_register(tmp); /* a signal removes it with its files */
	if (e->closed) {
		rc = dg_closed_cell(e, k, tmp, o->device, o->command_line, o->progress);
	} else {
		uint64_t sum;
		rc = replay_cell(o, k, tmp, &sum) || write_cell_input(e, k, tmp, sum) ? -1 : 0;
	}
	if (rc == 0 && rename(tmp, final)) {
		if ((errno == EEXIST || errno == ENOTEMPTY) && cell_dir_done(e, final)) {
			/* another process finished this cell first: the same rows */
		} else if (errno == EEXIST || errno == ENOTEMPTY) {
			/* a damaged cell (a file of it lost): replaced by this one */
			if (o->progress)
				fprintf(stderr, "run: cell %s/%s was incomplete: replaced\n", run->name, c->id);
			if (dg_remove_tree(final) || rename(tmp, final))
				rc = dg_error("cannot replace the incomplete cell %s: %s", final, strerror(errno));
		} else {
			rc = dg_error("cannot rename %s to %s: %s", tmp, final, strerror(errno));
		}
	}
	/* which cell failed: with --quiet, the error's own line (it names the cell's folder) is all */
	if (rc && !o->progress)
		;
	else if (rc && e->closed)
		dg_error("cell %s/%s failed; cells done so far are kept, a rerun continues", run->name, c->id);
	else if (rc)
		dg_error("cell %s/%s (trace '%s' layer %d head %d) failed; cells done so far are kept, a "
			 "rerun continues", run->name, c->id, e->traces[run->trace].label, c->layer, c->head);
out:
	if (exists(tmp))
		remove_flat_dir(tmp);
	dg_tmp_release(tmp);
	free(final);
	free(tmp);
	free(run_dir);
	return rc;
}

static void eta_str(char *buf, size_t size, double s)
{
	if (!isfinite(s) || s < 0)
		snprintf(buf, size, "?");
	else if (s < 120)
		snprintf(buf, size, "%.0fs", s);
	else if (s < 7200)
		snprintf(buf, size, "%.0fm%02.0fs", floor(s / 60), fmod(s, 60));
	else
		snprintf(buf, size, "%.0fh%02.0fm", floor(s / 3600), floor(fmod(s, 3600) / 60));
}

int dg_batch_run(const dg_batch_opts *o, const int *idx, int n, int *ran, int *skipped)
{
	const dg_experiment *e = o->e;
	int todo = 0;
	*ran = *skipped = 0;
	for (int i = 0; i < n; i++)
		todo += !dg_batch_cell_done(e, o->out_dir, idx[i]);
	*skipped = n - todo;
	if (o->progress && *skipped)
		fprintf(stderr, "run: %d of %d cells already done, %d to run\n", *skipped, n, todo);
	double start = dg_now();
	for (int i = 0; i < n; i++) {
		int k = idx[i];
		if (dg_batch_cell_done(e, o->out_dir, k))
			continue;
		double t0 = dg_now();
		if (run_cell(o, k)) {
			dg_closed_release();
			return -1;
		}
		(*ran)++;
		if (o->progress) {
			double el = dg_now() - start;
			char a[32], b[32];
			eta_str(a, sizeof a, el);
			eta_str(b, sizeof b, el / *ran * (todo - *ran));
			const dg_exp_cell *c = &e->cells[k];
			fprintf(stderr, "run: [%d/%d] %s/%s %.1fs  elapsed %s  ETA %s\n", *ran + *skipped, n,
				e->runs[c->run].name, c->id, dg_now() - t0, a, b);
		}
	}
	dg_closed_release(); /* the closed-loop cells' model, loaded once for all of them */
	return 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* merge                                                                                           */

#define NFIELDS 14

static int split_fields(char *line, char **f)
{
	int n = 0;
	f[n++] = line;
	for (char *s = line; *s; s++)
		if (*s == ',') {
			if (n == NFIELDS)
				return -1;
			*s = 0;
			f[n++] = s + 1;
		}
	return n;
}

/* strip the last field (time_ms) of every line: what two runs of one cell must agree on */
static char *strip_time(const char *csv)
{
	char *s = dg_strdup(csv), *w = s;
	const char *r = csv;
	while (*r) {
		const char *nl = strchr(r, '\n');
		size_t n = nl ? (size_t)(nl - r) : strlen(r);
		size_t keep = n;
		while (keep && r[keep - 1] != ',')
			keep--;
		keep = keep ? keep - 1 : n;
		memcpy(w, r, keep);
		w += keep;
		*w++ = '\n';
		r += n + (nl ? 1 : 0);
	}
	*w = 0;
	return s;
}

typedef struct {
	double units, density, rel_l1, rel_l2, cosine, mass_mean, staleness;
} acc;

typedef struct {
	char **tmp, **final;
	int n;
} pending;

static void pending_add(pending *p, const char *tmp, const char *final)
{
	p->tmp = dg_realloc(p->tmp, (p->n + 1) * sizeof(char *));
	p->final = dg_realloc(p->final, (p->n + 1) * sizeof(char *));
	p->tmp[p->n] = dg_strdup(tmp);
	p->final[p->n++] = dg_strdup(final);
}

static void pending_free(pending *p, bool remove_tmp)
{
	for (int i = 0; i < p->n; i++) {
		if (remove_tmp)
			unlink(p->tmp[i]);
		free(p->tmp[i]);
		free(p->final[i]);
	}
	free(p->tmp);
	free(p->final);
}

/* write text to a temporary name of path, remember it */
static int write_pending(pending *p, const char *path, const char *text)
{
	char *tmp = dg_tmp_name(path);
	FILE *f = fopen(tmp, "w");
	int rc = 0;
	if (!f || fputs(text, f) < 0)
		rc = -1;
	if (f && fclose(f))
		rc = -1;
	if (rc) {
		int err = errno;
		unlink(tmp);
		free(tmp);
		return dg_error("cannot write %s: %s", path, strerror(err ? err : EIO));
	}
	pending_add(p, tmp, path);
	free(tmp);
	return 0;
}

static int int_in(const cJSON *arr, int v)
{
	const cJSON *x;
	cJSON_ArrayForEach(x, arr)
		if (cJSON_IsNumber(x) && x->valueint == v)
			return 1;
	return 0;
}

static void add_number(cJSON *obj, const char *key, double v)
{
	cJSON *x = cJSON_GetObjectItemCaseSensitive(obj, key);
	if (cJSON_IsNumber(x))
		cJSON_SetNumberValue(x, x->valuedouble + v);
}

/* The run.json of a merged run: the first cell's, with the run's trace, times summed over cells,
 * the earliest date, every device, and where the rows came from. */
static cJSON *merged_run_json(cJSON *first, cJSON *const *cells, int ncells, const cJSON *plan,
			      const cJSON *run, char *const *dirs, int ndirs)
{
	cJSON *j = cJSON_Duplicate(first, 1);
	cJSON_ReplaceItemInObjectCaseSensitive(j, "trace",
					       cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(run, "trace"), 1));
	const char *date = json_str(first, "date");
	dg_sbuf devices = { 0 };
	cJSON *pols = cJSON_GetObjectItemCaseSensitive(j, "policies");
	cJSON *timing = cJSON_GetObjectItemCaseSensitive(j, "timing");
	for (int i = 0; i < ncells; i++) {
		const char *d = json_str(cells[i], "date"), *dev = json_str(cells[i], "device");
		if (d && date && strcmp(d, date) < 0)
			date = d;
		if (dev && (!devices.buf || !strstr(devices.buf, dev))) {
			if (devices.buf)
				dg_sb_add(&devices, " | ", 3);
			dg_sb_add(&devices, dev, strlen(dev));
		}
		if (i == 0)
			continue;
		const cJSON *cp = cJSON_GetObjectItemCaseSensitive(cells[i], "policies");
		for (int p = 0; p < cJSON_GetArraySize(pols) && p < cJSON_GetArraySize(cp); p++) {
			const cJSON *src = cJSON_GetArrayItem(cp, p);
			cJSON *dst = cJSON_GetArrayItem(pols, p);
			const cJSON *m = cJSON_GetObjectItemCaseSensitive(src, "metadata_s");
			const cJSON *a = cJSON_GetObjectItemCaseSensitive(src, "attention_s");
			add_number(dst, "metadata_s", cJSON_IsNumber(m) ? m->valuedouble : 0);
			add_number(dst, "attention_s", cJSON_IsNumber(a) ? a->valuedouble : 0);
		}
		const cJSON *ct = cJSON_GetObjectItemCaseSensitive(cells[i], "timing");
		const cJSON *w = cJSON_GetObjectItemCaseSensitive(ct, "wall_s");
		const cJSON *ds = cJSON_GetObjectItemCaseSensitive(ct, "dense_s");
		add_number(timing, "wall_s", cJSON_IsNumber(w) ? w->valuedouble : 0);
		add_number(timing, "dense_s", cJSON_IsNumber(ds) ? ds->valuedouble : 0);
	}
	if (date)
		cJSON_ReplaceItemInObjectCaseSensitive(j, "date", cJSON_CreateString(date));
	if (devices.buf)
		cJSON_ReplaceItemInObjectCaseSensitive(j, "device", cJSON_CreateString(devices.buf));
	free(devices.buf);
	cJSON *x = cJSON_AddObjectToObject(j, "experiment");
	cJSON_AddStringToObject(x, "name", jstr(plan, "name"));
	cJSON_AddStringToObject(x, "run", jstr(run, "name"));
	cJSON_AddStringToObject(x, "fingerprint", jstr(plan, "fingerprint"));
	cJSON_AddStringToObject(x, "config_path", jstr(plan, "config_path"));
	cJSON_AddNumberToObject(x, "cells", ncells);
	cJSON *in = cJSON_AddArrayToObject(x, "merged_from");
	for (int i = 0; i < ndirs; i++)
		cJSON_AddItemToArray(in, cJSON_CreateString(dirs[i]));
	cJSON_AddItemToObject(x, "schedule", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(run, "schedule"), 1));
	dg_json_paths_shown(j);
	return j;
}

static void ints_joined(char *buf, size_t size, const cJSON *arr)
{
	int k = snprintf(buf, size, "%s", cJSON_GetArraySize(arr) ? "" : "-");
	const cJSON *x;
	bool first = true;
	cJSON_ArrayForEach(x, arr) {
		if (k >= (int)size)
			break;
		k += snprintf(buf + k, size - k, "%s%d", first ? "" : ";", x->valueint);
		first = false;
	}
}

/* What one merge works on: the inputs, the plan they share, and what it has made so far (files
 * written under temporary names, the summary's lines). */
typedef struct {
	char *const *dirs;
	int ndirs;
	const char *out;
	const cJSON *plan, *runs, *policies, *densities;
	int np, nd;
	char (*dstr)[32]; /* the densities as the rows print them (%g) */
	bool closed;      /* a closed-loop experiment: closed_loop.csv per run */
	bool partial;     /* merge the finished cells, leave the missing out (closed loop) */
	int missing;      /* cells left out (partial) */
	pending pend;
	dg_made_dirs made; /* the folders it made: removed (when empty) if it fails */
	dg_sbuf summary, md;
	long long rows_total;
} merge_ctx;

/* One run of an open-loop merge: its grid and the merged metrics.csv being written. */
typedef struct {
	const char *name;
	const cJSON *trace, *sched, *dense_layers;
	int warmup;
	long long want_rows; /* rows of each cell: policies x densities x steps */
	acc *a;              /* per policy x density: the post-warm-up sums */
	FILE *csv;
} run_merge;

/* Read dirs[i]/experiment.json into plans[i]; every input must be an OUT of one experiment. */
static int read_plans(char *const *dirs, int ndirs, cJSON **plans)
{
	for (int i = 0; i < ndirs; i++) {
		char *p = dg_path_join(dirs[i], "experiment.json");
		char *text = dg_read_all(p, SIZE_MAX, NULL);
		if (!text) {
			dg_error("merge: cannot read %s: %s (not an output folder of dsgap run)", p, strerror(errno));
			free(p);
			return -1;
		}
		const char *why;
		int line;
		plans[i] = dg_json_parse(text, strlen(text), &why, &line);
		free(text);
		if (!plans[i] || !json_str(plans[i], "fingerprint") ||
		    !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(plans[i], "runs"))) {
			dg_error("merge: %s is not an experiment.json of dsgap run", p);
			free(p);
			return -1;
		}
		free(p);
		if (i && strcmp(jstr(plans[i], "fingerprint"), jstr(plans[0], "fingerprint")))
			return dg_error("merge: %s holds another experiment than %s ('%s' %s vs '%s' %s)", dirs[i],
					dirs[0], jstr(plans[i], "name"), jstr(plans[i], "fingerprint"),
					jstr(plans[0], "name"), jstr(plans[0], "fingerprint"));
	}
	return 0;
}

/* Whether the experiment file the shards were run from still describes them, as `dsgap run` checks
 * its --out: a file that changed since (another grid, trace, model or switch) is refused; one that is
 * no longer there (or sits elsewhere from this folder) is a warning, the shards' own record then
 * stands. */
static int check_experiment_file(const char *dir, const cJSON *plan)
{
	const char *path = jstr(plan, "config_path");
	if (!*path || !exists(path)) {
		dg_warn("merge: the experiment file %s of %s is not here: the shards' own record (experiment.json) "
			"is used", *path ? path : "(none recorded)", dir);
		return 0;
	}
	dg_experiment e;
	if (dg_experiment_load(&e, path))
		return dg_error("merge: the experiment file %s of the shards no longer loads (above): fix it, or "
				"merge elsewhere from the shards' own record", path);
	if (*jstr(plan, "device"))
		dg_experiment_set_device(&e, jstr(plan, "device"));
	char fp[17];
	dg_experiment_fingerprint_str(&e, fp);
	int rc = 0;
	if (strcmp(fp, jstr(plan, "fingerprint")))
		rc = dg_error("merge: %s changed since the shards in %s were run (fingerprint %s, the shards' %s): "
			      "rerun dsgap run %s on every shard, then merge", path, dir, fp, jstr(plan, "fingerprint"),
			      path);
	dg_experiment_free(&e);
	return rc;
}

static void merge_init(merge_ctx *m, const cJSON *plan)
{
	m->plan = plan;
	m->runs = cJSON_GetObjectItemCaseSensitive(plan, "runs");
	m->policies = cJSON_GetObjectItemCaseSensitive(plan, "policies");
	m->densities = cJSON_GetObjectItemCaseSensitive(plan, "densities");
	m->np = cJSON_GetArraySize(m->policies);
	m->nd = cJSON_GetArraySize(m->densities);
	m->dstr = dg_calloc(m->nd ? m->nd : 1, 32);
	for (int d = 0; d < m->nd; d++)
		snprintf(m->dstr[d], 32, "%g", cJSON_GetArrayItem(m->densities, d)->valuedouble);
	m->closed = !strcmp(jstr(plan, "kind"), "closed-loop");
}

/* Whether every cell of the plan is finished in one of the inputs; *total: the plan's cells. */
static int check_cells_present(const merge_ctx *m, int *total)
{
	int missing = 0;
	char first_missing[256] = "";
	const cJSON *run;
	*total = 0;
	cJSON_ArrayForEach(run, m->runs) {
		const cJSON *cell;
		int k = 0;
		cJSON_ArrayForEach(cell, cJSON_GetObjectItemCaseSensitive(run, "cells")) {
			(*total)++;
			bool found = false;
			/* a closed-loop cell shared with an earlier run is in that run's folder */
			const char *rname = m->closed ? dg_closed_cell_run(run, k) : jstr(run, "name");
			k++;
			for (int i = 0; i < m->ndirs && !found; i++) {
				char path[4096];
				snprintf(path, sizeof path, "%s/cells/%s/%s/run.json", m->dirs[i], rname, cell->valuestring);
				found = exists(path);
			}
			if (!found && !missing++)
				snprintf(first_missing, sizeof first_missing, "%s/%s", rname, cell->valuestring);
		}
	}
	if (missing && !m->partial)
		return dg_error("merge: %d of %d cells are missing (the first: %s): finish them with dsgap run "
				"(the same --shard and --out) and merge again, or merge the rest with --partial",
				missing, *total, first_missing);
	if (missing && !m->closed)
		return dg_error("merge: %d of %d cells are missing (the first: %s): --partial merges only a closed-loop "
				"experiment (an open-loop run's tables need every cluster)", missing, *total, first_missing);
	if (missing == *total)
		return dg_error("merge: none of the %d cells is finished in the folders given", *total);
	if (missing)
		dg_warn("merge: %d of %d cells are missing (the first: %s): merged without them (--partial)",
			missing, *total, first_missing);
	return 0;
}

/* The header of summary.csv and summary.md. */
static void summary_heads(merge_ctx *m)
{
	if (m->closed) {
		char *head = dg_closed_md_head(jstr(m->plan, "name"), jstr(m->plan, "fingerprint"));
		dg_sb_printf(&m->summary, "%s\n", DG_CLOSED_SUMMARY_HEADER);
		dg_sb_printf(&m->md, "%s", head);
		free(head);
		return;
	}
	dg_sb_printf(&m->summary, "run,trace,source,schedule,warmup,anchors,n_anchors,policy,density_target,units,"
				  "density,rel_l1,rel_l2,cosine,mass_mean,staleness\n");
	dg_sb_printf(&m->md, "# %s: mean metrics per run, policy and density\n\n"
			     "Means over post-warm-up units (step >= warm-up, dense layers left out) of `dsgap run`'s "
			     "merged rows; E = mean rel_l2; 3 significant figures (summary.csv: full precision). "
			     "Experiment fingerprint %s.\n\n"
			     "| run | source | anchors | policy | density_target | units | density | rel_l2 | cosine | "
			     "mass_mean |\n|:--|:--|:--|:--|--:|--:|--:|--:|--:|--:|\n",
		     jstr(m->plan, "name"), jstr(m->plan, "fingerprint"));
}

/* Each run of a closed-loop experiment: RUN/closed_loop.csv, RUN/drift.csv, RUN/run.json and its
 * summary lines. */
static int merge_closed_runs(merge_ctx *m)
{
	int err = 0;
	const cJSON *run;
	cJSON_ArrayForEach(run, m->runs) {
		dg_closed_merged cm;
		if ((err = dg_closed_merge_run(m->plan, run, m->dirs, m->ndirs, m->partial, &cm)))
			break;
		m->missing += cm.missing;
		int nrun = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(run, "cells"));
		if (cm.missing)
			dg_warn("merge: run %s: %d of %d cells left out (unfinished, or their sample's dense run is): "
				"%s/run.json names them", jstr(run, "name"), cm.missing, nrun, jstr(run, "name"));
		char *dir = dg_path_join(m->out, jstr(run, "name"));
		char *cp = dg_path_join(dir, "closed_loop.csv"), *jp = dg_path_join(dir, "run.json");
		char *dp = dg_path_join(dir, "drift.csv");
		err = dg_mkdir_track(dir, &m->made) || write_pending(&m->pend, cp, cm.rows) ||
		      write_pending(&m->pend, jp, cm.run_json) || write_pending(&m->pend, dp, cm.drift);
		free(dp);
		dg_sb_add(&m->summary, cm.summary, strlen(cm.summary));
		dg_sb_add(&m->md, cm.md, strlen(cm.md));
		m->rows_total += cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(run, "cells")) - cm.missing;
		dg_closed_merged_free(&cm);
		free(cp);
		free(jp);
		free(dir);
		if (err)
			break;
	}
	return err;
}

/* A cell's rows: *text gets its metrics.csv from the first input that has it (where: that file's
 * path) and *json its parsed run.json; the same cell in a later input must hold the same rows but
 * time_ms. */
static int read_cell(const merge_ctx *m, const char *rname, const char *cell, char **text, char *where,
		     size_t wsize, cJSON **json)
{
	int err = 0;
	char *js = NULL;
	*text = NULL;
	for (int i = 0; i < m->ndirs; i++) {
		char path[4096];
		snprintf(path, sizeof path, "%s/cells/%s/%s/metrics.csv", m->dirs[i], rname, cell);
		if (!exists(path))
			continue;
		char *t = dg_read_all(path, SIZE_MAX, NULL);
		if (!t) {
			err = dg_error("merge: cannot read %s: %s", path, strerror(errno));
			break;
		}
		if (!*text) {
			*text = t;
			snprintf(where, wsize, "%s", path);
			snprintf(path, sizeof path, "%s/cells/%s/%s/run.json", m->dirs[i], rname, cell);
			js = dg_read_all(path, SIZE_MAX, NULL);
			const char *why = "missing";
			int line = 0;
			if (!js || !(*json = dg_json_parse(js, strlen(js), &why, &line)))
				err = line ? dg_error("merge: %s:%d: %s", path, line, why)
					   : dg_error("merge: %s: %s", path, why);
			continue;
		}
		/* the same cell in two inputs: they must hold the same rows */
		char *x = strip_time(*text), *y = strip_time(t);
		if (strcmp(x, y))
			err = dg_error("merge: cell %s/%s differs between %s and %s", rname, cell, where, path);
		free(x);
		free(y);
		free(t);
	}
	free(js);
	if (!err && !*text)
		err = dg_error("merge: cell %s/%s has no metrics.csv", rname, cell);
	if (err) {
		free(*text);
		*text = NULL;
	}
	return err;
}

/* The row's (fields f, parsed into u) policy x density in the experiment, and a post-warm-up row's
 * metrics added to their sums. */
static int accumulate_row(const merge_ctx *m, run_merge *r, char **f, const dg_unit *u, bool sum, const char *where,
			  int lineno)
{
	int p = -1, d = -1;
	for (int i = 0; i < m->np && p < 0; i++)
		if (!strcmp(cJSON_GetArrayItem(m->policies, i)->valuestring, f[0]))
			p = i;
	for (int i = 0; i < m->nd && d < 0; i++)
		if (!strcmp(m->dstr[i], f[1]))
			d = i;
	if (p < 0 || d < 0)
		return dg_error("%s:%d: policy '%s' at density %s is not in the experiment", where, lineno, f[0],
				f[1]);
	if (!sum)
		return 0;
	acc *x = &r->a[p * m->nd + d];
	x->units += 1;
	x->density += u->density_eff;
	x->rel_l1 += u->rel_l1;
	x->rel_l2 += u->rel_l2;
	x->cosine += u->cosine;
	x->mass_mean += u->mass_mean;
	x->staleness += u->staleness;
	return 0;
}

/* Check a cell's rows (text: its metrics.csv, read from where), append them to the run's
 * metrics.csv and add them to the summary's sums. */
static int append_cell_rows(merge_ctx *m, run_merge *r, const char *cell, char *text, const char *where)
{
	int layer, head, err = 0;
	sscanf(cell, "l%d-h%d", &layer, &head);
	char *save = NULL;
	long long nrows = 0;
	int lineno = 0;
	for (char *l = strtok_r(text, "\n", &save); l && !err; l = strtok_r(NULL, "\n", &save)) {
		lineno++;
		if (lineno == 1) {
			if (strcmp(l, DG_METRICS_HEADER))
				err = dg_error("%s:1: not the metrics.csv header", where);
			continue;
		}
		fputs(l, r->csv);
		fputc('\n', r->csv);
		char *f[NFIELDS];
		if (split_fields(l, f) != NFIELDS) {
			err = dg_error("%s:%d: expected %d fields", where, lineno, NFIELDS);
			break;
		}
		dg_unit u;
		const char *bad;
		if (dg_metrics_row_parse(f, &u, &bad)) {
			err = dg_error("%s:%d: bad %s", where, lineno, bad);
			break;
		}
		int step = u.step, lay = u.layer, hd = u.head;
		if (lay != layer || hd != head) {
			err = dg_error("%s:%d: row of layer %d head %d in cell %s", where, lineno, lay, hd, cell);
			break;
		}
		nrows++;
		if ((err = accumulate_row(m, r, f, &u, step >= r->warmup && !int_in(r->dense_layers, lay), where, lineno)))
			break;
	}
	if (!err && nrows != r->want_rows)
		err = dg_error("%s: %lld rows, expected %lld (policies x densities x steps)", where, nrows,
			       r->want_rows);
	m->rows_total += nrows;
	return err;
}

/* The cells of a run, in the plan's (canonical) order, into its metrics.csv; cj[i]: cell i's run.json. */
static int merge_run_cells(merge_ctx *m, run_merge *r, const cJSON *cells, cJSON **cj)
{
	int ci = 0;
	const cJSON *cell;
	cJSON_ArrayForEach(cell, cells) {
		char *text, where[4096] = "";
		int err = read_cell(m, r->name, cell->valuestring, &text, where, sizeof where, &cj[ci]);
		if (err)
			return err;
		err = append_cell_rows(m, r, cell->valuestring, text, where);
		free(text);
		if (err)
			return err;
		ci++;
	}
	return 0;
}

/* Start dir/metrics.csv under its temporary name mtmp, with the header. */
static int open_run_csv(const char *dir, const char *mpath, const char *mtmp, dg_made_dirs *made, FILE **csv)
{
	*csv = NULL;
	if (dg_mkdir_track(dir, made))
		return -1;
	if (!(*csv = fopen(mtmp, "w")))
		return dg_error("cannot write %s: %s", mpath, strerror(errno));
	fprintf(*csv, "%s\n", DG_METRICS_HEADER);
	return 0;
}

/* Close the run's metrics.csv: kept (to be renamed) if all went well, else removed. */
static int close_run_csv(merge_ctx *m, FILE *csv, const char *mpath, const char *mtmp, int err)
{
	if (!csv)
		return err;
	bool bad = ferror(csv);
	bad |= fclose(csv) != 0;
	if (!err && bad)
		err = dg_error("cannot write %s: %s", mpath, strerror(errno ? errno : EIO));
	if (err)
		unlink(mtmp);
	else
		pending_add(&m->pend, mtmp, mpath);
	return err;
}

/* cJSON_Print's text with a final newline (new string) */
static char *json_text(const cJSON *j)
{
	char *s = cJSON_Print(j);
	size_t n = strlen(s);
	s = dg_realloc(s, n + 2);
	s[n] = '\n';
	s[n + 1] = 0;
	return s;
}

/* The run's summary lines: means per policy x density over its post-warm-up rows. */
static void summary_lines(merge_ctx *m, const run_merge *r)
{
	char anchors[512];
	const cJSON *anch = cJSON_GetObjectItemCaseSensitive(r->sched, "anchors");
	ints_joined(anchors, sizeof anchors, anch);
	int nanch = cJSON_GetArraySize(anch);
	for (int p = 0; p < m->np; p++)
		for (int d = 0; d < m->nd; d++) {
			const acc *x = &r->a[p * m->nd + d];
			double u = x->units > 0 ? x->units : NAN;
			const char *pname = cJSON_GetArrayItem(m->policies, p)->valuestring;
			char *src = dg_path_shown(jstr(r->trace, "source"));
			dg_sb_printf(&m->summary, "%s,%s,%s,%s,%d,%s,%d,%s,%s,%.0f,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g\n",
				     r->name, jstr(r->trace, "label"), src,
				     jstr(r->sched, "label"), r->warmup, anchors, nanch, pname, m->dstr[d], x->units,
				     x->density / u, x->rel_l1 / u, x->rel_l2 / u, x->cosine / u, x->mass_mean / u,
				     x->staleness / u);
			char v[4][32];
			dg_sb_printf(&m->md, "| %s | %s | %s | %s | %s | %.0f | %s | %s | %s | %s |\n", r->name,
				     src, anchors, pname, m->dstr[d], x->units,
				     dg_sig3(v[0], x->density / u), dg_sig3(v[1], x->rel_l2 / u),
				     dg_sig3(v[2], x->cosine / u), dg_sig3(v[3], x->mass_mean / u));
			free(src);
		}
}

/* One run of an open-loop experiment: RUN/metrics.csv, RUN/run.json and its summary lines. */
static int merge_open_run(merge_ctx *m, const cJSON *run)
{
	run_merge r = { .name = jstr(run, "name") };
	const cJSON *cells = cJSON_GetObjectItemCaseSensitive(run, "cells");
	r.trace = cJSON_GetObjectItemCaseSensitive(run, "trace");
	r.sched = cJSON_GetObjectItemCaseSensitive(run, "schedule");
	r.warmup = cJSON_GetObjectItemCaseSensitive(r.sched, "warmup")->valueint;
	r.dense_layers = cJSON_GetObjectItemCaseSensitive(r.sched, "dense_layers");
	int steps = cJSON_GetObjectItemCaseSensitive(r.trace, "steps")->valueint;
	int ncells = cJSON_GetArraySize(cells);
	r.want_rows = (long long)m->np * m->nd * steps;
	r.a = dg_calloc((size_t)m->np * (m->nd ? m->nd : 1), sizeof *r.a);
	cJSON **cj = dg_calloc(ncells, sizeof *cj);
	char *dir = dg_path_join(m->out, r.name);
	char *mpath = dg_path_join(dir, "metrics.csv"), *mtmp = dg_tmp_name(mpath);
	int err = open_run_csv(dir, mpath, mtmp, &m->made, &r.csv);
	if (!err)
		err = merge_run_cells(m, &r, cells, cj);
	err = close_run_csv(m, r.csv, mpath, mtmp, err);
	if (!err) {
		char *jpath = dg_path_join(dir, "run.json");
		cJSON *rj = merged_run_json(cj[0], cj, ncells, m->plan, run, m->dirs, m->ndirs);
		char *rjs = json_text(rj);
		err = write_pending(&m->pend, jpath, rjs);
		cJSON_Delete(rj);
		free(rjs);
		free(jpath);
		summary_lines(m, &r);
	}
	for (int i = 0; i < ncells; i++)
		cJSON_Delete(cj[i]);
	free(cj);
	free(r.a);
	free(mpath);
	free(mtmp);
	free(dir);
	return err;
}

static int merge_open_runs(merge_ctx *m)
{
	const cJSON *run;
	cJSON_ArrayForEach(run, m->runs)
		if (merge_open_run(m, run))
			return -1;
	return 0;
}

/* summary.csv, summary.md and experiment.json of out, under temporary names */
static int write_summaries(merge_ctx *m)
{
	char *sp = dg_path_join(m->out, "summary.csv"), *mp = dg_path_join(m->out, "summary.md");
	char *ep = dg_path_join(m->out, "experiment.json");
	char *plan_text = json_text(m->plan);
	int err = write_pending(&m->pend, sp, m->summary.buf) || write_pending(&m->pend, mp, m->md.buf) ||
		  write_pending(&m->pend, ep, plan_text);
	free(plan_text);
	free(sp);
	free(mp);
	free(ep);
	return err;
}

/* everything is written: rename into place */
static int rename_pending(const pending *p)
{
	for (int i = 0; i < p->n; i++)
		if (rename(p->tmp[i], p->final[i]))
			return dg_error("cannot rename %s to %s: %s", p->tmp[i], p->final[i], strerror(errno));
	return 0;
}

/* a complete batch: temporary folders of killed processes are stale */
static void remove_stale_temps(const merge_ctx *m)
{
	for (int i = 0; i < m->ndirs; i++) {
		const cJSON *run;
		cJSON_ArrayForEach(run, m->runs) {
			char path[4096];
			snprintf(path, sizeof path, "%s/cells/%s", m->dirs[i], jstr(run, "name"));
			remove_temps(path, NULL);
		}
	}
}

/* position of index v in idx[0..n), -1 if absent */
static int index_of(const int *idx, int n, int v)
{
	for (int i = 0; i < n; i++)
		if (idx[i] == v)
			return i;
	return -1;
}

/* The open-loop cells of input dir (its plan) against their trace files as they are now, as
 * dg_batch_validate checks them before a run: a cell without input.sum, or whose trace units no
 * longer have the checksum it recorded (the trace changed after that shard ran), is refused with
 * one line naming it and the fix. A trace file that is not on this machine is named in a warning;
 * a synthetic trace is what its spec makes (in the fingerprint): not read again. */
static int check_cell_inputs(const char *dir, const cJSON *plan)
{
	const cJSON *run;
	int rc = 0;
	cJSON_ArrayForEach(run, cJSON_GetObjectItemCaseSensitive(plan, "runs")) {
		const cJSON *trace = cJSON_GetObjectItemCaseSensitive(run, "trace");
		const char *path = jstr(trace, "path");
		if (!strcmp(jstr(trace, "kind"), "synthetic"))
			continue; /* its contents are its spec's, which the fingerprint holds */
		if (!exists(path)) {
			dg_warn("merge: %s: trace %s of run %s is not here: its cells' input.sum not checked", dir, path,
				jstr(run, "name"));
			continue;
		}
		dg_trace tr;
		if (dg_trace_open(&tr, path))
			return -1;
		const dg_trace_meta *m = &tr.meta;
		float *buf = dg_malloc((size_t)m->tokens * m->head_dim * sizeof *buf);
		const cJSON *cell;
		cJSON_ArrayForEach(cell, cJSON_GetObjectItemCaseSensitive(run, "cells")) {
			char *cd = dg_malloc(strlen(dir) + strlen(jstr(run, "name")) + strlen(cell->valuestring) + 16);
			sprintf(cd, "%s/cells/%s/%s", dir, jstr(run, "name"), cell->valuestring);
			char *mp = dg_path_join(cd, "metrics.csv");
			int layer, head, l = -1, h = -1;
			uint64_t old, now;
			if (exists(mp) && sscanf(cell->valuestring, "l%d-h%d", &layer, &head) == 2) {
				l = index_of(m->layer_index, m->layers, layer);
				h = index_of(m->head_index, m->heads, head);
				if (read_cell_input(cd, &old))
					rc = dg_error("merge: cell %s/%s in %s records no checksum of its input (no %s): rerun "
						      "dsgap run with --out %s", jstr(run, "name"), cell->valuestring, dir,
						      CELL_INPUT, dir);
				else if (l < 0 || h < 0 || cluster_sum(&tr, l, h, buf, &now) || old != now)
					rc = dg_error("merge: cell %s/%s in %s was computed from other contents of %s (it "
						      "changed since): rerun dsgap run with --out %s to recompute it, then merge",
						      jstr(run, "name"), cell->valuestring, dir, path, dir);
			}
			free(mp);
			free(cd);
			if (rc)
				break;
		}
		free(buf);
		dg_trace_close(&tr);
		if (rc)
			break;
	}
	return rc;
}

int dg_batch_merge(char *const *dirs, int ndirs, const char *out, bool verbose, bool partial)
{
	if (ndirs < 1)
		return dg_error("merge: no input folders");
	cJSON **plans = dg_calloc(ndirs, sizeof *plans);
	merge_ctx m = { .dirs = dirs, .ndirs = ndirs, .out = out, .partial = partial };
	int rc = -1, total;
	if (read_plans(dirs, ndirs, plans) || check_experiment_file(dirs[0], plans[0]))
		goto out;
	merge_init(&m, plans[0]);
	if (check_cells_present(&m, &total))
		goto out;
	for (int i = 0; i < ndirs && !m.closed; i++)
		if (check_cell_inputs(dirs[i], plans[i]))
			goto out;
	if (dg_mkdir_track(out, &m.made))
		goto out;
	summary_heads(&m);
	if ((m.closed ? merge_closed_runs(&m) : merge_open_runs(&m)) || write_summaries(&m) ||
	    rename_pending(&m.pend))
		goto out;
	if (!m.missing)
		remove_stale_temps(&m);
	if (verbose)
		fprintf(stderr, "merge: %d runs, %d cells, %lld rows from %d folder%s -> %s/{RUN/%s, "
				"RUN/run.json, summary.csv, summary.md}\n", cJSON_GetArraySize(m.runs), total,
			m.rows_total, ndirs, ndirs == 1 ? "" : "s", out, m.closed ? "closed_loop.csv" : "metrics.csv");
	rc = 0;
out:
	pending_free(&m.pend, rc != 0);
	if (rc)
		dg_made_dirs_remove(&m.made); /* no partial output: the folders it made, now empty */
	dg_made_dirs_free(&m.made);
	free(m.dstr);
	free(m.summary.buf);
	free(m.md.buf);
	for (int i = 0; i < ndirs; i++)
		cJSON_Delete(plans[i]);
	free(plans);
	return rc;
}
