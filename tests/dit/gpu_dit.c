/*
 * gpu_dit.c: the DiT engine's GPU op table (src/dit/wan_ops_gpu.c, kernels/dit_ops.cu, the flash kernel)
 * against its CPU twin (src/dit/wan_ops_cpu.c), docs/spec.md §9: every check is the FlashAttention-3 rule
 *   max|gpu - ref| <= 2 max|naive - ref| + 2 floor,   floor = 2^-24 max|ref|
 * with ref in fp64 (ops) or the fp32 CPU engine (whole model), and naive the plain low-precision
 * computation of the same thing: fp32 in row order for the fp32 ops; bf16 operands with fp32
 * accumulation for GEMMs and attention; for the model, the CPU engine with every GEMM input and
 * every attention operand rounded to bf16 (what the GPU path feeds its bf16 kernels), and the GEMMs
 * that write operand buffers (the q/k/v projections) giving bf16 with a bf16 bias, as the GPU's do.
 *   1. each op on fresh random inputs (seed printed), outputs poisoned (NaN) before each run;
 *      cross-attention with nk != nq; a GEMM reading a layernorm's bf16 shadow gives bit-identical
 *      results to one reading a fresh upload; operand buffers (bf16 only) hold the rounding of the
 *      fp32 outputs (layernorm, to/from_heads, attention) and read as the shadows do (GEMMs,
 *      attention, to/from_heads); linear_add and add_layernorm; the fused feed-forward (naive: the chain of two bf16
 *      GEMMs, the hidden rounded to bf16 after an fp32 GELU), and its GELU epilogue told apart
 *      from the erf GELU;
 *   2. one forward of the test models (head_dim 64 and 128): every block's output and the velocity;
 *   3. three UniPC + CFG steps through the entry point: dense, mc-sparse at density 1 and DiTFastAttn's
 *      window under the rule, mc-sparse at 0.3 reported (selection flips; see test_model).
 *   gpu_dit MODELS_DIR FIXTURES_DIR   (tests/CMakeLists.txt; exits 77 without a CUDA device)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "dit/dit_attn.h"
#include "dit/dit_sample.h"
#include "testhelp.h"
#include "util/util.h"
#include "dit/wan.h"

static const char *models_dir, *fix_dir;
static uint64_t seed;

static double urand(void) /* splitmix64 -> [0, 1) */
{
	uint64_t z = (seed += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return ((z ^ (z >> 31)) >> 11) * (1.0 / 9007199254740992.0);
}

/* n values uniform in [lo, hi) */
static float *rnd(size_t n, double lo, double hi)
{
	float *x = dg_malloc(n * sizeof(float));
	for (size_t i = 0; i < n; i++)
		x[i] = (float)(lo + (hi - lo) * urand());
	return x;
}

static float b16(float x) { return dg_round_bf16(x); }

static double gelu_tanh64(double v) { return 0.5 * v * (1 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))); }

/* max|a - ref| and max|ref| */
static double err_of(const float *a, const double *ref, size_t n, double *mx)
{
	double e = 0, m = 0;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - ref[i]);
		e = d > e || isnan(d) ? d : e;
		m = fmax(m, fabs(ref[i]));
	}
	*mx = m;
	return e;
}

static void rule(const char *what, const float *gpu, const float *naive, const double *ref, size_t n)
{
	double mx, eg = err_of(gpu, ref, n, &mx), en = err_of(naive, ref, n, &mx), fl = ldexp(mx, -24);
	CHECKF(eg <= 2 * en + 2 * fl, "%s: max err %.3g <= 2 * naive %.3g + 2 * floor %.3g (max|ref| %.3g)", what, eg,
	       en, fl, mx);
}

static double *to_f64(const float *x, size_t n)
{
	double *y = dg_malloc(n * sizeof(double));
	for (size_t i = 0; i < n; i++)
		y[i] = x[i];
	return y;
}

/* a device copy of host x (n) */
static float *up(dg_wan_ops *g, const float *x, size_t n)
{
	float *p = g->alloc(g, n);
	g->upload(g, p, x, n);
	return p;
}

/* a device buffer of n NaNs */
static float *poisoned(dg_wan_ops *g, size_t n)
{
	float *h = dg_alloc_poisoned(n), *p = up(g, h, n);
	free(h);
	return p;
}

static float *down(dg_wan_ops *g, const float *p, size_t n)
{
	float *h = dg_malloc(n * sizeof(float));
	g->download(g, h, p, n);
	return h;
}

/* ---------------------------------------------------------------------------------------------- */
/* 1. ops                                                                                          */

static void test_linear(dg_wan_ops *g, int m, int in, int out)
{
	dg_wan_linear l = { .w = rnd((size_t)out * in, -1 / sqrt(in), 1 / sqrt(in)), .b = rnd(out, -0.5, 0.5),
			    .out = out, .in = in };
	float *x = rnd((size_t)m * in, -2, 2);
	double *ref = dg_malloc((size_t)m * out * sizeof(double));
	float *naive = dg_malloc((size_t)m * out * sizeof(float));
	for (int r = 0; r < m; r++)
		for (int j = 0; j < out; j++) {
			double s = l.b[j];
			float sn = 0;
			for (int k = 0; k < in; k++) {
				s += (double)x[(size_t)r * in + k] * l.w[(size_t)j * in + k];
				sn += b16(x[(size_t)r * in + k]) * b16(l.w[(size_t)j * in + k]);
			}
			ref[(size_t)r * out + j] = s;
			naive[(size_t)r * out + j] = sn + l.b[j];
		}
	g->prepare(g, &l);
	float *dx = up(g, x, (size_t)m * in), *dy = poisoned(g, (size_t)m * out);
	g->linear(g, &l, dx, m, dy);
	float *y = down(g, dy, (size_t)m * out);
	char what[96];
	snprintf(what, sizeof what, "linear (%d x %d) . (%d x %d)^T + b", m, in, out, in);
	rule(what, y, naive, ref, (size_t)m * out);
	/* linear_add: onto a residual z; naive adds the fp32 result to it */
	float *z = rnd((size_t)m * out, -3, 3);
	for (size_t i = 0; i < (size_t)m * out; i++)
		ref[i] += z[i], naive[i] += z[i];
	g->upload(g, dy, z, (size_t)m * out);
	g->linear_add(g, &l, dx, m, dy);
	free(y);
	y = down(g, dy, (size_t)m * out);
	snprintf(what, sizeof what, "linear_add: z + (%d x %d) . (%d x %d)^T + b", m, in, out, in);
	rule(what, y, naive, ref, (size_t)m * out);
	/* into an operand buffer: a bf16 output, the bias in bf16; naive rounds its fp32 result */
	for (int r = 0; r < m; r++)
		for (int j = 0; j < out; j++) {
			size_t e = (size_t)r * out + j;
			ref[e] += b16(l.b[j]) - (double)l.b[j] - z[e];
			naive[e] = b16(naive[e] - z[e] - l.b[j] + b16(l.b[j]));
		}
	float *dop = g->alloc_operand(g, (size_t)m * out);
	g->linear(g, &l, dx, m, dop);
	free(y);
	y = down(g, dop, (size_t)m * out);
	snprintf(what, sizeof what, "linear into an operand buffer (bf16 out): (%d x %d) . (%d x %d)^T + b", m, in, out, in);
	rule(what, y, naive, ref, (size_t)m * out);
	g->unprepare(g, &l);
	g->release(g, dx), g->release(g, dy), g->release(g, dop);
	free(l.w), free(l.b), free(x), free(ref), free(naive), free(y), free(z);
}

