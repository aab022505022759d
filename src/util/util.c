/*
 * util.c: error reporting, checked allocation, time, paths and parsing.
 * See util.h for the contracts.
 */
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/git_commit.h" /* DG_GIT_COMMIT, made at build time (src/util/git_commit.cmake) */

static bool progress_open; /* a redrawn progress line is on the terminal without its newline */

static void vreport(const char *kind, const char *fmt, va_list ap)
{
	if (progress_open)
		fputc('\n', stderr);
	progress_open = false;
	char small[1024], *msg = small;
	va_list again;
	va_copy(again, ap);
	int n = vsnprintf(small, sizeof small, fmt, ap);
	if (n >= (int)sizeof small && (msg = malloc((size_t)n + 1)))
		vsnprintf(msg, (size_t)n + 1, fmt, again);
	va_end(again);
	fprintf(stderr, "dsgap: %s: ", kind);
	/* one line whatever a name read from a file or the command line holds: control characters
	 * shown escaped */
	for (const unsigned char *c = (const unsigned char *)(msg ? msg : small); *c; c++)
		if (*c == '\n')
			fputs("\\n", stderr);
		else if (*c == '\t')
			fputs("\\t", stderr);
		else if (*c < 0x20 || *c == 0x7f)
			fprintf(stderr, "\\x%02x", *c);
		else
			fputc(*c, stderr);
	fputc('\n', stderr);
	if (msg != small)
		free(msg);
}

int dg_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vreport("error", fmt, ap);
	va_end(ap);
	return -1;
}

void dg_warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vreport("warning", fmt, ap);
	va_end(ap);
}

_Thread_local dg_trap *dg_trap_cur;


static void (*fatal_cleanup)(void);

void dg_fatal_cleanup(void (*cleanup)(void)) { fatal_cleanup = cleanup; }

void dg_die(const char *fmt, ...)
{
	va_list ap;
	dg_trap *t = dg_trap_cur;
	if (t) {
		dg_trap_cur = NULL;
		t->bytes = 0;
		va_start(ap, fmt);
		vsnprintf(t->msg, sizeof t->msg, fmt, ap);
		va_end(ap);
		longjmp(t->jb, 2);
	}
	va_start(ap, fmt);
	vreport("fatal", fmt, ap);
	va_end(ap);
	if (fatal_cleanup)
		fatal_cleanup();
	exit(1);
}

void dg_bug_(const char *file, int line, const char *func, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "dsgap: BUG: %s:%d: %s: ", file, line, func);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

static char oom_input[512]; /* the input last read (dg_oom_input), "" before any */

void dg_oom_input(const char *path)
{
	snprintf(oom_input, sizeof oom_input, "%s", path);
}


/* out of memory for n bytes (what: "%zu bytes" or "%zu x %zu bytes"): to the thread's trap, else
 * fatal, naming the size and the input last read (dg_oom_input) */
static _Noreturn void out_of_memory(size_t n, double bytes, const char *what)
{
	dg_trap *t = dg_trap_cur;
	if (t) {
		dg_trap_cur = NULL; /* one jump; the trap's owner sets it again */
		t->bytes = n;
		snprintf(t->msg, sizeof t->msg, "out of memory (%s)", what);
		longjmp(t->jb, 1);
	}
	char b[32];
	dg_die("out of memory: %s wanted%s%s", dg_bytes_str(bytes, b, sizeof b), *oom_input ? " while reading " : "",
	       oom_input);
}

_Noreturn void dg_out_of_memory(size_t n, const char *what)
{
	if (dg_trap_cur)
		out_of_memory(n, (double)n, what);
	char b[32];
	dg_die("out of memory: %s wanted for %s%s%s", dg_bytes_str((double)n, b, sizeof b), what,
	       *oom_input ? " while reading " : "", oom_input);
}

void *dg_malloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p) {
		char what[64];
		snprintf(what, sizeof what, "%zu bytes", n);
		out_of_memory(n, (double)n, what);
	}
	return p;
}

