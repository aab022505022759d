/*
 * attn_launch.cuh: the host side of the attention launchers (not a public header): argument checks,
 * the parameter blocks (dg_attn_params) of the dense, sparse and per-head sparse launchers, the
 * persistent grid, and the launch with the dynamic shared-memory attribute.
 * Contract (dsgap_kernels.h states the launchers' contracts): every check returns 0, or -1 after one
 * line on stderr naming the op and the problem, with nothing launched; a launch returns -1 after one
 * line if the attribute or the launch fails.
 */
#ifndef DG_ATTN_LAUNCH_CUH
#define DG_ATTN_LAUNCH_CUH

#include <math.h>
#include <stdio.h>
#include <cuda_runtime.h>

#include "attn_params.cuh"

static inline int dg_check_qkv(const char *op, const void *q, const void *k, const void *v, int heads, int n, int d)
{
	if (!q || !k || !v) {
		fprintf(stderr, "%s: q, k and v must not be NULL\n", op);
		return -1;
	}
	if (d != 64 && d != 128) {
		fprintf(stderr, "%s: head_dim %d not supported (64 or 128)\n", op, d);
		return -1;
	}
	if (heads < 1 || heads > 65535 || n < 1) {
		fprintf(stderr, "%s: bad shape heads=%d n=%d\n", op, heads, n);
		return -1;
	}
	if (((uintptr_t)q | (uintptr_t)k | (uintptr_t)v) & 15) {
		fprintf(stderr, "%s: q, k and v must be 16-byte aligned\n", op);
		return -1;
	}
	return 0;
}

template <typename Kern, typename... Args>
static int dg_launch_args(const char *op, Kern kernel, dim3 grid, int threads, size_t smem, cudaStream_t st,
			  const Args &...args)
{
	if (smem > 48 * 1024) {
		cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
		if (e != cudaSuccess) {
			fprintf(stderr, "%s: cannot set %zu bytes of shared memory: %s\n", op, smem, cudaGetErrorString(e));
			return -1;
		}
	}
	kernel<<<grid, threads, smem, st>>>(args...);
	cudaError_t e = cudaGetLastError();
	if (e != cudaSuccess) {
		fprintf(stderr, "%s: launch failed: %s\n", op, cudaGetErrorString(e));
		return -1;
	}
	return 0;
}
template <typename Kern>
static int dg_launch(const char *op, Kern kernel, dim3 grid, int threads, size_t smem, const dg_attn_params &p,
		     cudaStream_t st)
{
	return dg_launch_args(op, kernel, grid, threads, smem, st, p);
}

/*
 * The attention launchers' argument checks and parameter blocks (dsgap_kernels.h states the
 * contracts), for the promoted launchers and dev/kernels' numbered versions alike: 0, or -1 after
 * one line on stderr. Each fills every field its kernels read.
 */

/* dense: n queries against nk keys per head (nk = n: self-attention); merged: o token-major
 * (n, heads*d), else (heads, n, d) */
static inline int dg_flash_params(dg_attn_params &p, const uint16_t *q, const uint16_t *k, const uint16_t *v,
				  int heads, int n, int nk, int d, float *o_f32, uint16_t *o_bf16, float *lse,
				  bool merged)
{
	if (dg_check_qkv("flash_fwd", q, k, v, heads, n, d))
		return -1;
	if (nk < 1) {
		fprintf(stderr, "flash_fwd: bad key count %d\n", nk);
		return -1;
	}
	if (!o_f32 && !o_bf16) {
		fprintf(stderr, "flash_fwd: no output (o_f32 and o_bf16 both NULL)\n");
		return -1;
	}
	p = dg_attn_params{};
	p.q = reinterpret_cast<const bf16 *>(q);
	p.k = reinterpret_cast<const bf16 *>(k);
	p.v = reinterpret_cast<const bf16 *>(v);
	p.heads = heads;
	p.n = n;
	p.nk = nk;
	p.scale_log2 = (float)(1.4426950408889634 / sqrt((double)d));
	p.o_f32 = o_f32;
	p.o_bf16 = reinterpret_cast<bf16 *>(o_bf16);
	p.ldo = merged ? heads * d : 0;
	p.lse = lse;
	return 0;
}

/* sparse, the part every sparse launcher shares: q, k, v, the shape and the group count (the
 * launcher has set p's group arrays and outputs) */
static inline int dg_sparse_params(dg_attn_params &p, const uint16_t *q, const uint16_t *k, const uint16_t *v,
				   int heads, int n, int d, int ngroups)
{
	if (dg_check_qkv("sparse_fwd", q, k, v, heads, n, d))
		return -1;
	if (ngroups < 1 || (long long)ngroups * heads > 2147483647LL) {
		fprintf(stderr, "sparse_fwd: bad group count %d\n", ngroups);
		return -1;
	}
	p.q = reinterpret_cast<const bf16 *>(q);
	p.k = reinterpret_cast<const bf16 *>(k);
	p.v = reinterpret_cast<const bf16 *>(v);
	p.heads = heads;
	p.n = n;
	p.scale_log2 = (float)(1.4426950408889634 / sqrt((double)d));
	p.ngroups = ngroups;
	p.small_max = DG_SPARSE_SMALL_GROUP;
	return 0;
}

