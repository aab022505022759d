/*
 * trace.c: the dsgap trace file (docs/spec.md §6): a writer and a streaming reader on the HDF5 1.10 C API.
 * bf16 is an HDF5 custom float (h5py reads it as float32); dsgap writes and reads its raw 16-bit
 * words (memory type = file type, so no HDF5 conversion) and converts them itself: HDF5 1.10.8's
 * software conversion is slow and rounds ties away from zero, not to even. f16 and f32
 * traces (made with h5py, say) are read through HDF5's own conversion to native float.
 * The layout is in trace.h; tests/trace/test_trace.c and tests/cli/cli_trace.sh check it.
 */
#include "trace/trace.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "trace/trace_chunks.h"
#include "util/files.h"
#include "util/util.h"

static const char *qkv_names[DG_QKV_COUNT] = { "q", "k", "v" };

const char *dg_qkv_name(dg_qkv which)
{
	DG_ASSERT(which >= 0 && which < DG_QKV_COUNT);
	return qkv_names[which];
}

/* HDF5's own words for the last failure, kept by h5_failed before cleanup clears the stack. */
static _Thread_local char h5_why[256];

/* HDF5's innermost message in one line: a system error as its strerror (HDF5's file driver puts
 * "errno = N" among buffer addresses and times), else the message's first line */
static herr_t why_cb(unsigned n, const H5E_error2_t *e, void *data)
{
	(void)data;
	if (n != 0 || !e->desc || !e->desc[0])
		return 0;
	const char *en = strstr(e->desc, "errno = ");
	if (en && atoi(en + 8) > 0) {
		snprintf(h5_why, sizeof h5_why, "%s", strerror(atoi(en + 8)));
		return 0;
	}
	snprintf(h5_why, sizeof h5_why, "%s", e->desc);
	h5_why[strcspn(h5_why, "\n")] = 0;
	return 0;
}

/* Keep the innermost message of HDF5's error stack in h5_why; returns -1. */
static int h5_failed(void)
{
	snprintf(h5_why, sizeof h5_why, "HDF5 call failed");
	H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, why_cb, NULL);
	return -1;
}

static void close_id(hid_t *id, herr_t (*close)(hid_t))
{
	if (*id >= 0)
		close(*id);
	*id = H5I_INVALID_HID;
}

/* sign bit 15, exponent bits 7..14 with bias 127, mantissa bits 0..6: the top half of a float32 */
static hid_t bf16_type(void)
{
	hid_t t = H5Tcopy(H5T_IEEE_F32LE);
	if (t < 0 || H5Tset_fields(t, 15, 7, 8, 0, 7) < 0 || H5Tset_size(t, 2) < 0 ||
	    H5Tset_ebias(t, 127) < 0) {
		h5_failed();
		close_id(&t, H5Tclose);
	}
	return t;
}

void dg_h5_quiet(void)
{
	static _Thread_local int quiet;
	if (!quiet)
		quiet = H5Eset_auto2(H5E_DEFAULT, NULL, NULL) >= 0;
}

void dg_trace_meta_free(dg_trace_meta *m)
{
	free(m->step_index);
	free(m->layer_index);
	free(m->head_index);
	free(m->timestep);
	free(m->sigma);
	free(m->model);
	free(m->source);
	free(m->created_by);
	free(m->config);
	memset(m, 0, sizeof *m);
}

static void *dup_array(const void *p, size_t n, size_t size)
{
	DG_ASSERT(p);
	return memcpy(dg_malloc(n * size), p, n * size);
}

static void meta_copy(dg_trace_meta *dst, const dg_trace_meta *src)
{
	*dst = *src;
	dst->step_index = dup_array(src->step_index, src->steps, sizeof(int));
	dst->timestep = dup_array(src->timestep, src->steps, sizeof(float));
	dst->sigma = dup_array(src->sigma, src->steps, sizeof(float));
	dst->layer_index = dup_array(src->layer_index, src->layers, sizeof(int));
	dst->head_index = dup_array(src->head_index, src->heads, sizeof(int));
	dst->model = dg_strdup(src->model ? src->model : "");
	dst->source = dg_strdup(src->source ? src->source : "");
	dst->created_by = dg_strdup(src->created_by ? src->created_by : "");
	dst->config = dg_strdup(src->config ? src->config : "{}");
	dst->version = DG_TRACE_VERSION;
}

static size_t unit_elems(const dg_trace_meta *m) { return (size_t)m->tokens * m->head_dim; }

/* ---------------------------------------------------------------------------------------------
 * reader
 */

static const char *class_name(H5T_class_t c)
{
	switch (c) {
	case H5T_INTEGER: return "integer";
	case H5T_FLOAT: return "float";
	case H5T_STRING: return "string";
	case H5T_COMPOUND: return "compound";
	case H5T_ENUM: return "enum";
	case H5T_ARRAY: return "array";
	default: return "non-numeric";
	}
}

