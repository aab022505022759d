/*
 * callspeed.c: dsgap callspeed's measurements (callspeed.h): the DiT entry point's and the backend's
 * call timings per policy, amortised over its refresh schedule, appended as CSV rows.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/policy_run.h"
#include "bench/callspeed.h"
#include "dit/dit_attn.h"
#include "dit/wan_ops.h"
#include "policy/presets.h"
#include "util/csv.h"
#include "util/util.h"

#define HEADER "path,pv,policy,density_target,n,grid,heads,d,refresh_every,density,dense_ms,call_ms,anchor_ms," \
	       "amortised_ms,meta_ms,reps,device,date,commit"

typedef struct {
	double dense, call, anchor, density; /* seconds; density of the timed calls */
	double meta; /* metadata seconds of one refresh: the anchor's (refresh=anchor), a call's (refresh=step) */
} cs_times;

/* x (rows, width): row scales in [0.5, 2), values triangular on (-1, 1) (two 24-bit uniforms of one
 * xorshift step) times the scale * 2.45 (unit variance); rows in parallel, each from its own seed */
static void fill_random(float *x, size_t rows, int width, uint64_t seed)
{
#pragma omp parallel for schedule(static)
	for (size_t r = 0; r < rows; r++) {
		uint64_t s = (seed + 1) * 0xD1B54A32D192ED03ull ^ (r + 1) * 0x9E3779B97F4A7C15ull;
		s ^= s >> 31, s *= 0xBF58476D1CE4E5B9ull, s ^= s >> 29, s |= 1;
		float scale = 2.45f * (0.5f + 1.5f * (float)(s >> 40) / (float)(1 << 24));
		for (int c = 0; c < width; c++) {
			s ^= s << 13, s ^= s >> 7, s ^= s << 17;
			float a = (float)((s >> 40) & 0xFFFFFF), b = (float)((s >> 8) & 0xFFFFFF);
			x[r * width + c] = scale * ((a + b) / (float)(1 << 24) - 1.0f);
		}
	}
}

/* --- path dit: the DiT entry point ------------------------------------------------------------------ */

typedef struct {
	dg_wan_ops *ops;
	float *q, *k, *v, *out; /* (heads, n, d) operand buffers; out (n, heads*d) */
} dit_bufs;

/* One instance of the entry point for p (NULL: dense) run for 2 + reps steps: step 0 (the anchor of a
 * refresh=anchor policy), step 1 untimed (a refresh=step policy's first metadata: cold k-means, a
 * static mask's first build), steps 2..reps+1 timed: t->call their median, t->anchor step 0's wall
 * seconds, t->density that of the timed steps, t->meta the metadata seconds of step 0 (refresh=anchor:
 * the anchor's, device time) or, refresh=step, t->call less a timed step's mean sparse attention
 * (device time of the attend phase). 0 or -1. */
static int dit_steps(dit_bufs *b, const dg_policy *p, double rho, const int grid[3], int heads, int d,
		     int reps, cs_times *t)
{
	dg_schedule sc;
	dg_schedule_parse("warmup=1", &sc);
	dg_dit_attn *a = dg_dit_attn_new(b->ops, p, rho, &sc, grid, 1, heads, d, 1);
	if (!a)
		return -1;
	double *w = dg_malloc((size_t)(reps + 2) * sizeof *w);
	dg_dit_attn_stats s0 = { 0 }, s1;
	int rc = 0;
	for (int step = 0; step <= reps + 1 && !rc; step++) {
		if (step == 2)
			dg_dit_attn_get_stats(a, &s0);
		dg_attn_site site = { step, 0, 0, 1.0 - (double)step / (reps + 2) };
		b->ops->sync(b->ops);
		double t0 = dg_now();
		rc = dg_dit_attention(a, &site, b->q, b->k, b->v, b->out);
		b->ops->sync(b->ops);
		w[step] = dg_now() - t0;
	}
	dg_dit_attn_get_stats(a, &s1);
	if (!rc) {
		t->anchor = w[0];
		t->call = dg_median(w + 2, reps);
		/* refresh=step: the call beyond its sparse attention, what the metadata adds to the call
		 * (device and host; work overlapped with other work not counted twice) */
		double attend = (s1.attend_seconds - s0.attend_seconds) / reps;
		t->meta = p && p->refresh == DG_REFRESH_STEP ? fmax(0, t->call - attend) : s0.meta_seconds;
		double full = s1.full_pairs - s0.full_pairs;
		t->density = full > 0 ? (s1.pairs - s0.pairs) / full : 1;
	}
	free(w);
	dg_dit_attn_free(a);
	return rc;
}

/* --- path backend: the replay's backend, one head at a time ------------------------------------------ */

