/*
 * dsgap_kernels.h: the C interface of dsgap's CUDA kernels (one op per .cu in kernels/, each
 * behind an extern "C" launcher declared here; one implementation per op, the promoted one: its
 * earlier versions live in dev/kernels/). Nothing C++ crosses this line. Every GPU op has a CPU
 * twin in src/ with the same semantics; tests/ compare the two (docs/spec.md §9).
 *
 * Conventions, for every launcher unless its comment says otherwise:
 *   device   the kernels are built for sm_90a only (H100/H200); all pointers are device memory
 *            except where a comment says host;
 *   dtypes   bf16 tensors are uint16_t words on the device (cuda_bf16 bit pattern), fp32
 *            accumulate; head_dim d is 64 or 128; rows of length d contiguous;
 *   streams  asynchronous on `stream` (NULL: the legacy default stream): inputs must stay valid and
 *            outputs are ready only once the stream reaches the launch; scratch, where an op needs
 *            it, is stream-ordered (cudaMallocAsync / cudaFreeAsync on `stream`);
 *   errors   0, or -1 after printing one line on stderr for an invalid argument, a failed launch
 *            or a failed allocation. Faults inside a kernel surface at the next synchronisation,
 *            not here. Alignments stated below are requirements; those the launcher does not
 *            check are marked "unchecked".
 *
 * Query groups and key selections (shared with the CPU twin, src/policy/groups.h and
 * src/policy/select.h):
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
 * P.V precision of the attention launchers, per call (`precise`):
 *   0  P (fp32 softmax numerators) rounded to bf16 before the P.V product, as FlashAttention does:
 *      relative error of P up to 2^-8, the fast mode (closed loop, benchmarks);
 *   1  precise: P split into hi = bf16(P) and lo = bf16(P - hi), O += hi.V + lo.V (a second P.V
 *      product): P to 2^-16, V and Q.K^T exact, so the output is at fp32-accumulation level (the
 *      replay's default; its metrics agree with the fp32 CPU twin).
 * Row sums (normaliser), LSE and retained mass come from the fp32 P in both modes.
 */

/*
 * Dense attention forward: per head h, o[h] = softmax(scale * q[h] k[h]^T) v[h], scale = 1/sqrt(d).
 * q, k, v (heads, n, d) bf16, 16-byte aligned; heads 1 .. 65535, any n >= 1 (tail keys masked, tail
 * query rows guarded). o (heads, n, d) fp32 (o_f32, 8-byte aligned, unchecked) or, with o_f32
 * NULL, bf16 (o_bf16, 4-byte aligned, unchecked); lse (heads, n) fp32, the natural log of each
 * row's softmax denominator of scale*q.k, or NULL. precise: see above. Refused: NULL q/k/v, no
 * output, d not 64/128, misaligned q/k/v, a bad shape.
 */
int dg_flash_fwd(const uint16_t *q, const uint16_t *k, const uint16_t *v, int heads, int n, int d,
		 float *o_f32, uint16_t *o_bf16, float *lse, int precise, dg_stream stream);

/* Dense attention of nq queries against nk >= 1 keys per head (the DiT's self- and
 * cross-attention): q (heads, nq, d), k v (heads, nk, d) bf16; o token-major (nq, heads*d), head h
 * in columns h*d .. h*d+d-1 (the heads merged, as the output projection reads them), lse
 * (heads, nq) or NULL; otherwise as dg_flash_fwd, always the fast mode (precise = 0). */
int dg_flash_fwd_kv(const uint16_t *q, const uint16_t *k, const uint16_t *v, int heads, int nq, int nk, int d,
		    float *o_f32, uint16_t *o_bf16, float *lse, dg_stream stream);
/* The first nq query rows of dg_flash_fwd's dense attention of one head (q, k, v (n, d) bf16, nq <=
 * n): o (nq, d) fp32, lse (nq) or NULL, equal to those rows of dg_flash_fwd bit for bit (a row's
 * result does not depend on the others); precise as above. Joint attention's text rows on a unit
 * without its dense pass (backend_gpu.c). */
int dg_flash_fwd_rows(const uint16_t *q, const uint16_t *k, const uint16_t *v, int nq, int n, int d, float *o_f32,
		      float *lse, int precise, dg_stream stream);

