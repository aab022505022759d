/*
 * test_joint.c: joint attention in replay (issue 20 item 3, docs/spec.md §3.7). On a unit whose
 * first T tokens are text, for every preset and peer on the CPU backend through policy_run.c: the
 * text queries' rows equal the dense output bit for bit, the computed pairs count the text keys of
 * every video row (text keys are made unattractive, so no ranking would keep them on its own), and
 * at rho = 1 a top-k policy gives the dense output; with text keys made attractive, a top-k list
 * over tokens still holds T + min(K, n - T) keys (the text outside the ranking, dg_joint_budget). The groupings never mix text and video, the
 * peers' lists hold the text keys, and with T = 0 the joint rule changes nothing. The block peers'
 * halves (the GPU backend's path) give dg_peer_metadata's groups and lists.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/policy_run.h"
#include "policy/groups.h"
#include "policy/peers.h"
#include "policy/presets.h"
#include "policy/select.h"
#include "testhelp.h"
#include "util/util.h"

#define D 32

static unsigned long rng = 12345;
static float urand(void)
{
	rng = rng * 6364136223846793005UL + 1442695040888963407UL;
	return (float)((rng >> 33) & 0xffffff) / (float)0x1000000 - 0.5f;
}

/* q = c + noise; video keys near c, text keys near -c (low logits for every query), or near 2c with
 * attract (high logits: a ranking that saw them would spend its budget on them) */
static void make_unit(float *q, float *k, float *v, int n, int text, bool attract)
{
	float c[D];
	for (int e = 0; e < D; e++)
		c[e] = 2.0f * urand();
	for (int i = 0; i < n; i++)
		for (int e = 0; e < D; e++) {
			q[(size_t)i * D + e] = c[e] + urand();
			k[(size_t)i * D + e] = (i < text ? (attract ? 2 : -1) * c[e] : c[e]) + 2.0f * urand();
			v[(size_t)i * D + e] = urand();
		}
}

static void check_policy(const dg_policy *p, int text, const int grid[3], double rho, bool attract)
{
	int n = text + grid[0] * grid[1] * grid[2];
	size_t nd = (size_t)n * D;
	float *q = dg_malloc(nd * 4), *k = dg_malloc(nd * 4), *v = dg_malloc(nd * 4);
	float *o = dg_malloc(nd * 4), *ref = dg_malloc(nd * 4);
	dg_backend *be = dg_backend_cpu(n, D);
	dg_schedule sc;
	int steps[2] = { 0, 1 };
	memset(&sc, 0, sizeof sc);
	DG_ASSERT(dg_schedule_resolve_anchors(&sc, steps, 2) == -1);
	dg_policy_run r;
	dg_policy_run_init(&r, p, rho);
	dg_policy_run *runs[1] = { &r };
	int ok_text = 1, ok_pairs = 1, ok_count = 1, ok_dense = 1, sparse = 0, rc = 0;
	/* top-k over tokens: the text keys outside the ranking (dg_joint_budget), so every video row holds
	 * them and min(K, n - T) others, however attractive the text keys are */
	bool fixed = !dg_policy_is_peer(p) && p->budget == DG_BUDGET_TOPK && p->kv == DG_KV_TOKEN && !p->sink_hi;
	int K = dg_topk_count(rho, n), rest = K < n - text ? K : n - text;
	for (int step = 0; step < 2; step++) {
		make_unit(q, k, v, n, text, attract);
		be->load(be, q, k, v);
		be->dense(be);
		dg_policy_run_plan(&r, &sc, step, 0);
		if ((rc = dg_policy_run_metadata(be, runs, 1, grid, text)))
			break;
		dg_metrics m;
		dg_policy_out out = dg_policy_run_apply(be, &r, step, &m, o, false);
		be->output(be, true, ref);
		if (out.dense)
			continue;
		sparse++;
		ok_text &= !memcmp(o, ref, (size_t)text * D * 4);
		ok_pairs &= out.pairs >= (int64_t)text * n + (int64_t)(n - text) * text;
		ok_count &= !fixed || out.pairs == (int64_t)text * n + (int64_t)(n - text) * (text + rest);
		for (size_t e = 0; e < nd; e++)
			ok_dense &= fabsf(o[e] - ref[e]) <= 1e-5f;
	}
	CHECKF(rc == 0 && sparse > 0, "%s rho %.2f T %d: metadata made, a sparse output", p->name, rho, text);
	CHECKF(ok_text, "%s rho %.2f T %d: text rows equal the dense rows bit for bit", p->name, rho, text);
	CHECKF(ok_pairs, "%s rho %.2f T %d: pairs count dense text rows and the text keys of video rows",
	       p->name, rho, text);
	CHECKF(ok_count, "%s rho %.2f T %d%s: a top-k list over tokens holds T + min(K, n - T) keys", p->name, rho,
	       text, attract ? " (attractive text keys)" : "");
	bool topk = !dg_policy_is_peer(p) || p->approx == DG_APPROX_PISA;
	if (rho == 1.0 && topk)
		CHECKF(ok_dense, "%s rho 1 T %d: the dense output", p->name, text);
	dg_policy_run_clear(be, &r);
	be->destroy(be);
	free(q), free(k), free(v), free(o), free(ref);
}

