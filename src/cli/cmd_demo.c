/*
 * cmd_demo.c: `dsgap demo [--out DIR] [--device cpu|gpu] [--model DIR] [--synthetic]`, the README's
 * main job, end to end: capture Q/K/V from the bundled model (data/model, a Wan2.1-architecture
 * video DiT trained by the project: learned attention) -> replay every policy of the ladder and the
 * factorial at three densities -> decomposition tables -> figures, then says where they are.
 * CPU: 4096 tokens (latent 16x32x32), minutes; GPU: 16384 tokens (16x64x64, the trained size),
 * seconds. --synthetic runs the same stages on a structured synthetic trace instead (no model).
 * Each stage is the same code as its own command (capture, synth, replay, decompose, plot).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/commands.h"
#include "analysis/plot.h"
#include "util/files.h"
#include "util/util.h"

#ifndef DSGAP_DATA_DIR
#define DSGAP_DATA_DIR "data"
#endif

static void usage(FILE *f)
{
	fprintf(f, "usage: dsgap demo [--out DIR] [--device cpu|gpu] [--model DIR] [--synthetic] [--quiet]\n\n"
		   "Captures the self-attention of the bundled model (class 'cockatoo', 10 UniPC steps,\n"
		   "shift 3, CFG 3; layers 0, 3, 7, both heads) into DIR/trace.h5, then replay -> decompose\n"
		   "-> plot: every ladder and factorial policy at densities 0.1, 0.15 and 0.25, warm-up 3\n"
		   "steps (anchor at step 2).\n"
		   "  --out DIR      results directory (default dsgap-demo)\n"
		   "  --device D     cpu (default): latent 16x32x32 = 4096 tokens; gpu: 16x64x64 = 16384\n"
		   "  --model DIR    the model (default $DSGAP_MODEL, else %s/model)\n"
		   "  --synthetic    a synthetic trace instead (2048 tokens, 4 heads of distinct patterns,\n"
		   "                 2 layers, 10 steps, head_dim 64): no model needed, well under a minute\n",
		   DSGAP_DATA_DIR);
}

static int stage(int (*cmd)(int, char **), char **argv)
{
	int argc = 0;
	while (argv[argc])
		argc++;
	fprintf(stderr, "demo:");
	for (int i = 0; i < argc; i++)
		fprintf(stderr, " %s", argv[i]);
	fputc('\n', stderr);
	return cmd(argc, argv);
}

int dg_cmd_demo(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "out", required_argument, 0, 'o' }, { "device", required_argument, 0, 'd' },
		{ "model", required_argument, 0, 'm' }, { "synthetic", no_argument, 0, 's' },
		{ "quiet", no_argument, 0, 'q' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
	};
	const char *out = "dsgap-demo", *device = "cpu", *model = getenv("DSGAP_MODEL");
	int c, quiet = 0, synthetic = 0;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":o:qh", opts, NULL)) != -1) {
		switch (c) {
		case 'o': out = optarg; break;
		case 'd': device = optarg; break;
		case 'm': model = optarg; break;
		case 's': synthetic = 1; break;
		case 'q': quiet = 1; break;
		case 'h': usage(stdout); return 0;
		default: return dg_opt_bad("demo", c, argv, opts);
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	int gpu = !strcmp(device, "gpu");
	if (!gpu && strcmp(device, "cpu"))
		return dg_error("demo: unknown --device '%s' (cpu or gpu)", device), 2;
	char *defmodel = dg_path_join(DSGAP_DATA_DIR, "model");
	if (!model)
		model = defmodel;
	char *cfg = dg_path_join(model, "config.json");
	if (!synthetic && access(cfg, R_OK)) {
		dg_error("demo: no model at %s (%s unreadable); give --model DIR or --synthetic", model, cfg);
		free(cfg), free(defmodel);
		return 1;
	}
	free(cfg);
	dg_made_dirs made = { 0 };
	if (dg_mkdir_track(out, &made)) {
		free(defmodel);
		return 1;
	}
	/* what the stages write: on a failure, every one of them this demo wrote goes (with the folders
	 * it made), so that a failed demo leaves nothing of its own behind */
	static const char *const products[] = { "trace.h5", "metrics.csv", "run.json", "decomposition.csv",
						"decomposition.md", "decomposition.tex", "ablation.csv",
						"ablation.md", "ablation.tex", "figures", NULL };
	struct stat before[16];
	for (int i = 0; products[i]; i++) {
		char *p = dg_path_join(out, products[i]);
		if (lstat(p, &before[i]))
			memset(&before[i], 0, sizeof before[i]);
		free(p);
	}
	char *trace = dg_path_join(out, "trace.h5");
	char *text = dg_path_join(model, "conds.safetensors:cockatoo");
	char *negative = dg_path_join(model, "conds.safetensors:null");
	char *synth[] = { "synth", "--out", trace, "--grid", "4x16x32", "--heads", "4", "--layers", "2",
			  "--steps", "10", "--head-dim", "64", "--seed", "1", NULL };
	char *capture[] = { "capture", "--model", (char *)model, "--text", text, "--negative", negative,
			    "--latent", gpu ? "16x64x64" : "16x32x32", "--seed", "1", "--steps", "10",
			    "--shift", "3", "--guidance", "3", "--layers", "0,3,7", "--device",
			    (char *)device, "--out", trace, quiet ? "--quiet" : NULL, NULL };
	char *replay[] = { "replay", trace, "--policies", "all", "--density", "0.1,0.15,0.25",
			   "--schedule", "warmup=3", "--device", (char *)device, "--out", (char *)out,
			   quiet ? "--quiet" : NULL, NULL };
	char *decompose[] = { "decompose", (char *)out, NULL };
	char *plot[] = { "plot", (char *)out, NULL };
	double t0 = dg_now();
	const bool figures = dg_gnuplot_found(); /* GPU machines often lack it: tables only, then */
	int rc = (synthetic ? stage(dg_cmd_synth, synth) : stage(dg_cmd_capture, capture)) ||
		 stage(dg_cmd_replay, replay) || stage(dg_cmd_decompose, decompose) ||
		 (figures && stage(dg_cmd_plot, plot));
	free(trace), free(text), free(negative);
	if (rc) {
		for (int i = 0; products[i]; i++) {
			char *p = dg_path_join(out, products[i]);
			struct stat now;
			if (lstat(p, &now) == 0 && (now.st_ino != before[i].st_ino || now.st_dev != before[i].st_dev ||
						    now.st_mtime != before[i].st_mtime))
				dg_remove_tree(p);
			free(p);
		}
		dg_made_dirs_remove(&made);
		free(defmodel);
		return 1;
	}
	dg_made_dirs_free(&made);
	printf("\ndemo finished in %.0f s (%s, %s). Results in %s/:\n"
	       "  trace.h5                              the captured Q/K/V (dsgap info; h5py opens it)\n"
	       "  metrics.csv, run.json                 one row per policy x density x step x layer x head\n"
	       "  decomposition.{md,tex,csv}            the oracle ladder: the three sources of the gap\n"
	       "  ablation.{md,tex,csv}                 the MC-Sparse factorial with Shapley shares\n"
	       "  figures/*.{png,pdf,gp,dat}            the figures (re-render with gnuplot NAME.gp)\n",
	       dg_now() - t0, synthetic ? "synthetic trace" : model, device, out);
	if (!figures)
		printf("gnuplot was not found, so there are no figures: run `dsgap plot %s` where it is "
		       "installed\n", out);
	free(defmodel);
	return 0;
}
