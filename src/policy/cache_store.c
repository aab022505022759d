/*
 * cache_store.c: residual and key-list storage of the cached policies (cache_store.h).
 */
#include "policy/cache_store.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

uint8_t dg_f32_to_e4m3(float x)
{
	if (isnan(x))
		return 0x7f;
	uint8_t sign = signbit(x) ? 0x80 : 0;
	float a = fabsf(x);
	if (a >= 448.0f) /* saturate (448 is the largest finite value; ties at 464 go to 448, even) */
		return sign | 0x7e;
	if (a < 0x1p-6f) /* subnormal: m * 2^-9, m = 0..8 (8 is the smallest normal, code 0x08) */
		return sign | (uint8_t)rintf(a * 512.0f);
	int x2;
	float f = frexpf(a, &x2); /* a = f 2^x2, f in [0.5, 1) */
	int e = x2 - 1;           /* a = (2f) 2^e, e in [-6, 8] */
	int m = (int)rintf((2.0f * f - 1.0f) * 8.0f); /* exact product; rintf: nearest even */
	if (m == 8)
		m = 0, e++;
	int code = ((e + 7) << 3) | m;
	return sign | (uint8_t)(code > 0x7e ? 0x7e : code);
}

float dg_e4m3_to_f32(uint8_t b)
{
	int e = (b >> 3) & 15, m = b & 7;
	float v;
	if (e == 15 && m == 7)
		v = NAN;
	else if (e == 0)
		v = ldexpf((float)m, -9);
	else
		v = ldexpf(1.0f + m / 8.0f, e - 7);
	return (b & 0x80) ? -v : v;
}

int dg_fp8_row_exp(const float *row, int d)
{
	float amax = 0;
	for (int j = 0; j < d; j++) {
		float a = fabsf(row[j]);
		if (a > amax) /* NaN never wins */
			amax = a;
	}
	if (amax == 0 || isinf(amax))
		return amax == 0 ? 0 : 100;
	int x;
	frexpf(amax, &x); /* amax in [2^(x-1), 2^x); 448 2^(x-9) = 0.875 2^x */
	int e = amax <= ldexpf(448.0f, x - 9) ? x - 9 : x - 8;
	return e < -100 ? -100 : e > 100 ? 100 : e;
}

static size_t fp8_scale_offset(int64_t n, int d) { return ((size_t)n * d + 15) / 16 * 16; }

size_t dg_residual_bytes(dg_resdtype t, int64_t n, int d)
{
	switch (t) {
	case DG_RESDTYPE_BF16:
		return (size_t)n * d * 2;
	case DG_RESDTYPE_FP8:
		return fp8_scale_offset(n, d) + (size_t)n * sizeof(float);
	default:
		return (size_t)n * d * 4;
	}
}

void dg_residual_encode(dg_resdtype t, const float *r, int n, int d, void *store)
{
	size_t nd = (size_t)n * d;
	if (t == DG_RESDTYPE_FP32) {
		memcpy(store, r, nd * sizeof(float));
	} else if (t == DG_RESDTYPE_BF16) {
		uint16_t *h = store;
		for (size_t e = 0; e < nd; e++)
			h[e] = dg_f32_to_bf16(r[e]);
	} else {
		uint8_t *b = store;
		float *scale = (float *)((char *)store + fp8_scale_offset(n, d));
		for (int i = 0; i < n; i++) {
			int e = dg_fp8_row_exp(r + (size_t)i * d, d);
			float inv = ldexpf(1.0f, -e); /* 2^-e, exact */
			scale[i] = ldexpf(1.0f, e);
			for (int j = 0; j < d; j++)
				b[(size_t)i * d + j] = dg_f32_to_e4m3(r[(size_t)i * d + j] * inv);
		}
	}
}

void dg_residual_decode(dg_resdtype t, const void *store, int n, int d, float *r)
{
	size_t nd = (size_t)n * d;
	if (t == DG_RESDTYPE_FP32) {
		memcpy(r, store, nd * sizeof(float));
	} else if (t == DG_RESDTYPE_BF16) {
		const uint16_t *h = store;
		for (size_t e = 0; e < nd; e++)
			r[e] = dg_bf16_to_f32(h[e]);
	} else {
		float lut[256];
		for (int c = 0; c < 256; c++)
			lut[c] = dg_e4m3_to_f32((uint8_t)c);
		const uint8_t *b = store;
		const float *scale = (const float *)((const char *)store + fp8_scale_offset(n, d));
		for (int i = 0; i < n; i++)
			for (int j = 0; j < d; j++)
				r[(size_t)i * d + j] = lut[b[(size_t)i * d + j]] * scale[i];
	}
}

void dg_residual_round(dg_resdtype t, float *r, int n, int d)
{
	if (t == DG_RESDTYPE_FP32)
		return;
	void *s = dg_malloc(dg_residual_bytes(t, n, d));
	dg_residual_encode(t, r, n, d, s);
	dg_residual_decode(t, s, n, d, r);
	free(s);
}

void dg_bitmap_encode(const dg_selection *s, int n, uint32_t *bits)
{
	int64_t w = dg_bitmap_words(n);
	memset(bits, 0, (size_t)(s->ngroups * w) * sizeof *bits);
	for (int g = 0; g < s->ngroups; g++) {
		uint32_t *row = bits + g * w;
		for (int64_t e = s->off[g]; e < s->off[g + 1]; e++) {
			int j = s->idx[e];
			DG_ASSERT(j >= 0 && j < n);
			row[j >> 5] |= 1u << (j & 31);
		}
	}
}

void dg_bitmap_decode(const uint32_t *bits, int ngroups, int n, dg_selection *s)
{
	int64_t w = dg_bitmap_words(n), total = 0;
	s->ngroups = ngroups;
	s->off = dg_malloc((size_t)(ngroups + 1) * sizeof *s->off);
	s->off[0] = 0;
	for (int g = 0; g < ngroups; g++) {
		for (int64_t k = 0; k < w; k++)
			total += __builtin_popcount(bits[g * w + k]);
		s->off[g + 1] = total;
	}
	s->idx = dg_malloc((size_t)(total > 0 ? total : 1) * sizeof *s->idx);
	int64_t e = 0;
	for (int g = 0; g < ngroups; g++)
		for (int64_t k = 0; k < w; k++)
			for (uint32_t x = bits[g * w + k]; x; x &= x - 1)
				s->idx[e++] = (int)(k * 32 + __builtin_ctz(x));
}
