/*
 * wan_ops_gpu.c: the GPU backend of the Wan forward (wan_ops.h), docs/spec.md §7: weights bf16 on the
 * device (converted from the loader's per-tensor fp32, which the loader then frees), linears through
 * cuBLASLt (bf16 operands, fp32 accumulate and output, bias fused in the epilogue), norms, RoPE,
 * GELU and gated residual adds in fp32 (kernels/dit_ops.cu), attention by the flash kernel
 * (bf16 Q/K/V, the heads' outputs merged; cross-attention with its own key count). The feed-forward is two
 * cuBLASLt GEMMs: the first with bias + GELU in its epilogue and a bf16 output, the hidden (m,
 * ffn_dim) that the second reads as it is; so the hidden never exists in fp32. Built only with CUDA
 * (DG_HAVE_CUDA); without it dg_wan_ops_gpu says so and returns NULL.
 *
 * Activations are fp32 buffers from alloc. A buffer that a GEMM or an attention reads as bf16 gets
 * a bf16 shadow (made on that first read); from then on the ops that write the buffer (layernorm,
 * to_heads, from_heads, gelu_tanh, add_gated) write the shadow in the same pass, so Wan's
 * bf16 GEMM inputs cost no extra pass. Any other write (linear, ffn, attention, upload)
 * invalidates it. Operand buffers (alloc_operand) are the shadow alone: bf16 storage whose
 * address is also the buffer's float pointer; the ops writing them skip the fp32 output, download
 * widens them, a linear or an attention into one writes bf16 from its kernel, to_heads reads
 * them in bf16, and an op that would read or write them in fp32 stops the program. A residual add runs inside the GEMM (linear_add: beta 1 onto y) or inside the next
 * LayerNorm (add_layernorm).
 * Outside the table, the attention entry point writes its output into an operand buffer's bf16
 * storage (the bf16 hook), ordered before the table's later ops by the GPU policy backend.
 * Every op is queued on the default stream; download waits for them. Device time per kind of op is
 * measured with event pairs, summed when the queue is drained (sync, download).
 */
#include "dit/wan_ops.h"

#include "util/util.h"

#ifdef DG_HAVE_CUDA

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>

#include "util/cuda_check.h"
#include "dsgap_kernels.h"
#include "dit/wan.h"

#define WORKSPACE_BYTES (32u << 20)
#define MAX_MARKS 2048

typedef struct {
	float *p;       /* fp32 (n); for an operand buffer, the address of bf */
	size_t n;
	uint16_t *bf;   /* bf16 shadow (n), or NULL until a GEMM or attention reads the buffer */
	size_t valid;   /* leading elements of bf that match p */
	bool operand;   /* bf16 only (alloc_operand): bf is the storage */
} dbuf;

typedef struct {
	int m, out, in;
	cublasLtEpilogue_t ep; /* DEFAULT, BIAS, GELU or GELU_BIAS */
	cudaDataType_t at;     /* operands: CUDA_R_16BF, or CUDA_R_32F (dg_wan_linear.fp32) */
	cudaDataType_t dt;     /* output: CUDA_R_32F, or CUDA_R_16BF (the FFN's hidden) */
	cublasLtMatmulDesc_t op;
	cublasLtMatrixLayout_t a, b, c;
	cublasLtMatmulAlgo_t algo;
} plan;

typedef struct {
	void *w;     /* (out, in) bf16, or fp32 for an fp32 linear */
	float *b;    /* (out) or NULL */
	uint16_t *b16; /* the bias in bf16, for a GEMM with a bf16 output (the FFN's first) */
} lin_dev;

typedef struct {
	cudaEvent_t a, b;
	int kind;
} mark;

typedef struct {
	cublasLtHandle_t lt;
	void *ws;
	dbuf *bufs;
	int nbufs, capbufs;
	plan *plans;
	int nplans;
	uint16_t *scratch[3]; /* conversions of inputs that are not alloc'd buffers */
	size_t scratch_n[3];
	uint16_t *hidden;     /* the FFN's (m, ffn_dim) bf16 hidden, grown as needed */
	size_t hidden_n;
	mark *marks;
	int nmarks, made_marks;
} gpu_ops;

static void *dmalloc(size_t bytes)
{
	void *p;
	CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 16));
	return p;
}

