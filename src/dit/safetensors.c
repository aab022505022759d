/*
 * safetensors.c: the validating safetensors reader (see safetensors.h for the format and the rules).
 * Header JSON through cJSON; files are mmap'ed read-only and tensors converted on copy-out.
 */
#include "dit/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "util/json.h"
#include "util/util.h"

static const char *dtype_names[DG_ST_DTYPE_COUNT] = { "F32", "BF16", "F16" };
static const int dtype_sizes[DG_ST_DTYPE_COUNT] = { 4, 2, 2 };

/* the other dtypes of the format: known, but not read by dsgap */
static const char *const other_dtypes[] = { "BOOL", "F4", "F6_E2M3", "F6_E3M2", "U8", "I8",
	"F8_E5M2", "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "I16", "U16", "I32", "U32",
	"C64", "F64", "I64", "U64", NULL };

const char *dg_st_dtype_name(dg_st_dtype t)
{
	DG_ASSERT(t >= 0 && t < DG_ST_DTYPE_COUNT);
	return dtype_names[t];
}

int dg_st_dtype_size(dg_st_dtype t)
{
	DG_ASSERT(t >= 0 && t < DG_ST_DTYPE_COUNT);
	return dtype_sizes[t];
}

/* ---------------------------------------------------------------------------------------------- */
/* helpers                                                                                        */

/* A name made printable for a one-line message (control bytes as '?', at most 120 bytes). */
static const char *printable(const char *s, char *buf, size_t size)
{
	size_t i = 0;
	for (; s[i] && i + 4 < size && i < 120; i++)
		buf[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
	if (s[i] && i + 4 < size)
		buf[i++] = '.', buf[i++] = '.', buf[i++] = '.';
	buf[i] = 0;
	return buf;
}

#define NAME(s) printable((s), namebuf, sizeof namebuf)

const char *dg_st_shape_str(const int64_t *shape, int ndim, char *buf, size_t size)
{
	size_t o = 0;
	o += snprintf(buf + o, size - o, "[");
	for (int i = 0; i < ndim && o < size; i++)
		o += snprintf(buf + o, size - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
	if (o < size)
		snprintf(buf + o, size - o, "]");
	return buf;
}

/* Offset of the first byte that is not valid UTF-8 (or is NUL), or n if all are valid. */
static size_t utf8_invalid_at(const unsigned char *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		unsigned c = s[i];
		if (c == 0)
			return i;
		if (c < 0x80) {
			i++;
			continue;
		}
		int len;
		unsigned min;
		if (c >= 0xc2 && c <= 0xdf)
			len = 2, min = 0x80;
		else if (c >= 0xe0 && c <= 0xef)
			len = 3, min = 0x800;
		else if (c >= 0xf0 && c <= 0xf4)
			len = 4, min = 0x10000;
		else
			return i;
		if (i + len > n)
			return i;
		unsigned cp = c & (0x7f >> len);
		for (int k = 1; k < len; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return i;
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return i;
		i += len;
	}
	return n;
}

/* A JSON number that is an integer in [0, 2^53]. */
static int json_u64(const cJSON *j, uint64_t *v)
{
	if (!cJSON_IsNumber(j))
		return -1;
	double d = j->valuedouble;
	if (!(d >= 0 && d <= 9007199254740992.0) || d != floor(d))
		return -1;
	*v = (uint64_t)d;
	return 0;
}

void dg_st_tensors_free(dg_st_tensor *t, int n)
{
	if (!t)
		return;
	for (int i = 0; i < n; i++)
		free(t[i].name);
	free(t);
}

static int by_offset(const void *a, const void *b)
{
	const dg_st_tensor *x = a, *y = b;
	uint64_t xe = x->offset + x->nbytes, ye = y->offset + y->nbytes;
	if (x->offset != y->offset)
		return x->offset < y->offset ? -1 : 1;
	if (xe != ye)
		return xe < ye ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const dg_st_tensor *)a)->name, ((const dg_st_tensor *)b)->name);
}

/* ---------------------------------------------------------------------------------------------- */
/* header parsing                                                                                  */

