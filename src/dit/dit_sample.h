/*
 * dit_sample.h: one denoising run of the DiT engine (shared by dsgap capture and dsgap generate):
 * from initial noise through `steps` sampler steps, with classifier-free guidance, every
 * self-attention call going through the given entry point (dit_attn.h), and a progress line with
 * ETA on stderr. Also the inputs: text embeddings and noise files, seeded Gaussian noise.
 */
#ifndef DG_DIT_SAMPLE_H
#define DG_DIT_SAMPLE_H

#include <stdbool.h>

#include "dit/dit_attn.h"
#include "dit/sampler.h"
#include "dit/wan.h"

typedef struct {
	dg_wan_model *model;
	int latent[3];                /* F, H, W of the latents */
	const float *noise;           /* (in_dim, F, H, W) */
	int steps;
	double shift;
	double guidance;              /* 1: no CFG (one pass per step) */
	dg_sampler_kind sampler;
	const dg_wan_context *cond;
	const dg_wan_context *uncond; /* needed when guidance != 1 */
	dg_dit_attn *attn;            /* NULL: dense */
	const char *label;            /* progress line prefix; NULL: quiet */
	float *step_latents;          /* NULL, or (steps, out_dim, F, H, W): the latents after each step */
} dg_dit_sample_opts;

#define DG_DIT_STEP_TIMES 1000 /* steps whose own times are kept (dg_dit_sample_stats.step_s) */

typedef struct {
	double transformer_s; /* time inside the transformer forwards (all passes) */
	double step_s[DG_DIT_STEP_TIMES]; /* of which each step's (its passes), the first steps' */
	double total_s;
	int forwards;
	int shared_forwards;  /* forwards that took the first block's self-attention half from the
			       * step's other CFG pass (dg_wan_call.reuse_first) */
	/* device time of the op table's ops over the run, per kind (wan_ops.h; zeros on the CPU):
	 * GEMMs, attention through the table (dense self-attention sites, cross-attention), the rest */
	double op_seconds[DG_WAN_OPK_COUNT];
} dg_dit_sample_stats;

/* Run it: out (out_dim, F, H, W) receives the final latents. 0 or -1 (reported). */
int dg_dit_sample(const dg_dit_sample_opts *o, float *out, dg_dit_sample_stats *st);

/* Text embeddings (tokens, text_dim) from a file (tensorfile.h); a leading 1 is squeezed.
 * *data (new), *tokens. */
int dg_dit_read_text(const dg_wan_model *m, const char *path, float **data, int *tokens);
/* Noise (in_dim, F, H, W) from a file (a leading 1 squeezed); latent: the expected F, H, W, or
 * zeros to take them from the file. */
int dg_dit_read_noise(const dg_wan_model *m, const char *path, int latent[3], float **data);
/* Gaussian noise (in_dim, F, H, W) from a GSL mt19937 seeded with seed, in C order. */
float *dg_dit_seed_noise(const dg_wan_model *m, const int latent[3], unsigned long seed);

/* "FxHxW" -> latent; 0 or -1 (reported with opt in the message). */
int dg_parse_latent(const char *opt, const char *s, int latent[3]);

/* What capture and generate load before sampling: the model, the prompt contexts, the noise. */
typedef struct {
	const char *model, *text, *negative, *noise, *device;
	int latent[3];      /* F, H, W; zeros: from the noise file */
	unsigned long seed; /* when there is no noise file */
	double guidance;    /* != 1: an unconditional context is made (--negative, else zeros) */
} dg_dit_input_opts;

typedef struct {
	dg_wan_model *model;
	bool borrowed; /* the model is the caller's (dg_dit_inputs_load_with): not freed here */
	dg_wan_context *cond, *uncond;
	float *noise;  /* (in_dim, F, H, W) */
	int latent[3], grid[3];
} dg_dit_inputs;

int dg_dit_inputs_load(const dg_dit_input_opts *o, dg_dit_inputs *in);
/* The same with the model already loaded (from o->model on o->device; NULL: load it): several
 * generations of one process share one load (dsgap run's closed-loop cells). */
int dg_dit_inputs_load_with(const dg_dit_input_opts *o, dg_wan_model *model, dg_dit_inputs *in);
void dg_dit_inputs_free(dg_dit_inputs *in);

#endif
