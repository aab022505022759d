/*
 * select.h: scoring of keys for query groups and the budget that turns scores into key lists
 * (docs/spec.md §3, switches `kv`, `score`, `budget`). CPU reference of the GPU scoring and top-k.
 *
 *   exact  s(G, j) = mean_{i in G} exp(scale q_i.k_j - LSE_i)   (needs the dense LSE)
 *   pooled the group's mean query against the keys, softmax over keys; for kv=block against
 *          mean-pooled key blocks, softmax over blocks weighted by block size
 *   kv=block scores blocks of 128 contiguous keys (exact: the sum of the block's token scores)
 *   topk   the K highest keys, K = min(n, 128 * ceil(rho * n / 128)); for kv=block the highest
 *          blocks until they hold at least K keys (the last block of a head may be short)
 *   topp   the shortest prefix (by score, descending) whose mass before the last kept item is
 *          below p of the total, its count rounded up to a multiple of 128 keys
 *   sinks  keys [lo, hi) always kept, in addition to the budget and excluded from ranking
 * Ties are broken by the lower index, so the selection is a deterministic function of the scores.
 */
#ifndef DG_SELECT_H
#define DG_SELECT_H

#include <stddef.h>
#include <stdint.h>

#include "dsgap_budget.h" /* DG_KV_BLOCK_SIZE, dg_topk_count: the budget rule the kernels share */
#include "policy/groups.h"
#include "policy/policy.h"

typedef struct {
	int ngroups;
	int64_t *off; /* (ngroups+1) */
	int *idx;     /* (off[ngroups]) key indices, ascending within each group */
} dg_selection;

typedef struct {
	dg_kv_kind kv;
	dg_budget_kind budget;
	double rho;  /* topk density */
	double topp; /* topp mass */
	int sink_lo, sink_hi;
} dg_budget;

void dg_selection_free(dg_selection *s);

/* The sum (in double) of the k largest of x[0..n) (all of them for k >= n): the mass a top-k
 * selection of a probability row keeps, without listing the keys. O(n), no scratch. */
double dg_topk_sum(const float *x, int n, int k);

/*
 * Select from one score row: score has n entries (kv=token) or ceil(n/128) (kv=block). Writes the
 * kept key indices ascending to out (capacity n) and returns their count. work: scratch of n
 * (index, score) pairs, see dg_select_work_size.
 */
int dg_select_row(const float *score, int n, const dg_budget *b, int *out, void *work);
size_t dg_select_work_size(int n);

/* Select for every group from a score matrix (ngroups, cols), cols as for dg_select_row. */
void dg_select_groups(dg_selection *sel, const float *scores, int ngroups, int n, const dg_budget *b);

/* Exact scores of several groupings in one pass over the probabilities, and/or a callback for
 * every full probability row (the per-query oracle). */
typedef struct {
	const dg_groups *groups;
	float *scores; /* out: (ngroups, n) mean probability of each key over the group */
} dg_score_acc;
typedef void (*dg_prob_row_fn)(void *ctx, int query, const float *p /* (n) */);
void dg_scores_exact(const float *q, const float *k, const float *lse, int n, int d,
		     dg_score_acc *acc, int nacc, dg_prob_row_fn fn, void *ctx);

/* Per-query selections (group=query, the oracle) under nb budgets, made row by row as the exact
 * pass streams the probabilities: pass dg_query_select_row with the context to dg_scores_exact,
 * then finish into sel[nb] (n groups of one query each), which frees the context. Under kv=block
 * a row is ranked by its block sums. */
typedef struct dg_query_select dg_query_select;
dg_query_select *dg_query_select_new(int n, const dg_budget *const *budgets, int nb);
void dg_query_select_row(void *qs, int query, const float *p);
void dg_query_select_finish(dg_query_select *qs, dg_selection *sel);

/*
 * Joint attention (docs/spec.md §3.7): the first `text` of the n tokens are text. On a selection
 * over groups g whose groups are all text queries or all video queries (g NULL: group r is query
 * r, the oracle's): a text group's list becomes every key (its rows dense), a video group's gets
 * the text keys [0, text) added (with align > 1: [0, text rounded up to a multiple of align), for
 * block methods that must keep whole key blocks). No-op for text = 0.
 */
void dg_joint_selection(const dg_groups *g, dg_selection *sel, int n, int text, int align);
/* The budget b of a selection made under joint attention: the text keys [0, text) outside the
 * ranking, as sinks are (the sink range becomes [0, max(text, sink_hi)) where the sinks start
 * within the text or there are none), so that a video list holds the text keys on top of its
 * budget and a top-k list's length does not hang on the scores; both backends' select and exact
 * primitives rank under it, then dg_joint_selection / dg_joint_keys make the lists joint. Sinks
 * that start past the text stay as they are (one excluded range per list): the text keys are then
 * ranked with the rest. b itself for text = 0. */
dg_budget dg_joint_budget(const dg_budget *b, int n, int text);
/* Split every group of g that mixes text and video queries into its text part and its video part
 * (in that order, each with the group's key list), so that dg_joint_selection applies; for
 * groupings made over the whole sequence (the peers'). No-op for text = 0. */
void dg_joint_split(dg_groups *g, dg_selection *sel, int text);

/* Pooled scores: (ngroups, n) for kv=token or (ngroups, ceil(n/128)) for kv=block. */
void dg_scores_pooled(const float *q, const float *k, int n, int d, const dg_groups *g,
		      dg_kv_kind kv, float *scores);

/* Votes (fresh=groups, policy_run.h): scores (to->ngroups, cols) for the groups `to` from the key
 * lists of the groups `from` of the same n queries: key j of group b scores the fraction of b's
 * queries whose `from` group lists j; kv=block sums them per block of 128 keys, as exact scores do
 * (cols: n, or ceil(n/128)). Where `to` is `from`, a top-k of the same count gives the lists back. */
void dg_scores_vote(const dg_groups *to, const dg_groups *from, const dg_selection *lists, int n,
		    dg_kv_kind kv, float *scores);

/* Block scores from token scores: (ngroups, n) -> (ngroups, ceil(n/128)) sums. */
void dg_scores_to_blocks(const float *token_scores, int ngroups, int n, float *block_scores);

#endif
