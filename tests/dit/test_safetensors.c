/*
 * test_safetensors.c: the safetensors reader (src/dit/safetensors.h): every header rule with its
 * one-line message, F16/BF16 conversion (exhaustive), sharded indexes, and a deterministic mutation
 * loop over the header parser (no crash; every failure exactly one line; every success a tiling of
 * the file). tests/dit/fuzz_safetensors.c is the libFuzzer version of the loop.
 *   ctest -R test_safetensors        (or: build-dir/tests/test_safetensors [iterations])
 */
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dit/safetensors.h"
#include "testhelp.h"
#include "util/util.h"

/* ---------------------------------------------------------------------------------------------- */
/* stderr capture: what the code under test reported                                              */

static int saved_stderr = -1, cap_fd = -1;
static char cap_path[] = "/tmp/dsgap_st_XXXXXX";
static off_t cap_mark;

static void capture_begin(void)
{
	fflush(stderr);
	cap_mark = lseek(cap_fd, 0, SEEK_END);
}

/* the text written to stderr since capture_begin (static buffer), and its line count */
static const char *capture_end(int *lines)
{
	static char buf[4096];
	fflush(stderr);
	off_t end = lseek(cap_fd, 0, SEEK_END);
	size_t n = (size_t)(end - cap_mark) < sizeof buf - 1 ? (size_t)(end - cap_mark) : sizeof buf - 1;
	ssize_t r = pread(cap_fd, buf, n, cap_mark);
	buf[r > 0 ? r : 0] = 0;
	*lines = 0;
	for (char *p = buf; *p; p++)
		*lines += *p == '\n';
	return buf;
}

static void capture_init(void)
{
	cap_fd = mkstemp(cap_path);
	unlink(cap_path);
	saved_stderr = dup(2);
	dup2(cap_fd, 2);
}

static void capture_done(void)
{
	fflush(stderr);
	dup2(saved_stderr, 2);
	close(saved_stderr);
	close(cap_fd);
}

/* ---------------------------------------------------------------------------------------------- */
/* building files in memory                                                                        */

typedef struct {
	unsigned char *p;
	size_t n;
} buf;

/* 8-byte length + header (padded with spaces to 8 unless raw) + data_len bytes of data */
static buf make(const char *header, size_t data_len, int pad)
{
	size_t h = strlen(header), hp = pad ? (h + 7) / 8 * 8 : h;
	buf b = { dg_calloc(8 + hp + data_len + 1, 1), 8 + hp + data_len };
	for (int i = 0; i < 8; i++)
		b.p[i] = (unsigned char)((uint64_t)hp >> (8 * i));
	memcpy(b.p + 8, header, h);
	memset(b.p + 8 + h, ' ', hp - h);
	for (size_t i = 0; i < data_len; i++)
		b.p[8 + hp + i] = (unsigned char)(i * 37 + 11);
	return b;
}

/* parse b; expect success (want == NULL) or a failure whose one line contains want */
static void expect(const char *what, buf b, const char *want)
{
	dg_st_tensor *t;
	int n, lines;
	capture_begin();
	int rc = dg_st_parse("x.safetensors", b.p, b.n, &t, &n);
	const char *msg = capture_end(&lines);
	if (!want) {
		CHECKF(rc == 0 && lines == 0, "%s: parses (%.120s)", what, rc ? msg : "ok");
	} else {
		CHECKF(rc == -1 && lines == 1 && strstr(msg, want) && strstr(msg, "x.safetensors"),
		       "%s: one line naming '%s' (got: %.*s)", what, want, (int)(strcspn(msg, "\n") < 120 ? strcspn(msg, "\n") : 120), msg);
	}
	if (!rc)
		dg_st_tensors_free(t, n);
	free(b.p);
}