/*
 * Gather-KV sparse attention: for each group g, the queries perm[goff[g]..] attend only to keys
 * sidx[soff[g]..] (online softmax over tiles of gathered keys). q, k, v (heads, n, d) bf16 as in
 * dg_flash_fwd; ngroups >= 1 groups per head, ngroups * heads < 2^31. Output o (heads, n, d) fp32
 * in the ORIGINAL query order (8-byte aligned). Optional (else NULL): residual (heads, n, d) fp32,
 * 8-byte aligned, added in the epilogue; lse_ref (heads, n) dense LSE, with mass (heads, n) = sum
 * over selected keys of exp(scale*q.k - lse_ref) (mass needs lse_ref).
 * Per head h the group arrays are offset by h: perm + h*n, goff + h*(ngroups+1), soff likewise;
 * soff values are absolute offsets into the one sidx array; goff values are positions in the head's
 * perm; perm and sidx values are query and key indices within the head. Queries whose position is
 * in no group are not written. Groups of any size (more than 128 queries are done in chunks of 128)
 * and empty key lists (output = residual, mass 0) are accepted; groups of at most
 * DG_SPARSE_SMALL_GROUP queries (the per-query oracle) go to a warp-per-group kernel that keeps P in
 * fp32 in both modes, unless the launch has at most DG_SPARSE_SMALL_PROMOTE of them (a few small
 * k-means clusters with long lists, where one warp each would be the launch's tail): the tensor-core
 * kernel then takes them like any other group. precise: see above.
 */
#define DG_SPARSE_SMALL_GROUP 8
#define DG_SPARSE_SMALL_PROMOTE 512
int dg_sparse_fwd(const uint16_t *q, const uint16_t *k, const uint16_t *v, int heads, int n, int d,
		  const int32_t *perm, const int32_t *goff, int ngroups, const int64_t *soff,
		  const int32_t *sidx, const float *residual, const float *lse_ref, float *o,
		  float *mass, int precise, dg_stream stream);

/*
 * Stored residuals (src/policy/cache_store.h, the CPU twin and the specification): residual_dtype
 *   DG_RES_F32   (n, d) fp32;
 *   DG_RES_BF16  (n, d) bf16 words (round to nearest even, as dg_f32_to_bf16);
 *   DG_RES_FP8   (n, d) e4m3 bytes, then at byte offset dg_res_fp8_scales(n, d) (n*d rounded up to a
 *                multiple of 16) n fp32 row scales 2^e: value = e4m3(byte) * scale.
 * A store of several heads: each head's store follows the last, dg_res_bytes(dtype, n, d) apart.
 */
#define DG_RES_F32 0
#define DG_RES_BF16 1
#define DG_RES_FP8 2
#ifdef __CUDACC__
#define DG_RES_HD __host__ __device__
#else
#define DG_RES_HD
#endif
static inline DG_RES_HD uint64_t dg_res_fp8_scales(int64_t n, int d) { return ((uint64_t)n * d + 15) / 16 * 16; }
static inline DG_RES_HD uint64_t dg_res_bytes(int dtype, int64_t n, int d)
{
	return dtype == DG_RES_BF16 ? (uint64_t)n * d * 2
	       : dtype == DG_RES_FP8 ? dg_res_fp8_scales(n, d) + (uint64_t)n * 4 : (uint64_t)n * d * 4;
}

/* dg_sparse_fwd with the residual stored as residual_dtype says (above; the epilogue reads it in that
 * dtype and adds its fp32 value; DG_RES_F32 is dg_sparse_fwd itself). residual 8-byte aligned. */
int dg_sparse_fwd_rq(const uint16_t *q, const uint16_t *k, const uint16_t *v, int heads, int n, int d,
		     const int32_t *perm, const int32_t *goff, int ngroups, const int64_t *soff,
		     const int32_t *sidx, const void *residual, int residual_dtype, const float *lse_ref,
		     float *o, float *mass, int precise, dg_stream stream);

/* One head's groups, key lists and residual ((n, d) stored as residual_dtype says, or NULL), where
 * they live apart from the other heads' (dg_sparse_fwd_heads). Device pointers; the layouts of
 * dg_sparse_fwd for one head. Every head with a residual in one launch has the same residual_dtype. */
