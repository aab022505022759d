/*
 * test_cache.c: the cache-storage switches of issue 21 (policy/cache_store.h) on the CPU:
 *   - fp8 e4m3 and bf16 rounding and the per-row power-of-two scale against independent
 *     computations (nearest representable value found by scanning, in double);
 *   - residual_dtype=bf16|fp8: a reuse step's output is exactly O_sparse + round(R), with O_sparse from
 *     the same policy without residual and R = O_dense - O_sparse made by the backend's primitives;
 *   - keys=bitmap: the bitmap round trip gives the same lists, and the outputs equal keys=list's bit
 *     for bit;
 *   - cfg_meta=shared: the second pass's output equals its own residual over the first pass's groups
 *     and lists, made by hand;
 *   - the spec grammar accepts and refuses the switches.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/policy_run.h"
#include "policy/cache_store.h"
#include "policy/policy.h"
#include "testhelp.h"
#include "util/util.h"

/* ---- independent rounding ------------------------------------------------------------------- */

/* the value of an e4m3 code from its definition (sign, 4-bit exponent of bias 7, 3-bit mantissa) */
static double e4m3_def(int c)
{
	int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
	double v = e == 0 ? m / 8.0 * pow(2, -6) : (1 + m / 8.0) * pow(2, e - 7);
	return s ? -v : v;
}

/* nearest finite e4m3 to a (by scanning codes 0..126; ties to the even code), saturating */
static int e4m3_nearest(double a)
{
	int best = 0;
	double bd = INFINITY, x = fabs(a);
	for (int c = 0; c <= 126; c++) {
		double dd = fabs(e4m3_def(c) - x);
		if (dd < bd || (dd == bd && !(c & 1)))
			bd = dd, best = c;
	}
	return (a < 0 || (a == 0 && signbit(a))) ? best | 0x80 : best;
}

/* nearest bf16 of x (ties to even), from the two candidates around it */
static float bf16_nearest(float x)
{
	uint32_t u;
	memcpy(&u, &x, 4);
	uint32_t lo = u & 0xffff0000u, hi = lo + 0x10000u;
	float flo, fhi;
	memcpy(&flo, &lo, 4), memcpy(&fhi, &hi, 4);
	double dl = fabs((double)x - flo), dh = fabs((double)fhi - x);
	if (dl < dh || (dl == dh && !((lo >> 16) & 1)))
		return flo;
	return fhi;
}

static int row_exp_def(const float *r, int d)
{
	double amax = 0;
	for (int j = 0; j < d; j++)
		amax = fmax(amax, fabs(r[j]));
	if (amax == 0)
		return 0;
	for (int e = -100; e < 100; e++)
		if (amax <= 448.0 * pow(2, e))
			return e;
	return 100;
}

static void round_def(dg_resdtype t, float *r, int n, int d)
{
	for (int i = 0; i < n; i++) {
		float *row = r + (size_t)i * d;
		int e = row_exp_def(row, d);
		for (int j = 0; j < d; j++) {
			if (t == DG_RESDTYPE_BF16)
				row[j] = bf16_nearest(row[j]);
			else if (t == DG_RESDTYPE_FP8)
				row[j] = (float)(e4m3_def(e4m3_nearest((double)row[j] / pow(2, e))) * pow(2, e));
		}
	}
}

static uint64_t rng = 88172645463325252ull;
static double urand(void)
{
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return (rng >> 11) * 0x1p-53;
}
static double nrand(void) { return sqrt(-2 * log(urand() + 1e-300)) * cos(6.283185307179586 * urand()); }

