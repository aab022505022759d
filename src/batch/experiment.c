/*
 * experiment.c: read an experiment file (inih) into a dg_experiment: sections, defaults, policies,
 * schedules, traces (the format is in experiment.h); experiment_grid.c then expands it into runs and
 * cells, experiment_json.c fingerprints and describes it. Errors name FILE:LINE.
 *
 * inih is driven through ini_parse_stream with our own line reader, so that the handler knows the
 * line it is on, whether it is an indented continuation, and so that a line longer than inih's
 * buffer (INI_MAX_LINE, 200 in Debian's build) is an error rather than a silent split.
 * Problems found by the library's own parsers (policies, schedules, traces) are reported by them
 * on stderr; here they are captured and re-issued with the file and line in front.
 */
#include "batch/experiment.h"
#include "batch/experiment_build.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <ini.h>

#include "dit/dit_sample.h"
#include "dit/tensorfile.h"
#include "dit/wan.h"
#include "policy/presets.h"
#include "util/util.h"

#define MAX_POLICIES 64
#define MAX_DENSITIES 64
#define MAX_TRACES 256
#define MAX_SCHEDULES 256
#define LINE_MAX_INI 200 /* Debian's INI_MAX_LINE: longest line inih reads is this minus 3 */

/* ---------------------------------------------------------------------------------------------- */
/* small strings                                                                                   */

static char *str_append(char *s, const char *sep, const char *add)
{
	size_t a = s ? strlen(s) : 0, b = strlen(sep), c = strlen(add);
	s = dg_realloc(s, a + b + c + 1);
	if (a == 0)
		s[0] = 0;
	else
		memcpy(s + a, sep, b + 1);
	strcat(s, add);
	return s;
}

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	size_t n = strlen(s);
	while (n && isspace((unsigned char)s[n - 1]))
		s[--n] = 0;
	return s;
}

static bool label_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > DG_EXP_LABEL_MAX)
		return false;
	for (const char *c = s; *c; c++)
		if (!isalnum((unsigned char)*c) && *c != '_' && *c != '-')
			return false;
	return true;
}

/* ---------------------------------------------------------------------------------------------- */
/* errors of the library's own parsers, captured and re-issued with FILE:LINE                      */

typedef int (*capture_fn)(void *arg);

/* Run fn(arg) with stderr sent to a temporary file; the first message it printed, without the
 * "dsgap: error: " prefix, goes to msg. */
static int captured(capture_fn fn, void *arg, char *msg, size_t size)
{
	snprintf(msg, size, "invalid");
	fflush(stderr);
	FILE *tmp = tmpfile();
	int saved = tmp ? dup(2) : -1;
	if (saved < 0) {
		if (tmp)
			fclose(tmp);
		return fn(arg); /* reports as usual */
	}
	dup2(fileno(tmp), 2);
	int rc = fn(arg);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(tmp);
	char line[1024];
	if (fgets(line, sizeof line, tmp)) {
		line[strcspn(line, "\n")] = 0;
		const char *m = line;
		static const char *prefixes[] = { "dsgap: error: ", "dsgap: fatal: ", "dsgap: " };
		for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
			if (!strncmp(m, prefixes[i], strlen(prefixes[i]))) {
				m += strlen(prefixes[i]);
				break;
			}
		snprintf(msg, size, "%.500s", m);
	}
	fclose(tmp);
	return rc;
}

typedef struct {
	const char *list;
	dg_policy *out;
	int max, n;
} policies_arg;

static int policies_call(void *a)
{
	policies_arg *p = a;
	p->n = dg_policies_expand(p->list, p->out, p->max);
	return p->n < 0 ? -1 : 0;
}

typedef struct {
	const char *spec;
	dg_schedule *out;
} schedule_arg;

static int schedule_call(void *a)
{
	schedule_arg *s = a;
	return dg_schedule_parse(s->spec, s->out);
}

typedef struct {
	const char *path;
	dg_trace t;
} trace_arg;

static int trace_call(void *a)
{
	trace_arg *t = a;
	return dg_trace_open(&t->t, t->path);
}

static int synth_check_call(void *a) { return dg_synth_check(a); }

/* ---------------------------------------------------------------------------------------------- */
/* the inih side                                                                                   */

typedef struct {
	dg_experiment *e;
	const char *path;
	const char *text, *pos; /* the file's contents, and where the reader is */
	int line;               /* line the reader returned last (1-based) */
	bool cont;              /* that line starts with white space: an inih continuation */
	dg_exp_error err;       /* the first error */
	char *policies;         /* normalised comma list of the items, in order */
	int trace_cap, sched_cap;
	char last_section[64], last_key[64];
	int last_trace, last_sched; /* for continuations */
	bool has_experiment_name;
	unsigned model_seen;    /* [model] keys given (bit: index in on_model's list) */
	int policies_line, densities_line; /* where a [policies] / [densities] list was given (0: not) */
} parse_ctx;

