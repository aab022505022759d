/*
 * test_peers.c: the peer policies (peers.h) on the CPU: a property each paper states, and
 * independent fp64 computations of the selection-based peers' scores, selections and outputs
 * (xattention, spargeattn, pisa) in the style of test_replay.c, through the policy engine
 * (policy_run.h on the CPU backend). Units come from a synthetic trace (structured heads).
 * Run: ctest -R test_peers.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "policy/attention.h"
#include "backend/backend.h"
#include "policy/peers.h"
#include "backend/policy_run.h"
#include "ref64.h"
#include "trace/synth.h"
#include "testhelp.h"
#include "trace/trace.h"
#include "util/util.h"

static int n, d, grid[3];
static float *q, *k, *v;
static double *P, *O; /* (n, n) exact probabilities, (n, d) dense output, fp64 */

/* Run policy spec at density rho on the loaded unit over `steps` steps of the same Q/K/V
 * (schedule sched), the output of the last into o; returns its computed pairs. */
static int64_t run(const char *spec, double rho, const char *sched, int steps, float *o)
{
	dg_policy p;
	dg_schedule sc;
	if (dg_policy_parse(spec, &p) || dg_schedule_parse(sched, &sc))
		exit(1);
	dg_backend *be = dg_backend_cpu(n, d);
	dg_policy_run r, *rp = &r;
	dg_policy_run_init(&r, &p, rho);
	dg_policy_out out = { 0 };
	for (int s = 0; s < steps; s++) {
		be->load(be, q, k, v);
		be->dense(be);
		dg_policy_run_plan(&r, &sc, s, 0);
		if (dg_policy_run_metadata(be, &rp, 1, grid, 0))
			exit(1);
		out = dg_policy_run_apply(be, &r, s, NULL, o, false);
	}
	dg_policy_run_clear(be, &r);
	be->destroy(be);
	return out.pairs;
}

/* Block selection (fp64) of one query block from block scores s (nb), forced blocks (s = +inf):
 * topp p (p > 0) or the best blocks until K keys; in (nb) 0/1. Returns 1 on a near tie (the
 * cumulative mass within 1e-5 of the threshold, or equal neighbouring scores at the cut). */
static int select_blocks(const double *s, int nb, int bs, double p, int K, char *in)
{
	double *ord = malloc(sizeof(double) * 2 * nb), total = 0, cum = 0;
	int m = 0, keep = 0, held = 0, tie = 0;
	for (int b = 0; b < nb; b++) {
		in[b] = isinf(s[b]);
		if (!in[b]) {
			ord[2 * m] = s[b], ord[2 * m + 1] = b, total += s[b];
			m++;
		}
	}
	qsort(ord, m, 2 * sizeof(double), ref_rank_desc);
	while (keep < m && (p > 0 ? cum < p * total : held < K)) {
		cum += ord[2 * keep];
		held += (int)ord[2 * keep + 1] == (n - 1) / bs ? n - (n - 1) / bs * bs : bs;
		keep++;
		if (p > 0 && fabs(cum - p * total) <= 1e-5 * total)
			tie = 1;
	}
	if (keep > 0 && keep < m && fabs(ord[2 * keep - 2] - ord[2 * keep]) <= 1e-6 * fabs(ord[2 * keep]))
		tie = 1;
	for (int t = 0; t < keep; t++)
		in[(int)ord[2 * t + 1]] = 1;
	free(ord);
	return tie;
}

/* query-block x key-block selections (bs x bs raster blocks) of scores (nb, nb) into sel (n, n) */
static int block_sel(const double *scores, int bs, double p, double rho, char *sel)
{
	int nb = (n + bs - 1) / bs, ties = 0, K = dg_topk_count(rho, n);
	char *in = malloc(nb);
	for (int g = 0; g < nb; g++) {
		ties += select_blocks(scores + (size_t)g * nb, nb, bs, p, K, in);
		for (int i = g * bs; i < n && i < (g + 1) * bs; i++)
			for (int j = 0; j < n; j++)
				sel[(size_t)i * n + j] = in[j / bs];
	}
	free(in);
	return ties;
}

static long count(const char *sel)
{
	long c = 0;
	for (size_t e = 0; e < (size_t)n * n; e++)
		c += sel[e];
	return c;
}

/* XAttention's antidiagonal block scores, fp64 straight from the definition (§2.5) */
static void xattn64(int S, double *scores)
{
	int R = (n + S - 1) / S, nb = (n + 127) / 128;
	double *row = malloc(sizeof(double) * R);
	memset(scores, 0, sizeof(double) * nb * nb);
	for (int r = 0; r < R; r++) {
		double mx = -INFINITY, sum = 0;
		for (int c = 0; c < R; c++) {
			double dot = 0;
			for (int t = 0; t < S; t++) {
				int iq = r * S + S - 1 - t, ik = c * S + t;
				for (int e = 0; e < d && iq < n && ik < n; e++)
					dot += (double)q[(size_t)iq * d + e] * k[(size_t)ik * d + e];
			}
			row[c] = dot / (sqrt((double)d) * S);
			mx = fmax(mx, row[c]);
		}
		for (int c = 0; c < R; c++)
			sum += row[c] = exp(row[c] - mx);
		for (int c = 0; c < R; c++)
			scores[(size_t)(r * S / 128) * nb + c * S / 128] += row[c] / sum;
	}
	free(row);
}

