/*
 * synth.c: structured synthetic Q/K/V traces (what the heads look like is in synth.h).
 *   dsgap synth --out T.h5            (cmd_synth.c parses the options)
 *
 * For one (layer, head) with M = head_dim/4 frequencies and Dc = head_dim - 2M - 1 content dims,
 * before a random rotation R shared by q and k (it leaves q.k alone and mixes the dimensions):
 *   q_i = [ a phi(p_i) | c U z_i | s_q ]     k_j = [ a phi(p_j) | c W z_j | s_k(j) ]
 * phi(p) = sqrt(1/M) [cos(w_m . p), sin(w_m . p)] so that phi(p_i) . phi(p_j) ~ exp(-|p_i - p_j|^2 / 2l^2)
 * (per-axis lengthscales l; frame heads have w_m.f = 0), z (tokens, C) the shared content latents,
 * W = rho U + sqrt(1 - rho^2) G (content attends to similar content), and s_k large on the sink
 * tokens of sink heads. The logit q.k/sqrt(D) is then beta * kernel + gamma * content + sink, with
 * beta, gamma and the sink logit set per kind (table kinds[] below) and varied by layer.
 * v_j = 0.8 B psi(p_j) + 0.6 P z_j: a smooth field of position (lengthscale 3 tokens) plus content.
 */
#include "trace/synth.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <gsl/gsl_blas.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "trace/trace.h"
#include "util/util.h"

#define LATENT 16         /* C: content latent dims per token */
#define LATENT_FREQS 32   /* frequencies of the smooth part of the latents */
#define LATENT_SMOOTH 0.6 /* share of the latents' variance that is smooth in position */
#define LATENT_SCALE 3.0  /* lengthscale of the smooth part, tokens */
#define DRIFT 0.03        /* per-step AR(1) innovation variance of the latents */
#define CONTENT_RHO 0.2   /* correlation of the q and k content projections */
#define V_FREQS 32        /* frequencies of v's positional field */
#define V_SCALE 3.0       /* lengthscale of v's positional field, tokens */
#define MAX_TOKENS 131072
#define MAX_TEXT 4096
#define TEXT_SALT 0x7465787474657874ull /* the text tokens' streams, apart from the heads' */

/* beta: peak positional logit; lt, ls: temporal and spatial lengthscales (tokens); gamma: std of the
 * content logit; sink: sink logit above ln(tokens) (so the sink mass does not shrink as N grows) */
static const struct {
	const char *name;
	double beta, lt, ls, gamma, sink;
} kinds[DG_SYNTH_KIND_COUNT] = {
	[DG_SYNTH_LOCAL] = { "local", 6.0, 1.2, 2.0, 1.0, 0.0 },
	[DG_SYNTH_FRAME] = { "frame", 6.0, 0.0, 0.7, 1.0, 0.0 },
	[DG_SYNTH_SINK] = { "sink", 2.0, 1.5, 2.0, 0.7, 0.5 },
	[DG_SYNTH_DIFFUSE] = { "diffuse", 0.7, 3.0, 4.0, 0.3, 0.0 },
};

const char *dg_synth_kind_name(dg_synth_kind kind)
{
	DG_ASSERT(kind >= 0 && kind < DG_SYNTH_KIND_COUNT);
	return kinds[kind].name;
}

dg_synth_kind dg_synth_head_kind(int layer, int head)
{
	return (dg_synth_kind)((head + layer) % DG_SYNTH_KIND_COUNT);
}

void dg_synth_defaults(dg_synth_opts *o)
{
	*o = (dg_synth_opts){
		.grid = { 4, 16, 16 }, .heads = 4, .head_dim = 64, .layers = 2, .steps = 8, .seed = 1,
	};
}

