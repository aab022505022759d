/*
 * safetensors.h: a validating, mmap-based reader of safetensors checkpoints (single files and
 * sharded sets described by a `*.safetensors.index.json`), as written by huggingface/safetensors.
 *
 *   bytes 0..7      N, little-endian u64: length of the JSON header
 *   bytes 8..8+N-1  {"name": {"dtype": "BF16", "shape": [a, b], "data_offsets": [begin, end]},
 *                    ..., "__metadata__": {"k": "v"}}   (padded with spaces)
 *   bytes 8+N..     the data buffer; a tensor's bytes are [8+N+begin, 8+N+end)
 *
 * Validation (dg_st_parse): N <= 100,000,000 and 8+N <= file size; the header is valid UTF-8 JSON,
 * one object, nothing but spaces after it; every tensor has a dtype dsgap reads (F32, BF16, F16),
 * a shape of at most 8 non-negative dimensions and data_offsets [begin, end] with
 * end - begin == prod(shape) * dtype size; sorted by offset the tensors tile the data buffer from 0
 * without holes or overlaps, and it ends exactly at the end of the file; names are unique and
 * non-empty; __metadata__ is a flat string map. Every failure is one line naming the file and the
 * tensor or byte offset, and the reader never crashes on malformed input (tests/dit/test_safetensors.c
 * mutates headers in a loop; tests/dit/fuzz_safetensors.c is a libFuzzer target).
 *
 * Tensors are converted at load: dg_st_read_f32 (F32/BF16/F16 -> float, exact) or dg_st_read_bf16
 * (raw BF16 words; F32/F16 rounded to nearest even).
 */
#ifndef DG_SAFETENSORS_H
#define DG_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

typedef enum { DG_ST_F32, DG_ST_BF16, DG_ST_F16, DG_ST_DTYPE_COUNT } dg_st_dtype;
const char *dg_st_dtype_name(dg_st_dtype t); /* "F32", "BF16", "F16" */
int dg_st_dtype_size(dg_st_dtype t);         /* bytes per element */

#define DG_ST_MAX_DIMS 8
#define DG_ST_MAX_HEADER 100000000ull

typedef struct {
	char *name;
	dg_st_dtype dtype;
	int ndim;
	int64_t shape[DG_ST_MAX_DIMS];
	uint64_t offset; /* absolute byte offset of the tensor in its file */
	uint64_t nbytes;
	int file;        /* index into dg_safetensors.files */
} dg_st_tensor;

/*
 * Parse and validate the header of a safetensors file held in memory: data has size bytes (the
 * whole file). label names the file in errors. On success *out (ntensors entries, sorted by name,
 * file = 0; free with dg_st_tensors_free) and returns 0; else reports one line, returns -1.
 */
int dg_st_parse(const char *label, const unsigned char *data, size_t size, dg_st_tensor **out,
		int *ntensors);
void dg_st_tensors_free(dg_st_tensor *t, int n);

typedef struct {
	char *path;                /* the mapped file */
	const unsigned char *map;  /* whole file, read-only */
	size_t size;
} dg_st_file;

typedef struct {
	char *path;           /* what was opened: a .safetensors file or an index */
	int nfiles;
	dg_st_file *files;
	int ntensors;
	dg_st_tensor *tensors; /* sorted by name */
} dg_safetensors;

/*
 * Open PATH: a .safetensors file, or a *.safetensors.index.json (shards resolved relative to the
 * index's directory; every tensor of the weight_map must be in its shard, and every tensor of a
 * shard in the weight_map). Returns 0, or -1 after one line.
 */
int dg_st_open(dg_safetensors *st, const char *path);
void dg_st_close(dg_safetensors *st);

/* The tensor called name, or NULL. */
const dg_st_tensor *dg_st_find(const dg_safetensors *st, const char *name);
int64_t dg_st_numel(const dg_st_tensor *t);
/* The file a tensor lives in (for messages). */
const char *dg_st_file_of(const dg_safetensors *st, const dg_st_tensor *t);
/* "[a, b, c]" into buf. */
const char *dg_st_shape_str(const int64_t *shape, int ndim, char *buf, size_t size);

/*
 * Convert a tensor into out (numel entries). dg_st_read_f32 rejects NaN/Inf with an error naming
 * the tensor, file and element; returns 0 or -1.
 */
int dg_st_read_f32(const dg_safetensors *st, const dg_st_tensor *t, float *out);
void dg_st_read_bf16(const dg_safetensors *st, const dg_st_tensor *t, uint16_t *out);
/* A BF16 tensor's own bytes, without a conversion: *data = its numel little-endian bf16 words in the
 * mapped file (not necessarily 2-byte aligned), after the check of dg_st_read_f32 (every value
 * finite, else the same error). Returns 0, -1 after that error, or 1 (no view: not BF16). */
int dg_st_bf16_view(const dg_safetensors *st, const dg_st_tensor *t, const void **data);

/* IEEE half (binary16) -> float, exact (subnormals, Inf, NaN included). */
float dg_f16_to_f32(uint16_t h);

#endif