static void test_codecs(void)
{
	int bad = 0;
	for (int c = 0; c < 256; c++)
		if ((c & 0x7f) != 0x7f && dg_e4m3_to_f32((uint8_t)c) != (float)e4m3_def(c))
			bad++;
	CHECKF(bad == 0 && isnan(dg_e4m3_to_f32(0x7f)) && isnan(dg_e4m3_to_f32(0xff)),
	       "e4m3 decode: all 254 finite codes as defined, 0x7f/0xff NaN (%d wrong)", bad);
	/* every midpoint between neighbours, just below and above, and random values over the range */
	bad = 0;
	int tried = 0;
	for (int c = 0; c < 126; c++) {
		double mid = (e4m3_def(c) + e4m3_def(c + 1)) / 2;
		float xs[3] = { (float)mid, nextafterf((float)mid, 0), nextafterf((float)mid, 1000) };
		for (int k = 0; k < 3; k++)
			for (int s = 0; s < 2; s++) {
				float x = s ? -xs[k] : xs[k];
				bad += dg_f32_to_e4m3(x) != e4m3_nearest(x), tried++;
			}
	}
	for (int i = 0; i < 200000; i++) {
		float x = (float)(nrand() * pow(2, 18 * urand() - 12));
		bad += dg_f32_to_e4m3(x) != e4m3_nearest(x), tried++;
	}
	float big[4] = { 448, 463.9f, 464, 1e30f };
	for (int k = 0; k < 4; k++)
		bad += dg_f32_to_e4m3(big[k]) != 0x7e || dg_f32_to_e4m3(-big[k]) != 0xfe, tried++;
	CHECKF(bad == 0, "e4m3 encode: nearest, ties to even, saturating (%d of %d wrong)", bad, tried);
	CHECK("e4m3 encode: NaN -> 0x7f, +-0 kept", dg_f32_to_e4m3(NAN) == 0x7f && dg_f32_to_e4m3(0.0f) == 0 &&
	      dg_f32_to_e4m3(-0.0f) == 0x80);

	bad = 0;
	for (int i = 0; i < 2000; i++) {
		float row[16];
		double s = pow(2, 60 * urand() - 30);
		for (int j = 0; j < 16; j++)
			row[j] = (float)(nrand() * s);
		if (i % 100 == 0) /* exact powers and 448 multiples: the boundary */
			row[3] = (float)(448 * pow(2, (int)(20 * urand()) - 10)), row[4] = 0;
		bad += dg_fp8_row_exp(row, 16) != row_exp_def(row, 16);
	}
	float zero[4] = { 0 };
	CHECKF(bad == 0 && dg_fp8_row_exp(zero, 4) == 0, "fp8 row scale: the smallest 2^e with amax <= 448 2^e "
	       "(%d wrong)", bad);

	/* whole residuals through encode + decode against the independent rounding */
	int n = 37, d = 64;
	float *r = dg_malloc(sizeof(float) * n * d), *a = dg_malloc(sizeof(float) * n * d),
	      *b = dg_malloc(sizeof(float) * n * d);
	for (int i = 0; i < n * d; i++)
		r[i] = (float)(nrand() * pow(2, 8 * urand() - 10));
	for (int i = 0; i < d; i++)
		r[5 * d + i] = 0; /* a zero row */
	for (dg_resdtype t = DG_RESDTYPE_FP32; t < DG_RESDTYPE_COUNT; t++) {
		memcpy(a, r, sizeof(float) * n * d), memcpy(b, r, sizeof(float) * n * d);
		dg_residual_round(t, a, n, d);
		round_def(t, b, n, d);
		CHECKF(!memcmp(a, b, sizeof(float) * n * d), "residual_dtype=%s: encode + decode = independent "
		       "rounding, every element", dg_resdtype_name(t));
	}
	CHECK("residual bytes: fp32 4, bf16 2, fp8 1 per element + 4 per row",
	      dg_residual_bytes(DG_RESDTYPE_FP32, 75600, 128) == 38707200 &&
	      dg_residual_bytes(DG_RESDTYPE_BF16, 75600, 128) == 19353600 &&
	      dg_residual_bytes(DG_RESDTYPE_FP8, 75600, 128) == 9676800 + 302400);
	free(r), free(a), free(b);
}

/* ---- the switches in the policy runs ---------------------------------------------------------- */

enum { N = 512, D = 64 };

typedef struct {
	float q[N * D], k[N * D], v[N * D];
} unit;

static void unit_fill(unit *u, double drift, const unit *from)
{
	for (int i = 0; i < N * D; i++) {
		u->q[i] = (float)((from ? from->q[i] : 0) + drift * nrand());
		u->k[i] = (float)((from ? from->k[i] : 0) + drift * nrand());
		u->v[i] = (float)((from ? from->v[i] : 0) + drift * nrand());
	}
}

static const int GRID[3] = { 2, 16, 16 };

static int meta_ok = 1;
#define CHECK_OK(x) (meta_ok &= (x) == 0)

/* one step of run r on unit u: plan, load, dense, metadata, apply; output into o */
static void step(dg_backend *be, dg_policy_run *r, const dg_schedule *sc, int s, const unit *u, float *o,
		 const dg_policy_run *adopt_from)
{
	dg_policy_run_plan(r, sc, s, 1);
	if (adopt_from)
		dg_policy_run_adopt(r, adopt_from, s);
	be->load(be, u->q, u->k, u->v);
	be->dense(be);
	CHECK_OK(dg_policy_run_metadata(be, &r, 1, GRID, 0));
	dg_policy_run_apply(be, r, s, NULL, o, false);
}