/* layernorm (affine and/or modulated) and RMSNorm (to_heads') of (m, n) rows with an offset mean */
static void test_norms(dg_wan_ops *g, int m, int n)
{
	size_t N = (size_t)m * n;
	float *x = rnd(N, 2, 4), *w = rnd(n, 0.5, 1.5), *b = rnd(n, -1, 1), *sc = rnd(n, -0.5, 0.5),
	      *sh = rnd(n, -1, 1), *naive = dg_malloc(N * sizeof(float)), *res = rnd(N, -2, 2), *gate = rnd(n, -1, 1);
	double *ref = dg_malloc(N * sizeof(double));
	float *dx = up(g, x, N), *dw = up(g, w, n), *db = up(g, b, n), *dsc = up(g, sc, n), *dsh = up(g, sh, n);
	float *dres = up(g, res, N), *dgate = up(g, gate, n), *xa = dg_malloc(N * sizeof(float));
	for (size_t i = 0; i < N; i++) /* x + res * gate, the input of add_layernorm's norm (fp32, as both compute it) */
		xa[i] = x[i] + res[i] * gate[i % n];
	/* 0: affine, 1: modulated, 2: modulated after x += res * gate (add_layernorm) */
	for (int mode = 0; mode < 3; mode++) {
		bool affine = mode == 0;
		for (int r = 0; r < m; r++) {
			const float *xr = (mode == 2 ? xa : x) + (size_t)r * n;
			double s = 0, ss = 0;
			float sn = 0, ssn = 0;
			for (int j = 0; j < n; j++)
				s += xr[j], sn += xr[j];
			double mu = s / n;
			float mun = sn / n;
			for (int j = 0; j < n; j++)
				ss += (xr[j] - mu) * (xr[j] - mu), ssn += (xr[j] - mun) * (xr[j] - mun);
			double inv = 1 / sqrt(ss / n + 1e-6);
			float invn = 1 / sqrtf(ssn / n + 1e-6f);
			for (int j = 0; j < n; j++) {
				double v = (xr[j] - mu) * inv;
				float vn = (xr[j] - mun) * invn;
				if (affine)
					v = v * w[j] + b[j], vn = vn * w[j] + b[j];
				else
					v = v * (1.0 + sc[j]) + sh[j], vn = vn * (1.0f + sc[j]) + sh[j];
				ref[(size_t)r * n + j] = v;
				naive[(size_t)r * n + j] = vn;
			}
		}
		float *dy = poisoned(g, N);
		float *dxa = mode == 2 ? up(g, x, N) : NULL;
		if (affine)
			g->layernorm(g, dx, m, n, 1e-6f, dw, db, NULL, NULL, dy);
		else if (mode == 1)
			g->layernorm(g, dx, m, n, 1e-6f, NULL, NULL, dsc, dsh, dy);
		else
			g->add_layernorm(g, dxa, dres, dgate, m, n, 1e-6f, NULL, NULL, dsc, dsh, dy);
		float *y = down(g, dy, N);
		const char *what[] = { "layernorm, affine", "layernorm, modulated", "add_layernorm, gated, modulated" };
		rule(what[mode], y, naive, ref, N);
		if (dxa) {
			float *xo = down(g, dxa, N);
			double *r64 = dg_malloc(N * sizeof(double));
			for (size_t i = 0; i < N; i++)
				r64[i] = (double)x[i] + (double)res[i] * gate[i % n];
			rule("add_layernorm: x += res * gate written back", xo, xa, r64, N);
			g->release(g, dxa);
			free(xo), free(r64);
		}
		g->release(g, dy);
		free(y);
	}
	/* RMSNorm over the row inside to_heads (one head of the row's width: the layout is unchanged) */
	for (int r = 0; r < m; r++) {
		const float *xr = x + (size_t)r * n;
		double ss = 0;
		float ssn = 0;
		for (int j = 0; j < n; j++)
			ss += (double)xr[j] * xr[j], ssn += xr[j] * xr[j];
		double inv = 1 / sqrt(ss / n + 1e-6);
		float invn = 1 / sqrtf(ssn / n + 1e-6f);
		for (int j = 0; j < n; j++)
			ref[(size_t)r * n + j] = xr[j] * inv * w[j], naive[(size_t)r * n + j] = xr[j] * invn * w[j];
	}
	float *dy = poisoned(g, N);
	g->to_heads(g, dx, m, 1, n, dw, 1e-6f, NULL, NULL, dy);
	float *y = down(g, dy, N);
	rule("to_heads with RMSNorm", y, naive, ref, N);
	g->release(g, dy);
	g->release(g, dx), g->release(g, dw), g->release(g, db), g->release(g, dsc), g->release(g, dsh);
	g->release(g, dres), g->release(g, dgate);
	free(x), free(w), free(b), free(sc), free(sh), free(naive), free(ref), free(y), free(res), free(gate), free(xa);
}