typedef struct {
	const int32_t *perm, *goff;
	const int64_t *soff;
	const int32_t *sidx;
	const void *residual;
	int residual_dtype; /* DG_RES_F32 (0), DG_RES_BF16, DG_RES_FP8 */
} dg_sparse_head;
#define DG_SPARSE_HEADS_MAX 48

/*
 * dg_sparse_fwd of `heads` (1 .. DG_SPARSE_HEADS_MAX) heads in one launch, each with its own
 * metadata and residual (tab[h], an array in host memory, passed by value: it may be reused on
 * return; every head ngroups groups; residuals 8-byte aligned): q, k, v (heads, n, d) bf16 (ldi 0),
 * or token-major as the caller keeps them, head h's row r at q[r * ldi + h * d] (ldi >= heads * d, a
 * multiple of 8: 16-byte rows); output bf16 token-major, head h's query r at o16[r * ldo + h * d]
 * (o16 4-byte aligned, ldo >= heads * d, even; the heads merged, as the DiT's output projection reads
 * them; other columns untouched); no mass. The DiT's sparse calls: one launch for a site's heads.
 */
int dg_sparse_fwd_heads(const uint16_t *q, const uint16_t *k, const uint16_t *v, int ldi, int heads, int n, int d,
			const dg_sparse_head *tab, int ngroups, uint16_t *o16, int ldo, int precise,
			dg_stream stream);

/* ---- metadata kernels (group_scores.cu, query_topk.cu, select_topk.cu, pca_group.cu,
 * pooled_scores.cu, peer_scores.cu, peer_kmeans.cu, pisa_first_order.cu, metrics.cu): one head per
 * call, q k (n, d) bf16, lse (n) fp32 natural log.
 * Selections rank by (score desc, index asc) exactly as src/policy/select.c; -0.0 ranks as +0.0.
 * Scratch comes from cudaMallocAsync on `stream` (the device's default pool) and is freed there. */

/* Exact group scores (dg_scores_exact): scores (ngroups, n) = mean over the group's queries of
 * exp(scale*q.k_j - lse_i) and/or block_scores (ngroups, ceil(n/128)) = sums over runs of 128 keys
 * (dg_scores_to_blocks); either may be NULL, not both. q, k 16-byte aligned; n >= 1, ngroups >= 1
 * groups of any size (chunks of 128 queries); every score of every group is written. No scratch. */
int dg_exact_scores(const uint16_t *q, const uint16_t *k, const float *lse, int n, int d,
		    const int32_t *perm, const int32_t *goff, int ngroups, float *scores,
		    float *block_scores, dg_stream stream);

/* Per-query oracle (group = query, kv = token, topk): for each of nk <= 8 budgets K[i] (host
 * array of key counts, e.g. dg_topk_count(rho, n)), sidx[i] (host array of device pointers) gets
 * (n, dg_query_topk_row(n, K[i], sink_lo, sink_hi)) int32: row q holds its kept keys ascending =
 * sinks [sink_lo, sink_hi) plus the K[i] most probable other keys (ties: lower index). Streamed
 * over blocks of query rows (scratch: rows x n fp32). */
int dg_query_topk(const uint16_t *q, const uint16_t *k, const float *lse, int n, int d, int nk,
		  const int *K, int sink_lo, int sink_hi, int32_t *const *sidx, dg_stream stream);
int dg_query_topk_row(int n, int K, int sink_lo, int sink_hi);
/* The exact probabilities the oracle ranks: p (rows, n) = exp(scale*q_i.k_j - lse_i) for query
 * rows row0 .. row0+rows-1 (bit-identical to those dg_query_topk uses). */
int dg_query_probs(const uint16_t *q, const uint16_t *k, const float *lse, int n, int d, int row0,
		   int rows, float *p, dg_stream stream);

/* Per-group selection from a score matrix (dg_select_groups): scores (ngroups, n) for kv = 0
 * (token) or (ngroups, ceil(n/128)) for kv = 1 (block); budget 0 = topk (rho), 1 = topp (topp);
 * sinks [sink_lo, sink_hi). Output CSR: soff (ngroups+1) int64, sidx ascending per group, block
 * selections expanded to key indices; sidx has room for sidx_cap entries (dg_select_keys_cap gives
 * the worst case; entries past it are not written, soff[ngroups] still tells the total; token topk,
 * whose total is known up front, refuses a short sidx with -1 instead). */
