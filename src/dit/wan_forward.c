/*
 * wan_forward.c: the Wan2.1 forward (reference §1.4), orchestrated over the op table (wan_ops.h):
 *
 *   tokens = patchify(x) (N, C*pt*ph*pw), c slowest          -> x = patch_embedding(tokens) (N, D)
 *   e = MLP(sinusoid(t), cos first)   e0 = Linear(SiLU(e)) (6, D)      (host, fp64 sinusoid)
 *   per block, mod = modulation + e0:
 *     h = LN(x) (1 + mod1) + mod0;  q, k = RMSNorm_D(Wq h), RMSNorm_D(Wk h); v = Wv h
 *     q, k = RoPE_3D(q, k) (interleaved pairs; t/h/w split of head_dim);   heads -> attention entry point
 *     x += Wo attn * mod2                                        (inside the next LayerNorm)
 *     x += Wo' crossattn(q' = RMSNorm(Wq' LN_affine(x)), K/V of the cached context)   (in the GEMM)
 *     x += W2 GELU_tanh(W1 (LN(x) (1 + mod4) + mod3)) * mod5     (inside the next LayerNorm)
 *   out = head(LN(x) (1 + head_mod1 + e) + head_mod0 + e) -> unpatchify, channel fastest
 * CFG's two passes read the same x and t, and the first block's self-attention half reads nothing
 * else: keep_first keeps x after it, reuse_first (the next forward) starts from there (dg_wan_call).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dit/dit_attn.h"
#include "util/util.h"
#include "dit/wan.h"

struct dg_wan_workspace {
	int n;                 /* tokens the buffers are sized for */
	int grid[3];           /* the grid of the RoPE tables */
	float *x, *t1, *t2;    /* (n, dim) each, fp32; the FFN's hidden is the ops' own */
	float *h, *a, *u1, *u2, *qh, *kh, *vh; /* (n, dim) each, operand buffers (bf16 on a device):
						* LayerNorm outputs, the attentions' outputs (heads
						* merged), the q/k/v projections, attention's Q/K/V */
	float *cos, *sin;      /* (n, head_dim/2) */
	float *mods;           /* (layers, 6, dim) of timestep mods_t */
	float *head_ss;        /* (2, dim) of timestep mods_t */
	double mods_t;         /* NAN until the first forward (the CFG passes of a step share it) */
	float *first;          /* (n, dim): x after the first block's self-attention half (keep_first) */
	bool first_valid;      /* first is the last forward's */
	float *patches;        /* (n, max(in, out) * patch) */
	float *host_tokens;    /* host staging of the same size (the table's host_alloc) */
};

void dg_wan_workspace_free(dg_wan_model *m)
{
	dg_wan_workspace *w = m->ws;
	if (!w)
		return;
	dg_wan_ops *o = m->ops;
	float *bufs[] = { w->x, w->h, w->a, w->u1, w->u2, w->t1, w->t2, w->qh, w->kh, w->vh, w->cos, w->sin, w->mods, w->first,
			  w->head_ss, w->patches };
	for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
		if (bufs[i])
			o->release(o, bufs[i]);
	if (w->host_tokens)
		o->host_free(o, w->host_tokens);
	free(w);
	m->ws = NULL;
}

static int patch_vec(const dg_wan_config *c)
{
	int p = c->patch[0] * c->patch[1] * c->patch[2];
	return (c->in_dim > c->out_dim ? c->in_dim : c->out_dim) * p;
}

/* RoPE angles for the grid: pairs [0, t/2) by frame, then [.., +h/2) by row, then by column;
 * frequency theta^(-2i/dim_axis); fp64, stored fp32 (n, d/2) */
static void rope_tables(const dg_wan_config *c, const int grid[3], float *cos_h, float *sin_h)
{
	int d = dg_wan_head_dim(c), half = d / 2, dims[3];
	dg_wan_rope_dims(d, dims);
	double *freq = dg_malloc((size_t)half * sizeof(double));
	int *axis = dg_malloc((size_t)half * sizeof(int));
	int p = 0;
	for (int a = 0; a < 3; a++)
		for (int i = 0; i < dims[a] / 2; i++, p++) {
			freq[p] = pow(c->rope_theta, -2.0 * i / dims[a]);
			axis[p] = a;
		}
	DG_ASSERT(p == half);
	int n = grid[0] * grid[1] * grid[2];
	for (int tok = 0; tok < n; tok++) {
		int pos[3] = { tok / (grid[1] * grid[2]), tok / grid[2] % grid[1], tok % grid[2] };
		for (int i = 0; i < half; i++) {
			double ang = pos[axis[i]] * freq[i];
			cos_h[(size_t)tok * half + i] = (float)cos(ang);
			sin_h[(size_t)tok * half + i] = (float)sin(ang);
		}
	}
	free(freq);
	free(axis);
}

