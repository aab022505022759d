/*
 * peers.h: the metadata of the peer sparse-attention methods of docs/spec.md §3 and PISA's
 * first-order output term: the CPU twin. On the GPU backend the block peers (spargeattn, xattention,
 * pisa) score on the device, bit for bit these scores (dg_peer_block_*), and select blocks on the
 * device (kernels/peer_take.cu, byte for byte dg_peer_take); svg2's k-means, cluster scores and
 * cluster selection run on the device (dg_peer_svg2_clusters, dg_peer_state_slot; only the clusters'
 * sizes come to the host); ditfastattn's window lists are made on the device (dg_peer_window_width).
 * Radial's and STA's masks depend on the shape alone: computed here on the host once per (mask,
 * knob, n, grid, text, rho) per process (the last 8 kept; later units get a copy; the GPU backend
 * keeps its last 4 on the device). PISA's
 * first-order term runs on the device too (kernels/pisa_first_order.cu, to fp32 accumulation level). Each peer is a preset of
 * policy.h; what is replayed follows `reference/mcsparse-and-peers.md` §2 (cited per method).
 * Every peer reports its effective density like every other policy (computed pairs / n^2).
 *
 *   svg2 (§2.2)        group=kmeans score=centroid: k-means of the queries (qc=100 clusters) and of
 *                      the keys (kc=100), Euclidean, 50 Lloyd iterations at the first sparse step
 *                      then 2 per step warm-started from the previous step's centroids (the run's
 *                      state); centroid scores s*Cq.Ck, softmax over key clusters weighted by their
 *                      size; per query cluster the shortest prefix reaching p = 0.9 (the first
 *                      cluster above p included), at least ceil(minkc = 0.1 * kc) key clusters.
 *                      Variable-size groups and key clusters. budget=topk: clusters until rho*n keys.
 *                      Defaults: the Wan T2V script (QC = KC = 100). Deviation: centroids start at
 *                      evenly spaced tokens (deterministic) instead of random ones.
 *   spargeattn (§2.4)  score=sparge, stage 1: mean-pooled 128-query and 128-key blocks, K smoothed
 *                      (mean over tokens subtracted), self-similarity of a block = mean pairwise
 *                      cosine; compressed attention softmax(s*qbar.kbar) with K blocks below
 *                      theta = 0.6 excluded; per query block the blocks until the CDF reaches
 *                      tau = 0.98 (budget=topp:0.98; topk: rho*n keys); blocks whose Q or K
 *                      self-similarity is below theta always kept. Defaults: meansim (0.6, 0.98).
 *                      Deviations: K blocks of 128 (the code's SM90 layout is Q 64 x K 128, SM80
 *                      Q 128 x K 64; ours is Q 128 x K 128, the harness's block); the in-kernel
 *                      stage-2 PV skip is not replayed (a kernel-level approximation).
 *   xattention (§2.5)  score=antidiag: stride S = 8, the sum of each SxS sub-tile's antidiagonal
 *                      (q rows reversed), scaled by 1/(sqrt(d) S), softmax over the reduced row,
 *                      summed into 128x128 blocks; blocks until the cumulative score reaches
 *                      tau = 0.9 (budget=topp:0.9; topk: rho*n keys). n not a multiple of S: the
 *                      last stride is zero-padded, as the reference pads.
 *   radial (§2.6)      mask=radial: the static O(n log n) mask of radial_attn/attn_mask.py for
 *                      Wan: frame pairs at distance 0 dense, 1 a band of tokens_per_frame/2, key
 *                      frame 0 a sink; farther, a band of max(2^bitlen(tpf)/2^g * decay, 128)
 *                      (g = bitlen(dist)) kept only when dist mod (128/len) = 0; each frame pair
 *                      shrunk to 128x128 blocks (shrinkMaskStrict: a block is kept when more than
 *                      0.6 of its non-empty columns are more than 1/3 dense); text rows and
 *                      columns dense. decay = 1 (get_window_width's default).
 *   sta (§2.7)         mask=sta: tiles of 6x8x8 tokens (THW); each query tile attends the tiles of
 *                      a window=3 (per axis) window of whole tiles, its centre clamped inside the
 *                      tile grid; text rows and columns dense.
 *   ditfastattn (§2.9) mask=window residual=cached refresh=anchor: the 1D window (-64, 64) of
 *                      WA-RS per query, with R = FA(full) - FA(window) made at the anchor and
 *                      added on later steps. Deviation: one method for every step and layer (the
 *                      paper's greedy per-layer plan over calibration prompts is not replayed).
 *   chipmunk (§2.11)   no peer code: group=voxel (4x6x8 = 192), kv=token, score=exact (the column
 *                      sums of the probabilities per voxel group), topk, residual=cached (the
 *                      cached delta), refresh=anchor. Deviations: the anchor's own LSE instead of
 *                      the previous full step's, no 1% random keys, counts as the harness's top-k.
 *   pisa (§2.12)       approx=pisa: 64-query blocks, 64-key blocks, top blocks by s*qbar.kbar until
 *                      rho*n keys (the paper's default density 0.1; --density drives it); exact
 *                      attention on them, and for every other block c the first-order expansion
 *                      exp(s q.k_j) ~ w_c (1 + s q.(k_j - kbar_c)), w_c = exp(s q.kbar_c):
 *                      numerator += w_c (sum_{j in c} v_j + s H_c^T q), H_c = sum_j (k_j - kbar_c)
 *                      v_j^T, denominator += w_c |c|. The paper's per-block expansion; its Triton
 *                      code uses one mean weight and H summed over all blocks, a cruder form.
 *                      Density counts the exact pairs; the approximation costs n * blocks * d^2.
 *   skipsoftmax        score=runmax, Skip-Softmax (BLASST, arXiv 2512.12087; TensorRT-LLM, ModelOpt,
 *   (BLASST)           vLLM, SGLang): FlashAttention's loop over 128-key tiles in ascending key order
 *                      (tile 0 first), per 128-query tile; per row the running maximum m of the
 *                      scaled scores s/sqrt(d) over the earlier tiles; a tile is skipped (no exp, no
 *                      P.V) when every row of the query tile has m - (the row's max in the tile) >
 *                      threshold, i.e. exp(tile max - m) < exp(-threshold). Its gap, the tile's
 *                      minimum over the rows of that difference (-inf for tile 0), is the score:
 *                      the tiles with gap <= threshold are kept. A skipped tile never raises m (its
 *                      maximum is below m), so the running maxima do not depend on the skips and
 *                      the output is exactly sparse attention over the kept tiles' keys: what the
 *                      backends run. threshold= (natural-log units) defaults to ln(n): TensorRT-LLM's
 *                      lambda = scale factor / sequence length with scale factor 1 (threshold =
 *                      ln(n / scale factor)). QK^T is computed for every tile (the skip is decided
 *                      on its scores): density counts the tiles whose P.V is computed; the scoring
 *                      is a dense QK^T (n^2 d) on top, on both backends.
 *
 * budget=matched (docs/spec.md §3.6): each peer's own knob is set per unit so that its computed
 * density (pairs / n^2, from its own metadata: no dense pass) is the run's rho, as close as the knob
 * allows; deterministic, and the same on both backends (both run dg_peer_take on the same scores).
 *   svg2, spargeattn, xattention: the top-p mass P, bisected (DG_PEER_MATCH_STEPS halvings of
 *                      [2^-30, 1]; density nondecreasing in P); the closest of the two brackets.
 *                      svg2: where its ceil(minkc * kc) clusters alone are more than
 *                      DG_PEER_MATCH_TOL above rho (unequal clusters at 32760 tokens: 0.42 at
 *                      rho 0.15), that minimum is lowered to the largest count whose fewest clusters
 *                      fit rho (at least 1), then P bisected (a deviation: SVG2 never goes below
 *                      minkc). Floor the knob cannot go below: spargeattn's always-kept blocks of
 *                      low self-similarity (theta).
 *   radial             the decay, bisected on log2(decay) in [-10, 10]; the mask depends on the
 *                      shape only, so once per (frames, tokens, text, rho) per process. Floor: the
 *                      dense frame diagonal, the half band of neighbouring frames and the frame-0 sink.
 *   sta                the window in tiles per axis, 1 .. the longest tile axis: the closest.
 *   ditfastattn        the half-width in tokens, 0 .. n (bisection on the exact count).
 *   skipsoftmax        the threshold: the tiles sorted by gap, the candidates 0 and each positive
 *                      gap (the tiles up to it kept); the density (kept pairs / n^2, sinks and the
 *                      joint text rows and keys added afterwards not counted) closest to rho, ties to
 *                      the lower threshold. Exact, no bisection; per unit (call and head). Floor:
 *                      the tiles with gap <= 0 (key tile 0 and every tile that raises a running max).
 *   chipmunk, pisa     top-k methods: rho is their knob (budget=topk).
 * A density the knob cannot bring within DG_PEER_MATCH_TOL of rho is not reached: the closest is
 * run and replay reports it (a warning, run.json's unreached_densities).
 */
