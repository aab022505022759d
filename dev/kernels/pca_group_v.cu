/*
 * pca_group_v.cu: the numbered versions of the PCA grouping (dg_pca_groups_v, dsgap_kernels_dev.h),
 * all on pca_group_lab.cuh's pipeline (pca_run_lab: kernels/pca_group.cuh's pca_run with the switches),
 * with another Gram-partial kernel or chunk size:
 *   v1  gram_partial below (CUDA cores, fp32 fma in row order), one block per chunk;
 *   v2  gram_partial_mma (tensor cores, X_b^T staged as bf16), one block per chunk;
 *   v3  v2 with chunks of 8 blocks accumulated in the MMA registers;
 *   v4  v2 with the rows gathered 16 at a time per thread (gram_partial_mma's batched stage);
 *   v5  v3 with v4's gather;
 *   v6  v5 with 16-byte loads: the Gram stage a row per lane (STAGE_VEC), the projections 8 lanes a
 *       row instead of a warp (the projections' fp32 sums in another order, so near-ties may split
 *       differently from v5);
 *   v7  v6 with the levels of nodes up to 16384 rows (not 4096) sorted node by node in shared memory
 *       (128 KB), so at n = 32760 only the first level's keys go through the CUB sort of all heads;
 *   v8  v7 without gram_reduce at the levels whose split nodes are one chunk of 8 blocks each (power_iter
 *       reads the partial: the same Gram matrix, one launch and 2 x 64 KB a node of traffic less);
 *   v9  v8 with node sorts only up to 4096 rows again (v6's; CUB's sort of all keys above): at the
 *       levels of 8192- and 16384-row nodes a node sort is one CTA per (node, head), too few to fill
 *       the GPU (v8's sort phase is 0.1 ms over v5's at 12 heads, and v7/v8 are slower than v6 at one
 *       head): the promoted one, kernels/pca_group.cu's launcher.
 * Measured times: docs/history.md, "Kernel versions".
 */
#include "dsgap_kernels_dev.h"
/* v2, v3 and v6 instantiate stage_xt_lab with STAGE_PAIRS or STAGE_VEC, which return before the batched
 * loop: "loop is not reachable" (#128) there, by design */
#pragma nv_diag_suppress 128
#include "pca_group_lab.cuh"

namespace {

/* v1's Gram partials on CUDA cores: partial[h][c] (D, D) = sum over the chunk's rows of x x^T, fp32 fma
 * in row order; psum[h][c] (D) = sum of x. 256 threads, BS * D * 4 bytes of dynamic shared memory. */
template <int D>
__global__ void __launch_bounds__(256) gram_partial(const uint16_t *q, const int32_t *perm, int n, Level L,
						    float *partial, float *psum)
{
	extern __shared__ float xs[]; /* (BS, D) fp32 */
	const int c = blockIdx.x, h = blockIdx.y, tid = threadIdx.x;
	q += (size_t)h * n * D;
	perm += (size_t)h * n;
	constexpr int TA = D / 16;
	const int ty = tid >> 4, tx = tid & 15;
	float acc[TA][TA], s = 0.f;
#pragma unroll
	for (int i = 0; i < TA; i++)
#pragma unroll
		for (int j = 0; j < TA; j++)
			acc[i][j] = 0.f;
	for (int b = L.cb0[c]; b < L.cb1[c]; b++) {
		const int r0 = b * BS, rows = min(BS, n - r0);
		__syncthreads(); /* the last block's rows are read */
		for (int e = tid; e < BS * D; e += 256) {
			const int r = e / D, cc = e % D;
			xs[e] = r < rows ? bf2f(q[(size_t)perm[r0 + r] * D + cc]) : 0.f;
		}
		__syncthreads();
		for (int r = 0; r < rows; r++) {
			const float *x = xs + r * D;
			float a[TA], bb[TA];
#pragma unroll
			for (int i = 0; i < TA; i++) {
				a[i] = x[ty + 16 * i];
				bb[i] = x[tx + 16 * i];
			}
#pragma unroll
			for (int i = 0; i < TA; i++)
#pragma unroll
				for (int j = 0; j < TA; j++)
					acc[i][j] = fmaf(a[i], bb[j], acc[i][j]);
		}
		if (tid < D)
			for (int r = 0; r < rows; r++)
				s += xs[r * D + tid];
	}
	const size_t slot = (size_t)h * L.nchunks + c;
	float *out = partial + slot * D * D;
#pragma unroll
	for (int i = 0; i < TA; i++)
#pragma unroll
		for (int j = 0; j < TA; j++)
			out[(ty + 16 * i) * D + tx + 16 * j] = acc[i][j];
	if (tid < D)
		psum[slot * D + tid] = s;
}

template <int D>
int run(int version, const uint16_t *q, int heads, int n, int32_t *perm, int32_t *goff, cudaStream_t st,
	float *phase_ms)
{
	const int ch = version == 3 || version == 5 ? 8 : 1;
	if (version == 1)
		return pca_run_lab<D>(gram_partial<D>, (size_t)BS * D * 4, ch, q, heads, n, perm, goff, st, phase_ms);
	if (version <= 3)
		return pca_run_lab<D>(gram_partial_mma_lab<D, STAGE_PAIRS>, 0, ch, q, heads, n, perm, goff, st, phase_ms);
	if (version == 6)
		return pca_run_lab<D, 8>(gram_partial_mma_lab<D, STAGE_VEC>, 0, 8, q, heads, n, perm, goff, st, phase_ms);
	if (version == 7)
		return pca_run_lab<D, 8, 16384>(gram_partial_mma_lab<D, STAGE_VEC>, 0, 8, q, heads, n, perm, goff, st, phase_ms);
	if (version == 8)
		return pca_run_lab<D, 8, 16384, true>(gram_partial_mma_lab<D, STAGE_VEC>, 0, 8, q, heads, n, perm, goff, st,
						  phase_ms);
	if (version == 9)
		return pca_run_lab<D, 8, 4096, true>(gram_partial_mma_lab<D, STAGE_VEC>, 0, 8, q, heads, n, perm, goff, st,
						 phase_ms);
	return pca_run_lab<D>(gram_partial_mma_lab<D, STAGE_BATCHED>, 0, ch, q, heads, n, perm, goff, st, phase_ms);
}

} // namespace