static bool pure(const dg_groups *g, int text)
{
	for (int r = 0; r < g->ngroups; r++)
		for (int p = g->off[r]; p < g->off[r + 1]; p++)
			if ((g->perm[p] < text) != (g->perm[g->off[r]] < text))
				return false;
	return true;
}

/* every text group lists every key, every video group the text keys */
static bool joint_lists(const dg_groups *g, const dg_selection *s, int n, int text)
{
	for (int r = 0; r < g->ngroups; r++) {
		int64_t cnt = s->off[r + 1] - s->off[r];
		const int *l = s->idx + s->off[r];
		if (g->perm[g->off[r]] < text ? cnt != n : cnt < text)
			return false;
		for (int j = 0; j < (g->perm[g->off[r]] < text ? n : text); j++)
			if (l[j] != j)
				return false;
	}
	return true;
}

/* the block peers in the GPU backend's two halves (peers.h dg_peer_block_*: scores, block take, the
 * final groups with their score rows) and the expansion rule kernels/peer_scores.cu dg_peer_expand
 * follows, here on the host: the same groups and lists as dg_peer_metadata */
static bool block_halves(const dg_policy *p, const dg_budget *b, const float *q, const float *k, int n, int text)
{
	int bs = dg_peer_block_size(p), G = (n + bs - 1) / bs, grid[3] = { 1, 1, n - text }, *row;
	float *s = dg_malloc((size_t)G * G * sizeof(float));
	unsigned char *take = dg_malloc((size_t)G * G);
	dg_peer_block_scores(q, k, n, D, p, s);
	dg_peer_block_take(s, n, p, b, take);
	dg_groups g, cg;
	dg_selection cs;
	int forced = dg_peer_block_groups(n, p, text, &g, &row);
	dg_peer_state *st = NULL;
	DG_ASSERT(dg_peer_metadata(q, k, n, D, p, b, grid, text, &st, &cg, &cs) == 0);
	bool ok = g.ngroups == cg.ngroups && !memcmp(g.off, cg.off, (g.ngroups + 1) * sizeof(int)) &&
		  !memcmp(g.perm, cg.perm, n * sizeof(int));
	for (int r = 0; ok && r < g.ngroups; r++) {
		int64_t at = cs.off[r];
		for (int j = 0; j < n && ok; j++)
			if (row[r] < 0 || j < forced || (j >= b->sink_lo && j < b->sink_hi) ||
			    take[(size_t)row[r] * G + j / bs])
				ok = at < cs.off[r + 1] && cs.idx[at++] == j;
		ok = ok && at == cs.off[r + 1];
	}
	dg_groups_free(&g), dg_groups_free(&cg), dg_selection_free(&cs), dg_peer_state_free(st);
	free(s), free(take), free(row);
	return ok;
}

