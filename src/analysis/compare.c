/*
 * compare.c: the comparison table and Pareto figure of every method (compare.h).
 */
#include "analysis/compare.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_multifit.h>

#include "analysis/bootstrap.h"
#include "analysis/decompose.h"
#include "analysis/plot.h"
#include "analysis/style_gp.h"
#include "policy/policy.h"
#include "policy/presets.h"
#include "util/csv.h"
#include "util/files.h"
#include "util/json.h"
#include "util/util.h"

typedef dg_loop_sched run_sched;
typedef dg_loop_row row;
typedef dg_loop_rows rows;

/* one policy x schedule x density of the table */
typedef struct {
	char policy[DG_POLICY_NAME_MAX];
	char sched[DG_SCHED_DESC_MAX];
	run_sched rs; /* the schedule (of its first row's run) */
	double rho;
	int samples;
	double density, sparse_density;
	double est[3], lo[3], hi[3]; /* psnr, ssim, rel_l2 */
	double speedup, speed_density; /* NaN without a speed row */
	int speed_samples;
	bool projected; /* speedup from step costs (speed_stats), not a run of this very schedule */
	int reached; /* 0: a peer that cannot reach rho */
	char source[80]; /* where the method comes from */
} entry;

enum { COLS = 9 };
static const char *const need[COLS] = { "prompt", "seed", "policy", "density_target", "density",
					"psnr", "ssim", "transformer_s", "rel_l2" };

/* policy's refresh kind: DG_REFRESH_STEP for dense and for a name that is no policy spec (checked
 * for the spec alphabet first: a name from the input file never reaches the parser's messages) */
static dg_refresh_kind refresh_of(const char *policy)
{
	if (!strcmp(policy, "dense") || !*policy || strspn(policy, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
							 "0123456789-_/=.:;") != strlen(policy))
		return DG_REFRESH_STEP;
	dg_policy p;
	return dg_policy_parse(policy, &p) ? DG_REFRESH_STEP : p.refresh;
}

/* The schedule as it acts on policy into out[DG_SCHED_DESC_MAX]: "—" for dense; "wW" for a
 * refresh=step policy (anchors do not act on it); "wW once", "wW every:N" (anchors W-1, W-1+N, ...
 * to the last step) or "wW a=a;b;c" for refresh=anchor; " dl=K" for K dense layers. */
static void sched_desc(const char *policy, const run_sched *r, char *out)
{
	if (!strcmp(policy, "dense")) {
		snprintf(out, DG_SCHED_DESC_MAX, "—");
		return;
	}
	int n = snprintf(out, DG_SCHED_DESC_MAX, "w%d", r->warmup);
	if (refresh_of(policy) == DG_REFRESH_ANCHOR) {
		int step = r->nanchors > 1 ? r->anchors[1] - r->anchors[0] : 0;
		bool every = r->nanchors > 1 && r->anchors[0] == (r->warmup ? r->warmup - 1 : 0) &&
			     r->anchors[r->nanchors - 1] + step >= r->steps;
		for (int i = 1; i < r->nanchors && every; i++)
			every = r->anchors[i] - r->anchors[i - 1] == step;
		if (r->nanchors <= 1)
			n += snprintf(out + n, DG_SCHED_DESC_MAX - n, " once");
		else if (every)
			n += snprintf(out + n, DG_SCHED_DESC_MAX - n, " every:%d", step);
		else
			for (int i = 0; i < r->nanchors && n < DG_SCHED_DESC_MAX - 12; i++)
				n += snprintf(out + n, DG_SCHED_DESC_MAX - n, "%s%d", i ? ";" : " a=", r->anchors[i]);
	}
	for (int i = 0; i < r->ndense_layers && n < DG_SCHED_DESC_MAX - 12; i++)
		n += snprintf(out + n, DG_SCHED_DESC_MAX - n, "%s%d", i ? ";" : " dl=", r->dense_layers[i]);
}

/* the rows of RUN/closed_loop.csv into rs; the run's steps and warm-up checked against rs's; who: the
 * command named in a refusal. 0 or -1. */
