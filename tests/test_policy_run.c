/*
 * test_policy_run.c: the dense pass that policy_run.h lets a caller skip (dg_policy_run_needs_dense),
 * on the CPU backend, whose load poisons the last unit's dense O, LSE and mass (NaN):
 *   - for every preset policy (ladder, factorial, peers), over a schedule with warm-up, an anchor and
 *     reuse steps, the outputs with the dense pass run only where needs_dense says are those with it
 *     run at every unit, bit for bit and finite (a skipped pass that was read gives NaN);
 *   - the skips happen where they should: every reuse step of refresh=anchor, and every step past the
 *     warm-up of refresh=step policies whose metadata is their own estimate (est-block, the peers'
 *     masks and scores); never for exact scores, a new residual or PISA's term.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/policy_run.h"
#include "policy/policy.h"
#include "testhelp.h"
#include "util/util.h"

enum { N = 512, D = 64, STEPS = 5 };
static const int GRID[3] = { 2, 16, 16 };

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void)
{
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return (rng >> 11) * 0x1p-53;
}
static double nrand(void) { return sqrt(-2 * log(urand() + 1e-300)) * cos(6.283185307179586 * urand()); }

/* q, k, v (STEPS, N, D): a random walk over the steps, as a denoising run's units drift */
static float *units(void)
{
	float *u = dg_malloc(sizeof(float) * 3 * STEPS * N * D);
	size_t s3 = (size_t)3 * N * D;
	for (size_t i = 0; i < s3; i++)
		u[i] = (float)nrand();
	for (int s = 1; s < STEPS; s++)
		for (size_t i = 0; i < s3; i++)
			u[s * s3 + i] = u[(s - 1) * s3 + i] + (float)(0.3 * nrand());
	return u;
}

/* the run of spec over the steps into out (STEPS, N, D); all_dense: the dense pass at every unit,
 * else where needs_dense says (skip[s] = it was skipped at step s). 0, or -1 if metadata failed. */
static int run(const char *spec, const dg_schedule *sc, const float *u, bool all_dense, float *out, bool *skip)
{
	dg_policy p;
	if (dg_policy_parse(spec, &p))
		return -1;
	dg_backend *be = dg_backend_cpu(N, D);
	dg_policy_run r;
	dg_policy_run_init(&r, &p, 0.25);
	dg_policy_run *rp = &r;
	int rc = 0;
	size_t nd = (size_t)N * D;
	for (int s = 0; s < STEPS && !rc; s++) {
		const float *q = u + (size_t)3 * s * nd;
		dg_policy_run_plan(&r, sc, s, 1);
		be->load(be, q, q + nd, q + 2 * nd);
		bool dense = all_dense || dg_policy_run_needs_dense(&r);
		if (skip)
			skip[s] = !dense;
		if (dense)
			be->dense(be);
		rc = dg_policy_run_metadata(be, &rp, 1, GRID, 0);
		if (!rc)
			dg_policy_run_apply(be, &r, s, NULL, out + s * nd, false);
	}
	dg_policy_run_clear(be, &r);
	be->destroy(be);
	return rc;
}

static void test_skips(void)
{
	static const struct {
		const char *spec;
		const char *skips; /* per step: 1 = the dense pass is skipped (warm-up 1: step 0, also the
				    * default anchor, the warm-up's last step) */
	} cases[] = {
		{ "est-block", "01111" },            /* its own pooled estimate every step */
		{ "est-block/residual=cached", "00000" }, /* R = O_dense - O_sparse every step */
		{ "oracle-block", "00000" },         /* exact scores read the dense LSE */
		{ "oracle+res", "00000" },
		{ "mc-sparse", "01111" },            /* the anchor, then reuse */
		{ "baseline", "01111" },
		{ "mc-residual", "01111" },
		{ "chipmunk", "01111" },
		{ "ditfastattn", "01111" },
		{ "sta", "01111" },                  /* a static mask */
		{ "radial", "01111" },
		{ "spargeattn", "01111" },           /* its own block scores */
		{ "xattention", "01111" },
		{ "svg2", "01111" },                 /* its own k-means and centroid scores */
		{ "pisa", "00000" },                 /* the first-order term reads the dense LSE */
	};
	dg_schedule sc;
	CHECK("schedule warmup=1", dg_schedule_parse("warmup=1", &sc) == 0);
	float *u = units();
	size_t all = (size_t)STEPS * N * D;
	float *a = dg_malloc(all * sizeof(float)), *b = dg_malloc(all * sizeof(float));
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		bool skip[STEPS];
		int ra = run(cases[c].spec, &sc, u, true, a, NULL);
		dg_poison(b, all);
		int rb = run(cases[c].spec, &sc, u, false, b, skip);
		char got[STEPS + 1];
		for (int s = 0; s < STEPS; s++)
			got[s] = skip[s] ? '1' : '0';
		got[STEPS] = 0;
		size_t bad = 0;
		for (size_t i = 0; i < all; i++)
			bad += !isfinite(b[i]) || memcmp(&a[i], &b[i], sizeof(float));
		CHECKF(ra == 0 && rb == 0 && bad == 0, "%s: outputs with the dense pass skipped where needs_dense "
		       "says = with it at every unit, bit for bit, finite (%zu differ)", cases[c].spec, bad);
		CHECKF(!strcmp(got, cases[c].skips), "%s: dense pass skipped at steps %s (want %s)", cases[c].spec,
		       got, cases[c].skips);
	}
	free(a), free(b), free(u);
}

int main(void)
{
	test_skips();
	return test_report();
}
