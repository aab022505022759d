/*
 * dsgap_kernels.h: the C interface of dsgap's CUDA kernels (one op per .cu in kernels/, each
 * behind an extern "C" launcher declared here). Nothing C++ crosses this line. Every GPU op has a
 * CPU twin in src/ with the same semantics; tests/ compare the two (DESIGN §9).
 *
 * Conventions: bf16 tensors are uint16_t words on the device (cuda_bf16 bit pattern); fp32
 * accumulate; head_dim 64 or 128; rows of length head_dim contiguous. All launchers are
 * asynchronous on `stream` and return 0, or -1 after printing one line for an invalid argument.
 *
 * Query groups and key selections (shared with the CPU twin, src/groups.h and src/select.h):
 *   perm    (n)            query index at each position of the grouped order
 *   goff    (ngroups+1)    group g holds positions goff[g] .. goff[g+1]-1 of perm
 *   soff    (ngroups+1)    int64: group g selected keys sidx[soff[g] .. soff[g+1]-1], ascending
 *   sidx    (soff[ngroups]) key indices
 */
#ifndef DG_KERNELS_H
#define DG_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct CUstream_st *dg_stream;

/*
 * Dense attention forward, one head per blockIdx.y slice: q,k,v (heads, n, d) bf16,
 * o (heads, n, d) bf16 or fp32 (o_f32 non-NULL selects fp32 output), lse (heads, n) fp32, natural
 * log of the softmax denominator of scale*q.k (scale = 1/sqrt(d)).
 */
int dg_flash_fwd(const uint16_t *q, const uint16_t *k, const uint16_t *v, int heads, int n, int d,
		 float *o_f32, uint16_t *o_bf16, float *lse, dg_stream stream);

/*
 * Gather-KV sparse attention: for each group g, the queries perm[goff[g]..] attend only to keys
 * sidx[soff[g]..] (online softmax over tiles of gathered keys). Output o (heads, n, d) fp32 in the
 * ORIGINAL query order. Optional: residual (heads, n, d) fp32 added in the epilogue; lse_ref
 * (heads, n) dense LSE, with mass (heads, n) = sum over selected keys of exp(scale*q.k - lse_ref).
 * Per head h the group arrays are offset by h: perm + h*n, goff + h*(ngroups+1), soff likewise,
 * sidx indexes are relative to the head's own key rows.
 */
int dg_sparse_fwd(const uint16_t *q, const uint16_t *k, const uint16_t *v, int heads, int n, int d,
		  const int32_t *perm, const int32_t *goff, int ngroups, const int64_t *soff,
		  const int32_t *sidx, const float *residual, const float *lse_ref, float *o,
		  float *mass, dg_stream stream);

#ifdef __cplusplus
}
#endif
#endif
