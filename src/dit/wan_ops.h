/*
 * wan_ops.h: the operations the Wan2.1 forward (wan_forward.c) is made of, as a table that a
 * backend fills: the CPU (wan_ops_cpu.c: fp32, OpenBLAS SGEMM, OpenMP) and the GPU (wan_ops_gpu.c:
 * bf16 weights, cuBLASLt GEMMs, the kernels of kernels/dit_ops.cu and the flash kernel). The forward only orchestrates: every per-token tensor lives
 * where the backend computes ("device" buffers from alloc), and the forward touches it only
 * through these functions, so a backend slots in without changing the model code.
 *
 * Layouts: activations are token-major (m, n) row-major; attention operands are head-major
 * (heads, tokens, head_dim), the layout the attention entry point (dit_attn.h) and the trace use.
 * Weights are dg_wan_linear (wan.h): the host fp32 copy, and a backend's own converted copy in ->dev
 * (made by prepare); where that copy is complete (device_weights), the loader frees the host one.
 */
#ifndef DG_WAN_OPS_H
#define DG_WAN_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct dg_wan_linear dg_wan_linear;
typedef struct dg_wan_ops dg_wan_ops;

/* kinds of ops whose device time a backend may accumulate in op_seconds: GEMMs (linear, linear_add,
 * ffn), attention, and the elementwise kinds from DG_WAN_OPK_NORM on: layernorm and add_layernorm,
 * to_heads and from_heads, add_gated and gelu_tanh, conversions to bf16 */
typedef enum {
	DG_WAN_OPK_LINEAR,
	DG_WAN_OPK_ATTENTION,
	DG_WAN_OPK_NORM,
	DG_WAN_OPK_HEADS,
	DG_WAN_OPK_RESIDUAL,
	DG_WAN_OPK_CONVERT,
	DG_WAN_OPK_COUNT
} dg_wan_opk;

