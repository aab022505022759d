/*
 * main.c: the dsgap command-line entry point. Dispatches to one subcommand per file (cmd_*.c).
 *   dsgap help            list the commands
 *   dsgap CMD --help      one command's options
 */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <gsl/gsl_errno.h>

#include "cli/commands.h"
#include "trace/trace.h"
#include "util/files.h"
#include "util/util.h"

static const struct {
	const char *name;
	int (*run)(int, char **);
	const char *what;
} commands[] = {
	{ "demo", dg_cmd_demo, "the default job: capture (bundled model) -> replay -> decompose -> plot, end to end" },
	{ "synth", dg_cmd_synth, "write a structured synthetic trace" },
	{ "info", dg_cmd_info, "describe a trace: shape, model, steps, layers, heads, grid, dtype, size" },
	{ "presets", dg_cmd_presets, "the named policies: each preset, its kind and its switches; the aliases" },
	{ "replay", dg_cmd_replay, "run policies over a trace's Q/K/V; write metrics.csv and run.json" },
	{ "decompose", dg_cmd_decompose, "oracle ladder and factorial ablation tables with intervals" },
	{ "plot", dg_cmd_plot, "figures (.dat .gp .png .pdf) from a results directory" },
	{ "bench", dg_cmd_bench, "replay benchmarks: dense, anchor step, sparse pass, one layer-step" },
	{ "run", dg_cmd_run, "run an experiment file (.ini): a grid of cells, resumable, sharded, on workers" },
	{ "merge", dg_cmd_merge, "combine the shards of an experiment into results directories" },
	{ "capture", dg_cmd_capture, "run a Wan2.1 DiT and stream its self-attention Q/K/V into a trace" },
	{ "generate", dg_cmd_generate, "closed loop: dense and policies from the same noise; fidelity, speedup" },
	{ "attnstats", dg_cmd_attnstats, "is attention learned? row entropy and per-query oracle mass per layer, head" },
	{ "refreshstats", dg_cmd_refreshstats, "the refresh experiment over samples: error vs anchors and staleness, intervals" },
	{ "sheet", dg_cmd_sheet, "contact sheet (PNG, PDF) of generated pixel-space clips, a row per run" },
	{ "compare", dg_cmd_compare, "every method's closed-loop fidelity against its speedup: tables, Pareto figure" },
	{ "callspeed", dg_cmd_callspeed, "one attention call per policy against sequence length, metadata amortised" },
	{ "drift", dg_cmd_drift, "closed loop: staleness as a fourth source, per-step drift, step x layer map" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: dsgap <command> [options]   (dsgap <command> --help for its options)\n\n"
		   "dsgap %s: why sparse attention degrades diffusion transformers, and what each repair "
		   "wins back.\n\ncommands:\n", DG_VERSION);
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].what);
}

/* OpenBLAS starts its server threads when it loads, and each maps a work buffer there; under an
 * address-space limit (ulimit -v) too small for them a thread retries forever, and the first fork
 * (trace.c reads attributes in a child) waits on it for good. dsgap calls OpenBLAS single-threaded
 * from its own OpenMP threads (policy/attention.c), so with a finite limit and no
 * OPENBLAS_NUM_THREADS given it runs itself again with that set to 1: no server threads at all. */
static void blas_threads_under_limit(char **argv)
{
	struct rlimit r;
	if (getenv("OPENBLAS_NUM_THREADS") || getrlimit(RLIMIT_AS, &r) || r.rlim_cur == RLIM_INFINITY)
		return;
	if (setenv("OPENBLAS_NUM_THREADS", "1", 1) == 0)
		execv("/proc/self/exe", argv); /* returns only on failure: then go on as we are */
}

int main(int argc, char **argv)
{
	blas_threads_under_limit(argv);
	/* HDF5 1.10 keeps a file whose close failed (a full disk) half-closed, and its exit handler then
	 * crashes on it: every file dsgap writes is closed (or abandoned and removed) explicitly, so
	 * HDF5 needs no exit handler. Must come before any other HDF5 call. */
	H5dont_atexit();
	dg_h5_quiet(); /* we report HDF5 failures ourselves, in one line (every thread: trace.h) */
	dg_signals_install(); /* temporaries removed on SIGINT/SIGTERM/SIGHUP; SIGXFSZ: a write error */
	gsl_set_error_handler_off();           /* every GSL status is checked where it matters */
	if (argc < 2 || !strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		if (argc >= 3 && strcmp(argv[1], "help") == 0) {
			char *sub[] = { argv[2], "--help", NULL };
			for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
				if (!strcmp(commands[i].name, argv[2]))
					return commands[i].run(2, sub);
		}
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		printf("dsgap %s (commit %s)\n", DG_VERSION, dg_git_commit());
		return 0;
	}
	/* --out '' (or --out=) names nothing any command could write: refused alike for all of them */
	for (int i = 2; i < argc; i++)
		if ((!strcmp(argv[i], "--out") && i + 1 < argc && !argv[i + 1][0]) || !strcmp(argv[i], "--out=")) {
			dg_error("%s: --out '' names no file or folder", argv[1]);
			return 2;
		}
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (!strcmp(commands[i].name, argv[1]))
			return commands[i].run(argc - 1, argv + 1);
	dg_error("unknown command '%s' (dsgap help lists them)", argv[1]);
	return 2;
}
