/*
 * wan_config.c: the Wan2.1 transformer configuration: defaults, config.json (the original WanModel
 * keys and the diffusers WanTransformer3DModel keys), checks, JSON for metadata. Inference from
 * tensor shapes lives with the loader (wan_load.c), which knows the key layouts.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "util/json.h"
#include "util/util.h"
#include "dit/wan.h"

void dg_wan_config_default(dg_wan_config *c)
{
	*c = (dg_wan_config){
		.dim = 1536, .ffn_dim = 8960, .freq_dim = 256, .text_dim = 4096, .in_dim = 16,
		.out_dim = 16, .num_heads = 12, .num_layers = 30, .text_len = 512, .patch = { 1, 2, 2 },
		.eps = 1e-6, .qk_norm = true, .cross_attn_norm = true, .rope_theta = 10000, .rope_max = 1024,
	};
}

int dg_wan_head_dim(const dg_wan_config *c) { return c->num_heads > 0 ? c->dim / c->num_heads : 0; }

void dg_wan_rope_dims(int d, int dims[3])
{
	dims[1] = dims[2] = 2 * (d / 6);
	dims[0] = d - dims[1] - dims[2];
}

int dg_wan_config_check(const dg_wan_config *c, const char *label)
{
	const int lim = 1 << 20;
	struct { const char *name; int v; } sizes[] = {
		{ "dim", c->dim }, { "ffn_dim", c->ffn_dim }, { "freq_dim", c->freq_dim },
		{ "text_dim", c->text_dim }, { "in_dim", c->in_dim }, { "out_dim", c->out_dim },
		{ "num_heads", c->num_heads }, { "num_layers", c->num_layers },
		{ "patch_size[0]", c->patch[0] }, { "patch_size[1]", c->patch[1] },
		{ "patch_size[2]", c->patch[2] },
	};
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
		if (sizes[i].v < 1 || sizes[i].v > lim)
			return dg_error("%s: %s = %d is out of range (1..%d)", label, sizes[i].name, sizes[i].v, lim);
	if (c->num_layers > 4096 || c->patch[0] > 64 || c->patch[1] > 64 || c->patch[2] > 64)
		return dg_error("%s: num_layers %d or patch_size (%d, %d, %d) out of range", label,
				c->num_layers, c->patch[0], c->patch[1], c->patch[2]);
	if (c->dim % c->num_heads)
		return dg_error("%s: dim %d is not a multiple of num_heads %d", label, c->dim, c->num_heads);
	int d = c->dim / c->num_heads;
	if (d % 2 || d < 6)
		return dg_error("%s: head_dim %d (dim %d / %d heads) must be even and at least 6 for the 3D "
				"RoPE", label, d, c->dim, c->num_heads);
	if (c->freq_dim % 2)
		return dg_error("%s: freq_dim %d must be even", label, c->freq_dim);
	if (!(c->eps > 0 && c->eps < 1))
		return dg_error("%s: eps %g is out of range (0, 1)", label, c->eps);
	if (c->text_len < 0 || c->text_len > lim)
		return dg_error("%s: text_len %d is out of range", label, c->text_len);
	if (!(c->rope_theta > 1) || c->rope_max < 1)
		return dg_error("%s: bad RoPE theta %g or max positions %d", label, c->rope_theta, c->rope_max);
	return 0;
}

char *dg_wan_config_json(const dg_wan_config *c)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "architecture", "wan2.1-t2v");
	cJSON_AddNumberToObject(j, "dim", c->dim);
	cJSON_AddNumberToObject(j, "ffn_dim", c->ffn_dim);
	cJSON_AddNumberToObject(j, "freq_dim", c->freq_dim);
	cJSON_AddNumberToObject(j, "text_dim", c->text_dim);
	cJSON_AddNumberToObject(j, "in_dim", c->in_dim);
	cJSON_AddNumberToObject(j, "out_dim", c->out_dim);
	cJSON_AddNumberToObject(j, "num_heads", c->num_heads);
	cJSON_AddNumberToObject(j, "head_dim", dg_wan_head_dim(c));
	cJSON_AddNumberToObject(j, "num_layers", c->num_layers);
	cJSON_AddNumberToObject(j, "text_len", c->text_len);
	cJSON_AddItemToObject(j, "patch_size", cJSON_CreateIntArray(c->patch, 3));
	cJSON_AddNumberToObject(j, "eps", c->eps);
	cJSON_AddBoolToObject(j, "qk_norm", c->qk_norm);
	cJSON_AddBoolToObject(j, "cross_attn_norm", c->cross_attn_norm);
	int dims[3];
	dg_wan_rope_dims(dg_wan_head_dim(c), dims);
	cJSON_AddItemToObject(j, "rope_dims", cJSON_CreateIntArray(dims, 3));
	cJSON_AddNumberToObject(j, "rope_theta", c->rope_theta);
	char *s = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	char *r = dg_strdup(s);
	cJSON_free(s);
	return r;
}

/* ---------------------------------------------------------------------------------------------- */
/* config.json                                                                                     */