#define fail(c, ...) dg_exp_fail(&(c)->err, __VA_ARGS__)

/* fgets-like over the text; flags lines inih would cut */
static char *reader(char *str, int num, void *stream)
{
	parse_ctx *c = stream;
	if (!*c->pos || c->err.line)
		return NULL;
	const char *end = strchr(c->pos, '\n');
	size_t n = end ? (size_t)(end - c->pos) + 1 : strlen(c->pos);
	c->line++;
	size_t content = n;
	while (content && (c->pos[content - 1] == '\n' || c->pos[content - 1] == '\r'))
		content--;
	int limit = num < LINE_MAX_INI ? num : LINE_MAX_INI;
	if (content > (size_t)(limit - 3)) {
		fail(c, c->line, "line is %zu characters long, at most %d: split a long list over repeated "
		     "keys (list = a, b / list = c) or indented continuation lines", content, limit - 3);
		return NULL;
	}
	memcpy(str, c->pos, n);
	str[n] = 0;
	c->cont = n && (str[0] == ' ' || str[0] == '\t');
	c->pos += n;
	return str;
}

static const char *sections = "experiment, traces, model, prompts, policies, densities, schedules, "
			      "device, output";

/* Append the comma-separated items of value to *list (trimmed, empty items skipped). */
static void list_items(const char *value, char ***items, int *n)
{
	char *copy = dg_strdup(value), *save = NULL;
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *s = trim(t);
		if (!*s)
			continue;
		*items = dg_realloc(*items, (*n + 1) * sizeof **items);
		(*items)[(*n)++] = dg_strdup(s);
	}
	free(copy);
}

static void free_items(char **items, int n)
{
	for (int i = 0; i < n; i++)
		free(items[i]);
	free(items);
}

static char *abs_path(const char *base, const char *p)
{
	if (p[0] == '/')
		return dg_strdup(p);
	return dg_path_join(base, p);
}

static int on_trace(parse_ctx *c, const char *name, const char *value)
{
	dg_experiment *e = c->e;
	if (c->cont) {
		if (c->last_trace < 0 || strcmp(c->last_key, name))
			return fail(c, c->line, "continuation line outside a trace");
		dg_exp_trace *t = &e->traces[c->last_trace];
		if (!t->synth)
			return fail(c, c->line, "trace '%s': a path cannot continue on the next line", t->label);
		t->spec = str_append(t->spec, " ", value);
		return 1;
	}
	if (!label_ok(name))
		return fail(c, c->line, "bad trace label '%s' (letters, digits, '_' and '-', at most %d)", name,
			    DG_EXP_LABEL_MAX);
	for (int i = 0; i < e->ntraces; i++)
		if (!strcmp(e->traces[i].label, name))
			return fail(c, c->line, "trace '%s' is defined twice (first at line %d)", name,
				    e->traces[i].line);
	if (!*value)
		return fail(c, c->line, "trace '%s': no path (LABEL = PATH or LABEL = synth: ...)", name);
	if (e->ntraces == MAX_TRACES)
		return fail(c, c->line, "too many traces (at most %d)", MAX_TRACES);
	e->traces = dg_realloc(e->traces, (e->ntraces + 1) * sizeof *e->traces);
	dg_exp_trace *t = &e->traces[e->ntraces];
	memset(t, 0, sizeof *t);
	t->label = dg_strdup(name);
	t->line = c->line;
	t->synth = !strncmp(value, "synth:", 6) || !strcmp(value, "synth") || !strncmp(value, "synth ", 6);
	t->spec = dg_strdup(value);
	c->last_trace = e->ntraces++;
	return 1;
}

/* FILE[:NAME] with FILE relative to the .ini's folder made absolute; FILE must exist */
typedef struct {
	const char *path;
	dg_wan_config cfg;
} model_check_arg;

static int model_check_call(void *a)
{
	model_check_arg *m = a;
	return dg_wan_check_config(m->path, &m->cfg);
}

typedef struct {
	const char *spec, *what;
} prompt_arg;

static int prompt_call(void *arg)
{
	const prompt_arg *a = arg;
	dg_tensor t;
	if (dg_tensor_read(a->spec, a->what, &t))
		return -1;
	dg_tensor_free(&t);
	return 0;
}

static int prompt_spec(parse_ctx *c, const char *what, const char *value, char **spec, long long *size)
{
	char *full = abs_path(c->e->dir, value), *colon = strrchr(full, ':');
	struct stat st;
	bool ok = stat(full, &st) == 0;
	if (!ok && colon && colon > strrchr(full, '/')) { /* FILE:NAME */
		*colon = 0;
		ok = stat(full, &st) == 0;
		if (!ok)
			fail(c, c->line, "%s: cannot open %s: %s", what, full, strerror(errno));
		*colon = ':';
	} else if (!ok) {
		fail(c, c->line, "%s: cannot open %s: %s", what, full, strerror(errno));
	}
	if (!ok) {
		free(full);
		return 0;
	}
	/* read now, so that a file that is not text embeddings is refused before anything is written */
	prompt_arg a = { full, what };
	char msg[640];
	if (captured(prompt_call, &a, msg, sizeof msg)) {
		fail(c, c->line, "%s", msg);
		free(full);
		return 0;
	}
	*spec = full;
	*size = (long long)st.st_size;
	return 1;
}