/* One tensor entry of the header. Offsets are relative to the data buffer here. */
static int parse_entry(const char *label, const cJSON *e, dg_st_tensor *t)
{
	char namebuf[128], sbuf[160];
	const char *name = e->string;
	if (!name || !name[0])
		return dg_error("%s: tensor with an empty name in the header", label);
	if (!cJSON_IsObject(e))
		return dg_error("%s: tensor '%s': header entry is not an object", label, NAME(name));
	const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
	const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
	const cJSON *of = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
	if (!cJSON_IsString(dt) || !dt->valuestring)
		return dg_error("%s: tensor '%s': missing or non-string \"dtype\"", label, NAME(name));
	int k = 0;
	while (k < DG_ST_DTYPE_COUNT && strcmp(dt->valuestring, dtype_names[k]))
		k++;
	if (k == DG_ST_DTYPE_COUNT) {
		char dbuf[64];
		for (int o = 0; other_dtypes[o]; o++)
			if (!strcmp(dt->valuestring, other_dtypes[o]))
				return dg_error("%s: tensor '%s' has dtype %s, which dsgap does not read "
						"(F32, BF16, F16)", label, NAME(name), other_dtypes[o]);
		return dg_error("%s: tensor '%s' has unknown dtype '%s' (dsgap reads F32, BF16, F16)",
				label, NAME(name), printable(dt->valuestring, dbuf, sizeof dbuf));
	}
	t->dtype = (dg_st_dtype)k;
	if (!cJSON_IsArray(sh))
		return dg_error("%s: tensor '%s': missing or non-array \"shape\"", label, NAME(name));
	int nd = cJSON_GetArraySize(sh);
	if (nd > DG_ST_MAX_DIMS)
		return dg_error("%s: tensor '%s' has %d dimensions (at most %d)", label, NAME(name), nd,
				DG_ST_MAX_DIMS);
	t->ndim = nd;
	uint64_t numel = 1;
	int d = 0;
	for (const cJSON *x = sh->child; x; x = x->next, d++) {
		uint64_t v;
		if (json_u64(x, &v) || v > INT64_MAX)
			return dg_error("%s: tensor '%s': shape entry %d is not a non-negative integer", label,
					NAME(name), d);
		t->shape[d] = (int64_t)v;
		if (__builtin_mul_overflow(numel, v, &numel))
			return dg_error("%s: tensor '%s': shape overflows 64 bits", label, NAME(name));
	}
	uint64_t bytes;
	if (__builtin_mul_overflow(numel, (uint64_t)dtype_sizes[k], &bytes))
		return dg_error("%s: tensor '%s': shape overflows 64 bits", label, NAME(name));
	uint64_t b, en;
	if (!cJSON_IsArray(of) || cJSON_GetArraySize(of) != 2 || json_u64(of->child, &b) ||
	    json_u64(of->child->next, &en))
		return dg_error("%s: tensor '%s': \"data_offsets\" must be [begin, end], two "
				"non-negative integers", label, NAME(name));
	if (en < b)
		return dg_error("%s: tensor '%s': data_offsets [%llu, %llu] end before they begin", label,
				NAME(name), (unsigned long long)b, (unsigned long long)en);
	if (en - b != bytes)
		return dg_error("%s: tensor '%s': shape %s of %s is %llu bytes but data_offsets [%llu, %llu] "
				"span %llu", label, NAME(name), dg_st_shape_str(t->shape, nd, sbuf, sizeof sbuf),
				dtype_names[k], (unsigned long long)bytes, (unsigned long long)b,
				(unsigned long long)en, (unsigned long long)(en - b));
	t->offset = b;
	t->nbytes = bytes;
	t->name = dg_strdup(name);
	return 0;
}