/* to_heads with and without RoPE, from_heads, gelu_tanh, add_gated: the CPU op table is the plain
 * fp32 computation (naive); ref in fp64 */
static void test_elementwise(dg_wan_ops *g, dg_wan_ops *c, int m, int heads, int d)
{
	int D = heads * d, half = d / 2;
	size_t N = (size_t)m * D;
	float *x = rnd(N, -3, 3), *ang = rnd((size_t)m * half, -10, 10), *y = rnd(N, -1, 1), *gate = rnd(D, -1, 1);
	float *cs = dg_malloc((size_t)m * half * sizeof(float)), *sn = dg_malloc((size_t)m * half * sizeof(float));
	for (size_t i = 0; i < (size_t)m * half; i++)
		cs[i] = cosf(ang[i]), sn[i] = sinf(ang[i]);
	float *naive = dg_malloc(N * sizeof(float));
	double *ref = dg_malloc(N * sizeof(double));
	float *dx = up(g, x, N), *dcs = up(g, cs, (size_t)m * half), *dsn = up(g, sn, (size_t)m * half);
	float *nw = rnd(D, 0.5, 1.5), *dnw = up(g, nw, D);
	const char *what[] = { "to_heads", "to_heads with RoPE", "to_heads with RMSNorm and RoPE" };
	for (int mode = 0; mode < 3; mode++) { /* plain, RoPE, RMSNorm over the row then RoPE */
		bool rope = mode > 0, norm = mode == 2;
		for (int r = 0; r < m; r++) {
			const float *xr = x + (size_t)r * D;
			double ss = 0;
			for (int j = 0; j < D; j++)
				ss += (double)xr[j] * xr[j];
			double inv = norm ? 1 / sqrt(ss / D + 1e-6) : 1;
			for (int h = 0; h < heads; h++)
				for (int i = 0; i < half; i++) {
					int j = h * d + 2 * i;
					double a = xr[j] * inv * (norm ? nw[j] : 1), b = xr[j + 1] * inv * (norm ? nw[j + 1] : 1);
					double c0 = rope ? cs[(size_t)r * half + i] : 1, s0 = rope ? sn[(size_t)r * half + i] : 0;
					size_t o = ((size_t)h * m + r) * d + 2 * i;
					ref[o] = a * c0 - b * s0, ref[o + 1] = a * s0 + b * c0;
				}
		}
		c->to_heads(c, x, m, heads, d, norm ? nw : NULL, 1e-6f, rope ? cs : NULL, rope ? sn : NULL, naive);
		float *dy = poisoned(g, N);
		g->to_heads(g, dx, m, heads, d, norm ? dnw : NULL, 1e-6f, rope ? dcs : NULL, rope ? dsn : NULL, dy);
		float *o = down(g, dy, N);
		rule(what[mode], o, naive, ref, N);
		if (!rope) { /* from_heads of it gives x back, exactly */
			float *dz = poisoned(g, N);
			g->from_heads(g, dy, m, heads, d, dz);
			float *z = down(g, dz, N);
			CHECK("from_heads (to_heads (x)) == x", !memcmp(z, x, N * sizeof(float)));
			g->release(g, dz);
			free(z);
		}
		g->release(g, dy);
		free(o);
	}
	g->release(g, dnw);
	free(nw);
	/* gelu_tanh in place */
	for (size_t i = 0; i < N; i++)
		ref[i] = gelu_tanh64(x[i]), naive[i] = x[i];
	c->gelu_tanh(c, naive, N);
	float *dg = up(g, x, N);
	g->gelu_tanh(g, dg, N);
	float *o = down(g, dg, N);
	rule("gelu_tanh", o, naive, ref, N);
	free(o);
	/* add_gated, with and without the gate */
	float *dyv = up(g, y, N), *dgate = up(g, gate, D);
	for (int gated = 0; gated < 2; gated++) {
		for (size_t i = 0; i < N; i++)
			ref[i] = (double)x[i] + (double)y[i] * (gated ? gate[i % D] : 1.0f), naive[i] = x[i];
		c->add_gated(c, naive, y, gated ? gate : NULL, m, D);
		g->upload(g, dg, x, N);
		g->add_gated(g, dg, dyv, gated ? dgate : NULL, m, D);
		o = down(g, dg, N);
		rule(gated ? "add_gated" : "add_gated, no gate", o, naive, ref, N);
		free(o);
	}
	g->release(g, dx), g->release(g, dcs), g->release(g, dsn), g->release(g, dg), g->release(g, dyv);
	g->release(g, dgate);
	free(x), free(ang), free(y), free(gate), free(cs), free(sn), free(naive), free(ref);
}

