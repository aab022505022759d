/*
 * test_api.c: libdsgap's C ABI (include/dsgap.h) on the CPU. Through the ABI, random bf16 Q/K/V in
 * non-contiguous layouts (token-major with padding, head-major, an element stride of 2) under every
 * policy family (dense, ladder rungs, mc-sparse with warm-up, anchors, dense layers and its residual
 * reused across steps, peers), both CFG branches, several steps and layers, against the same
 * computation written directly on policy_run.h and the CPU backend: bit-identical, since the
 * arithmetic is the same (fp32 on bf16-exact inputs, output rounded once). Also fp16 and fp32
 * tensors, per-layer densities, a text prefix, outputs poisoned (every element written, nothing
 * between them), the fp16 conversions, every error path (codes and messages, O untouched, the
 * context usable after), and 100 contexts made and freed (ASan: no leak).
 */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_internal.h"
#include "backend/backend.h"
#include "backend/policy_run.h"
#include "dsgap.h"
#include "policy/attention.h"
#include "policy/policy.h"
#include "testhelp.h"
#include "util/util.h"

#define H 2
#define D 64
#define L 2
#define B 2
#define STEPS 4
#define POISON16 0x7fc1u /* a bf16 / fp16 NaN */

/* ---------------------------------------------------------------------------------------------- */
/* strided tensors                                                                                 */

typedef struct {
	void *buf;
	size_t len;     /* elements in buf */
	dsgap_tensor t; /* t.data = buf */
	dsgap_dtype dt;
	int n;
} tens;

static size_t esize(dsgap_dtype dt) { return dt == DSGAP_FP32 ? 4 : 2; }

/* layout 0: token-major, padded; 1: head-major, padded; 2: token-major, element stride 2;
 * 3: token-major, other padding (the outputs) */
static void tens_new(tens *x, int layout, dsgap_dtype dt, int n)
{
	int64_t st, sh, sd = 1;
	switch (layout) {
	case 0: sh = D + 8, st = H * (D + 8) + 4; break;
	case 1: st = D, sh = (int64_t)n * D + 16; break;
	case 2: sd = 2, sh = 2 * D, st = 2 * D * H + 2; break;
	default: sh = D + 4, st = H * (D + 4) + 2; break;
	}
	x->len = (size_t)((n - 1) * st + (H - 1) * sh + (D - 1) * sd + 1 + 8);
	x->buf = malloc(x->len * esize(dt));
	x->t = (dsgap_tensor){ x->buf, st, sh, sd };
	x->dt = dt;
	x->n = n;
}

static void tens_poison(tens *x)
{
	for (size_t i = 0; i < x->len; i++)
		if (x->dt == DSGAP_FP32)
			((uint32_t *)x->buf)[i] = 0x7fc00001u;
		else
			((uint16_t *)x->buf)[i] = POISON16;
}

static size_t at(const tens *x, int t, int h, int e)
{
	return (size_t)(t * x->t.stride_token + h * x->t.stride_head + e * x->t.stride_dim);
}

/* x's elements = src (H, n, D) in x's dtype (src holds bf16 values: exact in every dtype) */
static void tens_fill(tens *x, const float *src)
{
	tens_poison(x);
	for (int h = 0; h < H; h++)
		for (int t = 0; t < x->n; t++)
			for (int e = 0; e < D; e++) {
				float f = src[((size_t)h * x->n + t) * D + e];
				size_t a = at(x, t, h, e);
				if (x->dt == DSGAP_BF16)
					((uint16_t *)x->buf)[a] = dg_f32_to_bf16(f);
				else if (x->dt == DSGAP_FP16)
					((uint16_t *)x->buf)[a] = dg_api_f32_to_f16(f);
				else
					((float *)x->buf)[a] = f;
			}
}

/* mismatches of x's elements against ref (n, H*D) fp32 rounded into x's dtype, bit for bit; *gaps:
 * positions between the elements that lost their poison */