/* "bf16" (dsgap's custom float, little-endian), "f16" (IEEE half), "f32", or NULL: anything else */
static const char *float_kind(hid_t t)
{
	if (H5Tget_class(t) != H5T_FLOAT)
		return NULL;
	size_t size = H5Tget_size(t), spos, epos, esize, mpos, msize;
	if (H5Tget_fields(t, &spos, &epos, &esize, &mpos, &msize) < 0)
		return NULL;
	size_t ebias = H5Tget_ebias(t);
	if (size == 2 && spos == 15 && epos == 7 && esize == 8 && mpos == 0 && msize == 7 &&
	    ebias == 127 && H5Tget_order(t) == H5T_ORDER_LE && H5Tget_precision(t) == 16 &&
	    H5Tget_offset(t) == 0 && H5Tget_norm(t) == H5T_NORM_IMPLIED)
		return "bf16";
	if (size == 2 && spos == 15 && epos == 10 && esize == 5 && mpos == 0 && msize == 10 && ebias == 15)
		return "f16";
	if (size == 4 && spos == 31 && epos == 23 && esize == 8 && mpos == 0 && msize == 23 && ebias == 127)
		return "f32";
	return NULL;
}

/* Root string attribute NAME (variable or fixed length) as a new string; NULL if absent or no string. */
static char *attr_string(hid_t file, const char *name)
{
	if (H5Aexists(file, name) <= 0)
		return NULL;
	char *s = NULL;
	hid_t a = H5Aopen(file, name, H5P_DEFAULT);
	hid_t ft = a < 0 ? -1 : H5Aget_type(a), sp = a < 0 ? -1 : H5Aget_space(a), mt = -1;
	if (ft >= 0 && sp >= 0 && H5Tget_class(ft) == H5T_STRING && H5Sget_simple_extent_npoints(sp) == 1) {
		if (H5Tis_variable_str(ft) > 0) {
			char *v = NULL;
			mt = H5Tcopy(H5T_C_S1);
			if (mt >= 0 && H5Tset_size(mt, H5T_VARIABLE) >= 0 &&
			    H5Tset_cset(mt, H5Tget_cset(ft)) >= 0 && H5Aread(a, mt, &v) >= 0 && v) {
				s = dg_strdup(v);
				H5free_memory(v);
			}
		} else {
			s = dg_calloc(H5Tget_size(ft) + 1, 1);
			if (H5Aread(a, ft, s) < 0) {
				free(s);
				s = NULL;
			}
		}
	}
	close_id(&mt, H5Tclose);
	close_id(&ft, H5Tclose);
	close_id(&sp, H5Sclose);
	close_id(&a, H5Aclose);
	return s;
}

/* The root string attributes names[0..n) into out[i] (NULL: absent or no string), read in a child
 * process: HDF5 1.10's global heap reader, which variable-length strings go through, crashes or
 * loops forever on some corrupt heaps (one byte changed in a trace's heap collection made
 * `dsgap info` spin for ten minutes; another, a segfault in H5HG_read). The child answers on a
 * pipe, one record a name (int32 length, -1 for NULL, then the bytes); its death or silence for
 * STRINGS_WAIT_S seconds is an error naming the file. The file's handle is shared: HDF5 reads it
 * with pread, so the child moves no offset of the parent's. */
