/*
 * cmd_capture.c: dsgap capture, run the DiT (dense) and stream the self-attention Q/K/V of the
 * chosen steps, layers and heads into a DESIGN §6 trace while it denoises.
 *   dsgap capture --model DIR --text T.safetensors --out T.h5 --latent 4x16x16 --seed 1 \
 *                 --steps 50 --capture-steps 0,10,25,49 --layers 0-3 --heads 0,1
 * The trace also holds the run's final latents as /latents (channels, F, H, W) fp32. Under CFG
 * the conditional pass is the one recorded. The disk must hold the uncompressed trace up front.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include <cjson/cJSON.h>

#include "commands.h"
#include "dit_attn.h"
#include "dit_sample.h"
#include "tensorfile.h"
#include "trace.h"
#include "util.h"

#define MAX_LIST 4096

static void usage(FILE *f)
{
	fprintf(f,
		"usage: dsgap capture --model DIR|FILE --text FILE --out T.h5 [options]\n\n"
		"Runs the Wan2.1 DiT (dense attention) from noise and streams the self-attention Q/K/V\n"
		"(post-norm, post-RoPE, as attention receives them; the conditional pass under CFG) of the\n"
		"chosen steps, layers and heads into a trace (DESIGN 6), with the final latents as /latents.\n\n"
		"  --model P          checkpoint directory (config.json + safetensors or index), file or index\n"
		"  --text FILE        text embeddings [tokens, text_dim]: safetensors or HDF5, one tensor\n"
		"  --negative FILE    embeddings of the negative prompt for CFG (default: zeros)\n"
		"  -o, --out FILE     the trace to write\n"
		"  --latent FxHxW     latent size before patchify (default: from --noise)\n"
		"  --noise FILE       initial noise [channels, F, H, W] (safetensors or HDF5)\n"
		"  --seed N           Gaussian noise from GSL's mt19937 (default 0) when no --noise\n"
		"  --steps S          denoising steps (default 50)\n"
		"  --shift X          schedule shift (default 5)\n"
		"  --guidance G       classifier-free guidance scale; 1 = no CFG (default 5)\n"
		"  --sampler S        unipc (default) or euler\n"
		"  --capture-steps L  steps to record, e.g. 0,10,49 or 0-9 (default all)\n"
		"  --layers L         blocks to record (default all)\n"
		"  --heads L          heads to record (default all)\n"
		"  --device D         cpu (default; the GPU path comes later)\n"
		"  --quiet            no progress line\n");
}

/* sorted, deduplicated list within [0, n); NULL s: all */
static int index_list(const char *opt, const char *s, int n, int **out)
{
	int *v = dg_malloc((size_t)(s ? MAX_LIST : (n ? n : 1)) * sizeof(int)), k = 0;
	if (!s) {
		for (int i = 0; i < n; i++)
			v[i] = i;
		*out = v;
		return n;
	}
	int c = dg_parse_ints(s, v, MAX_LIST);
	if (c <= 0) {
		free(v);
		return dg_error("capture: bad %s '%s' (e.g. 0,5,9 or 0-3)", opt, s);
	}
	for (int i = 1; i < c; i++) /* insertion sort: lists are short */
		for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
			int t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	for (int i = 0; i < c; i++) {
		if (v[i] < 0 || v[i] >= n) {
			dg_error("capture: %s entry %d is outside 0..%d", opt, v[i], n - 1);
			free(v);
			return -1;
		}
		if (!k || v[k - 1] != v[i])
			v[k++] = v[i];
	}
	*out = v;
	return k;
}

typedef struct {
	dg_trace_writer *w;
	int *step_pos, *layer_pos; /* denoising step / block -> position in the trace, or -1 */
	int *heads, nheads;
} capture_ctx;

