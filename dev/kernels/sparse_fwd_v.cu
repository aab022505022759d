/*
 * sparse_fwd_v.cu: the numbered versions of gather-KV sparse attention (dg_sparse_fwd_v,
 * dsgap_kernels_dev.h). The tensor-core kernel differs between versions: v1 is attn_fa2.cuh's kernel,
 * v2..v10 attn_sm90_lab.cuh's with other template switches; v7, the promoted one, is
 * kernels/sparse_fwd.cu's launcher; v9 is v7 with the rows gathered by TMA (dg_lab_sm90_body's
 * DG_GATHER_TMA: tensor maps of K and V made here, 64-column boxes of one row, 128B swizzle, each
 * landing at its row of the swizzled tile: TMA swizzles by the shared-memory address); v10 is v7 with
 * the producer's copy passes unrolled by 4, not 16, so that it fits 40 registers and the consumers get
 * 232 instead of 200 (DG_GATHER_LEAN; at d=128 its precise mode keeps the overlap); v11 and v12 are v7
 * and v10 with dg_lab_sm90_body's phase clock (PROBE: SM clocks by phase of the producer and of the
 * consumers' overlapped loop, read by dg_sparse_probe_read); v13 is v7 with the producer copying K one
 * tile ahead of V (dg_lab_sm90_body's KAHEAD: K(t+1) before V(t), the consumers' order), v14 v13 with
 * the phase clock; v15 is v7 with the staged epilogue (dg_lab_sm90_body's EPI = DG_EPI_STAGED: O through
 * shared memory, each row's residual read and output written whole by one warp, write_rows_staged), v16
 * v15 with the phase clock; v17 is v15 with the residual rows prefetched into the staging rows by the
 * producer during the item (DG_EPI_PREFETCH), v18 v17 with the phase clock. The small-group kernel
 * (kernels/sparse_small.cuh) is the same in all. Arguments are checked and the parameter block filled as the promoted launcher does
 * (dg_sparse_fwd_params). Measured times: docs/history.md, "Kernel versions".
 */
#include "dsgap_kernels_dev.h"
#include "attn_fa2.cuh"
#include "attn_sm90_lab.cuh"
#include "sparse_small.cuh"

#include "tma_map.h"

static const char *const sparse_names[] = {
	"v1 fa2 gather: 64-query x 64-key tiles, mma.sync, cp.async row gather",
	"v2 sm90 gather: producer warpgroup gathers rows (cp.async->mbarrier, 2 stages), wgmma 128x128",
	"v3 sm90 gather: v2 + intra-warpgroup overlap",
	"v4 sm90 gather: v3 + ping-pong consumer warpgroups",
	"v5 sm90 gather: v4 with 3 stages (4 at d=64)",
	"v6 sm90 gather: v2 + list entries prefetched a tile ahead (rows by shuffle) + persistent grid",
	"v7 sm90 gather: v4 + list prefetch + persistent grid",
	"v8 sm90 gather: v7 with 3 stages (4 at d=64)",
	"v9 sm90 gather: v7 with the K/V rows copied by TMA (one warp, a box a row half)",
	"v10 sm90 gather: v7 with the producer in 40 registers (copy passes unrolled by 4), consumers 232",
	"v11 sm90 gather: v7 with the phase clock",
	"v12 sm90 gather: v10 with the phase clock",
	"v13 sm90 gather: v7 with K copied one tile ahead of V (the consumers' order)",
	"v14 sm90 gather: v13 with the phase clock",
	"v15 sm90 gather: v7 with the epilogue staged through shared memory (whole-row residual reads and stores)",
	"v16 sm90 gather: v15 with the phase clock",
	"v17 sm90 gather: v15 with the residual rows prefetched into shared memory by the producer",
	"v18 sm90 gather: v17 with the phase clock",
};
#define SPARSE_NVER ((int)(sizeof sparse_names / sizeof sparse_names[0]))

extern "C" const char *dg_sparse_fwd_name(int version)
{
	if (version == 0)
		version = DG_SPARSE_FWD_PROMOTED;
	return version >= 1 && version <= SPARSE_NVER ? sparse_names[version - 1] : NULL;
}

/* v9's kernel: v7's body with TMA gathers from the tensor maps tmk, tmv */
template <int D, bool PR>
__global__ void __launch_bounds__(384, 1)
	sparse_tma_kernel(const __grid_constant__ dg_attn_params p, const __grid_constant__ CUtensorMap tmk,
			  const __grid_constant__ CUtensorMap tmv)
{
	dg_lab_sm90_body<D, 2, true, true, true, true, PR, DG_RES_F32, DG_GATHER_TMA>(p, &tmk, &tmv);
}

