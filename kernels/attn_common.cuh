/*
 * attn_common.cuh: helpers shared by flash_fwd.cu and sparse_fwd.cu, by the metadata kernels
 * (meta_common.cuh) and by the earlier attention versions in dev/kernels/ (not a public header).
 *
 * What is here: the kernel parameter block, the work-item walk that dense and gather-KV sparse
 * attention share, the cp.async tile loader into 128-byte-swizzled shared memory (the layout that
 * both ldmatrix and wgmma read without bank conflicts), PTX wrappers (cp.async, mbarrier, named
 * barriers, wgmma, mma.sync, ldmatrix, setmaxnreg), the online-softmax step on an MMA accumulator,
 * and on the host the attention launchers' argument checks, parameter blocks and launch.
 *
 * Shared-memory tile layout (all kernels): a tile of R rows x D bf16 is stored as D/64 column blocks
 * of R rows x 128 bytes; inside a block, the 16-byte chunk c of row r sits at r*128 + ((c ^ (r%8))*16)
 * (CUTLASS's Swizzle<3,4,3>, the wgmma "128B" mode). Tiles start at 1024-byte boundaries.
 *
 * Accumulator layout (mma.sync m16n8 and wgmma m64nN alike, per warp of 16 rows): thread lane
 * holds rows g = lane/4 and g+8 and columns 8j + 2*(lane%4) + {0,1}: acc[4j+0..1] row g,
 * acc[4j+2..3] row g+8.
 */
#ifndef DG_ATTN_COMMON_CUH
#define DG_ATTN_COMMON_CUH

#include <cuda_bf16.h>
#include <stdint.h>
#include <math.h>

#include "dsgap_kernels.h"
#include "window_tiles.h"

#define DG_DEV static __device__ __forceinline__

typedef __nv_bfloat16 bf16;

/* Parameters of one attention launch (dense or sparse). */
struct dg_attn_params {
	const bf16 *q, *k, *v; /* q (heads, n, d); k, v (heads, nk, d) */
	int heads, n;
	int nk;                /* dense: keys per head (cross-attention); 0 = n (always 0 for sparse) */
	float scale_log2;      /* log2(e)/sqrt(d) */
	/* outputs: O in (heads, n, d), or token-major with row stride ldo (> 0: head h's row r at
	 * r * ldo + h * d); lse and mass (heads, n) */
	float *o_f32;          /* or NULL */
	bf16 *o_bf16;          /* used when o_f32 is NULL */
	int ldo;
	float *lse;            /* dense: or NULL */
	/* sparse inputs and outputs: per head h the arrays below offset by h (dg_sparse_fwd), or, with
	 * ntab > 0, the head's own from tab[h] (dg_sparse_fwd_heads) */
	const int32_t *perm, *goff;
	int ngroups;
	const int64_t *soff;
	const int32_t *sidx;
	const void *residual;  /* stored as residual_dtype says (dsgap_kernels.h, DG_RES_*) */
	int residual_dtype;    /* one per launch; the kernels take it as their RES template parameter */
	const float *lse_ref;
	float *mass;
	int small_max;         /* groups of <= small_max queries are left to the small-group kernel */
	/* the persistent sparse kernel's chunks (or NULL: an item is walked whole by one CTA):
	 * chunk_off (heads * ngroups + 2) = the exclusive prefix sums over the items (h, g) of their
	 * chunks of up to 128 queries (a small group: 0, or 1 where the launch has at most
	 * DG_SPARSE_SMALL_PROMOTE of them), then 1 if the chunks are the items (some item has more than
	 * one, or small groups are the tensor-core kernel's) */
	const int32_t *chunk_off;
	int ntab;
	dg_sparse_head tab[DG_SPARSE_HEADS_MAX];
	/* window attention (dg_window_fwd; read by its kernels only): query i attends key j iff
	 * i < win_text or j < win_text or |i - j| <= win_w */
	int win_text, win_w;
};

