/*
 * experiment.c: read an experiment file (inih) into a dg_experiment and expand it into runs and
 * cells (the format and the cell definition are in experiment.h). Errors name FILE:LINE.
 *
 * inih is driven through ini_parse_stream with our own line reader, so that the handler knows the
 * line it is on, whether it is an indented continuation, and so that a line longer than inih's
 * buffer (INI_MAX_LINE, 200 in Debian's build) is an error rather than a silent split.
 * Problems found by the library's own parsers (policies, schedules, traces) are reported by them
 * on stderr; here they are captured and re-issued with the file and line in front.
 */
#include "experiment.h"

#include <ctype.h>
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

#include "replay.h"
#include "util.h"

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
/* synth: specs                                                                                    */

static int synth_spec_parse(const char *spec, dg_synth_opts *o, char *err, size_t size)
{
	dg_synth_defaults(o);
	char *copy = dg_strdup(spec), *save = NULL;
	char *s = trim(copy);
	if (!strncmp(s, "synth:", 6))
		s += 6;
	else if (!strncmp(s, "synth", 5) && (s[5] == 0 || isspace((unsigned char)s[5])))
		s += 5;
	int rc = 0;
	unsigned seen = 0;
	for (char *tok = strtok_r(s, " \t", &save); tok && !rc; tok = strtok_r(NULL, " \t", &save)) {
		char *eq = strchr(tok, '=');
		if (!eq) {
			snprintf(err, size, "synth: expected key=value, got '%s' (keys: grid heads layers steps "
				 "head_dim seed)", tok);
			rc = -1;
			break;
		}
		*eq = 0;
		const char *key = tok, *val = eq + 1;
		char *end = NULL;
		long v = 0;
		unsigned bit = 0;
		if (!strcmp(key, "grid")) {
			int g[3];
			if (sscanf(val, "%dx%dx%d", &g[0], &g[1], &g[2]) != 3 || strspn(val, "0123456789x") != strlen(val)) {
				snprintf(err, size, "synth: bad grid '%s' (FxHxW, e.g. 4x16x16)", val);
				rc = -1;
				break;
			}
			memcpy(o->grid, g, sizeof g);
			bit = 1;
		} else if (!strcmp(key, "seed")) {
			errno = 0;
			unsigned long long sd = strtoull(val, &end, 10);
			if (end == val || *end || errno || *val == '-') {
				snprintf(err, size, "synth: bad seed '%s'", val);
				rc = -1;
				break;
			}
			o->seed = (unsigned long)sd;
			bit = 2;
		} else {
			int *dst = !strcmp(key, "heads") ? &o->heads
				 : !strcmp(key, "layers") ? &o->layers
				 : !strcmp(key, "steps") ? &o->steps
				 : !strcmp(key, "head_dim") || !strcmp(key, "head-dim") ? &o->head_dim : NULL;
			if (!dst) {
				snprintf(err, size, "synth: unknown key '%s' (grid heads layers steps head_dim seed)", key);
				rc = -1;
				break;
			}
			errno = 0;
			v = strtol(val, &end, 10);
			if (end == val || *end || errno || v < INT_MIN || v > INT_MAX) {
				snprintf(err, size, "synth: bad %s '%s'", key, val);
				rc = -1;
				break;
			}
			*dst = (int)v;
			bit = dst == &o->heads ? 4 : dst == &o->layers ? 8 : dst == &o->steps ? 16 : 32;
		}
		if (seen & bit) {
			snprintf(err, size, "synth: %s given twice", key);
			rc = -1;
		}
		seen |= bit;
	}
	free(copy);
	if (!rc && captured(synth_check_call, o, err, size))
		rc = -1;
	return rc;
}

int dg_synth_spec_parse(const char *spec, dg_synth_opts *o)
{
	char err[512];
	if (synth_spec_parse(spec, o, err, sizeof err))
		return dg_error("%s", err);
	return 0;
}

static char *synth_canonical(const dg_synth_opts *o)
{
	char buf[256];
	snprintf(buf, sizeof buf, "synth: grid=%dx%dx%d heads=%d layers=%d steps=%d head_dim=%d seed=%lu",
		 o->grid[0], o->grid[1], o->grid[2], o->heads, o->layers, o->steps, o->head_dim, o->seed);
	return dg_strdup(buf);
}

