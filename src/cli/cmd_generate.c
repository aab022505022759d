/*
 * cmd_generate.c: dsgap generate, closed-loop generation: the dense reference and each policy (at
 * each density) from the same noise and prompt, every self-attention call under the policy
 * (dit_attn.h). Writes DIR/<run>.h5 (final latents, /latents) per run, DIR/generate.csv (one row
 * per run: fidelity against dense, effective density, transformer time and speedup) and
 * DIR/generate.json (the resolved configuration).
 *   dsgap generate --model DIR --text T.safetensors --latent 4x16x16 --seed 1 \
 *                  --policies dense,mc-sparse --density 0.15 --schedule warmup=10,dense_layers=0 --out G
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli/commands.h"
#include "cli/dit_cli.h"
#include "loop/generate.h"
#include "dit/memplan.h"
#include "policy/presets.h"
#include "dit/tensorfile.h"
#include "util/files.h"
#include "util/json.h"
#include "util/util.h"

#define MAX_POLICIES 64
#define MAX_DENSITIES 16

#define GENERATE_HEADER \
	"policy,density_target,density,psnr,ssim,psnr_min,ssim_min,transformer_s,total_s,speedup"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: dsgap generate --model DIR|FILE --text FILE --out DIR [options]\n\n"
		"Closed loop: runs the dense reference and every policy (at every density) from the same\n"
		"noise, with the policy inside every self-attention call, and writes DIR/<run>.h5 (final\n"
		"latents), DIR/generate.csv and DIR/generate.json.\n\n"
		DG_DIT_USAGE_PROMPT
		"  -o, --out DIR      output directory\n"
		"  --policies LIST    policy specs as for replay (default dense,mc-sparse; dense always runs)\n"
		"  --density LIST     top-k densities in (0,1] (default 0.15)\n"
		"  --schedule S       warmup=W,anchors=a;b,dense_layers=l;m (denoising steps and blocks;\n"
		"                     default no warm-up, anchor at step W-1, else 0; anchors=every:N adds\n"
		"                     one every N steps after it; dense_layers=none)\n"
		DG_DIT_USAGE_SAMPLING
		DG_DIT_USAGE_DEVICE
		"  --cache-offload    keep the policy's residuals and key lists in pinned host memory, each\n"
		"                     layer's fetched on a copy stream while the layer before runs (GPU;\n"
		"                     the CPU's are host memory already); outputs unchanged\n"
		"  --quiet            no progress lines (nor the memory plan)\n"
		"  --plan-only        print the memory plan of every run and exit (loads no weights; --model\n"
		"                     DIR with config.json, or --arch; needs --latent; --text, --out optional)\n"
		"  --arch A           wan2.1-1.3b or wan2.1-14b: the plan for that architecture (--plan-only)\n"
		"  --plan-device D    gpu (default) or cpu storage in the plan (--plan-only)\n"
		"The memory plan (weights, activations, caches per pass/layer/head) is printed before every run;\n"
		"a run that does not fit the device (its memory, or DSGAP_MEM_LIMIT_GIB) is refused up front\n"
		"with the size needed and the storage switches that would make it fit.\n\n"
		"generate.csv: " GENERATE_HEADER "\n"
		"psnr/ssim: per latent frame against the dense run, averaged over frames (min: worst frame);\n"
		"density: computed (query, key) pairs / N^2 over every self-attention call of the run.\n");
}

/* file name of a run: the spec with '/' and ':' made safe, @density for sparse runs */
static char *run_file(const char *dir, const dg_policy *p, double rho)
{
	char name[160];
	if (p->dense)
		snprintf(name, sizeof name, "%.100s.h5", p->name);
	else
		snprintf(name, sizeof name, "%.100s@%g.h5", p->name, rho);
	for (char *c = name; *c; c++)
		if (*c == '/' || *c == ':' || *c == ' ')
			*c = '_';
	return dg_path_join(dir, name);
}

typedef struct {
	const dg_policy *p;
	double rho;
	dg_generate_stats st;
	dg_fidelity_summary fs;
} run_result;

/* What dsgap generate was asked for: the shared DiT options, the runs' policies (pol[0]: the dense
 * reference, then --policies), densities and schedule. */
typedef struct {
	dg_dit_cli cli;
	dg_policy pol[MAX_POLICIES + 1];
	int np; /* policies after pol[0] */
	double dens[MAX_DENSITIES];
	int nd;
	dg_schedule sched;
	const char *schedule; /* --schedule as given */
	bool plan_only, offload;
	const char *arch, *plan_device;
} generate_args;