/* head h's sparse arrays */
DG_DEV const int32_t *head_perm(const dg_attn_params &p, int h)
{
	return p.ntab ? p.tab[h].perm : p.perm + (size_t)h * p.n;
}
DG_DEV const int32_t *head_goff(const dg_attn_params &p, int h)
{
	return p.ntab ? p.tab[h].goff : p.goff + (size_t)h * (p.ngroups + 1);
}
DG_DEV const int64_t *head_soff(const dg_attn_params &p, int h)
{
	return p.ntab ? p.tab[h].soff : p.soff + (size_t)h * (p.ngroups + 1);
}
DG_DEV const int32_t *head_sidx(const dg_attn_params &p, int h) { return p.ntab ? p.tab[h].sidx : p.sidx; }
template <int D> DG_DEV const float *head_residual(const dg_attn_params &p, int h)
{
	if (p.ntab)
		return static_cast<const float *>(p.tab[h].residual);
	return p.residual ? static_cast<const float *>(p.residual) + (size_t)h * p.n * D : nullptr;
}
/* head h's stored residual of dtype RES (DG_RES_BF16 or DG_RES_FP8), as bytes */
template <int D, int RES> DG_DEV const unsigned char *head_residual_q(const dg_attn_params &p, int h)
{
	if (p.ntab)
		return static_cast<const unsigned char *>(p.tab[h].residual);
	const size_t hb = RES == DG_RES_BF16 ? (size_t)p.n * D * 2 : (size_t)dg_res_fp8_scales(p.n, D) + (size_t)p.n * 4;
	return p.residual ? static_cast<const unsigned char *>(p.residual) + (size_t)h * hb : nullptr;
}
/* e4m3 (E4M3FN) byte -> fp32, exactly dg_e4m3_to_f32 (0x7f/0xff NaN) */
DG_DEV float dg_e4m3_value(unsigned b)
{
	const unsigned e = (b >> 3) & 15, m = b & 7;
	float v;
	if (e == 15 && m == 7)
		v = __int_as_float(0x7fc00000);
	else if (e == 0)
		v = (float)m * 0x1p-9f;
	else
		v = __int_as_float((int)(((e + 120u) << 23) | (m << 20)));
	return (b & 0x80) ? -v : v;
}
/* a stored residual's row `row`: its values at column col (RES: its dtype); the fp8 row scale
 * comes from dg_res_row_scale */
template <int D, int RES> DG_DEV float dg_res_row_scale(const dg_attn_params &p, const unsigned char *base, int row)
{
	if constexpr (RES == DG_RES_FP8)
		return __ldg(reinterpret_cast<const float *>(base + dg_res_fp8_scales(p.n, D)) + row);
	return 1.f;
}
template <int D, int RES> DG_DEV float2 dg_res_pair(const unsigned char *base, int row, int col, float scale)
{
	if constexpr (RES == DG_RES_BF16) {
		const unsigned w = __ldg(reinterpret_cast<const unsigned *>(base) + ((size_t)row * D + col) / 2);
		return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
	} else {
		const unsigned short w = __ldg(reinterpret_cast<const unsigned short *>(base) + ((size_t)row * D + col) / 2);
		return make_float2(dg_e4m3_value(w & 0xff) * scale, dg_e4m3_value(w >> 8) * scale);
	}
}
/* where O's row `row` of head h starts */
template <int D> DG_DEV size_t out_offset(const dg_attn_params &p, int h, int row)
{
	return p.ldo ? (size_t)row * p.ldo + (size_t)h * D : ((size_t)h * p.n + row) * D;
}

/* Keys per head: p.nk for dense attention with its own key count, else n. */
DG_DEV int dg_kv_len(const dg_attn_params &p) { return p.nk > 0 ? p.nk : p.n; }

/* One unit of work: up to BM query rows of one head against one key list. */
struct dg_item {
	int h;
	int qpos;        /* dense: first query row; sparse: first position in the head's perm */
	int qcount;      /* valid query rows */
	long long kbase; /* sparse: offset of the key list in sidx */
	int nkeys;       /* keys in the list (dense: n) */
};