/* the phase counters of v11 and v12: (producer, consumer 1, consumer 2) x phase, summed over CTAs */
static_assert(DG_PROBE_N == DG_SPARSE_PROBE_PHASES, "dsgap_kernels_dev.h's phase count");
__device__ unsigned long long g_probe[3 * DG_PROBE_N];

/* v10..v18's kernel: v7's body with the producer GATHER, the phase clock when PROBE, K a tile ahead when
 * KAHEAD, the epilogue EPI */
template <int D, bool PR, int GATHER, bool PROBE, bool KAHEAD = false, int EPI = DG_EPI_DIRECT>
__global__ void __launch_bounds__(384, 1) sparse_body_kernel(const __grid_constant__ dg_attn_params p)
{
	dg_lab_sm90_body<D, 2, true, true, true, true, PR, DG_RES_F32, GATHER, PROBE, KAHEAD, false, EPI>(
		p, nullptr, nullptr, PROBE ? g_probe : nullptr);
}

static const char *const probe_names[DG_PROBE_N] = {
	"item", "fullk", "turn", "issue", "fullv", "qkwait", "softmax", "pvwait", "rescale", "epilogue", "empty", "copy",
};

extern "C" const char *dg_sparse_probe_phase(int phase)
{
	return phase >= 0 && phase < DG_PROBE_N ? probe_names[phase] : NULL;
}

extern "C" int dg_sparse_probe_read(unsigned long long *out)
{
	static const unsigned long long zero[3 * DG_PROBE_N] = {0};
	if (cudaDeviceSynchronize() != cudaSuccess || cudaMemcpyFromSymbol(out, g_probe, sizeof zero) != cudaSuccess ||
	    cudaMemcpyToSymbol(g_probe, zero, sizeof zero) != cudaSuccess) {
		fprintf(stderr, "sparse_fwd: the phase counters could not be read\n");
		return -1;
	}
	return 0;
}

/* the versions other than the promoted one: the tensor-core kernel, then the small groups */
template <int D, bool PR> static int sparse_run(int ver, const dg_attn_params &p, cudaStream_t st)
{
	const char *op = "sparse_fwd";
	const dim3 grid(min(p.ngroups, 2048), p.heads), pgrid = dg_sparse_persistent_grid(p);
	int rc = -1;
	switch (ver) {
	case 1:
		rc = dg_launch(op, dg_attn_fa2_kernel<D, true, PR>, grid, 128, dg_fa2_cfg<D>::SMEM, p, st);
		break;
	case 2:
		rc = dg_launch(op, dg_lab_sm90_kernel<D, 2, false, false, true, false, PR>, grid, 384,
			       dg_sm90_cfg<D, 2>::SMEM, p, st);
		break;
	case 3:
		rc = dg_launch(op, dg_lab_sm90_kernel<D, 2, true, false, true, false, PR>, grid, 384,
			       dg_sm90_cfg<D, 2>::SMEM, p, st);
		break;
	case 4:
		rc = dg_launch(op, dg_lab_sm90_kernel<D, 2, true, true, true, false, PR>, grid, 384,
			       dg_sm90_cfg<D, 2>::SMEM, p, st);
		break;
	case 5: {
		constexpr int S = D == 128 ? 3 : 4;
		rc = dg_launch(op, dg_lab_sm90_kernel<D, S, true, true, true, false, PR>, grid, 384,
			       dg_sm90_cfg<D, S>::SMEM, p, st);
		break;
	}
	case 6:
		rc = dg_launch(op, dg_lab_sm90_kernel<D, 2, false, false, true, true, PR>, pgrid, 384,
			       dg_sm90_cfg<D, 2>::SMEM, p, st);
		break;
	case 8: {
		constexpr int S = D == 128 ? 3 : 4;
		rc = dg_launch(op, dg_lab_sm90_kernel<D, S, true, true, true, true, PR>, pgrid, 384,
			       dg_sm90_cfg<D, S>::SMEM, p, st);
		break;
	}
	case 9: {
		CUtensorMap tmk, tmv;
		if (dg_tile_map(&tmk, p.k, p.heads, p.n, D, 1, "sparse_fwd v9") ||
		    dg_tile_map(&tmv, p.v, p.heads, p.n, D, 1, "sparse_fwd v9"))
			return -1;
		rc = dg_launch_args(op, sparse_tma_kernel<D, PR>, pgrid, 384, dg_sm90_cfg<D, 2>::SMEM, st, p, tmk, tmv);
		break;
	}
	case 10:
		rc = dg_launch(op, sparse_body_kernel<D, PR, DG_GATHER_LEAN, false>, pgrid, 384, dg_sm90_cfg<D, 2>::SMEM, p,
			       st);
		break;
	case 11:
		rc = dg_launch(op, sparse_body_kernel<D, PR, DG_GATHER_SHFL, true>, pgrid, 384, dg_sm90_cfg<D, 2>::SMEM, p,
			       st);
		break;
	case 12:
		rc = dg_launch(op, sparse_body_kernel<D, PR, DG_GATHER_LEAN, true>, pgrid, 384, dg_sm90_cfg<D, 2>::SMEM, p,
			       st);
		break;
	case 13:
		rc = dg_launch(op, sparse_body_kernel<D, PR, DG_GATHER_SHFL, false, true>, pgrid, 384,
			       dg_sm90_cfg<D, 2>::SMEM, p, st);
		break;
	case 14:
		rc = dg_launch(op, sparse_body_kernel<D, PR, DG_GATHER_SHFL, true, true>, pgrid, 384,
			       dg_sm90_cfg<D, 2>::SMEM, p, st);
		break;
	case 15:
		rc = dg_launch(op, sparse_body_kernel<D, PR, DG_GATHER_SHFL, false, false, DG_EPI_STAGED>, pgrid, 384,
			       dg_lab_sm90_cfg<D, 2>::SMEM_STAGED, p, st);
		break;
	case 16:
		rc = dg_launch(op, sparse_body_kernel<D, PR, DG_GATHER_SHFL, true, false, DG_EPI_STAGED>, pgrid, 384,
			       dg_lab_sm90_cfg<D, 2>::SMEM_STAGED, p, st);
		break;
	case 17:
		rc = dg_launch(op, sparse_body_kernel<D, PR, DG_GATHER_SHFL, false, false, DG_EPI_PREFETCH>, pgrid, 384,
			       dg_lab_sm90_cfg<D, 2>::SMEM_STAGED, p, st);
		break;
	case 18:
		rc = dg_launch(op, sparse_body_kernel<D, PR, DG_GATHER_SHFL, true, false, DG_EPI_PREFETCH>, pgrid, 384,
			       dg_lab_sm90_cfg<D, 2>::SMEM_STAGED, p, st);
		break;
	}
	if (rc)
		return rc;
	return dg_sparse_small_launch<D>(p, st);
}