int dg_synth_check(const dg_synth_opts *o)
{
	const int *g = o->grid;
	if (g[0] < 1 || g[1] < 1 || g[2] < 1)
		return dg_error("synth: grid %dx%dx%d has an empty dimension", g[0], g[1], g[2]);
	long long n = (long long)g[0] * g[1] * g[2];
	if (n > MAX_TOKENS)
		return dg_error("synth: grid %dx%dx%d has %lld tokens, at most %d", g[0], g[1], g[2], n, MAX_TOKENS);
	if (o->heads < 1 || o->heads > 128)
		return dg_error("synth: heads %d out of range 1..128", o->heads);
	if (o->head_dim < 32 || o->head_dim > 256)
		return dg_error("synth: head_dim %d out of range 32..256", o->head_dim);
	if (o->layers < 1 || o->layers > 128)
		return dg_error("synth: layers %d out of range 1..128", o->layers);
	if (o->text < 0 || o->text > MAX_TEXT || n + o->text > MAX_TOKENS)
		return dg_error("synth: %d text tokens out of range 0..%d (at most %d tokens with the grid's)",
				o->text, MAX_TEXT, MAX_TOKENS);
	if (o->steps < 1 || o->steps > DG_SYNTH_SCHEDULE_STEPS)
		return dg_error("synth: steps %d out of range 1..%d (the first steps of a %d-step schedule)",
				o->steps, DG_SYNTH_SCHEDULE_STEPS, DG_SYNTH_SCHEDULE_STEPS);
	return 0;
}

/* splitmix64 of (seed, layer, head): the seed of one (layer, head)'s own generator */
static unsigned long stream_seed(unsigned long seed, int layer, int head)
{
	uint64_t x = seed + 0x9e3779b97f4a7c15ull * (1 + (uint64_t)layer * 65536 + head);
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return (unsigned long)(x ^ (x >> 31));
}

static void fill_gaussian(gsl_matrix *m, gsl_rng *r, double sd)
{
	for (size_t i = 0; i < m->size1; i++)
		for (size_t j = 0; j < m->size2; j++)
			gsl_matrix_set(m, i, j, gsl_ran_gaussian(r, sd));
}

/* Gaussian frequencies (n, 3) for lengthscales (lt, ls, ls): lt = 0 means no dependence on frames */
static gsl_matrix *frequencies(gsl_rng *r, int n, double lt, double ls)
{
	gsl_matrix *w = gsl_matrix_alloc(n, 3);
	for (int m = 0; m < n; m++) {
		gsl_matrix_set(w, m, 0, lt > 0 ? gsl_ran_gaussian(r, 1 / lt) : 0);
		gsl_matrix_set(w, m, 1, gsl_ran_gaussian(r, 1 / ls));
		gsl_matrix_set(w, m, 2, gsl_ran_gaussian(r, 1 / ls));
	}
	return w;
}

/* (tokens, 2n): scale * [cos(w_m . p_i + b_m), sin(w_m . p_i + b_m)] */
static void fourier(gsl_matrix_view out, const gsl_matrix *w, const double *phase, const int *grid,
		    double scale)
{
	size_t n = w->size1, i = 0;
	for (int f = 0; f < grid[0]; f++)
		for (int y = 0; y < grid[1]; y++)
			for (int x = 0; x < grid[2]; x++, i++)
				for (size_t m = 0; m < n; m++) {
					double a = gsl_matrix_get(w, m, 0) * f + gsl_matrix_get(w, m, 1) * y +
						   gsl_matrix_get(w, m, 2) * x + (phase ? phase[m] : 0);
					gsl_matrix_set(&out.matrix, i, 2 * m, scale * cos(a));
					gsl_matrix_set(&out.matrix, i, 2 * m + 1, scale * sin(a));
				}
}

/* Per-token content latents z (tokens, C) = sqrt(s) smooth(position) + sqrt(1 - s) white, drifting. */
typedef struct {
	gsl_matrix *basis; /* (tokens, 2 LATENT_FREQS) Fourier features of position, fixed */
	gsl_matrix *coef;  /* (C, 2 LATENT_FREQS) amplitudes of the smooth part, drifting */
	gsl_matrix *white; /* (tokens, C) per-token part, drifting */
	gsl_matrix *z;     /* (tokens, C) */
} latents;

static void latents_init(latents *lt, gsl_rng *r, const int *grid, int tokens)
{
	gsl_matrix *w = frequencies(r, LATENT_FREQS, LATENT_SCALE, LATENT_SCALE);
	double phase[LATENT_FREQS];
	for (int m = 0; m < LATENT_FREQS; m++)
		phase[m] = 2 * M_PI * gsl_rng_uniform(r);
	lt->basis = gsl_matrix_alloc(tokens, 2 * LATENT_FREQS);
	fourier(gsl_matrix_submatrix(lt->basis, 0, 0, tokens, 2 * LATENT_FREQS), w, phase, grid,
		sqrt(1.0 / LATENT_FREQS));
	gsl_matrix_free(w);
	lt->coef = gsl_matrix_alloc(LATENT, 2 * LATENT_FREQS);
	lt->white = gsl_matrix_alloc(tokens, LATENT);
	lt->z = gsl_matrix_alloc(tokens, LATENT);
	fill_gaussian(lt->coef, r, 1);
	fill_gaussian(lt->white, r, 1);
}