/* The work items of this CTA, in order (producer and consumers walk the same sequence).
 * Dense: blockIdx.x = query block, blockIdx.y = head. Sparse, persistent (PERSIST, the promoted
 * sparse kernel): see below. Sparse, not persistent (dev/kernels' sparse v1..v5): blockIdx.y = head,
 * groups blockIdx.x, +gridDim.x, ...; a group of more than BM queries is done in chunks of BM. */
template <bool SPARSE, int BM, bool PERSIST = false, typename F>
DG_DEV void dg_for_each_item(const dg_attn_params &p, F &&f)
{
	if (SPARSE && PERSIST) {
		/* persistent: CTA b takes items b, b + gridDim.x, ... of the (h, g) items flattened
		 * (consecutive items are in the same head, so the CTAs in flight share one or two heads' K/V
		 * in L2); where a group has more than BM queries (chunk_off's flag), the items are its chunks
		 * instead, so that one large group is spread over the CTAs rather than walked by one */
		const int total = p.heads * p.ngroups; /* < 2^31, checked by the launcher */
		const bool chunked = p.chunk_off && __ldg(p.chunk_off + total + 1);
		const int nitems = chunked ? __ldg(p.chunk_off + total) : total;
		for (int t = blockIdx.x; t < nitems; t += gridDim.x) {
			int i = t, c0 = 0;
			if (chunked) { /* the item whose chunks hold t: chunk_off[i] <= t < chunk_off[i + 1] */
				int lo = 0, hi = total;
				while (hi - lo > 1) {
					const int mid = (lo + hi) >> 1;
					if (__ldg(p.chunk_off + mid) <= t)
						lo = mid;
					else
						hi = mid;
				}
				i = lo, c0 = (t - __ldg(p.chunk_off + lo)) * BM;
			}
			const int h = i / p.ngroups, g = i - h * p.ngroups;
			const int32_t *goff = head_goff(p, h);
			const int q0 = __ldg(goff + g), gs = __ldg(goff + g + 1) - q0;
			if (!chunked && gs <= p.small_max) /* the small-group kernel's */
				continue;
			const int64_t *soff = head_soff(p, h);
			const long long s0 = __ldg(soff + g);
			const int nk = (int)(__ldg(soff + g + 1) - s0);
			for (; c0 < gs; c0 += BM) {
				dg_item it = {h, q0 + c0, min(BM, gs - c0), s0, nk};
				f(it);
				if (chunked)
					break;
			}
		}
		return;
	}
	const int h = blockIdx.y;
	if (!SPARSE) {
		const int m0 = blockIdx.x * BM;
		dg_item it = {h, m0, min(BM, p.n - m0), 0, dg_kv_len(p)};
		f(it);
		return;
	}
	const int32_t *goff = head_goff(p, h);
	const int64_t *soff = head_soff(p, h);
	for (int g = blockIdx.x; g < p.ngroups; g += gridDim.x) {
		const int q0 = __ldg(goff + g), gs = __ldg(goff + g + 1) - q0;
		if (gs <= p.small_max)
			continue;
		const long long s0 = __ldg(soff + g);
		const int nk = (int)(__ldg(soff + g + 1) - s0);
		for (int c0 = 0; c0 < gs; c0 += BM) {
			dg_item it = {h, q0 + c0, min(BM, gs - c0), s0, nk};
			f(it);
		}
	}
}

/* ---------------------------------------------------------------------------------------------- */
/* PTX wrappers                                                                                   */

DG_DEV uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* 16-byte async copy global -> shared; src_bytes 0 fills the 16 bytes with zeros */
DG_DEV void cp_async16(uint32_t dst, const void *src, int src_bytes)
{
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes)
		     : "memory");
}
DG_DEV void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

