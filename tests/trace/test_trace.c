/*
 * test_trace.c: the trace file (src/trace/trace.c) and the synthetic generator (src/trace/synth.c).
 *   ./test_trace                          every check, in a temporary directory under /tmp
 *   ./test_trace --fixture T.h5 T.f32     write a small deterministic trace, and as raw float32
 *                                         (q, then k, then v, each (steps, layers, heads, tokens,
 *                                         head_dim)) the values dsgap reads back: interop_h5py.py
 * Round trips use a fresh seed each run (printed, and taken from DG_TEST_SEED when set).
 */
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "trace/synth.h"
#include "testhelp.h"
#include "trace/trace.h"
#include "util/files.h"
#include "util/util.h"

static char dir[64];

/* dir/name, in one of 64 rotating buffers */
static char *tpath(const char *name)
{
	static char buf[64][256];
	static int next;
	char *s = buf[next++ % 64];
	snprintf(s, 256, "%s/%s", dir, name);
	return s;
}

static int exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

/* no PATH.tmp.* left beside PATH */
static int no_tmp(const char *path)
{
	char *tmp = dg_tmp_name(path);
	int ok = !exists(tmp);
	free(tmp);
	return ok;
}

/* ---- stderr capture: library calls report their own errors, checked here by substring ------- */

static int saved_fd = -1;
static char captured[4096];

