/*
 * util.h: the small pieces every file of dsgap uses: error reporting (git style: lowercase,
 * problem first, one line), checked allocation, bf16 conversion, monotonic time, paths and
 * parsing. Files that must never be left partial (atomic output, temporaries, locks): files.h,
 * which builds on this header (never the other way round).
 */
#ifndef DG_UTIL_H
#define DG_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define DG_VERSION "0.1.0"

#define DG_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* Print "dsgap: error: <message>" on one line to stderr and return -1 (for `return dg_error(..)`).
 * Every report (error, warning, fatal) is one line: a control character in it (a newline, an escape
 * of a name read from a file) is shown escaped, \n, \t or \xNN. */
int dg_error(const char *fmt, ...) DG_PRINTF(1, 2);
/* Print "dsgap: warning: <message>" to stderr and continue. */
void dg_warn(const char *fmt, ...) DG_PRINTF(1, 2);
/* Print "dsgap: fatal: <message>" and exit(1): for conditions a caller cannot recover from. */
_Noreturn void dg_die(const char *fmt, ...) DG_PRINTF(1, 2);
/* Programmer error: prints file:line and the message, then aborts. */
#define DG_BUG(...) dg_bug_(__FILE__, __LINE__, __func__, __VA_ARGS__)
_Noreturn void dg_bug_(const char *file, int line, const char *func, const char *fmt, ...)
	DG_PRINTF(4, 5);
#define DG_ASSERT(c) do { if (!(c)) DG_BUG("assertion failed: %s", #c); } while (0)

/*
 * A trap for what would end the program (libdsgap: the caller's process must survive, include/dsgap.h):
 * while the calling thread has one set (dg_trap_cur), an allocation failure of dg_malloc, dg_calloc or
 * dg_realloc, and dg_die, on that thread write their message (and bytes: the failed allocation's size,
 * 0 for another fatal condition) into it and longjmp to jb (setjmp's value 1: out of memory, 2: another
 * fatal condition) instead of exiting. What the interrupted code had allocated before is not freed
 * (its owner may free it). Other threads (OpenMP workers) are not covered: a caller checks their
 * memory up front (src/api/api.c).
 */
#include <setjmp.h>
typedef struct {
	jmp_buf jb;
	size_t bytes;
	char msg[256];
} dg_trap;
extern _Thread_local dg_trap *dg_trap_cur;

/* What dg_die runs before it exits (files.c: the registered temporaries and the folders the command
 * made, so that a fatal error leaves no partial output); NULL for nothing. */
void dg_fatal_cleanup(void (*cleanup)(void));

/* Allocation that dies (out of memory) instead of returning NULL (or longjmps to the thread's trap,
 * above). Sizes are checked for overflow. The report names the size asked for and the input last read
 * ("fatal: out of memory: 12.3 GiB wanted while reading trace.h5"): dg_oom_input records it (files.h's
 * dg_input_add calls it). */
void dg_oom_input(const char *path); /* the path, or "PATH (its size)" */
void *dg_malloc(size_t n);
/* The same report (or trap) for an allocation made elsewhere that failed: n bytes, what wanted them. */
_Noreturn void dg_out_of_memory(size_t n, const char *what);
void *dg_calloc(size_t count, size_t size);
void *dg_realloc(void *p, size_t n);
char *dg_strdup(const char *s);
/* n floats, each set to NaN: the poison that every output buffer starts with */
float *dg_alloc_poisoned(size_t n);
/* p[0..n) = NaN: a buffer whose contents are no longer valid */
void dg_poison(float *p, size_t n);