/* groups and lists of mc-sparse (pca, token, exact, top-k) on the loaded unit, made by hand */
static void make_meta(dg_backend *be, const dg_budget *b, dg_bgroups **g, dg_bsel **sel)
{
	*g = be->groups(be, DG_GROUP_PCA, GRID, 0);
	dg_bscores *sc;
	be->exact(be, g, &sc, 1, NULL, NULL, 0);
	*sel = be->select(be, *g, sc, b);
	be->scores_free(be, sc);
}

static void test_runs(void)
{
	static unit u0, u1, u2, v0, v1;
	unit_fill(&u0, 1.0, NULL);
	unit_fill(&u1, 0.3, &u0);
	unit_fill(&u2, 0.3, &u1);
	unit_fill(&v0, 0.2, &u0); /* the other CFG pass: near the first */
	unit_fill(&v1, 0.3, &v0);
	dg_backend *be = dg_backend_cpu(N, D);
	dg_schedule sc;
	CHECK("schedule", dg_schedule_parse("warmup=1", &sc) == 0);
	double rho = 0.3;
	static float o_nores[2][N * D], o[N * D], want[N * D], o_dense[N * D], o_sp[N * D];

	/* the same policy without residual: O_sparse at steps 1 and 2 */
	dg_policy pn;
	dg_policy_parse("mc-sparse/residual=none", &pn);
	dg_policy_run rn;
	dg_policy_run_init(&rn, &pn, rho);
	step(be, &rn, &sc, 0, &u0, o, NULL);
	step(be, &rn, &sc, 1, &u1, o_nores[0], NULL);
	step(be, &rn, &sc, 2, &u2, o_nores[1], NULL);
	dg_policy_run_clear(be, &rn);
	/* R = O_dense - O_sparse at the anchor (step 0) by hand */
	be->load(be, u0.q, u0.k, u0.v);
	be->dense(be);
	dg_bgroups *g;
	dg_bsel *sel;
	make_meta(be, &rn.budget, &g, &sel);
	be->attend(be, g, sel, NULL, NULL, NULL, NULL);
	be->output(be, true, o_dense);
	be->output(be, false, o_sp);
	static float r0[N * D];
	for (int e = 0; e < N * D; e++)
		r0[e] = o_dense[e] - o_sp[e];

	for (dg_resdtype t = DG_RESDTYPE_FP32; t < DG_RESDTYPE_COUNT; t++) {
		char spec[64];
		snprintf(spec, sizeof spec, "mc-sparse/residual_dtype=%s", dg_resdtype_name(t));
		dg_policy p;
		CHECKF(dg_policy_parse(spec, &p) == 0 && p.residual_dtype == t, "parse %s", spec);
		dg_policy_run r;
		dg_policy_run_init(&r, &p, rho);
		static float rr[N * D];
		memcpy(rr, r0, sizeof rr);
		round_def(t, rr, N, D);
		step(be, &r, &sc, 0, &u0, o, NULL);
		int bad = 0;
		for (int s = 1; s <= 2; s++) {
			step(be, &r, &sc, s, s == 1 ? &u1 : &u2, o, NULL);
			for (int e = 0; e < N * D; e++)
				bad += o[e] != o_nores[s - 1][e] + rr[e];
		}
		CHECKF(bad == 0, "%s: steps 1-2 output = O_sparse + round_%s(O_dense - O_sparse of the anchor), "
		       "every element (%d differ)", spec, dg_resdtype_name(t), bad);
		dg_policy_run_clear(be, &r);
	}

	/* keys=bitmap: lossless */
	dg_selection back;
	be->load(be, u0.q, u0.k, u0.v);
	be->dense(be);
	{
		/* the lists of sel, by the CPU backend's own struct: compare through a bitmap round trip of
		 * a selection made by the policy layer's functions instead */
		dg_selection s0 = { 0 };
		s0.ngroups = 3;
		int64_t off[4] = { 0, 3, 3, 7 };
		int idx[7] = { 0, 31, 32, 1, 2, 100, N - 1 };
		s0.off = off, s0.idx = idx;
		uint32_t bits[3 * (N / 32)];
		dg_bitmap_encode(&s0, N, bits);
		dg_bitmap_decode(bits, 3, N, &back);
		CHECK("bitmap round trip: offsets and ascending lists (an empty group, word edges, the last key)",
		      back.ngroups == 3 && !memcmp(back.off, off, sizeof off) && !memcmp(back.idx, idx, sizeof idx));
		dg_selection_free(&back);
	}
	dg_policy pl, pb;
	dg_policy_parse("mc-sparse", &pl);
	CHECK("parse mc-sparse/keys=bitmap", dg_policy_parse("mc-sparse/keys=bitmap", &pb) == 0 &&
	      pb.keys == DG_KEYS_BITMAP);
	dg_policy_run rl, rb;
	dg_policy_run_init(&rl, &pl, rho);
	dg_policy_run_init(&rb, &pb, rho);
	static float ol[N * D], ob[N * D];
	int same = 1;
	for (int s = 0; s <= 2; s++) {
		const unit *u = s == 0 ? &u0 : s == 1 ? &u1 : &u2;
		step(be, &rl, &sc, s, u, ol, NULL);
		step(be, &rb, &sc, s, u, ob, NULL);
		same &= !memcmp(ol, ob, sizeof ol);
	}
	CHECK("keys=bitmap: outputs of steps 0-2 equal keys=list's bit for bit", same);
	dg_policy_run_clear(be, &rl), dg_policy_run_clear(be, &rb);

	/* cfg_meta=shared: pass 1 runs over pass 0's groups and lists with its own residual */
	dg_policy ps;
	CHECK("parse mc-sparse/cfg_meta=shared", dg_policy_parse("mc-sparse/cfg_meta=shared", &ps) == 0 &&
	      ps.cfg_meta == DG_CFG_META_SHARED);
	dg_policy_run ra, rb2;
	dg_policy_run_init(&ra, &ps, rho);
	dg_policy_run_init(&rb2, &ps, rho);
	step(be, &ra, &sc, 0, &u0, o, NULL);
	dg_policy_run_plan(&rb2, &sc, 0, 1);
	CHECK("cfg_meta=shared: pass 1 adopts pass 0's anchor metadata", dg_policy_run_adopt(&rb2, &ra, 0) &&
	      !rb2.make_meta);
	be->load(be, v0.q, v0.k, v0.v);
	be->dense(be);
	dg_policy_run_metadata(be, (dg_policy_run *[]){ &rb2 }, 1, GRID, 0);
	dg_policy_run_apply(be, &rb2, 0, NULL, o, false);
	step(be, &ra, &sc, 1, &u1, o, NULL);
	step(be, &rb2, &sc, 1, &v1, o, &ra);
	CHECK("cfg_meta=shared: no adoption at a reuse step", rb2.meta_step == 0);
	/* by hand: pass 1's residual at its anchor with pass 0's selection, then its step 1 */
	dg_bvec *res = NULL;
	be->load(be, v0.q, v0.k, v0.v);
	be->dense(be);
	be->attend(be, g, sel, NULL, &res, NULL, NULL);
	be->load(be, v1.q, v1.k, v1.v);
	be->attend(be, g, sel, res, NULL, NULL, NULL);
	be->output(be, false, want);
	CHECK("cfg_meta=shared: pass 1's step-1 output = sparse(pass 1, pass 0's groups and lists) + its own "
	      "residual, bit for bit", !memcmp(o, want, sizeof want));
	/* and it differs from pass 1 with its own metadata (the switch does something) */
	dg_policy_run rc;
	dg_policy_run_init(&rc, &pl, rho);
	static float oc[N * D];
	step(be, &rc, &sc, 0, &v0, oc, NULL);
	step(be, &rc, &sc, 1, &v1, oc, NULL);
	CHECK("cfg_meta=own differs from shared on pass 1", memcmp(o, oc, sizeof oc) != 0);
	dg_policy_run_clear(be, &ra), dg_policy_run_clear(be, &rb2), dg_policy_run_clear(be, &rc);
	be->vec_free(be, res);
	be->groups_free(be, g);
	be->sel_free(be, sel);
	be->destroy(be);
	CHECK("metadata made without error", meta_ok);
}

