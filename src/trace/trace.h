/*
 * trace.h: the dsgap trace file (docs/spec.md §6), HDF5 with h5py-readable bf16 Q/K/V.
 *
 *   /q /k /v   (steps, layers, heads, tokens, head_dim) bf16, chunk (1,1,1,tokens,head_dim),
 *              shuffle + deflate; post-norm, post-RoPE, exactly what the attention call received
 *   /step_index /timestep /sigma (steps)   /layer_index (layers)   /head_index (heads)
 *   /grid (3) frames, height, width in tokens    /text_tokens scalar (prefix of joint keys)
 *   root attributes: format="dsgap-trace", version, model, created_by, source, config (JSON)
 *
 * Readers stream one (step, layer, head) unit at a time: memory is bounded by one unit.
 * Every function reports its own error (one line naming the file and the problem) and returns -1.
 */
#ifndef DG_TRACE_H
#define DG_TRACE_H

#include <hdf5.h>
#include <stdint.h>

#define DG_TRACE_FORMAT "dsgap-trace"
#define DG_TRACE_VERSION 1

typedef enum { DG_QKV_Q, DG_QKV_K, DG_QKV_V, DG_QKV_COUNT } dg_qkv;
const char *dg_qkv_name(dg_qkv which); /* "q", "k", "v" */

/* Everything about a trace but its tensors. Arrays are owned by the struct (dg_trace_meta_free). */
typedef struct {
	int steps, layers, heads, tokens, head_dim;
	int grid[3];      /* frames, height, width in tokens; grid product + text_tokens == tokens */
	int text_tokens;  /* 0 for Wan self-attention */
	int *step_index;  /* (steps) denoising step of each stored step */
	int *layer_index; /* (layers) */
	int *head_index;  /* (heads) */
	float *timestep;  /* (steps) */
	float *sigma;     /* (steps) */
	char *model, *source, *created_by, *config; /* config: JSON string */
	int version;
} dg_trace_meta;

void dg_trace_meta_free(dg_trace_meta *m);

/* HDF5's automatic error printing off in the calling thread: dsgap reports every HDF5 failure itself,
 * in one line. HDF5 keeps that setting per thread (a reader thread or worker that has not called this
 * prints HDF5's stack), so every entry point that touches HDF5 calls it; cheap after the first call. */
void dg_h5_quiet(void);

/* An open trace for reading. */
typedef struct {
	char *path;
	dg_trace_meta meta;
	hid_t file;
	hid_t dset[DG_QKV_COUNT];
	int raw_bf16;        /* file type is dsgap's bf16: read raw words and convert ourselves */
	uint16_t *scratch;   /* (tokens, head_dim) */
	long long file_size; /* bytes on disk */
	const char *dtype;   /* "bf16", "f16" or "f32" */
	hid_t mem_type;      /* what H5Dread converts to: the file's bf16 type (raw) or native float */
} dg_trace;

/* Open and validate PATH: format attribute, version, every dataset present with the right rank,
 * consistent shapes and a floating-point type. */
int dg_trace_open(dg_trace *t, const char *path);
/* Read one unit of Q, K or V into out (tokens, head_dim) as float32. Rejects NaN/Inf with an error
 * naming the file, dataset and unit. s, l, h are positions in the file (0-based), not indices;
 * errors name the unit by the trace's own indices (/step_index, /layer_index, /head_index). */
int dg_trace_read(dg_trace *t, dg_qkv which, int s, int l, int h, float *out);
void dg_trace_close(dg_trace *t);

/* A trace being written: to PATH.tmp.PID, renamed to PATH by dg_trace_writer_finish. */
typedef struct {
	char *path, *tmp;
	dg_trace_meta meta; /* copy */
	hid_t file;
	hid_t dset[DG_QKV_COUNT];
	hid_t bf16;             /* dsgap's bf16 file type */
	struct dg_chunk_pipe *pipe; /* units compressed on worker threads (trace_chunks.h) */
	unsigned char *written; /* (3, steps, layers, heads): finish refuses a trace with holes */
} dg_trace_writer;

/* Create the file with every dataset and attribute of meta (copied). */
int dg_trace_writer_open(dg_trace_writer *w, const char *path, const dg_trace_meta *meta);
/* Write one unit (tokens, head_dim) as bf16 (round to nearest even), shuffled and deflated on a
 * worker thread and written a few units later: a write failure is reported by a later put or by
 * finish (each -1, the file then left to dg_trace_writer_abort). */
int dg_trace_writer_put(dg_trace_writer *w, dg_qkv which, int s, int l, int h, const float *data);
/* Check every unit was put, close and rename to the final path. */
int dg_trace_writer_finish(dg_trace_writer *w);
/* Close and remove the temporary file. */
void dg_trace_writer_abort(dg_trace_writer *w);

#endif