/* Policy p (NULL: dense) on every head of q, k, v (heads, n, d) host for 2 + reps steps on be (step 1
 * untimed, as dit_steps): t->dense the median dense seconds of a call (summed over heads), t->call the
 * median sparse seconds of steps 2..reps+1 (with their metadata for refresh=step), t->anchor step 0's
 * metadata seconds, t->meta that (refresh=anchor) or a timed step's mean metadata seconds
 * (refresh=step). */
static int backend_steps(dg_backend *be, const dg_policy *p, double rho, const int grid[3], int heads,
			 const float *q, const float *k, const float *v, int reps, cs_times *t)
{
	size_t nd = (size_t)be->n * be->d;
	dg_policy_run *runs = dg_calloc((size_t)heads, sizeof *runs);
	dg_schedule sc;
	dg_schedule_parse("warmup=1", &sc);
	double *dense = dg_calloc((size_t)reps + 2, sizeof *dense), *call = dg_calloc((size_t)reps + 2, sizeof *call);
	double meta0 = 0, meta = 0, pairs = 0, full = 0;
	int rc = 0;
	for (int h = 0; p && h < heads; h++)
		dg_policy_run_init(&runs[h], p, rho);
	for (int step = 0; step <= reps + 1 && !rc; step++) {
		for (int h = 0; h < heads && !rc; h++) {
			be->load(be, q + h * nd, k + h * nd, v + h * nd);
			dense[step] += be->dense(be);
			if (!p)
				continue;
			dg_policy_run *r = &runs[h];
			dg_policy_run_plan(r, &sc, step, 0);
			double m = r->meta_s;
			if ((rc = dg_policy_run_metadata(be, &r, 1, grid, 0)))
				break;
			dg_policy_out o = dg_policy_run_apply(be, r, step, NULL, NULL, true);
			if (step == 0)
				meta0 += r->meta_s - m;
			else if (step >= 2) {
				call[step] += o.seconds + (r->p->refresh == DG_REFRESH_STEP ? r->meta_s - m : 0);
				meta += r->meta_s - m;
				pairs += (double)o.pairs, full += (double)be->n * be->n;
			}
		}
	}
	if (!rc) {
		t->dense = dg_median(dense + 2, reps);
		t->call = p ? dg_median(call + 2, reps) : t->dense;
		t->anchor = meta0;
		t->meta = p && p->refresh == DG_REFRESH_STEP ? meta / reps : meta0;
		t->density = full > 0 ? pairs / full : 1;
	}
	for (int h = 0; p && h < heads; h++)
		dg_policy_run_clear(be, &runs[h]);
	free(runs), free(dense), free(call);
	return rc;
}

/* --- the sweep ------------------------------------------------------------------------------------------ */

typedef struct {
	FILE *f;
	char device[192], date[32];
	const char *commit;
} cs_sink;

static void put_row(cs_sink *s, const char *path, const char *pv, const char *policy, double rho, const int g[3],
		    int heads, int d, int every, const cs_times *t, int reps)
{
	int n = g[0] * g[1] * g[2];
	double amort = t->call + (every > 1 ? t->anchor / every : 0);
	fprintf(s->f, "%s,%s,%s,%g,%d,%dx%dx%d,%d,%d,%d,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%d,", path, pv, policy, rho, n,
		g[0], g[1], g[2], heads, d, every, t->density, 1e3 * t->dense, 1e3 * t->call, 1e3 * t->anchor,
		1e3 * amort, 1e3 * t->meta, reps);
	dg_csv_field(s->f, s->device);
	fprintf(s->f, ",%s,%s\n", s->date, s->commit);
	fflush(s->f);
	printf("%-7s %-7s %-32s rho %-5g n %7d heads %2d: dense %9.3f ms  call %9.3f ms  anchor %9.3f ms  "
	       "amortised %9.3f ms (every %d)  density %.3f\n", path, pv, policy, rho, n, heads, 1e3 * t->dense,
	       1e3 * t->call, 1e3 * t->anchor, 1e3 * amort, every, t->density);
	fflush(stdout);
}

/* reps at n tokens: fewer at large n (at least 2) */
static int reps_at(int reps, int n)
{
	int r = n > 65536 ? reps / 3 : n > 16384 ? reps / 2 : reps;
	return r < 2 ? 2 : r;
}

/* The flops of one configuration (n tokens, H heads) on the CPU: a dense call is 4 n^2 d H; the dense
 * reference runs 2 + reps calls; each policy x density a warm-up (an anchor, 2 sparse calls) and
 * 2 + reps steps (an anchor, sparse calls at about its density); per path and P.V mode. */
static double config_flops(const dg_callspeed_opts *o, int n, int H)
{
	double dense = 4.0 * n * (double)n * o->d * H, reps = reps_at(o->reps, n), calls = 2 + reps;
	for (int r = 0; r < o->ndens; r++)
		calls += o->npol * (2 + (3 + reps) * o->dens[r]);
	int modes = (strcmp(o->path, "backend") ? 1 : 0) + (strcmp(o->path, "dit") ? 2 : 0);
	return dense * calls * modes;
}

