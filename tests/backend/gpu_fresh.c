/*
 * gpu_fresh.c: staleness (fresh=groups|keys|residual, issue 50; policy_run.h) on the GPU backend
 * against the CPU backend, its twin (whose outputs tests/backend/test_policy_run.c checks against an fp64
 * composition): dg_policy_run on both backends over an anchor and four reuse steps of drifting
 * random units (n = 1000 d = 64 and n = 2100 d = 128), mc-sparse and every fresh combination, also
 * with keys=bitmap (votes from compacted lists), mc-sr (kv=block) and mc-gr (pooled scores) with
 * fresh=keys, and a sparse_steps window: outputs within the GPU-vs-CPU tolerance (rel_l2 <= 1e-3,
 * as tests/backend/gpu_cache.c), through the device loads (load_device) as the DiT engine loads, and the
 * dense pass run only where dg_policy_run_needs_dense says (the loop's own skipping).
 * Exits 77 (skipped) without a CUDA device.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "backend/backend.h"
#include "backend/policy_run.h"
#include "testhelp.h"
#include "util/util.h"

enum { STEPS = 5 };
static int GRID[3];

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void)
{
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return (rng >> 11) * 0x1p-53;
}
static double nrand(void) { return sqrt(-2 * log(urand() + 1e-300)) * cos(6.283185307179586 * urand()); }

static double rel_l2(const float *a, const float *b, size_t n)
{
	double num = 0, den = 0;
	for (size_t i = 0; i < n; i++)
		num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), den += (double)b[i] * b[i];
	return sqrt(num / (den > 0 ? den : 1));
}

/* spec's outputs (STEPS, n, d) on backend be from units u (STEPS, 3, n, d); device: loaded from
 * device copies (dev, the same layout) as the DiT engine loads. 0 or -1. */
static int run(dg_backend *be, const char *spec, const dg_schedule *sc, const float *u, const float *dev, float *out)
{
	dg_policy p;
	if (dg_policy_parse(spec, &p))
		return -1;
	dg_policy_run r;
	dg_policy_run_init(&r, &p, 0.2);
	dg_policy_run *rp = &r;
	size_t nd = (size_t)be->n * be->d;
	int rc = 0;
	for (int s = 0; s < STEPS && !rc; s++) {
		const float *x = (dev ? dev : u) + (size_t)3 * s * nd;
		dg_policy_run_plan(&r, sc, s, 0);
		(dev ? be->load_device : be->load)(be, x, x + nd, x + 2 * nd);
		if (dg_policy_run_needs_dense(&r))
			be->dense(be);
		rc = dg_policy_run_metadata(be, &rp, 1, GRID, 0);
		if (!rc)
			dg_policy_run_apply(be, &r, s, NULL, out + s * nd, false);
	}
	dg_policy_run_clear(be, &r);
	return rc;
}

static void test_runs(int n, int d, int g0, int g1, int g2)
{
	GRID[0] = g0, GRID[1] = g1, GRID[2] = g2;
	size_t nd = (size_t)n * d, all = (size_t)STEPS * nd, s3 = 3 * nd;
	float *u = dg_malloc(STEPS * s3 * sizeof(float));
	for (size_t i = 0; i < s3; i++)
		u[i] = (float)nrand();
	for (int s = 1; s < STEPS; s++)
		for (size_t i = 0; i < s3; i++)
			u[s * s3 + i] = u[(s - 1) * s3 + i] + (float)(0.3 * nrand());
	float *dev = NULL;
	CHECK("device copy of the units", cudaMalloc((void **)&dev, STEPS * s3 * sizeof(float)) == cudaSuccess &&
	      cudaMemcpy(dev, u, STEPS * s3 * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
	dg_backend *gpu = dg_backend_gpu(n, d), *cpu = dg_backend_cpu(n, d);
	gpu->precise = true; /* fp32-level outputs, as the CPU's */
	dg_schedule sc, win;
	dg_schedule_parse("warmup=1", &sc);
	dg_schedule_parse("warmup=1,sparse_steps=2-3", &win);
	dg_schedule_resolve_anchors(&sc, NULL, STEPS);
	dg_schedule_resolve_anchors(&win, NULL, STEPS);
	static const char *const specs[] = {
		"mc-sparse", "mc-sparse/fresh=keys", "mc-sparse/fresh=groups", "mc-sparse/fresh=residual",
		"mc-sparse/fresh=groups+keys", "mc-sparse/fresh=groups+residual", "mc-sparse/fresh=groups+keys+residual",
		"mc-sparse/keys=bitmap/fresh=groups", "mc-sr/fresh=keys", "mc-gr/fresh=keys", "chipmunk/fresh=residual",
	};
	float *c = dg_malloc(all * sizeof(float)), *g = dg_malloc(all * sizeof(float));
	float *gd = dg_malloc(all * sizeof(float));
	for (size_t i = 0; i < sizeof specs / sizeof *specs; i++)
		for (int w = 0; w < 2; w++) {
			const dg_schedule *s = w ? &win : &sc;
			dg_poison(g, all), dg_poison(gd, all);
			int rc = run(cpu, specs[i], s, u, NULL, c) | run(gpu, specs[i], s, u, NULL, g) |
				 run(gpu, specs[i], s, u, dev, gd);
			double worst = 0, worst_d = 0;
			for (int st = 0; st < STEPS; st++) {
				double e = rel_l2(g + st * nd, c + st * nd, nd), f = rel_l2(gd + st * nd, c + st * nd, nd);
				worst = e > worst || isnan(e) ? e : worst, worst_d = f > worst_d || isnan(f) ? f : worst_d;
			}
			CHECKF(rc == 0 && worst <= 1e-3 && worst_d <= 1e-3, "n=%d d=%d %s%s: GPU outputs within 1e-3 of the "
			       "CPU's at every step (rel_l2 %.2e host loads, %.2e device loads)", n, d, specs[i],
			       w ? " sparse_steps=2-3" : "", worst, worst_d);
		}
	gpu->destroy(gpu), cpu->destroy(cpu);
	cudaFree(dev);
	free(u), free(c), free(g), free(gd);
}

int main(void)
{
	if (!dg_backend_gpu_available()) {
		printf("gpu_fresh: no CUDA device: skipped\n");
		return 77;
	}
	test_runs(1000, 64, 1, 25, 40);
	test_runs(2100, 128, 3, 20, 35);
	return test_report();
}