/* ---------------------------------------------------------------------------------------------- */
/* timing                                                                                          */

/* sum the elapsed times of the recorded pairs (waits for the last) */
static void harvest(dg_wan_ops *o)
{
	gpu_ops *g = o->impl;
	if (!g->nmarks)
		return;
	CUDA_CHECK(cudaEventSynchronize(g->marks[g->nmarks - 1].b));
	for (int i = 0; i < g->nmarks; i++) {
		float ms;
		CUDA_CHECK(cudaEventElapsedTime(&ms, g->marks[i].a, g->marks[i].b));
		o->op_seconds[g->marks[i].kind] += ms * 1e-3;
	}
	g->nmarks = 0;
}

static int mark_begin(dg_wan_ops *o, int kind)
{
	gpu_ops *g = o->impl;
	if (g->nmarks == MAX_MARKS)
		harvest(o);
	mark *k = &g->marks[g->nmarks];
	if (g->nmarks == g->made_marks) {
		CUDA_CHECK(cudaEventCreate(&k->a));
		CUDA_CHECK(cudaEventCreate(&k->b));
		g->made_marks++;
	}
	k->kind = kind;
	CUDA_CHECK(cudaEventRecord(k->a, 0));
	return g->nmarks;
}

static void mark_end(dg_wan_ops *o, int i)
{
	gpu_ops *g = o->impl;
	CUDA_CHECK(cudaEventRecord(g->marks[i].b, 0));
	g->nmarks = i + 1;
}

/* ---------------------------------------------------------------------------------------------- */
/* buffers and their bf16 shadows                                                                  */

static dbuf *find_base(gpu_ops *g, const float *p)
{
	for (int i = 0; i < g->nbufs; i++)
		if (g->bufs[i].p == p)
			return &g->bufs[i];
	return NULL;
}

/* the buffer holding p, if any */
static dbuf *find_holder(gpu_ops *g, const float *p)
{
	for (int i = 0; i < g->nbufs; i++) {
		const char *a = (const char *)g->bufs[i].p;
		size_t bytes = g->bufs[i].n * (g->bufs[i].operand ? 2 : 4);
		if ((const char *)p >= a && (const char *)p < a + bytes)
			return &g->bufs[i];
	}
	return NULL;
}

/* p, an argument that op reads or writes in fp32, is not in an operand buffer, or stop */
static void need32(gpu_ops *g, const char *op, const float *p)
{
	dbuf *b = p ? find_holder(g, p) : NULL;
	if (b && b->operand)
		dg_die("gpu ops: %s: an operand buffer (bf16 only) passed where fp32 is read or written", op);
}

/* the bf16 storage of the operand buffer that starts at p (count elements read or written), or NULL */
static uint16_t *operand_of(gpu_ops *g, const float *p, size_t count)
{
	dbuf *b = find_base(g, p);
	if (!b || !b->operand)
		return NULL;
	DG_ASSERT(count <= b->n);
	return b->bf;
}

/* p was written by something that did not write its shadow */
static void invalidate(gpu_ops *g, const float *p)
{
	dbuf *b = find_holder(g, p);
	if (b)
		b->valid = 0;
}

/* where an op that writes count elements from the start of *y also writes their bf16 copy, or
 * NULL; *y becomes NULL where the buffer is an operand one (no fp32 to write) */
static uint16_t *shadow_out(gpu_ops *g, float **y, size_t count)
{
	dbuf *b = find_base(g, *y);
	if (!b) {
		need32(g, "an op's output", *y);
		invalidate(g, *y);
		return NULL;
	}
	uint16_t *op = operand_of(g, *y, count);
	if (op) {
		*y = NULL;
		return op;
	}
	b->valid = b->bf ? count : 0;
	return b->bf;
}