static int on_prompt(parse_ctx *c, const char *name, const char *value)
{
	dg_experiment *e = c->e;
	if (c->cont)
		return fail(c, c->line, "prompt '%s': a path cannot continue on the next line", name);
	if (!label_ok(name))
		return fail(c, c->line, "bad prompt label '%s' (letters, digits, '_' and '-', at most %d)", name,
			    DG_EXP_LABEL_MAX);
	for (int i = 0; i < e->nprompts; i++)
		if (!strcmp(e->prompts[i].label, name))
			return fail(c, c->line, "prompt '%s' is defined twice (first at line %d)", name,
				    e->prompts[i].line);
	if (!*value)
		return fail(c, c->line, "prompt '%s': no file (LABEL = FILE or FILE:NAME)", name);
	if (e->nprompts == MAX_TRACES)
		return fail(c, c->line, "too many prompts (at most %d)", MAX_TRACES);
	char what[DG_EXP_LABEL_MAX + 16], *spec;
	long long size;
	snprintf(what, sizeof what, "prompt '%s'", name);
	if (!prompt_spec(c, what, value, &spec, &size))
		return 0;
	e->prompts = dg_realloc(e->prompts, (e->nprompts + 1) * sizeof *e->prompts);
	e->prompts[e->nprompts++] = (dg_exp_prompt){ .label = dg_strdup(name), .line = c->line,
						     .spec = spec, .file_size = size };
	return 1;
}

typedef struct {
	const char *s;
	int *latent;
} latent_arg;

static int latent_call(void *a)
{
	latent_arg *l = a;
	return dg_parse_latent("latent", l->s, l->latent);
}

/* a number in [lo, hi] */
static int model_number(parse_ctx *c, const char *key, const char *val, double lo, double hi, double *out)
{
	char *end;
	errno = 0;
	double x = strtod(val, &end);
	if (end == val || *end || errno || !(x >= lo && x <= hi))
		return fail(c, c->line, "[model] %s: '%s' is not a number in [%g, %g]", key, val, lo, hi);
	*out = x;
	return 1;
}

static int on_model(parse_ctx *c, const char *name, const char *value)
{
	dg_exp_model *m = &c->e->model;
	static const char *const keys[] = { "path", "label", "negative", "latent", "steps", "shift",
					    "guidance", "sampler", "seeds", NULL };
	int key = 0;
	while (keys[key] && strcmp(keys[key], name))
		key++;
	if (!keys[key])
		return fail(c, c->line, "unknown key '%s' in [model] (path, label, negative, latent, steps, "
			    "shift, guidance, sampler, seeds)", name);
	if (!m->line)
		m->line = c->line;
	if (c->cont && strcmp(name, "seeds"))
		return fail(c, c->line, "[model] %s: one value on one line", name);
	if (c->model_seen & (1u << key) && strcmp(name, "seeds"))
		return fail(c, c->line, "[model] %s is given twice", name);
	c->model_seen |= 1u << key;
	double x = 0;
	if (!strcmp(name, "seeds")) {
		char **items = NULL;
		int n = 0;
		list_items(value, &items, &n);
		for (int i = 0; i < n && !c->err.line; i++) {
			char *end;
			errno = 0;
			unsigned long long v = strtoull(items[i], &end, 10);
			if (end == items[i] || *end || errno || items[i][0] == '-' || v > 4294967295ull) {
				fail(c, c->line, "[model] seeds: '%s' is not a seed (0..4294967295)", items[i]);
				break;
			}
			for (int j = 0; j < m->nseeds; j++)
				if (m->seeds[j] == v)
					fail(c, c->line, "[model] seeds: %s is listed twice", items[i]);
			if (m->nseeds == MAX_DENSITIES)
				fail(c, c->line, "[model] seeds: at most %d", MAX_DENSITIES);
			if (c->err.line)
				break;
			m->seeds = dg_realloc(m->seeds, (m->nseeds + 1) * sizeof *m->seeds);
			m->seeds[m->nseeds++] = (unsigned long)v;
		}
		free_items(items, n);
		return c->err.line ? 0 : 1;
	}
	if (!strcmp(name, "path") || !strcmp(name, "negative") || !strcmp(name, "label")) {
		char **dst = !strcmp(name, "path") ? &m->path : !strcmp(name, "label") ? &m->label : &m->negative;
		if (!*value)
			return fail(c, c->line, "[model] %s needs a value", name);
		if (!strcmp(name, "label")) {
			if (!label_ok(value))
				return fail(c, c->line, "bad model label '%s' (letters, digits, '_' and '-')", value);
			*dst = dg_strdup(value);
			return 1;
		}
		if (!strcmp(name, "negative")) {
			long long size;
			return prompt_spec(c, "[model] negative", value, dst, &size);
		}
		char *p = abs_path(c->e->dir, value);
		struct stat st;
		if (stat(p, &st)) {
			fail(c, c->line, "[model] path: cannot open %s: %s", p, strerror(errno));
			free(p);
			return 0;
		}
		*dst = p;
		return 1;
	}
	if (!strcmp(name, "latent")) {
		char msg[512];
		latent_arg a = { value, m->latent };
		if (captured(latent_call, &a, msg, sizeof msg))
			return fail(c, c->line, "[model] %s", msg);
		return 1;
	}
	if (!strcmp(name, "steps")) {
		if (!model_number(c, name, value, 1, 10000, &x))
			return 0;
		if (x != floor(x))
			return fail(c, c->line, "[model] steps: '%s' is not a whole number", value);
		m->steps = (int)x;
		return 1;
	}
	if (!strcmp(name, "shift"))
		return model_number(c, name, value, 1e-3, 1e3, &m->shift);
	if (!strcmp(name, "guidance"))
		return model_number(c, name, value, 0, 1e3, &m->guidance);
	/* sampler, the last key of the list */
	return dg_sampler_parse(value, &m->sampler) ? fail(c, c->line, "[model] sampler: unknown '%s' "
							   "(unipc or euler)", value) : 1;
}