/* attention of q (H, nq, d) against k, v (H, nk, d), scale 1/sqrt(d), into (nq, H*d) */
static void test_attention(dg_wan_ops *g, int H, int nq, int nk, int d)
{
	size_t NQ = (size_t)H * nq * d, NK = (size_t)H * nk * d;
	float *q = rnd(NQ, -1.5, 1.5), *k = rnd(NK, -1.5, 1.5), *v = rnd(NK, -1, 1);
	float *naive = dg_malloc(NQ * sizeof(float));
	double *ref = dg_malloc(NQ * sizeof(double)), *s = dg_malloc((size_t)nk * sizeof(double));
	float *sn = dg_malloc((size_t)nk * sizeof(float));
	double scale = 1 / sqrt(d);
	for (int h = 0; h < H; h++)
		for (int i = 0; i < nq; i++) {
			const float *qi = q + ((size_t)h * nq + i) * d;
			double mx = -INFINITY, sum = 0;
			float mxn = -INFINITY, sumn = 0;
			for (int j = 0; j < nk; j++) {
				const float *kj = k + ((size_t)h * nk + j) * d;
				double a = 0;
				float an = 0;
				for (int e = 0; e < d; e++)
					a += (double)qi[e] * kj[e], an += b16(qi[e]) * b16(kj[e]);
				s[j] = a * scale, sn[j] = an * (float)scale;
				mx = fmax(mx, s[j]), mxn = fmaxf(mxn, sn[j]);
			}
			for (int j = 0; j < nk; j++) {
				s[j] = exp(s[j] - mx), sum += s[j];
				sn[j] = expf(sn[j] - mxn), sumn += sn[j];
			}
			for (int e = 0; e < d; e++) {
				double o = 0;
				float on = 0;
				for (int j = 0; j < nk; j++) {
					float vj = v[((size_t)h * nk + j) * d + e];
					o += s[j] * vj, on += b16(sn[j]) * b16(vj);
				}
				ref[((size_t)i * H + h) * d + e] = o / sum;
				naive[((size_t)i * H + h) * d + e] = on / sumn;
			}
		}
	float *dq = up(g, q, NQ), *dk = up(g, k, NK), *dv = up(g, v, NK), *dout = poisoned(g, NQ);
	g->attention(g, dq, dk, dv, H, nq, nk, d, dout);
	float *o = down(g, dout, NQ);
	char what[96];
	snprintf(what, sizeof what, "attention %d heads, %d queries x %d keys, d=%d", H, nq, nk, d);
	rule(what, o, naive, ref, NQ);
	g->release(g, dq), g->release(g, dk), g->release(g, dv), g->release(g, dout);
	free(q), free(k), free(v), free(naive), free(ref), free(s), free(sn), free(o);
}

/* a linear of the CPU table on bf16 copies of x and of l's weight (the bias stays fp32) */
static void naive_gemm(dg_wan_ops *c, const dg_wan_linear *l, const float *x, int m, float *y)
{
	size_t nx = (size_t)m * l->in, nw = (size_t)l->out * l->in;
	float *xr = dg_malloc(nx * sizeof(float));
	dg_wan_linear lr = *l;
	lr.w = dg_malloc(nw * sizeof(float));
	for (size_t i = 0; i < nx; i++)
		xr[i] = b16(x[i]);
	for (size_t i = 0; i < nw; i++)
		lr.w[i] = b16(l->w[i]);
	c->linear(c, &lr, xr, m, y);
	free(xr), free(lr.w);
}

/* l with its bias rounded to bf16 (caller frees .b), as the GPU's first FFN GEMM takes it */
static dg_wan_linear bias_bf16(const dg_wan_linear *l)
{
	dg_wan_linear r = *l;
	if (l->b) {
		r.b = dg_malloc((size_t)l->out * sizeof(float));
		for (int j = 0; j < l->out; j++)
			r.b[j] = b16(l->b[j]);
	}
	return r;
}

/* y (m, out) = l2(GELU_tanh(l1(x))), x (m, in), hidden (m, hid): ref in fp64; naive the chain of two
 * bf16 GEMMs (fp32 accumulation), the hidden rounded to bf16 after an fp32 GELU, l1's bias rounded
 * to bf16, as on the GPU */
static void test_ffn(dg_wan_ops *g, dg_wan_ops *c, int m, int in, int hid, int out, bool bias)
{
	dg_wan_linear l1 = { .w = rnd((size_t)hid * in, -1 / sqrt(in), 1 / sqrt(in)),
			     .b = bias ? rnd(hid, -0.5, 0.5) : NULL, .out = hid, .in = in };
	dg_wan_linear l2 = { .w = rnd((size_t)out * hid, -1 / sqrt(hid), 1 / sqrt(hid)),
			     .b = bias ? rnd(out, -0.5, 0.5) : NULL, .out = out, .in = hid };
	float *x = rnd((size_t)m * in, -2, 2);
	float *hn = dg_malloc((size_t)m * hid * sizeof(float)), *naive = dg_malloc((size_t)m * out * sizeof(float));
	dg_wan_linear l1n = bias_bf16(&l1);
	naive_gemm(c, &l1n, x, m, hn);
	free(l1n.b);
	c->gelu_tanh(c, hn, (size_t)m * hid);
	naive_gemm(c, &l2, hn, m, naive);
	double *h = dg_malloc((size_t)hid * sizeof(double)), *ref = dg_malloc((size_t)m * out * sizeof(double));
	for (int r = 0; r < m; r++) {
		const float *xr = x + (size_t)r * in;
		for (int j = 0; j < hid; j++) {
			const float *w = l1.w + (size_t)j * in;
			double s = bias ? l1.b[j] : 0;
			for (int k = 0; k < in; k++)
				s += (double)xr[k] * w[k];
			h[j] = gelu_tanh64(s);
		}
		for (int j = 0; j < out; j++) {
			const float *w = l2.w + (size_t)j * hid;
			double s = bias ? l2.b[j] : 0;
			for (int k = 0; k < hid; k++)
				s += h[k] * w[k];
			ref[(size_t)r * out + j] = s;
		}
	}
	g->prepare(g, &l1), g->prepare(g, &l2);
	float *dx = up(g, x, (size_t)m * in), *dy = poisoned(g, (size_t)m * out);
	g->ffn(g, &l1, &l2, dx, m, dy);
	float *y = down(g, dy, (size_t)m * out);
	char what[128];
	snprintf(what, sizeof what, "ffn (%d x %d) -> %d hidden -> %d%s", m, in, hid, out, bias ? ", biases" : ", no biases");
	rule(what, y, naive, ref, (size_t)m * out);
	g->unprepare(g, &l1), g->unprepare(g, &l2);
	g->release(g, dx), g->release(g, dy);
	free(l1.w), free(l1.b), free(l2.w), free(l2.b), free(x), free(hn), free(naive), free(h), free(ref), free(y);
}

/*
 * The GELU epilogue is the tanh form, not the erf one (GELU(v) = v Phi(v); the two differ by up to
 * 4.4e-4, under the bf16 rounding of the hidden, so the rule above cannot tell them apart): through
 * an identity second layer the output is the GPU's bf16 hidden itself, for pre-activations across
 * [-4, 3] (bf16-exact x and W1, so they are the fp64 ones up to fp32 accumulation); the deviation
 * from the tanh form, regressed on the erf form's, beta = sum (y - t)(e - t) / sum (e - t)^2, is 0
 * for the tanh form and 1 for the erf one, the bf16 rounding averaging out over the samples.
 */
