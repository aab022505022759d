/*
 * results.c: load and index a results directory (metrics.csv + run.json) and take means of
 * rel_l2 over post-warm-up units. See results.h for the formats and the invariants.
 */
#include "analysis/results.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <gsl/gsl_sort.h>

#include "util/json.h"
#include "util/util.h"

#define METRICS_HEADER "policy,density_target,density,step,layer,head,rel_l1,rel_l2,cosine,psnr," \
		       "mass_mean,mass_p5,staleness,time_ms"
#define METRICS_FIELDS 14

void dg_results_free(dg_results *r)
{
	for (int i = 0; i < r->n_policies; i++)
		free(r->policy[i]);
	free(r->policy);
	free(r->unit);
	free(r->density);
	free(r->cluster);
	free(r->range);
	free(r->dense_layer);
	free(r->trace_path);
	free(r->model);
	free(r->source);
	free(r->git_commit);
	free(r->device);
	free(r->date);
	free(r->dir);
	memset(r, 0, sizeof *r);
}

int dg_results_policy(const dg_results *r, const char *name)
{
	for (int i = 0; i < r->n_policies; i++)
		if (!strcmp(r->policy[i], name))
			return i;
	return -1;
}

void dg_results_add(dg_results *r, const char *policy, const dg_unit *u)
{
	int p = dg_results_policy(r, policy);
	if (p < 0) {
		r->policy = dg_realloc(r->policy, (r->n_policies + 1) * sizeof *r->policy);
		r->policy[r->n_policies] = dg_strdup(policy);
		p = r->n_policies++;
	}
	if (r->n_units == r->cap_units) {
		r->cap_units = r->cap_units ? 2 * r->cap_units : 1024;
		r->unit = dg_realloc(r->unit, r->cap_units * sizeof *r->unit);
	}
	r->unit[r->n_units] = *u;
	r->unit[r->n_units++].policy = p;
}

static int cmp_cluster(const void *a, const void *b)
{
	const dg_cluster *x = a, *y = b;
	if (x->layer != y->layer)
		return x->layer < y->layer ? -1 : 1;
	return (x->head > y->head) - (x->head < y->head);
}

static int cmp_unit(const void *a, const void *b)
{
	const dg_unit *x = a, *y = b;
	int k[2][4] = { { x->policy, x->density, x->cluster, x->step },
			{ y->policy, y->density, y->cluster, y->step } };
	for (int i = 0; i < 4; i++)
		if (k[0][i] != k[1][i])
			return k[0][i] < k[1][i] ? -1 : 1;
	return 0;
}

int dg_results_index(dg_results *r)
{
	if (!r->n_units)
		return dg_error("%s: no units", r->dir ? r->dir : "results");
	/* distinct density_target values, ascending */
	double *d = dg_malloc(r->n_units * sizeof *d);
	for (size_t i = 0; i < r->n_units; i++)
		d[i] = r->unit[i].density_target;
	gsl_sort(d, 1, r->n_units);
	int nd = 0;
	for (size_t i = 0; i < r->n_units; i++)
		if (!nd || d[i] != d[nd - 1])
			d[nd++] = d[i];
	free(r->density);
	r->density = dg_realloc(d, nd * sizeof *d);
	r->n_densities = nd;
	/* distinct (layer, head) clusters */
	dg_cluster *c = dg_malloc(r->n_units * sizeof *c);
	for (size_t i = 0; i < r->n_units; i++)
		c[i] = (dg_cluster){ r->unit[i].layer, r->unit[i].head };
	qsort(c, r->n_units, sizeof *c, cmp_cluster);
	int nc = 0;
	for (size_t i = 0; i < r->n_units; i++)
		if (!nc || cmp_cluster(&c[i], &c[nc - 1]))
			c[nc++] = c[i];
	free(r->cluster);
	r->cluster = dg_realloc(c, nc * sizeof *c);
	r->n_clusters = nc;
	for (size_t i = 0; i < r->n_units; i++) {
		dg_unit *u = &r->unit[i];
		dg_cluster key = { u->layer, u->head };
		u->density = dg_results_density(r, u->density_target);
		u->cluster = (int)((dg_cluster *)bsearch(&key, r->cluster, nc, sizeof key, cmp_cluster) -
				   r->cluster);
	}
	qsort(r->unit, r->n_units, sizeof *r->unit, cmp_unit);
	for (size_t i = 1; i < r->n_units; i++) {
		const dg_unit *u = &r->unit[i];
		if (!cmp_unit(u, u - 1))
			return dg_error("%s/metrics.csv:%d: duplicate unit (policy %s, density_target %g, "
					"step %d, layer %d, head %d; first at line %d)",
					r->dir ? r->dir : ".", u->line, r->policy[u->policy],
					u->density_target, u->step, u->layer, u->head, u[-1].line);
	}
	free(r->range);
	r->range = dg_calloc((size_t)r->n_policies * nd + 1, sizeof *r->range);
	for (size_t i = 0; i < r->n_units; i++)
		r->range[r->unit[i].policy * nd + r->unit[i].density + 1]++;
	for (int i = 0; i < r->n_policies * nd; i++)
		r->range[i + 1] += r->range[i];
	return 0;
}