/* The options into a (and the output folder made): -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, generate_args *a)
{
	enum { O_POL = DG_DIT_O_END, O_DENS, O_SCHED, O_PLAN, O_ARCH, O_PDEV, O_OFFLOAD };
	static const struct option opts[] = {
		DG_DIT_OPTIONS,
		{ "policies", required_argument, 0, O_POL }, { "density", required_argument, 0, O_DENS },
		{ "schedule", required_argument, 0, O_SCHED }, { "plan-only", no_argument, 0, O_PLAN },
		{ "arch", required_argument, 0, O_ARCH }, { "plan-device", required_argument, 0, O_PDEV },
		{ "cache-offload", no_argument, 0, O_OFFLOAD }, { 0, 0, 0, 0 },
	};
	a->plan_only = a->offload = false;
	a->arch = NULL;
	a->plan_device = "gpu";
	dg_dit_cli_init(&a->cli);
	const char *policies = "dense,mc-sparse", *density = "0.15", *schedule = "";
	int c, bad = 0;
	opterr = 0;
	optind = 1;
	while (!bad && (c = getopt_long(argc, argv, DG_DIT_SHORT, opts, NULL)) != -1) {
		switch (c) {
		case O_POL: policies = optarg; break;
		case O_DENS: density = optarg; break;
		case O_SCHED: schedule = optarg; break;
		case O_PLAN: a->plan_only = true; break;
		case O_ARCH: a->arch = optarg; break;
		case O_PDEV: a->plan_device = optarg; break;
		case O_OFFLOAD: a->offload = true; break;
		case 'h': usage(stdout); return 0;
		case '?': case ':': return dg_opt_bad("generate", c, argv, opts);
		default: bad = dg_dit_cli_option(&a->cli, "generate", c); break;
		}
	}
	if (bad)
		return 2;
	if (a->plan_only) { /* no prompt, no output folder: fill what finish would refuse */
		if (!a->cli.in.text)
			a->cli.in.text = "-";
		if (!a->cli.out)
			a->cli.out = "-";
		if (!a->cli.in.model && a->arch)
			a->cli.in.model = a->arch;
	}
	if (dg_dit_cli_finish(&a->cli, "generate", argc, argv))
		return 2;
	a->np = dg_policies_expand(policies, a->pol + 1, MAX_POLICIES);
	a->nd = dg_parse_doubles(density, a->dens, MAX_DENSITIES);
	if (a->np < 0)
		return 2;
	if (a->nd <= 0)
		return dg_error("generate: bad --density '%s' (comma-separated numbers in (0,1])", density), 2;
	for (int i = 0; i < a->nd; i++)
		if (!(a->dens[i] > 0 && a->dens[i] <= 1))
			return dg_error("generate: density %g is outside (0, 1]", a->dens[i]), 2;
	char why[256];
	if (dg_schedule_parse(schedule, &a->sched))
		return 2;
	if (dg_schedule_check_loop(&a->sched, a->cli.so.steps, 0, why, sizeof why))
		return dg_error("generate: --schedule '%s': %s", schedule, why), 2;
	a->schedule = schedule;
	if (dg_policy_parse("dense", &a->pol[0]))
		return 1;
	return -1;
}

/* --plan-only: the plan of every run from the config alone (no weights loaded) */
static int plan_only(const generate_args *a)
{
	dg_wan_config cf;
	const int *lat = a->cli.in.latent;
	if (a->arch) {
		if (dg_memplan_arch(a->arch, &cf))
			return dg_error("generate: unknown --arch '%s' (wan2.1-1.3b, wan2.1-14b)", a->arch), 2;
	} else {
		dg_wan_config_default(&cf);
		const char *m = a->cli.in.model;
		size_t len = strlen(m);
		char *path = len > 5 && !strcmp(m + len - 5, ".json") ? dg_strdup(m) : dg_path_join(m, "config.json");
		int rc = dg_wan_config_read_json(&cf, path);
		free(path);
		if (rc || dg_wan_config_check(&cf, m))
			return 1;
	}
	char why[256];
	if (dg_schedule_check_loop(&a->sched, 0, cf.num_layers, why, sizeof why))
		return dg_error("generate: --schedule '%s': %s", a->schedule, why), 2;
	if (lat[0] <= 0)
		return dg_error("generate --plan-only: give --latent FxHxW"), 2;
	if (strcmp(a->plan_device, "gpu") && strcmp(a->plan_device, "cpu"))
		return dg_error("generate: --plan-device is gpu or cpu, not '%s'", a->plan_device), 2;
	int grid[3] = { lat[0] / cf.patch[0], lat[1] / cf.patch[1], lat[2] / cf.patch[2] };
	bool gpu = !strcmp(a->plan_device, "gpu");
	const char *lim = getenv("DSGAP_MEM_LIMIT_GIB");
	double limit = dg_memplan_limit(gpu);
	int fits = 0;
	for (int pi = 0; pi <= a->np; pi++) {
		const dg_policy *p = &a->pol[pi];
		if (pi > 0 && p->dense)
			continue;
		for (int k = 0; k < (p->dense ? 1 : a->nd); k++) {
			dg_memplan m;
			dg_memplan_make(&m, &cf, grid, p, p->dense ? 1 : a->dens[k], &a->sched,
					a->cli.so.guidance != 1 ? 2 : 1, gpu, a->offload);
			dg_memplan_print(&m, stdout);
			fits |= dg_memplan_check(&m, &cf, grid, &a->sched, limit, dg_memplan_host_limit());
		}
	}
	char b[32];
	if (limit > 0)
		printf("limit: %s (%s)\n", dg_bytes_str(limit, b, sizeof b), lim && *lim ? "DSGAP_MEM_LIMIT_GIB" : "the device");
	return fits ? 1 : 0;
}

