/*
 * compare.h: the comparison of every method (issue 23, experiments/comparison.sh): fidelity from a
 * closed loop over a sample set, speed from a closed loop at another size, in one table and a
 * Pareto figure.
 *
 *   dsgap compare FID_RUN [FID_RUN ...] [--speed SPEED_RUN ...] --out DIR [--boot N] [--seed X]
 *                 [--tol T] [--title TEXT]
 *
 * A RUN is a merged closed-loop run folder of dsgap run (batch_closed.h): RUN/closed_loop.csv (one
 * row per sample x policy x density, rel_l2 column included) and RUN/run.json (model steps, schedule).
 * The fidelity runs' samples are pooled (every run of the same steps and warm-up); a policy x density
 * is one row of the table:
 *   psnr, ssim, rel_l2  means over the samples of the final latents against the sample's dense run,
 *                       with 95% percentile bootstrap intervals over the samples (bootstrap.h, one
 *                       level: a sample is a cluster of one unit; paired across policies; N
 *                       replicates, default 1000, seed default 1)
 *   density             computed pairs / N^2 over every self-attention call (closed_loop.csv)
 *   sparse_density      the same over the calls past the warm-up: (density - W/S) / (1 - W/S) for
 *                       W warm-up steps of S (warm-up calls are dense; dense_layers are refused)
 *   reached             a peer (presets.h family) whose sparse_density is more than tol (default
 *                       0.02) from the target: "cannot reach rho" in the tables, left out of the
 *                       figure, listed in run.json's unreached_densities
 *   speedup             from the speed runs: mean dense transformer time / mean policy time over
 *                       their samples (speed_density: that run's computed density); without
 *                       --speed, the fidelity runs' own
 * Runs may differ in schedule (warm-up, anchors, dense layers; not in steps): a table row is a
 * policy x schedule x density, the schedule written as it acts on the policy ("w10 every:10" for a
 * refresh=anchor policy, "w10" for a refresh=step one, which the anchors do not change: its rows
 * repeated under schedules that differ only in anchors are counted once). A speed run of another
 * step count or schedule gives a projected speedup (step costs fitted to the speed runs: speed_stats
 * in compare.c), marked so in every table.
 *   matched cost        per method, the row of best PSNR among those at speedup >= each of
 *                       at_speedup, and among those at computed density <= each of at_density, with
 *                       the paired PSNR difference of the best method over the next (bootstrap)
 * Writes DIR/comparison.{csv,md,tex}, DIR/matched.{csv,md,tex}, DIR/run.json (inputs, settings,
 * unreached densities) and
 * DIR/figures/pareto.{dat,gp} (+ style.gp), published together, then renders figures/pareto.{pdf,png}
 * with gnuplot (plot.h): speedup against PSNR, one marker per method, error bars, each point labelled
 * with its computed density, the non-dominated points joined as the frontier, dense as the line at 1x.
 * Bad input: one line naming the file and the problem, exit 1, nothing written.
 */
#ifndef DG_COMPARE_H
#define DG_COMPARE_H

#include "policy/policy.h"

typedef struct {
	char **fidelity; /* run folders */
	int nfidelity;
	char **speed;    /* run folders, or none */
	int nspeed;
	const char *out;
	const char *title; /* the figure's and tables' subject, e.g. "bundled model, 24 samples" */
	int boot;
	unsigned long seed;
	double tol;
	const double *at_speedup; /* matched-cost columns: best PSNR at speedup >= each (1.5, 1.8, 2) */
	int nat_speedup;
	const double *at_density; /* ... at computed density (every call) <= each (0.3 ... 0.5) */
	int nat_density;
} dg_compare_opts;

/* The whole comparison: 0, or -1 after one line. */
int dg_compare(const dg_compare_opts *o);

/* The rows of merged closed-loop runs, as compare reads them (closed.h reads them too). */
enum { DG_SCHED_DESC_MAX = 64 };
/* one run's schedule (its run.json): which of its steps are dense, anchors or sparse */
typedef struct {
	int steps, warmup, nanchors, ndense_layers;
	int anchors[DG_SCHEDULE_MAX], dense_layers[DG_SCHEDULE_MAX];
	unsigned long long dev, ino; /* the run folder's (stat): a folder is read once */
} dg_loop_sched;
/* one closed_loop.csv row; run: its run's index in dg_loop_rows.runs */
typedef struct {
	char sample[160]; /* prompt/seed */
	char policy[DG_POLICY_NAME_MAX];
	char sched[DG_SCHED_DESC_MAX]; /* the schedule as it acts on the policy: "—" (dense), "w10"
					* (refresh=step), "w10 once", "w10 every:10", "w10 a=9;29" */
	int run;
	double rho, density, psnr, ssim, rel_l2, time;
	double first_extra; /* run.json's first_sparse_extra_s for this policy and density; NaN: none */
} dg_loop_row;
typedef struct {
	dg_loop_row *r;
	int n, cap;
	dg_loop_sched *runs;
	int nruns;
	int steps;    /* of every run read (runs of one set share their step count) */
	int warmup;   /* of every run read, or -1 where runs differ in it */
	int repeated; /* rows of a (sample, policy, schedule, density) read before: left out */
	char device[192];
} dg_loop_rows;
/* Append RUN/closed_loop.csv's rows to rs (checked: columns, numbers and their ranges, a sample of a
 * policy at a density once in a run, a run folder once, the same steps as the runs before; rows
 * repeated across runs
 * are counted once, rs->repeated); who names the command in the one line of a refusal. 0, or -1
 * after that line. */
int dg_loop_rows_read(const char *dir, dg_loop_rows *rs, const char *who);

#endif