/* one AR(1) step of the amplitudes and of the white part (skipped at step 0), then z */
static void latents_step(latents *lt, gsl_rng *r, int step)
{
	gsl_matrix *ms[2] = { lt->coef, lt->white };
	for (int k = 0; k < 2 && step > 0; k++)
		for (size_t i = 0; i < ms[k]->size1; i++)
			for (size_t j = 0; j < ms[k]->size2; j++)
				gsl_matrix_set(ms[k], i, j, sqrt(1 - DRIFT) * gsl_matrix_get(ms[k], i, j) +
							    gsl_ran_gaussian(r, sqrt(DRIFT)));
	gsl_matrix_memcpy(lt->z, lt->white);
	gsl_blas_dgemm(CblasNoTrans, CblasTrans, sqrt(LATENT_SMOOTH), lt->basis, lt->coef,
		       sqrt(1 - LATENT_SMOOTH), lt->z);
}

static void latents_free(latents *lt)
{
	gsl_matrix_free(lt->basis);
	gsl_matrix_free(lt->coef);
	gsl_matrix_free(lt->white);
	gsl_matrix_free(lt->z);
}

/* Everything about one (layer, head) that stays the same across steps. */
typedef struct {
	dg_synth_kind kind;
	double beta, gamma, sink; /* peak positional logit, content logit std, sink logit */
	int nsinks, sinks[4];
	gsl_matrix *qpos;       /* (tokens, 2M) a phi(p): identical for q and k */
	gsl_matrix *u, *w;      /* (Dc, C) q and k content projections */
	gsl_matrix *rot;        /* (D, D) orthogonal */
	gsl_matrix *vpos;       /* (tokens, D) v's positional field */
	gsl_matrix *pv;         /* (D, C) v's content projection */
	gsl_vector *sink_noise; /* (tokens) small per-token variation of the sink coordinate */
} head;

static gsl_matrix *random_rotation(gsl_rng *r, int d)
{
	gsl_matrix *a = gsl_matrix_alloc(d, d), *q = gsl_matrix_alloc(d, d), *rr = gsl_matrix_alloc(d, d);
	gsl_vector *tau = gsl_vector_alloc(d);
	fill_gaussian(a, r, 1);
	gsl_linalg_QR_decomp(a, tau);
	gsl_linalg_QR_unpack(a, tau, q, rr);
	gsl_matrix_free(a);
	gsl_matrix_free(rr);
	gsl_vector_free(tau);
	return q;
}

/* The first draws of a (layer, head)'s own stream: kind, strengths and sink tokens. Returns the
 * stream, positioned for head_init (config_json only needs these and frees it). */
static gsl_rng *head_stream(head *hd, const dg_synth_opts *o, int layer, int h, int tokens)
{
	gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
	gsl_rng_set(r, stream_seed(o->seed, layer, h));
	hd->kind = dg_synth_head_kind(layer, h);
	hd->beta = kinds[hd->kind].beta * (1 - 0.15 * ((layer % 3) - 1)); /* layers differ by 15% */
	hd->gamma = kinds[hd->kind].gamma;
	hd->nsinks = 0;
	hd->sink = 0;
	if (hd->kind != DG_SYNTH_SINK)
		return r;
	hd->nsinks = 2 + (int)gsl_rng_uniform_int(r, 3);
	if (hd->nsinks > tokens)
		hd->nsinks = tokens;
	hd->sink = log((double)tokens) + kinds[hd->kind].sink + 0.3 * gsl_rng_uniform(r);
	for (int i = 0; i < hd->nsinks; i++) {
		int dup;
		do {
			hd->sinks[i] = (int)gsl_rng_uniform_int(r, tokens);
			dup = 0;
			for (int j = 0; j < i; j++)
				dup |= hd->sinks[j] == hd->sinks[i];
		} while (dup);
	}
	return r;
}

