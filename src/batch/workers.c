/*
 * workers.c: a batch's cells over worker processes of this host (the contract is in workers.h):
 * start them (fork + exec of this executable), wait for them with progress lines and signal
 * forwarding, report how each ended.
 */
#include "batch/workers.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "batch/batch.h"
#include "util/util.h"

/* ---------------------------------------------------------------------------------------------- */
/* GPUs and cores of this host                                                                     */

int dg_workers_visible_gpus(char **ids, int max)
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

/* In the child: the worker's environment and dsgap run ... --worker i/N in place of this process. */
static void exec_worker(const dg_workers_opts *o, int i, const worker *w, char *self, int threads)
{
	char shard_s[32], worker_s[32];
	snprintf(shard_s, sizeof shard_s, "%d/%d", o->shard, o->nshards);
	snprintf(worker_s, sizeof worker_s, "%d/%d", i, o->nworkers);
	char *args[] = { self, "run", (char *)o->ini, "--out", (char *)o->out_dir, "--device", (char *)o->device,
			 "--shard", shard_s, "--worker", worker_s, "--quiet", NULL };
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	if (w->gpu)
		setenv("CUDA_VISIBLE_DEVICES", w->gpu, 1);
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

/* Start worker i (w: its slot; tmp: room for the slice's cells). A fork that fails is reported and
 * stops the workers started so far (as a signal would). */
static int start_worker(const dg_workers_opts *o, int i, worker *w, char *self, int threads, int *tmp)
{
	w->gpu = o->gpus ? o->gpus[i] : NULL;
	w->ncells = dg_experiment_slice(o->e, o->shard, o->nshards, i, o->nworkers, tmp);
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		dg_error("run: cannot start worker %d: %s", i, strerror(errno));
		stop_signal = SIGTERM;
		return -1;
	}
	if (pid == 0) {
		/* a worker dies with its parent (kill -9 of `dsgap run` leaves no orphan); the parent may
		 * have died between fork and prctl: then the parent is no longer the one that forked */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		exec_worker(o, i, w, self, threads);
	}
	w->pid = pid;
	w->running = true;
	if (!o->quiet)
		fprintf(stderr, "run: worker %d: pid %ld, %d cells%s%s\n", i, (long)pid, w->ncells,
			w->gpu ? ", CUDA_VISIBLE_DEVICES=" : "", w->gpu ? w->gpu : "");
	return 0;
}

/* Reap the worker that ended as pid with status st; returns how many that was (0 or 1). */
static int reap(const dg_workers_opts *o, worker *w, pid_t pid, int st)
{
	int n = 0;
	for (int i = 0; i < o->nworkers; i++)
		if (w[i].pid == pid && w[i].running) {
			w[i].running = false;
			w[i].status = st;
			w[i].end = dg_now();
			n++;
		}
	return n;
}

/* Wait until every started worker has ended: reap them, forward the first signal as SIGTERM and,
 * unless quiet, print progress when the count of done cells changes (before: done at the start). */
static void wait_workers(const dg_workers_opts *o, worker *w, int before, double start)
{
	int last = before, running = 0;
	bool forwarded = false;
	for (int i = 0; i < o->nworkers; i++)
		running += w[i].running;
	while (running) {
		if (stop_signal && !forwarded) {
			for (int i = 0; i < o->nworkers; i++)
				if (w[i].running)
					kill(w[i].pid, SIGTERM);
			forwarded = true;
			fprintf(stderr, "run: signal %d: stopping the workers\n", (int)stop_signal);
		}
		int st;
		pid_t pid = waitpid(-1, &st, WNOHANG);
		if (pid > 0) {
			running -= reap(o, w, pid, st);
			continue;
		}
		if (pid < 0 && errno != EINTR)
			break;
		usleep(200000);
		int done = dg_batch_count_done(o->e, o->out_dir, o->idx, o->nidx);
		if (!o->quiet && done != last) {
			double el = dg_now() - start;
			char eta[32] = "?";
			if (done > before)
				snprintf(eta, sizeof eta, "%.0fs", el / (done - before) * (o->nidx - done));
			fprintf(stderr, "run: %d/%d cells done, %d worker%s running, elapsed %.0fs, ETA %s\n", done,
				o->nidx, running, running == 1 ? "" : "s", el, eta);
			last = done;
		}
	}
}

/* One line per worker on how it ended (all when not quiet, else the failed ones): the number that
 * did not exit with status 0. */
static int report_workers(const dg_workers_opts *o, const worker *w, double start)
{
	int failed = 0;
	for (int i = 0; i < o->nworkers; i++) {
		if (!w[i].pid)
			continue;
		int st = w[i].status;
		char what[96];
		if (WIFEXITED(st))
			snprintf(what, sizeof what, "exited with status %d", WEXITSTATUS(st));
		else if (WIFSIGNALED(st)) {
			char sig[64];
			snprintf(what, sizeof what, "was killed (%s)", dg_signal_what(WTERMSIG(st), sig, sizeof sig));
		}
		else
			snprintf(what, sizeof what, "ended");
		bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
		failed += !ok;
		if (!ok || !o->quiet)
			fprintf(stderr, "run: worker %d (pid %ld%s%s, %d cells) %s after %.1f s\n", i, (long)w[i].pid,
				w[i].gpu ? ", CUDA_VISIBLE_DEVICES=" : "", w[i].gpu ? w[i].gpu : "", w[i].ncells, what,
				w[i].end - start);
	}
	return failed;
}

int dg_workers_run(const dg_workers_opts *o)
{
	char self[4096];
	ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
	if (len <= 0)
		return dg_error("run: cannot find the dsgap executable (/proc/self/exe): %s", strerror(errno));
	self[len] = 0;
	worker *w = dg_calloc(o->nworkers, sizeof *w);
	int *tmp = dg_malloc((o->nidx ? o->nidx : 1) * sizeof(int));
	int threads = online_cpus() / o->nworkers;
	threads = threads < 1 ? 1 : threads;
	struct sigaction sa = { .sa_handler = on_signal }, old_int, old_term;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	int before = dg_batch_count_done(o->e, o->out_dir, o->idx, o->nidx);
	if (!o->quiet)
		fprintf(stderr, "run: %d cells (%d already done) over %d %s worker%s\n", o->nidx, before, o->nworkers,
			o->gpus ? "GPU" : "CPU", o->nworkers == 1 ? "" : "s");
	fflush(stderr);
	fflush(stdout);
	for (int i = 0; i < o->nworkers; i++)
		if (start_worker(o, i, &w[i], self, threads, tmp))
			break;
	double start = dg_now();
	wait_workers(o, w, before, start);
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	int failed = report_workers(o, w, start);
	int done = dg_batch_count_done(o->e, o->out_dir, o->idx, o->nidx);
	free(tmp);
	free(w);
	if (failed || done < o->nidx || stop_signal) {
		dg_error("run: %d of %d workers failed; %d of %d cells done, finished cells are kept: rerun the "
			 "same command to do the %d left", failed, o->nworkers, done, o->nidx, o->nidx - done);
		return -1;
	}
	if (!o->quiet)
		fprintf(stderr, "run: all %d workers finished: %d cells in %.1f s\n", o->nworkers, o->nidx - before,
			dg_now() - start);
	return 0;
}
