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
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "batch/batch.h"
#include "cli/commands.h"
#include "batch/experiment.h"
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
/* GPUs of this host                                                                               */

/* The GPUs workers may be bound to: CUDA_VISIBLE_DEVICES's entries when it is set, else /dev/nvidiaN,
 * else the lines of nvidia-smi -L. ids gets new strings; returns the count. */
static int visible_gpus(char **ids, int max)
{
	const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
	int n = 0;
	if (cvd) {
		char *copy = dg_strdup(cvd), *save = NULL;
		for (char *t = strtok_r(copy, ",", &save); t && n < max; t = strtok_r(NULL, ",", &save)) {
			while (isspace((unsigned char)*t))
				t++;
			if (!*t || !strcmp(t, "-1") || !strcmp(t, "NoDevFiles"))
				break; /* CUDA stops at the first invalid entry */
			ids[n++] = dg_strdup(t);
		}
		free(copy);
		return n;
	}
	DIR *d = opendir("/dev");
	if (d) {
		struct dirent *de;
		int maxid = -1;
		while ((de = readdir(d)))
			if (!strncmp(de->d_name, "nvidia", 6) && isdigit((unsigned char)de->d_name[6]) &&
			    strspn(de->d_name + 6, "0123456789") == strlen(de->d_name + 6)) {
				int id = atoi(de->d_name + 6);
				if (id > maxid)
					maxid = id;
			}
		closedir(d);
		for (int i = 0; i <= maxid && n < max; i++) {
			char buf[16];
			snprintf(buf, sizeof buf, "%d", i);
			ids[n++] = dg_strdup(buf);
		}
		if (n)
			return n;
	}
	FILE *p = popen("nvidia-smi -L 2>/dev/null", "r");
	if (p) {
		char line[512];
		while (fgets(line, sizeof line, p) && n < max)
			if (!strncmp(line, "GPU ", 4)) {
				char buf[16];
				snprintf(buf, sizeof buf, "%d", n);
				ids[n++] = dg_strdup(buf);
			}
		pclose(p);
	}
	return n;
}

static int online_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}

/* ---------------------------------------------------------------------------------------------- */
/* workers                                                                                         */

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig) { stop_signal = sig; }

typedef struct {
	pid_t pid;
	int status;
	bool running;
	char *gpu;  /* CUDA_VISIBLE_DEVICES of the worker, or NULL */
	int ncells; /* its part of the slice */
	double end; /* when it was reaped */
} worker;