static long tens_compare(const tens *x, const float *ref, long *gaps)
{
	char *is = calloc(x->len, 1);
	long bad = 0;
	for (int t = 0; t < x->n; t++)
		for (int h = 0; h < H; h++)
			for (int e = 0; e < D; e++) {
				size_t a = at(x, t, h, e);
				is[a] = 1;
				float f = ref[((size_t)t * H + h) * D + e];
				if (x->dt == DSGAP_BF16)
					bad += ((uint16_t *)x->buf)[a] != dg_f32_to_bf16(f) || isnan(f);
				else if (x->dt == DSGAP_FP16)
					bad += ((uint16_t *)x->buf)[a] != dg_api_f32_to_f16(f) || isnan(f);
				else
					bad += memcmp((float *)x->buf + a, &f, 4) != 0 || isnan(f);
			}
	*gaps = 0;
	for (size_t i = 0; i < x->len; i++)
		if (!is[i])
			*gaps += x->dt == DSGAP_FP32 ? ((uint32_t *)x->buf)[i] != 0x7fc00001u
						     : ((uint16_t *)x->buf)[i] != POISON16;
	free(is);
	return bad;
}

/* ---------------------------------------------------------------------------------------------- */
/* inputs: bf16 values, per (step, layer, branch), drifting slowly across steps                    */

static double gauss(uint64_t *s)
{
	double u[2];
	for (int i = 0; i < 2; i++) {
		*s = *s * 6364136223846793005ull + 1442695040888963407ull;
		u[i] = ((*s >> 11) + 0.5) / 9007199254740992.0;
	}
	return sqrt(-2 * log(u[0])) * cos(6.283185307179586 * u[1]);
}

/* q, k, v (H, n, D) of (step, layer, branch): a fixed part per (layer, branch) plus a step's drift */
static void make_qkv(int n, int step, int layer, int branch, float *q, float *k, float *v)
{
	size_t all = (size_t)H * n * D;
	float *dst[3] = { q, k, v };
	for (int t = 0; t < 3; t++) {
		uint64_t base = 1000 + 97 * layer + 13 * branch + t, drift = base * 31 + step;
		for (size_t i = 0; i < all; i++) {
			double x = 1.3 * gauss(&base) + 0.25 * gauss(&drift);
			dst[t][i] = dg_round_bf16((float)x);
		}
	}
}

/* ---------------------------------------------------------------------------------------------- */
/* the reference: policy_run.h on the CPU backend, one run per (branch, layer, head)               */

typedef struct {
	dg_policy p;
	dg_schedule sc;
	dg_backend *be;
	dg_policy_run runs[B * L * H];
	int grid[3], text, n;
} ref;

static void ref_init(ref *r, const char *spec, const double *rho, int nrho, const char *sched, const int grid[3],
		     int text)
{
	memset(r, 0, sizeof *r);
	if (dg_policy_parse(spec, &r->p) || dg_schedule_parse(sched, &r->sc)) /* its anchor resolved */
		exit(1);
	memcpy(r->grid, grid, sizeof r->grid);
	r->text = text;
	r->n = text + grid[0] * grid[1] * grid[2];
	r->be = dg_backend_cpu(r->n, D);
	for (int u = 0; u < B * L * H; u++)
		dg_policy_run_init(&r->runs[u], &r->p, rho[nrho > 1 ? u / H % L : 0]);
}

static void ref_free(ref *r)
{
	for (int u = 0; u < B * L * H; u++)
		dg_policy_run_clear(r->be, &r->runs[u]);
	r->be->destroy(r->be);
}

/* o (n, H*D) = the policy's output at (step, layer, branch) on q, k, v (H, n, D) */
static void ref_attend(ref *r, int step, int layer, int branch, const float *q, const float *k, const float *v,
		       float *o)
{
	int n = r->n;
	size_t hs = (size_t)n * D;
	float *oh = malloc(hs * sizeof(float));
	for (int h = 0; h < H; h++) {
		if (r->p.dense) {
			dg_attn_dense(q + h * hs, k + h * hs, v + h * hs, n, n, D, oh, NULL);
		} else {
			dg_policy_run *run = &r->runs[(branch * L + layer) * H + h];
			dg_policy_run_plan(run, &r->sc, step, layer);
			r->be->load(r->be, q + h * hs, k + h * hs, v + h * hs);
			if (dg_policy_run_needs_dense(run))
				r->be->dense(r->be);
			if (dg_policy_run_metadata(r->be, &run, 1, r->grid, r->text))
				exit(1);
			dg_policy_run_apply(r->be, run, step, NULL, oh, false);
		}
		for (int t = 0; t < n; t++)
			memcpy(o + ((size_t)t * H + h) * D, oh + (size_t)t * D, D * sizeof(float));
	}
	free(oh);
}

