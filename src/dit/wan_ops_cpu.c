/*
 * wan_ops_cpu.c: the CPU backend of the Wan forward (wan_ops.h): host memory, fp32, OpenBLAS SGEMM
 * (kept single-threaded) called on fixed tiles of the output from an OpenMP team, norms and
 * elementwise ops in OpenMP loops with fp64 row statistics, attention through dg_attn_dense
 * (attention.h). The feed-forward (ffn) is linear, gelu_tanh, linear on a few row tiles at a time,
 * so its hidden scratch stays (ffn_rows(), ffn_dim) whatever the token count.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cblas.h>

#include "policy/attention.h"
#include "util/util.h"
#include "dit/wan.h"
#include "dit/wan_ops.h"

#define TILE_ROWS 256
#define TILE_COLS 1024

typedef struct {
	float *hidden; /* ffn's (min(m, ffn_rows()), l1->out) scratch, grown as needed */
	size_t hidden_n;
	float *sum;    /* linear_add's (m, out) product, grown as needed */
	size_t sum_n;
} cpu_ops;

static float *cpu_alloc(dg_wan_ops *o, size_t n) { return dg_malloc((n ? n : 1) * sizeof(float)); }
static void cpu_release(dg_wan_ops *o, float *p) { free(p); }
static void cpu_copy(dg_wan_ops *o, float *dst, const float *src, size_t n)
{
	if (n)
		memcpy(dst, src, n * sizeof(float));
}
static void cpu_prepare(dg_wan_ops *o, dg_wan_linear *l) {}
static void cpu_sync(dg_wan_ops *o) {}

/*
 * y (m, out) = x (m, in) W^T + b, one SGEMM per (TILE_ROWS, TILE_COLS) tile of y counted from
 * (0, 0), the tiles shared out to the threads. OpenBLAS's arithmetic for an element depends on the
 * shape of the call it is in, so here on its tile alone: rows from a multiple of TILE_ROWS come
 * out bit for bit as in a call on all the rows (ffn's chunks rely on it).
 */
static void cpu_linear(dg_wan_ops *o, const dg_wan_linear *l, const float *x, int m, float *y)
{
	int out = l->out, in = l->in;
	int rt = (m + TILE_ROWS - 1) / TILE_ROWS, ct = (out + TILE_COLS - 1) / TILE_COLS;
#pragma omp parallel for schedule(dynamic) if (rt * ct > 1 && (double)m * out * in > 1e6)
	for (int t = 0; t < rt * ct; t++) {
		int r0 = t / ct * TILE_ROWS, c0 = t % ct * TILE_COLS;
		int rows = m - r0 < TILE_ROWS ? m - r0 : TILE_ROWS, cols = out - c0 < TILE_COLS ? out - c0 : TILE_COLS;
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, cols, in, 1.0f, x + (size_t)r0 * in, in,
			    l->w + (size_t)c0 * in, in, 0.0f, y + (size_t)r0 * out + c0, out);
	}
	if (l->b) {
#pragma omp parallel for schedule(static) if ((double)m * out > 1e5)
		for (int r = 0; r < m; r++) {
			float *yr = y + (size_t)r * out;
			for (int j = 0; j < out; j++)
				yr[j] += l->b[j];
		}
	}
}

static void cpu_add_gated(dg_wan_ops *o, float *x, const float *y, const float *gate, int m, int n);

/* y += the table's linear (o->linear: a caller's replacement counts) of x */
static void cpu_linear_add(dg_wan_ops *o, const dg_wan_linear *l, const float *x, int m, float *y)
{
	cpu_ops *c = o->impl;
	size_t need = (size_t)m * l->out;
	if (c->sum_n < need) {
		free(c->sum);
		c->sum = dg_malloc((need ? need : 1) * sizeof(float));
		c->sum_n = need;
	}
	o->linear(o, l, x, m, c->sum);
	cpu_add_gated(o, y, c->sum, NULL, m, l->out);
}