#ifndef DG_PEERS_H
#define DG_PEERS_H

#include "dsgap_budget.h" /* DG_PEER_MATCH_TOL */
#include "policy/groups.h"
#include "policy/policy.h"
#include "policy/select.h"

#define DG_PEER_MATCH_STEPS 30  /* bisection halvings of budget=matched */

typedef struct dg_peer_state dg_peer_state; /* carried from step to step (svg2's centroids) */

void dg_peer_state_free(dg_peer_state *s);

/*
 * The metadata of a peer policy p (dg_policy_is_peer) on one unit: q, k (n, d), a token grid
 * (frames, height, width) after text text-prefix tokens, budget b (rho, topp, sinks). Writes the
 * query groups g and the key lists sel. *state: NULL at the first step, then the run's (freed
 * with dg_peer_state_free). Joint attention (text > 0, docs/spec.md §3.7): text queries' lists
 * are every key and every other list holds the text keys (dg_joint_split, dg_joint_selection; PISA:
 * the text rounded up to whole blocks of its size). Returns 0, or -1 after reporting (a grid that
 * does not match n).
 */
int dg_peer_metadata(const float *q, const float *k, int n, int d, const dg_policy *p,
		     const dg_budget *b, const int grid[3], int text, dg_peer_state **state,
		     dg_groups *g, dg_selection *sel);

