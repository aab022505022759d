/*
 * cache_store.h: how a cached-residual policy stores its cache between steps (issue 21, docs/spec.md
 * §3.1 `residual_dtype`, `keys`): the residual R = O_dense - O_sparse in fp32, bf16 or fp8, and the
 * key lists as int32 lists or one bitmap per group. The CPU backend stores exactly these bytes and
 * decodes them before use; the GPU backend must give the same values bit for bit (tests/backend/gpu_cache.c).
 *
 * Residual storage of an (n, d) residual, row i = one query's output row:
 *   fp32  n*d floats, exact.
 *   bf16  n*d bf16 words, each value rounded to nearest even (dg_f32_to_bf16).
 *   fp8   n*d e4m3 bytes (OCP "E4M3FN": bias 7, max 448, no infinities) and n per-row scales.
 *         The scale of a row is a power of two, 2^e with e the smallest integer such that
 *         max_j |r_ij| <= 448 * 2^e (e clamped to [-100, 100]; a row of zeros has e = 0), so
 *         that scaling and unscaling are exact: byte = e4m3(r * 2^-e) rounded to nearest even and
 *         saturated to +-448 (NaN -> 0x7f), value = e4m3_value(byte) * 2^e. Against a real-valued
 *         scale amax/448 it loses nothing but the top of e4m3's range (<= 1 binade); it needs no
 *         division, so CPU and GPU agree exactly.
 *
 * Key-list storage of a token selection (ngroups groups over n keys, lists ascending):
 *   list    int32 indices, K per group: 4 K bytes a group, which grows with rho;
 *   bitmap  one bit per key, ceil(n/32) 32-bit words a group (bit j%32 of word j/32): n/8 bytes a
 *           group whatever rho; smaller than int32 lists above rho = 1/32, smaller than 16-bit
 *           offsets above rho = 1/16. Lossless: the ascending list is the bitmap's set bits.
 */
#ifndef DG_CACHE_STORE_H
#define DG_CACHE_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"
#include "policy/select.h"

/* fp8 e4m3 (E4M3FN): round to nearest even, saturating to +-448; NaN -> 0x7f. */
uint8_t dg_f32_to_e4m3(float x);
float dg_e4m3_to_f32(uint8_t b);
/* The exponent e of a row's fp8 scale 2^e (above). */
int dg_fp8_row_exp(const float *row, int d);

/* Bytes of one head's stored residual (n, d). */
size_t dg_residual_bytes(dg_resdtype t, int64_t n, int d);
/* A stored residual: the bytes of dg_residual_bytes. fp8: n*d bytes, then n floats (the scales 2^e)
 * at the next multiple of 16 bytes. */
void dg_residual_encode(dg_resdtype t, const float *r, int n, int d, void *store);
void dg_residual_decode(dg_resdtype t, const void *store, int n, int d, float *r);
/* r rounded in place to what storage in t gives back (encode then decode). */
void dg_residual_round(dg_resdtype t, float *r, int n, int d);

/* 32-bit words of one group's key bitmap over n keys. */
static inline int64_t dg_bitmap_words(int64_t n) { return (n + 31) / 32; }
/* Bitmaps (ngroups, dg_bitmap_words(n)) of a token selection over n keys. */
void dg_bitmap_encode(const dg_selection *s, int n, uint32_t *bits);
/* The selection back from bitmaps (ascending lists; free with dg_selection_free). */
void dg_bitmap_decode(const uint32_t *bits, int ngroups, int n, dg_selection *s);

#endif
