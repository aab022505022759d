/*
 * dsgap_kernels_dev.h: the numbered versions of dsgap's versioned kernels (dev/kernels/, the library
 * dsgapkernels_dev, built with -DDSGAP_DEV_KERNELS=ON; it links dsgapkernels). The earlier versions
 * are kept so that a new version can be developed, tested (gpu_kernels_dev, gpu_meta_dev) and timed
 * (dsgap-bench-kernels-dev) against them; their history and measured times: docs/history.md, "Kernel versions".
 *
 * Each op has dg_<op>_v(version, <the arguments of the promoted launcher>) and dg_<op>_name(version):
 *   version 1..N  the op's numbered versions; the promoted version's number (DG_<OP>_PROMOTED) runs
 *                 the promoted launcher of dsgap_kernels.h itself, so its results and times are the
 *                 production ones;
 *   version 0     the promoted launcher;
 *   other         -1 after one line on stderr.
 * name: a one-line description of the version (0: the promoted one's), NULL past the last.
 * Contracts (shapes, dtypes, alignment, streams, errors) are those of the promoted launcher in
 * dsgap_kernels.h; every attention version takes both P.V modes; every version is built for sm_90a.
 */
#ifndef DG_KERNELS_DEV_H
#define DG_KERNELS_DEV_H

#include "dsgap_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dense attention (dg_flash_fwd), versions 1..5 */
#define DG_FLASH_FWD_PROMOTED 7
int dg_flash_fwd_v(int version, const uint16_t *q, const uint16_t *k, const uint16_t *v, int heads, int n, int d,
		   float *o_f32, uint16_t *o_bf16, float *lse, int precise, dg_stream stream);
const char *dg_flash_fwd_name(int version);

/* gather-KV sparse attention (dg_sparse_fwd), versions 1..12; the small-group kernel is the same in all */
#define DG_SPARSE_FWD_PROMOTED 7
int dg_sparse_fwd_v(int version, const uint16_t *q, const uint16_t *k, const uint16_t *v, int heads, int n,
		    int d, const int32_t *perm, const int32_t *goff, int ngroups, const int64_t *soff,
		    const int32_t *sidx, const float *residual, const float *lse_ref, float *o, float *mass,
		    int precise, dg_stream stream);
const char *dg_sparse_fwd_name(int version);
/* dg_sparse_fwd_heads (the DiT's sparse call: a table of heads, bf16 token-major output) by version;
 * versions other than the promoted one take fp32 residuals only */
int dg_sparse_fwd_heads_v(int version, const uint16_t *q, const uint16_t *k, const uint16_t *v, int heads, int n,
			  int d, const dg_sparse_head *tab, int ngroups, uint16_t *o16, int ldo, int precise,
			  dg_stream stream);
/* v11 and v12's phase clock: SM clocks by phase (dg_sparse_probe_phase(k), k < DG_SPARSE_PROBE_PHASES), in
 * out[w * DG_SPARSE_PROBE_PHASES + k] for warpgroup w (0 the producer, 1 and 2 the consumers), summed
 * over the CTAs of every v11/v12 call since the last read (which zeroes them); 0 or -1 */
#define DG_SPARSE_PROBE_PHASES 12
int dg_sparse_probe_read(unsigned long long *out);
const char *dg_sparse_probe_phase(int phase);

/* exact group scores (dg_exact_scores), versions 1..10; v3, v4, v5, v7 to v10 send block-only calls (scores NULL)
 * to v2, as the promoted v6 does */
#define DG_EXACT_SCORES_PROMOTED 6
/* the version whose token scores version v's equal bit for bit (the same arithmetic in the same order), or 0 */
#define DG_EXACT_SCORES_SAME_BITS(v) ((v) == 9 || (v) == 10 ? 6 : 0)
int dg_exact_scores_v(int version, const uint16_t *q, const uint16_t *k, const float *lse, int n,
		      int d, const int32_t *perm, const int32_t *goff, int ngroups, float *scores,
		      float *block_scores, dg_stream stream);
const char *dg_exact_scores_name(int version);

/* PCA grouping (dg_pca_groups), versions 1..9 */
#define DG_PCA_GROUPS_PROMOTED 9
int dg_pca_groups_v(int version, const uint16_t *q, int heads, int n, int d, int32_t *perm, int32_t *goff,
		    dg_stream stream);
const char *dg_pca_groups_name(int version);
/* version's call (0: the promoted version, through this file's pipeline) with its device time by phase,
 * summed over the levels: phase_ms = Gram partials, their reduction, power iterations, projections,
 * sort; waits for the stream */
int dg_pca_groups_phases(int version, const uint16_t *q, int heads, int n, int d, int32_t *perm, int32_t *goff,
			 float phase_ms[5], dg_stream stream);

#ifdef __cplusplus
}
#endif
#endif