static void head_init(head *hd, const dg_synth_opts *o, int layer, int h, int tokens)
{
	int d = o->head_dim, m = d / 4, dc = d - 2 * m - 1;
	gsl_rng *r = head_stream(hd, o, layer, h, tokens);
	double vary = 1 + 0.15 * ((layer % 3) - 1); /* broader where beta is lower */
	gsl_matrix *freq = frequencies(r, m, kinds[hd->kind].lt * vary, kinds[hd->kind].ls * vary);
	hd->qpos = gsl_matrix_alloc(tokens, 2 * m);
	fourier(gsl_matrix_submatrix(hd->qpos, 0, 0, tokens, 2 * m), freq, NULL, o->grid,
		sqrt(hd->beta * sqrt(d) / m));
	gsl_matrix_free(freq);

	hd->u = gsl_matrix_alloc(dc, LATENT);
	hd->w = gsl_matrix_alloc(dc, LATENT);
	fill_gaussian(hd->u, r, sqrt(1.0 / LATENT));
	fill_gaussian(hd->w, r, sqrt(1.0 / LATENT));
	for (int i = 0; i < dc; i++) /* w = rho u + sqrt(1 - rho^2) g */
		for (int j = 0; j < LATENT; j++)
			gsl_matrix_set(hd->w, i, j, CONTENT_RHO * gsl_matrix_get(hd->u, i, j) +
				       sqrt(1 - CONTENT_RHO * CONTENT_RHO) * gsl_matrix_get(hd->w, i, j));
	hd->rot = random_rotation(r, d);

	gsl_matrix *vfreq = frequencies(r, V_FREQS, V_SCALE, V_SCALE);
	double phase[V_FREQS];
	for (int i = 0; i < V_FREQS; i++)
		phase[i] = 2 * M_PI * gsl_rng_uniform(r);
	gsl_matrix *psi = gsl_matrix_alloc(tokens, 2 * V_FREQS), *b = gsl_matrix_alloc(d, 2 * V_FREQS);
	fourier(gsl_matrix_submatrix(psi, 0, 0, tokens, 2 * V_FREQS), vfreq, phase, o->grid,
		sqrt(1.0 / V_FREQS));
	fill_gaussian(b, r, 0.8);
	hd->vpos = gsl_matrix_alloc(tokens, d);
	gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1, psi, b, 0, hd->vpos);
	gsl_matrix_free(vfreq);
	gsl_matrix_free(psi);
	gsl_matrix_free(b);
	hd->pv = gsl_matrix_alloc(d, LATENT);
	fill_gaussian(hd->pv, r, 0.6 * sqrt(1.0 / LATENT));
	hd->sink_noise = gsl_vector_alloc(tokens);
	for (int i = 0; i < tokens; i++)
		gsl_vector_set(hd->sink_noise, i, gsl_ran_gaussian(r, 1));
	gsl_rng_free(r);
}

static void head_free(head *hd)
{
	gsl_matrix_free(hd->qpos);
	gsl_matrix_free(hd->u);
	gsl_matrix_free(hd->w);
	gsl_matrix_free(hd->rot);
	gsl_matrix_free(hd->vpos);
	gsl_matrix_free(hd->pv);
	gsl_vector_free(hd->sink_noise);
}

/* Scratch of one unit: the unrotated (tokens, D) q and k, and the results. */
typedef struct {
	gsl_matrix *pre, *out; /* (tokens, D) */
	float *f;              /* (tokens, D) */
} unit_buf;

static void to_float(const gsl_matrix *m, float *f)
{
	for (size_t i = 0; i < m->size1; i++)
		for (size_t j = 0; j < m->size2; j++)
			f[i * m->size2 + j] = (float)gsl_matrix_get(m, i, j);
}