int dg_loop_rows_read(const char *dir, dg_loop_rows *rs, const char *who)
{
	char *jp = dg_path_join(dir, "run.json"), *cp = dg_path_join(dir, "closed_loop.csv");
	int rc = -1;
	size_t jn = 0;
	char *js = dg_read_all(jp, 1 << 24, &jn), *csv = NULL;
	const char *why = NULL;
	int jline = 0;
	cJSON *j = js ? dg_json_parse(js, jn, &why, &jline) : NULL;
	if (!js) {
		dg_error("%s: cannot read %s: %s", who, jp, dg_strerror(errno));
		goto done;
	}
	if (!j) {
		if (jline)
			dg_error("%s: %s:%d: %s", who, jp, jline, why);
		else
			dg_error("%s: %s: %s", who, jp, why);
		goto done;
	}
	const cJSON *model = cJSON_GetObjectItemCaseSensitive(j, "model");
	const cJSON *sched = cJSON_GetObjectItemCaseSensitive(j, "schedule");
	const cJSON *steps = cJSON_GetObjectItemCaseSensitive(model, "steps");
	const cJSON *warm = cJSON_GetObjectItemCaseSensitive(sched, "warmup");
	const cJSON *anc = cJSON_GetObjectItemCaseSensitive(sched, "anchors");
	const cJSON *dl = cJSON_GetObjectItemCaseSensitive(sched, "dense_layers");
	const cJSON *dev = cJSON_GetObjectItemCaseSensitive(j, "device");
	if (!cJSON_IsNumber(steps) || !cJSON_IsNumber(warm)) {
		dg_error("%s: %s: not a closed-loop run.json (no model.steps or schedule.warmup)", who, jp);
		goto done;
	}
	if (steps->valuedouble != (double)steps->valueint || steps->valueint < 1 || steps->valueint > 100000 ||
	    warm->valuedouble != (double)warm->valueint || warm->valueint < 0 || warm->valueint >= steps->valueint) {
		dg_error("%s: %s: model.steps %g and schedule.warmup %g: expected integers, 0 <= warmup < steps", who,
			 jp, steps->valuedouble, warm->valuedouble);
		goto done;
	}
	if (rs->nruns && rs->steps != steps->valueint) {
		dg_error("%s: %s: %d steps, but an earlier run of the same set had %d (compare runs of one "
			 "step count together)", who, jp, steps->valueint, rs->steps);
		goto done;
	}
	run_sched rsc = { .steps = steps->valueint, .warmup = warm->valueint };
	struct stat st;
	if (stat(dir, &st) == 0) {
		rsc.dev = (unsigned long long)st.st_dev, rsc.ino = (unsigned long long)st.st_ino;
		for (int i = 0; i < rs->nruns; i++)
			if (rs->runs[i].dev == rsc.dev && rs->runs[i].ino == rsc.ino) {
				dg_error("%s: %s: the same run folder twice", who, dir);
				goto done;
			}
	}
	int na = cJSON_GetArraySize(anc), nd = cJSON_GetArraySize(dl);
	if (na > DG_SCHEDULE_MAX || nd > DG_SCHEDULE_MAX || (anc && !cJSON_IsArray(anc)) || (dl && !cJSON_IsArray(dl))) {
		dg_error("%s: %s: schedule.anchors or schedule.dense_layers is not a list of at most %d steps",
			 who, jp, DG_SCHEDULE_MAX);
		goto done;
	}
	for (int i = 0; i < na; i++) {
		const cJSON *a = cJSON_GetArrayItem(anc, i);
		if (!cJSON_IsNumber(a) || a->valueint < 0 || a->valueint >= rsc.steps ||
		    (i && a->valueint <= rsc.anchors[i - 1])) {
			dg_error("%s: %s: schedule.anchors[%d] is not a step of 0..%d in ascending order", who, jp, i,
				 rsc.steps - 1);
			goto done;
		}
		rsc.anchors[rsc.nanchors++] = a->valueint;
	}
	for (int i = 0; i < nd; i++) {
		const cJSON *a = cJSON_GetArrayItem(dl, i);
		if (!cJSON_IsNumber(a) || a->valueint < 0) {
			dg_error("%s: %s: schedule.dense_layers[%d] is not a layer number", who, jp, i);
			goto done;
		}
		rsc.dense_layers[rsc.ndense_layers++] = a->valueint;
	}
	rs->steps = steps->valueint;
	rs->warmup = !rs->nruns || rs->warmup == rsc.warmup ? rsc.warmup : -1;
	rs->runs = dg_realloc(rs->runs, (size_t)(rs->nruns + 1) * sizeof *rs->runs);
	rs->runs[rs->nruns++] = rsc;
	if (!*rs->device && cJSON_IsString(dev))
		snprintf(rs->device, sizeof rs->device, "%s", dev->valuestring);
	if (!(csv = dg_read_all(cp, 1 << 28, NULL))) {
		dg_error("%s: cannot read %s: %s", who, cp, dg_strerror(errno));
		goto done;
	}
	int col[COLS];
	char *line = csv, *next;
	int lineno = 0;
	for (; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		lineno++;
		char *f[32];
		int nf = dg_split(line, ',', f, 32);
		if (lineno == 1) {
			for (int c = 0; c < COLS; c++) {
				col[c] = -1;
				for (int i = 0; i < nf; i++)
					if (!strcmp(f[i], need[c]))
						col[c] = i;
				if (col[c] < 0) {
					dg_error("%s: %s: no column %s (a closed_loop.csv of dsgap run%s)", who, cp,
						 need[c], c == COLS - 1 ? " made since rel_l2 was added" : "");
					goto done;
				}
			}
			continue;
		}
		int maxc = 0;
		for (int c = 0; c < COLS; c++)
			maxc = col[c] > maxc ? col[c] : maxc;
		if (nf <= maxc) {
			dg_error("%s: %s:%d: %d fields, expected at least %d", who, cp, lineno, nf, maxc + 1);
			goto done;
		}
		if (rs->n == rs->cap)
			rs->r = dg_realloc(rs->r, (size_t)(rs->cap = rs->cap ? 2 * rs->cap : 256) * sizeof *rs->r);
		row *r = &rs->r[rs->n];
		snprintf(r->sample, sizeof r->sample, "%s/%s", f[col[0]], f[col[1]]);
		snprintf(r->policy, sizeof r->policy, "%s", f[col[2]]);
		if (dg_control_at(f[col[2]]) >= 0) {
			dg_error("%s: %s:%d: policy name with a control character", who, cp, lineno);
			goto done;
		}
		r->run = rs->nruns - 1;
		sched_desc(r->policy, &rs->runs[r->run], r->sched);
		double *v[] = { &r->rho, &r->density, &r->psnr, &r->ssim, &r->time, &r->rel_l2 };
		for (int k = 0; k < 6; k++) {
			char *e;
			*v[k] = strtod(f[col[k + 3]], &e);
			if (e == f[col[k + 3]] || *e) {
				dg_error("%s: %s:%d: %s '%s' is not a number", who, cp, lineno, need[k + 3],
					 f[col[k + 3]]);
				goto done;
			}
			/* rho (0, 1], density [0, 1], time finite and >= 0; PSNR not NaN (inf: equal to
			 * dense), SSIM and rel-L2 finite (closed_loop.sh compares per-sample differences of
			 * them too, which may be negative) */
			const double x = *v[k];
			const bool ok = k == 0 ? x > 0 && x <= 1 : k == 1 ? x >= 0 && x <= 1 + 1e-9 :
					k == 2 ? x >= -1e4 && (x <= 1e4 || x == INFINITY) : k == 3 ? fabs(x) <= 2 :
					k == 4 ? isfinite(x) && x >= 0 && x <= 1e12 : isfinite(x) && fabs(x) <= 1e18;
			if (!ok) {
				dg_error("%s: %s:%d: %s '%s' is out of range", who, cp, lineno, need[k + 3], f[col[k + 3]]);
				goto done;
			}
		}
		r->first_extra = NAN; /* the run's first sparse step's one-off cost for this policy */
		const cJSON *fe;
		cJSON_ArrayForEach(fe, cJSON_GetObjectItemCaseSensitive(j, "first_sparse_extra_s")) {
			const cJSON *fp = cJSON_GetObjectItemCaseSensitive(fe, "policy");
			const cJSON *fr = cJSON_GetObjectItemCaseSensitive(fe, "density_target");
			const cJSON *fs = cJSON_GetObjectItemCaseSensitive(fe, "seconds");
			if (!cJSON_IsString(fp) || !cJSON_IsNumber(fr) || !cJSON_IsNumber(fs) || !isfinite(fs->valuedouble) ||
			    fabs(fs->valuedouble) > 1e12) {
				dg_error("%s: %s: first_sparse_extra_s: an entry without policy, density_target and "
					 "finite seconds", who, jp);
				goto done;
			}
			if (!strcmp(fp->valuestring, r->policy) && fr->valuedouble == r->rho)
				r->first_extra = fs->valuedouble;
		}
		bool again = false; /* a sample counted twice would weigh twice */
		for (int i = 0; i < rs->n && !again; i++)
			again = !strcmp(rs->r[i].sample, r->sample) && !strcmp(rs->r[i].policy, r->policy) &&
				!strcmp(rs->r[i].sched, r->sched) && rs->r[i].rho == r->rho;
		bool same_run = false;
		for (int i = 0; i < rs->n && again && !same_run; i++)
			same_run = rs->r[i].run == r->run && !strcmp(rs->r[i].sample, r->sample) &&
				   !strcmp(rs->r[i].policy, r->policy) && rs->r[i].rho == r->rho;
		if (same_run) {
			dg_error("%s: %s:%d: sample %s of %s at %g again", who, cp, lineno, r->sample, r->policy, r->rho);
			goto done;
		}
		if (again) { /* the dense reference of every run, or a policy that does not read the
			      * anchors under two schedules that differ only in them: counted once */
			rs->repeated++;
			continue;
		}
		rs->n++;
	}
	if (lineno < 2) {
		dg_error("%s: %s: no rows", who, cp);
		goto done;
	}
	rc = 0;
done:
	cJSON_Delete(j);
	free(js), free(csv), free(jp), free(cp);
	return rc;
}

static int find_entry(entry *e, int n, const char *policy, const char *sched, double rho)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(e[i].policy, policy) && !strcmp(e[i].sched, sched) && e[i].rho == rho)
			return i;
	return -1;
}

static int find_sample(char (*s)[160], int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(s[i], name))
			return i;
	return -1;
}

static const char *source_name(const dg_preset *p)
{
	if (!p)
		return "custom";
	switch (p->family) {
	case DG_FAMILY_DENSE: return "reference";
	case DG_FAMILY_FACTORIAL: return "MC-Sparse";
	case DG_FAMILY_PEER: return p->method;
	case DG_FAMILY_LADDER:
		return !strcmp(p->name, "est-block") ? "block-sparse (FlexAttention-style)" : "oracle";
	default: return "custom";
	}
}

/* where a method comes from, for the table: a peer's paper (its name without the section) */
static void source_of(const char *policy, char *out, size_t size)
{
	const dg_preset *p = dg_preset_of_spec(policy);
	const char *s = source_name(p);
	const char *sec = strstr(s, " (§");
	snprintf(out, size, "%.*s", sec ? (int)(sec - s) : (int)strlen(s), s);
}