/* o (n, H*D) = dense attention of q, k, v (H, n, D) */
static void ref_dense(int n, const float *q, const float *k, const float *v, float *o)
{
	size_t hs = (size_t)n * D;
	float *oh = malloc(hs * sizeof(float));
	for (int h = 0; h < H; h++) {
		dg_attn_dense(q + h * hs, k + h * hs, v + h * hs, n, n, D, oh, NULL);
		for (int t = 0; t < n; t++)
			memcpy(o + ((size_t)t * H + h) * D, oh + (size_t)t * D, D * sizeof(float));
	}
	free(oh);
}

/* ---------------------------------------------------------------------------------------------- */

static dsgap_config config(const char *spec, const double *rho, int nrho, const char *sched, const int grid[3],
			   int text)
{
	return (dsgap_config){ DSGAP_ABI_VERSION, spec, rho, nrho, sched, L, H, D, B, grid[0], grid[1], grid[2],
			       text, "cpu" };
}

/* the policy through the ABI and the reference over STEPS steps x L layers x B branches */
static void equal_case(const char *spec, const double *rho, int nrho, const char *sched, const int grid[3],
		       int text, dsgap_dtype dt)
{
	static const char *dtn[] = { "bf16", "fp16", "fp32" };
	int n = text + grid[0] * grid[1] * grid[2];
	dsgap_config cfg = config(spec, rho, nrho, sched, grid, text);
	dsgap_context *ctx;
	int rc = dsgap_context_create(&cfg, &ctx);
	CHECKF(rc == DSGAP_OK, "%s [%s] %s: context made (%s)", spec, sched, dtn[dt], dsgap_last_error(NULL));
	if (rc)
		return;
	ref r;
	ref_init(&r, spec, rho, nrho, sched, grid, text);
	size_t all = (size_t)H * n * D;
	float *q = malloc(all * 4), *k = malloc(all * 4), *v = malloc(all * 4), *o = malloc(all * 4);
	tens tq, tk, tv, to;
	tens_new(&tq, 0, dt, n), tens_new(&tk, 1, dt, n), tens_new(&tv, 2, dt, n), tens_new(&to, 3, dt, n);
	/* a second context asked dsgap_site_is_dense before each call, and not called where it says 1:
	 * there the reference's output must be plain dense attention, and skipping the call must leave
	 * every later output as it was */
	dsgap_context *skip;
	rc = dsgap_context_create(&cfg, &skip);
	float *dense = malloc(all * 4);
	long bad = 0, gaps = 0, fails = 0, skipped = 0, skip_bad = 0;
	for (int s = 0; s < STEPS; s++)
		for (int l = 0; l < L; l++)
			for (int b = 0; b < B; b++) {
				make_qkv(n, s, l, b, q, k, v);
				tens_fill(&tq, q), tens_fill(&tk, k), tens_fill(&tv, v), tens_poison(&to);
				fails += dsgap_attend(ctx, s, l, b, &tq.t, &tk.t, &tv.t, &to.t, dt, n, NULL) != DSGAP_OK;
				ref_attend(&r, s, l, b, q, k, v, o);
				long g;
				bad += tens_compare(&to, o, &g);
				gaps += g;
				int is_dense = -1;
				fails += rc || dsgap_site_is_dense(skip, s, l, b, &is_dense) != DSGAP_OK;
				if (is_dense == 1) {
					skipped++;
					ref_dense(n, q, k, v, dense);
					for (size_t i = 0; i < all; i++)
						skip_bad += dense[i] != o[i];
				} else {
					tens_poison(&to);
					fails += dsgap_attend(skip, s, l, b, &tq.t, &tk.t, &tv.t, &to.t, dt, n, NULL) != DSGAP_OK;
					skip_bad += tens_compare(&to, o, &g) + g;
				}
			}
	/* the schedule's dense sites: every site of the dense policy and of dense layers; the warm-up
	 * steps, but for an anchor among them (refresh=anchor) or a residual kept from the step before
	 * (refresh=step with a cached residual: metadata at every step) */
	dg_schedule sc = r.sc;
	bool step_res = r.p.refresh == DG_REFRESH_STEP && r.p.residual == DG_RESIDUAL_CACHED;
	long want = 0;
	for (int s = 0; s < STEPS; s++)
		for (int l = 0; l < L; l++)
			want += B * (r.p.dense || dg_schedule_dense_layer(&sc, l) ||
				     (s < sc.warmup && !step_res &&
				      (r.p.refresh == DG_REFRESH_STEP || !dg_schedule_is_anchor(&sc, s))));
	CHECKF(skip_bad == 0 && skipped == want,
	       "%s [%s] %s: dsgap_site_is_dense says 1 at %ld of %d sites (the schedule's dense ones: %ld), each "
	       "plain dense attention, and the calls skipped there change no other output (%ld differ)", spec,
	       sched, dtn[dt], skipped, STEPS * L * B, want, skip_bad);
	dsgap_context_destroy(skip);
	free(dense);
	dsgap_stats st;
	dsgap_context_stats(ctx, &st);
	/* every key kept at this size and on random data: top-p budgets, xattention's threshold, the
	 * static masks of radial and sta; the others keep fewer pairs than dense */
	bool sparse = !r.p.dense, fewer = sparse && r.p.budget == DG_BUDGET_TOPK && r.p.mask != DG_MASK_RADIAL &&
						  r.p.mask != DG_MASK_STA;
	CHECKF(fails == 0 && bad == 0 && gaps == 0,
	       "%s [%s] %s%s: ABI = policy_run on the CPU backend bit for bit over %d steps x %d layers x %d "
	       "branches (%ld elements differ, %ld gaps written; %lld units, %lld sparse, density %.3f)",
	       spec, sched, dtn[dt], text ? " (text prefix)" : nrho > 1 ? " (densities per layer)" : "", STEPS, L, B,
	       bad, gaps, st.calls, st.sparse_calls, st.pairs / st.full_pairs);
	if (sparse)
		CHECKF(st.sparse_calls > 0 && (!fewer || st.pairs < st.full_pairs),
		       "%s [%s]: the policy's outputs, not dense ones, at some units%s", spec, sched,
		       fewer ? ", fewer pairs than dense" : "");
	CHECK("stats count every (branch, layer, head) unit", st.calls == (long long)STEPS * L * B * H);
	free(q), free(k), free(v), free(o);
	free(tq.buf), free(tk.buf), free(tv.buf), free(to.buf);
	ref_free(&r);
	dsgap_context_destroy(ctx);
}

