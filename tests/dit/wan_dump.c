/*
 * wan_dump.c: one dsgap Wan2.1 forward (CPU, or GPU with a last argument gpu) with everything the PyTorch / diffusers
 * comparison (tests/torch_ref/compare_diffusers.py) looks at, written as an F32 safetensors file:
 *   out (C, F, H, W)            the velocity, unpatchified
 *   hidden.<l> (N, D)           the residual stream after block l
 *   q.<l>, k.<l>, v.<l> (H, N, d)  self-attention operands as the entry point receives them
 *                               (post-qk-norm, post-RoPE)
 *   wan_dump MODEL TEXT NOISE T OUT.safetensors [cpu|gpu]
 * MODEL as dsgap capture's --model (either key layout); TEXT (tokens, text_dim) and NOISE
 * (channels, F, H, W) as --text and --noise; T the timestep (0..1000). Not a test by itself.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "dit/dit_attn.h"
#include "dit/dit_sample.h"
#include "util/files.h"
#include "util/util.h"
#include "dit/wan.h"

typedef struct {
	char name[32];
	int ndim;
	int64_t shape[4];
	float *data;
} item;

typedef struct {
	item *it;
	int count, cap;
	int n, dim;
} dump;

static item *add(dump *u, const char *name, int ndim, const int64_t *shape, const float *src)
{
	if (u->count == u->cap) {
		u->cap = u->cap ? 2 * u->cap : 16;
		u->it = realloc(u->it, (size_t)u->cap * sizeof *u->it);
		if (!u->it)
			dg_die("out of memory");
	}
	item *t = &u->it[u->count++];
	snprintf(t->name, sizeof t->name, "%s", name);
	t->ndim = ndim;
	size_t numel = 1;
	for (int i = 0; i < ndim; i++)
		numel *= (size_t)(t->shape[i] = shape[i]);
	t->data = memcpy(dg_malloc(numel * sizeof(float)), src, numel * sizeof(float));
	return t;
}

static size_t numel(const item *t)
{
	size_t k = 1;
	for (int i = 0; i < t->ndim; i++)
		k *= (size_t)t->shape[i];
	return k;
}

static void on_hidden(void *user, int layer, const float *x)
{
	dump *u = user;
	char nm[32];
	snprintf(nm, sizeof nm, "hidden.%d", layer);
	add(u, nm, 2, (int64_t[]){ u->n, u->dim }, x);
}

static int on_capture(void *user, const dg_attn_site *s, int heads, int n, int d, const float *q,
		      const float *k, const float *v)
{
	const char *names[3] = { "q", "k", "v" };
	const float *src[3] = { q, k, v };
	for (int i = 0; i < 3; i++) {
		char nm[32];
		snprintf(nm, sizeof nm, "%s.%d", names[i], s->layer);
		add(user, nm, 3, (int64_t[]){ heads, n, d }, src[i]);
	}
	return 0;
}

/* the items as one F32 safetensors file (header padded to 8 bytes; little-endian host) */
static int write_safetensors(const char *path, const dump *u)
{
	cJSON *h = cJSON_CreateObject();
	size_t off = 0;
	for (int i = 0; i < u->count; i++) {
		const item *t = &u->it[i];
		cJSON *e = cJSON_AddObjectToObject(h, t->name);
		cJSON_AddStringToObject(e, "dtype", "F32");
		cJSON *sh = cJSON_AddArrayToObject(e, "shape");
		for (int j = 0; j < t->ndim; j++)
			cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->shape[j]));
		size_t b = numel(t) * sizeof(float);
		cJSON *o = cJSON_AddArrayToObject(e, "data_offsets");
		cJSON_AddItemToArray(o, cJSON_CreateNumber((double)off));
		cJSON_AddItemToArray(o, cJSON_CreateNumber((double)(off + b)));
		off += b;
	}
	char *js = cJSON_PrintUnformatted(h);
	cJSON_Delete(h);
	size_t len = strlen(js), pad = (8 - len % 8) % 8;
	uint64_t hl = len + pad;
	dg_out o;
	if (dg_out_open(&o, path)) {
		free(js);
		return -1;
	}
	fwrite(&hl, 8, 1, o.f);
	fwrite(js, 1, len, o.f);
	for (size_t i = 0; i < pad; i++)
		fputc(' ', o.f);
	for (int i = 0; i < u->count; i++)
		fwrite(u->it[i].data, sizeof(float), numel(&u->it[i]), o.f);
	free(js);
	return dg_out_commit(&o);
}

int main(int argc, char **argv)
{
	if (argc != 6 && argc != 7) {
		fprintf(stderr, "usage: wan_dump MODEL TEXT NOISE T OUT.safetensors [cpu|gpu]\n");
		return 2;
	}
	double t = atof(argv[4]);
	dg_wan_model *m;
	if (dg_wan_load(&m, argv[1], argc == 7 ? argv[6] : "cpu"))
		return 1;
	float *text, *noise;
	int tokens, latent[3] = { 0, 0, 0 }, grid[3];
	if (dg_dit_read_text(m, argv[2], &text, &tokens) || dg_dit_read_noise(m, argv[3], latent, &noise) ||
	    dg_wan_grid(m, latent, grid))
		return 1;
	dg_wan_context *ctx;
	if (dg_wan_context_new(m, text, tokens, &ctx))
		return 1;
	const dg_wan_config *c = &m->cfg;
	dump u = { .n = grid[0] * grid[1] * grid[2], .dim = c->dim };
	dg_dit_attn *attn = dg_dit_attn_new(m->ops, NULL, 1, NULL, grid, c->num_layers, c->num_heads,
					    dg_wan_head_dim(c), 1);
	if (!attn)
		return 1;
	dg_dit_attn_set_capture(attn, on_capture, &u);
	dg_wan_call call = { .attn = attn, .hidden = on_hidden, .user = &u };
	int64_t shape[4] = { c->out_dim, latent[0], latent[1], latent[2] };
	float *out = dg_malloc((size_t)shape[0] * shape[1] * shape[2] * shape[3] * sizeof(float));
	if (dg_wan_forward(m, noise, latent, t, ctx, &call, out))
		return 1;
	add(&u, "out", 4, shape, out);
	int rc = write_safetensors(argv[5], &u);
	printf("%s: %s layout, %d tensors, %d tokens, t %g -> %s\n", argv[1], dg_wan_layout_name(m->layout),
	       u.count, u.n, t, argv[5]);
	for (int i = 0; i < u.count; i++)
		free(u.it[i].data);
	free(u.it), free(out), free(text), free(noise);
	dg_dit_attn_free(attn);
	dg_wan_context_free(m, ctx);
	dg_wan_free(m);
	return rc ? 1 : 0;
}
