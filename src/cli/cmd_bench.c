/*
 * cmd_bench.c: `dsgap bench`, the replay-level benchmarks of docs/spec.md §8: the command line; what
 * it measures and writes is bench/bench.h's.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "bench/bench.h"
#include "cli/commands.h"
#include "replay/replay_check.h"
#include "util/util.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: dsgap bench [--device gpu|cpu] [--tokens N] [--heads H] [--head-dim D] [--reps R]\n"
		   "                   [--layer-step GRID] [--precise on|off] [--csv FILE]\n\n"
		   "Times the replay's dense pass, anchor step and sparse pass (densities 0.05..0.5) through\n"
		   "the backend, and the ladder + factorial on one synthetic layer-step (GRID FxHxW, default\n"
		   "21x30x52 = 32760 tokens; 'none' to skip), with P.V in the precise mode (P as bf16 hi + lo)\n"
		   "or not (P in bf16, the fast kernels); on the GPU also the dense and sparse passes in both\n"
		   "modes. Defaults: gpu, 32760 tokens, 12 heads, d=128, 5 reps, --precise off, csv\n"
		   "results/bench/bench.csv.\n");
}

/* The options into o: -1 to go on, else the exit status (0 after --help, 2 on a bad option). */
static int parse_args(int argc, char **argv, dg_bench_opts *o)
{
	static const struct option opts[] = {
		{ "device", required_argument, 0, 'D' }, { "tokens", required_argument, 0, 'n' },
		{ "heads", required_argument, 0, 'H' },  { "head-dim", required_argument, 0, 'd' },
		{ "reps", required_argument, 0, 'r' },   { "csv", required_argument, 0, 'c' },
		{ "layer-step", required_argument, 0, 'L' }, { "precise", required_argument, 0, 'P' },
		{ "help", no_argument, 0, 'h' },         { 0, 0, 0, 0 },
	};
	*o = (dg_bench_opts){ .device = "gpu", .csv = DG_BENCH_DEFAULT_CSV, .grid = "21x30x52",
			   .n = 32760, .heads = 12, .d = 128, .reps = 5, .precise = false };
	int c;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":D:n:H:d:r:c:L:P:h", opts, NULL)) != -1) {
		switch (c) {
		case 'D': o->device = optarg; break;
		case 'n': if (dg_opt_int("bench", "tokens", optarg, 128, 1 << 20, &o->n)) return 2; break;
		case 'H': if (dg_opt_int("bench", "heads", optarg, 1, 256, &o->heads)) return 2; break;
		case 'd': if (dg_opt_int("bench", "head-dim", optarg, 32, 256, &o->d)) return 2; break;
		case 'r': if (dg_opt_int("bench", "reps", optarg, 1, 1000, &o->reps)) return 2; break;
		case 'c': o->csv = optarg; break;
		case 'L': o->grid = optarg; break;
		case 'P': if (dg_opt_onoff("bench", "precise", optarg, &o->precise)) return 2; break;
		case 'h': usage(stdout); return 0;
		default: return dg_opt_bad("bench", c, argv, opts);
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	/* everything checked before the CSV is opened: nothing is appended for a bad argument */
	if (strcmp(o->device, "cpu") && strcmp(o->device, "gpu"))
		return dg_error("bench: bad --device '%s' (cpu or gpu)", o->device), 2;
	int grid[3];
	if (strcmp(o->grid, "none") && dg_opt_grid("bench", "layer-step", o->grid, grid))
		return 2;
	/* q, k, v of every head, and the backend's outputs of one */
	double need = 4.0 * o->n * o->d * (3.0 * o->heads + 6), avail = dg_memory_available();
	if (need > avail)
		return dg_error("bench: %d heads x %d tokens x d=%d need at least %.2f GiB of memory but %.2f "
				"GiB is available", o->heads, o->n, o->d, need / (1024.0 * 1024 * 1024),
				avail / (1024.0 * 1024 * 1024)), 2;
	return -1;
}

int dg_cmd_bench(int argc, char **argv)
{
	dg_bench_opts o;
	int rc = parse_args(argc, argv, &o);
	if (rc >= 0)
		return rc;
	return dg_bench(&o);
}