static void capture_begin(void)
{
	fflush(stderr);
	saved_fd = dup(2);
	int fd = open(tpath("stderr.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
	dup2(fd, 2);
	close(fd);
}

static const char *capture_end(void)
{
	fflush(stderr);
	dup2(saved_fd, 2);
	close(saved_fd);
	FILE *f = fopen(tpath("stderr.txt"), "r");
	size_t n = f ? fread(captured, 1, sizeof captured - 1, f) : 0;
	captured[n] = 0;
	if (f)
		fclose(f);
	return captured;
}

static int one_line_with(const char *s, const char *want)
{
	size_t n = strlen(s);
	return n > 0 && s[n - 1] == '\n' && !memchr(s, '\n', n - 1) && !strncmp(s, "dsgap: error: ", 14) &&
	       strstr(s, want) != NULL;
}

/* ---- a small trace of given values ----------------------------------------------------------- */

typedef struct {
	dg_trace_meta m;
	float *data[DG_QKV_COUNT]; /* (steps, layers, heads, tokens, head_dim) */
} fixture;

static size_t unit_size(const dg_trace_meta *m) { return (size_t)m->tokens * m->head_dim; }

static float *unit_of(fixture *fx, int q, int s, int l, int h)
{
	const dg_trace_meta *m = &fx->m;
	return fx->data[q] + (((size_t)s * m->layers + l) * m->heads + h) * unit_size(m);
}

/* steps 3, layers 2, heads 3, grid 2x3x5 + 7 text tokens = 37 tokens, head_dim 24; values are
 * Gaussians times 10^U(-4, 4), plus a few exact specials */
static void fixture_make(fixture *fx, gsl_rng *r)
{
	dg_trace_meta *m = &fx->m;
	*m = (dg_trace_meta){ .steps = 3, .layers = 2, .heads = 3, .tokens = 37, .head_dim = 24,
			      .grid = { 2, 3, 5 }, .text_tokens = 7 };
	m->step_index = dg_malloc(3 * sizeof(int));
	m->timestep = dg_malloc(3 * sizeof(float));
	m->sigma = dg_malloc(3 * sizeof(float));
	m->layer_index = dg_malloc(2 * sizeof(int));
	m->head_index = dg_malloc(3 * sizeof(int));
	for (int s = 0; s < 3; s++) {
		m->step_index[s] = 10 + 5 * s;
		m->sigma[s] = 0.9f - 0.1f * s;
		m->timestep[s] = 1000 * m->sigma[s];
	}
	m->layer_index[0] = 3, m->layer_index[1] = 17;
	m->head_index[0] = 0, m->head_index[1] = 5, m->head_index[2] = 11;
	m->model = dg_strdup("test-model é");
	m->source = dg_strdup("unit test");
	m->created_by = dg_strdup("test_trace");
	m->config = dg_strdup("{\"a\": 1, \"b\": [1, 2]}");
	size_t n = (size_t)m->steps * m->layers * m->heads * unit_size(m);
	for (int q = 0; q < DG_QKV_COUNT; q++) {
		fx->data[q] = dg_malloc(n * sizeof(float));
		for (size_t i = 0; i < n; i++)
			fx->data[q][i] = (float)(gsl_ran_gaussian(r, 1) * pow(10, gsl_ran_flat(r, -4, 4)));
	}
	float specials[] = { 0.0f, -0.0f, 1.0f, -1.0f, 1e-40f, -3e38f, 1.00390625f, 1.01171875f, 65504.0f };
	memcpy(fx->data[DG_QKV_Q], specials, sizeof specials);
}

static void fixture_free(fixture *fx)
{
	dg_trace_meta_free(&fx->m);
	for (int q = 0; q < DG_QKV_COUNT; q++)
		free(fx->data[q]);
}

static int fixture_write(fixture *fx, const char *path)
{
	dg_trace_writer w;
	const dg_trace_meta *m = &fx->m;
	if (dg_trace_writer_open(&w, path, m))
		return -1;
	for (int q = 0; q < DG_QKV_COUNT; q++)
		for (int s = 0; s < m->steps; s++)
			for (int l = 0; l < m->layers; l++)
				for (int h = 0; h < m->heads; h++)
					if (dg_trace_writer_put(&w, q, s, l, h, unit_of(fx, q, s, l, h))) {
						dg_trace_writer_abort(&w);
						return -1;
					}
	return dg_trace_writer_finish(&w);
}

/* ---- the writer's chunks against HDF5's own filters --------------------------------------------- */

/* The trace's /q, /k, /v chunks (made by trace_chunks.c's workers) are byte for byte the chunks
 * HDF5's shuffle + deflate 1 filters make of the same bf16 words in a dataset written the usual way
 * (H5Dwrite), and a unit put twice keeps its last data (chunks are written in submission order). */
static void test_chunk_bytes(gsl_rng *r)
{
	fixture fx;
	fixture_make(&fx, r);
	const dg_trace_meta *m = &fx.m;
	const char *path = tpath("chunks.h5"), *ref = tpath("chunks-ref.h5");
	dg_trace_writer w;
	int rc = dg_trace_writer_open(&w, path, m);
	float *first = dg_malloc(unit_size(m) * sizeof(float)); /* put first, then replaced */
	for (size_t i = 0; i < unit_size(m); i++)
		first[i] = (float)gsl_ran_gaussian(r, 1);
	for (int q = 0; q < DG_QKV_COUNT && !rc; q++)
		for (int s = 0; s < m->steps && !rc; s++)
			for (int l = 0; l < m->layers && !rc; l++)
				for (int h = 0; h < m->heads && !rc; h++)
					rc = (q == 1 && s == 1 && l == 0 && h == 2 && dg_trace_writer_put(&w, q, s, l, h, first)) ||
					     dg_trace_writer_put(&w, q, s, l, h, unit_of(&fx, q, s, l, h));
	CHECK("chunks: the trace is written", rc == 0 && dg_trace_writer_finish(&w) == 0);
	free(first);
	hsize_t dims[5] = { m->steps, m->layers, m->heads, m->tokens, m->head_dim };
	hsize_t chunk[5] = { 1, 1, 1, m->tokens, m->head_dim };
	hid_t f = H5Fcreate(ref, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), sp = H5Screate_simple(5, dims, NULL),
	      dcpl = H5Pcreate(H5P_DATASET_CREATE);
	H5Pset_chunk(dcpl, 5, chunk);
	H5Pset_shuffle(dcpl);
	H5Pset_deflate(dcpl, 1);
	size_t n = (size_t)m->steps * m->layers * m->heads * unit_size(m);
	uint16_t *words = dg_malloc(n * sizeof *words);
	for (int q = 0; q < DG_QKV_COUNT; q++) {
		for (size_t i = 0; i < n; i++)
			words[i] = dg_f32_to_bf16(fx.data[q][i]);
		hid_t d = H5Dcreate2(f, dg_qkv_name(q), H5T_STD_U16LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
		H5Dwrite(d, H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, words);
		H5Dclose(d);
	}
	free(words);
	H5Pclose(dcpl), H5Sclose(sp), H5Fclose(f);
	hid_t a = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), b = H5Fopen(ref, H5F_ACC_RDONLY, H5P_DEFAULT);
	size_t units = 0, same = 0, cap = 2 * unit_size(m) * sizeof(uint16_t) + 1024;
	unsigned char *ca = dg_malloc(cap), *cb = dg_malloc(cap);
	for (int q = 0; q < DG_QKV_COUNT; q++) {
		hid_t da = H5Dopen2(a, dg_qkv_name(q), H5P_DEFAULT), db = H5Dopen2(b, dg_qkv_name(q), H5P_DEFAULT);
		for (int s = 0; s < m->steps; s++)
			for (int l = 0; l < m->layers; l++)
				for (int h = 0; h < m->heads; h++, units++) {
					hsize_t off[5] = { s, l, h, 0, 0 }, na = 0, nb = 0;
					uint32_t fa = 1, fb = 1;
					if (H5Dget_chunk_storage_size(da, off, &na) < 0 || H5Dget_chunk_storage_size(db, off, &nb) < 0 ||
					    na != nb || na > cap || H5Dread_chunk(da, H5P_DEFAULT, off, &fa, ca) < 0 ||
					    H5Dread_chunk(db, H5P_DEFAULT, off, &fb, cb) < 0)
						continue;
					same += fa == 0 && fb == 0 && !memcmp(ca, cb, na);
				}
		H5Dclose(da), H5Dclose(db);
	}
	free(ca), free(cb);
	H5Fclose(a), H5Fclose(b);
	CHECKF(units > 0 && same == units, "chunks: %zu of %zu units byte-identical to HDF5's shuffle + deflate 1 "
	       "(one unit put twice: its last data)", same, units);
	fixture_free(&fx);
}

/* ---- bf16 ------------------------------------------------------------------------------------ */

static uint32_t bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static float from_bits(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static void test_bf16(void)
{
	CHECK("bf16: 1.0 is 0x3f80", dg_f32_to_bf16(1.0f) == 0x3f80);
	CHECK("bf16: halfway 1+2^-8 rounds to even 0x3f80", dg_f32_to_bf16(1.00390625f) == 0x3f80);
	CHECK("bf16: halfway 1+3*2^-8 rounds to even 0x3f82", dg_f32_to_bf16(1.01171875f) == 0x3f82);
	CHECK("bf16: just above halfway rounds up", dg_f32_to_bf16(from_bits(0x3f808001)) == 0x3f81);
	CHECK("bf16: just below halfway rounds down", dg_f32_to_bf16(from_bits(0x3f807fff)) == 0x3f80);
	CHECK("bf16: negative halfway rounds to even", dg_f32_to_bf16(-1.00390625f) == 0xbf80);
	CHECK("bf16: +inf", dg_f32_to_bf16(INFINITY) == 0x7f80);
	CHECK("bf16: -inf", dg_f32_to_bf16(-INFINITY) == 0xff80);
	CHECK("bf16: FLT_MAX overflows to inf", dg_f32_to_bf16(from_bits(0x7f7fffff)) == 0x7f80);
	CHECK("bf16: quiet NaN stays NaN", isnan(dg_round_bf16(NAN)));
	CHECK("bf16: NaN with only low payload bits stays NaN", isnan(dg_round_bf16(from_bits(0x7f800001))));
	CHECK("bf16: negative NaN stays NaN", isnan(dg_round_bf16(from_bits(0xffc00000))));
	float nz = dg_round_bf16(-0.0f);
	CHECK("bf16: negative zero keeps its sign", nz == 0 && signbit(nz) && dg_f32_to_bf16(-0.0f) == 0x8000);
	CHECK("bf16: subnormal 1e-40 rounds to the nearest bf16 subnormal 2^-133", dg_round_bf16(1e-40f) == ldexpf(1, -133));
	CHECK("bf16: to_f32 is exact widening", bits(dg_bf16_to_f32(0x4049)) == 0x40490000);
}

/* ---- round trip --------------------------------------------------------------------------------- */

static void test_round_trip(gsl_rng *r)
{
	fixture fx;
	fixture_make(&fx, r);
	const char *path = tpath("rt.h5");
	CHECK("round trip: write", fixture_write(&fx, path) == 0);
	CHECK("round trip: no temporary left", exists(path) && no_tmp(path));
	dg_trace t;
	int rc = dg_trace_open(&t, path);
	CHECK("round trip: open", rc == 0);
	if (rc) {
		fixture_free(&fx);
		return;
	}
	const dg_trace_meta *a = &t.meta, *b = &fx.m;
	CHECK("meta: shape", a->steps == 3 && a->layers == 2 && a->heads == 3 && a->tokens == 37 && a->head_dim == 24);
	CHECK("meta: grid and text tokens", a->grid[0] == 2 && a->grid[1] == 3 && a->grid[2] == 5 && a->text_tokens == 7);
	CHECK("meta: indices", !memcmp(a->step_index, b->step_index, 3 * sizeof(int)) &&
	      !memcmp(a->layer_index, b->layer_index, 2 * sizeof(int)) && !memcmp(a->head_index, b->head_index, 3 * sizeof(int)));
	CHECK("meta: timestep and sigma", !memcmp(a->timestep, b->timestep, 3 * sizeof(float)) &&
	      !memcmp(a->sigma, b->sigma, 3 * sizeof(float)));
	CHECK("meta: strings (UTF-8 too)", !strcmp(a->model, b->model) && !strcmp(a->source, b->source) &&
	      !strcmp(a->created_by, b->created_by) && !strcmp(a->config, b->config));
	CHECK("meta: version", a->version == DG_TRACE_VERSION);
	CHECK("dtype bf16, read raw", !strcmp(t.dtype, "bf16") && t.raw_bf16);
	struct stat st;
	CHECK("file_size from stat", stat(path, &st) == 0 && st.st_size == t.file_size);
	float *out = dg_alloc_poisoned(unit_size(a));
	size_t bad = 0, units = 0;
	for (int q = 0; q < DG_QKV_COUNT; q++)
		for (int s = 0; s < a->steps; s++)
			for (int l = 0; l < a->layers; l++)
				for (int h = 0; h < a->heads; h++, units++) {
					const float *in = unit_of(&fx, q, s, l, h);
					if (dg_trace_read(&t, q, s, l, h, out)) {
						bad++;
						continue;
					}
					for (size_t i = 0; i < unit_size(a); i++)
						bad += bits(out[i]) != bits(dg_round_bf16(in[i]));
				}
	CHECKF(bad == 0, "round trip: %zu units read back bit-exact as bf16 rounding of what was written", units);
	dg_trace_read(&t, DG_QKV_Q, 0, 0, 0, out);
	CHECK("round trip: specials (-0, subnormal, halfway cases)", bits(out[1]) == 0x80000000u && out[4] > 0 &&
	      out[6] == 1.0f && out[7] == 1.015625f && out[8] == 65536.0f);
	free(out);
	dg_trace_close(&t);
	fixture_free(&fx);
}

/* ---- writer misuse ------------------------------------------------------------------------------ */

static void test_writer_errors(gsl_rng *r)
{
	fixture fx;
	fixture_make(&fx, r);
	dg_trace_writer w;
	const char *path = tpath("holes.h5");
	capture_begin();
	int rc = dg_trace_writer_open(&w, path, &fx.m);
	rc |= dg_trace_writer_put(&w, DG_QKV_Q, 0, 0, 0, fx.data[0]);
	int fin = dg_trace_writer_finish(&w);
	const char *e = capture_end();
	CHECK("writer: a unit never written fails finish", rc == 0 && fin == -1 &&
	      one_line_with(e, "holes.h5: /q at step 10 layer 3 head 5 was never written"));
	CHECK("writer: ... and leaves no file", !exists(path) && no_tmp(path));

	path = tpath("nan.h5");
	fx.data[1][5] = NAN;
	capture_begin();
	rc = dg_trace_writer_open(&w, path, &fx.m);
	int put = dg_trace_writer_put(&w, DG_QKV_K, 0, 0, 0, fx.data[1]);
	dg_trace_writer_abort(&w);
	e = capture_end();
	CHECK("writer: NaN rejected", rc == 0 && put == -1 && one_line_with(e, "non-finite value in /k at step 10 layer 3 head 0 (token 0, dim 5)"));
	CHECK("writer: abort leaves no file", !exists(path) && no_tmp(path));

	fx.m.text_tokens = 6;
	capture_begin();
	rc = dg_trace_writer_open(&w, tpath("grid.h5"), &fx.m);
	e = capture_end();
	CHECK("writer: grid + text tokens must make tokens", rc == -1 && one_line_with(e, "does not make 37 tokens"));
	fx.m.text_tokens = 7;

	capture_begin();
	rc = dg_trace_writer_open(&w, "/proc/nonexistent/x.h5", &fx.m);
	e = capture_end();
	CHECK("writer: unwritable directory", rc == -1 && one_line_with(e, "cannot create /proc/nonexistent/x.h5"));
	fixture_free(&fx);
}

/* ---- bad input ---------------------------------------------------------------------------------- */

/* Copy src to dst byte for byte (n < 0: all of it). */
static void copy_file(const char *src, const char *dst, long n)
{
	FILE *a = fopen(src, "rb"), *b = fopen(dst, "wb");
	DG_ASSERT(a && b);
	int c;
	for (long i = 0; (n < 0 || i < n) && (c = getc(a)) != EOF; i++)
		putc(c, b);
	fclose(a);
	fclose(b);
}

/* 16-bit float types as h5py (f16) and docs/spec.md §6 (bf16) define them on HDF5 1.10 */
static hid_t half_type(int bf16)
{
	hid_t t = H5Tcopy(H5T_IEEE_F32LE);
	if (bf16)
		H5Tset_fields(t, 15, 7, 8, 0, 7);
	else
		H5Tset_fields(t, 15, 10, 5, 0, 10);
	H5Tset_size(t, 2);
	H5Tset_ebias(t, bf16 ? 127 : 15);
	return t;
}

/*
 * x rounded to the nearest f16 (ties to even), as a float. f16 test data is made of such values:
 * HDF5 1.10.8's own float32 -> f16 conversion, once any earlier value of the buffer came out
 * subnormal, drops the carry of later values that round up into the next binade (7.9992 -> 4).
 */
static float round_f16(float x)
{
	int e;
	if (x == 0)
		return x;
	frexp(fabs(x), &e);
	double spacing = ldexp(1, (e - 1 < -14 ? -14 : e - 1) - 10);
	return (float)copysign(nearbyint(fabs(x) / spacing) * spacing, x);
}

/* Replace dataset NAME by one of type ft and the given dims, filled from data (native floats or
 * ints, per mt). */
static void replace(hid_t f, const char *name, hid_t ft, hid_t mt, int rank, const hsize_t *dims, const void *data)
{
	H5Ldelete(f, name, H5P_DEFAULT);
	hid_t sp = rank ? H5Screate_simple(rank, dims, NULL) : H5Screate(H5S_SCALAR);
	hid_t d = H5Dcreate2(f, name, ft, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
	DG_ASSERT(d >= 0);
	if (data)
		DG_ASSERT(H5Dwrite(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
	H5Dclose(d);
	H5Sclose(sp);
}

typedef enum {
	BAD_NONE, BAD_NO_FORMAT, BAD_FORMAT, BAD_VERSION, BAD_MISSING_V, BAD_RANK, BAD_INT, BAD_F64,
	BAD_K_SHAPE, BAD_STEP_INDEX, BAD_GRID, BAD_HEAD_DIM, BAD_TOKENS, BAD_NAN, TO_F32, TO_F16,
} mutation;

/* A copy of the good trace at good with one thing changed. */
static const char *mutate(const char *good, const char *name, mutation what, const fixture *fx)
{
	const char *path = tpath(name);
	copy_file(good, path, -1);
	hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
	DG_ASSERT(f >= 0);
	const dg_trace_meta *m = &fx->m;
	hsize_t dims[5] = { m->steps, m->layers, m->heads, m->tokens, m->head_dim };
	size_t n = dims[0] * dims[1] * dims[2] * dims[3] * dims[4];
	int *ints = dg_calloc(n, sizeof(int));
	float *nan = dg_malloc(n * sizeof(float));
	memcpy(nan, fx->data[0], n * sizeof(float));
	nan[(((size_t)1 * m->layers + 1) * m->heads + 2) * unit_size(m) + 3 * m->head_dim + 4] = NAN;
	int v2 = 2, g[3] = { 2, 3, 6 };
	hsize_t big[5] = { 3, 2, 3, 37, 2000 }, huge[5] = { 3, 2, 3, 1000000000, 24 }; /* huge: never written */
	switch (what) {
	case BAD_NONE: break;
	case BAD_NO_FORMAT: H5Adelete(f, "format"); break;
	case BAD_FORMAT: {
		H5Adelete(f, "format");
		hid_t t = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR);
		H5Tset_size(t, 8);
		hid_t a = H5Acreate2(f, "format", t, sp, H5P_DEFAULT, H5P_DEFAULT);
		H5Awrite(a, t, "foobar\0\0");
		H5Aclose(a), H5Sclose(sp), H5Tclose(t);
		break;
	}
	case BAD_VERSION: {
		hid_t a = H5Aopen(f, "version", H5P_DEFAULT);
		H5Awrite(a, H5T_NATIVE_INT, &v2);
		H5Aclose(a);
		break;
	}
	case BAD_MISSING_V: H5Ldelete(f, "v", H5P_DEFAULT); break;
	case BAD_RANK: replace(f, "q", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 4, dims + 1, NULL); break;
	case BAD_INT: replace(f, "q", H5T_STD_I32LE, H5T_NATIVE_INT, 5, dims, ints); break;
	case BAD_F64: replace(f, "k", H5T_IEEE_F64LE, H5T_NATIVE_FLOAT, 5, dims, NULL); break;
	case BAD_K_SHAPE: {
		hid_t t = half_type(1);
		dims[3]--;
		replace(f, "k", t, H5T_NATIVE_FLOAT, 5, dims, NULL);
		H5Tclose(t);
		break;
	}
	case BAD_STEP_INDEX: dims[0]--; replace(f, "step_index", H5T_STD_I32LE, H5T_NATIVE_INT, 1, dims, ints); break;
	case BAD_GRID: replace(f, "grid", H5T_STD_I32LE, H5T_NATIVE_INT, 1, (hsize_t[]){ 3 }, g); break;
	case BAD_HEAD_DIM:
		for (int i = 0; i < 3; i++)
			replace(f, dg_qkv_name(i), H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 5, big, NULL);
		break;
	case BAD_TOKENS:
		for (int i = 0; i < 3; i++)
			replace(f, dg_qkv_name(i), H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 5, huge, NULL);
		break;
	case BAD_NAN:
	case TO_F32:
	case TO_F16:
		for (int i = 0; i < 3; i++) {
			hid_t ft = what == TO_F16 ? half_type(0) : H5Tcopy(H5T_IEEE_F32LE);
			replace(f, dg_qkv_name(i), ft, H5T_NATIVE_FLOAT, 5, dims,
				what == BAD_NAN && i == 0 ? nan : fx->data[i]);
			H5Tclose(ft);
		}
		break;
	}
	H5Fclose(f);
	free(ints);
	free(nan);
	return path;
}

static void expect_open_error(const char *descr, const char *path, const char *want)
{
	dg_trace t;
	capture_begin();
	int rc = dg_trace_open(&t, path);
	const char *e = capture_end();
	CHECKF(rc == -1 && one_line_with(e, path) && one_line_with(e, want), "bad input: %s", descr);
	if (rc == 0)
		dg_trace_close(&t);
	else if (!one_line_with(e, want))
		printf("     got: %s", e);
}

static void test_bad_input(gsl_rng *r)
{
	fixture fx;
	fixture_make(&fx, r);
	for (size_t i = 0; i < 9; i++) /* the specials: f16 cannot hold -3e38 */
		fx.data[0][i] = 0.5f;
	char good[256];
	snprintf(good, sizeof good, "%s", tpath("good.h5"));
	DG_ASSERT(fixture_write(&fx, good) == 0);
	struct stat st;
	stat(good, &st);

	expect_open_error("nonexistent file", tpath("nothere.h5"), "cannot open");
	expect_open_error("not HDF5", "/etc/hostname", "not an HDF5 file");
	const char *p = tpath("trunc.h5");
	copy_file(good, p, st.st_size / 2);
	expect_open_error("truncated file", p, "truncated or corrupt HDF5 file");
	copy_file(good, p, 2048);
	expect_open_error("truncated to 2 KiB", p, "truncated or corrupt HDF5 file");
	expect_open_error("foreign HDF5 (no format attribute)", mutate(good, "nofmt.h5", BAD_NO_FORMAT, &fx),
			  "not a dsgap trace (no format attribute)");
	expect_open_error("other format", mutate(good, "fmt.h5", BAD_FORMAT, &fx), "not a dsgap trace (format attribute");
	expect_open_error("newer version", mutate(good, "v2.h5", BAD_VERSION, &fx), "trace version 2");
	expect_open_error("missing dataset", mutate(good, "nov.h5", BAD_MISSING_V, &fx), "missing dataset /v");
	expect_open_error("wrong rank", mutate(good, "rank.h5", BAD_RANK, &fx), "/q has rank 4, expected 5");
	expect_open_error("integer q", mutate(good, "int.h5", BAD_INT, &fx), "/q has wrong dtype (integer)");
	expect_open_error("f64 k", mutate(good, "f64.h5", BAD_F64, &fx), "/k has wrong dtype (float of an unsupported layout)");
	expect_open_error("k shape differs", mutate(good, "kshape.h5", BAD_K_SHAPE, &fx), "/k has shape [3, 2, 3, 36, 24] but /q has [3, 2, 3, 37, 24]");
	expect_open_error("step_index length", mutate(good, "sidx.h5", BAD_STEP_INDEX, &fx), "/step_index has 2 values");
	expect_open_error("grid inconsistent", mutate(good, "grid.h5", BAD_GRID, &fx), "2x3x6 + 7 text tokens = 43 tokens, but /q has 37");
	expect_open_error("head_dim over 1024", mutate(good, "hd.h5", BAD_HEAD_DIM, &fx), "head_dim 2000, expected 1..1024");
	expect_open_error("a unit of 1e9 tokens (declared, never written)", mutate(good, "tokens.h5", BAD_TOKENS, &fx),
			  "/q has 1000000000 tokens, expected 1..16777216");

	dg_trace t;
	float *out = dg_alloc_poisoned(unit_size(&fx.m));
	p = mutate(good, "nan.h5", BAD_NAN, &fx);
	int rc = dg_trace_open(&t, p);
	CHECK("f32 trace with a NaN opens", rc == 0 && !strcmp(t.dtype, "f32") && !t.raw_bf16);
	if (rc == 0) {
		capture_begin();
		int r1 = dg_trace_read(&t, DG_QKV_Q, 1, 1, 2, out);
		const char *e = capture_end();
		CHECK("bad input: NaN in q reported with its unit", r1 == -1 &&
		      one_line_with(e, "nan.h5: non-finite value in /q at step 15 layer 17 head 11 (token 3, dim 4)"));
		CHECK("... other units still read", dg_trace_read(&t, DG_QKV_Q, 0, 1, 2, out) == 0);
		dg_trace_close(&t);
	}
	for (int f16 = 0; f16 < 2; f16++) {
		size_t total = (size_t)fx.m.steps * fx.m.layers * fx.m.heads * unit_size(&fx.m);
		for (int q = 0; q < 3 && f16; q++)
			for (size_t i = 0; i < total; i++)
				fx.data[q][i] = round_f16(fx.data[q][i]);
		p = mutate(good, f16 ? "f16.h5" : "f32.h5", f16 ? TO_F16 : TO_F32, &fx);
		rc = dg_trace_open(&t, p);
		CHECKF(rc == 0 && !strcmp(t.dtype, f16 ? "f16" : "f32"), "%s trace opens as %s", f16 ? "f16" : "f32", f16 ? "f16" : "f32");
		if (rc)
			continue;
		size_t bad = 0;
		for (int q = 0; q < 3; q++) {
			int ok = dg_trace_read(&t, q, 2, 1, 0, out) == 0;
			const float *in = unit_of(&fx, q, 2, 1, 0);
			for (size_t i = 0; i < unit_size(&fx.m); i++)
				bad += !ok || bits(out[i]) != bits(in[i]);
		}
		CHECKF(bad == 0, "%s trace reads back exactly through HDF5's conversion", f16 ? "f16" : "f32");
		dg_trace_close(&t);
	}
	free(out);
	fixture_free(&fx);
}

/* ---- synth -------------------------------------------------------------------------------------- */

/* attention probabilities (tokens, tokens) of one unit, fp64 */
static void attention(const float *q, const float *k, int n, int d, double *p)
{
	for (int i = 0; i < n; i++) {
		double mx = -INFINITY, sum = 0;
		for (int j = 0; j < n; j++) {
			double s = 0;
			for (int c = 0; c < d; c++)
				s += (double)q[(size_t)i * d + c] * k[(size_t)j * d + c];
			p[(size_t)i * n + j] = s / sqrt(d);
			mx = fmax(mx, p[(size_t)i * n + j]);
		}
		for (int j = 0; j < n; j++)
			sum += p[(size_t)i * n + j] = exp(p[(size_t)i * n + j] - mx);
		for (int j = 0; j < n; j++)
			p[(size_t)i * n + j] /= sum;
	}
}

static int desc(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x < y) - (x > y);
}

/* mean over queries of the mass held by the top 15% of keys */
static double top15_mass(const double *p, int n)
{
	double *row = dg_malloc(n * sizeof(double)), total = 0;
	int keep = (int)ceil(0.15 * n);
	for (int i = 0; i < n; i++) {
		memcpy(row, p + (size_t)i * n, n * sizeof(double));
		qsort(row, n, sizeof(double), desc);
		for (int j = 0; j < keep; j++)
			total += row[j];
	}
	free(row);
	return total / n;
}

static double rel_diff(const float *a, const float *b, size_t n)
{
	double num = 0, den = 0;
	for (size_t i = 0; i < n; i++) {
		num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
		den += (double)b[i] * b[i];
	}
	return sqrt(num / den);
}

static double cosine(const float *a, const float *b, int d)
{
	double ab = 0, aa = 0, bb = 0;
	for (int c = 0; c < d; c++)
		ab += (double)a[c] * b[c], aa += (double)a[c] * a[c], bb += (double)b[c] * b[c];
	return ab / sqrt(aa * bb);
}

static void test_synth(void)
{
	dg_synth_opts o;
	dg_synth_defaults(&o);
	const char *path = tpath("synth.h5");
	CHECK("synth: defaults write", dg_synth(&o, path) == 0 && no_tmp(path));
	dg_trace t;
	if (dg_trace_open(&t, path)) {
		CHECK("synth: opens", 0);
		return;
	}
	const dg_trace_meta *m = &t.meta;
	int n = m->tokens, d = m->head_dim, F = m->grid[0], H = m->grid[1], W = m->grid[2];
	CHECK("synth: shape [8, 2, 4, 1024, 64], grid 4x16x16",
	      m->steps == 8 && m->layers == 2 && m->heads == 4 && n == 1024 && d == 64 && F == 4 && H == 16 && W == 16);
	int sched = 1;
	for (int s = 0; s < m->steps; s++) {
		double tt = 1 - s / 50.0, sigma = 5 * tt / (1 + 4 * tt);
		sched &= m->step_index[s] == s && fabs(m->sigma[s] - sigma) < 1e-6 && fabs(m->timestep[s] - 1000 * sigma) < 1e-3;
	}
	CHECK("synth: steps 0..7 of a 50-step shift-5 schedule", sched && m->sigma[0] == 1.0f);
	CHECK("synth: model, source, created_by", !strcmp(m->model, "synthetic") && !strcmp(m->source, "synthetic") &&
	      !strcmp(m->created_by, "dsgap " DG_VERSION " synth"));
	cJSON *cfg = cJSON_Parse(m->config);
	cJSON *sinks = cJSON_GetObjectItem(cfg, "sink_tokens");
	CHECK("synth: config is JSON with the options", cJSON_GetNumberValue(cJSON_GetObjectItem(cfg, "seed")) == 1 &&
	      cJSON_GetNumberValue(cJSON_GetObjectItem(cfg, "head_dim")) == 64 && cJSON_IsArray(sinks));

	size_t u = (size_t)n * d;
	float *q = dg_malloc(m->heads * u * sizeof(float)), *k = dg_malloc(u * sizeof(float));
	float *v = dg_malloc(u * sizeof(float)), *q1 = dg_malloc(u * sizeof(float)), *q7 = dg_malloc(u * sizeof(float));
	double *p = dg_malloc((size_t)n * n * sizeof(double));
	for (int l = 0; l < m->layers; l++) {
		for (int h = 0; h < m->heads; h++) {
			float *qh = q + h * u;
			dg_synth_kind kind = dg_synth_head_kind(l, h);
			const char *name = dg_synth_kind_name(kind);
			if (dg_trace_read(&t, DG_QKV_Q, 0, l, h, qh) || dg_trace_read(&t, DG_QKV_K, 0, l, h, k) ||
			    dg_trace_read(&t, DG_QKV_V, 0, l, h, v) || dg_trace_read(&t, DG_QKV_Q, 1, l, h, q1) ||
			    dg_trace_read(&t, DG_QKV_Q, 7, l, h, q7)) {
				CHECK("synth: read", 0);
				continue;
			}
			attention(qh, k, n, d, p);
			double top = top15_mass(p, n), same = 0, sink = 0;
			for (int i = 0; i < n; i++)
				for (int f = 0; f < F; f++)
					same += p[(size_t)i * n + f * H * W + i % (H * W)];
			same /= n;
			cJSON *sl = cJSON_GetArrayItem(cJSON_GetArrayItem(sinks, l), h), *it;
			cJSON_ArrayForEach(it, sl)
				for (int i = 0; i < n; i++)
					sink += p[(size_t)i * n + it->valueint] / n;
			printf("     layer %d head %d %-8s top-15%% mass %.3f, same (y,x) %.3f, sinks (%d) %.3f\n", l, h,
			       name, top, same, cJSON_GetArraySize(sl), sink);
			if (kind == DG_SYNTH_LOCAL)
				CHECKF(top >= 0.6 && top <= 0.95 && same < 0.5, "synth: layer %d head %d local: top 15%% hold %.3f in [0.6, 0.95]", l, h, top);
			if (kind == DG_SYNTH_FRAME)
				CHECKF(top >= 0.6 && top <= 0.95 && same > 0.4, "synth: layer %d head %d frame: same (y,x) in every frame holds %.3f > 0.4", l, h, same);
			if (kind == DG_SYNTH_SINK)
				CHECKF(sink > 0.5 && cJSON_GetArraySize(sl) >= 2 && cJSON_GetArraySize(sl) <= 4,
				       "synth: layer %d head %d sink: %d sinks hold %.3f > 0.5", l, h, cJSON_GetArraySize(sl), sink);
			if (kind == DG_SYNTH_DIFFUSE)
				CHECKF(top < 0.4, "synth: layer %d head %d diffuse: top 15%% hold %.3f < 0.4", l, h, top);
			double r1 = rel_diff(q1, qh, u), r7 = rel_diff(q7, qh, u);
			CHECKF(r1 > 1e-3 && r1 < r7, "synth: layer %d head %d q drifts: step 1 differs by %.3f < step 7 by %.3f", l, h, r1, r7);
			double near = 0, far = 0;
			for (int i = 0; i + 1 < n; i++) {
				near += cosine(v + (size_t)i * d, v + (size_t)(i + 1) * d, d) / (n - 1);
				far += cosine(v + (size_t)i * d, v + (size_t)((i * 389 + 517) % n) * d, d) / (n - 1);
			}
			CHECKF(near > far + 0.3, "synth: layer %d head %d v smooth: neighbours' cosine %.2f, random pairs' %.2f", l, h, near, far);
		}
		double least = INFINITY;
		for (int a = 0; a < m->heads; a++)
			for (int b = a + 1; b < m->heads; b++)
				least = fmin(least, rel_diff(q + a * u, q + b * u, u));
		CHECKF(least > 0.5, "synth: layer %d heads differ (least relative difference of q %.2f)", l, least);
	}
	cJSON_Delete(cfg);
	dg_trace_close(&t);

	const char *again = tpath("synth2.h5"), *other = tpath("synth3.h5");
	dg_trace a, b;
	int same_seed = dg_synth(&o, again) == 0 && dg_trace_open(&a, again) == 0;
	o.seed = 2;
	int other_seed = same_seed && dg_synth(&o, other) == 0 && dg_trace_open(&b, other) == 0;
	if (other_seed && dg_trace_open(&t, path) == 0) {
		dg_trace_read(&t, DG_QKV_V, 5, 1, 3, q1);
		dg_trace_read(&a, DG_QKV_V, 5, 1, 3, q7);
		dg_trace_read(&b, DG_QKV_V, 5, 1, 3, k);
		CHECK("synth: same seed, same trace", !memcmp(q1, q7, u * sizeof(float)));
		CHECK("synth: another seed, another trace", rel_diff(k, q1, u) > 0.5);
		dg_trace_close(&t);
	}
	if (other_seed) {
		dg_trace_close(&a);
		dg_trace_close(&b);
	}
	free(q), free(k), free(v), free(q1), free(q7), free(p);

	dg_synth_opts bad;
	struct { const char *what, *want; int field, value; } cases[] = {
		{ "head_dim 16", "head_dim 16 out of range 32..256", 0, 16 },
		{ "steps 51", "steps 51 out of range 1..50", 1, 51 },
		{ "heads 0", "heads 0 out of range", 2, 0 },
		{ "grid 0x16x16", "grid 0x16x16 has an empty dimension", 3, 0 },
		{ "grid 4096x4096x1", "tokens, at most", 4, 4096 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		dg_synth_defaults(&bad);
		int *f[] = { &bad.head_dim, &bad.steps, &bad.heads, &bad.grid[0], &bad.grid[0] };
		*f[cases[i].field] = cases[i].value;
		if (cases[i].field == 4)
			bad.grid[1] = 4096, bad.grid[2] = 1;
		capture_begin();
		int rc = dg_synth(&bad, tpath("bad.h5"));
		const char *e = capture_end();
		CHECKF(rc == -1 && one_line_with(e, cases[i].want) && !exists(tpath("bad.h5")), "synth rejects %s", cases[i].what);
	}
}

/* --text T: the text prefix first, then the grid's tokens as without it (bit for bit); the prefix the same
 * at every step and unlike every video token's; the spec round-trips the key; out-of-range counts refused */
static void test_synth_text(void)
{
	dg_synth_opts o;
	dg_synth_defaults(&o);
	o.grid[0] = 2, o.grid[1] = 4, o.grid[2] = 6, o.heads = 2, o.layers = 1, o.steps = 3;
	const char *plain = tpath("synth_plain.h5"), *joint = tpath("synth_text.h5");
	int rc = dg_synth(&o, plain);
	o.text = 37;
	rc = rc || dg_synth(&o, joint);
	dg_trace a, b;
	if (rc || dg_trace_open(&a, plain)) {
		CHECK("synth --text: writes", 0);
		return;
	}
	if (dg_trace_open(&b, joint)) {
		dg_trace_close(&a);
		CHECK("synth --text: opens", 0);
		return;
	}
	int nv = a.meta.tokens, d = a.meta.head_dim, T = o.text;
	CHECK("synth --text: text_tokens 37, tokens = 37 + grid product, the grid kept",
	      b.meta.text_tokens == T && b.meta.tokens == T + nv && a.meta.text_tokens == 0 &&
	      !memcmp(a.meta.grid, b.meta.grid, sizeof a.meta.grid));
	size_t uv = (size_t)nv * d, ut = (size_t)T * d;
	float *x = dg_malloc(uv * sizeof(float)), *y = dg_malloc((ut + uv) * sizeof(float));
	float *y0 = dg_malloc((ut + uv) * sizeof(float));
	int video_same = 1, text_fixed = 1, text_apart = 1;
	for (int q = 0; q < DG_QKV_COUNT; q++)
		for (int s = 0; s < o.steps; s++)
			for (int h = 0; h < o.heads; h++) {
				if (dg_trace_read(&a, q, s, 0, h, x) || dg_trace_read(&b, q, s, 0, h, y) ||
				    dg_trace_read(&b, q, 0, 0, h, y0)) {
					video_same = 0;
					continue;
				}
				video_same &= !memcmp(x, y + ut, uv * sizeof(float));
				text_fixed &= !memcmp(y, y0, ut * sizeof(float));
				text_apart &= rel_diff(y, y + ut, ut < uv ? ut : uv) > 0.5;
			}
	CHECK("synth --text: the video tokens equal the trace without text, bit for bit", video_same);
	CHECK("synth --text: the text prefix is the same at every step", text_fixed);
	CHECK("synth --text: the text prefix differs from the video tokens", text_apart);
	free(x), free(y), free(y0);
	dg_trace_close(&a);
	dg_trace_close(&b);

	char *spec = dg_synth_spec(&o), err[256];
	dg_synth_opts back;
	CHECK("synth --text: the spec writes text=37 and parses back",
	      strstr(spec, " text=37") && !dg_synth_spec_parse(spec, &back, err, sizeof err) && back.text == 37);
	free(spec);
	o.text = 0;
	spec = dg_synth_spec(&o);
	CHECK("synth: no text key without text (the specs of earlier experiments unchanged)", !strstr(spec, "text"));
	free(spec);
	o.text = 4097;
	capture_begin();
	rc = dg_synth(&o, tpath("bad_text.h5"));
	const char *e = capture_end();
	CHECK("synth rejects 4097 text tokens", rc == -1 && one_line_with(e, "4097 text tokens out of range 0..4096") &&
	      !exists(tpath("bad_text.h5")));
}

/* ---- interop fixture ---------------------------------------------------------------------------- */

static int write_fixture(const char *h5, const char *raw)
{
	gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
	gsl_rng_set(r, 42);
	fixture fx;
	fixture_make(&fx, r);
	gsl_rng_free(r);
	dg_trace t;
	int rc = fixture_write(&fx, h5) || dg_trace_open(&t, h5);
	FILE *f = rc ? NULL : fopen(raw, "wb");
	if (f) {
		float *out = dg_malloc(unit_size(&fx.m) * sizeof(float));
		for (int q = 0; q < DG_QKV_COUNT && !rc; q++)
			for (int s = 0; s < fx.m.steps && !rc; s++)
				for (int l = 0; l < fx.m.layers && !rc; l++)
					for (int h = 0; h < fx.m.heads && !rc; h++)
						rc = dg_trace_read(&t, q, s, l, h, out) ||
						     fwrite(out, sizeof(float), unit_size(&fx.m), f) != unit_size(&fx.m);
		free(out);
		rc |= fclose(f) != 0;
		dg_trace_close(&t);
	} else if (!rc) {
		dg_trace_close(&t);
		rc = 1;
	}
	fixture_free(&fx);
	return rc ? 1 : 0;
}

static void remove_dir(void)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd))
		printf("could not remove %s\n", dir);
}

int main(int argc, char **argv)
{
	H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
	if (argc == 4 && !strcmp(argv[1], "--fixture"))
		return write_fixture(argv[2], argv[3]);
	snprintf(dir, sizeof dir, "/tmp/dsgap-test-trace.XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	unsigned long seed = getenv("DG_TEST_SEED") ? strtoul(getenv("DG_TEST_SEED"), NULL, 10)
						    : (unsigned long)time(NULL) ^ ((unsigned long)getpid() << 16);
	printf("seed %lu (DG_TEST_SEED=%lu repeats this run)\n", seed, seed);
	gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
	gsl_rng_set(r, seed);
	test_bf16();
	test_round_trip(r);
	test_chunk_bytes(r);
	test_writer_errors(r);
	test_bad_input(r);
	test_synth();
	test_synth_text();
	gsl_rng_free(r);
	remove_dir();
	return test_report();
}