#define STRINGS_WAIT_S 10
static int write_all(int fd, const void *p, size_t n)
{
	for (const char *c = p; n;) {
		ssize_t w = write(fd, c, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		c += w, n -= (size_t)w;
	}
	return 0;
}

static int attr_strings(const char *path, hid_t file, const char *const *names, int n, char **out)
{
	for (int i = 0; i < n; i++)
		out[i] = NULL;
	int fd[2];
	if (pipe(fd))
		return dg_error("%s: cannot read its attributes: pipe: %s", path, strerror(errno));
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		close(fd[0]), close(fd[1]);
		return dg_error("%s: cannot read its attributes: fork: %s", path, strerror(errno));
	}
	if (pid == 0) { /* the child: HDF5 reads, the bytes go up the pipe, then _exit (no atexit) */
		close(fd[0]);
		for (int i = 0; i < n; i++) {
			char *v = attr_string(file, names[i]);
			int32_t len = v ? (int32_t)strlen(v) : -1;
			if (write_all(fd[1], &len, sizeof len) || (v && write_all(fd[1], v, (size_t)len)))
				_exit(1);
		}
		_exit(0);
	}
	close(fd[1]);
	char *buf = NULL;
	size_t len = 0, cap = 0;
	double deadline = dg_now() + STRINGS_WAIT_S;
	bool hung = false;
	for (;;) {
		int left = (int)((deadline - dg_now()) * 1000);
		struct pollfd pf = { .fd = fd[0], .events = POLLIN };
		int r = left > 0 ? poll(&pf, 1, left) : 0;
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			hung = true;
			kill(pid, SIGKILL);
			break;
		}
		if (len + 4096 > cap) {
			cap = 2 * cap + 4096;
			if (!(buf = realloc(buf, cap)))
				dg_die("out of memory (%zu bytes)", cap);
		}
		ssize_t got = read(fd[0], buf + len, cap - len);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		len += (size_t)got;
	}
	close(fd[0]);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	int rc = 0;
	if (hung)
		rc = dg_error("%s: corrupt HDF5 attributes (reading them gave no answer in %d s)", path, STRINGS_WAIT_S);
	else if (WIFSIGNALED(st))
		rc = dg_error("%s: corrupt HDF5 attributes (reading them crashed the HDF5 library: %s)", path,
			      strsignal(WTERMSIG(st)));
	else if (!WIFEXITED(st) || WEXITSTATUS(st))
		rc = dg_error("%s: cannot read its attributes (the reader exited with status %d)", path,
			      WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	size_t at = 0; /* the records, in order */
	for (int i = 0; !rc && i < n; i++) {
		int32_t l;
		if (len - at < sizeof l) {
			rc = dg_error("%s: cannot read its attributes (a short answer)", path);
			break;
		}
		memcpy(&l, buf + at, sizeof l);
		at += sizeof l;
		if (l >= 0 && (size_t)l > len - at) {
			rc = dg_error("%s: cannot read its attributes (a short answer)", path);
		} else if (l >= 0) {
			out[i] = dg_malloc((size_t)l + 1);
			memcpy(out[i], buf + at, (size_t)l);
			out[i][l] = 0;
			at += (size_t)l;
		}
	}
	for (int i = 0; rc && i < n; i++) {
		free(out[i]);
		out[i] = NULL;
	}
	free(buf);
	return rc;
}

/* Root integer attribute NAME into *out; -1 if absent or not one integer. */
static int attr_int(hid_t file, const char *name, int *out)
{
	if (H5Aexists(file, name) <= 0)
		return -1;
	int rc = -1;
	hid_t a = H5Aopen(file, name, H5P_DEFAULT);
	hid_t ft = a < 0 ? -1 : H5Aget_type(a), sp = a < 0 ? -1 : H5Aget_space(a);
	if (ft >= 0 && sp >= 0 && H5Tget_class(ft) == H5T_INTEGER && H5Sget_simple_extent_npoints(sp) == 1)
		rc = H5Aread(a, H5T_NATIVE_INT, out) < 0 ? -1 : 0;
	close_id(&ft, H5Tclose);
	close_id(&sp, H5Sclose);
	close_id(&a, H5Aclose);
	return rc;
}

static int open_dataset(const char *path, hid_t file, const char *name, hid_t *d)
{
	if (H5Lexists(file, name, H5P_DEFAULT) <= 0)
		return dg_error("%s: missing dataset /%s", path, name);
	*d = H5Dopen2(file, name, H5P_DEFAULT);
	if (*d < 0)
		return dg_error("%s: /%s is not a dataset", path, name);
	return 0;
}

/*
 * Read dataset NAME, which must hold n numbers of class want (n == 0: a scalar, one number), into
 * out through memory type mt. what says what n counts, for the error message.
 */
