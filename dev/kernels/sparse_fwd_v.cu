/*
 * sparse_fwd_v.cu: the numbered versions of gather-KV sparse attention (dg_sparse_fwd_v,
 * dsgap_kernels_dev.h). The tensor-core kernel differs between versions: v1 is attn_fa2.cuh's kernel,
 * v2..v8 kernels/attn_sm90.cuh's with other template switches; v7, the promoted one, is
 * kernels/sparse_fwd.cu's launcher. The small-group kernel (kernels/sparse_small.cuh) is the same in
 * all. Arguments are checked and the parameter block filled as the promoted launcher does
 * (dg_sparse_fwd_params). Measured times: HISTORY.md.
 */
#include "dsgap_kernels_dev.h"
#include "attn_fa2.cuh"
#include "attn_sm90.cuh"
#include "sparse_small.cuh"

static const char *const sparse_names[] = {
	"v1 fa2 gather: 64-query x 64-key tiles, mma.sync, cp.async row gather",
	"v2 sm90 gather: producer warpgroup gathers rows (cp.async->mbarrier, 2 stages), wgmma 128x128",
	"v3 sm90 gather: v2 + intra-warpgroup overlap",
	"v4 sm90 gather: v3 + ping-pong consumer warpgroups",
	"v5 sm90 gather: v4 with 3 stages (4 at d=64)",
	"v6 sm90 gather: v2 + list entries prefetched a tile ahead (rows by shuffle) + persistent grid",
	"v7 sm90 gather: v4 + list prefetch + persistent grid",
	"v8 sm90 gather: v7 with 3 stages (4 at d=64)",
};
#define SPARSE_NVER ((int)(sizeof sparse_names / sizeof sparse_names[0]))

extern "C" const char *dg_sparse_fwd_name(int version)
{
	if (version == 0)
		version = DG_SPARSE_FWD_PROMOTED;
	return version >= 1 && version <= SPARSE_NVER ? sparse_names[version - 1] : NULL;
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
		rc = dg_launch(op, dg_attn_sm90_kernel<D, 2, false, false, true, false, PR>, grid, 384,
			       dg_sm90_cfg<D, 2>::SMEM, p, st);
		break;
	case 3:
		rc = dg_launch(op, dg_attn_sm90_kernel<D, 2, true, false, true, false, PR>, grid, 384,
			       dg_sm90_cfg<D, 2>::SMEM, p, st);
		break;
	case 4:
		rc = dg_launch(op, dg_attn_sm90_kernel<D, 2, true, true, true, false, PR>, grid, 384,
			       dg_sm90_cfg<D, 2>::SMEM, p, st);
		break;
	case 5: {
		constexpr int S = D == 128 ? 3 : 4;
		rc = dg_launch(op, dg_attn_sm90_kernel<D, S, true, true, true, false, PR>, grid, 384,
			       dg_sm90_cfg<D, S>::SMEM, p, st);
		break;
	}
	case 6:
		rc = dg_launch(op, dg_attn_sm90_kernel<D, 2, false, false, true, true, PR>, pgrid, 384,
			       dg_sm90_cfg<D, 2>::SMEM, p, st);
		break;
	case 8: {
		constexpr int S = D == 128 ? 3 : 4;
		rc = dg_launch(op, dg_attn_sm90_kernel<D, S, true, true, true, true, PR>, pgrid, 384,
			       dg_sm90_cfg<D, S>::SMEM, p, st);
		break;
	}
	}
	if (rc)
		return rc;
	return dg_sparse_small_launch<D>(p, st);
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
	if (version < 1 || version > SPARSE_NVER) {
		fprintf(stderr, "sparse_fwd: no version %d (1..%d)\n", version, SPARSE_NVER);
		return -1;
	}
	cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
	if (precise)
		return d == 128 ? sparse_run<128, true>(version, p, st) : sparse_run<64, true>(version, p, st);
	return d == 128 ? sparse_run<128, false>(version, p, st) : sparse_run<64, false>(version, p, st);
}