static void test_f16(void)
{
	struct { float f; uint16_t h; } c[] = {
		{ 1.0f, 0x3c00 },       { -2.0f, 0xc000 },      { 65504.0f, 0x7bff },  { 65520.0f, 0x7c00 },
		{ 65519.0f, 0x7bff },   { 0x1p-24f, 0x0001 },   { 0x1p-25f, 0x0000 },  { 0x3p-25f, 0x0002 },
		{ 0x1p-14f, 0x0400 },   { 1.0f + 0x1p-11f, 0x3c00 }, { 1.0f + 0x3p-11f, 0x3c02 },
		{ INFINITY, 0x7c00 },   { -0.0f, 0x8000 },
	};
	int bad = 0;
	for (size_t i = 0; i < sizeof c / sizeof *c; i++)
		bad += dg_api_f32_to_f16(c[i].f) != c[i].h;
	CHECK("fp32 -> fp16 rounds to nearest even, subnormals and overflow included", bad == 0);
	bad = 0;
	for (uint32_t h = 0; h < 0x10000; h++) {
		float f = dg_api_f16_to_f32((uint16_t)h);
		if (isnan(f) ? (h & 0x7c00) != 0x7c00 || !(h & 0x3ff) : dg_api_f32_to_f16(f) != h)
			bad++;
	}
	CHECK("fp16 -> fp32 -> fp16 is the identity on all 65536 values (NaN stays NaN)", bad == 0);
}

