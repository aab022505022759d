/*
 * test_wan.c: dsgap's Wan2.1 CPU engine against the independent fp64 NumPy reference
 * (tests/wan_ref.py; fixtures in tests/fixtures/wan): per-layer outputs, Q/K/V as the attention
 * entry point receives them, the final output, and whole UniPC+CFG and Euler runs, for both key
 * layouts, F32/BF16/F16 files, sharded indexes, the model.diffusion_model. prefix and a config
 * inferred from shapes, at head_dim 64 (2 heads) and 128 (1 head). Identical weights in either
 * layout must give bit-identical outputs. Closed loop: a sparse policy at density 1 equals dense.
 * The op table's fused feed-forward (ffn) equals linear, gelu_tanh, linear bit for bit.
 *   test_wan MODELS_DIR FIXTURES_DIR     (MODELS_DIR from `wan_ref.py derive`)
 * Tolerance: fp32 engine vs fp64 reference, max |a-b| / max |ref| <= 1e-5 for one forward
 * (docs/spec.md §9's spirit: what fp32 rounding of the same math gives, measured ~1e-6), 2e-5 for the
 * multi-step runs (errors pass through 4 forwards x 2 passes and the solver).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/wait.h>
#include <unistd.h>

#include <gsl/gsl_rng.h>

#include "dit/dit_attn.h"
#include "dit/dit_sample.h"
#include "dit/safetensors.h"
#include "testhelp.h"
#include "wan_ops_checked.h"
#include "util/util.h"
#include "dit/wan.h"

#define TOL_FORWARD 1e-5
#define TOL_RUN 2e-5

static const char *models_dir, *fix_dir;

/* a reference tensor as double */
static double *ref_get(dg_safetensors *st, const char *name, int64_t *numel)
{
	const dg_st_tensor *t = dg_st_find(st, name);
	if (!t)
		dg_die("reference tensor %s missing", name);
	int64_t n = dg_st_numel(t);
	float *f = dg_malloc((size_t)n * sizeof(float));
	if (dg_st_read_f32(st, t, f))
		dg_die("cannot read %s", name);
	double *d = dg_malloc((size_t)n * sizeof(double));
	for (int64_t i = 0; i < n; i++)
		d[i] = f[i];
	free(f);
	if (numel)
		*numel = n;
	return d;
}

typedef struct {
	int layers, n, dim;
	float *hidden;        /* (layers, n, dim) */
	float *q, *k, *v;     /* layer 1: (heads, n, d) */
	int heads, d;
} record;

static void on_hidden(void *user, int layer, const float *x)
{
	record *r = user;
	memcpy(r->hidden + (size_t)layer * r->n * r->dim, x, (size_t)r->n * r->dim * sizeof(float));
}

static int on_capture(void *user, const dg_attn_site *s, int heads, int n, int d, const float *q,
		      const float *k, const float *v)
{
	record *r = user;
	if (s->layer != 1)
		return 0;
	size_t sz = (size_t)heads * n * d * sizeof(float);
	r->q = memcpy(dg_malloc(sz), q, sz);
	r->k = memcpy(dg_malloc(sz), k, sz);
	r->v = memcpy(dg_malloc(sz), v, sz);
	r->heads = heads;
	r->d = d;
	return 0;
}

typedef struct {
	float *out, *unipc, *euler; /* results kept for the bit-identity checks */
	size_t nout;
} results;

static void load_input(const char *name, dg_wan_model *m, float **data, int *tokens, int latent[3])
{
	char *p = dg_malloc(strlen(fix_dir) + 64);
	sprintf(p, "%s/%s.safetensors", fix_dir, name);
	int rc = latent ? dg_dit_read_noise(m, p, latent, data) : dg_dit_read_text(m, p, data, tokens);
	if (rc)
		dg_die("cannot read %s", p);
	free(p);
}