int dg_results_density(const dg_results *r, double density_target)
{
	for (int i = 0; i < r->n_densities; i++)
		if (r->density[i] == density_target)
			return i;
	return -1;
}

int dg_results_density_near(const dg_results *r, double x)
{
	int best = 0;
	for (int i = 1; i < r->n_densities; i++)
		if (fabs(r->density[i] - x) < fabs(r->density[best] - x))
			best = i;
	return best;
}

bool dg_results_dense_layer(const dg_results *r, int layer)
{
	for (int i = 0; i < r->n_dense_layers; i++)
		if (r->dense_layer[i] == layer)
			return true;
	return false;
}

bool dg_results_post_warmup(const dg_results *r, const dg_unit *u)
{
	return u->step >= r->warmup && !dg_results_dense_layer(r, u->layer);
}

void dg_results_cluster_sums(const dg_results *r, int p, int d, int staleness, double *sum,
			     double *count)
{
	memset(sum, 0, r->n_clusters * sizeof *sum);
	memset(count, 0, r->n_clusters * sizeof *count);
	const size_t k = (size_t)p * r->n_densities + d;
	for (size_t i = r->range[k]; i < r->range[k + 1]; i++) {
		const dg_unit *u = &r->unit[i];
		if (!dg_results_post_warmup(r, u) || (staleness != DG_ANY && u->staleness != staleness))
			continue;
		sum[u->cluster] += u->rel_l2;
		count[u->cluster] += 1;
	}
}

double dg_weighted_mean(const double *sum, const double *count, const double *w, int n)
{
	double s = 0, c = 0;
	for (int i = 0; i < n; i++) {
		double wi = w ? w[i] : 1;
		if (wi) {
			s += wi * sum[i];
			c += wi * count[i];
		}
	}
	return c > 0 ? s / c : NAN;
}

double dg_results_mean(const dg_results *r, int p, int d, const dg_filter *f, double *n_units)
{
	double *sum = dg_malloc(2 * r->n_clusters * sizeof *sum), *count = sum + r->n_clusters;
	dg_results_cluster_sums(r, p, d, f->staleness, sum, count);
	if (f->layer != DG_ANY)
		for (int c = 0; c < r->n_clusters; c++)
			if (r->cluster[c].layer != f->layer)
				count[c] = sum[c] = 0;
	double m = dg_weighted_mean(sum, count, f->weight, r->n_clusters);
	if (n_units) {
		*n_units = 0;
		for (int c = 0; c < r->n_clusters; c++)
			*n_units += (f->weight ? f->weight[c] : 1) * count[c];
	}
	free(sum);
	return m;
}

int dg_results_layers(const dg_results *r, int *layers)
{
	bool *post = dg_calloc(r->n_clusters, sizeof *post);
	for (size_t i = 0; i < r->n_units; i++)
		if (dg_results_post_warmup(r, &r->unit[i]))
			post[r->unit[i].cluster] = true;
	int n = 0;
	for (int c = 0; c < r->n_clusters; c++) /* clusters are sorted by layer */
		if (post[c] && (!n || layers[n - 1] != r->cluster[c].layer))
			layers[n++] = r->cluster[c].layer;
	free(post);
	return n;
}

/* ---- metrics.csv -------------------------------------------------------------------------- */

static int parse_double(const char *s, double *out, bool allow_inf)
{
	char *end;
	errno = 0;
	*out = strtod(s, &end);
	if (end == s || *end || errno == ERANGE || isnan(*out))
		return -1;
	return isinf(*out) && !allow_inf ? -1 : 0;
}

static int parse_int(const char *s, int *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (end == s || *end || errno || v < INT_MIN + 1 || v > INT_MAX)
		return -1;
	*out = (int)v;
	return 0;
}

static const char *const metrics_field[METRICS_FIELDS] = {
	"policy", "density_target", "density", "step", "layer", "head", "rel_l1", "rel_l2",
	"cosine", "psnr", "mass_mean", "mass_p5", "staleness", "time_ms"
};