static void test_ffn_gelu_form(dg_wan_ops *g, int m, int in, int hid)
{
	dg_wan_linear l1 = { .w = rnd((size_t)hid * in, -0.1 / sqrt(in), 0.1 / sqrt(in)), .b = rnd(hid, -4, 3),
			     .out = hid, .in = in };
	dg_wan_linear l2 = { .w = dg_calloc((size_t)hid * hid, sizeof(float)), .out = hid, .in = hid };
	for (int j = 0; j < hid; j++) {
		l1.b[j] = b16(l1.b[j]); /* the GPU takes it in bf16 */
		l2.w[(size_t)j * hid + j] = 1;
	}
	float *x = rnd((size_t)m * in, -1, 1);
	for (size_t i = 0; i < (size_t)m * in; i++)
		x[i] = b16(x[i]);
	for (size_t i = 0; i < (size_t)hid * in; i++)
		l1.w[i] = b16(l1.w[i]);
	g->prepare(g, &l1), g->prepare(g, &l2);
	float *dx = up(g, x, (size_t)m * in), *dy = poisoned(g, (size_t)m * hid);
	g->ffn(g, &l1, &l2, dx, m, dy);
	float *y = down(g, dy, (size_t)m * hid);
	double num = 0, den = 0;
	bool finite = true;
	for (int r = 0; r < m; r++)
		for (int j = 0; j < hid; j++) {
			double v = l1.b[j];
			for (int k = 0; k < in; k++)
				v += (double)x[(size_t)r * in + k] * l1.w[(size_t)j * in + k];
			double t = gelu_tanh64(v), e = 0.5 * v * erfc(-v / sqrt(2)), yv = y[(size_t)r * hid + j];
			num += (yv - t) * (e - t), den += (e - t) * (e - t);
			finite = finite && isfinite(yv);
		}
	double beta = num / den;
	CHECKF(finite && fabs(beta) < 0.5, "ffn: the GELU epilogue is the tanh form (beta %.3f: 0 tanh, 1 erf)", beta);
	g->unprepare(g, &l1), g->unprepare(g, &l2);
	g->release(g, dx), g->release(g, dy);
	free(l1.w), free(l1.b), free(l2.w), free(x), free(y);
}

/* a GEMM that reads a layernorm's bf16 shadow = the same GEMM on an upload of the layernorm's output */
static void test_shadow(dg_wan_ops *g, int m, int n)
{
	size_t N = (size_t)m * n;
	float *x = rnd(N, -2, 2), *sc = rnd(n, -0.5, 0.5);
	dg_wan_linear l = { .w = rnd((size_t)n * n, -0.1, 0.1), .b = NULL, .out = n, .in = n };
	g->prepare(g, &l);
	float *dx = up(g, x, N), *dsc = up(g, sc, n), *dh = g->alloc(g, N), *y1 = poisoned(g, N), *y2 = poisoned(g, N);
	g->layernorm(g, dx, m, n, 1e-6f, NULL, NULL, dsc, NULL, dh);
	g->linear(g, &l, dh, m, y1); /* the first read makes the shadow */
	g->layernorm(g, dx, m, n, 1e-6f, NULL, NULL, dsc, dsc, dh);
	g->linear(g, &l, dh, m, y1); /* written with the layernorm this time */
	float *h = down(g, dh, N);
	float *dh2 = up(g, h, N);
	g->linear(g, &l, dh2, m, y2);
	float *a = down(g, y1, N), *b = down(g, y2, N);
	CHECK("a GEMM on a layernorm's bf16 shadow equals one on a fresh upload, bit for bit",
	      !memcmp(a, b, N * sizeof(float)));
	g->unprepare(g, &l);
	g->release(g, dx), g->release(g, dsc), g->release(g, dh), g->release(g, y1), g->release(g, y2);
	g->release(g, dh2);
	free(x), free(sc), free(l.w), free(h), free(a), free(b);
}

/* true if the operand buffer (downloaded: op) holds the bf16 rounding of the fp32 output f, bit for bit */
static bool rounded(const float *op, const float *f, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (op[i] != b16(f[i]))
			return false;
	return true;
}

/* operand buffers (bf16 only): layernorm, add_layernorm, to_heads, from_heads and attention write
 * the rounding of their fp32 outputs, bit for bit, and a GEMM, to_heads or an attention reading one
 * equals the same op reading an fp32 buffer's shadow */