static bool is_peer(const char *policy)
{
	const dg_preset *p = dg_preset_of_spec(policy);
	return p && p->family == DG_FAMILY_PEER;
}

static int n_stat;
static void copy_stat(const double *E, double *q)
{
	memcpy(q, E, (size_t)n_stat * sizeof *q);
}

/* statistic k (0 psnr, 1 ssim, 2 rel_l2) of every entry per sample: sum and count (ne, ns) */
static void sample_table(const rows *rs, const entry *e, int ne, int k, double **sum, double **cnt, int *nsamples)
{
	char(*samples)[160] = dg_malloc((size_t)rs->n * sizeof *samples);
	int ns = 0;
	for (int i = 0; i < rs->n; i++)
		if (find_sample(samples, ns, rs->r[i].sample) < 0)
			snprintf(samples[ns++], 160, "%s", rs->r[i].sample);
	*sum = dg_calloc((size_t)ne * ns, sizeof **sum), *cnt = dg_calloc((size_t)ne * ns, sizeof **cnt);
	for (int i = 0; i < rs->n; i++) {
		const row *r = &rs->r[i];
		int p = find_entry((entry *)e, ne, r->policy, r->sched, r->rho), c = find_sample(samples, ns, r->sample);
		double v = k == 0 ? r->psnr : k == 1 ? r->ssim : r->rel_l2;
		(*sum)[(size_t)p * ns + c] += v, (*cnt)[(size_t)p * ns + c] += 1;
	}
	free(samples);
	*nsamples = ns;
}

/* statistic fn of the entries' means over the samples, with 95% bootstrap intervals (samples
 * resampled, paired across entries): est, lo, hi (n_q each) */
static void boot_samples(const rows *rs, const entry *e, int ne, int k, dg_boot_stat_fn fn, int n_q, int boot,
			 unsigned long seed, double *est, double *lo, double *hi)
{
	double *sum, *cnt;
	int ns;
	sample_table(rs, e, ne, k, &sum, &cnt, &ns);
	int *member = dg_malloc((size_t)ns * sizeof *member);
	for (int c = 0; c < ns; c++)
		member[c] = c;
	dg_boot_data d = { .n_pol = ne, .n_clusters = ns, .sum = sum, .count = cnt, .member = member,
			   .n_member = ns };
	dg_boot_stat(&d, fn, n_q, boot, seed, est, lo, hi);
	free(member), free(sum), free(cnt);
}

/* means over the samples of statistic k (0 psnr, 1 ssim, 2 rel_l2) of every entry, with intervals */
static void fidelity_stats(const rows *rs, entry *e, int ne, int k, int boot, unsigned long seed)
{
	double *est = dg_malloc((size_t)ne * 3 * sizeof *est);
	n_stat = ne;
	boot_samples(rs, e, ne, k, copy_stat, ne, boot, seed, est, est + ne, est + 2 * ne);
	for (int p = 0; p < ne; p++)
		e[p].est[k] = est[p], e[p].lo[k] = est[ne + p], e[p].hi[k] = est[2 * ne + p];
	free(est);
}

static int pair_a, pair_b;
static void pair_stat(const double *E, double *q)
{
	q[0] = E[pair_a] - E[pair_b];
}

/* the steps of schedule r as a policy sees them: *nd dense (warm-up steps that are not anchors),
 * *na anchors (dense + metadata; refresh=anchor only), *ns sparse */
static void step_counts(const run_sched *r, bool cached, int *nd, int *na, int *ns)
{
	int early = 0;
	for (int i = 0; i < r->nanchors; i++)
		early += r->anchors[i] < r->warmup;
	*na = cached ? r->nanchors : 0;
	*nd = r->warmup - (cached ? early : 0);
	*ns = r->steps - *nd - *na;
}

static bool is_cached(const char *policy)
{
	return refresh_of(policy) == DG_REFRESH_ANCHOR;
}

/*
 * Least squares for the step costs of one policy at one density (speed_stats): the rows are the
 * speed runs j of it, y_j = T_j - nd_j t_d, the columns na_j (cached policies only), ns_j and
 * ns_j * dl_j (when some run has dense layers: the extra cost of one dense layer in a sparse step).
 * cost[] gets t_a, t_s, t_l (0 for a column left out). False where the columns are not separated
 * (e.g. one anchor share only: the anchor's and the sparse step's costs are one unknown).
 */
static bool fit_step_costs(int nrun, const int *na, const int *ns, const int *dl, const double *y,
			   bool cached, double cost[3])
{
	bool layers = false;
	for (int j = 0; j < nrun; j++)
		layers = layers || (dl[j] && ns[j]);
	const size_t p = (size_t)cached + 1 + layers;
	cost[0] = cost[1] = cost[2] = 0;
	if (nrun < (int)p)
		return false;
	gsl_matrix *X = gsl_matrix_alloc((size_t)nrun, p), *cov = gsl_matrix_alloc(p, p);
	gsl_vector *Y = gsl_vector_alloc((size_t)nrun), *c = gsl_vector_alloc(p);
	gsl_multifit_linear_workspace *w = gsl_multifit_linear_alloc((size_t)nrun, p);
	for (int j = 0; j < nrun; j++) {
		size_t k = 0;
		if (cached)
			gsl_matrix_set(X, (size_t)j, k++, na[j]);
		gsl_matrix_set(X, (size_t)j, k++, ns[j]);
		if (layers)
			gsl_matrix_set(X, (size_t)j, k, (double)ns[j] * dl[j]);
		gsl_vector_set(Y, (size_t)j, y[j]);
	}
	double chisq;
	size_t rank = 0;
	gsl_error_handler_t *old = gsl_set_error_handler_off();
	int st = gsl_multifit_linear_tsvd(X, Y, 1e-9, c, cov, &chisq, &rank, w);
	gsl_set_error_handler(old);
	bool ok = !st && rank == p;
	if (ok) {
		size_t k = 0;
		cost[0] = cached ? gsl_vector_get(c, k++) : 0;
		cost[1] = gsl_vector_get(c, k++);
		cost[2] = layers ? gsl_vector_get(c, k) : NAN; /* NaN: no run measured a dense layer */
	}
	gsl_multifit_linear_free(w), gsl_vector_free(c), gsl_vector_free(Y), gsl_matrix_free(cov), gsl_matrix_free(X);
	return ok;
}

/*
 * Speedup of every entry: dense time / the entry's time of the denoising loop.
 *   own (no speed runs): the fidelity runs' own times, mean over the entry's samples.
 *   speed runs: a speed row of the entry's very schedule (same steps and sched_desc) is used as
 *   measured; otherwise the entry's time is projected from step costs fitted to the speed runs:
 *   t_d = dense time / steps; per policy and density, each speed run j of it gives
 *   T_j - nd_j t_d = na_j t_a + ns_j (t_s + dl_j t_l) (step_counts; dl_j its dense layers), solved
 *   by least squares (fit_step_costs) for the anchor step's cost t_a, the sparse step's t_s and a
 *   dense layer's extra cost in a sparse step t_l (t_a only for refresh=anchor policies, which
 *   need two schedules of different anchor shares; t_l only where a speed run has dense layers,
 *   which an entry with dense layers needs); the entry's time is then nd t_d + na t_a +
 *   ns (t_s + dl t_l) at its own steps, else NaN. A refresh=step policy's first sparse step may cost
 *   more once (svg2's first k-means; later calls start from the last centroids): where the speed
 *   run's run.json gives that extra (first_sparse_extra_s, from the cells' step times), it is taken
 *   out of T_j before the fit and added once to the projection.
 */