/* bfloat16 <-> float32, round to nearest even (NaN stays NaN). */
static inline float dg_bf16_to_f32(uint16_t h)
{
	union { uint32_t u; float f; } x = { .u = (uint32_t)h << 16 };
	return x.f;
}
static inline uint16_t dg_f32_to_bf16(float f)
{
	union { float f; uint32_t u; } x = { .f = f };
	if ((x.u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((x.u >> 16) | 0x40);
	x.u += 0x7fffu + ((x.u >> 16) & 1u);
	return (uint16_t)(x.u >> 16);
}
static inline float dg_round_bf16(float f) { return dg_bf16_to_f32(dg_f32_to_bf16(f)); }

/* 64-bit FNV-1a continuing from h (DG_FNV_OFFSET to start): dg_fnv_str over the bytes of s,
 * dg_fnv_words over n 32-bit words (their bit patterns: the checksum of n floats). */
#define DG_FNV_OFFSET 1469598103934665603ull
uint64_t dg_fnv_str(uint64_t h, const char *s);
uint64_t dg_fnv_words(uint64_t h, const void *x, size_t n);

/* A size in bytes as people read it, three significant figures: "512 B", "12.3 KiB", "4.56 MiB",
 * "1.23 GiB", "2.5 TiB" (never "0.0 GB" for a small one). Returns buf. */
const char *dg_bytes_str(double bytes, char *buf, size_t size);
/* A signal by name and meaning, "SIGXFSZ, file size limit exceeded" (unknown: "signal N"), into buf:
 * how a child process (gnuplot, a worker) that a signal ended is reported. Returns buf. */
const char *dg_signal_what(int sig, char *buf, size_t size);
/* Whether v[0..n) holds a value twice: 0 if not, else 1 with the first such value's two positions
 * (*first < *second; the pair whose later position is smallest). O(n log n): an index vector of a
 * file's header may declare millions of entries. */
int dg_ints_repeat(const int *v, int n, int *first, int *second);

/*
 * Work bounded before it starts: a command estimates its run from its inputs' headers (tokens,
 * units, grid) before any work. dg_cpu_seconds: the time of FLOPS floating-point operations on this
 * process's OpenMP threads, roughly (DG_CPU_FLOPS_PER_THREAD each: SGEMM with a softmax around it).
 * dg_work_bound: past the limit (24 h; DSGAP_MAX_HOURS=H in the environment sets another) it refuses
 * with one line "CMD: WHAT: roughly T on N CPU threads, past the limit of L: HINT (or
 * DSGAP_MAX_HOURS=H)" and returns -1; else, when announce is set or the estimate passes an hour, it
 * prints "CMD: WHAT: roughly T on N CPU threads" on stderr and returns 0. WHAT: the size ("60000000
 * units of 256 tokens, 8.6e+15 flop"); HINT: the option that helps.
 */
#define DG_CPU_FLOPS_PER_THREAD 2e10
double dg_cpu_seconds(double flops);
int dg_work_bound(const char *cmd, const char *what, double seconds, bool announce, const char *hint);
/* A duration as people read it: "45 s", "12 min", "5 h", "4 days". Returns buf. */
const char *dg_duration_str(double s, char *buf, size_t size);

/* Seconds since an arbitrary start (CLOCK_MONOTONIC). */
double dg_now(void);
/* The median of x[0..n) (n >= 1; the mean of the middle two for even n), sorting x in place: the
 * one median of dsgap's timings (bench, callspeed). */
double dg_median(double *x, int n);
/* A task's progress line on stderr (p zeroed at the start). On a terminal dg_progress_show redraws
 * the line fmt makes ("\r"), at most every 0.2 s; elsewhere (a log) it writes whole lines, at most
 * one every 10 s. The first call and a final one always print; final ends the line. An error,
 * warning or fatal report while a redrawn line is open starts a line of its own, so that it stays
 * one line. */
typedef struct {
	double last; /* dg_now of the last line printed; 0: none yet */
} dg_progress;
void dg_progress_show(dg_progress *p, bool final, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* UTC time as "2026-12-02T14:05:27Z" into buf (at least 32 bytes). */
void dg_utc_now(char *buf, size_t size);
/* Short description of the machine, e.g. "cpu: Intel Xeon (2 threads)". Static storage. */
const char *dg_cpu_name(void);
/* git commit the binary was built from (compiled in). */
const char *dg_git_commit(void);

/* "dir/name" in a new string. */
char *dg_path_join(const char *dir, const char *name);

/* The command line as "dsgap ARGV[0] ARGV[1] ...", each argument through dg_path_shown, a new
 * string (for the record of a run). */
char *dg_join_args(int argc, char **argv);
/* S with every absolute path in it (one starting S or following a space, '=', ',' or ':'; it ends at
 * the next space, ',' or ':') shown as recorded results show paths: relative to the working
 * directory when it lies under it ("." for the directory itself), else its last name. Recorded
 * results name no directory of the machine that made them (issue 49). New string. */
char *dg_path_shown(const char *s);

/* The whole file as a NUL-terminated string (new), its length into *len (if not NULL); or NULL
 * with errno set: fopen's error, a read error (EIO, or EISDIR for a directory), or EFBIG (more
 * than max bytes). Reports nothing. */
char *dg_read_all(const char *path, size_t max, size_t *len);
/* open(2) of an input for reading that never blocks: a FIFO, socket or device (which would wait for a
 * writer) is refused before any read with errno EINVAL, a directory with EISDIR; else open's errno.
 * dg_strerror says EINVAL as "not a regular file". dg_read_all, the tensor and safetensors readers
 * open their inputs through it. */
int dg_open_input(const char *path);
const char *dg_strerror(int err);

/* Split a comma-separated list in place into at most max items; returns the count or -1. */
int dg_split(char *s, char sep, char **items, int max);
/* The items of list option --OPT S (split by dg_split): -1 with one line "CMD: --OPT 'S': item I is
 * empty" or "...: 'X' is listed twice (items I and J)" (items compared as text); else 0. */
int dg_opt_list_check(const char *cmd, const char *opt, const char *s, char *const *items, int n);
/* Parse a list "0.1,0.15" / "1,5,9" / "0-3" (ints only: ranges a-b inclusive). Return count or -1. */
int dg_parse_doubles(const char *s, double *out, int max);
int dg_parse_ints(const char *s, int *out, int max);

/*
 * Option values (getopt_long arguments): an integer in [lo, hi], an unsigned seed, a grid FxHxW,
 * on|off, a text of one line (no control character: it goes into titles, labels and comments of
 * generated scripts). On failure each reports "CMD: bad --OPT 'S' (what was expected)" and returns -1.
 */
int dg_opt_long(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out);
int dg_opt_int(const char *cmd, const char *opt, const char *s, int lo, int hi, int *out);
int dg_opt_seed(const char *cmd, const char *opt, const char *s, unsigned long *out);
int dg_opt_grid(const char *cmd, const char *opt, const char *s, int grid[3]);
int dg_opt_onoff(const char *cmd, const char *opt, const char *s, bool *out);
int dg_opt_text(const char *cmd, const char *opt, const char *s);
/* The byte index of s's first control character (< 0x20 or 0x7f), -1 if none: a name read from a
 * file (a policy in a CSV) goes into figures' scripts and tables as one line of text. */
int dg_control_at(const char *s);
/* FxHxW: three positive integers whose product is at most max (sizes stay inside int arithmetic);
 * -1 (no message) when s is not that. dg_opt_grid: a token grid of at most DG_GRID_MAX. */
int dg_parse_fxhxw(const char *s, long max, int out[3]);
#define DG_GRID_MAX (1L << 24)
/*
 * What getopt_long rejected, in one line, for every command's option loop: with opterr = 0 and
 * an optstring that starts with ':', getopt_long prints nothing and returns '?' (an unknown or
 * ambiguous option, or a value given to a long option that takes none) or ':' (a value missing).
 * Pass that C, the argv and the long options it parsed (optind and optopt as it left them).
 * Reports "CMD: unknown option '--x' (dsgap CMD --help)" or the like, naming the option as
 * given, and returns 2: the exit status of a usage error in every command.
 */
struct option;
int dg_opt_bad(const char *cmd, int c, char **argv, const struct option *longopts);

/* A growing string: dg_sbuf b = { 0 }; dg_sb_printf(&b, ...); then b.buf (NULL while nothing was
 * added), free(b.buf). */
typedef struct {
	char *buf;
	size_t n, cap;
} dg_sbuf;
void dg_sb_add(dg_sbuf *b, const char *s, size_t n);
void dg_sb_printf(dg_sbuf *b, const char *fmt, ...) DG_PRINTF(2, 3);

#endif
