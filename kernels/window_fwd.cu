/*
 * window_fwd.cu: window attention, DiTFastAttn's window (docs/spec.md §2.9, src/policy/peers.h
 * dg_peer_window_width) at dense-kernel speed. Query i attends key j iff i < text, j < text or
 * |i - j| <= w: the same key sets as dg_peer_window's lists through dg_sparse_fwd, without a list.
 * The kernel: attn_sm90.cuh's dense Hopper kernel with WINDOW: a CTA of 128 query rows walks only its
 * window's key tiles (contiguous rows: the text keys, the diagonal tile, the keys after it, the keys
 * before it; attn_common.cuh dg_window_tiles), masks per pair only the tiles that cross the window's
 * edge, and ends with the sparse epilogue: output fp32 in place, + residual of any stored dtype, and
 * the retained mass against lse_ref. Modes as dg_flash_fwd (P to bf16, or precise hi + lo).
 * Launchers: dg_window_fwd, and dg_window_fwd_heads (the DiT's reuse steps: a site's heads in one
 * launch, each with its own residual, bf16 output with the heads merged) (dsgap_kernels.h). Test: tests/kernels/gpu_kernels.cu (fp64 reference of the
 * window, FA3 tolerance rule; and against dg_sparse_fwd on dg_peer_window's lists).
 */
#include "dsgap_kernels.h"
#include "attn_sm90.cuh"

template <int D, bool PR, int RES> static int window_run(const dg_attn_params &p, cudaStream_t st)
{
	const dim3 grid((p.n + 127) / 128, p.heads);
	return dg_launch("window_fwd", dg_attn_sm90_window_kernel<D, PR, RES>, grid, 384, dg_sm90_cfg<D, 2>::SMEM, p,
			 st);
}

template <int RES> static int window_run_res(const dg_attn_params &p, int d, int precise, cudaStream_t st)
{
	if (d == 128)
		return precise ? window_run<128, true, RES>(p, st) : window_run<128, false, RES>(p, st);
	return precise ? window_run<64, true, RES>(p, st) : window_run<64, false, RES>(p, st);
}

/* p's window, residual and launch, after the launcher has filled the rest; 0 or -1 after one line */
static int window_launch(dg_attn_params &p, int d, int text, int w, int residual_dtype, int precise, dg_stream stream)
{
	if (text < 0 || text > p.n || w < 0) {
		fprintf(stderr, "window_fwd: text %d of %d tokens, half-width %d\n", text, p.n, w);
		return -1;
	}
	if (!dg_res_dtype_ok(residual_dtype)) {
		fprintf(stderr, "window_fwd: residual dtype %d (0..2)\n", residual_dtype);
		return -1;
	}
	p.residual_dtype = residual_dtype;
	p.win_text = text;
	p.win_w = w;
	cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
	if (residual_dtype == DG_RES_BF16)
		return window_run_res<DG_RES_BF16>(p, d, precise, st);
	if (residual_dtype == DG_RES_FP8)
		return window_run_res<DG_RES_FP8>(p, d, precise, st);
	return window_run_res<DG_RES_F32>(p, d, precise, st);
}

extern "C" int dg_window_fwd(const uint16_t *q, const uint16_t *k, const uint16_t *v, int heads, int n, int d,
			     int text, int w, const void *residual, int residual_dtype, const float *lse_ref, float *o,
			     float *mass, int precise, dg_stream stream)
{
	if (!o || (mass && !lse_ref) || (((uintptr_t)o | (uintptr_t)residual) & 7)) {
		fprintf(stderr, "window_fwd: o missing, mass without lse_ref, or o or residual not 8-byte aligned\n");
		return -1;
	}
	dg_attn_params p;
	if (dg_flash_params(p, q, k, v, heads, n, n, d, o, NULL, NULL, false))
		return -1;
	p.residual = residual;
	p.lse_ref = lse_ref;
	p.mass = mass;
	return window_launch(p, d, text, w, residual ? residual_dtype : DG_RES_F32, precise, stream);
}

extern "C" int dg_window_fwd_heads(const uint16_t *q, const uint16_t *k, const uint16_t *v, int heads, int n, int d,
				   int text, int w, const void *const *residual, int residual_dtype, uint16_t *o16, int ldo,
				   int precise, dg_stream stream)
{
	if (heads > DG_SPARSE_HEADS_MAX || !o16 || ldo < heads * d || (ldo & 1) || ((uintptr_t)o16 & 3)) {
		fprintf(stderr, "window_fwd_heads: %d heads (1..%d), o16 missing or misaligned, or row stride %d below "
			"%d x %d or odd\n", heads, DG_SPARSE_HEADS_MAX, ldo, heads, d);
		return -1;
	}
	dg_attn_params p;
	if (dg_flash_params(p, q, k, v, heads, n, n, d, NULL, o16, NULL, false))
		return -1;
	p.ldo = ldo;
	p.ntab = heads;
	for (int h = 0; h < heads; h++) {
		const void *r = residual ? residual[h] : NULL;
		if ((uintptr_t)r & 7) {
			fprintf(stderr, "window_fwd_heads: head %d: residual not 8-byte aligned\n", h);
			return -1;
		}
		p.tab[h].residual = r;
	}
	return window_launch(p, d, text, w, residual ? residual_dtype : DG_RES_F32, precise, stream);
}