static int on_schedule(parse_ctx *c, const char *name, const char *value)
{
	dg_experiment *e = c->e;
	char *v = dg_strdup(value), *w = v;
	for (char *r = v; *r; r++) /* schedules hold no white space */
		if (!isspace((unsigned char)*r))
			*w++ = *r;
	*w = 0;
	if (c->cont) {
		if (c->last_sched < 0 || strcmp(c->last_key, name)) {
			free(v);
			return fail(c, c->line, "continuation line outside a schedule");
		}
		dg_exp_schedule *s = &e->schedules[c->last_sched];
		size_t n = strlen(s->spec);
		s->spec = str_append(s->spec, n && s->spec[n - 1] != ',' && v[0] != ',' ? "," : "", v);
		free(v);
		return 1;
	}
	if (!label_ok(name)) {
		free(v);
		return fail(c, c->line, "bad schedule label '%s' (letters, digits, '_' and '-', at most %d)",
			    name, DG_EXP_LABEL_MAX);
	}
	for (int i = 0; i < e->nschedules; i++)
		if (!strcmp(e->schedules[i].label, name)) {
			free(v);
			return fail(c, c->line, "schedule '%s' is defined twice (first at line %d)", name,
				    e->schedules[i].line);
		}
	if (e->nschedules == MAX_SCHEDULES) {
		free(v);
		return fail(c, c->line, "too many schedules (at most %d)", MAX_SCHEDULES);
	}
	e->schedules = dg_realloc(e->schedules, (e->nschedules + 1) * sizeof *e->schedules);
	dg_exp_schedule *s = &e->schedules[e->nschedules];
	memset(s, 0, sizeof *s);
	s->label = dg_strdup(name);
	s->line = c->line;
	s->spec = v;
	c->last_sched = e->nschedules++;
	return 1;
}

/* an axis value's part of a generated label: w10, once, e10, a9-29, dl0, dlnone; other keys: the
 * initials of the key's words and the value, characters other than letters, digits, '-' and '_'
 * made '-' (';') or dropped */
static void axis_part(const char *key, const char *val, char *out, size_t size)
{
	char k[16] = "";
	if (!strcmp(key, "anchors") && !strcmp(val, "once")) {
		snprintf(out, size, "once");
		return;
	}
	if (!strcmp(key, "anchors") && !strncmp(val, "every:", 6)) {
		k[0] = 'e', val += 6;
	} else {
		for (const char *p = key; *p && strlen(k) < sizeof k - 1; p++)
			if (p == key || p[-1] == '_')
				k[strlen(k)] = *p;
	}
	size_t n = (size_t)snprintf(out, size, "%s", k);
	for (const char *p = val; *p && n + 1 < size; p++)
		if (isalnum((unsigned char)*p) || *p == '-' || *p == '_')
			out[n++] = *p;
		else if (*p == ';')
			out[n++] = '-';
	out[n < size ? n : size - 1] = 0;
}

#define MAX_AXIS_ITEMS 16
#define MAX_AXIS_VALUES 64
#define MAX_GEN_LABEL 96

/* One schedule s whose items hold axes (key=v1|v2|...) into the cross product of its values, first
 * item slowest, appended to list[*n]: labels LABEL.PART.PART (axis_part, one per axis). */
