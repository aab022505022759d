/*
 * replay_check.h: what the replay refuses before it writes anything (issue 18, "validation before
 * work"). Each check reports one line naming the trace and the problem, and returns -1.
 *
 *   dg_replay_check           the trace's indices (no step, layer or head index twice), the memory a
 *                             replay of these policies and densities needs against what this process
 *                             can have (refused, with the size, when it cannot fit; a rough time on
 *                             stderr when it is long), and the data of every unit: scores that fp32
 *                             cannot resolve (scale * max|q| * max|k| above DG_SCORE_LIMIT, e.g.
 *                             q = 3e38 or q, k x 1e18) and values past DG_VALUE_LIMIT are refused,
 *                             naming the unit (a unit whose V is all zero is replayed and left out of
 *                             metrics.csv: replay.c); with o->check_as_read the data is left to
 *                             dg_replay_check_unit as the replay reads it
 *   dg_replay_check_unit      one unit's data, as above
 *   dg_replay_check_schedule  a schedule against the trace's own steps and layers: a warm-up that
 *                             covers every step, anchors and dense layers that do not exist
 *                             (used by `dsgap replay`; a batch cell replays a one-layer view, whose
 *                             schedule the experiment checks against the whole trace)
 *   dg_replay_estimate        the estimate itself (bytes and floating-point operations)
 */
#ifndef DG_REPLAY_CHECK_H
#define DG_REPLAY_CHECK_H

#include "replay/replay.h"
#include "trace/trace.h"

/* The largest score bound (scale * max_i |q_i| * max_j |k_j|, in double) a unit may have: past
 * it, one fp32 ulp of a score is more than 0.06 and the softmax of different computation orders
 * (dense, exact scores, sparse) disagree by factors, not rounding. */
#define DG_SCORE_LIMIT 1e6
/* The largest |v| a unit may have: an output's square (its error norms) stays inside fp32 (v = 3e38
 * gave NaN metrics with exit 0 once) */
#define DG_VALUE_LIMIT 1e18

typedef struct {
	double bytes;       /* peak memory of the replay, at least */
	double oracle_bytes; /* of which the per-query key lists (group=query) */
	double flops;       /* floating-point operations of the whole replay, roughly */
	long units;
} dg_replay_estimate_t;

void dg_replay_estimate(const dg_replay_opts *o, const dg_trace_meta *m, dg_replay_estimate_t *e);
/* Bytes this process can still allocate: MemAvailable, capped by RLIMIT_AS / RLIMIT_DATA. */
double dg_memory_available(void);

int dg_replay_check(const dg_replay_opts *o, const dg_trace_meta *m);
int dg_replay_check_unit(const dg_trace *t, int s, int l, int h, const float *q, const float *k, const float *v);
int dg_replay_check_schedule(const char *path, const dg_schedule *s, const dg_trace_meta *m);

#endif