/* bf16 of x (count elements): the buffer's shadow (made now if stale), else scratch slot */
static const uint16_t *as_bf16(dg_wan_ops *o, const float *x, size_t count, int slot)
{
	gpu_ops *g = o->impl;
	const uint16_t *op = operand_of(g, x, count);
	if (op)
		return op;
	need32(g, "bf16 conversion", x); /* inside an operand buffer but not at its start */
	dbuf *b = find_base(g, x);
	if (b && count <= b->n) {
		if (!b->bf)
			b->bf = dmalloc(b->n * 2);
		if (b->valid < count) {
			int t = mark_begin(o, DG_WAN_OPK_CONVERT);
			KERNEL_CHECK(dg_to_bf16(x, b->bf, count, 0));
			mark_end(o, t);
			b->valid = count;
		}
		return b->bf;
	}
	if (g->scratch_n[slot] < count) {
		if (g->scratch[slot])
			CUDA_CHECK(cudaFree(g->scratch[slot]));
		g->scratch[slot] = dmalloc(count * 2);
		g->scratch_n[slot] = count;
	}
	int t = mark_begin(o, DG_WAN_OPK_CONVERT);
	KERNEL_CHECK(dg_to_bf16(x, g->scratch[slot], count, 0));
	mark_end(o, t);
	return g->scratch[slot];
}

static uint16_t *gpu_bf16(dg_wan_ops *o, const float *x, size_t n)
{
	dbuf *b = find_base(o->impl, x);
	return b && n <= b->n ? (uint16_t *)as_bf16(o, x, n, 0) : NULL;
}

/* a new buffer of n elements: fp32, or bf16 only (operand) */
static float *add_buffer(dg_wan_ops *o, size_t n, bool operand)
{
	gpu_ops *g = o->impl;
	if (g->nbufs == g->capbufs) {
		g->capbufs = g->capbufs ? 2 * g->capbufs : 64;
		g->bufs = dg_realloc(g->bufs, (size_t)g->capbufs * sizeof *g->bufs);
	}
	void *p = dmalloc(n * (operand ? 2 : sizeof(float)));
	g->bufs[g->nbufs++] = operand ? (dbuf){ p, n, p, n, true } : (dbuf){ p, n, NULL, 0, false };
	return p;
}

static float *gpu_alloc(dg_wan_ops *o, size_t n) { return add_buffer(o, n, false); }
static float *gpu_alloc_operand(dg_wan_ops *o, size_t n) { return add_buffer(o, n, true); }

static void gpu_release(dg_wan_ops *o, float *p)
{
	gpu_ops *g = o->impl;
	dbuf *b = find_base(g, p);
	DG_ASSERT(b);
	if (b->bf && !b->operand)
		CUDA_CHECK(cudaFree(b->bf));
	CUDA_CHECK(cudaFree(p));
	*b = g->bufs[--g->nbufs];
}

static float *gpu_host_alloc(dg_wan_ops *o, size_t n)
{
	float *p;
	CUDA_CHECK(cudaMallocHost((void **)&p, (n ? n : 1) * sizeof(float)));
	return p;
}

static void gpu_host_free(dg_wan_ops *o, float *p) { CUDA_CHECK(cudaFreeHost(p)); }

static void gpu_upload(dg_wan_ops *o, float *dst, const float *host, size_t n)
{
	need32(o->impl, "upload", dst);
	invalidate(o->impl, dst);
	if (n)
		CUDA_CHECK(cudaMemcpy(dst, host, n * sizeof(float), cudaMemcpyHostToDevice));
}

static void gpu_copy(dg_wan_ops *o, float *dst, const float *src, size_t n)
{
	need32(o->impl, "copy's output", dst), need32(o->impl, "copy's input", src);
	invalidate(o->impl, dst);
	int t = mark_begin(o, DG_WAN_OPK_RESIDUAL);
	if (n)
		CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, 0));
	mark_end(o, t);
}

/* an operand buffer's bf16 comes over as it is, widened on the host (exact) */
static void gpu_download(dg_wan_ops *o, float *host, const float *src, size_t n)
{
	dbuf *b = n ? find_holder(o->impl, src) : NULL;
	if (b && b->operand) {
		size_t at = ((const char *)src - (const char *)b->p) / 2;
		DG_ASSERT(at + n <= b->n);
		uint16_t *h = dg_malloc(n * 2);
		CUDA_CHECK(cudaMemcpy(h, b->bf + at, n * 2, cudaMemcpyDeviceToHost));
		for (size_t i = 0; i < n; i++)
			host[i] = dg_bf16_to_f32(h[i]);
		free(h);
	} else if (n) {
		CUDA_CHECK(cudaMemcpy(host, src, n * sizeof(float), cudaMemcpyDeviceToHost));
	}
	harvest(o);
}