/* rows per ffn pass: whole row tiles, at least 4 and one per thread */
static int ffn_rows(void)
{
	int threads = omp_get_max_threads();
	return TILE_ROWS * (threads > 4 ? threads : 4);
}

/*
 * y (m, l2->out) = l2(GELU_tanh(l1(x))), ffn_rows() rows at a time through the table's own linear
 * and gelu_tanh: the chunks start on tile rows, so y is bit for bit that of the three ops on all
 * the rows (and where a caller replaced linear, as the tests' bf16-rounding one, both GEMMs use it).
 */
static void cpu_ffn(dg_wan_ops *o, const dg_wan_linear *l1, const dg_wan_linear *l2, const float *x, int m,
		    float *y)
{
	cpu_ops *c = o->impl;
	int chunk = ffn_rows();
	size_t need = (size_t)(m < chunk ? m : chunk) * l1->out;
	if (c->hidden_n < need) {
		free(c->hidden);
		c->hidden = dg_malloc(need * sizeof(float));
		c->hidden_n = need;
	}
	for (int r0 = 0; r0 < m; r0 += chunk) {
		int rows = m - r0 < chunk ? m - r0 : chunk;
		o->linear(o, l1, x + (size_t)r0 * l1->in, rows, c->hidden);
		o->gelu_tanh(o, c->hidden, (size_t)rows * l1->out);
		o->linear(o, l2, c->hidden, rows, y + (size_t)r0 * l2->out);
	}
}

static void cpu_layernorm(dg_wan_ops *o, const float *x, int m, int n, float eps, const float *w,
			  const float *b, const float *scale, const float *shift, float *y)
{
#pragma omp parallel for schedule(static) if ((double)m * n > 1e5)
	for (int r = 0; r < m; r++) {
		const float *xr = x + (size_t)r * n;
		float *yr = y + (size_t)r * n;
		double s = 0, ss = 0;
		for (int j = 0; j < n; j++)
			s += xr[j];
		double mean = s / n;
		for (int j = 0; j < n; j++) {
			double d = xr[j] - mean;
			ss += d * d;
		}
		float inv = (float)(1.0 / sqrt(ss / n + eps)), mu = (float)mean;
		for (int j = 0; j < n; j++) {
			float v = (xr[j] - mu) * inv;
			if (w)
				v = v * w[j] + (b ? b[j] : 0.0f);
			if (scale)
				v *= 1.0f + scale[j];
			if (shift)
				v += shift[j];
			yr[j] = v;
		}
	}
}

static void cpu_add_layernorm(dg_wan_ops *o, float *x, const float *r, const float *gate, int m, int n,
			      float eps, const float *w, const float *b, const float *scale, const float *shift, float *y)
{
	if (r)
		cpu_add_gated(o, x, r, gate, m, n);
	cpu_layernorm(o, x, m, n, eps, w, b, scale, shift, y);
}

static void cpu_to_heads(dg_wan_ops *o, const float *x, int m, int heads, int d, const float *norm_w, float eps,
			 const float *cos, const float *sin, float *y)
{
	int half = d / 2, D = heads * d;
#pragma omp parallel for schedule(static) if ((double)m * D > 1e5)
	for (int r = 0; r < m; r++) {
		const float *xr = x + (size_t)r * D;
		const float *c = cos ? cos + (size_t)r * half : NULL, *s = sin ? sin + (size_t)r * half : NULL;
		float inv = 1.0f;
		if (norm_w) {
			double ss = 0;
			for (int j = 0; j < D; j++)
				ss += (double)xr[j] * xr[j];
			inv = (float)(1.0 / sqrt(ss / D + eps));
		}
		for (int h = 0; h < heads; h++) {
			float *yr = y + ((size_t)h * m + r) * d;
			for (int i = 0; i < half; i++) {
				int j = h * d + 2 * i;
				float a = xr[j], b = xr[j + 1];
				if (norm_w)
					a = a * inv * norm_w[j], b = b * inv * norm_w[j + 1];
				if (c) {
					yr[2 * i] = a * c[i] - b * s[i];
					yr[2 * i + 1] = a * s[i] + b * c[i];
				} else {
					yr[2 * i] = a, yr[2 * i + 1] = b;
				}
			}
		}
	}
}