static void test_errors(void)
{
	const int grid[3] = { 2, 8, 8 };
	double rho = 0.3, bad_rho[] = { 0, 1.5, NAN }, two[] = { 0.3, 0.4 };
	dsgap_context *ctx = (dsgap_context *)&rho;
	dsgap_config c = config("mc-sparse", &rho, 1, "warmup=1", grid, 0);
	struct { const char *what; dsgap_config cfg; int code; const char *says; } cases[] = {
		{ "unknown policy", config("nonsense", &rho, 1, "", grid, 0), DSGAP_E_POLICY, "unknown policy" },
		{ "bad switch", config("mc-sparse/group=hexagon", &rho, 1, "", grid, 0), DSGAP_E_POLICY, "hexagon" },
		{ "density 0", config("mc-sparse", &bad_rho[0], 1, "", grid, 0), DSGAP_E_POLICY, "density 0" },
		{ "density 1.5", config("mc-sparse", &bad_rho[1], 1, "", grid, 0), DSGAP_E_POLICY, "density 1.5" },
		{ "density NaN", config("mc-sparse", &bad_rho[2], 1, "", grid, 0), DSGAP_E_POLICY, "outside (0, 1]" },
		{ "3 densities", config("mc-sparse", two, 3, "", grid, 0), DSGAP_E_POLICY, "3 densities for 2 layers" },
		{ "bad schedule", config("mc-sparse", &rho, 1, "warmup=x", grid, 0), DSGAP_E_POLICY, "warmup" },
		{ "dense layer past the context's layers", config("mc-sparse", &rho, 1, "dense_layers=99", grid, 0),
		  DSGAP_E_POLICY, "dense layer 99 is not a layer" },
		{ "anchors every 0 steps", config("mc-sparse", &rho, 1, "anchors=every:0", grid, 0), DSGAP_E_POLICY,
		  "every:N" },
		{ "no policy", config(NULL, &rho, 1, "", grid, 0), DSGAP_E_POLICY, "no policy" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		ctx = (dsgap_context *)&rho;
		int rc = dsgap_context_create(&cases[i].cfg, &ctx);
		const char *m = dsgap_last_error(NULL);
		CHECKF(rc == cases[i].code && !ctx && strstr(m, cases[i].says), "create, %s: code %d, \"%s\"",
		       cases[i].what, rc, m);
	}
	dsgap_config x = c;
	x.abi_version = 99;
	CHECK("create, ABI version 99: DSGAP_E_ARG", dsgap_context_create(&x, &ctx) == DSGAP_E_ARG &&
	      strstr(dsgap_last_error(NULL), "ABI version 99"));
	x = c, x.device = "tpu";
	CHECK("create, device tpu: DSGAP_E_ARG", dsgap_context_create(&x, &ctx) == DSGAP_E_ARG &&
	      strstr(dsgap_last_error(NULL), "tpu"));
	x = c, x.heads = 0;
	CHECK("create, 0 heads: DSGAP_E_ARG", dsgap_context_create(&x, &ctx) == DSGAP_E_ARG &&
	      strstr(dsgap_last_error(NULL), "heads 0"));
	x = c, x.branches = 3;
	CHECK("create, 3 branches: DSGAP_E_ARG", dsgap_context_create(&x, &ctx) == DSGAP_E_ARG);
	x = c, x.device = "gpu", x.head_dim = 96;
	CHECK("create, gpu with head_dim 96: DSGAP_E_DEVICE", dsgap_context_create(&x, &ctx) == DSGAP_E_DEVICE &&
	      strstr(dsgap_last_error(NULL), "head_dim"));
	if (!dg_backend_gpu_available()) {
		x = c, x.device = "gpu";
		int rc = dsgap_context_create(&x, &ctx);
		CHECKF(rc == DSGAP_E_DEVICE && !ctx, "create, gpu without one: DSGAP_E_DEVICE, \"%s\"",
		       dsgap_last_error(NULL));
	}
	CHECK("create, NULL config: DSGAP_E_ARG", dsgap_context_create(NULL, &ctx) == DSGAP_E_ARG);
	CHECK("create, NULL out: DSGAP_E_ARG", dsgap_context_create(&c, NULL) == DSGAP_E_ARG);

	/* attend */
	int rc = dsgap_context_create(&c, &ctx);
	CHECK("create, mc-sparse: ok, no message left over", rc == DSGAP_OK && ctx);
	if (rc)
		return;
	int n = 128;
	size_t all = (size_t)H * n * D;
	float *q = malloc(all * 4), *k = malloc(all * 4), *v = malloc(all * 4), *o = malloc(all * 4);
	make_qkv(n, 0, 0, 0, q, k, v);
	tens tq, tk, tv, to;
	tens_new(&tq, 0, DSGAP_BF16, n), tens_new(&tk, 1, DSGAP_BF16, n), tens_new(&tv, 2, DSGAP_BF16, n);
	tens_new(&to, 3, DSGAP_BF16, n);
	tens_fill(&tq, q), tens_fill(&tk, k), tens_fill(&tv, v), tens_poison(&to);
	dsgap_tensor neg = tq.t, nul = tq.t;
	neg.stride_head = -1, nul.data = NULL;
	struct { const char *what; int step, layer, branch; const dsgap_tensor *q; int dt, tokens, code; const char *says; } a[] = {
		{ "layer 2", 0, 2, 0, &tq.t, DSGAP_BF16, n, DSGAP_E_INDEX, "layer 2 out of range [0, 2)" },
		{ "layer -1", 0, -1, 0, &tq.t, DSGAP_BF16, n, DSGAP_E_INDEX, "layer -1" },
		{ "branch 2", 0, 0, 2, &tq.t, DSGAP_BF16, n, DSGAP_E_INDEX, "branch 2 out of range [0, 2)" },
		{ "step -1", -1, 0, 0, &tq.t, DSGAP_BF16, n, DSGAP_E_INDEX, "step -1" },
		{ "127 tokens", 0, 0, 0, &tq.t, DSGAP_BF16, n - 1, DSGAP_E_INDEX, "made for 128" },
		{ "dtype 7", 0, 0, 0, &tq.t, 7, n, DSGAP_E_DTYPE, "dtype 7" },
		{ "q NULL", 0, 0, 0, NULL, DSGAP_BF16, n, DSGAP_E_ARG, "q is NULL" },
		{ "q data NULL", 0, 0, 0, &nul, DSGAP_BF16, n, DSGAP_E_ARG, "q is NULL" },
		{ "negative stride", 0, 0, 0, &neg, DSGAP_BF16, n, DSGAP_E_ARG, "negative stride" },
	};
	for (size_t i = 0; i < sizeof a / sizeof *a; i++) {
		int r = dsgap_attend(ctx, a[i].step, a[i].layer, a[i].branch, a[i].q, &tk.t, &tv.t, &to.t,
				     (dsgap_dtype)a[i].dt, a[i].tokens, NULL);
		const char *m = dsgap_last_error(ctx);
		CHECKF(r == a[i].code && strstr(m, a[i].says), "attend, %s: code %d, \"%s\"", a[i].what, r, m);
	}
	long gaps;
	float *nanref = malloc(all * 4);
	for (size_t i = 0; i < all; i++)
		nanref[i] = 0;
	CHECK("attend, after the failures O is untouched (all poison)", tens_compare(&to, nanref, &gaps) == (long)all &&
	      gaps == 0);
	/* still usable: a right call gives the reference's output */
	ref r;
	ref_init(&r, "mc-sparse", &rho, 1, "warmup=1", grid, 0);
	ref_attend(&r, 0, 0, 0, q, k, v, o);
	rc = dsgap_attend(ctx, 0, 0, 0, &tq.t, &tk.t, &tv.t, &to.t, DSGAP_BF16, n, NULL);
	CHECK("attend, the context works after the failures (= reference, message cleared)",
	      rc == DSGAP_OK && tens_compare(&to, o, &gaps) == 0 && gaps == 0 && !dsgap_last_error(ctx)[0]);
	ref_free(&r);
	CHECK("attend, NULL context: DSGAP_E_ARG with a thread message",
	      dsgap_attend(NULL, 0, 0, 0, &tq.t, &tk.t, &tv.t, &to.t, DSGAP_BF16, n, NULL) == DSGAP_E_ARG &&
	      strstr(dsgap_last_error(NULL), "context is NULL"));
	dsgap_stats st;
	int dn = -1;
	CHECK("site_is_dense, layer 2: DSGAP_E_INDEX, *dense untouched",
	      dsgap_site_is_dense(ctx, 0, 2, 0, &dn) == DSGAP_E_INDEX && dn == -1 &&
	      strstr(dsgap_last_error(ctx), "layer 2 out of range"));
	CHECK("site_is_dense, NULL out: DSGAP_E_ARG", dsgap_site_is_dense(ctx, 0, 0, 0, NULL) == DSGAP_E_ARG);
	CHECK("site_is_dense, NULL context: DSGAP_E_ARG", dsgap_site_is_dense(NULL, 0, 0, 0, &dn) == DSGAP_E_ARG);
	CHECK("site_is_dense, mc-sparse warmup=1: step 0 (the anchor) is not", dsgap_site_is_dense(ctx, 0, 0, 0, &dn) ==
	      DSGAP_OK && dn == 0);
	CHECK("stats, NULL out: DSGAP_E_ARG", dsgap_context_stats(ctx, NULL) == DSGAP_E_ARG);
	CHECK("stats: one call of 2 heads", dsgap_context_stats(ctx, &st) == DSGAP_OK && st.calls == H);
	dsgap_context_destroy(ctx);
	dsgap_context_destroy(NULL);
	free(q), free(k), free(v), free(o), free(nanref);
	free(tq.buf), free(tk.buf), free(tv.buf), free(to.buf);
}

int main(void)
{
	CHECK("dsgap_abi_version() == DSGAP_ABI_VERSION", dsgap_abi_version() == DSGAP_ABI_VERSION);
	CHECK("dsgap_version() names the version", !strncmp(dsgap_version(), DG_VERSION, strlen(DG_VERSION)));
	test_f16();
	test_errors();

	const int grid[3] = { 3, 8, 16 }, tgrid[3] = { 2, 8, 16 }; /* 384 tokens; 32 text + 256 */
	double rho = 0.3, lrho[L] = { 0.3, 0.6 };
	struct { const char *spec, *sched; } cases[] = {
		{ "dense", "warmup=1" },          /* the reference */
		{ "est-block", "" },              /* ladder rungs: refresh=step */
		{ "oracle-tile", "warmup=1" },
		{ "oracle-pca", "warmup=1" },
		{ "oracle", "warmup=2" },
		{ "oracle+res", "warmup=1" },     /* the previous step's residual */
		{ "baseline", "warmup=2" },       /* the factorial: refresh=anchor */
		{ "mc-residual", "warmup=2" },
		{ "mc-sparse", "warmup=2" },      /* anchor 1, metadata and residual reused at 2, 3 */
		{ "mc-sparse", "warmup=1,anchors=0;2,dense_layers=1" },
		{ "mc-sparse/budget=topp:0.9", "warmup=1" },
		{ "svg2", "warmup=1" },           /* peers */
		{ "spargeattn/theta=-0.1/budget=topk", "warmup=1" },
		{ "xattention", "warmup=1" },
		{ "radial", "" },
		{ "sta", "" },
		{ "ditfastattn", "warmup=2" },
		{ "chipmunk", "warmup=2" },
		{ "pisa", "warmup=1" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
		equal_case(cases[i].spec, &rho, 1, cases[i].sched, grid, 0, DSGAP_BF16);
	equal_case("mc-sparse", &rho, 1, "warmup=2", grid, 0, DSGAP_FP16);
	equal_case("mc-sparse", &rho, 1, "warmup=2", grid, 0, DSGAP_FP32);
	equal_case("oracle-tile", &rho, 1, "warmup=1", grid, 0, DSGAP_FP16);
	equal_case("mc-sparse", lrho, L, "warmup=2", grid, 0, DSGAP_BF16);
	equal_case("oracle-tile/group=tile3d", &rho, 1, "warmup=1", tgrid, 32, DSGAP_BF16);
	equal_case("mc-sparse", &rho, 1, "warmup=2", tgrid, 32, DSGAP_BF16);

	/* 100 contexts made and freed (under ASan: no leak), one call each */
	int ok = 0;
	const int sgrid[3] = { 1, 8, 16 };
	float *q = malloc((size_t)H * 128 * D * 4), *k = malloc((size_t)H * 128 * D * 4), *v = malloc((size_t)H * 128 * D * 4);
	make_qkv(128, 0, 0, 0, q, k, v);
	tens tq, tk, tv, to;
	tens_new(&tq, 0, DSGAP_BF16, 128), tens_new(&tk, 1, DSGAP_BF16, 128), tens_new(&tv, 2, DSGAP_BF16, 128);
	tens_new(&to, 3, DSGAP_BF16, 128);
	tens_fill(&tq, q), tens_fill(&tk, k), tens_fill(&tv, v);
	for (int i = 0; i < 100; i++) {
		dsgap_config c = config(i % 2 ? "mc-sparse" : "oracle+res", &rho, 1, "", sgrid, 0);
		dsgap_context *ctx;
		if (dsgap_context_create(&c, &ctx))
			continue;
		ok += dsgap_attend(ctx, 0, i % L, i % B, &tq.t, &tk.t, &tv.t, &to.t, DSGAP_BF16, 128, NULL) == DSGAP_OK;
		dsgap_context_destroy(ctx);
	}
	CHECKF(ok == 100, "100 contexts made, used and freed (%d ok)", ok);
	free(q), free(k), free(v), free(tq.buf), free(tk.buf), free(tv.buf), free(to.buf);
	return test_report();
}