void *dg_calloc(size_t count, size_t size)
{
	void *p = calloc(count ? count : 1, size ? size : 1);
	if (!p) {
		char what[80];
		snprintf(what, sizeof what, "%zu x %zu bytes", count, size);
		out_of_memory(count > 0 && size > SIZE_MAX / count ? SIZE_MAX : count * size, (double)count * size, what);
	}
	return p;
}

void *dg_realloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p) {
		char what[64];
		snprintf(what, sizeof what, "%zu bytes", n);
		out_of_memory(n, (double)n, what);
	}
	return p;
}

char *dg_strdup(const char *s)
{
	size_t n = strlen(s) + 1;
	return memcpy(dg_malloc(n), s, n);
}

void dg_poison(float *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = NAN;
}

float *dg_alloc_poisoned(size_t n)
{
	float *p = dg_malloc(n * sizeof(float));
	dg_poison(p, n);
	return p;
}

double dg_cpu_seconds(double flops)
{
	return flops / (DG_CPU_FLOPS_PER_THREAD * omp_get_max_threads());
}

const char *dg_duration_str(double s, char *buf, size_t size)
{
	if (s < 120)
		snprintf(buf, size, s < 10 ? "%.2g s" : "%.0f s", s);
	else if (s < 7200)
		snprintf(buf, size, "%.0f min", s / 60);
	else if (s < 3 * 86400)
		snprintf(buf, size, "%.0f h", s / 3600);
	else
		snprintf(buf, size, "%.0f days", s / 86400);
	return buf;
}

int dg_work_bound(const char *cmd, const char *what, double seconds, bool announce, const char *hint)
{
	const char *env = getenv("DSGAP_MAX_HOURS");
	double hours = env && *env ? atof(env) : 24;
	char est[32], lim[32];
	dg_duration_str(seconds, est, sizeof est);
	if (hours > 0 && seconds > hours * 3600)
		return dg_error("%s: %s: roughly %s on %d CPU threads, past the limit of %s: %s (or DSGAP_MAX_HOURS=H "
				"to allow it)", cmd, what, est, omp_get_max_threads(),
				dg_duration_str(hours * 3600, lim, sizeof lim), hint);
	if (announce || seconds > 3600)
		fprintf(stderr, "%s: %s: roughly %s on %d CPU threads\n", cmd, what, est, omp_get_max_threads());
	return 0;
}

const char *dg_bytes_str(double bytes, char *buf, size_t size)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	int u = 0;
	while (u < 6 && !(fabs(bytes) < 1024))
		bytes /= 1024, u++;
	snprintf(buf, size, u ? "%.3g %s" : "%.0f %s", bytes, unit[u]);
	return buf;
}