static void test_operand(dg_wan_ops *g, int m, int heads, int d)
{
	int n = heads * d, half = d / 2;
	size_t N = (size_t)m * n;
	float *x = rnd(N, -2, 2), *sc = rnd(n, -0.5, 0.5), *nw = rnd(n, 0.5, 1.5), *ang = rnd((size_t)m * half, -5, 5);
	float *cs = dg_malloc((size_t)m * half * sizeof(float)), *sn = dg_malloc((size_t)m * half * sizeof(float));
	for (size_t i = 0; i < (size_t)m * half; i++)
		cs[i] = cosf(ang[i]), sn[i] = sinf(ang[i]);
	dg_wan_linear l = { .w = rnd((size_t)n * n, -0.1, 0.1), .b = rnd(n, -0.5, 0.5), .out = n, .in = n };
	g->prepare(g, &l);
	float *dx = up(g, x, N), *dsc = up(g, sc, n), *dnw = up(g, nw, n), *dcs = up(g, cs, (size_t)m * half),
	      *dsn = up(g, sn, (size_t)m * half);
	float *f = poisoned(g, N), *op = g->alloc_operand(g, N), *y1 = poisoned(g, N), *y2 = poisoned(g, N);
	float *xa = up(g, x, N), *xb = up(g, x, N);
	char what[128];
	for (int k = 0; k < 4; k++) {
		const char *name[] = { "layernorm", "add_layernorm", "to_heads with RMSNorm and RoPE", "from_heads" };
		if (k == 0) {
			g->layernorm(g, dx, m, n, 1e-6f, NULL, NULL, dsc, NULL, f);
			g->layernorm(g, dx, m, n, 1e-6f, NULL, NULL, dsc, NULL, op);
		} else if (k == 1) { /* x (a copy) += x * sc, then the norm */
			g->add_layernorm(g, xa, dx, dsc, m, n, 1e-6f, NULL, NULL, dsc, dsc, f);
			g->add_layernorm(g, xb, dx, dsc, m, n, 1e-6f, NULL, NULL, dsc, dsc, op);
		} else if (k == 2) {
			g->to_heads(g, dx, m, heads, d, dnw, 1e-6f, dcs, dsn, f);
			g->to_heads(g, dx, m, heads, d, dnw, 1e-6f, dcs, dsn, op);
		} else {
			g->from_heads(g, dx, m, heads, d, f);
			g->from_heads(g, dx, m, heads, d, op);
		}
		float *hf = down(g, f, N), *ho = down(g, op, N);
		snprintf(what, sizeof what, "%s into an operand buffer: the bf16 rounding of its fp32 output, bit for bit", name[k]);
		CHECK(what, rounded(ho, hf, N));
		g->linear(g, &l, f, m, y1);
		g->linear(g, &l, op, m, y2);
		float *a = down(g, y1, N), *b = down(g, y2, N);
		snprintf(what, sizeof what, "a GEMM reading %s's operand buffer equals one reading its shadow", name[k]);
		CHECK(what, !memcmp(a, b, N * sizeof(float)));
		if (k == 0) { /* to_heads reading the operand buffer = reading an fp32 upload of its values */
			float *dup = up(g, ho, N);
			g->to_heads(g, op, m, heads, d, dnw, 1e-6f, dcs, dsn, y1);
			g->to_heads(g, dup, m, heads, d, dnw, 1e-6f, dcs, dsn, y2);
			free(a), free(b);
			a = down(g, y1, N), b = down(g, y2, N);
			CHECK("to_heads reading an operand buffer equals it on an fp32 copy of the values, bit for bit",
			      !memcmp(a, b, N * sizeof(float)));
			g->release(g, dup);
		}
		free(hf), free(ho), free(a), free(b);
	}
	/* attention on operand Q/K/V (the last from_heads: (m, n) read as (heads, m, d)) */
	g->attention(g, f, f, f, heads, m, m, d, y1);
	g->attention(g, op, op, op, heads, m, m, d, y2);
	float *a = down(g, y1, N), *b = down(g, y2, N);
	CHECK("attention on operand buffers equals attention on the shadows", !memcmp(a, b, N * sizeof(float)));
	/* attention into an operand buffer (the kernel's bf16 output) */
	float *op2 = g->alloc_operand(g, N);
	g->attention(g, op, op, op, heads, m, m, d, op2);
	float *h2 = down(g, op2, N);
	CHECK("attention into an operand buffer: the bf16 rounding of its fp32 output, bit for bit", rounded(h2, b, N));
	g->release(g, op2);
	free(h2);
	g->unprepare(g, &l);
	float *bufs[] = { dx, dsc, dnw, dcs, dsn, f, op, y1, y2, xa, xb };
	for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
		g->release(g, bufs[i]);
	free(x), free(sc), free(nw), free(ang), free(cs), free(sn), free(l.w), free(l.b), free(a), free(b);
}

/* ---------------------------------------------------------------------------------------------- */
/* 2., 3. the model: fp32 CPU, the naive bf16 CPU engine, the GPU                                  */

static dg_wan_ops cpu_fns; /* the CPU table's own functions, under the naive wrappers */

/* the naive engine's operand buffers (alloc_operand), whose GEMM outputs the GPU rounds to bf16 */
#define MAX_OPERANDS 64
static const float *operands[MAX_OPERANDS];

static float *naive_alloc_operand(dg_wan_ops *o, size_t n)
{
	float *p = cpu_fns.alloc_operand(o, n);
	for (int i = 0; i < MAX_OPERANDS; i++)
		if (!operands[i]) {
			operands[i] = p;
			return p;
		}
	dg_die("gpu_dit: more than %d operand buffers", MAX_OPERANDS);
}

static void naive_release(dg_wan_ops *o, float *p)
{
	for (int i = 0; i < MAX_OPERANDS; i++)
		if (operands[i] == p)
			operands[i] = NULL;
	cpu_fns.release(o, p);
}

static bool is_operand(const float *p)
{
	for (int i = 0; i < MAX_OPERANDS; i++)
		if (operands[i] == p)
			return true;
	return false;
}

/* bf16 operands; into an operand buffer, a bf16 output with the bias in bf16 (the GPU's GEMM) */
static void naive_linear(dg_wan_ops *o, const dg_wan_linear *l, const float *x, int m, float *y)
{
	if (l->fp32) { /* the head: fp32 operands on the GPU too */
		cpu_fns.linear(o, l, x, m, y);
		return;
	}
	size_t n = (size_t)m * l->in;
	float *xr = dg_malloc(n * sizeof(float));
	for (size_t i = 0; i < n; i++)
		xr[i] = b16(x[i]);
	if (is_operand(y)) {
		dg_wan_linear lb = bias_bf16(l);
		cpu_fns.linear(o, &lb, xr, m, y);
		for (size_t i = 0; i < (size_t)m * l->out; i++)
			y[i] = b16(y[i]);
		free(lb.b);
	} else {
		cpu_fns.linear(o, l, xr, m, y);
	}
	free(xr);
}

static void naive_ffn(dg_wan_ops *o, const dg_wan_linear *l1, const dg_wan_linear *l2, const float *x, int m,
		      float *y)
{
	dg_wan_linear l1n = bias_bf16(l1);
	cpu_fns.ffn(o, &l1n, l2, x, m, y); /* through naive_linear: bf16 operands and hidden */
	free(l1n.b);
}

