/*
 * api_contexts.c: libdsgap's contexts leave nothing behind (issue 22: "no leak over 100 contexts
 * created and destroyed, checked under ASan"). Built with AddressSanitizer, UBSan and LeakSanitizer
 * against libdsgap_asan.so (the library compiled with the same sanitizers, tests/CMakeLists.txt), on
 * the public ABI alone (include/dsgap.h), CPU backend. 100 contexts, each of another kind: dense,
 * ladder rungs, mc-sparse (warm-up, anchors, dense layers, its residual reused across steps,
 * cfg_meta=shared, top-p budget), peers (svg2, sparge, xattention, radial, sta, ditfastattn,
 * chipmunk, pisa), per-layer densities, a text prefix, bf16/fp16/fp32; each attends 4 steps x 2
 * layers x 2 CFG branches; every 10th also meets the failures that return early (bad policy,
 * schedule, density, index, dtype). Then LeakSanitizer's check: no leak. A negative control shows
 * that the check sees one: a context made and never destroyed is reported (its pointer hidden from
 * the scan meanwhile), then freed.
 *   build/tests/api_contexts      (ctest -R api_contexts; label cpu)
 */
#include <sanitizer/lsan_interface.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsgap.h"
#include "testhelp.h"

#define H 2
#define D 64
#define L 2
#define B 2
#define STEPS 4
#define CONTEXTS 100
#define MASK ((uintptr_t)0x5a5a5a5a5a5a5a5aull)

static dsgap_config config(const char *spec, const double *rho, int nrho, const char *sched, int text)
{
	/* 2 x 8 x 8 latent tokens after `text` text tokens */
	return (dsgap_config){ DSGAP_ABI_VERSION, spec, rho, nrho, sched, L, H, D, B, 2, 8, 8, text, "cpu" };
}

/* (tokens, heads, D) contiguous, of dtype dt: deterministic values in [-2, 2) */
static void *tensor(int n, dsgap_dtype dt, unsigned seed, dsgap_tensor *t)
{
	size_t len = (size_t)n * H * D, es = dt == DSGAP_FP32 ? 4 : 2;
	unsigned char *buf = malloc(len * es);
	uint32_t x = seed * 2654435761u + 1;
	for (size_t i = 0; i < len; i++) {
		x = x * 1664525u + 1013904223u;
		float f = (float)(x >> 8) / (float)(1 << 24) * 4 - 2;
		uint32_t u;
		memcpy(&u, &f, 4);
		if (dt == DSGAP_FP32)
			memcpy(buf + 4 * i, &f, 4);
		else if (dt == DSGAP_BF16)
			((uint16_t *)buf)[i] = (uint16_t)(u >> 16);
		else /* fp16 of a value in [-2, 2): sign, exponent 15 - k, 10 mantissa bits */
			((uint16_t *)buf)[i] = (uint16_t)((x >> 31) << 15 | (13 + (x >> 29 & 1)) << 10 | (x >> 8 & 0x3ff));
	}
	*t = (dsgap_tensor){ buf, H * D, D, 1 };
	return buf;
}

/* one context: made, every (step, layer, branch) attended, on every 10th the early failures, freed;
 * 1 if all of it went as it should */
