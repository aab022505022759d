/*
 * cmd_drift.c: `dsgap drift RUN... --out DIR [--boot N] [--seed X]`: issue 50's closed-loop tables
 * (analysis/drift.h): staleness as a fourth source, where the loop drifts, the step x layer map.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "analysis/drift.h"
#include "cli/commands.h"
#include "util/files.h"
#include "util/util.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: dsgap drift RUN [RUN ...] --out DIR [--boot N] [--seed X]\n\n"
		   "Merged closed-loop runs of dsgap run (RUN folders: run.json, closed_loop.csv, drift.csv), over\n"
		   "their samples with 95%% bootstrap intervals (--boot replicates, default 1000; --seed, default 1):\n"
		   "  staleness    E(BASE) - E(BASE/fresh=X) of the final latents' rel-L2 for every policy with a\n"
		   "               fresh= switch beside its BASE (the fourth source), and the PSNR gained\n"
		   "  drift        each step's rel-L2 of the latents against the dense run's, per policy\n"
		   "  sensitivity  final PSNR and rel-L2 of the runs with sparse_steps or sparse_layers schedules\n"
		   "Writes DIR/drift.md, DIR/{staleness,drift,sensitivity}.csv and DIR/figures/\n"
		   "(drift-RUN and sensitivity .dat, .gp, .pdf, .png), all or nothing.\n");
}

int dg_cmd_drift(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "out", required_argument, 0, 'o' }, { "boot", required_argument, 0, 'b' },
		{ "seed", required_argument, 0, 'S' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
	};
	dg_drift_opts o = { .boot = 1000, .seed = 1 };
	const char *out = NULL;
	int c;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":o:b:S:h", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			out = optarg;
			break;
		case 'b':
			if (dg_opt_int("drift", "boot", optarg, 0, 100000, &o.boot))
				return 2;
			break;
		case 'S':
			if (dg_opt_seed("drift", "seed", optarg, &o.seed))
				return 2;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			return dg_opt_bad("drift", c, argv, opts);
		}
	}
	if (!out || optind >= argc) {
		dg_error("drift: %s (dsgap drift --help)", out ? "no RUN folder given" : "--out DIR is required");
		return 2;
	}
	for (int i = optind; i < argc; i++) { /* no output may be, hold or lie in an input run */
		for (int j = optind; j < i; j++)
			if (dg_same_file(argv[i], argv[j]))
				return dg_error("drift: the run %s is given twice (as %s)", argv[i], argv[j]), 2;
		dg_input_add(argv[i]);
	}
	if (dg_output_folder_check("drift", out))
		return 2;
	return dg_drift(argv + optind, argc - optind, out, &o) ? 1 : 0;
}
