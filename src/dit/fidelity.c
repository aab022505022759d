/*
 * fidelity.c: per-frame PSNR and SSIM of latents against a reference (fidelity.h). Separable
 * Gaussian filtering in fp64, window renormalised at the borders.
 */
#include "dit/fidelity.h"

#include <math.h>
#include <stdlib.h>

#include "util/util.h"

#define RADIUS 5
#define SIGMA 1.5

/* out (H, W) = normalised Gaussian blur of in (H, W) (weights renormalised at the borders) */
static void blur(const double *in, int H, int W, const double *g, double *tmp, double *out)
{
	for (int i = 0; i < H; i++)
		for (int j = 0; j < W; j++) {
			double s = 0, ws = 0;
			for (int k = -RADIUS; k <= RADIUS; k++)
				if (j + k >= 0 && j + k < W) {
					s += g[k + RADIUS] * in[(size_t)i * W + j + k];
					ws += g[k + RADIUS];
				}
			tmp[(size_t)i * W + j] = s / ws;
		}
	for (int i = 0; i < H; i++)
		for (int j = 0; j < W; j++) {
			double s = 0, ws = 0;
			for (int k = -RADIUS; k <= RADIUS; k++)
				if (i + k >= 0 && i + k < H) {
					s += g[k + RADIUS] * tmp[(size_t)(i + k) * W + j];
					ws += g[k + RADIUS];
				}
			out[(size_t)i * W + j] = s / ws;
		}
}

void dg_frames_fidelity(const float *ref, const float *x, int C, int F, int H, int W, double *psnr,
			double *ssim)
{
	double g[2 * RADIUS + 1];
	for (int k = -RADIUS; k <= RADIUS; k++)
		g[k + RADIUS] = exp(-k * k / (2 * SIGMA * SIGMA));
	size_t hw = (size_t)H * W;
	double *a = dg_malloc(hw * sizeof(double)), *b = dg_malloc(hw * sizeof(double));
	double *p = dg_malloc(hw * sizeof(double)), *tmp = dg_malloc(hw * sizeof(double));
	double *ma = dg_malloc(hw * sizeof(double)), *mb = dg_malloc(hw * sizeof(double));
	double *saa = dg_malloc(hw * sizeof(double)), *sbb = dg_malloc(hw * sizeof(double));
	double *sab = dg_malloc(hw * sizeof(double));
	for (int f = 0; f < F; f++) {
		double lo = INFINITY, hi = -INFINITY, se = 0;
		for (int c = 0; c < C; c++)
			for (size_t e = 0; e < hw; e++) {
				size_t i = ((size_t)c * F + f) * hw + e;
				double r = ref[i], d = (double)x[i] - r;
				lo = r < lo ? r : lo;
				hi = r > hi ? r : hi;
				se += d * d;
			}
		double L = hi - lo > 0 ? hi - lo : 1, mse = se / ((double)C * hw);
		psnr[f] = mse > 0 ? 10 * log10(L * L / mse) : INFINITY;
		double c1 = (0.01 * L) * (0.01 * L), c2 = (0.03 * L) * (0.03 * L), sum = 0;
		for (int c = 0; c < C; c++) {
			for (size_t e = 0; e < hw; e++) {
				size_t i = ((size_t)c * F + f) * hw + e;
				a[e] = ref[i];
				b[e] = x[i];
			}
			blur(a, H, W, g, tmp, ma);
			blur(b, H, W, g, tmp, mb);
			for (size_t e = 0; e < hw; e++)
				p[e] = a[e] * a[e];
			blur(p, H, W, g, tmp, saa);
			for (size_t e = 0; e < hw; e++)
				p[e] = b[e] * b[e];
			blur(p, H, W, g, tmp, sbb);
			for (size_t e = 0; e < hw; e++)
				p[e] = a[e] * b[e];
			blur(p, H, W, g, tmp, sab);
			for (size_t e = 0; e < hw; e++) {
				double va = saa[e] - ma[e] * ma[e], vb = sbb[e] - mb[e] * mb[e];
				double cov = sab[e] - ma[e] * mb[e];
				sum += ((2 * ma[e] * mb[e] + c1) * (2 * cov + c2)) /
				       ((ma[e] * ma[e] + mb[e] * mb[e] + c1) * (va + vb + c2));
			}
		}
		ssim[f] = sum / ((double)C * hw);
	}
	free(a), free(b), free(p), free(tmp), free(ma), free(mb), free(saa), free(sbb), free(sab);
}
