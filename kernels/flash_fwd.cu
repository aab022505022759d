/*
 * flash_fwd.cu: dense flash attention forward, O and the per-row LSE (docs/spec.md §8).
 *   q, k, v (heads, n, d) bf16 -> o (heads, n, d) fp32 or bf16, lse (heads, n) fp32 (natural log,
 *   scale 1/sqrt(d)); fp32 accumulation; d = 64 or 128; any n (tail keys masked, tail rows guarded).
 *   Two modes per call: P rounded to bf16 before P.V (the fast mode, as FlashAttention), or precise:
 *   P split into bf16 hi + lo and P.V = hi.V + lo.V (a second P.V product; P to 2^-16, so the output
 *   is at fp32-accumulation level; the replay's default). Softmax sums are fp32 in both.
 * The kernel: attn_sm90.cuh's Hopper kernel, FlashAttention-3 style: a producer warpgroup (cp.async ->
 * mbarrier, 2 K/V stages) and 2 consumer warpgroups (wgmma 128x128 tiles, P from registers, setmaxnreg
 * 40/232), the softmax of tile t+1 under the P.V wgmma of tile t (intra-warpgroup overlap) and the two
 * consumer warpgroups issuing their GEMMs in turns (ping-pong, named barriers).
 * Launchers: dg_flash_fwd, dg_flash_fwd_kv (its own key count, for cross-attention; heads merged) and
 * dg_flash_fwd_rows (the first rows of dg_flash_fwd's, for joint attention's text rows),
 * declared in dsgap_kernels.h. Check: tests/kernels/gpu_kernels.cu (fp64 reference, FA3 tolerance rule). Time:
 * dsgap-bench-kernels (bench/bench_attn.cu) and scripts/gpu_run.sh on the H200; results/bench/BENCH.md.
 * Earlier versions, their test and benchmark: dev/kernels/ (measured in docs/history.md, "Kernel versions").
 */
#include "dsgap_kernels.h"
#include "attn_sm90.cuh"

template <int D, bool PR> static int flash_run(const dg_attn_params &p, cudaStream_t st)
{
	const dim3 grid((p.n + 127) / 128, p.heads);
	return dg_launch("flash_fwd", dg_attn_sm90_kernel<D, false, PR>, grid, 384,
			 dg_sm90_cfg<D, 2>::SMEM, p, st);
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
