/*
 * wan_ops_checked.c: a CPU stand-in for a device backend of the Wan forward (wan_ops.h), for tests:
 * it behaves as a device_weights backend (the loader hands it every weight and frees the host
 * copies; BF16 weights as stored, prepare_bf16, as to the GPU) and checks, before each op, that
 * every tensor argument lies inside a buffer made by its alloc (or, for weights, inside its own
 * copy) with room for the op's extent; anything else (a host pointer that a GPU kernel would fault
 * on) stops the program with the op and argument named; so does an operand buffer (alloc_operand:
 * bf16 only on a device) passed where an op reads or writes fp32.
 * The arithmetic is the CPU table's (wan_ops_cpu.c), so its outputs equal the CPU's bit for bit.
 *   dg_wan_load_ops(&m, path, dg_wan_ops_checked())   (tests/dit/test_wan.c, which also checks that it stops)
 */
#include <stdlib.h>
#include <string.h>

#include "util/util.h"
#include "dit/wan.h"
#include "dit/wan_ops.h"
#include "wan_ops_checked.h"

typedef struct {
	const float *p;
	size_t n;
	bool operand; /* from alloc_operand */
} range;

typedef struct {
	dg_wan_ops *cpu; /* the arithmetic */
	range *bufs;
	int nbufs, cap;
} checked;

typedef struct {
	float *w, *b; /* this table's copy of a linear's weight (out, in) and bias (out) */
} weights;

/* p[0 .. n) lies inside one of the table's buffers, or stop */
static const range *need(dg_wan_ops *o, const char *op, const char *arg, const float *p, size_t n)
{
	checked *c = o->impl;
	for (int i = 0; i < c->nbufs; i++)
		if (p >= c->bufs[i].p && p + n <= c->bufs[i].p + c->bufs[i].n)
			return &c->bufs[i];
	dg_die("checked ops: %s: %s (%p, %zu floats) is not inside a buffer of this table", op, arg,
	       (const void *)p, n);
}

/* need, and not an operand buffer (an fp32 input, or an output that a device keeps in fp32) */
static void need32(dg_wan_ops *o, const char *op, const char *arg, const float *p, size_t n)
{
	if (need(o, op, arg, p, n)->operand)
		dg_die("checked ops: %s: %s is an operand buffer (bf16 only on a device), which this op cannot take",
		       op, arg);
}

static void opt(dg_wan_ops *o, const char *op, const char *arg, const float *p, size_t n)
{
	if (p)
		need(o, op, arg, p, n);
}

static void track(checked *c, const float *p, size_t n, bool operand)
{
	if (c->nbufs == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 256;
		c->bufs = dg_realloc(c->bufs, (size_t)c->cap * sizeof *c->bufs);
	}
	c->bufs[c->nbufs++] = (range){ p, n, operand };
}

static void untrack(checked *c, const float *p)
{
	for (int i = 0; i < c->nbufs; i++)
		if (c->bufs[i].p == p) {
			c->bufs[i] = c->bufs[--c->nbufs];
			return;
		}
	dg_die("checked ops: release of %p, which this table did not allocate", (const void *)p);
}

static float *ck_alloc(dg_wan_ops *o, size_t n)
{
	float *p = dg_malloc((n ? n : 1) * sizeof(float));
	track(o->impl, p, n, false);
	return p;
}

static float *ck_alloc_operand(dg_wan_ops *o, size_t n)
{
	float *p = dg_malloc((n ? n : 1) * sizeof(float));
	track(o->impl, p, n, true);
	return p;
}

static void ck_release(dg_wan_ops *o, float *p)
{
	untrack(o->impl, p);
	free(p);
}

/* host staging: plain host memory, not a buffer of the table */
static float *ck_host_alloc(dg_wan_ops *o, size_t n) { return dg_malloc((n ? n : 1) * sizeof(float)); }
static void ck_host_free(dg_wan_ops *o, float *p) { free(p); }

static void ck_upload(dg_wan_ops *o, float *dst, const float *host, size_t n)
{
	need32(o, "upload", "dst", dst, n);
	memcpy(dst, host, n * sizeof(float));
}

static void ck_copy(dg_wan_ops *o, float *dst, const float *src, size_t n)
{
	need32(o, "copy", "dst", dst, n), need32(o, "copy", "src", src, n);
	memcpy(dst, src, n * sizeof(float));
}

static void ck_download(dg_wan_ops *o, float *host, const float *src, size_t n)
{
	need(o, "download", "src", src, n);
	memcpy(host, src, n * sizeof(float));
}

static void ck_sync(dg_wan_ops *o) {}

