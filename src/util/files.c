/*
 * files.c: temporaries (registry, signal cleanup, stale ones of dead processes), inputs that no
 * output may overwrite, output-folder locks, sets of files published together, atomic output
 * files. See files.h.
 */
#define _GNU_SOURCE
#include "util/files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"

/* ---------------------------------------------------------------------------------------------
 * the registry of live temporaries: a fixed table, changed with the cleanup signals blocked, read
 * by the handler (unlink and rmdir are async-signal-safe)
 */
#define DG_TMPS_MAX 1024
static char *tmp_path[DG_TMPS_MAX];
static pid_t tmp_pid[DG_TMPS_MAX];
static bool tmp_made_dir[DG_TMPS_MAX]; /* a folder this command made: removed only if empty */
static volatile sig_atomic_t tmp_count;
static const int cleanup_signals[] = { SIGINT, SIGTERM, SIGHUP };

static void block(sigset_t *old)
{
	sigset_t s;
	sigemptyset(&s);
	for (size_t i = 0; i < sizeof cleanup_signals / sizeof *cleanup_signals; i++)
		sigaddset(&s, cleanup_signals[i]);
	sigprocmask(SIG_BLOCK, &s, old);
}

static void unblock(const sigset_t *old) { sigprocmask(SIG_SETMASK, old, NULL); }

static void tmp_add(const char *path, bool made_dir)
{
	sigset_t old;
	char *copy = dg_strdup(path);
	block(&old);
	int n = tmp_count;
	if (n == DG_TMPS_MAX) { /* forget the names that no longer exist */
		int k = 0;
		for (int i = 0; i < n; i++) {
			struct stat st;
			if (tmp_pid[i] == getpid() && lstat(tmp_path[i], &st) == 0) {
				tmp_path[k] = tmp_path[i];
				tmp_made_dir[k] = tmp_made_dir[i];
				tmp_pid[k++] = tmp_pid[i];
			} else {
				free(tmp_path[i]);
			}
		}
		n = k;
	}
	if (n < DG_TMPS_MAX) {
		tmp_path[n] = copy;
		tmp_made_dir[n] = made_dir;
		tmp_pid[n] = getpid();
		tmp_count = n + 1;
		copy = NULL;
	} else {
		tmp_count = n;
	}
	unblock(&old);
	free(copy);
}

void dg_tmp_register(const char *path) { tmp_add(path, false); }

void dg_tmp_release(const char *path)
{
	if (!path)
		return;
	sigset_t old;
	char *gone = NULL;
	block(&old);
	for (int i = tmp_count - 1; i >= 0; i--) {
		if (strcmp(tmp_path[i], path) == 0) {
			gone = tmp_path[i];
			for (int j = i; j + 1 < tmp_count; j++) {
				tmp_path[j] = tmp_path[j + 1];
				tmp_made_dir[j] = tmp_made_dir[j + 1];
				tmp_pid[j] = tmp_pid[j + 1];
			}
			tmp_count = tmp_count - 1;
			break;
		}
	}
	unblock(&old);
	free(gone);
}

/* rm of a folder of plain files with async-signal-safe calls only (a handler may run it) */
static void remove_flat_dir_sigsafe(const char *path)
{
	static char buf[8192];
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return;
	for (;;) {
		long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
		if (n <= 0)
			break;
		for (long off = 0; off < n;) {
			struct { uint64_t ino; int64_t off; unsigned short reclen; unsigned char type; char name[]; }
				*e = (void *)(buf + off);
			if (strcmp(e->name, ".") && strcmp(e->name, ".."))
				unlinkat(fd, e->name, 0);
			off += e->reclen;
		}
	}
	close(fd);
	rmdir(path);
}

void dg_tmp_remove_all(void)
{
	pid_t me = getpid();
	for (int i = tmp_count - 1; i >= 0; i--) /* newest first: a made folder after what lies in it */
		if (tmp_pid[i] != me)
			continue;
		else if (tmp_made_dir[i])
			rmdir(tmp_path[i]);
		else if (unlink(tmp_path[i]) != 0 && (errno == EISDIR || errno == EPERM))
			remove_flat_dir_sigsafe(tmp_path[i]);
}

