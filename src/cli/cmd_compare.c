/*
 * cmd_compare.c: `dsgap compare FID_RUN... [--speed SPEED_RUN...] --out DIR [--boot N] [--seed X]
 * [--tol T] [--title TEXT]`: every method's fidelity (closed loop over a sample set) against its
 * measured speedup (closed loop at another size), one table and a Pareto figure (analysis/compare.h).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "analysis/compare.h"
#include "cli/commands.h"
#include "util/util.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: dsgap compare FID_RUN [FID_RUN ...] [--speed SPEED_RUN ...] --out DIR\n"
		   "                     [--boot N] [--seed X] [--tol T] [--title TEXT]\n\n"
		   "Every method x density of merged closed-loop runs (dsgap run's RUN folders: closed_loop.csv\n"
		   "+ run.json): PSNR, SSIM and rel-L2 of the final latents against dense, means over the\n"
		   "samples with 95%% bootstrap intervals over them (--boot replicates, default 1000, --seed,\n"
		   "default 1), the computed density (all calls and past the warm-up), and the speedup of the\n"
		   "--speed runs (default: the fidelity runs' own). A peer whose density past the warm-up is more\n"
		   "than --tol (default 0.02) from its target cannot reach it (run.json unreached_densities).\n"
		   "Writes DIR/comparison.{csv,md,tex}, DIR/run.json, DIR/figures/pareto.{dat,gp,pdf,png}.\n");
}

int dg_cmd_compare(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "speed", required_argument, 0, 's' }, { "out", required_argument, 0, 'o' },
		{ "boot", required_argument, 0, 'b' },  { "seed", required_argument, 0, 'S' },
		{ "tol", required_argument, 0, 't' },   { "title", required_argument, 0, 'T' },
		{ "help", no_argument, 0, 'h' },        { 0, 0, 0, 0 },
	};
	dg_compare_opts o = { .title = "closed loop", .boot = 1000, .seed = 1, .tol = 0.02 };
	char **speed = dg_calloc((size_t)argc, sizeof *speed);
	int c, rc = 2;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":s:o:b:S:t:T:h", opts, NULL)) != -1) {
		switch (c) {
		case 's': speed[o.nspeed++] = optarg; break;
		case 'o': o.out = optarg; break;
		case 'b': if (dg_opt_int("compare", "boot", optarg, 0, 100000, &o.boot)) goto done; break;
		case 'S': if (dg_opt_seed("compare", "seed", optarg, &o.seed)) goto done; break;
		case 't': {
			char *e;
			o.tol = strtod(optarg, &e);
			if (e == optarg || *e || !(o.tol >= 0 && o.tol < 1)) {
				dg_error("compare: bad --tol '%s' (a number in [0, 1))", optarg);
				goto done;
			}
			break;
		}
		case 'T':
			if (dg_opt_text("compare", "title", optarg))
				goto done;
			o.title = optarg;
			break;
		case 'h': usage(stdout); rc = 0; goto done;
		default: rc = dg_opt_bad("compare", c, argv, opts); goto done;
		}
	}
	if (!o.out || optind >= argc) {
		dg_error("compare: %s", !o.out ? "--out DIR is required" : "no run folder given");
		usage(stderr);
		goto done;
	}
	o.speed = speed;
	o.fidelity = argv + optind;
	o.nfidelity = argc - optind;
	struct stat so, si; /* --out an input run's folder: its run.json would be overwritten */
	for (int i = 0; i < o.nfidelity + o.nspeed && stat(o.out, &so) == 0; i++) {
		const char *in = i < o.nfidelity ? o.fidelity[i] : o.speed[i - o.nfidelity];
		if (stat(in, &si) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino) {
			dg_error("compare: --out %s is the input run %s: its run.json would be overwritten", o.out, in);
			goto done;
		}
	}
	rc = dg_compare(&o) ? 1 : 0;
done:
	free(speed);
	return rc;
}