/* q (is_q) or k of one head at the current latents into b->f */
static void make_qk(const head *hd, const gsl_matrix *z, int is_q, unit_buf *b)
{
	size_t n = b->pre->size1, d = b->pre->size2, m2 = hd->qpos->size2, dc = d - m2 - 1;
	double d4 = sqrt(sqrt((double)d)); /* (D)^(1/4): q.k / sqrt(D) = logit */
	gsl_matrix_view pos = gsl_matrix_submatrix(b->pre, 0, 0, n, m2);
	gsl_matrix_view content = gsl_matrix_submatrix(b->pre, 0, m2, n, dc);
	gsl_matrix_memcpy(&pos.matrix, hd->qpos);
	gsl_blas_dgemm(CblasNoTrans, CblasTrans, d4 * sqrt(hd->gamma / sqrt((double)dc)), z,
		       is_q ? hd->u : hd->w, 0, &content.matrix);
	for (size_t i = 0; i < n; i++) {
		double s = 0.1 * gsl_vector_get(hd->sink_noise, i);
		if (is_q)
			s = hd->nsinks ? d4 * sqrt(hd->sink) * (1 + s) : s;
		for (int j = 0; j < hd->nsinks; j++)
			if (!is_q && hd->sinks[j] == (int)i)
				s = d4 * sqrt(hd->sink);
		gsl_matrix_set(b->pre, i, d - 1, s);
	}
	gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1, b->pre, hd->rot, 0, b->out);
	to_float(b->out, b->f);
}

static void make_v(const head *hd, const gsl_matrix *z, unit_buf *b)
{
	gsl_matrix_memcpy(b->out, hd->vpos);
	gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1, z, hd->pv, 1, b->out);
	to_float(b->out, b->f);
}

static char *config_json(const dg_synth_opts *o, int tokens)
{
	cJSON *c = cJSON_CreateObject();
	cJSON_AddStringToObject(c, "generator", "dsgap synth");
	cJSON_AddItemToObject(c, "grid", cJSON_CreateIntArray(o->grid, 3));
	cJSON_AddNumberToObject(c, "heads", o->heads);
	cJSON_AddNumberToObject(c, "head_dim", o->head_dim);
	cJSON_AddNumberToObject(c, "layers", o->layers);
	cJSON_AddNumberToObject(c, "steps", o->steps);
	cJSON_AddNumberToObject(c, "seed", (double)o->seed);
	cJSON_AddNumberToObject(c, "schedule_steps", DG_SYNTH_SCHEDULE_STEPS);
	cJSON_AddNumberToObject(c, "shift", DG_SYNTH_SHIFT);
	cJSON_AddNumberToObject(c, "drift", DRIFT);
	if (o->text > 0)
		cJSON_AddNumberToObject(c, "text_tokens", o->text);
	cJSON *kl = cJSON_AddArrayToObject(c, "head_kinds"), *sl = cJSON_AddArrayToObject(c, "sink_tokens");
	for (int l = 0; l < o->layers; l++) {
		cJSON *k = cJSON_CreateArray(), *s = cJSON_CreateArray();
		for (int h = 0; h < o->heads; h++) {
			head hd;
			gsl_rng_free(head_stream(&hd, o, l, h, tokens));
			cJSON_AddItemToArray(k, cJSON_CreateString(kinds[hd.kind].name));
			for (int i = 0; i < hd.nsinks; i++) /* token indices: after the text */
				hd.sinks[i] += o->text;
			cJSON_AddItemToArray(s, cJSON_CreateIntArray(hd.sinks, hd.nsinks));
		}
		cJSON_AddItemToArray(kl, k);
		cJSON_AddItemToArray(sl, s);
	}
	char *json = cJSON_PrintUnformatted(c), *out = dg_strdup(json);
	cJSON_free(json);
	cJSON_Delete(c);
	return out;
}

/* flow-matching schedule with shift: sigma of step i of DG_SYNTH_SCHEDULE_STEPS */
static double schedule_sigma(int i)
{
	double t = 1 - (double)i / DG_SYNTH_SCHEDULE_STEPS;
	return DG_SYNTH_SHIFT * t / (1 + (DG_SYNTH_SHIFT - 1) * t);
}

/* the text prefix of one (layer, head): q, k, v (text, D) each, unit Gaussians of its own stream */
static void make_text(const dg_synth_opts *o, int layer, int h, float *const qkv[3])
{
	gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
	gsl_rng_set(r, stream_seed(o->seed ^ TEXT_SALT, layer, h));
	for (int t = 0; t < 3; t++)
		for (size_t e = 0; e < (size_t)o->text * o->head_dim; e++)
			qkv[t][e] = (float)gsl_ran_gaussian(r, 1);
	gsl_rng_free(r);
}