int dg_st_parse(const char *label, const unsigned char *data, size_t size, dg_st_tensor **out,
		int *ntensors)
{
	char namebuf[128];
	*out = NULL;
	*ntensors = 0;
	if (size < 8)
		return dg_error("%s: not a safetensors file: %zu bytes, fewer than the 8-byte header length",
				label, size);
	uint64_t n = 0;
	for (int i = 7; i >= 0; i--)
		n = n << 8 | data[i];
	if (n > DG_ST_MAX_HEADER)
		return dg_error("%s: header length %llu (bytes 0-7) is over the %llu-byte limit: not a "
				"safetensors file?", label, (unsigned long long)n, DG_ST_MAX_HEADER);
	if (n == 0 || 8 + n > size)
		return dg_error("%s: header length %llu (bytes 0-7) %s the file (%zu bytes): truncated or "
				"not a safetensors file", label, (unsigned long long)n,
				n ? "runs past the end of" : "is empty in", size);
	const char *hdr = (const char *)data + 8;
	size_t bad = utf8_invalid_at(data + 8, n);
	if (bad < n)
		return dg_error("%s: header is not valid UTF-8 JSON at byte %llu", label,
				(unsigned long long)(8 + bad));
	const char *end = NULL;
	cJSON *root = cJSON_ParseWithLengthOpts(hdr, n, &end, 0);
	if (!root) {
		const char *e = cJSON_GetErrorPtr();
		size_t at = e && e >= hdr && e <= hdr + n ? (size_t)(e - hdr) : 0;
		return dg_error("%s: malformed JSON header near byte %llu", label, (unsigned long long)(8 + at));
	}
	int rc = -1, count = 0, cap = 0;
	dg_st_tensor *t = NULL;
	size_t at = end ? (size_t)(end - hdr) : n;
	while (at < n && strchr(" \t\r\n", hdr[at]))
		at++;
	if (at < n) {
		dg_error("%s: unexpected bytes after the JSON header at byte %llu", label,
			 (unsigned long long)(8 + at));
		goto done;
	}
	if (!cJSON_IsObject(root)) {
		dg_error("%s: header is not a JSON object", label);
		goto done;
	}
	const cJSON *dup = dg_json_twice(root);
	if (dup) { /* cJSON would read the first, Python's safetensors refuses the header */
		dg_error("%s: the header has the key \"%.100s\" twice in one object", label,
			 dg_control_at(dup->string) < 0 ? dup->string : "(with a control character)");
		goto done;
	}
	for (const cJSON *e = root->child; e; e = e->next) {
		if (e->string && !strcmp(e->string, "__metadata__")) {
			if (!cJSON_IsObject(e)) {
				dg_error("%s: __metadata__ is not an object", label);
				goto done;
			}
			for (const cJSON *m = e->child; m; m = m->next)
				if (!cJSON_IsString(m)) {
					dg_error("%s: __metadata__ entry '%s' is not a string", label,
						 NAME(m->string ? m->string : ""));
					goto done;
				}
			continue;
		}
		if (count == cap) {
			cap = cap ? 2 * cap : 64;
			t = dg_realloc(t, (size_t)cap * sizeof *t);
		}
		memset(&t[count], 0, sizeof t[count]);
		if (parse_entry(label, e, &t[count]))
			goto done;
		count++;
	}
	/* the data buffer: tensors tile it from 0, without holes or overlaps, to the end of the file */
	uint64_t base = 8 + n, data_len = size - base, expect = 0;
	if (count)
		qsort(t, count, sizeof *t, by_offset);
	for (int i = 0; i < count; i++) {
		if (t[i].offset < expect && !strcmp(t[i].name, t[i - 1].name)) {
			dg_error("%s: tensor '%s' is listed twice in the header", label, NAME(t[i].name));
			goto done;
		}
		if (t[i].offset < expect) {
			char prev[128];
			dg_error("%s: tensor '%s' (data bytes %llu-%llu) overlaps tensor '%s'", label,
				 NAME(t[i].name), (unsigned long long)t[i].offset,
				 (unsigned long long)(t[i].offset + t[i].nbytes),
				 printable(t[i - 1].name, prev, sizeof prev));
			goto done;
		}
		if (t[i].offset + t[i].nbytes > data_len) { /* before a hole: the offsets may be what is wrong */
			dg_error("%s: tensor '%s' has data_offsets [%llu, %llu], past the end of the data buffer "
				 "(%llu bytes; the file: %zu): truncated, or its data_offsets are wrong", label,
				 NAME(t[i].name), (unsigned long long)t[i].offset,
				 (unsigned long long)(t[i].offset + t[i].nbytes), (unsigned long long)data_len, size);
			goto done;
		}
		if (t[i].offset > expect) {
			dg_error("%s: hole in the data buffer before tensor '%s' (data bytes %llu-%llu unused)",
				 label, NAME(t[i].name), (unsigned long long)expect,
				 (unsigned long long)t[i].offset);
			goto done;
		}
		expect = t[i].offset + t[i].nbytes;
	}
	if (expect != data_len) {
		dg_error("%s: %llu bytes after the last tensor (from byte %llu): the data buffer must end "
			 "the file", label, (unsigned long long)(data_len - expect),
			 (unsigned long long)(base + expect));
		goto done;
	}
	for (int i = 0; i < count; i++)
		t[i].offset += base;
	if (count) /* names are unique: a key twice was refused above */
		qsort(t, count, sizeof *t, by_name);
	rc = 0;
done:
	cJSON_Delete(root);
	if (rc) {
		dg_st_tensors_free(t, count);
		return -1;
	}
	*out = t;
	*ntensors = count;
	return 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* files and indexes                                                                               */

static int map_file(dg_st_file *f, const char *path)
{
	memset(f, 0, sizeof *f);
	int fd = dg_open_input(path);
	if (fd < 0)
		return dg_error("cannot open %s: %s", path, dg_strerror(errno));
	struct stat st;
	if (fstat(fd, &st)) {
		close(fd);
		return dg_error("cannot read %s: %s", path, strerror(errno));
	}
	f->path = dg_strdup(path);
	f->size = (size_t)st.st_size;
	if (f->size == 0) {
		close(fd);
		return 0; /* dg_st_parse reports it */
	}
	void *m = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED) {
		free(f->path);
		f->path = NULL;
		return dg_error("cannot map %s: %s", path, strerror(errno));
	}
	f->map = m;
	return 0;
}