DG_DEV void mbar_init(uint32_t bar, int count)
{
	asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
DG_DEV void mbar_fence_init() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
DG_DEV void mbar_arrive(uint32_t bar)
{
	asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
/* arrive on bar once all cp.async of this thread issued so far have landed (counts as one arrival) */
DG_DEV void mbar_arrive_cpasync(uint32_t bar)
{
	asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
/* TMA (dev/kernels' TMA gather): this thread's arrival on bar, which then also waits for bytes more
 * of asynchronous copies in its current phase */
DG_DEV void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes)
{
	asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
/* TMA copy of the box at (c0, c1, c2) of the 3-D tensor map at tmap (the generic address of a
 * __grid_constant__ CUtensorMap parameter) into shared memory at dst, its bytes completing on bar */
DG_DEV void tma_load_3d(uint32_t dst, const void *tmap, int c0, int c1, int c2, uint32_t bar)
{
	asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
		     " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
		     "l"(reinterpret_cast<uint64_t>(tmap)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
		     : "memory");
}
DG_DEV void mbar_wait(uint32_t bar, int parity)
{
	asm volatile("{\n"
		     ".reg .pred P1;\n"
		     "DG_WAIT:\n"
		     "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
		     "@P1 bra DG_DONE;\n"
		     "bra DG_WAIT;\n"
		     "DG_DONE:\n"
		     "}\n" ::"r"(bar),
		     "r"(parity)
		     : "memory");
}
/* order this thread's later async-proxy reads (wgmma) after generic-proxy writes it synchronised with */
DG_DEV void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

DG_DEV void named_sync(int id, int n) { asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory"); }
DG_DEV void named_arrive(int id, int n) { asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(n) : "memory"); }

template <int R> DG_DEV void reg_dealloc() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R)); }
template <int R> DG_DEV void reg_alloc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R)); }

DG_DEV float ex2(float x)
{
	float y;
	asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
	return y;
}

DG_DEV uint32_t pack_bf16(float lo, float hi)
{
	__nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
	return *reinterpret_cast<uint32_t *>(&v);
}

DG_DEV void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		     : "r"(addr));
}
/* c += a (16x16, row) * b (16x8, col), bf16 in, fp32 accumulate */
DG_DEV void mma_16816(float *c, const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
		     "{%8, %9}, {%0, %1, %2, %3};\n"
		     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* wgmma: fences, groups, and the three shapes used here */
DG_DEV void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
DG_DEV void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> DG_DEV void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
DG_DEV void reg_fence(float &r) { asm volatile("" : "+f"(r)::"memory"); }
DG_DEV void reg_fence(uint32_t &r) { asm volatile("" : "+r"(r)::"memory"); }
template <typename T, int N> DG_DEV void reg_fence(T (&r)[N])
{
#pragma unroll
	for (int i = 0; i < N; i++)
		reg_fence(r[i]);
}

/* Shared-memory matrix descriptor, 128-byte swizzle. lbo/sbo in bytes. */
DG_DEV uint64_t wg_desc(uint32_t saddr, uint32_t lbo, uint32_t sbo)
{
	return (uint64_t)((saddr & 0x3FFFF) >> 4) | ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(sbo >> 4) << 32) |
	       (1ull << 62);
}

DG_DEV void wgmma_m64n128k16_ss(float (&d)[64], uint64_t da, uint64_t db, int scale_d)
{
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
		"wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
		: "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
		: "l"(da), "l"(db), "r"(scale_d));
}

/* B transposed (MN-major, e.g. V stored (keys, d)); always accumulates */
DG_DEV void wgmma_m64n128k16_rs_tb(float (&d)[64], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint64_t db)
{
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
		"wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
		: "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
		: "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(db), "n"(1));
}

/* B transposed (MN-major, e.g. V stored (keys, d)); always accumulates */
DG_DEV void wgmma_m64n64k16_rs_tb(float (&d)[32], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint64_t db)
{
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
		"wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
		: "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
		: "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(db), "n"(1));
}

/* ---------------------------------------------------------------------------------------------- */
/* Tiles and softmax                                                                              */

/* byte offset of 16-byte chunk c of row r in a swizzled tile of R rows */
template <int R> DG_DEV uint32_t swz(int r, int c)
{
	return (uint32_t)((c >> 3) * (R * 128) + r * 128 + (((c & 7) ^ (r & 7)) << 4));
}

/*
 * Copy R rows of D bf16 into the swizzled tile at sdst with NT threads (tid in 0..NT-1):
 * row r comes from base + row(r)*D, row(r) = idx[r] (gather) or row0 + r (contiguous);
 * rows r >= nvalid are zero-filled.
 */
