/*
 * cmd_bench.c: `dsgap bench [--device gpu|cpu] [--tokens N] [--heads H] [--head-dim D] [--csv F]`:
 * the replay-level benchmarks of DESIGN §8, through the same backend the replay runs on:
 *   dense pass, anchor step (dense + LSE + PCA groups + exact scores + top-k + residual), the
 *   sparse reuse pass at densities 0.05..0.5 (PCA groups, token top-k), and the whole oracle ladder
 *   plus factorial on one layer-step of a synthetic trace (replay_layer_step_s).
 * Inputs are random bf16 Q/K/V with varied row scales (never zeros); times are device events (GPU)
 * or wall clock (CPU), medians of --reps after a warm-up. Appends `name,value,unit,device,date,
 * commit` lines to --csv (default results/bench/bench.csv) and prints them. The kernel-level
 * comparison against cuDNN and FlexAttention is dsgap-bench-kernels + scripts/gpu_bench_torch.py.
 */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "backend.h"
#include "commands.h"
#include "replay.h"
#include "synth.h"
#include "util.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: dsgap bench [--device gpu|cpu] [--tokens N] [--heads H] [--head-dim D] [--reps R]\n"
		   "                   [--layer-step GRID] [--csv FILE]\n\n"
		   "Times the replay's dense pass, anchor step and sparse pass (densities 0.05..0.5) through\n"
		   "the backend, and the ladder + factorial on one synthetic layer-step (GRID FxHxW, default\n"
		   "21x30x52 = 32760 tokens; 'none' to skip). Defaults: gpu, 32760 tokens, 12 heads, d=128,\n"
		   "5 reps, csv results/bench/bench.csv.\n");
}

typedef struct {
	FILE *csv;
	const char *device, *commit;
	char date[32];
} sink;

static void put(sink *s, const char *name, double value, const char *unit)
{
	printf("%-28s %12.5g %s\n", name, value, unit);
	if (s->csv)
		fprintf(s->csv, "%s,%.6g,%s,%s,%s,%s\n", name, value, unit, s->device, s->date, s->commit);
}