static void gpu_sync(dg_wan_ops *o)
{
	CUDA_CHECK(cudaDeviceSynchronize());
	harvest(o);
}

/* ---------------------------------------------------------------------------------------------- */
/* weights and linears                                                                             */

/* the bias of l (fp32 and bf16) into d, and d into l */
static void prepare_bias(dg_wan_linear *l, lin_dev *d)
{
	if (l->b) {
		d->b = dmalloc((size_t)l->out * sizeof(float));
		d->b16 = dmalloc((size_t)l->out * 2);
		CUDA_CHECK(cudaMemcpy(d->b, l->b, (size_t)l->out * sizeof(float), cudaMemcpyHostToDevice));
		KERNEL_CHECK(dg_to_bf16(d->b, d->b16, (size_t)l->out, 0));
	}
	l->dev = d;
}

static void gpu_prepare(dg_wan_ops *o, dg_wan_linear *l)
{
	size_t nw = (size_t)l->out * l->in;
	lin_dev *d = dg_calloc(1, sizeof *d);
	float *tmp = dmalloc(nw * sizeof(float));
	CUDA_CHECK(cudaMemcpy(tmp, l->w, nw * sizeof(float), cudaMemcpyHostToDevice));
	if (l->fp32) {
		d->w = tmp;
	} else {
		d->w = dmalloc(nw * 2);
		KERNEL_CHECK(dg_to_bf16(tmp, d->w, nw, 0));
		CUDA_CHECK(cudaFree(tmp)); /* synchronous: the conversion is done */
	}
	prepare_bias(l, d);
}

/* the checkpoint's bf16 words straight onto the device: half the bytes, no fp32 anywhere */
static void gpu_prepare_bf16(dg_wan_ops *o, dg_wan_linear *l, const void *w16)
{
	DG_ASSERT(!l->fp32);
	size_t nw = (size_t)l->out * l->in;
	lin_dev *d = dg_calloc(1, sizeof *d);
	d->w = dmalloc(nw * 2);
	CUDA_CHECK(cudaMemcpy(d->w, w16, nw * 2, cudaMemcpyHostToDevice));
	prepare_bias(l, d);
}

static void gpu_unprepare(dg_wan_ops *o, dg_wan_linear *l)
{
	lin_dev *d = l->dev;
	if (!d)
		return;
	CUDA_CHECK(cudaFree(d->w));
	if (d->b) {
		CUDA_CHECK(cudaFree(d->b));
		CUDA_CHECK(cudaFree(d->b16));
	}
	free(d);
	l->dev = NULL;
}

/* the cuBLASLt plan of y (m, out) = epilogue(x (m, in) W^T [+ b]), y of type dt, made once per
 * shape, epilogue and output type. Column-major view: y^T (out, m) = op_T(W as (in, out)) . x^T
 * (in, m); the bias runs along y^T's rows. The bias is fp32 whatever dt is; C is D (beta 0). */
static const plan *get_plan(gpu_ops *g, int m, int out, int in, cublasLtEpilogue_t ep, cudaDataType_t at,
			    cudaDataType_t dt)
{
	for (int i = 0; i < g->nplans; i++) {
		plan *p = &g->plans[i];
		if (p->m == m && p->out == out && p->in == in && p->ep == ep && p->at == at && p->dt == dt)
			return p;
	}
	g->plans = dg_realloc(g->plans, (size_t)(g->nplans + 1) * sizeof *g->plans);
	plan *p = &g->plans[g->nplans++];
	*p = (plan){ .m = m, .out = out, .in = in, .ep = ep, .at = at, .dt = dt };
	CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
	cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
	CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
	CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
	CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
	if ((ep == CUBLASLT_EPILOGUE_BIAS || ep == CUBLASLT_EPILOGUE_GELU_BIAS) && dt == CUDA_R_32F) {
		cudaDataType_t bt = CUDA_R_32F; /* a bf16 output takes a bf16 bias (CUDA 13.0 refuses fp32 there) */
		CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
	}
	CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->a, at, in, out, in));
	CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->b, at, in, m, in));
	CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->c, dt, out, m, out));
	cublasLtMatmulPreference_t pref;
	CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
	uint64_t wsb = WORKSPACE_BYTES;
	CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
	cublasLtMatmulHeuristicResult_t res;
	int nres = 0;
	CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(g->lt, p->op, p->a, p->b, p->c, p->c, pref, 1, &res, &nres));
	CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
	if (nres < 1)
		dg_die("cuBLASLt has no GEMM for (%d x %d) . (%d x %d)^T (epilogue %d, types %d -> %d)", m, in, out, in,
		       (int)ep, (int)at, (int)dt);
	p->algo = res.algo;
	return p;
}

