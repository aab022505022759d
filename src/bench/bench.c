/*
 * bench.c: dsgap bench's measurements (bench.h) through the backend the replay runs on.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "backend/backend.h"
#include "bench/bench.h"
#include "policy/presets.h"
#include "replay/replay.h"
#include "trace/synth.h"
#include "util/csv.h"
#include "util/util.h"

typedef struct {
	FILE *csv;
	const char *commit;
	char device[192]; /* a copy: the backend is gone before the layer-step line */
	char date[32];
} sink;

static void put(sink *s, const char *name, double value, const char *unit)
{
	printf("%-28s %12.5g %s\n", name, value, unit);
	if (s->csv) {
		fprintf(s->csv, "%s,%.6g,%s,", name, value, unit);
		dg_csv_field(s->csv, s->device);
		putc(',', s->csv);
		dg_csv_field(s->csv, s->date);
		putc(',', s->csv);
		dg_csv_field(s->csv, s->commit);
		putc('\n', s->csv);
	}
}

/* Whether line is a row put writes: NAME,VALUE,UNIT,DEVICE,DATE,COMMIT (NAME of [a-z0-9_@.-], VALUE a
 * number, DATE 2026-12-02T16:51:53Z just before the last field) */
static bool is_bench_row(const char *line)
{
	size_t n = strspn(line, "abcdefghijklmnopqrstuvwxyz0123456789_@.-");
	char *end;
	if (!n || line[n] != ',')
		return false;
	strtod(line + n + 1, &end);
	const char *last = strrchr(line, ',');
	int y, mo, d, h, mi, sec;
	char z;
	return end > line + n + 1 && *end == ',' && last && last - line > 21 &&
	       sscanf(last - 20, "%4d-%2d-%2dT%2d:%2d:%2d%c", &y, &mo, &d, &h, &mi, &sec, &z) == 7 && z == 'Z' &&
	       last[-21] == ',';
}

/* phase accounting of a synchronous backend (no dg_backend.phases): the wall time since *t */
static void lap(dg_backend *be, double *t, double *ph, dg_phase p)
{
	double now = dg_now();
	if (!be->phases)
		ph[p] += now - *t;
	*t = now;
}

/*
 * The anchor step of the loaded head (dense + LSE, PCA groups, exact scores, token top-k at 0.15,
 * sparse + residual), from an idle device: its wall seconds; *dense its dense seconds; ph += the
 * seconds per phase. Where the backend made the PCA grouping ahead (heads_ahead), groups() only
 * takes it. The grouping, scores and residual are left for the sparse passes.
 */
static double anchor_step(dg_backend *be, const int grid[3], double *dense, double ph[DG_PHASE_COUNT],
			  dg_bgroups **g, dg_bscores **sc, dg_bvec **res)
{
	double part[DG_PHASE_COUNT] = { 0 }, before[DG_PHASE_COUNT];
	if (be->phases)
		be->phases(be, before); /* the load's copies done; the accounting from here */
	double t0 = dg_now(), t = t0;
	*dense = be->dense(be);
	lap(be, &t, part, DG_PHASE_DENSE);
	*g = be->groups(be, DG_GROUP_PCA, grid, 0);
	lap(be, &t, part, DG_PHASE_GROUPS);
	be->exact(be, g, sc, 1, NULL, NULL, 0);
	lap(be, &t, part, DG_PHASE_SCORES);
	dg_budget b = { DG_KV_TOKEN, DG_BUDGET_TOPK, 0.15, 0, 0, 0 };
	dg_bsel *sel = be->select(be, *g, *sc, &b);
	lap(be, &t, part, DG_PHASE_SELECT);
	*res = NULL;
	be->attend(be, *g, sel, NULL, res, NULL, NULL);
	lap(be, &t, part, DG_PHASE_ATTEND);
	if (be->phases)
		be->phases(be, part); /* waits for the step */
	double wall = dg_now() - t0;
	for (int p = 0; p < DG_PHASE_COUNT; p++)
		ph[p] += part[p];
	be->sel_free(be, sel);
	return wall;
}

/*
 * The PCA groupings of all heads (q (heads, n, d)) made ahead in one go where the backend can
 * (prefetch_groups), as the DiT's anchor does: returns their device seconds, which the anchor counts
 * in full as if nothing overlapped them (the host's bf16 conversion is not counted, as the loads'
 * is not); 0 where nothing is made ahead.
 */