static const char *const names[] = {
	"v1: Gram partials on CUDA cores (fp32 fma in row order)",
	"v2: Gram partials with mma.sync from X^T in shared memory",
	"v3: v2 over chunks of 8 blocks per CTA",
	"v4: v2 with the rows gathered 16 at a time (loads batched ahead of the stores)",
	"v5: v3 with v4's gather",
	"v6: v5 with 16-byte loads (Gram stage a row per lane, projections 8 lanes a row)",
	"v7: v6 with node sorts in shared memory up to 16384 rows",
	"v8: v7 without the Gram reduction at levels of one-chunk nodes",
	"v9: v8 with node sorts only up to 4096 rows (v6's)",
};
#define NVERSIONS ((int)(sizeof names / sizeof names[0]))

extern "C" const char *dg_pca_groups_name(int version)
{
	if (version == 0)
		version = DG_PCA_GROUPS_PROMOTED;
	return version >= 1 && version <= NVERSIONS ? names[version - 1] : NULL;
}

static int run_version(int version, const uint16_t *q, int heads, int n, int d, int32_t *perm, int32_t *goff,
		       dg_stream stream, float *phase_ms)
{
	if (pca_check(q, heads, n, d, perm, goff))
		return -1;
	DGM_ARG(version >= 1 && version <= NVERSIONS, "pca grouping: no version %d", version);
	cudaStream_t st = (cudaStream_t)stream;
	return d == 64 ? run<64>(version, q, heads, n, perm, goff, st, phase_ms)
		       : run<128>(version, q, heads, n, perm, goff, st, phase_ms);
}

extern "C" int dg_pca_groups_v(int version, const uint16_t *q, int heads, int n, int d, int32_t *perm,
			       int32_t *goff, dg_stream stream)
{
	if (version == 0 || version == DG_PCA_GROUPS_PROMOTED)
		return dg_pca_groups(q, heads, n, d, perm, goff, stream);
	return run_version(version, q, heads, n, d, perm, goff, stream, NULL);
}

extern "C" int dg_pca_groups_phases(int version, const uint16_t *q, int heads, int n, int d, int32_t *perm,
				    int32_t *goff, float phase_ms[5], dg_stream stream)
{
	static_assert(PCA_PHASES == 5, "dsgap_kernels_dev.h: phase_ms[5]");
	return run_version(version ? version : DG_PCA_GROUPS_PROMOTED, q, heads, n, d, perm, goff, stream, phase_ms);
}
