/*
 * synth.h: structured synthetic traces, for tests and for the demo when no captured trace is at hand.
 *   dsgap synth --out T.h5 [--grid FxHxW] [--heads H] [--head-dim D] [--layers L] [--steps S] [--seed X]
 *                          [--text T]
 *
 * Tokens are a latent grid of frames x height x width, after a text prefix of T tokens (--text, default
 * 0; joint attention, docs/spec.md §3.7): each text token's q, k and v are unit Gaussians of its own
 * (layer, head) stream, the same at every step, unrelated to the grid. Each (layer, head) is one of
 * four kinds, cycling with head + layer, so every layer holds every kind when heads >= 4.
 * Measured on the defaults (1024 tokens; tests/trace/test_trace.c checks the bounds in brackets):
 *   local    attention decays with the 3D distance of token positions (random Fourier features of
 *            (f, y, x), like RoPE): the top 15% of keys hold 0.85-0.92 of a query's mass [0.6, 0.95]
 *            (0.76-0.79 at 4608 tokens)
 *   frame    features of (y, x) only: a query attends to its own spatial position in every frame,
 *            which holds 0.57-0.70 of the mass [> 0.4]; top 15% hold 0.87-0.89
 *   sink     2-4 global sink tokens (listed in the config) hold 0.70-0.85 of the mass [> 0.5]
 *   diffuse  near-uniform: the top 15% of keys hold 0.25-0.27 [< 0.4]
 * Layers differ too: lengthscales shrink or grow by 15% with layer % 3.
 * On top of every kind, content: per-token latent vectors shared by all heads (a smooth field in
 * position plus a per-token part), projected by per-head matrices into Q, K and V. V is a smooth
 * function of position plus content. The latents drift slowly across steps (an AR(1) process,
 * z_s = sqrt(1 - 0.03) z_{s-1} + sqrt(0.03) noise), so consecutive steps are similar, not identical.
 * Steps are the first S steps (step_index 0..S-1) of a 50-step flow-matching schedule with shift 5:
 * t = 1 - i/50, sigma = 5t / (1 + 4t), timestep = 1000 sigma. Each (layer, head) is generated from
 * its own stream of gsl_rng_mt19937 derived from the seed, the latents from another.
 */
#ifndef DG_SYNTH_H
#define DG_SYNTH_H

#include <stddef.h>

#include "trace/trace.h"

typedef enum {
	DG_SYNTH_LOCAL, DG_SYNTH_FRAME, DG_SYNTH_SINK, DG_SYNTH_DIFFUSE, DG_SYNTH_KIND_COUNT
} dg_synth_kind;
const char *dg_synth_kind_name(dg_synth_kind kind); /* "local", "frame", "sink", "diffuse" */
dg_synth_kind dg_synth_head_kind(int layer, int head);

#define DG_SYNTH_SCHEDULE_STEPS 50
#define DG_SYNTH_SHIFT 5.0

typedef struct {
	int grid[3]; /* frames, height, width in tokens: default 4x16x16, at most 131072 tokens */
	int heads;   /* default 4, 1..128 */
	int head_dim; /* default 64, 32..256 */
	int layers;  /* default 2, 1..128 */
	int steps;   /* default 8, 1..50 */
	unsigned long seed; /* default 1 */
	int text;    /* text tokens before the grid's: default 0, 0..4096 */
} dg_synth_opts;

void dg_synth_defaults(dg_synth_opts *o);
/* Check the options: one-line error and -1 if one is out of range. */
int dg_synth_check(const dg_synth_opts *o);
/* Write the trace to out_path (atomically: a temporary name renamed at the end). */
int dg_synth(const dg_synth_opts *o, const char *out_path);

/* "synth: grid=4x16x16 heads=4 layers=2 steps=8 head_dim=64 seed=1 text=0" (any subset of the keys,
 * the rest default; "synth:" optional) -> o. The syntax only (dg_synth_check the ranges): -1 with the
 * problem in err (no report, so that a caller can name FILE:LINE). */
int dg_synth_spec_parse(const char *spec, dg_synth_opts *o, char *err, size_t size);
/* The canonical spec of o, every key written (text only when > 0) (malloc'd). */
char *dg_synth_spec(const dg_synth_opts *o);
/* The metadata dg_synth writes for o (steps of the 50-step schedule, indices 0..n-1), without
 * reading a file. */
void dg_synth_meta(const dg_synth_opts *o, dg_trace_meta *m);

#endif