static int run_workers(const dg_experiment *e, const char *ini, const char *out, const char *device,
		       int shard, int nshards, int nworkers, char **gpus, const int *idx, int nidx, bool quiet)
{
	char self[4096];
	ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
	if (len <= 0)
		return dg_error("run: cannot find the dsgap executable (/proc/self/exe): %s", strerror(errno));
	self[len] = 0;
	worker *w = dg_calloc(nworkers, sizeof *w);
	int *tmp = dg_malloc((nidx ? nidx : 1) * sizeof(int));
	int threads = online_cpus() / nworkers;
	threads = threads < 1 ? 1 : threads;
	struct sigaction sa = { .sa_handler = on_signal }, old_int, old_term;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	int before = dg_batch_count_done(e, out, idx, nidx);
	if (!quiet)
		fprintf(stderr, "run: %d cells (%d already done) over %d %s worker%s\n", nidx, before, nworkers,
			gpus ? "GPU" : "CPU", nworkers == 1 ? "" : "s");
	fflush(stderr);
	fflush(stdout);
	for (int i = 0; i < nworkers; i++) {
		w[i].gpu = gpus ? gpus[i] : NULL;
		w[i].ncells = dg_experiment_slice(e, shard, nshards, i, nworkers, tmp);
		char shard_s[32], worker_s[32];
		snprintf(shard_s, sizeof shard_s, "%d/%d", shard, nshards);
		snprintf(worker_s, sizeof worker_s, "%d/%d", i, nworkers);
		char *args[] = { self, "run", (char *)ini, "--out", (char *)out, "--device", (char *)device,
				 "--shard", shard_s, "--worker", worker_s, "--quiet", NULL };
		pid_t pid = fork();
		if (pid < 0) {
			dg_error("run: cannot start worker %d: %s", i, strerror(errno));
			stop_signal = SIGTERM;
			break;
		}
		if (pid == 0) {
			signal(SIGINT, SIG_DFL);
			signal(SIGTERM, SIG_DFL);
			if (w[i].gpu)
				setenv("CUDA_VISIBLE_DEVICES", w[i].gpu, 1);
			setenv("NCCL_NVLS_ENABLE", "0", 1);
			if (!getenv("OMP_NUM_THREADS")) {
				char buf[16];
				snprintf(buf, sizeof buf, "%d", threads);
				setenv("OMP_NUM_THREADS", buf, 1);
			}
			execv(self, args);
			fprintf(stderr, "dsgap: error: run: cannot execute %s: %s\n", self, strerror(errno));
			_exit(127);
		}
		w[i].pid = pid;
		w[i].running = true;
		if (!quiet)
			fprintf(stderr, "run: worker %d: pid %ld, %d cells%s%s\n", i, (long)pid, w[i].ncells,
				w[i].gpu ? ", CUDA_VISIBLE_DEVICES=" : "", w[i].gpu ? w[i].gpu : "");
	}
	double start = dg_now();
	int last = before, running = 0;
	bool forwarded = false;
	for (int i = 0; i < nworkers; i++)
		running += w[i].running;
	while (running) {
		if (stop_signal && !forwarded) {
			for (int i = 0; i < nworkers; i++)
				if (w[i].running)
					kill(w[i].pid, SIGTERM);
			forwarded = true;
			fprintf(stderr, "run: signal %d: stopping the workers\n", (int)stop_signal);
		}
		int st;
		pid_t pid = waitpid(-1, &st, WNOHANG);
		if (pid > 0) {
			for (int i = 0; i < nworkers; i++)
				if (w[i].pid == pid && w[i].running) {
					w[i].running = false;
					w[i].status = st;
					w[i].end = dg_now();
					running--;
				}
			continue;
		}
		if (pid < 0 && errno != EINTR)
			break;
		usleep(200000);
		int done = dg_batch_count_done(e, out, idx, nidx);
		if (!quiet && done != last) {
			double el = dg_now() - start;
			char eta[32] = "?";
			if (done > before)
				snprintf(eta, sizeof eta, "%.0fs", el / (done - before) * (nidx - done));
			fprintf(stderr, "run: %d/%d cells done, %d worker%s running, elapsed %.0fs, ETA %s\n", done,
				nidx, running, running == 1 ? "" : "s", el, eta);
			last = done;
		}
	}
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	int failed = 0;
	for (int i = 0; i < nworkers; i++) {
		if (!w[i].pid)
			continue;
		int st = w[i].status;
		char what[96];
		if (WIFEXITED(st))
			snprintf(what, sizeof what, "exited with status %d", WEXITSTATUS(st));
		else if (WIFSIGNALED(st))
			snprintf(what, sizeof what, "was killed by signal %d", WTERMSIG(st));
		else
			snprintf(what, sizeof what, "ended");
		bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
		failed += !ok;
		if (!ok || !quiet)
			fprintf(stderr, "run: worker %d (pid %ld%s%s, %d cells) %s after %.1f s\n", i, (long)w[i].pid,
				w[i].gpu ? ", CUDA_VISIBLE_DEVICES=" : "", w[i].gpu ? w[i].gpu : "", w[i].ncells, what,
				w[i].end - start);
	}
	int done = dg_batch_count_done(e, out, idx, nidx);
	free(tmp);
	free(w);
	if (failed || done < nidx || stop_signal) {
		dg_error("run: %d of %d workers failed; %d of %d cells done, finished cells are kept: rerun the "
			 "same command to do the %d left", failed, nworkers, done, nidx, nidx - done);
		return -1;
	}
	if (!quiet)
		fprintf(stderr, "run: all %d workers finished: %d cells in %.1f s\n", nworkers, nidx - before,
			dg_now() - start);
	return 0;
}