static void on_signal(int sig)
{
	int e = errno;
	dg_tmp_remove_all();
	errno = e;
	signal(sig, SIG_DFL);
	raise(sig);
}

void dg_signals_install(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof cleanup_signals / sizeof *cleanup_signals; i++)
		sigaddset(&sa.sa_mask, cleanup_signals[i]);
	for (size_t i = 0; i < sizeof cleanup_signals / sizeof *cleanup_signals; i++) {
		struct sigaction prev;
		/* a signal ignored by whoever started us (nohup) stays ignored */
		if (sigaction(cleanup_signals[i], NULL, &prev) == 0 && prev.sa_handler == SIG_IGN)
			continue;
		sigaction(cleanup_signals[i], &sa, NULL);
	}
	signal(SIGXFSZ, SIG_IGN);
	dg_fatal_cleanup(dg_tmp_remove_all);
}

/* ---------------------------------------------------------------------------------------------
 * stale temporaries
 */

int dg_remove_tree(const char *path)
{
	struct stat st;
	if (lstat(path, &st))
		return -1;
	if (!S_ISDIR(st.st_mode))
		return unlink(path);
	DIR *d = opendir(path);
	if (!d)
		return -1;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char *p = dg_path_join(path, e->d_name);
		dg_remove_tree(p);
		free(p);
	}
	closedir(d);
	return rmdir(path);
}

/* PID of "NAME.tmp.PID", or 0 */
static long tmp_owner(const char *name)
{
	const char *t = strstr(name, ".tmp.");
	if (!t)
		return 0;
	while (strstr(t + 1, ".tmp."))
		t = strstr(t + 1, ".tmp.");
	char *end;
	long pid = strtol(t + 5, &end, 10);
	return *end || end == t + 5 || pid <= 0 ? 0 : pid;
}

void dg_tmp_clean_stale(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	size_t np = prefix ? strlen(prefix) : 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		long pid = tmp_owner(e->d_name);
		if (!pid || (prefix && strncmp(e->d_name, prefix, np)) || pid == getpid())
			continue;
		if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue; /* alive (or not ours to judge) */
		char *p = dg_path_join(dir, e->d_name);
		dg_remove_tree(p);
		free(p);
	}
	closedir(d);
}

/* ---------------------------------------------------------------------------------------------
 * inputs
 */
typedef struct {
	char *path, *real;
	dev_t dev;
	ino_t ino;
	bool dir;
} input;
static input *inputs;
static int n_inputs;

void dg_input_add(const char *path)
{
	struct stat st;
	if (!path)
		return;
	dg_oom_input(path); /* an allocation that fails from here on names it */
	if (stat(path, &st)) { /* "FILE:KEY" names a tensor in FILE */
		char *copy = dg_strdup(path), *colon = strrchr(copy, ':');
		if (colon) {
			*colon = 0;
			dg_input_add(copy);
		}
		free(copy);
		return;
	}
	for (int i = 0; i < n_inputs; i++)
		if (inputs[i].dev == st.st_dev && inputs[i].ino == st.st_ino)
			return;
	inputs = dg_realloc(inputs, (n_inputs + 1) * sizeof *inputs);
	char *real = realpath(path, NULL);
	inputs[n_inputs++] = (input){ dg_strdup(path), real ? real : dg_strdup(path), st.st_dev, st.st_ino,
				      S_ISDIR(st.st_mode) };
}

/* real path of PATH, which may not exist yet: the real path of its deepest existing folder + the
 * rest of PATH (new) */
static char *real_out(const char *path)
{
	char *r = realpath(path, NULL);
	if (r || !*path)
		return r ? r : dg_strdup(path);
	char *copy = dg_strdup(path);
	for (size_t n = strlen(copy); n > 1 && copy[n - 1] == '/'; n--) /* "dir/": dir */
		copy[n - 1] = 0;
	char *slash = strrchr(copy, '/');
	const char *name = slash ? slash + 1 : copy;
	while (slash && slash > copy && slash[-1] == '/') /* "a//b": one separator */
		slash--;
	char *dir = slash ? (slash == copy ? dg_strdup("/") : (*slash = 0, dg_strdup(copy))) : dg_strdup(".");
	char *rd = real_out(dir);
	char *out = dg_path_join(strcmp(rd, "/") ? rd : "", name);
	free(rd);
	free(dir);
	free(copy);
	return out;
}