/* SpargeAttn stage 1, fp64 (§2.4): block scores with forced blocks as +inf; qs, ks the blocks'
 * self-similarities */
static void sparge64(double theta, double *scores, double *qs, double *ks)
{
	int nb = (n + 127) / 128;
	double *mean = calloc(d, sizeof(double)), *qb = calloc((size_t)nb * d, sizeof(double));
	double *kb = calloc((size_t)nb * d, sizeof(double)), *u = malloc(sizeof(double) * d);
	for (int j = 0; j < n; j++)
		for (int e = 0; e < d; e++)
			mean[e] += (double)k[(size_t)j * d + e] / n;
	for (int pass = 0; pass < 2; pass++)
		for (int b = 0; b < nb; b++) {
			int a = b * 128, z = a + 128 < n ? a + 128 : n;
			double *bar = (pass ? kb : qb) + (size_t)b * d, su = 0;
			memset(u, 0, sizeof(double) * d);
			for (int i = a; i < z; i++) {
				double x[256], nrm = 0;
				for (int e = 0; e < d; e++) {
					x[e] = pass ? k[(size_t)i * d + e] - mean[e] : q[(size_t)i * d + e];
					nrm += x[e] * x[e];
					bar[e] += x[e] / (z - a);
				}
				for (int e = 0; e < d; e++)
					u[e] += x[e] / sqrt(nrm);
			}
			for (int e = 0; e < d; e++)
				su += u[e] * u[e];
			(pass ? ks : qs)[b] = su / ((double)(z - a) * (z - a));
		}
	for (int g = 0; g < nb; g++) {
		double *s = scores + (size_t)g * nb, mx = -INFINITY, sum = 0;
		for (int b = 0; b < nb; b++) {
			double dot = 0;
			for (int e = 0; e < d; e++)
				dot += qb[(size_t)g * d + e] * kb[(size_t)b * d + e];
			s[b] = ks[b] < theta ? -INFINITY : dot / sqrt((double)d);
			mx = fmax(mx, s[b]);
		}
		for (int b = 0; b < nb; b++)
			sum += s[b] = mx == -INFINITY ? 0 : exp(s[b] - mx);
		for (int b = 0; b < nb; b++)
			s[b] = qs[g] < theta || ks[b] < theta ? INFINITY : s[b] / sum;
	}
	free(mean), free(qb), free(kb), free(u);
}

/* PISA, fp64 (§2.12): 64-blocks by qbar.kbar until rho*n keys, exact on them, the first-order
 * expansion elsewhere; returns near ties */
static int pisa64(double rho, double *o, long *pairs)
{
	int bs = 64, nb = (n + bs - 1) / bs, ties = 0;
	double *qb = calloc((size_t)nb * d, sizeof(double)), *kb = calloc((size_t)nb * d, sizeof(double));
	double *s = malloc(sizeof(double) * nb * nb);
	for (int b = 0; b < nb; b++) {
		int a = b * bs, z = a + bs < n ? a + bs : n;
		for (int i = a; i < z; i++)
			for (int e = 0; e < d; e++) {
				qb[(size_t)b * d + e] += (double)q[(size_t)i * d + e] / (z - a);
				kb[(size_t)b * d + e] += (double)k[(size_t)i * d + e] / (z - a);
			}
	}
	for (int g = 0; g < nb; g++)
		for (int b = 0; b < nb; b++) {
			double dot = 0;
			for (int e = 0; e < d; e++)
				dot += qb[(size_t)g * d + e] * kb[(size_t)b * d + e];
			s[(size_t)g * nb + b] = dot / sqrt((double)d);
		}
	char *in = malloc(nb);
	*pairs = 0;
	double sc = 1 / sqrt((double)d);
	for (int g = 0; g < nb; g++) {
		ties += select_blocks(s + (size_t)g * nb, nb, bs, 0, dg_topk_count(rho, n), in);
		for (int i = g * bs; i < n && i < (g + 1) * bs; i++) {
			double num[256] = { 0 }, den = 0;
			for (int j = 0; j < n; j++) {
				int c = j / bs;
				double dot = 0, w;
				for (int e = 0; e < d; e++)
					dot += (double)q[(size_t)i * d + e] * k[(size_t)j * d + e];
				if (in[c]) {
					w = exp(sc * dot);
					(*pairs)++;
				} else { /* w_c (1 + s q.(k_j - kbar_c)) */
					double dk = 0;
					for (int e = 0; e < d; e++)
						dk += (double)q[(size_t)i * d + e] * kb[(size_t)c * d + e];
					w = exp(sc * dk) * (1 + sc * (dot - dk));
					/* the denominator takes w_c |c|: its first-order terms sum to zero */
					den += exp(sc * dk) - w;
				}
				den += w;
				for (int e = 0; e < d; e++)
					num[e] += w * v[(size_t)j * d + e];
			}
			for (int e = 0; e < d; e++)
				o[(size_t)i * d + e] = num[e] / den;
		}
	}
	free(qb), free(kb), free(s), free(in);
	return ties;
}