/* y (m, l->out) = x (m, l->in) W^T [+ b] (+ y if beta is 1), then GELU if gelu; x bf16 (fp32 for an
 * fp32 linear), y of type dt (fp32 or bf16); compute type 32F: strict fp32 accumulation (no TF32) */
static void gemm(dg_wan_ops *o, const dg_wan_linear *l, const void *x, int m, bool gelu, cudaDataType_t dt, void *y,
		 float beta)
{
	gpu_ops *g = o->impl;
	const lin_dev *d = l->dev;
	DG_ASSERT(d);
	cublasLtEpilogue_t ep = gelu ? (d->b ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU)
				     : (d->b ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT);
	const plan *p = get_plan(g, m, l->out, l->in, ep, l->fp32 ? CUDA_R_32F : CUDA_R_16BF, dt);
	const void *bias = dt == CUDA_R_32F ? (const void *)d->b : (const void *)d->b16;
	if (d->b)
		CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
	const float one = 1.0f;
	int t = mark_begin(o, DG_WAN_OPK_LINEAR);
	CUBLAS_CHECK(cublasLtMatmul(g->lt, p->op, &one, d->w, p->a, x, p->b, &beta, y, p->c, y, p->c, &p->algo, g->ws,
				WORKSPACE_BYTES, 0));
	mark_end(o, t);
}

/* y = (beta 0) or += (beta 1) x W^T + b; into an operand buffer (beta 0, bf16 operands) the GEMM
 * writes bf16 (its bias then in bf16: cuBLASLt's rule for a bf16 output) */
static void linear_beta(dg_wan_ops *o, const dg_wan_linear *l, const float *x, int m, float *y, float beta)
{
	if (m < 1)
		return;
	if (l->fp32)
		need32(o->impl, "fp32 linear's input", x);
	const void *x16 = l->fp32 ? (const void *)x : as_bf16(o, x, (size_t)m * l->in, 0);
	uint16_t *y16 = operand_of(o->impl, y, (size_t)m * l->out);
	if (y16 && beta == 0.0f && !l->fp32) {
		gemm(o, l, x16, m, false, CUDA_R_16BF, y16, beta);
		return;
	}
	need32(o->impl, "linear's output", y);
	gemm(o, l, x16, m, false, CUDA_R_32F, y, beta);
	invalidate(o->impl, y);
}

static void gpu_linear(dg_wan_ops *o, const dg_wan_linear *l, const float *x, int m, float *y)
{
	linear_beta(o, l, x, m, y, 0.0f);
}

static void gpu_linear_add(dg_wan_ops *o, const dg_wan_linear *l, const float *x, int m, float *y)
{
	linear_beta(o, l, x, m, y, 1.0f);
}

/*
 * x's bf16 shadow -> GEMM with l1, epilogue bias + GELU, bf16 out: the hidden (m, l1->out) in the
 * table's scratch -> GEMM with l2 reading it, epilogue bias, fp32 y. cuBLASLt's GELU epilogue is
 * the tanh approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), the form XLA and PyTorch
 * fuse into it (tests/dit/gpu_dit.c tells it from the erf GELU); it acts on the fp32 accumulator, so the
 * hidden is rounded to bf16 once, after the GELU, where the second GEMM's operand always was. With a
 * bf16 output cuBLASLt takes the bias in bf16 only: l1's bias is rounded to bf16 (exact for Wan's
 * bf16 checkpoints).
 */