/* forward + runs of one model directory against ref_<tag> */
static void check_model(const char *sub, const char *tag, int heads, dg_wan_layout layout, results *res)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", models_dir, sub);
	dg_wan_model *m;
	int rc = dg_wan_load(&m, path, "cpu");
	CHECKF(rc == 0, "%s: loads", sub);
	if (rc)
		return;
	CHECKF(m->cfg.num_heads == heads && m->cfg.dim == 128 && m->cfg.num_layers == 2 &&
		       m->cfg.ffn_dim == 128 && m->cfg.text_dim == 32 && m->cfg.freq_dim == 32 &&
		       m->cfg.in_dim == 4 && m->cfg.out_dim == 4 && m->cfg.patch[1] == 2 && m->cfg.text_len == 512 &&
		       m->layout == layout && m->params == 478352,
	       "%s: config (%d heads of %d, %s layout, %lld params)", sub, m->cfg.num_heads,
	       dg_wan_head_dim(&m->cfg), dg_wan_layout_name(m->layout), m->params);
	float *text, *neg, *noise;
	int tokens, ntok, latent[3] = { 0, 0, 0 };
	load_input("text", m, &text, &tokens, NULL);
	load_input("negative", m, &neg, &ntok, NULL);
	load_input("noise", m, &noise, NULL, latent);
	dg_wan_context *cond, *uncond;
	if (dg_wan_context_new(m, text, tokens, &cond) || dg_wan_context_new(m, neg, ntok, &uncond))
		dg_die("context");
	int grid[3];
	dg_wan_grid(m, latent, grid);
	int n = grid[0] * grid[1] * grid[2];
	record r = { .layers = 2, .n = n, .dim = 128 };
	r.hidden = dg_alloc_poisoned((size_t)2 * n * 128);
	dg_dit_attn *attn = dg_dit_attn_new(m->ops, NULL, 1, NULL, grid, 2, heads, 128 / heads, 1);
	dg_dit_attn_set_capture(attn, on_capture, &r);
	dg_wan_call call = { .attn = attn, .hidden = on_hidden, .user = &r };
	size_t nout = (size_t)4 * latent[0] * latent[1] * latent[2];
	float *out = dg_alloc_poisoned(nout);
	rc = dg_wan_forward(m, noise, latent, 999, cond, &call, out);
	CHECKF(rc == 0, "%s: forward runs", sub);

	char rp[512];
	snprintf(rp, sizeof rp, "%s/ref_%s.safetensors", fix_dir, tag);
	dg_safetensors ref;
	if (dg_st_open(&ref, rp))
		dg_die("cannot open %s", rp);
	int64_t k;
	for (int l = 0; l < 2; l++) {
		char nm[32];
		snprintf(nm, sizeof nm, "hidden.%d", l);
		double *h = ref_get(&ref, nm, &k);
		double e = max_rel_diff(r.hidden + (size_t)l * n * 128, h, (size_t)k);
		CHECKF(e <= TOL_FORWARD, "%s: block %d output vs fp64 reference: max rel diff %.2e", sub, l, e);
		free(h);
	}
	const char *qkv[3] = { "q.1", "k.1", "v.1" };
	float *got[3] = { r.q, r.k, r.v };
	for (int i = 0; i < 3; i++) {
		double *h = ref_get(&ref, qkv[i], &k);
		double e = got[i] ? max_rel_diff(got[i], h, (size_t)k) : INFINITY;
		CHECKF(e <= TOL_FORWARD, "%s: block 1 %c as attention receives it (post-norm, post-RoPE, "
		       "(heads, n, d)) vs reference: %.2e", sub, qkv[i][0], e);
		free(h);
	}
	double *ho = ref_get(&ref, "out", &k);
	double e = max_rel_diff(out, ho, nout);
	CHECKF(e <= TOL_FORWARD && (size_t)k == nout, "%s: final output (unpatchified) vs reference: %.2e", sub, e);
	free(ho);

	/* whole runs: UniPC with CFG, Euler without */
	struct { const char *name; int steps; double shift, g; dg_sampler_kind s; float **keep; } runs[] = {
		{ "unipc_cfg", 4, 3.0, 4.0, DG_SAMPLER_UNIPC, &res->unipc },
		{ "euler", 3, 1.0, 1.0, DG_SAMPLER_EULER, &res->euler },
	};
	for (int i = 0; i < 2; i++) {
		dg_dit_sample_opts so = { .model = m, .latent = { latent[0], latent[1], latent[2] }, .noise = noise,
					  .steps = runs[i].steps, .shift = runs[i].shift, .guidance = runs[i].g,
					  .sampler = runs[i].s, .cond = cond, .uncond = uncond };
		float *x = dg_alloc_poisoned(nout);
		dg_dit_sample_stats st;
		rc = dg_dit_sample(&so, x, &st);
		double *hr = ref_get(&ref, runs[i].name, &k);
		e = rc ? INFINITY : max_rel_diff(x, hr, nout);
		CHECKF(e <= TOL_RUN && st.forwards == runs[i].steps * (runs[i].g != 1 ? 2 : 1),
		       "%s: %s run (%d steps, shift %g, guidance %g) final latents vs reference: %.2e", sub,
		       runs[i].name, runs[i].steps, runs[i].shift, runs[i].g, e);
		free(hr);
		*runs[i].keep = x;
	}
	res->out = out;
	res->nout = nout;
	dg_st_close(&ref);
	dg_dit_attn_free(attn);
	free(r.hidden), free(r.q), free(r.k), free(r.v);
	dg_wan_context_free(m, cond);
	dg_wan_context_free(m, uncond);
	free(text), free(neg), free(noise);
	dg_wan_free(m);
}