/* One data line into u; returns the index of the bad field, or -1 if the line is good. */
static int parse_row(char **f, dg_unit *u)
{
	double *dst[] = { &u->density_target, &u->density_eff, NULL, NULL, NULL, &u->rel_l1,
			  &u->rel_l2, &u->cosine, &u->psnr, &u->mass_mean, &u->mass_p5, NULL,
			  &u->time_ms };
	int *idst[] = { NULL, NULL, &u->step, &u->layer, &u->head, NULL, NULL, NULL, NULL, NULL,
			NULL, &u->staleness, NULL };
	if (!*f[0] || dg_control_at(f[0]) >= 0) /* a name for tables and figure scripts: one line */
		return 0;
	for (int i = 1; i < METRICS_FIELDS; i++) {
		if (dst[i - 1] && parse_double(f[i], dst[i - 1], i == 9))
			return i;
		if (idst[i - 1] && parse_int(f[i], idst[i - 1]))
			return i;
	}
	/* what replay can write (1e-6: a sum of probabilities or a cosine rounded past its bound) */
	const double tol = 1e-6, lim = 1e18; /* lim: finite, yet nothing a replay makes */
	struct { int field; double v, lo, hi; } in[] = {
		{ 1, u->density_target, 0, 1 },	 { 2, u->density_eff, 0, 1 },	  { 3, u->step, 0, INT_MAX },
		{ 4, u->layer, 0, INT_MAX },	 { 5, u->head, 0, INT_MAX },	  { 6, u->rel_l1, 0, lim },
		{ 7, u->rel_l2, 0, lim },	 { 8, u->cosine, -1 - tol, 1 + tol }, { 10, u->mass_mean, 0, 1 + tol },
		{ 11, u->mass_p5, 0, 1 + tol },	 { 12, u->staleness, 0, INT_MAX }, { 13, u->time_ms, 0, lim },
	};
	for (size_t i = 0; i < sizeof in / sizeof *in; i++)
		if (!(in[i].v >= in[i].lo && in[i].v <= in[i].hi) || (in[i].field == 1 && in[i].v == 0))
			return in[i].field;
	if (!(u->psnr >= -1e4 && (u->psnr <= 1e4 || u->psnr == INFINITY))) /* +inf: equal outputs */
		return 9;
	return -1;
}

int dg_metrics_row_parse(char **f, dg_unit *u, const char **bad)
{
	int i = parse_row(f, u);
	*bad = i >= 0 ? metrics_field[i] : NULL;
	return i >= 0 ? -1 : 0;
}

static int load_metrics(dg_results *r, const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return dg_error("cannot open %s: %s", path, strerror(errno));
	char *line = NULL;
	size_t cap = 0;
	int lineno = 0, rc = 0;
	ssize_t len;
	while ((len = getline(&line, &cap, f)) >= 0) {
		lineno++;
		while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = 0;
		if (lineno == 1) {
			if (strcmp(line, METRICS_HEADER)) {
				rc = dg_error("%s:1: not a dsgap metrics header (expected %s)", path,
					      METRICS_HEADER);
				break;
			}
			continue;
		}
		if (!len) /* a blank line, e.g. at the end */
			continue;
		char *field[METRICS_FIELDS + 1];
		int n = dg_split(line, ',', field, METRICS_FIELDS + 1);
		if (n != METRICS_FIELDS) {
			if (n < 0)
				rc = dg_error("%s:%d: more than %d fields", path, lineno, METRICS_FIELDS);
			else
				rc = dg_error("%s:%d: expected %d fields, found %d", path, lineno,
					      METRICS_FIELDS, n);
			break;
		}
		dg_unit u = { .line = lineno };
		int bad = parse_row(field, &u);
		if (bad >= 0) {
			rc = dg_error("%s:%d: bad %s '%s'", path, lineno, metrics_field[bad], field[bad]);
			break;
		}
		dg_results_add(r, field[0], &u);
	}
	if (!rc && ferror(f))
		rc = dg_error("cannot read %s: %s", path, strerror(errno));
	else if (!rc && lineno == 0)
		rc = dg_error("%s:1: empty file (expected the header %s)", path, METRICS_HEADER);
	else if (!rc && r->n_units == 0)
		rc = dg_error("%s:%d: no units after the header", path, lineno);
	free(line);
	fclose(f);
	return rc;
}

/* ---- run.json ----------------------------------------------------------------------------- */

