/*
 * cmd_demo.c: `dsgap demo [--out DIR]`, the README's main job: a structured synthetic trace, every
 * policy of the ladder and the factorial at three densities, the decomposition tables and the
 * figures, end to end on the CPU in well under a minute. Each stage is the same code as its own
 * command (synth, replay, decompose, plot); this only chains them and says where the results are.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "util.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: dsgap demo [--out DIR] [--quiet]\n\n"
		   "Runs synth -> replay -> decompose -> plot on the default synthetic trace (2048 tokens,\n"
		   "4 heads of distinct patterns, 2 layers, 10 steps, head_dim 64), every ladder and\n"
		   "factorial policy at densities 0.1, 0.15 and 0.25, warm-up 3 steps (anchor at step 2).\n"
		   "  --out DIR   results directory (default dsgap-demo)\n");
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
		{ "out", required_argument, 0, 'o' }, { "quiet", no_argument, 0, 'q' },
		{ "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
	};
	const char *out = "dsgap-demo";
	int c, quiet = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "o:qh", opts, NULL)) != -1) {
		switch (c) {
		case 'o': out = optarg; break;
		case 'q': quiet = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	if (dg_mkdir_p(out))
		return 1;
	char *trace = dg_path_join(out, "trace.h5");
	char *synth[] = { "synth", "--out", trace, "--grid", "4x16x32", "--heads", "4", "--layers", "2",
			  "--steps", "10", "--head-dim", "64", "--seed", "1", NULL };
	char *replay[] = { "replay", trace, "--policies", "all", "--density", "0.1,0.15,0.25",
			   "--schedule", "warmup=3", "--out", (char *)out, quiet ? "--quiet" : NULL, NULL };
	char *decompose[] = { "decompose", (char *)out, NULL };
	char *plot[] = { "plot", (char *)out, NULL };
	double t0 = dg_now();
	int rc = stage(dg_cmd_synth, synth) || stage(dg_cmd_replay, replay) ||
		 stage(dg_cmd_decompose, decompose) || stage(dg_cmd_plot, plot);
	free(trace);
	if (rc)
		return 1;
	printf("\ndemo finished in %.0f s. Results in %s/:\n"
	       "  metrics.csv, run.json                 one row per policy x density x step x layer x head\n"
	       "  decomposition.{md,tex,csv}            the oracle ladder: the three sources of the gap\n"
	       "  ablation.{md,tex,csv}                 the MC-Sparse factorial with Shapley shares\n"
	       "  figures/*.{png,pdf,gp,dat}            the figures (re-render with gnuplot NAME.gp)\n",
	       dg_now() - t0, out);
	return 0;
}