template <int R, int D, int NT, bool GATHER>
DG_DEV void load_tile(uint32_t sdst, const bf16 *base, const int32_t *idx, int row0, int nvalid, int tid)
{
	constexpr int CPR = D / 8, RPP = NT / CPR;
	static_assert(R % RPP == 0, "tile rows");
	const int c = tid % CPR, rin = tid / CPR;
#pragma unroll 4
	for (int i = 0; i < R / RPP; i++) {
		const int r = i * RPP + rin;
		const bool ok = r < nvalid;
		int row = 0;
		if (ok)
			row = GATHER ? __ldg(idx + r) : row0 + r;
		cp_async16(sdst + swz<R>(r, c), base + (size_t)row * D + c * 8, ok ? 16 : 0);
	}
}

/*
 * Gather loader with the list entries prefetched: for a tile of 128 rows copied by 128 threads, each
 * warp needs 32 list entries; lane l of warp w holds entry tile_lane_row(tid) (loaded a tile ahead),
 * and each copy pass takes its row index by warp shuffle instead of a dependent global load; UNROLL
 * passes are unrolled (all by default; fewer need fewer of the producer's registers).
 */
template <int D, int NT> DG_DEV int tile_lane_row(int tid)
{
	constexpr int CPR = D / 8, RPP = NT / CPR, RPW = 32 / CPR;
	const int lane = tid & 31, w = tid >> 5;
	return (lane / RPW) * RPP + w * RPW + lane % RPW;
}
template <int R, int D, int NT, int UNROLL = 0 /* every pass */>
DG_DEV void load_tile_shfl(uint32_t sdst, const bf16 *base, int idx, int nvalid, int tid)
{
	constexpr int CPR = D / 8, RPP = NT / CPR, RPW = 32 / CPR;
	static_assert(R == NT && (R / RPP) * RPW == 32, "one list entry per lane");
	const int c = tid % CPR, rin = tid / CPR, lane = tid & 31;
	auto pass = [&](int i) {
		const int r = i * RPP + rin;
		const int row = __shfl_sync(0xffffffffu, idx, i * RPW + lane / CPR);
		const bool ok = r < nvalid;
		cp_async16(sdst + swz<R>(r, c), base + (size_t)(ok ? row : 0) * D + c * 8, ok ? 16 : 0);
	};
	if constexpr (UNROLL == 0) {
#pragma unroll
		for (int i = 0; i < R / RPP; i++)
			pass(i);
	} else {
#pragma unroll UNROLL
		for (int i = 0; i < R / RPP; i++)
			pass(i);
	}
}

DG_DEV float quad_max(float x)
{
	x = fmaxf(x, __shfl_xor_sync(0xffffffff, x, 1));
	return fmaxf(x, __shfl_xor_sync(0xffffffff, x, 2));
}
DG_DEV float quad_sum(float x)
{
	x += __shfl_xor_sync(0xffffffff, x, 1);
	return x + __shfl_xor_sync(0xffffffff, x, 2);
}

/* scores of key columns >= nvalid to -inf (accumulator layout, NS floats = NS/2 columns) */
template <int NS> DG_DEV void mask_cols(float (&s)[NS], int nvalid, int t4)
{
#pragma unroll
	for (int j = 0; j < NS / 4; j++) {
		const int col = 8 * j + 2 * t4;
		if (col >= nvalid) {
			s[4 * j] = -INFINITY;
			s[4 * j + 2] = -INFINITY;
		}
		if (col + 1 >= nvalid) {
			s[4 * j + 1] = -INFINITY;
			s[4 * j + 3] = -INFINITY;
		}
	}
}

/* window attention's mask (window_tiles.h): of the scores of rows ia and ib against keys j0 + column,
 * -inf where the column is >= nvalid or the pair is outside the window */
template <int NS>
DG_DEV void mask_window(float (&s)[NS], int j0, int nvalid, int ia, int ib, int text, int w, int t4)
{
#pragma unroll
	for (int j = 0; j < NS / 4; j++)
#pragma unroll
		for (int e = 0; e < 2; e++) {
			const int col = 8 * j + 2 * t4 + e, key = j0 + col;
			const bool in = col < nvalid;
			if (!(in && dg_window_attends(ia, key, text, w)))
				s[4 * j + e] = -INFINITY;
			if (!(in && dg_window_attends(ib, key, text, w)))
				s[4 * j + 2 + e] = -INFINITY;
		}
}