static int get_int(const cJSON *root, const char *key, int *out, const char *path, int *found)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);
	if (!j || cJSON_IsNull(j))
		return 0;
	double v = j->valuedouble;
	if (!cJSON_IsNumber(j) || v != floor(v) || fabs(v) > 1e9)
		return dg_error("%s: \"%s\" must be an integer", path, key);
	*out = (int)v;
	if (found)
		(*found)++;
	return 0;
}

static int get_bool(const cJSON *root, const char *key, bool *out, const char *path)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);
	if (!j || cJSON_IsNull(j))
		return 0;
	if (!cJSON_IsBool(j))
		return dg_error("%s: \"%s\" must be true or false", path, key);
	*out = cJSON_IsTrue(j);
	return 0;
}

static int get_patch(const cJSON *root, int *patch, const char *path)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, "patch_size");
	if (!j || cJSON_IsNull(j))
		return 0;
	if (!cJSON_IsArray(j) || cJSON_GetArraySize(j) != 3)
		return dg_error("%s: \"patch_size\" must be [t, h, w]", path);
	int i = 0;
	for (const cJSON *x = j->child; x; x = x->next, i++) {
		if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || x->valuedouble < 1 ||
		    x->valuedouble > 64)
			return dg_error("%s: \"patch_size\" entries must be integers 1..64", path);
		patch[i] = (int)x->valuedouble;
	}
	return 0;
}

/* keys that must be absent or null: image-to-video and other variants dsgap does not run */
static int must_be_null(const cJSON *root, const char *key, const char *path)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);
	if (j && !cJSON_IsNull(j))
		return dg_error("%s: \"%s\" is set: this variant (image conditioning / added KV) is not "
				"supported, only text-to-video", path, key);
	return 0;
}

