/*
 * select.c: exact and pooled key scores for query groups, and the budget (top-k, top-p, sinks)
 * that turns a score row into a sorted key list. See select.h.
 */
#include "policy/select.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cblas.h>

#include "util/util.h"

#define BQ 128 /* query rows per pass of the exact scores */
#define BK 256 /* key columns per task */

void dg_selection_free(dg_selection *s)
{
	free(s->off);
	free(s->idx);
	memset(s, 0, sizeof *s);
}

typedef struct {
	float s;
	int i;
} item;

/* a ranks before b: higher score, then lower index (a strict total order) */
static inline int before(const item *a, const item *b)
{
	return a->s > b->s || (a->s == b->s && a->i < b->i);
}

static int cmp_rank(const void *a, const void *b)
{
	return before(a, b) ? -1 : before(b, a) ? 1 : 0;
}

/* float -> uint32 whose unsigned order is the float order (-0.0 ranks as +0.0) */
static inline uint32_t order_key(float f)
{
	union { float f; uint32_t u; } x = { .f = f == 0.0f ? 0.0f : f };
	return x.u & 0x80000000u ? ~x.u : x.u | 0x80000000u;
}

/* float i of n at base + i * stride bytes (a float array, or the scores of an item array) */
#define SCORE_AT(base, stride, i) (*(const float *)(const void *)((const char *)(base) + (size_t)(i) * (stride)))

/*
 * The order key of the k-th largest of n floats (0 < k < n) by a radix select on 11, 11 and 10 bits:
 * a histogram of every key's top digit, then one more pass that copies the keys of the k-th's bucket
 * out (into a stack buffer, or the heap when it holds more than RADIX_STACK) with the histogram of
 * their middle digit, and the last digit's histogram over those keys alone. *want: how many of the
 * floats with exactly that key belong to the k largest (every larger key does). O(n), two passes.
 */
#define RADIX_STACK 2048
static uint32_t radix_kth(const void *base, size_t stride, int n, int k, int *want)
{
	int hist[2048] = { 0 }, w = k; /* w: items still to take at or below the prefix */
	for (int i = 0; i < n; i++)
		hist[order_key(SCORE_AT(base, stride, i)) >> 21]++;
	int d1 = 2047;
	for (; d1 > 0 && hist[d1] < w; d1--)
		w -= hist[d1];
	uint32_t small[RADIX_STACK], *cand = hist[d1] <= RADIX_STACK ? small : dg_malloc((size_t)hist[d1] * 4);
	int m = 0;
	memset(hist, 0, sizeof hist);
	for (int i = 0; i < n; i++) {
		uint32_t u = order_key(SCORE_AT(base, stride, i));
		if (u >> 21 == (uint32_t)d1) {
			cand[m++] = u;
			hist[(u >> 10) & 2047]++;
		}
	}
	int d2 = 2047;
	for (; d2 > 0 && hist[d2] < w; d2--)
		w -= hist[d2];
	memset(hist, 0, 1024 * sizeof *hist);
	for (int i = 0; i < m; i++)
		if (((cand[i] >> 10) & 2047) == (uint32_t)d2)
			hist[cand[i] & 1023]++;
	int d3 = 1023;
	for (; d3 > 0 && hist[d3] < w; d3--)
		w -= hist[d3];
	if (cand != small)
		free(cand);
	*want = w;
	return (uint32_t)d1 << 21 | (uint32_t)d2 << 10 | (uint32_t)d3;
}

double dg_topk_sum(const float *x, int n, int k)
{
	double sum = 0;
	if (k >= n) {
		for (int i = 0; i < n; i++)
			sum += x[i];
		return sum;
	}
	if (k <= 0)
		return 0;
	int want;
	uint32_t t = radix_kth(x, sizeof *x, n, k, &want);
	for (int i = 0; i < n; i++) {
		uint32_t u = order_key(x[i]);
		if (u > t || (u == t && want-- > 0))
			sum += x[i];
	}
	return sum;
}

