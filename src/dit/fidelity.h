/*
 * fidelity.h: end-to-end fidelity of generated frames against the dense run (docs/spec.md §4, closed
 * loop), on the final latents (C, F, H, W) per frame f (for the bundled pixel-space model these
 * are the frames themselves):
 *   psnr  10 log10(L^2 / MSE) over the frame's C*H*W values, L = max - min of the dense frame
 *         (as the open-loop psnr of docs/spec.md §4); +inf when identical
 *   ssim  mean over channels and pixels of the SSIM map (Wang et al. 2004) with an 11x11 Gaussian
 *         window (sigma 1.5) renormalised where it leaves the frame, C1 = (0.01 L)^2,
 *         C2 = (0.03 L)^2, same L
 */
#ifndef DG_FIDELITY_H
#define DG_FIDELITY_H

/* psnr[f], ssim[f] for f < F of x against ref, both (C, F, H, W). */
void dg_frames_fidelity(const float *ref, const float *x, int C, int F, int H, int W, double *psnr,
			double *ssim);

#endif