static void unmap_file(dg_st_file *f)
{
	if (f->map)
		munmap((void *)f->map, f->size);
	free(f->path);
	memset(f, 0, sizeof *f);
}

void dg_st_close(dg_safetensors *st)
{
	for (int i = 0; i < st->nfiles; i++)
		unmap_file(&st->files[i]);
	free(st->files);
	dg_st_tensors_free(st->tensors, st->ntensors);
	free(st->path);
	memset(st, 0, sizeof *st);
}

static int ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && !strcmp(s + a - b, suffix);
}

static int open_single(dg_safetensors *st, const char *path)
{
	st->files = dg_calloc(1, sizeof *st->files);
	if (map_file(&st->files[0], path))
		return -1;
	st->nfiles = 1;
	return dg_st_parse(path, st->files[0].map, st->files[0].size, &st->tensors, &st->ntensors);
}

static char *read_text(const char *path, size_t max, size_t *len)
{
	int fd = dg_open_input(path);
	FILE *f = fd < 0 ? NULL : fdopen(fd, "rb");
	if (!f) {
		dg_error("cannot open %s: %s", path, dg_strerror(errno));
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	char *buf = dg_malloc(max + 1);
	size_t n = fread(buf, 1, max + 1, f);
	int err = ferror(f);
	fclose(f);
	if (err || n > max) {
		dg_error(err ? "cannot read %s" : "%s: larger than %zu bytes: not an index", path, max);
		free(buf);
		return NULL;
	}
	buf[n] = 0;
	*len = n;
	return buf;
}

typedef struct {
	const char *tensor, *shard;
} map_entry;

static int by_entry_name(const void *a, const void *b)
{
	return strcmp(((const map_entry *)a)->tensor, ((const map_entry *)b)->tensor);
}

static int open_index(dg_safetensors *st, const char *path)
{
	char namebuf[128];
	size_t len;
	char *text = read_text(path, 64u << 20, &len);
	if (!text)
		return -1;
	const char *end = NULL;
	cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
	int rc = -1, nshards = 0, nmap = 0;
	map_entry *map = NULL;
	char **shards = NULL;
	if (!root) {
		const char *e = cJSON_GetErrorPtr();
		dg_error("%s: malformed JSON near byte %zu", path,
			 e && e >= text && e <= text + len ? (size_t)(e - text) : (size_t)0);
		goto done;
	}
	end += end ? strspn(end, " \t\r\n") : 0;
	if (end && end < text + len) {
		dg_error("%s: bytes after the JSON object, from byte %zu", path, (size_t)(end - text));
		goto done;
	}
	const cJSON *dup = dg_json_twice(root);
	if (dup) {
		dg_error("%s: the key \"%.100s\" twice in one object", path,
			 dg_control_at(dup->string) < 0 ? dup->string : "(with a control character)");
		goto done;
	}
	const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
	if (!cJSON_IsObject(wm)) {
		dg_error("%s: no \"weight_map\" object: not a safetensors index", path);
		goto done;
	}
	int cap = cJSON_GetArraySize(wm);
	map = dg_malloc((size_t)(cap ? cap : 1) * sizeof *map);
	shards = dg_malloc((size_t)(cap ? cap : 1) * sizeof *shards);
	for (const cJSON *e = wm->child; e; e = e->next) {
		if (!cJSON_IsString(e) || !e->valuestring[0] || !e->string || !e->string[0]) {
			dg_error("%s: weight_map entry '%s' is not a non-empty file name", path,
				 NAME(e->string ? e->string : ""));
			goto done;
		}
		const char *s = e->valuestring;
		if (dg_control_at(s) >= 0) { /* it goes into messages and paths: one line */
			dg_error("%s: the shard name of tensor '%s' holds a control character", path, NAME(e->string));
			goto done;
		}
		if (s[0] == '/' || strstr(s, "..")) {
			dg_error("%s: shard name '%s' leaves the index's directory", path, NAME(s));
			goto done;
		}
		map[nmap++] = (map_entry){ e->string, s };
		int k = 0;
		while (k < nshards && strcmp(shards[k], s))
			k++;
		if (k == nshards)
			shards[nshards++] = (char *)s;
	}
	if (nmap == 0) {
		dg_error("%s: the weight_map is empty", path);
		goto done;
	}
	qsort(map, nmap, sizeof *map, by_entry_name);
	for (int i = 1; i < nmap; i++)
		if (!strcmp(map[i].tensor, map[i - 1].tensor)) {
			dg_error("%s: tensor '%s' appears twice in the weight_map", path, NAME(map[i].tensor));
			goto done;
		}
	/* directory of the index */
	char *dir = dg_strdup(path);
	char *slash = strrchr(dir, '/');
	if (slash)
		slash[1] = 0;
	else
		dir[0] = 0;
	st->files = dg_calloc(nshards, sizeof *st->files);
	int total = 0, tcap = 0;
	for (int k = 0; k < nshards; k++) {
		size_t plen = strlen(dir) + strlen(shards[k]) + 1;
		char *sp = dg_malloc(plen);
		snprintf(sp, plen, "%s%s", dir, shards[k]);
		int r = map_file(&st->files[k], sp);
		free(sp);
		if (r) {
			free(dir);
			goto done;
		}
		st->nfiles = k + 1;
		dg_st_tensor *t;
		int nt;
		if (dg_st_parse(st->files[k].path, st->files[k].map, st->files[k].size, &t, &nt)) {
			free(dir);
			goto done;
		}
		for (int i = 0; i < nt; i++) {
			map_entry key = { t[i].name, NULL };
			map_entry *m = bsearch(&key, map, nmap, sizeof *map, by_entry_name);
			if (!m || strcmp(m->shard, shards[k])) {
				dg_error(m ? "%s: tensor '%s' is in shard %s but the index maps it to %s"
					   : "%s: tensor '%s' in shard %s is not in the index%s",
					 path, NAME(t[i].name), shards[k], m ? m->shard : "");
				dg_st_tensors_free(t, nt);
				free(dir);
				goto done;
			}
			t[i].file = k;
		}
		if (total + nt > tcap) {
			tcap = 2 * (total + nt);
			st->tensors = dg_realloc(st->tensors, (size_t)tcap * sizeof *st->tensors);
		}
		memcpy(st->tensors + total, t, (size_t)nt * sizeof *t);
		free(t); /* names now owned by st->tensors */
		total += nt;
		st->ntensors = total;
	}
	free(dir);
	if (total)
		qsort(st->tensors, total, sizeof *st->tensors, by_name);
	for (int i = 0; i < nmap; i++) {
		dg_st_tensor key = { .name = (char *)map[i].tensor };
		if (!bsearch(&key, st->tensors, total, sizeof key, by_name)) {
			dg_error("%s: tensor '%s' is missing from shard %s", path, NAME(map[i].tensor),
				 map[i].shard);
			goto done;
		}
	}
	rc = 0;
done:
	free(map);
	free(shards);
	cJSON_Delete(root);
	free(text);
	return rc;
}

int dg_st_open(dg_safetensors *st, const char *path)
{
	memset(st, 0, sizeof *st);
	st->path = dg_strdup(path);
	int rc = ends_with(path, ".json") ? open_index(st, path) : open_single(st, path);
	if (rc)
		dg_st_close(st);
	return rc;
}

const dg_st_tensor *dg_st_find(const dg_safetensors *st, const char *name)
{
	if (!st->ntensors)
		return NULL;
	dg_st_tensor key = { .name = (char *)name };
	return bsearch(&key, st->tensors, st->ntensors, sizeof key, by_name);
}

int64_t dg_st_numel(const dg_st_tensor *t)
{
	int64_t n = 1;
	for (int i = 0; i < t->ndim; i++)
		n *= t->shape[i];
	return n;
}

const char *dg_st_file_of(const dg_safetensors *st, const dg_st_tensor *t)
{
	return st->files[t->file].path;
}

/* ---------------------------------------------------------------------------------------------- */
/* conversion                                                                                      */

float dg_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
	if (exp == 0x1f) {
		u = sign | 0x7f800000u | (man << 13); /* Inf or NaN */
	} else if (exp) {
		u = sign | ((exp + 112) << 23) | (man << 13);
	} else if (man) { /* subnormal: normalise */
		int e = -1;
		do {
			e++;
			man <<= 1;
		} while (!(man & 0x400));
		u = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ff) << 13);
	} else {
		u = sign;
	}
	union { uint32_t u; float f; } x = { .u = u };
	return x.f;
}