/* sparse, dg_sparse_fwd's arguments: the heads' group arrays at offsets h, fp32 output */
static inline int dg_sparse_fwd_params(dg_attn_params &p, const uint16_t *q, const uint16_t *k, const uint16_t *v,
				       int heads, int n, int d, const int32_t *perm, const int32_t *goff, int ngroups,
				       const int64_t *soff, const int32_t *sidx, const float *residual,
				       const float *lse_ref, float *o, float *mass)
{
	if (!perm || !goff || !soff || !sidx || !o) {
		fprintf(stderr, "sparse_fwd: perm, goff, soff, sidx and o must not be NULL\n");
		return -1;
	}
	if (mass && !lse_ref) {
		fprintf(stderr, "sparse_fwd: mass needs lse_ref\n");
		return -1;
	}
	if (((uintptr_t)o | (uintptr_t)residual) & 7) {
		fprintf(stderr, "sparse_fwd: o and residual must be 8-byte aligned\n");
		return -1;
	}
	p = dg_attn_params{};
	p.perm = perm;
	p.goff = goff;
	p.soff = soff;
	p.sidx = sidx;
	p.residual = residual;
	p.lse_ref = lse_ref;
	p.o_f32 = o;
	p.mass = mass;
	return dg_sparse_params(p, q, k, v, heads, n, d, ngroups);
}

static inline bool dg_res_dtype_ok(int t) { return t == DG_RES_F32 || t == DG_RES_BF16 || t == DG_RES_FP8; }

/* sparse, dg_sparse_fwd_heads's arguments: each head's arrays and residual from tab, inputs head-major
 * (ldi 0) or token-major (row stride ldi), bf16 token-major output (row stride ldo), one residual
 * dtype for all heads */
static inline int dg_sparse_heads_params(dg_attn_params &p, const uint16_t *q, const uint16_t *k, const uint16_t *v,
					 int ldi, int heads, int n, int d, const dg_sparse_head *tab, int ngroups,
					 uint16_t *o16, int ldo)
{
	if (heads < 1 || heads > DG_SPARSE_HEADS_MAX || !tab || !o16) {
		fprintf(stderr, "sparse_fwd_heads: %d heads (1..%d), tab and o16 needed\n", heads, DG_SPARSE_HEADS_MAX);
		return -1;
	}
	if (ldo < heads * d || (ldo & 1) || ((uintptr_t)o16 & 3)) {
		fprintf(stderr, "sparse_fwd_heads: row stride %d below %d x %d, odd, or o16 not 4-byte aligned\n", ldo,
			heads, d);
		return -1;
	}
	if (ldi && (ldi < heads * d || (ldi & 7))) {
		fprintf(stderr, "sparse_fwd_heads: input row stride %d below %d x %d or not a multiple of 8 (16-byte rows)\n",
			ldi, heads, d);
		return -1;
	}
	p = dg_attn_params{};
	int rdt = -1; /* the heads' residual dtype */
	for (int h = 0; h < heads; h++) {
		const dg_sparse_head &t = tab[h];
		if (!t.perm || !t.goff || !t.soff || !t.sidx || ((uintptr_t)t.residual & 7)) {
			fprintf(stderr, "sparse_fwd_heads: head %d: perm, goff, soff, sidx missing or residual misaligned\n", h);
			return -1;
		}
		if (t.residual && (!dg_res_dtype_ok(t.residual_dtype) || (rdt >= 0 && rdt != t.residual_dtype))) {
			fprintf(stderr, "sparse_fwd_heads: head %d: residual dtype %d (0..2, the same for every head)\n", h,
				t.residual_dtype);
			return -1;
		}
		if (t.residual)
			rdt = t.residual_dtype;
		p.tab[h] = t;
	}
	p.ntab = heads;
	p.o_bf16 = reinterpret_cast<bf16 *>(o16);
	p.ldo = ldo;
	if (dg_sparse_params(p, q, k, v, heads, n, d, ngroups))
		return -1;
	p.ldi = ldi;
	p.residual_dtype = rdt < 0 ? DG_RES_F32 : rdt;
	return 0;
}

/* the persistent sparse kernels' grid: one CTA per SM (132 if the device does not say); without a
 * chunk table at most one per (head, group) item */
static inline dim3 dg_sparse_persistent_grid(const dg_attn_params &p)
{
	static int nsm = 0;
	if (!nsm) {
		int dev = 0;
		if (cudaGetDevice(&dev) != cudaSuccess ||
		    cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || nsm < 1)
			nsm = 132;
	}
	const long long items = (long long)p.ngroups * p.heads;
	return dim3((unsigned)(items < nsm && !p.chunk_off ? items : nsm));
}
#endif