/*
 * Online softmax step on raw scores s (two rows per thread). m0/m1 are running maxima in
 * log2 units (score * scale_log2), l0/l1 per-thread partial row sums (reduced over the quad only
 * at the end). On return s holds p = 2^(score*sl2 - m) and a0/a1 the factors for the old sums.
 */
template <int NS>
DG_DEV void softmax_step(float (&s)[NS], float &m0, float &m1, float &l0, float &l1, float &a0, float &a1, float sl2)
{
	float x0 = -INFINITY, x1 = -INFINITY;
#pragma unroll
	for (int j = 0; j < NS / 4; j++) {
		x0 = fmaxf(x0, fmaxf(s[4 * j], s[4 * j + 1]));
		x1 = fmaxf(x1, fmaxf(s[4 * j + 2], s[4 * j + 3]));
	}
	x0 = quad_max(x0);
	x1 = quad_max(x1);
	const float n0 = fmaxf(m0, x0 * sl2), n1 = fmaxf(m1, x1 * sl2);
	a0 = ex2(m0 - n0);
	a1 = ex2(m1 - n1);
	m0 = n0;
	m1 = n1;
	float r0 = 0.f, r1 = 0.f;
#pragma unroll
	for (int j = 0; j < NS / 4; j++) {
		s[4 * j] = ex2(fmaf(s[4 * j], sl2, -n0));
		s[4 * j + 1] = ex2(fmaf(s[4 * j + 1], sl2, -n0));
		s[4 * j + 2] = ex2(fmaf(s[4 * j + 2], sl2, -n1));
		s[4 * j + 3] = ex2(fmaf(s[4 * j + 3], sl2, -n1));
		r0 += s[4 * j] + s[4 * j + 1];
		r1 += s[4 * j + 2] + s[4 * j + 3];
	}
	l0 = l0 * a0 + r0;
	l1 = l1 * a1 + r1;
}

template <int NO> DG_DEV void rescale(float (&o)[NO], float a0, float a1)
{
#pragma unroll
	for (int j = 0; j < NO / 4; j++) {
		o[4 * j] *= a0;
		o[4 * j + 1] *= a0;
		o[4 * j + 2] *= a1;
		o[4 * j + 3] *= a1;
	}
}

/*
 * P (accumulator layout, fp32) to bf16 A fragments: 16 keys per k-step, 4 registers each.
 * hi = bf16(P) (the bf16 mode: |hi - P| <= 2^-8 P). PRECISE also gives lo = bf16(P - hi), P - hi being
 * exact in fp32, for a second product lo.V: hi + lo carries 16 of P's 24 bits, |hi + lo - P| <= 2^-16 P.
 */
template <bool PRECISE, int NS>
DG_DEV void pack_p(uint32_t (&hi)[NS / 2], uint32_t (&lo)[NS / 2], const float (&s)[NS])
{
#pragma unroll
	for (int i = 0; i < NS / 2; i++) {
		const __nv_bfloat162 h = __floats2bfloat162_rn(s[2 * i], s[2 * i + 1]);
		hi[i] = *reinterpret_cast<const uint32_t *>(&h);
		if constexpr (PRECISE) {
			const float2 hf = __bfloat1622float2(h);
			lo[i] = pack_bf16(s[2 * i] - hf.x, s[2 * i + 1] - hf.y);
		}
	}
}

/*
 * Retained mass sum_j 2^(s_j sl2 - lse_ref log2 e) = l 2^(m - lse_ref log2 e), with l = sum_j 2^(s_j sl2 - m)
 * for the m the sums were taken against. The exponent is a difference of two numbers near |s| sl2
 * (tens): formed in fp64 from the fp32 m and lse_ref so that it is rounded once, not three times.
 */
DG_DEV float dg_mass(float l, float m, float lse_ref)
{
	if (!(l > 0.f))
		return 0.f;
	return (float)((double)l * exp2((double)m - (double)lse_ref * 1.4426950408889634));
}