/*
 * Rearrange it[0..n) (in ascending index order) so that the k best by `before` come first, in any
 * order: the k-th largest key (radix_kth), then the items above it and the lowest-index items equal
 * to it move to the front. O(n).
 */
static void select_best(item *it, int n, int k)
{
	if (k <= 0 || k >= n)
		return;
	int want;
	uint32_t prefix = radix_kth(&it[0].s, sizeof *it, n, k, &want);
	/* threshold key = prefix; take every larger key and the first `want` equal ones */
	int j = 0, equal = 0;
	for (int i = 0; i < n; i++) {
		uint32_t u = order_key(it[i].s);
		if (u > prefix || (u == prefix && equal++ < want)) {
			item t = it[j];
			it[j++] = it[i];
			it[i] = t;
		}
	}
	DG_ASSERT(j == k);
}

size_t dg_select_work_size(int n) { return (size_t)n * (sizeof(item) + 1); }

int dg_select_row(const float *score, int n, const dg_budget *b, int *out, void *work)
{
	item *it = work;
	bool block = b->kv == DG_KV_BLOCK;
	int cols = block ? (n + DG_KV_BLOCK_SIZE - 1) / DG_KV_BLOCK_SIZE : n;
	int lo = b->sink_lo < n ? b->sink_lo : n, hi = b->sink_hi < n ? b->sink_hi : n;
	/* rankable items: tokens outside the sinks, or every block */
	int m = 0;
	double total = 0;
	for (int c = 0; c < cols; c++) {
		if (!block && c >= lo && c < hi)
			continue;
		it[m].s = score[c];
		it[m++].i = c;
		total += score[c];
	}
	int keep; /* items kept */
	if (b->budget == DG_BUDGET_TOPK && !block) {
		keep = dg_topk_count(b->rho, n);
		keep = keep < m ? keep : m;
		select_best(it, m, keep);
	} else if (b->budget == DG_BUDGET_TOPK) {
		/* the best blocks until they hold K keys (the last block may be short) */
		int keys = dg_topk_count(b->rho, n), held = 0;
		qsort(it, m, sizeof *it, cmp_rank);
		for (keep = 0; keep < m && held < keys; keep++)
			held += (it[keep].i + 1) * DG_KV_BLOCK_SIZE <= n ? DG_KV_BLOCK_SIZE
									  : n - it[keep].i * DG_KV_BLOCK_SIZE;
	} else {
		qsort(it, m, sizeof *it, cmp_rank);
		double cum = 0;
		keep = 0;
		while (keep < m && cum < b->topp * total)
			cum += it[keep++].s;
		keep = keep ? keep : 1;
		if (!block) /* count rounded up to a multiple of 128 keys */
			keep = (int)((keep + DG_KV_BLOCK_SIZE - 1) / DG_KV_BLOCK_SIZE * DG_KV_BLOCK_SIZE);
		keep = keep < m ? keep : m;
	}
	/* mark the kept keys (blocks expanded, sinks added), then list them in ascending order */
	unsigned char *in = (unsigned char *)(it + n);
	memset(in, 0, (size_t)n);
	for (int t = 0; t < keep; t++) {
		if (!block) {
			in[it[t].i] = 1;
			continue;
		}
		for (int j = it[t].i * DG_KV_BLOCK_SIZE; j < n && j < (it[t].i + 1) * DG_KV_BLOCK_SIZE; j++)
			in[j] = 1;
	}
	for (int j = lo; j < hi; j++)
		in[j] = 1;
	int cnt = 0;
	for (int j = 0; j < n; j++)
		if (in[j])
			out[cnt++] = j;
	return cnt;
}

/* a selection from per-group key lists (freed) */
static void selection_from_rows(dg_selection *sel, int **rows, const int *counts, int ngroups)
{
	sel->ngroups = ngroups;
	sel->off = dg_malloc((size_t)(ngroups + 1) * sizeof(int64_t));
	sel->off[0] = 0;
	for (int g = 0; g < ngroups; g++)
		sel->off[g + 1] = sel->off[g] + counts[g];
	sel->idx = dg_malloc((size_t)sel->off[ngroups] * sizeof(int));
	for (int g = 0; g < ngroups; g++) {
		memcpy(sel->idx + sel->off[g], rows[g], (size_t)counts[g] * sizeof(int));
		free(rows[g]);
	}
}