/* A string member, control characters made spaces (it goes into one-line headers), or "unknown". */
static char *json_string(const cJSON *obj, const char *key)
{
	const cJSON *s = cJSON_GetObjectItemCaseSensitive(obj, key);
	char *v = dg_strdup(cJSON_IsString(s) ? s->valuestring : "unknown");
	for (char *c = v; *c; c++)
		if ((unsigned char)*c < 0x20)
			*c = ' ';
	return v;
}

static int load_run(dg_results *r, const char *path)
{
	size_t n;
	char *text = dg_read_all(path, SIZE_MAX, &n);
	if (!text)
		return dg_error(errno == EIO || errno == EISDIR ? "cannot read %s: %s" : "cannot open %s: %s",
				path, dg_strerror(errno));
	const char *why;
	int line, rc = 0;
	cJSON *root = dg_json_parse(text, n, &why, &line);
	if (!root)
		rc = line ? dg_error("%s:%d: %s", path, line, why) : dg_error("%s: %s", path, why);
	const cJSON *sched = cJSON_GetObjectItemCaseSensitive(root, "schedule");
	const cJSON *warm = cJSON_GetObjectItemCaseSensitive(sched, "warmup");
	const cJSON *dl = cJSON_GetObjectItemCaseSensitive(sched, "dense_layers");
	if (!rc && (!cJSON_IsNumber(warm) || warm->valuedouble < 0 ||
		    warm->valuedouble != warm->valueint || !cJSON_IsArray(dl)))
		rc = dg_error("%s: no schedule.warmup (integer >= 0) and schedule.dense_layers (array)",
			      path);
	if (!rc) {
		r->warmup = warm->valueint;
		r->n_dense_layers = cJSON_GetArraySize(dl);
		r->dense_layer = dg_malloc(r->n_dense_layers * sizeof *r->dense_layer);
		int i = 0;
		const cJSON *e;
		cJSON_ArrayForEach(e, dl) {
			if (!cJSON_IsNumber(e)) {
				rc = dg_error("%s: schedule.dense_layers holds a non-number", path);
				break;
			}
			r->dense_layer[i++] = e->valueint;
		}
	}
	if (!rc) {
		const cJSON *trace = cJSON_GetObjectItemCaseSensitive(root, "trace");
		r->trace_path = json_string(trace, "path");
		r->model = json_string(trace, "model");
		r->source = json_string(trace, "source");
		r->git_commit = json_string(root, "git_commit");
		r->device = json_string(root, "device");
		r->date = json_string(root, "date");
	}
	cJSON_Delete(root);
	free(text);
	return rc;
}

int dg_results_args_parse(dg_results_args *a, const char *cmd, bool with_density, int argc,
			  char **argv, void (*usage)(FILE *f))
{
	static const struct option opts[] = {
		{ "density", required_argument, NULL, 'd' },
		{ "boot", required_argument, NULL, 'b' },
		{ "seed", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	*a = (dg_results_args){ .density = NAN, .boot = 1000, .seed = 1 };
	int c;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":h", opts + !with_density, NULL)) != -1) {
		char *end;
		errno = 0;
		switch (c) {
		case 'd':
			a->density = strtod(optarg, &end);
			if (end == optarg || *end || errno || !(a->density >= 0 && a->density <= 1))
				return dg_error("%s: bad --density '%s' (a density_target in [0, 1])", cmd,
						optarg);
			break;
		case 'b':
			if (dg_opt_long(cmd, "boot", optarg, 0, 10000000, &a->boot))
				return -1;
			break;
		case 's':
			if (dg_opt_seed(cmd, "seed", optarg, &a->seed))
				return -1;
			break;
		case 'h':
			usage(stdout);
			return 1;
		default:
			dg_opt_bad(cmd, c, argv, opts + !with_density);
			return -1;
		}
	}
	if (optind != argc - 1)
		return dg_error("%s: %s (dsgap %s --help)", cmd, optind == argc ? "no results directory given"
			: "one results directory, not several", cmd);
	a->dir = argv[optind];
	return 0;
}

int dg_results_load(dg_results *r, const char *dir)
{
	memset(r, 0, sizeof *r);
	r->dir = dg_strdup(dir);
	char *metrics = dg_path_join(dir, "metrics.csv"), *run = dg_path_join(dir, "run.json");
	int rc = load_run(r, run);
	if (!rc)
		rc = load_metrics(r, metrics);
	if (!rc)
		rc = dg_results_index(r);
	free(metrics);
	free(run);
	if (rc)
		dg_results_free(r);
	return rc;
}