static int expand_one(parse_ctx *c, const dg_exp_schedule *s, dg_exp_schedule **list, int *n)
{
	char buf[4096], *items[MAX_AXIS_ITEMS];
	if (strlen(s->spec) >= sizeof buf)
		return fail(c, s->line, "schedule '%s' is too long", s->label), -1;
	snprintf(buf, sizeof buf, "%s", s->spec);
	int ni = dg_split(buf, ',', items, MAX_AXIS_ITEMS);
	if (ni < 0)
		return fail(c, s->line, "schedule '%s': too many items", s->label), -1;
	char *vals[MAX_AXIS_ITEMS][MAX_AXIS_VALUES], *keys[MAX_AXIS_ITEMS];
	int nv[MAX_AXIS_ITEMS], pos[MAX_AXIS_ITEMS] = { 0 };
	bool axis[MAX_AXIS_ITEMS] = { 0 }; /* an item written with '|' */
	for (int i = 0; i < ni; i++) {
		char *eq = strchr(items[i], '=');
		keys[i] = items[i];
		if (!eq) { /* not key=value: the schedule's own parser says so */
			nv[i] = 1, vals[i][0] = NULL;
			continue;
		}
		*eq = 0;
		axis[i] = strchr(eq + 1, '|') != NULL;
		nv[i] = dg_split(eq + 1, '|', vals[i], MAX_AXIS_VALUES);
		if (nv[i] < 0)
			return fail(c, s->line, "schedule '%s': axis %s has more than %d values", s->label, keys[i],
				    MAX_AXIS_VALUES), -1;
		if (!axis[i] && nv[i] == 0) { /* key= : the schedule's own parser says what is wrong */
			nv[i] = 1, vals[i][0] = eq + 1;
			continue;
		}
		for (int v = 0; v < nv[i]; v++)
			if (!*vals[i][v])
				return fail(c, s->line, "schedule '%s': axis %s has an empty value (an axis is "
					    "%s=v1|v2|..., each value one the key takes)", s->label, keys[i], keys[i]), -1;
	}
	for (;;) {
		if (*n >= MAX_SCHEDULES)
			return fail(c, s->line, "schedule '%s' expands past %d schedules", s->label, MAX_SCHEDULES), -1;
		dg_sbuf spec = { 0 }, label = { 0 };
		dg_sb_printf(&label, "%s", s->label);
		for (int i = 0; i < ni; i++) {
			if (!vals[i][0]) {
				dg_sb_printf(&spec, "%s%s", i ? "," : "", keys[i]);
				continue;
			}
			const char *v = vals[i][pos[i]];
			dg_sb_printf(&spec, "%s%s=%s", i ? "," : "", keys[i], v);
			if (axis[i]) {
				char part[64];
				axis_part(keys[i], v, part, sizeof part);
				dg_sb_printf(&label, ".%s", part);
			}
		}
		if (strlen(label.buf) > MAX_GEN_LABEL) {
			fail(c, s->line, "schedule '%s': the generated label %s is longer than %d characters", s->label,
			     label.buf, MAX_GEN_LABEL);
			free(spec.buf), free(label.buf);
			return -1;
		}
		for (int k = 0; k < *n; k++)
			if (!strcmp((*list)[k].label, label.buf)) {
				fail(c, s->line, "schedule '%s': the axes give the label %s twice (a value repeated)",
				     s->label, label.buf);
				free(spec.buf), free(label.buf);
				return -1;
			}
		*list = dg_realloc(*list, (*n + 1) * sizeof **list);
		(*list)[(*n)++] = (dg_exp_schedule){ .label = label.buf, .line = s->line,
						     .spec = spec.buf ? spec.buf : dg_strdup("") };
		int i = ni - 1; /* the next combination: last item fastest */
		while (i >= 0 && ++pos[i] == nv[i])
			pos[i--] = 0;
		if (i < 0)
			return 0;
	}
}

/* [schedules] entries with axes expanded (expand_one); a generated label holds a '.', which a
 * written label cannot, so only expand_one's own labels can repeat */
static int expand_axes(parse_ctx *c)
{
	dg_experiment *e = c->e;
	bool any = false;
	for (int i = 0; i < e->nschedules; i++)
		any |= strchr(e->schedules[i].spec, '|') != NULL;
	if (!any)
		return 0;
	dg_exp_schedule *list = NULL;
	int n = 0, rc = 0;
	for (int i = 0; i < e->nschedules && !rc; i++) {
		dg_exp_schedule *s = &e->schedules[i];
		if (strchr(s->spec, '|')) {
			rc = expand_one(c, s, &list, &n);
			continue;
		}
		if (n >= MAX_SCHEDULES) {
			rc = (fail(c, s->line, "too many schedules after the axes expand (at most %d)", MAX_SCHEDULES), -1);
			break;
		}
		list = dg_realloc(list, (n + 1) * sizeof *list);
		list[n++] = (dg_exp_schedule){ .label = dg_strdup(s->label), .line = s->line, .spec = dg_strdup(s->spec) };
	}
	for (int i = 0; i < e->nschedules; i++) {
		free(e->schedules[i].label);
		free(e->schedules[i].spec);
	}
	free(e->schedules);
	e->schedules = list;
	e->nschedules = n;
	return rc;
}