int dg_select_keys(const float *scores, int ngroups, int n, int kv, int budget, double rho,
		   double topp, int sink_lo, int sink_hi, int64_t *soff, int32_t *sidx,
		   int64_t sidx_cap, dg_stream stream);
int64_t dg_select_keys_cap(int ngroups, int n, int kv, int budget, double rho, int sink_lo,
			   int sink_hi);
/* Offsets of a selection with the same count per group: soff (ngroups+1) int64 = g * cnt (the
 * per-query oracle's rows, token top-k); device-side, so the host stages nothing. */
int dg_fixed_offsets(int64_t *soff, int ngroups, int64_t cnt, dg_stream stream);

/* PCA grouping, MC-Sparse's Fast PDDP (dg_groups_build with DG_GROUP_PCA) of each of `heads`
 * heads at once: q (heads, n, d) -> perm (heads, n) and goff (ceil(n/128)+1), the leaves' offsets,
 * exactly 128 each (the last short), the same for every head. 1 <= n < 2^19, heads 1 .. 65535 (and
 * the sort key's bits: node | projection | query | head within 64). The level plan is built on the
 * host and copied from pageable memory (the call returns once it is staged). */
int dg_pca_groups(const uint16_t *q, int heads, int n, int d, int32_t *perm, int32_t *goff, dg_stream stream);

/* Pooled scores (dg_scores_pooled): the group's mean query against the keys (kv = 0, scores
 * (ngroups, n), softmax over keys) or against mean-pooled 128-key blocks (kv = 1, scores
 * (ngroups, ceil(n/128)), softmax over blocks of logit + log(block size)). */
int dg_pooled_scores(const uint16_t *q, const uint16_t *k, int n, int d, const int32_t *perm,
		     const int32_t *goff, int ngroups, int kv, float *scores, dg_stream stream);

/* Block peers' scores (peer_scores.cu), bit for bit the CPU twin's (peers.c dg_peer_block_scores) but
 * xattention's in fast mode (below):
 * scores (G, G), G = ceil(n/bs), of raster blocks of bs queries against raster blocks of bs keys:
 *   DG_PEER_SPARGE    spargeattn (bs 128): softmax over key blocks of the mean-pooled logits, key
 *                     blocks of self-similarity below theta -INF there, then +INF (always kept) where
 *                     the query or key block's self-similarity is below theta;
 *   DG_PEER_ANTIDIAG  xattention (bs 128): stride `stride`, the softmax of the antidiagonal reduced
 *                     rows summed into blocks (scratch: ceil(n/stride)^2 fp32); fast (the closed loop's
 *                     P.V mode): the reduced logits by a tensor-core GEMM (cuBLASLt, bf16 products, fp32
 *                     accumulation; scratch 2 n d bf16 more), as XAttention computes them: within fp32
 *                     accumulation of the twin's, not bit for bit; fast 0: bit for bit;
 *   DG_PEER_POOLED    pisa (bs = its block): scale * qbar . kbar, no softmax. */
#define DG_PEER_SPARGE 0
#define DG_PEER_ANTIDIAG 1
#define DG_PEER_POOLED 2
int dg_peer_scores(const uint16_t *q, const uint16_t *k, int n, int d, int kind, int bs, int stride,
		   double theta, int fast, float *scores, dg_stream stream);
/* A peer's key lists as bitmaps (the keys=bitmap layout below) from the key parts each score row keeps,
 * take (rows, nparts) bytes: key j's part is pmap[part[j]] (part (n) svg2's key cluster labels, pmap
 * (clusters) a label's column of take), part[j] (pmap NULL) or, part NULL, its block j / bs
 * (nparts = ceil(n/bs)); group g gets every key if row[g] < 0, else the keys below
 * `forced`, the sinks [sink_lo, sink_hi) and the keys of the parts that row row[g] keeps; bits
 * (ngroups, (n+31)/32), soff (ngroups+1) int64 their counts' prefix sums. */