/* ---------------------------------------------------------------------------------------------- */

int dg_cmd_run(int argc, char **argv)
{
	enum { OPT_WORKER = 1000 };
	static const struct option opts[] = {
		{ "out", required_argument, 0, 'o' },     { "shard", required_argument, 0, 's' },
		{ "gpus", required_argument, 0, 'g' },    { "workers", required_argument, 0, 'w' },
		{ "device", required_argument, 0, 'D' },  { "list", no_argument, 0, 'l' },
		{ "quiet", no_argument, 0, 'q' },         { "help", no_argument, 0, 'h' },
		{ "worker", required_argument, 0, OPT_WORKER }, { 0, 0, 0, 0 },
	};
	const char *out = NULL, *gpus_arg = NULL, *device = NULL;
	int shard = 0, nshards = 1, worker = 0, nworkers = 1, spawn = 0, c;
	bool list = false, quiet = false, is_worker = false;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":o:s:g:w:D:lqh", opts, NULL)) != -1) {
		switch (c) {
		case 'o': out = optarg; break;
		case 's':
			if (parse_slash(optarg, &shard, &nshards))
				return dg_error("run: bad --shard '%s' (i/n with 0 <= i < n)", optarg), 2;
			break;
		case OPT_WORKER:
			if (parse_slash(optarg, &worker, &nworkers))
				return dg_error("run: bad --worker '%s'", optarg), 2;
			is_worker = true;
			break;
		case 'g': gpus_arg = optarg; break;
		case 'w': {
			char *end;
			long n = strtol(optarg, &end, 10);
			if (end == optarg || *end || n < 1 || n > MAX_WORKERS)
				return dg_error("run: bad --workers '%s' (1..%d)", optarg, MAX_WORKERS), 2;
			spawn = (int)n;
			break;
		}
		case 'D':
			if (strcmp(optarg, "cpu") && strcmp(optarg, "gpu"))
				return dg_error("run: unknown device '%s' (cpu or gpu)", optarg), 2;
			device = optarg;
			break;
		case 'l': list = true; break;
		case 'q': quiet = true; break;
		case 'h': usage(stdout); return 0;
		case ':': return dg_error("run: option '%s' needs a value", argv[optind - 1]), 2;
		default: return dg_error("run: unknown option '%s' (dsgap run --help)", argv[optind - 1]), 2;
		}
	}
	if (optind != argc - 1) {
		dg_error(optind == argc ? "run: expected one experiment file (.ini)"
					: "run: unexpected argument '%s'", argv[argc - 1]);
		usage(stderr);
		return 2;
	}
	if (gpus_arg && spawn)
		return dg_error("run: --gpus and --workers exclude each other"), 2;
	if ((gpus_arg || spawn) && is_worker)
		return dg_error("run: a worker does not start workers"), 2;
	const char *ini = argv[optind];
	dg_experiment e;
	if (dg_experiment_load(&e, ini))
		return 1;
	char *gpu_ids[MAX_WORKERS] = { 0 };
	int ngpu_ids = 0, rc = 1;
	if (gpus_arg) {
		ngpu_ids = visible_gpus(gpu_ids, MAX_WORKERS);
		if (!strcmp(gpus_arg, "all")) {
			spawn = ngpu_ids;
		} else {
			char *end;
			long n = strtol(gpus_arg, &end, 10);
			if (end == gpus_arg || *end || n < 1 || n > MAX_WORKERS) {
				dg_error("run: bad --gpus '%s' (all or a count)", gpus_arg);
				rc = 2;
				goto out;
			}
			spawn = (int)n;
		}
		if (spawn < 1 || spawn > ngpu_ids) {
			dg_error("run: --gpus %s: %d GPU%s visible on this host (CUDA_VISIBLE_DEVICES, /dev/nvidia*, "
				 "nvidia-smi); --workers N runs CPU processes", gpus_arg, ngpu_ids,
				 ngpu_ids == 1 ? "" : "s");
			goto out;
		}
		if (device && strcmp(device, "gpu")) {
			dg_error("run: --gpus runs on the GPUs: --device cpu contradicts it");
			rc = 2;
			goto out;
		}
		device = "gpu";
	}
	if (device)
		dg_experiment_set_device(&e, device);
	if (!out)
		out = e.out_dir;
	char default_out[256];
	if (!out) {
		snprintf(default_out, sizeof default_out, "dsgap-runs/%s", e.name);
		out = default_out;
	}
	dg_experiment_set_out(&e, out);
	int *idx = dg_malloc((e.ncells ? e.ncells : 1) * sizeof(int));
	int n = dg_experiment_slice(&e, shard, nshards, worker, nworkers, idx);
	if (list) {
		if (e.closed)
			fprintf(stderr, "%s: closed loop, %d schedule%s = %d run%s of %d prompt%s x %d seed%s, %d cells; "
				"shard %d/%d: %d cells\n", e.name, e.nschedules, e.nschedules == 1 ? "" : "s", e.nruns,
				e.nruns == 1 ? "" : "s", e.nprompts, e.nprompts == 1 ? "" : "s", e.model.nseeds,
				e.model.nseeds == 1 ? "" : "s", e.ncells, shard, nshards, n);
		else
			fprintf(stderr, "%s: %d trace%s x %d schedule%s = %d run%s, %d cells; shard %d/%d: %d cells\n",
				e.name, e.ntraces, e.ntraces == 1 ? "" : "s", e.nschedules, e.nschedules == 1 ? "" : "s",
				e.nruns, e.nruns == 1 ? "" : "s", e.ncells, shard, nshards, n);
		for (int i = 0; i < n; i++)
			printf("%d %s/%s\n", idx[i], e.runs[e.cells[idx[i]].run].name, e.cells[idx[i]].id);
		rc = 0;
		free(idx);
		goto out;
	}
	char *cmd = dg_join_args(argc, argv);
	double t0 = dg_now();
	int err = dg_batch_prepare(&e, out);
	if (!err && !quiet && !is_worker)
		fprintf(stderr, "run: experiment '%s': %d run%s, %d cells (%s), device %s; this %s: %d cells -> %s\n",
			e.name, e.nruns, e.nruns == 1 ? "" : "s", e.ncells,
			e.closed ? "closed loop: one generate run each" : "every policy x density of a cluster",
			e.device, nshards > 1 ? "shard" : "run", n, out);
	if (!err)
		err = dg_batch_traces(&e, idx, n, !quiet || is_worker);
	if (!err && spawn) {
		err = run_workers(&e, ini, out, e.device, shard, nshards, spawn, gpus_arg ? gpu_ids : NULL, idx, n,
				  quiet);
	} else if (!err) {
		dg_batch_opts o = { .e = &e, .out_dir = out, .device = e.device, .command_line = cmd,
				    .progress = !quiet };
		int ran, skipped;
		err = dg_batch_run(&o, idx, n, &ran, &skipped);
		if (!err && !quiet)
			fprintf(stderr, "run: %d cells run, %d already done, %.1f s\n", ran, skipped, dg_now() - t0);
	}
	free(cmd);
	free(idx);
	if (err)
		goto out;
	rc = 0;
	if (is_worker)
		goto out;
	int done = dg_batch_count_done(&e, out, NULL, 0);
	if (done == e.ncells) {
		char *dirs[] = { (char *)out };
		if (dg_batch_merge(dirs, 1, out, !quiet))
			rc = 1;
		else if (!quiet)
			fprintf(stderr, e.closed ? "run: done in %.1f s; results in %s/ (%s/%s/closed_loop.csv)\n" :
				"run: done in %.1f s; results in %s/ (dsgap decompose %s/%s)\n", dg_now() - t0,
				out, out, e.runs[0].name);
	} else if (!quiet) {
		fprintf(stderr, "run: shard %d/%d done; %s holds %d of the experiment's %d cells: when every "
				"shard is done, dsgap merge DIR... --out OUT\n", shard, nshards, out, done, e.ncells);
	}
out:
	for (int i = 0; i < ngpu_ids; i++)
		free(gpu_ids[i]);
	dg_experiment_free(&e);
	return rc;
}