static void naive_to_heads(dg_wan_ops *o, const float *x, int m, int heads, int d, const float *norm_w, float eps,
			   const float *cos, const float *sin, float *y)
{
	cpu_fns.to_heads(o, x, m, heads, d, norm_w, eps, cos, sin, y);
	for (size_t i = 0; i < (size_t)m * heads * d; i++) /* every attention operand */
		y[i] = b16(y[i]);
}

typedef struct {
	dg_wan_model *m;
	dg_wan_context *cond, *uncond;
	float **hidden; /* (layers) (n, dim) of the last forward */
	int n;
} engine;

static void on_hidden(void *user, int layer, const float *x)
{
	engine *e = user;
	memcpy(e->hidden[layer], x, (size_t)e->n * e->m->cfg.dim * sizeof(float));
}

static int engine_open(engine *e, const char *sub, const char *device, bool naive, const float *text, int tokens)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", models_dir, sub);
	memset(e, 0, sizeof *e);
	if (dg_wan_load(&e->m, path, device))
		return -1;
	if (naive) {
		cpu_fns = *e->m->ops;
		e->m->ops->alloc_operand = naive_alloc_operand;
		e->m->ops->release = naive_release;
		e->m->ops->linear = naive_linear;
		e->m->ops->ffn = naive_ffn;
		e->m->ops->to_heads = naive_to_heads;
	}
	float *zeros = dg_calloc(e->m->cfg.text_dim, sizeof(float));
	int rc = dg_wan_context_new(e->m, text, tokens, &e->cond) || dg_wan_context_new(e->m, zeros, 1, &e->uncond);
	free(zeros);
	e->hidden = dg_calloc(e->m->cfg.num_layers, sizeof(float *));
	return rc ? -1 : 0;
}

static void engine_close(engine *e)
{
	for (int l = 0; e->m && l < e->m->cfg.num_layers; l++)
		free(e->hidden[l]);
	free(e->hidden);
	if (e->m) {
		dg_wan_context_free(e->m, e->cond);
		dg_wan_context_free(e->m, e->uncond);
		dg_wan_free(e->m);
	}
}

static float *forward(engine *e, const float *x, const int latent[3], size_t nout)
{
	int grid[3];
	dg_wan_grid(e->m, latent, grid);
	e->n = grid[0] * grid[1] * grid[2];
	for (int l = 0; l < e->m->cfg.num_layers; l++) {
		free(e->hidden[l]);
		e->hidden[l] = dg_alloc_poisoned((size_t)e->n * e->m->cfg.dim);
	}
	dg_wan_call call = { .hidden = on_hidden, .user = e };
	float *out = dg_alloc_poisoned(nout);
	if (dg_wan_forward(e->m, x, latent, 750, e->cond, &call, out))
		dg_die("forward failed");
	return out;
}

/* 3 UniPC + CFG steps under policy spec (NULL: dense) at density rho */
static float *sample(engine *e, const float *noise, const int latent[3], size_t nout, const char *spec, double rho,
		     long long *sparse_units)
{
	int grid[3];
	dg_wan_grid(e->m, latent, grid);
	dg_policy p;
	dg_schedule sched;
	dg_policy_parse(spec ? spec : "dense", &p);
	dg_schedule_parse("warmup=1", &sched);
	const dg_wan_config *c = &e->m->cfg;
	dg_dit_attn *a = dg_dit_attn_new(e->m->ops, &p, rho, &sched, grid, c->num_layers, c->num_heads,
					 dg_wan_head_dim(c), 2);
	if (!a)
		dg_die("attention entry point");
	dg_dit_sample_opts so = { .model = e->m, .latent = { latent[0], latent[1], latent[2] }, .noise = noise,
				  .steps = 3, .shift = 3, .guidance = 5, .sampler = DG_SAMPLER_UNIPC,
				  .cond = e->cond, .uncond = e->uncond, .attn = a };
	float *x = dg_alloc_poisoned(nout);
	dg_dit_sample_stats st;
	if (dg_dit_sample(&so, x, &st))
		dg_die("sampling failed");
	dg_dit_attn_stats as;
	dg_dit_attn_get_stats(a, &as);
	*sparse_units = as.sparse_calls;
	dg_dit_attn_free(a);
	return x;
}