/*
 * Epilogue for one thread's two rows r0 = rbase + g and r1 = r0 + 8 of the item: normalise,
 * write O in fp32 or bf16 (sparse: at the original query index (PERMUTED) or in place (window
 * attention), + residual), and the LSE (dense) or the retained mass (sparse).
 */
template <int D, bool SPARSE, int RES = DG_RES_F32, bool PERMUTED = SPARSE>
DG_DEV void write_rows(const dg_attn_params &p, const dg_item &it, int rbase, int g, int t4, const float (&o)[D / 2],
		       float m0, float m1, float l0, float l1)
{
	l0 = quad_sum(l0);
	l1 = quad_sum(l1);
#pragma unroll
	for (int half = 0; half < 2; half++) {
		const int r = rbase + g + 8 * half;
		if (r >= it.qcount)
			continue;
		const float l = half ? l1 : l0, m = half ? m1 : m0;
		const float inv = l > 0.f ? 1.f / l : 0.f;
		const int row = PERMUTED ? __ldg(head_perm(p, it.h) + it.qpos + r) : it.qpos + r;
		const size_t ri = (size_t)it.h * p.n + row, oi = out_offset<D>(p, it.h, row);
		const float *res = SPARSE && RES == DG_RES_F32 ? head_residual<D>(p, it.h) : nullptr;
		if (res)
			res += (size_t)row * D;
		const unsigned char *resq = nullptr; /* a stored residual of another dtype (RES) */
		float rscale = 1.f;
		if constexpr (SPARSE && RES != DG_RES_F32) {
			resq = head_residual_q<D, RES>(p, it.h);
			if (resq)
				rscale = dg_res_row_scale<D, RES>(p, resq, row);
		}
#pragma unroll
		for (int j = 0; j < D / 8; j++) {
			const int col = 8 * j + 2 * t4;
			float2 v = make_float2(o[4 * j + 2 * half] * inv, o[4 * j + 2 * half + 1] * inv);
			if (res) {
				const float2 rv = __ldg(reinterpret_cast<const float2 *>(res + col));
				v.x += rv.x;
				v.y += rv.y;
			}
			if constexpr (RES != DG_RES_F32) {
				if (resq) {
					const float2 rv = dg_res_pair<D, RES>(resq, row, col, rscale);
					v.x += rv.x;
					v.y += rv.y;
				}
			}
			if (p.o_f32)
				*reinterpret_cast<float2 *>(p.o_f32 + oi + col) = v;
			else
				*reinterpret_cast<uint32_t *>(p.o_bf16 + oi + col) = pack_bf16(v.x, v.y);
		}
		if (SPARSE && t4 == 0 && p.mass && p.lse_ref)
			p.mass[ri] = dg_mass(l, m, __ldg(p.lse_ref + ri));
		if (!SPARSE && t4 == 0 && p.lse)
			p.lse[ri] = l > 0.f ? (float)(((double)m + log2((double)l)) * 0.6931471805599453) : -INFINITY;
	}
}

/* The sparse kernel's epilogue (dg_attn_sm90_body's EPI): write_rows from the registers, or
 * write_rows_staged (the residual read by the consumers, or prefetched by the producer) */
enum { DG_EPI_DIRECT, DG_EPI_STAGED, DG_EPI_PREFETCH };

/*
 * write_rows through shared memory (the sparse kernel's staged epilogues, dev/kernels' sparse v15 and
 * v17): the warp's 16 rows of O / l go to its 16 x D fp32 staging rows in stage (16-byte chunks
 * XOR-swizzled by row: no bank conflicts either way), then each row is written whole: lane c takes
 * chunk c (4 columns) of a row (two rows a pass at D = 64), so its output is one coalesced store.
 * The residual (fp32): RPRE, already in the staging rows (the producer's cp.async, item row r's chunk
 * c at r * D + 4 (c ^ (r & 7))), added in place; rows are myrow (lane r holds row r, -1 past the
 * item); otherwise read a whole row at a time, every read of the warp in flight before the first add,
 * rows loaded here. The same values as write_rows (fp32 O / l + fp32 residual, rounded once); the
 * retained mass as write_rows.
 */