static int on_policies(parse_ctx *c, const char *value)
{
	if (!c->policies_line)
		c->policies_line = c->line;
	char **items = NULL;
	int n = 0;
	list_items(value, &items, &n);
	for (int i = 0; i < n && !c->err.line; i++) {
		dg_policy tmp[MAX_POLICIES];
		policies_arg a = { items[i], tmp, MAX_POLICIES, 0 };
		char msg[512];
		if (captured(policies_call, &a, msg, sizeof msg))
			fail(c, c->line, "%s", msg);
		else
			c->policies = str_append(c->policies, ",", items[i]);
	}
	free_items(items, n);
	return c->err.line ? 0 : 1;
}

static int on_densities(parse_ctx *c, const char *value)
{
	dg_experiment *e = c->e;
	if (!c->densities_line)
		c->densities_line = c->line;
	char **items = NULL;
	int n = 0;
	list_items(value, &items, &n);
	for (int i = 0; i < n && !c->err.line; i++) {
		char *end;
		errno = 0;
		double d = strtod(items[i], &end);
		if (end == items[i] || *end || errno || !isfinite(d))
			fail(c, c->line, "density '%s' is not a number", items[i]);
		else if (!(d > 0 && d <= 1))
			fail(c, c->line, "density %s is outside (0, 1]", items[i]);
		else if (e->ndensities == MAX_DENSITIES)
			fail(c, c->line, "too many densities (at most %d)", MAX_DENSITIES);
		else {
			for (int j = 0; j < e->ndensities; j++)
				if (e->densities[j] == d) {
					fail(c, c->line, "density %s is listed twice", items[i]);
					break;
				}
			if (!c->err.line) {
				e->densities = dg_realloc(e->densities, (e->ndensities + 1) * sizeof(double));
				e->densities[e->ndensities++] = d;
			}
		}
	}
	free_items(items, n);
	return c->err.line ? 0 : 1;
}

static int set_once(parse_ctx *c, char **dst, const char *section, const char *key, const char *value)
{
	if (*dst && !c->cont)
		return fail(c, c->line, "[%s] %s is given twice", section, key);
	if (c->cont && *dst) {
		*dst = str_append(*dst, " ", value);
		return 1;
	}
	*dst = dg_strdup(value);
	return 1;
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
	parse_ctx *c = user;
	dg_experiment *e = c->e;
	if (c->err.line)
		return 1; /* report the first problem only */
	if (c->cont && (strcmp(c->last_section, section) || strcmp(c->last_key, name)))
		c->cont = false; /* an indented line that inih took as a new key */
	int rc = 1;
	char *val = dg_strdup(value);
	if (!strcmp(section, "traces")) {
		rc = on_trace(c, name, val);
	} else if (!strcmp(section, "model")) {
		rc = on_model(c, name, val);
	} else if (!strcmp(section, "prompts")) {
		rc = on_prompt(c, name, val);
	} else if (!strcmp(section, "schedules")) {
		rc = on_schedule(c, name, val);
	} else if (!strcmp(section, "policies")) {
		rc = strcmp(name, "list") ? fail(c, c->line, "[policies] has one key, list (got '%s')", name)
					  : on_policies(c, val);
	} else if (!strcmp(section, "densities")) {
		rc = strcmp(name, "list") ? fail(c, c->line, "[densities] has one key, list (got '%s')", name)
					  : on_densities(c, val);
	} else if (!strcmp(section, "experiment")) {
		if (!strcmp(name, "name")) {
			if (!c->cont && !label_ok(val))
				rc = fail(c, c->line, "bad experiment name '%s' (letters, digits, '_' and '-')", val);
			else if (c->cont)
				rc = fail(c, c->line, "the experiment name is one word");
			else if (c->has_experiment_name)
				rc = fail(c, c->line, "[experiment] name is given twice");
			else {
				free(e->name);
				e->name = dg_strdup(val);
				c->has_experiment_name = true;
			}
		} else if (!strcmp(name, "description")) {
			rc = set_once(c, &e->description, section, name, val);
		} else {
			rc = fail(c, c->line, "unknown key '%s' in [experiment] (name, description)", name);
		}
	} else if (!strcmp(section, "device")) {
		if (!strcmp(name, "cache_offload")) {
			if (e->cache_offload_line)
				rc = fail(c, c->line, "[device] cache_offload is given twice");
			else if (strcmp(val, "true") && strcmp(val, "false"))
				rc = fail(c, c->line, "[device] cache_offload is true or false, not '%s'", val);
			else {
				e->cache_offload = !strcmp(val, "true");
				e->cache_offload_line = c->line;
			}
		} else if (strcmp(name, "device"))
			rc = fail(c, c->line, "unknown key '%s' in [device] (device, cache_offload)", name);
		else if (strcmp(val, "cpu") && strcmp(val, "gpu"))
			rc = fail(c, c->line, "unknown device '%s' (cpu or gpu)", val);
		else if (e->device_line)
			rc = fail(c, c->line, "[device] device is given twice");
		else {
			free(e->device);
			e->device = dg_strdup(val);
			e->device_line = c->line;
		}
	} else if (!strcmp(section, "output")) {
		char *p = NULL;
		if (strcmp(name, "dir") && strcmp(name, "traces"))
			rc = fail(c, c->line, "unknown key '%s' in [output] (dir, traces)", name);
		else if (c->cont || !*val)
			rc = fail(c, c->line, "[output] %s needs one path", name);
		else {
			char **dst = !strcmp(name, "dir") ? &e->out_dir : &e->trace_dir;
			if (*dst)
				rc = fail(c, c->line, "[output] %s is given twice", name);
			else {
				p = abs_path(e->dir, val);
				*dst = p;
			}
		}
	} else {
		rc = fail(c, c->line, "unknown section [%s] (%s)", section, sections);
	}
	free(val);
	snprintf(c->last_section, sizeof c->last_section, "%s", section);
	snprintf(c->last_key, sizeof c->last_key, "%s", name);
	return rc;
}

