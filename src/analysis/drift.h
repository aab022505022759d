/*
 * drift.h: issue 50's closed-loop tables beside the decomposition's three sources: staleness as a
 * fourth source, where the loop drifts over the steps, and the step x layer sensitivity map. Read
 * from merged closed-loop runs of dsgap run (RUN folders: run.json, closed_loop.csv, drift.csv;
 * batch_closed.h). Per run (a schedule), policy and density_target, over the samples (prompt, seed)
 * with 95% percentile bootstrap intervals that resample the samples (bootstrap.h, one level: a
 * sample is the cluster):
 *   drift.csv        each step's rel_l2 of the latents against the dense run's at that step: mean
 *                    and interval per (run, policy, density, step); figures/drift-RUN.{dat,gp,pdf,png}
 *                    one line per policy x density over the steps, its band the interval (log y;
 *                    the warm-up's exact zeros left out)
 *   staleness.csv    for each policy BASE/fresh=X of a run whose BASE (the spec without its fresh=
 *                    switch) ran beside it: E(BASE) - E(BASE/fresh=X), E the mean rel_l2 of the
 *                    final latents, paired over the samples both have, and the PSNR gained the same
 *                    way; how many samples have the difference > 0 (staleness.md, with the three
 *                    sources' names: what the staleness of X costs the loop)
 *   sensitivity.csv  runs whose schedule has sparse_steps or sparse_layers (policy.h; "all": a run
 *                    without either, the whole loop sparse): per policy x density the final PSNR
 *                    and rel_l2 with intervals; figures/sensitivity.{dat,gp,pdf,png} the heat map of
 *                    the mean PSNR (rows policy @ density, columns the windows and layers)
 * and drift.md (every table, 3 significant figures). Written through a staging folder: all or
 * nothing. A run without drift.csv rows adds no drift; tables without rows are left out (said in
 * drift.md); no table at all is an error.
 */
#ifndef DG_DRIFT_H
#define DG_DRIFT_H

typedef struct {
	int boot;           /* bootstrap replicates (0: no intervals) */
	unsigned long seed;
} dg_drift_opts;

/* The tables of runs[0 .. nruns) into out. 0 or -1 (reported). */
int dg_drift(char *const *runs, int nruns, const char *out, const dg_drift_opts *o);

#endif