static float load_elem(const unsigned char *p, dg_st_dtype t)
{
	if (t == DG_ST_F32) {
		uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
		union { uint32_t u; float f; } x = { .u = u };
		return x.f;
	}
	uint16_t h = (uint16_t)(p[0] | p[1] << 8);
	return t == DG_ST_BF16 ? dg_bf16_to_f32(h) : dg_f16_to_f32(h);
}

int dg_st_read_f32(const dg_safetensors *st, const dg_st_tensor *t, float *out)
{
	const unsigned char *p = st->files[t->file].map + t->offset;
	int64_t n = dg_st_numel(t);
	int es = dtype_sizes[t->dtype];
	int64_t bad = -1;
	for (int64_t i = 0; i < n; i++) {
		out[i] = load_elem(p + i * es, t->dtype);
		if (!isfinite(out[i]) && bad < 0)
			bad = i;
	}
	if (bad >= 0) {
		char namebuf[128];
		return dg_error("%s: tensor '%s' holds a non-finite value (element %lld)",
				dg_st_file_of(st, t), NAME(t->name), (long long)bad);
	}
	return 0;
}

/* the first of n little-endian bf16 words at p that is Inf or NaN (exponent bits all ones), or -1;
 * four words at a time (a 16-bit lane of (v & E) ^ E is zero where they are), a 14B checkpoint's
 * 28.6 GB at memory speed */
