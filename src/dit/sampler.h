/*
 * sampler.h: flow-matching samplers of the Wan2.1 pipeline (reference §1.7): the schedule, Euler
 * and UniPC (bh2, order 2, x0-prediction, lower order at the last step), as the original
 * FlowUniPCMultistepScheduler (wan/utils/fm_solvers_unipc.py) computes them.
 *
 *   schedule: s_i = linspace(0.999, 0, N+1)[i] for i < N, sigma_i = shift s / (1 + (shift-1) s),
 *             sigma_N = 0; the model's timestep is trunc(1000 sigma_i) (int64 in the original)
 *   model:    v = noise - x0 (flow prediction), x_sigma = (1 - sigma) x0 + sigma noise
 *   Euler:    x_{i+1} = x_i + (sigma_{i+1} - sigma_i) v
 *   UniPC:    m_i = x_i - sigma_i v (x0 prediction); UniC corrector from step 1 on; UniP predictor
 *             of order min(2, N - i, i + 1)
 *   CFG:      v = v_uncond + g (v_cond - v_uncond)   (dg_cfg_combine; g = 1 means one pass)
 */
#ifndef DG_SAMPLER_H
#define DG_SAMPLER_H

#include <stddef.h>

typedef enum { DG_SAMPLER_UNIPC, DG_SAMPLER_EULER, DG_SAMPLER_COUNT } dg_sampler_kind;
const char *dg_sampler_name(dg_sampler_kind k);
int dg_sampler_parse(const char *s, dg_sampler_kind *k); /* 0 or -1 (no message) */

/* sigmas (steps+1) and model timesteps (steps) of the shifted schedule. */
void dg_flow_schedule(int steps, double shift, double *sigmas, double *timesteps);

typedef struct dg_sampler dg_sampler;

/* A sampler over latents of n floats. steps >= 1, shift > 0. */
dg_sampler *dg_sampler_new(dg_sampler_kind kind, int steps, double shift, size_t n);
void dg_sampler_free(dg_sampler *s);
int dg_sampler_steps(const dg_sampler *s);
double dg_sampler_sigma(const dg_sampler *s, int i);    /* i in 0..steps (sigma_steps = 0) */
double dg_sampler_timestep(const dg_sampler *s, int i); /* i in 0..steps-1 */
/* Advance x (n) in place from step i to i+1 with the model output v (n); steps in order 0, 1, ... */
void dg_sampler_step(dg_sampler *s, int i, const float *v, float *x);

/* v = uncond + g (cond - uncond), into cond. */
void dg_cfg_combine(float *cond, const float *uncond, double g, size_t n);

#endif