int dg_peer_expand(const uint8_t *take, int nparts, int bs, const int32_t *part, const int32_t *pmap, const int32_t *row,
		   int ngroups, int n, int sink_lo, int sink_hi, int forced, uint32_t *bits, int64_t *soff, dg_stream stream);
/* The scored peers' part selection (peer_take.cu), byte for byte peers.c's dg_peer_take: take
 * (ngroups, P) 0/1 from scores (ngroups, P), +INFINITY a forced part; the parts' sizes psize and sink
 * counts psink (P) and the query groups' sizes gsize (ngroups), or, psize NULL, the raster blocks of
 * bs of n tokens for both (ngroups = P = ceil(n/bs); sinks [sink_lo, sink_hi)). topk: ranked parts
 * until K keys (dg_topk_count); else the top-p mass topp, bisected when matched (steps halvings) on
 * the computed density against rho; at least min_parts. P <= DG_PEER_TAKE_MAX_P. */
#define DG_PEER_TAKE_MAX_P 8192
int dg_peer_take_dev(const float *scores, int ngroups, int P, const int32_t *gsize, const int32_t *psize,
		     const int32_t *psink, int bs, int n, int topk, int K, double topp, int matched, double rho, int steps,
		     int sink_lo, int sink_hi, int min_parts, uint8_t *take, dg_stream stream);
/* svg2's cluster scores (peers.c svg2, bit for bit): scores (G, P) = the softmax over key clusters,
 * weighted by psize (P, the clusters' sizes), of scale * cq[qkeep[r]] . ck[kkeep[c]] (centroids
 * (.., d) fp32, qkeep (G), kkeep (P) the kept (non-empty) clusters). */
int dg_peer_svg2_scores(const float *cq, const int32_t *qkeep, int G, const float *ck, const int32_t *kkeep,
			int P, const double *psize, int d, float *scores, dg_stream stream);
/* svg2's k-means of x (n, d) bf16 into c (kc, d) fp32 (in and out; init: first set to the evenly
 * spaced rows a n / kc), `iters` Lloyd iterations as peers.c svg2_kmeans (assignments by fp64 dots,
 * ties to the lower cluster; centroids fp64 sums in token order, an empty one kept); out: labels (n)
 * the last assignment, perm (n) the tokens ordered by (cluster, j >= text, j) and cnt (2 kc) int32
 * the size of each (cluster, side) run of it (text = 0: every token on side 1). iters >= 1. */
int dg_peer_kmeans(const uint16_t *x, int n, int d, float *c, int kc, int iters, int init, int text,
		   int32_t *labels, int32_t *perm, int32_t *cnt, dg_stream stream);
/* PISA's first-order term (peers.c dg_pisa_combine, to fp32 accumulation level, not bit for bit):
 * out (n, d) fp32 = (mass o_sp + sum over the key blocks of bs keys the query's group did not select
 * of w (vsum_c + s H_c^T q)) / (mass + sum of w |c|), w = exp(s q.kbar_c - lse); groups perm/goff of at
 * most bs queries each (the raster blocks, split at the text), ngroups <= 65535; selection soff/sidx
 * (a block is selected when any of its keys is); lse (n) the dense LSE; o_sp (n, d) and mass (n)
 * the sparse output and its mass; out may alias o_sp. Scratch: P (2 + d) d fp32 + ngroups P bytes,
 * P = ceil(n/bs). */
int dg_pisa_first_order(const uint16_t *q, const uint16_t *k, const uint16_t *v, int n, int d, int bs,
			const int32_t *perm, const int32_t *goff, int ngroups, const int64_t *soff, const int32_t *sidx,
			const float *lse, const float *o_sp, const float *mass, float *out, dg_stream stream);
/* DiTFastAttn's window (peers.h dg_peer_window_width): n groups of one query; query i's keys every key
 * for i < text, else [0, text) and the keys j >= text with |i - j| <= w, ascending: soff (n+1) int64
 * and sidx (soff[n] entries, the caller's count of them: text n + sum over video rows of text + the
 * window's keys). */