static bool same(const results *a, const results *b)
{
	return a->out && b->out && a->nout == b->nout && !memcmp(a->out, b->out, a->nout * sizeof(float)) &&
	       !memcmp(a->unipc, b->unipc, a->nout * sizeof(float)) &&
	       !memcmp(a->euler, b->euler, a->nout * sizeof(float));
}

static void results_free(results *r)
{
	free(r->out), free(r->unipc), free(r->euler);
}

/* closed loop: a sparse policy at density 1 keeps every key, so it must reproduce dense */
static void closed_loop_identity(void)
{
	char path[512];
	snprintf(path, sizeof path, "%s/orig_hd64", models_dir);
	dg_wan_model *m;
	if (dg_wan_load(&m, path, "cpu"))
		return;
	int latent[3] = { 4, 16, 24 }, grid[3]; /* 384 tokens: three groups of 128 */
	dg_wan_grid(m, latent, grid);
	float *noise = dg_dit_seed_noise(m, latent, 7), *text;
	int tokens;
	load_input("text", m, &text, &tokens, NULL);
	dg_wan_context *cond;
	dg_wan_context_new(m, text, tokens, &cond);
	size_t nout = (size_t)4 * latent[0] * latent[1] * latent[2];
	dg_dit_sample_opts so = { .model = m, .latent = { 4, 16, 24 }, .noise = noise, .steps = 3,
				  .shift = 3, .guidance = 1, .sampler = DG_SAMPLER_UNIPC, .cond = cond };
	float *dense = dg_alloc_poisoned(nout), *x = dg_alloc_poisoned(nout);
	dg_dit_sample_stats st;
	dg_dit_sample(&so, dense, &st);
	const char *specs[] = { "mc-sparse", "oracle+res", "est-block", "oracle-tile" };
	dg_schedule sched;
	dg_schedule_parse("warmup=1", &sched);
	for (int i = 0; i < 4; i++) {
		dg_policy p;
		dg_policy_parse(specs[i], &p);
		for (int dens = 0; dens < 2; dens++) {
			double rho = dens ? 0.3 : 1.0;
			dg_dit_attn *a = dg_dit_attn_new(m->ops, &p, rho, &sched, grid, 2, 2, 64, 1);
			so.attn = a;
			int rc = dg_dit_sample(&so, x, &st);
			dg_dit_attn_stats as;
			dg_dit_attn_get_stats(a, &as);
			dg_dit_attn_free(a);
			double num = 0, den = 0;
			for (size_t e = 0; e < nout; e++) {
				num = fmax(num, fabs((double)x[e] - dense[e]));
				den = fmax(den, fabs((double)dense[e]));
			}
			double density = as.pairs / as.full_pairs;
			if (rho == 1)
				CHECKF(rc == 0 && num / den <= 1e-5 && as.sparse_calls > 0,
				       "closed loop: %s at density 1 reproduces dense (%.2e; %lld of %lld units sparse)",
				       specs[i], num / den, as.sparse_calls, as.calls);
			else
				CHECKF(rc == 0 && density < 0.95 && num / den > 1e-6 && isfinite(num),
				       "closed loop: %s at density 0.3 runs sparse (effective density %.3f, max rel "
				       "change %.2e)", specs[i], density, num / den);
		}
	}
	free(dense), free(x), free(noise), free(text);
	dg_wan_context_free(m, cond);
	dg_wan_free(m);
}