void dg_select_groups(dg_selection *sel, const float *scores, int ngroups, int n, const dg_budget *b)
{
	int cols = b->kv == DG_KV_BLOCK ? (n + DG_KV_BLOCK_SIZE - 1) / DG_KV_BLOCK_SIZE : n;
	int **rows = dg_malloc((size_t)ngroups * sizeof(int *));
	int *counts = dg_malloc((size_t)ngroups * sizeof(int));
#pragma omp parallel
	{
		void *work = dg_malloc(dg_select_work_size(n));
		int *buf = dg_malloc((size_t)n * sizeof(int));
#pragma omp for schedule(dynamic)
		for (int g = 0; g < ngroups; g++) {
			counts[g] = dg_select_row(scores + (size_t)g * cols, n, b, buf, work);
			rows[g] = memcpy(dg_malloc((size_t)counts[g] * sizeof(int)), buf,
					 (size_t)counts[g] * sizeof(int));
		}
		free(work);
		free(buf);
	}
	selection_from_rows(sel, rows, counts, ngroups);
	free(rows);
	free(counts);
}

void dg_scores_exact(const float *q, const float *k, const float *lse, int n, int d,
		     dg_score_acc *acc, int nacc, dg_prob_row_fn fn, void *ctx)
{
	float scale = 1.0f / sqrtf((float)d);
	int **owner = dg_malloc((size_t)(nacc ? nacc : 1) * sizeof(int *));
	for (int a = 0; a < nacc; a++) {
		const dg_groups *g = acc[a].groups;
		owner[a] = dg_malloc((size_t)n * sizeof(int));
		for (int grp = 0; grp < g->ngroups; grp++)
			for (int p = g->off[grp]; p < g->off[grp + 1]; p++)
				owner[a][g->perm[p]] = grp;
		memset(acc[a].scores, 0, (size_t)g->ngroups * n * sizeof(float));
	}
	float *P = dg_malloc((size_t)BQ * n * sizeof(float)); /* (BQ, n) probabilities of a row block */
	int nchunks = (n + BK - 1) / BK;
	for (int q0 = 0; q0 < n; q0 += BQ) {
		int bq = n - q0 < BQ ? n - q0 : BQ;
		/* columns in parallel: each task owns its key columns, so accumulation needs no lock */
#pragma omp parallel
		{
			float *s = dg_malloc((size_t)BQ * BK * sizeof(float));
#pragma omp for schedule(dynamic)
			for (int c = 0; c < nchunks; c++) {
				int k0 = c * BK, bk = n - k0 < BK ? n - k0 : BK;
				cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bq, bk, d, scale,
					    q + (size_t)q0 * d, d, k + (size_t)k0 * d, d, 0.0f, s, bk);
				for (int i = 0; i < bq; i++) {
					float *pi = P + (size_t)i * n + k0, *si = s + (size_t)i * bk;
					for (int j = 0; j < bk; j++)
						pi[j] = expf(si[j] - lse[q0 + i]);
					for (int a = 0; a < nacc; a++) {
						float *row = acc[a].scores + (size_t)owner[a][q0 + i] * n + k0;
						for (int j = 0; j < bk; j++)
							row[j] += pi[j];
					}
				}
			}
			free(s);
		}
		if (fn) {
#pragma omp parallel for schedule(dynamic)
			for (int i = 0; i < bq; i++)
				fn(ctx, q0 + i, P + (size_t)i * n);
		}
	}
	for (int a = 0; a < nacc; a++) {
		const dg_groups *g = acc[a].groups;
		for (int grp = 0; grp < g->ngroups; grp++) {
			float inv = 1.0f / (float)(g->off[grp + 1] - g->off[grp]);
			float *row = acc[a].scores + (size_t)grp * n;
			for (int j = 0; j < n; j++)
				row[j] *= inv;
		}
		free(owner[a]);
	}
	free(owner);
	free(P);
}