static dg_wan_workspace *workspace(dg_wan_model *m, const int grid[3])
{
	const dg_wan_config *c = &m->cfg;
	int n = grid[0] * grid[1] * grid[2];
	dg_wan_workspace *w = m->ws;
	dg_wan_ops *o = m->ops;
	if (w && w->n != n) {
		dg_wan_workspace_free(m);
		w = NULL;
	}
	if (!w) {
		w = m->ws = dg_calloc(1, sizeof *w);
		w->n = n;
		size_t nd = (size_t)n * c->dim;
		float **bufs[] = { &w->x, &w->t1, &w->t2 }, **opnd[] = { &w->h, &w->a, &w->u1, &w->u2, &w->qh, &w->kh,
									      &w->vh };
		for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
			*bufs[i] = o->alloc(o, nd);
		for (size_t i = 0; i < sizeof opnd / sizeof opnd[0]; i++)
			*opnd[i] = o->alloc_operand(o, nd);
		size_t half = (size_t)n * (dg_wan_head_dim(c) / 2);
		w->cos = o->alloc(o, half);
		w->sin = o->alloc(o, half);
		w->mods = o->alloc(o, (size_t)c->num_layers * 6 * c->dim);
		w->head_ss = o->alloc(o, 2 * (size_t)c->dim);
		w->patches = o->alloc(o, (size_t)n * patch_vec(c));
		w->host_tokens = o->host_alloc(o, (size_t)n * patch_vec(c));
		w->mods_t = NAN;
	}
	if (memcmp(w->grid, grid, sizeof w->grid)) {
		size_t half = (size_t)n * (dg_wan_head_dim(c) / 2);
		float *ch = dg_malloc(half * sizeof(float)), *sh = dg_malloc(half * sizeof(float));
		rope_tables(c, grid, ch, sh);
		o->upload(o, w->cos, ch, half);
		o->upload(o, w->sin, sh, half);
		free(ch);
		free(sh);
		memcpy(w->grid, grid, sizeof w->grid);
	}
	return w;
}