/* Every run: the dense reference into ref, then each policy at each density (into lat) with its
 * fidelity against ref, each run's latents into its file; res[0..*nres) the finished runs. */
static int run_all(generate_args *a, const dg_dit_inputs *di, float *ref, float *lat, run_result *res,
		   int *nres)
{
	dg_dit_sample_opts *so = &a->cli.so;
	const dg_wan_config *cf = &di->model->cfg;
	int C = cf->out_dim, F = di->latent[0], H = di->latent[1], W = di->latent[2];
	int shape[4] = { C, F, H, W };
	for (int pi = 0; pi <= a->np; pi++) {
		const dg_policy *p = &a->pol[pi];
		if (pi > 0 && p->dense)
			continue; /* the reference already ran */
		for (int di_ = 0; di_ < (p->dense ? 1 : a->nd); di_++) {
			double rho = p->dense ? 1 : a->dens[di_];
			run_result *r = &res[*nres];
			r->p = p;
			r->rho = rho;
			if (dg_generate_run(so, di->grid, p, rho, &a->sched, a->offload, a->cli.quiet, pi == 0 ? ref : lat,
					    &r->st))
				return -1;
			const float *xr = pi == 0 ? ref : lat;
			dg_fidelity_summarise(ref, xr, C, F, H, W, &r->fs);
			char *path = run_file(a->cli.out, p, rho);
			char dstr[32];
			snprintf(dstr, sizeof dstr, "%g", rho);
			const char *attrs[] = { "policy", p->name, "density_target", dstr, NULL };
			int wr = dg_latents_write(path, xr, shape, attrs);
			free(path);
			if (wr)
				return -1;
			(*nres)++;
		}
	}
	return 0;
}

/* out/generate.csv: one row per run */
static int write_csv(const char *out, const run_result *res, int nres)
{
	char *csv = dg_path_join(out, "generate.csv");
	dg_out o;
	int orc = dg_out_open(&o, csv);
	if (!orc) {
		fprintf(o.f, GENERATE_HEADER "\n");
		for (int i = 0; i < nres; i++) {
			const run_result *r = &res[i];
			fprintf(o.f, "%s,%g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.4g\n", r->p->name, r->rho,
				r->st.density, r->fs.psnr, r->fs.ssim, r->fs.psnr_min, r->fs.ssim_min,
				r->st.ss.transformer_s, r->st.ss.total_s,
				res[0].st.ss.transformer_s / r->st.ss.transformer_s);
		}
		orc = dg_out_commit(&o);
	}
	free(csv);
	return orc;
}

