/*
 * cmd_refreshstats.c: dsgap refreshstats, the refresh experiment's statistics over a sample set
 * (issue 19): the command line; what it computes and writes is analysis/refreshstats.h's.
 *
 *   dsgap refreshstats --schedules a1,a2,a3,a6 --out OUT [--density X] [--boot N] [--seed X]
 *                      [LABEL=]PREFIX ... | --samples LIST
 * A sample is the results directories PREFIX.SCHEDULE of its schedules (dsgap run's TRACE.SCHEDULE
 * runs); LIST: LABEL=PREFIX lines as dsgap decompose --samples reads them (samples.h).
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/refreshstats.h"
#include "analysis/samples.h"
#include "cli/commands.h"
#include "util/util.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: dsgap refreshstats --schedules S1,S2,... --out OUT [--density X] [--boot N]\n"
		   "                         [--seed X] [LABEL=]PREFIX ... | --samples LIST\n"
		   "  PREFIX       a sample: its results directories PREFIX.S1, PREFIX.S2, ... (dsgap run's\n"
		   "               TRACE.SCHEDULE runs); LABEL names it (default: PREFIX's last component)\n"
		   "  --samples F  a file of LABEL=PREFIX lines (relative to F's folder; # comments)\n"
		   "  --schedules  the schedules, fewest anchors first: the first gives the error vs steps\n"
		   "               since the anchor, and E(first) - E(last) says whether more anchors help\n"
		   "  --density X  the density target (default: the first run's first)\n"
		   "  --boot N     bootstrap replicates (default 1000); --seed X (default 1)\n"
		   "Writes OUT/refresh.md, OUT/anchors.{csv,tex}, OUT/staleness.csv, OUT/trends.{csv,tex},\n"
		   "OUT/samples.csv, OUT/figures/error_vs_{anchors,staleness}-rhoX.{dat,gp,png,pdf} (X: the\n"
		   "density): means over the samples, two-level bootstrap intervals (samples, then (layer,\n"
		   "head) clusters).\n");
}

int dg_cmd_refreshstats(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "out", required_argument, NULL, 'o' },	{ "samples", required_argument, NULL, 'l' },
		{ "schedules", required_argument, NULL, 'k' }, { "density", required_argument, NULL, 'd' },
		{ "boot", required_argument, NULL, 'b' },	{ "seed", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },		{ NULL, 0, NULL, 0 },
	};
	const char *out = NULL, *listing = NULL;
	char *scheds = NULL;
	double rho = NAN;
	long boot = 1000;
	unsigned long seed = 1;
	int c;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":ho:", opts, NULL)) != -1) {
		switch (c) {
		case 'o': out = optarg; break;
		case 'l': listing = optarg; break;
		case 'k': scheds = optarg; break;
		case 'd':
			if (dg_parse_doubles(optarg, &rho, 1) != 1 || !(rho > 0 && rho <= 1))
				return dg_error("refreshstats: --density '%s' is not in (0, 1]", optarg), 2;
			break;
		case 'b':
			if (dg_opt_long("refreshstats", "boot", optarg, 0, 10000000, &boot))
				return 2;
			break;
		case 's':
			if (dg_opt_seed("refreshstats", "seed", optarg, &seed))
				return 2;
			break;
		case 'h': usage(stdout); return 0;
		default: return dg_opt_bad("refreshstats", c, argv, opts);
		}
	}
	if (!out || !scheds || (optind == argc && !listing)) {
		dg_error("refreshstats: needs --out, --schedules and at least one sample");
		return 2;
	}
	dg_refresh_opts ro = { .out = out, .scheds = scheds, .rho = rho, .boot = (int)boot, .seed = seed };
	char *list = dg_strdup(scheds), *item[DG_REFRESH_MAX_SCHED];
	ro.nk = dg_split(list, ',', item, DG_REFRESH_MAX_SCHED);
	if (ro.nk < 0 || dg_opt_list_check("refreshstats", "schedules", scheds, item, ro.nk)) {
		if (ro.nk < 0)
			dg_error("refreshstats: --schedules '%s': more than %d schedules", scheds, DG_REFRESH_MAX_SCHED);
		free(list);
		return 2;
	}
	for (int k = 0; k < ro.nk; k++)
		ro.sched[k] = item[k];
	if (ro.nk < 2) {
		free(list);
		return dg_error("refreshstats: --schedules '%s': at least two, fewest anchors first", scheds), 2;
	}
	dg_sample_list l = { 0 };
	int rc = listing && dg_sample_list_read(&l, listing) ? 1 : 0; /* exit 1, not -1 (255) */
	for (int i = optind; i < argc && !rc; i++)
		dg_sample_list_add(&l, argv[i], NULL);
	if (!rc && dg_sample_list_unique(&l, "refreshstats"))
		rc = 2;
	if (!rc) {
		char *cmdline = dg_join_args(argc, argv);
		ro.cmdline = cmdline;
		rc = dg_refreshstats(&ro, &l) ? 1 : 0;
		free(cmdline);
	}
	dg_sample_list_free(&l);
	free(list);
	return rc;
}