static void header_rules(void)
{
	const char *ok2 = "{\"__metadata__\":{\"format\":\"pt\"},"
			  "\"b\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[24,32]},"
			  "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}";
	expect("two tensors, metadata, out of order", make(ok2, 32, 1), NULL);
	expect("no tensors", make("{}", 0, 1), NULL);
	expect("unpadded header", make(ok2, 32, 0), NULL);
	expect("scalar and empty tensors",
	       make("{\"s\":{\"dtype\":\"F16\",\"shape\":[],\"data_offsets\":[0,2]},"
		    "\"e\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[2,2]}}", 2, 1), NULL);
	{ /* fields and sorting */
		buf b = make(ok2, 32, 1);
		dg_st_tensor *t;
		int n;
		int rc = dg_st_parse("x", b.p, b.n, &t, &n);
		size_t base = 8 + (strlen(ok2) + 7) / 8 * 8;
		CHECK("fields: names sorted, absolute offsets, dtypes, shapes",
		      rc == 0 && n == 2 && !strcmp(t[0].name, "a") && t[0].offset == base && t[0].nbytes == 24 &&
			      t[0].dtype == DG_ST_F32 && t[0].ndim == 2 && t[0].shape[1] == 3 &&
			      !strcmp(t[1].name, "b") && t[1].offset == base + 24 && t[1].dtype == DG_ST_BF16);
		if (!rc)
			dg_st_tensors_free(t, n);
		free(b.p);
	}
	buf b = make("{}", 0, 1);
	b.n = 5;
	expect("shorter than 8 bytes", b, "fewer than the 8-byte");
	b = make("{}", 0, 1);
	b.p[5] = 0x01; /* length 2^40 + 8 */
	expect("header length over the limit", b, "over the 100000000-byte limit");
	b = make("{}", 0, 1);
	b.p[0] = 64;
	expect("header length past the end", b, "runs past the end");
	b = make("{}", 0, 1);
	memset(b.p, 0, 8);
	expect("empty header", b, "is empty");
	expect("malformed JSON", make("{\"a\":{\"dtype\":\"F32\",", 0, 1), "malformed JSON header near byte");
	expect("not an object", make("[1,2]", 0, 1), "not a JSON object");
	expect("a tensor's shape twice (cJSON read the first, safetensors refuses)",
	       make("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"shape\":[2],\"data_offsets\":[0,4]}}", 4, 1),
	       "the header has the key \"shape\" twice in one object");
	expect("junk after the JSON", make("{} x", 0, 0), "unexpected bytes after the JSON header at byte 11");
	b = make("{\"a\xff\":1}", 0, 1);
	expect("invalid UTF-8", b, "not valid UTF-8 JSON at byte 11");
	expect("entry not an object", make("{\"a\":3}", 0, 1), "tensor 'a': header entry is not an object");
	expect("no dtype", make("{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, 1), "tensor 'a': missing or non-string \"dtype\"");
	expect("dtype dsgap does not read", make("{\"w\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8, 1),
	       "tensor 'w' has dtype I64, which dsgap does not read");
	expect("unknown dtype", make("{\"w\":{\"dtype\":\"Q4\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, 1),
	       "tensor 'w' has unknown dtype 'Q4'");
	expect("shape not an array", make("{\"w\":{\"dtype\":\"F32\",\"shape\":3,\"data_offsets\":[0,4]}}", 4, 1),
	       "tensor 'w': missing or non-array \"shape\"");
	expect("negative dimension", make("{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, 1),
	       "tensor 'w': shape entry 0 is not a non-negative integer");
	expect("fractional dimension", make("{\"w\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, 1),
	       "shape entry 0");
	expect("nine dimensions", make("{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, 1),
	       "tensor 'w' has 9 dimensions");
	expect("shape overflow", make("{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", 4, 1),
	       "tensor 'w': shape overflows 64 bits");
	expect("bad data_offsets", make("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, 1),
	       "tensor 'w': \"data_offsets\" must be [begin, end]");
	expect("end before begin", make("{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,0]}}", 4, 1),
	       "tensor 'w': data_offsets [4, 0] end before they begin");
	expect("size mismatch", make("{\"w\":{\"dtype\":\"BF16\",\"shape\":[3,2],\"data_offsets\":[0,8]}}", 8, 1),
	       "tensor 'w': shape [3, 2] of BF16 is 12 bytes but data_offsets [0, 8] span 8");
	expect("overlap", make("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
			       "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, 1),
	       "tensor 'b' (data bytes 4-12) overlaps tensor 'a'");
	expect("hole", make("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
			    "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 12, 1),
	       "hole in the data buffer before tensor 'b' (data bytes 4-8 unused)");
	expect("not starting at 0", make("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, 1),
	       "hole in the data buffer before tensor 'a'");
	b = make("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 16, 1);
	b.n -= 3;
	expect("truncated", b, "tensor 'a' has data_offsets [0, 16], past the end of the data buffer (13 bytes; "
	       "the file: 77)");
	expect("data_offsets past the end, not a hole (issue 52)",
	       make("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
		    "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[100,104]}}", 8, 1),
	       "tensor 'b' has data_offsets [100, 104], past the end of the data buffer (8 bytes");
	expect("trailing data", make("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 9, 1),
	       "5 bytes after the last tensor (from byte 68)");
	expect("duplicate names", make("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
				       "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, 1),
	       "the header has the key \"a\" twice in one object");
	expect("metadata not a map of strings", make("{\"__metadata__\":{\"k\":1}}", 0, 1),
	       "__metadata__ entry 'k' is not a string");
	expect("empty name", make("{\"\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, 1),
	       "tensor with an empty name");
	expect("control bytes in a name are not printed",
	       make("{\"a\\nb\":{\"dtype\":\"Q\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, 1), "tensor 'a?b'");
}

/* ---------------------------------------------------------------------------------------------- */
/* conversion                                                                                      */

static void conversions(void)
{
	int bad = 0;
	for (uint32_t h = 0; h < 65536; h++) {
		int sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
		double want = e == 31 ? (m ? NAN : INFINITY) : e ? ldexp(1 + m / 1024.0, e - 15) : ldexp(m, -24);
		if (sign)
			want = -want;
		float got = dg_f16_to_f32((uint16_t)h);
		if (isnan(want) ? !isnan(got) : (double)got != want)
			bad++;
	}
	CHECKF(bad == 0, "F16 -> F32 exact for all 65536 values (%d wrong)", bad);

	/* a file with F32, BF16 and F16 tensors read back as float and as bf16 words */
	const char *hdr = "{\"f\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
			  "\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[8,12]},"
			  "\"h\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[12,16]}}";
	buf b = make(hdr, 16, 1);
	size_t base = b.n - 16;
	float f32[2] = { 1.00390625f /* 1 + 2^-8: a bf16 tie, rounds to even = 1 */, -3.25f };
	memcpy(b.p + base, f32, 8);
	uint16_t bw[2] = { 0x3fc0 /* 1.5 */, 0xc040 /* -3 */ }, hw[2] = { 0x3c00 /* 1 */, 0x0001 /* 2^-24 */ };
	memcpy(b.p + base + 8, bw, 4);
	memcpy(b.p + base + 12, hw, 4);
	char path[] = "/tmp/dsgap_stf_XXXXXX";
	int fd = mkstemp(path);
	CHECK("write a temporary file", fd >= 0 && write(fd, b.p, b.n) == (ssize_t)b.n);
	close(fd);
	dg_safetensors st;
	int rc = dg_st_open(&st, path);
	CHECK("open it", rc == 0 && st.ntensors == 3);
	if (!rc) {
		float o[2];
		uint16_t w[2];
		dg_st_read_f32(&st, dg_st_find(&st, "f"), o);
		CHECK("F32 read", o[0] == f32[0] && o[1] == f32[1]);
		dg_st_read_bf16(&st, dg_st_find(&st, "f"), w);
		CHECK("F32 -> BF16 round to nearest even", w[0] == 0x3f80 && w[1] == 0xc050);
		dg_st_read_f32(&st, dg_st_find(&st, "b"), o);
		CHECK("BF16 read", o[0] == 1.5f && o[1] == -3.0f);
		dg_st_read_f32(&st, dg_st_find(&st, "h"), o);
		CHECK("F16 read (subnormal too)", o[0] == 1.0f && o[1] == ldexpf(1, -24));
		CHECK("find a missing name", dg_st_find(&st, "zz") == NULL);
		dg_st_close(&st);
	}
	/* a NaN is refused with the tensor's name */
	float nanv = NAN;
	memcpy(b.p + base + 4, &nanv, 4);
	fd = open(path, O_WRONLY | O_TRUNC);
	CHECK("rewrite", fd >= 0 && write(fd, b.p, b.n) == (ssize_t)b.n);
	close(fd);
	if (!dg_st_open(&st, path)) {
		float o[2];
		int lines;
		capture_begin();
		rc = dg_st_read_f32(&st, dg_st_find(&st, "f"), o);
		const char *msg = capture_end(&lines);
		CHECKF(rc == -1 && lines == 1 && strstr(msg, "tensor 'f' holds a non-finite value (element 1)"),
		       "NaN refused: %s", msg);
		dg_st_close(&st);
	}
	unlink(path);
	free(b.p);
}

/* dg_st_bf16_view: a BF16 tensor's own bytes (at an odd offset too), after the finiteness check of
 * dg_st_read_f32, whose element index it reports, for an Inf or NaN in every lane of its four-word
 * steps and in the tail; not for other dtypes */
static void bf16_views(void)
{
	enum { N = 37 };
	char hdr[160]; /* an odd length, unpadded: the data start at an odd offset */
	snprintf(hdr, sizeof hdr, "{\"b\":{\"dtype\":\"BF16\",\"shape\":[37],\"data_offsets\":[0,74]},"
		 "\"f\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[74,78]}}");
	if (strlen(hdr) % 2 == 0)
		strcat(hdr, " ");
	int pos[] = { -1, 0, 1, 2, 3, 4, 7, 17, 35, 36 };
	int ok_clean = 0, ok_bad = 0, tried = 0;
	for (size_t c = 0; c < sizeof pos / sizeof *pos; c++)
		for (int inf = 0; inf < 2; inf++) {
			buf b = make(hdr, 78, 0);
			size_t base = b.n - 78; /* odd: the words are not 2-byte aligned */
			for (int i = 0; i < N; i++) { /* finite values with every other exponent */
				uint16_t w = (uint16_t)((i * 2654435761u >> 7) & 0xffff);
				if ((w & 0x7f80) == 0x7f80)
					w ^= 0x0100;
				if (i == pos[c])
					w = inf ? 0xff80 : 0x7fc1;
				b.p[base + 2 * i] = (unsigned char)w, b.p[base + 2 * i + 1] = (unsigned char)(w >> 8);
			}
			char path[] = "/tmp/dsgap_stv_XXXXXX";
			int fd = mkstemp(path);
			bool wr = fd >= 0 && write(fd, b.p, b.n) == (ssize_t)b.n;
			close(fd);
			dg_safetensors st;
			if (wr && !dg_st_open(&st, path)) {
				const dg_st_tensor *t = dg_st_find(&st, "b");
				const void *data = NULL;
				float o[N];
				int lines, lines_f;
				capture_begin();
				int rc = dg_st_bf16_view(&st, t, &data);
				char msg[256];
				snprintf(msg, sizeof msg, "%.200s", capture_end(&lines));
				capture_begin();
				int rf = dg_st_read_f32(&st, t, o);
				const char *msg_f = capture_end(&lines_f);
				tried++;
				if (pos[c] < 0)
					ok_clean += rc == 0 && rf == 0 && data == st.files[0].map + t->offset &&
						    dg_st_bf16_view(&st, dg_st_find(&st, "f"), &data) == 1;
				else
					ok_bad += rc == -1 && rf == -1 && lines == 1 && !strcmp(msg, msg_f);
				dg_st_close(&st);
			}
			unlink(path);
			free(b.p);
		}
	CHECKF(tried == 20 && ok_clean == 2 && ok_bad == 18, "bf16 view: the mapped bytes of a finite tensor (unaligned), "
	       "not of F32; Inf/NaN in any lane or the tail refused as read_f32 does, the same element (%d + %d of %d)",
	       ok_clean, ok_bad, tried);
}

/* ---------------------------------------------------------------------------------------------- */
/* files and indexes                                                                               */

static void write_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(p, 1, n, f) != n)
		dg_die("cannot write %s", path);
	fclose(f);
}

static void expect_open(const char *what, const char *path, const char *want)
{
	dg_safetensors st;
	int lines;
	capture_begin();
	int rc = dg_st_open(&st, path);
	const char *msg = capture_end(&lines);
	if (!want)
		CHECKF(rc == 0 && lines == 0, "%s: opens (%.120s)", what, rc ? msg : "ok");
	else
		CHECKF(rc == -1 && lines == 1 && strstr(msg, want), "%s: one line naming '%s' (got: %.*s)", what,
		       want, (int)(strcspn(msg, "\n") < 120 ? strcspn(msg, "\n") : 120), msg);
	if (!rc)
		dg_st_close(&st);
}

static void files(void)
{
	char dir[] = "/tmp/dsgap_sti_XXXXXX";
	if (!mkdtemp(dir))
		dg_die("mkdtemp");
	char p[512], q[512];
	buf s1 = make("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, 1);
	buf s2 = make("{\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
		      "\"c\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[8,10]}}", 10, 1);
	snprintf(p, sizeof p, "%s/m-1.safetensors", dir);
	write_file(p, s1.p, s1.n);
	snprintf(p, sizeof p, "%s/m-2.safetensors", dir);
	write_file(p, s2.p, s2.n);
	const char *idx_ok = "{\"metadata\":{\"total_size\":14},\"weight_map\":"
			     "{\"a\":\"m-1.safetensors\",\"b\":\"m-2.safetensors\",\"c\":\"m-2.safetensors\"}}";
	snprintf(p, sizeof p, "%s/m.safetensors.index.json", dir);
	write_file(p, idx_ok, strlen(idx_ok));
	dg_safetensors st;
	int rc = dg_st_open(&st, p);
	CHECK("sharded index opens: 3 tensors over 2 files",
	      rc == 0 && st.ntensors == 3 && st.nfiles == 2 && dg_st_find(&st, "c") &&
		      strstr(dg_st_file_of(&st, dg_st_find(&st, "c")), "m-2.safetensors") &&
		      strstr(dg_st_file_of(&st, dg_st_find(&st, "a")), "m-1.safetensors"));
	if (!rc)
		dg_st_close(&st);
	struct { const char *what, *json, *want; } bad[] = {
		{ "index: tensor missing from its shard",
		  "{\"weight_map\":{\"a\":\"m-1.safetensors\",\"b\":\"m-2.safetensors\",\"c\":\"m-2.safetensors\","
		  "\"d\":\"m-1.safetensors\"}}", "tensor 'd' is missing from shard m-1.safetensors" },
		{ "index: shard tensor not in the index",
		  "{\"weight_map\":{\"a\":\"m-1.safetensors\",\"b\":\"m-2.safetensors\"}}",
		  "tensor 'c' in shard m-2.safetensors is not in the index" },
		{ "index: tensor mapped to another shard",
		  "{\"weight_map\":{\"a\":\"m-2.safetensors\",\"b\":\"m-1.safetensors\",\"c\":\"m-2.safetensors\"}}",
		  "tensor 'b' is in shard m-2.safetensors but the index maps it to m-1.safetensors" },
		{ "index: shard outside the directory", "{\"weight_map\":{\"a\":\"../m-1.safetensors\"}}",
		  "leaves the index's directory" },
		{ "index: no weight_map", "{\"metadata\":{}}", "no \"weight_map\" object" },
		{ "index: malformed JSON", "{\"weight_map\":{\"a\":", "malformed JSON" },
		{ "index: missing shard file", "{\"weight_map\":{\"a\":\"nope.safetensors\"}}", "cannot open" },
		{ "index: a shard name with a newline (a two-line error once)",
		  "{\"weight_map\":{\"a\":\"m\\n-1.safetensors\"}}", "the shard name of tensor 'a' holds a control character" },
		{ "index: a tensor mapped twice", "{\"weight_map\":{\"a\":\"m-1.safetensors\",\"a\":\"m-2.safetensors\"}}",
		  "the key \"a\" twice in one object" },
		{ "index: bytes after the JSON", "{\"weight_map\":{\"a\":\"m-1.safetensors\"}} trailing",
		  "bytes after the JSON object, from byte 39" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		snprintf(q, sizeof q, "%s/bad%zu.safetensors.index.json", dir, i);
		write_file(q, bad[i].json, strlen(bad[i].json));
		expect_open(bad[i].what, q, bad[i].want);
		unlink(q);
	}
	snprintf(q, sizeof q, "%s/nonexistent.safetensors", dir);
	expect_open("missing file", q, "cannot open");
	expect_open("a directory", dir, "Is a directory");
	snprintf(q, sizeof q, "%s/fifo.safetensors", dir); /* open() of a FIFO waited for a writer forever */
	DG_ASSERT(mkfifo(q, 0600) == 0);
	expect_open("a FIFO (refused, not waited on)", q, "not a regular file");
	unlink(q);
	snprintf(q, sizeof q, "%s/fifo.safetensors.index.json", dir);
	DG_ASSERT(mkfifo(q, 0600) == 0);
	expect_open("an index JSON that is a FIFO", q, "not a regular file");
	unlink(q);
	snprintf(q, sizeof q, "%s/empty.safetensors", dir);
	write_file(q, "", 0);
	expect_open("empty file", q, "fewer than the 8-byte header length");
	unlink(q);
	unlink(p);
	snprintf(p, sizeof p, "%s/m-1.safetensors", dir);
	unlink(p);
	snprintf(p, sizeof p, "%s/m-2.safetensors", dir);
	unlink(p);
	rmdir(dir);
	free(s1.p);
	free(s2.p);
}

/* ---------------------------------------------------------------------------------------------- */
/* mutation loop                                                                                   */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) /* splitmix64 */
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static const char *const tokens[] = { "{", "}", "[", "]", ",", ":", "\"", "0", "-1", "1e30",
	"18446744073709551616", "\"F32\"", "\"BF16\"", "\"F16\"", "\"I8\"", "null", "true",
	"\"data_offsets\"", "\"shape\"", "\"dtype\"", "\"__metadata__\"", "\\u0000", "\xc3\xa9", "\xff",
	"9007199254740993", "4.5", " " };

/* one mutation of b (header region mostly) */
static void mutate(buf *b, size_t hdr_end)
{
	int kind = (int)(rnd() % 8);
	size_t lim = b->n < hdr_end ? b->n : hdr_end, at = lim ? (size_t)(rnd() % lim) : 0;
	switch (kind) {
	case 0: /* flip bits */
		if (b->n)
			b->p[at] ^= (unsigned char)(1u << (rnd() % 8));
		break;
	case 1: /* random byte */
		if (b->n)
			b->p[at] = (unsigned char)rnd();
		break;
	case 2: /* truncate */
		b->n = b->n ? (size_t)(rnd() % b->n) : 0;
		break;
	case 3: { /* insert a token */
		const char *t = tokens[rnd() % (sizeof tokens / sizeof tokens[0])];
		size_t k = strlen(t);
		b->p = dg_realloc(b->p, b->n + k + 1);
		if (at > b->n)
			at = b->n;
		memmove(b->p + at + k, b->p + at, b->n - at);
		memcpy(b->p + at, t, k);
		b->n += k;
		break;
	}
	case 4: { /* delete a span */
		size_t k = (size_t)(rnd() % 8) + 1;
		if (at + k <= b->n) {
			memmove(b->p + at, b->p + at + k, b->n - at - k);
			b->n -= k;
		}
		break;
	}
	case 5: /* change the length field */
		if (b->n >= 8) {
			uint64_t v = rnd() % 3 == 0 ? rnd() : (uint64_t)(hdr_end - 8) + (rnd() % 17) - 8;
			for (int i = 0; i < 8; i++)
				b->p[i] = (unsigned char)(v >> (8 * i));
		}
		break;
	case 6: /* digit change (offsets, shapes) */
		for (size_t i = at; i < b->n && i < hdr_end; i++)
			if (b->p[i] >= '0' && b->p[i] <= '9') {
				b->p[i] = (unsigned char)('0' + rnd() % 10);
				break;
			}
		break;
	default: /* append data */
		b->p = dg_realloc(b->p, b->n + 5);
		memset(b->p + b->n, 0x55, 4);
		b->n += 4;
		break;
	}
}

static void fuzz(long iterations)
{
	const char *seed = "{\"__metadata__\":{\"format\":\"pt\",\"x\":\"y\"},"
			   "\"blocks.0.w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
			   "\"blocks.0.b\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[24,30]},"
			   "\"h\":{\"dtype\":\"F16\",\"shape\":[],\"data_offsets\":[30,32]},"
			   "\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[32,32]}}";
	buf orig = make(seed, 32, 1);
	size_t hdr_end = orig.n - 32;
	long ok = 0, failed = 0, bad_lines = 0, bad_tiling = 0;
	for (long it = 0; it < iterations; it++) {
		buf b = { dg_malloc(orig.n + 1), orig.n };
		memcpy(b.p, orig.p, orig.n);
		int nm = 1 + (int)(rnd() % 4);
		for (int k = 0; k < nm; k++)
			mutate(&b, hdr_end);
		/* parse from an exact-size heap copy, so that ASan sees any overread */
		unsigned char *exact = dg_malloc(b.n ? b.n : 1);
		memcpy(exact, b.p, b.n);
		dg_st_tensor *t;
		int n, lines;
		capture_begin();
		int rc = dg_st_parse("fuzz.safetensors", exact, b.n, &t, &n);
		capture_end(&lines);
		if (rc == 0) {
			ok++;
			bad_lines += lines != 0;
			/* invariants: sorted unique names, inside the file, tiling the data buffer */
			uint64_t total = 0, lo = UINT64_MAX, hi = 0;
			for (int i = 0; i < n; i++) {
				if (i && strcmp(t[i - 1].name, t[i].name) >= 0)
					bad_tiling++;
				if (t[i].offset + t[i].nbytes > b.n)
					bad_tiling++;
				total += t[i].nbytes;
				lo = t[i].offset < lo ? t[i].offset : lo;
				hi = t[i].offset + t[i].nbytes > hi ? t[i].offset + t[i].nbytes : hi;
			}
			if (n && (hi != b.n || hi - lo != total))
				bad_tiling++;
			dg_st_tensors_free(t, n);
		} else {
			failed++;
			bad_lines += lines != 1;
		}
		free(exact);
		free(b.p);
	}
	free(orig.p);
	CHECKF(bad_lines == 0, "mutation loop: %ld inputs (%ld parsed, %ld refused), each refusal exactly "
	       "one line (%ld not)", iterations, ok, failed, bad_lines);
	CHECKF(bad_tiling == 0, "mutation loop: every accepted header tiles its file (%ld violations)", bad_tiling);
	CHECK("mutation loop reached both outcomes", ok > 0 && failed > 0);
}

int main(int argc, char **argv)
{
	long iterations = argc > 1 ? atol(argv[1]) : 30000;
	capture_init();
	header_rules();
	conversions();
	bf16_views();
	files();
	fuzz(iterations);
	capture_done();
	return test_report();
}