struct dg_query_select {
	int n, nb, threads;
	const dg_budget *const *budgets;
	int **rows, *counts; /* [b * n + query] */
	void **work;         /* per thread: dg_select_work_size(n) */
	int **buf;           /* per thread: (n) */
	float **blocks;      /* per thread: (ceil(n/128)) block sums of the row */
};

dg_query_select *dg_query_select_new(int n, const dg_budget *const *budgets, int nb)
{
	dg_query_select *qs = dg_malloc(sizeof *qs);
	int threads = omp_get_max_threads();
	*qs = (dg_query_select){ n, nb, threads, budgets, dg_malloc((size_t)nb * n * sizeof(int *)),
				 dg_malloc((size_t)nb * n * sizeof(int)), dg_malloc(threads * sizeof(void *)),
				 dg_malloc(threads * sizeof(int *)), dg_malloc(threads * sizeof(float *)) };
	for (int t = 0; t < threads; t++) {
		qs->work[t] = dg_malloc(dg_select_work_size(n));
		qs->buf[t] = dg_malloc((size_t)n * sizeof(int));
		qs->blocks[t] = dg_malloc((size_t)(n / DG_KV_BLOCK_SIZE + 1) * sizeof(float));
	}
	return qs;
}

void dg_query_select_row(void *ctx, int i, const float *p)
{
	dg_query_select *qs = ctx;
	int t = omp_get_thread_num(), n = qs->n;
	bool summed = false;
	for (int b = 0; b < qs->nb; b++) {
		const dg_budget *bu = qs->budgets[b];
		if (bu->kv == DG_KV_BLOCK && !summed) {
			dg_scores_to_blocks(p, 1, n, qs->blocks[t]);
			summed = true;
		}
		size_t at = (size_t)b * n + i;
		int c = dg_select_row(bu->kv == DG_KV_BLOCK ? qs->blocks[t] : p, n, bu, qs->buf[t], qs->work[t]);
		qs->counts[at] = c;
		qs->rows[at] = memcpy(dg_malloc((size_t)c * sizeof(int)), qs->buf[t], (size_t)c * sizeof(int));
	}
}

void dg_query_select_finish(dg_query_select *qs, dg_selection *sel)
{
	for (int b = 0; b < qs->nb; b++)
		selection_from_rows(&sel[b], qs->rows + (size_t)b * qs->n, qs->counts + (size_t)b * qs->n, qs->n);
	for (int t = 0; t < qs->threads; t++) {
		free(qs->work[t]);
		free(qs->buf[t]);
		free(qs->blocks[t]);
	}
	free(qs->work), free(qs->buf), free(qs->blocks), free(qs->rows), free(qs->counts);
	free(qs);
}

/* softmax of a row in place, with optional log-weights added first */
static void softmax_row(float *x, int cols, const float *logw)
{
	float mx = -INFINITY;
	for (int j = 0; j < cols; j++) {
		if (logw)
			x[j] += logw[j];
		mx = x[j] > mx ? x[j] : mx;
	}
	double sum = 0;
	for (int j = 0; j < cols; j++)
		sum += x[j] = expf(x[j] - mx);
	for (int j = 0; j < cols; j++)
		x[j] = (float)(x[j] / sum);
}