/* every unit: (text + tokens, D) rows, the text prefix first (b.f points past it) */
static int write_units(dg_trace_writer *w, const dg_synth_opts *o, int tokens)
{
	int d = o->head_dim, rc = 0;
	size_t td = (size_t)o->text * d;
	gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
	gsl_rng_set(r, o->seed);
	latents lt;
	latents_init(&lt, r, o->grid, tokens);
	float *unit = dg_malloc((td + (size_t)tokens * d) * sizeof(float));
	float *text[3] = { dg_malloc((td ? td : 1) * sizeof(float)), dg_malloc((td ? td : 1) * sizeof(float)),
			   dg_malloc((td ? td : 1) * sizeof(float)) };
	unit_buf b = { gsl_matrix_alloc(tokens, d), gsl_matrix_alloc(tokens, d), unit + td };
	for (int s = 0; s < o->steps && !rc; s++) {
		latents_step(&lt, r, s);
		for (int l = 0; l < o->layers && !rc; l++)
			for (int h = 0; h < o->heads && !rc; h++) {
				head hd;
				head_init(&hd, o, l, h, tokens);
				make_text(o, l, h, text);
				make_qk(&hd, lt.z, 1, &b);
				memcpy(unit, text[0], td * sizeof(float));
				rc = dg_trace_writer_put(w, DG_QKV_Q, s, l, h, unit);
				make_qk(&hd, lt.z, 0, &b);
				memcpy(unit, text[1], td * sizeof(float));
				rc = rc ? rc : dg_trace_writer_put(w, DG_QKV_K, s, l, h, unit);
				make_v(&hd, lt.z, &b);
				memcpy(unit, text[2], td * sizeof(float));
				rc = rc ? rc : dg_trace_writer_put(w, DG_QKV_V, s, l, h, unit);
				head_free(&hd);
			}
	}
	gsl_matrix_free(b.pre);
	gsl_matrix_free(b.out);
	free(unit);
	free(text[0]), free(text[1]), free(text[2]);
	latents_free(&lt);
	gsl_rng_free(r);
	return rc;
}

int dg_synth(const dg_synth_opts *o, const char *out_path)
{
	if (dg_synth_check(o))
		return -1;
	int tokens = o->grid[0] * o->grid[1] * o->grid[2];
	dg_trace_meta m = {
		.steps = o->steps, .layers = o->layers, .heads = o->heads, .tokens = o->text + tokens,
		.head_dim = o->head_dim, .grid = { o->grid[0], o->grid[1], o->grid[2] }, .text_tokens = o->text,
		.model = "synthetic", .source = "synthetic", .created_by = "dsgap " DG_VERSION " synth",
	};
	m.step_index = dg_malloc(o->steps * sizeof(int));
	m.timestep = dg_malloc(o->steps * sizeof(float));
	m.sigma = dg_malloc(o->steps * sizeof(float));
	m.layer_index = dg_malloc(o->layers * sizeof(int));
	m.head_index = dg_malloc(o->heads * sizeof(int));
	for (int s = 0; s < o->steps; s++) {
		m.step_index[s] = s;
		m.sigma[s] = (float)schedule_sigma(s);
		m.timestep[s] = (float)(1000 * schedule_sigma(s));
	}
	for (int l = 0; l < o->layers; l++)
		m.layer_index[l] = l;
	for (int h = 0; h < o->heads; h++)
		m.head_index[h] = h;
	m.config = config_json(o, tokens);
	dg_trace_writer w;
	int rc = dg_trace_writer_open(&w, out_path, &m);
	if (!rc && write_units(&w, o, tokens)) {
		dg_trace_writer_abort(&w);
		rc = -1;
	}
	rc = rc ? rc : dg_trace_writer_finish(&w);
	free(m.step_index);
	free(m.timestep);
	free(m.sigma);
	free(m.layer_index);
	free(m.head_index);
	free(m.config);
	return rc;
}

/* ---------------------------------------------------------------------------------------------- */
/* "synth: ..." specs (batch experiment files)                                                     */