int dg_output_check(const char *path)
{
	if (!n_inputs)
		return 0;
	struct stat st;
	bool exists = stat(path, &st) == 0;
	char *real = real_out(path);
	int rc = 0;
	for (int i = 0; i < n_inputs && !rc; i++) {
		const input *in = &inputs[i];
		struct stat now;
		if (stat(in->path, &now) || now.st_dev != in->dev || now.st_ino != in->ino)
			continue; /* gone or replaced since it was read: its inode may be reused */
		if ((exists && st.st_dev == in->dev && st.st_ino == in->ino) || !strcmp(real, in->real))
			rc = dg_error("refusing to write %s: it is the input %s", path, in->path);
		else if (in->dir) {
			size_t n = strlen(in->real);
			if (!strncmp(real, in->real, n) && real[n] == '/')
				rc = exists ? dg_error("refusing to write %s: it would overwrite a file of the input %s",
						       path, in->path)
					    : dg_error("refusing to write %s: it lies inside the input folder %s", path,
						       in->path);
		}
	}
	free(real);
	return rc;
}

int dg_output_folder_check(const char *cmd, const char *dir)
{
	char *real = real_out(dir);
	size_t m = strlen(real);
	int rc = 0;
	for (int i = 0; i < n_inputs && !rc; i++) {
		const input *in = &inputs[i];
		size_t n = strlen(in->real);
		struct stat now;
		if (stat(in->path, &now) || now.st_dev != in->dev || now.st_ino != in->ino)
			continue; /* gone or replaced since it was read */
		if (!strcmp(real, in->real))
			rc = dg_error("%s: --out %s is the input %s: give another folder", cmd, dir, in->path);
		else if (n > m && !strncmp(in->real, real, m) && (in->real[m] == '/' || !strcmp(real, "/")))
			rc = dg_error("%s: --out %s holds the input %s: give a folder apart from the inputs", cmd, dir,
				      in->path);
		else if (in->dir && m > n && !strncmp(real, in->real, n) && real[n] == '/')
			rc = dg_error("%s: --out %s lies inside the input folder %s: give a folder apart from the inputs",
				      cmd, dir, in->path);
	}
	free(real);
	return rc;
}

