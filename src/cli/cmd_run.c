/*
 * cmd_run.c: `dsgap run experiments/NAME.ini [--out DIR] [--shard i/n] [--gpus all|N | --workers N]`
 * runs the cells of an experiment (experiment.h: the file format and the grid; batch.h: the
 * output folder). A rerun skips finished cells; --shard i/n runs cells i, i+n, i+2n, ...; when
 * every cell of the experiment is in DIR, the run merges them (dsgap merge) into DIR/RUN/.
 *
 * --gpus all|N and --workers N start one worker process per GPU (CUDA_VISIBLE_DEVICES=that GPU)
 * or N CPU processes, each running `dsgap run ... --worker w/N` on its round-robin part of the
 * slice, all writing into DIR; NCCL_NVLS_ENABLE=0 is set in every worker's environment and, unless
 * set already, OMP_NUM_THREADS = cores / N. The parent waits, prints progress and reports each
 * worker's end. A worker that dies loses only the cell it was on; rerunning finishes the batch.
 * The workers themselves are batch/workers.h.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "batch/batch.h"
#include "batch/experiment.h"
#include "batch/workers.h"
#include "backend/backend.h"
#include "cli/commands.h"
#include "util/files.h"
#include "util/util.h"

#define MAX_WORKERS 256

static void usage(FILE *f)
{
	fprintf(f,
		"usage: dsgap run EXPERIMENT.ini [--out DIR] [--shard i/n] [--gpus all|N | --workers N]\n"
		"                [--device cpu|gpu] [--list] [--quiet]\n\n"
		"Runs an experiment's grid of cells (a cell: one (layer, head) cluster of one trace x schedule,\n"
		"every policy at every density and step) into DIR/cells/, skipping cells already done; once all\n"
		"cells are in DIR, merges them into DIR/RUN/{metrics.csv,run.json} (RUN = TRACE.SCHEDULE; ready\n"
		"for dsgap decompose and plot) and DIR/summary.{csv,md}. A closed-loop experiment ([model],\n"
		"[prompts]): a cell is one generate run of one (prompt, seed) sample, dense or one policy at one\n"
		"density; merged into DIR/RUN/closed_loop.csv (PSNR/SSIM against the sample's dense run,\n"
		"speedup). The file format is in README.md.\n\n"
		"  --out DIR        output folder (default: [output] dir, else dsgap-runs/NAME)\n"
		"  --shard i/n      only cells i, i+n, i+2n, ... (0 <= i < n): one task of a job array;\n"
		"                   combine the shards' folders with dsgap merge\n"
		"  --gpus all|N     one worker process per GPU (CUDA_VISIBLE_DEVICES), device gpu\n"
		"  --workers N      N worker processes on this host (the same code path, no GPU binding)\n"
		"  --device D       cpu or gpu: overrides [device] device\n"
		"  --list           print the cells (of the shard) and exit: NUMBER RUN/CELL\n"
		"  --quiet          no progress lines\n");
}

/* "i/n" with 0 <= i < n */
static int parse_slash(const char *s, int *i, int *n)
{
	char *end;
	long a = strtol(s, &end, 10);
	if (end == s || *end != '/')
		return -1;
	const char *b = end + 1;
	long c = strtol(b, &end, 10);
	if (end == b || *end || c < 1 || c > 1000000 || a < 0 || a >= c)
		return -1;
	*i = (int)a;
	*n = (int)c;
	return 0;
}

/* ---------------------------------------------------------------------------------------------- */

/* what dsgap run was asked for */
typedef struct {
	const char *ini, *out, *gpus_arg, *device;
	int shard, nshards, worker, nworkers;
	int spawn; /* workers to start (--workers N; --gpus: resolved by gpu_workers) */
	bool list, quiet, is_worker;
} run_args;