/* The whole sweep's time on the CPU estimated from the grids and heads, bounded before any work
 * (util.h); --budget stops it after the configuration that passes it */
static int bound_work(const dg_callspeed_opts *o)
{
	double flops = 0, largest = 0;
	for (int hi = 0; hi < o->nheads; hi++)
		for (int gi = 0; gi < o->ngrids; gi++) {
			const int *g = o->grids[gi];
			double f = config_flops(o, g[0] * g[1] * g[2], o->heads[hi]);
			flops += f;
			largest = f > largest ? f : largest;
		}
	double secs = dg_cpu_seconds(flops);
	if (o->budget > 0 && secs > o->budget + dg_cpu_seconds(largest))
		secs = o->budget + dg_cpu_seconds(largest);
	char what[128];
	snprintf(what, sizeof what, "%d grid%s x %d head count%s, %.2g flop", o->ngrids, o->ngrids == 1 ? "" : "s",
		 o->nheads, o->nheads == 1 ? "" : "s", flops);
	return dg_work_bound("callspeed", what, secs, secs > 300,
			     "smaller --grids or --heads, --budget S, or --device gpu");
}

static int sweep(const dg_callspeed_opts *o, cs_sink *s, bool gpu)
{
	bool do_dit = strcmp(o->path, "backend"), do_be = strcmp(o->path, "dit");
	double t0 = dg_now();
	/* slow[path_mode][policy]: the fewest tokens at which the policy's call exceeded max_call (0: none);
	 * it is not run at that many tokens or more from then on (at any later, larger head count too) */
	int slow[3][64] = { { 0 } };
	dg_wan_ops *ops = do_dit ? (gpu ? dg_wan_ops_gpu() : dg_wan_ops_cpu()) : NULL;
	if (do_dit && !ops)
		return -1;
	int rc = 0;
	double work = 0, done = 0; /* flops of the whole sweep and of the configurations measured */
	for (int hi = 0; hi < o->nheads; hi++)
		for (int gi = 0; gi < o->ngrids; gi++)
			work += config_flops(o, o->grids[gi][0] * o->grids[gi][1] * o->grids[gi][2], o->heads[hi]);
	dg_progress pr = { 0 };
	for (int hi = 0; hi < o->nheads && !rc; hi++) {
		for (int gi = 0; gi < o->ngrids && !rc; gi++) {
			if (o->budget > 0 && dg_now() - t0 > o->budget) {
				printf("callspeed: --budget %.0f s spent: heads %d from grid %dx%dx%d on not measured\n",
				       o->budget, o->heads[hi], o->grids[gi][0], o->grids[gi][1], o->grids[gi][2]);
				goto out;
			}
			const int *g = o->grids[gi];
			int H = o->heads[hi], d = o->d, n = g[0] * g[1] * g[2], reps = reps_at(o->reps, n);
			if (!gpu) { /* the time left: the estimate, scaled by how the measured part went */
				char eta[32];
				double el = dg_now() - t0, left = done > 0 ? el / done * (work - done) : dg_cpu_seconds(work);
				dg_progress_show(&pr, false, "callspeed: grid %dx%dx%d x %d heads, %.0f%% of the work done, "
						 "ETA %s", g[0], g[1], g[2], H, 100 * done / work,
						 dg_duration_str(left, eta, sizeof eta));
				done += config_flops(o, n, H);
			}
			size_t total = (size_t)H * n * d;
			float *host = dg_malloc(total * sizeof *host);
			if (do_dit) {
				dit_bufs b = { ops, ops->alloc_operand(ops, total), ops->alloc_operand(ops, total),
					       ops->alloc_operand(ops, total), ops->alloc_operand(ops, total) };
				float *x = ops->alloc(ops, total);
				float *dst[3] = { b.q, b.k, b.v };
				for (int i = 0; i < 3; i++) { /* token-major random, into the heads */
					fill_random(host, (size_t)n * H, d, 1000u * (unsigned)gi + 10u * (unsigned)hi + (unsigned)i);
					ops->upload(ops, x, host, total);
					ops->to_heads(ops, x, n, H, d, NULL, 0, NULL, NULL, dst[i]);
				}
				ops->release(ops, x);
				cs_times dn = { 0 }, warm = { 0 };
				if (!(rc = dit_steps(&b, NULL, 1, g, H, d, 1, &warm)) &&
				    !(rc = dit_steps(&b, NULL, 1, g, H, d, reps, &dn))) {
					dn.dense = dn.call, dn.anchor = 0;
					put_row(s, "dit", "fast", "dense", 1, g, H, d, 1, &dn, reps);
				}
				for (int p = 0; p < o->npol && !rc; p++)
					for (int r = 0; r < o->ndens && !rc; r++) {
						if (slow[0][p] && n >= slow[0][p])
							continue;
						cs_times t;
						if ((rc = dit_steps(&b, &o->pol[p], o->dens[r], g, H, d, 1, &warm)))
							break;
						/* a call over --max-call in the warm-up: its one timed call is the row */
						bool once = warm.call > o->max_call;
						if (once)
							t = warm;
						else if ((rc = dit_steps(&b, &o->pol[p], o->dens[r], g, H, d, reps, &t)))
							break;
						bool step = o->pol[p].refresh == DG_REFRESH_STEP;
						t.dense = dn.dense;
						t.anchor = step ? 0 : fmax(0, t.anchor - dn.dense);
						put_row(s, "dit", "fast", o->pol[p].name, o->dens[r], g, H, d, step ? 1 : o->every,
							&t, once ? 1 : reps);
						if (t.call > o->max_call && (!slow[0][p] || n < slow[0][p]))
							slow[0][p] = n;
					}
				ops->release(ops, b.q), ops->release(ops, b.k), ops->release(ops, b.v);
				ops->release(ops, b.out);
			}
			if (do_be && !rc) {
				dg_backend *be = gpu ? dg_backend_gpu(n, d) : dg_backend_cpu(n, d);
				float *k = dg_malloc(total * sizeof *k), *v = dg_malloc(total * sizeof *v);
				fill_random(host, (size_t)H * n, d, 7u + (unsigned)gi);
				fill_random(k, (size_t)H * n, d, 8u + (unsigned)gi);
				fill_random(v, (size_t)H * n, d, 9u + (unsigned)gi);
				for (int m = 0; be && m < 2 && !rc; m++) {
					const char *pv = m ? "precise" : "fast";
					be->precise = m;
					cs_times dn, warm;
					if ((rc = backend_steps(be, NULL, 1, g, H, host, k, v, 1, &warm)) ||
					    (rc = backend_steps(be, NULL, 1, g, H, host, k, v, reps, &dn)))
						break;
					dn.anchor = 0;
					put_row(s, "backend", pv, "dense", 1, g, H, d, 1, &dn, reps);
					for (int p = 0; p < o->npol && !rc; p++)
						for (int r = 0; r < o->ndens && !rc; r++) {
							if (slow[1 + m][p] && n >= slow[1 + m][p])
								continue;
							cs_times t;
							if ((rc = backend_steps(be, &o->pol[p], o->dens[r], g, H, host, k, v, 1, &warm)))
								break;
							bool once = warm.call > o->max_call;
							if (once)
								t = warm;
							else if ((rc = backend_steps(be, &o->pol[p], o->dens[r], g, H, host, k, v, reps, &t)))
								break;
							bool step = o->pol[p].refresh == DG_REFRESH_STEP;
							t.dense = dn.dense;
							put_row(s, "backend", pv, o->pol[p].name, o->dens[r], g, H, d,
								step ? 1 : o->every, &t, once ? 1 : reps);
							if (t.call > o->max_call && (!slow[1 + m][p] || n < slow[1 + m][p]))
								slow[1 + m][p] = n;
						}
				}
				if (!be)
					rc = -1;
				else
					be->destroy(be);
				free(k), free(v);
			}
			free(host);
		}
	}
out:
	if (!gpu && pr.last > 0) {
		char el[32];
		dg_progress_show(&pr, true, "callspeed: %s in %s", rc ? "stopped" : "done",
				 dg_duration_str(dg_now() - t0, el, sizeof el));
	}
	if (ops)
		ops->destroy(ops);
	return rc;
}

int dg_callspeed(const dg_callspeed_opts *o)
{
	bool gpu = !strcmp(o->device, "gpu");
	if (gpu && !dg_backend_gpu_available())
		return dg_error("callspeed: no GPU (this build has no CUDA, or no device answers)");
	if (!gpu && bound_work(o))
		return -1;
	dg_out csv; /* rows never go into another file; published together at the end, or none */
	if (dg_csv_append_open(&csv, "callspeed", o->csv, HEADER, NULL))
		return -1;
	cs_sink s = { .f = csv.f, .commit = dg_git_commit() };
	dg_utc_now(s.date, sizeof s.date);
	snprintf(s.device, sizeof s.device, "%s", gpu ? "gpu" : dg_cpu_name());
	if (gpu) { /* the device's name, from a backend */
		dg_backend *be = dg_backend_gpu(128, o->d);
		if (be) {
			snprintf(s.device, sizeof s.device, "%s", be->device);
			be->destroy(be);
		}
	}
	int rc = sweep(o, &s, gpu);
	if (rc) {
		dg_out_abort(&csv);
		return -1;
	}
	return dg_out_commit(&csv) ? -1 : 0;
}