static int speed_stats(const rows *sp, entry *e, int ne, bool own)
{
	double dense_t = 0;
	int dense_n = 0;
	for (int i = 0; i < sp->n; i++)
		if (!strcmp(sp->r[i].policy, "dense"))
			dense_t += sp->r[i].time, dense_n++;
	if (!dense_n)
		return dg_error("compare: the speed runs have no dense rows");
	dense_t /= dense_n;
	const double td = dense_t / sp->steps;
	const int nr = sp->nruns + 1;
	double *tj = dg_malloc((size_t)nr * sizeof *tj), *y = dg_malloc((size_t)nr * sizeof *y);
	double *xj = dg_malloc((size_t)nr * sizeof *xj); /* first sparse step's extra, summed */
	int *xn = dg_malloc((size_t)nr * sizeof *xn);
	int *nj = dg_malloc((size_t)nr * sizeof *nj), *fa = dg_malloc((size_t)nr * 3 * sizeof *fa);
	int *fs = fa + nr, *fl = fa + 2 * nr;
	for (int p = 0; p < ne; p++) {
		entry *x = &e[p];
		x->speedup = x->speed_density = NAN, x->speed_samples = 0, x->projected = false;
		if (!strcmp(x->policy, "dense")) {
			x->speedup = 1, x->speed_samples = dense_n;
			continue;
		}
		double t = 0, dn = 0, dall = 0;
		int n = 0, nall = 0;
		memset(tj, 0, (size_t)sp->nruns * sizeof *tj), memset(nj, 0, (size_t)sp->nruns * sizeof *nj);
		memset(xj, 0, (size_t)sp->nruns * sizeof *xj), memset(xn, 0, (size_t)sp->nruns * sizeof *xn);
		for (int i = 0; i < sp->n; i++) {
			const row *r = &sp->r[i];
			if (strcmp(r->policy, x->policy) || r->rho != x->rho)
				continue;
			tj[r->run] += r->time, nj[r->run]++, dall += r->density, nall++;
			if (isfinite(r->first_extra))
				xj[r->run] += r->first_extra, xn[r->run]++;
			if ((own || sp->steps == x->rs.steps) && !strcmp(r->sched, x->sched))
				t += r->time, dn += r->density, n++;
		}
		if (n) { /* measured at this very schedule */
			x->speed_samples = n;
			x->speedup = dense_t / (t / n);
			x->speed_density = dn / n;
			continue;
		}
		if (own || !nall)
			continue;
		bool cached = is_cached(x->policy);
		int nfit = 0, nfirst = 0;
		double first = 0; /* a per-step policy's one-off first sparse step (svg2's first k-means) */
		for (int j = 0; j < sp->nruns; j++) {
			if (!nj[j])
				continue;
			int nd;
			step_counts(&sp->runs[j], cached, &nd, &fa[nfit], &fs[nfit]);
			fl[nfit] = sp->runs[j].ndense_layers;
			double ex = !cached && xn[j] && fs[nfit] > 0 ? xj[j] / xn[j] : 0;
			first += ex, nfirst += ex != 0;
			y[nfit++] = tj[j] / nj[j] - nd * td - ex;
		}
		first = nfirst ? first / nfirst : 0;
		double cost[3];
		if (!fit_step_costs(nfit, fa, fs, fl, y, cached, cost))
			continue;
		int nd, na, ns;
		step_counts(&x->rs, cached, &nd, &na, &ns);
		double tp = nd * td + na * cost[0] + ns * cost[1] + (ns > 0 ? first : 0);
		if (x->rs.ndense_layers)
			tp += (double)ns * x->rs.ndense_layers * cost[2];
		if (!(tp > 0))
			continue;
		x->speedup = x->rs.steps * td / tp;
		x->speed_density = dall / nall;
		x->speed_samples = nall;
		x->projected = true;
	}
	free(tj), free(y), free(nj), free(fa), free(xj), free(xn);
	return 0;
}

static void write_csv(FILE *f, const entry *e, int ne)
{
	fprintf(f, "policy,source,density_target,samples,density,sparse_density,reached,psnr,psnr_lo,psnr_hi,"
		   "ssim,ssim_lo,ssim_hi,rel_l2,rel_l2_lo,rel_l2_hi,speedup,speed_density,speed_samples,schedule,"
		   "steps,warmup,anchors,speed_projected\n");
	for (int p = 0; p < ne; p++) {
		const entry *x = &e[p];
		fprintf(f, "%s,", x->policy);
		dg_csv_field(f, x->source);
		fprintf(f, ",%g,%d,%.6g,%.6g,%d,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%d,", x->rho,
			x->samples, x->density, x->sparse_density, x->reached, x->est[0], x->lo[0], x->hi[0],
			x->est[1], x->lo[1], x->hi[1], x->est[2], x->lo[2], x->hi[2], x->speedup, x->speed_density,
			x->speed_samples);
		dg_csv_field(f, x->sched);
		fprintf(f, ",%d,%d,%d,%d\n", x->rs.steps, x->rs.warmup, is_cached(x->policy) ? x->rs.nanchors : 0,
			x->projected);
	}
}

static void write_md(FILE *f, const entry *e, int ne, const dg_compare_opts *o, const rows *fid,
		     const rows *sp, double tol)
{
	fprintf(f, "# Comparison: every method's fidelity and speed (%s)\n\n", o->title);
	fprintf(f, "Fidelity: closed loop over %s (device: %s); means over the samples of PSNR (dB), SSIM and "
		   "rel-L2 of the final latents against the dense run of the same sample, with 95%% percentile "
		   "bootstrap intervals over the samples (%d replicates, seed %lu, paired across methods). "
		   "Schedule (%d steps): `wW` W warm-up steps (dense); for a method with cached metadata its "
		   "anchors, `once` (step W−1), `every:N` (W−1, W−1+N, … to the last step) or a list; `dl=` "
		   "dense layers. Density: computed pairs / N² over every self-attention call (warm-up and "
		   "anchors included); sparse: over the calls past the warm-up. ",
		o->title, fid->device, o->boot, o->seed, fid->steps);
	if (sp->n)
		fprintf(f, "Speedup: the denoising loop's transformer time, dense / method, of the speed run "
			   "(%d steps; device: %s); ᵖ: projected to the row's schedule from the step costs fitted to "
			   "the speed runs (dense step, anchor step, sparse step, a per-step method's first sparse step "
			   "once: `dsgap compare --help`). ",
			sp->steps, sp->device);
	else
		fprintf(f, "Speedup: the fidelity runs' own transformer times (dense / method). ");
	fprintf(f, "A peer whose sparse density is more than %.2g from the target cannot reach it: no fidelity "
		   "is given for it (its sparse calls: past the warm-up and, for cached metadata, its anchors' dense calls "
		   "excluded). Speedup — : no speed run at that density. Numbers to 3 significant "
		   "figures.\n\n", tol);
	fprintf(f, "| method | schedule | source | target ρ | samples | density | sparse density | PSNR | 95%% CI | "
		   "SSIM | 95%% CI | rel-L2 | 95%% CI | speedup |\n");
	fprintf(f, "|:--|:--|:--|--:|--:|--:|--:|--:|:-:|--:|:-:|--:|:-:|--:|\n");
	for (int p = 0; p < ne; p++) {
		const entry *x = &e[p];
		char a[32], b[32], c[32], d[32], g[32], h[32], k[32], l[32], m[32], s[32], t[32];
		fprintf(f, "| `%s` | %s | %s | %g | %d | %s | %s | ", x->policy, x->sched, x->source, x->rho, x->samples,
			dg_sig3(a, x->density), dg_sig3(b, x->sparse_density));
		if (!x->reached)
			fprintf(f, "cannot reach ρ | — | — | — | — | — | ");
		else if (!strcmp(x->policy, "dense"))
			fprintf(f, "inf (reference) | — | 1 | — | 0 | — | ");
		else
			fprintf(f, "%s | [%s, %s] | %s | [%s, %s] | %s | [%s, %s] | ", dg_sig3(c, x->est[0]),
				dg_sig3(d, x->lo[0]), dg_sig3(g, x->hi[0]), dg_sig3(h, x->est[1]), dg_sig3(k, x->lo[1]),
				dg_sig3(l, x->hi[1]), dg_sig3(m, x->est[2]), dg_sig3(s, x->lo[2]), dg_sig3(t, x->hi[2]));
		if (isnan(x->speedup))
			fputs("— |\n", f);
		else
			fprintf(f, "%s×%s |\n", dg_sig3(a, x->speedup), x->projected ? "ᵖ" : "");
	}
}