static void cpu_from_heads(dg_wan_ops *o, const float *x, int m, int heads, int d, float *y)
{
#pragma omp parallel for schedule(static) if ((double)m * heads * d > 1e5)
	for (int r = 0; r < m; r++)
		for (int h = 0; h < heads; h++)
			memcpy(y + (size_t)r * heads * d + (size_t)h * d, x + ((size_t)h * m + r) * d,
			       (size_t)d * sizeof(float));
}

static void cpu_gelu_tanh(dg_wan_ops *o, float *x, size_t n)
{
	const float k = 0.7978845608028654f; /* sqrt(2/pi) */
#pragma omp parallel for schedule(static) if (n > 100000)
	for (size_t i = 0; i < n; i++) {
		float v = x[i];
		x[i] = 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v)));
	}
}

static void cpu_add_gated(dg_wan_ops *o, float *x, const float *y, const float *gate, int m, int n)
{
#pragma omp parallel for schedule(static) if ((double)m * n > 1e5)
	for (int r = 0; r < m; r++) {
		float *xr = x + (size_t)r * n;
		const float *yr = y + (size_t)r * n;
		if (gate)
			for (int j = 0; j < n; j++)
				xr[j] += yr[j] * gate[j];
		else
			for (int j = 0; j < n; j++)
				xr[j] += yr[j];
	}
}

static void cpu_attention(dg_wan_ops *o, const float *q, const float *k, const float *v, int heads,
			  int nq, int nk, int d, float *out)
{
	float *oh = dg_malloc((size_t)heads * nq * d * sizeof(float)); /* (heads, nq, d) */
	for (int h = 0; h < heads; h++)
		dg_attn_dense(q + (size_t)h * nq * d, k + (size_t)h * nk * d, v + (size_t)h * nk * d, nq, nk,
			      d, oh + (size_t)h * nq * d, NULL);
	cpu_from_heads(o, oh, nq, heads, d, out);
	free(oh);
}

static void cpu_destroy(dg_wan_ops *o)
{
	cpu_ops *c = o->impl;
	free(c->hidden);
	free(c->sum);
	free(c);
	free(o);
}

dg_wan_ops *dg_wan_ops_cpu(void)
{
	dg_attn_init_threads(); /* OpenBLAS single-threaded: we parallelise around it */
	dg_wan_ops *o = dg_calloc(1, sizeof *o);
	o->name = "cpu";
	o->impl = dg_calloc(1, sizeof(cpu_ops));
	snprintf(o->device, sizeof o->device, "%s", dg_cpu_name());
	o->alloc = cpu_alloc;
	o->alloc_operand = cpu_alloc; /* fp32 throughout */
	o->release = cpu_release;
	o->host_alloc = cpu_alloc;
	o->host_free = cpu_release;
	o->upload = cpu_copy;
	o->copy = cpu_copy;
	o->download = cpu_copy;
	o->sync = cpu_sync;
	o->prepare = cpu_prepare;
	o->unprepare = cpu_prepare;
	o->linear = cpu_linear;
	o->linear_add = cpu_linear_add;
	o->ffn = cpu_ffn;
	o->layernorm = cpu_layernorm;
	o->add_layernorm = cpu_add_layernorm;
	o->to_heads = cpu_to_heads;
	o->from_heads = cpu_from_heads;
	o->gelu_tanh = cpu_gelu_tanh;
	o->add_gated = cpu_add_gated;
	o->attention = cpu_attention;
	o->destroy = cpu_destroy;
	return o;
}
