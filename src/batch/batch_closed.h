/*
 * batch_closed.h: the closed-loop cells of dsgap run (experiment 4; experiment.h: [model],
 * [prompts]) and their merge. A cell is one generate run (generate.h) of one sample (prompt,
 * seed): the dense reference, or one sparse policy at one density. It writes, into its folder,
 *   latents.h5   the final latents (channels, F, H, W), fp32 /latents (tensorfile.h)
 *   run.json     policy, density target, effective density, transformer and total time, device
 *   where the loop drifts (issue 50), when one cell's per-step latents fit 256 MiB (fp32; the
 *   bundled model's 3x16x32x32 latents: 192 KiB a step, 9.4 MiB at 50 steps):
 *   steps.h5     the reference's latents after every step, fp32 /latents (steps x channels, F, H, W)
 *   drift.csv    a sparse cell's: step,rel_l2 of its latents after each step against the
 *                reference's steps.h5 (read when that cell is done already: with one worker the
 *                reference runs first); else the cell writes its own steps.h5 for the merge
 * and nothing else: its fidelity (PSNR/SSIM against the sample's reference) and speedup (the
 * reference's transformer time over its own) are computed when the cells are merged, so no cell
 * waits for another and shards, workers and resumes need nothing more than the open loop.
 *
 * Merged, per run (OUT/RUN/):
 *   closed_loop.csv  DG_CLOSED_HEADER, one row per cell in canonical order (the time columns, then
 *                    rel_l2 = ||x - ref||_2 / ||ref||_2 over the whole final latents, 0 for the reference,
 *                    then the run's schedule: warmup, anchor_every (N of anchors=every:N, "once" for
 *                    the default single anchor, "given" for a list), the resolved anchors a;b and
 *                    the dense layers l;m or "none", so rows of several runs group by them)
 *   drift.csv        DG_CLOSED_DRIFT_HEADER, per sparse cell and step: rel_l2 of the latents after
 *                    that step against the reference's after the same step (header only: none kept)
 *   run.json         the run's settings, the cells' devices, dates, summed times, inputs
 * and per run x policy x density a line of OUT/summary.csv (DG_CLOSED_SUMMARY_HEADER: means over
 * the samples; speedup = mean reference time / mean time) and of OUT/summary.md.
 */
#ifndef DG_BATCH_CLOSED_H
#define DG_BATCH_CLOSED_H

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "batch/experiment.h"

#define DG_CLOSED_HEADER \
	"prompt,seed,policy,density_target,density,psnr,ssim,psnr_min,ssim_min,transformer_s,total_s,speedup,rel_l2," \
	"warmup,anchor_every,anchors,dense_layers"
#define DG_CLOSED_DRIFT_HEADER "prompt,seed,policy,density_target,step,rel_l2"
#define DG_CLOSED_SUMMARY_HEADER \
	"run,model,schedule,warmup,anchors,policy,density_target,samples,density,psnr,psnr_min,ssim," \
	"ssim_min,transformer_s,speedup,anchor_every,dense_layers"

/* The run whose folder holds cell i of run (an entry of experiment.json's runs): its cell_info's
 * source_run (a generation shared with an earlier run, experiment.h), else the run itself. */
const char *dg_closed_cell_run(const cJSON *run, int i);

/* Whether the cell folder dir holds a finished closed-loop cell. */
bool dg_closed_cell_done(const char *dir);

/* Run closed-loop cell k of e into the (empty) folder dir. 0 or -1 (reported). The model stays
 * loaded for the process's next cell (one load for all the generations of a worker) until
 * dg_closed_release. */
int dg_closed_cell(const dg_experiment *e, int k, const char *dir, const char *device,
		   const char *command_line, bool progress);
void dg_closed_release(void);

typedef struct {
	char *rows;     /* closed_loop.csv */
	char *drift;    /* drift.csv */
	char *run_json; /* run.json */
	char *summary;  /* lines of summary.csv */
	char *md;       /* lines of summary.md's table */
	int missing;    /* cells left out (partial): unfinished, or their sample's reference is */
} dg_closed_merged;

/* The summary.md text before the table lines (name: the experiment's, fp: its fingerprint). */
char *dg_closed_md_head(const char *name, const char *fp);

/*
 * Merge run (an entry of experiment.json's runs; plan: the whole experiment.json) from the cells
 * in dirs[0..ndirs) (each present in at least one; a cell in several must hold the same latents).
 * partial: a cell that is in none, or whose sample's reference is in none, is left out (named in
 * run.json's experiment.cells_missing, counted in out->missing) instead of failing the merge.
 * out's strings are new (free them with dg_closed_merged_free). 0 or -1 (reported).
 */
int dg_closed_merge_run(const cJSON *plan, const cJSON *run, char *const *dirs, int ndirs, bool partial,
			dg_closed_merged *out);
void dg_closed_merged_free(dg_closed_merged *m);

#endif