static double median(double *x, int n)
{
	gsl_sort(x, 1, n);
	return gsl_stats_median_from_sorted_data(x, 1, n);
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

int dg_cmd_bench(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "device", required_argument, 0, 'D' }, { "tokens", required_argument, 0, 'n' },
		{ "heads", required_argument, 0, 'H' },  { "head-dim", required_argument, 0, 'd' },
		{ "reps", required_argument, 0, 'r' },   { "csv", required_argument, 0, 'c' },
		{ "layer-step", required_argument, 0, 'L' }, { "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	const char *device = "gpu", *csv = "results/bench/bench.csv", *grid = "21x30x52";
	int n = 32760, heads = 12, d = 128, reps = 5, c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "D:n:H:d:r:c:L:h", opts, NULL)) != -1) {
		switch (c) {
		case 'D': device = optarg; break;
		case 'n': if (dg_opt_int("bench", "tokens", optarg, 128, 1 << 20, &n)) return 2; break;
		case 'H': if (dg_opt_int("bench", "heads", optarg, 1, 256, &heads)) return 2; break;
		case 'd': if (dg_opt_int("bench", "head-dim", optarg, 32, 256, &d)) return 2; break;
		case 'r': if (dg_opt_int("bench", "reps", optarg, 1, 1000, &reps)) return 2; break;
		case 'c': csv = optarg; break;
		case 'L': grid = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	dg_backend *be = strcmp(device, "gpu") ? dg_backend_cpu(n, d) : dg_backend_gpu(n, d);
	if (!be)
		return 1;
	sink s = { .device = be->device, .commit = dg_git_commit() };
	dg_utc_now(s.date, sizeof s.date);
	if (*csv && !(s.csv = fopen(csv, "a")))
		return dg_error("cannot append to %s", csv), 1;
	printf("dsgap bench: %s, %d heads x %d tokens x d=%d, %d reps, commit %s, %s\n", be->device,
	       heads, n, d, reps, s.commit, s.date);

	gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
	gsl_rng_set(r, 12345);
	size_t nd = (size_t)n * d;
	float *q = dg_malloc(nd * 4), *k = dg_malloc(nd * 4), *v = dg_malloc(nd * 4);
	static const double dens[] = { 0.05, 0.1, 0.15, 0.2, 0.3, 0.5 };
	enum { ND = sizeof dens / sizeof *dens };
	double *t_dense = dg_calloc(reps, 8), *t_anchor = dg_calloc(reps, 8), *t_sparse[ND];
	for (int i = 0; i < ND; i++)
		t_sparse[i] = dg_calloc(reps, 8);
	int grid3[3] = { 1, 1, n };
	for (int rep = -1; rep < reps; rep++) { /* rep -1: warm-up */
		double sd = 0, sa = 0, ss[ND] = { 0 };
		for (int h = 0; h < heads; h++) {
			random_unit(r, q, n, d), random_unit(r, k, n, d), random_unit(r, v, n, d);
			be->load(be, q, k, v);
			sd += be->dense(be);
			/* the anchor step: dense + LSE (above) + PCA + exact scores + top-k + residual */
			double t0 = dg_now();
			dg_bgroups *g = be->groups(be, DG_GROUP_PCA, grid3, 0);
			dg_bscores *sc;
			be->exact(be, &g, &sc, 1, NULL, NULL, 0);
			dg_budget b = { DG_KV_TOKEN, DG_BUDGET_TOPK, 0.15, 0, 0, 0 };
			dg_bsel *sel = be->select(be, g, sc, &b);
			dg_bvec *res = NULL;
			be->attend(be, g, sel, NULL, &res, NULL, NULL);
			sa += dg_now() - t0;
			be->sel_free(be, sel);
			for (int i = 0; i < ND; i++) {
				b.rho = dens[i];
				sel = be->select(be, g, sc, &b);
				double t;
				be->attend(be, g, sel, res, NULL, NULL, &t);
				ss[i] += t;
				be->sel_free(be, sel);
			}
			be->vec_free(be, res);
			be->scores_free(be, sc);
			be->groups_free(be, g);
		}
		if (rep < 0)
			continue;
		t_dense[rep] = sd, t_anchor[rep] = sd + sa;
		for (int i = 0; i < ND; i++)
			t_sparse[i][rep] = ss[i];
	}
	double td = median(t_dense, reps), ta = median(t_anchor, reps);
	double flop = 4.0 * n * (double)n * d * heads;
	put(&s, "replay_dense_ms", 1e3 * td, "ms");
	put(&s, "replay_dense_tflops", flop / td * 1e-12, "TFLOP/s");
	put(&s, "anchor_ms", 1e3 * ta, "ms");
	put(&s, "anchor_over_dense", ta / td, "x");
	for (int i = 0; i < ND; i++) {
		char name[64];
		double ts = median(t_sparse[i], reps);
		snprintf(name, sizeof name, "replay_sparse_ms@%g", dens[i]);
		put(&s, name, 1e3 * ts, "ms");
		snprintf(name, sizeof name, "sparse_over_dense@%g", dens[i]);
		put(&s, name, td / ts, "x");
	}
	be->destroy(be);

	int rc = 0;
	if (strcmp(grid, "none")) {
		/* one layer-step of the whole ladder + factorial: 2 stored steps (an anchor, a reuse) */
		dg_synth_opts so;
		dg_synth_defaults(&so);
		if (dg_opt_grid("bench", "layer-step", grid, so.grid))
			return 2;
		so.heads = heads, so.head_dim = d, so.layers = 1, so.steps = 2;
		char dir[] = "/tmp/dsgap-bench-XXXXXX";
		if (!mkdtemp(dir))
			return dg_error("bench: cannot make a temporary directory"), 1;
		char *trace = dg_path_join(dir, "t.h5"), *out = dg_path_join(dir, "out");
		dg_policy pol[32];
		double rho = 0.15;
		dg_replay_opts o = { .trace_path = trace, .out_dir = out, .policies = pol,
				     .densities = &rho, .ndensities = 1, .device = device };
		o.npolicies = dg_policies_expand("all", pol, 32);
		dg_schedule_parse("warmup=1", &o.schedule);
		double t0 = dg_now();
		rc = dg_synth(&so, trace);
		double synth_s = dg_now() - t0;
		if (!rc) {
			t0 = dg_now();
			rc = dg_replay(&o);
			double wall = dg_now() - t0;
			put(&s, "replay_layer_step_s", wall / 2, "s");
			printf("  (ladder + factorial, %d policies at rho 0.15, %d heads x %d tokens, 2 steps: "
			       "%.2f s; synth %.1f s)\n", o.npolicies, heads, so.grid[0] * so.grid[1] * so.grid[2], wall, synth_s);
		}
		char cmd[256];
		snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
		if (system(cmd))
			dg_warn("bench: could not remove %s", dir);
		free(trace), free(out);
	}
	if (s.csv)
		fclose(s.csv);
	free(q), free(k), free(v), free(t_dense), free(t_anchor);
	for (int i = 0; i < ND; i++)
		free(t_sparse[i]);
	gsl_rng_free(r);
	return rc ? 1 : 0;
}