int dg_wan_config_read_json(dg_wan_config *c, const char *path)
{
	size_t n;
	char *buf = dg_read_all(path, 1 << 20, &n);
	if (!buf)
		return dg_error("cannot read %s: %s", path, errno == EFBIG ? "larger than 1 MiB" : dg_strerror(errno));
	const char *why;
	int line;
	cJSON *root = dg_json_parse(buf, n, &why, &line);
	free(buf);
	if (!root)
		return line ? dg_error("%s:%d: %s", path, line, why) : dg_error("%s: %s", path, why);
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return dg_error("%s: not a JSON object", path);
	}
	int rc = -1;
	const cJSON *cls = cJSON_GetObjectItemCaseSensitive(root, "_class_name");
	const char *klass = cJSON_IsString(cls) ? cls->valuestring : "";
	bool diffusers = !strcmp(klass, "WanTransformer3DModel") ||
			 cJSON_GetObjectItemCaseSensitive(root, "num_attention_heads");
	const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
	if (cJSON_IsString(mt) && strcmp(mt->valuestring, "t2v")) {
		dg_error("%s: model_type \"%s\" is not supported (only t2v)", path, mt->valuestring);
		goto done;
	}
	if (diffusers) {
		int heads = c->num_heads, hd = dg_wan_head_dim(c), found = 0;
		if (get_int(root, "num_attention_heads", &heads, path, &found) ||
		    get_int(root, "attention_head_dim", &hd, path, &found) ||
		    get_int(root, "in_channels", &c->in_dim, path, NULL) ||
		    get_int(root, "out_channels", &c->out_dim, path, NULL) ||
		    get_int(root, "text_dim", &c->text_dim, path, NULL) ||
		    get_int(root, "freq_dim", &c->freq_dim, path, NULL) ||
		    get_int(root, "ffn_dim", &c->ffn_dim, path, NULL) ||
		    get_int(root, "num_layers", &c->num_layers, path, NULL) ||
		    get_int(root, "rope_max_seq_len", &c->rope_max, path, NULL) ||
		    get_bool(root, "cross_attn_norm", &c->cross_attn_norm, path) ||
		    get_patch(root, c->patch, path) || must_be_null(root, "image_dim", path) ||
		    must_be_null(root, "added_kv_proj_dim", path) || must_be_null(root, "pos_embed_seq_len", path))
			goto done;
		if (found) {
			c->num_heads = heads;
			c->dim = heads * hd;
		}
		const cJSON *qk = cJSON_GetObjectItemCaseSensitive(root, "qk_norm");
		if (qk && !cJSON_IsNull(qk)) {
			if (!cJSON_IsString(qk) || strcmp(qk->valuestring, "rms_norm_across_heads")) {
				dg_error("%s: qk_norm \"%s\" is not supported (only \"rms_norm_across_heads\", "
					 "Wan's RMSNorm over the full width)", path,
					 cJSON_IsString(qk) ? qk->valuestring : "?");
				goto done;
			}
			c->qk_norm = true;
		} else if (qk) {
			c->qk_norm = false;
		}
	} else {
		if (get_int(root, "dim", &c->dim, path, NULL) ||
		    get_int(root, "ffn_dim", &c->ffn_dim, path, NULL) ||
		    get_int(root, "freq_dim", &c->freq_dim, path, NULL) ||
		    get_int(root, "text_dim", &c->text_dim, path, NULL) ||
		    get_int(root, "in_dim", &c->in_dim, path, NULL) ||
		    get_int(root, "out_dim", &c->out_dim, path, NULL) ||
		    get_int(root, "num_heads", &c->num_heads, path, NULL) ||
		    get_int(root, "num_layers", &c->num_layers, path, NULL) ||
		    get_int(root, "text_len", &c->text_len, path, NULL) ||
		    get_bool(root, "qk_norm", &c->qk_norm, path) ||
		    get_bool(root, "cross_attn_norm", &c->cross_attn_norm, path) || get_patch(root, c->patch, path))
			goto done;
		const cJSON *ws = cJSON_GetObjectItemCaseSensitive(root, "window_size");
		if (ws && !cJSON_IsNull(ws)) {
			if (!cJSON_IsArray(ws) || cJSON_GetArraySize(ws) != 2 || !cJSON_IsNumber(ws->child) ||
			    !cJSON_IsNumber(ws->child->next) || ws->child->valuedouble != -1 ||
			    ws->child->next->valuedouble != -1) {
				dg_error("%s: window_size other than [-1, -1] (global attention) is not supported",
					 path);
				goto done;
			}
		}
	}
	const cJSON *eps = cJSON_GetObjectItemCaseSensitive(root, "eps");
	if (eps && !cJSON_IsNull(eps)) {
		if (!cJSON_IsNumber(eps)) {
			dg_error("%s: \"eps\" must be a number", path);
			goto done;
		}
		c->eps = eps->valuedouble;
	}
	rc = dg_wan_config_check(c, path);
done:
	cJSON_Delete(root);
	return rc;
}