int dg_wan_grid(const dg_wan_model *m, const int latent[3], int grid[3])
{
	const dg_wan_config *c = &m->cfg;
	for (int i = 0; i < 3; i++) {
		if (latent[i] < 1 || latent[i] % c->patch[i])
			return dg_error("latent %dx%dx%d is not a multiple of the patch %dx%dx%d", latent[0],
					latent[1], latent[2], c->patch[0], c->patch[1], c->patch[2]);
		grid[i] = latent[i] / c->patch[i];
		if (grid[i] > c->rope_max)
			return dg_error("latent %dx%dx%d: %d tokens along axis %d exceed the %d RoPE positions",
					latent[0], latent[1], latent[2], grid[i], i, c->rope_max);
	}
	if ((long long)grid[0] * grid[1] * grid[2] > (1 << 24))
		return dg_error("latent %dx%dx%d: too many tokens", latent[0], latent[1], latent[2]);
	return 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* host helpers for the tiny per-forward vectors                                                    */

/* y (out) = W x + b on the host, rows shared out to the threads (the sum of a row in order, fp64) */
static void host_linear(const dg_wan_linear *l, const float *x, float *y)
{
#pragma omp parallel for schedule(static) if ((double)l->out * l->in > 1e5)
	for (int i = 0; i < l->out; i++) {
		const float *w = l->w + (size_t)i * l->in;
		double s = l->b ? l->b[i] : 0;
		for (int j = 0; j < l->in; j++)
			s += (double)w[j] * x[j];
		y[i] = (float)s;
	}
}

static float silu(float x) { return x / (1.0f + expf(-x)); }

/* e (dim) and e0 (6 dim) of timestep t */
static void time_embedding(const dg_wan_model *m, double t, float *e, float *e0)
{
	const dg_wan_config *c = &m->cfg;
	int half = c->freq_dim / 2, D = c->dim;
	float *s = dg_malloc((size_t)c->freq_dim * sizeof(float));
	for (int j = 0; j < half; j++) {
		double a = t * pow(10000.0, -(double)j / half);
		s[j] = (float)cos(a);
		s[half + j] = (float)sin(a);
	}
	float *h = dg_malloc((size_t)D * sizeof(float));
	host_linear(&m->time1, s, h);
	for (int i = 0; i < D; i++)
		h[i] = silu(h[i]);
	host_linear(&m->time2, h, e);
	for (int i = 0; i < D; i++)
		h[i] = silu(e[i]);
	host_linear(&m->time_proj, h, e0);
	free(s);
	free(h);
}

/* ---------------------------------------------------------------------------------------------- */
/* contexts                                                                                        */

int dg_wan_context_new(dg_wan_model *m, const float *text, int tokens, dg_wan_context **out)
{
	const dg_wan_config *c = &m->cfg;
	dg_wan_ops *o = m->ops;
	*out = NULL;
	if (tokens < 1)
		return dg_error("text embeddings: no tokens");
	if (c->text_len > 0 && tokens > c->text_len)
		return dg_error("text embeddings: %d tokens, more than the model's text_len %d", tokens,
				c->text_len);
	int L = c->text_len > 0 ? c->text_len : tokens, D = c->dim, H = c->num_heads, d = D / H;
	float *padded = dg_calloc((size_t)L * c->text_dim, sizeof(float));
	memcpy(padded, text, (size_t)tokens * c->text_dim * sizeof(float));
	float *in = o->alloc(o, (size_t)L * c->text_dim), *ctx = o->alloc(o, (size_t)L * D),
	      *t = o->alloc(o, (size_t)L * D);
	o->upload(o, in, padded, (size_t)L * c->text_dim);
	free(padded);
	o->ffn(o, &m->text1, &m->text2, in, L, ctx);
	dg_wan_context *x = dg_calloc(1, sizeof *x);
	x->tokens = L;
	x->k = dg_calloc(c->num_layers, sizeof(float *));
	x->v = dg_calloc(c->num_layers, sizeof(float *));
	for (int i = 0; i < c->num_layers; i++) {
		const dg_wan_block *b = &m->blocks[i];
		x->k[i] = o->alloc_operand(o, (size_t)L * D);
		x->v[i] = o->alloc_operand(o, (size_t)L * D);
		o->linear(o, &b->ck, ctx, L, t);
		o->to_heads(o, t, L, H, d, b->cnorm_k, (float)c->eps, NULL, NULL, x->k[i]);
		o->linear(o, &b->cv, ctx, L, t);
		o->to_heads(o, t, L, H, d, NULL, 0, NULL, NULL, x->v[i]);
	}
	o->release(o, in), o->release(o, ctx), o->release(o, t);
	*out = x;
	return 0;
}

void dg_wan_context_free(dg_wan_model *m, dg_wan_context *x)
{
	if (!x)
		return;
	for (int i = 0; i < m->cfg.num_layers; i++) {
		if (x->k[i])
			m->ops->release(m->ops, x->k[i]);
		if (x->v[i])
			m->ops->release(m->ops, x->v[i]);
	}
	free(x->k);
	free(x->v);
	free(x);
}

/* ---------------------------------------------------------------------------------------------- */
/* forward                                                                                         */

/* tokens (n, C*pt*ph*pw) from x (C, F, H, W): vector (c, kt, kh, kw), c slowest */
static void patchify(const dg_wan_config *c, const float *x, const int lat[3], const int grid[3],
		     float *tok)
{
	int C = c->in_dim, pt = c->patch[0], ph = c->patch[1], pw = c->patch[2], P = C * pt * ph * pw;
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)grid[0] * grid[1] * grid[2] > 4096)
	for (int f = 0; f < grid[0]; f++)
		for (int i = 0; i < grid[1]; i++)
			for (int j = 0; j < grid[2]; j++) {
				float *v = tok + (((size_t)f * grid[1] + i) * grid[2] + j) * P;
				for (int ch = 0; ch < C; ch++)
					for (int a = 0; a < pt; a++)
						for (int b = 0; b < ph; b++)
							for (int e = 0; e < pw; e++)
								*v++ = x[(((size_t)ch * lat[0] + f * pt + a) * lat[1] +
									  i * ph + b) * lat[2] + j * pw + e];
			}
}