int dg_peer_window(int n, int text, int w, int64_t *soff, int32_t *sidx, dg_stream stream);
/* Window attention: query i attends key j iff i < text, j < text or |i - j| <= w (0 <= text <= n,
 * w >= 0): dg_sparse_fwd on dg_peer_window's lists, without the lists, at the dense kernel's speed.
 * q, k, v (heads, n, d) bf16; o (heads, n, d) fp32 (8-byte aligned); optional residual (heads, n, d)
 * stored as residual_dtype says (8-byte aligned, added in the epilogue), lse_ref and mass as
 * dg_sparse_fwd's; precise as dg_flash_fwd. */
int dg_window_fwd(const uint16_t *q, const uint16_t *k, const uint16_t *v, int heads, int n, int d, int text, int w,
		  const void *residual, int residual_dtype, const float *lse_ref, float *o, float *mass, int precise,
		  dg_stream stream);
/* dg_window_fwd of `heads` (1 .. DG_SPARSE_HEADS_MAX) heads in one launch, as dg_sparse_fwd_heads: head
 * h's residual residual[h] (NULL, or residual NULL: none; 8-byte aligned; one residual_dtype), output
 * bf16 token-major, head h's query r at o16[r * ldo + h * d] (o16 4-byte aligned, ldo >= heads * d,
 * even; other columns untouched); no mass. Each head's output is the bf16 of dg_window_fwd's. */
int dg_window_fwd_heads(const uint16_t *q, const uint16_t *k, const uint16_t *v, int heads, int n, int d, int text,
			int w, const void *const *residual, int residual_dtype, uint16_t *o16, int ldo, int precise,
			dg_stream stream);

/* Skip-Softmax (skip_softmax.cu; src/policy/peers.h skipsoftmax), 128-query tiles against 128-key
 * tiles, G = ceil(n/128), key tiles in ascending order. q, k, v (heads, n, d) bf16.
 * dg_skip_gaps: gap (heads, G, G) fp32, natural-log units of the scaled scores: per (query tile, key
 * tile) the minimum over the tile's rows of (running max over the earlier key tiles - the row's max in
 * the tile), -inf for key tile 0 (peers.c's dg_peer_block_scores of score=runmax, from bf16 inputs).
 * dg_skip_softmax_fwd: attention that skips the exp and P.V of a tile whose gap exceeds threshold
 * (>= 0, inf: dense): o (heads, n, d) fp32 (8-byte aligned), lse (heads, n) or NULL (over the
 * computed tiles), computed (heads, G, G) bytes 1/0 or NULL; precise as dg_flash_fwd. */
int dg_skip_gaps(const uint16_t *q, const uint16_t *k, int heads, int n, int d, float *gap, dg_stream stream);
int dg_skip_softmax_fwd(const uint16_t *q, const uint16_t *k, const uint16_t *v, int heads, int n, int d,
			float threshold, float *o, float *lse, uint8_t *computed, int precise, dg_stream stream);

/* Metrics (dg_metrics_compute) of o against ref (count fp32 values each) and the retained mass
 * (nq values, or NULL: mean = p5 = 1), accumulated in double. out: 6 device doubles in the order of
 * dg_metrics: rel_l1, rel_l2, cosine, psnr (inf when identical), mass_mean, mass_p5 (gsl quantile). */
int dg_metrics_device(const float *ref, const float *o, uint64_t count, const float *mass, int nq,
		      double *out, dg_stream stream);

/* Residual bookkeeping (residual.cu): out = o_sp + r_old (r_old NULL: o_sp), r_new = o_ref - o_sp;
 * out or r_new may be NULL. */
int dg_residual_update(const float *o_ref, const float *o_sp, const float *r_old, float *out,
		       float *r_new, uint64_t count, dg_stream stream);

/* ---- joint attention (joint.cu), the twins of dg_joint_selection (src/policy/select.c) and the
 * joint groupings (src/policy/groups.c), docs/spec.md §3.7 ----
 * dg_joint_keys: a selection (soff, sidx) of ngroups groups whose first text_groups groups hold text
 * queries, the rest video queries -> soff_out (ngroups+1) int64, sidx_out: a text group's list is
 * every key [0, n), a video group's the keys [0, forced) then its own keys >= forced (ascending, no
 * duplicates); sidx_out has room for text_groups * n + (ngroups - text_groups) * forced +
 * soff[ngroups] entries (unchecked). dg_joint_perm: perm (n) = the text queries [0, text) in order,
 * then text + vperm[i] for a grouping vperm (n - text) of the video queries alone. */