static int one_context(int i)
{
	static const struct { const char *spec, *sched; } kinds[] = {
		{ "dense", "" },
		{ "est-block", "" },
		{ "oracle-tile", "warmup=1" },
		{ "oracle+res", "warmup=1" },
		{ "baseline", "warmup=2" },
		{ "mc-sparse", "warmup=1" },
		{ "mc-sparse", "warmup=1,anchors=1;3,dense_layers=0" },
		{ "mc-sparse/cfg_meta=shared", "warmup=1" },
		{ "mc-sparse/budget=topp:0.9", "warmup=1" },
		{ "svg2", "warmup=1" },
		{ "spargeattn/theta=-0.1/budget=topk", "warmup=1" },
		{ "xattention", "warmup=1" },
		{ "radial", "" },
		{ "sta", "" },
		{ "ditfastattn", "warmup=2" },
		{ "chipmunk", "warmup=2" },
		{ "pisa", "warmup=1" },
	};
	const int nk = sizeof kinds / sizeof *kinds;
	const dsgap_dtype dts[3] = { DSGAP_BF16, DSGAP_FP16, DSGAP_FP32 };
	double rho = 0.3, lrho[L] = { 0.25, 0.5 };
	int text = i % 3 == 0 ? 16 : 0, n = text + 2 * 8 * 8;
	dsgap_dtype dt = dts[i % 3];
	dsgap_config c = config(kinds[i % nk].spec, i % 4 == 1 ? lrho : &rho, i % 4 == 1 ? L : 1, kinds[i % nk].sched, text);
	dsgap_context *ctx;
	if (dsgap_context_create(&c, &ctx)) {
		printf("     context %d (%s, %s): %s\n", i, c.policy, c.schedule, dsgap_last_error(NULL));
		return 0;
	}
	dsgap_tensor q, k, v, o;
	void *bufs[4] = { tensor(n, dt, 4 * i, &q), tensor(n, dt, 4 * i + 1, &k), tensor(n, dt, 4 * i + 2, &v),
			  tensor(n, dt, 4 * i + 3, &o) };
	int ok = 1;
	for (int s = 0; s < STEPS; s++)
		for (int l = 0; l < L; l++)
			for (int b = 0; b < B; b++)
				if (dsgap_attend(ctx, s, l, b, &q, &k, &v, &o, dt, n, NULL)) {
					printf("     context %d (%s): step %d: %s\n", i, c.policy, s, dsgap_last_error(ctx));
					ok = 0;
				}
	if (i % 10 == 0) { /* the early returns, each with its message */
		dsgap_config bad[3] = { config("no-such-policy", &rho, 1, "", 0), config("mc-sparse", &rho, 1, "warmup=x", 0),
					config("mc-sparse", (double[]){ 1.5 }, 1, "", 0) };
		for (int j = 0; j < 3; j++) {
			dsgap_context *none;
			ok &= dsgap_context_create(&bad[j], &none) == DSGAP_E_POLICY && !none;
		}
		ok &= dsgap_attend(ctx, 0, L, 0, &q, &k, &v, &o, dt, n, NULL) == DSGAP_E_INDEX;
		ok &= dsgap_attend(ctx, 0, 0, 0, &q, &k, &v, &o, (dsgap_dtype)7, n, NULL) == DSGAP_E_DTYPE;
		ok &= dsgap_attend(ctx, 0, 0, 0, &q, &k, &v, &o, dt, n + 1, NULL) == DSGAP_E_INDEX;
	}
	dsgap_stats st;
	ok &= dsgap_context_stats(ctx, &st) == DSGAP_OK && st.calls == (long long)STEPS * L * B * H;
	dsgap_context_destroy(ctx);
	for (int j = 0; j < 4; j++)
		free(bufs[j]);
	return ok;
}

static uintptr_t hidden; /* the control's context, masked: no pointer to it for the leak scan */

static void __attribute__((noinline)) make_hidden(void)
{
	double rho = 0.3;
	dsgap_config c = config("mc-sparse", &rho, 1, "warmup=1", 0);
	dsgap_context *ctx = NULL;
	dsgap_context_create(&c, &ctx);
	hidden = (uintptr_t)ctx ^ MASK;
}

int main(void)
{
	int ok = 0;
	for (int i = 0; i < CONTEXTS; i++)
		ok += one_context(i);
	CHECKF(ok == CONTEXTS, "%d contexts of 17 kinds made, attended (4 steps x 2 layers x 2 branches) and freed, "
	       "every 10th past the early failures (%d ok)", CONTEXTS, ok);
	CHECK("LeakSanitizer: nothing of them left allocated", __lsan_do_recoverable_leak_check() == 0);

	make_hidden();
	printf("     (the negative control: LeakSanitizer's report of one context follows)\n");
	fflush(stdout);
	CHECK("negative control: a context not destroyed is reported", hidden && __lsan_do_recoverable_leak_check() != 0);
	dsgap_context_destroy((dsgap_context *)(hidden ^ MASK));
	return test_report();
}