static int64_t bf16_first_nonfinite(const unsigned char *p, int64_t n)
{
	const uint64_t E = 0x7f807f807f807f80ull, ONE = 0x0001000100010001ull, HI = 0x8000800080008000ull;
	int64_t i = 0;
	for (; i + 4 <= n; i += 4) {
		uint64_t v;
		memcpy(&v, p + 2 * i, 8);
		uint64_t z = (v & E) ^ E;
		if ((z - ONE) & ~z & HI)
			break;
	}
	for (; i < n; i++)
		if ((p[2 * i + 1] & 0x7f) == 0x7f && (p[2 * i] & 0x80))
			return i;
	return -1;
}

int dg_st_bf16_view(const dg_safetensors *st, const dg_st_tensor *t, const void **data)
{
	if (t->dtype != DG_ST_BF16)
		return 1;
	const unsigned char *p = st->files[t->file].map + t->offset;
	int64_t bad = bf16_first_nonfinite(p, dg_st_numel(t));
	if (bad >= 0) {
		char namebuf[128];
		return dg_error("%s: tensor '%s' holds a non-finite value (element %lld)", dg_st_file_of(st, t),
				NAME(t->name), (long long)bad);
	}
	*data = p;
	return 0;
}

void dg_st_read_bf16(const dg_safetensors *st, const dg_st_tensor *t, uint16_t *out)
{
	const unsigned char *p = st->files[t->file].map + t->offset;
	int64_t n = dg_st_numel(t);
	int es = dtype_sizes[t->dtype];
	for (int64_t i = 0; i < n; i++)
		out[i] = t->dtype == DG_ST_BF16 ? (uint16_t)(p[2 * i] | p[2 * i + 1] << 8)
						: dg_f32_to_bf16(load_elem(p + i * es, t->dtype));
}