/* A table* (the page of a two-column paper, issue 49): the PSNR's interval under it in small type,
 * so that the table fits 7 in without \resizebox. */
static void write_tex(FILE *f, const entry *e, int ne, const dg_compare_opts *o)
{
	fprintf(f, "%% comparison.tex: made by dsgap compare (commit %s). Needs \\usepackage{booktabs}.\n"
		   "\\begin{table*}[t]\n\\centering\n\\small\n\\caption{Every method at each target density: "
		   "fidelity of the final latents against dense (", dg_git_commit());
	dg_tex_name(f, o->title);
	fprintf(f, "; means over the $n$ samples, under the PSNR its 95\\%% bootstrap interval; 3 significant "
		   "figures), computed density over the sparse calls past the warm-up, and the measured speedup "
		   "of the denoising loop.}\n"
		   "\\label{tab:comparison}\n\\begin{tabular}{llrrrrrr}\n\\toprule\nMethod & Schedule & $\\rho$ & $n$ & "
		   "Density & PSNR & SSIM & Speedup \\\\\n\\midrule\n");
	for (int p = 0; p < ne; p++) {
		const entry *x = &e[p];
		char a[32], b[32], c[32], d[32], g[32], h[32];
		fputs("\\texttt{", f);
		dg_tex_name(f, x->policy);
		fputs("} & ", f);
		if (strcmp(x->sched, "—")) { /* the source is in comparison.md and .csv */
			fputs("{\\scriptsize ", f);
			dg_tex_name(f, x->sched);
			fputs("}", f);
		} else {
			fputs("---", f);
		}
		fprintf(f, " & %g & %d & $%s$ & ", x->rho, x->samples, dg_sig3(a, x->sparse_density));
		if (!x->reached)
			fputs("\\multicolumn{2}{l}{cannot reach $\\rho$}", f);
		else if (!strcmp(x->policy, "dense"))
			fputs("$\\infty$ & $1$", f);
		else
			fprintf(f, "\\begin{tabular}[t]{@{}r@{}}$%s$\\\\{\\scriptsize$[%s, %s]$}\\end{tabular} & $%s$",
				dg_sig3(b, x->est[0]), dg_sig3(c, x->lo[0]), dg_sig3(d, x->hi[0]),
				dg_sig3(g, x->est[1]));
		if (isnan(x->speedup))
			fputs(" & --- \\\\\n", f);
		else
			fprintf(f, " & $%s%s$ \\\\\n", dg_sig3(h, x->speedup), x->projected ? "^p" : "");
	}
	fputs("\\bottomrule\n\\end{tabular}\n\\end{table*}\n", f);
}

/* sched written short into out (size n > 0): "every:10" as "e10", "—" as nothing, the leading
 * warm-up "wW " left out when drop_warmup; returns its length */
static int sched_short(const char *sched, bool drop_warmup, char *out, size_t n)
{
	const char *sd = strcmp(sched, "—") ? sched : "";
	if (drop_warmup && sd[0] == 'w')
		sd += strcspn(sd, " "), sd += *sd == ' ';
	size_t k = 0;
	for (; *sd && k + 1 < n; sd++)
		if (!strncmp(sd, "every:", 6))
			out[k++] = 'e', sd += 5;
		else
			out[k++] = *sd;
	out[k] = 0;
	return (int)k;
}

/* pareto.dat: one block per method (its points by density), then the frontier block; pareto.gp;
 * speed_device: the speed runs' device (the x axis names it), NULL for the fidelity runs' own times */