static void gpu_ffn(dg_wan_ops *o, const dg_wan_linear *l1, const dg_wan_linear *l2, const float *x, int m,
		    float *y)
{
	gpu_ops *g = o->impl;
	DG_ASSERT(l2->in == l1->out && !l1->fp32 && !l2->fp32);
	if (m < 1)
		return;
	const uint16_t *x16 = as_bf16(o, x, (size_t)m * l1->in, 0);
	size_t nh = (size_t)m * l1->out;
	if (g->hidden_n < nh) {
		if (g->hidden)
			CUDA_CHECK(cudaFree(g->hidden));
		g->hidden = dmalloc(nh * 2);
		g->hidden_n = nh;
	}
	need32(g, "ffn's output", y);
	gemm(o, l1, x16, m, true, CUDA_R_16BF, g->hidden, 0.0f);
	gemm(o, l2, g->hidden, m, false, CUDA_R_32F, y, 0.0f);
	invalidate(g, y);
}

/* ---------------------------------------------------------------------------------------------- */
/* row and elementwise ops (kernels/dit_ops.cu)                                                    */

static void gpu_add_layernorm(dg_wan_ops *o, float *x, const float *r, const float *gate, int m, int n, float eps,
			      const float *w, const float *b, const float *scale, const float *shift, float *y)
{
	need32(o->impl, "layernorm's input", x);
	need32(o->impl, "the residual", r);
	if (r)
		invalidate(o->impl, x);
	uint16_t *y16 = shadow_out(o->impl, &y, (size_t)m * n);
	int t = mark_begin(o, DG_WAN_OPK_NORM);
	KERNEL_CHECK(dg_dit_layernorm(x, r, gate, m, n, eps, w, b, scale, shift, y, y16, 0));
	mark_end(o, t);
}

/* x is not written without a residual */
static void gpu_layernorm(dg_wan_ops *o, const float *x, int m, int n, float eps, const float *w, const float *b,
			  const float *scale, const float *shift, float *y)
{
	gpu_add_layernorm(o, (float *)x, NULL, NULL, m, n, eps, w, b, scale, shift, y);
}

static void gpu_to_heads(dg_wan_ops *o, const float *x, int m, int heads, int d, const float *norm_w, float eps,
			 const float *cos, const float *sin, float *y)
{
	const uint16_t *x16 = operand_of(o->impl, x, (size_t)m * heads * d);
	if (!x16)
		need32(o->impl, "to_heads' input", x);
	uint16_t *y16 = shadow_out(o->impl, &y, (size_t)m * heads * d);
	int t = mark_begin(o, DG_WAN_OPK_HEADS);
	KERNEL_CHECK(dg_dit_to_heads(x16 ? NULL : x, x16, m, heads, d, norm_w, eps, cos, sin, y, y16, 0));
	mark_end(o, t);
}

static void gpu_from_heads(dg_wan_ops *o, const float *x, int m, int heads, int d, float *y)
{
	need32(o->impl, "from_heads' input", x);
	uint16_t *y16 = shadow_out(o->impl, &y, (size_t)m * heads * d);
	int t = mark_begin(o, DG_WAN_OPK_HEADS);
	KERNEL_CHECK(dg_dit_from_heads(x, m, heads, d, y, y16, 0));
	mark_end(o, t);
}

static void gpu_gelu_tanh(dg_wan_ops *o, float *x, size_t n)
{
	need32(o->impl, "gelu_tanh", x);
	uint16_t *x16 = shadow_out(o->impl, &x, n);
	int t = mark_begin(o, DG_WAN_OPK_RESIDUAL);
	KERNEL_CHECK(dg_dit_gelu_tanh(x, n, x16, 0));
	mark_end(o, t);
}

static void gpu_add_gated(dg_wan_ops *o, float *x, const float *y, const float *gate, int m, int n)
{
	need32(o->impl, "add_gated", x), need32(o->impl, "add_gated", y);
	uint16_t *x16 = shadow_out(o->impl, &x, (size_t)m * n);
	int t = mark_begin(o, DG_WAN_OPK_RESIDUAL);
	KERNEL_CHECK(dg_dit_add_gated(x, y, gate, m, n, x16, 0));
	mark_end(o, t);
}

