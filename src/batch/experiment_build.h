/*
 * experiment_build.h: what the three parts of reading an experiment share, inside batch/ only:
 * experiment.c (the INI file into a dg_experiment), experiment_grid.c (its runs and cells) and
 * experiment_json.c (fingerprints and experiment.json).
 */
#ifndef DG_EXPERIMENT_BUILD_H
#define DG_EXPERIMENT_BUILD_H

#include <stdint.h>

#include "batch/experiment.h"
#include "util/util.h"

/* The first problem found: its line in the .ini (0: none yet; -1: the file as a whole). */
typedef struct {
	int line;
	char msg[640];
} dg_exp_error;

/* Record a problem unless one is recorded already; returns 0 (callers write `return fail(...), -1`). */
DG_PRINTF(3, 4) int dg_exp_fail(dg_exp_error *err, int line, const char *fmt, ...);

/* The grid of a read experiment (defaults applied, policies, schedules and traces resolved): runs
 * and cells as experiment.h defines them, anchors resolved, the fingerprint. 0, or -1 with err. */
int dg_exp_grid_open(dg_experiment *e, dg_exp_error *err);
int dg_exp_grid_closed(dg_experiment *e, dg_exp_error *err);

/* The fingerprint of the rows (open or closed loop); bytes of a checkpoint (file or folder). */
uint64_t dg_exp_fingerprint(const dg_experiment *e);
long long dg_exp_model_size(const char *path);

#endif