static float *copy_tracked(dg_wan_ops *o, const float *src, size_t n)
{
	float *p = ck_alloc(o, n);
	memcpy(p, src, n * sizeof(float));
	return p;
}

static void ck_prepare(dg_wan_ops *o, dg_wan_linear *l)
{
	weights *w = dg_malloc(sizeof *w);
	w->w = copy_tracked(o, l->w, (size_t)l->out * l->in);
	w->b = l->b ? copy_tracked(o, l->b, (size_t)l->out) : NULL;
	l->dev = w;
}

/* the loader's bf16 path (prepare_bf16, the GPU's): the stored words, little-endian and maybe
 * unaligned, widened exactly */
static void ck_prepare_bf16(dg_wan_ops *o, dg_wan_linear *l, const void *w16)
{
	size_t nw = (size_t)l->out * l->in;
	const unsigned char *p = w16;
	float *f = dg_malloc(nw * sizeof(float));
	for (size_t i = 0; i < nw; i++)
		f[i] = dg_bf16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
	l->w = f;
	ck_prepare(o, l);
	free(f);
	l->w = NULL;
}

static void ck_unprepare(dg_wan_ops *o, dg_wan_linear *l)
{
	weights *w = l->dev;
	if (!w)
		return;
	ck_release(o, w->w);
	if (w->b)
		ck_release(o, w->b);
	free(w);
	l->dev = NULL;
}

/* l with this table's copies of its weights in place of the host ones, or stop if l was not prepared */
static dg_wan_linear with_copies(const char *op, const dg_wan_linear *l)
{
	const weights *w = l->dev;
	if (!w)
		dg_die("checked ops: %s (%d x %d) was not prepared", op, l->out, l->in);
	dg_wan_linear c = *l;
	c.w = w->w;
	c.b = w->b;
	return c;
}

static void ck_linear(dg_wan_ops *o, const dg_wan_linear *l, const float *x, int m, float *y)
{
	dg_wan_linear lw = with_copies("linear", l);
	need(o, "linear", "x", x, (size_t)m * l->in);
	need(o, "linear", "y", y, (size_t)m * l->out);
	dg_wan_ops *cpu = ((checked *)o->impl)->cpu;
	cpu->linear(cpu, &lw, x, m, y);
}

static void ck_linear_add(dg_wan_ops *o, const dg_wan_linear *l, const float *x, int m, float *y)
{
	dg_wan_linear lw = with_copies("linear_add", l);
	need(o, "linear_add", "x", x, (size_t)m * l->in);
	need32(o, "linear_add", "y", y, (size_t)m * l->out);
	dg_wan_ops *cpu = ((checked *)o->impl)->cpu;
	cpu->linear_add(cpu, &lw, x, m, y);
}

/* the hidden is the CPU table's own scratch, as a device backend's is its own */
static void ck_ffn(dg_wan_ops *o, const dg_wan_linear *l1, const dg_wan_linear *l2, const float *x, int m,
		   float *y)
{
	dg_wan_linear w1 = with_copies("ffn", l1), w2 = with_copies("ffn", l2);
	if (l2->in != l1->out)
		dg_die("checked ops: ffn: l2 takes %d inputs, l1 gives %d", l2->in, l1->out);
	need(o, "ffn", "x", x, (size_t)m * l1->in);
	need32(o, "ffn", "y", y, (size_t)m * l2->out);
	dg_wan_ops *cpu = ((checked *)o->impl)->cpu;
	cpu->ffn(cpu, &w1, &w2, x, m, y);
}

static void ck_layernorm(dg_wan_ops *o, const float *x, int m, int n, float eps, const float *w,
			 const float *b, const float *scale, const float *shift, float *y)
{
	need32(o, "layernorm", "x", x, (size_t)m * n);
	need(o, "layernorm", "y", y, (size_t)m * n);
	opt(o, "layernorm", "w", w, n), opt(o, "layernorm", "b", b, n);
	opt(o, "layernorm", "scale", scale, n), opt(o, "layernorm", "shift", shift, n);
	dg_wan_ops *cpu = ((checked *)o->impl)->cpu;
	cpu->layernorm(cpu, x, m, n, eps, w, b, scale, shift, y);
}