template <int D, bool RPRE>
DG_DEV void write_rows_staged(const dg_attn_params &p, const dg_item &it, int rbase, int g, int t4,
			      const float (&o)[D / 2], float m0, float m1, float l0, float l1, float *stage, int myrow)
{
	constexpr int CPR = D / 4, RPP = 32 / CPR, PASSES = 16 / RPP; /* chunks a row, rows a pass, passes */
	const int lane = (threadIdx.x & 31);
	const float *res = head_residual<D>(p, it.h);
	l0 = quad_sum(l0);
	l1 = quad_sum(l1);
	if (!RPRE) {
		myrow = -1;
		if (lane < 16 && rbase + lane < it.qcount)
			myrow = __ldg(head_perm(p, it.h) + it.qpos + rbase + lane);
	}
#pragma unroll
	for (int half = 0; half < 2; half++) {
		const int r = g + 8 * half;
		const float l = half ? l1 : l0, inv = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
		for (int j = 0; j < D / 8; j++) {
			const int chunk = (2 * j + (t4 >> 1)) ^ (r & 7);
			float2 *at = reinterpret_cast<float2 *>(stage + r * D + 4 * chunk + 2 * (t4 & 1));
			float2 v = make_float2(o[4 * j + 2 * half] * inv, o[4 * j + 2 * half + 1] * inv);
			if (RPRE && res) {
				const float2 rv = *at;
				v.x += rv.x;
				v.y += rv.y;
			}
			*at = v;
		}
	}
	__syncwarp();
	const int c = lane % CPR, rsub = lane / CPR;
	int rows[PASSES];
	float4 rv[PASSES];
#pragma unroll
	for (int k = 0; k < PASSES; k++) {
		rows[k] = __shfl_sync(0xffffffffu, myrow, k * RPP + rsub);
		rv[k] = !RPRE && res && rows[k] >= 0
				? __ldg(reinterpret_cast<const float4 *>(res + (size_t)rows[k] * D) + c)
				: make_float4(0.f, 0.f, 0.f, 0.f);
	}
#pragma unroll
	for (int k = 0; k < PASSES; k++) {
		const int r = k * RPP + rsub, row = rows[k];
		if (row < 0)
			continue;
		float4 v = *reinterpret_cast<const float4 *>(stage + r * D + 4 * (c ^ (r & 7)));
		if (!RPRE)
			v = make_float4(v.x + rv[k].x, v.y + rv[k].y, v.z + rv[k].z, v.w + rv[k].w);
		const size_t oi = out_offset<D>(p, it.h, row) + 4 * c;
		if (p.o_f32)
			*reinterpret_cast<float4 *>(p.o_f32 + oi) = v;
		else
			*reinterpret_cast<uint2 *>(p.o_bf16 + oi) = make_uint2(pack_bf16(v.x, v.y), pack_bf16(v.z, v.w));
	}
	__syncwarp(); /* the staging rows are read before they are written again */
#pragma unroll
	for (int half = 0; half < 2; half++) {
		const int row = __shfl_sync(0xffffffffu, myrow, g + 8 * half);
		if (t4 == 0 && row >= 0 && p.mass && p.lse_ref) {
			const size_t ri = (size_t)it.h * p.n + row;
			p.mass[ri] = dg_mass(half ? l1 : l0, half ? m1 : m0, __ldg(p.lse_ref + ri));
		}
	}
}



/* ---------------------------------------------------------------------------------------------- */
/* Host side: argument checks and launch                                                          */
#include <stdio.h>
#include <cuda_runtime.h>

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

/* sparse, dg_sparse_fwd_heads's arguments: each head's arrays and residual from tab, bf16 token-major
 * output (row stride ldo), one residual dtype for all heads */
static inline int dg_sparse_heads_params(dg_attn_params &p, const uint16_t *q, const uint16_t *k, const uint16_t *v,
					 int heads, int n, int d, const dg_sparse_head *tab, int ngroups, uint16_t *o16,
					 int ldo)
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
