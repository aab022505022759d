/*
 * wan_load.c: load a Wan2.1 text-to-video transformer from safetensors: find the files, detect the
 * key layout (original Wan names or diffusers names, optional "model.diffusion_model." prefix),
 * infer the config from shapes (then config.json on top), check every tensor's presence and shape,
 * and convert to fp32. The linears that the forward runs through the op table get the backend's
 * copy (ops->prepare) as soon as they are read; where that copy is complete (the GPU's bf16 on
 * the device) the host fp32 copy is freed at once, so host memory holds one such tensor at a time;
 * a BF16 weight goes to a table with prepare_bf16 as the file stores it (the GPU: half the bytes up,
 * no fp32 copy anywhere). A sharded checkpoint is read through its index (safetensors.h). The time
 * and bytes of the load are kept in the model (load_s, load_bytes). Name map (reference §1.3),
 * original <- diffusers:
 *
 *   patch_embedding.*                  patch_embedding.*
 *   text_embedding.{0,2}.*             condition_embedder.text_embedder.linear_{1,2}.*
 *   time_embedding.{0,2}.*             condition_embedder.time_embedder.linear_{1,2}.*
 *   time_projection.1.*                condition_embedder.time_proj.*
 *   blocks.i.modulation                blocks.i.scale_shift_table
 *   blocks.i.self_attn.{q,k,v,o}.*     blocks.i.attn1.{to_q,to_k,to_v,to_out.0}.*
 *   blocks.i.self_attn.norm_{q,k}.*    blocks.i.attn1.norm_{q,k}.*
 *   blocks.i.norm3.*  (cross pre-norm) blocks.i.norm2.*          <- the swap
 *   blocks.i.cross_attn.*              blocks.i.attn2.*  (same sub-names as attn1)
 *   blocks.i.ffn.{0,2}.*               blocks.i.ffn.net.0.proj.*, blocks.i.ffn.net.2.*
 *   head.modulation                    scale_shift_table
 *   head.head.*                        proj_out.*
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dit/safetensors.h"
#include "util/util.h"
#include "dit/wan.h"

#define PREFIX "model.diffusion_model."

const char *dg_wan_layout_name(dg_wan_layout l)
{
	static const char *names[DG_WAN_LAYOUT_COUNT] = { "original", "diffusers" };
	DG_ASSERT(l >= 0 && l < DG_WAN_LAYOUT_COUNT);
	return names[l];
}

/* ---------------------------------------------------------------------------------------------- */
/* files                                                                                           */

static bool is_dir(const char *p)
{
	struct stat st;
	return !stat(p, &st) && S_ISDIR(st.st_mode);
}

static bool is_file(const char *p)
{
	struct stat st;
	return !stat(p, &st) && S_ISREG(st.st_mode);
}

/* a name that is there in any form (a dangling link, a FIFO): a config.json there is read, and what
 * is wrong with it said, rather than the model run on a config inferred from its shapes */
static bool exists(const char *p)
{
	struct stat st;
	return !lstat(p, &st);
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && !strcmp(s + a - b, suffix);
}

/* The single entry of dir ending in suffix: 1 found (new string in *out), 0 none, -1 several. */
static int find_one(const char *dir, const char *suffix, char **out)
{
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || !ends_with(e->d_name, suffix))
			continue;
		if (n++ == 0)
			*out = dg_path_join(dir, e->d_name);
	}
	closedir(d);
	if (n > 1) {
		free(*out);
		*out = NULL;
		return -1;
	}
	return n;
}