/* the forward under a device backend's pointer discipline (wan_ops_checked.c: every op argument in
 * one of its buffers, weights and norm vectors in its copies) equals the CPU's bit for bit, dense
 * with CFG and mc-sparse in the closed loop */
static void checked_backend(void)
{
	char path[512];
	snprintf(path, sizeof path, "%s/orig_hd64", models_dir);
	int latent[3] = { 4, 16, 24 }, grid[3];
	size_t nout = (size_t)4 * latent[0] * latent[1] * latent[2];
	float *out[2] = { dg_alloc_poisoned(nout), dg_alloc_poisoned(nout) };
	enum { NPOL = 2 };
	const char *pols[NPOL] = { "mc-sparse", "pisa" }; /* the device path; pisa through host copies */
	float *sparse[2][NPOL];
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < NPOL; j++)
			sparse[i][j] = dg_alloc_poisoned(nout);
	const char *devices[2] = { "cpu", "cpu-checked" };
	for (int i = 0; i < 2; i++) {
		dg_wan_model *m;
		if (dg_wan_load_ops(&m, path, i ? dg_wan_ops_checked() : dg_wan_ops_cpu())) {
			CHECKF(0, "load %s", devices[i]);
			return;
		}
		dg_wan_grid(m, latent, grid);
		float *noise = dg_dit_seed_noise(m, latent, 11), *text;
		int tokens;
		load_input("text", m, &text, &tokens, NULL);
		dg_wan_context *cond, *uncond;
		float *zeros = dg_calloc((size_t)m->cfg.text_dim, sizeof(float));
		dg_wan_context_new(m, text, tokens, &cond);
		dg_wan_context_new(m, zeros, 1, &uncond);
		dg_dit_sample_opts so = { .model = m, .latent = { 4, 16, 24 }, .noise = noise, .steps = 3,
					  .shift = 3, .guidance = 4, .sampler = DG_SAMPLER_UNIPC, .cond = cond,
					  .uncond = uncond };
		dg_dit_sample_stats st;
		int rc = dg_dit_sample(&so, out[i], &st);
		dg_schedule sched;
		dg_schedule_parse("warmup=1", &sched);
		for (int j = 0; j < NPOL; j++) {
			dg_policy p;
			dg_policy_parse(pols[j], &p);
			dg_dit_attn *a = dg_dit_attn_new(m->ops, &p, 0.3, &sched, grid, 2, 2, 64, 2);
			so.attn = a;
			rc |= !a || dg_dit_sample(&so, sparse[i][j], &st);
			dg_dit_attn_free(a);
		}
		CHECKF(rc == 0, "sampling on the %s op table (UniPC, CFG 4, dense, mc-sparse and pisa at 0.3)",
		       devices[i]);
		dg_wan_context_free(m, cond), dg_wan_context_free(m, uncond);
		free(noise), free(text), free(zeros);
		dg_wan_free(m);
	}
	bool same = !memcmp(out[0], out[1], nout * sizeof(float));
	for (int j = 0; j < NPOL; j++)
		same = same && !memcmp(sparse[0][j], sparse[1][j], nout * sizeof(float));
	CHECKF(same, "the checked op table (device pointer discipline, the entry point's device path) gives "
		     "the CPU's outputs bit for bit");
	free(out[0]), free(out[1]);
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < NPOL; j++)
			free(sparse[i][j]);
}

/* a checkpoint as Wan-AI ships the 14B (diffusers names, BF16, six shards and
 * diffusion_pytorch_model.safetensors.index.json) = the single file of original names: the same
 * bytes read, the same outputs bit for bit, on the CPU table (BF16 -> fp32) and the checked one
 * (BF16 weights to the table as stored, prepare_bf16: the GPU's path); a non-finite BF16 weight
 * refused on that path too */