bool dg_same_file(const char *a, const char *b)
{
	struct stat sa, sb;
	return !stat(a, &sa) && !stat(b, &sb) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

int dg_output_dir_check(const char *dir, const char *const *names)
{
	for (int i = 0; names[i]; i++) {
		char *p = dg_path_join(dir, names[i]);
		int rc = dg_output_check(p);
		free(p);
		if (rc)
			return -1;
	}
	return 0;
}

/* ---------------------------------------------------------------------------------------------
 * locks
 */

/* lock files held by this process: removed at exit when their holder did not unlock them */
static char *held[16];
static pid_t held_pid;

static void held_remove_all(void)
{
	if (held_pid != getpid())
		return;
	for (int i = 0; i < 16; i++)
		if (held[i])
			unlink(held[i]);
}

static void held_add(const char *path)
{
	static bool registered;
	if (!registered) {
		atexit(held_remove_all);
		registered = true;
	}
	held_pid = getpid();
	for (int i = 0; i < 16; i++)
		if (!held[i]) {
			held[i] = dg_strdup(path);
			return;
		}
}

static void held_drop(const char *path)
{
	for (int i = 0; i < 16; i++)
		if (held[i] && !strcmp(held[i], path)) {
			free(held[i]);
			held[i] = NULL;
		}
}

int dg_dir_lock(dg_dir_lock_t *l, const char *dir)
{
	l->fd = -1;
	l->path = dg_path_join(dir, ".dsgap.lock");
	l->pid = getpid();
	for (int attempt = 0; attempt < 10; attempt++) {
		int fd = open(l->path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
		if (fd < 0) {
			int e = errno;
			dg_error("cannot lock %s: cannot create %s: %s", dir, l->path, strerror(e));
			break;
		}
		if (flock(fd, LOCK_EX | LOCK_NB)) {
			int e = errno;
			char who[256] = "";
			ssize_t n = e == EWOULDBLOCK ? pread(fd, who, sizeof who - 1, 0) : -1;
			close(fd);
			if (e != EWOULDBLOCK) {
				dg_error("cannot lock %s: %s", l->path, strerror(e));
				break;
			}
			who[n > 0 ? n : 0] = 0;
			who[strcspn(who, "\n")] = 0;
			long pid = 0;
			char host[128] = "?", since[64] = "?";
			if (sscanf(who, "pid %ld host %127s since %63s", &pid, host, since) == 3)
				dg_error("%s is in use by another dsgap (pid %ld on %s, since %s); wait for it or "
					 "use another output folder", dir, pid, host, since);
			else
				dg_error("%s is in use by another dsgap (lock %s); wait for it or use another "
					 "output folder", dir, l->path);
			break;
		}
		/* the file we locked must still be the one at the path (a holder removes it on unlock) */
		struct stat a, b;
		if (fstat(fd, &a) || stat(l->path, &b) || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
			close(fd);
			continue;
		}
		char host[128] = "localhost", since[40], line[256];
		gethostname(host, sizeof host - 1);
		host[sizeof host - 1] = 0;
		for (char *c = host; *c; c++)
			if (*c == ' ' || *c == '\n')
				*c = '_';
		dg_utc_now(since, sizeof since);
		int n = snprintf(line, sizeof line, "pid %ld host %s since %s\n", l->pid, host, since);
		if (ftruncate(fd, 0) || pwrite(fd, line, (size_t)n, 0) != n) {
			int e = errno;
			close(fd);
			unlink(l->path);
			dg_error("cannot lock %s: cannot write %s: %s", dir, l->path, strerror(e));
			break;
		}
		l->fd = fd;
		dg_tmp_register(l->path); /* a signal removes it like a temporary */
		held_add(l->path);
		dg_tmp_clean_stale(dir, NULL);
		return 0;
	}
	free(l->path);
	l->path = NULL;
	return -1;
}

void dg_dir_unlock(dg_dir_lock_t *l)
{
	if (l->fd < 0)
		return;
	if (l->pid == getpid()) {
		unlink(l->path); /* while still holding it: a waiting process sees a new file */
		dg_tmp_release(l->path);
		held_drop(l->path);
	}
	close(l->fd);
	l->fd = -1;
	free(l->path);
	l->path = NULL;
}

/* ---------------------------------------------------------------------------------------------
 * folders made by a command
 */

int dg_mkdir_track(const char *path, dg_made_dirs *made)
{
	char *p = dg_strdup(path);
	size_t len = strlen(p);
	while (len > 1 && p[len - 1] == '/')
		p[--len] = 0;
	for (char *s = p + 1;; s++) {
		if (*s != '/' && *s != 0)
			continue;
		char c = *s;
		*s = 0;
		if (mkdir(p, 0777) == 0) {
			if (made) {
				made->dirs = dg_realloc(made->dirs, (made->n + 1) * sizeof *made->dirs);
				made->dirs[made->n++] = dg_strdup(p);
				tmp_add(p, true);
			}
		} else if (errno != EEXIST) {
			int e = errno;
			free(p);
			if (made)
				dg_made_dirs_remove(made);
			return dg_error("cannot create directory %s: %s", path, strerror(e));
		}
		*s = c;
		if (!c)
			break;
	}
	free(p);
	struct stat st;
	if (stat(path, &st) || !S_ISDIR(st.st_mode))
		return dg_error("cannot create directory %s: not a directory", path);
	return 0;
}

void dg_made_dirs_remove(dg_made_dirs *made)
{
	for (int i = made->n - 1; i >= 0; i--)
		rmdir(made->dirs[i]);
	dg_made_dirs_free(made);
}

void dg_made_dirs_free(dg_made_dirs *made)
{
	for (int i = 0; i < made->n; i++) {
		dg_tmp_release(made->dirs[i]);
		free(made->dirs[i]);
	}
	free(made->dirs);
	made->dirs = NULL;
	made->n = 0;
}

/* ---------------------------------------------------------------------------------------------
 * publishing
 */

void dg_publish_add(dg_publish *p, const char *tmp, const char *final)
{
	p->tmp = dg_realloc(p->tmp, (p->n + 1) * sizeof *p->tmp);
	p->final = dg_realloc(p->final, (p->n + 1) * sizeof *p->final);
	p->tmp[p->n] = dg_strdup(tmp);
	p->final[p->n++] = dg_strdup(final);
}

static void publish_free(dg_publish *p)
{
	for (int i = 0; i < p->n; i++) {
		dg_tmp_release(p->tmp[i]);
		free(p->tmp[i]);
		free(p->final[i]);
	}
	free(p->tmp);
	free(p->final);
	p->tmp = p->final = NULL;
	p->n = 0;
}

int dg_publish_commit(dg_publish *p)
{
	int rc = 0;
	for (int i = 0; i < p->n && !rc; i++) {
		if (rename(p->tmp[i], p->final[i])) {
			int e = errno;
			rc = dg_error("cannot rename %s to %s: %s", p->tmp[i], p->final[i], strerror(e));
			for (int j = 0; j < i; j++)
				unlink(p->final[j]);
			for (int j = i; j < p->n; j++)
				unlink(p->tmp[j]);
		}
	}
	publish_free(p);
	return rc;
}

void dg_publish_abort(dg_publish *p)
{
	for (int i = 0; i < p->n; i++)
		unlink(p->tmp[i]);
	publish_free(p);
}

/* stage's files (subfolders too) into p for dir; 0, or -1 reported */
static int publish_tree(dg_publish *p, const char *stage, const char *dir)
{
	DIR *d = opendir(stage);
	if (!d)
		return dg_error("cannot read %s: %s", stage, strerror(errno));
	int rc = dg_mkdir_p(dir);
	struct dirent *e;
	while (!rc && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char *from = dg_path_join(stage, e->d_name), *to = dg_path_join(dir, e->d_name);
		struct stat st;
		if (lstat(from, &st))
			rc = dg_error("cannot read %s: %s", from, strerror(errno));
		else if (S_ISDIR(st.st_mode))
			rc = publish_tree(p, from, to);
		else
			dg_publish_add(p, from, to);
		free(from), free(to);
	}
	closedir(d);
	return rc;
}

int dg_stage_open(dg_stage *s, const char *dir, const char *name)
{
	memset(s, 0, sizeof *s);
	if (dg_mkdir_track(dir, &s->made))
		return -1;
	char base[256];
	snprintf(base, sizeof base, ".%s", name);
	char *p = dg_path_join(dir, base);
	s->path = dg_tmp_name(p);
	s->dir = dg_strdup(dir);
	free(p);
	if (mkdir(s->path, 0777)) {
		dg_error("cannot create directory %s: %s", s->path, strerror(errno));
		dg_stage_close(s, -1);
		return -1;
	}
	return 0;
}

int dg_stage_close(dg_stage *s, int rc)
{
	if (!rc) {
		dg_publish p = { 0 };
		rc = publish_tree(&p, s->path, s->dir);
		if (rc)
			dg_publish_abort(&p);
		else
			rc = dg_publish_commit(&p);
	}
	dg_remove_tree(s->path);
	dg_tmp_release(s->path);
	if (rc)
		dg_made_dirs_remove(&s->made);
	dg_made_dirs_free(&s->made);
	free(s->path), free(s->dir);
	s->path = s->dir = NULL;
	return rc ? -1 : 0;
}

static dg_publish *deferred;
void dg_out_defer(dg_publish *p) { deferred = p; }
dg_publish *dg_out_deferred(void) { return deferred; }

int dg_out_finish(dg_out *o, dg_publish *p)
{
	int bad = dg_out_close_errno(o->f);
	o->f = NULL;
	int rc = 0;
	if (bad) {
		unlink(o->tmp);
		dg_tmp_release(o->tmp);
		rc = dg_error("cannot write %s: %s", o->path, strerror(bad));
	} else {
		dg_publish_add(p, o->tmp, o->path);
	}
	free(o->path);
	free(o->tmp);
	o->path = o->tmp = NULL;
	return rc;
}

int dg_mkdir_p(const char *path) { return dg_mkdir_track(path, NULL); }

char *dg_tmp_name(const char *path)
{
	char *dir = dg_strdup(path), *slash = strrchr(dir, '/');
	const char *name = slash ? slash + 1 : dir;
	int dlen = (int)(name - dir); /* the folder part of path, its final '/' included */
	/* a name too long for ".tmp.PID" (255 bytes in all, NAME_MAX): its first 200 bytes, '~' and a
	 * hash of the whole name, so that a legal output name always has a temporary name */
	char base[256];
	size_t nl = strlen(name);
	if (nl + 5 + 20 > 255) {
		uint64_t h = dg_fnv_str(DG_FNV_OFFSET, name);
		snprintf(base, sizeof base, "%.200s~%016llx", name, (unsigned long long)h);
	} else {
		snprintf(base, sizeof base, "%s", name);
	}
	size_t n = (size_t)dlen + strlen(base) + 32;
	char *s = dg_malloc(n);
	snprintf(s, n, "%.*s%s.tmp.%ld", dlen, path, base, (long)getpid());
	dg_tmp_register(s);
	/* the temporaries of this same name left by dead processes */
	if (slash)
		slash == dir ? (void)(slash[1] = 0) : (void)(*slash = 0);
	name = base;
	nl = strlen(name);
	char *prefix = dg_malloc(nl + 6);
	snprintf(prefix, nl + 6, "%s.tmp.", name);
	if (*name)
		dg_tmp_clean_stale(slash ? dir : ".", prefix);
	free(prefix);
	free(dir);
	return s;
}

int dg_out_close_errno(FILE *f)
{
	int bad = 0;
	if (ferror(f)) {
		int e = errno;
		clearerr(f);
		bad = fflush(f) ? errno : e;
		if (!bad || bad == EINTR)
			bad = EIO;
	} else if (fflush(f)) {
		bad = errno ? errno : EIO;
	}
	if (fclose(f) && !bad)
		bad = errno ? errno : EIO;
	return bad;
}

int dg_out_open(dg_out *o, const char *path)
{
	o->f = NULL;
	o->path = o->tmp = NULL;
	if (dg_output_check(path))
		return -1;
	o->path = dg_strdup(path);
	o->tmp = dg_tmp_name(path);
	o->f = fopen(o->tmp, "w");
	if (!o->f) {
		int e = errno;
		dg_tmp_release(o->tmp);
		free(o->path);
		free(o->tmp);
		o->path = o->tmp = NULL;
		return dg_error("cannot write %s: %s", path, strerror(e));
	}
	return 0;
}

int dg_out_open_in(dg_out *o, const char *dir, const char *name)
{
	char *path = dg_path_join(dir, name);
	int rc = dg_out_open(o, path);
	free(path);
	return rc;
}

static void out_free(dg_out *o)
{
	dg_tmp_release(o->tmp);
	free(o->path);
	free(o->tmp);
	o->f = NULL;
	o->path = o->tmp = NULL;
}

int dg_out_commit(dg_out *o)
{
	if (dg_out_deferred())
		return dg_out_finish(o, dg_out_deferred());
	int bad = dg_out_close_errno(o->f);
	o->f = NULL;
	if (bad) {
		remove(o->tmp);
		dg_error("cannot write %s: %s", o->path, strerror(bad));
		out_free(o);
		return -1;
	}
	if (rename(o->tmp, o->path)) {
		int e = errno;
		remove(o->tmp);
		dg_error("cannot rename %s to %s: %s", o->tmp, o->path, strerror(e));
		out_free(o);
		return -1;
	}
	out_free(o);
	return 0;
}

void dg_out_abort(dg_out *o)
{
	if (o->f) {
		fclose(o->f);
		remove(o->tmp);
	}
	out_free(o);
}