const char *dg_signal_what(int sig, char *buf, size_t size)
{
	static const struct {
		int sig;
		const char *name, *what;
	} known[] = {
		{ SIGXFSZ, "SIGXFSZ", "file size limit exceeded" }, { SIGXCPU, "SIGXCPU", "CPU time limit exceeded" },
		{ SIGKILL, "SIGKILL", "killed (out of memory, or by a user)" }, { SIGSEGV, "SIGSEGV", "segmentation fault" },
		{ SIGBUS, "SIGBUS", "bus error (a mapped file shrank?)" }, { SIGABRT, "SIGABRT", "aborted" },
		{ SIGTERM, "SIGTERM", "terminated" }, { SIGINT, "SIGINT", "interrupted" }, { SIGHUP, "SIGHUP", "hangup" },
		{ SIGPIPE, "SIGPIPE", "broken pipe" }, { SIGFPE, "SIGFPE", "arithmetic exception" },
	};
	for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
		if (known[i].sig == sig) {
			snprintf(buf, size, "%s, %s", known[i].name, known[i].what);
			return buf;
		}
	snprintf(buf, size, "signal %d", sig);
	return buf;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

int dg_ints_repeat(const int *v, int n, int *first, int *second)
{
	if (n < 2)
		return 0;
	/* (value, position) in one key, sorted: equal values lie together, positions ascending */
	uint64_t *key = dg_malloc((size_t)n * sizeof *key);
	for (int i = 0; i < n; i++)
		key[i] = (uint64_t)((uint32_t)v[i] ^ 0x80000000u) << 32 | (uint32_t)i;
	qsort(key, (size_t)n, sizeof *key, cmp_u64);
	int found = 0;
	for (int i = 1; i < n; i++)
		if (key[i] >> 32 == key[i - 1] >> 32) { /* key[i - 1]: the value's first position */
			if (!found || (int)(uint32_t)key[i] < *second) {
				*first = (int)(uint32_t)key[i - 1];
				*second = (int)(uint32_t)key[i];
				found = 1;
			}
			while (i + 1 < n && key[i + 1] >> 32 == key[i] >> 32) /* the rest of the group is later */
				i++;
		}
	free(key);
	return found;
}

double dg_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double dg_median(double *x, int n)
{
	qsort(x, (size_t)n, sizeof *x, cmp_double);
	return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2.0;
}

void dg_progress_show(dg_progress *p, bool final, const char *fmt, ...)
{
	bool tty = isatty(2);
	double now = dg_now();
	if (!final && p->last > 0 && now - p->last < (tty ? 0.2 : 10))
		return;
	p->last = now;
	if (tty)
		fputc('\r', stderr);
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	progress_open = tty && !final;
	if (!progress_open)
		fputc('\n', stderr);
	fflush(stderr);
}

void dg_utc_now(char *buf, size_t size)
{
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

const char *dg_cpu_name(void)
{
	static char name[160];
	if (name[0])
		return name;
	char model[96] = "unknown cpu";
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (f) {
		char line[256];
		while (fgets(line, sizeof line, f)) {
			char *c = strchr(line, ':');
			if (strncmp(line, "model name", 10) == 0 && c) {
				snprintf(model, sizeof model, "%s", c + 2);
				model[strcspn(model, "\n")] = 0;
				break;
			}
		}
		fclose(f);
	}
	snprintf(name, sizeof name, "cpu: %s (%ld threads)", model, sysconf(_SC_NPROCESSORS_ONLN));
	return name;
}

const char *dg_git_commit(void) { return DG_GIT_COMMIT; }

char *dg_path_join(const char *dir, const char *name)
{
	size_t n = strlen(dir) + strlen(name) + 2;
	char *s = dg_malloc(n);
	snprintf(s, n, "%s/%s", dir, name);
	return s;
}

int dg_split(char *s, char sep, char **items, int max)
{
	int n = 0;
	if (!*s)
		return 0;
	for (;;) {
		if (n == max)
			return -1;
		items[n++] = s;
		char *c = strchr(s, sep);
		if (!c)
			break;
		*c = 0;
		s = c + 1;
	}
	return n;
}

int dg_opt_list_check(const char *cmd, const char *opt, const char *s, char *const *items, int n)
{
	for (int i = 0; i < n; i++) {
		if (!items[i][0])
			return dg_error("%s: --%s '%s': item %d is empty (a list is ITEM,ITEM,...)", cmd, opt, s, i + 1);
		for (int j = 0; j < i; j++)
			if (!strcmp(items[i], items[j]))
				return dg_error("%s: --%s '%s': '%s' is listed twice (items %d and %d)", cmd, opt, s,
						items[i], j + 1, i + 1);
	}
	return 0;
}

int dg_parse_doubles(const char *s, double *out, int max)
{
	char *copy = dg_strdup(s), *items[256];
	int n = dg_split(copy, ',', items, max < 256 ? max : 256);
	for (int i = 0; i < n; i++) {
		char *end;
		errno = 0;
		out[i] = strtod(items[i], &end);
		if (end == items[i] || *end || errno || !isfinite(out[i]))
			n = -1;
	}
	free(copy);
	return n;
}

int dg_parse_ints(const char *s, int *out, int max)
{
	char *copy = dg_strdup(s), *items[256];
	int n = dg_split(copy, ',', items, 256), count = 0;
	for (int i = 0; i < n && count >= 0; i++) {
		char *end;
		long a = strtol(items[i], &end, 10), b = a;
		if (end == items[i]) {
			count = -1;
			break;
		}
		if (*end == '-') {
			char *e2;
			b = strtol(end + 1, &e2, 10);
			if (e2 == end + 1)
				end = e2 - 1; /* leave *end != 0: malformed */
			else
				end = e2;
		}
		if (*end || b < a || a < -1000000000 || b > 1000000000) {
			count = -1;
			break;
		}
		for (long v = a; v <= b; v++) {
			if (count == max) {
				count = -1;
				break;
			}
			out[count++] = (int)v;
		}
	}
	free(copy);
	return n < 0 ? -1 : count;
}

int dg_opt_long(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (end == s || *end || errno || v < lo || v > hi)
		return dg_error("%s: bad --%s '%s' (an integer from %ld to %ld)", cmd, opt, s, lo, hi);
	*out = v;
	return 0;
}

int dg_opt_int(const char *cmd, const char *opt, const char *s, int lo, int hi, int *out)
{
	long v = 0;
	if (dg_opt_long(cmd, opt, s, lo, hi, &v))
		return -1;
	*out = (int)v;
	return 0;
}

int dg_opt_seed(const char *cmd, const char *opt, const char *s, unsigned long *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (end == s || *end || errno || *s == '-')
		return dg_error("%s: bad --%s '%s' (a non-negative integer)", cmd, opt, s);
	*out = v;
	return 0;
}

int dg_opt_onoff(const char *cmd, const char *opt, const char *s, bool *out)
{
	if (strcmp(s, "on") && strcmp(s, "off"))
		return dg_error("%s: bad --%s '%s' (on or off)", cmd, opt, s);
	*out = !strcmp(s, "on");
	return 0;
}

int dg_control_at(const char *s)
{
	for (const unsigned char *c = (const unsigned char *)s; *c; c++)
		if (*c < 0x20 || *c == 0x7f)
			return (int)(c - (const unsigned char *)s);
	return -1;
}

int dg_opt_text(const char *cmd, const char *opt, const char *s)
{
	int at = dg_control_at(s);
	if (at >= 0)
		return dg_error("%s: bad --%s (a control character at byte %d: one line of text)", cmd, opt, at);
	return 0;
}

int dg_parse_fxhxw(const char *s, long max, int out[3])
{
	const char *p = s;
	long prod = 1;
	for (int i = 0; i < 3; i++) {
		char *end;
		errno = 0;
		long v = strtol(p, &end, 10);
		if (end == p || errno || v < 1 || v > max || *end != (i < 2 ? 'x' : 0) || (prod *= v) > max)
			return -1;
		out[i] = (int)v;
		p = end + 1;
	}
	return 0;
}

int dg_opt_grid(const char *cmd, const char *opt, const char *s, int grid[3])
{
	if (dg_parse_fxhxw(s, DG_GRID_MAX, grid))
		return dg_error("%s: bad --%s '%s' (FxHxW of at most %ld tokens, e.g. 4x16x16)", cmd, opt, s,
				(long)DG_GRID_MAX);
	return 0;
}

int dg_opt_bad(const char *cmd, int c, char **argv, const struct option *longopts)
{
	/* getopt_long has moved past the option's token, but for a short option's letter that is not
	 * the last of its group; its optopt is 0 for an unknown or ambiguous long option, the
	 * option's value for a long option's missing or unwanted value, the letter for a short one */
	const char *tok = argv[optind - 1];
	int len = (int)strcspn(tok, "="), prefixes = 0;
	bool is_long = !strncmp(tok, "--", 2) && len > 2, named = optopt == 0;
	for (const struct option *o = longopts; is_long && o->name; o++)
		if (!strncmp(o->name, tok + 2, (size_t)len - 2)) {
			prefixes++;
			named |= o->val == optopt;
		}
	if (!is_long || !named) /* a short option ("--x" before it is another option's token) */
		return dg_error(c == ':' ? "%s: option '-%c' needs a value (dsgap %s --help)"
					 : "%s: unknown option '-%c' (dsgap %s --help)", cmd, optopt, cmd), 2;
	const char *what = c == ':' ? "needs a value" : optopt ? "takes no value" : prefixes ? "is ambiguous" : NULL;
	if (what)
		return dg_error("%s: option '%.*s' %s (dsgap %s --help)", cmd, len, tok, what, cmd), 2;
	return dg_error("%s: unknown option '%.*s' (dsgap %s --help)", cmd, len, tok, cmd), 2;
}

char *dg_join_args(int argc, char **argv)
{
	dg_sbuf b = { 0 };
	dg_sb_printf(&b, "dsgap");
	for (int i = 0; i < argc; i++) {
		char *a = dg_path_shown(argv[i]);
		dg_sb_printf(&b, " %s", a);
		free(a);
	}
	return b.buf;
}

char *dg_path_shown(const char *s)
{
	char cwd[4096];
	size_t nc = getcwd(cwd, sizeof cwd) ? strlen(cwd) : 0;
	while (nc > 0 && cwd[nc - 1] == '/') /* "/" itself: every path lies under it */
		nc--;
	dg_sbuf b = { 0 };
	dg_sb_add(&b, "", 0);
	for (size_t i = 0; s[i];) {
		bool starts = s[i] == '/' && (i == 0 || strchr(" =,:", s[i - 1]));
		if (!starts) {
			dg_sb_add(&b, s + i, 1);
			i++;
			continue;
		}
		size_t n = strcspn(s + i, " ,:"), e = n;
		const char *p = s + i;
		while (e > 1 && p[e - 1] == '/')
			e--;
		if (e >= nc && !strncmp(p, cwd, nc) && (e == nc || p[nc] == '/')) {
			size_t k = nc + (e > nc); /* past the '/' after the working directory */
			if (k >= e)
				dg_sb_add(&b, ".", 1);
			else
				dg_sb_add(&b, p + k, e - k);
		} else {
			size_t k = e;
			while (k > 0 && p[k - 1] != '/')
				k--;
			if (k == e) /* "/" alone */
				dg_sb_add(&b, ".", 1);
			else
				dg_sb_add(&b, p + k, e - k);
		}
		i += n;
	}
	return b.buf;
}

int dg_open_input(const char *path)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC), e = 0;
	struct stat st;
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || (S_ISREG(st.st_mode) && fcntl(fd, F_SETFL, 0))) /* blocking reads again */
		e = errno;
	else if (!S_ISREG(st.st_mode))
		e = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
	if (e) {
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

const char *dg_strerror(int err)
{
	return err == EINVAL ? "not a regular file" : strerror(err);
}

char *dg_read_all(const char *path, size_t max, size_t *len)
{
	int fd = dg_open_input(path);
	FILE *f = fd < 0 ? NULL : fdopen(fd, "rb");
	if (!f) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	size_t n = 0, cap = 65536;
	char *s = dg_malloc(cap);
	errno = 0;
	for (;;) {
		n += fread(s + n, 1, cap - n - 1, f);
		if (n < cap - 1 || n > max)
			break;
		s = dg_realloc(s, cap *= 2);
	}
	int err = ferror(f) ? (errno ? errno : EIO) : n > max ? EFBIG : 0;
	fclose(f);
	if (err) {
		free(s);
		errno = err;
		return NULL;
	}
	s[n] = 0;
	if (len)
		*len = n;
	return s;
}

void dg_sb_add(dg_sbuf *b, const char *s, size_t n)
{
	if (b->n + n + 1 > b->cap) {
		b->cap = 2 * (b->n + n + 1) + 4096;
		b->buf = dg_realloc(b->buf, b->cap);
	}
	memcpy(b->buf + b->n, s, n);
	b->n += n;
	b->buf[b->n] = 0;
}

void dg_sb_printf(dg_sbuf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (b->n + (size_t)n + 1 > b->cap) {
		b->cap = 2 * (b->n + n + 1) + 4096;
		b->buf = dg_realloc(b->buf, b->cap);
	}
	va_start(ap, fmt);
	vsnprintf(b->buf + b->n, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->n += (size_t)n;
}

#define FNV_PRIME 1099511628211ull
uint64_t dg_fnv_str(uint64_t h, const char *s)
{
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * FNV_PRIME;
	return h;
}

uint64_t dg_fnv_words(uint64_t h, const void *x, size_t n)
{
	const uint32_t *w = x;
	for (size_t i = 0; i < n; i++)
		h = (h ^ w[i]) * FNV_PRIME;
	return h;
}