static void sharded_load(void)
{
	const char *subs[2] = { "orig_hd64", "shard6_hd64" };
	int latent[3] = { 4, 16, 24 };
	size_t nout = (size_t)4 * latent[0] * latent[1] * latent[2];
	float *out[2][2];
	double bytes[2][2];
	bool ok = true;
	for (int t = 0; t < 2; t++)
		for (int i = 0; i < 2; i++) {
			char path[512];
			snprintf(path, sizeof path, "%s/%s", models_dir, subs[i]);
			dg_wan_model *m;
			out[t][i] = dg_alloc_poisoned(nout);
			if (dg_wan_load_ops(&m, path, t ? dg_wan_ops_checked() : dg_wan_ops_cpu())) {
				ok = false;
				continue;
			}
			CHECKF(m->files == (i ? 6 : 1) && m->bf16_direct == (t ? 22 : 0) && m->load_s >= 0,
			       "%s on the %s table: %d file(s), %.0f bytes in %.3f s, %d linears as stored bf16",
			       subs[i], t ? "checked" : "CPU", m->files, m->load_bytes, m->load_s, m->bf16_direct);
			bytes[t][i] = m->load_bytes;
			float *noise = dg_dit_seed_noise(m, latent, 5), *text;
			int tokens;
			load_input("text", m, &text, &tokens, NULL);
			dg_wan_context *cond;
			dg_wan_context_new(m, text, tokens, &cond);
			dg_dit_sample_opts so = { .model = m, .latent = { 4, 16, 24 }, .noise = noise, .steps = 2,
						  .shift = 3, .guidance = 1, .sampler = DG_SAMPLER_UNIPC, .cond = cond };
			dg_dit_sample_stats st;
			ok &= dg_dit_sample(&so, out[t][i], &st) == 0;
			dg_wan_context_free(m, cond);
			free(noise), free(text);
			dg_wan_free(m);
		}
	bool same = ok;
	for (int t = 0; t < 2 && ok; t++)
		for (int i = 0; i < 2; i++)
			same &= !memcmp(out[0][0], out[t][i], nout * sizeof(float)) && bytes[t][i] == bytes[0][0];
	CHECKF(same, "6 shards + index (diffusers, BF16) = one file (original names): the same bytes read (%.0f), "
	       "the same outputs bit for bit on both tables", ok ? bytes[0][0] : 0);
	for (int t = 0; t < 2; t++)
		for (int i = 0; i < 2; i++)
			free(out[t][i]);
	char path[512];
	snprintf(path, sizeof path, "%s/bad/nan_bf16.safetensors", models_dir);
	dg_wan_model *m = NULL;
	fprintf(stderr, "(an error is expected next)\n");
	CHECK("a non-finite BF16 weight is refused on the as-stored path", dg_wan_load_ops(&m, path, dg_wan_ops_checked()) != 0 && !m);
}

static int count_sites(void *user, const dg_attn_site *s, int heads, int n, int d, const float *q,
		       const float *k, const float *v)
{
	++*(int *)user;
	return 0;
}

/* CFG's second pass may start from the first pass's x after the first block's self-attention half:
 * the same bits as computing it, on the CPU and the checked table; the sampler shares it exactly
 * where the entry point gives layer 0 the same output in both passes */