/* the settings of generate.json: provenance, model, shapes, sampling, schedule */
static cJSON *settings_json(const generate_args *a, const dg_dit_inputs *di)
{
	const dg_wan_model *m = di->model;
	const dg_schedule *sched = &a->sched;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "format", "dsgap-generate");
	cJSON_AddStringToObject(j, "dsgap_version", DG_VERSION);
	cJSON_AddStringToObject(j, "git_commit", dg_git_commit());
	char date[32];
	dg_utc_now(date, sizeof date);
	cJSON_AddStringToObject(j, "date", date);
	cJSON_AddStringToObject(j, "device", m->ops->device);
	cJSON_AddStringToObject(j, "model", m->name);
	cJSON_AddStringToObject(j, "weights", m->weights_path);
	cJSON_AddNumberToObject(j, "weight_files", m->files);
	cJSON_AddNumberToObject(j, "load_s", m->load_s);
	cJSON_AddNumberToObject(j, "load_bytes", m->load_bytes);
	cJSON_AddNumberToObject(j, "bf16_direct", m->bf16_direct);
	char *mc = dg_wan_config_json(&m->cfg);
	cJSON *mj = cJSON_Parse(mc);
	free(mc);
	cJSON_AddItemToObject(j, "config", mj ? mj : cJSON_CreateNull());
	cJSON_AddItemToObject(j, "latent", cJSON_CreateIntArray(di->latent, 3));
	cJSON_AddItemToObject(j, "grid", cJSON_CreateIntArray(di->grid, 3));
	dg_dit_cli_json(&a->cli, j);
	cJSON_AddBoolToObject(j, "cache_offload", a->offload);
	cJSON *sj = cJSON_AddObjectToObject(j, "schedule");
	cJSON_AddNumberToObject(sj, "warmup", sched->warmup);
	if (sched->anchor_every) /* anchors=every:N: the anchor below, then every N steps */
		cJSON_AddNumberToObject(sj, "anchor_every", sched->anchor_every);
	if (sched->anchors_given)
		cJSON_AddItemToObject(sj, "anchors", cJSON_CreateIntArray(sched->anchors, sched->nanchors));
	else
		cJSON_AddNumberToObject(sj, "anchor", sched->warmup > 0 ? sched->warmup - 1 : 0);
	cJSON_AddItemToObject(sj, "dense_layers", cJSON_CreateIntArray(sched->dense_layers, sched->ndense_layers));
	return j;
}

/* one run of generate.json: its policy, density and where the time went */
static cJSON *run_json(const run_result *res, int steps)
{
	cJSON *r = cJSON_CreateObject();
	cJSON_AddStringToObject(r, "policy", res->p->name);
	cJSON_AddNumberToObject(r, "density_target", res->rho);
	cJSON_AddNumberToObject(r, "attention_s", res->st.as.seconds);
	cJSON_AddNumberToObject(r, "metadata_s", res->st.as.meta_seconds);
	cJSON_AddNumberToObject(r, "policy_calls_s", res->st.as.policy_seconds);
	cJSON_AddNumberToObject(r, "attend_s", res->st.as.attend_seconds);
	cJSON_AddNumberToObject(r, "sparse_units", (double)res->st.as.sparse_calls);
	/* device time of the op table (GPU): GEMMs, attention through the table, the elementwise
	 * ops in all and by kind */
	cJSON_AddNumberToObject(r, "transformer_s", res->st.ss.transformer_s);
	/* each step's transformer seconds (the dense, anchor and reuse steps' costs) */
	cJSON_AddItemToObject(r, "step_s", cJSON_CreateDoubleArray(res->st.ss.step_s,
								    steps < DG_DIT_STEP_TIMES ? steps : DG_DIT_STEP_TIMES));
	cJSON_AddNumberToObject(r, "forwards", res->st.ss.forwards);
	cJSON_AddNumberToObject(r, "shared_forwards", res->st.ss.shared_forwards);
	cJSON_AddNumberToObject(r, "gemm_s", res->st.ss.op_seconds[DG_WAN_OPK_LINEAR]);
	cJSON_AddNumberToObject(r, "table_attention_s", res->st.ss.op_seconds[DG_WAN_OPK_ATTENTION]);
	const double *os = res->st.ss.op_seconds;
	cJSON_AddNumberToObject(r, "elementwise_s", os[DG_WAN_OPK_NORM] + os[DG_WAN_OPK_HEADS] +
							    os[DG_WAN_OPK_RESIDUAL] + os[DG_WAN_OPK_CONVERT]);
	cJSON_AddNumberToObject(r, "layernorm_s", os[DG_WAN_OPK_NORM]);
	cJSON_AddNumberToObject(r, "heads_s", os[DG_WAN_OPK_HEADS]);
	cJSON_AddNumberToObject(r, "residual_s", os[DG_WAN_OPK_RESIDUAL]);
	cJSON_AddNumberToObject(r, "convert_s", os[DG_WAN_OPK_CONVERT]);
	cJSON_AddNumberToObject(r, "units", (double)res->st.as.calls);
	/* --cache-offload: the copies (zeros without, and on the CPU) */
	const dg_offload_stats *off = &res->st.as.offload;
	cJSON_AddNumberToObject(r, "offload_up_bytes", off->up_bytes);
	cJSON_AddNumberToObject(r, "offload_down_bytes", off->down_bytes);
	cJSON_AddNumberToObject(r, "offload_copy_s", off->copy_s);
	cJSON_AddNumberToObject(r, "offload_wait_s", off->wait_s);
	cJSON_AddNumberToObject(r, "offload_pin_s", off->pin_s);
	cJSON_AddNumberToObject(r, "offload_pin_ahead_bytes", off->pin_ahead_bytes);
	cJSON_AddNumberToObject(r, "offload_pin_ahead_s", off->pin_ahead_s);
	return r;
}

