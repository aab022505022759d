/*
 * flash_fwd.cu: dense flash attention forward, O and the per-row LSE (docs/spec.md §8).
 *   q, k, v (heads, n, d) bf16 -> o (heads, n, d) fp32 or bf16, lse (heads, n) fp32 (natural log,
 *   scale 1/sqrt(d)); fp32 accumulation; d = 64 or 128; any n (tail keys masked, tail rows guarded).
 *   Two modes per call: P rounded to bf16 before P.V (the fast mode, as FlashAttention), or precise:
 *   P split into bf16 hi + lo and P.V = hi.V + lo.V (a second P.V product; P to 2^-16, so the output
 *   is at fp32-accumulation level; the replay's default). Softmax sums are fp32 in both.
 * The kernel: attn_sm90_dense.cuh's Hopper kernel, FlashAttention-3 style: one producer thread (TMA
 * boxes into 2 K/V stages, tensor maps made here for each call: tma_map.h) and 2 consumer warpgroups
 * (wgmma, 128 x 176 tiles at d = 128 in the fast mode, else 128 x 128; P from registers; setmaxnreg
 * 24/240), the softmax of tile t+1 under the P.V wgmma of tile t (intra-warpgroup overlap) and the two
 * consumer warpgroups issuing their GEMMs in turns (ping-pong, named barriers).
 * Launchers: dg_flash_fwd, dg_flash_fwd_kv (its own key count, for cross-attention; heads merged) and
 * dg_flash_fwd_rows (the first rows of dg_flash_fwd's, for joint attention's text rows),
 * declared in dsgap_kernels.h. Check: tests/kernels/gpu_kernels.cu (fp64 reference, FA3 tolerance rule). Time:
 * dsgap-bench-kernels (bench/bench_attn.cu) and scripts/gpu_run.sh on the H200; results/bench/BENCH.md.
 * Earlier versions, their test and benchmark: dev/kernels/ (measured in docs/history.md, "Kernel versions").
 */
#include "dsgap_kernels.h"
#include "attn_sm90_dense.cuh"
#include "tma_map.h"

template <int D, bool PR> static int flash_run(const dg_attn_params &p, cudaStream_t st)
{
	constexpr int BN = D == 128 && !PR ? 176 : 128;
	const int nk = p.nk > 0 ? p.nk : p.n;
	CUtensorMap tq, tk, tv;
	if (dg_tile_map(&tq, p.q, p.heads, p.n, D, 128, "flash_fwd") || dg_tile_map(&tk, p.k, p.heads, nk, D, BN, "flash_fwd") ||
	    dg_tile_map(&tv, p.v, p.heads, nk, D, BN, "flash_fwd"))
		return -1;
	const dim3 grid((p.n + 127) / 128, p.heads);
	return dg_launch_args("flash_fwd", dg_attn_sm90_dense_kernel<D, BN, PR>, grid, 384, dg_dense_cfg<D, BN>::SMEM, st, p,
			      tq, tk, tv);
}

/* n queries against nk keys per head (nk = n: self-attention); merged: o token-major (n, heads*d) */
static int flash_fwd(const uint16_t *q, const uint16_t *k, const uint16_t *v, int heads, int n, int nk, int d,
		     float *o_f32, uint16_t *o_bf16, float *lse, int precise, bool merged, dg_stream stream)
{
	dg_attn_params p;
	if (dg_flash_params(p, q, k, v, heads, n, nk, d, o_f32, o_bf16, lse, merged))
		return -1;
	cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
	if (precise)
		return d == 128 ? flash_run<128, true>(p, st) : flash_run<64, true>(p, st);
	return d == 128 ? flash_run<128, false>(p, st) : flash_run<64, false>(p, st);
}

extern "C" int dg_flash_fwd_kv(const uint16_t *q, const uint16_t *k, const uint16_t *v, int heads, int nq, int nk,
			       int d, float *o_f32, uint16_t *o_bf16, float *lse, dg_stream stream)
{
	return flash_fwd(q, k, v, heads, nq, nk, d, o_f32, o_bf16, lse, 0, true, stream); /* fast mode (closed loop) */
}

extern "C" int dg_flash_fwd_rows(const uint16_t *q, const uint16_t *k, const uint16_t *v, int nq, int n, int d,
				 float *o_f32, float *lse, int precise, dg_stream stream)
{
	if (nq < 1 || nq > n) {
		fprintf(stderr, "dsgap: error: flash rows: %d query rows of %d\n", nq, n);
		return -1;
	}
	return flash_fwd(q, k, v, 1, nq, n, d, o_f32, NULL, lse, precise, false, stream);
}

extern "C" int dg_flash_fwd(const uint16_t *q, const uint16_t *k, const uint16_t *v, int heads, int n, int d,
			    float *o_f32, uint16_t *o_bf16, float *lse, int precise, dg_stream stream)
{
	return flash_fwd(q, k, v, heads, n, n, d, o_f32, o_bf16, lse, precise, false, stream);
}