static void cfg_first_block_shared(const char *device)
{
	char path[512];
	snprintf(path, sizeof path, "%s/orig_hd64", models_dir);
	dg_wan_model *m;
	if (dg_wan_load_ops(&m, path, strcmp(device, "cpu") ? dg_wan_ops_checked() : dg_wan_ops_cpu())) {
		CHECKF(0, "load %s", device);
		return;
	}
	int latent[3] = { 4, 16, 24 }, grid[3];
	dg_wan_grid(m, latent, grid);
	size_t nout = (size_t)4 * latent[0] * latent[1] * latent[2];
	float *noise = dg_dit_seed_noise(m, latent, 5), *text;
	int tokens;
	load_input("text", m, &text, &tokens, NULL);
	float *zeros = dg_calloc((size_t)m->cfg.text_dim, sizeof(float));
	dg_wan_context *cond, *uncond;
	dg_wan_context_new(m, text, tokens, &cond);
	dg_wan_context_new(m, zeros, 1, &uncond);
	float *v[4];
	for (int i = 0; i < 4; i++)
		v[i] = dg_alloc_poisoned(nout);
	dg_wan_call keep = { .keep_first = true }, reuse = { .pass = 1, .reuse_first = true }, plain = { .pass = 1 };
	int rc = dg_wan_forward(m, noise, latent, 700, cond, &keep, v[0]);
	rc |= dg_wan_forward(m, noise, latent, 700, uncond, &reuse, v[1]);
	rc |= dg_wan_forward(m, noise, latent, 700, uncond, &plain, v[2]);
	rc |= dg_wan_forward(m, noise, latent, 700, cond, &plain, v[3]);
	CHECKF(rc == 0 && !memcmp(v[1], v[2], nout * sizeof(float)) && !memcmp(v[0], v[3], nout * sizeof(float)) &&
		       memcmp(v[1], v[0], nout * sizeof(float)),
	       "%s: the unconditional pass from the conditional pass's first self-attention half = computed "
	       "in full, bit for bit (and keeping it changes nothing)", device);
	/* which runs share: dense, layer 0 dense under the schedule; not a sparse layer 0, not a capture */
	struct { const char *policy, *schedule; bool capture; int shared; } cases[] = {
		{ "dense", "warmup=1", false, 3 },
		{ "mc-sparse", "warmup=1,dense_layers=0", false, 3 },
		{ "mc-sparse", "warmup=1", false, 0 },
		{ "dense", "warmup=1", true, 0 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		dg_policy p;
		dg_schedule sched;
		dg_policy_parse(cases[i].policy, &p);
		dg_schedule_parse(cases[i].schedule, &sched);
		dg_dit_attn *a = dg_dit_attn_new(m->ops, &p, 0.3, &sched, grid, 2, 2, 64, 2);
		int seen = 0;
		if (cases[i].capture)
			dg_dit_attn_set_capture(a, count_sites, &seen);
		dg_dit_sample_opts so = { .model = m, .latent = { 4, 16, 24 }, .noise = noise, .steps = 3, .shift = 3,
					  .guidance = 4, .sampler = DG_SAMPLER_UNIPC, .cond = cond, .uncond = uncond,
					  .attn = a };
		dg_dit_sample_stats st;
		rc = dg_dit_sample(&so, v[0], &st);
		dg_dit_attn_free(a);
		CHECKF(rc == 0 && st.forwards == 6 && st.shared_forwards == cases[i].shared &&
			       seen == (cases[i].capture ? 12 : 0),
		       "%s: %s, %s%s: %d of %d forwards share the first block's self-attention half (expected %d)",
		       device, cases[i].policy, cases[i].schedule, cases[i].capture ? ", capture" : "", st.shared_forwards,
		       st.forwards, cases[i].shared);
	}
	for (int i = 0; i < 4; i++)
		free(v[i]);
	free(noise), free(text), free(zeros);
	dg_wan_context_free(m, cond), dg_wan_context_free(m, uncond);
	dg_wan_free(m);
}

/* the checked table stops (a non-zero exit, in a child process) on an operand buffer where an op
 * reads fp32 (what a device table keeps in bf16 only), and takes one where it may */
static void operand_discipline(void)
{
	const char *what[] = { "layernorm reading an operand buffer", "add_gated writing one",
			       "upload into one", "linear_add into one" };
	for (int k = 0; k < 5; k++) {
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0) {
			freopen("/dev/null", "w", stderr);
			dg_wan_ops *o = dg_wan_ops_checked();
			float *op = o->alloc_operand(o, 64), *f = o->alloc(o, 64), host[64] = { 0 };
			dg_wan_linear l = { .w = host, .out = 8, .in = 8 };
			o->prepare(o, &l);
			if (k == 0)
				o->layernorm(o, op, 8, 8, 1e-6f, NULL, NULL, NULL, NULL, f);
			else if (k == 1)
				o->add_gated(o, op, f, NULL, 8, 8);
			else if (k == 2)
				o->upload(o, op, host, 64);
			else if (k == 3)
				o->linear_add(o, &l, f, 8, op);
			else /* allowed: layernorm into one, a linear and to_heads reading it, a linear into one */
				o->layernorm(o, f, 8, 8, 1e-6f, NULL, NULL, NULL, NULL, op), o->linear(o, &l, op, 8, f),
					o->to_heads(o, op, 8, 2, 4, NULL, 0, NULL, NULL, f), o->linear(o, &l, f, 8, op);
			_exit(0);
		}
		int status = 0;
		waitpid(pid, &status, 0);
		bool stopped = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		if (k < 4)
			CHECKF(stopped, "checked ops stop on %s", what[k]);
		else
			CHECK("checked ops take operand buffers where a device table reads or writes bf16", !stopped);
	}
}

/* n values uniform in [lo, hi) */
static float *uniform(gsl_rng *r, size_t n, double lo, double hi)
{
	float *x = dg_malloc(n * sizeof(float));
	for (size_t i = 0; i < n; i++)
		x[i] = (float)(lo + (hi - lo) * gsl_rng_uniform(r));
	return x;
}

