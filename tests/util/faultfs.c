/*
 * faultfs.c: an LD_PRELOAD interposer for fault-injection tests (SQLite style): the Nth write-level
 * call on a file fails with ENOSPC (or FAULTFS_ERRNO), and, like a full disk, every later data write
 * fails too. Counted calls: write, pwrite, pwrite64, writev, pwritev, fsync, fdatasync on regular
 * files, rename, mkdir; stdio streams opened for writing go through write() here (fopen returns a
 * fopencookie stream), because glibc's stdio calls its internal write, which no interposer sees.
 *
 *   FAULTFS_N=N        fail the Nth counted call (and every later write); 0 or unset: never
 *   FAULTFS_DIR=D      count only calls on paths under D (default: every regular file)
 *   FAULTFS_ERRNO=E    errno to fail with (default ENOSPC = 28)
 *   FAULTFS_COUNT=F    at exit, append "PID COUNT" (the calls counted) to F
 * Child processes (gnuplot, workers after exec) do not inherit the interposer: it clears LD_PRELOAD.
 * Forked children (no exec) keep counting on their own copy of the counter.
 * Build: a shared library (tests/CMakeLists.txt); used by tests/util/faults.sh.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static long fail_at, count;
static int fail_errno = ENOSPC, failing;
static char dir[PATH_MAX];
static size_t dir_len;
static const char *count_file;

static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static ssize_t (*real_pwritev)(int, const struct iovec *, int, off_t);
static int (*real_fsync)(int), (*real_fdatasync)(int);
static int (*real_rename)(const char *, const char *);
static int (*real_mkdir)(const char *, mode_t);
static FILE *(*real_fopen)(const char *, const char *);
static FILE *(*real_fopen64)(const char *, const char *);

static void report(void)
{
	if (!count_file)
		return;
	FILE *f = real_fopen(count_file, "a");
	if (f) {
		fprintf(f, "%ld %ld\n", (long)getpid(), count);
		fclose(f);
	}
}

__attribute__((constructor)) static void init(void)
{
	real_write = dlsym(RTLD_NEXT, "write");
	real_pwrite = dlsym(RTLD_NEXT, "pwrite");
	real_pwrite64 = dlsym(RTLD_NEXT, "pwrite64");
	real_writev = dlsym(RTLD_NEXT, "writev");
	real_pwritev = dlsym(RTLD_NEXT, "pwritev");
	real_fsync = dlsym(RTLD_NEXT, "fsync");
	real_fdatasync = dlsym(RTLD_NEXT, "fdatasync");
	real_rename = dlsym(RTLD_NEXT, "rename");
	real_mkdir = dlsym(RTLD_NEXT, "mkdir");
	real_fopen = dlsym(RTLD_NEXT, "fopen");
	real_fopen64 = dlsym(RTLD_NEXT, "fopen64");
	const char *s = getenv("FAULTFS_N");
	fail_at = s ? atol(s) : 0;
	if ((s = getenv("FAULTFS_ERRNO")))
		fail_errno = atoi(s);
	if ((s = getenv("FAULTFS_DIR")) && realpath(s, dir))
		dir_len = strlen(dir);
	count_file = getenv("FAULTFS_COUNT");
	unsetenv("LD_PRELOAD");
	atexit(report);
}

static int under_dir(const char *path)
{
	if (!dir_len)
		return 1;
	return strncmp(path, dir, dir_len) == 0 && (path[dir_len] == '/' || path[dir_len] == 0);
}

static int path_counted(const char *path)
{
	char buf[PATH_MAX];
	if (!dir_len)
		return 1;
	if (path[0] == '/')
		return under_dir(path);
	if (!getcwd(buf, sizeof buf - strlen(path) - 2))
		return 0;
	strcat(buf, "/");
	strcat(buf, path);
	return under_dir(buf);
}

static int fd_counted(int fd)
{
	struct stat st;
	if (fd < 3 || fstat(fd, &st) || !S_ISREG(st.st_mode))
		return 0;
	if (!dir_len)
		return 1;
	char link[64], path[PATH_MAX];
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, path, sizeof path - 1);
	if (n < 0)
		return 0;
	path[n] = 0;
	return under_dir(path);
}

/* 1: this call fails (errno set) */
static int tick(int data)
{
	if (failing && data) {
		errno = fail_errno;
		return 1;
	}
	count++;
	if (fail_at > 0 && count == fail_at) {
		failing = 1;
		errno = fail_errno;
		return 1;
	}
	return 0;
}