static double heads_ahead(dg_backend *be, const float *q, int heads)
{
	if (!be->prefetch_groups || !be->phases)
		return 0;
	size_t nd = (size_t)be->n * be->d;
	const float **qs = dg_malloc((size_t)heads * sizeof *qs);
	for (int h = 0; h < heads; h++)
		qs[h] = q + h * nd;
	double ph[DG_PHASE_COUNT];
	be->phases(be, ph); /* the accounting from here */
	be->prefetch_groups(be, DG_GROUP_PCA, heads, qs, NULL, false);
	be->phases(be, ph); /* waits for the groupings */
	free(qs);
	return ph[DG_PHASE_GROUPS];
}

/* the sparse passes' densities */
static const double dens[] = { 0.05, 0.1, 0.15, 0.2, 0.3, 0.5 };
enum { ND = sizeof dens / sizeof *dens };

/* the sparse reuse passes of the loaded head (token top-k at each density on the anchor's grouping
 * and scores, + its residual): ss[i] += the attention's seconds at dens[i] */
static void sparse_passes(dg_backend *be, dg_bgroups *g, dg_bscores *sc, const dg_bvec *res, double ss[ND])
{
	dg_budget b = { DG_KV_TOKEN, DG_BUDGET_TOPK, 0.15, 0, 0, 0 };
	for (int i = 0; i < ND; i++) {
		b.rho = dens[i];
		dg_bsel *sel = be->select(be, g, sc, &b);
		double t;
		be->attend(be, g, sel, res, NULL, NULL, &t);
		ss[i] += t;
		be->sel_free(be, sel);
	}
}

/* the dense and sparse passes of the head q, k, v in both P.V modes (m = dg_backend.precise), each
 * from a fresh load (the backend may keep a unit's outputs): t[m][ND] += the dense seconds, t[m][i]
 * += the sparse seconds at dens[i] */
static void pv_modes(dg_backend *be, const float *q, const float *k, const float *v, dg_bgroups *g,
		     dg_bscores *sc, const dg_bvec *res, double t[2][ND + 1])
{
	bool mode = be->precise;
	for (int m = 0; m < 2; m++) {
		be->precise = m;
		be->load(be, q, k, v);
		t[m][ND] += be->dense(be);
		sparse_passes(be, g, sc, res, t[m]);
	}
	be->precise = mode;
}

/* random bf16-representable rows with varied scales: peaked and flat softmax rows */
static void random_unit(gsl_rng *r, float *x, int n, int d)
{
	for (int i = 0; i < n; i++) {
		double scale = 0.5 + 1.5 * gsl_rng_uniform(r);
		for (int c = 0; c < d; c++)
			x[(size_t)i * d + c] = dg_round_bf16((float)gsl_ran_gaussian(r, scale));
	}
}

/* the seconds of each rep */
typedef struct {
	int reps;
	double *dense, *anchor, *sparse[ND];
	double *phase[DG_PHASE_COUNT + 1]; /* the anchor's phases, then its host gaps */
	double *pv[2][ND + 1];             /* per P.V mode: sparse at each density, then dense */
} bench_times;

static void times_alloc(bench_times *t, int reps)
{
	t->reps = reps;
	t->dense = dg_calloc(reps, 8), t->anchor = dg_calloc(reps, 8);
	for (int i = 0; i < ND; i++)
		t->sparse[i] = dg_calloc(reps, 8);
	for (int p = 0; p <= DG_PHASE_COUNT; p++)
		t->phase[p] = dg_calloc(reps, 8);
	for (int m = 0; m < 2; m++)
		for (int i = 0; i <= ND; i++)
			t->pv[m][i] = dg_calloc(reps, 8);
}

static void times_free(bench_times *t)
{
	free(t->dense), free(t->anchor);
	for (int p = 0; p <= DG_PHASE_COUNT; p++)
		free(t->phase[p]);
	for (int m = 0; m < 2; m++)
		for (int i = 0; i <= ND; i++)
			free(t->pv[m][i]);
	for (int i = 0; i < ND; i++)
		free(t->sparse[i]);
}

/* One rep (rep -1: the warm-up, not recorded): new random heads q, k, v (heads, n, d), then each
 * head's anchor step, sparse passes and, on the GPU, both P.V modes. */