/* the metadata dg_synth will write (synth.c: step i of the 50-step schedule, indices 0..n-1) */
static void synth_meta(const dg_synth_opts *o, dg_trace_meta *m)
{
	memset(m, 0, sizeof *m);
	m->steps = o->steps, m->layers = o->layers, m->heads = o->heads, m->head_dim = o->head_dim;
	memcpy(m->grid, o->grid, sizeof m->grid);
	m->tokens = o->grid[0] * o->grid[1] * o->grid[2];
	m->step_index = dg_malloc(o->steps * sizeof(int));
	m->layer_index = dg_malloc(o->layers * sizeof(int));
	m->head_index = dg_malloc(o->heads * sizeof(int));
	for (int i = 0; i < o->steps; i++)
		m->step_index[i] = i;
	for (int i = 0; i < o->layers; i++)
		m->layer_index[i] = i;
	for (int i = 0; i < o->heads; i++)
		m->head_index[i] = i;
	m->model = dg_strdup("synthetic");
	m->source = dg_strdup("synthetic");
	m->version = DG_TRACE_VERSION;
}

/* ---------------------------------------------------------------------------------------------- */
/* the inih side                                                                                   */

typedef struct {
	dg_experiment *e;
	const char *path;
	const char *text, *pos; /* the file's contents, and where the reader is */
	int line;               /* line the reader returned last (1-based) */
	bool cont;              /* that line starts with white space: an inih continuation */
	int err_line;           /* first error: its line (0: none) and message */
	char err[640];
	char *policies;         /* normalised comma list of the items, in order */
	int trace_cap, sched_cap;
	char last_section[64], last_key[64];
	int last_trace, last_sched; /* for continuations */
	bool has_experiment_name;
} parse_ctx;

DG_PRINTF(3, 4) static int fail(parse_ctx *c, int line, const char *fmt, ...)
{
	if (c->err_line)
		return 0;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->err, sizeof c->err, fmt, ap);
	va_end(ap);
	c->err_line = line > 0 ? line : -1;
	return 0;
}

