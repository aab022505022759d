/*
 * cmd_merge.c: `dsgap merge DIR... --out OUT` combines the output folders of the shards of one
 * experiment (dsgap run --shard i/n --out DIR) into OUT: per run OUT/RUN/metrics.csv and run.json,
 * the rows in canonical order (identical, but time_ms, to an unsharded run), and
 * OUT/summary.{csv,md}. Refuses folders of different experiments, incomplete sets of cells (but
 * with --partial, closed loop), cells whose input changed and an experiment file that changed since
 * the shards ran, and writes nothing then (batch.h).
 */
#include <getopt.h>
#include <string.h>

#include "batch/batch.h"
#include "cli/commands.h"
#include "util/files.h"
#include "util/util.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: dsgap merge DIR... --out OUT [--partial] [--quiet]\n\n"
		   "Combines the cells that dsgap run wrote into DIR.../cells/ (the shards of one experiment)\n"
		   "into OUT/RUN/{metrics.csv,run.json} for every run, rows in canonical order, and\n"
		   "OUT/summary.{csv,md}; then dsgap decompose OUT/RUN and dsgap plot OUT/RUN.\n"
		   "Every cell must be in some DIR; a cell found twice must hold the same rows.\n"
		   "  --out OUT   output folder (may be one of the DIRs)\n"
		   "  --partial   closed loop: merge the finished cells of a run cut short, leaving out\n"
		   "              the missing ones and the samples whose dense run is missing (named in\n"
		   "              RUN/run.json's experiment.cells_missing); a warning says how many\n");
}

int dg_cmd_merge(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "out", required_argument, 0, 'o' }, { "quiet", no_argument, 0, 'q' }, { "partial", no_argument, 0, 'p' },
		{ "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
	};
	const char *out = NULL;
	bool quiet = false, partial = false;
	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":o:qph", opts, NULL)) != -1) {
		switch (c) {
		case 'o': out = optarg; break;
		case 'q': quiet = true; break;
		case 'p': partial = true; break;
		case 'h': usage(stdout); return 0;
		default: return dg_opt_bad("merge", c, argv, opts);
		}
	}
	if (optind >= argc || !out) {
		dg_error(optind >= argc ? "merge: expected the folders of dsgap run" : "merge: --out OUT is required");
		usage(stderr);
		return 2;
	}
	/* OUT is ours while the merge runs (a second merge or a run there is refused); a merge that
	 * fails removes the folders it made */
	dg_made_dirs made = { 0 };
	dg_dir_lock_t lock = { .fd = -1 };
	if (dg_mkdir_track(out, &made))
		return 1;
	int rc = dg_dir_lock(&lock, out) || dg_batch_merge(argv + optind, argc - optind, out, !quiet, partial) ? 1 : 0;
	dg_dir_unlock(&lock);
	if (rc)
		dg_made_dirs_remove(&made);
	dg_made_dirs_free(&made);
	return rc;
}