/* The options into a: -1 to go on, else the exit status (0 after --help, 2 on a bad option). */
static int parse_args(int argc, char **argv, run_args *a)
{
	enum { OPT_WORKER = 1000 };
	static const struct option opts[] = {
		{ "out", required_argument, 0, 'o' },     { "shard", required_argument, 0, 's' },
		{ "gpus", required_argument, 0, 'g' },    { "workers", required_argument, 0, 'w' },
		{ "device", required_argument, 0, 'D' },  { "list", no_argument, 0, 'l' },
		{ "quiet", no_argument, 0, 'q' },         { "help", no_argument, 0, 'h' },
		{ "worker", required_argument, 0, OPT_WORKER }, { 0, 0, 0, 0 },
	};
	*a = (run_args){ .nshards = 1, .nworkers = 1 };
	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":o:s:g:w:D:lqh", opts, NULL)) != -1) {
		switch (c) {
		case 'o': a->out = optarg; break;
		case 's':
			if (parse_slash(optarg, &a->shard, &a->nshards))
				return dg_error("run: bad --shard '%s' (i/n with 0 <= i < n)", optarg), 2;
			break;
		case OPT_WORKER:
			if (parse_slash(optarg, &a->worker, &a->nworkers))
				return dg_error("run: bad --worker '%s'", optarg), 2;
			a->is_worker = true;
			break;
		case 'g': a->gpus_arg = optarg; break;
		case 'w': {
			char *end;
			long n = strtol(optarg, &end, 10);
			if (end == optarg || *end || n < 1 || n > MAX_WORKERS)
				return dg_error("run: bad --workers '%s' (1..%d)", optarg, MAX_WORKERS), 2;
			a->spawn = (int)n;
			break;
		}
		case 'D':
			if (strcmp(optarg, "cpu") && strcmp(optarg, "gpu"))
				return dg_error("run: unknown device '%s' (cpu or gpu)", optarg), 2;
			a->device = optarg;
			break;
		case 'l': a->list = true; break;
		case 'q': a->quiet = true; break;
		case 'h': usage(stdout); return 0;
		default: return dg_opt_bad("run", c, argv, opts);
		}
	}
	if (optind != argc - 1) {
		dg_error(optind == argc ? "run: expected one experiment file (.ini)"
					: "run: unexpected argument '%s'", argv[argc - 1]);
		usage(stderr);
		return 2;
	}
	if (a->gpus_arg && a->spawn)
		return dg_error("run: --gpus and --workers exclude each other"), 2;
	if ((a->gpus_arg || a->spawn) && a->is_worker)
		return dg_error("run: a worker does not start workers"), 2;
	a->ini = argv[optind];
	return -1;
}

/* --gpus all|N: the GPUs of this host into gpu_ids[0..*ngpu_ids), a->spawn = the workers, device
 * gpu. -1 to go on, else the exit status (reported). */
static int gpu_workers(run_args *a, char **gpu_ids, int *ngpu_ids)
{
	*ngpu_ids = dg_workers_visible_gpus(gpu_ids, MAX_WORKERS);
	if (!strcmp(a->gpus_arg, "all")) {
		a->spawn = *ngpu_ids;
	} else {
		char *end;
		long n = strtol(a->gpus_arg, &end, 10);
		if (end == a->gpus_arg || *end || n < 1 || n > MAX_WORKERS)
			return dg_error("run: bad --gpus '%s' (all or a count)", a->gpus_arg), 2;
		a->spawn = (int)n;
	}
	if (a->spawn < 1 || a->spawn > *ngpu_ids)
		return dg_error("run: --gpus %s: %d GPU%s visible on this host (CUDA_VISIBLE_DEVICES, /dev/nvidia*, "
				"nvidia-smi); --workers N runs CPU processes", a->gpus_arg, *ngpu_ids,
				*ngpu_ids == 1 ? "" : "s"), 1;
	if (a->device && strcmp(a->device, "gpu"))
		return dg_error("run: --gpus runs on the GPUs: --device cpu contradicts it"), 2;
	a->device = "gpu";
	return -1;
}