static void write_figure(FILE *dat, FILE *gp, const entry *e, int ne, const dg_compare_opts *o,
			 const char *speed_device, int *nmethods)
{
	fprintf(dat, "# pareto.dat: made by dsgap compare (commit %s): %s\n# columns: speedup psnr psnr_lo "
		     "psnr_hi sparse_density density_target label label_y (moved down where labels would overlap); one "
		     "block per method, then the frontier\n",
		dg_git_commit(), o->title);
	const char *methods[128];
	int nm = 0;
	for (int p = 0; p < ne; p++) {
		const entry *x = &e[p];
		if (!x->reached || !strcmp(x->policy, "dense") || isnan(x->speedup) || !isfinite(x->est[0]))
			continue;
		int m = 0;
		while (m < nm && strcmp(methods[m], x->policy))
			m++;
		if (m == nm && nm < 128)
			methods[nm++] = x->policy;
	}
	bool one_warmup = true, projected = false;
	double xmax = 0, ylo = INFINITY, yhi = -INFINITY; /* the plotted points' extent */
	for (int p = 0; p < ne; p++) {
		one_warmup = one_warmup && e[p].rs.warmup == e[0].rs.warmup;
		projected = projected || (e[p].projected && !isnan(e[p].speedup));
		if (e[p].reached && strcmp(e[p].policy, "dense") && !isnan(e[p].speedup) && isfinite(e[p].est[0]))
			xmax = fmax(xmax, e[p].speedup), ylo = fmin(ylo, e[p].est[0]), yhi = fmax(yhi, e[p].est[0]);
	}
	/* labels placed so far, as boxes in data units (x0, x1, y of the text's middle), from the
	 * plot's placements (method m % 3: offset 0.6 characters right and 0.6 up, left-aligned; 0.6
	 * left and up, right-aligned; 0.6 right and 0.8 down; an offset character is the default
	 * font's) and the PNG's sizes, measured on it: an offset character about 1/200 of the x span
	 * and 1/17 of the y span, a label's character 1/270 of the x span, its line 1/40 of the y span
	 * (spans: the axes' extents with their margins). A label that would cover one moves to the
	 * nearest line where it covers none (column 8: the label's y). */
	double (*placed)[3] = dg_calloc((size_t)ne + 1, sizeof *placed);
	int np = 0;
	const double xspan = (xmax > 0 ? xmax : 1) * 1.25, yspan = yhi > ylo ? (yhi - ylo) * 1.2 : 1;
	const double hx = xspan / 200, vy = yspan / 17, ch = xspan / 270, line = yspan / 40;
	for (int m = 0; m < nm; m++) {
		fprintf(dat, "# method %s\n", methods[m]);
		for (int p = 0; p < ne; p++) {
			const entry *x = &e[p];
			if (strcmp(x->policy, methods[m]) || !x->reached || isnan(x->speedup) || !isfinite(x->est[0]))
				continue;
			/* the label: the schedule short (the warm-up left out when every plotted row shares
			 * it) and the density over every call */
			char lab[DG_SCHED_DESC_MAX + 16];
			int k = sched_short(x->sched, one_warmup, lab, DG_SCHED_DESC_MAX);
			snprintf(lab + k, sizeof lab - k, "%s%.2f", k ? " " : "", x->density);
			const int c = m % 3;
			const double w = (double)strlen(lab) * ch, up = c == 2 ? -0.8 * vy : 0.6 * vy;
			const double x0 = c == 1 ? x->speedup - 0.6 * hx - w : x->speedup + 0.6 * hx, x1 = x0 + w;
			/* the nearest free place: a line down, up, two down, two up, else its own */
			double ly = x->est[0];
			for (int t = 0; t <= 4; t++) {
				const double cand = x->est[0] + (t % 2 ? -1 : 1) * ((t + 1) / 2) * line;
				bool free_here = true;
				for (int q = 0; q < np && free_here; q++)
					free_here = !(x0 < placed[q][1] && placed[q][0] < x1 &&
						      fabs(placed[q][2] - (cand + up)) < line * 0.99);
				if (free_here) {
					ly = cand;
					break;
				}
			}
			placed[np][0] = x0, placed[np][1] = x1, placed[np++][2] = ly + up;
			fprintf(dat, "%.6g %.6g %.6g %.6g %.3f %g \"%s\" %.6g\n", x->speedup, x->est[0], x->lo[0],
				x->hi[0], x->sparse_density, x->rho, lab, ly);
		}
		fputs("\n\n", dat);
	}
	free(placed);
	/* the frontier: a point is on it when no other point is at least as fast and at least as good */
	fputs("# frontier (non-dominated points by speedup and PSNR), by speedup\n", dat);
	int *on = dg_calloc((size_t)ne, sizeof *on), non = 0;
	for (int p = 0; p < ne; p++) {
		const entry *x = &e[p];
		bool ok = x->reached && strcmp(x->policy, "dense") && !isnan(x->speedup) && isfinite(x->est[0]);
		for (int q = 0; ok && q < ne; q++) {
			const entry *y = &e[q];
			if (q == p || !y->reached || !strcmp(y->policy, "dense") || isnan(y->speedup) || !isfinite(y->est[0]))
				continue;
			if (y->speedup >= x->speedup && y->est[0] >= x->est[0] &&
			    (y->speedup > x->speedup || y->est[0] > x->est[0]))
				ok = false;
		}
		if (ok)
			on[non++] = p;
	}
	for (int i = 1; i < non; i++) /* by speedup (insertion sort) */
		for (int j = i; j > 0 && e[on[j]].speedup < e[on[j - 1]].speedup; j--) {
			int t = on[j];
			on[j] = on[j - 1], on[j - 1] = t;
		}
	for (int i = 0; i < non; i++)
		fprintf(dat, "%.6g %.6g\n", e[on[i]].speedup, e[on[i]].est[0]);
	free(on);

	int rows = (nm + 3) / 4;
	fprintf(gp, "# pareto.gp: made by dsgap compare (commit %s): %s\n"
		    "# re-render inside this directory: gnuplot pareto.gp   (writes pareto.pdf and pareto.png)\n"
		    "load 'style.gp'\n"
		    "do for [fmt in \"pdf png\"] {\n"
		    "if (fmt eq \"pdf\") { set terminal pdfcairo size 6.5in,4.6in font 'Liberation Sans,8' } "
		    "else { set terminal pngcairo size 1950,1380 font 'Liberation Sans,8' fontscale 3 linewidth 2 }\n"
		    "set output 'pareto.'.fmt\n",
		dg_git_commit(), o->title);
	fputs("set title ", gp);
	dg_gp_string(gp, o->title);
	fputs(projected ? ".': fidelity against speedup' noenhanced\nset xlabel 'speedup over dense, projected from "
			  "measured step costs ('." :
			  ".': fidelity against measured speedup' noenhanced\nset xlabel 'measured speedup of the "
			  "denoising loop over dense ('.", gp);
	dg_gp_string(gp, speed_device ? speed_device : "the times of the fidelity runs themselves");
	fprintf(gp, "%s noenhanced\n"
		    "set ylabel 'PSNR of the final latents against dense (dB), 95%% CI over samples' noenhanced\n"
		    "set bmargin %d\n"
		    "set key at screen 0.5, screen 0.01 center bottom horizontal maxrows %d Left reverse noenhanced "
		    "font ',7' samplen 2 width 1\n"
		    "set offsets graph 0, graph 0.12, graph 0.05, graph 0.05\n"
		    "set xrange [0:*]\n"
		    "set arrow from 1, graph 0 to 1, graph 1 nohead ls 9 dt 3\n"
		    "set label 'dense (1x)' at 1, graph 0.97 left offset 0.5, 0 font ',7' textcolor rgb '#666666'\n",
		".')'", rows * 3 / 2 + 6, rows);
	fputs("plot ", gp);
	for (int m = 0; m < nm; m++) {
		fprintf(gp, "%s'pareto.dat' index %d using 1:2:3:4 with yerrorbars ls %d ps 1.4 title ",
			m ? ", \\\n  " : "", m, m % 15 + 1);
		dg_gp_string(gp, methods[m]); /* a name from the input file: quoted, never code */
		fprintf(gp, ", \\\n  '' index %d using 1:8:7 with labels offset %s "  /* three placements by method */
			    "font ',6' textcolor rgb '#444444' notitle", m, m % 3 == 1 ? "-0.6, 0.6 right" : m % 3 == 2 ? "0.6, -0.8 left" : "0.6, 0.6 left");
	}
	fprintf(gp, "%s'pareto.dat' index %d using 1:2 with lines ls 8 dt 2 lw 1 title 'frontier (labels: "
		    "schedule, density)'\nunset output\n}\n", nm ? ", \\\n  " : "", nm);
	*nmethods = nm;
}

/* matched cost: kind 0 "speedup >= t", kind 1 "density over every call <= t" */
static bool qualifies(const entry *x, int kind, double t)
{
	if (!x->reached || !strcmp(x->policy, "dense") || isnan(x->est[0]))
		return false;
	/* densities are compared at the tables' precision (3 figures): 0.4003 counts as 0.400 */
	return kind == 0 ? isfinite(x->speedup) && x->speedup >= t - 5e-4 : x->density <= t + 5e-4;
}

/* the entry of best PSNR of policy (any when NULL) that qualifies, or -1; skip: a policy left out */
static int best_of(const entry *e, int ne, const char *policy, const char *skip, int kind, double t)
{
	int b = -1;
	for (int p = 0; p < ne; p++)
		if ((!policy || !strcmp(e[p].policy, policy)) && (!skip || strcmp(e[p].policy, skip)) &&
		    qualifies(&e[p], kind, t) && (b < 0 || e[p].est[0] > e[b].est[0]))
			b = p;
	return b;
}

/* the methods of the table (policy names but dense, in table order) into m; their number */
static int methods_of(const entry *e, int ne, const char **m)
{
	int nm = 0;
	for (int p = 0; p < ne; p++) {
		int i = 0;
		while (i < nm && strcmp(m[i], e[p].policy))
			i++;
		if (i == nm && strcmp(e[p].policy, "dense"))
			m[nm++] = e[p].policy;
	}
	return nm;
}

typedef struct {
	int best, next;           /* the best entry, the best entry of another method (-1: none) */
	double d, d_lo, d_hi;     /* the paired PSNR difference best - next over the samples */
} matched_col;

static void matched_cols(const rows *fid, const entry *e, int ne, int kind, const double *t, int nt,
			 const dg_compare_opts *o, matched_col *c)
{
	for (int i = 0; i < nt; i++) {
		c[i].best = best_of(e, ne, NULL, NULL, kind, t[i]);
		c[i].next = c[i].best < 0 ? -1 : best_of(e, ne, NULL, e[c[i].best].policy, kind, t[i]);
		c[i].d = c[i].d_lo = c[i].d_hi = NAN;
		if (c[i].next >= 0) {
			pair_a = c[i].best, pair_b = c[i].next;
			boot_samples(fid, e, ne, 0, pair_stat, 1, o->boot, o->seed, &c[i].d, &c[i].d_lo, &c[i].d_hi);
		}
	}
}