/* ---------------------------------------------------------------------------------------------- */
/* after parsing: defaults, policies, schedules, traces                                          */

static void meta_take(dg_trace_meta *dst, dg_trace_meta *src)
{
	*dst = *src;
	memset(src, 0, sizeof *src);
}

/* the closed-loop side of finish: the model's defaults and checks, then the grid */
static int finish_closed(parse_ctx *c)
{
	dg_experiment *e = c->e;
	dg_exp_model *m = &e->model;
	if (!m->path)
		return fail(c, m->line ? m->line : -1, "[model] path = the checkpoint folder is required"), -1;
	if (e->nprompts == 0)
		return fail(c, m->line, "no prompts: add a [prompts] section with LABEL = FILE or FILE:NAME"), -1;
	if (m->latent[0] < 1)
		return fail(c, m->line, "[model] latent = FxHxW is required"), -1;
	/* the checkpoint would load (headers and config; weights are read by each cell) */
	char msg[640];
	model_check_arg ma = { .path = m->path };
	if (captured(model_check_call, &ma, msg, sizeof msg))
		return fail(c, m->line, "[model] %s", msg), -1;
	m->layers = ma.cfg.num_layers;
	/* generate's defaults for what is not given */
	if (!m->label)
		m->label = dg_strdup("model");
	if (!(c->model_seen & 1u << 4))
		m->steps = 50;
	if (!(c->model_seen & 1u << 5))
		m->shift = 5;
	if (!(c->model_seen & 1u << 6))
		m->guidance = 5;
	if (m->nseeds == 0) {
		m->seeds = dg_calloc(1, sizeof *m->seeds);
		m->nseeds = 1;
	}
	m->size = dg_exp_model_size(m->path);
	return dg_exp_grid_closed(e, &c->err);
}