void dg_scores_pooled(const float *q, const float *k, int n, int d, const dg_groups *g,
		      dg_kv_kind kv, float *scores)
{
	int G = g->ngroups, nb = (n + DG_KV_BLOCK_SIZE - 1) / DG_KV_BLOCK_SIZE;
	float scale = 1.0f / sqrtf((float)d);
	float *qbar = dg_calloc((size_t)G * d, sizeof(float)); /* (G, d) */
	for (int grp = 0; grp < G; grp++) {
		int a = g->off[grp], b = g->off[grp + 1];
		for (int p = a; p < b; p++)
			for (int c = 0; c < d; c++)
				qbar[(size_t)grp * d + c] += q[(size_t)g->perm[p] * d + c];
		for (int c = 0; c < d; c++)
			qbar[(size_t)grp * d + c] /= (float)(b - a);
	}
	if (kv == DG_KV_TOKEN) {
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, G, n, d, scale, qbar, d, k, d, 0.0f,
			    scores, n);
		for (int grp = 0; grp < G; grp++)
			softmax_row(scores + (size_t)grp * n, n, NULL);
	} else {
		float *kbar = dg_calloc((size_t)nb * d, sizeof(float)), *logw = dg_malloc(nb * sizeof(float));
		for (int blk = 0; blk < nb; blk++) {
			int a = blk * DG_KV_BLOCK_SIZE, b = a + DG_KV_BLOCK_SIZE < n ? a + DG_KV_BLOCK_SIZE : n;
			for (int j = a; j < b; j++)
				for (int c = 0; c < d; c++)
					kbar[(size_t)blk * d + c] += k[(size_t)j * d + c];
			for (int c = 0; c < d; c++)
				kbar[(size_t)blk * d + c] /= (float)(b - a);
			logw[blk] = logf((float)(b - a));
		}
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, G, nb, d, scale, qbar, d, kbar, d,
			    0.0f, scores, nb);
		for (int grp = 0; grp < G; grp++)
			softmax_row(scores + (size_t)grp * nb, nb, logw);
		free(kbar);
		free(logw);
	}
	free(qbar);
}

void dg_scores_to_blocks(const float *token_scores, int ngroups, int n, float *block_scores)
{
	int nb = (n + DG_KV_BLOCK_SIZE - 1) / DG_KV_BLOCK_SIZE;
	for (int grp = 0; grp < ngroups; grp++)
		for (int blk = 0; blk < nb; blk++) {
			const float *t = token_scores + (size_t)grp * n;
			float s = 0;
			for (int j = blk * DG_KV_BLOCK_SIZE; j < n && j < (blk + 1) * DG_KV_BLOCK_SIZE; j++)
				s += t[j];
			block_scores[(size_t)grp * nb + blk] = s;
		}
}

void dg_scores_vote(const dg_groups *to, const dg_groups *from, const dg_selection *lists, int n,
		    dg_kv_kind kv, float *scores)
{
	int *owner = dg_malloc((size_t)n * sizeof *owner);  /* (n) each query's `from` group */
	int *cnt = dg_calloc((size_t)from->ngroups, sizeof *cnt); /* (from groups) members of b */
	float *tok = dg_malloc((size_t)n * sizeof *tok);     /* (n) one group's token votes */
	int nb = (n + DG_KV_BLOCK_SIZE - 1) / DG_KV_BLOCK_SIZE;
	for (int a = 0; a < from->ngroups; a++)
		for (int i = from->off[a]; i < from->off[a + 1]; i++)
			owner[from->perm[i]] = a;
	for (int b = 0; b < to->ngroups; b++) {
		int size = to->off[b + 1] - to->off[b];
		for (int i = to->off[b]; i < to->off[b + 1]; i++)
			cnt[owner[to->perm[i]]]++;
		memset(tok, 0, (size_t)n * sizeof *tok);
		for (int a = 0; a < from->ngroups; a++) {
			for (int64_t e = lists->off[a]; cnt[a] && e < lists->off[a + 1]; e++)
				tok[lists->idx[e]] += (float)cnt[a]; /* integers: exact below 2^24 */
			cnt[a] = 0;
		}
		for (int j = 0; j < n; j++)
			tok[j] /= (float)size;
		if (kv == DG_KV_BLOCK)
			dg_scores_to_blocks(tok, 1, n, scores + (size_t)b * nb);
		else
			memcpy(scores + (size_t)b * n, tok, (size_t)n * sizeof *tok);
	}
	free(owner), free(cnt), free(tok);
}