static void one_rep(dg_backend *be, gsl_rng *r, const dg_bench_opts *o, bool gpu, float *q, float *k, float *v,
		    int rep, bench_times *t)
{
	size_t nd = (size_t)o->n * o->d;
	int grid3[3] = { 1, 1, o->n };
	double sd = 0, sa = 0, ss[ND] = { 0 }, ph[DG_PHASE_COUNT] = { 0 }, spv[2][ND + 1] = { { 0 } };
	for (int h = 0; h < o->heads; h++) /* (heads, n, d) each */
		random_unit(r, q + h * nd, o->n, o->d), random_unit(r, k + h * nd, o->n, o->d),
			random_unit(r, v + h * nd, o->n, o->d);
	double pca_ahead = heads_ahead(be, q, o->heads);
	sa += pca_ahead;
	ph[DG_PHASE_GROUPS] += pca_ahead;
	for (int h = 0; h < o->heads; h++) {
		float *qh = q + h * nd, *kh = k + h * nd, *vh = v + h * nd;
		be->load(be, qh, kh, vh);
		dg_bgroups *g;
		dg_bscores *sc;
		dg_bvec *res;
		double dense_s;
		sa += anchor_step(be, grid3, &dense_s, ph, &g, &sc, &res);
		sd += dense_s;
		sparse_passes(be, g, sc, res, ss);
		if (gpu)
			pv_modes(be, qh, kh, vh, g, sc, res, spv);
		be->vec_free(be, res);
		be->scores_free(be, sc);
		be->groups_free(be, g);
	}
	if (rep < 0)
		return;
	t->dense[rep] = sd, t->anchor[rep] = sa;
	t->phase[DG_PHASE_COUNT][rep] = sa;
	for (int p = 0; p < DG_PHASE_COUNT; p++) {
		t->phase[p][rep] = ph[p];
		t->phase[DG_PHASE_COUNT][rep] -= ph[p];
	}
	for (int i = 0; i < ND; i++)
		t->sparse[i][rep] = ss[i];
	for (int m = 0; m < 2; m++)
		for (int i = 0; i <= ND; i++)
			t->pv[m][i][rep] = spv[m][i];
}

/* The medians of the reps as the benchmark's lines. */
static void put_times(sink *s, const dg_bench_opts *o, bool gpu, bench_times *t)
{
	int reps = t->reps;
	double td = dg_median(t->dense, reps), ta = dg_median(t->anchor, reps);
	double flop = 4.0 * o->n * (double)o->n * o->d * o->heads;
	put(s, "replay_dense_ms", 1e3 * td, "ms");
	put(s, "replay_dense_tflops", flop / td * 1e-12, "TFLOP/s");
	put(s, "anchor_ms", 1e3 * ta, "ms");
	put(s, "anchor_over_dense", ta / td, "x");
	/* where the anchor's time goes: device time per phase (summed over heads), the rest host gaps */
	for (int p = 0; p <= DG_PHASE_COUNT; p++) {
		char name[64];
		snprintf(name, sizeof name, "anchor_%s_ms", p < DG_PHASE_COUNT ? dg_phase_name(p) : "host_gaps");
		put(s, name, 1e3 * dg_median(t->phase[p], reps), "ms");
	}
	for (int i = 0; i < ND; i++) {
		char name[64];
		double ts = dg_median(t->sparse[i], reps);
		snprintf(name, sizeof name, "replay_sparse_ms@%g", dens[i]);
		put(s, name, 1e3 * ts, "ms");
		snprintf(name, sizeof name, "sparse_over_dense@%g", dens[i]);
		put(s, name, td / ts, "x");
	}
	/* the P.V modes: times in each, and precise over fast (dense last) */
	for (int i = 0; gpu && i <= ND; i++) {
		char name[64], at[32] = "";
		double tm[2];
		if (i < ND)
			snprintf(at, sizeof at, "@%g", dens[i]);
		for (int m = 0; m < 2; m++) {
			tm[m] = dg_median(t->pv[m][i], reps);
			snprintf(name, sizeof name, "pv_%s_%s_ms%s", m ? "precise" : "fast", i < ND ? "sparse" : "dense", at);
			put(s, name, 1e3 * tm[m], "ms");
		}
		snprintf(name, sizeof name, "pv_precise_over_fast_%s%s", i < ND ? "sparse" : "dense", at);
		put(s, name, tm[1] / tm[0], "x");
	}
}

