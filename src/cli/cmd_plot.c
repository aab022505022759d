/*
 * cmd_plot.c: `dsgap plot DIR [--density X] [--boot N] [--seed X]`: the figures of a results
 * directory (plot.h) into DIR/figures/, each as NAME.dat + NAME.gp (re-render with
 * `cd DIR/figures && gnuplot NAME.gp`) + NAME.pdf + NAME.png.
 * On a sample set (dsgap decompose DIR1 DIR2 ... --out DIR: no run.json) the one figure
 * figures/samples-rhoX from its tables (dg_plot_samples).
 *   dsgap plot results/demo --density 0.15
 *   dsgap plot results/samples
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "analysis/plot.h"
#include "analysis/results.h"
#include "util/files.h"
#include "util/util.h"

#define DEFAULT_DENSITY DG_PLOT_DENSITY

static void usage(FILE *f)
{
	fprintf(f, "usage: dsgap plot DIR [--density X] [--boot N] [--seed X]\n"
		   "  DIR          results directory with metrics.csv and run.json (dsgap replay), or a\n"
		   "               sample set (dsgap decompose DIR1 DIR2 ... --out DIR: the tables and\n"
		   "               their -samples.csv)\n"
		   "  --density X  density_target of the per-density figures (default: the one "
		   "closest to %g)\n"
		   "  --boot N     bootstrap replicates for the 95%% error bars (default 1000; 0: none)\n"
		   "  --seed X     seed of the bootstrap generator, mt19937 (default 1)\n"
		   "writes DIR/figures/: error_vs_density, shapley and, named NAME-rhoX for the density,\n"
		   "sources_per_layer, ablation, error_vs_staleness, mass_distribution (.dat .gp .pdf\n"
		   ".png; another density's figures are kept) and style.gp; of a sample set:\n"
		   "samples-rhoX (each sample's sources and Shapley shares beside the pooled estimate with\n"
		   "its interval, from the tables: --boot and --seed do not apply)\n",
		DEFAULT_DENSITY);
}

int dg_cmd_plot(int argc, char **argv)
{
	dg_results_args a;
	int rc = dg_results_args_parse(&a, "plot", true, argc, argv, usage);
	if (rc)
		return rc > 0 ? 0 : 2;
	if (dg_plot_is_sample_set(a.dir)) {
		dg_dir_lock_t lock = { .fd = -1 };
		rc = dg_dir_lock(&lock, a.dir);
		if (!rc)
			rc = dg_plot_samples(a.dir, a.density) < 0;
		dg_dir_unlock(&lock);
		return rc ? 1 : 0;
	}
	dg_results r;
	if (dg_results_load(&r, a.dir))
		return 1;
	dg_plot_opts o = { .boot = (int)a.boot, .seed = a.seed };
	if (isnan(a.density)) {
		o.density = dg_results_density_near(&r, DEFAULT_DENSITY);
	} else if ((o.density = dg_results_density_near(&r, a.density)),
		   fabs(r.density[o.density] - a.density) > 1e-9) {
		char have[512] = "";
		for (int i = 0; i < r.n_densities && strlen(have) + 24 < sizeof have; i++)
			snprintf(have + strlen(have), sizeof have - strlen(have), "%s%g",
				 i ? ", " : "", r.density[i]);
		rc = dg_error("plot: no density_target %g in %s/metrics.csv (there: %s)", a.density,
			      r.dir, have);
	}
	dg_dir_lock_t lock = { .fd = -1 };
	if (!rc)
		rc = dg_dir_lock(&lock, r.dir); /* one writer of the folder at a time */
	if (!rc) {
		int n = dg_plot(&r, &o);
		if (n == 0)
			rc = dg_error("plot: %s: no figure could be made (no sparse policy after "
				      "warm-up)", r.dir);
		rc = n < 0 ? -1 : rc;
	}
	dg_dir_unlock(&lock);
	dg_results_free(&r);
	return rc ? 1 : 0;
}
