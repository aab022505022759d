/*
 * cmd_plot.c: `dsgap plot DIR [--density X] [--boot N] [--seed X]`: the figures of a results
 * directory (plot.h) into DIR/figures/, each as NAME.dat + NAME.gp (re-render with
 * `cd DIR/figures && gnuplot NAME.gp`) + NAME.pdf + NAME.png.
 *   dsgap plot results/demo --density 0.15
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "plot.h"
#include "results.h"
#include "util.h"

#define DEFAULT_DENSITY 0.15

static void usage(FILE *f)
{
	fprintf(f, "usage: dsgap plot DIR [--density X] [--boot N] [--seed X]\n"
		   "  DIR          results directory with metrics.csv and run.json (dsgap replay)\n"
		   "  --density X  density_target of the per-density figures (default: the one "
		   "closest to %g)\n"
		   "  --boot N     bootstrap replicates for the 95%% error bars (default 1000; 0: none)\n"
		   "  --seed X     seed of the bootstrap generator, mt19937 (default 1)\n"
		   "writes DIR/figures/: error_vs_density, sources_per_layer, ablation, shapley,\n"
		   "error_vs_staleness, mass_distribution (.dat .gp .pdf .png) and style.gp\n",
		DEFAULT_DENSITY);
}

int dg_cmd_plot(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "density", required_argument, NULL, 'd' },
		{ "boot", required_argument, NULL, 'b' },
		{ "seed", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	double density = NAN;
	long boot = 1000;
	unsigned long seed = 1;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		char *end;
		errno = 0;
		switch (c) {
		case 'd':
			density = strtod(optarg, &end);
			if (end == optarg || *end || errno || !(density >= 0 && density <= 1)) {
				dg_error("plot: bad --density '%s' (a density_target in [0, 1])", optarg);
				return 2;
			}
			break;
		case 'b':
			if (dg_opt_long("plot", "boot", optarg, 0, 10000000, &boot))
				return 2;
			break;
		case 's':
			if (dg_opt_seed("plot", "seed", optarg, &seed))
				return 2;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}
	dg_results r;
	if (dg_results_load(&r, argv[optind]))
		return 1;
	dg_plot_opts o = { .boot = (int)boot, .seed = seed };
	int rc = 0;
	if (isnan(density)) {
		o.density = dg_results_density_near(&r, DEFAULT_DENSITY);
	} else if ((o.density = dg_results_density_near(&r, density)),
		   fabs(r.density[o.density] - density) > 1e-9) {
		char have[512] = "";
		for (int i = 0; i < r.n_densities && strlen(have) + 24 < sizeof have; i++)
			snprintf(have + strlen(have), sizeof have - strlen(have), "%s%g",
				 i ? ", " : "", r.density[i]);
		rc = dg_error("plot: no density_target %g in %s/metrics.csv (there: %s)", density,
			      r.dir, have);
	}
	if (!rc) {
		int n = dg_plot(&r, &o);
		if (n == 0)
			rc = dg_error("plot: %s: no figure could be made (no sparse policy after "
				      "warm-up)", r.dir);
		rc = n < 0 ? -1 : rc;
	}
	dg_results_free(&r);
	return rc ? 1 : 0;
}
