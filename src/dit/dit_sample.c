/*
 * dit_sample.c: the denoising loop of the DiT engine and its inputs (dit_sample.h).
 */
#include "dit/dit_sample.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "dit/tensorfile.h"
#include "util/util.h"

typedef struct {
	const dg_dit_sample_opts *o;
	double start;
	dg_progress line;
	long done, total; /* blocks */
} progress_ctx;

static void show(progress_ctx *p, bool final)
{
	double el = dg_now() - p->start;
	double eta = p->done ? el * (p->total - p->done) / p->done : 0;
	int width = 24, fill = (int)((double)width * p->done / p->total);
	char bar[32];
	for (int i = 0; i < width; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[width] = 0;
	long per_step = p->total / p->o->steps;
	long step = p->done / per_step + (p->done < p->total);
	dg_progress_show(&p->line, final, "%s: step %ld/%d [%s] %3.0f%%  %.1fs elapsed  ETA %.1fs   ", p->o->label,
			 step, p->o->steps, bar, 100.0 * p->done / p->total, el, eta);
}

static void on_block(void *user, int layer)
{
	progress_ctx *p = user;
	p->done++;
	show(p, false);
}

int dg_dit_sample(const dg_dit_sample_opts *o, float *out, dg_dit_sample_stats *st)
{
	dg_wan_model *m = o->model;
	const dg_wan_config *c = &m->cfg;
	bool cfg = o->guidance != 1;
	if (cfg && !o->uncond)
		return dg_error("guidance %g needs an unconditional context", o->guidance);
	if (c->in_dim != c->out_dim)
		return dg_error("model has in_dim %d != out_dim %d: cannot denoise its own output", c->in_dim,
				c->out_dim);
	size_t n = (size_t)c->in_dim * o->latent[0] * o->latent[1] * o->latent[2];
	memset(st, 0, sizeof *st);
	double t0 = dg_now();
	dg_sampler *s = dg_sampler_new(o->sampler, o->steps, o->shift, n);
	float *x = dg_malloc(n * sizeof(float)), *v = dg_malloc(n * sizeof(float));
	float *vu = cfg ? dg_malloc(n * sizeof(float)) : NULL;
	memcpy(x, o->noise, n * sizeof(float));
	progress_ctx p = { o, t0, { 0 }, 0, (long)o->steps * (cfg ? 2 : 1) * c->num_layers };
	m->ops->sync(m->ops);
	double ops0[DG_WAN_OPK_COUNT];
	memcpy(ops0, m->ops->op_seconds, sizeof ops0);
	int rc = 0;
	for (int i = 0; i < o->steps && !rc; i++) {
		double t = dg_sampler_timestep(s, i), sigma = dg_sampler_sigma(s, i);
		for (int pass = 0; pass < (cfg ? 2 : 1) && !rc; pass++) {
			dg_wan_call call = { .step = i, .pass = pass, .sigma = sigma, .attn = o->attn,
					     .progress = o->label ? on_block : NULL, .user = &p };
			if (cfg && dg_dit_attn_passes_agree(o->attn, 0)) {
				call.keep_first = pass == 0;
				call.reuse_first = pass == 1;
				st->shared_forwards += pass;
			}
			double f0 = dg_now();
			rc = dg_wan_forward(m, x, o->latent, t, pass ? o->uncond : o->cond, &call, pass ? vu : v);
			st->transformer_s += dg_now() - f0;
			if (i < DG_DIT_STEP_TIMES)
				st->step_s[i] += dg_now() - f0;
			st->forwards++;
		}
		if (rc)
			break;
		if (cfg)
			dg_cfg_combine(v, vu, o->guidance, n);
		dg_sampler_step(s, i, v, x);
		if (o->step_latents)
			memcpy(o->step_latents + (size_t)i * n, x, n * sizeof(float));
		for (size_t j = 0; j < n; j++) /* finite inputs of 3e38 (noise, weights) overflow: never exit 0 */
			if (!isfinite(x[j])) {
				rc = dg_error("%s: the latents are not finite after step %d of %d (value %zu: %g): inputs "
					      "too large for fp32 arithmetic (noise, text or weights)",
					      o->label ? o->label : "denoising", i + 1, o->steps, j, x[j]);
				break;
			}
	}
	if (o->label && !rc)
		show(&p, true);
	if (!rc)
		memcpy(out, x, n * sizeof(float));
	m->ops->sync(m->ops);
	for (int k = 0; k < DG_WAN_OPK_COUNT; k++)
		st->op_seconds[k] = m->ops->op_seconds[k] - ops0[k];
	st->total_s = dg_now() - t0;
	free(x), free(v), free(vu);
	dg_sampler_free(s);
	return rc;
}

/* ---------------------------------------------------------------------------------------------- */
/* inputs                                                                                          */

static void squeeze_leading_ones(dg_tensor *t, int rank)
{
	while (t->ndim > rank && t->shape[0] == 1) {
		memmove(t->shape, t->shape + 1, (size_t)(t->ndim - 1) * sizeof(int64_t));
		t->ndim--;
	}
}

static const char *shape_str(const dg_tensor *t, char *buf, size_t size)
{
	size_t o = snprintf(buf, size, "[");
	for (int i = 0; i < t->ndim && o < size; i++)
		o += snprintf(buf + o, size - o, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
	if (o < size)
		snprintf(buf + o, size - o, "]");
	return buf;
}

int dg_dit_read_text(const dg_wan_model *m, const char *path, float **data, int *tokens)
{
	dg_tensor t;
	char sb[128];
	if (dg_tensor_read(path, "text embeddings", &t))
		return -1;
	squeeze_leading_ones(&t, 2);
	if (t.ndim != 2 || t.shape[1] != m->cfg.text_dim || t.shape[0] < 1 || t.shape[0] > INT_MAX) {
		dg_error("%s: text embeddings '%s' have shape %s, expected [tokens, %d]", path, t.name,
			 shape_str(&t, sb, sizeof sb), m->cfg.text_dim);
		dg_tensor_free(&t);
		return -1;
	}
	if (m->cfg.text_len > 0 && t.shape[0] > m->cfg.text_len) { /* dg_wan_context_new's bound, said of the file */
		dg_error("%s: text embeddings '%s' have %lld tokens, more than the model's text_len %d", path, t.name,
			 (long long)t.shape[0], m->cfg.text_len);
		dg_tensor_free(&t);
		return -1;
	}
	*tokens = (int)t.shape[0];
	*data = t.data;
	t.data = NULL;
	dg_tensor_free(&t);
	return 0;
}

int dg_dit_read_noise(const dg_wan_model *m, const char *path, int latent[3], float **data)
{
	dg_tensor t;
	char sb[128];
	if (dg_tensor_read(path, "noise", &t))
		return -1;
	squeeze_leading_ones(&t, 4);
	bool given = latent[0] > 0;
	bool ok = t.ndim == 4 && t.shape[0] == m->cfg.in_dim;
	for (int i = 0; ok && i < 3; i++)
		ok = t.shape[1 + i] >= 1 && t.shape[1 + i] <= 100000 && (!given || t.shape[1 + i] == latent[i]);
	if (!ok) {
		if (given)
			dg_error("%s: noise '%s' has shape %s, expected [%d, %d, %d, %d] (channels, --latent)",
				 path, t.name, shape_str(&t, sb, sizeof sb), m->cfg.in_dim, latent[0], latent[1],
				 latent[2]);
		else
			dg_error("%s: noise '%s' has shape %s, expected [%d, F, H, W]", path, t.name,
				 shape_str(&t, sb, sizeof sb), m->cfg.in_dim);
		dg_tensor_free(&t);
		return -1;
	}
	for (int i = 0; i < 3; i++)
		if (t.shape[1 + i] % m->cfg.patch[i]) { /* dg_wan_grid's rule, said of the file */
			dg_error("%s: noise '%s' has shape %s: its latent is not a multiple of the patch %dx%dx%d", path,
				 t.name, shape_str(&t, sb, sizeof sb), m->cfg.patch[0], m->cfg.patch[1], m->cfg.patch[2]);
			dg_tensor_free(&t);
			return -1;
		}
	for (int i = 0; i < 3; i++)
		latent[i] = (int)t.shape[1 + i];
	*data = t.data;
	t.data = NULL;
	dg_tensor_free(&t);
	return 0;
}

float *dg_dit_seed_noise(const dg_wan_model *m, const int latent[3], unsigned long seed)
{
	size_t n = (size_t)m->cfg.in_dim * latent[0] * latent[1] * latent[2];
	float *x = dg_malloc(n * sizeof(float));
	gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
	gsl_rng_set(r, seed);
	for (size_t i = 0; i < n; i++)
		x[i] = (float)gsl_ran_gaussian_ziggurat(r, 1.0);
	gsl_rng_free(r);
	return x;
}

int dg_parse_latent(const char *opt, const char *s, int latent[3])
{
	if (dg_parse_fxhxw(s, 4 * DG_GRID_MAX, latent)) /* patches of 2x2: at most DG_GRID_MAX tokens */
		return dg_error("bad %s '%s' (expected FxHxW of at most %ld latent positions, e.g. 21x60x104)", opt, s,
				4 * DG_GRID_MAX);
	return 0;
}

int dg_dit_inputs_load(const dg_dit_input_opts *o, dg_dit_inputs *in)
{
	return dg_dit_inputs_load_with(o, NULL, in);
}

int dg_dit_inputs_load_with(const dg_dit_input_opts *o, dg_wan_model *model, dg_dit_inputs *in)
{
	memset(in, 0, sizeof *in);
	if (!o->model || !o->text)
		return dg_error("--model and --text are required");
	if (!o->noise && o->latent[0] < 1)
		return dg_error("--latent FxHxW is required without --noise");
	in->model = model, in->borrowed = model != NULL;
	if (!model && dg_wan_load(&in->model, o->model, o->device))
		return -1;
	dg_wan_model *m = in->model;
	memcpy(in->latent, o->latent, sizeof in->latent);
	float *text = NULL;
	int tokens;
	if ((o->noise ? dg_dit_read_noise(m, o->noise, in->latent, &in->noise) : 0) ||
	    dg_wan_grid(m, in->latent, in->grid) || dg_dit_read_text(m, o->text, &text, &tokens) ||
	    dg_wan_context_new(m, text, tokens, &in->cond))
		goto fail;
	free(text);
	text = NULL;
	if (o->guidance != 1) {
		if (o->negative) {
			if (dg_dit_read_text(m, o->negative, &text, &tokens))
				goto fail;
		} else {
			tokens = 1;
			text = dg_calloc(m->cfg.text_dim, sizeof(float)); /* zeros: an empty prompt */
		}
		if (dg_wan_context_new(m, text, tokens, &in->uncond))
			goto fail;
		free(text);
		text = NULL;
	}
	if (!in->noise)
		in->noise = dg_dit_seed_noise(m, in->latent, o->seed);
	return 0;
fail:
	free(text);
	dg_dit_inputs_free(in);
	return -1;
}

void dg_dit_inputs_free(dg_dit_inputs *in)
{
	if (in->model) {
		dg_wan_context_free(in->model, in->cond);
		dg_wan_context_free(in->model, in->uncond);
		if (!in->borrowed)
			dg_wan_free(in->model);
	}
	free(in->noise);
	memset(in, 0, sizeof *in);
}