static int capture_hook(void *user, const dg_attn_site *s, int H, int n, int d, const float *q,
			const float *k, const float *v)
{
	capture_ctx *c = user;
	if (s->pass != 0)
		return 0;
	int sp = c->step_pos[s->step], lp = c->layer_pos[s->layer];
	if (sp < 0 || lp < 0)
		return 0;
	size_t hs = (size_t)n * d;
	for (int i = 0; i < c->nheads; i++) {
		int h = c->heads[i];
		if (dg_trace_writer_put(c->w, DG_QKV_Q, sp, lp, i, q + h * hs) ||
		    dg_trace_writer_put(c->w, DG_QKV_K, sp, lp, i, k + h * hs) ||
		    dg_trace_writer_put(c->w, DG_QKV_V, sp, lp, i, v + h * hs))
			return -1;
	}
	return 0;
}

/* refuse up front a trace that would not fit (uncompressed bf16 bound) */
static int check_disk(const char *out, double bytes, int S, int L, int H, int n, int d)
{
	char *dir = dg_strdup(out), *slash = strrchr(dir, '/');
	if (slash)
		slash[slash == dir ? 1 : 0] = 0;
	else
		strcpy(dir, ".");
	struct statvfs v;
	int rc = 0;
	if (statvfs(dir, &v) == 0) {
		double avail = (double)v.f_bavail * v.f_frsize;
		if (bytes > avail)
			rc = dg_error("capture: the trace needs up to %.2f GiB (%d steps x %d layers x %d heads x "
				      "Q/K/V x %d tokens x %d dims, bf16, before compression) but %s has %.2f "
				      "GiB free: capture fewer --capture-steps, --layers or --heads",
				      bytes / 1073741824.0, S, L, H, n, d, dir, avail / 1073741824.0);
	}
	free(dir);
	return rc;
}

static char *run_config(const dg_wan_model *m, const dg_dit_input_opts *in, const dg_dit_sample_opts *so,
			const int latent[3], bool seeded)
{
	char *mc = dg_wan_config_json(&m->cfg);
	cJSON *root = cJSON_CreateObject();
	cJSON *model = cJSON_Parse(mc);
	free(mc);
	cJSON_AddItemToObject(root, "model", model ? model : cJSON_CreateNull());
	cJSON_AddStringToObject(root, "layout", dg_wan_layout_name(m->layout));
	cJSON_AddStringToObject(root, "weights", m->weights_path);
	cJSON *r = cJSON_AddObjectToObject(root, "run");
	cJSON_AddItemToObject(r, "latent", cJSON_CreateIntArray(latent, 3));
	cJSON_AddNumberToObject(r, "steps", so->steps);
	cJSON_AddNumberToObject(r, "shift", so->shift);
	cJSON_AddNumberToObject(r, "guidance", so->guidance);
	cJSON_AddStringToObject(r, "sampler", dg_sampler_name(so->sampler));
	cJSON_AddStringToObject(r, "text", in->text);
	if (in->negative)
		cJSON_AddStringToObject(r, "negative", in->negative);
	if (seeded)
		cJSON_AddNumberToObject(r, "seed", (double)in->seed);
	else
		cJSON_AddStringToObject(r, "noise", in->noise);
	cJSON_AddStringToObject(r, "captured_pass", "cond");
	cJSON_AddStringToObject(r, "device", m->ops->device);
	char *s = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	char *out = dg_strdup(s);
	cJSON_free(s);
	return out;
}

static int parse_num(const char *opt, const char *s, double lo, double hi, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || *end || errno || !(v >= lo && v <= hi))
		return dg_error("bad %s '%s' (expected a number in [%g, %g])", opt, s, lo, hi);
	*out = v;
	return 0;
}