static void ck_add_layernorm(dg_wan_ops *o, float *x, const float *r, const float *gate, int m, int n, float eps,
			     const float *w, const float *b, const float *scale, const float *shift, float *y)
{
	need32(o, "add_layernorm", "x", x, (size_t)m * n);
	if (r)
		need32(o, "add_layernorm", "r", r, (size_t)m * n);
	need(o, "add_layernorm", "y", y, (size_t)m * n);
	opt(o, "add_layernorm", "gate", gate, n);
	opt(o, "add_layernorm", "w", w, n), opt(o, "add_layernorm", "b", b, n);
	opt(o, "add_layernorm", "scale", scale, n), opt(o, "add_layernorm", "shift", shift, n);
	dg_wan_ops *cpu = ((checked *)o->impl)->cpu;
	cpu->add_layernorm(cpu, x, r, gate, m, n, eps, w, b, scale, shift, y);
}

static void ck_to_heads(dg_wan_ops *o, const float *x, int m, int heads, int d, const float *norm_w, float eps,
			const float *cos, const float *sin, float *y)
{
	size_t all = (size_t)m * heads * d;
	need(o, "to_heads", "x", x, all), need(o, "to_heads", "y", y, all);
	opt(o, "to_heads", "norm_w", norm_w, (size_t)heads * d);
	opt(o, "to_heads", "cos", cos, (size_t)m * d / 2), opt(o, "to_heads", "sin", sin, (size_t)m * d / 2);
	dg_wan_ops *cpu = ((checked *)o->impl)->cpu;
	cpu->to_heads(cpu, x, m, heads, d, norm_w, eps, cos, sin, y);
}

static void ck_from_heads(dg_wan_ops *o, const float *x, int m, int heads, int d, float *y)
{
	size_t all = (size_t)m * heads * d;
	need32(o, "from_heads", "x", x, all), need(o, "from_heads", "y", y, all);
	dg_wan_ops *cpu = ((checked *)o->impl)->cpu;
	cpu->from_heads(cpu, x, m, heads, d, y);
}

static void ck_gelu_tanh(dg_wan_ops *o, float *x, size_t n)
{
	need32(o, "gelu_tanh", "x", x, n);
	dg_wan_ops *cpu = ((checked *)o->impl)->cpu;
	cpu->gelu_tanh(cpu, x, n);
}

static void ck_add_gated(dg_wan_ops *o, float *x, const float *y, const float *gate, int m, int n)
{
	need32(o, "add_gated", "x", x, (size_t)m * n), need32(o, "add_gated", "y", y, (size_t)m * n);
	opt(o, "add_gated", "gate", gate, n);
	dg_wan_ops *cpu = ((checked *)o->impl)->cpu;
	cpu->add_gated(cpu, x, y, gate, m, n);
}

static void ck_attention(dg_wan_ops *o, const float *q, const float *k, const float *v, int heads, int nq,
			 int nk, int d, float *out)
{
	need(o, "attention", "q", q, (size_t)heads * nq * d), need(o, "attention", "o", out, (size_t)heads * nq * d);
	need(o, "attention", "k", k, (size_t)heads * nk * d), need(o, "attention", "v", v, (size_t)heads * nk * d);
	dg_wan_ops *cpu = ((checked *)o->impl)->cpu;
	cpu->attention(cpu, q, k, v, heads, nq, nk, d, out);
}

static void ck_destroy(dg_wan_ops *o)
{
	checked *c = o->impl;
	for (int i = 0; i < c->nbufs; i++) /* owners release theirs; what is left goes with the table */
		free((void *)c->bufs[i].p);
	c->cpu->destroy(c->cpu);
	free(c->bufs), free(c), free(o);
}

dg_wan_ops *dg_wan_ops_checked(void)
{
	checked *c = dg_calloc(1, sizeof *c);
	c->cpu = dg_wan_ops_cpu();
	dg_wan_ops *o = dg_calloc(1, sizeof *o);
	*o = (dg_wan_ops){
		.name = "cpu-checked", .device_weights = true, .impl = c, .alloc = ck_alloc,
		.alloc_operand = ck_alloc_operand, .release = ck_release, .host_alloc = ck_host_alloc,
		.host_free = ck_host_free, .upload = ck_upload, .copy = ck_copy,
		.download = ck_download, .sync = ck_sync, .prepare = ck_prepare, .prepare_bf16 = ck_prepare_bf16,
		.unprepare = ck_unprepare,
		.linear = ck_linear, .linear_add = ck_linear_add, .ffn = ck_ffn,
		.layernorm = ck_layernorm, .add_layernorm = ck_add_layernorm, .to_heads = ck_to_heads,
		.from_heads = ck_from_heads, .gelu_tanh = ck_gelu_tanh, .add_gated = ck_add_gated,
		.attention = ck_attention, .destroy = ck_destroy,
	};
	snprintf(o->device, sizeof o->device, "checked stand-in: %.150s", c->cpu->device);
	return o;
}