int dg_synth_spec_parse(const char *spec, dg_synth_opts *o, char *err, size_t size)
{
	dg_synth_defaults(o);
	char *copy = dg_strdup(spec), *save = NULL;
	char *s = copy + strspn(copy, " \t");
	s[strcspn(s, "\n")] = 0;
	if (!strncmp(s, "synth:", 6))
		s += 6;
	else if (!strncmp(s, "synth", 5) && (s[5] == 0 || isspace((unsigned char)s[5])))
		s += 5;
	int rc = 0;
	unsigned seen = 0;
	for (char *tok = strtok_r(s, " \t", &save); tok && !rc; tok = strtok_r(NULL, " \t", &save)) {
		char *eq = strchr(tok, '=');
		if (!eq) {
			snprintf(err, size, "synth: expected key=value, got '%s' (keys: grid heads layers steps "
				 "head_dim seed text)", tok);
			rc = -1;
			break;
		}
		*eq = 0;
		const char *key = tok, *val = eq + 1;
		char *end = NULL;
		long v = 0;
		unsigned bit = 0;
		if (!strcmp(key, "grid")) {
			int g[3];
			if (sscanf(val, "%dx%dx%d", &g[0], &g[1], &g[2]) != 3 || strspn(val, "0123456789x") != strlen(val)) {
				snprintf(err, size, "synth: bad grid '%s' (FxHxW, e.g. 4x16x16)", val);
				rc = -1;
				break;
			}
			memcpy(o->grid, g, sizeof g);
			bit = 1;
		} else if (!strcmp(key, "seed")) {
			errno = 0;
			unsigned long long sd = strtoull(val, &end, 10);
			if (end == val || *end || errno || *val == '-') {
				snprintf(err, size, "synth: bad seed '%s'", val);
				rc = -1;
				break;
			}
			o->seed = (unsigned long)sd;
			bit = 2;
		} else {
			int *dst = !strcmp(key, "heads") ? &o->heads
				 : !strcmp(key, "layers") ? &o->layers
				 : !strcmp(key, "steps") ? &o->steps
				 : !strcmp(key, "text") ? &o->text
				 : !strcmp(key, "head_dim") || !strcmp(key, "head-dim") ? &o->head_dim : NULL;
			if (!dst) {
				snprintf(err, size, "synth: unknown key '%s' (grid heads layers steps head_dim seed text)", key);
				rc = -1;
				break;
			}
			errno = 0;
			v = strtol(val, &end, 10);
			if (end == val || *end || errno || v < INT_MIN || v > INT_MAX) {
				snprintf(err, size, "synth: bad %s '%s'", key, val);
				rc = -1;
				break;
			}
			*dst = (int)v;
			bit = dst == &o->heads ? 4 : dst == &o->layers ? 8 : dst == &o->steps ? 16 : dst == &o->text ? 64 : 32;
		}
		if (seen & bit) {
			snprintf(err, size, "synth: %s given twice", key);
			rc = -1;
		}
		seen |= bit;
	}
	free(copy);
	return rc;
}


char *dg_synth_spec(const dg_synth_opts *o)
{
	char buf[256];
	int at = snprintf(buf, sizeof buf, "synth: grid=%dx%dx%d heads=%d layers=%d steps=%d head_dim=%d seed=%lu",
			  o->grid[0], o->grid[1], o->grid[2], o->heads, o->layers, o->steps, o->head_dim, o->seed);
	if (o->text > 0)
		snprintf(buf + at, sizeof buf - at, " text=%d", o->text);
	return dg_strdup(buf);
}

void dg_synth_meta(const dg_synth_opts *o, dg_trace_meta *m)
{
	memset(m, 0, sizeof *m);
	m->steps = o->steps, m->layers = o->layers, m->heads = o->heads, m->head_dim = o->head_dim;
	memcpy(m->grid, o->grid, sizeof m->grid);
	m->tokens = o->text + o->grid[0] * o->grid[1] * o->grid[2];
	m->text_tokens = o->text;
	m->step_index = dg_malloc(o->steps * sizeof(int));
	m->layer_index = dg_malloc(o->layers * sizeof(int));
	m->head_index = dg_malloc(o->heads * sizeof(int));
	for (int i = 0; i < o->steps; i++)
		m->step_index[i] = i;
	for (int i = 0; i < o->layers; i++)
		m->layer_index[i] = i;
	for (int i = 0; i < o->heads; i++)
		m->head_index[i] = i;
	m->model = dg_strdup("synthetic");
	m->source = dg_strdup("synthetic");
	m->version = DG_TRACE_VERSION;
}
