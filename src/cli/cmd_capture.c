/*
 * cmd_capture.c: dsgap capture, run the DiT (dense) and stream the self-attention Q/K/V of the
 * chosen steps, layers and heads into a docs/spec.md §6 trace while it denoises.
 *   dsgap capture --model DIR --text T.safetensors --out T.h5 --latent 4x16x16 --seed 1 \
 *                 --steps 50 --capture-steps 0,10,25,49 --layers 0-3 --heads 0,1
 * The trace also holds the run's final latents as /latents (channels, F, H, W) fp32. Under CFG
 * the conditional pass is the one recorded. The disk must hold the uncompressed trace up front.
 */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include <cjson/cJSON.h>

#include "cli/commands.h"
#include "dit/dit_attn.h"
#include "cli/dit_cli.h"
#include "dit/dit_sample.h"
#include "dit/tensorfile.h"
#include "trace/trace.h"
#include "util/files.h"
#include "util/util.h"

#define MAX_LIST 4096

static void usage(FILE *f)
{
	fprintf(f,
		"usage: dsgap capture --model DIR|FILE --text FILE --out T.h5 [options]\n\n"
		"Runs the Wan2.1 DiT (dense attention) from noise and streams the self-attention Q/K/V\n"
		"(post-norm, post-RoPE, as attention receives them; the conditional pass under CFG) of the\n"
		"chosen steps, layers and heads into a trace (docs/spec.md §6), with the final latents as /latents.\n\n"
		DG_DIT_USAGE_PROMPT
		"  -o, --out FILE     the trace to write\n"
		DG_DIT_USAGE_SAMPLING
		"  --capture-steps L  steps to record, e.g. 0,10,49 or 0-9 (default all)\n"
		"  --layers L         blocks to record (default all)\n"
		"  --heads L          heads to record (default all)\n"
		"  --sample LABEL     the sample this trace is, recorded as \"sample\" in the trace's config\n"
		"                     (default: the prompt's name, then /seedN or /noise)\n"
		DG_DIT_USAGE_DEVICE
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
/* bytes with a unit that shows them (KiB, MiB, GiB, TiB; 3 significant figures) */
static const char *bytes_str(char *buf, size_t size, double b)
{
	static const char *const unit[] = { "bytes", "KiB", "MiB", "GiB", "TiB" };
	int u = 0;
	while (u < 4 && b >= 1024) {
		b /= 1024;
		u++;
	}
	snprintf(buf, size, u ? "%.3g %s" : "%.0f %s", b, unit[u]);
	return buf;
}

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
		{
			char need[32], have[32];
			rc = dg_error("capture: the trace needs up to %s (%d steps x %d layers x %d heads x "
				      "Q/K/V x %d tokens x %d dims, bf16, before compression) but %s has %s "
				      "free: capture fewer --capture-steps, --layers or --heads",
				      bytes_str(need, sizeof need, bytes), S, L, H, n, d, dir,
				      bytes_str(have, sizeof have, avail));
		}
	}
	free(dir);
	return rc;
}

/* The sample a capture is (issue 19): LABEL as given, else PROMPT/seedN, PROMPT being the NAME of
 * --text FILE:NAME or the file's stem, and /noise when the noise came from a file. */
static char *sample_label(const dg_dit_cli *cli, const char *given)
{
	if (given)
		return dg_strdup(given);
	const char *t = cli->in.text, *colon = strrchr(t, ':'), *slash = strrchr(t, '/');
	char name[256];
	if (colon && (!slash || colon > slash)) {
		snprintf(name, sizeof name, "%s", colon + 1);
	} else {
		snprintf(name, sizeof name, "%s", slash ? slash + 1 : t);
		char *dot = strrchr(name, '.');
		if (dot && dot != name)
			*dot = 0;
	}
	char buf[320];
	if (cli->seeded)
		snprintf(buf, sizeof buf, "%s/seed%lu", name, (unsigned long)cli->in.seed);
	else
		snprintf(buf, sizeof buf, "%s/noise", name);
	return dg_strdup(buf);
}

