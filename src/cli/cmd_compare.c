/*
 * cmd_compare.c: `dsgap compare FID_RUN... [--speed SPEED_RUN...] --out DIR [--boot N] [--seed X]
 * [--tol T] [--title TEXT]`: every method's fidelity (closed loop over a sample set) against its
 * measured speedup (closed loop at another size), one table and a Pareto figure (analysis/compare.h).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/compare.h"
#include "cli/commands.h"
#include "util/files.h"
#include "util/util.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: dsgap compare FID_RUN [FID_RUN ...] [--speed SPEED_RUN ...] --out DIR\n"
		   "                     [--boot N] [--seed X] [--tol T] [--title TEXT]\n"
		   "                     [--at-speedup LIST] [--at-density LIST]\n\n"
		   "Every method x density of merged closed-loop runs (dsgap run's RUN folders: closed_loop.csv\n"
		   "+ run.json): PSNR, SSIM and rel-L2 of the final latents against dense, means over the\n"
		   "samples with 95%% bootstrap intervals over them (--boot replicates, default 1000, --seed,\n"
		   "default 1), the computed density (all calls and past the warm-up), and the speedup of the\n"
		   "--speed runs (default: the fidelity runs' own). A peer whose density past the warm-up is more\n"
		   "than --tol (default 0.02) from its target cannot reach it (run.json unreached_densities).\n"
		   "Runs may differ in schedule (not in steps): a row is a policy x schedule x density. A speed\n"
		   "run of another step count or schedule gives a projected speedup (marked p): step costs\n"
		   "(dense, anchor, sparse step) fitted to the speed runs by least squares; a method with\n"
		   "cached metadata needs speed runs of two anchor shares for that; a per-step method's first\n"
		   "sparse step's one-off cost (run.json first_sparse_extra_s, e.g. svg2's first k-means) once.\n"
		   "Matched cost (DIR/matched.{csv,md,tex}): each method's best PSNR among its schedules and\n"
		   "densities at speedup >= each of --at-speedup (default 1.5,1.8,2) and at computed density\n"
		   "over every call <= each of --at-density (default 0.3,0.35,0.4,0.45,0.5), with the paired\n"
		   "difference of the best method over the next.\n"
		   "Writes DIR/comparison.{csv,md,tex}, DIR/matched.{csv,md,tex}, DIR/run.json,\n"
		   "DIR/figures/pareto.{dat,gp,pdf,png}.\n");
}

enum { MAX_AT = 8 };

/* --at-speedup / --at-density LIST: 1 to MAX_AT ascending numbers in (lo, hi] */
static int parse_at(const char *name, const char *arg, double lo, double hi, double *v, int *n)
{
	char buf[256];
	if (strlen(arg) >= sizeof buf)
		return dg_error("compare: --%s: too long", name);
	snprintf(buf, sizeof buf, "%s", arg);
	char *f[MAX_AT + 1];
	int nf = dg_split(buf, ',', f, MAX_AT + 1);
	if (nf < 1 || nf > MAX_AT)
		return dg_error("compare: --%s '%s': 1 to %d numbers separated by ','", name, arg, MAX_AT);
	for (int i = 0; i < nf; i++) {
		char *e;
		v[i] = strtod(f[i], &e);
		if (e == f[i] || *e || !(v[i] > lo && v[i] <= hi) || (i && v[i] <= v[i - 1]))
			return dg_error("compare: --%s '%s': item %d is not a number in (%g, %g] above the one "
					"before", name, arg, i + 1, lo, hi);
	}
	*n = nf;
	return 0;
}

int dg_cmd_compare(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "speed", required_argument, 0, 's' }, { "out", required_argument, 0, 'o' },
		{ "boot", required_argument, 0, 'b' },  { "seed", required_argument, 0, 'S' },
		{ "tol", required_argument, 0, 't' },   { "title", required_argument, 0, 'T' },
		{ "at-speedup", required_argument, 0, 'x' }, { "at-density", required_argument, 0, 'd' },
		{ "help", no_argument, 0, 'h' },        { 0, 0, 0, 0 },
	};
	static double at_speedup[MAX_AT] = { 1.5, 1.8, 2 }, at_density[MAX_AT] = { 0.3, 0.35, 0.4, 0.45, 0.5 };
	dg_compare_opts o = { .title = "closed loop", .boot = 1000, .seed = 1, .tol = 0.02,
			      .at_speedup = at_speedup, .nat_speedup = 3, .at_density = at_density, .nat_density = 5 };
	char **speed = dg_calloc((size_t)argc, sizeof *speed);
	int c, rc = 2;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":s:o:b:S:t:T:x:d:h", opts, NULL)) != -1) {
		switch (c) {
		case 'x':
			if (parse_at("at-speedup", optarg, 1, 1e6, at_speedup, &o.nat_speedup))
				goto done;
			break;
		case 'd':
			if (parse_at("at-density", optarg, 0, 1, at_density, &o.nat_density))
				goto done;
			break;
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
	for (int i = 0; i < o.nfidelity + o.nspeed; i++) { /* no output may be, hold or lie in an input run */
		bool fid = i < o.nfidelity;
		const char *in = fid ? o.fidelity[i] : o.speed[i - o.nfidelity];
		for (int j = fid ? 0 : o.nfidelity; j < i; j++) /* a run may be both, not one of them twice */
			if (dg_same_file(in, j < o.nfidelity ? o.fidelity[j] : o.speed[j - o.nfidelity])) {
				dg_error("compare: %s run %s is given twice", fid ? "the fidelity" : "the --speed", in);
				goto done;
			}
		dg_input_add(in);
	}
	if (dg_output_folder_check("compare", o.out))
		goto done;
	rc = dg_compare(&o) ? 1 : 0;
done:
	free(speed);
	return rc;
}
