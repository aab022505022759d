/*
 * replay.h: the open-loop engine (docs/spec.md §1, §3, §4). Streams a trace one (step, layer, head) unit
 * at a time, runs every policy at every density on the dense model's own Q/K/V, and writes one
 * metrics row per unit to DIR/metrics.csv, plus DIR/run.json (resolved configuration, versions,
 * commit, device, timings). Both files are written under temporary names and renamed at the end.
 *
 * Units are visited cluster by cluster ((layer, head) outer, steps inner), so per-policy state
 * (groups, selections, residuals made at an anchor) lives only for the cluster being replayed.
 */
#ifndef DG_REPLAY_H
#define DG_REPLAY_H

#include <stdbool.h>
#include <stdint.h>

#include "policy/policy.h"

#define DG_METRICS_HEADER \
	"policy,density_target,density,step,layer,head,rel_l1,rel_l2,cosine,psnr,mass_mean,mass_p5," \
	"staleness,time_ms"

typedef struct {
	const char *trace_path;
	const char *trace_name;   /* the file named in messages and run.json in place of trace_path
				   * (NULL: trace_path); a batch cell: its trace, not the view it reads */
	const char *out_dir;
	dg_policy *policies;
	int npolicies;
	double *densities;
	int ndensities;
	dg_schedule schedule;
	const char *device;       /* "cpu" (default) or "gpu" */
	bool bf16_pv;             /* GPU: P rounded to bf16 before P.V (fast), not split (dg_backend.precise) */
	bool progress;            /* progress line with ETA on stderr */
	const char *command_line; /* recorded in run.json */
	/* Each unit's data checked as it is read (dg_replay_check_unit), not in a pass over the
	 * trace before the replay: for a batch cell (one (layer, head) cluster, seconds of work),
	 * whose extra read passes cost more than its replay on the GPU. */
	bool check_as_read;
	/* When set, *input_sum gets dg_fnv_words over every unit's Q, K and V as the replay read them
	 * (units in (layer, head, step) order; DG_FNV_OFFSET to start): a batch cell's input.sum. */
	uint64_t *input_sum;
} dg_replay_opts;

int dg_replay(const dg_replay_opts *o);

#endif