/* weights (file or index) and config.json (or NULL) of a model path */
static int resolve(const char *path, char **weights, char **config)
{
	*weights = *config = NULL;
	if (!is_dir(path)) {
		if (!is_file(path))
			return dg_error("cannot open model %s: %s", path, strerror(errno ? errno : ENOENT));
		*weights = dg_strdup(path);
		char *dir = dg_strdup(path), *slash = strrchr(dir, '/');
		if (slash)
			*slash = 0;
		char *cfg = dg_path_join(slash ? dir : ".", "config.json");
		free(dir);
		if (exists(cfg))
			*config = cfg;
		else
			free(cfg);
		return 0;
	}
	char *dir = dg_strdup(path), *tmp = NULL;
	if (find_one(dir, ".safetensors", &tmp) == 0 && find_one(dir, ".safetensors.index.json", &tmp) == 0) {
		char *sub = dg_path_join(dir, "transformer"); /* a diffusers pipeline directory */
		if (is_dir(sub)) {
			free(dir);
			dir = sub;
		} else {
			free(sub);
		}
	}
	free(tmp);
	tmp = NULL;
	const char *pref[] = { "diffusion_pytorch_model.safetensors.index.json",
			       "diffusion_pytorch_model.safetensors" };
	for (int i = 0; i < 2 && !*weights; i++) {
		char *p = dg_path_join(dir, pref[i]);
		if (is_file(p))
			*weights = p;
		else
			free(p);
	}
	int rc = 0;
	if (!*weights) {
		int k = find_one(dir, ".safetensors.index.json", weights);
		if (k == 0)
			k = find_one(dir, ".safetensors", weights);
		if (k < 0)
			rc = dg_error("%s: several .safetensors files and no index: name the file", dir);
		else if (k == 0)
			rc = dg_error("%s: no .safetensors file or index in this directory", dir);
	}
	if (!rc) {
		char *cfg = dg_path_join(dir, "config.json");
		if (exists(cfg))
			*config = cfg;
		else
			free(cfg);
	}
	free(dir);
	return rc;
}

/* ---------------------------------------------------------------------------------------------- */
/* names                                                                                           */

typedef struct {
	const char *name; /* without the prefix */
	const dg_st_tensor *t;
	bool used;
} named;

typedef struct {
	dg_safetensors st;
	named *names; /* sorted by name */
	int n;
	dg_wan_layout layout;
	const char *label;
	double bytes;    /* read so far */
	int bf16_direct; /* linears uploaded as stored */
} ckpt;

static int by_named(const void *a, const void *b)
{
	return strcmp(((const named *)a)->name, ((const named *)b)->name);
}

static named *lookup(ckpt *c, const char *name)
{
	named key = { .name = name };
	return c->n ? bsearch(&key, c->names, c->n, sizeof key, by_named) : NULL;
}

