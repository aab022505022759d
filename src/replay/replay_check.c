/*
 * replay_check.c: the replay's checks before any work (replay_check.h).
 */
#include "replay/replay_check.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "policy/select.h"
#include "util/util.h"


/* -1 after naming the first index that appears twice in v[n] */
static int check_unique(const char *path, const char *what, const int *v, int n)
{
	int j, i;
	if (dg_ints_repeat(v, n, &j, &i))
		return dg_error("%s: %s index %d appears twice in /%s_index (positions %d and %d)", path, what,
				v[i], what, j, i);
	return 0;
}

static double read_meminfo_available(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	if (!f)
		return -1;
	char line[256];
	double kib = -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "MemAvailable: %lf kB", &kib) == 1)
			break;
	fclose(f);
	return kib < 0 ? -1 : kib * 1024.0;
}

double dg_memory_available(void)
{
	double avail = read_meminfo_available();
	if (avail < 0) {
		long pages = sysconf(_SC_AVPHYS_PAGES), size = sysconf(_SC_PAGESIZE);
		avail = pages > 0 && size > 0 ? (double)pages * size : INFINITY;
	}
	/* a limit on the address space (ulimit -v) counts what the process has mapped already */
	double mapped = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f) {
		unsigned long pages;
		if (fscanf(f, "%lu", &pages) == 1)
			mapped = (double)pages * sysconf(_SC_PAGESIZE);
		fclose(f);
	}
	struct rlimit rl;
	if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
		double left = (double)rl.rlim_cur - mapped;
		avail = left < avail ? (left > 0 ? left : 0) : avail;
	}
	if (getrlimit(RLIMIT_DATA, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && (double)rl.rlim_cur < avail)
		avail = (double)rl.rlim_cur;
	return avail;
}

void dg_replay_estimate(const dg_replay_opts *o, const dg_trace_meta *m, dg_replay_estimate_t *e)
{
	double n = m->tokens, d = m->head_dim, nd = n * d;
	double groups = ceil(n / DG_GROUP_SIZE);
	memset(e, 0, sizeof *e);
	e->units = (long)m->steps * m->layers * m->heads;
	/* Q, K, V twice (the reader thread's next unit), the dense O, LSE, the sparse output twice,
	 * the retained mass */
	e->bytes = 4.0 * (9 * nd + 2 * n);
	double per_unit = 4 * n * n * d; /* the dense pass */
	bool scores = false;
	for (int p = 0; p < o->npolicies; p++) {
		const dg_policy *pol = &o->policies[p];
		if (pol->dense)
			continue;
		/* policies with the same selection switches share their key lists (policy_run.c) */
		bool shared = false;
		for (int q = 0; q < p && !shared && !dg_policy_is_peer(pol); q++) {
			const dg_policy *a = &o->policies[q];
			shared = !a->dense && !dg_policy_is_peer(a) && a->group == pol->group && a->kv == pol->kv &&
				 a->score == pol->score && a->budget == pol->budget && a->topp == pol->topp &&
				 a->sink_lo == pol->sink_lo && a->sink_hi == pol->sink_hi;
		}
		for (int r = 0; r < o->ndensities; r++) {
			/* the keys each group keeps: top-k at the density; top-p at least one block */
			double keys = pol->budget == DG_BUDGET_TOPK ? dg_topk_count(o->densities[r], m->tokens)
								     : fmin(n, DG_KV_BLOCK_SIZE);
			keys += pol->sink_hi > pol->sink_lo ? pol->sink_hi - pol->sink_lo : 0;
			keys = fmin(keys, n);
			/* its key lists live until the end of a (layer, head) stream */
			if (shared) {
				/* counted with the first policy of the same selection */
			} else if (pol->group == DG_GROUP_QUERY) {
				double b = n * keys * 4.0 + (n + 1) * 8.0;
				e->oracle_bytes += b;
				e->bytes += b;
			} else {
				e->bytes += groups * keys * 4.0 + (groups + 1) * 8.0;
			}
			if (pol->residual == DG_RESIDUAL_CACHED)
				e->bytes += 4.0 * nd;
			per_unit += 4 * n * keys * d;
			scores |= pol->score == DG_SCORE_EXACT || pol->group == DG_GROUP_QUERY;
		}
	}
	if (scores) {
		/* one exact pass: scores of a grouping (groups, n), a probability row per thread */
		e->bytes += groups * n * 4.0 + 4.0 * n * omp_get_max_threads();
		per_unit += 2 * n * n * d;
	}
	e->flops = per_unit * e->units;
}

/* The unit's data: -1 after naming it when fp32 cannot resolve its scores. (A unit whose V is all
 * zero is replayed and excluded from metrics.csv with a warning: replay.c.) */