/* --list: the grid on stderr, the slice's cells idx[0..n) on stdout */
static void list_cells(const dg_experiment *e, const run_args *a, const int *idx, int n)
{
	int shared = 0;
	for (int k = 0; k < e->ncells; k++)
		shared += e->cells[k].shared;
	if (e->closed)
		fprintf(stderr, "%s: closed loop, %d schedule%s = %d run%s of %d prompt%s x %d seed%s, %d cells, "
			"%d generations (%d shared between schedules); shard %d/%d: %d cells\n", e->name,
			e->nschedules, e->nschedules == 1 ? "" : "s", e->nruns, e->nruns == 1 ? "" : "s",
			e->nprompts, e->nprompts == 1 ? "" : "s", e->model.nseeds, e->model.nseeds == 1 ? "" : "s",
			e->ncells, e->ncells - shared, shared, a->shard, a->nshards, n);
	else
		fprintf(stderr, "%s: %d trace%s x %d schedule%s = %d run%s, %d cells; shard %d/%d: %d cells\n",
			e->name, e->ntraces, e->ntraces == 1 ? "" : "s", e->nschedules, e->nschedules == 1 ? "" : "s",
			e->nruns, e->nruns == 1 ? "" : "s", e->ncells, a->shard, a->nshards, n);
	for (int i = 0; i < n; i++)
		printf("%d %s/%s\n", idx[i], e->runs[e->cells[idx[i]].run].name, e->cells[idx[i]].id);
}

/* The output folder is this run's (its workers run under its lock) until the process ends: a second
 * run or merge there is refused, naming this one */
static dg_dir_lock_t run_lock = { .fd = -1 };

/* The cells idx[0..n) into out: prepared, their traces made, then run here or by the workers. */
static int run_cells(const dg_experiment *e, const run_args *a, const char *out, const int *idx, int n,
		     char **gpu_ids, const char *cmd, double t0)
{
	/* a device that is not there: refused before anything is written */
	if (!strcmp(e->device, "gpu") && !dg_backend_gpu_available())
		return dg_error("run: %s: device gpu, and no CUDA device answers (or this dsgap has no CUDA): "
				"--device cpu runs it here; nothing written", a->ini);
	int err = dg_batch_prepare(e, out);
	if (!err && !a->is_worker)
		err = dg_dir_lock(&run_lock, out);
	if (!err && !a->quiet && !a->is_worker)
		fprintf(stderr, "run: experiment '%s': %d run%s, %d cells (%s), device %s; this %s: %d cells -> %s\n",
			e->name, e->nruns, e->nruns == 1 ? "" : "s", e->ncells,
			e->closed ? "closed loop: one generate run each" : "every policy x density of a cluster",
			e->device, a->nshards > 1 ? "shard" : "run", n, out);
	if (!err)
		err = dg_batch_traces(e, idx, n, !a->quiet || a->is_worker);
	/* cells whose inputs changed, or that lost a file, are recomputed (the workers' parent checks) */
	if (!err && !a->is_worker)
		err = dg_batch_validate(e, out) < 0;
	if (!err && a->spawn) {
		dg_workers_opts wo = { .e = e, .ini = a->ini, .out_dir = out, .device = e->device,
				       .shard = a->shard, .nshards = a->nshards, .nworkers = a->spawn,
				       .gpus = a->gpus_arg ? gpu_ids : NULL, .idx = idx, .nidx = n, .quiet = a->quiet };
		err = dg_workers_run(&wo);
	} else if (!err) {
		dg_batch_opts o = { .e = e, .out_dir = out, .device = e->device, .command_line = cmd,
				    .progress = !a->quiet };
		int ran, skipped;
		err = dg_batch_run(&o, idx, n, &ran, &skipped);
		if (!err && !a->quiet)
			fprintf(stderr, "run: %d cells run, %d already done, %.1f s\n", ran, skipped, dg_now() - t0);
	}
	return err;
}

