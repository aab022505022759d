/*
 * flash_fwd_v.cu: the numbered versions of dense attention (dg_flash_fwd_v, dsgap_kernels_dev.h).
 * v1 is attn_fa2.cuh's kernel, v2..v5 attn_sm90_lab.cuh's with other template switches (cp.async
 * producers), v6 kernels/attn_sm90_dense.cuh's TMA kernel with 128 x 128 tiles, v7, the promoted one,
 * kernels/flash_fwd.cu's launcher (the same kernel with 128 x 176 tiles at d = 128 in the fast mode), v8
 * attn_sm90_dense_lab.cuh's clusters of two (d = 128 fast; v6 otherwise). Arguments are checked and the
 * parameter block filled as the promoted launcher does (dg_flash_params). Measured times: docs/history.md,
 * "Kernel versions".
 */
#include "dsgap_kernels_dev.h"
#include "attn_fa2.cuh"
#include "attn_sm90_lab.cuh"
#include "attn_sm90_dense_lab.cuh"
#include "tma_map.h"

static const char *const flash_names[] = {
	"v1 fa2: 4 warps, 64x64 tiles, mma.sync m16n8k16, cp.async double buffer",
	"v2 sm90: producer warpgroup (cp.async->mbarrier, 2 stages), 2 consumer warpgroups, wgmma 128x128",
	"v3 sm90: v2 + intra-warpgroup overlap of softmax with the P.V wgmma",
	"v4 sm90: v3 + ping-pong scheduling of the two consumer warpgroups",
	"v5 sm90: v4 with 3 K/V stages (4 at d=64)",
	"v6 sm90: v4's consumers, Q/K/V tiles by TMA from one producer thread (registers 24/240)",
	"v7 sm90: v6 with 128x176 tiles at d=128, fast mode (FA3's non-causal tile; else v6)",
	"v8 sm90: v7 with clusters of two CTAs sharing each K/V tile by TMA multicast (d=128 fast; else v6)",
};
#define FLASH_NVER ((int)(sizeof flash_names / sizeof flash_names[0]))

extern "C" const char *dg_flash_fwd_name(int version)
{
	if (version == 0)
		version = DG_FLASH_FWD_PROMOTED;
	return version >= 1 && version <= FLASH_NVER ? flash_names[version - 1] : NULL;
}

/* v6, v8: a TMA kernel with BN-key tiles, launched in clusters of CLUSTER CTAs along x, its tensor maps
 * made for this call */
template <int BN, int CLUSTER, typename Kern>
static int dense_tma(Kern kern, int d, const dg_attn_params &p, dim3 grid, cudaStream_t st)
{
	CUtensorMap tq, tk, tv;
	const int nk = p.nk > 0 ? p.nk : p.n;
	if (dg_tile_map(&tq, p.q, p.heads, p.n, d, 128, "flash_fwd v6") ||
	    dg_tile_map(&tk, p.k, p.heads, nk, d, BN, "flash_fwd v6") ||
	    dg_tile_map(&tv, p.v, p.heads, nk, d, BN, "flash_fwd v6"))
		return -1;
	const size_t smem = d == 128 ? dg_dense_cfg<128, BN>::SMEM : dg_dense_cfg<64, BN>::SMEM;
	if (CLUSTER == 1)
		return dg_launch_args("flash_fwd", kern, grid, 384, smem, st, p, tq, tk, tv);
	if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess) {
		fprintf(stderr, "flash_fwd v8: cannot set %zu bytes of shared memory\n", smem);
		return -1;
	}
	grid.x = (grid.x + CLUSTER - 1) / CLUSTER * CLUSTER;
	cudaLaunchConfig_t cfg = {};
	cudaLaunchAttribute attr[1];
	attr[0].id = cudaLaunchAttributeClusterDimension;
	attr[0].val.clusterDim.x = CLUSTER;
	attr[0].val.clusterDim.y = 1;
	attr[0].val.clusterDim.z = 1;
	cfg.gridDim = grid;
	cfg.blockDim = dim3(384);
	cfg.dynamicSmemBytes = smem;
	cfg.stream = st;
	cfg.attrs = attr;
	cfg.numAttrs = 1;
	const cudaError_t e = cudaLaunchKernelEx(&cfg, kern, p, tq, tk, tv);
	if (e != cudaSuccess) {
		fprintf(stderr, "flash_fwd v8: launch failed: %s\n", cudaGetErrorString(e));
		return -1;
	}
	return 0;
}

/* the versions other than the promoted one */
template <int D, bool PR> static int flash_run(int ver, const dg_attn_params &p, cudaStream_t st)
{
	const char *op = "flash_fwd";
	const dim3 g64((p.n + 63) / 64, p.heads), g128((p.n + 127) / 128, p.heads);
	switch (ver) {
	case 1:
		return dg_launch(op, dg_attn_fa2_kernel<D, false, PR>, g64, 128, dg_fa2_cfg<D>::SMEM, p, st);
	case 2:
		return dg_launch(op, dg_lab_sm90_kernel<D, 2, false, false, false, false, PR>, g128, 384,
				 dg_sm90_cfg<D, 2>::SMEM, p, st);
	case 3:
		return dg_launch(op, dg_lab_sm90_kernel<D, 2, true, false, false, false, PR>, g128, 384,
				 dg_sm90_cfg<D, 2>::SMEM, p, st);
	case 4:
		return dg_launch(op, dg_lab_sm90_kernel<D, 2, true, true, false, false, PR>, g128, 384,
				 dg_sm90_cfg<D, 2>::SMEM, p, st);
	case 5: {
		constexpr int S = D == 128 ? 3 : 4;
		return dg_launch(op, dg_lab_sm90_kernel<D, S, true, true, false, false, PR>, g128, 384,
				 dg_sm90_cfg<D, S>::SMEM, p, st);
	}
	case 8:
		if constexpr (D == 128 && !PR)
			return dense_tma<176, 2>(dg_dense_cluster_kernel<176, PR>, D, p, g128, st);
		[[fallthrough]];
	case 6:
		return dense_tma<128, 1>(dg_attn_sm90_dense_kernel<D, 128, PR>, D, p, g128, st);
	}
	return -1;
}

extern "C" int dg_flash_fwd_v(int version, const uint16_t *q, const uint16_t *k, const uint16_t *v, int heads, int n,
			      int d, float *o_f32, uint16_t *o_bf16, float *lse, int precise, dg_stream stream)
{
	if (version == 0 || version == DG_FLASH_FWD_PROMOTED)
		return dg_flash_fwd(q, k, v, heads, n, d, o_f32, o_bf16, lse, precise, stream);
	if (version < 1 || version > FLASH_NVER) {
		fprintf(stderr, "flash_fwd: no version %d (1..%d)\n", version, FLASH_NVER);
		return -1;
	}
	dg_attn_params p;
	if (dg_flash_params(p, q, k, v, heads, n, n, d, o_f32, o_bf16, lse, false))
		return -1;
	cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
	if (precise)
		return d == 128 ? flash_run<128, true>(version, p, st) : flash_run<64, true>(version, p, st);
	return d == 128 ? flash_run<128, false>(version, p, st) : flash_run<64, false>(version, p, st);
}