/* out (C, F, H, W) from tokens (n, pt*ph*pw*C): vector (kt, kh, kw, c), c fastest */
static void unpatchify(const dg_wan_config *c, const float *tok, const int lat[3], const int grid[3],
		       float *out)
{
	int C = c->out_dim, pt = c->patch[0], ph = c->patch[1], pw = c->patch[2], P = C * pt * ph * pw;
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)grid[0] * grid[1] * grid[2] > 4096)
	for (int f = 0; f < grid[0]; f++)
		for (int i = 0; i < grid[1]; i++)
			for (int j = 0; j < grid[2]; j++) {
				const float *v = tok + (((size_t)f * grid[1] + i) * grid[2] + j) * P;
				for (int a = 0; a < pt; a++)
					for (int b = 0; b < ph; b++)
						for (int e = 0; e < pw; e++)
							for (int ch = 0; ch < C; ch++)
								out[(((size_t)ch * lat[0] + f * pt + a) * lat[1] + i * ph + b) *
									    lat[2] + j * pw + e] = *v++;
			}
}

/* the modulation of every block and of the head at timestep t into the workspace */
static void upload_modulation(dg_wan_model *m, dg_wan_workspace *w, double t)
{
	const dg_wan_config *c = &m->cfg;
	dg_wan_ops *o = m->ops;
	int D = c->dim, L = c->num_layers;
	float *e = dg_malloc((size_t)D * sizeof(float)), *e0 = dg_malloc((size_t)6 * D * sizeof(float));
	time_embedding(m, t, e, e0);
	float *mods = dg_malloc((size_t)L * 6 * D * sizeof(float));
	for (int l = 0; l < L; l++)
		for (int i = 0; i < 6 * D; i++)
			mods[(size_t)l * 6 * D + i] = m->blocks[l].modulation[i] + e0[i];
	o->upload(o, w->mods, mods, (size_t)L * 6 * D);
	for (int i = 0; i < 2 * D; i++)
		e0[i] = m->head_mod[i] + e[i % D];
	o->upload(o, w->head_ss, e0, 2 * (size_t)D);
	free(mods), free(e), free(e0);
	w->mods_t = t;
}

/* block l's self-attention half: x += Wo attention(...) * mod2, the add left to norm3's LayerNorm
 * where there is one (h = its output); *hc: the cross-attention's input (h or x). res, res_gate: the
 * last block's pending residual add. 0, or -1 where the entry point failed. */
static int self_attention(dg_wan_model *m, dg_wan_workspace *w, int l, const dg_wan_call *call,
			  const float *res, const float *res_gate, const float **hc)
{
	const dg_wan_config *c = &m->cfg;
	dg_wan_ops *o = m->ops;
	const dg_wan_block *b = &m->blocks[l];
	int n = w->n, D = c->dim, H = c->num_heads, d = D / H;
	float eps = (float)c->eps;
	const float *mod = w->mods + (size_t)l * 6 * D;
	o->add_layernorm(o, w->x, res, res_gate, n, D, eps, NULL, NULL, mod + 1 * D, mod + 0 * D, w->h);
	o->linear(o, &b->q, w->h, n, w->u1);
	o->linear(o, &b->k, w->h, n, w->u2);
	o->to_heads(o, w->u1, n, H, d, b->norm_q, eps, w->cos, w->sin, w->qh);
	o->to_heads(o, w->u2, n, H, d, b->norm_k, eps, w->cos, w->sin, w->kh);
	o->linear(o, &b->v, w->h, n, w->u1);
	o->to_heads(o, w->u1, n, H, d, NULL, 0, NULL, NULL, w->vh);
	dg_attn_site site = { call ? call->step : 0, l, call ? call->pass : 0, call ? call->sigma : 0 };
	if (call && call->attn) {
		if (dg_dit_attention(call->attn, &site, w->qh, w->kh, w->vh, w->a))
			return -1;
	} else {
		o->attention(o, w->qh, w->kh, w->vh, H, n, n, d, w->a);
	}
	o->linear(o, &b->o, w->a, n, w->t2);
	*hc = w->x;
	if (b->norm3_w) {
		o->add_layernorm(o, w->x, w->t2, mod + 2 * D, n, D, eps, b->norm3_w, b->norm3_b, NULL, NULL, w->h);
		*hc = w->h;
	} else {
		o->add_gated(o, w->x, w->t2, mod + 2 * D, n, D);
	}
	return 0;
}