static int finish(parse_ctx *c)
{
	dg_experiment *e = c->e;
	char msg[640];
	if (!e->name) {
		const char *b = strrchr(e->path, '/');
		char *n = dg_strdup(b ? b + 1 : e->path);
		char *dot = strrchr(n, '.');
		if (dot && dot != n)
			*dot = 0;
		for (char *s = n; *s; s++)
			if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-')
				*s = '_';
		e->name = n;
	}
	if (!e->device)
		e->device = dg_strdup("cpu");
	e->closed = e->model.line > 0 || e->nprompts > 0;
	if (e->closed && e->ntraces)
		return fail(c, e->traces[0].line, "[traces] with [model] or [prompts]: an experiment is open loop "
			    "(traces) or closed loop (a model and prompts), not both"), -1;
	if (!e->closed && e->cache_offload_line)
		return fail(c, e->cache_offload_line, "[device] cache_offload is for a closed-loop experiment "
			    "([model] and [prompts]): the replay does not offload"), -1;
	if (!e->closed && e->ntraces == 0)
		return fail(c, -1, "no traces: add a [traces] section with LABEL = PATH or LABEL = synth: ... "
			    "(or [model] and [prompts] for a closed-loop experiment)"), -1;
	/* a list given empty is a mistake, not a request for the defaults */
	if (c->policies_line && !c->policies)
		return fail(c, c->policies_line, "[policies] list is empty (leave the section out for the "
			    "defaults)"), -1;
	if (c->densities_line && e->ndensities == 0)
		return fail(c, c->densities_line, "[densities] list is empty (leave the section out for the "
			    "default 0.15)"), -1;
	if (!c->policies) /* replay's and generate's defaults */
		c->policies = dg_strdup(e->closed ? "dense,mc-sparse" : "ladder,factorial");
	e->policy_list = dg_strdup(c->policies);
	e->policies = dg_calloc(MAX_POLICIES, sizeof *e->policies);
	policies_arg pa = { e->policy_list, e->policies, MAX_POLICIES, 0 };
	if (captured(policies_call, &pa, msg, sizeof msg))
		return fail(c, -1, "[policies]: %s", msg), -1;
	e->npolicies = pa.n;
	if (e->ndensities == 0) {
		e->densities = dg_malloc(sizeof(double));
		e->densities[e->ndensities++] = 0.15; /* replay's default */
	}
	if (e->nschedules == 0) {
		e->schedules = dg_calloc(1, sizeof *e->schedules);
		e->schedules[0].label = dg_strdup("default");
		e->schedules[0].spec = dg_strdup("");
		e->nschedules = 1;
	}
	for (int i = 0; i < e->nschedules; i++) {
		dg_exp_schedule *s = &e->schedules[i];
		size_t n = strlen(s->spec);
		while (n && s->spec[n - 1] == ',')
			s->spec[--n] = 0; /* "warmup=3," before a continuation line that never came */
	}
	if (expand_axes(c))
		return -1;
	for (int i = 0; i < e->nschedules; i++) {
		dg_exp_schedule *s = &e->schedules[i];
		schedule_arg a = { s->spec, &s->schedule };
		if (captured(schedule_call, &a, msg, sizeof msg))
			return fail(c, s->line, "schedule '%s': %s", s->label,
				    strncmp(msg, "schedule: ", 10) ? msg : msg + 10), -1;
	}
	if (e->closed)
		return finish_closed(c);
	for (int i = 0; i < e->ntraces; i++) {
		dg_exp_trace *t = &e->traces[i];
		if (t->synth) {
			if (dg_synth_spec_parse(t->spec, &t->so, msg, sizeof msg) ||
			    captured(synth_check_call, &t->so, msg, sizeof msg))
				return fail(c, t->line, "trace '%s': %s", t->label, msg), -1;
			free(t->spec);
			t->spec = dg_synth_spec(&t->so);
			dg_synth_meta(&t->so, &t->meta);
			t->dtype = "bf16";
		} else {
			char *p = abs_path(e->dir, t->spec);
			trace_arg a = { p, { 0 } };
			if (captured(trace_call, &a, msg, sizeof msg)) {
				free(p);
				return fail(c, t->line, "trace '%s': %s", t->label, msg), -1;
			}
			meta_take(&t->meta, &a.t.meta);
			t->dtype = a.t.dtype;
			t->file_size = a.t.file_size;
			dg_trace_close(&a.t);
			free(t->spec);
			t->spec = p;
			t->path = dg_strdup(p);
		}
	}
	return dg_exp_grid_open(e, &c->err);
}

int dg_experiment_load_string(dg_experiment *e, const char *text, const char *path, const char *base)
{
	memset(e, 0, sizeof *e);
	e->path = dg_strdup(path);
	e->dir = dg_strdup(base);
	e->text = dg_strdup(text);
	parse_ctx c = { .e = e, .path = path, .text = e->text, .pos = e->text, .last_trace = -1, .last_sched = -1 };
	int rc = ini_parse_stream(reader, &c, handler, &c);
	if (!c.err.line && rc > 0)
		fail(&c, rc, "syntax error: expected [section], key = value, or a comment");
	else if (!c.err.line && rc < 0)
		fail(&c, -1, "cannot parse (inih error %d)", rc);
	if (!c.err.line)
		finish(&c);
	free(c.policies);
	if (c.err.line) {
		if (c.err.line > 0)
			dg_error("%s:%d: %s", path, c.err.line, c.err.msg);
		else
			dg_error("%s: %s", path, c.err.msg);
		dg_experiment_free(e);
		return -1;
	}
	return 0;
}

int dg_experiment_load(dg_experiment *e, const char *path)
{
	memset(e, 0, sizeof *e);
	size_t n;
	char *text = dg_read_all(path, 16u << 20, &n);
	if (!text && errno == EFBIG)
		return dg_error("%s: larger than 16 MiB: not an experiment file", path);
	if (!text)
		return dg_error(errno == EIO || errno == EISDIR ? "cannot read %s: %s" : "cannot open %s: %s",
				path, dg_strerror(errno));
	if (strlen(text) != n) {
		free(text);
		return dg_error("%s: holds NUL bytes: not an experiment file", path);
	}
	char *copy = dg_strdup(path), *slash = strrchr(copy, '/');
	if (slash)
		*(slash == copy ? slash + 1 : slash) = 0;
	else
		strcpy(copy, ".");
	char *base = realpath(copy, NULL);
	int rc = dg_experiment_load_string(e, text, path, base ? base : copy);
	free(base);
	free(copy);
	free(text);
	return rc;
}
