/*
 * group_scores_v.cu: the numbered versions of the exact group scores (dg_exact_scores_v,
 * dsgap_kernels_dev.h), on kernels/group_scores.cuh's kernels and group_scores_lab.cuh's
 * group_scores_sm90_lab (kernels/' group_scores_sm90 with the switches):
 *   v1, v2  the mma.sync kernel (128x128 tiles, 8 warps) with 1 CTA per SM (group_scores_kernel_lab)
 *           and 2 (kernels/' group_scores_kernel);
 *   v3      group_scores_sm90_lab without ping-pong (the two consumer warpgroups issue independently);
 *   v4      with ping-pong (prob_of's hi + lo terms and exp2f);
 *   v5      v4 with the attention kernels' arithmetic (FAST);
 *   v6      v5 with two groups a CTA against each K tile (half the K traffic from L2): the promoted one,
 *           kernels/group_scores.cu's launcher;
 *   v7, v8  v6 with a quarter (v7) or an eighth (v8) of the exponentials on the FMA pipe (poly_ex2, PX);
 *   v9, v10 v6 with two accumulators a consumer (OVL): one group's wgmma runs under the exponentials of
 *           the other group's turn, with (v9) and without (v10) the ping-pong between the warpgroups.
 * v3 to v10 accumulate chunked groups in the token scores, so block-only calls (scores NULL) run v2.
 * Measured times: docs/history.md, "Kernel versions".
 */
#include "dsgap_kernels_dev.h"
#include "group_scores_lab.cuh"

static const char *const names[] = {
	"v1: mma.sync 128x128 tiles, 8 warps, 1 CTA/SM (171 registers)",
	"v2: as v1 with 2 CTAs/SM (128 registers)",
	"v3: S^T = K Q^T on wgmma, producer + 2 independent consumer warpgroups, row sums (sm_90a)",
	"v4: v3 with the consumer warpgroups' wgmma in turns (ping-pong)",
	"v5: v4 with one fma and ex2.approx a probability (the attention kernels' arithmetic)",
	"v6: v5 with two groups a CTA against each K tile (half the K traffic)",
	"v7: v6 with a quarter of the exponentials on the FMA pipe (a degree-7 polynomial)",
	"v8: v6 with an eighth of the exponentials on the FMA pipe",
	"v9: v6 with two accumulators a consumer (a group's wgmma under the other group's exponentials)",
	"v10: v9 without the ping-pong",
};
#define NVERSIONS ((int)(sizeof names / sizeof names[0]))

extern "C" const char *dg_exact_scores_name(int version)
{
	if (version == 0)
		version = DG_EXACT_SCORES_PROMOTED;
	return version >= 1 && version <= NVERSIONS ? names[version - 1] : NULL;
}

extern "C" int dg_exact_scores_v(int version, const uint16_t *q, const uint16_t *k, const float *lse, int n,
				 int d, const int32_t *perm, const int32_t *goff, int ngroups, float *scores,
				 float *block_scores, dg_stream stream)
{
	if (version == 0 || version == DG_EXACT_SCORES_PROMOTED)
		return dg_exact_scores(q, k, lse, n, d, perm, goff, ngroups, scores, block_scores, stream);
	GSParams p;
	if (gs_params(p, q, k, lse, n, d, perm, goff, ngroups, scores, block_scores))
		return -1;
	DGM_ARG(version >= 1 && version <= NVERSIONS, "exact group scores: no version %d", version);
	cudaStream_t st = (cudaStream_t)stream;
	if (version == 3 && scores)
		return d == 64 ? launch_sm90_lab<64, 4, false, false>(p, st) : launch_sm90_lab<128, 4, false, false>(p, st);
	if (version == 4 && scores)
		return d == 64 ? launch_sm90_lab<64, 4, true, false>(p, st) : launch_sm90_lab<128, 4, true, false>(p, st);
	if (version == 5 && scores)
		return d == 64 ? launch_sm90_lab<64, 4, true, true>(p, st) : launch_sm90_lab<128, 4, true, true>(p, st);
	if (version == 7 && scores)
		return d == 64 ? launch_sm90_lab<64, 4, true, true, 2, 4>(p, st) : launch_sm90_lab<128, 4, true, true, 2, 4>(p, st);
	if (version == 8 && scores)
		return d == 64 ? launch_sm90_lab<64, 4, true, true, 2, 8>(p, st) : launch_sm90_lab<128, 4, true, true, 2, 8>(p, st);
	if (version == 9 && scores)
		return d == 64 ? launch_sm90_lab<64, 4, true, true, 2, 0, true>(p, st)
			       : launch_sm90_lab<128, 4, true, true, 2, 0, true>(p, st);
	if (version == 10 && scores)
		return d == 64 ? launch_sm90_lab<64, 4, false, true, 2, 0, true>(p, st)
			       : launch_sm90_lab<128, 4, false, true, 2, 0, true>(p, st);
	if (version == 1)
		return d == 64 ? launch_lab<64, 1>(p, st) : launch_lab<128, 1>(p, st);
	return d == 64 ? launch<64>(p, st) : launch<128>(p, st);
}
