/*
 * workers.h: the cells of a batch (batch.h) over N worker processes on this host, for
 * `dsgap run --gpus all|N | --workers N`.
 *
 * What it runs: worker w of N is this executable (/proc/self/exe) run as
 *   dsgap run INI --out OUT --device DEVICE --shard i/n --worker w/N --quiet
 * which does its round-robin part of the shard's slice (dg_experiment_slice) into OUT, as a
 * single process would; workers share nothing but OUT, where a cell appears only when complete.
 * In each worker's environment: CUDA_VISIBLE_DEVICES = its GPU (when GPUs are given),
 * NCCL_NVLS_ENABLE=0, and OMP_NUM_THREADS = online cores / N unless it is set already.
 *
 * While they run, the parent polls every 0.2 s: it reaps workers and, unless quiet, prints a
 * progress line (cells done in OUT, workers running, elapsed, ETA) whenever the count changes.
 *
 * Signals: for the run's duration SIGINT and SIGTERM are caught in the parent (the previous
 * handlers are restored at the end); the first one is forwarded as SIGTERM to every worker still
 * running, and the parent keeps waiting until all have ended. Workers have the default handlers.
 * A worker that cannot be started (fork fails) stops the ones started before it the same way.
 *
 * How it reports: at the end one line per worker on stderr ("run: worker W (pid P[, GPU], C cells)
 * exited with status S | was killed by signal K | ended after T s"), for every worker when not
 * quiet, else only for a worker that did not exit with status 0. A failed or killed worker loses
 * only the cell it was on (its temporary folder, which a rerun removes); dg_workers_run
 * then prints one error saying how many workers failed and how many cells are left, and returns
 * -1; rerunning the same command finishes the batch. It returns -1 too when a signal stopped the
 * run or cells of the slice are not done; 0 when every worker exited with 0 and every cell is done.
 */
#ifndef DG_WORKERS_H
#define DG_WORKERS_H

#include <stdbool.h>

#include "batch/experiment.h"

typedef struct {
	const dg_experiment *e;
	const char *ini;     /* the experiment file, passed to the workers */
	const char *out_dir; /* OUT */
	const char *device;  /* "cpu" or "gpu" */
	int shard, nshards;  /* the slice of the experiment (--shard i/n) */
	int nworkers;        /* N >= 1 */
	char **gpus;         /* CUDA_VISIBLE_DEVICES of worker w: gpus[w]; NULL: CPU workers */
	const int *idx;      /* the slice's cells idx[0..nidx), for the progress and the final count */
	int nidx;
	bool quiet;          /* no progress lines; only failed workers are reported */
} dg_workers_opts;

/* Run the workers and wait for them all: 0, or -1 (reported) as described above. */
int dg_workers_run(const dg_workers_opts *o);

/* The GPUs workers may be bound to: CUDA_VISIBLE_DEVICES's entries when it is set (up to the
 * first invalid one), else /dev/nvidiaN, else the lines of nvidia-smi -L. ids[0..count) get new
 * strings (free them); returns the count (at most max). */
int dg_workers_visible_gpus(char **ids, int max);

#endif
