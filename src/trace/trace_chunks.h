/*
 * trace_chunks.h: the trace writer's chunk pipe. A unit of 2-byte words (one chunk of /q, /k or /v)
 * is shuffled and deflated (level 1) on worker threads exactly as HDF5's shuffle and deflate filters
 * would, and handed back to the caller's thread, in the order the units were submitted, to be
 * written raw (H5Dwrite_chunk). So a capture compresses on every core while HDF5, which is not
 * thread-safe here, is only ever called from the caller's thread: its writes and their failures
 * (a full disk) happen where they did before, only a few units later.
 *
 *   p = dg_chunk_pipe_new(unit_bytes, write, ctx);
 *   for each unit: fill dg_chunk_pipe_slot(p) (unit_bytes), then dg_chunk_pipe_submit(p, &tag, sizeof tag)
 *   dg_chunk_pipe_drain(p); dg_chunk_pipe_free(p);
 *
 * write(ctx, tag, z, zlen) runs on the caller's thread inside slot, submit and drain; it returns 0 or
 * -1 after reporting. After a failure the pipe writes nothing more: submit and drain return -1 from
 * then on (the caller aborts its file). Workers: the online CPUs, at most 8; units in flight: twice
 * that, fewer where their buffers would pass 512 MiB (at least 2).
 */
#ifndef DG_TRACE_CHUNKS_H
#define DG_TRACE_CHUNKS_H

#include <stddef.h>

typedef int (*dg_chunk_write_fn)(void *ctx, const void *tag, const void *z, size_t zlen);
typedef struct dg_chunk_pipe dg_chunk_pipe;

/* unit_bytes: even (2-byte words); NULL (reported) when no worker thread can be started. */
dg_chunk_pipe *dg_chunk_pipe_new(size_t unit_bytes, dg_chunk_write_fn write, void *ctx);
/* The buffer (unit_bytes) of the next unit; waits for the oldest unit (and writes it) when every
 * buffer is in flight. */
void *dg_chunk_pipe_slot(dg_chunk_pipe *p);
/* Queue the unit filled into the last slot, with its tag (tag_bytes <= 64, copied for write). */
int dg_chunk_pipe_submit(dg_chunk_pipe *p, const void *tag, size_t tag_bytes);
/* Wait for every queued unit and write them: 0, or -1 when a write (or a compression) failed. */
int dg_chunk_pipe_drain(dg_chunk_pipe *p);
/* Stop the workers and free the pipe; units not yet written are dropped. */
void dg_chunk_pipe_free(dg_chunk_pipe *p);

#endif