int dg_replay_check_unit(const dg_trace *t, int s, int l, int h, const float *q, const float *k, const float *v)
{
	const dg_trace_meta *m = &t->meta;
	int n = m->tokens, d = m->head_dim;
	double q2 = 0, k2 = 0;
	for (int i = 0; i < n; i++) {
		double a = 0, b = 0;
		for (int c = 0; c < d; c++) {
			double x = q[(size_t)i * d + c], y = k[(size_t)i * d + c];
			a += x * x;
			b += y * y;
		}
		q2 = a > q2 ? a : q2;
		k2 = b > k2 ? b : k2;
	}
	double vmax = 0;
	for (size_t i = 0; i < (size_t)n * d; i++)
		vmax = fabs(v[i]) > vmax ? fabs(v[i]) : vmax;
	if (!(vmax <= DG_VALUE_LIMIT))
		return dg_error("%s: unit (step %d, layer %d, head %d): max |v| %.3g, beyond %.0e, where the squared "
				"outputs of its error norms leave fp32", t->path, m->step_index[s], m->layer_index[l],
				m->head_index[h], vmax, DG_VALUE_LIMIT);
	double bound = sqrt(q2) * sqrt(k2) / sqrt((double)d);
	if (!(bound <= DG_SCORE_LIMIT))
		return dg_error("%s: unit (step %d, layer %d, head %d): scores reach %.3g (max |q| %.3g, max "
				"|k| %.3g), beyond %.0e, where fp32 attention is not exact enough to measure",
				t->path, m->step_index[s], m->layer_index[l], m->head_index[h], bound, sqrt(q2),
				sqrt(k2), DG_SCORE_LIMIT);
	return 0;
}

static int check_data(const dg_replay_opts *o)
{
	dg_trace t;
	if (dg_trace_open(&t, o->trace_path))
		return -1;
	const dg_trace_meta *m = &t.meta;
	size_t nd = (size_t)m->tokens * m->head_dim;
	float *q = dg_malloc(nd * sizeof(float)), *k = dg_malloc(nd * sizeof(float)), *v = dg_malloc(nd * sizeof(float));
	int rc = 0;
	for (int l = 0; l < m->layers && !rc; l++)
		for (int h = 0; h < m->heads && !rc; h++)
			for (int s = 0; s < m->steps && !rc; s++)
				rc = dg_trace_read(&t, DG_QKV_Q, s, l, h, q) || dg_trace_read(&t, DG_QKV_K, s, l, h, k) ||
						     dg_trace_read(&t, DG_QKV_V, s, l, h, v) || dg_replay_check_unit(&t, s, l, h, q, k, v)
					     ? -1
					     : 0;
	free(q), free(k), free(v);
	dg_trace_close(&t);
	return rc;
}

int dg_replay_check(const dg_replay_opts *o, const dg_trace_meta *m)
{
	const char *path = o->trace_path;
	if (check_unique(path, "step", m->step_index, m->steps) ||
	    check_unique(path, "layer", m->layer_index, m->layers) ||
	    check_unique(path, "head", m->head_index, m->heads))
		return -1;
	dg_replay_estimate_t e;
	dg_replay_estimate(o, m, &e);
	double avail = dg_memory_available();
	if (e.bytes > avail) {
		char part[96] = "", need[32], have[32], lists[32];
		if (e.oracle_bytes > 0)
			snprintf(part, sizeof part, " (%s of them the per-query oracle's key lists)",
				 dg_bytes_str(e.oracle_bytes, lists, sizeof lists));
		return dg_error("%s: a replay of %d tokens x %d dims with these policies needs at least %s "
				"of memory%s but %s is available", path, m->tokens, m->head_dim,
				dg_bytes_str(e.bytes, need, sizeof need), part, dg_bytes_str(avail, have, sizeof have));
	}
	bool gpu = o->device && !strcmp(o->device, "gpu");
	double secs = dg_cpu_seconds(e.flops);
	char what[256];
	char mem[32];
	snprintf(what, sizeof what, "%s: %ld unit%s of %d tokens, %.2g flop, %s of memory", path, e.units,
		 e.units == 1 ? "" : "s", m->tokens, e.flops, dg_bytes_str(e.bytes, mem, sizeof mem));
	if (!gpu && dg_work_bound("replay", what, secs, o->progress && secs > 300,
				  "--device gpu, or dsgap run (a cell per (layer, head), --shard, --workers)"))
		return -1;
	return o->check_as_read ? 0 : check_data(o);
}

int dg_replay_check_schedule(const char *path, const dg_schedule *s, const dg_trace_meta *m)
{
	char why[256];
	if (dg_schedule_check_trace(s, m->step_index, m->steps, m->layer_index, m->layers, why, sizeof why))
		return dg_error("%s: schedule %s", path, why);
	return 0;
}