/*
 * A static mask's identity: radial's and STA's metadata depend on the shape and the knobs alone
 * (never on Q or K), so dg_peer_metadata memoises them per process by this key, and the GPU backend
 * keeps its device copies by it. dg_peer_static_key fills *key and returns true for such a p
 * (grid and text as dg_peer_metadata's), false for every other policy.
 */
typedef struct {
	int mask, n, text, grid[3], window;
	bool matched;
	double decay, rho; /* rho only under budget=matched (else 0) */
} dg_peer_mask_key;
bool dg_peer_static_key(const dg_policy *p, const dg_budget *b, int n, const int grid[3], int text,
			dg_peer_mask_key *key);
bool dg_peer_mask_key_eq(const dg_peer_mask_key *a, const dg_peer_mask_key *b);

/*
 * The parts each group keeps, take (ngroups, P) 0/1, from scores (ngroups, P) of key parts with psize
 * keys each, psink of them in the sinks, and query groups of gsize queries: a score of +INFINITY is
 * a forced keep (kept, not ranked, not in the mass). topk: the best parts until they hold
 * dg_topk_count(rho, n) keys; topp: the shortest prefix whose mass before its last part is below p
 * of the total; ties by lower index. At least min_parts parts are kept (svg2's minimum cluster
 * ratio). budget=matched on a top-p peer p: the top-p mass bisected (see above) on the computed
 * density of the parts kept plus the sinks. Part-level work only (ngroups x P), every scored peer's
 * selection on the CPU backend and the reference of the GPU's (dg_peer_take_dev): a key list is the
 * kept parts' keys plus the sinks, ascending.
 */
void dg_peer_take(const float *scores, int ngroups, const int *gsize, int P, const int *psize, const int *psink,
		  int n, const dg_policy *p, const dg_budget *b, int min_parts, unsigned char *take);