/* p checked and filled: version (not the promoted one) of the tensor-core kernel, then the small groups */
static int sparse_version(int version, const dg_attn_params &p, int d, int precise, dg_stream stream)
{
	if (version < 1 || version > SPARSE_NVER) {
		fprintf(stderr, "sparse_fwd: no version %d (1..%d)\n", version, SPARSE_NVER);
		return -1;
	}
	cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
	if (precise)
		return d == 128 ? sparse_run<128, true>(version, p, st) : sparse_run<64, true>(version, p, st);
	return d == 128 ? sparse_run<128, false>(version, p, st) : sparse_run<64, false>(version, p, st);
}

extern "C" int dg_sparse_fwd_v(int version, const uint16_t *q, const uint16_t *k, const uint16_t *v, int heads, int n,
			       int d, const int32_t *perm, const int32_t *goff, int ngroups, const int64_t *soff,
			       const int32_t *sidx, const float *residual, const float *lse_ref, float *o, float *mass,
			       int precise, dg_stream stream)
{
	if (version == 0 || version == DG_SPARSE_FWD_PROMOTED)
		return dg_sparse_fwd(q, k, v, heads, n, d, perm, goff, ngroups, soff, sidx, residual, lse_ref, o, mass,
				     precise, stream);
	dg_attn_params p;
	if (dg_sparse_fwd_params(p, q, k, v, heads, n, d, perm, goff, ngroups, soff, sidx, residual, lse_ref, o, mass))
		return -1;
	return sparse_version(version, p, d, precise, stream);
}

extern "C" int dg_sparse_fwd_heads_v(int version, const uint16_t *q, const uint16_t *k, const uint16_t *v, int heads,
				     int n, int d, const dg_sparse_head *tab, int ngroups, uint16_t *o16, int ldo,
				     int precise, dg_stream stream)
{
	if (version == 0 || version == DG_SPARSE_FWD_PROMOTED)
		return dg_sparse_fwd_heads(q, k, v, 0, heads, n, d, tab, ngroups, o16, ldo, precise, stream);
	dg_attn_params p;
	if (dg_sparse_heads_params(p, q, k, v, 0, heads, n, d, tab, ngroups, o16, ldo))
		return -1;
	if (p.residual_dtype != DG_RES_F32) {
		fprintf(stderr, "sparse_fwd_heads: version %d takes fp32 residuals only\n", version);
		return -1;
	}
	return sparse_version(version, p, d, precise, stream);
}