/*
 * ffn (row chunks over the table's own hidden scratch) = linear, gelu_tanh, linear on the whole
 * input, bit for bit, on the CPU table and the checked one; m spans several of the CPU's chunks
 * (at least 1024 rows each) and ends in a short one, hidden and output wider than one GEMM tile.
 */
static void ffn_fused(const char *device, int m, int in, int hid, int out)
{
	dg_wan_ops *o = !strcmp(device, "cpu") ? dg_wan_ops_cpu() : dg_wan_ops_checked();
	gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
	gsl_rng_set(r, (unsigned long)m * hid + in);
	dg_wan_linear l1 = { .w = uniform(r, (size_t)hid * in, -0.2, 0.2), .b = uniform(r, hid, -1, 1),
			     .out = hid, .in = in };
	dg_wan_linear l2 = { .w = uniform(r, (size_t)out * hid, -0.1, 0.1), .b = uniform(r, out, -1, 1),
			     .out = out, .in = hid };
	float *x = uniform(r, (size_t)m * in, -2, 2);
	o->prepare(o, &l1), o->prepare(o, &l2);
	float *dx = o->alloc(o, (size_t)m * in), *dh = o->alloc(o, (size_t)m * hid);
	float *dy = o->alloc(o, (size_t)m * out), *dz = o->alloc(o, (size_t)m * out);
	float *y = dg_alloc_poisoned((size_t)m * out), *z = dg_alloc_poisoned((size_t)m * out);
	o->upload(o, dx, x, (size_t)m * in);
	o->upload(o, dy, y, (size_t)m * out);
	o->upload(o, dz, z, (size_t)m * out);
	o->linear(o, &l1, dx, m, dh);
	o->gelu_tanh(o, dh, (size_t)m * hid);
	o->linear(o, &l2, dh, m, dy);
	o->ffn(o, &l1, &l2, dx, m, dz);
	o->download(o, y, dy, (size_t)m * out);
	o->download(o, z, dz, (size_t)m * out);
	bool finite = true;
	for (size_t i = 0; i < (size_t)m * out; i++)
		finite = finite && isfinite(y[i]);
	CHECKF(finite && !memcmp(y, z, (size_t)m * out * sizeof(float)),
	       "%s: ffn of (%d x %d) through %d hidden to %d equals linear, gelu_tanh, linear bit for bit", device,
	       m, in, hid, out);
	o->release(o, dx), o->release(o, dh), o->release(o, dy), o->release(o, dz);
	o->unprepare(o, &l1), o->unprepare(o, &l2);
	o->destroy(o);
	free(l1.w), free(l1.b), free(l2.w), free(l2.b), free(x), free(y), free(z);
	gsl_rng_free(r);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: test_wan MODELS_DIR FIXTURES_DIR\n");
		return 2;
	}
	models_dir = argv[1];
	fix_dir = argv[2];
	results r[5] = { 0 };
	check_model("orig_hd64", "hd64", 2, DG_WAN_LAYOUT_ORIGINAL, &r[0]);
	check_model("diff_hd64", "hd64", 2, DG_WAN_LAYOUT_DIFFUSERS, &r[1]);
	check_model("orig_hd128", "hd128", 1, DG_WAN_LAYOUT_ORIGINAL, &r[2]);
	check_model("diff_hd128", "hd128", 1, DG_WAN_LAYOUT_DIFFUSERS, &r[3]);
	check_model("infer_hd128", "hd128", 1, DG_WAN_LAYOUT_ORIGINAL, &r[4]);
	CHECK("head_dim 64: original (BF16) and diffusers (F32, sharded) layouts give bit-identical outputs",
	      same(&r[0], &r[1]));
	CHECK("head_dim 128: original (F16, prefixed), diffusers (BF16) and inferred-config (F32) give "
	      "bit-identical outputs", same(&r[2], &r[3]) && same(&r[2], &r[4]));
	for (int i = 0; i < 5; i++)
		results_free(&r[i]);
	closed_loop_identity();
	checked_backend();
	sharded_load();
	cfg_first_block_shared("cpu");
	cfg_first_block_shared("cpu-checked");
	operand_discipline();
	ffn_fused("cpu", 2 * 1024 + 40, 96, 1536, 80);
	ffn_fused("cpu-checked", 1024 + 500, 64, 256, 1100);
	return test_report();
}