static void test_model(const char *sub, bool runs)
{
	char p[512];
	dg_wan_model *probe; /* for the text's width */
	float *text;
	int tokens;
	snprintf(p, sizeof p, "%s/%s", models_dir, sub);
	if (dg_wan_load(&probe, p, "cpu"))
		dg_die("cannot load %s", sub);
	snprintf(p, sizeof p, "%s/text.safetensors", fix_dir);
	if (dg_dit_read_text(probe, p, &text, &tokens))
		dg_die("cannot read %s", p);
	dg_wan_free(probe);
	engine e[3]; /* fp32 CPU (the reference), naive bf16 CPU, GPU */
	int rc = engine_open(&e[0], sub, "cpu", false, text, tokens) ||
		 engine_open(&e[1], sub, "cpu", true, text, tokens) || engine_open(&e[2], sub, "gpu", false, text, tokens);
	CHECKF(rc == 0, "%s: loads on the cpu and the gpu", sub);
	if (rc)
		goto done;
	int latent[3] = { 4, 16, 24 }; /* 384 tokens with the (1, 2, 2) patch: three groups of 128 */
	const dg_wan_config *c = &e[0].m->cfg;
	size_t nout = (size_t)c->out_dim * latent[0] * latent[1] * latent[2];
	float *noise = dg_dit_seed_noise(e[0].m, latent, seed);
	float *out[3];
	for (int i = 0; i < 3; i++)
		out[i] = forward(&e[i], noise, latent, nout);
	size_t nh = (size_t)e[0].n * c->dim;
	for (int l = 0; l < c->num_layers; l++) {
		double *ref = to_f64(e[0].hidden[l], nh);
		char what[128];
		snprintf(what, sizeof what, "%s: forward, block %d output (%d tokens)", sub, l, e[0].n);
		rule(what, e[2].hidden[l], e[1].hidden[l], ref, nh);
		free(ref);
	}
	double *ref = to_f64(out[0], nout);
	char what[160];
	snprintf(what, sizeof what, "%s: forward, velocity", sub);
	rule(what, out[2], out[1], ref, nout);
	free(ref);
	for (int i = 0; i < 3; i++)
		free(out[i]);
	{ /* CFG's second pass from the first pass's first self-attention half: the same bits on the GPU */
		dg_wan_call keep = { .keep_first = true }, reuse = { .pass = 1, .reuse_first = true }, plain = { .pass = 1 };
		for (int i = 0; i < 3; i++)
			out[i] = dg_alloc_poisoned(nout);
		rc = dg_wan_forward(e[2].m, noise, latent, 750, e[2].cond, &keep, out[0]) ||
		     dg_wan_forward(e[2].m, noise, latent, 750, e[2].uncond, &reuse, out[1]) ||
		     dg_wan_forward(e[2].m, noise, latent, 750, e[2].uncond, &plain, out[2]);
		CHECKF(rc == 0 && !memcmp(out[1], out[2], nout * sizeof(float)),
		       "%s: gpu: the unconditional pass from the conditional pass's first self-attention half = "
		       "computed in full, bit for bit", sub);
		for (int i = 0; i < 3; i++)
			free(out[i]);
	}
	/* dense; mc-sparse at density 1 (every key selected: the whole sparse path, PCA groups, exact
	 * scores, selection, gather kernel, residual, with nothing for rounding to flip); mc-sparse at 0.3,
	 * where keys at the top-k boundary flip between engines (each engine's own rounding decides), so
	 * the error is reported, not held to the rule: two H200 runs of 2026-12-02 gave 0.132 against
	 * 2 x 0.129 and 0.257 against 2 x 0.0904 from the same code; DiTFastAttn's window (its key sets
	 * fixed by the shape: nothing flips) under the rule, its reuse steps through the window kernel,
	 * the heads batched with their residuals (dg_window_fwd_heads); STA (a static mask, no residual:
	 * every call's heads batched without one, dg_sparse_fwd_heads) under the rule */
	static const struct { const char *spec; double rho; bool rule; } runs3[] = {
		{ NULL, 1, true }, { "mc-sparse", 1, true }, { "mc-sparse", 0.3, false }, { "ditfastattn/window=40", 0.2, true },
		{ "sta", 0.2, true } };
	for (int pol = 0; runs && pol < (int)(sizeof runs3 / sizeof *runs3); pol++) {
		long long units[3];
		const char *spec = runs3[pol].spec;
		for (int i = 0; i < 3; i++)
			out[i] = sample(&e[i], noise, latent, nout, spec, runs3[pol].rho, &units[i]);
		ref = to_f64(out[0], nout);
		snprintf(what, sizeof what, "%s: 3 UniPC + CFG steps, %s at %g, warm-up 1 (sparse units cpu %lld, gpu %lld)",
			 sub, spec ? spec : "dense", runs3[pol].rho, units[0], units[2]);
		if (runs3[pol].rule) {
			rule(what, out[2], out[1], ref, nout);
		} else {
			double mx, eg = err_of(out[2], ref, nout, &mx), en = err_of(out[1], ref, nout, &mx);
			printf("info %s: max err %.3g, naive %.3g (max|ref| %.3g; selection flips, not held to the rule)\n",
			       what, eg, en, mx);
		}
		if (spec)
			CHECKF(units[2] == units[0] && units[2] > 0, "%s: %s at %g runs sparse on the gpu as on the cpu", sub,
			       spec, runs3[pol].rho);
		free(ref);
		for (int i = 0; i < 3; i++)
			free(out[i]);
	}
	free(noise);
done:
	for (int i = 0; i < 3; i++)
		engine_close(&e[i]);
	free(text);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: gpu_dit MODELS_DIR FIXTURES_DIR\n");
		return 2;
	}
	models_dir = argv[1], fix_dir = argv[2];
	if (!dg_backend_gpu_available()) {
		printf("skipped: no CUDA device\n");
		return 77;
	}
	seed = (uint64_t)time(NULL);
	printf("seed %llu\n", (unsigned long long)seed);
	dg_wan_ops *g = dg_wan_ops_gpu(), *c = dg_wan_ops_cpu();
	printf("%s\n", g->device);
	test_linear(g, 300, 256, 192);
	test_linear(g, 77, 4096, 128);
	test_norms(g, 300, 320);   /* warp per row (n % 4 == 0, n <= 2048) */
	test_norms(g, 61, 1536);   /* Wan-1.3B's width, warp per row; m not a multiple of its 8 rows a block */
	test_norms(g, 50, 322);    /* n % 4 != 0: block per row, the row in registers */
	test_norms(g, 40, 5120);   /* Wan-14B's width: block per row, the larger register row */
	test_norms(g, 20, 6500);   /* wider than that: the row read three times */
	test_elementwise(g, c, 300, 2, 128); /* warp per row */
	test_elementwise(g, c, 77, 4, 64);
	test_elementwise(g, c, 61, 12, 128); /* Wan-1.3B's 12 heads of 128, warp per row */
	test_elementwise(g, c, 33, 3, 20);   /* d % 8 != 0: block per row */
	test_elementwise(g, c, 20, 40, 128); /* 2560 pairs a row: block per row, the larger register row */
	test_elementwise(g, c, 10, 56, 128); /* 3584: wider, read from memory */
	test_attention(g, 2, 300, 300, 128);
	test_attention(g, 2, 300, 300, 64);
	test_attention(g, 3, 300, 77, 128); /* cross-attention: nk != nq, nk not a multiple of the tile */
	test_attention(g, 2, 130, 512, 64);
	test_shadow(g, 200, 256);
	test_operand(g, 300, 2, 128);
	test_operand(g, 77, 12, 64);
	test_operand(g, 61, 12, 128);
	test_ffn(g, c, 333, 128, 512, 192, false); /* m not a multiple of 128; GELU without bias */
	test_ffn(g, c, 1000, 256, 1024, 256, true); /* the hidden scratch grows */
	test_ffn_gelu_form(g, 256, 64, 1024);
	c->destroy(c);
	g->destroy(g);
	test_model("orig_hd64", true);
	test_model("orig_hd128", false);
	return test_report();
}
