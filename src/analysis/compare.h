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
 * Writes DIR/comparison.{csv,md,tex}, DIR/run.json (inputs, settings, unreached densities) and
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
} dg_compare_opts;

/* The whole comparison: 0, or -1 after one line. */
int dg_compare(const dg_compare_opts *o);

/* The rows of merged closed-loop runs, as compare reads them (closed.h reads them too). */
typedef struct {
	char sample[160]; /* prompt/seed */
	char policy[DG_POLICY_NAME_MAX];
	double rho, density, psnr, ssim, rel_l2, time;
} dg_loop_row;
typedef struct {
	dg_loop_row *r;
	int n, cap;
	int steps, warmup; /* of the first run read */
	char device[192];
} dg_loop_rows;
/* Append RUN/closed_loop.csv's rows to rs (checked: columns, numbers and their ranges, a sample of a
 * policy at a density once over all runs read into rs, the same steps and warm-up as the runs before,
 * no dense layers); cmd names the command in the one line of a refusal. 0, or -1 after that line. */
int dg_loop_rows_read(const char *dir, dg_loop_rows *rs, const char *cmd);

#endif