static const char *const matched_kind[2] = { "speedup", "density" };

static void matched_csv(FILE *f, const entry *e, int ne, const char **m, int nm, int kind, const double *t,
			int nt, const matched_col *c)
{
	for (int i = 0; i < nt; i++)
		for (int k = 0; k < nm; k++) {
			int b = best_of(e, ne, m[k], NULL, kind, t[i]);
			if (b < 0)
				continue;
			const entry *x = &e[b];
			fprintf(f, "%s,%g,%s,", matched_kind[kind], t[i], x->policy);
			dg_csv_field(f, x->sched);
			bool top = b == c[i].best;
			fprintf(f, ",%g,%.6g,%.6g,%.6g,%d,%.6g,%.6g,%.6g,%d,%.6g,%.6g,%.6g\n", x->rho, x->density,
				x->sparse_density, x->speedup, x->projected, x->est[0], x->lo[0], x->hi[0], top,
				top ? c[i].d : NAN, top ? c[i].d_lo : NAN, top ? c[i].d_hi : NAN);
		}
}

static void matched_md(FILE *f, const entry *e, int ne, const char **m, int nm, int kind, const double *t,
		       int nt, const matched_col *c)
{
	char a[32], b[32], d[32], g[32], h[32];
	fprintf(f, "| method |");
	for (int i = 0; i < nt; i++)
		fprintf(f, kind == 0 ? " speedup ≥ %s× |" : " density ≤ %s |", dg_sig3(a, t[i]));
	fputs("\n|:--|", f);
	for (int i = 0; i < nt; i++)
		fputs(":--|", f);
	fputc('\n', f);
	for (int k = 0; k < nm; k++) {
		fprintf(f, "| `%s` |", m[k]);
		for (int i = 0; i < nt; i++) {
			int p = best_of(e, ne, m[k], NULL, kind, t[i]);
			if (p < 0) {
				fputs(" — |", f);
				continue;
			}
			const entry *x = &e[p];
			const char *bold = p == c[i].best ? "**" : "";
			fprintf(f, " %s%s%s [%s, %s] %s, ρ %g, density %s, ", bold, dg_sig3(a, x->est[0]), bold,
				dg_sig3(b, x->lo[0]), dg_sig3(d, x->hi[0]), x->sched, x->rho, dg_sig3(g, x->density));
			if (isnan(x->speedup))
				fputs("speed not measured |", f);
			else
				fprintf(f, "%s×%s |", dg_sig3(h, x->speedup), x->projected ? "ᵖ" : "");
		}
		fputc('\n', f);
	}
	fputs("| best − next method (paired) |", f);
	for (int i = 0; i < nt; i++) {
		if (c[i].next < 0)
			fputs(" — |", f);
		else
			fprintf(f, " %s [%s, %s] dB (`%s` over `%s`) |", dg_sig3(a, c[i].d), dg_sig3(b, c[i].d_lo),
				dg_sig3(d, c[i].d_hi), e[c[i].best].policy, e[c[i].next].policy);
	}
	fputs("\n\n", f);
}

static void matched_tex(FILE *f, const entry *e, int ne, const char **m, int nm, int kind, const double *t,
			int nt, const matched_col *c, const dg_compare_opts *o)
{
	char a[32], b[32], d[32];
	fprintf(f, "\\begin{table*}[t]\n\\centering\n\\small\n\\caption{Matched %s: each method's best PSNR (dB, "
		   "95\\%% bootstrap interval over the samples) among its schedules and densities at %s (", kind == 0 ?
		   "speed" : "computed density", kind == 0 ? "a measured or projected ($^p$) speedup of at least the "
		   "column's" : "a computed density over every call of at most the column's");
	dg_tex_name(f, o->title);
	fprintf(f, "); schedules: w$W$ $W$ warm-up steps, e$N$ an anchor every $N$ steps, dl= dense layers; the "
		   "last row: the paired difference of the best method over the next.}\n\\label{tab:matched-%s}\n"
		   "\\begin{tabular}{l", matched_kind[kind]);
	for (int i = 0; i < nt; i++)
		fputs("l", f);
	fputs("}\n\\toprule\nMethod", f);
	for (int i = 0; i < nt; i++)
		fprintf(f, kind == 0 ? " & $\\geq %s\\times$" : " & $\\leq %s$", dg_sig3(a, t[i]));
	fputs(" \\\\\n\\midrule\n", f);
	for (int k = 0; k < nm; k++) {
		fputs("\\texttt{", f);
		dg_tex_name(f, m[k]);
		fputs("}", f);
		for (int i = 0; i < nt; i++) {
			int p = best_of(e, ne, m[k], NULL, kind, t[i]);
			if (p < 0) {
				fputs(" & ---", f);
				continue;
			}
			const entry *x = &e[p];
			/* a cell of three lines: PSNR, its interval, schedule and rho */
			fprintf(f, " & \\begin{tabular}[t]{@{}l@{}}%s$%s$%s\\\\{\\scriptsize $[%s, %s]$}\\\\{\\scriptsize ",
				p == c[i].best ? "\\textbf{" : "", dg_sig3(a, x->est[0]), p == c[i].best ? "}" : "",
				dg_sig3(b, x->lo[0]), dg_sig3(d, x->hi[0]));
			char sd[DG_SCHED_DESC_MAX];
			sched_short(x->sched, false, sd, sizeof sd);
			dg_tex_name(f, sd);
			fprintf(f, ", $\\rho$ %g}\\end{tabular}", x->rho);
		}
		fputs(" \\\\\n", f);
	}
	fputs("\\midrule\nBest $-$ next", f);
	for (int i = 0; i < nt; i++)
		if (c[i].next < 0)
			fputs(" & ---", f);
		else
			fprintf(f, " & \\begin{tabular}[t]{@{}l@{}}$%s$\\\\{\\scriptsize $[%s, %s]$}\\end{tabular}", dg_sig3(a, c[i].d),
				dg_sig3(b, c[i].d_lo), dg_sig3(d, c[i].d_hi));
	fputs(" \\\\\n\\bottomrule\n\\end{tabular}\n\\end{table*}\n\n", f);
}

/* matched.{csv,md,tex}: both kinds of matched cost */
static void write_matched(FILE *csv, FILE *md, FILE *tex, const rows *fid, const entry *e, int ne,
			  const dg_compare_opts *o, const rows *sp)
{
	const char **m = dg_malloc((size_t)(ne + 1) * sizeof *m);
	int nm = methods_of(e, ne, m);
	fprintf(csv, "matched,threshold,policy,schedule,density_target,density,sparse_density,speedup,"
		     "speed_projected,psnr,psnr_lo,psnr_hi,best,best_minus_next,best_minus_next_lo,"
		     "best_minus_next_hi\n");
	fprintf(md, "# Matched cost: each method's best schedule and density at a given cost (%s)\n\n"
		    "Each cell: the method's row of best mean PSNR (dB, final latents against dense, 95%% bootstrap "
		    "interval over the samples) among its schedules and target densities that reach their target, "
		    "at a speedup of at least the column's (measured, or projected ᵖ from step costs: "
		    "comparison.md), or at a computed density over every self-attention call (warm-up and "
		    "anchors included) of at most the column's; then its schedule, target ρ, computed density "
		    "and speedup. Bold: the column's best; last row: the paired PSNR difference of the best "
		    "method over the best of any other method (%d bootstrap replicates over the samples, seed "
		    "%lu). Fidelity: %s; speed: %s.\n\n## At matched speed\n\n",
		o->title, o->boot, o->seed, fid->device, sp->n ? sp->device : "the fidelity runs' own times");
	fprintf(tex, "%% matched.tex: made by dsgap compare (commit %s). Needs \\usepackage{booktabs}.\n",
		dg_git_commit());
	const double *t[2] = { o->at_speedup, o->at_density };
	const int nt[2] = { o->nat_speedup, o->nat_density };
	for (int kind = 0; kind < 2; kind++) {
		matched_col *c = dg_calloc((size_t)nt[kind] + 1, sizeof *c);
		matched_cols(fid, e, ne, kind, t[kind], nt[kind], o, c);
		if (kind == 1)
			fputs("## At matched computed density\n\n", md);
		matched_md(md, e, ne, m, nm, kind, t[kind], nt[kind], c);
		matched_csv(csv, e, ne, m, nm, kind, t[kind], nt[kind], c);
		matched_tex(tex, e, ne, m, nm, kind, t[kind], nt[kind], c, o);
		free(c);
	}
	free(m);
}