/* One layer-step of the whole ladder + factorial on a synthetic trace of o->grid (2 stored steps:
 * an anchor, a reuse): replay_layer_step_s. 0, 1 (failed) or 2 (bad grid). */
static int layer_step(sink *s, const dg_bench_opts *o)
{
	dg_synth_opts so;
	dg_synth_defaults(&so);
	if (dg_opt_grid("bench", "layer-step", o->grid, so.grid))
		return 2;
	so.heads = o->heads, so.head_dim = o->d, so.layers = 1, so.steps = 2;
	char dir[] = "/tmp/dsgap-bench-XXXXXX";
	if (!mkdtemp(dir))
		return dg_error("bench: cannot make a temporary directory"), 1;
	char *trace = dg_path_join(dir, "t.h5"), *out = dg_path_join(dir, "out");
	dg_policy pol[32];
	double rho = 0.15;
	dg_replay_opts ro = { .trace_path = trace, .out_dir = out, .policies = pol,
			      .densities = &rho, .ndensities = 1, .device = o->device, .bf16_pv = !o->precise };
	ro.npolicies = dg_policies_expand("all", pol, 32);
	dg_schedule_parse("warmup=1", &ro.schedule);
	double t0 = dg_now();
	int rc = dg_synth(&so, trace);
	double synth_s = dg_now() - t0;
	if (!rc) {
		t0 = dg_now();
		rc = dg_replay(&ro);
		double wall = dg_now() - t0;
		put(s, "replay_layer_step_s", wall / 2, "s");
		printf("  (ladder + factorial, %d policies at rho 0.15, %d heads x %d tokens, 2 steps: "
		       "%.2f s; synth %.1f s)\n", ro.npolicies, o->heads, so.grid[0] * so.grid[1] * so.grid[2], wall,
		       synth_s);
	}
	char cmd[256];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd))
		dg_warn("bench: could not remove %s", dir);
	free(trace), free(out);
	return rc ? 1 : 0;
}

int dg_bench(const dg_bench_opts *o)
{
	dg_backend *be = strcmp(o->device, "gpu") ? dg_backend_cpu(o->n, o->d) : dg_backend_gpu(o->n, o->d);
	if (!be)
		return 1;
	be->precise = o->precise;
	bool gpu = !strcmp(be->name, "gpu"); /* the P.V modes differ only there */
	sink s = { .commit = dg_git_commit() };
	snprintf(s.device, sizeof s.device, "%s", be->device);
	dg_utc_now(s.date, sizeof s.date);
	if (*o->csv && !strcmp(o->csv, DG_BENCH_DEFAULT_CSV) && access("results/bench", F_OK)) {
		be->destroy(be);
		return dg_error("bench: cannot append to %s: %s (the default --csv, relative to the repository root: "
				"run there, or give --csv FILE, or --csv '' for none)", o->csv, strerror(errno)), 1;
	}
	dg_out csv = { 0 };
	if (*o->csv) {
		if (dg_csv_append_open(&csv, "bench", o->csv, NULL, is_bench_row)) {
			be->destroy(be);
			return 1;
		}
		s.csv = csv.f;
	}
	printf("dsgap bench: %s, %d heads x %d tokens x d=%d, %d reps, P.V %s, commit %s, %s\n", be->device,
	       o->heads, o->n, o->d, o->reps, o->precise ? "precise" : "fast", s.commit, s.date);

	gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
	gsl_rng_set(r, 12345);
	size_t nd = (size_t)o->n * o->d;
	float *q = dg_malloc(o->heads * nd * 4), *k = dg_malloc(o->heads * nd * 4), *v = dg_malloc(o->heads * nd * 4);
	bench_times t;
	times_alloc(&t, o->reps);
	for (int rep = -1; rep < o->reps; rep++) /* rep -1: warm-up */
		one_rep(be, r, o, gpu, q, k, v, rep, &t);
	put_times(&s, o, gpu, &t);
	be->destroy(be);

	int rc = strcmp(o->grid, "none") ? layer_step(&s, o) : 0;
	if (s.csv) { /* the rows published together, or none */
		if (rc)
			dg_out_abort(&csv);
		else if (dg_out_commit(&csv))
			rc = 1;
	}
	free(q), free(k), free(v);
	times_free(&t);
	gsl_rng_free(r);
	return rc;
}