static char *run_config(const dg_wan_model *m, const dg_dit_cli *cli, const int latent[3],
			const char *sample)
{
	char *mc = dg_wan_config_json(&m->cfg);
	cJSON *root = cJSON_CreateObject();
	cJSON *model = cJSON_Parse(mc);
	free(mc);
	cJSON_AddItemToObject(root, "model", model ? model : cJSON_CreateNull());
	cJSON_AddStringToObject(root, "sample", sample);
	cJSON_AddStringToObject(root, "layout", dg_wan_layout_name(m->layout));
	cJSON_AddStringToObject(root, "weights", m->weights_path);
	cJSON *r = cJSON_AddObjectToObject(root, "run");
	cJSON_AddItemToObject(r, "latent", cJSON_CreateIntArray(latent, 3));
	dg_dit_cli_json(cli, r);
	cJSON_AddStringToObject(r, "captured_pass", "cond");
	cJSON_AddStringToObject(r, "device", m->ops->device);
	char *s = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	char *out = dg_strdup(s);
	cJSON_free(s);
	return out;
}

int dg_cmd_capture(int argc, char **argv)
{
	enum { O_CSTEPS = DG_DIT_O_END, O_LAYERS, O_HEADS, O_SAMPLE };
	static const struct option opts[] = {
		DG_DIT_OPTIONS,
		{ "capture-steps", required_argument, 0, O_CSTEPS },
		{ "layers", required_argument, 0, O_LAYERS }, { "heads", required_argument, 0, O_HEADS },
		{ "sample", required_argument, 0, O_SAMPLE },
		{ 0, 0, 0, 0 },
	};
	dg_dit_cli cli;
	dg_dit_cli_init(&cli);
	dg_dit_sample_opts *so = &cli.so;
	const char *csteps = NULL, *layers = NULL, *heads = NULL, *sample = NULL;
	int c, bad = 0;
	opterr = 0;
	optind = 1;
	while (!bad && (c = getopt_long(argc, argv, DG_DIT_SHORT, opts, NULL)) != -1) {
		switch (c) {
		case O_CSTEPS: csteps = optarg; break;
		case O_LAYERS: layers = optarg; break;
		case O_HEADS: heads = optarg; break;
		case O_SAMPLE: sample = optarg; break;
		case 'h': usage(stdout); return 0;
		case '?': case ':': return dg_opt_bad("capture", c, argv, opts);
		default: bad = dg_dit_cli_option(&cli, "capture", c); break;
		}
	}
	if (bad || dg_dit_cli_finish(&cli, "capture", argc, argv))
		return 2;
	const char *out = cli.out;
	bool quiet = cli.quiet;
	/* no output may name or overwrite an input: checked before the (long) run */
	dg_input_add(cli.in.model);
	dg_input_add(cli.in.text);
	dg_input_add(cli.in.negative);
	dg_input_add(cli.in.noise);
	if (dg_output_check(out))
		return 1;

	dg_dit_inputs di;
	if (dg_dit_inputs_load(&cli.in, &di))
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
	if ((ns = index_list("--capture-steps", csteps, so->steps, &sl)) < 0 ||
	    (nl = index_list("--layers", layers, cf->num_layers, &ll)) < 0 ||
	    (nh = index_list("--heads", heads, cf->num_heads, &hl)) < 0)
		goto done;
	double bytes = 3.0 * ns * nl * nh * n * d * 2 + 4.0 * cf->out_dim * n * cf->patch[0] * cf->patch[1] * cf->patch[2] + (1 << 20);
	if (check_disk(out, bytes, ns, nl, nh, n, d))
		goto done;
	dg_sampler *sch = dg_sampler_new(so->sampler, so->steps, so->shift, 1);
	float *ts = dg_malloc((size_t)ns * sizeof(float)), *sg = dg_malloc((size_t)ns * sizeof(float));
	step_pos = dg_malloc((size_t)so->steps * sizeof(int));
	layer_pos = dg_malloc((size_t)cf->num_layers * sizeof(int));
	for (int i = 0; i < so->steps; i++)
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
	char *label = sample_label(&cli, sample);
	config = run_config(m, &cli, di.latent, label);
	free(label);
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
			       so->guidance != 1 ? 2 : 1);
	dg_dit_attn_set_capture(attn, capture_hook, &cc);
	so->model = m;
	memcpy(so->latent, di.latent, sizeof so->latent);
	so->noise = di.noise;
	so->cond = di.cond;
	so->uncond = di.uncond;
	so->attn = attn;
	so->label = quiet ? NULL : "capture";
	size_t nl_out = (size_t)cf->out_dim * di.latent[0] * di.latent[1] * di.latent[2];
	latents = dg_malloc(nl_out * sizeof(float));
	dg_dit_sample_stats st;
	if (dg_dit_sample(so, latents, &st))
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