int dg_joint_keys(const int64_t *soff, const int32_t *sidx, int ngroups, int n, int text_groups, int forced,
		  int64_t *soff_out, int32_t *sidx_out, dg_stream stream);
int dg_joint_perm(const int32_t *vperm, int n, int text, int32_t *perm, dg_stream stream);

/* ---- cache storage (cache_store.cu), the twins of src/policy/cache_store.c, bit for bit ----
 * dg_residual_encode_dev: r (n, d) fp32 -> store (dg_res_bytes(dtype, n, d), layout above): bf16
 * round to nearest even; fp8 e4m3 of r * 2^-e with e per row as dg_fp8_row_exp, saturating to 448.
 * dg_residual_decode_dev: the store back to r (n, d) fp32. d a multiple of 32, at most 1024. */
int dg_residual_encode_dev(const float *r, int n, int d, int dtype, void *store, dg_stream stream);
int dg_residual_decode_dev(const void *store, int n, int d, int dtype, float *r, dg_stream stream);
/* Key bitmaps (keys=bitmap): bits (ngroups, (n+31)/32) uint32, bit j%32 of word j/32 = key j kept.
 * dg_keys_to_bitmap sets them from the CSR lists (soff, sidx); dg_bitmap_to_keys writes sidx back
 * from them at the offsets soff (which the bitmaps' popcounts must match), ascending per group (a
 * prefix sum of popcounts per group). */
int dg_keys_to_bitmap(const int64_t *soff, const int32_t *sidx, int ngroups, int n, uint32_t *bits,
		      dg_stream stream);
int dg_bitmap_to_keys(const uint32_t *bits, const int64_t *soff, int ngroups, int n, int32_t *sidx,
		      dg_stream stream);

/* ---- DiT engine ops (dit_ops.cu), the twins of src/dit/wan_ops_cpu.c (semantics in
 * src/dit/wan_ops.h):
 * fp32 activations, row-major; y16/x16 (or NULL) receive a bf16 copy of the output as well; where
 * a y16 is given the fp32 y of layernorm, to_heads and from_heads may be NULL (bf16 output only). */
/* with r (else NULL): x (m, n) += r * gate (gate (n) or NULL for 1) first, written back; then
 * y (m, n) = LayerNorm of x's rows [* w + b (affine; b may be NULL)] [* (1 + scale)] [+ shift] */
int dg_dit_layernorm(float *x, const float *r, const float *gate, int m, int n, float eps, const float *w,
		     const float *b, const float *scale, const float *shift, float *y, uint16_t *y16, dg_stream stream);
/* y (heads, m, d) = x (m, heads*d) split (x fp32, or x16 bf16 where x16 is given); with norm_w
 * (heads*d) (else NULL) each row first x * rsqrt(mean(x^2) + eps) * norm_w; with cos/sin (m, d/2)
 * (else NULL) pairs (2i, 2i+1) then rotated */
int dg_dit_to_heads(const float *x, const uint16_t *x16, int m, int heads, int d, const float *norm_w, float eps,
		    const float *cos, const float *sin, float *y, uint16_t *y16, dg_stream stream);
/* y (m, heads*d) = x (heads, m, d) merged */
int dg_dit_from_heads(const float *x, int m, int heads, int d, float *y, uint16_t *y16,
		      dg_stream stream);
/* x = GELU-tanh(x), in place */
int dg_dit_gelu_tanh(float *x, uint64_t n, uint16_t *x16, dg_stream stream);
/* x (m, n) += y * gate (gate (n), or NULL for 1) */
int dg_dit_add_gated(float *x, const float *y, const float *gate, int m, int n, uint16_t *x16, dg_stream stream);
/* y = bf16(x), round to nearest even */
int dg_to_bf16(const float *x, uint16_t *y, uint64_t n, dg_stream stream);
/* y (rows of cols, row stride ldy) = bf16(x (rows, cols)): a head's columns of a merged buffer */
int dg_to_bf16_rows(const float *x, int rows, int cols, uint16_t *y, int ldy, dg_stream stream);

#ifdef __cplusplus
}
#endif
#endif