void dg_joint_selection(const dg_groups *g, dg_selection *sel, int n, int text, int align)
{
	if (text <= 0)
		return;
	int forced = align > 1 ? (int)(((int64_t)text + align - 1) / align * align) : text;
	forced = forced < n ? forced : n;
	int G = sel->ngroups;
	int64_t *off = dg_malloc((size_t)(G + 1) * sizeof(int64_t)), cap = 0;
	bool *is_text = dg_malloc((size_t)(G ? G : 1) * sizeof(bool));
	for (int r = 0; r < G; r++) {
		int first = g ? g->perm[g->off[r]] : r;
		is_text[r] = first < text;
		if (g)
			for (int p = g->off[r]; p < g->off[r + 1]; p++)
				DG_ASSERT((g->perm[p] < text) == is_text[r]); /* no mixed group */
		int64_t cnt = sel->off[r + 1] - sel->off[r];
		cap += is_text[r] ? n : cnt + forced;
	}
	int *idx = dg_malloc((size_t)(cap ? cap : 1) * sizeof(int));
	off[0] = 0;
	for (int r = 0; r < G; r++) {
		int64_t at = off[r];
		if (is_text[r]) {
			for (int j = 0; j < n; j++)
				idx[at++] = j;
		} else { /* [0, forced) then the old list past it: ascending, no duplicates */
			for (int j = 0; j < forced; j++)
				idx[at++] = j;
			for (int64_t t = sel->off[r]; t < sel->off[r + 1]; t++)
				if (sel->idx[t] >= forced)
					idx[at++] = sel->idx[t];
		}
		off[r + 1] = at;
	}
	free(sel->off), free(sel->idx), free(is_text);
	sel->off = off;
	sel->idx = idx;
}

dg_budget dg_joint_budget(const dg_budget *b, int n, int text)
{
	dg_budget j = *b;
	int t = text < n ? text : n;
	bool none = b->sink_hi <= b->sink_lo || b->sink_lo >= n;
	if (t <= 0 || (!none && b->sink_lo > t))
		return j;
	j.sink_lo = 0;
	j.sink_hi = none || b->sink_hi < t ? t : b->sink_hi;
	return j;
}

void dg_joint_split(dg_groups *g, dg_selection *sel, int text)
{
	if (text <= 0)
		return;
	int G = g->ngroups, extra = 0;
	for (int r = 0; r < G; r++) {
		int nt = 0;
		for (int p = g->off[r]; p < g->off[r + 1]; p++)
			nt += g->perm[p] < text;
		extra += nt > 0 && nt < g->off[r + 1] - g->off[r];
	}
	if (!extra)
		return;
	int *perm = dg_malloc((size_t)g->n * sizeof(int)), *goff = dg_malloc((size_t)(G + extra + 1) * sizeof(int));
	int64_t *off = dg_malloc((size_t)(G + extra + 1) * sizeof(int64_t)), total = 0;
	for (int r = 0; r < G; r++) {
		int nt = 0;
		for (int p = g->off[r]; p < g->off[r + 1]; p++)
			nt += g->perm[p] < text;
		total += (sel->off[r + 1] - sel->off[r]) * (nt > 0 && nt < g->off[r + 1] - g->off[r] ? 2 : 1);
	}
	int *idx = dg_malloc((size_t)(total ? total : 1) * sizeof(int));
	int k = 0, pos = 0;
	int64_t at = 0;
	for (int r = 0; r < G; r++) {
		int cnt[2] = { 0, 0 };
		for (int p = g->off[r]; p < g->off[r + 1]; p++)
			cnt[g->perm[p] >= text]++;
		for (int side = 0; side < 2; side++) { /* text part, then video part */
			if (!cnt[side])
				continue;
			goff[k] = pos;
			off[k] = at;
			for (int p = g->off[r]; p < g->off[r + 1]; p++)
				if ((g->perm[p] >= text) == side)
					perm[pos++] = g->perm[p];
			for (int64_t t = sel->off[r]; t < sel->off[r + 1]; t++)
				idx[at++] = sel->idx[t];
			k++;
		}
	}
	goff[k] = pos;
	off[k] = at;
	DG_ASSERT(k == G + extra && pos == g->n);
	free(g->perm), free(g->off), free(sel->off), free(sel->idx);
	g->perm = perm, g->off = goff, g->ngroups = k;
	sel->off = off, sel->idx = idx, sel->ngroups = k;
}