/* When every cell of the experiment is in out, merge them there; else say what is left. The exit
 * status. */
static int merge_if_complete(const dg_experiment *e, const run_args *a, const char *out, double t0)
{
	int done = dg_batch_count_done(e, out, NULL, 0);
	if (done == e->ncells) {
		char *dirs[] = { (char *)out };
		if (dg_batch_merge(dirs, 1, out, !a->quiet, false))
			return 1;
		if (!a->quiet)
			fprintf(stderr, e->closed ? "run: done in %.1f s; results in %s/ (%s/%s/closed_loop.csv)\n" :
				"run: done in %.1f s; results in %s/ (dsgap decompose %s/%s)\n", dg_now() - t0,
				out, out, e->runs[0].name);
	} else if (a->nshards == 1) {
		/* every cell was run here without an error, yet some are not in out */
		int k = 0;
		while (k < e->ncells && dg_batch_cell_done(e, out, k))
			k++;
		return dg_error("run: %s holds %d of the experiment's %d cells after a complete run (the first "
				"missing: cells/%s/%s): its cells could not be installed", out, done, e->ncells,
				e->runs[e->cells[e->cells[k].shared ? e->cells[k].source : k].run].name, e->cells[k].id), 1;
	} else if (!a->quiet) {
		fprintf(stderr, "run: shard %d/%d done; %s holds %d of the experiment's %d cells: when every "
				"shard is done, dsgap merge DIR... --out OUT\n", a->shard, a->nshards, out, done, e->ncells);
	}
	return 0;
}

int dg_cmd_run(int argc, char **argv)
{
	run_args a;
	int rc = parse_args(argc, argv, &a);
	if (rc >= 0)
		return rc;
	dg_experiment e;
	if (dg_experiment_load(&e, a.ini))
		return 1;
	char *gpu_ids[MAX_WORKERS] = { 0 };
	int ngpu_ids = 0;
	rc = a.gpus_arg ? gpu_workers(&a, gpu_ids, &ngpu_ids) : -1;
	if (rc >= 0)
		goto out;
	if (a.device)
		dg_experiment_set_device(&e, a.device);
	const char *out = a.out ? a.out : e.out_dir;
	char default_out[256];
	if (!out) {
		snprintf(default_out, sizeof default_out, "dsgap-runs/%s", e.name);
		out = default_out;
	}
	dg_experiment_set_out(&e, out);
	int *idx = dg_malloc((e.ncells ? e.ncells : 1) * sizeof(int));
	int n = dg_experiment_slice(&e, a.shard, a.nshards, a.worker, a.nworkers, idx);
	if (a.list) {
		list_cells(&e, &a, idx, n);
		free(idx);
		rc = 0;
		goto out;
	}
	char *cmd = dg_join_args(argc, argv);
	double t0 = dg_now();
	bool fresh = access(out, F_OK) != 0;
	int err = run_cells(&e, &a, out, idx, n, gpu_ids, cmd, t0);
	/* a failure leaves nothing new: a folder this run made holding no finished cell (only
	 * experiment.json, a synthetic trace, both remade by a rerun) is removed */
	if (err && fresh && !a.is_worker && access(out, F_OK) == 0 && dg_batch_count_done(&e, out, NULL, 0) == 0) {
		dg_dir_unlock(&run_lock);
		if (dg_remove_tree(out))
			dg_warn("run: cannot remove %s, which this failed run made: %s", out, strerror(errno));
	}
	free(cmd);
	free(idx);
	rc = err ? 1 : a.is_worker ? 0 : merge_if_complete(&e, &a, out, t0);
out:
	for (int i = 0; i < ngpu_ids; i++)
		free(gpu_ids[i]);
	dg_experiment_free(&e);
	return rc;
}