static bool starts(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

static int index_names(ckpt *c)
{
	c->n = c->st.ntensors;
	c->names = dg_malloc((size_t)(c->n ? c->n : 1) * sizeof *c->names);
	for (int i = 0; i < c->n; i++) {
		const char *s = c->st.tensors[i].name;
		c->names[i] = (named){ starts(s, PREFIX) ? s + strlen(PREFIX) : s, &c->st.tensors[i], false };
	}
	qsort(c->names, c->n, sizeof *c->names, by_named);
	for (int i = 1; i < c->n; i++)
		if (!strcmp(c->names[i].name, c->names[i - 1].name))
			return dg_error("%s: tensor '%s' appears both with and without the '" PREFIX "' prefix",
					c->label, c->names[i].name);
	/* layout */
	const char *orig = NULL, *diff = NULL;
	for (int i = 0; i < c->n; i++) {
		const char *s = c->names[i].name;
		if (starts(s, "text_embedding.") || starts(s, "time_embedding.") || starts(s, "time_projection.") ||
		    starts(s, "head.") || strstr(s, ".self_attn.") || strstr(s, ".cross_attn."))
			orig = orig ? orig : s;
		if (starts(s, "condition_embedder.") || starts(s, "proj_out.") || !strcmp(s, "scale_shift_table") ||
		    strstr(s, ".attn1.") || strstr(s, ".attn2."))
			diff = diff ? diff : s;
	}
	if (orig && diff)
		return dg_error("%s: mixes original Wan names ('%s') and diffusers names ('%s')", c->label,
				orig, diff);
	if (!orig && !diff)
		return dg_error("%s: not a Wan2.1 transformer checkpoint (no text/time embedding, attention "
				"or head tensors among %d tensors)", c->label, c->n);
	c->layout = diff ? DG_WAN_LAYOUT_DIFFUSERS : DG_WAN_LAYOUT_ORIGINAL;
	return 0;
}

/* The checkpoint name of an original-layout name, in the checkpoint's layout. */
static void to_layout(dg_wan_layout layout, const char *orig, char *out, size_t size)
{
	if (layout == DG_WAN_LAYOUT_ORIGINAL) {
		snprintf(out, size, "%s", orig);
		return;
	}
	static const struct { const char *from, *to; } top[] = {
		{ "text_embedding.0.", "condition_embedder.text_embedder.linear_1." },
		{ "text_embedding.2.", "condition_embedder.text_embedder.linear_2." },
		{ "time_embedding.0.", "condition_embedder.time_embedder.linear_1." },
		{ "time_embedding.2.", "condition_embedder.time_embedder.linear_2." },
		{ "time_projection.1.", "condition_embedder.time_proj." },
		{ "head.head.", "proj_out." },
	};
	if (!strcmp(orig, "head.modulation")) {
		snprintf(out, size, "scale_shift_table");
		return;
	}
	for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
		if (starts(orig, top[i].from)) {
			snprintf(out, size, "%s%s", top[i].to, orig + strlen(top[i].from));
			return;
		}
	int blk, off = 0;
	if (sscanf(orig, "blocks.%d.%n", &blk, &off) == 1 && off > 0) {
		const char *rest = orig + off;
		static const struct { const char *from, *to; } sub[] = {
			{ "modulation", "scale_shift_table" },
			{ "self_attn.q.", "attn1.to_q." }, { "self_attn.k.", "attn1.to_k." },
			{ "self_attn.v.", "attn1.to_v." }, { "self_attn.o.", "attn1.to_out.0." },
			{ "self_attn.norm_q.", "attn1.norm_q." }, { "self_attn.norm_k.", "attn1.norm_k." },
			{ "cross_attn.q.", "attn2.to_q." }, { "cross_attn.k.", "attn2.to_k." },
			{ "cross_attn.v.", "attn2.to_v." }, { "cross_attn.o.", "attn2.to_out.0." },
			{ "cross_attn.norm_q.", "attn2.norm_q." }, { "cross_attn.norm_k.", "attn2.norm_k." },
			{ "norm3.", "norm2." }, /* the swap: the cross-attention pre-norm */
			{ "ffn.0.", "ffn.net.0.proj." }, { "ffn.2.", "ffn.net.2." },
		};
		for (size_t i = 0; i < sizeof sub / sizeof sub[0]; i++)
			if (starts(rest, sub[i].from)) {
				snprintf(out, size, "blocks.%d.%s%s", blk, sub[i].to, rest + strlen(sub[i].from));
				return;
			}
	}
	snprintf(out, size, "%s", orig);
}

static const dg_st_tensor *find(ckpt *c, const char *orig)
{
	char name[256];
	to_layout(c->layout, orig, name, sizeof name);
	named *n = lookup(c, name);
	return n ? n->t : NULL;
}

/* ---------------------------------------------------------------------------------------------- */
/* config from shapes                                                                              */

static int infer(ckpt *c, dg_wan_config *cfg)
{
	const dg_st_tensor *pe = find(c, "patch_embedding.weight");
	const dg_st_tensor *te = find(c, "text_embedding.0.weight");
	const dg_st_tensor *tm = find(c, "time_embedding.0.weight");
	const dg_st_tensor *ff = find(c, "blocks.0.ffn.0.weight");
	const dg_st_tensor *hd = find(c, "head.head.weight");
	const char *missing = !pe ? "patch_embedding.weight" : !te ? "text_embedding.0.weight"
			      : !tm ? "time_embedding.0.weight" : !ff ? "blocks.0.ffn.0.weight"
			      : !hd ? "head.head.weight" : NULL;
	if (missing) {
		char name[256];
		to_layout(c->layout, missing, name, sizeof name);
		return dg_error("%s: missing tensor '%s' (%s layout)", c->label, name,
				dg_wan_layout_name(c->layout));
	}
	if (pe->ndim != 5 || te->ndim != 2 || tm->ndim != 2 || ff->ndim != 2 || hd->ndim != 2)
		return dg_error("%s: cannot infer the config: unexpected rank of the patch embedding (%d, "
				"expected 5) or of a linear weight", c->label, pe->ndim);
	cfg->dim = (int)pe->shape[0];
	cfg->in_dim = (int)pe->shape[1];
	for (int i = 0; i < 3; i++)
		cfg->patch[i] = (int)pe->shape[2 + i];
	cfg->text_dim = (int)te->shape[1];
	cfg->freq_dim = (int)tm->shape[1];
	cfg->ffn_dim = (int)ff->shape[0];
	int p = cfg->patch[0] * cfg->patch[1] * cfg->patch[2];
	cfg->out_dim = p > 0 && hd->shape[0] % p == 0 ? (int)(hd->shape[0] / p) : 0;
	int layers = 0;
	for (int i = 0; i < c->n; i++) {
		int b;
		if (sscanf(c->names[i].name, "blocks.%d.", &b) == 1 && b >= 0 && b < 100000 && b + 1 > layers)
			layers = b + 1;
	}
	cfg->num_layers = layers;
	cfg->num_heads = cfg->dim % 128 == 0 ? cfg->dim / 128 : 0; /* Wan: head_dim 128 */
	cfg->qk_norm = find(c, "blocks.0.self_attn.norm_q.weight") != NULL;
	cfg->cross_attn_norm = find(c, "blocks.0.norm3.weight") != NULL;
	return 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* loading                                                                                         */

/* the checked tensor of original name orig with this shape (marked used), or NULL after one line */
static const dg_st_tensor *take_tensor(ckpt *c, const char *orig, int ndim, const int64_t *shape)
{
	char name[320], got[160], want[160];
	to_layout(c->layout, orig, name, sizeof name);
	named *n = lookup(c, name);
	if (!n) {
		dg_error("%s: missing tensor '%s' (%s layout)", c->label, name, dg_wan_layout_name(c->layout));
		return NULL;
	}
	const dg_st_tensor *t = n->t;
	bool ok = t->ndim == ndim;
	for (int i = 0; ok && i < ndim; i++)
		ok = t->shape[i] == shape[i];
	if (!ok) {
		dg_error("%s: tensor '%s' has shape %s, expected %s", dg_st_file_of(&c->st, t), t->name,
			 dg_st_shape_str(t->shape, t->ndim, got, sizeof got), dg_st_shape_str(shape, ndim, want, sizeof want));
		return NULL;
	}
	n->used = true;
	c->bytes += (double)t->nbytes;
	return t;
}

static int take(ckpt *c, const char *orig, float **dst, int ndim, const int64_t *shape)
{
	const dg_st_tensor *t = take_tensor(c, orig, ndim, shape);
	if (!t)
		return -1;
	int64_t numel = dg_st_numel(t);
	*dst = dg_malloc((size_t)(numel ? numel : 1) * sizeof(float));
	return dg_st_read_f32(&c->st, t, *dst);
}

static int take1(ckpt *c, const char *orig, float **dst, int64_t a)
{
	return take(c, orig, dst, 1, (int64_t[]){ a });
}

/* the backend's copy of a linear the forward runs through ops (NULL: the host's own, e.g. the time MLP) */
static void to_backend(dg_wan_ops *ops, dg_wan_linear *l)
{
	if (!ops)
		return;
	ops->prepare(ops, l);
	if (ops->device_weights) {
		free(l->w);
		l->w = NULL;
	}
}

/* the vectors that the ops read (norm weights) of block k: into a device_weights backend's buffers,
 * once the whole checkpoint has loaded (m->vecs_on_backend), so a failed load frees host memory only */
static void vecs_to_backend(dg_wan_ops *ops, dg_wan_block *k, int n)
{
	float **v[] = { &k->norm_q, &k->norm_k, &k->cnorm_q, &k->cnorm_k, &k->norm3_w, &k->norm3_b };
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
		if (!*v[i])
			continue;
		float *dv = ops->alloc(ops, (size_t)n);
		ops->upload(ops, dv, *v[i], (size_t)n);
		free(*v[i]);
		*v[i] = dv;
	}
}

/* a linear's weight and bias; a BF16 weight goes to a backend with prepare_bf16 as stored (no fp32
 * copy on the host) */
static int take_linear(ckpt *c, const char *base, dg_wan_linear *l, int out, int in, bool bias, dg_wan_ops *ops)
{
	char name[300];
	l->out = out;
	l->in = in;
	snprintf(name, sizeof name, "%s.bias", base);
	if (bias && take1(c, name, &l->b, out))
		return -1;
	snprintf(name, sizeof name, "%s.weight", base);
	if (ops && ops->prepare_bf16 && !l->fp32) {
		const dg_st_tensor *t = take_tensor(c, name, 2, (int64_t[]){ out, in });
		const void *w16;
		int v = t ? dg_st_bf16_view(&c->st, t, &w16) : -1;
		if (v < 0)
			return -1;
		if (v == 0) {
			ops->prepare_bf16(ops, l, w16);
			c->bf16_direct++;
			return 0;
		}
		c->bytes -= (double)t->nbytes; /* read again by take */
	}
	if (take(c, name, &l->w, 2, (int64_t[]){ out, in }))
		return -1;
	to_backend(ops, l);
	return 0;
}

static int load_all(ckpt *c, dg_wan_model *m)
{
	const dg_wan_config *g = &m->cfg;
	dg_wan_ops *o = m->ops;
	int D = g->dim, P = g->patch[0] * g->patch[1] * g->patch[2];
	char b[256];
	if (take(c, "patch_embedding.weight", &m->patch.w, 5,
		 (int64_t[]){ D, g->in_dim, g->patch[0], g->patch[1], g->patch[2] }) ||
	    take1(c, "patch_embedding.bias", &m->patch.b, D))
		return -1;
	m->patch.out = D;
	m->patch.in = g->in_dim * P;
	to_backend(o, &m->patch);
	/* the time MLP and projection run on the host (wan_forward.c): no backend copy */
	if (take_linear(c, "text_embedding.0", &m->text1, D, g->text_dim, true, o) ||
	    take_linear(c, "text_embedding.2", &m->text2, D, D, true, o) ||
	    take_linear(c, "time_embedding.0", &m->time1, D, g->freq_dim, true, NULL) ||
	    take_linear(c, "time_embedding.2", &m->time2, D, D, true, NULL) ||
	    take_linear(c, "time_projection.1", &m->time_proj, 6 * D, D, true, NULL))
		return -1;
	m->blocks = dg_calloc(g->num_layers, sizeof *m->blocks);
	for (int i = 0; i < g->num_layers; i++) {
		dg_wan_block *k = &m->blocks[i];
		struct { const char *sub; dg_wan_linear *l; int out, in; } lin[] = {
			{ "self_attn.q", &k->q, D, D }, { "self_attn.k", &k->k, D, D },
			{ "self_attn.v", &k->v, D, D }, { "self_attn.o", &k->o, D, D },
			{ "cross_attn.q", &k->cq, D, D }, { "cross_attn.k", &k->ck, D, D },
			{ "cross_attn.v", &k->cv, D, D }, { "cross_attn.o", &k->co, D, D },
			{ "ffn.0", &k->ffn1, g->ffn_dim, D }, { "ffn.2", &k->ffn2, D, g->ffn_dim },
		};
		snprintf(b, sizeof b, "blocks.%d.modulation", i);
		if (take(c, b, &k->modulation, 3, (int64_t[]){ 1, 6, D }))
			return -1;
		for (size_t j = 0; j < sizeof lin / sizeof lin[0]; j++) {
			snprintf(b, sizeof b, "blocks.%d.%s", i, lin[j].sub);
			if (take_linear(c, b, lin[j].l, lin[j].out, lin[j].in, true, o))
				return -1;
		}
		if (g->qk_norm) {
			struct { const char *sub; float **dst; } nq[] = {
				{ "self_attn.norm_q.weight", &k->norm_q }, { "self_attn.norm_k.weight", &k->norm_k },
				{ "cross_attn.norm_q.weight", &k->cnorm_q }, { "cross_attn.norm_k.weight", &k->cnorm_k },
			};
			for (int j = 0; j < 4; j++) {
				snprintf(b, sizeof b, "blocks.%d.%s", i, nq[j].sub);
				if (take1(c, b, nq[j].dst, D))
					return -1;
			}
		}
		if (g->cross_attn_norm) {
			snprintf(b, sizeof b, "blocks.%d.norm3.weight", i);
			if (take1(c, b, &k->norm3_w, D))
				return -1;
			snprintf(b, sizeof b, "blocks.%d.norm3.bias", i);
			if (take1(c, b, &k->norm3_b, D))
				return -1;
		}
	}
	m->head.fp32 = true; /* Wan2.1's Head runs under autocast(float32) */
	if (take(c, "head.modulation", &m->head_mod, 3, (int64_t[]){ 1, 2, D }) ||
	    take_linear(c, "head.head", &m->head, g->out_dim * P, D, true, o))
		return -1;
	if (o && o->device_weights) {
		for (int i = 0; i < g->num_layers; i++)
			vecs_to_backend(o, &m->blocks[i], D);
		m->vecs_on_backend = true;
	}
	/* everything else is unexpected */
	int extra = 0;
	const named *first = NULL;
	for (int i = 0; i < c->n; i++)
		if (!c->names[i].used && !extra++)
			first = &c->names[i];
	if (extra) {
		const char *why = strstr(first->name, "img_emb") || strstr(first->name, "_img") ||
					  strstr(first->name, "add_k_proj") || strstr(first->name, "image_embedder")
				  ? " (an image-to-video model? only text-to-video is supported)"
				  : "";
		return dg_error("%s: unexpected tensor '%s'%s%s", dg_st_file_of(&c->st, first->t), first->t->name,
				why, extra > 1 ? " (and more)" : "");
	}
	return 0;
}

static void linear_free(dg_wan_ops *ops, dg_wan_linear *l)
{
	if (ops && ops->unprepare)
		ops->unprepare(ops, l);
	free(l->w);
	free(l->b);
}

void dg_wan_workspace_free(dg_wan_model *m); /* wan_forward.c */

void dg_wan_free(dg_wan_model *m)
{
	if (!m)
		return;
	dg_wan_workspace_free(m);
	dg_wan_linear *top[] = { &m->patch, &m->text1, &m->text2, &m->time1, &m->time2, &m->time_proj, &m->head };
	for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
		linear_free(m->ops, top[i]);
	if (m->blocks)
		for (int i = 0; i < m->cfg.num_layers; i++) {
			dg_wan_block *k = &m->blocks[i];
			dg_wan_linear *l[] = { &k->q, &k->k, &k->v, &k->o, &k->cq, &k->ck, &k->cv, &k->co, &k->ffn1, &k->ffn2 };
			for (size_t j = 0; j < sizeof l / sizeof l[0]; j++)
				linear_free(m->ops, l[j]);
			free(k->modulation);
			float *vecs[] = { k->norm_q, k->norm_k, k->cnorm_q, k->cnorm_k, k->norm3_w, k->norm3_b };
			for (size_t j = 0; j < sizeof vecs / sizeof vecs[0]; j++) {
				if (m->vecs_on_backend && vecs[j])
					m->ops->release(m->ops, vecs[j]);
				else
					free(vecs[j]);
			}
		}
	free(m->blocks);
	free(m->head_mod);
	if (m->ops)
		m->ops->destroy(m->ops);
	free(m->weights_path);
	free(m->config_path);
	free(m->name);
	free(m);
}

int dg_wan_load(dg_wan_model **out, const char *path, const char *device)
{
	*out = NULL;
	bool gpu = device && !strcmp(device, "gpu");
	if (device && !gpu && strcmp(device, "cpu"))
		return dg_error("unknown device '%s' (cpu or gpu)", device);
	dg_wan_ops *ops = gpu ? dg_wan_ops_gpu() : dg_wan_ops_cpu();
	return ops ? dg_wan_load_ops(out, path, ops) : -1;
}

static int load_ops(dg_wan_model **out, const char *path, dg_wan_ops *ops, dg_wan_config *cfg);

int dg_wan_check(const char *path) { return load_ops(NULL, path, NULL, NULL); }
int dg_wan_check_config(const char *path, dg_wan_config *cfg) { return load_ops(NULL, path, NULL, cfg); }
int dg_wan_load_ops(dg_wan_model **out, const char *path, dg_wan_ops *ops) { return load_ops(out, path, ops, NULL); }

static int load_ops(dg_wan_model **out, const char *path, dg_wan_ops *ops, dg_wan_config *cfg)
{
	if (out)
		*out = NULL;
	bool gpu = ops && !strcmp(ops->name, "gpu");
	char *weights, *config;
	if (resolve(path, &weights, &config)) {
		if (ops)
			ops->destroy(ops);
		return -1;
	}
	double t0 = dg_now();
	ckpt c = { .label = weights };
	dg_wan_model *m = dg_calloc(1, sizeof *m);
	m->weights_path = weights;
	m->config_path = config;
	int rc = -1;
	if (dg_st_open(&c.st, weights) || index_names(&c))
		goto done;
	m->layout = c.layout;
	dg_wan_config_default(&m->cfg);
	if (infer(&c, &m->cfg))
		goto done;
	if (config) {
		if (dg_wan_config_read_json(&m->cfg, config))
			goto done;
	} else if (m->cfg.num_heads == 0) {
		dg_error("%s: cannot infer num_heads (dim %d is not a multiple of 128) and there is no "
			 "config.json next to it", weights, m->cfg.dim);
		goto done;
	}
	if (dg_wan_config_check(&m->cfg, config ? config : weights))
		goto done;
	if (gpu && dg_wan_head_dim(&m->cfg) != 64 && dg_wan_head_dim(&m->cfg) != 128) {
		dg_error("%s: head_dim %d: the GPU path takes 64 or 128 (use --device cpu)", weights,
			 dg_wan_head_dim(&m->cfg));
		goto done;
	}
	if (!ops) { /* dg_wan_check: files, tensor names and shapes, config; no weights read */
		if (cfg)
			*cfg = m->cfg;
		rc = 1;
		goto done;
	}
	m->ops = ops;
	ops = NULL;
	if (load_all(&c, m))
		goto done;
	const dg_wan_config *g = &m->cfg;
	long long P = g->patch[0] * g->patch[1] * g->patch[2], D = g->dim;
	m->params = D * g->in_dim * P + D + (g->text_dim + 1) * D + (D + 1) * D + (g->freq_dim + 1) * D +
		    (D + 1) * D + (D + 1) * 6 * D + 2 * D + (D + 1) * g->out_dim * P;
	m->params += (long long)g->num_layers *
		     (6 * D + 8 * (D * D + D) + (g->qk_norm ? 4 * D : 0) + (g->cross_attn_norm ? 2 * D : 0) +
		      2 * D * g->ffn_dim + g->ffn_dim + D);
	char nm[256];
	snprintf(nm, sizeof nm, "wan2.1-t2v dim %d, %d layers, %d heads of %d (%s layout)", g->dim,
		 g->num_layers, g->num_heads, dg_wan_head_dim(g), dg_wan_layout_name(m->layout));
	m->name = dg_strdup(nm);
	m->files = c.st.nfiles;
	m->load_bytes = c.bytes;
	m->bf16_direct = c.bf16_direct;
	m->ops->sync(m->ops); /* the uploads' conversions are done */
	m->load_s = dg_now() - t0;
	rc = 0;
done:
	free(c.names);
	dg_st_close(&c.st); /* weights are converted copies: the maps can go */
	if (rc) {
		if (ops)
			ops->destroy(ops);
		dg_wan_free(m);
		return rc > 0 ? 0 : -1;
	}
	*out = m;
	return 0;
}