ssize_t write(int fd, const void *buf, size_t n)
{
	if (fd_counted(fd) && tick(1))
		return -1;
	return real_write(fd, buf, n);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
	if (fd_counted(fd) && tick(1))
		return -1;
	return real_pwrite(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
	if (fd_counted(fd) && tick(1))
		return -1;
	return real_pwrite64(fd, buf, n, off);
}

ssize_t writev(int fd, const struct iovec *v, int n)
{
	if (fd_counted(fd) && tick(1))
		return -1;
	return real_writev(fd, v, n);
}

ssize_t pwritev(int fd, const struct iovec *v, int n, off_t off)
{
	if (fd_counted(fd) && tick(1))
		return -1;
	return real_pwritev(fd, v, n, off);
}

int fsync(int fd)
{
	if (fd_counted(fd) && tick(1))
		return -1;
	return real_fsync(fd);
}

int fdatasync(int fd)
{
	if (fd_counted(fd) && tick(1))
		return -1;
	return real_fdatasync(fd);
}

int rename(const char *from, const char *to)
{
	if (path_counted(to) && tick(0))
		return -1;
	return real_rename(from, to);
}

int mkdir(const char *path, mode_t mode)
{
	if (path_counted(path) && tick(1))
		return -1;
	return real_mkdir(path, mode);
}

/* stdio streams for writing: a cookie stream whose writes go through write() above */
static ssize_t ck_read(void *c, char *buf, size_t n) { return read((int)(long)c, buf, n); }
static ssize_t ck_write(void *c, const char *buf, size_t n)
{
	size_t done = 0;
	while (done < n) {
		ssize_t k = write((int)(long)c, buf + done, n - done);
		if (k < 0)
			return done ? (ssize_t)done : -1;
		done += (size_t)k;
	}
	return (ssize_t)done;
}
static int ck_seek(void *c, off64_t *off, int whence)
{
	off64_t r = lseek64((int)(long)c, *off, whence);
	if (r < 0)
		return -1;
	*off = r;
	return 0;
}
static int ck_close(void *c) { return close((int)(long)c); }

static FILE *open_stream(FILE *(*real)(const char *, const char *), const char *path, const char *mode)
{
	if (!strchr(mode, 'w') && !strchr(mode, 'a') && !strchr(mode, '+'))
		return real(path, mode);
	if (!path_counted(path))
		return real(path, mode);
	int flags = strchr(mode, '+') ? O_RDWR : O_WRONLY;
	if (mode[0] == 'w')
		flags |= O_CREAT | O_TRUNC;
	else if (mode[0] == 'a')
		flags |= O_CREAT | O_APPEND;
	if (strchr(mode, 'x'))
		flags |= O_EXCL;
	if (strchr(mode, 'e'))
		flags |= O_CLOEXEC;
	int fd = open(path, flags, 0666);
	if (fd < 0)
		return NULL;
	cookie_io_functions_t io = { ck_read, ck_write, ck_seek, ck_close };
	FILE *f = fopencookie((void *)(long)fd, mode, io);
	if (!f)
		close(fd);
	return f;
}

FILE *fopen(const char *path, const char *mode) { return open_stream(real_fopen, path, mode); }
FILE *fopen64(const char *path, const char *mode) { return open_stream(real_fopen64, path, mode); }
