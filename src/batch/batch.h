/*
 * batch.h: running the cells of an experiment (experiment.h) and merging them (docs/spec.md §10).
 *
 * An output folder OUT holds
 *   experiment.json          the resolved experiment (written first; a rerun with a different
 *                            experiment in the same OUT is refused: the fingerprints differ)
 *   traces/LABEL-HASH.h5     synthetic traces the run generated (deterministic; [output] traces
 *                            puts them elsewhere)
 *   cells/RUN/CELL/          one finished cell: metrics.csv and run.json of dg_replay on a
 *                            one-cluster view of the trace (trace_view.h), and input.sum, the
 *                            checksum of the units it read (dg_batch_validate). Each cell is made in
 *                            cells/RUN/.CELL.tmp.HOST.PID/ and renamed when complete, so a killed
 *                            process leaves only a temporary folder, which the rerun removes
 *   RUN/metrics.csv, run.json  the merged rows of a run, in canonical order (dg_batch_merge): the
 *                            same rows, byte for byte but time_ms, as `dsgap replay` of that trace
 *                            with that schedule; dsgap decompose and plot read this folder
 *   summary.csv, summary.md  mean metrics over post-warm-up units per run x policy x density
 */
#ifndef DG_BATCH_H
#define DG_BATCH_H

#include <stdbool.h>

#include "batch/experiment.h"

typedef struct {
	const dg_experiment *e;
	const char *out_dir;
	const char *device;       /* "cpu" or "gpu" */
	const char *command_line; /* recorded in each cell's run.json */
	bool progress;            /* one line per cell on stderr, with the ETA */
} dg_batch_opts;

/* Make OUT and write OUT/experiment.json, or check the one there has this fingerprint. */
int dg_batch_prepare(const dg_experiment *e, const char *out_dir);
/* Generate the synthetic traces the cells idx[0..n) need, unless their files exist. */
int dg_batch_traces(const dg_experiment *e, const int *idx, int n, bool verbose);
/* Resume is exact: every cell of the experiment in out_dir that is incomplete (a file of it lost), or
 * (open loop) whose trace units (Q, K, V of its cluster at every step) no longer have the checksum
 * the cell recorded in CELL/input.sum, is removed with a warning naming it, to be recomputed.
 * Returns how many were removed, or -1 (reported). */
int dg_batch_validate(const dg_experiment *e, const char *out_dir);
/* Whether cell k is finished in out_dir (open loop: metrics.csv, run.json and input.sum). */
bool dg_batch_cell_done(const dg_experiment *e, const char *out_dir, int k);
/* Number of the cells idx[0..n) that are finished in out_dir (all cells: idx NULL). */
int dg_batch_count_done(const dg_experiment *e, const char *out_dir, const int *idx, int n);
/* Run the cells idx[0..n) that are not finished yet. Stops at the first failure (-1). */
int dg_batch_run(const dg_batch_opts *o, const int *idx, int n, int *ran, int *skipped);
/* Merge the cells found in dirs[0..ndirs) (each an OUT of the same experiment) into out: every
 * RUN/metrics.csv + run.json, summary.{csv,md}, experiment.json. All cells must be present, and
 * (open loop) each must have been computed from its trace file as it is now (CELL/input.sum, checked
 * as dg_batch_validate checks it; a trace file absent from this machine: a warning); nothing is written
 * otherwise. partial (closed loop only): merge the finished cells, leaving out the missing ones and
 * the cells of samples whose dense reference is missing (each run.json names them). out may be one
 * of the dirs. */
int dg_batch_merge(char *const *dirs, int ndirs, const char *out, bool verbose, bool partial);

#endif