/* Skip-Softmax's gaps (§ peers.h skipsoftmax), fp64 from the definition: per row the scaled scores'
 * maximum in each 128-key tile and the running maximum over the tiles before it (ascending key order);
 * a tile's gap the minimum over its query tile's rows of (running max - tile max), -inf for tile 0 */
static void skip_gaps64(double *gap)
{
	int G = (n + 127) / 128;
	double *row = malloc(sizeof(double) * n);
	for (int r = 0; r < G; r++)
		for (int c = 0; c < G; c++)
			gap[r * G + c] = INFINITY;
	for (int i = 0; i < n; i++) {
		for (int j = 0; j < n; j++) {
			double s = 0;
			for (int e = 0; e < d; e++)
				s += (double)q[(size_t)i * d + e] * k[(size_t)j * d + e];
			row[j] = s / sqrt((double)d);
		}
		double run = -INFINITY;
		for (int c = 0; c < G; c++) {
			double mx = -INFINITY;
			for (int j = c * 128; j < n && j < c * 128 + 128; j++)
				mx = fmax(mx, row[j]);
			double *gp = &gap[(i / 128) * G + c];
			*gp = fmin(*gp, c ? run - mx : -INFINITY);
			run = fmax(run, mx);
		}
	}
	free(row);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* the token pairs (sel, n x n) of the tiles with gap <= t; returns 1 on a near tie (a gap within
 * 1e-4 of t: fp32 scores may fall on the other side) */
static int skip_sel(const double *gap, double t, char *sel)
{
	int G = (n + 127) / 128, tie = 0;
	for (int i = 0; i < n; i++)
		for (int j = 0; j < n; j++) {
			double g = gap[(i / 128) * G + j / 128];
			sel[(size_t)i * n + j] = g <= t;
			tie |= isfinite(t) && fabs(g - t) < 1e-4;
		}
	return tie;
}

static double rel(const float *a, const double *b)
{
	return max_rel_diff(a, b, (size_t)n * d);
}

/* the metadata of spec at density rho on random (q, k) from seed */
static void meta(const char *spec, unsigned seed, int nn, const int gr[3], dg_groups *g, dg_selection *s)
{
	dg_policy p;
	dg_policy_parse(spec, &p);
	dg_budget b = { p.kv, p.budget, 0.2, p.topp, 0, 0 };
	float *x = malloc(sizeof(float) * nn * 8 * 2);
	srand(seed);
	for (int e = 0; e < nn * 16; e++)
		x[e] = (float)rand() / RAND_MAX - 0.5f;
	dg_peer_state *st = NULL;
	if (dg_peer_metadata(x, x + nn * 8, nn, 8, &p, &b, gr, 0, &st, g, s))
		exit(1);
	dg_peer_state_free(st);
	free(x);
}

/* Radial's block mask written out as the released code builds it (§2.6: get_window_width,
 * get_diagonal_split_mask over every token pair of every frame pair, then shrinkMaskStrict over whole
 * 128 x 128 blocks of that token mask): the reference of peers.c's interval-counting form */
static int ref_bitlen(long x)
{
	int b = 0;
	for (; x > 0; x >>= 1)
		b++;
	return b;
}
static void radial_ref_mask(int F, int video, double decay, unsigned char *mask)
{
	const int KB = 128, G = (video + KB - 1) / KB;
	long tpf = video / F, bl = ref_bitlen(tpf), pad = ((tpf - 1) / KB + 1) * KB;
	memset(mask, 0, (size_t)G * G);
	unsigned char *local = malloc((size_t)(KB + pad) * (KB + pad));
	for (int i = 0; i < F; i++)
		for (int j = 0; j < F; j++) {
			long dist = labs((long)i - j), rr = (long)i * tpf % KB, rc = (long)j * tpf % KB;
			long rows = rr + pad, cols = rc + pad;
			double len = ldexp(1.0, (int)bl - ref_bitlen(dist));
			double width = dist == 0 ? (double)tpf : dist == 1 ? (double)(tpf / 2) : len * decay >= KB ? len * decay : KB;
			int split = len >= KB || dist % (long)(KB / len) == 0;
			memset(local, 0, (size_t)rows * cols);
			for (long a = 0; a < tpf; a++)
				for (long c = 0; c < tpf; c++)
					local[(rr + a) * cols + rc + c] = j == 0 || (split && fabs((double)(c - a)) <= width);
			for (long x = 0; x < rows / KB; x++)
				for (long y = 0; y < cols / KB; y++) {
					int nonzero = 0, high = 0;
					for (long c = 0; c < KB; c++) {
						int cnt = 0;
						for (long a = 0; a < KB; a++)
							cnt += local[(x * KB + a) * cols + y * KB + c];
						nonzero += cnt > 0;
						high += cnt * 3 > KB;
					}
					long R = (long)i * tpf / KB + x, C = (long)j * tpf / KB + y;
					if (R < G && C < G && high > 0.6 * (nonzero + 1e-9))
						mask[R * G + C] = 1;
				}
		}
	free(local);
}

/* radial's selection (policy spec, F frames of hw tokens, no text) against radial_ref_mask with
 * decay: 1 when its lists are exactly the reference mask's blocks */
static int radial_matches_ref(const char *spec, int F, int hh, int ww, double decay)
{
	const int KB = 128, video = F * hh * ww, G = (video + KB - 1) / KB, gr[3] = { F, hh, ww };
	dg_groups g;
	dg_selection s;
	meta(spec, 1, video, gr, &g, &s);
	unsigned char *ref = malloc((size_t)G * G), *got = calloc((size_t)G * G, 1);
	radial_ref_mask(F, video, decay, ref);
	int ok = g.ngroups == G;
	for (int t = 0; ok && t < G; t++) {
		for (int64_t e = s.off[t]; e < s.off[t + 1]; e++)
			got[(size_t)t * G + s.idx[e] / KB] = 1;
		for (int C = 0; C < G; C++) /* a kept block's every key is listed */
			if (ref[(size_t)t * G + C]) {
				int lo = C * KB, hi = C * KB + KB < video ? C * KB + KB : video;
				int64_t e = s.off[t];
				while (e < s.off[t + 1] && s.idx[e] < lo)
					e++;
				ok &= s.off[t + 1] - e >= hi - lo && s.idx[e] == lo && s.idx[e + hi - lo - 1] == hi - 1;
			}
	}
	ok &= ok && !memcmp(ref, got, (size_t)G * G);
	free(ref), free(got);
	dg_groups_free(&g), dg_selection_free(&s);
	return ok;
}

static int same_meta(const dg_groups *a, const dg_selection *sa, const dg_groups *b, const dg_selection *sb)
{
	return a->ngroups == b->ngroups && !memcmp(a->perm, b->perm, sizeof(int) * a->n) &&
	       !memcmp(a->off, b->off, sizeof(int) * (a->ngroups + 1)) &&
	       !memcmp(sa->off, sb->off, sizeof(int64_t) * (sa->ngroups + 1)) &&
	       !memcmp(sa->idx, sb->idx, sizeof(int) * sa->off[sa->ngroups]);
}

static double density_of(const dg_groups *g, const dg_selection *s)
{
	double pairs = 0;
	for (int t = 0; t < g->ngroups; t++)
		pairs += (double)(g->off[t + 1] - g->off[t]) * (s->off[t + 1] - s->off[t]);
	return pairs / ((double)g->n * g->n);
}

/* dg_peer_take's rule written out plainly (peers.h), the reference its fast form (radix order,
 * binary searches, key counts) must equal byte for byte: each group's finite scores ordered by a
 * comparison sort (score descending, ties by lower index, -0 == +0), kept by a linear scan, and
 * budget=matched's bisection on the density counted from the take itself */
typedef struct {
	float s;
	int i;
} ranked_part;

static int by_rank_ref(const void *a, const void *b)
{
	const ranked_part *x = a, *y = b;
	if (x->s != y->s)
		return x->s > y->s ? -1 : 1;
	return (x->i > y->i) - (x->i < y->i);
}

static void take_at(const float *sc, int ng, int P, const int *psize, int n, const dg_budget *b, int min_parts,
		    unsigned char *take)
{
	ranked_part *it = malloc(sizeof *it * (size_t)P);
	for (int g = 0; g < ng; g++) {
		const float *s = sc + (size_t)g * P;
		int m = 0, keep = 0;
		double total = 0, cum = 0;
		for (int c = 0; c < P; c++) {
			take[(size_t)g * P + c] = s[c] == INFINITY;
			if (s[c] != INFINITY)
				it[m++] = (ranked_part){ s[c], c }, total += s[c];
		}
		qsort(it, (size_t)m, sizeof *it, by_rank_ref);
		if (b->budget == DG_BUDGET_TOPK) {
			for (int held = 0; keep < m && held < dg_topk_count(b->rho, n); keep++)
				held += psize[it[keep].i];
		} else {
			while (keep < m && cum < b->topp * total)
				cum += it[keep++].s;
		}
		keep = keep > min_parts ? keep : min_parts < m ? min_parts : m;
		for (int j = 0; j < keep; j++)
			take[(size_t)g * P + it[j].i] = 1;
	}
	free(it);
}

static double take_density_ref(const unsigned char *take, int ng, const int *gsize, int P, const int *psize,
			       const int *psink, int sinks, int n)
{
	double pairs = 0;
	for (int g = 0; g < ng; g++) {
		int64_t keys = sinks;
		for (int c = 0; c < P; c++)
			keys += take[(size_t)g * P + c] ? psize[c] - psink[c] : 0;
		pairs += (double)gsize[g] * (double)keys;
	}
	return pairs / ((double)n * n);
}

static void take_ref(const float *sc, int ng, const int *gsize, int P, const int *psize, const int *psink, int n,
		     bool matched, const dg_budget *b, int min_parts, unsigned char *take)
{
	size_t sz = (size_t)ng * P;
	if (!matched || b->budget != DG_BUDGET_TOPP) {
		take_at(sc, ng, P, psize, n, b, min_parts, take);
		return;
	}
	int sinks = b->sink_hi > b->sink_lo ? b->sink_hi - b->sink_lo : 0;
	unsigned char *lo_t = malloc(sz), *hi_t = malloc(sz), *mid_t = malloc(sz);
	dg_budget t = *b;
	double lo = ldexp(1.0, -30), hi = 1, dlo = 0;
	t.topp = hi;
	take_at(sc, ng, P, psize, n, &t, min_parts, hi_t);
	double dhi = take_density_ref(hi_t, ng, gsize, P, psize, psink, sinks, n);
	bool low = false;
	if (dhi > b->rho) {
		t.topp = lo;
		take_at(sc, ng, P, psize, n, &t, min_parts, lo_t);
		dlo = take_density_ref(lo_t, ng, gsize, P, psize, psink, sinks, n);
		if (dlo > b->rho + DG_PEER_MATCH_TOL && min_parts > 1) { /* the floor lowered: a linear scan */
			int m = min_parts - 1;
			for (; m > 1; m--) {
				take_at(sc, ng, P, psize, n, &t, m, mid_t);
				if (take_density_ref(mid_t, ng, gsize, P, psize, psink, sinks, n) <= b->rho)
					break;
			}
			min_parts = m;
			t.topp = hi;
			take_at(sc, ng, P, psize, n, &t, min_parts, hi_t);
			dhi = take_density_ref(hi_t, ng, gsize, P, psize, psink, sinks, n);
			t.topp = lo;
			take_at(sc, ng, P, psize, n, &t, min_parts, lo_t);
			dlo = take_density_ref(lo_t, ng, gsize, P, psize, psink, sinks, n);
		}
		for (int s = 0; s < DG_PEER_MATCH_STEPS && dlo < b->rho; s++) {
			t.topp = 0.5 * (lo + hi);
			take_at(sc, ng, P, psize, n, &t, min_parts, mid_t);
			double dm = take_density_ref(mid_t, ng, gsize, P, psize, psink, sinks, n);
			unsigned char *x = mid_t;
			if (dm >= b->rho)
				mid_t = hi_t, hi_t = x, hi = t.topp, dhi = dm;
			else
				mid_t = lo_t, lo_t = x, lo = t.topp, dlo = dm;
		}
		low = dlo >= b->rho || b->rho - dlo <= dhi - b->rho;
	}
	memcpy(take, low ? lo_t : hi_t, sz);
	free(lo_t), free(hi_t), free(mid_t);
}

/* random part scores that stress the ranking: ties, -0 beside +0, negatives, -INFINITY and forced
 * parts (+INFINITY); kind 0 softmax-like (nonnegative), 1 signed logits, 2 a few distinct signed values */
static float part_score(int kind)
{
	int r = rand() % 64;
	if (r == 0)
		return INFINITY;
	if (r == 1)
		return kind ? -INFINITY : 0.0f;
	if (r == 2)
		return -0.0f; /* equal to +0 (kind 0's -INFINITY slot and kind 2's lowest value) */
	if (kind == 2) { /* signed: -0 and +0 side by side in most groups */
		float v = (float)(rand() % 4) * 0.25f;
		return rand() % 2 ? -v : v;
	}
	float u = (float)rand() / (float)RAND_MAX;
	return kind == 1 ? 4 * u - 2 : u * u * u;
}

/* dg_peer_take against take_ref over random shapes, budgets and score kinds; returns mismatches */
static int check_take(int trials)
{
	int bad = 0;
	for (int t = 0; t < trials; t++) {
		int ng = 1 + rand() % 40, P = 1 + rand() % 300, kind = t % 3, min_parts = rand() % 4 ? 0 : rand() % 5;
		int *gsize = malloc(sizeof(int) * (size_t)ng), *psize = malloc(sizeof(int) * (size_t)P),
		    *psink = malloc(sizeof(int) * (size_t)P), n = 0;
		for (int c = 0; c < P; c++)
			psize[c] = 1 + rand() % 64, n += psize[c];
		for (int g = 0; g < ng; g++)
			gsize[g] = 1 + rand() % 64;
		dg_budget b = { DG_KV_TOKEN, t % 4 == 0 ? DG_BUDGET_TOPK : DG_BUDGET_TOPP, 0.02 + 0.5 * rand() / RAND_MAX,
				(double)rand() / RAND_MAX, 0, rand() % 3 ? 0 : rand() % 100 };
		b.sink_hi = b.sink_hi < n ? b.sink_hi : n;
		for (int c = 0, at = 0; c < P; at += psize[c], c++) { /* each part's keys inside the sinks */
			int l = at > b.sink_lo ? at : b.sink_lo, h = at + psize[c] < b.sink_hi ? at + psize[c] : b.sink_hi;
			psink[c] = h > l ? h - l : 0;
		}
		float *sc = malloc(sizeof(float) * (size_t)ng * P);
		for (size_t j = 0; j < (size_t)ng * P; j++)
			sc[j] = part_score(kind);
		dg_policy pol;
		if (dg_policy_parse(t % 2 ? "xattention/budget=matched" : "xattention", &pol))
			exit(1);
		unsigned char *a = malloc((size_t)ng * P), *r = malloc((size_t)ng * P);
		dg_peer_take(sc, ng, gsize, P, psize, psink, n, &pol, &b, min_parts, a);
		take_ref(sc, ng, gsize, P, psize, psink, n, pol.matched, &b, min_parts, r);
		bad += memcmp(a, r, (size_t)ng * P) != 0;
		free(gsize), free(psize), free(psink), free(sc), free(a), free(r);
	}
	return bad;
}

int main(void)
{
	unsigned long seed = getenv("DSGAP_TEST_SEED") ? strtoul(getenv("DSGAP_TEST_SEED"), NULL, 10)
						      : (unsigned long)time(NULL) ^ (unsigned long)getpid();
	printf("seed %lu\n", seed);
	dg_attn_init_threads();

	/* the part selection every scored peer shares, against its plain form */
	int bad = check_take(600);
	CHECKF(bad == 0, "dg_peer_take equals the comparison-sort, linear-scan reference (%d of 600 differ)", bad);

	{ /* skipsoftmax's switches: a negative threshold, top-p, and score=runmax off 128x128 raster
	   * tiles are refused; inf parses */
		dg_policy pp;
		CHECK("skipsoftmax: threshold=-1, budget=topp and group=pca are refused; threshold=inf parses",
		      dg_policy_parse("skipsoftmax/threshold=-1", &pp) && dg_policy_parse("skipsoftmax/budget=topp:0.9", &pp) &&
			      dg_policy_parse("skipsoftmax/group=pca", &pp) && !dg_policy_parse("skipsoftmax/threshold=inf", &pp) &&
			      isinf(pp.threshold) && dg_policy_is_peer(&pp));
	}

	/* static masks: input-independent (Radial §2.6, STA §2.7, DiTFastAttn's window §2.9) */
	const char *masks[3] = { "radial", "sta", "ditfastattn" };
	int big[3] = { 12, 32, 32 };
	for (int m = 0; m < 3; m++) {
		int nn = m == 2 ? 2048 : 12288;
		dg_groups g1, g2;
		dg_selection s1, s2;
		meta(masks[m], 1, nn, big, &g1, &s1);
		meta(masks[m], 2, nn, big, &g2, &s2);
		double dens = density_of(&g1, &s1);
		CHECKF(same_meta(&g1, &s1, &g2, &s2) && dens < 0.9,
		       "%s: the mask does not depend on Q/K (density %.3f)", masks[m], dens);
		dg_groups_free(&g1), dg_groups_free(&g2), dg_selection_free(&s1), dg_selection_free(&s2);
	}
	{ /* radial: frame pairs at distance <= 1 and key frame 0 (the sink) kept, 12 frames of 1024 */
		dg_groups g;
		dg_selection s;
		meta("radial", 1, 12288, big, &g, &s);
		int ok = 1;
		for (int t = 0; t < g.ngroups; t++) {
			int fq = g.perm[g.off[t]] / 1024, cnt[12] = { 0 };
			for (int64_t e = s.off[t]; e < s.off[t + 1]; e++)
				cnt[s.idx[e] / 1024]++;
			ok &= cnt[0] == 1024 && cnt[fq] == 1024 && (fq == 0 || cnt[fq - 1] > 0);
			ok &= fq < 9 || (cnt[fq - 8] > 0 && cnt[fq - 8] < cnt[fq - 2]); /* the band halves */
		}
		CHECK("radial: sink frame, own and neighbouring frames kept, bands narrower with distance", ok);
		dg_groups_free(&g), dg_selection_free(&s);
	}
	{ /* radial's block mask = the token-mask form's, frames of 1024, 390, 520 and 77 tokens (not
	   * multiples of 128, some under it), three decays */
		const int shapes[4][3] = { { 12, 32, 32 }, { 6, 13, 30 }, { 9, 20, 26 }, { 5, 7, 11 } };
		const double decays[3] = { 1.0, 0.3, 4.0 };
		int bad = 0, runs = 0;
		for (int sh = 0; sh < 4; sh++)
			for (int de = 0; de < 3; de++) {
				char spec[64];
				snprintf(spec, sizeof spec, "radial/decay=%g", decays[de]);
				bad += !radial_matches_ref(spec, shapes[sh][0], shapes[sh][1], shapes[sh][2], decays[de]);
				runs++;
			}
		CHECKF(bad == 0, "radial: the block mask equals the token-mask reference (%d of %d shapes x decays differ)",
		       bad, runs);
	}

	/* a synthetic unit: 4x16x20 = 1280 tokens, head_dim 32 */
	char dir[] = "/tmp/dsgap-test-peers-XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	char *trace = dg_path_join(dir, "t.h5");
	dg_synth_opts so;
	dg_synth_defaults(&so);
	so.grid[0] = 4, so.grid[1] = 16, so.grid[2] = 20;
	so.heads = 4, so.head_dim = 32, so.layers = 1, so.steps = 1, so.seed = seed;
	CHECK("synth writes a 1280-token trace", dg_synth(&so, trace) == 0);
	dg_trace t;
	if (dg_trace_open(&t, trace))
		return 1;
	n = t.meta.tokens, d = t.meta.head_dim;
	memcpy(grid, t.meta.grid, sizeof grid);
	q = malloc(sizeof(float) * n * d), k = malloc(sizeof(float) * n * d), v = malloc(sizeof(float) * n * d);
	P = malloc(sizeof(double) * n * n), O = malloc(sizeof(double) * n * d);
	double *o64 = malloc(sizeof(double) * n * d), *sc = malloc(sizeof(double) * 64 * 64);
	double qs[16], ks[16];
	float *o = malloc(sizeof(float) * n * d);
	char *sel = malloc((size_t)n * n);
	int nb = (n + 127) / 128, skip_below = 0;
	for (int h = 0; h < t.meta.heads; h++) {
		dg_trace_read(&t, DG_QKV_Q, 0, 0, h, q);
		dg_trace_read(&t, DG_QKV_K, 0, 0, h, k);
		dg_trace_read(&t, DG_QKV_V, 0, 0, h, v);
		ref_probs64(q, k, v, n, d, P, O);

		/* xattention (§2.5): tau = 1 is dense; the default against fp64 */
		int64_t pairs = run("xattention/budget=topp:1", 0.15, "warmup=0", 1, o);
		CHECKF(pairs == (int64_t)n * n && rel(o, O) < 1e-4, "head %d: xattention with tau=1 is dense", h);
		xattn64(8, sc);
		int ties = block_sel(sc, 128, 0.9, 0, sel);
		ref_sparse64(P, v, n, d, sel, o64, NULL);
		pairs = run("xattention", 0.15, "warmup=0", 1, o);
		CHECKF(ties || (pairs == count(sel) && rel(o, o64) < 1e-4),
		       "head %d: xattention (S=8, tau=0.9) = fp64 (density %.3f, rel %.2g%s)", h,
		       (double)pairs / n / n, rel(o, o64), ties ? ", near tie: skipped" : "");
		ties = block_sel(sc, 128, 0, 0.25, sel);
		ref_sparse64(P, v, n, d, sel, o64, NULL);
		pairs = run("xattention/budget=topk", 0.25, "warmup=0", 1, o);
		CHECKF(ties || (pairs == count(sel) && rel(o, o64) < 1e-4),
		       "head %d: xattention at matched density 0.25 = fp64 (density %.3f)", h, (double)pairs / n / n);

		/* spargeattn (§2.4): theta between the blocks' self-similarities, so that some are forced */
		sparge64(2, sc, qs, ks); /* theta 2: only the similarities */
		double all[32];
		memcpy(all, qs, sizeof(double) * nb), memcpy(all + nb, ks, sizeof(double) * nb);
		for (int a = 0; a < 2 * nb; a++) /* sort */
			for (int b = a + 1; b < 2 * nb; b++)
				if (all[b] < all[a]) {
					double x = all[a];
					all[a] = all[b], all[b] = x;
				}
		double theta = 0.5 * (all[nb] + all[nb + 1]);
		char spec[96];
		snprintf(spec, sizeof spec, "spargeattn/theta=%.9g", theta);
		sparge64(strtod(spec + 17, NULL), sc, qs, ks);
		ties = block_sel(sc, 128, 0.98, 0, sel);
		ref_sparse64(P, v, n, d, sel, o64, NULL);
		pairs = run(spec, 0.15, "warmup=0", 1, o);
		int forced = 1;
		for (int g = 0; g < nb; g++)
			for (int b = 0; b < nb; b++)
				if (qs[g] < theta || ks[b] < theta)
					forced &= sel[(size_t)g * 128 * n + b * 128];
		CHECKF(ties || (pairs == count(sel) && rel(o, o64) < 1e-4 && forced),
		       "head %d: spargeattn (theta %.3f, tau 0.98) = fp64, low-similarity blocks kept "
		       "(density %.3f)", h, theta, (double)pairs / n / n);
		sparge64(-0.1, sc, qs, ks);
		ties = block_sel(sc, 128, 0, 0.25, sel);
		ref_sparse64(P, v, n, d, sel, o64, NULL);
		pairs = run("spargeattn/theta=-0.1/budget=topk", 0.25, "warmup=0", 1, o);
		CHECKF(ties || (pairs == count(sel) && rel(o, o64) < 1e-4),
		       "head %d: spargeattn top-k at matched density 0.25 = fp64", h);

		/* pisa (§2.12): all blocks selected is exact; the first-order term against fp64 */
		pairs = run("pisa", 1.0, "warmup=0", 1, o);
		CHECKF(pairs == (int64_t)n * n && rel(o, O) < 1e-5, "head %d: pisa with every block selected is exact", h);
		long p64;
		ties = pisa64(0.2, o64, &p64);
		pairs = run("pisa", 0.2, "warmup=0", 1, o);
		CHECKF(ties || (pairs == p64 && rel(o, o64) < 1e-4),
		       "head %d: pisa at density 0.2 = fp64 exact + first-order (rel %.2g)", h, rel(o, o64));

		/* svg2 (§2.2): p = 1 keeps every key; top-k keeps at least rho n keys per cluster */
		pairs = run("svg2/budget=topp:1", 0.15, "warmup=0", 2, o);
		CHECKF(pairs == (int64_t)n * n && rel(o, O) < 1e-4, "head %d: svg2 with p=1 keeps all", h);
		pairs = run("svg2/budget=topk", 0.25, "warmup=0", 2, o);
		CHECKF(pairs >= (int64_t)n * dg_topk_count(0.25, n) && pairs < (int64_t)n * n,
		       "head %d: svg2 top-k keeps whole clusters of >= rho n keys (density %.3f)", h,
		       (double)pairs / n / n);

		/* skipsoftmax (BLASST): threshold inf is dense; thresholds 0 and a middle positive gap equal
		 * fp64 sparse attention over exactly the tiles within them (the skipped ones excluded);
		 * budget=matched reaches rho or its floor (the tiles with gap <= 0) */
		double *gap = malloc(sizeof(double) * nb * nb), pos[1024];
		skip_gaps64(gap);
		int npos = 0;
		for (int e = 0; e < nb * nb; e++)
			if (gap[e] > 0 && isfinite(gap[e]))
				pos[npos++] = gap[e];
		qsort(pos, npos, sizeof *pos, cmp_double);
		skip_below += npos;
		pairs = run("skipsoftmax/threshold=inf", 0.15, "warmup=0", 1, o);
		CHECKF(pairs == (int64_t)n * n && rel(o, O) < 1e-4, "head %d: skipsoftmax with threshold inf is dense", h);
		double thr[2] = { 0, npos > 1 ? 0.5 * (pos[npos / 2] + pos[npos / 2 - 1]) : 0 };
		for (int c = 0; c < 2; c++) {
			ties = skip_sel(gap, thr[c], sel);
			ref_sparse64(P, v, n, d, sel, o64, NULL);
			snprintf(spec, sizeof spec, "skipsoftmax/threshold=%.9g", thr[c]);
			pairs = run(spec, 0.15, "warmup=0", 1, o);
			CHECKF(ties || (pairs == count(sel) && rel(o, o64) < 1e-4),
			       "head %d: skipsoftmax threshold %.3g = fp64 over the kept tiles (density %.3f, fp64 %.3f, "
			       "rel %.2g)", h, thr[c], (double)pairs / n / n, (double)count(sel) / n / n, rel(o, o64));
		}
		skip_sel(gap, 0, sel);
		double floor64 = (double)count(sel) / n / n;
		for (int c = 0; c < 2; c++) {
			double rho = c ? 0.5 * (floor64 + 1) : 0.5 * floor64;
			pairs = run("skipsoftmax/budget=matched", rho, "warmup=0", 1, o);
			double dens = (double)pairs / n / n;
			CHECKF(rho < floor64 ? fabs(dens - floor64) < 1e-9 : fabs(dens - rho) <= DG_PEER_MATCH_TOL,
			       "head %d: skipsoftmax budget=matched at %.3f computes %.3f (floor %.3f)", h, rho, dens,
			       floor64);
		}
		free(gap);

		/* chipmunk (§2.11), ditfastattn (§2.9): the cached delta at the same step is exact */
		for (int m = 0; m < 2; m++) {
			const char *pol = m ? "ditfastattn" : "chipmunk";
			pairs = run(pol, 0.1, "warmup=1,anchors=0", 2, o);
			CHECKF(pairs < (int64_t)n * n / 2 && rel(o, O) < 1e-5,
			       "head %d: %s's cached delta on the anchor's own Q/K/V is exact (density %.3f)",
			       h, pol, (double)pairs / n / n);
		}
	}
	CHECKF(skip_below > 20, "skipsoftmax: %d tiles have a positive gap over the heads "
	       "(the checks above need some skipped)", skip_below);
	dg_trace_close(&t);
	free(q), free(k), free(v), free(P), free(O), free(o64), free(sc), free(o), free(sel);
	char cmd[512];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	free(trace);
	if (system(cmd))
		return 1;
	return test_report();
}
