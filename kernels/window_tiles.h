/*
 * window_tiles.h: window attention's key tiles (dg_window_fwd, kernels/window_fwd.cu), in C for the
 * kernel (attn_sm90.cuh, WINDOW) and its CPU test (tests/kernels/test_window_tiles.c) alike.
 *   dg_window_attends   query i attends key j: i < text, j < text or |i - j| <= w (DiTFastAttn's
 *                       window, docs/spec.md §2.9; peers.c's window lists on the CPU);
 *   dg_window_tiles_of  the key tiles of query rows r0 .. r0+rows-1 of n tokens: rows holding a text
 *                       row walk every key; others the text keys [0, text), then [r0, min(n, r1 + w))
 *                       (its first tile the diagonal one: every row meets a key of its own in its
 *                       first tile, so no running max starts at -inf), then [max(text, r0 - w), r0);
 *                       each segment in tiles of bn keys from its start, the last one short;
 *   dg_window_tile      tile t's first key and key count (t < dg_window_tiles_count);
 *   dg_window_tile_full every pair of the rows and the tile's keys attended (no per-pair mask needed).
 */
#ifndef DG_WINDOW_TILES_H
#define DG_WINDOW_TILES_H

#include <stdlib.h>

#ifdef __CUDACC__
#define DG_WT_FN static __host__ __device__ __forceinline__
#define DG_WT_MIN(a, b) min(a, b)
#define DG_WT_MAX(a, b) max(a, b)
#else
#define DG_WT_FN static inline
#define DG_WT_MIN(a, b) ((a) < (b) ? (a) : (b))
#define DG_WT_MAX(a, b) ((a) > (b) ? (a) : (b))
#endif

typedef struct {
	int r0, r1, text, w;    /* rows [r0, r1); w clipped to n */
	int la, b0, lb, c0, lc; /* segments [0, la), [b0, b0 + lb), [c0, c0 + lc) */
	int na, nb, nc;         /* their tiles */
} dg_window_tiles;

DG_WT_FN int dg_window_attends(int i, int j, int text, int w)
{
	return j < text || i < text || abs(i - j) <= w;
}

DG_WT_FN dg_window_tiles dg_window_tiles_of(int n, int text, int w, int r0, int rows, int bn)
{
	dg_window_tiles t;
	t.r0 = r0, t.r1 = r0 + rows, t.text = text, t.w = DG_WT_MIN(w, n);
	if (t.r0 < t.text) {
		t.la = n, t.b0 = t.lb = t.c0 = t.lc = 0;
	} else {
		t.la = t.text, t.b0 = t.r0, t.lb = DG_WT_MIN(n, t.r1 + t.w) - t.r0;
		t.c0 = DG_WT_MAX(t.text, t.r0 - t.w), t.lc = t.r0 - t.c0;
	}
	t.na = (t.la + bn - 1) / bn, t.nb = (t.lb + bn - 1) / bn, t.nc = (t.lc + bn - 1) / bn;
	return t;
}

DG_WT_FN int dg_window_tiles_count(const dg_window_tiles *t) { return t->na + t->nb + t->nc; }

DG_WT_FN void dg_window_tile(const dg_window_tiles *t, int k, int bn, int *start, int *nv)
{
	if (k < t->na) {
		*start = k * bn, *nv = DG_WT_MIN(bn, t->la - *start);
	} else if (k < t->na + t->nb) {
		*start = t->b0 + (k - t->na) * bn, *nv = DG_WT_MIN(bn, t->b0 + t->lb - *start);
	} else {
		*start = t->c0 + (k - t->na - t->nb) * bn, *nv = DG_WT_MIN(bn, t->c0 + t->lc - *start);
	}
}

DG_WT_FN int dg_window_tile_full(const dg_window_tiles *t, int start, int nv)
{
	return t->r1 <= t->text || start + nv <= t->text ||
	       (t->r1 - 1 - start <= t->w && start + nv - 1 - t->r0 <= t->w);
}

#endif
