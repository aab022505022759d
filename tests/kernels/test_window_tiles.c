/*
 * test_window_tiles.c: the window kernel's key tiles and mask (kernels/window_tiles.h, the code the
 * kernel runs) on the CPU, for every 128-query item of many shapes (n 1 .. 1300, text prefixes 0 ..
 * n, half-widths 0 .. past n):
 *   - the tiles lie in [0, n), do not overlap, and cover every key some row of the item attends;
 *   - a tile called full has every (row, key) pair attended (it skips the per-pair mask);
 *   - each row's first tile holds a key it attends (no running max starts at -inf);
 *   - the pair rule equals the CPU twin's window lists (peers.c, ditfastattn/window=w), row by row.
 * Mutations tried (2026-12-06): a segment one tile short, full() without its band test, the tiles
 * before the diagonal walked first, |i - j| < w for <= w: each fails at least one check.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/peers.h"
#include "testhelp.h"
#include "window_tiles.h"

#define BN 128

/* every item of (n, text, w): returns the number of violations, each kind counted in bad[4] */
static long check_shape(int n, int text, int w, long bad[4])
{
	unsigned char *cover = malloc((size_t)n);
	long before = bad[0] + bad[1] + bad[2] + bad[3];
	for (int r0 = 0; r0 < n; r0 += BN) {
		const int rows = n - r0 < BN ? n - r0 : BN;
		const dg_window_tiles t = dg_window_tiles_of(n, text, w, r0, rows, BN);
		memset(cover, 0, (size_t)n);
		for (int k = 0; k < dg_window_tiles_count(&t); k++) {
			int s, nv;
			dg_window_tile(&t, k, BN, &s, &nv);
			if (s < 0 || nv < 1 || nv > BN || s + nv > n) {
				bad[0]++;
				continue;
			}
			for (int j = s; j < s + nv; j++)
				bad[0] += cover[j]++ != 0; /* overlap */
			if (dg_window_tile_full(&t, s, nv))
				for (int i = r0; i < r0 + rows; i++)
					for (int j = s; j < s + nv; j++)
						bad[1] += !dg_window_attends(i, j, text, w);
			if (k == 0)
				for (int i = r0; i < r0 + rows; i++) {
					int met = 0;
					for (int j = s; j < s + nv && !met; j++)
						met = dg_window_attends(i, j, text, w);
					bad[2] += !met;
				}
		}
		for (int i = r0; i < r0 + rows; i++)
			for (int j = 0; j < n; j++)
				bad[3] += dg_window_attends(i, j, text, w) && !cover[j];
	}
	free(cover);
	return bad[0] + bad[1] + bad[2] + bad[3] - before;
}

/* the pair rule against the twin's lists (groups of one query), row by row: differing keys */
static long check_twin(int n, int text, int w)
{
	char spec[64];
	snprintf(spec, sizeof spec, "ditfastattn/window=%d", w);
	dg_policy p;
	if (dg_policy_parse(spec, &p))
		return -1;
	dg_budget b = { p.kv, p.budget, 0.2, p.topp, 0, 0 };
	const int grid[3] = { 1, 1, n - text };
	float *x = calloc((size_t)n * 8 * 2, sizeof(float));
	dg_peer_state *st = NULL;
	dg_groups g;
	dg_selection s;
	if (dg_peer_metadata(x, x + (size_t)n * 8, n, 8, &p, &b, grid, text, &st, &g, &s))
		return -1;
	long diff = 0;
	unsigned char *in = malloc((size_t)n);
	for (int q = 0; q < g.ngroups; q++) {
		memset(in, 0, (size_t)n);
		for (int64_t e = s.off[q]; e < s.off[q + 1]; e++)
			in[s.idx[e]] = 1;
		for (int pos = g.off[q]; pos < g.off[q + 1]; pos++)
			for (int j = 0; j < n; j++)
				diff += in[j] != dg_window_attends(g.perm[pos], j, text, w);
	}
	free(in);
	free(x);
	dg_groups_free(&g);
	dg_selection_free(&s);
	dg_peer_state_free(st);
	return diff;
}

int main(void)
{
	static const int ns[] = { 1, 2, 127, 128, 129, 300, 1000, 1300 };
	long bad[4] = { 0, 0, 0, 0 }, shapes = 0, failing = 0;
	for (size_t a = 0; a < sizeof ns / sizeof *ns; a++) {
		const int n = ns[a];
		const int texts[] = { 0, 1, 77 < n ? 77 : n, 200 < n ? 200 : n, n };
		const int ws[] = { 0, 1, 5, 63, 64, 127, 128, 129, 300, n > 1 ? n - 1 : 0, n, n + 5, 1 << 20 };
		for (size_t b = 0; b < sizeof texts / sizeof *texts; b++)
			for (size_t c = 0; c < sizeof ws / sizeof *ws; c++) {
				shapes++;
				if (check_shape(n, texts[b], ws[c], bad)) {
					if (failing++ < 5)
						printf("# n=%d text=%d w=%d: violations\n", n, texts[b], ws[c]);
				}
			}
	}
	CHECKF(bad[0] == 0, "window tiles inside [0, n), not overlapping (%ld shapes; %ld violations)", shapes, bad[0]);
	CHECKF(bad[1] == 0, "a tile called full has every pair attended (%ld pairs not)", bad[1]);
	CHECKF(bad[2] == 0, "each row's first tile holds a key it attends (%ld rows not)", bad[2]);
	CHECKF(bad[3] == 0, "every attended key is in some tile of its row's item (%ld keys missed)", bad[3]);
	static const struct { int n, text, w; } twin[] = { { 300, 0, 64 }, { 1000, 77, 100 }, { 1300, 200, 5 },
							    { 129, 0, 0 }, { 500, 50, 1000 } };
	for (size_t i = 0; i < sizeof twin / sizeof *twin; i++) {
		const long d = check_twin(twin[i].n, twin[i].text, twin[i].w);
		CHECKF(d == 0, "pair rule = the twin's window lists (n %d, text %d, w %d): %ld keys differ", twin[i].n,
		       twin[i].text, twin[i].w, d);
	}
	return test_report();
}
