/*
 * generate.h: one closed-loop run (docs/spec.md §1, §4): a whole denoising run of the DiT engine with a
 * policy inside every self-attention call, and its fidelity against the dense run of the same
 * noise and prompt. Shared by `dsgap generate` (cmd_generate.c: dense and every policy in one
 * process) and the closed-loop cells of `dsgap run` (batch_closed.c: one run per cell, the
 * fidelity computed when the cells are merged).
 */
#ifndef DG_GENERATE_H
#define DG_GENERATE_H

#include "dit/dit_attn.h"
#include "dit/dit_sample.h"
#include "policy/policy.h"

typedef struct {
	dg_dit_attn_stats as;   /* attention: units, computed pairs, time; the offload's copies */
	dg_dit_sample_stats ss; /* transformer and total time */
	double density;         /* computed (query, key) pairs / N^2 over every self-attention call */
} dg_generate_stats;

/*
 * Sample so (model, latent, noise, prompt contexts, steps, ...; so->attn and so->label are set
 * here) under policy p at top-k density rho with the schedule; grid: the token grid (dg_wan_grid).
 * offload: --cache-offload (dit_attn.h; a no-op on the CPU). out (out_dim, F, H, W) receives the
 * final latents. quiet: no progress line (nor memory plan, nor the offload's lines).
 * First the memory plan (memplan.h), printed to stderr: a run that does not fit the device (its total
 * memory; or DSGAP_MEM_LIMIT_GIB, on any device), or whose offloaded caches do not fit the host
 * (dg_memplan_host_limit), is refused with the switches that would fit. 0 or -1 (reported).
 */
int dg_generate_run(dg_dit_sample_opts *so, const int grid[3], const dg_policy *p, double rho,
		    const dg_schedule *sched, bool offload, bool quiet, float *out, dg_generate_stats *st);

/* Fidelity of x against ref, both (C, F, H, W), per frame (fidelity.h), summarised over frames. */
typedef struct {
	double psnr, ssim;         /* means over the frames */
	double psnr_min, ssim_min; /* the worst frame */
} dg_fidelity_summary;
void dg_fidelity_summarise(const float *ref, const float *x, int C, int F, int H, int W,
			   dg_fidelity_summary *s);

#endif