/* out/generate.json: the settings and every run */
static int write_json(const generate_args *a, const dg_dit_inputs *di, const run_result *res, int nres)
{
	cJSON *j = settings_json(a, di);
	cJSON *runs = cJSON_AddArrayToObject(j, "runs");
	for (int i = 0; i < nres; i++)
		cJSON_AddItemToArray(runs, run_json(&res[i], a->cli.so.steps));
	dg_json_paths_shown(j);
	char *js = cJSON_Print(j);
	cJSON_Delete(j);
	char *jp = dg_path_join(a->cli.out, "generate.json");
	dg_out o;
	int orc = dg_out_open(&o, jp);
	if (!orc) {
		fprintf(o.f, "%s\n", js);
		orc = dg_out_commit(&o);
	}
	free(jp);
	cJSON_free(js);
	return orc;
}

int dg_cmd_generate(int argc, char **argv)
{
	generate_args a;
	int rc = parse_args(argc, argv, &a);
	if (rc >= 0)
		return rc;
	if (a.plan_only)
		return plan_only(&a);
	const char *out = a.cli.out;
	const char *in[] = { a.cli.in.model, a.cli.in.text, a.cli.in.negative, a.cli.in.noise };
	for (int i = 0; i < 4; i++) /* no output may be, hold or lie in an input */
		dg_input_add(in[i]);
	if (dg_output_folder_check("generate", out))
		return 1;
	dg_dit_inputs di;
	if (dg_dit_inputs_load(&a.cli.in, &di))
		return 1;
	char why[256];
	if (dg_schedule_check_loop(&a.sched, 0, di.model->cfg.num_layers, why, sizeof why)) {
		dg_error("generate: --schedule '%s': %s", a.schedule, why);
		dg_dit_inputs_free(&di);
		return 2;
	}
	dg_dit_sample_opts *so = &a.cli.so;
	const dg_wan_model *wm = di.model;
	if (!a.cli.quiet)
		fprintf(stderr, "generate: loaded %s from %d file%s: %.2f GB in %.1f s (%.2f GB/s), %d linears uploaded "
			"as stored (bf16)\n", wm->name, wm->files, wm->files > 1 ? "s" : "", wm->load_bytes / 1e9, wm->load_s,
			wm->load_s > 0 ? wm->load_bytes / 1e9 / wm->load_s : 0, wm->bf16_direct);
	so->model = di.model;
	memcpy(so->latent, di.latent, sizeof so->latent);
	so->noise = di.noise;
	so->cond = di.cond;
	so->uncond = di.uncond;
	size_t nlat = (size_t)di.model->cfg.out_dim * di.latent[0] * di.latent[1] * di.latent[2];
	float *ref = dg_malloc(nlat * sizeof(float)), *lat = dg_malloc(nlat * sizeof(float));
	run_result *res = dg_calloc((size_t)(1 + a.np * a.nd), sizeof *res);
	int nres = 0;
	/* generate.csv, generate.json and every latents file are published together, or none; a
	 * failed run removes the folders it made */
	dg_made_dirs made = { 0 };
	dg_publish pub = { 0 };
	rc = 1;
	if (dg_mkdir_track(out, &made))
		goto done;
	dg_out_defer(&pub);
	int err = run_all(&a, &di, ref, lat, res, &nres) || write_csv(out, res, nres) ||
		  write_json(&a, &di, res, nres);
	dg_out_defer(NULL);
	if (err)
		dg_publish_abort(&pub);
	else
		err = dg_publish_commit(&pub);
	if (err)
		goto done;
	if (!a.cli.quiet)
		fprintf(stderr, "generate: wrote %s/generate.csv, %s/generate.json and %d latents files\n", out,
			out, nres);
	rc = 0;
done:
	if (rc)
		dg_made_dirs_remove(&made);
	dg_made_dirs_free(&made);
	free(ref), free(lat), free(res);
	dg_dit_inputs_free(&di);
	return rc;
}