static void write_json(FILE *f, const entry *e, int ne, const dg_compare_opts *o, const rows *fid,
		      const rows *sp)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "format", "dsgap-comparison");
	char now[32];
	dg_utc_now(now, sizeof now);
	cJSON_AddStringToObject(j, "date", now);
	cJSON_AddStringToObject(j, "git_commit", dg_git_commit());
	cJSON_AddStringToObject(j, "title", o->title);
	cJSON *a = cJSON_AddArrayToObject(j, "fidelity_runs");
	for (int i = 0; i < o->nfidelity; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(o->fidelity[i]));
	a = cJSON_AddArrayToObject(j, "speed_runs");
	for (int i = 0; i < o->nspeed; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(o->speed[i]));
	cJSON_AddStringToObject(j, "fidelity_device", fid->device);
	cJSON_AddStringToObject(j, "speed_device", sp->n ? sp->device : fid->device);
	cJSON_AddNumberToObject(j, "steps", fid->steps);
	cJSON_AddNumberToObject(j, "boot", o->boot);
	cJSON_AddNumberToObject(j, "seed", (double)o->seed);
	cJSON_AddNumberToObject(j, "tolerance", o->tol);
	a = cJSON_AddArrayToObject(j, "unreached_densities");
	for (int p = 0; p < ne; p++)
		if (!e[p].reached) {
			cJSON *u = cJSON_CreateObject();
			cJSON_AddStringToObject(u, "policy", e[p].policy);
			cJSON_AddStringToObject(u, "schedule", e[p].sched);
			cJSON_AddNumberToObject(u, "density_target", e[p].rho);
			cJSON_AddNumberToObject(u, "sparse_density", e[p].sparse_density);
			cJSON_AddItemToArray(a, u);
		}
	dg_json_paths_shown(j);
	char *s = cJSON_Print(j);
	fputs(s, f);
	fputc('\n', f);
	free(s);
	cJSON_Delete(j);
}

int dg_compare(const dg_compare_opts *o)
{
	rows fid = { 0 }, sp = { 0 };
	entry *e = NULL;
	int rc = -1, ne = 0;
	for (int i = 0; i < o->nfidelity; i++)
		if (dg_loop_rows_read(o->fidelity[i], &fid, "compare"))
			goto done;
	for (int i = 0; i < o->nspeed; i++)
		if (dg_loop_rows_read(o->speed[i], &sp, "compare"))
			goto done;
	e = dg_calloc((size_t)fid.n, sizeof *e);
	for (int i = 0; i < fid.n; i++) {
		const row *r = &fid.r[i];
		int p = find_entry(e, ne, r->policy, r->sched, r->rho);
		if (p < 0) {
			p = ne++;
			snprintf(e[p].policy, sizeof e[p].policy, "%s", r->policy);
			snprintf(e[p].sched, sizeof e[p].sched, "%s", r->sched);
			e[p].rs = fid.runs[r->run];
			e[p].rho = r->rho;
			source_of(r->policy, e[p].source, sizeof e[p].source);
		}
		e[p].samples++;
		e[p].density += r->density;
	}
	for (int p = 0; p < ne; p++) {
		double wf = (double)e[p].rs.warmup / e[p].rs.steps; /* the warm-up's share of the calls, all dense */
		e[p].density /= e[p].samples;
		e[p].sparse_density = (e[p].density - wf) / (1 - wf);
		/* a peer reaches rho on its sparse calls: past the warm-up, its anchors (dense) excluded */
		int nd, na, ns;
		step_counts(&e[p].rs, is_cached(e[p].policy), &nd, &na, &ns);
		double df = (double)(nd + na) / e[p].rs.steps, own = ns ? (e[p].density - df) / (1 - df) : 1;
		e[p].reached = !is_peer(e[p].policy) || e[p].rs.ndense_layers || fabs(own - e[p].rho) <= o->tol + 1e-12;
	}
	if (fid.repeated)
		printf("compare: %d rows repeated across the runs (each run's dense reference, or a policy the "
		       "anchors do not act on under schedules that differ only in them): counted once\n",
		       fid.repeated);
	for (int k = 0; k < 3; k++)
		fidelity_stats(&fid, e, ne, k, o->boot, o->seed);
	if (speed_stats(sp.n ? &sp : &fid, e, ne, !sp.n))
		goto done;

	/* every file made whole in a staging folder (the figure rendered there), then published: a
	 * gnuplot failure publishes nothing */
	dg_stage st;
	if (dg_stage_open(&st, o->out, "compare"))
		goto done;
	char *figs = dg_path_join(st.path, "figures");
	const char *names[] = { "comparison.csv", "comparison.md", "comparison.tex", "run.json",
				"figures/pareto.dat", "figures/pareto.gp", "figures/style.gp",
				"matched.csv", "matched.md", "matched.tex" };
	enum { NF = sizeof names / sizeof *names };
	dg_out out[NF];
	int nopen = 0, bad = dg_mkdir_p(figs), nm = 0;
	while (nopen < NF && !bad) {
		bad = dg_out_open_in(&out[nopen], st.path, names[nopen]);
		nopen += !bad;
	}
	if (!bad) {
		write_csv(out[0].f, e, ne);
		write_md(out[1].f, e, ne, o, &fid, &sp, o->tol);
		write_tex(out[2].f, e, ne, o);
		write_json(out[3].f, e, ne, o, &fid, &sp);
		write_figure(out[4].f, out[5].f, e, ne, o, sp.n ? sp.device : NULL, &nm);
		fputs(DG_STYLE_GP, out[6].f);
		write_matched(out[7].f, out[8].f, out[9].f, &fid, e, ne, o, &sp);
	}
	int i = 0;
	for (; i < nopen && !bad; i++)
		bad = dg_out_commit(&out[i]);
	for (; i < nopen; i++)
		dg_out_abort(&out[i]);
	if (!bad && nm == 0) /* gnuplot would fail on an empty x range */
		dg_warn("compare: no method has a speedup at a density it reached: figures/pareto.{pdf,png} not drawn");
	else if (!bad && !dg_gnuplot_found())
		dg_warn("compare: no gnuplot: figures/pareto.{pdf,png} not rendered (gnuplot pareto.gp there)");
	else if (!bad)
		bad = dg_gnuplot(figs, "pareto");
	free(figs);
	if (dg_stage_close(&st, bad))
		goto done;
	printf("compare: %d rows of methods x schedules x densities (%d methods in the figure) from %d samples' rows -> "
	       "%s/comparison.{csv,md,tex}, matched.{csv,md,tex}, figures/pareto.png\n", ne, nm, fid.n, o->out);
	rc = 0;
done:
	free(e), free(fid.r), free(sp.r), free(fid.runs), free(sp.runs);
	return rc;
}