static void test_grammar(void)
{
	dg_policy p;
	CHECK("all three switches together", dg_policy_parse("mc-sparse/residual_dtype=fp8/keys=bitmap/"
							      "cfg_meta=shared", &p) == 0 &&
	      p.residual_dtype == DG_RESDTYPE_FP8 && p.keys == DG_KEYS_BITMAP && p.cfg_meta == DG_CFG_META_SHARED);
	CHECK("defaults: fp32, list, own", dg_policy_parse("mc-sparse", &p) == 0 && p.residual_dtype == DG_RESDTYPE_FP32 &&
	      p.keys == DG_KEYS_LIST && p.cfg_meta == DG_CFG_META_OWN);
	const char *bad[] = { "mc-sparse/residual_dtype=fp16", "mc-gs/residual_dtype=bf16", "baseline/keys=bitmap",
			      "oracle/keys=bitmap", "oracle+res/cfg_meta=shared", "mc-sparse/keys=bits",
			      "mc-sparse/cfg_meta=yes", "radial/keys=bitmap" };
	for (int i = 0; i < (int)(sizeof bad / sizeof *bad); i++)
		CHECKF(dg_policy_parse(bad[i], &p) != 0, "refused: %s", bad[i]);
}

int main(void)
{
	test_codecs();
	test_grammar();
	test_runs();
	return test_report();
}