/*
 * The block peers (spargeattn, xattention, pisa, skipsoftmax): raster blocks of bs queries scored against raster
 * blocks of bs keys, in two halves that the GPU backend makes on the device (kernels/peer_scores.cu
 * dg_peer_scores, kernels/peer_take.cu dg_peer_take_dev), bit for bit these (but xattention's scores
 * in the GPU's fast P.V mode: a tensor-core GEMM's reduced logits, within fp32 accumulation).
 *   dg_peer_block_size     bs (128, pisa's block), or 0 for a peer that is not a block peer;
 *   dg_peer_block_scores   the scores (G, G), G = ceil(n/bs), bit for bit the device's: fp32 block
 *                          means (sums in token order, then / count), logits as fmaf chains in
 *                          component order times the scale, self-similarities in double in token
 *                          and component order, softmax with a polynomial exp (no libm) and its sum
 *                          in double over 32 stripes (j % 32) added in stripe order;
 *                          xattention's block sums over reduced rows then columns in order;
 *                          skipsoftmax's gaps (above) from an fp32 GEMM (the device's: bf16 inputs,
 *                          fp32 tensor-core accumulation, dg_skip_gaps; equal within that rounding);
 *   dg_peer_block_take     the kept blocks take (G, G) of the selection (dg_peer_take; skipsoftmax:
 *                          dg_peer_skip_take at dg_peer_skip_threshold);
 *   dg_peer_block_groups   the final query groups g (raster, split at the text; caller frees) with
 *                          each group's score row in *row (malloc'd; -1: a text group, every key),
 *                          and returns the keys [0, forced) every video group holds (joint: text or
 *                          pisa's text rounded up to whole blocks; 0 without text). A video group's
 *                          keys: [0, forced), the sinks and the keys of the blocks its row takes.
 * dg_peer_metadata of a block peer is dg_peer_block_scores, dg_peer_block_take, and that expansion.
 */
int dg_peer_block_size(const dg_policy *p);
void dg_peer_block_scores(const float *q, const float *k, int n, int d, const dg_policy *p, float *scores);
void dg_peer_block_take(const float *scores, int n, const dg_policy *p, const dg_budget *b, unsigned char *take);
int dg_peer_block_groups(int n, const dg_policy *p, int text, dg_groups *g, int **row);

/* Skip-Softmax (score=runmax): the threshold of p on the gaps (G, G) of n tokens (budget=matched: the
 * calibrated one, above), and the kept tiles take (G, G) = gap <= threshold (a NaN gap is kept).
 * Host code for both backends (the GPU copies the G x G gaps back for it). */
double dg_peer_skip_threshold(const float *gap, int n, const dg_policy *p, const dg_budget *b);
void dg_peer_skip_take(const float *gap, int n, double threshold, unsigned char *take);

/*
 * svg2 on a backend of its own (the GPU's, kernels/peer_kmeans.cu): its clusters qc, kc on n tokens
 * and the minimum of key clusters kept; and its run state's slot for the backend's centroids: made
 * (*cold: start from evenly spaced tokens, 50 iterations) where the state is absent or was made for
 * other (qc, kc, d) or by the CPU twin; dev_free frees the slot's content with the state. The twin's
 * arithmetic: k-means assignments by fp64 dots (the device's equal but at fp64 near-ties),
 * centroids fp64 sums in token order; centroid logits and the size-weighted softmax as the block
 * peers' (fmaf chains, polynomial exp, striped sum).
 */
void dg_peer_svg2_clusters(const dg_policy *p, int n, int *qc, int *kc, int *min_parts);
void **dg_peer_state_slot(dg_peer_state **state, int qc, int kc, int d, void (*dev_free)(void *), bool *cold);

/* DiTFastAttn (mask=window): its half-width w on n tokens after text text tokens (budget=matched:
 * the calibrated one). Its groups are single queries (raster 1); query i's keys: every key for a
 * text query, else [0, text) and the keys j >= text with |i - j| <= w (the GPU backend makes these
 * lists on the device, dg_peer_window). */
int dg_peer_window_width(const dg_policy *p, const dg_budget *b, int n, int text);
/* the total length of those n lists at half-width w (the pairs they compute) */
int64_t dg_peer_window_keys(int n, int text, int w);

/*
 * PISA's output (see above): o_sp (n, d) the exact sparse output over sel and mass (n) its
 * retained mass against lse (n), the dense LSE (any per-query scale works: it cancels); block the
 * key block size the selection was made of. out (n, d) may alias o_sp.
 */
void dg_pisa_combine(const float *q, const float *k, const float *v, const float *lse, int n,
		     int d, int block, const dg_groups *g, const dg_selection *sel,
		     const float *o_sp, const float *mass, float *out);

#endif