static void gpu_attention(dg_wan_ops *o, const float *q, const float *k, const float *v, int heads, int nq,
			  int nk, int d, float *out)
{
	const uint16_t *q16 = as_bf16(o, q, (size_t)heads * nq * d, 0);
	const uint16_t *k16 = as_bf16(o, k, (size_t)heads * nk * d, 1);
	const uint16_t *v16 = as_bf16(o, v, (size_t)heads * nk * d, 2);
	uint16_t *o16 = operand_of(o->impl, out, (size_t)heads * nq * d); /* the kernel's bf16 output */
	if (!o16)
		need32(o->impl, "attention's output", out);
	int t = mark_begin(o, DG_WAN_OPK_ATTENTION);
	KERNEL_CHECK(dg_flash_fwd_kv(q16, k16, v16, heads, nq, nk, d, o16 ? NULL : out, o16, NULL, 0));
	mark_end(o, t);
	if (!o16)
		invalidate(o->impl, out);
}

static void gpu_destroy(dg_wan_ops *o)
{
	gpu_ops *g = o->impl;
	CUDA_CHECK(cudaDeviceSynchronize());
	harvest(o);
	for (int i = 0; i < g->made_marks; i++) {
		CUDA_CHECK(cudaEventDestroy(g->marks[i].a));
		CUDA_CHECK(cudaEventDestroy(g->marks[i].b));
	}
	for (int i = 0; i < g->nplans; i++) {
		plan *p = &g->plans[i];
		cublasLtMatrixLayoutDestroy(p->a);
		cublasLtMatrixLayoutDestroy(p->b);
		cublasLtMatrixLayoutDestroy(p->c);
		cublasLtMatmulDescDestroy(p->op);
	}
	for (int i = 0; i < 3; i++)
		if (g->scratch[i])
			CUDA_CHECK(cudaFree(g->scratch[i]));
	if (g->hidden)
		CUDA_CHECK(cudaFree(g->hidden));
	while (g->nbufs) /* owners release theirs; what is left goes with the table */
		gpu_release(o, g->bufs[0].p);
	CUDA_CHECK(cudaFree(g->ws));
	cublasLtDestroy(g->lt);
	free(g->bufs), free(g->plans), free(g->marks);
	free(g);
	free(o);
}

dg_wan_ops *dg_wan_ops_gpu(void)
{
	int count = 0;
	cudaError_t e = cudaGetDeviceCount(&count);
	if (e != cudaSuccess || count == 0) {
		dg_error("no CUDA device (%s): --device gpu is not available",
			 e != cudaSuccess ? cudaGetErrorString(e) : "none found");
		return NULL;
	}
	gpu_ops *g = dg_calloc(1, sizeof *g);
	CUBLAS_CHECK(cublasLtCreate(&g->lt));
	g->ws = dmalloc(WORKSPACE_BYTES);
	g->marks = dg_malloc(MAX_MARKS * sizeof *g->marks);
	dg_wan_ops *o = dg_calloc(1, sizeof *o);
	o->name = "gpu";
	o->device_weights = true;
	o->impl = g;
	struct cudaDeviceProp prop;
	CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
	snprintf(o->device, sizeof o->device, "gpu: %.100s (sm_%d%d, %d SMs, %.0f GiB)", prop.name, prop.major,
		 prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1073741824.0);
	o->alloc = gpu_alloc;
	o->alloc_operand = gpu_alloc_operand;
	o->release = gpu_release;
	o->host_alloc = gpu_host_alloc;
	o->host_free = gpu_host_free;
	o->upload = gpu_upload;
	o->copy = gpu_copy;
	o->download = gpu_download;
	o->bf16 = gpu_bf16;
	o->sync = gpu_sync;
	o->prepare = gpu_prepare;
	o->prepare_bf16 = gpu_prepare_bf16;
	o->unprepare = gpu_unprepare;
	o->linear = gpu_linear;
	o->linear_add = gpu_linear_add;
	o->ffn = gpu_ffn;
	o->layernorm = gpu_layernorm;
	o->add_layernorm = gpu_add_layernorm;
	o->to_heads = gpu_to_heads;
	o->from_heads = gpu_from_heads;
	o->gelu_tanh = gpu_gelu_tanh;
	o->add_gated = gpu_add_gated;
	o->attention = gpu_attention;
	o->destroy = gpu_destroy;
	return o;
}

#else /* no CUDA in this build */

dg_wan_ops *dg_wan_ops_gpu(void)
{
	dg_error("this dsgap was built without CUDA: --device gpu is not available");
	return NULL;
}

#endif