struct dg_wan_ops {
	const char *name; /* "cpu" or "gpu" */
	char device[192]; /* what it runs on, for reports */
	bool device_weights; /* prepare makes a complete copy: the host l->w is not needed after it */
	/* device seconds per kind of op since the table was made, complete after sync or download
	 * (the GPU measures them with events; zeros on the CPU) */
	double op_seconds[DG_WAN_OPK_COUNT];
	void *impl;
	/* buffers of n floats where the backend computes (uninitialised) */
	float *(*alloc)(dg_wan_ops *, size_t n);
	/*
	 * An operand buffer of n floats: one that only linear, ffn, attention, to_heads, the bf16 hook
	 * and download read, written only by linear (not linear_add), attention, layernorm,
	 * add_layernorm, to_heads and from_heads (and, through the bf16 hook, a writer outside the
	 * table). A backend whose GEMMs and attention take bf16 operands keeps it in bf16 only (round
	 * to nearest even), as they would have read it, and to_heads then reads the rounded values;
	 * download gives them too. Pointers into it name its elements but only the
	 * table dereferences them.
	 */
	float *(*alloc_operand)(dg_wan_ops *, size_t n);
	void (*release)(dg_wan_ops *, float *p);
	/* host memory of n floats for staging upload and download (page-locked on a device, so that
	 * they run at the link's speed), and its release */
	float *(*host_alloc)(dg_wan_ops *, size_t n);
	void (*host_free)(dg_wan_ops *, float *p);
	void (*upload)(dg_wan_ops *, float *dst, const float *host, size_t n);
	void (*download)(dg_wan_ops *, float *host, const float *src, size_t n); /* waits for the ops */
	/* dst = src, n floats of alloc'd buffers (not operand buffers), queued as an op */
	void (*copy)(dg_wan_ops *, float *dst, const float *src, size_t n);
	/* Optional (NULL: none). The bf16 copy (round to nearest even) of the first n elements of the
	 * alloc'd buffer x, where the backend computes, made now if stale, for readers outside the table
	 * that order themselves after its queued ops; valid until the table's next write of x. Of an
	 * operand buffer kept in bf16, its storage itself, which a writer outside the table that orders
	 * itself before the table's later ops may fill too (the DiT's attention entry point). */
	uint16_t *(*bf16)(dg_wan_ops *, const float *x, size_t n);
	/* wait until every queued op is done (for timing; no-op where ops are synchronous) */
	void (*sync)(dg_wan_ops *);
	/* make the backend's copy of a weight (e.g. bf16 on the device); no-op on the CPU */
	void (*prepare)(dg_wan_ops *, dg_wan_linear *l);
	/* Optional (device_weights tables; NULL: prepare from the fp32 l->w). prepare from the weight's
	 * bf16 words w16 ((out, in) row-major, little-endian, maybe unaligned: a checkpoint's own bytes),
	 * l->w unused (NULL), l->b fp32 as for prepare; not for l->fp32. The copy equals prepare's of
	 * the same values converted to fp32 (bf16 -> fp32 -> bf16 is exact). */
	void (*prepare_bf16)(dg_wan_ops *, dg_wan_linear *l, const void *w16);
	void (*unprepare)(dg_wan_ops *, dg_wan_linear *l);
	/* y (m, l->out) = x (m, l->in) W^T + b */
	void (*linear)(dg_wan_ops *, const dg_wan_linear *l, const float *x, int m, float *y);
	/* y (m, l->out) += x (m, l->in) W^T + b (a residual add in the GEMM; y not an operand buffer) */
	void (*linear_add)(dg_wan_ops *, const dg_wan_linear *l, const float *x, int m, float *y);
	/* y (m, l2->out) = l2(GELU_tanh(l1(x))): x (m, l1->in); the hidden (m, l1->out) is the
	 * backend's own scratch (the GPU keeps it in bf16 only) */
	void (*ffn)(dg_wan_ops *, const dg_wan_linear *l1, const dg_wan_linear *l2, const float *x, int m,
		    float *y);
	/*
	 * y (m, n) = (x - mean) / sqrt(var + eps) over each row (biased variance), then * w + b if w
	 * (affine; b may be NULL), then * (1 + scale) + shift if scale/shift (each (n) or NULL).
	 */
	void (*layernorm)(dg_wan_ops *, const float *x, int m, int n, float eps, const float *w,
			  const float *b, const float *scale, const float *shift, float *y);
	/* with r (else NULL) x (m, n) += r * gate (gate (n), or NULL for 1) first, then y = layernorm
	 * of the new x: add_gated and layernorm in one pass over x (counted as layernorm's time) */
	void (*add_layernorm)(dg_wan_ops *, float *x, const float *r, const float *gate, int m, int n, float eps,
			      const float *w, const float *b, const float *scale, const float *shift, float *y);
	/*
	 * y (heads, m, d) = x (m, heads*d) split into heads. With norm_w (heads*d) (else NULL) each row
	 * is first RMSNorm-ed over its full width, x * rsqrt(mean(x^2) + eps) * norm_w; with cos/sin
	 * (m, d/2) (else NULL) each interleaved pair (x[2i], x[2i+1]) of every head is then rotated by
	 * the angle of (token, i). x is not changed.
	 */
	void (*to_heads)(dg_wan_ops *, const float *x, int m, int heads, int d, const float *norm_w, float eps,
			 const float *cos, const float *sin, float *y);
	/* y (m, heads*d) = x (heads, m, d) merged */
	void (*from_heads)(dg_wan_ops *, const float *x, int m, int heads, int d, float *y);
	/* x = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in place */
	void (*gelu_tanh)(dg_wan_ops *, float *x, size_t n);
	/* x (m, n) += y * gate (gate (n), or NULL for 1) */
	void (*add_gated)(dg_wan_ops *, float *x, const float *y, const float *gate, int m, int n);
	/* dense attention per head, scale 1/sqrt(d): q (heads, nq, d), k v (heads, nk, d) ->
	 * o (nq, heads*d), the heads merged (head h in columns h*d ..), as the output projection
	 * reads them */
	void (*attention)(dg_wan_ops *, const float *q, const float *k, const float *v, int heads,
			  int nq, int nk, int d, float *o);
	void (*destroy)(dg_wan_ops *);
};

/* The CPU backend (host memory; OpenBLAS kept single-threaded, OpenMP across GEMM tiles and rows). */
dg_wan_ops *dg_wan_ops_cpu(void);
/* The GPU backend (device memory, ops queued on the default stream; head_dim 64 or 128), or NULL
 * after one line saying why (no CUDA in this build, no device). */
dg_wan_ops *dg_wan_ops_gpu(void);

#endif