int dg_cmd_capture(int argc, char **argv)
{
	enum { O_MODEL = 256, O_TEXT, O_NEG, O_LATENT, O_NOISE, O_SEED, O_STEPS, O_SHIFT, O_GUIDE,
	       O_SAMPLER, O_CSTEPS, O_LAYERS, O_HEADS, O_DEVICE, O_QUIET };
	static const struct option opts[] = {
		{ "model", required_argument, 0, O_MODEL }, { "text", required_argument, 0, O_TEXT },
		{ "negative", required_argument, 0, O_NEG }, { "out", required_argument, 0, 'o' },
		{ "latent", required_argument, 0, O_LATENT }, { "noise", required_argument, 0, O_NOISE },
		{ "seed", required_argument, 0, O_SEED }, { "steps", required_argument, 0, O_STEPS },
		{ "shift", required_argument, 0, O_SHIFT }, { "guidance", required_argument, 0, O_GUIDE },
		{ "sampler", required_argument, 0, O_SAMPLER },
		{ "capture-steps", required_argument, 0, O_CSTEPS },
		{ "layers", required_argument, 0, O_LAYERS }, { "heads", required_argument, 0, O_HEADS },
		{ "device", required_argument, 0, O_DEVICE }, { "quiet", no_argument, 0, O_QUIET },
		{ "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
	};
	dg_dit_input_opts in = { .device = "cpu", .guidance = 5 };
	dg_dit_sample_opts so = { .steps = 50, .shift = 5, .guidance = 5, .sampler = DG_SAMPLER_UNIPC };
	const char *out = NULL, *csteps = NULL, *layers = NULL, *heads = NULL;
	bool quiet = false, seeded = true;
	double x = 0;
	int c, bad = 0;
	opterr = 0;
	optind = 1;
	while (!bad && (c = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
		switch (c) {
		case O_MODEL: in.model = optarg; break;
		case O_TEXT: in.text = optarg; break;
		case O_NEG: in.negative = optarg; break;
		case 'o': out = optarg; break;
		case O_LATENT: bad = dg_parse_latent("--latent", optarg, in.latent); break;
		case O_NOISE: in.noise = optarg; seeded = false; break;
		case O_SEED:
			bad = parse_num("--seed", optarg, 0, 4294967295.0, &x);
			in.seed = (unsigned long)x;
			break;
		case O_STEPS:
			bad = parse_num("--steps", optarg, 1, 10000, &x) || (x != (int)x && dg_error("--steps must be an integer"));
			so.steps = (int)x;
			break;
		case O_SHIFT: bad = parse_num("--shift", optarg, 1e-3, 1e3, &so.shift); break;
		case O_GUIDE: bad = parse_num("--guidance", optarg, 0, 1e3, &so.guidance); break;
		case O_SAMPLER:
			if (dg_sampler_parse(optarg, &so.sampler))
				bad = dg_error("capture: unknown --sampler '%s' (unipc or euler)", optarg);
			break;
		case O_CSTEPS: csteps = optarg; break;
		case O_LAYERS: layers = optarg; break;
		case O_HEADS: heads = optarg; break;
		case O_DEVICE: in.device = optarg; break;
		case O_QUIET: quiet = true; break;
		case 'h': usage(stdout); return 0;
		case ':': bad = dg_error("capture: option '%s' needs a value", argv[optind - 1]); break;
		default: bad = dg_error("capture: unknown option '%s' (dsgap capture --help)", argv[optind - 1]); break;
		}
	}
	if (bad)
		return 2;
	if (optind < argc)
		return dg_error("capture: unexpected argument '%s' (dsgap capture --help)", argv[optind]), 2;
	if (!out || !in.model || !in.text)
		return dg_error("capture: --model, --text and --out are required (dsgap capture --help)"), 2;
	if (strcmp(in.device, "cpu") && strcmp(in.device, "gpu"))
		return dg_error("capture: unknown --device '%s' (cpu or gpu)", in.device), 2;
	in.guidance = so.guidance;

	dg_dit_inputs di;
	if (dg_dit_inputs_load(&in, &di))
		return 1;
	dg_wan_model *m = di.model;
	const dg_wan_config *cf = &m->cfg;
	int n = di.grid[0] * di.grid[1] * di.grid[2], d = dg_wan_head_dim(cf), rc = 1;
	int *sl = NULL, *ll = NULL, *hl = NULL, ns, nl, nh;
	int *step_pos = NULL, *layer_pos = NULL;
	dg_dit_attn *attn = NULL;
	float *latents = NULL;
	char *config = NULL;
	dg_trace_writer w;
	bool writer_open = false;
	if ((ns = index_list("--capture-steps", csteps, so.steps, &sl)) < 0 ||
	    (nl = index_list("--layers", layers, cf->num_layers, &ll)) < 0 ||
	    (nh = index_list("--heads", heads, cf->num_heads, &hl)) < 0)
		goto done;
	double bytes = 3.0 * ns * nl * nh * n * d * 2 + 4.0 * cf->out_dim * n * cf->patch[0] * cf->patch[1] * cf->patch[2] + (1 << 20);
	if (check_disk(out, bytes, ns, nl, nh, n, d))
		goto done;
	dg_sampler *sch = dg_sampler_new(so.sampler, so.steps, so.shift, 1);
	float *ts = dg_malloc((size_t)ns * sizeof(float)), *sg = dg_malloc((size_t)ns * sizeof(float));
	step_pos = dg_malloc((size_t)so.steps * sizeof(int));
	layer_pos = dg_malloc((size_t)cf->num_layers * sizeof(int));
	for (int i = 0; i < so.steps; i++)
		step_pos[i] = -1;
	for (int i = 0; i < cf->num_layers; i++)
		layer_pos[i] = -1;
	for (int i = 0; i < ns; i++) {
		step_pos[sl[i]] = i;
		ts[i] = (float)dg_sampler_timestep(sch, sl[i]);
		sg[i] = (float)dg_sampler_sigma(sch, sl[i]);
	}
	for (int i = 0; i < nl; i++)
		layer_pos[ll[i]] = i;
	dg_sampler_free(sch);
	config = run_config(m, &in, &so, di.latent, seeded);
	char created[64];
	snprintf(created, sizeof created, "dsgap %s capture", DG_VERSION);
	dg_trace_meta meta = { .steps = ns, .layers = nl, .heads = nh, .tokens = n, .head_dim = d,
			       .grid = { di.grid[0], di.grid[1], di.grid[2] }, .text_tokens = 0,
			       .step_index = sl, .layer_index = ll, .head_index = hl, .timestep = ts,
			       .sigma = sg, .model = m->name, .source = m->weights_path,
			       .created_by = created, .config = config };
	int wrc = dg_trace_writer_open(&w, out, &meta);
	free(ts);
	free(sg);
	if (wrc)
		goto done;
	writer_open = true;
	capture_ctx cc = { &w, step_pos, layer_pos, hl, nh };
	attn = dg_dit_attn_new(m->ops, NULL, 1, NULL, di.grid, cf->num_layers, cf->num_heads, d,
			       so.guidance != 1 ? 2 : 1);
	dg_dit_attn_set_capture(attn, capture_hook, &cc);
	so.model = m;
	memcpy(so.latent, di.latent, sizeof so.latent);
	so.noise = di.noise;
	so.cond = di.cond;
	so.uncond = di.uncond;
	so.attn = attn;
	so.label = quiet ? NULL : "capture";
	size_t nl_out = (size_t)cf->out_dim * di.latent[0] * di.latent[1] * di.latent[2];
	latents = dg_malloc(nl_out * sizeof(float));
	dg_dit_sample_stats st;
	if (dg_dit_sample(&so, latents, &st))
		goto done;
	int shape[4] = { cf->out_dim, di.latent[0], di.latent[1], di.latent[2] };
	const char *attrs[] = { "description", "final latents of the captured run (channels, F, H, W)", NULL };
	if (dg_latents_put(w.file, out, latents, shape, attrs))
		goto done;
	writer_open = false;
	if (dg_trace_writer_finish(&w))
		goto done;
	if (!quiet)
		fprintf(stderr, "capture: wrote %s: %d steps x %d layers x %d heads x %d tokens (%dx%dx%d) x %d "
			"dims + /latents; %d forwards, transformer %.1fs, total %.1fs\n", out, ns, nl, nh, n,
			di.grid[0], di.grid[1], di.grid[2], d, st.forwards, st.transformer_s, st.total_s);
	rc = 0;
done:
	if (writer_open)
		dg_trace_writer_abort(&w);
	dg_dit_attn_free(attn);
	free(latents), free(config), free(sl), free(ll), free(hl), free(step_pos), free(layer_pos);
	dg_dit_inputs_free(&di);
	return rc;
}