int main(void)
{
	int grid[3] = { 2, 8, 16 };
	dg_policy pol[160];
	int np = dg_policies_expand("all,peers", pol, 160);
	DG_ASSERT(np > 20);
	for (int t = 0; t < 2; t++) {
		int text = t ? 7 : 135;
		for (int i = 0; i < np; i++)
			if (!pol[i].dense) {
				check_policy(&pol[i], text, grid, 0.15, t == 0);
				check_policy(&pol[i], text, grid, 1.0, t == 0);
			}
	}
	/* groupings and peers' lists directly */
	int text = 135, n = text + 256;
	float *q = dg_malloc((size_t)n * D * 4), *k = dg_malloc((size_t)n * D * 4), *v = dg_malloc((size_t)n * D * 4);
	make_unit(q, k, v, n, text, false);
	for (int kind = 0; kind < DG_GROUP_COUNT; kind++) {
		dg_groups g;
		CHECKF(dg_groups_build(&g, kind, q, n, D, grid, text) == 0 && pure(&g, text) && g.n == n,
		       "grouping %s: no group mixes text and video", dg_group_name(kind));
		dg_groups_free(&g);
	}
	for (int i = 0; i < np; i++) {
		if (!dg_policy_is_peer(&pol[i]))
			continue;
		dg_budget b = { pol[i].kv, pol[i].budget, 0.15, pol[i].topp, pol[i].sink_lo, pol[i].sink_hi };
		dg_peer_state *st = NULL;
		dg_groups g;
		dg_selection s;
		int rc = dg_peer_metadata(q, k, n, D, &pol[i], &b, grid, text, &st, &g, &s);
		CHECKF(rc == 0 && pure(&g, text) && joint_lists(&g, &s, n, text),
		       "%.60s: text groups list every key, video groups the text keys", pol[i].name);
		dg_groups_free(&g), dg_selection_free(&s), dg_peer_state_free(st);
	}
	/* the block peers' halves (the GPU backend's path) against dg_peer_metadata */
	static const char *const halves[] = { "spargeattn", "spargeattn/theta=0.05/budget=matched", "xattention",
					      "xattention/budget=topk", "xattention/budget=matched", "pisa",
					      "pisa/block=128" };
	for (int t = 0; t < 3; t++)
		for (size_t i = 0; i < sizeof halves / sizeof *halves; i++) {
			dg_policy p;
			DG_ASSERT(dg_policy_parse(halves[i], &p) == 0 && dg_peer_block_size(&p) > 0);
			int tx = t == 0 ? 0 : t == 1 ? 7 : text, m = tx ? n : 256;
			dg_budget b = { p.kv, p.budget, 0.2, p.topp, 0, t == 2 ? 40 : 0 };
			CHECKF(block_halves(&p, &b, t ? q : q + (size_t)text * D, t ? k : k + (size_t)text * D, m, tx),
			       "%s, text %d: dg_peer_block_* and the expansion rule give dg_peer_metadata's groups and lists",
			       halves[i], tx);
		}
	/* T = 0: the joint rule is the identity (the same lists, not even reallocated) */
	dg_groups g;
	DG_ASSERT(dg_groups_build(&g, DG_GROUP_PCA, q, n, D, grid, 0) == 0);
	int64_t off[2] = { 0, 1 };
	int idx[1] = { 3 };
	dg_selection s = { 1, off, idx };
	dg_joint_selection(&g, &s, n, 0, 1);
	dg_joint_split(&g, &s, 0);
	CHECK("T = 0: dg_joint_selection and dg_joint_split leave the selection as it was",
	      s.off == off && s.idx == idx && s.ngroups == 1);
	dg_groups_free(&g);
	free(q), free(k), free(v);
	return test_report();
}