/* n integers of dataset d into out (int), read as int64 and refused when one does not fit an int */
static int read_ints(const char *path, hid_t d, const char *name, int n, int *out)
{
	long long *v = dg_malloc((size_t)n * sizeof *v);
	int rc = 0;
	if (H5Dread(d, H5T_NATIVE_LLONG, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0) {
		h5_failed();
		rc = dg_error("%s: cannot read /%s: %s", path, name, h5_why);
	}
	for (int i = 0; i < n && !rc; i++) {
		if (v[i] < INT_MIN || v[i] > INT_MAX)
			rc = dg_error("%s: /%s[%d] = %lld does not fit a 32-bit integer", path, name, i, v[i]);
		out[i] = (int)v[i];
	}
	free(v);
	return rc;
}

static int read_vector(const char *path, hid_t file, const char *name, H5T_class_t want, int n,
		       const char *what, hid_t mt, void *out)
{
	hid_t d = -1;
	if (open_dataset(path, file, name, &d))
		return -1;
	hid_t ft = H5Dget_type(d), sp = H5Dget_space(d);
	int rank = sp < 0 ? -1 : H5Sget_simple_extent_ndims(sp);
	hssize_t count = sp < 0 ? -1 : H5Sget_simple_extent_npoints(sp);
	H5T_class_t c = ft < 0 ? H5T_NO_CLASS : H5Tget_class(ft);
	int rc = 0;
	if (c != want)
		rc = dg_error("%s: /%s has wrong dtype (%s), expected %s", path, name, class_name(c),
			      want == H5T_INTEGER ? "integers" : "floats");
	else if (n == 0 && !(rank == 0 || (rank == 1 && count == 1)))
		rc = dg_error("%s: /%s should be a scalar, has %lld values", path, name, (long long)count);
	else if (n > 0 && (rank != 1 || count != n))
		rc = dg_error("%s: /%s has %lld values in %d dimension(s), expected %d (%s)", path, name,
			      (long long)count, rank, n, what);
	else if (want == H5T_INTEGER) /* through int64: HDF5's conversion to int would clamp */
		rc = read_ints(path, d, name, n ? n : 1, out);
	else if (H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0) {
		h5_failed();
		rc = dg_error("%s: cannot read /%s: %s", path, name, h5_why);
	}
	close_id(&ft, H5Tclose);
	close_id(&sp, H5Sclose);
	close_id(&d, H5Dclose);
	return rc;
}

static void shape_str(char *buf, size_t size, const hsize_t *dims, int rank)
{
	int n = snprintf(buf, size, "[");
	for (int i = 0; i < rank && n < (int)size; i++)
		n += snprintf(buf + n, size - n, "%s%llu", i ? ", " : "", (unsigned long long)dims[i]);
	if (n < (int)size)
		snprintf(buf + n, size - n, "]");
}

/* Open /q /k /v: rank 5, one shape, one float type; fills the shape of t->meta and t->dtype. */
static int open_qkv(dg_trace *t)
{
	const char *path = t->path;
	hsize_t dims[DG_QKV_COUNT][5];
	char a[128], b[128];
	for (int i = 0; i < DG_QKV_COUNT; i++) {
		if (open_dataset(path, t->file, qkv_names[i], &t->dset[i]))
			return -1;
		hid_t sp = H5Dget_space(t->dset[i]), ft = H5Dget_type(t->dset[i]);
		int rank = sp < 0 ? -1 : H5Sget_simple_extent_ndims(sp);
		if (rank == 5)
			H5Sget_simple_extent_dims(sp, dims[i], NULL);
		H5T_class_t c = ft < 0 ? H5T_NO_CLASS : H5Tget_class(ft);
		const char *kind = ft < 0 ? NULL : float_kind(ft);
		close_id(&sp, H5Sclose);
		close_id(&ft, H5Tclose);
		if (rank != 5)
			return dg_error("%s: /%s has rank %d, expected 5 (steps, layers, heads, tokens, head_dim)",
					path, qkv_names[i], rank);
		if (!kind)
			return dg_error("%s: /%s has wrong dtype (%s%s), expected bf16, f16 or f32", path,
					qkv_names[i], class_name(c), c == H5T_FLOAT ? " of an unsupported layout" : "");
		if (i == 0)
			t->dtype = kind;
		else if (strcmp(kind, t->dtype))
			return dg_error("%s: /%s is %s but /q is %s", path, qkv_names[i], kind, t->dtype);
		if (i > 0 && memcmp(dims[i], dims[0], sizeof dims[0])) {
			shape_str(a, sizeof a, dims[i], 5);
			shape_str(b, sizeof b, dims[0], 5);
			return dg_error("%s: /%s has shape %s but /q has %s", path, qkv_names[i], a, b);
		}
	}
	const hsize_t *d = dims[0];
	shape_str(a, sizeof a, d, 5);
	for (int i = 0; i < 5; i++)
		if (d[i] == 0 || d[i] > INT_MAX)
			return dg_error("%s: /q has shape %s, every dimension must be 1..%d", path, a, INT_MAX);
	if (d[4] > 1024)
		return dg_error("%s: /q has head_dim %llu, expected 1..1024", path, (unsigned long long)d[4]);
	if (d[3] > DG_GRID_MAX) /* a unit is read whole: the bound of a token grid (util.h) */
		return dg_error("%s: /q has %llu tokens, expected 1..%ld", path, (unsigned long long)d[3],
				(long)DG_GRID_MAX);
	dg_trace_meta *m = &t->meta;
	m->steps = (int)d[0], m->layers = (int)d[1], m->heads = (int)d[2];
	m->tokens = (int)d[3], m->head_dim = (int)d[4];
	return 0;
}

static int read_meta(dg_trace *t)
{
	const char *path = t->path;
	dg_trace_meta *m = &t->meta;
	m->step_index = dg_malloc(m->steps * sizeof(int));
	m->timestep = dg_malloc(m->steps * sizeof(float));
	m->sigma = dg_malloc(m->steps * sizeof(float));
	m->layer_index = dg_malloc(m->layers * sizeof(int));
	m->head_index = dg_malloc(m->heads * sizeof(int));
	const char *st = "the steps of /q";
	struct { const char *name; H5T_class_t c; int n; const char *what; hid_t mt; void *out; } v[] = {
		{ "step_index", H5T_INTEGER, m->steps, st, H5T_NATIVE_INT, m->step_index },
		{ "timestep", H5T_FLOAT, m->steps, st, H5T_NATIVE_FLOAT, m->timestep },
		{ "sigma", H5T_FLOAT, m->steps, st, H5T_NATIVE_FLOAT, m->sigma },
		{ "layer_index", H5T_INTEGER, m->layers, "the layers of /q", H5T_NATIVE_INT, m->layer_index },
		{ "head_index", H5T_INTEGER, m->heads, "the heads of /q", H5T_NATIVE_INT, m->head_index },
		{ "grid", H5T_INTEGER, 3, "frames, height, width", H5T_NATIVE_INT, m->grid },
		{ "text_tokens", H5T_INTEGER, 0, "", H5T_NATIVE_INT, &m->text_tokens },
	};
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
		if (read_vector(path, t->file, v[i].name, v[i].c, v[i].n, v[i].what, v[i].mt, v[i].out))
			return -1;
	const int *g = m->grid;
	if (g[0] < 1 || g[1] < 1 || g[2] < 1 || m->text_tokens < 0)
		return dg_error("%s: bad /grid %dx%dx%d or /text_tokens %d", path, g[0], g[1], g[2], m->text_tokens);
	long long n = (long long)g[0] * g[1] * g[2] + m->text_tokens;
	if (n != m->tokens)
		return dg_error("%s: /grid %dx%dx%d + %d text tokens = %lld tokens, but /q has %d", path,
				g[0], g[1], g[2], m->text_tokens, n, m->tokens);
	static const char *names[] = { "model", "source", "created_by", "config" }; /* read by attr_strings */
	char **dst[] = { &m->model, &m->source, &m->created_by, &m->config };
	for (int i = 0; i < 4; i++)
		if (!*dst[i])
			return dg_error("%s: missing string attribute '%s'", path, names[i]);
	return 0;
}

static int open_checked(dg_trace *t, const char *path)
{
	struct stat st;
	if (stat(path, &st))
		return dg_error("cannot open %s: %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return dg_error("cannot open %s: not a regular file", path);
	t->file_size = st.st_size;
	if (H5Fis_hdf5(path) <= 0)
		return dg_error("%s: not an HDF5 file", path);
	t->file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
	if (t->file < 0)
		return h5_failed(), dg_error("%s: truncated or corrupt HDF5 file (%s)", path, h5_why);
	static const char *const names[] = { "format", "model", "source", "created_by", "config" };
	char *str[5];
	if (attr_strings(path, t->file, names, 5, str))
		return -1;
	dg_trace_meta *m = &t->meta;
	m->model = str[1], m->source = str[2], m->created_by = str[3], m->config = str[4];
	char *format = str[0];
	int bad_format = format && strcmp(format, DG_TRACE_FORMAT);
	free(format);
	if (!format)
		return dg_error("%s: not a dsgap trace (no format attribute)", path);
	if (bad_format)
		return dg_error("%s: not a dsgap trace (format attribute is not '%s')", path, DG_TRACE_FORMAT);
	if (attr_int(t->file, "version", &t->meta.version))
		return dg_error("%s: missing integer attribute 'version'", path);
	if (t->meta.version < 1 || t->meta.version > DG_TRACE_VERSION)
		return dg_error("%s: trace version %d, this dsgap reads version %d", path, t->meta.version,
				DG_TRACE_VERSION);
	if (open_qkv(t) || read_meta(t))
		return -1;
	t->raw_bf16 = strcmp(t->dtype, "bf16") == 0;
	t->mem_type = t->raw_bf16 ? bf16_type() : H5Tcopy(H5T_NATIVE_FLOAT);
	if (t->mem_type < 0)
		return h5_failed(), dg_error("%s: cannot make the memory type: %s", path, h5_why);
	if (t->raw_bf16)
		t->scratch = dg_malloc(unit_elems(&t->meta) * sizeof(uint16_t));
	return 0;
}

int dg_trace_open(dg_trace *t, const char *path)
{
	dg_h5_quiet();
	memset(t, 0, sizeof *t);
	t->file = t->mem_type = H5I_INVALID_HID;
	for (int i = 0; i < DG_QKV_COUNT; i++)
		t->dset[i] = H5I_INVALID_HID;
	t->path = dg_strdup(path);
	dg_input_add(path); /* no output of this process may overwrite it; named if memory runs out */
	if (open_checked(t, path)) {
		dg_trace_close(t);
		return -1;
	}
	char what[600]; /* an allocation that fails from here on names the trace and its size */
	const dg_trace_meta *m = &t->meta;
	snprintf(what, sizeof what, "%s (%d steps x %d layers x %d heads x %d tokens x %d)", path, m->steps, m->layers,
		 m->heads, m->tokens, m->head_dim);
	dg_oom_input(what);
	return 0;
}

int dg_trace_read(dg_trace *t, dg_qkv which, int s, int l, int h, float *out)
{
	dg_h5_quiet();
	const dg_trace_meta *m = &t->meta;
	DG_ASSERT(which >= 0 && which < DG_QKV_COUNT);
	DG_ASSERT(s >= 0 && s < m->steps && l >= 0 && l < m->layers && h >= 0 && h < m->heads);
	const char *name = qkv_names[which];
	size_t n = unit_elems(m);
	hsize_t start[5] = { s, l, h, 0, 0 }, count[5] = { 1, 1, 1, m->tokens, m->head_dim };
	hid_t fs = H5Dget_space(t->dset[which]), ms = H5Screate_simple(2, count + 3, NULL);
	int rc = fs < 0 || ms < 0 || H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
		 H5Dread(t->dset[which], t->mem_type, ms, fs, H5P_DEFAULT,
			 t->raw_bf16 ? (void *)t->scratch : (void *)out) < 0 ? h5_failed() : 0;
	close_id(&fs, H5Sclose);
	close_id(&ms, H5Sclose);
	if (rc) {
		/* HDF5 reports a decompression buffer it could not allocate as a filter failure: say so */
		size_t want = 2 * n * sizeof(float) + ((size_t)1 << 20);
		void *probe = malloc(want);
		if (!probe)
			dg_out_of_memory(want, "decompressing a trace chunk");
		free(probe);
		return dg_error("%s: cannot read /%s at step %d layer %d head %d: %s", t->path, name,
				m->step_index[s], m->layer_index[l], m->head_index[h], h5_why);
	}
	if (t->raw_bf16)
		for (size_t i = 0; i < n; i++)
			out[i] = dg_bf16_to_f32(t->scratch[i]);
	for (size_t i = 0; i < n; i++)
		if (!isfinite(out[i]))
			return dg_error("%s: non-finite value in /%s at step %d layer %d head %d (token %zu, dim %zu)",
					t->path, name, m->step_index[s], m->layer_index[l], m->head_index[h],
					i / m->head_dim, i % m->head_dim);
	return 0;
}

void dg_trace_close(dg_trace *t)
{
	for (int i = 0; i < DG_QKV_COUNT; i++)
		close_id(&t->dset[i], H5Dclose);
	close_id(&t->mem_type, H5Tclose);
	close_id(&t->file, H5Fclose);
	dg_trace_meta_free(&t->meta);
	free(t->scratch);
	free(t->path);
	t->scratch = NULL;
	t->path = NULL;
}

/* ---------------------------------------------------------------------------------------------
 * writer
 */

static int check_meta(const char *path, const dg_trace_meta *m)
{
	const int *g = m->grid;
	if (m->steps < 1 || m->layers < 1 || m->heads < 1 || m->tokens < 1)
		return dg_error("cannot write %s: empty trace (%d steps, %d layers, %d heads, %d tokens)",
				path, m->steps, m->layers, m->heads, m->tokens);
	if (m->head_dim < 1 || m->head_dim > 1024)
		return dg_error("cannot write %s: head_dim %d, expected 1..1024", path, m->head_dim);
	if (g[0] < 1 || g[1] < 1 || g[2] < 1 || m->text_tokens < 0 ||
	    (long long)g[0] * g[1] * g[2] + m->text_tokens != m->tokens)
		return dg_error("cannot write %s: grid %dx%dx%d + %d text tokens does not make %d tokens",
				path, g[0], g[1], g[2], m->text_tokens, m->tokens);
	if (unit_elems(m) * sizeof(uint16_t) >= 0xffffffffull)
		return dg_error("cannot write %s: one unit (%d tokens x %d) exceeds HDF5's 4 GiB chunk limit",
				path, m->tokens, m->head_dim);
	return 0;
}

static int write_vector(hid_t file, const char *name, hid_t ft, hid_t mt, int n, const void *data)
{
	hsize_t dim = n;
	hid_t sp = n ? H5Screate_simple(1, &dim, NULL) : H5Screate(H5S_SCALAR);
	hid_t d = sp < 0 ? -1 : H5Dcreate2(file, name, ft, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
	int rc = d < 0 || H5Dwrite(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0 ? h5_failed() : 0;
	close_id(&d, H5Dclose);
	close_id(&sp, H5Sclose);
	return rc;
}

/* variable-length UTF-8 string attribute: h5py reads it as str */
static int write_attr_string(hid_t file, const char *name, const char *value)
{
	hid_t t = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR), a = -1;
	int rc = t < 0 || sp < 0 || H5Tset_size(t, H5T_VARIABLE) < 0 || H5Tset_cset(t, H5T_CSET_UTF8) < 0 ||
		 (a = H5Acreate2(file, name, t, sp, H5P_DEFAULT, H5P_DEFAULT)) < 0 ||
		 H5Awrite(a, t, &value) < 0 ? h5_failed() : 0;
	close_id(&a, H5Aclose);
	close_id(&sp, H5Sclose);
	close_id(&t, H5Tclose);
	return rc;
}

static int write_attr_int(hid_t file, const char *name, int value)
{
	hid_t sp = H5Screate(H5S_SCALAR), a = -1;
	int rc = sp < 0 || (a = H5Acreate2(file, name, H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT)) < 0 ||
		 H5Awrite(a, H5T_NATIVE_INT, &value) < 0 ? h5_failed() : 0;
	close_id(&a, H5Aclose);
	close_id(&sp, H5Sclose);
	return rc;
}

/* /q /k /v: (steps, layers, heads, tokens, head_dim) bf16, one chunk per unit, shuffle + deflate 1 */
static int create_qkv(dg_trace_writer *w)
{
	const dg_trace_meta *m = &w->meta;
	hsize_t dims[5] = { m->steps, m->layers, m->heads, m->tokens, m->head_dim };
	hsize_t chunk[5] = { 1, 1, 1, m->tokens, m->head_dim };
	hid_t sp = H5Screate_simple(5, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
	int rc = sp < 0 || dcpl < 0 || H5Pset_chunk(dcpl, 5, chunk) < 0 || H5Pset_shuffle(dcpl) < 0 ||
		 H5Pset_deflate(dcpl, 1) < 0 || H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) < 0 ? h5_failed() : 0;
	for (int i = 0; i < DG_QKV_COUNT && !rc; i++) {
		w->dset[i] = H5Dcreate2(w->file, qkv_names[i], w->bf16, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
		if (w->dset[i] < 0)
			rc = h5_failed();
	}
	close_id(&dcpl, H5Pclose);
	close_id(&sp, H5Sclose);
	return rc;
}

static int create_file(dg_trace_writer *w)
{
	const dg_trace_meta *m = &w->meta;
	errno = 0;
	w->file = H5Fcreate(w->tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
	if (w->file < 0) {
		int e = errno;
		h5_failed();
		return dg_error("cannot create %s: %s", w->path, e ? strerror(e) : h5_why);
	}
	w->bf16 = bf16_type();
	int text = m->text_tokens;
	if (w->bf16 < 0 || create_qkv(w) ||
	    write_vector(w->file, "step_index", H5T_STD_I32LE, H5T_NATIVE_INT, m->steps, m->step_index) ||
	    write_vector(w->file, "timestep", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, m->steps, m->timestep) ||
	    write_vector(w->file, "sigma", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, m->steps, m->sigma) ||
	    write_vector(w->file, "layer_index", H5T_STD_I32LE, H5T_NATIVE_INT, m->layers, m->layer_index) ||
	    write_vector(w->file, "head_index", H5T_STD_I32LE, H5T_NATIVE_INT, m->heads, m->head_index) ||
	    write_vector(w->file, "grid", H5T_STD_I32LE, H5T_NATIVE_INT, 3, m->grid) ||
	    write_vector(w->file, "text_tokens", H5T_STD_I32LE, H5T_NATIVE_INT, 0, &text) ||
	    write_attr_string(w->file, "format", DG_TRACE_FORMAT) ||
	    write_attr_int(w->file, "version", DG_TRACE_VERSION) ||
	    write_attr_string(w->file, "model", m->model) ||
	    write_attr_string(w->file, "created_by", m->created_by) ||
	    write_attr_string(w->file, "source", m->source) ||
	    write_attr_string(w->file, "config", m->config))
		return dg_error("cannot write %s: %s", w->path, h5_why);
	return 0;
}

/* the tag of a unit in the chunk pipe */
typedef struct {
	int which, s, l, h;
} unit_tag;

static size_t unit_id(const dg_trace_meta *m, dg_qkv which, int s, int l, int h);

/* dg_chunk_write_fn: a unit's shuffled, deflated chunk, as the filters of create_qkv make it */
static int write_chunk(void *ctx, const void *tag, const void *z, size_t zlen)
{
	dg_trace_writer *w = ctx;
	const dg_trace_meta *m = &w->meta;
	const unit_tag *u = tag;
	hsize_t off[5] = { u->s, u->l, u->h, 0, 0 };
	if (H5Dwrite_chunk(w->dset[u->which], H5P_DEFAULT, 0, off, zlen, z) < 0) {
		h5_failed();
		return dg_error("cannot write %s: /%s at step %d layer %d head %d: %s", w->path,
				qkv_names[u->which], m->step_index[u->s], m->layer_index[u->l], m->head_index[u->h],
				h5_why);
	}
	w->written[unit_id(m, u->which, u->s, u->l, u->h)] = 1;
	return 0;
}

int dg_trace_writer_open(dg_trace_writer *w, const char *path, const dg_trace_meta *meta)
{
	dg_h5_quiet();
	memset(w, 0, sizeof *w);
	w->file = w->bf16 = H5I_INVALID_HID;
	for (int i = 0; i < DG_QKV_COUNT; i++)
		w->dset[i] = H5I_INVALID_HID;
	if (check_meta(path, meta) || dg_output_check(path))
		return -1;
	w->path = dg_strdup(path);
	w->tmp = dg_tmp_name(path);
	meta_copy(&w->meta, meta);
	w->written = dg_calloc((size_t)DG_QKV_COUNT * meta->steps * meta->layers, meta->heads);
	if (create_file(w) || !(w->pipe = dg_chunk_pipe_new(unit_elems(meta) * sizeof(uint16_t), write_chunk, w))) {
		dg_trace_writer_abort(w);
		return -1;
	}
	return 0;
}

static size_t unit_id(const dg_trace_meta *m, dg_qkv which, int s, int l, int h)
{
	return (((size_t)which * m->steps + s) * m->layers + l) * m->heads + h;
}

int dg_trace_writer_put(dg_trace_writer *w, dg_qkv which, int s, int l, int h, const float *data)
{
	dg_h5_quiet();
	const dg_trace_meta *m = &w->meta;
	DG_ASSERT(which >= 0 && which < DG_QKV_COUNT);
	DG_ASSERT(s >= 0 && s < m->steps && l >= 0 && l < m->layers && h >= 0 && h < m->heads);
	size_t n = unit_elems(m);
	uint16_t *words = dg_chunk_pipe_slot(w->pipe); /* (tokens, head_dim) little-endian bf16 */
	for (size_t i = 0; i < n; i++) {
		if (!isfinite(data[i]))
			return dg_error("cannot write %s: non-finite value in /%s at step %d layer %d head %d "
					"(token %zu, dim %zu)", w->path, qkv_names[which], m->step_index[s],
					m->layer_index[l], m->head_index[h], i / m->head_dim, i % m->head_dim);
		words[i] = dg_f32_to_bf16(data[i]);
	}
	unit_tag tag = { which, s, l, h };
	return dg_chunk_pipe_submit(w->pipe, &tag, sizeof tag);
}

static void writer_free(dg_trace_writer *w)
{
	dg_chunk_pipe_free(w->pipe); /* units not yet written are dropped */
	w->pipe = NULL;
	for (int i = 0; i < DG_QKV_COUNT; i++)
		close_id(&w->dset[i], H5Dclose);
	close_id(&w->bf16, H5Tclose);
	close_id(&w->file, H5Fclose);
	dg_trace_meta_free(&w->meta);
	free(w->path);
	free(w->tmp);
	free(w->written);
	w->path = w->tmp = NULL;
	w->written = NULL;
}

int dg_trace_writer_finish(dg_trace_writer *w)
{
	const dg_trace_meta *m = &w->meta;
	if (dg_chunk_pipe_drain(w->pipe)) {
		dg_trace_writer_abort(w);
		return -1;
	}
	size_t units = (size_t)DG_QKV_COUNT * m->steps * m->layers * m->heads;
	for (size_t u = 0; u < units; u++) {
		if (w->written[u])
			continue;
		int h = u % m->heads, l = u / m->heads % m->layers, s = u / m->heads / m->layers % m->steps;
		dg_error("cannot write %s: /%s at step %d layer %d head %d was never written", w->path,
			 qkv_names[u / m->heads / m->layers / m->steps], m->step_index[s], m->layer_index[l],
			 m->head_index[h]);
		dg_trace_writer_abort(w);
		return -1;
	}
	for (int i = 0; i < DG_QKV_COUNT; i++)
		close_id(&w->dset[i], H5Dclose);
	close_id(&w->bf16, H5Tclose);
	int rc = H5Fclose(w->file) < 0 ? h5_failed() : 0;
	w->file = H5I_INVALID_HID;
	if (rc)
		dg_error("cannot write %s: %s", w->path, h5_why);
	else if (rename(w->tmp, w->path))
		rc = dg_error("cannot rename %s to %s: %s", w->tmp, w->path, strerror(errno));
	if (rc)
		remove(w->tmp);
	dg_tmp_release(w->tmp);
	writer_free(w);
	return rc;
}

void dg_trace_writer_abort(dg_trace_writer *w)
{
	char *tmp = w->tmp;
	w->tmp = NULL;
	writer_free(w); /* closes the file before it is removed */
	if (tmp) {
		remove(tmp); /* also when H5Fcreate failed after creating it */
		dg_tmp_release(tmp);
	}
	free(tmp);
}