int dg_wan_forward(dg_wan_model *m, const float *x, const int latent[3], double t,
		   const dg_wan_context *ctx, const dg_wan_call *call, float *out)
{
	const dg_wan_config *c = &m->cfg;
	dg_wan_ops *o = m->ops;
	int grid[3];
	if (dg_wan_grid(m, latent, grid))
		return -1;
	dg_wan_workspace *w = workspace(m, grid);
	int n = w->n, D = c->dim, H = c->num_heads, d = D / H, L = c->num_layers;
	int P = c->patch[0] * c->patch[1] * c->patch[2];
	size_t nD = (size_t)n * D;
	float eps = (float)c->eps;
	bool reuse = call && call->reuse_first && w->first_valid, keep = call && call->keep_first;
	w->first_valid = false;

	/* time: e, e0 and every block's modulation on the host, uploaded once per timestep */
	if (!(w->mods_t == t))
		upload_modulation(m, w, t);
	/* patch embedding (not needed where the first block's self-attention half is reused) */
	if (!reuse) {
		patchify(c, x, latent, grid, w->host_tokens);
		o->upload(o, w->patches, w->host_tokens, (size_t)n * c->in_dim * P);
		o->linear(o, &m->patch, w->patches, n, w->x);
	}

	int rc = 0;
	float *hbuf = call && call->hidden ? dg_malloc(nD * sizeof(float)) : NULL;
	/* a block's last residual add, x += FFN output * gate, is left to the next LayerNorm */
	const float *res = NULL, *res_gate = NULL;
	for (int l = 0; l < L && !rc; l++) {
		const dg_wan_block *b = &m->blocks[l];
		const float *mod = w->mods + (size_t)l * 6 * D;
		const float *hc = w->x;
		if (l == 0 && reuse) { /* the last forward's x after this half, and norm3 of it */
			o->copy(o, w->x, w->first, nD);
			if (b->norm3_w) {
				o->layernorm(o, w->x, n, D, eps, b->norm3_w, b->norm3_b, NULL, NULL, w->h);
				hc = w->h;
			}
		} else if (self_attention(m, w, l, call, res, res_gate, &hc)) {
			rc = -1;
			break;
		} else if (l == 0 && keep) {
			if (!w->first)
				w->first = o->alloc(o, nD);
			o->copy(o, w->first, w->x, nD);
			w->first_valid = true;
		}
		/* cross-attention to the cached context */
		o->linear(o, &b->cq, hc, n, w->u1);
		o->to_heads(o, w->u1, n, H, d, b->cnorm_q, eps, NULL, NULL, w->qh);
		o->attention(o, w->qh, ctx->k[l], ctx->v[l], H, n, ctx->tokens, d, w->a);
		o->linear_add(o, &b->co, w->a, n, w->x);
		/* feed-forward */
		o->layernorm(o, w->x, n, D, eps, NULL, NULL, mod + 4 * D, mod + 3 * D, w->h);
		o->ffn(o, &b->ffn1, &b->ffn2, w->h, n, w->t2);
		res = w->t2, res_gate = mod + 5 * D;
		if (hbuf) { /* the block's output is wanted now */
			o->add_gated(o, w->x, res, res_gate, n, D);
			res = res_gate = NULL;
			o->download(o, hbuf, w->x, nD);
			call->hidden(call->user, l, hbuf);
		}
		if (call && call->progress)
			call->progress(call->user, l);
	}
	free(hbuf);
	if (rc)
		return -1;
	/* head: its linear is fp32, so its LayerNorm goes to an fp32 buffer */
	o->add_layernorm(o, w->x, res, res_gate, n, D, eps, NULL, NULL, w->head_ss + D, w->head_ss, w->t1);
	o->linear(o, &m->head, w->t1, n, w->patches);
	o->download(o, w->host_tokens, w->patches, (size_t)n * c->out_dim * P);
	unpatchify(c, w->host_tokens, latent, grid, out);
	return 0;
}