/* fgets-like over the text; flags lines inih would cut */
static char *reader(char *str, int num, void *stream)
{
	parse_ctx *c = stream;
	if (!*c->pos || c->err_line)
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

static const char *sections = "experiment, traces, policies, densities, schedules, device, output";

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

static int on_policies(parse_ctx *c, const char *value)
{
	char **items = NULL;
	int n = 0;
	list_items(value, &items, &n);
	for (int i = 0; i < n && !c->err_line; i++) {
		dg_policy tmp[MAX_POLICIES];
		policies_arg a = { items[i], tmp, MAX_POLICIES, 0 };
		char msg[512];
		if (captured(policies_call, &a, msg, sizeof msg))
			fail(c, c->line, "%s", msg);
		else
			c->policies = str_append(c->policies, ",", items[i]);
	}
	free_items(items, n);
	return c->err_line ? 0 : 1;
}

static int on_densities(parse_ctx *c, const char *value)
{
	dg_experiment *e = c->e;
	char **items = NULL;
	int n = 0;
	list_items(value, &items, &n);
	for (int i = 0; i < n && !c->err_line; i++) {
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
			if (!c->err_line) {
				e->densities = dg_realloc(e->densities, (e->ndensities + 1) * sizeof(double));
				e->densities[e->ndensities++] = d;
			}
		}
	}
	free_items(items, n);
	return c->err_line ? 0 : 1;
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
	if (c->err_line)
		return 1; /* report the first problem only */
	if (c->cont && (strcmp(c->last_section, section) || strcmp(c->last_key, name)))
		c->cont = false; /* an indented line that inih took as a new key */
	int rc = 1;
	char *val = dg_strdup(value);
	if (!strcmp(section, "traces")) {
		rc = on_trace(c, name, val);
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
		if (strcmp(name, "device"))
			rc = fail(c, c->line, "unknown key '%s' in [device] (device)", name);
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
/* after parsing: defaults, traces, schedules, the grid                                           */

static void meta_take(dg_trace_meta *dst, dg_trace_meta *src)
{
	*dst = *src;
	memset(src, 0, sizeof *src);
}

static int resolve_anchors(parse_ctx *c, const dg_exp_schedule *s, const dg_exp_trace *t, dg_schedule *sc)
{
	*sc = s->schedule;
	const dg_trace_meta *m = &t->meta;
	if (sc->anchors_given) {
		for (int a = 0; a < sc->nanchors; a++) {
			int found = 0;
			for (int i = 0; i < m->steps; i++)
				found |= m->step_index[i] == sc->anchors[a];
			if (!found)
				return fail(c, s->line, "schedule '%s': anchor step %d is not in trace '%s' (its steps: "
					    "%d..%d)", s->label, sc->anchors[a], t->label, m->step_index[0],
					    m->step_index[m->steps - 1]), -1;
		}
		return 0;
	}
	sc->nanchors = 0; /* replay's default: the last stored step before the end of warm-up */
	for (int i = 0; i < m->steps; i++)
		if (m->step_index[i] < sc->warmup) {
			sc->anchors[0] = m->step_index[i];
			sc->nanchors = 1;
		}
	return 0;
}

static uint64_t fnv(uint64_t h, const char *s)
{
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ull;
	}
	return h;
}

static void ints_str(char *buf, size_t size, const int *v, int n)
{
	int k = snprintf(buf, size, "%s", n ? "" : "-");
	for (int i = 0; i < n && k < (int)size; i++)
		k += snprintf(buf + k, size - k, "%s%d", i ? ";" : "", v[i]);
}

static uint64_t fingerprint(const dg_experiment *e)
{
	char buf[4096];
	uint64_t h = fnv(1469598103934665603ull, "dsgap-experiment 1\ndevice ");
	h = fnv(h, e->device);
	h = fnv(h, "\npolicies");
	for (int i = 0; i < e->npolicies; i++)
		h = fnv(fnv(h, " "), e->policies[i].name);
	h = fnv(h, "\ndensities");
	for (int i = 0; i < e->ndensities; i++) {
		snprintf(buf, sizeof buf, " %.17g", e->densities[i]);
		h = fnv(h, buf);
	}
	for (int r = 0; r < e->nruns; r++) {
		const dg_exp_run *run = &e->runs[r];
		const dg_exp_trace *t = &e->traces[run->trace];
		const dg_schedule *s = &e->schedules[run->schedule].schedule;
		const char *base = strrchr(t->spec, '/');
		snprintf(buf, sizeof buf, "\nrun %s trace %s %lld %s %dx%dx%dx%dx%d schedule warmup=%d given=%d ",
			 run->name, t->synth ? t->spec : base ? base + 1 : t->spec, t->synth ? 0 : t->file_size,
			 t->dtype, t->meta.steps, t->meta.layers, t->meta.heads, t->meta.tokens, t->meta.head_dim,
			 s->warmup, s->anchors_given);
		h = fnv(h, buf);
		ints_str(buf, sizeof buf, s->anchors, s->nanchors);
		h = fnv(fnv(h, buf), " ");
		ints_str(buf, sizeof buf, s->dense_layers, s->ndense_layers);
		h = fnv(h, buf);
	}
	return h;
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
	if (e->ntraces == 0)
		return fail(c, -1, "no traces: add a [traces] section with LABEL = PATH or LABEL = synth: ..."), -1;
	if (!c->policies)
		c->policies = dg_strdup("ladder,factorial"); /* replay's default */
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
		schedule_arg a = { s->spec, &s->schedule };
		if (captured(schedule_call, &a, msg, sizeof msg))
			return fail(c, s->line, "schedule '%s': %s", s->label,
				    strncmp(msg, "schedule: ", 10) ? msg : msg + 10), -1;
	}
	for (int i = 0; i < e->ntraces; i++) {
		dg_exp_trace *t = &e->traces[i];
		if (t->synth) {
			if (synth_spec_parse(t->spec, &t->so, msg, sizeof msg))
				return fail(c, t->line, "trace '%s': %s", t->label, msg), -1;
			free(t->spec);
			t->spec = synth_canonical(&t->so);
			synth_meta(&t->so, &t->meta);
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
	/* the grid: runs trace-major, cells (layer, head) within a run */
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
			if (resolve_anchors(c, &e->schedules[si], t, &run->resolved))
				return -1;
			run->first_cell = (int)ncells;
			run->ncells = t->meta.layers * t->meta.heads;
			ncells += run->ncells;
			if (ncells > 10000000)
				return fail(c, -1, "the grid has more than 10 million cells"), -1;
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
	/* cells of one run must have distinct folders (duplicate indices in a trace) */
	for (int r = 0; r < e->nruns; r++) {
		const dg_exp_run *run = &e->runs[r];
		for (int a = 0; a < run->ncells; a++)
			for (int b = a + 1; b < run->ncells && run->ncells < 20000; b++)
				if (!strcmp(e->cells[run->first_cell + a].id, e->cells[run->first_cell + b].id))
					return fail(c, e->traces[run->trace].line, "trace '%s' repeats layer/head "
						    "indices (cell %s twice)", e->traces[run->trace].label,
						    e->cells[run->first_cell + a].id), -1;
	}
	e->fingerprint = fingerprint(e);
	if (e->trace_dir)
		dg_experiment_set_out(e, NULL);
	return 0;
}

int dg_experiment_load_string(dg_experiment *e, const char *text, const char *path, const char *base)
{
	memset(e, 0, sizeof *e);
	e->path = dg_strdup(path);
	e->dir = dg_strdup(base);
	e->text = dg_strdup(text);
	parse_ctx c = { .e = e, .path = path, .text = e->text, .pos = e->text, .last_trace = -1, .last_sched = -1 };
	int rc = ini_parse_stream(reader, &c, handler, &c);
	if (!c.err_line && rc > 0)
		fail(&c, rc, "syntax error: expected [section], key = value, or a comment");
	else if (!c.err_line && rc < 0)
		fail(&c, -1, "cannot parse (inih error %d)", rc);
	if (!c.err_line)
		finish(&c);
	free(c.policies);
	if (c.err_line) {
		if (c.err_line > 0)
			dg_error("%s:%d: %s", path, c.err_line, c.err);
		else
			dg_error("%s: %s", path, c.err);
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
				path, strerror(errno));
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

void dg_experiment_set_out(dg_experiment *e, const char *out_dir)
{
	for (int i = 0; i < e->ntraces; i++) {
		dg_exp_trace *t = &e->traces[i];
		if (!t->synth)
			continue;
		/* the label and a hash of the spec: a changed spec never reuses an old file */
		char name[DG_EXP_LABEL_MAX + 32];
		snprintf(name, sizeof name, "%s-%08llx.h5", t->label,
			 (unsigned long long)(fnv(1469598103934665603ull, t->spec) & 0xffffffffull));
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
	e->fingerprint = fingerprint(e);
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
	int n = 0, pos = 0;
	for (int k = shard; k < e->ncells; k += nshards, pos++)
		if (pos % nworkers == worker)
			idx[n++] = k;
	return n;
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
	cJSON *pols = cJSON_AddArrayToObject(root, "policies");
	for (int i = 0; i < e->npolicies; i++)
		cJSON_AddItemToArray(pols, cJSON_CreateString(e->policies[i].name));
	cJSON_AddItemToObject(root, "densities", cJSON_CreateDoubleArray(e->densities, e->ndensities));
	cJSON_AddNumberToObject(root, "ncells", e->ncells);
	cJSON *runs = cJSON_AddArrayToObject(root, "runs");
	for (int r = 0; r < e->nruns; r++) {
		const dg_exp_run *run = &e->runs[r];
		const dg_exp_schedule *s = &e->schedules[run->schedule];
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "name", run->name);
		cJSON_AddItemToObject(j, "trace", trace_json(&e->traces[run->trace]));
		cJSON *sj = cJSON_AddObjectToObject(j, "schedule");
		cJSON_AddStringToObject(sj, "label", s->label);
		cJSON_AddStringToObject(sj, "spec", s->spec);
		cJSON_AddNumberToObject(sj, "warmup", run->resolved.warmup);
		cJSON_AddItemToObject(sj, "anchors", cJSON_CreateIntArray(run->resolved.anchors, run->resolved.nanchors));
		cJSON_AddItemToObject(sj, "dense_layers",
				      cJSON_CreateIntArray(run->resolved.dense_layers, run->resolved.ndense_layers));
		cJSON *cells = cJSON_AddArrayToObject(j, "cells");
		for (int k = 0; k < run->ncells; k++)
			cJSON_AddItemToArray(cells, cJSON_CreateString(e->cells[run->first_cell + k].id));
		cJSON_AddItemToArray(runs, j);
	}
	char *s = cJSON_Print(root);
	cJSON_Delete(root);
	return s;
}
