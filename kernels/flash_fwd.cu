/*
 * flash_fwd.cu: dense flash attention forward, O and the per-row LSE (DESIGN §8).
 *   q, k, v (heads, n, d) bf16 -> o (heads, n, d) fp32 or bf16, lse (heads, n) fp32 (natural log,
 *   scale 1/sqrt(d)); fp32 accumulation; d = 64 or 128; any n (tail keys masked, tail rows guarded).
 *   Two modes per call (every version): P rounded to bf16 before P.V (the fast mode, as FlashAttention),
 *   or precise: P split into bf16 hi + lo and P.V = hi.V + lo.V (a second P.V product; P to 2^-16,
 *   so the output is at fp32-accumulation level; the replay's default). Softmax sums are fp32 in both.
 * Launchers: dg_flash_fwd (the promoted version), dg_flash_fwd_kv (the promoted version with its own key
 * count, for cross-attention) and dg_flash_fwd_v (numbered versions), declared in dsgap_kernels.h. Kernels: attn_fa2.cuh (v1), attn_sm90.cuh (v2..v5).
 * Check: tests/gpu_kernels.cu (fp64 reference, FA3 tolerance rule). Time: dsgap-bench-kernels
 * (kernels/bench_attn.cu) and scripts/gpu_run.sh on the H200; results/bench/BENCH.md.
 *
 * Versions (H200, bf16, d=128, 12 heads, N=32760, non-causal; TFLOP/s = 4 N^2 d heads / time;
 * cuDNN SDPA 577 TFLOP/s in the same run, 2026-12-02; details in results/bench/BENCH.md).
 *   v1  FA2 style: 4 warps, 64x64 tiles, mma.sync m16n8k16, ldmatrix, cp.async double buffer   274
 *   v2  Hopper: producer warpgroup (cp.async -> mbarrier, 2 stages) + 2 consumer warpgroups,
 *       wgmma 128x128 tiles, P from registers, setmaxnreg 40/232                                 496
 *   v3  v2 + intra-warpgroup overlap (softmax of tile t+1 under the P.V wgmma of tile t)       515
 *   v4  v3 + ping-pong of the two consumer warpgroups (named barriers)    PROMOTED             527 (0.92x cuDNN)
 *   v5  v4 with a deeper K/V ring (3 stages at d=128, 4 at d=64)                              519
 *   d=64 (v4): 427.
 */
#include "dsgap_kernels.h"
#include "attn_fa2.cuh"
#include "attn_sm90.cuh"

static const char *const flash_names[] = {
	"v1 fa2: 4 warps, 64x64 tiles, mma.sync m16n8k16, cp.async double buffer",
	"v2 sm90: producer warpgroup (cp.async->mbarrier, 2 stages), 2 consumer warpgroups, wgmma 128x128",
	"v3 sm90: v2 + intra-warpgroup overlap of softmax with the P.V wgmma",
	"v4 sm90: v3 + ping-pong scheduling of the two consumer warpgroups",
	"v5 sm90: v4 with 3 K/V stages (4 at d=64)",
};
#define FLASH_NVER ((int)(sizeof flash_names / sizeof flash_names[0]))
#define FLASH_BEST 4 /* promoted version (dg_flash_fwd) */

extern "C" const char *dg_flash_fwd_name(int version)
{
	if (version == 0)
		version = FLASH_BEST;
	return version >= 1 && version <= FLASH_NVER ? flash_names[version - 1] : NULL;
}

template <int D, bool PR> static int flash_run(int ver, const dg_attn_params &p, cudaStream_t st)
{
	const char *op = "flash_fwd";
	const dim3 g64((p.n + 63) / 64, p.heads), g128((p.n + 127) / 128, p.heads);
	switch (ver) {
	case 1:
		return dg_launch(op, dg_attn_fa2_kernel<D, false, PR>, g64, 128, dg_fa2_cfg<D>::SMEM, p, st);
	case 2:
		return dg_launch(op, dg_attn_sm90_kernel<D, 2, false, false, false, false, PR>, g128, 384,
				 dg_sm90_cfg<D, 2>::SMEM, p, st);
	case 3:
		return dg_launch(op, dg_attn_sm90_kernel<D, 2, true, false, false, false, PR>, g128, 384,
				 dg_sm90_cfg<D, 2>::SMEM, p, st);
	case 4:
		return dg_launch(op, dg_attn_sm90_kernel<D, 2, true, true, false, false, PR>, g128, 384,
				 dg_sm90_cfg<D, 2>::SMEM, p, st);
	case 5: {
		constexpr int S = D == 128 ? 3 : 4;
		return dg_launch(op, dg_attn_sm90_kernel<D, S, true, true, false, false, PR>, g128, 384,
				 dg_sm90_cfg<D, S>::SMEM, p, st);
	}
	}
	return -1;
}

/* n queries against nk keys per head (nk = n: self-attention); merged: o token-major (n, heads*d) */
static int flash_fwd(int version, const uint16_t *q, const uint16_t *k, const uint16_t *v, int heads, int n, int nk,
		     int d, float *o_f32, uint16_t *o_bf16, float *lse, int precise, bool merged, dg_stream stream)
{
	if (version == 0)
		version = FLASH_BEST;
	if (version < 1 || version > FLASH_NVER) {
		fprintf(stderr, "flash_fwd: no version %d (1..%d)\n", version, FLASH_NVER);
		return -1;
	}
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
	dg_attn_params p = {};
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
	cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
	if (precise)
		return d == 128 ? flash_run<128, true>(version, p, st) : flash_run<64, true>(version, p, st);
	return d == 128 ? flash_run<128, false>(version, p, st) : flash_run<64, false>(version, p, st);
}

extern "C" int dg_flash_fwd_v(int version, const uint16_t *q, const uint16_t *k, const uint16_t *v, int heads, int n,
			      int d, float *o_f32, uint16_t *o_bf16, float *lse, int precise, dg_stream stream)
{
	return flash_fwd(version, q, k, v, heads, n, n, d, o_f32, o_bf16, lse, precise, false, stream);
}

extern "C" int dg_flash_fwd_kv(const uint16_t *q, const uint16_t *k, const uint16_t *v, int heads, int nq, int nk,
			       int d, float *o_f32, uint16_t *o_bf16, float *lse, dg_stream stream)
{
	return flash_fwd(0, q, k, v, heads, nq, nk, d, o_f32, o_bf16, lse, 0, true, stream); /* fast mode (closed loop) */
}

extern "C" int dg_flash_fwd(const uint16_t *q, const uint16_t *k, const uint16_t *v, int heads, int n, int d,
			    float *o_f32, uint16_t *o_bf16, float *lse, int precise, dg_stream stream)
{
	return dg_flash_fwd_v(0, q, k, v, heads, n, d, o_f32, o_bf16, lse, precise, stream);
}
